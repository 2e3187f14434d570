//! Single inserts and lookups of 64-byte URL keys (or, given `u64`, 64-bit integer keys),
//! bloomery's blocked filter, its split-block filter hashed with XXH3
//! (`SplitBlockHasher::Xxh3`), or sbbf-rs-safe fed the same hash (XXH3-64 of the key's
//! bytes, seed 0), for counting instructions with callgrind:
//! `scripts/url-lookup-instructions.sh` runs each side alone and prints the counts. On a
//! noisy virtual machine the time of one lookup swings by several times between runs
//! (docs/benchmarks.md); the work a lookup does does not.
//!
//! The bloomery sides go through the item road (`insert` and `contains`), as a caller
//! would: the filter's seed is read and the key hashed with it.
//!
//! `cargo run --release -p bloomery --example url_lookups -- bloomery|split-block|sbbf|hash-only [KEYS [url|u64]]`

use bloomery::hash::{Funnel, splitmix64, xxh3_64_item};
use bloomery::split_block::SplitBlockHasher;
use bloomery::{BlockedBloomFilter, SplitBlockBloomFilter};
use std::hint::black_box;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-._~/";

fn url_keys(seed: u64, count: usize) -> Vec<[u8; 64]> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            let mut key = *b"https://example.com/                                            ";
            for chunk in key[20..].chunks_mut(8) {
                let mut bits = splitmix64(&mut state);
                for byte in chunk {
                    *byte = ALPHABET[(bits % ALPHABET.len() as u64) as usize];
                    bits /= ALPHABET.len() as u64;
                }
            }
            key
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let side = args.next().unwrap_or_default();
    let n: usize = args.next().map_or(100_000, |text| text.parse().expect("KEYS"));
    let found = match args.next().as_deref() {
        None | Some("url") => run(&side, &url_keys(1, n), &url_keys(2, n)),
        Some("u64") => {
            let (mut first, mut second) = (1u64, 2u64);
            let keys: Vec<u64> = (0..n).map(|_| splitmix64(&mut first)).collect();
            let probes: Vec<u64> = (0..n).map(|_| splitmix64(&mut second)).collect();
            run(&side, &keys, &probes)
        }
        Some(other) => panic!("key kind {other}: url or u64"),
    };
    println!("{side}: {found} of {} probes present", 2 * n);
}

/// Inserts `keys` and looks up `keys` and `probes` one at a time; the number found.
fn run<K: Funnel>(side: &str, keys: &[K], probes: &[K]) -> usize {
    let n = keys.len();
    match side {
        "bloomery" => {
            let mut filter = BlockedBloomFilter::with_fpp(n as u64, 0.01).expect("sizing");
            keys.iter().for_each(|key| {
                filter.insert(key);
            });
            let mut found = 0usize;
            for key in keys.iter().chain(probes) {
                if filter.contains(black_box(key)) {
                    found += 1;
                }
            }
            found
        }
        "split-block" => {
            let hasher = SplitBlockHasher::Xxh3 { seed: 0 };
            let mut filter =
                SplitBlockBloomFilter::with_fpp_and_hasher(n as u64, 0.01, hasher).expect("sizing");
            keys.iter().for_each(|key| {
                filter.insert(key);
            });
            let mut found = 0usize;
            for key in keys.iter().chain(probes) {
                if filter.contains(black_box(key)) {
                    found += 1;
                }
            }
            found
        }
        "sbbf" => {
            let mut filter = sbbf_rs_safe::Filter::new(11, n);
            keys.iter().for_each(|key| {
                filter.insert_hash(xxh3_64_item(key, 0));
            });
            let mut found = 0usize;
            for key in keys.iter().chain(probes) {
                if filter.contains_hash(xxh3_64_item(black_box(key), 0)) {
                    found += 1;
                }
            }
            found
        }
        // The baseline: the same keys and the same three hashes per key, no filter.
        "hash-only" => {
            let mut found = 0usize;
            for key in keys.iter().chain(keys).chain(probes) {
                if xxh3_64_item(black_box(key), 0) & 1 == 1 {
                    found += 1;
                }
            }
            found
        }
        _ => panic!("usage: url_lookups bloomery|sbbf|hash-only [KEYS [url|u64]]"),
    }
}
