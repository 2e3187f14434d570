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

/// The first of `fp-0`, `fp-1`, ... that `answers` says is present (a false positive of a
/// filter holding other items): how the retouched and allow-listed vectors pick the item
/// they record.
fn first_false_positive(answers: impl Fn(&str) -> bool) -> String {
    (0..100_000)
        .map(|i| format!("fp-{i}"))
        .find(|item| answers(item))
        .expect("a false positive among 100,000 candidates")
}

/// The vectors beyond the first four, by name: each built as its `<!-- vector -->` line
/// in docs/format.md says, with the items it is checked to hold.
fn built(name: &str) -> (Vec<u8>, Vec<String>) {
    use bloomery::redisbloom::RedisBloomFilter;
    use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
    use bloomery::{
        AllowlistedBloomFilter, ClearingScheme, CountingBloomFilter, RetouchedBloomFilter,
        RotatingBloomFilter, ScalableBloomFilter, ScalableOptions,
    };
    let items = |list: &[&str]| list.iter().map(|item| item.to_string()).collect::<Vec<_>>();
    match name {
        "blocked-3-blocks" => {
            let mut filter = BlockedBloomFilter::with_num_blocks(3, 7).unwrap();
            for item in ["apple", "banana", "cherry", "date"] {
                filter.insert(item);
            }
            (filter.to_bytes(), items(&["apple", "banana", "cherry", "date"]))
        }
        "counting" => {
            let mut filter = CountingBloomFilter::with_counters(21, 3).unwrap();
            for item in ["apple", "apple", "banana"] {
                filter.insert(item);
            }
            (filter.to_bytes(), items(&["apple", "banana"]))
        }
        "scalable" => {
            let mut filter = ScalableBloomFilter::new(2, 0.1).unwrap();
            for item in ["apple", "banana", "cherry", "apple"] {
                filter.insert(item).unwrap();
            }
            assert_eq!(filter.num_filters(), 2);
            (filter.to_bytes(), items(&["apple", "banana", "cherry"]))
        }
        "retouched" => {
            let mut filter = RetouchedBloomFilter::with_fpp(3, 0.1).unwrap();
            filter.insert("apple");
            filter.insert("banana");
            let false_positive = first_false_positive(|item| filter.contains(item));
            assert_eq!(false_positive, RETOUCHED_FALSE_POSITIVE);
            assert!(filter.record_false_positive(false_positive.as_str()));
            filter.remove_false_positive(false_positive.as_str(), ClearingScheme::Random);
            assert!(!filter.contains(false_positive.as_str()));
            let kept = ["apple", "banana"]
                .into_iter()
                .filter(|item| filter.contains(*item));
            (filter.to_bytes(), kept.map(str::to_string).collect())
        }
        "allowlisted" => {
            let mut filter = AllowlistedBloomFilter::with_fpp(3, 0.1).unwrap();
            filter.insert("apple");
            filter.insert("banana");
            let false_positive = first_false_positive(|item| filter.contains(item));
            assert_eq!(false_positive, ALLOWLISTED_FALSE_POSITIVE);
            assert!(filter.allow(false_positive.as_str()));
            (filter.to_bytes(), items(&["apple", "banana"]))
        }
        "rotating" => {
            let mut filter = RotatingBloomFilter::with_window(2, 2, 0.1, Some(1_000), 0).unwrap();
            for (item, time) in [("apple", 0), ("banana", 0), ("cherry", 10), ("apple", 20)] {
                filter.insert_at(item, time);
            }
            (filter.to_bytes(), items(&["apple", "banana", "cherry"]))
        }
        "redisbloom" => {
            let mut filter = RedisBloomFilter::new(2, 0.1, 2, false).unwrap();
            for item in ["apple", "banana", "cherry"] {
                filter.insert(item.as_bytes()).unwrap();
            }
            assert_eq!(filter.links().len(), 2);
            (filter.to_bytes(), items(&["apple", "banana", "cherry"]))
        }
        "scalable-blocked" => {
            let mut filter =
                ScalableBlockedBloomFilter::new(2, 0.1, ScalableOptions::for_blocked(), 7).unwrap();
            for item in ["apple", "banana", "cherry"] {
                filter.insert(item).unwrap();
            }
            assert_eq!(filter.num_filters(), 2);
            (filter.to_bytes(), items(&["apple", "banana", "cherry"]))
        }
        other => panic!("no vector {other}"),
    }
}

/// The item the retouched vector records and removes as a false positive.
const RETOUCHED_FALSE_POSITIVE: &str = "fp-81";
/// The item the allow-listed vector lists.
const ALLOWLISTED_FALSE_POSITIVE: &str = "fp-81";

const MORE_VECTORS: [&str; 8] = [
    "blocked-3-blocks",
    "counting",
    "scalable",
    "retouched",
    "allowlisted",
    "rotating",
    "redisbloom",
    "scalable-blocked",
];

#[test]
fn every_variant_has_a_vector_and_each_is_what_the_library_writes() {
    for name in MORE_VECTORS {
        let (bytes, present) = built(name);
        assert_eq!(bytes, vector(name), "vector {name}");
        let loaded = any::open(&vector(name)).unwrap();
        for item in &present {
            assert!(loaded.contains(item.as_bytes()), "{name}: {item}");
        }
        assert!(!loaded.contains(b"elderberry"), "{name}");
    }
}

#[test]
fn the_blocked_vector_of_three_blocks_uses_more_than_one_block() {
    // The block index `((h >> 32) · num_blocks) >> 32` is exercised only where there is
    // more than one block: these items set bits in at least two of the three.
    let bytes = vector("blocked-3-blocks");
    let payload = &bytes[64..];
    assert_eq!(payload.len(), 3 * 64);
    let used = payload
        .chunks(64)
        .filter(|block| block.iter().any(|&b| b != 0))
        .count();
    assert!(used >= 2, "{used} blocks used");
}

#[test]
fn the_allowlisted_vector_lists_its_false_positive_and_answers_absent_for_it() {
    let loaded = any::open(&vector("allowlisted")).unwrap();
    assert!(!loaded.contains(ALLOWLISTED_FALSE_POSITIVE.as_bytes()));
    let listed = ALLOWLISTED_FALSE_POSITIVE.as_bytes();
    assert!(
        vector("allowlisted")
            .windows(listed.len())
            .any(|window| window == listed)
    );
}

/// Prints every vector as docs/format.md holds it, to paste after a deliberate change to
/// the bytes the library writes: `cargo test -p bloomery --test format_vectors --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn print_vectors() {
    for name in MORE_VECTORS {
        let (bytes, _) = built(name);
        println!("{name}:\n```text");
        for line in bytes.chunks(32) {
            println!("{}", line.iter().map(|b| format!("{b:02x}")).collect::<String>());
        }
        println!("```");
    }
}

#[test]
fn the_header_lengths_the_page_states() {
    // "Sealed and unsealed files": files updated in place have 64- or 128-byte headers;
    // a rotating filter of 1,024 generations has one of 28,800 bytes.
    let header_len = |bytes: &[u8]| {
        let p = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        (32 + p + 8).div_ceil(64) * 64
    };
    assert_eq!(header_len(&vector("classic")), 64);
    assert_eq!(header_len(&vector("split-block")), 64);
    assert_eq!(header_len(&vector("split-block-xxh3")), 64);
    assert_eq!(header_len(&vector("blocked-3-blocks")), 64);
    assert_eq!(header_len(&vector("blocked")), 128);
    let mut rotating = bloomery::RotatingBloomFilter::with_window(1024, 1, 0.5, None, 0).unwrap();
    for i in 0..1024u32 {
        rotating.insert_at(&i, 0);
    }
    assert_eq!(rotating.num_generations(), 1024);
    let bytes = rotating.to_bytes();
    assert_eq!(header_len(&bytes), 28_800);
    assert_eq!(bytes.len() - header_len(&bytes), 1024 * 8);
}
