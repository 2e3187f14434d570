//! The module's data type: a `ScalableBloomFilter` per key, saved to RDB as the library's
//! native envelope (checksummed, so a damaged RDB is refused rather than half-loaded).

use std::os::raw::{c_int, c_void};

use bloomery::ScalableBloomFilter;
use bloomery::format::native::Persist;
use redis_module::native_types::RedisType;
use redis_module::raw;

/// The RDB encoding version of [`BLOOM_TYPE`].
const ENCODING_VERSION: c_int = 0;

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

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // SAFETY: every value of this type was created by `Box::into_raw` in `set_value` or
        // `rdb_load` from a `ScalableBloomFilter`.
        drop(unsafe { Box::from_raw(value.cast::<ScalableBloomFilter>()) });
    }
}

/// How much work freeing a value is, in Redis's units (roughly allocations): one per 64 KiB
/// of bits, so that `UNLINK` (and lazy-free `DEL`) of a large filter frees it in the
/// background (Redis does so above 64).
unsafe extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: as in `free`.
    let filter = unsafe { &*value.cast::<ScalableBloomFilter>() };
    filter.memory_bytes() / (64 << 10) + filter.num_filters()
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: as in `free`; Redis holds the key while it asks.
    let filter = unsafe { &*value.cast::<ScalableBloomFilter>() };
    filter.memory_bytes() + std::mem::size_of::<ScalableBloomFilter>()
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: as in `free`.
    let filter = unsafe { &*value.cast::<ScalableBloomFilter>() };
    raw::save_slice(rdb, &filter.to_bytes());
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encoding_version: c_int) -> *mut c_void {
    if encoding_version != ENCODING_VERSION {
        return std::ptr::null_mut();
    }
    let Ok(buffer) = raw::load_string_buffer(rdb) else {
        return std::ptr::null_mut();
    };
    match ScalableBloomFilter::from_bytes(buffer.as_ref()) {
        Ok(filter) => Box::into_raw(Box::new(filter)).cast::<c_void>(),
        Err(_) => std::ptr::null_mut(),
    }
}

/// The largest piece of a dump (`BF.SCANDUMP` reply, `BF.LOADCHUNK` argument, AOF command).
pub const CHUNK_BYTES: usize = 16 << 20;

/// Piece `iterator` (1-based) of the filter's serialized form, or `None` past the end.
pub fn dump_chunk(bytes: &[u8], iterator: u64) -> Option<&[u8]> {
    let start = usize::try_from(iterator.checked_sub(1)?)
        .ok()?
        .checked_mul(CHUNK_BYTES)?;
    (start < bytes.len()).then(|| &bytes[start..bytes.len().min(start + CHUNK_BYTES)])
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: as in `free`.
    let filter = unsafe { &*value.cast::<ScalableBloomFilter>() };
    let bytes = filter.to_bytes();
    let mut iterator = 1;
    while let Some(chunk) = dump_chunk(&bytes, iterator) {
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
        iterator += 1;
    }
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: as in `free`; `md` is valid for the duration of the call.
    let filter = unsafe { &*value.cast::<ScalableBloomFilter>() };
    let bytes = filter.to_bytes();
    unsafe {
        raw::RedisModule_DigestAddStringBuffer.expect("provided by redis-server")(
            md,
            bytes.as_ptr().cast::<std::os::raw::c_char>(),
            bytes.len(),
        );
        raw::RedisModule_DigestEndSequence.expect("provided by redis-server")(md);
    }
}

unsafe extern "C" fn copy(
    _from_key: *mut raw::RedisModuleString,
    _to_key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: as in `free`.
    let filter = unsafe { &*value.cast::<ScalableBloomFilter>() };
    Box::into_raw(Box::new(filter.clone())).cast::<c_void>()
}
