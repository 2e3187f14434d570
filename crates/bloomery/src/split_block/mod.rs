//! The split-block Bloom filter, bit for bit Apache Parquet's Split Block Bloom Filter
//! (SBBF; parquet-format's BloomFilter.md), which Parquet, Arrow, Spark and Impala write
//! into files to skip row groups: a filter built here is the bitset a Parquet writer
//! would store for the same values (at the sizes Parquet's readers take: a power of two
//! bytes, at most 128 MiB), and a bitset read from a Parquet file answers here.
//!
//! An item is funnelled to bytes ([`Funnel`]) and hashed with XXH64, seed 0: Parquet
//! hashes a value's plain encoding, which for BYTE_ARRAY, INT32 and INT64 columns is what
//! the funnel gives (a string's UTF-8 bytes, an `i32`/`i64`'s little-endian bytes). The
//! 64-bit hash h picks block ⌊(h >> 32) · z / 2^32⌋ of the z blocks, and word i of that
//! 256-bit block (eight 32-bit words) gets bit ((h mod 2^32) · salt_i mod 2^32) >> 27, with
//! the spec's eight odd salts: Putze, Sanders & Singler's blocked filter, split into words
//! as in Broder & Mitzenmacher's survey, §2.1. On an AVX2 machine a block is one 256-bit
//! register, so a lookup is one load, one multiply, two shifts and one `vptest`.
//!
//! Sizing is exact for the layout ([`crate::sizing::split_block_num_blocks`]): a
//! Poisson mixture over block loads, with the blocked filter's 5% headroom. At 1% that is
//! 10.65 bits per item (the 512-bit blocked filter needs 10.21, a classic one 9.59); for
//! 10^6 keys, 41,591 blocks and a measured rate of 0.952% over 10^6 fresh keys (0.090%
//! at 0.1%, 17.06 bits per item). A filter that hashes as Parquet does is rounded up to a
//! power of two bytes, the only sizes most Parquet readers take
//! ([`crate::sizing::parquet_num_blocks`]): 65,536 blocks for the same 10^6 keys at 1%
//! (16.78 bits per item, measured 0.105%)
//! (`cargo test --release -p bloomery --test split_block -- --nocapture` prints both).
//!
//! Parquet's file bytes are [`to_parquet_bytes`](SplitBlockBloomFilter::to_parquet_bytes)
//! (the Thrift header of [`crate::format::parquet`] and the bitset, what a column chunk's
//! `bloom_filter_offset` points at) and
//! [`to_parquet_bitset`](SplitBlockBloomFilter::to_parquet_bitset) (the bitset alone);
//! the bloomery file (variant 8, docs/format.md) holds the same bitset as its payload.
//!
//! The same layout with bloomery's own item hash ([`SplitBlockHasher::Xxh3`]: XXH3-64 with
//! a seed, the blocked filter's) is the filter for a machine whose widest vectors are
//! AVX2 and whose callers look items up one at a time: its block is one register, where
//! the blocked filter's 512-bit block needs two, and XXH3 costs less than XXH64 (several
//! times less for long items). It takes about 4% more bits than the blocked filter for the
//! same rate, and Parquet cannot read it (Parquet hashes with XXH64), so export to Parquet
//! refuses it.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod kernel;
mod scalar;

use std::borrow::Cow;

use crate::bits::blocks::for_hash_chunks;
use kernel::BLOCK_WORDS;
pub use kernel::{Kernel, SplitBlock};
use xxhash_rust::xxh64::xxh64;

use crate::bits::{ZeroedArray, impl_try_clone};
use crate::error::{Error, FormatProblem, Result, inconsistent};
use crate::format::native::{ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{Funnel, FunnelBuffer, xxh3_64_item, xxh3_64_item_seeded};
use crate::sizing::{
    MAX_SPLIT_BLOCKS, SPLIT_BLOCK_BITS, estimated_items, split_block_false_positive_rate,
    split_block_num_blocks,
};

/// The hasher code stored in a split-block filter's parameters: XXH64 with seed 0 of the
/// item's funnelled bytes, Parquet's ([`SplitBlockHasher::Parquet`]).
pub const HASHER_XXH64: u32 = 1;

/// The hasher code of [`SplitBlockHasher::Xxh3`]: XXH3-64 of the item's funnelled bytes
/// with the seed stored after it, the blocked filter's item hash (its hasher code too).
pub const HASHER_XXH3_64: u32 = 2;

/// How a split-block filter hashes an item's funnelled bytes to the 64-bit hash that picks
/// its block and bits. Fixed when the filter is made and stored in its file; filters merge
/// only with the same hasher.
///
/// ```
/// use bloomery::split_block::SplitBlockHasher;
///
/// let parquet = SplitBlockHasher::Parquet;
/// let ours = SplitBlockHasher::Xxh3 { seed: 7 };
/// assert_eq!(parquet.hash("apple"), bloomery::split_block::xxh64_item("apple"));
/// assert_eq!(ours.hash("apple"), bloomery::hash::xxh3_64_item("apple", 7));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SplitBlockHasher {
    /// XXH64, seed 0: Parquet's. The filter's bitset is what a Parquet file stores for the
    /// same values; only such a filter exports to Parquet.
    #[default]
    Parquet,
    /// XXH3-64 with `seed` ([`crate::hash::xxh3_64_item`]), the blocked filter's item hash:
    /// cheaper than XXH64 and seedable, but not Parquet's.
    Xxh3 {
        /// The hash seed.
        seed: u64,
    },
}

impl SplitBlockHasher {
    /// The 64-bit hash of `item`'s funnelled bytes.
    #[inline(always)]
    pub fn hash<T: Funnel + ?Sized>(self, item: &T) -> u64 {
        match self {
            SplitBlockHasher::Parquet => xxh64_item(item),
            SplitBlockHasher::Xxh3 { seed } => xxh3_64_item(item, seed),
        }
    }

    /// The code stored in the filter's parameters ([`HASHER_XXH64`] or [`HASHER_XXH3_64`]).
    pub fn code(self) -> u32 {
        match self {
            SplitBlockHasher::Parquet => HASHER_XXH64,
            SplitBlockHasher::Xxh3 { .. } => HASHER_XXH3_64,
        }
    }

    /// How `bloomery info` and errors name it.
    pub fn describe(self) -> String {
        match self {
            SplitBlockHasher::Parquet => "XXH64, seed 0 (Parquet's split block Bloom filter)".into(),
            SplitBlockHasher::Xxh3 { seed } => {
                format!("XXH3-64, seed {seed} (bloomery's item hash; not Parquet's)")
            }
        }
    }
}

/// Bytes in a block.
const BLOCK_BYTES: usize = 32;

/// The name of the raw bitset form in errors.
const BITSET_FORMAT: &str = "Parquet bloom filter bitset";

/// Bits an item sets: one in each of a block's eight words.
const BITS_PER_ITEM: u32 = BLOCK_WORDS as u32;

/// XXH64 (seed 0) of `item`'s funnelled bytes: Parquet's hash of a value whose plain
/// encoding those bytes are.
///
/// ```
/// use bloomery::split_block::xxh64_item;
///
/// // The XXH64 test vector of the empty input.
/// assert_eq!(xxh64_item(&b""[..]), 0xef46_db37_51d8_e999);
/// assert_eq!(xxh64_item("apple"), xxh64_item(&b"apple"[..]));
/// assert_eq!(xxh64_item(&7i64), xxh64_item(&7i64.to_le_bytes()[..]));
/// ```
#[inline]
pub fn xxh64_item<T: Funnel + ?Sized>(item: &T) -> u64 {
    if let Some(bytes) = item.contiguous_bytes() {
        return xxh64_seed0(bytes);
    }
    let mut buffer = FunnelBuffer::new();
    item.funnel(&mut buffer);
    xxh64_seed0(buffer.as_slice())
}

/// XXH64 of `bytes` with seed 0. Inputs of 8 and 4 bytes (Parquet's INT64 and INT32 values,
/// the items `i64`, `u64`, `i32`, `u32` funnel to) are hashed here, inline: where the
/// length is known at compile time they are a dozen instructions with no call. Every other
/// length goes to `xxhash_rust`'s `xxh64`, which the compiler does not inline across
/// crates and which walks its input in loops whatever its length. The tests compare the
/// two for every length up to 40 and random inputs.
#[inline(always)]
fn xxh64_seed0(bytes: &[u8]) -> u64 {
    match *bytes {
        [a, b, c, d, e, f, g, h] => xxh64_of_8(u64::from_le_bytes([a, b, c, d, e, f, g, h])),
        [a, b, c, d] => xxh64_of_4(u32::from_le_bytes([a, b, c, d])),
        _ => xxh64(bytes, 0),
    }
}

/// XXH64's five primes (the xxHash specification, `XXH_PRIME64_1` to `_5`).
const XXH_PRIME64: [u64; 5] = [
    0x9E37_79B1_85EB_CA87,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x85EB_CA77_C2B2_AE63,
    0x27D4_EB2F_1656_67C5,
];

/// XXH64, seed 0, of the 8 bytes of `word` (little-endian): the short-input start
/// (seed + prime 5 + length), one 8-byte lane, then the avalanche.
#[inline(always)]
fn xxh64_of_8(word: u64) -> u64 {
    let [p1, p2, _, p4, p5] = XXH_PRIME64;
    let lane = word.wrapping_mul(p2).rotate_left(31).wrapping_mul(p1);
    let acc = (p5.wrapping_add(8) ^ lane)
        .rotate_left(27)
        .wrapping_mul(p1)
        .wrapping_add(p4);
    xxh64_avalanche(acc)
}

/// XXH64, seed 0, of the 4 bytes of `word` (little-endian): one 4-byte lane.
#[inline(always)]
fn xxh64_of_4(word: u32) -> u64 {
    let [p1, p2, p3, _, p5] = XXH_PRIME64;
    let acc = (p5.wrapping_add(4) ^ u64::from(word).wrapping_mul(p1))
        .rotate_left(23)
        .wrapping_mul(p2)
        .wrapping_add(p3);
    xxh64_avalanche(acc)
}

/// XXH64's final mix.
#[inline(always)]
fn xxh64_avalanche(mut acc: u64) -> u64 {
    let [_, p2, p3, _, _] = XXH_PRIME64;
    acc ^= acc >> 33;
    acc = acc.wrapping_mul(p2);
    acc ^= acc >> 29;
    acc = acc.wrapping_mul(p3);
    acc ^ (acc >> 32)
}

/// A filter's [`SplitBlockHasher`] with the answer to "XXH3 with seed 0?" kept beside it,
/// so that the default XXH3 road costs one test of a flag per item. Matching on the hasher
/// and then testing the seed cost about 3 instructions per operation:
/// `scripts/url-lookup-instructions.sh` counts 200.1 instructions per u64 key (an insert
/// and two lookups) before this road (12e676f) and 190.1 with it (d8199f2).
#[derive(Clone, Copy, Debug)]
struct Road {
    hasher: SplitBlockHasher,
    xxh3_seed0: bool,
}

impl Road {
    fn new(hasher: SplitBlockHasher) -> Self {
        Self {
            hasher,
            xxh3_seed0: hasher == SplitBlockHasher::Xxh3 { seed: 0 },
        }
    }

    /// The hasher's hash of `item` ([`SplitBlockHasher::hash`]). Past the flag, XXH3's
    /// seed is not 0 and is hashed as it comes, without [`xxh3_64_item`]'s own test for 0:
    /// with that test the road had four copies of hash code where three do, and the
    /// compiler stopped inlining the filter's `contains` into the benchmark's loop.
    #[inline(always)]
    fn hash<T: Funnel + ?Sized>(self, item: &T) -> u64 {
        match self.hasher {
            _ if self.xxh3_seed0 => xxh3_64_item(item, 0),
            SplitBlockHasher::Parquet => xxh64_item(item),
            SplitBlockHasher::Xxh3 { seed } => xxh3_64_item_seeded(item, seed),
        }
    }
}

/// Parquet's Split Block Bloom Filter: 256-bit blocks, one memory access per item, the
/// bytes Parquet files hold (or, with [`SplitBlockHasher::Xxh3`], the same layout hashed as
/// the blocked filter is).
///
/// ```
/// use bloomery::SplitBlockBloomFilter;
///
/// let mut filter = SplitBlockBloomFilter::with_fpp(1_000_000, 0.01)?;
/// filter.insert("a string");
/// filter.insert(&42i64); // an INT64 column's value
/// assert!(filter.contains(&b"a string"[..])); // the same bytes, the same item
/// assert!(filter.contains(&42i64));
/// assert!(!filter.contains(&43i64));
///
/// // What a Parquet file stores for a column chunk, header and bitset.
/// let bytes = filter.to_parquet_bytes()?;
/// assert_eq!(SplitBlockBloomFilter::from_parquet_bytes(&bytes)?, filter);
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SplitBlockBloomFilter {
    blocks: ZeroedArray<SplitBlock>,
    kernel: Kernel,
    road: Road,
}

impl_try_clone!(SplitBlockBloomFilter, fallible: [blocks], copied: [kernel, road]);

pub(crate) fn check_num_blocks(num_blocks: u64) -> Result<usize> {
    if num_blocks == 0 || num_blocks > MAX_SPLIT_BLOCKS {
        return Err(Error::NumBits {
            value: u128::from(num_blocks) * u128::from(SPLIT_BLOCK_BITS),
            max: MAX_SPLIT_BLOCKS * SPLIT_BLOCK_BITS,
            why: "a split-block filter has 1 to 2^26 - 1 blocks of 256 bits (Parquet's i32 byte count)",
        });
    }
    Ok(num_blocks as usize)
}

/// The blocks of a filter for `expected_items` at `fpp` hashing with `hasher`: as Parquet's
/// readers take it for Parquet's hash, exactly for bloomery's own.
pub(crate) fn num_blocks_for(expected_items: u64, fpp: f64, hasher: SplitBlockHasher) -> Result<u64> {
    match hasher {
        SplitBlockHasher::Parquet => crate::sizing::parquet_num_blocks(expected_items, fpp),
        SplitBlockHasher::Xxh3 { .. } => split_block_num_blocks(expected_items, fpp),
    }
}

/// The number of bits set in `blocks`.
fn bit_count(blocks: &[SplitBlock]) -> u64 {
    blocks
        .iter()
        .flat_map(|block| block.0)
        .map(|word| u64::from(word.count_ones()))
        .sum()
}

/// The probability that a fresh item is reported present: the mean over blocks of the
/// product of each word's fill (exact for uniform hashing).
fn current_fpp(blocks: &[SplitBlock]) -> f64 {
    let sum: f64 = blocks
        .iter()
        .map(|block| {
            block
                .0
                .iter()
                .map(|word| f64::from(word.count_ones()) / 32.0)
                .product::<f64>()
        })
        .sum();
    sum / blocks.len() as f64
}

/// Looks up every item in `blocks`: hashes a chunk ahead, then the kernel's batch loop
/// prefetches their blocks. Panics if the lengths differ.
fn contains_items<T: Funnel>(
    kernel: Kernel,
    road: Road,
    blocks: &[SplitBlock],
    items: &[T],
    results: &mut [bool],
) {
    assert_eq!(items.len(), results.len(), "one result per item");
    for_hash_chunks(
        items,
        |item| road.hash(item),
        |offset, hashes| {
            kernel.contains_batch(blocks, hashes, &mut results[offset..offset + hashes.len()]);
        },
    );
}

/// The blocks as Parquet's bitset bytes (words little-endian): borrowed on a
/// little-endian machine, where memory already holds them so.
fn blocks_as_le_bytes(blocks: &[SplitBlock]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        // SAFETY: a SplitBlock is `repr(C)` around `[u32; 8]`, 32 bytes without padding, so
        // the blocks are `32 * len` initialised bytes, borrowed for as long as `blocks`.
        Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), size_of_val(blocks))
        })
    } else {
        Cow::Owned(
            blocks
                .iter()
                .flat_map(|block| block.0)
                .flat_map(u32::to_le_bytes)
                .collect(),
        )
    }
}

/// Checks that two split-block filters, given as (block count, hasher), put every item at
/// the same bits: what a union, an intersection or an in-place merge needs.
pub(crate) fn check_same_shape(
    (mine, my_hasher): (usize, SplitBlockHasher),
    (theirs, their_hasher): (usize, SplitBlockHasher),
) -> Result<()> {
    // The hashers first: filters of different hashers are sized differently too (Parquet's
    // to a power of two bytes), and the hasher is the difference to name.
    let reason = if my_hasher != their_hasher {
        format!(
            "hashers differ: {} vs {}",
            my_hasher.describe(),
            their_hasher.describe()
        )
    } else if mine != theirs {
        // One sized before Parquet-hashed filters were sized as Parquet's readers take
        // them (a power of two bytes), one after for the same items and rate (the next
        // power of two): said, since no create makes the old size.
        let before = match (mine.is_power_of_two(), theirs.is_power_of_two()) {
            (true, false) if theirs.next_power_of_two() == mine => Some(theirs),
            (false, true) if mine.next_power_of_two() == theirs => Some(mine),
            _ => None,
        };
        match before {
            Some(old) if my_hasher == SplitBlockHasher::Parquet => format!(
                "num_blocks differ: {mine} vs {theirs} (filters hashed as Parquet's are sized to a \
                 power of two bytes since 2026-11-28, as Parquet's readers take them; the one of \
                 {old} blocks was made before: add its items to a filter made now, or merge it \
                 with filters of its size)"
            ),
            _ => format!("num_blocks differ: {mine} vs {theirs}"),
        }
    } else {
        return Ok(());
    };
    Err(Error::Incompatible { reason })
}

/// Checks that `len` bytes are a whole, allowed number of blocks; returns the count.
fn bitset_blocks(format: &'static str, len: usize) -> Result<usize> {
    let problem = if len == 0 || !len.is_multiple_of(BLOCK_BYTES) {
        format!("{len} bytes are not a whole number of 32-byte blocks (at least one)")
    } else if len as u64 / BLOCK_BYTES as u64 > MAX_SPLIT_BLOCKS {
        format!("{} blocks; at most 2^26 - 1 allowed", len / BLOCK_BYTES)
    } else {
        return Ok(len / BLOCK_BYTES);
    };
    Err(Error::format(format, FormatProblem::Inconsistent(problem)))
}

impl SplitBlockBloomFilter {
    /// A filter for `expected_items` at false-positive probability `fpp`, hashing as Parquet
    /// does, sized as Parquet's readers take it: the layout's exact size rounded up to a
    /// power of two bytes ([`crate::sizing::parquet_num_blocks`]).
    ///
    /// ```
    /// use bloomery::SplitBlockBloomFilter;
    ///
    /// let filter = SplitBlockBloomFilter::with_fpp(1_000_000, 0.01)?;
    /// assert_eq!(filter.num_blocks(), 65_536);
    /// assert_eq!(filter.to_parquet_bitset()?.len(), 2 << 20);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn with_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        Self::with_fpp_and_hasher(expected_items, fpp, SplitBlockHasher::Parquet)
    }

    /// As [`with_fpp`](Self::with_fpp), hashing items with `hasher`: with Parquet's, sized
    /// as Parquet's readers take it ([`crate::sizing::parquet_num_blocks`]); with bloomery's
    /// own, exactly ([`crate::sizing::split_block_num_blocks`]).
    ///
    /// ```
    /// use bloomery::split_block::SplitBlockHasher;
    /// use bloomery::SplitBlockBloomFilter;
    ///
    /// // The split-block layout with the blocked filter's hash: one AVX2 register a block.
    /// let mut filter =
    ///     SplitBlockBloomFilter::with_fpp_and_hasher(1_000_000, 0.01, SplitBlockHasher::Xxh3 { seed: 0 })?;
    /// filter.insert("https://example.com/a");
    /// assert!(filter.contains("https://example.com/a"));
    /// // Parquet hashes with XXH64, so this filter is not Parquet's.
    /// assert!(filter.to_parquet_bytes().is_err());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn with_fpp_and_hasher(expected_items: u64, fpp: f64, hasher: SplitBlockHasher) -> Result<Self> {
        Self::with_num_blocks_and_hasher(num_blocks_for(expected_items, fpp, hasher)?, hasher)
    }

    /// A filter of `num_blocks` 256-bit blocks (1 ..= 2^26 - 1), hashing as Parquet does;
    /// `num_blocks · 32` is the Parquet bitset's length in bytes, which most Parquet readers
    /// take only when it is a power of two up to 128 MiB
    /// ([`crate::sizing::parquet_readers_take`]; export refuses other sizes).
    pub fn with_num_blocks(num_blocks: u64) -> Result<Self> {
        Self::with_num_blocks_and_hasher(num_blocks, SplitBlockHasher::Parquet)
    }

    /// A filter of `num_blocks` 256-bit blocks hashing items with `hasher`.
    pub fn with_num_blocks_and_hasher(num_blocks: u64, hasher: SplitBlockHasher) -> Result<Self> {
        Ok(Self {
            blocks: ZeroedArray::try_new(check_num_blocks(num_blocks)?)?,
            kernel: Kernel::detect(),
            road: Road::new(hasher),
        })
    }

    /// How the filter hashes items.
    pub fn hasher(&self) -> SplitBlockHasher {
        self.road.hasher
    }

    /// The same filter using `kernel` (for comparing kernels; the default is the fastest).
    pub fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.kernel = kernel;
        self
    }

    /// The kernel in use.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The 64-bit hash of `item` that [`insert_hash`](Self::insert_hash) takes: the
    /// filter's [`hasher`](Self::hasher) over its funnelled bytes (for Parquet's, XXH64 with
    /// seed 0).
    #[inline]
    pub fn hash<T: Funnel + ?Sized>(&self, item: &T) -> u64 {
        self.road.hash(item)
    }

    /// Adds `item`; returns whether any bit changed.
    #[inline]
    pub fn insert<T: Funnel + ?Sized>(&mut self, item: &T) -> bool {
        self.insert_hash(self.road.hash(item))
    }

    /// Whether `item` might be in the filter: `false` is certain.
    #[inline]
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.road.hash(item))
    }

    /// Adds an item by its 64-bit hash (Parquet's `filter_insert`): for values whose
    /// plain encoding is not a funnel's bytes (floats, fixed-length decimals), hash
    /// them yourself as the filter's hasher does (for Parquet's, XXH64 with seed 0).
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) -> bool {
        self.kernel.insert(&mut self.blocks, hash)
    }

    /// Looks an item up by its 64-bit hash (Parquet's `filter_check`).
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.kernel.contains(&self.blocks, hash)
    }

    /// Adds every item, hashing a chunk ahead and prefetching their blocks.
    pub fn insert_batch<T: Funnel>(&mut self, items: &[T]) {
        let (kernel, road) = (self.kernel, self.road);
        for_hash_chunks(
            items,
            |item| road.hash(item),
            |_, hashes| {
                kernel.insert_batch(&mut self.blocks, hashes);
            },
        );
    }

    /// Adds every hash, prefetching blocks ahead.
    pub fn insert_hash_batch(&mut self, hashes: &[u64]) {
        self.kernel.insert_batch(&mut self.blocks, hashes);
    }

    /// Looks up every item, hashing a chunk ahead and prefetching their blocks.
    pub fn contains_batch<T: Funnel>(&self, items: &[T]) -> Vec<bool> {
        let mut results = vec![false; items.len()];
        self.contains_batch_into(items, &mut results);
        results
    }

    /// As [`contains_batch`](Self::contains_batch), writing into `results`. Panics if the
    /// lengths differ.
    pub fn contains_batch_into<T: Funnel>(&self, items: &[T], results: &mut [bool]) {
        contains_items(self.kernel, self.road, &self.blocks, items, results);
    }

    /// Looks up every hash, prefetching blocks ahead. Panics if the lengths differ.
    pub fn contains_hash_batch(&self, hashes: &[u64], results: &mut [bool]) {
        assert_eq!(hashes.len(), results.len(), "one result per hash");
        self.kernel.contains_batch(&self.blocks, hashes, results);
    }

    /// The number of 256-bit blocks.
    pub fn num_blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// The number of bits, a multiple of 256.
    pub fn num_bits(&self) -> u64 {
        self.num_blocks() * SPLIT_BLOCK_BITS
    }

    /// The number of bits set.
    pub fn bit_count(&self) -> u64 {
        bit_count(&self.blocks)
    }

    /// An estimate of the distinct items inserted: each sets 8 of the m bits, so
    /// n ≈ -(m/8) ln(1 - set/m).
    pub fn estimated_len(&self) -> u64 {
        estimated_items(self.bit_count(), self.num_bits(), BITS_PER_ITEM)
    }

    /// The probability that a fresh item is reported present, as the filter is now: the
    /// mean over blocks of the product of each word's fill (exact for uniform hashing).
    pub fn expected_fpp(&self) -> f64 {
        current_fpp(&self.blocks)
    }

    /// The false-positive probability the sizing formula predicts for `num_items` items.
    pub fn fpp_for_items(&self, num_items: u64) -> f64 {
        split_block_false_positive_rate(self.num_blocks(), num_items)
    }

    /// Bytes of filter bits.
    pub fn memory_bytes(&self) -> usize {
        size_of_val(&*self.blocks)
    }

    /// The blocks.
    pub fn blocks(&self) -> &[SplitBlock] {
        &self.blocks
    }

    fn check_compatible(&self, other: &Self) -> Result<()> {
        check_same_shape(
            (self.blocks.len(), self.road.hasher),
            (other.blocks.len(), other.road.hasher),
        )
    }

    /// Adds every item of `other` (bitwise OR). An error, changing nothing, when the
    /// block counts or the hashers differ.
    pub fn union(&mut self, other: &Self) -> Result<()> {
        self.check_compatible(other)?;
        for (mine, theirs) in self.blocks.iter_mut().zip(other.blocks.iter()) {
            for (word, their_word) in mine.0.iter_mut().zip(theirs.0) {
                *word |= their_word;
            }
        }
        Ok(())
    }

    /// Keeps only the bits set in both (bitwise AND): every item both contained stays.
    pub fn intersection(&mut self, other: &Self) -> Result<()> {
        self.check_compatible(other)?;
        for (mine, theirs) in self.blocks.iter_mut().zip(other.blocks.iter()) {
            for (word, their_word) in mine.0.iter_mut().zip(theirs.0) {
                *word &= their_word;
            }
        }
        Ok(())
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        self.blocks.fill(SplitBlock::default());
    }

    /// The blocks in order, each word's 4 bytes little-endian (borrowed on little-endian
    /// machines): the bloomery file's payload, and Parquet's bitset when the filter hashes
    /// as Parquet does.
    pub fn bitset(&self) -> Cow<'_, [u8]> {
        blocks_as_le_bytes(&self.blocks)
    }

    /// Parquet's bitset ([`bitset`](Self::bitset)); an error for a filter that does not
    /// hash as Parquet does, whose items a Parquet reader would not find, and for one whose
    /// size most Parquet readers refuse: not a power of two bytes, or over 128 MiB
    /// ([`crate::sizing::parquet_readers_take`]; Arrow C++'s reader throws on it, and a
    /// query over the file fails). [`with_fpp`](Self::with_fpp) sizes filters they take.
    ///
    /// ```
    /// use bloomery::SplitBlockBloomFilter;
    ///
    /// // 41,591 blocks: a bitset of 1,330,912 bytes, which Arrow C++ and Spark refuse.
    /// let odd = SplitBlockBloomFilter::with_num_blocks(41_591)?;
    /// assert!(odd.to_parquet_bitset().unwrap_err().to_string().contains("power of two"));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn to_parquet_bitset(&self) -> Result<Cow<'_, [u8]>> {
        if self.road.hasher != SplitBlockHasher::Parquet {
            return Err(Error::Parameter {
                name: "a split-block filter's hasher",
                value: self.road.hasher.describe(),
                allowed: "Parquet's (XXH64, seed 0) for Parquet's format, whose readers hash with it",
            });
        }
        let allowed = if self.num_blocks() > crate::sizing::MAX_PARQUET_READER_BLOCKS {
            "at most 128 MiB, the most Parquet's readers take (Arrow C++, parquet-mr/Spark); \
             make one filter for fewer items (Parquet's writers make one per column chunk) or \
             at a higher fpp"
        } else if !crate::sizing::parquet_readers_take(self.num_blocks()) {
            "a power of two bytes from 32 B to 128 MiB, the only sizes Parquet's readers all \
             take (Arrow C++, parquet-mr/Spark); a filter made for n items at p is sized so \
             since 2026-11-28 (`bloomery create --variant split-block`, \
             SplitBlockBloomFilter::with_fpp): add this filter's items to one"
        } else {
            return Ok(self.bitset());
        };
        Err(Error::Parameter {
            name: "a split-block filter's size for Parquet's format",
            value: format!("{} bytes", self.num_blocks() * BLOCK_BYTES as u64),
            allowed,
        })
    }

    /// The filter whose bitset is `bytes` (a positive multiple of 32 bytes, at most
    /// 2^26 - 1 blocks), for example a Parquet column chunk's bitset after its header.
    pub fn from_parquet_bitset(bytes: &[u8]) -> Result<Self> {
        Self::from_bitset(BITSET_FORMAT, bytes, SplitBlockHasher::Parquet)
    }

    fn from_bitset(format: &'static str, bytes: &[u8], hasher: SplitBlockHasher) -> Result<Self> {
        let num_blocks = bitset_blocks(format, bytes.len())?;
        let mut filter = Self::with_num_blocks_and_hasher(num_blocks as u64, hasher)?;
        for (block, chunk) in filter.blocks.iter_mut().zip(bytes.chunks_exact(BLOCK_BYTES)) {
            for (word, bytes) in block.0.iter_mut().zip(chunk.chunks_exact(4)) {
                *word = u32::from_le_bytes(bytes.try_into().expect("chunks of 4"));
            }
        }
        Ok(filter)
    }

    /// What a Parquet file holds for a column chunk's bloom filter: the Thrift
    /// `BloomFilterHeader` ([`crate::format::parquet`]) and the bitset.
    /// An error, as for [`to_parquet_bitset`](Self::to_parquet_bitset), for a filter that
    /// does not hash as Parquet does.
    pub fn to_parquet_bytes(&self) -> Result<Vec<u8>> {
        let bitset = self.to_parquet_bitset()?;
        // At most (2^26 - 1) · 32 < 2^31 bytes: a Thrift i32.
        let mut bytes = crate::format::parquet::encode_header(bitset.len() as u32);
        bytes.extend_from_slice(&bitset);
        Ok(bytes)
    }

    /// Reads a Parquet column chunk's bloom-filter bytes: the header (split-block
    /// algorithm, XXHASH, uncompressed) and exactly the bitset it announces.
    pub fn from_parquet_bytes(bytes: &[u8]) -> Result<Self> {
        Self::from_bitset(
            "Parquet bloom filter",
            crate::format::parquet::bitset(bytes)?,
            SplitBlockHasher::Parquet,
        )
    }
}

impl PartialEq for SplitBlockBloomFilter {
    /// Equal bits and hasher (the kernel is not compared).
    fn eq(&self, other: &Self) -> bool {
        self.road.hasher == other.road.hasher && *self.blocks == *other.blocks
    }
}

impl Eq for SplitBlockBloomFilter {}

impl<T: Funnel + ?Sized> crate::Filter<T> for SplitBlockBloomFilter {
    fn insert(&mut self, item: &T) -> Result<bool> {
        Ok(SplitBlockBloomFilter::insert(self, item))
    }

    fn contains(&self, item: &T) -> bool {
        SplitBlockBloomFilter::contains(self, item)
    }
}

impl crate::FilterStats for SplitBlockBloomFilter {
    fn estimated_len(&self) -> u64 {
        SplitBlockBloomFilter::estimated_len(self)
    }

    fn expected_fpp(&self) -> f64 {
        SplitBlockBloomFilter::expected_fpp(self)
    }

    fn memory_bytes(&self) -> usize {
        SplitBlockBloomFilter::memory_bytes(self)
    }
}

/// Parameters: num_blocks (u64), hasher (u32: [`HASHER_XXH64`], or [`HASHER_XXH3_64`]
/// followed by its seed, u64); payload: the bitset.
impl Persist for SplitBlockBloomFilter {
    const VARIANT: Variant = Variant::SplitBlock;

    fn params(&self) -> Vec<u8> {
        encode_params(self.num_blocks(), self.road.hasher)
    }

    fn payload_pieces(&self) -> Vec<Cow<'_, [u8]>> {
        vec![self.bitset()]
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let hasher = check_params(params, payload.len())?;
        Self::from_bitset("bloomery", payload, hasher)
    }

    fn from_parts_of_version(version: u16, params: &[u8], payload: &[u8]) -> Result<Self> {
        check_version(version)?;
        Self::from_parts(params, payload)
    }
}

/// The parameters of a split-block filter's envelope: `num_blocks` blocks hashing with
/// `hasher`.
pub(crate) fn encode_params(num_blocks: u64, hasher: SplitBlockHasher) -> Vec<u8> {
    let writer = ParamWriter::new().u64(num_blocks).u32(hasher.code());
    match hasher {
        SplitBlockHasher::Parquet => writer.finish(),
        SplitBlockHasher::Xxh3 { seed } => writer.u64(seed).finish(),
    }
}

/// Variant 8 exists from format version 2 on; a version-1 file holding it is refused.
fn check_version(version: u16) -> Result<()> {
    if version < 2 {
        return Err(inconsistent(format!(
            "format version {version} has no split-block variant (it was added in version 2)"
        )));
    }
    Ok(())
}

/// Checks a split-block filter's parameters against a payload of `payload_len` bytes;
/// returns the hasher.
fn check_params(params: &[u8], payload_len: usize) -> Result<SplitBlockHasher> {
    let mut params = ParamReader::new(params);
    let num_blocks = params.u64()?;
    let hasher = match params.u32()? {
        HASHER_XXH64 => SplitBlockHasher::Parquet,
        HASHER_XXH3_64 => SplitBlockHasher::Xxh3 { seed: params.u64()? },
        unknown => {
            return Err(inconsistent(format!(
                "unknown hasher {unknown}; this library reads hashers {HASHER_XXH64} (XXH64, seed 0) and {HASHER_XXH3_64} (XXH3-64 with a seed)"
            )));
        }
    };
    params.finish()?;
    let num_blocks = check_num_blocks(num_blocks)
        .map_err(|_| inconsistent(format!("{num_blocks} blocks; 1..=2^26-1 allowed")))?;
    if payload_len as u64 != num_blocks as u64 * BLOCK_BYTES as u64 {
        return Err(inconsistent(format!(
            "{num_blocks} blocks need {} payload bytes, found {payload_len}",
            num_blocks as u64 * BLOCK_BYTES as u64
        )));
    }
    Ok(hasher)
}

/// A split-block filter over borrowed blocks it may change, for example the payload of a
/// file mapped writable: inserts set bits in place. Lookups and statistics go through
/// [`view`](Self::view).
#[derive(Debug)]
pub struct SplitBlockBloomFilterMut<'a> {
    blocks: &'a mut [SplitBlock],
    kernel: Kernel,
    road: Road,
}

impl<'a> SplitBlockBloomFilterMut<'a> {
    /// The filter of a native envelope's parameters over its payload, in place; `None`
    /// when the payload is not 32-byte aligned or the machine is big-endian.
    pub fn from_parts_of_version(version: u16, params: &[u8], payload: &'a mut [u8]) -> Result<Option<Self>> {
        check_version(version)?;
        let hasher = check_params(params, payload.len())?;
        if cfg!(target_endian = "big") {
            return Ok(None);
        }
        // SAFETY: a SplitBlock is eight u32s, valid for every bit pattern; align_to_mut
        // yields only a correctly aligned middle part, accepted only when nothing is left.
        let (head, blocks, tail) = unsafe { payload.align_to_mut::<SplitBlock>() };
        if !head.is_empty() || !tail.is_empty() {
            return Ok(None);
        }
        check_num_blocks(blocks.len() as u64)?;
        Ok(Some(Self {
            blocks,
            kernel: Kernel::detect(),
            road: Road::new(hasher),
        }))
    }

    /// How the filter hashes items (the hashes the inserts take).
    pub fn hasher(&self) -> SplitBlockHasher {
        self.road.hasher
    }

    /// Adds an item by its hash ([`SplitBlockBloomFilter::hash`]); returns whether any bit
    /// changed.
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) -> bool {
        self.kernel.insert(self.blocks, hash)
    }

    /// Adds every hash ([`SplitBlockBloomFilter::hash`]), prefetching blocks ahead.
    pub fn insert_hash_batch(&mut self, hashes: &[u64]) {
        self.kernel.insert_batch(self.blocks, hashes);
    }

    /// Adds every hash in order and says for each whether it set a bit (`new`).
    pub fn insert_hash_batch_reporting(&mut self, hashes: &[u64], new: &mut [bool]) {
        self.kernel.insert_batch_reporting(self.blocks, hashes, new);
    }

    /// The payload's bytes, for a union in place (`in_place::FilterMut::union`).
    pub(crate) fn payload_mut(&mut self) -> &mut [u8] {
        crate::bits::bytes_mut(self.blocks)
    }

    /// A read-only view of the blocks as they are now.
    pub fn view(&self) -> SplitBlockBloomFilterView<'_> {
        SplitBlockBloomFilterView {
            blocks: self.blocks,
            kernel: self.kernel,
            road: self.road,
        }
    }
}

/// A read-only split-block filter over borrowed blocks, for example the payload of a
/// memory-mapped file: the same answers as [`SplitBlockBloomFilter`] without copying.
///
/// ```
/// use bloomery::split_block::SplitBlockBloomFilterView;
/// use bloomery::SplitBlockBloomFilter;
///
/// let mut filter = SplitBlockBloomFilter::with_fpp(100, 0.01)?;
/// filter.insert("x");
/// let view = SplitBlockBloomFilterView::new(filter.blocks(), filter.hasher())?;
/// assert!(view.contains("x"));
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SplitBlockBloomFilterView<'a> {
    blocks: &'a [SplitBlock],
    kernel: Kernel,
    road: Road,
}

impl<'a> SplitBlockBloomFilterView<'a> {
    /// A view of `blocks` (1 ..= 2^26 - 1 of them) whose items were hashed with `hasher`.
    pub fn new(blocks: &'a [SplitBlock], hasher: SplitBlockHasher) -> Result<Self> {
        check_num_blocks(blocks.len() as u64)?;
        Ok(Self {
            blocks,
            kernel: Kernel::detect(),
            road: Road::new(hasher),
        })
    }

    /// How the filter hashes items.
    pub fn hasher(&self) -> SplitBlockHasher {
        self.road.hasher
    }

    /// A view of a native envelope's parameters and payload (format `version`), without
    /// copying; `None` when the payload is not 32-byte aligned or the machine is big-endian
    /// (then load the filter with [`Persist::from_parts_of_version`]).
    pub fn from_parts_of_version(version: u16, params: &[u8], payload: &'a [u8]) -> Result<Option<Self>> {
        check_version(version)?;
        let hasher = check_params(params, payload.len())?;
        if cfg!(target_endian = "big") {
            return Ok(None);
        }
        // SAFETY: a SplitBlock is eight u32s, valid for every bit pattern; align_to yields
        // only a correctly aligned middle part, accepted only when nothing is left over.
        let (head, blocks, tail) = unsafe { payload.align_to::<SplitBlock>() };
        if !head.is_empty() || !tail.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self::new(blocks, hasher)?))
    }

    /// Whether `item` might be in the filter.
    #[inline]
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.road.hash(item))
    }

    /// Looks an item up by its 64-bit hash.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.kernel.contains(self.blocks, hash)
    }

    /// Looks up every item, hashing ahead and prefetching.
    pub fn contains_batch_into<T: Funnel>(&self, items: &[T], results: &mut [bool]) {
        contains_items(self.kernel, self.road, self.blocks, items, results);
    }

    /// The number of bits.
    pub fn num_bits(&self) -> u64 {
        self.blocks.len() as u64 * SPLIT_BLOCK_BITS
    }

    /// The number of bits set.
    pub fn bit_count(&self) -> u64 {
        bit_count(self.blocks)
    }

    /// As [`SplitBlockBloomFilter::estimated_len`].
    pub fn estimated_len(&self) -> u64 {
        estimated_items(self.bit_count(), self.num_bits(), BITS_PER_ITEM)
    }

    /// As [`SplitBlockBloomFilter::expected_fpp`].
    pub fn expected_fpp(&self) -> f64 {
        current_fpp(self.blocks)
    }

    /// The blocks.
    pub fn blocks(&self) -> &'a [SplitBlock] {
        self.blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn salts_are_the_specs_odd_constants() {
        assert_eq!(
            kernel::SALTS,
            [
                0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947,
                0x5c6bfb31
            ]
        );
        assert!(kernel::SALTS.iter().all(|salt| salt % 2 == 1));
    }

    /// The spec's example by hand: hash 0x0000_0001_0000_0001 in 4 blocks is block
    /// (1 · 4) >> 32 = 0, and word i gets bit salt_i >> 27.
    #[test]
    fn an_item_sets_the_specs_bits() {
        for kernel in Kernel::available() {
            let mut filter = SplitBlockBloomFilter::with_num_blocks(4)
                .unwrap()
                .with_kernel(kernel);
            assert!(filter.insert_hash(0x0000_0001_0000_0001));
            let expected: [u32; 8] = std::array::from_fn(|i| 1 << (kernel::SALTS[i] >> 27));
            assert_eq!(filter.blocks()[0].0, expected, "{}", kernel.name());
            assert!(
                filter.blocks()[1..]
                    .iter()
                    .all(|block| *block == SplitBlock::default())
            );
            assert!(!filter.insert_hash(0x0000_0001_0000_0001));
            // The last block: h >> 32 = 2^32 - 1.
            assert!(filter.insert_hash(0xffff_ffff_0000_0000));
            assert_ne!(filter.blocks()[3], SplitBlock::default());
        }
    }

    #[test]
    fn a_cpu_with_avx2_gets_the_avx2_kernel() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::env::var_os("BLOOMERY_KERNEL").is_none() {
            assert_eq!(Kernel::detect().name(), "avx2");
        }
        assert_eq!(Kernel::available()[0], Kernel::scalar());
    }

    #[test]
    fn bitsets_of_the_wrong_length_are_refused_by_name() {
        for len in [0, 31, 33, 100] {
            let message = SplitBlockBloomFilter::from_parquet_bitset(&vec![0; len])
                .unwrap_err()
                .to_string();
            assert!(message.contains("32-byte blocks"), "{message}");
        }
        assert_eq!(
            SplitBlockBloomFilter::from_parquet_bitset(&[0; 64])
                .unwrap()
                .num_blocks(),
            2
        );
    }

    #[test]
    fn union_and_intersection_need_the_same_block_count() {
        let mut a = SplitBlockBloomFilter::with_num_blocks(8).unwrap();
        let mut b = SplitBlockBloomFilter::with_num_blocks(8).unwrap();
        a.insert("a");
        b.insert("b");
        let mut both = a.clone();
        both.union(&b).unwrap();
        assert!(both.contains("a") && both.contains("b"));
        both.intersection(&a).unwrap();
        assert_eq!(both, a);
        let other = SplitBlockBloomFilter::with_num_blocks(9).unwrap();
        let message = a.union(&other).unwrap_err().to_string();
        assert_eq!(message, "filters are incompatible: num_blocks differ: 8 vs 9");
    }

    /// A filter hashed with XXH3: the hash is the blocked filter's item hash with the
    /// filter's seed, every item is found through every road (single, batch, a saved and
    /// loaded copy, a view of the file's payload), and the seed is kept by the file.
    #[test]
    fn an_xxh3_filter_finds_every_item_on_every_road() {
        use crate::format::native::{Persist, decode};
        let hasher = SplitBlockHasher::Xxh3 { seed: 11 };
        let mut filter = SplitBlockBloomFilter::with_fpp_and_hasher(2_000, 0.01, hasher).unwrap();
        let items: Vec<String> = (0..2_000).map(|i| format!("item {i}")).collect();
        assert_eq!(filter.hash("item 0"), crate::hash::xxh3_64_item("item 0", 11));
        filter.insert_batch(&items[..1_000]);
        for item in &items[1_000..] {
            filter.insert(item);
        }
        let bytes = filter.to_bytes();
        let (header, payload) = decode(&bytes).unwrap();
        let loaded =
            SplitBlockBloomFilter::from_parts_of_version(header.version, &header.params, payload).unwrap();
        assert_eq!(loaded, filter);
        assert_eq!(loaded.hasher(), hasher);
        let mut aligned = crate::bits::ZeroedArray::<SplitBlock>::new(filter.blocks().len());
        aligned.copy_from_slice(filter.blocks());
        let view = SplitBlockBloomFilterView::new(&aligned, loaded.hasher()).unwrap();
        let mut batch = vec![false; items.len()];
        loaded.contains_batch_into(&items, &mut batch);
        let mut view_batch = vec![false; items.len()];
        view.contains_batch_into(&items, &mut view_batch);
        for (i, item) in items.iter().enumerate() {
            assert!(
                filter.contains(item) && loaded.contains(item) && view.contains(item),
                "{item}"
            );
            assert!(batch[i] && view_batch[i], "{item} in a batch");
        }
        // The same items under Parquet's hash land elsewhere: the hasher decides the bits.
        let mut parquet = SplitBlockBloomFilter::with_num_blocks(filter.num_blocks()).unwrap();
        parquet.insert_batch(&items);
        assert_ne!(parquet.bitset(), filter.bitset());
    }

    #[test]
    fn filters_of_other_hashers_or_seeds_do_not_merge() {
        let xxh3 = |seed| {
            SplitBlockBloomFilter::with_num_blocks_and_hasher(8, SplitBlockHasher::Xxh3 { seed }).unwrap()
        };
        let mut parquet = SplitBlockBloomFilter::with_num_blocks(8).unwrap();
        let message = parquet.union(&xxh3(0)).unwrap_err().to_string();
        assert!(message.contains("hashers differ: XXH64, seed 0"), "{message}");
        let message = xxh3(1).intersection(&xxh3(2)).unwrap_err().to_string();
        assert!(
            message.contains("XXH3-64, seed 1") && message.contains("XXH3-64, seed 2"),
            "{message}"
        );
        let mut same = xxh3(3);
        same.insert("a");
        let mut other = xxh3(3);
        other.insert("b");
        same.union(&other).unwrap();
        assert!(same.contains("a") && same.contains("b"));
    }

    #[test]
    fn only_parquets_hash_exports_to_parquet() {
        let mut filter =
            SplitBlockBloomFilter::with_num_blocks_and_hasher(4, SplitBlockHasher::Xxh3 { seed: 0 }).unwrap();
        filter.insert("a");
        let message = filter.to_parquet_bytes().unwrap_err().to_string();
        assert!(message.contains("Parquet's (XXH64, seed 0)"), "{message}");
        assert!(filter.to_parquet_bitset().is_err());
        assert!(
            SplitBlockBloomFilter::with_num_blocks(4)
                .unwrap()
                .to_parquet_bytes()
                .is_ok()
        );
    }

    /// The hasher's parameters: code 1 alone, code 2 with its seed; anything else, or a
    /// code 2 without its seed, is refused by name.
    #[test]
    fn the_hasher_is_stored_and_checked() {
        use crate::format::native::Persist;
        let xxh3 =
            SplitBlockBloomFilter::with_num_blocks_and_hasher(2, SplitBlockHasher::Xxh3 { seed: 0xabc })
                .unwrap();
        let params = xxh3.params();
        assert_eq!(params.len(), 20);
        assert_eq!(&params[8..12], &HASHER_XXH3_64.to_le_bytes());
        assert_eq!(&params[12..], &0xabc_u64.to_le_bytes());
        assert_eq!(
            check_params(&params, 64).unwrap(),
            SplitBlockHasher::Xxh3 { seed: 0xabc }
        );
        assert!(check_params(&params, 32).is_err(), "2 blocks in 32 bytes");
        assert!(
            check_params(&params[..12], 64).is_err(),
            "a code 2 without its seed"
        );
        let parquet = SplitBlockBloomFilter::with_num_blocks(2).unwrap().params();
        assert_eq!(parquet.len(), 12);
        assert_eq!(check_params(&parquet, 64).unwrap(), SplitBlockHasher::Parquet);
        let mut unknown = parquet.clone();
        unknown[8] = 3;
        let message = check_params(&unknown, 64).unwrap_err().to_string();
        assert!(message.contains("unknown hasher 3"), "{message}");
    }

    /// The inline 8- and 4-byte XXH64 is `xxhash_rust`'s for every length up to 40 (each
    /// byte pattern a splitmix64 stream).
    #[test]
    fn short_inputs_hash_as_the_xxhash_crate_does() {
        let mut state = 0u64;
        for len in 0..=40 {
            for _ in 0..64 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| crate::hash::splitmix64(&mut state) as u8)
                    .collect();
                assert_eq!(xxh64_seed0(&bytes), xxh64(&bytes, 0), "{bytes:?}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any item that funnels to 8 or 4 bytes (`u64`, `i64`, `u32`, `i32`) hashes as
        /// `xxhash_rust`'s XXH64 of those bytes.
        #[test]
        fn words_hash_as_the_xxhash_crate_does(word in any::<u64>()) {
            let expected = xxh64(&word.to_le_bytes(), 0);
            prop_assert_eq!(xxh64_item(&word), expected);
            prop_assert_eq!(xxh64_item(&(word as i64)), expected);
            let half = word as u32;
            let expected = xxh64(&half.to_le_bytes(), 0);
            prop_assert_eq!(xxh64_item(&half), expected);
            prop_assert_eq!(xxh64_item(&(half as i32)), expected);
        }

        /// Every kernel sets the same bits, gives the same answers (single and batched)
        /// and writes the same bytes as the scalar one.
        #[test]
        fn simd_kernels_match_the_scalar_kernel(
            num_blocks in 1u64..300,
            inserted in proptest::collection::vec(any::<u64>(), 0..700),
            probes in proptest::collection::vec(any::<u64>(), 0..700),
        ) {
            let mut reference = SplitBlockBloomFilter::with_num_blocks(num_blocks)
                .unwrap()
                .with_kernel(Kernel::scalar());
            let reference_changes: Vec<bool> = inserted.iter().map(|&h| reference.insert_hash(h)).collect();
            for kernel in Kernel::available() {
                let mut filter = SplitBlockBloomFilter::with_num_blocks(num_blocks).unwrap().with_kernel(kernel);
                let changes: Vec<bool> = inserted.iter().map(|&h| filter.insert_hash(h)).collect();
                prop_assert_eq!(&changes, &reference_changes, "{}", kernel.name());
                prop_assert_eq!(filter.bitset(), reference.bitset(), "{}", kernel.name());
                let mut batched = SplitBlockBloomFilter::with_num_blocks(num_blocks).unwrap().with_kernel(kernel);
                batched.insert_hash_batch(&inserted);
                prop_assert!(batched == reference, "{} batch set other bits", kernel.name());
                let mut batch_answers = vec![false; probes.len()];
                filter.contains_hash_batch(&probes, &mut batch_answers);
                for (&probe, &batch_answer) in probes.iter().zip(&batch_answers) {
                    let expected = reference.contains_hash(probe);
                    prop_assert_eq!(filter.contains_hash(probe), expected, "{}", kernel.name());
                    prop_assert_eq!(batch_answer, expected, "{} batch", kernel.name());
                }
                for &hash in &inserted {
                    prop_assert!(filter.contains_hash(hash), "{}: a false negative", kernel.name());
                }
            }
        }
    }
}
