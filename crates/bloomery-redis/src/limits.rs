//! How much memory one key may take, as module configuration. RedisBloom 2.6.28 allocates
//! whatever a request asks (`BF.RESERVE big 0.01 100000000000` took the server down trying
//! to allocate about 120 GB); here every filter a client creates, grows or loads is held
//! to `bloomery.max-filter-memory` bytes (default 1 GiB), checked before allocating:
//!
//! - `BF.RESERVE` and the filters `BF.ADD`/`BF.MADD`/`BF.INSERT` create: the first
//!   sub-filter's size ([`bloomery::any::Spec::memory_bytes`]);
//! - growth: every item goes through [`bloomery::any::DynFilter::insert_within`], which
//!   refuses a new sub-filter that would take the filter past the cap;
//! - `BF.LOADCHUNK` and `RESTORE`: the envelope's announced length against
//!   [`envelope_limit`], then the loaded filter's memory against the cap.
//!
//! A filter grown to the cap is an envelope of at most the cap plus one header (a scalable
//! or rotating filter's payload is exactly its bits), so whatever growth made under a cap,
//! `RESTORE` and `BF.LOADCHUNK` accept under the same cap. What the server loads itself
//! (its RDB or AOF at start, a full sync) and what its primary sends were admitted when
//! and where they were first written, so they are not held to this server's cap: lowering
//! the cap at run time, or a replica configured lower than its primary, never makes a
//! restart fail or a replica diverge. Those loads still allocate only as the bytes
//! actually arrive, never what a length field claims.
//!
//! `0` means no cap of its own: RedisBloom's behaviour (its flow test `test_issue178`
//! reserves a filter of 1,132,420,232 bytes), except that a client's command is still held
//! to the machine's memory ([`machine_memory`]): under memory overcommit the system grants
//! such a request, and the server is killed as the memory is written. (An allocation the
//! system refuses is an error reply: the module allocates with `RedisModule_TryAlloc`,
//! see `alloc.rs`.)
//!
//! The module's other configurations live here too, each also a load argument (which wins
//! over redis.conf and the command line) for servers without module configuration:
//!
//! | configuration | load argument | default | what |
//! | --- | --- | --- | --- |
//! | `bloomery.max-filter-memory` | `MAX_FILTER_MEMORY` | `1gb` | the cap above (`0`: none) |
//! | `bloomery.error-rate` | `ERROR_RATE` | `0.01` | error rate of the filters `BF.ADD`, `BF.MADD` and `BF.INSERT` (without `ERROR`) create; a string, since Redis's numeric configurations are integers: a number strictly between 0 and 1 |
//! | `bloomery.initial-size` | `INITIAL_SIZE` | `100` | capacity of those filters (`BF.INSERT` without `CAPACITY`) |
//! | `bloomery.expansion` | `EXPANSION` | `2` | growth of new filters without `EXPANSION` (`BF.RESERVE` too), 1 to [`MAX_EXPANSION`] |
//! | `bloomery.redisbloom-layout` | `REDISBLOOM_LAYOUT` | `no` | new filters as RedisBloom's chains (`no`: bloomery's, but RedisBloom's at rates where bloomery's takes more than twice the memory: `Reservation::resolved`) |
//! | `bloomery.redisbloom-errors` | `REDISBLOOM_ERRORS` | `no` | RedisBloom's bare `BF.LOADCHUNK` errors |
//!
//! `ERROR_RATE` and `INITIAL_SIZE` are RedisBloom 2.6's load arguments. A bad value is
//! refused with the reason: `CONFIG SET` answers an error and keeps the old value, a bad
//! load argument stops the module from loading. So is a value that leaves the defaults
//! together unable to make a filter (a first filter of `initial-size` items that cannot be
//! sized at the error rate in the layout it would have), where every `BF.ADD` of a new key
//! would answer an error: a `CONFIG SET` is checked with the other defaults once
//! all its values are set (and sets them all back if refused), and the module checks the
//! defaults it loaded with. A change applies to the filters created
//! after it; existing filters keep the parameters they were created with. The defaults are
//! this server's alone: a filter made from them is replicated and written to the AOF with
//! every parameter spelled out (`BF.RESERVE ... LAYOUT`, `CBF.RESERVE`), so a replica or a
//! replay with other defaults makes the same filter.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use bloomery::format::native::{MAX_PARAMS_LEN, PAYLOAD_ALIGN};
use redis_module::{Context, ContextFlags, RedisString, Status, raw};

/// The default cap: 1 GiB per key, a first sub-filter of about 6 × 10^8 items at 1% in the
/// default layout (14 bits an item at its fifth of the rate: 1,746,368 bytes for 10^6,
/// which `cargo test --release -p bloomery --test scalable_blocked deep -- --nocapture`
/// prints), or 7.8 × 10^8 in RedisBloom's (11 bits an item at half the rate).
pub const DEFAULT_MAX_FILTER_MEMORY: u64 = 1 << 30;

/// The configuration's name, as `CONFIG GET`/`CONFIG SET` see it (Redis prefixes the
/// module's name: `bloomery.max-filter-memory`).
const CONFIG_NAME: &CStr = c"max-filter-memory";

static MAX_FILTER_MEMORY: AtomicU64 = AtomicU64::new(DEFAULT_MAX_FILTER_MEMORY);

/// `bloomery.redisbloom-errors`: whether `BF.LOADCHUNK` answers RedisBloom's bare texts
/// (`received bad data`, `not found`, `Second argument must be numeric`) instead of
/// bloomery's explanations (default no). RedisBloom's flow tests compare the message
/// exactly; people are better served by the explanation.
const COMPAT_CONFIG_NAME: &CStr = c"redisbloom-errors";

static REDISBLOOM_ERRORS: AtomicBool = AtomicBool::new(false);

/// `bloomery.redisbloom-layout`: whether new filters are RedisBloom-layout chains
/// ([`bloomery::RedisBloomFilter`]: RedisBloom's hashing, sizing and growth, bit for bit)
/// instead of the library's scalable filter of blocked sub-filters (default no: then the
/// latter, but at rates where it takes more than twice RedisBloom's memory).
const LAYOUT_CONFIG_NAME: &CStr = c"redisbloom-layout";

static REDISBLOOM_LAYOUT: AtomicBool = AtomicBool::new(false);

/// Whether new filters are RedisBloom-layout chains.
pub fn redisbloom_layout() -> bool {
    REDISBLOOM_LAYOUT.load(Ordering::Relaxed)
}

/// Sets `bloomery.redisbloom-layout`.
pub fn set_redisbloom_layout(on: bool) {
    REDISBLOOM_LAYOUT.store(on, Ordering::Relaxed);
}

/// Whether `BF.LOADCHUNK` errors are RedisBloom's bare text.
pub fn redisbloom_errors() -> bool {
    REDISBLOOM_ERRORS.load(Ordering::Relaxed)
}

/// Sets `bloomery.redisbloom-errors`.
pub fn set_redisbloom_errors(on: bool) {
    REDISBLOOM_ERRORS.store(on, Ordering::Relaxed);
}

/// The largest expansion factor accepted: RedisBloom's later range, [1, 32768]. The memory
/// cap, not this, bounds what growth allocates.
pub const MAX_EXPANSION: u64 = 32_768;

/// The defaults of new filters: RedisBloom's (error rate 0.01, capacity 100, expansion 2).
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
pub const DEFAULT_INITIAL_SIZE: u64 = 100;
pub const DEFAULT_EXPANSION: u64 = 2;

const ERROR_RATE_CONFIG_NAME: &CStr = c"error-rate";
const INITIAL_SIZE_CONFIG_NAME: &CStr = c"initial-size";
const EXPANSION_CONFIG_NAME: &CStr = c"expansion";

static ERROR_RATE_BITS: AtomicU64 = AtomicU64::new(DEFAULT_ERROR_RATE.to_bits());
static INITIAL_SIZE: AtomicU64 = AtomicU64::new(DEFAULT_INITIAL_SIZE);
static EXPANSION: AtomicU64 = AtomicU64::new(DEFAULT_EXPANSION);

/// The error rate of filters created without one (`bloomery.error-rate`).
pub fn default_error_rate() -> f64 {
    f64::from_bits(ERROR_RATE_BITS.load(Ordering::Relaxed))
}

/// The capacity of filters created without one (`bloomery.initial-size`).
pub fn default_initial_size() -> u64 {
    INITIAL_SIZE.load(Ordering::Relaxed)
}

/// The expansion of filters created without one (`bloomery.expansion`).
pub fn default_expansion() -> u64 {
    EXPANSION.load(Ordering::Relaxed)
}

/// Parses and checks a default error rate: a number strictly between 0 and 1, read as the
/// commands read their rates (`commands::parse_f64`, RedisBloom's `strtod` on the
/// whole text: a hex float such as `0x1p-7` is taken, surrounding spaces are not), so
/// that RedisBloom's load argument `ERROR_RATE` takes what RedisBloom's did, and a rate
/// is the same number as a default and in a command.
pub fn parse_error_rate(value: &RedisString) -> Result<f64, String> {
    crate::commands::parse_f64(value)
        .filter(|&rate| rate > 0.0 && rate < 1.0)
        .ok_or_else(|| bad_error_rate(&format!("'{}'", String::from_utf8_lossy(value.as_slice()))))
}

/// The refusal of a default error rate, `got` what was given.
fn bad_error_rate(got: &str) -> String {
    format!("the error rate must be a number strictly between 0 and 1, such as 0.01 (got {got})")
}

/// Checks a default capacity: at least 1. Whether a filter can be sized for it is checked
/// with the other defaults, in the layout a new key's filter gets (`check_defaults`): a
/// check of its own, sizing a classic-hashed chain at 1%, refused capacities that
/// `BF.RESERVE` sizes (10^11, refused there only over the memory cap).
pub fn check_initial_size(capacity: i64) -> Result<u64, String> {
    u64::try_from(capacity)
        .ok()
        .filter(|&capacity| capacity >= 1)
        .ok_or_else(|| format!("the initial size must be a capacity of at least 1 (got {capacity})"))
}

/// Checks a default expansion: 1 to [`MAX_EXPANSION`], as `BF.RESERVE`'s `EXPANSION`.
pub fn check_expansion(expansion: i64) -> Result<u64, String> {
    u64::try_from(expansion)
        .ok()
        .filter(|expansion| (1..=MAX_EXPANSION).contains(expansion))
        .ok_or_else(|| format!("the expansion must be from 1 to {MAX_EXPANSION} (got {expansion})"))
}

/// Whether the module has loaded: from then on, a `CONFIG SET` of the defaults is checked
/// together once its values are all set ([`apply_defaults`]). While it loads, they come one
/// at a time (redis.conf, load arguments), in an order of Redis's, and are checked
/// together once all are in ([`check_loaded_defaults`]).
static DEFAULTS_LOADED: AtomicBool = AtomicBool::new(false);

/// Checks the defaults the module loaded with, together (see the module docs above), and
/// from then on each change with the others. An `Err` with the reason stops the load.
pub fn check_loaded_defaults() -> Result<(), String> {
    check_current_defaults()?;
    DEFAULTS_LOADED.store(true, Ordering::Relaxed);
    Ok(())
}

/// Whether a filter can be made from the defaults as they are now.
fn check_current_defaults() -> Result<(), String> {
    crate::commands::check_defaults(default_error_rate(), default_initial_size(), redisbloom_layout())
}

/// The apply callback of the defaults' configurations: after a `CONFIG SET` has set each
/// of its values (checked alone by its set callback), checks them together, so that a
/// combination is judged whole, whatever the order of its values (`CONFIG SET
/// bloomery.initial-size 200 bloomery.error-rate 5e-324` is refused for the rate, from
/// which no filter can be made, and sets the size back too). A refusal makes Redis set
/// every value of the command back (with the set callbacks, whose checks the old values
/// pass) and answer the reason.
unsafe extern "C" fn apply_defaults(
    _ctx: *mut raw::RedisModuleCtx,
    _privdata: *mut c_void,
    error: *mut *mut raw::RedisModuleString,
) -> c_int {
    if !DEFAULTS_LOADED.load(Ordering::Relaxed) {
        return raw::REDISMODULE_OK as c_int;
    }
    match check_current_defaults() {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        // SAFETY: `error` is the slot Redis passed.
        Err(why) => unsafe { refuse(error, &why) },
    }
}

/// Sets `bloomery.error-rate` (checked by [`parse_error_rate`]).
pub fn set_default_error_rate(rate: f64) {
    ERROR_RATE_BITS.store(rate.to_bits(), Ordering::Relaxed);
}

/// Sets `bloomery.initial-size` (checked by [`check_initial_size`]).
pub fn set_default_initial_size(capacity: u64) {
    INITIAL_SIZE.store(capacity, Ordering::Relaxed);
}

/// Sets `bloomery.expansion` (checked by [`check_expansion`]).
pub fn set_default_expansion(expansion: u64) {
    EXPANSION.store(expansion, Ordering::Relaxed);
}

/// `bloomery.error-rate` as `CONFIG GET` and `INFO bloomery` show it: the shortest text
/// that reads back as the same number, in scientific notation below 1e-5 (`0.001`,
/// `1e-9`), as `CONFIG SET` takes it.
pub fn error_rate_text() -> String {
    format!("{:?}", default_error_rate())
}

/// The longest header an envelope can have: 32 fixed bytes, at most [`MAX_PARAMS_LEN`]
/// bytes of parameters and an 8-byte checksum, rounded up to the 64-byte payload alignment
/// (65,600 bytes).
pub const MAX_HEADER_BYTES: u64 =
    (32 + MAX_PARAMS_LEN as u64 + 8).div_ceil(PAYLOAD_ALIGN as u64) * PAYLOAD_ALIGN as u64;

/// The cap in force, in bytes; `None` when it is 0 (no cap).
pub fn max_filter_memory() -> Option<u64> {
    Some(MAX_FILTER_MEMORY.load(Ordering::Relaxed)).filter(|&cap| cap > 0)
}

/// Sets the cap (0: none).
pub fn set_max_filter_memory(bytes: u64) {
    MAX_FILTER_MEMORY.store(bytes, Ordering::Relaxed);
}

/// Whether a command in a context with these flags replays one that another server (or
/// this one, before) already ran and admitted: it comes from this server's primary
/// (`REPLICATED`) or its AOF (`LOADING`). Refusing what it adds would lose items.
pub fn is_replay(flags: &ContextFlags) -> bool {
    flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
}

/// The cap for a command run in a context with these flags: none for a replayed command
/// ([`is_replay`]), which was admitted where it was first run.
pub fn cap_for_command(flags: &ContextFlags) -> Option<u64> {
    if is_replay(flags) {
        None
    } else {
        Some(max_filter_memory().unwrap_or_else(machine_memory))
    }
}

/// With no cap configured (`0`), a client's command is still held to this machine's
/// memory: under overcommit the system grants what it cannot back and the server is killed
/// as it is written, so a request that cannot fit in RAM at all (RedisBloom's flow test
/// `test_arbitrary_offset` grows a loaded filter by about 180 TB) is refused with an error,
/// where RedisBloom's own allocation fails and it answers "problem inserting into filter".
/// MemTotal from /proc/meminfo; unknown elsewhere (no bound).
pub fn machine_memory() -> u64 {
    static MEMORY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MEMORY.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(1024)
            })
            .unwrap_or(u64::MAX)
    })
}

/// Whether a command's cap is only the machine's memory (no `bloomery.max-filter-memory`).
pub fn uncapped() -> bool {
    max_filter_memory().is_none()
}

/// The cap for a value read from RDB in a context with these flags: none while the
/// server loads its own data or a full sync (`LOADING`), or on a replica (whose `RESTORE`s
/// come from its primary); the cap for a client's `RESTORE`.
pub fn cap_for_rdb_load(flags: ContextFlags) -> Option<u64> {
    if is_rdb_replay(&flags) {
        None
    } else {
        max_filter_memory()
    }
}

/// Whether a value read from RDB in a context with these flags is what this server or its
/// primary held (`LOADING`: its own data or a full sync; a replica's `RESTORE`s, which come
/// from its primary), not a client's `RESTORE`: taken with RedisBloom's own checks only.
/// Not whether the cap is off (`bloomery.max-filter-memory 0`): a client's `RESTORE` on
/// such a server is still a client's.
pub fn is_rdb_replay(flags: &ContextFlags) -> bool {
    flags.intersects(ContextFlags::LOADING | ContextFlags::SLAVE)
}

/// The longest envelope accepted under `cap`: the cap plus the longest header.
pub fn envelope_limit(cap: Option<u64>) -> u64 {
    cap.map_or(u64::MAX, |cap| cap.saturating_add(MAX_HEADER_BYTES))
}

/// A byte count as Redis writes them: digits with an optional unit, `k`/`kb`, `m`/`mb`,
/// `g`/`gb` (powers of 1000 without `b`, of 1024 with it, as in redis.conf).
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let digits_end = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(digits_end);
    let multiplier: u64 = match unit {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    digits
        .parse::<u64>()
        .ok()?
        .checked_mul(multiplier)
        .filter(|&bytes| bytes <= i64::MAX as u64)
}

/// The string last handed to Redis by [`get_config`] (as [`ERROR_RATE_REPLY`]).
static MAX_FILTER_MEMORY_REPLY: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// The cap as `CONFIG GET` shows it: its bytes, as Redis shows a memory setting.
unsafe extern "C" fn get_config(_name: *const c_char, _privdata: *mut c_void) -> *mut raw::RedisModuleString {
    let text = MAX_FILTER_MEMORY.load(Ordering::Relaxed).to_string();
    // SAFETY: as in `get_error_rate_config`.
    unsafe { config_reply(&MAX_FILTER_MEMORY_REPLY, &text) }
}

/// Sets the cap from `CONFIG SET`, redis.conf or the command line, read by
/// [`parse_memory`] as the load argument is. A string configuration, not Redis's memory
/// number: Redis 7.0's parser reads a value without digits (`mb`, `kb`, `b`, an empty
/// one) as 0 and lets `17179869184gb` wrap to 0, and 0 is no cap at all: a typo removed it
/// without a word.
unsafe extern "C" fn set_config(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    _privdata: *mut c_void,
    error: *mut *mut raw::RedisModuleString,
) -> c_int {
    let text = if value.is_null() {
        None
    } else {
        // Retained and released by the wrapper; Redis passes a valid string for the call.
        RedisString::new(None, value).try_as_str().ok().map(str::to_owned)
    };
    match text.as_deref().and_then(parse_memory) {
        Some(bytes) => {
            set_max_filter_memory(bytes);
            raw::REDISMODULE_OK as c_int
        }
        // SAFETY: `error` is the slot Redis passed.
        None => unsafe {
            refuse(
                error,
                &format!(
                    "bloomery.max-filter-memory must be bytes such as 1073741824 or 1gb (a unit of k, kb, m, mb, g or gb), at most 2^63 - 1, 0 for no limit; got '{}'",
                    text.as_deref().unwrap_or("")
                ),
            )
        },
    }
}

/// Hands Redis `text` as a configuration's value, freeing the string handed before
/// (kept in `slot`: Redis copies a getter's string at once).
///
/// # Safety
/// Called from a configuration getter, on Redis's main thread.
unsafe fn config_reply(slot: &AtomicPtr<raw::RedisModuleString>, text: &str) -> *mut raw::RedisModuleString {
    // SAFETY: reading function pointers Redis filled in when the module was loaded; the
    // previous string was created here without a context, and Redis copied it when it
    // was returned.
    unsafe {
        let (Some(create), Some(free)) = (raw::RedisModule_CreateString, raw::RedisModule_FreeString) else {
            return std::ptr::null_mut();
        };
        let string = create(std::ptr::null_mut(), text.as_ptr().cast::<c_char>(), text.len());
        let previous = slot.swap(string, Ordering::AcqRel);
        if !previous.is_null() {
            free(std::ptr::null_mut(), previous);
        }
        string
    }
}

/// The yes/no configurations, by the private data registered with them.
fn flag(privdata: *mut c_void) -> &'static AtomicBool {
    if privdata.is_null() {
        &REDISBLOOM_ERRORS
    } else {
        &REDISBLOOM_LAYOUT
    }
}

unsafe extern "C" fn get_flag_config(_name: *const c_char, privdata: *mut c_void) -> c_int {
    c_int::from(flag(privdata).load(Ordering::Relaxed))
}

unsafe extern "C" fn set_flag_config(
    _name: *const c_char,
    value: c_int,
    privdata: *mut c_void,
    _error: *mut *mut raw::RedisModuleString,
) -> c_int {
    flag(privdata).store(value != 0, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

/// The most of a refusal's reason that Redis shows: it copies it into a buffer of 256
/// bytes (`CONFIG_ERR_SIZE`) and cuts the rest.
const REFUSAL_SHOWN: usize = 255;

/// Hands Redis the reason a `CONFIG SET` was refused (Redis frees the string). A reason
/// longer than Redis shows goes whole to the server's log, and the reply, cut at a word
/// with "...", says so.
///
/// # Safety
/// `error` must be the error slot Redis passed to a set callback.
unsafe fn refuse(error: *mut *mut raw::RedisModuleString, why: &str) -> c_int {
    let shortened;
    let why = if why.len() > REFUSAL_SHOWN {
        crate::log::warning_without_context(&format!("bloomery: CONFIG SET refused: {why}"));
        const MORE: &str = "... (the server log has it all)";
        let mut end = why.floor_char_boundary(REFUSAL_SHOWN - MORE.len());
        if let Some(space) = why[..end].rfind(' ') {
            end = space;
        }
        shortened = format!("{}{MORE}", &why[..end]);
        shortened.as_str()
    } else {
        why
    };
    // SAFETY: reading a function pointer Redis filled in when the module was loaded; a
    // string created without a context is owned by whoever frees it: Redis, here.
    unsafe {
        if let Some(create) = raw::RedisModule_CreateString
            && !error.is_null()
        {
            *error = create(std::ptr::null_mut(), why.as_ptr().cast::<c_char>(), why.len());
        }
    }
    raw::REDISMODULE_ERR as c_int
}

/// The string last handed to Redis by [`get_error_rate_config`]: Redis copies it at once,
/// and it is freed at the next call.
static ERROR_RATE_REPLY: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

unsafe extern "C" fn get_error_rate_config(
    _name: *const c_char,
    _privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    let text = error_rate_text();
    // SAFETY: a configuration getter, called by Redis on its main thread.
    unsafe { config_reply(&ERROR_RATE_REPLY, &text) }
}

unsafe extern "C" fn set_error_rate_config(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    _privdata: *mut c_void,
    error: *mut *mut raw::RedisModuleString,
) -> c_int {
    let parsed = if value.is_null() {
        Err(bad_error_rate("none"))
    } else {
        // Retained and released by the wrapper; Redis passes a valid string for the call.
        parse_error_rate(&RedisString::new(None, value))
    };
    match parsed {
        Ok(rate) => {
            set_default_error_rate(rate);
            raw::REDISMODULE_OK as c_int
        }
        // SAFETY: `error` is the slot Redis passed.
        Err(why) => unsafe { refuse(error, &why) },
    }
}

unsafe extern "C" fn get_initial_size_config(_name: *const c_char, _privdata: *mut c_void) -> c_longlong {
    default_initial_size() as c_longlong
}

unsafe extern "C" fn set_initial_size_config(
    _name: *const c_char,
    value: c_longlong,
    _privdata: *mut c_void,
    error: *mut *mut raw::RedisModuleString,
) -> c_int {
    match check_initial_size(value) {
        Ok(capacity) => {
            set_default_initial_size(capacity);
            raw::REDISMODULE_OK as c_int
        }
        // SAFETY: `error` is the slot Redis passed.
        Err(why) => unsafe { refuse(error, &why) },
    }
}

unsafe extern "C" fn get_expansion_config(_name: *const c_char, _privdata: *mut c_void) -> c_longlong {
    default_expansion() as c_longlong
}

unsafe extern "C" fn set_expansion_config(
    _name: *const c_char,
    value: c_longlong,
    _privdata: *mut c_void,
    error: *mut *mut raw::RedisModuleString,
) -> c_int {
    match check_expansion(value) {
        Ok(expansion) => {
            set_default_expansion(expansion);
            raw::REDISMODULE_OK as c_int
        }
        // SAFETY: `error` is the slot Redis passed.
        Err(why) => unsafe { refuse(error, &why) },
    }
}

/// Whether every registration answered OK.
fn all_ok(codes: impl IntoIterator<Item = c_int>) -> bool {
    codes
        .into_iter()
        .fold(true, |all, code| all & (code == raw::REDISMODULE_OK as c_int))
}

/// Registers the module's configurations: `bloomery.max-filter-memory` (a string the
/// module reads as bytes with an optional unit, so `CONFIG SET` takes `64mb`),
/// `bloomery.error-rate` (a string holding a number), `bloomery.initial-size` and
/// `bloomery.expansion` (numbers), `bloomery.redisbloom-errors` and
/// `bloomery.redisbloom-layout` (yes/no), and applies what redis.conf or the command line
/// set. Redis before 7.0 has no module configuration: the load arguments (see the module
/// docs) still work there.
pub fn register_config(ctx: &Context) -> Status {
    // Checked together once loaded (a module loaded again may find this set).
    DEFAULTS_LOADED.store(false, Ordering::Relaxed);
    // SAFETY: reading the function pointers Redis filled in when the module was loaded.
    let (Some(register), Some(register_string), Some(register_bool), Some(load)) = (
        unsafe { raw::RedisModule_RegisterNumericConfig },
        unsafe { raw::RedisModule_RegisterStringConfig },
        unsafe { raw::RedisModule_RegisterBoolConfig },
        unsafe { raw::RedisModule_LoadConfigs },
    ) else {
        crate::log::notice(
            ctx,
            "bloomery: this Redis has no module configuration; use the MAX_FILTER_MEMORY, ERROR_RATE, INITIAL_SIZE, EXPANSION, REDISBLOOM_ERRORS and REDISBLOOM_LAYOUT load arguments",
        );
        return Status::Ok;
    };
    type GetNumeric = unsafe extern "C" fn(*const c_char, *mut c_void) -> c_longlong;
    type SetNumeric = unsafe extern "C" fn(
        *const c_char,
        c_longlong,
        *mut c_void,
        *mut *mut raw::RedisModuleString,
    ) -> c_int;
    let numeric: [(&CStr, u64, u32, c_longlong, c_longlong, GetNumeric, SetNumeric); 2] = [
        (
            INITIAL_SIZE_CONFIG_NAME,
            DEFAULT_INITIAL_SIZE,
            raw::REDISMODULE_CONFIG_DEFAULT,
            1,
            c_longlong::MAX,
            get_initial_size_config,
            set_initial_size_config,
        ),
        (
            EXPANSION_CONFIG_NAME,
            DEFAULT_EXPANSION,
            raw::REDISMODULE_CONFIG_DEFAULT,
            1,
            MAX_EXPANSION as c_longlong,
            get_expansion_config,
            set_expansion_config,
        ),
    ];
    // The defaults of new filters (error rate, initial size, layout) are checked together
    // once a CONFIG SET has set them all (`apply_defaults`); the others alone.
    type Apply = unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *mut c_void,
        *mut *mut raw::RedisModuleString,
    ) -> c_int;
    let defaults: Apply = apply_defaults;
    // SAFETY: called from the module's OnLoad with its context; the names are C strings
    // that outlive the calls (Redis copies them); these callbacks ignore their private data.
    let registered_numeric = all_ok(numeric.into_iter().map(
        |(name, default, flags, min, max, get, set)| unsafe {
            register(
                ctx.ctx,
                name.as_ptr(),
                default as c_longlong,
                flags,
                min,
                max,
                Some(get),
                Some(set),
                (name == INITIAL_SIZE_CONFIG_NAME).then_some(defaults),
                std::ptr::null_mut(),
            )
        },
    ));
    let default_rate = std::ffi::CString::new(DEFAULT_ERROR_RATE.to_string()).unwrap_or_default();
    let default_cap = std::ffi::CString::new(DEFAULT_MAX_FILTER_MEMORY.to_string()).unwrap_or_default();
    // SAFETY: as above.
    let registered_string = all_ok([
        unsafe {
            register_string(
                ctx.ctx,
                ERROR_RATE_CONFIG_NAME.as_ptr(),
                default_rate.as_ptr(),
                raw::REDISMODULE_CONFIG_DEFAULT,
                Some(get_error_rate_config),
                Some(set_error_rate_config),
                Some(defaults),
                std::ptr::null_mut(),
            )
        },
        unsafe {
            register_string(
                ctx.ctx,
                CONFIG_NAME.as_ptr(),
                default_cap.as_ptr(),
                raw::REDISMODULE_CONFIG_DEFAULT,
                Some(get_config),
                Some(set_config),
                None,
                std::ptr::null_mut(),
            )
        },
    ]);
    // SAFETY: as above; the private data only tells the two flags apart (null: errors,
    // non-null: layout) and is never dereferenced.
    let registered_bool = all_ok(
        [
            (COMPAT_CONFIG_NAME, std::ptr::null_mut(), None),
            (
                LAYOUT_CONFIG_NAME,
                std::ptr::NonNull::<c_void>::dangling().as_ptr(),
                Some(defaults),
            ),
        ]
        .into_iter()
        .map(|(name, privdata, apply)| unsafe {
            register_bool(
                ctx.ctx,
                name.as_ptr(),
                0,
                raw::REDISMODULE_CONFIG_DEFAULT,
                Some(get_flag_config),
                Some(set_flag_config),
                apply,
                privdata,
            )
        }),
    );
    // SAFETY: as above; LoadConfigs must follow the registrations within OnLoad.
    if !(registered_numeric && registered_string && registered_bool)
        || unsafe { load(ctx.ctx) } != raw::REDISMODULE_OK as c_int
    {
        crate::log::warning(ctx, "bloomery: could not register the bloomery.* configuration");
        return Status::Err;
    }
    Status::Ok
}
