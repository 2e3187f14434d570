//! RedisBloom-layout dumps as the Redis module loads them (`BF.LOADCHUNK` onto a new key:
//! `RedisBloomFilter::from_scandump_header`, then `load_scandump_chunk` for each piece;
//! the same fields through `from_rdb_parts`, as an RDB value of type `MBbloom--` loads).
//! The input's first byte says how: its pieces as they are (iterator u64, length u64,
//! bytes, as the RedisBloom fixtures in crates/bloomery/tests/data/redisbloom hold them), or
//! a filter made and filled from the input, dumped, and its pieces reordered or damaged
//! (`bloomery_fuzz::check_redisbloom_built`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let control = bloomery_fuzz::ChunksControl(control);
    let outcome = if control.built() {
        bloomery_fuzz::check_redisbloom_built(control, rest)
    } else {
        Some(bloomery_fuzz::check_redisbloom_pieces(
            &bloomery_fuzz::parse_pieces(rest),
        ))
    };
    if let Some(outcome) = outcome {
        bloomery_fuzz::trace("redisbloom_chunks", format_args!("{outcome}"));
    }
});
