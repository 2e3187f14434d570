//! Commands that only read a filter: check and info through a read-only memory map, and
//! verify, which loads the whole file as an update would.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use crate::ItemArgs;
use crate::error::{Context, Result};
use crate::items::for_each_item;
use crate::store::{self, Mapped};

pub fn check(path: &Path, items: &ItemArgs, quiet: bool) -> Result<ExitCode> {
    let mapped = Mapped::open(path)?;
    let view = mapped.view()?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut all_present = true;
    let mut write_error = None;
    for_each_item(&items.items, &items.inputs, items.format, |item, raw| {
        let present = view.contains(item);
        all_present &= present;
        if !quiet {
            let label: &[u8] = if present {
                b"probably present\t"
            } else {
                b"absent\t"
            };
            if let Err(error) = out
                .write_all(label)
                .and_then(|()| out.write_all(raw))
                .and_then(|()| out.write_all(b"\n"))
            {
                write_error = Some(error);
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    match write_error.map_or_else(|| out.flush(), Err) {
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => {
            return Err(error).with_path(Path::new("<stdout>"));
        }
        _ => {}
    }
    Ok(if all_present {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub fn info(path: &Path) -> Result<ExitCode> {
    let mapped = Mapped::open(path)?;
    let view = mapped.view()?;
    let header = mapped.header();
    let stats = view.stats();
    println!("file: {}", path.display());
    println!(
        "file size: {} bytes (format version {})",
        mapped.file_len(),
        header.version
    );
    println!("variant: {}", view.variant());
    for (name, value) in view.describe() {
        println!("{name}: {value}");
    }
    println!("estimated items: {}", stats.estimated_len);
    if let Some(capacity) = stats.capacity {
        let beyond = if stats.refuses_beyond_capacity {
            "refuses more"
        } else {
            "then grows or rotates"
        };
        println!("sized for: {capacity} items ({beyond})");
    }
    println!("current false-positive estimate: {:.6}", stats.expected_fpp);
    println!("memory: {} bytes", stats.memory_bytes);
    Ok(ExitCode::SUCCESS)
}

/// Everything a load checks: header and payload checksums, the length, and every
/// parameter against the payload.
pub fn verify(path: &Path) -> Result<ExitCode> {
    let start = Instant::now();
    let filter = store::load(path)?;
    let file_len = std::fs::metadata(path).with_path(path)?.len();
    println!(
        "ok: {}: {} filter, {file_len} bytes, checksums and parameters valid ({:.1} ms)",
        path.display(),
        filter.variant(),
        start.elapsed().as_secs_f64() * 1000.0
    );
    Ok(ExitCode::SUCCESS)
}
