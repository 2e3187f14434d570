//! The rotating (aging) filter for never-ending streams: a few generations of classic
//! filters; items go into the newest, lookups ask all, and the oldest is dropped when the
//! newest is full or its time window has passed.
//!
//! With g generations, each holding at most c items at false-positive probability p, the
//! memory is bounded by g filters of c items and the false-positive rate by
//! 1 - (1 - p)^g ≈ g·p, whatever the stream's length. An item is remembered for at least
//! g - 1 full generations after the one it went into (the "window"), and forgotten when
//! its generation is dropped: the periodic rebuild a blocklist or a deduplication window
//! needs, without ever stopping. Measured: 3 generations of 100,000 items at 1% after
//! 1,000,000 inserts: 2.90% over 10^6 fresh keys against a bound of 2.97%, in 359 KB
//! (`tests/variants.rs`).
//!
//! A generation counts only the inserts that set a bit (an item that keeps coming is not
//! counted twice), so it is full a little after c distinct items: an item all of whose
//! positions were set already, a false positive, is not counted. While the generation's
//! rate is below p that is fewer than p·c more items. At high rates it is not: above
//! about 0.35 the generation has one hash, each counted insert sets exactly one of its m
//! bits, and its rate when full is c/m, about -ln(1 - p) (the rate sizing gives
//! m = -c / ln(1 - p)), above p (0.69 at 0.5); from p = 1 - 1/e ≈ 0.63 on, m ≤ c and it never counts c: generations
//! then rotate only by their time window. Use rates below about 0.35 for a rotating
//! filter.
//!
//! Time windows use caller-supplied timestamps in milliseconds ([`insert_at`]), so the
//! filter is deterministic and testable; [`insert`] uses the system clock. Time never goes
//! back for a filter: an insert's timestamp earlier than the newest generation's start
//! (a clock stepped back, clients whose clocks disagree, a stream replayed at its own
//! times) counts as that start, so its item is remembered as long as one inserted then,
//! and the items already in the filter as long as before.
//!
//! [`insert_at`]: RotatingBloomFilter::insert_at
//! [`insert`]: RotatingBloomFilter::insert

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::any::GrowthLimit;
use crate::bits::impl_try_clone;
use crate::classic::{BloomFilter, read_embedded, read_words, write_embedded};
use crate::error::{Error, Result, inconsistent};
use crate::format::native::{self, ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{Funnel, hash_item};
use crate::sizing::{ClassicShape, check_fpp};

/// The most generations a rotating filter keeps.
pub const MAX_GENERATIONS: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Generation {
    filter: BloomFilter,
    len: u64,
    started_ms: u64,
}

impl_try_clone!(Generation, fallible: [filter], copied: [len, started_ms]);

/// A Bloom filter over a sliding window of generations.
///
/// ```
/// use bloomery::RotatingBloomFilter;
///
/// // 2 generations of 1,000 items each at 1%.
/// let mut recent = RotatingBloomFilter::new(2, 1_000, 0.01)?;
/// recent.insert("old");
/// for i in 0..3_000i64 {
///     recent.insert(&i);
/// }
/// assert!(recent.contains(&2_999i64));
/// assert!(!recent.contains("old")); // aged out with its generation
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RotatingBloomFilter {
    generations: VecDeque<Generation>,
    max_generations: usize,
    items_per_generation: u64,
    fpp: f64,
    window_ms: Option<u64>,
}

impl_try_clone!(RotatingBloomFilter, fallible: [generations], copied: [max_generations, items_per_generation, fpp, window_ms]);

/// Checks a generation's number of items: at least 1.
pub(crate) fn check_items_per_generation(items_per_generation: u64) -> Result<()> {
    if items_per_generation == 0 {
        return Err(Error::Parameter {
            name: "items_per_generation",
            value: "0".into(),
            allowed: "at least 1",
        });
    }
    Ok(())
}

/// Checks a number of generations: 2 to [`MAX_GENERATIONS`].
pub(crate) fn check_generations(generations: usize) -> Result<()> {
    if (2..=MAX_GENERATIONS).contains(&generations) {
        Ok(())
    } else {
        Err(Error::Parameter {
            name: "generations",
            value: generations.to_string(),
            allowed: "in 2..=1024",
        })
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// The bound on the false-positive rate of a lookup that asks `generations` generations,
/// each answering falsely with probability `fpp`: 1 - (1 - p)^g, computed without
/// cancellation (`1.0 - (1.0 - p).powi(g)` gave 0 for p = 5e-17, as 1 - p rounds to 1,
/// and 2% over at 10^-14).
///
/// ```
/// use bloomery::rotating::window_fpp;
///
/// assert!((window_fpp(0.01, 2) - 0.0199).abs() < 1e-15);
/// assert!(window_fpp(5e-17, 2) > 9.9e-17);
/// ```
pub fn window_fpp(fpp: f64, generations: usize) -> f64 {
    -((-fpp).ln_1p() * generations as f64).exp_m1()
}

/// The rate each of `generations` generations may have for lookups of all of them to
/// answer falsely with probability at most `window`: 1 - (1 - e)^(1/g), taken down to the
/// largest value whose [`window_fpp`] is not above `window` (rounding put it a unit in
/// the last place above: an aging filter asked for 0.01 said 0.010000000000000009).
///
/// ```
/// use bloomery::rotating::{generation_fpp, window_fpp};
///
/// for (window, generations) in [(0.01, 3), (1e-14, 4), (0.5, 1024), (1e-300, 2)] {
///     let each = generation_fpp(window, generations);
///     assert!(each > 0.0 && window_fpp(each, generations) <= window);
/// }
/// ```
pub fn generation_fpp(window: f64, generations: usize) -> f64 {
    let mut each = -((-window).ln_1p() / generations as f64).exp_m1();
    while each > 0.0 && window_fpp(each, generations) > window {
        each = each.next_down();
    }
    each
}

impl RotatingBloomFilter {
    /// `generations` generations (at least 2) of `items_per_generation` items at `fpp`
    /// each, rotated by count only.
    pub fn new(generations: usize, items_per_generation: u64, fpp: f64) -> Result<Self> {
        Self::with_window(generations, items_per_generation, fpp, None, now_ms())
    }

    /// As [`new`](Self::new), also rotating when the newest generation is `window_ms` old
    /// (by the timestamps passed to [`insert_at`](Self::insert_at)); `now_ms` starts the
    /// first generation.
    pub fn with_window(
        generations: usize,
        items_per_generation: u64,
        fpp: f64,
        window_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Self> {
        check_generations(generations)?;
        check_items_per_generation(items_per_generation)?;
        if window_ms == Some(0) {
            return Err(Error::Parameter {
                name: "window_ms",
                value: "0".into(),
                allowed: "at least 1",
            });
        }
        check_fpp(fpp)?;
        ClassicShape::for_rate(items_per_generation, fpp)?;
        let mut filter = Self {
            generations: VecDeque::with_capacity(generations),
            max_generations: generations,
            items_per_generation,
            fpp,
            window_ms,
        };
        filter.start_generation(now_ms, GrowthLimit::None)?;
        Ok(filter)
    }

    /// Starts a generation (dropping the oldest when all are kept), unless a new one
    /// would take the filter past `memory_limit` bytes (checked before allocating).
    fn start_generation(&mut self, now_ms: u64, limit: GrowthLimit<'_>) -> Result<()> {
        let full = self.generations.len() == self.max_generations;
        // A constructor checks this shape; a version-2 file is read whatever its parameters
        // make of it, and its kept generations keep answering and taking items, but a new
        // one cannot start. Refused before anything changes: no generation is dropped.
        let shape =
            ClassicShape::for_rate(self.items_per_generation, self.fpp).map_err(|error| match error {
                Error::Sizing {
                    expected_items,
                    fpp,
                    problem,
                } => Error::Sizing {
                    expected_items,
                    fpp,
                    problem: format!(
                        "{problem}; this rotating filter's items_per_generation and fpp size no new \
                     generation, so it takes no item once its newest generation is full or past \
                     its window (the kept generations still answer)"
                    ),
                },
                other => other,
            })?;
        // The oldest generation is dropped when all are kept, but a file may hold
        // generations smaller than the ones it makes (version 2 stores each one's shape),
        // so the new one is counted against what stays, not assumed equal.
        let dropped = match self.generations.front() {
            Some(oldest) if full => std::mem::size_of_val(oldest.filter.words()) as u64,
            _ => 0,
        };
        limit.check(self.memory_bytes() as u64 - dropped, shape.num_words as u64 * 8)?;
        // Made before the oldest goes: a generation that cannot be made (its shape, or the
        // memory refused) leaves every generation where it was.
        let filter = BloomFilter::try_with_shape(shape)?;
        if full {
            self.generations.pop_front();
        }
        self.generations.push_back(Generation {
            filter,
            len: 0,
            started_ms: now_ms,
        });
        Ok(())
    }

    /// Adds `item` at the system clock's time; returns whether it was new: false when
    /// [`contains_at`](Self::contains_at) answered present just before (in any generation
    /// still within the window), as a deduplicating caller needs.
    pub fn insert<T: Funnel + ?Sized>(&mut self, item: &T) -> bool {
        self.insert_at(item, now_ms())
    }

    /// Adds `item` at time `now_ms`, first rotating if the newest generation is full or
    /// its window has passed. A time earlier than the newest generation's start counts
    /// as that start (time never goes back for a filter).
    ///
    /// # Panics
    /// When a new generation cannot be made: the system refuses its memory (as `Vec`
    /// aborts when it cannot grow), or a version-2 file's `items_per_generation` and `fpp`
    /// cannot size it (such a file stores its generations' shapes and is read all the same);
    /// [`insert_within`](Self::insert_within) returns either as an error.
    pub fn insert_at<T: Funnel + ?Sized>(&mut self, item: &T, now_ms: u64) -> bool {
        // A constructor checks the generations' shape and there is no memory limit, so only
        // the allocation can fail, or a file's parameters (read to be queried, whatever
        // generations they would make).
        self.insert_within(item, now_ms, None)
            .unwrap_or_else(|error| panic!("cannot start a generation: {error}"))
    }

    /// As [`insert_at`](Self::insert_at), but refusing with [`Error::MemoryLimit`] (before
    /// allocating) a new generation that would take the filter past `memory_limit` bytes,
    /// counting the oldest generation as freed when it rotates out.
    pub fn insert_within<T: Funnel + ?Sized>(
        &mut self,
        item: &T,
        now_ms: u64,
        memory_limit: Option<u64>,
    ) -> Result<bool> {
        self.insert_limited(item, now_ms, memory_limit.into())
    }

    /// As [`insert_within`](Self::insert_within), under any [`GrowthLimit`].
    pub(crate) fn insert_limited<T: Funnel + ?Sized>(
        &mut self,
        item: &T,
        now_ms: u64,
        limit: GrowthLimit<'_>,
    ) -> Result<bool> {
        let hash = hash_item(item);
        // Time never goes back: a generation started at an earlier time would end the
        // newest one before the items it holds were added, and they would be forgotten
        // that much sooner (an hour sooner for a stream replayed an hour behind).
        let newest = self.generations.back().expect("at least one generation");
        let now_ms = now_ms.max(newest.started_ms);
        // Seen within the window, as `contains_at` answers just before: an older
        // generation's answer counts too, that of one this insert rotates out included (the
        // item is copied into the newest all the same, so that it stays as long as it keeps
        // coming).
        let seen = self
            .live_at(now_ms)
            .any(|generation| generation.filter.contains_hash(hash));
        let newest = self.generations.back().expect("at least one generation");
        let expired = self
            .window_ms
            .is_some_and(|window| now_ms.saturating_sub(newest.started_ms) >= window);
        if newest.len >= self.items_per_generation || expired {
            self.start_generation(now_ms, limit)?;
        }
        let newest = self.generations.back_mut().expect("at least one generation");
        let changed = newest.filter.insert_hash(hash);
        // A branch, not an addition of the flag converted to an integer: this machine's
        // rustc 1.95 drops that update in release builds (rust-lang/rust#158206), and
        // `len` decides when to rotate.
        if changed {
            newest.len += 1;
        }
        Ok(!seen)
    }

    /// Whether `item` might have been inserted within the kept generations.
    pub fn contains<T: Funnel + ?Sized>(&self, item: &T) -> bool {
        let hash = hash_item(item);
        self.generations
            .iter()
            .any(|generation| generation.filter.contains_hash(hash))
    }

    /// Whether `item` might have been inserted and is still within the time window at
    /// `now_ms`. [`contains`](Self::contains) asks every kept generation; this one skips
    /// the generations that time has retired but no insert has rotated out yet, so a filter
    /// nobody writes to still forgets. A generation is asked while `now_ms` is less than
    /// `generations` windows past its start: an item inserted at `t` (at or after its
    /// generation's start, and less than a window after it, or a new generation would
    /// have started) is found at least until `t + (generations - 1) · window` and
    /// forgotten by `t + generations · window`, unless it is rotated out by count before.
    /// Without a window, as `contains`.
    /// Deterministic: the answer depends on the filter and `now_ms` alone.
    ///
    /// ```
    /// use bloomery::RotatingBloomFilter;
    ///
    /// // 3 generations of a 1,000 ms window each, starting at time 0.
    /// let mut recent = RotatingBloomFilter::with_window(3, 1_000, 0.01, Some(1_000), 0)?;
    /// recent.insert_at("seen", 500);
    /// assert!(recent.contains_at("seen", 2_999)); // 2 windows after its generation ended
    /// assert!(!recent.contains_at("seen", 3_000)); // forgotten, with no insert since
    /// assert!(recent.contains("seen")); // still in the bits until rotated out
    /// assert_eq!((recent.len_at(2_999), recent.len_at(3_000)), (1, 0));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn contains_at<T: Funnel + ?Sized>(&self, item: &T, now_ms: u64) -> bool {
        let hash = hash_item(item);
        self.live_at(now_ms)
            .any(|generation| generation.filter.contains_hash(hash))
    }

    /// Items in the generations [`contains_at`](Self::contains_at) asks at `now_ms`.
    pub fn len_at(&self, now_ms: u64) -> u64 {
        self.live_at(now_ms)
            .fold(0u64, |sum, generation| sum.saturating_add(generation.len))
    }

    /// The generations still within the time window at `now_ms` (all without a window):
    /// those started less than `generations` windows before.
    ///
    /// A generation that a full count ended early is asked as long: ending it when the
    /// next one starts would forget its items sooner, and too soon when that start was
    /// earlier than they were (a filter written before time was kept from going back, or
    /// by clients whose clocks disagreed). The rate stays bounded: at most `generations`
    /// are kept.
    fn live_at(&self, now_ms: u64) -> impl Iterator<Item = &Generation> {
        // In u128, exactly: `generations · window` and `started_ms + generations · window`
        // may pass `u64::MAX`, and a bound capped there would drop a generation asked at
        // `u64::MAX` itself. Elapsed time is compared, so a query earlier than a
        // generation's start counts as inside (elapsed 0).
        let asked_for = self
            .window_ms
            .map(|window| u128::from(window) * self.max_generations as u128);
        self.generations.iter().filter(move |generation| match asked_for {
            None => true,
            Some(asked_for) => u128::from(now_ms.saturating_sub(generation.started_ms)) < asked_for,
        })
    }

    /// The most generations kept (the oldest is dropped when another would pass it).
    pub fn max_generations(&self) -> usize {
        self.max_generations
    }

    /// How long a generation lasts before the next one starts, in milliseconds, for a
    /// filter that rotates by time.
    pub fn window_ms(&self) -> Option<u64> {
        self.window_ms
    }

    /// The items each generation holds before the next one starts.
    pub fn items_per_generation(&self) -> u64 {
        self.items_per_generation
    }

    /// The items the newest generation takes before the next one starts (by count: a
    /// filter that rotates by time may start one sooner).
    ///
    /// ```
    /// use bloomery::RotatingBloomFilter;
    ///
    /// let mut recent = RotatingBloomFilter::new(2, 3, 0.01)?;
    /// recent.insert("a");
    /// assert_eq!(recent.newest_room(), 2);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn newest_room(&self) -> u64 {
        let newest = self.generations.back().expect("at least one generation");
        self.items_per_generation.saturating_sub(newest.len)
    }

    /// The generations kept now.
    pub fn num_generations(&self) -> usize {
        self.generations.len()
    }

    /// The bound on the false-positive rate: 1 - (1 - p)^g ([`window_fpp`]).
    pub fn fpp_bound(&self) -> f64 {
        window_fpp(self.fpp, self.max_generations)
    }

    /// Items in the kept generations (inserts that changed a bit).
    pub fn len(&self) -> u64 {
        self.generations
            .iter()
            .fold(0u64, |sum, generation| sum.saturating_add(generation.len))
    }

    /// Removes every item: the newest generation is kept, emptied (its start time kept:
    /// time never goes back for a filter), the older ones are dropped.
    pub fn clear(&mut self) {
        let newest = self.generations.len() - 1;
        self.generations.drain(..newest);
        for generation in &mut self.generations {
            generation.filter.clear();
            generation.len = 0;
        }
    }

    /// Whether the kept generations hold nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of filter bits.
    pub fn memory_bytes(&self) -> usize {
        self.generations
            .iter()
            .map(|generation| std::mem::size_of_val(generation.filter.words()))
            .sum()
    }

    /// The current false-positive probability: 1 - Π(1 - fpp_i).
    pub fn expected_fpp(&self) -> f64 {
        1.0 - self
            .generations
            .iter()
            .map(|generation| 1.0 - generation.filter.expected_fpp())
            .product::<f64>()
    }
}

impl<T: Funnel + ?Sized> crate::Filter<T> for RotatingBloomFilter {
    fn insert(&mut self, item: &T) -> Result<bool> {
        RotatingBloomFilter::insert_within(self, item, now_ms(), None)
    }

    fn contains(&self, item: &T) -> bool {
        RotatingBloomFilter::contains(self, item)
    }
}

impl crate::FilterStats for RotatingBloomFilter {
    fn estimated_len(&self) -> u64 {
        self.len()
    }

    fn expected_fpp(&self) -> f64 {
        RotatingBloomFilter::expected_fpp(self)
    }

    fn memory_bytes(&self) -> usize {
        RotatingBloomFilter::memory_bytes(self)
    }
}

/// Parameters: max generations (u32), items per generation (u64), fpp (f64), window in ms
/// (u64, 0 for none), kept generation count (u32), then per generation (oldest first) its
/// item count (u64), start time (u64 ms), num_hashes (u32) and word count (u64). Payload:
/// each generation's words in order. (Format version 1 stored no per-generation shape;
/// such files are read with Guava's sizing of `items_per_generation` at `fpp`, which is
/// what wrote them.)
impl Persist for RotatingBloomFilter {
    const VARIANT: Variant = Variant::Rotating;

    fn params(&self) -> Vec<u8> {
        let mut params = ParamWriter::new()
            .u32(self.max_generations as u32)
            .u64(self.items_per_generation)
            .f64(self.fpp)
            .u64(self.window_ms.unwrap_or(0))
            .u32(self.generations.len() as u32);
        for generation in &self.generations {
            params = write_embedded(
                params.u64(generation.len).u64(generation.started_ms),
                &generation.filter,
            );
        }
        params.finish()
    }

    fn payload_pieces(&self) -> Vec<std::borrow::Cow<'_, [u8]>> {
        self.generations
            .iter()
            .map(|generation| native::words_as_le_bytes(generation.filter.words()))
            .collect()
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        Self::read(params, payload, true)
    }

    fn from_parts_of_version(version: u16, params: &[u8], payload: &[u8]) -> Result<Self> {
        Self::read(params, payload, version >= 2)
    }
}

impl RotatingBloomFilter {
    fn read(params: &[u8], payload: &[u8], shapes_stored: bool) -> Result<Self> {
        let mut reader = ParamReader::new(params);
        let max_generations = reader.u32()? as usize;
        let items_per_generation = reader.u64()?;
        let fpp = reader.f64()?;
        let window_ms = Some(reader.u64()?).filter(|&window| window > 0);
        let kept = reader.u32()? as usize;
        if !(2..=MAX_GENERATIONS).contains(&max_generations) || kept == 0 || kept > max_generations {
            return Err(inconsistent(format!(
                "{kept} of {max_generations} generations; 2..=1024 generations, 1..=all kept"
            )));
        }
        if items_per_generation == 0 {
            return Err(inconsistent("0 items per generation".into()));
        }
        check_fpp(fpp)?;
        // Version 1 stored no shapes: every generation has Guava's shape for these
        // parameters. Version 2 stores each one's, and is read whatever a new generation's
        // sizing would make of them (a new one that cannot be sized is refused when an
        // insert needs it, see `start_generation`).
        let sized = if shapes_stored {
            None
        } else {
            Some(ClassicShape::for_fpp(items_per_generation, fpp)?)
        };
        let mut generations = VecDeque::with_capacity(kept);
        let mut rest = payload;
        for _ in 0..kept {
            let len = reader.u64()?;
            let started_ms = reader.u64()?;
            let (filter, tail) = match sized {
                None => read_embedded(&mut reader, rest)?,
                Some(sized) => read_words(sized.num_hashes, sized.num_words as u64, rest)?,
            };
            rest = tail;
            generations.push_back(Generation {
                filter,
                len,
                started_ms,
            });
        }
        reader.finish()?;
        if !rest.is_empty() {
            return Err(inconsistent(format!(
                "{} payload bytes after the last generation",
                rest.len()
            )));
        }
        Ok(Self {
            generations,
            max_generations,
            items_per_generation,
            fpp,
            window_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generation_is_asked_for_generations_windows_from_its_start() {
        // 2 generations of 1 item and 100 ms: "a" fills the first, "b" starts the second
        // at 10; the first is asked until 200 all the same, the second until 210.
        let mut filter = RotatingBloomFilter::with_window(2, 1, 0.01, Some(100), 0).unwrap();
        filter.insert_at("a", 0);
        filter.insert_at("b", 10);
        assert!(filter.contains_at("a", 199));
        assert!(!filter.contains_at("a", 200));
        assert!(filter.contains_at("b", 209));
        assert!(!filter.contains_at("b", 210));
        assert_eq!(filter.len_at(199), 2);
        assert_eq!(filter.len_at(200), 1);
        // Without a window, time does not matter.
        let mut counted = RotatingBloomFilter::with_window(2, 10, 0.01, None, 0).unwrap();
        counted.insert_at("a", 0);
        assert!(counted.contains_at("a", u64::MAX));
        assert_eq!(counted.len_at(u64::MAX), 1);
    }

    #[test]
    fn a_generation_is_asked_at_the_last_timestamp() {
        // The end of a generation's time is past `u64::MAX`: an item inserted at that
        // time, or within an endless window, is found at it.
        let mut late = RotatingBloomFilter::with_window(2, 10, 0.01, Some(1000), u64::MAX - 5).unwrap();
        late.insert_at("x", u64::MAX);
        assert!(late.contains_at("x", u64::MAX));
        assert_eq!(late.len_at(u64::MAX), 1);
        let mut endless = RotatingBloomFilter::with_window(2, 10, 0.01, Some(u64::MAX), 0).unwrap();
        endless.insert_at("y", 5);
        assert!(endless.contains_at("y", 5));
        assert!(endless.contains_at("y", u64::MAX));
        // A query earlier than a generation's start still asks it.
        assert!(late.contains_at("x", 0));
    }

    #[test]
    fn a_time_that_goes_back_forgets_nothing_sooner() {
        // 3 generations of 2 items, 30 s windows. "a" and "b" fill the first at an hour;
        // "x" comes with a time an hour earlier (a client replaying its stream, a clock
        // stepped back). It once started a generation at that time, which ended the first
        // an hour before its items were added: they were forgotten at once.
        let hour = 3_600_000;
        let mut filter = RotatingBloomFilter::with_window(3, 2, 0.01, Some(30_000), hour).unwrap();
        filter.insert_at("a", hour);
        filter.insert_at("b", hour);
        assert!(filter.insert_at("x", 0));
        for item in ["a", "b", "x"] {
            assert!(filter.contains_at(item, hour), "{item}");
            assert!(filter.contains_at(item, hour + 60_000 - 1), "{item}");
        }
        assert_eq!(filter.len_at(hour), 3);
        // Clients whose clocks disagree by 5 s: the items of the one ahead are found for
        // two windows after their time, as the other's are.
        let mut filter = RotatingBloomFilter::with_window(3, 2, 0.01, Some(10_000), 0).unwrap();
        filter.insert_at("ahead-1", 6_000);
        filter.insert_at("ahead-2", 6_000);
        filter.insert_at("behind", 1_000);
        assert!(filter.contains_at("ahead-1", 6_000 + 20_000 - 1));
        assert!(filter.contains_at("behind", 1_000 + 20_000 - 1));
        assert!(!filter.contains_at("ahead-1", 6_000 + 30_000));
    }

    /// A version-2 file of `filter` with its `items_per_generation` and `fpp` replaced:
    /// parameters and payload. (Version 2 stores every generation's shape, so the format
    /// allows any item count and rate in range, whether or not a new generation can be
    /// sized from them.)
    fn v2_parts_with(
        filter: &RotatingBloomFilter,
        items_per_generation: u64,
        fpp: f64,
    ) -> (Vec<u8>, Vec<u8>) {
        let mut params = filter.params();
        params[4..12].copy_from_slice(&items_per_generation.to_le_bytes());
        params[12..20].copy_from_slice(&fpp.to_le_bytes());
        let payload = filter
            .payload_pieces()
            .iter()
            .flat_map(|piece| piece.iter().copied())
            .collect();
        (params, payload)
    }

    #[test]
    fn a_version_2_file_whose_parameters_size_no_generation_opens_answers_and_takes_items() {
        let mut made = RotatingBloomFilter::with_window(2, 3, 0.01, Some(1_000), 0).unwrap();
        made.insert_at("a", 0);
        made.insert_at("b", 0);
        // 100 items at 10^-100 need 332 hashes; 10^15 items at 1% more bits than a
        // generation can have. Neither makes a shape, and both are valid files.
        for (items_per_generation, fpp) in [(3, 1e-100), (1_000_000_000_000_000, 0.01)] {
            assert!(ClassicShape::for_rate(items_per_generation, fpp).is_err());
            let (params, payload) = v2_parts_with(&made, items_per_generation, fpp);
            let mut filter = RotatingBloomFilter::from_parts(&params, &payload)
                .unwrap_or_else(|error| panic!("{items_per_generation} at {fpp}: {error}"));
            assert!(filter.contains("a") && filter.contains("b") && !filter.contains("c"));
            // The same file through the CLI's path, and its bytes written back unchanged.
            let bytes = filter.to_bytes();
            let opened = crate::any::open(&bytes).unwrap();
            assert!(opened.contains(b"a") && opened.contains(b"b"));
            assert_eq!(RotatingBloomFilter::from_bytes(&bytes).unwrap().to_bytes(), bytes);
            // The newest generation has room (by count and by time): an insert goes there.
            assert!(filter.insert_within("c", 999, None).unwrap());
            assert!(filter.contains("c"));
            assert_eq!((filter.num_generations(), filter.len()), (1, 3));
            // Past its window (and, at 3 items per generation, full): a new generation is
            // needed and cannot be sized. Refused with the reason, before anything changes.
            let before = filter.clone();
            let error = filter.insert_within("d", 1_000, None).unwrap_err();
            assert!(matches!(error, Error::Sizing { .. }), "{error}");
            assert!(error.to_string().contains("size no new generation"), "{error}");
            assert_eq!(filter, before);
            assert!(["a", "b", "c"].iter().all(|item| filter.contains(*item)));
            assert!(!filter.contains("d"));
            // The library's panicking insert says the same.
            let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                filter.clone().insert_at("d", 1_000);
            }));
            assert!(panicked.is_err());
        }
    }

    #[test]
    fn a_version_1_file_still_needs_a_shape_from_its_parameters() {
        // Version 1 has no stored shapes: parameters that size none are refused.
        let made = RotatingBloomFilter::new(2, 3, 0.01).unwrap();
        let (params, payload) = v2_parts_with(&made, 3, 1e-100);
        let mut v1 = params[..32].to_vec();
        v1.extend_from_slice(&params[32..48]); // the one generation's items and start
        assert!(RotatingBloomFilter::from_parts_of_version(1, &v1, &payload).is_err());
        // Guava's shape for 3 items at 1% (one word), which version 1 implies.
        assert_eq!(ClassicShape::for_fpp(3, 0.01).unwrap().num_words, 1);
        let (params, _) = v2_parts_with(&made, 3, 0.01);
        let mut v1 = params[..32].to_vec();
        v1.extend_from_slice(&params[32..48]);
        assert!(RotatingBloomFilter::from_parts_of_version(1, &v1, &[0; 8]).is_ok());
    }
}
