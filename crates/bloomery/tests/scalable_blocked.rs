//! The scalable filter over blocked sub-filters: no false negatives through growth, batch
//! calls that answer as single ones, the promised rate, refusals, and the file format.

use bloomery::format::native::Persist;
use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
use bloomery::{Error, ScalableOptions};
use proptest::prelude::*;

fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

fn refs(items: &[Vec<u8>]) -> Vec<&[u8]> {
    items.iter().map(Vec::as_slice).collect()
}

#[test]
fn grown_filter_keeps_every_item_and_its_promised_rate() {
    let mut filter = ScalableBlockedBloomFilter::new(1_000, 0.01, ScalableOptions::default(), 7).unwrap();
    let present = items("present ", 100_000);
    let mut added = 0u64;
    for item in &present {
        if filter.insert(item).unwrap() {
            added += 1;
        }
    }
    assert_eq!(filter.len(), added);
    assert!(filter.num_filters() >= 7, "{} sub-filters", filter.num_filters());
    assert!(present.iter().all(|item| filter.contains(item)));
    let fresh = items("fresh ", 1_000_000);
    let mut answers = vec![false; fresh.len()];
    filter.contains_batch(&refs(&fresh), &mut answers);
    let rate = answers.iter().filter(|&&present| present).count() as f64 / fresh.len() as f64;
    eprintln!("measured rate {rate} with {} sub-filters", filter.num_filters());
    assert!(rate <= 0.01, "measured {rate}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Batches give the answers and the bits that one call per item gives, and lookups in
    /// a batch answer as single ones.
    #[test]
    fn batches_answer_as_single_calls(
        capacity in 1u64..50,
        expansion in 1u32..4,
        scaling in any::<bool>(),
        values in proptest::collection::vec(0u16..400, 0..600),
    ) {
        let options = ScalableOptions { expansion, scaling, ..ScalableOptions::default() };
        let values: Vec<Vec<u8>> = values.iter().map(|v| v.to_le_bytes().to_vec()).collect();
        let mut single = ScalableBlockedBloomFilter::new(capacity, 0.01, options, 3).unwrap();
        let mut single_answers = Vec::new();
        let mut refused = None;
        for (i, item) in values.iter().enumerate() {
            match single.insert(item) {
                Ok(added) => single_answers.push(added),
                Err(error) => {
                    refused = Some((i, error.to_string()));
                    break;
                }
            }
        }
        let mut batched = ScalableBlockedBloomFilter::new(capacity, 0.01, options, 3).unwrap();
        let mut batch_answers = vec![false; values.len()];
        let result = batched.insert_batch_within(&refs(&values), &mut batch_answers, None);
        match refused {
            None => prop_assert!(result.is_ok()),
            Some((at, message)) => {
                prop_assert_eq!(result.unwrap_err().to_string(), message);
                batch_answers.truncate(at);
            }
        }
        prop_assert_eq!(&batch_answers, &single_answers);
        prop_assert_eq!(&batched, &single);
        let stored = &values[..single_answers.len()];
        let mut present = vec![false; stored.len()];
        batched.contains_batch(&refs(stored), &mut present);
        prop_assert!(present.iter().all(|&p| p));
        let probes: Vec<Vec<u8>> = (0u16..300).map(|v| (v + 1000).to_le_bytes().to_vec()).collect();
        let mut answers = vec![false; probes.len()];
        batched.contains_batch(&refs(&probes), &mut answers);
        for (probe, answer) in probes.iter().zip(answers) {
            prop_assert_eq!(batched.contains(probe), answer);
        }
    }
}

#[test]
fn a_scaling_filter_at_its_most_sub_filters_says_so_and_refuses_beyond_capacity() {
    use bloomery::any::FilterView;
    use bloomery::scalable::MAX_SUB_FILTERS;
    let options = ScalableOptions {
        expansion: 1,
        tightening: 0.999999,
        scaling: true,
    };
    let mut filter = ScalableBlockedBloomFilter::new(1, 0.01, options, 0).unwrap();
    let mut refused = None;
    for item in items("x", 100) {
        if let Err(error) = filter.insert(&item) {
            refused = Some(error);
            break;
        }
        let growing = filter.num_filters() < MAX_SUB_FILTERS;
        assert_eq!(filter.can_grow(), growing);
        assert_eq!(FilterView::stats(&filter).refuses_beyond_capacity, !growing);
    }
    let error = refused.expect("growth stops");
    assert!(
        matches!(
            error,
            Error::SubFilterLimit {
                limit: 64,
                capacity: 64
            }
        ),
        "{error:?}"
    );
    assert_eq!(filter.num_filters(), MAX_SUB_FILTERS);
}

#[test]
fn a_full_nonscaling_filter_refuses_and_growth_is_held_to_a_memory_limit() {
    let options = ScalableOptions {
        scaling: false,
        ..ScalableOptions::default()
    };
    let mut fixed = ScalableBlockedBloomFilter::new(10, 0.01, options, 0).unwrap();
    let mut refused = None;
    for item in items("x", 100) {
        if let Err(error) = fixed.insert(&item) {
            refused = Some(error);
            break;
        }
    }
    assert!(
        matches!(refused, Some(Error::Full { capacity: 10 })),
        "{refused:?}"
    );
    assert_eq!(fixed.num_filters(), 1);

    let mut growing = ScalableBlockedBloomFilter::new(10, 0.01, ScalableOptions::default(), 0).unwrap();
    let limit = growing.memory_bytes();
    let stored = items("y", 100);
    let mut added = vec![false; stored.len()];
    let error = growing
        .insert_batch_within(&refs(&stored), &mut added, Some(limit))
        .unwrap_err();
    assert!(matches!(error, Error::MemoryLimit { .. }), "{error}");
    assert_eq!(growing.memory_bytes(), limit);
    let kept = added.iter().filter(|&&a| a).count() as u64;
    assert_eq!(growing.len(), kept);
}

#[test]
fn the_file_format_keeps_the_chain_whole_and_refuses_inconsistent_parts() {
    let mut filter = ScalableBlockedBloomFilter::new(100, 0.01, ScalableOptions::default(), 42).unwrap();
    for item in items("z", 1_000) {
        filter.insert(&item).unwrap();
    }
    let bytes = filter.to_bytes();
    let loaded = ScalableBlockedBloomFilter::from_bytes(&bytes).unwrap();
    assert_eq!(loaded, filter);
    let params = Persist::params(&filter);
    let payload = Persist::payload(&filter);
    assert!(ScalableBlockedBloomFilter::from_parts(&params, &payload[..payload.len() - 64]).is_err());
    let mut zero_count = params.clone();
    zero_count[37..41].copy_from_slice(&0u32.to_le_bytes());
    assert!(ScalableBlockedBloomFilter::from_parts(&zero_count, &payload).is_err());
    // The version-1 envelope never had this variant.
    assert!(ScalableBlockedBloomFilter::from_parts_of_version(1, &params, &payload).is_err());
}

/// Memory of a chain from capacity `capacity` at 1% after `n` distinct inserts, or the
/// error that stopped it under `limit` bytes.
fn grown_bytes(capacity: u64, options: ScalableOptions, n: u64, limit: u64) -> Result<u64, Error> {
    let mut filter = ScalableBlockedBloomFilter::new(capacity, 0.01, options, 3).unwrap();
    for i in 0..n {
        let hash = filter.hash(&i);
        filter.insert_hash_within(hash, Some(limit))?;
    }
    Ok(filter.memory_bytes())
}

#[test]
fn deep_chains_cost_less_at_the_blocked_tightening() {
    // A blocked sub-filter sets 8 bits whatever its rate, so halving the rate at every link
    // (classic chains' 0.5) makes deep links dear; 0.8 keeps them affordable.
    let blocked = ScalableOptions::for_blocked();
    let halving = ScalableOptions {
        tightening: 0.5,
        ..blocked
    };
    // 10^6 items from capacity 100: 14 links.
    let (at_08, at_05) = (
        grown_bytes(100, blocked, 1_000_000, u64::MAX).unwrap(),
        grown_bytes(100, halving, 1_000_000, u64::MAX).unwrap(),
    );
    println!("10^6 items from capacity 100: {at_08} bytes at 0.8, {at_05} at 0.5");
    assert!(at_08 * 2 < at_05, "{at_08} vs {at_05}");
    // Growth 1: 64 links of 10 items fit in 64 KiB at 0.8; at 0.5 the deep links' rates
    // near what 8 bits per item can reach, and a 64 MiB cap stops the chain.
    let growth_1 = |options: ScalableOptions| ScalableOptions {
        expansion: 1,
        ..options
    };
    let fits = grown_bytes(10, growth_1(blocked), 640, 64 << 10).unwrap();
    println!("64 links of 10 items at 0.8: {fits} bytes");
    assert!(matches!(
        grown_bytes(10, growth_1(halving), 640, 64 << 20),
        Err(Error::MemoryLimit { .. })
    ));
    // A chain that stays at its first link pays for the lower first rate.
    let single = |options| {
        ScalableBlockedBloomFilter::new(1_000_000, 0.01, options, 3)
            .unwrap()
            .memory_bytes()
    };
    let (first_08, first_05) = (single(blocked), single(halving));
    println!("one link of 10^6 items: {first_08} bytes at 0.8, {first_05} at 0.5");
    assert!(first_08 < first_05 * 13 / 10, "{first_08} vs {first_05}");
}
