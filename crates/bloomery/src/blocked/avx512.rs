//! The AVX-512 kernel: as `avx2.rs`, but the eight 64-bit lane masks are one 512-bit
//! register and the block one load. Selected only where the CPU reports AVX-512F; the
//! kernel tests compare it with `scalar.rs` wherever it can run.

use std::arch::x86_64::*;

use super::Block;
use super::kernel::SALTS;
use super::kernel::{batch_contains, batch_insert, block_of, block_of_mut, fingerprint};

#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn masks(fingerprint: u32) -> __m512i {
    // SAFETY: SALTS is 8 u32 = 32 bytes; loadu has no alignment requirement.
    let salts = unsafe { _mm256_loadu_si256(SALTS.as_ptr().cast()) };
    let products = _mm256_mullo_epi32(_mm256_set1_epi32(fingerprint as i32), salts);
    let positions = _mm512_cvtepu32_epi64(_mm256_srli_epi32::<26>(products));
    _mm512_sllv_epi64(_mm512_set1_epi64(1), positions)
}

/// Sets the item's bits; returns whether any was 0.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn insert_block(block: &mut Block, fingerprint: u32) -> bool {
    let mask = masks(fingerprint);
    let words = block.0.as_mut_ptr().cast::<__m512i>();
    // SAFETY: a Block is 64 bytes aligned to 64.
    unsafe {
        let current = _mm512_load_si512(words);
        let missing = _mm512_andnot_si512(current, mask);
        _mm512_store_si512(words, _mm512_or_si512(current, mask));
        _mm512_test_epi64_mask(missing, missing) != 0
    }
}

/// Whether all the item's bits are set.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn contains_block(block: &Block, fingerprint: u32) -> bool {
    let mask = masks(fingerprint);
    // SAFETY: a Block is 64 bytes aligned to 64.
    let current = unsafe { _mm512_load_si512(block.0.as_ptr().cast()) };
    let missing = _mm512_andnot_si512(current, mask);
    _mm512_test_epi64_mask(missing, missing) == 0
}

/// Adds the item with `hash`; returns whether any bit changed.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
pub(super) fn insert(blocks: &mut [Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    insert_block(unsafe { block_of_mut(blocks, hash) }, fingerprint(hash))
}

/// Whether the item with `hash` may be present.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
pub(super) fn contains(blocks: &[Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    contains_block(unsafe { block_of(blocks, hash) }, fingerprint(hash))
}

/// Adds every hash, prefetching ahead.
#[target_feature(enable = "avx2,avx512f")]
pub(super) fn insert_batch(blocks: &mut [Block], hashes: &[u64]) {
    batch_insert(blocks, hashes, |block, fingerprint| {
        insert_block(block, fingerprint)
    });
}

/// Looks up every hash, prefetching ahead.
#[target_feature(enable = "avx2,avx512f")]
pub(super) fn contains_batch(blocks: &[Block], hashes: &[u64], results: &mut [bool]) {
    batch_contains(blocks, hashes, results, |block, fingerprint| {
        contains_block(block, fingerprint)
    });
}
