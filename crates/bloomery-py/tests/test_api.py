"""Every method of BloomFilter, for every kind."""

import array
import copy
import ctypes
import mmap
import os
import re
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest

import bloomery
from bloomery import BloomFilter, ConcurrentBloomFilter

KINDS = bloomery.kinds()


def prints_ok(script):
    """Runs a Python script in a process of its own (one that sets its own limits), which
    must print "ok" and end with status 0."""
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]


def test_kinds_are_the_libraries_variants():
    assert KINDS == [
        "classic", "blocked", "counting", "scalable", "retouched", "allowlisted", "rotating", "split-block",
        "redisbloom", "scalable-blocked",
    ]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_add_and_contains_every_item_type(kind):
    f = BloomFilter(1000, 0.01, kind)
    items = ["text", "ünïcödé ✓ 𝄞", "", b"raw\x00bytes", bytearray(b"ba"), memoryview(b"mv"), 0, -1, 2**63 - 1, -(2**63), 7]
    for item in items:
        f.add(item)
    for item in items:
        assert item in f
    absent = [f"absent {i}" for i in range(200)]
    assert sum(item in f for item in absent) < 20
    assert f.kind == kind


class Text(str):
    """A str subclass: read as a str, the same bytes."""


def test_a_mixed_list_batch_is_the_same_items_as_one_at_a_time():
    """add_many/contains_many on a list read compact ASCII str in place and everything
    else through the general road: the same bytes either way."""
    items = ["ascii", "ünïcödé ✓ 𝄞", Text("sub"), Text("süb"), "", b"bytes", 5, -5, "x" * 1000]
    batch, single = BloomFilter(1000, 0.001), BloomFilter(1000, 0.001)
    batch.add_many(items)
    for item in items:
        single.add(item)
    assert batch == single
    assert batch.contains_many(items) == [True] * len(items)
    assert "sub" in batch and "süb".encode() in batch and Text("ascii") in single


def test_in_answers_as_contains_many_on_every_road(tmp_path):
    """`item in f` answers exact ASCII str and 64-bit ints in the filter's own slot and
    passes everything else, errors included, to the general road: the same answers and
    the same exceptions either way."""
    f = BloomFilter(1000, 0.001)
    added = ["ascii", "ünï", Text("sub"), 5, -(2**63), 2**63 - 1, 2**63, 2**64 - 1, b"raw"]
    f.add_many(added)
    probes = added + ["other", "ötherü", Text("süb"), 6, -7, 2**63 + 1, b"raw2", bytearray(b"raw")]
    assert [item in f for item in probes] == f.contains_many(probes)
    assert [item in f for item in probes] == [f.__contains__(item) for item in probes]
    assert all(item in f for item in added)
    for bad, error in [([], TypeError), (1.5, TypeError), (2**64, ValueError), (-(2**63) - 1, ValueError)]:
        with pytest.raises(error):
            bad in f  # noqa: B015
    f.save(tmp_path / "f.bloom")
    mapped = BloomFilter.open(tmp_path / "f.bloom", "r")
    assert [item in mapped for item in probes] == f.contains_many(probes)
    mapped.close()
    for item in ["ascii", 5, b"raw"]:
        with pytest.raises(ValueError, match="closed filter"):
            item in mapped  # noqa: B015


def test_add_returns_whether_the_filter_changed():
    f = BloomFilter(1000)
    assert f.add("a") is True
    assert f.add("a") is False


@pytest.mark.parametrize("kind", KINDS)
def test_add_answers_alike_on_every_road(kind, tmp_path):
    """`f.add(item)` adds exact ASCII str and 64-bit ints on its own short road and passes
    every other call (other items, a keyword, a filter that cannot change) to the general
    one: the same answers, the same bits and the same exceptions either way."""
    items = ["ascii", "ascii", "ünï", Text("sub"), 5, 5, -(2**63), 2**63 - 1, 2**63, 2**64 - 1, b"raw", "", 0]
    short, general = BloomFilter(1000, 0.01, kind), BloomFilter(1000, 0.01, kind)
    assert [short.add(item) for item in items] == [general.add(item=item) for item in items]

    def same_filters():
        # A rotating filter also keeps its inserts' clock times (milliseconds), which two
        # filters filled one after the other need not share: there, the same answers.
        if kind == "rotating":
            probes = items + ["absent", 6, b"other"]
            return short.contains_many(probes) == general.contains_many(probes)
        return short == general

    assert same_filters() and len(short) == len(general)
    for bad, error in [([], TypeError), (1.5, TypeError), (2**64, ValueError), (-(2**63) - 1, ValueError)]:
        with pytest.raises(error):
            short.add(bad)
    assert same_filters()
    short.save(tmp_path / "f.bloom")
    mapped = BloomFilter.open(tmp_path / "f.bloom", "r")
    for item in ["ascii", 5, b"raw", "new", 6]:
        with pytest.raises(ValueError) as short_error:
            mapped.add(item)
        with pytest.raises(ValueError) as general_error:
            mapped.add(item=item)
        assert str(short_error.value) == str(general_error.value)
    mapped.close()
    with pytest.raises(ValueError, match="closed filter"):
        mapped.add("ascii")


def test_ints_read_from_their_digits_are_their_8_bytes():
    """On the CPython versions whose int layout is known (3.9-3.11, 30-bit digits), exact
    ints are read from their digits where they lie (checked against the C API at import),
    and that road must be the one these tests cover there. Every int of each digit count
    and of both 64-bit edges, added one at a time and as a list, is the item of its 8
    little-endian bytes."""
    if (
        sys.implementation.name == "cpython"
        and (3, 9) <= sys.version_info[:2] <= (3, 11)
        and sys.int_info.bits_per_digit == 30
        and sys.maxsize == 2**63 - 1
    ):
        assert bloomery._bloomery._int_road() == "digits"
    values = []
    for shift in (0, 1, 29, 30, 31, 59, 60, 61, 62, 63):
        for delta in (-1, 0, 1):
            values += [(1 << shift) + delta, -((1 << shift) + delta)]
    state = 7
    for _ in range(500):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        values += [state - 2**63, state >> 2, -(state >> 2), state >> 33]
    values = [v for v in values if -(2**63) <= v < 2**64]
    as_bytes = [struct.pack("<q" if v < 2**63 else "<Q", v) for v in values]
    for kind in ("blocked", "classic"):
        one, batch, raw = (BloomFilter(10**4, 0.01, kind) for _ in range(3))
        for value in values:
            one.add(value)
        batch.add_many(values)
        raw.add_many(as_bytes)
        assert one == raw and batch == raw
        assert all(item in one for item in as_bytes) and all(value in raw for value in values)
        assert raw.contains_many(values) == [True] * len(values)


def test_equal_items_across_types_are_one_item():
    """The item road: a str is its UTF-8 bytes, an int its 8 little-endian bytes."""
    f = BloomFilter(1000, kind="classic")
    f.add("héllo")
    assert "héllo".encode() in f
    f.add(12345)
    assert struct.pack("<q", 12345) in f
    assert np.int64(12345) in f and np.uint16(12345) in f
    f.add(True)  # an int: 1
    assert 1 in f
    # 2**64 - 1 is -1 as 8 bytes (the CLI's --format long does the same).
    f.add(2**64 - 1)
    assert -1 in f


def test_items_that_are_not_items():
    f = BloomFilter(100)
    with pytest.raises(TypeError, match="not float"):
        f.add(1.5)
    with pytest.raises(TypeError, match="not NoneType"):
        None in f  # noqa: B015
    with pytest.raises(ValueError, match=r"item 18446744073709551616 is not a 64-bit integer"):
        f.add(2**64)
    with pytest.raises(ValueError, match="not a 64-bit integer"):
        f.add(-(2**63) - 1)
    with pytest.raises(UnicodeEncodeError):
        f.add("\udc80")
    assert len(f) == 0


def test_update_takes_several_iterables_and_generators():
    f = BloomFilter(1000)
    f.update(["a", "b"], (i for i in range(50)), {"c"}, range(100, 103))
    assert all(f.contains_many(["a", "b", "c", 0, 49, 100, 102]))
    assert f.contains_many(["d", 50, 103]).count(True) <= 1


def test_add_many_and_contains_many_on_lists_tuples_and_iterables():
    f = BloomFilter(10_000)
    items = [f"item {i}" for i in range(5000)]
    f.add_many(items)
    assert f.contains_many(items) == [True] * 5000
    assert f.contains_many(tuple(items[:10])) == [True] * 10
    assert f.contains_many(iter(items[:10])) == [True] * 10
    fresh = f.contains_many([f"fresh {i}" for i in range(5000)])
    assert len(fresh) == 5000 and sum(fresh) < 100
    assert f.contains_many([]) == []


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="True and False are immortal from 3.12 on")
@pytest.mark.parametrize("kind", ["blocked", "classic"])
def test_contains_many_counts_a_reference_for_each_answer(kind):
    # The answer lists are built in place, with True's and False's counts raised once
    # each: a count short would free True or False while a list still holds them.
    f = BloomFilter(1000, kind=kind)
    f.add_many(range(300))
    probes = list(range(300)) + [f"fresh {i}" for i in range(700)]
    # Counts taken before any assert: pytest's rewritten asserts keep their results.
    true_before, false_before = sys.getrefcount(True), sys.getrefcount(False)
    answers = f.contains_many(probes)
    true_with, false_with = sys.getrefcount(True), sys.getrefcount(False)
    found = answers.count(True)
    del answers
    true_after, false_after = sys.getrefcount(True), sys.getrefcount(False)
    assert found >= 300
    assert (true_with - true_before, false_with - false_before) == (found, len(probes) - found)
    assert (true_after, false_after) == (true_before, false_before)


@pytest.mark.parametrize("dtype", ["<i8", ">i8", "<u8", "<i4", ">i4", "<u4", "<i2", "<u2"])
def test_numpy_integer_arrays_are_int_items(dtype):
    values = np.array([0, 1, 2, 100, 1000, 30000], dtype=dtype)
    f = BloomFilter(1000, kind="classic")
    f.add_many(values)
    for value in values.tolist():
        assert value in f
    g = BloomFilter(1000, kind="classic")
    g.update(values.tolist())
    assert f == g
    assert f.contains_many(values) == [True] * len(values)


def test_negative_and_large_numpy_values_match_python_ints():
    values = np.array([-1, -(2**63), 2**63 - 1, -42], dtype=np.int64)
    f = BloomFilter(1000)
    f.add_many(values)
    assert all(v in f for v in [-1, -(2**63), 2**63 - 1, -42])
    unsigned = np.array([2**64 - 1, 2**63], dtype=np.uint64)
    g = BloomFilter(1000)
    g.add_many(unsigned)
    assert 2**64 - 1 in g and -1 in g and 2**63 in g
    small = np.array([-5], dtype=np.int32)
    h = BloomFilter(1000)
    h.add_many(small)
    assert -5 in h


def test_an_array_of_wider_elements_is_not_one_item():
    """A numpy int32 array (even of one element) given to add or in: its raw bytes as one
    item would never be found as the int items its elements look like, which add_many
    makes of them; refused. Byte buffers are one item of their bytes."""
    f = BloomFilter(1000)
    for one in [np.array([36], dtype=np.int32), np.array([1, 2], dtype=np.int64), array.array("i", [7])]:
        with pytest.raises(TypeError, match="not one item: add_many"):
            f.add(one)
        with pytest.raises(TypeError, match="not one item"):
            one in f  # noqa: B015
    assert len(f) == 0
    f.add_many(np.array([36], dtype=np.int32))
    assert 36 in f
    for raw in [np.frombuffer(b"raw", dtype=np.uint8), np.frombuffer(b"raw", dtype=np.int8), array.array("b", b"raw")]:
        f.add(raw)
        assert b"raw" in f and raw in f
    with pytest.raises(TypeError, match="astype"):
        f.add_many(np.array([5], dtype=np.int8))
    with pytest.raises(TypeError, match=r"^a buffer of 'd' elements is not one item: bytes\(\) of it"):
        f.add(np.array([1.5]))
    # A 0-d buffer of bytes (no numpy integer, which is an int through __index__) has no
    # bytes in a row: said as such, not as "not memoryview" beside "a buffer of bytes".
    for zero_d in (memoryview(b"\x05").cast("B", shape=[]), ctypes.c_ubyte(5)):  # ctypes' is "<B"
        for call in (f.add, f.__contains__):
            with pytest.raises(TypeError, match=r"^a buffer item is its bytes in one or more dimensions: this one has none"):
                call(zero_d)


def test_array_module_and_strided_arrays():
    f = BloomFilter(1000)
    f.add_many(array.array("q", [1, 2, 3]))
    assert f.contains_many(array.array("i", [1, 2, 3, 4])) [:3] == [True] * 3
    with pytest.raises(ValueError, match="C-contiguous"):
        f.add_many(np.arange(10)[::2])
    # Elements that are no items: a TypeError, as for the same array given as one item.
    for call in (f.add_many, f.contains_many, f.update):
        with pytest.raises(TypeError, match="holds no items"):
            call(np.array([1.0, 2.0]))
    # item_size= that cuts the elements is refused (it made 8 items of 6 int32 values).
    with pytest.raises(ValueError, match=r"item_size=3 cuts the buffer's 4-byte '.?i' elements"):
        f.add_many(np.arange(6, dtype="i4"), item_size=3)
    f.add_many(np.arange(6, dtype="i4"), item_size=8)
    assert f.contains_many(np.arange(6, dtype="i4"), item_size=8) == [True] * 3


def test_byte_buffers_need_an_item_size():
    f = BloomFilter(1000)
    # A bytes object alone is one item, as a str is: said so by every batch call (update's
    # refusal told it to pass an item_size= that update does not take).
    for call in (f.update, f.add_many, f.contains_many):
        for data in (b"ab", bytearray(b"ab")):
            with pytest.raises(TypeError, match="a bytes object is one item, not a batch"):
                call(data)
    f.add_many(b"aaaabbbbcccc", item_size=4)
    assert f.contains_many([b"aaaa", b"bbbb", b"cccc"]) == [True] * 3
    assert f.contains_many(bytearray(b"aaaabbbb"), item_size=4) == [True, True]
    assert f.contains_many(np.frombuffer(b"ccccdddd", dtype=np.uint8), item_size=4)[0]
    # A buffer of bytes other than a bytes object, given whole: it needs item_size=.
    with pytest.raises(TypeError, match="needs item_size="):
        f.add_many(np.frombuffer(b"aaaabbbb", dtype=np.uint8))
    with pytest.raises(ValueError, match="does not split into items of 3 bytes"):
        f.add_many(b"aaaa", item_size=3)
    with pytest.raises(ValueError, match="item_size must be an integer from 1 to"):
        f.add_many(b"aaaa", item_size=0)
    with pytest.raises(TypeError, match="for buffers"):
        f.add_many(["a"], item_size=1)
    with pytest.raises(TypeError, match="one item, not a batch"):
        f.add_many("abc")


def test_a_bad_item_in_a_batch_is_an_error_naming_its_type():
    f = BloomFilter(1000)
    with pytest.raises(TypeError, match="not float"):
        f.add_many(["a", 1.5])
    with pytest.raises(TypeError, match="not float"):
        f.contains_many(["a", 1.5])


def test_batches_larger_than_a_chunk():
    f = BloomFilter(100_000)
    items = list(range(60_000))
    f.add_many(items)
    assert all(f.contains_many(np.arange(60_000)))
    # A list that changes length is read as it is at each chunk.
    assert len(f.contains_many(items)) == 60_000


def test_list_and_tuple_subclasses_give_the_items_their_iteration_gives():
    # A subclass may keep its items elsewhere and override __iter__ and __len__: its
    # storage (empty here) was once read directly, so update() added nothing, silently.
    class Lazy(list):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def __len__(self):
            return self.n

        def __iter__(self):
            return iter(f"lazy-{i}" for i in range(self.n))

    class Upper(tuple):
        def __iter__(self):
            return iter(item.upper() for item in tuple.__iter__(self))

    for f in (BloomFilter(1000, kind="blocked"), BloomFilter(1000, kind="classic"),
              bloomery.ConcurrentBloomFilter(1000), bloomery.ConcurrentBloomFilter(1000, kind="classic")):
        f.update(Lazy(3))
        f.add_many(Upper(("a", "b")))
        assert f.contains_many(Lazy(3)) == [True, True, True]
        assert all(item in f for item in ["lazy-0", "lazy-1", "lazy-2", "A", "B"])
        assert f.contains_many(Upper(("a", "b"))) == [True, True]


@pytest.mark.parametrize("kind", ["blocked", "classic", "counting", "concurrent-blocked", "concurrent-classic"])
@pytest.mark.parametrize("bad_at", [5, 16_389, 40_000])
@pytest.mark.parametrize("road", ["list", "tuple", "generator", "raising generator"])
def test_a_batch_stops_at_a_bad_item_after_adding_every_item_before_it(kind, bad_at, road):
    # Once only whole chunks of 16,384 items went in, so a counting filter's caller who
    # took the items before the bad one back out with remove() took out items never added.
    if kind.startswith("concurrent-"):
        f = bloomery.ConcurrentBloomFilter(100_000, 0.01, kind.split("-")[1])
    else:
        f = BloomFilter(100_000, 0.01, kind)
    good = [f"item-{i}" for i in range(bad_at)]
    if road == "raising generator":
        def items():
            yield from good
            raise RuntimeError("the source failed")

        batch, error = items(), RuntimeError
    else:
        batch, error = good + [1.5] + ["after"], TypeError
        batch = {"list": batch, "tuple": tuple(batch), "generator": iter(batch)}[road]
    with pytest.raises(error) as raised:
        f.add_many(batch)
    assert all(f.contains_many(good))
    notes = getattr(raised.value, "__notes__", [])
    if sys.version_info >= (3, 11):
        assert notes == [f"the {bad_at} items of this call before the bad one were added, the rest were not"]
    if kind == "counting":
        for item in good:
            f.remove(item)
        assert len(f) == 0


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11's")
def test_update_counts_the_items_of_every_iterable_before_the_bad_one():
    for f in (BloomFilter(1000), BloomFilter(1000, kind="classic"), bloomery.ConcurrentBloomFilter(1000)):
        with pytest.raises(TypeError) as raised:
            f.update(["a", "b", "c"], ["d", 1.5, "e"])
        assert raised.value.__notes__ == ["the 4 items of this call before the bad one were added, the rest were not"]
        assert f.contains_many(["a", "b", "c", "d", "e"]) == [True, True, True, True, False]
        # An argument that is no iterable at all ends the call so too.
        with pytest.raises(TypeError) as raised:
            f.update(["x", "y"], 5, ["z"])
        assert raised.value.__notes__ == [
            "the 2 items of this call's iterables before the bad argument were added, the rest were not"
        ]
        assert "y" in f and "z" not in f
        with pytest.raises(TypeError) as raised:
            f.update(["w"], 5)
        assert raised.value.__notes__ == [
            "the 1 item of this call's iterables before the bad argument was added, the rest were not"
        ]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11's")
def test_a_call_that_added_nothing_says_so():
    """A bad first argument or first item: the note says nothing was added (it said "the 0
    items of this call before the bad one were added", as if items had been tried)."""
    for f in (BloomFilter(1000), BloomFilter(1000, kind="classic"), bloomery.ConcurrentBloomFilter(1000)):
        with pytest.raises(TypeError, match="a str is one item, not a batch") as raised:
            f.update("abc")
        assert raised.value.__notes__ == ["no item of this call was added"]
        with pytest.raises(TypeError) as raised:
            f.update([], 5)
        assert raised.value.__notes__ == ["no item of this call was added"]
        for call in (lambda: f.update([1.5, "a"]), lambda: f.add_many([1.5, "a"]), lambda: f.update([], [1.5])):
            with pytest.raises(TypeError) as raised:
                call()
            assert raised.value.__notes__ == ["no item of this call was added: the bad one was its first"]
        assert "a" not in f


def test_a_batch_of_large_items_is_copied_a_few_megabytes_at_a_time(tmp_path):
    # 16,384 references to one 100 KB bytes object cost Python 130 KB; the kinds that copy
    # items copied a whole chunk of them at once: 1.6 GB, an abort under a memory limit.
    script = tmp_path / "large.py"
    script.write_text(
        "import resource\n"
        "import bloomery\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + (400 << 20), resource.RLIM_INFINITY))\n"
        "item = b'x' * 100_000\n"
        "for kind in ['classic', 'counting']:\n"
        "    f = bloomery.BloomFilter(1000, 0.01, kind)\n"
        "    f.update([item] * 16_384)\n"
        "    assert f.contains_many((item,) * 16_384) == [True] * 16_384\n"
        "print('ok')\n"
    )
    prints_ok(script)


def test_a_filter_past_the_address_space_limit_is_a_memory_error_not_an_abort(tmp_path):
    # Under `ulimit -v` (RLIMIT_AS) an allocation fails, which aborts a Rust program: the
    # size check counted only MemAvailable, and made from bytes and copies were not checked.
    path = tmp_path / "f.bloom"
    BloomFilter(50_000_000).save(path)
    script = tmp_path / "limited.py"
    script.write_text(
        "import resource, sys\n"
        "from bloomery import BloomFilter\n"
        f"data = open({str(path)!r}, 'rb').read()\n"
        f"mapped = BloomFilter.open({str(path)!r})\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + len(data) * 3 // 2, resource.RLIM_INFINITY))\n"
        "for make in [lambda: BloomFilter(200_000_000), lambda: BloomFilter.from_bytes(data),\n"
        "             lambda: mapped.copy(), lambda: mapped.to_bytes()]:\n"
        "    try:\n"
        "        make()\n"
        "    except MemoryError as error:\n"
        "        assert 'more than the memory' in str(error), error\n"
        "    else:\n"
        "        sys.exit('made past the limit')\n"
        "print('ok')\n"
    )
    prints_ok(script)


def limited_script(tmp_path, setup, headroom, calls):
    """A script that makes `setup`, limits its address space to what it uses plus
    `headroom` (an expression), then expects `MemoryError` of each of `calls`."""
    script = tmp_path / "limited.py"
    script.write_text(
        "import resource, sys\n"
        "from bloomery import BloomFilter, ConcurrentBloomFilter\n"
        f"{setup}\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        f"resource.setrlimit(resource.RLIMIT_AS, (size + {headroom}, resource.RLIM_INFINITY))\n"
        f"for call in [{', '.join('lambda: ' + call for call in calls)}]:\n"
        "    try:\n"
        "        call()\n"
        "    except MemoryError as error:\n"
        "        assert 'more than the memory' in str(error), error\n"
        "    else:\n"
        "        sys.exit('made past the limit')\n"
        "print('ok')\n"
    )
    return script


def test_comparing_filters_past_the_address_space_limit_is_a_memory_error_not_an_abort(tmp_path):
    # `==` copied both filters' bytes unchecked, and a subset check copied the first filter
    # and both envelopes after its checked snapshots: an abort under `ulimit -v`.
    setup = "f = BloomFilter(10**7, 0.01, 'classic'); g = f.copy(); n = len(f.to_bytes())"
    prints_ok(limited_script(tmp_path, setup, "n * 3 // 2", ["f == g"]))
    prints_ok(limited_script(tmp_path, setup, "n * 5 // 2", ["f.issubset(g)", "f <= g", "f >= g"]))


@pytest.mark.parametrize("kind", ["retouched", "allowlisted"])
def test_copies_of_filters_with_lists_past_the_limit_are_a_memory_error_not_an_abort(tmp_path, kind):
    # The memory check measured a copy by building the filter's file payload (its bits
    # copied, then its lists), so the check itself aborted under `ulimit -v` (this test,
    # on that code: "memory allocation of ... bytes failed").
    setup = (
        f"import pickle; f = BloomFilter(10**7, 0.01, {kind!r}); f.update(['x', 'y']); g = f.copy()\n"
        "n = len(f.to_bytes())"
    )
    calls = ["f.copy()", "f.to_bytes()", "pickle.dumps(f)", "f == g", "f | g"]
    prints_ok(limited_script(tmp_path, setup, "n // 2", calls))


def test_reading_bytes_past_the_address_space_limit_is_a_memory_error_not_an_abort(tmp_path):
    # `from_bytes` and the like copied their argument before the memory check: an abort
    # under `ulimit -v` for bytes whose copy did not fit.
    setup = (
        "import pickle; f = BloomFilter(10**7, 0.01, 'classic'); data = f.to_bytes()\n"
        "array = bytearray(data); pickled = pickle.dumps(f); n = len(data); del f"
    )
    calls = [
        "BloomFilter.from_bytes(data)", "BloomFilter.from_bytes(array)",
        "ConcurrentBloomFilter.from_bytes(data)", "BloomFilter.from_guava_bytes(data)",
        "BloomFilter.from_redisbloom_scandump(array)",
    ]  # fmt: skip
    for call in calls:
        prints_ok(limited_script(tmp_path, setup, "n // 2", [call]))
    # Unpickling makes the bytes first (which must fit), then reads them as from_bytes.
    prints_ok(limited_script(tmp_path, setup, "n * 3 // 2", ["pickle.loads(pickled)"]))


def test_foreign_bytes_past_the_address_space_limit_are_a_memory_error_not_a_panic(tmp_path):
    # `to_guava_bytes` and `to_redisbloom_scandump` had no memory check, and pyo3's
    # PyBytes::new panics on a failed allocation: a PanicException, not MemoryError.
    setup = "f = BloomFilter(10**7, 0.01, 'classic'); r = BloomFilter(10**7, 0.01, 'redisbloom'); n = len(f.to_bytes())"
    prints_ok(limited_script(tmp_path, setup, "n * 3 // 2", ["f.to_guava_bytes()", "r.to_redisbloom_scandump()"]))


def test_union_and_intersection_operators():
    a, b = BloomFilter(1000), BloomFilter(1000)
    a.update(["x", "both"])
    b.update(["y", "both"])
    union = a | b
    assert all(item in union for item in ["x", "y", "both"])
    assert union == a.union(b)
    inter = a & b
    assert "both" in inter
    assert inter == a.intersection(b)
    assert "x" not in inter and "y" not in inter
    assert "y" not in a  # operands unchanged
    c = a.copy()
    c |= b
    assert c == union
    c &= a
    assert c == a
    c |= c
    assert c == a
    with pytest.raises(ValueError, match="filters are incompatible"):
        a | BloomFilter(2000)
    with pytest.raises(ValueError, match="variants differ: blocked vs classic"):
        a |= BloomFilter(1000, kind="classic")
    with pytest.raises(TypeError):
        a | {"x"}


def test_union_of_kinds_without_intersection():
    a, b = BloomFilter(1000, kind="counting"), BloomFilter(1000, kind="counting")
    a.add("x")
    b.add("y")
    assert all(item in a | b for item in ["x", "y"])
    with pytest.raises(ValueError, match="counting filters do not support intersection"):
        a & b


@pytest.mark.parametrize("kind", ["classic", "blocked", "split-block"])
def test_subset_checks(kind):
    small, large, other = BloomFilter(1000, kind=kind), BloomFilter(1000, kind=kind), BloomFilter(1000, kind=kind)
    small.update(["a", "b"])
    large.update(["a", "b", "c"])
    other.update(["z"])
    assert small.issubset(large) and small <= large
    assert large.issuperset(small) and large >= small
    assert not large.issubset(small)
    assert not small.issubset(other)
    assert small.issubset(small)
    assert BloomFilter(1000, kind=kind) <= small  # the empty filter


def test_a_filter_combined_with_itself_is_checked_as_with_any_other(tmp_path):
    """`f |= f`, `f &= f` and `f <= f` returned at once: a closed filter, one opened
    read-only and kinds without the operation were taken, and a counting filter's `f |= f`
    kept its counts where `f | f` (and the CLI's merge of a file with itself) doubles them,
    so one remove then answered the item absent in one and present in the other."""
    path = tmp_path / "f.bloom"
    made = BloomFilter(1000)
    made.add("x")
    made.save(path)
    closed = BloomFilter.open(path, "r+")
    closed.close()
    for operation in (lambda f: f.__ior__(f), lambda f: f.__iand__(f), lambda f: f <= f):
        with pytest.raises(ValueError, match="closed filter"):
            operation(closed)
    read_only = BloomFilter.open(path)
    with pytest.raises(ValueError, match="read-only|mode 'r'"):
        read_only |= read_only
    assert "x" in read_only
    counting = BloomFilter(1000, kind="counting")
    counting.add("x")
    doubled = counting | counting
    counting |= counting
    assert counting == doubled
    counting.remove("x")
    assert "x" in counting  # added twice over, removed once
    with pytest.raises(ValueError, match="counting filters do not support intersection"):
        counting &= counting
    with pytest.raises(ValueError, match="counting filters do not support subset checks"):
        counting <= counting  # noqa: B015
    f = BloomFilter(1000)
    f.update(["a", "b"])
    same = f.copy()
    f |= f
    f &= f
    assert f == same and f <= f


def test_subset_needs_compatible_filters():
    with pytest.raises(ValueError, match="scalable filters do not support subset checks"):
        BloomFilter(10, kind="scalable").issubset(BloomFilter(10, kind="scalable"))
    with pytest.raises(ValueError, match="counting filters do not support subset checks"):
        BloomFilter(10, kind="counting") >= BloomFilter(10, kind="counting")  # noqa: B015


@pytest.mark.parametrize("kind", KINDS)
def test_copy_is_independent(kind):
    f = BloomFilter(1000, kind=kind)
    f.add("a")
    for g in (f.copy(), copy.copy(f), copy.deepcopy(f)):
        assert g == f and g is not f
        g.add("b")
        assert "b" in g and g != f
        assert "b" not in f


@pytest.mark.parametrize("kind", KINDS)
def test_clear(kind):
    f = BloomFilter(1000, kind=kind)
    empty = f.to_bytes()
    f.update(range(100))
    f.clear()
    assert len(f) == 0 and 5 not in f
    if kind != "rotating":  # it keeps its newest generation's start time
        assert f.to_bytes() == empty


def test_clear_of_a_loaded_or_unpickled_filter_of_every_kind():
    # Once only filters made here (whose parameters the object kept) cleared, beside
    # classic, blocked and split-block ones: a counting filter from bytes, or any
    # growing one after a pickle round trip, refused.
    import pickle

    for kind in KINDS:
        made = BloomFilter(100, kind=kind)
        with warnings.catch_warnings():
            # A rotating filter forgets the first of these, and says so.
            warnings.simplefilter("ignore", RuntimeWarning)
            made.update(range(500))
        for f in (BloomFilter.from_bytes(made.to_bytes()), pickle.loads(pickle.dumps(made))):
            f.clear()
            assert len(f) == 0 and 5 not in f, kind
            f.add("a")
            assert "a" in f


def test_a_closed_filter_refuses_an_empty_batch_too(tmp_path):
    BloomFilter(100).save(tmp_path / "f.bloom")
    f = BloomFilter.open(tmp_path / "f.bloom")
    f.close()
    for call in (lambda: f.contains_many([]), lambda: f.contains_many(["a"]), lambda: "a" in f):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_remove_from_a_counting_filter():
    f = BloomFilter(100, kind="counting")
    f.add("x")
    f.add("x")
    f.remove("x")
    assert "x" in f
    f.remove("x")
    assert "x" not in f
    with pytest.raises(ValueError, match="item is not in the filter: nothing was removed"):
        f.remove("x")
    with pytest.raises(ValueError, match="classic filters do not support remove"):
        BloomFilter(100, kind="classic").remove("x")


def test_len_approx_items_and_fpp():
    f = BloomFilter(10_000, 0.01)
    assert len(f) == 0 and f.approx_items == 0
    f.add_many(range(5000))
    assert 4800 <= len(f) <= 5200
    assert len(f) == f.approx_items
    assert 0 < f.expected_fpp < 0.01
    assert f.fpp == f.expected_fpp
    assert f.capacity == 10_000
    assert f.memory_bytes >= 10_000 * 8 / 8
    s = BloomFilter(100, kind="scalable")
    s.add_many(range(250))
    assert 245 <= len(s) <= 250  # counted as added (an item taken for present is not)
    assert len(s) == s.approx_items
    assert BloomFilter(100, kind="split-block").capacity is None


def test_equality():
    a, b = BloomFilter(1000), BloomFilter(1000)
    assert a == b
    a.add(1)
    assert a != b
    b.add(1)
    assert a == b
    assert a != BloomFilter(1000, seed=1)
    assert a != BloomFilter(1000, kind="classic")
    assert a != "not a filter"
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_repr_and_info():
    f = BloomFilter(1000, 0.01, kind="classic")
    f.add("a")
    text = repr(f)
    assert text.startswith("<bloomery.BloomFilter kind='classic' approx_items=1 ")
    assert "capacity=" in text and "memory_bytes=1200" in text
    info = dict(f.info())
    assert info["hash functions"] == "7"
    assert info["bits"] == "9600"


def test_constructor_options():
    assert BloomFilter(1000, seed=7) != BloomFilter(1000, seed=0)
    r = BloomFilter(100, kind="rotating", generations=3)
    assert dict(r.info())["generations"] == "1"
    s = BloomFilter(10, kind="scalable", scaling=False)
    with pytest.raises(ValueError, match="filter is full: it holds its capacity of 10 items and does not grow"):
        for i in range(1000):
            s.add(i)
    # A batch says what became of its items: those before the refused one went in.
    batch = BloomFilter(10, kind="scalable", scaling=False)
    with pytest.raises(ValueError, match="the items of this call before the refused one were added"):
        batch.update(str(i) for i in range(20))
    assert all(str(i) in batch for i in range(10)) and len(batch) == 10
    with pytest.raises(ValueError, match=r"fpp \(false-positive probability\) must be in \(0, 1\), got 2"):
        BloomFilter(100, 2.0)
    with pytest.raises(ValueError, match="unknown kind 'nope': one of classic, blocked, counting"):
        BloomFilter(100, kind="nope")
    with pytest.raises(ValueError, match="generations must be"):
        BloomFilter(100, kind="rotating", generations=1)


def test_a_rotating_batch_that_forgets_its_own_items_warns():
    """One add_many/update call of more items than a rotating filter keeps forgets its own
    first items: a RuntimeWarning says how many, as the CLI's add warns (it said nothing,
    and 0 in f was False after add_many(range(5000)))."""
    f = BloomFilter(1000, 0.01, "rotating", generations=2)
    with pytest.warns(RuntimeWarning, match=r"this call added 5000 items to a rotating filter that keeps 2 "
                      r"generations of 1000: the first (\d+) of them are forgotten already") as caught:
        f.add_many(range(5000))
    forgotten = int(re.search(r"the first (\d+) of them", str(caught[0].message)).group(1))
    answers = f.contains_many(range(5000))
    # Exact: every item the call gave after them is kept, the last one before them is not.
    assert all(answers[forgotten:]) and not answers[forgotten - 1] and 0 not in f
    assert answers[:forgotten].count(False) > 0.9 * forgotten
    # update: the call's items, over all its iterables.
    g = BloomFilter(1000, 0.01, "rotating", generations=2)
    with pytest.warns(RuntimeWarning, match="this call added 2600 items"):
        g.update(range(1500), (str(i) for i in range(1100)))
    # The items are added all the same, also when the warning is an error.
    h = BloomFilter(10, 0.01, "rotating", generations=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="forgotten already"):
            h.add_many([str(i) for i in range(100)])
    assert "99" in h


def test_a_rotating_batch_that_forgets_and_then_fails_says_so_in_its_error():
    """A batch that forgot items of its own and then failed (a bad item, Ctrl-C) has no
    warning, which comes only when a call ends: its error says it in a note, beside the
    count of items added (it said they were added, not that some were forgotten)."""
    for call in [
        lambda f: f.add_many(list(range(5000)) + [None]),
        lambda f: f.update(range(3000), [1.5]),
    ]:
        f = BloomFilter(1000, 0.01, "rotating", generations=2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(TypeError) as raised:
                call(f)
        added, forgotten = raised.value.__notes__
        assert re.match(r"the (5000|3000) items of this call before the bad one were added", added)
        first = int(re.fullmatch(r"of the items added, the first (\d+) are forgotten already: "
                                 r"the rotating filter's generations rotated out during the call",
                                 forgotten)[1])  # fmt: skip
        assert 0 not in f and first > 0


def test_a_rotating_batch_within_its_generations_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = BloomFilter(1000, 0.01, "rotating", generations=2)
        f.add_many(range(1999))  # a full generation and most of a second: all kept
        f.add_many(range(1999, 3000))  # its first item's generation is still kept
        assert all(f.contains_many(range(1999, 3000)))
        f.update(range(100), ["a", "b"])  # forgets the earlier calls' first items, not its own
        f.add("x")
        # Other kinds never forget.
        BloomFilter(10, 0.01, "scalable").add_many(range(5000))
        BloomFilter(10, 0.01, "classic").add_many(range(5000))


def test_documented_attributes_answer_as_their_docstrings_say(tmp_path):
    """capacity, add's answer, mode and closed, as documented (property docstrings' examples
    are not collected by doctest: checked here)."""
    assert (BloomFilter(10, 0.01, "classic").capacity, BloomFilter(10, 0.01).capacity) == (13, 10)
    s = BloomFilter(100, 0.01, "scalable")
    assert s.capacity == 100
    s.update(range(1000))
    assert s.capacity > 1000  # all its sub-filters' so far
    assert BloomFilter(100, kind="split-block").capacity is None
    c = BloomFilter(100, 0.01, "counting")
    assert c.add(7) and not c.add(7)  # "was it new", though the counters went up
    f = BloomFilter(10)
    assert f.mode is None and not f.closed
    f.save(tmp_path / "m.bloom")
    assert f.mode == "w" and f.path == str(tmp_path / "m.bloom")
    f.close()
    assert not f.closed and f.add("x") and "x" in f  # in memory: nothing to let go of
    with BloomFilter.open(tmp_path / "m.bloom") as g:
        assert g.mode == "r" and not g.closed
    assert g.closed


def test_a_list_that_changes_size_during_a_batch_is_a_runtime_error():
    """An item whose __index__ clears (or grows) the list being read: a RuntimeError, as
    Python's "changed size during iteration", not fewer answers than items (3 for 5)."""
    items = []

    class Clears:
        def __index__(self):
            items.clear()
            return 42

    class Grows:
        def __index__(self):
            items.extend(range(100, 120))
            return 43

    for make in (lambda: BloomFilter(100), lambda: BloomFilter(100, kind="classic"), lambda: ConcurrentBloomFilter(100),
                 lambda: ConcurrentBloomFilter(100, kind="classic")):
        for change, after in [(Clears, 0), (Grows, 25)]:
            f = make()
            items[:] = [1, 2, change(), 3, 4]
            with pytest.raises(RuntimeError, match=f"^list changed size during the batch call \\(from 5 to {after} items\\)"):
                f.contains_many(items)
            items[:] = [1, 2, change(), 3, 4]
            with pytest.raises(RuntimeError, match="list changed size") as raised:
                f.add_many(items)
            assert f.contains_many([1, 2]) == [True, True]  # the items before it went in
            if sys.version_info >= (3, 11):
                # No item was bad: the note counts those read before the change (the one
                # whose conversion changed the list among them).
                assert raised.value.__notes__ == [
                    "the 3 items of this call read before the list changed size were added, the rest were not"]
            items[:] = [1, 2, change(), 3, 4]
            with pytest.raises(RuntimeError, match="list changed size"):
                f.update(["a"], items)
    # A list that does not change size is read as it is, whatever its items' conversion does.
    items[:] = [1, 2, 3]

    class Swaps:
        def __index__(self):
            items[0] = 7
            return 44

    items.append(Swaps())
    items.append(5)
    assert len(BloomFilter(100).contains_many(items)) == 5


def test_item_types_as_documented():
    """The item rules the class docstring, the stub's _Item and the README state."""

    def same_item(a, b):
        f, g = BloomFilter(100), BloomFilter(100)
        f.add(a)
        g.add(b)
        return f == g

    assert same_item(True, 1) and same_item(False, 0)
    assert same_item(np.array(5), 5) and same_item(np.array(5, dtype="u1"), 5)
    assert same_item(np.array([5], dtype="u1"), b"\x05")
    assert same_item(array.array("B", b"ab"), b"ab") and same_item(np.frombuffer(b"ab", dtype="u1"), b"ab")
    with pytest.raises(TypeError, match=r"not numpy\.bool_?: bool\(x\) is one"):
        BloomFilter(100).add(np.bool_(True))
    with pytest.raises(TypeError, match="is not one item"):
        BloomFilter(100).add(np.array([5], dtype="i8"))


def test_numpy_times_are_refused_as_items_their_bytes_count_their_unit():
    """A numpy datetime64 exports its count of its unit as 8 raw bytes: taken as an item,
    the same day added in days and asked for in seconds (equal to numpy) answered absent.
    Scalars, arrays (read element by element) and every call refuse them, saying how to
    pass ints of one unit, which then find the same instant whatever unit it came in. (As
    bytes, `add_many(day, item_size=8)`, a scalar was still taken, and an array given as one
    item or 0-d was numpy's "only integer scalar arrays" error.)"""
    day = np.datetime64("2024-01-02", "D")
    same_in_seconds = np.datetime64("2024-01-02T00:00:00", "s")
    assert day == same_in_seconds
    times = [day, same_in_seconds, np.timedelta64(3, "h"), np.datetime64("NaT"),
             np.array([day]), np.array([3], dtype="m8[h]")]
    for make in (lambda: BloomFilter(100), lambda: BloomFilter(100, kind="classic"), lambda: ConcurrentBloomFilter(100)):
        f = make()
        for time in times:
            batch = time if isinstance(time, np.ndarray) else [time]
            calls = [lambda: f.add_many(batch), lambda: f.contains_many(batch), lambda: f.update(batch),
                     lambda: f.add(time), lambda: time in f,  # an array as one item too
                     lambda: f.add_many(time, item_size=8), lambda: f.contains_many(time, item_size=8),
                     lambda: f.add(np.array(time.reshape(-1)[0] if isinstance(time, np.ndarray) else time))]  # 0-d
            for call in calls:
                with pytest.raises(TypeError, match=r"numpy\.(datetime|timedelta)64 is not a bloomery item.*astype\('(datetime|timedelta)64\[ns\]'\)\.astype\('int64'\)"):
                    call()
        assert f.contains_many(range(100)) == [False] * 100  # nothing went in
        # The advised conversion: one item for the instant, whatever its unit.
        f.add(day.astype("datetime64[ns]").astype("int64"))
        assert same_in_seconds.astype("datetime64[ns]").astype("int64") in f
        assert f.contains_many(np.array([same_in_seconds]).astype("datetime64[ns]").astype("int64")) == [True]



def test_32_bit_integer_items_are_4_bytes_given_as_bytes_or_item_size_4():
    """As the stub's _Item and the README say: every int item is 8 bytes, a numpy int32
    element's too, so a 32-bit integer item (integerFunnel, CLI --format int, a Parquet
    INT32 filter) is found by its 4 bytes, struct.pack("<i", x) or item_size=4."""
    values = [1, -5, 70000, 2**31 - 1, -(2**31)]
    as_int32 = np.array(values, dtype="<i4")
    f = BloomFilter(1000, 1e-6)
    f.add_many([struct.pack("<i", value) for value in values])
    assert f.contains_many(as_int32, item_size=4) == [True] * len(values)
    assert f.contains_many(memoryview(as_int32).cast("B"), item_size=4) == [True] * len(values)
    # The elements as int items are the 64-bit items of the same values, not these.
    g = BloomFilter(1000, 1e-6)
    g.add_many(as_int32)
    assert g.contains_many(values) == [True] * len(values)
    assert g.contains_many(as_int32.astype("i8")) == [True] * len(values)

def test_paths_may_be_bytes_or_path_like(tmp_path):
    """As open() takes them: a bytes path was "'bytes' object is not an instance of 'str'
    while processing 'path'"."""
    f = BloomFilter(100)
    f.add("a")
    f.save(os.fsencode(tmp_path / "b.bloom"))
    assert f.path == str(tmp_path / "b.bloom")

    class BytesPathLike:
        def __fspath__(self):
            return os.fsencode(tmp_path / "b.bloom")

    for path in (os.fsencode(tmp_path / "b.bloom"), BytesPathLike(), tmp_path / "b.bloom"):
        with BloomFilter.open(path) as g:
            assert "a" in g
    undecodable = os.fsencode(tmp_path) + b"/\xff.bloom"
    f.save(undecodable)
    assert os.path.exists(undecodable) and "a" in BloomFilter.open(undecodable)
    ConcurrentBloomFilter(100).save(os.fsencode(tmp_path / "c.bloom"))
    assert BloomFilter.open(tmp_path / "c.bloom").kind == "blocked"
    with pytest.raises(TypeError, match="expected str, bytes or os.PathLike object, not int"):
        BloomFilter.open(1)


def test_integer_arguments_out_of_range_are_a_value_error_naming_them():
    """A negative or too large integer argument is the README's ValueError, naming the
    argument and its range (it was pyo3's OverflowError, "int too big to convert")."""
    u64, size = 2**64 - 1, sys.maxsize * 2 + 1
    calls = [
        ("expected_items", 0, u64, lambda v: BloomFilter(v)),
        ("expected_items", 0, u64, lambda v: ConcurrentBloomFilter(v)),
        ("seed", 0, u64, lambda v: BloomFilter(100, seed=v)),
        ("seed", 0, u64, lambda v: ConcurrentBloomFilter(100, seed=v)),
        # The real ranges, not 0 to 2**64-1 (generations=-1 said that, generations=1 then
        # "in 2..=1024"; item_size=-1 "from 0", item_size=0 then "at least 1").
        ("generations", 2, 1024, lambda v: BloomFilter(100, kind="rotating", generations=v)),
        ("item_size", 1, size, lambda v: BloomFilter(100).add_many(b"ab", item_size=v)),
        ("item_size", 1, size, lambda v: BloomFilter(100).contains_many(b"ab", item_size=v)),
        ("item_size", 1, size, lambda v: ConcurrentBloomFilter(100).add_many(b"ab", item_size=v)),
        ("item_size", 1, size, lambda v: ConcurrentBloomFilter(100).contains_many(b"ab", item_size=v)),
    ]
    for name, least, most, call in calls:
        for value in [-1, most + 1, 10**30, -(10**5000)] + ([least - 1] if least > 0 else []):
            with pytest.raises(ValueError, match=f"^{name} must be an integer from {least} to {most}, got "):
                call(value)
        with pytest.raises(TypeError, match=f"^{name} must be an integer, not float"):
            call(1.5)
    assert len(BloomFilter(np.uint64(100), seed=np.int8(3))) == 0  # numpy integers still do
    assert BloomFilter(100).contains_many(b"ab", item_size=np.int64(1)) == [False, False]
    with pytest.raises(ValueError, match="got -1$"):
        BloomFilter(-1)


def test_expected_items_zero_is_one_rule_in_the_python_name():
    """0 items: the smallest filter of a fixed-size kind; refused, naming expected_items, by
    the kinds it sizes a first sub-filter or a generation of (the library's refusals named
    capacity and items_per_generation)."""
    for kind in ["blocked", "classic", "counting", "retouched", "allowlisted", "split-block"]:
        f = BloomFilter(0, 0.01, kind)
        f.update(range(5))
        assert all(f.contains_many(range(5))), kind
    for kind in ["blocked", "classic"]:
        assert ConcurrentBloomFilter(0, kind=kind).memory_bytes > 0
    for kind, what in [
        ("scalable", "its first sub-filter's items"),
        ("redisbloom", "its first sub-filter's items"),
        ("scalable-blocked", "its first sub-filter's items"),
        ("rotating", "each generation's items"),
    ]:
        with pytest.raises(ValueError, match=f"^expected_items must be at least 1 for {kind} filters \\({what}\\), got 0"):
            BloomFilter(0, 0.01, kind)
        BloomFilter(1, 0.01, kind)


def test_options_a_kind_would_ignore_are_refused():
    # seed=5 and seed=6 once made the same classic filter, silently (the CLI refuses them).
    for kind in ["classic", "counting", "scalable", "retouched", "allowlisted", "rotating", "split-block", "redisbloom"]:
        with pytest.raises(ValueError, match=f"seed= does not apply to {kind} filters"):
            BloomFilter(100, kind=kind, seed=5)
        BloomFilter(100, kind=kind, seed=0)  # the default, given
    for kind in ["blocked", "scalable-blocked"]:
        assert BloomFilter(100, kind=kind, seed=5) != BloomFilter(100, kind=kind, seed=6)
    assert BloomFilter(100, kind="split-block", hash="xxh3", seed=5) != BloomFilter(
        100, kind="split-block", hash="xxh3", seed=6
    )
    with pytest.raises(ValueError, match="generations= does not apply to classic"):
        BloomFilter(100, kind="classic", generations=3)
    BloomFilter(100, kind="rotating", generations=3)
    with pytest.raises(ValueError, match="scaling= does not apply to blocked"):
        BloomFilter(100, scaling=False)
    for kind in ["scalable", "redisbloom", "scalable-blocked"]:
        BloomFilter(100, kind=kind, scaling=False)
    with pytest.raises(ValueError, match="seed= does not apply to classic"):
        bloomery.ConcurrentBloomFilter(100, kind="classic", seed=5)


def test_to_bytes_and_from_bytes_every_kind():
    for kind in KINDS:
        f = BloomFilter(1000, kind=kind)
        f.update(["a", 1, b"c"])
        data = f.to_bytes()
        assert data[:8] == b"BLOOMERY"
        g = BloomFilter.from_bytes(data)
        assert g == f and g.kind == kind
        assert all(g.contains_many(["a", 1, b"c"]))
        assert BloomFilter.from_bytes(bytearray(data)) == f
        assert BloomFilter.from_bytes(memoryview(data)) == f


def test_from_bytes_refuses_damaged_bytes_with_the_librarys_words():
    data = bytearray(BloomFilter(1000).to_bytes())
    data[-1] ^= 1
    with pytest.raises(ValueError, match="^invalid bloomery data: "):
        BloomFilter.from_bytes(bytes(data))
    with pytest.raises(ValueError, match="^invalid bloomery data: truncated"):
        BloomFilter.from_bytes(b"BLOOMERY")
    # A filter's bytes are a bytes-like object; an int or a str is refused as the wrong type
    # (an int was read as its 8 bytes: "truncated").
    for wrong in ("BLOOMERY", 123, True, 1.5):
        with pytest.raises(TypeError, match="expected a bytes-like object, not "):
            BloomFilter.from_bytes(wrong)
        with pytest.raises(TypeError, match="expected a bytes-like object, not "):
            BloomFilter.from_guava_bytes(wrong)
    assert BloomFilter.from_bytes(memoryview(BloomFilter(10).to_bytes())) == BloomFilter(10)


def test_from_bytes_refuses_a_buffer_of_wide_elements_in_its_own_words():
    """A buffer of elements other than bytes (memoryview.cast('q'), a numpy int64 array):
    a TypeError about a filter's bytes, not the item road's words ("add_many() and
    contains_many() take its elements..."), which do not apply; a buffer of bytes,
    contiguous, still reads, and a non-contiguous one is refused in the method's words."""
    data = BloomFilter(10).to_bytes()
    wide = memoryview(data).cast("q")
    for name, method in [("from_bytes", BloomFilter.from_bytes), ("from_guava_bytes", BloomFilter.from_guava_bytes),
                         ("from_redisbloom_scandump", BloomFilter.from_redisbloom_scandump),
                         ("from_bytes", ConcurrentBloomFilter.from_bytes)]:
        for buffer in (wide, np.frombuffer(data, dtype=np.int64)):
            with pytest.raises(TypeError, match=f"^{name}\\(\\) takes a buffer of bytes, not of '.*' elements: ") as error:
                method(buffer)
            assert "add_many" not in str(error.value)
        with pytest.raises(ValueError, match=f"^{name}\\(\\) takes a C-contiguous buffer"):
            method(memoryview(data)[::2])
    assert BloomFilter.from_bytes(wide.cast("B")) == BloomFilter(10)
    assert BloomFilter.from_bytes(np.frombuffer(data, dtype=np.uint8)) == BloomFilter(10)
    assert BloomFilter.from_bytes(bytearray(data)) == BloomFilter(10)


def test_guava_bytes_out_and_in():
    f = BloomFilter(1000, kind="classic")
    f.update(["a", 1])
    data = f.to_guava_bytes()
    assert data[0] == 1  # MURMUR128_MITZ_64
    g = BloomFilter.from_guava_bytes(data)
    assert g == f and g.kind == "classic"
    with pytest.raises(ValueError, match="blocked filters do not support Guava's format"):
        BloomFilter(1000).to_guava_bytes()
    with pytest.raises(ValueError, match="invalid Guava"):
        BloomFilter.from_guava_bytes(b"\x01")


def test_version():
    assert bloomery.__version__.count(".") == 2


def test_a_list_that_shrinks_while_it_is_read():
    """An item's __index__ may run any Python code, here emptying the list being read: a
    RuntimeError (it gave 4 answers for 10 items), the items before it added."""
    f = BloomFilter(1000)
    items = list(range(10))

    class Shrinking:
        def __index__(self):
            items.clear()
            return 5

    items[3] = Shrinking()
    with pytest.raises(RuntimeError, match=r"list changed size during the batch call \(from 10 to 0 items\)"):
        f.contains_many(items)
    items.extend([1, Shrinking(), 2])
    with pytest.raises(RuntimeError, match=r"from 3 to 0 items"):
        f.add_many(items)
    assert 1 in f and 5 in f and 2 not in f


def test_a_list_that_grows_and_changes_while_it_is_read():
    """An item's __index__ may grow the list being read (moving its item array): a
    RuntimeError, the items before it added; one that only replaces the items after it
    (the same length) is read as it is after each such item."""
    items = list(range(10))

    class Growing:
        def __index__(self):
            items[5:] = [100 + i for i in range(10_000)]
            return 5

    items[3] = Growing()
    f = BloomFilter(20_000, 0.001)
    with pytest.raises(RuntimeError, match=r"from 10 to 10005 items"):
        f.add_many(items)
    assert all(f.contains_many([0, 1, 2, 5]))
    assert sum(f.contains_many(range(100, 10_100))) <= 30  # none of them went in
    items = list(range(10))
    items[3] = Growing()
    with pytest.raises(RuntimeError, match=r"from 10 to 10005 items"):
        BloomFilter(20_000, 0.001).contains_many(items)

    class Replacing:
        def __index__(self):
            items[5:] = [100 + i for i in range(5)]
            return 5

    items = list(range(10))
    items[3] = Replacing()
    f = BloomFilter(20_000, 0.001)
    f.add_many(items)
    assert all(f.contains_many([0, 1, 2, 5, 4, 100, 101, 102, 103, 104]))
    assert sum(f.contains_many(range(6, 10))) == 0  # replaced before they were read
    items = list(range(10))
    items[3] = Replacing()
    assert len(BloomFilter(100).contains_many(items)) == 10


REDISBLOOM_FIXTURES = os.path.join(os.path.dirname(__file__), "../../bloomery/tests/data/redisbloom")


@pytest.mark.parametrize("name", ["scaled", "expansion4", "tiny_error"])
def test_a_filter_redisbloom_made_comes_from_its_scandump_pieces(name):
    """RedisBloom 2.6.28's own BF.SCANDUMP pieces (framed in the fixture as iterator and
    length, 8 bytes little-endian each), joined as its migration loop gives them: a
    kind="redisbloom" filter that finds every item RedisBloom was given, and gives the
    same pieces back."""
    with open(os.path.join(REDISBLOOM_FIXTURES, f"{name}.more.scandump"), "rb") as framed:
        data = framed.read()
    pieces, at = [], 0
    while at < len(data):
        length = int.from_bytes(data[at + 8 : at + 16], "little")
        pieces.append(data[at + 16 : at + 16 + length])
        at += 16 + length
    joined = b"".join(pieces)
    f = BloomFilter.from_redisbloom_scandump(joined)
    assert f.kind == "redisbloom"
    with open(os.path.join(REDISBLOOM_FIXTURES, f"{name}.items"), "rb") as items:
        assert all(f.contains_many([line for line in items.read().split(b"\n") if line]))
    assert f.to_redisbloom_scandump() == joined
    assert BloomFilter.from_bytes(f.to_bytes()).to_redisbloom_scandump() == joined
    with pytest.raises(ValueError, match="announces"):
        BloomFilter.from_redisbloom_scandump(joined[:-1])
    with pytest.raises(ValueError, match="only redisbloom filters"):
        BloomFilter(100).to_redisbloom_scandump()


def test_a_large_buffer_item_is_hashed_where_it_lies_not_copied(tmp_path):
    """A single item larger than the room left under the address-space limit, as a
    memoryview, an mmap, a str, a bytes item of a non-blocked kind's batch or a buffer cut
    into one item (and a bytearray added or looked up alone): read where it lies. Each was
    copied first (the memoryview, bytearray and mmap item on every road, and every item of
    a chunk a kind that copies items reads), and a copy past the limit aborted the
    interpreter. A writable buffer (a bytearray) in a batch was copied too, and aborted:
    it is now read in place with the GIL held, as a read-only export is (another thread may
    write it while a batch is hashed without the GIL):
    test_a_writable_buffer_in_a_batch_is_one_of_its_values."""
    path = tmp_path / "sparse.bin"
    n = (16 << 20) + 1  # above CHUNK_BYTES: a chunk holds it alone
    with open(path, "wb") as file:
        file.truncate(n)
    script = tmp_path / "large_item.py"
    script.write_text(
        "import mmap, os, resource\n"
        "import bloomery\n"
        f"n = {n}\n"
        "big = b'x' * n\n"
        "text = 'x' * n\n"
        "array = bytearray(big)\n"
        f"fd = os.open({str(path)!r}, os.O_RDONLY)\n"
        "mm = mmap.mmap(fd, n, prot=mmap.PROT_READ)\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + (8 << 20), resource.RLIM_INFINITY))\n"
        "filters = [bloomery.BloomFilter(1000, 0.01, kind) for kind in ['blocked', 'classic', 'counting']]\n"
        "filters += [bloomery.ConcurrentBloomFilter(1000, 0.01, kind) for kind in ['blocked', 'classic']]\n"
        "for f in filters:\n"
        "    f.add(memoryview(big)); f.add(array); f.add(mm)\n"
        "    f.update([big], (memoryview(big),), [mm], [text], [array], [memoryview(array)])\n"
        "    assert f.contains_many([array, memoryview(array)]) == [True, True]\n"
        "    f.add_many(mm, item_size=n); f.add_many(memoryview(big), item_size=n)\n"
        "    assert memoryview(big) in f and array in f and mm in f and big in f\n"
        "    assert f.contains_many([big, memoryview(big), mm, text, b'y' * 10]) == [True] * 4 + [False]\n"
        "    assert f.contains_many(mm, item_size=n) == [True]\n"
        "print('ok')\n"
    )
    prints_ok(script)


def test_a_writable_buffer_in_a_batch_is_one_of_its_values():
    """Another thread rewrites a large bytearray between two values while a batch adds it:
    the filter holds one of them. Kept in place and hashed without the GIL, it held
    neither (bytes of both), a false negative for each."""
    import threading

    n = (8 << 20) + 1
    values = [b"a" * n, b"b" * n]
    for kind in ["classic", "counting", "scalable"]:
        for _ in range(5):
            item = bytearray(values[0])
            f = BloomFilter(100, 0.01, kind)
            stop = threading.Event()

            def rewrite():
                while not stop.is_set():
                    item[:] = values[1]
                    item[:] = values[0]

            writer = threading.Thread(target=rewrite)
            writer.start()
            try:
                f.update([item])
            finally:
                stop.set()
                writer.join()
            assert values[0] in f or values[1] in f, kind


def test_a_read_only_view_of_changing_memory_in_a_batch_is_one_of_its_values():
    """A read-only export is not immutable memory: memoryview(bytearray).toreadonly(), or
    a numpy view with writeable=False over a writable array, changes when its owner is
    written. Another thread writes a large item's two values in turn while
    batches add and look it up: every add must give the filter one of the two values, and
    a lookup of a filter holding both must find it. Kept in place and hashed without the
    GIL, such an item was hashed torn (neither value), within 0.3 s on every road. Each
    road runs for a bounded time (it stops at the first miss)."""
    import threading
    import time

    size = (8 << 20) + 1024  # above CHUNK_BYTES: a chunk keeps it alone
    values = [bytes(size), b"\x01" + bytes(size - 2) + b"\x01"]
    backing = bytearray(size)
    view = memoryview(backing).toreadonly()
    array = np.frombuffer(backing, dtype=np.uint8)
    numpy_view = array.view()
    numpy_view.flags.writeable = False

    both = {kind: BloomFilter(100, 0.01, kind) for kind in ["classic", "split-block"]}
    both["concurrent-classic"] = ConcurrentBloomFilter(100, 0.01, "classic")
    for f in both.values():
        f.add_many(values)
    roads = []
    for name, make in [
        ("classic", lambda: BloomFilter(100, 0.01, "classic")),
        ("split-block", lambda: BloomFilter(100, 0.01, "split-block")),
        ("concurrent-classic", lambda: ConcurrentBloomFilter(100, 0.01, "classic")),
    ]:
        roads += [
            (name, make, lambda f: f.add_many([view])),
            (name, make, lambda f: f.add_many(view, item_size=size)),
            (name, make, lambda f: f.update(iter([numpy_view]))),
            (name, make, lambda f: f.add_many(numpy_view, item_size=size)),
        ]

    stop = threading.Event()

    def writer():
        # Whole values, one slice assignment each (one copy with the GIL held): a reader
        # holding the GIL never sees a mix, on any CPython (3.9 switches threads between
        # the two stores of `backing[0] = backing[-1] = 1`).
        while not stop.is_set():
            backing[:] = values[1]
            backing[:] = values[0]

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for name, make, road in roads:
            deadline = time.monotonic() + 0.3
            while time.monotonic() < deadline:
                f = make()
                road(f)
                assert values[0] in f or values[1] in f, name
                assert both[name].contains_many([view]) == [True], name
                assert both[name].contains_many(numpy_view, item_size=size) == [True], name
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("kind", KINDS)
def test_a_large_item_has_the_same_bits_on_every_road(kind, tmp_path):
    """An item larger than a chunk's bytes is read where it lies on the roads that copied
    it (a buffer or bytearray item, a chunk's large item): each road must still give the
    filter the bits add() of its bytes gives, and each lookup road must find it."""
    n = (8 << 20) + 1
    path = tmp_path / "item.bin"
    path.write_bytes(b"x" * n)
    wide = "\u00e9" * (n // 2 + 1)
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for reference, forms in [
            (b"x" * n, [b"x" * n, "x" * n, bytearray(b"x" * n), memoryview(b"x" * n), mm]),
            (wide.encode(), [wide, bytearray(wide.encode()), memoryview(wide.encode())]),
        ]:
            alone, after_small = BloomFilter(100, 0.01, kind), BloomFilter(100, 0.01, kind)
            alone.add(reference)
            after_small.add("small")
            after_small.add(reference)
            for form in forms:
                roads = [
                    (alone, lambda f: f.add(form)),
                    (alone, lambda f: f.update([form])),
                    (alone, lambda f: f.update((form,))),
                    (alone, lambda f: f.add_many(iter([form]))),
                    (after_small, lambda f: f.update(["small", form])),
                ]
                if not isinstance(form, str):
                    roads.append((alone, lambda f: f.add_many(form, item_size=len(reference))))
                for expected, road in roads:
                    f = BloomFilter(100, 0.01, kind)
                    road(f)
                    if kind != "rotating":  # whose bytes hold the time each filter was made
                        assert f.to_bytes() == expected.to_bytes()
                    assert form in f and reference in f
                    assert f.contains_many([form, "other"]) == [True, False]
                    assert f.contains_many(iter((b"a", form))) == [False, True]
                    if not isinstance(form, str):
                        assert f.contains_many(form, item_size=len(reference)) == [True]


def test_answers_for_more_items_than_memory_holds_are_a_memory_error(tmp_path):
    """contains_many on a buffer of more items than the answers' memory allows (a 2 GiB
    sparse file mapped, one item a byte, under an address-space limit): a MemoryError
    before any item is looked up, for both classes' kinds. The room for the answers was
    asked for with an allocation whose failure aborted the interpreter."""
    path = tmp_path / "sparse.bin"
    n = 2 << 30
    with open(path, "wb") as file:
        file.truncate(n)
    script = tmp_path / "answers.py"
    script.write_text(
        "import mmap, os, resource\n"
        "import bloomery\n"
        f"fd = os.open({str(path)!r}, os.O_RDONLY)\n"
        f"mm = mmap.mmap(fd, {n}, prot=mmap.PROT_READ)\n"
        "filters = [bloomery.BloomFilter(1000, 0.01, kind) for kind in ['blocked', 'classic']]\n"
        "filters += [bloomery.ConcurrentBloomFilter(1000, 0.01, kind) for kind in ['blocked', 'classic']]\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 20), resource.RLIM_INFINITY))\n"
        "for f in filters:\n"
        "    try:\n"
        "        f.contains_many(mm, item_size=1)\n"
        "    except MemoryError as error:\n"
        "        assert 'the system refused' in str(error), error\n"
        "    else:\n"
        "        raise SystemExit('answered past the limit')\n"
        "print('ok')\n"
    )
    prints_ok(script)


def test_numpy_string_arrays_are_refused_saying_why_and_what_works():
    """A numpy bytes array holds its items NUL-padded to one width, and a str array as
    UCS-4: neither's raw bytes are its items. Refused, saying so and that tolist() works,
    without advising item_size= (whose NUL-padded items b"a" would not find); an object
    array holds pointers, refused even with item_size=."""
    np = pytest.importorskip("numpy")
    cases = [
        (np.array([b"a", b"abc"]), "NUL"),
        (np.array([b"a"]), "NUL"),
        (np.array([b"ab", b"cd"]).astype(">S2"), "NUL"),
        (np.array(["a", "abc"]), "UCS-4"),
        (np.array(["a"], dtype=">U1"), "UCS-4"),
        (np.array([b"a", "abc", 1], dtype=object), "object"),
    ]
    filters = [BloomFilter(1000), BloomFilter(1000, kind="classic"), bloomery.ConcurrentBloomFilter(1000)]
    for array_, why in cases:
        for f in filters:
            for call in [f.add_many, f.contains_many, lambda items: f.update(items)]:
                with pytest.raises(TypeError) as error:
                    call(array_)
                message = str(error.value)
                assert why in message and "tolist()" in message, message
                assert "item_size" not in message, message
        f.add_many(array_.tolist())
        assert all(f.contains_many(array_.tolist()))
        assert array_.tolist()[0] in f
    with pytest.raises(TypeError, match="pointers"):
        BloomFilter(1000).add_many(np.array([b"a"], dtype=object), item_size=8)
    # Asked for by name, a bytes array's raw bytes are still items of item_size bytes.
    f = BloomFilter(1000)
    f.add_many(np.array([b"ab", b"cd"]), item_size=2)
    assert f.contains_many([b"ab", b"cd"]) == [True, True]


@pytest.mark.parametrize("kind", ["blocked", "classic", "counting"])
def test_a_ctypes_array_is_a_buffer_as_its_memoryview_is(kind):
    # ctypes exports C-contiguous arrays with null strides, which pyo3 refused: `c in f`
    # and from_bytes raised TypeError, add_many(c, item_size=) said it was not a buffer.
    import ctypes

    f = BloomFilter(1000, 0.01, kind)
    c = (ctypes.c_ubyte * 2)(1, 2)
    f.add(c)
    assert bytes(c) in f and c in f and memoryview(c) in f
    assert f.contains_many([c, b"\x02\x01"]) == [True, False]
    g = BloomFilter(1000, 0.01, kind)
    g.add_many(c, item_size=2)
    assert g.contains_many([bytes(c)]) == [True] and g.contains_many(c, item_size=1) == [False, False]
    g.update([ctypes.create_string_buffer(b"abc", 3)])
    assert b"abc" in g and ctypes.create_string_buffer(b"abc", 3) in g
    data = f.to_bytes()
    assert BloomFilter.from_bytes((ctypes.c_ubyte * len(data)).from_buffer_copy(data)) == f
    # Integer arrays in batches are their int items, as Python ints (and numpy arrays).
    for t in [ctypes.c_int, ctypes.c_long, ctypes.c_short, ctypes.c_uint64]:
        h = BloomFilter(1000, 0.01, kind)
        h.add_many((t * 3)(1, 2, 3))
        assert h.contains_many([1, 2, 3, 4]) == [True, True, True, False]
        assert h.contains_many((t * 2)(3, 7)) == [True, False]


def test_arguments_are_refused_in_the_words_of_the_parameter_given():
    """fpp= as given (a Decimal or Fraction that a float holds only as 0 or 1 said "got 0";
    an int past a float raised OverflowError naming nothing; a str, pyo3's "must be real
    number"); kind= by its name (it said "unknown variant"); hash= as seed= is; an
    integer out of range by its value, not its str()."""
    import decimal
    import fractions

    for fpp, shown in [
        (decimal.Decimal("1e-400"), "got Decimal('1E-400'), which rounds to 0 as a float"),
        (decimal.Decimal("0.99999999999999999"), "got Decimal('0.99999999999999999'), which rounds to 1 as a float"),
        (fractions.Fraction(1, 10**400), "got Fraction(1, 1000000000000000000000000..., which rounds to 0 as a float"),
        (10**400, "got 1000000000000000000000000000000000000..."),
        (2, "got 2"),
        # Out of (0, 1) whatever the rounding: as given, no rounding said.
        (decimal.Decimal("-1e-400"), "got Decimal('-1E-400')"),
        (decimal.Decimal("1e400"), "got Decimal('1E+400')"),
    ]:
        for make in (lambda: BloomFilter(1000, fpp), lambda: bloomery.ConcurrentBloomFilter(1000, fpp),
                     lambda: bloomery.ShardedFilter.create("redis://127.0.0.1:1", "x", 100, fpp)):
            with pytest.raises(ValueError) as error:
                make()
            assert str(error.value) == f"fpp (false-positive probability) must be in (0, 1), {shown}"
    with pytest.raises(TypeError, match="^fpp must be a real number, not str$"):
        BloomFilter(1000, "0.01")
    # A number a float holds exactly is taken.
    BloomFilter(1000, decimal.Decimal("0.5"))
    with pytest.raises(ValueError, match="^unknown kind 'Blocked': one of classic, blocked"):
        BloomFilter(1000, kind="Blocked")
    with pytest.raises(ValueError, match=r"^unknown kind 'blocked\\0'"):
        BloomFilter(1000, kind="blocked\0")
    with pytest.raises(ValueError, match=r"^hash= does not apply to blocked filters \(split-block filters take it\)$"):
        BloomFilter(1000, kind="blocked", hash="xxh3")
    with pytest.raises(ValueError, match="^hash must be 'parquet' or 'xxh3', got 'Parquet'$"):
        BloomFilter(1000, kind="split-block", hash="Parquet")

    class Seventeen(int):
        def __str__(self):
            return "seventeen"

    with pytest.raises(ValueError, match="^seed must be an integer from 0 to 18446744073709551615, got -3$"):
        BloomFilter(100, seed=Seventeen(-3))
    with pytest.raises(ValueError, match="^retry_seconds must be a number of seconds from 0 to 18446744073709551615, got 1e300$"):
        bloomery.ShardedFilter.create("redis://127.0.0.1:1", "x", 100, retry_seconds=1e300)


def test_new_filters_that_are_not_what_their_parameters_suggest_are_warned_of():
    """As the CLI warns: a blocked filter at a rate where it takes more than twice what a
    filter hashing as Guava does needs, and a split-block filter hashed as Parquet's over
    the 128 MiB Parquet's readers take."""
    with pytest.warns(RuntimeWarning, match=r"a blocked filter for 2000000 items at fpp 1e-7 takes \d+ bytes, 2\.\d times .*; kind=\"classic\" takes \d+ bytes$"):
        BloomFilter(2_000_000, 1e-7)
    with pytest.warns(RuntimeWarning, match=r"a blocked filter for 2000000 items at fpp 1e-8 .*whatever the rate\)$"):
        bloomery.ConcurrentBloomFilter(2_000_000, 1e-8)
    with pytest.warns(RuntimeWarning, match=r"a split-block filter of \d+ bytes, over the 128 MiB Parquet's readers take"):
        BloomFilter(150_000_000, 0.01, "split-block")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BloomFilter(10_000_000, 0.01)
        BloomFilter(1000, 1e-9)
        BloomFilter(0, 1e-15)
        BloomFilter(2_000_000, 1e-8, "classic")
        BloomFilter(150_000_000, 0.01, "split-block", hash="xxh3")


def test_a_kernel_the_cpu_does_not_have_is_warned_of_at_import():
    """BLOOMERY_KERNEL naming no kernel of this CPU: the fastest runs, and importing the
    package says so in a RuntimeWarning (it ran without a word)."""
    run = lambda kernel: subprocess.run(  # noqa: E731
        [sys.executable, "-W", "error::RuntimeWarning", "-c", "import bloomery; print(5 in bloomery.BloomFilter(10))"],
        env={**os.environ, "BLOOMERY_KERNEL": kernel}, capture_output=True, text=True, timeout=60,
    )
    refused = run("no-such-kernel")
    assert refused.returncode != 0
    assert "BLOOMERY_KERNEL 'no-such-kernel' names no kernel of this CPU's blocked filters" in refused.stderr
    taken = run("scalar")
    assert taken.returncode == 0 and taken.stdout == "False\n", taken
