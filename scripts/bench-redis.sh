#!/usr/bin/env bash
# redis-benchmark on loopback: BF.ADD, BF.EXISTS and BF.MEXISTS (100 items) from the
# bloomery module beside plain SET and GET, single and pipelined (-P 16), in one run;
# prints requests per second (median of 3 runs) and the ratios. With 2 or more cores the
# server is pinned to core 0 and redis-benchmark to core 1, so they do not take turns on
# one core. Usage: scripts/bench-redis.sh [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-200000}

scripts/test-setup.sh
cargo build --release --quiet -p bloomery-redis
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
pin_server=(); pin_client=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then pin_server=(taskset -c 0); pin_client=(taskset -c 1); fi
"${pin_server[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --loadmodule "$PWD/target/release/libbloomery_redis.so" --daemonize yes --logfile "$dir/log"
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
redis-cli -p "$port" BF.RESERVE bench 0.01 1000000 >/dev/null

items=$(for i in $(seq 1 100); do printf 'item-%s ' "$i"; done)
rps() { # pipeline, then the command; the median of 3 runs
  local pipeline=$1; shift
  for _ in 1 2 3; do
    "${pin_client[@]}" redis-benchmark -p "$port" -n "$requests" -c 50 -P "$pipeline" -r 1000000 --csv "$@" 2>/dev/null \
      | tail -n 1 | awk -F'","' '{ gsub(/"/, "", $2); print $2 }'
  done | sort -g | sed -n 2p
}

echo "| command | rps (single) | rps (-P 16) |"
echo "|---|---:|---:|"
declare -A single piped
for name in SET GET BF.ADD BF.EXISTS BF.MEXISTS BF.EXISTS-missing; do
  case $name in
    SET) cmd=(SET key:__rand_int__ value) ;;
    GET) cmd=(GET key:__rand_int__) ;;
    BF.ADD) cmd=(BF.ADD bench item:__rand_int__) ;;
    BF.EXISTS) cmd=(BF.EXISTS bench item:__rand_int__) ;;
    BF.MEXISTS) read -r -a list <<< "$items"; cmd=(BF.MEXISTS bench "${list[@]}") ;;
    # The module's dispatch alone: a lookup on a key that does not exist.
    BF.EXISTS-missing) cmd=(BF.EXISTS missing item:__rand_int__) ;;
  esac
  single[$name]=$(rps 1 "${cmd[@]}")
  piped[$name]=$(rps 16 "${cmd[@]}")
  echo "| $name | ${single[$name]} | ${piped[$name]} |"
done
echo
awk -v a="${single[BF.ADD]}" -v s="${single[SET]}" -v e="${single[BF.EXISTS]}" -v g="${single[GET]}" \
    -v pa="${piped[BF.ADD]}" -v ps="${piped[SET]}" -v pe="${piped[BF.EXISTS]}" -v pg="${piped[GET]}" 'BEGIN {
  printf "BF.ADD / SET: %.0f%% single, %.0f%% pipelined; BF.EXISTS / GET: %.0f%% single, %.0f%% pipelined (target: at least 90%%)\n",
    100 * a / s, 100 * pa / ps, 100 * e / g, 100 * pe / pg }'
