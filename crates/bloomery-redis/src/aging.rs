//! Aging filters, "filters that forget": the library's rotating filter
//! ([`RotatingBloomFilter`]) behind the `BF.*` commands, made by the `WINDOW` option of
//! `BF.RESERVE` and `BF.INSERT`:
//!
//! ```text
//! BF.RESERVE key error_rate capacity WINDOW [SECONDS t] [GENERATIONS g] [AT ms]
//! BF.INSERT key [CAPACITY c] [ERROR e] WINDOW [SECONDS t] [GENERATIONS g] [NOCREATE] [AT ms] ITEMS item...
//! ```
//!
//! The filter keeps `g` generations (default [`DEFAULT_GENERATIONS`]) of
//! `ceil(capacity / (g - 1))` items each, at a per-generation rate `p` chosen so that the
//! rate over all of them, `1 - (1 - p)^g`, is `error_rate`. An add answers 1 when no
//! generation within the window holds the item; either way the item goes into the newest
//! generation, and counts towards its items unless it was there already. A new generation
//! starts (the oldest dropped when `g` are kept) when the newest holds its items, or, with
//! `SECONDS t`, when it is `t / (g - 1)` seconds old. An item is found for at least `g - 1`
//! whole generations after its own: by count alone, the item of every one of the last
//! `capacity` adds, whatever each answered; with `SECONDS t`, every item of the last `t`
//! seconds while no generation fills before its time, and none older than
//! `t * g / (g - 1)` seconds. Lookups skip the generations time has retired even when
//! nobody writes ([`RotatingBloomFilter::contains_at`]).
//!
//! Time is decided once, by the server that runs the client's command: its clock, or the
//! command's `AT` (milliseconds since the Unix epoch; a time ahead of the clock counts as
//! the clock, one more than [`MOST_AHEAD_MS`] ahead is refused); a time earlier than the
//! newest generation's start counts as that start (the library's filter never lets time
//! go back). What is replicated and written to
//! the AOF is an explicit `BF.RESERVE ... AT ms` or `BF.INSERT key ... AT ms ITEMS ...`
//! with that time and the items that were added, so a replica and an AOF replay make
//! exactly the primary's bits, whatever their own clocks say. Only lookups read the local
//! clock, and they change nothing.

use std::time::{SystemTime, UNIX_EPOCH};

use bloomery::any::{DynFilter, Spec};
use bloomery::format::native::Variant;
use bloomery::rotating::MAX_GENERATIONS;
use bloomery::sizing::Rate;
use bloomery::{Error as BloomError, RotatingBloomFilter};
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::commands::{
    InsertOptions, booleans, integer, parse_f64, parse_i64, rate_and_capacity, redisbloom_size,
    refuse_existing, reply_info, word_is, write_filter,
};
use crate::datatype::{BLOOM_TYPE, Stored};
use crate::limits::cap_for_command;
use crate::loading::over_cap_message;

/// Generations when `GENERATIONS` is not given: 4 keeps a third more than the window
/// (2 would keep twice as much) at 16.6 bits an item at 1%, and a lookup asks 4 filters.
pub const DEFAULT_GENERATIONS: usize = 4;

/// The reply to an item refused because the system would not give the memory of the
/// filter's next generation: an address-space limit, strict overcommit.
const GENERATION_REFUSED_MEMORY: &str =
    "ERR filter cannot start another generation: the system refused the memory for it";

/// The reply to an item refused because the next generation would take the filter past
/// the cap.
const GENERATION_AT_MEMORY_LIMIT: &str = "ERR filter cannot start another generation: it would take the filter past the module's limit per key (bloomery.max-filter-memory)";

/// The longest `SECONDS` accepted: about 31,700 years, so every window sum fits easily.
const MAX_WINDOW_MS: u64 = 1_000_000_000_000_000;

/// How far ahead of this server's clock a client's `AT` may be (clocks that disagree by
/// that much), counted as the clock; further ahead is a clock or a time that is wrong
/// (microseconds for milliseconds, say), refused rather than taken for the clock.
pub const MOST_AHEAD_MS: u64 = 60_000;

/// The words that make `BF.RESERVE` or `BF.INSERT` about an aging filter.
const AGING_WORDS: [&str; 4] = ["WINDOW", "SECONDS", "GENERATIONS", "AT"];

const NOT_AGING: &str = "ERR the key holds a filter that does not age: WINDOW, SECONDS, GENERATIONS and AT apply to aging filters (made with WINDOW)";

/// Milliseconds since the Unix epoch by this server's clock.
fn clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

fn is_aging_word(word: &RedisString) -> bool {
    AGING_WORDS.iter().any(|name| word_is(word, name))
}

/// Whether `BF.RESERVE`'s options (after key, rate and capacity) name an aging filter. The
/// word after `EXPANSION` or `LAYOUT` is their value, whatever it says: `EXPANSION window`
/// is a bad expansion, as RedisBloom answers it (it was taken for an aging filter's
/// `WINDOW`, and refused as an aging filter given `EXPANSION`).
pub fn reserve_has_aging_options(args: &[RedisString]) -> bool {
    let options = args.get(4..).unwrap_or_default();
    let mut index = 0;
    while let Some(word) = options.get(index) {
        if is_aging_word(word) {
            return true;
        }
        index += if word_is(word, "EXPANSION") || word_is(word, "LAYOUT") {
            2
        } else {
            1
        };
    }
    false
}

/// What the aging options say.
#[derive(Default)]
pub(crate) struct Options {
    window: bool,
    seconds_ms: Option<u64>,
    generations: Option<usize>,
    at: Option<u64>,
}

impl Options {
    /// Whether any aging option was given (then the command is about an aging filter).
    pub(crate) fn given(&self) -> bool {
        self.window || self.seconds_ms.is_some() || self.generations.is_some() || self.at.is_some()
    }

    /// Takes the aging option at `words[0]`, if it is one: the number of words it used,
    /// `None` for another word, an error for a bad value.
    pub(crate) fn take(&mut self, words: &[RedisString]) -> Result<Option<usize>, RedisError> {
        let Some(word) = words.first() else {
            return Ok(None);
        };
        if word_is(word, "WINDOW") {
            self.window = true;
            return Ok(Some(1));
        }
        let value = words.get(1);
        if word_is(word, "SECONDS") {
            let ms = value
                .and_then(parse_f64)
                .map(|seconds| (seconds * 1000.0).round())
                .filter(|&ms| ms >= 1.0 && ms <= MAX_WINDOW_MS as f64)
                .ok_or(RedisError::Str(
                    "ERR bad window: SECONDS takes a number of seconds, from 0.001 to 10^12",
                ))?;
            self.seconds_ms = Some(ms as u64);
        } else if word_is(word, "GENERATIONS") {
            let generations = value
                .and_then(parse_i64)
                .filter(|&g| (2..=MAX_GENERATIONS as i64).contains(&g))
                .ok_or(RedisError::String(format!(
                    "ERR bad generations: GENERATIONS takes 2 to {MAX_GENERATIONS}"
                )))?;
            self.generations = Some(generations as usize);
        } else if word_is(word, "AT") {
            let at = value
                .and_then(parse_i64)
                .filter(|&at| at >= 0)
                .ok_or(RedisError::Str(
                    "ERR bad time: AT takes milliseconds since the Unix epoch",
                ))?;
            self.at = Some(at as u64);
        } else {
            return Ok(None);
        }
        Ok(Some(2))
    }

    /// The parameters of a new filter; an error if `WINDOW` is missing.
    fn window(&self, error_rate: f64, capacity: u64) -> Result<Window, RedisError> {
        if !self.window {
            return Err(RedisError::Str(
                "ERR SECONDS, GENERATIONS and AT need WINDOW to make an aging filter",
            ));
        }
        Ok(Window {
            error_rate,
            capacity,
            generations: self.generations.unwrap_or(DEFAULT_GENERATIONS),
            seconds_ms: self.seconds_ms,
        })
    }

    /// The time a command acts at: `AT`, or this server's clock. A client's `AT` more
    /// than [`MOST_AHEAD_MS`] ahead of the clock is refused, and one ahead by less counts
    /// as the clock: a filter's time never passes its server's clock, so that the items
    /// added before it are never forgotten sooner, by that clock, than the window says
    /// (a client's `AT` 10 s and then 20 s ahead started two generations of a 10 s window
    /// at once, and dropped the one holding an item added a second before). A primary's
    /// (replicated) or the AOF's is taken as it is, as the primary took it.
    fn now(&self, ctx: &Context) -> Result<u64, RedisError> {
        let clock = clock_ms();
        let Some(at) = self.at else {
            return Ok(clock);
        };
        if crate::limits::is_replay(&ctx.get_flags()) {
            return Ok(at);
        }
        if at > clock.saturating_add(MOST_AHEAD_MS) {
            return Err(RedisError::String(format!(
                "ERR bad time: AT {at} is more than {} s ahead of this server's clock ({clock} ms \
                 since the Unix epoch); an aging filter's time never goes back, so it would not \
                 forget until then",
                MOST_AHEAD_MS / 1000
            )));
        }
        Ok(at.min(clock))
    }
}

/// A new aging filter's parameters, as the client gave them.
struct Window {
    error_rate: f64,
    capacity: u64,
    generations: usize,
    seconds_ms: Option<u64>,
}

impl Window {
    /// The rotating filter's parameters: items and rate per generation, and the time a
    /// generation lasts.
    fn per_generation(&self) -> (u64, f64, Option<u64>) {
        let later = self.generations as u64 - 1;
        let items = self.capacity.div_ceil(later);
        // 1 - (1 - p)^g = e, so p = 1 - (1 - e)^(1/g), computed without cancellation,
        // and never with a bound above e.
        let fpp = bloomery::rotating::generation_fpp(self.error_rate, self.generations);
        let window = self.seconds_ms.map(|ms| ms.div_ceil(later));
        (items, fpp, window)
    }

    /// The filter, refused before allocating if all its generations would pass `cap`.
    fn create(&self, now: u64, cap: Option<u64>) -> Result<RotatingBloomFilter, RedisError> {
        let (items, fpp, window) = self.per_generation();
        let spec = Spec {
            generations: self.generations,
            ..Spec::new(Variant::Rotating, items, fpp)
        };
        let bytes = spec.memory_bytes().map_err(|error| self.refusal(error))?;
        if let Some(cap) = cap.filter(|&cap| bytes > cap) {
            return Err(RedisError::String(over_cap_message(bytes, cap)));
        }
        RotatingBloomFilter::with_window(self.generations, items, fpp, window, now)
            .map_err(|error| self.refusal(error))
    }

    /// The library's refusal, told of the capacity and rate the client gave: its own
    /// sizing is of one generation, whose items and rate the client never gave (a
    /// refusal of "34 items at fpp 2.5e-301" for capacity 100 at 1e-300, or "fpp ...
    /// got 0" for 5e-324, whose share per generation is 0).
    fn refusal(&self, error: BloomError) -> RedisError {
        let (items, fpp, _) = self.per_generation();
        let why = match error {
            BloomError::Sizing { problem, .. } => problem,
            BloomError::Fpp { .. } => {
                "that rate's share per generation is not a rate a filter can be sized for".into()
            }
            other => other.to_string(),
        };
        RedisError::String(format!(
            "ERR cannot make an aging filter of capacity {} at error rate {} ({} generations, each of {items} items at {}): {why}",
            self.capacity,
            Rate(self.error_rate),
            self.generations,
            Rate(fpp)
        ))
    }

    /// The options that make this filter again, as replicated.
    fn options(&self, now: u64) -> Vec<Vec<u8>> {
        let mut words = vec![b"WINDOW".to_vec()];
        if let Some(ms) = self.seconds_ms {
            words.push(b"SECONDS".to_vec());
            words.push(format!("{}.{:03}", ms / 1000, ms % 1000).into_bytes());
        }
        words.push(b"GENERATIONS".to_vec());
        words.push(self.generations.to_string().into_bytes());
        words.push(b"AT".to_vec());
        words.push(now.to_string().into_bytes());
        words
    }
}

/// Replicates `command key words...` (and writes it to the AOF).
fn replicate(ctx: &Context, command: &str, key: &RedisString, words: &[Vec<u8>], items: &[RedisString]) {
    let mut args: Vec<&[u8]> = Vec::with_capacity(2 + words.len() + items.len());
    args.push(key.as_slice());
    args.extend(words.iter().map(Vec::as_slice));
    if command == "BF.INSERT" {
        args.push(b"ITEMS");
        args.extend(items.iter().map(RedisString::as_slice));
    }
    ctx.replicate(command, &args[..]);
}

/// `BF.RESERVE key error_rate capacity WINDOW [SECONDS t] [GENERATIONS g] [AT ms]`
pub fn reserve(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 5 {
        return Err(RedisError::WrongArity);
    }
    let key = &args[1];
    let (error_rate, capacity) = rate_and_capacity(&args[2], &args[3])?;
    let mut options = Options::default();
    let mut index = 4;
    while index < args.len() {
        match options.take(&args[index..])? {
            Some(used) => index += used,
            None if word_is(&args[index], "EXPANSION") || word_is(&args[index], "NONSCALING") => {
                return Err(RedisError::Str(
                    "ERR aging filters (WINDOW) do not grow: EXPANSION and NONSCALING do not apply",
                ));
            }
            None if word_is(&args[index], "LAYOUT") => {
                return Err(RedisError::Str(
                    "ERR aging filters (WINDOW) have one layout: LAYOUT does not apply",
                ));
            }
            None => {
                return Err(RedisError::String(format!(
                    "ERR unknown argument '{}' for an aging filter (WINDOW [SECONDS t] [GENERATIONS g] [AT ms])",
                    // At most 64 bytes of it: a word may be as long as a string can be.
                    String::from_utf8_lossy(
                        args[index].as_slice().get(..64).unwrap_or(args[index].as_slice())
                    )
                )));
            }
        }
    }
    let window = options.window(error_rate, capacity)?;
    let redis_key = ctx.open_key_writable(key);
    refuse_existing(&redis_key)?;
    let now = options.now(ctx)?;
    let filter = window.create(now, cap_for_command(&ctx.get_flags()))?;
    redis_key.set_value(&BLOOM_TYPE, Stored::Filter(Box::new(filter)))?;
    crate::accounting::after_write(&redis_key);
    crate::commands::notify(ctx, c"bf.reserve", key);
    let mut words = vec![
        format!("{error_rate:?}").into_bytes(),
        capacity.to_string().into_bytes(),
    ];
    words.extend(window.options(now));
    replicate(ctx, "BF.RESERVE", key, &words, &[]);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] WINDOW [SECONDS t] [GENERATIONS g] [NOCREATE]
/// [AT ms] ITEMS item...`: adds to an aging filter, made first if the key is missing
/// (`commands::insert` parsed the options and found aging ones among them).
pub(crate) fn insert(
    ctx: &Context,
    args: &[RedisString],
    insert: InsertOptions,
    options: Options,
) -> RedisResult {
    let InsertOptions {
        reservation,
        create,
        grows,
        items_at,
    } = insert;
    let (error_rate, capacity) = (reservation.error_rate, reservation.capacity);
    let key = &args[1];
    let items = &args[items_at..];
    let cap = cap_for_command(&ctx.get_flags());
    let now = options.now(ctx)?;
    let redis_key = ctx.open_key_writable(key);
    if let Some(filter) = write_filter(&redis_key)? {
        // An existing filter: creation options are ignored, as BF.INSERT ignores them.
        let aging = filter
            .as_any_mut()
            .downcast_mut::<RotatingBloomFilter>()
            .ok_or(RedisError::Str(NOT_AGING))?;
        let replies = add_at(ctx, key, items, aging, now, cap);
        crate::accounting::after_write(&redis_key);
        return Ok(RedisValue::Array(replies));
    }
    if !create {
        return Err(RedisError::Str("ERR not found"));
    }
    if grows && options.window {
        return Err(RedisError::Str(
            "ERR aging filters (WINDOW) do not grow: EXPANSION and NONSCALING do not apply",
        ));
    }
    let window = options.window(error_rate, capacity)?;
    let mut filter = window.create(now, cap)?;
    let (replies, accepted) = insert_items(&mut filter, items, now, cap, booleans());
    if accepted == 0 {
        // Nothing was added: the key is not made either.
        return Ok(RedisValue::Array(replies));
    }
    redis_key.set_value(&BLOOM_TYPE, Stored::Filter(Box::new(filter)))?;
    crate::accounting::after_write(&redis_key);
    crate::commands::notify(ctx, c"bf.add", key);
    let mut words = vec![
        b"CAPACITY".to_vec(),
        capacity.to_string().into_bytes(),
        b"ERROR".to_vec(),
        format!("{error_rate:?}").into_bytes(),
    ];
    words.extend(window.options(now));
    replicate(ctx, "BF.INSERT", key, &words, &items[..accepted]);
    Ok(RedisValue::Array(replies))
}

/// Adds `items` in order at time `now`: one reply per item, stopping at the first refusal
/// (a new generation past the memory cap), and how many were added.
fn insert_items(
    filter: &mut RotatingBloomFilter,
    items: &[RedisString],
    now: u64,
    cap: Option<u64>,
    boolean: fn(bool) -> RedisValue,
) -> (Vec<RedisValue>, usize) {
    let mut replies = Vec::with_capacity(items.len());
    for item in items {
        match filter.insert_within(item.as_slice(), now, cap) {
            Ok(added) => replies.push(boolean(added)),
            Err(error) => {
                replies.push(RedisValue::StaticError(match error {
                    BloomError::MemoryLimit { .. } if crate::limits::uncapped() => {
                        "ERR problem inserting into filter"
                    }
                    BloomError::MemoryLimit { .. } => GENERATION_AT_MEMORY_LIMIT,
                    BloomError::OutOfMemory { .. } => GENERATION_REFUSED_MEMORY,
                    _ => "ERR filter cannot start another generation",
                }));
                break;
            }
        }
    }
    let accepted = replies
        .iter()
        .take_while(|reply| !matches!(reply, RedisValue::StaticError(_)))
        .count();
    (replies, accepted)
}

/// Adds `items` to an aging filter at time `now` and replicates what was added as
/// `BF.INSERT key NOCREATE AT now ITEMS ...`.
fn add_at(
    ctx: &Context,
    key: &RedisString,
    items: &[RedisString],
    filter: &mut RotatingBloomFilter,
    now: u64,
    cap: Option<u64>,
) -> Vec<RedisValue> {
    let (replies, accepted) = insert_items(filter, items, now, cap, booleans());
    if accepted > 0 {
        crate::commands::notify(ctx, c"bf.add", key);
        let words = [b"NOCREATE".to_vec(), b"AT".to_vec(), now.to_string().into_bytes()];
        replicate(ctx, "BF.INSERT", key, &words, &items[..accepted]);
    }
    replies
}

/// `BF.ADD`, `BF.MADD` and `BF.INSERT` without aging options on an aging filter: the
/// items added at this server's time.
pub fn add(
    ctx: &Context,
    key: &RedisString,
    items: &[RedisString],
    filter: &mut RotatingBloomFilter,
    cap: Option<u64>,
) -> Result<Vec<RedisValue>, RedisError> {
    Ok(add_at(ctx, key, items, filter, clock_ms(), cap))
}

/// Whether an aging filter holds `item` within its window as of this server's time
/// (`BF.EXISTS`).
pub fn contains_now(filter: &RotatingBloomFilter, item: &[u8]) -> bool {
    filter.contains_at(item, clock_ms())
}

/// `BF.EXISTS`/`BF.MEXISTS` on an aging filter, at this server's time.
pub fn lookup(
    filter: &RotatingBloomFilter,
    items: &[RedisString],
    boolean: fn(bool) -> RedisValue,
) -> Vec<RedisValue> {
    let now = clock_ms();
    items
        .iter()
        .map(|item| boolean(filter.contains_at(item.as_slice(), now)))
        .collect()
}

/// `BF.CARD`: an aging filter's items within its window now; any other filter's count.
pub fn estimated_len(filter: &dyn DynFilter) -> u64 {
    match filter.as_any().downcast_ref::<RotatingBloomFilter>() {
        Some(aging) => aging.len_at(clock_ms()),
        None => crate::accounting::counted_stats(filter).estimated_len,
    }
}

/// `BF.INFO` of an aging filter: RedisBloom's five fields (`Capacity` is the window in
/// items, `Number of filters` the generations kept, `Expansion rate` nil), then
/// `Generations`, `Window seconds` (0 without a time window) and `Error rate`, the bound
/// over all generations.
pub fn info(ctx: &Context, filter: &RotatingBloomFilter, wanted: Option<&RedisString>) -> RedisResult {
    let later = filter.max_generations() as u64 - 1;
    // From fields (its stats would read every bit for a false-positive rate not shown).
    let (memory_bytes, generations) = (filter.memory_bytes() as u64, filter.num_generations() as u64);
    let window_ms = filter.window_ms().map_or(0, |ms| ms.saturating_mul(later));
    let fields = vec![
        (
            "Capacity",
            "CAPACITY",
            integer(filter.items_per_generation().saturating_mul(later)),
        ),
        (
            "Size",
            "SIZE",
            integer(redisbloom_size(memory_bytes, generations)),
        ),
        ("Number of filters", "FILTERS", integer(generations)),
        (
            "Number of items inserted",
            "ITEMS",
            integer(filter.len_at(clock_ms())),
        ),
        ("Expansion rate", "EXPANSION", RedisValue::Null),
        (
            "Generations",
            "GENERATIONS",
            integer(filter.max_generations() as u64),
        ),
        (
            "Window seconds",
            "WINDOW",
            RedisValue::Float(window_ms as f64 / 1000.0),
        ),
        ("Error rate", "ERROR", RedisValue::Float(filter.fpp_bound())),
    ];
    reply_info(ctx, fields, wanted)
}
