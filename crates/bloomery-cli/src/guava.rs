//! export and import: Guava's BloomFilter.writeTo bytes, so a Java service can read a
//! filter made here (BloomFilter.readFrom with Funnels.byteArrayFunnel(), or
//! stringFunnel(UTF_8) for UTF-8 text) and the other way round.

use std::path::Path;
use std::process::ExitCode;

use bloomery::BloomFilter;

use crate::error::{CliError, Context, Result};
use crate::items::read_all;
use crate::store::{Filter, WriteLock, write_atomically};

pub fn export(path: &Path, output: &Path) -> Result<ExitCode> {
    let Filter::Classic(filter) = Filter::load(path)? else {
        return Err(CliError::new(format!(
            "{}: only classic filters have a Guava form (create with --variant classic)",
            path.display()
        )));
    };
    write_atomically(output, &[&filter.to_guava_bytes()]).with_path(output)?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(input: &Path, output: &Path) -> Result<ExitCode> {
    let bytes = read_all(input)?;
    let filter = BloomFilter::from_guava_bytes(&bytes).with_path(input)?;
    let _lock = WriteLock::acquire(output)?;
    Filter::Classic(filter).save(output)?;
    Ok(ExitCode::SUCCESS)
}
