//! An envelope sent in numbered pieces (Redis's `BF.SCANDUMP`/`BF.LOADCHUNK`, or any
//! transport that caps a message's size), reassembled with every check made as early as
//! possible: the first piece must hold a valid header, which announces the total length;
//! each further piece must carry the next number and be full-sized except the last; the
//! bytes kept never exceed what the header announced, itself capped by the caller. A
//! complete envelope is then read like any other ([`crate::any::open`] checks both
//! checksums and every parameter).
//!
//! ```
//! use bloomery::format::pieces::{Assembled, PieceAssembler};
//! use bloomery::format::native::Persist;
//!
//! let mut filter = bloomery::BloomFilter::with_fpp(10_000, 0.01)?;
//! filter.insert("kept");
//! let bytes = filter.to_bytes();
//! let mut pieces = bytes.chunks(4096);
//! let mut state = PieceAssembler::start(pieces.next().unwrap(), 4096, 1 << 30)?;
//! for (number, piece) in (2..).zip(pieces) {
//!     match state {
//!         Assembled::NeedMore(assembler) => state = assembler.push(number, piece)?,
//!         Assembled::Complete(_) => unreachable!("more pieces follow"),
//!     }
//! }
//! let Assembled::Complete(whole) = state else { panic!("incomplete") };
//! assert!(bloomery::any::open(&whole)?.contains(b"kept"));
//! # Ok::<(), bloomery::Error>(())
//! ```

use crate::error::{Error, Result, inconsistent};
use crate::format::native::Header;

/// Where a reassembly stands after a piece.
#[derive(Debug)]
pub enum Assembled {
    /// Every byte the header announced has arrived: the whole envelope.
    Complete(Vec<u8>),
    /// More pieces are needed.
    NeedMore(PieceAssembler),
}

/// Appends `piece` to `bytes`, which hold at most `total` bytes once every piece is in
/// (the caller checked `piece` fits): growing by doubling, as a `Vec` does, but never
/// past `total` (an envelope just over a power of two took nearly twice its size for a
/// moment, 2 GiB for one at a 1 GiB cap), and refused with [`Error::OutOfMemory`] where
/// the system will not give the room (a failed allocation would abort the process: a
/// Redis server loading pieces).
///
/// ```
/// let mut bytes = Vec::new();
/// for _ in 0..3 {
///     bloomery::format::pieces::append_within(&mut bytes, &[7; 400], 1_200)?;
/// }
/// assert_eq!(bytes.len(), 1_200);
/// assert_eq!(bytes.capacity(), 1_200); // doubling would have made 1,600
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn append_within(bytes: &mut Vec<u8>, piece: &[u8], total: u64) -> Result<()> {
    let needed = bytes.len().saturating_add(piece.len());
    if needed > bytes.capacity() {
        let total = usize::try_from(total).unwrap_or(usize::MAX);
        let room = bytes.capacity().saturating_mul(2).min(total).max(needed);
        bytes
            .try_reserve_exact(room - bytes.len())
            .map_err(|_| Error::OutOfMemory { bytes: room as u64 })?;
    }
    bytes.extend_from_slice(piece);
    Ok(())
}

/// An envelope being reassembled from numbered pieces (the first is number 1).
#[derive(Debug)]
pub struct PieceAssembler {
    bytes: Vec<u8>,
    total: u64,
    next: u64,
    piece_len: usize,
}

impl PieceAssembler {
    /// Starts from piece 1, which must begin with a valid header announcing at most
    /// `max_total` bytes; every piece but the last must be exactly `piece_len` bytes.
    pub fn start(first: &[u8], piece_len: usize, max_total: u64) -> Result<Assembled> {
        let header = Header::parse(first)?;
        let total = header.total_len();
        if total > max_total {
            return Err(inconsistent(format!(
                "a dump of {total} bytes is more than the {max_total} allowed"
            )));
        }
        Self {
            bytes: Vec::new(),
            total,
            next: 1,
            piece_len,
        }
        .push(1, first)
    }

    /// Adds piece `number`, which must be the next one.
    pub fn push(mut self, number: u64, piece: &[u8]) -> Result<Assembled> {
        if number != self.next {
            return Err(inconsistent(format!(
                "piece {number} arrived where piece {} was expected",
                self.next
            )));
        }
        let received = self.bytes.len() as u64 + piece.len() as u64;
        if received > self.total {
            return Err(inconsistent(format!(
                "pieces hold more than the {} bytes the header announced",
                self.total
            )));
        }
        let last = received == self.total;
        let left = self.total - self.bytes.len() as u64;
        if !last && left <= self.piece_len as u64 {
            // Short of the last piece's length, not of a middle piece's.
            return Err(inconsistent(format!(
                "piece {number} has {} bytes, and as the last piece it must have the {left} \
                 left of the {} bytes the header announced",
                piece.len(),
                self.total
            )));
        }
        if !last && piece.len() != self.piece_len {
            return Err(inconsistent(format!(
                "piece {number} has {} bytes; every piece but the last has {}",
                piece.len(),
                self.piece_len
            )));
        }
        append_within(&mut self.bytes, piece, self.total)?;
        self.next += 1;
        Ok(if last {
            Assembled::Complete(self.bytes)
        } else {
            Assembled::NeedMore(self)
        })
    }

    /// The number the next piece must carry.
    pub fn next_number(&self) -> u64 {
        self.next
    }

    /// Bytes received so far.
    pub fn received(&self) -> usize {
        self.bytes.len()
    }

    /// The pieces received so far, concatenated (each one `piece_len` bytes): what a caller
    /// saves to resume the reassembly elsewhere, by starting again with them (the Redis
    /// module saves a load in progress in RDB and AOF this way).
    pub fn received_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::native::Persist;

    fn envelope() -> Vec<u8> {
        let mut filter = crate::BloomFilter::with_fpp(5_000, 0.01).unwrap();
        filter.insert("x");
        filter.to_bytes()
    }

    fn assemble(bytes: &[u8], piece_len: usize, numbers: impl Iterator<Item = u64>) -> Result<Assembled> {
        let mut pieces = bytes.chunks(piece_len);
        let mut state = PieceAssembler::start(pieces.next().unwrap(), piece_len, 1 << 20)?;
        for (number, piece) in numbers.zip(pieces) {
            state = match state {
                Assembled::NeedMore(assembler) => assembler.push(number, piece)?,
                complete => return Ok(complete),
            };
        }
        Ok(state)
    }

    #[test]
    fn pieces_in_order_give_back_the_envelope() {
        let bytes = envelope();
        for piece_len in [64, 1000, bytes.len(), bytes.len() + 1] {
            match assemble(&bytes, piece_len, 2..).unwrap() {
                Assembled::Complete(whole) => assert_eq!(whole, bytes),
                Assembled::NeedMore(_) => panic!("incomplete at {piece_len}"),
            }
        }
    }

    #[test]
    fn a_reassembly_resumes_from_its_received_bytes() {
        let bytes = envelope();
        let Assembled::NeedMore(assembler) = PieceAssembler::start(&bytes[..100], 100, 1 << 20).unwrap()
        else {
            panic!("more to come");
        };
        let Assembled::NeedMore(assembler) = assembler.push(2, &bytes[100..200]).unwrap() else {
            panic!("more to come");
        };
        assert_eq!(assembler.received_bytes(), &bytes[..200]);
        let saved = assembler.received_bytes().to_vec();
        let resumed = assemble(&[&saved[..], &bytes[200..]].concat(), 100, 2..).unwrap();
        assert!(matches!(resumed, Assembled::Complete(whole) if whole == bytes));
    }

    #[test]
    fn a_skipped_short_or_excess_piece_is_an_error() {
        let bytes = envelope();
        assert!(assemble(&bytes, 1000, [2, 4].into_iter()).is_err());
        let Assembled::NeedMore(assembler) = PieceAssembler::start(&bytes[..1000], 1000, 1 << 20).unwrap()
        else {
            panic!("more to come");
        };
        let message = assembler.push(2, &bytes[1000..1500]).unwrap_err().to_string();
        assert!(
            message.contains("every piece but the last has 1000"),
            "a short middle piece: {message}"
        );
        // A short last piece is said as such, with the length it must have.
        let Assembled::NeedMore(before_last) =
            assemble(&bytes[..bytes.len() / 1000 * 1000], 1000, 2..).unwrap()
        else {
            panic!("more to come");
        };
        let left = bytes.len() % 1000;
        assert!(left > 1, "{} bytes", bytes.len());
        let next = before_last.next_number();
        let message = before_last
            .push(next, &bytes[bytes.len() - left..bytes.len() - 1])
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(&format!(
                "as the last piece it must have the {left} left of the {}",
                bytes.len()
            )),
            "{message}"
        );
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0; 10]);
        assert!(assemble(&longer, 1000, 2..).is_err(), "more bytes than announced");
        assert!(
            PieceAssembler::start(&bytes[..1000], 1000, 500).is_err(),
            "over the cap"
        );
        assert!(PieceAssembler::start(b"garbage", 1000, 1 << 20).is_err());
    }
}
