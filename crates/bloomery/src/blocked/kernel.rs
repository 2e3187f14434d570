//! The one small interface behind which the block kernels live (see hashbrown's
//! `control/group`): a [`Block`] is one 64-byte cache line of eight 64-bit lanes, and a
//! [`Kernel`] sets or tests an item's eight bits in it. `scalar.rs` is the portable
//! reference; `avx2.rs` and `avx512.rs` are chosen at run time when the CPU has them, and
//! `neon.rs` on aarch64 (where NEON is always there). Other targets use the scalar kernel.

#[cfg(target_arch = "aarch64")]
use super::neon;
use super::scalar;
#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512};

/// Lanes in a block.
pub(crate) const BLOCK_WORDS: usize = 8;

/// One cache line of filter bits: eight 64-bit lanes. An item sets one bit per lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Block(pub(crate) [u64; BLOCK_WORDS]);

impl Block {
    /// The eight lanes.
    pub fn words(&self) -> &[u64; BLOCK_WORDS] {
        &self.0
    }
}

// SAFETY: eight u64s: all-zero is valid, no drop, alignment 64 <= 4096.
unsafe impl crate::bits::Zeroable for Block {}

/// The per-lane multipliers that turn a 32-bit fingerprint into eight bit positions.
/// Any odd constants with well-mixed high bits do; these are the high halves of the first
/// eight outputs of splitmix64 (Steele, Lea & Flood, 2014) from seed 0, forced odd, so
/// none is chosen by hand.
pub(crate) const SALTS: [u32; BLOCK_WORDS] = salts();

const fn salts() -> [u32; BLOCK_WORDS] {
    let mut salts = [0u32; BLOCK_WORDS];
    let mut state = 0u64;
    let mut lane = 0;
    while lane < BLOCK_WORDS {
        salts[lane] = ((crate::hash::splitmix64(&mut state) >> 32) as u32) | 1;
        lane += 1;
    }
    salts
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Scalar,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    Neon,
}

/// A kernel's whole operations, each compiled for the kernel's CPU features (block index,
/// masks, load and test in one function), reached through one indirect call that the
/// filter's kernel chose when the filter was made: no feature test or branch per call.
/// Measured with callgrind on 64-byte URL keys (`scripts/url-lookup-instructions.sh`): a
/// match per call on the kernel plus an index overflow check and a bounds check cost 40.8
/// instructions per operation beyond the hash; this table and the unchecked index
/// (provably in range) bring it to the figure in docs/benchmarks.md.
struct Ops {
    /// SAFETY contract of every entry: `blocks` is not empty, and the CPU has the
    /// kernel's features (guaranteed by [`Kernel::available`], the only constructor of
    /// non-scalar kernels).
    insert: unsafe fn(&mut [Block], u64) -> bool,
    contains: unsafe fn(&[Block], u64) -> bool,
    insert_batch: unsafe fn(&mut [Block], &[u64]),
    contains_batch: unsafe fn(&[Block], &[u64], &mut [bool]),
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

#[cfg(target_arch = "x86_64")]
static AVX512: Ops = Ops {
    insert: avx512::insert,
    contains: avx512::contains,
    insert_batch: avx512::insert_batch,
    contains_batch: avx512::contains_batch,
};

#[cfg(target_arch = "aarch64")]
static NEON: Ops = Ops {
    insert: neon::insert,
    contains: neon::contains,
    insert_batch: neon::insert_batch,
    contains_batch: neon::contains_batch,
};

/// Which implementation sets and tests bits in a block. All give identical bits and
/// answers; only speed differs. A `Kernel` other than [`Kernel::scalar`] can only be
/// obtained where the CPU supports it.
#[derive(Clone, Copy)]
pub struct Kernel {
    kind: Kind,
    ops: &'static Ops,
}

impl PartialEq for Kernel {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

impl Eq for Kernel {}

impl std::hash::Hash for Kernel {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

impl Kernel {
    /// The portable kernel.
    pub const fn scalar() -> Self {
        Kernel {
            kind: Kind::Scalar,
            ops: &SCALAR,
        }
    }

    /// The fastest kernel this CPU supports, chosen once per process; the environment
    /// variable `BLOOMERY_KERNEL` (`scalar`, `avx2`, `avx512`, `neon`) picks a slower one
    /// that the CPU supports, to measure what a machine without the faster one would do.
    pub fn detect() -> Self {
        static DETECTED: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            let available = Self::available();
            let wanted = std::env::var("BLOOMERY_KERNEL").ok();
            wanted
                .and_then(|name| available.iter().copied().find(|kernel| kernel.name() == name))
                .or_else(|| available.last().copied())
                .unwrap_or(Self::scalar())
        })
    }

    /// Every kernel this CPU supports, slowest first (the scalar one is always there).
    pub fn available() -> Vec<Self> {
        let mut kernels = vec![Self::scalar()];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                kernels.push(Kernel {
                    kind: Kind::Avx2,
                    ops: &AVX2,
                });
                if std::arch::is_x86_feature_detected!("avx512f") {
                    kernels.push(Kernel {
                        kind: Kind::Avx512,
                        ops: &AVX512,
                    });
                }
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            if std::arch::is_aarch64_feature_detected!("neon") {
                kernels.push(Kernel {
                    kind: Kind::Neon,
                    ops: &NEON,
                });
            }
        }
        kernels
    }

    /// The kernel's name: "scalar", "avx2", "avx512" or "neon".
    pub fn name(self) -> &'static str {
        match self.kind {
            Kind::Scalar => "scalar",
            Kind::Avx2 => "avx2",
            Kind::Avx512 => "avx512",
            Kind::Neon => "neon",
        }
    }

    /// Adds the item with `hash` to `blocks` (not empty); returns whether any bit changed.
    #[inline(always)]
    pub(crate) fn insert(self, blocks: &mut [Block], hash: u64) -> bool {
        assert!(!blocks.is_empty());
        // SAFETY: blocks is not empty; `ops` matches features the CPU reported (Ops).
        unsafe { (self.ops.insert)(blocks, hash) }
    }

    /// Whether the item with `hash` may be in `blocks` (not empty).
    #[inline(always)]
    pub(crate) fn contains(self, blocks: &[Block], hash: u64) -> bool {
        // The filters never hold zero blocks; the check is one well-predicted branch.
        if blocks.is_empty() {
            return false;
        }
        // SAFETY: as in `insert`.
        unsafe { (self.ops.contains)(blocks, hash) }
    }

    /// Adds every hash, hashing ahead and prefetching.
    pub(crate) fn insert_batch(self, blocks: &mut [Block], hashes: &[u64]) {
        assert!(!blocks.is_empty());
        // SAFETY: as in `insert`.
        unsafe { (self.ops.insert_batch)(blocks, hashes) }
    }

    /// Looks up every hash, prefetching ahead; `results` has one slot per hash.
    pub(crate) fn contains_batch(self, blocks: &[Block], hashes: &[u64], results: &mut [bool]) {
        if blocks.is_empty() {
            results.fill(false);
            return;
        }
        // SAFETY: as in `insert`.
        unsafe { (self.ops.contains_batch)(blocks, hashes, results) }
    }
}

/// The block an item's hash picks: multiply-shift of the hash's high 32 bits (Lemire,
/// 2016), so up to 2^32 blocks without a division. Always below `num_blocks` when that is
/// at least 1: (h >> 32) < 2^32, so the product is below num_blocks · 2^32. The product
/// cannot wrap (both factors are at most 2^32, and h >> 32 below it), so the wrapping
/// multiply only spares an overflow check.
#[inline(always)]
pub(crate) fn block_index(hash: u64, num_blocks: usize) -> usize {
    ((hash >> 32).wrapping_mul(num_blocks as u64) >> 32) as usize
}

/// The block `hash` picks, without a bounds check.
///
/// # Safety
/// `blocks` must not be empty (then [`block_index`] is in range).
#[inline(always)]
pub(crate) unsafe fn block_of(blocks: &[Block], hash: u64) -> &Block {
    debug_assert!(!blocks.is_empty());
    // SAFETY: block_index(h, n) < n for n >= 1 (see block_index), as the caller promises.
    unsafe { blocks.get_unchecked(block_index(hash, blocks.len())) }
}

/// As [`block_of`], mutably.
///
/// # Safety
/// As [`block_of`].
#[inline(always)]
pub(crate) unsafe fn block_of_mut(blocks: &mut [Block], hash: u64) -> &mut Block {
    debug_assert!(!blocks.is_empty());
    let index = block_index(hash, blocks.len());
    // SAFETY: as in `block_of`.
    unsafe { blocks.get_unchecked_mut(index) }
}

/// The 32 bits of the hash that pick the bits inside the block.
#[inline(always)]
pub(crate) fn fingerprint(hash: u64) -> u32 {
    hash as u32
}

/// How many items ahead the batch loops prefetch: while item i is tested, the block of item
/// i + PREFETCH_DISTANCE is requested, so that many misses stay in flight all the time
/// (a rolling window rather than groups, which would drain between groups).
pub(crate) const PREFETCH_DISTANCE: usize = 64;

/// Hashes the batch APIs compute ahead of the kernel loop, per call (on the stack).
pub(crate) const HASH_CHUNK: usize = 512;

/// Asks for the block `hash` picks, without a bounds check (a prefetch never faults).
#[inline(always)]
fn prefetch_block(blocks: &[Block], hash: u64) {
    prefetch(blocks.as_ptr().wrapping_add(block_index(hash, blocks.len())));
}

/// The batch insert loop, shared by the kernels: prefetch ahead, then set bits.
#[inline(always)]
pub(crate) fn batch_insert(blocks: &mut [Block], hashes: &[u64], insert: impl Fn(&mut Block, u32) -> bool) {
    for &hash in hashes.iter().take(PREFETCH_DISTANCE) {
        prefetch_block(blocks, hash);
    }
    for (i, &hash) in hashes.iter().enumerate() {
        if let Some(&ahead) = hashes.get(i + PREFETCH_DISTANCE) {
            prefetch_block(blocks, ahead);
        }
        // SAFETY: the kernels are only called with blocks (see Ops).
        insert(unsafe { block_of_mut(blocks, hash) }, fingerprint(hash));
    }
}

/// The batch lookup loop, shared by the kernels.
#[inline(always)]
pub(crate) fn batch_contains(
    blocks: &[Block],
    hashes: &[u64],
    results: &mut [bool],
    contains: impl Fn(&Block, u32) -> bool,
) {
    for &hash in hashes.iter().take(PREFETCH_DISTANCE) {
        prefetch_block(blocks, hash);
    }
    for (i, (result, &hash)) in results.iter_mut().zip(hashes).enumerate() {
        if let Some(&ahead) = hashes.get(i + PREFETCH_DISTANCE) {
            prefetch_block(blocks, ahead);
        }
        // SAFETY: the kernels are only called with blocks (see Ops).
        *result = contains(unsafe { block_of(blocks, hash) }, fingerprint(hash));
    }
}

/// The eight lane masks of a fingerprint (for the atomic filter, which sets lanes one
/// atomic OR at a time).
#[inline(always)]
pub(crate) fn masks(fingerprint: u32) -> [u64; BLOCK_WORDS] {
    scalar::masks(fingerprint)
}

/// Asks the CPU to start loading the cache line at `address` into L2 (a hint; never
/// faults). L2, not L1: an L2 keeps more misses in flight than L1's few fill buffers, so
/// a deep prefetch window is not capped by them. The line moves on to L1 when the kernel
/// touches it, by then a short L2 hit. (The batch rows of docs/benchmarks.md, runs G and
/// H, are measured with this hint.)
#[inline(always)]
pub(crate) fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint that never faults, whatever the address; SSE is part of
    // the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(address.cast());
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: PRFM is a hint that never faults, whatever the address, and touches no
    // register or memory the compiler knows of.
    unsafe {
        std::arch::asm!("prfm pldl2keep, [{0}]", in(reg) address, options(nostack, readonly, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = address;
}
