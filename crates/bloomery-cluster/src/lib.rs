//! A client for bloomery's sharded filters (docs/sharding.md) on one Redis server or a
//! Redis Cluster running the bloomery module: items are hashed here, once, routed by hash
//! to their shard key, and sent 8 bytes an item, one `BF.HASHADD`/`BF.HASHEXISTS` per
//! shard per batch, pipelined (per node, on a cluster).
//!
//! ```no_run
//! use bloomery::sharding::ShardPlan;
//! use bloomery_cluster::{Connection, ShardedFilter, Target};
//!
//! let target: Target = "redis+cluster://127.0.0.1:7000,127.0.0.1:7001".parse()?;
//! let plan = ShardPlan::new(1_000_000_000, 0.01, 64 << 20, 64)?;
//! let (mut filter, _created) = ShardedFilter::create(Connection::open(&target)?, "urls", plan)?;
//! let hashes: Vec<u64> = ["https://a.example/", "https://b.example/"]
//!     .iter()
//!     .map(|url| filter.plan().hash(*url))
//!     .collect();
//! assert_eq!(filter.add_hashes(&hashes)?, [true, true]);
//! assert_eq!(filter.contains_hashes(&hashes)?, [true, true]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Targets: `redis://HOST:PORT[/DB]` is one server; `redis+cluster://HOST:PORT[,HOST:PORT...]`
//! is a cluster, reached through any of the listed nodes (list several: a node that is down
//! is skipped; one that is not in cluster mode is an error at once, [`Error::NotACluster`]).
//! Batches on a cluster go on this client's own connections to the primaries, one pipeline
//! per node by this client's slot map (`CLUSTER SLOTS`, read again after a `MOVED`), each
//! command's reply kept: the redis crate's cluster pipeline (1.8) drops every reply of a
//! batch when one command is redirected, and the commands that ran, sent again, report
//! their items as old. Redirections while slots move: a command sent `MOVED` goes again
//! alone, by the slot map read again; one sent `ASK` goes again alone with `ASKING` to the
//! node named; `TRYAGAIN`, after 50 ms. The first connect is retried as later ones are. A lost
//! connection, `CLUSTERDOWN`, `MASTERDOWN`, `READONLY` (from a cluster's node; a
//! one-server target that is a replica fails at once), `LOADING`, or a `WAIT`
//! refused by a replica or unblocked by the demotion of the primary it was blocked on
//! (`UNBLOCKED`: a failover under way) make this client send the whole batch
//! again, for at most [`Connection::set_retry_for`] (30 s by default), after which the last
//! error is returned; a command's first reply, wherever it came, is its answer. A try that
//! fails otherwise than by the servers' replies (a lost connection, a timeout) drops its
//! connections, which may hold replies not read, and the next try connects afresh. Sending
//! a batch again is harmless for the filter (an item's bits are set once), but a command
//! whose reply was lost that way may have run, and its next reply then says "old" for the
//! items it added: [`ShardedFilter::add_hashes_doubted`] says which answers are doubtful
//! (see docs/failure-model.md).
//!
//! With [`ShardedFilter::set_wait`], a batch of adds and its `WAIT` are one unit: a failure
//! worth retrying in either sends both again, the batch first, on the new connections.
//! Redis counts `WAIT` against the last write made on the connection it arrives on, so a
//! `WAIT` sent alone on a new connection (which has made none) would answer at once with
//! every connected replica, however far behind. The client waits for `WAIT`'s reply for
//! its timeout plus [`WAIT_REPLY_MARGIN`] (at least the 10 s it waits for other replies),
//! so a `WAIT` that runs its full time is answered, not cut off and retried.
//!
//! On a cluster, `WAIT` goes only to the primaries written to, each on the connection that
//! carried the writes: every connection of this client's own that carried a batch's write
//! since the last `WAIT` that covered it (the batches go on those), and, for the keys a
//! single command wrote through the redis crate's connection ([`Connection::query`]: the
//! metadata key that [`ShardedFilter::create`] sets), the primary of each such key's slot,
//! routed by the crate's slot map as that command was. This relies on the redis crate's
//! synchronous cluster connection (redis 1.8: `ClusterConnection`, one connection per node
//! address, which `route_command` takes from its map) replacing a node's connection only
//! when it fails (its reconnection is turned off for the `WAIT`, and a failure there sends
//! the unit again); a connection of this client's own that was lost before the `WAIT` is an
//! error, and the batch and its `WAIT` go again. A primary written to gets one `WAIT` per
//! connection that wrote to it (two when the metadata key's primary also took a batch's
//! writes, each counting its own connection's), and the first answer short of the
//! replicas asked for ends the wait. A batch that met a `MOVED` has this client's slot map
//! read again before its commands go again (and the crate's refreshed by a read of the
//! moved key), so they and their `WAIT` use the connections of the new map.
//!
//! Restarts: after each batch of adds on a cluster, the client reads every primary's
//! `run_id` (`INFO server`, one round trip per primary); a primary's address answering with
//! another `run_id` than when first seen is [`Error::Restarted`] (a primary killed and
//! restarted within the node timeout, so no failover, comes back from its last RDB, and
//! its replicas copy it: the writes acknowledged since, `WAIT` or not, are gone); a user
//! the primaries refuse `INFO` goes unchecked, as on one server. The `run_id`s are read
//! before the first batch too, so a restart during it is seen. Not covered: a restart
//! after the last batch's check, or before the first batch (which goes to the new process
//! in full); and a node that failed over, came
//! back as a replica and was made primary again is taken as restarted (an error where
//! nothing may be lost: run the add again). (The redis crate's own
//! routing of a keyless `WAIT` sends it to every primary and keeps the fewest replicas, so
//! a primary that was not written to, with fewer replicas, would fail the batch.)

// A library writes nothing to standard output or error (its callers own them), and
// `println!`/`eprintln!` panic when the stream is full or closed.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

use std::str::FromStr;
use std::time::{Duration, Instant};

use bloomery::Funnel;
use bloomery::sharding::{KeyScheme, ShardPlan, check_name};

use redis::cluster_routing::{MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Arg, Cmd, ErrorKind, RedisError, ServerErrorKind, Value};

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A target that is not `redis://...` or `redis+cluster://...`.
    #[error("bad Redis target '{target}': {why}")]
    Target {
        /// The target as given.
        target: String,
        /// What is wrong.
        why: String,
    },
    /// Redis refused or failed (after the retries, for failures worth retrying).
    #[error("{context}: {source}")]
    Redis {
        /// What was being done.
        context: String,
        /// Redis's error.
        source: RedisError,
    },
    /// A bad name or plan, or metadata that does not parse.
    #[error(transparent)]
    Filter(#[from] bloomery::Error),
    /// No sharded filter of that name.
    #[error("no sharded filter '{0}' (create it first)")]
    NotFound(String),
    /// The name exists with other parameters, or holds something else.
    #[error("{0}")]
    Mismatch(String),
    /// A call that was being retried, ended by the caller's [`Interrupt`] (a Ctrl-C): what
    /// its failed tries sent may or may not have been done.
    #[error("{0}: interrupted while retrying")]
    Interrupted(String),
    /// `WAIT` returned fewer replicas than asked for.
    #[error("only {got} of the {wanted} replicas asked for acknowledged the writes within {timeout:?}")]
    NotAcknowledged {
        /// Replicas asked for.
        wanted: usize,
        /// Replicas that acknowledged (on a cluster, the fewest over the primaries written
        /// to, up to the first that answered too few).
        got: usize,
        /// How long `WAIT` waited.
        timeout: Duration,
    },
    /// The one server restarted while this client used it (its `run_id` changed): what
    /// it acknowledged before may be lost, unless its persistence kept it.
    #[error(
        "{0} restarted during the run (its run_id changed): the writes it acknowledged before may be lost, unless its persistence (AOF with appendfsync always) kept them; run the add again (adding is idempotent) and make its persistence match what you need"
    )]
    Restarted(String),
    /// A cluster target whose node is a server not in cluster mode.
    #[error(
        "{0} is not a cluster node (cluster mode is off): reach it as one server, redis://HOST:PORT (the CLI's --redis)"
    )]
    NotACluster(String),
    /// A server (on a cluster, a primary) without the bloomery module: `COMMAND INFO
    /// BF.HASHADD` finds no such command there.
    #[error(
        "{0} does not have the bloomery module loaded (COMMAND INFO BF.HASHADD finds no such command): load it there (loadmodule)"
    )]
    ModuleMissing(String),
    /// A reply of an unexpected shape.
    #[error("unexpected reply to {command}: {reply}")]
    Reply {
        /// The command.
        command: &'static str,
        /// The reply, as Debug.
        reply: String,
    },
}

impl Error {
    /// Whether the writes acknowledged before this error may be gone with it: the one
    /// server (or a primary) restarted, or a shard is missing (`NOSHARD`: deleted,
    /// evicted, a restart without persistence). A caller that counts what was added
    /// before a failed batch says so.
    pub fn may_have_lost_acknowledged(&self) -> bool {
        matches!(self, Error::Restarted(_)) || self.to_string().contains("NOSHARD")
    }
}

/// The client's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the filter lives: one server, or a cluster through some of its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `redis://...`: one server (URL as the redis crate reads it).
    Single(String),
    /// `redis+cluster://h:p,h:p`: the nodes to reach a cluster through, as `redis://h:p`.
    Cluster(Vec<String>),
}

impl FromStr for Target {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let bad = |why: &str| Error::Target {
            target: redacted(text),
            why: why.into(),
        };
        if let Some(nodes) = text.strip_prefix("redis+cluster://") {
            let nodes: Vec<String> = nodes
                .split(',')
                .map(|node| node.trim().trim_end_matches('/'))
                // A node written as a URL (redis+cluster://redis://h:p) is its address.
                .map(|node| node.strip_prefix("redis://").unwrap_or(node))
                .map(|node| format!("redis://{node}"))
                .collect();
            if nodes.iter().any(|node| node.len() == "redis://".len()) {
                return Err(bad(
                    "an empty node address (expected redis+cluster://HOST:PORT[,HOST:PORT...])",
                ));
            }
            Ok(Target::Cluster(with_first_nodes_user(nodes)))
        } else if text.starts_with("rediss://") {
            // The redis crate is built without TLS: say so here, not at the first connect.
            Err(bad(
                "TLS (rediss://) is not built into this client; reach the server over redis:// or unix://",
            ))
        } else if text.starts_with("redis://")
            || text.starts_with("unix://")
            || text.starts_with("redis+unix://")
        {
            Ok(Target::Single(text.into()))
        } else {
            Err(bad(
                "expected redis://HOST:PORT or unix:///PATH (one server) or redis+cluster://HOST:PORT[,HOST:PORT...] (a cluster)",
            ))
        }
    }
}

/// The cluster's nodes with the first one's user and password given to those that have
/// none: `redis+cluster://:pw@a:7000,b:7001` names one cluster, and the redis crate refuses
/// nodes with different passwords ("Cannot use different password among initial nodes").
fn with_first_nodes_user(nodes: Vec<String>) -> Vec<String> {
    let Some(first) = nodes.first().and_then(|node| url::Url::parse(node).ok()) else {
        return nodes;
    };
    if first.username().is_empty() && first.password().is_none() {
        return nodes;
    }
    nodes
        .into_iter()
        .map(|node| match url::Url::parse(&node) {
            Ok(mut url) if url.username().is_empty() && url.password().is_none() => {
                let given =
                    url.set_username(first.username()).is_ok() && url.set_password(first.password()).is_ok();
                if given { url.to_string() } else { node }
            }
            _ => node,
        })
        .collect()
}

impl Target {
    /// The target as messages show it: a password in a URL (`redis://user:PASSWORD@host`)
    /// shown as `***`.
    ///
    /// ```
    /// use bloomery_cluster::Target;
    ///
    /// let target: Target = "redis://app:s3cret@db:6379/0".parse()?;
    /// assert_eq!(target.shown(), "redis://app:***@db:6379/0");
    /// let cluster: Target = "redis+cluster://:pw@a:7000,b:7001".parse()?;
    /// // The first node's password is every node's that gives none.
    /// assert_eq!(cluster.shown(), "the cluster at redis://:***@a:7000,redis://:***@b:7001");
    /// # Ok::<(), bloomery_cluster::Error>(())
    /// ```
    pub fn shown(&self) -> String {
        match self {
            Target::Single(url) => redacted(url),
            Target::Cluster(nodes) => {
                let nodes: Vec<String> = nodes.iter().map(|node| redacted(node)).collect();
                format!("the cluster at {}", nodes.join(","))
            }
        }
    }
}

/// `url` with its password shown as `***`: the user part's (`redis://user:PASSWORD@host`)
/// and a `pass` or `password` query parameter's (`unix:///run/redis.sock?pass=PASSWORD`,
/// where the redis crate reads a socket's). A URL that does not parse has everything
/// between `://` and its last `@` hidden.
fn redacted(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return match (url.split_once("://"), url.rfind('@')) {
            (Some((scheme, _)), Some(at)) => format!("{scheme}://***{}", &url[at..]),
            _ => url.to_owned(),
        };
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("***"));
    }
    let secret = |key: &str| key == "pass" || key == "password";
    if parsed.query_pairs().any(|(key, _)| secret(&key)) {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(key, value)| {
                let value = if secret(&key) {
                    "***".to_owned()
                } else {
                    value.into_owned()
                };
                (key.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

enum Inner {
    Single(redis::Connection),
    Cluster(Box<ClusterInner>),
}

/// A cluster connection: the redis crate's (for single commands, and `WAIT`s on the keys
/// they wrote), and this client's own connections to the primaries, by this client's own
/// slot map, which carry every batch (one pipeline per node, whose replies are each kept:
/// a redirected command goes again alone, and the others' answers stand), kept as long as
/// the crate's, so that a `WAIT` reaches every node written to on the connection that
/// wrote.
struct ClusterInner {
    connection: redis::cluster::ClusterConnection,
    /// A node's URL (the first listed), whose host and port an address replaces.
    template: String,
    timeout: Duration,
    /// Per `host:port`, this client's connection there.
    asked: std::collections::HashMap<String, redis::Connection>,
    /// The addresses of `asked` written to since the last `WAIT` that covered them.
    unwaited: std::collections::BTreeSet<String>,
    /// Per slot range (first, last), its primary's `host:port` (`CLUSTER SLOTS`), read
    /// when first needed and again after a `MOVED`.
    slots: Option<Vec<(u16, u16, String)>>,
}

impl ClusterInner {
    /// This client's connection to `address` (made if missing).
    fn node(&mut self, address: &str) -> redis::RedisResult<&mut redis::Connection> {
        match self.asked.entry(address.to_owned()) {
            std::collections::hash_map::Entry::Occupied(entry) => Ok(entry.into_mut()),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let url = node_url(&self.template, address)?;
                let connection = redis::Client::open(url.as_str())?
                    .get_connection_with_timeout(self.timeout)
                    .map_err(|error| at_node(address, error))?;
                connection.set_read_timeout(Some(self.timeout))?;
                connection.set_write_timeout(Some(self.timeout))?;
                Ok(entry.insert(connection))
            }
        }
    }

    /// The `host:port` of the primary of `key`'s slot, by this client's slot map (read if
    /// missing).
    fn primary_of(&mut self, key: &[u8]) -> redis::RedisResult<String> {
        if self.slots.is_none() {
            let host = url::Url::parse(&self.template)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned))
                .unwrap_or_default();
            self.slots = Some(read_slots(&mut self.connection, &host)?);
        }
        let slot = bloomery::sharding::key_slot(key);
        self.slots
            .iter()
            .flatten()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, address)| address.clone())
            .ok_or_else(|| {
                RedisError::from((
                    ErrorKind::ClusterConnectionNotFound,
                    "no node serves the slot",
                    slot.to_string(),
                ))
            })
    }
}

/// `error` (of connecting or talking to the node at `address`) with the address said.
fn at_node(address: &str, error: RedisError) -> RedisError {
    // Once: an error that already names the node passes through a second caller as it is
    // ("node 127.0.0.1:7721: node 127.0.0.1:7721: Connection refused").
    if error.is_io_error() && !error.to_string().contains(&format!("node {address}: ")) {
        // Kept as what it was for the retries: a timeout, or a connection lost.
        let kind = if error.is_timeout() {
            std::io::ErrorKind::TimedOut
        } else if error.is_connection_dropped() {
            std::io::ErrorKind::ConnectionReset
        } else {
            std::io::ErrorKind::Other
        };
        RedisError::from(std::io::Error::new(kind, format!("node {address}: {error}")))
    } else {
        error
    }
}

/// The cluster's slot ranges and their primaries' `host:port` (`CLUSTER SLOTS`, asked of
/// any node the redis crate reaches).
/// A primary whose endpoint the reply leaves unknown (an empty string: a node that does not
/// know its own address, as the one node of a one-node cluster; `?` or nil: none
/// configured) is at `seed_host`, the first listed node's host, with the port the reply
/// gives (as `CLUSTER SLOTS` asks of clients: the endpoint they asked it of).
fn read_slots(
    connection: &mut redis::cluster::ClusterConnection,
    seed_host: &str,
) -> redis::RedisResult<Vec<(u16, u16, String)>> {
    let mut command = redis::cmd("CLUSTER");
    command.arg("SLOTS");
    let reply = connection.route_command(&command, RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random))?;
    let bad = |what: &str| {
        RedisError::from((
            ErrorKind::Parse,
            "an unexpected CLUSTER SLOTS reply",
            what.to_owned(),
        ))
    };
    let Value::Array(ranges) = reply else {
        return Err(bad("not an array"));
    };
    let mut slots = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(fields) = range else {
            return Err(bad("a range not an array"));
        };
        let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(primary))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return Err(bad("a range without its primary"));
        };
        let host = match primary.first() {
            Some(Value::BulkString(host)) if !host.is_empty() && host.as_slice() != b"?" => {
                String::from_utf8_lossy(host).into_owned()
            }
            Some(Value::BulkString(_) | Value::Nil) => seed_host.to_owned(),
            _ => return Err(bad("a primary without its host")),
        };
        let Some(Value::Int(port)) = primary.get(1) else {
            return Err(bad("a primary without its port"));
        };
        let (Ok(first), Ok(last)) = (u16::try_from(*first), u16::try_from(*last)) else {
            return Err(bad("a slot out of range"));
        };
        slots.push((first, last, format!("{host}:{port}")));
    }
    Ok(slots)
}

/// `template` (a node's URL, with its user, password and database) at `address`
/// (`host:port`).
fn node_url(template: &str, address: &str) -> redis::RedisResult<String> {
    let bad = || {
        RedisError::from((
            ErrorKind::Client,
            "a node's address that does not parse",
            address.to_owned(),
        ))
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let mut url = url::Url::parse(template).map_err(|_| bad())?;
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    url.set_host(Some(&host)).map_err(|_| bad())?;
    url.set_port(Some(port)).map_err(|_| bad())?;
    Ok(url.to_string())
}

/// Whether `command` (one this client sends) writes nothing.
fn is_read(command: &Cmd) -> bool {
    matches!(
        command.args_iter().next(),
        Some(Arg::Simple(name)) if [b"BF.HASHEXISTS".as_slice(), b"EXISTS", b"GET", b"BF.CARD"]
            .iter()
            .any(|read| name.eq_ignore_ascii_case(read))
    )
}

/// How often the redis crate's cluster client tries a command again by itself (after a
/// redirection, or a node that failed), before this client's own retries take over.
const CLUSTER_CLIENT_RETRIES: u32 = 2;

/// How much longer than a `WAIT`'s own timeout the client waits for its reply (the server
/// answers when the timeout passes; this covers the round trip and a busy server).
pub const WAIT_REPLY_MARGIN: Duration = Duration::from_secs(5);

/// Asked between the tries of a call being retried: `true` ends the call there, with
/// [`Error::Interrupted`] ([`Connection::open_interruptible`]). A program that stops on
/// Ctrl-C (Python's `KeyboardInterrupt`) so stops within a try's time, not the retry time.
pub type Interrupt = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// A connection to a server or a cluster that reconnects, and sends again, on failures
/// worth retrying (see the crate's documentation).
pub struct Connection {
    target: Target,
    /// `None` after a call that failed otherwise than by the servers' replies
    /// ([`in_step`]): its connections may hold replies not read (a pipeline that failed
    /// part way leaves the other nodes' replies unread), so the next call connects afresh
    /// rather than read a reply meant for an earlier one.
    inner: Option<Inner>,
    retry_for: Duration,
    timeout: Duration,
    /// A one-server target's `run_id` when this client first connected (`None` on a
    /// cluster, or where `INFO` is not allowed): a reconnect to a server whose `run_id`
    /// differs is an error ([`Error::Restarted`]), since a restart may have lost
    /// acknowledged writes (a batch sent again would succeed on a filter that lost them).
    run_id: Option<String>,
    /// On a cluster, per primary's address (`host:port`) seen before the first batch of
    /// adds or after one: the `run_id` of the server there when first seen. Another one
    /// later is a primary restarted within the node timeout (no failover), perhaps from an
    /// older RDB, which its replicas then copy: [`Error::Restarted`].
    run_ids: std::collections::HashMap<String, String>,
    /// Whether the primaries' `run_id`s were read before a first batch of adds.
    primaries_seen: bool,
    interrupt: Option<Interrupt>,
}

/// A one-server connection's server `run_id` (`INFO server`), if the user may ask.
/// `None` where the server refuses `INFO` to this user (an ACL, a renamed command). An
/// `INFO` refused for want of a password (or with a wrong one), or that got no answer
/// (the connection lost, or no reply in time), is that error: every later command would
/// fail the same way, and the note that restarts go unnoticed said nothing of the cause.
fn run_id_of(inner: &mut Inner) -> redis::RedisResult<Option<String>> {
    let Inner::Single(connection) = inner else {
        return Ok(None);
    };
    let info: String = match redis::cmd("INFO").arg("server").query(connection) {
        Ok(info) => info,
        Err(error)
            if matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
                || error.is_io_error()
                || error.is_timeout() =>
        {
            return Err(error);
        }
        Err(_) => return Ok(None),
    };
    Ok(run_id_in(&info))
}

/// The server `run_id` an `INFO server` reply gives.
fn run_id_in(info: &str) -> Option<String> {
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(|id| id.trim().to_owned())
}

/// Whether an error may go away by itself: connections lost or refused, a cluster
/// reconfiguring (failover, slots moving), a replica not yet promoted, a server loading.
fn worth_retrying(error: &RedisError) -> bool {
    // A `WAIT` that reached a primary demoted by a failover since the batch (Redis has no
    // code for it: "ERR WAIT cannot be used with replica instances"): as READONLY is for
    // the writes, the batch and its `WAIT` go again, to the new primary.
    let wait_on_a_replica = error.kind() == ErrorKind::Server(ServerErrorKind::ResponseError)
        && error
            .detail()
            .is_some_and(|detail| detail.starts_with("WAIT cannot be used with replica"));
    // A `WAIT` blocked on a primary that a failover demoted meanwhile (a manual `CLUSTER
    // FAILOVER`): Redis unblocks it with "-UNBLOCKED force unblock from blocking
    // operation, instance state changed (master -> replica?)", a code the redis crate does
    // not know (an extension error). As the `WAIT` refused on a replica: the batch and its
    // `WAIT` go again, to the new primary (the replies kept from the first try stay the
    // answers). An `UNBLOCKED` for another cause (`CLIENT UNBLOCK ... ERROR`) is not retried.
    let unblocked_by_a_failover = error.code() == Some("UNBLOCKED")
        && error
            .detail()
            .is_some_and(|detail| detail.contains("instance state changed"));
    wait_on_a_replica
        || unblocked_by_a_failover
        || error.is_io_error()
        || error.is_cluster_error()
        || error.is_connection_dropped()
        || error.is_timeout()
        || matches!(
            error.kind(),
            ErrorKind::ClusterConnectionNotFound
                | ErrorKind::Server(
                    ServerErrorKind::MasterDown | ServerErrorKind::ReadOnly | ServerErrorKind::BusyLoading
                )
        )
}

impl Connection {
    /// Connects to `target`, trying again for up to 30 s on failures worth retrying (as
    /// [`open_retrying`](Self::open_retrying)).
    pub fn open(target: &Target) -> Result<Self> {
        Self::open_retrying(target, Duration::from_secs(30))
    }

    /// Connects to `target`, trying again for up to `retry_for` (zero: once) while the
    /// failure is worth retrying (a connection refused, or dropped while connecting, a
    /// cluster not yet up), as every later reconnect does; `retry_for` is then the
    /// connection's [`set_retry_for`](Self::set_retry_for).
    pub fn open_retrying(target: &Target, retry_for: Duration) -> Result<Self> {
        Self::open_interruptible(target, retry_for, None)
    }

    /// As [`open_retrying`](Self::open_retrying), with `interrupt` asked between the tries
    /// of this connect and of every later call.
    pub fn open_interruptible(
        target: &Target,
        retry_for: Duration,
        interrupt: Option<Interrupt>,
    ) -> Result<Self> {
        let mut connection = Self {
            target: target.clone(),
            inner: None,
            retry_for,
            timeout: Duration::from_secs(10),
            run_id: None,
            run_ids: std::collections::HashMap::new(),
            primaries_seen: false,
            interrupt,
        };
        let context = || format!("connecting to {}", target.shown());
        connection.run_id = connection
            .retrying(&context, run_id_of)
            .map_err(|error| match error {
                // A target the redis crate cannot use (a database that is no number, a port
                // past 65535, a unix socket with no path): the target's fault, said so.
                Error::Redis { source, .. } if source.kind() == ErrorKind::InvalidClientConfig => {
                    Error::Target {
                        target: target.shown(),
                        why: source.to_string(),
                    }
                }
                other => other,
            })?;
        Ok(connection)
    }

    /// How long to keep reconnecting and sending again after failures worth retrying
    /// (default 30 s; zero: never retry; a time too long for the clock to hold, as
    /// [`Duration::MAX`]: for ever).
    pub fn set_retry_for(&mut self, retry_for: Duration) {
        self.retry_for = retry_for;
    }

    /// Whether a restart of the one server is noticed (its `run_id` could be read when
    /// connecting). On a cluster, always: after each batch of adds the primaries' `run_id`s
    /// are read ([`pipeline_and_wait`](Self::pipeline_and_wait)), and a primary's address
    /// served by another server process than before is [`Error::Restarted`] (a node whose
    /// `INFO` is refused goes unchecked).
    pub fn notices_restarts(&self) -> bool {
        matches!(self.target, Target::Cluster(_)) || self.run_id.is_some()
    }

    /// The target.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Sends `commands` as one pipeline (on a cluster, one per node), retrying the whole
    /// pipeline on failures worth retrying; replies in order. A command's error reply
    /// fails the whole call.
    pub fn pipeline(&mut self, commands: &[Cmd], context: &dyn Fn() -> String) -> Result<Vec<Value>> {
        let mut replies = Replies::new(commands.len());
        let failed = std::cell::Cell::new(None);
        let more = std::cell::RefCell::new(Vec::new());
        let context = || with_key(context(), commands, failed.get(), &more.borrow());
        self.retrying(&context, |inner| {
            let sent = send_pipeline(inner, commands, &mut replies);
            failed.set(replies.failed);
            more.replace(replies.more.clone());
            sent
        })?;
        Ok(replies.known.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Sends `commands` as one pipeline (as [`pipeline`](Self::pipeline)) and then, with
    /// `wait` = `(replicas, timeout)`, `WAIT replicas timeout` on the same connections (on a
    /// cluster, on each primary the pipeline wrote to, by its commands' keys, a command's
    /// key being its first argument, as for `BF.HASHADD`), as one unit: a failure worth retrying in either sends
    /// the pipeline and the `WAIT` again, together, on new connections, so the `WAIT` always
    /// counts the writes of the pipeline sent just before it. The replies to `commands`,
    /// and `WAIT`'s (on a cluster, the fewest replicas over those primaries, up to the first
    /// that answered fewer than `replicas`) if asked; no `WAIT` when `commands` is empty.
    pub fn pipeline_and_wait(
        &mut self,
        commands: &[Cmd],
        wait: Option<(usize, Duration)>,
        context: &dyn Fn() -> String,
    ) -> Result<(Vec<Value>, Option<Value>)> {
        self.pipeline_and_wait_also(commands, &[], wait, context)
            .map(|(replies, waited, _)| (replies, waited))
    }

    /// [`pipeline_and_wait`](Self::pipeline_and_wait), the `WAIT` also going to the
    /// primaries of the keys `earlier` (written before by [`query`](Self::query), on the
    /// redis crate's connection, on a cluster).
    fn pipeline_and_wait_also(
        &mut self,
        commands: &[Cmd],
        earlier: &[&[u8]],
        wait: Option<(usize, Duration)>,
        context: &dyn Fn() -> String,
    ) -> Result<(Vec<Value>, Option<Value>, Vec<bool>)> {
        if commands.is_empty() {
            return Ok((Vec::new(), None, Vec::new()));
        }
        let mut replies = Replies::new(commands.len());
        let failed = std::cell::Cell::new(None);
        let more = std::cell::RefCell::new(Vec::new());
        // Whether the try's failure, if any, was the `WAIT`'s (after the batch was sent).
        let waiting = std::cell::Cell::new(false);
        let context = || {
            let context = with_key(context(), commands, failed.get(), &more.borrow());
            if waiting.get() {
                format!("WAIT after {context}")
            } else {
                context
            }
        };
        let context: &dyn Fn() -> String = &context;
        // The batch's writes are waited for on the connections that carried them (this
        // client's own, on a cluster); the redis crate's connection, only for `earlier`.
        let written = routes(earlier.iter().copied());
        let base = self.timeout;
        let mut run_ids = std::mem::take(&mut self.run_ids);
        let mut primaries_seen = self.primaries_seen;
        let mut restarted = None;
        let sent = self.retrying(context, |inner| {
            if let Inner::Cluster(cluster) = inner
                && !primaries_seen
            {
                // The primaries' `run_id`s before the first batch's writes, so that a
                // restart after them (which lost them) is seen by the check after the
                // batch (a restart before them loses nothing: the batch goes to the new
                // process in full).
                restarted_primary(&mut cluster.connection, &mut run_ids)?;
                primaries_seen = true;
            }
            failed.set(None);
            waiting.set(false);
            let sent = send_pipeline(inner, commands, &mut replies);
            failed.set(replies.failed);
            more.replace(replies.more.clone());
            sent?;
            let waited = match wait {
                Some((replicas, timeout)) => {
                    waiting.set(true);
                    let waited = send_wait(inner, &written, replicas, timeout, base)?;
                    waiting.set(false);
                    Some(waited)
                }
                None => None,
            };
            if let Inner::Cluster(cluster) = inner {
                restarted = restarted_primary(&mut cluster.connection, &mut run_ids)?;
                if let Some(address) = &restarted {
                    return Err(RedisError::from((
                        ErrorKind::Client,
                        "a primary restarted during the run",
                        address.clone(),
                    )));
                }
            }
            Ok(waited)
        });
        self.run_ids = run_ids;
        self.primaries_seen = primaries_seen;
        match restarted {
            Some(address) => {
                // Its connections are not trusted further.
                self.inner = None;
                Err(Error::Restarted(format!("the cluster's primary at {address}")))
            }
            None => {
                let waited = sent?;
                let known = replies.known.into_iter().map(Option::unwrap_or_default).collect();
                Ok((known, waited, replies.unsure))
            }
        }
    }

    /// `WAIT replicas timeout` on the current connections (on a cluster, on every primary a
    /// pipeline wrote to since the last `WAIT` that covered it, and on the primaries of the
    /// keys `written` by [`query`](Self::query); with none, no `WAIT`, and the answer is
    /// `replicas`), counting the writes made on them, and not retried: on a new connection a `WAIT` would count no write and answer at once. To
    /// wait for a batch, send it with [`pipeline_and_wait`](Self::pipeline_and_wait).
    pub fn wait<K: AsRef<[u8]>>(
        &mut self,
        written: &[K],
        replicas: usize,
        timeout: Duration,
    ) -> Result<Value> {
        let written = routes(written.iter().map(AsRef::as_ref));
        let context = || "WAIT".to_owned();
        // After a failed call the writes' connections are gone: a `WAIT` on new ones would
        // count none of them and answer at once.
        let Some(inner) = self.inner.as_mut() else {
            return Err(Error::Redis {
                context: context(),
                source: RedisError::from((
                    ErrorKind::Io,
                    "the connections that carried the writes were lost since",
                    "send them again with pipeline_and_wait".to_owned(),
                )),
            });
        };
        let waited = send_wait(inner, &written, replicas, timeout, self.timeout);
        if waited.as_ref().is_err_and(|error| !in_step(error)) {
            self.inner = None;
        }
        waited.map_err(|source| Error::Redis {
            context: context(),
            source,
        })
    }

    /// Sends one command (on a cluster, routed by its key, or as the redis crate routes
    /// keyless commands: `WAIT` goes to every primary and answers the fewest replicas;
    /// [`wait`](Self::wait) waits on the primaries written to).
    pub fn query(&mut self, command: &Cmd, context: &dyn Fn() -> String) -> Result<Value> {
        self.retrying(context, |inner| match inner {
            Inner::Single(connection) => command.query(connection),
            Inner::Cluster(cluster) => command.query(&mut cluster.connection),
        })
    }

    /// The servers (on a cluster, the primaries, by address) where `COMMAND INFO
    /// BF.HASHADD` finds no such command: the bloomery module is not loaded there, and
    /// every batch would fail with Redis's "unknown command" error, which echoes the
    /// command's binary argument (the redis crate fails to read it: "invalid utf-8
    /// sequence"). Asked once, on the current connections, not retried: none where
    /// `COMMAND` is refused to this user or renamed, or where a server does not answer (a
    /// primary down: the batches say so, and retry).
    fn without_module(&mut self) -> Vec<String> {
        let mut command = redis::cmd("COMMAND");
        command.arg("INFO").arg("BF.HASHADD");
        let unknown =
            |reply: &Value| matches!(reply, Value::Array(found) if matches!(found.as_slice(), [Value::Nil]));
        let shown = self.target.shown();
        let Some(inner) = self.inner.as_mut() else {
            return Vec::new();
        };
        let reply = match inner {
            Inner::Single(connection) => command.query(connection),
            Inner::Cluster(cluster) => cluster.connection.route_command(
                &command,
                RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
            ),
        };
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => {
                if !in_step(&error) {
                    // Replies may be left unread: the next call connects afresh.
                    self.inner = None;
                }
                return Vec::new();
            }
        };
        match (&*inner, reply) {
            (Inner::Single(_), reply) if unknown(&reply) => vec![shown.clone()],
            (Inner::Cluster(_), Value::Map(replies)) => replies
                .iter()
                .filter(|(_, reply)| unknown(reply))
                .map(|(address, _)| match address {
                    Value::BulkString(address) => {
                        format!("the cluster's primary at {}", String::from_utf8_lossy(address))
                    }
                    other => format!("the cluster's primary at {other:?}"),
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Runs `each` until it succeeds, fails with an error not worth retrying, or
    /// `retry_for` has passed, waiting 50 ms between tries, then twice as long each time up
    /// to 1 s. A try that fails otherwise than by the servers' replies (a lost connection,
    /// a timeout) drops its connections, which may hold replies not read, so the next try
    /// starts by connecting, and a failed connect is that try's error.
    fn retrying<T>(
        &mut self,
        context: &dyn Fn() -> String,
        mut each: impl FnMut(&mut Inner) -> redis::RedisResult<T>,
    ) -> Result<T> {
        // No deadline where `retry_for` is past what an `Instant` holds (retry for ever).
        let deadline = Instant::now().checked_add(self.retry_for);
        let mut pause = Duration::from_millis(50);
        loop {
            let fresh = self.inner.is_none();
            let mut connected = match self.inner.take() {
                Some(inner) => Ok(inner),
                None => connect(&self.target, self.timeout),
            };
            // A new connection to one server: to the same server process, or an error.
            if fresh
                && self.run_id.is_some()
                && let Ok(inner) = connected.as_mut()
            {
                let now = run_id_of(inner).ok().flatten();
                if now.is_some() && now != self.run_id {
                    return Err(Error::Restarted(self.target.shown()));
                }
            }
            let error = match connected {
                Ok(mut inner) => match each(&mut inner) {
                    Ok(value) => {
                        self.inner = Some(inner);
                        return Ok(value);
                    }
                    Err(error) => {
                        if in_step(&error) {
                            self.inner = Some(inner);
                        }
                        error
                    }
                },
                Err(error) => error,
            };
            // A server not in cluster mode gives the redis crate no slots, and every
            // command then finds no connection: said at once, not retried.
            if error.kind() == ErrorKind::ClusterConnectionNotFound
                && let Target::Cluster(nodes) = &self.target
                && let Some(node) = not_a_cluster(nodes, self.timeout)
            {
                self.inner = None;
                return Err(Error::NotACluster(node));
            }
            // A replica reached as one server: its READONLY does not go away by itself
            // (retried, it held the call the whole retry time before failing).
            if matches!(self.target, Target::Single(_))
                && error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
            {
                return Err(Error::Redis {
                    context: format!(
                        "{}: {} is a replica: reach its primary",
                        context(),
                        self.target.shown()
                    ),
                    source: error,
                });
            }
            if let Some(hint) = self.not_a_cluster_client(&error) {
                return Err(Error::Redis {
                    context: format!("{}: {hint}", context()),
                    source: error,
                });
            }
            let out_of_time = deadline.is_some_and(|deadline| Instant::now() + pause > deadline);
            if !worth_retrying(&error) || out_of_time {
                // A read or write that timed out says only "Resource temporarily
                // unavailable" (the socket's EAGAIN): said as what it is.
                let context = if error.is_timeout() {
                    format!(
                        "{}: no reply in time (the server, or the network to it, stalled)",
                        context()
                    )
                } else {
                    context()
                };
                return Err(Error::Redis {
                    context,
                    source: error,
                });
            }
            if self.interrupt.as_ref().is_some_and(|interrupt| interrupt()) {
                return Err(Error::Interrupted(format!("{}: {error}", context())));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// What to say of a redirection (`MOVED`, `ASK`) met through a one-server target: the
    /// server is a cluster node, which only a cluster target follows.
    fn not_a_cluster_client(&self, error: &RedisError) -> Option<&'static str> {
        let redirected = matches!(
            error.kind(),
            ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask)
        );
        (matches!(self.target, Target::Single(_)) && redirected).then_some(
            "the server is a Redis Cluster node: reach it as a cluster (redis+cluster://HOST:PORT)",
        )
    }
}

/// `context` naming the key of the command `failed` (by its position in `commands`), if
/// one failed by its error reply: a pipeline's error otherwise names only that position.
fn with_key(context: String, commands: &[Cmd], failed: Option<usize>, more: &[String]) -> String {
    let context = match failed.and_then(|index| commands.get(index)).and_then(first_key) {
        Some(key) => format!("{context}, on key '{}'", String::from_utf8_lossy(key)),
        None => context,
    };
    if more.is_empty() {
        return context;
    }
    // The other commands that met an error reply, by their codes (a batch over 128 shards
    // that met lost shards said one near copy of the NOSHARD sentence per shard).
    let mut codes: Vec<(&str, usize)> = Vec::new();
    for code in more {
        match codes.iter_mut().find(|(known, _)| known == code) {
            Some((_, count)) => *count += 1,
            None => codes.push((code, 1)),
        }
    }
    let codes: Vec<String> = codes
        .iter()
        .map(|(code, count)| format!("{count} {code}"))
        .collect();
    format!(
        "{context} (and {} more of the pipeline's commands failed: {})",
        more.len(),
        codes.join(", ")
    )
}

/// `error` with the shard index said after the key it names, `keys` being the shards'
/// keys in shard order.
fn shard_named(error: Error, keys: &[String]) -> Error {
    match error {
        Error::Redis { context, source } => {
            let named = keys.iter().enumerate().find_map(|(shard, key)| {
                let said = format!("on key '{key}'");
                let at = context.find(&said)? + said.len();
                // The key said whole (not the start of a longer one).
                matches!(context[at..].chars().next(), None | Some(' ')).then_some((shard, at))
            });
            let context = match named {
                Some((shard, at)) => {
                    format!(
                        "{} (shard {shard} of {}){}",
                        &context[..at],
                        keys.len(),
                        &context[at..]
                    )
                }
                None => context,
            };
            Error::Redis { context, source }
        }
        other => other,
    }
}

/// The state of a batch across the tries that send it: per command, its first reply (a
/// later send's reply to a command that already ran is not its answer: an add sent again
/// reports its items as old), and whether a send of it may have run without its reply
/// being read (a connection lost, a reply timed out), so that the reply kept is a later
/// send's.
struct Replies {
    known: Vec<Option<Value>>,
    unsure: Vec<bool>,
    /// The command whose error reply failed the last try, if one did.
    failed: Option<usize>,
    /// The codes of the other error replies of the last try.
    more: Vec<String>,
}

/// Records an error reply of command `index`: the first is the try's failure, the others'
/// codes are counted in `more`.
fn record_failure(
    failure: &mut Option<(usize, redis::ServerError)>,
    more: &mut Vec<String>,
    index: usize,
    error: redis::ServerError,
) {
    if failure.is_none() {
        *failure = Some((index, error));
    } else {
        more.push(error.code().to_owned());
    }
}

impl Replies {
    fn new(count: usize) -> Self {
        Self {
            known: vec![None; count],
            unsure: vec![false; count],
            failed: None,
            more: Vec::new(),
        }
    }

    /// `reply` for command `index`, kept if it is the first.
    fn keep(&mut self, index: usize, reply: Value) {
        if self.known[index].is_none() {
            self.known[index] = Some(reply);
        }
    }

    /// Commands `indexes` were sent and their replies not read.
    fn lost(&mut self, indexes: impl Iterator<Item = usize>) {
        for index in indexes {
            if self.known[index].is_none() {
                self.unsure[index] = true;
            }
        }
    }
}

/// How many times one try follows redirections (`MOVED`, `ASK`, `TRYAGAIN`) of a batch's
/// commands before the last one is its error.
const REDIRECTIONS: usize = 5;

/// Sends `commands` (each with a key, on a cluster) as one pipeline (on a cluster, one per
/// node, by this client's slot map), every command every try (so that a `WAIT` after it
/// counts every write on the connections it uses), keeping in `replies` the first reply
/// each command got. On a cluster a command redirected goes again alone (`MOVED`: with the
/// slot map read again; `ASK`: with `ASKING`, to the node named), the others' replies
/// kept. A command's error reply otherwise is the try's error (the other replies kept).
fn send_pipeline(inner: &mut Inner, commands: &[Cmd], replies: &mut Replies) -> redis::RedisResult<()> {
    replies.failed = None;
    replies.more.clear();
    match inner {
        Inner::Single(connection) => {
            let mut pipe = redis::pipe();
            for command in commands {
                pipe.add_command(command.clone());
            }
            // Sent whole, and the replies read one by one, up to the first that fails to
            // come (a lost connection, a timeout, a reply that does not parse): the replies
            // read before it are kept, the others lost. The redis crate's pipeline
            // (`req_packed_commands`) reads on after such an error, waiting the reply
            // timeout again for each command: a stalled server held a batch of 64 shards
            // 64 times 10 s, whatever the retry time said.
            if let Err(error) = connection.send_packed_command(&pipe.get_packed_pipeline()) {
                replies.lost(0..commands.len());
                return Err(error);
            }
            let mut failure = None;
            for index in 0..commands.len() {
                match connection.recv_response() {
                    Ok(Value::ServerError(error)) => {
                        record_failure(&mut failure, &mut replies.more, index, error)
                    }
                    Ok(reply) => replies.keep(index, reply),
                    Err(error) => {
                        replies.lost(index..commands.len());
                        return Err(error);
                    }
                }
            }
            match failure {
                Some((index, error)) => {
                    replies.failed = Some(index);
                    Err(RedisError::from(error))
                }
                None => Ok(()),
            }
        }
        Inner::Cluster(cluster) => send_cluster(cluster, commands, replies),
    }
}

/// [`send_pipeline`] on a cluster.
fn send_cluster(
    cluster: &mut ClusterInner,
    commands: &[Cmd],
    replies: &mut Replies,
) -> redis::RedisResult<()> {
    // Per command to send: the address an `ASK` named, if one did.
    let mut todo: Vec<(usize, Option<String>)> = (0..commands.len()).map(|index| (index, None)).collect();
    let mut last = None;
    for _ in 0..=REDIRECTIONS {
        if todo.is_empty() {
            return Ok(());
        }
        let mut by_node: std::collections::BTreeMap<String, Vec<(usize, bool)>> = Default::default();
        for (index, asked) in todo.drain(..) {
            let (address, asking) = match asked {
                Some(address) => (address, true),
                None => {
                    let key = first_key(&commands[index]).unwrap_or_default();
                    (cluster.primary_of(key)?, false)
                }
            };
            by_node.entry(address).or_default().push((index, asking));
        }
        let mut failure = None;
        let mut again = false;
        let mut moved = None;
        // Every node's pipeline is sent before any reply is read (the nodes work at
        // once), then each node's replies are read in turn.
        let groups: Vec<(String, Vec<(usize, bool)>)> = by_node.into_iter().collect();
        for (number, (address, sent)) in groups.iter().enumerate() {
            let mut pipe = redis::pipe();
            for &(index, asking) in sent {
                if asking {
                    pipe.cmd("ASKING");
                }
                pipe.add_command(commands[index].clone());
            }
            if sent.iter().any(|&(index, _)| !is_read(&commands[index])) {
                // Recorded before sending: a write that may have arrived is waited for.
                cluster.unwaited.insert(address.clone());
            }
            let packed = pipe.get_packed_pipeline();
            if let Err(error) = cluster
                .node(address)
                .and_then(|connection| connection.send_packed_command(&packed))
            {
                // This node's and the earlier nodes' replies are not read: their
                // connections are not used again (the caller drops them all).
                for (address, sent) in &groups[..=number] {
                    cluster.asked.remove(address);
                    replies.lost(sent.iter().map(|&(index, _)| index));
                }
                return Err(at_node(address, error));
            }
        }
        // A node whose replies fail to come (a lost connection, a timeout) stops the
        // reading of its own only: the other nodes' connections are sound, their commands
        // ran, and their replies are their answers (lost, they would be sent again and
        // answer "old"). The first such error is the try's, after every node was read.
        let mut broken = None;
        for (address, sent) in &groups {
            let mut got = Vec::with_capacity(sent.len());
            let read = cluster.node(address).and_then(|connection| {
                for &(_, asking) in sent {
                    if asking {
                        // ASKING's reply (OK); the command's, if it failed, says why.
                        connection.recv_response()?;
                    }
                    got.push(connection.recv_response()?);
                }
                Ok(())
            });
            if let Err(error) = read {
                // The replies read before the error are kept, the others lost; this
                // connection is not used again (and the caller drops them all).
                cluster.asked.remove(address);
                replies.lost(sent[got.len()..].iter().map(|&(index, _)| index));
                broken.get_or_insert(at_node(address, error));
            }
            for (&(index, _), reply) in sent.iter().zip(got) {
                let Value::ServerError(error) = reply else {
                    replies.keep(index, reply);
                    continue;
                };
                match error.kind() {
                    Some(ServerErrorKind::Moved) => {
                        cluster.slots = None;
                        moved = moved.or(Some(index));
                        todo.push((index, None));
                    }
                    Some(ServerErrorKind::Ask) => match error
                        .details()
                        .and_then(|details| details.split_ascii_whitespace().nth(1))
                    {
                        Some(address) => todo.push((index, Some(address.to_owned()))),
                        None => record_failure(&mut failure, &mut replies.more, index, error.clone()),
                    },
                    Some(ServerErrorKind::TryAgain) => {
                        again = true;
                        todo.push((index, None));
                    }
                    _ => record_failure(&mut failure, &mut replies.more, index, error.clone()),
                }
                if matches!(
                    error.kind(),
                    Some(ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain)
                ) {
                    last = Some((index, error));
                }
            }
        }
        if let Some(error) = broken {
            return Err(error);
        }
        // The redis crate's slot map too (its `WAIT`s on the keys a batch wrote and the
        // restart check go by it, and no batch goes through it to meet the `MOVED`): a
        // read of the moved key, which the crate follows with its map read again.
        if let Some(key) = moved.take().and_then(|index| first_key(&commands[index])) {
            let mut exists = redis::cmd("EXISTS");
            exists.arg(key);
            let route = Route::with_key(key, SlotAddr::Master);
            cluster.connection.route_command(
                &exists,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
            )?;
        }
        if let Some((index, error)) = failure {
            replies.failed = Some(index);
            return Err(RedisError::from(error));
        }
        if again {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    match last {
        Some((index, error)) if !todo.is_empty() => {
            replies.failed = Some(index);
            Err(RedisError::from(error))
        }
        _ => Ok(()),
    }
}

/// The address of a primary (of the slot map: every primary) whose `run_id` differs from
/// the one seen there before, if any; the `run_id`s of primaries seen first are kept.
fn restarted_primary(
    connection: &mut redis::cluster::ClusterConnection,
    run_ids: &mut std::collections::HashMap<String, String>,
) -> redis::RedisResult<Option<String>> {
    let mut info = redis::cmd("INFO");
    info.arg("server");
    let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
    let replies = match connection.route_command(&info, routing) {
        Ok(Value::Map(replies)) => replies,
        Ok(_) => return Ok(None),
        // A user the primaries refuse INFO (`-@dangerous`, `-info`), or INFO renamed: the
        // restarts go unchecked (as on one server), where every batch failed after its
        // writes (a run that could never add).
        Err(error) if info_refused(&error) => return Ok(None),
        Err(error) => return Err(error),
    };
    for (address, reply) in replies {
        let Value::BulkString(address) = &address else {
            continue;
        };
        let text = match &reply {
            Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Value::VerbatimString { text, .. } => text.clone(),
            _ => continue,
        };
        let Some(run_id) = run_id_in(&text) else {
            continue;
        };
        let address = String::from_utf8_lossy(address).into_owned();
        match run_ids.get(&address) {
            Some(seen) if *seen != run_id => return Ok(Some(address)),
            Some(_) => {}
            None => {
                run_ids.insert(address, run_id);
            }
        }
    }
    Ok(None)
}

/// Whether `error` is a server's refusal of `INFO` to this user: no permission (an ACL), or
/// no such command (renamed).
fn info_refused(error: &RedisError) -> bool {
    let refused = |code: Option<&str>, detail: Option<&str>| {
        code == Some("NOPERM")
            || (code == Some("ERR") && detail.is_some_and(|detail| detail.contains("unknown command")))
    };
    match error.clone().into_server_errors().as_deref() {
        Some(errors) if !errors.is_empty() => errors
            .iter()
            .all(|(_, error)| refused(Some(error.code()), error.details())),
        _ => refused(error.code(), error.detail()),
    }
}

/// Whether the connections that gave `error` are in step with their servers: an error the
/// servers replied (`CLUSTERDOWN`, a redirection, a refused command) comes with every reply
/// read; any other (a lost connection, a timeout) may leave replies unread.
fn in_step(error: &RedisError) -> bool {
    error.clone().into_server_errors().is_some()
}

/// `WAIT`'s timeout argument: milliseconds, rounded up (`WAIT n 0` waits forever).
fn wait_ms(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// How long to wait for the reply to a `WAIT` of `timeout`: its timeout plus
/// [`WAIT_REPLY_MARGIN`], at least `base` (the timeout of other replies); no limit for a
/// `WAIT` that waits forever (a zero timeout).
fn wait_reply_timeout(timeout: Duration, base: Duration) -> Option<Duration> {
    (wait_ms(timeout) > 0).then(|| base.max(timeout.saturating_add(WAIT_REPLY_MARGIN)))
}

/// A command's key, by the redis crate's rule for commands it does not know (as
/// `BF.HASHADD`): its first argument.
fn first_key(command: &Cmd) -> Option<&[u8]> {
    match command.args_iter().nth(1)? {
        Arg::Simple(key) => Some(key),
        _ => None,
    }
}

/// The routes to the primaries of the slots of `keys`: one per slot, in the order first
/// met.
fn routes<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Vec<Route> {
    let mut seen = std::collections::HashSet::new();
    keys.map(|key| Route::with_key(key, SlotAddr::Master))
        .filter(|route| seen.insert(*route))
        .collect()
}

/// `WAIT replicas timeout` on the connections of `inner` (on a cluster, one per route in
/// `written`, as [`wait_on_primaries`] says, then one on each connection of this client's
/// own that carried a write since the last `WAIT` that covered it), waiting for its reply as long as
/// [`wait_reply_timeout`] says, then back to `base` for other replies. On a cluster, the
/// redis crate must not replace a node's connection meanwhile (it reconnects and sends the
/// command again on its own after a lost connection): a `WAIT` on a new connection would
/// count no write, so a lost connection is an error here, and the caller sends the batch
/// and the `WAIT` again.
fn send_wait(
    inner: &mut Inner,
    written: &[Route],
    replicas: usize,
    timeout: Duration,
    base: Duration,
) -> redis::RedisResult<Value> {
    let mut wait = redis::cmd("WAIT");
    wait.arg(replicas).arg(wait_ms(timeout));
    let reply_timeout = wait_reply_timeout(timeout, base);
    match inner {
        Inner::Single(connection) => {
            connection.set_read_timeout(reply_timeout)?;
            let reply = wait.query(connection);
            let restored = connection.set_read_timeout(Some(base));
            let reply = reply?;
            restored?;
            Ok(reply)
        }
        Inner::Cluster(cluster) => {
            let connection = &mut cluster.connection;
            connection.set_read_timeout(reply_timeout)?;
            connection.set_auto_reconnect(false);
            let mut reply = wait_on_primaries(connection, &wait, written, replicas);
            connection.set_auto_reconnect(true);
            let restored = connection.set_read_timeout(Some(base));
            let enough = |reply: &Value| matches!(reply, Value::Int(got) if *got >= i64::try_from(replicas).unwrap_or(i64::MAX));
            // And every node a batch wrote to, on the connection that carried the writes.
            if reply.as_ref().is_ok_and(enough) {
                let addresses: Vec<String> = cluster.unwaited.iter().cloned().collect();
                for address in addresses {
                    let Some(connection) = cluster.asked.get_mut(&address) else {
                        // Its writes' connection gone: not waited on, so not acknowledged
                        // (a lost connection: the batch and its `WAIT` go again).
                        return Err(RedisError::from(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            format!(
                                "node {address}: the connection that carried writes was lost before their WAIT"
                            ),
                        )));
                    };
                    connection.set_read_timeout(reply_timeout)?;
                    let asked: redis::RedisResult<Value> = wait.query(connection);
                    let restored = connection.set_read_timeout(Some(base));
                    let asked = match asked.and_then(|asked| restored.map(|()| asked)) {
                        Ok(asked) => asked,
                        Err(error) => {
                            // A node demoted since (its `WAIT` refused on a replica), or a
                            // connection lost: dropped, so that the batch, sent again as a
                            // whole, goes where the slots are now, and this address is
                            // not waited on forever.
                            cluster.asked.remove(&address);
                            cluster.unwaited.remove(&address);
                            return Err(error);
                        }
                    };
                    if !enough(&asked) {
                        reply = Ok(asked);
                        break;
                    }
                }
                if reply.as_ref().is_ok_and(enough) {
                    cluster.unwaited.clear();
                }
            }
            let reply = reply?;
            restored?;
            Ok(reply)
        }
    }
}

/// `wait` on the primary of each route in `written`, as the redis crate routes a command
/// for a key of that slot (its slot map, primary; the same map, and the same connection
/// per node, as the single commands that wrote those keys used), in order: the fewest replicas answered, up to
/// the first answer below `replicas` (a `WAIT` blocks at most once per primary: a second
/// one on a primary that answered enough has nothing new to count and answers at once);
/// `replicas` when `written` is empty. The redis crate's routing of a keyless `WAIT`
/// would send it to every primary instead, and a primary not written to, with fewer
/// replicas, would fail the batch.
fn wait_on_primaries(
    connection: &mut redis::cluster::ClusterConnection,
    wait: &Cmd,
    written: &[Route],
    replicas: usize,
) -> redis::RedisResult<Value> {
    let wanted = i64::try_from(replicas).unwrap_or(i64::MAX);
    let mut fewest: Option<i64> = None;
    for &route in written {
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
        match connection.route_command(wait, routing)? {
            Value::Int(got) => {
                fewest = Some(fewest.map_or(got, |fewest| fewest.min(got)));
                if got < wanted {
                    break;
                }
            }
            other => return Ok(other),
        }
    }
    Ok(Value::Int(fewest.unwrap_or(wanted)))
}

/// The first of `nodes` that answers and is a server not in cluster mode (`INFO cluster`
/// says `cluster_enabled:0`), as its messages show it; `None` if the first that answers
/// is a cluster node, or none answers. The redis crate reaches the first node that
/// answers.
fn not_a_cluster(nodes: &[String], timeout: Duration) -> Option<String> {
    for node in nodes {
        let Ok(mut connection) =
            redis::Client::open(node.as_str()).and_then(|client| client.get_connection_with_timeout(timeout))
        else {
            continue;
        };
        connection.set_read_timeout(Some(timeout)).ok()?;
        let info: String = redis::cmd("INFO").arg("cluster").query(&mut connection).ok()?;
        return info
            .lines()
            .any(|line| line.trim() == "cluster_enabled:0")
            .then(|| redacted(node));
    }
    None
}

fn connect(target: &Target, timeout: Duration) -> redis::RedisResult<Inner> {
    match target {
        Target::Single(url) => {
            let client = redis::Client::open(url.as_str())?;
            let connection = client.get_connection_with_timeout(timeout)?;
            connection.set_read_timeout(Some(timeout))?;
            connection.set_write_timeout(Some(timeout))?;
            Ok(Inner::Single(connection))
        }
        Target::Cluster(nodes) => {
            // Few retries inside the redis crate (enough to follow a redirection, quickly):
            // this client's own retries, bounded by `retry_for`, do the rest. Its defaults
            // (16 retries with waits doubling up to minutes) made one command take minutes
            // while a cluster was down, whatever `retry_for` said.
            let client = redis::cluster::ClusterClient::builder(nodes.clone())
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(CLUSTER_CLIENT_RETRIES)
                .min_retry_wait(10)
                .max_retry_wait(200)
                .build()?;
            Ok(Inner::Cluster(Box::new(ClusterInner {
                connection: client.get_connection()?,
                template: nodes[0].clone(),
                timeout,
                asked: std::collections::HashMap::new(),
                unwaited: std::collections::BTreeSet::new(),
                slots: None,
            })))
        }
    }
}

/// The plan in the metadata key `name`; `None` when the key is missing.
fn read_plan(connection: &mut Connection, name: &str) -> Result<Option<ShardPlan>> {
    let mut get = redis::cmd("GET");
    get.arg(name);
    let reply = connection.query(&get, &|| format!("reading sharded filter '{name}'"))?;
    let text = match reply {
        Value::Nil => return Ok(None),
        Value::BulkString(bytes) => String::from_utf8(bytes).map_err(|_| {
            Error::Mismatch(format!(
                "key '{name}' holds a string that is not a sharded filter's metadata"
            ))
        })?,
        other => {
            return Err(Error::Reply {
                command: "GET",
                reply: format!("{other:?}"),
            });
        }
    };
    ShardPlan::from_text(&text).map(Some).map_err(|error| {
        Error::Mismatch(format!(
            "key '{name}' is not a sharded filter's metadata: {error}"
        ))
    })
}

/// The keys of the shards of `name` under `plan`, in shard order.
fn shard_keys(name: &str, plan: &ShardPlan) -> Vec<String> {
    (0..plan.shards())
        .map(|shard| plan.shard_key(name, shard))
        .collect()
}

/// Shards reserved per pipeline when a filter is created.
const RESERVE_BATCH: usize = 4096;

/// `BF.HASHRESERVE` for every shard of `plan`: makes the missing ones, checks the others.
/// Returns the keys of shards that hold items (of a filter whose plan is gone, or of one a
/// concurrent create just made and a client added to), and of those it made.
fn reserve_shards(
    connection: &mut Connection,
    name: &str,
    plan: &ShardPlan,
) -> Result<(Vec<String>, Vec<String>)> {
    let mut holding = Vec::new();
    let mut made = Vec::new();
    for batch in shard_keys(name, plan).chunks(RESERVE_BATCH) {
        let commands: Vec<Cmd> = batch
            .iter()
            .map(|key| {
                let mut reserve = redis::cmd("BF.HASHRESERVE");
                reserve.arg(key).arg(plan.blocks_per_shard()).arg(plan.seed());
                reserve
            })
            .collect();
        let context = || format!("making the shards of sharded filter '{name}'");
        let replies = connection
            .pipeline(&commands, &context)
            .map_err(|error| match error {
                Error::Redis { context, source }
                    if source
                        .to_string()
                        .to_ascii_lowercase()
                        .contains("unknown command") =>
                {
                    Error::Redis {
                        context: format!("{context} (is the bloomery module loaded?)"),
                        source,
                    }
                }
                other => other,
            })?;
        if replies.len() != commands.len() || !replies.iter().all(|reply| matches!(reply, Value::Int(0..=2)))
        {
            return Err(Error::Reply {
                command: "BF.HASHRESERVE",
                reply: format!("{replies:?}"),
            });
        }
        for (key, reply) in batch.iter().zip(&replies) {
            match reply {
                Value::Int(2) => holding.push(key.clone()),
                Value::Int(1) => made.push(key.clone()),
                _ => {}
            }
        }
    }
    Ok((holding, made))
}

/// The filter's items estimated from those of its first shards (`shard_items`, u64::MAX
/// for a saturated one) out of `shards`: their sum (saturating), scaled by `shards` over
/// the shards read.
fn scaled_items(shard_items: &[u64], shards: u32) -> u64 {
    let read = shard_items
        .iter()
        .fold(0u64, |sum, &items| sum.saturating_add(items));
    if read == u64::MAX || shard_items.is_empty() || shard_items.len() as u64 >= u64::from(shards) {
        return read;
    }
    let scaled = u128::from(read) * u128::from(shards) / shard_items.len() as u128;
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// One `command` per key (`EXISTS`, `DEL`), to send pipelined.
fn per_key(command: &'static str, keys: &[String]) -> Vec<Cmd> {
    keys.iter()
        .map(|key| {
            let mut cmd = redis::cmd(command);
            cmd.arg(key);
            cmd
        })
        .collect()
}

/// Where `name` has no plan and a create would make `plan`'s shards at spread keys
/// ([`KeyScheme::Spread`]): refuses if shards of an earlier bloomery's filter of that name
/// are at its `{s:NAME}` keys (one of the plan's S, shard 0 included, for a filter of any
/// shard count). That filter lost its plan; a filter made beside it would answer its items
/// absent, where a create at the same keys refuses (its shards hold items).
fn refuse_earlier_shards(connection: &mut Connection, name: &str, plan: &ShardPlan) -> Result<()> {
    if plan.key_scheme() != KeyScheme::Spread {
        return Ok(());
    }
    let tagged = plan.with_key_scheme(KeyScheme::Tagged);
    let keys: Vec<String> = (0..plan.shards())
        .map(|shard| tagged.shard_key(name, shard))
        .collect();
    for batch in keys.chunks(RESERVE_BATCH) {
        let commands = per_key("EXISTS", batch);
        let replies = connection.pipeline(&commands, &|| {
            format!("looking for the shards of an earlier sharded filter '{name}'")
        })?;
        if let Some((key, _)) = batch
            .iter()
            .zip(&replies)
            .find(|(_, reply)| matches!(reply, Value::Int(1..)))
        {
            return Err(Error::Mismatch(format!(
                "sharded filter '{name}' has no plan, but the shards of one an earlier bloomery made are there (first {key}; keys {{s:{name}}}, plan v1): that filter lost its plan (deleted, evicted, or a node restarted without persistence), and a filter made beside it would answer its items absent; delete its shards to make it anew"
            )));
        }
    }
    Ok(())
}

/// A sharded filter: its plan, read from or written to the metadata key `name`, and its
/// shards at the keys the plan names ([`ShardPlan::shard_key`]).
pub struct ShardedFilter {
    connection: Connection,
    name: String,
    plan: ShardPlan,
    keys: Vec<String>,
    wait: Option<(usize, Duration)>,
    /// Whether this client created the metadata key (written by a single command, on the
    /// redis crate's connection), for [`wait_for`](Self::wait_for); the shards' writes go
    /// on the connections a `WAIT` covers by themselves ([`Connection::wait`]).
    created: bool,
    /// Whether this client created the metadata key and no `WAIT` since has counted it:
    /// the next batch's `WAIT` goes to its primary too.
    metadata_unwaited: bool,
}

/// A sharded filter's state, as [`ShardedFilter::info`] finds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Info {
    /// The plan.
    pub plan: ShardPlan,
    /// Shards that exist among those read: all of them, unless some were lost (deleted,
    /// evicted, flushed, a restart without persistence), which makes every command on
    /// them an error.
    pub shards_created: u32,
    /// Distinct items, estimated from each shard's bit count, summed (saturating; scaled
    /// by S over the shards read when not all were, [`ShardedFilter::info_of_first`]): the
    /// shards with every bit set ([`saturated_shards`](Self::saturated_shards)) count as
    /// `u64::MAX`, so any of them makes the sum `u64::MAX`.
    pub estimated_items: u64,
    /// Each shard's estimated items (`BF.CARD`, 0 for a missing shard), in shard order,
    /// for the shards read; `u64::MAX` for a shard whose every bit is set, which answers
    /// "present" for anything.
    pub shard_items: Vec<u64>,
}

impl Info {
    /// The shards whose every bit is set.
    pub fn saturated_shards(&self) -> usize {
        self.shard_items
            .iter()
            .filter(|&&items| items == u64::MAX)
            .count()
    }

    /// The filter's false-positive rate estimated from each shard's items: the mean of the
    /// shards' rates (an item is routed to each shard alike), 1 for a saturated shard.
    pub fn fpp_estimate(&self) -> f64 {
        if self.shard_items.is_empty() {
            return 0.0;
        }
        let blocks = self.plan.blocks_per_shard();
        let sum: f64 = self
            .shard_items
            .iter()
            .map(|&items| {
                if items == u64::MAX {
                    1.0
                } else {
                    bloomery::sizing::blocked_false_positive_rate(blocks, items)
                }
            })
            .sum();
        sum / self.shard_items.len() as f64
    }
}

/// Whether a filter whose stored plan is `existing` is the one `asked` describes: the same
/// plan, or one made for the same items, rate, seed and shards whose blocks per shard an
/// earlier sizing chose (bloomery's block sizing counts a floor under the rate since
/// 2026-11-28, which adds blocks below about 10^-7: a `create` run again for a filter made
/// before was refused as "other parameters"). Its shards are what its plan says.
fn same_filter(existing: &ShardPlan, asked: &ShardPlan) -> bool {
    existing == asked
        || (existing.expected_items() == asked.expected_items()
            && existing.fpp() == asked.fpp()
            && existing.seed() == asked.seed()
            && existing.shards() == asked.shards())
}

impl ShardedFilter {
    /// Creates the filter `name` with `plan`: makes its S shards (`BF.HASHRESERVE`: empty
    /// blocked filters of the plan's geometry; shards that exist are checked and kept),
    /// then writes the plan to the metadata key (`SET NX`), so that a filter whose plan
    /// exists has every shard, and a shard missing later is one it lost: an error for
    /// every command on it, never answers for items it lost. If the filter exists with the
    /// same plan (or one an earlier sizing made for the same items, rate, seed and shards,
    /// with other blocks per shard), opens it (`created` is false) and makes nothing, a
    /// lost shard included (making it anew would hide the loss); with another plan, an
    /// error. A create that
    /// stopped part way wrote no plan, and the next one completes it. Nothing is written
    /// where the module is not loaded or a shard would be over its cap.
    pub fn create(mut connection: Connection, name: &str, plan: ShardPlan) -> Result<(Self, bool)> {
        check_name(name)?;
        let text = plan.to_text();
        let mismatch = |existing: &ShardPlan| {
            Error::Mismatch(format!(
                "sharded filter '{name}' exists with other parameters ({existing}); asked for {text}"
            ))
        };
        let existing = read_plan(&mut connection, name)?;
        if let Some(existing) = &existing
            && !same_filter(existing, &plan)
        {
            return Err(mismatch(existing));
        }
        let mut created = false;
        if existing.is_none() {
            refuse_earlier_shards(&mut connection, name, &plan)?;
            let (holding, made) = match reserve_shards(&mut connection, name, &plan) {
                Ok(reserved) => reserved,
                // A shard of another geometry: another create of the name with other
                // parameters (at the same time, or one that stopped part way). Said as
                // such, not as a shard command's error.
                Err(Error::Redis { context, source })
                    if source.to_string().contains("another filter's plan") =>
                {
                    return match read_plan(&mut connection, name)? {
                        Some(existing) if same_filter(&existing, &plan) => {
                            Self::open(connection, name).map(|filter| (filter, false))
                        }
                        Some(existing) => Err(mismatch(&existing)),
                        None => Err(Error::Mismatch(format!(
                            "sharded filter '{name}' has no plan, and some of its shards were made for another (another create of the name with other parameters is running, or one stopped part way): {context}: {source}; if no other create is running, delete its shards ({} .. {}, docs/sharding.md) and create it again",
                            plan.shard_key(name, 0),
                            plan.shard_key(name, plan.shards() - 1)
                        ))),
                    };
                }
                Err(other) => return Err(other),
            };
            // Shards with items where no plan is: a filter that lost its plan (evicted, a
            // node restarted empty, deleted), unless another create wrote it meanwhile.
            // Taking them over would make its lost shards anew, empty: its items there
            // would be answered absent.
            if !holding.is_empty() && read_plan(&mut connection, name)?.is_none() {
                // What this create made goes again (best effort): the refusal leaves the
                // keys as it found them. An interrupt ends it (the caller asked to stop).
                for batch in made.chunks(RESERVE_BATCH) {
                    let commands = per_key("DEL", batch);
                    let removed =
                        connection.pipeline(&commands, &|| format!("removing the shards made for '{name}'"));
                    if let Err(error @ Error::Interrupted(_)) = removed {
                        return Err(error);
                    }
                }
                return Err(Error::Mismatch(format!(
                    "sharded filter '{name}' has no plan, but {} of its shards hold items (first {}): a filter of that name lost its plan (deleted, evicted, or a node restarted without persistence), and taking its shards over would lose items silently; delete its shards ({} .. {}, docs/sharding.md) to make it anew",
                    holding.len(),
                    holding[0],
                    plan.shard_key(name, 0),
                    plan.shard_key(name, plan.shards() - 1)
                )));
            }
            let mut set = redis::cmd("SET");
            set.arg(name).arg(&text).arg("NX");
            let reply = connection.query(&set, &|| format!("creating sharded filter '{name}'"))?;
            created = matches!(reply, Value::Okay) || matches!(&reply, Value::SimpleString(ok) if ok == "OK");
        }
        let mut filter = Self::open(connection, name)?;
        if !same_filter(&filter.plan, &plan) {
            // Another client created the name with another plan meanwhile.
            return Err(mismatch(&filter.plan));
        }
        if created {
            // Its shards were written too: a failover that lost one before any add reached
            // it would leave a filter that no command can use; the first WAIT covers them.
            filter.created = true;
            filter.metadata_unwaited = true;
        }
        Ok((filter, created))
    }

    /// Opens the filter `name`: reads its plan from the metadata key, and checks that the
    /// server (on a cluster, every primary) has the bloomery module loaded
    /// ([`Error::ModuleMissing`] naming the first that has not; unchecked where `COMMAND`
    /// is refused, or a server does not answer it).
    pub fn open(mut connection: Connection, name: &str) -> Result<Self> {
        check_name(name)?;
        let plan = read_plan(&mut connection, name)?.ok_or_else(|| Error::NotFound(name.into()))?;
        if let Some(node) = connection.without_module().into_iter().next() {
            return Err(Error::ModuleMissing(node));
        }
        let keys = shard_keys(name, &plan);
        Ok(Self {
            connection,
            name: name.into(),
            plan,
            keys,
            wait: None,
            created: false,
            metadata_unwaited: false,
        })
    }

    /// The plan.
    pub fn plan(&self) -> &ShardPlan {
        &self.plan
    }

    /// The filter's name (its metadata key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// After every batch of adds, `WAIT` for `replicas` replicas of every primary written
    /// to (on a cluster, the primaries of the batch's shards, and, with the first batch
    /// after [`create`](Self::create) wrote the metadata key, its primary too), at most
    /// `timeout` (zero: as long as it takes, as Redis's `WAIT n 0`; on a cluster, per
    /// primary); fewer is an error ([`Error::NotAcknowledged`]). The batch and its `WAIT`
    /// are sent as one unit: after a failure worth retrying in either, both are sent again
    /// on the new
    /// connections ([`Connection::pipeline_and_wait`]). `add_hashes` then returns only what
    /// the replicas have too: what survives a failover (docs/failure-model.md).
    pub fn set_wait(&mut self, replicas: usize, timeout: Duration) {
        self.wait = Some((replicas, timeout)).filter(|&(replicas, _)| replicas > 0);
    }

    /// The hash of `item` (the plan's).
    pub fn hash<T: Funnel + ?Sized>(&self, item: &T) -> u64 {
        self.plan.hash(item)
    }

    /// Adds items by their hashes ([`ShardPlan::hash`]); per hash, whether it was new (a
    /// bit changed). A hash repeated in `hashes` is new at most once, at its first place.
    pub fn add_hashes(&mut self, hashes: &[u64]) -> Result<Vec<bool>> {
        self.add_hashes_doubted(hashes).map(|(new, _)| new)
    }

    /// [`add_hashes`](Self::add_hashes), and per hash whether its answer "old" may be
    /// wrong: its shard's command was sent, its reply lost (a connection lost, no reply in
    /// time), and sent again, whose reply says "old" for items the first send added. Such
    /// an item is in the filter, but whether this call added it is unknown. (A redirected
    /// command, or one that met an error reply, did not run, and is never doubted.)
    pub fn add_hashes_doubted(&mut self, hashes: &[u64]) -> Result<(Vec<bool>, Vec<bool>)> {
        let command = "BF.HASHADD";
        let (groups, commands) = self.commands(command, hashes);
        let name = &self.name;
        // The metadata key this client created is waited for with the first batch after
        // (the shards it made went on the connections a batch's `WAIT` covers).
        let created_keys: Vec<&[u8]> = if self.metadata_unwaited {
            vec![name.as_bytes()]
        } else {
            Vec::new()
        };
        let earlier: &[&[u8]] = &created_keys;
        let (replies, waited, unsure) = self
            .connection
            .pipeline_and_wait_also(&commands, earlier, self.wait, &|| {
                format!("{command} on sharded filter '{name}'")
            })
            .map_err(|error| shard_named(error, &self.keys))?;
        let flags = answers(command, &groups, replies, hashes.len())?;
        if let (Some((replicas, timeout)), Some(reply)) = (self.wait, waited) {
            check_acknowledged(reply, replicas, timeout)?;
            self.metadata_unwaited = false;
        }
        let mut doubted = vec![false; hashes.len()];
        for ((_, positions), _) in groups.iter().zip(&unsure).filter(|(_, unsure)| **unsure) {
            for &position in positions {
                doubted[position] = !flags[position];
            }
        }
        Ok((flags, doubted))
    }

    /// Looks items up by their hashes: per hash, whether it is probably present.
    pub fn contains_hashes(&mut self, hashes: &[u64]) -> Result<Vec<bool>> {
        let command = "BF.HASHEXISTS";
        let (groups, commands) = self.commands(command, hashes);
        let name = &self.name;
        let replies = self
            .connection
            .pipeline(&commands, &|| format!("{command} on sharded filter '{name}'"))
            .map_err(|error| shard_named(error, &self.keys))?;
        answers(command, &groups, replies, hashes.len())
    }

    /// Adds items (hashed with the plan); as [`add_hashes`](Self::add_hashes).
    pub fn add<T: Funnel + ?Sized>(&mut self, items: &[&T]) -> Result<Vec<bool>> {
        let hashes: Vec<u64> = items.iter().map(|item| self.plan.hash(*item)).collect();
        self.add_hashes(&hashes)
    }

    /// Looks items up (hashed with the plan); as [`contains_hashes`](Self::contains_hashes).
    pub fn contains<T: Funnel + ?Sized>(&mut self, items: &[&T]) -> Result<Vec<bool>> {
        let hashes: Vec<u64> = items.iter().map(|item| self.plan.hash(*item)).collect();
        self.contains_hashes(&hashes)
    }

    /// `WAIT replicas timeout` on every primary this client wrote to (on a cluster, those
    /// its batches wrote to since the last `WAIT` that covered them, and the metadata key's
    /// if it created it), on its current connections ([`Connection::wait`]: not retried, since a `WAIT` on a new
    /// connection counts no write). [`set_wait`](Self::set_wait) is the way to wait for
    /// each batch.
    pub fn wait_for(&mut self, replicas: usize, timeout: Duration) -> Result<()> {
        let written: Vec<&str> = self.created.then_some(self.name.as_str()).into_iter().collect();
        let reply = self.connection.wait(&written, replicas, timeout)?;
        check_acknowledged(reply, replicas, timeout)?;
        self.metadata_unwaited = false;
        Ok(())
    }

    /// The shards that have hashes (with the positions of theirs), and one `command` for
    /// each, to send pipelined.
    fn commands(&self, command: &'static str, hashes: &[u64]) -> (Vec<(u32, Vec<usize>)>, Vec<Cmd>) {
        let groups = group_by_shard(&self.plan, hashes);
        let blocks = self.plan.blocks_per_shard();
        let seed = self.plan.seed();
        let commands: Vec<Cmd> = groups
            .iter()
            .map(|(shard, positions)| {
                let mut bytes = Vec::with_capacity(positions.len() * 8);
                for &position in positions {
                    bytes.extend_from_slice(&hashes[position].to_le_bytes());
                }
                let mut cmd = redis::cmd(command);
                cmd.arg(&self.keys[*shard as usize])
                    .arg(blocks)
                    .arg(seed)
                    .arg(bytes);
                cmd
            })
            .collect();
        (groups, commands)
    }

    /// The keys of the shards that are missing (lost: deleted, evicted, flushed, a restart
    /// without persistence), by `EXISTS`, without reading any shard's bits.
    pub fn missing_shards(&mut self) -> Result<Vec<String>> {
        let commands = per_key("EXISTS", &self.keys);
        let name = &self.name;
        let replies = self
            .connection
            .pipeline(&commands, &|| format!("looking for the shards of '{name}'"))?;
        Ok(self
            .keys
            .iter()
            .zip(&replies)
            .filter(|(_, reply)| matches!(reply, Value::Int(0)))
            .map(|(key, _)| key.clone())
            .collect())
    }

    /// The plan, how many shards exist, and the estimated number of items (each shard's
    /// `BF.CARD`, summed): a pass over every shard's bits, each on its node's main thread.
    pub fn info(&mut self) -> Result<Info> {
        self.info_of_first(self.plan.shards())
    }

    /// As [`info`](Self::info) from the first `count` shards only (at least one, at most
    /// all): items are routed to every shard alike, so their items scaled by S / `count`
    /// estimate the filter's. What `bloomery add` reads after its batches to warn of a
    /// filter past its sizing, without a pass over every shard of a large filter.
    pub fn info_of_first(&mut self, count: u32) -> Result<Info> {
        let count = count.clamp(1, self.plan.shards()) as usize;
        let mut commands = Vec::with_capacity(2 * count);
        for key in &self.keys[..count] {
            let mut exists = redis::cmd("EXISTS");
            exists.arg(key);
            let mut card = redis::cmd("BF.CARD");
            card.arg(key);
            commands.push(exists);
            commands.push(card);
        }
        let name = &self.name;
        let replies = self
            .connection
            .pipeline(&commands, &|| format!("reading the shards of '{name}'"))
            .map_err(|error| shard_named(error, &self.keys))?;
        let mut info = Info {
            plan: self.plan,
            shards_created: 0,
            estimated_items: 0,
            shard_items: Vec::with_capacity(count),
        };
        for pair in replies.chunks(2) {
            match pair {
                [Value::Int(exists), Value::Int(card)] => {
                    if *exists > 0 {
                        info.shards_created += 1;
                    }
                    // A shard whose every bit is set estimates u64::MAX items: the
                    // module answers i64::MAX for it (-1 before 2026-11-28, a plain cast).
                    let items = match u64::try_from(*card) {
                        Ok(items) if *card < i64::MAX => items,
                        _ => u64::MAX,
                    };
                    info.shard_items.push(items);
                }
                other => {
                    return Err(Error::Reply {
                        command: "EXISTS/BF.CARD",
                        reply: format!("{other:?}"),
                    });
                }
            }
        }
        info.estimated_items = scaled_items(&info.shard_items, self.plan.shards());
        Ok(info)
    }

    /// The connection back.
    pub fn into_connection(self) -> Connection {
        self.connection
    }
}

/// The per-hash answers, in the order of the `count` hashes, from the replies to the
/// commands of `groups` ([`ShardedFilter::commands`]).
fn answers(
    command: &'static str,
    groups: &[(u32, Vec<usize>)],
    replies: Vec<Value>,
    count: usize,
) -> Result<Vec<bool>> {
    // One reply per shard's command: a reply missing or extra is one read out of turn.
    if replies.len() != groups.len() {
        return Err(Error::Reply {
            command,
            reply: format!("{} replies to {} commands", replies.len(), groups.len()),
        });
    }
    let mut answers = vec![false; count];
    for ((_, positions), reply) in groups.iter().zip(replies) {
        let bytes = match reply {
            Value::BulkString(bytes) if bytes.len() == positions.len() => bytes,
            other => {
                return Err(Error::Reply {
                    command,
                    reply: format!("{other:?}"),
                });
            }
        };
        for (&position, &flag) in positions.iter().zip(&bytes) {
            answers[position] = flag == 1;
        }
    }
    Ok(answers)
}

/// `WAIT`'s reply: fewer than `replicas` is [`Error::NotAcknowledged`].
fn check_acknowledged(reply: Value, replicas: usize, timeout: Duration) -> Result<()> {
    let got = match reply {
        Value::Int(got) => got.max(0) as usize,
        other => {
            return Err(Error::Reply {
                command: "WAIT",
                reply: format!("{other:?}"),
            });
        }
    };
    if got < replicas {
        return Err(Error::NotAcknowledged {
            wanted: replicas,
            got,
            timeout,
        });
    }
    Ok(())
}

/// The positions of `hashes` per shard, shards in increasing order and positions in
/// input order (so the module sees a shard's hashes in the caller's order).
pub fn group_by_shard(plan: &ShardPlan, hashes: &[u64]) -> Vec<(u32, Vec<usize>)> {
    let mut per_shard: Vec<Vec<usize>> = vec![Vec::new(); plan.shards() as usize];
    for (position, &hash) in hashes.iter().enumerate() {
        per_shard[plan.shard_of(hash) as usize].push(position);
    }
    per_shard
        .into_iter()
        .enumerate()
        .filter(|(_, positions)| !positions.is_empty())
        .map(|(shard, positions)| (shard as u32, positions))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_of_shards_is_scaled_to_the_filter() {
        // All shards read: their sum.
        assert_eq!(scaled_items(&[10, 20, 30], 3), 60);
        // Two of eight: scaled by 4.
        assert_eq!(scaled_items(&[100, 102], 8), 808);
        // A saturated shard read makes the filter's estimate saturated.
        assert_eq!(scaled_items(&[100, u64::MAX], 8), u64::MAX);
        // Scaling past u64 saturates rather than wraps.
        assert_eq!(scaled_items(&[u64::MAX / 2], 1 << 20), u64::MAX);
        assert_eq!(scaled_items(&[], 8), 0);
    }

    #[test]
    fn targets_parse() {
        assert_eq!(
            "redis://127.0.0.1:6379".parse::<Target>().unwrap(),
            Target::Single("redis://127.0.0.1:6379".into())
        );
        assert_eq!(
            "redis+cluster://127.0.0.1:7000,127.0.0.1:7001/"
                .parse::<Target>()
                .unwrap(),
            Target::Cluster(vec![
                "redis://127.0.0.1:7000".into(),
                "redis://127.0.0.1:7001".into()
            ])
        );
        // The first node's user and password go to the nodes that give none (the redis
        // crate refused "different password among initial nodes"); a node's own stay.
        assert_eq!(
            "redis+cluster://app:pw@a:7000,b:7001,other:x@c:7002"
                .parse::<Target>()
                .unwrap(),
            Target::Cluster(vec![
                "redis://app:pw@a:7000".into(),
                "redis://app:pw@b:7001".into(),
                "redis://other:x@c:7002".into()
            ])
        );
        assert!("127.0.0.1:6379".parse::<Target>().is_err());
        assert!("redis+cluster://a:1,,b:2".parse::<Target>().is_err());
        for socket in ["unix:///run/redis.sock", "redis+unix:///run/redis.sock"] {
            assert_eq!(socket.parse::<Target>().unwrap(), Target::Single(socket.into()));
        }
        // TLS is not built in: refused when parsed, not at the first connect, and the
        // message does not show the password.
        let message = "rediss://app:s3cret@db:6380"
            .parse::<Target>()
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("TLS (rediss://) is not built into this client"),
            "{message}"
        );
        assert!(!message.contains("s3cret"), "{message}");
    }

    #[test]
    fn passwords_are_hidden_wherever_a_url_holds_one() {
        for (url, shown) in [
            ("redis://app:s3cret@db:6379/0", "redis://app:***@db:6379/0"),
            ("redis://:s3cret@db:6379", "redis://:***@db:6379"),
            ("redis://app:p%40ss@[::1]:6379", "redis://app:***@[::1]:6379"),
            (
                "unix:///run/redis.sock?db=1&pass=s3cret",
                "unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "redis+unix:///run/redis.sock?password=s3cret",
                "redis+unix:///run/redis.sock?password=***",
            ),
            ("redis://db:6379", "redis://db:6379"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
        // Not a URL the parser takes: everything up to the last '@' hidden.
        assert_eq!(redacted("redis://app:s3cret@db:port"), "redis://***@db:port");
    }

    #[test]
    fn errors_name_the_key_the_shard_and_the_node() {
        let one = RedisError::from(
            match redis::parse_redis_value(
                b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ) {
                Ok(Value::ServerError(error)) => error,
                other => panic!("{other:?}"),
            },
        );
        // The context names the key of the command that failed, and the shard it is.
        let command = {
            let mut command = redis::cmd("BF.HASHADD");
            command.arg("{06S}1:f").arg(1).arg(2);
            command
        };
        let keys = vec!["{06S}0:f".to_owned(), "{06S}1:f".to_owned()];
        let context = with_key(
            "BF.HASHADD on sharded filter 'f'".to_owned(),
            std::slice::from_ref(&command),
            Some(0),
            &[],
        );
        let error = shard_named(
            Error::Redis {
                context,
                source: one.clone(),
            },
            &keys,
        );
        let said = error.to_string();
        assert!(said.contains("on key '{06S}1:f' (shard 1 of 2)"), "{said}");
        assert!(said.contains("WRONGTYPE") && !said.contains("Index"), "{said}");
        // Other commands of the batch that failed are counted by their codes, after the
        // shard (a key that is the start of another key is not taken for it).
        let more = ["NOSHARD", "NOSHARD", "WRONGTYPE"].map(str::to_owned);
        let context = with_key(
            "BF.HASHADD on sharded filter 'f'".to_owned(),
            &[command],
            Some(0),
            &more,
        );
        let longer = vec!["{06S}1:f".to_owned(), "{06S}1:".to_owned()];
        let said = shard_named(Error::Redis { context, source: one }, &longer).to_string();
        assert!(
            said.contains(
                "on key '{06S}1:f' (shard 0 of 2) (and 3 more of the pipeline's commands failed: 2 NOSHARD, 1 WRONGTYPE)"
            ),
            "{said}"
        );
        // A connection refused by a node says the node, and stays an I/O error (retried).
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let at = at_node("127.0.0.1:30001", refused);
        assert!(at.to_string().contains("node 127.0.0.1:30001"), "{at}");
        assert!(at.is_io_error() && worth_retrying(&at));
        let timed_out = at_node(
            "127.0.0.1:30002",
            RedisError::from(std::io::Error::from(std::io::ErrorKind::WouldBlock)),
        );
        assert!(timed_out.is_timeout(), "{timed_out}");
    }

    /// `reply` (one RESP error line) as the redis crate reads it from a server.
    fn server_error(reply: &[u8]) -> RedisError {
        match redis::parse_redis_value(reply) {
            Ok(Value::ServerError(error)) => RedisError::from(error),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wait_unblocked_by_a_failover_is_worth_retrying() {
        // Redis 7's reply to a WAIT blocked on a primary that became a replica.
        let unblocked = server_error(
            b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n",
        );
        // The redis crate 1.8 does not know the code: an extension error, its code and
        // detail as Redis sent them, and no I/O error (the connection stays in step).
        assert_eq!(unblocked.kind(), ErrorKind::Extension);
        assert_eq!(unblocked.code(), Some("UNBLOCKED"));
        assert!(!unblocked.is_io_error() && in_step(&unblocked));
        assert!(worth_retrying(&unblocked), "{unblocked:?}");
        // As the WAIT refused on a replica.
        let on_a_replica = server_error(b"-ERR WAIT cannot be used with replica instances.\r\n");
        assert!(worth_retrying(&on_a_replica));
        // A client unblocked by CLIENT UNBLOCK ... ERROR, or another error, is not.
        let by_a_client = server_error(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
        assert!(!worth_retrying(&by_a_client));
        let other = server_error(b"-ERR timeout is not an integer or out of range\r\n");
        assert!(!worth_retrying(&other));
    }

    #[test]
    fn an_error_names_its_node_once() {
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let named = at_node("127.0.0.1:7721", at_node("127.0.0.1:7721", refused));
        assert_eq!(
            named.to_string().matches("node 127.0.0.1:7721: ").count(),
            1,
            "{named}"
        );
        assert!(named.is_io_error());
    }

    #[test]
    fn a_retry_time_past_what_the_clock_holds_is_no_deadline() {
        // It panicked ("overflow when adding duration to instant"); a port that does not
        // parse is an error not worth retrying, so the call returns at once.
        let target: Target = "redis://127.0.0.1:99999".parse().expect("a target");
        let started = Instant::now();
        let error = Connection::open_retrying(&target, Duration::MAX)
            .err()
            .expect("a port out of range");
        assert!(matches!(error, Error::Target { .. }), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn an_interrupt_ends_the_retries_of_a_connect() {
        // A port nothing listens on (bound, then let go): refused, worth retrying, for ever
        // without the interrupt, which is asked between tries and says stop at the third.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let target: Target = format!("redis://127.0.0.1:{port}").parse().expect("a target");
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = asked.clone();
        let interrupt: Interrupt =
            std::sync::Arc::new(move || counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 2);
        let error = Connection::open_interruptible(&target, Duration::MAX, Some(interrupt))
            .err()
            .expect("nothing listens");
        assert!(matches!(error, Error::Interrupted(_)), "{error}");
        assert!(
            error.to_string().contains("interrupted while retrying"),
            "{error}"
        );
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 3);
    }

    #[test]
    fn grouping_keeps_every_position_once_in_order() {
        let plan = ShardPlan::new(1_000_000, 0.01, 1 << 20, 16).unwrap();
        let hashes: Vec<u64> = (0..10_000u64).map(|i| plan.hash(&(i % 7_000))).collect();
        let groups = group_by_shard(&plan, &hashes);
        let mut seen = vec![false; hashes.len()];
        for (shard, positions) in &groups {
            assert!(positions.windows(2).all(|pair| pair[0] < pair[1]));
            for &position in positions {
                assert_eq!(plan.shard_of(hashes[position]), *shard);
                assert!(!seen[position]);
                seen[position] = true;
            }
        }
        assert!(seen.iter().all(|&seen| seen));
        assert_eq!(groups.len(), 16);
    }
}
