//! The split-block filter against independent implementations of Parquet's Split Block
//! Bloom Filter: the `parquet` crate's `Sbbf` (the Rust Parquet writer's own filter: same
//! bytes for the same values, its header read and written), `sbbf-rs-safe` (same bytes for
//! the same hashes), and a real Parquet file written by the `parquet` crate with bloom
//! filters on (bloomery reads every column chunk's filter from it and finds every value;
//! built from the same values, bloomery's bitset is byte for byte the file's).
//!
//! `cargo test --release -p bloomery --test split_block -- --nocapture` prints the
//! measured false-positive rates.

use std::fs::File;
use std::sync::Arc;

use bloomery::SplitBlockBloomFilter;
use bloomery::format::parquet::read_header;
use bloomery::sizing::split_block_num_blocks;
use bloomery::split_block::{SplitBlockHasher, xxh64_item};
use parquet::bloom_filter::Sbbf;
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use proptest::prelude::*;

/// An item as both libraries take it: bytes (Parquet BYTE_ARRAY), i64 (INT64), i32 (INT32).
#[derive(Clone, Debug)]
enum Value {
    Bytes(Vec<u8>),
    Text(String),
    Long(i64),
    Int(i32),
}

impl Value {
    fn insert_into(&self, ours: &mut SplitBlockBloomFilter, theirs: &mut Sbbf) {
        match self {
            Value::Bytes(bytes) => {
                ours.insert(&bytes[..]);
                theirs.insert(&bytes[..]);
            }
            Value::Text(text) => {
                ours.insert(text.as_str());
                theirs.insert(text.as_str());
            }
            Value::Long(long) => {
                ours.insert(long);
                theirs.insert(long);
            }
            Value::Int(int) => {
                ours.insert(int);
                theirs.insert(int);
            }
        }
    }

    fn checks(&self, ours: &SplitBlockBloomFilter, theirs: &Sbbf) -> (bool, bool) {
        match self {
            Value::Bytes(bytes) => (ours.contains(&bytes[..]), theirs.check(&bytes[..])),
            Value::Text(text) => (ours.contains(text.as_str()), theirs.check(text.as_str())),
            Value::Long(long) => (ours.contains(long), theirs.check(long)),
            Value::Int(int) => (ours.contains(int), theirs.check(int)),
        }
    }
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..80).prop_map(Value::Bytes),
        ".{0,24}".prop_map(Value::Text),
        any::<i64>().prop_map(Value::Long),
        any::<i32>().prop_map(Value::Int),
    ]
}

/// Parquet's `Sbbf` of `num_blocks` empty blocks (any count: its bitset constructor takes
/// any whole number of blocks, as the spec allows).
fn empty_sbbf(num_blocks: u64) -> Sbbf {
    Sbbf::new(&vec![0; num_blocks as usize * 32])
}

fn sbbf_bitset(sbbf: &Sbbf) -> Vec<u8> {
    let mut bytes = Vec::new();
    sbbf.write_bitset(&mut bytes).unwrap();
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Same values, same bytes: the bitset, the header and bitset, and every answer.
    #[test]
    fn same_bytes_as_the_parquet_crates_sbbf_for_random_items_and_sizes(
        num_blocks in prop_oneof![1u64..64, 64u64..5_000, (0u32..13).prop_map(|shift| 1u64 << shift)],
        values in proptest::collection::vec(value(), 0..2_000),
        probes in proptest::collection::vec(value(), 0..300),
    ) {
        let mut ours = SplitBlockBloomFilter::with_num_blocks(num_blocks).unwrap();
        let mut theirs = empty_sbbf(num_blocks);
        for value in &values {
            value.insert_into(&mut ours, &mut theirs);
        }
        prop_assert_eq!(&ours.bitset()[..], &sbbf_bitset(&theirs)[..]);
        let mut written = Vec::new();
        theirs.write(&mut written).unwrap();
        // Written as Parquet's bytes at the sizes every Parquet reader takes (a power of
        // two bytes); read at any size, as the parquet crate writes them.
        if num_blocks.is_power_of_two() {
            prop_assert_eq!(&ours.to_parquet_bytes().unwrap(), &written);
        } else {
            prop_assert!(ours.to_parquet_bytes().is_err());
        }
        prop_assert_eq!(&SplitBlockBloomFilter::from_parquet_bytes(&written).unwrap(), &ours);
        for value in values.iter().chain(&probes) {
            let (ours_says, theirs_says) = value.checks(&ours, &theirs);
            prop_assert_eq!(ours_says, theirs_says, "{:?}", value);
        }
        for value in &values {
            prop_assert!(value.checks(&ours, &theirs).0, "a false negative: {:?}", value);
        }
    }

    /// Same hashes, same bytes as sbbf-rs-safe (which takes hashes, not values: the same
    /// salts, block index and bit order, checked without XXH64).
    #[test]
    fn same_bytes_as_sbbf_rs_safe_for_the_same_hashes(
        num_blocks in 1u64..3_000,
        hashes in proptest::collection::vec(any::<u64>(), 0..3_000),
    ) {
        let mut ours = SplitBlockBloomFilter::with_num_blocks(num_blocks).unwrap();
        let mut theirs = sbbf_rs_safe::Filter::from_bytes(&vec![0; num_blocks as usize * 32]).unwrap();
        for &hash in &hashes {
            ours.insert_hash(hash);
            theirs.insert_hash(hash);
        }
        prop_assert_eq!(&ours.bitset()[..], theirs.as_bytes());
    }
}

/// What the parquet crate reads from bloomery's bytes: every inserted value is present.
#[test]
fn the_parquet_crate_reads_bloomerys_bytes_and_finds_every_value() {
    let mut ours = SplitBlockBloomFilter::with_fpp(10_000, 0.01).unwrap();
    let values: Vec<String> = (0..10_000).map(|i| format!("user-{i}")).collect();
    ours.insert_batch(&values);
    let theirs = Sbbf::from_bytes(&ours.to_parquet_bytes().unwrap()).unwrap();
    assert!(values.iter().all(|value| theirs.check(value.as_str())));
    assert_eq!(theirs.num_blocks() as u64, ours.num_blocks());
}

/// Filters made for n items at p with Parquet's hash are sized as every Parquet reader takes
/// them (a power of two bytes, 32 B to 128 MiB: Arrow C++'s reader throws on any other
/// size), and export; a bitset of another size is refused for export (an earlier bloomery
/// exported 41,591 blocks for 10^6 items at 1%: 1,330,912 bytes, which Arrow C++ refuses).
#[test]
fn filters_made_for_parquet_have_the_sizes_parquets_readers_take() {
    for n in [1u64, 100, 10_000, 1_000_000, 3_000_000] {
        for p in [0.1, 0.01, 0.001] {
            let filter = SplitBlockBloomFilter::with_fpp(n, p).unwrap();
            let bytes = filter.num_blocks() * 32;
            assert!(
                bytes.is_power_of_two() && (32..=128 << 20).contains(&bytes),
                "{n} at {p}: {bytes}"
            );
            assert!(filter.num_blocks() >= split_block_num_blocks(n, p).unwrap());
            let theirs = Sbbf::from_bytes(&filter.to_parquet_bytes().unwrap()).unwrap();
            assert_eq!(theirs.num_blocks() as u64, filter.num_blocks());
        }
    }
    let odd = SplitBlockBloomFilter::with_num_blocks(41_591).unwrap();
    let message = odd.to_parquet_bytes().unwrap_err().to_string();
    assert!(
        message.contains("1330912 bytes") && message.contains("power of two"),
        "{message}"
    );
    // Past 128 MiB (2^22 blocks) no size suits every reader: the exact one is kept, and
    // not exported.
    let large = SplitBlockBloomFilter::with_fpp(500_000_000, 0.01).unwrap();
    assert_eq!(
        large.num_blocks(),
        split_block_num_blocks(500_000_000, 0.01).unwrap()
    );
    assert!(large.num_blocks() > 1 << 22);
    assert!(large.to_parquet_bitset().is_err());
    // A filter an earlier bloomery sized for 10^6 items at 1% (41,591 blocks) does not
    // merge with one made now (65,536), and the refusal says why.
    let mut now = SplitBlockBloomFilter::with_fpp(1_000_000, 0.01).unwrap();
    let message = now.union(&odd).unwrap_err().to_string();
    assert!(message.contains("41591 blocks was made before"), "{message}");
    let other_odd = SplitBlockBloomFilter::with_num_blocks(41_592).unwrap();
    let message = other_odd.clone().union(&odd).unwrap_err().to_string();
    assert!(!message.contains("made before"), "{message}");
    let largest_taken = SplitBlockBloomFilter::with_num_blocks(1 << 22).unwrap();
    assert!(largest_taken.to_parquet_bitset().is_ok());
    assert!(
        SplitBlockBloomFilter::with_num_blocks(1 << 23)
            .unwrap()
            .to_parquet_bitset()
            .is_err()
    );
}

/// Measured false-positive rates: at or below the requested p, near the sizing's promise;
/// sized exactly with bloomery's hash, and as Parquet's readers take it with Parquet's (a
/// power of two bytes, so lower).
#[test]
fn measured_false_positive_rate_is_at_most_the_requested_one() {
    let sizes = [(1_000_000u64, 0.01), (200_000, 0.001)];
    let hashers = [SplitBlockHasher::Xxh3 { seed: 0 }, SplitBlockHasher::Parquet];
    for ((n, p), hasher) in sizes
        .into_iter()
        .flat_map(|size| hashers.map(|hasher| (size, hasher)))
    {
        let mut filter = SplitBlockBloomFilter::with_fpp_and_hasher(n, p, hasher).unwrap();
        assert_eq!(
            filter.num_blocks().is_power_of_two(),
            hasher == SplitBlockHasher::Parquet || split_block_num_blocks(n, p).unwrap().is_power_of_two()
        );
        let inserted: Vec<u64> = (0..n).collect();
        filter.insert_batch(&inserted);
        let fresh: Vec<u64> = (n..2 * n).collect();
        let false_positives = filter
            .contains_batch(&fresh)
            .iter()
            .filter(|&&present| present)
            .count();
        let rate = false_positives as f64 / n as f64;
        let promised = filter.fpp_for_items(n);
        println!(
            "split-block ({}) n={n} p={p}: {} blocks ({:.2} bits per item), formula {promised:.5}, \
             measured {rate:.5} ({false_positives} of {n} fresh keys)",
            hasher.describe(),
            filter.num_blocks(),
            filter.num_bits() as f64 / n as f64
        );
        assert!(rate <= p, "measured {rate} > requested {p}");
        // Within four standard deviations of the formula's promise.
        let sigma = (promised * (1.0 - promised) / n as f64).sqrt();
        assert!(
            (rate - promised).abs() < 4.0 * sigma + 1e-4 * p,
            "{rate} vs {promised}"
        );
        assert!(
            inserted.iter().all(|item| filter.contains(item)),
            "a false negative"
        );
    }
}

/// A Parquet file with three columns (BYTE_ARRAY strings, INT64, INT32), written by the
/// parquet crate with bloom filters on, and the values it holds.
struct ParquetFile {
    path: std::path::PathBuf,
    names: Vec<String>,
    ids: Vec<i64>,
    counts: Vec<i32>,
}

impl Drop for ParquetFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn write_parquet_file(rows: usize) -> ParquetFile {
    let path = std::env::temp_dir().join(format!("bloomery-split-block-{}.parquet", std::process::id()));
    let file = ParquetFile {
        path,
        names: (0..rows).map(|i| format!("https://example.com/{i}")).collect(),
        ids: (0..rows as i64).map(|i| i * 7919 - 1_000_000).collect(),
        counts: (0..rows as i32).map(|i| i.wrapping_mul(31) - 5_000).collect(),
    };
    let schema = parse_message_type(
        "message rows { required binary name (UTF8); required int64 id; required int32 count; }",
    )
    .unwrap();
    let properties = WriterProperties::builder()
        .set_bloom_filter_enabled(true)
        .set_bloom_filter_max_ndv(rows as u64)
        .set_bloom_filter_fpp(0.01)
        .build();
    let mut writer = SerializedFileWriter::new(
        File::create(&file.path).unwrap(),
        Arc::new(schema),
        Arc::new(properties),
    )
    .unwrap();
    let mut row_group = writer.next_row_group().unwrap();
    let names: Vec<ByteArray> = file
        .names
        .iter()
        .map(|name| ByteArray::from(name.as_str()))
        .collect();
    let mut column = row_group.next_column().unwrap().unwrap();
    column
        .typed::<ByteArrayType>()
        .write_batch(&names, None, None)
        .unwrap();
    column.close().unwrap();
    let mut column = row_group.next_column().unwrap().unwrap();
    column
        .typed::<Int64Type>()
        .write_batch(&file.ids, None, None)
        .unwrap();
    column.close().unwrap();
    let mut column = row_group.next_column().unwrap().unwrap();
    column
        .typed::<Int32Type>()
        .write_batch(&file.counts, None, None)
        .unwrap();
    column.close().unwrap();
    assert!(row_group.next_column().unwrap().is_none());
    row_group.close().unwrap();
    writer.close().unwrap();
    file
}

/// The bytes at a column chunk's `bloom_filter_offset`, `bloom_filter_length` long (the
/// header and the bitset), read from the file's bytes as any Parquet reader finds them.
fn bloom_filter_bytes<'a>(file_bytes: &'a [u8], column: &ColumnChunkMetaData) -> &'a [u8] {
    let offset = column.bloom_filter_offset().expect("a bloom filter offset") as usize;
    let length = column.bloom_filter_length().expect("a bloom filter length") as usize;
    &file_bytes[offset..offset + length]
}

#[test]
fn a_parquet_files_bloom_filters_are_read_and_rebuilt_byte_for_byte() {
    let file = write_parquet_file(20_000);
    let file_bytes = std::fs::read(&file.path).unwrap();
    let reader = SerializedFileReader::new(File::open(&file.path).unwrap()).unwrap();
    let metadata = reader.metadata();
    assert_eq!(metadata.num_row_groups(), 1);
    let row_group = metadata.row_group(0);
    let columns = row_group.columns();
    assert_eq!(columns.len(), 3);

    // Each column chunk's bloom filter, read by bloomery from the file's bytes.
    let filters: Vec<SplitBlockBloomFilter> = columns
        .iter()
        .map(|column| {
            SplitBlockBloomFilter::from_parquet_bytes(bloom_filter_bytes(&file_bytes, column)).unwrap()
        })
        .collect();
    assert!(file.names.iter().all(|name| filters[0].contains(name.as_str())));
    assert!(file.ids.iter().all(|id| filters[1].contains(id)));
    assert!(file.counts.iter().all(|count| filters[2].contains(count)));

    // The parquet crate's own reading of the same chunks agrees, bit for bit.
    for (column, ours) in columns.iter().zip(&filters) {
        let theirs = Sbbf::read_from_column_chunk(column, &File::open(&file.path).unwrap())
            .unwrap()
            .expect("a filter");
        assert_eq!(sbbf_bitset(&theirs), &ours.to_parquet_bitset().unwrap()[..]);
        let bytes = bloom_filter_bytes(&file_bytes, column);
        let (header_len, num_bytes) = read_header(bytes).unwrap();
        assert_eq!(header_len as u64 + num_bytes, bytes.len() as u64);
    }

    // Built by bloomery from the same values with the same number of blocks: the same bytes
    // the parquet crate wrote, header included.
    let mut rebuilt: Vec<SplitBlockBloomFilter> = filters
        .iter()
        .map(|filter| SplitBlockBloomFilter::with_num_blocks(filter.num_blocks()).unwrap())
        .collect();
    rebuilt[0].insert_batch(&file.names);
    rebuilt[1].insert_batch(&file.ids);
    rebuilt[2].insert_batch(&file.counts);
    for (column, rebuilt) in columns.iter().zip(&rebuilt) {
        assert_eq!(
            rebuilt.to_parquet_bytes().unwrap(),
            bloom_filter_bytes(&file_bytes, column)
        );
    }
    // Values not in the file are mostly absent (a 1% filter).
    let absent = (0..10_000).filter(|i| filters[0].contains(format!("https://example.org/{i}").as_str()));
    assert!(absent.count() < 300);
    // The hash is XXH64 of the plain encoding: an INT64 value's 8 little-endian bytes.
    assert_eq!(
        xxh64_item(&file.ids[0]),
        xxh64_item(&file.ids[0].to_le_bytes()[..])
    );
}
