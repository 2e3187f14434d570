//! The blocked filter: accuracy against its sizing promise, no false negatives, its
//! serialized form, and its lock-free twin.

use bloomery::blocked::DEFAULT_SEED;
use bloomery::format::native::Persist;
use bloomery::hash::splitmix64;
use bloomery::{AtomicBlockedBloomFilter, BlockedBloomFilter};
use proptest::prelude::*;

/// splitmix64 (Steele, Lea & Flood, 2014): random-looking keys. Sequential keys would
/// spread over blocks more evenly than random ones and flatter the filter.
fn random_keys(seed: u64, count: u64) -> Vec<u64> {
    let mut state = seed;
    (0..count).map(|_| splitmix64(&mut state)).collect()
}

/// Inserts n random keys, probes `probes` fresh ones, returns the measured rate.
fn measured_rate(n: u64, fpp: f64, probes: u64) -> (BlockedBloomFilter, f64) {
    let mut filter = BlockedBloomFilter::with_fpp(n, fpp).unwrap();
    let keys = random_keys(1, n);
    filter.insert_batch(&keys);
    assert!(
        filter.contains_batch(&keys).iter().all(|&present| present),
        "a false negative"
    );
    // Distinct from the inserted keys: a different stream of the same bijection.
    let fresh = random_keys(u64::MAX / 3, probes);
    let false_positives = filter
        .contains_batch(&fresh)
        .iter()
        .filter(|&&present| present)
        .count();
    (filter, false_positives as f64 / probes as f64)
}

#[test]
fn measured_false_positive_rate_is_at_most_the_requested_rate() {
    let n = 1_000_000;
    for (fpp, probes) in [
        (0.1, 1_000_000),
        (0.01, 2_000_000),
        (0.001, 10_000_000),
        (0.0001, 20_000_000),
    ] {
        let (filter, rate) = measured_rate(n, fpp, probes);
        let bits_per_item = filter.num_bits() as f64 / n as f64;
        let classic = -fpp.ln() / std::f64::consts::LN_2.powi(2);
        println!(
            "p = {fpp}: measured {rate:.6} over {probes} fresh keys ({:.3} of p), formula {:.6}, \
             {bits_per_item:.2} bits/item (classic optimum {classic:.2}), current estimate {:.6}",
            rate / fpp,
            filter.fpp_for_items(n),
            filter.expected_fpp()
        );
        assert!(rate <= fpp, "p = {fpp}: measured {rate}");
    }
}

/// Keys that differ only in their high bits (ids shifted into place, for example) must
/// spread over blocks as well as random ones.
#[test]
fn structured_keys_keep_the_promised_rate() {
    for shift in [0u32, 16, 32, 40] {
        let mut filter = BlockedBloomFilter::with_fpp(1_000_000, 0.01).unwrap();
        let keys: Vec<u64> = (0..1_000_000u64).map(|i| i << shift).collect();
        filter.insert_batch(&keys);
        let fresh: Vec<u64> = (1_000_000..3_000_000u64).map(|i| i << shift).collect();
        let rate = filter
            .contains_batch(&fresh)
            .iter()
            .filter(|&&present| present)
            .count() as f64
            / 2e6;
        println!("keys i << {shift}: measured {rate:.5} at p = 0.01");
        assert!(rate <= 0.01, "keys i << {shift}: measured {rate}");
    }
}

#[test]
fn estimated_len_is_within_two_percent() {
    let mut filter = BlockedBloomFilter::with_fpp(200_000, 0.01).unwrap();
    filter.insert_batch(&random_keys(7, 150_000));
    let estimate = filter.estimated_len() as f64;
    assert!((estimate / 150_000.0 - 1.0).abs() < 0.02, "estimated {estimate}");
}

/// The blocked filter's hash is XXH3-64 of the item's funnelled bytes with the stored
/// seed: saved filters depend on it, so it is pinned here. The empty input's value is the
/// xxHash project's own reference (`XXH3_64bits("")` = 0x2D06800538D394C2); the others are
/// checked again by the independent Python reader (PyPI `xxhash`) in the CLI's tests.
#[test]
fn the_item_hash_is_xxh3_64_of_the_funnelled_bytes() {
    let filter = BlockedBloomFilter::with_fpp(10, 0.01).unwrap();
    assert_eq!(filter.hash(&b""[..]), 0x2D06_8005_38D3_94C2);
    assert_eq!(filter.hash(""), filter.hash(&Vec::<u8>::new()));
    let observed = [
        filter.hash(&0u64),
        filter.hash(&u64::MAX),
        filter.hash("bloomery"),
    ];
    let pinned: [u64; 3] = [14374147212387527897, 5841669975847748627, 11044613656207020008];
    assert_eq!(
        observed, pinned,
        "the item hash changed: saved filters would answer wrongly"
    );
    let seeded = BlockedBloomFilter::with_num_blocks(1, 7).unwrap();
    assert_eq!(seeded.hash("bloomery"), 12520746119557674119);
}

#[test]
fn a_saved_filter_loads_with_the_same_bits_and_answers() {
    let mut filter = BlockedBloomFilter::with_fpp(10_000, 0.01).unwrap();
    filter.insert_batch(&random_keys(3, 10_000));
    let bytes = filter.to_bytes();
    let loaded = BlockedBloomFilter::from_bytes(&bytes).unwrap();
    assert!(loaded == filter);
    assert!(random_keys(3, 10_000).iter().all(|key| loaded.contains(key)));
}

#[test]
fn a_filter_with_another_seed_is_saved_with_its_seed() {
    let mut filter = BlockedBloomFilter::with_num_blocks(64, 99).unwrap();
    filter.insert("x");
    let loaded = BlockedBloomFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_eq!(loaded.seed(), 99);
    assert!(loaded.contains("x"));
}

#[test]
fn union_and_intersection_need_equal_shapes() {
    let mut a = BlockedBloomFilter::with_fpp(1_000, 0.01).unwrap();
    let mut b = BlockedBloomFilter::with_fpp(1_000, 0.01).unwrap();
    a.insert("left");
    b.insert("right");
    b.insert("both");
    a.insert("both");
    let mut union = a.clone();
    union.union(&b).unwrap();
    assert!(union.contains("left") && union.contains("right") && union.contains("both"));
    a.intersection(&b).unwrap();
    assert!(a.contains("both"));
    let other = BlockedBloomFilter::with_fpp(100_000, 0.01).unwrap();
    let message = a.union(&other).unwrap_err().to_string();
    assert!(message.contains("num_blocks differ"), "{message}");
    let reseeded = BlockedBloomFilter::with_fpp_and_seed(1_000, 0.01, 5).unwrap();
    let before = a.clone();
    let message = a.union(&reseeded).unwrap_err().to_string();
    assert_eq!(message, "filters are incompatible: seeds differ: 0 vs 5");
    assert!(a.intersection(&reseeded).is_err());
    assert!(a == before, "a refused union changed nothing");
}

#[test]
fn bad_parameters_are_errors() {
    assert!(BlockedBloomFilter::with_fpp(10, 1.0).is_err());
    assert!(BlockedBloomFilter::with_fpp(10, f64::NAN).is_err());
    assert!(BlockedBloomFilter::with_num_blocks(0, DEFAULT_SEED).is_err());
    assert!(BlockedBloomFilter::with_num_blocks((1 << 32) + 1, DEFAULT_SEED).is_err());
}

#[test]
fn threads_inserting_disjoint_sets_end_with_the_single_threaded_bits() {
    let keys = random_keys(11, 400_000);
    let shared = AtomicBlockedBloomFilter::with_fpp(400_000, 0.01).unwrap();
    std::thread::scope(|scope| {
        for part in keys.chunks(100_000) {
            let shared = &shared;
            scope.spawn(move || {
                for key in part {
                    shared.insert(key);
                }
            });
        }
    });
    let mut single = BlockedBloomFilter::with_fpp(400_000, 0.01).unwrap();
    single.insert_batch(&keys);
    assert!(keys.iter().all(|key| shared.contains(key)));
    assert!(BlockedBloomFilter::from(shared) == single);
}

#[test]
fn threads_inserting_batches_end_with_the_single_threaded_bits() {
    let keys = random_keys(12, 400_000);
    let shared = AtomicBlockedBloomFilter::with_fpp(400_000, 0.01).unwrap();
    // Overlapping parts, so that threads also race to set the same bits.
    std::thread::scope(|scope| {
        for part in [&keys[..250_000], &keys[150_000..]] {
            let shared = &shared;
            scope.spawn(move || {
                for batch in part.chunks(3_001) {
                    shared.insert_batch(batch);
                }
            });
        }
    });
    let mut single = BlockedBloomFilter::with_fpp(400_000, 0.01).unwrap();
    single.insert_batch(&keys);
    let mut found = vec![false; keys.len()];
    shared.contains_batch_into(&keys, &mut found);
    assert!(found.iter().all(|&found| found));
    assert!(BlockedBloomFilter::from(shared) == single);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The atomic filter's batch calls set the bits its single inserts set, and answer as
    /// its single lookups do (and as the plain filter, for present and absent items).
    #[test]
    fn atomic_batches_match_single_calls(
        num_blocks in 1u64..200,
        seed in any::<u64>(),
        inserted in proptest::collection::vec(any::<u64>(), 0..700),
        probes in proptest::collection::vec(any::<u64>(), 0..700),
    ) {
        let singles = AtomicBlockedBloomFilter::with_num_blocks(num_blocks, seed).unwrap();
        for item in &inserted {
            singles.insert(item);
        }
        let batched = AtomicBlockedBloomFilter::with_num_blocks(num_blocks, seed).unwrap();
        batched.insert_batch(&inserted);
        let mut plain = BlockedBloomFilter::with_num_blocks(num_blocks, seed).unwrap();
        plain.insert_batch(&inserted);
        let probes: Vec<u64> = inserted.iter().chain(&probes).copied().collect();
        let mut answers = vec![false; probes.len()];
        batched.contains_batch_into(&probes, &mut answers);
        for (probe, &answer) in probes.iter().zip(&answers) {
            prop_assert_eq!(answer, singles.contains(probe));
            prop_assert_eq!(answer, plain.contains(probe));
        }
        prop_assert!(answers[..inserted.len()].iter().all(|&found| found), "a false negative");
        prop_assert!(BlockedBloomFilter::from(batched) == plain);
        prop_assert!(BlockedBloomFilter::from(singles) == plain);
    }

    #[test]
    fn no_false_negatives(
        expected in 0u64..5_000,
        fpp in prop_oneof![Just(0.1), Just(0.01), 1e-6f64..0.5],
        items in proptest::collection::vec(".{0,16}", 0..1500),
    ) {
        let mut filter = BlockedBloomFilter::with_fpp(expected, fpp).unwrap();
        let (first, second) = items.split_at(items.len() / 2);
        for item in first {
            filter.insert(item);
        }
        filter.insert_batch(second);
        for item in &items {
            prop_assert!(filter.contains(item));
        }
        prop_assert!(filter.contains_batch(&items).iter().all(|&present| present));
    }

    #[test]
    fn saved_filters_round_trip(blocks in 1u64..50, keys in proptest::collection::vec(any::<u64>(), 0..300)) {
        let mut filter = BlockedBloomFilter::with_num_blocks(blocks, DEFAULT_SEED).unwrap();
        filter.insert_batch(&keys);
        let loaded = BlockedBloomFilter::from_bytes(&filter.to_bytes()).unwrap();
        prop_assert!(loaded == filter);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_reader(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = BlockedBloomFilter::from_bytes(&bytes);
    }
}
