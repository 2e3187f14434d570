//! The blocked Bloom filter: every item lives in one 64-byte block, one cache line, so an
//! insert or a lookup costs one memory access instead of k.
//!
//! A 64-bit hash h picks the block from its high 32 bits by multiply-shift,
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
//! item) and a measured rate of 0.942% over 2·10^6 fresh keys; at 0.1%, 15.87 bits and
//! 0.092% (`cargo test --test blocked -- --nocapture` prints them).
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

use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(test)]
use kernel::SALTS;
use kernel::{BLOCK_WORDS, HASH_CHUNK, block_index, fingerprint, masks};
pub use kernel::{Block, Kernel};

use crate::bits::{Zeroable, ZeroedArray};
use crate::error::{Error, Result, inconsistent};
use crate::format::native::{self, ParamReader, ParamWriter, Persist, Variant};
use crate::sizing::{
    BLOCK_BITS, BLOCK_LANES, MAX_NUM_BLOCKS, blocked_false_positive_rate, blocked_num_blocks,
};

/// The default hasher: foldhash's `quality` hasher with a fixed, stored seed, so a filter
/// can be saved and loaded. Not foldhash's `fast` variant: its high 32 bits, which pick
/// the block, are too regular for keys that differ only in their high half (keys
/// `i << 32` gave 1.27% at a 1% setting; `quality`, one more folded multiply, 0.95%, as the
/// formula says). foldhash does not promise the same output across its own
/// releases; `tests/blocked.rs` pins known outputs, so an upgrade that changes them fails
/// the tests instead of silently turning saved filters into false negatives.
#[derive(Clone, Debug)]
pub struct SeededFoldHash {
    seed: u64,
    state: foldhash::quality::FixedState,
}

impl SeededFoldHash {
    /// The seed used by [`BlockedBloomFilter::with_fpp`].
    pub const DEFAULT_SEED: u64 = 0;

    /// A hasher with `seed`.
    pub const fn with_seed(seed: u64) -> Self {
        Self {
            seed,
            state: foldhash::quality::FixedState::with_seed(seed),
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

impl Default for SeededFoldHash {
    fn default() -> Self {
        Self::with_seed(Self::DEFAULT_SEED)
    }
}

impl PartialEq for SeededFoldHash {
    fn eq(&self, other: &Self) -> bool {
        self.seed == other.seed
    }
}

impl Eq for SeededFoldHash {}

impl BuildHasher for SeededFoldHash {
    type Hasher = foldhash::quality::FoldHasher<'static>;

    #[inline(always)]
    fn build_hasher(&self) -> Self::Hasher {
        self.state.build_hasher()
    }
}

/// A [`BuildHasher`] whose output depends only on a stored seed, so filters hashed with it
/// can be saved and loaded ([`Persist`]).
pub trait PersistentHasher: BuildHasher + Sized {
    /// Identifies the algorithm (and version of its output) in saved filters.
    const ID: u32;
    /// The seed to store.
    fn seed(&self) -> u64;
    /// The hasher for a stored seed.
    fn from_seed(seed: u64) -> Self;
}

impl PersistentHasher for SeededFoldHash {
    /// foldhash 0.2, `quality` variant.
    const ID: u32 = 1;

    fn seed(&self) -> u64 {
        self.seed
    }

    fn from_seed(seed: u64) -> Self {
        Self::with_seed(seed)
    }
}

/// A cache-line-blocked Bloom filter: one memory access per insert or lookup.
///
/// ```
/// use bloomery::BlockedBloomFilter;
///
/// let mut filter = BlockedBloomFilter::with_fpp(1_000_000, 0.01)?;
/// filter.insert(&42u64);
/// filter.insert("a string");
/// assert!(filter.contains(&42u64));
/// assert!(!filter.contains(&43u64));
///
/// // Batches hash ahead and prefetch: the fast way to query many items.
/// let keys: Vec<u64> = (0..1_000).collect();
/// filter.insert_batch(&keys);
/// assert!(filter.contains_batch(&keys).iter().all(|&present| present));
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BlockedBloomFilter<S = SeededFoldHash> {
    blocks: ZeroedArray<Block>,
    hasher: S,
    kernel: Kernel,
}

/// Blocks that start as all zero bits (on huge pages when large).
fn zeroed_blocks(num_blocks: usize) -> ZeroedArray<Block> {
    ZeroedArray::new(num_blocks)
}

fn check_num_blocks(num_blocks: u64) -> Result<usize> {
    if num_blocks == 0 || num_blocks > MAX_NUM_BLOCKS || num_blocks > (isize::MAX as u64) / 64 {
        return Err(Error::NumBits {
            value: u128::from(num_blocks) * u128::from(BLOCK_BITS),
            max: MAX_NUM_BLOCKS * BLOCK_BITS,
            why: "a blocked filter has 1 to 2^32 blocks of 512 bits",
        });
    }
    Ok(num_blocks as usize)
}

impl BlockedBloomFilter<SeededFoldHash> {
    /// A filter for `expected_items` at false-positive probability `fpp`, sized with the
    /// blocked-filter formula ([`crate::sizing::blocked_num_blocks`]), with the default
    /// hasher.
    pub fn with_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        Self::with_fpp_and_hasher(expected_items, fpp, SeededFoldHash::default())
    }
}

impl<S: BuildHasher> BlockedBloomFilter<S> {
    /// As [`with_fpp`](BlockedBloomFilter::with_fpp), hashing with `hasher`.
    pub fn with_fpp_and_hasher(expected_items: u64, fpp: f64, hasher: S) -> Result<Self> {
        Self::with_num_blocks(blocked_num_blocks(expected_items, fpp)?, hasher)
    }

    /// A filter of `num_blocks` 512-bit blocks.
    pub fn with_num_blocks(num_blocks: u64, hasher: S) -> Result<Self> {
        Ok(Self {
            blocks: zeroed_blocks(check_num_blocks(num_blocks)?),
            hasher,
            kernel: Kernel::detect(),
        })
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

    /// The hasher.
    pub fn hasher(&self) -> &S {
        &self.hasher
    }

    /// The 64-bit hash of `item` that [`insert_hash`](Self::insert_hash) takes.
    #[inline]
    pub fn hash<T: Hash + ?Sized>(&self, item: &T) -> u64 {
        self.hasher.hash_one(item)
    }

    /// Adds `item`; returns whether any bit changed.
    #[inline]
    pub fn insert<T: Hash + ?Sized>(&mut self, item: &T) -> bool {
        self.insert_hash(self.hash(item))
    }

    /// Whether `item` might be in the filter: `false` is certain.
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
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

    /// Adds every item, hashing a few ahead and prefetching their blocks.
    pub fn insert_batch<T: Hash>(&mut self, items: &[T]) {
        for chunk in items.chunks(HASH_CHUNK) {
            let mut hashes = [0u64; HASH_CHUNK];
            for (hash, item) in hashes.iter_mut().zip(chunk) {
                *hash = self.hasher.hash_one(item);
            }
            self.insert_hash_batch(&hashes[..chunk.len()]);
        }
    }

    /// Adds every hash, prefetching blocks a few ahead.
    pub fn insert_hash_batch(&mut self, hashes: &[u64]) {
        self.kernel.insert_batch(&mut self.blocks, hashes);
    }

    /// Looks up every item, hashing a few ahead and prefetching their blocks.
    pub fn contains_batch<T: Hash>(&self, items: &[T]) -> Vec<bool> {
        let mut results = vec![false; items.len()];
        self.contains_batch_into(items, &mut results);
        results
    }

    /// As [`contains_batch`](Self::contains_batch), writing into `results`. Panics if the
    /// lengths differ.
    pub fn contains_batch_into<T: Hash>(&self, items: &[T], results: &mut [bool]) {
        assert_eq!(items.len(), results.len(), "one result per item");
        for (chunk, results) in items.chunks(HASH_CHUNK).zip(results.chunks_mut(HASH_CHUNK)) {
            let mut hashes = [0u64; HASH_CHUNK];
            for (hash, item) in hashes.iter_mut().zip(chunk) {
                *hash = self.hasher.hash_one(item);
            }
            self.contains_hash_batch(&hashes[..chunk.len()], results);
        }
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
        self.blocks
            .iter()
            .flat_map(|block| block.0)
            .map(|word| u64::from(word.count_ones()))
            .sum()
    }

    /// An estimate of the distinct items inserted: each sets 8 of the m bits, so after n
    /// items a fraction f ≈ 1 - e^(-8n/m) is set and n ≈ -(m/8) ln(1 - f).
    pub fn estimated_len(&self) -> u64 {
        estimated_len(self.bit_count(), self.num_bits())
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

    /// Whether `other` has the same number of blocks (it must also use the same hasher).
    pub fn is_compatible(&self, other: &Self) -> bool {
        self.blocks.len() == other.blocks.len()
    }

    fn check_compatible(&self, other: &Self) -> Result<()> {
        if self.is_compatible(other) {
            Ok(())
        } else {
            Err(Error::Incompatible {
                reason: format!(
                    "num_blocks differ: {} vs {}",
                    self.blocks.len(),
                    other.blocks.len()
                ),
            })
        }
    }

    /// Adds every item of `other` (bitwise OR).
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

impl<S> PartialEq for BlockedBloomFilter<S> {
    /// Equal bits (the hasher and kernel are not compared).
    fn eq(&self, other: &Self) -> bool {
        *self.blocks == *other.blocks
    }
}

impl<S> Eq for BlockedBloomFilter<S> {}

fn estimated_len(bit_count: u64, num_bits: u64) -> u64 {
    let fraction_set = bit_count as f64 / num_bits as f64;
    (-(-fraction_set).ln_1p() * num_bits as f64 / f64::from(BLOCK_LANES)).round() as u64
}

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

impl<T: Hash + ?Sized, S: BuildHasher> crate::Filter<T> for BlockedBloomFilter<S> {
    fn insert(&mut self, item: &T) -> bool {
        BlockedBloomFilter::insert(self, item)
    }

    fn contains(&self, item: &T) -> bool {
        BlockedBloomFilter::contains(self, item)
    }
}

impl<S: BuildHasher> crate::FilterStats for BlockedBloomFilter<S> {
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

/// Parameters: num_blocks (u64), lanes (u32, 8), hasher id (u32), hasher seed (u64);
/// payload: the blocks' words, little-endian.
impl<S: PersistentHasher> Persist for BlockedBloomFilter<S> {
    const VARIANT: Variant = Variant::Blocked;

    fn params(&self) -> Vec<u8> {
        ParamWriter::new()
            .u64(self.num_blocks())
            .u32(BLOCK_LANES)
            .u32(S::ID)
            .u64(self.hasher.seed())
            .finish()
    }

    fn payload(&self) -> Vec<u8> {
        self.payload_pieces().concat()
    }

    fn payload_pieces(&self) -> Vec<std::borrow::Cow<'_, [u8]>> {
        let blocks: &[Block] = &self.blocks;
        // SAFETY: a Block is `repr(C)` around `[u64; 8]`, 64 bytes with no padding, so the
        // blocks are exactly `8 * len` initialised u64s, borrowed for as long as `self`.
        let words =
            unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast::<u64>(), blocks.len() * BLOCK_WORDS) };
        vec![native::words_as_le_bytes(words)]
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let (num_blocks, seed) = blocked_params::<S>(params)?;
        if payload.len() as u64 != num_blocks as u64 * 64 {
            return Err(payload_mismatch(num_blocks, payload.len()));
        }
        let mut filter = Self::with_num_blocks(num_blocks as u64, S::from_seed(seed))?;
        let words = native::words_from_le_bytes(payload)?;
        for (block, chunk) in filter.blocks.iter_mut().zip(words.chunks_exact(BLOCK_WORDS)) {
            block.0.copy_from_slice(chunk);
        }
        Ok(filter)
    }
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
/// let view = BlockedBloomFilterView::new(filter.blocks(), filter.hasher().clone())?;
/// assert!(view.contains("x"));
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BlockedBloomFilterView<'a, S = SeededFoldHash> {
    blocks: &'a [Block],
    hasher: S,
    kernel: Kernel,
}

impl<'a, S: BuildHasher> BlockedBloomFilterView<'a, S> {
    /// A view of `blocks`, hashing with `hasher`.
    pub fn new(blocks: &'a [Block], hasher: S) -> Result<Self> {
        check_num_blocks(blocks.len() as u64)?;
        Ok(Self {
            blocks,
            hasher,
            kernel: Kernel::detect(),
        })
    }

    /// Whether `item` might be in the filter.
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_one(item))
    }

    /// Looks an item up by its 64-bit hash.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.kernel.contains(self.blocks, hash)
    }

    /// The number of bits.
    pub fn num_bits(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK_BITS
    }

    /// As [`BlockedBloomFilter::estimated_len`].
    pub fn estimated_len(&self) -> u64 {
        let bit_count = self
            .blocks
            .iter()
            .flat_map(|block| block.0)
            .map(|word| u64::from(word.count_ones()))
            .sum();
        estimated_len(bit_count, self.num_bits())
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

impl<'a, S: PersistentHasher> BlockedBloomFilterView<'a, S> {
    /// A view of a native envelope's parameters and payload, without copying; `None` when
    /// the payload is not 64-byte aligned or the machine is big-endian (then load the
    /// filter with [`Persist::from_parts`]).
    pub fn from_parts(params: &[u8], payload: &'a [u8]) -> Result<Option<Self>> {
        let (num_blocks, seed) = blocked_params::<S>(params)?;
        if payload.len() as u64 != num_blocks as u64 * 64 {
            return Err(payload_mismatch(num_blocks, payload.len()));
        }
        if cfg!(target_endian = "big") {
            return Ok(None);
        }
        // SAFETY: a Block is eight u64s, valid for every bit pattern; align_to yields only a
        // correctly aligned middle part, accepted only when nothing is left over.
        let (head, blocks, tail) = unsafe { payload.align_to::<Block>() };
        if !head.is_empty() || !tail.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self::new(blocks, S::from_seed(seed))?))
    }
}

/// Checks a blocked filter's parameters; returns the block count and the hasher seed.
fn blocked_params<S: PersistentHasher>(params: &[u8]) -> Result<(usize, u64)> {
    let mut params = ParamReader::new(params);
    let num_blocks = params.u64()?;
    let lanes = params.u32()?;
    let hasher_id = params.u32()?;
    let seed = params.u64()?;
    params.finish()?;
    if lanes != BLOCK_LANES {
        return Err(inconsistent(format!(
            "{lanes} lanes per block; this library reads {BLOCK_LANES}"
        )));
    }
    if hasher_id != S::ID {
        return Err(inconsistent(format!(
            "filter was hashed with hasher {hasher_id}; this build reads hasher {}",
            S::ID
        )));
    }
    Ok((check_num_blocks(num_blocks)?, seed))
}

fn payload_mismatch(num_blocks: usize, payload_len: usize) -> Error {
    inconsistent(format!(
        "{num_blocks} blocks need {} payload bytes, found {payload_len}",
        num_blocks as u64 * 64
    ))
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
pub struct AtomicBlockedBloomFilter<S = SeededFoldHash> {
    blocks: ZeroedArray<AtomicBlock>,
    hasher: S,
}

impl AtomicBlockedBloomFilter<SeededFoldHash> {
    /// A filter for `expected_items` at `fpp`, sized as [`BlockedBloomFilter::with_fpp`].
    pub fn with_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        Self::with_num_blocks(
            blocked_num_blocks(expected_items, fpp)?,
            SeededFoldHash::default(),
        )
    }
}

impl<S: BuildHasher> AtomicBlockedBloomFilter<S> {
    /// A filter of `num_blocks` 512-bit blocks.
    pub fn with_num_blocks(num_blocks: u64, hasher: S) -> Result<Self> {
        let blocks = ZeroedArray::new(check_num_blocks(num_blocks)?);
        Ok(Self { blocks, hasher })
    }

    /// Adds `item` from any thread; returns whether this call set a bit.
    #[inline]
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.insert_hash(self.hasher.hash_one(item))
    }

    /// Whether `item` might be in the filter.
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_one(item))
    }

    /// Adds an item by its 64-bit hash.
    #[inline]
    pub fn insert_hash(&self, hash: u64) -> bool {
        let block = &self.blocks[block_index(hash, self.blocks.len())];
        let mut changed = false;
        for (lane, mask) in block.0.iter().zip(masks(fingerprint(hash))) {
            if lane.load(Ordering::Relaxed) & mask == 0 {
                changed |= lane.fetch_or(mask, Ordering::Relaxed) & mask == 0;
            }
        }
        changed
    }

    /// Looks an item up by its 64-bit hash.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        let block = &self.blocks[block_index(hash, self.blocks.len())];
        let mut missing = 0;
        for (lane, mask) in block.0.iter().zip(masks(fingerprint(hash))) {
            missing |= mask & !lane.load(Ordering::Relaxed);
        }
        missing == 0
    }

    /// The number of 512-bit blocks.
    pub fn num_blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// An estimate of the distinct items inserted so far.
    pub fn estimated_len(&self) -> u64 {
        let bit_count = self
            .blocks
            .iter()
            .flat_map(|block| &block.0)
            .map(|lane| u64::from(lane.load(Ordering::Relaxed).count_ones()))
            .sum();
        estimated_len(bit_count, self.num_blocks() * BLOCK_BITS)
    }

    /// The current false-positive probability.
    pub fn expected_fpp(&self) -> f64 {
        current_fpp(self.blocks.iter().map(load_block))
    }
}

fn load_block(block: &AtomicBlock) -> [u64; BLOCK_WORDS] {
    std::array::from_fn(|lane| block.0[lane].load(Ordering::Relaxed))
}

impl<S: BuildHasher + Clone> AtomicBlockedBloomFilter<S> {
    /// A plain copy of the filter as it is now.
    pub fn to_blocked_bloom_filter(&self) -> BlockedBloomFilter<S> {
        let mut blocks = zeroed_blocks(self.blocks.len());
        for (block, atomic) in blocks.iter_mut().zip(self.blocks.iter()) {
            block.0 = load_block(atomic);
        }
        BlockedBloomFilter {
            blocks,
            hasher: self.hasher.clone(),
            kernel: Kernel::detect(),
        }
    }
}

impl<S: BuildHasher> From<BlockedBloomFilter<S>> for AtomicBlockedBloomFilter<S> {
    fn from(filter: BlockedBloomFilter<S>) -> Self {
        let mut blocks = ZeroedArray::<AtomicBlock>::new(filter.blocks.len());
        for (atomic, block) in blocks.iter_mut().zip(filter.blocks.iter()) {
            *atomic = AtomicBlock(block.0.map(AtomicU64::new));
        }
        Self {
            blocks,
            hasher: filter.hasher,
        }
    }
}

impl<S: BuildHasher> From<AtomicBlockedBloomFilter<S>> for BlockedBloomFilter<S> {
    fn from(filter: AtomicBlockedBloomFilter<S>) -> Self {
        let mut blocks = zeroed_blocks(filter.blocks.len());
        for (block, atomic) in blocks.iter_mut().zip(filter.blocks.iter()) {
            block.0 = load_block(atomic);
        }
        BlockedBloomFilter {
            blocks,
            hasher: filter.hasher,
            kernel: Kernel::detect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
                let mut filter = BlockedBloomFilter::with_num_blocks(num_blocks, SeededFoldHash::default())
                    .unwrap()
                    .with_kernel(Kernel::scalar());
                let changes: Vec<bool> = inserted.iter().map(|&h| filter.insert_hash(h)).collect();
                (filter, changes)
            };
            for kernel in Kernel::available() {
                let mut filter = BlockedBloomFilter::with_num_blocks(num_blocks, SeededFoldHash::default())
                    .unwrap()
                    .with_kernel(kernel);
                let changes: Vec<bool> = inserted.iter().map(|&h| filter.insert_hash(h)).collect();
                prop_assert_eq!(&changes, &reference.1, "{}", kernel.name());
                prop_assert!(filter == reference.0, "{} set other bits", kernel.name());
                let mut batched = BlockedBloomFilter::with_num_blocks(num_blocks, SeededFoldHash::default())
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
