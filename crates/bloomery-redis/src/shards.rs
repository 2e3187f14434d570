//! The shards of a sharded filter (docs/sharding.md): blocked filters that clients fill
//! and query with pre-computed 64-bit hashes, 8 bytes an item instead of the item.
//!
//! - `BF.HASHRESERVE key BLOCKS SEED`: creates the shard, an empty blocked filter of
//!   exactly `BLOCKS` 512-bit blocks and seed `SEED`, if the key is missing (replies 1),
//!   or checks the one there: 0 when it is empty, 2 when it holds items. A client creates
//!   every shard of a filter so before it writes the filter's plan; a shard with items
//!   where no plan is belongs to a filter that lost its plan, which a new one must not
//!   take over (its lost shards would be made anew, empty).
//! - `BF.HASHADD key BLOCKS SEED HASHES`: adds each hash to the shard at `key`. Replies
//!   one byte per hash, as a bulk string: 1 when the hash was new (some bit changed: what
//!   `dedup` prints), 0 when it was (probably) there already, including a hash repeated
//!   earlier in the same command.
//! - `BF.HASHEXISTS key BLOCKS SEED HASHES`: one byte per hash, 1 when probably present.
//!
//! A missing shard is an error for both (`NOSHARD`): the shards of a filter exist from its
//! creation, so a missing one was deleted, evicted, flushed, or lost with a restart
//! without persistence, and its items with it. Answering 0 for its hashes would be false
//! negatives; making it anew in `BF.HASHADD` would hide the loss (the add succeeds, the
//! earlier items stay lost).
//!
//! `HASHES` is one bulk string of 8-byte little-endian hashes. Both commands name the
//! geometry, and a key holding other geometry is an error, never answers computed with the
//! wrong block count (which would be false negatives). A key of another type is WRONGTYPE;
//! a bloomery filter of another variant (a RedisBloom-layout `MBbloom--` key too) is
//! refused as not a blocked shard; a new shard over
//! `bloomery.max-filter-memory` is refused before anything is allocated.
//!
//! `BF.HASHADD` is replicated verbatim every time it succeeds, even when no bit changed: a
//! client's `WAIT` waits for its own last replicated write, so a command that found its
//! items already set (by another client whose write is not yet on the replicas) must
//! still move that client's replication offset past that write.

use bloomery::BlockedBloomFilter;
use bloomery::any::DynFilter;
use bloomery::sizing::MAX_NUM_BLOCKS;
use redis_module::key::{RedisKey, RedisKeyWritable};
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::datatype::{BLOOM_TYPE, Stored};
use crate::limits::cap_for_command;
use crate::mbbloom::MBBLOOM_TYPE;

const WRONG_TYPE: RedisError =
    RedisError::Str("WRONGTYPE Operation against a key holding the wrong kind of value");

/// The geometry a command names.
struct Geometry {
    blocks: u64,
    seed: u64,
}

fn parse_u64(arg: &RedisString) -> Option<u64> {
    let text = arg.try_as_str().ok()?;
    // Decimal digits only: `str::parse` would also take a leading '+'.
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl Geometry {
    fn parse(blocks: &RedisString, seed: &RedisString) -> Result<Self, RedisError> {
        let blocks = parse_u64(blocks)
            .filter(|blocks| (1..=MAX_NUM_BLOCKS).contains(blocks))
            .ok_or(RedisError::Str("ERR BLOCKS must be an integer in 1..=4294967296"))?;
        let seed = parse_u64(seed).ok_or(RedisError::Str("ERR SEED must be an integer in 0..2^64"))?;
        Ok(Self { blocks, seed })
    }

    /// The shard in `filter`, checked against this geometry.
    fn check<'a>(&self, filter: &'a dyn DynFilter) -> Result<&'a BlockedBloomFilter, RedisError> {
        let shard = filter
            .as_any()
            .downcast_ref::<BlockedBloomFilter>()
            .ok_or_else(|| {
                RedisError::String(format!(
                    "ERR the key holds {} {} filter, not a blocked shard",
                    filter.variant().article(),
                    filter.variant().name()
                ))
            })?;
        self.matches(shard)?;
        Ok(shard)
    }

    fn matches(&self, shard: &BlockedBloomFilter) -> Result<(), RedisError> {
        if shard.num_blocks() != self.blocks || shard.seed() != self.seed {
            return Err(RedisError::String(format!(
                "ERR the shard has {} blocks and seed {}; the command names {} blocks and seed {} (another filter's plan?)",
                shard.num_blocks(),
                shard.seed(),
                self.blocks,
                self.seed
            )));
        }
        Ok(())
    }
}

/// The hashes of a `HASHES` argument.
fn parse_hashes(arg: &RedisString) -> Result<Vec<u64>, RedisError> {
    let bytes = arg.as_slice();
    if bytes.is_empty() || !bytes.len().is_multiple_of(8) {
        return Err(RedisError::Str(
            "ERR HASHES must be a non-empty string of 8-byte little-endian hashes",
        ));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|chunk| u64::from_le_bytes(chunk.try_into().expect("8 bytes")))
        .collect())
}

/// The error for a missing shard, naming its key (a client's pipeline error names only
/// the command's place in it).
fn no_shard(key: &RedisString) -> RedisError {
    RedisError::String(format!(
        "NOSHARD the shard {} is missing: its filter lost it (deleted, evicted, flushed, or lost with a restart without persistence) and the items in it, or it was not made by BF.HASHRESERVE",
        String::from_utf8_lossy(key.as_slice())
    ))
}

fn still_loading() -> RedisError {
    RedisError::Str("ERR the key holds a filter still being loaded by BF.LOADCHUNK")
}

fn flags_reply(flags: &[bool]) -> RedisValue {
    RedisValue::StringBuffer(flags.iter().map(|&flag| u8::from(flag)).collect())
}

/// The refusal of `BF.ADD`, `BF.MADD` and `BF.INSERT` on a shard.
const ITEMS_INTO_SHARD: &str = "ERR the key holds a blocked filter made from a block count, not sized for items: a shard of a sharded filter (made by BF.HASHRESERVE), which takes only the hashes its filter's client sends with BF.HASHADD (add items to the sharded filter through that client: bloomery add --redis or --redis-cluster ... NAME), or a blocked file written before 2026-11-23, which records no sizing (add to that file with the CLI, or load one bloomery create made since)";

/// Refuses `BF.ADD`/`BF.MADD`/`BF.INSERT` on a shard: a blocked filter made from a block
/// count (`BF.HASHRESERVE`, or a copy of such a key), not from items and a rate. Its
/// client puts each item in one shard chosen by the item's hash (docs/sharding.md); an
/// item added here by name lands in this shard whatever its hash, where the filter's
/// client never looks for it, and only fills the shard (a higher false-positive rate, and
/// `BF.HASHRESERVE` then answers 2, "holds items", for a shard no `BF.HASHADD` reached).
/// A blocked filter sized for items (a file `bloomery create` made, loaded by
/// `BF.LOADCHUNK`) takes items as any filter. Only clients are refused: a write the server
/// replays or its primary sends goes through (see `commands::add_items`).
pub fn refuse_item_writes(filter: &dyn DynFilter) -> Result<(), RedisError> {
    match filter.as_any().downcast_ref::<BlockedBloomFilter>() {
        Some(blocked) if blocked.sized_for().is_none() => Err(RedisError::Str(ITEMS_INTO_SHARD)),
        _ => Ok(()),
    }
}

/// `BF.HASHRESERVE key BLOCKS SEED`
pub fn hashreserve(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, blocks, seed] = &args[..] else {
        return Err(RedisError::WrongArity);
    };
    let geometry = Geometry::parse(blocks, seed)?;
    let redis_key: RedisKeyWritable = ctx.open_key_writable(key);
    match redis_key
        .get_value::<Stored>(&BLOOM_TYPE)
        .or_else(|_| redis_key.get_value::<Stored>(&MBBLOOM_TYPE))
        .map_err(|_| WRONG_TYPE)?
    {
        Some(Stored::Filter(filter)) => {
            let shard = geometry.check(filter.as_ref())?;
            return Ok(RedisValue::Integer(if shard.bit_count() == 0 { 0 } else { 2 }));
        }
        Some(Stored::Loading(_)) => return Err(still_loading()),
        None => {}
    }
    let bytes = geometry.blocks * 64;
    if let Some(cap) = cap_for_command(&ctx.get_flags())
        && bytes > cap
    {
        // With no limit configured, the cap is the machine's memory: named as such (it
        // was called the module's limit per key, which was 0).
        return Err(RedisError::String(format!(
            "ERR a shard of {bytes} bytes is {}: plan smaller shards (the CLI's --shard-bytes)",
            crate::loading::over_cap(cap)
        )));
    }
    let shard = BlockedBloomFilter::with_num_blocks(geometry.blocks, geometry.seed)
        .map_err(|error| RedisError::String(format!("ERR {error}")))?;
    redis_key.set_value(&BLOOM_TYPE, Stored::Filter(Box::new(shard)))?;
    crate::accounting::after_write(&redis_key);
    crate::commands::notify(ctx, c"bf.reserve", key);
    ctx.replicate_verbatim();
    Ok(RedisValue::Integer(1))
}

/// `BF.HASHADD key BLOCKS SEED HASHES`
pub fn hashadd(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, blocks, seed, hashes] = &args[..] else {
        return Err(RedisError::WrongArity);
    };
    let geometry = Geometry::parse(blocks, seed)?;
    let hashes = parse_hashes(hashes)?;
    let redis_key: RedisKeyWritable = ctx.open_key_writable(key);
    let shard = match redis_key
        .get_value::<Stored>(&BLOOM_TYPE)
        .or_else(|_| redis_key.get_value::<Stored>(&MBBLOOM_TYPE))
        .map_err(|_| WRONG_TYPE)?
    {
        Some(Stored::Filter(filter)) => {
            geometry.check(filter.as_ref())?;
            filter
                .as_any_mut()
                .downcast_mut::<BlockedBloomFilter>()
                .ok_or(RedisError::Str("ERR not a blocked shard"))?
        }
        Some(Stored::Loading(_)) => return Err(still_loading()),
        None => return Err(no_shard(key)),
    };
    // Look every hash up with the prefetching batch call, then insert the absent ones in
    // order (their blocks are in cache now): a hash is new exactly when inserting it, in
    // the command's order, changes a bit, so a repeat later in the command answers 0.
    let mut present = vec![false; hashes.len()];
    shard.contains_hash_batch(&hashes, &mut present);
    let added: Vec<bool> = hashes
        .iter()
        .zip(&present)
        .map(|(&hash, &present)| !present && shard.insert_hash(hash))
        .collect();
    crate::accounting::after_write(&redis_key);
    crate::commands::notify(ctx, c"bf.add", key);
    ctx.replicate_verbatim();
    Ok(flags_reply(&added))
}

/// `BF.HASHEXISTS key BLOCKS SEED HASHES`
pub fn hashexists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, blocks, seed, hashes] = &args[..] else {
        return Err(RedisError::WrongArity);
    };
    let geometry = Geometry::parse(blocks, seed)?;
    let hashes = parse_hashes(hashes)?;
    let redis_key: RedisKey = ctx.open_key(key);
    let mut present = vec![false; hashes.len()];
    match redis_key
        .get_value::<Stored>(&BLOOM_TYPE)
        .or_else(|_| redis_key.get_value::<Stored>(&MBBLOOM_TYPE))
        .map_err(|_| WRONG_TYPE)?
    {
        None => return Err(no_shard(key)),
        Some(Stored::Filter(filter)) => geometry
            .check(filter.as_ref())?
            .contains_hash_batch(&hashes, &mut present),
        Some(Stored::Loading(_)) => return Err(still_loading()),
    }
    Ok(flags_reply(&present))
}
