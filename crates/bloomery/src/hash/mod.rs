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
/// let positions: Vec<u64> = bloomery::hash::mitz64_indices((10, 7), 3, 100).collect();
/// assert_eq!(positions, [10, 17, 24]);
/// ```
#[inline]
pub fn mitz64_indices(hash: (u64, u64), num_hashes: u32, num_bits: u64) -> impl Iterator<Item = u64> {
    let (h1, h2) = hash;
    (0..u64::from(num_hashes))
        .map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) & i64::MAX as u64) % num_bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_guava_mitz_64() {
        // h1 = 2^63 - 2, h2 = 3: the second and third sums wrap past the sign bit, which is
        // cleared (not negated) before the modulo: 2^63 + 1 -> 1, 2^63 + 4 -> 4.
        let h1 = (1u64 << 63) - 2;
        let indices: Vec<u64> = mitz64_indices((h1, 3), 3, 1_000).collect();
        assert_eq!(indices, [9_223_372_036_854_775_806 % 1_000, 1, 4]);
    }
}
