//! Serialized forms.
//!
//! - [`guava`]: the bytes of Guava's `BloomFilter.writeTo`, read and written as methods of
//!   [`BloomFilter`](crate::BloomFilter).
//! - [`native`]: bloomery's own checksummed envelope, one for every variant ([`native::Persist`]).
//! - [`parquet`]: the Thrift header before a Parquet column chunk's bloom-filter bitset.
//! - [`pieces`]: an envelope reassembled from numbered pieces (Redis dumps).

pub mod guava;
pub mod native;
pub mod parquet;
pub mod pieces;

use crate::error::{Error, FormatProblem, Result};

/// Checks that data holding one serialized filter of `expected` bytes is exactly that
/// long: shorter is truncated, longer has trailing bytes.
pub(crate) fn check_exact_len(format: &'static str, expected: u64, actual: u64) -> Result<()> {
    if actual < expected {
        return Err(Error::format(
            format,
            FormatProblem::Truncated { expected, actual },
        ));
    }
    if actual > expected {
        let extra = actual - expected;
        return Err(Error::format(
            format,
            FormatProblem::TrailingBytes { expected, extra },
        ));
    }
    Ok(())
}
