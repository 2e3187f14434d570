#!/usr/bin/env bash
# RedisBloom 2.6.28's own flow tests (tests/flow/test_overall.py, under RLTest) against
# bloomery's Redis module, in plain, replica (--use-slaves) and AOF (--use-aof) modes; prints
# the pass counts per mode and exits non-zero if any test failed.
#
# The tests are RedisBloom's, not this repository's: they are extracted at run time from
# RedisBloom's git history (REDISBLOOM_GIT, a git directory such as a mirror, or else a
# bare clone of https://github.com/RedisBloom/RedisBloom made on first use in target/peer).
# RLTest (the version the tests pin) is installed on first use into target/flow-venv.
# The module runs with the configuration that gives RedisBloom's behaviour where bloomery
# deliberately differs: MAX_FILTER_MEMORY 0 (test_issue178 reserves a 1.13 GB filter),
# REDISBLOOM_ERRORS yes (the BF.LOADCHUNK tests compare "received bad data" exactly) and
# REDISBLOOM_LAYOUT yes (test_expansion counts sub-filters that depend on which items are
# false positives, so on RedisBloom's own hashing).
#
# Usage: scripts/redisbloom-flow.sh [extra RLTest arguments, e.g. -t test_overall:testRedisBloom.test_debug]
#   MODES="plain slaves aof"  the modes to run (default: all three)
#   PEER=1                    also run the same tests against RedisBloom 2.6.28 itself, built on
#                             first use into target/peer (needs gcc and the t-digest-c and
#                             RedisModulesSDK repositories: TDIGEST_GIT, SDK_GIT or clones), and
#                             compare the RedisBloom layout with it reply for reply on random
#                             filters and items (scripts/redisbloom-diff.py)
#   SKIP_BUILD=1              use target/release/libbloomery_redis.so as it is
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TAG=v2.6.28
FLOW_DIR=$ROOT/target/flow/$TAG
VENV=$ROOT/target/flow-venv
MODULE=$ROOT/target/release/libbloomery_redis.so
MODES=${MODES:-plain slaves aof}

command -v redis-server >/dev/null || scripts/test-setup.sh

RB_GIT=$(scripts/redisbloom-peer.sh --gitdir)

# The flow tests at the tag, and a stand-in for RedisBloom's `paella` helper (its build
# tooling, which common.py imports only to name the platform).
if [ ! -f "$FLOW_DIR/tests/flow/test_overall.py" ]; then
  rm -rf "$FLOW_DIR"
  mkdir -p "$FLOW_DIR/stub"
  git --git-dir="$RB_GIT" archive "$TAG" tests/flow | tar -x -C "$FLOW_DIR"
  cat >"$FLOW_DIR/stub/paella.py" <<'EOF'
import platform


class Platform:
    """What RedisBloom's flow tests ask of paella.Platform (they only print it)."""
    os = "linux"
    osnick = "linux"
    arch = platform.machine()
EOF
fi

if ! "$VENV/bin/python" -c "import RLTest, packaging" 2>/dev/null; then
  python3 -m venv "$VENV"
  rltest=$(grep -i '^RLTest' "$FLOW_DIR/tests/flow/requirements.txt" | tr -d ' ')
  "$VENV/bin/pip" install -q --disable-pip-version-check "$rltest" packaging "setuptools<81"
fi

if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release -q -p bloomery-redis
fi

# Runs the flow tests against one module in one mode; prints "<passed> <run> <failed names>".
run_mode() {
  local label=$1 module=$2 module_args=$3 mode=$4
  shift 4
  local flag=()
  case $mode in
    plain) ;;
    slaves) flag=(--use-slaves) ;;
    aof) flag=(--use-aof) ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
  local log=$ROOT/target/flow/logs/$label-$mode.log
  mkdir -p "$(dirname "$log")"
  local args=(--module "$module" --test test_overall.py --enable-debug-command --clear-logs "${flag[@]}")
  [ -n "$module_args" ] && args+=(--module-args "$module_args")
  (cd "$FLOW_DIR/tests/flow" && PYTHONPATH="$FLOW_DIR/stub" "$VENV/bin/RLTest" "${args[@]}" "$@") 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g; s/\r//g' >"$log" || true
  # Each test's name line ("<tab>test_overall:Class.test:") comes after the test ran, followed
  # by its status; the test's failed assertions come before it. (RLTest 0.7.5 can print
  # [PASS] for a test whose assertions failed, when an earlier test in the class raised.)
  awk '
    /\(FAIL\):/ { asserted = 1; next }
    /^[ \t]*test_overall:[A-Za-z0-9_.]+:[ \t]*$/ {
      name = $1; sub(/:$/, "", name); sub(/^test_overall:/, "", name); next
    }
    name != "" && /^[ \t]*\[(PASS|SKIP|FAIL|ERROR)\]/ {
      run++
      if (($1 == "[PASS]" || $1 == "[SKIP]") && !asserted) passed++; else failed = failed " " name
      name = ""; asserted = 0
    }
    END { printf "%d %d%s\n", passed, run, failed }
  ' "$log"
}

status=0
summary=()
for mode in $MODES; do
  read -r passed run failed < <(run_mode bloomery "$MODULE" "MAX_FILTER_MEMORY 0 REDISBLOOM_ERRORS yes REDISBLOOM_LAYOUT yes" "$mode" "$@")
  summary+=("bloomery   $mode: $passed of $run passed${failed:+ (failed: ${failed// /, })}")
  [ "$run" -gt 0 ] && [ "$passed" -eq "$run" ] || status=1
done
if [ -n "${PEER:-}" ]; then
  PEER_MODULE=$(scripts/redisbloom-peer.sh)
  for mode in $MODES; do
    read -r passed run failed < <(run_mode redisbloom "$PEER_MODULE" "" "$mode" "$@")
    summary+=("RedisBloom $mode: $passed of $run passed${failed:+ (failed: ${failed// /, })}")
  done
  diff_log=$ROOT/target/flow/logs/redisbloom-diff.log
  "$VENV/bin/python" scripts/redisbloom-diff.py "$PEER_MODULE" "$MODULE" >"$diff_log" 2>&1 || status=1
  summary+=("$(tail -1 "$diff_log")")
fi
echo "RedisBloom $TAG tests/flow/test_overall.py (logs: target/flow/logs):"
printf '  %s\n' "${summary[@]}"
exit $status
