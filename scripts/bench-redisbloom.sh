#!/usr/bin/env bash
# bloomery's Redis module against RedisBloom 2.6.28 (issue 15, check 5): redis-benchmark on
# loopback, BF.MADD and BF.MEXISTS with 100 items a command and single-item BF.ADD and
# BF.EXISTS, pipelined (-P 16) and not, on a filter reserved for 10^8 items at 1%
# (`BF.RESERVE bench 0.01 100000000`) that already holds about 6.3 * 10^7 of them.
#
# Each side is a redis-server 7 with one module: bloomery's with its defaults (new filters
# are its scalable blocked filter) and RedisBloom's. The filters are filled the same way:
# 10^6 BF.MADD commands of 100 random items drawn from 10^8 (redis-benchmark's
# __rand_int__, so about 63% of the 10^8 possible items, and the filter stays below its
# capacity on both sides for the whole run: neither grows a sub-filter). The measured
# commands draw from the same 10^8 items, so about two thirds of the lookups find their item
# and adds are a mix of new items and repeats, as in a crawler's dedup.
#
# A virtual machine's speed drifts from one second to the next, so every round measures
# each command on both servers back to back, in alternating order, and keeps the ratio of
# that pair (bloomery's requests per second over RedisBloom's); the script prints the median
# and range of those ratios and the median requests per second of each side. With 2 or more
# cores both servers are pinned to core 0 (only one is busy at a time) and redis-benchmark
# to core 1. Run it on an idle machine.
#
# Usage: scripts/bench-redisbloom.sh [ROUNDS]   (default 7; CAPACITY=1000000 for a quick try). RedisBloom is built on first
# use by scripts/redisbloom-peer.sh (or REDISBLOOM_SO names a built module).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
capacity=${CAPACITY:-100000000} # CAPACITY=10^6 for a quick try of the script itself

scripts/test-setup.sh
cargo build --release --quiet -p bloomery-redis
ours_so=$PWD/target/release/libbloomery_redis.so
peer_so=$(scripts/redisbloom-peer.sh)

dir=$(mktemp -d)
ports=()
cleanup() {
  for port in "${ports[@]}"; do redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
pin_server=(); pin_client=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then pin_server=(taskset -c 0); pin_client=(taskset -c 1); fi
free_port() { while :; do p=$((20000 + RANDOM % 20000)); if ! (echo > /dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo $p; return; fi; done; }
start() { # name module -> port in port_<name>
  local port; port=$(free_port)
  mkdir -p "$dir/$1"
  "${pin_server[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/$1" \
    --loadmodule "$2" --daemonize yes --logfile "$dir/$1/log"
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
  ports+=("$port")
  printf -v "port_$1" '%s' "$port"
}
start ours "$ours_so"
start peer "$peer_so"

items100=(); for _ in $(seq 1 100); do items100+=("i:__rand_int__"); done
command_of() {
  case $1 in
    BF.MADD) cmd=(BF.MADD bench "${items100[@]}") ;;
    BF.MEXISTS) cmd=(BF.MEXISTS bench "${items100[@]}") ;;
    BF.ADD) cmd=(BF.ADD bench i:__rand_int__) ;;
    BF.EXISTS) cmd=(BF.EXISTS bench i:__rand_int__) ;;
  esac
}
# Requests per run, so that each lasts about a second (100-item commands send fewer).
requests_of() { # pipeline name
  local n=100000
  case $2 in BF.MADD|BF.MEXISTS) n=$((n / 20)) ;; esac
  [ "$1" -gt 1 ] && n=$((n * 5))
  echo "$n"
}
rps() { # side pipeline name: requests per second of one redis-benchmark run
  local port_var=port_$1
  command_of "$3"
  "${pin_client[@]}" redis-benchmark -p "${!port_var}" -n "$(requests_of "$2" "$3")" -c 50 -P "$2" -r "$capacity" \
    --csv "${cmd[@]}" 2>/dev/null | tail -n 1 | awk -F'","' '{ gsub(/"/, "", $2); print $2 }'
}

for side in ours peer; do
  port_var=port_$side
  redis-cli -p "${!port_var}" BF.RESERVE bench 0.01 "$capacity" >/dev/null
  command_of BF.MADD
  start_fill=$(date +%s)
  "${pin_client[@]}" redis-benchmark -p "${!port_var}" -n $((capacity / 100)) -c 50 -P 16 -r "$capacity" -q "${cmd[@]}" >/dev/null 2>&1
  echo "$side: filled in $(( $(date +%s) - start_fill )) s: $(redis-cli -p "${!port_var}" BF.CARD bench) items," \
    "$(redis-cli -p "${!port_var}" BF.INFO bench FILTERS | tr -d '\n') sub-filter(s)," \
    "$(redis-cli -p "${!port_var}" MEMORY USAGE bench) bytes" >&2
done

log=$dir/runs # lines: side pipeline name rps | ratio pipeline name value
names=(BF.MADD BF.MEXISTS BF.ADD BF.EXISTS)
for round in $(seq 1 "$rounds"); do
  for pipeline in 16 1; do
    for name in "${names[@]}"; do
      if [ $((round % 2)) -eq 1 ]; then o=$(rps ours "$pipeline" "$name"); p=$(rps peer "$pipeline" "$name")
      else p=$(rps peer "$pipeline" "$name"); o=$(rps ours "$pipeline" "$name"); fi
      echo "ours $pipeline $name $o" >> "$log"; echo "peer $pipeline $name $p" >> "$log"
      echo "ratio $pipeline $name $(awk -v o="$o" -v p="$p" 'BEGIN { print o / p }')" >> "$log"
    done
  done
  echo "round $round of $rounds done" >&2
done
for side in ours peer; do
  port_var=port_$side
  [ "$(redis-cli -p "${!port_var}" BF.INFO bench FILTERS | tr -d '\n')" = 1 ] ||
    echo "warning: the $side filter grew during the run" >&2
done

median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.0f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
figure() { awk -v s="$1" -v p="$2" -v n="$3" '$1 == s && $2 == p && $3 == n { print $4 }' "$log" | median; }
ratio() { awk -v p="$1" -v n="$2" '$1 == "ratio" && $2 == p && $3 == n { print $4 }' "$log" | sort -g \
  | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
          printf "%.2f (%.2f-%.2f)", m, v[1], v[NR] }'; }
echo "redis-benchmark, 50 clients, $rounds rounds, filter reserved for $capacity items at 1%;"
echo "requests per second (median), and bloomery's over RedisBloom's per round: median (range)"
echo
echo "| command | pipeline | bloomery rps | RedisBloom rps | ratio | target |"
echo "|---|---:|---:|---:|---:|---:|"
for pipeline in 16 1; do
  for name in "${names[@]}"; do
    case $name in BF.MADD|BF.MEXISTS) label="$name (100 items)"; target=">= 1.5 at -P 16" ;; *) label=$name; target=">= 1.0" ;; esac
    [ "$pipeline" = 1 ] && [ "${name#BF.M}" != "$name" ] && target="-"
    echo "| $label | $pipeline | $(figure ours "$pipeline" "$name") | $(figure peer "$pipeline" "$name") | $(ratio "$pipeline" "$name") | $target |"
  done
done
