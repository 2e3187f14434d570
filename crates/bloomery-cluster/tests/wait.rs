//! `ShardedFilter::set_wait`: a batch and its `WAIT` are one unit. Against a small server
//! on loopback that speaks enough of Redis's protocol and answers `WAIT` as Redis does
//! with one connected replica that is behind: a connection that has written waits the
//! whole timeout and answers 0; one that has not written answers 1 at once (Redis counts
//! `WAIT` against the connection's last write, and a new connection has made none). A
//! client that sent `WAIT` alone on a new connection after a failure, or cut a long `WAIT`
//! off at its own 10 s reply timeout and retried it, would be told the batch was on the
//! replica when it was not.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
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

impl FakeRedis {
    /// Serves `plan` at every key `GET` asks for. When `drop_first_wait` is set, the first
    /// `WAIT` the server receives closes its connection instead of being answered (the
    /// connection lost mid-`WAIT`, as in a failover or a network cut).
    fn start(plan: &ShardPlan, drop_first_wait: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("bound").port();
        let log: Log = Arc::default();
        let plan_text = plan.to_text();
        let connections = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicBool::new(!drop_first_wait));
        let server_log = Arc::clone(&log);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let number = connections.fetch_add(1, Ordering::SeqCst);
                let (log, plan_text, dropped) =
                    (Arc::clone(&server_log), plan_text.clone(), Arc::clone(&dropped));
                thread::spawn(move || serve(stream, number, &log, &plan_text, &dropped));
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

fn serve(stream: TcpStream, number: usize, log: &Log, plan_text: &str, dropped: &AtomicBool) {
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
            "BF.HASHADD" => {
                wrote = true;
                bulk(&vec![1; args[4].len() / 8])
            }
            "WAIT" => {
                if !dropped.swap(true, Ordering::SeqCst) {
                    let _ = writer.shutdown(Shutdown::Both);
                    return;
                }
                if wrote {
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
    let server = FakeRedis::start(&plan(), true);
    let (mut filter, hashes) = filter(&server, Duration::from_millis(300));
    match filter.add_hashes(&hashes) {
        Err(Error::NotAcknowledged {
            wanted: 1, got: 0, ..
        }) => {}
        other => panic!("expected the replica's 0 acknowledgements, got {other:?}"),
    }
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
fn a_wait_longer_than_the_reply_timeout_is_answered_not_retried() {
    // Longer than the 10 s the client waits for other replies.
    let wait = Duration::from_millis(10_500);
    let server = FakeRedis::start(&plan(), false);
    let (mut filter, hashes) = filter(&server, wait);
    let started = Instant::now();
    match filter.add_hashes(&hashes) {
        Err(Error::NotAcknowledged {
            wanted: 1,
            got: 0,
            timeout,
        }) => assert_eq!(timeout, wait),
        other => panic!("expected the replica's 0 acknowledgements, got {other:?}"),
    }
    assert!(started.elapsed() >= wait);
    // One connection: the WAIT was answered, not cut off and sent again.
    let sent = server.received(&["BF.HASHADD", "WAIT"]);
    assert!(sent.iter().all(|(connection, _)| *connection == 0), "{sent:?}");
    assert_eq!(sent.iter().filter(|(_, name)| name == "WAIT").count(), 1);
}
