//! A Redis module serving RedisBloom-compatible `BF.*` commands from bloomery's scalable
//! filter: `redis-server --loadmodule target/release/libbloomery_redis.so`.
//!
//! `BF.RESERVE`, `BF.ADD`, `BF.MADD`,
//! `BF.INSERT`, `BF.EXISTS`, `BF.MEXISTS`, `BF.CARD`, `BF.INFO`, `BF.DEBUG`, `BF.SCANDUMP` and
//! `BF.LOADCHUNK` with RedisBloom's syntax, defaults (error rate 0.01, capacity 100,
//! expansion 2), error replies and reply shapes (RESP3 booleans and maps to RESP3
//! clients), and the data type's RDB save and load, AOF rewrite
//! (as `BF.LOADCHUNK` commands), digest, copy, free and memory usage. Every key is held to
//! `bloomery.max-filter-memory` bytes (a module configuration: [`limits`], with
//! `bloomery.redisbloom-layout`, which makes new filters RedisBloom's own chain bit for bit,
//! and `bloomery.redisbloom-errors`), and a `BF.LOADCHUNK` load in progress is a value in
//! the keyspace (`loading.rs`). RedisBloom's own type, `MBbloom--`, is registered too, so
//! RedisBloom's data loads and is served as RedisBloom served it (`mbbloom.rs`).
//! `BF.HASHADD` and `BF.HASHEXISTS` serve the shards of a sharded filter, with
//! pre-computed hashes (`shards.rs`, docs/sharding.md).
//!
//! Operations: the defaults of new filters are configurations too (`bloomery.error-rate`,
//! `bloomery.initial-size`, `bloomery.expansion`; `CONFIG SET`/`GET`, redis.conf, or load
//! arguments: [`limits`]); `INFO bloomery` counts the keys of the module's types, the bytes
//! and items of their filters, and shows the configurations ([`accounting`]); and where the
//! server has ACL categories for module commands, every command is in `@bloom` and in the
//! categories of [`ACL_CATEGORIES`] (Redis 7.4+; 7.2 without `@bloom`; 7.0 none: `acl.rs`).
//!
//! Adding a command: a line in the command list below, a line in [`ACL_CATEGORIES`] and
//! in [`KEY_SPECS`], and, for a write command, [`accounting::after_write`] on its key before it returns.

// A library writes nothing to standard output or error (its callers own them), and
// `println!`/`eprintln!` panic when the stream is full or closed.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

/// The module's log: every line goes through here (the redis-module crate's own logging
/// functions are refused by clippy.toml's `disallowed-methods` elsewhere). The crate hands
/// Redis a line as a printf format, from a C string, so each line is escaped first
/// ([`line`]): a `%` in a value a client sent (`CONFIG SET bloomery.error-rate %s%s...`)
/// made the server read arguments that are not there and crash, and a NUL made the crate
/// panic, which aborts the server.
#[allow(clippy::disallowed_methods)]
pub(crate) mod log {
    use redis_module::Context;
    use redis_module::logging::RedisLogLevel;
    use redis_module::raw::RedisModuleIO;

    /// `text` as a printf format that prints it: `%` doubled, a NUL written `\0`.
    fn line(text: &str) -> String {
        text.replace('%', "%%").replace('\0', "\\0")
    }

    /// A warning, through `ctx` (the line names the module).
    pub(crate) fn warning(ctx: &Context, text: &str) {
        ctx.log(RedisLogLevel::Warning, &line(text));
    }

    /// A notice, through `ctx`.
    pub(crate) fn notice(ctx: &Context, text: &str) {
        ctx.log(RedisLogLevel::Notice, &line(text));
    }

    /// A warning where no context is at hand (a configuration callback, `INFO`).
    pub(crate) fn warning_without_context(text: &str) {
        redis_module::logging::log_warning(line(text));
    }

    /// A warning about a value being read from `rdb` (`RedisModule_LogIOError`).
    pub(crate) fn io_error(rdb: *mut RedisModuleIO, text: &str) {
        redis_module::logging::log_io_error(rdb, RedisLogLevel::Warning, &line(text));
    }
}

pub mod accounting;
mod acl;
mod aging;
mod alloc;
mod commands;
mod counting;
mod datatype;
mod direct;
pub mod limits;
mod loading;
mod mbbloom;
mod shards;

use accounting::info;
use datatype::BLOOM_TYPE;
use mbbloom::MBBLOOM_TYPE;
use redis_module::{Context, InfoContext, RedisResult, RedisString, Status, redis_module};

/// Each command's ACL categories besides `@bloom` (`acl.rs`): `read` or `write`, and `fast`
/// (constant work per item, as Redis counts its own variadic commands) or `slow` (work that
/// grows with the filter: the allocation of a new filter, a dump piece of up to 16 MiB, the
/// pass over every counter of `CBF.CARD` and `CBF.INFO`; `BF.CARD` and `BF.INFO` answer
/// from counts kept for the filters `BF.RESERVE` and `BF.ADD` make).
/// Every command of the list below has a line here (tests/test_operations.py checks).
pub const ACL_CATEGORIES: &[(&str, &str)] = &[
    ("bf.reserve", "write slow"),
    ("bf.add", "write fast"),
    ("bf.madd", "write fast"),
    ("bf.insert", "write fast"),
    ("bf.exists", "read fast"),
    ("bf.mexists", "read fast"),
    ("bf.card", "read fast"),
    ("bf.info", "read fast"),
    ("bf.debug", "read fast"),
    ("bf.scandump", "read slow"),
    ("bf.loadchunk", "write slow"),
    ("bf.hashreserve", "write slow"),
    ("bf.hashadd", "write fast"),
    ("bf.hashexists", "read fast"),
    ("cbf.reserve", "write slow"),
    ("cbf.add", "write fast"),
    ("cbf.madd", "write fast"),
    ("cbf.del", "write fast"),
    ("cbf.exists", "read fast"),
    ("cbf.mexists", "read fast"),
    ("cbf.count", "read fast"),
    ("cbf.card", "read slow"),
    ("cbf.info", "read slow"),
];

/// Each command's key spec (`acl::register_key_specs`): `RO` or `RW`, and what the
/// command does with the key's data, as Redis flags its own commands (`ACCESS`: returns or
/// uses it, as `SISMEMBER`; `INSERT`: adds to it, as `SADD`; `UPDATE`; `DELETE`), which
/// per-key ACL permissions are checked against (`%R~` for `ACCESS`, `%W~` for the writes;
/// `RO` alone, metadata such as `BF.CARD`, needs neither). Every command has a line.
pub const KEY_SPECS: &[(&str, &str)] = &[
    ("bf.reserve", "RW INSERT"),
    ("bf.add", "RW INSERT"),
    ("bf.madd", "RW INSERT"),
    ("bf.insert", "RW INSERT"),
    ("bf.exists", "RO ACCESS"),
    ("bf.mexists", "RO ACCESS"),
    ("bf.card", "RO"),
    ("bf.info", "RO"),
    ("bf.debug", "RO"),
    ("bf.scandump", "RO ACCESS"),
    ("bf.loadchunk", "RW UPDATE"),
    ("bf.hashreserve", "RW INSERT"),
    ("bf.hashadd", "RW INSERT"),
    ("bf.hashexists", "RO ACCESS"),
    ("cbf.reserve", "RW INSERT"),
    ("cbf.add", "RW INSERT"),
    ("cbf.madd", "RW INSERT"),
    ("cbf.del", "RW DELETE"),
    ("cbf.exists", "RO ACCESS"),
    ("cbf.mexists", "RO ACCESS"),
    ("cbf.count", "RO ACCESS"),
    ("cbf.card", "RO"),
    ("cbf.info", "RO"),
];

/// The module's OnLoad, after its types and the commands of the list below: configuration
/// and load arguments, the commands registered directly ([`direct`]: `BF.ADD` and
/// `BF.EXISTS`), then every command's ACL categories.
fn init(ctx: &Context, args: &[RedisString]) -> Status {
    // The server's environment asked for a kernel this CPU does not have: said once, in
    // the log (the fastest one runs; it ran without a word).
    if let Some(note) = bloomery::blocked::Kernel::misnamed_note() {
        log::warning(ctx, &format!("bloomery: {note}"));
    }
    if commands::configure(ctx, args) == Status::Err
        || direct::register(ctx) == Status::Err
        || acl::register_key_specs(ctx, KEY_SPECS) == Status::Err
    {
        return Status::Err;
    }
    acl::register(ctx, ACL_CATEGORIES)
}

/// Redis's entry points, which the crate's macro writes, in a module of their own: the
/// macro logs its own fixed lines (a failed registration) through the context, which
/// clippy.toml refuses everywhere else.
#[allow(clippy::disallowed_methods)]
mod entry {
    use super::*;

    redis_module! {
        name: "bloomery",
        version: 1,
        allocator: (alloc::AlignedRedisAlloc, alloc::AlignedRedisAlloc),
        data_types: [
            BLOOM_TYPE,
            MBBLOOM_TYPE,
        ],
        init: init,
        info: info,
        commands: [
            ["bf.reserve", commands::reserve, "write deny-oom", 1, 1, 1, ""],
            ["bf.madd", commands::madd, "write deny-oom", 1, 1, 1, ""],
            ["bf.insert", commands::insert, "write deny-oom", 1, 1, 1, ""],
            ["bf.mexists", commands::mexists, "readonly", 1, 1, 1, ""],
            ["bf.card", commands::card, "readonly", 1, 1, 1, ""],
            ["bf.info", commands::info, "readonly", 1, 1, 1, ""],
            ["bf.debug", commands::debug, "readonly", 1, 1, 1, ""],
            ["bf.scandump", commands::scandump, "readonly", 1, 1, 1, ""],
            ["bf.loadchunk", commands::loadchunk, "write deny-oom", 1, 1, 1, ""],
            ["bf.hashreserve", shards::hashreserve, "write deny-oom", 1, 1, 1, ""],
            ["bf.hashadd", shards::hashadd, "write deny-oom", 1, 1, 1, ""],
            ["bf.hashexists", shards::hashexists, "readonly", 1, 1, 1, ""],
            // Counting filters (counting.rs); aging filters are BF.* keys (aging.rs).
            ["cbf.reserve", counting::reserve, "write deny-oom", 1, 1, 1, ""],
            ["cbf.add", counting::add, "write deny-oom", 1, 1, 1, ""],
            ["cbf.madd", counting::madd, "write deny-oom", 1, 1, 1, ""],
            ["cbf.del", counting::del, "write", 1, 1, 1, ""],
            ["cbf.exists", counting::exists, "readonly", 1, 1, 1, ""],
            ["cbf.mexists", counting::mexists, "readonly", 1, 1, 1, ""],
            ["cbf.count", counting::count, "readonly", 1, 1, 1, ""],
            ["cbf.card", counting::card, "readonly", 1, 1, 1, ""],
            ["cbf.info", counting::info, "readonly", 1, 1, 1, ""],
        ],
    }
}
