#!/usr/bin/env bash
# Issue 14's scale check (not in CI; run it on an idle machine): a blocked filter sized for
# CAPACITY items at FPP (12 GB for 10^10 at 1%), ADD generated URL-like items added through
# `bloomery add` from a pipe (no input file on disk), PROBE fresh items probed with
# `bloomery check --count`. Prints items/s for add and check, peak RSS and disk written for
# each step, the add's phases (BLOOMERY_TIMINGS), the measured false-positive rate, the
# time to verify the new file and to reopen the filled one for one check; then the same
# `add` on a filter sized for BASELINE items (10^7), for the ratio.
#
# Usage: scripts/scale.sh [CAPACITY=1e10] [ADD=1e9] [PROBE=1e8] [FPP=0.01] [BASELINE=1e7]
#   Small smoke run: scripts/scale.sh 1e7 1e6 1e6
# Needs the filter's size free on disk in ${TMPDIR:-/tmp} (the file is removed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
capacity=${1:-1e10}
add=${2:-1e9}
probe=${3:-1e8}
fpp=${4:-0.01}
baseline=${5:-1e7}
int() { python3 -c "print(int(float('$1')))"; }
capacity=$(int "$capacity"); add=$(int "$add"); probe=$(int "$probe"); baseline=$(int "$baseline")

if [ ! -x /usr/bin/time ]; then apt-get update -qq && apt-get install -y -qq time >/dev/null; fi
cargo build --release --quiet -p bloomery-cli --bin bloomery --example gen_urls
bloomery=$PWD/target/release/bloomery
gen=$PWD/target/release/examples/gen_urls
work=$(mktemp -d "${TMPDIR:-/tmp}/bloomery-scale.XXXXXX")
trap 'rm -rf "$work"' EXIT
filter=$work/scale.bloom
device=$(df --output=source "$work" | tail -1 | sed 's|/dev/||')
sectors_written() { # the device's (or its partition's) sectors written so far, if known
  local stat
  for stat in "/sys/class/block/$device/stat" "/sys/block/$device/stat"; do
    [ -r "$stat" ] && { awk '{ print $7 }' "$stat"; return; }
  done
  echo 0
}

# step NAME SECONDS_VAR -- command...: runs under /usr/bin/time -v, prints wall seconds,
# peak RSS, bytes the process wrote or dirtied (File system outputs x 512) and the device's
# sectors written meanwhile (after a sync: includes other programs' writes).
step() {
  local name=$1; shift
  sync
  local before; before=$(sectors_written)
  /usr/bin/time -v -o "$work/time.txt" "$@" > /dev/null || true
  sync
  local after; after=$(sectors_written)
  local wall rss outputs
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$work/time.txt")
  outputs=$(awk -F': ' '/File system outputs/ { printf "%.1f", $2 * 512 / 1048576 }' "$work/time.txt")
  local device_mib; device_mib=$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.1f", (a - b) * 512 / 1048576 }')
  printf '%-28s %10.2f s   peak RSS %9s MiB   written by it %10s MiB   device %10s MiB\n' \
    "$name" "$wall" "$rss" "$outputs" "$device_mib"
  last_wall=$wall
}

rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "inf" }'; }

echo "blocked filter for $capacity items at fpp $fpp; add $add items, probe $probe fresh ones"
step "create" "$bloomery" create --items "$capacity" --fpp "$fpp" "$filter"
echo "  file $(stat -c %s "$filter") bytes, $(du -k "$filter" | cut -f1) KiB allocated"
step "verify (the new file)" "$bloomery" verify "$filter"
# The add prints its phases (BLOOMERY_TIMINGS) to standard error, before its line.
step "add (from a pipe)" sh -c "'$gen' $add 1 item | BLOOMERY_TIMINGS=1 '$bloomery' add '$filter'"
add_rate=$(rate "$add" "$last_wall")
echo "  add: $add_rate items/s (generator included)"
step "check --count (fresh items)" sh -c "'$gen' $probe 2 probe | '$bloomery' check --count '$filter' > '$work/count.txt' || true"
check_rate=$(rate "$probe" "$last_wall")
present=$(awk '{ print $1 }' "$work/count.txt")
echo "  check: $check_rate items/s; $(cat "$work/count.txt")"
echo "  measured false-positive rate: $(awk -v p="$present" -v n="$probe" 'BEGIN { printf "%.5f%%", 100 * p / n }') (sized for $(awk -v f="$fpp" 'BEGIN { printf "%g%%", 100 * f }') at $capacity items)"
step "reopen + one check" "$bloomery" check --no-verify "$filter" "https://shop00.example.com/item/none"
step "reopen + verify checksum" "$bloomery" check "$filter" "https://shop00.example.com/item/none"
step "verify" "$bloomery" verify "$filter"
rm -f "$filter"

# The baseline takes under a second, so one run of it is at the mercy of this machine's
# noise (0.50 s in one run of a build, 0.71-0.78 s in another): the fastest of BASELINE_RUNS runs
# (3 unless set), each on a new filter, is the one compared, which makes the ratio no
# kinder to the large filter.
small=$work/small.bloom
small_add=$(( add < baseline ? add : baseline ))
small_rate=0
for run in $(seq "${BASELINE_RUNS:-3}"); do
  rm -f "$small"
  step "baseline create ($baseline)" "$bloomery" create --items "$baseline" --fpp "$fpp" "$small"
  step "baseline add ($small_add), run $run" sh -c "'$gen' $small_add 1 item | '$bloomery' add '$small'"
  small_rate=$(awk -v a="$(rate "$small_add" "$last_wall")" -v b="$small_rate" 'BEGIN { print (a > b ? a : b) }')
done
echo "  baseline add: $small_rate items/s (the fastest run)"
echo "add throughput at $capacity vs $baseline: $(awk -v a="$add_rate" -v b="$small_rate" 'BEGIN { printf "%.2fx slower", b / a }') (target: within 2x)"
echo "generator alone: $(rate "$small_add" "$( { /usr/bin/time -f %e "$gen" "$small_add" > /dev/null; } 2>&1 )") lines/s"
# The disk's sequential write speed, for the pass over the payload (which writes the file
# back once): 1 GiB through dd, synced.
disk=$(dd if=/dev/zero of="$work/dd.bin" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1 | sed 's/.*, //')
rm -f "$work/dd.bin"
echo "disk write speed (dd, 1 GiB, fdatasync): $disk"
