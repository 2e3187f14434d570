//! Bit-compatibility with Guava 31.1, driven by the real Guava output in
//! `tests/data/guava/` (copied from `shared/vectors/guava/`; see its README): every row of
//! every table is checked, nothing is copied into this file.

use std::fs;
use std::path::{Path, PathBuf};

use bloomery::hash::{hash_item, murmur3_128};
use bloomery::sizing::{ClassicShape, optimal_num_bits, optimal_num_hashes};
use bloomery::{BloomFilter, Error, Funnel, Sink};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/guava")
}

fn read_text(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

/// The rows of a TSV file with a header, as maps from column name to value.
fn tsv_rows(name: &str) -> Vec<std::collections::HashMap<String, String>> {
    let text = read_text(&data_dir().join(name));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header line").split('\t').collect();
    let rows: Vec<_> = lines
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), header.len(), "{name}: {line}");
            header
                .iter()
                .zip(fields)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect();
    assert!(!rows.is_empty(), "{name} has no rows");
    rows
}

fn parse<T: std::str::FromStr>(value: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    value
        .parse()
        .unwrap_or_else(|error| panic!("parsing {value:?}: {error:?}"))
}

fn from_hex(hex: &str) -> Vec<u8> {
    assert!(hex.len().is_multiple_of(2), "odd hex length: {hex}");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// An item as the vector files write it, funnelled as the named Guava funnel does.
enum Item {
    Utf8(String),
    UnencodedChars(String),
    Long(i64),
    Int(i32),
    Bytes(Vec<u8>),
}

impl Item {
    fn parse(funnel: &str, text: &str) -> Self {
        match funnel {
            "utf8" | "ascii" => Item::Utf8(text.to_string()),
            "unencoded_chars" => Item::UnencodedChars(text.to_string()),
            "long" => Item::Long(parse(text)),
            "int" => Item::Int(parse(text)),
            "bytes" => Item::Bytes(from_hex(text)),
            other => panic!("unknown funnel {other}"),
        }
    }
}

impl Funnel for Item {
    fn funnel<S: Sink + ?Sized>(&self, into: &mut S) {
        match self {
            Item::Utf8(s) => s.funnel(into),
            Item::UnencodedChars(s) => bloomery::UnencodedChars(s).funnel(into),
            Item::Long(v) => v.funnel(into),
            Item::Int(v) => v.funnel(into),
            Item::Bytes(v) => v.funnel(into),
        }
    }
}

fn filter_file(name: &str, suffix: &str) -> PathBuf {
    data_dir().join("filters").join(format!("{name}{suffix}"))
}

/// The items of `NAME.inserted.txt`: one per line, every line ended by '\n' (an empty line
/// is the empty string).
fn inserted_items(name: &str, funnel: &str) -> Vec<Item> {
    read_text(&filter_file(name, ".inserted.txt"))
        .split_terminator('\n')
        .map(|line| Item::parse(funnel, line))
        .collect()
}

/// The probes of `NAME.probes.tsv`: Guava's answer and the item.
fn probes(name: &str, funnel: &str) -> Vec<(bool, Item)> {
    read_text(&filter_file(name, ".probes.tsv"))
        .split_terminator('\n')
        .skip(1)
        .map(|line| {
            let (answer, item) = line.split_once('\t').expect("answer<TAB>item");
            (answer == "1", Item::parse(funnel, item))
        })
        .collect()
}

fn guava_bytes(name: &str) -> Vec<u8> {
    let path = filter_file(name, ".bin");
    fs::read(&path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

#[test]
fn murmur3_128_matches_every_guava_hash() {
    let rows = tsv_rows("murmur3_128.tsv");
    for row in &rows {
        let input = from_hex(&row["input_hex"]);
        let (h1, h2) = murmur3_128(&input);
        assert_eq!(h1 as i64, parse::<i64>(&row["h1"]), "h1 of {}", row["input_hex"]);
        assert_eq!(h2 as i64, parse::<i64>(&row["h2"]), "h2 of {}", row["input_hex"]);
        let mut hash_bytes = h1.to_le_bytes().to_vec();
        hash_bytes.extend_from_slice(&h2.to_le_bytes());
        assert_eq!(
            from_hex(&row["hash_hex"]),
            hash_bytes,
            "bytes of {}",
            row["input_hex"]
        );
        // The funnel path (streaming hasher) agrees with the one-shot path.
        assert_eq!(hash_item(&input[..]), (h1, h2));
    }
}

#[test]
fn sizing_matches_every_guava_row() {
    for row in tsv_rows("sizing.tsv") {
        let n: u64 = parse(&row["expected_insertions"]);
        let p: f64 = parse(&row["fpp"]);
        let guava_bits: u64 = parse(&row["optimal_num_bits"]);
        let guava_hashes: u32 = parse(&row["num_hash_functions"]);
        let guava_bit_size: u64 = parse(&row["bit_size"]);
        let context = format!("n = {n}, p = {p}");

        let bits = optimal_num_bits(n, p).unwrap();
        assert_eq!(bits, guava_bits, "optimal_num_bits, {context}");
        assert_eq!(optimal_num_hashes(n, bits), guava_hashes, "num_hashes, {context}");

        match ClassicShape::for_fpp(n, p) {
            Ok(shape) => {
                assert_eq!(shape.num_bits(), guava_bit_size, "bit size, {context}");
                assert_eq!(shape.num_hashes, guava_hashes, "shape hashes, {context}");
            }
            // Guava computes these sizes but cannot serialize them: more than 2^31 - 1 words.
            Err(Error::Sizing { .. }) => {
                assert!(
                    guava_bit_size / 64 > i32::MAX as u64,
                    "{context} was refused but fits"
                );
            }
            Err(error) => panic!("{context}: {error}"),
        }
    }
}

#[test]
fn every_guava_filter_reads_builds_answers_and_estimates_as_guava() {
    let rows = tsv_rows("filters.tsv");
    for row in &rows {
        let name = &row["name"];
        let funnel = &row["funnel"];
        let bytes = guava_bytes(name);
        assert_eq!(
            bytes.len(),
            parse::<usize>(&row["serialized_len"]),
            "{name}: length"
        );

        // Reading: the listed fields.
        let read = BloomFilter::from_guava_bytes(&bytes).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(
            read.num_hashes(),
            parse::<u32>(&row["num_hash_functions"]),
            "{name}: k"
        );
        assert_eq!(read.words().len(), parse::<usize>(&row["words"]), "{name}: words");
        assert_eq!(read.num_bits(), parse::<u64>(&row["bit_size"]), "{name}: bits");
        assert_eq!(
            read.approximate_element_count(),
            parse::<u64>(&row["approximate_element_count"]),
            "{name}: approximate_element_count"
        );
        let guava_fpp: f64 = parse(&row["expected_fpp"]);
        let fpp = read.expected_fpp();
        if guava_fpp == 0.0 {
            assert_eq!(fpp, 0.0, "{name}: expected_fpp");
        } else {
            assert!(
                ((fpp - guava_fpp) / guava_fpp).abs() < 1e-12,
                "{name}: expected_fpp {fpp} vs {guava_fpp}"
            );
        }

        // Building from the inserted items: byte-identical output.
        let items = inserted_items(name, funnel);
        assert_eq!(
            items.len(),
            parse::<usize>(&row["inserted"]),
            "{name}: inserted count"
        );
        let mut built =
            BloomFilter::with_fpp(parse(&row["expected_insertions"]), parse(&row["fpp"])).unwrap();
        for item in &items {
            built.insert(item);
        }
        assert!(
            built.to_guava_bytes() == bytes,
            "{name}: built filter's bytes differ from Guava's"
        );
        assert_eq!(built, read, "{name}");

        // Every probe answers as Guava did, false positives included.
        let probes = probes(name, funnel);
        assert!(!probes.is_empty(), "{name}: no probes");
        for (index, (guava_answer, item)) in probes.iter().enumerate() {
            assert_eq!(built.contains(item), *guava_answer, "{name}: probe {index}");
        }
    }
}

#[test]
fn guava_filters_stream_back_through_read_guava() {
    for row in tsv_rows("filters.tsv") {
        let bytes = guava_bytes(&row["name"]);
        let streamed = BloomFilter::read_guava(&bytes[..]).unwrap();
        assert_eq!(streamed.to_guava_bytes(), bytes, "{}", row["name"]);
    }
}

#[test]
fn union_of_guava_filters_equals_guava_put_all() {
    let a = BloomFilter::from_guava_bytes(&guava_bytes("union_a")).unwrap();
    let b = BloomFilter::from_guava_bytes(&guava_bytes("union_b")).unwrap();
    let expected = guava_bytes("union_a_or_b");
    let mut union = a.clone();
    union.union(&b).unwrap();
    assert!(
        union.to_guava_bytes() == expected,
        "a ∪ b differs from Guava's a.putAll(b)"
    );
    let mut other_way = b;
    other_way.union(&a).unwrap();
    assert!(
        other_way.to_guava_bytes() == expected,
        "b ∪ a differs from Guava's a.putAll(b)"
    );
}

/// Parses "FIRST..LAST" (inclusive, as classic.tsv writes ranges).
fn inclusive_range(text: &str) -> std::ops::RangeInclusive<i32> {
    let (first, last) = text.split_once("..").expect("FIRST..LAST");
    parse(first)..=parse(last)
}

/// The classic experiment: 10^7 ints at 1%, probe the next 10^7. Guava counts exactly
/// the false positives in classic.tsv; so must we. (About 3 s optimised; tests build with
/// opt-level 3, see the workspace Cargo.toml.)
#[test]
fn classic_experiment_counts_exactly_guavas_false_positives() {
    let rows = tsv_rows("classic.tsv");
    let row = &rows[0];
    let mut filter = BloomFilter::with_fpp(parse(&row["expected_insertions"]), parse(&row["fpp"])).unwrap();
    let inserted = inclusive_range(&row["inserted"]);
    let probed = inclusive_range(&row["probed"]);
    for i in inserted.clone() {
        filter.insert(&i);
    }
    let false_negatives = inserted.filter(|i| !filter.contains(i)).count();
    let false_positives = probed.filter(|i| filter.contains(i)).count();
    assert_eq!(false_negatives, parse::<usize>(&row["false_negatives"]));
    assert_eq!(false_positives, parse::<usize>(&row["false_positives"]));
    assert_eq!(
        filter.approximate_element_count(),
        parse::<u64>(&row["approximate_element_count"])
    );
    let guava_fpp: f64 = parse(&row["expected_fpp"]);
    assert!(((filter.expected_fpp() - guava_fpp) / guava_fpp).abs() < 1e-12);
}
