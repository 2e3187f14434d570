//! export and import: Guava's BloomFilter.writeTo bytes, so a Java service can read a
//! filter made here (BloomFilter.readFrom with Funnels.byteArrayFunnel(), stringFunnel(UTF_8)
//! for UTF-8 text, or longFunnel()/integerFunnel() for items added with `--format long`/`int`)
//! and the other way round.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use bloomery::BloomFilter;

use crate::error::{Context, Result};
use crate::items::read_all;
use crate::store::{self, WriteLock, write_atomically};

pub fn export(path: &Path, output: &Path) -> Result<ExitCode> {
    let filter = store::load(path)?;
    let bytes = bloomery::any::to_guava_bytes(filter.as_ref()).with_path(path)?;
    write_atomically(output, |file| file.write_all(&bytes)).with_path(output)?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(input: &Path, output: &Path) -> Result<ExitCode> {
    let bytes = read_all(input)?;
    let filter = BloomFilter::from_guava_bytes(&bytes).with_path(input)?;
    let _lock = WriteLock::acquire(output)?;
    store::save(output, &filter)?;
    Ok(ExitCode::SUCCESS)
}
