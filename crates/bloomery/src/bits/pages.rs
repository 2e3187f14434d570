//! Zeroed memory for large bit arrays, on huge pages where the kernel offers them.
//!
//! A filter probed at random touches a new 4 KiB page on almost every access, so beyond a
//! few MiB most lookups also miss the TLB and pay a page walk. Arrays of 4 MiB or more are
//! therefore mapped as anonymous memory, start at a 2 MiB boundary inside the mapping (a
//! huge page must be aligned to its size) and are advised `MADV_HUGEPAGE` (transparent
//! huge pages in the kernel's default "madvise" mode): 2 MiB pages cover a 1.2 GB filter
//! with 600 TLB entries instead of 300,000. The mapping starts zeroed and is only backed
//! as it is touched. Smaller arrays, and any platform where the mapping fails, use the
//! heap, as do all arrays once [`set_huge_pages`]`(false)` was called.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::MmapMut;

/// Arrays at least this large are mapped and advised for huge pages.
const HUGE_PAGE_THRESHOLD: usize = 4 << 20;

/// The size (and alignment) of a huge page on x86-64 and most aarch64 kernels.
const HUGE_PAGE: usize = 2 << 20;

static HUGE_PAGES: AtomicBool = AtomicBool::new(true);

/// Whether arrays of 4 MiB or more created from now on are mapped directly and advised
/// for huge pages (the default), or taken from the global allocator like small ones.
///
/// A host whose allocator accounts for memory turns this off once at start: a Redis module,
/// for example, whose global allocator is Redis's, so that `INFO memory` and `maxmemory`
/// see every filter. Arrays that already exist are not moved.
///
/// ```
/// bloomery::bits::set_huge_pages(false);
/// let filter = bloomery::BloomFilter::with_fpp(10_000_000, 0.01)?; // 11 MiB, on the heap
/// bloomery::bits::set_huge_pages(true);
/// # drop(filter);
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn set_huge_pages(enabled: bool) {
    HUGE_PAGES.store(enabled, Ordering::Relaxed);
}

fn huge_pages_for(bytes: usize) -> bool {
    bytes >= HUGE_PAGE_THRESHOLD && HUGE_PAGES.load(Ordering::Relaxed)
}

/// Element types made of plain integers: every bit pattern (all-zero included) is a valid
/// value, and they need no drop.
///
/// # Safety
/// Implement only for types without padding whose every bit pattern is a valid value, with
/// no `Drop`, and with alignment at most 4096 (the mapping's alignment).
pub(crate) unsafe trait Zeroable: Sized {}

/// The memory of `items` as bytes, to OR another payload of the same shape into it.
pub(crate) fn bytes_mut<T: Zeroable>(items: &mut [T]) -> &mut [u8] {
    // SAFETY: `T: Zeroable` has no padding and is valid for every bit pattern, so each of
    // its bytes may be read and written as a `u8`; the view covers exactly the slice's
    // memory and borrows it exclusively for as long as `items`.
    unsafe { std::slice::from_raw_parts_mut(items.as_mut_ptr().cast::<u8>(), size_of_val(items)) }
}

// SAFETY: plain integers and atomics of them: zero is valid, no drop, small alignment.
unsafe impl Zeroable for u64 {}
// SAFETY: as above.
unsafe impl Zeroable for std::sync::atomic::AtomicU64 {}

/// A zeroed array of `T`, on the heap or in huge-page-advised anonymous memory. The pointer
/// and length are kept beside the owner, so an access is two loads and no branch on where
/// the memory came from (this is on every filter lookup's path).
pub(crate) struct ZeroedArray<T: Zeroable> {
    ptr: NonNull<T>,
    len: usize,
    owner: Owner,
}

/// Who frees the memory.
enum Owner {
    /// A leaked `Box<[T]>`, rebuilt and dropped in `Drop` (no `Box` is kept alive, so the
    /// pointer is never invalidated by moving a unique owner).
    Heap,
    /// The mapping; the pointer points into it and stays valid when it moves.
    Mapped { _map: MmapMut },
}

// SAFETY: the array owns its elements like a Box<[T]> does.
unsafe impl<T: Zeroable + Send> Send for ZeroedArray<T> {}
// SAFETY: shared access only hands out `&[T]`.
unsafe impl<T: Zeroable + Sync> Sync for ZeroedArray<T> {}

impl<T: Zeroable> ZeroedArray<T> {
    /// `len` zeroed elements; aborts, as `Vec` does, when the memory cannot be had.
    pub(crate) fn new(len: usize) -> Self {
        Self::allocate(len).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::array::<T>(len).expect("array size fits isize"),
            )
        })
    }

    /// `len` zeroed elements, or [`Error::OutOfMemory`](crate::Error::OutOfMemory) when
    /// the memory cannot be had (the size is beyond the address space, or the system
    /// refuses it): filters whose size comes from their caller or a file are made with
    /// this, so that an impossible size is an error rather than an abort.
    pub(crate) fn try_new(len: usize) -> crate::Result<Self> {
        Self::allocate(len).ok_or(crate::Error::OutOfMemory {
            bytes: (len as u64).saturating_mul(size_of::<T>() as u64),
        })
    }

    /// `len` zeroed elements, or `None` when the memory cannot be had.
    fn allocate(len: usize) -> Option<Self> {
        let layout = std::alloc::Layout::array::<T>(len).ok()?;
        let bytes = layout.size();
        if huge_pages_for(bytes)
            && let Some(mapped) = bytes.checked_add(HUGE_PAGE)
            && let Ok(mut map) = MmapMut::map_anon(mapped)
        {
            // The array starts at the first 2 MiB boundary in the mapping, so that every
            // whole 2 MiB of it can be one huge page (a mapping is only 4 KiB-aligned, and
            // a huge page must be aligned to its size). Only the array is advised: the
            // pages around it are never touched, and no huge page reaches past its end, so
            // the slack costs address space, not memory.
            let start = map.as_ptr() as usize;
            let offset = start.next_multiple_of(HUGE_PAGE) - start;
            #[cfg(target_os = "linux")]
            {
                // Only advice: without transparent huge pages the array works as well.
                let _ = map.advise_range(memmap2::Advice::HugePage, offset, bytes);
            }
            // The mapping is page-aligned and `offset` a multiple of the page size (so
            // the array is at least 4096-aligned, T's alignment by `Zeroable`);
            // `offset + bytes <= mapped` as offset < HUGE_PAGE; it is zeroed (valid `T`s)
            // and never null.
            let ptr = NonNull::new(map.as_mut_ptr().wrapping_add(offset).cast::<T>())
                .expect("a mapping is not null");
            return Some(Self {
                ptr,
                len,
                owner: Owner::Mapped { _map: map },
            });
        }
        if bytes == 0 {
            // No allocation: a dangling, aligned pointer, as an empty Box holds.
            // SAFETY: `T: Zeroable` makes all-zero memory a valid `[T]` (and there is none).
            return Some(Self::from_box(unsafe {
                Box::<[T]>::new_zeroed_slice(len).assume_init()
            }));
        }
        // SAFETY: the layout's size is not zero.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>())?;
        // SAFETY: the global allocator gave `bytes` zeroed bytes with the layout of `[T; len]`,
        // which is the layout a `Box<[T]>` of `len` elements frees with; all-zero memory is
        // a valid `[T]` (`T: Zeroable`).
        let elements = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), len)) };
        Some(Self::from_box(elements))
    }

    fn from_box(elements: Box<[T]>) -> Self {
        let len = elements.len();
        let ptr = NonNull::from(Box::leak(elements)).cast::<T>();
        Self {
            ptr,
            len,
            owner: Owner::Heap,
        }
    }
}

/// `len` zero bytes in a `Vec`, or [`Error::OutOfMemory`](crate::Error::OutOfMemory) when
/// the system refuses them. Taken zeroed from the allocator (as `vec![0; len]` is), so that
/// untouched pages stay unbacked, where `try_reserve` and `resize` would write every byte.
pub(crate) fn try_zeroed_vec(len: usize) -> crate::Result<Vec<u8>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let refused = || crate::Error::OutOfMemory { bytes: len as u64 };
    let layout = std::alloc::Layout::array::<u8>(len).map_err(|_| refused())?;
    // SAFETY: the layout's size is not zero.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(refused());
    }
    // SAFETY: the global allocator gave `len` zeroed bytes with the layout of `[u8; len]`,
    // which is what a `Vec<u8>` of capacity `len` frees with; all of them are initialised.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

impl<T: Zeroable> ZeroedArray<T> {
    /// The same memory as an array of `U`, without copying it, when `U` has `T`'s size and
    /// alignment (a plain word and its atomic twin: making a filter concurrent, or back,
    /// touched every page of it, so an empty 1 GB filter took 1 GB of memory for a
    /// moment); else `self` back.
    pub(crate) fn cast<U: Zeroable>(self) -> Result<ZeroedArray<U>, Self> {
        if size_of::<U>() != size_of::<T>() || align_of::<U>() != align_of::<T>() {
            return Err(self);
        }
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so its owner moves out of it exactly once, into
        // the new array. `ptr` points to `len` `T`s whose bytes are a valid `[U]` (`U:
        // Zeroable` is valid for every bit pattern, and has `T`'s size, so the same `len`
        // covers the same bytes, and its alignment, which `ptr` has). A heap array is freed
        // as a `Box<[U]>` of `len`, whose layout is the `Box<[T]>`'s it was allocated with.
        let owner = unsafe { std::ptr::read(&this.owner) };
        Ok(ZeroedArray {
            ptr: this.ptr.cast::<U>(),
            len: this.len,
            owner,
        })
    }
}

impl<T: Zeroable> Drop for ZeroedArray<T> {
    fn drop(&mut self) {
        if let Owner::Heap = self.owner {
            // SAFETY: `ptr` and `len` came from `Box::leak` of a `Box<[T]>` in `from_box`,
            // and nothing else frees it.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) });
        }
        // A mapping unmaps itself when `owner` drops.
    }
}

impl<T: Zeroable + Copy> ZeroedArray<T> {
    /// The elements of `elements`, moved to huge pages when the array is large.
    pub(crate) fn from_vec(elements: Vec<T>) -> Self {
        if huge_pages_for(elements.len() * size_of::<T>()) {
            let mut array = Self::new(elements.len());
            array.copy_from_slice(&elements);
            array
        } else {
            Self::from_box(elements.into_boxed_slice())
        }
    }
}

impl<T: Zeroable + PartialEq> PartialEq for ZeroedArray<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Zeroable + Eq> Eq for ZeroedArray<T> {}

impl<T: Zeroable> Deref for ZeroedArray<T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised elements owned by `self` (see `new` and
        // `from_box`), valid for as long as `self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> DerefMut for ZeroedArray<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable + Copy> Clone for ZeroedArray<T> {
    fn clone(&self) -> Self {
        let mut copy = Self::new(self.len());
        copy_nonzero_pages(bytes_mut(&mut copy), bytes_of(self));
        copy
    }
}

impl<T: Zeroable + Copy> TryClone for ZeroedArray<T> {
    fn try_clone(&self) -> crate::Result<Self> {
        let mut copy = Self::try_new(self.len())?;
        copy_nonzero_pages(bytes_mut(&mut copy), bytes_of(self));
        Ok(copy)
    }
}

/// A copy that the system may refuse the memory for, as an error where [`Clone`] aborts
/// the process.
///
/// A filter's copy is as large as the filter. Where the system refuses that memory (an
/// address-space limit, strict overcommit, or a host allocator that returns nothing, as a
/// Redis module's does with `RedisModule_TryAlloc`), `clone` ends the process, which in a
/// server ends every client's session; `try_clone` answers
/// [`Error::OutOfMemory`](crate::Error::OutOfMemory) and changes nothing. The filter type
/// of every variant implements it (the concurrent ones, made to be shared, do not), and
/// [`DynFilter::try_clone_box`] is the same for a filter of any variant.
///
/// Untouched pages of the original (all zero) are not written in the copy, so they stay
/// unbacked there too where the allocator hands out zeroed memory untouched (the system's
/// does for large arrays): an empty 1 GB filter's copy takes little more memory than the
/// original does.
///
/// [`DynFilter::try_clone_box`]: crate::any::DynFilter::try_clone_box
///
/// ```
/// use bloomery::{BloomFilter, TryClone};
///
/// let mut filter = BloomFilter::with_fpp(1000, 0.01)?;
/// filter.insert("kept");
/// let copy = filter.try_clone()?;
/// assert!(copy.contains("kept"));
/// assert_eq!(copy, filter);
/// # Ok::<(), bloomery::Error>(())
/// ```
pub trait TryClone: Sized {
    /// A copy, or [`Error::OutOfMemory`](crate::Error::OutOfMemory) when the system refuses
    /// its memory.
    fn try_clone(&self) -> crate::Result<Self>;
}

impl<T: TryClone> TryClone for Vec<T> {
    fn try_clone(&self) -> crate::Result<Self> {
        try_clone_all(self.iter())
    }
}

impl<T: TryClone> TryClone for std::collections::VecDeque<T> {
    fn try_clone(&self) -> crate::Result<Self> {
        try_clone_all(self.iter()).map(Self::from)
    }
}

/// [`TryClone`] for the struct `$type` whose fields are each [`TryClone`] (`fallible`) or
/// `Copy` (`copied`).
macro_rules! impl_try_clone {
    ($type:ty, fallible: [$($fallible:ident),*], copied: [$($copied:ident),*]) => {
        impl $crate::bits::TryClone for $type {
            fn try_clone(&self) -> $crate::Result<Self> {
                Ok(Self {
                    $($fallible: $crate::bits::TryClone::try_clone(&self.$fallible)?,)*
                    $($copied: self.$copied,)*
                })
            }
        }
    };
}
pub(crate) use impl_try_clone;

/// The memory of `items` as bytes.
fn bytes_of<T: Zeroable>(items: &[T]) -> &[u8] {
    // SAFETY: as in `bytes_mut`, shared.
    unsafe { std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), size_of_val(items)) }
}

/// Copies `from` into `to` (zeroed, of the same length) a page at a time, skipping the
/// pages of `from` that are all zero: those stay untouched in `to`, unbacked where the
/// allocator took them zeroed from the system.
fn copy_nonzero_pages(to: &mut [u8], from: &[u8]) {
    const PAGE: usize = 4096;
    static ZEROS: [u8; PAGE] = [0; PAGE];
    debug_assert_eq!(to.len(), from.len());
    for (to, from) in to.chunks_mut(PAGE).zip(from.chunks(PAGE)) {
        // A comparison with zeros is a memcmp: vectorised, and it stops at the first
        // byte set, where a byte loop's early exit is neither.
        if from != &ZEROS[..from.len()] {
            to.copy_from_slice(from);
        }
    }
}

/// A copy of `bytes` in a `Vec`, or [`Error::OutOfMemory`](crate::Error::OutOfMemory): taken
/// zeroed and only the pages that are not all zero written, as [`TryClone`] promises.
pub(crate) fn try_copy_bytes(bytes: &[u8]) -> crate::Result<Vec<u8>> {
    let mut copy = try_zeroed_vec(bytes.len())?;
    copy_nonzero_pages(&mut copy, bytes);
    Ok(copy)
}

/// The refusal of the memory of `count` values of `T`.
pub(crate) fn refused<T>(count: usize) -> crate::Error {
    crate::Error::OutOfMemory {
        bytes: (count as u64).saturating_mul(size_of::<T>() as u64),
    }
}

/// An empty `Vec` with room for `len` elements, or
/// [`Error::OutOfMemory`](crate::Error::OutOfMemory).
pub(crate) fn try_with_capacity<T>(len: usize) -> crate::Result<Vec<T>> {
    let mut elements = Vec::new();
    elements.try_reserve_exact(len).map_err(|_| refused::<T>(len))?;
    Ok(elements)
}

/// Copies of `elements`, or the first refusal.
fn try_clone_all<'a, T: TryClone + 'a>(
    elements: impl ExactSizeIterator<Item = &'a T>,
) -> crate::Result<Vec<T>> {
    let mut copies = try_with_capacity(elements.len())?;
    for element in elements {
        copies.push(element.try_clone()?);
    }
    Ok(copies)
}

/// `value` in a `Box`, or [`Error::OutOfMemory`](crate::Error::OutOfMemory) where
/// `Box::new` aborts (`Box::try_new` is not stable).
pub(crate) fn try_box<T>(value: T) -> crate::Result<Box<T>> {
    let layout = std::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Ok(Box::new(value)); // allocates nothing
    }
    // SAFETY: the layout's size is not zero.
    let ptr = unsafe { std::alloc::alloc(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(crate::Error::OutOfMemory {
            bytes: layout.size() as u64,
        });
    }
    // SAFETY: `ptr` is valid for a write of `T` and aligned for it (the global allocator
    // gave `T`'s layout), and a `Box<T>` frees with that layout from the global allocator.
    unsafe {
        ptr.write(value);
        Ok(Box::from_raw(ptr))
    }
}

/// A copy of `elements` (plain values), or [`Error::OutOfMemory`](crate::Error::OutOfMemory).
pub(crate) fn try_copy_slice<T: Copy>(elements: &[T]) -> crate::Result<Vec<T>> {
    let mut copy = try_with_capacity(elements.len())?;
    copy.extend_from_slice(elements);
    Ok(copy)
}

impl<T: Zeroable + std::fmt::Debug> std::fmt::Debug for ZeroedArray<T> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ZeroedArray")
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cast_keeps_the_memory_and_its_contents() {
        use std::sync::atomic::{AtomicU64, Ordering};
        for len in [0, 3, (4 << 20) / 8] {
            let mut words = ZeroedArray::<u64>::new(len);
            for (index, word) in words.iter_mut().enumerate() {
                *word = index as u64 * 0x9e37_79b9;
            }
            let before = words.as_ptr() as usize;
            let atomic: ZeroedArray<AtomicU64> = words.cast().expect("same layout");
            assert_eq!(atomic.as_ptr() as usize, before, "not copied");
            assert!(
                atomic
                    .iter()
                    .enumerate()
                    .all(|(index, word)| word.load(Ordering::Relaxed) == index as u64 * 0x9e37_79b9)
            );
            let back: ZeroedArray<u64> = atomic.cast().expect("same layout");
            assert_eq!(back.len(), len);
        }
        let small = ZeroedArray::<u64>::new(2);
        assert!(
            small.cast::<crate::blocked::Block>().is_err(),
            "another size is refused"
        );
    }

    #[test]
    fn small_and_large_arrays_start_zeroed_and_hold_writes() {
        for len in [1, 1000, HUGE_PAGE_THRESHOLD / 8 + 3] {
            let mut array = ZeroedArray::<u64>::new(len);
            assert_eq!(array.len(), len);
            assert!(array.iter().all(|&word| word == 0));
            array[len - 1] = 7;
            let copy = array.clone();
            assert_eq!(copy[len - 1], 7);
            assert_eq!(&*copy, &*array);
        }
        assert!(matches!(
            ZeroedArray::<u64>::new(HUGE_PAGE_THRESHOLD / 8).owner,
            Owner::Mapped { .. }
        ));
        assert!(matches!(ZeroedArray::<u64>::new(1000).owner, Owner::Heap));
        // A mapped array starts on a huge-page boundary, so that all of it can be huge pages.
        let mapped = ZeroedArray::<u64>::new(HUGE_PAGE_THRESHOLD / 8 + 1);
        assert!(matches!(mapped.owner, Owner::Mapped { .. }));
        assert_eq!(mapped.as_ptr() as usize % HUGE_PAGE, 0);
        let from_vec = ZeroedArray::from_vec(vec![5u64; 10]);
        assert!(matches!(from_vec.owner, Owner::Heap) && from_vec.iter().all(|&word| word == 5));
    }
}
