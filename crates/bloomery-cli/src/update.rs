//! Commands that write a filter: create, add, remove, dedup. Each holds the filter file's
//! lock from its read to its write (store::Locked), so concurrent writers never lose each
//! other's items, and saves nothing when it fails.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloomery::any::{self, DynFilter};

use crate::error::{CliError, Context, Result};
use crate::items::{ItemFormat, for_each_item};
use crate::progress::Progress;
use crate::space::{self, Limits};
use crate::store::{Locked, Output};
use crate::{ItemArgs, SizeArgs};

/// A new filter, after checking that it fits (`directory`: where its file goes).
fn new_filter(size: &SizeArgs, directory: Option<&Path>, limits: Limits) -> Result<Box<dyn DynFilter>> {
    let spec = size.spec();
    space::check_new_filter(&spec, directory, limits)?;
    any::create(&spec).map_err(|error| CliError::new(error.to_string()))
}

pub fn create(path: &Path, size: &SizeArgs, limits: Limits, force: bool) -> Result<ExitCode> {
    let output = Output::open(path, force, false)?;
    let filter = new_filter(size, output.directory(), limits)?;
    output.save(filter.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

/// Adds every item; a refusal (a full filter) stops the run with an error and saves
/// nothing, so the file never holds part of a run that failed.
pub fn add(path: &Path, items: &ItemArgs) -> Result<ExitCode> {
    let mut locked = Locked::open(path)?;
    let mut filter = locked.load()?;
    let mut progress = Progress::new("adding");
    let mut count = 0u64;
    for_each_item(&items.items, &items.inputs, items.format, |item, raw| {
        filter.insert(item).map_err(|error| refused(path, raw, &error))?;
        count += 1;
        progress.tick();
        Ok(true)
    })?;
    progress.finish();
    if count == 0 {
        return Err(no_items(path));
    }
    locked.save(filter.as_ref())?;
    warn_if_overfull(path, filter.as_ref());
    Ok(ExitCode::SUCCESS)
}

/// Removes one occurrence of every item (counting filters); the first item that is
/// definitely absent stops the run with an error and saves nothing.
pub fn remove(path: &Path, items: &ItemArgs) -> Result<ExitCode> {
    let mut locked = Locked::open(path)?;
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
        String::from_utf8_lossy(raw)
    ))
}

/// Warns on stderr when the filter now holds more items than it was sized for (its
/// false-positive rate is then above the one it was made for).
fn warn_if_overfull(path: &Path, filter: &dyn DynFilter) {
    let stats = filter.stats();
    let Some(capacity) = stats.capacity else {
        return;
    };
    // 5% above: the estimate from the bits set is within that of the true count at these
    // loads (a 100-item blocked filter of 2 blocks, filled exactly, estimates 103; bigger
    // filters come closer), so a filter filled to its capacity does not warn
    // (tests/faults.rs, an_overfilled_filter_says_so).
    let past = stats.estimated_len > capacity.saturating_add(capacity / 20);
    if past && !stats.refuses_beyond_capacity && stats.expansion.is_none() {
        let held = if stats.estimated_len == u64::MAX {
            "every bit set".to_owned()
        } else {
            format!("about {} items", stats.estimated_len)
        };
        let _ = writeln!(
            io::stderr(),
            "bloomery: warning: {}: holds {held}, more than the {capacity} it was sized for; \
             false-positive estimate now {:.4} (make a bigger filter and add the items again)",
            path.display(),
            stats.expected_fpp
        );
    }
}

pub fn dedup(
    filter_path: Option<&Path>,
    size: &SizeArgs,
    given_size_options: &[&str],
    limits: Limits,
    inputs: &[PathBuf],
    format: ItemFormat,
) -> Result<ExitCode> {
    // The stored filter, locked from the read to the write; or where a new one goes.
    enum Store {
        None,
        Existing(Locked),
        New(Output),
    }
    let (store, mut filter) = match filter_path {
        None => (Store::None, new_filter(size, None, limits)?),
        Some(path) if std::fs::metadata(path).is_err() => {
            let output = Output::open(path, false, false)?;
            let filter = new_filter(size, output.directory(), limits)?;
            (Store::New(output), filter)
        }
        Some(path) => {
            if !given_size_options.is_empty() {
                return Err(CliError::new(format!(
                    "{}: exists, so {} would be ignored (they size a new filter); \
                         leave them out, or remove the file first",
                    path.display(),
                    given_size_options.join(", ")
                )));
            }
            let mut locked = Locked::open(path)?;
            let filter = locked.load()?;
            (Store::Existing(locked), filter)
        }
    };
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut write_error = None;
    let mut progress = Progress::new("deduplicating");
    for_each_item(&[], inputs, format, |item, line| {
        progress.tick();
        let new = filter
            .insert(item)
            .map_err(|error| CliError::new(format!("line '{}': {error}", String::from_utf8_lossy(line))))?;
        // The line as read, '\r' included: only the item leaves it out.
        if new && let Err(error) = out.write_all(line).and_then(|()| out.write_all(b"\n")) {
            write_error = Some(error);
            return Ok(false);
        }
        Ok(true)
    })?;
    progress.finish();
    let flushed = match write_error {
        Some(error) => Err(error),
        None => out.flush(),
    };
    match flushed {
        // The reader went away (`bloomery dedup | head`): stop quietly, and keep the
        // stored filter as it was, since not every line it now holds was printed.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        Err(error) => return Err(error).with_path(Path::new("<stdout>")),
        Ok(()) => {}
    }
    match store {
        Store::None => {}
        Store::Existing(locked) => locked.save(filter.as_ref())?,
        Store::New(output) => output.save(filter.as_ref())?,
    }
    Ok(ExitCode::SUCCESS)
}
