"""The data type in the keyspace: dumps between keys and servers, AOF, replication,
digest, COPY/RENAME/UNLINK, keyspace notifications."""
import time

import pytest
import redis

from conftest import Server, dump, error_of


def load(client, key, chunks):
    for iterator, data in chunks:
        assert client.execute_command("BF.LOADCHUNK", key, iterator, data) in (b"OK", "OK", True)


def fill(client, key, count, prefix="item"):
    items = [f"{prefix}-{i}" for i in range(count)]
    client.execute_command("BF.RESERVE", key, "0.01", "1000")
    for start in range(0, count, 1000):
        client.execute_command("BF.MADD", key, *items[start:start + 1000])
    return items


def test_scandump_and_loadchunk_copy_a_filter_to_another_key(r):
    items = fill(r, "source", 5000)
    load(r, "copy", dump(r, "source"))
    assert r.execute_command("BF.INFO", "copy") == r.execute_command("BF.INFO", "source")
    assert all(r.execute_command("BF.MEXISTS", "copy", *items))
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "copy") == r.execute_command("DEBUG", "DIGEST-VALUE", "source")


def test_scandump_and_loadchunk_move_a_filter_to_another_server(server, tmp_path):
    items = fill(server.client(), "moving", 3000)
    (tmp_path / "other").mkdir()
    other = Server(tmp_path / "other").start()
    try:
        load(other.client(), "arrived", dump(server.client(), "moving"))
        assert all(other.client().execute_command("BF.MEXISTS", "arrived", *items))
    finally:
        other.stop()


def test_scandump_of_a_missing_key_and_bad_chunks_are_errors(r):
    with pytest.raises(redis.ResponseError, match="not found"):
        r.execute_command("BF.SCANDUMP", "missing", 0)
    for iterator, data in [(1, b"garbage"), (2, b"x"), (1, b"")]:
        with pytest.raises(redis.ResponseError, match="received bad data"):
            r.execute_command("BF.LOADCHUNK", "newk", iterator, data)
    assert r.exists("newk") == 0
    fill(r, "good", 100)
    (iterator, data), = dump(r, "good")
    damaged = bytearray(data)
    damaged[-1] ^= 1
    with pytest.raises(redis.ResponseError, match="received bad data"):
        r.execute_command("BF.LOADCHUNK", "newk", 1, bytes(damaged))
    assert r.exists("newk") == 0


def test_data_survives_an_aof_rewrite_and_restart(tmp_path):
    server = Server(tmp_path, "--appendonly", "yes").start()
    try:
        client = server.client()
        items = fill(client, "aof", 4000)
        client.bgrewriteaof()
        deadline = time.monotonic() + 30
        while client.info("persistence")["aof_rewrite_in_progress"] or client.info("persistence")["aof_rewrite_scheduled"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        client.execute_command("BF.ADD", "aof", "after-rewrite")
        info = client.execute_command("BF.INFO", "aof")
        server.stop()
        server.start()
        client = server.client()
        assert client.execute_command("BF.INFO", "aof") == info
        assert all(client.execute_command("BF.MEXISTS", "aof", *items, "after-rewrite"))
    finally:
        server.stop()


def test_a_replica_answers_as_the_primary(server, tmp_path):
    (tmp_path / "replica").mkdir()
    replica = Server(tmp_path / "replica", "--replicaof", "127.0.0.1", str(server.port)).start()
    try:
        primary = server.client()
        items = fill(primary, "replicated", 2000)
        primary.execute_command("BF.INSERT", "inserted", "CAPACITY", "10", "ITEMS", "a", "b")
        load(primary, "loaded", dump(primary, "replicated"))
        primary.execute_command("WAIT", 1, 5000)
        follower = replica.client()
        deadline = time.monotonic() + 10
        while follower.execute_command("BF.CARD", "loaded") == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for key in ("replicated", "inserted", "loaded"):
            assert follower.execute_command("BF.INFO", key) == primary.execute_command("BF.INFO", key)
            assert follower.execute_command("DEBUG", "DIGEST-VALUE", key) == primary.execute_command("DEBUG", "DIGEST-VALUE", key)
        assert all(follower.execute_command("BF.MEXISTS", "replicated", *items))
    finally:
        replica.stop()


def test_copy_rename_unlink_and_memory_usage(r):
    items = fill(r, "original", 1000)
    assert r.copy("original", "duplicate")
    r.execute_command("BF.ADD", "duplicate", "only-in-duplicate")
    assert r.execute_command("BF.EXISTS", "original", "only-in-duplicate") == 0
    assert all(r.execute_command("BF.MEXISTS", "duplicate", *items))
    r.rename("duplicate", "renamed")
    assert r.execute_command("BF.EXISTS", "renamed", "only-in-duplicate") == 1
    assert r.memory_usage("renamed") > 1000
    r.config_set("lazyfree-lazy-user-del", "yes")
    assert r.unlink("renamed") == 1
    assert r.delete("original") == 1
    assert r.exists("renamed", "original") == 0
    # A large filter is freed in the background.
    r.execute_command("BF.RESERVE", "large", "0.001", "3000000")
    before = r.info("memory")["lazyfreed_objects"]
    assert r.unlink("large") == 1
    deadline = time.monotonic() + 10
    while r.info("memory")["lazyfreed_objects"] == before:
        assert time.monotonic() < deadline, "UNLINK of a large filter was not freed lazily"
        time.sleep(0.05)


def test_writes_raise_keyspace_notifications(r):
    r.config_set("notify-keyspace-events", "KEA")
    pubsub = r.pubsub()
    pubsub.psubscribe("__keyspace@0__:watched")
    assert pubsub.get_message(timeout=2)["type"] == "psubscribe"
    r.execute_command("BF.ADD", "watched", "x")
    message = pubsub.get_message(timeout=2)
    assert message is not None and message["data"] == b"bf.add"
    pubsub.close()


def test_a_load_refused_part_way_is_deleted_with_a_del_event(r):
    """A piece that spoils a load in progress (here: its checksum fails) ends the load: the
    key goes, with the `del` event a DEL gives (it went without one), and the reply says
    the pieces may be of a filter written to between them."""
    r.execute_command("BF.RESERVE", "source", "0.01", "15000000")  # two pieces, about 18 MB
    r.execute_command("BF.ADD", "source", "x")
    pieces = dump(r, "source")
    assert len(pieces) == 2
    r.config_set("notify-keyspace-events", "KEA")
    pubsub = r.pubsub()
    pubsub.psubscribe("__keyspace@0__:copy")
    assert pubsub.get_message(timeout=2)["type"] == "psubscribe"
    (first, data), (second, rest) = pieces
    assert r.execute_command("BF.LOADCHUNK", "copy", first, data) == b"OK"
    damaged = bytes([rest[0] ^ 1]) + rest[1:]
    message = error_of(r, "BF.LOADCHUNK", "copy", second, damaged)
    # Damage, or a filter that changed between its pieces: the reply names both.
    assert "payload checksum mismatch" in message and "changed between its BF.SCANDUMP pieces" in message
    assert r.exists("copy") == 0
    events = []
    while (message := pubsub.get_message(timeout=2)) is not None:
        events.append(message["data"])
    assert events == [b"bf.loadchunk", b"del"], events
    pubsub.close()


CHUNK_BYTES = 16 << 20


def test_a_filter_larger_than_one_chunk_dumps_restarts_and_is_counted_by_redis(server):
    client = server.client()
    before = client.info("memory")["used_memory"]
    # 1.5 * 10^7 items at 1%: a first sub-filter of about 20 MB, two dump chunks.
    client.execute_command("BF.RESERVE", "huge", "0.01", "15000000")
    size = client.execute_command("BF.INFO", "huge", "SIZE")[0]
    assert size > CHUNK_BYTES
    # The filter's memory comes from Redis's allocator: INFO sees it, and maxmemory
    # applies to it (deny-oom commands are refused once the server is over the limit).
    assert client.info("memory")["used_memory"] - before >= size
    items = [f"big-{i}" for i in range(20000)]
    client.execute_command("BF.MADD", "huge", *items)
    chunks = dump(client, "huge")
    assert len(chunks) == 2 and all(len(data) <= CHUNK_BYTES for _, data in chunks)
    load(client, "huge-copy", chunks)
    digest = client.execute_command("DEBUG", "DIGEST-VALUE", "huge")
    assert client.execute_command("DEBUG", "DIGEST-VALUE", "huge-copy") == digest
    client.save()
    server.stop()
    server.start()
    client = server.client()
    assert client.execute_command("DEBUG", "DIGEST-VALUE", "huge") == digest
    assert all(client.execute_command("BF.MEXISTS", "huge", *items))
    client.delete("huge-copy")
    client.config_set("maxmemory", client.info("memory")["used_memory"] + (4 << 20))
    client.execute_command("BF.RESERVE", "fits-under-the-limit-at-the-start", "0.01", "15000000")
    with pytest.raises(redis.ResponseError, match="maxmemory"):
        client.execute_command("BF.RESERVE", "over-the-limit", "0.01", "15000000")
    client.config_set("maxmemory", 0)


def test_a_file_made_by_the_cli_loads_with_loadchunk_and_answers_as_the_cli(r, tmp_path):
    """One interface for every variant: a blocked or counting filter file made by the
    `bloomery` tool is one LOADCHUNK piece (under 16 MiB), and BF.EXISTS then answers
    exactly as `bloomery check` does, for items it holds and items it does not."""
    import subprocess
    from conftest import cli

    tool = cli()
    items = [f"url-{i}" for i in range(2000)]
    probes = items + [f"other-{i}" for i in range(2000)]
    for variant in ["blocked", "counting", "classic"]:
        path = tmp_path / f"{variant}.bloom"
        subprocess.run([tool, "create", "--variant", variant, "--items", "2000", str(path)], check=True)
        subprocess.run([tool, "add", str(path)], input="\n".join(items) + "\n", text=True, check=True)
        checked = subprocess.run([tool, "check", str(path), *probes], capture_output=True, text=True)
        expected = [int(line.startswith("probably present")) for line in checked.stdout.splitlines()]
        assert r.execute_command("BF.LOADCHUNK", variant, 1, path.read_bytes()) in (b"OK", "OK", True)
        assert r.execute_command("BF.MEXISTS", variant, *probes) == expected
        assert all(expected[: len(items)])
        # BF.DEBUG names the variant of a filter that is not a scalable chain.
        assert r.execute_command("BF.DEBUG", variant)[1].startswith(b"variant:%s bytes:" % variant.encode())
        (_, dumped), = dump(r, variant)
        assert dumped == path.read_bytes()
