//! Shared code of bloomery's fuzz targets (docs/fuzzing.md): envelopes with valid
//! checksums built from fuzz input, and the checks run on whatever parses.
//!
//! Every check here is an assertion: a panic is a finding. The invariants are
//!
//! - no parser panics, whatever the bytes;
//! - a filter that opens answers lookups, stats and descriptions, re-serializes, and the
//!   re-serialized bytes re-open to a filter with the same answers and the same bytes
//!   (the second serialization is a fixed point);
//! - the read-only view (`Header::parse` + `any::view`, the CLI's path over a memory map)
//!   answers as the opened filter does, at every payload alignment;
//! - an item whose insert succeeded is reported present;
//! - the streaming readers (Guava, dump pieces) agree with the whole-slice readers.
//!
//! Set `BLOOMERY_FUZZ_TRACE=1` to print one `trace` line per input saying how far it got
//! (which header check or which variant's parameter check refused it, or that it opened):
//! `scripts/fuzz.sh` uses it to count, over a corpus, the inputs that reach each variant.

use std::io::{self, Read};
use std::sync::OnceLock;

use bloomery::any::{self, DynFilter, FilterView, GrowthLimit};
use bloomery::format::native::{Header, Variant};
use bloomery::sizing::parquet_readers_take;
use bloomery::{
    AllowlistedBloomFilter, BloomFilter, ClearingScheme, CountingBloomFilter, Error, RetouchedBloomFilter,
    RotatingBloomFilter, SplitBlockBloomFilter,
};
use xxhash_rust::xxh3::xxh3_64;

/// Items looked up and inserted: edge cases, the docs' test vector items, and items the
/// `variant_files` example inserts (`present`) and does not (`absent`), so seeds made
/// from its files answer both ways.
pub const ITEMS: &[&[u8]] = &[
    b"",
    b"apple",
    b"banana",
    b"cherry",
    b"\0",
    &[0xff; 8],
    &[0x5a; 200],
    b"https://example.com/present/0",
    b"https://example.com/present/1",
    b"https://example.com/present/299",
    b"https://example.com/absent/0",
    b"https://example.com/absent/1",
];

/// How far the harness's inserts may grow a filter, and the largest filter (envelope
/// bytes) it serializes after inserting: a crafted scalable or rotating file can make one
/// insert allocate gigabytes, and copying that would only measure the machine. Inserts go
/// through the library's own check, `insert_within`, which refuses such growth before
/// allocating.
pub const MAX_GROWN_BYTES: u64 = 4 << 20;

/// `BLOOMERY_FUZZ_STRICT=CHECK,...` (or `all`): also fail on what is not a crash but may
/// be a flaw, each check by name:
///
/// - `canonical`: a version-2 file opens but is not the bytes its filter writes (the
///   format means every filter to have one form);
/// - `growth`: the inserts would grow the filter by more than [`MAX_GROWN_BYTES`] (for a
///   file of a few hundred bytes);
pub fn strict(check: &str) -> bool {
    static STRICT: OnceLock<Vec<String>> = OnceLock::new();
    let checks = STRICT.get_or_init(|| {
        std::env::var("BLOOMERY_FUZZ_STRICT")
            .unwrap_or_default()
            .split(',')
            .map(|check| check.trim().to_owned())
            .collect()
    });
    checks.iter().any(|name| name == check || name == "all")
}

fn trace_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("BLOOMERY_FUZZ_TRACE").is_some_and(|value| value != "0"))
}

/// Prints `trace TARGET WHAT` to stderr when `BLOOMERY_FUZZ_TRACE` is set.
pub fn trace(target: &str, what: std::fmt::Arguments<'_>) {
    if trace_enabled() {
        eprintln!("trace {target} {what}");
    }
}

/// An error's message with every number replaced by `#`, so the rejections of one check
/// are counted together.
pub fn error_class(error: &Error) -> String {
    let text = match error {
        Error::Format { problem, .. } => problem.to_string(),
        other => other.to_string(),
    };
    let mut class = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() || (in_number && (c == '.' || c == 'e' || c == '-')) {
            if !in_number {
                class.push('#');
            }
            in_number = true;
        } else {
            class.push(c);
            in_number = false;
        }
    }
    class.chars().take(90).collect()
}

// ---------------------------------------------------------------------------------------
// Envelopes with valid checksums (docs/format.md, "Header")
// ---------------------------------------------------------------------------------------

/// `H` for `params_len` bytes of parameters: `32 + P + 8` rounded up to 64.
pub fn header_len(params_len: usize) -> usize {
    (32 + params_len + 8).div_ceil(64) * 64
}

/// A whole envelope, written as docs/format.md says, with both checksums correct: any
/// version, any variant code, any parameters (at most 65,536 bytes are stored as such:
/// the caller keeps to that) and any payload.
pub fn build_envelope(version: u16, code: u16, params: &[u8], payload: &[u8]) -> Vec<u8> {
    build_envelope_with_checksum(version, code, params, payload, xxh3_64(payload))
}

/// As [`build_envelope`], with `payload_checksum` written as the payload's checksum (any
/// value: an unsealed file's is stale) and the header checksum correct.
pub fn build_envelope_with_checksum(
    version: u16,
    code: u16,
    params: &[u8],
    payload: &[u8],
    payload_checksum: u64,
) -> Vec<u8> {
    let len = header_len(params.len());
    let mut bytes = Vec::with_capacity(len + payload.len());
    bytes.extend_from_slice(b"BLOOMERY");
    bytes.extend_from_slice(&version.to_le_bytes());
    bytes.extend_from_slice(&code.to_le_bytes());
    bytes.extend_from_slice(&(params.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&payload_checksum.to_le_bytes());
    bytes.extend_from_slice(params);
    bytes.resize(len - 8, 0);
    let checksum = xxh3_64(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// The parameters and payload of a (possibly damaged) envelope: `P` is read at offset 12
/// and capped to the bytes present and to 65,536; the payload is everything from `H` on.
/// Inputs shorter than the fixed header are all parameters.
pub fn split_envelope(bytes: &[u8]) -> (&[u8], &[u8]) {
    if bytes.len() < 32 {
        return (bytes, &[]);
    }
    let claimed = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    let params_len = claimed.min(1 << 16).min(bytes.len() - 32);
    let params = &bytes[32..32 + params_len];
    let payload_start = if params_len == claimed {
        header_len(params_len).min(bytes.len())
    } else {
        bytes.len()
    };
    (params, &bytes[payload_start..])
}

/// The variant codes the library knows (1 to 10: classic to scalable-blocked).
pub const KNOWN_VARIANTS: u16 = bloomery::format::native::Variant::ALL.len() as u16;

/// What the structure-aware target's first input byte asks for.
#[derive(Clone, Copy, Debug)]
pub struct Control(pub u8);

impl Control {
    /// Format version 1 (bit 0 set) or 2, with the unsealed mark (bit 15, docs/format.md
    /// "Sealed and unsealed files") when bit 2 is set: valid on version 2 of the variants
    /// updated in place (classic, blocked, split-block), refused with version 1 and on
    /// every other variant.
    pub fn version(self) -> u16 {
        let version = if self.0 & 1 != 0 { 1 } else { 2 };
        if self.unsealed() {
            version | bloomery::format::native::UNSEALED
        } else {
            version
        }
    }

    /// Bit 2: the unsealed mark.
    pub fn unsealed(self) -> bool {
        self.0 & 4 != 0
    }

    /// Bits 2 and 3: an unsealed file whose payload checksum field is the input's own (at
    /// offset 24), stale as an unfinished writer in place leaves it, not the payload's.
    pub fn stale_checksum(self) -> bool {
        self.0 & 0b1100 == 0b1100
    }

    /// Bit 1 set: the variant code is the input's as it is (any u16, mostly unknown
    /// codes); clear: one of the known codes, `1 + (code - 1) mod KNOWN_VARIANTS` (the
    /// known codes stay as they are, so real files keep their variant).
    pub fn code(self, raw: u16) -> u16 {
        if self.0 & 2 != 0 {
            raw
        } else {
            1 + raw.wrapping_sub(1) % KNOWN_VARIANTS
        }
    }

    /// Items inserted into a filter that opens: 1 to 16.
    pub fn inserts(self) -> usize {
        1 + usize::from(self.0 >> 4)
    }
}

/// The structure-aware target's input: a control byte, then an envelope whose magic,
/// version, variant code, lengths and checksums are rewritten (version, unsealed mark and
/// code as the control byte says, the code from offset 10 of the input's envelope; the
/// payload checksum the payload's, or the input's own for a stale one), keeping its
/// parameters and payload. Seeded with real files, every mutation of a parameter or
/// payload byte reaches the variant's parser instead of dying at the header checksum.
pub fn envelope_from_input(input: &[u8]) -> Option<(Control, Vec<u8>)> {
    let (&control, embedded) = input.split_first()?;
    let control = Control(control);
    let raw_code = match embedded.get(10..12) {
        Some(code) => u16::from_le_bytes([code[0], code[1]]),
        None => 0,
    };
    let (params, payload) = split_envelope(embedded);
    let checksum = match embedded.get(24..32) {
        Some(stored) if control.stale_checksum() => u64::from_le_bytes(stored.try_into().expect("8 bytes")),
        _ => xxh3_64(payload),
    };
    let bytes = build_envelope_with_checksum(
        control.version(),
        control.code(raw_code),
        params,
        payload,
        checksum,
    );
    Some((control, bytes))
}

// ---------------------------------------------------------------------------------------
// Checks on native envelopes
// ---------------------------------------------------------------------------------------

/// `bytes` copied to an address `offset` bytes past a multiple of 64, so the read-only
/// views are tried in place (offset 0: blocked and classic; 8: classic only) and through
/// their copying fallback (offset 1).
pub struct AlignedCopy {
    buffer: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedCopy {
    pub fn new(bytes: &[u8], offset: usize) -> Self {
        let mut buffer = vec![0u8; bytes.len() + 64 + offset];
        let start = buffer.as_ptr().align_offset(64) + offset;
        buffer[start..start + bytes.len()].copy_from_slice(bytes);
        Self {
            buffer,
            start,
            len: bytes.len(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buffer[self.start..self.start + self.len]
    }
}

/// The answers of `filter` for [`ITEMS`], checking that the batch lookup agrees with
/// single lookups.
pub fn answers_of(filter: &dyn FilterView) -> Vec<bool> {
    let single: Vec<bool> = ITEMS.iter().map(|item| filter.contains(item)).collect();
    let mut batch = vec![false; ITEMS.len()];
    filter.contains_batch(ITEMS, &mut batch);
    assert_eq!(
        batch,
        single,
        "{} filter: contains_batch disagrees with contains",
        filter.variant()
    );
    single
}

/// Lookups, stats and the description of a view or filter; returns its answers.
pub fn exercise_view(filter: &dyn FilterView) -> Vec<bool> {
    let answers = answers_of(filter);
    let stats = filter.stats();
    let _ = format!("{stats:?}");
    for (name, value) in filter.describe() {
        assert!(!name.is_empty() && !value.is_empty(), "an empty description line");
    }
    answers
}

/// How the harness got on with one native envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `Header::parse` refused it.
    Header(String),
    /// The header is valid, but the data is not `H + L` bytes long.
    Length(String),
    /// The header is valid, the length right, the payload checksum wrong.
    PayloadChecksum,
    /// Both checksums hold: the variant's parameter and payload checks refused it.
    Refused {
        version: u16,
        variant: Variant,
        class: String,
    },
    /// It opened.
    Opened { version: u16, variant: Variant },
    /// An unsealed file (docs/format.md, "Sealed and unsealed files"): its bits used
    /// without its payload checksum, as a reader or a writer in place uses them; opened
    /// or refused by the variant's parameter and payload checks.
    Unsealed {
        variant: Variant,
        refused: Option<String>,
    },
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Header(class) => write!(formatter, "stage=header reason={class}"),
            Outcome::Length(class) => write!(formatter, "stage=length reason={class}"),
            Outcome::PayloadChecksum => write!(formatter, "stage=payload-checksum"),
            Outcome::Refused {
                version,
                variant,
                class,
            } => {
                write!(formatter, "stage=variant v{version} {variant} refused: {class}")
            }
            Outcome::Opened { version, variant } => write!(formatter, "stage=opened v{version} {variant}"),
            Outcome::Unsealed {
                variant,
                refused: None,
            } => write!(formatter, "stage=opened v2 unsealed {variant}"),
            Outcome::Unsealed {
                variant,
                refused: Some(class),
            } => write!(formatter, "stage=variant v2 unsealed {variant} refused: {class}"),
        }
    }
}

/// Everything the library does with the bytes of a native file: `any::open` (both
/// checksums, every parameter), and the read-only `Header::parse` + `any::view` at three
/// payload alignments; then, for a filter that opens, everything in [`exercise_filter`].
pub fn check_native(bytes: &[u8], inserts: usize) -> Outcome {
    let opened = any::open(bytes);
    let mut views: Vec<Option<Vec<bool>>> = Vec::new();
    let mut payload_checksum_ok = false;
    let mut unsealed = false;
    for offset in [0, 8, 1] {
        let copy = AlignedCopy::new(bytes, offset);
        let data = copy.bytes();
        let Ok(header) = Header::parse(data) else {
            continue;
        };
        // The CLI checks the file's length here; a view must not panic without that
        // check either (the payload is then longer or shorter than the header says).
        let payload = &data[header.payload_offset..];
        payload_checksum_ok = header.verify_payload(payload).is_ok();
        unsealed = header.unsealed;
        let view = any::view(&header, payload).ok();
        views.push(view.map(|view| {
            assert_eq!(view.variant(), header.variant);
            exercise_view(&*view)
        }));
    }
    // In place (classic and blocked, aligned) a view does not read the payload checksum;
    // built in memory it does: so views agree across alignments when the checksum holds.
    // (Finding 1 of docs/fuzzing.md, a version-1 blocked file answered in place, is fixed:
    // this is asserted for every input.) An unsealed file's checksum is read by no view:
    // they agree whatever it says.
    if payload_checksum_ok || unsealed {
        assert!(
            views.windows(2).all(|pair| pair[0] == pair[1]),
            "views at different alignments disagree: {views:?}"
        );
    }
    let header = match Header::parse(bytes) {
        Ok(header) => header,
        Err(error) => {
            assert!(opened.is_err(), "any::open accepted what Header::parse refuses");
            return Outcome::Header(error_class(&error));
        }
    };
    if header.unsealed {
        return check_unsealed(bytes, &header, opened.is_ok(), &views, inserts);
    }
    match opened {
        Err(error) if header.check_file_len(bytes.len() as u64).is_err() => {
            Outcome::Length(error_class(&error))
        }
        Err(_) if header.verify_payload(&bytes[header.payload_offset..]).is_err() => Outcome::PayloadChecksum,
        Err(error) => Outcome::Refused {
            version: header.version,
            variant: header.variant,
            class: error_class(&error),
        },
        Ok(filter) => {
            assert_eq!(filter.variant(), header.variant);
            if header.version == 2 {
                let canonical = filter.envelope().to_vec() == bytes;
                if !canonical {
                    trace(
                        "canonical",
                        format_args!("v2 {} accepted in a non-canonical form", header.variant),
                    );
                    assert!(
                        !strict("canonical"),
                        "strict: a v2 {} file opens but re-serializes to other bytes",
                        header.variant
                    );
                }
            }
            let answers = exercise_filter(filter, inserts);
            for view in &views {
                let view = view.as_ref().unwrap_or_else(|| {
                    panic!("{} file opens but its read-only view is refused", header.variant)
                });
                assert_eq!(
                    view, &answers,
                    "{}: the view and the opened filter disagree",
                    header.variant
                );
            }
            Outcome::Opened {
                version: header.version,
                variant: header.variant,
            }
        }
    }
}

/// `bytes` sealed, as a writer seals an unsealed file (docs/format.md, step 3): the mark
/// cleared and the payload's checksum written, the header checksum recomputed.
pub fn sealed_form(bytes: &[u8], header: &Header) -> Vec<u8> {
    let mut sealed = bytes.to_vec();
    let version = u16::from_le_bytes([bytes[8], bytes[9]]) & !bloomery::format::native::UNSEALED;
    sealed[8..10].copy_from_slice(&version.to_le_bytes());
    let checksum = xxh3_64(&bytes[header.payload_offset..]);
    sealed[24..32].copy_from_slice(&checksum.to_le_bytes());
    let end = header.payload_offset - 8;
    let header_checksum = xxh3_64(&sealed[..end]);
    sealed[end..end + 8].copy_from_slice(&header_checksum.to_le_bytes());
    sealed
}

/// An unsealed file that `Header::parse` accepted (version 2 of a variant updated in
/// place): `any::open` refuses it (it checks the payload checksum, which an unsealed file
/// does not have), and its bits are used as they are, as `bloomery check`'s view and an
/// update in place (`Header::parse` + `any::from_parts`) use them. They must answer as the
/// file sealed does, every view must answer as the filter, and the filter serializes to
/// the sealed file (a writer writes whole files sealed).
fn check_unsealed(
    bytes: &[u8],
    header: &Header,
    opened: bool,
    views: &[Option<Vec<bool>>],
    inserts: usize,
) -> Outcome {
    assert!(
        bloomery::in_place::updates_in_place(header.variant) && header.version == 2,
        "Header::parse accepted the unsealed mark on a version-{} {} file",
        header.version,
        header.variant
    );
    assert!(!opened, "any::open accepted an unsealed file");
    if let Err(error) = header.check_file_len(bytes.len() as u64) {
        return Outcome::Length(error_class(&error));
    }
    let payload = &bytes[header.payload_offset..];
    let sealed = sealed_form(bytes, header);
    let sealed_opened = any::open(&sealed);
    match any::from_parts(header, payload) {
        Err(error) => {
            assert!(
                sealed_opened.is_err(),
                "an unsealed {} file is refused ({error}), the same file sealed opens",
                header.variant
            );
            Outcome::Unsealed {
                variant: header.variant,
                refused: Some(error_class(&error)),
            }
        }
        Ok(filter) => {
            let sealed_filter = sealed_opened.unwrap_or_else(|error| {
                panic!(
                    "an unsealed {} file opens, the same file sealed is refused: {error}",
                    header.variant
                )
            });
            assert!(
                filter.envelope().to_vec() == sealed_filter.envelope().to_vec(),
                "{}: an unsealed file and its sealed form are other filters",
                header.variant
            );
            let answers = exercise_filter(filter, inserts);
            assert_eq!(
                answers_of(&*sealed_filter),
                answers,
                "{}: the unsealed file answers other than its sealed form",
                header.variant
            );
            assert!(!views.is_empty(), "an unsealed file has no view");
            for view in views {
                let view = view.as_ref().unwrap_or_else(|| {
                    panic!(
                        "an unsealed {} file opens but its view is refused",
                        header.variant
                    )
                });
                assert_eq!(
                    view, &answers,
                    "{}: the view of an unsealed file and its filter disagree",
                    header.variant
                );
            }
            Outcome::Unsealed {
                variant: header.variant,
                refused: None,
            }
        }
    }
}

/// Serializes `filter`, checks the envelope's length and ranges, re-opens the bytes and
/// checks that the re-opened filter answers as `filter` and serializes to the same bytes.
pub fn round_trip(filter: &dyn DynFilter, answers: &[bool]) {
    let variant = filter.variant();
    let envelope = filter.envelope();
    let bytes = envelope.to_vec();
    assert_eq!(
        envelope.len(),
        bytes.len() as u64,
        "{variant}: Envelope::len is wrong"
    );
    let mut joined = Vec::with_capacity(bytes.len());
    for start in (0..envelope.len()).step_by(100) {
        joined.extend(envelope.read_range(start..start + 100));
    }
    assert!(joined == bytes, "{variant}: read_range pieces differ from to_vec");
    let reopened = any::open(&bytes)
        .unwrap_or_else(|error| panic!("a re-serialized {variant} filter does not re-open: {error}"));
    assert_eq!(reopened.variant(), variant);
    assert_eq!(
        exercise_view(&*reopened),
        answers,
        "{variant}: answers changed through serialization"
    );
    assert!(
        reopened.envelope().to_vec() == bytes,
        "{variant}: serializing the re-opened filter gives other bytes"
    );
}

/// Everything a tool does with a filter it opened: lookups, stats, description,
/// serialization and re-opening, a copy, union and intersection with that copy, inserts
/// (each inserted item must then be present), a removal (counting filters), and again
/// serialization and re-opening. Returns the answers for [`ITEMS`] before any change.
pub fn exercise_filter(mut filter: Box<dyn DynFilter>, inserts: usize) -> Vec<bool> {
    let variant = filter.variant();
    let answers = exercise_view(&*filter);
    round_trip(&*filter, &answers);

    let copy = filter.clone_box();
    assert_eq!(
        answers_of(&*copy),
        answers,
        "{variant}: a copy answers differently"
    );
    let mut union = filter.clone_box();
    if union.union(&*copy).is_ok() {
        let after = answers_of(&*union);
        for (before, after) in answers.iter().zip(&after) {
            assert!(!before || *after, "{variant}: union with itself lost an item");
        }
    }
    let mut intersection = filter.clone_box();
    if intersection.intersection(&*copy).is_ok() {
        assert_eq!(
            answers_of(&*intersection),
            answers,
            "{variant}: intersection with itself changed it"
        );
    }
    drop((copy, union, intersection));

    exercise_concrete(&*filter);

    let limit = filter.stats().memory_bytes.saturating_add(MAX_GROWN_BYTES);
    for item in ITEMS.iter().cycle().take(inserts) {
        match filter.insert_within(item, GrowthLimit::Total(limit)) {
            Ok(_) => assert!(filter.contains(item), "{variant}: an inserted item is absent"),
            Err(Error::MemoryLimit { needed, .. }) => {
                trace(
                    "growth",
                    format_args!("{variant} insert would grow the filter to {needed} bytes"),
                );
                assert!(
                    !strict("growth"),
                    "strict: one insert into this {variant} filter would grow it to {needed} bytes"
                );
                break;
            }
            Err(_) => {}
        }
    }
    if filter.remove(ITEMS[1]).is_ok() {
        let _ = filter.contains(ITEMS[1]);
    }
    if filter.envelope().len() <= MAX_GROWN_BYTES {
        let after = exercise_view(&*filter);
        round_trip(&*filter, &after);
    }
    answers
}

/// The variant's own API beyond `DynFilter`, on copies of a filter that opened: the
/// retouched filter's false-positive recording and removal (every clearing scheme), the
/// allow-listed filter's listing, the counting filter's counts and removals, the rotating
/// filter's inserts at chosen times. Each copy must then still round-trip.
pub fn exercise_concrete(filter: &dyn DynFilter) {
    let concrete = filter.as_any();
    if let Some(retouched) = concrete.downcast_ref::<RetouchedBloomFilter>() {
        for scheme in [
            ClearingScheme::Random,
            ClearingScheme::MinimumFalseNegatives,
            ClearingScheme::MaximumFalsePositives,
            ClearingScheme::Ratio,
        ] {
            let mut copy = retouched.clone();
            for item in ITEMS {
                copy.record_false_positive(item);
            }
            for item in ITEMS {
                let removal = copy.remove_false_positive(item, scheme);
                if removal.cleared_bit.is_some() {
                    assert!(
                        !copy.contains(item),
                        "retouched: a removed false positive is present"
                    );
                }
            }
            let _ = copy.total_false_negatives();
            round_trip(&copy, &exercise_view(&copy));
        }
    }
    if let Some(allowlisted) = concrete.downcast_ref::<AllowlistedBloomFilter>() {
        let mut copy = allowlisted.clone();
        for item in ITEMS {
            if copy.allow(item) {
                assert!(!copy.contains(item), "allowlisted: a listed item is present");
            }
        }
        round_trip(&copy, &exercise_view(&copy));
    }
    if let Some(counting) = concrete.downcast_ref::<CountingBloomFilter>() {
        let mut copy = counting.clone();
        for item in ITEMS {
            let count = copy.count(item);
            if copy.remove(item).is_ok() {
                assert!(count > 0, "counting: removed an item counted 0");
            }
        }
        let _ = copy.saturated_counters();
        round_trip(&copy, &exercise_view(&copy));
    }
    if let Some(rotating) = concrete.downcast_ref::<RotatingBloomFilter>() {
        let mut copy = rotating.clone();
        let limit = (copy.memory_bytes() as u64).saturating_add(MAX_GROWN_BYTES);
        for (item, now_ms) in ITEMS.iter().zip([0, 1, u64::MAX / 2, u64::MAX]) {
            if copy.insert_within(item, now_ms, Some(limit)).is_err() {
                break;
            }
            assert!(
                copy.contains(item),
                "rotating: an item inserted at {now_ms} is absent"
            );
        }
        let _ = (copy.fpp_bound(), copy.len());
        round_trip(&copy, &exercise_view(&copy));
    }
}

// ---------------------------------------------------------------------------------------
// Guava bytes
// ---------------------------------------------------------------------------------------

/// A reader that hands out its bytes in pieces of varying size and sometimes fails with
/// `Interrupted` (which the Guava reader must retry), as a socket or pipe does.
pub struct ChoppyReader<'a> {
    bytes: &'a [u8],
    calls: usize,
}

impl<'a> ChoppyReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, calls: 0 }
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }
}

impl Read for ChoppyReader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(5) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let most = [1, 3, 8, 13, 4096][self.calls % 5];
        let n = most.min(buffer.len()).min(self.bytes.len());
        buffer[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// Guava's `writeTo` bytes through both readers: `from_guava_bytes` (exactly one filter)
/// and the streaming `read_guava` (one filter, then stops), over a slice and over a
/// choppy reader. Returns a trace line.
pub fn check_guava(bytes: &[u8]) -> String {
    let whole = BloomFilter::from_guava_bytes(bytes);
    let mut slice = bytes;
    let streamed = BloomFilter::read_guava(&mut slice);
    let mut choppy = ChoppyReader::new(bytes);
    let chopped = BloomFilter::read_guava(&mut choppy);
    match (&streamed, &chopped) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "read_guava depends on how the input is chopped"),
        (Err(a), Err(b)) => assert_eq!(
            a.to_string(),
            b.to_string(),
            "read_guava errors differ by chopping"
        ),
        _ => panic!("read_guava depends on how the input is chopped: {streamed:?} vs {chopped:?}"),
    }
    if let Ok(filter) = &streamed {
        let len = 6 + 8 * filter.words().len();
        assert_eq!(
            slice.len(),
            bytes.len() - len,
            "read_guava did not stop right after the filter"
        );
        assert_eq!(choppy.rest().len(), bytes.len() - len);
        assert_eq!(
            filter.to_guava_bytes(),
            bytes[..len],
            "Guava bytes do not round-trip"
        );
        let exact = BloomFilter::from_guava_bytes(&bytes[..len])
            .unwrap_or_else(|error| panic!("read_guava accepted what from_guava_bytes refuses: {error}"));
        assert_eq!(&exact, filter);
    }
    match (&whole, &streamed) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Ok(_), Err(error)) => panic!("from_guava_bytes accepts what read_guava refuses: {error}"),
        (Err(whole_error), Err(stream_error)) => assert_eq!(
            whole_error.to_string(),
            stream_error.to_string(),
            "the Guava readers refuse the same bytes for different reasons"
        ),
        (Err(error), Ok(_)) => {
            assert!(
                matches!(
                    error,
                    Error::Format {
                        problem: bloomery::FormatProblem::TrailingBytes { .. },
                        ..
                    }
                ),
                "from_guava_bytes refuses, read_guava accepts: {error}"
            );
        }
    }
    match whole {
        Err(error) => format!("refused: {}", error_class(&error)),
        Ok(filter) => {
            let boxed: Box<dyn DynFilter> = Box::new(filter);
            exercise_filter(boxed, 4);
            "opened".into()
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parquet bloom filters
// ---------------------------------------------------------------------------------------

/// A Parquet column chunk's bloom filter (header and bitset) through
/// `SplitBlockBloomFilter::from_parquet_bytes`, and the bytes as a bare bitset: what opens
/// holds the bitset given, writes Parquet bytes that read back to the same filter, and is
/// exercised as a filter. Returns a trace line.
pub fn check_parquet(bytes: &[u8]) -> String {
    if let Ok(bare) = SplitBlockBloomFilter::from_parquet_bitset(bytes) {
        assert_eq!(
            &*bare.bitset(),
            bytes,
            "a bare bitset does not read back as given"
        );
    }
    match SplitBlockBloomFilter::from_parquet_bytes(bytes) {
        Err(error) => format!("refused: {}", error_class(&error)),
        Ok(filter) => {
            let bitset = filter.bitset().into_owned();
            assert!(
                bytes.ends_with(&bitset),
                "the bitset read is not the input's tail"
            );
            // Written back where every Parquet reader takes the size (a power of two bytes
            // up to 128 MiB), refused elsewhere; read at any size.
            match filter.to_parquet_bytes() {
                Ok(written) => {
                    assert!(
                        parquet_readers_take(filter.num_blocks()),
                        "written at a size readers refuse"
                    );
                    let again = SplitBlockBloomFilter::from_parquet_bytes(&written)
                        .unwrap_or_else(|error| panic!("its own Parquet bytes are refused: {error}"));
                    assert_eq!(again, filter, "Parquet bytes do not round-trip");
                }
                Err(error) => assert!(
                    !parquet_readers_take(filter.num_blocks()),
                    "a size every reader takes refused: {error}"
                ),
            }
            exercise_filter(Box::new(filter), 4);
            "opened".into()
        }
    }
}

// ---------------------------------------------------------------------------------------
// Redis dump pieces
// ---------------------------------------------------------------------------------------

/// What the dump-pieces target's first four input bytes ask for.
#[derive(Clone, Copy, Debug)]
pub struct PiecesControl {
    /// Bit 0: the rest of the input is a structure-aware envelope input
    /// ([`envelope_from_input`]) rather than raw bytes. Bit 1: cap the dump at fewer
    /// bytes than the input. Bits 2-3: damage one piece (0 none, 1 wrong number, 2 one
    /// byte short, 3 one byte extra).
    pub flags: u8,
    /// Bytes per piece: 1 + the next two bytes (little-endian).
    pub piece_len: usize,
    /// Which piece is damaged (modulo the number of pieces).
    pub target: u8,
}

impl PiecesControl {
    pub fn parse(input: &[u8]) -> Option<(Self, &[u8])> {
        let (head, rest) = input.split_first_chunk::<4>()?;
        Some((
            Self {
                flags: head[0],
                piece_len: 1 + usize::from(u16::from_le_bytes([head[1], head[2]])),
                target: head[3],
            },
            rest,
        ))
    }
}

/// A dump sent in numbered pieces, as `BF.LOADCHUNK` receives it: the input (raw, or
/// built with valid checksums) cut into pieces of the chosen length, one of them
/// optionally damaged, pushed into a `PieceAssembler` in order; a complete dump is then
/// checked as a native file ([`check_native`]). Returns a trace line, `None` when the
/// input is too short to say anything.
pub fn check_pieces(input: &[u8]) -> Option<String> {
    use bloomery::format::pieces::{Assembled, PieceAssembler};

    let (control, rest) = PiecesControl::parse(input)?;
    let built;
    let (data, inserts): (&[u8], usize) = if control.flags & 1 != 0 {
        let (envelope_control, bytes) = envelope_from_input(rest)?;
        built = bytes;
        (&built, envelope_control.inserts())
    } else {
        (rest, 2)
    };
    let piece_len = control.piece_len;
    let capped = control.flags & 2 != 0;
    let max_total = if capped {
        (data.len() as u64).saturating_sub(1 + u64::from(control.target))
    } else {
        1 << 30
    };
    let damage = (control.flags >> 2) & 3;
    let mut pieces: Vec<(u64, Vec<u8>)> = data
        .chunks(piece_len)
        .zip(1..)
        .map(|(piece, number)| (number, piece.to_vec()))
        .collect();
    if pieces.is_empty() {
        pieces.push((1, Vec::new()));
    }
    let target = usize::from(control.target) % pieces.len();
    match damage {
        1 if target > 0 => pieces[target].0 += 1 + u64::from(control.target >> 6),
        2 => drop(pieces[target].1.pop()),
        3 => pieces[target].1.push(control.target),
        _ => {}
    }
    let damaged = match damage {
        0 => false,
        1 => target > 0,
        _ => true,
    };
    // A whole, undamaged envelope whose header fits the first piece must come back whole.
    let must_complete = !damaged
        && (data.len() as u64) <= max_total
        && Header::parse(&pieces[0].1).is_ok_and(|header| header.total_len() == data.len() as u64);

    let mut pushed = pieces[0].1.clone();
    let mut state = PieceAssembler::start(&pieces[0].1, piece_len, max_total);
    let mut next = 1;
    loop {
        match state {
            Err(error) => {
                assert!(
                    !must_complete,
                    "a whole envelope in {piece_len}-byte pieces is refused: {error}"
                );
                return Some(format!("stage=pieces refused: {}", error_class(&error)));
            }
            Ok(Assembled::NeedMore(assembler)) => {
                assert_eq!(assembler.next_number(), next as u64 + 1);
                assert_eq!(assembler.received(), pushed.len());
                let Some((number, piece)) = pieces.get(next) else {
                    assert!(
                        !must_complete,
                        "a whole envelope is incomplete after its last piece"
                    );
                    return Some("stage=pieces incomplete".into());
                };
                pushed.extend_from_slice(piece);
                state = assembler.push(*number, piece);
                next += 1;
            }
            Ok(Assembled::Complete(whole)) => {
                assert!(whole == pushed, "the assembled dump is not the pieces pushed");
                assert!(
                    whole.len() as u64 <= max_total,
                    "the assembled dump exceeds the cap"
                );
                let header = Header::parse(&whole).expect("a complete dump starts with a valid header");
                assert_eq!(
                    header.total_len(),
                    whole.len() as u64,
                    "a complete dump of the wrong length"
                );
                if must_complete {
                    assert!(whole == data, "a whole envelope came back changed");
                }
                let outcome = check_native(&whole, inserts);
                return Some(format!("stage=complete {outcome}"));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// RedisBloom-layout dumps (BF.SCANDUMP / BF.LOADCHUNK, RDB values)
// ---------------------------------------------------------------------------------------

/// The most bytes of bits a RedisBloom header may announce before the harness loads it,
/// as the Redis module holds `BF.LOADCHUNK` to `bloomery.max-filter-memory` (checked with
/// `scandump_header_bytes` before `from_scandump_header` allocates): small, so that the
/// harness's model of the bits and its checks stay cheap.
pub const MAX_REDISBLOOM_BYTES: u64 = 1 << 16;

/// The most pieces after the header the harness loads from one input.
pub const MAX_REDISBLOOM_PIECES: usize = 1 << 10;

/// The pieces of an input in the layout of the RedisBloom fixtures
/// (`crates/bloomery/tests/data/redisbloom/*.scandump`): iterator u64, length u64, that
/// many bytes, again and again; a length past the input's end takes what is left.
pub fn parse_pieces(mut rest: &[u8]) -> Vec<(u64, &[u8])> {
    let mut pieces = Vec::new();
    while let Some((head, after)) = rest.split_first_chunk::<16>() {
        let iterator = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
        let claimed = u64::from_le_bytes(head[8..].try_into().expect("8 bytes"));
        let len = usize::try_from(claimed).unwrap_or(usize::MAX).min(after.len());
        pieces.push((iterator, &after[..len]));
        rest = &after[len..];
    }
    pieces
}

/// What `load_scandump_chunk` must do with a piece, as RedisBloom's `BF.LOADCHUNK` does:
/// the piece ends at `iterator - 1` (counted over the links' bits in order), so it starts
/// at `iterator - 1 - len`; that start must lie in a link, and the piece inside it.
/// Returns the link and the offset in it, `None` for a piece refused.
fn piece_place(links: &[Vec<u8>], iterator: u64, len: usize) -> Option<(usize, usize)> {
    if iterator == 0 {
        return None;
    }
    let start = (iterator - 1).checked_sub(len as u64)?;
    let mut first = 0u64;
    for (index, link) in links.iter().enumerate() {
        let end = first + link.len() as u64;
        if start < end {
            let offset = (start - first) as usize;
            return (len <= link.len() - offset).then_some((index, offset));
        }
        first = end;
    }
    None
}

/// The links of a filter's bits as RedisBloom's pieces see them, one byte vector each.
fn link_bits(filter: &bloomery::redisbloom::RedisBloomFilter) -> Vec<Vec<u8>> {
    filter.links().iter().map(|link| link.bitmap().to_vec()).collect()
}

/// A RedisBloom `BF.SCANDUMP` dump loaded as the Redis module loads `BF.LOADCHUNK` pieces
/// onto a new key: piece 1 is the header (`scandump_header_bytes` against the module's cap,
/// then `from_scandump_header`), every later piece goes to `load_scandump_chunk`. Checked:
///
/// - nothing panics; a header that loads writes back as the same bytes, announces the
///   bytes its links hold, and loads from RedisBloom's RDB fields (`from_rdb_parts`) to the
///   same filter; one that does not load is refused by `from_rdb_parts` too;
/// - every piece lands (ORed into the bits) where its iterator says, or is refused and changes nothing (against
///   a model of RedisBloom's rule), in whatever order the pieces come;
/// - what loads round-trips through its own pieces, its RDB fields and a native file,
///   and an item inserted into it is present.
///
/// Returns a trace line.
pub fn check_redisbloom_pieces(pieces: &[(u64, &[u8])]) -> String {
    use bloomery::redisbloom::{RdbLink, RedisBloomFilter};

    let Some(&(first, header)) = pieces.first() else {
        return "stage=empty".into();
    };
    if first != 1 {
        // The module leaves such a first piece to bloomery's own loading (native_envelope
        // and dump_pieces fuzz that).
        return "stage=not-a-redisbloom-header".into();
    }
    // RedisBloom's RDB fields read leniently from the same bytes: RDB values and
    // BF.LOADCHUNK headers are checked alike.
    let rdb = rdb_fields(header);
    let announced = match RedisBloomFilter::scandump_header_bytes(header) {
        Err(error) => {
            assert!(
                RedisBloomFilter::from_scandump_header(header).is_err(),
                "from_scandump_header accepts a header scandump_header_bytes refuses"
            );
            return format!("stage=header refused: {}", error_class(&error));
        }
        Ok(bytes) if bytes > MAX_REDISBLOOM_BYTES => return "stage=header over the cap".into(),
        Ok(bytes) => bytes,
    };
    let mut filter = match RedisBloomFilter::from_scandump_header(header) {
        Err(error) => {
            if let Some((size, options, growth, links)) = rdb {
                assert!(
                    RedisBloomFilter::from_rdb_parts(size, options, growth, links).is_err(),
                    "from_rdb_parts accepts the fields of a header from_scandump_header refuses ({error})"
                );
            }
            return format!("stage=header refused: {}", error_class(&error));
        }
        Ok(filter) => filter,
    };
    assert_eq!(
        filter.scandump_header(),
        header,
        "a header that loads writes back as other bytes"
    );
    let mut model = link_bits(&filter);
    assert_eq!(
        model.iter().map(|link| link.len() as u64).sum::<u64>(),
        announced,
        "the links hold other bytes than the header announces"
    );
    assert!(model.iter().all(|link| link.iter().all(|&b| b == 0)));
    let (size, options, growth, links) = rdb.expect("a header that loads has RDB fields");
    let from_rdb = RedisBloomFilter::from_rdb_parts(size, options, growth, links)
        .unwrap_or_else(|error| panic!("from_rdb_parts refuses a header that loads: {error}"));
    assert!(
        from_rdb == filter,
        "from_rdb_parts and from_scandump_header differ"
    );

    let mut refused = 0;
    let loaded = &pieces[1..pieces.len().min(1 + MAX_REDISBLOOM_PIECES)];
    for &(iterator, data) in loaded {
        let place = piece_place(&model, iterator, data.len());
        match filter.load_scandump_chunk(iterator, data) {
            Ok(()) => {
                let (link, offset) = place.unwrap_or_else(|| {
                    panic!(
                        "a piece of {} bytes ending at {iterator} loaded where none fits",
                        data.len()
                    )
                });
                // ORed into the link's bits (items added between pieces stay).
                for (bits, &piece) in model[link][offset..offset + data.len()].iter_mut().zip(data) {
                    *bits |= piece;
                }
                assert!(
                    filter.links()[link].bitmap()[offset..offset + data.len()]
                        == model[link][offset..offset + data.len()],
                    "a piece landed elsewhere than its iterator says"
                );
            }
            Err(_) => {
                assert!(
                    place.is_none(),
                    "a piece of {} bytes ending at {iterator} fits but is refused",
                    data.len()
                );
                refused += 1;
            }
        }
    }
    // Every piece where its iterator says, and a refused one changed nothing.
    assert!(
        link_bits(&filter) == model,
        "the bits loaded are not the pieces' bits"
    );

    // Round trips: the filter's own pieces (as BF.SCANDUMP gives them, here in reverse
    // order) onto a new key; its RDB fields; a native file (then items inserted).
    let mut own: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut iterator = 1;
    while let Some((next, data)) = filter.scandump_chunk(iterator, 1 + (announced as usize / 3)) {
        own.push((next, data.to_vec()));
        iterator = next;
    }
    let mut again =
        RedisBloomFilter::from_scandump_header(&filter.scandump_header()).expect("its own header loads");
    for (iterator, data) in own.iter().rev() {
        again
            .load_scandump_chunk(*iterator, data)
            .expect("its own pieces load, in any order");
    }
    assert!(
        again == filter,
        "a filter's own pieces, loaded, are another filter"
    );
    assert_eq!(
        RedisBloomFilter::from_scandump_stream(&filter.scandump_stream())
            .ok()
            .as_ref(),
        Some(&filter),
        "the joined pieces load to another filter"
    );
    let links: Vec<RdbLink<'_>> = filter.rdb_links();
    let back = RedisBloomFilter::from_rdb_parts(filter.len(), filter.options(), filter.growth(), links)
        .expect("its own RDB fields load");
    assert!(back == filter, "a filter's RDB fields load to another filter");
    let links = filter.links().len();
    exercise_filter(Box::new(filter), 4);
    // Coarse, so that `scripts/fuzz.sh --reach` counts kinds of input, not sizes.
    let links = if links == 1 { "one link" } else { "links" };
    match (loaded.len(), refused) {
        (0, _) => format!("stage=loaded {links}, header only"),
        (_, 0) => format!("stage=loaded {links}, every piece placed"),
        _ => format!("stage=loaded {links}, pieces refused"),
    }
}

/// RedisBloom's RDB fields of a chain (size, options, growth, links with zero bits of
/// their announced bytes) read from a `BF.SCANDUMP` header without checking them, or
/// `None` when the bytes are too short, the count is not what the length holds, or the
/// bits announced pass [`MAX_REDISBLOOM_BYTES`].
fn rdb_fields(header: &[u8]) -> Option<(u64, u32, u32, Vec<bloomery::redisbloom::RdbLink<'static>>)> {
    use bloomery::redisbloom::RdbLink;
    let word = |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let half = |bytes: &[u8], at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    if header.len() < 20 {
        return None;
    }
    let count = half(header, 8) as usize;
    if count == 0 || header.len() != 20 + 53 * count {
        return None;
    }
    let mut total = 0u64;
    let mut links = Vec::with_capacity(count);
    for raw in header[20..].chunks_exact(53) {
        let bytes = word(raw, 0);
        total = total.checked_add(bytes)?;
        if total > MAX_REDISBLOOM_BYTES {
            return None;
        }
        links.push(RdbLink {
            bits: word(raw, 8),
            size: word(raw, 16),
            error: f64::from_bits(word(raw, 24)),
            bpe: f64::from_bits(word(raw, 32)),
            hashes: half(raw, 40),
            entries: word(raw, 44),
            n2: raw[52],
            bitmap: std::borrow::Cow::Owned(vec![0; bytes as usize]),
        });
    }
    Some((word(header, 0), half(header, 12), half(header, 16), links))
}

/// What the `redisbloom_chunks` target's first input byte asks for.
#[derive(Clone, Copy, Debug)]
pub struct ChunksControl(pub u8);

impl ChunksControl {
    /// Bit 0 clear: the rest is pieces as they are ([`parse_pieces`]); set: a filter made
    /// and filled from the next bytes, dumped, its pieces changed as bits 1-3 say.
    pub fn built(self) -> bool {
        self.0 & 1 != 0
    }

    /// Bits 1-3: 0 as dumped; 1 the bit pieces in reverse order; 2 one piece left out;
    /// 3 one piece a byte short (its iterator kept); 4 one a byte longer; 5 one with its
    /// iterator moved; 6 the header a byte short; 7 one header byte changed.
    pub fn change(self) -> u8 {
        (self.0 >> 1) & 7
    }
}

/// A RedisBloom filter made and filled as the input says (the structure-aware half of
/// the `redisbloom_chunks` target): capacity, error rate, growth, NONSCALING, items, the
/// piece length and which piece to change. Its `BF.SCANDUMP` pieces are loaded as
/// [`check_redisbloom_pieces`] loads them; unchanged, or only reordered, they must load
/// to the filter dumped, every item inserted present.
pub fn check_redisbloom_built(control: ChunksControl, input: &[u8]) -> Option<String> {
    use bloomery::redisbloom::RedisBloomFilter;

    let [
        capacity_low,
        capacity_high,
        rate,
        shape,
        count,
        piece_low,
        piece_high,
        target,
        value,
    ] = *input.first_chunk::<9>()?;
    let capacity = 1 + u64::from(u16::from_le_bytes([capacity_low, capacity_high]) % 2_000);
    let error = [0.5, 0.1, 0.05, 0.01, 0.001, 1e-4, 1e-6, 0.3][usize::from(rate % 8)];
    let growth = 1 + u32::from(shape & 3);
    let nonscaling = shape & 4 != 0;
    let mut filter = RedisBloomFilter::new(capacity, error, growth, nonscaling).ok()?;
    if RedisBloomFilter::scandump_header_bytes(&filter.scandump_header()).ok()? > MAX_REDISBLOOM_BYTES {
        return None;
    }
    let mut inserted = Vec::new();
    for i in 0..count {
        let item = format!("item-{i}-{}", input.len());
        match filter.insert_within(item.as_bytes(), Some(MAX_REDISBLOOM_BYTES)) {
            Ok(_) => inserted.push(item.into_bytes()),
            Err(_) => break,
        }
    }
    for item in input[9..].split(|&b| b == b'\n').take(64) {
        if filter.insert_within(item, Some(MAX_REDISBLOOM_BYTES)).is_ok() {
            inserted.push(item.to_vec());
            assert!(filter.contains(item));
        }
    }
    let piece_len = 1 + usize::from(u16::from_le_bytes([piece_low, piece_high]));
    let mut pieces: Vec<(u64, Vec<u8>)> = vec![(1, filter.scandump_header())];
    let mut iterator = 1;
    while let Some((next, data)) = filter.scandump_chunk(iterator, piece_len) {
        pieces.push((next, data.to_vec()));
        iterator = next;
    }
    let bits = pieces.len() - 1;
    let pick = |pieces: &Vec<(u64, Vec<u8>)>| 1 + usize::from(target) % (pieces.len() - 1).max(1);
    let change = control.change();
    match change {
        1 => pieces[1..].reverse(),
        2 if bits > 0 => drop(pieces.remove(pick(&pieces))),
        3 if bits > 0 => {
            let at = pick(&pieces);
            pieces[at].1.pop();
        }
        4 if bits > 0 => {
            let at = pick(&pieces);
            pieces[at].1.push(value);
        }
        5 if bits > 0 => {
            let at = pick(&pieces);
            pieces[at].0 = pieces[at].0.wrapping_add(u64::from(value)).wrapping_sub(128);
        }
        6 => drop(pieces[0].1.pop()),
        7 => {
            let at = usize::from(target) % pieces[0].1.len();
            pieces[0].1[at] ^= value.max(1);
        }
        _ => {}
    }
    let borrowed: Vec<(u64, &[u8])> = pieces.iter().map(|(n, data)| (*n, &data[..])).collect();
    let outcome = check_redisbloom_pieces(&borrowed);
    if change == 6 {
        assert!(
            RedisBloomFilter::from_scandump_header(&pieces[0].1).is_err(),
            "a header a byte short loads"
        );
    }
    if change <= 1 {
        // As dumped, in order or not: the same filter, every item present.
        let mut loaded = RedisBloomFilter::from_scandump_header(&pieces[0].1)
            .unwrap_or_else(|error| panic!("a dumped header is refused: {error}"));
        for (iterator, data) in &pieces[1..] {
            loaded
                .load_scandump_chunk(*iterator, data)
                .unwrap_or_else(|error| panic!("a dumped piece is refused: {error}"));
        }
        assert!(loaded == filter, "a dump loaded is another filter");
        for item in &inserted {
            assert!(loaded.contains(item), "an item dumped is absent after loading");
        }
    }
    Some(format!("built change={change} {outcome}"))
}
