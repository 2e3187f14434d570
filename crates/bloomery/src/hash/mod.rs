//! Hashing: how an item becomes bytes ([`Funnel`], [`Sink`]) and how those bytes become
//! bit positions. There is one road for every filter: an item is funnelled to bytes, and
//! the same bytes are the same item everywhere (`"apple"`, `b"apple"` and
//! `String::from("apple")` alike, as Guava's UTF-8 string and byte funnels agree). Then:
//!
//! - the classic filter and the filters built on it hash the bytes with MurmurHash3 x64
//!   128 ([`murmur3_128`], Guava's `Hashing.murmur3_128()`) and derive k positions with
//!   [`mitz64_indices`];
//! - the blocked filter hashes them with XXH3-64 and the filter's stored seed
//!   ([`xxh3_64_item`]), a hash specified by the xxHash project and implemented in most
//!   languages, with the same output on every platform.

mod funnel;
mod murmur2;
mod murmur3;

pub use funnel::{Funnel, Sink, UnencodedChars, Utf16Units};
pub use murmur2::{murmur2_32, murmur64a};
pub use murmur3::{Murmur3_128, murmur3_128};

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The XXH3-64 hash (`XXH3_64bits_withSeed`) of `item`'s funnelled bytes with `seed`: the
/// blocked filter's item hash. Strings and byte slices are hashed in place; other items
/// are first funnelled into a buffer on the stack (64 bytes, then the heap).
///
/// ```
/// use bloomery::hash::xxh3_64_item;
/// use xxhash_rust::xxh3::xxh3_64_with_seed;
///
/// assert_eq!(xxh3_64_item("apple", 7), xxh3_64_with_seed(b"apple", 7));
/// assert_eq!(xxh3_64_item(&b"apple"[..], 7), xxh3_64_item("apple", 7));
/// assert_eq!(xxh3_64_item(&5u64, 0), xxh3_64_with_seed(&5u64.to_le_bytes(), 0));
/// ```
#[inline(always)]
pub fn xxh3_64_item<T: Funnel + ?Sized>(item: &T, seed: u64) -> u64 {
    xxh3_64_funnelled::<true, T>(item, seed)
}

/// As [`xxh3_64_item`], without its test for seed 0 (the same hash): for a caller that
/// has taken seed 0 down a road of its own already (the split-block filter's).
#[inline(always)]
pub(crate) fn xxh3_64_item_seeded<T: Funnel + ?Sized>(item: &T, seed: u64) -> u64 {
    xxh3_64_funnelled::<false, T>(item, seed)
}

/// XXH3-64 of `item`'s funnelled bytes, borrowed where the item holds them in one piece
/// (a string, a byte slice), else gathered in a [`FunnelBuffer`]; with seed 0 hashed as a
/// constant when `TEST_SEED0` ([`xxh3_64_bytes`]). No closure: the compiler kept a closure
/// here out of line, a call per item.
#[inline(always)]
fn xxh3_64_funnelled<const TEST_SEED0: bool, T: Funnel + ?Sized>(item: &T, seed: u64) -> u64 {
    if let Some(bytes) = item.contiguous_bytes() {
        return xxh3_64_of::<TEST_SEED0>(bytes, seed);
    }
    let mut buffer = FunnelBuffer::new();
    item.funnel(&mut buffer);
    xxh3_64_of::<TEST_SEED0>(buffer.as_slice(), seed)
}

#[inline(always)]
fn xxh3_64_of<const TEST_SEED0: bool>(bytes: &[u8], seed: u64) -> u64 {
    if TEST_SEED0 {
        xxh3_64_bytes(bytes, seed)
    } else {
        xxh3_64_with_seed(bytes, seed)
    }
}

/// [`xxh3_64_item`] of a byte string, always inlined: for loops that hash one short item
/// after another (the Python package's batches), where a call per item also costs the
/// registers the loop must save around it.
///
/// Seed 0 (the filters' default seed) is hashed as a constant, so that the compiler folds
/// the seeded secret into the instructions. With a seed known only at run time it computed
/// the secret's words into vector registers once and mixed each 64-byte key (the
/// benchmark's URL keys) in SSE code that moved every word between vector and general
/// registers, which on an Intel Xeon made their lookups slower (docs/benchmarks.md, runs T
/// and T2). The hash is the same either way.
///
/// ```
/// use bloomery::hash::{xxh3_64_bytes, xxh3_64_item};
/// use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};
///
/// assert_eq!(xxh3_64_bytes(b"apple", 7), xxh3_64_item("apple", 7));
/// let url = b"https://example.com/a/path/of/more/than/seventeen/bytes";
/// assert_eq!(xxh3_64_bytes(url, 0), xxh3_64(url));
/// assert_eq!(xxh3_64_bytes(url, 9), xxh3_64_with_seed(url, 9));
/// ```
#[inline(always)]
pub fn xxh3_64_bytes(bytes: &[u8], seed: u64) -> u64 {
    if seed == 0 {
        xxh3_64_with_seed(bytes, 0)
    } else {
        seeded();
        xxh3_64_with_seed(bytes, seed)
    }
}

/// Marks the branch that calls it as the unlikely one (an empty cold function, as
/// hashbrown's `likely`/`unlikely` do), so that the compiler keeps seed 0 a branch of its
/// own: for 8-byte keys it had computed both arms and picked one with a conditional move,
/// so every item paid for deriving the seeded secret.
#[cold]
#[inline]
fn seeded() {}

/// A [`Sink`] that collects an item's bytes: on the stack up to 64 bytes (every integer
/// and most keys), on the heap beyond.
pub(crate) struct FunnelBuffer {
    inline: [u8; 64],
    len: usize,
    spilled: Vec<u8>,
}

impl FunnelBuffer {
    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            inline: [0; 64],
            len: 0,
            spilled: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.spilled.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spilled
        }
    }
}

impl FunnelBuffer {
    /// [`Sink::put_bytes`] past the inline 64 bytes: kept out of line, so that the common
    /// case (an integer's few bytes) inlines into the hash and the compiler knows the
    /// length it hashes.
    #[cold]
    #[inline(never)]
    fn put_spilled(&mut self, bytes: &[u8]) {
        if self.spilled.is_empty() {
            self.spilled.reserve(self.len + bytes.len());
            self.spilled.extend_from_slice(&self.inline[..self.len]);
        }
        self.spilled.extend_from_slice(bytes);
    }
}

impl Sink for FunnelBuffer {
    #[inline(always)]
    fn put_bytes(&mut self, bytes: &[u8]) {
        if self.spilled.is_empty()
            && let Some(room) = self.inline.get_mut(self.len..self.len + bytes.len())
        {
            room.copy_from_slice(bytes);
            self.len += bytes.len();
            return;
        }
        self.put_spilled(bytes);
    }
}

/// The bytes `item` funnels to, as a vector.
///
/// ```
/// assert_eq!(bloomery::hash::funnel_bytes(&1i32), [1, 0, 0, 0]);
/// ```
pub fn funnel_bytes<T: Funnel + ?Sized>(item: &T) -> Vec<u8> {
    if let Some(bytes) = item.contiguous_bytes() {
        return bytes.to_vec();
    }
    let mut buffer = FunnelBuffer::new();
    item.funnel(&mut buffer);
    buffer.as_slice().to_vec()
}

/// One step of splitmix64 (Steele, Lea & Flood, "Fast Splittable Pseudorandom Number
/// Generators", 2014): advances `state` by the golden-ratio increment and returns the
/// mixed value. Used for the blocked filter's salts and the retouched filter's choices.
///
/// ```
/// let mut state = 0;
/// assert_eq!(bloomery::hash::splitmix64(&mut state), 0xe220_a839_7b1d_cdaf);
/// ```
#[inline]
pub const fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The MurmurHash3 x64 128-bit hash (seed 0) of `item`'s funnelled bytes, as `(h1, h2)`:
/// exactly what Guava's `Hashing.murmur3_128().hashObject(item, funnel)` gives.
///
/// ```
/// use bloomery::hash::{hash_item, murmur3_128};
///
/// assert_eq!(hash_item("abc"), murmur3_128(b"abc"));
/// assert_eq!(hash_item(&7i64), murmur3_128(&7i64.to_le_bytes()));
/// ```
#[inline]
pub fn hash_item<T: Funnel + ?Sized>(item: &T) -> (u64, u64) {
    let mut hasher = Murmur3_128::new();
    item.funnel(&mut hasher);
    hasher.finish128()
}

/// Guava's MITZ_64 bit positions for a murmur3_128 hash `(h1, h2)`:
/// `((h1 + i·h2) & i64::MAX) % num_bits` for `i` in `0..num_hashes`, with wrapping sums
/// (Kirsch-Mitzenmacher double hashing). Every filter here that uses k positions over one
/// array derives them with this.
///
/// ```
/// use bloomery::hash::{Modulus, mitz64_indices};
///
/// let positions: Vec<u64> = mitz64_indices((10, 7), 3, Modulus::new(100)).collect();
/// assert_eq!(positions, [10, 17, 24]);
/// ```
#[inline]
pub fn mitz64_indices(hash: (u64, u64), num_hashes: u32, num_bits: Modulus) -> impl Iterator<Item = u64> {
    let (h1, h2) = hash;
    (0..u64::from(num_hashes))
        .map(move |i| num_bits.reduce(h1.wrapping_add(i.wrapping_mul(h2)) & i64::MAX as u64))
}

/// `value % divisor` for values below 2^63 without a division instruction: a 64×64-bit
/// high multiply by the precomputed reciprocal floor((2^64 - 1) / d) gives the quotient or
/// one less, and one conditional subtraction corrects the remainder (Granlund &
/// Montgomery, "Division by Invariant Integers using Multiplication", 1994). Exact, unlike
/// Lemire's multiply-shift range reduction, because Guava's bit positions are defined by
/// `%`. A 64-bit `div` costs 14-90 cycles depending on the CPU; this is two multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modulus {
    divisor: u64,
    reciprocal: u64,
}

impl Modulus {
    /// A modulus by `divisor`. Panics if `divisor` is 0.
    pub const fn new(divisor: u64) -> Self {
        assert!(divisor > 0, "modulus by zero");
        Self {
            divisor,
            reciprocal: u64::MAX / divisor,
        }
    }

    /// The divisor.
    #[inline]
    pub const fn divisor(self) -> u64 {
        self.divisor
    }

    /// `value % divisor`, for `value < 2^63` (the quotient estimate is then off by at most
    /// one: (2^64/d - reciprocal) < 2 and value < 2^63 keep the error below 1).
    #[inline]
    pub fn reduce(self, value: u64) -> u64 {
        debug_assert!(value <= i64::MAX as u64);
        // Wrapping operations that cannot wrap (quotient · divisor ≤ value, and the
        // subtraction of the divisor is guarded), so overflow-checked builds carry no
        // checks on this path, which every classic lookup takes k times.
        let quotient = (u128::from(value).wrapping_mul(u128::from(self.reciprocal)) >> 64) as u64;
        let remainder = value.wrapping_sub(quotient.wrapping_mul(self.divisor));
        if remainder >= self.divisor {
            remainder.wrapping_sub(self.divisor)
        } else {
            remainder
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_funnel_buffer_spills_to_the_heap_in_order() {
        let mut buffer = FunnelBuffer::new();
        let long: Vec<u8> = (0..200).map(|i| i as u8).collect();
        buffer.put_bytes(&long[..60]);
        buffer.put_bytes(&long[60..70]);
        buffer.put_bytes(&long[70..]);
        assert_eq!(buffer.as_slice(), &long[..]);
        struct Pair(i64, i64);
        impl Funnel for Pair {
            fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
                into.put_i64(self.0);
                into.put_i64(self.1);
            }
        }
        let expected = [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(xxh3_64_item(&Pair(1, 2), 3), xxh3_64_with_seed(&expected, 3));
    }

    #[test]
    fn positions_follow_guava_mitz_64() {
        // h1 = 2^63 - 2, h2 = 3: the second and third sums wrap past the sign bit, which is
        // cleared (not negated) before the modulo: 2^63 + 1 -> 1, 2^63 + 4 -> 4.
        let h1 = (1u64 << 63) - 2;
        let indices: Vec<u64> = mitz64_indices((h1, 3), 3, Modulus::new(1_000)).collect();
        assert_eq!(indices, [9_223_372_036_854_775_806 % 1_000, 1, 4]);
    }

    #[test]
    fn modulus_matches_the_remainder_operator() {
        let divisors = [
            1,
            2,
            3,
            7,
            64,
            640,
            9_600,
            95_850_624,
            (1 << 37) - 64,
            i64::MAX as u64,
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for &divisor in &divisors {
            let modulus = Modulus::new(divisor);
            let edges = [
                0,
                1,
                divisor - 1,
                divisor,
                divisor.saturating_add(1),
                i64::MAX as u64,
            ];
            for value in edges.into_iter().filter(|&v| v <= i64::MAX as u64) {
                assert_eq!(modulus.reduce(value), value % divisor, "{value} % {divisor}");
            }
            for _ in 0..100_000 {
                let value = splitmix64(&mut state) >> 1;
                assert_eq!(modulus.reduce(value), value % divisor, "{value} % {divisor}");
            }
        }
    }
}
