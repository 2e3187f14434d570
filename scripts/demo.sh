#!/usr/bin/env bash
# The main job: generate 1,000,000 URL-like lines (about 20% repeats), deduplicate them
# with `bloomery dedup` keeping its memory in a filter file, check a few lines, and show
# the filter. Everything happens in a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet -p bloomery-cli
bloomery=$PWD/target/release/bloomery
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 scripts/gen-urls.py 1000000 0.2 7 > "$work/urls.txt"
"$bloomery" create --items 1000000 --fpp 0.01 "$work/seen.bloom"

start=$(date +%s.%N)
"$bloomery" dedup --filter "$work/seen.bloom" --input "$work/urls.txt" > "$work/unique.txt"
end=$(date +%s.%N)

lines=$(wc -l < "$work/urls.txt")
kept=$(wc -l < "$work/unique.txt")
distinct=$(sort -u "$work/urls.txt" | wc -l)
echo "lines in:               $lines"
echo "distinct (sort -u):     $distinct"
echo "kept by bloomery dedup: $kept ($((distinct - kept)) distinct lines wrongly taken as seen: false positives)"
awk -v s="$start" -v e="$end" -v n="$lines" 'BEGIN { printf "dedup time:             %.2f s (%.0f lines/s)\n", e - s, n / (e - s) }'
echo
echo "\$ bloomery check seen.bloom <first line> not-a-url"
"$bloomery" check "$work/seen.bloom" "$(head -n 1 "$work/urls.txt")" "not-a-url" || true
echo
echo "\$ bloomery info seen.bloom"
"$bloomery" info "$work/seen.bloom"
"$bloomery" verify "$work/seen.bloom"
