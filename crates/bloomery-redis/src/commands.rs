//! The `BF.*` commands, with RedisBloom 2.6.28's syntax, defaults and error replies
//! (`shared/peers/redisbloom-2.6.28.md`). Where RedisBloom is plainly wrong we differ, and
//! say so here: `BF.EXISTS`/`BF.MEXISTS` on a key of another type answer WRONGTYPE (as
//! `BF.CARD` does) instead of 0, and a filter beyond the memory cap is refused with an
//! error instead of taking the server down.

use bloomery::any::{self, DynFilter, Spec};
use bloomery::{Error as BloomError, ScalableOptions};
use redis_module::key::{RedisKey, RedisKeyWritable};
use redis_module::{Context, NotifyEvent, RedisError, RedisResult, RedisString, RedisValue, Status};

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bloomery::format::native::Variant;
use bloomery::format::pieces::{Assembled, PieceAssembler};

use crate::datatype::{BLOOM_TYPE, CHUNK_BYTES, Stored, dump_chunk};
use crate::limits::{MAX_DUMP_BYTES, MAX_EXPANSION, MAX_FILTER_BYTES, first_filter_bytes};

/// The defaults for filters created by `BF.ADD`/`BF.MADD`/`BF.INSERT`: RedisBloom's
/// (error rate 0.01, capacity 100, expansion 2), overridable when the module is loaded:
/// `--loadmodule libbloomery_redis.so ERROR_RATE 0.001 INITIAL_SIZE 1000 EXPANSION 4`.
static DEFAULT_ERROR_RATE_BITS: AtomicU64 = AtomicU64::new(0x3F84_7AE1_47AE_147B); // 0.01
static DEFAULT_CAPACITY: AtomicU64 = AtomicU64::new(100);
static DEFAULT_EXPANSION: AtomicU64 = AtomicU64::new(2);

/// Reads the module's load arguments (pairs of NAME VALUE); refuses to load on a bad one.
/// Also makes every filter array come from Redis's allocator (no directly mapped huge-page
/// arrays), so `INFO memory`, `maxmemory` and eviction see all of the module's memory.
pub fn configure(ctx: &Context, args: &[RedisString]) -> Status {
    bloomery::bits::set_huge_pages(false);
    let mut pairs = args.chunks(2);
    for pair in &mut pairs {
        let [name, value] = pair else {
            ctx.log_warning("bloomery: load arguments come in NAME VALUE pairs");
            return Status::Err;
        };
        let accepted = if word_is(name, "ERROR_RATE") {
            parse_f64(value)
                .filter(|&rate| rate > 0.0 && rate < 1.0)
                .map(|rate| DEFAULT_ERROR_RATE_BITS.store(rate.to_bits(), Ordering::Relaxed))
        } else if word_is(name, "INITIAL_SIZE") {
            parse_i64(value)
                .filter(|&capacity| {
                    capacity > 0 && first_filter_bytes(capacity as u64, 0.01) <= MAX_FILTER_BYTES
                })
                .map(|capacity| DEFAULT_CAPACITY.store(capacity as u64, Ordering::Relaxed))
        } else if word_is(name, "EXPANSION") {
            parse_i64(value)
                .filter(|&expansion| expansion >= 1 && expansion as u64 <= MAX_EXPANSION)
                .map(|expansion| DEFAULT_EXPANSION.store(expansion as u64, Ordering::Relaxed))
        } else {
            None
        };
        if accepted.is_none() {
            ctx.log_warning(&format!(
                "bloomery: bad load argument {} {} (ERROR_RATE in (0, 1), INITIAL_SIZE >= 1, EXPANSION >= 1)",
                name, value
            ));
            return Status::Err;
        }
    }
    Status::Ok
}

const FULL: &str = "ERR non scaling filter is full";
const WRONG_TYPE: RedisError =
    RedisError::Str("WRONGTYPE Operation against a key holding the wrong kind of value");

/// The filter at a key opened for reading; `None` for a missing key, WRONGTYPE (Redis's own
/// wording) for a key of another type.
fn read_filter(key: &RedisKey) -> Result<Option<&dyn DynFilter>, RedisError> {
    Ok(key
        .get_value::<Stored>(&BLOOM_TYPE)
        .map_err(|_| WRONG_TYPE)?
        .map(|filter| &**filter))
}

/// As [`read_filter`], for a key opened for writing.
fn write_filter(key: &RedisKeyWritable) -> Result<Option<&mut Stored>, RedisError> {
    key.get_value::<Stored>(&BLOOM_TYPE).map_err(|_| WRONG_TYPE)
}

/// Parameters of a new filter.
struct Reservation {
    error_rate: f64,
    capacity: u64,
    expansion: u32,
    scaling: bool,
}

impl Default for Reservation {
    fn default() -> Self {
        Self {
            error_rate: f64::from_bits(DEFAULT_ERROR_RATE_BITS.load(Ordering::Relaxed)),
            capacity: DEFAULT_CAPACITY.load(Ordering::Relaxed),
            expansion: DEFAULT_EXPANSION.load(Ordering::Relaxed) as u32,
            scaling: true,
        }
    }
}

impl Reservation {
    fn create(&self) -> Result<Stored, RedisError> {
        let bytes = first_filter_bytes(self.capacity, self.error_rate);
        if bytes > MAX_FILTER_BYTES {
            return Err(RedisError::String(format!(
                "ERR filter would take {bytes} bytes, more than the module's limit of {MAX_FILTER_BYTES}"
            )));
        }
        let spec = Spec {
            scalable: ScalableOptions {
                expansion: self.expansion,
                tightening: 0.5,
                scaling: self.scaling,
            },
            ..Spec::new(Variant::Scalable, self.capacity, self.error_rate)
        };
        any::create(&spec).map_err(|error| RedisError::String(format!("ERR {error}")))
    }
}

fn parse_f64(arg: &RedisString) -> Option<f64> {
    arg.try_as_str()
        .ok()?
        .parse::<f64>()
        .ok()
        .filter(|value| !value.is_nan())
}

fn parse_i64(arg: &RedisString) -> Option<i64> {
    arg.try_as_str().ok()?.parse::<i64>().ok()
}

fn word_is(arg: &RedisString, word: &str) -> bool {
    arg.try_as_str().is_ok_and(|text| text.eq_ignore_ascii_case(word))
}

fn notify_and_replicate(ctx: &Context, event: &str, key: &RedisString) {
    ctx.notify_keyspace_event(NotifyEvent::GENERIC, event, key);
    ctx.replicate_verbatim();
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]`
pub fn reserve(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let key = &args[1];
    let error_rate = parse_f64(&args[2]).ok_or(RedisError::Str("ERR bad error rate"))?;
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(RedisError::Str("ERR (0 < error rate range < 1) "));
    }
    let capacity = parse_i64(&args[3]).ok_or(RedisError::Str("ERR bad capacity"))?;
    if capacity <= 0 {
        return Err(RedisError::Str("ERR (capacity should be larger than 0)"));
    }
    let mut reservation = Reservation {
        error_rate,
        capacity: capacity as u64,
        ..Reservation::default()
    };
    let mut expansion_given = false;
    let mut rest = args[4..].iter();
    while let Some(word) = rest.next() {
        if word_is(word, "EXPANSION") {
            let value = rest.next().ok_or(RedisError::WrongArity)?;
            let expansion = parse_i64(value).ok_or(RedisError::Str("ERR bad expansion"))?;
            if expansion < 1 {
                return Err(RedisError::Str("ERR expansion should be greater or equal to 1"));
            }
            if expansion as u64 > MAX_EXPANSION {
                return Err(RedisError::String(format!(
                    "ERR expansion above the module's limit of {MAX_EXPANSION}"
                )));
            }
            reservation.expansion = expansion as u32;
            expansion_given = true;
        } else if word_is(word, "NONSCALING") {
            reservation.scaling = false;
        }
        // Other words are ignored, as RedisBloom does.
    }
    if !reservation.scaling && expansion_given {
        return Err(RedisError::Str("Nonscaling filters cannot expand"));
    }
    let redis_key = ctx.open_key_writable(key);
    if !redis_key.is_empty() {
        // WRONGTYPE for another type, "item exists" for a filter.
        write_filter(&redis_key)?;
        return Err(RedisError::Str("ERR item exists"));
    }
    redis_key.set_value(&BLOOM_TYPE, reservation.create()?)?;
    notify_and_replicate(ctx, "bf.reserve", key);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Adds `items` to the filter at `key` (created from `reservation` if missing, unless
/// `create` is false); one reply per item, stopping at the first error as RedisBloom does.
fn add_items(
    ctx: &Context,
    key: &RedisString,
    items: &[RedisString],
    reservation: Option<&Reservation>,
) -> Result<Vec<RedisValue>, RedisError> {
    let redis_key = ctx.open_key_writable(key);
    let filter = match write_filter(&redis_key)? {
        Some(filter) => filter,
        None => {
            let Some(reservation) = reservation else {
                return Err(RedisError::Str("ERR not found"));
            };
            redis_key.set_value(&BLOOM_TYPE, reservation.create()?)?;
            write_filter(&redis_key)?.ok_or(RedisError::Str("ERR could not create the filter"))?
        }
    };
    let mut replies = Vec::with_capacity(items.len());
    for item in items {
        match filter.insert(item.as_slice()) {
            Ok(added) => replies.push(RedisValue::Integer(i64::from(added))),
            Err(BloomError::Full { .. }) => {
                replies.push(RedisValue::StaticError(FULL));
                break;
            }
            Err(_) => {
                replies.push(RedisValue::StaticError("ERR filter cannot grow any further"));
                break;
            }
        }
    }
    notify_and_replicate(ctx, "bf.add", key);
    Ok(replies)
}

/// `BF.ADD key item`
pub fn add(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let mut replies = add_items(ctx, &args[1], &args[2..], Some(&Reservation::default()))?;
    match replies.pop() {
        Some(RedisValue::StaticError(message)) => Err(RedisError::Str(message)),
        Some(reply) => Ok(reply),
        None => Err(RedisError::Str("ERR no reply")),
    }
}

/// `BF.MADD key item [item ...]`
pub fn madd(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    Ok(RedisValue::Array(add_items(
        ctx,
        &args[1],
        &args[2..],
        Some(&Reservation::default()),
    )?))
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item...`
pub fn insert(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let mut reservation = Reservation::default();
    let mut create = true;
    let mut index = 2;
    let items_at = loop {
        let Some(word) = args.get(index) else {
            return Err(RedisError::WrongArity);
        };
        if word_is(word, "ITEMS") {
            break index + 1;
        }
        let value = args.get(index + 1);
        if word_is(word, "CAPACITY") {
            let capacity = value.and_then(parse_i64).filter(|&capacity| capacity > 0);
            reservation.capacity = capacity.ok_or(RedisError::Str("Bad argument received"))? as u64;
            index += 2;
        } else if word_is(word, "ERROR") {
            let error_rate = value.and_then(parse_f64).filter(|&rate| rate > 0.0 && rate < 1.0);
            reservation.error_rate = error_rate.ok_or(RedisError::Str("Bad argument received"))?;
            index += 2;
        } else if word_is(word, "EXPANSION") {
            let expansion = value
                .and_then(parse_i64)
                .filter(|&n| n >= 1 && n as u64 <= MAX_EXPANSION);
            reservation.expansion = expansion.ok_or(RedisError::Str("Bad argument received"))? as u32;
            index += 2;
        } else if word_is(word, "NOCREATE") {
            create = false;
            index += 1;
        } else if word_is(word, "NONSCALING") {
            reservation.scaling = false;
            index += 1;
        } else {
            return Err(RedisError::Str("Unknown argument received"));
        }
    };
    if items_at >= args.len() {
        return Err(RedisError::WrongArity);
    }
    let reservation = create.then_some(&reservation);
    Ok(RedisValue::Array(add_items(
        ctx,
        &args[1],
        &args[items_at..],
        reservation,
    )?))
}

/// Looks items up in the filter at `key`; a missing key answers 0 for each.
fn lookup(ctx: &Context, key: &RedisString, items: &[RedisString]) -> Result<Vec<RedisValue>, RedisError> {
    let redis_key = ctx.open_key(key);
    let filter = read_filter(&redis_key)?;
    Ok(items
        .iter()
        .map(|item| {
            RedisValue::Integer(i64::from(
                filter.is_some_and(|filter| filter.contains(item.as_slice())),
            ))
        })
        .collect())
}

/// `BF.EXISTS key item`
pub fn exists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let mut replies = lookup(ctx, &args[1], &args[2..])?;
    Ok(replies.pop().unwrap_or(RedisValue::Integer(0)))
}

/// `BF.MEXISTS key item [item ...]`
pub fn mexists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    Ok(RedisValue::Array(lookup(ctx, &args[1], &args[2..])?))
}

/// `BF.CARD key`
pub fn card(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let redis_key = ctx.open_key(&args[1]);
    let filter = read_filter(&redis_key)?;
    Ok(RedisValue::Integer(
        filter.map_or(0, |filter| filter.stats().estimated_len as i64),
    ))
}

/// `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]`
pub fn info(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 && args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let redis_key = ctx.open_key(&args[1]);
    let stats = read_filter(&redis_key)?
        .ok_or(RedisError::Str("ERR not found"))?
        .stats();
    let expansion = stats.expansion.map_or(RedisValue::Null, |expansion| {
        RedisValue::Integer(i64::from(expansion))
    });
    let fields = [
        (
            "Capacity",
            "CAPACITY",
            RedisValue::Integer(stats.capacity.unwrap_or(0) as i64),
        ),
        ("Size", "SIZE", RedisValue::Integer(stats.memory_bytes as i64)),
        (
            "Number of filters",
            "FILTERS",
            RedisValue::Integer(stats.sub_filters as i64),
        ),
        (
            "Number of items inserted",
            "ITEMS",
            RedisValue::Integer(stats.estimated_len as i64),
        ),
        ("Expansion rate", "EXPANSION", expansion),
    ];
    if let Some(wanted) = args.get(2) {
        return fields
            .into_iter()
            .find(|(_, name, _)| word_is(wanted, name))
            .map(|(_, _, value)| value)
            .ok_or(RedisError::Str("Invalid information value"));
    }
    Ok(RedisValue::Array(
        fields
            .into_iter()
            .flat_map(|(label, _, value)| [RedisValue::SimpleStringStatic(label), value])
            .collect(),
    ))
}

/// `BF.SCANDUMP key iterator`: piece `iterator + 1` of the filter's serialized form, as
/// `[next iterator, bytes]`; `[0, ""]` when done. Feed each pair to `BF.LOADCHUNK`. Each
/// call copies one piece (at most 16 MiB) from the filter; the first also checksums it.
pub fn scandump(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let iterator = parse_i64(&args[2])
        .filter(|&iterator| iterator >= 0)
        .ok_or(RedisError::Str("ERR invalid iterator"))?;
    let redis_key = ctx.open_key(&args[1]);
    let filter = read_filter(&redis_key)?.ok_or(RedisError::Str("ERR not found"))?;
    let next = iterator as u64 + 1;
    Ok(match dump_chunk(&filter.envelope(), next) {
        Some(chunk) => RedisValue::Array(vec![
            RedisValue::Integer(next as i64),
            RedisValue::StringBuffer(chunk),
        ]),
        None => RedisValue::Array(vec![RedisValue::Integer(0), RedisValue::StringBuffer(Vec::new())]),
    })
}

/// Loads in progress, by key. Memory grows only with the pieces received.
static PENDING: Mutex<BTreeMap<Vec<u8>, PieceAssembler>> = Mutex::new(BTreeMap::new());

const BAD_DATA: RedisError = RedisError::Str("ERR received bad data");

/// `BF.LOADCHUNK key iterator data`: restores a filter from `BF.SCANDUMP`'s pieces, in
/// order (the library's [`PieceAssembler`] checks each piece as it comes). Any bloomery
/// variant loads (a file made by the `bloomery` tool is one piece per 16 MiB of its
/// bytes); `BF.*` commands then answer through the library's interface. The key is written
/// when the last piece arrives and the whole dump passes its checksums and parameter
/// checks; anything malformed is refused with "received bad data" and changes nothing.
pub fn loadchunk(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 4 {
        return Err(RedisError::WrongArity);
    }
    let key = &args[1];
    let iterator = parse_i64(&args[2]).ok_or(BAD_DATA)?;
    let data = args[3].as_slice();
    let mut pending = PENDING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let key_bytes = key.as_slice().to_vec();
    // A new dump (iterator 1) replaces any unfinished one for the key; a bad piece ends it.
    let progress = if iterator == 1 {
        pending.remove(&key_bytes);
        PieceAssembler::start(data, CHUNK_BYTES, MAX_DUMP_BYTES)
    } else {
        let assembler = pending.remove(&key_bytes).ok_or(BAD_DATA)?;
        assembler.push(u64::try_from(iterator).map_err(|_| BAD_DATA)?, data)
    };
    let complete = match progress.map_err(|_| BAD_DATA)? {
        Assembled::Complete(bytes) => Some(bytes),
        Assembled::NeedMore(assembler) => {
            pending.insert(key_bytes, assembler);
            None
        }
    };
    drop(pending);
    if let Some(bytes) = complete {
        let filter = any::open(&bytes).map_err(|_| BAD_DATA)?;
        let redis_key = ctx.open_key_writable(key);
        if !redis_key.is_empty() {
            write_filter(&redis_key)?;
        }
        redis_key.set_value(&BLOOM_TYPE, filter)?;
        ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.loadchunk", key);
    }
    ctx.replicate_verbatim();
    Ok(RedisValue::SimpleStringStatic("OK"))
}
