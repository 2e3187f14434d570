#!/usr/bin/env bash
# The Redis module's pytest suite and scripts/acl-categories.sh against Redis servers other
# than Debian's 7.0 (jemalloc): Redis 7.2.6 and 7.4.1 built from source with MALLOC=libc,
# whose malloc aligns to 16 bytes only (a module allocator that relied on jemalloc's size
# classes for 64-byte alignment stopped such a server at its first BF.ADD), and whose
# RedisModule_AddACLCategory (7.4) gives the @bloom category.
#
# The sources come from REDIS_GIT (a git directory, e.g. a mirror) or a bare clone of
# github.com/redis/redis made in target/peer/git; the builds go to target/peer/redis-<tag>.
# Not part of scripts/test.sh (it fetches and builds Redis: a few minutes on 2 cores).
# Usage: scripts/redis-builds.sh [TAG ...]   (default: 7.2.6 7.4.1)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
tags=("$@")
[ ${#tags[@]} -gt 0 ] || tags=(7.2.6 7.4.1)

scripts/test-setup.sh
cargo build --release -q -p bloomery-redis -p bloomery-cli
git_dir=${REDIS_GIT:-$ROOT/target/peer/git/redis.git}
if [ ! -d "$git_dir" ]; then
  mkdir -p "$(dirname "$git_dir")"
  git clone --quiet --bare https://github.com/redis/redis "$git_dir.part"
  mv "$git_dir.part" "$git_dir"
fi

status=0
summary=()
for tag in "${tags[@]}"; do
  build=$ROOT/target/peer/redis-$tag
  if [ ! -x "$build/src/redis-server" ]; then
    rm -rf "$build" && mkdir -p "$build"
    git --git-dir="$git_dir" archive "$tag" | tar -x -C "$build"
    make -C "$build" -j"$(nproc)" BUILD_TLS=no MALLOC=libc redis-server >"$build/build.log" 2>&1 ||
      { echo "redis $tag did not build: $build/build.log" >&2; exit 1; }
  fi
  server=$build/src/redis-server
  result=$(REDIS_SERVER=$server target/venv/bin/pytest -q crates/bloomery-redis/tests 2>&1 | tail -n 1) || status=1
  acl=$(REDIS_72_SERVER=$server SKIP_BUILD=1 scripts/acl-categories.sh 2>&1 | tail -n 1) || status=1
  summary+=("redis $tag (MALLOC=libc): pytest: $result; $acl")
done
printf '%s\n' "${summary[@]}"
exit $status
