//! The module's data type: a filter per key, held through the library's one interface
//! ([`DynFilter`]: the commands create scalable filters, and `BF.LOADCHUNK` or an RDB file
//! may bring any variant), saved to RDB as the library's native envelope (checksummed, so
//! a damaged RDB is refused rather than half-loaded).
//! Saving, AOF rewrite, digests and `BF.SCANDUMP` stream the envelope from the filter's own
//! memory ([`Envelope`]) in pieces of at most [`CHUNK_BYTES`], never a whole-filter copy.

use std::os::raw::{c_int, c_void};

use bloomery::any::{self, DynFilter};
use bloomery::format::native::Envelope;
use redis_module::native_types::RedisType;
use redis_module::raw;

use crate::limits::MAX_DUMP_BYTES;

/// The RDB encoding version of [`BLOOM_TYPE`]: 1 is the envelope's length, then the envelope
/// in strings of at most [`CHUNK_BYTES`]; 0 (still read) was the envelope as one string.
const ENCODING_VERSION: c_int = 1;

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
pub type Stored = Box<dyn DynFilter>;

/// The filter behind a value pointer.
///
/// # Safety
/// `value` must be a value of this type: created by `Box::into_raw` of a [`Stored`] in
/// `set_value`, `rdb_load` or `copy`, and still held by Redis.
unsafe fn filter<'a>(value: *const c_void) -> &'a dyn DynFilter {
    // SAFETY: as the caller promises.
    unsafe { &**value.cast::<Stored>() }
}

fn into_value(filter: Stored) -> *mut c_void {
    Box::into_raw(Box::new(filter)).cast::<c_void>()
}

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // SAFETY: every value of this type was created by `Box::into_raw` of a `Stored`
        // (see `filter`).
        drop(unsafe { Box::from_raw(value.cast::<Stored>()) });
    }
}

/// How much work freeing a value is, in Redis's units (roughly allocations): one per 64 KiB
/// of bits, so that `UNLINK` (and lazy-free `DEL`) of a large filter frees it in the
/// background (Redis does so above 64).
unsafe extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: Redis passes a value of this type.
    let stats = unsafe { filter(value) }.stats();
    (stats.memory_bytes / (64 << 10) + stats.sub_filters) as usize
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: Redis passes a value of this type and holds the key while it asks.
    let stats = unsafe { filter(value) }.stats();
    stats.memory_bytes as usize + std::mem::size_of::<Stored>() * 2
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis passes a value of this type.
    let envelope = unsafe { filter(value) }.envelope();
    raw::save_unsigned(rdb, envelope.len());
    for (_, chunk) in dump_chunks(&envelope) {
        raw::save_slice(rdb, &chunk);
    }
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encoding_version: c_int) -> *mut c_void {
    let filter = match encoding_version {
        0 => raw::load_string_buffer(rdb)
            .ok()
            .and_then(|buffer| any::open(buffer.as_ref()).ok()),
        1 => load_chunks(rdb).and_then(|bytes| any::open(&bytes).ok()),
        _ => None,
    };
    filter.map_or(std::ptr::null_mut(), into_value)
}

/// Encoding 1's envelope: its length, then pieces adding up to exactly that length.
fn load_chunks(rdb: *mut raw::RedisModuleIO) -> Option<Vec<u8>> {
    let total = raw::load_unsigned(rdb)
        .ok()
        .filter(|&total| total <= MAX_DUMP_BYTES)?;
    let mut bytes = Vec::with_capacity(total.min(CHUNK_BYTES as u64) as usize);
    while (bytes.len() as u64) < total {
        let chunk = raw::load_string_buffer(rdb).ok()?;
        let chunk = chunk.as_ref();
        if chunk.is_empty() || bytes.len() as u64 + chunk.len() as u64 > total {
            return None;
        }
        bytes.extend_from_slice(chunk);
    }
    Some(bytes)
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

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: Redis passes a value of this type.
    let envelope = unsafe { filter(value) }.envelope();
    for (iterator, chunk) in dump_chunks(&envelope) {
        // SAFETY: Redis gives a valid AOF handle and key; the format "slb" takes a module
        // string, a long long and a (pointer, length) buffer, as passed.
        unsafe {
            raw::RedisModule_EmitAOF.expect("EmitAOF is provided by redis-server")(
                aof,
                c"BF.LOADCHUNK".as_ptr(),
                c"slb".as_ptr(),
                key,
                iterator as std::os::raw::c_longlong,
                chunk.as_ptr().cast::<std::os::raw::c_char>(),
                chunk.len(),
            );
        }
    }
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: Redis passes a value of this type; `md` is valid for the duration of the call.
    let envelope = unsafe { filter(value) }.envelope();
    for (_, chunk) in dump_chunks(&envelope) {
        // SAFETY: `md` is valid for the call; the buffer outlives it.
        unsafe {
            raw::RedisModule_DigestAddStringBuffer.expect("provided by redis-server")(
                md,
                chunk.as_ptr().cast::<std::os::raw::c_char>(),
                chunk.len(),
            );
        }
    }
    // SAFETY: as above.
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
    into_value(unsafe { filter(value) }.clone_box())
}
