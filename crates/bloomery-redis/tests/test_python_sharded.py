"""The Python package's ShardedFilter (crates/bloomery-py/src/sharded.rs) against real
redis-server processes running the module: one server, and a Redis Cluster of three
primaries and three replicas. The same filter as the CLI's --redis/--redis-cluster: items
added from Python are found by the CLI and the other way round."""
import multiprocessing
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy
import pytest

import bloomery
from bloomery import RedisError, ShardedFilter
from conftest import cli
from test_sharded_cluster import cluster  # noqa: F401 (the fixture)


def url(server) -> str:
    return f"redis://127.0.0.1:{server.port}"


def cli_run(*args, stdin=None):
    result = subprocess.run([str(cli()), *args], input=stdin, capture_output=True, timeout=300)
    assert result.returncode in (0, 1), result.stderr.decode()
    return result.stdout.decode()


def test_a_sharded_filter_on_one_server_finds_what_every_road_added(server):
    target = url(server)
    made = ShardedFilter.create(target, "urls", 200_000, 0.01, min_shards=8)
    assert made.created and made.shards == 8 and made.expected_items == 200_000 and made.fpp == 0.01
    assert made.name == "urls" and made.target == target and made.seed == 0
    assert repr(made).startswith('<bloomery.ShardedFilter "urls" on redis://127.0.0.1:')

    assert made.add("first") is True
    assert made.add("first") is False
    assert "first" in made and "never added" not in made
    made.add_many([f"url:{i}" for i in range(40_000)])  # three round trips (16,384 a trip)
    made.update(iter([b"raw", bytearray(b"bytes")]), (i for i in range(-5, 5)))
    made.add_many(numpy.arange(1 << 40, (1 << 40) + 20_000, dtype=numpy.int64))
    made.add_many(b"abcdefgh" * 3, item_size=4)
    assert all(made.contains_many([f"url:{i}" for i in range(40_000)]))
    assert all(made.contains_many(numpy.arange(1 << 40, (1 << 40) + 20_000, dtype=numpy.uint64)))
    assert made.contains_many([b"raw", b"bytes", -5, 4, b"abcd", b"efgh"]) == [True] * 6
    fresh = made.contains_many([f"fresh:{i}" for i in range(50_000)])
    assert sum(fresh) < 50_000 * 0.02, sum(fresh)

    # Opened again, by name: the same plan, the same answers.
    opened = ShardedFilter(target, "urls")
    assert not opened.created and (opened.shards, opened.shard_bytes) == (made.shards, made.shard_bytes)
    assert "url:39999" in opened and (1 << 40) + 19_999 in opened
    # create with the same parameters opens it; with others it is refused.
    again = ShardedFilter.create(target, "urls", 200_000, 0.01, min_shards=8)
    assert not again.created
    with pytest.raises(ValueError, match="exists with other parameters"):
        ShardedFilter.create(target, "urls", 300_000, 0.01, min_shards=8)

    # The CLI finds what Python added (ints as --format long), and the other way round.
    said = cli_run("check", "--redis", target, "urls", "first", "url:123", "raw", "never added")
    assert said.splitlines() == ["probably present\tfirst", "probably present\turl:123",
                                 "probably present\traw", "absent\tnever added"]
    said = cli_run("check", "--redis", target, "--format", "long", "urls", "-5", str((1 << 40) + 7))
    assert said.count("probably present") == 2, said
    cli_run("add", "--redis", target, "urls", "-i", "-", stdin=b"".join(b"cli:%d\n" % i for i in range(5000)))
    assert all(opened.contains_many([f"cli:{i}" for i in range(5000)]))

    info = opened.info()
    assert info["shards"] == info["shards_created"] == 8
    assert 60_000 < info["estimated_items"] < 75_000, info
    assert info["saturated_shards"] == 0 and 0 < info["fpp_estimate"] < 0.01
    assert opened.missing_shards() == []


def test_sharded_filter_errors_are_python_exceptions(server):
    target = url(server)
    with pytest.raises(LookupError, match="no sharded filter 'nothing here'"):
        ShardedFilter(target, "nothing here")
    with pytest.raises(ValueError, match="bad Redis target"):
        ShardedFilter("http://127.0.0.1:1", "urls")
    with pytest.raises(ValueError, match="expected_items"):
        ShardedFilter.create(target, "urls", 0)
    with pytest.raises(ValueError, match="min_shards"):
        ShardedFilter.create(target, "urls", 1000, min_shards=0)
    with pytest.raises(ValueError, match="retry_seconds"):
        ShardedFilter(target, "urls", retry_seconds=-1)
    with pytest.raises(RedisError, match="Connection refused"):
        ShardedFilter("redis://127.0.0.1:1", "urls", retry_seconds=0.2)
    # Targets the redis crate cannot use are the target's fault (they were RedisError).
    for bad in (f"{target}/abc", "redis://127.0.0.1:99999", "unix://relative.sock"):
        with pytest.raises(ValueError, match="bad Redis target"):
            ShardedFilter(bad, "urls", retry_seconds=0)
    assert issubclass(RedisError, Exception) and bloomery.RedisError is RedisError

    made = ShardedFilter.create(target, "urls", 10_000, 0.01, min_shards=4)
    with pytest.raises(TypeError, match="not float"):
        made.add(1.5)
    # A timeout WAIT would refuse after every write is refused before any.
    with pytest.raises(ValueError, match="timeout must be a number of seconds from 0 to"):
        made.set_wait(1, 1e16)
    # A bad item ends a batch after the items before it, and says so.
    with pytest.raises(TypeError) as raised:
        made.add_many(["kept", 2.5, "not tried"])
    assert raised.value.__notes__ == ["the 1 item of this call before the bad one was added, the rest were not"]
    assert made.contains_many(["kept", "not tried"]) == [True, False]

    # A shard lost (deleted, evicted, a restart without persistence) is an error for
    # every command on it, never "absent"; the batch's note counts its earlier round trips.
    lost = made.missing_shards()
    assert lost == []
    shard = sorted(key for key in server.client().keys("*") if key != b"urls")[0].decode()
    server.client().delete(shard)
    assert made.missing_shards() == [shard]
    with pytest.raises(RedisError, match="NOSHARD"):
        made.contains_many([f"item:{i}" for i in range(100)])
    with pytest.raises(RedisError, match="NOSHARD") as raised:
        made.add_many([f"item:{i}" for i in range(20_000)])
    assert raised.value.__notes__ == [
        "no round trip of this call was acknowledged: its items may or may not have been added "
        "(adding them again is harmless)"]


def test_a_restarted_server_is_an_error_not_an_acknowledgement(server):
    """A server restarted without persistence lost the filter: the add that meets it is an
    error (its run_id changed, or its shards are gone), never answered as added, and its
    note says that the round trips acknowledged before it may be lost."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=4)

    def restarting(count, at):
        for i in range(count):
            if i == at:
                server.stop()
                server.start()
            yield f"a:{i}"

    # The first round trip (16,384 items) is acknowledged, then the server restarts.
    with pytest.raises(RedisError, match="restarted during the run") as raised:
        made.add_many(restarting(40_000, 20_000))
    assert raised.value.__notes__ == [
        "the 16384 items of this call before the failed round trip were acknowledged, but may have been "
        "lost with it; the rest may or may not have been added"]


def test_a_refused_round_trip_notes_the_items_added_before_it(server):
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=4)

    def refusing(count, at):
        for i in range(count):
            if i == at:
                # Writes refused from now on (no replica), reads answered.
                server.client().config_set("min-replicas-to-write", 1)
            yield f"a:{i}"

    with pytest.raises(RedisError, match="NOREPLICAS") as raised:
        made.add_many(refusing(40_000, 20_000))
    assert raised.value.__notes__ == [
        "the 16384 items of this call before the failed round trip were added; the rest may or may not have been"]
    assert all(made.contains_many([f"a:{i}" for i in range(16_384)]))


def test_threads_share_a_sharded_filter_and_lose_nothing(server):
    made = ShardedFilter.create(url(server), "urls", 400_000, 0.01, min_shards=16)
    errors = []

    def adder(start):
        try:
            for chunk in range(start, start + 100_000, 10_000):
                made.add_many(range(chunk, chunk + 10_000))
                made.add(f"single:{chunk}")
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=adder, args=(start,)) for start in range(0, 400_000, 100_000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(made.contains_many(range(400_000)))
    assert all(made.contains_many([f"single:{chunk}" for chunk in range(0, 400_000, 10_000)]))


def test_a_forked_child_gets_connections_of_its_own(server):
    """A filter used in a child forked after it connected (multiprocessing's fork start
    method, os.fork) connects anew there: on the connections both inherited, parent and
    child read each other's replies (this test, on that code: "unexpected reply to
    BF.HASHEXISTS", a child's all-absent reply read as the parent's answers)."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8)
    made.set_wait(0, 1.0)
    present = [f"u:{i}" for i in range(20_000)]
    made.add_many(present)
    absent = [f"absent:{i}" for i in range(2_000)]
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(reader)
            wrong = 0
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                wrong += sum(made.contains_many(absent)) > 40
                made.add_many(present[:2_000])
            os.write(writer, b"%d" % wrong)
            status = 0
        finally:
            os._exit(status)
    os.close(writer)
    calls = 0
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        assert all(made.contains_many(present[2_000:4_000]))
        calls += 1
    said = os.read(reader, 64)
    os.close(reader)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and said == b"0", (status, said)
    assert calls > 10


def in_forked_child(work, seconds=20) -> int:
    """Runs `work` in a child made by os.fork, killed by SIGALRM after `seconds` (a hang);
    returns its exit status (0: `work` returned True)."""
    pid = os.fork()
    if pid == 0:
        status = 3
        try:
            signal.alarm(seconds)
            status = 0 if work() else 1
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_fork_while_another_thread_is_inside_a_call_does_not_hang_the_child(server):
    """A thread inside a call holds the client's lock for the round trip; a fork then gave
    the child that lock held by a thread it has not, and its first call waited forever
    (found by review). The child's client is a new one, its lock its own."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8)
    items = [f"u:{i}" for i in range(16_000)]
    made.add_many(items)
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            made.contains_many(items)

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        statuses = []
        for n in range(5):
            time.sleep(0.05)
            statuses.append(in_forked_child(lambda: all(made.contains_many(items[:1000])) and made.add(f"child:{n}")))
    finally:
        stop.set()
        thread.join()
    assert statuses == [0] * 5, statuses  # -14 (SIGALRM) was a child that hung
    assert made.contains_many([f"child:{n}" for n in range(5)]) == [True] * 5


def test_close_ends_the_connections_and_every_call_after_it(server):
    """close() (and the end of a with block) closes the filter's connections; a call after
    it is a ValueError, as on a closed file, in this process and in a child forked later
    (which would otherwise connect anew)."""
    watcher = server.client()
    others = len(watcher.client_list())  # the watcher's own and the fixture's

    def connections():
        # The server sees a closed connection go at its next read of it: soon.
        deadline = time.monotonic() + 5
        while (count := len(watcher.client_list()) - others) and time.monotonic() < deadline:
            time.sleep(0.01)
        return count

    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8)
    made.add_many(range(1000))
    assert len(watcher.client_list()) > others and not made.closed
    made.close()
    assert made.closed and connections() == 0
    made.close()  # again: nothing
    # Empty batches too, which send nothing (they returned as if the filter were open).
    calls = [lambda: made.add(1), lambda: 1 in made, lambda: made.add_many([1]), lambda: made.contains_many([1]),
             lambda: made.update([1]), lambda: made.info(), lambda: made.missing_shards(), lambda: made.set_wait(1),
             lambda: made.add_many([]), lambda: made.add_many(iter([])), lambda: made.add_many(b"", item_size=4),
             lambda: made.contains_many([]), lambda: made.update([]), lambda: made.update()]
    for call in calls:
        with pytest.raises(ValueError, match="^I/O operation on a closed filter"):
            call()
    assert made.name == "urls" and made.shards == 8  # what it was still reads

    def refused_in_child():
        try:
            made.contains_many([1])
        except ValueError:
            return True
        return False

    assert in_forked_child(refused_in_child) == 0

    with ShardedFilter(url(server), "urls") as opened:
        assert all(opened.contains_many(range(1000)))
        assert len(watcher.client_list()) > others
    assert opened.closed and connections() == 0
    with pytest.raises(KeyError), ShardedFilter(url(server), "urls") as opened:  # noqa: PT012
        raise KeyError("the block's own exception goes on")
    assert opened.closed


def test_a_batch_closed_part_way_says_what_it_added(server):
    """Closed by the batch's own generator (as by another thread) between round trips:
    the next round trip is the closed error, noting the items of the first, which are in."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8)

    def items():
        for i in range(40_000):
            if i == 20_000:
                made.close()
            yield i

    with pytest.raises(ValueError, match="^I/O operation on a closed filter") as raised:
        made.add_many(items())
    if sys.version_info >= (3, 11):
        assert raised.value.__notes__ == [
            "the 16384 items of this call before the filter was closed were added, the rest were not"]
    assert all(ShardedFilter(url(server), "urls").contains_many(range(16_384)))


def spawned_lookup(made, items):
    """In a spawned process: its pickled filter's answers."""
    return made.contains_many(items)


def test_a_pickled_filter_opens_again_by_name_in_another_process(server):
    """multiprocessing's spawn and forkserver start methods (forkserver is Linux's default
    from Python 3.14) pickle what they pass: a ShardedFilter could not be pickled. It
    pickles as what opens it again by name, checking there that the name holds the same
    filter; a closed one is not pickled."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8, retry_seconds=7.5)
    made.add_many(range(5_000))
    again = pickle.loads(pickle.dumps(made))
    assert (again.name, again.shards, again.shard_bytes, again.target) == (made.name, made.shards, made.shard_bytes,
                                                                         made.target)
    assert all(again.contains_many(range(5_000)))
    reopen, args = made.__reduce__()
    assert reopen == ShardedFilter._reopen and args[:3] == (url(server), "urls", 7.5) and args[4:] == (0, 0.0)
    made.set_wait(1, 2.0)
    assert made.__reduce__()[1][4:] == (1, 2.0)
    with pytest.raises(RedisError, match="replicas"):  # the wait went along: this server has none
        pickle.loads(pickle.dumps(made)).add("x")
    made.set_wait(0)

    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        answers = pool.starmap(spawned_lookup, [(made, list(range(0, 5_000, 7))), (made, [f"absent:{i}" for i in range(100)])])
    assert all(answers[0]) and sum(answers[1]) <= 5

    pickled = pickle.dumps(made)
    watcher = server.client()
    watcher.delete(*watcher.keys("*"))
    ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=16)
    with pytest.raises(ValueError, match="was made again with other parameters .* since it was pickled"):
        pickle.loads(pickled)
    made.close()
    with pytest.raises(ValueError, match="^I/O operation on a closed filter"):
        pickle.dumps(made)


def test_a_forked_child_refuses_a_filter_made_again_with_other_parameters(server):
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8)
    made.add("kept")
    # The filter deleted and made again under its name, with another seed, since.
    client = server.client()
    client.delete(*client.keys("*"))
    ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8, seed=7)

    def child():
        try:
            made.add("from the child")
        except ValueError as error:
            return "made again with other parameters" in str(error)
        return False

    assert in_forked_child(child) == 0


def lossy_proxy(target_port, delay=0.0):
    """A TCP proxy to the server on `target_port` that, once armed, passes one BF.HASHADD
    on, reads the server's reply and closes the client's connection without it: the add
    ran, its reply was lost. Each reply waits `delay` seconds first. Returns (the
    listening socket, the arming event)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    armed = threading.Event()

    def close(*ends):
        for end in ends:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def pipe(source, sink, dropping, client_side):
        try:
            while data := source.recv(65536):
                if client_side and b"BF.HASHADD" in data and armed.is_set():
                    armed.clear()
                    dropping.set()  # before the command goes: its reply must not come back
                elif not client_side and dropping.is_set():
                    break  # the server ran it and replied; the reply goes nowhere
                elif not client_side:
                    time.sleep(delay)
                sink.sendall(data)
        except OSError:
            pass
        close(source, sink)

    def serve():
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", target_port))
            dropping = threading.Event()
            threading.Thread(target=pipe, args=(client, upstream, dropping, True), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client, dropping, False), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, armed


def test_an_add_whose_reply_was_lost_is_an_error_not_an_old_item(server):
    """A single add whose reply was lost is sent again, and the second reply says the item
    was there (the first send added it): False would take a first occurrence for a repeat
    (found by review; the CLI's dedup refuses such answers too). It raises, the item in the
    filter; a batch add is unaffected."""
    listener, armed = lossy_proxy(server.port)
    try:
        target = f"redis://127.0.0.1:{listener.getsockname()[1]}"
        made = ShardedFilter.create(target, "urls", 100_000, 0.01, min_shards=4, retry_seconds=10)
        assert made.add("before") is True
        armed.set()
        with pytest.raises(RedisError, match="reply was lost"):
            made.add("first")
        assert not armed.is_set(), "the proxy dropped a reply"
        assert "first" in made
        assert made.add("first") is False
        armed.set()
        made.add_many([f"batch:{i}" for i in range(100)])
        assert all(made.contains_many([f"batch:{i}" for i in range(100)]))
    finally:
        listener.close()


def test_a_create_that_meets_shards_of_another_plan_says_what_to_do(server):
    """A create of the name with other parameters that ran at the same time, or stopped
    part way, leaves shards of another geometry and no plan: said as such (ValueError,
    with the keys to delete), where the shard command's own error came through."""
    target = url(server)
    ShardedFilter.create(target, "urls", 100_000, 0.01, min_shards=8)
    server.client().delete("urls")  # the plan, as a create that stopped part way leaves none
    with pytest.raises(ValueError, match="has no plan, and some of its shards were made for another") as raised:
        ShardedFilter.create(target, "urls", 200_000, 0.01, min_shards=8)
    assert "delete its shards" in str(raised.value)
    # The same parameters take the shards over (they hold no items).
    assert ShardedFilter.create(target, "urls", 100_000, 0.01, min_shards=8).created


def test_ctrl_c_ends_a_long_batch_between_round_trips(server):
    """A batch of many round trips, with the GIL released in each, took no Ctrl-C until
    it ended (or its retries did). Now between round trips or in one: KeyboardInterrupt,
    noting the items added before it, all of which are found. (Through a proxy that holds each reply
    10 ms: 245 round trips take seconds.)"""
    listener, _ = lossy_proxy(server.port, delay=0.01)
    try:
        made = ShardedFilter.create(f"redis://127.0.0.1:{listener.getsockname()[1]}", "urls", 10_000_000, 0.01,
                                    min_shards=8)
        items = numpy.arange(4_000_000, dtype=numpy.int64)
        timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt) as raised:
            made.add_many(items)
        assert time.monotonic() - started < 1.5
        timer.join()
        note, = raised.value.__notes__
        added = int(note.split()[1])
        # Between two round trips, or in one (the signal breaks its wait for the replies:
        # what it sent may or may not have been done).
        assert note in (f"the {added} items of this call before the interruption were added, the rest were not",
                        f"the {added} items of this call before the interrupted round trip were added; "
                        "the rest may or may not have been"), note
        assert 0 < added < len(items) and added % 16_384 == 0, added
        assert all(made.contains_many(items[:added]))
    finally:
        listener.close()


def test_ctrl_c_ends_the_retries_of_a_call_on_a_server_that_is_down(server):
    """A call on a server that went away retries for retry_seconds (60 here) with the GIL
    released, and took no Ctrl-C until then (then a RedisError, and the KeyboardInterrupt
    only after). Now Python's handlers run between its tries: KeyboardInterrupt within a
    try's time; a batch's note says the items of the interrupted round trip may or may not
    be in."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8, retry_seconds=60)
    made.add_many(range(20_000))
    server.stop()  # refused from now on: worth retrying
    for call in (lambda: made.add("x"), lambda: "x" in made, lambda: made.contains_many(range(10)),
                 lambda: made.add_many(range(20_000, 60_000)), lambda: ShardedFilter(url(server), "urls", retry_seconds=60)):
        timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt) as raised:
            call()
        assert time.monotonic() - started < 5
        timer.join()
    assert raised.value.__class__ is KeyboardInterrupt
    # The batch's first round trip was the one interrupted: nothing of it is known.
    with pytest.raises(KeyboardInterrupt) as raised:
        timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        made.add_many(range(20_000, 60_000))
    timer.join()
    assert raised.value.__notes__ == [
        "the call was interrupted in its first round trip: its items may or may not have been added"]


def test_a_call_retrying_on_a_server_that_is_down_ends_when_the_filter_is_closed(server):
    """The retries that run Python's signal handlers hold the filter's lock: a handler
    that closed the filter waited for that lock for ever (found by review), and a close()
    from another thread waited out the retry time with Ctrl-C ignored. Now a handler's
    close() ends the call at its next try (ValueError), its other calls of the filter are a
    RuntimeError, and another thread's close() ends the retries."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8, retry_seconds=60)
    server.stop()

    def in_handler(work):
        previous = signal.signal(signal.SIGUSR1, lambda *_: work())
        timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGUSR1))
        timer.start()
        started = time.monotonic()
        try:
            with pytest.raises(Exception) as raised:
                made.contains_many(range(10))
        finally:
            timer.join()
            signal.signal(signal.SIGUSR1, previous)
        assert time.monotonic() - started < 5
        return raised.value

    error = in_handler(lambda: "x" in made)
    assert isinstance(error, RuntimeError) and "a signal handler used this ShardedFilter" in str(error), error
    error = in_handler(made.close)
    assert isinstance(error, ValueError) and str(error) == "I/O operation on a closed filter", error
    assert made.closed

    server.start()  # empty: no persistence
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8, retry_seconds=60)
    server.stop()
    failures = []

    def worker():
        try:
            made.add_many(range(20_000))
        except Exception as error:  # noqa: BLE001 (checked below)
            failures.append(error)

    thread = threading.Thread(target=worker)
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    made.close()
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - started < 5
    error, = failures
    assert isinstance(error, ValueError) and str(error) == "I/O operation on a closed filter", error


def test_a_signal_with_a_handler_does_not_cut_a_reply_short(server):
    """Python's handlers interrupt the system call they arrive in: a SIGUSR1 (or a timer's
    SIGALRM) during a reply's read was taken for a lost connection, and a single add was
    sent again and raised "the add's reply was lost" (found by a hunt). The signals wait
    while a call reads, and the handler runs after it."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8)
    watcher = server.client()
    handled = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: handled.append(time.monotonic()))
    try:
        for n in range(3):
            # The server sleeps 0.5 s on another connection: the add waits for its reply.
            sleeper = threading.Thread(target=lambda: watcher.execute_command("DEBUG", "SLEEP", "0.5"))
            sleeper.start()
            time.sleep(0.05)
            timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGUSR1))
            timer.start()
            assert made.add(f"new:{n}") is True
            timer.join()
            sleeper.join()
        assert len(handled) == 3
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_ctrl_c_and_close_do_not_wait_for_another_threads_call(server):
    """A call on the main thread waiting for the filter while another thread's call held
    it (retrying, or in a WAIT with no timeout) took no Ctrl-C until that call ended, and
    close() waited for it, for ever after set_wait(1, 0) on a server with no replica."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8, retry_seconds=60)
    made.set_wait(1, 0)  # no replica: every add waits for ever
    failures = []

    def worker():
        try:
            made.add("waits")
        except Exception as error:  # noqa: BLE001 (checked below)
            failures.append(error)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    time.sleep(0.3)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        made.add("main")
    assert time.monotonic() - started < 3
    timer.join()
    started = time.monotonic()
    made.close()
    assert made.closed and time.monotonic() - started < 1
    with pytest.raises(ValueError, match="closed"):
        made.add("x")
    assert thread.is_alive()  # still in its WAIT, as set_wait(1, 0) asked


def test_set_wait_edges(server):
    """A positive timeout below a nanosecond was 0 (wait for ever); a set_wait refused
    (here from a signal handler during a call) still changed what pickles and forks use;
    a timeout past what nanoseconds hold came back from a pickle shorter."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8, retry_seconds=30)
    made.set_wait(1, 1e-10)
    started = time.monotonic()
    with pytest.raises(RedisError, match="replicas"):
        made.add("x")
    assert time.monotonic() - started < 2
    made.set_wait(1, 1e12)
    assert made.__reduce__()[1][4:] == (1, 1e12)
    made.set_wait(0)
    server.stop()
    previous = signal.signal(signal.SIGUSR1, lambda *_: made.set_wait(1, 0.2))
    try:
        timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGUSR1))
        timer.start()
        with pytest.raises(RuntimeError, match="a signal handler used this ShardedFilter"):
            made.add("y")
        timer.join()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert made.__reduce__()[1][4:] == (0, 10.0)


def test_ctrl_c_ends_retries_in_a_child_forked_from_another_thread(server):
    """A child forked from a thread other than the main one has that thread as its main
    thread: the filter's retries there ran no signal handler (it compared with the parent's
    main thread), and Ctrl-C waited out the retry time."""
    made = ShardedFilter.create(url(server), "urls", 100_000, 0.01, min_shards=8, retry_seconds=30)
    made.add("x")
    server.stop()
    statuses = []

    def fork_here():
        def child():
            threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
            started = time.monotonic()
            try:
                made.add("y")
            except KeyboardInterrupt:
                return time.monotonic() - started < 5
            return False

        statuses.append(in_forked_child(child, seconds=40))

    thread = threading.Thread(target=fork_here)
    thread.start()
    thread.join()
    assert statuses == [0], statuses


def test_a_sharded_filter_on_a_cluster_from_python_and_the_cli(cluster):  # noqa: F811
    servers = cluster
    target = "redis+cluster://" + ",".join(f"127.0.0.1:{server.port}" for server in servers)
    made = ShardedFilter.create(target, "urls", 1_000_000, 0.01, min_shards=32)
    assert made.created and made.shards >= 32
    assert made.target.startswith("the cluster at redis://127.0.0.1:")
    # Each round trip waits for a replica of every primary it wrote to.
    made.set_wait(1, 10.0)
    made.add_many([f"url:{i}" for i in range(100_000)])
    with pytest.raises(ValueError, match="replicas"):
        made.set_wait(-1)
    made.set_wait(0)
    made.add_many(numpy.arange(0, 50_000, dtype=numpy.int64))

    # Every primary holds shards (spread by slot), and a client of any node finds them all.
    holding = [server for server in servers
               if server.client().info("replication")["role"] == "master"
               and any(key != b"urls" for key in server.client().keys("*"))]
    assert len(holding) == 3
    for server in servers:
        reopened = ShardedFilter(f"redis+cluster://127.0.0.1:{server.port}", "urls")
        assert all(reopened.contains_many([f"url:{i}" for i in range(0, 100_000, 97)]))
    assert all(made.contains_many([f"url:{i}" for i in range(100_000)]))
    assert all(made.contains_many(range(50_000)))

    seeds = ",".join(f"127.0.0.1:{server.port}" for server in servers)
    said = cli_run("check", "--redis-cluster", seeds, "urls", "url:0", "url:99999", "not there")
    assert said.splitlines() == ["probably present\turl:0", "probably present\turl:99999", "absent\tnot there"]
    cli_run("add", "--redis-cluster", seeds, "urls", "-i", "-", stdin=b"".join(b"cli:%d\n" % i for i in range(3000)))
    assert all(made.contains_many([f"cli:{i}" for i in range(3000)]))
    info = made.info()
    assert info["shards_created"] == made.shards and 140_000 < info["estimated_items"] < 170_000, info

