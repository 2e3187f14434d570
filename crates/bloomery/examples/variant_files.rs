//! Writes one file of every variant into a directory, each filled through its own API so
//! that every part of its format is used (scalable growth, rotated generations, counting
//! removals, retouched clearings, allow-listed items), with the items: `present.txt`
//! (inserted) and `absent.txt` (never inserted), one per line.
//!
//! `cargo run --release -p bloomery --example variant_files -- DIR [ITEMS]`
//!
//! The CLI's tests read these files with an independent reader written from
//! docs/format.md (`crates/bloomery-cli/tests/reader/`) and compare its answers with
//! `bloomery check`.

use std::fs;
use std::path::PathBuf;

use bloomery::format::native::Persist;
use bloomery::redisbloom::RedisBloomFilter;
use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
use bloomery::{
    AllowlistedBloomFilter, BlockedBloomFilter, BloomFilter, ClearingScheme, CountingBloomFilter,
    RetouchedBloomFilter, RotatingBloomFilter, ScalableBloomFilter, SplitBlockBloomFilter,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: variant_files DIR [ITEMS]")?);
    let n: u64 = args.next().map_or(Ok(100_000), |text| text.parse())?;
    fs::create_dir_all(&dir)?;
    let present: Vec<String> = (0..n)
        .map(|i| format!("https://example.com/present/{i}"))
        .collect();
    let absent: Vec<String> = (0..n)
        .map(|i| format!("https://example.com/absent/{i}"))
        .collect();
    fs::write(dir.join("present.txt"), present.join("\n") + "\n")?;
    fs::write(dir.join("absent.txt"), absent.join("\n") + "\n")?;

    let mut classic = BloomFilter::with_fpp(n, 0.01)?;
    let mut blocked = BlockedBloomFilter::with_fpp_and_seed(n, 0.01, 0x5eed)?;
    let mut counting = CountingBloomFilter::with_fpp(n, 0.01)?;
    let mut scalable = ScalableBloomFilter::new(n / 16 + 1, 0.01)?;
    let mut retouched = RetouchedBloomFilter::with_fpp(n / 10, 0.01)?;
    let mut allowlisted = AllowlistedBloomFilter::with_fpp(n, 0.05)?;
    let mut rotating = RotatingBloomFilter::new(3, n / 3 + 1, 0.01)?;
    let mut split_block = SplitBlockBloomFilter::with_fpp(n, 0.01)?;
    // RedisBloom's defaults for growth, sized small so that it grows several links.
    let mut redisbloom = RedisBloomFilter::new(n / 16 + 1, 0.01, 2, false)?;
    let mut scalable_blocked =
        ScalableBlockedBloomFilter::new(n / 16 + 1, 0.01, bloomery::ScalableOptions::default(), 0x5eed)?;
    split_block.insert_batch(&present);
    for item in &present {
        classic.insert(item);
        blocked.insert(item);
        counting.insert(item);
        scalable.insert(item)?;
        allowlisted.insert(item);
        rotating.insert(item);
        redisbloom.insert(item.as_bytes())?;
        scalable_blocked.insert(item)?;
    }
    for item in &present[..(n / 10) as usize] {
        retouched.insert(item);
    }
    // Counting: take the first hundredth out again.
    for item in &present[..(n / 100) as usize] {
        counting.remove(item)?;
    }
    // Retouched and allow-listed: clear or list some of the false positives.
    for item in absent.iter().take((n / 10) as usize) {
        if retouched.contains(item) {
            retouched.record_false_positive(item);
            retouched.remove_false_positive(item, ClearingScheme::MinimumFalseNegatives);
        }
        if allowlisted.contains(item) {
            allowlisted.allow(item);
        }
    }
    let files: [(&str, Vec<u8>); 10] = [
        ("classic", classic.to_bytes()),
        ("blocked", blocked.to_bytes()),
        ("counting", counting.to_bytes()),
        ("scalable", scalable.to_bytes()),
        ("retouched", retouched.to_bytes()),
        ("allowlisted", allowlisted.to_bytes()),
        ("rotating", rotating.to_bytes()),
        ("split-block", split_block.to_bytes()),
        ("redisbloom", redisbloom.to_bytes()),
        ("scalable-blocked", scalable_blocked.to_bytes()),
    ];
    let count = files.len();
    for (name, bytes) in files {
        fs::write(dir.join(format!("{name}.bloom")), bytes)?;
    }
    eprintln!(
        "wrote {count} filters of {n} items to {} (scalable: {} sub-filters; rotating: {} generations; \
         allow-listed: {} items listed; retouched: {} false negatives made)",
        dir.display(),
        scalable.num_filters(),
        rotating.num_generations(),
        allowlisted.allowed_len(),
        retouched.total_false_negatives(),
    );
    Ok(())
}
