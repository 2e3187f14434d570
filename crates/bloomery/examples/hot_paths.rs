//! The library's hot paths on a fixed workload, for counting instructions rather than
//! timing them: `scripts/overflow-check-cost.sh` runs it under callgrind built with and
//! without overflow checks and prints the ratio (instruction counts are repeatable on a
//! busy machine; times are not).
//!
//! `cargo run --release -p bloomery --example hot_paths [ITEMS]`

use bloomery::hash::splitmix64;
use bloomery::{BlockedBloomFilter, BloomFilter, CountingBloomFilter, ScalableBloomFilter};
use std::hint::black_box;

fn main() -> Result<(), bloomery::Error> {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |text| text.parse().expect("ITEMS"));
    let mut state = 1;
    let keys: Vec<u64> = (0..n).map(|_| splitmix64(&mut state)).collect();
    let fresh: Vec<u64> = (0..n).map(|_| splitmix64(&mut state)).collect();
    let urls: Vec<String> = keys
        .iter()
        .take(n as usize / 4)
        .map(|key| format!("https://example.com/{key:x}"))
        .collect();

    let mut blocked = BlockedBloomFilter::with_fpp(n, 0.01)?;
    let mut batched = BlockedBloomFilter::with_fpp(n, 0.01)?;
    let mut classic = BloomFilter::with_fpp(n, 0.01)?;
    let mut counting = CountingBloomFilter::with_fpp(n / 4, 0.01)?;
    let mut scalable = ScalableBloomFilter::new(n / 64, 0.01)?;
    for key in &keys {
        blocked.insert(key);
        classic.insert(key);
    }
    batched.insert_batch(&keys);
    for url in &urls {
        blocked.insert(url);
        counting.insert(url);
        scalable.insert(url)?;
    }
    let probes = keys.iter().chain(&fresh);
    let mut found = probes.clone().filter(|key| blocked.contains(*key)).count();
    found += probes.filter(|key| classic.contains(*key)).count();
    let answers = batched.contains_batch(&fresh);
    for url in &urls {
        counting.remove(url)?;
    }
    found += urls.iter().filter(|url| scalable.contains(*url)).count();
    println!(
        "{} {} {} {}",
        black_box(found),
        answers.iter().filter(|&&present| present).count(),
        classic.approximate_element_count(),
        blocked.estimated_len()
    );
    Ok(())
}
