//! The memory of classic scalable chains (docs in `bloomery::scalable`): for a few
//! initial capacities, expansions and rates, the bits per item of a chain whose
//! sub-filters are all full, as sub-filters are added, computed from the shapes the chain
//! gives its sub-filters (`ClassicShape::for_rate` of each one's capacity and share,
//! `scalable::sub_filter_params`), without allocating them; and how many of those bits
//! the double hashing's floor (`sizing::double_hashing_bits`) asks for.
//!
//! `cargo run --release -p bloomery --example scalable_memory`

use bloomery::ScalableOptions;
use bloomery::scalable::sub_filter_params;
use bloomery::sizing::{ClassicShape, double_hashing_bits};

fn main() -> Result<(), bloomery::Error> {
    println!(
        "| c | p | expansion | sub-filters | items | bits per item | bits of the last | floor's share |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (c, p, expansion) in [
        (10u64, 0.01, 1u32),
        (1, 1e-6, 2),
        (1, 0.01, 2),
        (10, 0.01, 2),
        (1_000, 0.01, 2),
        (1_000, 0.001, 2),
    ] {
        let options = ScalableOptions {
            expansion,
            ..ScalableOptions::default()
        };
        let (mut items, mut bits, mut floor_bits) = (0u64, 0u64, 0u64);
        for i in 0..64u32 {
            let (capacity, share) = sub_filter_params(c, p, &options, i as usize);
            let Ok(shape) = ClassicShape::for_rate(capacity, share) else {
                println!("| {c} | {p} | {expansion} | {i}: the next cannot be sized | | | | |");
                break;
            };
            items += capacity;
            bits += shape.num_bits();
            let guava = ClassicShape::for_fpp(capacity, share)?.num_bits();
            let floor = double_hashing_bits(capacity, share);
            if floor > guava {
                floor_bits += shape.num_bits() - guava;
            }
            if [4, 8, 16, 24, 32, 40, 48].contains(&(i + 1)) {
                println!(
                    "| {c} | {p} | {expansion} | {} | {items} | {:.1} | {} | {:.0}% |",
                    i + 1,
                    bits as f64 / items as f64,
                    shape.num_bits(),
                    100.0 * floor_bits as f64 / bits as f64
                );
            }
        }
    }
    Ok(())
}
