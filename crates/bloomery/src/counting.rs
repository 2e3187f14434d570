//! The counting Bloom filter: each bit of a classic filter becomes a 4-bit counter, so items
//! can be removed (Fan, Cao, Almeida & Broder, "Summary Cache", 2000).
//!
//! An insert adds one to each of the item's k counters, a removal takes one away, and an
//! item is present while all its counters are non-zero. Positions are the classic filter's
//! (murmur3_128, MITZ_64). [`CountingBloomFilter::with_fpp`] takes as many counters as
//! [`ClassicShape::for_rate`] has bits: Guava's hash count, with the positions at which
//! it meets the rate (Guava's shape, the classic filter's, or a few more), and more for
//! few items at a low rate, where the double hashing's floor would lift the rate. At 4
//! bits per position that is 4 × 9.593 = 38.4 bits per item at 1% for 10^6 items, and
//! more per item for fewer ([`ClassicShape::for_rate`]'s example). A counter reaching 15
//! saturates and stays at 15 for good: its true count is unknown, and lowering it could
//! reach 0 while items still need it. With k·n/m ≈ 0.69 increments per counter, a counter passes 15 with probability
//! about 10^-15 (Poisson tail), so saturation only shows under heavy overfill or repeated
//! inserts of one item. The false-positive rate is the classic one for the set of items
//! present: for 100,000 items at 1%, 1.003% measured over 10^6 fresh keys against 1.000%
//! predicted (a standard error of 0.01%), and 0.025% (0.025% predicted) after removing
//! half of them
//! (`tests/variants.rs`, printed with `--nocapture`).

use crate::bits::counters::{CounterVec, SATURATED};
use crate::bits::{impl_try_clone, try_copy_bytes};
use crate::error::{Error, FormatProblem, Result};
use crate::format::native::{ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{Funnel, Modulus, hash_item, mitz64_indices};
use crate::sizing::{ClassicShape, check_num_hashes, estimated_items, false_positive_rate, fill_fpp};

/// A Bloom filter with 4-bit counters: insert, remove, and estimate multiplicity.
///
/// ```
/// use bloomery::CountingBloomFilter;
///
/// let mut filter = CountingBloomFilter::with_fpp(1_000, 0.01)?;
/// filter.insert("session-1");
/// filter.insert("session-1");
/// assert_eq!(filter.count("session-1"), 2);
/// filter.remove("session-1")?;
/// filter.remove("session-1")?;
/// assert!(!filter.contains("session-1"));
/// // Removing what is definitely absent is an error and changes nothing.
/// assert!(filter.remove("never-inserted").is_err());
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountingBloomFilter {
    counters: CounterVec,
    num_hashes: u32,
    modulus: Modulus,
}

impl_try_clone!(CountingBloomFilter, fallible: [counters], copied: [num_hashes, modulus]);

/// The most counters a counting filter holds: the classic filter's most bits, and on a
/// 32-bit target fewer, two counters a byte in at most `isize::MAX` bytes.
const MAX_COUNTERS: u64 = {
    let addressable = isize::MAX as u64 * 2;
    if crate::sizing::MAX_NUM_BITS < addressable {
        crate::sizing::MAX_NUM_BITS
    } else {
        addressable
    }
};

/// What sets [`MAX_COUNTERS`], in its error.
const MAX_COUNTERS_WHY: &str = if MAX_COUNTERS == crate::sizing::MAX_NUM_BITS {
    "the file format holds at most 64 × (2^31 - 1) counters"
} else {
    "counters take 4 bits each, and the address space holds isize::MAX bytes"
};

/// Checks a counting filter's counter count and hash count.
fn check_shape(num_counters: u64, num_hashes: u32) -> Result<()> {
    if num_counters == 0 || num_counters > MAX_COUNTERS {
        return Err(Error::NumCounters {
            value: num_counters,
            max: MAX_COUNTERS,
            why: MAX_COUNTERS_WHY,
        });
    }
    check_num_hashes(num_hashes)
}

impl CountingBloomFilter {
    /// Removes every item: every counter back to zero (saturated ones too).
    pub fn clear(&mut self) {
        self.counters.clear();
    }

    /// A filter for `expected_items` at `fpp`: as many counters as
    /// [`ClassicShape::for_rate`] has bits, and its hash count. That is the classic
    /// filter's shape ([`BloomFilter::with_fpp`](crate::BloomFilter::with_fpp), Guava's)
    /// or a few positions more, where its rounded hash count would answer above `fpp`
    /// ([`crate::sizing::rate_bits`]; far more from about 0.35 on), and more for few items
    /// at a low rate, so that the rate holds despite the double hashing's floor
    /// ([`crate::sizing::double_hashing_bits`]).
    ///
    /// ```
    /// use bloomery::{BloomFilter, CountingBloomFilter};
    ///
    /// // 10 items at 1%: 256 counters, where the classic filter has 128 bits.
    /// assert_eq!(CountingBloomFilter::with_fpp(10, 0.01)?.num_counters(), 256);
    /// assert_eq!(BloomFilter::with_fpp(10, 0.01)?.num_bits(), 128);
    /// // 1,000 items at 1%: a word's worth more than the classic filter, the same hashes.
    /// let counting = CountingBloomFilter::with_fpp(1_000, 0.01)?;
    /// let classic = BloomFilter::with_fpp(1_000, 0.01)?;
    /// assert_eq!((counting.num_counters(), classic.num_bits()), (9_664, 9_600));
    /// assert_eq!(counting.num_hashes(), classic.num_hashes());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn with_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        let shape = ClassicShape::for_rate(expected_items, fpp)?;
        Self::with_counters(shape.num_bits(), shape.num_hashes)
    }

    /// A filter of `num_counters` counters and `num_hashes` hashes.
    pub fn with_counters(num_counters: u64, num_hashes: u32) -> Result<Self> {
        check_shape(num_counters, num_hashes)?;
        Ok(Self {
            counters: CounterVec::try_zeroed(num_counters)?,
            num_hashes,
            modulus: Modulus::new(num_counters),
        })
    }

    /// Adds one occurrence of `item`; returns whether it was absent before.
    pub fn insert<T: Funnel + ?Sized>(&mut self, item: &T) -> bool {
        let mut was_absent = false;
        for index in mitz64_indices(hash_item(item), self.num_hashes, self.modulus) {
            was_absent |= self.counters.increment(index) == 0;
        }
        was_absent
    }

    /// Removes one occurrence of `item`. If the item is definitely absent (a counter it
    /// needs is zero, counting repeats of a position within the item), this is an error
    /// and nothing changes.
    ///
    /// Remove only items that were inserted: a never-inserted item that happens to be a
    /// false positive cannot be told apart from a present one, and removing it takes
    /// counts from the items that share its counters (this is true of every counting
    /// filter).
    pub fn remove<T: Funnel + ?Sized>(&mut self, item: &T) -> Result<()> {
        let mut indices: Vec<u64> = mitz64_indices(hash_item(item), self.num_hashes, self.modulus).collect();
        indices.sort_unstable();
        for run in indices.chunk_by(|a, b| a == b) {
            let counter = self.counters.get(run[0]);
            if counter != SATURATED && usize::from(counter) < run.len() {
                return Err(Error::NotPresent);
            }
        }
        for index in indices {
            self.counters.decrement(index);
        }
        Ok(())
    }

    /// Whether `item` might be present (all its counters non-zero).
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        mitz64_indices(hash_item(item), self.num_hashes, self.modulus)
            .all(|index| self.counters.get(index) > 0)
    }

    /// An upper estimate of how many times `item` is present: the smallest of its counters
    /// (15 means "15 or more").
    pub fn count<T: Funnel + ?Sized>(&self, item: &T) -> u8 {
        mitz64_indices(hash_item(item), self.num_hashes, self.modulus)
            .map(|index| self.counters.get(index))
            .min()
            .unwrap_or(0)
    }

    /// How many counters are saturated (stuck at 15).
    pub fn saturated_counters(&self) -> u64 {
        self.counters.saturated()
    }

    /// The number of counters.
    pub fn num_counters(&self) -> u64 {
        self.counters.len()
    }

    /// The number of hash functions (counters per item).
    pub fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    /// An estimate of the distinct items present, from the non-zero counters:
    /// -(m/k) ln(1 - nonzero/m).
    pub fn estimated_len(&self) -> u64 {
        estimated_items(self.counters.nonzero(), self.counters.len(), self.num_hashes)
    }

    /// The probability that a fresh item is reported present now: (nonzero/m)^k.
    pub fn expected_fpp(&self) -> f64 {
        fill_fpp(self.counters.nonzero(), self.counters.len(), self.num_hashes)
    }

    /// The false-positive probability the sizing formula predicts for `num_items` items.
    pub fn fpp_for_items(&self, num_items: u64) -> f64 {
        false_positive_rate(self.counters.len(), num_items, self.num_hashes)
    }

    /// Bytes of counters.
    pub fn memory_bytes(&self) -> usize {
        self.counters.as_bytes().len()
    }

    /// Adds `other`'s counts (saturating): afterwards `self` holds the items of both.
    pub fn union(&mut self, other: &Self) -> Result<()> {
        if self.num_hashes != other.num_hashes || self.counters.len() != other.counters.len() {
            return Err(Error::Incompatible {
                reason: format!(
                    "shapes differ: {} counters, {} hashes vs {} counters, {} hashes",
                    self.counters.len(),
                    self.num_hashes,
                    other.counters.len(),
                    other.num_hashes
                ),
            });
        }
        self.counters.add(&other.counters);
        Ok(())
    }
}

impl<T: Funnel + ?Sized> crate::Filter<T> for CountingBloomFilter {
    fn insert(&mut self, item: &T) -> Result<bool> {
        Ok(CountingBloomFilter::insert(self, item))
    }

    fn contains(&self, item: &T) -> bool {
        CountingBloomFilter::contains(self, item)
    }
}

impl crate::FilterStats for CountingBloomFilter {
    fn estimated_len(&self) -> u64 {
        CountingBloomFilter::estimated_len(self)
    }

    fn expected_fpp(&self) -> f64 {
        CountingBloomFilter::expected_fpp(self)
    }

    fn memory_bytes(&self) -> usize {
        CountingBloomFilter::memory_bytes(self)
    }
}

/// Parameters: num_counters (u64), num_hashes (u32); payload: the packed counters.
impl Persist for CountingBloomFilter {
    const VARIANT: Variant = Variant::Counting;

    fn params(&self) -> Vec<u8> {
        ParamWriter::new()
            .u64(self.counters.len())
            .u32(self.num_hashes)
            .finish()
    }

    fn payload_pieces(&self) -> Vec<std::borrow::Cow<'_, [u8]>> {
        vec![std::borrow::Cow::Borrowed(self.counters.as_bytes())]
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let mut params = ParamReader::new(params);
        let num_counters = params.u64()?;
        let num_hashes = params.u32()?;
        params.finish()?;
        check_num_hashes(num_hashes)?;
        check_shape(num_counters, num_hashes)?;
        let inconsistent = |problem: String| Error::Format {
            format: "bloomery",
            problem: FormatProblem::Inconsistent(problem),
        };
        if payload.len() as u64 != num_counters.div_ceil(2) {
            return Err(inconsistent(format!(
                "{num_counters} counters need {} payload bytes, found {}",
                num_counters.div_ceil(2),
                payload.len()
            )));
        }
        // The length holds, so only the unused half of the last byte can be wrong.
        let counters = CounterVec::from_bytes(try_copy_bytes(payload)?, num_counters).ok_or_else(|| {
            inconsistent(format!(
                "{num_counters} counters (an odd count) leave the high nibble of the last \
                 payload byte unused, and it must be zero; found {:#04x}",
                payload.last().copied().unwrap_or(0)
            ))
        })?;
        Ok(Self {
            counters,
            num_hashes,
            modulus: Modulus::new(num_counters),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_count_out_of_range_is_named_with_the_counting_limit() {
        for bad in [0, MAX_COUNTERS + 1, u64::MAX] {
            let message = CountingBloomFilter::with_counters(bad, 1)
                .unwrap_err()
                .to_string();
            assert_eq!(
                message,
                format!("num_counters must be in 1..={MAX_COUNTERS} ({MAX_COUNTERS_WHY}), got {bad}")
            );
        }
        #[cfg(target_pointer_width = "64")]
        assert_eq!(
            CountingBloomFilter::with_counters(0, 1).unwrap_err().to_string(),
            "num_counters must be in 1..=137438953408 (the file format holds at most \
             64 × (2^31 - 1) counters), got 0"
        );
        // The hash count is checked as before.
        let message = CountingBloomFilter::with_counters(64, 0).unwrap_err().to_string();
        assert!(message.starts_with("num_hashes must be in 1..=255"), "{message}");
        // A file's counter count is checked alike.
        let mut params = CountingBloomFilter::with_counters(2, 1).unwrap().params();
        params[..8].copy_from_slice(&0u64.to_le_bytes());
        let message = CountingBloomFilter::from_parts(&params, &[])
            .unwrap_err()
            .to_string();
        assert!(message.starts_with("num_counters must be in 1..="), "{message}");
    }

    #[test]
    fn saturated_counters_never_cause_a_false_negative() {
        let mut filter = CountingBloomFilter::with_fpp(10, 0.01).unwrap();
        for _ in 0..20 {
            filter.insert("hot");
        }
        filter.insert("cold");
        assert_eq!(filter.count("hot"), SATURATED);
        assert!(filter.saturated_counters() >= 1);
        // Twenty removals of "hot" leave its saturated counters at 15...
        for _ in 0..20 {
            filter.remove("hot").unwrap();
        }
        assert!(filter.contains("hot"), "saturated counters stay set");
        // ...and "cold", which may share them, is still present.
        assert!(filter.contains("cold"));
    }

    #[test]
    fn an_odd_count_with_its_unused_nibble_set_is_refused_for_that() {
        let filter = CountingBloomFilter::with_fpp(30, 0.01).unwrap();
        let (params, mut payload) = (filter.params(), filter.to_bytes()[64..].to_vec());
        let num_counters = filter.counters.len();
        let odd = ParamWriter::new()
            .u64(num_counters - 1)
            .u32(filter.num_hashes)
            .finish();
        assert!(CountingBloomFilter::from_parts(&odd, &payload).is_ok());
        *payload.last_mut().unwrap() |= 0x10;
        let error = CountingBloomFilter::from_parts(&odd, &payload)
            .unwrap_err()
            .to_string();
        assert!(error.contains("high nibble of the last payload byte"), "{error}");
        assert!(!error.contains("need"), "{error}");
        // A payload of the wrong length is refused for its length.
        let error = CountingBloomFilter::from_parts(&params, &payload[1..])
            .unwrap_err()
            .to_string();
        assert!(error.contains("payload bytes, found"), "{error}");
    }

    #[test]
    fn a_refused_removal_changes_nothing() {
        let mut filter = CountingBloomFilter::with_fpp(100, 0.01).unwrap();
        filter.insert("a");
        let before = filter.clone();
        assert!(matches!(filter.remove("b"), Err(Error::NotPresent)));
        assert_eq!(filter, before);
    }
}
