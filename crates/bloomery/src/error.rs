//! The library's one error type: each message names what was wrong, the value, and what
//! is allowed.

use std::io;

use crate::sizing::Rate;

/// Everything that can go wrong in bloomery: a bad parameter, an incompatible pair of
/// filters, or bytes that are not a valid serialized filter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The false-positive probability is not strictly between 0 and 1 (or is NaN).
    #[error("fpp (false-positive probability) must be in (0, 1), got {}", Rate(*.value))]
    Fpp {
        /// The rejected value.
        value: f64,
    },

    /// The number of hash functions is out of range.
    #[error("num_hashes must be in 1..={max}, got {value}")]
    NumHashes {
        /// The rejected value.
        value: u64,
        /// The largest allowed value.
        max: u64,
    },

    /// The number of bits is zero or too large for the format or the address space.
    #[error("num_bits must be in 1..={max} ({why}), got {value}")]
    NumBits {
        /// The rejected value (before rounding up to whole 64-bit words).
        value: u128,
        /// The largest allowed value.
        max: u64,
        /// What sets the limit.
        why: &'static str,
    },

    /// The number of a counting filter's counters is zero or too large for the format or
    /// the address space.
    #[error("num_counters must be in 1..={max} ({why}), got {value}")]
    NumCounters {
        /// The rejected value.
        value: u64,
        /// The largest allowed value.
        max: u64,
        /// What sets the limit.
        why: &'static str,
    },

    /// No filter of the kind asked for can hold `expected_items` at `fpp`.
    #[error("cannot size a filter for {expected_items} items at fpp {}: {problem}", Rate(*.fpp))]
    Sizing {
        /// The expected number of items asked for.
        expected_items: u64,
        /// The false-positive probability asked for.
        fpp: f64,
        /// What limit the request passes.
        problem: String,
    },

    /// An operation the filter variant does not have (for example removing from a classic
    /// filter).
    #[error("{variant} filters do not support {operation}")]
    Unsupported {
        /// The variant's name.
        variant: &'static str,
        /// The operation asked for.
        operation: &'static str,
    },

    /// Another parameter is out of range.
    #[error("{name} must be {allowed}, got {value}")]
    Parameter {
        /// The parameter's name.
        name: &'static str,
        /// The rejected value.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },

    /// A filter that does not grow is at its capacity.
    #[error("filter is full: it holds its capacity of {capacity} items and does not grow")]
    Full {
        /// The capacity reached.
        capacity: u64,
    },

    /// A filter that grows is at its capacity and has its most sub-filters, so it cannot
    /// add another.
    #[error("filter is full: it reached its limit of {limit} sub-filters (it grew to hold {capacity} items)")]
    SubFilterLimit {
        /// The most sub-filters the filter may have.
        limit: u64,
        /// The capacity reached: the items its sub-filters hold together.
        capacity: u64,
    },

    /// Growing the filter (a new sub-filter or generation) would take it past the memory
    /// limit its caller set; the item was not added.
    #[error("filter cannot grow: it would take {needed} bytes, over the limit of {limit} bytes")]
    MemoryLimit {
        /// The filter's bytes after the growth that was refused.
        needed: u64,
        /// The limit.
        limit: u64,
    },

    /// The system refused the memory for a filter or its growth (a size beyond the
    /// address space, or more than the machine will give): nothing was allocated or
    /// changed.
    #[error("cannot allocate {bytes} bytes for the filter: the system refused them")]
    OutOfMemory {
        /// The bytes asked for.
        bytes: u64,
    },

    /// An item to remove is definitely not in the filter.
    #[error("item is not in the filter: nothing was removed")]
    NotPresent,

    /// Two filters cannot be combined or compared.
    #[error("filters are incompatible: {reason}")]
    Incompatible {
        /// Which parameter differs, with both values.
        reason: String,
    },

    /// Bytes that do not form a valid serialized filter.
    #[error("invalid {format} data: {problem}")]
    Format {
        /// Which format was being read, e.g. "Guava BloomFilter".
        format: &'static str,
        /// What is wrong with it.
        problem: FormatProblem,
    },

    /// Reading or writing failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

/// What is wrong with serialized filter bytes (see [`Error::Format`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatProblem {
    /// The data ended before the header or the payload it announces was complete.
    #[error("truncated: expected {expected} bytes, got {actual}")]
    Truncated {
        /// Bytes the header requires in total.
        expected: u64,
        /// Bytes present.
        actual: u64,
    },

    /// More bytes follow the payload the header announces.
    #[error("{extra} trailing bytes after the {expected}-byte filter")]
    TrailingBytes {
        /// Bytes the header requires in total.
        expected: u64,
        /// Bytes beyond that.
        extra: u64,
    },

    /// The hashing strategy byte is not one this library implements.
    #[error("unsupported strategy ordinal {0}: only 1 (MURMUR128_MITZ_64) is supported")]
    UnknownStrategy(u8),

    /// The stored number of hash functions is zero.
    #[error("number of hash functions is 0, must be in 1..=255")]
    ZeroHashes,

    /// The stored word count is zero, negative or beyond the format's limit.
    #[error("word count {0} is out of range: must be in 1..=2147483647")]
    WordCount(i64),

    /// The data does not start with the format's magic bytes.
    #[error("wrong magic bytes: not a bloomery filter")]
    BadMagic,

    /// The data was written by a format version this library does not read.
    #[error("format version {0} is not supported: this library reads versions 1 and 2")]
    UnsupportedVersion(u16),

    /// The header's checksum does not match its bytes.
    #[error("header checksum mismatch: the header is damaged")]
    HeaderChecksum,

    /// The payload's checksum does not match its bytes.
    #[error("payload checksum mismatch: the filter's bits are damaged")]
    PayloadChecksum,

    /// The header is marked unsealed: a writer was changing the bits in place and did not
    /// finish. The bits are valid (a superset of the last sealed ones: inserts only set
    /// bits), the payload checksum is stale, so the bits cannot be checked until the file
    /// is resealed.
    #[error(
        "unsealed: the file was being updated in place and the update did not finish \
         (its bits are valid, its payload checksum is stale); reseal it (`bloomery seal`)"
    )]
    Unsealed,

    /// The variant code is not one this library knows.
    #[error("unknown filter variant {0}")]
    UnknownVariant(u16),

    /// The data holds another variant than the one asked for.
    #[error("expected filter variant {expected}, found {found}")]
    WrongVariant {
        /// The variant asked for.
        expected: u16,
        /// The variant stored.
        found: u16,
    },

    /// The parameter block is longer than any variant needs.
    #[error("parameter block of {0} bytes is longer than the 65536 allowed")]
    ParamsTooLong(u64),

    /// The parameter block ends before all parameters were read.
    #[error("parameter block is too short for the variant")]
    ParamsTruncated,

    /// The parameter block is longer than the variant's parameters.
    #[error("{0} unexpected bytes after the variant's parameters")]
    ParamsTrailing(u64),

    /// A payload of 64-bit words has a length that is not a multiple of 8.
    #[error("payload of {0} bytes is not a whole number of 64-bit words")]
    PayloadNotWords(u64),

    /// The parameters and the payload disagree, or a parameter is out of range.
    #[error("{0}")]
    Inconsistent(String),
}

impl Error {
    pub(crate) fn format(format: &'static str, problem: FormatProblem) -> Self {
        Error::Format { format, problem }
    }
}

/// A native envelope whose parameters and payload disagree.
pub(crate) fn inconsistent(message: String) -> Error {
    Error::format("bloomery", FormatProblem::Inconsistent(message))
}

/// An error sizing a chain's first sub-filter (a scalable filter's, a RedisBloom link),
/// told in the caller's terms: the capacity and rate asked for, not `share`, the
/// sub-filter's share of that rate (which the caller never gave, and which may have
/// underflowed to 0).
pub(crate) fn first_sub_filter_error(error: Error, capacity: u64, fpp: f64, share: f64) -> Error {
    match error {
        Error::Fpp { .. } => Error::Sizing {
            expected_items: capacity,
            fpp,
            problem: format!(
                "the first sub-filter's share of the rate ({}) is not a rate a filter can be \
                 sized for; use a higher fpp",
                Rate(share)
            ),
        },
        Error::Sizing { problem, .. } if share != fpp => Error::Sizing {
            expected_items: capacity,
            fpp,
            problem: format!(
                "{problem} (sizing the first sub-filter for its share of the rate, {})",
                Rate(share)
            ),
        },
        other => other,
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
