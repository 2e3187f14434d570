//! Commands that only read a filter, through a read-only memory map: check, info, verify.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use bloomery::format::native::Variant;

use crate::ItemArgs;
use crate::error::{Context, Result};
use crate::items::for_each_item;
use crate::store::{Mapped, View};

pub fn check(path: &Path, items: &ItemArgs, quiet: bool) -> Result<ExitCode> {
    let mapped = Mapped::open(path)?;
    let view = mapped.view()?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut all_present = true;
    let mut write_error = None;
    for_each_item(&items.items, &items.inputs, |item| {
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
                .and_then(|()| out.write_all(item))
                .and_then(|()| out.write_all(b"\n"))
            {
                write_error = Some(error);
                return false;
            }
        }
        true
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
    println!("file: {}", path.display());
    println!("file size: {} bytes", mapped.file_len());
    match &view {
        View::Classic(filter) => {
            println!("variant: classic (Guava-compatible, murmur3_128 MITZ_64)");
            println!("bits: {}", filter.num_bits());
            println!("hash functions: {}", filter.num_hashes());
            print_fill(filter.bit_count(), filter.num_bits());
            println!("estimated items: {}", filter.approximate_element_count());
            println!("current false-positive estimate: {:.6}", filter.expected_fpp());
        }
        View::Blocked(filter) => {
            println!("variant: blocked (512-bit blocks, 8 bits per item)");
            println!("bits: {}", filter.num_bits());
            println!("blocks: {}", filter.blocks().len());
            let bit_count: u64 = filter.blocks().iter().map(block_bit_count).sum();
            print_fill(bit_count, filter.num_bits());
            println!("estimated items: {}", filter.estimated_len());
            println!("current false-positive estimate: {:.6}", filter.expected_fpp());
        }
    }
    println!("memory: {} bytes of bits", header.payload_len);
    debug_assert!(matches!(header.variant, Variant::Classic | Variant::Blocked));
    Ok(ExitCode::SUCCESS)
}

fn block_bit_count(block: &bloomery::blocked::Block) -> u64 {
    block
        .words()
        .iter()
        .map(|word| u64::from(word.count_ones()))
        .sum()
}

fn print_fill(bit_count: u64, num_bits: u64) {
    println!(
        "bits set: {bit_count} (fill ratio {:.4})",
        bit_count as f64 / num_bits as f64
    );
}

pub fn verify(path: &Path) -> Result<ExitCode> {
    let start = Instant::now();
    let mapped = Mapped::open(path)?;
    mapped.verify()?;
    println!(
        "ok: {}: {} bytes, header and payload checksums match ({:.1} ms)",
        path.display(),
        mapped.file_len(),
        start.elapsed().as_secs_f64() * 1000.0
    );
    Ok(ExitCode::SUCCESS)
}
