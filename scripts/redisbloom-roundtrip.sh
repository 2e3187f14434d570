#!/usr/bin/env bash
# Data that moves back: RedisBloom 2.6.28's RDB fixture (crates/bloomery/tests/data/redisbloom)
# is loaded by a server running bloomery, which adds items and saves; then RedisBloom itself
# loads the RDB bloomery wrote and must find every item, old and new, in every filter.
# Needs the peer module (../shared/peers/build-redisbloom.sh, or scripts/redisbloom-flow.sh
# with PEER=1, which builds it into target/peer/).
# Usage: scripts/redisbloom-roundtrip.sh [REDISBLOOM_SO]
set -euo pipefail
cd "$(dirname "$0")/.."
peer=${1:-$(scripts/redisbloom-peer.sh)}
[ -f "$peer" ] || { echo "no RedisBloom module at $peer (build it first, see the header)" >&2; exit 2; }
peer=$(readlink -f "$peer")
cargo build --release --quiet -p bloomery-redis
fixtures=crates/bloomery/tests/data/redisbloom
dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
cp "$fixtures/dump.rdb" "$dir/"
serve() { # module (an absolute path)
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
    --loadmodule "$1" --daemonize yes --logfile "$dir/log"
  for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "redis-server with $1 did not start:" >&2; tail -5 "$dir/log" >&2; exit 2
}
names="scaled expansion4 tiny_error large_error capacity1 defaults"
serve "$PWD/target/release/libbloomery_redis.so"
for name in $names; do
  redis-cli -p "$port" BF.MADD "$name" "$name:back:1" "$name:back:2" "$name:back:3" >/dev/null
done
redis-cli -p "$port" SAVE >/dev/null
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
sleep 0.2
serve "$peer"
status=0
for name in $names nonscaling; do
  items=$(cat "$fixtures/$name.items" "$fixtures/$name.more.items")
  [ "$name" = nonscaling ] || items="$items"$'\n'"$name:back:1"$'\n'"$name:back:2"$'\n'"$name:back:3"
  total=$(printf '%s\n' "$items" | grep -c .)
  found=$(printf '%s\n' "$items" | grep . | xargs redis-cli -p "$port" BF.MEXISTS "$name" | grep -c '^1$')
  echo "RedisBloom reads bloomery's $name ($(redis-cli -p "$port" TYPE "$name")): $found of $total items found"
  [ "$found" = "$total" ] || status=1
done
exit $status
