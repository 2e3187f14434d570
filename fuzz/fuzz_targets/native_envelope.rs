//! Structure-aware: the input is a control byte and a (possibly damaged) envelope whose
//! magic, version (1 or 2), variant code, lengths and both XXH3-64 checksums are rewritten
//! correctly, keeping its parameters and payload (`bloomery_fuzz::envelope_from_input`).
//! Every input therefore passes the header checks and reaches the variant's parameter and
//! payload parsers; then the same checks as `native_file` run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((control, bytes)) = bloomery_fuzz::envelope_from_input(data) else {
        return;
    };
    let outcome = bloomery_fuzz::check_native(&bytes, control.inserts());
    bloomery_fuzz::trace("native_envelope", format_args!("{outcome}"));
});
