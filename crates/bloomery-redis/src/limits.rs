//! What a request may ask for. RedisBloom 2.6.28 tries to allocate whatever a
//! `BF.RESERVE` asks (`BF.RESERVE big 0.01 100000000000` took the server down); here a
//! filter whose first sub-filter would need more than [`MAX_FILTER_BYTES`] is refused with
//! an error reply before anything is allocated.

/// The most memory one sub-filter may take: 512 MiB, room for about 4.4 × 10^8 items at
/// 1% in the first sub-filter.
pub const MAX_FILTER_BYTES: u64 = 512 << 20;

/// The largest dump `BF.LOADCHUNK` (or an RDB file) may hold: 64 sub-filters at the
/// per-filter cap.
pub const MAX_DUMP_BYTES: u64 = 64 * MAX_FILTER_BYTES;

/// The largest expansion factor accepted (RedisBloom accepts any; past 32768 one growth
/// step would exceed the memory cap anyway).
pub const MAX_EXPANSION: u64 = 32_768;

/// The bytes the first sub-filter of a scalable filter would take (saturating for absurd
/// requests), for an error rate in (0, 1).
pub fn first_filter_bytes(capacity: u64, error_rate: f64) -> u64 {
    // The scalable filter's first sub-filter runs at error_rate · (1 - r), r = 0.5.
    bloomery::sizing::optimal_num_bits(capacity, error_rate * 0.5)
        .map_or(u64::MAX, |bits| bits.div_ceil(64) * 8)
}
