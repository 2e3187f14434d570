//! The test vectors in docs/format.md are what the library writes today: each vector's
//! filter is rebuilt from its description and its bytes compared, so the document cannot
//! drift from the code (and a change to the bytes the library writes fails here first).

use bloomery::any;
use bloomery::format::native::Persist;
use bloomery::{BlockedBloomFilter, BloomFilter, SplitBlockBloomFilter};

const FORMAT_MD: &str = include_str!("../../../docs/format.md");

/// The hex block that follows the `<!-- vector NAME: ... -->` line.
fn vector(name: &str) -> Vec<u8> {
    let marker = format!("<!-- vector {name}:");
    let start = FORMAT_MD
        .find(&marker)
        .unwrap_or_else(|| panic!("no vector {name}"));
    let block = &FORMAT_MD[start..];
    let body_start = block.find("```text\n").expect("a text block") + "```text\n".len();
    let body = &block[body_start..];
    let hex: String = body[..body.find("```").expect("closed")]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn the_classic_vector_is_what_the_library_writes() {
    let mut filter = BloomFilter::with_fpp(3, 0.1).unwrap();
    filter.insert("apple");
    filter.insert("banana");
    assert_eq!(filter.to_bytes(), vector("classic"));
    let loaded = any::open(&vector("classic")).unwrap();
    assert!(loaded.contains(b"apple") && loaded.contains(b"banana"));
    assert!(!loaded.contains(b"cherry"));
}

#[test]
fn the_blocked_vector_is_what_the_library_writes() {
    let mut filter = BlockedBloomFilter::with_fpp_and_seed(3, 0.1, 7).unwrap();
    filter.insert("apple");
    filter.insert("banana");
    assert_eq!(filter.to_bytes(), vector("blocked"));
    let loaded = any::open(&vector("blocked")).unwrap();
    assert!(loaded.contains(b"apple") && loaded.contains(b"banana"));
}

#[test]
fn the_split_block_vector_is_what_the_library_writes() {
    let mut filter = SplitBlockBloomFilter::with_fpp(3, 0.1).unwrap();
    filter.insert("apple");
    filter.insert("banana");
    let bytes = filter.to_bytes();
    assert_eq!(bytes, vector("split-block"));
    let loaded = any::open(&vector("split-block")).unwrap();
    assert!(loaded.contains(b"apple") && loaded.contains(b"banana"));
    assert!(!loaded.contains(b"cherry"));
    // The payload, after the 64-byte header, is Parquet's bitset: the bytes the parquet
    // crate writes for the same values (tests/split_block.rs).
    assert_eq!(&bytes[64..], &filter.to_parquet_bitset().unwrap()[..]);
}

#[test]
fn the_split_block_xxh3_vector_is_what_the_library_writes() {
    let hasher = bloomery::split_block::SplitBlockHasher::Xxh3 { seed: 7 };
    let mut filter = SplitBlockBloomFilter::with_fpp_and_hasher(3, 0.1, hasher).unwrap();
    filter.insert("apple");
    filter.insert("banana");
    assert_eq!(filter.to_bytes(), vector("split-block-xxh3"));
    let loaded = any::open(&vector("split-block-xxh3")).unwrap();
    assert!(loaded.contains(b"apple") && loaded.contains(b"banana"));
    assert!(!loaded.contains(b"cherry"));
    // The same items under Parquet's hash set other bits.
    assert_ne!(vector("split-block-xxh3")[64..], vector("split-block")[64..]);
}
