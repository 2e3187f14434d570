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
pub use crate::bits::blocks::BlockKernel;
use crate::bits::blocks::Ops;
pub(crate) use crate::bits::blocks::{
    batch_contains, batch_insert, block_index, block_key as fingerprint, block_of, block_of_mut,
};

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

/// The salts in the order the AVX2 kernel multiplies them, so that one 32-bit multiply and
/// two 64-bit shifts give the lane positions already in place: lane `j`'s salt in 32-bit
/// slot `2j` and lane `j + 4`'s in slot `2j + 1`. Read as four 64-bit words, word `j` of
/// the products then holds lane `j`'s product in its low half and lane `j + 4`'s in its
/// high half, and a position is a product's top 6 bits.
#[cfg(target_arch = "x86_64")]
pub(crate) const SALTS_INTERLEAVED: [u32; BLOCK_WORDS] = {
    let mut interleaved = [0u32; BLOCK_WORDS];
    let mut lane = 0;
    while lane < BLOCK_WORDS / 2 {
        interleaved[2 * lane] = SALTS[lane];
        interleaved[2 * lane + 1] = SALTS[lane + BLOCK_WORDS / 2];
        lane += 1;
    }
    interleaved
};

/// The salts in the high halves of eight 64-bit words (low halves zero), for the AVX-512
/// kernel: a 32-bit multiply of the broadcast fingerprint puts lane `i`'s product in the
/// high half of word `i`, so one 64-bit shift by 58 gives its position.
#[cfg(target_arch = "x86_64")]
pub(crate) const SALTS_HIGH_HALVES: [u32; 2 * BLOCK_WORDS] = {
    let mut spread = [0u32; 2 * BLOCK_WORDS];
    let mut lane = 0;
    while lane < BLOCK_WORDS {
        spread[2 * lane + 1] = SALTS[lane];
        lane += 1;
    }
    spread
};

/// The blocked filter's kernel: [`BlockKernel`] over its 512-bit [`Block`]s.
pub type Kernel = BlockKernel<Block>;

static SCALAR: Ops<Block> = Ops {
    insert: scalar::insert,
    contains: scalar::contains,
    insert_batch: scalar::insert_batch,
    contains_batch: scalar::contains_batch,
};

#[cfg(target_arch = "x86_64")]
static AVX2: Ops<Block> = Ops {
    insert: avx2::insert,
    contains: avx2::contains,
    insert_batch: avx2::insert_batch,
    contains_batch: avx2::contains_batch,
};

/// [`AVX2`] for filters whose blocks are usually in cache: single lookups in one wide load.
#[cfg(target_arch = "x86_64")]
static AVX2_IN_CACHE: Ops<Block> = Ops {
    contains: avx2::contains_in_cache,
    ..AVX2
};

#[cfg(target_arch = "x86_64")]
static AVX512: Ops<Block> = Ops {
    insert: avx512::insert,
    contains: avx512::contains,
    insert_batch: avx512::insert_batch,
    contains_batch: avx512::contains_batch,
};

/// [`AVX512`] for filters whose blocks are usually in cache: single lookups in one wide load.
#[cfg(target_arch = "x86_64")]
static AVX512_IN_CACHE: Ops<Block> = Ops {
    contains: avx512::contains_in_cache,
    ..AVX512
};

#[cfg(target_arch = "aarch64")]
static NEON: Ops<Block> = Ops {
    insert: neon::insert,
    contains: neon::contains,
    insert_batch: neon::insert_batch,
    contains_batch: neon::contains_batch,
};

impl BlockKernel<Block> {
    /// The portable kernel.
    pub const fn scalar() -> Self {
        // SAFETY: the scalar kernel needs no CPU feature.
        unsafe { BlockKernel::new("scalar", &SCALAR) }
    }

    /// The fastest kernel this CPU supports, chosen once per process; the environment
    /// variable `BLOOMERY_KERNEL` (`scalar`, `avx2`, `avx512`, `neon`) picks a slower one
    /// that the CPU supports, to measure what a machine without the faster one would do.
    pub fn detect() -> Self {
        static DETECTED: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| Self::choose(&Self::available()).unwrap_or(Self::scalar()))
    }

    /// The value of the environment variable `BLOOMERY_KERNEL` when it names no kernel of
    /// [`available`](Self::available) (then the fastest one runs): for the tools to say so
    /// (the CLI refuses it, the Redis module logs it at load, the Python package warns at
    /// import); `None` when it is unset or names one.
    ///
    /// ```
    /// use bloomery::blocked::Kernel;
    ///
    /// // SAFETY (of set_var): this example runs alone in its process.
    /// unsafe { std::env::set_var("BLOOMERY_KERNEL", "no-such-kernel") };
    /// assert_eq!(Kernel::misnamed().as_deref(), Some("no-such-kernel"));
    /// unsafe { std::env::set_var("BLOOMERY_KERNEL", "scalar") };
    /// assert_eq!(Kernel::misnamed(), None);
    /// ```
    pub fn misnamed() -> Option<String> {
        let wanted = std::env::var_os("BLOOMERY_KERNEL")?;
        let known = wanted
            .to_str()
            .is_some_and(|name| Self::available().iter().any(|kernel| kernel.name() == name));
        (!known).then(|| wanted.to_string_lossy().into_owned())
    }

    /// What the tools that run on with the fastest kernel say of a [`misnamed`](Self::misnamed)
    /// one (the Redis module's log, the Python package's warning).
    pub fn misnamed_note() -> Option<String> {
        Self::misnamed().map(|name| {
            format!(
                "BLOOMERY_KERNEL '{}' names no kernel of this CPU's blocked filters; the fastest, {}, runs",
                name.escape_debug(),
                Self::detect().name()
            )
        })
    }

    /// Every kernel this CPU supports, slowest first (the scalar one is always there).
    pub fn available() -> Vec<Self> {
        let mut kernels = vec![Self::scalar()];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU reported AVX2.
                kernels.push(unsafe { BlockKernel::sized("avx2", &AVX2, &AVX2_IN_CACHE) });
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU reported AVX2 and AVX-512F.
                    kernels.push(unsafe { BlockKernel::sized("avx512", &AVX512, &AVX512_IN_CACHE) });
                }
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            if std::arch::is_aarch64_feature_detected!("neon") {
                // SAFETY: the CPU reported NEON.
                kernels.push(unsafe { BlockKernel::new("neon", &NEON) });
            }
        }
        kernels
    }
}

/// The block's lanes 0-3 and 4-7, read by four 16-byte loads, for the x86 kernels' single
/// lookups into a filter larger than `in_cache_bytes()` (bits/blocks.rs).
///
/// A single lookup's block is usually not in cache, and the caller has other work around
/// the call: hashing the next item, or a Python interpreter's loop. On the Intel Xeon of
/// docs/benchmarks.md's filter runs V-X, such lookups took much less time when the block
/// that missed was read as four 16-byte loads than as one 64-byte load (or two 32-byte
/// ones): 64-byte URL keys in Rust and Python's `in` over a filter of 10^7 items (the
/// figures are there; why the core waits longer for a wide load is not known here). In
/// cache it is the other way round, so batches, whose blocks were prefetched, keep the
/// one wide load, and so do single lookups into filters of at most `in_cache_bytes()`
/// (bits/blocks.rs).
/// The loads are volatile so that the compiler keeps them apart instead of merging them
/// into one wide load.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn load_halves_in_quarters(
    block: &Block,
) -> (std::arch::x86_64::__m256i, std::arch::x86_64::__m256i) {
    use std::arch::x86_64::{__m128i, _mm256_castsi128_si256, _mm256_inserti128_si256};
    let quarters = block.0.as_ptr().cast::<__m128i>();
    // SAFETY: a Block is 64 bytes aligned to 64: four aligned 16-byte quarters, each a
    // valid `__m128i` (any bits are).
    let [q0, q1, q2, q3] = [0, 1, 2, 3].map(|quarter| unsafe { quarters.add(quarter).read_volatile() });
    (
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(q0), q1),
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(q2), q3),
    )
}

/// The eight lane masks of a fingerprint (for the atomic filter, which sets lanes one
/// atomic OR at a time).
#[inline(always)]
pub(crate) fn masks(fingerprint: u32) -> [u64; BLOCK_WORDS] {
    scalar::masks(fingerprint)
}
