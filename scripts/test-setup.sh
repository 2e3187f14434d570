#!/usr/bin/env bash
# Installs what the tests need beyond the Rust toolchain, if missing: redis-server (the
# module's tests run real servers), libclang (the redis-module crate's bindgen), and a
# Python virtualenv in target/venv with redis-py and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
# Not `ldconfig | grep libclang`: libclang-cpp (a different library) may be there alone.
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x target/venv/bin/pytest ]; then
  python3 -m venv target/venv
  target/venv/bin/pip install -q --disable-pip-version-check "redis>=5,<6" "pytest>=8,<9"
fi
