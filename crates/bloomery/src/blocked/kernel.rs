//! The one small interface behind which the block kernels live (see hashbrown's
//! `control/group`): a [`Block`] is one 64-byte cache line of eight 64-bit lanes, and a
//! [`Kernel`] sets or tests an item's eight bits in it. `scalar.rs` is the portable
//! reference; `avx2.rs` and `avx512.rs` are chosen at run time when the CPU has them.
//! aarch64 uses the scalar kernel, which the compiler vectorises with NEON.

use super::{avx2, avx512, scalar};

/// Lanes in a block.
pub(crate) const BLOCK_WORDS: usize = 8;

/// One cache line of filter bits: eight 64-bit lanes. An item sets one bit per lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Block(pub(crate) [u64; BLOCK_WORDS]);

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
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        salts[lane] = ((z >> 32) as u32) | 1;
        lane += 1;
    }
    salts
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Scalar,
    Avx2,
    Avx512,
}

/// Which implementation sets and tests bits in a block. All give identical bits and
/// answers; only speed differs. A `Kernel` other than [`Kernel::scalar`] can only be
/// obtained where the CPU supports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kernel(Kind);

impl Kernel {
    /// The portable kernel.
    pub const fn scalar() -> Self {
        Kernel(Kind::Scalar)
    }

    /// The fastest kernel this CPU supports.
    pub fn detect() -> Self {
        Self::available().last().copied().unwrap_or(Self::scalar())
    }

    /// Every kernel this CPU supports, slowest first (the scalar one is always there).
    pub fn available() -> Vec<Self> {
        let mut kernels = vec![Self::scalar()];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                kernels.push(Kernel(Kind::Avx2));
                if std::arch::is_x86_feature_detected!("avx512f") {
                    kernels.push(Kernel(Kind::Avx512));
                }
            }
        }
        kernels
    }

    /// The kernel's name: "scalar", "avx2" or "avx512".
    pub fn name(self) -> &'static str {
        match self.0 {
            Kind::Scalar => "scalar",
            Kind::Avx2 => "avx2",
            Kind::Avx512 => "avx512",
        }
    }

    /// Sets the fingerprint's bits in `block`; returns whether any was 0.
    #[inline(always)]
    pub(crate) fn insert(self, block: &mut Block, fingerprint: u32) -> bool {
        match self.0 {
            Kind::Scalar => scalar::insert(block, fingerprint),
            // SAFETY: Kind::Avx2 and Kind::Avx512 are only built by `available`, after the
            // CPU reported the features.
            #[cfg(target_arch = "x86_64")]
            Kind::Avx2 => unsafe { avx2::insert(block, fingerprint) },
            #[cfg(target_arch = "x86_64")]
            Kind::Avx512 => unsafe { avx512::insert(block, fingerprint) },
            #[cfg(not(target_arch = "x86_64"))]
            _ => scalar::insert(block, fingerprint),
        }
    }

    /// Whether all the fingerprint's bits are set in `block`.
    #[inline(always)]
    pub(crate) fn contains(self, block: &Block, fingerprint: u32) -> bool {
        match self.0 {
            Kind::Scalar => scalar::contains(block, fingerprint),
            // SAFETY: as in `insert`.
            #[cfg(target_arch = "x86_64")]
            Kind::Avx2 => unsafe { avx2::contains(block, fingerprint) },
            #[cfg(target_arch = "x86_64")]
            Kind::Avx512 => unsafe { avx512::contains(block, fingerprint) },
            #[cfg(not(target_arch = "x86_64"))]
            _ => scalar::contains(block, fingerprint),
        }
    }
}

/// The eight lane masks of a fingerprint (for the atomic filter, which sets lanes one
/// atomic OR at a time).
#[inline(always)]
pub(crate) fn masks(fingerprint: u32) -> [u64; BLOCK_WORDS] {
    scalar::masks(fingerprint)
}

/// Asks the CPU to start loading the cache line at `address` (a hint; never faults).
#[inline(always)]
pub(crate) fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint that never faults, whatever the address; SSE is part of
    // the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
