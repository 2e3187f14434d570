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
