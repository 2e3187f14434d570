//! Serialized forms. [`guava`]: the bytes of Guava's `BloomFilter.writeTo`, read and
//! written as methods of [`BloomFilter`](crate::BloomFilter).

pub mod guava;
