//! Filters in files: the library's native envelope (docs/format.md), opened with mmap for
//! queries, loaded whole (both checksums and every parameter checked) for updates, written
//! atomically (temporary file, fsync, rename, fsync of the directory) under a lock file so
//! that concurrent writers never lose each other's items. Every variant goes through the
//! library's one interface ([`DynFilter`], [`FilterView`]): nothing here knows variants.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use bloomery::any::{self, DynFilter, FilterView};
use bloomery::format::native::Header;
use memmap2::Mmap;

use crate::error::{Context, Result};

/// Loads a file whole, checking everything a load checks.
pub fn load(path: &Path) -> Result<Box<dyn DynFilter>> {
    let bytes = fs::read(path).with_path(path)?;
    any::open(&bytes).with_path(path)
}

/// Writes `filter` to `path` atomically: readers see the old file or the new one, never a
/// mix, whatever happens to this process.
pub fn save(path: &Path, filter: &dyn DynFilter) -> Result<()> {
    let envelope = filter.envelope();
    write_atomically(path, |file| envelope.write_to(file)).with_path(path)
}

/// A filter file mapped read-only: only the header is read and checked on open.
pub struct Mapped {
    map: Mmap,
    header: Header,
    path: PathBuf,
}

impl Mapped {
    /// Maps `path` and checks its header (magic, version, header checksum, length).
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).with_path(path)?;
        // SAFETY: the map is read-only; writers replace the file by rename, never in place,
        // so the mapped bytes do not change under us.
        let map = unsafe { Mmap::map(&file) }.with_path(path)?;
        let header = Header::parse(&map).with_path(path)?;
        header.check_file_len(map.len() as u64).with_path(path)?;
        Ok(Self {
            map,
            header,
            path: path.to_owned(),
        })
    }

    /// The file's length.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// A view that answers queries: the classic and blocked variants from the mapped bytes
    /// in place, the others built in memory.
    pub fn view(&self) -> Result<Box<dyn FilterView + '_>> {
        any::view(&self.header, &self.map[self.header.payload_offset..]).with_path(&self.path)
    }
}

/// The lock file that serialises writers of `path`.
pub struct WriteLock {
    _file: File,
}

impl WriteLock {
    /// Waits for and takes the exclusive lock on `path`'s writers (`PATH.lock`, kept
    /// beside it: locking the filter file itself would lock the inode that a rename
    /// replaces).
    pub fn acquire(path: &Path) -> Result<Self> {
        let lock_path = sibling(path, ".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_path(&lock_path)?;
        file.lock().with_path(&lock_path)?;
        Ok(Self { _file: file })
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|name| name.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// Writes what `write` produces to a temporary file beside `path`, syncs it, renames it
/// over `path` and syncs the directory, so a crash leaves the old file or the new one.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let temporary = sibling(path, &format!(".tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = BufWriter::with_capacity(1 << 20, File::create(&temporary)?);
        write(&mut file)?;
        let file = file.into_inner().map_err(|error| error.into_error())?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temporary, path)?;
        let directory = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        File::open(directory)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}
