"""Bloom filters from the bloomery Rust library.

Sets that answer "certainly absent" or "probably present" in a fraction of the memory of
a ``set``, with no false negatives. Filters, items and files are the library's: a filter
made here answers the same in Rust, in the ``bloomery`` CLI and (``kind="classic"``) in
Java's Guava.

>>> from bloomery import BloomFilter
>>> f = BloomFilter(10_000, 0.01)
>>> f.update(["a", "b", "c"])
>>> "a" in f, "z" in f
(True, False)
"""

from ._bloomery import BloomFilter, ConcurrentBloomFilter, RedisError, ShardedFilter, __version__, kinds

__all__ = ["BloomFilter", "ConcurrentBloomFilter", "ShardedFilter", "RedisError", "kinds", "__version__"]
