//! Commands that only read a filter: check and info through a read-only memory map, and
//! verify, which loads the whole file as an update would.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use bloomery::format::native::Variant;

use crate::ItemArgs;
use crate::error::{Context, Result};
use crate::items::for_each_item;
use crate::output;
use crate::store::{self, Mapped};

pub fn check(path: &Path, items: &ItemArgs, quiet: bool, verify: bool) -> Result<ExitCode> {
    let mapped = Mapped::open(path)?;
    if verify {
        mapped.verify_payload()?;
    }
    let view = mapped.view()?;
    let mut count = 0u64;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut all_present = true;
    let mut write_error = None;
    for_each_item(&items.items, &items.inputs, items.format, |item, raw| {
        let present = view.contains(item);
        all_present &= present;
        count += 1;
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
    output::finish(write_error.map_or_else(|| out.flush(), Err))?;
    if count == 0 {
        return Err(crate::update::no_items(path));
    }
    Ok(if all_present {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub fn info(path: &Path) -> Result<ExitCode> {
    let mapped = Mapped::open(path)?;
    let checksum = match mapped.verify_payload() {
        Ok(()) => "ok".to_owned(),
        Err(error) => format!("DAMAGED: {error}"),
    };
    let view = mapped.view()?;
    let header = mapped.header();
    let stats = view.stats();
    let mut out = BufWriter::new(io::stdout().lock());
    let mut lines = vec![
        ("file", path.display().to_string()),
        (
            "file size",
            format!("{} bytes (format version {})", mapped.file_len(), header.version),
        ),
        ("payload checksum", checksum),
        ("variant", view.variant().to_string()),
    ];
    lines.extend(view.describe());
    let estimated = if stats.estimated_len == u64::MAX {
        "unknown: every bit is set (the filter is saturated and answers present for everything)".to_owned()
    } else {
        stats.estimated_len.to_string()
    };
    lines.push(("estimated items", estimated));
    if let Some(capacity) = stats.capacity {
        let beyond = if stats.refuses_beyond_capacity {
            "refuses more"
        } else if stats.expansion.is_some() || stats.sub_filters > 1 || view.variant() == Variant::Rotating {
            "then grows or rotates"
        } else {
            "at most; more raise the false-positive rate"
        };
        lines.push(("sized for", format!("{capacity} items ({beyond})")));
    }
    lines.push((
        "current false-positive estimate",
        format!("{:.6}", stats.expected_fpp),
    ));
    lines.push(("memory", format!("{} bytes", stats.memory_bytes)));
    let written = lines
        .iter()
        .try_for_each(|(name, value)| writeln!(out, "{name}: {value}"))
        .and_then(|()| out.flush());
    output::finish(written)?;
    Ok(ExitCode::SUCCESS)
}

/// Everything a load checks: header and payload checksums, the length, and every
/// parameter against the payload.
pub fn verify(path: &Path) -> Result<ExitCode> {
    let start = Instant::now();
    let filter = store::load(path)?;
    let file_len = std::fs::metadata(path).with_path(path)?.len();
    let mut out = io::stdout().lock();
    output::finish(writeln!(
        out,
        "ok: {}: {} filter, {file_len} bytes, checksums and parameters valid ({:.1} ms)",
        path.display(),
        filter.variant(),
        start.elapsed().as_secs_f64() * 1000.0
    ))?;
    Ok(ExitCode::SUCCESS)
}
