//! Redis dump pieces (`BF.SCANDUMP`/`BF.LOADCHUNK`): `PieceAssembler::start` with piece 1,
//! then `push` of the numbered pieces (piece length, a cap and one damaged piece chosen by
//! the input's first four bytes, the rest raw or rebuilt with valid checksums); a complete
//! dump goes through `any::open` and the native checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(outcome) = bloomery_fuzz::check_pieces(data) {
        bloomery_fuzz::trace("dump_pieces", format_args!("{outcome}"));
    }
});
