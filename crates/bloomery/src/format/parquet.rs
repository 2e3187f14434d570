//! Parquet's bloom-filter bytes: what a Parquet file holds at a column chunk's
//! `bloom_filter_offset` (and, since format 2.10, `bloom_filter_length` bytes long): a
//! Thrift `BloomFilterHeader` in the compact protocol, then the split-block bitset
//! (parquet-format, BloomFilter.md, "File Format"). The bitset is read and written by
//! [`SplitBlockBloomFilter`](crate::SplitBlockBloomFilter); this module is the header.
//!
//! ```text
//! BloomFilterHeader {
//!   1: required i32 numBytes                       the bitset's length
//!   2: required BloomFilterAlgorithm algorithm     union; field 1, BLOCK (an empty struct)
//!   3: required BloomFilterHash hash               union; field 1, XXHASH (empty)
//!   4: required BloomFilterCompression compression union; field 1, UNCOMPRESSED (empty)
//! }
//! ```
//!
//! Written, that is 14 bytes plus the varint of `numBytes` (15 to 19 bytes in all):
//! `15 <zigzag varint numBytes> 1c 1c 00 00 1c 1c 00 00 1c 1c 00 00 00`. The reader takes
//! any valid compact encoding (long-form field headers, fields in any order, unknown
//! fields skipped, as Thrift readers do), and refuses other algorithms, hashes or
//! compressions by name. Nothing is allocated from what the bytes claim.

use crate::error::{Error, FormatProblem, Result};

const FORMAT: &str = "Parquet bloom filter";

/// Thrift compact-protocol type codes (Thrift's `TCompactProtocol`).
mod compact {
    pub const BOOLEAN_TRUE: u8 = 1;
    pub const BOOLEAN_FALSE: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const I16: u8 = 4;
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const SET: u8 = 10;
    pub const MAP: u8 = 11;
    pub const STRUCT: u8 = 12;
}

/// Nesting deeper than this is refused (the header nests two levels; a crafted input
/// must not recurse without bound).
const MAX_DEPTH: u32 = 32;

/// The `BloomFilterHeader` for a bitset of `num_bytes` bytes (a multiple of 32 below
/// 2^31), as Parquet's writers encode it.
///
/// ```
/// use bloomery::format::parquet::{encode_header, read_header};
///
/// let header = encode_header(1024);
/// assert_eq!(header, [0x15, 0x80, 0x10, 0x1c, 0x1c, 0, 0, 0x1c, 0x1c, 0, 0, 0x1c, 0x1c, 0, 0, 0]);
/// assert_eq!(read_header(&header)?, (header.len(), 1024));
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn encode_header(num_bytes: u32) -> Vec<u8> {
    assert!(num_bytes <= i32::MAX as u32, "numBytes is a Thrift i32");
    // Field 1, delta 1, type i32.
    let mut header = vec![0x10 | compact::I32];
    // Zigzag of a non-negative i32 is twice it; then a base-128 varint, low groups first.
    let mut zigzag = u64::from(num_bytes) << 1;
    loop {
        let group = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            header.push(group);
            break;
        }
        header.push(group | 0x80);
    }
    // Fields 2, 3, 4 (each delta 1, a struct): a union whose field 1 (delta 1, a struct)
    // is an empty struct (stop), then the union's stop.
    for _ in 0..3 {
        header.extend_from_slice(&[0x10 | compact::STRUCT, 0x10 | compact::STRUCT, 0, 0]);
    }
    header.push(0); // the header's stop
    header
}

/// Reads the `BloomFilterHeader` at the start of `bytes` (which may go on with the bitset
/// and more); returns the header's length and `numBytes`, the bitset's length. Refuses an
/// algorithm other than BLOCK, a hash other than XXHASH, a compression other than
/// UNCOMPRESSED, a missing field, and a `numBytes` that is negative or not a multiple of 32.
pub fn read_header(bytes: &[u8]) -> Result<(usize, u64)> {
    let mut reader = Reader { bytes, position: 0 };
    let mut num_bytes = None;
    let mut seen = [false; 3];
    reader.fields(0, |reader, id, kind| {
        match (id, kind) {
            (1, compact::I32) => num_bytes = Some(reader.i32()?),
            (2..=4, compact::STRUCT) => {
                let field = (id - 2) as usize;
                let known = ["algorithm BLOCK", "hash XXHASH", "compression UNCOMPRESSED"][field];
                let mut member = None;
                reader.fields(1, |reader, member_id, member_kind| {
                    member = Some(member_id);
                    reader.skip(member_kind, 2)
                })?;
                if member != Some(1) {
                    return Err(problem(format!(
                        "{} is union member {member:?}; bloomery reads only {known} (member 1)",
                        ["the algorithm", "the hash", "the compression"][field]
                    )));
                }
                seen[field] = true;
            }
            _ => reader.skip(kind, 1)?,
        }
        Ok(())
    })?;
    let Some(num_bytes) = num_bytes else {
        return Err(problem("the header has no numBytes (field 1)".into()));
    };
    if let Some(missing) = seen.iter().position(|&seen| !seen) {
        let name = ["algorithm (field 2)", "hash (field 3)", "compression (field 4)"][missing];
        return Err(problem(format!("the header has no {name}")));
    }
    if num_bytes < 32 || num_bytes % 32 != 0 {
        return Err(problem(format!(
            "numBytes is {num_bytes}: a bitset is one or more 32-byte blocks"
        )));
    }
    Ok((reader.position, num_bytes as u64))
}

/// The bitset of a whole Parquet bloom filter: the header, then exactly `numBytes` bytes.
///
/// ```
/// use bloomery::format::parquet::{bitset, encode_header};
///
/// let mut bytes = encode_header(32);
/// bytes.extend_from_slice(&[0xff; 32]);
/// assert_eq!(bitset(&bytes)?, &[0xff; 32]);
/// assert!(bitset(&bytes[..bytes.len() - 1]).is_err());
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn bitset(bytes: &[u8]) -> Result<&[u8]> {
    let (header_len, num_bytes) = read_header(bytes)?;
    super::check_exact_len(FORMAT, header_len as u64 + num_bytes, bytes.len() as u64)?;
    Ok(&bytes[header_len..])
}

fn problem(message: String) -> Error {
    Error::format(FORMAT, FormatProblem::Inconsistent(message))
}

fn truncated(bytes: &[u8]) -> Error {
    problem(format!("the Thrift header ends early ({} bytes)", bytes.len()))
}

/// A cursor over Thrift compact-protocol bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8> {
        let byte = *self
            .bytes
            .get(self.position)
            .ok_or_else(|| truncated(self.bytes))?;
        self.position += 1;
        Ok(byte)
    }

    /// An unsigned base-128 varint of at most 10 bytes.
    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(problem("a Thrift varint is longer than 10 bytes".into()))
    }

    fn zigzag(&mut self) -> Result<i64> {
        let value = self.varint()?;
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
    }

    fn i32(&mut self) -> Result<i64> {
        let value = self.zigzag()?;
        if i32::try_from(value).is_err() {
            return Err(problem(format!("{value} is not a Thrift i32")));
        }
        Ok(value)
    }

    fn advance(&mut self, len: u64) -> Result<()> {
        let remaining = (self.bytes.len() - self.position) as u64;
        if len > remaining {
            return Err(truncated(self.bytes));
        }
        self.position += len as usize;
        Ok(())
    }

    /// Reads a struct's fields up to its stop, calling `field(reader, id, type)` for each
    /// (which must consume the value).
    fn fields(&mut self, depth: u32, mut field: impl FnMut(&mut Self, i64, u8) -> Result<()>) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(problem("the Thrift header nests too deep".into()));
        }
        let mut last_id = 0i64;
        loop {
            let header = self.byte()?;
            if header == 0 {
                return Ok(());
            }
            let kind = header & 0x0f;
            let delta = i64::from(header >> 4);
            let id = if delta == 0 {
                self.zigzag()?
            } else {
                last_id + delta
            };
            // Thrift field ids are i16: checked, so that the next short form's addition
            // cannot overflow after a crafted long-form id.
            if i16::try_from(id).is_err() {
                return Err(problem(format!("a Thrift field id {id} out of the i16 range")));
            }
            last_id = id;
            field(self, id, kind)?;
        }
    }

    /// Skips one value of compact type `kind`.
    fn skip(&mut self, kind: u8, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(problem("the Thrift header nests too deep".into()));
        }
        match kind {
            compact::BOOLEAN_TRUE | compact::BOOLEAN_FALSE => Ok(()),
            compact::BYTE => self.advance(1),
            compact::I16 | compact::I32 | compact::I64 => self.varint().map(drop),
            compact::DOUBLE => self.advance(8),
            compact::BINARY => {
                let len = self.varint()?;
                self.advance(len)
            }
            compact::LIST | compact::SET => {
                let header = self.byte()?;
                let count = match header >> 4 {
                    15 => self.varint()?,
                    short => u64::from(short),
                };
                self.skip_elements(count, &[header & 0x0f], depth)
            }
            compact::MAP => {
                let count = self.varint()?;
                if count == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                self.skip_elements(count, &[types >> 4, types & 0x0f], depth)
            }
            compact::STRUCT => self.fields(depth + 1, |reader, _, kind| reader.skip(kind, depth + 1)),
            other => Err(problem(format!("unknown Thrift compact type {other}"))),
        }
    }

    /// Skips `count` elements, each one value of every type in `kinds` (a map entry is a
    /// key and a value). Every element takes at least one byte except booleans in a list,
    /// which are one byte each in the compact protocol, so `count` above the bytes left is
    /// truncation, found before looping.
    fn skip_elements(&mut self, count: u64, kinds: &[u8], depth: u32) -> Result<()> {
        if count > (self.bytes.len() - self.position) as u64 {
            return Err(truncated(self.bytes));
        }
        for _ in 0..count {
            for &kind in kinds {
                if matches!(kind, compact::BOOLEAN_TRUE | compact::BOOLEAN_FALSE) {
                    // In collections a boolean is a whole byte.
                    self.advance(1)?;
                } else {
                    self.skip(kind, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_for_every_size_class() {
        for num_bytes in [32u32, 64, 1024, 1 << 20, 128 << 20, i32::MAX as u32 / 32 * 32] {
            let header = encode_header(num_bytes);
            assert_eq!(
                read_header(&header).unwrap(),
                (header.len(), u64::from(num_bytes))
            );
            assert!((15..=19).contains(&header.len()), "{}", header.len());
        }
    }

    #[test]
    fn unknown_fields_and_long_form_ids_are_read() {
        // numBytes in long form (type i32, id 1 as a zigzag i16), an unknown field 9
        // (binary "xy"), then the three unions.
        let mut header = vec![compact::I32, 2, 0x80, 0x01, 0x80 | compact::BINARY, 2, b'x', b'y'];
        // Field 2 after field 9 needs a long-form header too (delta would be negative).
        for id in [2u8, 3, 4] {
            header.extend_from_slice(&[compact::STRUCT, id * 2, 0x10 | compact::STRUCT, 0, 0]);
        }
        header.push(0);
        assert_eq!(read_header(&header).unwrap(), (header.len(), 64));
    }

    #[test]
    fn other_algorithms_hashes_and_compressions_are_refused_by_name() {
        let good = encode_header(32);
        // 15 40 | 1c 1c 00 00 | 1c 1c 00 00 | 1c 1c 00 00 | 00: the members at 3, 7, 11.
        for (at, name) in [(3, "algorithm"), (7, "hash"), (11, "compression")] {
            let mut other = good.clone();
            other[at] = 0x20 | compact::STRUCT; // union member 2
            let message = read_header(&other).unwrap_err().to_string();
            assert!(
                message.contains(name) && message.contains("member Some(2)"),
                "{message}"
            );
        }
    }

    #[test]
    fn truncated_damaged_and_odd_sized_headers_are_errors_not_panics() {
        let good = encode_header(64);
        for len in 0..good.len() {
            assert!(read_header(&good[..len]).is_err(), "{len}");
        }
        assert!(read_header(&encode_header(48)).is_err());
        // Every single-byte change either reads as another valid header or is an error.
        for at in 0..good.len() {
            for value in 0..=255u8 {
                let mut damaged = good.clone();
                damaged[at] = value;
                let _ = read_header(&damaged);
            }
        }
        // A list claiming 2^60 elements in a 20-byte input.
        let mut huge = vec![0x10 | compact::LIST, 0xfc];
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(read_header(&huge).is_err());
    }

    #[test]
    fn field_ids_past_i16_are_refused_not_overflowed() {
        // An unknown boolean field whose long-form id is i64::MAX (zigzag 2^64 - 2), then
        // a short-form header one past it: an overflow before ids were checked.
        let mut crafted = vec![compact::BOOLEAN_TRUE];
        crafted.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        crafted.push(0x10 | compact::BOOLEAN_TRUE);
        let message = read_header(&crafted).unwrap_err().to_string();
        assert!(message.contains("i16"), "{message}");
        // The same inside a struct that is skipped, and at the edge of the range.
        let mut nested = vec![0x50 | compact::STRUCT];
        nested.extend_from_slice(&crafted);
        assert!(read_header(&nested).unwrap_err().to_string().contains("i16"));
        for (zigzag, fits) in [(vec![0xfe, 0xff, 0x03], true), (vec![0x80, 0x80, 0x04], false)] {
            // 32767 fits; 32768 does not.
            let mut edge = vec![compact::BOOLEAN_TRUE];
            edge.extend_from_slice(&zigzag);
            let message = read_header(&edge).unwrap_err().to_string();
            assert_eq!(!message.contains("i16"), fits, "{message}");
        }
    }
}
