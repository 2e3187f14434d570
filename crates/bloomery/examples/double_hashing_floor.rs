//! The floor of double hashing (docs in `bloomery::sizing::double_hashing_items`): for
//! small filters at low rates, Guava's shape for n items at p, filled with n distinct
//! items, against the shape bloomery's own classic-hashed filters take
//! (`ClassicShape::for_rate`): the false-positive rate measured over fresh items, averaged
//! over 4 filters of each.
//!
//! `cargo run --release -p bloomery --example double_hashing_floor` (about a minute).

use bloomery::BloomFilter;
use bloomery::sizing::ClassicShape;

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

/// The rate over `probes` fresh keys of filters of `shape` holding `n` keys, 4 of them.
fn measured(shape: ClassicShape, n: u64, probes: u64) -> f64 {
    let mut false_positives = 0u64;
    for round in 0..4u64 {
        let mut filter = BloomFilter::with_shape(shape);
        for key in keys(round).take(n as usize) {
            filter.insert(&key);
        }
        for key in keys(1_000 + round).take(probes as usize) {
            if filter.contains(&key) {
                false_positives += 1;
            }
        }
    }
    false_positives as f64 / (4 * probes) as f64
}

fn main() -> Result<(), bloomery::Error> {
    println!("| n | p | Guava's shape: bits, k | its rate | for_rate: bits, k | its rate |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for (n, p, probes) in [
        (10u64, 1e-2, 2_000_000u64),
        (10, 1e-3, 2_000_000),
        (1_000, 1e-4, 2_500_000),
        (1_000, 1e-6, 2_500_000),
        (10_000, 1e-7, 2_500_000),
    ] {
        let guava = ClassicShape::for_fpp(n, p)?;
        let sized = ClassicShape::for_rate(n, p)?;
        println!(
            "| {n} | {p:e} | {}, {} | {:.2e} | {}, {} | {:.2e} |",
            guava.num_bits(),
            guava.num_hashes,
            measured(guava, n, probes),
            sized.num_bits(),
            sized.num_hashes,
            measured(sized, n, probes),
        );
    }
    Ok(())
}
