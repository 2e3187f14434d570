//! What loading a file costs in memory beyond the file's own bytes: the tools (the CLI's
//! `check_memory_for`, the Python package's `check_memory`, the Redis module's cap) budget
//! the bytes plus one filter, so `any::open` must build the filter from the payload with
//! no second full copy on the way (a `Vec<u64>` of the words, then the filter's array).
//!
//! A counting global allocator gives the peak heap during `any::open`. Arrays of 4 MiB or
//! more are mapped (huge pages), not taken from the heap, so with huge pages on an array
//! that the open left off the heap is counted as mapped: a load that kept a `Vec<u64>` of
//! the words while filling a mapped array shows its Vec on the heap and its array mapped,
//! twice the payload, and fails. With huge pages off everything is on the heap and counted
//! directly.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use bloomery::any::{self, DynFilter};
use bloomery::classic::BloomFilterView;
use bloomery::format::native::{self, ParamWriter, Persist, Variant};
use bloomery::redisbloom::RedisBloomFilter;
use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
use bloomery::{
    AllowlistedBloomFilter, AtomicBloomFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter,
    FilterStats, RetouchedBloomFilter, RotatingBloomFilter, ScalableBloomFilter, ScalableOptions,
    SplitBlockBloomFilter,
};

/// Requested bytes live now and at most since the last reset.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The same in glibc malloc chunks (8 bytes of header, 16-byte granules, 32 at least):
/// what many small allocations really cost.
static CURRENT_CHUNKS: AtomicUsize = AtomicUsize::new(0);
static PEAK_CHUNKS: AtomicUsize = AtomicUsize::new(0);

/// One measurement at a time: the counters and the huge-page switch are global.
static LOCK: Mutex<()> = Mutex::new(());

/// Bytes beyond the payload a load may take: parameters, the filter's struct, the harness.
const SLACK: usize = 256 << 10;

struct Counting;

fn chunk(size: usize) -> usize {
    (size + 8).next_multiple_of(16).max(32)
}

fn grew(size: usize) {
    let now = CURRENT.fetch_add(size, Ordering::SeqCst) + size;
    PEAK.fetch_max(now, Ordering::SeqCst);
    let chunks = CURRENT_CHUNKS.fetch_add(chunk(size), Ordering::SeqCst) + chunk(size);
    PEAK_CHUNKS.fetch_max(chunks, Ordering::SeqCst);
}

fn shrank(size: usize) {
    CURRENT.fetch_sub(size, Ordering::SeqCst);
    CURRENT_CHUNKS.fetch_sub(chunk(size), Ordering::SeqCst);
}

// SAFETY: every call is passed to `System` unchanged; only the counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // Both alive for a moment when the block moves.
            grew(new_size);
            shrank(layout.size());
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What one `any::open` took beyond the bytes it was given.
#[derive(Debug)]
struct Load {
    /// The file's length.
    len: usize,
    /// Peak heap during the open, beyond what was live before it.
    peak_heap: usize,
    /// The same in malloc chunks.
    peak_chunks: usize,
    /// Heap the opened filter still holds.
    retained_heap: usize,
    /// The filter's own count of its memory.
    memory_bytes: usize,
}

impl Load {
    /// Peak memory during the open: the heap's peak, plus the filter's array when it is
    /// not on the heap (mapped, allocated zeroed before the payload was read into it).
    /// The array is megabytes, on the heap or not; the harness's other threads free a few
    /// bytes meanwhile, so the test is for half of it.
    fn peak(&self) -> usize {
        let mapped = if self.retained_heap < self.memory_bytes / 2 {
            self.memory_bytes
        } else {
            0
        };
        self.peak_heap + mapped
    }

    fn factor(&self) -> f64 {
        self.peak() as f64 / self.len as f64
    }

    fn chunk_factor(&self) -> f64 {
        self.peak_chunks as f64 / self.len as f64
    }
}

fn open_measured(bytes: &[u8]) -> Load {
    measured(
        bytes.len(),
        || -> Box<dyn DynFilter> { any::open(bytes).expect("the file opens") },
        |filter| {
            assert!(filter.contains(b"present"), "the loaded filter lost an item");
            filter.stats().memory_bytes as usize
        },
    )
}

/// What `make` took beyond what was live before it, `len` being the size it is measured
/// against and `memory` the made thing's own count of its memory.
fn measured<T>(len: usize, make: impl FnOnce() -> T, memory: impl FnOnce(&T) -> usize) -> Load {
    let start = CURRENT.load(Ordering::SeqCst);
    let start_chunks = CURRENT_CHUNKS.load(Ordering::SeqCst);
    PEAK.store(start, Ordering::SeqCst);
    PEAK_CHUNKS.store(start_chunks, Ordering::SeqCst);
    let made = make();
    let peak_heap = PEAK.load(Ordering::SeqCst).saturating_sub(start);
    let peak_chunks = PEAK_CHUNKS.load(Ordering::SeqCst).saturating_sub(start_chunks);
    let retained_heap = CURRENT.load(Ordering::SeqCst).saturating_sub(start);
    Load {
        len,
        peak_heap,
        peak_chunks,
        retained_heap,
        memory_bytes: memory(&made),
    }
}

/// Opens `bytes` with huge pages off and on; both peaks must stay within the file's
/// length plus the slack. Every file here holds one large array (one sub-filter, one
/// generation, one link), so the filter's memory is either on the heap or mapped.
fn assert_loads_within_one_copy(files: &[(&str, Vec<u8>)]) {
    let mut over = Vec::new();
    for (what, bytes) in files {
        for huge_pages in [false, true] {
            bloomery::bits::set_huge_pages(huge_pages);
            let load = open_measured(bytes);
            bloomery::bits::set_huge_pages(true);
            println!(
                "{what} (huge pages {huge_pages}): {:.2}x, {:.2}x in malloc chunks, {load:?}",
                load.factor(),
                load.chunk_factor()
            );
            if load.peak() > load.len + SLACK {
                over.push(format!(
                    "{what} (huge pages {huge_pages}): opening {} bytes took {} more ({:.2}x)",
                    load.len,
                    load.peak(),
                    load.factor()
                ));
            }
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}

#[test]
fn a_large_classic_file_loads_in_one_copy() {
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut filter = BloomFilter::with_fpp(7_500_000, 0.01).unwrap();
    filter.insert("present");
    let bytes = filter.to_bytes();
    assert!(bytes.len() >= 8 << 20);
    drop(filter);
    assert_loads_within_one_copy(&[("classic", bytes)]);
}

#[test]
fn a_large_blocked_file_loads_in_one_copy() {
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut filter = BlockedBloomFilter::with_num_blocks(1 << 17, 7).unwrap();
    filter.insert("present");
    let bytes = filter.to_bytes();
    assert!(bytes.len() >= 8 << 20);
    drop(filter);
    assert_loads_within_one_copy(&[("blocked", bytes)]);
}

/// A plain copy of a lock-free or borrowed classic filter (the Python package's copy of
/// an atomic filter, a view's `to_bloom_filter`) is one array too.
#[test]
fn a_classic_copy_takes_one_array() {
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut filter = BloomFilter::with_fpp(7_500_000, 0.01).unwrap();
    filter.insert("present");
    let atomic = AtomicBloomFilter::from(filter.clone());
    let mut over = Vec::new();
    for huge_pages in [false, true] {
        bloomery::bits::set_huge_pages(huge_pages);
        let copies = [
            (
                "atomic",
                measured(
                    filter.words().len() * 8,
                    || atomic.to_bloom_filter(),
                    FilterStats::memory_bytes,
                ),
            ),
            (
                "view",
                measured(
                    filter.words().len() * 8,
                    || BloomFilterView::new(filter.words(), 7).unwrap().to_bloom_filter(),
                    FilterStats::memory_bytes,
                ),
            ),
        ];
        bloomery::bits::set_huge_pages(true);
        for (what, copy) in copies {
            println!(
                "{what} copy (huge pages {huge_pages}): {:.2}x, {copy:?}",
                copy.factor()
            );
            if copy.peak() > copy.len + SLACK {
                over.push(format!("{what} (huge pages {huge_pages}): {copy:?}"));
            }
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}

#[test]
fn every_variant_but_retouched_loads_in_one_copy() {
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let n = 7_500_000;
    let files = [
        ("counting", {
            let mut filter = CountingBloomFilter::with_counters(16 << 20, 7).unwrap();
            filter.insert("present");
            filter.to_bytes()
        }),
        ("scalable", {
            let mut filter = ScalableBloomFilter::new(n, 0.01).unwrap();
            filter.insert("present").unwrap();
            filter.to_bytes()
        }),
        ("rotating", {
            let mut filter = RotatingBloomFilter::new(2, n, 0.01).unwrap();
            filter.insert("present");
            filter.to_bytes()
        }),
        ("allowlisted", {
            let mut filter = AllowlistedBloomFilter::with_fpp(n, 0.01).unwrap();
            filter.insert("present");
            filter.allow("absent");
            filter.to_bytes()
        }),
        ("split-block", {
            let mut filter = SplitBlockBloomFilter::with_num_blocks(1 << 18).unwrap();
            filter.insert("present");
            filter.to_bytes()
        }),
        ("redisbloom", {
            let mut filter = RedisBloomFilter::new(n, 0.01, 2, false).unwrap();
            filter.insert(b"present").unwrap();
            filter.to_bytes()
        }),
        ("scalable-blocked", {
            let mut filter = ScalableBlockedBloomFilter::new(n, 0.01, ScalableOptions::default(), 7).unwrap();
            filter.insert("present").unwrap();
            filter.to_bytes()
        }),
    ];
    for (what, bytes) in &files {
        assert!(bytes.len() >= 8 << 20, "{what}: {} bytes", bytes.len());
    }
    assert_loads_within_one_copy(&files);
}

/// The retouched filter's lists (a hash map of small vectors) take more memory than
/// their bytes in the file, which the tools must budget for; but no more than the loaded
/// filter keeps: no transient copy of its words or of a growing map.
#[test]
fn a_retouched_file_loads_without_transient_copies() {
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let n = 50_000;
    let mut filter = RetouchedBloomFilter::with_fpp(n, 0.01).unwrap();
    for i in 0..n {
        filter.insert(&i);
    }
    filter.insert("present");
    let filled = filter.to_bytes();
    drop(filter);
    // The costliest list for its bytes: empty (removals leave them so), 12 bytes in the
    // file and a 32-byte slot in a map whose table is a power of two just past 8/7 of
    // their number (458,753 lists: 2^20 slots). The bit they are for must exist.
    let lists: u64 = 458_753;
    let num_words = lists.div_ceil(64);
    let params = ParamWriter::new()
        .u32(7)
        .u64(num_words)
        .u64(0)
        .u64(0)
        .u64(lists)
        .u64(0)
        .finish();
    let mut payload = vec![0xff; 8 * num_words as usize];
    for index in 0..lists {
        payload.extend_from_slice(&index.to_le_bytes());
        payload.extend_from_slice(&0u32.to_le_bytes());
    }
    let empty_lists = native::encode(Variant::Retouched, &params, &payload);
    bloomery::bits::set_huge_pages(false);
    let mut over = Vec::new();
    for (what, bytes) in [("filled", &filled), ("empty lists", &empty_lists)] {
        let load = open_measured(bytes);
        println!(
            "retouched, {what}: {:.2}x, {:.2}x in malloc chunks, {load:?}",
            load.factor(),
            load.chunk_factor()
        );
        if load.peak_heap > load.retained_heap + SLACK {
            over.push(format!("{what}: {load:?}"));
        }
        // What the filter says it takes is about what it keeps (it counted the lists'
        // entries only: 57 KB of the 35 MB of the empty lists).
        let reported = any::open(bytes).unwrap().stats().memory_bytes as f64;
        let kept = load.retained_heap as f64;
        if !(0.7 * kept..=1.3 * kept).contains(&reported) {
            over.push(format!("{what}: memory_bytes {reported}, keeps {kept}"));
        }
    }
    bloomery::bits::set_huge_pages(true);
    assert!(over.is_empty(), "{over:#?}");
}

/// The allow-listed filter's list (a hash set of its items, each a vector) takes several
/// times its bytes in the file: its load stays within what `file::load_bytes` budgets
/// (which counted it at twice the file, as the fixed-size variants, and a load could pass
/// the tools' check and then exhaust memory).
#[test]
fn an_allowlisted_file_loads_within_its_budget() {
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut filter = AllowlistedBloomFilter::with_fpp(1_000, 0.01).unwrap();
    // Overfilled, so that every item is a false positive the list takes; short items, the
    // costliest for their bytes: 4 bytes of length and a few of item.
    for i in 0..50_000u32 {
        filter.insert(&format!("x{i}"));
    }
    for i in 0..200_000u32 {
        filter.allow(&i.to_string());
    }
    filter.insert("present");
    let bytes = filter.to_bytes();
    drop(filter);
    bloomery::bits::set_huge_pages(false);
    let load = open_measured(&bytes);
    bloomery::bits::set_huge_pages(true);
    // The file's bytes are the caller's here; the budget counts them too.
    let budget = bloomery::file::load_bytes(Variant::Allowlisted, bytes.len() as u64) as usize;
    println!("allowlisted: {:.2}x, {load:?}", load.factor());
    assert!(
        load.peak_chunks + bytes.len() <= budget,
        "{load:?}, budget {budget}"
    );
    assert!(
        load.peak_chunks + bytes.len() > 2 * bytes.len(),
        "more than the fixed-size variants' budget: {load:?}"
    );
    // What the filter says it takes is about what it keeps (it counted the items' bytes
    // only, a small part of it: the assertion below failed).
    let reported = load.memory_bytes as f64;
    let kept = load.retained_heap as f64;
    assert!(
        (0.7 * kept..=1.3 * kept).contains(&reported),
        "memory_bytes {reported}, keeps {kept}"
    );
}
