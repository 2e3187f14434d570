//! export and import: Guava's BloomFilter.writeTo bytes, so a Java service can read a
//! filter made here (BloomFilter.readFrom with Funnels.byteArrayFunnel(), stringFunnel(UTF_8)
//! for UTF-8 text, or longFunnel()/integerFunnel() for items added with `--format long`/`int`)
//! and the other way round.

use std::path::Path;
use std::process::ExitCode;

use bloomery::BloomFilter;

use crate::error::{Context, Result};
use crate::items::read_all;
use crate::store::{self, Output};

pub fn export(path: &Path, output: &Path, force: bool) -> Result<ExitCode> {
    let output = Output::open(output, force, true)?;
    let filter = store::load(path)?;
    let bytes = bloomery::any::to_guava_bytes(filter.as_ref()).with_path(path)?;
    output.write(|file| file.write_all(&bytes))?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(input: &Path, output: &Path, force: bool) -> Result<ExitCode> {
    let output = Output::open(output, force, false)?;
    let bytes = read_all(input)?;
    let filter = BloomFilter::from_guava_bytes(&bytes).with_path(input)?;
    output.save(&filter)?;
    Ok(ExitCode::SUCCESS)
}
