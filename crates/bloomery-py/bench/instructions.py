"""One operation over N items, for scripts/python-instructions.sh to count under callgrind:
  python instructions.py LIBRARY OPERATION KIND N
LIBRARY: bloomery (blocked), bloomery-classic or rbloom; OPERATION: add, in (N/2 added
items and N/2 fresh ones), add_batch, in_batch, or "setup:" before one of them for the same
preparation without the operation (the baseline); KIND: str, int (multiples of 7919: one
CPython digit each at the script's N = 20,000) or int62 (the benchmark's random 62-bit
ints, three digits each). The loops run inside
functions (local variables), as in the benchmark."""

import sys


def main():
    library, operation, kind, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    setup_only = operation.startswith("setup:")
    operation = operation.removeprefix("setup:")
    if kind == "str":
        items = [f"https://example.com/item/{i}" for i in range(n)]
        fresh = [f"https://example.com/fresh/{i}" for i in range(n // 2)]
    elif kind == "int62":
        # bench_python.py's ints: random 62-bit values, three CPython digits each.
        from bench_python import make_items

        items = make_items("int", n)
        fresh = make_items("int", n // 2, offset=n)
    else:
        items = list(range(0, n * 7919, 7919))
        fresh = list(range(n * 7919 + 1, n * 7919 + 1 + (n // 2) * 7919, 7919))
    if library == "rbloom":
        import rbloom

        bf = rbloom.Bloom(n, 0.01)
    else:
        import bloomery

        bf = bloomery.BloomFilter(n, 0.01, kind="classic" if library == "bloomery-classic" else "blocked")
    if operation.startswith("in"):
        bf.update(items)
        probes = items[: n // 2] + fresh
    if not setup_only:
        run(library, operation, bf, items if operation.startswith("add") else probes)


def run(library, operation, bf, items):
    if operation == "add":
        add = bf.add
        for item in items:
            add(item)
    elif operation == "in":
        for item in items:
            if item in bf:
                pass
    elif operation == "add_batch":
        if library == "rbloom":
            bf.update(items)
        else:
            bf.add_many(items)
    elif operation == "in_batch":
        if library == "rbloom":
            [item in bf for item in items]
        else:
            bf.contains_many(items)


if __name__ == "__main__":
    main()
