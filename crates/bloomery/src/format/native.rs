//! bloomery's own serialized form: one checksummed envelope for every filter variant,
//! laid out so the payload (the bit or counter words) starts 64-byte aligned and can be
//! used in place from a memory map.
//!
//! ```text
//! offset   size  field (all integers little-endian)
//! 0        8     magic "BLOOMERY"
//! 8        2     format version (2; version 1 is still read); bit 15: unsealed
//! 10       2     variant (see `Variant`)
//! 12       4     params_len P: bytes of variant parameters (at most 65,536)
//! 16       8     payload_len L
//! 24       8     payload checksum: xxh3-64 of the payload
//! 32       P     variant parameters
//! 32+P     ...   zero padding up to H - 8, where H = (32 + P + 8) rounded up to 64
//! H-8      8     header checksum: xxh3-64 of bytes 0..H-8
//! H        L     payload
//! ```
//!
//! The header checksum is always checked, so a torn or foreign file is refused before any
//! payload is touched; the payload checksum is checked on full loads and by `verify`, and
//! skipped when a large filter is opened lazily. xxh3 runs at memory speed (about 30 GB/s
//! on one x86-64 core), so a full check costs about as much as reading the payload.

use std::borrow::Cow;
use std::io::{self, Write};
use std::ops::Range;

use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::error::{Error, FormatProblem, Result};

/// The first 8 bytes of every bloomery envelope.
pub const MAGIC: [u8; 8] = *b"BLOOMERY";
/// The format version this library writes. Version 1 is also read: its header is the same,
/// and it differs only in the blocked filter's hasher (foldhash, refused with a message
/// saying how to rebuild) and the rotating filter's parameters (no per-generation shape).
pub const VERSION: u16 = 2;
/// The oldest format version this library reads.
pub const OLDEST_VERSION: u16 = 1;
/// Bit 15 of the version field: the file is unsealed. A writer that changes the bits of a
/// file in place (inserts only set bits) sets it, covered by the header checksum, before
/// the first bit changes, and clears it with the new payload checksum once every changed
/// bit is on disk. Set, it means: the bits are valid (a superset of those the last sealed
/// header described), the payload checksum is stale. Only with format version 2.
pub const UNSEALED: u16 = 0x8000;
/// The payload starts at a multiple of this many bytes (one cache line).
pub const PAYLOAD_ALIGN: usize = 64;
/// The largest parameter block accepted when reading.
pub const MAX_PARAMS_LEN: usize = 1 << 16;
/// The largest payload accepted when reading: 2^62 bytes, far beyond any filter (a blocked
/// filter has at most 2^38 bytes), and small enough that no offset computed from it
/// overflows a u64.
pub const MAX_PAYLOAD_LEN: u64 = 1 << 62;

const FIXED_LEN: usize = 32;
const FORMAT: &str = "bloomery";

/// Which filter an envelope holds: stored as a `u16`, never reused for another meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Variant {
    /// [`BloomFilter`](crate::BloomFilter), Guava-compatible bits.
    Classic = 1,
    /// [`BlockedBloomFilter`](crate::BlockedBloomFilter), cache-line blocks.
    Blocked = 2,
    /// [`CountingBloomFilter`](crate::CountingBloomFilter), 4-bit counters.
    Counting = 3,
    /// [`ScalableBloomFilter`](crate::ScalableBloomFilter), a growing chain.
    Scalable = 4,
    /// [`RetouchedBloomFilter`](crate::RetouchedBloomFilter), false positives cleared.
    Retouched = 5,
    /// [`AllowlistedBloomFilter`](crate::AllowlistedBloomFilter), known false positives listed.
    Allowlisted = 6,
    /// [`RotatingBloomFilter`](crate::RotatingBloomFilter), aging generations.
    Rotating = 7,
    /// [`SplitBlockBloomFilter`](crate::SplitBlockBloomFilter), Parquet's bitset.
    SplitBlock = 8,
    /// [`RedisBloomFilter`](crate::redisbloom::RedisBloomFilter), RedisBloom's scalable
    /// filter in its `BF.SCANDUMP` form.
    RedisBloom = 9,
    /// [`ScalableBlockedBloomFilter`](crate::scalable_blocked::ScalableBlockedBloomFilter),
    /// the scalable filter's growth over blocked sub-filters.
    ScalableBlocked = 10,
}

impl Variant {
    /// The variant stored as `code`, if this library knows it.
    pub fn from_code(code: u16) -> Option<Self> {
        match code {
            1 => Some(Variant::Classic),
            2 => Some(Variant::Blocked),
            3 => Some(Variant::Counting),
            4 => Some(Variant::Scalable),
            5 => Some(Variant::Retouched),
            6 => Some(Variant::Allowlisted),
            7 => Some(Variant::Rotating),
            8 => Some(Variant::SplitBlock),
            9 => Some(Variant::RedisBloom),
            10 => Some(Variant::ScalableBlocked),
            _ => None,
        }
    }

    /// The stored code.
    pub fn code(self) -> u16 {
        self as u16
    }

    /// Every variant, in code order.
    pub const ALL: [Variant; 10] = [
        Variant::Classic,
        Variant::Blocked,
        Variant::Counting,
        Variant::Scalable,
        Variant::Retouched,
        Variant::Allowlisted,
        Variant::Rotating,
        Variant::SplitBlock,
        Variant::RedisBloom,
        Variant::ScalableBlocked,
    ];

    /// The variant's name: "classic", "blocked", "counting", "scalable", "retouched",
    /// "allowlisted", "rotating", "split-block", "redisbloom" or "scalable-blocked".
    pub fn name(self) -> &'static str {
        match self {
            Variant::Classic => "classic",
            Variant::Blocked => "blocked",
            Variant::Counting => "counting",
            Variant::Scalable => "scalable",
            Variant::Retouched => "retouched",
            Variant::Allowlisted => "allowlisted",
            Variant::Rotating => "rotating",
            Variant::SplitBlock => "split-block",
            Variant::RedisBloom => "redisbloom",
            Variant::ScalableBlocked => "scalable-blocked",
        }
    }

    /// The indefinite article before the variant's name: "an" for "allowlisted", "a" for
    /// the others (for messages: "an allowlisted filter", "a blocked filter").
    ///
    /// ```
    /// use bloomery::format::native::Variant;
    /// assert_eq!(format!("{} {} filter", Variant::Allowlisted.article(), Variant::Allowlisted), "an allowlisted filter");
    /// assert_eq!(Variant::Blocked.article(), "a");
    /// ```
    pub fn article(self) -> &'static str {
        if self.name().starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        }
    }

    /// What a filter's expected item count sizes where it is not the whole filter: a
    /// growing kind's first sub-filter, a rotating filter's every generation. These kinds
    /// refuse 0 items; the fixed-size ones (`None`) take 0 as their smallest filter.
    ///
    /// ```
    /// use bloomery::format::native::Variant;
    /// assert_eq!(Variant::Rotating.items_sized(), Some("each generation's items"));
    /// assert_eq!(Variant::Blocked.items_sized(), None);
    /// ```
    pub fn items_sized(self) -> Option<&'static str> {
        match self {
            Variant::Scalable | Variant::RedisBloom | Variant::ScalableBlocked => {
                Some("its first sub-filter's items")
            }
            Variant::Rotating => Some("each generation's items"),
            _ => None,
        }
    }

    /// The variant named `name` (as [`name`](Variant::name) gives it).
    ///
    /// ```
    /// use bloomery::format::native::Variant;
    /// assert_eq!(Variant::from_name("blocked"), Some(Variant::Blocked));
    /// assert_eq!(Variant::from_name("bloom"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|variant| variant.name() == name)
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

/// The length of the header (everything before the payload) for `params_len` bytes of
/// parameters.
pub fn header_len(params_len: usize) -> usize {
    (FIXED_LEN + params_len + 8).next_multiple_of(PAYLOAD_ALIGN)
}

/// The header bytes for an envelope of `variant` with `params` and `payload`.
pub fn encode_header(variant: Variant, params: &[u8], payload: &[u8]) -> Vec<u8> {
    encode_header_with_checksum(variant, params, payload.len() as u64, xxh3_64(payload))
}

/// The header bytes when the payload's length and checksum are already known (for writers
/// that stream the payload).
pub fn encode_header_with_checksum(
    variant: Variant,
    params: &[u8],
    payload_len: u64,
    payload_checksum: u64,
) -> Vec<u8> {
    encode_header_sealed_or_not(variant, params, payload_len, payload_checksum, false)
}

/// As [`encode_header_with_checksum`], with the [`UNSEALED`] mark when `unsealed` (then
/// `payload_checksum` is stale and readers do not check it).
pub fn encode_header_sealed_or_not(
    variant: Variant,
    params: &[u8],
    payload_len: u64,
    payload_checksum: u64,
    unsealed: bool,
) -> Vec<u8> {
    assert!(
        params.len() <= MAX_PARAMS_LEN,
        "parameter block of {} bytes",
        params.len()
    );
    let len = header_len(params.len());
    let mut header = Vec::with_capacity(len);
    header.extend_from_slice(&MAGIC);
    let version = if unsealed { VERSION | UNSEALED } else { VERSION };
    header.extend_from_slice(&version.to_le_bytes());
    header.extend_from_slice(&variant.code().to_le_bytes());
    header.extend_from_slice(&(params.len() as u32).to_le_bytes());
    header.extend_from_slice(&payload_len.to_le_bytes());
    header.extend_from_slice(&payload_checksum.to_le_bytes());
    header.extend_from_slice(params);
    header.resize(len - 8, 0);
    let checksum = xxh3_64(&header);
    header.extend_from_slice(&checksum.to_le_bytes());
    header
}

/// The payload checksum of `len` zero bytes (an empty classic, blocked or split-block
/// filter's payload): XXH3-64 streamed over a small buffer of zeros, so that no memory of
/// the payload's size is needed.
///
/// ```
/// use bloomery::format::native::zero_payload_checksum;
/// use xxhash_rust::xxh3::xxh3_64;
///
/// assert_eq!(zero_payload_checksum(0), xxh3_64(&[]));
/// assert_eq!(zero_payload_checksum(100_000), xxh3_64(&vec![0u8; 100_000]));
/// ```
pub fn zero_payload_checksum(len: u64) -> u64 {
    const PIECE: usize = 1 << 20;
    let zeros = vec![0u8; len.min(PIECE as u64) as usize];
    let mut hasher = Xxh3::new();
    let mut left = len;
    while left > 0 {
        let take = left.min(PIECE as u64) as usize;
        hasher.update(&zeros[..take]);
        left -= take as u64;
    }
    hasher.digest()
}

/// A whole envelope: header then payload.
pub fn encode(variant: Variant, params: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut bytes = encode_header(variant, params, payload);
    bytes.extend_from_slice(payload);
    bytes
}

/// A filter's envelope as pieces borrowed from the filter: the parameters, then the payload
/// in the filter's own memory, without a serialized copy. For writers that stream a large
/// filter (a file, a socket, chunked dumps): [`len`](Envelope::len) is known at once,
/// [`read_range`](Envelope::read_range) copies any byte range, and the payload checksum
/// (one pass over the payload) is computed only for ranges that include the header.
///
/// ```
/// use bloomery::{BloomFilter, format::native::Persist};
///
/// let mut filter = BloomFilter::with_fpp(10_000, 0.01)?;
/// filter.insert("kept");
/// let envelope = filter.envelope();
/// let mut pieces = Vec::new();
/// for start in (0..envelope.len()).step_by(1000) {
///     pieces.extend(envelope.read_range(start..(start + 1000).min(envelope.len())));
/// }
/// assert_eq!(pieces, filter.to_bytes());
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Envelope<'a> {
    variant: Variant,
    params: Vec<u8>,
    pieces: Vec<Cow<'a, [u8]>>,
    payload_len: u64,
}

impl<'a> Envelope<'a> {
    /// An envelope of `variant` with `params` whose payload is `pieces` in order.
    pub fn new(variant: Variant, params: Vec<u8>, pieces: Vec<Cow<'a, [u8]>>) -> Self {
        let payload_len = pieces.iter().map(|piece| piece.len() as u64).sum();
        Self {
            variant,
            params,
            pieces,
            payload_len,
        }
    }

    /// The header's length in bytes (where the payload starts).
    pub fn header_len(&self) -> u64 {
        header_len(self.params.len()) as u64
    }

    /// The envelope's whole length in bytes.
    pub fn len(&self) -> u64 {
        self.header_len() + self.payload_len
    }

    /// Whether the envelope has no bytes (never: the header always has some).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The header bytes, with the payload checksum (one pass over the payload).
    pub fn header(&self) -> Vec<u8> {
        let mut hasher = Xxh3::new();
        for piece in &self.pieces {
            hasher.update(piece);
        }
        encode_header_with_checksum(self.variant, &self.params, self.payload_len, hasher.digest())
    }

    /// Bytes `range` of the envelope (clamped to its length).
    pub fn read_range(&self, range: Range<u64>) -> Vec<u8> {
        let end = range.end.min(self.len());
        let mut start = range.start.min(end);
        let mut out = Vec::with_capacity((end - start) as usize);
        let header_len = self.header_len();
        if start < header_len {
            let header = self.header();
            out.extend_from_slice(&header[start as usize..end.min(header_len) as usize]);
            start = header_len;
        }
        let mut piece_start = header_len;
        for piece in &self.pieces {
            let piece_end = piece_start + piece.len() as u64;
            if start < end && start < piece_end {
                let from = (start - piece_start) as usize;
                let to = (end.min(piece_end) - piece_start) as usize;
                out.extend_from_slice(&piece[from..to]);
                start = piece_start + to as u64;
            }
            piece_start = piece_end;
        }
        out
    }

    /// The whole envelope as one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len() as usize);
        bytes.extend_from_slice(&self.header());
        for piece in &self.pieces {
            bytes.extend_from_slice(piece);
        }
        bytes
    }

    /// Writes the whole envelope to `writer`, piece by piece.
    pub fn write_to(&self, writer: &mut (impl Write + ?Sized)) -> io::Result<()> {
        for slice in self.slices(usize::MAX) {
            writer.write_all(&slice)?;
        }
        Ok(())
    }

    /// The whole envelope in order as slices, none empty: the header (computed, with the
    /// payload checksum: a few dozen bytes and the parameters), then the payload borrowed
    /// from the filter's memory in slices of at most `max` bytes. For writers whose
    /// pieces may end anywhere (the Redis module's RDB save): no copy of the payload is
    /// made, where [`read_range`](Self::read_range) copies each range.
    ///
    /// ```
    /// use bloomery::{BloomFilter, format::native::Persist};
    ///
    /// let mut filter = BloomFilter::with_fpp(10_000, 0.01)?;
    /// filter.insert("kept");
    /// let envelope = filter.envelope();
    /// let slices: Vec<_> = envelope.slices(1000).collect();
    /// assert!(slices[1..].iter().all(|slice| !slice.is_empty() && slice.len() <= 1000));
    /// assert_eq!(slices.concat(), filter.to_bytes());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn slices(&self, max: usize) -> impl Iterator<Item = Cow<'_, [u8]>> {
        std::iter::once(Cow::Owned(self.header())).chain(
            self.pieces
                .iter()
                .flat_map(move |piece| piece.chunks(max).map(Cow::Borrowed)),
        )
    }
}

/// A checked header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The format version the envelope was written in.
    pub version: u16,
    /// The variant stored.
    pub variant: Variant,
    /// The variant's parameter bytes.
    pub params: Vec<u8>,
    /// Where the payload starts (a multiple of [`PAYLOAD_ALIGN`]).
    pub payload_offset: usize,
    /// The payload's length in bytes.
    pub payload_len: u64,
    /// The payload's xxh3-64 checksum as written (stale when `unsealed`).
    pub payload_checksum: u64,
    /// Whether the header has the [`UNSEALED`] mark: the bits are valid, the payload
    /// checksum is stale ([`verify_payload`](Self::verify_payload) says so).
    pub unsealed: bool,
}

impl Header {
    /// Parses and checks the header at the start of `bytes` (which may hold only the header,
    /// or more). The payload is not looked at.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        // The magic first, as far as there are bytes: a short file of something else is
        // not a filter file cut short.
        let start = bytes.len().min(MAGIC.len());
        if bytes[..start] != MAGIC[..start] {
            return Err(Error::format(FORMAT, FormatProblem::BadMagic));
        }
        if bytes.len() < FIXED_LEN {
            return Err(truncated(FIXED_LEN as u64, bytes.len() as u64));
        }
        let version_field = u16::from_le_bytes([bytes[8], bytes[9]]);
        let unsealed = version_field & UNSEALED != 0;
        let version = version_field & !UNSEALED;
        // The mark exists from version 2 on; a version-1 field with bit 15 is no version.
        if !(OLDEST_VERSION..=VERSION).contains(&version) || (unsealed && version < 2) {
            return Err(Error::format(
                FORMAT,
                FormatProblem::UnsupportedVersion(version_field),
            ));
        }
        let variant_code = u16::from_le_bytes([bytes[10], bytes[11]]);
        let params_len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
        if params_len > MAX_PARAMS_LEN {
            return Err(Error::format(
                FORMAT,
                FormatProblem::ParamsTooLong(params_len as u64),
            ));
        }
        let payload_len = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
        let payload_checksum = u64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
        let len = header_len(params_len);
        if payload_len > MAX_PAYLOAD_LEN {
            return Err(Error::format(
                FORMAT,
                FormatProblem::Inconsistent(format!(
                    "payload of {payload_len} bytes is longer than the {MAX_PAYLOAD_LEN} allowed"
                )),
            ));
        }
        if bytes.len() < len {
            return Err(truncated(len as u64, bytes.len() as u64));
        }
        let stored = u64::from_le_bytes(bytes[len - 8..len].try_into().expect("8 bytes"));
        if xxh3_64(&bytes[..len - 8]) != stored {
            return Err(Error::format(FORMAT, FormatProblem::HeaderChecksum));
        }
        if bytes[FIXED_LEN + params_len..len - 8]
            .iter()
            .any(|&byte| byte != 0)
        {
            return Err(Error::format(
                FORMAT,
                FormatProblem::Inconsistent("the header's padding is not zero".into()),
            ));
        }
        // Checked after the checksum: a damaged variant field reads as damage, not as news.
        let variant = Variant::from_code(variant_code)
            .ok_or(Error::format(FORMAT, FormatProblem::UnknownVariant(variant_code)))?;
        // Only the variants updated in place are ever unsealed (docs/format.md): the mark
        // on another is damage, which no seal can mend (a load refused it as unsealed, and
        // sent the user to `bloomery seal`, which refused it the same way).
        if unsealed && !crate::in_place::updates_in_place(variant) {
            return Err(Error::format(
                FORMAT,
                FormatProblem::Inconsistent(format!(
                    "the unsealed mark on {} {} filter, whose files are always written whole",
                    variant.article(),
                    variant.name()
                )),
            ));
        }
        Ok(Self {
            version,
            variant,
            params: bytes[FIXED_LEN..FIXED_LEN + params_len].to_vec(),
            payload_offset: len,
            payload_len,
            payload_checksum,
            unsealed,
        })
    }

    /// Whether `other` describes the same filter: the same variant, parameters and payload
    /// (offset and length), whatever its version, mark and payload checksum, which a
    /// writer in place rewrites (docs/format.md, "Sealed and unsealed files").
    ///
    /// ```
    /// use bloomery::any::{self, Spec};
    /// use bloomery::format::native::{Header, Variant};
    ///
    /// let bytes = any::create(&Spec::new(Variant::Blocked, 1_000, 0.01))?.envelope().to_vec();
    /// let header = Header::parse(&bytes)?;
    /// let unsealed = Header::parse(&header.to_bytes(7, true))?;
    /// assert!(unsealed.same_filter(&header));
    /// let other = any::create(&Spec::new(Variant::Blocked, 2_000, 0.01))?.envelope().to_vec();
    /// assert!(!Header::parse(&other)?.same_filter(&header));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn same_filter(&self, other: &Header) -> bool {
        self.variant == other.variant
            && self.params == other.params
            && self.payload_offset == other.payload_offset
            && self.payload_len == other.payload_len
    }

    /// This header's bytes (format version 2) with `payload_checksum`, sealed or marked
    /// [`UNSEALED`]: what an in-place writer writes over the header before its first change
    /// (unsealed, the old checksum kept) and after its last (sealed, the new one). A sealed
    /// header of a version-2 file is byte for byte the one it was parsed from when the
    /// checksum is the same.
    pub fn to_bytes(&self, payload_checksum: u64, unsealed: bool) -> Vec<u8> {
        encode_header_sealed_or_not(
            self.variant,
            &self.params,
            self.payload_len,
            payload_checksum,
            unsealed,
        )
    }

    /// The total length of the envelope (no overflow: `parse` bounds the payload length).
    pub fn total_len(&self) -> u64 {
        self.payload_offset as u64 + self.payload_len
    }

    /// Checks that data of `actual` bytes holds exactly this envelope, nothing more.
    pub fn check_file_len(&self, actual: u64) -> Result<()> {
        super::check_exact_len(FORMAT, self.total_len(), actual)
    }

    /// Checks that `payload` is exactly this envelope's payload in length: a payload cut
    /// from a file with `&bytes[payload_offset..]`, where the file changed length after its
    /// header was read (another program writing it), is an error, not a filter of another
    /// size (whose lookups would then reach other bits).
    pub fn check_payload_len(&self, payload: &[u8]) -> Result<()> {
        self.check_file_len((self.payload_offset as u64).saturating_add(payload.len() as u64))
    }

    /// Checks `payload` against the stored checksum; an [`Unsealed`](FormatProblem::Unsealed)
    /// error, without reading the payload, when the header is unsealed.
    pub fn verify_payload(&self, payload: &[u8]) -> Result<()> {
        if self.unsealed {
            return Err(Error::format(FORMAT, FormatProblem::Unsealed));
        }
        if xxh3_64(payload) == self.payload_checksum {
            Ok(())
        } else {
            Err(Error::format(FORMAT, FormatProblem::PayloadChecksum))
        }
    }
}

/// Parses a whole envelope held in `bytes` (nothing may follow it), checks both checksums,
/// and returns the header and the payload. An unsealed envelope is refused
/// ([`FormatProblem::Unsealed`]): its bits cannot be checked.
pub fn decode(bytes: &[u8]) -> Result<(Header, &[u8])> {
    let header = Header::parse(bytes)?;
    header.check_file_len(bytes.len() as u64)?;
    let payload = &bytes[header.payload_offset..];
    header.verify_payload(payload)?;
    Ok((header, payload))
}

/// Checks that an envelope holds the variant a reader expects.
pub fn expect_variant(header: &Header, expected: Variant) -> Result<()> {
    if header.variant == expected {
        Ok(())
    } else {
        Err(Error::format(
            FORMAT,
            FormatProblem::WrongVariant {
                expected: expected.code(),
                found: header.variant.code(),
            },
        ))
    }
}

fn truncated(expected: u64, actual: u64) -> Error {
    Error::format(FORMAT, FormatProblem::Truncated { expected, actual })
}

/// Writes a variant's parameters, little-endian.
#[derive(Default, Debug)]
pub struct ParamWriter {
    bytes: Vec<u8>,
}

impl ParamWriter {
    /// An empty parameter block.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a `u8`.
    pub fn u8(mut self, value: u8) -> Self {
        self.bytes.push(value);
        self
    }

    /// Appends a `u32`.
    pub fn u32(mut self, value: u32) -> Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// Appends a `u64`.
    pub fn u64(mut self, value: u64) -> Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// Appends an `f64` (its IEEE 754 bits).
    pub fn f64(self, value: f64) -> Self {
        self.u64(value.to_bits())
    }

    /// The bytes.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

/// Reads a variant's parameters, with a typed error when they run out.
#[derive(Debug)]
pub struct ParamReader<'a> {
    bytes: &'a [u8],
}

impl<'a> ParamReader<'a> {
    /// Reads from `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let Some((head, rest)) = self.bytes.split_first_chunk::<N>() else {
            return Err(Error::format(FORMAT, FormatProblem::ParamsTruncated));
        };
        self.bytes = rest;
        Ok(*head)
    }

    /// The next `u8`.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }

    /// The next `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    /// The next `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    /// The next `f64`.
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// Whether every parameter byte was read (for optional trailing parameters).
    pub fn is_at_end(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Checks that every parameter byte was read.
    pub fn finish(self) -> Result<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(Error::format(
                FORMAT,
                FormatProblem::ParamsTrailing(self.bytes.len() as u64),
            ))
        }
    }
}

/// A filter that has a form in this envelope: its [`Variant`], its parameter bytes and its
/// payload. Every variant implements it, so every variant round-trips with
/// [`to_bytes`](Persist::to_bytes) and [`from_bytes`](Persist::from_bytes).
///
/// ```
/// use bloomery::{BloomFilter, format::native::Persist};
///
/// let mut filter = BloomFilter::with_fpp(1_000, 0.01)?;
/// filter.insert("kept");
/// let bytes = filter.to_bytes();
/// assert_eq!(BloomFilter::from_bytes(&bytes)?, filter);
/// # Ok::<(), bloomery::Error>(())
/// ```
pub trait Persist: Sized {
    /// The variant code written into the header.
    const VARIANT: Variant;

    /// The variant's parameters (see [`ParamWriter`]).
    fn params(&self) -> Vec<u8>;

    /// The payload as pieces in order, borrowed where the filter's memory already holds
    /// them in the stored order.
    fn payload_pieces(&self) -> Vec<Cow<'_, [u8]>>;

    /// The payload bytes: the pieces, concatenated.
    fn payload(&self) -> Vec<u8> {
        self.payload_pieces().concat()
    }

    /// The payload's length in bytes, as [`payload_pieces`](Persist::payload_pieces)
    /// gives it; the variants whose payload is built, not borrowed, count it without
    /// building it.
    fn payload_len(&self) -> u64 {
        self.payload_pieces().iter().map(|piece| piece.len() as u64).sum()
    }

    /// The whole envelope's length in bytes, without building any of it (what a copy or
    /// a file of the filter takes).
    fn envelope_len(&self) -> u64 {
        header_len(self.params().len()) as u64 + self.payload_len()
    }

    /// Rebuilds the filter from checked parameters and payload; every inconsistency is an
    /// error, never a panic.
    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self>;

    /// As [`from_parts`](Persist::from_parts), for parts written in format `version`
    /// (the variants whose parameters changed between versions override it).
    fn from_parts_of_version(version: u16, params: &[u8], payload: &[u8]) -> Result<Self> {
        let _ = version;
        Self::from_parts(params, payload)
    }

    /// The whole envelope.
    fn to_bytes(&self) -> Vec<u8> {
        encode(Self::VARIANT, &self.params(), &self.payload())
    }

    /// The envelope as borrowed pieces, for streaming it without a copy (see [`Envelope`]).
    fn envelope(&self) -> Envelope<'_> {
        Envelope::new(Self::VARIANT, self.params(), self.payload_pieces())
    }

    /// Reads a whole envelope of this variant, checking both checksums.
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (header, payload) = decode(bytes)?;
        expect_variant(&header, Self::VARIANT)?;
        Self::from_parts_of_version(header.version, &header.params, payload)
    }
}

/// 64-bit words as little-endian bytes (the payload of every bit-array variant).
pub fn words_to_le_bytes(words: &[u64]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(words.len() * 8);
    for word in words {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes
}

/// 64-bit words as their little-endian bytes: borrowed on a little-endian machine, where
/// memory already holds them that way, copied otherwise.
pub fn words_as_le_bytes(words: &[u64]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        // SAFETY: the bytes of initialised u64s are initialised; u8 has alignment 1; the
        // length is the same memory's size in bytes, and the borrow keeps `words` alive.
        Cow::Borrowed(unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), size_of_val(words)) })
    } else {
        Cow::Owned(words_to_le_bytes(words))
    }
}

/// Little-endian bytes back to 64-bit words; the length must be a multiple of 8.
///
/// The readers do not use it: they write the words straight into the filter's array
/// ([`BitVec::try_from_le_bytes`](crate::bits::BitVec)), since a `Vec` of them beside the array
/// would double a load's memory.
pub fn words_from_le_bytes(bytes: &[u8]) -> Result<Vec<u64>> {
    check_whole_words(bytes)?;
    Ok(bytes
        .chunks_exact(8)
        .map(|chunk| u64::from_le_bytes(chunk.try_into().expect("chunks of 8")))
        .collect())
}

/// An error unless `bytes` is a whole number of 64-bit words.
pub(crate) fn check_whole_words(bytes: &[u8]) -> Result<()> {
    if bytes.len().is_multiple_of(8) {
        Ok(())
    } else {
        Err(Error::format(
            FORMAT,
            FormatProblem::PayloadNotWords(bytes.len() as u64),
        ))
    }
}

/// Takes `num_words` little-endian words off the front of `payload`; returns them and the
/// rest. An error, without allocating, when the payload is shorter than that.
pub fn split_words(payload: &[u8], num_words: u64) -> Result<(Vec<u64>, &[u8])> {
    let (words, rest) = split_word_bytes(payload, num_words)?;
    Ok((words_from_le_bytes(words)?, rest))
}

/// As [`split_words`], but the words' bytes as they are (`8 * num_words` of them), for a
/// reader to write into the filter's array without a copy in between.
pub(crate) fn split_word_bytes(payload: &[u8], num_words: u64) -> Result<(&[u8], &[u8])> {
    let Some(bytes) = num_words
        .checked_mul(8)
        .filter(|&bytes| bytes <= payload.len() as u64)
    else {
        return Err(crate::error::inconsistent(format!(
            "{num_words} words overrun the payload"
        )));
    };
    Ok(payload.split_at(bytes as usize))
}

/// The payload as 64-bit words in place, without copying: `Some` when the bytes are 8-byte
/// aligned and the machine is little-endian (the stored order), `None` otherwise; an error
/// when the length is not a whole number of words.
pub fn words_in_place(bytes: &[u8]) -> Result<Option<&[u64]>> {
    if !bytes.len().is_multiple_of(8) {
        return Err(Error::format(
            FORMAT,
            FormatProblem::PayloadNotWords(bytes.len() as u64),
        ));
    }
    if cfg!(target_endian = "big") {
        return Ok(None);
    }
    // SAFETY: every bit pattern is a valid u64; align_to only yields a middle part that is
    // correctly aligned, and we accept it only when nothing is left over on either side.
    let (head, words, tail) = unsafe { bytes.align_to::<u64>() };
    Ok((head.is_empty() && tail.is_empty()).then_some(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(result: Result<(Header, &[u8])>) -> FormatProblem {
        match result {
            Err(Error::Format { problem, .. }) => problem,
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    fn sample() -> Vec<u8> {
        let params = ParamWriter::new().u32(7).f64(0.01).finish();
        encode(Variant::Classic, &params, &words_to_le_bytes(&[1, 2, 3]))
    }

    #[test]
    fn an_envelope_round_trips_with_an_aligned_payload() {
        let bytes = sample();
        let (header, payload) = decode(&bytes).unwrap();
        assert_eq!(header.variant, Variant::Classic);
        assert_eq!(header.payload_offset % PAYLOAD_ALIGN, 0);
        assert_eq!(words_from_le_bytes(payload).unwrap(), [1, 2, 3]);
        let mut params = ParamReader::new(&header.params);
        assert_eq!((params.u32().unwrap(), params.f64().unwrap()), (7, 0.01));
        params.finish().unwrap();
    }

    /// Every range of every variant's envelope, read piece by piece, equals the same bytes
    /// of `to_bytes`, and `write_to` writes exactly `to_bytes`.
    fn check_envelope<F: Persist>(filter: &F) {
        let bytes = filter.to_bytes();
        let envelope = filter.envelope();
        assert_eq!(envelope.len(), bytes.len() as u64);
        let mut written = Vec::new();
        envelope.write_to(&mut written).unwrap();
        assert_eq!(written, bytes);
        for chunk in [1, 7, 64, 100, 4096, bytes.len() + 1] {
            let mut joined = Vec::new();
            for start in (0..bytes.len()).step_by(chunk) {
                let range = start as u64..(start + chunk) as u64;
                let piece = envelope.read_range(range);
                assert_eq!(piece, bytes[start..bytes.len().min(start + chunk)]);
                joined.extend(piece);
            }
            assert_eq!(joined, bytes);
        }
        assert!(
            envelope
                .read_range(envelope.len()..envelope.len() + 10)
                .is_empty()
        );
    }

    #[test]
    fn envelopes_stream_the_same_bytes_as_to_bytes() {
        use crate::{BlockedBloomFilter, BloomFilter, CountingBloomFilter, ScalableBloomFilter};
        let mut classic = BloomFilter::with_fpp(2_000, 0.01).unwrap();
        let mut blocked = BlockedBloomFilter::with_fpp(2_000, 0.01).unwrap();
        let mut counting = CountingBloomFilter::with_fpp(2_000, 0.01).unwrap();
        let mut scalable = ScalableBloomFilter::new(100, 0.01).unwrap();
        for item in 0..1_000u64 {
            classic.insert(&item);
            blocked.insert(&item);
            counting.insert(&item);
            scalable.insert(&item).unwrap();
        }
        assert!(scalable.num_filters() > 1);
        check_envelope(&classic);
        check_envelope(&blocked);
        check_envelope(&counting);
        check_envelope(&scalable);
    }

    #[test]
    fn every_header_byte_is_covered_by_a_check() {
        let bytes = sample();
        let header_len = decode(&bytes).unwrap().0.payload_offset;
        for index in 0..header_len {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x10;
            assert!(decode(&damaged).is_err(), "flipping byte {index} went unnoticed");
        }
    }

    #[test]
    fn a_flipped_payload_bit_fails_the_payload_checksum() {
        let mut bytes = sample();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(problem(decode(&bytes)), FormatProblem::PayloadChecksum);
    }

    #[test]
    fn wrong_magic_future_version_truncation_and_trailing_bytes_are_named() {
        let bytes = sample();
        let mut foreign = bytes.clone();
        foreign[0] = b'X';
        assert_eq!(problem(decode(&foreign)), FormatProblem::BadMagic);
        let mut future = bytes.clone();
        future[8] = 3;
        assert_eq!(problem(decode(&future)), FormatProblem::UnsupportedVersion(3));
        assert!(matches!(
            problem(decode(&bytes[..bytes.len() - 1])),
            FormatProblem::Truncated { .. }
        ));
        assert!(matches!(
            problem(decode(&bytes[..20])),
            FormatProblem::Truncated { .. }
        ));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            problem(decode(&longer)),
            FormatProblem::TrailingBytes { extra: 1, .. }
        ));
    }

    #[test]
    fn an_unsealed_header_is_read_with_its_mark_and_its_payload_not_trusted() {
        let bytes = sample();
        let header = Header::parse(&bytes).unwrap();
        assert!(!header.unsealed);
        // Sealed again with the same checksum: the same bytes.
        assert_eq!(
            header.to_bytes(header.payload_checksum, false),
            bytes[..header.payload_offset]
        );
        let unsealed_header = header.to_bytes(header.payload_checksum, true);
        assert_eq!(unsealed_header[9], 0x80);
        let mut unsealed = bytes.clone();
        unsealed[..header.payload_offset].copy_from_slice(&unsealed_header);
        let parsed = Header::parse(&unsealed).unwrap();
        assert!(parsed.unsealed);
        assert_eq!(parsed.version, 2);
        assert_eq!(
            Header {
                unsealed: false,
                ..parsed.clone()
            },
            header
        );
        assert_eq!(problem(decode(&unsealed)), FormatProblem::Unsealed);
        assert!(parsed.verify_payload(&unsealed[parsed.payload_offset..]).is_err());
        // The mark is covered by the header checksum: clearing it by hand is damage.
        let mut cleared = unsealed.clone();
        cleared[9] = 0;
        assert_eq!(problem(decode(&cleared)), FormatProblem::HeaderChecksum);
        // Version 1 has no mark.
        let mut version_1 = unsealed_header.clone();
        version_1[8] = 1;
        let len = version_1.len();
        let checksum = xxh3_64(&version_1[..len - 8]);
        version_1[len - 8..].copy_from_slice(&checksum.to_le_bytes());
        assert_eq!(
            Header::parse(&version_1).err().map(|error| error.to_string()),
            Some(Error::format(FORMAT, FormatProblem::UnsupportedVersion(0x8001)).to_string())
        );
    }

    #[test]
    fn the_unsealed_mark_is_refused_as_damage_on_a_variant_never_updated_in_place() {
        // Files of the other variants are always written whole: the mark on one was
        // read as "unsealed, run `bloomery seal`", which refused it the same way.
        for variant in Variant::ALL {
            let header = encode_header_sealed_or_not(variant, &[0; 8], 64, 0, true);
            let parsed = Header::parse(&header);
            if crate::in_place::updates_in_place(variant) {
                assert!(parsed.expect("an unsealed header").unsealed, "{variant:?}");
            } else {
                let error = parsed.expect_err("the mark refused").to_string();
                assert!(error.contains("the unsealed mark on a"), "{variant:?}: {error}");
                assert!(!error.contains("seal it"), "{variant:?}: {error}");
            }
        }
    }

    #[test]
    fn reading_past_the_parameters_is_an_error() {
        let mut reader = ParamReader::new(&[1, 2, 3]);
        assert!(reader.u32().is_err());
        let mut reader = ParamReader::new(&[1, 2, 3, 4, 5]);
        reader.u32().unwrap();
        assert!(reader.finish().is_err());
    }
}
