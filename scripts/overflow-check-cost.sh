#!/usr/bin/env bash
# What overflow checks cost the library's hot paths in a release build, in instructions:
# the hot_paths example under callgrind, built without and with overflow checks (separate
# target directories), same workload. Instruction counts repeat exactly on a busy machine,
# unlike times. Installs valgrind if missing. Usage: scripts/overflow-check-cost.sh [ITEMS]
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-200000}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }

count() { # $1: overflow checks on or off; prints the instruction count
  local dir=target/overflow-$1
  CARGO_TARGET_DIR=$dir CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=$1 \
    cargo build -q --release -p bloomery --example hot_paths
  valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    "$dir/release/examples/hot_paths" "$items" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
off=$(count false)
on=$(count true)
echo "hot_paths $items items: $off instructions without overflow checks, $on with"
awk -v off="$off" -v on="$on" 'BEGIN { printf "overflow checks cost %.2f%% more instructions\n", (on / off - 1) * 100 }'
