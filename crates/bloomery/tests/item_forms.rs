//! One road from item to bits: in every variant, an item inserted as `&str`, `String`,
//! `&[u8]` or `Vec<u8>` is found through each of the other forms, before and after a save
//! and load, and through the object-safe interface the tools use.

use bloomery::any::{self, DynFilter, FilterView};
use bloomery::format::native::Persist;
use bloomery::{
    AllowlistedBloomFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter, Filter,
    RetouchedBloomFilter, RotatingBloomFilter, ScalableBloomFilter,
};

/// The four forms of one text item.
fn forms_contain<F>(filter: &F, text: &str) -> [bool; 4]
where
    F: Filter<str> + Filter<String> + Filter<[u8]> + Filter<Vec<u8>>,
{
    [
        Filter::<str>::contains(filter, text),
        Filter::<String>::contains(filter, &text.to_string()),
        Filter::<[u8]>::contains(filter, text.as_bytes()),
        Filter::<Vec<u8>>::contains(filter, &text.as_bytes().to_vec()),
    ]
}

fn check_variant<F>(mut filter: F)
where
    F: Filter<str> + Filter<String> + Filter<[u8]> + Filter<Vec<u8>> + Persist + DynFilter + 'static,
{
    let name = filter.variant().name();
    let items: Vec<String> = (0..400).map(|i| format!("item-{i}-é")).collect();
    for (i, item) in items.iter().enumerate() {
        // Each item goes in through one form, in turn.
        match i % 4 {
            0 => Filter::<str>::insert(&mut filter, item.as_str()),
            1 => Filter::<String>::insert(&mut filter, item),
            2 => Filter::<[u8]>::insert(&mut filter, item.as_bytes()),
            _ => Filter::<Vec<u8>>::insert(&mut filter, &item.as_bytes().to_vec()),
        }
        .unwrap();
    }
    let loaded = F::from_bytes(&filter.to_bytes()).unwrap();
    let opened = any::open(&Persist::to_bytes(&filter)).unwrap();
    for item in &items {
        assert_eq!(forms_contain(&filter, item), [true; 4], "{name}: {item}");
        assert_eq!(
            forms_contain(&loaded, item),
            [true; 4],
            "{name} after load: {item}"
        );
        assert!(
            FilterView::contains(&filter, item.as_bytes()),
            "{name} (dyn): {item}"
        );
        assert!(opened.contains(item.as_bytes()), "{name} (opened): {item}");
    }
}

#[test]
fn every_variant_finds_an_item_through_every_form() {
    check_variant(BloomFilter::with_fpp(1_000, 0.01).unwrap());
    check_variant(BlockedBloomFilter::with_fpp_and_seed(1_000, 0.01, 99).unwrap());
    check_variant(CountingBloomFilter::with_fpp(1_000, 0.01).unwrap());
    check_variant(ScalableBloomFilter::new(50, 0.01).unwrap());
    check_variant(RetouchedBloomFilter::with_fpp(1_000, 0.01).unwrap());
    check_variant(AllowlistedBloomFilter::with_fpp(1_000, 0.01).unwrap());
    check_variant(RotatingBloomFilter::new(4, 1_000, 0.01).unwrap());
}

#[test]
fn integers_are_their_little_endian_bytes_in_every_variant() {
    for variant in bloomery::format::native::Variant::ALL {
        let mut filter = any::create(&any::Spec::new(variant, 1_000, 0.01)).unwrap();
        filter.insert(&(-5i64).to_le_bytes()).unwrap();
        filter.insert(&7i32.to_le_bytes()).unwrap();
        assert!(filter.contains(&(-5i64).to_le_bytes()), "{variant}");
        assert!(
            filter.contains(&(u64::MAX - 4).to_le_bytes()),
            "{variant}: u64 with i64's bits"
        );
        assert!(filter.contains(&7u32.to_le_bytes()), "{variant}");
    }
    let mut classic = BloomFilter::with_fpp(100, 0.01).unwrap();
    classic.insert(&-5i64);
    assert!(classic.contains(&(-5i64).to_le_bytes()[..]));
    let mut blocked = BlockedBloomFilter::with_fpp(100, 0.01).unwrap();
    blocked.insert(&-5i64);
    assert!(blocked.contains(&(-5i64).to_le_bytes()[..]));
}
