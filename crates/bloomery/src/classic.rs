//! The classic Bloom filter, bit for bit Guava's `BloomFilter` (strategy
//! `MURMUR128_MITZ_64`): one [`ClassicFilter`] over any bit store ([`Bits`]): owned words
//! ([`BloomFilter`]), atomic words that many threads set at once ([`AtomicBloomFilter`]),
//! or words borrowed from a memory-mapped file ([`BloomFilterView`]). Lookups and
//! estimates are written once for all three.
//!
//! An item is funnelled to bytes ([`Funnel`]), hashed once with murmur3_128 into two
//! 64-bit halves h1, h2, and the k positions are derived by double hashing
//! (Kirsch & Mitzenmacher, "Less Hashing, Same Performance", 2006):
//! position_i = ((h1 + i·h2) & i64::MAX) mod m for i = 0..k, with wrapping 64-bit sums:
//! Guava's "MITZ_64" strategy, down to clearing the sign bit rather than taking an absolute
//! value. Two hashes give k positions with the same false-positive rate as k independent
//! hashes, asymptotically.
//!
//! `expected_fpp` is Guava's (x/m)^k for x set bits, and `approximate_element_count` its
//! inversion of the fill ratio, n ≈ -(m/k) ln(1 - x/m) (Swamidass & Baldi, 2007), rounded
//! half up. All of it is checked against real Guava 31.1 output in
//! `tests/guava_vectors.rs`; for 10^7 ints at 1% (11.4 MiB, k = 7) both Guava and this
//! filter give exactly 100,075 false positives in the next 10^7 ints, 1.0008%
//! (`cargo run --release --example classic`).

use crate::bits::{AtomicBitVec, BitVec, Bits, OwnedBits, impl_try_clone};
use crate::error::{Error, Result};
use crate::format::native::{self, ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{Funnel, Modulus, hash_item, mitz64_indices};
use crate::sizing::{ClassicShape, check_num_hashes, estimated_items, fill_fpp, num_words_for_bits};

/// A Guava-compatible Bloom filter over the bit store `B`. Use it through its aliases:
/// [`BloomFilter`], [`AtomicBloomFilter`] and [`BloomFilterView`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassicFilter<B> {
    bits: B,
    num_hashes: u32,
    /// `num_bits` as a precomputed modulus (derived from `bits`).
    modulus: Modulus,
}

/// A Bloom filter with Guava's exact bits, answers and serialized form.
///
/// ```
/// use bloomery::BloomFilter;
///
/// // 1,000 expected items at 1% false positives: 9,600 bits, 7 hashes, as Guava.
/// let mut filter = BloomFilter::with_fpp(1_000, 0.01)?;
/// assert_eq!((filter.num_bits(), filter.num_hashes()), (9_600, 7));
///
/// assert!(filter.insert("https://example.com/"));
/// assert!(filter.contains("https://example.com/"));
/// assert!(!filter.contains("https://example.org/")); // no false positive here
/// filter.insert(&42i64);
/// assert_eq!(filter.approximate_element_count(), 2);
/// # Ok::<(), bloomery::Error>(())
/// ```
pub type BloomFilter = ClassicFilter<BitVec>;

impl_try_clone!(BloomFilter, fallible: [bits], copied: [num_hashes, modulus]);

/// The thread-safe twin of [`BloomFilter`]: many threads insert through `&self`, each bit
/// set with one atomic `fetch_or` (Guava's `LockFreeBitArray`). The bits, answers and
/// conversions are those of [`BloomFilter`].
///
/// ```
/// use bloomery::{AtomicBloomFilter, BloomFilter};
///
/// let filter = AtomicBloomFilter::with_fpp(10_000, 0.01)?;
/// std::thread::scope(|scope| {
///     for thread in 0..4i64 {
///         let filter = &filter;
///         scope.spawn(move || {
///             for i in 0..1_000 {
///                 filter.insert(&(thread * 1_000 + i));
///             }
///         });
///     }
/// });
/// assert!((0..4_000i64).all(|i| filter.contains(&i)));
/// let plain: BloomFilter = filter.into();
/// assert!(plain.contains(&3_999i64));
/// # Ok::<(), bloomery::Error>(())
/// ```
pub type AtomicBloomFilter = ClassicFilter<AtomicBitVec>;

/// A read-only Guava-compatible filter over borrowed words, for example the payload of a
/// memory-mapped file: the same answers as [`BloomFilter`] without copying the bits.
///
/// ```
/// use bloomery::classic::BloomFilterView;
/// use bloomery::BloomFilter;
///
/// let mut filter = BloomFilter::with_fpp(100, 0.01)?;
/// filter.insert("x");
/// let view = BloomFilterView::new(filter.words(), filter.num_hashes())?;
/// assert!(view.contains("x") && !view.contains("y"));
/// # Ok::<(), bloomery::Error>(())
/// ```
pub type BloomFilterView<'a> = ClassicFilter<&'a [u64]>;

impl<B: OwnedBits> ClassicFilter<B> {
    /// A filter for `expected_items` at false-positive probability `fpp`, sized as Guava's
    /// `BloomFilter.create(funnel, expected_items, fpp)`.
    ///
    /// Errors if `fpp` is not in (0, 1), if the filter would need more than 255 hashes, or
    /// more bits than Guava's format holds (see [`crate::sizing`]).
    ///
    /// Guava's shape, floor included: for few items at a low rate its double hashing lifts
    /// the rate measured above `fpp` (see [`crate::sizing::double_hashing_bits`]). Guava's
    /// shape has the bits that keep that floor down from 61 items on at 1%, from 290 at
    /// 0.1%. Its hash count is rounded, so it answers a little above `fpp` at the usual
    /// rates and far above from about 0.35 on (see [`crate::sizing::rate_bits`]). The
    /// other filters that hash as Guava does (counting, retouched, allow-listed, the
    /// rotating filter's generations, the scalable filter's sub-filters) take the bits
    /// that meet `fpp` ([`ClassicShape::for_rate`]); this one keeps Guava's shape, as its
    /// bits are Guava's.
    pub fn with_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        Self::try_with_shape(ClassicShape::for_fpp(expected_items, fpp)?)
    }

    /// A filter with `num_bits` bits (rounded up to whole 64-bit words) and `num_hashes`
    /// hash functions.
    ///
    /// ```
    /// let filter = bloomery::BloomFilter::with_num_bits(1_000, 3)?;
    /// assert_eq!(filter.num_bits(), 1_024);
    /// assert!(bloomery::BloomFilter::with_num_bits(1_000, 0).is_err());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn with_num_bits(num_bits: u64, num_hashes: u32) -> Result<Self> {
        Self::try_with_shape(ClassicShape::new(num_bits, num_hashes)?)
    }

    /// An empty filter of the given shape; aborts, as `Vec` does, when the system refuses
    /// the memory ([`try_with_shape`](Self::try_with_shape) does not).
    pub fn with_shape(shape: ClassicShape) -> Self {
        Self {
            bits: B::zeroed(shape.num_words),
            num_hashes: shape.num_hashes,
            modulus: Modulus::new(shape.num_bits()),
        }
    }

    /// An empty filter of the given shape, or [`Error::OutOfMemory`] when the system
    /// refuses the memory.
    ///
    /// ```
    /// use bloomery::{BloomFilter, sizing::ClassicShape};
    /// let filter = BloomFilter::try_with_shape(ClassicShape::for_fpp(1_000, 0.01)?)?;
    /// assert_eq!(filter.num_hashes(), 7);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn try_with_shape(shape: ClassicShape) -> Result<Self> {
        Ok(Self {
            bits: B::try_zeroed(shape.num_words)?,
            num_hashes: shape.num_hashes,
            modulus: Modulus::new(shape.num_bits()),
        })
    }
}

impl<B: Bits> ClassicFilter<B> {
    /// The filter over `bits`, checked: 1 to 2^31 - 1 words, 1 to 255 hashes.
    pub(crate) fn over(bits: B, num_hashes: u32) -> Result<Self> {
        num_words_for_bits((bits.num_words() as u64).saturating_mul(64))?;
        check_num_hashes(num_hashes)?;
        Ok(Self {
            modulus: Modulus::new(bits.num_bits()),
            bits,
            num_hashes,
        })
    }

    /// Whether `item` might be in the filter (Guava's `mightContain`): `false` is certain,
    /// `true` is wrong with probability about [`expected_fpp`](Self::expected_fpp).
    #[inline]
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(hash_item(item))
    }

    /// Looks an item up by its murmur3_128 hash `(h1, h2)` (see [`crate::hash::hash_item`]).
    #[inline]
    pub fn contains_hash(&self, hash: (u64, u64)) -> bool {
        // Every probe is read, with no early exit: the k reads are independent, so they
        // are all in flight at once, and no branch on a bit's value (a coin toss for a
        // fresh key) is mispredicted. Measured at 10^7 keys (1%, k = 7, 12 MB): absent
        // lookups 29.6-30.4 ns instead of 56-60 ns with the early exit, present ones 35 ns
        // instead of 39-58 (two alternating runs of each, docs/benchmarks.md run O).
        let mut missing = 0u64;
        for index in mitz64_indices(hash, self.num_hashes, self.modulus) {
            missing |= !self.bits.word((index / 64) as usize) & (1 << (index % 64));
        }
        missing == 0
    }

    /// The number of bits, a multiple of 64 (Guava's `bitSize`).
    #[inline]
    pub fn num_bits(&self) -> u64 {
        self.bits.num_bits()
    }

    /// The number of hash functions, k.
    #[inline]
    pub fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    /// The number of bits set (Guava's `bitCount`; a popcount over the words).
    pub fn bit_count(&self) -> u64 {
        self.bits.count_ones()
    }

    /// The probability that a fresh item is reported present, from the bits set now:
    /// `(bit_count / num_bits)^k` (Guava's `expectedFpp`).
    pub fn expected_fpp(&self) -> f64 {
        fill_fpp(self.bit_count(), self.num_bits(), self.num_hashes)
    }

    /// An estimate of the number of distinct items inserted, from the bits set
    /// (Guava's `approximateElementCount`). Saturates at `u64::MAX` when every bit is set.
    pub fn approximate_element_count(&self) -> u64 {
        estimated_items(self.bit_count(), self.num_bits(), self.num_hashes)
    }

    /// The filter's shape (bits and hashes).
    pub fn shape(&self) -> ClassicShape {
        ClassicShape {
            num_words: self.bits.num_words(),
            num_hashes: self.num_hashes,
        }
    }

    /// Whether `other` has the same number of bits and hashes, so that [`union`](BloomFilter::union)
    /// and [`intersection`](BloomFilter::intersection) are defined. (Both filters must also
    /// have been filled through the same [`Funnel`]: the types cannot tell.)
    pub fn is_compatible<C: Bits>(&self, other: &ClassicFilter<C>) -> bool {
        check_compatible(self.shape(), other.shape()).is_ok()
    }

    /// A plain copy of the filter as it is now.
    pub fn to_bloom_filter(&self) -> BloomFilter {
        // Word by word into the new array: no `Vec` of the words beside it.
        let mut bits = BitVec::zeroed(self.bits.num_words());
        bits.fill_from(|index| self.bits.word(index));
        ClassicFilter {
            bits,
            num_hashes: self.num_hashes,
            modulus: self.modulus,
        }
    }
}

impl BloomFilter {
    /// A filter over existing words (bit `i` is bit `i % 64` of word `i / 64`).
    pub fn from_words(words: Vec<u64>, num_hashes: u32) -> Result<Self> {
        Self::over(BitVec::from_words(words), num_hashes)
    }

    /// Adds `item`; returns whether any bit changed (Guava's `put`). `false` means the item
    /// was already present or is a false positive.
    #[inline]
    pub fn insert<T: Funnel + ?Sized>(&mut self, item: &T) -> bool {
        self.insert_hash(hash_item(item))
    }

    /// Adds an item by its murmur3_128 hash `(h1, h2)` (see [`crate::hash::hash_item`]),
    /// for callers that hash once and use the hash several times.
    #[inline]
    pub fn insert_hash(&mut self, hash: (u64, u64)) -> bool {
        let mut changed = false;
        for index in mitz64_indices(hash, self.num_hashes, self.modulus) {
            changed |= self.bits.set(index);
        }
        changed
    }

    /// The 64-bit words holding the bits (bit `i` is bit `i % 64` of word `i / 64`).
    #[inline]
    pub fn words(&self) -> &[u64] {
        self.bits.words()
    }

    /// Adds every item of `other` to `self` (bitwise OR; Guava's `putAll`). Afterwards `self`
    /// contains every item that either filter contained.
    ///
    /// ```
    /// use bloomery::BloomFilter;
    ///
    /// let mut a = BloomFilter::with_fpp(100, 0.01)?;
    /// let mut b = BloomFilter::with_fpp(100, 0.01)?;
    /// a.insert("apple");
    /// b.insert("banana");
    /// a.union(&b)?;
    /// assert!(a.contains("apple") && a.contains("banana"));
    ///
    /// let other_shape = BloomFilter::with_fpp(100, 0.001)?;
    /// assert!(a.union(&other_shape).is_err());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn union(&mut self, other: &Self) -> Result<()> {
        check_compatible(self.shape(), other.shape())?;
        self.bits.union_with(&other.bits);
        Ok(())
    }

    /// Keeps only the bits set in both filters (bitwise AND). Afterwards `self` contains
    /// every item that both filters contained; its false-positive rate can be higher than
    /// that of a filter built from the common items alone (a bit may be set in each by
    /// different items).
    pub fn intersection(&mut self, other: &Self) -> Result<()> {
        check_compatible(self.shape(), other.shape())?;
        self.bits.intersect_with(&other.bits);
        Ok(())
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        self.bits.clear();
    }
}

impl AtomicBloomFilter {
    /// Adds `item` from any thread; returns whether this call changed a bit.
    #[inline]
    pub fn insert<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.insert_hash(hash_item(item))
    }

    /// Adds an item by its murmur3_128 hash `(h1, h2)`.
    #[inline]
    pub fn insert_hash(&self, hash: (u64, u64)) -> bool {
        let mut changed = false;
        for index in mitz64_indices(hash, self.num_hashes, self.modulus) {
            changed |= self.bits.set(index);
        }
        changed
    }
}

impl<'a> BloomFilterView<'a> {
    /// A view of `words` (bit `i` is bit `i % 64` of word `i / 64`) with `num_hashes`.
    pub fn new(words: &'a [u64], num_hashes: u32) -> Result<Self> {
        Self::over(words, num_hashes)
    }

    /// A view of a native envelope's parameters and payload (see [`Persist`]), without
    /// copying; `None` when the payload is not 8-byte aligned or the machine is big-endian
    /// (then load the filter with [`Persist::from_parts`]).
    pub fn from_parts(params: &[u8], payload: &'a [u8]) -> Result<Option<Self>> {
        let num_hashes = classic_params(params)?;
        match native::words_in_place(payload)? {
            Some(words) => Ok(Some(Self::new(words, num_hashes)?)),
            None => Ok(None),
        }
    }

    /// The words.
    pub fn words(&self) -> &'a [u64] {
        self.bits
    }
}

/// A Guava-compatible filter over borrowed words it may change, for example the payload of
/// a file mapped writable: inserts set bits in place. Lookups and statistics go through
/// [`view`](Self::view).
#[derive(Debug)]
pub struct BloomFilterMut<'a> {
    words: &'a mut [u64],
    num_hashes: u32,
    modulus: Modulus,
}

impl<'a> BloomFilterMut<'a> {
    /// The filter of a native envelope's parameters over its payload, in place; `None`
    /// when the payload is not 8-byte aligned or the machine is big-endian.
    pub fn from_parts(params: &[u8], payload: &'a mut [u8]) -> Result<Option<Self>> {
        let num_hashes = classic_params(params)?;
        if !payload.len().is_multiple_of(8) {
            return Err(Error::format(
                "bloomery",
                crate::FormatProblem::PayloadNotWords(payload.len() as u64),
            ));
        }
        if cfg!(target_endian = "big") {
            return Ok(None);
        }
        // SAFETY: every bit pattern is a valid u64; align_to_mut yields only a correctly
        // aligned middle part, accepted only when nothing is left over on either side.
        let (head, words, tail) = unsafe { payload.align_to_mut::<u64>() };
        if !head.is_empty() || !tail.is_empty() {
            return Ok(None);
        }
        // The checks of a view over the same words.
        let modulus = BloomFilterView::new(words, num_hashes)?.modulus;
        Ok(Some(Self {
            words,
            num_hashes,
            modulus,
        }))
    }

    /// Adds an item by its murmur3_128 hash ([`crate::hash::hash_item`]); returns whether
    /// a bit changed.
    #[inline]
    pub fn insert_hash(&mut self, hash: (u64, u64)) -> bool {
        let mut changed = false;
        for index in mitz64_indices(hash, self.num_hashes, self.modulus) {
            let word = &mut self.words[(index / 64) as usize];
            let mask = 1u64 << (index % 64);
            changed |= *word & mask == 0;
            *word |= mask;
        }
        changed
    }

    /// The number of hash functions.
    pub fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    /// The payload's bytes, for a union in place (`in_place::FilterMut::union`).
    pub(crate) fn payload_mut(&mut self) -> &mut [u8] {
        crate::bits::bytes_mut(self.words)
    }

    /// A read-only view of the words as they are now.
    pub fn view(&self) -> BloomFilterView<'_> {
        ClassicFilter {
            bits: &*self.words,
            num_hashes: self.num_hashes,
            modulus: self.modulus,
        }
    }
}

impl From<BloomFilter> for AtomicBloomFilter {
    fn from(filter: BloomFilter) -> Self {
        Self {
            bits: filter.bits.into(),
            num_hashes: filter.num_hashes,
            modulus: filter.modulus,
        }
    }
}

impl From<AtomicBloomFilter> for BloomFilter {
    fn from(filter: AtomicBloomFilter) -> Self {
        Self {
            bits: filter.bits.into(),
            num_hashes: filter.num_hashes,
            modulus: filter.modulus,
        }
    }
}

impl<T: Funnel + ?Sized> crate::Filter<T> for BloomFilter {
    fn insert(&mut self, item: &T) -> Result<bool> {
        Ok(BloomFilter::insert(self, item))
    }

    fn contains(&self, item: &T) -> bool {
        BloomFilter::contains(self, item)
    }
}

impl<B: Bits> crate::FilterStats for ClassicFilter<B> {
    fn estimated_len(&self) -> u64 {
        self.approximate_element_count()
    }

    fn expected_fpp(&self) -> f64 {
        ClassicFilter::expected_fpp(self)
    }

    fn memory_bytes(&self) -> usize {
        self.bits.num_words() * 8
    }
}

/// Parameters: `num_hashes` (u32); payload: the words, little-endian.
impl Persist for BloomFilter {
    const VARIANT: Variant = Variant::Classic;

    fn params(&self) -> Vec<u8> {
        encode_params(self.num_hashes)
    }

    fn payload_pieces(&self) -> Vec<std::borrow::Cow<'_, [u8]>> {
        vec![native::words_as_le_bytes(self.words())]
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        // Straight into the filter's array: a `Vec` of the words first would hold the
        // payload twice (the array, on huge pages when large, is a new mapping).
        native::check_whole_words(payload)?;
        let num_hashes = classic_params(params)?;
        Self::over(BitVec::try_from_le_bytes(payload)?, num_hashes)
    }
}

/// The parameters of a classic filter's envelope with `num_hashes` hash functions.
pub(crate) fn encode_params(num_hashes: u32) -> Vec<u8> {
    ParamWriter::new().u32(num_hashes).finish()
}

/// A classic filter kept inside another variant's envelope (scalable sub-filters, rotating
/// generations, the allow-listed filter): its `num_hashes` (u32) and word count (u64) in
/// the parameters, its words in the payload.
pub(crate) fn write_embedded(params: ParamWriter, filter: &BloomFilter) -> ParamWriter {
    params.u32(filter.num_hashes()).u64(filter.words().len() as u64)
}

/// Reads what [`write_embedded`] wrote: the shape from `params`, the words off the front
/// of `payload` (checked against its length before anything is allocated); returns the
/// filter and the rest of the payload.
pub(crate) fn read_embedded<'a>(
    params: &mut ParamReader<'_>,
    payload: &'a [u8],
) -> Result<(BloomFilter, &'a [u8])> {
    let num_hashes = params.u32()?;
    let num_words = params.u64()?;
    read_words(num_hashes, num_words, payload)
}

/// A classic filter of `num_words` words and `num_hashes` off the front of `payload`.
pub(crate) fn read_words(num_hashes: u32, num_words: u64, payload: &[u8]) -> Result<(BloomFilter, &[u8])> {
    ClassicShape::new(num_words.saturating_mul(64), num_hashes)?;
    let (words, rest) = native::split_word_bytes(payload, num_words)?;
    Ok((
        BloomFilter::over(BitVec::try_from_le_bytes(words)?, num_hashes)?,
        rest,
    ))
}

fn classic_params(params: &[u8]) -> Result<u32> {
    let mut params = ParamReader::new(params);
    let num_hashes = params.u32()?;
    params.finish()?;
    Ok(num_hashes)
}

/// Whether filters of these shapes put every item at the same bits (a union or an
/// intersection needs it); the error says how they differ.
pub(crate) fn check_compatible(mine: ClassicShape, theirs: ClassicShape) -> Result<()> {
    if mine.num_hashes != theirs.num_hashes {
        return Err(Error::Incompatible {
            reason: format!("num_hashes differ: {} vs {}", mine.num_hashes, theirs.num_hashes),
        });
    }
    if mine.num_words != theirs.num_words {
        return Err(Error::Incompatible {
            reason: format!("num_bits differ: {} vs {}", mine.num_bits(), theirs.num_bits()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_reports_whether_a_bit_changed() {
        let mut filter = BloomFilter::with_fpp(100, 0.01).unwrap();
        assert!(filter.insert("x"));
        assert!(!filter.insert("x"));
    }

    #[test]
    fn an_empty_filter_contains_nothing_and_counts_zero() {
        let filter = BloomFilter::with_fpp(100, 0.01).unwrap();
        assert!(!filter.contains("x"));
        assert_eq!(filter.approximate_element_count(), 0);
        assert_eq!(filter.expected_fpp(), 0.0);
    }

    #[test]
    fn a_full_filter_saturates_the_count() {
        let filter = BloomFilter::from_words(vec![u64::MAX; 2], 3).unwrap();
        assert_eq!(filter.approximate_element_count(), u64::MAX);
        assert_eq!(filter.expected_fpp(), 1.0);
        assert!(filter.contains("anything"));
    }

    #[test]
    fn incompatible_filters_name_the_differing_parameter() {
        let mut a = BloomFilter::with_num_bits(640, 3).unwrap();
        let b = BloomFilter::with_num_bits(640, 4).unwrap();
        let c = BloomFilter::with_num_bits(1280, 3).unwrap();
        assert!(!a.is_compatible(&b));
        assert_eq!(
            a.union(&b).unwrap_err().to_string(),
            "filters are incompatible: num_hashes differ: 3 vs 4"
        );
        assert_eq!(
            a.intersection(&c).unwrap_err().to_string(),
            "filters are incompatible: num_bits differ: 640 vs 1280"
        );
    }

    #[test]
    fn intersection_keeps_items_in_both() {
        let mut a = BloomFilter::with_fpp(1_000, 0.001).unwrap();
        let mut b = a.clone();
        for i in 0..100i64 {
            a.insert(&i);
            b.insert(&(i + 50));
        }
        a.intersection(&b).unwrap();
        assert!((50..100i64).all(|i| a.contains(&i)));
        let survivors = (0..50i64).chain(100..150).filter(|i| a.contains(i)).count();
        assert!(
            survivors < 10,
            "{survivors} items of one side only still answer present"
        );
    }

    #[test]
    fn from_words_rejects_bad_shapes() {
        assert!(BloomFilter::from_words(vec![], 3).is_err());
        assert!(BloomFilter::from_words(vec![0], 0).is_err());
        assert!(BloomFilter::from_words(vec![0], 256).is_err());
    }

    #[test]
    fn atomic_and_plain_filters_convert_both_ways() {
        let mut plain = BloomFilter::with_fpp(1_000, 0.01).unwrap();
        plain.insert("a");
        let atomic = AtomicBloomFilter::from(plain.clone());
        assert!(atomic.contains("a"));
        atomic.insert("b");
        plain.insert("b");
        assert_eq!(atomic.to_bloom_filter(), plain);
        let view = BloomFilterView::new(plain.words(), plain.num_hashes()).unwrap();
        assert!(view.contains("a") && view.contains("b"));
        assert_eq!(view.to_bloom_filter(), plain);
        assert_eq!(
            atomic.approximate_element_count(),
            plain.approximate_element_count()
        );
        assert_eq!(BloomFilter::from(atomic), plain);
    }
}
