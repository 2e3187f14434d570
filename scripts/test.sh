#!/usr/bin/env bash
# All the tests: the Rust workspace (test and release profiles), then with pytest the
# independent reader of docs/format.md against the tool and the Redis module against real
# redis-server processes. Installs what it needs first (scripts/test-setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/test-setup.sh
cargo test --workspace --locked
# Again in the release profile: this machine's rustc 1.95 miscompiles some code only with
# optimisations and without overflow checks (rust-lang/rust#158206), which the test
# profile (overflow checks on) would hide.
cargo test --workspace --locked --release
cargo build --release --locked -p bloomery-redis -p bloomery-cli
target/venv/bin/pytest -q crates/bloomery-redis/tests crates/bloomery-cli/tests/reader
