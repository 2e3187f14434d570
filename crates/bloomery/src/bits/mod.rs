//! Where the bits live: a plain array of 64-bit words ([`BitVec`]) and its lock-free twin
//! ([`AtomicBitVec`]), the same layout as Guava's `LockFreeBitArray`: bit `i` is bit
//! `i % 64` of word `i / 64`.
//!
//! [`BitVec`] keeps a running count of set bits (updated by `set`, recomputed after bulk
//! operations), so fill ratio, `expected_fpp` and `approximate_element_count` are O(1).
//! [`AtomicBitVec`] does not: a shared counter would be one contended cache line that
//! every inserting thread writes, so it counts with `popcount` on demand (about 1 ms for
//! 12 MB of bits).

use std::sync::atomic::{AtomicU64, Ordering};

pub mod counters;
mod pages;
pub use pages::set_huge_pages;
pub(crate) use pages::{Zeroable, ZeroedArray};

/// A fixed-size array of bits stored as 64-bit words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitVec {
    words: ZeroedArray<u64>,
    ones: u64,
}

impl BitVec {
    /// `num_words` words of zero bits.
    pub fn zeroed(num_words: usize) -> Self {
        Self {
            words: ZeroedArray::new(num_words),
            ones: 0,
        }
    }

    /// Bits taken from `words` (bit `i` is bit `i % 64` of word `i / 64`).
    pub fn from_words(words: Vec<u64>) -> Self {
        let ones = count_ones(&words);
        Self {
            words: ZeroedArray::from_vec(words),
            ones,
        }
    }

    /// The number of bits, a multiple of 64.
    #[inline]
    pub fn num_bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// The words.
    #[inline]
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Gives the words back.
    pub fn into_words(self) -> Vec<u64> {
        self.words.to_vec()
    }

    /// Whether bit `index` is set. Panics if `index >= num_bits()`.
    #[inline]
    pub fn get(&self, index: u64) -> bool {
        self.words[(index / 64) as usize] & (1 << (index % 64)) != 0
    }

    /// Sets bit `index`; returns whether it was 0 before. Panics if `index >= num_bits()`.
    #[inline]
    pub fn set(&mut self, index: u64) -> bool {
        let word = &mut self.words[(index / 64) as usize];
        let mask = 1 << (index % 64);
        let changed = *word & mask == 0;
        *word |= mask;
        self.ones += u64::from(changed);
        changed
    }

    /// The number of set bits.
    #[inline]
    pub fn count_ones(&self) -> u64 {
        self.ones
    }

    /// Clears bit `index`; returns whether it was set. Panics if `index >= num_bits()`.
    #[inline]
    pub fn clear_bit(&mut self, index: u64) -> bool {
        let word = &mut self.words[(index / 64) as usize];
        let mask = 1 << (index % 64);
        let was_set = *word & mask != 0;
        *word &= !mask;
        self.ones -= u64::from(was_set);
        was_set
    }

    /// Sets every bit that is set in `other` (bitwise OR). The arrays must be the same size.
    pub fn union_with(&mut self, other: &BitVec) {
        assert_eq!(self.words.len(), other.words.len(), "bit arrays differ in size");
        for (mine, theirs) in self.words.iter_mut().zip(other.words.iter()) {
            *mine |= theirs;
        }
        self.ones = count_ones(&self.words);
    }

    /// Clears every bit that is not set in `other` (bitwise AND). The arrays must be the
    /// same size.
    pub fn intersect_with(&mut self, other: &BitVec) {
        assert_eq!(self.words.len(), other.words.len(), "bit arrays differ in size");
        for (mine, theirs) in self.words.iter_mut().zip(other.words.iter()) {
            *mine &= theirs;
        }
        self.ones = count_ones(&self.words);
    }

    /// Clears all bits.
    pub fn clear(&mut self) {
        self.words.fill(0);
        self.ones = 0;
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
    /// `num_words` words of zero bits.
    pub fn zeroed(num_words: usize) -> Self {
        Self {
            words: ZeroedArray::new(num_words),
        }
    }

    /// The number of bits, a multiple of 64.
    #[inline]
    pub fn num_bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// Whether bit `index` is set. Panics if `index >= num_bits()`.
    #[inline]
    pub fn get(&self, index: u64) -> bool {
        self.words[(index / 64) as usize].load(Ordering::Relaxed) & (1 << (index % 64)) != 0
    }

    /// Sets bit `index`; returns whether this call changed it from 0. Panics if
    /// `index >= num_bits()`.
    #[inline]
    pub fn set(&self, index: u64) -> bool {
        let word = &self.words[(index / 64) as usize];
        let mask = 1 << (index % 64);
        // Skip the atomic write (and the cache-line ownership it takes) when already set.
        if word.load(Ordering::Relaxed) & mask != 0 {
            return false;
        }
        word.fetch_or(mask, Ordering::Relaxed) & mask == 0
    }

    /// The number of set bits (a popcount over all words).
    pub fn count_ones(&self) -> u64 {
        self.words
            .iter()
            .map(|word| u64::from(word.load(Ordering::Relaxed).count_ones()))
            .sum()
    }

    /// A copy of the words as they are now.
    pub fn to_bit_vec(&self) -> BitVec {
        BitVec::from_words(
            self.words
                .iter()
                .map(|word| word.load(Ordering::Relaxed))
                .collect(),
        )
    }
}

impl From<BitVec> for AtomicBitVec {
    fn from(bits: BitVec) -> Self {
        let mut words = ZeroedArray::<AtomicU64>::new(bits.words.len());
        for (atomic, &word) in words.iter_mut().zip(bits.words.iter()) {
            *atomic.get_mut() = word;
        }
        Self { words }
    }
}

impl From<AtomicBitVec> for BitVec {
    fn from(bits: AtomicBitVec) -> Self {
        bits.to_bit_vec()
    }
}

fn count_ones(words: &[u64]) -> u64 {
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
    fn union_and_intersection_recount_the_bits() {
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
