//! Arrays of blocks, the storage of the filters that put all of an item's bits in one
//! block: the blocked filter's 512-bit cache lines and the split-block filter's 256-bit
//! Parquet blocks. What they share lives here once: the block an item's hash picks, the
//! table of a kernel's operations chosen once per process, and the batch loops that
//! prefetch ahead.
//!
//! A kernel's operations are whole (block index, masks, load and test in one function,
//! compiled for the kernel's CPU features) and reached through one indirect call: no
//! feature test or branch per call. Measured with callgrind on 64-byte URL keys
//! (`scripts/url-lookup-instructions.sh`): 28.4 instructions per operation beyond the hash
//! with this table, against 29.4 with a match on the kernel per call, an overflow check
//! and a bounds check (all three gone now); 27.1 once the AVX2 lookup shifted the lanes
//! instead of building masks.

/// The largest filter, in bytes, whose single lookups read a block in one wide load (the
/// blocked filter's x86 kernels' `contains_in_cache`); larger ones read it in quarters
/// (`crate::blocked::kernel::load_halves_in_quarters`). It is the L2 cache of one core as
/// the CPU reports it, read once per process, so that such a filter's blocks are usually in
/// L2 or L1; where the CPU does not say, 1 MiB (one core's L2 on AMD's Zen 4).
///
/// Where that matters: the blocked filter of 10^6 items at 1% is 1.27 MB, which fits the
/// 2 MiB L2 of the Intel Xeons of docs/benchmarks.md but not Zen 4's. On the Xeon of runs
/// Y, Z and AA there, its single lookups of present keys went from 0.93x sbbf-rs-safe's
/// speed with the quarters (one run) to 0.97-1.03x with the wide load (three runs).
///
/// ```
/// let bytes = bloomery::bits::blocks::in_cache_bytes();
/// assert!(bytes >= 64 * 1024);
/// ```
pub fn in_cache_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| reported_l2_bytes().unwrap_or(DEFAULT_IN_CACHE_BYTES))
}

/// [`in_cache_bytes`] where the CPU does not report its L2.
const DEFAULT_IN_CACHE_BYTES: usize = 1 << 20;

/// One core's L2 cache in bytes, as CPUID leaf 8000_0006h reports it (ECX bits 31-16, in
/// KiB; Intel and AMD both fill it), if the CPU has the leaf and the size is plausible
/// (64 KiB to 64 MiB: a hypervisor may report zero).
#[cfg(target_arch = "x86_64")]
fn reported_l2_bytes() -> Option<usize> {
    let kib = extended_cpuid(0x8000_0006)?.ecx >> 16;
    (64..=64 * 1024).contains(&kib).then_some(kib as usize * 1024)
}

#[cfg(not(target_arch = "x86_64"))]
fn reported_l2_bytes() -> Option<usize> {
    None
}

/// CPUID's answer for the extended `leaf` (8000_0000h and up), if the CPU has that leaf
/// (leaf 8000_0000h's EAX is the highest one it has).
#[cfg(target_arch = "x86_64")]
fn extended_cpuid(leaf: u32) -> Option<std::arch::x86_64::CpuidResult> {
    use std::arch::x86_64::__cpuid;
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86_64 CPU, and every leaf may be asked for (an
    // unsupported one answers with another leaf's data, hence the check).
    unsafe {
        (__cpuid(0x8000_0000).eax >= leaf).then(|| __cpuid(leaf))
    }
}

/// A kernel's operations on blocks of type `B`, each compiled for the kernel's CPU
/// features.
pub(crate) struct Ops<B: 'static> {
    /// SAFETY contract of every entry: `blocks` is not empty, and the CPU has the
    /// kernel's features (guaranteed by [`BlockKernel::new`]'s callers).
    pub(crate) insert: unsafe fn(&mut [B], u64) -> bool,
    pub(crate) contains: unsafe fn(&[B], u64) -> bool,
    pub(crate) insert_batch: unsafe fn(&mut [B], &[u64]),
    pub(crate) contains_batch: unsafe fn(&[B], &[u64], &mut [bool]),
}

/// Which implementation sets and tests an item's bits in a block of type `B`. All of a
/// block type's kernels give identical bits and answers (each filter's kernel proptest);
/// only speed differs. A kernel other than the scalar one can only be obtained where the
/// CPU supports it. The filters name their own: [`crate::blocked::Kernel`] and
/// [`crate::split_block::Kernel`].
pub struct BlockKernel<B: 'static> {
    name: &'static str,
    ops: &'static Ops<B>,
    /// The operations for a filter whose blocks are usually in cache (the same as `ops`
    /// for kernels without such a variant); [`BlockKernel::for_blocks`] picks.
    in_cache: &'static Ops<B>,
}

impl<B> Clone for BlockKernel<B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for BlockKernel<B> {}

impl<B> PartialEq for BlockKernel<B> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl<B> Eq for BlockKernel<B> {}

impl<B> std::hash::Hash for BlockKernel<B> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl<B> std::fmt::Debug for BlockKernel<B> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name)
    }
}

impl<B> BlockKernel<B> {
    /// A kernel named `name` with the operations `ops`.
    ///
    /// # Safety
    /// The CPU must have every feature `ops` was compiled for.
    pub(crate) const unsafe fn new(name: &'static str, ops: &'static Ops<B>) -> Self {
        Self {
            name,
            ops,
            in_cache: ops,
        }
    }

    /// A kernel named `name` with the operations `ops`, and `in_cache` for filters of at
    /// most [`in_cache_bytes`] (see [`BlockKernel::for_blocks`]).
    ///
    /// # Safety
    /// The CPU must have every feature `ops` and `in_cache` were compiled for.
    #[cfg(target_arch = "x86_64")]
    pub(crate) const unsafe fn sized(
        name: &'static str,
        ops: &'static Ops<B>,
        in_cache: &'static Ops<B>,
    ) -> Self {
        Self { name, ops, in_cache }
    }

    /// The same kernel for a filter of `num_blocks` blocks: with its in-cache operations
    /// when the blocks take at most [`in_cache_bytes`]. Chosen once per filter; the answers
    /// and bits are the same either way (each filter's kernel proptest runs both).
    pub(crate) fn for_blocks(self, num_blocks: usize) -> Self {
        let in_cache = num_blocks.saturating_mul(std::mem::size_of::<B>()) <= in_cache_bytes();
        Self {
            ops: if in_cache { self.in_cache } else { self.ops },
            ..self
        }
    }

    /// The kernel's name ("scalar", "avx2", "avx512", "neon").
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Of `available` (slowest first), the one the environment variable
    /// `BLOOMERY_KERNEL` names, if any (to measure what a CPU without the faster ones
    /// would do), else the fastest.
    pub(crate) fn choose(available: &[Self]) -> Option<Self> {
        let wanted = std::env::var("BLOOMERY_KERNEL").ok();
        wanted
            .and_then(|name| available.iter().copied().find(|kernel| kernel.name == name))
            .or_else(|| available.last().copied())
    }

    /// Adds the item with `hash` to `blocks`; returns whether any bit changed. Panics if
    /// `blocks` is empty (the filters never are).
    #[inline(always)]
    pub(crate) fn insert(self, blocks: &mut [B], hash: u64) -> bool {
        assert!(!blocks.is_empty());
        // SAFETY: blocks is not empty; the CPU has `ops`'s features (BlockKernel::new).
        unsafe { (self.ops.insert)(blocks, hash) }
    }

    /// Whether the item with `hash` may be in `blocks` (false when there are none).
    #[inline(always)]
    pub(crate) fn contains(self, blocks: &[B], hash: u64) -> bool {
        // The filters never hold zero blocks; the check is one well-predicted branch.
        if blocks.is_empty() {
            return false;
        }
        // SAFETY: as in `insert`.
        unsafe { (self.ops.contains)(blocks, hash) }
    }

    /// Adds every hash, prefetching ahead. Panics if `blocks` is empty.
    pub(crate) fn insert_batch(self, blocks: &mut [B], hashes: &[u64]) {
        assert!(!blocks.is_empty());
        // SAFETY: as in `insert`.
        unsafe { (self.ops.insert_batch)(blocks, hashes) }
    }

    /// Adds every hash in order, prefetching ahead, and says for each whether it changed a
    /// bit (`new`, one slot per hash): an item given twice is new the first time only.
    /// Panics if `blocks` is empty or the lengths differ.
    pub(crate) fn insert_batch_reporting(self, blocks: &mut [B], hashes: &[u64], new: &mut [bool]) {
        assert!(!blocks.is_empty());
        assert_eq!(hashes.len(), new.len(), "one answer per hash");
        let mut slots = new.iter_mut();
        for_each_to_write(blocks, hashes, |blocks, hash| {
            if let Some(slot) = slots.next() {
                *slot = self.insert(blocks, hash);
            }
        });
    }

    /// Looks up every hash, prefetching ahead; `results` has one slot per hash.
    pub(crate) fn contains_batch(self, blocks: &[B], hashes: &[u64], results: &mut [bool]) {
        if blocks.is_empty() {
            results.fill(false);
            return;
        }
        // SAFETY: as in `insert`.
        unsafe { (self.ops.contains_batch)(blocks, hashes, results) }
    }
}

/// The block an item's hash picks: multiply-shift of the hash's high 32 bits (Lemire,
/// "A fast alternative to the modulo reduction", 2016; Parquet's SBBF specifies the same),
/// so up to 2^32 blocks without a division. Always below `num_blocks` when that is at
/// least 1: (h >> 32) < 2^32, so the product is below num_blocks · 2^32. The product
/// cannot wrap (both factors are at most 2^32, and h >> 32 below it), so the wrapping
/// multiply only spares an overflow check.
#[inline(always)]
pub(crate) fn block_index(hash: u64, num_blocks: usize) -> usize {
    ((hash >> 32).wrapping_mul(num_blocks as u64) >> 32) as usize
}

/// The 32 bits of the hash that pick the bits inside the block.
#[inline(always)]
pub(crate) fn block_key(hash: u64) -> u32 {
    hash as u32
}

/// The block `hash` picks, without a bounds check.
///
/// # Safety
/// `blocks` must not be empty (then [`block_index`] is in range).
#[inline(always)]
pub(crate) unsafe fn block_of<B>(blocks: &[B], hash: u64) -> &B {
    debug_assert!(!blocks.is_empty());
    // SAFETY: block_index(h, n) < n for n >= 1 (see block_index), as the caller promises.
    unsafe { blocks.get_unchecked(block_index(hash, blocks.len())) }
}

/// As [`block_of`], mutably.
///
/// # Safety
/// As [`block_of`].
#[inline(always)]
pub(crate) unsafe fn block_of_mut<B>(blocks: &mut [B], hash: u64) -> &mut B {
    debug_assert!(!blocks.is_empty());
    let index = block_index(hash, blocks.len());
    // SAFETY: as in `block_of`.
    unsafe { blocks.get_unchecked_mut(index) }
}

/// How many items ahead the batch loops prefetch: while item i is tested, the block of item
/// i + PREFETCH_DISTANCE is requested, so that many misses stay in flight all the time
/// (a rolling window rather than groups, which would drain between groups).
pub(crate) const PREFETCH_DISTANCE: usize = 64;

/// Hashes the batch APIs compute ahead of the kernel loop, per call (on the stack).
pub(crate) const HASH_CHUNK: usize = 512;

/// Hashes `items` a chunk of [`HASH_CHUNK`] at a time and hands each chunk's hashes to
/// `each` with the chunk's offset, so the kernels' batch loops can prefetch ahead of
/// hashes already computed.
#[inline(always)]
pub(crate) fn for_hash_chunks<T>(items: &[T], hash: impl Fn(&T) -> u64, mut each: impl FnMut(usize, &[u64])) {
    let mut hashes = [0u64; HASH_CHUNK];
    for (index, chunk) in items.chunks(HASH_CHUNK).enumerate() {
        for (slot, item) in hashes.iter_mut().zip(chunk) {
            *slot = hash(item);
        }
        each(index * HASH_CHUNK, &hashes[..chunk.len()]);
    }
}

/// Asks for the block `hash` picks, without a bounds check (a prefetch never faults).
#[inline(always)]
pub(crate) fn prefetch_block<B>(blocks: &[B], hash: u64) {
    prefetch(blocks.as_ptr().wrapping_add(block_index(hash, blocks.len())));
}

/// Asks for the block `hash` picks, as [`prefetch_block`], but with the intent to write it
/// (`PREFETCHW`: the line arrives owned, so the store that follows need not ask for it
/// again). Only where [`has_prefetchw`] says the CPU has the instruction.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_block_for_write<B>(blocks: &[B], hash: u64) {
    // Base and byte offset apart, so that the address is one addressing mode (as for the
    // other hints) rather than an addition before the instruction.
    let offset = block_index(hash, blocks.len()) * std::mem::size_of::<B>();
    // SAFETY: a prefetch is a hint that never faults, whatever the address, and touches no
    // register or memory the compiler knows of; callers run it only where the CPU reports
    // PREFETCHW (has_prefetchw).
    unsafe {
        std::arch::asm!(
            "prefetchw [{0} + {1}]",
            in(reg) blocks.as_ptr(),
            in(reg) offset,
            options(nostack, readonly, preserves_flags),
        );
    }
}

/// Whether this CPU has `PREFETCHW` (CPUID 8000_0001h, ECX bit 8: every AMD64 CPU, Intel's
/// since Broadwell), read once per process.
#[cfg(target_arch = "x86_64")]
fn has_prefetchw() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| extended_cpuid(0x8000_0001).is_some_and(|answer| answer.ecx & (1 << 8) != 0))
}

/// A handle on a filter's blocks that the insert walk can prefetch from: `&mut [B]` for the
/// plain filters, `&[B]` for blocks of atomics, written through a shared borrow.
pub(crate) trait BlocksToWrite<B> {
    /// The blocks, to compute addresses to prefetch.
    fn blocks(&self) -> &[B];
}

impl<B> BlocksToWrite<B> for &mut [B] {
    #[inline(always)]
    fn blocks(&self) -> &[B] {
        self
    }
}

impl<B> BlocksToWrite<B> for &[B] {
    #[inline(always)]
    fn blocks(&self) -> &[B] {
        self
    }
}

/// Calls `each` with every hash in order, having asked for the block of the hash
/// [`PREFETCH_DISTANCE`] places on: the loop of the batch inserts. The blocks are about to
/// be written, so the hint is `PREFETCHW` where the CPU has it (checked once per call, not
/// per hash).
#[inline(always)]
pub(crate) fn for_each_to_write<B, S: BlocksToWrite<B>>(
    blocks: S,
    hashes: &[u64],
    each: impl FnMut(&mut S, u64),
) {
    #[cfg(target_arch = "x86_64")]
    if has_prefetchw() {
        return walk_prefetching::<B, S, true>(blocks, hashes, each);
    }
    walk_prefetching::<B, S, false>(blocks, hashes, each);
}

/// [`for_each_to_write`] with the hint chosen: `PREFETCHW` when `FOR_WRITE` (x86 only),
/// else [`prefetch_block`]'s. As in `batch_contains`, the first `len - ahead` hashes ask
/// for the block `ahead` places on, walked as zipped slices so that the loop keeps its
/// state in registers.
#[inline(always)]
fn walk_prefetching<B, S: BlocksToWrite<B>, const FOR_WRITE: bool>(
    mut blocks: S,
    hashes: &[u64],
    mut each: impl FnMut(&mut S, u64),
) {
    let ask = |blocks: &[B], hash: u64| {
        #[cfg(target_arch = "x86_64")]
        if FOR_WRITE {
            prefetch_block_for_write(blocks, hash);
            return;
        }
        prefetch_block(blocks, hash);
    };
    let ahead = PREFETCH_DISTANCE.min(hashes.len());
    for &hash in &hashes[..ahead] {
        ask(blocks.blocks(), hash);
    }
    let (prefetching, last) = hashes.split_at(hashes.len() - ahead);
    for (&hash, &later) in prefetching.iter().zip(&hashes[ahead..]) {
        ask(blocks.blocks(), later);
        each(&mut blocks, hash);
    }
    for &hash in last {
        each(&mut blocks, hash);
    }
}

/// The batch insert loop, shared by the kernels: [`for_each_to_write`], setting bits with
/// `insert(block, key)`. Does nothing without blocks.
#[inline(always)]
pub(crate) fn batch_insert<B>(blocks: &mut [B], hashes: &[u64], insert: impl Fn(&mut B, u32) -> bool) {
    if blocks.is_empty() {
        return;
    }
    for_each_to_write(blocks, hashes, |blocks, hash| {
        // SAFETY: blocks is not empty (checked above).
        insert(unsafe { block_of_mut(blocks, hash) }, block_key(hash));
    });
}

/// The batch lookup loop, shared by the kernels: every answer false without blocks.
#[inline(always)]
pub(crate) fn batch_contains<B>(
    blocks: &[B],
    hashes: &[u64],
    results: &mut [bool],
    contains: impl Fn(&B, u32) -> bool,
) {
    if blocks.is_empty() {
        results.fill(false);
        return;
    }
    let len = hashes.len().min(results.len());
    let (hashes, results) = (&hashes[..len], &mut results[..len]);
    // The first `len - ahead` items prefetch the block of the item `ahead` places on; the
    // last `ahead` have no item that far on. Three zips of slices, not an index and a
    // `get`, so that the loop keeps its state in registers (with `enumerate` and `get` the
    // compiler kept the iterators on the stack: 33 instructions an item in the AVX-512 loop
    // instead of 21).
    let ahead = PREFETCH_DISTANCE.min(len);
    for &hash in &hashes[..ahead] {
        prefetch_block(blocks, hash);
    }
    let (prefetching, last) = results.split_at_mut(len - ahead);
    let test = |result: &mut bool, hash: u64| {
        // SAFETY: blocks is not empty (checked above).
        *result = contains(unsafe { block_of(blocks, hash) }, block_key(hash));
    };
    for ((result, &hash), &later) in prefetching.iter_mut().zip(hashes).zip(&hashes[ahead..]) {
        prefetch_block(blocks, later);
        test(result, hash);
    }
    for (result, &hash) in last.iter_mut().zip(&hashes[len - ahead..]) {
        test(result, hash);
    }
}

/// Asks the CPU to start loading the cache line at `address` into L2 (a hint; never
/// faults). L2, not L1: an L2 keeps more misses in flight than L1's few fill buffers, so
/// a deep prefetch window is not capped by them. The line moves on to L1 when the kernel
/// touches it, by then a short L2 hit. (The batch rows of docs/benchmarks.md, runs G and
/// H, are measured with this hint.)
#[inline(always)]
pub(crate) fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint that never faults, whatever the address; SSE is part of
    // the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(address.cast());
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: PRFM is a hint that never faults, whatever the address, and touches no
    // register or memory the compiler knows of.
    unsafe {
        std::arch::asm!("prfm pldl2keep, [{0}]", in(reg) address, options(nostack, readonly, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel takes its in-cache operations exactly for filters of at most
    /// `in_cache_bytes()`.
    #[test]
    fn the_in_cache_operations_go_to_filters_that_fit_l2() {
        let limit = in_cache_bytes();
        let block = std::mem::size_of::<crate::blocked::Block>();
        for kernel in crate::blocked::Kernel::available() {
            let fits = kernel.for_blocks(limit / block);
            let larger = kernel.for_blocks(limit / block + 1);
            assert!(std::ptr::eq(fits.ops, kernel.in_cache), "{}", kernel.name());
            assert!(std::ptr::eq(larger.ops, kernel.ops), "{}", kernel.name());
        }
    }

    /// Both hints' walks (the one this CPU does not take included) call `each` with every
    /// hash once, in order, whatever the length against the prefetch distance.
    #[test]
    fn the_insert_walk_visits_every_hash_in_order() {
        let mut blocks = vec![0u64; 97];
        for len in [
            0,
            1,
            PREFETCH_DISTANCE - 1,
            PREFETCH_DISTANCE,
            PREFETCH_DISTANCE + 1,
            1000,
        ] {
            let hashes: Vec<u64> = (0..len as u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .collect();
            let mut seen = Vec::new();
            walk_prefetching::<_, &mut [u64], false>(&mut blocks, &hashes, |_, hash| seen.push(hash));
            assert_eq!(seen, hashes, "read hint, {len} hashes");
            #[cfg(target_arch = "x86_64")]
            if has_prefetchw() {
                seen.clear();
                walk_prefetching::<_, &mut [u64], true>(&mut blocks, &hashes, |_, hash| seen.push(hash));
                assert_eq!(seen, hashes, "PREFETCHW, {len} hashes");
            }
        }
    }
}
