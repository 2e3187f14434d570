//! The retouched Bloom filter (Donnet, Baynat & Friedman, "Retouched Bloom Filters:
//! Allowing Networked Applications to Trade Off Selected False Positives Against False
//! Negatives", CoNEXT 2006; the design of Hadoop's `RetouchedBloomFilter`): known false
//! positives are removed by clearing one of their bits, at the price of the inserted items
//! that need that bit. It is the one filter here that may have false negatives, and it
//! says exactly which.
//!
//! The filter remembers, per set bit, the inserted items (by their 128-bit hash) that set
//! it and the recorded false positives that hit it. To remove a false positive it clears
//! one of its k bits, chosen by a scheme: `Random`; `MinimumFalseNegatives`, the bit that
//! the fewest inserted items need; `MaximumFalsePositives`, the bit that the most recorded
//! false positives share (clearing it removes them all); or `Ratio`, the bit with the
//! smallest ratio of items needed to false positives removed. Every inserted item that
//! needed the cleared bit now answers "absent" and is reported. The bookkeeping costs
//! memory: each item's 16-byte hash in the list of each of its k bits, and per set bit a
//! map slot and its list's room: at 1% (k = 7), about 510 bytes per item for 10^4 items
//! and 620 for 10^5 (`memory_bytes`; `tests/variants.rs`,
//! `retouched_bookkeeping_costs_what_its_doc_says`), some 500 times the bits' 1.2 bytes. Measured: 10,000 items at 1%, all 934 false positives among 10^5 fresh keys
//! removed; the items lost (and reported): `Random` 1,158, `MaximumFalsePositives` 966,
//! `MinimumFalseNegatives` 747, `Ratio` 670 (`tests/variants.rs`).

use std::collections::HashMap;

use crate::bits::{BitVec, Bits, OwnedBits, TryClone, refused, try_copy_slice, try_with_capacity};
use crate::error::{Result, inconsistent};
use crate::format::native::{self, ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{Funnel, Modulus, hash_item, mitz64_indices, splitmix64};
use crate::sizing::{ClassicShape, estimated_items, fill_fpp};

/// An item's identity in the bookkeeping: its murmur3_128 hash.
pub type ItemHash = (u64, u64);

/// How [`RetouchedBloomFilter::remove_false_positive`] picks the bit to clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClearingScheme {
    /// Any of the item's bits (a deterministic pseudo-random choice).
    Random,
    /// The bit the fewest inserted items need.
    MinimumFalseNegatives,
    /// The bit the most recorded false positives share.
    MaximumFalsePositives,
    /// The bit with the smallest (items needing it) / (false positives sharing it).
    Ratio,
}

/// What a removal did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removal {
    /// The bit cleared, if the item was present at all.
    pub cleared_bit: Option<u64>,
    /// Inserted items that now answer "absent" (false negatives made by this removal).
    pub false_negatives: Vec<ItemHash>,
    /// Recorded false positives that now answer "absent".
    pub false_positives_removed: usize,
}

/// A Bloom filter that trades selected false positives for reported false negatives.
///
/// ```
/// use bloomery::{ClearingScheme, RetouchedBloomFilter};
///
/// let mut filter = RetouchedBloomFilter::with_fpp(100, 0.01)?;
/// for i in 0..100i64 {
///     filter.insert(&i);
/// }
/// let fresh = (1_000..100_000i64).find(|i| filter.contains(i)).expect("some false positive");
/// filter.record_false_positive(&fresh);
/// let removal = filter.remove_false_positive(&fresh, ClearingScheme::MinimumFalseNegatives);
/// assert!(!filter.contains(&fresh));
/// // Every inserted item still present, except those the removal reports.
/// for i in 0..100i64 {
///     let lost = removal.false_negatives.contains(&bloomery::hash::hash_item(&i));
///     assert_eq!(filter.contains(&i), !lost);
/// }
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetouchedBloomFilter {
    bits: BitVec,
    num_hashes: u32,
    modulus: Modulus,
    /// For each set bit, the inserted items that need it.
    items: HashMap<u64, Vec<ItemHash>>,
    /// For each bit, the recorded false positives that hit it.
    false_positives: HashMap<u64, Vec<ItemHash>>,
    /// State of the `Random` scheme's generator (splitmix64).
    random_state: u64,
    total_false_negatives: u64,
}

impl TryClone for RetouchedBloomFilter {
    fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            bits: self.bits.try_clone()?,
            num_hashes: self.num_hashes,
            modulus: self.modulus,
            items: try_clone_lists(&self.items)?,
            false_positives: try_clone_lists(&self.false_positives)?,
            random_state: self.random_state,
            total_false_negatives: self.total_false_negatives,
        })
    }
}

/// `result`'s value; aborts, as a `Vec` does, on a refusal of memory.
fn or_abort<T>(result: Result<T>) -> T {
    result
        .unwrap_or_else(|_| std::alloc::handle_alloc_error(std::alloc::Layout::new::<(u64, Vec<ItemHash>)>()))
}

/// A copy of a map from bits to lists of item hashes, or the first refusal.
fn try_clone_lists(lists: &HashMap<u64, Vec<ItemHash>>) -> Result<HashMap<u64, Vec<ItemHash>>> {
    let mut copy = HashMap::new();
    copy.try_reserve(lists.len())
        .map_err(|_| refused::<(u64, Vec<ItemHash>)>(lists.len()))?;
    for (&bit, items) in lists {
        copy.insert(bit, try_copy_slice(items)?);
    }
    Ok(copy)
}

impl RetouchedBloomFilter {
    /// Removes every item, with the bookkeeping of inserted items, recorded false
    /// positives and the false negatives removals made; the state the
    /// [`Random`](ClearingScheme::Random) scheme draws from goes back to a new filter's
    /// too. The filter is then as new, and so are its bytes.
    pub fn clear(&mut self) {
        self.bits.clear();
        self.items.clear();
        self.false_positives.clear();
        self.random_state = 0;
        self.total_false_negatives = 0;
    }

    /// An empty filter for `expected_items` at `fpp`, of [`ClassicShape::for_rate`]: the
    /// classic filter's shape ([`BloomFilter::with_fpp`](crate::BloomFilter::with_fpp), Guava's)
    /// or a few bits more, where its rounded hash count would answer above `fpp`
    /// ([`crate::sizing::rate_bits`]; far more from about 0.35 on), and more for few items
    /// at a low rate, so that the rate holds despite the double hashing's floor
    /// ([`crate::sizing::double_hashing_bits`]).
    ///
    /// ```
    /// use bloomery::{BloomFilter, RetouchedBloomFilter};
    ///
    /// // 10 items at 1%: 256 bits, where the classic filter has 128.
    /// assert_eq!(RetouchedBloomFilter::with_fpp(10, 0.01)?.num_bits(), 256);
    /// assert_eq!(BloomFilter::with_fpp(10, 0.01)?.num_bits(), 128);
    /// // 1,000 items at 1%: one word more than the classic filter, the same hash count.
    /// let retouched = RetouchedBloomFilter::with_fpp(1_000, 0.01)?;
    /// let classic = BloomFilter::with_fpp(1_000, 0.01)?;
    /// assert_eq!((retouched.num_bits(), classic.num_bits()), (9_664, 9_600));
    /// assert_eq!(retouched.num_hashes(), classic.num_hashes());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn with_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        let shape = ClassicShape::for_rate(expected_items, fpp)?;
        Ok(Self {
            bits: BitVec::try_zeroed(shape.num_words)?,
            num_hashes: shape.num_hashes,
            modulus: Modulus::new(shape.num_bits()),
            items: HashMap::new(),
            false_positives: HashMap::new(),
            random_state: 0,
            total_false_negatives: 0,
        })
    }

    /// The item's bits, in order, each once.
    fn indices(&self, hash: ItemHash) -> Vec<u64> {
        or_abort(self.try_indices(hash))
    }

    /// As [`indices`](Self::indices), or the refusal of their memory.
    fn try_indices(&self, hash: ItemHash) -> Result<Vec<u64>> {
        let mut indices = try_with_capacity(self.num_hashes as usize)?;
        indices.extend(mitz64_indices(hash, self.num_hashes, self.modulus));
        indices.sort_unstable();
        indices.dedup();
        Ok(indices)
    }

    /// Adds `item`; returns whether any bit changed. Aborts, as a `Vec` does, when the
    /// system refuses the memory of the item's bookkeeping: see
    /// [`try_insert`](Self::try_insert).
    pub fn insert<T: Funnel + ?Sized>(&mut self, item: &T) -> bool {
        or_abort(self.try_insert(item))
    }

    /// As [`insert`](Self::insert), or [`Error::OutOfMemory`](crate::Error::OutOfMemory)
    /// with nothing changed when the system refuses the memory the item's bookkeeping
    /// takes (its place in the lists of the bits it needs, and the map's growth), which
    /// `insert` takes infallibly: a server adding to a retouched filter (the Redis module)
    /// answers an error instead of stopping.
    ///
    /// ```
    /// use bloomery::RetouchedBloomFilter;
    ///
    /// let mut filter = RetouchedBloomFilter::with_fpp(1000, 0.01)?;
    /// assert!(filter.try_insert("kept")?);
    /// assert!(filter.contains("kept"));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn try_insert<T: Funnel + ?Sized>(&mut self, item: &T) -> Result<bool> {
        let hash = hash_item(item);
        let indices = self.try_indices(hash)?;
        // Every allocation first, then the changes, none of which allocates: room for one
        // more hash in each list that lacks it, new lists, and room in the map for them.
        // (`fresh` takes memory only for an item that needs a new list.)
        let mut fresh = Vec::new();
        for &index in &indices {
            match self.items.get_mut(&index) {
                Some(needing) if needing.contains(&hash) => {}
                Some(needing) => needing.try_reserve(1).map_err(|_| refused::<ItemHash>(1))?,
                None => {
                    if fresh.capacity() == 0 {
                        fresh = try_with_capacity(indices.len())?;
                    }
                    // Room for four, as a `Vec`'s first push takes (the cost the module
                    // doc gives).
                    fresh.push((index, try_with_capacity(4)?));
                }
            }
        }
        self.items
            .try_reserve(fresh.len())
            .map_err(|_| refused::<(u64, Vec<ItemHash>)>(fresh.len()))?;
        for (index, needing) in fresh {
            self.items.insert(index, needing);
        }
        let mut changed = false;
        for index in indices {
            changed |= self.bits.set(index);
            let needing = self
                .items
                .get_mut(&index)
                .expect("a list for each index, made above");
            if !needing.contains(&hash) {
                needing.push(hash);
            }
        }
        Ok(changed)
    }

    /// Whether `item` might be present.
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        mitz64_indices(hash_item(item), self.num_hashes, self.modulus).all(|index| self.bits.get(index))
    }

    /// Records `item` as a known false positive (it must answer "present" now); returns
    /// whether it was recorded.
    pub fn record_false_positive<T: Funnel + ?Sized>(&mut self, item: &T) -> bool {
        if !self.contains(item) {
            return false;
        }
        let hash = hash_item(item);
        for index in self.indices(hash) {
            let sharing = self.false_positives.entry(index).or_default();
            if !sharing.contains(&hash) {
                sharing.push(hash);
            }
        }
        true
    }

    /// Makes `item` answer "absent" by clearing one of its bits, chosen by `scheme`, and
    /// reports the inserted items this turns into false negatives.
    pub fn remove_false_positive<T: Funnel + ?Sized>(&mut self, item: &T, scheme: ClearingScheme) -> Removal {
        let hash = hash_item(item);
        if !self.contains(item) {
            return Removal {
                cleared_bit: None,
                false_negatives: Vec::new(),
                false_positives_removed: 0,
            };
        }
        let candidates = self.indices(hash);
        let needing = |index: &u64| self.items.get(index).map_or(0, Vec::len);
        let sharing = |index: &u64| self.false_positives.get(index).map_or(0, Vec::len);
        let chosen = match scheme {
            ClearingScheme::Random => {
                let pick = splitmix64(&mut self.random_state) % candidates.len() as u64;
                candidates[pick as usize]
            }
            ClearingScheme::MinimumFalseNegatives => *candidates
                .iter()
                .min_by_key(|index| needing(index))
                .expect("k >= 1"),
            ClearingScheme::MaximumFalsePositives => *candidates
                .iter()
                .max_by_key(|index| sharing(index))
                .expect("k >= 1"),
            ClearingScheme::Ratio => *candidates
                .iter()
                .min_by(|a, b| {
                    let ratio = |index: &u64| needing(index) as f64 / sharing(index).max(1) as f64;
                    ratio(a).total_cmp(&ratio(b))
                })
                .expect("k >= 1"),
        };
        self.clear_bit(chosen)
    }

    fn clear_bit(&mut self, index: u64) -> Removal {
        self.bits.clear_bit(index);
        let lost = self.items.remove(&index).unwrap_or_default();
        let removed = self.false_positives.remove(&index).unwrap_or_default();
        // Items that lost a bit are out of the filter: forget them everywhere, so later
        // choices count only the items still present.
        for hash in &lost {
            for other in self.indices(*hash) {
                if let Some(needing) = self.items.get_mut(&other) {
                    needing.retain(|kept| kept != hash);
                }
            }
        }
        for hash in &removed {
            for other in self.indices(*hash) {
                if let Some(sharing) = self.false_positives.get_mut(&other) {
                    sharing.retain(|kept| kept != hash);
                }
            }
        }
        self.total_false_negatives = self.total_false_negatives.saturating_add(lost.len() as u64);
        Removal {
            cleared_bit: Some(index),
            false_negatives: lost,
            false_positives_removed: removed.len(),
        }
    }

    /// All false negatives made so far by removals.
    pub fn total_false_negatives(&self) -> u64 {
        self.total_false_negatives
    }

    /// The number of bits.
    pub fn num_bits(&self) -> u64 {
        self.bits.num_bits()
    }

    /// The number of hash functions (bits per item).
    pub fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    /// Bytes of bits and bookkeeping (estimated: 16 bytes per recorded item per bit).
    pub fn memory_bytes(&self) -> usize {
        // Each map's slots and each list's room: what the lists hold, not only their
        // entries' bytes.
        let map_bytes = |map: &HashMap<u64, Vec<ItemHash>>| {
            crate::bits::table_slot_bytes::<(u64, Vec<ItemHash>)>(map.capacity())
                + map
                    .values()
                    .map(|list| list.capacity() * std::mem::size_of::<ItemHash>())
                    .sum::<usize>()
        };
        std::mem::size_of_val(self.bits.words()) + map_bytes(&self.items) + map_bytes(&self.false_positives)
    }

    /// The probability that a fresh item is reported present now.
    pub fn expected_fpp(&self) -> f64 {
        fill_fpp(self.bits.count_ones(), self.num_bits(), self.num_hashes)
    }
}

impl<T: Funnel + ?Sized> crate::Filter<T> for RetouchedBloomFilter {
    fn insert(&mut self, item: &T) -> Result<bool> {
        Ok(RetouchedBloomFilter::insert(self, item))
    }

    fn contains(&self, item: &T) -> bool {
        RetouchedBloomFilter::contains(self, item)
    }
}

impl crate::FilterStats for RetouchedBloomFilter {
    fn estimated_len(&self) -> u64 {
        estimated_items(self.bits.count_ones(), self.num_bits(), self.num_hashes)
    }

    fn expected_fpp(&self) -> f64 {
        RetouchedBloomFilter::expected_fpp(self)
    }

    fn memory_bytes(&self) -> usize {
        RetouchedBloomFilter::memory_bytes(self)
    }
}

/// Parameters: num_hashes (u32), word count (u64), random state (u64), false negatives so
/// far (u64), item-list count (u64), false-positive-list count (u64). Payload: the words,
/// then each list (items, then false positives) as bit index (u64), entry count (u32) and
/// the entries (two u64 each).
impl Persist for RetouchedBloomFilter {
    const VARIANT: Variant = Variant::Retouched;

    fn params(&self) -> Vec<u8> {
        ParamWriter::new()
            .u32(self.num_hashes)
            .u64(self.bits.words().len() as u64)
            .u64(self.random_state)
            .u64(self.total_false_negatives)
            .u64(self.items.len() as u64)
            .u64(self.false_positives.len() as u64)
            .finish()
    }

    fn payload_len(&self) -> u64 {
        let lists: u64 = [&self.items, &self.false_positives]
            .iter()
            .flat_map(|lists| lists.values())
            .map(|entries| 8 + 4 + 16 * entries.len() as u64)
            .sum();
        self.bits.words().len() as u64 * 8 + lists
    }

    /// The bits borrowed, then the lists (built).
    fn payload_pieces(&self) -> Vec<std::borrow::Cow<'_, [u8]>> {
        let mut payload = Vec::new();
        for lists in [&self.items, &self.false_positives] {
            let mut indices: Vec<&u64> = lists.keys().collect();
            indices.sort();
            for index in indices {
                let entries = &lists[index];
                payload.extend_from_slice(&index.to_le_bytes());
                payload.extend_from_slice(&(entries.len() as u32).to_le_bytes());
                for (high, low) in entries {
                    payload.extend_from_slice(&high.to_le_bytes());
                    payload.extend_from_slice(&low.to_le_bytes());
                }
            }
        }
        vec![
            native::words_as_le_bytes(self.bits.words()),
            std::borrow::Cow::Owned(payload),
        ]
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let mut params = ParamReader::new(params);
        let num_hashes = params.u32()?;
        let num_words = params.u64()?;
        let random_state = params.u64()?;
        let total_false_negatives = params.u64()?;
        let item_lists = params.u64()?;
        let false_positive_lists = params.u64()?;
        params.finish()?;
        let shape = ClassicShape::new(num_words.saturating_mul(64), num_hashes)?;
        // The words straight into the array, with no `Vec` of them beside it.
        let (words, mut rest) = native::split_word_bytes(payload, num_words)?;
        let bits = BitVec::try_from_le_bytes(words)?;
        let mut read_lists = |count: u64| -> Result<HashMap<u64, Vec<ItemHash>>> {
            // Sized once: growing would hold the old table and the new one at a time. A
            // list takes at least 12 bytes, which bounds a count that lies.
            let room = count.min(rest.len() as u64 / 12) as usize;
            let mut lists = HashMap::new();
            lists
                .try_reserve(room)
                .map_err(|_| refused::<(u64, Vec<ItemHash>)>(room))?;
            let mut previous = None;
            for _ in 0..count {
                // The list's 12-byte head is in the payload: one cut short is the payload's
                // problem, not the parameter block's (ParamReader's error says the latter).
                if rest.len() < 12 {
                    return Err(inconsistent("the payload ends inside the item lists".into()));
                }
                let mut fields = ParamReader::new(rest);
                let index = fields.u64()?;
                let entries = fields.u32()? as usize;
                let need = entries.checked_mul(16).and_then(|bytes| bytes.checked_add(12));
                let Some(need) = need.filter(|&need| need <= rest.len()) else {
                    return Err(inconsistent(format!(
                        "a bookkeeping list of {entries} entries overruns the payload"
                    )));
                };
                // The writer lists bits in strictly increasing order: one form per filter.
                if previous.is_some_and(|previous| previous >= index) {
                    return Err(inconsistent(
                        "bookkeeping lists are not in strictly increasing bit order".into(),
                    ));
                }
                previous = Some(index);
                if index >= shape.num_bits() {
                    return Err(inconsistent(format!(
                        "a bookkeeping list for bit {index} is beyond the {} bits",
                        shape.num_bits()
                    )));
                }
                let mut list = try_with_capacity(entries)?;
                list.extend(rest[12..need].chunks_exact(16).map(|pair| {
                    let high = u64::from_le_bytes(pair[..8].try_into().expect("8 bytes"));
                    let low = u64::from_le_bytes(pair[8..].try_into().expect("8 bytes"));
                    (high, low)
                }));
                // Within the room reserved above (the indexes increase: no entry is
                // replaced, and at most `room` are added).
                lists.insert(index, list);
                rest = &rest[need..];
            }
            Ok(lists)
        };
        let items = read_lists(item_lists)?;
        let false_positives = read_lists(false_positive_lists)?;
        if !rest.is_empty() {
            return Err(inconsistent(format!(
                "{} payload bytes after the lists",
                rest.len()
            )));
        }
        Ok(Self {
            modulus: Modulus::new(bits.num_bits()),
            bits,
            num_hashes,
            items,
            false_positives,
            random_state,
            total_false_negatives,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_length_is_counted_as_built() {
        let mut filter = RetouchedBloomFilter::with_fpp(100, 0.05).unwrap();
        assert_eq!(filter.payload_len(), filter.payload().len() as u64);
        for i in 0..150u32 {
            filter.insert(&i.to_le_bytes());
        }
        let positives: Vec<u32> = (1_000..100_000)
            .filter(|i: &u32| filter.contains(&i.to_le_bytes()))
            .take(5)
            .collect();
        assert_eq!(positives.len(), 5);
        for positive in positives {
            assert!(filter.record_false_positive(&positive.to_le_bytes()));
        }
        assert!(!filter.false_positives.is_empty());
        assert_eq!(filter.payload_len(), filter.payload().len() as u64);
        assert_eq!(filter.envelope_len(), filter.to_bytes().len() as u64);
    }

    #[test]
    fn a_cleared_filter_is_as_new_after_random_removals() {
        let new = RetouchedBloomFilter::with_fpp(100, 0.01).unwrap();
        let mut filter = new.clone();
        for i in 0..100u32 {
            filter.insert(&i.to_le_bytes());
        }
        let positive = (1_000..)
            .find(|i: &u32| filter.contains(&i.to_le_bytes()))
            .unwrap();
        let removal = filter.remove_false_positive(&positive.to_le_bytes(), ClearingScheme::Random);
        assert!(removal.cleared_bit.is_some());
        filter.clear();
        assert_eq!(filter.to_bytes(), new.to_bytes());
        assert_eq!(filter, new);
    }

    #[test]
    fn a_payload_cut_inside_the_lists_is_said_as_such() {
        let mut filter = RetouchedBloomFilter::with_fpp(100, 0.01).unwrap();
        filter.insert(b"apple");
        let (params, payload) = (filter.params(), filter.payload_pieces().concat());
        // One more item list than the payload holds, under valid checksums.
        // The layout: num_hashes (u32), words, random state, false negatives, item lists...
        let mut more = params.clone();
        let at = 4 + 8 * 3;
        let count = u64::from_le_bytes(more[at..at + 8].try_into().unwrap());
        more[at..at + 8].copy_from_slice(&(count + 1).to_le_bytes());
        let bytes = native::encode(Variant::Retouched, &more, &payload);
        let error = RetouchedBloomFilter::from_bytes(&bytes).unwrap_err().to_string();
        assert!(
            error.contains("the payload ends inside the item lists"),
            "{error}"
        );
        // The unchanged parameters read back.
        let bytes = native::encode(Variant::Retouched, &params, &payload);
        assert_eq!(RetouchedBloomFilter::from_bytes(&bytes).unwrap(), filter);
    }
}
