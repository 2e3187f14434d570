//! What the module holds, for `INFO bloomery`: how many keys of its types there are, the
//! bytes their filters take and the items they count, kept as running totals so that
//! `INFO` costs the same whatever the keyspace holds.
//!
//! Every value of the module's types (`bloomery_` and RedisBloom's `MBbloom--`) is reported
//! here by the pointer Redis holds for it, with its [`Figures`]; the ledger keeps the figures
//! last reported for each value beside it, and the totals are their sums:
//!
//! - a value that appears: [`report`] from `rdb_load` and `copy`, or [`after_write`] from
//!   the command that stored it (`BF.RESERVE`, a creating `BF.ADD`/`BF.MADD`/`BF.INSERT`,
//!   `BF.LOADCHUNK`'s first piece, `BF.HASHADD`);
//! - a value that changes: [`after_write`] once the write command is done with it (the
//!   totals move by the difference from what was last reported);
//! - a value that goes away: [`forget`] from the type's `free` callback (`DEL`, `UNLINK`,
//!   `FLUSHALL`, expiry, eviction, an overwrite, `DEBUG RELOAD`), which may run on Redis's
//!   lazy-free thread: the ledger is behind a lock.
//!
//! **Every write command calls [`after_write`] with its key before returning** (once, at
//! the end, on every path that may have created or changed a value; a key left empty or
//! of another type is ignored). A command that forgot would leave its key's figures as
//! they were last reported, never a negative or lost total: `free` takes away what was
//! reported, not what the value holds. A value of a new module type reports itself with
//! [`report`] and [`forget`] directly, with figures it computes cheaply.
//!
//! The ledger costs about 32 bytes per key of the module's types (address and figures),
//! plus the hash table's spare room, and one lock and hash lookup per write command.
//!
//! The figures are cheap to compute: a filter's memory and counted items are fields or
//! sums over its few sub-filters, never a scan of its bits. So `items` counts the filters
//! that count what they hold (every filter the `BF.*` commands create, RedisBloom's, and
//! scalable or rotating files loaded with `BF.LOADCHUNK`); a filter whose `BF.CARD` is an
//! estimate from its bits (a sharded filter's shard, a fixed-size file loaded with
//! `BF.LOADCHUNK`) adds its bytes and counts as `estimated_filters`, not in `items`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::raw::c_void;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError, TryLockError};

use bloomery::any::{DynFilter, Stats};
use bloomery::counting::CountingBloomFilter;
use bloomery::redisbloom::RedisBloomFilter;
use bloomery::retouched::RetouchedBloomFilter;
use bloomery::rotating::RotatingBloomFilter;
use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
use bloomery::{
    AllowlistedBloomFilter, BlockedBloomFilter, BloomFilter, FilterStats, ScalableBloomFilter,
    SplitBlockBloomFilter,
};
use redis_module::InfoContext;
use redis_module::key::RedisKeyWritable;

use crate::datatype::{BLOOM_TYPE, Stored};
use crate::limits;
use crate::mbbloom::MBBLOOM_TYPE;

/// One value's contribution to the totals (each count 0 or 1), or the totals themselves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Keys holding a filter.
    pub filters: u64,
    /// Of those, RedisBloom's type (`MBbloom--`).
    pub redisbloom_filters: u64,
    /// Of those, filters whose item count is an estimate from their bits (not in `items`).
    pub estimated_filters: u64,
    /// Keys holding a `BF.LOADCHUNK` load in progress.
    pub loads: u64,
    /// Bytes of filters (bits, counters and their bookkeeping, as `BF.INFO`'s `Size` less
    /// RedisBloom's structure sizes) and of the pieces loads in progress have received.
    pub bytes: u64,
    /// Items the filters count (`BF.CARD`).
    pub items: u64,
}

impl Figures {
    /// The field-wise sum; wrapping, since every subtraction takes back an earlier
    /// addition, so the totals are exact whatever the order.
    fn plus(self, other: Figures) -> Figures {
        Figures {
            filters: self.filters.wrapping_add(other.filters),
            redisbloom_filters: self.redisbloom_filters.wrapping_add(other.redisbloom_filters),
            estimated_filters: self.estimated_filters.wrapping_add(other.estimated_filters),
            loads: self.loads.wrapping_add(other.loads),
            bytes: self.bytes.wrapping_add(other.bytes),
            items: self.items.wrapping_add(other.items),
        }
    }

    fn minus(self, other: Figures) -> Figures {
        Figures {
            filters: self.filters.wrapping_sub(other.filters),
            redisbloom_filters: self.redisbloom_filters.wrapping_sub(other.redisbloom_filters),
            estimated_filters: self.estimated_filters.wrapping_sub(other.estimated_filters),
            loads: self.loads.wrapping_sub(other.loads),
            bytes: self.bytes.wrapping_sub(other.bytes),
            items: self.items.wrapping_sub(other.items),
        }
    }

    /// A filter of `bytes` counting `items` (`None`: its count is an estimate).
    pub fn filter(bytes: u64, items: Option<u64>) -> Figures {
        Figures {
            filters: 1,
            estimated_filters: if items.is_some() { 0 } else { 1 },
            bytes,
            items: items.unwrap_or(0),
            ..Figures::default()
        }
    }
}

/// One value's figures as the ledger keeps them: 24 bytes instead of [`Figures`]' 48 (with
/// the address, 32 bytes a key in the table), since each count is 0 or 1.
#[derive(Clone, Copy, Default)]
struct Entry {
    bytes: u64,
    items: u64,
    /// [`FILTER`], [`REDISBLOOM`], [`ESTIMATED`], [`LOAD`].
    kinds: u8,
}

const FILTER: u8 = 1;
const REDISBLOOM: u8 = 2;
const ESTIMATED: u8 = 4;
const LOAD: u8 = 8;

impl Entry {
    fn of(figures: Figures) -> Entry {
        let kind = |count: u64, bit: u8| if count > 0 { bit } else { 0 };
        Entry {
            bytes: figures.bytes,
            items: figures.items,
            kinds: kind(figures.filters, FILTER)
                | kind(figures.redisbloom_filters, REDISBLOOM)
                | kind(figures.estimated_filters, ESTIMATED)
                | kind(figures.loads, LOAD),
        }
    }

    fn figures(self) -> Figures {
        let count = |bit: u8| if self.kinds & bit != 0 { 1 } else { 0 };
        Figures {
            filters: count(FILTER),
            redisbloom_filters: count(REDISBLOOM),
            estimated_filters: count(ESTIMATED),
            loads: count(LOAD),
            bytes: self.bytes,
            items: self.items,
        }
    }
}

/// The hash of a value's address: one multiply by an odd constant (2^64 / golden ratio),
/// whose high bits the table uses. Addresses are not chosen by clients, so SipHash's
/// protection (a third of a `BF.ADD`'s accounting) buys nothing here.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, address: usize) {
        self.0 = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The figures last reported for each value (by its address), and their sums.
#[derive(Default)]
struct Ledger {
    values: HashMap<usize, Entry, BuildHasherDefault<AddressHasher>>,
    totals: Figures,
}

static LEDGER: LazyLock<Mutex<Ledger>> = LazyLock::new(Mutex::default);

fn ledger() -> MutexGuard<'static, Ledger> {
    // A panic while the lock was held cannot leave the totals half-updated (each update is
    // one assignment), so a poisoned lock is still good.
    LEDGER.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Records `figures` (one value's: each count 0 or 1) as what the value at `value` holds
/// now: added to the totals if the value is new, else the totals move by the difference
/// from its last report.
pub fn report(value: *const c_void, figures: Figures) {
    let entry = Entry::of(figures);
    let mut ledger = ledger();
    let previous = ledger.values.insert(value as usize, entry).unwrap_or_default();
    ledger.totals = ledger.totals.plus(entry.figures()).minus(previous.figures());
}

/// Takes the value at `value` out of the totals (what it last reported); call it from the
/// type's `free` callback before the value is dropped (after, its address could already
/// hold a new value). A value never reported is ignored.
pub fn forget(value: *const c_void) {
    let mut ledger = ledger();
    if let Some(previous) = ledger.values.remove(&(value as usize)) {
        ledger.totals = ledger.totals.minus(previous.figures());
    }
}

/// The totals.
pub fn totals() -> Figures {
    ledger().totals
}

/// The figures of a value of the module's types (`redisbloom`: RedisBloom's type).
pub fn figures_of(value: &Stored, redisbloom: bool) -> Figures {
    let figures = match value {
        Stored::Filter(filter) => filter_figures(filter.as_ref()),
        Stored::Loading(load) => Figures {
            loads: 1,
            bytes: load.received_bytes().len() as u64,
            ..Figures::default()
        },
    };
    Figures {
        redisbloom_filters: if redisbloom { figures.filters } else { 0 },
        ..figures
    }
}

/// A filter's memory and counted items, from fields: the variants the module creates
/// first, then the ones `BF.LOADCHUNK` may bring (all of them cheap to ask); a variant not
/// listed here (added to the library later) is asked for its stats, which may read its bits.
fn filter_figures(filter: &dyn DynFilter) -> Figures {
    let any = filter.as_any();
    if let Some(chain) = any.downcast_ref::<ScalableBlockedBloomFilter>() {
        return Figures::filter(chain.memory_bytes(), Some(chain.len()));
    }
    if let Some(chain) = any.downcast_ref::<RedisBloomFilter>() {
        return Figures::filter(chain.bitmap_bytes(), Some(chain.len()));
    }
    if let Some(shard) = any.downcast_ref::<BlockedBloomFilter>() {
        return Figures::filter(shard.memory_bytes() as u64, None);
    }
    if let Some(scalable) = any.downcast_ref::<ScalableBloomFilter>() {
        return Figures::filter(FilterStats::memory_bytes(scalable) as u64, Some(scalable.len()));
    }
    if let Some(rotating) = any.downcast_ref::<RotatingBloomFilter>() {
        return Figures::filter(FilterStats::memory_bytes(rotating) as u64, Some(rotating.len()));
    }
    fn fixed<F: FilterStats + 'static>(any: &dyn std::any::Any) -> Option<Figures> {
        any.downcast_ref::<F>()
            .map(|filter| Figures::filter(filter.memory_bytes() as u64, None))
    }
    fixed::<BloomFilter>(any)
        .or_else(|| fixed::<SplitBlockBloomFilter>(any))
        .or_else(|| fixed::<CountingBloomFilter>(any))
        .or_else(|| fixed::<RetouchedBloomFilter>(any))
        .or_else(|| fixed::<AllowlistedBloomFilter>(any))
        .unwrap_or_else(|| Figures::filter(filter.stats().memory_bytes, None))
}

/// A filter's stats without reading its bits, for what answers from counts and sizes on
/// Redis's main thread (`BF.INFO`, `BF.CARD`, `MEMORY USAGE`, `UNLINK`'s effort): the chains
/// the module creates keep all of them in fields, where their `stats()` also reads every
/// bit for `expected_fpp` (a pass over a 1 GiB filter per call). Their `expected_fpp` here
/// is NaN: not computed. A blocked filter (a shard of a sharded filter) counts its bits
/// once for its estimate, and its `expected_fpp` is not computed either (a second pass:
/// `stats()` made `BF.CARD` of a shard read it twice). Other variants are asked for their
/// stats.
pub fn counted_stats(filter: &dyn DynFilter) -> Stats {
    let any = filter.as_any();
    if let Some(blocked) = any.downcast_ref::<BlockedBloomFilter>() {
        return Stats {
            estimated_len: blocked.estimated_len(),
            expected_fpp: f64::NAN,
            memory_bytes: blocked.memory_bytes() as u64,
            capacity: blocked.sized_for().map(|sized| sized.expected_items),
            refuses_beyond_capacity: false,
            sub_filters: 1,
            expansion: None,
        };
    }
    if let Some(chain) = any.downcast_ref::<ScalableBlockedBloomFilter>() {
        let options = chain.options();
        return Stats {
            estimated_len: chain.len(),
            expected_fpp: f64::NAN,
            memory_bytes: chain.memory_bytes(),
            capacity: Some(chain.capacity()),
            refuses_beyond_capacity: !chain.can_grow(),
            sub_filters: chain.num_filters() as u64,
            expansion: options.scaling.then_some(options.expansion),
        };
    }
    if let Some(chain) = any.downcast_ref::<RedisBloomFilter>() {
        return Stats {
            estimated_len: chain.len(),
            expected_fpp: f64::NAN,
            memory_bytes: chain.bitmap_bytes(),
            capacity: Some(chain.capacity()),
            refuses_beyond_capacity: !chain.can_grow(),
            sub_filters: chain.links().len() as u64,
            expansion: (!chain.is_nonscaling()).then(|| chain.growth()),
        };
    }
    filter.stats()
}

/// Reports the value at `key` after a write command: call it once, at the end of every
/// write command (see the module docs). A key left empty, or holding another type, is
/// ignored.
pub fn after_write(key: &RedisKeyWritable) {
    let (value, redisbloom) = match key.get_value::<Stored>(&BLOOM_TYPE) {
        Ok(Some(value)) => (value, false),
        _ => match key.get_value::<Stored>(&MBBLOOM_TYPE) {
            Ok(Some(value)) => (value, true),
            _ => return,
        },
    };
    let figures = figures_of(value, redisbloom);
    report(std::ptr::from_ref(value).cast::<c_void>(), figures);
}

/// Where a value a write command is working on lives, and its type: what
/// [`after_write_held`] needs, found when the command looked the key up.
#[derive(Clone, Copy)]
pub struct Held {
    value: *const Stored,
    redisbloom: bool,
}

impl Held {
    /// The value at a key (`redisbloom`: of RedisBloom's type), from the pointer that the
    /// command's own borrow of it comes from (not a reborrow beside that one).
    pub fn new(value: *mut Stored, redisbloom: bool) -> Held {
        Held {
            value: value.cast_const(),
            redisbloom,
        }
    }
}

/// [`after_write`] for a value the command already holds, without looking the key up again
/// (the single-item `BF.ADD`'s path).
///
/// # Safety
/// The key the value was found at must still hold it.
pub unsafe fn after_write_held(held: Held) {
    // SAFETY: the value is alive, as the caller promises.
    let value = unsafe { &*held.value };
    report(held.value.cast::<c_void>(), figures_of(value, held.redisbloom));
}

/// `INFO bloomery` (also in `INFO modules`, `INFO all`, `INFO everything`): section
/// `bloomery` with the totals, section `bloomery_config` with the configurations in force.
/// Redis prefixes each field with the module's name: `bloomery_filters`, ...
pub fn info(ctx: &InfoContext, for_crash_report: bool) {
    // A crash report may come from a thread that holds the lock: never wait for it there.
    let totals = if for_crash_report {
        match LEDGER.try_lock() {
            Ok(ledger) => Some(ledger.totals),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner().totals),
            Err(TryLockError::WouldBlock) => None,
        }
    } else {
        Some(totals())
    };
    let yes_no = |on: bool| if on { "yes" } else { "no" };
    let built = (|| {
        let mut builder = ctx.builder();
        if let Some(totals) = totals {
            builder = builder
                .add_section("")
                .field("filters", totals.filters)?
                .field("redisbloom_filters", totals.redisbloom_filters)?
                .field("estimated_filters", totals.estimated_filters)?
                .field("loads", totals.loads)?
                .field("bytes", totals.bytes)?
                .field("items", totals.items)?
                .build_section()?;
        }
        builder
            .add_section("config")
            .field("error_rate", limits::error_rate_text())?
            .field("initial_size", limits::default_initial_size())?
            .field("expansion", limits::default_expansion())?
            .field("max_filter_memory", limits::max_filter_memory().unwrap_or(0))?
            .field("redisbloom_layout", yes_no(limits::redisbloom_layout()))?
            .field("redisbloom_errors", yes_no(limits::redisbloom_errors()))?
            .build_section()?
            .build_info()
            .map(|_| ())
    })();
    if let Err(error) = built {
        crate::log::warning_without_context(&format!("bloomery: INFO failed: {error}"));
    }
}
