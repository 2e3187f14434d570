#!/usr/bin/env bash
# redis-py's own Bloom filter tests (tests/test_bloom.py and tests/test_asyncio/test_bloom.py,
# the test_bf_* ones) against a redis-server with bloomery's module, in RESP2 and RESP3
# (redis-py's --protocol 2 and 3); exits non-zero if any failed.
#
# The tests are redis-py's, taken at run time from its git history at the tag of the redis-py
# in target/venv (scripts/test-setup.sh): REDIS_PY_GIT (a git directory such as a mirror) or
# else a bare clone of https://github.com/redis/redis-py made on first use in target/redis-py.
# What their conftest.py imports is installed on first use into target/redis-py-venv.
# test_bf_reserve is left out: it also reserves cuckoo, count-min and top-k structures
# (CF.*, CMS.*, TOPK.*), which bloomery does not serve.
#
# Usage: scripts/redis-py-bf.sh [extra pytest arguments]   (SKIP_BUILD=1: use the module as built)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODULE=$ROOT/target/release/libbloomery_redis.so
WORK=$ROOT/target/redis-py
VENV=$ROOT/target/redis-py-venv

[ -x target/venv/bin/python ] && command -v redis-server >/dev/null || scripts/test-setup.sh
VERSION=$(target/venv/bin/python -c 'import redis; print(redis.__version__)')
TAG=v$VERSION

if [ -n "${REDIS_PY_GIT:-}" ]; then
  GIT=$REDIS_PY_GIT
else
  GIT=$WORK/git/redis-py.git
  if [ ! -d "$GIT" ]; then
    mkdir -p "$WORK/git"
    git clone --quiet --bare https://github.com/redis/redis-py "$GIT.part"
    mv "$GIT.part" "$GIT"
  fi
fi

TESTS=$WORK/$TAG
if [ ! -f "$TESTS/tests/test_bloom.py" ]; then
  rm -rf "$TESTS"
  mkdir -p "$TESTS"
  git --git-dir="$GIT" archive "$TAG" tests pytest.ini dev_requirements.txt | tar -x -C "$TESTS"
  # The module is "bloomery", not RedisBloom's "bf": redis-py's conftest raises at import
  # when a RedisBloom version check (on t-digest tests, not run here) finds no module "bf".
  # Forgetting the server's module list makes those checks skip instead.
  cat >"$TESTS/bloomery_plugin.py" <<'EOF'
import sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    sys.modules["tests.conftest"].REDIS_INFO.pop("modules", None)
EOF
fi

if ! "$VENV/bin/python" -c "import redis, pytest, pytest_asyncio, jwt, redis_entraid, coverage" 2>/dev/null; then
  python3 -m venv "$VENV"
  entraid=$(grep -i '^redis-entraid' "$TESTS/dev_requirements.txt" || echo redis-entraid)
  asyncio=$(grep -i '^pytest-asyncio' "$TESTS/dev_requirements.txt" || echo pytest-asyncio)
  "$VENV/bin/pip" install -q --disable-pip-version-check "redis==$VERSION" "pytest<9" "$asyncio" \
    pytest-timeout packaging PyJWT mock coverage "$entraid"
fi

if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release -q -p bloomery-redis
fi

PORT=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DATA=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DATA" --save "" --appendonly no \
  --loadmodule "$MODULE" >"$DATA/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do
  redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
  sleep 0.1
done

status=0
results=()
for protocol in 2 3; do
  log=$WORK/logs/resp$protocol.log
  mkdir -p "$(dirname "$log")"
  if (cd "$TESTS" && PYTHONPATH=. "$VENV/bin/python" -m pytest -p bloomery_plugin -p no:cacheprovider -rA \
    tests/test_bloom.py tests/test_asyncio/test_bloom.py -k "test_bf_" --deselect tests/test_bloom.py::test_bf_reserve \
    --redis-url="redis://127.0.0.1:$PORT" --redis-mod-url="redis://127.0.0.1:$PORT" --protocol="$protocol" "$@") \
    >"$log" 2>&1; then :; else status=1; fi
  results+=("RESP$protocol: $(grep -E '^=+ .*(passed|failed|error).* =+$' "$log" | tail -1 | tr -d '=' | xargs)")
  grep -E '^(FAILED|ERROR) ' "$log" || true
done
echo "redis-py $VERSION BF tests against bloomery (logs: target/redis-py/logs):"
printf '  %s\n' "${results[@]}"
exit $status
