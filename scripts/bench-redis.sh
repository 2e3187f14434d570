#!/usr/bin/env bash
# redis-benchmark on loopback: BF.ADD, BF.EXISTS and BF.MEXISTS (100 items) from the
# bloomery module beside plain SET and GET, single and pipelined (-P 16), in one run; and
# BF.ADD of new keys (each one a filter made from the defaults) beside SET of new keys,
# single only (a pipelined run would make millions of keys).
#
# A virtual machine's speed drifts by tens of percent from one second to the next, so each
# ratio is measured in pairs: every round runs SET then BF.ADD (and GET then BF.EXISTS)
# back to back, in alternating order, and the ratio of the pair is kept; the script prints
# the median and the range of those per-round ratios, and the median requests per second
# of each command. With 2 or more cores the server is pinned to core 0 and
# redis-benchmark to core 1, so they do not take turns on one core.
# Usage: scripts/bench-redis.sh [REQUESTS_PER_RUN [ROUNDS]]   (defaults 100000 and 7)
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-100000}
rounds=${2:-7}

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
# The same data behind both sides: about 632,000 of the 10^6 random keys set and as many
# items in the filter, so GET and BF.EXISTS find about 63% of what they ask for.
for warm in "SET key:__rand_int__ value" "BF.ADD bench item:__rand_int__"; do
  # shellcheck disable=SC2086
  redis-benchmark -p "$port" -n 1000000 -c 50 -P 16 -r 1000000 -q $warm >/dev/null 2>&1
done

read -r -a items <<< "$(for i in $(seq 1 100); do printf 'item-%s ' "$i"; done)"
command_of() {
  case $1 in
    SET) cmd=(SET key:__rand_int__ value) ;;
    GET) cmd=(GET key:__rand_int__) ;;
    BF.ADD) cmd=(BF.ADD bench item:__rand_int__) ;;
    BF.EXISTS) cmd=(BF.EXISTS bench item:__rand_int__) ;;
    BF.MEXISTS) cmd=(BF.MEXISTS bench "${items[@]}") ;;
    # The module's dispatch alone: a lookup on a key that does not exist.
    BF.EXISTS-missing) cmd=(BF.EXISTS missing item:__rand_int__) ;;
    # Keys from a range of 10^9: almost every request makes a new key.
    SET-new) cmd=(SET fresh:__rand_int__ value) ;;
    BF.ADD-new) cmd=(BF.ADD new:__rand_int__ item) ;;
  esac
}
rps() { # pipeline name: requests per second of one redis-benchmark run (pipelined runs
  # send 10 times the requests, so that they too last about a second)
  command_of "$2"
  local range=1000000
  case $2 in *-new) range=1000000000 ;; esac
  "${pin_client[@]}" redis-benchmark -p "$port" -n $((requests * ($1 > 1 ? 10 : 1))) -c 50 -P "$1" -r "$range" --csv "${cmd[@]}" 2>/dev/null \
    | tail -n 1 | awk -F'","' '{ gsub(/"/, "", $2); print $2 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.0f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

log=$dir/runs # lines: pipeline name rps | ratio pipeline pair value
for round in $(seq 1 "$rounds"); do
  for pipeline in 1 16; do
    pairs=(SET:BF.ADD GET:BF.EXISTS)
    if [ "$pipeline" -eq 1 ]; then pairs+=(SET-new:BF.ADD-new); fi
    for pair in "${pairs[@]}"; do
      base=${pair%%:*}; ours=${pair#*:}
      if [ $((round % 2)) -eq 1 ]; then b=$(rps "$pipeline" "$base"); o=$(rps "$pipeline" "$ours")
      else o=$(rps "$pipeline" "$ours"); b=$(rps "$pipeline" "$base"); fi
      echo "$pipeline $base $b" >> "$log"; echo "$pipeline $ours $o" >> "$log"
      echo "ratio $pipeline $ours $(awk -v o="$o" -v b="$b" 'BEGIN { print o / b }')" >> "$log"
    done
    for name in BF.MEXISTS BF.EXISTS-missing; do echo "$pipeline $name $(rps "$pipeline" "$name")" >> "$log"; done
  done
  echo "round $round of $rounds done" >&2
done

figure() { awk -v p="$1" -v n="$2" '$1 == p && $2 == n { print $3 }' "$log" | median; }
echo "redis-benchmark: $requests requests per single run ($((requests * 10)) pipelined), 50 clients, $rounds rounds; median requests per second"
echo
echo "| command | rps (single) | rps (-P 16) |"
echo "|---|---:|---:|"
for name in SET GET BF.ADD BF.EXISTS BF.MEXISTS BF.EXISTS-missing SET-new BF.ADD-new; do
  pipelined=$(figure 16 "$name")
  echo "| $name | $(figure 1 "$name") | ${pipelined:--} |"
done
echo
echo "| ratio (per-round pairs) | single: median (min-max) | -P 16: median (min-max) | target |"
echo "|---|---:|---:|---:|"
for pair in SET:BF.ADD GET:BF.EXISTS SET-new:BF.ADD-new; do
  base=${pair%%:*}; ours=${pair#*:}
  line="| $ours / $base |"
  for pipeline in 1 16; do
    if [ "$ours" = BF.ADD-new ] && [ "$pipeline" -eq 16 ]; then line="$line - |"; continue; fi
    line="$line $(awk -v p="$pipeline" -v n="$ours" '$1 == "ratio" && $2 == p && $3 == n { print $4 }' "$log" | sort -g \
      | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
              printf "%.0f%% (%.0f-%.0f%%)", 100 * m, 100 * v[1], 100 * v[NR] }') |"
  done
  # Making a key's filter has no target: the row says what it costs beside a SET.
  if [ "$ours" = BF.ADD-new ]; then echo "$line - |"; else echo "$line >= 90% |"; fi
done
