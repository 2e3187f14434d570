//! `try_clone_box` (and `TryClone`) answer `Error::OutOfMemory` wherever the system refuses
//! an allocation of the copy, never abort: a global allocator here refuses the `n`-th
//! allocation that the test's thread makes, for `n = 0, 1, 2, ...` until a copy succeeds,
//! so that every allocation a copy of each variant makes is refused once. An infallible one
//! (`Clone`, `Box::new`, a `Vec` push past its room) aborts the test binary. The Redis
//! module copies a filter (`COPY`) through it, where an abort stops the server. A
//! retouched filter's insert, whose bookkeeping allocates, is held to the same, and so is
//! a load (`any::open`, a client's `RESTORE`), for the allocations that its bytes size.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bloomery::any::{self, DynFilter, Spec};
use bloomery::format::native::Variant;
use bloomery::{AllowlistedBloomFilter, Error, RetouchedBloomFilter};

thread_local! {
    /// Allocations left before the one refused (`usize::MAX`: none is refused), for this
    /// thread only: the other tests of the binary run beside it.
    static LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The smallest allocation counted (and refused): 0 counts every one.
    static LEAST: Cell<usize> = const { Cell::new(0) };
}

struct Refusing;

impl Refusing {
    /// Whether this allocation, of `size` bytes, is the one to refuse.
    fn refuse(size: usize) -> bool {
        if LEAST.try_with(|least| size < least.get()).unwrap_or(true) {
            return false;
        }
        LEFT.try_with(|left| match left.get() {
            usize::MAX => false,
            0 => {
                left.set(usize::MAX);
                true
            }
            n => {
                left.set(n - 1);
                false
            }
        })
        .unwrap_or(false)
    }
}

// SAFETY: every call is System's, or a null pointer (a refusal) where one may be returned.
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if Self::refuse(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Refusing = Refusing;

/// A filter of `variant` past its capacity (the growing ones have grown), with an allow
/// list and recorded false positives where the variant keeps them.
fn filled(variant: Variant) -> Box<dyn DynFilter> {
    filled_with(variant, 500, 2_000, 10_000..10_100, 10_000..20_000)
}

/// A filter of `variant` for `capacity` items holding `items` of them, with the items of
/// `allowed` that it answers present allow-listed, and those of `recorded` recorded as
/// false positives, where the variant keeps them (at least one listed).
fn filled_with(
    variant: Variant,
    capacity: u64,
    items: u32,
    allowed: std::ops::Range<u32>,
    recorded: std::ops::Range<u32>,
) -> Box<dyn DynFilter> {
    let mut filter = any::create(&Spec::new(variant, capacity, 0.01)).unwrap();
    for i in 0..items {
        filter.insert(&i.to_le_bytes()).unwrap();
    }
    if let Some(allowlisted) = filter.as_any_mut().downcast_mut::<AllowlistedBloomFilter>() {
        for i in allowed {
            allowlisted.allow(&i.to_le_bytes()[..]);
        }
        assert!(allowlisted.allowed_len() > 0);
    }
    if let Some(retouched) = filter.as_any_mut().downcast_mut::<RetouchedBloomFilter>() {
        for i in recorded {
            retouched.record_false_positive(&i.to_le_bytes()[..]);
        }
    }
    filter
}

/// Runs `attempt` on `state` with its n-th allocation refused, for n = 0, 1, 2, ... until
/// it succeeds: each failure must be an `OutOfMemory` that a refusal caused, after which
/// `unchanged` holds, and the success must follow no refusal. Returns the value and the
/// number of allocations refused.
fn with_each_allocation_refused<S, T>(
    what: &str,
    state: &mut S,
    mut attempt: impl FnMut(&mut S) -> Result<T, Error>,
    unchanged: impl Fn(&S),
) -> (T, usize) {
    let mut refusals = 0;
    loop {
        LEFT.set(refusals);
        let outcome = attempt(state);
        let refused = LEFT.get() == usize::MAX;
        LEFT.set(usize::MAX);
        match outcome {
            Ok(value) => {
                assert!(
                    !refused,
                    "{what}: a refusal at allocation {refusals} was not reported"
                );
                return (value, refusals);
            }
            Err(error) => {
                assert!(refused, "{what}: {error} with no allocation refused");
                assert!(matches!(error, Error::OutOfMemory { .. }), "{what}: {error}");
                unchanged(state);
                refusals += 1;
            }
        }
    }
}

#[test]
fn every_allocation_of_a_copy_refused_is_an_error_and_the_copy_after_is_whole() {
    // Huge-page arrays are mapped, not allocated: none here (all under 4 MiB).
    for variant in Variant::ALL {
        let mut filter = filled(variant);
        let original = filter.envelope().to_vec();
        let what = format!("{variant:?}");
        let (copy, refusals) = with_each_allocation_refused(
            &what,
            &mut filter,
            |filter| filter.try_clone_box(),
            // A copy borrows the original shared: it is compared once, below.
            |_| {},
        );
        // Every allocation but a box for the bits and one for the copy would be a bug to
        // miss: the growing variants take one per sub-filter, the lists one per list.
        assert!(refusals >= 2, "{variant:?}: {refusals} allocations");
        assert_eq!(copy.envelope().to_vec(), original, "{variant:?}");
        assert_eq!(
            filter.envelope().to_vec(),
            original,
            "{variant:?}: the original changed"
        );
        for i in 0..2_000u32 {
            // Equal answers (a rotating filter has forgotten its first items).
            let item = i.to_le_bytes();
            assert_eq!(copy.contains(&item), filter.contains(&item), "{variant:?}: {i}");
        }
    }
}

#[test]
fn a_copy_is_the_original_and_goes_its_own_way() {
    for variant in Variant::ALL {
        let filter = filled(variant);
        let mut copy = filter.try_clone_box().unwrap();
        assert_eq!(
            copy.envelope().to_vec(),
            filter.clone_box().envelope().to_vec(),
            "{variant:?}"
        );
        let present: Vec<bool> = (0..2_000u32).map(|i| filter.contains(&i.to_le_bytes())).collect();
        assert!(present.iter().filter(|&&p| p).count() >= 500, "{variant:?}");
        copy.clear().unwrap();
        assert!(!copy.contains(&1999u32.to_le_bytes()), "{variant:?}");
        for (i, &was) in (0..2_000u32).zip(&present) {
            assert_eq!(filter.contains(&i.to_le_bytes()), was, "{variant:?}: {i}");
        }
    }
}

/// The process's resident memory now (VmRSS).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn the_copy_of_a_mostly_empty_filter_leaves_its_empty_pages_untouched() {
    // 256 MiB of blocks with one item: the copy reads every page of the original (the
    // untouched ones read as the kernel's zero page) and writes only the one that is not
    // all zero. The other tests of the binary take a few MiB meanwhile.
    for huge_pages in [true, false] {
        bloomery::bits::set_huge_pages(huge_pages);
        let mut filter = bloomery::BlockedBloomFilter::with_num_blocks(1 << 22, 0).unwrap();
        bloomery::bits::set_huge_pages(true);
        filter.insert(&"one");
        let before = resident_bytes();
        let copy = bloomery::TryClone::try_clone(&filter).unwrap();
        let grown = resident_bytes().saturating_sub(before);
        assert!(
            grown < 32 << 20,
            "huge pages {huge_pages}: {grown} bytes more resident"
        );
        assert!(copy.contains(&"one"));
        assert_eq!(copy.blocks(), filter.blocks());
    }
}

#[test]
fn every_allocation_of_a_retouched_insert_refused_is_an_error_that_changes_nothing() {
    // New items into a sparse filter need new lists (the indices, the list of new lists
    // and a list at least), into a saturated one room in lists that exist (the indices at
    // least, and a list's growth now and then).
    let mut sparse = any::create(&Spec::new(Variant::Retouched, 100_000, 0.01)).unwrap();
    for i in 0..2_000u32 {
        sparse.insert(&i.to_le_bytes()).unwrap();
    }
    for (what, mut filter, least) in [
        ("sparse", sparse, 3),
        ("saturated", filled(Variant::Retouched), 1),
    ] {
        for item in (50_000..50_020u32).map(u32::to_le_bytes) {
            let before = filter.envelope().to_vec();
            let (_, refusals) = with_each_allocation_refused(
                what,
                &mut filter,
                |filter| filter.insert(&item),
                |filter| {
                    assert_eq!(
                        filter.envelope().to_vec(),
                        before,
                        "{what}: a refused insert changed the filter"
                    )
                },
            );
            assert!(refusals >= least, "{what}: {refusals} allocations");
            assert!(filter.contains(&item), "{what}");
        }
    }
}

#[test]
fn every_large_allocation_of_a_load_refused_is_an_error_and_the_load_after_is_whole() {
    // The Redis module loads a client's `RESTORE` (or `BF.LOADCHUNK`) payload with
    // `any::open`, which sizes the filter from the bytes sent: a refused allocation there
    // must be an error reply, not an abort of the server. Guava's bytes are read the same
    // way (their word count sizes the array). The allocations counted are those of 1 KiB
    // or more: the ones that the bytes sent size (the array, the blocks, the lists and
    // their tables), not the small fixed ones (the header's parameters, at most 64 KiB,
    // are copied as any parser's would be; a server that cannot have a few bytes is
    // lost anyway).
    LEAST.set(1024);
    for variant in Variant::ALL {
        // Lists of more than a thousand items and their tables, of more than 1 KiB.
        let filter = filled_with(variant, 20_000, 30_000, 100_000..200_000, 100_000..200_000);
        if let Some(allowlisted) = filter.as_any().downcast_ref::<AllowlistedBloomFilter>() {
            assert!(allowlisted.allowed_len() > 1_000, "{}", allowlisted.allowed_len());
        }
        let bytes = filter.envelope().to_vec();
        let what = format!("{variant:?}");
        let (loaded, refusals) =
            with_each_allocation_refused(&what, &mut (), |()| any::open(&bytes), |()| {});
        assert!(refusals >= 1, "{what}: {refusals} allocations");
        assert_eq!(loaded.envelope().to_vec(), bytes, "{what}");
        for i in 0..30_000u32 {
            let item = i.to_le_bytes();
            assert_eq!(loaded.contains(&item), filter.contains(&item), "{what}: {i}");
        }
    }
    let mut classic = bloomery::BloomFilter::with_fpp(20_000, 0.01).unwrap();
    for i in 0..20_000u32 {
        classic.insert(&i.to_le_bytes());
    }
    let guava = classic.to_guava_bytes();
    let (loaded, refusals) = with_each_allocation_refused(
        "Guava",
        &mut (),
        |()| bloomery::BloomFilter::from_guava_bytes(&guava),
        |()| {},
    );
    assert!(refusals >= 1, "Guava: {refusals} allocations");
    assert_eq!(loaded.words(), classic.words());
    LEAST.set(0);
}
