//! The portable kernel, and the reference the SIMD kernels are tested against: eight
//! 32-bit multiply-shifts pick one bit in each 64-bit lane of the block.

use super::Block;
use super::kernel::{BLOCK_WORDS, SALTS};
use super::kernel::{batch_contains, batch_insert, block_of, block_of_mut, fingerprint};

/// The eight lane masks for `fingerprint`: lane i gets bit `(fingerprint · SALTS[i]) >> 26`,
/// the top 6 bits of a 32-bit product, i.e. a position in 0..64.
#[inline(always)]
pub(super) fn masks(fingerprint: u32) -> [u64; BLOCK_WORDS] {
    std::array::from_fn(|lane| 1u64 << (fingerprint.wrapping_mul(SALTS[lane]) >> 26))
}

/// Sets the item's bits; returns whether any was 0.
#[inline(always)]
pub(super) fn insert_block(block: &mut Block, fingerprint: u32) -> bool {
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
pub(super) fn contains_block(block: &Block, fingerprint: u32) -> bool {
    let masks = masks(fingerprint);
    let mut missing = 0;
    for (word, mask) in block.0.iter().zip(masks) {
        missing |= mask & !word;
    }
    missing == 0
}

/// Adds the item with `hash`; returns whether any bit changed.
#[inline(always)]
pub(super) fn insert(blocks: &mut [Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    insert_block(unsafe { block_of_mut(blocks, hash) }, fingerprint(hash))
}

/// Whether the item with `hash` may be present.
#[inline(always)]
pub(super) fn contains(blocks: &[Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    contains_block(unsafe { block_of(blocks, hash) }, fingerprint(hash))
}

/// Adds every hash, prefetching ahead.
pub(super) fn insert_batch(blocks: &mut [Block], hashes: &[u64]) {
    batch_insert(blocks, hashes, insert_block);
}

/// Looks up every hash, prefetching ahead.
pub(super) fn contains_batch(blocks: &[Block], hashes: &[u64], results: &mut [bool]) {
    batch_contains(blocks, hashes, results, contains_block);
}
