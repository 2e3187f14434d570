//! A mapped file truncated by another program raises SIGBUS on the next access of a page
//! past its new end, as does a write to a mapped page the disk has no room for, which
//! would kill the process with no message. This tool's own writers never shrink a file
//! (they rename a new one over it, or set bits in place in blocks reserved beforehand), so
//! this only happens when something else rewrites the file or the file system cannot
//! reserve blocks; then the tool prints one line naming the file and exits with status 2,
//! like any other error (a file being updated in place is left unsealed, its bits valid).
//!
//! The file named is the one whose mapping holds the faulting address (`si_addr`): a run
//! may map several (`merge --force a a b` maps `a` and `b`), and naming the first mapped
//! blamed `a` for `b`'s truncation. Where the address is in no mapping known here, the
//! line names every file mapped.

use std::ffi::c_void;
use std::path::Path;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// A mapping the handler knows: its address range and its file's name. Made once per
/// [`watch`] and never freed: a handler may be reading it when its [`Watched`] is dropped.
struct Mapping {
    start: usize,
    end: usize,
    name: &'static [u8],
}

/// A place for one [`Mapping`], null when free. The handler reads the range and the name
/// through one pointer (no locks, no allocation): a slot freed and taken again by another
/// thread meanwhile gives it one mapping or the other, never one's range or name with the
/// other's (the fields stored one by one could be read half of each, a name's pointer with
/// another name's length).
struct Slot(AtomicPtr<Mapping>);

impl Slot {
    const fn empty() -> Self {
        Self(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The mapping held here, if any.
    fn mapping(&self) -> Option<&'static Mapping> {
        // SAFETY: a non-null pointer is one of `watch`'s leaked, never freed mappings,
        // stored with Release after it was written.
        unsafe { self.0.load(Ordering::Acquire).as_ref() }
    }
}

/// More than a command maps at once but for a merge in place of more inputs (it maps them
/// all): a fault in a mapping past these is not named alone (the line names those known,
/// then "...").
const SLOTS: usize = 64;
static MAPPINGS: [Slot; SLOTS] = [const { Slot::empty() }; SLOTS];
/// Whether a mapping could not be given a slot.
static OVERFLOW: AtomicBool = AtomicBool::new(false);

const SUFFIX: &[u8] =
    b" changed size while it was mapped (rewritten in place by another program?), or the disk is full\n";

/// write(2) of all of `bytes` to stderr, as far as it goes.
fn say(bytes: &[u8]) {
    // SAFETY: write(2) is async-signal-safe; the buffer outlives the call.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
    }
}

extern "C" fn on_sigbus(_signal: libc::c_int, info: *mut libc::siginfo_t, _context: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler; si_addr is
    // set for a SIGBUS the kernel raised (si_code > 0), not for one sent (kill, raise).
    let address = unsafe { ((*info).si_code > 0).then(|| (*info).si_addr() as usize) };
    let owner = address.and_then(|address| {
        MAPPINGS.iter().find_map(|slot| {
            let mapping = slot.mapping()?;
            (mapping.start..mapping.end)
                .contains(&address)
                .then_some(mapping.name)
        })
    });
    say(b"bloomery: ");
    match owner {
        Some(name) => {
            say(name);
            say(b": the file");
        }
        None => {
            say(b"one of the files mapped (");
            let mut first = true;
            for mapping in MAPPINGS.iter().filter_map(Slot::mapping) {
                if !first {
                    say(b", ");
                }
                say(mapping.name);
                first = false;
            }
            if OVERFLOW.load(Ordering::Relaxed) {
                say(b", ...");
            }
            say(b")");
        }
    }
    say(SUFFIX);
    // SAFETY: _exit(2) is async-signal-safe.
    unsafe { libc::_exit(2) }
}

/// Installs the handler (once per process).
fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler
        // has the signature SA_SIGINFO expects and only calls async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
}

/// A mapping the handler names; forgotten when dropped (drop it before, or with, the
/// mapping: its addresses may be mapped again for another file).
pub struct Watched {
    slot: Option<&'static Slot>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            // The mapping stays leaked: a handler may be reading it.
            slot.0.store(std::ptr::null_mut(), Ordering::Release);
        }
    }
}

/// Installs the handler and has it name `path` for a fault in `mapping`, the file's
/// mapped bytes, until the returned value is dropped.
pub fn watch(path: &Path, mapping: &[u8]) -> Watched {
    install();
    let start = mapping.as_ptr() as usize;
    let known: *mut Mapping = Box::leak(Box::new(Mapping {
        start,
        end: start + mapping.len(),
        name: Box::leak(path.display().to_string().into_bytes().into_boxed_slice()),
    }));
    let free = MAPPINGS.iter().find(|slot| {
        slot.0
            .compare_exchange(std::ptr::null_mut(), known, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    });
    if free.is_none() {
        OVERFLOW.store(true, Ordering::Relaxed);
        // SAFETY: never published (no slot took it); its name stays leaked.
        drop(unsafe { Box::from_raw(known) });
    }
    Watched { slot: free }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::FromRawFd;

    /// Held by the tests that watch mappings: the handler lists every one mapped.
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Runs `fault` in a child process (fork) whose stderr is a pipe; returns its exit
    /// status and what it wrote there. The child does only what a signal handler may.
    fn in_child(fault: impl FnOnce()) -> (i32, String) {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) writes two descriptors into `fds`.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child calls only async-signal-safe functions (dup2, a read of the
        // mapping, the handler's write and _exit) before it exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            unsafe {
                libc::dup2(fds[1], 2);
            }
            fault();
            unsafe { libc::_exit(0) }
        }
        // SAFETY: the read end is ours, closed once (by the File).
        unsafe { libc::close(fds[1]) };
        let mut said = String::new();
        unsafe { std::fs::File::from_raw_fd(fds[0]) }
            .read_to_string(&mut said)
            .unwrap();
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "status {status}: {said}");
        (libc::WEXITSTATUS(status), said)
    }

    /// `merge --force a a b` maps `a` and `b`; `b` truncated meanwhile was said to be `a`
    /// (the handler named the first file mapped). The file whose mapping holds the address
    /// is named; a SIGBUS at no mapped address names every file mapped.
    #[test]
    fn a_fault_names_the_file_whose_mapping_it_is_in() {
        let _alone = ALONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let [a, b] = ["a.bloom", "b.bloom"].map(|name| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![1u8; 1 << 16]).unwrap();
            path
        });
        let maps = [&a, &b].map(|path| {
            let file = std::fs::File::open(path).unwrap();
            // SAFETY: a test file nothing else writes; truncated below on purpose.
            unsafe { memmap2::Mmap::map(&file) }.unwrap()
        });
        let _watched = [watch(&a, &maps[0]), watch(&b, &maps[1])];
        std::fs::OpenOptions::new()
            .write(true)
            .open(&b)
            .unwrap()
            .set_len(0)
            .unwrap();
        let (status, said) = in_child(|| {
            // SAFETY: a read of a mapped page, past the file's end: the SIGBUS tested.
            unsafe { std::ptr::read_volatile(maps[1].as_ptr().add(8192)) };
        });
        let expected = format!(
            "bloomery: {}: the file changed size while it was mapped",
            b.display()
        );
        assert_eq!(status, 2, "{said}");
        assert!(said.starts_with(&expected) && said.lines().count() == 1, "{said}");
        let (status, said) = in_child(|| unsafe {
            libc::raise(libc::SIGBUS);
        });
        let expected = format!(
            "bloomery: one of the files mapped ({}, {}) changed size while it was mapped",
            a.display(),
            b.display()
        );
        assert_eq!(status, 2, "{said}");
        assert!(said.starts_with(&expected), "{said}");
    }

    /// Threads that watch and forget mappings while the handler may read the slots: what a
    /// reader finds in a slot is one mapping whole, its range with its own name. (The slots
    /// held the start, end, name pointer and name length in four atomics: a slot freed and
    /// taken again meanwhile could give a reader one name's pointer with another's length.)
    #[test]
    fn a_slot_taken_again_meanwhile_reads_as_one_mapping() {
        let _alone = ALONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let arrays: Vec<Vec<u8>> = (1..=4).map(|n| vec![0u8; n * 4096]).collect();
        let names: Vec<String> = (1..=4).map(|n| format!("/{}.bloom", "n".repeat(n * 7))).collect();
        // One of this test's mappings whole, or none of its ranges or names (another
        // test's mapping).
        let whole_or_not_ours = |mapping: &Mapping| {
            let ours = arrays.iter().zip(&names).map(|(array, name)| {
                let start = array.as_ptr() as usize;
                (start, start + array.len(), name.as_bytes())
            });
            let mut matches = ours.map(|(start, end, name)| {
                ((start, end) == (mapping.start, mapping.end), name == mapping.name)
            });
            matches.clone().any(|both| both == (true, true)) || matches.all(|both| both == (false, false))
        };
        let stop = AtomicBool::new(false);
        let finished = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for worker in 0..2 {
                let (arrays, names, stop, finished) = (&arrays, &names, &stop, &finished);
                scope.spawn(move || {
                    // Each watch leaks its mapping (under 100 bytes): bounded.
                    for round in 0..100_000 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let which = (round + worker) % arrays.len();
                        drop(watch(Path::new(&names[which]), &arrays[which]));
                    }
                    // One mapping held until the reader is done, so that it finds one even
                    // when it ran only after the rounds (on a busy machine it found none,
                    // and the test failed on `seen > 0`).
                    let held = watch(Path::new(&names[worker]), &arrays[worker]);
                    finished.fetch_add(1, Ordering::Relaxed);
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                    }
                    drop(held);
                });
            }
            let started = std::time::Instant::now();
            let mut seen = 0u64;
            loop {
                // A last pass after both workers finished reads their held mappings.
                let done = finished.load(Ordering::Relaxed) == 2;
                for mapping in MAPPINGS.iter().filter_map(Slot::mapping) {
                    assert!(
                        whole_or_not_ours(mapping),
                        "a mapping read half of one, half of another"
                    );
                    seen = seen.wrapping_add(1);
                }
                if seen >= 20_000 || done || started.elapsed() > std::time::Duration::from_secs(5) {
                    break;
                }
            }
            stop.store(true, Ordering::Relaxed);
            // The reader saw mappings (else it tested nothing).
            assert!(seen > 0);
        });
    }
}
