#!/usr/bin/env bash
# Instructions per item of the Python package's add and lookup, one at a time and in
# batches, against rbloom, for str items, small ints (one CPython digit) and the
# benchmark's 62-bit ints, under callgrind: repeatable on a busy
# machine, unlike times. The filters are small (N items, default 20,000: they stay in
# cache), so this counts the work of the calls themselves (Python's loop included), not the
# memory traffic of large filters, which scripts/bench-python.sh measures.
# Uses target/bench-venv (made as scripts/bench-python.sh makes it); installs valgrind if
# missing. Usage: scripts/python-instructions.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20000}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
venv=target/bench-venv
[ -x $venv/bin/python ] || python3 -m venv $venv
if ! $venv/bin/python -c "import rbloom" 2>/dev/null; then
  $venv/bin/pip install -q --disable-pip-version-check "rbloom>=1.5,<2"
fi
$venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps ./crates/bloomery-py
count() {
  PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    $venv/bin/python crates/bloomery-py/bench/instructions.py "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
# Two sizes, less the same two runs without the operation (making the items, the filter,
# and for lookups filling it): what is left is the operation's own instructions.
per_item() {
  local small large small_setup large_setup
  small=$(count "$1" "$2" "$3" $((n / 10)))
  large=$(count "$1" "$2" "$3" "$n")
  small_setup=$(count "$1" "setup:$2" "$3" $((n / 10)))
  large_setup=$(count "$1" "setup:$2" "$3" "$n")
  awk -v s="$small" -v l="$large" -v ss="$small_setup" -v ls="$large_setup" -v n="$n" \
    'BEGIN { printf "%.0f", ((l - s) - (ls - ss)) / (0.9 * n) }'
}
printf "%-5s %-10s %10s %10s %8s\n" items operation bloomery rbloom ratio
for kind in str int int62; do
  for operation in add in add_batch in_batch; do
    ours=$(per_item bloomery "$operation" "$kind")
    theirs=$(per_item rbloom "$operation" "$kind")
    awk -v k="$kind" -v o="$operation" -v a="$ours" -v b="$theirs" \
      'BEGIN { printf "%-5s %-10s %10d %10d %7.2fx\n", k, o, a, b, b / a }'
  done
done
