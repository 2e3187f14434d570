"""Pickle round trips: the library's file bytes inside."""

import pickle

import pytest

import bloomery
from bloomery import BloomFilter, ConcurrentBloomFilter


@pytest.mark.parametrize("kind", bloomery.kinds())
@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_pickle_round_trip(kind, protocol):
    f = BloomFilter(1000, kind=kind)
    f.update(["a", 1, b"b"])
    g = pickle.loads(pickle.dumps(f, protocol=protocol))
    assert type(g) is BloomFilter
    assert g == f and g.kind == kind
    assert all(g.contains_many(["a", 1, b"b"]))
    g.add("new")
    assert "new" not in f


def test_pickle_of_a_mapped_file_is_its_bytes(tmp_path):
    f = BloomFilter(1000)
    f.add("x")
    f.save(tmp_path / "f.bloom")
    with BloomFilter.open(tmp_path / "f.bloom") as mapped:
        g = pickle.loads(pickle.dumps(mapped))
    assert g == f and g.mode is None
    g.add("y")  # in memory, writable


def test_pickle_in_containers_and_of_the_concurrent_filter():
    c = ConcurrentBloomFilter(1000, kind="classic")
    c.add("x")
    b = BloomFilter(100)
    b.add(1)
    loaded = pickle.loads(pickle.dumps({"c": c, "b": [b, b]}))
    assert type(loaded["c"]) is ConcurrentBloomFilter
    assert "x" in loaded["c"] and loaded["c"].kind == "classic"
    assert loaded["b"][0] is loaded["b"][1]
    assert 1 in loaded["b"][0]
