//! One-line errors: what failed, on which file, and why. Never a panic or a backtrace.

use std::fmt::Display;
use std::path::Path;

/// An error to print as `bloomery: MESSAGE` before exiting with status 2.
#[derive(Debug)]
pub struct CliError(String);

impl CliError {
    pub fn new(message: impl Into<String>) -> Self {
        CliError(message.into())
    }
}

impl Display for CliError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;

/// What an add that read `count` items and then stopped at `read`'s error did: the error
/// says that the items before it were added (an add sends what it read before a bad item).
pub fn items_before_added(read: Result<()>, count: u64) -> Result<()> {
    match read {
        Err(error) if count == 1 => Err(CliError(format!("{error}; the item before it was added"))),
        Err(error) if count > 0 => Err(CliError(format!(
            "{error}; the {count} items before it were added"
        ))),
        other => other,
    }
}

/// Prefixes an error with the file it concerns.
pub trait Context<T> {
    fn with_path(self, path: &Path) -> Result<T>;
}

impl<T, E: Display> Context<T> for std::result::Result<T, E> {
    fn with_path(self, path: &Path) -> Result<T> {
        self.map_err(|error| CliError(format!("{}: {error}", path.display())))
    }
}
