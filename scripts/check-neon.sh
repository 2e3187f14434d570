#!/usr/bin/env bash
# Checks the aarch64 NEON block kernel on this x86-64 machine: cross-compiles the real
# kernel.rs, scalar.rs and neon.rs with a small driver (scripts/neon-check/main.rs) for
# aarch64 and runs it under qemu, comparing every answer and block with the scalar kernel.
# The project's toolchain has no aarch64 standard library here (rustup cannot download
# one offline), so this uses Debian's rustc and libstd-rust-dev:arm64, installed if
# missing (about 300 MB). Not part of .ci/run; run it after changing the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! [ -x /usr/bin/rustc ] || ! [ -d /usr/lib/rustlib/aarch64-unknown-linux-gnu ] \
  || ! command -v qemu-aarch64-static >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
  dpkg --add-architecture arm64
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc libstd-rust-dev:arm64 gcc-aarch64-linux-gnu \
    libc6-dev-arm64-cross qemu-user-static >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/blocked"
cp scripts/neon-check/main.rs "$work/"
cp crates/bloomery/src/blocked/{kernel,scalar,neon}.rs "$work/blocked/"
/usr/bin/rustc --edition 2021 -O -A dead_code --target aarch64-unknown-linux-gnu -C linker=aarch64-linux-gnu-gcc \
  -o "$work/neon-check" "$work/main.rs"
qemu-aarch64-static -L /usr/aarch64-linux-gnu "$work/neon-check"
