//! Hashing: how an item becomes bytes ([`Funnel`], [`Sink`]) and how bytes become a
//! 128-bit hash ([`murmur3_128`], Guava's `Hashing.murmur3_128()`).

mod funnel;
mod murmur3;

pub use funnel::{Funnel, Sink, UnencodedChars, Utf16Units};
pub use murmur3::{Murmur3_128, murmur3_128};

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
        let quotient = ((u128::from(value) * u128::from(self.reciprocal)) >> 64) as u64;
        let remainder = value - quotient * self.divisor;
        if remainder >= self.divisor {
            remainder - self.divisor
        } else {
            remainder
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                // splitmix64
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                let value = (z ^ (z >> 31)) >> 1;
                assert_eq!(modulus.reduce(value), value % divisor, "{value} % {divisor}");
            }
        }
    }
}
