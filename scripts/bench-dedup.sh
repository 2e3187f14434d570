#!/usr/bin/env bash
# Deduplicating 10,000,000 URL-like lines (about 20% repeats): `bloomery dedup` against
# `sort -u` and `awk '!seen[$0]++'` in the same run, with lines per second and peak memory
# (/usr/bin/time -v), and bloomery's false-positive drops against the 1% it was sized for.
# Then the cost of opening a 2 GB filter file for one `check` (mmap) beside a full `verify`.
# Usage: scripts/bench-dedup.sh [LINES]   (default 10000000). Needs ~4 GB of free disk.
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${1:-10000000}

if [ ! -x /usr/bin/time ]; then apt-get update -qq && apt-get install -y -qq time >/dev/null; fi
cargo build --release --quiet -p bloomery-cli
bloomery=$PWD/target/release/bloomery
work=$(mktemp -d "${TMPDIR:-/tmp}/bloomery-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

python3 scripts/gen-urls.py "$lines" 0.2 11 > "$work/urls.txt"
distinct=$(sort -u "$work/urls.txt" | wc -l)
echo "input: $lines lines, $distinct distinct, $(du -h "$work/urls.txt" | cut -f1)"
echo
echo "| tool | seconds | lines/s | peak memory (MiB) | output lines |"
echo "|---|---:|---:|---:|---:|"

measure() { # name, then the command (reads urls.txt, writes out.txt)
  local name=$1; shift
  /usr/bin/time -v -o "$work/time.txt" "$@" < "$work/urls.txt" > "$work/out.txt"
  local wall rss out
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$work/time.txt")
  out=$(wc -l < "$work/out.txt")
  awk -v n="$name" -v w="$wall" -v l="$lines" -v r="$rss" -v o="$out" \
    'BEGIN { printf "| %s | %.2f | %.0f | %s | %d |\n", n, w, l / w, r, o }'
  echo "$name $wall $rss $out" >> "$work/results.txt"
}

measure "bloomery dedup (blocked, n=$lines, p=1%)" "$bloomery" dedup --items "$lines" --fpp 0.01
measure "sort -u" sort -u
measure "awk '!seen[\$0]++'" awk '!seen[$0]++'

kept=$(awk '/^bloomery/ { print $NF }' "$work/results.txt")
echo
awk -v d="$distinct" -v k="$kept" 'BEGIN {
  printf "bloomery false-positive drops: %d of %d distinct lines (%.3f%%; sized for 1%% at %d items)\n", d - k, d, 100 * (d - k) / d, d }' \
  | sed "s/at [0-9]* items/at the expected count/"
awk '
  /^bloomery/ { bt = $(NF-2); bm = $(NF-1) }
  /^sort/ { st = $(NF-2); sm = $(NF-1) }
  /^awk/ { at = $(NF-2); am = $(NF-1) }
  END { printf "ratios: %.2fx faster than sort -u, %.2fx faster than awk, %.1fx less memory than awk\n", st / bt, at / bt, am / bm }
' "$work/results.txt"

echo
echo "Opening a 2 GB filter for one check:"
rm -f "$work/urls.txt" "$work/out.txt"
"$bloomery" create --items 1600000000 --fpp 0.01 "$work/big.bloom"
echo "file: $(du -h --apparent-size "$work/big.bloom" | cut -f1)"
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true   # cold cache where allowed
/usr/bin/time -f "check of one item, mapped pages only (--no-verify): %e s wall, %M KiB peak memory" "$bloomery" check --no-verify "$work/big.bloom" some-item || true
/usr/bin/time -f "check of one item after the payload checksum (the default): %e s wall, %M KiB peak memory" "$bloomery" check "$work/big.bloom" some-item || true
/usr/bin/time -f "full verify: %e s wall, %M KiB peak memory" "$bloomery" verify "$work/big.bloom"
