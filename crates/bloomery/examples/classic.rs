//! The classic experiment: 10,000,000 ints into a Guava-compatible filter sized for 1%,
//! then the next 10,000,000 ints probed. Guava 31.1 counts 100,075 false positives and no
//! false negatives (tests/data/guava/classic.tsv); so does this.
//!
//! Run: `cargo run --release --example classic`

use std::time::Instant;

use bloomery::BloomFilter;

const N: i32 = 10_000_000;

fn main() -> Result<(), bloomery::Error> {
    let mut filter = BloomFilter::with_fpp(N as u64, 0.01)?;
    println!(
        "filter: {} bits ({:.2} MiB, {:.2} bits per item), {} hashes",
        filter.num_bits(),
        filter.num_bits() as f64 / 8.0 / 1024.0 / 1024.0,
        filter.num_bits() as f64 / f64::from(N),
        filter.num_hashes()
    );

    let start = Instant::now();
    for i in 0..N {
        filter.insert(&i);
    }
    let insert_time = start.elapsed();

    let start = Instant::now();
    let false_negatives = (0..N).filter(|i| !filter.contains(i)).count();
    let false_positives = (N..2 * N).filter(|i| filter.contains(i)).count();
    let lookup_time = start.elapsed();

    println!(
        "inserted 0..{}: {:.1} ns per insert",
        N - 1,
        insert_time.as_nanos() as f64 / f64::from(N)
    );
    println!(
        "probed 0..{}: {:.1} ns per lookup",
        2 * N - 1,
        lookup_time.as_nanos() as f64 / (2.0 * f64::from(N))
    );
    println!("false negatives: {false_negatives}");
    println!(
        "false positives: {false_positives} of {N} ({:.4}%; Guava 31.1: 100075)",
        100.0 * false_positives as f64 / f64::from(N)
    );
    println!(
        "expected_fpp: {}, approximate_element_count: {}",
        filter.expected_fpp(),
        filter.approximate_element_count()
    );
    Ok(())
}
