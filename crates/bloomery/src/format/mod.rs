//! Serialized forms.
//!
//! - [`guava`]: the bytes of Guava's `BloomFilter.writeTo`, read and written as methods of
//!   [`BloomFilter`](crate::BloomFilter).
//! - [`native`]: bloomery's own checksummed envelope, one for every variant ([`native::Persist`]).

pub mod guava;
pub mod native;
