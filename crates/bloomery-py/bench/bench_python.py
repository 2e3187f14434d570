"""bloomery against rbloom and pybloom-live, in one run: N str items and N ints (random
62-bit values), add and
lookup, one at a time and in batches, and memory. Run it through scripts/bench-python.sh
(which makes the virtualenv); `python bench_python.py --help` for the options.

Each library and item type runs in a fresh child process, so that its memory figure (the
growth of the process's resident set while the filter is made and filled) is its own.
Lookups probe the N added items then N items never added, so each answer kind is half.
Times are wall time (--cpu-time: the process's CPU time, which on a busy machine leaves out
the time it waited for a core). Memory: "filter MB" is the size each library reports for its bits; "RSS MB" the growth of
the process while the filter was made and filled (allocator and page granularity included).

- "one at a time": a Python loop calling add / `in` per item, what most code does.
- "batch": the library's call for many items where it has one (bloomery add_many /
  contains_many, rbloom update); where it has none, the fastest plain Python form of it
  (a list comprehension of `in`, a loop of add), marked "(loop)".
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import time

LIBRARIES = ["bloomery", "bloomery-classic", "bloomery-concurrent", "rbloom", "pybloom-live"]


def rss_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def make_items(kind, n, offset=0):
    if kind == "str":
        return [f"https://example.com/item/{i}" for i in range(offset, offset + n)]
    # Random 62-bit ints (splitmix64 of the index, as the Rust benchmarks' keys): keys in
    # arithmetic progression would let a filter whose bit positions are a linear function
    # of the key (Python's hash of an int is the int) walk its memory in order.
    mask = (1 << 64) - 1
    keys = []
    for i in range(offset, offset + n):
        z = (i * 0x9E3779B97F4A7C15 + 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        keys.append((z ^ (z >> 31)) >> 2)
    return keys


def make_filter(library, n, fpp):
    if library == "bloomery":
        import bloomery

        return bloomery.BloomFilter(n, fpp, kind="blocked")
    if library == "bloomery-classic":
        import bloomery

        return bloomery.BloomFilter(n, fpp, kind="classic")
    if library == "bloomery-concurrent":
        import bloomery

        return bloomery.ConcurrentBloomFilter(n, fpp, kind="blocked")
    if library == "rbloom":
        import rbloom

        return rbloom.Bloom(n, fpp)
    if library == "pybloom-live":
        import pybloom_live

        return pybloom_live.BloomFilter(capacity=n, error_rate=fpp)
    raise ValueError(library)


def filter_bytes(library, bf):
    """The bits the library says its filter has, in bytes."""
    if library.startswith("bloomery"):
        return bf.memory_bytes
    if library == "rbloom":
        return bf.size_in_bits // 8
    return bf.num_bits // 8


CLOCK = time.perf_counter


def timed(function):
    """Wall time by default; with --cpu-time the process's CPU time (all the work runs in
    its one thread; on a busy machine this leaves out the time it waited for a core)."""
    gc.collect()
    start = CLOCK()
    result = function()
    return CLOCK() - start, result


def one_at_a_time_add(bf, items):
    add = bf.add
    for item in items:
        add(item)


def one_at_a_time_lookup(bf, items):
    found = 0
    for item in items:
        if item in bf:
            found += 1
    return found


def batch_add(library, bf, items, array):
    if library.startswith("bloomery"):
        bf.add_many(array if array is not None else items)
        return "add_many" + (" (numpy int64)" if array is not None else " (list)")
    if library == "rbloom":
        bf.update(items)
        return "update"
    one_at_a_time_add(bf, items)
    return "(loop)"


def batch_lookup(library, bf, items, array):
    """The answers (counted by the caller, after the clock stops: the count is the
    benchmark's check, not the lookup) and how they were asked for."""
    if library.startswith("bloomery"):
        answers = bf.contains_many(array if array is not None else items)
        return answers, "contains_many" + (" (numpy int64)" if array is not None else " (list)")
    return [item in bf for item in items], "(list comprehension)"


def best(repeat, make, measure):
    """The fastest time of `repeat` runs of measure(make()) (a busy machine only slows runs
    down), and the last run's result. A run's result is freed before the next run starts:
    kept, a batch lookup's 2N answers (160 MB at N = 10^7) make the next run's list take
    memory this virtual machine has not touched yet, whose first touch is slow, and the
    runs after the first measured that instead of the lookups."""
    times, result = [], None
    for _ in range(repeat):
        result = None
        elapsed, result = timed(lambda target=make(): measure(target))
        times.append(elapsed)
    return min(times), result


def child(library, kind, n, fpp, numpy_batches, repeat, floors=False):
    """Runs one library on one item type; prints a JSON line."""
    items = make_items(kind, n)
    fresh = make_items(kind, n, offset=n)
    probes = items + fresh
    array = probe_array = None
    if kind == "int" and numpy_batches and library.startswith("bloomery"):
        import numpy

        array = numpy.array(items, dtype=numpy.int64)
        probe_array = numpy.array(probes, dtype=numpy.int64)
    result = {"library": library, "kind": kind, "n": n}
    before = rss_bytes()
    bf = make_filter(library, n, fpp)
    result["add_one"], _ = timed(lambda: one_at_a_time_add(bf, items))
    result["memory_rss"] = rss_bytes() - before
    result["memory_filter"] = filter_bytes(library, bf)
    if repeat > 1:
        result["add_one"] = min(result["add_one"], best(
            repeat - 1, lambda: make_filter(library, n, fpp), lambda f: one_at_a_time_add(f, items))[0])
    result["lookup_one"], found = best(repeat, lambda: bf, lambda f: one_at_a_time_lookup(f, probes))
    result["false_positives"] = found - n
    result["add_batch"], result["add_batch_how"] = best(
        repeat, lambda: make_filter(library, n, fpp), lambda f: batch_add(library, f, items, array))
    bf = make_filter(library, n, fpp)
    batch_add(library, bf, items, array)
    result["lookup_batch"], (answers, result["lookup_batch_how"]) = best(
        repeat, lambda: bf, lambda f: batch_lookup(library, f, probes, probe_array))
    found = sum(answers[:n])
    if found < n:
        raise SystemExit(f"{library}: false negatives ({found} of {n} added items found)")
    if floors:
        # The batch add without its memory traffic, to see what is left of it: into a
        # filter for FLOOR_FILTER items (a few KB, in cache: no miss on the filter), and
        # then also with FLOOR_ITEMS items repeated to N (the items in cache as well).
        small = lambda: make_filter(library, FLOOR_FILTER, fpp)  # noqa: E731
        result["add_batch_small_filter"], _ = best(
            repeat, small, lambda f: batch_add(library, f, items, array))
        reused = [items[i % FLOOR_ITEMS] for i in range(n)]
        reused_array = None if array is None else array[[i % FLOOR_ITEMS for i in range(n)]]
        result["add_batch_cached"], _ = best(
            repeat, small, lambda f: batch_add(library, f, reused, reused_array))
    print(json.dumps(result))


FLOOR_FILTER = 10_000
FLOOR_ITEMS = 1_000


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=10_000_000, help="items of each type (default 10^7)")
    parser.add_argument("--fpp", type=float, default=0.01)
    parser.add_argument("--libraries", default=",".join(LIBRARIES), help="comma-separated, of: " + ", ".join(LIBRARIES))
    parser.add_argument("--kinds", default="str,int")
    parser.add_argument("--no-numpy", action="store_true", help="batch ints as lists, not numpy arrays")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each measure this many times and keep the fastest (default 1)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every library this many times, in alternating order, and report the "
                             "median (range) of the per-round ratios to rbloom (default 1)")
    parser.add_argument("--cpu-time", action="store_true", help="time with the process's CPU time")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--floors", action="store_true",
                        help="also time each batch add into a filter for 10^4 items (no filter misses) and "
                             "of 1000 items repeated to N (items in cache too): what the batch add costs "
                             "without its memory traffic")
    parser.add_argument("--child", nargs=2, metavar=("LIBRARY", "KIND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    global CLOCK
    if args.cpu_time:
        CLOCK = time.process_time
    if args.child:
        child(args.child[0], args.child[1], args.n, args.fpp, not args.no_numpy, args.repeat, args.floors)
        return
    results = []
    libraries = args.libraries.split(",")
    for round_index in range(args.rounds):
        # This machine's speed drifts from minute to minute: each round runs the libraries
        # back to back, first to last on even rounds and last to first on odd ones, so
        # that a ratio taken within a round compares runs made under the same conditions.
        order = libraries if round_index % 2 == 0 else libraries[::-1]
        for kind in args.kinds.split(","):
            for library in order:
                command = [sys.executable, __file__, "-n", str(args.n), "--fpp", str(args.fpp),
                           "--repeat", str(args.repeat), "--child", library, kind]
                if args.cpu_time:
                    command.append("--cpu-time")
                if args.no_numpy:
                    command.append("--no-numpy")
                if args.floors:
                    command.append("--floors")
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                result = json.loads(output.strip().splitlines()[-1])
                result["round"] = round_index
                results.append(result)
                report(results[-1:], header=len(results) == 1)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)
    print()
    ratios(results)
    if args.floors:
        floors(results)


def report(results, header):
    if header:
        print(f"{'library':<20} {'items':<5} {'add 1-by-1':>12} {'look 1-by-1':>12} {'add batch':>12} "
              f"{'look batch':>12} {'filter MB':>10} {'RSS MB':>8} {'fp rate':>8}  batch calls")
    for r in results:
        n = r["n"]

        def rate(seconds, count):
            return f"{count / seconds / 1e6:8.2f} M/s"

        print(f"{r['library']:<20} {r['kind']:<5} {rate(r['add_one'], n):>12} {rate(r['lookup_one'], 2 * n):>12} "
              f"{rate(r['add_batch'], n):>12} {rate(r['lookup_batch'], 2 * n):>12} "
              f"{r['memory_filter'] / 1e6:10.2f} {r['memory_rss'] / 1e6:8.1f} {r['false_positives'] / n:8.4f}  "
              f"{r['add_batch_how']}; {r['lookup_batch_how']}")


def ratios(results):
    """bloomery's throughput over rbloom's, per measure and item type: with several rounds,
    the median (and range) of the ratios taken within each round."""
    by = {(r["library"], r["kind"], r.get("round", 0)): r for r in results}
    rounds = sorted({r.get("round", 0) for r in results})
    for kind in sorted({r["kind"] for r in results}):
        parts = []
        for measure in ("add_one", "lookup_one", "add_batch", "lookup_batch"):
            values = sorted(
                by[("rbloom", kind, index)][measure] / by[("bloomery", kind, index)][measure]
                for index in rounds
                if ("bloomery", kind, index) in by and ("rbloom", kind, index) in by
            )
            if not values:
                continue
            middle = len(values) // 2
            median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
            spread = f" ({values[0]:.2f}-{values[-1]:.2f})" if len(values) > 1 else ""
            parts.append(f"{measure} {median:.2f}x{spread}")
        if parts:
            label = f" (median of {len(rounds)} rounds)" if len(rounds) > 1 else ""
            print(f"bloomery (blocked) / rbloom, {kind}{label}: " + ", ".join(parts))


def floors(results):
    """Batch add in ns an item: the whole, without filter misses, without any memory
    traffic (--floors); the fastest of the rounds."""
    print(f"\nbatch add, ns an item (fastest round)\n{'library':<20} {'items':<5} {'N-item filter':>14} "
          f"{'10^4 filter':>12} {'+ 1000 items':>13} {'5x rbloom':>10}")
    fastest = {}
    for r in results:
        if "add_batch_cached" not in r:
            continue
        key = (r["library"], r["kind"])
        values = [r[m] / r["n"] * 1e9 for m in ("add_batch", "add_batch_small_filter", "add_batch_cached")]
        fastest[key] = [min(a, b) for a, b in zip(fastest.get(key, values), values)]
    for (library, kind), (whole, small, cached) in sorted(fastest.items()):
        theirs = fastest.get(("rbloom", kind))
        need = f"{theirs[0] / 5:10.2f}" if theirs and library != "rbloom" else ""
        print(f"{library:<20} {kind:<5} {whole:14.2f} {small:12.2f} {cached:13.2f} {need}")


if __name__ == "__main__":
    main()
