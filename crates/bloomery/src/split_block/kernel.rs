//! The one small interface behind which the split-block kernels live: a [`SplitBlock`] is
//! Parquet's 256-bit block of eight 32-bit words, and a [`Kernel`] sets or tests an item's
//! eight bits in it. `scalar.rs` is the portable reference; `avx2.rs` holds a block in one
//! 256-bit register and is chosen, once per process, when the CPU has AVX2. Other CPUs
//! (aarch64 included) use the scalar kernel, whose eight independent multiply-shifts the
//! compiler vectorizes for the target's baseline.

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::scalar;

/// Words in a block.
pub(crate) const BLOCK_WORDS: usize = 8;

/// One block of a split-block filter: eight 32-bit words, 32 bytes (Parquet's layout, the
/// words little-endian in files). An item sets one bit in each word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(32))]
pub struct SplitBlock(pub(crate) [u32; BLOCK_WORDS]);

impl SplitBlock {
    /// The eight words.
    pub fn words(&self) -> &[u32; BLOCK_WORDS] {
        &self.0
    }
}

// SAFETY: eight u32s: all-zero is valid, no drop, alignment 32 <= 4096.
unsafe impl crate::bits::Zeroable for SplitBlock {}

/// Parquet's salt: the eight odd multipliers of the spec (parquet-format, BloomFilter.md,
/// "Technical Approach"). Word i of a block gets bit `(key · SALTS[i] mod 2^32) >> 27`.
pub(crate) const SALTS: [u32; BLOCK_WORDS] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// A kernel's whole operations, each compiled for the kernel's CPU features, reached
/// through one indirect call chosen when the filter was made (no feature test per call).
struct Ops {
    /// SAFETY contract of every entry: `blocks` is not empty, and the CPU has the
    /// kernel's features (guaranteed by [`Kernel::available`], the only constructor of
    /// non-scalar kernels).
    insert: unsafe fn(&mut [SplitBlock], u64) -> bool,
    contains: unsafe fn(&[SplitBlock], u64) -> bool,
    insert_batch: unsafe fn(&mut [SplitBlock], &[u64]),
    contains_batch: unsafe fn(&[SplitBlock], &[u64], &mut [bool]),
}

static SCALAR: Ops = Ops {
    insert: scalar::insert,
    contains: scalar::contains,
    insert_batch: scalar::insert_batch,
    contains_batch: scalar::contains_batch,
};

#[cfg(target_arch = "x86_64")]
static AVX2: Ops = Ops {
    insert: avx2::insert,
    contains: avx2::contains,
    insert_batch: avx2::insert_batch,
    contains_batch: avx2::contains_batch,
};

/// Which implementation sets and tests bits in a block. All give identical bits and
/// answers (the kernel proptest in `mod.rs`); only speed differs. A kernel other than
/// [`Kernel::scalar`] can only be obtained where the CPU supports it.
#[derive(Clone, Copy)]
pub struct Kernel {
    name: &'static str,
    ops: &'static Ops,
}

impl PartialEq for Kernel {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Kernel {}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name)
    }
}

impl Kernel {
    /// The portable kernel.
    pub const fn scalar() -> Self {
        Kernel {
            name: "scalar",
            ops: &SCALAR,
        }
    }

    /// The fastest kernel this CPU supports, detected once per process; the environment
    /// variable `BLOOMERY_KERNEL=scalar` picks the portable one (to measure it).
    pub fn detect() -> Self {
        static DETECTED: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            let available = Self::available();
            let wanted = std::env::var("BLOOMERY_KERNEL").ok();
            wanted
                .and_then(|name| available.iter().copied().find(|kernel| kernel.name == name))
                .or_else(|| available.last().copied())
                .unwrap_or(Self::scalar())
        })
    }

    /// Every kernel this CPU supports, slowest first (the scalar one is always there).
    pub fn available() -> Vec<Self> {
        let mut kernels = vec![Self::scalar()];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            kernels.push(Kernel {
                name: "avx2",
                ops: &AVX2,
            });
        }
        kernels
    }

    /// The kernel's name: "scalar" or "avx2".
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Adds the item with `hash` to `blocks`; returns whether any bit changed. Panics if
    /// `blocks` is empty (the filters never are).
    #[inline(always)]
    pub(crate) fn insert(self, blocks: &mut [SplitBlock], hash: u64) -> bool {
        assert!(!blocks.is_empty());
        // SAFETY: blocks is not empty; `ops` matches features the CPU reported (Ops).
        unsafe { (self.ops.insert)(blocks, hash) }
    }

    /// Whether the item with `hash` may be in `blocks` (false when there are none).
    #[inline(always)]
    pub(crate) fn contains(self, blocks: &[SplitBlock], hash: u64) -> bool {
        if blocks.is_empty() {
            return false;
        }
        // SAFETY: as in `insert`.
        unsafe { (self.ops.contains)(blocks, hash) }
    }

    /// Adds every hash, prefetching ahead.
    pub(crate) fn insert_batch(self, blocks: &mut [SplitBlock], hashes: &[u64]) {
        assert!(!blocks.is_empty());
        // SAFETY: as in `insert`.
        unsafe { (self.ops.insert_batch)(blocks, hashes) }
    }

    /// Looks up every hash, prefetching ahead; `results` has one slot per hash.
    pub(crate) fn contains_batch(self, blocks: &[SplitBlock], hashes: &[u64], results: &mut [bool]) {
        if blocks.is_empty() {
            results.fill(false);
            return;
        }
        // SAFETY: as in `insert`.
        unsafe { (self.ops.contains_batch)(blocks, hashes, results) }
    }
}

/// The block a hash picks, as the spec defines it: `((h >> 32) · z) >> 32` with a 64-bit
/// product (Ross, "Efficient Hash Probes on Modern Processors", 2006). Below `num_blocks`
/// for `num_blocks` ≥ 1, and the product cannot wrap (both factors are below 2^32), so the
/// wrapping multiply only spares an overflow check.
#[inline(always)]
pub(crate) fn block_index(hash: u64, num_blocks: usize) -> usize {
    ((hash >> 32).wrapping_mul(num_blocks as u64) >> 32) as usize
}

/// The 32 bits of the hash that pick the bits inside the block (the spec's `block_insert`
/// argument).
#[inline(always)]
pub(crate) fn key(hash: u64) -> u32 {
    hash as u32
}

/// The block `hash` picks, without a bounds check.
///
/// # Safety
/// `blocks` must not be empty (then [`block_index`] is in range).
#[inline(always)]
pub(crate) unsafe fn block_of(blocks: &[SplitBlock], hash: u64) -> &SplitBlock {
    debug_assert!(!blocks.is_empty());
    // SAFETY: block_index(h, n) < n for n >= 1, as the caller promises.
    unsafe { blocks.get_unchecked(block_index(hash, blocks.len())) }
}

/// As [`block_of`], mutably.
///
/// # Safety
/// As [`block_of`].
#[inline(always)]
pub(crate) unsafe fn block_of_mut(blocks: &mut [SplitBlock], hash: u64) -> &mut SplitBlock {
    debug_assert!(!blocks.is_empty());
    let index = block_index(hash, blocks.len());
    // SAFETY: as in `block_of`.
    unsafe { blocks.get_unchecked_mut(index) }
}

/// How many items ahead the batch loops prefetch: while item i is tested, the block of
/// item i + 64 is requested, so that many misses stay in flight (the blocked filter's
/// window, measured there: docs/benchmarks.md).
const PREFETCH_DISTANCE: usize = 64;

/// Hashes the batch APIs compute ahead of the kernel loop, per call (on the stack).
pub(crate) const HASH_CHUNK: usize = 512;

/// Asks for the block `hash` picks (a hint: never faults, so no bounds check).
#[inline(always)]
fn prefetch_block(blocks: &[SplitBlock], hash: u64) {
    let address = blocks.as_ptr().wrapping_add(block_index(hash, blocks.len()));
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint that never faults, whatever the address; SSE is part of
    // the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// The batch insert loop, shared by the kernels: prefetch ahead, then set bits.
#[inline(always)]
pub(crate) fn batch_insert(
    blocks: &mut [SplitBlock],
    hashes: &[u64],
    insert: impl Fn(&mut SplitBlock, u32) -> bool,
) {
    for &hash in hashes.iter().take(PREFETCH_DISTANCE) {
        prefetch_block(blocks, hash);
    }
    for (i, &hash) in hashes.iter().enumerate() {
        if let Some(&ahead) = hashes.get(i + PREFETCH_DISTANCE) {
            prefetch_block(blocks, ahead);
        }
        // SAFETY: the kernels are only called with blocks (see Ops).
        insert(unsafe { block_of_mut(blocks, hash) }, key(hash));
    }
}

/// The batch lookup loop, shared by the kernels.
#[inline(always)]
pub(crate) fn batch_contains(
    blocks: &[SplitBlock],
    hashes: &[u64],
    results: &mut [bool],
    contains: impl Fn(&SplitBlock, u32) -> bool,
) {
    for &hash in hashes.iter().take(PREFETCH_DISTANCE) {
        prefetch_block(blocks, hash);
    }
    for (i, (result, &hash)) in results.iter_mut().zip(hashes).enumerate() {
        if let Some(&ahead) = hashes.get(i + PREFETCH_DISTANCE) {
            prefetch_block(blocks, ahead);
        }
        // SAFETY: the kernels are only called with blocks (see Ops).
        *result = contains(unsafe { block_of(blocks, hash) }, key(hash));
    }
}
