//! RedisBloom's scalable filter, against filters RedisBloom 2.6.28 itself made
//! (`tests/data/redisbloom/`, written by `scripts/redisbloom-fixtures.sh`): each is rebuilt
//! from its `BF.SCANDUMP` pieces and finds every item added to it with the same BF.INFO
//! figures; adding the same further items gives byte for byte the filter RedisBloom had
//! then (growth included); a filter created here with the same `BF.RESERVE` arguments and
//! fed the same items is identical; and the file format keeps it whole.

use std::path::{Path, PathBuf};

use bloomery::any;
use bloomery::format::native::Persist;
use bloomery::redisbloom::RedisBloomFilter;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/redisbloom")
        .join(name)
}

/// How each fixture was created: BF.RESERVE's capacity, error rate, expansion and
/// NONSCALING (the `defaults` one by BF.MADD with RedisBloom's defaults), as in
/// scripts/redisbloom-fixtures.py.
const FIXTURES: [(&str, u64, f64, u32, bool); 7] = [
    ("scaled", 100, 0.01, 2, false),
    ("nonscaling", 1000, 0.001, 2, true),
    ("expansion4", 50, 0.01, 4, false),
    ("tiny_error", 200, 0.00001, 2, false),
    ("large_error", 100, 0.4, 2, false),
    ("capacity1", 1, 0.01, 2, false),
    ("defaults", 100, 0.01, 2, false),
];

fn items(name: &str) -> Vec<Vec<u8>> {
    std::fs::read(data(name))
        .unwrap()
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// The pieces of a `.scandump` file: (iterator, data).
fn pieces(name: &str) -> Vec<(u64, Vec<u8>)> {
    let bytes = std::fs::read(data(name)).unwrap();
    let mut rest = &bytes[..];
    let mut pieces = Vec::new();
    while !rest.is_empty() {
        let iterator = u64::from_le_bytes(rest[..8].try_into().unwrap());
        let len = u64::from_le_bytes(rest[8..16].try_into().unwrap()) as usize;
        pieces.push((iterator, rest[16..16 + len].to_vec()));
        rest = &rest[16 + len..];
    }
    pieces
}

/// BF.INFO's figures and BF.CARD, by field name (`None` where RedisBloom answers nil:
/// a NONSCALING filter's expansion rate).
fn info(name: &str) -> Vec<(String, Option<u64>)> {
    std::fs::read_to_string(data(name))
        .unwrap()
        .lines()
        .map(|line| {
            let (field, value) = line.rsplit_once(' ').unwrap();
            (
                field.to_owned(),
                (value != "None").then(|| value.parse().unwrap()),
            )
        })
        .collect()
}

/// What BF.SCANDUMP would return for our filter: the header as piece 1, then the bits.
fn our_pieces(filter: &RedisBloomFilter) -> Vec<(u64, Vec<u8>)> {
    let mut out = vec![(1, filter.scandump_header())];
    let mut iterator = 1;
    while let Some((next, data)) = filter.scandump_chunk(iterator, 16 << 20) {
        out.push((next, data.to_vec()));
        iterator = next;
    }
    out
}

fn load(pieces: &[(u64, Vec<u8>)]) -> RedisBloomFilter {
    let (first, header) = &pieces[0];
    assert_eq!(*first, 1, "the header is piece 1");
    let mut filter = RedisBloomFilter::from_scandump_header(header).unwrap();
    for (iterator, data) in &pieces[1..] {
        filter.load_scandump_chunk(*iterator, data).unwrap();
    }
    filter
}

fn assert_info(filter: &RedisBloomFilter, expected: &[(String, Option<u64>)], what: &str) {
    for (field, value) in expected {
        let ours = match field.as_str() {
            "Capacity" => Some(filter.capacity()),
            "Size" => Some(filter.redisbloom_size()),
            "Number of filters" => Some(filter.links().len() as u64),
            "Number of items inserted" | "Card" => Some(filter.len()),
            "Expansion rate" => (!filter.is_nonscaling()).then(|| u64::from(filter.growth())),
            other => panic!("{what}: unexpected BF.INFO field {other}"),
        };
        assert_eq!(ours, *value, "{what}: {field}");
    }
}

#[test]
fn filters_redisbloom_made_load_from_scandump_and_find_every_item() {
    for (name, ..) in FIXTURES {
        let filter = load(&pieces(&format!("{name}.scandump")));
        let added = items(&format!("{name}.items"));
        assert!(!added.is_empty());
        for item in &added {
            assert!(
                filter.contains(item),
                "{name}: {:?} is missing",
                String::from_utf8_lossy(item)
            );
        }
        assert_info(&filter, &info(&format!("{name}.info")), name);
        // Our pieces are RedisBloom's, piece for piece.
        assert_eq!(our_pieces(&filter), pieces(&format!("{name}.scandump")), "{name}");
    }
}

/// A RedisBloom-format load is a live filter from its header piece on (as in RedisBloom,
/// whose migration loop does not stop writers): items added between pieces stay present
/// when the later pieces arrive (they are ORed in, not copied over).
#[test]
fn items_added_between_pieces_stay_present() {
    let mut taken = 0;
    for (name, ..) in FIXTURES {
        let pieces = pieces(&format!("{name}.scandump"));
        let mut filter = RedisBloomFilter::from_scandump_header(&pieces[0].1).unwrap();
        // A full non-scaling fixture refuses them (Full): only the ones it took count.
        let between: Vec<Vec<u8>> = (0..50)
            .map(|i| format!("between-{i}").into_bytes())
            .filter(|item| filter.insert(item).is_ok())
            .collect();
        taken += between.len();
        for (iterator, data) in &pieces[1..] {
            filter.load_scandump_chunk(*iterator, data).unwrap();
        }
        for item in between.iter().chain(&items(&format!("{name}.items"))) {
            assert!(
                filter.contains(item),
                "{name}: {:?} is missing",
                String::from_utf8_lossy(item)
            );
        }
    }
    assert!(taken > 0);
}

#[test]
fn adding_the_same_items_grows_the_filter_exactly_as_redisbloom_did() {
    for (name, ..) in FIXTURES {
        let mut filter = load(&pieces(&format!("{name}.scandump")));
        for item in items(&format!("{name}.more.items")) {
            filter.insert(&item).unwrap();
        }
        assert_eq!(
            our_pieces(&filter),
            pieces(&format!("{name}.more.scandump")),
            "{name}"
        );
        assert_info(&filter, &info(&format!("{name}.more.info")), name);
        for item in items(&format!("{name}.items"))
            .iter()
            .chain(&items(&format!("{name}.more.items")))
        {
            assert!(filter.contains(item), "{name}");
        }
    }
}

#[test]
fn a_filter_created_with_the_same_arguments_is_identical() {
    for (name, capacity, error_rate, expansion, nonscaling) in FIXTURES {
        let mut filter = RedisBloomFilter::new(capacity, error_rate, expansion, nonscaling).unwrap();
        for item in items(&format!("{name}.items")) {
            filter.insert(&item).unwrap();
        }
        assert_eq!(our_pieces(&filter), pieces(&format!("{name}.scandump")), "{name}");
        for item in items(&format!("{name}.more.items")) {
            filter.insert(&item).unwrap();
        }
        assert_eq!(
            our_pieces(&filter),
            pieces(&format!("{name}.more.scandump")),
            "{name}"
        );
    }
}

#[test]
fn a_full_nonscaling_filter_refuses_new_items_as_redisbloom_does() {
    let mut filter = load(&pieces("nonscaling.more.scandump"));
    let error = filter.insert(b"nonscaling:more:0").unwrap_err();
    assert!(error.to_string().contains("full"), "{error}");
    // An item it holds is still "already added", not an error (RedisBloom checks first).
    assert!(!filter.insert(b"nonscaling:0").unwrap());
}

#[test]
fn the_file_format_keeps_a_redisbloom_filter_whole() {
    for (name, ..) in FIXTURES {
        let filter = load(&pieces(&format!("{name}.more.scandump")));
        let bytes = filter.to_bytes();
        assert_eq!(RedisBloomFilter::from_bytes(&bytes).unwrap(), filter, "{name}");
        let dynamic = any::open(&bytes).unwrap();
        for item in items(&format!("{name}.items")) {
            assert!(dynamic.contains(&item), "{name}");
        }
        assert_eq!(dynamic.stats().estimated_len, filter.len());
        assert_eq!(dynamic.envelope().to_vec(), bytes);
    }
}

#[test]
fn redisbloom_s_own_pieces_joined_are_a_scandump_stream() {
    // RedisBloom's migration loop, its pieces joined in order, is what `import --format
    // redisbloom-scandump` and Python's `from_redisbloom_scandump` read.
    for (name, ..) in FIXTURES {
        let pieces = pieces(&format!("{name}.more.scandump"));
        let stream: Vec<u8> = pieces.iter().flat_map(|(_, data)| data.iter().copied()).collect();
        let filter = RedisBloomFilter::from_scandump_stream(&stream).unwrap();
        assert_eq!(filter, load(&pieces), "{name}");
        assert_eq!(filter.scandump_stream(), stream, "{name}");
        for item in items(&format!("{name}.items")) {
            assert!(filter.contains(&item), "{name}");
        }
        // Bits short or over, or a header cut, are refused.
        for bad in [&stream[..stream.len() - 1], &stream[..30]] {
            assert!(RedisBloomFilter::from_scandump_stream(bad).is_err(), "{name}");
        }
        let mut longer = stream.clone();
        longer.push(0);
        assert!(RedisBloomFilter::from_scandump_stream(&longer).is_err(), "{name}");
    }
}

#[test]
fn damaged_headers_are_refused_not_trusted() {
    let header = load(&pieces("scaled.more.scandump")).scandump_header();
    // Every single-byte change of the header is either refused or yields a filter whose
    // checked fields are consistent (a changed error rate's low bits, for example).
    for at in 0..header.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut damaged = header.clone();
            damaged[at] ^= flip;
            if let Ok(filter) = RedisBloomFilter::from_scandump_header(&damaged) {
                let total: u64 = filter.links().iter().map(|link| link.size()).sum();
                assert_eq!(total, filter.len());
                for link in filter.links() {
                    assert_eq!(link.bits(), link.bitmap().len() as u64 * 8);
                }
            }
        }
    }
    assert!(RedisBloomFilter::from_scandump_header(&header[..header.len() - 1]).is_err());
    let mut filter = load(&pieces("scaled.scandump"));
    assert!(filter.load_scandump_chunk(0, b"x").is_err());
    assert!(filter.load_scandump_chunk(u64::MAX, b"x").is_err());
    assert!(filter.load_scandump_chunk(1 + 100_000, &[0; 10]).is_err());
}

/// A one-link chain as `BF.SCANDUMP key 0` returns it (docs in `scandump_header`).
fn one_link_header(error: f64, bpe: f64, hashes: u32) -> Vec<u8> {
    let mut header = Vec::new();
    header.extend_from_slice(&0u64.to_le_bytes()); // size
    header.extend_from_slice(&1u32.to_le_bytes()); // links
    header.extend_from_slice(&0u32.to_le_bytes()); // options: none (FORCE64 off)
    header.extend_from_slice(&2u32.to_le_bytes()); // growth
    header.extend_from_slice(&8u64.to_le_bytes()); // bytes
    header.extend_from_slice(&64u64.to_le_bytes()); // bits
    header.extend_from_slice(&0u64.to_le_bytes()); // size
    header.extend_from_slice(&error.to_le_bytes());
    header.extend_from_slice(&bpe.to_le_bytes());
    header.extend_from_slice(&hashes.to_le_bytes());
    header.extend_from_slice(&4u64.to_le_bytes()); // entries
    header.push(0); // n2
    header
}

#[test]
// RedisBloom's printed constants, not the exact ln 2 (they decide the hash counts).
#[allow(clippy::approx_constant)]
fn a_link_asking_for_more_hashes_than_its_error_rate_makes_is_refused() {
    // RedisBloom's own check only ties the hash count to the stored bits per entry: a
    // crafted dump claiming 6·10^9 bits per entry at error 0.5 passes it, and every
    // lookup in its link would loop 4·10^9 times.
    let (bpe, hashes) = (6e9, (0.693147180559945f64 * 6e9).ceil() as u32);
    let message = RedisBloomFilter::from_scandump_header(&one_link_header(0.5, bpe, hashes))
        .unwrap_err()
        .to_string();
    assert!(message.contains("more than its error rate"), "{message}");
    // The shape RedisBloom makes for that error rate loads, and so does the smallest
    // positive error rate's (1075 hash functions).
    for error in [0.5, 0.01, f64::from_bits(1)] {
        let bpe = (error.ln() / 0.480453013918201).abs();
        let hashes = (0.693147180559945 * bpe).ceil() as u32;
        let mut filter = RedisBloomFilter::from_scandump_header(&one_link_header(error, bpe, hashes))
            .unwrap_or_else(|problem| panic!("error {error}: {problem}"));
        filter.load_scandump_chunk(9, &[0xff; 8]).unwrap();
        assert!(filter.contains(b"anything"));
    }
}

/// The chain RedisBloom 2.6.28 makes of `BF.RESERVE long_chain 0.01 10 EXPANSION 1` and
/// `BF.MADD long_chain u0 ... u11999`: each link halves the error rate until the halving
/// reaches 0 (the subnormals included), at 1067 links, where RedisBloom answers "problem
/// inserting into filter" for every new item. Its figures as RedisBloom answered them:
/// `long_chain.info` (BF.INFO) and `long_chain.replies` (how many replies were 1, 0 and
/// errors, and the first error's item).
#[test]
fn a_chain_grown_until_its_error_rate_underflows_is_redisbloom_s_and_loads_back() {
    let replies = std::fs::read_to_string(data("long_chain.replies")).unwrap();
    let replied = |key: &str| -> usize {
        let line = replies
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{key} ")));
        line.unwrap().parse().unwrap()
    };
    let figures = info("long_chain.info");
    let figure = |field: &str| figures.iter().find(|(name, _)| name == field).unwrap().1.unwrap();
    let mut filter = RedisBloomFilter::new(10, 0.01, 1, false).unwrap();
    let items: Vec<Vec<u8>> = (0..12000).map(|i| format!("u{i}").into_bytes()).collect();
    let (mut ones, mut zeros, mut refused) = (0, 0, Vec::new());
    for (index, item) in items.iter().enumerate() {
        match filter.insert(item) {
            Ok(true) => ones += 1,
            Ok(false) => zeros += 1,
            Err(error) => {
                assert!(error.to_string().contains("is 0 in floating point"), "{error}");
                refused.push(index);
            }
        }
    }
    assert_eq!(
        (ones, zeros, refused.len(), refused[0]),
        (
            replied("added"),
            replied("present"),
            replied("refused"),
            replied("first_refused")
        )
    );
    assert_eq!(filter.links().len() as u64, figure("Number of filters"));
    assert!(filter.links().len() <= bloomery::redisbloom::REDISBLOOM_MOST_LINKS);
    assert_eq!(
        (filter.capacity(), filter.redisbloom_size(), filter.len()),
        (
            figure("Capacity"),
            figure("Size"),
            figure("Number of items inserted")
        )
    );
    let last = filter.links().last().unwrap();
    assert_eq!(
        (last.error(), last.hashes(), last.bits()),
        (f64::from_bits(1), 1075, 15552)
    );
    // Refused items leave the chain as it was; present ones still answer 0.
    let before = filter.clone();
    assert!(filter.insert(b"never added").is_err());
    assert!(!filter.insert(&items[0]).unwrap());
    assert_eq!(filter, before);
    // It comes back whole from RedisBloom's RDB fields, its BF.SCANDUMP pieces and the
    // file format, and finds every item it took.
    let from_rdb = RedisBloomFilter::from_rdb_parts(
        filter.len(),
        filter.options(),
        filter.growth(),
        filter.rdb_links(),
    )
    .unwrap();
    assert_eq!(from_rdb, filter);
    assert_eq!(load(&our_pieces(&filter)), filter);
    assert_eq!(RedisBloomFilter::from_bytes(&filter.to_bytes()).unwrap(), filter);
    for (index, item) in items.iter().enumerate() {
        assert!(
            from_rdb.contains(item) || refused.contains(&index),
            "item {index}"
        );
    }
}

/// A chain header of `count` links, each of one item at error 0.01 (8 bytes of bits).
fn header_of_links(count: u32) -> Vec<u8> {
    let mut header = Vec::new();
    header.extend_from_slice(&0u64.to_le_bytes()); // size
    header.extend_from_slice(&count.to_le_bytes());
    header.extend_from_slice(&5u32.to_le_bytes()); // options: FORCE64 | NOROUND
    header.extend_from_slice(&2u32.to_le_bytes()); // growth
    let bpe = (0.01f64.ln() / 0.480453013918201).abs();
    for _ in 0..count {
        header.extend_from_slice(&8u64.to_le_bytes()); // bytes
        header.extend_from_slice(&64u64.to_le_bytes()); // bits
        header.extend_from_slice(&0u64.to_le_bytes()); // size
        header.extend_from_slice(&0.01f64.to_le_bytes());
        header.extend_from_slice(&bpe.to_le_bytes());
        header.extend_from_slice(&7u32.to_le_bytes()); // hashes
        header.extend_from_slice(&1u64.to_le_bytes()); // entries
        header.push(0); // n2
    }
    header
}

#[test]
fn chains_load_up_to_max_links_and_no_further() {
    use bloomery::redisbloom::MAX_LINKS;
    let most = RedisBloomFilter::from_scandump_header(&header_of_links(MAX_LINKS as u32)).unwrap();
    assert_eq!(most.links().len(), MAX_LINKS);
    let message = RedisBloomFilter::from_scandump_header(&header_of_links(MAX_LINKS as u32 + 1))
        .unwrap_err()
        .to_string();
    assert!(message.contains("links; 1..="), "{message}");
    // Such a chain takes items into its newest link, then refuses to grow past them.
    let mut most = most;
    assert!(!most.can_grow());
    assert!(any::FilterView::stats(&most).refuses_beyond_capacity);
    assert!(most.insert(b"a").unwrap());
    let error = (0..100u32)
        .map(|i| most.insert(format!("b{i}").as_bytes()))
        .find_map(Result::err)
        .expect("refused");
    assert_eq!(
        error.to_string(),
        format!(
            "filter is full: it reached its limit of {MAX_LINKS} sub-filters (it grew to hold {MAX_LINKS} items)"
        )
    );
}

/// RedisBloom keeps growth 0 from `BF.RESERVE g0 0.01 100 EXPANSION 4294967296` (its 64-bit
/// value truncated to 32 bits): such a chain loads and serves its items, and only growing
/// it is refused (RedisBloom: "problem inserting into filter").
#[test]
fn a_chain_of_growth_0_loads_and_refuses_only_to_grow() {
    let mut made = RedisBloomFilter::new(2, 0.01, 2, false).unwrap();
    made.insert(b"a").unwrap();
    let mut header = made.scandump_header();
    header[16..20].copy_from_slice(&0u32.to_le_bytes());
    let mut pieces = our_pieces(&made);
    pieces[0].1 = header;
    let mut filter = load(&pieces);
    assert_eq!(filter.growth(), 0);
    let from_rdb = RedisBloomFilter::from_rdb_parts(made.len(), made.options(), 0, made.rdb_links()).unwrap();
    assert_eq!(from_rdb, filter);
    assert!(filter.contains(b"a"));
    assert!(filter.insert(b"b").unwrap());
    let full = filter.clone();
    let message = filter.insert(b"c").unwrap_err().to_string();
    assert!(message.contains("growth is 0"), "{message}");
    assert!(!filter.insert(b"a").unwrap());
    assert_eq!(filter, full);
    assert_eq!(filter.links().len(), 1);
    // Bloomery itself still makes no such chain.
    assert!(RedisBloomFilter::new(2, 0.01, 0, false).is_err());
    // NONSCALING with any growth loads too.
    let nonscaling = RedisBloomFilter::new(2, 0.01, 2, true).unwrap();
    assert!(RedisBloomFilter::from_rdb_parts(0, nonscaling.options(), 0, nonscaling.rdb_links()).is_ok());
}

/// `BF.LOADCHUNK` pieces are placed as RedisBloom places them: a piece that would start
/// before the first byte has no link, and an empty piece inside a link is accepted.
#[test]
fn pieces_outside_the_links_are_an_invalid_offset_as_in_redisbloom() {
    let mut filter = RedisBloomFilter::new(100, 0.01, 2, false).unwrap();
    let message = filter.load_scandump_chunk(1, b"x").unwrap_err().to_string();
    assert!(message.contains("invalid offset - no link found"), "{message}");
    let message = filter.load_scandump_chunk(0, b"").unwrap_err().to_string();
    assert!(!message.contains("invalid offset"), "{message}");
    assert!(
        filter
            .load_scandump_chunk(3, b"xyz")
            .unwrap_err()
            .to_string()
            .contains("invalid offset")
    );
    assert!(
        filter
            .load_scandump_chunk(2, b"xyz")
            .unwrap_err()
            .to_string()
            .contains("cannot end")
    );
    let before = filter.clone();
    filter.load_scandump_chunk(5, b"").unwrap();
    assert_eq!(filter, before);
    filter.load_scandump_chunk(2, b"x").unwrap();
    assert_eq!(filter.links()[0].bitmap()[0], b'x');
}

/// The bound `REDISBLOOM_MOST_LINKS` states: the links a chain has when each halves the last
/// one's error rate until the halving is 0 in floating point.
#[test]
fn halving_a_first_rate_below_1_reaches_0_within_redisbloom_most_links() {
    use bloomery::redisbloom::REDISBLOOM_MOST_LINKS;
    let links = |mut error: f64| {
        let mut links = 1;
        while error * 0.5 > 0.0 {
            error *= 0.5;
            links += 1;
        }
        links
    };
    let below_1 = 1.0 - f64::EPSILON / 2.0;
    assert_eq!(links(below_1), REDISBLOOM_MOST_LINKS);
    assert!((1..1000).all(|i| links(f64::from(i) / 1000.0) <= REDISBLOOM_MOST_LINKS));
    // BF.RESERVE's first link takes half the rate.
    assert_eq!(links(below_1 * 0.5), 1074);
    assert_eq!(links(0.01 * 0.5), 1067);
}

/// A chain of one empty link with these options, loaded as from RedisBloom's RDB encoding
/// (growth 2), the link shaped as RedisBloom shapes it: `(entries, error, bits, n2)`.
/// Its constants are RedisBloom's, to its printed precision (they decide `hashes`).
#[allow(clippy::approx_constant)]
fn one_empty_link_chain(options: u32, (entries, error, bits, n2): (u64, f64, u64, u8)) -> RedisBloomFilter {
    let bpe = (error.ln() / 0.480453013918201).abs();
    let link = bloomery::redisbloom::RdbLink {
        entries,
        error,
        hashes: (0.693147180559945 * bpe).ceil() as u32,
        bpe,
        bits,
        n2,
        bitmap: std::borrow::Cow::Owned(vec![0; (bits / 8) as usize]),
        size: 0,
    };
    RedisBloomFilter::from_rdb_parts(0, options, 2, vec![link]).unwrap()
}

/// Chains whose options lack NOROUND (RedisBloom 1.x's, and those RedisBloom 2.x loads
/// from them) get power-of-two links when they grow, with the capacity raised to what
/// the rounded bits hold; ENTS_IS_BITS chains get links of `2^capacity` bits. Bloomery
/// gave every new link NOROUND's size (for the first chain below: 9 links, capacity 511,
/// 302 items, where RedisBloom made 6 links of capacity 335 holding 298). The expected
/// figures were taken from RedisBloom 2.6.28: each chain RESTOREd from a crafted DUMP
/// payload, then `BF.MADD` of `n0 ...` in batches of 100 and `BF.ADD` of 20 more, read back
/// with BF.DEBUG (bytes, hashes, capacity, size per link) and, for the bit positions, the
/// number of `absent0 ... absent1999` that BF.MEXISTS reported present.
#[test]
fn chains_without_noround_grow_power_of_two_links_as_redisbloom_does() {
    type Case = (
        u32,
        (u64, f64, u64, u8),
        u32,
        &'static [(u64, u32, u64, u64)],
        u64,
        usize,
    );
    let cases: [Case; 3] = [
        // FORCE64 without NOROUND.
        (
            4,
            (1, 0.01, 64, 4),
            300,
            &[
                (8, 7, 1, 1),
                (8, 8, 2, 2),
                (8, 9, 5, 5),
                (32, 10, 18, 18),
                (128, 11, 66, 66),
                (512, 12, 243, 206),
            ],
            298,
            141,
        ),
        // No options at all: 32-bit hashes, power-of-two links.
        (
            0,
            (100, 0.05, 1024, 10),
            1000,
            &[(128, 5, 100, 100), (256, 6, 266, 266), (1024, 7, 898, 627)],
            993,
            76,
        ),
        // ENTS_IS_BITS (with FORCE64): a new link of capacity 10 has 2^10 bits, and
        // one of capacity over 64 cannot be made.
        (
            6,
            (3, 0.01, 64, 5),
            40,
            &[(8, 7, 3, 3), (8, 8, 5, 5), (128, 9, 82, 49)],
            57,
            107,
        ),
    ];
    for (options, first, count, links, size, false_positives) in cases {
        let mut chain = one_empty_link_chain(options, first);
        for i in 0..count + 20 {
            let _ = chain.insert(format!("n{i}").as_bytes());
        }
        let shapes: Vec<_> = chain
            .links()
            .iter()
            .map(|link| {
                (
                    link.bitmap().len() as u64,
                    link.hashes(),
                    link.entries(),
                    link.size(),
                )
            })
            .collect();
        assert_eq!(shapes, links, "options {options}");
        assert_eq!(chain.len(), size, "options {options}");
        let found = (0..2000)
            .filter(|i| chain.contains(format!("absent{i}").as_bytes()))
            .count();
        assert_eq!(found, false_positives, "options {options}");
    }
}

/// RedisBloom 2.6.28 (x86-64) answers `BF.RESERVE r 0.01 9223372036854775807` OK: its
/// `(uint64_t)(entries * bpe)` of a value past 2^64 is 0, raised to 1 bit, so the link is
/// one 64-bit word (`BF.DEBUG r`: `bytes:8 bits:64 hashes:8 hashwidth:64
/// capacity:9223372036854775807 size:0 ratio:0.005`), and it takes items into it. Bloomery
/// refused to make such a chain ("more than 2^63 bits"), so a replica of that primary, or
/// an AOF replay, lost every item added to it: `new_replayed` makes RedisBloom's link
/// (`new` still refuses a filter that small for that many items). Between 2^63 and 2^64
/// bits RedisBloom's allocation fails ("could not create filter", as for capacity 10^18),
/// and both refuse.
#[test]
fn a_link_whose_bits_pass_2_to_the_64_is_one_word_as_in_redisbloom() {
    for capacity in [9_223_372_036_854_775_807, 2_000_000_000_000_000_000] {
        assert!(RedisBloomFilter::new(capacity, 0.01, 2, false).is_err());
        let mut chain = RedisBloomFilter::new_replayed(capacity, 0.01, 2, false).unwrap();
        let link = &chain.links()[0];
        let shape = (
            link.bitmap().len(),
            link.bits(),
            link.hashes(),
            link.entries(),
            link.error(),
        );
        assert_eq!(shape, (8, 64, 8, capacity, 0.005), "capacity {capacity}");
        let items: Vec<String> = (0..20).map(|i| format!("item-{i}")).collect();
        for item in &items {
            chain.insert(item.as_bytes()).unwrap();
        }
        assert!(items.iter().all(|item| chain.contains(item.as_bytes())));
        assert_eq!(chain.links().len(), 1);
    }
    assert!(RedisBloomFilter::new_replayed(1_000_000_000_000_000_000, 0.01, 2, false).is_err());
}

/// A link of a chain without NOROUND has `2^(logb(entries · bpe) + 1)` bits in RedisBloom,
/// `logb` being the exact binary exponent. Bloomery took `floor(log2(...))`, which is one
/// more for a value just below a power of two (`log2` rounds it up): here the second link
/// wants 15.999999999999998 bits, and bloomery made it of 32 bits and capacity 4 where
/// RedisBloom 2.6.28 made 16 bits and capacity 2 (its BF.DEBUG after RESTOREing this chain
/// and `BF.MADD old a b c`: `bytes:8 bits:64 hashes:6 hashwidth:64 capacity:2 size:2`),
/// with other bit positions.
#[test]
fn a_power_of_two_link_just_below_a_power_of_two_is_sized_as_redisbloom_sizes_it() {
    let error = f64::from_bits(0x3FA5_EE09_2BFF_75C3); // 0x1.5ee092bff75c3p-5
    let mut chain = one_empty_link_chain(4, (1, error, 64, 3));
    for item in [b"a", b"b", b"c"] {
        assert!(chain.insert(item).unwrap());
    }
    let shapes: Vec<_> = chain
        .links()
        .iter()
        .map(|link| (link.bitmap().len(), link.hashes(), link.entries(), link.size()))
        .collect();
    assert_eq!(shapes, [(8, 5, 1, 1), (8, 6, 2, 2)]);
}
