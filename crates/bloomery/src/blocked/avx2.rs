//! The AVX2 kernel: the eight multiply-shifts in one `vpmulld`, the masks built with two
//! `vpsllvq`, the block tested with two `vptest`. Bit-identical to `scalar.rs` (checked
//! by the kernel tests in `mod.rs`).

use std::arch::x86_64::*;

use super::Block;
use super::kernel::SALTS;
use super::kernel::{batch_contains, batch_insert, block_of, block_of_mut, fingerprint};

#[inline]
#[target_feature(enable = "avx2")]
fn masks(fingerprint: u32) -> (__m256i, __m256i) {
    // SAFETY: SALTS is 8 u32 = 32 bytes; loadu has no alignment requirement.
    let salts = unsafe { _mm256_loadu_si256(SALTS.as_ptr().cast()) };
    let products = _mm256_mullo_epi32(_mm256_set1_epi32(fingerprint as i32), salts);
    let positions = _mm256_srli_epi32::<26>(products);
    let low = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(positions));
    let high = _mm256_cvtepu32_epi64(_mm256_extracti128_si256::<1>(positions));
    let one = _mm256_set1_epi64x(1);
    (_mm256_sllv_epi64(one, low), _mm256_sllv_epi64(one, high))
}

/// Sets the item's bits; returns whether any was 0.
#[inline]
#[target_feature(enable = "avx2")]
fn insert_block(block: &mut Block, fingerprint: u32) -> bool {
    let (mask_low, mask_high) = masks(fingerprint);
    let words = block.0.as_mut_ptr().cast::<__m256i>();
    // SAFETY: a Block is 64 bytes aligned to 64: two aligned 32-byte halves.
    unsafe {
        let low = _mm256_load_si256(words);
        let high = _mm256_load_si256(words.add(1));
        let present = _mm256_testc_si256(low, mask_low) & _mm256_testc_si256(high, mask_high);
        _mm256_store_si256(words, _mm256_or_si256(low, mask_low));
        _mm256_store_si256(words.add(1), _mm256_or_si256(high, mask_high));
        present == 0
    }
}

/// Whether all the item's bits are set.
#[inline]
#[target_feature(enable = "avx2")]
fn contains_block(block: &Block, fingerprint: u32) -> bool {
    let (mask_low, mask_high) = masks(fingerprint);
    let words = block.0.as_ptr().cast::<__m256i>();
    // SAFETY: as in `insert`.
    unsafe {
        let low = _mm256_load_si256(words);
        let high = _mm256_load_si256(words.add(1));
        _mm256_testc_si256(low, mask_low) & _mm256_testc_si256(high, mask_high) != 0
    }
}

/// Adds the item with `hash`; returns whether any bit changed.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn insert(blocks: &mut [Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    insert_block(unsafe { block_of_mut(blocks, hash) }, fingerprint(hash))
}

/// Whether the item with `hash` may be present.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn contains(blocks: &[Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    contains_block(unsafe { block_of(blocks, hash) }, fingerprint(hash))
}

/// Adds every hash, prefetching ahead.
#[target_feature(enable = "avx2")]
pub(super) fn insert_batch(blocks: &mut [Block], hashes: &[u64]) {
    batch_insert(blocks, hashes, |block, fingerprint| {
        insert_block(block, fingerprint)
    });
}

/// Looks up every hash, prefetching ahead.
#[target_feature(enable = "avx2")]
pub(super) fn contains_batch(blocks: &[Block], hashes: &[u64], results: &mut [bool]) {
    batch_contains(blocks, hashes, results, |block, fingerprint| {
        contains_block(block, fingerprint)
    });
}
