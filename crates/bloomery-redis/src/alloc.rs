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

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::c_void;

use redis_module::raw;

/// What every allocator Redis is built with guarantees on 64-bit targets (glibc's malloc,
/// jemalloc, tcmalloc: 16 bytes).
const GUARANTEED_ALIGN: usize = 16;

/// Redis's allocator with alignment guaranteed (see the module docs).
#[derive(Default, Debug, Clone, Copy)]
pub struct AlignedRedisAlloc;

/// Redis's allocation of `size` bytes; aborts if the module is not loaded yet (Redis fills
/// the function in before `OnLoad`).
fn redis_alloc(size: usize) -> *mut u8 {
    // SAFETY: reading a function pointer Redis filled in when the module was loaded.
    match unsafe { raw::RedisModule_Alloc } {
        // SAFETY: Redis's allocator, any size.
        Some(alloc) => unsafe { alloc(size) }.cast(),
        None => std::process::abort(),
    }
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
        if layout.align() <= GUARANTEED_ALIGN {
            return redis_alloc(layout.size());
        }
        // Room for the pointer and for moving up to the next multiple of `align`.
        let Some(size) = layout.size().checked_add(layout.align()) else {
            return std::ptr::null_mut();
        };
        let base = redis_alloc(size);
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

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        if layout.align() <= GUARANTEED_ALIGN {
            redis_free(pointer);
            return;
        }
        // SAFETY: `alloc` wrote Redis's pointer just before the one it returned.
        let base = unsafe { pointer.cast::<*mut u8>().sub(1).read() };
        redis_free(base);
    }
}
