//! export and import: other programs' bytes for a filter.
//!
//! - `guava` (the default): Guava's BloomFilter.writeTo bytes, so a Java service can read a
//!   classic filter made here (BloomFilter.readFrom with Funnels.byteArrayFunnel(),
//!   stringFunnel(UTF_8) for UTF-8 text, or longFunnel()/integerFunnel() for items added
//!   with `--format long`/`int`) and the other way round.
//! - `parquet-sbbf`: a split-block filter as a Parquet file holds a column chunk's bloom
//!   filter, the Thrift BloomFilterHeader then the bitset (the bytes at
//!   `bloom_filter_offset`, `bloom_filter_length` long), so a filter read out of a Parquet
//!   file is checked and merged here, and one built here can be written into a file.
//! - `parquet-sbbf-bitset`: the bitset alone (what some APIs take, e.g. the parquet
//!   crate's `Sbbf::new`).
//! - `redisbloom-scandump`: a RedisBloom filter's `BF.SCANDUMP` pieces joined in order (its
//!   chain header, then every link's bits), as RedisBloom's migration loop gives them from
//!   a RedisBloom server or the module's RedisBloom-layout keys: the `redisbloom` variant.

use std::path::Path;
use std::process::ExitCode;

use bloomery::redisbloom::RedisBloomFilter;
use bloomery::{BloomFilter, SplitBlockBloomFilter};

use crate::error::{CliError, Context, Result};
use crate::items::read_all;
use crate::store::{self, Output};

/// The bytes `export` writes and `import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ForeignFormat {
    /// Guava's BloomFilter.writeTo bytes (classic filters).
    Guava,
    /// Parquet's bloom-filter bytes: the Thrift BloomFilterHeader, then the bitset
    /// (split-block filters).
    ParquetSbbf,
    /// Parquet's split-block bitset alone, without the header (split-block filters).
    ParquetSbbfBitset,
    /// RedisBloom's BF.SCANDUMP pieces joined in order (redisbloom filters).
    RedisbloomScandump,
}

pub fn export(path: &Path, output: &Path, format: ForeignFormat, force: bool) -> Result<ExitCode> {
    let shown = output;
    let output = Output::open(output, force, true)?;
    if let Output::Replace(locked) = &output
        && locked.is(path)
    {
        // It would replace the filter with bytes that are not a filter file.
        return Err(CliError::new(format!(
            "{}: is the filter being exported (to {}); export to another file",
            shown.display(),
            path.display()
        )));
    }
    let filter = store::load(path)?;
    let bytes = match format {
        ForeignFormat::Guava => bloomery::any::to_guava_bytes(filter.as_ref()),
        ForeignFormat::ParquetSbbf => bloomery::any::to_parquet_bytes(filter.as_ref(), true),
        ForeignFormat::ParquetSbbfBitset => bloomery::any::to_parquet_bytes(filter.as_ref(), false),
        ForeignFormat::RedisbloomScandump => bloomery::any::to_redisbloom_scandump(filter.as_ref()),
    }
    .with_path(path)?;
    output.write(|file| file.write_all(&bytes))?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(input: &Path, output: &Path, format: ForeignFormat, force: bool) -> Result<ExitCode> {
    let output = Output::open(output, force, false)?;
    let bytes = read_all(input)?;
    match format {
        ForeignFormat::Guava => output.save(&BloomFilter::from_guava_bytes(&bytes).with_path(input)?),
        ForeignFormat::ParquetSbbf => {
            output.save(&SplitBlockBloomFilter::from_parquet_bytes(&bytes).with_path(input)?)
        }
        ForeignFormat::ParquetSbbfBitset => {
            output.save(&SplitBlockBloomFilter::from_parquet_bitset(&bytes).with_path(input)?)
        }
        ForeignFormat::RedisbloomScandump => {
            output.save(&RedisBloomFilter::from_scandump_stream(&bytes).with_path(input)?)
        }
    }?;
    Ok(ExitCode::SUCCESS)
}
