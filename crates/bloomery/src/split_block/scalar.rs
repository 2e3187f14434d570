//! The portable kernel, and the reference the AVX2 kernel is tested against: the spec's
//! `mask`, eight 32-bit multiply-shifts that pick one bit in each word of the block.

use super::kernel::{BLOCK_WORDS, SALTS, SplitBlock};
use super::kernel::{batch_contains, batch_insert, block_of, block_of_mut, key};

/// The spec's `mask(key)`: word i gets bit `(key · SALTS[i] mod 2^32) >> 27`, the top 5
/// bits of a 32-bit product, a position in 0..32.
#[inline(always)]
pub(crate) fn mask(key: u32) -> [u32; BLOCK_WORDS] {
    std::array::from_fn(|word| 1u32 << (key.wrapping_mul(SALTS[word]) >> 27))
}

/// The spec's `block_insert`; returns whether any bit was 0.
#[inline(always)]
pub(super) fn insert_block(block: &mut SplitBlock, key: u32) -> bool {
    let mut missing = 0;
    for (word, bit) in block.0.iter_mut().zip(mask(key)) {
        missing |= bit & !*word;
        *word |= bit;
    }
    missing != 0
}

/// The spec's `block_check`.
#[inline(always)]
pub(super) fn contains_block(block: &SplitBlock, key: u32) -> bool {
    let mut missing = 0;
    for (word, bit) in block.0.iter().zip(mask(key)) {
        missing |= bit & !word;
    }
    missing == 0
}

/// The spec's `filter_insert`; returns whether any bit changed.
#[inline(always)]
pub(super) fn insert(blocks: &mut [SplitBlock], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    insert_block(unsafe { block_of_mut(blocks, hash) }, key(hash))
}

/// The spec's `filter_check`.
#[inline(always)]
pub(super) fn contains(blocks: &[SplitBlock], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    contains_block(unsafe { block_of(blocks, hash) }, key(hash))
}

/// Adds every hash, prefetching ahead.
pub(super) fn insert_batch(blocks: &mut [SplitBlock], hashes: &[u64]) {
    batch_insert(blocks, hashes, insert_block);
}

/// Looks up every hash, prefetching ahead.
pub(super) fn contains_batch(blocks: &[SplitBlock], hashes: &[u64], results: &mut [bool]) {
    batch_contains(blocks, hashes, results, contains_block);
}
