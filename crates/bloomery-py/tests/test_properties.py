"""Property tests (hypothesis) against a Python set: no false negatives, whatever the
items, the kind, and how they were added; a round trip through bytes answers the same."""

from hypothesis import given, settings
from hypothesis import strategies as st

import bloomery
from bloomery import BloomFilter

ITEMS = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(bloomery.kinds()),
    batches=st.lists(st.lists(ITEMS, max_size=60), max_size=6),
    probes=st.lists(ITEMS, max_size=60),
    batch_mode=st.sampled_from(["add", "add_many", "update"]),
)
def test_no_false_negatives_against_a_set(kind, batches, probes, batch_mode):
    f = BloomFilter(500, 0.01, kind)
    reference = set()
    for batch in batches:
        if batch_mode == "add":
            for item in batch:
                f.add(item)
        elif batch_mode == "add_many":
            f.add_many(batch)
        else:
            f.update(batch)
        reference.update(batch)
    for item in reference:
        assert item in f
    everything = list(reference) + probes
    answers = f.contains_many(everything)
    assert answers[: len(reference)] == [True] * len(reference)
    # A probe in the set is always found; one not in it may be a false positive, but the
    # single and batch lookups agree.
    assert answers == [item in f for item in everything]
    loaded = BloomFilter.from_bytes(f.to_bytes())
    assert loaded.contains_many(everything) == answers


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["classic", "blocked", "split-block"]),
    left=st.sets(ITEMS, max_size=50),
    right=st.sets(ITEMS, max_size=50),
)
def test_union_and_intersection_keep_every_common_item(kind, left, right):
    a, b = BloomFilter(300, 0.01, kind), BloomFilter(300, 0.01, kind)
    a.update(left)
    b.update(right)
    union, inter = a | b, a & b
    assert all(item in union for item in left | right)
    assert all(item in inter for item in left & right)
    assert a <= union and b <= union and inter <= a and inter <= b


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["blocked", "classic"]),
    items=st.lists(ITEMS, max_size=200),
    probes=st.lists(ITEMS, max_size=50),
)
def test_the_concurrent_filter_has_no_false_negatives_and_the_plain_filters_bits(kind, items, probes):
    from bloomery import ConcurrentBloomFilter

    c, plain = ConcurrentBloomFilter(500, 0.01, kind), BloomFilter(500, 0.01, kind)
    half = len(items) // 2
    for item in items[:half]:
        c.add(item)
    c.add_many(items[half:])
    plain.update(items)
    assert all(item in c for item in items)
    assert c.contains_many(items + probes) == plain.contains_many(items + probes)
    assert c.to_bytes() == plain.to_bytes()
