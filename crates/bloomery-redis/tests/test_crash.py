"""kill -9 of redis-server (and of its saving child) in the middle of a BGSAVE and of an AOF
rewrite, then a restart on the same directory: everything acknowledged before the last
completed save (RDB), or acknowledged at all (AOF with appendfsync always), is there,
filters and BF.LOADCHUNK loads in progress alike. The saves are slowed with Redis's
rdb-key-save-delay so the kill lands inside them. And a full disk (a 4 MiB tmpfs, when
the tests run as root): the AOF stops the server before it acknowledges what it could not
write; a failed BGSAVE makes Redis refuse writes (MISCONF) and keeps the last save."""
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis

from conftest import Server

CHUNK_BYTES = 16 << 20


def children_of(pid: int):
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def kill_server_and_its_child(server: Server):
    """SIGKILL to the saving child first (so it cannot finish its file), then the server."""
    children = children_of(server.process.pid)
    assert children, "the kill must land while the save runs"
    for child in children:
        os.kill(child, signal.SIGKILL)
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait()


def wait_for(client, field, value, timeout=30):
    deadline = time.monotonic() + timeout
    while client.info("persistence")[field] != value:
        assert time.monotonic() < deadline, f"{field} never became {value}"
        time.sleep(0.01)


def two_piece_dump(client):
    """The pieces of a two-piece filter (1.5 * 10^7 items at 1%, about 18 MB)."""
    client.execute_command("BF.RESERVE", "two-pieces", "0.01", "15000000")
    client.execute_command("BF.ADD", "two-pieces", "in-the-big-one")
    pieces, iterator = [], 0
    while True:
        iterator, data = client.execute_command("BF.SCANDUMP", "two-pieces", iterator)
        if iterator == 0:
            break
        pieces.append(data)
    client.delete("two-pieces")
    assert len(pieces) == 2
    return pieces


def add_batches(client, keys, acknowledged, rng, batches):
    for _ in range(batches):
        key = rng.choice(keys)
        items = [f"{key}:{rng.getrandbits(48)}" for _ in range(20)]
        client.execute_command("BF.MADD", key, *items)
        acknowledged.setdefault(key, []).extend(items)


def assert_present(client, acknowledged):
    for key, items in acknowledged.items():
        assert all(client.execute_command("BF.MEXISTS", key, *items)), key


def test_kill_during_bgsave_restarts_from_the_last_completed_save(tmp_path):
    rng = random.Random(7)
    server = Server(tmp_path).start()
    try:
        client = server.client()
        pieces = two_piece_dump(client)
        keys = [f"filter:{index}" for index in range(300)]
        acknowledged = {}
        for round_number in range(3):
            add_batches(client, keys, acknowledged, rng, 300)
            client.execute_command("BF.LOADCHUNK", f"loading:{round_number}", 1, pieces[0])
            client.bgsave()
            wait_for(client, "rdb_bgsave_in_progress", 0)
            assert client.info("persistence")["rdb_last_bgsave_status"] == "ok"
            saved_digest = client.execute_command("DEBUG", "DIGEST")
            saved = {key: list(items) for key, items in acknowledged.items()}

            # Writes after the save, then a save slow enough to be killed in the middle.
            add_batches(client, keys, acknowledged, rng, 100)
            client.config_set("rdb-key-save-delay", 2000)  # 2 ms a key: about 0.6 s
            client.bgsave()
            wait_for(client, "rdb_bgsave_in_progress", 1)
            time.sleep(rng.uniform(0.05, 0.4))
            kill_server_and_its_child(server)

            server.start()
            client = server.client()
            assert client.execute_command("DEBUG", "DIGEST") == saved_digest, f"round {round_number}"
            assert_present(client, saved)
            acknowledged = saved
            for earlier in range(round_number + 1):
                assert "still being loaded" in _error(client, "BF.EXISTS", f"loading:{earlier}", "x")
        # A load saved in progress finishes after the restart.
        assert client.execute_command("BF.LOADCHUNK", "loading:0", 2, pieces[1])
        assert client.execute_command("BF.EXISTS", "loading:0", "in-the-big-one") == 1
    finally:
        server.stop()


def write_until_killed(client, keys, acknowledged, rng):
    try:
        while True:
            add_batches(client, keys, acknowledged, rng, 1)
    except redis.ConnectionError:
        pass


def _error(client, *command) -> str:
    try:
        client.execute_command(*command)
    except redis.ResponseError as error:
        return str(error)
    return ""


def test_kill_during_aof_rewrite_loses_nothing_acknowledged(tmp_path):
    rng = random.Random(11)
    server = Server(tmp_path, "--appendonly", "yes", "--appendfsync", "always").start()
    try:
        client = server.client()
        pieces = two_piece_dump(client)
        keys = [f"filter:{index}" for index in range(300)]
        acknowledged = {}
        loads = []
        for round_number in range(3):
            add_batches(client, keys, acknowledged, rng, 300)
            client.execute_command("BF.LOADCHUNK", f"loading:{round_number}", 1, pieces[0])
            loads.append(f"loading:{round_number}")
            client.config_set("rdb-key-save-delay", 2000)
            client.bgrewriteaof()
            wait_for(client, "aof_rewrite_in_progress", 1)
            if round_number == 1:
                # A load finished during the rewrite.
                client.execute_command("BF.LOADCHUNK", "loading:0", 2, pieces[1])
                loads.remove("loading:0")
            # Writes go on during the rewrite, from another connection, until the kill;
            # each one acknowledged must survive it (the one in flight may or may not).
            writer = threading.Thread(target=write_until_killed, args=(server.client(), keys, acknowledged, rng))
            writer.start()
            time.sleep(rng.uniform(0.05, 0.4))
            kill_server_and_its_child(server)
            writer.join()

            server.start()
            client = server.client()
            assert_present(client, acknowledged)
            for key in loads:
                assert "still being loaded" in _error(client, "BF.EXISTS", key, "x"), key
            if round_number >= 1:
                assert client.execute_command("BF.EXISTS", "loading:0", "in-the-big-one") == 1
    finally:
        server.stop()


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (needs root: skipped otherwise), unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_full_disk_under_the_aof_stops_the_server_without_losing_anything_acknowledged(small_disk):
    server = Server(small_disk, "--appendonly", "yes", "--appendfsync", "always").start()
    try:
        client = server.client()
        acknowledged = {}
        with pytest.raises(redis.ConnectionError):
            for batch in range(100_000):
                key, items = f"filter:{batch % 50}", [f"{batch}:{i}" for i in range(200)]
                client.execute_command("BF.MADD", key, *items)
                acknowledged.setdefault(key, []).extend(items)
        # With appendfsync always, Redis exits on the failed write rather than answer.
        server.process.wait(timeout=10)
        assert sum(map(len, acknowledged.values())) > 100_000
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        server.start()
        assert_present(server.client(), acknowledged)
    finally:
        server.stop()


def test_a_full_disk_under_bgsave_refuses_writes_and_keeps_the_last_save(small_disk):
    # rdbcompression no: a filter of zeros compresses to nothing; a save point: Redis refuses
    # writes after a failed BGSAVE only when it has one.
    server = Server(small_disk, "--rdbcompression", "no", "--save", "3600 1").start()
    try:
        client = server.client()
        client.execute_command("BF.MADD", "saved", "a", "b", "c")
        client.save()
        digest = client.execute_command("DEBUG", "DIGEST")
        client.execute_command("BF.RESERVE", "too-big-for-the-disk", "0.001", "5000000")  # about 9 MB
        client.bgsave()
        wait_for(client, "rdb_bgsave_in_progress", 0)
        assert client.info("persistence")["rdb_last_bgsave_status"] == "err"
        assert "MISCONF" in _error(client, "BF.ADD", "saved", "d")
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait()
        server.start()
        assert server.client().execute_command("DEBUG", "DIGEST") == digest
    finally:
        server.stop()
