//! merge and intersect: combine compatible filter files into a new one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::{Context, Result};
use crate::store::{self, WriteLock};

pub fn combine(output: &Path, inputs: &[PathBuf], union: bool) -> Result<ExitCode> {
    let (first, rest) = inputs.split_first().expect("clap requires at least one input");
    let mut combined = store::load(first)?;
    for path in rest {
        let other = store::load(path)?;
        if union {
            combined.union(other.as_ref()).with_path(path)?;
        } else {
            combined.intersection(other.as_ref()).with_path(path)?;
        }
    }
    let _lock = WriteLock::acquire(output)?;
    store::save(output, combined.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
