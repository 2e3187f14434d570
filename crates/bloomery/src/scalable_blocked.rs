//! The scalable filter's growth over blocked sub-filters: a chain that grows as items
//! arrive (as [`ScalableBloomFilter`](crate::ScalableBloomFilter) and RedisBloom do), each
//! sub-filter a [`BlockedBloomFilter`], so an item costs one cache line per sub-filter
//! instead of k scattered bits, and every sub-filter shares one seed: an item is hashed
//! once (XXH3-64), whatever the number of sub-filters.
//!
//! Sub-filter i holds c·s^i items at p·(1 - r)·r^i (c the initial capacity, s the
//! expansion, r the tightening), so the compound rate stays below p; a non-scaling filter
//! has one sub-filter at the full rate p. An insert first asks every sub-filter, so an item
//! is counted once; when the newest sub-filter holds its capacity, the next one starts.
//! Batches hash every item once and prefetch its block in every sub-filter ahead of use.
//!
//! Sub-filters share the hash, so an item's block in one sub-filter and in another sit at
//! the same relative position; the compound rate is still at most the sum of the
//! sub-filters' rates (the union bound does not need them independent), which is what the
//! sizing promises. Measured in the tests: p = 1% requested, at most 1% over fresh items.
//!
//! ```
//! use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
//! use bloomery::ScalableOptions;
//!
//! let mut filter = ScalableBlockedBloomFilter::new(100, 0.01, ScalableOptions::for_blocked(), 0)?;
//! for i in 0..1_000i64 {
//!     filter.insert(&i.to_le_bytes())?;
//! }
//! assert!(filter.num_filters() > 1);
//! assert!(filter.contains(&999i64.to_le_bytes()));
//! let items: Vec<[u8; 8]> = (0..1_000i64).map(i64::to_le_bytes).collect();
//! let items: Vec<&[u8]> = items.iter().map(|item| &item[..]).collect();
//! let mut present = vec![false; items.len()];
//! filter.contains_batch(&items, &mut present);
//! assert!(present.iter().all(|&p| p));
//! # Ok::<(), bloomery::Error>(())
//! ```

use std::borrow::Cow;

use crate::BlockedBloomFilter;
use crate::any::GrowthLimit;
use crate::bits::impl_try_clone;
use crate::error::{Error, Result, inconsistent};
use crate::format::native::{ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{Funnel, xxh3_64_item};
use crate::scalable::{
    MAX_SUB_FILTERS, ScalableOptions, check_options, first_sub_filter_error, sub_filter_params,
};
use crate::sizing::{BLOCK_BITS, blocked_num_blocks};

/// Items hashed and prefetched ahead in the batch calls.
const AHEAD: usize = 16;

/// The tightening a chain of blocked sub-filters takes by default
/// ([`ScalableOptions::for_blocked`]): 0.8, where classic chains (and RedisBloom) take 0.5.
/// A blocked sub-filter sets 8 bits per item whatever its rate, so its bits per item grow
/// as the rate falls much faster than a classic filter's 1.44 bits per halving (see
/// [`blocked_num_blocks`]), and halving the rate at every link makes deep links costly:
/// a chain from capacity 100 at 1% holds 10^6 items in 4.6 MB at 0.8 against 10.5 MB at
/// 0.5; with growth 1, 64 links of 10 items take 7 KB at 0.8, where 0.5 passes 64 MiB; a
/// chain that never grows past its first link pays 19% more (`cargo test --release -p
/// bloomery --test scalable_blocked deep -- --nocapture` prints these). The rates still
/// sum to at most p.
pub const BLOCKED_TIGHTENING: f64 = 0.8;

#[derive(Clone, Debug, PartialEq)]
struct Link {
    filter: BlockedBloomFilter,
    capacity: u64,
    len: u64,
}

impl_try_clone!(Link, fallible: [filter], copied: [capacity, len]);

/// A growing chain of blocked filters (see the [module](self) documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableBlockedBloomFilter {
    links: Vec<Link>,
    initial_capacity: u64,
    fpp: f64,
    options: ScalableOptions,
    seed: u64,
}

impl_try_clone!(ScalableBlockedBloomFilter, fallible: [links], copied: [initial_capacity, fpp, options, seed]);

impl ScalableBlockedBloomFilter {
    /// A filter starting with room for `capacity` items at `fpp`, growing as `options`
    /// say, hashing with `seed`.
    pub fn new(capacity: u64, fpp: f64, options: ScalableOptions, seed: u64) -> Result<Self> {
        check_options(capacity, fpp, &options)?;
        let mut filter = Self {
            links: Vec::new(),
            initial_capacity: capacity,
            fpp,
            options,
            seed,
        };
        filter
            .push_link(GrowthLimit::None)
            .map_err(|error| first_sub_filter_error(error, capacity, fpp, &options))?;
        Ok(filter)
    }

    /// Bytes of the first sub-filter of [`new`](Self::new), without allocating.
    pub fn first_link_bytes(capacity: u64, fpp: f64, options: &ScalableOptions) -> Result<u64> {
        check_options(capacity, fpp, options)?;
        let (first, share) = sub_filter_params(capacity, fpp, options, 0);
        let blocks = blocked_num_blocks(first, share)
            .map_err(|error| first_sub_filter_error(error, capacity, fpp, options))?;
        Ok(blocks.saturating_mul(BLOCK_BITS / 8))
    }

    /// The next sub-filter's capacity and block count, or why there can be no next one: the
    /// filter has its most sub-filters ([`Error::SubFilterLimit`]), or the next one cannot
    /// be sized.
    fn next_link(&self) -> Result<(u64, u64)> {
        let index = self.links.len();
        if index >= MAX_SUB_FILTERS {
            return Err(Error::SubFilterLimit {
                limit: MAX_SUB_FILTERS as u64,
                capacity: self.capacity(),
            });
        }
        let (capacity, fpp) = sub_filter_params(self.initial_capacity, self.fpp, &self.options, index);
        Ok((capacity, blocked_num_blocks(capacity, fpp)?))
    }

    /// Whether the filter adds a sub-filter when its newest is full: false when it does
    /// not scale, has its most sub-filters, or cannot size the next one (past the most
    /// blocks). Then it refuses items beyond its [`capacity`](Self::capacity).
    pub fn can_grow(&self) -> bool {
        self.options.scaling && self.next_link().is_ok()
    }

    /// Adds the next sub-filter, unless it would take the filter past `memory_limit`.
    fn push_link(&mut self, limit: GrowthLimit<'_>) -> Result<()> {
        let (capacity, num_blocks) = self.next_link()?;
        limit.check(self.memory_bytes(), num_blocks.saturating_mul(BLOCK_BITS / 8))?;
        self.links.push(Link {
            filter: BlockedBloomFilter::with_num_blocks(num_blocks, self.seed)?,
            capacity,
            len: 0,
        });
        Ok(())
    }

    /// The item's hash (the same in every sub-filter).
    pub fn hash<T: Funnel + ?Sized>(&self, item: &T) -> u64 {
        xxh3_64_item(item, self.seed)
    }

    /// Whether the item might be present.
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hash(item))
    }

    /// Whether the item with this hash might be present.
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.links
            .iter()
            .rev()
            .any(|link| link.filter.contains_hash(hash))
    }

    /// Adds the item: `Ok(true)` when added, `Ok(false)` when (probably) present already,
    /// [`Error::Full`] when a non-scaling filter is at capacity, [`Error::SubFilterLimit`]
    /// when a scaling one is and has its most sub-filters,
    /// the error of sizing the next, tighter sub-filter when it cannot be sized (past the
    /// most blocks); the item is not added then.
    pub fn insert<T: Funnel + ?Sized>(&mut self, item: &T) -> Result<bool> {
        self.insert_hash_within(self.hash(item), None)
    }

    /// As [`insert`](Self::insert) for an item's hash, refusing with
    /// [`Error::MemoryLimit`] (before allocating) growth past `memory_limit` bytes.
    pub fn insert_hash_within(&mut self, hash: u64, memory_limit: Option<u64>) -> Result<bool> {
        self.insert_hash_limited(hash, memory_limit.into())
    }

    /// As [`insert_hash_within`](Self::insert_hash_within), under any [`GrowthLimit`].
    pub(crate) fn insert_hash_limited(&mut self, hash: u64, limit: GrowthLimit<'_>) -> Result<bool> {
        if self.contains_hash(hash) {
            return Ok(false);
        }
        let newest = self.links.last().expect("a chain has a sub-filter");
        if newest.len >= newest.capacity {
            if !self.options.scaling {
                return Err(Error::Full {
                    capacity: self.capacity(),
                });
            }
            self.push_link(limit)?;
        }
        let newest = self.links.last_mut().expect("a chain has a sub-filter");
        newest.filter.insert_hash(hash);
        newest.len = newest.len.saturating_add(1);
        Ok(true)
    }

    /// Adds the item whatever the filter's capacity: where [`insert`](Self::insert) refuses
    /// it (a non-scaling filter at capacity, a chain at its most sub-filters or unable to
    /// size or allocate the next one), it goes into the newest sub-filter beyond that
    /// sub-filter's capacity, so the rate there rises above the promise instead of the
    /// item being lost. Nothing limits growth. For a server replaying adds that another
    /// accepted (a replica of a primary made with other defaults, an AOF written by
    /// another module), where a refusal would be a false negative.
    ///
    /// ```
    /// use bloomery::ScalableOptions;
    /// use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
    ///
    /// let options = ScalableOptions { scaling: false, ..ScalableOptions::for_blocked() };
    /// let mut filter = ScalableBlockedBloomFilter::new(10, 0.01, options, 0)?;
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
    /// goes into the newest sub-filter instead (a replay that tried to allocate more than
    /// the machine holds would stop the server).
    pub fn insert_past_capacity_within<T: Funnel + ?Sized>(
        &mut self,
        item: &T,
        limit: GrowthLimit<'_>,
    ) -> Result<bool> {
        let hash = self.hash(item);
        match self.insert_hash_limited(hash, limit) {
            Err(_) => {
                // Refused only at a growth step, the item absent: into the newest.
                let newest = self.links.last_mut().expect("a chain has a sub-filter");
                newest.filter.insert_hash(hash);
                newest.len = newest.len.saturating_add(1);
                Ok(true)
            }
            answer => answer,
        }
    }

    /// Looks up every item, hashing each once and prefetching its block in every
    /// sub-filter; `results` gets one answer per item. Panics if the lengths differ.
    pub fn contains_batch(&self, items: &[&[u8]], results: &mut [bool]) {
        assert_eq!(items.len(), results.len(), "one result per item");
        let hashes: Vec<u64> = items.iter().map(|item| self.hash(*item)).collect();
        self.contains_hash_batch(&hashes, results);
    }

    /// Looks up every hash (see [`contains_batch`](Self::contains_batch)).
    pub fn contains_hash_batch(&self, hashes: &[u64], results: &mut [bool]) {
        assert_eq!(hashes.len(), results.len(), "one result per hash");
        results.fill(false);
        let mut found = vec![false; hashes.len()];
        for link in self.links.iter().rev() {
            link.filter.contains_hash_batch(hashes, &mut found);
            for (result, &present) in results.iter_mut().zip(&found) {
                *result |= present;
            }
        }
    }

    /// Adds every item in order, with the answers [`insert`](Self::insert) gives
    /// (`added[i]`: whether item i was new), stopping at the first refusal: the items
    /// before it are added and the error is returned. Each item is hashed once and its
    /// blocks prefetched a few items ahead.
    pub fn insert_batch_within(
        &mut self,
        items: &[&[u8]],
        added: &mut [bool],
        memory_limit: Option<u64>,
    ) -> Result<()> {
        match self.insert_batch_until(items, added, memory_limit) {
            (_, None) => Ok(()),
            (_, Some(error)) => Err(error),
        }
    }

    /// As [`insert_batch_within`](Self::insert_batch_within), telling how many items
    /// were taken before a refusal: `(items.len(), None)` when all were, else `(i,
    /// Some(error))` with item `i` refused and the ones before it added (a server's
    /// multi-item command answers each and replicates exactly those).
    pub fn insert_batch_until(
        &mut self,
        items: &[&[u8]],
        added: &mut [bool],
        memory_limit: Option<u64>,
    ) -> (usize, Option<Error>) {
        self.insert_batch_limited(items, added, memory_limit.into())
    }

    /// As [`insert_batch_until`](Self::insert_batch_until), under any [`GrowthLimit`].
    pub(crate) fn insert_batch_limited(
        &mut self,
        items: &[&[u8]],
        added: &mut [bool],
        limit: GrowthLimit<'_>,
    ) -> (usize, Option<Error>) {
        assert_eq!(items.len(), added.len(), "one answer per item");
        let hashes: Vec<u64> = items.iter().map(|item| self.hash(*item)).collect();
        for (i, &hash) in hashes.iter().enumerate() {
            if let Some(&ahead) = hashes.get(i + AHEAD) {
                for link in &self.links {
                    link.filter.prefetch_hash(ahead);
                }
            }
            match self.insert_hash_limited(hash, limit) {
                Ok(new) => added[i] = new,
                Err(error) => return (i, Some(error)),
            }
        }
        (items.len(), None)
    }

    /// Items added.
    pub fn len(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.len))
    }

    /// Whether no item was added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every item: the chain goes back to its first sub-filter, emptied (its
    /// size kept), as a new filter of the same parameters starts.
    pub fn clear(&mut self) {
        self.links.truncate(1);
        for link in &mut self.links {
            link.filter.clear();
            link.len = 0;
        }
    }

    /// The items the current sub-filters hold before the next one is needed.
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.capacity))
    }

    /// The number of sub-filters.
    pub fn num_filters(&self) -> usize {
        self.links.len()
    }

    /// The growth options.
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

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Each sub-filter's capacity, items, bits and the rate it was sized for, oldest first.
    pub fn sub_filters(&self) -> Vec<(u64, u64, u64, f64)> {
        self.links
            .iter()
            .enumerate()
            .map(|(index, link)| {
                let (_, fpp) = sub_filter_params(self.initial_capacity, self.fpp, &self.options, index);
                (link.capacity, link.len, link.filter.num_bits(), fpp)
            })
            .collect()
    }

    /// Bytes of bits in all sub-filters.
    pub fn memory_bytes(&self) -> u64 {
        self.links
            .iter()
            .map(|link| link.filter.num_bits() / 8)
            .fold(0u64, u64::saturating_add)
    }

    /// The probability that a fresh item is reported present now, from each sub-filter's
    /// bits (not its stored count, which a file may carry wrong).
    pub fn expected_fpp(&self) -> f64 {
        1.0 - self
            .links
            .iter()
            .map(|link| 1.0 - link.filter.expected_fpp())
            .product::<f64>()
    }
}

/// Parameters (variant 10): initial capacity u64, fpp f64, expansion u32, tightening f64,
/// scaling u8, seed u64, count u32, then per sub-filter its capacity u64, items u64 and
/// num_blocks u64. Payload: the sub-filters' blocks in order.
impl Persist for ScalableBlockedBloomFilter {
    const VARIANT: Variant = Variant::ScalableBlocked;

    fn params(&self) -> Vec<u8> {
        let mut writer = ParamWriter::new()
            .u64(self.initial_capacity)
            .f64(self.fpp)
            .u32(self.options.expansion)
            .f64(self.options.tightening)
            .u8(u8::from(self.options.scaling))
            .u64(self.seed)
            .u32(self.links.len() as u32);
        for link in &self.links {
            writer = writer
                .u64(link.capacity)
                .u64(link.len)
                .u64(link.filter.num_blocks());
        }
        writer.finish()
    }

    fn payload_pieces(&self) -> Vec<Cow<'_, [u8]>> {
        self.links
            .iter()
            .flat_map(|link| Persist::payload_pieces(&link.filter))
            .collect()
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let mut reader = ParamReader::new(params);
        let initial_capacity = reader.u64()?;
        let fpp = reader.f64()?;
        let expansion = reader.u32()?;
        let tightening = reader.f64()?;
        let scaling = match reader.u8()? {
            0 => false,
            1 => true,
            other => return Err(inconsistent(format!("scaling is {other}, must be 0 or 1"))),
        };
        let seed = reader.u64()?;
        let count = reader.u32()? as usize;
        let options = ScalableOptions {
            expansion,
            tightening,
            scaling,
        };
        check_options(initial_capacity, fpp, &options).map_err(|error| inconsistent(error.to_string()))?;
        if count == 0 || count > MAX_SUB_FILTERS {
            return Err(inconsistent(format!(
                "{count} sub-filters; 1..={MAX_SUB_FILTERS} allowed"
            )));
        }
        let mut shapes = Vec::with_capacity(count);
        for _ in 0..count {
            shapes.push((reader.u64()?, reader.u64()?, reader.u64()?));
        }
        reader.finish()?;
        // Every length is checked against the payload before anything is allocated.
        let block_bytes = BLOCK_BITS / 8;
        let total = shapes.iter().try_fold(0u64, |sum, &(_, _, num_blocks)| {
            num_blocks
                .checked_mul(block_bytes)
                .and_then(|bytes| sum.checked_add(bytes))
        });
        if total != Some(payload.len() as u64) {
            return Err(inconsistent(format!(
                "the sub-filters' blocks do not add up to the {}-byte payload",
                payload.len()
            )));
        }
        let mut rest = payload;
        let mut links = Vec::with_capacity(count);
        for (capacity, len, num_blocks) in shapes {
            let (mine, others) = rest.split_at((num_blocks * block_bytes) as usize);
            rest = others;
            let blocked_params = ParamWriter::new()
                .u64(num_blocks)
                .u32(8)
                .u32(crate::blocked::HASHER_XXH3_64)
                .u64(seed)
                .finish();
            links.push(Link {
                filter: BlockedBloomFilter::from_parts(&blocked_params, mine)?,
                capacity,
                len,
            });
        }
        Ok(Self {
            links,
            initial_capacity,
            fpp,
            options,
            seed,
        })
    }

    fn from_parts_of_version(version: u16, params: &[u8], payload: &[u8]) -> Result<Self> {
        if version < 2 {
            return Err(inconsistent(format!(
                "format version {version} has no scalable-blocked variant (it was added in version 2)"
            )));
        }
        Self::from_parts(params, payload)
    }
}
