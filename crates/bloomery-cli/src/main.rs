//! `bloomery`: Bloom filters in files, driven from the shell.
//!
//! Exit status: 0 success (for `check`: every item probably present), 1 `check` found an
//! absent item, 2 an error (one line on stderr, naming the file and the problem; a
//! command line clap refuses gets clap's message, usage included), 3
//! `verify` found the file unsealed (an update in place did not finish: bits and
//! parameters valid, payload checksum stale; `bloomery seal` reseals it).

// `println!` and `eprintln!` panic when their stream is full or closed (`2>/dev/full`),
// which ends the command with a panic's status 101: every line is written with
// `writeln!`, its error handled (output) or dropped (warnings).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod batch;
mod combine;
mod error;
mod foreign;
mod inplace;
mod items;
mod output;
mod progress;
mod query;
mod remote;
mod sigbus;
mod space;
mod store;
mod update;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bloomery::any::{Spec, SpecOption};
use bloomery::format::native::Variant;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::error::CliError;
use crate::foreign::ForeignFormat;
use crate::items::ItemFormat;

#[derive(Parser, Debug)]
#[command(
    name = "bloomery",
    version,
    about = "Bloom filters in files: create, add, check, dedup, merge, export to Guava and Parquet"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    remote: remote::RemoteArgs,
}

/// Items for a command: given as arguments, read from files (one per line), or, when
/// neither is given, read from standard input (with either, standard input is read only
/// as `-i -`).
#[derive(Args, Debug, Clone)]
struct ItemArgs {
    /// Items (each argument, read as --format says; put "--" before items that start
    /// with "-", other than negative numbers).
    #[arg(allow_negative_numbers = true)]
    items: Vec<OsString>,
    /// Read items from FILE, one per line ("-" for standard input); repeatable. Standard
    /// input is read without it only when no item and no FILE is given.
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// How a line or argument becomes the item's bytes.
    #[arg(short = 'f', long, value_enum, default_value_t = ItemFormat::Text)]
    format: ItemFormat,
}

/// Sizing for a new filter. Numbers may be negative (`allow_negative_numbers`), so that
/// `--fpp -0.5` is told its range rather than "unexpected argument '-0'".
#[derive(Args, Debug, Clone)]
struct SizeArgs {
    /// Expected number of distinct items (scalable, scalable-blocked, redisbloom: of the
    /// first sub-filter; rotating: of each generation).
    #[arg(
        short = 'n',
        long = "items",
        default_value_t = 10_000_000,
        allow_negative_numbers = true,
        value_parser = whole_number::<u64>(0, u64::MAX)
    )]
    expected_items: u64,
    /// Target false-positive probability, in (0, 1).
    #[arg(
        short = 'p',
        long = "fpp",
        default_value_t = 0.01,
        allow_negative_numbers = true,
        value_parser = probability
    )]
    fpp: f64,
    /// Filter variant: blocked (fastest), classic (Guava-compatible), counting (remove),
    /// scalable (grows), scalable-blocked (grows, in blocked sub-filters: the Redis
    /// module's default), retouched, allowlisted, rotating (forgets old generations),
    /// split-block (Parquet's split block Bloom filter), or redisbloom (RedisBloom's
    /// scalable filter, bit for bit).
    #[arg(long, default_value = "blocked", value_parser = parse_variant)]
    variant: Variant,
    /// Hash seed (blocked and scalable-blocked filters, and split-block filters with --hash
    /// xxh3).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = whole_number::<u64>(0, u64::MAX))]
    seed: u64,
    /// How a split-block filter hashes items: parquet (XXH64, seed 0: what Parquet,
    /// Arrow and Spark read; sized as they take it, a power of two bytes, up to the 128
    /// MiB they take: past that, sized exactly, with a warning, and not exported) or xxh3
    /// (XXH3-64 with --seed, the blocked filter's hash: faster, above all for long items,
    /// sized exactly, but not readable by Parquet).
    #[arg(long = "hash", value_enum, default_value_t = SplitBlockHash::Parquet)]
    split_block_hash: SplitBlockHash,
    /// Generations kept (rotating filters), 2 to 1024.
    #[arg(long, default_value_t = 2, allow_negative_numbers = true, value_parser = whole_number::<usize>(2, bloomery::rotating::MAX_GENERATIONS as u64))]
    generations: usize,
    /// Refuse items beyond the capacity instead of growing (scalable, scalable-blocked and
    /// redisbloom filters).
    #[arg(long)]
    nonscaling: bool,
}

/// A split-block filter's item hash (`--hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SplitBlockHash {
    /// XXH64, seed 0: Parquet's.
    Parquet,
    /// XXH3-64 with --seed: the blocked filter's.
    Xxh3,
}

/// How big a new filter may be.
#[derive(Args, Debug, Clone)]
struct SpaceArgs {
    /// Refuse a new filter larger than BYTES (checked before anything is allocated), and
    /// (dedup) the growth past it of a growing filter dedup makes (not of an existing
    /// --filter file: refused there). Counted as the filter's memory, its bits (`info`'s
    /// "memory" line), not the file's size, which adds the header.
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true, value_parser = whole_number::<u64>(0, u64::MAX))]
    max_bytes: Option<u64>,
    /// Create the filter even when it is larger than the memory or disk space available
    /// (by default refused before anything is allocated).
    #[arg(long)]
    no_space_check: bool,
}

impl SpaceArgs {
    fn limits(&self) -> space::Limits {
        space::Limits {
            max_bytes: self.max_bytes,
            no_space_check: self.no_space_check,
        }
    }
}

/// The sizing options a user wrote on the command line (not defaulted), by their long
/// names.
fn given_size_options(matches: &ArgMatches) -> Vec<String> {
    given_options::<SizeArgs>(matches)
        .into_iter()
        .map(|(_, flag)| flag)
        .collect()
}

/// The options of `A` that the user wrote on the command line (not defaulted), before or
/// after the subcommand's name: their ids and long names, as `A` defines them.
fn given_options<A: Args>(matches: &ArgMatches) -> Vec<(String, String)> {
    A::augment_args(clap::Command::new("options"))
        .get_arguments()
        .filter(|arg| given_option(matches, arg.get_id().as_str()))
        .filter_map(|arg| Some((arg.get_id().to_string(), format!("--{}", arg.get_long()?))))
        .collect()
}

/// Whether the user wrote option `id` on the command line, before or after the
/// subcommand's name.
fn given_option(matches: &ArgMatches, id: &str) -> bool {
    // `value_source` of an id a command does not have panics in debug builds: asked only
    // of the matches that know it (the subcommand's own options are not the top level's).
    let written = |matches: &ArgMatches| {
        matches.try_contains_id(id).is_ok() && matches.value_source(id) == Some(ValueSource::CommandLine)
    };
    written(matches) || matches.subcommand().is_some_and(|(_, sub)| written(sub))
}

/// The names of the blocked filter's kernels this CPU has, slowest first.
fn kernel_names() -> String {
    let names: Vec<&str> = bloomery::blocked::Kernel::available()
        .into_iter()
        .map(bloomery::blocked::Kernel::name)
        .collect();
    names.join(", ")
}

/// Refuses a variable of the environment that would be ignored or misread:
/// `BLOOMERY_WINDOW_BYTES` that is not a whole number of bytes (`0`, `abc`, `1e3` went
/// unnoticed, the default window used); `BLOOMERY_KERNEL` naming no kernel this CPU has
/// (the fastest one ran, without a word, where a slower one was asked for to measure it);
/// `BLOOMERY_TIMINGS` other than 1 or 0 (any value, even 0, turned the timings on).
fn check_environment() -> Result<(), CliError> {
    let refused = |name: &str, what: String, value: &OsString| {
        Err(CliError::new(format!(
            "{name} must be {what}, got '{}'",
            value.to_string_lossy()
        )))
    };
    if let Some(value) = std::env::var_os("BLOOMERY_WINDOW_BYTES") {
        match value.to_str().and_then(|text| text.parse::<u64>().ok()) {
            Some(bytes) if bytes >= bloomery::file::PAGE => {}
            _ => {
                let what = format!("a number of bytes, at least {} (one page)", bloomery::file::PAGE);
                return refused("BLOOMERY_WINDOW_BYTES", what, &value);
            }
        }
    }
    if let Some(value) = bloomery::blocked::Kernel::misnamed() {
        let what = format!("a kernel this CPU has ({})", kernel_names());
        return refused("BLOOMERY_KERNEL", what, &OsString::from(value));
    }
    if let Some(value) = std::env::var_os(inplace::TIMINGS)
        && value != "1"
        && value != "0"
    {
        let what = "1 (print an update's phases) or 0".to_string();
        return refused(inplace::TIMINGS, what, &value);
    }
    Ok(())
}

/// Refuses an option that would be ignored: a remote option on a file, a sizing option
/// the variant does not use (given options only; the defaults are the variant's own).
fn refuse_ignored_options(
    matches: &ArgMatches,
    remote: bool,
    size: Option<&SizeArgs>,
) -> Result<(), CliError> {
    // Without --redis or --redis-cluster, any of the remote options given is ignored.
    if !remote && let Some((_, flag)) = given_options::<remote::RemoteArgs>(matches).first() {
        return Err(CliError::new(format!(
            "{flag} applies only with --redis or --redis-cluster"
        )));
    }
    if remote {
        refuse_ignored_remote_options(matches)?;
    }
    let Some(size) = size else {
        return Ok(());
    };
    let variant = size.variant;
    if size.expected_items == 0
        && let Some(what) = variant.items_sized()
    {
        return Err(CliError::new(format!(
            "--items must be at least 1 for {variant} filters ({what}), got 0; only the \
             fixed-size variants take 0 (their smallest filter)"
        )));
    }
    let spec = size.spec();
    let uses = |id: &str| match id {
        "seed" => spec.takes(SpecOption::Seed),
        "split_block_hash" => variant == Variant::SplitBlock,
        "generations" => spec.takes(SpecOption::Generations),
        "nonscaling" => spec.takes(SpecOption::Scaling),
        _ => true,
    };
    match given_options::<SizeArgs>(matches)
        .into_iter()
        .find(|(id, _)| !uses(id))
    {
        Some((id, flag)) => Err(CliError::new(format!(
            "{flag} does not apply to {variant} filters ({})",
            match id.as_str() {
                "seed" => "blocked, scalable-blocked, and split-block with --hash xxh3 take it",
                "split_block_hash" => "split-block filters take it",
                "generations" => "rotating filters take it",
                _ => "scalable, redisbloom and scalable-blocked filters take it",
            }
        ))),
        None => Ok(()),
    }
}

/// Refuses, on a sharded filter, an option its command would ignore: shard sizing where no
/// filter is made, replica waits where nothing is written, batches where none are sent,
/// a local disk's space check.
fn refuse_ignored_remote_options(matches: &ArgMatches) -> Result<(), CliError> {
    let command = matches.subcommand_name().unwrap_or("");
    // The commands that use each remote option, and why the others do not.
    let used_by = |id: &str| -> (&[&str], &str) {
        match id {
            "shard_bytes" | "min_shards" => (
                &["create", "dedup"],
                "it sizes a new sharded filter: create and dedup make one",
            ),
            "wait" | "wait_ms" => (
                &["add", "dedup"],
                "it waits for replicas after writes: add and dedup write",
            ),
            "batch_items" => (
                &["add", "check", "dedup"],
                "it sets the batches of add, check and dedup",
            ),
            _ => (
                &["create", "add", "check", "dedup", "info"],
                "a sharded filter on Redis has create, add, check, dedup and info",
            ),
        }
    };
    let given = given_options::<remote::RemoteArgs>(matches);
    for (id, flag) in &given {
        let (commands, why) = used_by(id);
        if !commands.contains(&command) {
            return Err(CliError::new(format!(
                "{flag} does not apply to {command} ({why})"
            )));
        }
    }
    if given.iter().any(|(id, _)| id == "wait_ms") && !given.iter().any(|(id, _)| id == "wait") {
        return Err(CliError::new("--wait-ms applies only with --wait"));
    }
    if given_option(matches, "no_space_check") {
        return Err(CliError::new(
            "--no-space-check does not apply to a sharded filter (its shards take the servers' memory, not this machine's disk)",
        ));
    }
    if given_option(matches, "no_verify") {
        return Err(CliError::new(
            "--no-verify does not apply to a sharded filter (it skips a file's checksum check; the shards are no file)",
        ));
    }
    Ok(())
}

impl SizeArgs {
    /// The library's description of the filter to create.
    fn spec(&self) -> Spec {
        let mut spec = Spec::new(self.variant, self.expected_items, self.fpp);
        spec.seed = self.seed;
        spec.split_block_parquet = self.split_block_hash == SplitBlockHash::Parquet;
        spec.generations = self.generations;
        spec.scalable.scaling = !self.nonscaling;
        spec
    }
}

/// A parser of a whole number in `low..=high` (of type `T`) that says so of anything else:
/// clap's own parsers of unsigned numbers answered `-1` with "invalid digit found in string".
pub(crate) fn whole_number<T: TryFrom<u64>>(
    low: u64,
    high: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync {
    move |text| {
        text.parse::<u64>()
            .ok()
            .filter(|number| (low..=high).contains(number))
            .and_then(|number| T::try_from(number).ok())
            .ok_or_else(|| format!("'{text}' is not a whole number in {low}..={high}"))
    }
}

/// The parser of `--fpp`: a probability strictly between 0 and 1, refused in words that
/// quote what was written. Text that a double cannot hold as such is refused as written,
/// not as what it became: `1e-400` rounds to 0 and `0.99999999999999999` to 1 (refused as
/// "got 0" and "got 1" before); `inf`, `nan` and text that is no number (`0x10`, ` 0.5`,
/// `1%`) in the same words, where Rust's float parser answered "invalid float literal".
fn probability(text: &str) -> Result<f64, String> {
    let refused = |why: &str| format!("'{text}' is not a probability in (0, 1){why}");
    match text.parse::<f64>() {
        Ok(fpp) if fpp > 0.0 && fpp < 1.0 => Ok(fpp),
        Ok(fpp) => {
            // Said to be a rounding only where the number written is in (0, 1): a 0 from a
            // positive number (digits before the exponent not all 0), a 1 from a number
            // below 1 (written 0.9999999999999999...: other digits than 0 and 1, its whole
            // part 0).
            let unsigned = text.strip_prefix('+').unwrap_or(text);
            let mantissa = unsigned.split(['e', 'E']).next().unwrap_or_default();
            let mut digits = mantissa.chars().filter(char::is_ascii_digit);
            let rounded = if fpp == 0.0 {
                !unsigned.starts_with('-') && digits.any(|digit| digit != '0')
            } else {
                fpp == 1.0
                    && mantissa
                        .split('.')
                        .next()
                        .is_some_and(|whole| whole.bytes().all(|digit| digit == b'0'))
                    && digits.any(|digit| digit > '1')
            };
            Err(refused(match (rounded, fpp == 0.0) {
                (true, true) => ": it rounds to 0 as a double",
                (true, false) => ": it rounds to 1 as a double",
                _ => "",
            }))
        }
        Err(_) => Err(refused("")),
    }
}

fn parse_variant(name: &str) -> Result<Variant, String> {
    Variant::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Variant::ALL.iter().map(|variant| variant.name()).collect();
        format!("unknown variant '{name}': one of {}", names.join(", "))
    })
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create an empty filter file.
    Create {
        /// The filter file to write.
        file: PathBuf,
        #[command(flatten)]
        size: SizeArgs,
        #[command(flatten)]
        space: SpaceArgs,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Add items to a filter file, under a lock: in place for classic, blocked and
    /// split-block filters (an interrupted add leaves the file unsealed, every earlier item
    /// present), else by replacing the file atomically.
    Add {
        /// The filter file.
        file: PathBuf,
        #[command(flatten)]
        items: ItemArgs,
    },
    /// Remove items from a counting filter (one occurrence each).
    Remove {
        /// The filter file.
        file: PathBuf,
        #[command(flatten)]
        items: ItemArgs,
    },
    /// Check items: prints "probably present" or "absent" for each; exit status 0 when
    /// all are probably present, 1 otherwise, 2 on an error (a damaged or unreadable
    /// file, a bad item).
    Check {
        /// The filter file (memory-mapped, not read whole).
        file: PathBuf,
        #[command(flatten)]
        items: ItemArgs,
        /// Print nothing; only the exit status tells.
        #[arg(short, long)]
        quiet: bool,
        /// Print only the counts: "N probably present, M absent" (measuring a
        /// false-positive rate over many fresh items).
        #[arg(long, conflicts_with = "quiet")]
        count: bool,
        /// Skip the payload checksum (classic, blocked and split-block filters, answered
        /// from the mapped file; the other variants are built in memory, which checks it
        /// all the same). By default it is checked before the first answer (reading the
        /// whole file once), so a damaged file is an error (status 2) rather than silent
        /// false negatives.
        #[arg(long)]
        no_verify: bool,
    },
    /// Print each input line the first time it is seen (standard input, or --input files).
    Dedup {
        /// Keep the memory of seen lines in FILE across runs (created if missing; the
        /// sizing options apply only then).
        #[arg(long, value_name = "FILE")]
        filter: Option<PathBuf>,
        #[command(flatten)]
        size: SizeArgs,
        #[command(flatten)]
        space: SpaceArgs,
        /// Read lines from FILE ("-" for standard input); repeatable.
        #[arg(short = 'i', long = "input", value_name = "FILE")]
        inputs: Vec<PathBuf>,
        /// How a line becomes the item's bytes (lines are printed as read).
        #[arg(short = 'f', long, value_enum, default_value_t = ItemFormat::Text)]
        format: ItemFormat,
    },
    /// Show a filter file's variant, parameters, memory, fill and estimates. A damaged
    /// payload is shown as "payload checksum: DAMAGED" for classic, blocked and split-block
    /// filters (read from the mapped file); for the other variants (built in memory) it is
    /// an error, status 2.
    Info {
        /// The filter file.
        file: PathBuf,
    },
    /// Write the union of compatible filter files to OUTPUT.
    Merge {
        /// The file to write.
        output: PathBuf,
        /// The filters to merge (same variant and shape).
        #[arg(required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        /// Replace OUTPUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Write the intersection of compatible filter files to OUTPUT.
    Intersect {
        /// The file to write.
        output: PathBuf,
        /// The filters to intersect (same variant and shape).
        #[arg(required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        /// Replace OUTPUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Write a classic filter as Guava's BloomFilter.writeTo bytes, a split-block filter
    /// as Parquet's bloom-filter bytes (--format parquet-sbbf), or a redisbloom filter as
    /// its BF.SCANDUMP pieces joined (--format redisbloom-scandump).
    Export {
        /// The filter file (classic for guava, split-block for parquet-sbbf, redisbloom
        /// for redisbloom-scandump).
        file: PathBuf,
        /// Where to write the bytes ("-" for standard output).
        output: PathBuf,
        /// The bytes to write.
        #[arg(long, value_enum, default_value_t = ForeignFormat::Guava)]
        format: ForeignFormat,
        /// Replace OUTPUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Make a filter file from Guava's BloomFilter.writeTo bytes, Parquet's bloom-filter
    /// bytes (--format parquet-sbbf), or a RedisBloom filter's BF.SCANDUMP pieces joined
    /// in order (--format redisbloom-scandump); "-" for standard input.
    Import {
        /// The Guava, Parquet or RedisBloom bytes.
        input: PathBuf,
        /// The filter file to write.
        output: PathBuf,
        /// The bytes to read.
        #[arg(long, value_enum, default_value_t = ForeignFormat::Guava)]
        format: ForeignFormat,
        /// Replace OUTPUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Check a filter file whole: header and payload checksums, length, and every
    /// parameter (what a load for update checks). Exit status 0 when valid, 3 when the
    /// file is unsealed (bits valid, payload checksum stale; see `seal`), 2 on an error
    /// (damaged, unreadable, not a filter file).
    Verify {
        /// The filter file.
        file: PathBuf,
    },
    /// Seal a file an interrupted update in place left unsealed: write its payload
    /// checksum (its bits are valid). A sealed file is checked and left as it is (read
    /// only: no write permission or disk space needed).
    Seal {
        /// The filter file.
        file: PathBuf,
    },
}

/// Ignores SIGXFSZ, which a write past the limit on file size (`ulimit -f`) raises and
/// whose default kills the process (status 153, no message, a temporary file left
/// beside the target): ignored, the write fails with EFBIG ("File too large") instead,
/// and the error paths every other failed write takes say so on one line, remove the
/// temporary file and leave the old file as it was.
fn ignore_file_size_signal() {
    // SAFETY: called first thing in `main`, before any other thread exists; SIG_IGN
    // installs no handler.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Ends with clap's answer: a usage error on standard error (status 2), or the help or
/// version asked for on standard output (status 0). An error writing that output (`>
/// /dev/full`) is the command's error, as for every other command's output: clap's own
/// exit dropped it and ended with status 0.
fn clap_answer(answer: &clap::Error) -> ExitCode {
    let printed = answer.print().and_then(|()| std::io::stdout().flush());
    if !answer.use_stderr()
        && let Err(error) = output::finish(printed)
    {
        let _ = writeln!(std::io::stderr(), "bloomery: {error}");
        return ExitCode::from(2);
    }
    ExitCode::from(u8::try_from(answer.exit_code()).unwrap_or(2))
}

fn main() -> ExitCode {
    ignore_file_size_signal();
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return clap_answer(&error),
    };
    let remote = cli.remote.is_remote();
    let size = match &cli.command {
        Command::Create { size, .. } | Command::Dedup { size, .. } => Some(size),
        _ => None,
    };
    if let Err(error) = refuse_ignored_options(&matches, remote, size).and_then(|()| check_environment()) {
        let _ = writeln!(std::io::stderr(), "bloomery: {error}");
        return ExitCode::from(2);
    }
    if let Some(result) = remote::dispatch(&cli.remote, &cli.command, &matches) {
        return remote::report(result);
    }
    let result = match cli.command {
        Command::Create {
            file,
            size,
            space,
            force,
        } => update::create(&file, &size, space.limits(), force),
        Command::Add { file, items } => update::add(&file, &items),
        Command::Remove { file, items } => update::remove(&file, &items),
        Command::Check {
            file,
            items,
            quiet,
            count,
            no_verify,
        } => query::check(&file, &items, quiet, count, !no_verify),
        Command::Dedup {
            filter,
            size,
            space,
            inputs,
            format,
        } => {
            // With the space options: all of them apply only to a new filter.
            let mut given = matches
                .subcommand_matches("dedup")
                .map(given_size_options)
                .unwrap_or_default();
            given.extend(
                given_options::<SpaceArgs>(&matches)
                    .into_iter()
                    .map(|(_, flag)| flag),
            );
            update::dedup(filter.as_deref(), &size, &given, space.limits(), &inputs, format)
        }
        Command::Info { file } => query::info(&file),
        Command::Merge {
            output,
            inputs,
            force,
        } => combine::combine(&output, &inputs, true, force),
        Command::Intersect {
            output,
            inputs,
            force,
        } => combine::combine(&output, &inputs, false, force),
        Command::Export {
            file,
            output,
            format,
            force,
        } => foreign::export(&file, &output, format, force),
        Command::Import {
            input,
            output,
            format,
            force,
        } => foreign::import(&input, &output, format, force),
        Command::Verify { file } => query::verify(&file),
        Command::Seal { file } => update::seal(&file),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            // Not eprintln!, which panics when stderr is full.
            let _ = writeln!(std::io::stderr(), "bloomery: {error}");
            ExitCode::from(2)
        }
    }
}
