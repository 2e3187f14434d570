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
//! the keyspace ([`loading`]). RedisBloom's own type, `MBbloom--`, is registered too, so
//! RedisBloom's data loads and is served as RedisBloom served it ([`mbbloom`]).
//! `BF.HASHADD` and `BF.HASHEXISTS` serve the shards of a sharded filter, with
//! pre-computed hashes (`shards.rs`, docs/sharding.md).

mod aging;
mod commands;
mod counting;
mod datatype;
mod direct;
pub mod limits;
mod loading;
mod mbbloom;
mod shards;

use commands::configure;
use datatype::BLOOM_TYPE;
use mbbloom::MBBLOOM_TYPE;
use redis_module::redis_module;
use redis_module::{Context, RedisString, Status};

/// The module's `OnLoad` work: configuration, then the commands registered directly
/// ([`direct`]: `BF.ADD` and `BF.EXISTS`; the rest are in the list below).
fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if configure(ctx, args) == Status::Err {
        return Status::Err;
    }
    direct::register(ctx)
}

redis_module! {
    name: "bloomery",
    version: 1,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [
        BLOOM_TYPE,
        MBBLOOM_TYPE,
    ],
    init: init,
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
