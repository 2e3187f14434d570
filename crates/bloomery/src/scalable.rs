//! The scalable Bloom filter (Almeida, Baquero, Preguiça & Hutchison, "Scalable Bloom
//! Filters", 2007): a chain of classic filters that grows as items arrive and keeps its
//! false-positive rate below the one requested, however many come.
//!
//! Sub-filter i holds c·s^i items (c the initial capacity, s the growth factor, default 2)
//! at false-positive probability p_i = p·(1 - r)·r^i (r the tightening ratio, default
//! 0.5). An item is present if any sub-filter has it, so the compound rate is at most
//! Σ p_i = p·(1 - r)·(1 + r + r² + ...) = p, for any number of sub-filters. A new
//! sub-filter starts when the newest reaches its capacity; in non-scaling mode the filter
//! reports itself full instead (and its one sub-filter is sized at p itself). By the
//! formula each step costs about log2(1/r)/ln 2 more bits per item than the last (1.44
//! at r = 0.5), a cost that grows with the number of sub-filters, slowly. But each
//! sub-filter also takes at least √(60·n_i/p_i) bits against the double hashing's floor
//! (see below), and that bound grows by √(s/r) per sub-filter while its items grow by s:
//! per item it grows by √(1/(s·r)) per sub-filter, so with s·r < 1 (expansion 1, or
//! expansion 2 with r below 0.5) memory grows exponentially with the sub-filters (with
//! expansion 1 and r = 0.5 each new sub-filter takes about 1.41 times the bits of the
//! one before, for as many items). With s·r ≥ 1 (the defaults) it is a constant
//! √(60/(c·p·(1 - r))) bits per item at most, far above the formula's where c·p is small:
//! a chain started at one item at 1% takes about 110 bits per item, at 10^-6 about 11,000.
//! So choose expansion 2 or more with r ≥ 1/s, and
//! an initial capacity c with c·p of 10 or more (c ≥ 1,000 at 1%: the floor's bound is
//! then under 3.5 bits per item, below the formula's, and adds nothing); or, for chains
//! that must start small, the blocked chain
//! ([`ScalableBlockedBloomFilter`](crate::scalable_blocked::ScalableBlockedBloomFilter)),
//! which has no such floor (`cargo run --release -p bloomery --example scalable_memory`).
//! Measured: 100,000 items from an initial capacity of 1,000 (7 sub-filters,
//! 291 KB), 0.990% false positives over 10^6 fresh keys at a requested 1%
//! (`tests/variants.rs`). Growth stops with an error at 64 sub-filters or, in practice
//! much earlier, when the next sub-filter would need more than the 2^31 - 1 words of
//! Guava's format: with the defaults at 1%, sub-filter 31 (counting from 0) of a chain
//! started at one item, sub-filter 22 of one started at 1,000. The 255-hash limit is far
//! off by then (sub-filter 30 of the first chain takes 38 hashes).
//! An insert first asks every sub-filter, so an item is never counted twice (as RedisBloom).
//! Each sub-filter takes at least the bits that keep Guava's double hashing under its
//! share ([`ClassicShape::for_rate`]): with Guava's shape, a chain started at one item at
//! 1% answered about 3% once grown to 10^5 items, its first, smallest sub-filters' floors
//! adding up (`cargo run --release -p bloomery --example double_hashing_floor`, and
//! `tests/variants.rs`, `filters_hashed_as_guava_keep_their_rate_...`).

use crate::any::GrowthLimit;
use crate::bits::impl_try_clone;
use crate::classic::{BloomFilter, read_embedded, write_embedded};
use crate::error::{Error, Result, inconsistent};
use crate::format::native::{self, ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{Funnel, hash_item};
use crate::sizing::{ClassicShape, check_fpp};

/// The largest number of sub-filters (ample: with growth 2 the 64th holds c·2^63 items).
pub const MAX_SUB_FILTERS: usize = 64;

/// How a scalable filter grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScalableOptions {
    /// Each new sub-filter holds this many times the previous one's items (at least 1).
    pub expansion: u32,
    /// Each new sub-filter's false-positive probability is this fraction of the previous
    /// one's, in (0, 1).
    pub tightening: f64,
    /// When false, the filter never grows and `insert` reports it full.
    pub scaling: bool,
}

impl Default for ScalableOptions {
    fn default() -> Self {
        Self {
            expansion: 2,
            tightening: 0.5,
            scaling: true,
        }
    }
}

impl ScalableOptions {
    /// The defaults for a chain of blocked sub-filters
    /// ([`ScalableBlockedBloomFilter`](crate::scalable_blocked::ScalableBlockedBloomFilter)):
    /// growth 2, tightening [`BLOCKED_TIGHTENING`](crate::scalable_blocked::BLOCKED_TIGHTENING).
    ///
    /// ```
    /// let options = bloomery::ScalableOptions::for_blocked();
    /// assert_eq!((options.expansion, options.tightening, options.scaling), (2, 0.8, true));
    /// ```
    pub fn for_blocked() -> Self {
        Self {
            tightening: crate::scalable_blocked::BLOCKED_TIGHTENING,
            ..Self::default()
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct SubFilter {
    filter: BloomFilter,
    capacity: u64,
    len: u64,
}

impl_try_clone!(SubFilter, fallible: [filter], copied: [capacity, len]);

/// One sub-filter of a [`ScalableBloomFilter`], as [`ScalableBloomFilter::sub_filters`]
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SubFilterInfo {
    /// The items it takes before the next sub-filter starts.
    pub capacity: u64,
    /// The items added to it.
    pub len: u64,
    /// Its bits (64 × its words).
    pub num_bits: u64,
    /// Its hash functions.
    pub num_hashes: u32,
    /// The false-positive probability it was sized for (its share of the filter's).
    pub fpp: f64,
}

/// A Bloom filter that grows to any number of items at a bounded false-positive rate.
///
/// ```
/// use bloomery::{ScalableBloomFilter, ScalableOptions};
///
/// let mut filter = ScalableBloomFilter::new(100, 0.01)?;
/// for i in 0..1_000i64 {
///     filter.insert(&i)?;
/// }
/// assert!(filter.num_filters() > 1);
/// assert!(filter.contains(&999i64));
/// // Inserts that met a false positive are not counted, as in RedisBloom.
/// assert!(filter.len() <= 1_000 && filter.len() > 980);
///
/// let options = ScalableOptions { scaling: false, ..ScalableOptions::default() };
/// let mut fixed = ScalableBloomFilter::with_options(2, 0.01, options)?;
/// fixed.insert("a")?;
/// fixed.insert("b")?;
/// assert!(fixed.insert("c").is_err()); // full
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableBloomFilter {
    filters: Vec<SubFilter>,
    initial_capacity: u64,
    fpp: f64,
    options: ScalableOptions,
}

impl_try_clone!(ScalableBloomFilter, fallible: [filters], copied: [initial_capacity, fpp, options]);

impl ScalableBloomFilter {
    /// A filter starting with room for `capacity` items at `fpp`, growing by 2 with
    /// tightening 0.5.
    pub fn new(capacity: u64, fpp: f64) -> Result<Self> {
        Self::with_options(capacity, fpp, ScalableOptions::default())
    }

    /// A filter with explicit growth options.
    pub fn with_options(capacity: u64, fpp: f64, options: ScalableOptions) -> Result<Self> {
        check_options(capacity, fpp, &options)?;
        let mut filter = Self {
            filters: Vec::new(),
            initial_capacity: capacity,
            fpp,
            options,
        };
        filter
            .push_sub_filter(GrowthLimit::None)
            .map_err(|error| first_sub_filter_error(error, capacity, fpp, &options))?;
        Ok(filter)
    }

    /// Capacity and false-positive probability of sub-filter `index`.
    fn sub_filter_params(&self, index: usize) -> (u64, f64) {
        sub_filter_params(self.initial_capacity, self.fpp, &self.options, index)
    }

    /// The next sub-filter's capacity and shape, or why there can be no next one: the
    /// filter has its most sub-filters ([`Error::SubFilterLimit`]), or the next one cannot
    /// be sized.
    fn next_sub_filter(&self) -> Result<(u64, ClassicShape)> {
        let index = self.filters.len();
        if index >= MAX_SUB_FILTERS {
            return Err(Error::SubFilterLimit {
                limit: MAX_SUB_FILTERS as u64,
                capacity: self.capacity(),
            });
        }
        let (capacity, fpp) = self.sub_filter_params(index);
        Ok((capacity, ClassicShape::for_rate(capacity, fpp)?))
    }

    /// Whether the filter adds a sub-filter when its newest is full: false when it does
    /// not scale, has its most sub-filters, or cannot size the next one (too many bits or
    /// hash functions). Then it refuses items beyond its [`capacity`](Self::capacity).
    pub fn can_grow(&self) -> bool {
        self.options.scaling && self.next_sub_filter().is_ok()
    }

    /// Adds the next sub-filter, unless it would take the filter past `memory_limit` bytes
    /// (checked before anything is allocated).
    fn push_sub_filter(&mut self, limit: GrowthLimit<'_>) -> Result<()> {
        let (capacity, shape) = self.next_sub_filter()?;
        limit.check(self.memory_bytes() as u64, shape.num_words as u64 * 8)?;
        let filter = BloomFilter::try_with_shape(shape)?;
        self.filters.push(SubFilter {
            filter,
            capacity,
            len: 0,
        });
        Ok(())
    }

    /// Adds `item`. `Ok(false)` when it was (probably) present already; `Err(Error::Full)`
    /// when a non-scaling filter is at capacity, `Err(Error::SubFilterLimit)` when a scaling
    /// one is and has its most sub-filters;
    /// the error of sizing the next sub-filter, tighter than the last, when it cannot be
    /// sized (too many hash functions or bits). The item is not added then.
    pub fn insert<T: Funnel + ?Sized>(&mut self, item: &T) -> Result<bool> {
        self.insert_within(item, None)
    }

    /// As [`insert`](Self::insert), but refusing with [`Error::MemoryLimit`] (before
    /// allocating) a growth step that would take the filter past `memory_limit` bytes: a
    /// server's cap on what one write may make a key allocate.
    ///
    /// ```
    /// use bloomery::ScalableBloomFilter;
    ///
    /// let mut filter = ScalableBloomFilter::new(100, 0.01)?;
    /// let limit = Some(filter.memory_bytes() as u64); // no room to grow
    /// let mut refused = None;
    /// for i in 0..200i64 {
    ///     if let Err(error) = filter.insert_within(&i, limit) {
    ///         refused = Some(error);
    ///         break;
    ///     }
    /// }
    /// assert!(matches!(refused, Some(bloomery::Error::MemoryLimit { .. })));
    /// assert_eq!(filter.num_filters(), 1);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn insert_within<T: Funnel + ?Sized>(&mut self, item: &T, memory_limit: Option<u64>) -> Result<bool> {
        self.insert_limited(item, memory_limit.into())
    }

    /// As [`insert_within`](Self::insert_within), under any [`GrowthLimit`].
    pub(crate) fn insert_limited<T: Funnel + ?Sized>(
        &mut self,
        item: &T,
        limit: GrowthLimit<'_>,
    ) -> Result<bool> {
        let hash = hash_item(item);
        if self.filters.iter().any(|sub| sub.filter.contains_hash(hash)) {
            return Ok(false);
        }
        let newest = self.filters.last().expect("at least one sub-filter");
        if newest.len >= newest.capacity {
            if !self.options.scaling {
                return Err(Error::Full {
                    capacity: self.capacity(),
                });
            }
            self.push_sub_filter(limit)?;
        }
        let newest = self.filters.last_mut().expect("at least one sub-filter");
        newest.filter.insert_hash(hash);
        newest.len += 1;
        Ok(true)
    }

    /// Adds the item whatever the filter's capacity: where [`insert`](Self::insert) refuses
    /// it (a non-scaling filter at capacity, a chain at its most sub-filters or unable to
    /// size or allocate the next one), it goes into the newest sub-filter beyond that
    /// sub-filter's capacity, so the rate there rises above the promise instead of the
    /// item being lost. Nothing limits growth. For a server replaying adds that another
    /// accepted (a replica, an AOF), where a refusal would be a false negative.
    ///
    /// ```
    /// use bloomery::{ScalableBloomFilter, ScalableOptions};
    ///
    /// let options = ScalableOptions { scaling: false, ..ScalableOptions::default() };
    /// let mut filter = ScalableBloomFilter::with_options(10, 0.01, options)?;
    /// for i in 0..10u32 {
    ///     filter.insert(&i)?;
    /// }
    /// assert!(matches!(filter.insert(&10u32), Err(bloomery::Error::Full { .. })));
    /// assert!(filter.insert_past_capacity(&10u32)?);
    /// assert!(filter.contains(&10u32));
    /// assert_eq!(filter.len(), 11);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn insert_past_capacity<T: Funnel + ?Sized>(&mut self, item: &T) -> Result<bool> {
        self.insert_past_capacity_within(item, GrowthLimit::None)
    }

    /// As [`insert_past_capacity`](Self::insert_past_capacity), with each new sub-filter
    /// held to `limit` before it is allocated: one it refuses is not made, and the item
    /// goes into the newest sub-filter instead.
    pub fn insert_past_capacity_within<T: Funnel + ?Sized>(
        &mut self,
        item: &T,
        limit: GrowthLimit<'_>,
    ) -> Result<bool> {
        match self.insert_limited(item, limit) {
            Err(_) => {
                // Refused only at a growth step, the item absent: into the newest.
                let newest = self.filters.last_mut().expect("at least one sub-filter");
                newest.filter.insert_hash(hash_item(item));
                newest.len = newest.len.saturating_add(1);
                Ok(true)
            }
            answer => answer,
        }
    }

    /// Whether `item` might be present.
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        let hash = hash_item(item);
        self.filters.iter().any(|sub| sub.filter.contains_hash(hash))
    }

    /// Items added (inserts that returned `Ok(true)`).
    pub fn len(&self) -> u64 {
        self.filters
            .iter()
            .fold(0u64, |sum, sub| sum.saturating_add(sub.len))
    }

    /// Whether no item was added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every item: the chain goes back to its first sub-filter, emptied (its
    /// shape kept), as a new filter of the same parameters starts.
    pub fn clear(&mut self) {
        self.filters.truncate(1);
        for sub in &mut self.filters {
            sub.filter.clear();
            sub.len = 0;
        }
    }

    /// The items the current sub-filters hold before the next one is needed.
    pub fn capacity(&self) -> u64 {
        self.filters
            .iter()
            .fold(0u64, |sum, sub| sum.saturating_add(sub.capacity))
    }

    /// Each sub-filter's shape and fill, oldest first.
    pub fn sub_filters(&self) -> Vec<SubFilterInfo> {
        self.filters
            .iter()
            .enumerate()
            .map(|(index, sub)| SubFilterInfo {
                capacity: sub.capacity,
                len: sub.len,
                num_bits: sub.filter.num_bits(),
                num_hashes: sub.filter.num_hashes(),
                fpp: self.sub_filter_params(index).1,
            })
            .collect()
    }

    /// The number of sub-filters.
    pub fn num_filters(&self) -> usize {
        self.filters.len()
    }

    /// The growth factor.
    pub fn expansion(&self) -> u32 {
        self.options.expansion
    }

    /// The options.
    pub fn options(&self) -> ScalableOptions {
        self.options
    }

    /// The requested false-positive probability.
    pub fn fpp(&self) -> f64 {
        self.fpp
    }

    /// The initial capacity.
    pub fn initial_capacity(&self) -> u64 {
        self.initial_capacity
    }

    /// Bytes of filter bits in all sub-filters.
    pub fn memory_bytes(&self) -> usize {
        self.filters
            .iter()
            .map(|sub| std::mem::size_of_val(sub.filter.words()))
            .sum()
    }

    /// The probability that a fresh item is reported present now:
    /// 1 - Π(1 - fpp_i) over the sub-filters' current rates.
    pub fn expected_fpp(&self) -> f64 {
        1.0 - self
            .filters
            .iter()
            .map(|sub| 1.0 - sub.filter.expected_fpp())
            .product::<f64>()
    }
}

/// Capacity and false-positive probability of sub-filter `index` of a filter starting at
/// `initial_capacity` items and `fpp`: `fpp · (1 - tightening) · tightening^index` for a
/// scaling filter, `fpp` itself for a non-scaling one (its only sub-filter). The power is
/// `index` multiplications by `tightening` in turn, from 1 (docs/format.md's rule, so
/// that every writer sizes a new sub-filter alike: `powi`'s rounding is unspecified).
///
/// ```
/// use bloomery::ScalableOptions;
/// use bloomery::scalable::sub_filter_params;
///
/// let options = ScalableOptions::default(); // expansion 2, tightening 0.5
/// assert_eq!(sub_filter_params(1_000, 0.01, &options, 0), (1_000, 0.005));
/// assert_eq!(sub_filter_params(1_000, 0.01, &options, 3), (8_000, 0.000625));
/// // The scalable blocked filter's tightening, 0.8: multiplied in turn.
/// let blocked = ScalableOptions::for_blocked();
/// let (_, fpp) = sub_filter_params(1_000, 0.01, &blocked, 4);
/// assert_eq!(fpp, 0.01 * (1.0 - 0.8) * (0.8 * 0.8 * 0.8 * 0.8));
/// ```
pub fn sub_filter_params(
    initial_capacity: u64,
    fpp: f64,
    options: &ScalableOptions,
    index: usize,
) -> (u64, f64) {
    let growth = u64::from(options.expansion).saturating_pow(index as u32);
    let capacity = initial_capacity.saturating_mul(growth);
    // A non-scaling filter has one sub-filter, which may take the whole rate (as
    // RedisBloom's NONSCALING filters do); a scaling one splits it over the series.
    let fpp = if options.scaling {
        fpp * (1.0 - options.tightening) * (0..index).fold(1.0, |power, _| power * options.tightening)
    } else {
        fpp
    };
    (capacity, fpp)
}

/// [`crate::error::first_sub_filter_error`] for the first sub-filter of a chain grown with
/// `options`.
pub(crate) fn first_sub_filter_error(
    error: Error,
    capacity: u64,
    fpp: f64,
    options: &ScalableOptions,
) -> Error {
    let (_, share) = sub_filter_params(capacity, fpp, options, 0);
    crate::error::first_sub_filter_error(error, capacity, fpp, share)
}

pub(crate) fn check_options(capacity: u64, fpp: f64, options: &ScalableOptions) -> Result<()> {
    if capacity == 0 {
        return Err(Error::Parameter {
            name: "capacity",
            value: "0".into(),
            allowed: "at least 1",
        });
    }
    check_fpp(fpp)?;
    if options.expansion == 0 {
        return Err(Error::Parameter {
            name: "expansion",
            value: "0".into(),
            allowed: "at least 1",
        });
    }
    if !(options.tightening > 0.0 && options.tightening < 1.0) {
        return Err(Error::Parameter {
            name: "tightening",
            value: options.tightening.to_string(),
            allowed: "in (0, 1)",
        });
    }
    Ok(())
}

impl<T: Funnel + ?Sized> crate::Filter<T> for ScalableBloomFilter {
    /// As [`ScalableBloomFilter::insert`]: a filter that cannot take the item is an error.
    fn insert(&mut self, item: &T) -> Result<bool> {
        ScalableBloomFilter::insert(self, item)
    }

    fn contains(&self, item: &T) -> bool {
        ScalableBloomFilter::contains(self, item)
    }
}

impl crate::FilterStats for ScalableBloomFilter {
    fn estimated_len(&self) -> u64 {
        self.len()
    }

    fn expected_fpp(&self) -> f64 {
        ScalableBloomFilter::expected_fpp(self)
    }

    fn memory_bytes(&self) -> usize {
        ScalableBloomFilter::memory_bytes(self)
    }
}

/// Parameters: initial capacity (u64), fpp (f64), expansion (u32), tightening (f64),
/// scaling (u8), sub-filter count (u32), then per sub-filter its capacity (u64), item count
/// (u64), num_hashes (u32) and word count (u64). Payload: the sub-filters' words in order,
/// little-endian.
impl Persist for ScalableBloomFilter {
    const VARIANT: Variant = Variant::Scalable;

    fn params(&self) -> Vec<u8> {
        let mut params = ParamWriter::new()
            .u64(self.initial_capacity)
            .f64(self.fpp)
            .u32(self.options.expansion)
            .f64(self.options.tightening)
            .u8(u8::from(self.options.scaling))
            .u32(self.filters.len() as u32);
        for sub in &self.filters {
            params = write_embedded(params.u64(sub.capacity).u64(sub.len), &sub.filter);
        }
        params.finish()
    }

    fn payload_pieces(&self) -> Vec<std::borrow::Cow<'_, [u8]>> {
        self.filters
            .iter()
            .map(|sub| native::words_as_le_bytes(sub.filter.words()))
            .collect()
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let mut reader = ParamReader::new(params);
        let initial_capacity = reader.u64()?;
        let fpp = reader.f64()?;
        let options = ScalableOptions {
            expansion: reader.u32()?,
            tightening: reader.f64()?,
            scaling: match reader.u8()? {
                0 => false,
                1 => true,
                other => return Err(inconsistent(format!("scaling flag {other}; 0 or 1 allowed"))),
            },
        };
        let count = reader.u32()? as usize;
        if count == 0 || count > MAX_SUB_FILTERS {
            return Err(inconsistent(format!(
                "{count} sub-filters; 1..={MAX_SUB_FILTERS} allowed"
            )));
        }
        check_options(initial_capacity, fpp, &options)?;
        let mut filter = Self {
            filters: Vec::with_capacity(count),
            initial_capacity,
            fpp,
            options,
        };
        let mut rest = payload;
        for _ in 0..count {
            let capacity = reader.u64()?;
            let len = reader.u64()?;
            let (sub, tail) = read_embedded(&mut reader, rest)?;
            rest = tail;
            filter.filters.push(SubFilter {
                filter: sub,
                capacity,
                len,
            });
        }
        reader.finish()?;
        if !rest.is_empty() {
            return Err(inconsistent(format!(
                "{} payload bytes after the last sub-filter",
                rest.len()
            )));
        }
        Ok(filter)
    }
}
