//! The parsers of untrusted bytes against generated input: the stable-toolchain twin of the
//! fuzz targets in `fuzz/` (docs/fuzzing.md), run by `cargo test`.
//!
//! Random bytes die at the header checksum and test nothing beyond it, so most inputs
//! here are envelopes written with *correct* checksums around generated parameters and
//! payloads: every variant code (and unknown ones), format versions 1 and 2, parameters
//! that are plausible, at their limits or random, payloads of the right length or not,
//! and then a few mutated bytes. Real files of every variant are mutated too, raw (so the
//! checksums catch it) and with the checksums rewritten. Every input must parse or be
//! refused without a panic; whatever opens must answer, describe itself, re-serialize,
//! and re-open to a filter with the same answers and the same bytes; its read-only view
//! must answer as it does; an item it accepts must then be present. The Guava readers
//! and the dump-piece reassembly are checked the same way.

use std::sync::OnceLock;

use bloomery::any::{self, DynFilter, FilterView, GrowthLimit};
use bloomery::format::native::{Header, Persist};
use bloomery::format::pieces::{Assembled, PieceAssembler};
use bloomery::redisbloom::RedisBloomFilter;
use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
use bloomery::sizing::ClassicShape;
use bloomery::{
    AllowlistedBloomFilter, BlockedBloomFilter, BloomFilter, ClearingScheme, CountingBloomFilter,
    RetouchedBloomFilter, RotatingBloomFilter, ScalableBloomFilter, SplitBlockBloomFilter,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use xxhash_rust::xxh3::xxh3_64;

/// Items looked up and inserted.
const ITEMS: &[&[u8]] = &[b"", b"apple", b"banana", b"item 3", b"item 17", &[0xff; 9]];

/// How far the checks' inserts may grow a filter (refused by the library's `insert_within`
/// before allocating): a file can announce a next sub-filter or generation far larger than
/// itself (docs/fuzzing.md).
const MAX_GROWTH_BYTES: u64 = 4 << 20;

// ---------------------------------------------------------------------------------------
// Envelopes, written from docs/format.md ("Header")
// ---------------------------------------------------------------------------------------

fn header_len(params_len: usize) -> usize {
    (32 + params_len + 8).div_ceil(64) * 64
}

/// A whole envelope with both checksums correct.
fn envelope(version: u16, code: u16, params: &[u8], payload: &[u8]) -> Vec<u8> {
    let len = header_len(params.len());
    let mut bytes = Vec::with_capacity(len + payload.len());
    bytes.extend_from_slice(b"BLOOMERY");
    bytes.extend_from_slice(&version.to_le_bytes());
    bytes.extend_from_slice(&code.to_le_bytes());
    bytes.extend_from_slice(&(params.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&xxh3_64(payload).to_le_bytes());
    bytes.extend_from_slice(params);
    bytes.resize(len - 8, 0);
    let checksum = xxh3_64(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// The parameters and payload of a well-formed envelope.
fn split(bytes: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let params_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    (
        bytes[32..32 + params_len].to_vec(),
        bytes[header_len(params_len)..].to_vec(),
    )
}

/// Little-endian fields.
#[derive(Default)]
struct Fields(Vec<u8>);

impl Fields {
    fn u8(mut self, value: u8) -> Self {
        self.0.push(value);
        self
    }
    fn u32(mut self, value: u32) -> Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }
    fn u64(mut self, value: u64) -> Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }
    fn f64(self, value: f64) -> Self {
        self.u64(value.to_bits())
    }
    fn bytes(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }
}

/// Deterministic filler bytes (splitmix64), so payloads of any length cost one u64 of
/// generated input.
fn filler(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        bytes.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

// ---------------------------------------------------------------------------------------
// Generated parameters: mostly plausible, sometimes at or past a limit, sometimes random
// ---------------------------------------------------------------------------------------

fn small_u32(typical: std::ops::RangeInclusive<u32>) -> BoxedStrategy<u32> {
    prop_oneof![
        30 => typical,
        1 => Just(0u32),
        1 => Just(255u32),
        1 => Just(256u32),
        1 => Just(u32::MAX),
        1 => any::<u32>(),
    ]
    .boxed()
}

fn small_u64(typical: std::ops::RangeInclusive<u64>) -> BoxedStrategy<u64> {
    prop_oneof![
        30 => typical,
        1 => Just(0u64),
        1 => Just(1u64 << 32),
        1 => Just((1u64 << 31) - 1),
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ]
    .boxed()
}

fn fpp() -> BoxedStrategy<f64> {
    prop_oneof![
        30 => 0.0001f64..0.6,
        1 => Just(0.0),
        1 => Just(1.0),
        1 => Just(-0.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(1e-300),
        1 => Just(0.999_999_999),
        1 => any::<f64>(),
    ]
    .boxed()
}

/// The payload length a well-formed payload would have, changed sometimes.
fn length_change() -> BoxedStrategy<i64> {
    prop_oneof![10 => Just(0i64), 1 => Just(-1i64), 1 => Just(1i64), 1 => Just(-8i64), 1 => Just(8i64), 1 => -100i64..100]
        .boxed()
}

fn resized(mut payload: Vec<u8>, change: i64, seed: u64) -> Vec<u8> {
    let len = (payload.len() as i64 + change).clamp(0, 1 << 20) as usize;
    let extra = filler(seed ^ 0x55, len.saturating_sub(payload.len()));
    payload.truncate(len);
    payload.extend_from_slice(&extra);
    payload
}

/// A word count for the payload, capped so a generated case stays small whatever the
/// parameter says (the parser must refuse the mismatch, not allocate it).
fn words_len(num_words: u64) -> usize {
    num_words.min(64) as usize * 8
}

/// (parameters, payload) of a classic filter.
fn classic() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    (
        small_u32(1..=20),
        small_u64(1..=16),
        length_change(),
        any::<u64>(),
    )
        .prop_map(|(num_hashes, num_words, change, seed)| {
            let params = Fields::default().u32(num_hashes).0;
            (params, resized(filler(seed, words_len(num_words)), change, seed))
        })
        .boxed()
}

fn blocked() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    let lanes = prop_oneof![8 => Just(8u32), 1 => any::<u32>()];
    let hasher = prop_oneof![8 => Just(2u32), 1 => Just(1u32), 1 => any::<u32>()];
    (small_u64(1..=6), lanes, hasher, any::<u64>(), length_change())
        .prop_map(|(num_blocks, lanes, hasher, seed, change)| {
            let params = Fields::default()
                .u64(num_blocks)
                .u32(lanes)
                .u32(hasher)
                .u64(seed)
                .0;
            let payload = filler(seed, num_blocks.min(16) as usize * 64);
            (params, resized(payload, change, seed))
        })
        .boxed()
}

fn split_block() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    let hasher = prop_oneof![8 => Just(1u32), 1 => any::<u32>()];
    (small_u64(1..=12), hasher, any::<u64>(), length_change())
        .prop_map(|(num_blocks, hasher, seed, change)| {
            let params = Fields::default().u64(num_blocks).u32(hasher).0;
            let payload = filler(seed, num_blocks.min(32) as usize * 32);
            (params, resized(payload, change, seed))
        })
        .boxed()
}

/// RedisBloom chains (variant 9): 1..=3 links whose fields mostly agree (hashes from the
/// bits per entry, bits from bytes, sizes summing), with the option word, growth, chain
/// size and payload length sometimes off.
// RedisBloom's truncated ln 2 decides the hash count, as the library's own constant.
#[allow(clippy::approx_constant)]
fn redisbloom() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    let link = (
        small_u64(1..=24),
        small_u64(0..=40),
        prop_oneof![Just(0.01f64), Just(0.5), Just(1e-5), Just(0.0), Just(1.5)],
        any::<bool>(),
    );
    let options = prop_oneof![4 => Just(5u32), 2 => Just(13u32), 1 => Just(1u32), 1 => any::<u32>()];
    (
        proptest::collection::vec(link, 1..=3),
        options,
        small_u32(0..=4),
        prop_oneof![6 => Just(0i64), 1 => -3i64..=3],
        prop_oneof![6 => Just(1u32), 1 => any::<u32>()],
        any::<u64>(),
    )
        .prop_map(|(links, options, growth, size_change, layout, seed)| {
            let total = links.iter().fold(0u64, |sum, link| sum.wrapping_add(link.1));
            let mut header = Fields::default()
                .u64(total.saturating_add_signed(size_change))
                .u32(links.len() as u32)
                .u32(options)
                .u32(growth);
            let mut bits_len = 0;
            for &(words, size, error, power_of_two) in &links {
                let bytes = words.clamp(1, 64) * 8;
                let bpe = (error.ln() / 0.480453013918201).abs();
                let n2 = if power_of_two {
                    63 - (bytes * 8).leading_zeros() as u8
                } else {
                    0
                };
                header = header
                    .u64(bytes)
                    .u64(bytes * 8)
                    .u64(size)
                    .f64(error)
                    .f64(bpe)
                    .u32((0.693147180559945 * bpe).ceil() as u32)
                    .u64(100)
                    .u8(n2);
                bits_len += bytes as usize;
            }
            let header = header.0;
            let params = Fields::default().u32(layout).u32(header.len() as u32).0;
            let mut payload = header;
            payload.extend_from_slice(&filler(seed, bits_len));
            (params, resized(payload, size_change.signum(), seed))
        })
        .boxed()
}

/// Scalable-blocked chains (variant 10): 1..=3 sub-filters of a few blocks, with the
/// options, count and payload length sometimes off.
fn scalable_blocked() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    (
        small_u64(1..=1000),
        prop_oneof![4 => Just(0.01f64), 1 => Just(0.0), 1 => Just(0.5)],
        small_u32(1..=4),
        prop_oneof![4 => Just(0.5f64), 1 => Just(1.0)],
        prop_oneof![4 => Just(1u8), 2 => Just(0u8), 1 => Just(2u8)],
        proptest::collection::vec((small_u64(0..=500), small_u64(0..=500), small_u64(1..=6)), 1..=3),
        length_change(),
        any::<u64>(),
    )
        .prop_map(
            |(initial, fpp, expansion, tightening, scaling, links, change, seed)| {
                let mut params = Fields::default()
                    .u64(initial)
                    .f64(fpp)
                    .u32(expansion)
                    .f64(tightening)
                    .u8(scaling)
                    .u64(seed)
                    .u32(links.len() as u32);
                let mut payload_len = 0;
                for &(capacity, items, num_blocks) in &links {
                    params = params.u64(capacity).u64(items).u64(num_blocks);
                    payload_len += num_blocks.min(16) as usize * 64;
                }
                (params.0, resized(filler(seed, payload_len), change, seed))
            },
        )
        .boxed()
}

fn counting() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    (
        small_u64(1..=600),
        small_u32(1..=20),
        length_change(),
        any::<u64>(),
    )
        .prop_map(|(num_counters, num_hashes, change, seed)| {
            let params = Fields::default().u64(num_counters).u32(num_hashes).0;
            let mut payload = filler(seed, num_counters.min(1024).div_ceil(2) as usize);
            if num_counters % 2 == 1 && seed % 4 != 0 {
                // The unused high nibble of an odd count is zero in a well-formed file.
                if let Some(last) = payload.last_mut() {
                    *last &= 0x0f;
                }
            }
            (params, resized(payload, change, seed))
        })
        .boxed()
}

/// One sub-filter (scalable) or generation (rotating): two u64 counters, its shape.
fn part() -> BoxedStrategy<(u64, u64, u32, u64)> {
    (
        small_u64(0..=200),
        small_u64(0..=200),
        small_u32(1..=12),
        small_u64(1..=6),
    )
        .boxed()
}

fn scalable() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    let count = prop_oneof![10 => 1usize..=5, 1 => Just(0usize), 1 => Just(64usize), 1 => Just(65usize)];
    (
        small_u64(1..=100),
        fpp(),
        small_u32(1..=4),
        fpp(),
        prop_oneof![5 => Just(1u8), 5 => Just(0u8), 1 => any::<u8>()],
        count,
        proptest::collection::vec(part(), 1..=5),
        length_change(),
        any::<u64>(),
    )
        .prop_map(
            |(capacity, fpp, expansion, tightening, scaling, count, parts, change, seed)| {
                let mut params = Fields::default()
                    .u64(capacity)
                    .f64(fpp)
                    .u32(expansion)
                    .f64(tightening)
                    .u8(scaling)
                    .u32(count as u32);
                let mut payload_len = 0;
                for index in 0..count {
                    let (capacity, items, num_hashes, num_words) = parts[index % parts.len()];
                    params = params.u64(capacity).u64(items).u32(num_hashes).u64(num_words);
                    payload_len += words_len(num_words);
                }
                (
                    params.0,
                    resized(filler(seed, payload_len.min(1 << 16)), change, seed),
                )
            },
        )
        .boxed()
}

fn retouched() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    let list = (0u64..64, proptest::collection::vec(any::<(u64, u64)>(), 0..4));
    (
        small_u32(1..=12),
        small_u64(1..=4),
        any::<u64>(),
        small_u64(0..=5),
        proptest::collection::vec(list.clone(), 0..4),
        proptest::collection::vec(list, 0..4),
        any::<bool>(),
        length_change(),
        any::<u64>(),
    )
        .prop_map(
            |(
                num_hashes,
                num_words,
                random_state,
                false_negatives,
                items,
                false_positives,
                sorted,
                change,
                seed,
            )| {
                let params = Fields::default()
                    .u32(num_hashes)
                    .u64(num_words)
                    .u64(random_state)
                    .u64(false_negatives)
                    .u64(items.len() as u64)
                    .u64(false_positives.len() as u64)
                    .0;
                let mut payload = Fields::default().bytes(&filler(seed, words_len(num_words)));
                for mut lists in [items, false_positives] {
                    if sorted {
                        lists.sort_by_key(|(index, _)| *index);
                        lists.dedup_by_key(|(index, _)| *index);
                    }
                    for (index, entries) in lists {
                        payload = payload.u64(index).u32(entries.len() as u32);
                        for (h1, h2) in entries {
                            payload = payload.u64(h1).u64(h2);
                        }
                    }
                }
                (params, resized(payload.0, change, seed))
            },
        )
        .boxed()
}

fn allowlisted() -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    (
        small_u32(1..=12),
        small_u64(1..=4),
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..6), 0..5),
        any::<bool>(),
        length_change(),
        any::<u64>(),
    )
        .prop_map(|(num_hashes, num_words, mut listed, sorted, change, seed)| {
            if sorted {
                listed.sort();
                listed.dedup();
            }
            let params = Fields::default()
                .u32(num_hashes)
                .u64(num_words)
                .u64(listed.len() as u64)
                .0;
            let mut payload = Fields::default().bytes(&filler(seed, words_len(num_words)));
            for item in &listed {
                payload = payload.u32(item.len() as u32).bytes(item);
            }
            (params, resized(payload.0, change, seed))
        })
        .boxed()
}

/// Rotating parameters, with (version 2) or without (version 1) per-generation shapes.
fn rotating(shapes: bool) -> BoxedStrategy<(Vec<u8>, Vec<u8>)> {
    (
        small_u32(2..=5),
        small_u64(1..=100),
        fpp(),
        prop_oneof![Just(0u64), 1u64..100_000, Just(u64::MAX)],
        small_u32(1..=5),
        proptest::collection::vec(part(), 1..=5),
        length_change(),
        any::<u64>(),
    )
        .prop_map(
            move |(max_generations, items_per_generation, fpp, window, kept, parts, change, seed)| {
                let mut params = Fields::default()
                    .u32(max_generations)
                    .u64(items_per_generation)
                    .f64(fpp)
                    .u64(window)
                    .u32(kept);
                let sized = ClassicShape::for_fpp(items_per_generation, fpp)
                    .map_or(8, |shape| shape.num_words.min(4096) * 8);
                let mut payload_len = 0;
                for index in 0..kept.min(8) as usize {
                    let (items, started, num_hashes, num_words) = parts[index % parts.len()];
                    params = params.u64(items).u64(started);
                    if shapes {
                        params = params.u32(num_hashes).u64(num_words);
                        payload_len += words_len(num_words);
                    } else {
                        payload_len += sized;
                    }
                }
                (params.0, resized(filler(seed, payload_len), change, seed))
            },
        )
        .boxed()
}

/// Byte changes applied after the structure: (in the parameters?, position, xor).
fn mutations() -> BoxedStrategy<Vec<(bool, usize, u8)>> {
    prop_oneof![
        3 => Just(Vec::new()),
        1 => proptest::collection::vec((any::<bool>(), any::<usize>(), 1u8..=255), 1..4),
    ]
    .boxed()
}

fn mutate(params: &mut [u8], payload: &mut [u8], mutations: &[(bool, usize, u8)]) {
    for &(in_params, position, xor) in mutations {
        let target: &mut [u8] = if in_params { params } else { payload };
        if !target.is_empty() {
            let index = position % target.len();
            target[index] ^= xor;
        }
    }
}

/// An envelope with correct checksums of any variant code (mostly the 10 known ones, with
/// their own parameter generators), version 1 or 2, with a few bytes mutated.
fn generated_envelope() -> impl Strategy<Value = Vec<u8>> {
    let version = prop_oneof![3 => Just(2u16), 1 => Just(1u16)];
    version
        .prop_flat_map(|version| {
            let parts = prop_oneof![
                (Just(1u16), classic()),
                (Just(2u16), blocked()),
                (Just(3u16), counting()),
                (Just(4u16), scalable()),
                (Just(5u16), retouched()),
                (Just(6u16), allowlisted()),
                (Just(7u16), rotating(version >= 2)),
                (Just(8u16), split_block()),
                (Just(9u16), redisbloom()),
                (Just(10u16), scalable_blocked()),
                (prop_oneof![Just(0u16), Just(11u16), any::<u16>()], classic()),
            ];
            (Just(version), parts, mutations())
        })
        .prop_map(|(version, (code, (mut params, mut payload)), mutations)| {
            mutate(&mut params, &mut payload, &mutations);
            envelope(version, code, &params, &payload)
        })
}

// ---------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------

fn answers(filter: &dyn FilterView) -> Vec<bool> {
    let single: Vec<bool> = ITEMS.iter().map(|item| filter.contains(item)).collect();
    let mut batch = vec![false; ITEMS.len()];
    filter.contains_batch(ITEMS, &mut batch);
    assert_eq!(batch, single, "contains_batch disagrees with contains");
    let _ = filter.stats();
    let _ = filter.describe();
    single
}

/// Serializes, re-opens, and checks answers and bytes.
fn round_trip(filter: &dyn DynFilter) -> Result<(), TestCaseError> {
    let bytes = filter.envelope().to_vec();
    prop_assert_eq!(filter.envelope().len(), bytes.len() as u64);
    let reopened = any::open(&bytes).map_err(|error| {
        TestCaseError::fail(format!(
            "re-serialized {} does not open: {error}",
            filter.variant()
        ))
    })?;
    prop_assert_eq!(answers(&*reopened), answers(filter));
    prop_assert!(
        reopened.envelope().to_vec() == bytes,
        "a second serialization differs"
    );
    Ok(())
}

/// Everything done with a native file's bytes: the read-only view (the CLI's path), the
/// full open, and for a filter that opens lookups, serialization, inserts, a removal.
/// Returns whether it opened.
fn check_native(bytes: &[u8]) -> Result<bool, TestCaseError> {
    let opened = any::open(bytes);
    let mut view_answers = None;
    if let Ok(header) = Header::parse(bytes)
        && let Ok(view) = any::view(&header, &bytes[header.payload_offset..])
    {
        prop_assert_eq!(view.variant(), header.variant);
        view_answers = Some(answers(&*view));
    }
    let Ok(mut filter) = opened else {
        return Ok(false);
    };
    let before = answers(&*filter);
    if let Some(view_answers) = view_answers {
        prop_assert_eq!(&view_answers, &before, "the view answers otherwise");
    }
    round_trip(&*filter)?;
    variant_api(&*filter)?;
    let limit = filter.stats().memory_bytes.saturating_add(MAX_GROWTH_BYTES);
    for item in ITEMS {
        match filter.insert_within(item, GrowthLimit::Total(limit)) {
            Ok(_) => prop_assert!(
                filter.contains(item),
                "{}: an inserted item is absent",
                filter.variant()
            ),
            Err(bloomery::Error::MemoryLimit { .. }) => break,
            Err(_) => {}
        }
    }
    let _ = filter.remove(ITEMS[1]);
    if filter.envelope().len() <= MAX_GROWTH_BYTES {
        round_trip(&*filter)?;
    }
    Ok(true)
}

/// The variant's own API beyond `DynFilter`, on copies of a filter that opened.
fn variant_api(filter: &dyn DynFilter) -> Result<(), TestCaseError> {
    let concrete = filter.as_any();
    if let Some(retouched) = concrete.downcast_ref::<RetouchedBloomFilter>() {
        for scheme in [
            ClearingScheme::Random,
            ClearingScheme::MinimumFalseNegatives,
            ClearingScheme::MaximumFalsePositives,
            ClearingScheme::Ratio,
        ] {
            let mut copy = retouched.clone();
            for item in ITEMS {
                copy.record_false_positive(item);
                if copy.remove_false_positive(item, scheme).cleared_bit.is_some() {
                    prop_assert!(!copy.contains(item), "a removed false positive is present");
                }
            }
            round_trip(&copy)?;
        }
    }
    if let Some(allowlisted) = concrete.downcast_ref::<AllowlistedBloomFilter>() {
        let mut copy = allowlisted.clone();
        for item in ITEMS {
            if copy.allow(item) {
                prop_assert!(!copy.contains(item), "a listed item is present");
            }
        }
        round_trip(&copy)?;
    }
    if let Some(counting) = concrete.downcast_ref::<CountingBloomFilter>() {
        let mut copy = counting.clone();
        for item in ITEMS {
            let count = copy.count(item);
            if copy.remove(item).is_ok() {
                prop_assert!(count > 0, "removed an item counted 0");
            }
        }
        round_trip(&copy)?;
    }
    if let Some(rotating) = concrete.downcast_ref::<RotatingBloomFilter>() {
        let mut copy = rotating.clone();
        let limit = (copy.memory_bytes() as u64).saturating_add(MAX_GROWTH_BYTES);
        for (item, now_ms) in ITEMS.iter().zip([0, 1, u64::MAX / 2, u64::MAX]) {
            if copy.insert_within(item, now_ms, Some(limit)).is_err() {
                break;
            }
            prop_assert!(copy.contains(item), "an item inserted at {} is absent", now_ms);
        }
        round_trip(&copy)?;
    }
    Ok(())
}

/// Small real files of every variant, each filled through its own API so every part of
/// its format is used.
fn real_files() -> &'static [Vec<u8>] {
    static FILES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    FILES.get_or_init(|| {
        let present: Vec<String> = (0..60).map(|i| format!("item {i}")).collect();
        let absent: Vec<String> = (0..400).map(|i| format!("absent {i}")).collect();
        let mut classic = BloomFilter::with_fpp(60, 0.01).unwrap();
        let mut blocked = BlockedBloomFilter::with_fpp_and_seed(60, 0.01, 9).unwrap();
        let mut counting = CountingBloomFilter::with_fpp(60, 0.01).unwrap();
        let mut scalable = ScalableBloomFilter::new(8, 0.01).unwrap();
        let mut retouched = RetouchedBloomFilter::with_fpp(30, 0.2).unwrap();
        let mut allowlisted = AllowlistedBloomFilter::with_fpp(30, 0.2).unwrap();
        // Generations of Guava's shape (ClassicShape::for_rate's for 30 items at 10%, which
        // adds no bits there), as version 1 files, which store none, were written.
        let mut rotating = RotatingBloomFilter::new(3, 30, 0.1).unwrap();
        let mut split_block = SplitBlockBloomFilter::with_fpp(60, 0.01).unwrap();
        let mut redisbloom = RedisBloomFilter::new(8, 0.01, 2, false).unwrap();
        let mut scalable_blocked =
            ScalableBlockedBloomFilter::new(8, 0.01, bloomery::ScalableOptions::default(), 5).unwrap();
        for item in &present {
            redisbloom.insert(item.as_bytes()).unwrap();
            scalable_blocked.insert(item).unwrap();
            split_block.insert(item);
            classic.insert(item);
            blocked.insert(item);
            counting.insert(item);
            scalable.insert(item).unwrap();
            retouched.insert(item);
            allowlisted.insert(item);
            rotating.insert(item);
        }
        for item in &present[..5] {
            counting.remove(item).unwrap();
        }
        for item in &absent {
            if retouched.contains(item) {
                retouched.record_false_positive(item);
            }
            if allowlisted.contains(item) {
                allowlisted.allow(item);
            }
        }
        for item in absent.iter().take(50) {
            if retouched.contains(item) {
                let _ = retouched.remove_false_positive(item, ClearingScheme::MinimumFalseNegatives);
            }
        }
        assert!(
            allowlisted.allowed_len() > 0
                && scalable.num_filters() > 1
                && rotating.num_generations() > 1
                && redisbloom.links().len() > 1
                && scalable_blocked.num_filters() > 1
        );
        vec![
            classic.to_bytes(),
            blocked.to_bytes(),
            counting.to_bytes(),
            scalable.to_bytes(),
            retouched.to_bytes(),
            allowlisted.to_bytes(),
            rotating.to_bytes(),
            split_block.to_bytes(),
            redisbloom.to_bytes(),
            scalable_blocked.to_bytes(),
        ]
    })
}

/// A real file in version 1: the version field, and for the rotating filter the
/// per-generation shapes removed (version 1 implies them).
fn version_1(bytes: &[u8]) -> Vec<u8> {
    let (mut params, payload) = split(bytes);
    let code = u16::from_le_bytes([bytes[10], bytes[11]]);
    if code == 7 {
        let kept = u32::from_le_bytes(params[28..32].try_into().unwrap()) as usize;
        let mut v1 = params[..32].to_vec();
        for generation in 0..kept {
            v1.extend_from_slice(&params[32 + 28 * generation..][..16]);
        }
        params = v1;
    }
    envelope(1, code, &params, &payload)
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[test]
fn the_real_files_open_in_both_versions_and_round_trip() {
    for bytes in real_files() {
        let code = u16::from_le_bytes([bytes[10], bytes[11]]);
        assert!(check_native(bytes).unwrap(), "variant {code} does not open");
        let v1 = version_1(bytes);
        // Version 1 blocked files hashed with foldhash, which is gone: refused; version 1
        // had no split-block or redisbloom variant.
        assert_eq!(
            check_native(&v1).unwrap(),
            code != 2 && code != 8 && code != 9 && code != 10,
            "variant {code} in version 1"
        );
    }
}

proptest! {
    #![proptest_config(config(250_000))]

    /// Envelopes with valid checksums: every variant's parameter and payload checks are
    /// reached, and none panics.
    #[test]
    fn generated_envelopes_parse_or_are_refused_without_panic(bytes in generated_envelope()) {
        check_native(&bytes)?;
    }
}

proptest! {
    #![proptest_config(config(75_000))]

    /// Real files with a few bytes changed, inserted, removed or cut off: raw (the
    /// checksums refuse nearly all) and with the checksums rewritten (the variant's
    /// parsers see the damage).
    #[test]
    fn mutated_real_files_parse_or_are_refused_without_panic(
        file in 0usize..10,
        v1 in any::<bool>(),
        repair in any::<bool>(),
        edits in proptest::collection::vec((any::<usize>(), 0u8..4, any::<u8>()), 1..5),
    ) {
        let original = &real_files()[file];
        let mut bytes = if v1 { version_1(original) } else { original.clone() };
        for (position, kind, value) in edits {
            let index = position % (bytes.len() + 1);
            match kind {
                0 if index < bytes.len() => bytes[index] ^= value.max(1),
                1 => bytes.insert(index, value),
                2 if index < bytes.len() => drop(bytes.remove(index)),
                _ => bytes.truncate(index),
            }
        }
        if repair && bytes.len() >= 32 {
            let claimed = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
            let params_len = claimed.min(bytes.len() - 32);
            let payload_start = header_len(params_len).min(bytes.len());
            let code = u16::from_le_bytes([bytes[10], bytes[11]]);
            let version = if v1 { 1 } else { 2 };
            bytes = envelope(version, code, &bytes[32..32 + params_len], &bytes[payload_start..]);
        }
        check_native(&bytes)?;
    }

    /// Guava's bytes: `from_guava_bytes` and the streaming `read_guava` agree, stop where
    /// the filter ends, and what they read writes back the same bytes.
    #[test]
    fn guava_bytes_are_read_alike_by_both_readers(
        strategy in prop_oneof![8 => Just(1u8), 1 => any::<u8>()],
        num_hashes in prop_oneof![8 => 1u8..=30, 1 => Just(0u8), 1 => any::<u8>()],
        num_words in prop_oneof![8 => 1i32..=40, 1 => Just(0i32), 1 => Just(-1i32), 1 => Just(i32::MAX), 1 => any::<i32>()],
        change in length_change(),
        seed in any::<u64>(),
    ) {
        let mut bytes = vec![strategy, num_hashes];
        bytes.extend_from_slice(&num_words.to_be_bytes());
        bytes.extend_from_slice(&filler(seed, num_words.clamp(0, 64) as usize * 8));
        let bytes = resized(bytes, change, seed);
        let whole = BloomFilter::from_guava_bytes(&bytes);
        let mut rest = &bytes[..];
        let streamed = BloomFilter::read_guava(&mut rest);
        match (&whole, &streamed) {
            (Ok(whole), Ok(streamed)) => {
                prop_assert_eq!(whole, streamed);
                prop_assert!(rest.is_empty());
                prop_assert_eq!(whole.to_guava_bytes(), bytes.clone());
            }
            (Ok(_), Err(error)) => prop_assert!(false, "only from_guava_bytes accepts: {}", error),
            (Err(whole), Err(streamed)) => prop_assert_eq!(whole.to_string(), streamed.to_string()),
            (Err(_), Ok(streamed)) => {
                // Only trailing bytes: the stream reader stops right after the filter.
                let len = 6 + 8 * streamed.words().len();
                prop_assert!(bytes.len() > len && rest.len() == bytes.len() - len);
                prop_assert_eq!(streamed.to_guava_bytes(), bytes[..len].to_vec());
            }
        }
        if let Ok(filter) = whole {
            prop_assert!(check_native(&filter.to_bytes())?);
        }
    }

    /// Dump pieces: a whole envelope in pieces of any length comes back whole and opens;
    /// a damaged sequence (a piece short, long or misnumbered) is refused or, when the
    /// bytes still add up, yields exactly the bytes pushed.
    #[test]
    fn dump_pieces_reassemble_or_are_refused_without_panic(
        source in prop_oneof![(0usize..10).prop_map(|i| real_files()[i].clone()), generated_envelope()],
        piece_len in prop_oneof![1usize..600, Just(64usize), Just(1usize << 20)],
        damage in prop_oneof![4 => Just(None), 1 => (any::<usize>(), 0u8..3).prop_map(Some)],
        cap_below in any::<bool>(),
    ) {
        let max_total = if cap_below { source.len() as u64 - 1 } else { 1 << 30 };
        let mut pieces: Vec<(u64, Vec<u8>)> = source.chunks(piece_len).zip(1..).map(|(piece, number)| (number, piece.to_vec())).collect();
        if let Some((position, kind)) = damage {
            let target = position % pieces.len();
            match kind {
                0 => pieces[target].0 += 1,
                1 => drop(pieces[target].1.pop()),
                _ => pieces[target].1.push(0),
            }
        }
        let whole_header = Header::parse(&pieces[0].1).is_ok_and(|header| header.total_len() == source.len() as u64);
        let must_complete = whole_header && !cap_below && damage.is_none_or(|(position, kind)| kind == 0 && position % pieces.len() == 0);
        let mut pushed = pieces[0].1.clone();
        let mut state = PieceAssembler::start(&pieces[0].1, piece_len, max_total);
        let mut next = 1;
        loop {
            match state {
                Err(error) => {
                    prop_assert!(!must_complete, "a whole envelope is refused: {}", error);
                    break;
                }
                Ok(Assembled::NeedMore(assembler)) => {
                    prop_assert_eq!(assembler.received(), pushed.len());
                    let Some((number, piece)) = pieces.get(next) else {
                        prop_assert!(!must_complete, "a whole envelope is incomplete");
                        break;
                    };
                    pushed.extend_from_slice(piece);
                    state = assembler.push(*number, piece);
                    next += 1;
                }
                Ok(Assembled::Complete(whole)) => {
                    prop_assert!(whole == pushed, "the dump is not the pieces pushed");
                    prop_assert!(whole.len() as u64 <= max_total);
                    if must_complete {
                        prop_assert!(whole == source, "a whole envelope came back changed");
                    }
                    check_native(&whole)?;
                    break;
                }
            }
        }
    }
}

/// The generated envelopes reach every variant's parsers: over a fixed sample, inputs
/// of every variant code both open and are refused by the variant's own checks.
#[test]
fn generated_envelopes_reach_every_variant_parser() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = generated_envelope();
    let mut opened = [0u32; 11];
    let mut refused_by_variant = [0u32; 11];
    for _ in 0..3000 {
        let bytes = strategy.new_tree(&mut runner).unwrap().current();
        let Ok(header) = Header::parse(&bytes) else {
            continue;
        };
        let code = usize::from(header.variant.code());
        if any::open(&bytes).is_ok() {
            opened[code] += 1;
        } else {
            refused_by_variant[code] += 1;
        }
    }
    eprintln!(
        "of 3000 generated envelopes, by variant code 1..=10: opened {:?}, refused by the variant's checks {:?}",
        &opened[1..],
        &refused_by_variant[1..]
    );
    for code in 1..=10 {
        assert!(
            opened[code] >= 10 && refused_by_variant[code] >= 10,
            "variant {code}: {} opened, {} refused by its parser",
            opened[code],
            refused_by_variant[code]
        );
    }
}

// ---------------------------------------------------------------------------------------
// Parquet's bloom-filter header (Thrift compact protocol)
// ---------------------------------------------------------------------------------------

/// A generated Thrift value: the compact types the header reader meets or skips.
#[derive(Clone, Debug)]
enum Thrift {
    Bool(bool),
    Byte(u8),
    /// Compact type 4, 5 or 6 (i16, i32, i64) and the value, written as a zigzag varint.
    Int(u8, i64),
    Double(u64),
    Binary(Vec<u8>),
    /// A list of i32s.
    List(Vec<i64>),
    Struct(Vec<ThriftField>),
}

/// A field: its id (any i64, so that ids past Thrift's i16 are generated too), whether its
/// header takes the long form (type, then the id) even where a delta would do, its value.
#[derive(Clone, Debug)]
struct ThriftField {
    id: i64,
    long: bool,
    value: Thrift,
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn zigzag(out: &mut Vec<u8>, value: i64) {
    varint(out, ((value << 1) ^ (value >> 63)) as u64);
}

impl Thrift {
    fn kind(&self) -> u8 {
        match self {
            Thrift::Bool(true) => 1,
            Thrift::Bool(false) => 2,
            Thrift::Byte(_) => 3,
            Thrift::Int(kind, _) => *kind,
            Thrift::Double(_) => 7,
            Thrift::Binary(_) => 8,
            Thrift::List(_) => 9,
            Thrift::Struct(_) => 12,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Thrift::Bool(_) => {}
            Thrift::Byte(byte) => out.push(*byte),
            Thrift::Int(_, value) => zigzag(out, *value),
            Thrift::Double(bits) => out.extend_from_slice(&bits.to_le_bytes()),
            Thrift::Binary(bytes) => {
                varint(out, bytes.len() as u64);
                out.extend_from_slice(bytes);
            }
            Thrift::List(values) => {
                if values.len() < 15 {
                    out.push(((values.len() as u8) << 4) | 5);
                } else {
                    out.push(0xf5);
                    varint(out, values.len() as u64);
                }
                values.iter().for_each(|&value| zigzag(out, value));
            }
            Thrift::Struct(fields) => encode_fields(out, fields),
        }
    }

    /// Whether every field id in it fits an i16 (the reader refuses the others).
    fn ids_fit(&self) -> bool {
        match self {
            Thrift::Struct(fields) => fields
                .iter()
                .all(|field| i16::try_from(field.id).is_ok() && field.value.ids_fit()),
            _ => true,
        }
    }
}

fn encode_fields(out: &mut Vec<u8>, fields: &[ThriftField]) {
    let mut last = 0i64;
    for field in fields {
        let delta = field.id.wrapping_sub(last);
        let kind = field.value.kind();
        if !field.long && (1..=15).contains(&delta) {
            out.push(((delta as u8) << 4) | kind);
        } else {
            out.push(kind);
            zigzag(out, field.id);
        }
        field.value.encode(out);
        last = field.id;
    }
    out.push(0);
}

/// Field ids: mostly small, often at or past the i16 limits and at the i64 ends.
fn field_id() -> BoxedStrategy<i64> {
    prop_oneof![
        4 => -20i64..40,
        1 => prop_oneof![Just(i16::MAX as i64), Just(i16::MIN as i64), Just(i16::MAX as i64 + 1)],
        1 => prop_oneof![Just(i64::MAX), Just(i64::MIN), Just(i64::MAX - 3)],
        1 => any::<i64>(),
    ]
    .boxed()
}

fn thrift_value() -> BoxedStrategy<Thrift> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Thrift::Bool),
        any::<u8>().prop_map(Thrift::Byte),
        (4u8..=6, any::<i64>()).prop_map(|(kind, value)| Thrift::Int(kind, value)),
        any::<u64>().prop_map(Thrift::Double),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Thrift::Binary),
        proptest::collection::vec(any::<i64>(), 0..20).prop_map(Thrift::List),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        proptest::collection::vec((field_id(), any::<bool>(), inner), 0..4).prop_map(|fields| {
            Thrift::Struct(
                fields
                    .into_iter()
                    .map(|(id, long, value)| ThriftField { id, long, value })
                    .collect(),
            )
        })
    })
    .boxed()
}

/// A Parquet bloom-filter header and bitset: the four fields Parquet writes (numBytes,
/// and the algorithm, hash and compression unions, each member 1 an empty struct), each
/// sometimes dropped, given another union member or long-form header, with generated
/// fields between them; then a bitset of the announced length, sometimes not. Also
/// returns what the reader must do with it.
fn parquet_input() -> BoxedStrategy<(Vec<u8>, Expect)> {
    let union = || {
        (
            prop_oneof![8 => Just(1i64), 1 => field_id()],
            any::<bool>(),
            prop_oneof![8 => Just(true), 1 => Just(false)],
        )
    };
    let extra = proptest::collection::vec((field_id(), any::<bool>(), thrift_value()), 0..3);
    (
        prop_oneof![6 => (1u32..=32).prop_map(|blocks| i64::from(blocks) * 32), 1 => any::<i32>().prop_map(i64::from)],
        [union(), union(), union()],
        [extra.clone(), extra.clone(), extra],
        [any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()],
        prop_oneof![8 => Just(true), 1 => Just(false)],
        prop_oneof![8 => Just(0i64), 1 => -3i64..3],
        any::<u64>(),
    )
        .prop_map(|(num_bytes, unions, extras, long, keep_num_bytes, length_change, seed)| {
            let mut fields = Vec::new();
            let mut valid = true;
            let mut either = false;
            if keep_num_bytes {
                fields.push(ThriftField {
                    id: 1,
                    long: long[0],
                    value: Thrift::Int(5, num_bytes),
                });
            }
            valid &= keep_num_bytes && num_bytes >= 32 && num_bytes % 32 == 0;
            for (index, ((member, member_long, keep), extra)) in unions.into_iter().zip(extras).enumerate() {
                for (id, long, value) in extra {
                    // Another field: skipped (as Thrift skips a known id of another type),
                    // unless it has a known field's id and type, which then replaces it.
                    valid &= i16::try_from(id).is_ok() && value.ids_fit();
                    let kind = value.kind();
                    either |= (id == 1 && kind == 5) || ((2..=4).contains(&id) && kind == 12);
                    fields.push(ThriftField { id, long, value });
                }
                if keep {
                    let value = Thrift::Struct(vec![ThriftField {
                        id: member,
                        long: member_long,
                        value: Thrift::Struct(Vec::new()),
                    }]);
                    fields.push(ThriftField {
                        id: 2 + index as i64,
                        long: long[1 + index],
                        value,
                    });
                }
                valid &= keep && member == 1;
            }
            let mut bytes = Vec::new();
            encode_fields(&mut bytes, &fields);
            let header_len = bytes.len();
            let len = (num_bytes.clamp(0, 2048) + length_change).max(0) as usize;
            bytes.extend_from_slice(&filler(seed, len));
            valid &= length_change == 0 && num_bytes <= 2048;
            let expect = match (valid, either) {
                (true, false) => Expect::Accept(header_len),
                (false, false) => Expect::Refuse,
                (_, true) => Expect::Either,
            };
            (bytes, expect)
        })
        .boxed()
}

/// What the reader must do with a generated Parquet input.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Accept it, the bitset starting here.
    Accept(usize),
    Refuse,
    /// Either (a generated field replaced a known one): only no panic.
    Either,
}

proptest! {
    #![proptest_config(config(20_000))]

    /// Parquet bloom-filter bytes: parsed or refused without a panic (a field id past i16
    /// once overflowed), accepted exactly when the header is one Parquet's readers accept,
    /// and what opens holds the bitset given, writes it back and finds what is added.
    #[test]
    fn generated_parquet_bloom_filters_parse_or_are_refused_without_panic(
        (bytes, expect) in parquet_input()
    ) {
        let parsed = SplitBlockBloomFilter::from_parquet_bytes(&bytes);
        let _ = SplitBlockBloomFilter::from_parquet_bitset(&bytes);
        match (expect, parsed) {
            (Expect::Accept(header_len), Ok(mut filter)) => {
                prop_assert_eq!(&*filter.bitset(), &bytes[header_len..]);
                // Written back where every Parquet reader takes its size, refused elsewhere.
                match filter.to_parquet_bytes() {
                    Ok(written) => {
                        prop_assert!(bloomery::sizing::parquet_readers_take(filter.num_blocks()));
                        prop_assert_eq!(&SplitBlockBloomFilter::from_parquet_bytes(&written).unwrap(), &filter);
                    }
                    Err(error) => {
                        prop_assert!(!bloomery::sizing::parquet_readers_take(filter.num_blocks()));
                        prop_assert!(error.to_string().contains("power of two"), "{}", error);
                    }
                }
                for item in ITEMS {
                    filter.insert(item);
                }
                prop_assert!(ITEMS.iter().all(|item| filter.contains(item)));
            }
            (Expect::Refuse, Ok(_)) => prop_assert!(false, "accepted a header Parquet's readers refuse"),
            (Expect::Accept(_), Err(error)) => prop_assert!(false, "refused a valid header: {}", error),
            (Expect::Refuse | Expect::Either, Err(_)) | (Expect::Either, Ok(_)) => {}
        }
    }
}
