#!/usr/bin/env bash
# What a 1.3 GB filter costs Redis's main thread in the commands that answer from counts and
# sizes: BF.RESERVE big 0.0001 400000000 (one item added), then the time of one BF.CARD,
# BF.INFO, MEMORY USAGE and UNLINK each, as redis-py sees it on loopback. They read no
# bits: fractions of a millisecond (a pass over the filter's bits took about 0.25 s).
# Needs about 1.4 GB of free memory. Usage: scripts/redis-big-key.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-setup.sh
cargo build --release --quiet -p bloomery-redis
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --loadmodule "$PWD/target/release/libbloomery_redis.so" MAX_FILTER_MEMORY 0 --daemonize yes --logfile "$dir/log"
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
target/venv/bin/python - "$port" <<'PY'
import sys, time
import redis

r = redis.Redis(port=int(sys.argv[1]))
r.execute_command("BF.RESERVE", "big", "0.0001", "400000000")
r.execute_command("BF.ADD", "big", "x")
print(f"filter: {r.execute_command('MEMORY', 'USAGE', 'big') / 1e9:.2f} GB")
for command in (["BF.CARD", "big"], ["BF.INFO", "big"], ["MEMORY", "USAGE", "big"], ["UNLINK", "big"]):
    started = time.perf_counter()
    r.execute_command(*command)
    print(f"{' '.join(command[:-1])}: {1000 * (time.perf_counter() - started):.2f} ms")
PY
