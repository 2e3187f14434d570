#!/usr/bin/env bash
# All the tests: the Rust workspace (test and release profiles), then with pytest the
# independent reader of docs/format.md against the tool, the Redis module against real
# redis-server processes, and the Python package (crates/bloomery-py). Installs what it
# needs first (scripts/test-setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/test-setup.sh
# One build of each profile, nothing to rebuild from: no incremental-compilation state,
# which would double the disk that the test build takes.
export CARGO_INCREMENTAL=0
cargo test --workspace --locked
# Again in the release profile, what users build (without debug assertions; with overflow
# checks, see Cargo.toml: this machine's rustc 1.95 miscompiles some unchecked code in
# optimised builds, rust-lang/rust#158206).
cargo test --workspace --locked --release
# The library once more as its dependents build it (Cargo's default release: no overflow
# checks; the `dependent` profile in Cargo.toml).
cargo test -p bloomery --locked --profile dependent
cargo build --release --locked -p bloomery-redis -p bloomery-cli
# The Python package (crates/bloomery-py), built from this tree into the venv first: the
# Redis suite reads RedisBloom's dumps with it too.
VIRTUAL_ENV="$PWD/target/venv" target/venv/bin/maturin develop --release --locked -q \
  -m crates/bloomery-py/Cargo.toml
target/venv/bin/pytest -q crates/bloomery-redis/tests crates/bloomery-cli/tests/reader
# The Python package's suite (which also drives the CLI built above).
target/venv/bin/pytest -q crates/bloomery-py/tests
# A short fuzzing smoke run of every parser target (20 s each; skipped, saying so, where
# no nightly toolchain is installed). The long campaigns: scripts/fuzz.sh, docs/fuzzing.md.
scripts/fuzz.sh --smoke
