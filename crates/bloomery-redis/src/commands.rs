//! The `BF.*` commands, with RedisBloom 2.6.28's syntax, defaults and error replies
//! (`shared/peers/redisbloom-2.6.28.md`). Where RedisBloom is plainly wrong we differ, and
//! say so here: `BF.EXISTS`/`BF.MEXISTS` on a key of another type answer WRONGTYPE (as
//! `BF.CARD` does) instead of 0, and a filter beyond the memory cap is refused with an
//! error instead of taking the server down.

use bloomery::any::{self, DynFilter, GrowthLimit, Spec};
use bloomery::format::native::Variant;
use bloomery::redisbloom::{OPT_FORCE64, RedisBloomFilter};
use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
use bloomery::{
    Error as BloomError, RetouchedBloomFilter, RotatingBloomFilter, ScalableBloomFilter, ScalableOptions,
};
use redis_module::key::{RedisKey, RedisKeyWritable};
use redis_module::{
    Context, ContextFlags, ModuleOptions, NotifyEvent, RedisError, RedisResult, RedisString, RedisValue,
    Status, raw,
};

use std::ffi::CStr;

use crate::accounting;
use crate::datatype::{BLOOM_TYPE, Stored, dump_chunk};
use crate::limits::{
    self, MAX_EXPANSION, cap_for_command, is_replay, parse_memory, redisbloom_errors, redisbloom_layout,
    register_config, set_max_filter_memory, set_redisbloom_errors, set_redisbloom_layout,
};
use crate::loading::{Load, LoadError, Progress, over_cap_message};
use crate::mbbloom::MBBLOOM_TYPE;

/// Declares that the module handles RDB read errors itself, registers and loads the
/// module's configuration, then reads the load arguments (pairs of NAME VALUE, which win
/// over redis.conf); refuses to load on a bad one. Also makes every filter array come from
/// Redis's allocator (no directly mapped huge-page arrays), so `INFO memory`, `maxmemory`
/// and eviction see all of the module's memory.
pub fn configure(ctx: &Context, args: &[RedisString]) -> Status {
    // Without this option, a short read in a crafted RESTORE payload stops the server
    // ("Error loading data from RDB (short read or EOF)"); with it, the load calls report
    // the error and `rdb_load` returns NULL, which RESTORE answers as an error.
    ctx.set_module_options(ModuleOptions::HANDLE_IO_ERRORS);
    bloomery::bits::set_huge_pages(false);
    if register_config(ctx) == Status::Err {
        return Status::Err;
    }
    // A single empty argument is none: RedisBloom takes it so (its packaging tool,
    // ramp-packer, loads the module with one).
    let args = match args {
        [only] if only.as_slice().is_empty() => &[],
        args => args,
    };
    let mut pairs = args.chunks(2);
    for pair in &mut pairs {
        let [name, value] = pair else {
            crate::log::warning(ctx, "bloomery: load arguments come in NAME VALUE pairs");
            return Status::Err;
        };
        // The defaults of new filters (bloomery.error-rate, -initial-size, -expansion),
        // checked as CONFIG SET checks them.
        let accepted = if word_is(name, "ERROR_RATE") {
            limits::parse_error_rate(value)
                .ok()
                .map(limits::set_default_error_rate)
        } else if word_is(name, "INITIAL_SIZE") {
            parse_i64(value)
                .and_then(|capacity| limits::check_initial_size(capacity).ok())
                .map(limits::set_default_initial_size)
        } else if word_is(name, "EXPANSION") {
            parse_i64(value)
                .and_then(|expansion| limits::check_expansion(expansion).ok())
                .map(limits::set_default_expansion)
        } else if word_is(name, "REDISBLOOM_ERRORS") {
            yes_or_no(value).map(set_redisbloom_errors)
        } else if word_is(name, "REDISBLOOM_LAYOUT") {
            yes_or_no(value).map(set_redisbloom_layout)
        } else if word_is(name, "MAX_FILTER_MEMORY") {
            value
                .try_as_str()
                .ok()
                .and_then(parse_memory)
                .map(set_max_filter_memory)
        } else if word_is(name, "CF_MAX_EXPANSIONS") {
            // RedisBloom's, for its cuckoo filters, which this module does not have: a
            // RedisBloom configuration that sets it loads (it stopped the server), the
            // value checked as RedisBloom checks it.
            parse_i64(value).filter(|&expansions| expansions > 0).map(|_| {
                crate::log::notice(
                    ctx,
                    "bloomery: CF_MAX_EXPANSIONS is for RedisBloom's cuckoo filters, which this module does not have: ignored",
                );
            })
        } else {
            None
        };
        if accepted.is_none() {
            crate::log::warning(
                ctx,
                &format!(
                    "bloomery: bad load argument {} {} (ERROR_RATE in (0, 1), INITIAL_SIZE >= 1, EXPANSION in 1..={MAX_EXPANSION}, MAX_FILTER_MEMORY bytes such as 1073741824 or 1gb, 0 for no limit, REDISBLOOM_ERRORS and REDISBLOOM_LAYOUT yes or no, RedisBloom's CF_MAX_EXPANSIONS a positive integer, ignored)",
                    name, value
                ),
            );
            return Status::Err;
        }
    }
    if let Err(why) = limits::check_loaded_defaults() {
        crate::log::warning(ctx, &format!("bloomery: {why}"));
        return Status::Err;
    }
    Status::Ok
}

/// Checks that a filter can be made from these defaults (`bloomery.error-rate`,
/// `-initial-size`, `-redisbloom-layout`): the first filter of a new key's `BF.ADD`, in the
/// layout [`Reservation::resolved`] gives it, sized as [`Reservation::create`] sizes it.
/// The reason otherwise, naming the three.
pub(crate) fn check_defaults(error_rate: f64, initial_size: u64, redisbloom: bool) -> Result<(), String> {
    let defaults = Reservation {
        error_rate,
        capacity: initial_size,
        redisbloom,
        ..Reservation::default()
    }
    .resolved();
    let error = match defaults.spec().memory_bytes() {
        Ok(_) => return Ok(()),
        Err(bloomery::Error::Sizing { problem, .. }) => problem,
        Err(error) => error.to_string(),
    };
    Err(format!(
        "no filter can be made from error-rate {error_rate:?}, initial-size {initial_size}, redisbloom-layout {} (a new key's BF.ADD would fail): {error}",
        if redisbloom { "yes" } else { "no" }
    ))
}

const FULL: &str = "ERR non scaling filter is full";
const WRONG_TYPE: RedisError =
    RedisError::Str("WRONGTYPE Operation against a key holding the wrong kind of value");

/// The error for a key whose `BF.LOADCHUNK` load has not finished.
fn still_loading(load: &Load) -> RedisError {
    RedisError::String(format!(
        "ERR the key holds a filter still being loaded by BF.LOADCHUNK (piece {} is next): send the rest, or DEL the key",
        load.next_number()
    ))
}

/// The filter at a key opened for reading; `None` for a missing key, WRONGTYPE (Redis's own
/// wording) for a key of another type, an error for a load in progress.
pub(crate) fn read_filter(key: &RedisKey) -> Result<Option<&dyn DynFilter>, RedisError> {
    let value = key
        .get_value::<Stored>(&BLOOM_TYPE)
        .or_else(|_| key.get_value::<Stored>(&MBBLOOM_TYPE))
        .map_err(|_| WRONG_TYPE)?;
    match value {
        None => Ok(None),
        Some(Stored::Filter(filter)) => Ok(Some(&**filter)),
        Some(Stored::Loading(load)) => Err(still_loading(load)),
    }
}

/// As [`read_filter`], for a key opened for writing.
pub(crate) fn write_filter(key: &RedisKeyWritable) -> Result<Option<&mut Box<dyn DynFilter>>, RedisError> {
    Ok(write_filter_held(key)?.map(|(filter, _)| filter))
}

/// A filter open for writing, with its value's place for [`accounting::after_write_held`].
type HeldFilter<'a> = (&'a mut Box<dyn DynFilter>, accounting::Held);

/// As [`write_filter`], with the value's place for [`accounting::after_write_held`] (which
/// then need not look the key's type up again).
fn write_filter_held(key: &RedisKeyWritable) -> Result<Option<HeldFilter<'_>>, RedisError> {
    let (value, redisbloom) = match key.get_value::<Stored>(&BLOOM_TYPE) {
        Ok(value) => (value, false),
        Err(_) => (
            key.get_value::<Stored>(&MBBLOOM_TYPE).map_err(|_| WRONG_TYPE)?,
            true,
        ),
    };
    let Some(value) = value else {
        return Ok(None);
    };
    // Both the filter's borrow and the place `after_write_held` reads are taken from one
    // raw pointer, so that the write through the one does not invalidate the other (a
    // pointer taken through a shared reborrow of `value` would be, under Rust's aliasing
    // rules, when the filter is then borrowed mutably from `value`).
    let value: *mut Stored = std::ptr::from_mut(value);
    let held = accounting::Held::new(value, redisbloom);
    // SAFETY: `value` came from the key's `&mut Stored` just above, which is valid for the
    // key's borrow, and nothing else reaches the value meanwhile.
    match unsafe { &mut *value } {
        Stored::Filter(filter) => Ok(Some((filter, held))),
        Stored::Loading(load) => Err(still_loading(load)),
    }
}

/// Parameters of a new filter. What a command does not give comes from this server's
/// configuration (`bloomery.error-rate`, `-initial-size`, `-expansion`,
/// `-redisbloom-layout`) as it is when the command runs; [`Reservation::replicate`] then
/// spells every parameter out for replicas and the AOF, whose configuration may differ.
#[derive(Clone, Copy)]
pub(crate) struct Reservation {
    pub(crate) error_rate: f64,
    pub(crate) capacity: u64,
    expansion: u32,
    scaling: bool,
    /// RedisBloom's chain (`Variant::RedisBloom`) rather than bloomery's scalable filter
    /// of blocked sub-filters.
    redisbloom: bool,
    /// Whether bloomery's layout was named (`LAYOUT bloomery`): then it is made whatever
    /// it costs ([`resolved`](Self::resolved)).
    bloomery_named: bool,
}

/// How many times the memory of RedisBloom's first link a blocked first sub-filter may
/// take where no layout is named ([`Reservation::resolved`]).
const MOST_BLOCKED_COST: u64 = 2;

/// The capacity at which the two layouts' memory is compared: a ratio per item, the same
/// from a few thousand items on, where the smallest filters' would be their sizes' floors
/// (a blocked filter takes one 64-byte block at least, a link of 10 items 16 bytes).
const COMPARED_AT: u64 = 1_000_000;

impl Default for Reservation {
    fn default() -> Self {
        Self {
            error_rate: limits::default_error_rate(),
            capacity: limits::default_initial_size(),
            expansion: limits::default_expansion() as u32,
            scaling: true,
            redisbloom: redisbloom_layout(),
            bloomery_named: false,
        }
    }
}

/// `BF.RESERVE`'s `LAYOUT` values (a bloomery extension): RedisBloom's chain, or bloomery's
/// scalable filter of blocked sub-filters.
const LAYOUT_REDISBLOOM: &str = "redisbloom";
const LAYOUT_BLOOMERY: &str = "bloomery";

impl Reservation {
    /// The reservation with its layout decided where none was named (no `LAYOUT`, and
    /// `bloomery.redisbloom-layout no`): bloomery's chain of blocked sub-filters, unless
    /// at its rate a first sub-filter takes more than [`MOST_BLOCKED_COST`] times the
    /// memory of RedisBloom's first link (both of [`COMPARED_AT`] items, or the blocked
    /// one cannot be sized for as many), or this one cannot be sized at all; then
    /// RedisBloom's chain. A blocked sub-filter sets 8 bits per item in one 64-byte block
    /// whatever its rate, so as the rate falls it needs more and more bits per item where
    /// RedisBloom's k spread bits need about 1.44 more per halving: a default that made
    /// blocked filters at every rate took many times RedisBloom's memory at low rates, and
    /// from capacity 1 at 1e-12 under a 64 MB cap a chain stopped growing within a
    /// thousand items (`tests/test_operations.py`).
    pub(crate) fn resolved(self) -> Self {
        if self.redisbloom || self.bloomery_named {
            return self;
        }
        let chain = Reservation {
            redisbloom: true,
            ..self
        };
        if self.spec().memory_bytes().is_err() {
            return if chain.spec().memory_bytes().is_ok() {
                chain
            } else {
                self
            };
        }
        let compared = |reservation: Reservation| {
            Reservation {
                capacity: COMPARED_AT,
                ..reservation
            }
            .spec()
            .memory_bytes()
        };
        match (compared(self), compared(chain)) {
            (Ok(blocked), Ok(links)) if blocked > links.saturating_mul(MOST_BLOCKED_COST) => chain,
            // Blocked sub-filters of that many items reach no such rate (from about 1e-13
            // on, more than 2^32 blocks); a smaller one may still be sized, at thousands of
            // times the chain's memory.
            (Err(_), Ok(_)) => chain,
            _ => self,
        }
    }

    /// The new filter, refused before allocating if its first sub-filter is over `cap`: a
    /// RedisBloom-layout chain, or a scalable filter of blocked sub-filters.
    fn create(&self, cap: Option<u64>) -> Result<Box<dyn DynFilter>, RedisError> {
        let spec = self.spec();
        let bytes = spec
            .memory_bytes()
            .map_err(|error| RedisError::String(format!("ERR {error}")))?;
        if let Some(cap) = cap.filter(|&cap| bytes > cap) {
            return Err(RedisError::String(over_cap_message(bytes, cap)));
        }
        any::create(&spec).map_err(|error| RedisError::String(format!("ERR {error}")))
    }

    /// The new filter's parameters: a RedisBloom-layout chain, or a scalable filter of
    /// blocked sub-filters.
    fn spec(&self) -> Spec {
        let variant = if self.redisbloom {
            Variant::RedisBloom
        } else {
            Variant::ScalableBlocked
        };
        // The growth of the layout's chain: RedisBloom's halving for its own layout (its
        // filter keeps that itself), blocked sub-filters' own tightening for the other.
        Spec {
            scalable: ScalableOptions {
                expansion: self.expansion,
                scaling: self.scaling,
                ..ScalableOptions::for_blocked()
            },
            ..Spec::new(variant, self.capacity, self.error_rate)
        }
    }

    /// The filter a command from this server's primary or AOF makes, with no cap (as
    /// [`create`](Self::create) with none): where bloomery's layout cannot size it (a
    /// rate below what blocked sub-filters reach, which RedisBloom takes), RedisBloom's
    /// chain, which takes every rate RedisBloom does. Refusing the command would lose its
    /// items.
    ///
    /// It is held to this machine's memory, which no filter can pass (Redis's allocator
    /// stops the server on an allocation that fails): RedisBloom 2.6.28 replicates a
    /// `BF.RESERVE` it refused with "could not create filter" (its allocation failed), such
    /// as `BF.RESERVE k 0.01 100000000000000000` (a first link of 1.4 * 10^17 bytes), and
    /// making it here stopped every replica, and every server loading the AOF. It is
    /// refused with RedisBloom's answer instead, as RedisBloom's own replica refuses it.
    fn create_replayed(&self) -> Result<Box<dyn DynFilter>, RedisError> {
        let machine = Some(limits::machine_memory());
        self.create(machine)
            .or_else(|error| {
                if self.redisbloom {
                    return Err(error);
                }
                let chain = Reservation {
                    redisbloom: true,
                    ..*self
                };
                chain.create(machine)
            })
            .or_else(|error| {
                // A first link RedisBloom's chain can size: refused for its size, with
                // RedisBloom's answer.
                if let Ok(bytes) = RedisBloomFilter::first_link_bytes(self.capacity, self.error_rate, !self.scaling) {
                    return Err(match machine.filter(|&machine| bytes > machine) {
                        Some(machine) => RedisError::String(format!(
                            "ERR could not create filter: its first link takes {bytes} bytes, more than this machine's memory ({machine} bytes)"
                        )),
                        None => error,
                    });
                }
                // A capacity whose bits pass 2^64 (from about 1.9 * 10^18 at 0.01), which
                // RedisBloom on x86-64 takes with a link of one 64-bit word.
                RedisBloomFilter::new_replayed(self.capacity, self.error_rate, self.expansion, !self.scaling)
                    .map(|chain| Box::new(chain) as Box<dyn DynFilter>)
                    .map_err(|_| error)
            })
    }

    /// Replicates (and writes to the AOF) the creation of this filter at `key` as a
    /// `BF.RESERVE` with every parameter spelled out: the error rate as the shortest text
    /// that reads back as the same number, the capacity, `NONSCALING` if so, the
    /// expansion (which a non-scaling filter records too) and the layout. A replica or an
    /// AOF replay whose defaults differ from this server's (load arguments, redis.conf,
    /// or a `CONFIG SET` here that a restart undoes) so makes the same filter, bit for bit,
    /// where the command as given would make one from its own defaults.
    fn replicate(&self, ctx: &Context, key: &RedisString) {
        let rate = format!("{:?}", self.error_rate);
        let capacity = self.capacity.to_string();
        let expansion = self.expansion.to_string();
        let layout = if self.redisbloom {
            LAYOUT_REDISBLOOM
        } else {
            LAYOUT_BLOOMERY
        };
        let mut args: Vec<&[u8]> = vec![key.as_slice(), rate.as_bytes(), capacity.as_bytes()];
        if !self.scaling {
            args.push(b"NONSCALING");
        }
        args.extend([
            b"EXPANSION".as_slice(),
            expansion.as_bytes(),
            b"LAYOUT",
            layout.as_bytes(),
        ]);
        ctx.replicate("BF.RESERVE", &args[..]);
    }
}

/// A number argument as RedisBloom reads one (`RedisModule_StringToDouble`, C's `strtod`
/// on the whole text): what Rust's parse takes, and also what it does not but `strtod`
/// does, such as hex floats (`0x1p-7`). A RedisBloom primary (or its AOF) sends the error
/// rates its clients gave as they gave them; refusing one that RedisBloom took would lose
/// every item of the command (a `BF.INSERT ... ERROR 0x1p-7 ITEMS ...`), or the filter a
/// later `BF.INSERT ... NOCREATE` adds to. And what `strtod` finds out of range is refused
/// as RedisBloom refuses it (`1e400`, `1e-400`: "bad error rate"), where Rust's parse
/// made them infinity and 0, refused as out of (0, 1). Rust's parse alone where there is
/// no Redis (unit tests).
pub(crate) fn parse_f64(arg: &RedisString) -> Option<f64> {
    // SAFETY: reading a function pointer Redis filled in when the module was loaded.
    let parsed = if unsafe { raw::RedisModule_StringToDouble }.is_some() {
        arg.parse_float().ok()
    } else {
        arg.try_as_str().ok().and_then(|text| text.parse::<f64>().ok())
    };
    parsed.filter(|value| !value.is_nan())
}

fn yes_or_no(arg: &RedisString) -> Option<bool> {
    if word_is(arg, "yes") {
        Some(true)
    } else if word_is(arg, "no") {
        Some(false)
    } else {
        None
    }
}

/// An integer argument as Redis reads one (`RedisModule_StringToLongLong`, which RedisBloom
/// uses): an optional `-` and digits, no `+`, no leading zero (`0` itself aside), no
/// spaces, within 64 bits. Rust's own parse also takes `+5` and `007`.
pub(crate) fn parse_i64(arg: &RedisString) -> Option<i64> {
    parse_redis_integer(arg.as_slice())
}

/// [`parse_i64`] on bytes.
pub(crate) fn parse_redis_integer(text: &[u8]) -> Option<i64> {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    let canonical = match digits {
        [b'0'] => digits.len() == text.len(),
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse::<i64>().ok()
}

pub(crate) fn word_is(arg: &RedisString, word: &str) -> bool {
    arg.try_as_str().is_ok_and(|text| text.eq_ignore_ascii_case(word))
}

/// Tells keyspace-event subscribers that `event` happened at `key`. The event's name is a
/// C string given as is (the crate's `notify_keyspace_event` allocates a copy on every call,
/// a fifth of a single `BF.ADD`'s own work when nobody subscribes).
pub fn notify(ctx: &Context, event: &CStr, key: &RedisString) {
    // SAFETY: Redis filled this function in when the module was loaded (it exists since
    // Redis 4); the context, the event name and the key outlive the call.
    unsafe {
        if let Some(notify) = raw::RedisModule_NotifyKeyspaceEvent {
            notify(ctx.ctx, NotifyEvent::GENERIC.bits(), event.as_ptr(), key.inner);
        }
    }
}

pub(crate) fn notify_and_replicate(ctx: &Context, event: &CStr, key: &RedisString) {
    notify(ctx, event, key);
    ctx.replicate_verbatim();
}

/// A reservation's `error_rate` and `capacity` arguments, with RedisBloom's error texts
/// (`BF.RESERVE`, and the aging and counting filters' `RESERVE`).
pub(crate) fn rate_and_capacity(
    rate: &RedisString,
    capacity: &RedisString,
) -> Result<(f64, u64), RedisError> {
    let error_rate = parse_f64(rate).ok_or(RedisError::Str("ERR bad error rate"))?;
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(RedisError::Str("ERR (0 < error rate range < 1) "));
    }
    let capacity = parse_i64(capacity).ok_or(RedisError::Str("ERR bad capacity"))?;
    if capacity <= 0 {
        return Err(RedisError::Str("ERR (capacity should be larger than 0)"));
    }
    Ok((error_rate, capacity as u64))
}

/// Refuses to reserve over an existing key: WRONGTYPE for another type, "item exists"
/// for a filter (RedisBloom's answers).
pub(crate) fn refuse_existing(redis_key: &RedisKeyWritable) -> Result<(), RedisError> {
    if redis_key.is_empty() {
        return Ok(());
    }
    write_filter(redis_key)?;
    Err(RedisError::Str("ERR item exists"))
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [LAYOUT redisbloom|bloomery]`
///
/// `LAYOUT` is a bloomery extension: the new filter's layout whatever
/// `bloomery.redisbloom-layout` says and whatever the rate costs it (without it, see
/// [`Reservation::resolved`]), and with it `NONSCALING` may come with `EXPANSION n`,
/// the growth factor a non-scaling filter records without using (RedisBloom records its
/// default there). It is how every filter a command creates is replicated and written to
/// the AOF ([`Reservation::replicate`]). Without `LAYOUT`, RedisBloom's arity (at most 7
/// arguments), parsing and error replies are kept as they were.
///
/// From this server's primary or AOF, a `BF.RESERVE` of at most 7 arguments is read as
/// RedisBloom reads it, and makes RedisBloom's chain whatever this server's layout: every
/// filter bloomery makes is replicated with at least 8 (`EXPANSION n LAYOUT x`; an aging
/// one's `WINDOW GENERATIONS g AT ms`, 9), so a shorter one came from a RedisBloom primary
/// (or its AOF), which looks for `NONSCALING` and `EXPANSION` only and ignores every
/// other word, and may then send `BF.LOADCHUNK` data pieces for the key's links. Read as bloomery's options, `WINDOW`
/// would make an aging filter that forgets what RedisBloom keeps, and `AT` without
/// `WINDOW` or a `LAYOUT` naming none would be refused, leaving no key for a later
/// `BF.INSERT ... NOCREATE` (whose items would be lost).
pub fn reserve(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let replaying = is_replay(&ctx.get_flags());
    let redisbloom_words = replaying && args.len() <= 7;
    if !redisbloom_words && crate::aging::reserve_has_aging_options(&args) {
        return crate::aging::reserve(ctx, &args);
    }
    let options = args.get(4..).unwrap_or_default();
    let layout_at = options.iter().position(|word| word_is(word, "LAYOUT"));
    // RedisBloom's bound: key, rate, capacity and at most EXPANSION n and NONSCALING; two
    // more with LAYOUT x.
    let most = if layout_at.is_some() { 9 } else { 7 };
    if args.len() < 4 || args.len() > most {
        return Err(RedisError::WrongArity);
    }
    let key = &args[1];
    let (error_rate, capacity) = rate_and_capacity(&args[2], &args[3])?;
    let mut reservation = Reservation {
        error_rate,
        capacity,
        ..Reservation::default()
    };
    if let Some(at) = layout_at {
        let value = options.get(at + 1);
        reservation.redisbloom = if value.is_some_and(|value| word_is(value, LAYOUT_REDISBLOOM)) {
            true
        } else if value.is_some_and(|value| word_is(value, LAYOUT_BLOOMERY)) {
            reservation.bloomery_named = true;
            false
        } else if redisbloom_words {
            // A word RedisBloom ignored (the layout is set below).
            reservation.redisbloom
        } else {
            return Err(RedisError::Str(
                "ERR bad layout: LAYOUT takes redisbloom or bloomery",
            ));
        };
    }
    if redisbloom_words {
        // RedisBloom's chain, as the primary (or the server that wrote the AOF) made it:
        // the pieces of a `BF.SCANDUMP` it sends next (`BF.LOADCHUNK` of iterator 2 on,
        // which RedisBloom copies into the key's links as they are) go into the same links
        // here, where bloomery's layout would refuse them and lose their items.
        reservation.redisbloom = true;
    }
    // As RedisBloom: NONSCALING anywhere, then EXPANSION's value (checked in this order,
    // so `NONSCALING EXPANSION x` is refused for combining them whatever x is, unless
    // LAYOUT is given); other words are ignored. RedisBloom looks for NONSCALING among
    // every argument, the key's too (`BF.RESERVE nonscaling 0.01 10` is a NONSCALING
    // filter there): so does a replay of its command, where the filter would scale.
    let nonscaling_in = if redisbloom_words { &args[1..] } else { options };
    reservation.scaling = !nonscaling_in.iter().any(|word| word_is(word, "NONSCALING"));
    if let Some(at) = options.iter().position(|word| word_is(word, "EXPANSION")) {
        let value = options.get(at + 1).ok_or(RedisError::Str("ERR no expansion"))?;
        if !reservation.scaling && layout_at.is_none() {
            return Err(RedisError::Str("Nonscaling filters cannot expand"));
        }
        let expansion = parse_i64(value).ok_or(RedisError::Str("ERR bad expansion"))?;
        if expansion < 1 {
            return Err(RedisError::Str("ERR expansion should be greater or equal to 1"));
        }
        // A deliberate difference: RedisBloom takes `EXPANSION 4294967296` (and any value of
        // 2^32 or more), keeps it truncated to 32 bits, and so makes a filter of growth 0
        // that answers "problem inserting into filter" to every new item once full (or, for
        // 2^32 + 1, growth 1). Such a value is refused here with the limit instead; the
        // filters RedisBloom made that way still load and answer as RedisBloom's
        // (`tests/test_redisbloom_data.py`).
        reservation.expansion = if replaying {
            replayed_expansion(expansion)
        } else if expansion as u64 > MAX_EXPANSION {
            return Err(RedisError::String(format!(
                "ERR expansion above the module's limit of {MAX_EXPANSION}"
            )));
        } else {
            expansion as u32
        };
    }
    let reservation = reservation.resolved();
    let redis_key = ctx.open_key_writable(key);
    refuse_existing(&redis_key)?;
    let filter = if replaying {
        reservation.create_replayed()?
    } else {
        reservation.create(cap_for_command(&ctx.get_flags()))?
    };
    set_new_filter(&redis_key, filter)?;
    accounting::after_write(&redis_key);
    notify(ctx, c"bf.reserve", key);
    reservation.replicate(ctx, key);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Stores a new filter at an empty key: a RedisBloom chain (`bloomery.redisbloom-layout`)
/// as RedisBloom's own type, so an RDB of this server loads into RedisBloom too (a
/// RedisBloom replica would refuse the replicated `BF.RESERVE ... LAYOUT`: see
/// [`Reservation::replicate`]); any other as bloomery's.
fn set_new_filter(redis_key: &RedisKeyWritable, filter: Box<dyn DynFilter>) -> Result<(), RedisError> {
    let redis_type = if filter.variant() == Variant::RedisBloom {
        &MBBLOOM_TYPE
    } else {
        &BLOOM_TYPE
    };
    redis_key.set_value(redis_type, Stored::Filter(filter))
}

/// RedisBloom's reply to an item it cannot add because a new link cannot be made.
pub(crate) const PROBLEM_INSERTING: &str = "ERR problem inserting into filter";

/// The reply to an item refused because the system would not give the memory of the
/// filter's next sub-filter: an address-space limit, strict overcommit.
pub(crate) const SYSTEM_REFUSED_MEMORY: &str =
    "ERR filter cannot grow: the system refused the memory for its next sub-filter";

/// The reply to an item refused because the filter would grow past the cap.
pub(crate) const AT_MEMORY_LIMIT: &str = "ERR filter cannot grow: its next sub-filter would take it past the module's limit per key (bloomery.max-filter-memory)";

/// Adds `args[items_at..]` to the filter at `args[1]` (created from `reservation` if
/// missing, unless it is `None`), giving `reply` one answer per item and stopping at the
/// first refusal, as RedisBloom does, except where RedisBloom answers every item: its
/// chain that cannot add a link ("problem inserting into filter"). Every item goes
/// through `insert_within`, so growth stays within the cap. What is replicated (and written to the AOF) is what happened: the
/// command as given, or, after a refusal, `command` with only the items before it, so a
/// replica or an AOF replay (which are not held to this server's cap) never adds an item
/// refused here. A filter created here is replicated first as a fully specified
/// `BF.RESERVE` ([`Reservation::replicate`]), then `command` with the items taken, so a
/// replica or an AOF replay with other defaults makes the same filter; one that refused
/// its first item is deleted, and nothing is replicated.
fn add_items(
    ctx: &Context,
    command: &str,
    args: &[RedisString],
    items_at: usize,
    reservation: Option<&Reservation>,
    reply: &mut dyn FnMut(RedisValue),
) -> Result<(), RedisError> {
    let key = &args[1];
    let items = &args[items_at..];
    let flags = ctx.get_flags();
    let cap = cap_for_command(&flags);
    // An add this server replays (its AOF) or its primary sends: see below.
    let replaying = is_replay(&flags);
    let redis_key = ctx.open_key_writable(key);
    let created = redis_key.is_empty();
    // The reservation of a filter made here (to replicate), `None` for an existing one.
    let mut made = None;
    let (filter, held) = match write_filter_held(&redis_key)? {
        Some(found) => found,
        None => {
            let Some(reservation) = reservation else {
                return Err(RedisError::Str("ERR not found"));
            };
            // Bloomery replicates every filter it makes as a `BF.RESERVE` before the add,
            // so an add that makes one here in a replay came from a RedisBloom primary (or
            // its AOF): RedisBloom's chain, as there (see `reserve`).
            let reservation = Reservation {
                redisbloom: reservation.redisbloom || replaying,
                ..*reservation
            }
            .resolved();
            let filter = if replaying {
                reservation.create_replayed()?
            } else {
                reservation.create(cap)?
            };
            made = Some(reservation);
            set_new_filter(&redis_key, filter)?;
            write_filter_held(&redis_key)?.ok_or(RedisError::Str("ERR could not create the filter"))?
        }
    };
    if let Some(aging) = filter.as_any_mut().downcast_mut::<RotatingBloomFilter>() {
        crate::aging::add(ctx, key, items, aging, cap)?
            .into_iter()
            .for_each(reply);
        accounting::after_write(&redis_key);
        return Ok(());
    }
    crate::counting::refuse_bf_writes(&**filter)?;
    // An add this server replays (its AOF) or its primary sends was accepted there, by a
    // server whose filter may differ from this one: made from other defaults, by an older
    // module (that took items on a shard), or by RedisBloom (whose chain grows where
    // bloomery's stops). Refusing it here would lose the item: it is never refused, not
    // even for capacity (a full filter takes it past its capacity).
    if !replaying {
        crate::shards::refuse_item_writes(&**filter)?;
    }
    let boolean = booleans();
    let refusal = |error: BloomError, filter: &dyn DynFilter| {
        RedisValue::StaticError(match error {
            // Only a filter that does not scale is "full" (a scaling one at its most
            // sub-filters is refused with `SubFilterLimit`, answered below).
            BloomError::Full { .. } if accounting::counted_stats(filter).refuses_beyond_capacity => FULL,
            // With no cap configured, the limit was the machine's memory: RedisBloom's
            // answer to an allocation that fails.
            BloomError::MemoryLimit { .. } if crate::limits::uncapped() => PROBLEM_INSERTING,
            BloomError::MemoryLimit { .. } => AT_MEMORY_LIMIT,
            // RedisBloom's chain, where RedisBloom cannot add the link either (growth 0,
            // an error rate halved to 0, a link too large to allocate).
            _ if filter.as_any().is::<RedisBloomFilter>() => PROBLEM_INSERTING,
            // A retouched filter does not grow: its lists of the items each bit needs do.
            BloomError::OutOfMemory { .. } if filter.as_any().is::<RetouchedBloomFilter>() => {
                "ERR cannot add the item: the system refused the memory to record it"
            }
            BloomError::OutOfMemory { .. } => SYSTEM_REFUSED_MEMORY,
            _ => "ERR filter cannot grow any further",
        })
    };
    // Whether an add that took no new item leaves the filter's figures (memory, count) as
    // they were: so in the chains the commands create (a retouched filter's lists, say,
    // grow on every add), where the accounting below can then be skipped.
    let unchanged_unless_new = {
        let any = filter.as_any();
        any.is::<ScalableBlockedBloomFilter>() || any.is::<RedisBloomFilter>()
    };
    let mut changed = created;
    let mut accepted = 0;
    if items.len() > 1
        && let Some(chain) = filter.as_any_mut().downcast_mut::<ScalableBlockedBloomFilter>()
    {
        // Hashed once per item, blocks prefetched ahead, one answer per item (a single
        // item takes the plain call below: nothing to prefetch, nothing to allocate).
        let slices: Vec<&[u8]> = items.iter().map(RedisString::as_slice).collect();
        let mut added = vec![false; items.len()];
        let (mut taken, refused) = chain.insert_batch_until(&slices, &mut added, cap);
        if refused.is_some() && replaying {
            for (item, new) in slices[taken..].iter().zip(&mut added[taken..]) {
                *new = chain
                    .insert_past_capacity_within(*item, replay_growth_limit())
                    .map_err(|error| RedisError::String(format!("ERR {error}")))?;
            }
            taken = items.len();
        }
        added[..taken].iter().for_each(|&new| reply(boolean(new)));
        changed |= added[..taken].contains(&true);
        accepted = taken;
        if let Some(error) = refused.filter(|_| !replaying) {
            reply(refusal(error, &**filter));
        }
    } else {
        for item in items {
            let inserted = match cap {
                _ if replaying => filter.insert_past_capacity_within(item.as_slice(), replay_growth_limit()),
                Some(cap) => filter.insert_within(item.as_slice(), GrowthLimit::Total(cap)),
                None => filter.insert(item.as_slice()),
            };
            match inserted {
                Ok(added) => {
                    reply(boolean(added));
                    changed |= added;
                    accepted += 1;
                }
                Err(error) => {
                    let answer = refusal(error, &**filter);
                    let cannot_grow = matches!(answer, RedisValue::StaticError(PROBLEM_INSERTING))
                        && filter.as_any().is::<RedisBloomFilter>();
                    reply(answer);
                    if cannot_grow {
                        // RedisBloom answers the rest too (it stops only at a full
                        // NONSCALING filter): 0 for an item present, the same error for
                        // any other, which would need the link it could not add. None
                        // changes the filter, so what is replicated stays as it is.
                        for item in &items[accepted + 1..] {
                            reply(if filter.contains(item.as_slice()) {
                                boolean(false)
                            } else {
                                RedisValue::StaticError(PROBLEM_INSERTING)
                            });
                        }
                    }
                    break;
                }
            }
        }
    }
    if let Some(reservation) = made.filter(|_| accepted > 0) {
        // The filter as made here, then the items it took (both through
        // `RedisModule_Replicate`, which keeps them in this order, in one MULTI/EXEC).
        notify(ctx, c"bf.add", key);
        reservation.replicate(ctx, key);
        let done: Vec<&RedisString> = args[1..items_at + accepted].iter().collect();
        ctx.replicate(command, &done[..]);
    } else if accepted == items.len() {
        notify_and_replicate(ctx, c"bf.add", key);
    } else if accepted > 0 {
        notify(ctx, c"bf.add", key);
        let done: Vec<&RedisString> = args[1..items_at + accepted].iter().collect();
        ctx.replicate(command, &done[..]);
    } else if created {
        // A new filter refused its first item: nothing happened, so nothing stays.
        redis_key.delete()?;
        accounting::after_write(&redis_key);
        return Ok(());
    }
    if changed || !unchanged_unless_new {
        // SAFETY: the key still holds the value `held` points to (it was not deleted
        // above, and nothing else ran meanwhile).
        unsafe { accounting::after_write_held(held) };
    }
    Ok(())
}

/// How far a replayed add may grow a filter (a command from this server's primary or
/// AOF, which takes every item, past capacity if need be): to this machine's memory. A
/// RedisBloom primary replicates its `BF.MADD` as given even where it could not allocate
/// the next link (it answered "problem inserting into filter" for the items that needed
/// it, as for `BF.RESERVE k 0.01 100000 EXPANSION 4294967295` once full: a link of about
/// 670 TB); making that link here stopped the server (Redis's allocator aborts: "Redis
/// aborting for OUT OF MEMORY"), and an AOF holding the command could not be loaded. A
/// step over the limit is not taken: the item goes into the newest link instead.
fn replay_growth_limit() -> GrowthLimit<'static> {
    GrowthLimit::Total(limits::machine_memory())
}

/// [`add_items`]' answers as a list.
fn add_items_listed(
    ctx: &Context,
    command: &str,
    args: &[RedisString],
    items_at: usize,
    reservation: Option<&Reservation>,
) -> Result<Vec<RedisValue>, RedisError> {
    let mut replies = Vec::with_capacity(args.len().saturating_sub(items_at));
    add_items(ctx, command, args, items_at, reservation, &mut |answer| {
        replies.push(answer)
    })?;
    Ok(replies)
}

/// `BF.ADD key item` (registered by `direct.rs`, which hands it the arguments as they are)
pub fn add(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let mut answer = None;
    add_items(
        ctx,
        "BF.ADD",
        args,
        2,
        Some(&Reservation::default()),
        &mut |reply| {
            answer = Some(reply);
        },
    )?;
    match answer {
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
    Ok(RedisValue::Array(add_items_listed(
        ctx,
        "BF.MADD",
        &args,
        2,
        Some(&Reservation::default()),
    )?))
}

/// An `EXPANSION` (at least 1) in a command from this server's primary or AOF, which a
/// RedisBloom primary accepted whatever its size: kept as RedisBloom keeps it (truncated
/// to 32 bits), except that where that leaves 0 (a chain RedisBloom cannot grow, so its
/// adds past the first link were refused there), the chain here grows by 1: refusing
/// the command would lose every item in it, and growing only takes items the primary
/// refused (answered present here, absent there: never a false negative).
fn replayed_expansion(expansion: i64) -> u32 {
    (expansion as u32).max(1)
}

/// What `BF.INSERT` says before `ITEMS`.
pub(crate) struct InsertOptions {
    /// The new filter's parameters (`CAPACITY`, `ERROR`, `EXPANSION`, `NONSCALING`).
    pub(crate) reservation: Reservation,
    /// Whether a missing key is made (no `NOCREATE`).
    pub(crate) create: bool,
    /// Whether `EXPANSION` or `NONSCALING` was given.
    pub(crate) grows: bool,
    /// Where the items start; at least one follows.
    pub(crate) items_at: usize,
}

/// `BF.INSERT`'s options as RedisBloom reads them: by their first letter (and a second or
/// third where two share it), so `CAP 10`, `I a b`, `ERR 0.1`, `EXP 4`, `NOC` and `NONS`
/// are what RedisBloom takes too (and what its replication sends a replica as given).
enum InsertWord {
    Items,
    Capacity,
    Error,
    Expansion,
    NoCreate,
    NonScaling,
}

impl InsertWord {
    fn read(word: &RedisString) -> Option<Self> {
        let text = word.as_slice();
        let at = |i: usize| text.get(i).map(u8::to_ascii_lowercase);
        Some(match at(0)? {
            b'i' => Self::Items,
            b'c' => Self::Capacity,
            b'e' if at(1) == Some(b'r') => Self::Error,
            b'e' => Self::Expansion,
            b'n' if at(2) == Some(b'c') => Self::NoCreate,
            b'n' => Self::NonScaling,
            _ => return None,
        })
    }
}

/// Parses `BF.INSERT`'s options up to `ITEMS`, with RedisBloom's replies: a missing value
/// is an arity error, one that does not parse names the option, one out of range is "Bad
/// argument received". `extra` is offered each word first (with the words after it): it
/// takes a caller's own options (the aging ones, whose words RedisBloom does not take),
/// returning how many words it used. With `replaying` (a command from this server's
/// primary or AOF), `EXPANSION` takes any value RedisBloom takes, as RedisBloom keeps it.
pub(crate) fn insert_options(
    args: &[RedisString],
    replaying: bool,
    mut extra: impl FnMut(&[RedisString]) -> Result<Option<usize>, RedisError>,
) -> Result<InsertOptions, RedisError> {
    let mut options = InsertOptions {
        reservation: Reservation::default(),
        create: true,
        grows: false,
        items_at: 0,
    };
    // The values as given: their ranges are checked once every word was read, as
    // RedisBloom does (an unknown word after a bad value is said as unknown).
    let mut capacity = None;
    let mut error_rate = None;
    let mut expansion = None;
    let mut index = 2;
    let items_at = loop {
        let Some(word) = args.get(index) else {
            return Err(RedisError::WrongArity);
        };
        if let Some(InsertWord::Items) = InsertWord::read(word) {
            break index + 1;
        }
        if let Some(used) = extra(&args[index..])? {
            index += used;
            continue;
        }
        let value = || args.get(index + 1).ok_or(RedisError::WrongArity);
        match InsertWord::read(word) {
            Some(InsertWord::Capacity) => {
                capacity = Some(parse_i64(value()?).ok_or(RedisError::Str("Bad capacity"))?);
                index += 2;
            }
            Some(InsertWord::Error) => {
                error_rate = Some(parse_f64(value()?).ok_or(RedisError::Str("Bad error rate"))?);
                index += 2;
            }
            Some(InsertWord::Expansion) => {
                expansion = Some(parse_i64(value()?).ok_or(RedisError::Str("Bad expansion"))?);
                options.grows = true;
                index += 2;
            }
            Some(InsertWord::NoCreate) => {
                options.create = false;
                index += 1;
            }
            Some(InsertWord::NonScaling) => {
                options.reservation.scaling = false;
                options.grows = true;
                index += 1;
            }
            Some(InsertWord::Items) | None => {
                return Err(RedisError::Str("Unknown argument received"));
            }
        }
    };
    if items_at >= args.len() {
        return Err(RedisError::WrongArity);
    }
    let bad = || RedisError::Str("Bad argument received");
    let reservation = &mut options.reservation;
    if let Some(error_rate) = error_rate {
        let in_range = error_rate > 0.0 && error_rate < 1.0;
        reservation.error_rate = Some(error_rate).filter(|_| in_range).ok_or_else(bad)?;
    }
    if let Some(capacity) = capacity {
        let capacity = u64::try_from(capacity).ok().filter(|&capacity| capacity > 0);
        reservation.capacity = capacity.ok_or_else(bad)?;
    }
    if let Some(expansion) = expansion {
        reservation.expansion = if replaying && expansion >= 1 {
            replayed_expansion(expansion)
        } else if expansion > 0 && expansion as u64 > MAX_EXPANSION {
            // As BF.RESERVE says it (this said "Bad argument received", as for a value
            // RedisBloom refuses too, which 0 and below still get).
            return Err(RedisError::String(format!(
                "ERR expansion above the module's limit of {MAX_EXPANSION}"
            )));
        } else {
            let expansion = u32::try_from(expansion).ok().filter(|&n| n >= 1);
            expansion.ok_or_else(bad)?
        };
    }
    options.items_at = items_at;
    Ok(options)
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item...`
pub fn insert(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let mut aging = crate::aging::Options::default();
    let options = insert_options(&args, is_replay(&ctx.get_flags()), |words| aging.take(words))?;
    if aging.given() {
        return crate::aging::insert(ctx, &args, options, aging);
    }
    let InsertOptions {
        reservation,
        create,
        items_at,
        ..
    } = options;
    let reservation = create.then_some(&reservation);
    Ok(RedisValue::Array(add_items_listed(
        ctx,
        "BF.INSERT",
        &args,
        items_at,
        reservation,
    )?))
}

/// Looks items up in the filter at `key`; a missing key answers 0 for each.
fn lookup(ctx: &Context, key: &RedisString, items: &[RedisString]) -> Result<Vec<RedisValue>, RedisError> {
    let redis_key = ctx.open_key(key);
    let filter = read_filter(&redis_key)?;
    let boolean = booleans();
    let Some(filter) = filter else {
        return Ok(items.iter().map(|_| boolean(false)).collect());
    };
    if let Some(aging) = filter.as_any().downcast_ref::<RotatingBloomFilter>() {
        return Ok(crate::aging::lookup(aging, items, boolean));
    }
    // The filter's batched lookup (blocked layouts hash ahead and prefetch).
    let slices: Vec<&[u8]> = items.iter().map(RedisString::as_slice).collect();
    let mut present = vec![false; items.len()];
    filter.contains_batch(&slices, &mut present);
    Ok(present.into_iter().map(boolean).collect())
}

/// `BF.EXISTS key item` (registered by `direct.rs`, which passes the item's bytes as
/// they are in the command)
pub fn exists(ctx: &Context, key: &RedisString, item: &[u8]) -> RedisResult {
    // One item: no lists, nothing to prefetch.
    let redis_key = ctx.open_key(key);
    let boolean = booleans();
    let Some(filter) = read_filter(&redis_key)? else {
        return Ok(boolean(false));
    };
    if let Some(aging) = filter.as_any().downcast_ref::<RotatingBloomFilter>() {
        // An aging filter answers for the window as of now.
        return Ok(boolean(crate::aging::contains_now(aging, item)));
    }
    Ok(boolean(filter.contains(item)))
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
    Ok(integer(filter.map_or(0, crate::aging::estimated_len)))
}

/// A count as a reply integer, `i64::MAX` past it: a filter whose every bit is set
/// estimates `u64::MAX` items ("saturated"), which a plain cast would answer as -1.
pub fn integer(value: u64) -> RedisValue {
    RedisValue::Integer(i64::try_from(value).unwrap_or(i64::MAX))
}

/// What RedisBloom's `BF.INFO` counts as a filter's `Size`: its bits, plus 32 bytes for
/// the filter and 64 for each sub-filter (the sizes of RedisBloom's own C structures, kept
/// so that clients comparing sizes see the same numbers).
pub fn redisbloom_size(memory_bytes: u64, sub_filters: u64) -> u64 {
    memory_bytes
        .saturating_add(32)
        .saturating_add(sub_filters.saturating_mul(64))
}

/// Whether the client of this command speaks RESP3.
fn resp3(ctx: &Context) -> bool {
    ctx.get_flags().contains(ContextFlags::FLAGS_RESP3)
}

/// How the add and exists commands answer yes or no, as RedisBloom: a boolean (`#t`/`#f`)
/// to a RESP3 client, 1 or 0 to a RESP2 one. Redis itself writes a module's boolean reply
/// as 1 or 0 to a RESP2 client, so no per-command look at the client's protocol is needed
/// (reading the context flags is about 140 instructions, 3% of a pipelined `BF.EXISTS`);
/// a Redis older than 7.0 has no boolean replies for modules, and gets integers.
pub(crate) fn booleans() -> fn(bool) -> RedisValue {
    // SAFETY: reading a function pointer Redis filled in when the module was loaded.
    if unsafe { raw::RedisModule_ReplyWithBool }.is_some() {
        RedisValue::Bool
    } else {
        |yes| RedisValue::Integer(i64::from(yes))
    }
}

/// Whether maps can be replied (RESP3 client, Redis 7.0 or later).
fn maps(ctx: &Context) -> bool {
    // SAFETY: reading a function pointer Redis filled in when the module was loaded.
    resp3(ctx) && unsafe { raw::RedisModule_ReplyWithMap }.is_some()
}

/// Replies a map with these labels (simple strings, in this order) and values, and
/// answers `NoReply` for the caller to return.
fn reply_map(ctx: &Context, fields: Vec<(&'static str, RedisValue)>) -> RedisResult {
    raw::reply_with_map(ctx.ctx, fields.len() as std::os::raw::c_long);
    for (label, value) in fields {
        ctx.reply_simple_string(label);
        ctx.reply(Ok(value));
    }
    Ok(RedisValue::NoReply)
}

/// `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]`, with RedisBloom's reply
/// shapes: all five fields as a flat array of label and value (RESP2) or a map (RESP3);
/// one field as a one-element array `[value]` (RESP2) or a one-entry map (RESP3).
pub fn info(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 && args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let redis_key = ctx.open_key(&args[1]);
    let filter = read_filter(&redis_key)?.ok_or(RedisError::Str("ERR not found"))?;
    if let Some(aging) = filter.as_any().downcast_ref::<RotatingBloomFilter>() {
        return crate::aging::info(ctx, aging, args.get(2));
    }
    let stats = accounting::counted_stats(filter);
    let expansion = stats.expansion.map_or(RedisValue::Null, |expansion| {
        RedisValue::Integer(i64::from(expansion))
    });
    let size = redisbloom_size(stats.memory_bytes, stats.sub_filters);
    let fields = vec![
        ("Capacity", "CAPACITY", integer(stats.capacity.unwrap_or(0))),
        ("Size", "SIZE", integer(size)),
        ("Number of filters", "FILTERS", integer(stats.sub_filters)),
        ("Number of items inserted", "ITEMS", integer(stats.estimated_len)),
        ("Expansion rate", "EXPANSION", expansion),
    ];
    reply_info(ctx, fields, args.get(2))
}

/// `%g` as C's printf writes it (six significant digits, trailing zeros dropped, an
/// exponent of at least two digits below 1e-4 and from 1e6): how `BF.DEBUG` prints rates.
pub fn format_g(value: f64) -> String {
    fn trimmed(text: &str) -> &str {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.')
        } else {
            text
        }
    }
    if value == 0.0 || !value.is_finite() {
        return value.to_string();
    }
    let scientific = format!("{value:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        let decimals = (5 - exponent) as usize;
        trimmed(&format!("{value:.decimals$}")).to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trimmed(mantissa), exponent.abs())
    }
}

/// `BF.DEBUG key`: RedisBloom's description of a filter: `size:<items>`, then one line per
/// sub-filter, `bytes:<b> bits:<m> hashes:<k> hashwidth:<64 or 32> capacity:<c> size:<items>
/// ratio:<rate>` (the rate it was sized for). A filter of another variant (loaded from a
/// `bloomery` file) gets one line naming the variant and its memory.
pub fn debug(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let redis_key = ctx.open_key(&args[1]);
    let filter = read_filter(&redis_key)?.ok_or(RedisError::Str("ERR not found"))?;
    let stats = accounting::counted_stats(filter);
    let mut lines = vec![format!("size:{}", stats.estimated_len)];
    // The hash's width: 64 bits, but for a RedisBloom chain without FORCE64 (made by
    // RedisBloom 1.x, or by 2.x from such a template), which hashes with 32.
    let any = filter.as_any();
    let hash_width = match any.downcast_ref::<RedisBloomFilter>() {
        Some(chain) if chain.options() & OPT_FORCE64 == 0 => 32,
        _ => 64,
    };
    let line = |num_bits: u64, num_hashes: u32, capacity: u64, len: u64, rate: f64| {
        format!(
            "bytes:{} bits:{num_bits} hashes:{num_hashes} hashwidth:{hash_width} capacity:{capacity} size:{len} ratio:{}",
            num_bits / 8,
            format_g(rate)
        )
    };
    if let Some(scalable) = any.downcast_ref::<ScalableBloomFilter>() {
        lines.extend(
            scalable
                .sub_filters()
                .iter()
                .map(|sub| line(sub.num_bits, sub.num_hashes, sub.capacity, sub.len, sub.fpp)),
        );
    } else if let Some(chain) = any.downcast_ref::<ScalableBlockedBloomFilter>() {
        // Blocked sub-filters set one bit in each of a block's eight lanes.
        lines.extend(
            chain
                .sub_filters()
                .into_iter()
                .map(|(capacity, len, bits, fpp)| line(bits, 8, capacity, len, fpp)),
        );
    } else if let Some(chain) = any.downcast_ref::<RedisBloomFilter>() {
        lines.extend(chain.links().iter().map(|link| {
            line(
                link.bits(),
                link.hashes(),
                link.entries(),
                link.size(),
                link.error(),
            )
        }));
    } else {
        lines.push(format!(
            "variant:{} bytes:{}",
            filter.variant().name(),
            stats.memory_bytes
        ));
    }
    Ok(RedisValue::Array(
        lines.into_iter().map(RedisValue::BulkString).collect(),
    ))
}

/// `BF.SCANDUMP key iterator`: piece `iterator + 1` of the filter's serialized form, as
/// `[next iterator, bytes]`; `[0, ""]` when done. Feed each pair to `BF.LOADCHUNK`. Each
/// call copies one piece (at most 16 MiB) from the filter; the first also checksums it.
pub fn scandump(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    // RedisBloom's order and replies: the key first (not found, WRONGTYPE), then the
    // iterator; one below 0 is past the end, `[0, ""]`.
    let redis_key = ctx.open_key(&args[1]);
    let filter = read_filter(&redis_key)?.ok_or(RedisError::Str("ERR not found"))?;
    let iterator = parse_i64(&args[2]).ok_or(RedisError::Str("Second argument must be numeric"))?;
    let Ok(iterator) = u64::try_from(iterator) else {
        return Ok(RedisValue::Array(vec![
            RedisValue::Integer(0),
            RedisValue::StringBuffer(Vec::new()),
        ]));
    };
    if let Some(redisbloom) = filter.as_any().downcast_ref::<RedisBloomFilter>()
        && redis_key
            .get_value::<Stored>(&MBBLOOM_TYPE)
            .is_ok_and(|value| value.is_some())
    {
        // A RedisBloom key dumps as RedisBloom dumps it.
        return Ok(crate::mbbloom::scandump_reply(redisbloom, iterator));
    }
    let next = iterator + 1;
    Ok(match dump_chunk(&filter.envelope(), next) {
        Some(chunk) => RedisValue::Array(vec![
            RedisValue::Integer(next as i64),
            RedisValue::StringBuffer(chunk),
        ]),
        None => RedisValue::Array(vec![RedisValue::Integer(0), RedisValue::StringBuffer(Vec::new())]),
    })
}

/// `BF.LOADCHUNK key iterator data`: restores a filter from `BF.SCANDUMP`'s pieces, in
/// order. Any bloomery variant loads (a file made by the `bloomery` tool is one piece per
/// 16 MiB of its bytes); `BF.*` commands then answer through the library's interface.
///
/// Piece 1 creates the key, holding the load in progress (see [`crate::loading`]), unless
/// the key exists: a filter is never replaced by a load (RedisBloom refuses too), and a
/// load in progress is never restarted over (DEL it first). Each further piece must be
/// the next; one that arrives out of order is refused and the load kept, while damaged
/// data ends the load (the key is deleted). The last piece turns the key into the filter
/// once the whole dump passes its checksums and parameter checks and fits the cap.
/// Refusals explain themselves, unless `bloomery.redisbloom-errors` is set: then they are
/// RedisBloom's bare `received bad data`.
pub fn loadchunk(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 4 {
        return Err(RedisError::WrongArity);
    }
    let reply = load_piece(ctx, &args);
    match reply {
        // `bloomery.redisbloom-errors yes`: RedisBloom's bare text for every refusal but
        // its own other answers (RedisBloom's flow tests compare the message exactly).
        Err(RedisError::Str(message))
            if redisbloom_errors()
                && !message.starts_with("WRONGTYPE")
                && ![
                    crate::mbbloom::INVALID_OFFSET,
                    crate::mbbloom::TOO_BIG,
                    NOT_FOUND,
                    NOT_NUMERIC,
                ]
                .contains(&message) =>
        {
            Err(RedisError::Str("ERR received bad data"))
        }
        Err(RedisError::String(_)) if redisbloom_errors() => Err(RedisError::Str("ERR received bad data")),
        reply => reply,
    }
}

/// RedisBloom's `BF.LOADCHUNK` answers to an iterator that is no integer, and to a piece
/// other than the first for a missing key (given with `bloomery.redisbloom-errors yes`;
/// bloomery's own explain themselves).
const NOT_NUMERIC: &str = "ERR Second argument must be numeric";
const NOT_FOUND: &str = "ERR not found";

/// `BF.LOADCHUNK` after its arity check, with bloomery's error texts, in RedisBloom's
/// order: the iterator must be an integer, then the key decides (WRONGTYPE for another
/// type, "not found" for a missing key and a piece other than 1), then the piece.
fn load_piece(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let key = &args[1];
    let iterator = parse_i64(&args[2]).ok_or(RedisError::Str(if redisbloom_errors() {
        NOT_NUMERIC
    } else {
        "ERR received bad data: the iterator is not an integer"
    }))?;
    let data = args[3].as_slice();
    let cap = cap_for_command(&ctx.get_flags());
    let redis_key = ctx.open_key_writable(key);
    // RedisBloom's own pieces (a migration from RedisBloom, or this server's AOF of its
    // RedisBloom keys) load as RedisBloom loads them.
    if let Some(result) =
        crate::mbbloom::loadchunk(&redis_key, iterator, data, cap, is_replay(&ctx.get_flags()))
    {
        let merged = result?;
        accounting::after_write(&redis_key);
        match merged {
            // A piece ORed into a link: replicated as the bytes now there, which a
            // replica copies (as RedisBloom's pieces), so it holds what this server holds.
            Some(bytes) => {
                notify(ctx, c"bf.loadchunk", key);
                ctx.replicate("BF.LOADCHUNK", &[key.as_slice(), args[2].as_slice(), &bytes][..]);
            }
            None => notify_and_replicate(ctx, c"bf.loadchunk", key),
        }
        return Ok(RedisValue::SimpleStringStatic("OK"));
    }
    let refused = |error: LoadError| RedisError::String(error.message());
    match redis_key
        .get_value::<Stored>(&BLOOM_TYPE)
        .map_err(|_| WRONG_TYPE)?
    {
        None if iterator == 1 => {
            let value = match Load::start(data, cap).map_err(refused)? {
                Progress::Loading(load) => Stored::Loading(load),
                Progress::Complete(filter) => Stored::Filter(filter),
            };
            redis_key.set_value(&BLOOM_TYPE, value)?;
        }
        None => {
            return Err(RedisError::Str(if redisbloom_errors() {
                NOT_FOUND
            } else {
                "ERR received bad data: no load in progress at the key (the first piece has iterator 1)"
            }));
        }
        Some(Stored::Filter(_)) => {
            return Err(RedisError::Str(
                "ERR received bad data: the key holds a filter; DEL it before loading another",
            ));
        }
        Some(Stored::Loading(load)) if u64::try_from(iterator) != Ok(load.next_number()) => {
            return Err(RedisError::String(format!(
                "ERR received bad data: piece {iterator} arrived where piece {} was expected (DEL the key to start over)",
                load.next_number()
            )));
        }
        Some(stored @ Stored::Loading(_)) => {
            let Stored::Loading(load) = &mut *stored else {
                return Err(RedisError::Str("ERR no load in progress"));
            };
            // The guard above took every other iterator.
            match load.push(load.next_number(), data, cap) {
                Ok(None) => {}
                Ok(Some(filter)) => *stored = Stored::Filter(filter),
                Err(error) => {
                    // The load is spent: remove it, and tell replicas and the AOF so
                    // (a replica is not held to this server's cap, so it might not refuse).
                    redis_key.delete()?;
                    notify(ctx, c"del", key);
                    ctx.replicate("DEL", &[key][..]);
                    return Err(refused(error));
                }
            }
        }
    }
    accounting::after_write(&redis_key);
    notify_and_replicate(ctx, c"bf.loadchunk", key);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// The error rate and capacity of filters the add commands create (the load arguments
/// `ERROR_RATE` and `INITIAL_SIZE`, RedisBloom's 0.01 and 100 by default).
pub(crate) fn default_rate_and_capacity() -> (f64, u64) {
    let reservation = Reservation::default();
    (reservation.error_rate, reservation.capacity)
}

/// Replies `BF.INFO`'s way: every field as label and value (a flat array to RESP2, a map
/// to RESP3), or only the one named `wanted` (by its short name) as `[value]` or a
/// one-entry map; "Invalid information value" for another name.
pub(crate) fn reply_info(
    ctx: &Context,
    fields: Vec<(&'static str, &'static str, RedisValue)>,
    wanted: Option<&RedisString>,
) -> RedisResult {
    let one = wanted.is_some();
    let fields: Vec<(&'static str, RedisValue)> = match wanted {
        Some(wanted) => {
            let (label, _, value) = fields
                .into_iter()
                .find(|(_, name, _)| word_is(wanted, name))
                .ok_or(RedisError::Str("Invalid information value"))?;
            vec![(label, value)]
        }
        None => fields
            .into_iter()
            .map(|(label, _, value)| (label, value))
            .collect(),
    };
    if maps(ctx) {
        return reply_map(ctx, fields);
    }
    Ok(RedisValue::Array(if one {
        fields.into_iter().map(|(_, value)| value).collect()
    } else {
        fields
            .into_iter()
            .flat_map(|(label, value)| [RedisValue::SimpleStringStatic(label), value])
            .collect()
    }))
}
