//! Filter files updated in place on disk (docs/format.md, "Sealed and unsealed files"): the
//! file operations every writer of the classic, blocked and split-block files does around
//! the bits it sets through a shared writable mapping ([`crate::in_place`]), whichever tool
//! it is (the CLI, the Python package). Locking the file against other writers is the
//! caller's.
//!
//! - Before the first bit changes: the header marked unsealed, one `pwrite` at offset 0 (at
//!   most one page, never torn by a killed process), then a sync.
//! - Bits are only ever set, so at every instant the file holds a superset of the bits of
//!   every update that finished: never a false negative.
//! - At the end: sealed, every changed page synced first, then the payload checksum
//!   computed from the file and the sealed header written and synced. A file whose writer
//!   was killed is left unsealed (bits valid, checksum stale); the next writer seals it.
//!
//! [`Sealing`] does both, and refuses to write a header over a file that another program
//! changed meanwhile; its example shows a whole update.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use memmap2::MmapMut;
use xxhash_rust::xxh3::Xxh3;

use crate::format::native::Header;
use crate::in_place::Locality;

/// The page size assumed for the resident-memory arithmetic (larger pages only make the
/// arithmetic cautious).
pub const PAGE: u64 = 4096;

/// The window: how many bytes of pages a tool updating or reading a filter file in place
/// touches between two releases of its mapped pages ([`Region::release`]), when the file is
/// larger: 1 GiB, or the environment variable `BLOOMERY_WINDOW_BYTES` (for tests and
/// tuning; at least one page). Enough random items touch every page of a filter, and a
/// shared file mapping counts each page touched as the process's resident memory until it
/// lets go of it.
pub fn window_bytes() -> u64 {
    std::env::var("BLOOMERY_WINDOW_BYTES")
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
        .map_or(1 << 30, |bytes| bytes.max(PAGE))
}

/// How many items an update in place inserts between two [`Region::release`]s of a payload
/// larger than `window` bytes, one item at a time or in batches not grouped by region: as
/// many as touch at most `window` bytes of pages, with `locality`'s pages per item.
///
/// The kernel may map more than the pages touched: a read fault on a file mapping also
/// maps up to 15 neighbours of the page that are in the page cache (Linux's
/// "fault-around", 64 KiB; `MADV_RANDOM` does not turn it off), so on a file that is
/// cached the mapped part can reach several windows between two releases. Releasing 16
/// times as often would bound it to the window, at the price of 16 times as many walks
/// over the whole payload's page tables (each release is one): for a large file, more
/// than the inserts themselves cost. The pages stay in the page cache either way, which
/// the kernel reclaims as it needs.
pub fn items_per_release(window: u64, locality: Locality) -> usize {
    let pages_per_item = match locality {
        Locality::Scattered { probes } => u64::from(probes.max(1)),
        Locality::Ordered => 1,
    };
    (window / PAGE / pages_per_item).max(1) as usize
}

/// How many bytes of a payload larger than `window` an update changes at a time when it can
/// choose (a batch grouped by where its bits are, a union): 64 MiB, or a sixteenth of a
/// smaller window; the pages of each such region are let go of before the next.
pub fn region_bytes(window: u64) -> u64 {
    (window / 16).clamp(16 * PAGE, 64 << 20)
}

/// The payload of a file mapping, for telling the kernel which of its pages to map ahead or
/// let go of: an address and two numbers, copied freely, made by the unsafe [`Region::of`]
/// (whose caller promises that the mapping outlives every use).
#[derive(Clone, Copy, Debug)]
pub struct Region {
    base: *const u8,
    map_len: u64,
    payload_offset: u64,
}

// SAFETY: a Region is an address and two lengths, never dereferenced: it only names pages
// to `madvise`, which any thread may call.
unsafe impl Send for Region {}
// SAFETY: as for Send.
unsafe impl Sync for Region {}

impl Region {
    /// The payload of `map` from `payload_offset`.
    ///
    /// # Safety
    /// `map` must be the whole of a mapping of a file, shared or read-only (letting go of
    /// such pages keeps their contents; letting go of anonymous or private pages would
    /// zero them), and the mapping must stay mapped for as long as the region (or a copy)
    /// is used: afterwards its addresses may belong to other memory.
    pub unsafe fn of(map: &[u8], payload_offset: usize) -> Self {
        Self {
            base: map.as_ptr(),
            map_len: map.len() as u64,
            payload_offset: payload_offset as u64,
        }
    }

    /// The whole pages inside bytes `from..to` of the payload, as an address and a length.
    fn pages(self, from: u64, to: u64) -> Option<(*mut libc::c_void, usize)> {
        let start = (self.payload_offset + from).next_multiple_of(PAGE);
        let end = (self.payload_offset + to).min(self.map_len) / PAGE * PAGE;
        // SAFETY (of the callers' use): start < end <= map_len, so the range lies inside
        // the mapping that `base` starts.
        (start < end).then(|| {
            (
                self.base.wrapping_add(start as usize) as *mut libc::c_void,
                (end - start) as usize,
            )
        })
    }

    /// Lets go of the mapped pages of bytes `from..to` of the payload: they leave this
    /// process's resident memory; their contents, changed ones included, stay in the file's
    /// page cache and are written back by the kernel (and synced by [`Sealing::seal`]).
    pub fn release(self, from: u64, to: u64) {
        if let Some((address, len)) = self.pages(from, to) {
            // SAFETY: MADV_DONTNEED on a shared file mapping (or a read-only one) only
            // unmaps pages from this process; the file's contents are kept. The range lies
            // inside the mapping, still mapped (both promised by `Region::of`'s caller).
            unsafe {
                libc::madvise(address, len, libc::MADV_DONTNEED);
            }
        }
    }

    /// Maps the pages of bytes `from..to` of the payload writable in one call (a hint: a
    /// kernel without it leaves them to be mapped by the writes themselves).
    #[cfg(target_os = "linux")]
    pub fn populate(self, from: u64, to: u64) {
        if let Some((address, len)) = self.pages(from, to) {
            // SAFETY: MADV_POPULATE_WRITE faults in the range of a file mapping as a write
            // would, without changing any byte (a read-only mapping refuses it). The range
            // lies inside the mapping, still mapped (`Region::of`).
            unsafe {
                libc::madvise(address, len, libc::MADV_POPULATE_WRITE);
            }
        }
    }

    /// As on Linux; elsewhere nothing (the writes map the pages).
    #[cfg(not(target_os = "linux"))]
    pub fn populate(self, from: u64, to: u64) {
        let _ = (from, to);
    }
}

/// A new file beside a filter file, filled, synced and then put in its place atomically
/// ([`rename_over`](Self::rename_over) an existing file, or [`link_as_new`](Self::link_as_new)
/// where none may exist): a crash leaves the old file or the new one, whole. Removed when
/// dropped unless it was put in place.
///
/// It is named `.NAME.PID.UNIQUE.tmp` beside `NAME`, created exclusively (never through a
/// link or onto another file), so that every tool's writers find the files of writers that
/// were killed: [`remove_stale_temporaries`]. A `NAME` too long for that to fit in 255
/// bytes is shortened to its start, `~` and a hash of the whole name
/// ([`temporary_name_part`]).
///
/// ```
/// use std::io::Write;
///
/// let dir = std::env::temp_dir().join(format!("bloomery-temp-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let target = dir.join("seen.bloom");
/// std::fs::write(&target, b"old")?;
/// let new = bloomery::file::TempFile::beside(&target)?.fill(|out| out.write_all(b"new"))?;
/// new.rename_over(&target)?;
/// assert_eq!(std::fs::read(&target)?, b"new");
/// assert_eq!(std::fs::read_dir(&dir)?.count(), 1); // no temporary file left
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct TempFile {
    file: File,
    path: PathBuf,
    done: bool,
}

/// The longest name part of a temporary file's name such that `.PART.PID.UNIQUE.tmp` fits
/// in the 255 bytes a file name may have (NAME_MAX) with the longest process id (10
/// digits) and unique number (16 hexadecimal digits): 222 bytes.
const TEMPORARY_PART_MAX: usize = 255 - ".".len() - ".4294967295.ffffffffffffffff.tmp".len();

/// What stands for `target`'s name in the names of its temporary files: the name itself
/// (lossily UTF-8) when it is at most 222 bytes (`TEMPORARY_PART_MAX`); else its start (whole
/// characters), `~` and 16 hexadecimal digits of a hash of the whole name (XXH3-64 of its
/// bytes), 222 bytes at most: a name of up to 255 bytes then gets temporary files whose
/// names fit too (they once did not: "File name too long" for any name past 225 bytes).
/// Two long names that start alike differ in their hashes, so the writers of one never
/// take the other's temporary files for their own.
///
/// ```
/// use std::path::Path;
///
/// use bloomery::file::temporary_name_part;
///
/// assert_eq!(temporary_name_part(Path::new("/data/urls.bloom")), "urls.bloom");
/// let long = "u".repeat(250) + ".bloom";
/// let part = temporary_name_part(Path::new(&long));
/// assert_eq!(part.len(), 222);
/// assert!(part.starts_with("uuu") && part.contains('~'));
/// ```
pub fn temporary_name_part(target: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let name = target.file_name().unwrap_or_default();
    let lossy = name.to_string_lossy();
    if lossy.len() <= TEMPORARY_PART_MAX {
        return lossy.into_owned();
    }
    let hash = xxhash_rust::xxh3::xxh3_64(name.as_bytes());
    let mut keep = TEMPORARY_PART_MAX - "~0123456789abcdef".len();
    while !lossy.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}~{hash:016x}", &lossy[..keep])
}

/// A [`TempFile`]'s unique number when made now: the nanoseconds since the epoch (which
/// [`remove_stale_temporaries`] checks against the file's times).
fn made_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

/// The name prefix of `target`'s temporary files: `.NAME.` (then the writer's process id,
/// a unique number and `.tmp`), `NAME` as [`temporary_name_part`] gives it.
fn temporary_prefix(target: &Path) -> String {
    format!(".{}.", temporary_name_part(target))
}

impl TempFile {
    /// Creates `.NAME.PID.UNIQUE.tmp` beside `target` (`NAME` shortened where it is long:
    /// [`temporary_name_part`]), exclusively, readable and writable as the umask allows.
    pub fn beside(target: &Path) -> io::Result<Self> {
        let directory = target.parent().unwrap_or(Path::new("."));
        let prefix = temporary_prefix(target);
        let pid = std::process::id();
        let mut unique = made_now();
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

    /// The open file (to lock it, or to give it an owner and mode before it is filled).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Writes the content through a buffer and syncs it to disk.
    pub fn fill(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<Self> {
        let mut writer = BufWriter::with_capacity(1 << 20, &self.file);
        write(&mut writer)?;
        writer.flush()?;
        drop(writer);
        self.file.sync_all()?;
        Ok(self)
    }

    /// Writes `header`, makes the file `total_len` bytes long (the rest a hole, read as
    /// zeros), reserves its blocks where the file system can ([`allocate`]), and syncs it.
    pub fn fill_sparse(self, header: &[u8], total_len: u64) -> io::Result<Self> {
        let start = header.len() as u64;
        if total_len < start {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a file of {total_len} bytes cannot hold a header of {start}"),
            ));
        }
        self.file.write_all_at(header, 0)?;
        self.file.set_len(total_len)?;
        allocate(&self.file, start, total_len - start)?;
        self.file.sync_all()?;
        Ok(self)
    }

    /// Renames the file over `target` and syncs the directory; returns the file, now
    /// `target`.
    pub fn rename_over(mut self, target: &Path) -> io::Result<File> {
        // Cloned first: once renamed, the call must not fail for want of a descriptor.
        let file = self.file.try_clone()?;
        fs::rename(&self.path, target)?;
        self.done = true;
        sync_directory(target)?;
        Ok(file)
    }

    /// Gives the file the name `target` only if no file has it, failing with
    /// [`io::ErrorKind::AlreadyExists`] when the name exists, and syncs the directory: a
    /// rename that does not replace (`renameat2` with `RENAME_NOREPLACE`), or where the
    /// filesystem cannot do that, a hard link (the temporary name then dropped). Only a
    /// filesystem with neither (some network and FUSE ones) refuses. Once the file has its
    /// name, the temporary files that killed writers of that name left are removed
    /// ([`remove_stale_temporaries`]), as a writer of an existing file removes them: a
    /// `create` or `import` of a new file killed part way left its temporary file until a
    /// later writer locked the finished file.
    pub fn link_as_new(mut self, target: &Path) -> io::Result<()> {
        match rename_no_replace(&self.path, target) {
            Ok(()) => self.done = true,
            // This temporary file was removed meanwhile: by the writer of a new file of the
            // same name that won the race (it removes the leftovers it takes this one for,
            // where it cannot see this process alive), which is what the error says.
            Err(error) if error.kind() == io::ErrorKind::NotFound && target.exists() => {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, error));
            }
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP)
                ) =>
            {
                fs::hard_link(&self.path, target)?;
                // Drop removes the temporary name.
            }
            Err(error) => return Err(error),
        }
        sync_directory(target)?;
        remove_stale_temporaries(target);
        Ok(())
    }
}

/// A new file for a writer of `target` to keep data in until it exits (an `add`'s spilled
/// hashes, region `index` of them), readable and writable by this user only, with no name:
/// made unnamed in `target`'s directory (`O_TMPFILE`) where the file system can, so that
/// no kill leaves it behind; elsewhere created as `.NAME.PID.spill-INDEX.tmp` and unlinked
/// at once, a name [`remove_stale_temporaries`] knows, so that the file of a writer killed
/// between the two is removed by the next writer of `target`. An error when the directory
/// refuses it (no write permission, a read-only or full file system).
pub fn spill_file(target: &Path, index: u64) -> io::Result<File> {
    let directory = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    #[cfg(target_os = "linux")]
    {
        // Refused by a file system without it (EOPNOTSUPP), or a kernel before 3.11
        // (EISDIR or EINVAL): then the named file.
        if let Ok(file) = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE)
            .open(directory)
        {
            return Ok(file);
        }
    }
    let path = directory.join(format!(
        "{}{}.{SPILL}{index}.tmp",
        temporary_prefix(target),
        std::process::id()
    ));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    fs::remove_file(&path)?;
    Ok(file)
}

/// What a spill file's name has where a [`TempFile`]'s has its unique number.
const SPILL: &str = "spill-";

/// Renames `from` to `to` unless `to` exists (then `EEXIST`).
#[cfg(target_os = "linux")]
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let from = CString::new(from.as_os_str().as_bytes())?;
    let to = CString::new(to.as_os_str().as_bytes())?;
    // SAFETY: two NUL-terminated paths that outlive the call.
    let renamed = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if renamed == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// No rename that refuses to replace here: callers fall back to a hard link.
#[cfg(not(target_os = "linux"))]
fn rename_no_replace(_from: &Path, _to: &Path) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Syncs the directory `target` is in (after a name in it changed).
fn sync_directory(target: &Path) -> io::Result<()> {
    let directory = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(directory)?.sync_all()
}

/// How often [`parse_header_settled`] reads a header whose checksum fails, and how long
/// apart: a writer updating a file in place rewrites its header with one small write,
/// which a reader may see half done.
const HEADER_READS: u32 = 5;
/// See [`HEADER_READS`].
const HEADER_READ_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// A header read and parsed by `parse` (which reads the file's first bytes afresh each
/// time: a mapping, or a read at offset 0), read again while its header checksum fails, up
/// to `HEADER_READS` (5) times, `HEADER_READ_PAUSE` (2 ms) apart; then the last result.
pub fn parse_header_settled(mut parse: impl FnMut() -> crate::Result<Header>) -> crate::Result<Header> {
    let mut attempt = 1;
    loop {
        match parse() {
            Err(crate::Error::Format {
                problem: crate::FormatProblem::HeaderChecksum,
                ..
            }) if attempt < HEADER_READS => {
                attempt += 1;
                std::thread::sleep(HEADER_READ_PAUSE);
            }
            other => return other,
        }
    }
}

/// What a reader found of a payload it read after the file's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// Sealed, and the checksum holds.
    Sealed,
    /// Unsealed: the bits are valid, the checksum stale (an update in place did not
    /// finish, or is at work).
    Unsealed,
    /// A writer changed the file in place while it was being read (its header changed
    /// meanwhile): the bits are valid, a superset of what the header described.
    Changing,
}

/// Judges a payload read after `header` (every reader of a file that a writer may update
/// in place): unsealed, or its checksum holds (`holds`, asked only for a sealed header),
/// or, when it does not, the header read again (`header_now`, `None` when it cannot be
/// read) tells a writer in place that changed the file meanwhile from damage (`None`). A
/// writer in place rewrites only the header's mark and payload checksum, so that is
/// another header of the same filter ([`Header::same_filter`]); the same header, none, or
/// one of another filter (another program rewrote the file: `cp other.bloom f.bloom`) is
/// not: the bits read are not this filter's.
pub fn judge_payload(
    header: &Header,
    holds: impl FnOnce() -> io::Result<bool>,
    header_now: impl FnOnce() -> Option<Header>,
) -> io::Result<Option<Payload>> {
    if header.unsealed {
        return Ok(Some(Payload::Unsealed));
    }
    if holds()? {
        return Ok(Some(Payload::Sealed));
    }
    Ok(header_now()
        .is_some_and(|now| now != *header && now.same_filter(header))
        .then_some(Payload::Changing))
}

/// Whether another open file holds the writers' lock of `file` (the exclusive `flock` of
/// [`lock_for_update`]): a reader of an unsealed file tells by it an update in place at
/// work from one that did not finish. Takes a shared lock without waiting and drops it at
/// once; `file` must be the caller's own handle holding no lock (on a handle that holds
/// the writers' lock, the probe would give it up).
pub fn writer_at_work(file: &File) -> io::Result<bool> {
    match file.try_lock_shared() {
        Ok(()) => file.unlock().map(|()| false),
        Err(fs::TryLockError::WouldBlock) => Ok(true),
        Err(fs::TryLockError::Error(error)) => Err(error),
    }
}

/// A filter file read whole by [`read_whole`].
#[derive(Debug)]
pub struct WholeFile {
    /// The header, as read before the payload.
    pub header: Header,
    /// The header's bytes, as read.
    pub header_bytes: Vec<u8>,
    /// The payload, as read after the header.
    pub payload: Vec<u8>,
    /// What the payload was judged to be ([`judge_payload`]).
    pub state: Payload,
}

impl WholeFile {
    /// The filter the bits read make (valid in every state).
    pub fn filter(&self) -> crate::Result<Box<dyn crate::any::DynFilter>> {
        crate::any::from_parts(&self.header, &self.payload)
    }
}

/// Reads the filter file `file`, `len` bytes long, whole, as a reader must beside writers
/// that may update it in place: the header (read again while its checksum fails: a
/// writer may be rewriting it), then the payload, judged by [`judge_payload`] against
/// the header read once more. The bits returned hold at least every bit the file held
/// when the header was read. A sealed header that did not change over a payload whose
/// checksum fails is damage ([`FormatProblem::PayloadChecksum`](crate::FormatProblem));
/// a variant never changed in place must be sealed and its checksum must hold. The
/// caller checks first that `len` bytes fit in memory.
///
/// ```
/// use bloomery::any::{self, Spec};
/// use bloomery::file::{self, Payload};
/// use bloomery::format::native::Variant;
///
/// let mut filter = any::create(&Spec::new(Variant::Blocked, 1_000, 0.01))?;
/// filter.insert(b"apple")?;
/// let path = std::env::temp_dir().join(format!("bloomery-read-whole-{}.bloom", std::process::id()));
/// std::fs::write(&path, filter.envelope().to_vec())?;
/// let handle = std::fs::File::open(&path)?;
/// let whole = file::read_whole(&handle, handle.metadata()?.len())?;
/// assert_eq!(whole.state, Payload::Sealed);
/// assert!(whole.filter()?.contains(b"apple"));
/// assert!(!file::writer_at_work(&handle)?);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_whole(file: &File, len: u64) -> crate::Result<WholeFile> {
    let header_now = || -> crate::Result<(Header, Vec<u8>)> {
        let most = crate::format::native::header_len(crate::format::native::MAX_PARAMS_LEN) as u64;
        let mut prefix = vec![0; len.min(most) as usize];
        let header = parse_header_settled(|| {
            file.read_exact_at(&mut prefix, 0)?;
            let header = Header::parse(&prefix)?;
            header.check_file_len(len)?;
            Ok(header)
        })?;
        prefix.truncate(header.payload_offset);
        Ok((header, prefix))
    };
    let (header, header_bytes) = header_now()?;
    let payload_len = usize::try_from(header.payload_len).map_err(|_| {
        crate::error::inconsistent("the payload is larger than this machine can address".into())
    })?;
    let mut payload = vec![0u8; payload_len];
    file.read_exact_at(&mut payload, header.payload_offset as u64)?;
    let state = if crate::in_place::updates_in_place(header.variant) {
        let mut damage = None;
        let judged = judge_payload(
            &header,
            || match header.verify_payload(&payload) {
                Ok(()) => Ok(true),
                Err(error) => {
                    damage = Some(error);
                    Ok(false)
                }
            },
            || header_now().ok().map(|(header, _)| header),
        )?;
        judged.ok_or_else(|| {
            damage.unwrap_or_else(|| crate::Error::format("bloomery", crate::FormatProblem::PayloadChecksum))
        })?
    } else {
        header.verify_payload(&payload)?;
        Payload::Sealed
    };
    Ok(WholeFile {
        header,
        header_bytes,
        payload,
        state,
    })
}

/// The header of the filter file `file`, `len` bytes long, read alone (at most one
/// header's worth, 64 KiB and a little) and checked against the file's length: what a
/// reader that loads files whole checks first, so that a large file of something else, or
/// a filter file cut short, is refused for the cost of one header rather than of reading
/// (and holding) the whole file. The outer error is the read's, the inner the header's.
///
/// ```
/// use std::io::Write;
///
/// let path = std::env::temp_dir().join(format!("bloomery-read-header-{}.bin", std::process::id()));
/// std::fs::File::create(&path)?.write_all(&vec![7u8; 1 << 20])?;
/// let file = std::fs::File::open(&path)?;
/// let refused = bloomery::file::read_header(&file, 1 << 20)?.unwrap_err();
/// assert!(refused.to_string().contains("magic"), "{refused}");
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_header(file: &File, len: u64) -> io::Result<crate::Result<Header>> {
    let most = crate::format::native::header_len(crate::format::native::MAX_PARAMS_LEN) as u64;
    let mut prefix = vec![0; len.min(most) as usize];
    file.read_exact_at(&mut prefix, 0)?;
    Ok(Header::parse(&prefix).and_then(|header| header.check_file_len(len).map(|()| header)))
}

/// The memory loading a file of `len` bytes of `variant` takes at its peak, the file's
/// bytes included: twice its size (the bytes, then the filter made from them, each array
/// filled straight from the payload), except the retouched filter's item lists (hash maps
/// of small vectors) and the allow-listed filter's list (a hash set of its items, each a
/// vector): they take several times their bytes in the file, and 8 times its size is
/// budgeted for them.
///
/// ```
/// use bloomery::format::native::Variant;
/// assert_eq!(bloomery::file::load_bytes(Variant::Blocked, 1000), 2000);
/// assert_eq!(bloomery::file::load_bytes(Variant::Retouched, 1000), 8000);
/// assert_eq!(bloomery::file::load_bytes(Variant::Allowlisted, 1000), 8000);
/// ```
pub fn load_bytes(variant: crate::format::native::Variant, len: u64) -> u64 {
    let copies = match variant {
        crate::format::native::Variant::Retouched | crate::format::native::Variant::Allowlisted => 8,
        _ => 2,
    };
    len.saturating_mul(copies)
}

/// The memory a new filter, or a file loaded whole, may take: 90% of the least of what
/// the kernel estimates is available for new allocations without swapping (`MemAvailable`
/// in /proc/meminfo), what the process's memory cgroups (v2 or v1, its own and their
/// parents) allow it beyond what they hold now (their limit less their usage, the page
/// cache of files not counted: the kernel reclaims it before it kills), and what its
/// address-space limit (`RLIMIT_AS`,
/// `ulimit -v`) leaves; `None` when none is known. The tenth kept back is for everything
/// else. Tools check a size against it before allocating, to refuse with an error where
/// the allocation would abort the process (a Rust allocation failure is not recoverable)
/// or the kernel would kill it (a container's limit).
pub fn memory_available() -> Option<u64> {
    let cgroups = fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|cgroups| cgroup_headroom(&cgroups, Path::new("/sys/fs/cgroup")));
    [meminfo_available(), cgroups, address_space_headroom()]
        .into_iter()
        .flatten()
        .min()
        .map(|bytes| bytes / 10 * 9)
}

/// `MemAvailable` in /proc/meminfo, in bytes.
fn meminfo_available() -> Option<u64> {
    let meminfo = fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|line| line.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// What `RLIMIT_AS` leaves of the address space beyond what the process maps now.
fn address_space_headroom() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    let pages: u64 = fs::read_to_string("/proc/self/statm")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let page_size = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    // rlim_t is u64 on Linux, not on every target.
    #[allow(clippy::unnecessary_cast)]
    let limit = limit.rlim_cur as u64;
    Some(limit.saturating_sub(pages.saturating_mul(page_size)))
}

/// The least headroom (limit less usage, file page cache not counted as usage) of
/// the memory cgroups that `cgroups` (the text of /proc/self/cgroup) names and their
/// parents, under `root` (where the cgroup file systems are mounted: v2 at `root` or at
/// `root/unified`, v1's memory controller at `root/memory`). `None` when none has a limit.
fn cgroup_headroom(cgroups: &str, root: &Path) -> Option<u64> {
    // (directory under which the hierarchy is mounted, the group's path, limit file,
    // usage file, the memory.stat keys of the file page cache, active and inactive)
    let mut groups = Vec::new();
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            for mount in [root.to_path_buf(), root.join("unified")] {
                groups.push((
                    mount,
                    path,
                    "memory.max",
                    "memory.current",
                    ["active_file", "inactive_file"],
                ));
            }
        } else if controllers.split(',').any(|controller| controller == "memory") {
            groups.push((
                root.join("memory"),
                path,
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                ["total_active_file", "total_inactive_file"],
            ));
        }
    }
    let read_u64 = |file: PathBuf| fs::read_to_string(file).ok()?.trim().parse::<u64>().ok();
    let mut least: Option<u64> = None;
    for (mount, path, limit_file, usage_file, cache_keys) in groups {
        let mut dir = mount.join(path);
        loop {
            // "max" (v2) does not parse: no limit; v1 says "no limit" with a number near 2^63.
            if let (Some(limit), Some(usage)) =
                (read_u64(dir.join(limit_file)), read_u64(dir.join(usage_file)))
                && limit < 1 << 62
            {
                let stat = fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
                let cache = stat
                    .lines()
                    .filter_map(|line| {
                        let (key, value) = line.split_once(' ')?;
                        cache_keys
                            .contains(&key)
                            .then(|| value.trim().parse::<u64>().ok())?
                    })
                    .fold(0u64, u64::saturating_add);
                let headroom = limit.saturating_sub(usage.saturating_sub(cache));
                least = Some(least.map_or(headroom, |least| least.min(headroom)));
            }
            if dir == mount || !dir.pop() || !dir.starts_with(&mount) {
                break;
            }
        }
    }
    least
}

/// Opens `real` for reading without waiting on it: opening a FIFO for reading would block
/// until some process opened it for writing (`O_NONBLOCK`; a regular file then reads as
/// usual). The caller checks that it is a regular file before reading.
pub fn open_for_reading(real: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(real)
}

/// Opens the existing filter file `real` (a path with its links resolved) for reading and
/// writing, waits for its writers' lock (an exclusive `flock` on the file, which every
/// writer of bloomery's tools takes before it changes or replaces a file), and checks that
/// `real` still names the file it locked. `None` when another writer replaced the file
/// while this one waited: the caller resolves the name again and retries. Once locked,
/// removes the temporary files that killed writers of it left
/// ([`remove_stale_temporaries`]). Opening for writing refuses a file this user may not
/// write, as a change in place would be refused (a rename needs only the directory).
pub fn lock_for_update(real: &Path) -> io::Result<Option<(File, fs::Metadata)>> {
    lock_for_update_with(real, File::lock)
}

/// [`lock_for_update`], with `wait` taking the lock of the file opened: for a caller that
/// waits its own way (the Python package answers signals and refuses to wait for a lock
/// its own process holds). `wait` returns once the file is locked, or with an error.
///
/// ```
/// use std::fs::{File, TryLockError};
/// use std::io;
///
/// let dir = std::env::temp_dir().join(format!("bloomery-lock-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("f.bloom");
/// std::fs::write(&path, b"a filter")?;
/// // Locks at once, or says so rather than waiting.
/// let try_now = |file: &File| match file.try_lock() {
///     Ok(()) => Ok(()),
///     Err(TryLockError::WouldBlock) => Err(io::Error::from(io::ErrorKind::WouldBlock)),
///     Err(TryLockError::Error(error)) => Err(error),
/// };
/// let (held, _) = bloomery::file::lock_for_update_with(&path, try_now)?.expect("not replaced");
/// let busy = bloomery::file::lock_for_update_with(&path, try_now).unwrap_err();
/// assert_eq!(busy.kind(), io::ErrorKind::WouldBlock);
/// drop(held);
/// assert!(bloomery::file::lock_for_update_with(&path, try_now)?.is_some());
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), io::Error>(())
/// ```
pub fn lock_for_update_with<E: From<io::Error>>(
    real: &Path,
    wait: impl FnOnce(&File) -> Result<(), E>,
) -> Result<Option<(File, fs::Metadata)>, E> {
    let file = OpenOptions::new().read(true).write(true).open(real)?;
    wait(&file)?;
    let metadata = file.metadata()?;
    match fs::metadata(real) {
        Ok(now) if now.dev() == metadata.dev() && now.ino() == metadata.ino() => {
            remove_stale_temporaries(real);
            Ok(Some((file, metadata)))
        }
        _ => Ok(None),
    }
}

/// Removes the temporary files of `target` ([`TempFile`], and the named [`spill_file`]s)
/// that writers which were killed left: those whose process is gone (`/proc/PID` absent;
/// nothing where there is no `/proc`). Called under the writers' lock of `target`, so that
/// no live writer of this filter can be using one, or once a new file has that name
/// ([`TempFile::link_as_new`]), where a concurrent writer of a new file of that name has
/// lost anyway. Only this user's files: another user's writer may be alive where this
/// process cannot see it (another PID namespace, `/proc` mounted with `hidepid`).
///
/// Only files that are such leftovers by more than their names: a [`TempFile`] whose birth
/// or last change lies between a day before and 30 days after its unique number (the
/// nanoseconds since the epoch when it was made), and a spill file that is empty (it is
/// unlinked before anything is written to it). Any other file named so (a user's copy
/// of a filter called `.NAME.4000000.abc.tmp`) is left alone: such a name once was
/// enough, and a writer of `NAME` deleted the filter.
pub fn remove_stale_temporaries(target: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let (Some(directory), prefix) = (target.parent(), temporary_prefix(target)) else {
        return;
    };
    let Ok(entries) = fs::read_dir(directory) else {
        return;
    };
    // SAFETY: geteuid(2) cannot fail and reads nothing.
    let user = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|name| name.strip_prefix(&prefix))
            .and_then(|rest| rest.strip_suffix(".tmp"))
        else {
            continue;
        };
        // Exactly `PID.UNIQUE` (decimal, then hexadecimal), or a spill file's `PID.spill-N`
        // (decimal, [`spill_file`]): not the temporary file of a sibling such as `NAME.7`,
        // whose own name also starts with this prefix.
        let Some((pid, unique)) = rest.split_once('.') else {
            continue;
        };
        let digits = |part: &str, hex: bool| {
            !part.is_empty()
                && part.bytes().all(|byte| {
                    if hex {
                        byte.is_ascii_hexdigit()
                    } else {
                        byte.is_ascii_digit()
                    }
                })
        };
        let spill = unique.strip_prefix(SPILL);
        let named = match spill {
            Some(index) => digits(index, false),
            None => digits(unique, true),
        };
        let (Ok(pid), true) = (pid.parse::<u32>(), named) else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        // Not followed: a symbolic link so named is not a leftover either.
        let Ok(metadata) = fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let leftover = metadata.is_file()
            && metadata.uid() == user
            && match spill {
                Some(_) => metadata.len() == 0,
                None => u64::from_str_radix(unique, 16).is_ok_and(|made| {
                    [metadata.created(), metadata.modified()]
                        .into_iter()
                        .any(|time| made_about(made, time.ok()))
                }),
            };
        if leftover {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Whether `time`, a [`TempFile`]'s birth or last change, fits its unique number `made`
/// (nanoseconds since the epoch when it was made): at most a day before it (the file
/// system's clock may lag the process's a little) and at most 30 days after (a writer
/// filling a very large file). Either time will do, so a clock stepped during a fill, or
/// a copy that did not keep the times, leaves the other to tell.
fn made_about(made: u64, time: Option<SystemTime>) -> bool {
    const DAY: u64 = 86_400 * 1_000_000_000;
    let Some(time) = time.and_then(|time| time.duration_since(UNIX_EPOCH).ok()) else {
        return false;
    };
    let time = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
    time >= made.saturating_sub(DAY) && time <= made.saturating_add(30 * DAY)
}

/// Whether the payload of `file` (described by its checked `header`) may be updated in
/// place: an unsealed file's bits are used as they are (a writer before did not finish,
/// and its bits are valid); a sealed file's payload checksum, computed from the file, must
/// hold, so that sealing never blesses damage.
pub fn payload_intact(file: &File, header: &Header) -> io::Result<bool> {
    Ok(header.unsealed
        || checksum_of(file, header.payload_offset as u64, header.payload_len)? == header.payload_checksum)
}

/// Writes `header` over the start of `file` marked unsealed (its stored payload checksum
/// kept, now stale), then syncs: before the first bit of the payload changes.
fn mark_unsealed(file: &File, header: &Header) -> io::Result<()> {
    write_header(file, &header.to_bytes(header.payload_checksum, true))
}

/// Seals `file`, whose payload `map` maps writable: every changed page of `map` synced,
/// then the payload checksum computed from the file and the sealed header written and
/// synced. Returns the checksum. The pages go first so that a crash can never leave a
/// sealed header over bits that did not reach the disk.
fn seal(file: &File, map: &MmapMut, header: &Header) -> io::Result<u64> {
    map.flush()?;
    let sum = checksum_of(file, header.payload_offset as u64, header.payload_len)?;
    write_header(file, &header.to_bytes(sum, false))?;
    Ok(sum)
}

/// What another program did to a file that a writer in place holds open (it takes no
/// lock), found by [`Sealing::check`]: the writer writes no header over it any more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    /// The file's header or length is not what the writer left there: rewritten (`cp
    /// other.bloom f.bloom` truncates and writes the same inode) or cut short.
    Changed,
    /// The writer's path no longer names the file it opened: another file was put there
    /// (`mv`), or it was removed.
    Replaced,
}

impl Foreign {
    /// What happened, in a few words: "was changed by another program" or "was replaced or
    /// removed by another program".
    pub fn what(self) -> &'static str {
        match self {
            Foreign::Changed => "was changed by another program",
            Foreign::Replaced => "was replaced or removed by another program",
        }
    }

    /// How it was seen, in words to follow [`what`](Self::what) and the writer's context.
    pub fn seen(self) -> &'static str {
        match self {
            Foreign::Changed => "(its header or length is not what this writer left there)",
            Foreign::Replaced => "(its name no longer names the file this writer opened)",
        }
    }
}

/// Why a [`Sealing`] step did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// Reading, writing or syncing the file failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// Another program changed the file: nothing was written over it.
    #[error("{} {}", .0.what(), .0.seen())]
    Foreign(Foreign),
}

/// A writer in place's side of the sealing protocol (docs/format.md, "Sealed and unsealed
/// files"), the same for every tool: the header it keeps, marked unsealed
/// ([`unseal`](Self::unseal)) before the first bit changes and sealed ([`seal`](Self::seal))
/// when it is done, and what the file must still hold before each header write.
///
/// Another program, which takes no lock, may rewrite the file meanwhile (`cp other.bloom
/// f.bloom` truncates and writes the same inode), cut it short, or put another file at its
/// name. This writer's header written over such a file would seal it as valid over the
/// other program's bits (answering "absent" for every item of both), or seal an unnamed
/// inode while the name holds none of the items added. So each header write first checks
/// that the file still starts with the bytes this writer left there, has the length it
/// had, and is still what its path names ([`check`](Self::check)); once that fails,
/// nothing more is written and every later step fails the same way.
///
/// ```
/// use std::io::Write;
///
/// use bloomery::any::{self, Spec};
/// use bloomery::format::native::{Header, Variant};
/// use bloomery::{file, in_place};
///
/// let filter = any::create(&Spec::new(Variant::Blocked, 1_000, 0.01))?;
/// let path = std::env::temp_dir().join(format!("bloomery-sealing-doc-{}.bloom", std::process::id()));
/// std::fs::File::create(&path)?.write_all(&filter.envelope().to_vec())?;
///
/// let handle = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
/// // SAFETY: a file of this example's own, which nothing else truncates.
/// let mut map = unsafe { memmap2::MmapMut::map_mut(&handle)? };
/// let header = Header::parse(&map)?;
/// let mut sealing = file::Sealing::new(&handle, &path, header.clone(), &map[..header.payload_offset])?;
/// sealing.unseal(&handle)?;
/// let mut in_place = in_place::view_mut(&header, &mut map[header.payload_offset..])?.unwrap();
/// let hash = in_place.hasher().hash(b"apple");
/// in_place.insert_hashes(&[hash]);
/// drop(in_place);
/// sealing.seal(&handle, &map)?;
/// assert!(!sealing.unsealed());
///
/// // Another program rewrites the file: the writer's next header write is refused.
/// std::fs::write(&path, filter.envelope().to_vec())?;
/// assert!(matches!(
///     sealing.unseal(&handle),
///     Err(file::SealError::Foreign(file::Foreign::Changed))
/// ));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Sealing {
    header: Header,
    /// The bytes before the payload as this writer left them: as read at open, then with
    /// the header it last wrote.
    on_disk: Vec<u8>,
    /// The file's length at open.
    len: u64,
    /// The path the writer opened (symlinks followed), and the file's device and inode.
    real: PathBuf,
    identity: (u64, u64),
    /// What another program did, once seen.
    foreign: Option<Foreign>,
}

impl Sealing {
    /// The protocol for `file`, which the caller opened at `real` (its path with symlinks
    /// followed), holds locked against other writers and read `header` from (checked
    /// against the file's length then, [`Header::check_file_len`]): `header_bytes` are the
    /// file's first bytes as mapped or read now (at least the bytes before the payload).
    /// The file's identity is taken now; the length it must keep is the one `header`
    /// gives.
    ///
    /// Another program may have rewritten or cut the file between the caller's reads and
    /// this call: when `header_bytes` do not hold `header`, or the file's length is no
    /// longer the header's, that is seen at once and every header write is refused
    /// ([`Foreign::Changed`]), before the writer's first change.
    pub fn new(file: &File, real: &Path, header: Header, header_bytes: &[u8]) -> io::Result<Self> {
        let metadata = file.metadata()?;
        let before_payload = header.payload_offset.min(header_bytes.len());
        let on_disk = header_bytes[..before_payload].to_vec();
        let len = header.total_len();
        let same = metadata.len() == len && Header::parse(&on_disk).is_ok_and(|now| now == header);
        Ok(Self {
            header,
            on_disk,
            len,
            real: real.to_owned(),
            identity: (metadata.dev(), metadata.ino()),
            foreign: (!same).then_some(Foreign::Changed),
        })
    }

    /// The header as this writer keeps it (`unsealed` as it last wrote it).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Whether the file is unsealed (found so at open, or marked by this writer): it must
    /// be sealed.
    pub fn unsealed(&self) -> bool {
        self.header.unsealed
    }

    /// What another program did to the file, if this writer has seen it.
    pub fn foreign(&self) -> Option<Foreign> {
        self.foreign
    }

    /// Checks that the file is still what this writer left: its path names it, it starts
    /// with the bytes this writer left there and has its length. A writer calls it before
    /// each header write (which [`unseal`](Self::unseal) and [`seal`](Self::seal) do), and
    /// may call it more often (before each batch of bits) to stop sooner.
    pub fn check(&mut self, file: &File) -> Result<(), SealError> {
        self.not_seen_foreign()?;
        let named = fs::metadata(&self.real).is_ok_and(|named| (named.dev(), named.ino()) == self.identity);
        let found = if !named {
            Some(Foreign::Replaced)
        } else if !holds(file, &self.on_disk, self.len)? {
            Some(Foreign::Changed)
        } else {
            None
        };
        match found {
            Some(foreign) => {
                self.foreign = Some(foreign);
                Err(SealError::Foreign(foreign))
            }
            None => Ok(()),
        }
    }

    /// Marks the file unsealed, durably, before the first bit of its payload changes
    /// (after [`check`](Self::check)); nothing when it is unsealed already.
    pub fn unseal(&mut self, file: &File) -> Result<(), SealError> {
        if self.header.unsealed {
            return self.not_seen_foreign();
        }
        self.check(file)?;
        mark_unsealed(file, &self.header)?;
        self.header.unsealed = true;
        self.left(self.header.to_bytes(self.header.payload_checksum, true));
        Ok(())
    }

    /// Seals the file, whose payload `map` maps writable, if it is unsealed (after
    /// [`check`](Self::check)): every changed page synced, then the payload checksum
    /// computed from the file and the sealed header written and synced. Fails, writing
    /// nothing, once another program was seen to change the file, sealed or not.
    pub fn seal(&mut self, file: &File, map: &MmapMut) -> Result<(), SealError> {
        if !self.header.unsealed {
            return self.not_seen_foreign();
        }
        self.check(file)?;
        self.header.payload_checksum = seal(file, map, &self.header)?;
        self.header.unsealed = false;
        self.left(self.header.to_bytes(self.header.payload_checksum, false));
        Ok(())
    }

    /// The refusal once another program was seen to change the file.
    fn not_seen_foreign(&self) -> Result<(), SealError> {
        self.foreign
            .map_or(Ok(()), |foreign| Err(SealError::Foreign(foreign)))
    }

    /// Records the header bytes this writer wrote.
    fn left(&mut self, header: Vec<u8>) {
        let end = header.len().min(self.on_disk.len());
        self.on_disk.splice(..end, header[..end].iter().copied());
    }
}

/// Why a file with `links` names (hard links) must not be replaced by a new file renamed
/// over one of them, as the variants written whole are: its other names would keep the
/// old filter, and lookups through them would answer "absent" for what was added. `None`
/// for a file of one name. Files updated in place change the one file, every name.
///
/// ```
/// assert!(bloomery::file::replacing_splits_links(1).is_none());
/// assert!(bloomery::file::replacing_splits_links(2).unwrap().starts_with("has 2 hard links"));
/// ```
pub fn replacing_splits_links(links: u64) -> Option<String> {
    (links > 1).then(|| {
        format!(
            "has {links} hard links; it would be replaced by a new file, and its other {} \
             would keep the old one; nothing was changed: use symbolic links (which are \
             followed) instead of hard links",
            if links == 2 { "name" } else { "names" }
        )
    })
}

/// Whether `file` still starts with `header_bytes` and is `len` bytes long: what a writer
/// in place left there (the bytes it read at open, or the header it last wrote). A writer
/// asks before each header write: another program that rewrote the file meanwhile (`cp
/// other.bloom f.bloom` truncates and writes the same inode) must not get this writer's
/// header written over its bytes, sealed as valid and answering for the wrong items.
fn holds(file: &File, header_bytes: &[u8], len: u64) -> io::Result<bool> {
    if file.metadata()?.len() != len {
        return Ok(false);
    }
    let mut bytes = vec![0u8; header_bytes.len()];
    match file.read_exact_at(&mut bytes, 0) {
        Ok(()) => Ok(bytes == header_bytes),
        // Shorter than the header now: cut short since its length was read.
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(error) => Err(error),
    }
}

/// One write of the header at offset 0 (at most one page), then a sync.
fn write_header(file: &File, bytes: &[u8]) -> io::Result<()> {
    file.write_all_at(bytes, 0)?;
    file.sync_data()
}

/// The XXH3-64 of `len` bytes of `file` from `offset`, read in large pieces (not through a
/// mapping: the pages read do not count as this process's memory). Holes, and on file
/// systems that report them so the unwritten extents [`allocate`] reserves, are hashed as
/// the zeros they read as without reading them: the kernel would allocate and zero a page
/// of cache for each (10 s of system time for a new 12 GB filter, and a page cache filled
/// with zeros that the update then has to evict).
pub fn checksum_of(file: &File, offset: u64, len: u64) -> io::Result<u64> {
    const PIECE: usize = 8 << 20;
    let piece = PIECE.min(len as usize).max(1);
    let mut buffer = vec![0u8; piece];
    let zeros = vec![0u8; piece];
    let mut hasher = Xxh3::new();
    let end = offset + len;
    let mut at = offset;
    while at < end {
        let (data, data_end) = next_data(file, at, end);
        while at < data {
            let take = (data - at).min(piece as u64) as usize;
            hasher.update(&zeros[..take]);
            at += take as u64;
        }
        while at < data_end {
            let take = (data_end - at).min(piece as u64) as usize;
            file.read_exact_at(&mut buffer[..take], at)?;
            hasher.update(&buffer[..take]);
            at += take as u64;
        }
    }
    Ok(hasher.digest())
}

/// Where the next bytes that may hold data start at or after `from` and where they end
/// (both at most `end`): `(from, end)` when the file system cannot tell, or when asking
/// fails, so that the bytes are read. Data written through a mapping and not yet written
/// back counts as data (the kernel looks in its page cache).
#[cfg(target_os = "linux")]
fn next_data(file: &File, from: u64, end: u64) -> (u64, u64) {
    let seek = |at: u64, whence| {
        // An offset `off_t` cannot hold (32-bit without large files): asked of no one.
        let at = libc::off_t::try_from(at).map_err(|_| io::Error::from(io::ErrorKind::FileTooLarge))?;
        // SAFETY: lseek on an open descriptor; the functions here read and write the file
        // only at explicit offsets, so moving its cursor changes nothing else.
        let at = unsafe { libc::lseek(file.as_raw_fd(), at, whence) };
        u64::try_from(at).map_err(|_| io::Error::last_os_error())
    };
    let data = match seek(from, libc::SEEK_DATA) {
        Ok(data) => data.min(end),
        // No data at or after `from`: the rest is a hole.
        Err(error) if error.raw_os_error() == Some(libc::ENXIO) => return (end, end),
        Err(_) => return (from, end),
    };
    match seek(data, libc::SEEK_HOLE) {
        Ok(hole) if hole > data => (data, hole.min(end)),
        _ => (data, end),
    }
}

#[cfg(not(target_os = "linux"))]
fn next_data(_file: &File, from: u64, end: u64) -> (u64, u64) {
    (from, end)
}

/// Allocates the disk blocks of `len` bytes from `offset` without writing them (a sparse
/// file's holes become unwritten extents, read as zeros), so that setting bits later cannot
/// meet a full disk. Nothing where the file system cannot (then a full disk shows when a
/// page is first written back).
#[cfg(target_os = "linux")]
pub fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    // `off_t` is 32 bits on 32-bit targets built without large-file support: a range past
    // it is refused, not truncated to another.
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::FileTooLarge));
    };
    // SAFETY: fallocate with mode 0 on an open descriptor only allocates blocks.
    let result = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
    if result == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => Ok(()),
        _ => Err(error),
    }
}

/// Nothing where the system has no `fallocate`.
#[cfg(not(target_os = "linux"))]
pub fn allocate(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A blocked filter's file in `dir`, opened for writing and mapped, with its sealing.
    fn writer(dir: &Path, name: &str) -> (PathBuf, File, MmapMut, Sealing) {
        let filter = crate::any::create(&crate::any::Spec::new(
            crate::format::native::Variant::Blocked,
            1_000,
            0.01,
        ))
        .unwrap();
        let path = dir.join(name);
        fs::write(&path, filter.envelope().to_vec()).unwrap();
        let file = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        // SAFETY: the test's own file, which nothing truncates while mapped.
        let map = unsafe { MmapMut::map_mut(&file) }.unwrap();
        let header = Header::parse(&map).unwrap();
        let sealing = Sealing::new(&file, &path, header, &map).unwrap();
        (path, file, map, sealing)
    }

    #[test]
    fn a_failed_checksum_is_a_writer_at_work_only_under_a_header_of_the_same_filter() {
        let header_of = |items| {
            let filter = crate::any::create(&crate::any::Spec::new(
                crate::format::native::Variant::Blocked,
                items,
                0.01,
            ))
            .unwrap();
            Header::parse(&filter.envelope().to_vec()).unwrap()
        };
        let header = header_of(1_000);
        let judge = |now: Option<Header>| judge_payload(&header, || Ok(false), || now).unwrap();
        // Marked unsealed, or sealed with another checksum, by a writer in place: changing.
        let unsealed = Header::parse(&header.to_bytes(header.payload_checksum, true)).unwrap();
        assert_eq!(judge(Some(unsealed)), Some(Payload::Changing));
        let resealed = Header::parse(&header.to_bytes(header.payload_checksum ^ 1, false)).unwrap();
        assert_eq!(judge(Some(resealed)), Some(Payload::Changing));
        // The same header: damage. None read, or another filter's (another program wrote
        // the file meanwhile): not this filter's bits either. The reader before this fix
        // took both for a writer at work and answered from the bits it read.
        assert_eq!(judge(Some(header.clone())), None);
        assert_eq!(judge(None), None);
        assert_eq!(judge(Some(header_of(2_000))), None);
        // A checksum that holds: sealed, whatever the header now.
        assert_eq!(
            judge_payload(&header, || Ok(true), || None).unwrap(),
            Some(Payload::Sealed)
        );
    }

    #[test]
    fn sealing_marks_and_seals_and_every_header_write_checks_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (path, file, map, mut sealing) = writer(dir.path(), "f.bloom");
        sealing.unseal(&file).unwrap();
        assert!(Header::parse(&fs::read(&path).unwrap()).unwrap().unsealed);
        sealing.seal(&file, &map).unwrap();
        // Sealed and whole: every checksum holds.
        crate::any::open(&fs::read(&path).unwrap()).unwrap();
        // Unsealed and sealed again: the writer's own header writes are what it expects.
        sealing.unseal(&file).unwrap();
        sealing.seal(&file, &map).unwrap();
        assert!(!sealing.unsealed());
        assert_eq!(sealing.foreign(), None);
    }

    #[test]
    fn a_file_put_at_the_writers_name_is_never_sealed_over() {
        let dir = tempfile::tempdir().unwrap();
        let (path, file, map, mut sealing) = writer(dir.path(), "f.bloom");
        let (other, ..) = writer(dir.path(), "other.bloom");
        sealing.unseal(&file).unwrap();
        let theirs = fs::read(&other).unwrap();
        fs::rename(&other, &path).unwrap();
        let refused = sealing.seal(&file, &map).unwrap_err();
        assert!(
            matches!(refused, SealError::Foreign(Foreign::Replaced)),
            "{refused:?}"
        );
        assert!(
            refused
                .to_string()
                .starts_with("was replaced or removed by another program")
        );
        assert_eq!(fs::read(&path).unwrap(), theirs);
        // Final: refused again, also once removed.
        fs::remove_file(&path).unwrap();
        assert!(matches!(
            sealing.check(&file),
            Err(SealError::Foreign(Foreign::Replaced))
        ));
    }

    #[test]
    fn a_file_changed_between_the_header_read_and_the_sealing_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let spec = |items| crate::any::Spec::new(crate::format::native::Variant::Blocked, items, 0.01);
        let bytes = crate::any::create(&spec(1_000)).unwrap().envelope().to_vec();
        // The same length, another filter (another seed): header bytes that are not the
        // ones the writer parsed.
        let mut other_spec = spec(1_000);
        other_spec.seed = 7;
        let other = crate::any::create(&other_spec).unwrap().envelope().to_vec();
        assert_eq!(other.len(), bytes.len());
        /// How another program changes the file.
        type Change<'a> = &'a dyn Fn(&Path, &File);
        let changes: [(&str, Change); 3] = [
            ("grown", &|_, file| file.set_len(bytes.len() as u64 + 64).unwrap()),
            ("cut", &|_, file| file.set_len(bytes.len() as u64 - 64).unwrap()),
            ("rewritten", &|path, _| fs::write(path, &other).unwrap()),
        ];
        for (what, change) in changes {
            let path = dir.path().join(format!("{what}.bloom"));
            fs::write(&path, &bytes).unwrap();
            let file = OpenOptions::new().read(true).write(true).open(&path).unwrap();
            // The writer reads the header and checks it against the file's length...
            let header = Header::parse(&fs::read(&path).unwrap()).unwrap();
            header.check_file_len(file.metadata().unwrap().len()).unwrap();
            // ...another program changes the file, and the writer maps what is there now.
            change(&path, &file);
            let now = fs::read(&path).unwrap();
            let mut sealing = Sealing::new(&file, &path, header, &now).unwrap();
            assert_eq!(sealing.foreign(), Some(Foreign::Changed), "{what}");
            assert!(
                matches!(sealing.unseal(&file), Err(SealError::Foreign(Foreign::Changed))),
                "{what}"
            );
            assert_eq!(fs::read(&path).unwrap(), now, "{what}: nothing written");
        }
    }

    #[test]
    fn a_file_cut_short_or_rewritten_is_never_sealed_over() {
        let dir = tempfile::tempdir().unwrap();
        let (_, file, map, mut sealing) = writer(dir.path(), "f.bloom");
        sealing.unseal(&file).unwrap();
        let len = file.metadata().unwrap().len();
        file.set_len(len - 64).unwrap();
        assert!(matches!(
            sealing.seal(&file, &map),
            Err(SealError::Foreign(Foreign::Changed))
        ));
        // Its length back, its header as the writer left it: still refused, never sealed.
        file.set_len(len).unwrap();
        assert!(matches!(
            sealing.seal(&file, &map),
            Err(SealError::Foreign(Foreign::Changed))
        ));
        assert!(matches!(
            sealing.unseal(&file),
            Err(SealError::Foreign(Foreign::Changed))
        ));

        // A sealed file whose header another program changed: its next unseal is refused.
        let (_, file, _map, mut sealing) = writer(dir.path(), "g.bloom");
        let mut header = vec![0u8; 16];
        file.read_exact_at(&mut header, 0).unwrap();
        header[15] ^= 1;
        file.write_all_at(&header, 0).unwrap();
        assert!(matches!(
            sealing.unseal(&file),
            Err(SealError::Foreign(Foreign::Changed))
        ));
    }

    #[test]
    fn cgroup_limits_of_the_group_and_its_parents_bound_the_memory() {
        let root = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = root.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        // v2: the group has no limit of its own ("max"); its parent allows 1 GiB and holds
        // 600 MiB, 100 MiB of it page cache of files (active and inactive): 500 MiB left.
        write("pod/app/memory.max", "max\n");
        write("pod/app/memory.current", "1000\n");
        write("pod/memory.max", "1073741824\n");
        write("pod/memory.current", "629145600\n");
        write(
            "pod/memory.stat",
            "anon 1\ninactive_file 52428800\nactive_file 52428800\nfile_mapped 9\n",
        );
        assert_eq!(
            cgroup_headroom("0::/pod/app\n", root.path()),
            Some(1073741824 - 524288000)
        );
        // v1, with v2 unused beside it: the memory controller's line counts.
        write("memory/job/memory.limit_in_bytes", "2000\n");
        write("memory/job/memory.usage_in_bytes", "1500\n");
        write("memory/memory.limit_in_bytes", "9223372036854771712\n");
        write("memory/memory.usage_in_bytes", "99999999\n");
        let v1 = "4:memory:/job\n3:cpu,cpuacct:/other\n0::/\n";
        assert_eq!(cgroup_headroom(v1, root.path()), Some(500));
        // No limit anywhere: nothing known.
        assert_eq!(cgroup_headroom("0::/elsewhere\n4:memory:/\n", root.path()), None);
        assert_eq!(cgroup_headroom("", root.path()), None);
    }

    /// Files named like a killed writer's temporary files but that are not (a user's copy of
    /// a filter, a spill-named file with data, a link) are not removed: the name alone once
    /// was enough, and a writer of `x` deleted a filter called `.x.4000000.abc.tmp`.
    #[test]
    fn only_real_leftovers_are_removed_not_files_named_like_them() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("x");
        fs::write(&target, b"filter").unwrap();
        let kept = [
            ".x.4000000.abc.tmp",
            ".x.4294967295.1.tmp",
            ".x.4294967295.spill-3.tmp",
        ]
        .map(|name| dir.path().join(name));
        for path in &kept {
            fs::write(path, b"a user's filter").unwrap();
        }
        // A temporary file's name, its number 40 days before now: not made when changed.
        let old = made_now() - 40 * 86_400 * 1_000_000_000;
        let aged = dir.path().join(format!(".x.4294967295.{old:x}.tmp"));
        fs::write(&aged, b"a user's filter").unwrap();
        // A link named as a leftover, to a file of its own.
        let link = dir.path().join(format!(".x.4294967295.{}.tmp", now_hex()));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // Real leftovers beside them: a temporary file made now, an empty spill file.
        let leftovers = [
            dir.path().join(format!(".x.4294967295.{}.tmp", now_hex())),
            dir.path().join(".x.4294967295.spill-4.tmp"),
        ];
        fs::write(&leftovers[0], b"partial").unwrap();
        fs::write(&leftovers[1], b"").unwrap();
        // Its last change 50 days after it was made (a clock stepped during a fill): its
        // birth, where the file system records one, still tells.
        let born = fs::metadata(&leftovers[0]).unwrap().created().is_ok();
        if born {
            let later = SystemTime::now() + std::time::Duration::from_secs(50 * 86_400);
            File::options()
                .write(true)
                .open(&leftovers[0])
                .unwrap()
                .set_modified(later)
                .unwrap();
        }
        drop(lock_for_update(&target).unwrap().expect("nothing replaced it"));
        for path in kept.iter().chain([&aged, &link]) {
            assert!(fs::symlink_metadata(path).is_ok(), "{path:?} was removed");
        }
        if Path::new("/proc/self").exists() {
            assert!(leftovers.iter().all(|path| !path.exists()));
        }
    }

    #[test]
    fn a_new_file_made_removes_the_leftovers_of_killed_writers_of_its_name() {
        // A `create` or `import` of a new file, killed part way, left its temporary file
        // until a writer locked the finished file; the next new file of that name now
        // removes it (and only real leftovers, as a locking writer does).
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("new");
        let leftover = dir.path().join(format!(".new.4294967295.{}.tmp", now_hex()));
        fs::write(&leftover, b"partial").unwrap();
        let users = dir.path().join(".new.4000000.abc.tmp");
        fs::write(&users, b"a user's filter").unwrap();
        // Another user's (where this test may give it one): its writer may be alive where
        // this process cannot see it.
        let others = dir.path().join(format!(".new.4294967294.{}.tmp", now_hex()));
        fs::write(&others, b"partial").unwrap();
        let given = std::os::unix::fs::chown(&others, Some(65534), Some(65534)).is_ok();
        TempFile::beside(&target)
            .unwrap()
            .fill(|file| file.write_all(b"filter"))
            .unwrap()
            .link_as_new(&target)
            .unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"filter");
        assert!(users.exists());
        assert!(!given || others.exists());
        if Path::new("/proc/self").exists() {
            assert!(!leftover.exists());
        }
    }

    /// A name of 226 to 255 bytes made a temporary name past 255 ("File name too long"):
    /// its temporary files now take a shortened name, which the stale files' removal knows,
    /// and which tells apart two long names that start alike.
    #[test]
    fn a_long_name_gets_temporary_files_and_its_stale_ones_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        for length in [TEMPORARY_PART_MAX, TEMPORARY_PART_MAX + 1, 255] {
            // Two-byte characters: the shortened name keeps whole ones.
            let target = dir.path().join("é".repeat(length / 2) + &"f".repeat(length % 2));
            let temporary = TempFile::beside(&target).unwrap();
            let name = temporary.path.file_name().unwrap().len();
            assert!(name <= 255, "{length}: {name}");
            temporary
                .fill(|out| out.write_all(b"new"))
                .unwrap()
                .link_as_new(&target)
                .unwrap();
            assert_eq!(fs::read(&target).unwrap(), b"new");
        }
        let long = |last: char| dir.path().join(format!("{}{last}.bloom", "f".repeat(240)));
        let (target, sibling) = (long('a'), long('b'));
        fs::write(&target, b"filter").unwrap();
        let part = temporary_name_part(&target);
        assert_eq!(part.len(), TEMPORARY_PART_MAX);
        assert_ne!(part, temporary_name_part(&sibling));
        let now = now_hex();
        let stale = dir.path().join(format!(".{part}.4294967295.{now}.tmp"));
        let siblings = dir
            .path()
            .join(format!(".{}.4294967295.{now}.tmp", temporary_name_part(&sibling)));
        fs::write(&stale, b"partial").unwrap();
        fs::write(&siblings, b"partial").unwrap();
        drop(lock_for_update(&target).unwrap().expect("nothing replaced it"));
        assert_eq!(stale.exists(), !Path::new("/proc/self").exists());
        assert!(siblings.exists());
    }

    /// A [`TempFile`]'s unique number made now.
    fn now_hex() -> String {
        format!("{:x}", made_now())
    }

    #[test]
    fn a_writer_waits_for_the_lock_and_removes_killed_writers_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f.bloom");
        fs::write(&target, b"filter").unwrap();
        // A process id no process has (above Linux's largest, 2^22).
        let stale = dir.path().join(format!(".f.bloom.4294967295.{}.tmp", now_hex()));
        fs::write(&stale, b"partial").unwrap();
        // A temporary file of the sibling filter `f.bloom.7`, which this lock does not cover.
        let siblings = dir
            .path()
            .join(format!(".f.bloom.7.4294967295.{}.tmp", now_hex()));
        fs::write(&siblings, b"partial").unwrap();
        // A spill file a killed add left (between its creation and its unlinking), and one
        // of a live writer (this process), which stays; and spill files of the siblings
        // `f.bloom.7` and `f.bloom.7.spill-1`.
        let stale_spill = dir.path().join(".f.bloom.4294967295.spill-3.tmp");
        let live_spill = dir
            .path()
            .join(format!(".f.bloom.{}.spill-0.tmp", std::process::id()));
        let sibling_spills = [
            dir.path().join(".f.bloom.7.4294967295.spill-3.tmp"),
            dir.path().join(".f.bloom.7.spill-1.4294967295.1.tmp"),
        ];
        // (Killed between its making and its unlinking, it is empty.)
        for path in [&stale_spill, &live_spill].into_iter().chain(&sibling_spills) {
            fs::write(path, b"").unwrap();
        }
        let (held, _) = lock_for_update(&target).unwrap().expect("nothing replaced it");
        assert_eq!(stale.exists(), !Path::new("/proc/self").exists());
        assert_eq!(stale_spill.exists(), !Path::new("/proc/self").exists());
        assert!(siblings.exists() && live_spill.exists());
        assert!(sibling_spills.iter().all(|path| path.exists()));
        fs::remove_file(&siblings).unwrap();
        fs::remove_file(&live_spill).unwrap();
        for path in &sibling_spills {
            fs::remove_file(path).unwrap();
        }
        // A spill file has no name (unnamed, or unlinked at once), and holds what it is
        // given.
        let mut spill = spill_file(&target, 5).unwrap();
        spill.write_all(b"hashes").unwrap();
        let mut read = Vec::new();
        std::io::Seek::rewind(&mut spill).unwrap();
        std::io::Read::read_to_end(&mut spill, &mut read).unwrap();
        assert_eq!(read, b"hashes");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let (sender, receiver) = std::sync::mpsc::channel();
        let waiter = {
            let target = target.clone();
            std::thread::spawn(move || {
                let locked = lock_for_update(&target).unwrap().is_some();
                sender.send(locked).unwrap();
            })
        };
        // A flock is per open file: the second open waits while the first holds it.
        assert!(
            receiver
                .recv_timeout(std::time::Duration::from_millis(300))
                .is_err()
        );
        drop(held);
        assert!(receiver.recv_timeout(std::time::Duration::from_secs(30)).unwrap());
        waiter.join().unwrap();
        // A temporary file is gone unless put in place.
        let temporary = TempFile::beside(&target).unwrap();
        drop(temporary.fill(|out| out.write_all(b"new")).unwrap());
        let placed = TempFile::beside(&target)
            .unwrap()
            .fill(|out| out.write_all(b"new"))
            .unwrap();
        assert!(placed.link_as_new(&target).unwrap_err().kind() == io::ErrorKind::AlreadyExists);
        // A new name is taken, the temporary one gone.
        let other = dir.path().join("g.bloom");
        let placed = TempFile::beside(&other)
            .unwrap()
            .fill(|out| out.write_all(b"new"))
            .unwrap();
        placed.link_as_new(&other).unwrap();
        assert_eq!(fs::read(&other).unwrap(), b"new");
        fs::remove_file(&other).unwrap();
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f.bloom"]);
        assert_eq!(fs::read(&target).unwrap(), b"filter");
    }

    /// A file of `len` bytes whose only data is `data` at `at`, the rest holes (or
    /// unwritten extents after `allocate`).
    fn sparse(len: u64, at: u64, data: &[u8], allocated: bool) -> File {
        let file = tempfile::tempfile().unwrap();
        file.set_len(len).unwrap();
        if allocated {
            allocate(&file, 0, len).unwrap();
        }
        file.write_all_at(data, at).unwrap();
        file
    }

    #[test]
    fn the_checksum_of_a_sparse_file_is_that_of_its_bytes() {
        let len = 64 << 20;
        for allocated in [false, true] {
            for (at, data) in [(0, &b"start"[..]), (20 << 20, b"middle"), (len - 3, b"end")] {
                let file = sparse(len, at, data, allocated);
                let mut bytes = vec![0u8; len as usize];
                bytes[at as usize..at as usize + data.len()].copy_from_slice(data);
                for (offset, piece) in [(0, len), (128, len - 128), (at, 4096.min(len - at)), (len - 1, 1)] {
                    let expected =
                        xxhash_rust::xxh3::xxh3_64(&bytes[offset as usize..(offset + piece) as usize]);
                    assert_eq!(
                        checksum_of(&file, offset, piece).unwrap(),
                        expected,
                        "allocated {allocated}, data at {at}, bytes {offset}+{piece}"
                    );
                }
            }
        }
    }

    #[test]
    fn bits_set_through_a_mapping_count_before_they_are_written_back() {
        let len = 16u64 << 20;
        let file = sparse(len, 0, b"header", true);
        // SAFETY: a private temporary file nothing else maps or truncates.
        let mut map = unsafe { MmapMut::map_mut(&file) }.unwrap();
        map[(9 << 20) + 5] = 0x80;
        let mut bytes = vec![0u8; len as usize];
        bytes[..6].copy_from_slice(b"header");
        bytes[(9 << 20) + 5] = 0x80;
        assert_eq!(
            checksum_of(&file, 0, len).unwrap(),
            xxhash_rust::xxh3::xxh3_64(&bytes)
        );
    }
}
