//! A mapped file truncated by another program raises SIGBUS on the next access of a page
//! past its new end, as does a write to a mapped page the disk has no room for, which
//! would kill the process with no message. This tool's own writers never shrink a file
//! (they rename a new one over it, or set bits in place in blocks reserved beforehand), so
//! this only happens when something else rewrites the file or the file system cannot
//! reserve blocks; then the tool prints one line naming the file and exits with status 2,
//! like any other error (a file being updated in place is left unsealed, its bits valid).

use std::ffi::CString;
use std::path::Path;
use std::sync::OnceLock;

/// The message for the handler, formatted before it can be needed (a signal handler may
/// not allocate).
static MESSAGE: OnceLock<CString> = OnceLock::new();

extern "C" fn on_sigbus(_signal: libc::c_int) {
    if let Some(message) = MESSAGE.get() {
        let bytes = message.as_bytes();
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer is a static
        // that lives for the whole process.
        unsafe {
            libc::write(2, bytes.as_ptr().cast(), bytes.len());
        }
    }
    // SAFETY: as above.
    unsafe { libc::_exit(2) }
}

/// Installs the handler for reads of the file mapped from `path` (the first call wins:
/// the tool maps one file per run).
pub fn guard(path: &Path) {
    let text = format!(
        "bloomery: {}: the file changed size while it was mapped (rewritten in place by another program?), or the disk is full\n",
        path.display()
    );
    let Ok(message) = CString::new(text) else {
        return;
    };
    if MESSAGE.set(message).is_err() {
        return;
    }
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler has
    // the signature sa_handler expects and only calls async-signal-safe functions.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}
