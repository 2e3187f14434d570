//! Room for a filter: a new filter is refused before anything is allocated when it would
//! not fit the memory available (when it is built in memory: not for `create` of the
//! classic, blocked and split-block variants, written as a sparse file and updated in
//! place), the disk it goes to (a sparse file's blocks are reserved when it is created),
//! or the user's `--max-bytes`; a file to update by copy is refused when it would not fit
//! in memory (files updated in place are mapped, never loaded), as is a file queried from
//! a copy in memory (`check`, `info`) when the copy would not fit.
//! Measured before this check: `create --items 1000 --fpp 1e-21` aborted trying to
//! allocate 239 GB, and `--fpp 1e-20` wrote a 24 GB file using 23.4 GB of RSS on a 24 GB
//! machine.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use bloomery::any::{DynFilter, Spec};
use bloomery::format::native::Variant;
use bloomery::sizing::{Rate, blocked_costs_more};
// 90% of what the kernel estimates is available: a 23.9 GB filter on this 24 GB machine
// (MemAvailable 24.7 GB) does fit, and leaves the machine nothing.
use bloomery::file::memory_available;

use crate::error::{CliError, Result};

/// What a new filter may take.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// The user's own cap, if any.
    pub max_bytes: Option<u64>,
    /// Skip the memory and disk checks (a deliberately big filter on a machine with swap
    /// or overcommit).
    pub no_space_check: bool,
}

/// Bytes an unprivileged user may still write in the file system holding `directory`.
fn disk_available(directory: &Path) -> Option<u64> {
    let path = CString::new(directory.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed statvfs is a valid out-parameter; `path` is a NUL-terminated string
    // that outlives the call.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return None;
    }
    (stats.f_bavail as u64).checked_mul(stats.f_frsize as u64)
}

/// Refuses a new filter that would not fit, before it is allocated; `directory` is where
/// its file goes (none for standard output or a filter kept only in memory); `in_memory`
/// says whether the filter is built in memory (a filter written as a sparse file, for the
/// variants updated in place, is not: then only the disk and `--max-bytes` apply).
pub fn check_new_filter(
    spec: &Spec,
    directory: Option<&Path>,
    limits: Limits,
    in_memory: bool,
) -> Result<()> {
    let bytes = spec
        .memory_bytes()
        .map_err(|error| CliError::new(error.to_string()))?;
    let what = || {
        format!(
            "{} {} filter for {} items at fpp {} takes {bytes} bytes",
            spec.variant.article(),
            spec.variant,
            spec.expected_items,
            Rate(spec.fpp)
        )
    };
    let hint = "lower --items or raise --fpp";
    if let Some(max) = limits.max_bytes
        && bytes > max
    {
        return Err(CliError::new(format!(
            "{}, more than --max-bytes {max}; {hint}",
            what()
        )));
    }
    // --no-space-check skips the two checks below, not the warning after them.
    if !limits.no_space_check
        && in_memory
        && let Some(available) = memory_available()
        && bytes > available
    {
        return Err(CliError::new(format!(
            "{}, more than the memory it may use (90% of the available, {available} bytes); {hint}, or pass --no-space-check",
            what()
        )));
    }
    if !limits.no_space_check
        && let Some(directory) = directory
        && let Some(available) = disk_available(directory)
        && bytes > available
    {
        return Err(CliError::new(format!(
            "{}, more than the disk space available in {} ({available} bytes); {hint}, or pass --no-space-check",
            what(),
            directory.display()
        )));
    }
    warn_if_blocked_costs_more(spec);
    Ok(())
}

/// Warns when a new blocked filter takes more than twice the memory that a filter hashing
/// as Guava does needs to meet the same rate ([`blocked_costs_more`]): a blocked filter
/// sets 8 bits per item whatever its rate (`bloomery create f -n 10000000 -p 1e-8` prints
/// the figures). `--variant classic` is named where Guava's own sizing, which the classic
/// filter keeps, is within a tenth of the bits that meet the rate.
fn warn_if_blocked_costs_more(spec: &Spec) {
    if spec.variant != Variant::Blocked {
        return;
    }
    if let Some(cost) = blocked_costs_more(spec.expected_items, spec.fpp) {
        let _ = writeln!(
            std::io::stderr(),
            "bloomery: warning: {}",
            cost.warning("--variant classic")
        );
    }
}

/// The most a filter in memory may grow to (a growing filter's new sub-filter, a rotating
/// filter's new generation): what it takes now plus the memory it may still use, and at
/// most the user's `--max-bytes`. Passed to `insert_within`, which refuses the growth step
/// that would pass it, before allocating: an error line instead of an abort, or of a
/// machine driven into swap by a chain that doubles.
pub fn growth_limit(filter: &dyn DynFilter, limits: Limits) -> u64 {
    let now = filter.stats().memory_bytes;
    let memory = if limits.no_space_check {
        None
    } else {
        memory_available().map(|available| now.saturating_add(available))
    };
    [memory, limits.max_bytes]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(u64::MAX)
}

/// Refuses to load a file that would not fit in memory: its bytes, then the filter made
/// from them (`file::load_bytes`: twice its size for a moment, more for a retouched
/// filter's lists; as the Python package counts them).
pub fn check_memory_for(path: &Path, variant: Variant, len: u64) -> Result<()> {
    let needed = bloomery::file::load_bytes(variant, len);
    refuse_past_memory(
        path,
        len,
        needed,
        format!("loading it takes {needed} bytes for a moment"),
    )
}

/// Refuses to answer from a mapped file of a variant built in memory to be queried (all
/// but classic, blocked and split-block, which are answered from the mapping): the copy
/// takes what a load takes ([`check_memory_for`]) less the file's bytes, which the mapping
/// holds. Without it, `check` and `info` of such a file larger than memory aborted the
/// process ("memory allocation of N bytes failed", status 134).
pub fn check_memory_for_view(path: &Path, variant: Variant, len: u64) -> Result<()> {
    let needed = bloomery::file::load_bytes(variant, len).saturating_sub(len);
    let takes = format!(
        "{} {variant} filter is answered from a copy in memory, which takes {needed} bytes",
        variant.article()
    );
    refuse_past_memory(path, len, needed, takes)
}

/// The error for the file at `path`, `len` bytes, when `needed` bytes (what `takes` says
/// they are for) are more than the memory the tool may use.
fn refuse_past_memory(path: &Path, len: u64, needed: u64, takes: String) -> Result<()> {
    match memory_available() {
        Some(available) if needed > available => Err(CliError::new(format!(
            "{}: the file is {len} bytes; {takes}, more than the memory it may use (90% of the available, {available} bytes)",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// The most bytes `import` reads: half the memory the tool may use (the bytes read and the
/// filter made from them are held at once, as [`check_memory_for`] counts a load).
#[derive(Clone, Copy, Debug)]
pub struct InputLimit {
    pub bytes: u64,
    /// The memory the tool may use, if known.
    available: Option<u64>,
}

impl InputLimit {
    /// The refusal of an input longer than the limit.
    pub fn exceeded(self, path: &Path) -> CliError {
        CliError::new(format!(
            "{}: the input is more than {} bytes; importing it takes twice that for a moment, \
             more than the memory it may use (90% of the available, {} bytes); nothing was written",
            path.display(),
            self.bytes,
            self.available.unwrap_or(u64::MAX)
        ))
    }
}

/// See [`InputLimit`]; no limit where the memory available is not known.
pub fn input_limit() -> InputLimit {
    let available = memory_available();
    InputLimit {
        bytes: available.map_or(u64::MAX - 1, |available| available / 2),
        available,
    }
}
