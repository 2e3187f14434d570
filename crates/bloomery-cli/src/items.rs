//! Where items come from: the command line, files, or standard input, one per line.
//! A line's bytes are the item, without its '\n' (and without a '\r' before it, so files
//! with Windows line ends give the same items).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Context, Result};

/// Calls `each` for every item: the `items` given as arguments, then the lines of each
/// `files` entry ("-" is standard input), or the lines of standard input when both are
/// empty. Stops at the first error or when `each` returns false.
pub fn for_each_item(items: &[String], files: &[PathBuf], mut each: impl FnMut(&[u8]) -> bool) -> Result<()> {
    for item in items {
        if !each(item.as_bytes()) {
            return Ok(());
        }
    }
    if !items.is_empty() && files.is_empty() {
        return Ok(());
    }
    let stdin = [PathBuf::from("-")];
    let files = if files.is_empty() { &stdin[..] } else { files };
    for path in files {
        let keep_going = if path.as_os_str() == "-" {
            for_each_line(io::stdin().lock(), &mut each).with_path(Path::new("<stdin>"))?
        } else {
            let file = File::open(path).with_path(path)?;
            for_each_line(BufReader::with_capacity(1 << 16, file), &mut each).with_path(path)?
        };
        if !keep_going {
            break;
        }
    }
    Ok(())
}

/// Calls `each` for every line of `input`; returns false when `each` asked to stop.
pub fn for_each_line<R: BufRead>(mut input: R, each: &mut impl FnMut(&[u8]) -> bool) -> io::Result<bool> {
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(true);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        if !each(&line) {
            return Ok(false);
        }
    }
}

/// Reads all of standard input or a file (for `import`).
pub fn read_all(path: &Path) -> Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        io::stdin()
            .read_to_end(&mut bytes)
            .with_path(Path::new("<stdin>"))?;
        Ok(bytes)
    } else {
        std::fs::read(path).with_path(path)
    }
}
