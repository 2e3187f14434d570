#!/usr/bin/env bash
# Sharded filters on Redis Cluster (issue 14, part 3, check 4): items per second for `add`
# and `check` through the bloomery client (the CLI: reads the items, hashes them, sends 8
# bytes an item, one BF.HASHADD/BF.HASHEXISTS per shard per batch, pipelined per node)
# against clusters of 1, 2 and 3 primaries (no replicas), and, in the same run with the
# same items, RedisBloom 2.6.28's BF.MADD / BF.MEXISTS on one key of one server.
#
# The RedisBloom side is sent by `redis-cli --pipe` from a pre-generated file of commands
# (1000 items a command), which only streams bytes and counts replies: the fastest client
# there is, so the comparison flatters RedisBloom's side (ours includes reading the item
# file and hashing). The filter is sized for the items at 1% on both sides (ours: 64
# shards at least). Servers run with no persistence. With 2 cores, servers and client
# share them; run it on an idle machine.
#
# Usage: scripts/bench-cluster.sh [ITEMS [ROUNDS]]   (defaults 2000000 and 3; the median of
# the rounds is printed). RedisBloom is built into target/peer/ from the git mirrors
# (scripts/redisbloom-peer.sh) unless REDISBLOOM_SO names a built module.
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-2000000}
rounds=${2:-3}
root=$PWD

scripts/test-setup.sh
cargo build --release --quiet -p bloomery-redis -p bloomery-cli
bloomery=$root/target/release/bloomery
module=$root/target/release/libbloomery_redis.so
redisbloom=$(scripts/redisbloom-peer.sh)

dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

# The items: URL-like lines; and RedisBloom's commands for them, 1000 items a command.
awk -v n="$items" 'BEGIN { for (i = 0; i < n; i++) printf "https://example.org/page/%d\n", i }' > "$dir/items"
target/venv/bin/python - "$dir" <<'EOF'
import sys
d = sys.argv[1]
lines = open(f"{d}/items", "rb").read().split(b"\n")[:-1]
def resp(command, key, batch):
    parts = [command, key, *batch]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
for command, name in ((b"BF.MADD", "madd"), (b"BF.MEXISTS", "mexists")):
    with open(f"{d}/{name}.resp", "wb") as out:
        for start in range(0, len(lines), 1000):
            out.write(resp(command, b"bench", lines[start:start + 1000]))
EOF

now() { date +%s.%N; }
rate() { awk -v n="$items" -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", n / (b - a) }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
free_port() { while :; do p=$((20000 + RANDOM % 20000)); if ! (echo > /dev/tcp/127.0.0.1/$p) 2>/dev/null && ! (echo > /dev/tcp/127.0.0.1/$((p + 10000))) 2>/dev/null; then echo $p; return; fi; done; }

# Starts a server with `module` on a free port (another one if that one was taken meanwhile:
# the server then exits, where waiting for it once hung the run); sets `port`.
start_server() { # module cluster(yes|no)
  local so=$1 cluster=$2 tries pid
  for tries in $(seq 1 10); do
    port=$(free_port)
    mkdir -p "$dir/$port"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/$port" \
      --cluster-enabled "$cluster" --cluster-config-file "$dir/$port/nodes.conf" \
      --loadmodule "$so" > "$dir/$port/log" 2>&1 &
    pid=$!
    pids+=("$pid")
    until redis-cli -p "$port" ping > /dev/null 2>&1; do
      kill -0 "$pid" 2>/dev/null || continue 2
      sleep 0.05
    done
    return 0
  done
  echo "bench-cluster: no redis-server started in 10 tries (last log: $dir/$port/log)" >&2
  exit 1
}

# A cluster of P primaries, slots split evenly (by hand: redis-cli --cluster create wants 3).
start_cluster() { # primaries -> sets ports
  local p=$1 i
  ports=()
  for i in $(seq 1 "$p"); do
    start_server "$module" yes
    ports+=("$port")
  done
  for i in $(seq 0 $((p - 1))); do
    redis-cli -p "${ports[$i]}" CLUSTER ADDSLOTSRANGE $((16384 * i / p)) $((16384 * (i + 1) / p - 1)) > /dev/null
    [ "$i" -gt 0 ] && redis-cli -p "${ports[$i]}" CLUSTER MEET 127.0.0.1 "${ports[0]}" > /dev/null
  done
  for port in "${ports[@]}"; do
    until redis-cli -p "$port" CLUSTER INFO | grep -q 'cluster_state:ok'; do sleep 0.1; done
  done
}

stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

results=$dir/results
for round in $(seq 1 "$rounds"); do
  for p in 1 2 3; do
    start_cluster "$p"
    seeds=$(printf '127.0.0.1:%s,' "${ports[@]}"); seeds=${seeds%,}
    "$bloomery" create --redis-cluster "$seeds" bench --items "$items" --fpp 0.01 --min-shards 64
    t0=$(now); "$bloomery" add --redis-cluster "$seeds" bench -i "$dir/items"; t1=$(now)
    "$bloomery" check --quiet --redis-cluster "$seeds" bench -i "$dir/items"; t2=$(now)
    echo "sharded-$p add $(rate "$t0" "$t1")" >> "$results"
    echo "sharded-$p check $(rate "$t1" "$t2")" >> "$results"
    stop_all
  done
  start_server "$redisbloom" no
  redis-cli -p "$port" BF.RESERVE bench 0.01 "$items" > /dev/null
  t0=$(now); redis-cli -p "$port" --pipe < "$dir/madd.resp" > /dev/null; t1=$(now)
  redis-cli -p "$port" --pipe < "$dir/mexists.resp" > /dev/null; t2=$(now)
  echo "redisbloom add $(rate "$t0" "$t1")" >> "$results"
  echo "redisbloom check $(rate "$t1" "$t2")" >> "$results"
  stop_all
done

echo "items: $items, rounds: $rounds (median items/s), $(nproc) cores"
printf '| %-34s | %12s | %12s |\n' "target" "add items/s" "check items/s"
printf '| %-34s | %12s | %12s |\n' "---" "---:" "---:"
for who in sharded-1 sharded-2 sharded-3 redisbloom; do
  add=$(awk -v w="$who" '$1 == w && $2 == "add" { print $3 }' "$results" | median)
  check=$(awk -v w="$who" '$1 == w && $2 == "check" { print $3 }' "$results" | median)
  case $who in
    sharded-*) label="bloomery sharded, ${who#sharded-} primary(ies)" ;;
    redisbloom) label="RedisBloom BF.MADD/BF.MEXISTS" ;;
  esac
  printf '| %-34s | %12s | %12s |\n' "$label" "$add" "$check"
done
