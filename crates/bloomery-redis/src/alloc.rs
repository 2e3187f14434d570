//! The module's global allocator: Redis's own (`RedisModule_Alloc`, so `INFO memory` and
//! `maxmemory` count the filters), with the alignment Rust asks for guaranteed.
//!
//! `redis_module::alloc::RedisAlloc` passes only a size to Redis and relies on jemalloc
//! (the allocator of Redis's default build) placing an allocation at a multiple of its
//! size class. A Redis built with `MALLOC=libc` (or tcmalloc) gives 16-byte alignment
//! only, and a blocked filter's 64-byte blocks, loaded with aligned vector loads, then
//! stopped that server at its first `BF.ADD` (signal 11 in the AVX-512 kernel, seen with
//! Redis 7.4.1 built with `MALLOC=libc`). Here an allocation that needs more than 16
//! bytes of alignment takes `align` bytes more and is placed at the next multiple of
//! `align`, with Redis's own pointer kept in the 8 bytes just before it.
//!
//! Allocations go through `RedisModule_TryAlloc` (and `RedisModule_TryCalloc` where Redis
//! has it, 7.4 and later), which return null when the memory cannot be had, rather than
//! `RedisModule_Alloc`, which stops the whole server ("Redis aborting for OUT OF MEMORY").
//! A filter whose size comes from a client or a file is made with the library's fallible
//! constructors, so on a server that cannot give it the memory (an address-space limit,
//! `vm.overcommit_memory = 2`) its command answers an error and the server and every
//! other key stay up. Infallible allocations (Rust's `Vec`, `Box`) still stop the process
//! on failure, as they do everywhere in Rust.

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::c_void;

use redis_module::raw;

/// What every allocator Redis is built with guarantees on 64-bit targets (glibc's malloc,
/// jemalloc, tcmalloc: 16 bytes).
const GUARANTEED_ALIGN: usize = 16;

/// Redis's allocator with alignment guaranteed (see the module docs).
#[derive(Default, Debug, Clone, Copy)]
pub struct AlignedRedisAlloc;

/// Redis's allocation of `size` bytes, or null when it cannot be had (`TryAlloc`, Redis
/// 7.0 and later; before, `Alloc`, which stops the server instead). Aborts if the module
/// is not loaded yet (Redis fills the functions in before `OnLoad`).
fn redis_alloc(size: usize) -> *mut u8 {
    // SAFETY: reading function pointers Redis filled in when the module was loaded.
    match unsafe { (raw::RedisModule_TryAlloc, raw::RedisModule_Alloc) } {
        // SAFETY: Redis's allocator, any size.
        (Some(alloc), _) | (None, Some(alloc)) => unsafe { alloc(size) }.cast(),
        (None, None) => std::process::abort(),
    }
}

/// `size` zeroed bytes from Redis, or null: `TryCalloc` where Redis has it (its allocator
/// knows which pages are fresh and leaves them untouched, so an empty filter takes no
/// memory until it is written), else [`redis_alloc`] and zeroing.
fn redis_alloc_zeroed(size: usize) -> *mut u8 {
    // SAFETY: reading a function pointer Redis filled in when the module was loaded.
    if let Some(calloc) = unsafe { raw::RedisModule_TryCalloc } {
        // SAFETY: Redis's allocator, one element of any size.
        return unsafe { calloc(1, size) }.cast();
    }
    let pointer = redis_alloc(size);
    if !pointer.is_null() {
        // SAFETY: `pointer` holds `size` writable bytes.
        unsafe { pointer.write_bytes(0, size) };
    }
    pointer
}

/// Frees what [`redis_alloc`] returned.
fn redis_free(pointer: *mut u8) {
    // SAFETY: as above; `pointer` came from RedisModule_Alloc.
    match unsafe { raw::RedisModule_Free } {
        Some(free) => unsafe { free(pointer.cast::<c_void>()) },
        None => std::process::abort(),
    }
}

// SAFETY: allocations are Redis's, at least `layout.size()` bytes at a multiple of
// `layout.align()`; `dealloc` gets the same layout and so finds Redis's pointer the same way.
unsafe impl GlobalAlloc for AlignedRedisAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        aligned(layout, redis_alloc)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        aligned(layout, redis_alloc_zeroed)
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        if layout.align() <= GUARANTEED_ALIGN {
            redis_free(pointer);
            return;
        }
        // SAFETY: `aligned` wrote Redis's pointer just before the one it returned.
        let base = unsafe { pointer.cast::<*mut u8>().sub(1).read() };
        redis_free(base);
    }
}

/// `layout.size()` bytes from `allocate` at a multiple of `layout.align()`, or null.
fn aligned(layout: Layout, allocate: fn(usize) -> *mut u8) -> *mut u8 {
    if layout.align() <= GUARANTEED_ALIGN {
        return allocate(layout.size());
    }
    // Room for the pointer and for moving up to the next multiple of `align`.
    let Some(size) = layout.size().checked_add(layout.align()) else {
        return std::ptr::null_mut();
    };
    let base = allocate(size);
    if base.is_null() {
        return base;
    }
    // The next multiple of `align` past `base` (at least 16 bytes on, since `base` is
    // 16-aligned and `align` > 16): room for Redis's pointer just before it.
    let offset = layout.align() - (base as usize & (layout.align() - 1));
    // SAFETY: `offset` <= `align`, within the `size` bytes allocated.
    let aligned = unsafe { base.add(offset) };
    // SAFETY: `aligned - 8` is at or after `base + 8`, inside the allocation, and
    // 8-aligned (`aligned` is a multiple of `align`).
    unsafe { aligned.cast::<*mut u8>().sub(1).write(base) };
    aligned
}
