"""ConcurrentBloomFilter: the library's atomic filters, and every method."""

import numpy as np
import pytest

from bloomery import BloomFilter, ConcurrentBloomFilter


@pytest.mark.parametrize("kind", ["blocked", "classic"])
def test_methods(kind, tmp_path):
    f = ConcurrentBloomFilter(10_000, 0.01, kind)
    assert f.kind == kind and len(f) == 0
    assert f.add("a") is True and f.add("a") is False
    f.update(["b", 2], range(100, 110))
    f.add_many(np.arange(1000, 2000))
    f.add_many(b"xxxxyyyy", item_size=4)
    assert "a" in f and "b" in f and 2 in f and 105 in f and b"yyyy" in f
    assert all(f.contains_many(np.arange(1000, 2000)))
    assert sum(f.contains_many([f"fresh {i}" for i in range(1000)])) < 50
    assert 1000 < len(f) == f.approx_items < 1100
    assert 0 < f.expected_fpp == f.fpp < 0.01
    assert f.memory_bytes > 0
    assert repr(f).startswith(f"<bloomery.ConcurrentBloomFilter kind='{kind}'")
    snapshot = f.snapshot()
    assert isinstance(snapshot, BloomFilter) and snapshot.kind == kind
    assert all(snapshot.contains_many(np.arange(1000, 2000)))
    copy = f.copy()
    copy.add("only in the copy")
    assert "only in the copy" not in f
    assert BloomFilter.from_bytes(f.to_bytes()) == snapshot
    assert ConcurrentBloomFilter.from_bytes(f.to_bytes()).to_bytes() == f.to_bytes()
    assert ConcurrentBloomFilter.from_filter(snapshot).to_bytes() == f.to_bytes()
    f.save(tmp_path / "c.bloom")
    assert BloomFilter.open(tmp_path / "c.bloom") == snapshot


def test_same_bits_as_the_plain_filter():
    """The same items give the same file bytes as BloomFilter of the same kind."""
    for kind, seed in (("blocked", 3), ("classic", 0)):
        c, p = ConcurrentBloomFilter(5000, 0.001, kind, seed=seed), BloomFilter(5000, 0.001, kind, seed=seed)
        items = [f"item {i}" for i in range(3000)] + list(range(2000))
        c.add_many(items)
        p.add_many(items)
        assert c.to_bytes() == p.to_bytes()
        probes = items + [f"fresh {i}" for i in range(3000)] + list(range(10**6, 10**6 + 3000))
        answers = c.contains_many(probes)
        assert answers == [item in c for item in probes] == p.contains_many(probes)
        assert all(answers[: len(items)]) and not all(answers)


def test_errors():
    with pytest.raises(ValueError, match="counting filters have no concurrent form"):
        ConcurrentBloomFilter(100, kind="counting")
    with pytest.raises(ValueError, match="unknown kind 'x'"):
        ConcurrentBloomFilter(100, kind="x")
    with pytest.raises(ValueError, match="fpp"):
        ConcurrentBloomFilter(100, 0.0)
    with pytest.raises(ValueError, match="scalable filters have no concurrent form"):
        ConcurrentBloomFilter.from_bytes(BloomFilter(100, kind="scalable").to_bytes())
    with pytest.raises(ValueError, match="invalid bloomery data"):
        ConcurrentBloomFilter.from_bytes(b"nothing")
    with pytest.raises(TypeError, match="not list"):
        ConcurrentBloomFilter(100).add([1])


def resident_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("kind", ["blocked", "classic"])
def test_a_new_concurrent_filter_takes_no_memory_until_used_and_says_its_own_size(kind):
    # Made atomic in place: it was made, cloned and copied into atomic words, which
    # touched every page (an empty filter's whole size for a moment) and was refused with
    # three times its size said as its own.
    before = resident_bytes()
    f = ConcurrentBloomFilter(100_000_000, 0.01, kind)
    grown = resident_bytes() - before
    assert f.memory_bytes > 100_000_000
    assert grown < f.memory_bytes // 4, (grown, f.memory_bytes)
    f.add("x")
    assert "x" in f and "y" not in f
    del f
    if kind == "classic":
        return  # Guava's format holds at most 17 GB, which may fit.
    with pytest.raises(MemoryError) as plain:
        BloomFilter(10**11, 0.01, kind)  # 150 GB
    with pytest.raises(MemoryError) as concurrent:
        ConcurrentBloomFilter(10**11, 0.01, kind)
    said = str(plain.value).split(" takes ")[1].split(" bytes")[0]
    assert f" takes {said} bytes" in str(concurrent.value), (str(plain.value), str(concurrent.value))
