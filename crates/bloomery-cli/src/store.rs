//! Filters in files: the library's native envelope (docs/format.md), opened with mmap for
//! queries, loaded whole (both checksums and every parameter checked) for updates, and
//! replaced atomically. Every variant goes through the library's one interface
//! ([`DynFilter`], [`FilterView`]): nothing here knows variants.
//!
//! What a write promises (docs/failure-model.md, tests/faults.rs):
//! - Readers and a crash see the old file or the new one, never a mix: the new bytes go to
//!   a temporary file beside the target, created exclusively (`O_EXCL`, never through a
//!   link), synced, then renamed over the target, and the directory is synced.
//! - Writers never lose each other's items: a writer locks the filter file itself
//!   (`flock`) for its whole read-modify-write, and after taking the lock checks that the
//!   name still names the file it locked (a writer that finished meanwhile replaced it);
//!   no lock files are left behind.
//! - The target stays what it was: a symlink is followed, so the file it names is updated
//!   (and locked, one lock for every name of it) and the link stays a link; the new file
//!   gets the old one's mode and owner (or the write is refused); devices, FIFOs and
//!   directories are refused, as is a file its writer may not write.
//! - A full disk or any other failure leaves the old file as it was and removes the
//!   temporary file; temporary files of writers killed with `kill -9` are removed by the
//!   next writer of the same filter.

use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bloomery::any::{self, DynFilter, FilterView};
use bloomery::file::{self, TempFile};
use bloomery::format::native::Header;
use memmap2::Mmap;

use crate::error::{CliError, Context, Result};
use crate::space;

/// Where a filter file really is: symlinks followed to the file they name, so that writing
/// through a link updates its target. For a file that does not exist yet: its directory,
/// resolved, and its name. A link to nothing is refused (creating its target would put a
/// file where the user may not expect one).
fn resolve(path: &Path) -> Result<PathBuf> {
    match fs::canonicalize(path) {
        Ok(real) => Ok(real),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            if let Ok(link) = fs::read_link(path) {
                return Err(CliError::new(format!(
                    "{}: is a symbolic link to {}, which does not exist",
                    path.display(),
                    link.display()
                )));
            }
            // `foo/` and `foo/.` name a directory: `file_name` would make them `foo`, and
            // `create` made a file there.
            use std::os::unix::ffi::OsStrExt;
            let bytes = path.as_os_str().as_bytes();
            let directory = [&b"/"[..], b"/.", b"/.."].iter().any(|end| bytes.ends_with(end))
                || bytes == b"."
                || bytes == b"..";
            let name = path.file_name().filter(|_| !directory).ok_or_else(|| {
                CliError::new(format!(
                    "{}: not a file name (it names a directory; give the file's name)",
                    path.display()
                ))
            })?;
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            Ok(fs::canonicalize(parent).with_path(parent)?.join(name))
        }
        Err(error) => Err(error).with_path(path),
    }
}

/// Refuses "-" as a filter file to write (`create -`, `merge - a.bloom`, `import x -`,
/// `add -`): elsewhere it means standard input or output (`-i -`, `export f -`), and these
/// silently made or changed a file named "-". `./-` names such a file.
pub fn refuse_dash(path: &Path) -> Result<()> {
    if path.as_os_str() == "-" {
        return Err(CliError::new(
            "-: not a filter file to write (\"-\" means standard input or output, which cannot \
             hold one here); for a file named \"-\", write ./-",
        ));
    }
    Ok(())
}

/// Refuses anything but a regular file, naming what it is.
fn regular(path: &Path, metadata: &Metadata) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let kind = metadata.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(CliError::new(format!(
        "{}: is {what}, not a filter file; left as it is",
        path.display()
    )))
}

/// Reads a whole filter file, checking everything a load checks. A file of a variant
/// updated in place may be unsealed or being updated meanwhile: it is loaded from the bits
/// read, which are valid ([`file::read_whole`]), with a note on stderr. `own`: the file
/// when the caller holds no lock on it ([`reading`]).
fn open_bytes(path: &Path, file: &File, len: u64, own: bool) -> Result<Box<dyn DynFilter>> {
    // The header first: a large file of something else costs one header's read.
    let header = file::read_header(file, len).with_path(path)?.with_path(path)?;
    space::check_memory_for(path, header.variant, len)?;
    let whole = file::read_whole(file, len).with_path(path)?;
    note(path, reading(whole.state, own.then_some((file, &whole.header))));
    whole.filter().with_path(path)
}

/// A payload as a reader finds it, an unsealed one told apart by whether its writer is at
/// work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Sealed, and its checksum holds.
    Sealed,
    /// Unsealed, no writer at work: an update in place did not finish (bits valid,
    /// checksum stale).
    Unfinished,
    /// A writer is updating it in place, or did while it was read (bits valid).
    AtWork,
}

/// What `payload` is to a reader. `own`: the reader's handle of the file, holding no lock,
/// and the header it read, which tell a writer at work from one that did not finish
/// ([`writer_was_at_work`]); `None` under the writers' lock, where an unsealed file is one
/// whose writer did not finish.
fn reading(payload: Payload, own: Option<(&File, &Header)>) -> Reading {
    match payload {
        Payload::Sealed => Reading::Sealed,
        Payload::Changing => Reading::AtWork,
        Payload::Unsealed if own.is_some_and(|(file, header)| writer_was_at_work(file, header)) => {
            Reading::AtWork
        }
        Payload::Unsealed => Reading::Unfinished,
    }
}

/// What a reader says on stderr of a payload it cannot vouch for by its checksum.
fn note(path: &Path, reading: Reading) {
    let what = match reading {
        Reading::Sealed => return,
        Reading::AtWork => {
            "being updated in place by another writer; using its bits as read (valid: every \
             finished update's are in them)"
        }
        Reading::Unfinished => {
            "unsealed (an update in place did not finish: bits valid, checksum stale); using \
             its bits; `bloomery seal` reseals it"
        }
    };
    let _ = writeln!(io::stderr(), "bloomery: note: {}: {what}", path.display());
}

/// Whether a writer was at work on `file` (the reader's own handle, holding no lock) since
/// its `header` was read: one holds the writers' lock now, or the header changed meanwhile
/// (a writer that finished reseals its file before it lets go of the lock).
fn writer_was_at_work(file: &File, header: &Header) -> bool {
    file::writer_at_work(file).unwrap_or(false)
        || file
            .metadata()
            .ok()
            .and_then(|metadata| file::read_header(file, metadata.len()).ok())
            .and_then(Result::ok)
            .as_ref()
            != Some(header)
}

/// Loads a file whole for reading (`verify`, `merge` inputs, `export`).
pub fn load(path: &Path) -> Result<Box<dyn DynFilter>> {
    let real = resolve(path)?;
    let file = file::open_for_reading(&real).with_path(path)?;
    let metadata = file.metadata().with_path(path)?;
    regular(path, &metadata)?;
    open_bytes(path, &file, metadata.len(), true)
}

/// Takes the writers' lock of `file`, waiting for it; on a terminal, says on stderr that
/// it waits when another writer holds it (a script's stderr gets no such line).
fn wait_for_lock(file: &File, path: &Path) -> io::Result<()> {
    use std::io::IsTerminal;
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(fs::TryLockError::WouldBlock) => {
            if io::stderr().is_terminal() {
                let _ = writeln!(
                    io::stderr(),
                    "bloomery: waiting for another writer of {} to finish (it holds the file's lock)",
                    path.display()
                );
            }
            file.lock()
        }
        Err(fs::TryLockError::Error(error)) => Err(error),
    }
}

/// An existing filter file, locked against other writers until dropped.
pub struct Locked {
    file: File,
    real: PathBuf,
    shown: PathBuf,
    metadata: Metadata,
}

impl Locked {
    /// Opens `path` (following symlinks) for update and waits for its writers' lock.
    /// Refuses a file that is not regular or that this user may not write.
    pub fn open(path: &Path) -> Result<Self> {
        refuse_dash(path)?;
        loop {
            let real = resolve(path)?;
            let before = fs::metadata(&real).with_path(path)?;
            regular(path, &before)?;
            // If another writer replaced the name while we waited, lock the new file.
            if let Some((file, metadata)) =
                file::lock_for_update_with(&real, |file| wait_for_lock(file, path)).with_path(path)?
            {
                return Ok(Self {
                    file,
                    real,
                    shown: path.to_owned(),
                    metadata,
                });
            }
        }
    }

    /// The name the user gave.
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// The open, locked file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The file's length when it was locked.
    pub fn len(&self) -> u64 {
        self.metadata.len()
    }

    /// The file's real name (symlinks followed).
    pub fn real(&self) -> &Path {
        &self.real
    }

    /// Whether `path` names the locked file (symlinks followed).
    pub fn is(&self, path: &Path) -> bool {
        fs::metadata(path)
            .is_ok_and(|other| other.dev() == self.metadata.dev() && other.ino() == self.metadata.ino())
    }

    /// The locked file's filter, read whole and checked, to be replaced: refused first, before
    /// the caller reads any item, when the file has other hard links ([`Self::refuse_links`]),
    /// or when the new file written beside it cannot be made there or given the file's owner,
    /// group and mode (a user who may write the file but not its directory, or who does not
    /// own it; a read-only file system): a `dedup` found out only when it saved, after
    /// printing every new line, which the next run printed again. (A disk that fills up
    /// meanwhile still fails the save.)
    pub fn load(&self) -> Result<Box<dyn DynFilter>> {
        self.refuse_links()?;
        // Made, given the attributes, and dropped (which removes it): as the save will.
        let probe = temporary_beside(&self.real, &self.shown)?;
        keep_attributes(probe.file(), &self.metadata, &self.shown)?;
        drop(probe);
        open_bytes(&self.shown, &self.file, self.metadata.len(), false)
    }

    /// Refuses to replace a file that has other names (hard links): a new file renamed over
    /// this one would leave them the old filter, and a `check` through them would answer
    /// "absent" for the items added (files updated in place change the one file, and keep
    /// every name).
    fn refuse_links(&self) -> Result<()> {
        match file::replacing_splits_links(self.metadata.nlink()) {
            Some(problem) => Err(CliError::new(format!("{}: {problem}", self.shown.display()))),
            None => Ok(()),
        }
    }

    /// Replaces the file with `filter`, keeping its mode and owner; releases the lock.
    pub fn save(self, filter: &dyn DynFilter) -> Result<()> {
        let envelope = filter.envelope();
        self.replace_with(|mut file| envelope.write_to(&mut file))
    }

    /// Replaces the file with what `write` produces, keeping its mode and owner.
    pub fn replace_with(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        self.replace_file(|temporary| temporary.fill(write))
    }

    /// Replaces the file with a temporary file that `fill` fills and syncs.
    fn replace_file(self, fill: impl FnOnce(TempFile) -> io::Result<TempFile>) -> Result<()> {
        self.refuse_links()?;
        let temporary = temporary_beside(&self.real, &self.shown)?;
        let kept = keep_attributes(temporary.file(), &self.metadata, &self.shown);
        // A failure to write the new file (a full disk, a quota) comes before the rename:
        // the file is as it was, and the temporary file is removed when dropped. (Not said
        // of the rename's errors: the directory's sync comes after it.)
        let temporary = kept.and_then(|()| {
            fill(temporary).map_err(|error| {
                CliError::new(format!(
                    "{}: {error}; left unchanged (the new file, written beside it first, was removed)",
                    self.shown.display()
                ))
            })
        })?;
        temporary.rename_over(&self.real).map(drop).with_path(&self.shown)
    }
}

/// The temporary file a whole new file is written to, beside `real`; when the directory
/// refuses it, the error names the directory (the file itself may well be writable).
fn temporary_beside(real: &Path, shown: &Path) -> Result<TempFile> {
    TempFile::beside(real).map_err(|error| {
        let directory = real.parent().unwrap_or(Path::new("."));
        CliError::new(format!(
            "{}: cannot create a file in its directory {} ({error}): the new file is written \
             beside it, then renamed over it",
            shown.display(),
            directory.display()
        ))
    })
}

/// Gives the new file the old one's permission bits and owner. A user who may write a file
/// but does not own it cannot give a new file its owner: then the write is refused rather
/// than the file silently changing hands. So is a user who owns it but is not in its group
/// (only root and the group's members may give a file that group): the new file would take
/// the user's group, and the old group's members their access to it.
fn keep_attributes(file: &File, old: &Metadata, shown: &Path) -> Result<()> {
    let mode = old.permissions().mode() & 0o7777;
    let new = file.metadata().with_path(shown)?;
    if (new.uid(), new.gid()) != (old.uid(), old.gid()) {
        std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid())).map_err(|error| {
            if new.uid() == old.uid() {
                // The user's own file: only its group could not be kept.
                let group = match group_name(old.gid()) {
                    Some(name) => format!("{} ({name})", old.gid()),
                    None => old.gid().to_string(),
                };
                return CliError::new(format!(
                    "{}: cannot keep its group {group}, which this user is not in ({error}): it \
                     is replaced by a new file, which would take another group; run as a member \
                     of that group or as root, or give the file one of your groups (chgrp)",
                    shown.display()
                ));
            }
            CliError::new(format!(
                "{}: cannot keep its owner {}:{} ({error}); run as its owner or as root",
                shown.display(),
                old.uid(),
                old.gid()
            ))
        })?;
    }
    // After chown, which clears set-user-ID bits.
    file.set_permissions(fs::Permissions::from_mode(mode))
        .with_path(shown)
}

/// The name of group `gid`, where the system knows it.
fn group_name(gid: u32) -> Option<String> {
    // SAFETY: a zeroed `group` is a valid out-parameter (integers and null pointers).
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut buffer = vec![0 as libc::c_char; 16 << 10];
    let mut found = std::ptr::null_mut();
    // SAFETY: getgrgid_r writes only `group`, `buffer` (up to the length given) and
    // `found`, which all outlive the call.
    let status = unsafe { libc::getgrgid_r(gid, &mut group, buffer.as_mut_ptr(), buffer.len(), &mut found) };
    if status != 0 || found.is_null() || group.gr_name.is_null() {
        return None;
    }
    // SAFETY: on success `gr_name` points to a NUL-terminated string in `buffer`.
    let name = unsafe { std::ffi::CStr::from_ptr(group.gr_name) };
    Some(name.to_string_lossy().into_owned())
}

/// Where a command writes a whole new file (`create`, `merge`, `import`, `export`): an
/// existing file it may replace (locked), a file to create, or standard output.
pub enum Output {
    Replace(Locked),
    Create { real: PathBuf, shown: PathBuf },
    Stdout,
}

impl Output {
    /// The output for `path`: "-" is standard output where `stdout_allowed`; an existing
    /// file only with `force` (then locked, and replaced keeping its mode and owner).
    pub fn open(path: &Path, force: bool, stdout_allowed: bool) -> Result<Self> {
        if stdout_allowed && path.as_os_str() == "-" {
            return Ok(Output::Stdout);
        }
        refuse_dash(path)?;
        let real = resolve(path)?;
        match fs::symlink_metadata(&real) {
            Ok(metadata) => {
                regular(path, &metadata)?;
                if !force {
                    return Err(CliError::new(format!(
                        "{}: already exists (use --force to replace it)",
                        path.display()
                    )));
                }
                Ok(Output::Replace(Locked::open(path)?))
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Output::Create {
                real,
                shown: path.to_owned(),
            }),
            Err(error) => Err(error).with_path(path),
        }
    }

    /// The directory the file goes to (for the disk-space check), if it is a file.
    pub fn directory(&self) -> Option<&Path> {
        match self {
            Output::Replace(locked) => locked.real.parent(),
            Output::Create { real, .. } => real.parent(),
            Output::Stdout => None,
        }
    }

    /// Writes `filter`'s file form.
    pub fn save(self, filter: &dyn DynFilter) -> Result<()> {
        let envelope = filter.envelope();
        self.write(|mut file| envelope.write_to(&mut file))
    }

    /// Writes what `write` produces: atomically for files (a new file appears whole or
    /// not at all, and never replaces one created meanwhile).
    pub fn write(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        match self {
            Output::Stdout => {
                let mut out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
                crate::output::finish(write(&mut out).and_then(|()| out.flush()))
            }
            file => file.write_file(|temporary| temporary.fill(write)),
        }
    }

    /// Writes an empty filter of a variant updated in place: `header`, then a payload of
    /// zero bytes up to `total_len` that is a hole in the file (not written; its blocks are
    /// reserved where the file system can, so that adding items cannot meet a full disk).
    pub fn write_sparse(self, header: &[u8], total_len: u64) -> Result<()> {
        self.write_file(|temporary| temporary.fill_sparse(header, total_len))
    }

    /// A new file filled by `fill`, put in place atomically.
    fn write_file(self, fill: impl FnOnce(TempFile) -> io::Result<TempFile>) -> Result<()> {
        match self {
            Output::Replace(locked) => locked.replace_file(fill),
            Output::Create { real, shown } => {
                let temporary = temporary_beside(&real, &shown)?;
                // Before the file has its name: nothing is left behind.
                let temporary = fill(temporary).map_err(|error| {
                    CliError::new(format!("{}: {error}; nothing was created", shown.display()))
                })?;
                temporary.link_as_new(&real).map_err(|error| {
                    if error.kind() == io::ErrorKind::AlreadyExists {
                        CliError::new(format!(
                            "{}: was created by another program meanwhile; nothing written",
                            shown.display()
                        ))
                    } else {
                        CliError::new(format!("{}: {error}", shown.display()))
                    }
                })
            }
            Output::Stdout => Err(CliError::new("standard output cannot hold a sparse filter")),
        }
    }
}

/// The error for a payload whose checksum does not hold (the library's words).
pub fn damaged_payload(path: &Path) -> CliError {
    CliError::new(format!(
        "{}: invalid bloomery data: {}",
        path.display(),
        bloomery::FormatProblem::PayloadChecksum
    ))
}

pub use bloomery::file::Payload;

/// A filter file mapped read-only: the header is read and checked on open, the payload
/// checksum when asked ([`Mapped::verify_payload`]).
pub struct Mapped {
    /// Before `map`: forgotten by the SIGBUS handler before the mapping goes.
    _watched: crate::sigbus::Watched,
    map: Mmap,
    file: File,
    header: Header,
    path: PathBuf,
}

impl Mapped {
    /// Maps `path` (following symlinks) and checks its header (magic, version, header
    /// checksum, length).
    pub fn open(path: &Path) -> Result<Self> {
        let real = resolve(path)?;
        let file = file::open_for_reading(&real).with_path(path)?;
        let metadata = file.metadata().with_path(path)?;
        regular(path, &metadata)?;
        // SAFETY: the map is read-only. This tool's writers either replace the file by
        // rename or, for the variants updated in place, only set bits in it (a reader then
        // sees a superset of the bits it would have seen; see `verify_payload` for the
        // checksum). A file truncated by another program while mapped raises SIGBUS, which
        // `sigbus::watch` turns into a one-line error naming it and exit status 2.
        let map = unsafe { Mmap::map(&file) }.with_path(path)?;
        let watched = crate::sigbus::watch(path, &map);
        let header = file::parse_header_settled(|| Header::parse(&map)).with_path(path)?;
        header.check_file_len(map.len() as u64).with_path(path)?;
        Ok(Self {
            _watched: watched,
            map,
            file,
            header,
            path: path.to_owned(),
        })
    }

    /// Checks the payload checksum (reads the whole payload once, from the file rather than
    /// the mapping, so the pages read do not stay resident). An unsealed file is not
    /// checked: its checksum is stale. A mismatch is damage only if the header is still the
    /// one read on open; otherwise a writer changed the file meanwhile.
    pub fn verify_payload(&self) -> Result<Payload> {
        let header = &self.header;
        file::judge_payload(
            header,
            || file::payload_intact(&self.file, header),
            || file::parse_header_settled(|| Header::parse(&self.map)).ok(),
        )
        .with_path(&self.path)?
        .ok_or_else(|| damaged_payload(&self.path))
    }

    /// What `payload` (this file's, as [`verify_payload`](Self::verify_payload) judged it)
    /// is to this reader ([`reading`]).
    pub fn reading(&self, payload: Payload) -> Reading {
        reading(payload, Some((&self.file, &self.header)))
    }

    /// Says on stderr what `payload` (this file's) is, if not sealed.
    pub fn note(&self, payload: Payload) {
        note(&self.path, self.reading(payload));
    }

    /// The file's length.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The mapped payload.
    pub fn payload(&self) -> &[u8] {
        &self.map[self.header.payload_offset..]
    }

    /// The mapped payload, for letting go of pages read; to be used only while `self`
    /// lives (the region holds the mapping's address, not a borrow of it).
    pub fn region(&self) -> bloomery::file::Region {
        // SAFETY: `map` is a read-only mapping of the whole file; the callers use the
        // region only while they hold `self`, which holds the mapping.
        unsafe { bloomery::file::Region::of(&self.map, self.header.payload_offset) }
    }

    /// A view that answers queries: the classic, blocked and split-block variants from the
    /// mapped bytes in place, the others built in memory (refused first when the copy
    /// would not fit: [`space::check_memory_for_view`]).
    pub fn view(&self) -> Result<Box<dyn FilterView + '_>> {
        let variant = self.header.variant;
        if !bloomery::in_place::updates_in_place(variant) {
            space::check_memory_for_view(&self.path, variant, self.file_len())?;
        }
        any::view(&self.header, &self.map[self.header.payload_offset..]).with_path(&self.path)
    }
}
