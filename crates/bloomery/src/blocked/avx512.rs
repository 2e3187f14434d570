//! The AVX-512 kernel: as `avx2.rs`, but the eight lanes' positions come from one 512-bit
//! multiply and shift, and the block is one load. Selected only where the CPU reports AVX-512F; the
//! kernel tests compare it with `scalar.rs` wherever it can run.

use std::arch::x86_64::*;

use super::Block;
use super::kernel::SALTS_HIGH_HALVES;
use super::kernel::{batch_contains, batch_insert, block_of, block_of_mut, fingerprint};

/// The bit position of each of the eight lanes, one per 64-bit word.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn positions(fingerprint: u32) -> __m512i {
    // SAFETY: SALTS_HIGH_HALVES is 16 u32 = 64 bytes; loadu has no alignment requirement.
    let salts = unsafe { _mm512_loadu_si512(SALTS_HIGH_HALVES.as_ptr().cast()) };
    // Lane i's 32-bit product lands in the high half of word i (the low halves multiply a
    // zero salt); its top 6 bits are the position.
    let products = _mm512_mullo_epi32(_mm512_set1_epi32(fingerprint as i32), salts);
    _mm512_srli_epi64::<58>(products)
}

#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn masks(fingerprint: u32) -> __m512i {
    _mm512_sllv_epi64(_mm512_set1_epi64(1), positions(fingerprint))
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
        // A lane whose one mask bit is not yet set: `vptestnmq` in one instruction.
        let missing = _mm512_testn_epi64_mask(current, mask);
        _mm512_store_si512(words, _mm512_or_si512(current, mask));
        missing != 0
    }
}

/// Whether all the item's bits are set in the block's lanes `current`: each lane shifted
/// right by its position has bit 0 set.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn test_lanes(current: __m512i, fingerprint: u32) -> bool {
    let shifted = _mm512_srlv_epi64(current, positions(fingerprint));
    _mm512_testn_epi64_mask(shifted, _mm512_set1_epi64(1)) == 0
}

/// The block in one 64-byte load: for batches, whose blocks were prefetched.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn load_whole(block: &Block) -> __m512i {
    // SAFETY: a Block is 64 bytes aligned to 64.
    unsafe { _mm512_load_si512(block.0.as_ptr().cast()) }
}

/// The block in four 16-byte loads: for single lookups, whose block is usually not in
/// cache (see `super::kernel::load_halves_in_quarters`).
#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn load_in_quarters(block: &Block) -> __m512i {
    let (low, high) = super::kernel::load_halves_in_quarters(block);
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high)
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
    let block = unsafe { block_of(blocks, hash) };
    test_lanes(load_in_quarters(block), fingerprint(hash))
}

/// As [`contains`], reading the block in one wide load: for filters small enough that
/// their blocks are usually in cache (`in_cache_bytes`, bits/blocks.rs).
#[inline]
#[target_feature(enable = "avx2,avx512f")]
pub(super) fn contains_in_cache(blocks: &[Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    let block = unsafe { block_of(blocks, hash) };
    test_lanes(load_whole(block), fingerprint(hash))
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
        test_lanes(load_whole(block), fingerprint)
    });
}
