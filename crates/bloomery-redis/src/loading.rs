//! A `BF.LOADCHUNK` load in progress, held in the keyspace as a value of the module's type
//! (see [`crate::datatype::Stored`]) rather than beside it: it belongs to one database,
//! `DEL`/`FLUSHALL`/`FLUSHDB` free it, RDB, AOF rewrite, replication, `COPY` and
//! `DEBUG DIGEST` carry it like any value, and `BF.*` commands on the key answer an error
//! instead of acting on a filter that is not there yet.
//!
//! The pieces are checked as they come by the library's [`PieceAssembler`] (the header in
//! piece 1, numbering, sizes, the announced length against the cap); the finished envelope
//! is opened with both checksums and every parameter checked, and its memory checked
//! against the cap, before it becomes the key's filter.

use bloomery::any::{self, DynFilter};
use bloomery::format::native::Header;
use bloomery::format::pieces::{Assembled, PieceAssembler};
use bloomery::{Error, FormatProblem};

use crate::datatype::CHUNK_BYTES;
use crate::limits::envelope_limit;

/// Why a load was refused.
#[derive(Debug)]
pub enum LoadError {
    /// The bytes are not (the next piece of) a valid envelope.
    BadData(String),
    /// The system refused the memory the load needs (its pieces or its filter): not the
    /// data's fault, so not "bad data".
    OutOfMemory(String),
    /// The filter would take more than the cap.
    OverCap {
        /// The filter's bytes, or the envelope's where the filter is not built yet.
        bytes: u64,
        /// The cap.
        cap: u64,
    },
}

impl LoadError {
    fn bad(error: impl std::fmt::Display) -> Self {
        // One line: an error reply must not contain line breaks.
        LoadError::BadData(error.to_string().replace(['\r', '\n'], " "))
    }

    /// [`LoadError::OutOfMemory`] for the library's out-of-memory error, else as [`bad`](Self::bad).
    fn of(error: Error) -> Self {
        match error {
            Error::OutOfMemory { .. } => LoadError::OutOfMemory(error.to_string()),
            other => Self::bad(other),
        }
    }

    /// The error reply, RedisBloom's "received bad data" for damaged input.
    pub fn message(&self) -> String {
        match self {
            LoadError::BadData(why) => format!("ERR received bad data: {why}"),
            LoadError::OutOfMemory(why) => {
                format!("ERR {why}; the load was ended (send it again from piece 1 when the memory is there)")
            }
            LoadError::OverCap { bytes, cap } => over_cap_message(*bytes, *cap),
        }
    }
}

/// The refusal of a filter of `bytes` over `cap`: the module's limit per key, or, with no
/// limit configured (`bloomery.max-filter-memory 0`), this machine's memory, which a
/// client's filter is still held to ([`crate::limits::cap_for_command`]): named as what it
/// is, not as a limit of 0 that it is not.
pub fn over_cap_message(bytes: u64, cap: u64) -> String {
    format!("ERR filter would take {bytes} bytes, {}", over_cap(cap))
}

/// What `cap` is, for a refusal of something over it ([`over_cap_message`]).
pub fn over_cap(cap: u64) -> String {
    if crate::limits::max_filter_memory().is_some() {
        format!("over the module's limit of {cap} bytes per key (bloomery.max-filter-memory)")
    } else {
        format!(
            "more than this machine's memory ({cap} bytes; bloomery.max-filter-memory is 0, no limit per key)"
        )
    }
}

/// Where a load stands after a piece.
pub enum Progress {
    /// More pieces are needed.
    Loading(Load),
    /// The filter, whole and checked.
    Complete(Box<dyn DynFilter>),
}

/// A load in progress: the pieces received so far, each [`CHUNK_BYTES`] long.
#[derive(Debug)]
pub struct Load {
    /// Always present between commands: taken only while a piece is pushed (the library's
    /// `push` consumes the assembler) and put back, or the key deleted, before returning.
    assembler: Option<PieceAssembler>,
}

impl Load {
    /// Starts a load from piece 1, whose header must announce an envelope within the cap.
    pub fn start(first: &[u8], cap: Option<u64>) -> Result<Progress, LoadError> {
        let header = Header::parse(first).map_err(LoadError::bad)?;
        check_announced(&header, cap)?;
        let assembled =
            PieceAssembler::start(first, CHUNK_BYTES, envelope_limit(cap)).map_err(LoadError::of)?;
        Self::progress(assembled, cap, false)
    }

    /// Resumes a load saved as its received bytes (RDB, `COPY`); `None` if they are not
    /// the full-sized first pieces of an unfinished envelope within the cap.
    pub fn resume(received: &[u8], cap: Option<u64>) -> Option<Load> {
        let mut pieces = received.chunks(CHUNK_BYTES);
        let first = pieces.next()?;
        let mut state = match Self::start(first, cap).ok()? {
            Progress::Loading(load) => load.assembler?,
            Progress::Complete(_) => return None,
        };
        for (number, piece) in (2..).zip(pieces) {
            state = match state.push(number, piece).ok()? {
                Assembled::NeedMore(assembler) => assembler,
                Assembled::Complete(_) => return None,
            };
        }
        Some(Load {
            assembler: Some(state),
        })
    }

    /// The number the next piece must carry.
    pub fn next_number(&self) -> u64 {
        self.assembler.as_ref().map_or(0, PieceAssembler::next_number)
    }

    /// The pieces received so far, concatenated.
    pub fn received_bytes(&self) -> &[u8] {
        self.assembler
            .as_ref()
            .map_or(&[], PieceAssembler::received_bytes)
    }

    /// Adds piece `number`. `Ok(None)`: more are needed; `Ok(Some(filter))`: the load is
    /// complete; an error ends the load (this value is then spent: delete it).
    pub fn push(
        &mut self,
        number: u64,
        piece: &[u8],
        cap: Option<u64>,
    ) -> Result<Option<Box<dyn DynFilter>>, LoadError> {
        let assembler = self
            .assembler
            .take()
            .ok_or_else(|| LoadError::bad("the load was abandoned"))?;
        match Self::progress(assembler.push(number, piece).map_err(LoadError::of)?, cap, true)? {
            Progress::Loading(load) => {
                *self = load;
                Ok(None)
            }
            Progress::Complete(filter) => Ok(Some(filter)),
        }
    }

    /// `joined`: the envelope is of several pieces.
    fn progress(assembled: Assembled, cap: Option<u64>, joined: bool) -> Result<Progress, LoadError> {
        Ok(match assembled {
            Assembled::NeedMore(assembler) => Progress::Loading(Load {
                assembler: Some(assembler),
            }),
            Assembled::Complete(bytes) => Progress::Complete(open_envelope(&bytes, cap, joined)?),
        })
    }
}

/// Refuses an envelope whose announced length could not hold a filter within the cap.
fn check_announced(header: &Header, cap: Option<u64>) -> Result<(), LoadError> {
    match cap {
        Some(cap) if header.total_len() > envelope_limit(Some(cap)) => Err(LoadError::OverCap {
            bytes: header.total_len(),
            cap,
        }),
        _ => Ok(()),
    }
}

/// Opens a whole envelope (both checksums, every parameter) and checks the filter's memory
/// against the cap.
pub fn open_within(bytes: &[u8], cap: Option<u64>) -> Result<Box<dyn DynFilter>, LoadError> {
    open_envelope(bytes, cap, false)
}

/// [`open_within`]; `joined`: the envelope was joined from pieces, which a payload checksum
/// that fails may also mean came from a filter written to between its `BF.SCANDUMP`
/// calls (each piece whole, not all of one filter): the error says so.
fn open_envelope(bytes: &[u8], cap: Option<u64>, joined: bool) -> Result<Box<dyn DynFilter>, LoadError> {
    if let Some(cap) = cap {
        check_announced(&Header::parse(bytes).map_err(LoadError::bad)?, Some(cap))?;
    }
    let filter = any::open(bytes).map_err(|error| match error {
        Error::Format {
            problem: FormatProblem::PayloadChecksum,
            ..
        } if joined => LoadError::bad(format!(
            "{error}, or the filter changed between its BF.SCANDUMP pieces (dump it again with \
             no write in between)"
        )),
        other => LoadError::of(other),
    })?;
    if let Some(cap) = cap {
        let bytes = filter.stats().memory_bytes;
        if bytes > cap {
            return Err(LoadError::OverCap { bytes, cap });
        }
    }
    Ok(filter)
}
