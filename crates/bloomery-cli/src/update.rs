//! Commands that write a filter: create, add, remove, dedup, seal. Each holds the filter
//! file's lock from its read to its write (store::Locked), so concurrent writers never
//! lose each other's items. The classic, blocked and split-block variants are updated in
//! place (inplace::Writable: only the pages touched, no copy of the file; a failed run
//! keeps the items before the failure, the file sealed); the others are loaded whole and
//! replaced, and save nothing when they fail.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use bloomery::any::{self, DynFilter, GrowthLimit};
use bloomery::in_place;

use crate::batch::{self, Keep, for_each_batch};
use crate::error::{CliError, Context, Result, items_before_added};
use crate::inplace::{self, Writable};
use crate::items::{ItemFormat, for_each_item};
use crate::progress::Progress;
use crate::space::{self, Limits};
use crate::store::{Locked, Mapped, Output, Payload};
use crate::{ItemArgs, SizeArgs};

/// A new filter in memory, after checking that it fits (`directory`: where its file goes).
fn new_filter(size: &SizeArgs, directory: Option<&Path>, limits: Limits) -> Result<Box<dyn DynFilter>> {
    let spec = size.spec();
    space::check_new_filter(&spec, directory, limits, true)?;
    any::create(&spec).map_err(|error| CliError::new(error.to_string()))
}

/// Creates the file. A variant updated in place is written as its header and a hole of
/// zero bytes (nothing written for the payload, its blocks reserved), so a filter of any
/// size is created in about the time it takes to checksum its zeros, without the memory.
pub fn create(path: &Path, size: &SizeArgs, limits: Limits, force: bool) -> Result<ExitCode> {
    write_new(Output::open(path, force, false)?, size, limits)?;
    warn_if_past_parquet_readers(path, &size.spec());
    Ok(ExitCode::SUCCESS)
}

/// Warns when a split-block filter hashed as Parquet's, made for `spec`, is over the 128
/// MiB Parquet's readers take (its exact size is kept there, and `export` refuses it):
/// `--hash parquet` promises a filter Parquet reads.
fn warn_if_past_parquet_readers(path: &Path, spec: &any::Spec) {
    if spec.variant != bloomery::format::native::Variant::SplitBlock || !spec.split_block_parquet {
        return;
    }
    let Ok(blocks) = bloomery::sizing::parquet_num_blocks(spec.expected_items, spec.fpp) else {
        return;
    };
    if !bloomery::sizing::parquet_readers_take(blocks) {
        let _ = writeln!(
            io::stderr(),
            "bloomery: warning: {}: a split-block filter of {} bytes, over the 128 MiB Parquet's \
             readers take: it cannot be exported to Parquet's format; for Parquet, make one \
             filter for fewer items (Parquet's writers make one per column chunk) or at a higher \
             fpp; for a filter that is not for Parquet, --hash xxh3",
            path.display(),
            blocks * (bloomery::sizing::SPLIT_BLOCK_BITS / 8)
        );
    }
}

/// Writes a new empty filter to `output`, as [`create`] does.
fn write_new(output: Output, size: &SizeArgs, limits: Limits) -> Result<()> {
    let spec = size.spec();
    if in_place::updates_in_place(size.variant) {
        // Its header and a hole: the filter itself is never allocated (an allocation of
        // its size, even untouched, counts against the kernel's commit limit and
        // `ulimit -v`, and was refused for a filter larger than them).
        space::check_new_filter(&spec, output.directory(), limits, false)?;
        let empty = any::empty_file(&spec)
            .map_err(|error| CliError::new(error.to_string()))?
            .expect("a variant updated in place has an empty file");
        return output.write_sparse(&empty.header, empty.len);
    }
    let filter = new_filter(size, output.directory(), limits)?;
    output.save(filter.as_ref())
}

/// Adds every item. In place for the classic, blocked and split-block variants: a run that
/// fails part way (a bad item, a read error) keeps the items before the failure and seals
/// the file. The other variants are loaded and replaced: a refusal (a full filter) stops
/// the run with an error and saves nothing, so the file never holds part of a run that
/// failed.
pub fn add(path: &Path, items: &ItemArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let locked = Locked::open(path)?;
    match Writable::open(locked)? {
        Ok(writable) => {
            let started = inplace::timing("opening (the payload checksum checked)", started);
            add_in_place(path, writable, items, started)
        }
        Err(locked) => add_by_copy(path, locked, items),
    }
}

fn add_in_place(path: &Path, mut writable: Writable, items: &ItemArgs, started: Instant) -> Result<ExitCode> {
    let hasher = writable.filter()?.hasher();
    let keep = Keep {
        items: false,
        raws: false,
        hasher: Some(hasher),
    };
    // A block filter larger than the window keeps the hashes on disk until the input ends,
    // then updates the file in one pass (inplace::Spill); others, and those whose directory
    // refuses the spill files, insert batch by batch.
    let mut spill = if writable.spills()? {
        inplace::Spill::new(&writable)
    } else {
        None
    };
    let per_batch = if spill.is_some() {
        1 << 14
    } else {
        inplace::add_batch_len(writable.payload_len())
    };
    let mut progress = Progress::new("adding");
    let mut count = 0u64;
    let mut scratch = Vec::new();
    // The pass over the spilled hashes, where it ran early (below) and failed.
    let mut early_pass_failed = false;
    let added = for_each_batch(
        &items.items,
        &items.inputs,
        items.format,
        keep,
        per_batch,
        |batch| {
            let spilled = match &mut spill {
                Some(kept) => kept.push(&batch.hashes, path).is_ok(),
                None => false,
            };
            if !spilled {
                // The spill files' file system refused more (full, or a limit on file
                // size): the hashes kept so far go in now, in one pass, and the rest batch
                // by batch (in the spilled road's batches), as where the directory refuses
                // spill files. That road needs nothing but the file itself.
                if let Some(kept) = spill.take() {
                    writable
                        .insert_spilled(kept)
                        .inspect_err(|_| early_pass_failed = true)?;
                }
                writable.insert(&batch.hashes, &mut scratch)?;
            }
            count += batch.len() as u64;
            progress.tick_by(batch.len() as u64);
            Ok(true)
        },
    );
    progress.finish();
    drop(scratch);
    let mut started = inplace::timing("reading the items (hashed, and inserted unless spilled)", started);
    // The items before a failure to read or spill are added too, as when they go in batch
    // by batch; a pass that fails part way has added only some of them.
    let mut spilled = Ok(());
    if let Some(spill) = spill
        && count > 0
    {
        spilled = writable.insert_spilled(spill);
        started = inplace::timing("the pass over the payload", started);
    }
    // The fill is read from every page: not for a file larger than the resident window
    // (`info` reports it).
    let small = writable.payload_len() <= inplace::window_bytes();
    let stats = match (count > 0 && small).then(|| writable.filter().map(|filter| filter.view().stats())) {
        Some(stats) => Some(stats?),
        None => None,
    };
    // Sealed whatever happened: the bits are valid.
    writable.seal()?;
    inplace::timing("sealing (pages synced, the payload checksum written)", started);
    if early_pass_failed {
        // The pass ran when the spill files were refused (its error ended the reading), and
        // the input was read no further.
        let error = added.expect_err("the failed pass ended the reading");
        return Err(CliError::new(format!(
            "{error}; the add stopped part way: of the items read before it, some or all were \
             not added, and the rest of the input was not read: add them all again"
        )));
    }
    if let Err(error) = spilled {
        return Err(CliError::new(format!(
            "{error}; of the {count} items read, some or all were not added: add them again"
        )));
    }
    items_before_added(added, count)?;
    if count == 0 {
        return Err(no_items(path));
    }
    if let Some(stats) = stats {
        warn_if_overfull(path, &stats);
    }
    Ok(ExitCode::SUCCESS)
}

fn add_by_copy(path: &Path, locked: Locked, items: &ItemArgs) -> Result<ExitCode> {
    let mut filter = locked.load()?;
    // A rotating filter's newest generation's room before the run, for its warning.
    let rotating_room = filter
        .as_any()
        .downcast_ref::<bloomery::RotatingBloomFilter>()
        .map(bloomery::RotatingBloomFilter::newest_room);
    let growth_limit = space::growth_limit(filter.as_ref(), Limits::default());
    let mut progress = Progress::new("adding");
    let mut count = 0u64;
    // Items that were not there before (`insert_within` answered true), for the rotating
    // filter's warning.
    let mut new_items = 0u64;
    let keep = Keep {
        items: true,
        raws: true,
        hasher: None,
    };
    let mut was_refused = false;
    let read = for_each_batch(
        &items.items,
        &items.inputs,
        items.format,
        keep,
        batch::BATCH,
        |batch| {
            for index in 0..batch.len() {
                let new = filter
                    .insert_within(batch.item(index), GrowthLimit::Total(growth_limit))
                    .map_err(|error| {
                        was_refused = true;
                        refused(path, batch.raw(index), &error)
                    })?;
                // A branch, not an addition of the flag as an integer (rust-lang/rust#158206).
                if new {
                    new_items += 1;
                }
            }
            count += batch.len() as u64;
            progress.tick_by(batch.len() as u64);
            Ok(true)
        },
    );
    // A bad item or a read error: the file is not written (its items would be part of a
    // run that failed), and the error says so, as a refusal's does.
    read.map_err(|error| {
        if was_refused {
            error
        } else {
            CliError::new(format!("{error}; nothing was saved"))
        }
    })?;
    progress.finish();
    if count == 0 {
        return Err(no_items(path));
    }
    locked.save(filter.as_ref())?;
    // A rotating filter is never past its capacity: it starts a generation instead (its
    // count is of every generation kept, its capacity one generation's). It forgets,
    // though, and may forget items of this very run.
    match (
        filter.as_any().downcast_ref::<bloomery::RotatingBloomFilter>(),
        rotating_room,
    ) {
        (Some(rotating), Some(room)) => warn_if_forgotten(path, rotating, room, new_items),
        _ => warn_if_overfull(path, &filter.stats()),
    }
    Ok(ExitCode::SUCCESS)
}

/// Warns when a run added so many new items to the rotating filter at `path` that the
/// generation its first item went to has rotated out: more than that generation's room
/// (`room`, the newest's before the run; a whole generation's when it was full) and
/// generations - 1 more generations (`bloomery create -n 1 --variant rotating r; add r a b
/// c` left `check r a` absent, and said nothing). Counted by new items, which each fill a
/// generation's room (an item seen before may too: then it said nothing where it could).
fn warn_if_forgotten(path: &Path, rotating: &bloomery::RotatingBloomFilter, room: u64, new_items: u64) {
    let per_generation = rotating.items_per_generation();
    let first_room = if room == 0 { per_generation } else { room };
    let kept = (rotating.max_generations() as u64 - 1)
        .saturating_mul(per_generation)
        .saturating_add(first_room);
    if new_items > kept {
        let _ = writeln!(
            io::stderr(),
            "bloomery: warning: {}: added {new_items} new items to a rotating filter that keeps \
             {} generations of {per_generation}: the first of them are forgotten already \
             (`check` answers absent for them); for a longer memory, make the generations \
             larger (--items) or more (--generations)",
            path.display(),
            rotating.max_generations()
        );
    }
}

/// Seals a file left unsealed by an update in place that did not finish (docs/format.md):
/// computes its payload checksum and writes the sealed header. A sealed file is checked
/// and left as it is: read, without the lock or write access, and nothing allocated (a
/// sealed file once failed on a full disk, reserving its blocks before its state was
/// looked at, and needed write permission).
pub fn seal(path: &Path) -> Result<ExitCode> {
    crate::store::refuse_dash(path)?;
    if let Some(code) = check_sealed(path)? {
        return Ok(code);
    }
    let locked = Locked::open(path)?;
    let was_unsealed = match Writable::open(locked)? {
        Ok(writable) => {
            let was_unsealed = writable.was_unsealed;
            writable.seal()?;
            was_unsealed
        }
        Err(locked) => {
            let header = inplace::read_header(locked.file(), locked.len(), path)?;
            if !header.unsealed {
                // Sealed once the lock was had (its writer finished meanwhile).
                return crate::query::verify(path);
            }
            // Unsealed, where this platform cannot view the payload in place (big-endian):
            // loaded from its bits, which are valid, and written whole, sealed.
            let filter = locked.load()?;
            locked.save(filter.as_ref())?;
            true
        }
    };
    say_sealed(path, was_unsealed)
}

/// For `seal`: a sealed file checked, read-only, and its line printed; `None` when the file
/// is unsealed, or a writer changed it while it was read (then it is sealed under the
/// lock, once that writer lets go of it).
fn check_sealed(path: &Path) -> Result<Option<ExitCode>> {
    let mapped = Mapped::open(path)?;
    if mapped.header().unsealed {
        return Ok(None);
    }
    if !in_place::updates_in_place(mapped.header().variant) {
        // Written whole, so sealed; `verify` checks it.
        drop(mapped);
        return crate::query::verify(path).map(Some);
    }
    // Every parameter against the payload, then the payload checksum.
    mapped.view()?;
    match mapped.verify_payload()? {
        Payload::Sealed => say_sealed(path, false).map(Some),
        Payload::Unsealed | Payload::Changing => Ok(None),
    }
}

/// `seal`'s line for a file it sealed, or found sealed.
fn say_sealed(path: &Path, was_unsealed: bool) -> Result<ExitCode> {
    let message = if was_unsealed {
        "sealed (payload checksum written; the bits were valid)"
    } else {
        "already sealed; payload checksum valid"
    };
    crate::output::finish(writeln!(io::stdout().lock(), "{}: {message}", path.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// Removes one occurrence of every item (counting filters); the first item that is
/// definitely absent stops the run with an error and saves nothing.
pub fn remove(path: &Path, items: &ItemArgs) -> Result<ExitCode> {
    let locked = Locked::open(path)?;
    let mut filter = locked.load()?;
    let mut count = 0u64;
    for_each_item(&items.items, &items.inputs, items.format, |item, raw| {
        filter.remove(item).map_err(|error| refused(path, raw, &error))?;
        count += 1;
        Ok(true)
    })?;
    if count == 0 {
        return Err(no_items(path));
    }
    locked.save(filter.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

pub fn no_items(path: &Path) -> CliError {
    CliError::new(format!(
        "{}: no items given (as arguments, with --input, or on standard input)",
        path.display()
    ))
}

fn refused(path: &Path, raw: &[u8], error: &bloomery::Error) -> CliError {
    CliError::new(format!(
        "{}: item '{}': {error}; nothing was saved",
        path.display(),
        crate::items::shown(raw)
    ))
}

/// Warns on stderr when the filter now holds more items than it was sized for (its
/// false-positive rate is then above the one it was made for).
fn warn_if_overfull(path: &Path, stats: &any::Stats) {
    warn_overfull(
        &path.display().to_string(),
        stats,
        "make a bigger filter and add the items again",
    );
}

/// [`warn_if_overfull`] for the filter `what`, saying `remedy`.
fn warn_overfull(what: &str, stats: &any::Stats, remedy: &str) {
    let Some(capacity) = stats.capacity else {
        return;
    };
    if past_capacity(stats.estimated_len, capacity)
        && !stats.refuses_beyond_capacity
        && stats.expansion.is_none()
    {
        let held = if stats.estimated_len == u64::MAX {
            "every bit set".to_owned()
        } else {
            format!("about {} items", stats.estimated_len)
        };
        say_overfull(what, &held, capacity, stats.expected_fpp, remedy);
    }
}

/// Whether `estimated` items are past a filter's `capacity` by more than 5%: the estimate
/// from the bits set is within that of the true count at these loads (a 100-item blocked
/// filter of 2 blocks, filled exactly, estimates 103; bigger filters come closer), so a
/// filter filled to its capacity does not warn (tests/faults.rs,
/// an_overfilled_filter_says_so).
pub(crate) fn past_capacity(estimated: u64, capacity: u64) -> bool {
    estimated > capacity.saturating_add(capacity / 20)
}

/// The warning of a filter `what` that holds `held` (what it holds, said), more than the
/// `capacity` it was sized for, at false-positive rate `fpp` now; `remedy` says what to do.
pub(crate) fn say_overfull(what: &str, held: &str, capacity: u64, fpp: f64, remedy: &str) {
    let _ = writeln!(
        io::stderr(),
        "bloomery: warning: {what}: holds {held}, more than the {capacity} it was sized for; \
         false-positive estimate now {fpp:.4} ({remedy})"
    );
}

/// The stored filter of `dedup`, locked from the read to the write; or where a new one
/// goes.
enum Store {
    None,
    Existing(Locked),
    InPlace(Writable),
}

pub fn dedup(
    filter_path: Option<&Path>,
    size: &SizeArgs,
    given_size_options: &[String],
    mut limits: Limits,
    inputs: &[PathBuf],
    format: ItemFormat,
) -> Result<ExitCode> {
    let (mut store, mut filter) = match filter_path {
        None => (Store::None, Some(new_filter(size, None, limits)?)),
        Some(path) => {
            if std::fs::metadata(path).is_err() {
                // Made before the first line is read, as `create` makes it, then locked and
                // used as any existing filter: two runs started at once take turns on one
                // file, and neither prints a line its filter will not keep.
                let made =
                    Output::open(path, false, false).and_then(|output| write_new(output, size, limits));
                match made {
                    Ok(()) => {}
                    // Another program made it meanwhile: deduplicate against that one.
                    Err(_) if std::fs::metadata(path).is_ok() => {
                        limits = Limits::default();
                        if !given_size_options.is_empty() {
                            let _ = writeln!(
                                io::stderr(),
                                "bloomery: note: {}: was created by another program meanwhile; \
                                 deduplicating against it, without {}",
                                path.display(),
                                given_size_options.join(", ")
                            );
                        }
                    }
                    Err(error) => return Err(error),
                }
            } else if !given_size_options.is_empty() {
                return Err(CliError::new(format!(
                    "{}: exists, so {} would be ignored (they apply only to a new filter); \
                         leave them out, or remove the file first",
                    path.display(),
                    given_size_options.join(", ")
                )));
            }
            match Writable::open(Locked::open(path)?)? {
                Ok(writable) => (Store::InPlace(writable), None),
                Err(locked) => {
                    let filter = locked.load()?;
                    (Store::Existing(locked), Some(filter))
                }
            }
        }
    };
    let hasher = match &mut store {
        Store::InPlace(writable) => Some(writable.filter()?.hasher()),
        _ => None,
    };
    // A growing filter's new sub-filters are held to the space options too (given only
    // for a filter made here: an existing file's are refused above), and to the memory.
    let growth_limit = filter
        .as_deref()
        .map(|filter| space::growth_limit(filter, limits));
    let keep = Keep {
        items: hasher.is_none(),
        raws: true,
        hasher,
    };
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut write_error = None;
    let mut progress = Progress::new("deduplicating");
    let mut new = Vec::new();
    // A file updated in place: the batch's hashes already seen in it, and in the batch.
    let (mut seen_in_batch, mut scratch) = (std::collections::HashSet::new(), Vec::new());
    let read = for_each_batch(&[], inputs, format, keep, batch::BATCH, |batch| {
        progress.tick_by(batch.len() as u64);
        new.clear();
        new.resize(batch.len(), false);
        // A line the filter refuses (full) ends the run; the lines before it are printed
        // and kept, as those of the batches before.
        let mut refused = None;
        match (&mut store, &mut filter) {
            (Store::InPlace(writable), _) => {
                // Looked up, not added: the batch goes in once its new lines are printed.
                writable.contains_reporting(&batch.hashes, &mut new)?;
                seen_in_batch.clear();
                for (is_new, hash) in new.iter_mut().zip(&batch.hashes) {
                    // Absent from the file, and the first of its hash in the batch.
                    *is_new = !*is_new && seen_in_batch.insert(*hash);
                }
            }
            (_, Some(filter)) => {
                let growth_limit = growth_limit.unwrap_or(u64::MAX);
                for index in 0..batch.len() {
                    match filter.insert_within(batch.item(index), GrowthLimit::Total(growth_limit)) {
                        Ok(is_new) => new[index] = is_new,
                        Err(error) => {
                            refused = Some(CliError::new(format!(
                                "line '{}': {error}",
                                crate::items::shown(batch.raw(index))
                            )));
                            new.truncate(index);
                            break;
                        }
                    }
                }
            }
            _ => unreachable!("a filter in memory or in place"),
        }
        // The lines as read, '\r' included: only the item leaves it out.
        let mut written = Ok(());
        for (index, _) in new.iter().enumerate().filter(|&(_, &new)| new) {
            written = out
                .write_all(batch.raw(index))
                .and_then(|()| out.write_all(b"\n"));
            if written.is_err() {
                break;
            }
        }
        // A file updated in place keeps the batch only once its new lines are printed
        // (written to standard output): a full device, or a reader gone before the write,
        // leaves every line the file holds written. Written is not read: lines a pipe
        // took into its buffer count as printed, and a reader that exits without reading
        // them loses them (docs/failure-model.md, "Standard output"). A crash between the
        // two prints the batch's lines again next run rather than never.
        if written.is_ok()
            && let Store::InPlace(writable) = &mut store
        {
            written = out.flush();
            if written.is_ok() {
                writable.insert(&batch.hashes, &mut scratch)?;
            }
        } else if written.is_ok() && batch.input_waits {
            // The input has no more for now (`tail -f log | bloomery dedup`): the new
            // lines so far go out rather than wait for the next batch.
            written = out.flush();
        }
        match (written, refused) {
            (Ok(()), None) => Ok(true),
            (Ok(()), Some(refused)) => Err(refused),
            (Err(error), _) => {
                write_error = Some(error);
                Ok(false)
            }
        }
    });
    progress.finish();
    let flushed = match write_error {
        Some(error) => Err(error),
        None => out.flush(),
    };
    // An overfull filter takes more and more new lines for seen ones, and `dedup` drops
    // them without a word: a finished run warns, as `add` does.
    if let Store::InPlace(mut writable) = store {
        // The fill is read from every page: not for a file larger than the resident window
        // (as for `add`).
        let stats = if writable.payload_len() <= inplace::window_bytes() {
            Some(writable.filter()?.view().stats())
        } else {
            None
        };
        // Sealed whatever happened: the bits are valid (the lines before a failure are in).
        writable.seal()?;
        read?;
        match flushed {
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => {}
            Err(error) => return Err(error).with_path(Path::new("<stdout>")),
            Ok(()) => {}
        }
        if let (Some(stats), Some(path)) = (stats, filter_path) {
            warn_if_overfull(path, &stats);
        }
        return Ok(ExitCode::SUCCESS);
    }
    match flushed {
        // The reader went away (`bloomery dedup | head`): stop quietly, and keep the
        // stored filter as it was, since not every line it now holds was printed.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => return read.map(|()| ExitCode::SUCCESS),
        Err(error) => return Err(error).with_path(Path::new("<stdout>")),
        Ok(()) => {}
    }
    // Every line the filter now holds was printed, those before a bad or refused line too:
    // the filter is saved with them, so that the next run does not print them again.
    let filter = filter.expect("a filter in memory");
    let saved = match store {
        Store::None | Store::InPlace(_) => false,
        Store::Existing(locked) => {
            locked.save(filter.as_ref())?;
            true
        }
    };
    match read {
        Err(error) if saved => Err(CliError::new(format!(
            "{error}; the lines before it were printed, and the filter saved with them"
        ))),
        Err(error) => Err(error),
        Ok(()) => {
            // A rotating filter starts a generation instead (as for `add`).
            if filter.variant() != bloomery::format::native::Variant::Rotating {
                match filter_path {
                    Some(path) => warn_if_overfull(path, &filter.stats()),
                    None => warn_overfull("the filter in memory", &filter.stats(), "raise --items"),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
