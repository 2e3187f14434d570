#!/usr/bin/env bash
# Builds RedisBloom 2.6.28 (the peer the Redis module is compared with) from its public
# source on first use and prints the path of the module: target/peer/redisbloom-2.6.28.so,
# or REDISBLOOM_SO if that names a built module.
#
# The sources come from git directories: REDISBLOOM_GIT, TDIGEST_GIT and SDK_GIT (mirrors,
# for example), or else bare clones of RedisBloom/RedisBloom, RedisBloom/t-digest-c and
# RedisLabsModules/RedisModulesSDK made in target/peer/git. Needs gcc. The build compiles
# the module's C files directly (RedisBloom's own build wants its `readies` tooling).
# Usage: scripts/redisbloom-peer.sh   (progress on stderr, the path on stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TAG=v2.6.28
PEER_DIR=$ROOT/target/peer
PEER_MODULE=${REDISBLOOM_SO:-$PEER_DIR/redisbloom-${TAG#v}.so}

# A git directory holding `url`'s history: $given if set, else a bare clone in target/peer.
gitdir() {
  local given=$1 name=$2 url=$3
  if [ -n "$given" ]; then
    echo "$given"
    return
  fi
  local dir=$PEER_DIR/git/$name.git
  if [ ! -d "$dir" ]; then
    mkdir -p "$PEER_DIR/git"
    git clone --quiet --bare "$url" "$dir.part" >&2
    mv "$dir.part" "$dir"
  fi
  echo "$dir"
}

if [ "${1:-}" = --gitdir ]; then # used by redisbloom-flow.sh for the flow tests' sources
  gitdir "${REDISBLOOM_GIT:-}" RedisBloom https://github.com/RedisBloom/RedisBloom
  exit
fi

if [ ! -f "$PEER_MODULE" ]; then
  echo "building RedisBloom $TAG into $PEER_MODULE" >&2
  rb=$(gitdir "${REDISBLOOM_GIT:-}" RedisBloom https://github.com/RedisBloom/RedisBloom)
  td=$(gitdir "${TDIGEST_GIT:-}" t-digest-c https://github.com/RedisBloom/t-digest-c)
  sdk=$(gitdir "${SDK_GIT:-}" RedisModulesSDK https://github.com/RedisLabsModules/RedisModulesSDK)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  git --git-dir="$rb" archive "$TAG" | tar -x -C "$work"
  # The two submodules at the commits the tag records.
  git --git-dir="$td" archive "$(git --git-dir="$rb" rev-parse "$TAG:deps/t-digest-c")" |
    tar -x -C "$work/deps/t-digest-c"
  git --git-dir="$sdk" archive "$(git --git-dir="$rb" rev-parse "$TAG:deps/RedisModulesSDK")" |
    tar -x -C "$work/deps/RedisModulesSDK"
  mkdir -p "$(dirname "$PEER_MODULE")"
  (
    cd "$work"
    gcc -std=gnu99 -O2 -DNDEBUG -fPIC -shared -D_GNU_SOURCE -DREDIS_MODULE_TARGET -DREDISMODULE_SDK_RLEC \
      -I. -Isrc -Ideps/RedisModulesSDK -Ideps -Ideps/murmur2 -Ideps/t-digest-c/src \
      deps/bloom/bloom.c deps/murmur2/MurmurHash2.c deps/rmutil/util.c src/rebloom.c src/sb.c src/cf.c \
      src/rm_topk.c src/rm_tdigest.c src/topk.c src/rm_cms.c src/cms.c deps/t-digest-c/src/tdigest.c \
      -o "$PEER_MODULE.part" -lm
  )
  mv "$PEER_MODULE.part" "$PEER_MODULE"
fi
echo "$PEER_MODULE"
