//! MurmurHash3 x64 128-bit (Austin Appleby, public domain), seed 0, as Guava's
//! `Hashing.murmur3_128()`: the hash every Guava-compatible filter is built on.
//!
//! The state is two 64-bit lanes mixed 16 bytes at a time; the 0-15 byte tail is folded
//! in at the end, then the total length and a 64-bit finaliser (`fmix64`). The result is
//! the pair `(h1, h2)`; Guava's `HashCode.asBytes()` is `h1` then `h2`, each little-endian,
//! and its MITZ_64 strategy reads them back as `lowerEight`/`upperEight`.
//!
//! Why hand-written: a [`Funnel`](super::Funnel) feeds an item in pieces (an `i64`, then a
//! string, ...), so the hasher must be a streaming sink. The crates on crates.io are either
//! one-shot over a slice (`fastmurmur3`) or read through `std::io::Read` (`murmur3`); this
//! one buffers at most 15 bytes and hashes whole blocks straight from the caller's slice,
//! so a one-piece item (a string, a byte slice) costs the same as a one-shot call. It is
//! checked against every row of Guava's `murmur3_128.tsv` in `tests/guava_vectors.rs`.

use super::Sink;

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// A streaming MurmurHash3 x64 128-bit hasher with seed 0 (Guava's `murmur3_128()`).
///
/// ```
/// use bloomery::hash::{Murmur3_128, Sink};
///
/// let mut hasher = Murmur3_128::new();
/// hasher.put_bytes(b"hel");
/// hasher.put_bytes(b"lo");
/// // Pieces hash exactly like the whole.
/// assert_eq!(hasher.finish128(), bloomery::hash::murmur3_128(b"hello"));
/// ```
#[derive(Clone, Debug)]
pub struct Murmur3_128 {
    h1: u64,
    h2: u64,
    buffer: [u8; 16],
    buffered: usize,
    total_len: u64,
}

impl Default for Murmur3_128 {
    fn default() -> Self {
        Self::new()
    }
}

impl Murmur3_128 {
    /// A hasher with Guava's seed, 0.
    pub const fn new() -> Self {
        Self {
            h1: 0,
            h2: 0,
            buffer: [0; 16],
            buffered: 0,
            total_len: 0,
        }
    }

    #[inline(always)]
    fn mix_block(&mut self, k1: u64, k2: u64) {
        self.h1 ^= mix_k1(k1);
        self.h1 = self
            .h1
            .rotate_left(27)
            .wrapping_add(self.h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        self.h2 ^= mix_k2(k2);
        self.h2 = self
            .h2
            .rotate_left(31)
            .wrapping_add(self.h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }

    /// The 128-bit hash of everything put so far, as `(h1, h2)`.
    #[inline]
    pub fn finish128(&self) -> (u64, u64) {
        let mut h1 = self.h1;
        let mut h2 = self.h2;
        let tail = &self.buffer[..self.buffered];
        if tail.len() > 8 {
            h2 ^= mix_k2(read_partial_le(&tail[8..]));
        }
        if !tail.is_empty() {
            h1 ^= mix_k1(read_partial_le(&tail[..tail.len().min(8)]));
        }
        h1 ^= self.total_len;
        h2 ^= self.total_len;
        h1 = h1.wrapping_add(h2);
        h2 = h2.wrapping_add(h1);
        h1 = fmix64(h1);
        h2 = fmix64(h2);
        h1 = h1.wrapping_add(h2);
        h2 = h2.wrapping_add(h1);
        (h1, h2)
    }
}

impl Sink for Murmur3_128 {
    #[inline]
    fn put_bytes(&mut self, mut bytes: &[u8]) {
        self.total_len = self.total_len.wrapping_add(bytes.len() as u64);
        if self.buffered > 0 {
            let take = (16 - self.buffered).min(bytes.len());
            self.buffer[self.buffered..self.buffered + take].copy_from_slice(&bytes[..take]);
            self.buffered += take;
            bytes = &bytes[take..];
            if self.buffered < 16 {
                return;
            }
            let block = self.buffer;
            self.mix_block(read_u64_le(&block[..8]), read_u64_le(&block[8..]));
            self.buffered = 0;
        }
        let mut blocks = bytes.chunks_exact(16);
        for block in &mut blocks {
            self.mix_block(read_u64_le(&block[..8]), read_u64_le(&block[8..]));
        }
        let rest = blocks.remainder();
        self.buffer[..rest.len()].copy_from_slice(rest);
        self.buffered = rest.len();
    }
}

/// The MurmurHash3 x64 128-bit hash (seed 0) of `bytes`, as `(h1, h2)`.
///
/// ```
/// // Guava: Hashing.murmur3_128().hashBytes("hello".getBytes(UTF_8)).toString()
/// //        == "029bbd41b3a7d8cb191dae486a901e5b"
/// let (h1, h2) = bloomery::hash::murmur3_128(b"hello");
/// let mut bytes = [0u8; 16];
/// bytes[..8].copy_from_slice(&h1.to_le_bytes());
/// bytes[8..].copy_from_slice(&h2.to_le_bytes());
/// let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
/// assert_eq!(hex, "029bbd41b3a7d8cb191dae486a901e5b");
/// ```
#[inline]
pub fn murmur3_128(bytes: &[u8]) -> (u64, u64) {
    let mut hasher = Murmur3_128::new();
    hasher.put_bytes(bytes);
    hasher.finish128()
}

#[inline(always)]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline(always)]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

#[inline(always)]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[inline(always)]
fn read_u64_le(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

/// Up to 8 bytes as a little-endian integer, the missing high bytes zero.
#[inline(always)]
fn read_partial_le(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_hashes_to_zero() {
        assert_eq!(murmur3_128(b""), (0, 0));
    }

    #[test]
    fn any_split_of_the_input_gives_the_same_hash() {
        let data: Vec<u8> = (0u8..=100).collect();
        let whole = murmur3_128(&data);
        for first in 0..data.len() {
            for second in first..data.len() {
                let mut hasher = Murmur3_128::new();
                hasher.put_bytes(&data[..first]);
                hasher.put_bytes(&data[first..second]);
                hasher.put_bytes(&data[second..]);
                assert_eq!(hasher.finish128(), whole, "split at {first}, {second}");
            }
        }
    }
}
