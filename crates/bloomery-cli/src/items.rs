//! Where items come from (the command line, files, or standard input, one per line) and
//! how a line becomes the item's bytes. A line's item is its bytes without the '\n' (and
//! without a '\r' before it, so files with Windows line ends give the same items); the
//! line as read (with its '\r') is what `dedup` prints and `check` echoes. Arguments
//! are taken as the bytes the shell passed, UTF-8 or not.
//!
//! The bytes are the item: the library hashes exactly what a `Funnel` would write, so
//! `--format text` lines are the items a Rust `&str`, a Java `stringFunnel(UTF_8)` or a
//! Python `str` make, `--format long` is Guava's `longFunnel` (8 bytes little-endian),
//! `--format int` its `integerFunnel` (4 bytes), and `--format hex` gives any bytes.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{CliError, Context, Result};

/// How a line (or an argument) becomes an item's bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ItemFormat {
    /// The line's bytes as they are (UTF-8 text: Guava's stringFunnel(UTF_8)).
    #[default]
    Text,
    /// Hexadecimal digits, two per byte.
    Hex,
    /// A decimal 64-bit integer (signed, or unsigned up to 2^64-1), as 8 bytes
    /// little-endian: Guava's longFunnel.
    Long,
    /// A decimal 32-bit integer (signed, or unsigned up to 2^32-1), as 4 bytes
    /// little-endian: Guava's integerFunnel.
    Int,
}

impl ItemFormat {
    /// The item bytes for `raw` (a line or an argument), written into `buffer` when they
    /// differ from `raw`.
    pub fn decode<'a>(self, raw: &'a [u8], buffer: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let bad = |what: &str| CliError::new(format!("item '{}' is not {what}", shown(raw)));
        buffer.clear();
        match self {
            ItemFormat::Text => return Ok(raw),
            ItemFormat::Hex => {
                if !raw.len().is_multiple_of(2) {
                    return Err(bad("hexadecimal (an even number of digits 0-9, a-f)"));
                }
                // Digits only: `u8::from_str_radix` would also take a sign ("+f" as 0f).
                let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
                for pair in raw.chunks_exact(2) {
                    let byte = digit(pair[0])
                        .zip(digit(pair[1]))
                        .map(|(high, low)| high << 4 | low);
                    buffer.push(byte.ok_or_else(|| bad("hexadecimal (an even number of digits 0-9, a-f)"))?);
                }
            }
            ItemFormat::Long => buffer.extend_from_slice(
                &integer_le_bytes::<8>(raw).ok_or_else(|| bad("a decimal 64-bit integer"))?,
            ),
            ItemFormat::Int => buffer.extend_from_slice(
                &integer_le_bytes::<4>(raw).ok_or_else(|| bad("a decimal 32-bit integer"))?,
            ),
        }
        Ok(buffer)
    }
}

/// An item as an error message shows it: non-printing bytes escaped (`\n`, `\x00`, ...),
/// and cut after [`SHOWN_BYTES`] bytes, with the item's length, so that one bad line of
/// 100 MB makes an error line of a hundred characters.
pub fn shown(raw: &[u8]) -> String {
    let kept = &raw[..raw.len().min(SHOWN_BYTES)];
    let escaped = kept.escape_ascii().to_string();
    if kept.len() < raw.len() {
        format!("{escaped}... ({} bytes)", raw.len())
    } else {
        escaped
    }
}

/// See [`shown`].
const SHOWN_BYTES: usize = 64;

/// A decimal integer of `N` bytes, signed (from -2^(8N-1)) or unsigned (up to 2^(8N) - 1),
/// as its `N` two's-complement bytes, little-endian; `None` when out of range.
fn integer_le_bytes<const N: usize>(raw: &[u8]) -> Option<[u8; N]> {
    let value: i128 = std::str::from_utf8(raw).ok()?.parse().ok()?;
    let bits = 8 * N as u32;
    if value < -(1i128 << (bits - 1)) || value >= 1i128 << bits {
        return None;
    }
    value.to_le_bytes()[..N].try_into().ok()
}

/// Calls `each(item, raw)` for every item, `item` being the bytes to hash and `raw` the
/// text as given (a line without its '\n'): the `items` given as arguments, then the lines of each `files` entry
/// ("-" is standard input), or the lines of standard input when both are empty. Stops at
/// the first error (a bad item included) or when `each` returns `Ok(false)`.
pub fn for_each_item(
    items: &[OsString],
    files: &[PathBuf],
    format: ItemFormat,
    each: impl FnMut(&[u8], &[u8]) -> Result<bool>,
) -> Result<()> {
    for_each_item_until_waiting(items, files, format, each, None::<fn() -> Result<bool>>)
}

/// As [`for_each_item`], and calls `waiting` (if any) whenever the next read of a pipe,
/// terminal or socket would wait for its writer (nothing read is left to use, and the
/// input has nothing ready): then the items so far can be used (`tail -f log | bloomery
/// dedup` printed a line only once 4,096 had come). Never for a regular file, nor when
/// the input has data ready. `waiting` returns false to stop, as `each` does.
pub fn for_each_item_until_waiting(
    items: &[OsString],
    files: &[PathBuf],
    format: ItemFormat,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    mut waiting: Option<impl FnMut() -> Result<bool>>,
) -> Result<()> {
    // Every file opened before the first item is used: a missing or unreadable one is an
    // error before anything changed, not after the items before it were added. A named
    // pipe (or any file that is not a regular one) is read from that opening: opened
    // twice, it would lose what a quick writer wrote before the first close, and then wait
    // for a writer that has gone. Regular files are closed and opened again when read, so
    // that a thousand of them do not take a thousand descriptors at once.
    if (!items.is_empty() || !files.is_empty()) && !files.iter().any(|path| path.as_os_str() == "-") {
        warn_if_unread(&io::stdin(), files);
    }
    let mut opened = Vec::with_capacity(files.len());
    for path in files {
        if path.as_os_str() == "-" {
            opened.push(None);
            continue;
        }
        let file = File::open(path).with_path(path)?;
        let regular = file.metadata().with_path(path)?.is_file();
        opened.push((!regular).then_some(file));
    }
    let mut buffer = Vec::new();
    // A bad item's error says where it is: the argument's or the line's number.
    let mut one = |raw: &[u8], text: &[u8], at: &dyn Fn() -> String| -> Result<bool> {
        let item = format
            .decode(text, &mut buffer)
            .map_err(|error| CliError::new(format!("{}: {error}", at())))?;
        each(item, raw)
    };
    for (index, item) in items.iter().enumerate() {
        let raw = item.as_os_str().as_bytes();
        if !one(raw, raw, &|| format!("argument {}", index + 1))? {
            return Ok(());
        }
    }
    if !items.is_empty() && files.is_empty() {
        return Ok(());
    }
    let stdin = [PathBuf::from("-")];
    let files = if files.is_empty() {
        opened.push(None);
        &stdin[..]
    } else {
        files
    };
    for (path, file) in files.iter().zip(opened) {
        let shown = if path.as_os_str() == "-" {
            Path::new("<stdin>")
        } else {
            path
        };
        let mut line_item = |line: &[u8], number: u64| {
            let text = line.strip_suffix(b"\r").unwrap_or(line);
            one(line, text, &|| format!("{}, line {number}", shown.display()))
        };
        let waiting = waiting
            .as_mut()
            .map(|waiting| waiting as &mut dyn FnMut() -> Result<bool>);
        let keep_going = if path.as_os_str() == "-" {
            let stdin = io::stdin().lock();
            let waits = may_wait(&stdin);
            // Stdin's own buffer is bypassed by reads of 64 KiB: this one tells when
            // every byte read was used.
            let input = BufReader::with_capacity(1 << 16, stdin);
            for_each_line(input, shown, &mut line_item, waiting.filter(|_| waits))?
        } else {
            let file = match file {
                Some(file) => file,
                None => File::open(path).with_path(path)?,
            };
            let waits = may_wait(&file);
            let input = BufReader::with_capacity(1 << 16, file);
            for_each_line(input, path, &mut line_item, waiting.filter(|_| waits))?
        };
        if !keep_going {
            break;
        }
    }
    Ok(())
}

/// The longest item read from a line (without its '\n', and the '\r' before it). A line is held whole, so input
/// without line ends (`check f < /dev/zero`) grew one until the allocation aborted the
/// process; a longer line is an error, as a bad item is.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Whether reads of `input` may wait for a writer: not a regular file (a pipe, a terminal,
/// a socket).
fn may_wait(input: &impl AsFd) -> bool {
    input
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .and_then(|file| file.metadata())
        .is_ok_and(|metadata| !metadata.file_type().is_file())
}

/// Warns when standard input, which is not read (items came as arguments or `-i FILE`),
/// is a file redirected whole and unread (`bloomery add f apple < list`: its lines were
/// dropped without a word). Only a regular file at its start, that no `-i FILE` names
/// (`-i /dev/stdin` reads it): a file a shell loop reads a line at a time (`while read x;
/// do bloomery add f "$x"; done < list`) is past its start, and a pipe may be the shell's
/// own input, so neither is warned of; nothing is read.
fn warn_if_unread(input: &impl AsFd, files: &[PathBuf]) {
    use std::os::unix::fs::MetadataExt;
    let fd = input.as_fd().as_raw_fd();
    let Ok(metadata) = input
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .and_then(|file| file.metadata())
    else {
        return;
    };
    if !metadata.file_type().is_file() || metadata.len() == 0 {
        return;
    }
    // SAFETY: lseek(2) of a descriptor with offset 0 and SEEK_CUR only reads its position.
    if unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) } != 0 {
        return;
    }
    let named = files.iter().any(|path| {
        std::fs::metadata(path).is_ok_and(|file| file.dev() == metadata.dev() && file.ino() == metadata.ino())
    });
    if !named {
        // Not eprintln!, which panics when standard error is full or closed.
        let _ = writeln!(
            std::io::stderr(),
            "bloomery: warning: standard input holds data that is not read: with items given as \
             arguments or -i FILE, it is read only as -i -"
        );
    }
}

/// Whether a read of `input` would wait now: nothing is ready (no data, no end of input).
fn would_wait(input: &impl AsFd) -> bool {
    let mut poll = libc::pollfd {
        fd: input.as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) of one descriptor, with a zero timeout, writes only `poll`.
    unsafe { libc::poll(&mut poll, 1, 0) == 0 }
}

/// Calls `each` for every line of `input`, with its number (from 1), and `waiting` (if
/// any) before a read that would wait ([`for_each_item_until_waiting`]); returns false
/// when either asked to stop. A line whose item is longer than [`MAX_LINE_BYTES`] is an
/// error.
fn for_each_line<R: Read + AsFd>(
    mut input: BufReader<R>,
    path: &Path,
    each: &mut impl FnMut(&[u8], u64) -> Result<bool>,
    mut waiting: Option<&mut dyn FnMut() -> Result<bool>>,
) -> Result<bool> {
    let mut line = Vec::with_capacity(256);
    let mut number = 0u64;
    loop {
        line.clear();
        // No whole line left in what was read (none, or the start of one: a producer's
        // block of output ends mid-line): the next read may wait for a writer. The start
        // of a line is not in the batch yet, so the batch may go now.
        if let Some(waiting) = waiting.as_mut()
            && !input.buffer().contains(&b'\n')
            && would_wait(input.get_ref())
            && !waiting()?
        {
            return Ok(false);
        }
        // The limit is the item's: a '\r' before the '\n' is read past it (a 64 MiB item
        // on a CRLF line was refused, the same item on a LF line taken), and one byte
        // more tells an item of exactly the limit from a longer one.
        let limit = MAX_LINE_BYTES as u64 + 2;
        if (&mut input)
            .take(limit)
            .read_until(b'\n', &mut line)
            .with_path(path)?
            == 0
        {
            return Ok(true);
        }
        number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.strip_suffix(b"\r").unwrap_or(&line).len() > MAX_LINE_BYTES {
            return Err(CliError::new(format!(
                "{}: line {number} is longer than the {MAX_LINE_BYTES}-byte item limit (64 MiB, \
                 its line end not counted); \
                 give items as lines, and longer items as a digest of each",
                path.display()
            )));
        }
        if !each(&line, number)? {
            return Ok(false);
        }
    }
}

/// Reads all of standard input or a file (for `import`), at most what fits the memory
/// available ([`crate::space::input_limit`]): `import /dev/zero` once read until the
/// allocation aborted the process. A regular file larger than that is refused before it is
/// read.
pub fn read_all(path: &Path) -> Result<Vec<u8>> {
    let limit = crate::space::input_limit();
    let (shown, input): (&Path, Box<dyn Read>) = if path.as_os_str() == "-" {
        (Path::new("<stdin>"), Box::new(io::stdin().lock()))
    } else {
        let file = File::open(path).with_path(path)?;
        let metadata = file.metadata().with_path(path)?;
        if metadata.is_file() && metadata.len() > limit.bytes {
            return Err(limit.exceeded(path));
        }
        (path, Box::new(file))
    };
    let mut bytes = Vec::new();
    match input.take(limit.bytes.saturating_add(1)).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() as u64 <= limit.bytes => Ok(bytes),
        Ok(_) => Err(limit.exceeded(shown)),
        // The buffer could not grow (an address-space limit): refused in the same words.
        Err(error) if error.kind() == io::ErrorKind::OutOfMemory => Err(limit.exceeded(shown)),
        Err(error) => Err(error).with_path(shown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(format: ItemFormat, raw: &str) -> Result<Vec<u8>> {
        let mut buffer = Vec::new();
        format.decode(raw.as_bytes(), &mut buffer).map(<[u8]>::to_vec)
    }

    #[test]
    fn each_format_gives_the_funnel_bytes() {
        assert_eq!(decoded(ItemFormat::Text, "apple").unwrap(), b"apple");
        assert_eq!(decoded(ItemFormat::Hex, "00ff10").unwrap(), [0, 255, 16]);
        assert_eq!(decoded(ItemFormat::Hex, "A0fF").unwrap(), [160, 255]);
        assert_eq!(decoded(ItemFormat::Long, "-1").unwrap(), [255; 8]);
        assert_eq!(
            decoded(ItemFormat::Long, "18446744073709551615").unwrap(),
            [255; 8]
        );
        assert_eq!(
            decoded(ItemFormat::Long, "258").unwrap(),
            [2, 1, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(decoded(ItemFormat::Int, "258").unwrap(), [2, 1, 0, 0]);
        assert_eq!(decoded(ItemFormat::Int, "4294967295").unwrap(), [255; 4]);
    }

    #[test]
    fn a_bad_item_is_an_error_naming_it() {
        // Two hex digits a byte, no sign: "+f+1" is not 0f 01.
        for bad in ["+f+1", "-f", " f", "0g", "f"] {
            assert!(decoded(ItemFormat::Hex, bad).is_err(), "{bad}");
        }
        let message = decoded(ItemFormat::Long, "12x").unwrap_err().to_string();
        assert_eq!(message, "item '12x' is not a decimal 64-bit integer");
        // Shown escaped, and cut short.
        let message = decoded(ItemFormat::Hex, "ab\ncd").unwrap_err().to_string();
        assert_eq!(
            message,
            "item 'ab\\ncd' is not hexadecimal (an even number of digits 0-9, a-f)"
        );
        let long = "9".repeat(1_000_000);
        let message = decoded(ItemFormat::Long, &long).unwrap_err().to_string();
        assert!(
            message.len() < 150 && message.contains("(1000000 bytes)"),
            "{message}"
        );
        assert!(decoded(ItemFormat::Int, "4294967296").is_err());
        assert!(decoded(ItemFormat::Int, "-2147483649").is_err());
        assert_eq!(decoded(ItemFormat::Int, "-2147483648").unwrap(), [0, 0, 0, 0x80]);
        assert!(decoded(ItemFormat::Long, "18446744073709551616").is_err());
        assert!(decoded(ItemFormat::Hex, "abc").is_err());
        assert!(decoded(ItemFormat::Hex, "zz").is_err());
    }
}
