#!/usr/bin/env bash
# Instructions per single insert + lookup of 64-byte URL keys and of u64 keys, bloomery's
# blocked filter and its split-block filter hashed with XXH3 (through their item roads, as
# a caller uses them) vs sbbf-rs-safe fed the same hash, under callgrind (repeatable on a busy machine, unlike
# times; under valgrind both pick their AVX2 code). Installs valgrind if missing.
# Usage: scripts/url-lookup-instructions.sh [KEYS]
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-100000}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
cargo build -q --release -p bloomery --example url_lookups
binary=target/release/examples/url_lookups
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$binary" "$1" "$2" "$kind" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
# Per key: one insert and two lookups (one present, one absent). Two sizes are counted so
# that start-up and sizing cancel; "hash-only" does the same key generation and the same
# three XXH3-64 hashes with no filter, so the difference is the filter's own work.
per_key() {
  local small large
  small=$(count "$1" $((keys / 10)))
  large=$(count "$1" "$keys")
  awk -v small="$small" -v large="$large" -v n="$keys" 'BEGIN { printf "%.1f", (large - small) / (0.9 * n) }'
}
for kind in url u64; do
  baseline=$(per_key hash-only)
  for side in bloomery split-block sbbf; do
    total=$(per_key "$side")
    awk -v kind="$kind" -v side="$side" -v total="$total" -v base="$baseline" 'BEGIN {
      printf "%-4s %-11s %.1f instructions per key, %.1f beyond generating and hashing the keys (%.1f per operation)\n", kind, side, total, total - base, (total - base) / 3
    }'
  done
done
