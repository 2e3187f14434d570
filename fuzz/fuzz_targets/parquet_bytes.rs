//! Raw bytes as a Parquet column chunk's bloom filter (the Thrift compact
//! `BloomFilterHeader`, then the bitset): `SplitBlockBloomFilter::from_parquet_bytes`, and
//! the same bytes as a bare bitset; whatever opens must write itself back and answer as a
//! filter. No checksum stands in the way: every mutation reaches the Thrift reader.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let outcome = bloomery_fuzz::check_parquet(data);
    bloomery_fuzz::trace("parquet_bytes", format_args!("{outcome}"));
});
