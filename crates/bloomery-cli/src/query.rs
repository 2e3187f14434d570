//! Commands that only read a filter: check and info through a read-only memory map, and
//! verify, which checks what a load for update checks. `check` reads and decodes items on
//! one thread and looks them up in batches (hashed ahead, prefetched) on another, printing
//! the answers in input order.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use bloomery::format::native::Variant;

use crate::ItemArgs;
use crate::batch::{self, Keep, for_each_batch};
use crate::error::{Context, Result};
use crate::output;
use crate::store::{self, Mapped, Payload, Reading};

pub fn check(path: &Path, items: &ItemArgs, quiet: bool, counts: bool, verify: bool) -> Result<ExitCode> {
    let mapped = Mapped::open(path)?;
    if verify {
        mapped.note(mapped.verify_payload()?);
    } else if mapped.header().unsealed {
        mapped.note(Payload::Unsealed);
    }
    let view = mapped.view()?;
    // Lookups map the pages they read (file pages the kernel may reclaim, not a copy): on
    // a file larger than memory, the resident set grows with the pages looked at. Only
    // updates keep to a window (inplace.rs).
    let mut count = 0u64;
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut all_present = true;
    let mut write_error = None;
    let mut results = Vec::new();
    let mut present = 0u64;
    let each_line = !quiet && !counts;
    let keep = Keep {
        items: true,
        raws: each_line,
        hasher: None,
    };
    for_each_batch(
        &items.items,
        &items.inputs,
        items.format,
        keep,
        batch::BATCH,
        |batch| {
            results.clear();
            results.resize(batch.len(), false);
            view.contains_batch(&batch.items(), &mut results);
            let found = results.iter().filter(|&&present| present).count() as u64;
            all_present &= found == batch.len() as u64;
            present += found;
            count += batch.len() as u64;
            // After the reader left (`| head`), the lookups go on quietly to the end of the
            // input: the exit status says whether every item was present, not only the
            // printed ones.
            if each_line && write_error.is_none() {
                for (index, &present) in results.iter().enumerate() {
                    let label: &[u8] = if present {
                        b"probably present\t"
                    } else {
                        b"absent\t"
                    };
                    if let Err(error) = out
                        .write_all(label)
                        .and_then(|()| out.write_all(batch.raw(index)))
                        .and_then(|()| out.write_all(b"\n"))
                    {
                        let reader_left = error.kind() == io::ErrorKind::BrokenPipe;
                        write_error = Some(error);
                        return Ok(reader_left);
                    }
                }
                // The input has no more for now (`tail -f log | bloomery check f`): the
                // answers so far go out rather than wait for the next batch.
                if batch.input_waits
                    && let Err(error) = out.flush()
                {
                    let reader_left = error.kind() == io::ErrorKind::BrokenPipe;
                    write_error = Some(error);
                    return Ok(reader_left);
                }
            }
            Ok(true)
        },
    )?;
    if count == 0 {
        return Err(crate::update::no_items(path));
    }
    if counts
        && write_error.is_none()
        && let Err(error) = writeln!(out, "{present} probably present, {} absent", count - present)
    {
        write_error = Some(error);
    }
    output::finish(write_error.map_or_else(|| out.flush(), Err))?;
    Ok(if all_present {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub fn info(path: &Path) -> Result<ExitCode> {
    let mapped = Mapped::open(path)?;
    let checksum = match mapped.verify_payload().map(|payload| mapped.reading(payload)) {
        Ok(Reading::Sealed) => "ok".to_owned(),
        Ok(Reading::Unfinished) => UNSEALED.to_owned(),
        Ok(Reading::AtWork) => AT_WORK.to_owned(),
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

/// How `info` and `verify` describe an unsealed file.
const UNSEALED: &str = "unsealed (bits valid, checksum stale; run `bloomery seal`)";
/// How `info` and `verify` describe an unsealed file whose writer is at work.
const AT_WORK: &str = "being updated in place by another writer (bits valid, checksum stale until it seals)";

/// The exit status of `verify` for an unsealed file: its bits and parameters are valid,
/// its payload checksum stale (an update in place did not finish).
pub const UNSEALED_STATUS: u8 = 3;

/// Everything a load checks: header and payload checksums, the length, and every
/// parameter against the payload. The classic, blocked and split-block variants are
/// checked from the mapped file (the payload read once, never held), the others loaded.
/// An unsealed file has its header and parameters checked, and exits with status 3.
pub fn verify(path: &Path) -> Result<ExitCode> {
    let start = Instant::now();
    let mapped = Mapped::open(path)?;
    let variant = mapped.header().variant;
    let (reading, variant) = if bloomery::in_place::updates_in_place(variant) {
        // Every parameter against the payload (no payload byte read).
        mapped.view()?;
        (mapped.reading(mapped.verify_payload()?), variant)
    } else {
        drop(mapped);
        (Reading::Sealed, store::load(path)?.variant())
    };
    let file_len = std::fs::metadata(path).with_path(path)?.len();
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    let mut out = io::stdout().lock();
    let unsealed = |state: &str| {
        (
            format!(
                "{state}: {}: {variant} filter, {file_len} bytes, header and parameters valid ({elapsed:.1} ms)",
                path.display()
            ),
            ExitCode::from(UNSEALED_STATUS),
        )
    };
    let (line, status) = match reading {
        Reading::Sealed => (
            format!(
                "ok: {}: {variant} filter, {file_len} bytes, checksums and parameters valid ({elapsed:.1} ms)",
                path.display()
            ),
            ExitCode::SUCCESS,
        ),
        Reading::Unfinished => unsealed(UNSEALED),
        Reading::AtWork => unsealed(AT_WORK),
    };
    output::finish(writeln!(out, "{line}"))?;
    Ok(status)
}
