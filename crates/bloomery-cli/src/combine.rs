//! merge and intersect: combine compatible filter files into a new one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::{Context, Result};
use crate::store::{Filter, WriteLock};

pub fn combine(output: &Path, inputs: &[PathBuf], union: bool) -> Result<ExitCode> {
    let (first, rest) = inputs.split_first().expect("clap requires at least one input");
    let mut combined = Filter::load(first)?;
    for path in rest {
        let other = Filter::load(path)?;
        combined.combine(&other, union).with_path(path)?;
    }
    let _lock = WriteLock::acquire(output)?;
    combined.save(output)?;
    Ok(ExitCode::SUCCESS)
}
