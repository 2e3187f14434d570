//! Guava's serialized form: exactly the bytes of `BloomFilter.writeTo`, read back as
//! `BloomFilter.readFrom` does, so a filter moves between Java and Rust unchanged.
//!
//! ```text
//! offset  size      field
//! 0       1         strategy ordinal: 1 = MURMUR128_MITZ_64 (0, MITZ_32, is not supported)
//! 1       1         number of hash functions, unsigned (1..=255)
//! 2       4         number of 64-bit words, big-endian signed int (1..=2^31-1)
//! 6       8·words   the words, each big-endian
//! ```
//!
//! A 1% filter for 10^7 items is 11,981,334 bytes (6 + 8 · 1,497,666). Reading is
//! defensive: the header is checked before anything is allocated, and the words are
//! allocated as they arrive, never more than the input holds (a 6-byte header claiming
//! 2^31 words costs nothing).

use std::io::{self, Read, Write};

use crate::bits::BitVec;
use crate::classic::BloomFilter;
use crate::error::{Error, FormatProblem, Result};
use crate::sizing::MAX_NUM_WORDS;

const FORMAT: &str = "Guava BloomFilter";
const HEADER_LEN: usize = 6;
/// Guava's `BloomFilterStrategies.MURMUR128_MITZ_64.ordinal()`.
const MURMUR128_MITZ_64: u8 = 1;
/// How many words a streaming read reserves ahead of the data that has arrived.
const READ_CHUNK_WORDS: usize = 8 * 1024;

/// A checked Guava header.
struct Header {
    num_hashes: u32,
    num_words: usize,
}

impl Header {
    fn parse(bytes: &[u8; HEADER_LEN]) -> Result<Self> {
        if bytes[0] != MURMUR128_MITZ_64 {
            return Err(Error::format(FORMAT, FormatProblem::UnknownStrategy(bytes[0])));
        }
        if bytes[1] == 0 {
            return Err(Error::format(FORMAT, FormatProblem::ZeroHashes));
        }
        let num_words = i32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
        if num_words <= 0 || num_words as u64 > MAX_NUM_WORDS {
            return Err(Error::format(FORMAT, FormatProblem::WordCount(num_words.into())));
        }
        Ok(Self {
            num_hashes: bytes[1].into(),
            num_words: num_words as usize,
        })
    }

    fn total_len(&self) -> u64 {
        HEADER_LEN as u64 + 8 * self.num_words as u64
    }
}

impl BloomFilter {
    /// Writes the filter as Guava's `BloomFilter.writeTo` does.
    ///
    /// ```
    /// use bloomery::BloomFilter;
    ///
    /// let mut filter = BloomFilter::with_fpp(100, 0.03)?;
    /// filter.insert("hello");
    /// let mut bytes = Vec::new();
    /// filter.write_guava(&mut bytes)?;
    /// assert_eq!(bytes.len(), 6 + 8 * 12);
    /// assert_eq!(BloomFilter::from_guava_bytes(&bytes)?, filter);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn write_guava<W: Write>(&self, mut out: W) -> io::Result<()> {
        out.write_all(&self.guava_header())?;
        // Convert in chunks: one write call per 8 KiB rather than per word.
        let mut buffer = Vec::with_capacity(8 * 1024);
        for chunk in self.words().chunks(1024) {
            buffer.clear();
            for word in chunk {
                buffer.extend_from_slice(&word.to_be_bytes());
            }
            out.write_all(&buffer)?;
        }
        Ok(())
    }

    /// The filter as Guava's `writeTo` bytes.
    pub fn to_guava_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_LEN + 8 * self.words().len());
        bytes.extend_from_slice(&self.guava_header());
        for word in self.words() {
            bytes.extend_from_slice(&word.to_be_bytes());
        }
        bytes
    }

    /// Reads a filter from exactly the bytes of Guava's `writeTo`: the slice must hold the
    /// header and the words it announces, and nothing more.
    ///
    /// ```
    /// use bloomery::{BloomFilter, Error};
    ///
    /// // Strategy 1, 3 hashes, 1 word.
    /// let mut bytes = vec![1, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    /// assert_eq!(BloomFilter::from_guava_bytes(&bytes)?.num_bits(), 64);
    ///
    /// bytes.push(0);
    /// let err = BloomFilter::from_guava_bytes(&bytes).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid Guava BloomFilter data: 1 trailing bytes after the 14-byte filter");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_guava_bytes(bytes: &[u8]) -> Result<Self> {
        let Some((header, payload)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            return Err(truncated(HEADER_LEN as u64, bytes.len() as u64));
        };
        let header = Header::parse(header)?;
        super::check_exact_len(FORMAT, header.total_len(), bytes.len() as u64)?;
        // Straight into the filter's array, with no `Vec` of the words beside it; the
        // length check above makes the payload exactly the words.
        BloomFilter::over(BitVec::try_from_be_bytes(payload)?, header.num_hashes)
    }

    /// Reads one filter from a stream as Guava's `readFrom` does, leaving the reader just
    /// past it (so anything after it is not an error here, unlike
    /// [`from_guava_bytes`](Self::from_guava_bytes)). Memory grows with the data that
    /// actually arrives, not with the word count the header claims.
    ///
    /// ```
    /// use bloomery::BloomFilter;
    ///
    /// let filter = BloomFilter::with_fpp(100, 0.03)?;
    /// let bytes = filter.to_guava_bytes();
    /// assert_eq!(BloomFilter::read_guava(&bytes[..])?, filter);
    /// // A header that claims 2^31 - 1 words over 8 bytes of data is a clean error.
    /// let lie = [1, 3, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0];
    /// assert!(BloomFilter::read_guava(&lie[..]).is_err());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn read_guava<R: Read>(mut input: R) -> Result<Self> {
        let mut header_bytes = [0u8; HEADER_LEN];
        let got = read_up_to(&mut input, &mut header_bytes)?;
        if got < HEADER_LEN {
            return Err(truncated(HEADER_LEN as u64, got as u64));
        }
        let header = Header::parse(&header_bytes)?;
        let mut words = Vec::with_capacity(header.num_words.min(READ_CHUNK_WORDS));
        let mut chunk = vec![0u8; 8 * READ_CHUNK_WORDS];
        while words.len() < header.num_words {
            let want = (header.num_words - words.len()).min(READ_CHUNK_WORDS);
            let buffer = &mut chunk[..8 * want];
            let got = read_up_to(&mut input, buffer)?;
            words.extend(
                buffer[..got - got % 8]
                    .chunks_exact(8)
                    .map(|bytes| u64::from_be_bytes(bytes.try_into().expect("chunks of 8"))),
            );
            if got < buffer.len() {
                let actual = HEADER_LEN as u64 + 8 * words.len() as u64 + (got % 8) as u64;
                return Err(truncated(header.total_len(), actual));
            }
        }
        BloomFilter::from_words(words, header.num_hashes)
    }

    fn guava_header(&self) -> [u8; HEADER_LEN] {
        // Both fit by construction: num_hashes <= 255 and words <= 2^31 - 1.
        let num_hashes = u8::try_from(self.num_hashes()).expect("num_hashes is checked to be <= 255");
        let num_words = i32::try_from(self.words().len()).expect("word count is checked to fit an i32");
        let mut header = [0u8; HEADER_LEN];
        header[0] = MURMUR128_MITZ_64;
        header[1] = num_hashes;
        header[2..].copy_from_slice(&num_words.to_be_bytes());
        header
    }
}

fn truncated(expected: u64, actual: u64) -> Error {
    Error::format(FORMAT, FormatProblem::Truncated { expected, actual })
}

/// Fills `buffer` as far as the input goes; returns how many bytes were read.
fn read_up_to<R: Read>(input: &mut R, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match input.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(result: Result<BloomFilter>) -> FormatProblem {
        match result {
            Err(Error::Format { problem, .. }) => problem,
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    fn both_readers(bytes: &[u8]) -> [FormatProblem; 2] {
        [
            problem(BloomFilter::from_guava_bytes(bytes)),
            problem(BloomFilter::read_guava(bytes)),
        ]
    }

    #[test]
    fn an_unknown_strategy_is_rejected() {
        let bytes = [0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            both_readers(&bytes),
            [
                FormatProblem::UnknownStrategy(0),
                FormatProblem::UnknownStrategy(0)
            ]
        );
    }

    #[test]
    fn zero_hashes_are_rejected() {
        let bytes = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            both_readers(&bytes),
            [FormatProblem::ZeroHashes, FormatProblem::ZeroHashes]
        );
    }

    #[test]
    fn zero_and_negative_word_counts_are_rejected() {
        assert_eq!(both_readers(&[1, 3, 0, 0, 0, 0])[0], FormatProblem::WordCount(0));
        assert_eq!(
            both_readers(&[1, 3, 0xff, 0xff, 0xff, 0xff])[1],
            FormatProblem::WordCount(-1)
        );
    }

    #[test]
    fn a_short_header_is_truncated() {
        let expected = FormatProblem::Truncated {
            expected: 6,
            actual: 3,
        };
        assert_eq!(both_readers(&[1, 3, 0]), [expected.clone(), expected]);
    }

    #[test]
    fn a_short_payload_is_truncated() {
        // Two words announced, one and a half present.
        let mut bytes = vec![1, 3, 0, 0, 0, 2];
        bytes.extend_from_slice(&[0xaa; 12]);
        let expected = FormatProblem::Truncated {
            expected: 22,
            actual: 18,
        };
        assert_eq!(both_readers(&bytes), [expected.clone(), expected]);
    }

    #[test]
    fn the_stream_reader_leaves_what_follows_the_filter() {
        let filter = BloomFilter::with_fpp(10, 0.1).unwrap();
        let mut bytes = filter.to_guava_bytes();
        bytes.extend_from_slice(b"next");
        let mut reader = &bytes[..];
        assert_eq!(BloomFilter::read_guava(&mut reader).unwrap(), filter);
        assert_eq!(reader, b"next");
    }

    #[test]
    fn write_guava_and_to_guava_bytes_agree() {
        let mut filter = BloomFilter::with_fpp(5_000, 0.01).unwrap();
        for i in 0..5_000i64 {
            filter.insert(&i);
        }
        let mut written = Vec::new();
        filter.write_guava(&mut written).unwrap();
        assert_eq!(written, filter.to_guava_bytes());
    }
}
