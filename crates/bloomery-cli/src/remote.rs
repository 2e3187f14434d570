//! `create`, `add`, `check`, `dedup` and `info` on a sharded filter in Redis or Redis
//! Cluster (docs/sharding.md) instead of a file: `--redis redis://HOST:PORT` or
//! `--redis-cluster HOST:PORT[,HOST:PORT...]`, and the FILE argument (dedup's `--filter`)
//! is the filter's name. Items are hashed here and sent in batches, 8 bytes an item,
//! through the `bloomery-cluster` client.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Duration;

use bloomery::format::native::Variant;
use bloomery::sharding::ShardPlan;
use bloomery_cluster::{Connection, ShardedFilter, Target};
use clap::{ArgMatches, Args};

use crate::batch::BATCH_BYTES;
use crate::error::{CliError, Context, Result, items_before_added};
use crate::items::{ItemFormat, for_each_item};
use crate::progress::Progress;
use crate::{Command, ItemArgs, SizeArgs, SpaceArgs, given_size_options};

/// Where a sharded filter lives, and how to write to it. Global options (clap lists them
/// under every command), under a heading that names the commands taking them: the others
/// refuse them by name.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Sharded filter on Redis (create, add, check, dedup and info only)")]
pub struct RemoteArgs {
    /// Use the sharded filter NAME on this Redis server (redis://HOST:PORT) instead of a
    /// file: FILE (for dedup, --filter) is the filter's name. create, add, check, dedup
    /// and info only.
    #[arg(long, global = true, value_name = "URL", conflicts_with = "redis_cluster")]
    redis: Option<String>,
    /// As --redis, on a Redis Cluster reached through any of these nodes.
    #[arg(long, global = true, value_name = "HOST:PORT[,HOST:PORT...]")]
    redis_cluster: Option<String>,
    /// Largest shard a new sharded filter may have, in bytes (at least 64, one block; at
    /// most the module's bloomery.max-filter-memory, 1 GiB by default); smaller shards
    /// move between nodes faster.
    #[arg(
        long,
        global = true,
        value_name = "BYTES",
        default_value_t = 64 << 20,
        allow_negative_numbers = true,
        value_parser = crate::whole_number::<u64>(64, u64::MAX)
    )]
    shard_bytes: u64,
    /// Fewest shards a new sharded filter has (spreads even a small filter over nodes),
    /// 1 to 1048576.
    #[arg(
        long,
        global = true,
        value_name = "COUNT",
        default_value_t = 64,
        allow_negative_numbers = true,
        value_parser = crate::whole_number::<u32>(1, u64::from(bloomery::sharding::MAX_SHARDS))
    )]
    min_shards: u32,
    /// After every batch of adds, wait until REPLICAS replicas of each primary written to
    /// hold it (Redis WAIT; an error after --wait-ms if fewer do). At most 2^63 - 1, as
    /// WAIT takes.
    #[arg(
        long,
        global = true,
        value_name = "REPLICAS",
        allow_negative_numbers = true,
        value_parser = crate::whole_number::<usize>(0, MAX_WAIT_REPLICAS)
    )]
    wait: Option<usize>,
    /// How long --wait waits for the replicas, in milliseconds (0: as long as it takes,
    /// as Redis's WAIT takes 0; at most 10^15, well within what WAIT takes).
    #[arg(
        long,
        global = true,
        value_name = "MS",
        default_value_t = 10_000,
        allow_negative_numbers = true,
        value_parser = crate::whole_number::<u64>(0, MAX_WAIT_MS)
    )]
    wait_ms: u64,
    /// How long to keep reconnecting and resending a batch after a failure worth
    /// retrying (a failover, slots moving, a lost connection), in seconds: no new try
    /// starts after it, but a try under way is not cut short: it ends when a reply it
    /// waits for is 10 s late, so a stalled server holds a call past this time by the
    /// last try's waits (a reconnect's, then the batch's, up to 10 s each).
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 30,
        allow_negative_numbers = true,
        value_parser = crate::whole_number::<u64>(0, u64::MAX)
    )]
    retry_seconds: u64,
    /// Items sent per batch (one command per shard per batch), 1 to 16777216.
    #[arg(
        long,
        global = true,
        value_name = "ITEMS",
        default_value_t = 65_536,
        allow_negative_numbers = true,
        value_parser = crate::whole_number::<usize>(1, MAX_BATCH_ITEMS)
    )]
    batch_items: usize,
}

/// The most items a batch may have (`--batch-items`): its hashes and lines are held in
/// memory, allocated for at the start (a larger value aborted on the allocation).
const MAX_BATCH_ITEMS: u64 = 1 << 24;

/// The most replicas `--wait` asks for: Redis's `WAIT` reads them as a signed 64-bit count.
const MAX_WAIT_REPLICAS: u64 = i64::MAX as u64;

/// The longest `--wait-ms`: Redis's `WAIT` refuses a timeout that, added to the time now in
/// milliseconds, passes 2^63 - 1 ("timeout is out of range"), an error that came after the
/// batch was written.
const MAX_WAIT_MS: u64 = 1_000_000_000_000_000;

impl RemoteArgs {
    /// Whether the run is on a Redis server or cluster (`--redis`, `--redis-cluster`).
    pub fn is_remote(&self) -> bool {
        self.redis.is_some() || self.redis_cluster.is_some()
    }

    fn target(&self) -> Option<Result<Target>> {
        let text = match (&self.redis, &self.redis_cluster) {
            (Some(url), _) => url.clone(),
            (None, Some(nodes)) => format!("redis+cluster://{nodes}"),
            (None, None) => return None,
        };
        Some(
            text.parse()
                .map_err(|error: bloomery_cluster::Error| CliError::new(error.to_string())),
        )
    }

    fn connect(&self, target: &Target) -> Result<Connection> {
        let connection = Connection::open_retrying(target, Duration::from_secs(self.retry_seconds))
            .map_err(remote_error)?;
        if matches!(target, Target::Single(_)) && !connection.notices_restarts() {
            let _ = writeln!(
                io::stderr(),
                "bloomery: note: {}: the server's run_id cannot be read (INFO refused?), so a restart during the run, which may lose acknowledged writes, would go unnoticed",
                target.shown()
            );
        }
        Ok(connection)
    }
}

/// The exit status for `result`, printing an error as `main` does.
pub fn report(result: Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|error| {
        let _ = writeln!(io::stderr(), "bloomery: {error}");
        ExitCode::from(2)
    })
}

fn remote_error(error: bloomery_cluster::Error) -> CliError {
    CliError::new(error.to_string())
}

/// Runs `command` against the sharded filter when --redis or --redis-cluster is given;
/// `None` otherwise (the command works on files).
pub fn dispatch(remote: &RemoteArgs, command: &Command, matches: &ArgMatches) -> Option<Result<ExitCode>> {
    let target = match remote.target()? {
        Ok(target) => target,
        Err(error) => return Some(Err(error)),
    };
    Some(run(remote, &target, command, matches))
}

fn run(remote: &RemoteArgs, target: &Target, command: &Command, matches: &ArgMatches) -> Result<ExitCode> {
    let name_of = |file: &std::path::Path| -> Result<String> {
        file.to_str()
            .map(str::to_owned)
            .ok_or_else(|| CliError::new(format!("{}: a filter name must be UTF-8", file.display())))
    };
    match command {
        Command::Create {
            file,
            size,
            space,
            force,
        } => {
            if *force {
                return Err(CliError::new(
                    "--force does not apply to a sharded filter: delete its keys first (the name, and each shard's key: `bloomery info` lists them)",
                ));
            }
            let plan = plan_for(remote, size, space)?;
            let name = name_of(file)?;
            let (mut sharded, created) =
                ShardedFilter::create(remote.connect(target)?, &name, plan).map_err(remote_error)?;
            if !created {
                let _ = writeln!(
                    io::stderr(),
                    "bloomery: {name}: exists already with these parameters; left as it is"
                );
                let missing = sharded.missing_shards().map_err(remote_error)?;
                if let Some(first) = missing.first() {
                    let _ = writeln!(
                        io::stderr(),
                        "bloomery: warning: {name}: {} of its {} shards are missing (first {first}): lost with their items (deleted, evicted, flushed, or a restart without persistence); every command on them fails until the filter is made anew",
                        missing.len(),
                        sharded.plan().shards()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Add { file, items } => add(remote, target, &name_of(file)?, items),
        Command::Check {
            file,
            items,
            quiet,
            count,
            ..
        } => check(remote, target, &name_of(file)?, items, *quiet, *count),
        Command::Dedup {
            filter,
            size,
            space,
            inputs,
            format,
        } => {
            let Some(file) = filter else {
                return Err(CliError::new(
                    "dedup with --redis/--redis-cluster needs --filter NAME: the sharded filter that remembers the lines",
                ));
            };
            let given = matches
                .subcommand_matches("dedup")
                .map(given_size_options)
                .unwrap_or_default();
            let name = name_of(file)?;
            let mut connection = Some(remote.connect(target)?);
            let opened = ShardedFilter::open(connection.take().expect("connected"), &name);
            let mut sharded = match opened {
                Ok(sharded) if given.is_empty() => {
                    // Shard sizing or a size cap without --items sizes nothing here: the
                    // filter exists (--max-bytes was ignored without a word).
                    if let Some((_, flag)) = crate::given_options::<RemoteArgs>(matches)
                        .into_iter()
                        .chain(crate::given_options::<SpaceArgs>(matches))
                        .find(|(id, _)| ["shard_bytes", "min_shards", "max_bytes"].contains(&id.as_str()))
                    {
                        return Err(CliError::new(format!(
                            "{flag} applies when dedup makes the filter, and '{name}' exists ({})",
                            sharded.plan()
                        )));
                    }
                    sharded
                }
                Ok(sharded) => {
                    // Sizing options given for a filter that exists: they must agree.
                    let plan = plan_for(remote, size, space)?;
                    ShardedFilter::create(sharded.into_connection(), &name, plan)
                        .map_err(remote_error)?
                        .0
                }
                Err(bloomery_cluster::Error::NotFound(_)) => {
                    let plan = plan_for(remote, size, space)?;
                    ShardedFilter::create(remote.connect(target)?, &name, plan)
                        .map_err(remote_error)?
                        .0
                }
                Err(error) => return Err(remote_error(error)),
            };
            set_wait(remote, &mut sharded);
            dedup(remote, &mut sharded, inputs, *format)
        }
        Command::Info { file } => info(remote, target, &name_of(file)?),
        _ => Err(CliError::new(
            "--redis and --redis-cluster work with create, add, check, dedup and info",
        )),
    }
}

/// The plan for new filters: blocked shards for --items at --fpp with --seed.
fn plan_for(remote: &RemoteArgs, size: &SizeArgs, space: &SpaceArgs) -> Result<ShardPlan> {
    if size.variant != Variant::Blocked {
        return Err(CliError::new(format!(
            "a sharded filter is made of blocked filters; --variant {} does not apply",
            size.variant
        )));
    }
    if size.expected_items == 0 {
        // The library's refusal named its own parameter, expected_items.
        return Err(CliError::new(
            "--items must be at least 1 for a sharded filter, got 0",
        ));
    }
    let plan = ShardPlan::new(
        size.expected_items,
        size.fpp,
        remote.shard_bytes,
        remote.min_shards,
    )
    .map_err(|error| CliError::new(error.to_string()))?
    .with_seed(size.seed);
    if let Some(max) = space.max_bytes
        && plan.total_bytes() > max
    {
        return Err(CliError::new(format!(
            "the sharded filter would take {} bytes ({} shards of {}), over --max-bytes {max}",
            plan.total_bytes(),
            plan.shards(),
            plan.shard_bytes()
        )));
    }
    Ok(plan)
}

fn set_wait(remote: &RemoteArgs, sharded: &mut ShardedFilter) {
    if let Some(replicas) = remote.wait {
        sharded.set_wait(replicas, Duration::from_millis(remote.wait_ms));
    }
}

fn open(remote: &RemoteArgs, target: &Target, name: &str) -> Result<ShardedFilter> {
    let mut sharded = ShardedFilter::open(remote.connect(target)?, name).map_err(remote_error)?;
    set_wait(remote, &mut sharded);
    Ok(sharded)
}

fn add(remote: &RemoteArgs, target: &Target, name: &str, items: &ItemArgs) -> Result<ExitCode> {
    let mut sharded = open(remote, target, name)?;
    let mut hashes = Vec::with_capacity(remote.batch_items);
    let mut count = 0u64;
    let mut progress = Progress::new("adding");
    let mut sent = Ok(());
    // Items in batches that were answered: those before a failed batch are in the filter.
    let mut added = 0u64;
    let read = for_each_item(&items.items, &items.inputs, items.format, |item, _| {
        hashes.push(sharded.hash(item));
        count += 1;
        progress.tick_by(1);
        if hashes.len() == remote.batch_items {
            sent = sharded.add_hashes(&hashes).map(drop);
            if sent.is_ok() {
                added += hashes.len() as u64;
            }
            hashes.clear();
        }
        Ok(sent.is_ok())
    });
    // After a restart or a lost shard, the items of the answered batches were added but may
    // be gone: the error says so rather than that they were added.
    let failed_batch = |error: bloomery_cluster::Error| {
        let lost = error.may_have_lost_acknowledged();
        match added {
            n if lost && n > 0 => Err(CliError::new(format!(
                "{error}; the {n} items before it were acknowledged, but may have been lost with it"
            ))),
            _ => items_before_added(Err(remote_error(error)), added),
        }
    };
    sent.or_else(failed_batch)?;
    // The items read before a bad one are added too, as a file's are.
    if !hashes.is_empty() {
        sharded.add_hashes(&hashes).map(drop).or_else(failed_batch)?;
    }
    progress.finish();
    items_before_added(read, count)?;
    if count == 0 {
        return Err(CliError::new(format!(
            "{name}: no items given (as arguments, with --input, or on standard input)"
        )));
    }
    warn_if_overfull(name, &mut sharded);
    Ok(ExitCode::SUCCESS)
}

/// Bits of shards the overfull check reads at most (once the shard count allows): items
/// are routed to every shard alike, so 64 MiB of shards (about 5 · 10^7 items at 1%)
/// estimate the whole filter's items within a fraction of a percent.
const FILL_SAMPLE_BYTES: u64 = 64 << 20;

/// The shards the overfull check reads: [`FILL_SAMPLE_BYTES`] of them (at least one),
/// all of a smaller filter's.
fn fill_sample(plan: &ShardPlan) -> u32 {
    FILL_SAMPLE_BYTES
        .div_ceil(plan.shard_bytes())
        .min(u64::from(plan.shards())) as u32
}

/// Warns, as `add` to a file does, when the filter holds more items than it was sized for,
/// from the `BF.CARD` of its first shards (one pass over each one's bits on its node:
/// [`FILL_SAMPLE_BYTES`] of them, all of a smaller filter's). Said after the items are
/// added; a failure to ask is not an error.
fn warn_if_overfull(name: &str, sharded: &mut ShardedFilter) {
    let plan = *sharded.plan();
    let Ok(info) = sharded.info_of_first(fill_sample(&plan)) else {
        return;
    };
    let capacity = plan.expected_items();
    let saturated = info.saturated_shards();
    if saturated == 0 && !crate::update::past_capacity(info.estimated_items, capacity) {
        return;
    }
    let held = match saturated {
        0 => format!("about {} items", info.estimated_items),
        _ => format!(
            "more than it can count: {saturated} of the {} shards read have every bit set",
            info.shard_items.len()
        ),
    };
    crate::update::say_overfull(
        &format!("sharded filter '{name}'"),
        &held,
        capacity,
        info.fpp_estimate(),
        "make a bigger sharded filter and add the items again",
    );
}

/// Items of one batch: their hashes, and the lines as read (to print).
struct Batch {
    hashes: Vec<u64>,
    lines: Vec<u8>,
    ends: Vec<usize>,
}

impl Batch {
    fn new(capacity: usize) -> Self {
        Self {
            hashes: Vec::with_capacity(capacity),
            lines: Vec::new(),
            ends: Vec::with_capacity(capacity),
        }
    }

    fn push(&mut self, hash: u64, line: &[u8]) {
        self.hashes.push(hash);
        self.lines.extend_from_slice(line);
        self.ends.push(self.lines.len());
    }

    fn lines(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.lines[start..end])
    }

    fn clear(&mut self) {
        self.hashes.clear();
        self.lines.clear();
        self.ends.clear();
    }

    /// Whether the batch is due: `items` items, or lines of [`BATCH_BYTES`] (lines may be
    /// up to 64 MiB each: by count alone, a batch of them held gigabytes, and a failed
    /// allocation aborted the tool).
    fn is_full(&self, items: usize) -> bool {
        self.hashes.len() >= items || self.lines.len() >= BATCH_BYTES
    }
}

fn check(
    remote: &RemoteArgs,
    target: &Target,
    name: &str,
    items: &ItemArgs,
    quiet: bool,
    counts: bool,
) -> Result<ExitCode> {
    let mut sharded = open(remote, target, name)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut batch = Batch::new(remote.batch_items);
    let mut count = 0u64;
    let mut found = 0u64;
    // After the reader left (`| head`), the lookups go on quietly to the end of the input,
    // as for a file: the exit status says whether every item was present, not only the
    // printed ones (it said 0 for an input whose absent item came after the reader left).
    let mut printing = !quiet && !counts;
    let mut flush = |batch: &mut Batch, sharded: &mut ShardedFilter| -> Result<()> {
        let present = sharded.contains_hashes(&batch.hashes).map_err(remote_error)?;
        found += present.iter().filter(|&&present| present).count() as u64;
        if printing {
            for (line, present) in batch.lines().zip(present) {
                let label: &[u8] = if present {
                    b"probably present\t"
                } else {
                    b"absent\t"
                };
                let written = out
                    .write_all(label)
                    .and_then(|()| out.write_all(line))
                    .and_then(|()| out.write_all(b"\n"));
                if let Err(error) = written {
                    printing = stop_on(error)?;
                    break;
                }
            }
        }
        batch.clear();
        Ok(())
    };
    let mut looked_up = Ok(());
    let read = for_each_item(&items.items, &items.inputs, items.format, |item, raw| {
        batch.push(sharded.hash(item), raw);
        count += 1;
        if batch.is_full(remote.batch_items) {
            looked_up = flush(&mut batch, &mut sharded);
        }
        Ok(looked_up.is_ok())
    });
    looked_up?;
    // The items read before a bad one are answered too.
    if !batch.hashes.is_empty() {
        flush(&mut batch, &mut sharded)?;
    }
    read?;
    if printing && let Err(error) = out.flush() {
        stop_on(error)?;
    }
    if count == 0 {
        return Err(CliError::new(format!(
            "{name}: no items given (as arguments, with --input, or on standard input)"
        )));
    }
    // As for a file: the counts only (measuring a false-positive rate over fresh items).
    if counts {
        let written =
            writeln!(out, "{found} probably present, {} absent", count - found).and_then(|()| out.flush());
        if let Err(error) = written {
            stop_on(error)?;
        }
    }
    Ok(if found == count {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A write error on standard output: the reader went away (stop quietly), or a real error.
fn stop_on(error: io::Error) -> Result<bool> {
    if error.kind() == io::ErrorKind::BrokenPipe {
        Ok(false)
    } else {
        Err(error).with_path(std::path::Path::new("<stdout>"))
    }
}

fn dedup(
    remote: &RemoteArgs,
    sharded: &mut ShardedFilter,
    inputs: &[std::path::PathBuf],
    format: ItemFormat,
) -> Result<ExitCode> {
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut batch = Batch::new(remote.batch_items);
    let mut progress = Progress::new("deduplicating");
    // Lines are printed once their batch is added, in input order: the first time an item
    // is seen, as the filter answers (a repeat within one batch is new only at its first
    // place, which the module reports). Added first, then printed: the add's answer is
    // what makes a line new once across every process deduplicating into the filter at
    // once, so a reader gone, or a full device, loses the lines of the batch being printed
    // (each batch is written to standard output before the next is added), and a reader
    // gone also the lines it left unread in its pipe's buffer (written, so counted printed).
    let mut lost = 0_usize;
    let mut flush = |batch: &mut Batch, sharded: &mut ShardedFilter| -> Result<bool> {
        // A batch that failed may have been added in part (the shards that answered before
        // the error, or all of it when only `--wait` failed): its lines are not printed,
        // and a later run takes them as seen.
        let (new, doubted) = sharded.add_hashes_doubted(&batch.hashes).map_err(|error| {
            CliError::new(format!(
                "{error}; the {} lines of the batch under way were not printed, and may have been added",
                batch.hashes.len()
            ))
        })?;
        // A line answered "old" by a shard's command sent again after its first send's
        // reply was lost may be a first occurrence: not printed, and counted, so that the
        // run says so and fails rather than lose it silently.
        lost += doubted.iter().filter(|doubted| **doubted).count();
        for (line, new) in batch.lines().zip(new) {
            if new && let Err(error) = out.write_all(line).and_then(|()| out.write_all(b"\n")) {
                return stop_on(error);
            }
        }
        if let Err(error) = out.flush() {
            return stop_on(error);
        }
        batch.clear();
        Ok(true)
    };
    let mut keep_going = Ok(true);
    let read = for_each_item(&[], inputs, format, |item, line| {
        progress.tick_by(1);
        batch.push(sharded.hash(item), line);
        if batch.is_full(remote.batch_items) {
            keep_going = flush(&mut batch, sharded);
        }
        Ok(matches!(keep_going, Ok(true)))
    });
    // The lines read before a bad one are added and printed too.
    let mut keep_going = keep_going?;
    if keep_going && !batch.hashes.is_empty() {
        keep_going = flush(&mut batch, sharded)?;
    }
    progress.finish();
    if keep_going && let Err(error) = out.flush() {
        stop_on(error)?;
    }
    read?;
    let name = sharded.name().to_owned();
    warn_if_overfull(&name, sharded);
    if lost > 0 {
        return Err(CliError::new(format!(
            "the answers for {lost} lines were lost (a connection lost, or no reply in time, after their batch reached the server; sent again, the filter answered them as seen): they are in the filter, and those that were first occurrences were not printed"
        )));
    }
    Ok(ExitCode::SUCCESS)
}

fn info(remote: &RemoteArgs, target: &Target, name: &str) -> Result<ExitCode> {
    let mut sharded = open(remote, target, name)?;
    let info = sharded.info().map_err(remote_error)?;
    let plan = info.plan;
    let where_ = target.shown();
    let lines = [
        ("sharded filter", format!("{name} at {where_}")),
        ("variant", "blocked shards (docs/sharding.md)".to_owned()),
        ("metadata", plan.to_text()),
        (
            "shards",
            format!(
                "{} (keys {} .. {}, docs/sharding.md)",
                plan.shards(),
                plan.shard_key(name, 0),
                plan.shard_key(name, plan.shards() - 1)
            ),
        ),
        (
            "shards present",
            if info.shards_created == plan.shards() {
                format!("{} (all)", info.shards_created)
            } else {
                format!(
                    "{} of {}: the others were lost (deleted, evicted, flushed, or a restart without persistence), with their items; commands on them fail",
                    info.shards_created,
                    plan.shards()
                )
            },
        ),
        ("blocks per shard", plan.blocks_per_shard().to_string()),
        ("shard size", format!("{} bytes", plan.shard_bytes())),
        (
            "total size",
            format!("{} bytes (every shard, made by create)", plan.total_bytes()),
        ),
        ("seed", plan.seed().to_string()),
        (
            "sized for",
            format!(
                "{} items at fpp {}",
                plan.expected_items(),
                bloomery::sizing::Rate(plan.fpp())
            ),
        ),
        (
            "estimated items",
            match info.saturated_shards() {
                0 => info.estimated_items.to_string(),
                full => format!(
                    "unknown: {full} of {} shards have every bit set (they answer present for everything)",
                    plan.shards()
                ),
            },
        ),
        (
            "false-positive estimate",
            format!(
                "{:.6} (the mean of the shards' rates at their estimated items)",
                info.fpp_estimate()
            ),
        ),
    ];
    let mut out = BufWriter::new(io::stdout().lock());
    // Every shard's key, last: what to delete (with the name) to remove the filter.
    let keys = (0..plan.shards()).map(|shard| plan.shard_key(name, shard));
    let written = lines
        .iter()
        .try_for_each(|(name, value)| writeln!(out, "{name}: {value}"))
        .and_then(|()| writeln!(out, "shard keys: {}", keys.collect::<Vec<_>>().join(" ")))
        .and_then(|()| out.flush());
    crate::output::finish(written)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overfull_check_reads_64_mib_of_shards_at_most() {
        // The docs' 10^10 URLs at 1% in 64 MiB shards: 191 shards of 66,796,480 bytes; the
        // check reads two of them (the fewest holding 64 MiB).
        let plan = ShardPlan::new(10_000_000_000, 0.01, 64 << 20, 1).unwrap();
        assert_eq!((plan.shards(), fill_sample(&plan)), (191, 2));
        // A small filter is read whole.
        let plan = ShardPlan::new(100_000, 0.01, 64 << 20, 64).unwrap();
        assert_eq!(fill_sample(&plan), 64);
        // Shards of at most 1 MiB: 64 MiB of them, of more than 64.
        let plan = ShardPlan::new(1_000_000_000, 0.01, 1 << 20, 1).unwrap();
        assert!(plan.shards() > 64);
        assert_eq!(
            u64::from(fill_sample(&plan)),
            (64u64 << 20).div_ceil(plan.shard_bytes())
        );
    }
}
