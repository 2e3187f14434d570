//! How an item becomes bytes: the [`Funnel`] idea from Guava.
//!
//! A Bloom filter hashes bytes, not values, so every item type says which bytes stand for
//! it. Two services share a filter only if they funnel an item to the same bytes, so the
//! built-in funnels are Guava's, byte for byte:
//!
//! | Rust item | Guava call | bytes |
//! |---|---|---|
//! | `str`, `String` | `putString(s, UTF_8)` | the UTF-8 bytes |
//! | [`UnencodedChars`], [`Utf16Units`] | `putUnencodedChars(s)` | each UTF-16 code unit, 2 bytes little-endian |
//! | `i32`, `u32` | `putInt` | 4 bytes little-endian |
//! | `i64`, `u64` | `putLong` | 8 bytes little-endian |
//! | `[u8]`, `Vec<u8>`, `[u8; N]` | `putBytes` | as they are |
//!
//! Note that a string and its UTF-16 form hash differently, as they do in Guava: pick the
//! funnel the Java side uses (`Funnels.stringFunnel(UTF_8)` or `Funnels.unencodedCharsFunnel()`).
//!
//! An integer's width is part of the item: a bare literal such as `5` is an `i32` in Rust,
//! 4 bytes, while a Python `int`, the CLI's `--format long` and Guava's `Long` are 8. Write
//! `5i64` or `5u64` for a filter shared with them:
//!
//! ```
//! use bloomery::BlockedBloomFilter;
//!
//! let mut filter = BlockedBloomFilter::with_fpp(1000, 0.01)?;
//! filter.insert(&5u64); // 8 bytes: Python's 5, `bloomery add -f long 5`
//! assert!(filter.contains(&5i64)); // the same 8 bytes
//! assert!(!filter.contains(&5)); // an i32: 4 bytes, another item
//! # Ok::<(), bloomery::Error>(())
//! ```

/// Where a [`Funnel`] puts an item's bytes: Guava's `PrimitiveSink`.
///
/// Only [`put_bytes`](Sink::put_bytes) is required; the typed methods encode as Guava does
/// (little-endian integers), so a custom funnel written with them matches a Java `Funnel`
/// written with the same calls.
pub trait Sink {
    /// Appends raw bytes (Guava `putBytes`).
    fn put_bytes(&mut self, bytes: &[u8]);

    /// Appends one byte (Guava `putByte`).
    #[inline]
    fn put_u8(&mut self, value: u8) {
        self.put_bytes(&[value]);
    }

    /// Appends `1` for true, `0` for false (Guava `putBoolean`).
    #[inline]
    fn put_bool(&mut self, value: bool) {
        self.put_u8(u8::from(value));
    }

    /// Appends 2 bytes little-endian (Guava `putShort`).
    #[inline]
    fn put_i16(&mut self, value: i16) {
        self.put_bytes(&value.to_le_bytes());
    }

    /// Appends 4 bytes little-endian (Guava `putInt`).
    #[inline]
    fn put_i32(&mut self, value: i32) {
        self.put_bytes(&value.to_le_bytes());
    }

    /// Appends 8 bytes little-endian (Guava `putLong`).
    #[inline]
    fn put_i64(&mut self, value: i64) {
        self.put_bytes(&value.to_le_bytes());
    }

    /// Appends the IEEE 754 bits, 8 bytes little-endian (Guava `putDouble`).
    #[inline]
    fn put_f64(&mut self, value: f64) {
        self.put_bytes(&value.to_bits().to_le_bytes());
    }

    /// Appends the UTF-8 bytes of `s` (Guava `putString(s, UTF_8)`).
    #[inline]
    fn put_str(&mut self, s: &str) {
        self.put_bytes(s.as_bytes());
    }

    /// Appends each UTF-16 code unit of `s`, 2 bytes little-endian (Guava `putUnencodedChars`).
    #[inline]
    fn put_unencoded_chars(&mut self, s: &str) {
        for unit in s.encode_utf16() {
            self.put_bytes(&unit.to_le_bytes());
        }
    }
}

/// A type whose values can be put into a Bloom filter: it writes the bytes that stand for
/// a value into a [`Sink`] (Guava's `Funnel`).
///
/// Implement it for your own types by putting each field that makes up the identity, in a
/// fixed order. The same calls in a Java `Funnel` give the same bits:
///
/// ```
/// use bloomery::{BloomFilter, Funnel, Sink};
///
/// struct Person {
///     id: i64,
///     name: String,
/// }
///
/// // Java: (person, into) -> into.putLong(person.id).putString(person.name, UTF_8)
/// impl Funnel for Person {
///     fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
///         into.put_i64(self.id);
///         into.put_str(&self.name);
///     }
/// }
///
/// let mut filter = BloomFilter::with_fpp(1000, 0.01)?;
/// filter.insert(&Person { id: 7, name: "Ada".into() });
/// assert!(filter.contains(&Person { id: 7, name: "Ada".into() }));
/// # Ok::<(), bloomery::Error>(())
/// ```
pub trait Funnel {
    /// Writes the bytes that stand for `self` into `into`.
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S);

    /// The bytes [`funnel`](Funnel::funnel) writes, when they already lie in memory as one
    /// slice (strings and byte containers), so a hasher can read them in place instead of
    /// collecting them. Implementations that return `Some` must return exactly those bytes.
    #[inline]
    fn contiguous_bytes(&self) -> Option<&[u8]> {
        None
    }
}

impl<T: Funnel + ?Sized> Funnel for &T {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        (**self).funnel(into);
    }

    #[inline]
    fn contiguous_bytes(&self) -> Option<&[u8]> {
        (**self).contiguous_bytes()
    }
}

impl Funnel for str {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_str(self);
    }

    #[inline]
    fn contiguous_bytes(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}

impl Funnel for String {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_str(self);
    }

    #[inline]
    fn contiguous_bytes(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}

impl Funnel for [u8] {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_bytes(self);
    }

    #[inline]
    fn contiguous_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl<const N: usize> Funnel for [u8; N] {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_bytes(self);
    }

    #[inline]
    fn contiguous_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl Funnel for Vec<u8> {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_bytes(self);
    }

    #[inline]
    fn contiguous_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl Funnel for i32 {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_i32(*self);
    }
}

/// The same bytes as the `i32` with the same bits (Guava has no unsigned types).
impl Funnel for u32 {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_i32(*self as i32);
    }
}

impl Funnel for i64 {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_i64(*self);
    }
}

/// The same bytes as the `i64` with the same bits (Guava has no unsigned types).
impl Funnel for u64 {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_i64(*self as i64);
    }
}

/// A string funnelled as its UTF-16 code units (Guava's `Funnels.unencodedCharsFunnel()`),
/// for filters shared with Java code that uses that funnel.
///
/// ```
/// use bloomery::{BloomFilter, UnencodedChars};
///
/// let mut filter = BloomFilter::with_fpp(100, 0.01)?;
/// filter.insert(&UnencodedChars("naïve 🦀"));
/// assert!(filter.contains(&UnencodedChars("naïve 🦀")));
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnencodedChars<'a>(pub &'a str);

impl Funnel for UnencodedChars<'_> {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        into.put_unencoded_chars(self.0);
    }
}

/// UTF-16 code units as they are (Java `char`s, unpaired surrogates included), funnelled
/// like Guava's `putUnencodedChars`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Utf16Units<'a>(pub &'a [u16]);

impl Funnel for Utf16Units<'_> {
    #[inline]
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        for unit in self.0 {
            into.put_bytes(&unit.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that records the bytes, to check each funnel's encoding.
    #[derive(Default)]
    struct Recorder(Vec<u8>);

    impl Sink for Recorder {
        fn put_bytes(&mut self, bytes: &[u8]) {
            self.0.extend_from_slice(bytes);
        }
    }

    fn bytes_of<T: Funnel + ?Sized>(item: &T) -> Vec<u8> {
        let mut recorder = Recorder::default();
        item.funnel(&mut recorder);
        recorder.0
    }

    #[test]
    fn integers_are_little_endian() {
        assert_eq!(bytes_of(&0x0102_0304i32), [4, 3, 2, 1]);
        assert_eq!(bytes_of(&-1i64), [0xff; 8]);
        assert_eq!(bytes_of(&u64::MAX), bytes_of(&-1i64));
        assert_eq!(bytes_of(&u32::MAX), bytes_of(&-1i32));
    }

    #[test]
    fn strings_are_utf8_and_unencoded_chars_are_utf16_le() {
        assert_eq!(bytes_of("é"), [0xc3, 0xa9]);
        assert_eq!(bytes_of(&UnencodedChars("é")), [0xe9, 0x00]);
        // U+1F980 is the surrogate pair D83E DD80.
        assert_eq!(bytes_of(&UnencodedChars("🦀")), [0x3e, 0xd8, 0x80, 0xdd]);
        assert_eq!(bytes_of(&Utf16Units(&[0xd83e, 0xdd80])), [0x3e, 0xd8, 0x80, 0xdd]);
    }

    #[test]
    fn contiguous_bytes_are_the_funnelled_bytes() {
        fn check<T: Funnel + ?Sized>(item: &T) {
            if let Some(bytes) = item.contiguous_bytes() {
                assert_eq!(bytes, bytes_of(item));
            }
        }
        check("apple");
        check(&String::from("pear"));
        check(&b"fig"[..]);
        check(&vec![1u8, 2]);
        check(&[7u8; 3]);
        check(&&"nested");
        assert_eq!(7u64.contiguous_bytes(), None);
    }

    #[test]
    fn byte_containers_funnel_their_contents() {
        assert_eq!(bytes_of(&[1u8, 2, 3]), [1, 2, 3]);
        assert_eq!(bytes_of(&vec![1u8, 2, 3]), [1, 2, 3]);
        assert_eq!(bytes_of(&b"ab"[..]), *b"ab");
        assert_eq!(bytes_of(&String::from("ab")), bytes_of("ab"));
    }
}
