//! The AVX2 kernel: a block is one 256-bit register. The spec's `mask` is one `vpmulld`
//! (eight 32-bit products), one `vpsrld` by 27 and one `vpsllvd` of ones; `block_check`
//! is one `vptest` (carry flag: every mask bit set), `block_insert` one `vpor` and store.
//! Bit-identical to `scalar.rs` (the kernel proptest in `mod.rs`).

use std::arch::x86_64::*;

use super::kernel::{SALTS, SplitBlock};
use super::kernel::{batch_contains, batch_insert, block_of, block_of_mut, key};

/// The spec's `mask(key)` in one register.
#[inline]
#[target_feature(enable = "avx2")]
fn mask(key: u32) -> __m256i {
    let salts = _mm256_setr_epi32(
        SALTS[0] as i32,
        SALTS[1] as i32,
        SALTS[2] as i32,
        SALTS[3] as i32,
        SALTS[4] as i32,
        SALTS[5] as i32,
        SALTS[6] as i32,
        SALTS[7] as i32,
    );
    let products = _mm256_mullo_epi32(_mm256_set1_epi32(key as i32), salts);
    _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_srli_epi32::<27>(products))
}

/// Sets the item's bits; returns whether any was 0.
#[inline]
#[target_feature(enable = "avx2")]
fn insert_block(block: &mut SplitBlock, key: u32) -> bool {
    let mask = mask(key);
    let words = block.0.as_mut_ptr().cast::<__m256i>();
    // SAFETY: a SplitBlock is 32 bytes aligned to 32: one aligned 256-bit load and store.
    unsafe {
        let current = _mm256_load_si256(words);
        _mm256_store_si256(words, _mm256_or_si256(current, mask));
        _mm256_testc_si256(current, mask) == 0
    }
}

/// Whether all the item's bits are set.
#[inline]
#[target_feature(enable = "avx2")]
fn contains_block(block: &SplitBlock, key: u32) -> bool {
    // SAFETY: as in `insert_block`.
    let current = unsafe { _mm256_load_si256(block.0.as_ptr().cast()) };
    _mm256_testc_si256(current, mask(key)) != 0
}

/// Adds the item with `hash`; returns whether any bit changed.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn insert(blocks: &mut [SplitBlock], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    insert_block(unsafe { block_of_mut(blocks, hash) }, key(hash))
}

/// Whether the item with `hash` may be present.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn contains(blocks: &[SplitBlock], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    contains_block(unsafe { block_of(blocks, hash) }, key(hash))
}

/// Adds every hash, prefetching ahead.
#[target_feature(enable = "avx2")]
pub(super) fn insert_batch(blocks: &mut [SplitBlock], hashes: &[u64]) {
    batch_insert(blocks, hashes, |block, key| insert_block(block, key));
}

/// Looks up every hash, prefetching ahead.
#[target_feature(enable = "avx2")]
pub(super) fn contains_batch(blocks: &[SplitBlock], hashes: &[u64], results: &mut [bool]) {
    batch_contains(blocks, hashes, results, |block, key| contains_block(block, key));
}
