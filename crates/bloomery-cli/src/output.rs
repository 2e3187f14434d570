//! Standard output that may be closed, full or a pipe whose reader left: every write's
//! error is returned, never a panic ("failed printing to stdout").

use std::io;
use std::path::Path;

use crate::error::{Context, Result};

/// The end of a command's output: a reader that went away (`bloomery info f | head -1`)
/// ends the output quietly; any other error (`> /dev/full`: no space) is the command's
/// error.
pub fn finish(result: io::Result<()>) -> Result<()> {
    match result {
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.with_path(Path::new("<stdout>")),
    }
}
