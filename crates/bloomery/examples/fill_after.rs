//! What filling a fresh blocked filter costs right after another filter of the same size
//! was freed, by what the other one was: sbbf-rs-safe (its memory in 4 KiB pages) or
//! another blocked filter (2 MiB pages, as bloomery maps arrays from 4 MiB up). Prints the
//! wall time per insert and the system CPU time of each fill.
//!
//! On docs/benchmarks.md's virtual machine (runs GG-JJ) the fill after sbbf-rs-safe spent
//! hundreds of milliseconds of system time at 10^8 items that the fill after a blocked
//! filter did not: the operating system's cost of handing out the memory, not the filter's.
//! The head to head of `benches/compare.rs` now keeps it out of its insert ratios.
//!
//! `cargo run --release -p bloomery --example fill_after -- [ITEMS [ROUNDS]]` (defaults
//! 10^8 and 3).

use bloomery::BlockedBloomFilter;
use bloomery::hash::{splitmix64, xxh3_64_item};
use std::hint::black_box;
use std::time::Instant;

#[path = "../benches/common/system_time.rs"]
mod system_time;
use system_time::system_cpu_ms;

/// Fills a fresh blocked filter with `keys`, prints the fill's cost and drops the filter.
fn fill_blocked(after: &str, keys: &[u64]) {
    let mut filter = BlockedBloomFilter::with_fpp(keys.len() as u64, 0.01).expect("parameters");
    let system = system_cpu_ms();
    let start = Instant::now();
    for key in keys {
        filter.insert(key);
    }
    let ns = start.elapsed().as_nanos() as f64 / keys.len() as f64;
    black_box(&filter);
    println!(
        "blocked filter filled after {after:<24} {ns:6.2} ns per insert, system time {:5.0} ms",
        system_cpu_ms() - system
    );
}

/// Fills a fresh sbbf-rs-safe filter with `keys` (11 bits per key, as the benchmark) and
/// drops it, untimed: it is what the next fill comes after.
fn fill_sbbf(keys: &[u64]) {
    let mut filter = sbbf_rs_safe::Filter::new(11, keys.len());
    for key in keys {
        filter.insert_hash(xxh3_64_item(key, 0));
    }
    black_box(&filter);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let items: usize = args.next().map_or(100_000_000, |arg| arg.parse().expect("ITEMS"));
    let rounds: usize = args.next().map_or(3, |arg| arg.parse().expect("ROUNDS"));
    let mut state = 1;
    let keys: Vec<u64> = (0..items).map(|_| splitmix64(&mut state)).collect();
    for _ in 0..rounds {
        fill_sbbf(&keys);
        fill_blocked("sbbf-rs-safe (4 KiB)", &keys);
        fill_blocked("a blocked filter (2 MiB)", &keys);
    }
}
