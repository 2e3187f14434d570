//! One object-safe interface for every saved variant, so tools (the CLI, the Redis module,
//! bindings) are written once: [`DynFilter`] inserts, looks up, removes, combines, reports
//! and saves any filter; [`FilterView`] is its read-only half, also served in place by a
//! memory-mapped file. [`create`], [`open`] and [`view`] are the only places that choose a
//! variant, by its stored code.
//!
//! Items are the bytes a [`Funnel`](crate::Funnel) gives: a string's UTF-8 bytes, a byte
//! string as it is, an `i64`'s 8 little-endian bytes (Guava's `putLong`). Every filter
//! hashes exactly those bytes, so `contains(b"apple")` here answers as
//! `contains("apple")` through the typed API, in every language that follows
//! docs/format.md.
//!
//! ```
//! use bloomery::any::{self, Spec};
//! use bloomery::format::native::Variant;
//!
//! let mut filter = any::create(&Spec::new(Variant::Scalable, 100, 0.01))?;
//! assert!(filter.insert(b"apple")?);
//! assert!(!filter.insert(b"apple")?); // already present
//! let bytes = filter.envelope().to_vec();
//! let loaded = any::open(&bytes)?;
//! assert!(loaded.contains(b"apple"));
//! assert_eq!(loaded.variant(), Variant::Scalable);
//! # Ok::<(), bloomery::Error>(())
//! ```

use std::any::Any;

use crate::blocked::BlockedBloomFilterView;
use crate::classic::BloomFilterView;
use crate::error::{Error, Result};
use crate::format::native::{self, Envelope, Header, Persist, Variant};
use crate::redisbloom::RedisBloomFilter;
use crate::scalable_blocked::ScalableBlockedBloomFilter;
use crate::sizing::ClassicShape;
use crate::split_block::{SplitBlockBloomFilterView, SplitBlockHasher};
use crate::{
    AllowlistedBloomFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter, FilterStats,
    RetouchedBloomFilter, RotatingBloomFilter, ScalableBloomFilter, ScalableOptions, SplitBlockBloomFilter,
};

/// A filter's state, whatever its variant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// Distinct items: counted where the filter counts them (scalable, rotating), else
    /// estimated from the bits set. `u64::MAX` when every bit is set.
    pub estimated_len: u64,
    /// The probability that a fresh item is reported present, as the filter is now.
    pub expected_fpp: f64,
    /// Bytes of bits, counters and bookkeeping in memory.
    pub memory_bytes: u64,
    /// The items the filter is sized for now, before it grows (a scalable filter), starts
    /// a generation (a rotating one) or refuses more (a non-scaling one). Classic, counting,
    /// retouched and allow-listed filters take any number at a rising false-positive rate;
    /// for them this is the most items their shape can have been sized for (Guava's shape:
    /// [`sized_capacity`](crate::sizing::sized_capacity); the others' shape:
    /// [`rate_capacity`](crate::sizing::rate_capacity)). `None` for blocked and
    /// split-block filters whose files keep no sizing.
    pub capacity: Option<u64>,
    /// Whether items beyond `capacity` are refused: those of a filter that does not scale,
    /// and those of a scaling one that cannot grow any further (at its most sub-filters,
    /// or whose next sub-filter cannot be sized). The filters that grow tell which with
    /// `can_grow` ([`ScalableBloomFilter::can_grow`]).
    pub refuses_beyond_capacity: bool,
    /// Sub-filters (scalable) or generations (rotating); 1 for the others.
    pub sub_filters: u64,
    /// How much larger each new sub-filter is, for filters that grow.
    pub expansion: Option<u32>,
}

/// What every filter answers, including a read-only view of a memory-mapped file.
pub trait FilterView: Send + Sync {
    /// The variant (its code is stored in files).
    fn variant(&self) -> Variant;

    /// Whether the item with these bytes might be present: `false` is certain except for
    /// the false negatives a caller asks for: those a retouched filter's removals report,
    /// a counting filter's removal of an item that was never added, an allow-listed
    /// filter's `allow` of an inserted item, and the items of the generations a rotating
    /// filter dropped.
    fn contains(&self, item: &[u8]) -> bool;

    /// Looks up every item; `results` gets one answer per item. Panics if the lengths
    /// differ. The blocked filter hashes ahead and prefetches.
    fn contains_batch(&self, items: &[&[u8]], results: &mut [bool]) {
        assert_eq!(items.len(), results.len(), "one result per item");
        for (result, item) in results.iter_mut().zip(items) {
            *result = self.contains(item);
        }
    }

    /// Counts and estimates.
    fn stats(&self) -> Stats;

    /// The variant's parameters, as (name, value) lines for people (`bloomery info`).
    fn describe(&self) -> Vec<(&'static str, String)>;
}

/// How far a growing filter's growth step (a new sub-filter, link or generation) may go
/// ([`DynFilter::insert_within`]): checked before anything is allocated, refused with
/// [`Error::MemoryLimit`].
#[derive(Clone, Copy)]
pub enum GrowthLimit<'a> {
    /// No limit.
    None,
    /// The filter's bytes after the step, at most this many (a server's cap per key, a
    /// tool's limit computed per batch).
    Total(u64),
    /// The step's own bytes, at most what this says when asked, which is only when a step
    /// is due (so it may be costly: the memory available now,
    /// [`crate::file::memory_available`]).
    Room(&'a dyn Fn() -> u64),
}

impl GrowthLimit<'_> {
    /// Refuses a step that allocates `new_bytes` for a filter of `kept_bytes` (what stays
    /// of it once the step is done: a rotating filter drops its oldest generation after).
    pub(crate) fn check(self, kept_bytes: u64, new_bytes: u64) -> Result<()> {
        let needed = kept_bytes.saturating_add(new_bytes);
        let limit = match self {
            GrowthLimit::None => return Ok(()),
            GrowthLimit::Total(limit) => limit,
            GrowthLimit::Room(room) => {
                let room = room();
                if new_bytes <= room {
                    return Ok(());
                }
                kept_bytes.saturating_add(room)
            }
        };
        if needed > limit {
            return Err(Error::MemoryLimit { needed, limit });
        }
        Ok(())
    }
}

impl From<Option<u64>> for GrowthLimit<'_> {
    fn from(limit: Option<u64>) -> Self {
        limit.map_or(GrowthLimit::None, GrowthLimit::Total)
    }
}

/// A growing filter's batch held to `limit` (`insert_batch_within`): item by item,
/// stopping at the first refusal.
fn each_within(filter: &mut dyn DynFilter, items: &[&[u8]], limit: GrowthLimit<'_>) -> Result<()> {
    for item in items {
        filter.insert_within(item, limit)?;
    }
    Ok(())
}

/// Everything a tool does with a filter it owns.
pub trait DynFilter: FilterView {
    /// Adds the item with these bytes: `Ok(true)` when it was new (the filter answered
    /// "absent" for it just before this insert; a rotating filter as
    /// [`RotatingBloomFilter::contains_at`](crate::RotatingBloomFilter::contains_at) at the
    /// insert's time), `Ok(false)` when it was found (inserted before, or a false
    /// positive), an error when the filter refused it (full, or unable to grow): then the
    /// item was not added. The filter may change on `Ok(false)` too: a counting filter
    /// counts every insert, a rotating filter copies a found item into its newest
    /// generation (starting one first when due).
    fn insert(&mut self, item: &[u8]) -> Result<bool>;

    /// As [`insert`](Self::insert), but refusing with [`Error::MemoryLimit`], before
    /// allocating, a growth step (a scalable filter's new sub-filter, a rotating filter's
    /// new generation) past `limit`. Filters of a fixed size never allocate on insert (and
    /// never ask a [`GrowthLimit::Room`]); the retouched filter's item lists grow by 16
    /// bytes per item and are not limited here.
    ///
    /// ```
    /// use bloomery::any::{self, GrowthLimit, Spec};
    /// use bloomery::format::native::Variant;
    ///
    /// let mut filter = any::create(&Spec::new(Variant::Scalable, 100, 0.01))?;
    /// let asked = std::cell::Cell::new(0);
    /// let room = || {
    ///     asked.set(asked.get() + 1);
    ///     0 // bytes: no room for a second sub-filter
    /// };
    /// let mut refused = None;
    /// for i in 0..1_000u32 {
    ///     if let Err(error) = filter.insert_within(&i.to_le_bytes(), GrowthLimit::Room(&room)) {
    ///         refused = Some(error);
    ///         break;
    ///     }
    /// }
    /// assert!(matches!(refused, Some(bloomery::Error::MemoryLimit { .. })));
    /// assert_eq!(asked.get(), 1); // once, when the first sub-filter was full
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    fn insert_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        let _ = limit;
        self.insert(item)
    }

    /// Adds the item whatever the filter's capacity, for a server replaying adds that
    /// another accepted (a replica of a primary made with other defaults, an AOF another
    /// module wrote): where [`insert`](Self::insert) refuses an item for capacity (a
    /// non-scaling chain full, a chain at its most sub-filters or unable to make the next),
    /// the item goes into the newest sub-filter beyond its capacity instead, so it is never
    /// lost; nothing limits growth. Filters that never refuse for capacity just insert.
    ///
    /// ```
    /// use bloomery::any::{self, Spec};
    /// use bloomery::format::native::Variant;
    /// use bloomery::ScalableOptions;
    ///
    /// let spec = Spec {
    ///     scalable: ScalableOptions { scaling: false, ..ScalableOptions::for_blocked() },
    ///     ..Spec::new(Variant::ScalableBlocked, 10, 0.01)
    /// };
    /// let mut filter = any::create(&spec)?;
    /// for i in 0..10u32 {
    ///     filter.insert(&i.to_le_bytes())?;
    /// }
    /// assert!(filter.insert(b"eleventh").is_err()); // full
    /// assert!(filter.insert_past_capacity(b"eleventh")?);
    /// assert!(filter.contains(b"eleventh"));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    fn insert_past_capacity(&mut self, item: &[u8]) -> Result<bool> {
        self.insert_past_capacity_within(item, GrowthLimit::None)
    }

    /// As [`insert_past_capacity`](Self::insert_past_capacity), with each growth step held
    /// to `limit` before it allocates: a step it refuses is not taken, and the item goes
    /// into the newest sub-filter beyond its capacity instead. For a replay, which must
    /// neither refuse an item nor allocate more than the machine holds (the server would
    /// stop). Filters that never grow just insert.
    fn insert_past_capacity_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        let _ = limit;
        self.insert(item)
    }

    /// Adds every item in order (the blocked filter hashes ahead and prefetches). Stops at
    /// the first refusal, with the items before it added.
    fn insert_batch(&mut self, items: &[&[u8]]) -> Result<()> {
        for item in items {
            self.insert(item)?;
        }
        Ok(())
    }

    /// As [`insert_batch`](Self::insert_batch), each growth step held to `limit` as
    /// [`insert_within`](Self::insert_within) holds it. Filters of a fixed size take their
    /// batch call.
    fn insert_batch_within(&mut self, items: &[&[u8]], limit: GrowthLimit<'_>) -> Result<()> {
        let _ = limit;
        self.insert_batch(items)
    }

    /// Removes one occurrence of the item (counting filters only).
    fn remove(&mut self, item: &[u8]) -> Result<()> {
        let _ = item;
        Err(unsupported(self.variant(), "remove"))
    }

    /// Adds every item of `other`, which must be the same variant with the same
    /// parameters that decide bit positions.
    fn union(&mut self, other: &dyn DynFilter) -> Result<()> {
        let _ = other;
        Err(unsupported(self.variant(), "union (merge)"))
    }

    /// Keeps only what both filters hold (same variant and parameters).
    fn intersection(&mut self, other: &dyn DynFilter) -> Result<()> {
        let _ = other;
        Err(unsupported(self.variant(), "intersection"))
    }

    /// Removes every item, keeping the filter's parameters: a growing filter (scalable,
    /// redisbloom, scalable-blocked) goes back to its first sub-filter, a rotating one to
    /// its newest generation, each emptied; what a filter keeps beside its bits (a
    /// counting filter's counters, an allow list, a retouched filter's bookkeeping and the
    /// state its Random scheme draws from) goes too: every variant but the rotating one is
    /// then as new, bytes included. Every variant of the library clears; a filter of
    /// another crate may refuse.
    ///
    /// ```
    /// use bloomery::any::{self, Spec};
    /// use bloomery::format::native::Variant;
    ///
    /// for variant in Variant::ALL {
    ///     let mut filter = any::create(&Spec::new(variant, 100, 0.01))?;
    ///     let empty = filter.envelope().to_vec();
    ///     for i in 0..1_000u32 {
    ///         filter.insert(&i.to_le_bytes())?; // past the capacity: the growing ones grow
    ///     }
    ///     filter.clear()?;
    ///     assert!(!filter.contains(&7u32.to_le_bytes()), "{variant:?}");
    ///     if variant != Variant::Rotating {
    ///         assert_eq!(filter.envelope().to_vec(), empty, "{variant:?}"); // as new
    ///     }
    /// }
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    fn clear(&mut self) -> Result<()> {
        Err(unsupported(self.variant(), "clear"))
    }

    /// The filter's file form (docs/format.md), borrowed from its memory.
    fn envelope(&self) -> Envelope<'_>;

    /// The length of [`envelope`](Self::envelope) in bytes, without making it: a caller
    /// checking that a copy or a file of the filter fits uses it, where `envelope()` of a
    /// retouched or allow-listed filter builds its payload (their lists) to measure it.
    ///
    /// ```
    /// use bloomery::any::{self, Spec};
    /// use bloomery::format::native::Variant;
    ///
    /// for variant in Variant::ALL {
    ///     let mut filter = any::create(&Spec::new(variant, 1000, 0.01))?;
    ///     filter.insert(b"an item")?;
    ///     assert_eq!(filter.envelope_len(), filter.envelope().to_vec().len() as u64);
    /// }
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    fn envelope_len(&self) -> u64;

    /// The concrete filter, for callers that need one variant's own API.
    fn as_any(&self) -> &dyn Any;

    /// The concrete filter, mutable: the Redis module loads a `BF.SCANDUMP` piece into a
    /// RedisBloom filter in place, and inserts pre-computed hashes into a sharded filter's
    /// blocked shards through it.
    fn as_any_mut(&mut self) -> &mut dyn Any;

    /// A copy. Aborts the process, as `Clone` does, when the system refuses its memory:
    /// see [`try_clone_box`](Self::try_clone_box).
    fn clone_box(&self) -> Box<dyn DynFilter>;

    /// A copy, or [`Error::OutOfMemory`] when the system refuses
    /// its memory ([`TryClone`](crate::TryClone)): what a server copying a filter on a
    /// client's request calls, so that the request fails and the server stays up.
    ///
    /// ```
    /// use bloomery::any::{self, Spec};
    /// use bloomery::format::native::Variant;
    ///
    /// for variant in Variant::ALL {
    ///     let mut filter = any::create(&Spec::new(variant, 1000, 0.01))?;
    ///     for i in 0..3_000u32 {
    ///         filter.insert(&i.to_le_bytes())?; // past the capacity: the growing ones grow
    ///     }
    ///     filter.insert(b"kept")?;
    ///     let copy = filter.try_clone_box()?;
    ///     assert!(copy.contains(b"kept"), "{variant:?}");
    ///     assert_eq!(copy.envelope().to_vec(), filter.envelope().to_vec(), "{variant:?}");
    /// }
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    fn try_clone_box(&self) -> Result<Box<dyn DynFilter>>;
}

impl Clone for Box<dyn DynFilter> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// The hasher of the split-block filter `spec` makes.
fn split_block_hasher(spec: &Spec) -> SplitBlockHasher {
    if spec.split_block_parquet {
        SplitBlockHasher::Parquet
    } else {
        SplitBlockHasher::Xxh3 { seed: spec.seed }
    }
}

fn unsupported(variant: Variant, operation: &'static str) -> Error {
    Error::Unsupported {
        variant: variant.name(),
        operation,
    }
}

/// `other` as the concrete type `F`, or an error naming both variants.
fn same_variant<F: 'static>(mine: Variant, other: &dyn DynFilter) -> Result<&F> {
    other
        .as_any()
        .downcast_ref::<F>()
        .ok_or_else(|| Error::Incompatible {
            reason: format!("variants differ: {} vs {}", mine.name(), other.variant().name()),
        })
}

/// What a new filter should be.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spec {
    /// The variant.
    pub variant: Variant,
    /// Expected distinct items: the capacity (for scalable filters, of the first
    /// sub-filter; for rotating filters, of each generation).
    pub expected_items: u64,
    /// The false-positive probability at that many items, in (0, 1).
    pub fpp: f64,
    /// The blocked filter's hash seed (and the split-block filter's, with
    /// [`SplitBlockHasher::Xxh3`]).
    pub seed: u64,
    /// Whether a split-block filter hashes as Parquet does (XXH64, seed 0: the default, and
    /// the only one Parquet can read) or with XXH3-64 and `seed`, the blocked filter's item
    /// hash ([`SplitBlockHasher`]).
    pub split_block_parquet: bool,
    /// The scalable filter's growth.
    pub scalable: ScalableOptions,
    /// The rotating filter's number of generations (2..=1024).
    pub generations: usize,
}

impl Spec {
    /// A spec with the defaults: seed 0, growth 2 with tightening 0.5 (0.8 for a chain of
    /// blocked sub-filters: [`ScalableOptions::for_blocked`]), 2 generations.
    pub fn new(variant: Variant, expected_items: u64, fpp: f64) -> Self {
        Self {
            variant,
            expected_items,
            fpp,
            seed: crate::blocked::DEFAULT_SEED,
            split_block_parquet: true,
            scalable: if variant == Variant::ScalableBlocked {
                ScalableOptions::for_blocked()
            } else {
                ScalableOptions::default()
            },
            generations: 2,
        }
    }
}

/// An option of a [`Spec`] that only some variants take; the others ignore it
/// ([`Spec::takes`]), and the tools refuse it for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecOption {
    /// [`Spec::seed`]: blocked and scalable-blocked filters, split-block filters hashed
    /// with XXH3.
    Seed,
    /// [`Spec::generations`]: rotating filters.
    Generations,
    /// [`ScalableOptions::scaling`]: scalable, redisbloom and scalable-blocked filters.
    Scaling,
}

impl Spec {
    /// Whether the variant takes `option`.
    ///
    /// ```
    /// use bloomery::any::{Spec, SpecOption};
    /// use bloomery::format::native::Variant;
    ///
    /// let mut split = Spec::new(Variant::SplitBlock, 100, 0.01);
    /// assert!(!split.takes(SpecOption::Seed)); // Parquet's XXH64, seed 0
    /// split.split_block_parquet = false;
    /// assert!(split.takes(SpecOption::Seed));
    /// assert!(!Spec::new(Variant::Classic, 100, 0.01).takes(SpecOption::Scaling));
    /// ```
    pub fn takes(&self, option: SpecOption) -> bool {
        let variant = self.variant;
        match option {
            SpecOption::Seed => {
                matches!(variant, Variant::Blocked | Variant::ScalableBlocked)
                    || (variant == Variant::SplitBlock && !self.split_block_parquet)
            }
            SpecOption::Generations => variant == Variant::Rotating,
            SpecOption::Scaling => matches!(
                variant,
                Variant::Scalable | Variant::RedisBloom | Variant::ScalableBlocked
            ),
        }
    }
}

impl Spec {
    /// Refuses an option the variant does not take: the choice of XXH3 over Parquet's
    /// XXH64 is the split-block filter's.
    ///
    /// ```
    /// use bloomery::any::{self, Spec};
    /// use bloomery::format::native::Variant;
    ///
    /// let mut spec = Spec::new(Variant::Classic, 1000, 0.01);
    /// spec.split_block_parquet = false;
    /// let message = any::create(&spec).err().unwrap().to_string();
    /// assert!(message.starts_with("classic filters do not support"), "{message}");
    /// ```
    fn check_options(&self) -> Result<()> {
        if !self.split_block_parquet && self.variant != Variant::SplitBlock {
            return Err(unsupported(
                self.variant,
                "the split-block filter's choice of hash (XXH3 or Parquet's XXH64)",
            ));
        }
        Ok(())
    }

    /// The bytes of bits or counters the filter takes, computed without allocating (and
    /// with the errors [`create`] would give): the whole filter for the fixed-size
    /// variants, the first sub-filter of a scalable filter, and all generations of a
    /// rotating one (what it reaches after `generations` rotations). A tool checks this
    /// against the memory and disk it has before calling [`create`].
    ///
    /// ```
    /// use bloomery::any::Spec;
    /// use bloomery::format::native::Variant;
    ///
    /// // Guava's sizing: 95,850,624 bits for 10^7 items at 1%.
    /// assert_eq!(Spec::new(Variant::Classic, 10_000_000, 0.01).memory_bytes()?, 11_981_328);
    /// let mut rotating = Spec::new(Variant::Rotating, 10_000_000, 0.01);
    /// rotating.generations = 3;
    /// // Its generations have the rate sizing's: 95,929,600 bits, where 7 hashes meet 1%.
    /// assert_eq!(rotating.memory_bytes()?, 3 * 11_991_200);
    /// assert!(Spec::new(Variant::Classic, 1000, 1e-300).memory_bytes().is_err());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn memory_bytes(&self) -> Result<u64> {
        self.check_options()?;
        let (n, p) = (self.expected_items, self.fpp);
        // Guava's shape for the classic filter; the others take the bits at which Guava's
        // hash count meets the rate (more where few items go at a low rate, for the double
        // hashing's floor: `ClassicShape::for_rate`).
        let classic_bytes = |n, p| -> Result<u64> { Ok(ClassicShape::for_rate(n, p)?.num_words as u64 * 8) };
        Ok(match self.variant {
            Variant::Classic => ClassicShape::for_fpp(n, p)?.num_words as u64 * 8,
            Variant::Retouched | Variant::Allowlisted => classic_bytes(n, p)?,
            Variant::Blocked => {
                crate::sizing::blocked_num_blocks(n, p)?.saturating_mul(crate::sizing::BLOCK_BITS / 8)
            }
            // Two 4-bit counters a byte.
            Variant::Counting => ClassicShape::for_rate(n, p)?.num_bits().div_ceil(2),
            Variant::Scalable => {
                crate::scalable::check_options(n, p, &self.scalable)?;
                let (capacity, fpp) = crate::scalable::sub_filter_params(n, p, &self.scalable, 0);
                classic_bytes(capacity, fpp)
                    .map_err(|error| crate::scalable::first_sub_filter_error(error, n, p, &self.scalable))?
            }
            Variant::Rotating => {
                crate::rotating::check_generations(self.generations)?;
                crate::rotating::check_items_per_generation(n)?;
                classic_bytes(n, p)?.saturating_mul(self.generations as u64)
            }
            Variant::SplitBlock => {
                crate::split_block::num_blocks_for(n, p, split_block_hasher(self))?
                    * (crate::sizing::SPLIT_BLOCK_BITS / 8)
            }
            Variant::RedisBloom => {
                // As `RedisBloomFilter::new` refuses it, first: `first_link_bytes` sizes
                // the first link only, which the growth does not change.
                if self.scalable.expansion < 1 {
                    return Err(Error::Parameter {
                        name: "expansion",
                        value: self.scalable.expansion.to_string(),
                        allowed: "at least 1",
                    });
                }
                RedisBloomFilter::first_link_bytes(n, p, !self.scalable.scaling)?
            }
            Variant::ScalableBlocked => ScalableBlockedBloomFilter::first_link_bytes(n, p, &self.scalable)?,
        })
    }
}

/// A new, empty filter.
pub fn create(spec: &Spec) -> Result<Box<dyn DynFilter>> {
    spec.check_options()?;
    let (n, p) = (spec.expected_items, spec.fpp);
    Ok(match spec.variant {
        Variant::Classic => Box::new(BloomFilter::with_fpp(n, p)?),
        Variant::Blocked => Box::new(BlockedBloomFilter::with_fpp_and_seed(n, p, spec.seed)?),
        Variant::Counting => Box::new(CountingBloomFilter::with_fpp(n, p)?),
        Variant::Scalable => Box::new(ScalableBloomFilter::with_options(n, p, spec.scalable)?),
        Variant::Retouched => Box::new(RetouchedBloomFilter::with_fpp(n, p)?),
        Variant::Allowlisted => Box::new(AllowlistedBloomFilter::with_fpp(n, p)?),
        Variant::Rotating => Box::new(RotatingBloomFilter::new(spec.generations, n, p)?),
        Variant::SplitBlock => Box::new(SplitBlockBloomFilter::with_fpp_and_hasher(
            n,
            p,
            split_block_hasher(spec),
        )?),
        Variant::RedisBloom => Box::new(RedisBloomFilter::new(
            n,
            p,
            spec.scalable.expansion,
            !spec.scalable.scaling,
        )?),
        Variant::ScalableBlocked => {
            Box::new(ScalableBlockedBloomFilter::new(n, p, spec.scalable, spec.seed)?)
        }
    })
}

/// The file of a new, empty filter, made without the filter: its [`header`](Self::header),
/// then zero bytes up to [`len`](Self::len). See [`empty_file`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmptyFile {
    /// The header, sealed, with the payload checksum of the zero payload.
    pub header: Vec<u8>,
    /// The file's whole length: the header's bytes and the payload's.
    pub len: u64,
}

/// The file of a new, empty filter of `spec`, byte for byte what
/// `create(spec)?.envelope()` writes, without allocating the filter: for the variants
/// updated in place ([`crate::in_place::updates_in_place`]: classic, blocked, split-block),
/// whose empty payload is all zero bytes, so that a tool writes the header and leaves the
/// rest a hole (a filter larger than the memory, or than the address space a process may
/// have, is made as quickly). The payload checksum is streamed over zeros
/// ([`native::zero_payload_checksum`]). `None` for the other variants (their empty filter
/// is not all zeros, or holds more than bits); the same errors as [`create`] for a spec it
/// refuses, but never a refusal of memory.
///
/// ```
/// use bloomery::any::{self, Spec};
/// use bloomery::format::native::Variant;
///
/// let spec = Spec::new(Variant::Blocked, 10_000, 0.01);
/// let empty = any::empty_file(&spec)?.expect("a blocked filter is updated in place");
/// let mut bytes = empty.header.clone();
/// bytes.resize(empty.len as usize, 0);
/// assert_eq!(bytes, any::create(&spec)?.envelope().to_vec());
/// assert!(any::empty_file(&Spec::new(Variant::Counting, 10_000, 0.01))?.is_none());
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn empty_file(spec: &Spec) -> Result<Option<EmptyFile>> {
    spec.check_options()?;
    let (n, p) = (spec.expected_items, spec.fpp);
    // The shape and parameters as `create`'s constructors compute and check them.
    let (params, payload_len) = match spec.variant {
        Variant::Classic => {
            let shape = ClassicShape::for_fpp(n, p)?;
            (
                crate::classic::encode_params(shape.num_hashes),
                shape.num_words as u64 * 8,
            )
        }
        Variant::Blocked => {
            let num_blocks = crate::sizing::blocked_num_blocks(n, p)?;
            crate::blocked::check_num_blocks(num_blocks)?;
            let sized_for = crate::sizing::SizedFor::new(n, p);
            (
                crate::blocked::encode_params(num_blocks, spec.seed, Some(sized_for)),
                num_blocks * (crate::sizing::BLOCK_BITS / 8),
            )
        }
        Variant::SplitBlock => {
            let hasher = split_block_hasher(spec);
            let num_blocks = crate::split_block::num_blocks_for(n, p, hasher)?;
            crate::split_block::check_num_blocks(num_blocks)?;
            (
                crate::split_block::encode_params(num_blocks, hasher),
                num_blocks * (crate::sizing::SPLIT_BLOCK_BITS / 8),
            )
        }
        _ => return Ok(None),
    };
    let header = native::encode_header_with_checksum(
        spec.variant,
        &params,
        payload_len,
        native::zero_payload_checksum(payload_len),
    );
    let len = header.len() as u64 + payload_len;
    Ok(Some(EmptyFile { header, len }))
}

/// Reads a whole envelope (any variant, format version 1 or 2), checking both checksums
/// and every parameter: what `bloomery verify` checks.
pub fn open(bytes: &[u8]) -> Result<Box<dyn DynFilter>> {
    let (header, payload) = native::decode(bytes)?;
    from_parts(&header, payload)
}

/// Builds the filter from a checked header and its payload, which must be exactly the
/// header's `payload_len` bytes (an error otherwise: a file that changed length after its
/// header was read); the payload checksum is the caller's business (see
/// [`Header::verify_payload`]).
pub fn from_parts(header: &Header, payload: &[u8]) -> Result<Box<dyn DynFilter>> {
    fn load<F: Persist + DynFilter + 'static>(header: &Header, payload: &[u8]) -> Result<Box<dyn DynFilter>> {
        Ok(Box::new(F::from_parts_of_version(
            header.version,
            &header.params,
            payload,
        )?))
    }
    header.check_payload_len(payload)?;
    match header.variant {
        Variant::Classic => load::<BloomFilter>(header, payload),
        Variant::Blocked => load::<BlockedBloomFilter>(header, payload),
        Variant::Counting => load::<CountingBloomFilter>(header, payload),
        Variant::Scalable => load::<ScalableBloomFilter>(header, payload),
        Variant::Retouched => load::<RetouchedBloomFilter>(header, payload),
        Variant::Allowlisted => load::<AllowlistedBloomFilter>(header, payload),
        Variant::Rotating => load::<RotatingBloomFilter>(header, payload),
        Variant::SplitBlock => load::<SplitBlockBloomFilter>(header, payload),
        Variant::RedisBloom => load::<RedisBloomFilter>(header, payload),
        Variant::ScalableBlocked => load::<ScalableBlockedBloomFilter>(header, payload),
    }
}

/// A read-only filter over a checked header and its payload, for example a memory-mapped
/// file: the classic, blocked and split-block variants answer from the payload in place (nothing is
/// copied, only the pages a lookup touches are read, and the payload checksum is not
/// computed); the others are built in memory, after the payload checksum is checked. So
/// are those three where the payload cannot be viewed where it lies (big-endian, or
/// misaligned), but for an unsealed one (a writer in place did not finish): its bits
/// are valid and its checksum stale, so it is copied unchecked, as the view answers. The
/// payload must be exactly the header's `payload_len` bytes, as for [`from_parts`].
pub fn view<'a>(header: &Header, payload: &'a [u8]) -> Result<Box<dyn FilterView + 'a>> {
    header.check_payload_len(payload)?;
    let in_place: Option<Box<dyn FilterView + 'a>> = match header.variant {
        Variant::Classic => BloomFilterView::from_parts(&header.params, payload)?
            .map(|view| Box::new(view) as Box<dyn FilterView + 'a>),
        Variant::Blocked => {
            BlockedBloomFilterView::from_parts_of_version(header.version, &header.params, payload)?
                .map(|view| Box::new(view) as Box<dyn FilterView + 'a>)
        }
        Variant::SplitBlock => {
            SplitBlockBloomFilterView::from_parts_of_version(header.version, &header.params, payload)?
                .map(|view| Box::new(view) as Box<dyn FilterView + 'a>)
        }
        _ => None,
    };
    match in_place {
        Some(view) => Ok(view),
        None => {
            // Built in memory: every payload byte is read anyway, so check them all. Not an
            // unsealed payload of a variant updated in place (its bits are valid, its
            // checksum stale), which the view in place answers from: so does a copy of it,
            // where this platform cannot view it in place (its words are little-endian, so
            // a big-endian one cannot; nor can anyone a misaligned payload).
            if !(header.unsealed && crate::in_place::updates_in_place(header.variant)) {
                header.verify_payload(payload)?;
            }
            let owned: Box<dyn FilterView> = from_parts(header, payload)?;
            Ok(owned)
        }
    }
}

/// The classic filter's Guava `writeTo` bytes; an error for other variants.
pub fn to_guava_bytes(filter: &dyn DynFilter) -> Result<Vec<u8>> {
    match filter.as_any().downcast_ref::<BloomFilter>() {
        Some(classic) => Ok(classic.to_guava_bytes()),
        None => Err(unsupported(
            filter.variant(),
            "Guava's format (only classic filters have it)",
        )),
    }
}

/// A split-block filter's Parquet bytes: with the Thrift `BloomFilterHeader` (what a
/// Parquet file holds for a column chunk) or the bitset alone; an error for other variants.
pub fn to_parquet_bytes(filter: &dyn DynFilter, with_header: bool) -> Result<Vec<u8>> {
    match filter.as_any().downcast_ref::<SplitBlockBloomFilter>() {
        Some(split_block) if with_header => split_block.to_parquet_bytes(),
        Some(split_block) => Ok(split_block.to_parquet_bitset()?.into_owned()),
        None => Err(unsupported(
            filter.variant(),
            "Parquet's format (only split-block filters have it)",
        )),
    }
}

/// A RedisBloom-layout filter's `BF.SCANDUMP` pieces joined
/// ([`RedisBloomFilter::scandump_stream`]); an error for other variants.
pub fn to_redisbloom_scandump(filter: &dyn DynFilter) -> Result<Vec<u8>> {
    match filter.as_any().downcast_ref::<RedisBloomFilter>() {
        Some(chain) => Ok(chain.scandump_stream()),
        None => Err(unsupported(
            filter.variant(),
            "RedisBloom's BF.SCANDUMP pieces (only redisbloom filters have them)",
        )),
    }
}

/// The stats of a single-array filter.
fn stats_of(filter: &impl FilterStats) -> Stats {
    Stats {
        estimated_len: filter.estimated_len(),
        expected_fpp: filter.expected_fpp(),
        memory_bytes: filter.memory_bytes() as u64,
        capacity: None,
        refuses_beyond_capacity: false,
        sub_filters: 1,
        expansion: None,
    }
}

/// The parts of `DynFilter` that every owned variant writes the same way.
macro_rules! owned_filter_common {
    () => {
        fn envelope(&self) -> Envelope<'_> {
            Persist::envelope(self)
        }

        fn envelope_len(&self) -> u64 {
            Persist::envelope_len(self)
        }

        fn as_any(&self) -> &dyn Any {
            self
        }

        fn as_any_mut(&mut self) -> &mut dyn Any {
            self
        }

        fn clone_box(&self) -> Box<dyn DynFilter> {
            Box::new(self.clone())
        }

        fn try_clone_box(&self) -> Result<Box<dyn DynFilter>> {
            Ok(crate::bits::try_box(crate::TryClone::try_clone(self)?)?)
        }
    };
}

/// The parts of `FilterView` that the block filters and their views write the same way:
/// the variant, and lookups through the type's own batched call.
macro_rules! block_view_common {
    ($variant:expr) => {
        fn variant(&self) -> Variant {
            $variant
        }

        fn contains(&self, item: &[u8]) -> bool {
            Self::contains(self, item)
        }

        fn contains_batch(&self, items: &[&[u8]], results: &mut [bool]) {
            self.contains_batch_into(items, results);
        }
    };
}

/// `DynFilter` for a block filter: inserts never refused, batched inserts, and union and
/// intersection with a filter of the same variant.
macro_rules! block_filter_dyn {
    ($filter:ty, $variant:expr) => {
        impl DynFilter for $filter {
            fn insert(&mut self, item: &[u8]) -> Result<bool> {
                Ok(<$filter>::insert(self, item))
            }

            fn insert_batch(&mut self, items: &[&[u8]]) -> Result<()> {
                <$filter>::insert_batch(self, items);
                Ok(())
            }

            fn union(&mut self, other: &dyn DynFilter) -> Result<()> {
                <$filter>::union(self, same_variant($variant, other)?)
            }

            fn intersection(&mut self, other: &dyn DynFilter) -> Result<()> {
                <$filter>::intersection(self, same_variant($variant, other)?)
            }

            fn clear(&mut self) -> Result<()> {
                <$filter>::clear(self);
                Ok(())
            }

            owned_filter_common!();
        }
    };
}

fn classic_lines(num_bits: u64, num_hashes: u32, bit_count: u64) -> Vec<(&'static str, String)> {
    vec![
        ("hashing", "murmur3_128, Guava's MURMUR128_MITZ_64".into()),
        ("bits", num_bits.to_string()),
        ("hash functions", num_hashes.to_string()),
        (
            "bits set",
            format!(
                "{bit_count} (fill ratio {:.4})",
                bit_count as f64 / num_bits as f64
            ),
        ),
    ]
}

impl<B: crate::bits::Bits + Send + Sync> FilterView for crate::ClassicFilter<B> {
    fn variant(&self) -> Variant {
        Variant::Classic
    }

    fn contains(&self, item: &[u8]) -> bool {
        crate::ClassicFilter::contains(self, item)
    }

    fn stats(&self) -> Stats {
        Stats {
            capacity: Some(crate::sizing::sized_capacity(self.num_bits(), self.num_hashes())),
            ..stats_of(self)
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        classic_lines(self.num_bits(), self.num_hashes(), self.bit_count())
    }
}

impl DynFilter for BloomFilter {
    fn insert(&mut self, item: &[u8]) -> Result<bool> {
        Ok(BloomFilter::insert(self, item))
    }

    fn union(&mut self, other: &dyn DynFilter) -> Result<()> {
        BloomFilter::union(self, same_variant(Variant::Classic, other)?)
    }

    fn intersection(&mut self, other: &dyn DynFilter) -> Result<()> {
        BloomFilter::intersection(self, same_variant(Variant::Classic, other)?)
    }

    fn clear(&mut self) -> Result<()> {
        BloomFilter::clear(self);
        Ok(())
    }

    owned_filter_common!();
}

fn blocked_lines(num_blocks: u64, seed: u64, bit_count: u64) -> Vec<(&'static str, String)> {
    let num_bits = num_blocks * crate::sizing::BLOCK_BITS;
    vec![
        ("hashing", format!("XXH3-64, seed {seed}")),
        ("bits", num_bits.to_string()),
        ("blocks", format!("{num_blocks} of 512 bits, 8 bits per item")),
        (
            "bits set",
            format!(
                "{bit_count} (fill ratio {:.4})",
                bit_count as f64 / num_bits as f64
            ),
        ),
    ]
}

impl FilterView for BlockedBloomFilter {
    block_view_common!(Variant::Blocked);

    fn stats(&self) -> Stats {
        Stats {
            capacity: self.sized_for().map(|sized| sized.expected_items),
            ..stats_of(self)
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        blocked_lines(self.num_blocks(), self.seed(), self.bit_count())
    }
}

block_filter_dyn!(BlockedBloomFilter, Variant::Blocked);

impl FilterView for BlockedBloomFilterView<'_> {
    block_view_common!(Variant::Blocked);

    fn stats(&self) -> Stats {
        Stats {
            estimated_len: self.estimated_len(),
            expected_fpp: self.expected_fpp(),
            memory_bytes: self.num_bits() / 8,
            capacity: self.sized_for().map(|sized| sized.expected_items),
            refuses_beyond_capacity: false,
            sub_filters: 1,
            expansion: None,
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        blocked_lines(self.blocks().len() as u64, self.seed(), self.bit_count())
    }
}

fn split_block_lines(
    num_blocks: u64,
    hasher: SplitBlockHasher,
    bit_count: u64,
) -> Vec<(&'static str, String)> {
    let num_bits = num_blocks * crate::sizing::SPLIT_BLOCK_BITS;
    vec![
        ("hashing", hasher.describe()),
        ("bits", num_bits.to_string()),
        ("blocks", format!("{num_blocks} of 256 bits, 8 bits per item")),
        (
            "bits set",
            format!(
                "{bit_count} (fill ratio {:.4})",
                bit_count as f64 / num_bits as f64
            ),
        ),
    ]
}

impl FilterView for SplitBlockBloomFilter {
    block_view_common!(Variant::SplitBlock);

    fn stats(&self) -> Stats {
        stats_of(self)
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        split_block_lines(self.num_blocks(), self.hasher(), self.bit_count())
    }
}

block_filter_dyn!(SplitBlockBloomFilter, Variant::SplitBlock);

impl FilterView for SplitBlockBloomFilterView<'_> {
    block_view_common!(Variant::SplitBlock);

    fn stats(&self) -> Stats {
        Stats {
            estimated_len: self.estimated_len(),
            expected_fpp: self.expected_fpp(),
            memory_bytes: self.num_bits() / 8,
            capacity: None,
            refuses_beyond_capacity: false,
            sub_filters: 1,
            expansion: None,
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        split_block_lines(self.blocks().len() as u64, self.hasher(), self.bit_count())
    }
}

impl FilterView for CountingBloomFilter {
    fn variant(&self) -> Variant {
        Variant::Counting
    }

    fn contains(&self, item: &[u8]) -> bool {
        CountingBloomFilter::contains(self, item)
    }

    fn stats(&self) -> Stats {
        Stats {
            capacity: Some(crate::sizing::rate_capacity(
                self.num_counters(),
                self.num_hashes(),
            )),
            ..stats_of(self)
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            ("hashing", "murmur3_128, Guava's MURMUR128_MITZ_64".into()),
            ("counters", format!("{} of 4 bits", self.num_counters())),
            ("hash functions", self.num_hashes().to_string()),
            ("saturated counters", self.saturated_counters().to_string()),
        ]
    }
}

impl DynFilter for CountingBloomFilter {
    fn clear(&mut self) -> Result<()> {
        CountingBloomFilter::clear(self);
        Ok(())
    }

    fn insert(&mut self, item: &[u8]) -> Result<bool> {
        Ok(CountingBloomFilter::insert(self, item))
    }

    fn remove(&mut self, item: &[u8]) -> Result<()> {
        CountingBloomFilter::remove(self, item)
    }

    fn union(&mut self, other: &dyn DynFilter) -> Result<()> {
        CountingBloomFilter::union(self, same_variant(Variant::Counting, other)?)
    }

    owned_filter_common!();
}

impl FilterView for ScalableBloomFilter {
    fn variant(&self) -> Variant {
        Variant::Scalable
    }

    fn contains(&self, item: &[u8]) -> bool {
        ScalableBloomFilter::contains(self, item)
    }

    fn stats(&self) -> Stats {
        let scaling = self.options().scaling;
        Stats {
            capacity: Some(self.capacity()),
            refuses_beyond_capacity: !self.can_grow(),
            sub_filters: self.num_filters() as u64,
            expansion: scaling.then(|| self.expansion()),
            ..stats_of(self)
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        let options = self.options();
        vec![
            (
                "hashing",
                "murmur3_128, Guava's MURMUR128_MITZ_64 (each sub-filter)".into(),
            ),
            (
                "sub-filters",
                format!(
                    "{} (growth {}, tightening {}{})",
                    self.num_filters(),
                    options.expansion,
                    options.tightening,
                    if options.scaling { "" } else { ", not scaling" }
                ),
            ),
            (
                "capacity",
                format!("{} items before the next sub-filter", self.capacity()),
            ),
            ("items added", self.len().to_string()),
            ("requested fpp", self.fpp().to_string()),
        ]
    }
}

impl DynFilter for ScalableBloomFilter {
    fn clear(&mut self) -> Result<()> {
        ScalableBloomFilter::clear(self);
        Ok(())
    }

    fn insert(&mut self, item: &[u8]) -> Result<bool> {
        ScalableBloomFilter::insert(self, item)
    }

    fn insert_past_capacity_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        ScalableBloomFilter::insert_past_capacity_within(self, item, limit)
    }

    fn insert_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        self.insert_limited(item, limit)
    }

    fn insert_batch_within(&mut self, items: &[&[u8]], limit: GrowthLimit<'_>) -> Result<()> {
        each_within(self, items, limit)
    }

    owned_filter_common!();
}

impl FilterView for RedisBloomFilter {
    fn variant(&self) -> Variant {
        Variant::RedisBloom
    }

    fn contains(&self, item: &[u8]) -> bool {
        RedisBloomFilter::contains(self, item)
    }

    fn stats(&self) -> Stats {
        Stats {
            estimated_len: self.len(),
            expected_fpp: self.expected_fpp(),
            memory_bytes: self.bitmap_bytes(),
            capacity: Some(self.capacity()),
            refuses_beyond_capacity: !self.can_grow(),
            sub_filters: self.links().len() as u64,
            expansion: (!self.is_nonscaling()).then(|| self.growth()),
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        let hashing = if self.options() & crate::redisbloom::OPT_FORCE64 != 0 {
            "MurmurHash64A, RedisBloom's 64-bit hashing"
        } else {
            "MurmurHash2, RedisBloom's 32-bit hashing"
        };
        let first = &self.links()[0];
        vec![
            ("hashing", hashing.into()),
            (
                "sub-filters",
                format!(
                    "{} (growth {}{})",
                    self.links().len(),
                    self.growth(),
                    if self.is_nonscaling() { ", not scaling" } else { "" }
                ),
            ),
            (
                "capacity",
                format!("{} items in all sub-filters", self.capacity()),
            ),
            ("items added", self.len().to_string()),
            ("first sub-filter's error rate", first.error().to_string()),
        ]
    }
}

impl DynFilter for RedisBloomFilter {
    fn clear(&mut self) -> Result<()> {
        RedisBloomFilter::clear(self);
        Ok(())
    }

    fn insert(&mut self, item: &[u8]) -> Result<bool> {
        RedisBloomFilter::insert(self, item)
    }

    fn insert_past_capacity_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        RedisBloomFilter::insert_past_capacity_within(self, item, limit)
    }

    fn insert_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        self.insert_limited(item, limit)
    }

    fn insert_batch_within(&mut self, items: &[&[u8]], limit: GrowthLimit<'_>) -> Result<()> {
        each_within(self, items, limit)
    }

    owned_filter_common!();
}

impl FilterView for ScalableBlockedBloomFilter {
    fn variant(&self) -> Variant {
        Variant::ScalableBlocked
    }

    fn contains(&self, item: &[u8]) -> bool {
        ScalableBlockedBloomFilter::contains(self, item)
    }

    fn contains_batch(&self, items: &[&[u8]], results: &mut [bool]) {
        ScalableBlockedBloomFilter::contains_batch(self, items, results);
    }

    fn stats(&self) -> Stats {
        let scaling = self.options().scaling;
        Stats {
            estimated_len: self.len(),
            expected_fpp: self.expected_fpp(),
            memory_bytes: self.memory_bytes(),
            capacity: Some(self.capacity()),
            refuses_beyond_capacity: !self.can_grow(),
            sub_filters: self.num_filters() as u64,
            expansion: scaling.then(|| self.options().expansion),
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        let options = self.options();
        vec![
            (
                "hashing",
                format!("XXH3-64, seed {} (one hash for every sub-filter)", self.seed()),
            ),
            (
                "sub-filters",
                format!(
                    "{} blocked (growth {}, tightening {}{})",
                    self.num_filters(),
                    options.expansion,
                    options.tightening,
                    if options.scaling { "" } else { ", not scaling" }
                ),
            ),
            (
                "capacity",
                format!("{} items before the next sub-filter", self.capacity()),
            ),
            ("items added", self.len().to_string()),
            ("requested fpp", self.fpp().to_string()),
        ]
    }
}

impl DynFilter for ScalableBlockedBloomFilter {
    fn clear(&mut self) -> Result<()> {
        ScalableBlockedBloomFilter::clear(self);
        Ok(())
    }

    fn insert(&mut self, item: &[u8]) -> Result<bool> {
        ScalableBlockedBloomFilter::insert(self, item)
    }

    fn insert_past_capacity_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        ScalableBlockedBloomFilter::insert_past_capacity_within(self, item, limit)
    }

    fn insert_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        self.insert_hash_limited(self.hash(item), limit)
    }

    fn insert_batch(&mut self, items: &[&[u8]]) -> Result<()> {
        let mut added = vec![false; items.len()];
        self.insert_batch_within(items, &mut added, None)
    }

    fn insert_batch_within(&mut self, items: &[&[u8]], limit: GrowthLimit<'_>) -> Result<()> {
        let mut added = vec![false; items.len()];
        match self.insert_batch_limited(items, &mut added, limit) {
            (_, None) => Ok(()),
            (_, Some(error)) => Err(error),
        }
    }

    owned_filter_common!();
}

impl FilterView for RetouchedBloomFilter {
    fn variant(&self) -> Variant {
        Variant::Retouched
    }

    fn contains(&self, item: &[u8]) -> bool {
        RetouchedBloomFilter::contains(self, item)
    }

    fn stats(&self) -> Stats {
        Stats {
            capacity: Some(crate::sizing::rate_capacity(self.num_bits(), self.num_hashes())),
            ..stats_of(self)
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            ("hashing", "murmur3_128, Guava's MURMUR128_MITZ_64".into()),
            ("bits", self.num_bits().to_string()),
            (
                "false negatives made by removals",
                self.total_false_negatives().to_string(),
            ),
        ]
    }
}

impl DynFilter for RetouchedBloomFilter {
    fn clear(&mut self) -> Result<()> {
        RetouchedBloomFilter::clear(self);
        Ok(())
    }

    fn insert(&mut self, item: &[u8]) -> Result<bool> {
        RetouchedBloomFilter::try_insert(self, item)
    }

    owned_filter_common!();
}

impl FilterView for AllowlistedBloomFilter {
    fn variant(&self) -> Variant {
        Variant::Allowlisted
    }

    fn contains(&self, item: &[u8]) -> bool {
        AllowlistedBloomFilter::contains(self, item)
    }

    fn stats(&self) -> Stats {
        Stats {
            capacity: Some(crate::sizing::rate_capacity(
                self.filter().num_bits(),
                self.filter().num_hashes(),
            )),
            ..stats_of(self)
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        let filter = self.filter();
        let mut lines = classic_lines(filter.num_bits(), filter.num_hashes(), filter.bit_count());
        lines.push(("listed false positives", self.allowed_len().to_string()));
        lines
    }
}

impl DynFilter for AllowlistedBloomFilter {
    fn clear(&mut self) -> Result<()> {
        AllowlistedBloomFilter::clear(self);
        Ok(())
    }

    fn insert(&mut self, item: &[u8]) -> Result<bool> {
        Ok(AllowlistedBloomFilter::insert(self, item))
    }

    fn union(&mut self, other: &dyn DynFilter) -> Result<()> {
        AllowlistedBloomFilter::union(self, same_variant(Variant::Allowlisted, other)?)
    }

    owned_filter_common!();
}

impl FilterView for RotatingBloomFilter {
    fn variant(&self) -> Variant {
        Variant::Rotating
    }

    fn contains(&self, item: &[u8]) -> bool {
        RotatingBloomFilter::contains(self, item)
    }

    fn stats(&self) -> Stats {
        Stats {
            capacity: Some(self.items_per_generation()),
            sub_filters: self.num_generations() as u64,
            ..stats_of(self)
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "hashing",
                "murmur3_128, Guava's MURMUR128_MITZ_64 (each generation)".into(),
            ),
            ("generations", self.num_generations().to_string()),
            ("items in kept generations", self.len().to_string()),
            ("false-positive bound", format!("{:.6}", self.fpp_bound())),
        ]
    }
}

impl DynFilter for RotatingBloomFilter {
    fn clear(&mut self) -> Result<()> {
        RotatingBloomFilter::clear(self);
        Ok(())
    }

    fn insert(&mut self, item: &[u8]) -> Result<bool> {
        RotatingBloomFilter::insert_within(self, item, crate::rotating::now_ms(), None)
    }

    fn insert_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        self.insert_limited(item, crate::rotating::now_ms(), limit)
    }

    fn insert_batch_within(&mut self, items: &[&[u8]], limit: GrowthLimit<'_>) -> Result<()> {
        each_within(self, items, limit)
    }

    owned_filter_common!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_variant() -> Vec<Box<dyn DynFilter>> {
        Variant::ALL
            .iter()
            .map(|&variant| create(&Spec::new(variant, 1_000, 0.01)).unwrap())
            .collect()
    }

    /// `file` copied where its payload (at `payload_offset`, a multiple of 64) starts
    /// `shift` bytes past a 64-byte boundary (a block's alignment, which a map's pages
    /// have): 0 is viewed in place, 1 copied. The copy and the payload's range in it.
    fn placed(file: &[u8], payload_offset: usize, shift: usize) -> (Vec<u8>, std::ops::Range<usize>) {
        let mut buffer = vec![0u8; file.len() + 128];
        let start = buffer.as_ptr().align_offset(64) + shift;
        buffer[start..start + file.len()].copy_from_slice(file);
        (buffer, start + payload_offset..start + file.len())
    }

    #[test]
    fn a_payload_of_another_length_than_its_header_says_is_refused() {
        // A file read as `&map[payload_offset..]` that another program lengthened (or cut)
        // after its header was read: the classic filter's size is its payload's, so the
        // longer payload would be a filter of other bits, where its items read absent.
        for filter in every_variant() {
            let variant = filter.variant();
            let envelope = filter.envelope().to_vec();
            let header = Header::parse(&envelope).unwrap();
            for change in [64isize, -64, 8, -8] {
                let mut file = envelope.clone();
                let len = file.len().checked_add_signed(change).unwrap();
                file.resize(len, 0);
                let (buffer, payload) = placed(&file, header.payload_offset, 0);
                let message = view(&header, &buffer[payload.clone()])
                    .err()
                    .map(|error| error.to_string());
                assert!(message.is_some(), "{variant:?} {change}: viewed");
                let loaded = from_parts(&header, &buffer[payload])
                    .err()
                    .map(|error| error.to_string());
                assert_eq!(loaded, message, "{variant:?} {change}");
            }
        }
    }

    #[test]
    fn an_empty_file_is_the_bytes_of_a_created_filter() {
        // `bloomery create` writes `empty_file`'s header and a hole where it wrote the
        // envelope of `create`'s filter: the same bytes, for every variant updated in place,
        // hasher and seed, at sizes from one block or word up.
        let mut specs = Vec::new();
        for variant in [Variant::Classic, Variant::Blocked, Variant::SplitBlock] {
            for (items, fpp) in [(0, 0.01), (1, 0.5), (1_000, 0.01), (100_000, 1e-6)] {
                specs.push(Spec::new(variant, items, fpp));
                let mut seeded = Spec::new(variant, items, fpp);
                seeded.seed = 0x5eed;
                seeded.split_block_parquet = variant != Variant::SplitBlock;
                specs.push(seeded);
            }
        }
        for spec in specs {
            let empty = empty_file(&spec).unwrap().unwrap();
            let mut bytes = empty.header.clone();
            bytes.resize(empty.len as usize, 0);
            assert_eq!(bytes, create(&spec).unwrap().envelope().to_vec(), "{spec:?}");
        }
        for variant in Variant::ALL {
            let spec = Spec::new(variant, 1_000, 0.01);
            assert_eq!(
                empty_file(&spec).unwrap().is_some(),
                crate::in_place::updates_in_place(variant),
                "{variant}"
            );
        }
        // A spec `create` refuses is refused alike (here: more blocks than the format has).
        for variant in [Variant::Classic, Variant::Blocked, Variant::SplitBlock] {
            let spec = Spec::new(variant, u64::MAX / 2, 1e-30);
            assert_eq!(
                empty_file(&spec).unwrap_err().to_string(),
                create(&spec).err().unwrap().to_string()
            );
        }
    }

    #[test]
    fn an_unsealed_payload_answers_alike_in_place_and_copied() {
        // An in-place writer's file: the header marked unsealed before the bits changed,
        // so its checksum is of the bits before "added in place". A platform that cannot
        // view the payload in place (big-endian; here a misaligned copy) builds the filter
        // from a copy: it must answer from the bits as the view in place does, not refuse
        // the file for its stale checksum.
        for variant in [Variant::Classic, Variant::Blocked, Variant::SplitBlock] {
            let mut filter = create(&Spec::new(variant, 1_000, 0.01)).unwrap();
            filter.insert(b"sealed").unwrap();
            let before = filter.envelope().to_vec();
            filter.insert(b"added in place").unwrap();
            let after = filter.envelope().to_vec();
            let header = Header::parse(&before).unwrap();
            let mut file = header.to_bytes(header.payload_checksum, true);
            file.extend_from_slice(&after[header.payload_offset..]);
            let unsealed = Header::parse(&file).unwrap();
            assert!(unsealed.unsealed);
            for (how, shift) in [("in place", 0), ("copied", 1)] {
                let (buffer, range) = placed(&file, unsealed.payload_offset, shift);
                let payload = &buffer[range];
                let view =
                    view(&unsealed, payload).unwrap_or_else(|error| panic!("{variant:?} {how}: {error}"));
                assert!(
                    view.contains(b"sealed") && view.contains(b"added in place"),
                    "{variant:?} {how}"
                );
            }
            // Sealed with a wrong checksum (damage), the copy is still refused.
            let mut damaged = header.to_bytes(header.payload_checksum, false);
            damaged.extend_from_slice(&after[header.payload_offset..]);
            let (buffer, range) = placed(&damaged, header.payload_offset, 1);
            assert!(view(&header, &buffer[range]).is_err(), "{variant:?}");
        }
    }

    #[test]
    fn every_variant_round_trips_through_open_with_its_items() {
        for mut filter in every_variant() {
            for i in 0..500u32 {
                filter.insert(format!("item {i}").as_bytes()).unwrap();
            }
            let batch: Vec<Vec<u8>> = (0..300u32).map(|i| format!("batch {i}").into_bytes()).collect();
            let batch: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
            filter.insert_batch(&batch).unwrap();
            assert!(
                batch.iter().all(|item| filter.contains(item)),
                "{:?}",
                filter.variant()
            );
            let bytes = filter.envelope().to_vec();
            let loaded = open(&bytes).unwrap();
            assert_eq!(loaded.variant(), filter.variant());
            assert_eq!(loaded.envelope().to_vec(), bytes);
            for i in 0..500u32 {
                assert!(
                    loaded.contains(format!("item {i}").as_bytes()),
                    "{:?}",
                    filter.variant()
                );
            }
            let (header, payload) = native::decode(&bytes).unwrap();
            let view = view(&header, payload).unwrap();
            let items: Vec<Vec<u8>> = (0..500u32).map(|i| format!("item {i}").into_bytes()).collect();
            let items: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let mut results = vec![false; items.len()];
            view.contains_batch(&items, &mut results);
            assert!(results.iter().all(|&present| present), "{:?}", filter.variant());
        }
    }

    #[test]
    fn spec_memory_bytes_is_what_create_allocates() {
        for variant in Variant::ALL {
            for (n, p) in [(1, 0.5), (1_000, 0.01), (123_457, 0.001), (10, 1e-6)] {
                let mut spec = Spec::new(variant, n, p);
                spec.generations = 2;
                let mut filter = create(&spec).unwrap();
                if variant == Variant::Rotating {
                    // Fill the first generation so that the second exists.
                    let mut i = 0u64;
                    while filter.stats().sub_filters < 2 {
                        filter.insert(&i.to_le_bytes()).unwrap();
                        i += 1;
                    }
                }
                assert_eq!(
                    spec.memory_bytes().unwrap(),
                    filter.stats().memory_bytes,
                    "{variant:?} n={n} p={p}"
                );
            }
        }
    }

    #[test]
    fn spec_memory_bytes_refuses_what_create_refuses() {
        // Bad rates and counts, refused by both with the same error, the estimate asked
        // first (a tool asks it before creating: it must not call a rate of 1 "too low").
        let bad = [
            (0, 0.01),
            (1_000, 0.0),
            (1_000, 1.0),
            (1_000, 1.5),
            (1_000, f64::NAN),
            (1_000, f64::INFINITY),
        ];
        for variant in Variant::ALL {
            for (scaling, (n, p)) in [true, false]
                .into_iter()
                .flat_map(|scaling| bad.map(|bad| (scaling, bad)))
            {
                let mut spec = Spec::new(variant, n, p);
                spec.scalable.scaling = scaling;
                let created = create(&spec).map(drop);
                let estimated = spec.memory_bytes().map(drop);
                match (&created, &estimated) {
                    (Ok(()), Ok(())) => {}
                    (Err(made), Err(sized)) => {
                        assert_eq!(made.to_string(), sized.to_string(), "{variant:?} n={n} p={p}")
                    }
                    _ => panic!("{variant:?} n={n} p={p}: create {created:?}, memory_bytes {estimated:?}"),
                }
            }
        }
        // Bad growth options (an expansion of 0 sized a RedisBloom filter that `create`
        // refused) and generation counts, scaling or not.
        for variant in Variant::ALL {
            for scaling in [true, false] {
                for (expansion, tightening, generations) in [
                    (0, 0.5, 2),
                    (1, 0.5, 2),
                    (2, 0.0, 2),
                    (2, 1.0, 2),
                    (2, 0.5, 0),
                    (2, 0.5, 1),
                ] {
                    let mut spec = Spec::new(variant, 1_000, 0.01);
                    spec.scalable.scaling = scaling;
                    spec.scalable.expansion = expansion;
                    spec.scalable.tightening = tightening;
                    spec.generations = generations;
                    let created = create(&spec).map(drop);
                    let estimated = spec.memory_bytes().map(drop);
                    let case =
                        format!("{variant:?} scaling={scaling} {expansion} {tightening} {generations}");
                    match (&created, &estimated) {
                        (Ok(()), Ok(())) => {}
                        (Err(made), Err(sized)) => assert_eq!(made.to_string(), sized.to_string(), "{case}"),
                        _ => panic!("{case}: create {created:?}, memory_bytes {estimated:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn growth_past_a_memory_limit_is_refused_before_allocating_and_nothing_is_lost() {
        for variant in [
            Variant::Scalable,
            Variant::Rotating,
            Variant::RedisBloom,
            Variant::ScalableBlocked,
        ] {
            let mut filter = create(&Spec::new(variant, 100, 0.01)).unwrap();
            let limit = filter.stats().memory_bytes;
            let mut added = Vec::new();
            let error = loop {
                let item = (added.len() as u64).to_le_bytes();
                match filter.insert_within(&item, GrowthLimit::Total(limit)) {
                    Ok(_) => added.push(item),
                    Err(error) => break error,
                }
                assert!(added.len() < 10_000, "{variant:?} never refused");
            };
            assert!(
                matches!(error, Error::MemoryLimit { limit: l, .. } if l == limit),
                "{error}"
            );
            assert_eq!(filter.stats().memory_bytes, limit, "{variant:?}");
            assert!(added.iter().all(|item| filter.contains(item)), "{variant:?}");
            // With room, the same insert grows the filter.
            assert!(
                filter
                    .insert_within(&u64::MAX.to_le_bytes(), GrowthLimit::Total(4 * limit))
                    .unwrap()
            );
            assert_eq!(filter.stats().sub_filters, 2, "{variant:?}");
        }
    }

    /// A rotating file may keep generations smaller than the ones it makes: rotating out
    /// the oldest then frees less than the new generation takes, and the limit must still
    /// hold (found by the proptest twin of the fuzz targets, tests/parsers.rs).
    #[test]
    fn rotating_out_a_small_generation_for_a_large_one_is_held_to_the_memory_limit() {
        let mut small = RotatingBloomFilter::new(2, 100, 0.01).unwrap();
        let mut i = 0u64;
        while small.num_generations() < 2 {
            small.insert(&i.to_le_bytes());
            i += 1;
        }
        // The same file, announcing 10^8 items (about 120 MB) per generation and a 1 ms
        // window, so the next insert rotates.
        let mut params = Persist::params(&small);
        params[4..12].copy_from_slice(&100_000_000u64.to_le_bytes());
        params[20..28].copy_from_slice(&1u64.to_le_bytes());
        let payload = Persist::payload(&small);
        let mut crafted = RotatingBloomFilter::from_parts(&params, &payload).unwrap();
        let limit = crafted.stats().memory_bytes + (1 << 20);
        let refused = crafted.insert_within(b"late", u64::MAX, Some(limit)).err();
        assert!(matches!(refused, Some(Error::MemoryLimit { .. })), "{refused:?}");
        assert!(crafted.stats().memory_bytes <= limit);
    }

    /// The mapped read path refuses what `open` refuses (found by the fuzzer: a version-1
    /// blocked file was answered from in place).
    #[test]
    fn view_refuses_a_version_1_blocked_file_as_open_does() {
        let filter = create(&Spec::new(Variant::Blocked, 10, 0.01)).unwrap();
        let mut bytes = filter.envelope().to_vec();
        bytes[8] = 1;
        let header_len = native::header_len(40); // blocked parameters with the sizing
        let checksum = xxhash_rust::xxh3::xxh3_64(&bytes[..header_len - 8]);
        bytes[header_len - 8..header_len].copy_from_slice(&checksum.to_le_bytes());
        let message = open(&bytes).err().expect("refused").to_string();
        assert!(message.contains("rebuild"), "{message}");
        // An aligned copy, so that the view could answer in place.
        let mut aligned = vec![crate::blocked::Block::default(); bytes.len().div_ceil(64)];
        // SAFETY: blocks are plain u64s; the byte view covers exactly their memory.
        let memory =
            unsafe { std::slice::from_raw_parts_mut(aligned.as_mut_ptr().cast::<u8>(), aligned.len() * 64) };
        memory[..bytes.len()].copy_from_slice(&bytes);
        let bytes = &memory[..bytes.len()];
        let header = Header::parse(bytes).unwrap();
        let error = view(&header, &bytes[header.payload_offset..])
            .err()
            .expect("refused");
        assert!(error.to_string().contains("rebuild"), "{error}");
    }

    #[test]
    fn clear_empties_every_variant_as_new() {
        for mut filter in every_variant() {
            let empty = filter.envelope().to_vec();
            for i in 0..200u32 {
                filter.insert(&i.to_le_bytes()).unwrap();
            }
            let variant = filter.variant();
            filter.clear().unwrap();
            assert_eq!(filter.stats().estimated_len, 0, "{variant:?}");
            assert!(!filter.contains(&7u32.to_le_bytes()), "{variant:?}");
            if variant != Variant::Rotating {
                // A rotating filter keeps its newest generation's start time.
                assert_eq!(filter.envelope().to_vec(), empty, "{variant:?}");
            }
            // And it takes items again.
            filter.insert(b"after").unwrap();
            assert!(filter.contains(b"after"), "{variant:?}");
        }
    }

    #[test]
    fn combining_different_variants_is_an_error_naming_both() {
        let mut classic = create(&Spec::new(Variant::Classic, 100, 0.01)).unwrap();
        let blocked = create(&Spec::new(Variant::Blocked, 100, 0.01)).unwrap();
        let message = classic.union(blocked.as_ref()).unwrap_err().to_string();
        assert_eq!(
            message,
            "filters are incompatible: variants differ: classic vs blocked"
        );
        let mut scalable = create(&Spec::new(Variant::Scalable, 100, 0.01)).unwrap();
        let message = scalable.remove(b"x").unwrap_err().to_string();
        assert_eq!(message, "scalable filters do not support remove");
    }

    #[test]
    fn a_refused_insert_is_an_error_not_a_presence() {
        let mut spec = Spec::new(Variant::Scalable, 10, 0.01);
        spec.scalable.scaling = false;
        let mut filter = create(&spec).unwrap();
        let mut refused = 0;
        for i in 0..1_000u32 {
            match filter.insert(&i.to_le_bytes()) {
                Ok(_) => assert!(filter.contains(&i.to_le_bytes())),
                Err(Error::Full { .. }) => refused += 1,
                Err(other) => panic!("{other}"),
            }
        }
        assert!(refused >= 980, "{refused}");
        assert_eq!(filter.stats().capacity, Some(10));
    }
}
