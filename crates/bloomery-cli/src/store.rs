//! Filters in files: the library's native envelope (docs/format.md), opened with mmap for
//! queries, loaded whole (payload checksum checked) for updates, written atomically
//! (temporary file, fsync, rename, fsync of the directory) under a lock file so that
//! concurrent writers never lose each other's items.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bloomery::blocked::{BlockedBloomFilterView, SeededFoldHash};
use bloomery::classic::BloomFilterView;
use bloomery::format::native::{self, Header, Persist, Variant};
use bloomery::{BlockedBloomFilter, BloomFilter};
use memmap2::Mmap;

use crate::error::{CliError, Context, Result};

/// The filter variants the tool creates and reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Guava-compatible bits (exportable to Java's BloomFilter.readFrom).
    Classic,
    /// Cache-line blocked: one memory access per item, the fastest.
    Blocked,
}

/// A filter loaded whole, to be changed.
#[derive(Clone, Debug)]
pub enum Filter {
    Classic(BloomFilter),
    Blocked(BlockedBloomFilter),
}

impl Filter {
    /// A new empty filter.
    pub fn create(kind: Kind, expected_items: u64, fpp: f64) -> bloomery::Result<Self> {
        Ok(match kind {
            Kind::Classic => Filter::Classic(BloomFilter::with_fpp(expected_items, fpp)?),
            Kind::Blocked => Filter::Blocked(BlockedBloomFilter::with_fpp(expected_items, fpp)?),
        })
    }

    /// Adds an item; true when it was not (probably) there before.
    #[inline]
    pub fn insert(&mut self, item: &[u8]) -> bool {
        match self {
            Filter::Classic(filter) => filter.insert(item),
            Filter::Blocked(filter) => filter.insert(item),
        }
    }

    /// The header and the payload of the file form.
    fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        let (variant, params, payload) = match self {
            Filter::Classic(filter) => (Variant::Classic, filter.params(), filter.payload()),
            Filter::Blocked(filter) => (Variant::Blocked, filter.params(), filter.payload()),
        };
        (native::encode_header(variant, &params, &payload), payload)
    }

    /// Reads a whole file's bytes, checking both checksums.
    pub fn decode(bytes: &[u8]) -> bloomery::Result<Self> {
        let (header, payload) = native::decode(bytes)?;
        Ok(match header.variant {
            Variant::Blocked => Filter::Blocked(BlockedBloomFilter::from_parts(&header.params, payload)?),
            Variant::Classic => Filter::Classic(BloomFilter::from_parts(&header.params, payload)?),
            other => {
                return Err(bloomery::Error::Format {
                    format: "bloomery",
                    problem: bloomery::FormatProblem::Inconsistent(format!(
                        "variant {other:?} is not served by this tool"
                    )),
                });
            }
        })
    }

    /// Loads a file whole.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = fs::read(path).with_path(path)?;
        Filter::decode(&bytes).with_path(path)
    }

    /// Writes the filter to `path` atomically: readers see the old file or the new one,
    /// never a mix, whatever happens to this process.
    pub fn save(&self, path: &Path) -> Result<()> {
        let (header, payload) = self.encode();
        write_atomically(path, &[&header, &payload]).with_path(path)
    }

    /// Union (`merge`) or intersection with another filter of the same variant and shape.
    pub fn combine(&mut self, other: &Filter, union: bool) -> bloomery::Result<()> {
        match (self, other) {
            (Filter::Classic(mine), Filter::Classic(theirs)) => {
                if union {
                    mine.union(theirs)
                } else {
                    mine.intersection(theirs)
                }
            }
            (Filter::Blocked(mine), Filter::Blocked(theirs)) => {
                if union {
                    mine.union(theirs)
                } else {
                    mine.intersection(theirs)
                }
            }
            _ => Err(bloomery::Error::Incompatible {
                reason: "one filter is classic, the other blocked".into(),
            }),
        }
    }
}

/// A filter file mapped read-only: only the header is read and checked on open.
pub struct Mapped {
    map: Mmap,
    header: Header,
    path: PathBuf,
}

/// A read-only view of a mapped filter.
pub enum View<'a> {
    Classic(BloomFilterView<'a>),
    Blocked(BlockedBloomFilterView<'a, SeededFoldHash>),
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

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The payload bytes.
    pub fn payload(&self) -> &[u8] {
        &self.map[self.header.payload_offset..]
    }

    /// The file's length.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Checks the payload checksum (reads every byte).
    pub fn verify(&self) -> Result<()> {
        self.header.verify_payload(self.payload()).with_path(&self.path)
    }

    /// A view that answers queries from the mapped bytes.
    pub fn view(&self) -> Result<View<'_>> {
        let params = &self.header.params;
        let view = match self.header.variant {
            Variant::Blocked => {
                BlockedBloomFilterView::from_parts(params, self.payload()).map(|v| v.map(View::Blocked))
            }
            Variant::Classic => {
                BloomFilterView::from_parts(params, self.payload()).map(|v| v.map(View::Classic))
            }
            other => {
                return Err(CliError::new(format!(
                    "{}: variant {other:?} is not served by this tool",
                    self.path.display()
                )));
            }
        };
        view.with_path(&self.path)?.ok_or_else(|| {
            CliError::new(format!(
                "{}: payload cannot be used in place",
                self.path.display()
            ))
        })
    }
}

impl View<'_> {
    /// Whether the item is probably present.
    pub fn contains(&self, item: &[u8]) -> bool {
        match self {
            View::Classic(view) => view.contains(item),
            View::Blocked(view) => view.contains(item),
        }
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

/// Writes `parts` to a temporary file beside `path`, syncs it, renames it over `path` and
/// syncs the directory, so a crash leaves the old file or the new one.
pub fn write_atomically(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let temporary = sibling(path, &format!(".tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = File::create(&temporary)?;
        for part in parts {
            file.write_all(part)?;
        }
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
