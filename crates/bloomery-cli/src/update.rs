//! Commands that write a filter: create, add, dedup.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::{CliError, Context, Result};
use crate::items::for_each_item;
use crate::progress::Progress;
use crate::store::{Filter, WriteLock};
use crate::{ItemArgs, SizeArgs};

fn new_filter(size: &SizeArgs) -> Result<Filter> {
    Filter::create(size.variant, size.expected_items, size.fpp)
        .map_err(|error| CliError::new(error.to_string()))
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
    filter.save(path)?;
    Ok(ExitCode::SUCCESS)
}

pub fn add(path: &Path, items: &ItemArgs) -> Result<ExitCode> {
    let _lock = WriteLock::acquire(path)?;
    let mut filter = Filter::load(path)?;
    let mut progress = Progress::new("adding");
    for_each_item(&items.items, &items.inputs, |item| {
        filter.insert(item);
        progress.tick();
        true
    })?;
    progress.finish();
    filter.save(path)?;
    Ok(ExitCode::SUCCESS)
}

pub fn dedup(filter_path: Option<&Path>, size: &SizeArgs, inputs: &[PathBuf]) -> Result<ExitCode> {
    let _lock = filter_path.map(WriteLock::acquire).transpose()?;
    let mut filter = match filter_path {
        Some(path) if path.exists() => Filter::load(path)?,
        _ => new_filter(size)?,
    };
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut write_error = None;
    let mut progress = Progress::new("deduplicating");
    for_each_item(&[], inputs, |line| {
        progress.tick();
        if filter.insert(line)
            && let Err(error) = out.write_all(line).and_then(|()| out.write_all(b"\n"))
        {
            write_error = Some(error);
            return false;
        }
        true
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
        filter.save(path)?;
    }
    Ok(ExitCode::SUCCESS)
}
