"""Threads: batch calls release the GIL, many threads share one filter, nothing is lost."""

import threading
import time

import numpy as np
import pytest

from bloomery import BloomFilter, ConcurrentBloomFilter

THREADS = 8


def run_threads(target, count=THREADS):
    errors = []

    def wrapped(index):
        try:
            target(index)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


@pytest.mark.parametrize("make", [lambda: BloomFilter(400_000, kind="blocked"),
                                  lambda: BloomFilter(400_000, kind="classic"),
                                  lambda: BloomFilter(10_000, kind="scalable"),
                                  lambda: ConcurrentBloomFilter(400_000, kind="blocked"),
                                  lambda: ConcurrentBloomFilter(400_000, kind="classic")],
                         ids=["blocked", "classic", "scalable", "concurrent-blocked", "concurrent-classic"])
def test_many_threads_adding_and_looking_up_lose_nothing(make):
    f = make()
    per_thread = 40_000

    def work(index):
        start = index * per_thread
        mine = np.arange(start, start + per_thread)
        half = per_thread // 2
        f.add_many(mine[:half])  # a batch, GIL released
        for value in range(start + half, start + half + 2000):  # single adds, GIL held
            f.add(value)
        f.update(range(start + half + 2000, start + per_thread))
        # Lookups while the other threads still write.
        assert all(f.contains_many(mine))
        assert all(value in f for value in range(start, start + 100))

    run_threads(work)
    assert all(f.contains_many(np.arange(THREADS * per_thread)))


def test_batch_calls_release_the_gil():
    """While one thread runs a long contains_many, another thread's Python code runs."""
    f = BloomFilter(1_000_000)
    items = np.arange(3_000_000)
    f.add_many(items)
    started, done = threading.Event(), threading.Event()
    ticks_during = []

    def lookup():
        started.set()
        f.contains_many(items)
        done.set()

    thread = threading.Thread(target=lookup)
    thread.start()
    started.wait()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0)
    ticks_during.append(ticks)
    thread.join()
    # Holding the GIL for the whole call would leave this thread a handful of ticks (one
    # per switch interval at most); released per chunk, it runs throughout.
    assert ticks_during[0] > 50, ticks_during


def test_changes_wait_for_a_running_batch_and_reads_see_whole_batches():
    """A single add (GIL held) while batches run in other threads (GIL released)."""
    f = BloomFilter(2_000_000, kind="classic")
    stop = threading.Event()

    def batches(index):
        values = np.arange(index * 1_000_000, (index + 1) * 1_000_000)
        while not stop.is_set():
            f.add_many(values)
            assert all(f.contains_many(values[:1000]))

    workers = [threading.Thread(target=batches, args=(i,)) for i in range(2)]
    for worker in workers:
        worker.start()
    try:
        for i in range(2000):
            f.add(f"single {i}")
            assert f"single {i}" in f
        copy = f.copy()
        assert all(f"single {i}" in copy for i in range(2000))
    finally:
        stop.set()
        for worker in workers:
            worker.join()


def test_union_in_two_threads_in_opposite_order_does_not_deadlock():
    a, b = BloomFilter(100_000), BloomFilter(100_000)
    a.add_many(range(50_000))
    b.add_many(range(50_000, 100_000))

    def merge(index):
        for _ in range(50):
            if index % 2:
                a.__ior__(b)
            else:
                b.__ior__(a)

    run_threads(merge, 4)
    assert all(a.contains_many(range(100_000))) and all(b.contains_many(range(100_000)))


@pytest.mark.parametrize("mode", ["r+", "a"])
def test_close_while_another_thread_adds_keeps_every_add_that_returned(tmp_path, mode):
    """close() saves (mode "r+") or seals (mode "a") and closes in one step: an add() in
    another thread either returns before it, and its item is in the file, or raises
    ValueError after it. Saving and then closing let adds in between return, their items
    in neither the file nor a usable filter."""
    path = tmp_path / "f.bloom"
    BloomFilter(2_000_000, kind="classic").save(path)  # a save that takes a while
    f = BloomFilter.open(path, mode)
    added = []
    started = threading.Event()

    def adder():
        i = 0
        while True:
            try:
                f.add(f"item{i}")
            except ValueError:
                return
            added.append(f"item{i}")
            i += 1
            if i == 1000:
                started.set()

    thread = threading.Thread(target=adder)
    thread.start()
    started.wait()
    f.close()
    thread.join()
    with BloomFilter.open(path) as g:
        missing = [item for item in added if item not in g]
    assert not missing, f"{len(missing)} of {len(added)} adds that returned are not in the file"


def test_a_thread_waiting_for_a_filter_lets_the_others_run():
    """A thread whose single add waits for another's long call on the same filter (here a
    save of some 60 MB) waits without the GIL: the other Python threads run meanwhile. It
    held the GIL while it waited, so every thread stopped until the save ended."""
    import os
    import tempfile

    f = BloomFilter(50_000_000)
    f.add_many(range(0, 50_000_000, 7))
    ticks, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    with tempfile.TemporaryDirectory() as directory:
        saver = threading.Thread(target=f.save, args=(os.path.join(directory, "big.bloom"),))
        ticker = threading.Thread(target=tick)
        ticker.start()
        saver.start()
        time.sleep(0.02)
        started = time.monotonic()
        f.add("during")
        waited = (started, time.monotonic())
        saver.join()
        stop.set()
        ticker.join()
    if waited[1] - waited[0] < 0.05:
        pytest.skip(f"the save ended before the add had to wait ({waited[1] - waited[0]:.3f} s)")
    during = [at for at in ticks if waited[0] < at < waited[1]]
    assert len(during) >= 3, (waited[1] - waited[0], len(during))
    assert "during" in f


@pytest.mark.parametrize(
    "make",
    [
        lambda n: BloomFilter(n, kind="classic"),
        lambda n: BloomFilter(n, kind="blocked"),
        lambda n: ConcurrentBloomFilter(n, kind="classic"),
        lambda n: ConcurrentBloomFilter(n, kind="blocked"),
    ],
    ids=["classic", "blocked", "concurrent-classic", "concurrent-blocked"],
)
def test_ctrl_c_ends_a_long_batch_between_chunks_with_what_it_added(make):
    """Ctrl-C during `add_many` of a large array ends the batch at the next chunk, with a
    note of how many items went in (all of them present); during `contains_many` it ends
    the lookups. Both once took the interrupt only after the whole batch, however long.
    The signal comes from a thread, as a terminal's Ctrl-C does, once the batch has
    begun."""
    import os
    import re
    import signal

    n = 5 * 10**7
    f = make(n)
    items = np.arange(n, dtype="i8")

    def interrupt_once(started):
        while not started():
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    # The add has begun once the filter holds items.
    poke = threading.Thread(target=interrupt_once, args=(lambda: len(f) > 0,))
    poke.start()
    with pytest.raises(KeyboardInterrupt) as raised:
        f.add_many(items)
    poke.join()
    (note,) = raised.value.__notes__
    pattern = r"the (\d+) items of this call before the interruption were added, the rest were not"
    added = int(re.fullmatch(pattern, note)[1])
    assert 0 < added < n
    assert all(f.contains_many(items[:added]))

    # Lookups: a fiftieth of the batch, timed, against the whole one interrupted 50 ms in
    # (begun by then: the call starts as soon as the event is set). Taken whole, it would
    # last about 50 such times; ended at a chunk, far less.
    start = time.perf_counter()
    f.contains_many(items[: n // 50])
    fiftieth = time.perf_counter() - start
    begun = threading.Event()
    poke = threading.Thread(target=interrupt_once, args=(lambda: begun.is_set() and time.sleep(0.05) is None,))
    poke.start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        begun.set()
        f.contains_many(items)
    took = time.perf_counter() - start
    poke.join()
    assert took < 0.05 + 25 * fiftieth, (took, fiftieth)
