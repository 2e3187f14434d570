//! Properties of the Guava-compatible filter and its serialized forms, for arbitrary
//! items and parameters.

use std::collections::HashSet;

use bloomery::format::native::Persist;
use bloomery::{AtomicBloomFilter, BloomFilter};
use proptest::prelude::*;

/// (expected items, fpp) pairs covering tiny to moderate filters.
fn parameters() -> impl Strategy<Value = (u64, f64)> {
    (
        0u64..3_000,
        prop_oneof![Just(0.5), Just(0.1), Just(0.01), 1e-6f64..0.9],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn no_false_negatives(
        (expected, fpp) in parameters(),
        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..400),
    ) {
        let mut filter = BloomFilter::with_fpp(expected, fpp).unwrap();
        for item in &items {
            filter.insert(item);
        }
        for item in &items {
            prop_assert!(filter.contains(item));
        }
    }

    #[test]
    fn insert_reports_a_change_for_every_item_not_yet_reported_present(
        (expected, fpp) in parameters(),
        items in proptest::collection::vec(any::<i64>(), 0..400),
    ) {
        let mut filter = BloomFilter::with_fpp(expected, fpp).unwrap();
        for item in &items {
            let present_before = filter.contains(item);
            prop_assert_eq!(filter.insert(item), !present_before);
        }
    }

    #[test]
    fn guava_bytes_round_trip(
        (expected, fpp) in parameters(),
        items in proptest::collection::vec(any::<i64>(), 0..300),
    ) {
        let mut filter = BloomFilter::with_fpp(expected, fpp).unwrap();
        for item in &items {
            filter.insert(item);
        }
        let bytes = filter.to_guava_bytes();
        prop_assert_eq!(&BloomFilter::from_guava_bytes(&bytes).unwrap(), &filter);
        prop_assert_eq!(&BloomFilter::read_guava(&bytes[..]).unwrap(), &filter);
        prop_assert_eq!(&BloomFilter::from_bytes(&filter.to_bytes()).unwrap(), &filter);
    }

    #[test]
    fn union_contains_both_sides(
        (expected, fpp) in parameters(),
        left in proptest::collection::vec(".{0,12}", 0..200),
        right in proptest::collection::vec(".{0,12}", 0..200),
    ) {
        let mut a = BloomFilter::with_fpp(expected, fpp).unwrap();
        let mut b = a.clone();
        for item in &left {
            a.insert(item);
        }
        for item in &right {
            b.insert(item);
        }
        let mut union = a.clone();
        union.union(&b).unwrap();
        for item in left.iter().chain(&right) {
            prop_assert!(union.contains(item));
        }
        // Union is the filter of all items together.
        let mut together = BloomFilter::with_fpp(expected, fpp).unwrap();
        for item in left.iter().chain(&right) {
            together.insert(item);
        }
        prop_assert_eq!(union, together);
    }

    #[test]
    fn intersection_contains_the_common_items(
        (expected, fpp) in parameters(),
        common in proptest::collection::hash_set(any::<i32>(), 0..100),
        left in proptest::collection::vec(any::<i32>(), 0..100),
        right in proptest::collection::vec(any::<i32>(), 0..100),
    ) {
        let mut a = BloomFilter::with_fpp(expected, fpp).unwrap();
        let mut b = a.clone();
        for item in common.iter().chain(&left) {
            a.insert(item);
        }
        for item in common.iter().chain(&right) {
            b.insert(item);
        }
        a.intersection(&b).unwrap();
        for item in &common {
            prop_assert!(a.contains(item));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_guava_readers(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = BloomFilter::from_guava_bytes(&bytes);
        let _ = BloomFilter::read_guava(&bytes[..]);
    }

    #[test]
    fn plausible_guava_headers_with_arbitrary_bodies_never_panic(
        strategy in 0u8..3,
        num_hashes in any::<u8>(),
        num_words in prop_oneof![any::<i32>(), -2i32..40],
        body in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = vec![strategy, num_hashes];
        bytes.extend_from_slice(&num_words.to_be_bytes());
        bytes.extend_from_slice(&body);
        let sliced = BloomFilter::from_guava_bytes(&bytes);
        let streamed = BloomFilter::read_guava(&bytes[..]);
        let valid = strategy == 1 && num_hashes > 0 && num_words > 0;
        if valid && body.len() == 8 * num_words as usize {
            prop_assert!(sliced.is_ok());
        } else {
            prop_assert!(sliced.is_err());
        }
        if valid && body.len() >= 8 * num_words as usize {
            prop_assert!(streamed.is_ok());
        } else {
            prop_assert!(streamed.is_err());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_native_reader(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = BloomFilter::from_bytes(&bytes);
    }

    #[test]
    fn the_atomic_twin_sets_the_same_bits(
        (expected, fpp) in parameters(),
        items in proptest::collection::hash_set(any::<u64>(), 0..300),
    ) {
        let atomic = AtomicBloomFilter::with_fpp(expected, fpp).unwrap();
        let mut plain = BloomFilter::with_fpp(expected, fpp).unwrap();
        for item in &items {
            prop_assert_eq!(atomic.insert(item), plain.insert(item));
        }
        prop_assert_eq!(atomic.to_bloom_filter(), plain);
    }
}

#[test]
fn a_corrupted_native_payload_is_refused() {
    let mut filter = BloomFilter::with_fpp(1_000, 0.01).unwrap();
    let items: HashSet<i64> = (0..500).collect();
    for item in &items {
        filter.insert(item);
    }
    let mut bytes = filter.to_bytes();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x04;
    let error = BloomFilter::from_bytes(&bytes).unwrap_err().to_string();
    assert!(error.contains("payload checksum"), "{error}");
}
