//! RedisBloom's own data type, `MBbloom--`, so that an RDB file (or a `RESTORE` payload, or
//! a full sync from a primary) written by RedisBloom loads into a server running bloomery,
//! and what this server writes for those keys loads back into RedisBloom: its values are
//! [`RedisBloomFilter`]s (the library's bit-for-bit RedisBloom filter), saved in
//! RedisBloom's RDB encoding (version 4; versions 0 to 4 are read) and rewritten into the
//! AOF as RedisBloom's `BF.LOADCHUNK` pieces. The `BF.*` commands serve these keys like
//! bloomery's own, through the same [`Stored`] value.
//!
//! A server cannot load RedisBloom and bloomery together: both name this type.

use std::borrow::Cow;
use std::os::raw::{c_int, c_void};

use bloomery::any::{DynFilter, GrowthLimit};
use bloomery::redisbloom::{RdbLink, RedisBloomFilter};
use redis_module::key::RedisKeyWritable;
use redis_module::native_types::RedisType;
use redis_module::{RedisError, RedisValue, raw};

use crate::datatype::{Stored, load_flags};
use crate::limits::cap_for_rdb_load;

/// RedisBloom's encoding versions: 2 added the options word, 4 the growth (3 was used by
/// cuckoo filters only); 0 stored no bit count.
const ENCODING_VERSION: c_int = 4;
const OPTIONS_SINCE: c_int = 2;
const GROWTH_SINCE: c_int = 4;

/// RedisBloom's replies to a piece that lies outside its filter's links.
pub const INVALID_OFFSET: &str = "ERR invalid offset - no link found";
/// RedisBloom's reply to a piece that runs past its link.
pub const TOO_BIG: &str = "ERR invalid chunk - Too big for current filter";

/// RedisBloom's largest `BF.SCANDUMP` piece.
pub const REDISBLOOM_CHUNK_BYTES: usize = 16 << 20;

/// RedisBloom's type, as RedisBloom names it.
pub static MBBLOOM_TYPE: RedisType = RedisType::new(
    "MBbloom--",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        free: Some(free),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: Some(free_effort),
        unlink: None,
        copy: Some(copy),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: None,
    },
);

/// The RedisBloom filter a value of this type holds.
///
/// # Safety
/// `value` must be a value of this type (a boxed [`Stored::Filter`] holding a
/// [`RedisBloomFilter`], made by this module) and still held by Redis.
unsafe fn filter<'a>(value: *const c_void) -> &'a RedisBloomFilter {
    // SAFETY: as the caller promises.
    let stored = unsafe { &*value.cast::<Stored>() };
    match stored {
        Stored::Filter(filter) => filter
            .as_any()
            .downcast_ref::<RedisBloomFilter>()
            .expect("MBbloom-- values hold RedisBloom filters"),
        Stored::Loading(_) => unreachable!("MBbloom-- values are never loads in progress"),
    }
}

/// A value of this type for `filter`, counted in `INFO bloomery` ([`crate::accounting`]).
pub fn into_value(filter: RedisBloomFilter) -> *mut c_void {
    let stored = Stored::Filter(Box::new(filter) as Box<dyn DynFilter>);
    let figures = crate::accounting::figures_of(&stored, true);
    let pointer = Box::into_raw(Box::new(stored)).cast::<c_void>();
    crate::accounting::report(pointer, figures);
    pointer
}

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // Before the drop: once freed, the address may hold a new value.
        crate::accounting::forget(value);
        // SAFETY: every value of this type was made by `into_value` or `set_value`.
        drop(unsafe { Box::from_raw(value.cast::<Stored>()) });
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: Redis passes a value of this type.
    unsafe { filter(value) }.redisbloom_size() as usize
}

unsafe extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: Redis passes a value of this type.
    let filter = unsafe { filter(value) };
    (filter.bitmap_bytes() / (64 << 10) + filter.links().len() as u64) as usize
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis passes a value of this type.
    let filter = unsafe { filter(value) };
    raw::save_unsigned(rdb, filter.len());
    raw::save_unsigned(rdb, filter.links().len() as u64);
    raw::save_unsigned(rdb, u64::from(filter.options()));
    raw::save_unsigned(rdb, u64::from(filter.growth()));
    for link in filter.rdb_links() {
        raw::save_unsigned(rdb, link.entries);
        raw::save_double(rdb, link.error);
        raw::save_unsigned(rdb, u64::from(link.hashes));
        raw::save_double(rdb, link.bpe);
        raw::save_unsigned(rdb, link.bits);
        raw::save_unsigned(rdb, u64::from(link.n2));
        raw::save_slice(rdb, &link.bitmap);
        raw::save_unsigned(rdb, link.size);
    }
}

/// Reads RedisBloom's encoding `version` (0 to 4). Every read is checked (the module
/// handles IO errors), the bits are held to the memory cap as they arrive (a client's
/// `RESTORE`), and the filter is checked whole before it becomes a value.
///
/// A value this refuses is still read to its end (its links' bits read and dropped), so
/// that Redis, which then gives up the load (an RDB file, a full sync) or the `RESTORE`,
/// finds the stream where the value ends and reports the value as one it cannot load,
/// rather than as module data without its end marker. Only a read error stops early.
fn load(rdb: *mut raw::RedisModuleIO, version: c_int) -> Option<RedisBloomFilter> {
    if !(0..=ENCODING_VERSION).contains(&version) {
        return None;
    }
    let flags = load_flags(rdb);
    let replay = crate::limits::is_rdb_replay(&flags);
    let cap = cap_for_rdb_load(flags);
    let size = raw::load_unsigned(rdb).ok()?;
    let count = raw::load_unsigned(rdb).ok()?;
    let options = if version >= OPTIONS_SINCE {
        raw::load_unsigned(rdb).ok()?
    } else {
        0
    };
    let growth = if version >= GROWTH_SINCE {
        raw::load_unsigned(rdb).ok()?
    } else {
        2
    };
    // RedisBloom refuses no link count but 0 (and cannot grow a chain past
    // `REDISBLOOM_MOST_LINKS`); more than `MAX_LINKS` is read through and refused.
    let mut refused = count == 0
        || count > bloomery::redisbloom::MAX_LINKS as u64
        || u32::try_from(options).is_err()
        || u32::try_from(growth).is_err();
    let mut links = Vec::with_capacity(if refused { 0 } else { count as usize });
    let mut held = 0u64;
    for _ in 0..count {
        let entries = raw::load_unsigned(rdb).ok()?;
        let error = raw::load_double(rdb).ok()?;
        let hashes = raw::load_unsigned(rdb).ok()?;
        let bpe = raw::load_double(rdb).ok()?;
        // Version 0 stored no bit count: RedisBloom takes entries * bpe (its positions were
        // taken modulo that), and the link check refuses it unless the buffer holds exactly
        // those bits. Reading the buffer's bit count instead lost every item of such a link.
        let (bits, n2) = if version == 0 {
            ((entries as f64 * bpe) as u64, 0)
        } else {
            (raw::load_unsigned(rdb).ok()?, raw::load_unsigned(rdb).ok()?)
        };
        let buffer = raw::load_string_buffer(rdb).ok()?;
        let size = raw::load_unsigned(rdb).ok()?;
        held = held.saturating_add(buffer.as_ref().len() as u64);
        refused |= cap.is_some_and(|cap| held > cap);
        let (Ok(hashes), Ok(n2)) = (u32::try_from(hashes), u8::try_from(n2)) else {
            refused = true;
            continue;
        };
        // The link's bits, copied out of Redis's buffer: a copy the system refuses (memory
        // that runs out under a RESTORE) refuses the value, as one past the cap, where
        // `to_vec` stopped the server ("memory allocation of 34461736 bytes failed").
        // Not tried for a value already refused: its links are only read through.
        let mut bitmap = Vec::new();
        refused = refused || bitmap.try_reserve_exact(buffer.as_ref().len()).is_err();
        if refused {
            // Nothing more is kept: the rest is read only to reach the value's end.
            links = Vec::new();
            continue;
        }
        bitmap.extend_from_slice(buffer.as_ref());
        links.push(RdbLink {
            entries,
            error,
            hashes,
            bpe,
            bits,
            n2,
            bitmap: Cow::Owned(bitmap),
            size,
        });
    }
    if refused {
        return None;
    }
    // Loading this server's own data or a full sync, or a replica's RESTORE: what the
    // RedisBloom primary (or this server) held, with RedisBloom's checks only. A client's
    // RESTORE keeps bloomery's bound on the hash count, with the cap off too.
    if replay {
        RedisBloomFilter::from_rdb_parts_replayed(size, options as u32, growth as u32, links).ok()
    } else {
        RedisBloomFilter::from_rdb_parts(size, options as u32, growth as u32, links).ok()
    }
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encoding_version: c_int) -> *mut c_void {
    match load(rdb, encoding_version) {
        Some(filter) => into_value(filter),
        None => {
            // Its loader keeps no reason: the ones it has.
            crate::log::io_error(
                rdb,
                "a RedisBloom-layout value was refused (cut short or damaged, over the module's limit per key, bloomery.max-filter-memory, or its memory refused by the system)",
            );
            std::ptr::null_mut()
        }
    }
}

/// RedisBloom's `BF.SCANDUMP` pieces of the filter: the header as piece 1, then the bits.
pub fn scandump_pieces(filter: &RedisBloomFilter) -> impl Iterator<Item = (u64, Cow<'_, [u8]>)> + '_ {
    let header = std::iter::once((1u64, Cow::Owned(filter.scandump_header())));
    let mut iterator = 1;
    let bits = std::iter::from_fn(move || {
        let (next, data) = filter.scandump_chunk(iterator, REDISBLOOM_CHUNK_BYTES)?;
        iterator = next;
        Some((next, Cow::Borrowed(data)))
    });
    header.chain(bits)
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: Redis passes a value of this type.
    let filter = unsafe { filter(value) };
    for (iterator, piece) in scandump_pieces(filter) {
        crate::datatype::emit_loadchunk(aof, key, iterator, &piece);
    }
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: Redis passes a value of this type.
    let filter = unsafe { filter(value) };
    for (_, piece) in scandump_pieces(filter) {
        crate::datatype::digest_add(md, &piece);
    }
    // SAFETY: `md` is valid for the duration of the digest callback.
    unsafe {
        raw::RedisModule_DigestEndSequence.expect("provided by redis-server")(md);
    }
}

unsafe extern "C" fn copy(
    _from_key: *mut raw::RedisModuleString,
    _to_key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: Redis passes a value of this type.
    match bloomery::TryClone::try_clone(unsafe { filter(value) }) {
        Ok(copy) => into_value(copy),
        // Redis answers "module key failed to copy" (as `copy` in datatype.rs).
        Err(_) => std::ptr::null_mut(),
    }
}

/// `BF.SCANDUMP key iterator` on a RedisBloom key, as RedisBloom answers it: iterator 0
/// gives (1, the header), then each piece of bits with the iterator that follows it, and
/// (0, "") at the end.
pub fn scandump_reply(filter: &RedisBloomFilter, iterator: u64) -> RedisValue {
    let (next, data) = if iterator == 0 {
        (1, filter.scandump_header())
    } else {
        filter
            .scandump_chunk(iterator, REDISBLOOM_CHUNK_BYTES)
            .map_or((0, Vec::new()), |(next, data)| (next, data.to_vec()))
    };
    RedisValue::Array(vec![
        RedisValue::Integer(next as i64),
        RedisValue::StringBuffer(data),
    ])
}

/// `BF.LOADCHUNK key iterator data` when it is RedisBloom's: onto a RedisBloom key (any
/// piece, where RedisBloom puts it), or piece 1 onto a missing key with a RedisBloom
/// header (a bloomery dump starts with its magic bytes instead). `None` leaves the call
/// to bloomery's own loading; `Some(Ok)` means the piece is in place (the caller notifies
/// and replicates: the command as given, or with the data `Some(Ok(Some(bytes)))` names),
/// `Some(Err)` is the error to reply.
///
/// A piece is ORed into the link's bits (items added between pieces are kept; RedisBloom
/// copies it over them); a client's is replicated as the bytes that gives. A replayed one
/// (`replaying`: from this server's primary or AOF) first grows the chain as RedisBloom grew
/// it where the piece lies past its end (`RedisBloomFilter::load_scandump_chunk_growing`):
/// a RedisBloom primary that copied pieces over items counts more later adds as new and
/// grows sooner, and its piece for the new link was refused here, losing its items.
pub fn loadchunk(
    redis_key: &RedisKeyWritable,
    iterator: i64,
    data: &[u8],
    cap: Option<u64>,
    replaying: bool,
) -> Option<Result<Option<Vec<u8>>, RedisError>> {
    // RedisBloom's own replies for its keys' pieces (clients and its flow tests match them).
    let bad = |error: bloomery::Error| {
        let text = error.to_string();
        if text.contains("invalid offset - no link found") {
            RedisError::Str(INVALID_OFFSET)
        } else if text.contains("invalid chunk - Too big for current filter") {
            RedisError::Str(TOO_BIG)
        } else if matches!(error, bloomery::Error::OutOfMemory { .. }) {
            // Not the data's fault: the system would not give the memory.
            RedisError::String(format!("ERR {error}"))
        } else {
            RedisError::String(format!("ERR received bad data: {error}"))
        }
    };
    if let Ok(Some(Stored::Filter(filter))) = redis_key.get_value::<Stored>(&MBBLOOM_TYPE) {
        let filter = filter
            .as_any_mut()
            .downcast_mut::<RedisBloomFilter>()
            .expect("MBbloom-- values hold RedisBloom filters");
        // RedisBloom: an iterator of 0 or less is bad data.
        let Ok(iterator) = u64::try_from(iterator) else {
            return Some(Err(RedisError::String(format!(
                "ERR received bad data: iterator {iterator} is not a piece's"
            ))));
        };
        if replaying {
            let limit = GrowthLimit::Total(crate::limits::machine_memory());
            return Some(
                filter
                    .load_scandump_chunk_growing(iterator, data, limit)
                    .map(|()| None)
                    .map_err(bad),
            );
        }
        return Some(
            filter
                .load_scandump_chunk(iterator, data)
                .map(|()| {
                    filter
                        .scandump_piece_bytes(iterator, data.len())
                        .map(<[u8]>::to_vec)
                })
                .map_err(bad),
        );
    }
    // Bloomery's own piece 1 starts with its header. A RedisBloom header starts with the
    // chain's item count (a u64, little-endian), which a RESTORE or an RDB file may set to
    // the 8 bytes of the magic: taken for bloomery's, its pieces were refused, so a key
    // RESTORE accepted was dropped by the replay of an AOF rewrite. Only a whole header
    // of ours is ours.
    let ours = data.starts_with(&bloomery::format::native::MAGIC)
        && bloomery::format::native::Header::parse(data).is_ok();
    if iterator != 1 || ours || !redis_key.is_empty() {
        return None;
    }
    let bytes = RedisBloomFilter::scandump_header_bytes(data).ok()?;
    if let Some(cap) = cap.filter(|&cap| bytes > cap) {
        return Some(Err(RedisError::String(crate::loading::over_cap_message(
            bytes, cap,
        ))));
    }
    // A replay takes every header its RedisBloom primary took: refused here, the
    // key was missing on a replica, and the items its pieces and later adds brought were
    // answered absent (10 of 10 for a header whose link's error rate was edited to 0.5).
    let header = if replaying {
        RedisBloomFilter::from_scandump_header_replayed
    } else {
        RedisBloomFilter::from_scandump_header
    };
    Some(header(data).map_err(bad).and_then(|filter| {
        redis_key.set_value(&MBBLOOM_TYPE, Stored::Filter(Box::new(filter)))?;
        Ok(None)
    }))
}
