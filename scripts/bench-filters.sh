#!/usr/bin/env bash
# The filter comparison (issue: fastest Bloom filter in Rust), in one run:
# bloomery's blocked and Guava-compatible filters, fastbloom, sbbf-rs-safe, bloomfilter,
# a random-read loop (the physical limit) and Guava itself on the JVM, same keys.
# Installs a JDK and Guava's jar from Debian if missing. Pass --quick for n <= 10^7.
# Output: the Markdown tables on stdout, also saved to target/bench-filters.md.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v javac >/dev/null || [ ! -f /usr/share/java/guava.jar ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq default-jdk-headless libguava-java >/dev/null
  else
    echo "note: javac or /usr/share/java/guava.jar missing; the Guava row will be skipped" >&2
  fi
fi

mkdir -p target
cargo bench -p bloomery --bench compare -- "$@" | tee target/bench-filters.md
