//! The NEON kernel (aarch64, where NEON is always present): the eight multiply-shifts in
//! two `mul` of four 32-bit lanes, the masks built with four variable `ushl` of two 64-bit
//! lanes, the block tested four 128-bit quarters at a time. Bit-identical to `scalar.rs`:
//! the kernel proptest in `mod.rs` compares them on aarch64, and `scripts/check-neon.sh`
//! runs the same comparison on an x86-64 machine (cross-compiled, under qemu).
//!
//! The intrinsics are called inside `unsafe` blocks that newer compilers find partly
//! unnecessary (NEON arithmetic is safe where the feature is enabled); the blocks keep the
//! file building with older ones, such as the one `check-neon.sh` uses.
#![allow(unused_unsafe)]

use std::arch::aarch64::*;

use super::Block;
use super::kernel::SALTS;
use super::kernel::{batch_contains, batch_insert, block_of, block_of_mut, fingerprint};

/// The eight lane masks, as four vectors of two 64-bit lanes.
#[inline(always)]
fn masks(fingerprint: u32) -> [uint64x2_t; 4] {
    // SAFETY: SALTS is 8 u32; each load reads 4 of them. NEON is part of aarch64.
    unsafe {
        let fingerprint = vdupq_n_u32(fingerprint);
        let low = vshrq_n_u32::<26>(vmulq_u32(fingerprint, vld1q_u32(SALTS.as_ptr())));
        let high = vshrq_n_u32::<26>(vmulq_u32(fingerprint, vld1q_u32(SALTS.as_ptr().add(4))));
        let one = vdupq_n_u64(1);
        let shift = |positions: uint32x2_t| vshlq_u64(one, vreinterpretq_s64_u64(vmovl_u32(positions)));
        [
            shift(vget_low_u32(low)),
            shift(vget_high_u32(low)),
            shift(vget_low_u32(high)),
            shift(vget_high_u32(high)),
        ]
    }
}

/// Whether any lane of `vector` is non-zero.
#[inline(always)]
fn any(vector: uint64x2_t) -> bool {
    // SAFETY: NEON is part of aarch64.
    unsafe { vgetq_lane_u64::<0>(vector) | vgetq_lane_u64::<1>(vector) != 0 }
}

/// Sets the item's bits; returns whether any was 0.
#[inline(always)]
fn insert_block(block: &mut Block, fingerprint: u32) -> bool {
    let masks = masks(fingerprint);
    let words = block.0.as_mut_ptr();
    // SAFETY: a Block is eight u64s; quarter i covers words 2i and 2i + 1.
    unsafe {
        let mut missing = vdupq_n_u64(0);
        for (quarter, mask) in masks.into_iter().enumerate() {
            let address = words.add(2 * quarter);
            let current = vld1q_u64(address);
            missing = vorrq_u64(missing, vbicq_u64(mask, current));
            vst1q_u64(address, vorrq_u64(current, mask));
        }
        any(missing)
    }
}

/// Whether all the item's bits are set.
#[inline(always)]
fn contains_block(block: &Block, fingerprint: u32) -> bool {
    let masks = masks(fingerprint);
    let words = block.0.as_ptr();
    // SAFETY: as in `insert_block`.
    unsafe {
        let mut missing = vdupq_n_u64(0);
        for (quarter, mask) in masks.into_iter().enumerate() {
            missing = vorrq_u64(missing, vbicq_u64(mask, vld1q_u64(words.add(2 * quarter))));
        }
        !any(missing)
    }
}

/// Adds the item with `hash`; returns whether any bit changed.
#[inline]
pub(super) fn insert(blocks: &mut [Block], hash: u64) -> bool {
    // SAFETY: the kernel table is only called with blocks (kernel.rs, Ops).
    insert_block(unsafe { block_of_mut(blocks, hash) }, fingerprint(hash))
}

/// Whether the item with `hash` may be present.
#[inline]
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
