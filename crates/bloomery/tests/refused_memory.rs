//! Sizes the system cannot give are errors, never aborts: files whose parameters make the
//! next growth step impossible, and filters asked for more than the address space. Sizes
//! here are beyond x86-64's and aarch64's 47-48-bit user address space, so that the
//! system refuses them whatever its overcommit policy (the blocked case, which fits the
//! address space, is refused where the kernel will not overcommit that much, as here).

use bloomery::any::{self, GrowthLimit, Spec};
use bloomery::format::native::{self, Persist, Variant};
use bloomery::redisbloom::{RdbLink, RedisBloomFilter};
use bloomery::{BlockedBloomFilter, Error, RotatingBloomFilter};

/// A RedisBloom chain (options FORCE64 | NOROUND) whose one link, of 8 bytes of bits,
/// says it is full at `entries` items: its next link is sized from `entries`.
fn full_chain(entries: u64, error: f64, growth: u32) -> RedisBloomFilter {
    let bpe = (error.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2)).abs();
    let link = RdbLink {
        entries,
        error,
        hashes: (std::f64::consts::LN_2 * bpe).ceil() as u32,
        bpe,
        bits: 64,
        n2: 0,
        bitmap: std::borrow::Cow::Owned(vec![0u8; 8]),
        size: entries,
    };
    RedisBloomFilter::from_rdb_parts(entries, 4 | 1, growth, vec![link]).unwrap()
}

#[test]
fn a_redisbloom_file_whose_next_link_cannot_be_had_refuses_the_insert() {
    // 145 bytes of file; the next link, 10^18 items at 20%, is some 4·10^17 bytes.
    let file = Persist::to_bytes(&full_chain(500_000_000_000_000_000, 0.4, 2));
    let mut loaded = any::open(&file).unwrap();
    let error = loaded.insert(b"x").unwrap_err();
    assert!(matches!(error, Error::OutOfMemory { .. }), "{error}");
    assert!(error.to_string().starts_with("cannot allocate "), "{error}");
    // Nothing changed: the chain has its one link and its count.
    let mut again = bloomery::any::open(&file).unwrap();
    assert_eq!(loaded.stats().sub_filters, again.stats().sub_filters);
    assert!(again.insert(b"x").is_err());
}

#[test]
fn growth_by_the_largest_expansion_is_refused_not_aborted() {
    for variant in [Variant::Scalable, Variant::ScalableBlocked, Variant::RedisBloom] {
        let mut spec = Spec::new(variant, 1_000_000, 0.01);
        spec.scalable.expansion = u32::MAX;
        let mut filter = any::create(&spec).unwrap();
        let mut outcome = Ok(true);
        for item in 0..1_100_000u64 {
            outcome = filter.insert(&item.to_le_bytes());
            if outcome.is_err() {
                break;
            }
        }
        let error = outcome.expect_err("the second sub-filter cannot be made");
        if variant == Variant::RedisBloom {
            // 4.3·10^15 items' link: beyond the address space.
            assert!(matches!(error, Error::OutOfMemory { .. }), "{variant:?}: {error}");
        }
        // Every item before the refusal is there.
        for item in 0..1_000_000u64 {
            assert!(filter.contains(&item.to_le_bytes()), "{variant:?}: {item}");
        }
    }
}

#[test]
fn a_redisbloom_filter_beyond_the_address_space_is_an_error() {
    let spec = Spec::new(Variant::RedisBloom, 1 << 50, 0.01);
    let error = any::create(&spec).map(|_| ()).unwrap_err();
    assert!(matches!(error, Error::OutOfMemory { .. }), "{error}");
}

#[test]
fn blocked_filters_the_system_refuses_are_errors() {
    // 2^32 blocks, 256 GiB: refused where the kernel will not overcommit it.
    match BlockedBloomFilter::with_num_blocks(1 << 32, 0) {
        Ok(filter) => assert_eq!(filter.num_blocks(), 1 << 32),
        Err(error) => assert!(matches!(error, Error::OutOfMemory { .. }), "{error}"),
    }
}

#[test]
fn a_rotating_file_that_cannot_make_a_generation_refuses_to_rotate() {
    // One item per generation at 1e-30: Guava's sizing takes it (the loader's check, which
    // older files were written with), but the generations this code makes need 7.7·10^15
    // bits. Such a file was read and then panicked at its next rotation; it is read, and
    // the rotation is an error that leaves its generations as they were.
    // Both generations kept, each full with one item: the next rotation would drop the
    // oldest, and did before it found the new one could not be made.
    let mut small = RotatingBloomFilter::new(2, 1, 0.01).unwrap();
    small.insert(b"a".as_slice());
    small.insert(b"b".as_slice());
    let mut params = Persist::params(&small);
    params[12..20].copy_from_slice(&1e-30f64.to_bits().to_le_bytes());
    let bytes = native::encode(Variant::Rotating, &params, &Persist::payload(&small));
    let mut filter = any::open(&bytes).unwrap();
    assert!(filter.contains(b"a") && filter.contains(b"b"));
    let error = filter.insert(b"c").unwrap_err();
    assert!(matches!(error, Error::Sizing { .. }), "{error}");
    assert!(
        filter.contains(b"a") && filter.contains(b"b"),
        "both generations stay"
    );
    assert_eq!(filter.stats().sub_filters, 2);
    assert!(RotatingBloomFilter::new(2, 1, 1e-30).is_err());
}

/// The variants that allocate as they grow.
const GROWING: [Variant; 4] = [
    Variant::Scalable,
    Variant::ScalableBlocked,
    Variant::RedisBloom,
    Variant::Rotating,
];

/// `insert_within` under `GrowthLimit::Room` asks for the room only when a growth step is due, refuses the step
/// that would not fit before allocating it (the item not added, every item before it
/// present, the filter as it was), and grows when there is room.
#[test]
fn every_growing_filter_asks_for_room_only_when_it_grows() {
    for variant in GROWING {
        let mut filter = any::create(&Spec::new(variant, 1_000, 0.01)).unwrap();
        let asked = std::cell::Cell::new(0u32);
        let no_room = || {
            asked.set(asked.get() + 1);
            0
        };
        let mut added = Vec::new();
        let refused = (0..100_000u64).find_map(|item| {
            let bytes = item.to_le_bytes();
            match filter.insert_within(&bytes, GrowthLimit::Room(&no_room)) {
                Ok(_) => {
                    added.push(bytes);
                    None
                }
                Err(error) => Some((bytes, error)),
            }
        });
        let (item, error) = refused.unwrap_or_else(|| panic!("{variant:?}: never grew"));
        assert!(matches!(error, Error::MemoryLimit { .. }), "{variant:?}: {error}");
        assert_eq!(asked.get(), 1, "{variant:?}: asked before a step was due");
        assert!(added.len() >= 1_000, "{variant:?}: refused at {}", added.len());
        assert!(added.iter().all(|item| filter.contains(item)), "{variant:?}");
        assert_eq!(filter.stats().sub_filters, 1, "{variant:?}");
        // With room: it grows, and holds the refused item and every one before.
        let room = || u64::MAX;
        assert!(
            filter.insert_within(&item, GrowthLimit::Room(&room)).is_ok(),
            "{variant:?}"
        );
        assert_eq!(filter.stats().sub_filters, 2, "{variant:?}");
        assert!(filter.contains(&item), "{variant:?}");
        if variant != Variant::Rotating {
            assert!(added.iter().all(|item| filter.contains(item)), "{variant:?}");
        }
    }
}

/// The batch call holds every growth step to the room the same way (stopping at the
/// refused item, the ones before it added).
#[test]
fn every_growing_filter_holds_a_batch_to_the_room() {
    for variant in GROWING {
        let mut filter = any::create(&Spec::new(variant, 1_000, 0.01)).unwrap();
        let asked = std::cell::Cell::new(0u32);
        let no_room = || {
            asked.set(asked.get() + 1);
            0
        };
        let items: Vec<[u8; 8]> = (0..5_000u64).map(u64::to_le_bytes).collect();
        let slices: Vec<&[u8]> = items.iter().map(|item| &item[..]).collect();
        let error = filter
            .insert_batch_within(&slices, GrowthLimit::Room(&no_room))
            .expect_err("the batch needs a second sub-filter");
        assert!(matches!(error, Error::MemoryLimit { .. }), "{variant:?}: {error}");
        assert_eq!(asked.get(), 1, "{variant:?}");
        assert_eq!(filter.stats().sub_filters, 1, "{variant:?}");
        let present = slices.iter().take_while(|item| filter.contains(item)).count();
        assert!(present >= 1_000, "{variant:?}: {present}");
        filter
            .insert_batch_within(&slices, GrowthLimit::Room(&|| u64::MAX))
            .unwrap();
        assert!(
            slices.iter().rev().take(1_000).all(|item| filter.contains(item)),
            "{variant:?}"
        );
    }
}

/// Filters of a fixed size never ask.
#[test]
fn fixed_size_filters_never_ask_for_room() {
    for variant in [
        Variant::Classic,
        Variant::Blocked,
        Variant::Counting,
        Variant::SplitBlock,
    ] {
        let mut filter = any::create(&Spec::new(variant, 100, 0.01)).unwrap();
        let room = || -> u64 { panic!("{variant:?} asked for room") };
        for item in 0..10_000u64 {
            filter
                .insert_within(&item.to_le_bytes(), GrowthLimit::Room(&room))
                .unwrap();
        }
    }
}
