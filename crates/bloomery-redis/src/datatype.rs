//! The module's data type: per key, a filter held through the library's one interface
//! ([`DynFilter`]: the commands create scalable filters, and `BF.LOADCHUNK` or an RDB file
//! may bring any variant) or a `BF.LOADCHUNK` load in progress ([`Load`]), saved to RDB as
//! the library's native envelope (checksummed, so a damaged RDB or `RESTORE` payload is
//! refused rather than half-loaded) or as the pieces received so far.
//! Saving, AOF rewrite, digests and `BF.SCANDUMP` stream the envelope from the filter's own
//! memory ([`Envelope`]) in pieces of at most [`CHUNK_BYTES`], never a whole-filter copy.
//!
//! Loading never trusts a length: the module declares `REDISMODULE_OPTIONS_HANDLE_IO_ERRORS`
//! (see `lib.rs`), so a short read or a wrong type marker in a crafted `RESTORE` payload
//! makes Redis's load calls report an error (checked after every call, by
//! `redis_module::raw::load_*`) instead of stopping the server; every announced length is
//! checked against the cap before anything is reserved, and a value that does not load
//! whole is refused (`NULL`: `RESTORE` answers an error).

use std::os::raw::{c_int, c_void};

use bloomery::any::DynFilter;
use bloomery::format::native::Envelope;
use redis_module::native_types::RedisType;
use redis_module::{ContextFlags, raw};

use crate::limits::{cap_for_rdb_load, envelope_limit};
use crate::loading::{Load, open_within};

/// The RDB encoding version of [`BLOOM_TYPE`]: 2 is a kind (0 a filter, 1 a load in
/// progress), then encoding 1's layout; 1 (still read) is the envelope's length, then the
/// envelope in strings of at most [`CHUNK_BYTES`]; 0 (still read) was the envelope as one
/// string.
const ENCODING_VERSION: c_int = 2;

/// The kinds of value encoding 2 writes.
const KIND_FILTER: u64 = 0;
const KIND_LOADING: u64 = 1;

/// The module's type; the name is exactly 9 characters, as Redis requires.
pub static BLOOM_TYPE: RedisType = RedisType::new(
    "bloomery_",
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

/// What a key of this type holds.
pub enum Stored {
    /// A filter.
    Filter(Box<dyn DynFilter>),
    /// A `BF.LOADCHUNK` load that has not received its last piece.
    Loading(Load),
}

/// The value behind a pointer.
///
/// # Safety
/// `value` must be a value of this type: created by `Box::into_raw` of a [`Stored`] in
/// `set_value`, `rdb_load` or `copy`, and still held by Redis.
unsafe fn stored<'a>(value: *const c_void) -> &'a Stored {
    // SAFETY: as the caller promises.
    unsafe { &*value.cast::<Stored>() }
}

fn into_value(value: Stored) -> *mut c_void {
    Box::into_raw(Box::new(value)).cast::<c_void>()
}

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // Before the drop: once freed, the address may hold a new value.
        crate::accounting::forget(value);
        // SAFETY: every value of this type was created by `Box::into_raw` of a `Stored`
        // (see `stored`).
        drop(unsafe { Box::from_raw(value.cast::<Stored>()) });
    }
}

/// A new value of this type, counted in `INFO bloomery` ([`crate::accounting`]).
fn into_reported_value(value: Stored) -> *mut c_void {
    let figures = crate::accounting::figures_of(&value, false);
    let pointer = into_value(value);
    crate::accounting::report(pointer, figures);
    pointer
}

/// Bytes held: the filter's, or the pieces received (from fields, reading no bits:
/// `MEMORY USAGE` and `UNLINK` ask on the main thread).
fn held_bytes(value: &Stored) -> u64 {
    crate::accounting::figures_of(value, false).bytes
}

/// How much work freeing a value is, in Redis's units (roughly allocations): one per 64 KiB
/// of bytes held, plus one, so that `UNLINK` (and lazy-free `DEL`) of a large filter frees
/// it in the background (Redis does so above 64). From fields: it reads no bits.
unsafe extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: Redis passes a value of this type.
    let value = unsafe { stored(value) };
    (held_bytes(value) / (64 << 10) + 1) as usize
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: Redis passes a value of this type and holds the key while it asks.
    held_bytes(unsafe { stored(value) }) as usize + std::mem::size_of::<Stored>() * 2
}

/// Writes a length and then `bytes`' pieces, as [`load_chunks`] reads them.
fn save_pieces<'a>(
    rdb: *mut raw::RedisModuleIO,
    len: u64,
    pieces: impl Iterator<Item = std::borrow::Cow<'a, [u8]>>,
) {
    raw::save_unsigned(rdb, len);
    for piece in pieces {
        raw::save_slice(rdb, &piece);
    }
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis passes a value of this type.
    match unsafe { stored(value) } {
        Stored::Filter(filter) => {
            let envelope = filter.envelope();
            raw::save_unsigned(rdb, KIND_FILTER);
            // The header, then the bits straight from the filter's memory: no 16 MiB copy
            // per piece (a load takes pieces of any length; none is longer than 16 MiB).
            save_pieces(rdb, envelope.len(), envelope.slices(CHUNK_BYTES));
        }
        Stored::Loading(load) => {
            let received = load.received_bytes();
            raw::save_unsigned(rdb, KIND_LOADING);
            save_pieces(
                rdb,
                received.len() as u64,
                received.chunks(CHUNK_BYTES).map(Into::into),
            );
        }
    }
}

/// The flags of the context a value is loaded in (loading the server's own data, or a
/// client's `RESTORE`).
pub(crate) fn load_flags(rdb: *mut raw::RedisModuleIO) -> ContextFlags {
    // SAFETY: Redis passes a valid IO handle; the context it gives is valid for the call.
    let bits = unsafe {
        match (
            raw::RedisModule_GetContextFromIO,
            raw::RedisModule_GetContextFlags,
        ) {
            (Some(context_of), Some(flags_of)) => flags_of(context_of(rdb)),
            _ => 0,
        }
    };
    ContextFlags::from_bits_truncate(bits)
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encoding_version: c_int) -> *mut c_void {
    match load_value(rdb, encoding_version) {
        Ok(value) => into_reported_value(value),
        Err(why) => {
            // Logged: Redis answers a refused `RESTORE` with "Bad data format" alone, and
            // stops on a refused value of its own RDB.
            crate::log::io_error(rdb, &format!("a value was refused ({why})"));
            std::ptr::null_mut()
        }
    }
}

/// The value in `rdb`, or why it is refused (damaged, cut short, over the cap).
fn load_value(rdb: *mut raw::RedisModuleIO, encoding_version: c_int) -> Result<Stored, String> {
    let cap = cap_for_rdb_load(load_flags(rdb));
    let limit = envelope_limit(cap);
    let open = |bytes: &[u8]| {
        open_within(bytes, cap)
            .map(Stored::Filter)
            .map_err(|error| error.message().trim_start_matches("ERR ").to_owned())
    };
    match encoding_version {
        0 => open(raw::load_string_buffer(rdb).map_err(|_| SHORT)?.as_ref()),
        1 => open(&load_chunks(rdb, limit)?),
        2 => match raw::load_unsigned(rdb).map_err(|_| SHORT)? {
            KIND_FILTER => open(&load_chunks(rdb, limit)?),
            KIND_LOADING => Load::resume(&load_chunks(rdb, limit)?, cap)
                .map(Stored::Loading)
                .ok_or_else(|| "a BF.LOADCHUNK load in progress whose pieces do not resume".to_owned()),
            kind => Err(format!("unknown kind of value {kind}")),
        },
        version => Err(format!("unknown encoding version {version}")),
    }
}

/// What a value whose reads failed is (Redis's load calls report a short read or a wrong
/// type marker).
const SHORT: &str = "cut short or damaged: a read of it failed";

/// A length, then pieces adding up to exactly that length, which must be at most `limit`:
/// checked before anything is reserved; the bytes grow by doubling, never past that
/// length (`append_within`).
fn load_chunks(rdb: *mut raw::RedisModuleIO, limit: u64) -> Result<Vec<u8>, String> {
    let total = raw::load_unsigned(rdb).map_err(|_| SHORT)?;
    if total > limit {
        return Err(format!(
            "its {total} bytes are more than the {limit} a filter within the module's limit per key takes (bloomery.max-filter-memory)"
        ));
    }
    let mut bytes = Vec::new();
    while (bytes.len() as u64) < total {
        let chunk = raw::load_string_buffer(rdb).map_err(|_| SHORT)?;
        let chunk = chunk.as_ref();
        if chunk.is_empty() || bytes.len() as u64 + chunk.len() as u64 > total {
            return Err(format!("its pieces do not add up to the {total} bytes announced"));
        }
        bloomery::format::pieces::append_within(&mut bytes, chunk, total)
            .map_err(|error| error.to_string())?;
    }
    Ok(bytes)
}

/// The largest piece of a dump (`BF.SCANDUMP` reply, `BF.LOADCHUNK` argument, AOF command,
/// RDB string).
pub const CHUNK_BYTES: usize = 16 << 20;

/// Piece `iterator` (1-based) of the filter's envelope, or `None` past the end. Only the
/// first piece computes the payload checksum (it holds the header); the others are copies
/// of the filter's memory.
pub fn dump_chunk(envelope: &Envelope<'_>, iterator: u64) -> Option<Vec<u8>> {
    let start = iterator.checked_sub(1)?.checked_mul(CHUNK_BYTES as u64)?;
    (start < envelope.len()).then(|| envelope.read_range(start..start.saturating_add(CHUNK_BYTES as u64)))
}

/// Every piece of the envelope in order, with its 1-based iterator.
fn dump_chunks<'a>(envelope: &'a Envelope<'_>) -> impl Iterator<Item = (u64, Vec<u8>)> + 'a {
    (1..).map_while(|iterator| dump_chunk(envelope, iterator).map(|chunk| (iterator, chunk)))
}

/// Emits `BF.LOADCHUNK key iterator piece` into the AOF.
pub(crate) fn emit_loadchunk(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    iterator: u64,
    piece: &[u8],
) {
    // SAFETY: Redis gives a valid AOF handle and key; the format "slb" takes a module
    // string, a long long and a (pointer, length) buffer, as passed.
    unsafe {
        raw::RedisModule_EmitAOF.expect("EmitAOF is provided by redis-server")(
            aof,
            c"BF.LOADCHUNK".as_ptr(),
            c"slb".as_ptr(),
            key,
            iterator as std::os::raw::c_longlong,
            piece.as_ptr().cast::<std::os::raw::c_char>(),
            piece.len(),
        );
    }
}

/// A filter as the `BF.LOADCHUNK` commands that rebuild it; a load in progress as the
/// commands that brought its pieces, so replaying the AOF resumes it.
unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: Redis passes a value of this type.
    match unsafe { stored(value) } {
        Stored::Filter(filter) => {
            let envelope = filter.envelope();
            for (iterator, chunk) in dump_chunks(&envelope) {
                emit_loadchunk(aof, key, iterator, &chunk);
            }
        }
        Stored::Loading(load) => {
            for (iterator, piece) in (1..).zip(load.received_bytes().chunks(CHUNK_BYTES)) {
                emit_loadchunk(aof, key, iterator, piece);
            }
        }
    }
}

/// Adds one buffer to a digest.
pub(crate) fn digest_add(md: *mut raw::RedisModuleDigest, bytes: &[u8]) {
    // SAFETY: `md` is valid for the duration of the digest callback; the buffer outlives it.
    unsafe {
        raw::RedisModule_DigestAddStringBuffer.expect("provided by redis-server")(
            md,
            bytes.as_ptr().cast::<std::os::raw::c_char>(),
            bytes.len(),
        );
    }
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: Redis passes a value of this type.
    match unsafe { stored(value) } {
        Stored::Filter(filter) => {
            let envelope = filter.envelope();
            for (_, chunk) in dump_chunks(&envelope) {
                digest_add(md, &chunk);
            }
        }
        Stored::Loading(load) => {
            digest_add(md, b"loading");
            for piece in load.received_bytes().chunks(CHUNK_BYTES) {
                digest_add(md, piece);
            }
        }
    }
    // SAFETY: as in `digest_add`.
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
    let copied = match unsafe { stored(value) } {
        // Memory the system refuses (`try_clone_box`, through the module's allocator,
        // `RedisModule_TryAlloc`) fails the command: Redis answers "module key failed to
        // copy" for a null value, where a `clone` stopped the server.
        Stored::Filter(filter) => filter.try_clone_box().ok().map(Stored::Filter),
        // A copy of what is already in the keyspace: no cap.
        Stored::Loading(load) => Load::resume(load.received_bytes(), None).map(Stored::Loading),
    };
    copied.map_or(std::ptr::null_mut(), into_reported_value)
}
