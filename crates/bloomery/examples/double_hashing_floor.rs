//! The floor of double hashing (docs in `bloomery::sizing::double_hashing_bits`): for
//! small filters at low rates, Guava's shape for n items at p, filled with n distinct
//! items, against the shape bloomery's own classic-hashed filters take
//! (`ClassicShape::for_rate`): the false-positive rate measured over fresh items, averaged
//! over 4 filters of each, and for Guava's shape the floor's c, (rate - fill^k) · m² / n.
//! Then a scalable filter from one item at 1% grown to 10^5 items, with sub-filters of
//! Guava's shape (as it made them before) and as it makes them now.
//!
//! `cargo run --release -p bloomery --example double_hashing_floor` (about a minute).

use bloomery::sizing::ClassicShape;
use bloomery::{BloomFilter, ScalableBloomFilter};

/// A splitmix64 stream: distinct keys, fresh ones from another seed.
fn keys(seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed;
    std::iter::repeat_with(move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// The rate over `probes` fresh keys of `filter`.
fn rate(probes: u64, seed: u64, contains: impl Fn(&u64) -> bool) -> f64 {
    let found = keys(seed)
        .take(probes as usize)
        .filter(|key| contains(key))
        .count();
    found as f64 / probes as f64
}

/// The rate over `probes` fresh keys of filters of `shape` holding `n` keys, and their
/// fraction of bits set, averaged over 4 of them.
fn measured(shape: ClassicShape, n: u64, probes: u64) -> (f64, f64) {
    let (mut rates, mut fill) = (0.0, 0.0);
    for round in 0..4u64 {
        let mut filter = BloomFilter::with_shape(shape);
        for key in keys(round).take(n as usize) {
            filter.insert(&key);
        }
        rates += rate(probes, 1_000 + round, |key| filter.contains(key));
        fill += filter.bit_count() as f64 / filter.num_bits() as f64;
    }
    (rates / 4.0, fill / 4.0)
}

/// A scalable chain from one item at `p` (growth 2, tightening 0.5), its sub-filters of
/// Guava's shape for their capacity and share, holding `n` keys: each key not found in
/// the chain goes into the newest sub-filter, a new one starting when that one is full.
fn guava_chain_rate(n: u64, p: f64, probes: u64) -> Result<f64, bloomery::Error> {
    let mut chain: Vec<(BloomFilter, u64, u64)> = Vec::new();
    for key in keys(7).take(n as usize) {
        if chain.iter().any(|(filter, _, _)| filter.contains(&key)) {
            continue;
        }
        if chain.last().is_none_or(|&(_, capacity, len)| len >= capacity) {
            let index = chain.len() as i32;
            let (capacity, share) = (1u64 << index, p * 0.5 * 0.5f64.powi(index));
            chain.push((BloomFilter::with_fpp(capacity, share)?, capacity, 0));
        }
        let newest = chain.last_mut().expect("a sub-filter");
        newest.0.insert(&key);
        newest.2 += 1;
    }
    Ok(rate(probes, 1_007, |key| {
        chain.iter().any(|(filter, _, _)| filter.contains(key))
    }))
}

fn main() -> Result<(), bloomery::Error> {
    println!("| n | p | Guava's shape: bits, k | its rate | its c | for_rate: bits, k | its rate |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (n, p, probes) in [
        (10u64, 1e-2, 2_000_000u64),
        (10, 1e-3, 2_000_000),
        (1_000, 1e-4, 2_500_000),
        (1_000, 1e-6, 2_500_000),
        (10_000, 1e-7, 2_500_000),
    ] {
        let guava = ClassicShape::for_fpp(n, p)?;
        let sized = ClassicShape::for_rate(n, p)?;
        let (guava_rate, fill) = measured(guava, n, probes);
        let m = guava.num_bits() as f64;
        let c = (guava_rate - fill.powi(guava.num_hashes as i32)) * m * m / n as f64;
        println!(
            "| {n} | {p:e} | {}, {} | {guava_rate:.2e} | {c:.1} | {}, {} | {:.2e} |",
            guava.num_bits(),
            guava.num_hashes,
            sized.num_bits(),
            sized.num_hashes,
            measured(sized, n, probes).0,
        );
    }
    let (n, p, probes) = (100_000, 0.01, 400_000);
    let mut scalable = ScalableBloomFilter::new(1, p)?;
    for key in keys(7).take(n as usize) {
        scalable.insert(&key)?;
    }
    println!(
        "\nscalable from 1 item at {p}, {n} items, over {probes} fresh keys: Guava's shapes {:.4}, for_rate's {:.4}",
        guava_chain_rate(n, p, probes)?,
        rate(probes, 1_007, |key| scalable.contains(key)),
    );
    Ok(())
}
