//! merge and intersect: combine compatible filter files into a new one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::{Context, Result};
use crate::inplace::Writable;
use crate::store::{self, Mapped, Output};

pub fn combine(output: &Path, inputs: &[PathBuf], union: bool, force: bool) -> Result<ExitCode> {
    let (first, rest) = inputs.split_first().expect("clap requires at least one input");
    // The output's lock before the inputs are read: `merge a a b` then cannot lose an
    // `add` to `a` that runs meanwhile.
    let output = match Output::open(output, force, false)? {
        // A merge into one of its inputs (`merge --force a a b`) of a variant updated in
        // place: the others are OR-ed into it where it lies.
        Output::Replace(locked) if union && inputs.iter().any(|input| locked.is(input)) => {
            match Writable::open(locked)? {
                Ok(writable) => return merge_in_place(writable, inputs),
                Err(locked) => Output::Replace(locked),
            }
        }
        other => other,
    };
    // An input that is the output is read under this run's own lock: unsealed, it is so
    // from a writer that did not finish, not one at work (read as any other input, it was
    // "being updated in place by another writer": this run, holding the lock).
    let load = |path: &Path| match &output {
        Output::Replace(locked) if locked.is(path) => locked.load(),
        _ => store::load(path),
    };
    let mut combined = load(first)?;
    for path in rest {
        let other = load(path)?;
        if union {
            combined.union(other.as_ref()).with_path(path)?;
        } else {
            combined.intersection(other.as_ref()).with_path(path)?;
        }
    }
    output.save(combined.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

/// Merges `inputs` into the file `writable`, one of them, in place: every other input is
/// checked (its payload checksum, and that it puts items at the same bits) before the
/// first bit changes, then OR-ed in; the file is sealed at the end, and on a failure part
/// way (then every input before the failure is in it).
///
/// Each input is open only while it is checked, and again while it is OR-ed in: kept open
/// and mapped from its check to the end, 1,000 inputs passed the usual limit of 1,024
/// open files ("Too many open files", where a merge into a new file took them), and the
/// pages read of every input smaller than the window stayed resident to the end. An input
/// whose header changed between the two (another writer) has its payload checked again.
fn merge_in_place(mut writable: Writable, inputs: &[PathBuf]) -> Result<ExitCode> {
    let mut others = Vec::new();
    for path in inputs {
        if writable.is(path) {
            continue;
        }
        let mapped = Mapped::open(path)?;
        mapped.note(mapped.verify_payload()?);
        writable
            .filter()?
            .check_union(mapped.header(), mapped.payload())
            .with_path(path)?;
        others.push((path, mapped.header().clone()));
    }
    let mut merged = Ok(());
    for (path, checked) in &others {
        merged = Mapped::open(path).and_then(|mapped| {
            if mapped.header() != checked {
                mapped.verify_payload()?;
            }
            writable
                .union(mapped.header(), mapped.payload(), mapped.region())
                .with_path(path)
        });
        if merged.is_err() {
            break;
        }
    }
    writable.seal()?;
    merged?;
    Ok(ExitCode::SUCCESS)
}
