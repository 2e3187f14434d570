//! The blocked Bloom filter: every item lives in one 64-byte block, one cache line, so an
//! insert or a lookup costs one memory access instead of k.
//!
//! An item is funnelled to bytes ([`Funnel`]) and hashed with XXH3-64 and the filter's
//! stored seed ([`crate::hash::xxh3_64_item`]), so a file answers the same on every
//! platform and in every language with an XXH3 implementation (docs/format.md).
//! The 64-bit hash h picks the block from its high 32 bits by multiply-shift,
//! block = (h >> 32) · blocks >> 32 (Lemire, "A fast alternative to the modulo reduction",
//! 2016), and the item's eight bits from its low 32 bits: lane i of the block gets bit
//! (h · salt_i mod 2^32) >> 26. This is the split-block layout of Parquet's SBBF and
//! Impala, on 512-bit blocks (eight 64-bit lanes) rather than 256-bit ones: the larger
//! block evens out block loads: by the formula below, 1% costs 10.1 bits per item, SBBF 10.5.
//!
//! The price of locality is accuracy per bit: block loads vary (Poisson), and a busy block
//! answers falsely more often than a quiet one saves. [`crate::sizing::blocked_num_blocks`]
//! sizes with that Poisson mixture (plus 5% headroom), so the measured rate stays at or
//! below the requested one: for 10^6 random keys at 1%, 19,935 blocks (10.21 bits per
//! item) and a measured rate of 0.941% over 2·10^6 fresh keys; at 0.1%, 15.87 bits and
//! 0.095% (with the XXH3-64 item hash; `cargo test --release --test blocked -- --nocapture`
//! prints them).
//!
//! Kernels (scalar, AVX2, AVX-512, NEON; `kernel.rs`) give identical bits; batch operations hash
//! a group of items first and prefetch their blocks, so a large filter is limited by how
//! many cache misses the memory system overlaps, not by one miss's latency.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod kernel;
#[cfg(target_arch = "aarch64")]
mod neon;
mod scalar;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::bits::blocks::{batch_contains, block_of, for_each_to_write, for_hash_chunks};
#[cfg(test)]
use kernel::SALTS;
use kernel::{BLOCK_WORDS, block_index, fingerprint, masks};
pub use kernel::{Block, Kernel};

use crate::bits::{Zeroable, ZeroedArray, impl_try_clone};
use crate::error::{Error, Result, inconsistent};
use crate::format::native::{self, ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{Funnel, xxh3_64_item};
use crate::sizing::{
    BLOCK_BITS, BLOCK_LANES, MAX_NUM_BLOCKS, SizedFor, blocked_false_positive_rate, blocked_num_blocks,
    estimated_items,
};

/// The seed [`BlockedBloomFilter::with_fpp`] uses.
pub const DEFAULT_SEED: u64 = 0;

/// The hasher code stored in a blocked filter's parameters: XXH3-64 of the item's
/// funnelled bytes with the stored seed. Code 1 was foldhash 0.2 over Rust's `Hash` of the
/// item (format version 1), which is not portable and no longer read.
pub const HASHER_XXH3_64: u32 = 2;

/// The hasher code of format version 1's blocked files (foldhash 0.2).
const HASHER_FOLDHASH_V1: u32 = 1;

/// Why a format-1 blocked file is refused, and what to do.
const FORMAT_1_BLOCKED: &str = "this blocked filter was written by bloomery's format version 1, \
     which hashed items with foldhash (not portable, no longer computed); rebuild it from its \
     items with `bloomery create` and `bloomery add`";

/// A cache-line-blocked Bloom filter: one memory access per insert or lookup.
///
/// ```
/// use bloomery::BlockedBloomFilter;
///
/// let mut filter = BlockedBloomFilter::with_fpp(1_000_000, 0.01)?;
/// filter.insert(&42u64);
/// filter.insert("a string");
/// assert!(filter.contains(&42u64));
/// assert!(filter.contains(&b"a string"[..])); // the same bytes, the same item
/// assert!(!filter.contains(&43u64));
///
/// // Batches hash ahead and prefetch: the fast way to query many items.
/// let keys: Vec<u64> = (0..1_000).collect();
/// filter.insert_batch(&keys);
/// assert!(filter.contains_batch(&keys).iter().all(|&present| present));
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BlockedBloomFilter {
    blocks: ZeroedArray<Block>,
    seed: u64,
    kernel: Kernel,
    sized_for: Option<SizedFor>,
}

impl_try_clone!(BlockedBloomFilter, fallible: [blocks], copied: [seed, kernel, sized_for]);

/// Blocks that start as all zero bits (on huge pages when large).
fn zeroed_blocks(num_blocks: usize) -> ZeroedArray<Block> {
    ZeroedArray::new(num_blocks)
}

pub(crate) fn check_num_blocks(num_blocks: u64) -> Result<usize> {
    if num_blocks == 0 || num_blocks > MAX_NUM_BLOCKS || num_blocks > (isize::MAX as u64) / 64 {
        return Err(Error::NumBits {
            value: u128::from(num_blocks) * u128::from(BLOCK_BITS),
            max: MAX_NUM_BLOCKS * BLOCK_BITS,
            why: "a blocked filter has 1 to 2^32 blocks of 512 bits",
        });
    }
    Ok(num_blocks as usize)
}

/// The number of bits set in `blocks`.
fn bit_count(blocks: impl Iterator<Item = [u64; BLOCK_WORDS]>) -> u64 {
    blocks
        .map(|words| words.iter().map(|word| u64::from(word.count_ones())).sum::<u64>())
        .sum()
}

/// Looks up every item: hashes a chunk of items ahead (XXH3 with `seed`), then `lookup`
/// answers the chunk's hashes (a batch loop that prefetches their blocks). Panics if the
/// lengths differ.
fn contains_items<T: Funnel>(
    seed: u64,
    items: &[T],
    results: &mut [bool],
    mut lookup: impl FnMut(&[u64], &mut [bool]),
) {
    assert_eq!(items.len(), results.len(), "one result per item");
    for_hash_chunks(
        items,
        |item| xxh3_64_item(item, seed),
        |offset, hashes| lookup(hashes, &mut results[offset..offset + hashes.len()]),
    );
}

/// The probability that a fresh item is reported present: the mean over blocks of the
/// product of each lane's fill (exact for uniform hashing).
fn current_fpp(blocks: impl ExactSizeIterator<Item = [u64; BLOCK_WORDS]>) -> f64 {
    let num_blocks = blocks.len();
    let sum: f64 = blocks
        .map(|words| {
            words
                .iter()
                .map(|word| f64::from(word.count_ones()) / 64.0)
                .product::<f64>()
        })
        .sum();
    sum / num_blocks as f64
}

impl BlockedBloomFilter {
    /// A filter for `expected_items` at false-positive probability `fpp`, sized with the
    /// blocked-filter formula ([`crate::sizing::blocked_num_blocks`]), with seed
    /// [`DEFAULT_SEED`].
    pub fn with_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        Self::with_fpp_and_seed(expected_items, fpp, DEFAULT_SEED)
    }

    /// As [`with_fpp`](BlockedBloomFilter::with_fpp), hashing with `seed`.
    pub fn with_fpp_and_seed(expected_items: u64, fpp: f64, seed: u64) -> Result<Self> {
        let mut filter = Self::with_num_blocks(blocked_num_blocks(expected_items, fpp)?, seed)?;
        filter.sized_for = Some(SizedFor::new(expected_items, fpp));
        Ok(filter)
    }

    /// A filter of `num_blocks` 512-bit blocks hashing with `seed`.
    pub fn with_num_blocks(num_blocks: u64, seed: u64) -> Result<Self> {
        let blocks = ZeroedArray::try_new(check_num_blocks(num_blocks)?)?;
        Ok(Self {
            kernel: Kernel::detect().for_blocks(blocks.len()),
            blocks,
            seed,
            sized_for: None,
        })
    }

    /// The items and false-positive probability the filter was sized for, when it was made
    /// from them ([`with_fpp`](Self::with_fpp)) and not from a block count.
    pub fn sized_for(&self) -> Option<SizedFor> {
        self.sized_for
    }

    /// The same filter using `kernel` (for comparing kernels; the default is the fastest).
    pub fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.kernel = kernel.for_blocks(self.blocks.len());
        self
    }

    /// The kernel in use.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The 64-bit hash of `item` that [`insert_hash`](Self::insert_hash) takes: XXH3-64 of
    /// its funnelled bytes with the filter's seed.
    #[inline]
    pub fn hash<T: Funnel + ?Sized>(&self, item: &T) -> u64 {
        xxh3_64_item(item, self.seed)
    }

    /// Adds `item`; returns whether any bit changed.
    #[inline]
    pub fn insert<T: Funnel + ?Sized>(&mut self, item: &T) -> bool {
        self.insert_hash(self.hash(item))
    }

    /// Whether `item` might be in the filter: `false` is certain.
    #[inline]
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hash(item))
    }

    /// Adds an item by its 64-bit hash (for callers that hash themselves; the hash must be
    /// well mixed in all 64 bits).
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) -> bool {
        self.kernel.insert(&mut self.blocks, hash)
    }

    /// Looks an item up by its 64-bit hash.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.kernel.contains(&self.blocks, hash)
    }

    /// Asks the memory system for the block of the item with `hash` (a hint, for callers
    /// that batch their own calls).
    #[inline]
    pub fn prefetch_hash(&self, hash: u64) {
        crate::bits::blocks::prefetch_block(&self.blocks, hash);
    }

    /// Where this filter's blocks are, for prefetching them while no borrow of the filter
    /// can be held: a caller that hashes a batch first (reading items it must not read
    /// without a lock, say) asks for each block as it computes the hash, and the later batch
    /// call finds the blocks in cache. A prefetch is a hint that never faults, so the handle
    /// stays safe to use after the filter changes or is gone; it is then merely useless.
    ///
    /// ```
    /// use bloomery::BlockedBloomFilter;
    ///
    /// let mut filter = BlockedBloomFilter::with_fpp(1_000_000, 0.01)?;
    /// let prefetcher = filter.prefetcher();
    /// let hashes: Vec<u64> = (0..100u64)
    ///     .map(|item| {
    ///         let hash = filter.hash(&item);
    ///         prefetcher.prefetch(hash);
    ///         hash
    ///     })
    ///     .collect();
    /// filter.insert_hash_batch(&hashes);
    /// assert!(filter.contains(&42u64));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn prefetcher(&self) -> BlockPrefetcher {
        BlockPrefetcher {
            base: self.blocks.as_ptr() as usize,
            num_blocks: self.blocks.len(),
        }
    }

    /// Adds every item, hashing a few ahead and prefetching their blocks.
    pub fn insert_batch<T: Funnel>(&mut self, items: &[T]) {
        let (seed, kernel) = (self.seed, self.kernel);
        for_hash_chunks(
            items,
            |item| xxh3_64_item(item, seed),
            |_, hashes| {
                kernel.insert_batch(&mut self.blocks, hashes);
            },
        );
    }

    /// Adds every hash, prefetching blocks a few ahead.
    pub fn insert_hash_batch(&mut self, hashes: &[u64]) {
        self.kernel.insert_batch(&mut self.blocks, hashes);
    }

    /// Looks up every item, hashing a few ahead and prefetching their blocks.
    pub fn contains_batch<T: Funnel>(&self, items: &[T]) -> Vec<bool> {
        let mut results = vec![false; items.len()];
        self.contains_batch_into(items, &mut results);
        results
    }

    /// As [`contains_batch`](Self::contains_batch), writing into `results`. Panics if the
    /// lengths differ.
    pub fn contains_batch_into<T: Funnel>(&self, items: &[T], results: &mut [bool]) {
        let (kernel, blocks) = (self.kernel, &self.blocks);
        contains_items(self.seed, items, results, |hashes, results| {
            kernel.contains_batch(blocks, hashes, results);
        });
    }

    /// Looks up every hash, prefetching blocks a few ahead. Panics if the lengths differ.
    pub fn contains_hash_batch(&self, hashes: &[u64], results: &mut [bool]) {
        assert_eq!(hashes.len(), results.len(), "one result per hash");
        self.kernel.contains_batch(&self.blocks, hashes, results);
    }

    /// The number of 512-bit blocks.
    pub fn num_blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// The number of bits, a multiple of 512.
    pub fn num_bits(&self) -> u64 {
        self.num_blocks() * BLOCK_BITS
    }

    /// The number of bits set.
    pub fn bit_count(&self) -> u64 {
        bit_count(self.blocks.iter().map(|block| block.0))
    }

    /// An estimate of the distinct items inserted: each sets 8 of the m bits, so after n
    /// items a fraction f ≈ 1 - e^(-8n/m) is set and n ≈ -(m/8) ln(1 - f).
    pub fn estimated_len(&self) -> u64 {
        estimated_items(self.bit_count(), self.num_bits(), BLOCK_LANES)
    }

    /// The probability that a fresh item is reported present, as the filter is now: the
    /// mean over blocks of the product of each lane's fill (exact for uniform hashing).
    pub fn expected_fpp(&self) -> f64 {
        current_fpp(self.blocks.iter().map(|block| block.0))
    }

    /// The false-positive probability the sizing formula predicts for `num_items` items.
    pub fn fpp_for_items(&self, num_items: u64) -> f64 {
        blocked_false_positive_rate(self.num_blocks(), num_items)
    }

    /// Bytes of filter bits.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.blocks)
    }

    /// The filter's blocks.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Whether `other` puts every item at the same bits: the same number of blocks and the
    /// same seed (the layout and the hash are fixed by the format).
    pub fn is_compatible(&self, other: &Self) -> bool {
        self.check_compatible(other).is_ok()
    }

    fn check_compatible(&self, other: &Self) -> Result<()> {
        let reason = if self.blocks.len() != other.blocks.len() {
            format!(
                "num_blocks differ: {} vs {}",
                self.blocks.len(),
                other.blocks.len()
            )
        } else if self.seed != other.seed {
            format!("seeds differ: {} vs {}", self.seed, other.seed)
        } else {
            return Ok(());
        };
        Err(Error::Incompatible { reason })
    }

    /// Adds every item of `other` (bitwise OR). An error, changing nothing, when the
    /// filters differ in block count or seed.
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
        self.blocks.fill(Block::default());
    }
}

impl PartialEq for BlockedBloomFilter {
    /// Equal bits and seed (the kernel is not compared).
    fn eq(&self, other: &Self) -> bool {
        self.seed == other.seed && *self.blocks == *other.blocks
    }
}

impl Eq for BlockedBloomFilter {}

impl<T: Funnel + ?Sized> crate::Filter<T> for BlockedBloomFilter {
    fn insert(&mut self, item: &T) -> Result<bool> {
        Ok(BlockedBloomFilter::insert(self, item))
    }

    fn contains(&self, item: &T) -> bool {
        BlockedBloomFilter::contains(self, item)
    }
}

impl crate::FilterStats for BlockedBloomFilter {
    fn estimated_len(&self) -> u64 {
        BlockedBloomFilter::estimated_len(self)
    }

    fn expected_fpp(&self) -> f64 {
        BlockedBloomFilter::expected_fpp(self)
    }

    fn memory_bytes(&self) -> usize {
        BlockedBloomFilter::memory_bytes(self)
    }
}

/// Parameters: num_blocks (u64), lanes (u32, 8), hasher (u32, [`HASHER_XXH3_64`]), seed
/// (u64), then, for a filter made from (n, p), expected_items (u64) and fpp (f64); payload:
/// the blocks' words, little-endian.
impl Persist for BlockedBloomFilter {
    const VARIANT: Variant = Variant::Blocked;

    fn params(&self) -> Vec<u8> {
        encode_params(self.num_blocks(), self.seed, self.sized_for)
    }

    fn payload_pieces(&self) -> Vec<std::borrow::Cow<'_, [u8]>> {
        vec![native::words_as_le_bytes(blocks_as_words(&self.blocks))]
    }

    fn from_parts_of_version(version: u16, params: &[u8], payload: &[u8]) -> Result<Self> {
        if version < 2 {
            return Err(inconsistent(FORMAT_1_BLOCKED.into()));
        }
        Self::from_parts(params, payload)
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let (num_blocks, seed, sized_for) = blocked_params(params, payload.len())?;
        let mut filter = Self::with_num_blocks(num_blocks as u64, seed)?;
        filter.sized_for = sized_for;
        // Straight from the payload into the zeroed blocks (`blocked_params` checked that
        // it is exactly 64 bytes a block): no `Vec` of the words beside them.
        for (block, chunk) in filter
            .blocks
            .iter_mut()
            .zip(payload.chunks_exact(BLOCK_WORDS * 8))
        {
            for (word, bytes) in block.0.iter_mut().zip(chunk.chunks_exact(8)) {
                *word = u64::from_le_bytes(bytes.try_into().expect("chunks of 8"));
            }
        }
        Ok(filter)
    }
}

/// The parameters of a blocked filter's envelope: `num_blocks` blocks hashing with `seed`,
/// and what the filter was sized for, when it was.
pub(crate) fn encode_params(num_blocks: u64, seed: u64, sized_for: Option<SizedFor>) -> Vec<u8> {
    let writer = ParamWriter::new()
        .u64(num_blocks)
        .u32(BLOCK_LANES)
        .u32(HASHER_XXH3_64)
        .u64(seed);
    match sized_for {
        Some(sized) => writer.u64(sized.expected_items).f64(sized.fpp).finish(),
        None => writer.finish(),
    }
}

fn blocks_as_words(blocks: &[Block]) -> &[u64] {
    // SAFETY: a Block is `repr(C)` around `[u64; 8]`, 64 bytes with no padding, so the
    // blocks are exactly `8 * len` initialised u64s, borrowed for as long as `blocks`.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast::<u64>(), blocks.len() * BLOCK_WORDS) }
}

/// A read-only blocked filter over borrowed blocks, for example the payload of a
/// memory-mapped file: the same answers as [`BlockedBloomFilter`] without copying.
///
/// ```
/// use bloomery::blocked::BlockedBloomFilterView;
/// use bloomery::BlockedBloomFilter;
///
/// let mut filter = BlockedBloomFilter::with_fpp(100, 0.01)?;
/// filter.insert("x");
/// let view = BlockedBloomFilterView::new(filter.blocks(), filter.seed())?;
/// assert!(view.contains("x"));
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BlockedBloomFilterView<'a> {
    blocks: &'a [Block],
    seed: u64,
    kernel: Kernel,
    sized_for: Option<SizedFor>,
}

impl<'a> BlockedBloomFilterView<'a> {
    /// A view of `blocks`, hashing with `seed`.
    pub fn new(blocks: &'a [Block], seed: u64) -> Result<Self> {
        check_num_blocks(blocks.len() as u64)?;
        Ok(Self {
            kernel: Kernel::detect().for_blocks(blocks.len()),
            blocks,
            seed,
            sized_for: None,
        })
    }

    /// What the filter was sized for, when its file says.
    pub fn sized_for(&self) -> Option<SizedFor> {
        self.sized_for
    }

    /// As [`from_parts`](Self::from_parts), for parts written in format `version`: version
    /// 1's blocked files are refused, as [`Persist::from_parts_of_version`] refuses them.
    pub fn from_parts_of_version(version: u16, params: &[u8], payload: &'a [u8]) -> Result<Option<Self>> {
        if version < 2 {
            return Err(inconsistent(FORMAT_1_BLOCKED.into()));
        }
        Self::from_parts(params, payload)
    }

    /// A view of a native envelope's parameters and payload, without copying; `None` when
    /// the payload is not 64-byte aligned or the machine is big-endian (then load the
    /// filter with [`Persist::from_parts`]).
    pub fn from_parts(params: &[u8], payload: &'a [u8]) -> Result<Option<Self>> {
        let (_, seed, sized_for) = blocked_params(params, payload.len())?;
        if cfg!(target_endian = "big") {
            return Ok(None);
        }
        // SAFETY: a Block is eight u64s, valid for every bit pattern; align_to yields only a
        // correctly aligned middle part, accepted only when nothing is left over.
        let (head, blocks, tail) = unsafe { payload.align_to::<Block>() };
        if !head.is_empty() || !tail.is_empty() {
            return Ok(None);
        }
        let mut view = Self::new(blocks, seed)?;
        view.sized_for = sized_for;
        Ok(Some(view))
    }

    /// Whether `item` might be in the filter.
    #[inline]
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(xxh3_64_item(item, self.seed))
    }

    /// Looks an item up by its 64-bit hash.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.kernel.contains(self.blocks, hash)
    }

    /// Looks up every item, hashing ahead and prefetching (as
    /// [`BlockedBloomFilter::contains_batch_into`]).
    pub fn contains_batch_into<T: Funnel>(&self, items: &[T], results: &mut [bool]) {
        let (kernel, blocks) = (self.kernel, self.blocks);
        contains_items(self.seed, items, results, |hashes, results| {
            kernel.contains_batch(blocks, hashes, results);
        });
    }

    /// The number of bits.
    pub fn num_bits(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK_BITS
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The number of bits set.
    pub fn bit_count(&self) -> u64 {
        bit_count(self.blocks.iter().map(|block| block.0))
    }

    /// As [`BlockedBloomFilter::estimated_len`].
    pub fn estimated_len(&self) -> u64 {
        estimated_items(self.bit_count(), self.num_bits(), BLOCK_LANES)
    }

    /// As [`BlockedBloomFilter::expected_fpp`].
    pub fn expected_fpp(&self) -> f64 {
        current_fpp(self.blocks.iter().map(|block| block.0))
    }

    /// The blocks.
    pub fn blocks(&self) -> &'a [Block] {
        self.blocks
    }
}

/// A blocked filter over borrowed blocks it may change, for example the payload of a file
/// mapped writable: inserts set bits in place (nothing is copied; only the blocks touched
/// are read and written). Lookups and statistics go through [`view`](Self::view).
#[derive(Debug)]
pub struct BlockedBloomFilterMut<'a> {
    blocks: &'a mut [Block],
    seed: u64,
    kernel: Kernel,
    sized_for: Option<SizedFor>,
}

impl<'a> BlockedBloomFilterMut<'a> {
    /// The filter of a native envelope's parameters over its payload, in place; `None`
    /// when the payload is not 64-byte aligned or the machine is big-endian. Version-1
    /// files are refused, as everywhere.
    pub fn from_parts_of_version(version: u16, params: &[u8], payload: &'a mut [u8]) -> Result<Option<Self>> {
        if version < 2 {
            return Err(inconsistent(FORMAT_1_BLOCKED.into()));
        }
        let (_, seed, sized_for) = blocked_params(params, payload.len())?;
        if cfg!(target_endian = "big") {
            return Ok(None);
        }
        // SAFETY: a Block is eight u64s, valid for every bit pattern; align_to_mut yields
        // only a correctly aligned middle part, accepted only when nothing is left over.
        let (head, blocks, tail) = unsafe { payload.align_to_mut::<Block>() };
        if !head.is_empty() || !tail.is_empty() {
            return Ok(None);
        }
        check_num_blocks(blocks.len() as u64)?;
        Ok(Some(Self {
            kernel: Kernel::detect().for_blocks(blocks.len()),
            blocks,
            seed,
            sized_for,
        }))
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Adds an item by its hash ([`BlockedBloomFilter::hash`]); returns whether any bit
    /// changed.
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) -> bool {
        self.kernel.insert(self.blocks, hash)
    }

    /// Adds every hash ([`BlockedBloomFilter::hash`]), prefetching blocks ahead.
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
    pub fn view(&self) -> BlockedBloomFilterView<'_> {
        BlockedBloomFilterView {
            blocks: self.blocks,
            seed: self.seed,
            kernel: self.kernel,
            sized_for: self.sized_for,
        }
    }
}

/// Checks a blocked filter's parameters against a payload of `payload_len` bytes; returns
/// the block count and the seed.
fn blocked_params(params: &[u8], payload_len: usize) -> Result<(usize, u64, Option<SizedFor>)> {
    let mut params = ParamReader::new(params);
    let num_blocks = params.u64()?;
    let lanes = params.u32()?;
    let hasher = params.u32()?;
    let seed = params.u64()?;
    let sized_for = if params.is_at_end() {
        None
    } else {
        // 0 items: written before 2026-11-27 for filters made for 0 items (sized as
        // for 1), which read as made for 1.
        let sized = SizedFor::new(params.u64()?, params.f64()?);
        Some(
            sized
                .check()
                .map_err(|error| inconsistent(format!("sized for: {error}")))?,
        )
    };
    params.finish()?;
    if lanes != BLOCK_LANES {
        return Err(inconsistent(format!(
            "{lanes} lanes per block; this library reads {BLOCK_LANES}"
        )));
    }
    if hasher == HASHER_FOLDHASH_V1 {
        return Err(inconsistent(FORMAT_1_BLOCKED.into()));
    }
    if hasher != HASHER_XXH3_64 {
        return Err(inconsistent(format!(
            "unknown hasher {hasher}; this library reads hasher {HASHER_XXH3_64} (XXH3-64)"
        )));
    }
    let num_blocks = check_num_blocks(num_blocks)
        .map_err(|_| inconsistent(format!("{num_blocks} blocks; 1..=2^32 allowed")))?;
    if payload_len as u64 != num_blocks as u64 * 64 {
        return Err(inconsistent(format!(
            "{num_blocks} blocks need {} payload bytes, found {payload_len}",
            num_blocks as u64 * 64
        )));
    }
    Ok((num_blocks, seed, sized_for))
}

/// One block of atomic lanes, cache-line aligned.
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct AtomicBlock([AtomicU64; BLOCK_WORDS]);

// SAFETY: eight AtomicU64s: all-zero is valid, no drop, alignment 64 <= 4096.
unsafe impl Zeroable for AtomicBlock {}

/// The thread-safe twin of [`BlockedBloomFilter`]: many threads insert through `&self`,
/// each setting its item's lanes with one atomic OR per lane (skipped when already set).
/// Same bits, same answers.
///
/// ```
/// use bloomery::{AtomicBlockedBloomFilter, BlockedBloomFilter};
///
/// let filter = AtomicBlockedBloomFilter::with_fpp(100_000, 0.01)?;
/// std::thread::scope(|scope| {
///     for thread in 0..2u64 {
///         let filter = &filter;
///         scope.spawn(move || (0..50_000u64).for_each(|i| { filter.insert(&(2 * i + thread)); }));
///     }
/// });
/// assert!((0..100_000u64).all(|i| filter.contains(&i)));
/// let plain: BlockedBloomFilter = filter.into();
/// assert!(plain.contains(&99_999u64));
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Debug)]
pub struct AtomicBlockedBloomFilter {
    blocks: ZeroedArray<AtomicBlock>,
    seed: u64,
    sized_for: Option<SizedFor>,
}

impl AtomicBlockedBloomFilter {
    /// A filter for `expected_items` at `fpp`, sized as [`BlockedBloomFilter::with_fpp`].
    pub fn with_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        let mut filter = Self::with_num_blocks(blocked_num_blocks(expected_items, fpp)?, DEFAULT_SEED)?;
        filter.sized_for = Some(SizedFor::new(expected_items, fpp));
        Ok(filter)
    }

    /// A filter of `num_blocks` 512-bit blocks hashing with `seed`.
    pub fn with_num_blocks(num_blocks: u64, seed: u64) -> Result<Self> {
        let blocks = ZeroedArray::try_new(check_num_blocks(num_blocks)?)?;
        Ok(Self {
            blocks,
            seed,
            sized_for: None,
        })
    }

    /// Adds `item` from any thread; returns whether this call set a bit.
    #[inline]
    pub fn insert<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.insert_hash(xxh3_64_item(item, self.seed))
    }

    /// Whether `item` might be in the filter.
    #[inline]
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(xxh3_64_item(item, self.seed))
    }

    /// The seed the filter hashes items with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Adds an item by its 64-bit hash.
    #[inline]
    pub fn insert_hash(&self, hash: u64) -> bool {
        set_lanes(
            &self.blocks[block_index(hash, self.blocks.len())],
            fingerprint(hash),
        )
    }

    /// Looks an item up by its 64-bit hash.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        lanes_set(
            &self.blocks[block_index(hash, self.blocks.len())],
            fingerprint(hash),
        )
    }

    /// Adds every item from any thread, hashing a chunk ahead and asking for each block
    /// (with the intent to write it, where the CPU can say so) many items before its atomic
    /// ORs. Those ORs then find their cache line at hand: a locked operation that has to
    /// fetch its line holds up the core's other memory traffic until the line arrives.
    ///
    /// ```
    /// use bloomery::AtomicBlockedBloomFilter;
    ///
    /// let filter = AtomicBlockedBloomFilter::with_fpp(100_000, 0.01)?;
    /// let items: Vec<u64> = (0..100_000).collect();
    /// std::thread::scope(|scope| {
    ///     for half in items.chunks(50_000) {
    ///         let filter = &filter;
    ///         scope.spawn(move || filter.insert_batch(half));
    ///     }
    /// });
    /// let mut found = vec![false; items.len()];
    /// filter.contains_batch_into(&items, &mut found);
    /// assert!(found.iter().all(|&found| found));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn insert_batch<T: Funnel>(&self, items: &[T]) {
        let seed = self.seed;
        for_hash_chunks(
            items,
            |item| xxh3_64_item(item, seed),
            |_, hashes| self.insert_hash_batch(hashes),
        );
    }

    /// Adds every hash ([`insert_hash`](Self::insert_hash) for each), prefetching blocks
    /// ahead as [`insert_batch`](Self::insert_batch) does.
    pub fn insert_hash_batch(&self, hashes: &[u64]) {
        let blocks: &[AtomicBlock] = &self.blocks;
        if blocks.is_empty() {
            return;
        }
        for_each_to_write(blocks, hashes, |blocks, hash| {
            // SAFETY: blocks is not empty (checked above).
            set_lanes(unsafe { block_of(blocks, hash) }, fingerprint(hash));
        });
    }

    /// Looks up every item, hashing a chunk ahead and prefetching their blocks; one result
    /// per item. Panics if the lengths differ.
    pub fn contains_batch_into<T: Funnel>(&self, items: &[T], results: &mut [bool]) {
        contains_items(self.seed, items, results, |hashes, results| {
            self.contains_hash_batch(hashes, results);
        });
    }

    /// Looks up every hash, prefetching blocks ahead. Panics if the lengths differ.
    pub fn contains_hash_batch(&self, hashes: &[u64], results: &mut [bool]) {
        assert_eq!(hashes.len(), results.len(), "one result per hash");
        batch_contains(&self.blocks, hashes, results, lanes_set);
    }

    /// The number of 512-bit blocks.
    pub fn num_blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// An estimate of the distinct items inserted so far.
    pub fn estimated_len(&self) -> u64 {
        let bits = bit_count(self.blocks.iter().map(load_block));
        estimated_items(bits, self.num_blocks() * BLOCK_BITS, BLOCK_LANES)
    }

    /// The current false-positive probability.
    pub fn expected_fpp(&self) -> f64 {
        current_fpp(self.blocks.iter().map(load_block))
    }

    /// A plain copy of the filter as it is now.
    pub fn to_blocked_bloom_filter(&self) -> BlockedBloomFilter {
        let mut blocks = zeroed_blocks(self.blocks.len());
        for (block, atomic) in blocks.iter_mut().zip(self.blocks.iter()) {
            block.0 = load_block(atomic);
        }
        BlockedBloomFilter {
            kernel: Kernel::detect().for_blocks(blocks.len()),
            blocks,
            seed: self.seed,
            sized_for: self.sized_for,
        }
    }
}

/// Sets a fingerprint's bit in each lane of an atomic block, one atomic OR per lane whose
/// bit is not set yet; returns whether this call set one.
#[inline(always)]
fn set_lanes(block: &AtomicBlock, fingerprint: u32) -> bool {
    let mut changed = false;
    for (lane, mask) in block.0.iter().zip(masks(fingerprint)) {
        if lane.load(Ordering::Relaxed) & mask == 0 {
            changed |= lane.fetch_or(mask, Ordering::Relaxed) & mask == 0;
        }
    }
    changed
}

/// Whether every lane of an atomic block has the fingerprint's bit.
#[inline(always)]
fn lanes_set(block: &AtomicBlock, fingerprint: u32) -> bool {
    let mut missing = 0;
    for (lane, mask) in block.0.iter().zip(masks(fingerprint)) {
        missing |= mask & !lane.load(Ordering::Relaxed);
    }
    missing == 0
}

fn load_block(block: &AtomicBlock) -> [u64; BLOCK_WORDS] {
    std::array::from_fn(|lane| block.0[lane].load(Ordering::Relaxed))
}

impl From<BlockedBloomFilter> for AtomicBlockedBloomFilter {
    /// The same blocks, made atomic in place (not copied, where `AtomicU64` has `u64`'s
    /// alignment, as on every 64-bit target: an empty filter's pages stay untouched).
    fn from(filter: BlockedBloomFilter) -> Self {
        let blocks = match filter.blocks.cast::<AtomicBlock>() {
            Ok(blocks) => blocks,
            Err(plain) => {
                let mut blocks = ZeroedArray::<AtomicBlock>::new(plain.len());
                for (atomic, block) in blocks.iter_mut().zip(plain.iter()) {
                    *atomic = AtomicBlock(block.0.map(AtomicU64::new));
                }
                blocks
            }
        };
        Self {
            blocks,
            seed: filter.seed,
            sized_for: filter.sized_for,
        }
    }
}

impl From<AtomicBlockedBloomFilter> for BlockedBloomFilter {
    /// The same blocks, no longer atomic (not copied, as above).
    fn from(filter: AtomicBlockedBloomFilter) -> Self {
        let AtomicBlockedBloomFilter {
            blocks,
            seed,
            sized_for,
        } = filter;
        match blocks.cast::<Block>() {
            Ok(blocks) => BlockedBloomFilter {
                kernel: Kernel::detect().for_blocks(blocks.len()),
                blocks,
                seed,
                sized_for,
            },
            Err(blocks) => AtomicBlockedBloomFilter {
                blocks,
                seed,
                sized_for,
            }
            .to_blocked_bloom_filter(),
        }
    }
}

/// Where a blocked filter's blocks are ([`BlockedBloomFilter::prefetcher`]): asks the
/// memory system for the block a hash picks. Holds an address, not a borrow.
#[derive(Clone, Copy, Debug)]
pub struct BlockPrefetcher {
    base: usize,
    num_blocks: usize,
}

impl BlockPrefetcher {
    /// Asks for the block of the item with `hash` (a hint; never faults, whatever became
    /// of the filter).
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        crate::bits::blocks::prefetch(
            (self.base as *const Block).wrapping_add(block_index(hash, self.num_blocks)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_sizing_is_kept_in_the_file_and_optional() {
        use crate::any;
        let mut sized = BlockedBloomFilter::with_fpp(1000, 0.01).unwrap();
        sized.insert("apple");
        let loaded = any::open(&sized.to_bytes()).unwrap();
        assert_eq!(loaded.stats().capacity, Some(1000));
        let loaded = loaded.as_any().downcast_ref::<BlockedBloomFilter>().unwrap();
        assert_eq!(
            loaded.sized_for(),
            Some(SizedFor {
                expected_items: 1000,
                fpp: 0.01
            })
        );
        // Made from a block count: the 24-byte parameters of files written before the
        // sizing was kept, which still load.
        let mut from_count = BlockedBloomFilter::with_num_blocks(sized.num_blocks(), 0).unwrap();
        from_count.insert("apple");
        assert_eq!(from_count.params().len(), 24);
        let loaded = any::open(&from_count.to_bytes()).unwrap();
        assert_eq!(loaded.stats().capacity, None);
        assert!(loaded.contains(b"apple"));
        // A stored sizing must be sane.
        let mut params = sized.params();
        params[32..40].copy_from_slice(&2.0f64.to_le_bytes());
        let payload = sized.to_bytes()[native::header_len(40)..].to_vec();
        assert!(BlockedBloomFilter::from_parts(&params, &payload).is_err());
        params[24..32].copy_from_slice(&0u64.to_le_bytes());
        params[32..40].copy_from_slice(&0.01f64.to_le_bytes());
        // A filter made for 0 items (sized as for 1), as written before the sizing said 1:
        // it loads, made for 1.
        let old = BlockedBloomFilter::from_parts(&params, &payload).unwrap();
        assert_eq!(old.sized_for().map(|sized| sized.expected_items), Some(1));
        assert!(old.contains("apple"));
    }

    #[test]
    fn a_filter_made_for_no_items_saves_a_file_that_loads() {
        use crate::any;
        let mut plain = BlockedBloomFilter::with_fpp(0, 0.01).unwrap();
        assert_eq!(
            plain.num_blocks(),
            BlockedBloomFilter::with_fpp(1, 0.01).unwrap().num_blocks()
        );
        plain.insert("apple");
        let atomic = AtomicBlockedBloomFilter::with_fpp(0, 0.01).unwrap();
        atomic.insert("apple");
        for bytes in [plain.to_bytes(), atomic.to_blocked_bloom_filter().to_bytes()] {
            let loaded = any::open(&bytes).unwrap();
            assert!(loaded.contains(b"apple"));
            assert_eq!(loaded.stats().capacity, Some(1));
        }
    }

    #[test]
    fn salts_are_the_documented_ones() {
        // docs/format.md, "2: blocked".
        let documented = [
            0xe220a839, 0x6e789e6b, 0x06c45d19, 0xf88bb8a9, 0x1b39896b, 0x53cb9f0d, 0x2c829abf, 0xc584133b,
        ];
        assert_eq!(SALTS, documented);
    }

    #[test]
    fn salts_are_odd_and_distinct() {
        for (i, salt) in SALTS.iter().enumerate() {
            assert_eq!(salt % 2, 1);
            assert!(!SALTS[..i].contains(salt));
        }
    }

    #[test]
    fn an_item_sets_one_bit_in_each_lane() {
        for kernel in Kernel::available() {
            let mut blocks = [Block::default()];
            assert!(kernel.insert(&mut blocks, 0xdead_beef));
            let bits_per_lane: Vec<u32> = blocks[0].0.iter().map(|word| word.count_ones()).collect();
            assert_eq!(bits_per_lane, [1; 8], "{}", kernel.name());
            assert_eq!(blocks[0].0, scalar::masks(0xdead_beef), "{}", kernel.name());
            assert!(!kernel.insert(&mut blocks, 0xdead_beef));
            assert!(kernel.contains(&blocks, 0xdead_beef));
        }
    }

    #[test]
    fn a_cpu_with_avx2_gets_a_simd_kernel() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            assert_ne!(Kernel::detect(), Kernel::scalar());
            assert!(Kernel::available().iter().any(|kernel| kernel.name() == "avx2"));
        }
        assert_eq!(Kernel::available()[0], Kernel::scalar());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every kernel sets the same bits and gives the same answers as the scalar one.
        #[test]
        fn simd_kernels_match_the_scalar_kernel(
            num_blocks in 1u64..200,
            inserted in proptest::collection::vec(any::<u64>(), 0..600),
            probes in proptest::collection::vec(any::<u64>(), 0..600),
        ) {
            let reference = {
                let mut filter = BlockedBloomFilter::with_num_blocks(num_blocks, DEFAULT_SEED)
                    .unwrap()
                    .with_kernel(Kernel::scalar());
                let changes: Vec<bool> = inserted.iter().map(|&h| filter.insert_hash(h)).collect();
                (filter, changes)
            };
            // Each kernel as chosen for these small filters (the in-cache operations where
            // it has them) and as chosen for a filter larger than in_cache_bytes().
            let sized = Kernel::available()
                .into_iter()
                .flat_map(|kernel| [(kernel, false), (kernel, true)]);
            for (kernel, large) in sized {
                let mut filter = BlockedBloomFilter::with_num_blocks(num_blocks, DEFAULT_SEED)
                    .unwrap()
                    .with_kernel(kernel);
                if large {
                    filter.kernel = kernel.for_blocks(usize::MAX);
                }
                let changes: Vec<bool> = inserted.iter().map(|&h| filter.insert_hash(h)).collect();
                prop_assert_eq!(&changes, &reference.1, "{}", kernel.name());
                prop_assert!(filter == reference.0, "{} set other bits", kernel.name());
                let mut batched = BlockedBloomFilter::with_num_blocks(num_blocks, DEFAULT_SEED)
                    .unwrap()
                    .with_kernel(kernel);
                batched.insert_hash_batch(&inserted);
                prop_assert!(batched == reference.0, "{} batch set other bits", kernel.name());
                let mut batch_answers = vec![false; probes.len()];
                filter.contains_hash_batch(&probes, &mut batch_answers);
                for (&probe, &batch_answer) in probes.iter().zip(&batch_answers) {
                    let expected = reference.0.contains_hash(probe);
                    prop_assert_eq!(filter.contains_hash(probe), expected, "{}", kernel.name());
                    prop_assert_eq!(batch_answer, expected, "{} batch", kernel.name());
                }
            }
        }
    }
}
