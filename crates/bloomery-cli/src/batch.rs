//! Items in batches, read on one thread and used on another: one core reads, splits and
//! decodes lines (and hashes them, for the filters updated in place) while the other
//! inserts or looks them up with the library's batched, prefetching calls. Batches reach
//! the caller in input order, so `check` prints its answers and `dedup` its lines in the
//! order read.

use std::cell::RefCell;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::mpsc;

use bloomery::in_place::{ItemHash, ItemHasher};

use crate::error::{CliError, Result};
use crate::items::{ItemFormat, for_each_item_until_waiting};

/// Items per batch for lookups and ordered output: enough to amortise the hand-over and
/// keep the prefetching loops full, small enough that output is not held back long.
pub const BATCH: usize = 4096;

/// The most bytes of items and lines a batch holds before it is handed over (it may pass
/// this by its last item): lines may be up to 64 MiB each (`items::MAX_LINE_BYTES`), and
/// 4,096 of those would be 256 GiB. Batches of hashes alone are sized by their callers.
pub const BATCH_BYTES: usize = 16 << 20;

/// What a batch keeps of each item.
#[derive(Clone, Copy, Debug)]
pub struct Keep {
    /// The item's bytes.
    pub items: bool,
    /// The line as read (what `check` echoes and `dedup` prints).
    pub raws: bool,
    /// The item's hash, computed on the reading thread.
    pub hasher: Option<ItemHasher>,
}

/// Consecutive items of the input.
#[derive(Default)]
pub struct Batch {
    items: Vec<u8>,
    item_ends: Vec<usize>,
    raws: Vec<u8>,
    raw_ends: Vec<usize>,
    /// The items' hashes, when the batch was read with a hasher.
    pub hashes: Vec<ItemHash>,
    len: usize,
    /// Handed over short because the input has nothing more for now: what is done with
    /// it (lines printed) should reach its reader before the input's next line comes.
    pub input_waits: bool,
}

impl Batch {
    fn with_capacity(items: usize, keep: Keep) -> Self {
        let mut batch = Self::default();
        if keep.items {
            batch.item_ends.reserve(items);
        }
        if keep.raws {
            batch.raw_ends.reserve(items);
        }
        if keep.hasher.is_some() {
            batch.hashes.reserve(items);
        }
        batch
    }

    fn push(&mut self, item: &[u8], raw: &[u8], keep: Keep) {
        if keep.items {
            self.items.extend_from_slice(item);
            self.item_ends.push(self.items.len());
        }
        if keep.raws {
            self.raws.extend_from_slice(raw);
            self.raw_ends.push(self.raws.len());
        }
        if let Some(hasher) = keep.hasher {
            self.hashes.push(hasher.hash(item));
        }
        self.len += 1;
    }

    /// The bytes of items and lines held.
    fn bytes(&self) -> usize {
        self.items.len() + self.raws.len()
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Item `index`'s bytes (kept items only).
    pub fn item(&self, index: usize) -> &[u8] {
        let start = if index == 0 { 0 } else { self.item_ends[index - 1] };
        &self.items[start..self.item_ends[index]]
    }

    /// Item `index`'s line as read (kept lines only).
    pub fn raw(&self, index: usize) -> &[u8] {
        let start = if index == 0 { 0 } else { self.raw_ends[index - 1] };
        &self.raws[start..self.raw_ends[index]]
    }

    /// Every item's bytes (kept items only).
    pub fn items(&self) -> Vec<&[u8]> {
        (0..self.item_ends.len()).map(|index| self.item(index)).collect()
    }
}

/// Reads the items (as [`crate::items::for_each_item`] does: `items` as arguments, then the lines of
/// `files`, or standard input) on another thread, `per_batch` at a time (fewer when they
/// reach [`BATCH_BYTES`], or when a pipe's or terminal's next read would wait: then the
/// batch so far is handed over, marked [`Batch::input_waits`]), and calls
/// `each` with every batch, in input order, on this thread. Stops at the first error on
/// either side (a bad item ends the batches before it, then the error is returned) or when
/// `each` returns `Ok(false)`.
///
/// When `each` stops the run (an error, `Ok(false)`), this returns at once, without
/// waiting for the reading thread: it may be blocked reading a pipe whose writer has
/// nothing more for now, and waiting for it held a refused item's error (and the file's
/// lock, and its sealing) until the input's next line came (`(printf 'a\nb\n'; sleep 8;
/// echo c) | bloomery dedup --filter full.bloom` said the error after 8 s). The thread
/// then ends at its next hand-over, which the receiver gone refuses, or with the process.
pub fn for_each_batch(
    items: &[OsString],
    files: &[PathBuf],
    format: ItemFormat,
    keep: Keep,
    per_batch: usize,
    mut each: impl FnMut(Batch) -> Result<bool>,
) -> Result<()> {
    // Two batches in flight at most: one read ahead while one is used.
    let (sender, receiver) = mpsc::sync_channel::<Result<Batch>>(1);
    // Owned by the thread, which may outlive this call.
    let (items, files) = (items.to_vec(), files.to_vec());
    let reader = std::thread::Builder::new()
        .name("bloomery-reader".to_owned())
        .spawn(move || {
            let batch = RefCell::new(Batch::with_capacity(per_batch, keep));
            // The batch so far, handed over; false when the user stopped (stop reading).
            let hand_over = |input_waits: bool| {
                let next = Batch::with_capacity(per_batch, keep);
                let mut batch = std::mem::replace(&mut *batch.borrow_mut(), next);
                batch.input_waits = input_waits;
                sender.send(Ok(batch)).is_ok()
            };
            let read = for_each_item_until_waiting(
                &items,
                &files,
                format,
                |item, raw| {
                    let mut open = batch.borrow_mut();
                    open.push(item, raw, keep);
                    if open.len() < per_batch && open.bytes() < BATCH_BYTES {
                        return Ok(true);
                    }
                    drop(open);
                    Ok(hand_over(false))
                },
                // Lines that came, then nothing: used now rather than when the batch fills.
                Some(|| {
                    let waiting = batch.borrow().len() > 0;
                    Ok(!waiting || hand_over(true))
                }),
            );
            let batch = batch.into_inner();
            if batch.len() > 0 && sender.send(Ok(batch)).is_err() {
                return;
            }
            if let Err(error) = read {
                let _ = sender.send(Err(error));
            }
        })
        .map_err(|error| CliError::new(format!("cannot start the thread that reads the items: {error}")))?;
    for batch in receiver.iter() {
        // Stopped: not joined (see above).
        if !each(batch?)? {
            return Ok(());
        }
    }
    // The reader dropped its sender: it has returned, or is returning.
    if let Err(panic) = reader.join() {
        std::panic::resume_unwind(panic);
    }
    Ok(())
}
