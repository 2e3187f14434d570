#!/usr/bin/env bash
# Remakes the RedisBloom fixtures (crates/bloomery/tests/data/redisbloom/): filters made by
# RedisBloom 2.6.28 itself, their items, BF.SCANDUMP pieces, BF.INFO and an RDB file, which
# the library's and the module's tests load (see scripts/redisbloom-fixtures.py for what
# each file holds). Needs the peer module built from its public source:
# ../shared/peers/build-redisbloom.sh (or scripts/redisbloom-flow.sh, which builds it into
# target/peer/). The committed fixtures were made this way; the tests never need the peer.
# Usage: scripts/redisbloom-fixtures.sh [REDISBLOOM_SO]
set -euo pipefail
cd "$(dirname "$0")/.."
module=${1:-$(scripts/redisbloom-peer.sh)}
[ -f "$module" ] || { echo "no RedisBloom module at $module (build it first, see the header)" >&2; exit 2; }
scripts/test-setup.sh
target/venv/bin/python scripts/redisbloom-fixtures.py "$module" crates/bloomery/tests/data/redisbloom
