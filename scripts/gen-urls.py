#!/usr/bin/env python3
"""Writes COUNT URL-like lines to stdout, a fraction REPEATS of them repeats of earlier
lines (chosen uniformly), deterministically from SEED.

Usage: gen-urls.py COUNT [REPEATS=0.2] [SEED=1]
"""
import random
import sys


def main() -> None:
    count = int(sys.argv[1])
    repeats = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    hosts = [f"shop{i}.example.com" for i in range(50)]
    seen = []
    out = sys.stdout
    buffer = []
    for _ in range(count):
        if seen and rng.random() < repeats:
            line = seen[rng.randrange(len(seen))]
        else:
            line = f"https://{rng.choice(hosts)}/item/{rng.getrandbits(40):010x}?ref={rng.getrandbits(20)}"
            seen.append(line)
        buffer.append(line)
        if len(buffer) >= 65536:
            out.write("\n".join(buffer) + "\n")
            buffer.clear()
    if buffer:
        out.write("\n".join(buffer) + "\n")


if __name__ == "__main__":
    main()
