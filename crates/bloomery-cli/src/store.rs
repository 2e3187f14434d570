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

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use bloomery::any::{self, DynFilter, FilterView};
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
            let name = path
                .file_name()
                .ok_or_else(|| CliError::new(format!("{}: not a file name", path.display())))?;
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            Ok(fs::canonicalize(parent).with_path(parent)?.join(name))
        }
        Err(error) => Err(error).with_path(path),
    }
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
        "{}: is {what}, not a filter file; refusing to replace it",
        path.display()
    )))
}

/// Reads a whole filter file, checking everything a load checks.
fn open_bytes(path: &Path, file: &mut File, len: u64) -> Result<Box<dyn DynFilter>> {
    space::check_memory_for(path, len)?;
    let mut bytes = Vec::with_capacity(len as usize);
    file.read_to_end(&mut bytes).with_path(path)?;
    any::open(&bytes).with_path(path)
}

/// Loads a file whole for reading (`verify`, `merge` inputs, `export`).
pub fn load(path: &Path) -> Result<Box<dyn DynFilter>> {
    let real = resolve(path)?;
    let mut file = File::open(&real).with_path(path)?;
    let metadata = file.metadata().with_path(path)?;
    regular(path, &metadata)?;
    open_bytes(path, &mut file, metadata.len())
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
        loop {
            let real = resolve(path)?;
            let before = fs::metadata(&real).with_path(path)?;
            regular(path, &before)?;
            // Read and write: a file its writer may not write is refused here, as a
            // program writing it in place would be (rename needs only the directory).
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&real)
                .with_path(path)?;
            file.lock().with_path(path)?;
            let metadata = file.metadata().with_path(path)?;
            // The lock is on the file we opened; if another writer replaced the name
            // while we waited, lock the new file instead.
            match fs::metadata(&real) {
                Ok(now) if now.dev() == metadata.dev() && now.ino() == metadata.ino() => {
                    remove_stale_temporaries(&real);
                    return Ok(Self {
                        file,
                        real,
                        shown: path.to_owned(),
                        metadata,
                    });
                }
                _ => continue,
            }
        }
    }

    /// The locked file's filter, read whole and checked.
    pub fn load(&mut self) -> Result<Box<dyn DynFilter>> {
        let len = self.metadata.len();
        open_bytes(&self.shown, &mut self.file, len)
    }

    /// Replaces the file with `filter`, keeping its mode and owner; releases the lock.
    pub fn save(self, filter: &dyn DynFilter) -> Result<()> {
        let envelope = filter.envelope();
        self.replace_with(|mut file| envelope.write_to(&mut file))
    }

    /// Replaces the file with what `write` produces, keeping its mode and owner.
    pub fn replace_with(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        let temporary = Temporary::beside(&self.real).with_path(&self.shown)?;
        let kept = keep_attributes(&temporary.file, &self.metadata, &self.shown);
        let temporary = kept.and_then(|()| temporary.fill(write).with_path(&self.shown))?;
        temporary.rename_over(&self.real).with_path(&self.shown)
    }
}

/// Gives the new file the old one's permission bits and owner. A user who may write a file
/// but does not own it cannot give a new file its owner: then the write is refused rather
/// than the file silently changing hands.
fn keep_attributes(file: &File, old: &Metadata, shown: &Path) -> Result<()> {
    let mode = old.permissions().mode() & 0o7777;
    let new = file.metadata().with_path(shown)?;
    if (new.uid(), new.gid()) != (old.uid(), old.gid()) {
        std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid())).map_err(|error| {
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
            Output::Replace(locked) => locked.replace_with(write),
            Output::Create { real, shown } => {
                let temporary = Temporary::beside(&real).with_path(&shown)?;
                let temporary = temporary.fill(write).with_path(&shown)?;
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
            Output::Stdout => {
                let mut out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
                crate::output::finish(write(&mut out).and_then(|()| out.flush()))
            }
        }
    }
}

/// A temporary file beside a target, removed on drop unless it was renamed or linked into
/// place.
struct Temporary {
    file: File,
    path: PathBuf,
    done: bool,
}

/// The name prefix of `target`'s temporary files: `.NAME.` (then the writer's process id,
/// a unique number and `.tmp`).
fn temporary_prefix(target: &Path) -> String {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    format!(".{name}.")
}

impl Temporary {
    /// Creates `.NAME.PID.UNIQUE.tmp` beside `target`, exclusively (never opening an
    /// existing file or following a link), readable and writable as the umask allows.
    fn beside(target: &Path) -> io::Result<Self> {
        let directory = target.parent().unwrap_or(Path::new("."));
        let prefix = temporary_prefix(target);
        let pid = std::process::id();
        let mut unique = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() as u64);
        loop {
            let path = directory.join(format!("{prefix}{pid}.{unique:x}.tmp"));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(Self {
                        file,
                        path,
                        done: false,
                    });
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                    unique = unique.wrapping_add(1);
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Writes the content and syncs it to disk.
    fn fill(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<Self> {
        let mut writer = BufWriter::with_capacity(1 << 20, &self.file);
        write(&mut writer)?;
        writer.flush()?;
        drop(writer);
        self.file.sync_all()?;
        Ok(self)
    }

    /// Renames the file over `target` and syncs the directory.
    fn rename_over(mut self, target: &Path) -> io::Result<()> {
        fs::rename(&self.path, target)?;
        self.done = true;
        sync_directory(target)
    }

    /// Gives the file the name `target` only if no file has it (a hard link, which fails
    /// when the name exists), then drops the temporary name and syncs the directory.
    fn link_as_new(self, target: &Path) -> io::Result<()> {
        fs::hard_link(&self.path, target)?;
        sync_directory(target)
        // Drop removes the temporary name.
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.path);
        }
    }
}

fn sync_directory(target: &Path) -> io::Result<()> {
    let directory = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(directory)?.sync_all()
}

/// Removes temporary files of `target` left by writers that were killed: those whose
/// process is gone (`/proc/PID` absent). Called under the lock, so no live writer of this
/// filter can be using one.
fn remove_stale_temporaries(target: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let (Some(directory), prefix) = (target.parent(), temporary_prefix(target)) else {
        return;
    };
    let Ok(entries) = fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|name| name.strip_prefix(&prefix))
            .and_then(|rest| rest.strip_suffix(".tmp"))
        else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|pid| pid.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// A filter file mapped read-only: the header is read and checked on open, the payload
/// checksum when asked ([`Mapped::verify_payload`]).
pub struct Mapped {
    map: Mmap,
    header: Header,
    path: PathBuf,
}

impl Mapped {
    /// Maps `path` (following symlinks) and checks its header (magic, version, header
    /// checksum, length).
    pub fn open(path: &Path) -> Result<Self> {
        let real = resolve(path)?;
        let file = File::open(&real).with_path(path)?;
        let metadata = file.metadata().with_path(path)?;
        regular(path, &metadata)?;
        crate::sigbus::guard(path);
        // SAFETY: the map is read-only; this tool's writers replace the file by rename,
        // never in place, so the mapped bytes do not change under us. A file truncated by
        // another program while mapped raises SIGBUS, which `sigbus::guard` turns into a
        // one-line error and exit status 2.
        let map = unsafe { Mmap::map(&file) }.with_path(path)?;
        let header = Header::parse(&map).with_path(path)?;
        header.check_file_len(map.len() as u64).with_path(path)?;
        Ok(Self {
            map,
            header,
            path: path.to_owned(),
        })
    }

    /// Checks the payload checksum (reads the whole file once).
    pub fn verify_payload(&self) -> Result<()> {
        self.header
            .verify_payload(&self.map[self.header.payload_offset..])
            .with_path(&self.path)
    }

    /// The file's length.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// A view that answers queries: the classic, blocked and split-block variants from the mapped bytes
    /// in place, the others built in memory.
    pub fn view(&self) -> Result<Box<dyn FilterView + '_>> {
        any::view(&self.header, &self.map[self.header.payload_offset..]).with_path(&self.path)
    }
}
