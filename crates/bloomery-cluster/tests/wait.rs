//! `ShardedFilter::set_wait`: a batch and its `WAIT` are one unit. Against a small server
//! on loopback that speaks enough of Redis's protocol and answers `WAIT` as Redis does
//! with one connected replica that is behind: a connection that has written waits the
//! whole timeout and answers 0; one that has not written answers 1 at once (Redis counts
//! `WAIT` against the connection's last write, and a new connection has made none). A
//! client that sent `WAIT` alone on a new connection after a failure, or cut a long `WAIT`
//! off at its own 10 s reply timeout and retried it, would be told the batch was on the
//! replica when it was not.
//!
//! And against a real three-primary Redis Cluster (further down): `WAIT` goes to the
//! primaries a batch wrote to, not to every primary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bloomery::sharding::ShardPlan;
use bloomery_cluster::{Connection, Error, ShardedFilter, Target};

/// What the server received: (connection number, command name), in order.
type Log = Arc<Mutex<Vec<(usize, String)>>>;

struct FakeRedis {
    port: u16,
    log: Log,
}

/// Reads one command (an array of bulk strings); `None` at the end of the stream.
fn read_command(reader: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let count: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let len: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut arg = vec![0; len + 2];
        reader.read_exact(&mut arg).ok()?;
        arg.truncate(len);
        args.push(arg);
    }
    Some(args)
}

fn bulk(bytes: &[u8]) -> Vec<u8> {
    let mut reply = format!("${}\r\n", bytes.len()).into_bytes();
    reply.extend_from_slice(bytes);
    reply.extend_from_slice(b"\r\n");
    reply
}

/// What the server does with the first `WAIT` it receives.
#[derive(Clone, Copy, PartialEq)]
enum FirstWait {
    /// Answers it as every other.
    Answered,
    /// Closes its connection instead (the connection lost mid-`WAIT`, as in a failover or
    /// a network cut).
    Dropped,
    /// Answers Redis's error for a `WAIT` sent to a replica (a primary demoted by a
    /// failover between the batch and its `WAIT`).
    OnAReplica,
    /// Answers Redis's error for a `WAIT` blocked on a primary that a failover demoted
    /// (`-UNBLOCKED`, a manual `CLUSTER FAILOVER` under way); later `WAIT`s answer 1 at
    /// once, and later `BF.HASHADD`s answer every item old (the first set its bits).
    Unblocked,
    /// The first `BF.HASHADD` closes its connection unanswered (having run), and later
    /// ones answer every item old (the first set its bits).
    AddDropped,
}

impl FakeRedis {
    /// Serves `plan` at every key `GET` asks for; the first `WAIT` as `first_wait` says.
    fn start(plan: &ShardPlan, first_wait: FirstWait) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("bound").port();
        let log: Log = Arc::default();
        let plan_text = plan.to_text();
        let connections = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicBool::new(first_wait == FirstWait::Answered));
        let server_log = Arc::clone(&log);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let number = connections.fetch_add(1, Ordering::SeqCst);
                let (log, plan_text, dropped) =
                    (Arc::clone(&server_log), plan_text.clone(), Arc::clone(&dropped));
                thread::spawn(move || serve(stream, number, &log, &plan_text, &dropped, first_wait));
            }
        });
        Self { port, log }
    }

    fn target(&self) -> Target {
        format!("redis://127.0.0.1:{}", self.port)
            .parse()
            .expect("a target")
    }

    /// The commands named `names`, in the order received, with their connection numbers.
    fn received(&self, names: &[&str]) -> Vec<(usize, String)> {
        let log = self.log.lock().expect("the log");
        log.iter()
            .filter(|(_, name)| names.contains(&name.as_str()))
            .cloned()
            .collect()
    }
}

fn serve(
    stream: TcpStream,
    number: usize,
    log: &Log,
    plan_text: &str,
    dropped: &AtomicBool,
    first_wait: FirstWait,
) {
    let mut writer = stream.try_clone().expect("a second handle");
    let mut reader = BufReader::new(stream);
    // Whether this connection has written (then its WAIT waits for the replica, which is
    // behind; else WAIT answers at once with the replica counted).
    let mut wrote = false;
    while let Some(args) = read_command(&mut reader) {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        log.lock().expect("the log").push((number, name.clone()));
        let reply = match name.as_str() {
            "GET" => bulk(plan_text.as_bytes()),
            "BF.HASHADD" if first_wait == FirstWait::AddDropped => {
                if !dropped.swap(true, Ordering::SeqCst) {
                    let _ = writer.shutdown(Shutdown::Both);
                    return;
                }
                bulk(&vec![0; args[4].len() / 8])
            }
            "BF.HASHADD" if first_wait == FirstWait::Unblocked && dropped.load(Ordering::SeqCst) => {
                bulk(&vec![0; args[4].len() / 8])
            }
            "BF.HASHADD" => {
                wrote = true;
                bulk(&vec![1; args[4].len() / 8])
            }
            "WAIT" => {
                if !dropped.swap(true, Ordering::SeqCst) {
                    if first_wait == FirstWait::OnAReplica {
                        let _ = writer.write_all(b"-ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.\r\n");
                        continue;
                    }
                    if first_wait == FirstWait::Unblocked {
                        let _ = writer.write_all(b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n");
                        continue;
                    }
                    let _ = writer.shutdown(Shutdown::Both);
                    return;
                }
                if first_wait == FirstWait::Unblocked {
                    b":1\r\n".to_vec()
                } else if wrote {
                    let ms: u64 = String::from_utf8_lossy(&args[2]).parse().expect("WAIT's timeout");
                    thread::sleep(Duration::from_millis(ms));
                    b":0\r\n".to_vec()
                } else {
                    b":1\r\n".to_vec()
                }
            }
            "PING" => b"+PONG\r\n".to_vec(),
            _ => b"+OK\r\n".to_vec(),
        };
        if writer.write_all(&reply).is_err() {
            return;
        }
    }
}

/// The timeout of the error `result` must be: none of the 1 replica asked for acknowledged
/// (`whose`: whose 0 acknowledgements were expected, for the failure's message).
fn none_acknowledged<T: std::fmt::Debug>(result: Result<T, Error>, whose: &str) -> Duration {
    match result {
        Err(Error::NotAcknowledged {
            wanted: 1,
            got: 0,
            timeout,
        }) => timeout,
        other => panic!("expected {whose} 0 acknowledgements, got {other:?}"),
    }
}

fn plan() -> ShardPlan {
    ShardPlan::new(10_000, 0.01, 1 << 20, 4).expect("a plan")
}

fn filter(server: &FakeRedis, wait: Duration) -> (ShardedFilter, Vec<u64>) {
    let connection = Connection::open(&server.target()).expect("connected");
    let mut filter = ShardedFilter::open(connection, "f").expect("the plan");
    filter.set_wait(1, wait);
    let hashes = (0..100u64).map(|i| filter.hash(&i)).collect();
    (filter, hashes)
}

#[test]
fn a_connection_lost_during_wait_sends_the_batch_again_before_waiting() {
    let server = FakeRedis::start(&plan(), FirstWait::Dropped);
    let (mut filter, hashes) = filter(&server, Duration::from_millis(300));
    none_acknowledged(filter.add_hashes(&hashes), "the replica's");
    let sent = server.received(&["BF.HASHADD", "WAIT"]);
    let shards = sent
        .iter()
        .filter(|(connection, name)| *connection == 0 && name == "BF.HASHADD")
        .count();
    assert!(shards > 0);
    // The batch, then WAIT, on the first connection; after it was lost, the whole batch
    // again on the second, and WAIT after it there.
    let first: Vec<&str> = sent
        .iter()
        .filter(|(c, _)| *c == 0)
        .map(|(_, n)| n.as_str())
        .collect();
    let second: Vec<&str> = sent
        .iter()
        .filter(|(c, _)| *c == 1)
        .map(|(_, n)| n.as_str())
        .collect();
    let mut batch_then_wait = vec!["BF.HASHADD"; shards];
    batch_then_wait.push("WAIT");
    assert_eq!(first, batch_then_wait);
    assert_eq!(second, batch_then_wait);
    assert!(sent.iter().all(|(connection, _)| *connection <= 1));
}

#[test]
fn answers_lost_with_a_connection_are_said_doubted() {
    // The batch ran, its connection was lost before the replies came, and the batch sent
    // again answers every item old: those answers are doubted (dedup counts them and
    // fails), where before they were plain "old" and dedup dropped the lines silently.
    let server = FakeRedis::start(&plan(), FirstWait::AddDropped);
    let (mut filter, hashes) = filter(&server, Duration::from_millis(300));
    filter.set_wait(0, Duration::ZERO);
    let (new, doubted) = filter
        .add_hashes_doubted(&hashes)
        .expect("added on the second try");
    assert!(new.iter().all(|new| !*new));
    assert!(doubted.iter().all(|doubted| *doubted));
    // A batch answered on its first send is not doubted.
    let (new, doubted) = filter.add_hashes_doubted(&hashes).expect("added");
    assert!(new.iter().all(|new| !*new));
    assert!(doubted.iter().all(|doubted| !*doubted));
}

#[test]
fn a_wait_that_meets_a_demoted_primary_sends_the_batch_again() {
    // A failover between the batch and its WAIT: the node is a replica now, and Redis
    // refuses WAIT there. Worth retrying, as READONLY is for the writes: the batch and its
    // WAIT go again (here to the same server, which answers this time).
    let server = FakeRedis::start(&plan(), FirstWait::OnAReplica);
    let (mut filter, hashes) = filter(&server, Duration::from_millis(100));
    none_acknowledged(filter.add_hashes(&hashes), "the retried WAIT's");
    let waits = server.received(&["WAIT"]);
    assert_eq!(waits.len(), 2, "{waits:?}");
}

#[test]
fn a_wait_unblocked_by_a_failover_sends_the_batch_again_and_keeps_the_first_answers() {
    // A manual CLUSTER FAILOVER while the batch's WAIT blocks on the old primary: Redis
    // unblocks it with -UNBLOCKED as the primary becomes a replica. The batch and its WAIT
    // go again (here to the same server, whose adds now answer every item old, as a new
    // primary that has the first send's writes does): the first send's answers stand, so
    // every item is new once, and none is doubted (its reply was read).
    let server = FakeRedis::start(&plan(), FirstWait::Unblocked);
    let (mut filter, hashes) = filter(&server, Duration::from_millis(100));
    let (new, doubted) = filter
        .add_hashes_doubted(&hashes)
        .expect("acknowledged on the second try");
    assert!(new.iter().all(|new| *new), "{new:?}");
    assert!(doubted.iter().all(|doubted| !*doubted));
    let waits = server.received(&["WAIT"]);
    assert_eq!(waits.len(), 2, "{waits:?}");
    let adds = server.received(&["BF.HASHADD"]);
    assert_eq!(adds.len() % 2, 0, "the whole batch twice: {adds:?}");
}

#[test]
fn a_wait_longer_than_the_reply_timeout_is_answered_not_retried() {
    // Longer than the 10 s the client waits for other replies.
    let wait = Duration::from_millis(10_500);
    let server = FakeRedis::start(&plan(), FirstWait::Answered);
    let (mut filter, hashes) = filter(&server, wait);
    let started = Instant::now();
    assert_eq!(
        none_acknowledged(filter.add_hashes(&hashes), "the replica's"),
        wait
    );
    assert!(started.elapsed() >= wait);
    // One connection: the WAIT was answered, not cut off and sent again.
    let sent = server.received(&["BF.HASHADD", "WAIT"]);
    assert!(sent.iter().all(|(connection, _)| *connection == 0), "{sent:?}");
    assert_eq!(sent.iter().filter(|(_, name)| name == "WAIT").count(), 1);
}

// ---------------------------------------------------------------------------------------
// On a real Redis Cluster: `WAIT` goes to the primaries written to, not to every primary.
// Three primaries; a fourth server is a replica of the primary that owns the filter's one
// shard key only. A waited add is acknowledged by that replica; a client that sent `WAIT`
// to every primary (the redis crate's routing of a keyless `WAIT`, which keeps the lowest
// answer) would be told 0 by the primaries that have no replica and report the add
// unacknowledged. Needs redis-server (or $REDIS_SERVER) and the module built in release
// (target/release/libbloomery_redis.so, or $BLOOMERY_REDIS_MODULE); skipped without them.

/// The module: $BLOOMERY_REDIS_MODULE, else the workspace's release build.
fn module() -> PathBuf {
    std::env::var_os("BLOOMERY_REDIS_MODULE").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/libbloomery_redis.so"),
        PathBuf::from,
    )
}

fn redis_server() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// Why the real-cluster tests cannot run here, if they cannot.
fn missing_prerequisite() -> Option<String> {
    if !module().is_file() {
        return Some(format!(
            "no module at {} (cargo build --release -p bloomery-redis)",
            module().display()
        ));
    }
    match Command::new(redis_server()).arg("--version").output() {
        Ok(output) if output.status.success() => None,
        _ => Some(format!("no {} to run", redis_server())),
    }
}

/// A free loopback port whose cluster bus port (port + 10000) is free too, both below the
/// kernel's ephemeral ports (32768 and up by default), as the Redis suite's conftest picks
/// them: a port in that range may be taken by an outgoing connection between this check
/// and the server's bind (the server then exits). Never the same port twice in a process,
/// so tests running at once do not pick one port each.
fn free_port() -> u16 {
    use std::collections::BTreeSet;
    use std::hash::{BuildHasher, RandomState};
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let random = RandomState::new();
    let mut given = GIVEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for attempt in 0u64..1_000_000 {
        let port = 10_000 + (random.hash_one(attempt) % 12_768) as u16;
        if !given.contains(&port)
            && TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
        {
            given.insert(port);
            return port;
        }
    }
    panic!("no free loopback port in 10000..22768 whose bus port is free too");
}

/// One cluster-enabled redis-server with the module, stopped when dropped.
struct Node {
    port: u16,
    process: Child,
    dir: PathBuf,
}

impl Node {
    fn start(dir: &Path) -> Self {
        Self::start_on(dir, free_port(), true)
    }

    /// A server on `port`, in cluster mode or not, with what `dir` holds (an RDB, the
    /// cluster's nodes.conf).
    fn start_on(dir: &Path, port: u16, cluster: bool) -> Self {
        std::fs::create_dir_all(dir).expect("a data directory");
        let process = Command::new(redis_server())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir)
            .args(["--save", "", "--appendonly", "no"])
            .args(["--cluster-enabled", if cluster { "yes" } else { "no" }])
            .args(["--cluster-config-file", "nodes.conf"])
            .arg("--loadmodule")
            .arg(module())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server started");
        let mut node = Self {
            port,
            process,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut connection) = node.try_connect()
                && redis::cmd("PING").query::<String>(&mut connection).is_ok()
            {
                return node;
            }
            assert!(
                node.process.try_wait().expect("its status").is_none(),
                "redis-server on port {port} exited (see {})",
                dir.display()
            );
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not start"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn try_connect(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.port))?
            .get_connection_with_timeout(Duration::from_secs(5))
    }

    fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> T {
        let mut connection = self.try_connect().expect("connected");
        command.query(&mut connection).expect("a reply")
    }

    fn id(&self) -> String {
        self.query(redis::cmd("CLUSTER").arg("MYID"))
    }

    /// A field of `INFO replication`.
    fn replication(&self, field: &str) -> Option<String> {
        let info: String = self.query(redis::cmd("INFO").arg("replication"));
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .map(str::to_owned)
    }

    fn stop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(100));
    }
}

/// The slots of each of the three primaries.
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// Three primaries sharing the slots, no replicas yet.
struct Cluster {
    primaries: Vec<Node>,
    root: PathBuf,
}

impl Cluster {
    fn start(test: &str) -> Self {
        let root = std::env::temp_dir().join(format!("bloomery-cluster-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let primaries: Vec<Node> = (0..3).map(|i| Node::start(&root.join(i.to_string()))).collect();
        for (node, (first, last)) in primaries.iter().zip(RANGES) {
            let _: String = node.query(redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(first).arg(last));
        }
        let cluster = Self { primaries, root };
        for node in &cluster.primaries[1..] {
            cluster.meet(node);
        }
        eventually("the cluster to be up", || {
            cluster.primaries.iter().all(|node| {
                let info: String = node.query(redis::cmd("CLUSTER").arg("INFO"));
                info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
            })
        });
        cluster
    }

    fn meet(&self, node: &Node) {
        let _: String =
            self.primaries[0].query(redis::cmd("CLUSTER").arg("MEET").arg("127.0.0.1").arg(node.port));
    }

    fn target(&self) -> Target {
        let nodes: Vec<String> = self
            .primaries
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
            .parse()
            .expect("a target")
    }

    /// The primary that owns `key`'s slot, and another its slot can move to.
    fn owner_and_next(&self, key: &str) -> (&Node, &Node) {
        let owner = self.owner(key);
        let next = self
            .primaries
            .iter()
            .find(|node| node.port != owner.port)
            .expect("another primary");
        (owner, next)
    }

    fn owner(&self, key: &str) -> &Node {
        let slot: u16 = self.primaries[0].query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key));
        let index = RANGES
            .iter()
            .position(|&(first, last)| (first..=last).contains(&slot))
            .expect("a covered slot");
        &self.primaries[index]
    }

    /// Starts a server and makes it a replica of `primary`, once it has synced.
    fn add_replica(&self, primary: &Node) -> Node {
        let replica = Node::start(&self.root.join(format!("replica-of-{}", primary.port)));
        self.meet(&replica);
        let primary_id = primary.id();
        eventually("the new node to learn the cluster", || {
            let nodes: String = replica.query(redis::cmd("CLUSTER").arg("NODES"));
            nodes.contains(&primary_id)
        });
        let _: String = replica.query(redis::cmd("CLUSTER").arg("REPLICATE").arg(&primary_id));
        eventually("the replica to sync", || {
            replica.replication("master_link_status").as_deref() == Some("up")
                && primary.replication("connected_slaves").as_deref() == Some("1")
        });
        // Every primary lists the replica, so the client's slot map is the whole cluster.
        let replica_id = replica.id();
        eventually("the primaries to learn of the replica", || {
            self.primaries.iter().all(|node| {
                let nodes: String = node.query(redis::cmd("CLUSTER").arg("NODES"));
                nodes
                    .lines()
                    .any(|line| line.starts_with(&replica_id) && line.contains(&primary_id))
            })
        });
        replica
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.primaries {
            node.stop();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// `CLUSTER SETSLOT slot state id` on `node`.
fn set_slot(node: &Node, slot: u16, state: &str, id: &str) {
    let _: String = node.query(redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg(state).arg(id));
}

/// Marks `key`'s slot half way through moving from `owner` to `next` (IMPORTING on `next`,
/// MIGRATING on `owner`); returns the slot.
fn begin_move(owner: &Node, next: &Node, key: &str) -> u16 {
    let slot: u16 = owner.query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key));
    set_slot(next, slot, "IMPORTING", &owner.id());
    set_slot(owner, slot, "MIGRATING", &next.id());
    slot
}

/// The filter `name`, created with `plan` by one client (which wrote its metadata key),
/// opened by another that waits for `replicas` replicas, at most `wait`, after each batch.
fn opened(cluster: &Cluster, name: &str, plan: ShardPlan, replicas: usize, wait: Duration) -> ShardedFilter {
    let connection = Connection::open(&cluster.target()).expect("connected");
    let (_, created) = ShardedFilter::create(connection, name, plan).expect("created");
    assert!(created);
    let connection = Connection::open(&cluster.target()).expect("connected");
    let mut filter = ShardedFilter::open(connection, name).expect("opened");
    filter.set_wait(replicas, wait);
    filter
}

#[test]
fn on_a_cluster_wait_goes_to_the_primaries_written_to() {
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("wait");
    // One shard: every add goes to the primary that owns its key, and only that primary
    // gets a replica; the other two (one of them holding the metadata key) have none.
    let name = "urls";
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 1).expect("a plan");
    assert_eq!(plan.shards(), 1);
    let owner = cluster.owner(&plan.shard_key(name, 0));
    assert_ne!(owner.port, cluster.owner(name).port);
    let mut replica = cluster.add_replica(owner);

    let mut filter = opened(&cluster, name, plan, 1, Duration::from_secs(5));
    let hashes: Vec<u64> = ["a", "b", "c"].iter().map(|item| filter.hash(*item)).collect();
    let started = Instant::now();
    let added = filter.add_hashes(&hashes);
    assert!(
        matches!(&added, Ok(flags) if flags == &[true, true, true]),
        "a waited add whose primary's replica has it: {added:?}"
    );
    // Answered when the replica acknowledged, not at the timeout.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // The replica holds the shard.
    let mut on_replica = replica.try_connect().expect("connected to the replica");
    let _: String = redis::cmd("READONLY").query(&mut on_replica).expect("READONLY");
    let exists: i64 = redis::cmd("EXISTS")
        .arg(plan.shard_key(name, 0))
        .query(&mut on_replica)
        .expect("EXISTS");
    assert_eq!(exists, 1);
    // wait_for waits on the same primary.
    filter.wait_for(1, Duration::from_secs(5)).expect("acknowledged");

    // A client that created the filter waits for its metadata key with its first batch:
    // that key's primary has no replica.
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 1).expect("a plan");
    let connection = Connection::open(&cluster.target()).expect("connected");
    let other = (0..)
        .map(|i| format!("created{i}"))
        .find(|other| {
            cluster.owner(&plan.shard_key(other, 0)).port == owner.port
                && cluster.owner(other).port != owner.port
        })
        .expect("a name");
    let (mut creator, _) = ShardedFilter::create(connection, &other, plan).expect("created");
    creator.set_wait(1, Duration::from_millis(300));
    none_acknowledged(creator.add_hashes(&hashes), "the metadata's primary's");

    // A filter whose shards are on every primary: the two without a replica answer 0.
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 16).expect("a plan");
    let mut spread = opened(&cluster, "spread", plan, 1, Duration::from_millis(300));
    let hashes: Vec<u64> = (0..1_000u64).map(|i| spread.hash(&i)).collect();
    none_acknowledged(spread.add_hashes(&hashes), "the primaries without replicas'");

    // The written primary's replica stopped: the add is not acknowledged.
    replica.stop();
    eventually("the primary to see its replica gone", || {
        owner.replication("connected_slaves").as_deref() == Some("0")
    });
    let wait = Duration::from_millis(300);
    filter.set_wait(1, wait);
    let hashes: Vec<u64> = ["d", "e"].iter().map(|item| filter.hash(*item)).collect();
    assert_eq!(
        none_acknowledged(filter.add_hashes(&hashes), "the stopped replica's"),
        wait
    );
}

/// A loopback TCP proxy to `port` that, while `down` is set, refuses new connections (it
/// accepts and closes them); connections made before go on.
fn proxy(port: u16, down: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let proxy_port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        for client in listener.incoming().flatten() {
            if down.load(Ordering::SeqCst) {
                let _ = client.shutdown(Shutdown::Both);
                continue;
            }
            let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            let pairs = [
                (
                    client.try_clone().expect("cloned"),
                    server.try_clone().expect("cloned"),
                ),
                (server, client),
            ];
            for (mut from, mut to) in pairs {
                thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(Shutdown::Both);
                });
            }
        }
    });
    proxy_port
}

#[test]
fn a_failed_call_never_leaves_replies_for_the_next() {
    // A batch that fails on one node after another node was sent its commands leaves that
    // node's replies unread. The client before this fix kept those connections when its
    // reconnect failed too (here: the one node it was told of, behind a proxy, refuses new
    // connections), and its next calls read the replies meant for the failed one: answers
    // for other items. Now a failed call drops its connections: while none can be made,
    // calls fail; once they can, the answers are true.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("stale");
    let name = "urls";
    let plan = ShardPlan::new(100_000, 1e-6, 64 << 20, 8).expect("a plan");
    let (creator, _) = ShardedFilter::create(
        Connection::open(&cluster.target()).expect("connected"),
        name,
        plan,
    )
    .expect("created");
    drop(creator);
    let down = Arc::new(AtomicBool::new(false));
    let entry = proxy(cluster.primaries[0].port, down.clone());
    let target: Target = format!("redis+cluster://127.0.0.1:{entry}")
        .parse()
        .expect("a target");
    let mut connection = Connection::open(&target).expect("connected");
    connection.set_retry_for(Duration::from_secs(1));
    let mut filter = ShardedFilter::open(connection, name).expect("opened");
    let node_of = |hash: u64| cluster.owner(&plan.shard_key(name, plan.shard_of(hash))).port;
    let (second, third) = (cluster.primaries[1].port, cluster.primaries[2].port);
    let mut items = (0u64..).map(|i| plan.hash(&format!("item {i}")));
    let mut on = |port: u16| {
        items
            .by_ref()
            .find(|&hash| node_of(hash) == port)
            .expect("an item")
    };
    let present = on(second);
    filter.add_hashes(&[present]).expect("added");
    for round in 0..6 {
        let (fresh, other, absent) = (on(second), on(third), on(second));
        down.store(false, Ordering::SeqCst);
        assert_eq!(
            filter.contains_hashes(&[present, absent]).expect("answered"),
            [true, false],
            "round {round}"
        );
        // The entry node refuses new connections, and the third primary drops this
        // client's connection: the batch for both fails.
        down.store(true, Ordering::SeqCst);
        let _: i64 = cluster.primaries[2].query(
            redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .arg("SKIPME")
                .arg("yes"),
        );
        let added = filter.add_hashes(&[fresh, other]);
        // Whatever came of it, no later call answers from a reply meant for another.
        for _ in 0..3 {
            if let Ok(answers) = filter.contains_hashes(&[present, absent]) {
                assert_eq!(answers, [true, false], "round {round}, after {added:?}");
            }
        }
    }
    down.store(false, Ordering::SeqCst);
    let absent = on(second);
    assert_eq!(
        filter.contains_hashes(&[present, absent]).expect("answered"),
        [true, false]
    );
}

#[test]
fn a_batch_follows_ask_while_a_slot_moves() {
    // A shard's slot half way through moving (MIGRATING on its node, IMPORTING on the
    // next): a shard key not on the old node gets `ASK`, which a pipeline of the redis
    // crate returns as its error. The client before this fix sent the batch again whole
    // until its retries ran out, and every add and check of that shard failed.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("ask");
    let name = "moving";
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 1).expect("a plan");
    let key = plan.shard_key(name, 0);
    let (owner, next) = cluster.owner_and_next(&key);
    let slot = begin_move(owner, next, &key);
    let mut connection = Connection::open(&cluster.target()).expect("connected");
    connection.set_retry_for(Duration::from_secs(2));
    let (mut filter, _) = ShardedFilter::create(connection, name, plan).expect("created");
    let hashes: Vec<u64> = ["a", "b", "never added"]
        .iter()
        .map(|item| filter.hash(*item))
        .collect();
    assert_eq!(
        filter.add_hashes(&hashes[..2]).expect("added while moving"),
        [true, true]
    );
    assert_eq!(
        filter.contains_hashes(&hashes).expect("checked while moving"),
        [true, true, false]
    );
    // The shard was made on the slot's new node.
    let mut on_next = next.try_connect().expect("connected");
    let _: String = redis::cmd("ASKING").query(&mut on_next).expect("ASKING");
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .query(&mut on_next)
        .expect("EXISTS");
    assert_eq!(exists, 1);
    // The move finished: `MOVED`, and the items are where the slot now is.
    for node in &cluster.primaries {
        set_slot(node, slot, "NODE", &next.id());
    }
    assert_eq!(
        filter.contains_hashes(&hashes).expect("checked after the move"),
        [true, true, false]
    );

    // Through a one-server target, a redirection says that the server is a cluster node.
    let single: Target = format!("redis://127.0.0.1:{}", owner.port)
        .parse()
        .expect("a target");
    let mut connection = Connection::open(&single).expect("connected");
    connection.set_retry_for(Duration::from_secs(2));
    let mut get = redis::cmd("GET");
    get.arg(&key);
    let refused = connection
        .query(&get, &|| "reading".into())
        .expect_err("redirected");
    assert!(refused.to_string().contains("redis+cluster://"), "{refused}");
}

#[test]
fn a_redirection_loses_no_other_shards_answers() {
    // A batch over many shards, one of whose slots is half way through moving (its key
    // already on the new node: `ASK`) or has just moved (`MOVED`). The redis crate's
    // pipeline dropped every reply when one command was redirected, and the client before
    // this fix sent the other commands again: they had run, so their items came back
    // "old", and dedup printed none of them.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("redirected");
    let name = "spread";
    let plan = ShardPlan::new(100_000, 0.01, 64 << 20, 16).expect("a plan");
    let key = plan.shard_key(name, 0);
    let (owner, next) = cluster.owner_and_next(&key);
    let mut filter = opened(&cluster, name, plan, 0, Duration::ZERO);
    let items = |round: &str| -> Vec<u64> {
        (0..2_000)
            .map(|i| filter.hash(format!("{round} {i}").as_str()))
            .collect()
    };
    let (first, asked, moved) = (items("first"), items("asked"), items("moved"));
    assert!(filter.add_hashes(&first).expect("added").iter().all(|new| *new));
    let slot = begin_move(owner, next, &key);
    let _: String = owner.query(
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(next.port)
            .arg(&key)
            .arg(0)
            .arg(5000),
    );
    let answered = filter.add_hashes(&asked).expect("added while the slot moves");
    let old = answered.iter().filter(|new| !**new).count();
    assert_eq!(
        old,
        0,
        "{old} of {} new items answered old after ASK",
        asked.len()
    );
    for node in &cluster.primaries {
        set_slot(node, slot, "NODE", &next.id());
    }
    let answered = filter.add_hashes(&moved).expect("added after the move");
    let old = answered.iter().filter(|new| !**new).count();
    assert_eq!(
        old,
        0,
        "{old} of {} new items answered old after MOVED",
        moved.len()
    );
    // Each once: sent again, every item is old, and every one is present.
    let all: Vec<u64> = [first, asked, moved].concat();
    assert!(
        filter
            .add_hashes(&all)
            .expect("added again")
            .iter()
            .all(|new| !*new)
    );
    assert!(
        filter
            .contains_hashes(&all)
            .expect("checked")
            .iter()
            .all(|present| *present)
    );
}

#[test]
fn errors_name_the_shard_key_and_the_node() {
    // A shard key overwritten with a string: the error names the key and the shard (the
    // client before this said "Pipeline failure: [(Index N, ...)]", N the command's place
    // in the batch); a primary down: the error names its address (it said only
    // "Connection refused").
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut cluster = Cluster::start("named");
    let name = "named";
    let plan = ShardPlan::new(100_000, 0.01, 64 << 20, 4).expect("a plan");
    let key = plan.shard_key(name, 2);
    let mut filter = opened(&cluster, name, plan, 0, Duration::ZERO);
    let hashes: Vec<u64> = (0..1_000).map(|i| filter.hash(&i)).collect();
    filter.contains_hashes(&hashes).expect("checked");
    let owner = cluster.owner(&key);
    let _: i64 = owner.query(redis::cmd("DEL").arg(&key));
    let _: String = owner.query(redis::cmd("SET").arg(&key).arg("not a shard"));
    let error = filter
        .contains_hashes(&hashes)
        .expect_err("a string at a shard key");
    let said = error.to_string();
    assert!(said.contains(&format!("on key '{key}' (shard 2 of 4)")), "{said}");
    assert!(said.contains("WRONGTYPE") && !said.contains("Index"), "{said}");
    let port = owner.port;
    let index = cluster
        .primaries
        .iter()
        .position(|node| node.port == port)
        .expect("the owner");
    cluster.primaries[index].stop();
    filter.set_wait(0, Duration::ZERO);
    let mut connection = filter.into_connection();
    connection.set_retry_for(Duration::ZERO);
    let mut filter = ShardedFilter::open(connection, name).expect("opened");
    let said = filter
        .contains_hashes(&hashes)
        .expect_err("a primary down")
        .to_string();
    assert!(said.contains(&format!("node 127.0.0.1:{port}")), "{said}");
}

#[test]
fn the_retry_time_bounds_a_call_while_the_cluster_is_down() {
    // The redis crate's cluster client retries a command 16 times by default, waiting
    // longer each time (up to minutes) while the cluster answers CLUSTERDOWN: one `GET`
    // outlasted the 20 s below by far with 2 s of retries asked for. Its retries are now
    // few and short, and this client's own bound the call.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("down");
    for node in &cluster.primaries {
        let _: String = node.query(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("cluster-node-timeout")
                .arg(500),
        );
    }
    let name = "urls";
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 1).expect("a plan");
    let mut connection = Connection::open(&cluster.target()).expect("connected");
    connection.set_retry_for(Duration::from_secs(2));
    ShardedFilter::create(connection, name, plan).expect("created");
    // A primary other than the metadata key's stops: the others declare the cluster down
    // and answer CLUSTERDOWN for every key.
    let metadata_port = cluster.owner(name).port;
    let stopped = cluster
        .primaries
        .iter()
        .find(|node| node.port != metadata_port)
        .expect("another primary");
    let signal = |name: &str| {
        let pid = stopped.process.id().to_string();
        let status = Command::new("kill")
            .arg(name)
            .arg(pid)
            .status()
            .expect("kill runs");
        assert!(status.success());
    };
    signal("-STOP");
    eventually("the cluster to be down", || {
        let info: String = cluster.owner(name).query(redis::cmd("CLUSTER").arg("INFO"));
        info.contains("cluster_state:fail")
    });
    let mut connection = Connection::open(&cluster.target()).expect("connected");
    connection.set_retry_for(Duration::from_secs(2));
    let started = Instant::now();
    let refused = ShardedFilter::open(connection, name).map(drop);
    let took = started.elapsed();
    signal("-CONT");
    let refused = refused.expect_err("the cluster is down");
    assert!(refused.to_string().contains("ClusterDown"), "{refused}");
    assert!(took < Duration::from_secs(20), "2 s of retries took {took:?}");
}

#[test]
fn a_wait_after_ask_goes_to_the_node_the_write_went_to() {
    // A shard's slot half moved, its key already on the new node: the batch's write is
    // sent there with ASKING, so its `WAIT` must go there too. The client before this fix
    // sent `WAIT` by its slot map to the old node, whose replica was up to date, and
    // reported the batch acknowledged, though the new node had no replica: lost in a
    // failover of the new node.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("askwait");
    let name = "moving";
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 1).expect("a plan");
    let key = plan.shard_key(name, 0);
    let (owner, next) = cluster.owner_and_next(&key);
    // The old node has a replica (its `WAIT` answers 1); the new node has none.
    let _replica = cluster.add_replica(owner);
    let mut filter = opened(&cluster, name, plan, 1, Duration::from_millis(300));
    begin_move(owner, next, &key);
    let _: String = owner.query(
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(next.port)
            .arg(&key)
            .arg(0)
            .arg(5000),
    );
    let hashes: Vec<u64> = ["a", "b"].iter().map(|item| filter.hash(*item)).collect();
    none_acknowledged(filter.add_hashes(&hashes), "the new node's");
    // The write did reach the new node, and is answered there.
    filter.set_wait(0, Duration::ZERO);
    assert_eq!(filter.contains_hashes(&hashes).expect("checked"), [true, true]);
}

#[test]
fn a_manual_failover_under_wait_loses_no_add_and_no_answer() {
    // `CLUSTER FAILOVER` on the replica of a shard's primary while batches are waited for
    // one replica each: the batches met by the switch (refused by the old primary, now a
    // replica: `MOVED`; or its `WAIT` refused there) go again to the new primary, and the
    // old one, now its replica, acknowledges them. Every batch is answered, every item new
    // once and never doubted (nothing was lost with a connection), and every item is on
    // the new primary and its replica.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("failover");
    let name = "switched";
    let plan = ShardPlan::new(100_000, 0.01, 64 << 20, 1).expect("a plan");
    let key = plan.shard_key(name, 0);
    let owner = cluster.owner(&key);
    let replica = cluster.add_replica(owner);
    let mut filter = opened(&cluster, name, plan, 1, Duration::from_secs(5));
    let mut added = Vec::new();
    let mut batch = |filter: &mut ShardedFilter, number: u64| {
        let hashes: Vec<u64> = (number * 50..(number + 1) * 50)
            .map(|i| filter.hash(&i))
            .collect();
        let (new, doubted) = filter
            .add_hashes_doubted(&hashes)
            .unwrap_or_else(|error| panic!("batch {number}: {error}"));
        assert!(new.iter().all(|&new| new), "batch {number}: {new:?}");
        assert!(doubted.iter().all(|&doubted| !doubted), "batch {number}");
        added.extend(hashes);
    };
    for number in 0..5 {
        batch(&mut filter, number);
    }
    let _: String = replica.query(redis::cmd("CLUSTER").arg("FAILOVER"));
    let mut number = 5;
    // Batches while the switch is under way, then a few after it.
    let started = Instant::now();
    while replica.replication("role").as_deref() != Some("master") {
        assert!(started.elapsed() < Duration::from_secs(30), "no failover");
        batch(&mut filter, number);
        number += 1;
    }
    eventually("the old primary to follow the new one", || {
        owner.replication("master_link_status").as_deref() == Some("up")
    });
    for _ in 0..5 {
        batch(&mut filter, number);
        number += 1;
    }
    // The batches did meet the switch: the old primary refused some (the client's
    // connections were there).
    let errors: String = owner.query(redis::cmd("INFO").arg("errorstats"));
    assert!(errors.contains("errorstat_MOVED"), "{errors}");
    // Every item, by a new client, and on the new primary's replica (the old primary).
    let connection = Connection::open(&cluster.target()).expect("connected");
    let mut reader = ShardedFilter::open(connection, name).expect("opened");
    assert!(
        reader
            .contains_hashes(&added)
            .expect("checked")
            .iter()
            .all(|&found| found)
    );
    let dump = |node: &Node| -> Vec<u8> {
        let mut connection = node.try_connect().expect("connected");
        let _: String = redis::cmd("READONLY").query(&mut connection).expect("READONLY");
        redis::cmd("DUMP").arg(&key).query(&mut connection).expect("DUMP")
    };
    eventually("the replica to hold what the primary does", || {
        dump(owner) == dump(&replica)
    });
}

#[test]
fn a_one_node_cluster_serves_a_sharded_filter() {
    // The one node of a one-node cluster does not know its own address: `CLUSTER SLOTS`
    // gives an empty host for it, which the client's slot map once took as the address
    // ":PORT" ("does not parse": scripts/bench-cluster.sh's one-primary cluster failed).
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let root = std::env::temp_dir().join(format!("bloomery-cluster-alone-{}", std::process::id()));
    let node = Node::start(&root.join("0"));
    let _: String = node.query(redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(0).arg(16383));
    eventually("the cluster to be up", || {
        let info: String = node.query(redis::cmd("CLUSTER").arg("INFO"));
        info.contains("cluster_state:ok")
    });
    let slots: redis::Value = node.query(redis::cmd("CLUSTER").arg("SLOTS"));
    let target: Target = format!("redis+cluster://127.0.0.1:{}", node.port)
        .parse()
        .expect("a target");
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 4).expect("a plan");
    let connection = Connection::open(&target).expect("connected");
    let (mut filter, created) = ShardedFilter::create(connection, "alone", plan).expect("created");
    assert!(created);
    let hashes: Vec<u64> = (0..100u64).map(|i| filter.hash(&i)).collect();
    let added = filter
        .add_hashes(&hashes)
        .unwrap_or_else(|error| panic!("{error} (CLUSTER SLOTS: {slots:?})"));
    assert!(added.iter().all(|&new| new));
    assert!(
        filter
            .contains_hashes(&hashes)
            .expect("checked")
            .iter()
            .all(|&found| found)
    );
    drop(node);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_primary_restarted_from_an_older_rdb_is_an_error() {
    // A primary killed and restarted within the node timeout (no failover) comes back from
    // its last RDB, without the writes made since: its replicas copy it, and those writes
    // are gone though acknowledged. The client before this fix went on writing to it and
    // reported success; now the primary's run_id, read after each batch, shows the
    // restart, as the one-server client's does.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut cluster = Cluster::start("restart");
    let name = "urls";
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 1).expect("a plan");
    let key = plan.shard_key(name, 0);
    let mut connection = Connection::open(&cluster.target()).expect("connected");
    connection.set_retry_for(Duration::from_secs(20));
    let (mut filter, _) = ShardedFilter::create(connection, name, plan).expect("created");
    let hash = |item: &str| plan.hash(item);
    filter.add_hashes(&[hash("saved")]).expect("added");
    let index = cluster
        .primaries
        .iter()
        .position(|node| node.port == cluster.owner(&key).port)
        .expect("the owner");
    let owner = &mut cluster.primaries[index];
    let _: String = owner.query(&redis::cmd("SAVE"));
    filter.add_hashes(&[hash("after the save")]).expect("added");
    // Killed, and started again on its port from its RDB and nodes.conf.
    let (port, dir) = (owner.port, owner.dir.clone());
    owner.stop();
    let restarted = Node::start_on(&dir, port, true);
    // The old one is not dropped: that would remove the directory the new one uses.
    std::mem::forget(std::mem::replace(owner, restarted));
    let added = filter.add_hashes(&[hash("later")]);
    assert!(
        matches!(&added, Err(Error::Restarted(what)) if what.contains(&port.to_string())),
        "{added:?}"
    );
}

#[test]
fn the_primaries_run_ids_are_read_before_the_first_batch_writes() {
    // A primary restarted after the first batch's writes and before the check after it
    // comes back without them: the check must compare with a run_id read before the
    // writes. The client before this fix read the run_ids first after the first batch (so
    // took the new process's as the first seen, and reported success). The owner's
    // MONITOR shows the order of what the client sent it.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("first-seen");
    let name = "urls";
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 1).expect("a plan");
    let key = plan.shard_key(name, 0);
    let connection = Connection::open(&cluster.target()).expect("connected");
    let (mut filter, _) = ShardedFilter::create(connection, name, plan).expect("created");
    let mut monitor = TcpStream::connect(("127.0.0.1", cluster.owner(&key).port)).expect("connected");
    monitor
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    monitor.write_all(b"MONITOR\r\n").expect("sent");
    let mut lines = BufReader::new(monitor.try_clone().expect("a second handle")).lines();
    assert_eq!(lines.next().expect("a reply").expect("read"), "+OK");
    filter.add_hashes(&[plan.hash("first")]).expect("added");
    let mut seen = Vec::new();
    for line in lines {
        let line = line.expect("the monitor's output");
        let command = line
            .split_once("] ")
            .map_or(String::new(), |(_, command)| command.to_ascii_uppercase());
        if command.starts_with("\"INFO\"") {
            seen.push("INFO");
        } else if command.starts_with("\"BF.HASHADD\"") {
            seen.push("BF.HASHADD");
            break;
        }
    }
    assert_eq!(seen.first(), Some(&"INFO"), "{seen:?}");
}

#[test]
fn a_server_not_in_cluster_mode_is_said_at_once() {
    // The client before this fix retried for its 30 s and then said "No connections
    // found - ClusterConnectionNotFound".
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let root = std::env::temp_dir().join(format!("bloomery-cluster-plain-{}", std::process::id()));
    let server = Node::start_on(&root, free_port(), false);
    let target: Target = format!("redis+cluster://127.0.0.1:{}", server.port)
        .parse()
        .expect("a target");
    let started = Instant::now();
    let refused =
        Connection::open(&target).and_then(|connection| ShardedFilter::open(connection, "urls").map(drop));
    let message = refused.expect_err("not a cluster").to_string();
    assert!(
        message.contains("not a cluster node (cluster mode is off)"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// A loopback TCP proxy to `port` that closes the first `drops` connections as soon as
/// it accepts them, and forwards the others.
fn dropping_proxy(port: u16, drops: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let proxy_port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        for (count, client) in listener.incoming().flatten().enumerate() {
            if count < drops {
                let _ = client.shutdown(Shutdown::Both);
                continue;
            }
            let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            for (mut from, mut to) in [
                (
                    client.try_clone().expect("cloned"),
                    server.try_clone().expect("cloned"),
                ),
                (server, client),
            ] {
                thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(Shutdown::Both);
                });
            }
        }
    });
    proxy_port
}

#[test]
fn the_first_connection_is_retried_as_later_ones_are() {
    // A connection dropped while connecting (a server restarting, a proxy in between):
    // the client before this fix failed at once ("unexpected end of file") though its
    // retries would have covered the same drop a moment later.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let root = std::env::temp_dir().join(format!("bloomery-cluster-first-{}", std::process::id()));
    let server = Node::start_on(&root, free_port(), false);
    let entry = dropping_proxy(server.port, 2);
    let target: Target = format!("redis://127.0.0.1:{entry}").parse().expect("a target");
    let mut connection = Connection::open(&target).expect("connected on a later try");
    assert!(connection.notices_restarts());
    let reply = connection
        .query(&redis::cmd("PING"), &|| "PING".into())
        .expect("answered");
    assert!(
        matches!(reply, redis::Value::SimpleString(ref pong) if pong == "PONG"),
        "{reply:?}"
    );
}

/// A user the primaries refuse `INFO` (`-info`, or the common `+@all -@dangerous`): the
/// restart check goes unchecked, as on one server, and adds go on. Every batch failed
/// after its writes, which the filter then held.
#[test]
fn a_cluster_whose_acl_refuses_info_still_adds() {
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("noinfo");
    for node in &cluster.primaries {
        let _: String = node.query(redis::cmd("ACL").arg("SETUSER").arg("default").arg("-info"));
    }
    let plan = ShardPlan::new(1_000, 0.01, 64 << 20, 1).expect("a plan");
    let connection = Connection::open(&cluster.target()).expect("connected");
    let (mut filter, _) = ShardedFilter::create(connection, "urls", plan).expect("created");
    let added = filter.add_hashes(&[plan.hash("a"), plan.hash("b")]);
    assert_eq!(
        added.expect("added on a cluster whose ACL refuses INFO"),
        [true, true]
    );
    assert_eq!(
        filter
            .contains_hashes(&[plan.hash("a"), plan.hash("b")])
            .expect("looked up"),
        [true, true]
    );
}

/// Sends `signal` (`STOP`, `CONT`) to `node`'s process.
fn signal(node: &Node, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(node.process.id().to_string())
        .status()
        .expect("kill run");
    assert!(status.success(), "kill -{signal}");
}

#[test]
fn a_stalled_server_holds_a_batch_one_reply_timeout_not_one_per_shard() {
    // One server stopped (SIGSTOP: it accepts nothing more, answers nothing) while a
    // batch over 64 shards goes to it. The redis crate's pipeline read on after the first
    // reply timed out, waiting its 10 s again for each of the 64 replies (640 s); the batch's
    // try now ends at the first reply that does not come, and with a retry time of 1 s no
    // second try starts.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let root = std::env::temp_dir().join(format!("bloomery-cluster-stalled-{}", std::process::id()));
    let server = Node::start_on(&root, free_port(), false);
    let target: Target = format!("redis://127.0.0.1:{}", server.port)
        .parse()
        .expect("a target");
    let plan = ShardPlan::new(100_000, 0.01, 1 << 20, 64).expect("a plan");
    let (mut filter, _) =
        ShardedFilter::create(Connection::open(&target).expect("connected"), "stalled", plan)
            .expect("created");
    let hashes: Vec<u64> = (0..10_000u64).map(|i| filter.hash(&i)).collect();
    assert_eq!(bloomery_cluster::group_by_shard(&plan, &hashes).len(), 64);
    filter.add_hashes(&hashes).expect("added");
    let mut connection = filter.into_connection();
    connection.set_retry_for(Duration::from_secs(1));
    let mut filter = ShardedFilter::open(connection, "stalled").expect("opened");
    /// Lets the server go on however the test ends (it is killed when dropped).
    struct Resumed<'a>(&'a Node);
    impl Drop for Resumed<'_> {
        fn drop(&mut self) {
            signal(self.0, "CONT");
        }
    }
    signal(&server, "STOP");
    let _resumed = Resumed(&server);
    let started = Instant::now();
    let error = filter
        .contains_hashes(&hashes)
        .expect_err("no reply from a stopped server");
    let took = started.elapsed();
    assert!(error.to_string().contains("no reply in time"), "{error}");
    assert!(took < Duration::from_secs(40), "{took:?}: {error}");
}

#[test]
fn a_stalled_node_loses_only_its_own_answers() {
    // One primary stalls (SIGSTOP) for longer than the 10 s reply timeout while a batch is
    // under way, the node whose replies are read first. The other primaries answered:
    // their commands ran, and their replies, read on sound connections, are the answers.
    // Before, every node read after the stalled one had its replies marked lost, its
    // commands sent again, and the items they had added answered "old", doubted (lines
    // dedup reports lost). Only the stalled node's answers are doubted now.
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("stalled-node");
    let plan = ShardPlan::new(100_000, 0.01, 1 << 20, 64).expect("a plan");
    let mut filter = opened(&cluster, "stalled", plan, 0, Duration::ZERO);
    // A first batch: the primaries' run_ids are read, the connections made.
    let warm: Vec<u64> = (0..1_000u64).map(|i| filter.hash(&format!("warm {i}"))).collect();
    filter.add_hashes(&warm).expect("added");
    let hashes: Vec<u64> = (0..10_000u64).map(|i| filter.hash(&i)).collect();
    // Replies are read node after node in the order of their addresses.
    let first = cluster
        .primaries
        .iter()
        .min_by_key(|node| format!("127.0.0.1:{}", node.port))
        .expect("a primary");
    let key_of = |hash: u64| plan.shard_key("stalled", plan.shard_of(hash));
    let on_first: Vec<bool> = hashes
        .iter()
        .map(|&hash| cluster.owner(&key_of(hash)).port == first.port)
        .collect();
    assert!(on_first.iter().any(|on| *on) && on_first.iter().any(|on| !*on));
    signal(first, "STOP");
    let resumer = {
        let pid = first.process.id();
        thread::spawn(move || {
            thread::sleep(Duration::from_secs(13));
            let _ = Command::new("kill").arg("-CONT").arg(pid.to_string()).status();
        })
    };
    let result = filter.add_hashes_doubted(&hashes);
    resumer.join().expect("resumed");
    let (new, doubted) = result.expect("added once the node went on");
    for (position, &on) in on_first.iter().enumerate() {
        if !on {
            assert!(new[position] && !doubted[position], "item {position}");
        }
    }
    // The stalled node ran its commands before the retry's: its items answer old, doubted.
    assert!(
        on_first
            .iter()
            .zip(&doubted)
            .filter(|(on, _)| **on)
            .all(|(_, doubted)| *doubted)
    );
}

#[test]
fn one_server_errors_say_what_is_wrong() {
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let root = std::env::temp_dir().join(format!("bloomery-cluster-errors-{}", std::process::id()));
    let primary = Node::start_on(&root.join("primary"), free_port(), false);
    let target = |node: &Node| -> Target {
        format!("redis://127.0.0.1:{}", node.port)
            .parse()
            .expect("a target")
    };
    let plan = ShardPlan::new(10_000, 0.01, 1 << 20, 4).expect("a plan");
    let (mut filter, _) =
        ShardedFilter::create(Connection::open(&target(&primary)).expect("connected"), "e", plan)
            .expect("created");
    let hashes: Vec<u64> = (0..100u64).map(|i| filter.hash(&i)).collect();

    // A WAIT refused by Redis is said to be the WAIT's error, not BF.HASHADD's.
    filter.set_wait(1, Duration::from_millis(u64::MAX));
    let message = filter
        .add_hashes(&hashes)
        .expect_err("a timeout WAIT refuses")
        .to_string();
    assert!(
        message.starts_with("WAIT after BF.HASHADD on sharded filter 'e'") && message.contains("timeout"),
        "{message}"
    );

    // A replica reached as one server: READONLY at once, not retried for the retry time.
    let replica = Node::start_on(&root.join("replica"), free_port(), false);
    let _: String = replica.query(redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary.port));
    eventually("the replica to sync", || {
        replica.replication("master_link_status").as_deref() == Some("up")
    });
    eventually("the plan to reach the replica", || {
        replica
            .query::<Option<String>>(redis::cmd("GET").arg("e"))
            .is_some()
    });
    let mut on_replica =
        ShardedFilter::open(Connection::open(&target(&replica)).expect("connected"), "e").expect("opened");
    let started = Instant::now();
    let message = on_replica.add_hashes(&hashes).expect_err("a replica").to_string();
    assert!(
        message.contains("is a replica") && message.contains("READONLY"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // A server without the module: said when the filter is opened, naming the server (a
    // batch failed with "invalid utf-8 sequence": Redis's unknown-command error echoes the
    // binary argument).
    let port = free_port();
    let dir = root.join("plain");
    std::fs::create_dir_all(&dir).expect("a directory");
    let mut plain = Command::new(redis_server())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server started");
    let url = format!("redis://127.0.0.1:{port}");
    let opened = (|| {
        eventually("the server without the module to start", || {
            redis::Client::open(url.as_str())
                .and_then(|client| client.get_connection())
                .is_ok()
        });
        let mut connection = redis::Client::open(url.as_str())?.get_connection()?;
        redis::cmd("SET")
            .arg("e")
            .arg(plan.to_text())
            .exec(&mut connection)?;
        Ok::<_, redis::RedisError>(
            ShardedFilter::open(
                Connection::open(&url.parse().expect("a target")).expect("connected"),
                "e",
            )
            .map(drop),
        )
    })();
    let _ = plain.kill();
    let _ = plain.wait();
    let _ = std::fs::remove_dir_all(&root);
    let message = opened.expect("set").expect_err("no module").to_string();
    assert!(
        message.contains(&format!("{url} does not have the bloomery module loaded")),
        "{message}"
    );
}

#[test]
fn a_wait_blocked_through_a_manual_failover_sends_the_batch_again() {
    // A WAIT for more replicas than the primary has blocks until its timeout; a CLUSTER
    // FAILOVER sent to the replica meanwhile makes the primary a replica, and Redis
    // unblocks the WAIT with -UNBLOCKED. The batch and its WAIT go again, to the new
    // primary, whose one replica (the old primary) falls short of the two asked for: the
    // call fails as not acknowledged, not with the UNBLOCKED error (which it did).
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = Cluster::start("unblocked");
    let name = "unblocked";
    let plan = ShardPlan::new(100_000, 0.01, 64 << 20, 1).expect("a plan");
    let key = plan.shard_key(name, 0);
    let owner = cluster.owner(&key);
    let replica = cluster.add_replica(owner);
    let mut filter = opened(&cluster, name, plan, 1, Duration::from_secs(5));
    let first: Vec<u64> = (0..50u64).map(|i| filter.hash(&i)).collect();
    filter
        .add_hashes(&first)
        .expect("acknowledged by the one replica");
    filter.set_wait(2, Duration::from_secs(8));
    let replica_port = replica.port;
    let failover = thread::spawn(move || {
        thread::sleep(Duration::from_secs(1));
        let mut connection = redis::Client::open(format!("redis://127.0.0.1:{replica_port}"))
            .and_then(|client| client.get_connection())
            .expect("connected to the replica");
        redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query::<String>(&mut connection)
            .expect("CLUSTER FAILOVER");
    });
    let hashes: Vec<u64> = (50..100u64).map(|i| filter.hash(&i)).collect();
    let result = filter.add_hashes(&hashes);
    failover.join().expect("failed over");
    assert_eq!(replica.replication("role").as_deref(), Some("master"));
    match result {
        Err(Error::NotAcknowledged { wanted: 2, got, .. }) => assert!(got <= 1),
        other => panic!("expected the retried WAIT's answer, got {other:?}"),
    }
    // Unblocked on the old primary, which said so.
    let errors: String = owner.query(redis::cmd("INFO").arg("errorstats"));
    assert!(errors.contains("errorstat_UNBLOCKED"), "{errors}");
    let found = Connection::open(&cluster.target())
        .and_then(|connection| ShardedFilter::open(connection, name))
        .and_then(|mut reader| reader.contains_hashes(&hashes))
        .expect("checked");
    assert!(found.iter().all(|&found| found));
}
