//! Where the bits live: a plain array of 64-bit words ([`BitVec`]), its lock-free twin
//! ([`AtomicBitVec`]) and words borrowed from elsewhere (a memory-mapped file's payload),
//! all in the layout of Guava's `LockFreeBitArray`: bit `i` is bit `i % 64` of word
//! `i / 64`. [`Bits`] is the one read interface the classic filter's lookups and
//! estimates use, whichever of them holds the bits (Guava's `Strategy`/bit-array split).
//!
//! No array keeps a running count of set bits: a counter updated on every insert costs the
//! hot path a read-modify-write (and, for the atomic array, one contended cache line), and
//! statistics are rare. [`Bits::count_ones`] is a popcount over the words instead, about
//! 1 ms for 12 MB of bits.

use std::sync::atomic::{AtomicU64, Ordering};

pub mod blocks;
pub mod counters;
mod pages;
pub use pages::{TryClone, set_huge_pages};
pub(crate) use pages::{
    Zeroable, ZeroedArray, bytes_mut, impl_try_clone, refused, try_box, try_copy_bytes, try_copy_slice,
    try_with_capacity, try_zeroed_vec,
};

/// Read access to a bit array of 64-bit words.
pub trait Bits {
    /// The number of 64-bit words.
    fn num_words(&self) -> usize;

    /// Word `index`. Panics if `index >= num_words()`.
    fn word(&self, index: usize) -> u64;

    /// The number of bits, a multiple of 64.
    #[inline]
    fn num_bits(&self) -> u64 {
        self.num_words() as u64 * 64
    }

    /// Whether bit `index` is set. Panics if `index >= num_bits()`.
    #[inline]
    fn get(&self, index: u64) -> bool {
        self.word((index / 64) as usize) & (1 << (index % 64)) != 0
    }

    /// The number of set bits (a popcount over the words).
    fn count_ones(&self) -> u64 {
        (0..self.num_words())
            .map(|index| u64::from(self.word(index).count_ones()))
            .sum()
    }
}

/// Bit arrays that can be created empty.
pub trait OwnedBits: Bits + Sized {
    /// `num_words` words of zero bits.
    fn zeroed(num_words: usize) -> Self;

    /// As [`zeroed`](Self::zeroed), or [`Error::OutOfMemory`](crate::Error::OutOfMemory)
    /// when the system refuses the memory (the default calls `zeroed`, which may abort).
    fn try_zeroed(num_words: usize) -> crate::Result<Self> {
        Ok(Self::zeroed(num_words))
    }
}

/// A fixed-size array of bits stored as 64-bit words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitVec {
    words: ZeroedArray<u64>,
}

impl_try_clone!(BitVec, fallible: [words], copied: []);

impl BitVec {
    /// Bits taken from `words` (bit `i` is bit `i % 64` of word `i / 64`).
    pub fn from_words(words: Vec<u64>) -> Self {
        Self {
            words: ZeroedArray::from_vec(words),
        }
    }

    /// Bits from their words' little-endian bytes (the native payload), written straight
    /// into the zeroed array: loading takes the array's size once, with no `Vec` of the
    /// words beside it. `bytes.len()` must be a multiple of 8. The size comes from a file
    /// or a client's bytes, so memory the system refuses is an
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory), not an abort (of a Redis server
    /// loading a client's `RESTORE`).
    pub(crate) fn try_from_le_bytes(bytes: &[u8]) -> crate::Result<Self> {
        Self::try_from_word_bytes(bytes, u64::from_le_bytes)
    }

    /// As [`try_from_le_bytes`](Self::try_from_le_bytes), for big-endian words (Guava's
    /// bytes).
    pub(crate) fn try_from_be_bytes(bytes: &[u8]) -> crate::Result<Self> {
        Self::try_from_word_bytes(bytes, u64::from_be_bytes)
    }

    /// Sets every word `index` to `word(index)`.
    pub(crate) fn fill_from(&mut self, mut word: impl FnMut(usize) -> u64) {
        for (index, slot) in self.words.iter_mut().enumerate() {
            *slot = word(index);
        }
    }

    fn try_from_word_bytes(bytes: &[u8], word: fn([u8; 8]) -> u64) -> crate::Result<Self> {
        debug_assert!(
            bytes.len().is_multiple_of(8),
            "{} bytes are not whole words",
            bytes.len()
        );
        let mut words = ZeroedArray::try_new(bytes.len() / 8)?;
        for (word_out, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            *word_out = word(chunk.try_into().expect("chunks of 8"));
        }
        Ok(Self { words })
    }

    /// The words.
    #[inline]
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Sets bit `index`; returns whether it was 0 before. Panics if `index >= num_bits()`.
    #[inline]
    pub fn set(&mut self, index: u64) -> bool {
        let word = &mut self.words[(index / 64) as usize];
        let mask = 1 << (index % 64);
        let changed = *word & mask == 0;
        *word |= mask;
        changed
    }

    /// Clears bit `index`; returns whether it was set. Panics if `index >= num_bits()`.
    #[inline]
    pub fn clear_bit(&mut self, index: u64) -> bool {
        let word = &mut self.words[(index / 64) as usize];
        let mask = 1 << (index % 64);
        let was_set = *word & mask != 0;
        *word &= !mask;
        was_set
    }

    /// Sets every bit that is set in `other` (bitwise OR). The arrays must be the same size.
    pub fn union_with(&mut self, other: &BitVec) {
        assert_eq!(self.words.len(), other.words.len(), "bit arrays differ in size");
        for (mine, theirs) in self.words.iter_mut().zip(other.words.iter()) {
            *mine |= theirs;
        }
    }

    /// Clears every bit that is not set in `other` (bitwise AND). The arrays must be the
    /// same size.
    pub fn intersect_with(&mut self, other: &BitVec) {
        assert_eq!(self.words.len(), other.words.len(), "bit arrays differ in size");
        for (mine, theirs) in self.words.iter_mut().zip(other.words.iter()) {
            *mine &= theirs;
        }
    }

    /// Clears all bits.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }
}

impl Bits for BitVec {
    #[inline]
    fn num_words(&self) -> usize {
        self.words.len()
    }

    #[inline]
    fn word(&self, index: usize) -> u64 {
        self.words[index]
    }

    fn count_ones(&self) -> u64 {
        count_ones(&self.words)
    }
}

impl OwnedBits for BitVec {
    fn zeroed(num_words: usize) -> Self {
        Self {
            words: ZeroedArray::new(num_words),
        }
    }

    fn try_zeroed(num_words: usize) -> crate::Result<Self> {
        Ok(Self {
            words: ZeroedArray::try_new(num_words)?,
        })
    }
}

/// Borrowed words, for example a memory-mapped file's payload.
impl Bits for &[u64] {
    #[inline]
    fn num_words(&self) -> usize {
        self.len()
    }

    #[inline]
    fn word(&self, index: usize) -> u64 {
        self[index]
    }

    fn count_ones(&self) -> u64 {
        count_ones(self)
    }
}

/// A fixed-size array of bits that many threads set at once through `&self`, with one
/// atomic `fetch_or` per bit (Guava's `LockFreeBitArray`). Bits are only ever set, so
/// relaxed ordering suffices for the filter's answers: a bit once seen set stays set.
/// Publishing "all my inserts are done" to another thread needs the usual synchronisation
/// (a join, a channel, a mutex), as for any relaxed atomics.
#[derive(Debug)]
pub struct AtomicBitVec {
    words: ZeroedArray<AtomicU64>,
}

impl AtomicBitVec {
    /// Sets bit `index`; returns whether this call changed it from 0. Panics if
    /// `index >= num_bits()`.
    #[inline]
    pub fn set(&self, index: u64) -> bool {
        let word = &self.words[(index / 64) as usize];
        let mask = 1 << (index % 64);
        // Skip the atomic write (and the cache-line ownership it takes) when already set.
        // Safe for the no-false-negative promise: the load saw the bit set by some earlier
        // write in this word's modification order, and a thread that synchronises with this
        // one later reads this word no earlier in that order (read-read coherence), so it
        // sees the bit too. Keep the early return, and keep publishing by join/channel/lock.
        if word.load(Ordering::Relaxed) & mask != 0 {
            return false;
        }
        word.fetch_or(mask, Ordering::Relaxed) & mask == 0
    }

    /// A copy of the words as they are now (word by word into the new array).
    pub fn to_bit_vec(&self) -> BitVec {
        let mut bits = BitVec::zeroed(self.words.len());
        bits.fill_from(|index| self.words[index].load(Ordering::Relaxed));
        bits
    }
}

impl Bits for AtomicBitVec {
    #[inline]
    fn num_words(&self) -> usize {
        self.words.len()
    }

    #[inline]
    fn word(&self, index: usize) -> u64 {
        self.words[index].load(Ordering::Relaxed)
    }
}

impl OwnedBits for AtomicBitVec {
    fn zeroed(num_words: usize) -> Self {
        Self {
            words: ZeroedArray::new(num_words),
        }
    }

    fn try_zeroed(num_words: usize) -> crate::Result<Self> {
        Ok(Self {
            words: ZeroedArray::try_new(num_words)?,
        })
    }
}

impl From<BitVec> for AtomicBitVec {
    /// The same words, made atomic in place (not copied, where `AtomicU64` has `u64`'s
    /// alignment, as on every 64-bit target).
    fn from(bits: BitVec) -> Self {
        match bits.words.cast::<AtomicU64>() {
            Ok(words) => Self { words },
            Err(plain) => {
                let mut words = ZeroedArray::<AtomicU64>::new(plain.len());
                for (atomic, &word) in words.iter_mut().zip(plain.iter()) {
                    *atomic.get_mut() = word;
                }
                Self { words }
            }
        }
    }
}

impl From<AtomicBitVec> for BitVec {
    /// The same words, no longer atomic (not copied, as above).
    fn from(bits: AtomicBitVec) -> Self {
        match bits.words.cast::<u64>() {
            Ok(words) => Self { words },
            Err(words) => AtomicBitVec { words }.to_bit_vec(),
        }
    }
}

/// The number of set bits in `words`.
/// Bytes of a hash table's slots with room for `capacity` entries of type `E`: each slot
/// an entry and a control byte (the standard library's tables), whatever the entries hold
/// elsewhere. For the filters' item lists, whose slots are most of their memory when the
/// lists are short.
pub(crate) fn table_slot_bytes<E>(capacity: usize) -> usize {
    capacity * (std::mem::size_of::<E>() + 1)
}

pub(crate) fn count_ones(words: &[u64]) -> u64 {
    words.iter().map(|word| u64::from(word.count_ones())).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_reports_a_change_only_the_first_time() {
        let mut bits = BitVec::zeroed(2);
        assert!(bits.set(70));
        assert!(!bits.set(70));
        assert!(bits.get(70) && !bits.get(69));
        assert_eq!(bits.words(), &[0, 1 << 6]);
        assert_eq!(bits.count_ones(), 1);
    }

    #[test]
    fn union_and_intersection_combine_the_words() {
        let mut a = BitVec::from_words(vec![0b1100, 1]);
        let b = BitVec::from_words(vec![0b1010, 0]);
        let mut c = a.clone();
        a.union_with(&b);
        assert_eq!((a.words(), a.count_ones()), (&[0b1110, 1][..], 4));
        c.intersect_with(&b);
        assert_eq!((c.words(), c.count_ones()), (&[0b1000, 0][..], 1));
    }

    #[test]
    fn atomic_bits_round_trip_through_plain_bits() {
        let atomic = AtomicBitVec::zeroed(3);
        assert!(atomic.set(130));
        assert!(!atomic.set(130));
        assert!(atomic.set(0));
        assert_eq!(atomic.count_ones(), 2);
        let plain = BitVec::from(atomic);
        assert_eq!(plain.words(), &[1, 0, 1 << 2]);
        assert_eq!(plain.count_ones(), 2);
        assert_eq!(AtomicBitVec::from(plain.clone()).to_bit_vec(), plain);
    }
}
