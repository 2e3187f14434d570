#!/usr/bin/env bash
# All the tests: the Rust workspace, then the Redis module against real redis-server
# processes (pytest). Installs what it needs first (scripts/test-setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/test-setup.sh
cargo test --workspace --locked
cargo build --release --locked -p bloomery-redis
target/venv/bin/pytest -q crates/bloomery-redis/tests
