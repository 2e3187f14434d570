//! The portable kernel, and the reference the SIMD kernels are tested against: eight
//! 32-bit multiply-shifts pick one bit in each 64-bit lane of the block.

use super::{BLOCK_WORDS, Block, SALTS};

/// The eight lane masks for `fingerprint`: lane i gets bit `(fingerprint · SALTS[i]) >> 26`,
/// the top 6 bits of a 32-bit product, i.e. a position in 0..64.
#[inline(always)]
pub(super) fn masks(fingerprint: u32) -> [u64; BLOCK_WORDS] {
    std::array::from_fn(|lane| 1u64 << (fingerprint.wrapping_mul(SALTS[lane]) >> 26))
}

/// Sets the item's bits; returns whether any was 0.
#[inline(always)]
pub(super) fn insert(block: &mut Block, fingerprint: u32) -> bool {
    let masks = masks(fingerprint);
    let mut missing = 0;
    for (word, mask) in block.0.iter_mut().zip(masks) {
        missing |= mask & !*word;
        *word |= mask;
    }
    missing != 0
}

/// Whether all the item's bits are set.
#[inline(always)]
pub(super) fn contains(block: &Block, fingerprint: u32) -> bool {
    let masks = masks(fingerprint);
    let mut missing = 0;
    for (word, mask) in block.0.iter().zip(masks) {
        missing |= mask & !word;
    }
    missing == 0
}
