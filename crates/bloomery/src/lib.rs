//! # bloomery
//!
//! Bloom filters: a bit array and k hash functions that answer "definitely not in the set"
//! or "probably in the set", in a fraction of the memory of an exact set. For n items and a
//! false-positive probability p the optimal filter has m = -n ln p / (ln 2)^2 bits
//! (9.59 bits per item at 1%) and k = (m/n) ln 2 hash functions ([`sizing`]).
//!
//! - [`BloomFilter`]: the classic filter, bit for bit Guava's `BloomFilter` (murmur3_128,
//!   MITZ_64 double hashing, the `writeTo`/`readFrom` bytes), so a Java service and a Rust
//!   service can share one filter; [`AtomicBloomFilter`] is its lock-free twin that many
//!   threads insert into through `&self`.
//! - [`BlockedBloomFilter`]: the fast filter: each item in one 64-byte cache line, SIMD
//!   kernels, batched lookups with prefetch, exact sizing for the blocked layout; and its
//!   lock-free twin [`AtomicBlockedBloomFilter`].
//! - [`SplitBlockBloomFilter`]: bit for bit Apache Parquet's Split Block Bloom Filter
//!   (256-bit blocks, XXH64), so filters move in and out of Parquet files; hashed with
//!   XXH3 instead ([`split_block::SplitBlockHasher`]), the same layout is the single-lookup
//!   filter for machines whose widest vectors are AVX2 (a block in one register).
//! - Filters that delete, grow, forget and age: [`CountingBloomFilter`] (4-bit counters,
//!   remove), [`ScalableBloomFilter`] (grows at a bounded rate), [`RetouchedBloomFilter`]
//!   (clears known false positives, reporting the false negatives this makes),
//!   [`AllowlistedBloomFilter`] (lists known false positives exactly),
//!   [`RotatingBloomFilter`] (generations for endless streams).
//! - [`sharding::ShardPlan`]: one logical filter over many blocked shards (e.g. Redis keys
//!   on the nodes of a cluster), every item whole in one shard.
//! - [`Funnel`]: how an item becomes the bytes that are hashed (Guava's `Funnel`); built in
//!   for strings, integers and byte slices, and easy to write for your own types.
//!
//! ```
//! use bloomery::BloomFilter;
//!
//! let mut seen = BloomFilter::with_fpp(1_000_000, 0.01)?;
//! for url in ["https://a.example/", "https://b.example/", "https://a.example/"] {
//!     if seen.contains(url) {
//!         println!("probably seen: {url}");
//!     } else {
//!         seen.insert(url);
//!     }
//! }
//! // Share it with Java: Guava's BloomFilter.readFrom reads these bytes.
//! let bytes = seen.to_guava_bytes();
//! assert_eq!(BloomFilter::from_guava_bytes(&bytes)?, seen);
//! # Ok::<(), bloomery::Error>(())
//! ```
//!
//! An inserted item is reported present, with no false negatives, except where the caller
//! asks for them: the retouched filter's `remove_false_positive` clears bits that inserted
//! items need (it reports which items it lost); a counting filter's `remove` of an item
//! that was never inserted (or removed more often than inserted) but answers present, a
//! false positive, takes counts that inserted items need and can make them answer absent;
//! an allow-listed filter's `allow` of an inserted item hides it; and a rotating filter
//! forgets the generations it drops.

// A library writes nothing to standard output or error (its callers own them), and
// `println!`/`eprintln!` panic when the stream is full or closed.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod allowlist;
pub mod any;
pub mod bits;
pub mod blocked;
pub mod classic;
pub mod counting;
mod error;
#[cfg(unix)]
pub mod file;
pub mod format;
pub mod hash;
pub mod in_place;
pub mod redisbloom;
pub mod retouched;
pub mod rotating;
pub mod scalable;
pub mod scalable_blocked;
pub mod sharding;
pub mod sizing;
pub mod split_block;

pub use allowlist::AllowlistedBloomFilter;
pub use bits::TryClone;
pub use blocked::{AtomicBlockedBloomFilter, BlockedBloomFilter};
pub use classic::{AtomicBloomFilter, BloomFilter, ClassicFilter};
pub use counting::CountingBloomFilter;
pub use error::{Error, FormatProblem, Result};
pub use hash::{Funnel, Sink, UnencodedChars, Utf16Units};
pub use retouched::{ClearingScheme, RetouchedBloomFilter};
pub use rotating::RotatingBloomFilter;
pub use scalable::{ScalableBloomFilter, ScalableOptions};
pub use split_block::SplitBlockBloomFilter;

/// What the in-memory filters do with items of type `T`, so code is written once against
/// it. Its companion [`FilterStats`] reports the filter's state, whatever the item type.
///
/// Implemented by [`BloomFilter`], [`BlockedBloomFilter`], [`SplitBlockBloomFilter`],
/// [`CountingBloomFilter`], [`RetouchedBloomFilter`], [`AllowlistedBloomFilter`],
/// [`RotatingBloomFilter`] and [`ScalableBloomFilter`]; not by the views of files, the
/// atomic filters ([`AtomicBloomFilter`], [`AtomicBlockedBloomFilter`]: their inserts take
/// `&self`), [`ScalableBlockedBloomFilter`](scalable_blocked::ScalableBlockedBloomFilter)
/// or [`RedisBloomFilter`](redisbloom::RedisBloomFilter). The tools (the CLI, the Redis
/// module, the Python package) work through [`any::DynFilter`] instead, which every saved
/// variant ([`format::native::Variant`]) implements.
///
/// ```
/// use bloomery::{BloomFilter, Filter, FilterStats};
///
/// fn load<F: Filter<str>>(filter: &mut F, lines: &str) -> bloomery::Result<()> {
///     for line in lines.lines() {
///         filter.insert(line)?;
///     }
///     Ok(())
/// }
///
/// let mut filter = BloomFilter::with_fpp(100, 0.01)?;
/// load(&mut filter, "a\nb\nc")?;
/// assert!(Filter::contains(&filter, "b"));
/// assert_eq!(filter.estimated_len(), 3);
/// # Ok::<(), bloomery::Error>(())
/// ```
pub trait Filter<T: ?Sized> {
    /// Adds `item`; returns whether it was new: `true` when the filter answered "absent"
    /// for it just before this insert, `false` when it was found (inserted before, or a
    /// false positive). A rotating filter answers as
    /// [`contains_at`](RotatingBloomFilter::contains_at) at the insert's time. The filter
    /// may change either way: a counting filter counts every insert, a rotating filter
    /// copies a found item into its newest generation (starting one first when due).
    ///
    /// An error when the filter cannot take the item (full, or unable to grow): then the
    /// item was not added, and may well answer "absent".
    ///
    /// ```
    /// use bloomery::{CountingBloomFilter, Filter};
    ///
    /// let mut filter = CountingBloomFilter::with_fpp(100, 0.01)?;
    /// assert!(Filter::<str>::insert(&mut filter, "a")?);
    /// assert!(!Filter::<str>::insert(&mut filter, "a")?); // found, though counted again
    /// assert_eq!(filter.count("a"), 2);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    fn insert(&mut self, item: &T) -> Result<bool>;

    /// Whether `item` might be present: `true` is wrong with probability about
    /// [`FilterStats::expected_fpp`]; `false` is certain except where the caller asked for
    /// false negatives (removals, an allow list, a rotating filter's dropped generations:
    /// see the [crate documentation](crate)).
    fn contains(&self, item: &T) -> bool;
}

/// The state of a filter, whatever it holds.
pub trait FilterStats {
    /// An estimate of the number of distinct items inserted.
    fn estimated_len(&self) -> u64;

    /// The probability that a fresh item is reported present, as the filter is now.
    fn expected_fpp(&self) -> f64;

    /// The bytes the filter's bits or counters take in memory.
    fn memory_bytes(&self) -> usize;
}
