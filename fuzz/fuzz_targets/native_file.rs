//! Raw bytes as a native bloomery file: `any::open`, and `Header::parse` + `any::view` (the
//! CLI's read-only path) at three payload alignments; whatever opens is looked up,
//! described, re-serialized, re-opened, copied, combined and inserted into. Most mutations
//! of a real file die at the header checksum: `native_envelope` is the target that gets
//! past it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let outcome = bloomery_fuzz::check_native(data, 2);
    bloomery_fuzz::trace("native_file", format_args!("{outcome}"));
});
