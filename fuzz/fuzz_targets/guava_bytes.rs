//! Guava's `BloomFilter.writeTo` bytes: `BloomFilter::from_guava_bytes` and the streaming
//! `BloomFilter::read_guava` (over a slice and over a reader that returns short reads and
//! `Interrupted`), which must agree; whatever opens is exercised as a native filter too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let outcome = bloomery_fuzz::check_guava(data);
    bloomery_fuzz::trace("guava_bytes", format_args!("{outcome}"));
});
