//! Counting filters, whose items can be removed: the library's [`CountingBloomFilter`]
//! (4-bit counters where a Bloom filter has bits) behind the `CBF.*` commands:
//!
//! ```text
//! CBF.RESERVE key error_rate capacity
//! CBF.ADD key item                  CBF.MADD key item [item ...]
//! CBF.DEL key item
//! CBF.EXISTS key item               CBF.MEXISTS key item [item ...]
//! CBF.COUNT key item                CBF.CARD key
//! CBF.INFO key [CAPACITY | SIZE | ITEMS | COUNTERS | HASHES | SATURATED | ERROR]
//! ```
//!
//! (Not `CF.*`: RedisBloom's cuckoo filter has those names.) The filter has a fixed size:
//! past `capacity` items its false-positive rate rises instead of it growing. `CBF.ADD` and
//! `CBF.MADD` on a missing key make one with the module's default error rate and capacity
//! (the load arguments `ERROR_RATE` and `INITIAL_SIZE`).
//!
//! Removal follows the library's rule. `CBF.DEL` of an item the filter says is absent (a
//! counter it needs is 0) is refused with an error and changes nothing. A counter that
//! reaches 15 is saturated: its true count is unknown, so it stays at 15 for good and is
//! never decremented, and no other item ever loses a count it needs; the item whose
//! counters are all saturated stays present. Removing an item that was never added but is
//! a false positive takes counts from the items that share its counters, as in every
//! counting filter: remove only what was added.
//!
//! Keys are the module's data type, like `BF.*` keys: saved, rewritten, replicated,
//! dumped and loaded (`BF.SCANDUMP`, `BF.LOADCHUNK`) alike. `CBF.*` commands on a filter of
//! another kind, and `BF.ADD`/`BF.MADD`/`BF.INSERT` on a counting filter, answer an error.

use bloomery::any::{DynFilter, FilterView, Spec};
use bloomery::format::native::Variant;
use bloomery::{CountingBloomFilter, Error as BloomError};
use redis_module::key::RedisKey;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::commands::{
    booleans, default_rate_and_capacity, integer, notify_and_replicate, rate_and_capacity, read_filter,
    refuse_existing, reply_info, write_filter,
};
use crate::datatype::{BLOOM_TYPE, Stored};
use crate::limits::cap_for_command;
use crate::loading::over_cap_message;

const NOT_COUNTING: &str = "ERR the key holds a Bloom filter that cannot remove items: CBF.* commands need a counting filter (CBF.RESERVE)";

const USE_CBF: &str = "ERR the key holds a counting filter: add to it with CBF.ADD or CBF.MADD";

const NOT_PRESENT: &str = "ERR not present: the filter does not hold the item, nothing was removed";

/// Refuses `BF.ADD`/`BF.MADD`/`BF.INSERT` on a counting filter.
pub fn refuse_bf_writes(filter: &dyn DynFilter) -> Result<(), RedisError> {
    if filter.variant() == Variant::Counting {
        Err(RedisError::Str(USE_CBF))
    } else {
        Ok(())
    }
}

fn counting(filter: &dyn DynFilter) -> Result<&CountingBloomFilter, RedisError> {
    filter
        .as_any()
        .downcast_ref::<CountingBloomFilter>()
        .ok_or(RedisError::Str(NOT_COUNTING))
}

fn counting_mut(filter: &mut Box<dyn DynFilter>) -> Result<&mut CountingBloomFilter, RedisError> {
    filter
        .as_any_mut()
        .downcast_mut::<CountingBloomFilter>()
        .ok_or(RedisError::Str(NOT_COUNTING))
}

/// A new counting filter, refused before allocating if its counters would pass `cap`.
fn create(error_rate: f64, capacity: u64, cap: Option<u64>) -> Result<CountingBloomFilter, RedisError> {
    let bytes = Spec::new(Variant::Counting, capacity, error_rate)
        .memory_bytes()
        .map_err(|error| RedisError::String(format!("ERR {error}")))?;
    if let Some(cap) = cap.filter(|&cap| bytes > cap) {
        return Err(RedisError::String(over_cap_message(bytes, cap)));
    }
    CountingBloomFilter::with_fpp(capacity, error_rate)
        .map_err(|error| RedisError::String(format!("ERR {error}")))
}

/// `CBF.RESERVE key error_rate capacity`
pub fn reserve(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 4 {
        return Err(RedisError::WrongArity);
    }
    let key = &args[1];
    let (error_rate, capacity) = rate_and_capacity(&args[2], &args[3])?;
    let redis_key = ctx.open_key_writable(key);
    refuse_existing(&redis_key)?;
    let filter = create(error_rate, capacity, cap_for_command(&ctx.get_flags()))?;
    redis_key.set_value(&BLOOM_TYPE, Stored::Filter(Box::new(filter)))?;
    crate::accounting::after_write(&redis_key);
    notify_and_replicate(ctx, c"cbf.reserve", key);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Adds `args[2..]` to the counting filter at `args[1]`, made with the defaults if
/// missing (replicated as an explicit `CBF.RESERVE`, so a replica with other defaults
/// makes the same filter): whether each item was absent before.
fn add_items(ctx: &Context, args: &[RedisString]) -> Result<Vec<RedisValue>, RedisError> {
    let key = &args[1];
    let redis_key = ctx.open_key_writable(key);
    if redis_key.is_empty() {
        let (error_rate, capacity) = default_rate_and_capacity();
        let filter = create(error_rate, capacity, cap_for_command(&ctx.get_flags()))?;
        redis_key.set_value(&BLOOM_TYPE, Stored::Filter(Box::new(filter)))?;
        let (rate, capacity) = (format!("{error_rate:?}"), capacity.to_string());
        ctx.replicate(
            "CBF.RESERVE",
            &[key.as_slice(), rate.as_bytes(), capacity.as_bytes()][..],
        );
    }
    let filter = write_filter(&redis_key)?.ok_or(RedisError::Str("ERR could not create the filter"))?;
    let filter = counting_mut(filter)?;
    let boolean = booleans();
    let replies = args[2..]
        .iter()
        .map(|item| boolean(filter.insert(item.as_slice())))
        .collect();
    crate::accounting::after_write(&redis_key);
    notify_and_replicate(ctx, c"cbf.add", key);
    Ok(replies)
}

/// `CBF.ADD key item`: 1 if the item was absent before, else 0 (one more count either way).
pub fn add(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let mut replies = add_items(ctx, &args)?;
    replies.pop().ok_or(RedisError::Str("ERR no reply"))
}

/// `CBF.MADD key item [item ...]`
pub fn madd(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    Ok(RedisValue::Array(add_items(ctx, &args)?))
}

/// `CBF.DEL key item`: removes one count of the item (1), or refuses with an error, changing
/// nothing, when the filter does not hold it.
pub fn del(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let key = &args[1];
    let redis_key = ctx.open_key_writable(key);
    let filter = write_filter(&redis_key)?.ok_or(RedisError::Str("ERR not found"))?;
    match counting_mut(filter)?.remove(args[2].as_slice()) {
        Ok(()) => {
            crate::accounting::after_write(&redis_key);
            notify_and_replicate(ctx, c"cbf.del", key);
            Ok(RedisValue::Integer(1))
        }
        Err(BloomError::NotPresent) => Err(RedisError::Str(NOT_PRESENT)),
        Err(error) => Err(RedisError::String(format!("ERR {error}"))),
    }
}

/// The counting filter at `key` for reading: `None` if the key is missing.
fn read(key: &RedisKey) -> Result<Option<&CountingBloomFilter>, RedisError> {
    read_filter(key)?.map(counting).transpose()
}

/// Looks items up; a missing key answers 0 for each.
fn lookup(ctx: &Context, args: &[RedisString]) -> Result<Vec<RedisValue>, RedisError> {
    let redis_key = ctx.open_key(&args[1]);
    let filter = read(&redis_key)?;
    let boolean = booleans();
    Ok(args[2..]
        .iter()
        .map(|item| boolean(filter.is_some_and(|filter| filter.contains(item.as_slice()))))
        .collect())
}

/// `CBF.EXISTS key item`
pub fn exists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    lookup(ctx, &args)?.pop().ok_or(RedisError::Str("ERR no reply"))
}

/// `CBF.MEXISTS key item [item ...]`
pub fn mexists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    Ok(RedisValue::Array(lookup(ctx, &args)?))
}

/// `CBF.COUNT key item`: at least how many times the item was added less removed (the
/// smallest of its counters; 15 means 15 or more, and a false positive counts too); 0 for
/// a missing key.
pub fn count(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let redis_key = ctx.open_key(&args[1]);
    let count = read(&redis_key)?.map_or(0, |filter| filter.count(args[2].as_slice()));
    Ok(RedisValue::Integer(i64::from(count)))
}

/// `CBF.CARD key`: the distinct items present, estimated from the counters in use.
pub fn card(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let redis_key = ctx.open_key(&args[1]);
    Ok(integer(
        read(&redis_key)?.map_or(0, CountingBloomFilter::estimated_len),
    ))
}

/// `CBF.INFO key [field]`: `Capacity` (the most items the counters are sized for at the
/// error rate, at least the capacity reserved), `Size` (bytes of counters), `Number of
/// items inserted` (estimated, as `CBF.CARD`), `Counters`, `Hash functions`, `Saturated
/// counters` and `Error rate` (the false-positive probability now), in `BF.INFO`'s shapes.
pub fn info(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 && args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let redis_key = ctx.open_key(&args[1]);
    let filter = read(&redis_key)?.ok_or(RedisError::Str("ERR not found"))?;
    let stats = FilterView::stats(filter);
    let fields = vec![
        ("Capacity", "CAPACITY", integer(stats.capacity.unwrap_or(0))),
        ("Size", "SIZE", integer(stats.memory_bytes)),
        ("Number of items inserted", "ITEMS", integer(stats.estimated_len)),
        ("Counters", "COUNTERS", integer(filter.num_counters())),
        (
            "Hash functions",
            "HASHES",
            integer(u64::from(filter.num_hashes())),
        ),
        (
            "Saturated counters",
            "SATURATED",
            integer(filter.saturated_counters()),
        ),
        ("Error rate", "ERROR", RedisValue::Float(stats.expected_fpp)),
    ];
    reply_info(ctx, fields, args.get(2))
}
