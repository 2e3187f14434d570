#!/usr/bin/env bash
# Installs what the tests need beyond the Rust toolchain, if missing: redis-server (the
# module's tests run real servers), libclang (the redis-module crate's bindgen), and a
# Python virtualenv in target/venv with redis-py, pytest, xxhash and mmh3, and for the Python
# package (crates/bloomery-py) maturin, hypothesis, numpy and mypy (its stubtest checks the
# type stubs against the built module).
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

# redis-py and pytest for the module's suite; xxhash and mmh3 for the independent reader
# of docs/format.md (crates/bloomery-cli/tests/reader).
[ -x target/venv/bin/python ] || python3 -m venv target/venv
if ! target/venv/bin/python -c "import redis, pytest, xxhash, mmh3, hypothesis, numpy, mypy" 2>/dev/null \
  || [ ! -x target/venv/bin/maturin ]; then
  target/venv/bin/pip install -q --disable-pip-version-check \
    "redis>=5,<6" "pytest>=8,<9" "xxhash>=3,<5" "mmh3>=4,<6" \
    "maturin>=1.9,<2" "hypothesis>=6,<7" "numpy>=2,<3" "mypy>=2,<3"
fi
