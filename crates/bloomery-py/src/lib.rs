//! `bloomery` for Python: the library's filters behind a set-like API (PyO3).
//!
//! Every filter is reached through the library's one interface, [`bloomery::any`]
//! ([`DynFilter`] to own and change one, [`FilterView`] for a memory-mapped file), and
//! every item through its item road (see `items`): what a Python program adds, the CLI,
//! a Rust program and (classic filters) Guava find. Batch calls and whole-filter work run
//! with the GIL released; `ConcurrentBloomFilter` is the library's lock-free filters,
//! for many threads at once.

// A library writes nothing to standard output or error (its callers own them), and
// `println!`/`eprintln!` panic when the stream is full or closed.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

mod files;
mod items;
mod sharded;

use std::cell::UnsafeCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bloomery::any::{self, DynFilter, FilterView, GrowthLimit, Spec, SpecOption};
use bloomery::format::native::Variant;
use bloomery::redisbloom::RedisBloomFilter;
use bloomery::{
    AtomicBlockedBloomFilter, AtomicBloomFilter, BlockedBloomFilter, BloomFilter as ClassicBloomFilter,
    RotatingBloomFilter,
};
use pyo3::exceptions::{PyInterruptedError, PyOSError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::{MutexExt, RwLockExt};
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::files::{FileError, InPlace, Locked, Mapped};
use crate::items::{Chunk, Source, noted_added, with_item};

pyo3::import_exception!(io, UnsupportedOperation);

/// The library's error as Python's `ValueError`, in the words the CLI prints; memory the
/// system refused as `MemoryError`.
fn value_error(error: bloomery::Error) -> PyErr {
    let words = memory_words(&error);
    library_error(&error, words)
}

/// `error` as its Python exception, in `words`: memory refused (by the system, or past the
/// memory a filter may use) is `MemoryError`, anything else `ValueError`.
fn library_error(error: &bloomery::Error, words: String) -> PyErr {
    match error {
        bloomery::Error::OutOfMemory { .. } | bloomery::Error::MemoryLimit { .. } => {
            pyo3::exceptions::PyMemoryError::new_err(words)
        }
        _ => PyValueError::new_err(words),
    }
}

/// An error's words, a refused growth step's in terms of the memory a filter may use
/// (the only limit this package sets: [`growth_room`]).
fn memory_words(error: &bloomery::Error) -> String {
    match error {
        bloomery::Error::MemoryLimit { needed, limit } => format!(
            "the filter cannot grow: it would take {needed} bytes, more than the memory a filter \
             may use (its {limit} bytes now and 90% of the available)"
        ),
        other => other.to_string(),
    }
}

/// The bytes a growing filter's next growth step (a new sub-filter or generation) may
/// allocate: the memory a filter may use ([`bloomery::file::memory_available`]), read when
/// a step is due. A step past it is refused with `MemoryError` before anything is
/// allocated, where the allocation could succeed and the pages filled later bring the
/// kernel's out-of-memory killer (as the CLI refuses it).
fn growth_room() -> u64 {
    bloomery::file::memory_available().unwrap_or(u64::MAX)
}

fn file_error(error: FileError) -> PyErr {
    match error {
        FileError::Io(error, path) => {
            let message = error.to_string();
            let message = message.split(" (os error").next().unwrap_or(&message).to_owned();
            match error.raw_os_error() {
                // OSError(errno, message, filename) picks the subclass
                // (FileNotFoundError, PermissionError, ...).
                Some(code) => PyOSError::new_err((code, message, path.display().to_string())),
                None => PyOSError::new_err(format!("{}: {message}", path.display())),
            }
        }
        FileError::Bytes(message) => PyValueError::new_err(message),
        FileError::Memory(message) => pyo3::exceptions::PyMemoryError::new_err(message),
        FileError::Closed => closed_error(),
        // Only out of `SaveTarget::write`, whose callers make the target ready again.
        FileError::Again => PyOSError::new_err("the file's name changed during the save"),
        // Only after the handlers ran without raising (`waiting_for_locks`).
        FileError::Interrupted => PyInterruptedError::new_err("interrupted by a signal"),
        FileError::Dangling(path, link) => PyOSError::new_err((
            libc::ENOENT,
            format!("is a symbolic link to {}, which does not exist", link.display()),
            path.display().to_string(),
        )),
        FileError::HeldHere(path) => PyOSError::new_err((
            libc::EDEADLK,
            "another filter of this process holds its writers' lock (opened with mode 'r+' \
             or 'a'), and no other thread could let go of it: close that filter first, or use it",
            path.display().to_string(),
        )),
    }
}

/// Runs `call`, which may wait for files' writers' locks without the GIL, as blocking calls
/// run in Python (PEP 475): a signal ends the wait, its handler runs here, and an exception
/// it raises (Ctrl-C's `KeyboardInterrupt`, an alarm's timeout) ends the call; otherwise
/// the call is made again. `call` is given whether this thread runs alone (no other Python
/// thread could close a filter of this process that holds the lock it waits for: then
/// it is refused, not waited for forever). `call` must be safe to repeat (it is
/// interrupted only while it waits for a lock, before it changes anything) and must hold
/// none of the filter's locks when it returns: the handlers may use the filter.
fn waiting_for_locks<T>(
    py: Python<'_>,
    mut call: impl FnMut(bool) -> PyResult<files::Result<T>>,
) -> PyResult<T> {
    loop {
        match call(alone(py))? {
            Err(FileError::Interrupted) => py.check_signals()?,
            Err(FileError::Again) => {}
            done => return done.map_err(file_error),
        }
    }
}

/// Whether no other Python thread runs (`threading`'s count: threads it does not know of
/// run no Python code, so close no filter). Where that cannot be told (the interpreter
/// shutting down), not alone: the call waits, as it did before there was a check.
fn alone(py: Python<'_>) -> bool {
    let threads = py
        .import("threading")
        .and_then(|threading| threading.call_method0("active_count"))
        .and_then(|count| count.extract::<usize>());
    matches!(threads, Ok(0 | 1))
}

fn lock_read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn lock_write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn closed_error() -> PyErr {
    PyValueError::new_err(CLOSED)
}

const CLOSED: &str = "I/O operation on a closed filter";

/// `error` of a batch add; when it is the filter closed during the call (by an item's
/// `__index__`, a generator, another thread), with a note that the `added` items of the
/// call before it were added and the rest were not (as for a bad item).
fn noted_if_closed(py: Python<'_>, error: PyErr, added: usize) -> PyErr {
    if !(error.is_instance_of::<PyValueError>(py) && error.value(py).to_string() == CLOSED) {
        return error;
    }
    items::noted(py, error, closed_note(added))
}

/// The note of a batch add that found the filter closed after `added` of its items.
pub(crate) fn closed_note(added: usize) -> String {
    match added {
        0 => "no item of this call was added: the filter was closed before the first".to_owned(),
        1 => "the 1 item of this call before the filter was closed was added, the rest were not".to_owned(),
        _ => format!(
            "the {added} items of this call before the filter was closed were added, the rest were not"
        ),
    }
}

/// A `RuntimeWarning` for a new filter that is not what its parameters suggest, as the
/// CLI warns of it: a blocked filter at a rate where it takes more than twice the memory
/// that a filter hashing as Guava does needs ([`bloomery::sizing::blocked_costs_more`]);
/// a split-block filter hashed as Parquet's, over the 128 MiB Parquet's readers take.
fn warn_of_new_filter(py: Python<'_>, spec: &Spec) -> PyResult<()> {
    let message = match spec.variant {
        Variant::Blocked => bloomery::sizing::blocked_costs_more(spec.expected_items, spec.fpp)
            .map(|cost| format!("bloomery: {}", cost.warning("kind=\"classic\""))),
        Variant::SplitBlock if spec.split_block_parquet => {
            bloomery::sizing::parquet_num_blocks(spec.expected_items, spec.fpp)
                .ok()
                .filter(|&blocks| !bloomery::sizing::parquet_readers_take(blocks))
                .map(|blocks| {
                    format!(
                        "bloomery: a split-block filter of {} bytes, over the 128 MiB Parquet's \
                         readers take: the CLI cannot export it to Parquet's format; for \
                         Parquet, make one filter for fewer items or at a higher fpp; for a \
                         filter that is not for Parquet, hash=\"xxh3\"",
                        blocks * (bloomery::sizing::SPLIT_BLOCK_BITS / 8)
                    )
                })
        }
        _ => None,
    };
    message.map_or(Ok(()), |message| runtime_warning(py, message))
}

/// Issues `message` as a `RuntimeWarning` (a NUL byte in it, which no message here has,
/// would leave it empty).
fn runtime_warning(py: Python<'_>, message: String) -> PyResult<()> {
    let text = std::ffi::CString::new(message).unwrap_or_default();
    PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(), &text, 1)
}

/// The variant for a `kind=` name, or a refusal naming `kind` (it said "unknown variant",
/// the CLI's option, which Python does not have).
fn variant_of(kind: &str) -> PyResult<Variant> {
    Variant::from_name(kind).ok_or_else(|| {
        let names: Vec<&str> = Variant::ALL.iter().map(|variant| variant.name()).collect();
        PyValueError::new_err(format!(
            "unknown kind '{}': one of {}",
            kind.escape_debug(),
            names.join(", ")
        ))
    })
}

/// Refuses an option that `spec`'s variant would ignore, given a value other than its
/// default (as the CLI refuses `--seed`, `--generations` and `--nonscaling` for them): a
/// classic filter made with `seed=5` would be the one made with `seed=6`.
fn refuse_ignored_options(spec: &Spec) -> PyResult<()> {
    let variant = spec.variant;
    let defaults = Spec::new(variant, spec.expected_items, spec.fpp);
    let ignored = if spec.seed != defaults.seed && !spec.takes(SpecOption::Seed) {
        Some((
            "seed",
            "blocked, scalable-blocked, and split-block with hash='xxh3' take it",
        ))
    } else if spec.generations != defaults.generations && !spec.takes(SpecOption::Generations) {
        Some(("generations", "rotating filters take it"))
    } else if spec.scalable.scaling != defaults.scalable.scaling && !spec.takes(SpecOption::Scaling) {
        Some((
            "scaling",
            "scalable, redisbloom and scalable-blocked filters take it",
        ))
    } else if !spec.split_block_parquet && variant != Variant::SplitBlock {
        // As the others are said (the library's refusal spoke of "support").
        Some(("hash", "split-block filters take it"))
    } else {
        None
    };
    match ignored {
        Some((name, takers)) => Err(PyValueError::new_err(format!(
            "{name}= does not apply to {variant} filters ({takers})"
        ))),
        None => Ok(()),
    }
}

/// Refuses `expected_items=0` for the kinds that cannot take it, in the Python parameter's
/// name (the library refuses it as `capacity` or `items_per_generation`): the growing kinds,
/// whose first sub-filter it sizes, and the rotating kind, whose generations it sizes. The
/// fixed-size kinds take 0: their smallest filter.
fn refuse_no_items(variant: Variant, expected_items: u64) -> PyResult<()> {
    if expected_items == 0
        && let Some(what) = variant.items_sized()
    {
        return Err(PyValueError::new_err(format!(
            "expected_items must be at least 1 for {variant} filters ({what}), got 0; only the \
             fixed-size kinds take 0 (their smallest filter)"
        )));
    }
    Ok(())
}

/// A filter's state behind the Python object.
enum State {
    /// In memory: made here, loaded from bytes, or a file opened with mode "r+".
    Owned(Box<dyn DynFilter>),
    /// A file mapped read-only (mode "r").
    Mapped(Mapped),
    /// A file updated in place (mode "a").
    InPlace(InPlace),
    /// After `close()`.
    Closed,
}

/// A filter's read-only view: borrowed, or made for the call (a file updated in place,
/// whose payload its one mutable borrower lends).
enum ViewRef<'a> {
    Borrowed(&'a dyn FilterView),
    Made(Box<dyn FilterView + 'a>),
}

impl<'a> std::ops::Deref for ViewRef<'a> {
    type Target = dyn FilterView + 'a;

    fn deref(&self) -> &Self::Target {
        match self {
            ViewRef::Borrowed(view) => *view,
            ViewRef::Made(view) => view.as_ref(),
        }
    }
}

impl State {
    fn view(&self) -> PyResult<ViewRef<'_>> {
        match self {
            State::Owned(filter) => Ok(ViewRef::Borrowed(filter.as_ref() as &dyn FilterView)),
            State::Mapped(mapped) => Ok(ViewRef::Borrowed(mapped.view())),
            State::InPlace(file) => Ok(ViewRef::Made(file.view())),
            State::Closed => Err(closed_error()),
        }
    }

    fn owned(&mut self) -> PyResult<&mut Box<dyn DynFilter>> {
        match self {
            State::Owned(filter) => Ok(filter),
            State::Mapped(_) => Err(UnsupportedOperation::new_err(
                "the filter is a file opened read-only (mode 'r'): open it with mode 'r+' to change it",
            )),
            State::InPlace(_) => Err(UnsupportedOperation::new_err(
                "the filter is a file opened with mode 'a', which only adds items (in place): \
                 open it with mode 'r+' to change it otherwise",
            )),
            State::Closed => Err(closed_error()),
        }
    }

    /// Refuses a filter that cannot take items (mapped read-only, or closed).
    fn check_insertable(&mut self) -> PyResult<()> {
        match self {
            State::InPlace(_) => Ok(()),
            _ => self.owned().map(|_| ()),
        }
    }

    /// Adds a batch of items' bytes; `aging` counts the generations a rotating filter
    /// starts meanwhile.
    fn insert_batch(&mut self, items: &[&[u8]], aging: &mut Aging) -> PyResult<()> {
        match self {
            State::InPlace(file) => file.insert(items).map_err(file_error),
            _ => {
                let filter = self.owned()?;
                let inserted = if filter.as_any().is::<RotatingBloomFilter>() {
                    // An item at a time, as the library's batch insert of this kind goes, each
                    // looked at first: whether it starts a generation.
                    items.iter().try_for_each(|item| {
                        if let Some(rotating) = filter.as_any().downcast_ref() {
                            aging.before_insert(rotating);
                        }
                        filter.insert_within(item, GrowthLimit::Room(&growth_room))?;
                        aging.inserted += 1;
                        Ok(())
                    })
                } else {
                    filter.insert_batch_within(items, GrowthLimit::Room(&growth_room))
                };
                inserted.map_err(|error| match error {
                    // A batch stops at the refused item (full, or its growth refused): say what
                    // became of the others.
                    bloomery::Error::Full { .. }
                    | bloomery::Error::SubFilterLimit { .. }
                    | bloomery::Error::MemoryLimit { .. }
                    | bloomery::Error::OutOfMemory { .. } => library_error(
                        &error,
                        format!(
                            "{}; the items of this call before the refused one were added, the rest were not",
                            memory_words(&error)
                        ),
                    ),
                    other => value_error(other),
                })
            }
        }
    }

    /// The length of the filter's file bytes ([`to_bytes`](Self::to_bytes)): about what a
    /// copy takes in memory.
    fn file_len(&self) -> u64 {
        match self {
            State::Owned(filter) => filter.envelope_len(),
            State::Mapped(mapped) => mapped.len(),
            State::InPlace(file) => file.len(),
            State::Closed => 0,
        }
    }

    /// The filter's file bytes.
    fn to_bytes(&self) -> PyResult<Vec<u8>> {
        match self {
            State::Owned(filter) => Ok(filter.envelope().to_vec()),
            State::Mapped(mapped) => mapped.file_bytes().map_err(file_error),
            State::InPlace(file) => file.envelope_bytes().map_err(file_error),
            State::Closed => Err(closed_error()),
        }
    }

    /// A copy in memory (a mapped file is read whole and checked, or, unsealed or being
    /// changed in place, taken from its bits: `Mapped::to_owned_filter`), refused with
    /// `MemoryError` when it would not fit.
    fn to_owned_filter(&self) -> PyResult<Box<dyn DynFilter>> {
        // A file's bytes are read, then the filter made from them: twice its size for a
        // moment, as a load by the CLI counts them.
        let copies = if matches!(self, State::Owned(_)) { 1 } else { 2 };
        within_memory(self.file_len(), copies, || "a copy of the filter".into())?;
        match self {
            // MemoryError where the system refuses the memory the check above let through
            // (strict overcommit, another process taking it meanwhile), not an abort.
            State::Owned(filter) => filter.try_clone_box().map_err(value_error),
            State::Mapped(mapped) => mapped.to_owned_filter().map_err(file_error),
            State::InPlace(file) => file.to_owned_filter().map_err(file_error),
            State::Closed => Err(closed_error()),
        }
    }
}

/// What one batch call (`add_many`, `update`) did to a rotating filter's generations: a
/// call of more items than the filter keeps forgets its own first items, which `warn`
/// says, as the CLI's `add` warns of a run that does (`add_many(range(5000))` on 2
/// generations of 1,000 left `0 in f` False, and said nothing).
///
/// Counted exactly by generations started: the call's first item goes into the newest
/// generation, and the items of the call before the start of the `kept`-th last
/// generation started after it are in generations rotated out. Only starts by count are
/// seen (a full newest generation): a filter that also rotates by time (a file made by
/// another program with a window) may forget more, and generations another thread's items
/// start between this call's chunks are not counted.
#[derive(Default)]
struct Aging {
    /// Items of the call inserted so far.
    inserted: u64,
    /// Generations started after the call's first item went in.
    started: u64,
    /// Where the last `kept` of them start: the index, in the call, of their first item.
    starts: std::collections::VecDeque<u64>,
    /// The filter's most generations, and items per generation.
    kept: usize,
    per_generation: u64,
}

impl Aging {
    /// Before an item of the call goes into `rotating`: notes whether it starts a
    /// generation (the newest is full).
    fn before_insert(&mut self, rotating: &RotatingBloomFilter) {
        self.kept = rotating.max_generations();
        self.per_generation = rotating.items_per_generation();
        if self.inserted > 0 && rotating.newest_room() == 0 {
            self.started += 1;
            if self.starts.len() >= self.kept {
                self.starts.pop_front();
            }
            self.starts.push_back(self.inserted);
        }
    }

    /// How many of the call's first items are in generations rotated out during it.
    fn forgotten(&self) -> u64 {
        if self.kept > 0 && self.started >= self.kept as u64 {
            self.starts.front().copied().unwrap_or(0)
        } else {
            0
        }
    }

    /// `error`, which ended the call part way (a bad item, Ctrl-C), with a note when the
    /// call forgot items of its own: what [`warn`](Self::warn) says of a call that ends.
    fn noted(&self, py: Python<'_>, error: PyErr) -> PyErr {
        let forgotten = self.forgotten();
        if forgotten == 0 {
            return error;
        }
        items::noted(
            py,
            error,
            format!(
                "of the items added, the first {forgotten} are forgotten already: the rotating filter's \
                 generations rotated out during the call"
            ),
        )
    }

    /// A `RuntimeWarning` when the call forgot items of its own.
    fn warn(&self, py: Python<'_>) -> PyResult<()> {
        let forgotten = self.forgotten();
        if forgotten == 0 {
            return Ok(());
        }
        let message = format!(
            "bloomery: this call added {} items to a rotating filter that keeps {} generations \
             of {}: the first {forgotten} of them are forgotten already (their generations \
             rotated out during the call; `in` answers False for them, but for false positives \
             and items given again later); for a longer memory, make the generations larger \
             (expected_items) or more (generations=)",
            self.inserted, self.kept, self.per_generation
        );
        runtime_warning(py, message)
    }
}

/// Where the filter's file is, for `path` and `repr`. `save()` without a path goes to the
/// file opened, as it was resolved then (`Locked`, `InPlace`), never to whatever `path`
/// names later (another working directory, a symlink repointed).
struct FileLink {
    /// As the user gave it.
    path: PathBuf,
    /// Held from `open(path, "r+")` until `close()`.
    lock: Option<Locked>,
    mode: &'static str,
}

impl Drop for FileLink {
    /// A filter opened with `"r+"` that is let go of unclosed is not saved back (as a
    /// `with` block that raised): a `ResourceWarning` says so, as Python says of an
    /// unclosed file (shown with `-X dev`, `-W default` and by pytest).
    fn drop(&mut self) {
        if self.lock.is_none() {
            return;
        }
        Python::attach(|py| {
            // The filter may be let go of while an exception is being raised (an error in
            // the expression that held it): warning would consume that exception (and a
            // warning filter may raise one), so it is put aside and restored after.
            let pending = PyErr::take(py);
            let message = format!(
                "bloomery: a filter opened from {} with mode 'r+' was never closed: its changes \
                 were not saved back (close() or a with block saves them)",
                self.path.display()
            );
            // A path holds no NUL byte.
            let text = std::ffi::CString::new(message).unwrap_or_default();
            let warned = PyErr::warn(
                py,
                &py.get_type::<pyo3::exceptions::PyResourceWarning>(),
                &text,
                1,
            );
            if let Err(error) = warned {
                // Warnings turned into errors: reported as Python reports errors in __del__.
                error.write_unraisable(py, None);
            }
            if let Some(pending) = pending {
                pending.restore(py);
            }
        });
    }
}

/// A filter's state shared between Python threads.
///
/// Code holding the GIL reaches the state directly, with no lock, while no call that
/// released the GIL is at work on it (`detached == 0`): none can start meanwhile, since
/// starting one takes the GIL, and two holders of the GIL never overlap (the closures given
/// here run Rust code only, never Python code that could let the GIL go). Calls that
/// release the GIL (batches, whole-filter work) count themselves in `detached` while they
/// still hold it and take `lock`; while any is at work, holders of the GIL take `lock`
/// too, waiting for it without the GIL and taking the GIL back before they touch the
/// state (so the GIL still orders them among themselves, and the lock against the calls
/// without it; other threads run while they wait). So single-item calls cost no atomic
/// read-modify-write, and batch calls run in parallel with other Python threads.
struct Shared {
    state: UnsafeCell<State>,
    lock: RwLock<()>,
    detached: AtomicUsize,
}

// SAFETY: the state is reached only through the methods below, which follow the rules
// above; `State` itself is `Send + Sync` (filters, mapped views and in-place filters are:
// checked below).
unsafe impl Sync for Shared {}

const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<State>();
};

/// Counts a GIL-free call in `detached` until dropped (also when the call panics).
struct Detached<'a>(&'a AtomicUsize);

impl Drop for Detached<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

impl Shared {
    fn new(state: State) -> Self {
        Self {
            state: UnsafeCell::new(state),
            lock: RwLock::new(()),
            detached: AtomicUsize::new(0),
        }
    }

    /// Reads the state with the GIL held; `read` must not call into Python.
    ///
    /// Always inlined: every single-item call (`in`, `add`) comes through here, and the
    /// unlocked road is then one load and one branch in the caller, with no call of its
    /// own; the locked road stays out of line.
    #[inline(always)]
    fn read<R>(&self, py: Python<'_>, read: impl FnOnce(&State) -> R) -> R {
        if self.detached.load(Ordering::Acquire) == 0 {
            // SAFETY: no GIL-free call is at work and none can start (see `Shared`).
            read(unsafe { &*self.state.get() })
        } else {
            self.read_locked(py, read)
        }
    }

    #[cold]
    #[inline(never)]
    fn read_locked<R>(&self, py: Python<'_>, read: impl FnOnce(&State) -> R) -> R {
        // Waiting without the GIL, which is taken back before `read` runs: other threads
        // run meanwhile (a long save or batch holds the lock), and one that must run for
        // the holder to finish can.
        let _guard = self
            .lock
            .read_py_attached(py)
            .unwrap_or_else(PoisonError::into_inner);
        // SAFETY: under the read lock, which every writer takes.
        read(unsafe { &*self.state.get() })
    }

    /// Changes the state with the GIL held; `write` must not call into Python. Inlined
    /// as `read` is.
    #[inline(always)]
    fn write<R>(&self, py: Python<'_>, write: impl FnOnce(&mut State) -> R) -> R {
        if self.detached.load(Ordering::Acquire) == 0 {
            // SAFETY: as in `read`; the GIL makes this the only access.
            write(unsafe { &mut *self.state.get() })
        } else {
            self.write_locked(py, write)
        }
    }

    #[cold]
    #[inline(never)]
    fn write_locked<R>(&self, py: Python<'_>, write: impl FnOnce(&mut State) -> R) -> R {
        // Waiting without the GIL, as in `read_locked`.
        let _guard = self
            .lock
            .write_py_attached(py)
            .unwrap_or_else(PoisonError::into_inner);
        // SAFETY: under the write lock, which every other access takes.
        write(unsafe { &mut *self.state.get() })
    }

    /// Reads the state with the GIL released.
    fn read_detached<R: Send>(&self, py: Python<'_>, read: impl FnOnce(&State) -> R + Send) -> R {
        self.detached.fetch_add(1, Ordering::AcqRel);
        let _counted = Detached(&self.detached);
        py.detach(|| {
            let _guard = lock_read(&self.lock);
            // SAFETY: under the read lock; holders of the GIL take the lock while
            // `detached` counts this call.
            read(unsafe { &*self.state.get() })
        })
    }

    /// Changes the state with the GIL released.
    fn write_detached<R: Send>(&self, py: Python<'_>, write: impl FnOnce(&mut State) -> R + Send) -> R {
        self.detached.fetch_add(1, Ordering::AcqRel);
        let _counted = Detached(&self.detached);
        py.detach(|| {
            let _guard = lock_write(&self.lock);
            // SAFETY: under the write lock, as in `read_detached`.
            write(unsafe { &mut *self.state.get() })
        })
    }
}

/// A list of `True` and `False`, one per answer, built in place: the list's slots are
/// written through one slice, and the two objects' reference counts raised once all are
/// written, instead of answer by answer as `PyList::new` converts them.
fn bool_list<'py>(py: Python<'py>, answers: &[bool]) -> PyResult<Bound<'py, PyList>> {
    let len =
        ffi::Py_ssize_t::try_from(answers.len()).map_err(|_| PyValueError::new_err("too many answers"))?;
    // SAFETY: the GIL is held. `PyList_New` returns a new list of `len` empty slots (or NULL
    // with an exception set), which nothing else sees yet; each slot is filled once below,
    // with a reference of its own (the counts raised before the list is returned).
    unsafe {
        let list = Bound::from_owned_ptr_or_err(py, ffi::PyList_New(len))?.cast_into_unchecked::<PyList>();
        let (yes, no) = (ffi::Py_True(), ffi::Py_False());
        if !answers.is_empty() {
            let slots = std::slice::from_raw_parts_mut(
                (*list.as_ptr().cast::<ffi::PyListObject>()).ob_item,
                answers.len(),
            );
            for (slot, &answer) in slots.iter_mut().zip(answers) {
                *slot = if answer { yes } else { no };
            }
        }
        let found = answers.iter().filter(|&&answer| answer).count();
        for _ in 0..found {
            ffi::Py_INCREF(yes);
        }
        for _ in found..answers.len() {
            ffi::Py_INCREF(no);
        }
        Ok(list)
    }
}

/// The blocked filter a batch was hashed for: a `PyBloomFilter`'s filter keeps its kind
/// and seed for its whole life (only `close()` ends it, which the callers report first),
/// so anything else is a broken invariant, reported rather than answered wrongly.
fn blocked_with_seed<F: std::ops::Deref<Target = BlockedBloomFilter>>(
    filter: Option<F>,
    seed: u64,
) -> PyResult<F> {
    filter
        .filter(|blocked| blocked.seed() == seed)
        .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("the filter changed during a batch call"))
}

/// A Bloom filter: a set that answers "certainly absent" or "probably present" in a
/// fraction of an exact set's memory. No false negatives: an added item is always found,
/// with two exceptions: removals (``remove`` of an item never added to a counting filter,
/// and a retouched filter's removals, can make some), and the rotating kind's forgetting
/// (its oldest generation, with its items, is dropped when a new one starts: an item is
/// kept for ``generations - 1`` full generations after its own; a batch call that forgets
/// items it added itself warns with ``RuntimeWarning``).
///
/// ``kind`` is one of ``"blocked"`` (the fastest: each item in one cache line),
/// ``"classic"`` (bit for bit Guava's ``BloomFilter``), ``"counting"`` (``remove``),
/// ``"scalable"`` (grows past ``expected_items``), ``"retouched"``, ``"allowlisted"``,
/// ``"rotating"`` (``generations`` of ``expected_items`` each; forgets the oldest),
/// ``"split-block"`` (Parquet's), ``"redisbloom"`` (RedisBloom's scalable filter, its
/// ``BF.SCANDUMP`` bytes) or ``"scalable-blocked"`` (grows, in blocked sub-filters); the
/// names ``kinds()`` gives.
/// Items are ``str`` (UTF-8), ``bytes``-like objects and ``int`` (64-bit, Guava's
/// ``longFunnel``), hashed as the Rust library, the CLI and Guava hash them. A bytes-like
/// item is any C-contiguous buffer of bytes (``bytearray``, ``memoryview``,
/// ``array.array("B")``, ``mmap``, a numpy ``uint8`` array, even of one element:
/// ``np.array([5], dtype="u1")`` is ``b"\x05"``), as its bytes. An int item is also
/// anything with ``__index__`` (numpy integer scalars, a 0-d numpy integer array:
/// ``np.array(5)`` is ``5``); a ``bool`` is the int it equals (``True`` is ``1``), and
/// ``numpy.bool_``, which has no ``__index__``, is a ``TypeError``. A buffer of wider
/// elements (a numpy ``int64`` array) is not one item: ``add_many`` and ``contains_many``
/// take its elements as int items. Every int item is 8 bytes, a numpy ``int32``
/// element's too: a 32-bit integer item (Guava's ``integerFunnel``, the CLI's
/// ``--format int``, Rust ``i32``, a Parquet INT32 column's filter) is its 4 bytes,
/// ``struct.pack("<i", x)``, or in a batch ``add_many(a.astype("<i4"), item_size=4)``.
///
/// Threads may share a filter (batch calls release the GIL). A process made by
/// ``os.fork()`` while another thread was inside a call on a filter (a batch, a save)
/// inherits that call's lock without the thread that would let go of it: the child's
/// calls on that filter wait forever. Fork before starting threads, or use
/// ``multiprocessing``'s ``"spawn"`` or ``"forkserver"`` start methods.
///
/// >>> from bloomery import BloomFilter
/// >>> seen = BloomFilter(1000, 0.01)
/// >>> seen.add("apple")
/// True
/// >>> "apple" in seen, "pear" in seen
/// (True, False)
/// >>> seen.update(["pear", b"raw bytes", 42])
/// >>> seen.contains_many(["pear", 42, 43])
/// [True, True, False]
/// >>> len(seen)
/// 4
#[pyclass(frozen, module = "bloomery", name = "BloomFilter")]
pub struct PyBloomFilter {
    shared: Shared,
    file: Mutex<Option<FileLink>>,
}

impl PyBloomFilter {
    /// One try of `save` (see there), given whether this thread runs alone; a wait for a
    /// lock that a signal interrupted is `Ok(Err(Interrupted))`, with every lock let go of.
    fn save_once(&self, py: Python<'_>, path: Option<&Path>, alone: bool) -> PyResult<files::Result<()>> {
        let mut link = self.link(py);
        // The file this filter updates in place: its real path, as resolved when it was
        // opened, and the file whose lock it holds.
        let (in_place, in_place_held) = self.shared.read(py, |state| match state {
            State::InPlace(file) => (Some(file.real().to_owned()), Some(file.held())),
            _ => (None, None),
        });
        let locked_real = link
            .as_ref()
            .and_then(|link| link.lock.as_ref())
            .map(|locked| locked.real().to_owned());
        let (target, own_file) = match (path, link.as_ref()) {
            (Some(path), _) => {
                let own_file = (in_place.is_some() || locked_real.is_some()) && {
                    let real = files::resolve(path).map_err(file_error)?;
                    in_place.as_ref() == Some(&real) || locked_real.as_ref() == Some(&real)
                };
                (path.to_path_buf(), own_file)
            }
            // Without a path: the file opened, whatever its name names now.
            (None, Some(link)) if link.mode == "r+" || link.mode == "a" => (link.path.clone(), true),
            _ => {
                return Err(PyValueError::new_err(
                    "save() needs a path: the filter was not opened with mode 'r+' or 'a'",
                ));
            }
        };
        if own_file && in_place.is_some() {
            // Back to the file this filter updates in place: sealed.
            return Ok(self.shared.write_detached(py, |state| match state {
                State::InPlace(file) => file.seal(),
                _ => Err(FileError::Closed),
            }));
        }
        if own_file {
            // Back to the file this filter holds the lock of (mode "r+"): replaced under that
            // lock, which no other writer can take meanwhile (no wait, only the writing).
            let Some(FileLink {
                lock: Some(locked), ..
            }) = link.as_mut()
            else {
                // Its file let go of (closed).
                return Err(closed_error());
            };
            return Ok(self.shared.read_detached(py, |state| match state {
                State::Owned(filter) => locked.save(&filter.envelope(), &target),
                // Closed meanwhile (or, from another thread, changed in state).
                _ => Err(FileError::Closed),
            }));
        }
        // The file whose lock this filter holds (mode "r+", or "a"): another name of it (a
        // hard link) is replaced under that lock, not waited for.
        let held = link
            .as_ref()
            .and_then(|link| link.lock.as_ref())
            .map(Locked::held)
            .or(in_place_held);
        // Elsewhere, the target is made ready first, holding nothing of this filter: not
        // its state (other threads add to it meanwhile, and what they added is saved), nor
        // its link to a file (`path`, `mode`, `repr()` and `close()` from other threads
        // answer meanwhile: one that waited behind a wait for another writer's lock could
        // be the thread that would close that writer, and neither went on).
        drop(link);
        let ready = match py.detach(|| files::SaveTarget::prepare(&target, held, alone)) {
            Ok(ready) => ready,
            Err(error) => return Ok(Err(error)),
        };
        let saved = self.shared.read_detached(py, |state| match state {
            State::Owned(filter) => ready.write(|writer| filter.envelope().write_to(writer)),
            State::Mapped(mapped) => mapped
                .file_bytes()
                .and_then(|bytes| ready.write(|writer| writer.write_all(&bytes))),
            State::InPlace(file) => file
                .envelope_bytes()
                .and_then(|bytes| ready.write(|writer| writer.write_all(&bytes))),
            // Closed meanwhile.
            State::Closed => Err(FileError::Closed),
        });
        if let Err(error) = saved {
            return Ok(Err(error));
        }
        // A filter made in memory reports the file it was last saved to; one opened from a
        // file keeps reporting that file (where `save()` without a path goes).
        let mut link = self.link(py);
        if link.as_ref().is_none_or(|link| link.mode == "w") {
            *link = Some(FileLink {
                path: target,
                lock: None,
                mode: "w",
            });
        }
        Ok(Ok(()))
    }

    /// Another program's bytes for the filter (`any::to_guava_bytes`, ...), made without
    /// the GIL from the filter in memory, or a copy of a file's.
    fn foreign_bytes<'py>(
        &self,
        py: Python<'py>,
        convert: fn(&dyn DynFilter) -> bloomery::Result<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        // The bytes made, then Python's copy; a file's filter is read into memory first.
        let (len, copies) = self.shared.read(py, |state| {
            (
                state.file_len(),
                if matches!(state, State::Owned(_)) { 2 } else { 3 },
            )
        });
        within_memory(len, copies, || "another program's bytes of the filter".into())?;
        let bytes = self.shared.read_detached(py, |state| match state {
            State::Owned(filter) => convert(filter.as_ref()).map_err(value_error),
            _ => convert(state.to_owned_filter()?.as_ref()).map_err(value_error),
        })?;
        new_bytes(py, &bytes)
    }

    fn from_owned(filter: Box<dyn DynFilter>) -> Self {
        Self {
            shared: Shared::new(State::Owned(filter)),
            file: Mutex::new(None),
        }
    }

    /// When the filter is an in-memory blocked filter (the default kind), whose batches can
    /// be hashed as they are read: its seed.
    fn blocked_seed(&self, py: Python<'_>) -> Option<u64> {
        self.shared.read(py, |state| match state {
            State::Owned(filter) => filter
                .as_any()
                .downcast_ref::<BlockedBloomFilter>()
                .map(BlockedBloomFilter::seed),
            _ => None,
        })
    }

    /// Adds a batch: chunks read with the GIL, inserted without it. For a blocked filter
    /// the items are hashed as they are read (8 bytes an item handed over, not the item);
    /// for the other kinds they are copied. `before`: the items of the call added before
    /// this source (`update`'s earlier iterables), for the note on a bad item's error.
    /// Returns the items read.
    fn insert_source(
        &self,
        py: Python<'_>,
        mut source: Source<'_>,
        before: usize,
        aging: &mut Aging,
    ) -> PyResult<usize> {
        // Refuse before reading anything when the filter cannot change.
        self.shared.write(py, State::check_insertable)?;
        if let Some(seed) = self.blocked_seed(py) {
            let mut added = before;
            return source.for_each_hashed(py, seed, Some(before), |hashes| {
                self.shared
                    .write_detached(py, |state| -> PyResult<()> {
                        blocked_with_seed(state.owned()?.as_any_mut().downcast_mut(), seed)?
                            .insert_hash_batch(hashes);
                        Ok(())
                    })
                    .map_err(|error| noted_if_closed(py, error, added))?;
                added += hashes.len();
                Ok(())
            });
        }
        let mut chunk = Chunk::new();
        let mut position = 0;
        loop {
            // A bad item ends the batch after the items before it are added.
            let (copied, error) = source.next_chunk(position, &mut chunk);
            if copied > 0 {
                let chunk = &chunk;
                let insert = |state: &mut State| state.insert_batch(&chunk.slices(), aging);
                // A large item that may change while it is read: with the GIL held.
                if chunk.detachable() {
                    self.shared.write_detached(py, insert)
                } else {
                    self.shared.write(py, insert)
                }
                .map_err(|error| noted_if_closed(py, error, before + position))?;
            }
            position += copied;
            if let Some(error) = error {
                return Err(noted_added(py, error, before + position));
            }
            if copied == 0 {
                return Ok(position);
            }
            items::check_signals_between_chunks(py, Some(before + position))?;
        }
    }

    /// Adds an item with these bytes; `None` when the filter cannot change (mapped
    /// read-only, or closed), without touching it.
    #[inline]
    fn add_bytes(&self, py: Python<'_>, bytes: &[u8]) -> Option<PyResult<bool>> {
        self.shared.write(py, |state| match state {
            State::Owned(filter) => Some(
                filter
                    .insert_within(bytes, GrowthLimit::Room(&growth_room))
                    .map_err(value_error),
            ),
            State::InPlace(file) => Some(file.insert_one(bytes).map_err(file_error)),
            _ => None,
        })
    }

    /// Whether an item with these bytes might be present; `None` once closed.
    #[inline]
    fn contains_bytes(&self, py: Python<'_>, bytes: &[u8]) -> Option<bool> {
        self.shared.read(py, |state| match state {
            State::Owned(filter) => Some(filter.contains(bytes)),
            State::Mapped(mapped) => Some(mapped.view().contains(bytes)),
            State::InPlace(file) => Some(file.contains(bytes)),
            State::Closed => None,
        })
    }

    /// Looks up a batch: one answer per item, in order (hashed as read for a blocked
    /// filter, as in [`insert_source`](Self::insert_source)).
    fn lookup_source(&self, py: Python<'_>, mut source: Source<'_>) -> PyResult<Vec<bool>> {
        // A closed filter refuses an empty batch too, as it refuses any other.
        self.shared.read(py, |state| state.view().map(drop))?;
        let mut results = source.answers()?;
        if let Some(seed) = self.blocked_seed(py) {
            source.lookup_hashed(py, seed, &mut results, |hashes, answers| {
                self.shared.read_detached(py, |state| -> PyResult<()> {
                    let filter = match state {
                        State::Owned(filter) => filter.as_any().downcast_ref(),
                        State::Mapped(_) | State::InPlace(_) => None,
                        State::Closed => return Err(closed_error()),
                    };
                    blocked_with_seed(filter, seed)?.contains_hash_batch(hashes, answers);
                    Ok(())
                })
            })?;
            return Ok(results);
        }
        let mut chunk = Chunk::new();
        let mut position = 0;
        while let copied @ 1.. = source.fill(position, &mut chunk)? {
            position += copied;
            let start = results.len();
            items::reserve_answers(&mut results, copied)?;
            results.resize(start + copied, false);
            let (chunk, answers) = (&chunk, &mut results[start..]);
            let look_up = |state: &State| -> PyResult<()> {
                state.view()?.contains_batch(&chunk.slices(), answers);
                Ok(())
            };
            // A large item that may change while it is read: with the GIL held.
            if chunk.detachable() {
                self.shared.read_detached(py, look_up)?;
            } else {
                self.shared.read(py, look_up)?;
            }
            items::check_signals_between_chunks(py, None)?;
        }
        Ok(results)
    }

    /// The file link, locked (waiting without the GIL: a holder may be saving without it).
    fn link(&self, py: Python<'_>) -> MutexGuard<'_, Option<FileLink>> {
        self.file
            .lock_py_attached(py)
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn stats(&self, py: Python<'_>) -> PyResult<any::Stats> {
        // Counting the bits set reads the whole filter: without the GIL.
        self.shared.read_detached(py, |state| Ok(state.view()?.stats()))
    }

    /// A copy of the filter in memory, made with the GIL released (so that no two
    /// filters are ever locked at once by one call).
    fn snapshot(&self, py: Python<'_>) -> PyResult<Box<dyn DynFilter>> {
        self.shared.read_detached(py, State::to_owned_filter)
    }

    fn file_bytes(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        self.shared.read_detached(py, State::to_bytes)
    }
}

#[pymethods]
impl PyBloomFilter {
    /// A new, empty filter for ``expected_items`` distinct items at false-positive
    /// probability ``fpp``. ``expected_items=0`` gives the fixed-size kinds (blocked,
    /// classic, counting, retouched, allowlisted, split-block) their smallest filter (one
    /// block, or 64 bits); the growing kinds (scalable, redisbloom, scalable-blocked), whose
    /// first sub-filter it sizes, and rotating, whose generations it sizes, need at least
    /// 1 (``ValueError``). ``seed`` is the blocked filter's hash seed, ``generations``
    /// the rotating filter's, ``scaling=False`` makes a scalable filter refuse items
    /// beyond its capacity. ``hash`` is the split-block filter's: ``"parquet"`` (XXH64,
    /// seed 0, what Parquet reads; sized as its readers take it, a power of two bytes up
    /// to 128 MiB) or ``"xxh3"`` (XXH3-64 with ``seed``, the blocked filter's hash:
    /// faster, sized exactly, not readable by Parquet).
    ///
    /// >>> BloomFilter(10**6, 0.001, kind="classic").memory_bytes
    /// 1797128
    /// >>> "x" in BloomFilter(100, kind="split-block", hash="xxh3", seed=5)
    /// False
    /// >>> BloomFilter(100, 2.0)
    /// Traceback (most recent call last):
    /// ...
    /// ValueError: fpp (false-positive probability) must be in (0, 1), got 2
    #[new]
    #[pyo3(
        signature = (expected_items, fpp=FppArg::Value(0.01), kind="blocked", *, seed=IntArg::Value(0), generations=IntArg::Value(2), scaling=true, hash="parquet"),
        text_signature = "(expected_items, fpp=0.01, kind=\"blocked\", *, seed=0, generations=2, scaling=True, hash=\"parquet\")"
    )]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn new(
        py: Python<'_>,
        expected_items: IntArg,
        fpp: FppArg,
        kind: &str,
        seed: IntArg,
        generations: IntArg,
        scaling: bool,
        hash: &str,
    ) -> PyResult<Self> {
        let expected_items = expected_items.unsigned("expected_items")?;
        let fpp = fpp.get()?;
        let seed = seed.unsigned("seed")?;
        let generations = generations.generations()?;
        let variant = variant_of(kind)?;
        refuse_no_items(variant, expected_items)?;
        let mut spec = Spec::new(variant, expected_items, fpp);
        spec.split_block_parquet = match hash {
            "parquet" => true,
            "xxh3" => false,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "hash must be 'parquet' or 'xxh3', got '{}'",
                    hash.escape_debug()
                )));
            }
        };
        spec.seed = seed;
        spec.generations = generations;
        spec.scalable.scaling = scaling;
        refuse_ignored_options(&spec)?;
        let filter = create_within_memory(py, &spec, 1)?;
        warn_of_new_filter(py, &spec)?;
        Ok(Self::from_owned(filter))
    }

    /// Adds ``item``; returns whether it was new: ``True`` when ``item in f`` would have
    /// answered ``False`` just before, ``False`` when the item was (probably) there
    /// already. Every kind answers so; a counting filter's counters go up either way.
    ///
    /// >>> f = BloomFilter(100)
    /// >>> f.add(7), f.add(7)
    /// (True, False)
    // `filter.add(item)` with a common item is answered by `add_fast` before it gets here,
    // with the same answer.
    fn add(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        match with_item(item, |bytes| self.add_bytes(py, bytes))? {
            Some(result) => result,
            None => self.shared.write(py, |state| state.owned().map(|_| false)),
        }
    }

    /// Whether ``item`` might be present: ``False`` is certain.
    ///
    /// (`item in filter` reaches this through [`contains_slot`] when the item is a common
    /// one; the answer is the same.)
    fn __contains__(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        with_item(item, |bytes| self.contains_bytes(py, bytes))?.ok_or_else(closed_error)
    }

    /// Adds every item of each iterable (as ``set.update``), in batches with the GIL
    /// released.
    #[pyo3(signature = (*iterables))]
    fn update(&self, py: Python<'_>, iterables: &Bound<'_, PyTuple>) -> PyResult<()> {
        let mut aging = Aging::default();
        items::each_iterable(py, iterables, |source, before| {
            self.insert_source(py, source, before, &mut aging)
        })
        .map_err(|error| aging.noted(py, error))?;
        aging.warn(py)
    }

    /// Adds a batch through the library's batched insert, with the GIL released: a list
    /// or tuple of items, any iterable, a buffer of integers (a numpy integer array,
    /// ``array.array``: each element an ``int`` item) or a bytes-like buffer cut into
    /// items of ``item_size`` bytes.
    ///
    /// >>> f = BloomFilter(1000)
    /// >>> f.add_many(b"abcdefgh", item_size=4)
    /// >>> f.contains_many([b"abcd", b"efgh", b"ijkl"])
    /// [True, True, False]
    #[pyo3(signature = (items, *, item_size=None))]
    fn add_many(&self, py: Python<'_>, items: &Bound<'_, PyAny>, item_size: Option<IntArg>) -> PyResult<()> {
        let mut aging = Aging::default();
        self.insert_source(
            py,
            Source::new(items, IntArg::item_size(item_size.as_ref())?)?,
            0,
            &mut aging,
        )
        .map_err(|error| aging.noted(py, error))?;
        aging.warn(py)
    }

    /// Looks up a batch (the forms ``add_many`` takes) with the GIL released; one
    /// ``bool`` per item, in order.
    ///
    /// >>> import array
    /// >>> f = BloomFilter(1000)
    /// >>> f.update(range(10))
    /// >>> f.contains_many(array.array("q", [3, 30]))
    /// [True, False]
    #[pyo3(signature = (items, *, item_size=None))]
    fn contains_many<'py>(
        &self,
        py: Python<'py>,
        items: &Bound<'py, PyAny>,
        item_size: Option<IntArg>,
    ) -> PyResult<Bound<'py, PyList>> {
        let results = self.lookup_source(py, Source::new(items, IntArg::item_size(item_size.as_ref())?)?)?;
        bool_list(py, &results)
    }

    /// Removes one occurrence of ``item`` (counting filters only).
    ///
    /// >>> f = BloomFilter(100, kind="counting")
    /// >>> f.add("x")
    /// True
    /// >>> f.remove("x"); "x" in f
    /// False
    /// >>> BloomFilter(100).remove("x")
    /// Traceback (most recent call last):
    /// ...
    /// ValueError: blocked filters do not support remove
    fn remove(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<()> {
        with_item(item, |bytes| {
            self.shared
                .write(py, |state| PyResult::Ok(state.owned()?.remove(bytes)))?
                .map_err(value_error)
        })?
    }

    /// Removes every item, keeping the parameters (a growing kind goes back to its first
    /// sub-filter, a rotating one to its newest generation, emptied).
    ///
    /// >>> f = BloomFilter(100); f.add(1)
    /// True
    /// >>> f.clear(); 1 in f
    /// False
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.shared
            .write_detached(py, |state| state.owned()?.clear().map_err(value_error))
    }

    /// A copy in memory (of a mapped file: the whole file, read and checked).
    fn copy(&self, py: Python<'_>) -> PyResult<Self> {
        Ok(Self::from_owned(self.snapshot(py)?))
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<Self> {
        self.copy(py)
    }

    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        self.copy(py)
    }

    /// The union: a new filter holding the items of both (same kind and parameters).
    ///
    /// >>> a, b = BloomFilter(100), BloomFilter(100)
    /// >>> a.add("x"); b.add("y")
    /// True
    /// True
    /// >>> sorted(item for item in ["x", "y", "z"] if item in a | b)
    /// ['x', 'y']
    /// >>> a | BloomFilter(100, kind="classic")
    /// Traceback (most recent call last):
    /// ...
    /// ValueError: filters are incompatible: variants differ: blocked vs classic
    fn __or__(&self, py: Python<'_>, other: PyRef<'_, PyBloomFilter>) -> PyResult<Self> {
        let result = self.copy(py)?;
        result.__ior__(py, other)?;
        Ok(result)
    }

    /// The intersection: a filter answering present only where both do.
    fn __and__(&self, py: Python<'_>, other: PyRef<'_, PyBloomFilter>) -> PyResult<Self> {
        let result = self.copy(py)?;
        result.__iand__(py, other)?;
        Ok(result)
    }

    /// Adds every item of ``other`` in place (to a file opened with mode ``"a"`` too: its
    /// bits ORed into the file's).
    fn __ior__(&self, py: Python<'_>, other: PyRef<'_, PyBloomFilter>) -> PyResult<()> {
        // With itself too (a snapshot of it): checked as any other (closed, read-only,
        // a kind without it), and a counting filter's counts doubled, as `f | f` does.
        let theirs = other.snapshot(py)?;
        self.shared.write_detached(py, |state| match state {
            State::InPlace(file) => file.union(theirs.as_ref()).map_err(file_error),
            _ => state.owned()?.union(theirs.as_ref()).map_err(value_error),
        })
    }

    /// Keeps, in place, only what both filters answer present.
    fn __iand__(&self, py: Python<'_>, other: PyRef<'_, PyBloomFilter>) -> PyResult<()> {
        // With itself too (a snapshot of it): checked as any other (closed, read-only,
        // a kind without it).
        let theirs = other.snapshot(py)?;
        self.shared.write_detached(py, |state| {
            state.owned()?.intersection(theirs.as_ref()).map_err(value_error)
        })
    }

    /// The union of ``self`` and every filter given, as a new filter.
    #[pyo3(signature = (*others))]
    fn union(&self, py: Python<'_>, others: Vec<PyRef<'_, PyBloomFilter>>) -> PyResult<Self> {
        let result = self.copy(py)?;
        for other in others {
            result.__ior__(py, other)?;
        }
        Ok(result)
    }

    /// The intersection of ``self`` and every filter given, as a new filter.
    #[pyo3(signature = (*others))]
    fn intersection(&self, py: Python<'_>, others: Vec<PyRef<'_, PyBloomFilter>>) -> PyResult<Self> {
        let result = self.copy(py)?;
        for other in others {
            result.__iand__(py, other)?;
        }
        Ok(result)
    }

    /// Whether every item ``self`` answers present, ``other`` answers present too (every
    /// bit of ``self`` is set in ``other``): ``False`` is certain (some item of ``self``
    /// is not in ``other``), ``True`` is "probably" as membership is. Classic, blocked and
    /// split-block filters of the same parameters.
    ///
    /// >>> small, large = BloomFilter(100), BloomFilter(100)
    /// >>> small.update(["a", "b"]); large.update(["a", "b", "c"])
    /// >>> small.issubset(large), large.issubset(small), small <= large
    /// (True, False, True)
    fn issubset(&self, py: Python<'_>, other: PyRef<'_, PyBloomFilter>) -> PyResult<bool> {
        subset(py, self, &other)
    }

    /// ``other.issubset(self)``.
    fn issuperset(&self, py: Python<'_>, other: PyRef<'_, PyBloomFilter>) -> PyResult<bool> {
        subset(py, &other, self)
    }

    fn __le__(&self, py: Python<'_>, other: PyRef<'_, PyBloomFilter>) -> PyResult<bool> {
        self.issubset(py, other)
    }

    fn __ge__(&self, py: Python<'_>, other: PyRef<'_, PyBloomFilter>) -> PyResult<bool> {
        self.issuperset(py, other)
    }

    /// Equal kind, parameters and bits (the same file bytes).
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(other) = other.cast::<PyBloomFilter>() else {
            return Ok(false);
        };
        let other = other.get();
        if std::ptr::eq(self, other) {
            return Ok(true);
        }
        // A closed filter has no bits to compare, whatever the other is (its length, 0,
        // once made it unequal to an open filter but an error beside a closed one): each
        // length is read with that check, under one lock, so a close between the two is
        // the error too. Different lengths are different bytes; equal ones are compared as
        // two copies, refused with `MemoryError` when both would not fit (a failed
        // allocation aborts).
        let open_len = |filter: &Self| {
            filter
                .shared
                .read(py, |state| state.view().map(|_| state.file_len()))
        };
        let len = open_len(self)?;
        if len != open_len(other)? {
            return Ok(false);
        }
        within_memory(len, 2, || "comparing two filters".into())?;
        Ok(self.file_bytes(py)? == other.file_bytes(py)?)
    }

    /// An estimate of the distinct items added (``approx_items``, as an ``int``).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.stats(py)?.estimated_len.min(isize::MAX as u64) as usize)
    }

    /// An estimate of the distinct items added: counted by the filters that count them
    /// (scalable, rotating), else estimated from the bits set; ``2**64 - 1`` when every bit
    /// is set, where the bits tell nothing of how many.
    #[getter]
    fn approx_items(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.stats(py)?.estimated_len)
    }

    /// The probability that an item never added is reported present, as the filter is now.
    #[getter]
    fn expected_fpp(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(self.stats(py)?.expected_fpp)
    }

    /// The same as ``expected_fpp``.
    #[getter]
    fn fpp(&self, py: Python<'_>) -> PyResult<f64> {
        self.expected_fpp(py)
    }

    /// The items the filter holds before it grows, starts a generation or refuses more,
    /// where that is known (``None`` otherwise). The growing kinds (scalable, redisbloom,
    /// scalable-blocked): all their sub-filters' items so far (``expected_items`` until the
    /// first growth, more after); rotating: one generation's, ``expected_items``; blocked:
    /// the ``expected_items`` its file records (``None`` for a file that records none,
    /// and for split-block filters). Classic, counting, retouched and allowlisted filters
    /// keep only their bits and hash functions, and take any number of items at a rising
    /// false-positive rate: theirs is worked back from that shape, the most items it can
    /// have been sized for at this ``fpp``, not the ``expected_items`` given.
    ///
    /// >>> BloomFilter(10, 0.01, "classic").capacity, BloomFilter(10, 0.01).capacity
    /// (13, 10)
    #[getter]
    fn capacity(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        Ok(self.stats(py)?.capacity)
    }

    /// Bytes of bits and counters in memory (or mapped).
    #[getter]
    fn memory_bytes(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.stats(py)?.memory_bytes)
    }

    /// The variant's name (the ``kind=`` it was made with).
    #[getter]
    fn kind(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.shared.read(py, |state| Ok(state.view()?.variant().name()))
    }

    /// The file the filter was opened from, or else the one it was last saved to, if any.
    #[getter]
    fn path(&self, py: Python<'_>) -> Option<std::ffi::OsString> {
        // As `os.fsdecode` gives it (bytes that are not UTF-8 as surrogates), so that it
        // names the file: `display()` put U+FFFD in their place.
        self.link(py)
            .as_ref()
            .map(|link| link.path.clone().into_os_string())
    }

    /// How the filter is tied to ``path``: ``"r"`` (a file mapped, read-only), ``"r+"`` (a
    /// file loaded, locked, saved back by ``close()``), ``"a"`` (a file whose items are
    /// added in place), ``"w"`` (a filter in memory, made here or loaded from bytes, that
    /// ``save(path)`` last wrote to ``path``: not a file's filter, so ``close()`` leaves it
    /// open and ``save()`` needs a path), or ``None`` (in memory, never saved).
    #[getter]
    fn mode(&self, py: Python<'_>) -> Option<&'static str> {
        self.link(py).as_ref().map(|link| link.mode)
    }

    /// Whether the filter was closed: a filter opened from a file (``open()``) after
    /// ``close()`` or its ``with`` block, when every query raises ``ValueError``. A filter
    /// in memory (made here, or loaded from bytes; saved or not) has no file to let go of:
    /// ``close()`` leaves it usable, and this stays ``False``.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.shared.read(py, |state| matches!(state, State::Closed))
    }

    /// The variant's parameters, as ``bloomery info`` prints them.
    fn info(&self, py: Python<'_>) -> PyResult<Vec<(&'static str, String)>> {
        self.shared
            .read_detached(py, |state| Ok(state.view()?.describe()))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let Ok((variant, stats)) = self.shared.read_detached(py, |state| {
            state.view().map(|view| (view.variant(), view.stats()))
        }) else {
            return "<bloomery.BloomFilter (closed)>".to_owned();
        };
        let mut text = format!(
            "<bloomery.BloomFilter kind='{}' approx_items={} expected_fpp={:.3e} memory_bytes={}",
            variant.name(),
            stats.estimated_len,
            stats.expected_fpp,
            stats.memory_bytes
        );
        if let Some(capacity) = stats.capacity {
            text.push_str(&format!(" capacity={capacity}"));
        }
        if let Some(link) = self.link(py).as_ref() {
            // Python's repr of the path as `path` gives it.
            let shown = link
                .path
                .as_os_str()
                .into_pyobject(py)
                .map_err(PyErr::from)
                .and_then(|path| path.repr())
                .map_or_else(|_| format!("'{}'", link.path.display()), |repr| repr.to_string());
            text.push_str(&format!(" path={shown} mode='{}'", link.mode));
        }
        text.push('>');
        text
    }

    /// The filter in the library's file format (docs/format.md): what ``save`` writes,
    /// what the CLI and the Rust library read.
    ///
    /// >>> f = BloomFilter(100, kind="scalable"); f.add("x")
    /// True
    /// >>> g = BloomFilter.from_bytes(f.to_bytes())
    /// >>> "x" in g, g == f, g.kind
    /// (True, True, 'scalable')
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        // The bytes read, then Python's copy.
        let len = self.shared.read(py, |state| state.file_len());
        within_memory(len, 2, || "a copy of the filter's bytes".into())?;
        let bytes = self.file_bytes(py)?;
        new_bytes(py, &bytes)
    }

    /// A filter from the library's file format, every checksum and parameter checked.
    ///
    /// >>> BloomFilter.from_bytes(b"not a filter")
    /// Traceback (most recent call last):
    /// ...
    /// ValueError: invalid bloomery data: wrong magic bytes: not a bloomery filter
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data: Vec<u8> = bytes_of(data, "from_bytes")?;
        let filter = py.detach(|| any::open(&data)).map_err(value_error)?;
        Ok(Self::from_owned(filter))
    }

    /// A classic filter's bytes as Guava's ``BloomFilter.writeTo`` writes them, for
    /// ``BloomFilter.readFrom`` in Java.
    ///
    /// >>> f = BloomFilter(100, kind="classic"); f.add("x")
    /// True
    /// >>> "x" in BloomFilter.from_guava_bytes(f.to_guava_bytes())
    /// True
    fn to_guava_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.foreign_bytes(py, any::to_guava_bytes)
    }

    /// A classic filter from Guava's ``BloomFilter.writeTo`` bytes.
    #[staticmethod]
    fn from_guava_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data: Vec<u8> = bytes_of(data, "from_guava_bytes")?;
        let filter = py
            .detach(|| ClassicBloomFilter::from_guava_bytes(&data))
            .map_err(value_error)?;
        Ok(Self::from_owned(Box::new(filter)))
    }

    /// A ``kind="redisbloom"`` filter's ``BF.SCANDUMP`` pieces joined in order (its chain
    /// header, then every link's bits), which ``from_redisbloom_scandump`` reads back.
    ///
    /// >>> f = BloomFilter(100, kind="redisbloom"); f.add("x")
    /// True
    /// >>> g = BloomFilter.from_redisbloom_scandump(f.to_redisbloom_scandump())
    /// >>> "x" in g, g == f
    /// (True, True)
    fn to_redisbloom_scandump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.foreign_bytes(py, any::to_redisbloom_scandump)
    }

    /// A ``kind="redisbloom"`` filter from a RedisBloom filter's ``BF.SCANDUMP`` pieces
    /// joined in order, as RedisBloom's migration loop gives them (from a RedisBloom
    /// server, or the bloomery module's RedisBloom-layout keys)::
    ///
    ///     pieces, iterator = [], 0
    ///     while True:
    ///         iterator, data = r.execute_command("BF.SCANDUMP", key, iterator)
    ///         if iterator == 0:
    ///             break
    ///         pieces.append(data)
    ///     f = BloomFilter.from_redisbloom_scandump(b"".join(pieces))
    #[staticmethod]
    fn from_redisbloom_scandump(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data: Vec<u8> = bytes_of(data, "from_redisbloom_scandump")?;
        let filter = py
            .detach(|| RedisBloomFilter::from_scandump_stream(&data))
            .map_err(value_error)?;
        Ok(Self::from_owned(Box::new(filter)))
    }

    /// Opens a filter file (the CLI's): mode ``"r"`` maps it read-only, after checking the
    /// payload checksum (reading the file once), as the CLI's ``check`` does: a damaged
    /// file is a ``ValueError`` rather than silent false negatives. ``verify=False`` trusts
    /// the file instead: it opens at once, whatever its size, and a lookup reads only the
    /// pages it touches, but damaged bits answer lookups unnoticed (``check --no-verify``);
    /// mode ``"r+"`` reads it
    /// whole (every checksum checked) and locks it against other writers (the CLI's
    /// lock) until ``close()``; ``save()`` writes it back atomically (a new file renamed
    /// over the name, so a file with other names, hard links, is refused at open, as the
    /// CLI refuses it: they would keep the old filter). Mode ``"a"`` adds
    /// items in place, as ``bloomery add`` does, to classic, blocked and split-block files
    /// of any size: the file is mapped writable and locked until ``close()``, memory is the
    /// pages touched, and only they are written. The file is marked unsealed before the
    /// first item goes in and sealed by ``close()`` or ``save()``; a process killed in
    /// between leaves every item it added present and the file unsealed (``bloomery
    /// verify`` says so, ``bloomery seal`` or the next writer seals it). Its items are in
    /// the file as they are added, so leaving a ``with`` block by an exception seals them
    /// too. Mode ``"a"`` only adds (items, and other filters' with ``|=``): ``clear``, ``remove``
    /// and ``&=`` need ``"r+"``.
    ///
    /// An unsealed file (a writer in place was killed, or is at work) has valid bits and a
    /// stale payload checksum: every mode uses its bits, as the CLI's readers and writers
    /// do (mode ``"r"``'s check cannot check it, and does not call a file damaged whose header a
    /// writer changed while it was read). Copies of a mapped file (``to_bytes``, pickle,
    /// ``save(path)``, ``copy`` and the set operations) are sealed files of the bits read,
    /// with every item the file held when the copy began, even while ``bloomery add``
    /// changes it. Devices, FIFOs and directories are refused.
    ///
    /// Modes ``"r+"`` and ``"a"``, and ``save()`` over an existing file, wait for another
    /// writer's lock (a signal handler that raises, Ctrl-C's ``KeyboardInterrupt`` among
    /// them, ends the wait with its exception). The lock that another filter of this
    /// process holds is waited for only while other threads run, which could close that
    /// filter; a thread alone gets ``OSError`` (``errno.EDEADLK``) at once, not a wait
    /// for itself.
    ///
    /// A mapped file must not be truncated or rewritten in place by another program while
    /// it is open: bloomery's writers replace files by rename, or only set bits in place
    /// (``add`` to a classic, blocked or split-block file, which a reader then sees), but a
    /// file truncated in place makes the next access past the new end fail with SIGBUS,
    /// which ends the interpreter.
    ///
    /// >>> import os, tempfile
    /// >>> path = os.path.join(tempfile.mkdtemp(), "seen.bloom")
    /// >>> f = BloomFilter(1000); f.add("x"); f.save(path)
    /// True
    /// >>> with BloomFilter.open(path, "r+") as g:
    /// ...     g.add("y")
    /// True
    /// >>> with BloomFilter.open(path) as h:
    /// ...     "x" in h, "y" in h, h.mode
    /// (True, True, 'r')
    /// >>> with BloomFilter.open(path, "a") as g:
    /// ...     g.add("z"), g.mode
    /// (True, 'a')
    /// >>> "z" in BloomFilter.open(path)
    /// True
    #[staticmethod]
    #[pyo3(signature = (path, mode="r", *, verify=true))]
    fn open(py: Python<'_>, path: PathArg, mode: &str, verify: bool) -> PyResult<Self> {
        let PathArg(path) = path;
        refuse_nul(&path)?;
        let (state, lock, mode) = match mode {
            "r" => (
                State::Mapped(py.detach(|| Mapped::open(&path, verify)).map_err(file_error)?),
                None,
                "r",
            ),
            "r+" => {
                let (locked, filter) =
                    waiting_for_locks(py, |alone| Ok(py.detach(|| Locked::open(&path, alone))))?;
                (State::Owned(filter), Some(locked), "r+")
            }
            "a" => (
                State::InPlace(waiting_for_locks(py, |alone| {
                    Ok(py.detach(|| InPlace::open(&path, alone)))
                })?),
                None,
                "a",
            ),
            other => {
                return Err(PyValueError::new_err(format!(
                    "mode must be 'r' (mapped, read-only), 'r+' (loaded, locked, saved back) or 'a' \
                     (items added in place), got '{other}'"
                )));
            }
        };
        Ok(Self {
            shared: Shared::new(state),
            file: Mutex::new(Some(FileLink { path, lock, mode })),
        })
    }

    /// Writes the filter to ``path`` in the library's file format, atomically (a new file
    /// renamed over the old one, which readers and a crash see whole or not at all),
    /// locking an existing file against other writers meanwhile; the new file keeps the old
    /// one's mode and owner, as the CLI's do; a new file takes the name only if no file has
    /// it (one that another program created meanwhile is replaced under its lock); another
    /// name of the file this filter holds the lock of (a hard link) is replaced under that
    /// lock. Without ``path``: back to the file opened with mode ``"r+"`` (the file opened, even if its
    /// name now names another: a changed working directory, a symlink repointed); a file
    /// opened with mode ``"a"``, whose items are already in it, is sealed (its changed
    /// pages synced, its payload checksum written).
    #[pyo3(signature = (path=None))]
    fn save(&self, py: Python<'_>, path: Option<PathArg>) -> PyResult<()> {
        let path = path.map(|PathArg(path)| path);
        if let Some(path) = &path {
            refuse_nul(path)?;
        }
        waiting_for_locks(py, |alone| self.save_once(py, path.as_deref(), alone))
    }

    /// Lets go of a file: a mapped file is unmapped, a file opened with ``"r+"`` is
    /// saved back and unlocked, one opened with ``"a"`` is sealed, unmapped and unlocked.
    /// Queries after ``close()`` raise ``ValueError``; a filter that is not a file's is left
    /// as it is.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut link = self.link(py);
        // Not a file's: made in memory (and perhaps saved, which only records the path).
        let Some(file) = link.as_mut().filter(|link| link.mode != "w") else {
            return Ok(());
        };
        let path = file.path.clone();
        let lock = file.lock.take();
        // Saved (or sealed) and closed in one step, under the write lock: an add from
        // another thread waits for it and then finds the filter closed, where between a
        // save and a close of their own it went into the filter after the save, so into
        // no file, though add() had returned.
        let (saved, lock) = self.shared.write_detached(py, move |state| {
            let mut lock = lock;
            let saved = match state {
                State::Owned(filter) => match lock.as_mut() {
                    Some(locked) => locked.save(&filter.envelope(), &path),
                    None => Ok(()),
                },
                State::InPlace(file) => file.seal(),
                State::Mapped(_) | State::Closed => Ok(()),
            };
            // A file another program changed or replaced meanwhile is never sealed by this
            // filter (`bloomery::file::Sealing`), so no later close could: closed all the
            // same, its lock let go of, and the refusal raised once.
            let foreign = matches!(state, State::InPlace(file) if file.foreign());
            if saved.is_ok() || foreign {
                *state = State::Closed;
                lock = None;
            }
            (saved, lock)
        });
        // Not saved: still open, and still locked.
        file.lock = lock;
        saved.map_err(file_error)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Closes the file; a filter opened with ``"r+"`` is saved back only when the block
    /// ended without an exception.
    fn __exit__(
        &self,
        py: Python<'_>,
        kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if kind.is_some()
            && let Some(link) = self.link(py).as_mut()
        {
            link.lock = None; // unlock without saving
        }
        self.close(py)?;
        Ok(false)
    }

    /// Pickles as the library's file bytes.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let from_bytes = py.get_type::<PyBloomFilter>().getattr("from_bytes")?;
        Ok((from_bytes, (self.to_bytes(py)?,)))
    }
}

/// A Python bytes object of `bytes`, whose failed allocation is Python's `MemoryError`
/// (`PyBytes::new` panics, a `PanicException`).
fn new_bytes<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, bytes.len(), |buffer| {
        buffer.copy_from_slice(bytes);
        Ok(())
    })
}

/// Refuses with `MemoryError` to make `copies` filters of about `bytes` each when they
/// would not fit in the memory a filter may use ([`files::check_memory`]): a failed
/// allocation would abort the interpreter.
fn within_memory(bytes: u64, copies: u64, what: impl FnOnce() -> String) -> PyResult<()> {
    // Said of the whole, which the message's "takes" counts: not of one copy.
    files::check_memory(bytes.saturating_mul(copies), || match copies {
        1 => what(),
        _ => format!("{} ({copies} copies of {bytes} bytes at once)", what()),
    })
    .map_err(file_error)
}

/// A new filter for `spec`, refused with `MemoryError` before anything is allocated when
/// `copies` of it would not fit in the memory a filter may use (a failed allocation would
/// abort the interpreter), with `ValueError` when it cannot be sized.
fn create_within_memory(py: Python<'_>, spec: &Spec, copies: u64) -> PyResult<Box<dyn DynFilter>> {
    let bytes = spec.memory_bytes().map_err(value_error)?;
    within_memory(bytes, copies, || {
        format!(
            "{} {} filter for {} items at fpp {:?}",
            spec.variant.article(),
            spec.variant,
            spec.expected_items,
            spec.fpp
        )
    })?;
    py.detach(|| any::create(spec)).map_err(value_error)
}

/// Whether every bit of `small` is set in `large`: `small`'s bits are what is left of them
/// after the intersection with `large`.
fn subset(py: Python<'_>, small: &PyBloomFilter, large: &PyBloomFilter) -> PyResult<bool> {
    let mine = small.snapshot(py)?;
    let theirs = large.snapshot(py)?;
    within_memory(mine.envelope_len(), 1, || "a subset check's intersection".into())?;
    py.detach(|| {
        let mut both = mine.try_clone_box().map_err(value_error)?;
        both.intersection(theirs.as_ref()).map_err(|error| {
            // Said of what was asked, not of the intersection it is made of.
            value_error(match error {
                bloomery::Error::Unsupported { variant, .. } => bloomery::Error::Unsupported {
                    variant,
                    operation: "subset checks",
                },
                other => other,
            })
        })?;
        Ok(same_envelope(&both.envelope(), &mine.envelope()))
    })
}

/// Whether two envelopes are the same bytes, compared a piece at a time: no whole copy.
fn same_envelope(
    left: &bloomery::format::native::Envelope<'_>,
    right: &bloomery::format::native::Envelope<'_>,
) -> bool {
    const STEP: u64 = 1 << 20;
    let len = left.len();
    if len != right.len() {
        return false;
    }
    let mut start = 0;
    while start < len {
        let end = len.min(start + STEP);
        if left.read_range(start..end) != right.read_range(start..end) {
            return false;
        }
        start = end;
    }
    true
}

/// A path argument: a str, a bytes path (decoded as ``os.fsdecode`` decodes it, so that it
/// names the same file) or an ``os.PathLike`` of either, as Python's ``open`` takes them (a
/// bytes path was refused with "'bytes' object is not an instance of 'str' while processing
/// 'path'"); anything else is ``os.fsdecode``'s ``TypeError``.
struct PathArg(PathBuf);

impl<'a, 'py> FromPyObject<'a, 'py> for PathArg {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let decoded = value.py().import("os")?.call_method1("fsdecode", (value,))?;
        Ok(Self(decoded.extract()?))
    }
}

/// A path with a NUL byte, which no file has: `ValueError("embedded null byte")`, as
/// Python's `open` and `os` functions raise (the system call's refusal was an `OSError`).
fn refuse_nul(path: &Path) -> PyResult<()> {
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(PyValueError::new_err("embedded null byte"));
    }
    Ok(())
}

/// The bytes of a bytes-like object given to `method` (``from_bytes`` and the like): a
/// bytes object, or a C-contiguous buffer of bytes, copied with the GIL held. Refused in
/// the method's words, not the item road's (whose advice on a buffer's elements does not
/// apply here).
fn bytes_of(data: &Bound<'_, PyAny>, method: &str) -> PyResult<Vec<u8>> {
    // The copy and the filter made of it, refused before the copy is made (a failed
    // allocation would abort the interpreter).
    let check = |len: u64| within_memory(len, 2, || "a filter of these bytes".into());
    if let Ok(bytes) = data.cast::<PyBytes>() {
        check(bytes.as_bytes().len() as u64)?;
        return Ok(bytes.as_bytes().to_vec());
    }
    // Bytes-like objects only (bytearray, memoryview, ...): an int or a str is an item,
    // not a filter's bytes.
    let Ok(buffer) = items::get_buffer(data) else {
        return Err(PyTypeError::new_err(format!(
            "expected a bytes-like object, not {}",
            data.get_type().name()?
        )));
    };
    items::buffer_bytes(&buffer, method, check)
}

/// The library's lock-free filters, for many threads: ``add`` and lookups from any number
/// of Python threads at once, without locks (batch calls release the GIL, so they run in
/// parallel). ``kind`` is ``"blocked"`` or ``"classic"``; the items and the file bytes
/// are those of ``BloomFilter`` of the same kind.
///
/// >>> from concurrent.futures import ThreadPoolExecutor
/// >>> from bloomery import ConcurrentBloomFilter
/// >>> f = ConcurrentBloomFilter(100_000, 0.01)
/// >>> with ThreadPoolExecutor(4) as pool:
/// ...     _ = list(pool.map(f.add_many, [range(i, 100_000, 4) for i in range(4)]))
/// >>> all(f.contains_many(range(100_000)))
/// True
/// >>> BloomFilter.from_bytes(f.to_bytes()).contains_many([5, -5])
/// [True, False]
#[pyclass(frozen, module = "bloomery", name = "ConcurrentBloomFilter")]
pub struct PyConcurrentBloomFilter {
    filter: Atomic,
}

enum Atomic {
    Classic(AtomicBloomFilter),
    Blocked(AtomicBlockedBloomFilter),
}

impl Atomic {
    fn insert(&self, item: &[u8]) -> bool {
        match self {
            Atomic::Classic(filter) => filter.insert(item),
            Atomic::Blocked(filter) => filter.insert(item),
        }
    }

    fn contains(&self, item: &[u8]) -> bool {
        match self {
            Atomic::Classic(filter) => filter.contains(item),
            Atomic::Blocked(filter) => filter.contains(item),
        }
    }

    /// A plain filter with the same bits (a snapshot: concurrent inserts may or may not
    /// be in it).
    fn to_dyn(&self) -> Box<dyn DynFilter> {
        match self {
            Atomic::Classic(filter) => Box::new(filter.to_bloom_filter()),
            Atomic::Blocked(filter) => Box::new(filter.to_blocked_bloom_filter()),
        }
    }

    /// Bytes of its bits: what each copy of it takes.
    fn memory_bytes(&self) -> u64 {
        match self {
            Atomic::Classic(filter) => {
                use bloomery::FilterStats;
                filter.memory_bytes() as u64
            }
            Atomic::Blocked(filter) => filter.num_blocks() * 64,
        }
    }

    /// The concurrent twin of a blocked or classic filter, made of its memory: nothing is
    /// copied (an empty filter's pages stay untouched).
    fn from_owned(mut filter: Box<dyn DynFilter>) -> PyResult<Self> {
        let any = filter.as_any_mut();
        if let Some(classic) = any.downcast_mut::<ClassicBloomFilter>() {
            let placeholder = ClassicBloomFilter::with_num_bits(64, 1).map_err(value_error)?;
            Ok(Atomic::Classic(AtomicBloomFilter::from(std::mem::replace(
                classic,
                placeholder,
            ))))
        } else if let Some(blocked) = any.downcast_mut::<BlockedBloomFilter>() {
            let placeholder = BlockedBloomFilter::with_num_blocks(1, 0).map_err(value_error)?;
            Ok(Atomic::Blocked(AtomicBlockedBloomFilter::from(
                std::mem::replace(blocked, placeholder),
            )))
        } else {
            Err(PyValueError::new_err(format!(
                "{} filters have no concurrent form: use kind 'blocked' or 'classic'",
                filter.variant().name()
            )))
        }
    }
}

/// An integer argument as given (an `int`, or anything with `__index__`, as a numpy
/// integer), checked against its range where it is used ([`IntArg::get`]): out of range
/// a `ValueError` naming the argument and the range, as the README's errors row says
/// (pyo3's own conversion raised `OverflowError`, "int too big to convert", naming
/// neither); not an integer, a `TypeError` naming it.
#[derive(Clone, Debug)]
enum IntArg {
    Value(u64),
    /// Negative, or past 2^64-1: the value as shown.
    OutOfRange(String),
    /// Not an integer: its type's name.
    NotInt(String),
}

impl<'a, 'py> FromPyObject<'a, 'py> for IntArg {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let py = value.py();
        match value.extract::<u64>() {
            Ok(number) => Ok(Self::Value(number)),
            Err(error) if error.is_instance_of::<PyOverflowError>(py) => {
                // The integer's value, as int() gives it (an int subclass's or an
                // __index__ object's own str() showed 'seventeen' or 'Idx(-1)'); a huge
                // one's digits are not all shown.
                let shown = py
                    .get_type::<pyo3::types::PyInt>()
                    .call1((value,))
                    .and_then(|int| int.str())
                    .ok()
                    .map(|text| text.to_string())
                    .filter(|text| text.len() <= 40)
                    .unwrap_or_else(|| "an integer of more digits".to_owned());
                Ok(Self::OutOfRange(shown))
            }
            Err(error) if error.is_instance_of::<PyTypeError>(py) => {
                Ok(Self::NotInt(value.get_type().name()?.to_string()))
            }
            Err(error) => Err(error),
        }
    }
}

/// `fpp=`: a real number, read as a float ([`FppArg::get`]): outside (0, 1) a
/// `ValueError` in the library's words; a number that a float holds only as 0 or 1
/// (`Decimal("1e-400")`, `Fraction(1, 10**400)`, `10**400`) named as given, with what it
/// became (it said "got 0", or raised `OverflowError` naming nothing); not a number, a
/// `TypeError` naming `fpp` (pyo3's said "must be real number, not str").
#[derive(Clone, Debug)]
pub(crate) enum FppArg {
    Value(f64),
    /// Refused: the `ValueError`'s message.
    Refused(String),
    /// Not a real number: its type's name.
    NotReal(String),
}

impl<'a, 'py> FromPyObject<'a, 'py> for FppArg {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let py = value.py();
        // What was given, as Python shows it (cut at 40 characters).
        let shown = || {
            let text = value
                .repr()
                .map_or_else(|_| "?".to_owned(), |text| text.to_string());
            match text.len() {
                0..=40 => text,
                _ => format!("{}...", &text[..text.floor_char_boundary(37)]),
            }
        };
        let words = "fpp (false-positive probability) must be in (0, 1)";
        match value.extract::<f64>() {
            Ok(fpp) if fpp > 0.0 && fpp < 1.0 => Ok(Self::Value(fpp)),
            Ok(fpp) => {
                // A number in (0, 1) that a float holds only as 0 or 1: a rounding (compared
                // exactly, as Python compares a Decimal or a Fraction with an int).
                let in_range = value.gt(0).unwrap_or(false) && value.lt(1).unwrap_or(false);
                Ok(Self::Refused(if in_range {
                    format!("{words}, got {}, which rounds to {fpp} as a float", shown())
                } else if value.is_exact_instance_of::<pyo3::types::PyFloat>() {
                    bloomery::sizing::check_fpp(fpp)
                        .err()
                        .map_or_else(|| words.to_owned(), |error| error.to_string())
                } else {
                    // As given (Decimal('1E+400') said "got inf").
                    format!("{words}, got {}", shown())
                }))
            }
            Err(error) if error.is_instance_of::<PyOverflowError>(py) => {
                Ok(Self::Refused(format!("{words}, got {}", shown())))
            }
            Err(error) if error.is_instance_of::<PyTypeError>(py) => {
                Ok(Self::NotReal(value.get_type().name()?.to_string()))
            }
            Err(error) => Err(error),
        }
    }
}

impl FppArg {
    /// The rate, or the refusal.
    pub(crate) fn get(&self) -> PyResult<f64> {
        match self {
            Self::Value(fpp) => Ok(*fpp),
            Self::Refused(message) => Err(PyValueError::new_err(message.clone())),
            Self::NotReal(type_name) => Err(PyTypeError::new_err(format!(
                "fpp must be a real number, not {type_name}"
            ))),
        }
    }
}

impl IntArg {
    /// The argument `name`, from `least` to `most`: out of that range (negative, past
    /// 2^64-1, or a value the parameter never takes) a `ValueError` stating that range, the
    /// real one for the parameter (`generations=-1` once said "from 0 to 2^64-1", and
    /// `generations=1` then "in 2..=1024").
    fn get(&self, name: &str, least: u64, most: u64) -> PyResult<u64> {
        match self {
            Self::Value(number) if (least..=most).contains(number) => Ok(*number),
            Self::Value(number) => Err(Self::out_of_range(name, least, most, &number.to_string())),
            Self::OutOfRange(shown) => Err(Self::out_of_range(name, least, most, shown)),
            Self::NotInt(type_name) => Err(PyTypeError::new_err(format!(
                "{name} must be an integer, not {type_name}"
            ))),
        }
    }

    fn out_of_range(name: &str, least: u64, most: u64, shown: &str) -> PyErr {
        PyValueError::new_err(format!(
            "{name} must be an integer from {least} to {most}, got {shown}"
        ))
    }

    /// The argument `name`, from 0 to 2^64-1.
    fn unsigned(&self, name: &str) -> PyResult<u64> {
        self.get(name, 0, u64::MAX)
    }

    /// `generations=`: 2 to [`bloomery::rotating::MAX_GENERATIONS`], the library's range.
    fn generations(&self) -> PyResult<usize> {
        let most = bloomery::rotating::MAX_GENERATIONS;
        let number = self.get("generations", 2, most as u64)?;
        Ok(usize::try_from(number).unwrap_or(most))
    }

    /// `item_size=`: `None`, or a size of at least 1 byte.
    fn item_size(value: Option<&Self>) -> PyResult<Option<usize>> {
        value
            .map(|value| {
                let number = value.get("item_size", 1, usize::MAX as u64)?;
                Ok(usize::try_from(number).unwrap_or(usize::MAX))
            })
            .transpose()
    }
}

/// Runs `work` with the GIL released when `detach`, else with it held: a batch's chunk
/// holding a large item whose owner may change it is read with the GIL held
/// ([`Chunk::detachable`]), so that no Python thread writes it meanwhile.
fn detach_if<T: pyo3::marker::Ungil>(
    py: Python<'_>,
    detach: bool,
    work: impl FnOnce() -> T + pyo3::marker::Ungil,
) -> T {
    if detach { py.detach(work) } else { work() }
}

impl PyConcurrentBloomFilter {
    /// Refuses with `MemoryError`, before anything is allocated, an operation that takes
    /// `copies` of this filter at once when they would not fit in the memory a filter may
    /// use: a failed allocation aborts the interpreter (as `BloomFilter`'s copies check).
    fn within_memory(&self, copies: u64, what: &str) -> PyResult<()> {
        within_memory(self.filter.memory_bytes(), copies, || what.to_owned())
    }

    /// Adds a batch: chunks read with the GIL, inserted without it (for the blocked kind
    /// hashed as read and inserted by the filter's batch call, which prefetches ahead of
    /// its atomic ORs).
    fn insert_source(&self, py: Python<'_>, mut source: Source<'_>, before: usize) -> PyResult<usize> {
        if let Atomic::Blocked(filter) = &self.filter {
            return source.for_each_hashed(py, filter.seed(), Some(before), |hashes| {
                py.detach(|| filter.insert_hash_batch(hashes));
                Ok(())
            });
        }
        let mut chunk = Chunk::new();
        let mut position = 0;
        loop {
            // A bad item ends the batch after the items before it are added.
            let (copied, error) = source.next_chunk(position, &mut chunk);
            let slices = chunk.slices();
            detach_if(py, chunk.detachable(), || {
                for item in slices {
                    self.filter.insert(item);
                }
            });
            position += copied;
            if let Some(error) = error {
                return Err(noted_added(py, error, before + position));
            }
            if copied == 0 {
                return Ok(position);
            }
            items::check_signals_between_chunks(py, Some(before + position))?;
        }
    }

    fn stats(&self) -> (u64, f64, u64) {
        let bytes = self.filter.memory_bytes();
        match &self.filter {
            Atomic::Classic(filter) => {
                use bloomery::FilterStats;
                (filter.estimated_len(), filter.expected_fpp(), bytes)
            }
            Atomic::Blocked(filter) => (filter.estimated_len(), filter.expected_fpp(), bytes),
        }
    }
}

#[pymethods]
impl PyConcurrentBloomFilter {
    /// A new, empty filter (``kind`` ``"blocked"`` or ``"classic"``).
    #[new]
    #[pyo3(
        signature = (expected_items, fpp=FppArg::Value(0.01), kind="blocked", *, seed=IntArg::Value(0)),
        text_signature = "(expected_items, fpp=0.01, kind=\"blocked\", *, seed=0)"
    )]
    fn new(py: Python<'_>, expected_items: IntArg, fpp: FppArg, kind: &str, seed: IntArg) -> PyResult<Self> {
        let expected_items = expected_items.unsigned("expected_items")?;
        let fpp = fpp.get()?;
        let seed = seed.unsigned("seed")?;
        let variant = variant_of(kind)?;
        if !matches!(variant, Variant::Blocked | Variant::Classic) {
            return Err(PyValueError::new_err(format!(
                "{kind} filters have no concurrent form: use kind 'blocked' or 'classic'"
            )));
        }
        let mut spec = Spec::new(variant, expected_items, fpp);
        spec.seed = seed;
        refuse_ignored_options(&spec)?;
        // Made, then made atomic in place.
        let filter = create_within_memory(py, &spec, 1)?;
        warn_of_new_filter(py, &spec)?;
        Ok(Self {
            filter: Atomic::from_owned(filter)?,
        })
    }

    /// Adds ``item`` (from any thread); returns whether it was new: ``True`` when this add
    /// set a bit (``item in f`` would have answered ``False`` just before, as far as other
    /// threads' adds meanwhile let it), ``False`` when it was (probably) there already.
    fn add(&self, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        with_item(item, |bytes| self.filter.insert(bytes))
    }

    fn __contains__(&self, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        with_item(item, |bytes| self.filter.contains(bytes))
    }

    /// Adds every item of each iterable, with the GIL released.
    #[pyo3(signature = (*iterables))]
    fn update(&self, py: Python<'_>, iterables: &Bound<'_, PyTuple>) -> PyResult<()> {
        items::each_iterable(py, iterables, |source, before| {
            self.insert_source(py, source, before)
        })
    }

    /// Adds a batch (the forms ``BloomFilter.add_many`` takes), with the GIL released.
    #[pyo3(signature = (items, *, item_size=None))]
    fn add_many(&self, py: Python<'_>, items: &Bound<'_, PyAny>, item_size: Option<IntArg>) -> PyResult<()> {
        self.insert_source(py, Source::new(items, IntArg::item_size(item_size.as_ref())?)?, 0)
            .map(drop)
    }

    /// Looks up a batch, with the GIL released; one ``bool`` per item.
    #[pyo3(signature = (items, *, item_size=None))]
    fn contains_many<'py>(
        &self,
        py: Python<'py>,
        items: &Bound<'py, PyAny>,
        item_size: Option<IntArg>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut source = Source::new(items, IntArg::item_size(item_size.as_ref())?)?;
        let mut results = source.answers()?;
        if let Atomic::Blocked(filter) = &self.filter {
            // Hashed as read, looked up by the filter's batch call (prefetching ahead).
            source.lookup_hashed(py, filter.seed(), &mut results, |hashes, answers| {
                py.detach(|| filter.contains_hash_batch(hashes, answers));
                Ok(())
            })?;
            return bool_list(py, &results);
        }
        let mut chunk = Chunk::new();
        let mut position = 0;
        loop {
            let copied = source.fill(position, &mut chunk)?;
            if copied == 0 {
                break;
            }
            position += copied;
            items::reserve_answers(&mut results, copied)?;
            let chunk = &chunk;
            let answers = &mut results;
            detach_if(py, chunk.detachable(), || {
                answers.extend(chunk.slices().into_iter().map(|item| self.filter.contains(item)));
            });
            items::check_signals_between_chunks(py, None)?;
        }
        bool_list(py, &results)
    }

    fn __len__(&self) -> usize {
        self.stats().0.min(isize::MAX as u64) as usize
    }

    /// An estimate of the distinct items added, from the bits set; ``2**64 - 1`` when every
    /// bit is set, where the bits tell nothing of how many.
    #[getter]
    fn approx_items(&self) -> u64 {
        self.stats().0
    }

    /// The probability that an item never added is reported present, as the filter is now.
    #[getter]
    fn expected_fpp(&self) -> f64 {
        self.stats().1
    }

    /// The same as ``expected_fpp``.
    #[getter]
    fn fpp(&self) -> f64 {
        self.stats().1
    }

    /// Bytes of bits in memory.
    #[getter]
    fn memory_bytes(&self) -> u64 {
        self.stats().2
    }

    #[getter]
    fn kind(&self) -> &'static str {
        match self.filter {
            Atomic::Classic(_) => "classic",
            Atomic::Blocked(_) => "blocked",
        }
    }

    /// A ``BloomFilter`` with the same bits (items added meanwhile by other threads may or
    /// may not be in it).
    fn snapshot(&self, py: Python<'_>) -> PyResult<PyBloomFilter> {
        self.within_memory(1, "a snapshot of the filter")?;
        Ok(PyBloomFilter::from_owned(py.detach(|| self.filter.to_dyn())))
    }

    /// A copy.
    fn copy(&self, py: Python<'_>) -> PyResult<Self> {
        // A snapshot, made atomic in place, beside this filter.
        self.within_memory(1, "a copy of the filter")?;
        let filter = py.detach(|| self.filter.to_dyn());
        Ok(Self {
            filter: Atomic::from_owned(filter)?,
        })
    }

    /// The file bytes of ``snapshot()``.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        // A snapshot, its bytes, then Python's copy of them.
        self.within_memory(3, "a copy of the filter's bytes")?;
        let bytes = py.detach(|| self.filter.to_dyn().envelope().to_vec());
        new_bytes(py, &bytes)
    }

    /// A concurrent filter from file bytes of a blocked or classic filter.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data = bytes_of(data, "from_bytes")?;
        // The bytes and the filter read from them (made atomic in place): counted by
        // `bytes_of` before its copy.
        let filter = py.detach(|| any::open(&data)).map_err(value_error)?;
        Ok(Self {
            filter: Atomic::from_owned(filter)?,
        })
    }

    /// A concurrent filter with the bits of ``filter`` (a blocked or classic ``BloomFilter``).
    #[staticmethod]
    fn from_filter(py: Python<'_>, filter: PyRef<'_, PyBloomFilter>) -> PyResult<Self> {
        // A snapshot of it, made atomic in place (a file's snapshot is read first: one
        // more copy for a moment, which `snapshot` checks).
        let len = filter.shared.read(py, State::file_len);
        within_memory(len, 1, || "a concurrent copy of the filter".into())?;
        let owned = filter.snapshot(py)?;
        Ok(Self {
            filter: Atomic::from_owned(owned)?,
        })
    }

    /// Writes ``snapshot()`` to ``path`` atomically (as ``BloomFilter.save``).
    fn save(&self, py: Python<'_>, path: PathArg) -> PyResult<()> {
        let PathArg(path) = path;
        refuse_nul(&path)?;
        self.within_memory(1, "a snapshot of the filter to save")?;
        waiting_for_locks(py, |alone| {
            Ok(py.detach(|| {
                let ready = files::SaveTarget::prepare(&path, None, alone)?;
                let filter = self.filter.to_dyn();
                ready.write(|writer| filter.envelope().write_to(writer))
            }))
        })
    }

    fn __repr__(&self) -> String {
        let (items, fpp, bytes) = self.stats();
        format!(
            "<bloomery.ConcurrentBloomFilter kind='{}' approx_items={items} expected_fpp={fpp:.3e} memory_bytes={bytes}>",
            self.kind()
        )
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let from_bytes = py.get_type::<PyConcurrentBloomFilter>().getattr("from_bytes")?;
        Ok((from_bytes, (self.to_bytes(py)?,)))
    }
}

/// The variant names ``kind=`` takes.
#[pyfunction]
fn kinds() -> Vec<&'static str> {
    Variant::ALL.iter().map(|variant| variant.name()).collect()
}

/// How exact ints in the 64-bit range are read on this interpreter: ``"digits"`` (their
/// digits where they lie, `items::digits`) or ``"c-api"``. For the tests, which check that
/// the faster road is the one they cover where it can be.
#[pyfunction]
fn _int_road() -> &'static str {
    if items::digits::on() { "digits" } else { "c-api" }
}

/// The `sq_contains` slot PyO3 made for `BloomFilter`, which [`contains_slot`] hands
/// every item it does not answer itself.
static PYO3_CONTAINS: std::sync::OnceLock<ffi::objobjproc> = std::sync::OnceLock::new();

/// Puts [`contains_slot`] in `BloomFilter`'s `sq_contains` slot (what `item in filter`
/// calls), keeping PyO3's for the items it passes on. Run once, at import, before any
/// subclass can copy the slot.
fn install_contains_slot(filter_type: &Bound<'_, pyo3::types::PyType>) {
    // SAFETY: the GIL is held; `BloomFilter` is a heap type made from a spec, so its
    // `tp_as_sequence` points into its own, writable `PyHeapTypeObject`. The slot is
    // replaced before any Python code sees the type, and `PyType_Modified` drops the
    // interpreter's cached lookups of it.
    unsafe {
        let type_object = filter_type.as_type_ptr();
        let sequence = (*type_object).tp_as_sequence;
        if sequence.is_null() {
            return;
        }
        if let Some(pyo3_slot) = (*sequence).sq_contains
            && PYO3_CONTAINS.set(pyo3_slot).is_ok()
        {
            (*sequence).sq_contains = Some(contains_slot);
            ffi::PyType_Modified(type_object);
        }
    }
}

/// `item in filter` for a common item (`items::common_item`: an exact compact ASCII str,
/// an exact int from -2^63 to 2^63-1), answered here; every other item, a closed filter
/// and a panic go to PyO3's slot, which answers or raises as `__contains__` does. PyO3's
/// call trampoline (its thread-local GIL count, panic trap and result conversion) was
/// about 100 of the ~410 instructions an item of a Python loop of `in` on str, under
/// callgrind (`scripts/python-instructions.sh`: 411 before this slot, 321 with it).
unsafe extern "C" fn contains_slot(filter: *mut ffi::PyObject, item: *mut ffi::PyObject) -> std::ffi::c_int {
    // SAFETY: CPython calls `sq_contains` with the thread attached and two live objects,
    // `filter` a `BloomFilter` or an instance of a subclass (whose layout starts with
    // it); the class is frozen and `Sync`, so a shared reference to it is what `get`
    // gives. The item's bytes are read at once, while the caller holds the item.
    let answer = std::panic::catch_unwind(|| unsafe {
        let py = Python::assume_attached();
        let mut int = [0; 8];
        let bytes = items::common_item(item, &mut int)?;
        let filter = pyo3::Borrowed::from_ptr(py, filter).cast_unchecked::<PyBloomFilter>();
        filter.get().contains_bytes(py, bytes)
    });
    match (answer, PYO3_CONTAINS.get()) {
        (Ok(Some(found)), _) => std::ffi::c_int::from(found),
        // SAFETY: PyO3's own slot for the same type, called as CPython would call it.
        (_, Some(pyo3_slot)) => unsafe { pyo3_slot(filter, item) },
        // Not reached: this slot is installed only after PyO3's is kept.
        (_, None) => {
            // SAFETY: the thread is attached; a static C string.
            unsafe { ffi::PyErr_SetString(ffi::PyExc_SystemError, c"bloomery: no contains slot".as_ptr()) };
            -1
        }
    }
}

/// The function PyO3 made for `BloomFilter.add`, which [`add_fast`] hands every call it
/// does not make itself.
static PYO3_ADD: std::sync::OnceLock<ffi::PyCFunctionFastWithKeywords> = std::sync::OnceLock::new();

/// Puts [`add_fast`] behind `BloomFilter.add`, keeping PyO3's function for the calls it
/// passes on: a new method descriptor with PyO3's name, flags and docstring (so its
/// signature and doctest stay), in the type's dictionary. Run once, at import, before any
/// subclass or Python code sees the type; leaves PyO3's method where the descriptor is
/// not the kind it expects.
fn install_fast_add(filter_type: &Bound<'_, pyo3::types::PyType>) -> PyResult<()> {
    let py = filter_type.py();
    // SAFETY: the GIL is held; `BloomFilter` is a heap type whose `tp_dict` is its own
    // dictionary; `add` in it is PyO3's method descriptor, whose `PyMethodDef` lives as
    // long as the module (checked: the descriptor's type and the definition's flags).
    // The new definition is leaked, as a descriptor needs it for the process's life, and
    // `PyType_Modified` drops the interpreter's cached lookups.
    unsafe {
        let type_object = filter_type.as_type_ptr();
        let dict = (*type_object).tp_dict;
        let descriptor = ffi::PyDict_GetItemString(dict, c"add".as_ptr());
        if descriptor.is_null() || ffi::Py_TYPE(descriptor) != &raw mut ffi::PyMethodDescr_Type {
            return Ok(());
        }
        let definition = (*descriptor.cast::<ffi::PyMethodDescrObject>()).d_method;
        if (*definition).ml_flags != ffi::METH_FASTCALL | ffi::METH_KEYWORDS
            || PYO3_ADD
                .set((*definition).ml_meth.PyCFunctionFastWithKeywords)
                .is_err()
        {
            return Ok(());
        }
        let fast = Box::leak(Box::new(ffi::PyMethodDef {
            ml_name: (*definition).ml_name,
            ml_meth: ffi::PyMethodDefPointer {
                PyCFunctionFastWithKeywords: add_fast,
            },
            ml_flags: (*definition).ml_flags,
            ml_doc: (*definition).ml_doc,
        }));
        let replacement = ffi::PyDescr_NewMethod(type_object, fast);
        if replacement.is_null() {
            return Err(PyErr::fetch(py));
        }
        let status = ffi::PyDict_SetItemString(dict, c"add".as_ptr(), replacement);
        ffi::Py_DECREF(replacement);
        if status != 0 {
            return Err(PyErr::fetch(py));
        }
        ffi::PyType_Modified(type_object);
    }
    Ok(())
}

/// `filter.add(item)` with one positional common item (`items::common_item`: an exact
/// compact ASCII str, an exact int from -2^63 to 2^63-1), added here; every other call
/// (other items, keywords, a filter that cannot change) goes to PyO3's function, which
/// adds or raises as `add` does. PyO3's road (its call trampoline, argument parsing and
/// result conversion) is the same kind of cost that [`contains_slot`] saves for `in`.
unsafe extern "C" fn add_fast(
    filter: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    if nargs == 1 && kwnames.is_null() {
        // SAFETY: CPython calls a method with the thread attached, `filter` a
        // `BloomFilter` or an instance of a subclass (the descriptor checks it; the
        // layout starts with it), and `nargs` live arguments; the item's bytes are read
        // at once, while the caller holds the item.
        let added = std::panic::catch_unwind(|| unsafe {
            let py = Python::assume_attached();
            let mut int = [0; 8];
            let bytes = items::common_item(*args, &mut int)?;
            let filter = pyo3::Borrowed::from_ptr(py, filter).cast_unchecked::<PyBloomFilter>();
            filter.get().add_bytes(py, bytes)
        });
        // SAFETY: the thread is attached (above); new references to the two bools.
        unsafe {
            match added {
                Ok(Some(Ok(added))) => {
                    return ffi::Py_NewRef(if added { ffi::Py_True() } else { ffi::Py_False() });
                }
                // The item was not added: raised here, not passed on, so that a filter
                // that counts never sees the same call twice.
                Ok(Some(Err(error))) => {
                    error.restore(Python::assume_attached());
                    return std::ptr::null_mut();
                }
                Err(_) => {
                    pyo3::panic::PanicException::new_err("bloomery: a panic while adding an item")
                        .restore(Python::assume_attached());
                    return std::ptr::null_mut();
                }
                // Not a common item, or a filter that cannot change: nothing was done.
                Ok(None) => {}
            }
        }
    }
    match PYO3_ADD.get() {
        // SAFETY: PyO3's own function for the same method, called as CPython would.
        Some(pyo3_add) => unsafe { pyo3_add(filter, args, nargs, kwnames) },
        // Not reached: `add_fast` is installed only after PyO3's function is kept.
        None => {
            // SAFETY: the thread is attached; a static C string.
            unsafe { ffi::PyErr_SetString(ffi::PyExc_SystemError, c"bloomery: no add".as_ptr()) };
            std::ptr::null_mut()
        }
    }
}

#[pymodule(gil_used = true)]
fn _bloomery(module: &Bound<'_, PyModule>) -> PyResult<()> {
    // The environment asked for a kernel this CPU does not have: said at import (the
    // fastest one runs; it ran without a word).
    if let Some(note) = bloomery::blocked::Kernel::misnamed_note() {
        runtime_warning(module.py(), format!("bloomery: {note}"))?;
    }
    module.add_class::<PyBloomFilter>()?;
    install_contains_slot(&module.py().get_type::<PyBloomFilter>());
    install_fast_add(&module.py().get_type::<PyBloomFilter>())?;
    module.add_class::<PyConcurrentBloomFilter>()?;
    module.add_class::<sharded::PyShardedFilter>()?;
    sharded::init(module.py())?;
    module.add("RedisError", module.py().get_type::<sharded::RedisError>())?;
    module.add_function(wrap_pyfunction!(kinds, module)?)?;
    items::digits::enable(module.py())?;
    module.add_function(wrap_pyfunction!(_int_road, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
