//! `ShardedFilter`: a sharded filter on a Redis server or a Redis Cluster running the
//! bloomery module (docs/sharding.md), through the workspace's client
//! (`bloomery_cluster`): the items are hashed here, by the plan's hash (the blocked
//! filter's item road, so the CLI's `--redis`/`--redis-cluster` and Rust answer the same
//! for the same items), and sent 8 bytes an item, one command per shard per batch, with
//! the GIL released while the servers answer.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use bloomery::hash::xxh3_64_bytes;
use bloomery::sharding::ShardPlan;
use bloomery_cluster::{Connection, Error, Interrupt, ShardedFilter, Target};
use pyo3::exceptions::{PyException, PyLookupError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::items::{self, Source, with_item};
use crate::{FppArg, IntArg, bool_list, closed_error, closed_note};

pyo3::create_exception!(
    bloomery,
    RedisError,
    PyException,
    "A sharded filter's server or cluster refused or failed a command (after the retries, for \
     failures worth retrying), restarted during the run, lacks the bloomery module, or \
     acknowledged fewer replicas than asked for."
);

/// The Python exception for a client error: a bad target, plan or name, or a filter of
/// that name with other parameters, `ValueError`; no filter of that name, `LookupError`;
/// what the servers did, `RedisError`.
fn python_error(error: Error) -> PyErr {
    let text = error.to_string();
    match error {
        Error::Target { .. } | Error::Filter(_) | Error::Mismatch(_) => PyValueError::new_err(text),
        Error::NotFound(_) => PyLookupError::new_err(text),
        _ => RedisError::new_err(text),
    }
}

/// Why a call on the client did not run: the filter was closed, used from a signal handler
/// that interrupted a call of it on the same thread, or the client failed.
enum Failure {
    Closed,
    Reentered,
    Client(Error),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Client(error)
    }
}

/// Python's main thread (`threading.main_thread().ident`, read at import), the one that
/// runs signal handlers.
static MAIN_THREAD: AtomicU64 = AtomicU64::new(0);

/// The process whose main thread [`MAIN_THREAD`] is: a child forked from another thread
/// has that thread as its main one (Python's `threading.main_thread()` says so there).
static MAIN_PROCESS: AtomicU64 = AtomicU64::new(0);

/// Records Python's main thread (at import, and in a forked child at its first need).
pub(crate) fn init(py: Python<'_>) -> PyResult<()> {
    let ident: u64 = py
        .import("threading")?
        .call_method0("main_thread")?
        .getattr("ident")?
        .extract()?;
    MAIN_THREAD.store(ident, Ordering::Relaxed);
    MAIN_PROCESS.store(u64::from(std::process::id()), Ordering::Relaxed);
    Ok(())
}

/// Whether this thread is Python's main thread, the one that runs signal handlers.
fn on_main_thread() -> bool {
    if MAIN_PROCESS.load(Ordering::Relaxed) != u64::from(std::process::id()) {
        // A forked child: its main thread read anew (with the GIL, once).
        let _ = Python::try_attach(init);
    }
    thread_ident() == MAIN_THREAD.load(Ordering::Relaxed)
}

/// The asynchronous signals, blocked on a thread while it is in a call of a sharded
/// filter (all but those a fault raises, which cannot wait). Python's handlers interrupt
/// the system call they arrive in (no `SA_RESTART`): a reply's read cut short by any
/// signal with a handler (a `SIGUSR1`, a timer's `SIGALRM`) was taken for a lost
/// connection, and a single `add` was sent again and raised "reply lost". Blocked, they
/// wait, and the main thread lets them in between tries ([`deliver_pending_signals`]) and
/// when the call ends.
fn asynchronous_signals() -> libc::sigset_t {
    // SAFETY: a set filled and trimmed by libc's own functions.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for fault in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGTRAP,
            libc::SIGSYS,
            libc::SIGABRT,
        ] {
            libc::sigdelset(&mut set, fault);
        }
        set
    }
}

thread_local! {
    /// This thread's signal mask before the call that blocked the asynchronous signals.
    static MASK_BEFORE: std::cell::Cell<Option<libc::sigset_t>> = const { std::cell::Cell::new(None) };
}

/// Runs `work` with the asynchronous signals blocked on this thread ([`asynchronous_signals`]);
/// the mask is as before when it returns, and a signal that came meanwhile is delivered
/// then.
fn with_signals_blocked<T>(work: impl FnOnce() -> T) -> T {
    if MASK_BEFORE.get().is_some() {
        return work(); // blocked already (a call within a call's setup)
    }
    let blocked = asynchronous_signals();
    // SAFETY: sets and reads this thread's mask with valid sets.
    let before = unsafe {
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut before);
        before
    };
    MASK_BEFORE.set(Some(before));
    struct Restore(libc::sigset_t);
    impl Drop for Restore {
        fn drop(&mut self) {
            MASK_BEFORE.set(None);
            // SAFETY: the mask this thread had before.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
        }
    }
    let _restore = Restore(before);
    work()
}

/// Lets the signals that came while they were blocked in: their C handlers run (Python's
/// marks them for its main thread to handle), then they are blocked again.
fn deliver_pending_signals() {
    if let Some(before) = MASK_BEFORE.get() {
        let blocked = asynchronous_signals();
        // SAFETY: this thread's mask, set to what it was and back.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
            libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut());
        }
    }
}

/// This thread's Python identity (`threading.get_ident()`), read without the GIL.
#[allow(clippy::useless_conversion)] // a C unsigned long: 32 bits on some platforms
fn thread_ident() -> u64 {
    // SAFETY: reads the calling thread's identity; no Python state is touched.
    u64::from(unsafe { pyo3::ffi::PyThread_get_thread_ident() })
}

/// What a call being retried (a server down, a failover) asks between its tries, so that it
/// ends within a try's time rather than after the retry time (`retry_seconds`, 30 s by
/// default): whether the filter was closed (by another thread), and, on Python's main
/// thread (the only one that runs them), Python's signal handlers. The exception a handler
/// raised (`KeyboardInterrupt`) is kept here for the call to raise.
#[derive(Clone, Default)]
struct Signals {
    raised: Arc<Mutex<Option<PyErr>>>,
    /// Set by `close`: every call after it fails, and no forked child connects anew.
    closed: Arc<AtomicBool>,
}

impl Signals {
    /// The client's interrupt.
    fn interrupt(&self) -> Interrupt {
        let (raised, closed) = (self.raised.clone(), self.closed.clone());
        Arc::new(move || {
            if closed.load(Ordering::Acquire) {
                return true;
            }
            if !on_main_thread() {
                return false;
            }
            deliver_pending_signals();
            let handled = Python::try_attach(|py| py.check_signals());
            match handled {
                Some(Err(error)) => {
                    *raised.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                    true
                }
                _ => false,
            }
        })
    }

    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// What a signal handler raised during the call, taken: the call raises it, whatever
    /// else it met (a cleanup the interrupt ended, or nothing: a handler's exception
    /// raised after the call, as Python raises it after the statement it interrupted).
    fn take_raised(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// The Python exception for a client error: what a signal handler raised during the
    /// call, or for a call the filter's closing interrupted, a closed filter's.
    fn error(&self, error: Error) -> PyErr {
        if let Some(raised) = self.take_raised() {
            return raised;
        }
        if matches!(error, Error::Interrupted(_)) && self.closed() {
            return closed_error();
        }
        python_error(error)
    }

    /// The Python exception for a [`Failure`]: a closed filter's is a `BloomFilter`'s, a
    /// `ValueError` as a closed file's.
    fn failure_error(&self, failure: Failure) -> PyErr {
        match failure {
            Failure::Closed => self.take_raised().unwrap_or_else(closed_error),
            Failure::Reentered => PyRuntimeError::new_err(
                "a signal handler used this ShardedFilter while a call of it on the same thread \
                 was retrying: it can only close() it",
            ),
            Failure::Client(error) => self.error(error),
        }
    }

    /// A call's result, or the exception a signal handler raised during it.
    fn result<T>(&self, done: Result<T, Failure>) -> PyResult<T> {
        match done {
            Ok(value) => match self.take_raised() {
                Some(raised) => Err(raised),
                None => Ok(value),
            },
            Err(failure) => Err(self.failure_error(failure)),
        }
    }
}

/// The longest `set_wait` timeout, in seconds.
const MAX_WAIT_SECONDS: u64 = 1_000_000_000_000;

/// `retry_seconds=`: a number of seconds from 0 to 2^64 - 1 (a `Duration`'s; the message
/// said "a finite number", refusing finite ones past it).
fn retry_for(seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        PyValueError::new_err(format!(
            "retry_seconds must be a number of seconds from 0 to {}, got {seconds:?}",
            u64::MAX
        ))
    })
}

/// `set_wait`'s timeout: from 0 (wait as long as it takes) to [`MAX_WAIT_SECONDS`]; Redis's
/// `WAIT` refuses one that, added to the time now in milliseconds, passes 2^63 - 1. A
/// positive one below a nanosecond is one (as 0 it meant for ever).
fn wait_timeout(seconds: f64) -> Option<Duration> {
    let timeout = Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|timeout| timeout.as_secs() <= MAX_WAIT_SECONDS)?;
    Some(if seconds > 0.0 && timeout.is_zero() {
        Duration::from_nanos(1)
    } else {
        timeout
    })
}

fn parse_target(target: &str) -> PyResult<Target> {
    target.parse().map_err(python_error)
}

/// Connects to `target`, retrying for `retry`, and keeps retrying for `retry` later.
fn connect(py: Python<'_>, target: &Target, retry: Duration, signals: &Signals) -> PyResult<Connection> {
    py.detach(|| {
        with_signals_blocked(|| Connection::open_interruptible(target, retry, Some(signals.interrupt())))
    })
    .map_err(|error| signals.error(error))
}

/// A filter spread over many keys (its shards) of a Redis server or a Redis Cluster that
/// runs the bloomery module: each item goes to one shard, chosen by its hash, so a filter
/// larger than one server's memory is spread over a cluster's nodes and its work over
/// their cores. The same filter as the CLI's ``--redis``/``--redis-cluster`` and the Rust
/// client's (docs/sharding.md): items added here are found there and the other way round.
///
/// ``ShardedFilter.create(target, name, expected_items, fpp)`` makes one (or opens it, if
/// it exists with the same parameters); ``ShardedFilter(target, name)`` opens one.
/// ``target`` is ``"redis://HOST:PORT[/DB]"`` (one server) or
/// ``"redis+cluster://HOST:PORT[,HOST:PORT...]"`` (a cluster, reached through any of the
/// nodes listed). Every call is a round trip to the servers (one command per shard
/// holding items of it, pipelined), made with the GIL released: batch calls
/// (``add_many``, ``contains_many``) send up to 16,384 items a round trip.
///
/// A failure worth retrying (a failover, slots moving, a lost connection) is retried for
/// ``retry_seconds``; after that, and for other failures, a call raises ``RedisError``.
/// Ctrl-C ends a call between two tries (``KeyboardInterrupt``), and a batch between two
/// round trips. A batch add that fails part way has added the items of its earlier round
/// trips (its error's note says how many).
///
/// .. code-block:: python
///
///     from bloomery import ShardedFilter
///     urls = ShardedFilter.create("redis+cluster://10.0.0.1:7000", "urls", 10**10, 0.01)
///     urls.add_many(batch_of_urls)
///     seen = urls.contains_many(other_urls)
///
/// ``close()`` (or the end of a ``with`` block) closes its connections; a call after it
/// raises ``ValueError``.
#[pyclass(name = "ShardedFilter", module = "bloomery", frozen)]
pub struct PyShardedFilter {
    /// This process's client ([`client`](Self::client)); never null, freed by `Drop`.
    current: AtomicPtr<ProcessClient>,
    /// What `set_wait` asked for, for a client made anew in a forked child: replicas (0:
    /// no wait) and the timeout in nanoseconds. Atomics, not under a lock that a fork
    /// could leave held.
    wait_replicas: AtomicU64,
    wait_timeout_bits: AtomicU64,
    /// Signal handlers and `close`, for calls being retried.
    signals: Signals,
    name: String,
    plan: ShardPlan,
    /// Where it lives (to connect again in a forked child), and as messages show it.
    target: Target,
    shown: String,
    /// The target and retry time as given (for a pickle).
    given: (String, f64),
    retry: Duration,
    created: bool,
}

/// A client and the process whose connections it holds.
struct ProcessClient {
    pid: u32,
    /// The thread ([`thread_ident`]) whose call holds `filter`'s lock, 0 for none: a signal
    /// handler that its retries run, on that thread, must not wait for that lock.
    owner: AtomicU64,
    /// Calls of the filter from several threads take turns; `None` once closed.
    filter: Mutex<Option<ShardedFilter>>,
}

impl Drop for PyShardedFilter {
    fn drop(&mut self) {
        let current = *self.current.get_mut();
        // SAFETY: `current` came from `Box::into_raw` and is freed only here.
        let record = unsafe { Box::from_raw(current) };
        if record.pid != std::process::id() {
            // A forked child's copy of its parent's client: its connections are the
            // parent's too, and its lock may be held by a thread the child has not.
            std::mem::forget(record);
        }
    }
}

impl PyShardedFilter {
    fn new(
        filter: ShardedFilter,
        target: Target,
        given: (String, f64),
        retry: Duration,
        created: bool,
        signals: Signals,
    ) -> Self {
        Self {
            plan: *filter.plan(),
            name: filter.name().to_owned(),
            current: AtomicPtr::new(Box::into_raw(Box::new(ProcessClient {
                pid: std::process::id(),
                owner: AtomicU64::new(0),
                filter: Mutex::new(Some(filter)),
            }))),
            wait_replicas: AtomicU64::new(0),
            wait_timeout_bits: AtomicU64::new(0f64.to_bits()),
            signals,
            shown: target.shown(),
            target,
            given,
            retry,
            created,
        }
    }

    /// A closed filter's `ValueError` once it is closed: a batch refuses it before reading
    /// any item, an empty one too, which sends nothing (as `BloomFilter`'s batches do).
    fn refuse_closed(&self) -> PyResult<()> {
        if self.signals.closed() {
            return Err(closed_error());
        }
        Ok(())
    }

    /// Runs `work` on the client with the GIL released (other Python threads run while the
    /// servers answer; calls of this filter from several threads take turns).
    fn with_client<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut ShardedFilter) -> bloomery_cluster::Result<T> + Send,
    ) -> PyResult<T> {
        self.signals.result(self.run(py, work))
    }

    /// [`with_client`](Self::with_client) with the client's own error.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut ShardedFilter) -> bloomery_cluster::Result<T> + Send,
    ) -> Result<T, Failure> {
        py.detach(|| {
            with_signals_blocked(|| {
                let client = self.client()?;
                let me = thread_ident();
                if client.owner.load(Ordering::Acquire) == me {
                    return Err(Failure::Reentered);
                }
                let mut guard = self.lock(client)?;
                // Closed by another thread while this call waited for the lock: whoever holds
                // the lock after a `close` (which does not wait for it) drops the connections.
                if self.signals.closed() {
                    guard.take();
                }
                let filter = guard.as_mut().ok_or(Failure::Closed)?;
                client.owner.store(me, Ordering::Release);
                let done = work(filter);
                client.owner.store(0, Ordering::Release);
                drop(guard);
                // Closed during the call (by another thread, or a signal handler its retries
                // ran): the connections go now, unless a call waiting took the lock first.
                if self.signals.closed()
                    && let Ok(mut guard) = client.filter.try_lock()
                {
                    guard.take();
                }
                Ok(done?)
            })
        })
    }

    /// `client`'s lock, which another thread's call may hold (for as long as its retries,
    /// or a `WAIT` with no timeout, take). The main thread waits in steps, asking between
    /// them the filter's interrupt (Ctrl-C, `close`), which ends its wait: a call there
    /// waited for the other call to end whatever Ctrl-C said.
    fn lock<'a>(&self, client: &'a ProcessClient) -> Result<MutexGuard<'a, Option<ShardedFilter>>, Failure> {
        // A call that panicked part way left a client whose state is still its own.
        let mut tries = 0u32;
        loop {
            match client.filter.try_lock() {
                Ok(guard) => return Ok(guard),
                Err(TryLockError::Poisoned(poisoned)) => return Ok(poisoned.into_inner()),
                Err(TryLockError::WouldBlock) if !on_main_thread() => {
                    return Ok(client.filter.lock().unwrap_or_else(PoisonError::into_inner));
                }
                Err(TryLockError::WouldBlock) => {}
            }
            std::thread::sleep(Duration::from_millis(1));
            tries += 1;
            if tries.is_multiple_of(50) && (self.signals.interrupt())() {
                return Err(Failure::Client(Error::Interrupted(
                    "waiting for another thread's call of this sharded filter".to_owned(),
                )));
            }
        }
    }

    /// This process's client. In a child forked since the filter connected
    /// (`multiprocessing`, `os.fork`), one of its own, connected anew at its first call:
    /// the connections it inherited are its parent's too, and two processes reading
    /// replies on one connection take each other's (a reply of the other process's
    /// lookup read as this one's answers). The inherited client is left untouched, its
    /// lock too, which a thread of the parent may have held at the fork (the child has
    /// no such thread to free it).
    fn client(&self) -> Result<&ProcessClient, Failure> {
        let pid = std::process::id();
        loop {
            if self.signals.closed() {
                return Err(Failure::Closed);
            }
            let current = self.current.load(Ordering::Acquire);
            // SAFETY: never null; a record is freed only by `Drop`, which no call outlives.
            let record = unsafe { &*current };
            if record.pid == pid {
                return Ok(record);
            }
            let connection =
                Connection::open_interruptible(&self.target, self.retry, Some(self.signals.interrupt()))?;
            let mut filter = ShardedFilter::open(connection, &self.name)?;
            // The same filter, or the items would be hashed by one plan and sent to
            // another's shards (a filter made again under the name since).
            if *filter.plan() != self.plan {
                return Err(Failure::Client(Error::Mismatch(format!(
                    "sharded filter '{}' was made again with other parameters ({}) since this \
                     filter opened it ({}): open it again",
                    self.name,
                    filter.plan().to_text(),
                    self.plan.to_text()
                ))));
            }
            let replicas = self.wait_replicas.load(Ordering::Relaxed);
            if replicas > 0 {
                let seconds = f64::from_bits(self.wait_timeout_bits.load(Ordering::Relaxed));
                let timeout = wait_timeout(seconds).unwrap_or(Duration::ZERO);
                filter.set_wait(usize::try_from(replicas).unwrap_or(usize::MAX), timeout);
            }
            let fresh = Box::into_raw(Box::new(ProcessClient {
                pid,
                owner: AtomicU64::new(0),
                filter: Mutex::new(Some(filter)),
            }));
            if self
                .current
                .compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // The parent's record stays, unfreed, in this process's copy of memory.
                // SAFETY: published just now; freed only by `Drop`.
                let record = unsafe { &*fresh };
                // Closed while this connected (a `close` then found the parent's record
                // and left it): the new connections go.
                if self.signals.closed() {
                    record
                        .filter
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take();
                    return Err(Failure::Closed);
                }
                return Ok(record);
            }
            // Another thread of this process made one first: this one goes (its own new
            // connections with it), and the loop takes that one.
            // SAFETY: `fresh` was never published.
            drop(unsafe { Box::from_raw(fresh) });
        }
    }

    fn hash_of(&self, item: &Bound<'_, PyAny>) -> PyResult<u64> {
        let seed = self.plan.seed();
        with_item(item, |bytes| xxh3_64_bytes(bytes, seed))
    }

    /// Adds a batch, a round trip per chunk of hashes; returns how many items it read. An
    /// error part way notes how many items of the call (`before`, of its earlier
    /// iterables, and this batch's chunks before the failed round trip) were added.
    fn add_source(&self, py: Python<'_>, mut source: Source<'_>, before: usize) -> PyResult<usize> {
        self.refuse_closed()?;
        let mut sent = 0;
        // Whether the failed round trip lost what was acknowledged before it: a server
        // restarted (its run_id changed) or a shard missing (as the CLI tells them).
        let mut lost = None;
        let read = source.for_each_hashed(py, self.plan.seed(), Some(before), |hashes| {
            let done = self.run(py, |filter| filter.add_hashes(hashes));
            match done {
                Ok(_) => {
                    sent += hashes.len();
                    // The round trip just done ran a handler in its retries that raised
                    // (Ctrl-C), and then succeeded: the batch ends here. (A signal since,
                    // `for_each_hashed` takes between round trips.)
                    match self.signals.take_raised() {
                        Some(interrupt) => Err(items::noted(py, interrupt, items::interrupted_note(before + sent))),
                        None => Ok(()),
                    }
                }
                Err(Failure::Client(error @ Error::Interrupted(_))) => {
                    let added = before + sent;
                    let note = match added {
                        0 => "the call was interrupted in its first round trip: its items may or may not have been added".to_owned(),
                        1 => "the 1 item of this call before the interrupted round trip was added; the rest may or may not have been".to_owned(),
                        _ => format!("the {added} items of this call before the interrupted round trip were added; the rest may or may not have been"),
                    };
                    Err(items::noted(py, self.signals.error(error), note))
                }
                Err(Failure::Client(error)) => {
                    lost = Some(error.may_have_lost_acknowledged());
                    Err(self.signals.error(error))
                }
                // Closed between round trips (by another thread, the batch's generator):
                // what went before is in, as before a bad item.
                Err(Failure::Closed) => Err(items::noted(
                    py,
                    self.signals.failure_error(Failure::Closed),
                    closed_note(before + sent),
                )),
                Err(Failure::Reentered) => Err(self.signals.failure_error(Failure::Reentered)),
            }
        });
        let (error, lost) = match (read, lost) {
            (Ok(read), _) => return Ok(read),
            // A bad item (noted by `for_each_hashed`), or an interruption (noted above).
            (Err(error), None) => return Err(error),
            (Err(error), Some(lost)) => (error, lost),
        };
        let added = before + sent;
        // Part of a failed round trip may have run (one command per shard, some of which
        // may have been answered): its items may or may not be in the filter.
        let note = match added {
            0 => "no round trip of this call was acknowledged: its items may or may not have been added (adding them again is harmless)".to_owned(),
            1 if lost => "the 1 item of this call before the failed round trip was acknowledged, but may have been lost with it; the rest may or may not have been added".to_owned(),
            1 => "the 1 item of this call before the failed round trip was added; the rest may or may not have been".to_owned(),
            _ if lost => format!(
                "the {added} items of this call before the failed round trip were acknowledged, but may have been lost with it; the rest may or may not have been added"
            ),
            _ => format!(
                "the {added} items of this call before the failed round trip were added; the rest may or may not have been"
            ),
        };
        Err(items::noted(py, error, note))
    }
}

#[pymethods]
impl PyShardedFilter {
    /// Opens the sharded filter ``name`` on ``target``: reads its parameters, and checks
    /// that the server (on a cluster, every primary) has the bloomery module loaded.
    /// ``LookupError`` when there is no filter of that name.
    #[new]
    #[pyo3(signature = (target, name, *, retry_seconds=30.0))]
    fn open(py: Python<'_>, target: &str, name: &str, retry_seconds: f64) -> PyResult<Self> {
        let given = (target.to_owned(), retry_seconds);
        let (target, retry) = (parse_target(target)?, retry_for(retry_seconds)?);
        let signals = Signals::default();
        let connection = connect(py, &target, retry, &signals)?;
        let filter = py
            .detach(|| with_signals_blocked(|| ShardedFilter::open(connection, name)))
            .map_err(|error| signals.error(error))?;
        Ok(Self::new(filter, target, given, retry, false, signals))
    }

    /// Makes the sharded filter ``name`` on ``target`` for ``expected_items`` at ``fpp``:
    /// its shards (blocked filters of at most ``shard_bytes`` each, at least
    /// ``min_shards`` of them), then its parameters at the key ``name``. A filter of that
    /// name with the same parameters is opened instead (``created`` is then ``False``);
    /// with other parameters, ``ValueError``.
    #[staticmethod]
    #[pyo3(signature = (
        target, name, expected_items, fpp=FppArg::Value(0.01), *, seed=IntArg::Value(0),
        shard_bytes=IntArg::Value(64 << 20), min_shards=IntArg::Value(64), retry_seconds=30.0
    ), text_signature = "(target, name, expected_items, fpp=0.01, *, seed=0, shard_bytes=67108864, min_shards=64, retry_seconds=30.0)")]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        target: &str,
        name: &str,
        expected_items: IntArg,
        fpp: FppArg,
        seed: IntArg,
        shard_bytes: IntArg,
        min_shards: IntArg,
        retry_seconds: f64,
    ) -> PyResult<Self> {
        let min_shards = min_shards.get("min_shards", 1, u64::from(bloomery::sharding::MAX_SHARDS))?;
        let plan = ShardPlan::new(
            expected_items.unsigned("expected_items")?,
            fpp.get()?,
            shard_bytes.get("shard_bytes", 64, u64::MAX)?,
            u32::try_from(min_shards).expect("at most MAX_SHARDS"),
        )
        .map_err(|error| PyValueError::new_err(error.to_string()))?
        .with_seed(seed.unsigned("seed")?);
        let given = (target.to_owned(), retry_seconds);
        let (target, retry) = (parse_target(target)?, retry_for(retry_seconds)?);
        let signals = Signals::default();
        let connection = connect(py, &target, retry, &signals)?;
        let (filter, created) = py
            .detach(|| with_signals_blocked(|| ShardedFilter::create(connection, name, plan)))
            .map_err(|error| signals.error(error))?;
        Ok(Self::new(filter, target, given, retry, created, signals))
    }

    /// Adds ``item``; returns whether it was new (a bit changed).
    fn add(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        let hash = self.hash_of(item)?;
        let (new, doubted) = self.with_client(py, |filter| filter.add_hashes_doubted(&[hash]))?;
        if doubted[0] {
            // "Old" from a command sent again after its reply was lost: the first send may
            // have added it. False would be a first occurrence taken for a repeat.
            return Err(RedisError::new_err(
                "the add's reply was lost (a lost connection, no reply in time) and the add \
                 was sent again, which found the item there: it is in the filter, but whether \
                 this add or an earlier one put it there is unknown",
            ));
        }
        Ok(new[0])
    }

    fn __contains__(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        let hash = self.hash_of(item)?;
        let present = self.with_client(py, |filter| filter.contains_hashes(&[hash]))?;
        Ok(present[0])
    }

    /// Adds every item of each iterable.
    #[pyo3(signature = (*iterables))]
    fn update(&self, py: Python<'_>, iterables: &Bound<'_, PyTuple>) -> PyResult<()> {
        self.refuse_closed()?;
        items::each_iterable(py, iterables, |source, before| {
            self.add_source(py, source, before)
        })
    }

    /// Adds a batch (the forms ``BloomFilter.add_many`` takes: a list or iterable of
    /// items, or a buffer such as a numpy array).
    #[pyo3(signature = (items, *, item_size=None))]
    fn add_many(&self, py: Python<'_>, items: &Bound<'_, PyAny>, item_size: Option<IntArg>) -> PyResult<()> {
        let source = Source::new(items, IntArg::item_size(item_size.as_ref())?)?;
        self.add_source(py, source, 0).map(drop)
    }

    /// Looks up a batch; one ``bool`` per item.
    #[pyo3(signature = (items, *, item_size=None))]
    fn contains_many<'py>(
        &self,
        py: Python<'py>,
        items: &Bound<'py, PyAny>,
        item_size: Option<IntArg>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.refuse_closed()?;
        let mut source = Source::new(items, IntArg::item_size(item_size.as_ref())?)?;
        let mut results = source.answers()?;
        source.lookup_hashed(py, self.plan.seed(), &mut results, |hashes, answers| {
            let found = self.with_client(py, |filter| filter.contains_hashes(hashes))?;
            // (Ctrl-C between round trips ends the call: `for_each_hashed`.)
            answers.copy_from_slice(&found);
            Ok(())
        })?;
        bool_list(py, &results)
    }

    /// After every add (each round trip of a batch add), waits until ``replicas`` replicas
    /// of each primary written to hold its writes, at most ``timeout`` seconds (0: as long
    /// as it takes); fewer is a ``RedisError``. ``replicas=0`` stops waiting.
    #[pyo3(signature = (replicas, timeout=10.0))]
    fn set_wait(&self, py: Python<'_>, replicas: IntArg, timeout: f64) -> PyResult<()> {
        let replicas = replicas.get("replicas", 0, i64::MAX as u64)?;
        let seconds = timeout;
        let timeout = wait_timeout(seconds).ok_or_else(|| {
            PyValueError::new_err(format!(
                "timeout must be a number of seconds from 0 to {MAX_WAIT_SECONDS}, got {seconds:?}"
            ))
        })?;
        let replicas = usize::try_from(replicas).unwrap_or(usize::MAX);
        self.with_client(py, |filter| {
            filter.set_wait(replicas, timeout);
            Ok(())
        })?;
        // Kept for a client made anew (a forked child) and a pickle once the client took
        // it: a refused call (closed, from a signal handler) changes nothing.
        self.wait_replicas.store(replicas as u64, Ordering::Relaxed);
        self.wait_timeout_bits.store(seconds.to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// The keys of the shards that are missing (lost: deleted, evicted, flushed, a restart
    /// without persistence): every command on them fails until the filter is made anew.
    fn missing_shards(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with_client(py, ShardedFilter::missing_shards)
    }

    /// The filter's state, read from every shard (``BF.CARD``, a pass over each shard's
    /// bits on its node): ``shards``, ``shards_created``, ``estimated_items`` (``2**64 -
    /// 1`` when a shard has every bit set), ``saturated_shards`` and ``fpp_estimate``.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = self.with_client(py, ShardedFilter::info)?;
        let dict = PyDict::new(py);
        dict.set_item("shards", info.plan.shards())?;
        dict.set_item("shards_created", info.shards_created)?;
        dict.set_item("estimated_items", info.estimated_items)?;
        dict.set_item("saturated_shards", info.saturated_shards())?;
        dict.set_item("fpp_estimate", info.fpp_estimate())?;
        Ok(dict)
    }

    /// Closes the connections to the servers; a call after it raises ``ValueError``.
    /// Closing a closed filter does nothing. It does not wait for a call running meanwhile
    /// (in another thread, or the one whose retries ran the signal handler closing it):
    /// that call ends at its next try (a batch raises, noting what it added) and drops
    /// the connections.
    fn close(&self, py: Python<'_>) {
        self.signals.closed.store(true, Ordering::Release);
        let current = self.current.load(Ordering::Acquire);
        // SAFETY: never null; freed only by `Drop`, which no call outlives.
        let record = unsafe { &*current };
        // A forked child's record is its parent's (connections and lock): left alone. A
        // lock held, by whichever thread, is a call's that drops the connections (`run`).
        if record.pid == std::process::id() {
            let connections = match record.filter.try_lock() {
                Ok(mut guard) => guard.take(),
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().take(),
                Err(TryLockError::WouldBlock) => None,
            };
            py.detach(|| drop(connections));
        }
    }

    /// Whether ``close()`` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.signals.closed()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Closes it (the block's exception, if any, goes on).
    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }

    /// Pickles as what opens it again by name, for another process (``multiprocessing``'s
    /// spawn and forkserver start methods): with its ``retry_seconds`` and ``set_wait``,
    /// checking there that the filter under the name is still the one pickled. The pickle
    /// holds the target as given, with any password in it.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let this = slf.get();
        if this.signals.closed() {
            return Err(closed_error());
        }
        let reopen = slf.get_type().getattr("_reopen")?;
        let timeout = f64::from_bits(this.wait_timeout_bits.load(Ordering::Relaxed));
        let args = (
            &this.given.0,
            &this.name,
            this.given.1,
            this.plan.to_text(),
            this.wait_replicas.load(Ordering::Relaxed),
            timeout,
        );
        Ok((reopen, args.into_pyobject(slf.py())?))
    }

    /// Opens a pickled filter again (see ``__reduce__``).
    #[staticmethod]
    fn _reopen(
        py: Python<'_>,
        target: &str,
        name: &str,
        retry_seconds: f64,
        plan: &str,
        replicas: IntArg,
        timeout: f64,
    ) -> PyResult<Self> {
        let filter = Self::open(py, target, name, retry_seconds)?;
        if filter.plan.to_text() != plan {
            return Err(PyValueError::new_err(format!(
                "sharded filter '{name}' was made again with other parameters ({}) since it was \
                 pickled ({plan}): open it again",
                filter.plan.to_text()
            )));
        }
        filter.set_wait(py, replicas, timeout)?;
        Ok(filter)
    }

    /// The filter's name (its metadata key).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Where it lives, as messages show it (a password in the URL shown as ``***``).
    #[getter]
    fn target(&self) -> &str {
        &self.shown
    }

    /// Whether ``create`` made it (``False`` when it opened one that existed).
    #[getter]
    fn created(&self) -> bool {
        self.created
    }

    /// The items it was sized for.
    #[getter]
    fn expected_items(&self) -> u64 {
        self.plan.expected_items()
    }

    /// The false-positive rate it was sized for.
    #[getter]
    fn fpp(&self) -> f64 {
        self.plan.fpp()
    }

    /// The items' hash seed.
    #[getter]
    fn seed(&self) -> u64 {
        self.plan.seed()
    }

    /// How many shards it has.
    #[getter]
    fn shards(&self) -> u32 {
        self.plan.shards()
    }

    /// Bytes of bits per shard.
    #[getter]
    fn shard_bytes(&self) -> u64 {
        self.plan.shard_bytes()
    }

    fn __repr__(&self) -> String {
        format!(
            "<bloomery.ShardedFilter {:?} on {}: {} shards of {} bytes, {} items at {}>",
            self.name(),
            self.shown,
            self.plan.shards(),
            self.plan.shard_bytes(),
            self.plan.expected_items(),
            self.plan.fpp()
        )
    }
}
