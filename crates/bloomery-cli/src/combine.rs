//! merge and intersect: combine compatible filter files into a new one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::{Context, Result};
use crate::store::{self, Output};

pub fn combine(output: &Path, inputs: &[PathBuf], union: bool, force: bool) -> Result<ExitCode> {
    let (first, rest) = inputs.split_first().expect("clap requires at least one input");
    // The output's lock before the inputs are read: `merge a a b` then cannot lose an
    // `add` to `a` that runs meanwhile.
    let output = Output::open(output, force, false)?;
    let mut combined = store::load(first)?;
    for path in rest {
        let other = store::load(path)?;
        if union {
            combined.union(other.as_ref()).with_path(path)?;
        } else {
            combined.intersection(other.as_ref()).with_path(path)?;
        }
    }
    output.save(combined.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
