//! The one small interface behind which the split-block kernels live: a [`SplitBlock`] is
//! Parquet's 256-bit block of eight 32-bit words, and a [`Kernel`] sets or tests an item's
//! eight bits in it. `scalar.rs` is the portable reference; `avx2.rs` holds a block in one
//! 256-bit register and is chosen, once per process, when the CPU has AVX2. Other CPUs
//! (aarch64 included) use the scalar kernel, whose eight independent multiply-shifts the
//! compiler vectorizes for the target's baseline.

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::scalar;
pub use crate::bits::blocks::BlockKernel;
use crate::bits::blocks::Ops;
pub(crate) use crate::bits::blocks::{
    batch_contains, batch_insert, block_key as key, block_of, block_of_mut,
};

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

/// The split-block filter's kernel: [`BlockKernel`] over Parquet's 256-bit
/// [`SplitBlock`]s.
pub type Kernel = BlockKernel<SplitBlock>;

static SCALAR: Ops<SplitBlock> = Ops {
    insert: scalar::insert,
    contains: scalar::contains,
    insert_batch: scalar::insert_batch,
    contains_batch: scalar::contains_batch,
};

#[cfg(target_arch = "x86_64")]
static AVX2: Ops<SplitBlock> = Ops {
    insert: avx2::insert,
    contains: avx2::contains,
    insert_batch: avx2::insert_batch,
    contains_batch: avx2::contains_batch,
};

impl BlockKernel<SplitBlock> {
    /// The portable kernel.
    pub const fn scalar() -> Self {
        // SAFETY: the scalar kernel needs no CPU feature.
        unsafe { BlockKernel::new("scalar", &SCALAR) }
    }

    /// The fastest kernel this CPU supports, detected once per process; the environment
    /// variable `BLOOMERY_KERNEL=scalar` picks the portable one (to measure it).
    pub fn detect() -> Self {
        static DETECTED: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| Self::choose(&Self::available()).unwrap_or(Self::scalar()))
    }

    /// Every kernel this CPU supports, slowest first (the scalar one is always there).
    pub fn available() -> Vec<Self> {
        let mut kernels = vec![Self::scalar()];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU reported AVX2.
            kernels.push(unsafe { BlockKernel::new("avx2", &AVX2) });
        }
        kernels
    }
}
