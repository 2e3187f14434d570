//! bloomery's filters against the best Rust peers and the physical limit, in one run.
//!
//! `cargo bench -p bloomery --bench compare` (about 10 minutes on 2 cores); `-- --quick`
//! measures only n = 10^6 and 10^7. For each workload (u64 keys at n = 10^6, 10^7, 10^8,
//! and 64-byte URL-like keys at n = 10^7, all at p = 1%) it builds each filter REPS times
//! and reports medians: ns per insert, per lookup of a present key and of an absent key,
//! the measured false-positive rate and the bits per key. Lookups probe up to 10^7 present
//! and 10^7 absent keys. Two rows are the physical limits, per key the same hash and block
//! index as the blocked filter, then one 64-bit read from an array of the blocked filter's
//! size: "random reads, independent" hashes a chunk of keys first and then reads, so as
//! many reads are in flight as the memory system allows (the limit of batch calls);
//! "random reads, dependent" makes each address depend on the word read before, so every
//! read waits for the last (the latency limit, what a chain of lookups pays). When `java` and Guava's jar are present (benches/guava/run.sh installs
//! them), Guava's own BloomFilter is measured with the same keys on the JVM.
//!
//! The ratios to sbbf-rs-safe that issue 13's targets ask for come from a separate
//! head-to-head section: PAIRED_ROUNDS rounds, each measuring sbbf-rs-safe and the blocked
//! filter with every SIMD kernel the CPU has (so an AVX-512 machine also reports what an
//! AVX2-only one would run), in an order whose start and step change from round to round,
//! with the ratio taken within each round. Each contender fills a fresh filter, then fills
//! it again after clearing it: the second fill is the "insert" of the targets (memory
//! resident, as in a long-lived filter), the first is shown beside it with the system time
//! its page faults took (`time_once` says why).
//! The split-block filter (Parquet's 256-bit blocks, sbbf-rs-safe's layout) is a contender
//! there twice, on its two item roads: XXH3-64 (`SplitBlockHasher::Xxh3`, the blocked
//! filter's hash, which sbbf-rs-safe is fed here too) and Parquet's XXH64 (both have
//! tables rows too). The head to head is also run at n = 10^5,
//! where every filter fits in L2 and what is left is each kernel's own work.

use std::hash::Hash;
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use bloomery::hash::xxh3_64_item;
use bloomery::sizing::split_block_num_blocks;
use bloomery::split_block::SplitBlockHasher;
use bloomery::{AtomicBlockedBloomFilter, BlockedBloomFilter, BloomFilter, Funnel, SplitBlockBloomFilter};

#[path = "common/system_time.rs"]
mod system_time;
use system_time::system_cpu_ms;

const FPP: f64 = 0.01;
const MAX_PROBES: usize = 10_000_000;
const REPS: usize = 3;

/// splitmix64 (Steele, Lea & Flood, 2014): the key stream, identical in the Java harness.
use bloomery::hash::splitmix64 as splitmix;

/// The seeds of the inserted and the absent key streams (shared with GuavaBench.java).
const INSERT_SEED: u64 = 1;
const ABSENT_SEED: u64 = 0x5555_5555_5555_5555;

fn u64_keys(seed: u64, count: usize) -> Vec<u64> {
    let mut state = seed;
    (0..count).map(|_| splitmix(&mut state)).collect()
}

/// 64-byte URL-like keys: "https://example.com/" and 44 random path characters.
fn url_keys(seed: u64, count: usize) -> Vec<[u8; 64]> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789/-_.";
    let mut state = seed;
    (0..count)
        .map(|_| {
            let mut key = [0u8; 64];
            key[..20].copy_from_slice(b"https://example.com/");
            let mut bits = 0u64;
            for (i, byte) in key[20..].iter_mut().enumerate() {
                if i % 10 == 0 {
                    bits = splitmix(&mut state);
                }
                *byte = ALPHABET[(bits % ALPHABET.len() as u64) as usize];
                bits /= ALPHABET.len() as u64;
            }
            key
        })
        .collect()
}

/// What the benchmark does with a filter over keys `K`.
trait Subject<K> {
    fn insert_all(&mut self, keys: &[K]);
    fn count_present(&self, keys: &[K]) -> usize;
    fn num_bits(&self) -> u64;
}

struct Blocked(BlockedBloomFilter);
struct BlockedBatch(BlockedBloomFilter);
struct Classic(BloomFilter);
/// bloomery's Parquet split-block filter (256-bit blocks, like sbbf-rs-safe), on its own
/// item road (XXH64 of the item's bytes, seed 0, as Parquet hashes).
struct SplitBlock(SplitBlockBloomFilter);
/// The same layout on its other item road, XXH3-64 with seed 0 (`SplitBlockHasher::Xxh3`,
/// the blocked filter's item hash, which sbbf-rs-safe is fed here too), so that its ratio
/// compares layouts and kernels, not hash functions (XXH64 of a 64-byte key costs far more
/// than XXH3).
struct SplitBlockXxh3(SplitBlockBloomFilter);
struct FastBloom(fastbloom::BloomFilter<foldhash::fast::RandomState>);
/// sbbf-rs-safe fed the blocked filter's own hash (XXH3-64 of the item's bytes, seed 0).
struct Sbbf(sbbf_rs_safe::Filter);
struct BloomfilterCrate<K: Hash + ?Sized>(bloomfilter::Bloom<K>);
/// One random 64-bit read per key from an array of the blocked filter's size, the keys
/// hashed a chunk ahead and each read requested 64 keys ahead (as the batch calls do), so
/// the reads are independent and overlapped: the memory-parallelism limit.
struct IndependentReads(Vec<u64>);
/// One random 64-bit read per key, each address depending on the word read before: the
/// latency limit.
struct DependentReads(Vec<u64>);

/// Asks for the word `hash` picks (a hint; never faults).
fn prefetch_word(words: &[u64], hash: u64) {
    let address = words
        .as_ptr()
        .wrapping_add((((hash >> 32) * words.len() as u64) >> 32) as usize);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint that never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// The word `hash` picks, by the blocked filter's multiply-shift.
fn read_word(words: &[u64], hash: u64) -> u64 {
    words[(((hash >> 32) * words.len() as u64) >> 32) as usize]
}

/// `Subject` for a filter of items `K: $bound` with `insert`, `contains` and `num_bits`
/// (bloomery's over their item road, fastbloom over `Hash`).
macro_rules! item_subject {
    ($bound:path: $($subject:ident),*) => {$(
        impl<K: $bound> Subject<K> for $subject {
            fn insert_all(&mut self, keys: &[K]) {
                for key in keys {
                    self.0.insert(key);
                }
            }
            fn count_present(&self, keys: &[K]) -> usize {
                keys.iter().filter(|key| self.0.contains(*key)).count()
            }
            #[allow(clippy::unnecessary_cast)] // fastbloom counts in usize
            fn num_bits(&self) -> u64 {
                self.0.num_bits() as u64
            }
        }
    )*};
}

item_subject!(Funnel: Blocked, Classic, SplitBlock, SplitBlockXxh3);
item_subject!(Hash: FastBloom);

/// `Subject` for a filter fed the blocked filter's hash (XXH3-64 of the item's bytes, seed
/// 0) through `insert_hash` / `contains_hash`, with its size in bits from `$bits`.
macro_rules! hash_subject {
    ($subject:ident, $bits:expr) => {
        impl<K: Funnel> Subject<K> for $subject {
            fn insert_all(&mut self, keys: &[K]) {
                for key in keys {
                    self.0.insert_hash(xxh3_64_item(key, 0));
                }
            }
            fn count_present(&self, keys: &[K]) -> usize {
                keys.iter()
                    .filter(|key| self.0.contains_hash(xxh3_64_item(*key, 0)))
                    .count()
            }
            fn num_bits(&self) -> u64 {
                $bits(&self.0)
            }
        }
    };
}

hash_subject!(Sbbf, |filter: &sbbf_rs_safe::Filter| filter.as_bytes().len()
    as u64
    * 8);

/// A head-to-head subject that can be emptied in place, so that a second fill of the same
/// keys writes to memory the first fill faulted in (see `time_once`).
trait Refillable<K>: Subject<K> {
    fn clear(&mut self);
}

macro_rules! refillable_by_clear {
    ($($subject:ident),*) => {$(
        impl<K: Funnel> Refillable<K> for $subject {
            fn clear(&mut self) {
                self.0.clear();
            }
        }
    )*};
}

refillable_by_clear!(Blocked, SplitBlock, SplitBlockXxh3);

impl<K: Funnel> Refillable<K> for Sbbf {
    fn clear(&mut self) {
        self.0.as_bytes_mut().fill(0);
    }
}

impl<K: Funnel> Subject<K> for BlockedBatch {
    fn insert_all(&mut self, keys: &[K]) {
        self.0.insert_batch(keys);
    }
    fn count_present(&self, keys: &[K]) -> usize {
        let mut results = [false; 1024];
        let mut present = 0;
        for chunk in keys.chunks(1024) {
            let results = &mut results[..chunk.len()];
            self.0.contains_batch_into(chunk, results);
            present += results.iter().filter(|&&r| r).count();
        }
        present
    }
    fn num_bits(&self) -> u64 {
        self.0.num_bits()
    }
}

impl<K: Hash> Subject<K> for BloomfilterCrate<K> {
    fn insert_all(&mut self, keys: &[K]) {
        for key in keys {
            self.0.set(key);
        }
    }
    fn count_present(&self, keys: &[K]) -> usize {
        keys.iter().filter(|key| self.0.check(*key)).count()
    }
    fn num_bits(&self) -> u64 {
        self.0.len()
    }
}

impl<K: Funnel> Subject<K> for IndependentReads {
    fn insert_all(&mut self, _keys: &[K]) {}
    fn count_present(&self, keys: &[K]) -> usize {
        let mut present = 0;
        let mut hashes = [0u64; 512];
        for chunk in keys.chunks(hashes.len()) {
            for (hash, key) in hashes.iter_mut().zip(chunk) {
                *hash = xxh3_64_item(key, 0);
            }
            let hashes = &hashes[..chunk.len()];
            for (i, &hash) in hashes.iter().enumerate() {
                // The word 64 keys ahead is requested now, as the batch calls do, so the
                // loop measures how many misses the memory system overlaps.
                if let Some(&ahead) = hashes.get(i + 64) {
                    prefetch_word(&self.0, ahead);
                }
                // Every word is 1: a branch, not an addition of a converted flag (this
                // machine's rustc 1.95 miscompiles those, rust-lang/rust#158206).
                if read_word(&self.0, hash) & 1 == 1 {
                    present += 1;
                }
            }
        }
        present
    }
    fn num_bits(&self) -> u64 {
        self.0.len() as u64 * 64
    }
}

impl<K: Funnel> Subject<K> for DependentReads {
    fn insert_all(&mut self, _keys: &[K]) {}
    fn count_present(&self, keys: &[K]) -> usize {
        let mut present = 0;
        let mut previous = 0u64;
        for key in keys {
            // Every word is 1, so `previous >> 1` is 0, but the compiler cannot know it:
            // the address waits for the last read.
            let word = read_word(&self.0, xxh3_64_item(key, 0) ^ (previous >> 1));
            if word & 1 == 1 {
                present += 1;
            }
            previous = word;
        }
        present
    }
    fn num_bits(&self) -> u64 {
        self.0.len() as u64 * 64
    }
}

#[derive(Clone, Debug)]
struct Row {
    name: &'static str,
    insert_ns: f64,
    present_ns: f64,
    absent_ns: f64,
    fpr: f64,
    bits_per_key: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn ns_per(start: Instant, count: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / count.max(1) as f64
}

/// Builds a subject REPS times; medians of insert and lookup times.
fn measure<K, S: Subject<K>>(name: &'static str, keys: &[K], absent: &[K], make: impl Fn() -> S) -> Row {
    let probes = &keys[..keys.len().min(MAX_PROBES)];
    let (mut inserts, mut presents, mut absents) = (Vec::new(), Vec::new(), Vec::new());
    let mut false_positives = 0;
    let mut bits = 0;
    for _ in 0..REPS {
        let mut subject = make();
        let start = Instant::now();
        subject.insert_all(black_box(keys));
        inserts.push(ns_per(start, keys.len()));
        let start = Instant::now();
        let found = black_box(subject.count_present(black_box(probes)));
        presents.push(ns_per(start, probes.len()));
        if !name.starts_with("random reads") {
            assert_eq!(found, probes.len(), "{name}: a false negative");
        }
        let start = Instant::now();
        false_positives = black_box(subject.count_present(black_box(absent)));
        absents.push(ns_per(start, absent.len()));
        bits = subject.num_bits();
    }
    let row = Row {
        name,
        insert_ns: median(inserts),
        present_ns: median(presents),
        absent_ns: median(absents),
        fpr: if name.starts_with("random reads") {
            f64::NAN
        } else {
            false_positives as f64 / absent.len() as f64
        },
        bits_per_key: bits as f64 / keys.len() as f64,
    };
    eprintln!("  {row:?}");
    row
}

/// Rounds of the head-to-head comparison with sbbf-rs-safe. Each round measures every
/// contender once, in an order that rotates from round to round, and the ratio is taken
/// within the round: on a virtual machine whose speed drifts by tens of percent between
/// seconds, measuring one filter's repetitions and then the other's (as `measure` does)
/// lets the drift and the order decide the ratio.
const PAIRED_ROUNDS: usize = 7;

/// One timing of a subject: ns per insert into resident memory, per insert into a fresh
/// filter, per present and per absent lookup, and the system CPU time of the fresh fill.
#[derive(Clone, Copy)]
struct Timing {
    insert: f64,
    insert_fresh: f64,
    fresh_system_ms: f64,
    present: f64,
    absent: f64,
}

/// Fills a fresh filter (timed: its first touch of every page included), empties it and
/// fills it again (timed: `insert`, what an insert costs once the filter's memory is
/// resident, as in a long-lived filter), then looks up present and absent keys.
///
/// Why two fills: the first fill's page faults cost what the operating system makes them
/// cost, not what the filter's code does. On the Firecracker virtual machines of the runs
/// since GG, memory freed by one contender and handed to the next costs the next one
/// hundreds of milliseconds of system time at n = 10^8 when the next one asks for 2 MiB
/// pages (bloomery's arrays from 4 MiB up) and the freed memory was in 4 KiB pages
/// (sbbf-rs-safe's): the fresh fill of whichever contender follows sbbf-rs-safe takes
/// several ns per insert longer (`examples/fill_after.rs` measures it; the system time
/// column of the head to head shows it).
fn time_once<K>(subject: &mut dyn Refillable<K>, keys: &[K], absent: &[K]) -> Timing {
    let probes = &keys[..keys.len().min(MAX_PROBES)];
    let system_before = system_cpu_ms();
    let start = Instant::now();
    subject.insert_all(black_box(keys));
    let insert_fresh = ns_per(start, keys.len());
    let fresh_system_ms = system_cpu_ms() - system_before;
    subject.clear();
    let start = Instant::now();
    subject.insert_all(black_box(keys));
    let insert = ns_per(start, keys.len());
    let start = Instant::now();
    let found = black_box(subject.count_present(black_box(probes)));
    let present = ns_per(start, probes.len());
    assert_eq!(found, probes.len(), "a false negative");
    let start = Instant::now();
    black_box(subject.count_present(black_box(absent)));
    let absent = ns_per(start, absent.len());
    Timing {
        insert,
        insert_fresh,
        fresh_system_ms,
        present,
        absent,
    }
}

/// A ratio's median and range over the rounds.
#[derive(Clone, Copy)]
struct Spread {
    median: f64,
    low: f64,
    high: f64,
}

impl Spread {
    fn of(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        Spread {
            median: values[values.len() / 2],
            low: values[0],
            high: values[values.len() - 1],
        }
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "{:.2}x ({:.2}-{:.2})",
            self.median, self.low, self.high
        )
    }
}

/// sbbf-rs-safe's time over bloomery's (above 1: bloomery faster) for one of bloomery's
/// filters with one kernel, per round, summarised.
struct HeadToHead {
    filter: &'static str,
    kernel: &'static str,
    insert: Spread,
    insert_fresh: Spread,
    present: Spread,
    absent: Spread,
    /// System CPU time of the fresh fill, ms, the median and the largest of the rounds:
    /// sbbf-rs-safe's, then this contender's.
    fresh_system_ms: [(f64, f64); 2],
}

impl HeadToHead {
    /// The table's cells after the workload: filter, kernel, the ratios, the system times.
    fn cells(&self) -> String {
        let [(sbbf_median, sbbf_largest), (median, largest)] = self.fresh_system_ms;
        format!(
            "{} | {} | {} | {} | {} | {} | {sbbf_median:.0} ({sbbf_largest:.0}) / {median:.0} ({largest:.0})",
            self.filter, self.kernel, self.present, self.absent, self.insert, self.insert_fresh
        )
    }
}

/// A contender of the head-to-head: one of bloomery's filters with one kernel.
#[derive(Clone, Copy)]
enum Contender {
    Blocked(bloomery::blocked::Kernel),
    /// The split-block filter hashing with XXH3 (`SplitBlockHasher::Xxh3`, seed 0).
    SplitBlock(bloomery::split_block::Kernel),
    /// The split-block filter on its Parquet item road (XXH64), as a Parquet
    /// writer or reader uses it.
    SplitBlockParquet(bloomery::split_block::Kernel),
}

impl Contender {
    fn filter(self) -> &'static str {
        match self {
            Contender::Blocked(_) => "blocked",
            Contender::SplitBlock(_) => "split-block (XXH3)",
            Contender::SplitBlockParquet(_) => "split-block (Parquet's XXH64)",
        }
    }

    fn kernel(self) -> &'static str {
        match self {
            Contender::Blocked(kernel) => kernel.name(),
            Contender::SplitBlock(kernel) | Contender::SplitBlockParquet(kernel) => kernel.name(),
        }
    }
}

/// The step between the contenders measured one after another in round `round` of
/// `slots`: the strides coprime to `slots` in turn (1, 2, 3, 4, 1, ... for five), so that
/// each contender follows a different one from round to round. With one stride, the
/// contender after sbbf-rs-safe was always the same one, and paid for it (`time_once`).
fn order_stride(round: usize, slots: usize) -> usize {
    let coprime: Vec<usize> = (1..slots.max(2))
        .filter(|&stride| gcd(stride, slots) == 1)
        .collect();
    coprime[round % coprime.len()]
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The blocked filter with each kernel this CPU has beyond the scalar one (an AVX-512
/// machine also measures what an AVX2-only one would run), and the split-block filter with
/// its SIMD kernel on its two item roads: XXH3-64, the hash sbbf-rs-safe is fed (so that its
/// ratio is about the layout), and Parquet's XXH64 (what a Parquet user gets), against
/// sbbf-rs-safe fed the blocked filter's hash, in PAIRED_ROUNDS alternating rounds.
fn head_to_head<K: Funnel>(keys: &[K], absent: &[K]) -> Vec<HeadToHead> {
    let n = keys.len() as u64;
    let mut contenders: Vec<Contender> = bloomery::blocked::Kernel::available()
        .into_iter()
        .filter(|kernel| kernel.name() != "scalar")
        .map(Contender::Blocked)
        .collect();
    contenders.extend(
        bloomery::split_block::Kernel::available()
            .into_iter()
            .filter(|kernel| kernel.name() != "scalar")
            .flat_map(|kernel| {
                [
                    Contender::SplitBlock(kernel),
                    Contender::SplitBlockParquet(kernel),
                ]
            }),
    );
    // Parquet's hash at the layout's exact size (as `with_fpp_and_hasher` sizes the XXH3
    // one), not rounded up to a power of two bytes as `with_fpp` sizes it for Parquet's
    // readers: the two roads differ by their hash alone, as in the runs recorded before.
    let split_block = |kernel| {
        SplitBlockBloomFilter::with_num_blocks(split_block_num_blocks(n, FPP).unwrap())
            .unwrap()
            .with_kernel(kernel)
    };
    let split_block_xxh3 = |kernel| {
        SplitBlockBloomFilter::with_fpp_and_hasher(n, FPP, SplitBlockHasher::Xxh3 { seed: 0 })
            .unwrap()
            .with_kernel(kernel)
    };
    // Slot 0 is sbbf-rs-safe, then one per contender.
    let slots = contenders.len() + 1;
    let mut timings: Vec<Vec<Timing>> = vec![Vec::new(); slots];
    for round in 0..PAIRED_ROUNDS {
        let stride = order_stride(round, slots);
        for step in 0..slots {
            let which = (round + step * stride) % slots;
            let timing = match which.checked_sub(1).map(|i| contenders[i]) {
                None => {
                    let mut subject = Sbbf(sbbf_rs_safe::Filter::new(SBBF_BITS_PER_KEY, n as usize));
                    time_once(&mut subject, keys, absent)
                }
                Some(Contender::Blocked(kernel)) => {
                    let filter = BlockedBloomFilter::with_fpp(n, FPP).unwrap().with_kernel(kernel);
                    time_once(&mut Blocked(filter), keys, absent)
                }
                Some(Contender::SplitBlock(kernel)) => {
                    time_once(&mut SplitBlockXxh3(split_block_xxh3(kernel)), keys, absent)
                }
                Some(Contender::SplitBlockParquet(kernel)) => {
                    time_once(&mut SplitBlock(split_block(kernel)), keys, absent)
                }
            };
            timings[which].push(timing);
        }
    }
    contenders
        .iter()
        .enumerate()
        .map(|(i, contender)| {
            let ratios = |field: fn(&Timing) -> f64| {
                Spread::of(
                    timings[0]
                        .iter()
                        .zip(&timings[i + 1])
                        .map(|(theirs, ours)| field(theirs) / field(ours))
                        .collect(),
                )
            };
            let system_ms = |slot: usize| {
                let spread = Spread::of(
                    timings[slot]
                        .iter()
                        .map(|timing| timing.fresh_system_ms)
                        .collect(),
                );
                (spread.median, spread.high)
            };
            let result = HeadToHead {
                filter: contender.filter(),
                kernel: contender.kernel(),
                insert: ratios(|timing| timing.insert),
                insert_fresh: ratios(|timing| timing.insert_fresh),
                present: ratios(|timing| timing.present),
                absent: ratios(|timing| timing.absent),
                fresh_system_ms: [system_ms(0), system_ms(i + 1)],
            };
            eprintln!("  head to head: {}", result.cells());
            result
        })
        .collect()
}

/// sbbf-rs-safe's setting: the smallest whole bits per key whose measured rate stays under
/// 1%: 11 bits measure 0.81% here; by the split-block formula 1% needs 10.5 bits.
const SBBF_BITS_PER_KEY: usize = 11;

fn run_workload<K: Hash + Funnel>(title: &str, keys: &[K], absent: &[K]) -> Vec<Row> {
    eprintln!("{title}");
    let n = keys.len() as u64;
    let blocked_blocks = BlockedBloomFilter::with_fpp(n, FPP)
        .expect("parameters")
        .num_blocks();
    vec![
        measure("bloomery blocked", keys, absent, || {
            Blocked(BlockedBloomFilter::with_fpp(n, FPP).unwrap())
        }),
        measure("bloomery blocked, batch", keys, absent, || {
            BlockedBatch(BlockedBloomFilter::with_fpp(n, FPP).unwrap())
        }),
        measure("bloomery split-block (Parquet)", keys, absent, || {
            SplitBlock(
                SplitBlockBloomFilter::with_num_blocks(split_block_num_blocks(n, FPP).unwrap()).unwrap(),
            )
        }),
        measure("bloomery split-block (XXH3)", keys, absent, || {
            SplitBlockXxh3(
                SplitBlockBloomFilter::with_fpp_and_hasher(n, FPP, SplitBlockHasher::Xxh3 { seed: 0 })
                    .unwrap(),
            )
        }),
        measure("bloomery Guava-compatible", keys, absent, || {
            Classic(BloomFilter::with_fpp(n, FPP).unwrap())
        }),
        measure("fastbloom 0.17 (foldhash)", keys, absent, || {
            FastBloom(
                fastbloom::BloomFilter::with_false_pos(FPP)
                    .hasher(foldhash::fast::RandomState::default())
                    .expected_items(n as usize),
            )
        }),
        measure("sbbf-rs-safe 0.3 (same hash)", keys, absent, || {
            Sbbf(sbbf_rs_safe::Filter::new(SBBF_BITS_PER_KEY, n as usize))
        }),
        measure("bloomfilter 3 (SipHash)", keys, absent, || {
            BloomfilterCrate(bloomfilter::Bloom::new_for_fp_rate(n as usize, FPP).unwrap())
        }),
        measure("random reads, independent (parallel limit)", keys, absent, || {
            IndependentReads(vec![1u64; blocked_blocks as usize * 8])
        }),
        measure("random reads, dependent (latency limit)", keys, absent, || {
            DependentReads(vec![1u64; blocked_blocks as usize * 8])
        }),
    ]
}

/// The head to head's extra size: u64 keys whose filters (128-138 KB) fit in L2.
const IN_CACHE_N: usize = 100_000;
const IN_CACHE_WORKLOAD: &str = "u64 n=10^5 (in L2)";

/// Repetitions of the concurrent-insert measurement: more than REPS, as a 2-thread figure on
/// a 2-core virtual machine moves with whatever else the host runs.
const CONCURRENT_REPS: usize = 7;

/// Inserts with 1 and 2 threads into the atomic blocked filter, by `insert` (one call an
/// item) and by `insert_batch` (calls of BATCH_KEYS items): ns per insert (wall), medians
/// of CONCURRENT_REPS alternating runs, as (single: 1 thread, 2 threads; batch: 1, 2).
fn concurrent_inserts(keys: &[u64]) -> [(f64, f64); 2] {
    let n = keys.len() as u64;
    type Insert = fn(&AtomicBlockedBloomFilter, &[u64]);
    let timed = |threads: usize, insert: Insert| {
        let filter = AtomicBlockedBloomFilter::with_fpp(n, FPP).unwrap();
        let start = Instant::now();
        std::thread::scope(|scope| {
            for part in keys.chunks(keys.len().div_ceil(threads)) {
                let filter = &filter;
                scope.spawn(move || insert(filter, part));
            }
        });
        let ns = ns_per(start, keys.len());
        assert!(keys.iter().take(1_000).all(|key| filter.contains(key)));
        ns
    };
    let hows: [Insert; 2] = [
        |filter, part| {
            for key in part {
                filter.insert(key);
            }
        },
        |filter, part| {
            for batch in part.chunks(BATCH_KEYS) {
                filter.insert_batch(batch);
            }
        },
    ];
    let mut runs = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    for _ in 0..CONCURRENT_REPS {
        for (runs, insert) in runs.iter_mut().zip(hows) {
            runs[0].push(timed(1, insert));
            runs[1].push(timed(2, insert));
        }
    }
    runs.map(|[one, two]| (median(one), median(two)))
}

/// Keys per `insert_batch` call in the concurrent batch rows.
const BATCH_KEYS: usize = 4096;

/// Guava's BloomFilter on the JVM with the same keys, if java and guava.jar are here.
fn guava_on_the_jvm(n: usize, probes: usize) -> Option<Row> {
    let jar = ["/usr/share/java/guava.jar"]
        .into_iter()
        .find(|path| Path::new(path).exists())?;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/guava/GuavaBench.java");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/guava-bench");
    std::fs::create_dir_all(&out).ok()?;
    let compiled = Command::new("javac")
        .args(["-cp", jar, "-d"])
        .arg(&out)
        .arg(&source)
        .status()
        .ok()?
        .success();
    if !compiled {
        eprintln!("javac failed: Guava row skipped");
        return None;
    }
    let class_path = format!("{jar}:{}", out.display());
    let output = Command::new("java")
        .args(["-Xmx4g", "-cp", &class_path, "GuavaBench"])
        .args([n.to_string(), probes.to_string(), REPS.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let field = |name: &str| -> Option<f64> {
        text.split_whitespace()
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
    };
    let row = Row {
        name: "Guava 31.1 on the JVM",
        insert_ns: field("insert_ns")?,
        present_ns: field("present_ns")?,
        absent_ns: field("absent_ns")?,
        fpr: field("fpr")?,
        bits_per_key: field("bits")? / n as f64,
    };
    eprintln!("  {row:?}");
    Some(row)
}

fn print_table(title: &str, rows: &[Row]) {
    println!("\n### {title}\n");
    println!("| filter | insert ns | lookup present ns | lookup absent ns | measured fpr | bits/key |");
    println!("|---|---:|---:|---:|---:|---:|");
    for row in rows {
        let fpr = if row.fpr.is_nan() {
            "-".to_string()
        } else {
            format!("{:.4}%", row.fpr * 100.0)
        };
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {} | {:.2} |",
            row.name, row.insert_ns, row.present_ns, row.absent_ns, fpr, row.bits_per_key
        );
    }
}

fn find<'a>(rows: &'a [Row], name: &str) -> &'a Row {
    rows.iter()
        .find(|row| row.name.starts_with(name))
        .expect("row measured")
}

fn ratio_line(what: &str, ours: f64, theirs: f64, target: f64) {
    let ratio = theirs / ours;
    let verdict = if ratio >= target { "met" } else { "MISSED" };
    println!("| {what} | {ours:.1} ns vs {theirs:.1} ns | {ratio:.2}x | {target}x | {verdict} |");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    // `--sizes 1000000,10000000`: only these u64-key sizes (for a focused comparison).
    let chosen: Option<Vec<usize>> = args
        .iter()
        .position(|arg| arg == "--sizes")
        .and_then(|at| args.get(at + 1))
        .map(|list| {
            list.split(',')
                .map(|n| n.parse().expect("--sizes N,N,..."))
                .collect()
        });
    let sizes: &[usize] = match &chosen {
        Some(sizes) => sizes,
        None if quick => &[1_000_000, 10_000_000],
        None => &[1_000_000, 10_000_000, 100_000_000],
    };
    println!(
        "kernel: {}; single lookups into filters of at most {} KiB (the L2 the CPU reports) read their block in one wide load, larger ones in quarters",
        bloomery::blocked::Kernel::detect().name(),
        bloomery::bits::blocks::in_cache_bytes() >> 10
    );

    let mut tables = Vec::new();
    for &n in sizes {
        let keys = u64_keys(INSERT_SEED, n);
        let absent = u64_keys(ABSENT_SEED, n.min(MAX_PROBES));
        let mut rows = run_workload(&format!("u64 keys, n = {n}"), &keys, &absent);
        if n == 10_000_000
            && let Some(guava) = guava_on_the_jvm(n, MAX_PROBES)
        {
            rows.push(guava);
        }
        let paired = head_to_head(&keys, &absent);
        tables.push((n, format!("u64 keys, n = {n}, p = 1%"), rows, paired));
    }
    let keys = u64_keys(INSERT_SEED, 10_000_000);
    let [(one_thread, two_threads), (one_thread_batch, two_threads_batch)] = concurrent_inserts(&keys);
    drop(keys);

    let urls = url_keys(INSERT_SEED, 10_000_000);
    let absent_urls = url_keys(ABSENT_SEED, MAX_PROBES);
    let url_rows = run_workload("64-byte URL keys, n = 10^7", &urls, &absent_urls);
    let url_paired = head_to_head(&urls, &absent_urls);
    drop((urls, absent_urls));

    // The head to head alone at a size whose filters fit this core's L2 (not one of issue
    // 13's sizes): where memory costs least, what is left is each kernel's own work.
    let in_cache = {
        eprintln!("{IN_CACHE_WORKLOAD} (head to head only)");
        let keys = u64_keys(INSERT_SEED, IN_CACHE_N);
        let absent = u64_keys(ABSENT_SEED, IN_CACHE_N);
        head_to_head(&keys, &absent)
    };

    println!("\n## Results");
    for (_, title, rows, _) in &tables {
        print_table(title, rows);
    }
    print_table("64-byte URL-like keys, n = 10^7, p = 1%", &url_rows);
    println!("\n### Concurrent inserts (atomic blocked filter, u64 keys, n = 10^7)\n");
    println!(
        "| threads | ns per insert (wall), `insert` | ns per insert (wall), `insert_batch` of {BATCH_KEYS} |\n|---|---:|---:|\n| 1 | {one_thread:.1} | {one_thread_batch:.1} |\n| 2 | {two_threads:.1} | {two_threads_batch:.1} |"
    );

    let mut workloads: Vec<(String, &Vec<Row>, &Vec<HeadToHead>)> = tables
        .iter()
        .map(|(n, _, rows, paired)| (format!("u64 n=10^{}", n.ilog10()), rows, paired))
        .collect();
    workloads.push(("URL n=10^7".to_owned(), &url_rows, &url_paired));

    println!(
        "\n### Head to head with sbbf-rs-safe ({PAIRED_ROUNDS} alternating rounds; sbbf's time over bloomery's, median and range of the rounds)\n"
    );
    println!(
        "| workload | filter | kernel | lookup present | lookup absent | insert | insert into a fresh filter | system ms of the fresh fill, sbbf / bloomery: median (largest) |\n|---|---|---|---:|---:|---:|---:|---:|"
    );
    let in_cache_workload = std::iter::once((IN_CACHE_WORKLOAD, &in_cache));
    let all_paired = workloads
        .iter()
        .map(|(what, _, paired)| (what.as_str(), *paired))
        .chain(in_cache_workload);
    for (what, paired) in all_paired {
        for result in paired.iter() {
            println!("| {what} | {} |", result.cells());
        }
    }

    println!("\n### Targets (ratios from this run)\n");
    println!("| target | ours vs theirs | ratio | needed | verdict |\n|---|---|---:|---:|---|");
    // Single operations against sbbf-rs-safe: the head-to-head medians, for every kernel
    // (on an AVX-512 machine the avx2 rows stand for an AVX2-only one), for the blocked
    // filter (the split-block rows above are there to compare layouts).
    for (what, _, paired) in &workloads {
        for result in paired.iter().filter(|result| result.filter == "blocked") {
            for (operation, spread) in [
                ("single lookup (present)", result.present),
                ("single lookup (absent)", result.absent),
                ("single insert (resident)", result.insert),
            ] {
                println!(
                    "| {what} {operation} vs sbbf-rs-safe, kernel {} | median of {PAIRED_ROUNDS} rounds, range {:.2}-{:.2} | {:.2}x | 1x | {} |",
                    result.kernel,
                    spread.low,
                    spread.high,
                    spread.median,
                    if spread.median >= 1.0 { "met" } else { "MISSED" }
                );
            }
        }
    }
    if let Some((_, _, rows, _)) = tables.iter().find(|(n, _, _, _)| *n == 100_000_000) {
        let batch = find(rows, "bloomery blocked, batch");
        let parallel = find(rows, "random reads, independent");
        println!(
            "| u64 n=10^8 batch lookup (present) within 1.3x of independent reads | {:.1} ns vs {:.1} ns | {:.2}x slower | <= 1.3x | {} |",
            batch.present_ns,
            parallel.present_ns,
            batch.present_ns / parallel.present_ns,
            if batch.present_ns <= 1.3 * parallel.present_ns {
                "met"
            } else {
                "MISSED"
            }
        );
    }
    if let Some((_, _, rows, _)) = tables.iter().find(|(n, _, _, _)| *n == 10_000_000) {
        if let Some(guava) = rows.iter().find(|row| row.name.starts_with("Guava")) {
            let classic = find(rows, "bloomery Guava-compatible");
            ratio_line(
                "u64 n=10^7 Guava-compatible lookup (present) vs Guava/JVM",
                classic.present_ns,
                guava.present_ns,
                2.0,
            );
            ratio_line(
                "u64 n=10^7 Guava-compatible lookup (absent) vs Guava/JVM",
                classic.absent_ns,
                guava.absent_ns,
                2.0,
            );
        } else {
            println!("| Guava-compatible vs Guava/JVM | java or guava.jar missing | | 2x | not measured |");
        }
    }
    ratio_line("concurrent inserts, 2 threads vs 1", two_threads, one_thread, 1.7);
    ratio_line(
        "concurrent batch inserts, 2 threads vs 1",
        two_threads_batch,
        one_thread_batch,
        1.7,
    );

    println!("\n### Distance to the limits (present-key lookups; 1.00x is the limit)\n");
    println!(
        "| workload | single vs latency limit | single vs parallel limit | batch vs parallel limit |\n|---|---:|---:|---:|"
    );
    for (what, rows, _) in &workloads {
        let single = find(rows, "bloomery blocked");
        let batch = find(rows, "bloomery blocked, batch");
        let latency = find(rows, "random reads, dependent");
        let parallel = find(rows, "random reads, independent");
        println!(
            "| {what} | {:.2}x | {:.2}x | {:.2}x |",
            single.present_ns / latency.present_ns,
            single.present_ns / parallel.present_ns,
            batch.present_ns / parallel.present_ns,
        );
    }
}
