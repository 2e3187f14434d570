//! The AVX2 kernel: the eight multiply-shifts in one `vpmulld` (salts interleaved so that
//! two 64-bit shifts put each lane's position in place), and a lookup that shifts each
//! lane right by its position and tests bit 0 of all eight with one `vptest`. Bit-identical
//! to `scalar.rs` (checked by the kernel tests in `mod.rs`).

use std::arch::x86_64::*;

use super::Block;
use super::kernel::SALTS_INTERLEAVED;
use super::kernel::{
    batch_contains, batch_insert, block_of, block_of_mut, fingerprint, load_halves_in_quarters,
};

/// The bit positions of lanes 0-3 and of lanes 4-7, one per 64-bit word.
#[inline]
#[target_feature(enable = "avx2")]
fn positions(fingerprint: u32) -> (__m256i, __m256i) {
    // SAFETY: SALTS_INTERLEAVED is 8 u32 = 32 bytes; loadu has no alignment requirement.
    let salts = unsafe { _mm256_loadu_si256(SALTS_INTERLEAVED.as_ptr().cast()) };
    // Word j: lane j's 32-bit product in the low half, lane j + 4's in the high half
    // (kernel.rs, SALTS_INTERLEAVED); a position is a product's top 6 bits.
    let products = _mm256_mullo_epi32(_mm256_set1_epi32(fingerprint as i32), salts);
    let low = _mm256_srli_epi64::<58>(_mm256_slli_epi64::<32>(products));
    let high = _mm256_srli_epi64::<58>(products);
    (low, high)
}

/// Sets the item's bits; returns whether any was 0.
#[inline]
#[target_feature(enable = "avx2")]
fn insert_block(block: &mut Block, fingerprint: u32) -> bool {
    let (low, high) = positions(fingerprint);
    let one = _mm256_set1_epi64x(1);
    let (mask_low, mask_high) = (_mm256_sllv_epi64(one, low), _mm256_sllv_epi64(one, high));
    let words = block.0.as_mut_ptr().cast::<__m256i>();
    // SAFETY: a Block is 64 bytes aligned to 64: two aligned 32-byte halves.
    unsafe {
        let current_low = _mm256_load_si256(words);
        let current_high = _mm256_load_si256(words.add(1));
        let present = _mm256_testc_si256(current_low, mask_low) & _mm256_testc_si256(current_high, mask_high);
        _mm256_store_si256(words, _mm256_or_si256(current_low, mask_low));
        _mm256_store_si256(words.add(1), _mm256_or_si256(current_high, mask_high));
        present == 0
    }
}

/// Whether all the item's bits are set in the block's lanes 0-3 (`current_low`) and 4-7
/// (`current_high`): each lane shifted right by its position has bit 0 set.
#[inline]
#[target_feature(enable = "avx2")]
fn test_lanes((current_low, current_high): (__m256i, __m256i), fingerprint: u32) -> bool {
    let (low, high) = positions(fingerprint);
    let shifted = _mm256_and_si256(
        _mm256_srlv_epi64(current_low, low),
        _mm256_srlv_epi64(current_high, high),
    );
    _mm256_testc_si256(shifted, _mm256_set1_epi64x(1)) != 0
}

/// The block's two halves in two 32-byte loads: for batches, whose blocks were prefetched.
#[inline]
#[target_feature(enable = "avx2")]
fn load_whole(block: &Block) -> (__m256i, __m256i) {
    let words = block.0.as_ptr().cast::<__m256i>();
    // SAFETY: as in `insert_block`.
    unsafe { (_mm256_load_si256(words), _mm256_load_si256(words.add(1))) }
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
    let block = unsafe { block_of(blocks, hash) };
    test_lanes(load_halves_in_quarters(block), fingerprint(hash))
}

/// As [`contains`], reading the block in one wide load: for filters small enough that
/// their blocks are usually in cache (`in_cache_bytes`, bits/blocks.rs).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn contains_in_cache(blocks: &[Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    let block = unsafe { block_of(blocks, hash) };
    test_lanes(load_whole(block), fingerprint(hash))
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
        test_lanes(load_whole(block), fingerprint)
    });
}
