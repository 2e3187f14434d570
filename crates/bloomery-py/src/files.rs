//! Filter files from Python, as the CLI keeps them (crates/bloomery-cli/src/store.rs,
//! docs/failure-model.md): the library's envelope, mapped read-only for queries, loaded
//! whole (every checksum and parameter checked) for updates, and replaced atomically: the
//! new bytes go to `.NAME.PID.UNIQUE.tmp` beside the target (created exclusively), are
//! synced, then renamed over it, and the directory is synced; or, for the classic, blocked
//! and split-block files, updated in place through a writable mapping ([`InPlace`], as
//! `bloomery add` updates them). Writers lock the filter file (`flock`, the lock the CLI
//! takes) for their read-modify-write, so a Python writer and `bloomery add` never lose
//! each other's items.
//!
//! Everything about the bytes is the library's: [`Header::parse`], [`any::view`],
//! [`any::open`], [`Envelope::write_to`], [`in_place::view_mut`] and the sealing protocol
//! of [`bloomery::file`].

use std::fs::{self, File, Metadata, TryLockError};
use std::io::{self, Read, Write};
use std::ops::Deref;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use bloomery::any::{self, DynFilter, FilterView};
use bloomery::file::TempFile;
use bloomery::format::native::{self, Envelope, Header};
use bloomery::in_place::{self, FilterMut};
use bloomery::{FormatProblem, file};
use memmap2::{Mmap, MmapMut};

/// What went wrong with a file: the system's error (an `OSError` in Python) or the
/// library's word on its bytes (a `ValueError`), both naming the path.
pub enum FileError {
    Io(io::Error, PathBuf),
    Bytes(String),
    /// More than the memory a filter may take (`MemoryError`).
    Memory(String),
    /// The filter was closed (`ValueError`).
    Closed,
    /// A signal came while a call waited for a writers' lock ([`wait_for_lock`]): the
    /// caller runs the signal handlers, which may raise, and calls again.
    Interrupted,
    /// The name a save was made ready for changed meanwhile ([`SaveTarget::write`]):
    /// nothing was replaced; the caller makes it ready again.
    Again,
    /// A writers' lock that another filter of this process holds, with no other thread
    /// to let go of it ([`wait_for_lock`]): `OSError(EDEADLK)`.
    HeldHere(PathBuf),
    /// A symbolic link (the path) to a target (the second) that does not exist:
    /// `FileNotFoundError`, as Python's `open()` raises for it, in the CLI's words.
    Dangling(PathBuf, PathBuf),
}

/// Refuses `bytes` of new filter or loaded file that would not fit in the memory a filter
/// may take ([`file::memory_available`]): a failed allocation would abort the interpreter.
pub fn check_memory(bytes: u64, what: impl FnOnce() -> String) -> Result<()> {
    match file::memory_available() {
        Some(available) if bytes > available => Err(FileError::Memory(format!(
            "{} takes {bytes} bytes, more than the memory a filter may use (90% of the available, \
             {available} bytes)",
            what()
        ))),
        _ => Ok(()),
    }
}

pub type Result<T> = std::result::Result<T, FileError>;

trait WithPath<T> {
    fn io_at(self, path: &Path) -> Result<T>;
}

impl<T> WithPath<T> for io::Result<T> {
    fn io_at(self, path: &Path) -> Result<T> {
        self.map_err(|error| FileError::Io(error, path.to_owned()))
    }
}

fn bytes_error(path: &Path, error: impl std::fmt::Display) -> FileError {
    FileError::Bytes(format!("{}: {error}", path.display()))
}

/// Where a filter file really is: symlinks followed; for a file that does not exist yet,
/// its directory resolved and its name.
pub fn resolve(path: &Path) -> Result<PathBuf> {
    match fs::canonicalize(path) {
        Ok(real) => Ok(real),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            // A link to nothing: creating its target would put a file where the user may
            // not expect one (the CLI refuses it in the same words).
            if let Ok(link) = fs::read_link(path) {
                return Err(FileError::Dangling(path.to_owned(), link));
            }
            // No name (an empty path): ENOENT, as Python's open('') says.
            let name = path
                .file_name()
                .ok_or_else(|| FileError::Io(io::Error::from_raw_os_error(2), path.to_owned()))?;
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            // A missing directory is told with the path given, as open() tells it.
            Ok(fs::canonicalize(parent).io_at(path)?.join(name))
        }
        Err(error) => Err(FileError::Io(error, path.to_owned())),
    }
}

/// Refuses directories, devices and FIFOs (the errno Python shows for each).
fn regular(path: &Path, metadata: &Metadata) -> Result<()> {
    if metadata.is_file() {
        Ok(())
    } else if metadata.is_dir() {
        Err(FileError::Io(io::Error::from_raw_os_error(21), path.to_owned())) // EISDIR
    } else {
        Err(bytes_error(path, "not a regular file, so not a filter file"))
    }
}

/// The error for a sealed payload whose checksum does not hold (the CLI's words).
fn damaged_payload(path: &Path) -> FileError {
    bytes_error(
        path,
        format!("invalid bloomery data: {}", FormatProblem::PayloadChecksum),
    )
}

/// A header read by `read` ([`file::parse_header_settled`]: read again while its checksum
/// fails, as the CLI's readers do), its errors in this module's terms.
fn parse_header_settled(shown: &Path, read: impl FnMut() -> bloomery::Result<Header>) -> Result<Header> {
    file::parse_header_settled(read).map_err(|error| match error {
        bloomery::Error::Io(error) => FileError::Io(error, shown.to_owned()),
        other => bytes_error(shown, other),
    })
}

/// A filter file mapped read-only, answering from the mapped bytes in place (classic,
/// blocked and split-block files; the other variants are built in memory).
///
/// A classic, blocked or split-block file may be changed in place meanwhile by a writer
/// (`bloomery add`, mode "a"), which marks it unsealed, sets bits and seals it again: the
/// copies made of it ([`file_bytes`](Self::file_bytes),
/// [`to_owned_filter`](Self::to_owned_filter)) are of the bits as they are read, with a
/// checksum of their own, never of a header read before them and a payload read after.
pub struct Mapped {
    /// Borrows `map`'s bytes; declared first so that it is dropped before them.
    view: Box<dyn FilterView + 'static>,
    map: Mmap,
    /// The mapped file, read at explicit offsets for copies and checksums (so that the
    /// pages read do not stay mapped).
    file: File,
    /// The header as it was on open: its variant, parameters and lengths are the file's
    /// for as long as it is mapped (writers in place change only the payload's bits and
    /// the header's mark and checksum).
    header: Header,
    shown: PathBuf,
}

impl Mapped {
    /// The file's length: what a copy of the filter takes in memory, about.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Maps `path` and checks its header (magic, version, checksum, length); with
    /// `verify`, also the payload checksum (reading the whole file once) as the CLI's
    /// readers check it: an unsealed file's bits are used (valid, the checksum stale), and
    /// a mismatch is damage only if the header did not change meanwhile (otherwise a
    /// writer in place changed the file while it was read, and its bits are valid).
    pub fn open(path: &Path, verify: bool) -> Result<Self> {
        let real = resolve(path)?;
        // Not blocking: a FIFO opened for reading would wait for a writer to open it.
        let file = file::open_for_reading(&real).io_at(path)?;
        let metadata = file.metadata().io_at(path)?;
        regular(path, &metadata)?;
        // SAFETY: read-only map. Bloomery's writers replace a file by rename, or (classic,
        // blocked and split-block files) only set bits in place and rewrite the header
        // within its length, so the mapped bytes stay readable; a file truncated in place
        // by another program would fault on the next read past its end.
        let map = unsafe { Mmap::map(&file) }.io_at(path)?;
        // Lookups touch a few places anywhere in the file: no read-ahead around them (a
        // hint; a kernel that refuses it reads ahead as usual).
        let _ = map.advise(memmap2::Advice::Random);
        let header = parse_header_settled(path, || Header::parse(&map))?;
        header
            .check_file_len(map.len() as u64)
            .map_err(|error| bytes_error(path, error))?;
        let view =
            any::view(&header, &map[header.payload_offset..]).map_err(|error| bytes_error(path, error))?;
        // SAFETY: the view borrows the mapped pages, which stay where they are when the
        // `Mmap` handle moves, and `view` is dropped before `map` (field order); nothing
        // hands out the view with the longer lifetime.
        let view =
            unsafe { std::mem::transmute::<Box<dyn FilterView + '_>, Box<dyn FilterView + 'static>>(view) };
        let mapped = Self {
            view,
            map,
            file,
            header,
            shown: path.to_owned(),
        };
        if verify {
            mapped.verify_payload()?;
        }
        Ok(mapped)
    }

    pub fn view(&self) -> &dyn FilterView {
        self.view.as_ref()
    }

    /// Whether the variant may be changed in place by a writer while it is mapped.
    fn in_place(&self) -> bool {
        in_place::updates_in_place(self.header.variant)
    }

    /// Checks the payload checksum as the CLI's readers do (`Mapped::verify_payload` in
    /// crates/bloomery-cli/src/store.rs).
    fn verify_payload(&self) -> Result<()> {
        // (The unsealed mark on a variant never updated in place is refused by
        // `Header::parse`, before.)
        let header = &self.header;
        file::judge_payload(
            header,
            || file::payload_intact(&self.file, header),
            || self.read_header().ok(),
        )
        .io_at(&self.shown)?
        .map(drop)
        .ok_or_else(|| damaged_payload(&self.shown))
    }

    /// The header as the file holds it now (read again while its checksum fails).
    fn read_header(&self) -> Result<Header> {
        let mut bytes = vec![0u8; self.header.payload_offset];
        parse_header_settled(&self.shown, || {
            self.file.read_exact_at(&mut bytes, 0)?;
            Header::parse(&bytes)
        })
    }

    /// The header's bytes and the payload as the file holds them (read, not through the
    /// mapping), the header first; and whether they agree: a sealed header whose payload
    /// checksum holds. When they do not, the payload's bits are valid and a superset of
    /// the bits the file held when the header was read: the header was unsealed (a writer
    /// in place is at work or was killed), or it changed while the payload was read (a
    /// writer in place set bits meanwhile). A sealed header that did not change over a
    /// payload whose checksum fails is damage, refused.
    fn read_consistent(&self) -> Result<(Vec<u8>, Vec<u8>, bool)> {
        let whole = file::read_whole(&self.file, self.map.len() as u64).map_err(|error| match error {
            bloomery::Error::Io(error) => FileError::Io(error, self.shown.clone()),
            other => bytes_error(&self.shown, other),
        })?;
        if (whole.header.payload_offset, whole.header.payload_len)
            != (self.header.payload_offset, self.header.payload_len)
        {
            return Err(bytes_error(
                &self.shown,
                "the file was rewritten in place with another shape while it was mapped",
            ));
        }
        let intact = whole.state == file::Payload::Sealed;
        Ok((whole.header_bytes, whole.payload, intact))
    }

    /// The file's bytes as a copy of it must be: a sealed, valid envelope holding at least
    /// every bit the file held when the copy began. A sealed file whose checksum holds is
    /// copied as it is; an unsealed one, or one a writer changed while it was read, is
    /// written again from the bits read, with their checksum (a classic version-1 file
    /// then becomes version 2, as a writer in place seals it). Variants never changed in
    /// place are copied as they are.
    pub fn file_bytes(&self) -> Result<Vec<u8>> {
        if !self.in_place() {
            return Ok(self.map.to_vec());
        }
        let (mut header, payload, intact) = self.read_consistent()?;
        if intact {
            header.extend_from_slice(&payload);
            Ok(header)
        } else {
            Ok(native::encode(self.header.variant, &self.header.params, &payload))
        }
    }

    /// A copy of the filter in memory, from the bits as [`file_bytes`](Self::file_bytes)
    /// reads them (the other variants' files loaded whole, every checksum checked).
    pub fn to_owned_filter(&self) -> Result<Box<dyn DynFilter>> {
        if !self.in_place() {
            return any::open(&self.map).map_err(|error| bytes_error(&self.shown, error));
        }
        let (_, payload, _) = self.read_consistent()?;
        any::from_parts(&self.header, &payload).map_err(|error| bytes_error(&self.shown, error))
    }
}

/// Opens the existing `path` for update and waits for its writers' lock
/// ([`wait_for_lock`]); if a writer replaced the file meanwhile, locks the new one instead.
fn lock_existing(path: &Path, alone: bool) -> Result<(File, PathBuf, Held)> {
    loop {
        let real = resolve(path)?;
        let before = fs::metadata(&real).io_at(path)?;
        regular(path, &before)?;
        let wait = |file: &File| wait_for_lock(file, alone);
        let locked = file::lock_for_update_with(&real, wait).map_err(|waited| match waited {
            Waited::Io(error) if error.kind() == io::ErrorKind::Interrupted => FileError::Interrupted,
            Waited::Io(error) => FileError::Io(error, path.to_owned()),
            Waited::HeldHere => FileError::HeldHere(path.to_owned()),
        })?;
        // If another writer replaced the name while we waited, lock the new file.
        if let Some((file, metadata)) = locked {
            // What was opened, in case the name was given to something else meanwhile.
            regular(path, &metadata)?;
            return Ok((file, real, Held::of(&metadata)));
        }
    }
}

/// Why [`wait_for_lock`] did not lock.
enum Waited {
    Io(io::Error),
    HeldHere,
}

impl From<io::Error> for Waited {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

/// Waits for the writers' lock of `file` (without the GIL), and lets a signal end the wait
/// (`Interrupted`): the caller then runs the handlers with the GIL, whose exception (Ctrl-C's
/// `KeyboardInterrupt`, an alarm's timeout) ends the call, and otherwise calls again, as
/// blocking calls do in Python (PEP 475). Not here: the GIL is not taken back while a
/// filter's state is locked (`Shared`). A lock that another filter of this process holds
/// ([`HeldLock`]) is refused at once when the caller is `alone` (no other Python thread,
/// which could close that filter): it would wait for itself forever (`flock` locks belong
/// to an open file, not to the process). With other threads, it waits for one of them.
fn wait_for_lock(file: &File, alone: bool) -> std::result::Result<(), Waited> {
    match file.try_lock() {
        Ok(()) => return Ok(()),
        Err(TryLockError::WouldBlock) => {}
        Err(TryLockError::Error(error)) => return Err(error.into()),
    }
    if alone && held_here(Held::of(&file.metadata()?)) {
        return Err(Waited::HeldHere);
    }
    Ok(file.lock()?)
}

/// The file whose writers' lock a filter holds (opened with mode "r+" or "a"), by device
/// and inode, so that a save to another name of it (a hard link) is made under that lock
/// rather than waiting for it: `flock` locks belong to an open file, so this process
/// waiting for the lock it holds through another would wait forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    dev: u64,
    ino: u64,
}

impl Held {
    fn of(metadata: &Metadata) -> Self {
        Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
        }
    }
}

/// The writers' locks this process holds through its filters ([`HeldLock`]). A child made
/// by `fork()` inherits the list with the filters, whose descriptors it shares: it holds
/// those locks with its parent (`flock` locks belong to the open file) until it drops its
/// copies, so a wait of its own for one would never end either.
static HELD_HERE: Mutex<Vec<Held>> = Mutex::new(Vec::new());

/// Whether a filter of this process holds the writers' lock of `file`.
fn held_here(file: Held) -> bool {
    HELD_HERE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&file)
}

/// A locked file that a filter holds until closed (modes "r+" and "a"), listed in
/// [`HELD_HERE`] until dropped.
struct HeldLock {
    file: File,
    held: Held,
}

impl HeldLock {
    /// `file`, locked, whose device and inode are `held`.
    fn new(file: File, held: Held) -> Self {
        HELD_HERE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(held);
        Self { file, held }
    }
}

impl Deref for HeldLock {
    type Target = File;

    fn deref(&self) -> &File {
        &self.file
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let mut held = HELD_HERE.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = held.iter().position(|&entry| entry == self.held) {
            held.swap_remove(at);
        }
    }
}

/// A filter file opened for update: locked against other writers until dropped.
pub struct Locked {
    file: HeldLock,
    real: PathBuf,
    /// The process that opened it (see [`not_forked`]).
    owner: u32,
}

/// Refuses to replace a file of other names (hard links), in the CLI's words
/// (`file::replacing_splits_links`).
fn refuse_links(metadata: &Metadata, shown: &Path) -> Result<()> {
    match file::replacing_splits_links(metadata.nlink()) {
        Some(problem) => Err(FileError::Io(io::Error::other(problem), shown.to_owned())),
        None => Ok(()),
    }
}

/// Refuses a change to a file that process `owner` opened for update, from a child it made
/// with `fork()`: the child holds copies of the parent's objects (and shares its lock), but
/// is not the file's writer; what it wrote would race the parent's writes, or replace the
/// file under it.
fn not_forked(owner: u32, mode: &str, shown: &Path) -> Result<()> {
    if std::process::id() == owner {
        Ok(())
    } else {
        Err(FileError::Bytes(format!(
            "{}: opened with mode '{mode}' by process {owner}; a child made by fork() cannot \
             change, save or seal it (its copy shares the parent's lock: delete it, then open \
             the file again in the child, which waits for the parent to close it)",
            shown.display()
        )))
    }
}

impl Locked {
    /// Opens and locks `path`, then reads and checks the filter whole. An unsealed file (a
    /// writer in place did not finish) is loaded from its bits, which are valid, as the
    /// CLI's writers load it: its payload checksum is stale and cannot be checked; saving
    /// it writes it sealed.
    pub fn open(path: &Path, alone: bool) -> Result<(Self, Box<dyn DynFilter>)> {
        let (mut file, real, held) = lock_existing(path, alone)?;
        let refused = |error| bytes_error(path, error);
        let metadata = file.metadata().io_at(path)?;
        // A file of other names (hard links) cannot be saved back (`replace`): refused now,
        // before anything is added to a filter that could not be saved, as the CLI refuses
        // it before reading any item.
        refuse_links(&metadata, path)?;
        // The header first: a large file of something else costs one header's read.
        let len = metadata.len();
        // Locked: no writer changes it meanwhile, so this header is the file's.
        let header = file::read_header(&file, len).io_at(path)?.map_err(refused)?;
        // The file's bytes, then the filter made from them: twice its size for a moment
        // (more for a retouched filter's lists).
        check_memory(file::load_bytes(header.variant, len), || {
            format!("{}: loading the file", path.display())
        })?;
        let mut bytes = Vec::with_capacity(len as usize);
        file.read_to_end(&mut bytes).io_at(path)?;
        let filter = if header.unsealed && in_place::updates_in_place(header.variant) {
            header.check_file_len(bytes.len() as u64).map_err(refused)?;
            any::from_parts(&header, &bytes[header.payload_offset..]).map_err(refused)?
        } else {
            any::open(&bytes).map_err(refused)?
        };
        let owner = std::process::id();
        let file = HeldLock::new(file, held);
        Ok((Self { file, real, owner }, filter))
    }

    /// The file's real path (symlinks followed).
    pub fn real(&self) -> &Path {
        &self.real
    }

    /// The file whose lock this holds.
    pub fn held(&self) -> Held {
        self.file.held
    }

    /// Replaces the file with `envelope`, keeping its mode and owner; the new file is locked before
    /// it takes the name, so the lock is never let go.
    pub fn save(&mut self, envelope: &Envelope<'_>, shown: &Path) -> Result<()> {
        not_forked(self.owner, "r+", shown)?;
        let old = self.file.metadata().io_at(shown)?;
        let (file, held) = replace(&self.real, shown, &old, true, |mut writer| {
            envelope.write_to(&mut writer)
        })?;
        self.file = HeldLock::new(file, held);
        Ok(())
    }
}

/// A filter file updated in place (mode "a"): the classic, blocked and split-block files,
/// whose inserts only set bits, mapped writable and locked against other writers until
/// dropped. The header is marked unsealed before the first bit changes and sealed again
/// by [`seal`](Self::seal) (and on drop), as `bloomery add` does (`bloomery::file`): a
/// process killed between the two leaves every item it added present, the file unsealed.
pub struct InPlace {
    /// The filter over `map`'s payload, which it borrows mutably; declared first so that
    /// it is dropped before the mapping. Views and inserts all go through it, so the
    /// payload has this one borrower.
    filter: Box<dyn FilterMut + 'static>,
    map: MmapMut,
    /// Holds the writers' lock.
    file: HeldLock,
    real: PathBuf,
    shown: PathBuf,
    /// The payload's pages, let go of every `release_every` items inserted when the file
    /// is larger than the window (`bloomery::file::window_bytes`): after each window's
    /// worth of pages touched, as the CLI's updates do, so that what stays mapped is
    /// bounded by the window (`bloomery::file::items_per_release`), not by the file.
    region: file::Region,
    window: u64,
    release_every: usize,
    /// Items inserted since the pages were last let go of.
    pending: usize,
    /// The process that opened it: a child made by `fork()` holds a copy of this value
    /// (and of the mapping) but is not the file's writer (see `unseal` and `seal`).
    owner: u32,
    /// The header's marks as this writer left them, and what the file must still hold
    /// before each header write (`bloomery::file::Sealing`).
    sealing: file::Sealing,
}

impl InPlace {
    /// The file's length: what a copy of the filter takes in memory, about.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Opens and locks `path` for updates in place. A sealed file's payload checksum is
    /// checked first (reading the file once, not through the mapping), as every load for
    /// update checks it; an unsealed file's bits are used as they are, and sealed when this
    /// writer is done. Other variants are refused: they change more than bits on insert.
    pub fn open(path: &Path, alone: bool) -> Result<Self> {
        let (file, real, held) = lock_existing(path, alone)?;
        let len = file.metadata().io_at(path)?.len();
        // SAFETY: the file is locked against bloomery's writers (this package, the CLI),
        // which change a locked file only under the lock; readers map it read-only. A
        // program that truncates it anyway raises SIGBUS on the next access past the end.
        let mut map = unsafe { MmapMut::map_mut(&file) }.io_at(path)?;
        let _ = map.advise(memmap2::Advice::Random);
        let header = Header::parse(&map).map_err(|error| bytes_error(path, error))?;
        header
            .check_file_len(len)
            .map_err(|error| bytes_error(path, error))?;
        if !in_place::updates_in_place(header.variant) {
            return Err(bytes_error(
                path,
                format!(
                    "mode 'a' adds items in place to classic, blocked and split-block files; \
                     this file's variant is {}: open it with mode 'r+'",
                    header.variant.name()
                ),
            ));
        }
        if !file::payload_intact(&file, &header).io_at(path)? {
            return Err(damaged_payload(path));
        }
        file::allocate(&file, header.payload_offset as u64, header.payload_len).io_at(path)?;
        let sealing = file::Sealing::new(&file, &real, header.clone(), &map).io_at(path)?;
        // SAFETY: `map` is a shared mapping of the whole file, which `Self` holds for as long
        // as the region it keeps beside it.
        let region = unsafe { file::Region::of(&map, header.payload_offset) };
        let filter = in_place::view_mut(&header, &mut map[header.payload_offset..])
            .map_err(|error| bytes_error(path, error))?
            .ok_or_else(|| {
                // A big-endian platform: the file's words are little-endian.
                bytes_error(
                    path,
                    "this platform cannot update the file's bits in place: open it with mode 'r+'",
                )
            })?;
        // SAFETY: the filter borrows the mapped pages, which stay where they are when the
        // `MmapMut` handle moves; `filter` is dropped before `map` (field order), and
        // nothing else reaches the payload while it lives: the mapping is only flushed
        // (`msync` of its address range) and its pages let go of (`madvise` with
        // MADV_DONTNEED, which keeps a shared file mapping's contents: `region`), and the
        // file is read at explicit offsets.
        let filter =
            unsafe { std::mem::transmute::<Box<dyn FilterMut + '_>, Box<dyn FilterMut + 'static>>(filter) };
        let file = HeldLock::new(file, held);
        let window = file::window_bytes();
        let release_every = if header.payload_len > window {
            file::items_per_release(window, filter.locality())
        } else {
            usize::MAX
        };
        Ok(Self {
            filter,
            map,
            file,
            real,
            shown: path.to_owned(),
            region,
            window,
            release_every,
            pending: 0,
            owner: std::process::id(),
            sealing,
        })
    }

    /// A refused header write's error: another program changed the file (which takes no
    /// lock: `cp other.bloom f.bloom` rewrites this very inode, `mv` puts another file at
    /// its name), and this writer's header is not written over it (`file::Sealing`); or
    /// the I/O error.
    fn refusal(&self, refused: file::SealError) -> FileError {
        let error = match refused {
            file::SealError::Io(error) => error,
            file::SealError::Foreign(foreign) => io::Error::other(format!(
                "{} while open in mode 'a' {}: not sealed over what that program did, and \
                 items added since it was opened may be missing from it",
                foreign.what(),
                foreign.seen()
            )),
        };
        FileError::Io(error, self.shown.clone())
    }

    /// The file's real path (symlinks followed).
    pub fn real(&self) -> &Path {
        &self.real
    }

    /// The file whose lock this holds.
    pub fn held(&self) -> Held {
        self.file.held
    }

    /// Whether another program was seen to change or replace the file: this writer then
    /// writes no header to it any more, and can never seal it.
    pub fn foreign(&self) -> bool {
        self.sealing.foreign().is_some()
    }

    /// The filter as it is now, for lookups and statistics.
    pub fn view(&self) -> Box<dyn FilterView + '_> {
        self.filter.view()
    }

    /// Adds every item (marking the file unsealed first).
    pub fn insert(&mut self, items: &[&[u8]]) -> Result<()> {
        self.unseal()?;
        let hasher = self.filter.hasher();
        let hashes: Vec<_> = items.iter().map(|item| hasher.hash(item)).collect();
        let mut rest = &hashes[..];
        while !rest.is_empty() {
            let (now, later) = rest.split_at(rest.len().min(self.release_every - self.pending));
            self.filter.insert_hashes(now);
            self.inserted(now.len());
            rest = later;
        }
        Ok(())
    }

    /// Adds one item (marking the file unsealed first); returns whether it set a bit.
    pub fn insert_one(&mut self, item: &[u8]) -> Result<bool> {
        self.unseal()?;
        let new = self.filter.insert(item);
        self.inserted(1);
        Ok(new)
    }

    /// Counts `items` inserted; lets go of the payload's pages once `release_every` were.
    fn inserted(&mut self, items: usize) {
        self.pending += items;
        if self.pending >= self.release_every {
            self.release();
        }
    }

    /// Lets go of the payload's mapped pages (changed ones stay in the page cache, written
    /// back by the kernel and synced by `seal`).
    fn release(&mut self) {
        self.region.release(0, self.sealing.header().payload_len);
        self.pending = 0;
    }

    /// Adds every item of `other` (the same variant and shape), ORing its bits in; checked
    /// first, so that a refused union leaves the file as it was (sealed if it was).
    pub fn union(&mut self, other: &dyn DynFilter) -> Result<()> {
        let theirs = in_place::AlignedFile::of(other);
        let (header, payload) = (theirs.header(), theirs.payload());
        // The same words as an owned filter's refusal (no path: the file is not at fault).
        let refused = |error: bloomery::Error| FileError::Bytes(error.to_string());
        self.filter.check_union(header, payload).map_err(refused)?;
        self.unseal()?;
        // A payload larger than the window: a region at a time, each let go of after, as
        // the CLI's `merge` in place does.
        let windowed = self.sealing.header().payload_len > self.window;
        let step = if windowed {
            file::region_bytes(self.window) as usize
        } else {
            payload.len().max(1)
        };
        for start in (0..payload.len()).step_by(step) {
            let end = (start + step).min(payload.len());
            self.filter
                .union_range(header, payload, start..end)
                .map_err(refused)?;
            if windowed {
                self.region.release(start as u64, end as u64);
            }
        }
        Ok(())
    }

    /// Marks the file unsealed before its first bit changes; nothing when it is already.
    /// Refused in a child made by `fork()`: its copy of the header's state may be stale
    /// (the parent may have sealed the file since), and its inserts would race the
    /// parent's on the shared pages.
    fn unseal(&mut self) -> Result<()> {
        not_forked(self.owner, "a", &self.shown)?;
        self.sealing
            .unseal(&self.file)
            .map_err(|refused| self.refusal(refused))
    }

    /// Seals the file if it is unsealed: every changed page synced, then the payload
    /// checksum and the sealed header written and synced.
    pub fn seal(&mut self) -> Result<()> {
        // A child made by `fork()` leaves sealing to the file's writer: sealing under it
        // would leave the file sealed while the parent, believing it unsealed, goes on
        // changing bits (its checksum then stale: "damaged"). Refused, so that its save()
        // or close() does not say it sealed; its drop ignores the refusal.
        not_forked(self.owner, "a", &self.shown)?;
        self.sealing
            .seal(&self.file, &self.map)
            .map_err(|refused| self.refusal(refused))
    }

    /// Whether the item with these bytes might be present.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.filter.contains(item)
    }

    /// The payload as the file holds it now, read (not through the mapping: the pages
    /// changed through it are in the page cache that the read sees).
    fn payload(&self) -> Result<Vec<u8>> {
        let mut payload = vec![0u8; self.sealing.header().payload_len as usize];
        self.file
            .read_exact_at(&mut payload, self.sealing.header().payload_offset as u64)
            .io_at(&self.shown)?;
        Ok(payload)
    }

    /// The filter's file bytes, sealed.
    pub fn envelope_bytes(&self) -> Result<Vec<u8>> {
        Ok(native::encode(
            self.sealing.header().variant,
            &self.sealing.header().params,
            &self.payload()?,
        ))
    }

    /// A copy of the filter in memory.
    pub fn to_owned_filter(&self) -> Result<Box<dyn DynFilter>> {
        any::from_parts(self.sealing.header(), &self.payload()?)
            .map_err(|error| bytes_error(&self.shown, error))
    }
}

impl Drop for InPlace {
    /// Seals the file of a filter that was never closed (when the interpreter lets go of
    /// it); if that fails, the file stays unsealed, its bits valid.
    fn drop(&mut self) {
        let _ = self.seal();
    }
}

/// Where a save writes what a filter's `write` produces, atomically, made ready first
/// ([`prepare`](Self::prepare)), then written ([`write`](Self::write)): an existing file
/// is locked and replaced under that lock (keeping its mode and owner); a new one appears
/// whole or not at all, taking the name only if no file has it (a hard link, as the CLI
/// creates its outputs: `TempFile::link_as_new`); another name of the file whose lock the
/// caller holds (a hard link) is replaced under that lock. A caller that reads its filter
/// under a lock of its own prepares the target before taking that lock, so that the wait
/// for another writer holds nothing of the filter.
pub enum SaveTarget<'a> {
    /// An existing file, locked: replaced under that lock.
    Locked {
        path: &'a Path,
        file: File,
        real: PathBuf,
    },
    /// A name of the file whose lock the caller holds: replaced under that lock.
    Held { path: &'a Path, held: Held },
    /// A name no file had.
    New { path: &'a Path },
}

impl<'a> SaveTarget<'a> {
    /// The target `path` is, its existing file locked (waiting for its writers: `alone`,
    /// no other Python thread runs, [`wait_for_lock`]); `held`: the file whose lock the
    /// caller holds.
    pub fn prepare(path: &'a Path, held: Option<Held>, alone: bool) -> Result<Self> {
        let real = resolve(path)?;
        match fs::metadata(&real) {
            Ok(old) if held == Some(Held::of(&old)) => {
                regular(path, &old)?;
                Ok(Self::Held {
                    path,
                    held: Held::of(&old),
                })
            }
            Ok(_) => {
                let (file, real, _) = lock_existing(path, alone)?;
                Ok(Self::Locked { path, file, real })
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Self::New { path }),
            Err(error) => Err(FileError::Io(error, path.to_owned())),
        }
    }

    /// Writes what `write` produces there. [`FileError::Again`] when the name changed
    /// since [`prepare`](Self::prepare) (another program created the new name, or gave
    /// the held file's name to another): nothing was replaced; prepare again (the new
    /// name is then an existing file, replaced under its writers' lock).
    pub fn write(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        match self {
            Self::Locked { path, file, real } => {
                let old = file.metadata().io_at(path)?;
                replace(&real, path, &old, false, write)?;
                drop(file);
                Ok(())
            }
            Self::Held { path, held } => {
                let real = resolve(path)?;
                let old = fs::metadata(&real).io_at(path)?;
                if Held::of(&old) != held {
                    return Err(FileError::Again);
                }
                replace(&real, path, &old, false, write)?;
                Ok(())
            }
            Self::New { path } => {
                let real = resolve(path)?;
                let temporary = TempFile::beside(&real).io_at(path)?.fill(write).io_at(path)?;
                match temporary.link_as_new(&real) {
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Err(FileError::Again),
                    linked => linked.io_at(path),
                }
            }
        }
    }
}

/// A temporary file beside `real`, filled, synced, renamed over the existing file; the
/// directory synced.
/// The new file gets the permission bits and owner of `old` (the file it replaces), as the
/// CLI's do: a writer who may not give it that owner is refused (`PermissionError`) rather
/// than the file silently changing hands. Returns the new file (locked when `lock`) and
/// its device and inode.
fn replace(
    real: &Path,
    shown: &Path,
    old: &Metadata,
    lock: bool,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(File, Held)> {
    // A new file renamed over one name of a file with others (hard links) leaves them the
    // old filter: lookups through them would answer "absent" for what was added since (the
    // CLI refuses it in the same words).
    refuse_links(old, shown)?;
    let temporary = TempFile::beside(real).io_at(shown)?;
    let file = temporary.file();
    if lock {
        file.lock().io_at(shown)?;
    }
    let new = file.metadata().io_at(shown)?;
    if (new.uid(), new.gid()) != (old.uid(), old.gid()) {
        std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid())).io_at(shown)?;
    }
    // After chown, which clears set-user-ID bits.
    file.set_permissions(fs::Permissions::from_mode(old.permissions().mode() & 0o7777))
        .io_at(shown)?;
    let held = Held::of(&new);
    let file = temporary
        .fill(write)
        .io_at(shown)?
        .rename_over(real)
        .io_at(shown)?;
    Ok((file, held))
}
