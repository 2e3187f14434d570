//! Commands that write a filter: create, add, remove, dedup.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloomery::any::{self, DynFilter};

use crate::error::{CliError, Context, Result};
use crate::items::{ItemFormat, for_each_item};
use crate::progress::Progress;
use crate::store::{self, WriteLock};
use crate::{ItemArgs, SizeArgs};

fn new_filter(size: &SizeArgs) -> Result<Box<dyn DynFilter>> {
    any::create(&size.spec()).map_err(|error| CliError::new(error.to_string()))
}

pub fn create(path: &Path, size: &SizeArgs, force: bool) -> Result<ExitCode> {
    let filter = new_filter(size)?;
    let _lock = WriteLock::acquire(path)?;
    if path.exists() && !force {
        return Err(CliError::new(format!(
            "{}: already exists (use --force to replace it)",
            path.display()
        )));
    }
    store::save(path, filter.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

/// Adds every item; a refusal (a full filter) stops the run with an error and saves
/// nothing, so the file never holds part of a run that failed.
pub fn add(path: &Path, items: &ItemArgs) -> Result<ExitCode> {
    let _lock = WriteLock::acquire(path)?;
    let mut filter = store::load(path)?;
    let mut progress = Progress::new("adding");
    for_each_item(&items.items, &items.inputs, items.format, |item, raw| {
        filter.insert(item).map_err(|error| refused(path, raw, &error))?;
        progress.tick();
        Ok(true)
    })?;
    progress.finish();
    store::save(path, filter.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

/// Removes one occurrence of every item (counting filters); the first item that is
/// definitely absent stops the run with an error and saves nothing.
pub fn remove(path: &Path, items: &ItemArgs) -> Result<ExitCode> {
    let _lock = WriteLock::acquire(path)?;
    let mut filter = store::load(path)?;
    for_each_item(&items.items, &items.inputs, items.format, |item, raw| {
        filter.remove(item).map_err(|error| refused(path, raw, &error))?;
        Ok(true)
    })?;
    store::save(path, filter.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

fn refused(path: &Path, raw: &[u8], error: &bloomery::Error) -> CliError {
    CliError::new(format!(
        "{}: item '{}': {error}; nothing was saved",
        path.display(),
        String::from_utf8_lossy(raw)
    ))
}

pub fn dedup(
    filter_path: Option<&Path>,
    size: &SizeArgs,
    inputs: &[PathBuf],
    format: ItemFormat,
) -> Result<ExitCode> {
    let _lock = filter_path.map(WriteLock::acquire).transpose()?;
    let mut filter = match filter_path {
        Some(path) if path.exists() => store::load(path)?,
        _ => new_filter(size)?,
    };
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut write_error = None;
    let mut progress = Progress::new("deduplicating");
    for_each_item(&[], inputs, format, |item, line| {
        progress.tick();
        let new = filter
            .insert(item)
            .map_err(|error| CliError::new(format!("line '{}': {error}", String::from_utf8_lossy(line))))?;
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
    if let Some(path) = filter_path {
        store::save(path, filter.as_ref())?;
    }
    Ok(ExitCode::SUCCESS)
}
