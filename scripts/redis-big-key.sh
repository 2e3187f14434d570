#!/usr/bin/env bash
# What a 1.3 GB filter costs Redis's main thread in the commands that answer from counts and
# sizes: BF.RESERVE big 0.0001 400000000 (one item added), then the time of one BF.CARD,
# BF.INFO, MEMORY USAGE and UNLINK each, as redis-py sees it on loopback. They read no
# bits: fractions of a millisecond. MODULE is another build of the module to measure
# instead (for example one built at eac38a0, before these commands stopped reading every
# bit: `git worktree add /tmp/old eac38a0 && (cd /tmp/old && cargo build --release -p
# bloomery-redis)`, then `scripts/redis-big-key.sh /tmp/old/target/release/libbloomery_redis.so`).
# Needs about 1.4 GB of free memory. Usage: scripts/redis-big-key.sh [MODULE]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-setup.sh
module=${1:-}
if [ -z "$module" ]; then
  cargo build --release --quiet -p bloomery-redis
  module=$PWD/target/release/libbloomery_redis.so
fi
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --loadmodule "$module" MAX_FILTER_MEMORY 0 --daemonize yes --logfile "$dir/log"
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
