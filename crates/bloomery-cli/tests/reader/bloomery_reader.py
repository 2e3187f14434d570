"""An independent reader (and, for some variants, writer) of bloomery filter files.

Written from ``docs/format.md`` alone ("The bloomery filter file format, version 2");
section names in the docstrings below refer to that page. Depends only on the Python
standard library and the PyPI packages ``xxhash`` (XXH3-64, XXH64) and ``mmh3``
(MurmurHash3 x64 128).

Entry points:

* ``read(data)`` / ``read_file(path)`` parse and check a whole file and return a filter
  object with ``contains(item_bytes) -> bool`` (all ten variants, versions 1 and 2);
* ``ClassicFilter.new(num_hashes, num_words)``, ``BlockedFilter.new(num_blocks, seed)``
  and ``SplitBlockFilter.new(num_blocks)`` make empty filters that support
  ``add(item_bytes)`` and ``to_bytes()`` (a whole version-2 file);
* ``ScalableWriter``, ``ScalableBlockedWriter`` and ``RotatingWriter`` take a parsed filter
  of those variants and add items by the page's writer rules (sections "4: scalable",
  "10: scalable-blocked", "7: rotating"), growing it with the page's "Sizing"
  (``classic_sizing``, ``rate_sizing``, ``blocked_sizing``); ``to_bytes()`` as above;
* ``item_text``, ``item_long``, ``item_int`` turn values into item bytes ("Items").
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import mmh3
import xxhash

MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1

MAGIC = b"BLOOMERY"
FIXED_HEADER = 32  # magic, version, variant, P, L, payload checksum
MAX_P = 65_536
MAX_L = 1 << 62
MAX_WORDS = (1 << 31) - 1
WRITE_VERSION = 2
UNSEALED = 0x8000  # bit 15 of the version field (section "Sealed and unsealed files")

(
    CLASSIC,
    BLOCKED,
    COUNTING,
    SCALABLE,
    RETOUCHED,
    ALLOWLISTED,
    ROTATING,
    SPLIT_BLOCK,
    REDISBLOOM,
    SCALABLE_BLOCKED,
) = range(1, 11)
VARIANT_NAMES = {
    CLASSIC: "classic",
    BLOCKED: "blocked",
    COUNTING: "counting",
    SCALABLE: "scalable",
    RETOUCHED: "retouched",
    ALLOWLISTED: "allowlisted",
    ROTATING: "rotating",
    SPLIT_BLOCK: "split-block",
    REDISBLOOM: "redisbloom",
    SCALABLE_BLOCKED: "scalable-blocked",
}


# --------------------------------------------------------------------------- items


def item_text(s: str) -> bytes:
    """A text item is its UTF-8 bytes (section "Items")."""
    return s.encode("utf-8")


def item_long(n: int) -> bytes:
    """A 64-bit integer item: 8 bytes, little-endian, two's complement (section "Items").

    Accepts signed values (-2^63 .. 2^63-1) and unsigned ones (up to 2^64-1); both map to
    the same 8 bytes, as two's complement says.
    """
    if not -(1 << 63) <= n <= MASK64:
        raise ValueError(f"{n} does not fit in 64 bits")
    return (n & MASK64).to_bytes(8, "little")


def item_int(n: int) -> bytes:
    """A 32-bit integer item: 4 bytes, little-endian, two's complement (section "Items")."""
    if not -(1 << 31) <= n <= MASK32:
        raise ValueError(f"{n} does not fit in 32 bits")
    return (n & MASK32).to_bytes(4, "little")


# --------------------------------------------------------------------------- hashes


def xxh3_64(data: bytes, seed: int = 0) -> int:
    """XXH3-64 (``XXH3_64bits_withSeed``) of ``data`` (section "Header")."""
    return xxhash.xxh3_64_intdigest(bytes(data), seed=seed)


def xxh64(data: bytes) -> int:
    """XXH64 with seed 0 of ``data`` (sections "Header" and "8: split-block")."""
    return xxhash.xxh64_intdigest(bytes(data), seed=0)


def murmur3_h1_h2(item: bytes) -> tuple[int, int]:
    """MurmurHash3 x64 128 with seed 0; ``h1``, ``h2`` are the first and second 8 bytes
    of the 16-byte result, read little-endian (section "Header")."""
    digest = mmh3.hash_bytes(bytes(item), 0)
    h1, h2 = struct.unpack("<QQ", digest)
    return h1, h2


def classic_positions(h1: int, h2: int, k: int, m: int) -> list[int]:
    """The ``k`` positions of an item among ``m`` bits (section "Classic positions"):
    ``((h1 + i*h2) mod 2^64, with bit 63 cleared) mod m`` for ``i = 0 .. k-1``."""
    positions = []
    combined = h1
    for _ in range(k):
        positions.append((combined & 0x7FFF_FFFF_FFFF_FFFF) % m)
        combined = (combined + h2) & MASK64
    return positions


def splitmix64_outputs(count: int, state: int = 0) -> list[int]:
    """The first ``count`` outputs of splitmix64 from ``state`` (section "2: blocked")."""
    out = []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        out.append(z ^ (z >> 31))
    return out


def blocked_salts() -> list[int]:
    """``S_0 .. S_7``: the high 32 bits, with bit 0 set, of splitmix64's outputs 1..8
    from state 0 (section "2: blocked")."""
    return [((z >> 32) | 1) & MASK32 for z in splitmix64_outputs(8)]


BLOCKED_SALTS = blocked_salts()
# The spec lists the constants; a mismatch here would be a spec error.
SPEC_BLOCKED_SALTS = [
    0xE220A839, 0x6E789E6B, 0x06C45D19, 0xF88BB8A9,
    0x1B39896B, 0x53CB9F0D, 0x2C829ABF, 0xC584133B,
]  # fmt: skip
assert BLOCKED_SALTS == SPEC_BLOCKED_SALTS, [hex(s) for s in BLOCKED_SALTS]


def blocked_location(item: bytes, num_blocks: int, seed: int) -> tuple[int, list[int]]:
    """The block of an item and the bit (0..63) it sets in each of the block's 8 words
    (section "2: blocked")."""
    h = xxh3_64(item, seed)
    block = (((h >> 32) * num_blocks) & MASK64) >> 32
    low = h & MASK32
    bits = [((low * s) & MASK32) >> 26 for s in BLOCKED_SALTS]
    return block, bits


# Parquet's salts, as section "8: split-block" lists them.
SPLIT_BLOCK_SALTS = [
    0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D,
    0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31,
]  # fmt: skip
MAX_SPLIT_BLOCKS = (1 << 26) - 1


def split_block_location(
    item: bytes, num_blocks: int, hasher: int = 1, seed: int = 0
) -> tuple[int, list[int]]:
    """The block of an item and the bit (0..31) it sets in each of the block's eight
    32-bit words: hashed with XXH64, seed 0 (hasher 1) or XXH3-64 with ``seed`` (hasher 2)
    (section "8: split-block")."""
    h = xxh64(item) if hasher == 1 else xxh3_64(item, seed)
    block = (((h >> 32) * num_blocks) & MASK64) >> 32
    low = h & MASK32
    bits = [((low * s) & MASK32) >> 27 for s in SPLIT_BLOCK_SALTS]
    return block, bits


def guava_optimal_num_of_bits(n: int, p: float) -> int:
    """Guava's ``optimalNumOfBits(n, p)``: ``(long) (-n * ln p / (ln 2)^2)``
    (section "Version 1", rotating)."""
    if p == 0:
        p = 5e-324  # Double.MIN_VALUE, as Guava does
    return int(-n * math.log(p) / (math.log(2) * math.log(2)))


def guava_optimal_num_of_hash_functions(n: int, m: int) -> int:
    """Guava's ``optimalNumOfHashFunctions(n, m)``: ``max(1, round(m / n * ln 2))``
    (section "Version 1", rotating). Java's ``Math.round`` rounds halves up."""
    return max(1, math.floor(m / n * math.log(2) + 0.5))


def classic_sizing(n: int, p: float) -> tuple[int, int]:
    """``(num_hashes, num_words)`` of "the classic sizing" for ``n`` items at ``p``:
    Guava's ``optimalNumOfBits`` rounded up to whole words, and
    ``optimalNumOfHashFunctions`` (section "Version 1", rotating).

    The hash count is computed from the bit count before rounding up to words, as the
    spec says and Guava's ``BloomFilter.create`` does.
    """
    n = max(n, 1)
    bits = max(1, guava_optimal_num_of_bits(n, p))
    k = guava_optimal_num_of_hash_functions(n, bits)
    words = -(-bits // 64)
    if words > MAX_WORDS or k > 255:
        raise ValueError(
            f"classic sizing: {n} items at {p} make no shape ({k} hashes, {words} words)"
        )
    return k, words


def rate_sizing(n: int, p: float) -> tuple[int, int]:
    """``(num_hashes, num_words)`` of the rate sizing (section "Sizing"): the classic
    sizing, with at least ``max(bits(p - c), floor)`` bits (the hash count kept)."""
    k, words = classic_sizing(n, p)

    def bits(q: float) -> int:
        ln_rest = math.log1p(-math.pow(q, 1.0 / k))
        for_k = -k * n / ln_rest if ln_rest < 0 else math.inf
        if for_k > 64 * MAX_WORDS:
            raise ValueError(f"rate sizing: {n} items at {p} need {for_k} bits")
        return math.ceil(for_k)

    floor = math.ceil(math.sqrt(60.0 * n / p))
    first = float(max(bits(p), floor))
    c = 0.0 if k == 1 else 12.0 * n / (first * first)
    least = max(bits(p - c), floor)
    if least > 64 * words:
        words = -(-least // 64)
        if words > MAX_WORDS:
            raise ValueError(f"rate sizing: {n} items at {p} need {least} bits")
    return k, words


def _ln_factorial(x: int) -> float:
    """``lnfact(x)`` of the blocked sizing (section "Sizing")."""
    if x < 16:
        total = 0.0
        for i in range(2, x + 1):
            total += math.log(i)
        return total
    x = float(x)
    inv = 1.0 / x
    inv2 = inv * inv
    return (x * math.log(x) - x + 0.5 * math.log(2 * math.pi * x)
            + inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 / 1260.0)))  # fmt: skip


def _block_rate(blocks: int, n: int, w: float, floor: bool) -> float:
    """``rate(B, floor)`` of the blocked sizing (section "Sizing")."""
    lam = n / blocks
    s = 12.0 * math.sqrt(lam) + 30.0
    if lam - s > 50.0 * w:
        return 1.0
    first, last = math.floor(max(lam - s, 0.0)), math.ceil(lam + s)
    key_miss = math.log1p(-1.0 / 4294967296.0)
    rate = 0.0
    for x in range(first, last + 1):
        probability = math.exp(x * math.log(lam) - lam - _ln_factorial(x))
        c = -math.expm1(x * key_miss) if floor else 0.0
        y = 1.0 - math.pow(1.0 - 1.0 / w, x)
        y2 = y * y
        y4 = y2 * y2
        rate += probability * (c + (1.0 - c) * (y4 * y4))
    return min(rate, 1.0)


def blocked_sizing(n: int, p: float, w: float = 64.0, max_blocks: int = 1 << 32) -> int:
    """``num_blocks`` of the blocked sizing of ``n`` items at ``p`` (section "Sizing"):
    512-bit blocks by default, ``w = 32`` and ``max_blocks = 2^26 - 1`` for split-block."""
    n = max(n, 1)
    target = 0.95 * p
    if _block_rate(max_blocks, n, w, True) > target:
        raise ValueError(f"blocked sizing: {n} items at {p} fit no block count")

    def fewest(floor: bool, t: float) -> int:
        low, high = 1, max_blocks
        while low < high:
            mid = low + (high - low) // 2
            if _block_rate(mid, n, w, floor) <= t:
                high = mid
            else:
                low = mid + 1
        return low

    return max(fewest(False, target), fewest(True, target * 1.01))


# --------------------------------------------------------------------------- bit arrays


def _bit(payload: memoryview | bytes | bytearray, base: int, i: int) -> bool:
    """Bit ``i`` of the word array starting at byte ``base``: bit ``i mod 64`` of word
    ``floor(i / 64)``, words little-endian (section "Variants"). For little-endian words
    that is bit ``i mod 8`` of byte ``floor(i / 8)``."""
    return (payload[base + (i >> 3)] >> (i & 7)) & 1 == 1


def _set_bit(buf: bytearray, base: int, i: int) -> None:
    """Sets bit ``i`` of the word array starting at byte ``base`` (section "Variants")."""
    buf[base + (i >> 3)] |= 1 << (i & 7)


def _classic_contains(payload, base: int, num_words: int, k: int, h1: int, h2: int) -> bool:
    """Classic lookup on the ``num_words`` words at byte ``base`` of ``payload``: every one
    of the item's ``k`` positions is set (section "Classic positions")."""
    m = 64 * num_words
    for pos in classic_positions(h1, h2, k, m):
        if not _bit(payload, base, pos):
            return False
    return True


# --------------------------------------------------------------------------- parameters


class _Params:
    """A cursor over the variant parameters (section "Header": bytes 32 .. 32 + P)."""

    def __init__(self, data: bytes, variant: str):
        """A cursor at the start of the ``P`` parameter bytes of ``variant``."""
        self.data = data
        self.pos = 0
        self.variant = variant

    def _take(self, fmt: str):
        """The next little-endian value (section "Header": every integer is
        little-endian); refuses parameters that end early."""
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError(
                f"{self.variant}: parameters end early ({len(self.data)} bytes of P)"
            )
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def u8(self) -> int:
        """A ``u8`` parameter."""
        return self._take("<B")

    def u32(self) -> int:
        """A little-endian ``u32`` parameter."""
        return self._take("<I")

    def u64(self) -> int:
        """A little-endian ``u64`` parameter."""
        return self._take("<Q")

    def f64(self) -> float:
        """An ``f64``: an IEEE 754 double's 8 bytes, little-endian (section "Header")."""
        return self._take("<d")

    def at_end(self) -> bool:
        """Whether every parameter byte was read (for optional trailing parameters)."""
        return self.pos == len(self.data)

    def finish(self) -> None:
        """``P`` must be exactly the parameters' length (section "Header": ``P`` is the
        length of the variant parameters)."""
        if self.pos != len(self.data):
            raise ValueError(
                f"{self.variant}: P is {len(self.data)} bytes but the parameters take {self.pos}"
            )


def _check_num_hashes(variant: str, k: int) -> None:
    """``num_hashes`` is 1..=255 (sections "1: classic", "3: counting")."""
    if not 1 <= k <= 255:
        raise ValueError(f"{variant}: num_hashes {k} is not in 1..=255")


def _check_num_words(variant: str, n: int) -> None:
    """A classic bit array has 1 ..= 2^31-1 words (section "1: classic")."""
    if not 1 <= n <= MAX_WORDS:
        raise ValueError(f"{variant}: num_words {n} is not in 1..=2^31-1")


def _check_open_unit(variant: str, name: str, x: float) -> None:
    """An ``f64`` in the open interval (0, 1) (sections "4: scalable", "7: rotating")."""
    if not 0.0 < x < 1.0:  # also refuses NaN
        raise ValueError(f"{variant}: {name} {x!r} is not in (0, 1)")


# --------------------------------------------------------------------------- filters


@dataclass
class ClassicFilter:
    """Variant 1, classic (section "1: classic"): ``num_hashes`` and a word array."""

    num_hashes: int
    words: bytearray  # num_words * 8 bytes, little-endian words
    version: int = WRITE_VERSION

    VARIANT = CLASSIC

    @property
    def num_words(self) -> int:
        """The word count, ``L / 8`` (section "1: classic")."""
        return len(self.words) // 8

    @classmethod
    def new(cls, num_hashes: int, num_words: int) -> "ClassicFilter":
        """An empty classic filter (section "1: classic")."""
        _check_num_hashes("classic", num_hashes)
        _check_num_words("classic", num_words)
        return cls(num_hashes, bytearray(8 * num_words))

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "ClassicFilter":
        """Parameters ``num_hashes`` u32; payload the words (section "1: classic")."""
        p = _Params(params, "classic")
        k = p.u32()
        p.finish()
        _check_num_hashes("classic", k)
        if len(payload) % 8:
            raise ValueError(f"classic: payload length {len(payload)} is not whole words")
        _check_num_words("classic", len(payload) // 8)
        return cls(k, bytearray(payload), version)

    def contains(self, item: bytes) -> bool:
        """Present when every classic position is set (section "Classic positions")."""
        h1, h2 = murmur3_h1_h2(item)
        return _classic_contains(self.words, 0, self.num_words, self.num_hashes, h1, h2)

    def add(self, item: bytes) -> None:
        """Sets the item's classic positions (section "Classic positions")."""
        h1, h2 = murmur3_h1_h2(item)
        for pos in classic_positions(h1, h2, self.num_hashes, 64 * self.num_words):
            _set_bit(self.words, 0, pos)

    def params_bytes(self) -> bytes:
        """``num_hashes`` u32 (section "Variants")."""
        return struct.pack("<I", self.num_hashes)

    def to_bytes(self) -> bytes:
        """The whole version-2 file (section "Header")."""
        return build_file(CLASSIC, self.params_bytes(), bytes(self.words))


@dataclass
class BlockedFilter:
    """Variant 2, blocked (section "2: blocked"): 64-byte blocks of 8 words."""

    num_blocks: int
    seed: int
    blocks: bytearray  # num_blocks * 64 bytes
    lanes: int = 8
    hasher: int = 2
    version: int = WRITE_VERSION
    sized_for: tuple[int, float] | None = None  # (expected_items, fpp), when stored

    VARIANT = BLOCKED

    @classmethod
    def new(
        cls, num_blocks: int, seed: int, sized_for: tuple[int, float] | None = None
    ) -> "BlockedFilter":
        """An empty blocked filter, with the sizing it was made for if given (section
        "2: blocked")."""
        if not 1 <= num_blocks <= 1 << 32:
            raise ValueError(f"blocked: num_blocks {num_blocks} is not in 1..=2^32")
        if not 0 <= seed <= MASK64:
            raise ValueError(f"blocked: seed {seed} is not a u64")
        return cls(num_blocks, seed, bytearray(64 * num_blocks), sized_for=sized_for)

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "BlockedFilter":
        """Parameters ``num_blocks`` u64, ``lanes`` u32 = 8, ``hasher`` u32 = 2, ``seed``
        u64, optionally ``expected_items`` u64 (0 read as 1) and ``fpp`` f64 in (0, 1); payload
        ``num_blocks`` blocks of 64 bytes (sections "2: blocked" and "Version 1")."""
        p = _Params(params, "blocked")
        num_blocks = p.u64()
        lanes = p.u32()
        hasher = p.u32()
        seed = p.u64()
        sized_for = None
        if not p.at_end():
            expected_items, fpp = p.u64(), p.f64()
            if not 0.0 < fpp < 1.0:
                raise ValueError(f"blocked: sized for {expected_items} items at fpp {fpp}, not in (0, 1)")
            # Writers before 2026-11-27 stored 0 for a filter made for 0 items: read as 1.
            sized_for = (max(expected_items, 1), fpp)
        p.finish()
        if version == 1:
            raise ValueError(
                "blocked: version-1 blocked filters hash with foldhash (hasher 1), which is "
                "not portable; rebuild the filter from its items "
                "(bloomery create, bloomery add)"
            )
        if not 1 <= num_blocks <= 1 << 32:
            raise ValueError(f"blocked: num_blocks {num_blocks} is not in 1..=2^32")
        if lanes != 8:
            raise ValueError(f"blocked: lanes is {lanes}, must be 8")
        if hasher == 1:
            raise ValueError(
                "blocked: hasher 1 (foldhash, format version 1) is refused; rebuild the "
                "filter from its items (bloomery create, bloomery add)"
            )
        if hasher != 2:
            raise ValueError(f"blocked: hasher is {hasher}, must be 2 (XXH3-64)")
        if len(payload) != 64 * num_blocks:
            raise ValueError(
                f"blocked: payload is {len(payload)} bytes, {num_blocks} blocks need "
                f"{64 * num_blocks}"
            )
        return cls(num_blocks, seed, bytearray(payload), lanes, hasher, version, sized_for)

    def contains(self, item: bytes) -> bool:
        """Present when all eight bits of the item's block are set (section "2: blocked")."""
        block, bits = blocked_location(item, self.num_blocks, self.seed)
        base = 64 * block
        return all(_bit(self.blocks, base + 8 * j, b) for j, b in enumerate(bits))

    def add(self, item: bytes) -> None:
        """Sets the item's eight bits (section "2: blocked")."""
        block, bits = blocked_location(item, self.num_blocks, self.seed)
        base = 64 * block
        for j, b in enumerate(bits):
            _set_bit(self.blocks, base + 8 * j, b)

    def params_bytes(self) -> bytes:
        """``num_blocks`` u64, ``lanes`` u32, ``hasher`` u32, ``seed`` u64, then the sizing
        when there is one (section "2: blocked")."""
        params = struct.pack("<QIIQ", self.num_blocks, self.lanes, self.hasher, self.seed)
        if self.sized_for is not None:
            params += struct.pack("<Qd", *self.sized_for)
        return params

    def to_bytes(self) -> bytes:
        """The whole version-2 file (section "Header")."""
        return build_file(BLOCKED, self.params_bytes(), bytes(self.blocks))


@dataclass
class SplitBlockFilter:
    """Variant 8, split-block (section "8: split-block"): Parquet's bitset, 32-byte blocks
    of eight little-endian 32-bit words, hashed as Parquet does (hasher 1) or with XXH3-64
    and a seed (hasher 2)."""

    num_blocks: int
    blocks: bytearray  # num_blocks * 32 bytes
    hasher: int = 1
    version: int = WRITE_VERSION
    seed: int = 0  # hasher 2 only

    VARIANT = SPLIT_BLOCK

    @classmethod
    def new(cls, num_blocks: int, seed: int | None = None) -> "SplitBlockFilter":
        """An empty split-block filter: Parquet's hash, or XXH3-64 with ``seed`` when one
        is given (section "8: split-block")."""
        if not 1 <= num_blocks <= MAX_SPLIT_BLOCKS:
            raise ValueError(f"split-block: num_blocks {num_blocks} is not in 1..=2^26-1")
        if seed is None:
            return cls(num_blocks, bytearray(32 * num_blocks))
        return cls(num_blocks, bytearray(32 * num_blocks), 2, WRITE_VERSION, seed)

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "SplitBlockFilter":
        """Parameters ``num_blocks`` u64, ``hasher`` u32 = 1, or ``hasher`` u32 = 2 and
        ``seed`` u64; payload ``num_blocks`` blocks of 32 bytes; no version-1 files
        (sections "8: split-block", "Version 1")."""
        p = _Params(params, "split-block")
        num_blocks = p.u64()
        hasher = p.u32()
        seed = p.u64() if hasher == 2 else 0
        p.finish()
        if version == 1:
            raise ValueError("split-block: format version 1 has no split-block variant")
        if not 1 <= num_blocks <= MAX_SPLIT_BLOCKS:
            raise ValueError(f"split-block: num_blocks {num_blocks} is not in 1..=2^26-1")
        if hasher not in (1, 2):
            raise ValueError(
                f"split-block: hasher is {hasher}, must be 1 (XXH64, seed 0) or 2 (XXH3-64)"
            )
        if len(payload) != 32 * num_blocks:
            raise ValueError(
                f"split-block: payload is {len(payload)} bytes, {num_blocks} blocks need "
                f"{32 * num_blocks}"
            )
        return cls(num_blocks, bytearray(payload), hasher, version, seed)

    def contains(self, item: bytes) -> bool:
        """Present when all eight bits of the item's block are set (section
        "8: split-block")."""
        block, bits = split_block_location(item, self.num_blocks, self.hasher, self.seed)
        base = 32 * block
        return all(_bit(self.blocks, base + 4 * j, b) for j, b in enumerate(bits))

    def add(self, item: bytes) -> None:
        """Sets the item's eight bits (section "8: split-block")."""
        block, bits = split_block_location(item, self.num_blocks, self.hasher, self.seed)
        base = 32 * block
        for j, b in enumerate(bits):
            _set_bit(self.blocks, base + 4 * j, b)

    def params_bytes(self) -> bytes:
        """``num_blocks`` u64, ``hasher`` u32, and for hasher 2 ``seed`` u64 (section
        "Variants")."""
        if self.hasher == 2:
            return struct.pack("<QIQ", self.num_blocks, self.hasher, self.seed)
        return struct.pack("<QI", self.num_blocks, self.hasher)

    def to_bytes(self) -> bytes:
        """The whole version-2 file (section "Header")."""
        return build_file(SPLIT_BLOCK, self.params_bytes(), bytes(self.blocks))


@dataclass
class CountingFilter:
    """Variant 3, counting (section "3: counting"): 4-bit counters, two per byte."""

    num_counters: int
    num_hashes: int
    counters: bytes
    version: int = WRITE_VERSION

    VARIANT = COUNTING

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "CountingFilter":
        """Parameters ``num_counters`` u64, ``num_hashes`` u32; payload
        ``ceil(num_counters / 2)`` bytes (section "3: counting")."""
        p = _Params(params, "counting")
        n = p.u64()
        k = p.u32()
        p.finish()
        if not 1 <= n <= 64 * MAX_WORDS:
            raise ValueError(f"counting: num_counters {n} is not in 1..=64*(2^31-1)")
        _check_num_hashes("counting", k)
        if len(payload) != (n + 1) // 2:
            raise ValueError(
                f"counting: payload is {len(payload)} bytes, {n} counters need {(n + 1) // 2}"
            )
        if n % 2 and payload[-1] >> 4:
            raise ValueError(f"counting: the unused high nibble of the last byte is {payload[-1] >> 4:#x}, not zero")
        return cls(n, k, bytes(payload), version)

    def counter(self, i: int) -> int:
        """Counter ``2i`` is the low nibble of byte ``i``, ``2i+1`` the high one."""
        byte = self.counters[i >> 1]
        return (byte >> 4) if i & 1 else (byte & 0x0F)

    def contains(self, item: bytes) -> bool:
        """Present when all the item's counters (classic positions, ``m`` =
        ``num_counters``) are non-zero (section "3: counting")."""
        h1, h2 = murmur3_h1_h2(item)
        return all(
            self.counter(pos) != 0
            for pos in classic_positions(h1, h2, self.num_hashes, self.num_counters)
        )


@dataclass
class SubFilter:
    """One classic bit array inside a scalable or rotating filter."""

    num_hashes: int
    num_words: int
    offset: int  # byte offset of its words in the payload
    items: int = 0
    capacity: int = 0  # scalable
    started_ms: int = 0  # rotating


def _take_sub_filters(variant: str, subs: list[SubFilter], payload: memoryview) -> None:
    """Lays the sub-filters' words out one after the other and checks that they fill the
    payload exactly (sections "4: scalable", "7: rotating")."""
    offset = 0
    for s in subs:
        _check_num_hashes(variant, s.num_hashes)
        _check_num_words(variant, s.num_words)
        s.offset = offset
        offset += 8 * s.num_words
    if offset != len(payload):
        raise ValueError(
            f"{variant}: payload is {len(payload)} bytes, the words need {offset}"
        )


@dataclass
class ScalableFilter:
    """Variant 4, scalable (section "4: scalable"): classic sub-filters."""

    initial_capacity: int
    fpp: float
    expansion: int
    tightening: float
    scaling: int
    subs: list[SubFilter]
    words: bytes
    version: int = WRITE_VERSION

    VARIANT = SCALABLE

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "ScalableFilter":
        """Parameters ``initial_capacity`` u64, ``fpp`` f64, ``expansion`` u32,
        ``tightening`` f64, ``scaling`` u8, ``count`` u32, then ``count`` times
        ``capacity`` u64, ``items`` u64, ``num_hashes`` u32, ``num_words`` u64
        (section "4: scalable")."""
        p = _Params(params, "scalable")
        initial_capacity = p.u64()
        fpp = p.f64()
        expansion = p.u32()
        tightening = p.f64()
        scaling = p.u8()
        count = p.u32()
        if initial_capacity < 1:
            raise ValueError("scalable: initial_capacity is 0")
        _check_open_unit("scalable", "fpp", fpp)
        if expansion < 1:
            raise ValueError("scalable: expansion is 0")
        _check_open_unit("scalable", "tightening", tightening)
        if scaling not in (0, 1):
            raise ValueError(f"scalable: scaling is {scaling}, must be 0 or 1")
        if not 1 <= count <= 64:
            raise ValueError(f"scalable: count {count} is not in 1..=64")
        subs = []
        for _ in range(count):
            capacity = p.u64()
            items = p.u64()
            k = p.u32()
            nw = p.u64()
            subs.append(SubFilter(k, nw, 0, items=items, capacity=capacity))
        p.finish()
        _take_sub_filters("scalable", subs, payload)
        return cls(
            initial_capacity, fpp, expansion, tightening, scaling, subs, bytes(payload), version
        )

    def contains(self, item: bytes) -> bool:
        """Present when any sub-filter holds the item (section "4: scalable")."""
        h1, h2 = murmur3_h1_h2(item)
        return any(
            _classic_contains(self.words, s.offset, s.num_words, s.num_hashes, h1, h2)
            for s in self.subs
        )


@dataclass
class RetouchedFilter:
    """Variant 5, retouched (section "5: retouched"): a classic bit array plus lists."""

    num_hashes: int
    num_words: int
    random_state: int
    false_negatives: int
    item_lists: list[tuple[int, int]]  # (bit index, entry count)
    false_positive_lists: list[tuple[int, int]]
    words: bytes
    version: int = WRITE_VERSION

    VARIANT = RETOUCHED

    @staticmethod
    def _read_lists(
        name: str, count: int, payload: memoryview, pos: int, m: int
    ) -> tuple[list[tuple[int, int]], int]:
        """``count`` lists from byte ``pos``: bit index u64 (< m), entry count u32, that
        many (h1, h2) u64 pairs, in increasing bit-index order (section "5: retouched").
        The entries are skipped (only the words answer lookups) but must be present."""
        if count > (len(payload) - pos) // 12:
            raise ValueError(f"retouched: {count} {name} cannot fit in the payload")
        lists = []
        previous = -1
        for _ in range(count):
            if pos + 12 > len(payload):
                raise ValueError(f"retouched: the payload ends inside the {name}")
            bit, entries = struct.unpack_from("<QI", payload, pos)
            pos += 12
            if bit >= m:
                raise ValueError(f"retouched: {name} bit index {bit} is not below {m}")
            if bit <= previous:
                raise ValueError(f"retouched: {name} bit indices are not increasing")
            previous = bit
            if pos + 16 * entries > len(payload):
                raise ValueError(f"retouched: the payload ends inside the {name}")
            pos += 16 * entries
            lists.append((bit, entries))
        return lists, pos

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "RetouchedFilter":
        """Parameters ``num_hashes`` u32, ``num_words`` u64, ``random_state`` u64,
        ``false_negatives`` u64, ``item_lists`` u64, ``false_positive_lists`` u64;
        payload the words, then the lists, nothing after (section "5: retouched")."""
        p = _Params(params, "retouched")
        k = p.u32()
        nw = p.u64()
        random_state = p.u64()
        false_negatives = p.u64()
        n_items = p.u64()
        n_fps = p.u64()
        p.finish()
        _check_num_hashes("retouched", k)
        _check_num_words("retouched", nw)
        if 8 * nw > len(payload):
            raise ValueError(f"retouched: {nw} words do not fit in {len(payload)} bytes")
        m = 64 * nw
        pos = 8 * nw
        item_lists, pos = cls._read_lists("item lists", n_items, payload, pos, m)
        fp_lists, pos = cls._read_lists("false-positive lists", n_fps, payload, pos, m)
        if pos != len(payload):
            raise ValueError(
                f"retouched: {len(payload) - pos} bytes follow the lists in the payload"
            )
        return cls(
            k, nw, random_state, false_negatives, item_lists, fp_lists,
            bytes(payload[: 8 * nw]), version,
        )  # fmt: skip

    def contains(self, item: bytes) -> bool:
        """The classic lookup on the words alone (section "5: retouched")."""
        h1, h2 = murmur3_h1_h2(item)
        return _classic_contains(self.words, 0, self.num_words, self.num_hashes, h1, h2)


@dataclass
class AllowlistedFilter:
    """Variant 6, allowlisted (section "6: allowlisted"): a classic bit array and a
    sorted list of items that are never present."""

    num_hashes: int
    num_words: int
    listed: list[bytes]
    words: bytes
    version: int = WRITE_VERSION
    _listed_set: frozenset = field(default=frozenset(), repr=False)

    VARIANT = ALLOWLISTED

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "AllowlistedFilter":
        """Parameters ``num_hashes`` u32, ``num_words`` u64, ``num_listed`` u64; payload
        the words, then ``num_listed`` items (u32 length and bytes) in increasing byte
        order, nothing after (section "6: allowlisted")."""
        p = _Params(params, "allowlisted")
        k = p.u32()
        nw = p.u64()
        n_listed = p.u64()
        p.finish()
        _check_num_hashes("allowlisted", k)
        _check_num_words("allowlisted", nw)
        if 8 * nw > len(payload):
            raise ValueError(f"allowlisted: {nw} words do not fit in {len(payload)} bytes")
        pos = 8 * nw
        if n_listed > (len(payload) - pos) // 4:
            raise ValueError(f"allowlisted: {n_listed} listed items cannot fit in the payload")
        listed: list[bytes] = []
        for _ in range(n_listed):
            if pos + 4 > len(payload):
                raise ValueError("allowlisted: the payload ends inside the listed items")
            (length,) = struct.unpack_from("<I", payload, pos)
            pos += 4
            if pos + length > len(payload):
                raise ValueError("allowlisted: the payload ends inside a listed item")
            item = bytes(payload[pos : pos + length])
            pos += length
            if listed and not listed[-1] < item:
                raise ValueError("allowlisted: listed items are not in increasing byte order")
            listed.append(item)
        if pos != len(payload):
            raise ValueError(
                f"allowlisted: {len(payload) - pos} bytes follow the listed items"
            )
        return cls(k, nw, listed, bytes(payload[: 8 * nw]), version, frozenset(listed))

    def contains(self, item: bytes) -> bool:
        """Present when the classic lookup says so and the item is not listed (section
        "6: allowlisted")."""
        h1, h2 = murmur3_h1_h2(item)
        if not _classic_contains(self.words, 0, self.num_words, self.num_hashes, h1, h2):
            return False
        return bytes(item) not in self._listed_set


@dataclass
class RotatingFilter:
    """Variant 7, rotating (section "7: rotating"): classic generations, oldest first."""

    max_generations: int
    items_per_generation: int
    fpp: float
    window_ms: int
    generations: list[SubFilter]
    words: bytes
    version: int = WRITE_VERSION

    VARIANT = ROTATING

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "RotatingFilter":
        """Parameters ``max_generations`` u32, ``items_per_generation`` u64, ``fpp`` f64,
        ``window_ms`` u64, ``kept`` u32, then per kept generation ``items`` u64,
        ``started_ms`` u64 and (version 2 only) ``num_hashes`` u32, ``num_words`` u64;
        version 1 takes those two from the classic sizing (sections "7: rotating" and
        "Version 1")."""
        p = _Params(params, "rotating")
        max_generations = p.u32()
        per_generation = p.u64()
        fpp = p.f64()
        window_ms = p.u64()
        kept = p.u32()
        if not 2 <= max_generations <= 1024:
            raise ValueError(f"rotating: max_generations {max_generations} is not in 2..=1024")
        if per_generation < 1:
            raise ValueError("rotating: items_per_generation is 0")
        # The spec's range for the rotating fpp: (0, 1).
        _check_open_unit("rotating", "fpp", fpp)
        if not 1 <= kept <= max_generations:
            raise ValueError(f"rotating: kept {kept} is not in 1..={max_generations}")
        gens = []
        for _ in range(kept):
            items = p.u64()
            started_ms = p.u64()
            if version == 1:
                k, nw = classic_sizing(per_generation, fpp)
            else:
                k = p.u32()
                nw = p.u64()
            gens.append(SubFilter(k, nw, 0, items=items, started_ms=started_ms))
        p.finish()
        _take_sub_filters("rotating", gens, payload)
        return cls(max_generations, per_generation, fpp, window_ms, gens, bytes(payload), version)

    def contains(self, item: bytes) -> bool:
        """Present when any generation holds the item (section "7: rotating")."""
        h1, h2 = murmur3_h1_h2(item)
        return any(
            _classic_contains(self.words, g.offset, g.num_words, g.num_hashes, h1, h2)
            for g in self.generations
        )


# --------------------------------------------------------------------------- redisbloom

M64 = 0xC6A4A7935BD1E995
M32 = 0x5BD1E995


def murmur64a(data: bytes, seed: int) -> int:
    """MurmurHash64A, 8-byte words little-endian (section "9: redisbloom")."""
    h = (seed ^ (len(data) * M64)) & MASK64
    whole = len(data) // 8 * 8
    for i in range(0, whole, 8):
        k = (int.from_bytes(data[i : i + 8], "little") * M64) & MASK64
        k ^= k >> 47
        k = (k * M64) & MASK64
        h = ((h ^ k) * M64) & MASK64
    tail = data[whole:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * M64) & MASK64
    h ^= h >> 47
    h = (h * M64) & MASK64
    return h ^ (h >> 47)


def murmur2_32(data: bytes, seed: int) -> int:
    """32-bit MurmurHash2, 4-byte words little-endian (section "9: redisbloom")."""
    h = (seed ^ len(data)) & MASK32
    whole = len(data) // 4 * 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(data[i : i + 4], "little") * M32) & MASK32
        k ^= k >> 24
        k = (k * M32) & MASK32
        h = ((h * M32) & MASK32) ^ k
    tail = data[whole:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * M32) & MASK32
    h ^= h >> 13
    h = (h * M32) & MASK32
    return h ^ (h >> 15)


@dataclass
class RedisBloomLink:
    """One link of a redisbloom chain: its fields and where its bytes are."""

    bytes_len: int
    bits: int
    size: int
    error: float
    bpe: float
    hashes: int
    entries: int
    n2: int
    offset: int = 0


@dataclass
class RedisBloomFilter:
    """Variant 9, redisbloom (section "9: redisbloom"): RedisBloom's chain in its
    BF.SCANDUMP form."""

    size: int
    options: int
    growth: int
    links: list[RedisBloomLink]
    bits: bytes
    version: int = WRITE_VERSION

    VARIANT = REDISBLOOM

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "RedisBloomFilter":
        """Parameters ``layout`` u32 = 1, ``header_len`` u32; payload the chain header then
        every link's bytes (section "9: redisbloom")."""
        p = _Params(params, "redisbloom")
        layout = p.u32()
        header_len = p.u32()
        p.finish()
        if version == 1:
            raise ValueError("redisbloom: format version 1 has no redisbloom variant")
        if layout != 1:
            raise ValueError(f"redisbloom: layout is {layout}, must be 1")
        if header_len < 20 or header_len > len(payload):
            raise ValueError(f"redisbloom: header_len {header_len} does not fit the payload")
        header = bytes(payload[:header_len])
        size, count, options, growth = struct.unpack_from("<QIII", header, 0)
        if not 1 <= count <= 2048:
            raise ValueError(f"redisbloom: {count} links, must be 1..=2048")
        if header_len != 20 + 53 * count:
            raise ValueError(f"redisbloom: header_len {header_len} is not 20 + 53 x {count}")
        if options & ~0xF:
            raise ValueError(f"redisbloom: unknown option bits {options:#x}")
        links = []
        offset = header_len
        for i in range(count):
            fields = struct.unpack_from("<QQQddIQB", header, 20 + 53 * i)
            link = RedisBloomLink(*fields, offset=offset)
            if not 0 < link.error < 1:
                raise ValueError(f"redisbloom: link {i} error {link.error} is not in (0, 1)")
            if link.bits != 8 * link.bytes_len or link.bits < 8:
                raise ValueError(f"redisbloom: link {i} bits {link.bits} != 8 x bytes")
            if link.n2 > 63 or (link.n2 and link.bits < (1 << link.n2)):
                raise ValueError(f"redisbloom: link {i} n2 {link.n2} does not fit its bits")
            if not math.isfinite(link.bpe) or link.hashes != math.ceil(0.693147180559945 * link.bpe):
                raise ValueError(f"redisbloom: link {i} hashes {link.hashes} do not match bpe")
            if link.hashes < 1:
                raise ValueError(f"redisbloom: link {i} has no hash functions")
            cap = math.ceil(0.693147180559945 * (abs(math.log(link.error)) / 0.480453013918201)) + 1
            if link.hashes > cap:
                raise ValueError(f"redisbloom: link {i} hashes {link.hashes} exceed {cap}, what its error makes")
            offset += link.bytes_len
            links.append(link)
        if sum(link.size for link in links) != size:
            raise ValueError("redisbloom: the links' sizes do not sum to the chain's size")
        if offset != len(payload):
            raise ValueError(
                f"redisbloom: the links take {offset - header_len} bytes, the payload has "
                f"{len(payload) - header_len} after the header"
            )
        return cls(size, options, growth, links, bytes(payload), version)

    def hash_pair(self, item: bytes) -> tuple[int, int]:
        """(a, b): MurmurHash64A with FORCE64, else 32-bit MurmurHash2."""
        if self.options & 4:
            a = murmur64a(item, 0xC6A4A7935BD1E995)
            return a, murmur64a(item, a)
        a = murmur2_32(item, 0x9747B28C)
        return a, murmur2_32(item, a)

    def contains(self, item: bytes) -> bool:
        """Present when, in some link, all its bits ``(a + i*b) mod M`` are set."""
        a, b = self.hash_pair(item)
        for link in self.links:
            modulus = (1 << link.n2) if link.n2 else link.bits
            if all(
                self.bits[link.offset + (x >> 3)] >> (x & 7) & 1
                for x in (((a + i * b) & MASK64) % modulus for i in range(link.hashes))
            ):
                return True
        return False


@dataclass
class ScalableBlockedFilter:
    """Variant 10, scalable-blocked (section "10: scalable-blocked"): blocked sub-filters
    sharing one seed."""

    seed: int
    links: list[tuple[int, int, int, int]]  # (capacity, items, num_blocks, byte offset)
    blocks: bytes
    version: int = WRITE_VERSION
    # initial_capacity, fpp, expansion, tightening, scaling (for a writer)
    growth: tuple[int, float, int, float, int] = (1, 0.5, 1, 0.5, 0)

    VARIANT = SCALABLE_BLOCKED

    @classmethod
    def parse(cls, version: int, params: bytes, payload: memoryview) -> "ScalableBlockedFilter":
        """Parameters and payload as section "10: scalable-blocked" lists them."""
        p = _Params(params, "scalable-blocked")
        initial = p.u64()
        fpp = p.f64()
        expansion = p.u32()
        tightening = p.f64()
        scaling = p.u8()
        seed = p.u64()
        count = p.u32()
        if version == 1:
            raise ValueError("scalable-blocked: format version 1 has no scalable-blocked variant")
        if initial < 1:
            raise ValueError("scalable-blocked: initial_capacity 0")
        _check_open_unit("scalable-blocked", "fpp", fpp)
        _check_open_unit("scalable-blocked", "tightening", tightening)
        if expansion < 1:
            raise ValueError("scalable-blocked: expansion 0")
        if scaling not in (0, 1):
            raise ValueError(f"scalable-blocked: scaling {scaling} is not 0 or 1")
        if not 1 <= count <= 64:
            raise ValueError(f"scalable-blocked: count {count} is not in 1..=64")
        links = []
        offset = 0
        for _ in range(count):
            capacity, items, num_blocks = p.u64(), p.u64(), p.u64()
            if not 1 <= num_blocks <= 1 << 32:
                raise ValueError(f"scalable-blocked: num_blocks {num_blocks} is not in 1..=2^32")
            links.append((capacity, items, num_blocks, offset))
            offset += 64 * num_blocks
        p.finish()
        if offset != len(payload):
            raise ValueError(
                f"scalable-blocked: the sub-filters take {offset} bytes, the payload has "
                f"{len(payload)}"
            )
        return cls(seed, links, bytes(payload), version,
                   (initial, fpp, expansion, tightening, scaling))  # fmt: skip

    def contains(self, item: bytes) -> bool:
        """Present when any sub-filter's block holds all eight bits (variant 2's
        positions, one XXH3-64 hash with ``seed``)."""
        for _, _, num_blocks, offset in self.links:
            block, bits = blocked_location(item, num_blocks, self.seed)
            base = offset + 64 * block
            if all(_bit(self.blocks, base + 8 * j, b) for j, b in enumerate(bits)):
                return True
        return False


PARSERS = {
    CLASSIC: ClassicFilter.parse,
    BLOCKED: BlockedFilter.parse,
    COUNTING: CountingFilter.parse,
    SCALABLE: ScalableFilter.parse,
    RETOUCHED: RetouchedFilter.parse,
    ALLOWLISTED: AllowlistedFilter.parse,
    ROTATING: RotatingFilter.parse,
    SPLIT_BLOCK: SplitBlockFilter.parse,
    REDISBLOOM: RedisBloomFilter.parse,
    SCALABLE_BLOCKED: ScalableBlockedFilter.parse,
}


# --------------------------------------------------------------------------- files


def header_length(p: int) -> int:
    """``H``: ``32 + P + 8`` rounded up to a multiple of 64 (section "Header")."""
    return (FIXED_HEADER + p + 8 + 63) // 64 * 64


@dataclass
class Header:
    """The fields of the header (section "Header")."""

    version: int
    variant: int
    p: int
    length: int  # L
    payload_checksum: int
    h: int  # header length
    unsealed: bool = False


def read_header(data: bytes | memoryview) -> Header:
    """Checks and returns the header, in the spec's order (section "Header"): magic;
    version 1 or 2; ``P`` <= 65,536, ``L`` <= 2^62 and ``H`` bytes present; header
    checksum. The padding must be zero bytes."""
    data = memoryview(data)
    if len(data) < len(MAGIC) or bytes(data[:8]) != MAGIC:
        raise ValueError("not a bloomery file: bad magic")
    if len(data) < 10:
        raise ValueError("truncated: the file ends inside the header")
    (field,) = struct.unpack_from("<H", data, 8)
    unsealed, version = bool(field & UNSEALED), field & ~UNSEALED
    if version not in (1, 2) or (unsealed and version != 2):
        raise ValueError(f"unsupported format version {field} (this reader knows 1 and 2)")
    if len(data) < FIXED_HEADER:
        raise ValueError("truncated: the file ends inside the header")
    variant, p, length, payload_checksum = struct.unpack_from("<HIQQ", data, 10)
    if p > MAX_P:
        raise ValueError(f"parameter length P = {p} exceeds 65,536")
    if length > MAX_L:
        raise ValueError(f"payload length L = {length} exceeds 2^62")
    h = header_length(p)
    if len(data) < h:
        raise ValueError(f"truncated: the header is {h} bytes, the file {len(data)}")
    (stored,) = struct.unpack_from("<Q", data, h - 8)
    if xxh3_64(data[: h - 8]) != stored:
        raise ValueError("header checksum mismatch")
    if any(data[FIXED_HEADER + p : h - 8]):
        raise ValueError("header padding is not zero bytes")
    return Header(version, variant, p, length, payload_checksum, h, unsealed)


def read(data: bytes | bytearray | memoryview):
    """Parses and checks a whole file (section "Header", then "Variants" and "Version 1")
    and returns the filter. Raises ``ValueError`` on any failed check."""
    data = memoryview(bytes(data))
    hdr = read_header(data)
    parse = PARSERS.get(hdr.variant)
    if parse is None:
        raise ValueError(f"unknown variant code {hdr.variant}")
    total = hdr.h + hdr.length
    if len(data) < total:
        raise ValueError(f"truncated: the file should be {total} bytes, it is {len(data)}")
    if len(data) > total:
        raise ValueError(f"the file is {len(data)} bytes, {len(data) - total} more than H + L")
    payload = data[hdr.h : total]
    if hdr.unsealed:
        # Bits valid, checksum stale: used as they are (section "Sealed and unsealed files").
        if hdr.variant not in (CLASSIC, BLOCKED, SPLIT_BLOCK):
            raise ValueError(f"unsealed {VARIANT_NAMES[hdr.variant]} file: only classic, "
                             "blocked and split-block files are updated in place")
    elif xxh3_64(payload) != hdr.payload_checksum:
        raise ValueError("payload checksum mismatch")
    params = bytes(data[FIXED_HEADER : FIXED_HEADER + hdr.p])
    f = parse(hdr.version, params, payload)
    f.unsealed = hdr.unsealed
    return f


def read_file(path) -> object:
    """Reads and parses the file at ``path`` (see ``read``)."""
    with open(path, "rb") as f:
        return read(f.read())


def seal(data: bytes, unsealed: bool = False) -> bytes:
    """The file with its header written again as a writer seals it (section "Sealed and
    unsealed files", step 3): bit 15 clear and the payload's checksum; with ``unsealed``,
    the mark a writer sets in step 1 instead (the checksum kept)."""
    hdr = read_header(data)
    head = bytearray(data[: hdr.h])
    checksum = hdr.payload_checksum if unsealed else xxh3_64(bytes(data[hdr.h :]))
    struct.pack_into("<HHIQQ", head, 8, WRITE_VERSION | (UNSEALED if unsealed else 0),
                     hdr.variant, hdr.p, hdr.length, checksum)
    struct.pack_into("<Q", head, hdr.h - 8, xxh3_64(head[: hdr.h - 8]))
    return bytes(head) + bytes(data[hdr.h :])


def build_file(variant: int, params: bytes, payload: bytes, version: int = WRITE_VERSION) -> bytes:
    """A whole file (section "Header"): the 32 fixed bytes, the parameters, zero bytes up
    to ``H - 8``, the header checksum, then the payload."""
    p = len(params)
    if p > MAX_P:
        raise ValueError(f"parameters are {p} bytes, more than 65,536")
    h = header_length(p)
    head = bytearray(h)
    struct.pack_into(
        "<8sHHIQQ", head, 0, MAGIC, version, variant, p, len(payload), xxh3_64(payload)
    )
    head[FIXED_HEADER : FIXED_HEADER + p] = params
    struct.pack_into("<Q", head, h - 8, xxh3_64(head[: h - 8]))
    return bytes(head) + bytes(payload)


# --------------------------------------------------------------------------- growing writers


def _sub_filter_rate(fpp: float, tightening: float, scaling: int, i: int) -> float:
    """Sub-filter ``i``'s rate (sections "4: scalable", "10: scalable-blocked"): the power
    is ``i`` multiplications in turn, from 1 (``**`` rounds otherwise)."""
    if not scaling:
        return fpp
    power = 1.0
    for _ in range(i):
        power *= tightening
    return fpp * (1.0 - tightening) * power


class Refused(ValueError):
    """A writer refused an item and changed nothing."""


class ScalableWriter:
    """Adds items to a scalable filter (variant 4) by section "4: scalable"'s writer rule:
    only when no sub-filter holds it, into the last, starting a new sub-filter (rate
    sizing) when the last holds its capacity."""

    def __init__(self, filt: ScalableFilter):
        self.f = filt
        self.subs = [
            [s.capacity, s.items, s.num_hashes, bytearray(filt.words[s.offset : s.offset + 8 * s.num_words])]
            for s in filt.subs
        ]  # [capacity, items, num_hashes, words]

    def holds(self, sub, item: bytes) -> bool:
        h1, h2 = murmur3_h1_h2(item)
        return _classic_contains(sub[3], 0, len(sub[3]) // 8, sub[2], h1, h2)

    def skips(self, item: bytes) -> bool:
        """The page's rule: a present item changes nothing."""
        return any(self.holds(sub, item) for sub in self.subs)

    def add(self, item: bytes) -> None:
        if self.skips(item):
            return
        last = self.subs[-1]
        if last[1] >= last[0]:
            i = len(self.subs)
            if not self.f.scaling or i >= 64:
                raise Refused("scalable: full")
            capacity = min(self.f.initial_capacity * self.f.expansion**i, MASK64)
            k, words = rate_sizing(capacity, _sub_filter_rate(self.f.fpp, self.f.tightening, 1, i))
            self.subs.append([capacity, 0, k, bytearray(8 * words)])
        last = self.subs[-1]
        h1, h2 = murmur3_h1_h2(item)
        for pos in classic_positions(h1, h2, last[2], 64 * (len(last[3]) // 8)):
            _set_bit(last[3], 0, pos)
        last[1] += 1

    def to_bytes(self) -> bytes:
        f = self.f
        params = struct.pack("<QdIdBI", f.initial_capacity, f.fpp, f.expansion, f.tightening,
                             f.scaling, len(self.subs))  # fmt: skip
        for capacity, items, k, words in self.subs:
            params += struct.pack("<QQIQ", capacity, items, k, len(words) // 8)
        return build_file(SCALABLE, params, b"".join(bytes(s[3]) for s in self.subs))


class ScalableBlockedWriter:
    """Adds items to a scalable-blocked filter (variant 10) by its section's writer rule,
    new sub-filters by the blocked sizing."""

    def __init__(self, filt: ScalableBlockedFilter):
        self.f = filt
        self.links = [[c, items, nb, bytearray(filt.blocks[o : o + 64 * nb])]
                      for c, items, nb, o in filt.links]  # fmt: skip

    def add(self, item: bytes) -> None:
        located = [(link, blocked_location(item, link[2], self.f.seed)) for link in self.links]
        if any(all(_bit(link[3], 64 * b + 8 * j, x) for j, x in enumerate(bits))
               for link, (b, bits) in located):  # fmt: skip
            return
        initial, fpp, expansion, tightening, scaling = self.f.growth
        last = self.links[-1]
        if last[1] >= last[0]:
            i = len(self.links)
            if not scaling or i >= 64:
                raise Refused("scalable-blocked: full")
            capacity = min(initial * expansion**i, MASK64)
            blocks = blocked_sizing(capacity, _sub_filter_rate(fpp, tightening, 1, i))
            self.links.append([capacity, 0, blocks, bytearray(64 * blocks)])
        last = self.links[-1]
        b, bits = blocked_location(item, last[2], self.f.seed)
        for j, x in enumerate(bits):
            _set_bit(last[3], 64 * b + 8 * j, x)
        last[1] = min(last[1] + 1, MASK64)

    def to_bytes(self) -> bytes:
        initial, fpp, expansion, tightening, scaling = self.f.growth
        params = struct.pack("<QdIdBQI", initial, fpp, expansion, tightening, scaling,
                             self.f.seed, len(self.links))  # fmt: skip
        for capacity, items, nb, _ in self.links:
            params += struct.pack("<QQQ", capacity, items, nb)
        return build_file(SCALABLE_BLOCKED, params, b"".join(bytes(x[3]) for x in self.links))


class RotatingWriter:
    """Adds items to a rotating filter (variant 7) by section "7: rotating"'s three steps:
    time never goes back; rotate first (rate sizing for the new generation); then set the
    item's positions in the newest generation even when an older one holds it, counting
    it only when a bit changed."""

    def __init__(self, filt: RotatingFilter):
        self.f = filt
        self.gens = [
            [g.items, g.started_ms, g.num_hashes, bytearray(filt.words[g.offset : g.offset + 8 * g.num_words])]
            for g in filt.generations
        ]  # [items, started_ms, num_hashes, words]

    def holds(self, gen, item: bytes) -> bool:
        h1, h2 = murmur3_h1_h2(item)
        return _classic_contains(gen[3], 0, len(gen[3]) // 8, gen[2], h1, h2)

    def add(self, item: bytes, now: int) -> None:
        f = self.f
        newest = self.gens[-1]
        now = max(now, newest[1])
        expired = f.window_ms > 0 and now - newest[1] >= f.window_ms
        if newest[0] >= f.items_per_generation or expired:
            try:
                k, words = rate_sizing(f.items_per_generation, f.fpp)
            except ValueError as error:
                raise Refused(str(error)) from error
            self.gens.append([0, now, k, bytearray(8 * words)])
            if len(self.gens) > f.max_generations:
                self.gens.pop(0)
        newest = self.gens[-1]
        h1, h2 = murmur3_h1_h2(item)
        changed = False
        for pos in classic_positions(h1, h2, newest[2], 64 * (len(newest[3]) // 8)):
            changed |= not _bit(newest[3], 0, pos)
            _set_bit(newest[3], 0, pos)
        if changed:
            newest[0] += 1

    def contains(self, item: bytes) -> bool:
        return any(self.holds(gen, item) for gen in self.gens)

    def to_bytes(self) -> bytes:
        f = self.f
        params = struct.pack("<IQdQI", f.max_generations, f.items_per_generation, f.fpp,
                             f.window_ms, len(self.gens))  # fmt: skip
        for items, started_ms, k, words in self.gens:
            params += struct.pack("<QQIQ", items, started_ms, k, len(words) // 8)
        return build_file(ROTATING, params, b"".join(bytes(g[3]) for g in self.gens))
