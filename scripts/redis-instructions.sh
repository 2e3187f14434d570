#!/usr/bin/env bash
# Instructions per pipelined single-item command (BF.ADD, BF.EXISTS), the whole server
# counted by callgrind: bloomery's module against RedisBloom 2.6.28 (scripts/redisbloom-peer.sh).
# Repeatable on a busy machine, unlike times. A redis-server under callgrind gets
# `BF.RESERVE bench 0.01 1000000`, then `redis-benchmark -n N -c 4 -P 16 -r 1000000` of the
# command with a random item; N = 20,000 and 40,000, and the difference over 20,000 is the
# cost of one command (start-up and the reservation cancel). BF.ADD's items are nearly all
# new. redis-benchmark's random items differ from run to run, and with them the server's
# own work by a few percent, so each figure is the median of 3 such differences.
# Installs valgrind if missing. Usage: scripts/redis-instructions.sh
#   BLOOMERY_SO=path  count that build of the module (say, of an older commit) instead of
#                     building this tree's
#   CALLGRIND_OUT=dir keep the profiles there (SIDE-COMMAND-REQUESTS.out, the last of the 3
#                     runs), for `callgrind_annotate --inclusive=yes FILE`
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
scripts/test-setup.sh
if [ -n "${BLOOMERY_SO:-}" ]; then
  ours=$BLOOMERY_SO
else
  cargo build --release --quiet -p bloomery-redis
  ours=$PWD/target/release/libbloomery_redis.so
fi
peer=$(scripts/redisbloom-peer.sh)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

count() { # side module requests command... -> instructions of the whole server run
  local side=$1 so=$2 requests=$3 port
  shift 3
  port=$((30000 + RANDOM % 10000))
  valgrind --tool=callgrind --callgrind-out-file="$dir/out" redis-server --port "$port" --bind 127.0.0.1 \
    --save "" --appendonly no --dir "$dir" --loadmodule "$so" >"$dir/log" 2>&1 &
  local server=$!
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.2; done
  redis-cli -p "$port" BF.RESERVE bench 0.01 1000000 >/dev/null
  redis-benchmark -p "$port" -n "$requests" -c 4 -P 16 -r 1000000 -q "$@" >/dev/null 2>&1
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$server" || true
  if [ -n "${CALLGRIND_OUT:-}" ]; then
    mkdir -p "$CALLGRIND_OUT" && cp "$dir/out" "$CALLGRIND_OUT/$side-$1-$requests.out"
  fi
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$dir/log"
}

printf "%-10s %10s %12s\n" command bloomery RedisBloom
for command in BF.ADD BF.EXISTS; do
  line="$command"
  for side in bloomery redisbloom; do
    so=$ours
    [ "$side" = redisbloom ] && so=$peer
    per=$(for _ in 1 2 3; do
      small=$(count "$side" "$so" 20000 "$command" bench 'i:__rand_int__')
      large=$(count "$side" "$so" 40000 "$command" bench 'i:__rand_int__')
      echo $(( (large - small) / 20000 ))
    done | sort -n | sed -n 2p)
    line="$line $per"
  done
  # shellcheck disable=SC2086
  printf "%-10s %10s %12s\n" $line
done
