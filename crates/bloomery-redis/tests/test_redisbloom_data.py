"""RedisBloom's data in a server running bloomery: the RDB file RedisBloom 2.6.28 wrote
(crates/bloomery/tests/data/redisbloom/, made by scripts/redisbloom-fixtures.sh) loads,
and every filter in it finds every item added to it, with RedisBloom's counts; the keys
keep RedisBloom's type (MBbloom--) through writes, restarts, replication and DUMP/RESTORE,
so the data can also move back."""
import math
import shutil
import struct
import time
from pathlib import Path

import pytest

from conftest import ROOT, Server
from rdb_payload import Value

FIXTURES = ROOT / "crates/bloomery/tests/data/redisbloom"
NAMES = ["scaled", "nonscaling", "expansion4", "tiny_error", "large_error", "capacity1", "defaults"]


def lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line]


def expected_counts(name: str) -> dict[str, str]:
    """RedisBloom's BF.INFO fields and BF.CARD after all items (the RDB's state)."""
    fields = {}
    for line in (FIXTURES / f"{name}.more.info").read_text().splitlines():
        field, value = line.rsplit(" ", 1)
        fields[field] = value
    return fields


def all_items(name: str) -> list[bytes]:
    return lines(FIXTURES / f"{name}.items") + lines(FIXTURES / f"{name}.more.items")


@pytest.fixture
def loaded(tmp_path):
    shutil.copy(FIXTURES / "dump.rdb", tmp_path / "dump.rdb")
    server = Server(tmp_path).start()
    yield server
    server.stop()


def check_every_filter(client):
    for name in NAMES:
        assert client.type(name) == b"MBbloom--", name
        items = all_items(name)
        assert all(client.execute_command("BF.MEXISTS", name, *items)), name
        expected = expected_counts(name)
        assert client.execute_command("BF.CARD", name) == int(expected["Card"]), name
        info = client.execute_command("BF.INFO", name)
        info = dict(zip([field.decode() for field in info[::2]], info[1::2]))
        assert info["Capacity"] == int(expected["Capacity"]), name
        assert info["Number of filters"] == int(expected["Number of filters"]), name
        assert info["Number of items inserted"] == int(expected["Number of items inserted"]), name


def test_redisbloom_rdb_loads_and_every_item_is_found(loaded):
    client = loaded.client()
    assert sorted(client.keys()) == sorted(name.encode() for name in NAMES)
    check_every_filter(client)
    # An item never added is absent from most of them (1% filters: a few may say yes).
    absent = [client.execute_command("BF.EXISTS", name, b"never added") for name in NAMES]
    assert sum(absent) <= 2


def test_writes_restart_and_dump_restore_keep_redisbloom_type(loaded, tmp_path):
    client = loaded.client()
    # Growth as RedisBloom grows: capacity1 (links of 1, 2, 4, 8, 16, 32) takes a seventh.
    before = client.execute_command("BF.CARD", "capacity1")
    new = [f"new:{i}".encode() for i in range(100)]
    client.execute_command("BF.MADD", "capacity1", *new)
    assert all(client.execute_command("BF.MEXISTS", "capacity1", *new))
    assert client.execute_command("BF.CARD", "capacity1") > before
    # NONSCALING stays full.
    with pytest.raises(Exception, match="full"):
        client.execute_command("BF.ADD", "nonscaling", "one more item")
    client.save()
    loaded.stop()
    loaded.start()
    client = loaded.client()
    assert client.type("capacity1") == b"MBbloom--"
    assert all(client.execute_command("BF.MEXISTS", "capacity1", *new))
    for name in NAMES:
        assert all(client.execute_command("BF.MEXISTS", name, *all_items(name))), name
    # DUMP/RESTORE keeps the type and the bits.
    payload = client.dump("scaled")
    client.restore("scaled-copy", 0, payload)
    assert client.type("scaled-copy") == b"MBbloom--"
    assert all(client.execute_command("BF.MEXISTS", "scaled-copy", *all_items("scaled")))
    assert client.execute_command("DEBUG", "DIGEST-VALUE", "scaled") == client.execute_command(
        "DEBUG", "DIGEST-VALUE", "scaled-copy"
    )


def test_a_replica_receives_redisbloom_filters(loaded, tmp_path):
    replica_dir = tmp_path / "replica"
    replica_dir.mkdir()
    replica = Server(replica_dir).start()
    try:
        client = replica.client()
        client.execute_command("REPLICAOF", "127.0.0.1", loaded.port)
        loaded.client().execute_command("BF.ADD", "scaled", "after sync")
        loaded.client().execute_command("WAIT", 1, 10000)
        for _ in range(200):
            if client.info("replication").get("master_link_status") == "up" and client.exists("scaled"):
                break
            time.sleep(0.05)
        assert client.type("scaled") == b"MBbloom--"
        assert client.execute_command("BF.EXISTS", "scaled", "after sync") == 1
        for name in NAMES:
            assert all(client.execute_command("BF.MEXISTS", name, *all_items(name))), name
    finally:
        replica.stop()


def pieces(path: Path) -> list[tuple[int, bytes]]:
    """The (iterator, data) pieces of RedisBloom's BF.SCANDUMP, as the fixture stores them."""
    data = path.read_bytes()
    out, at = [], 0
    while at < len(data):
        iterator, length = struct.unpack_from("<QQ", data, at)
        out.append((iterator, data[at + 16 : at + 16 + length]))
        at += 16 + length
    return out


def scandump(client, key) -> list[tuple[int, bytes]]:
    out, iterator = [], 0
    while True:
        iterator, data = client.execute_command("BF.SCANDUMP", key, iterator)
        if iterator == 0:
            return out
        out.append((iterator, data))


def test_live_migration_scandump_pieces_load_with_loadchunk(tmp_path):
    """RedisBloom's BF.SCANDUMP pieces, sent with BF.LOADCHUNK (the live migration path),
    make the same filters here; BF.SCANDUMP gives RedisBloom's pieces back unchanged."""
    server = Server(tmp_path).start()
    try:
        client = server.client()
        for name in NAMES:
            source = pieces(FIXTURES / f"{name}.scandump")
            for iterator, data in source:
                assert client.execute_command("BF.LOADCHUNK", name, iterator, data) == b"OK"
            assert client.type(name) == b"MBbloom--"
            assert all(client.execute_command("BF.MEXISTS", name, *lines(FIXTURES / f"{name}.items")))
            assert scandump(client, name) == source, name
        # A damaged header is refused, and nothing is created.
        header = pieces(FIXTURES / "scaled.scandump")[0][1]
        with pytest.raises(Exception, match="bad data"):
            client.execute_command("BF.LOADCHUNK", "damaged", 1, header[:-3])
        assert not client.exists("damaged")
    finally:
        server.stop()


def test_aof_rewrite_and_replay_keep_redisbloom_filters(tmp_path):
    """The AOF rewrite emits RedisBloom's LOADCHUNK pieces for these keys; a restart from
    the AOF alone brings every filter back."""
    shutil.copy(FIXTURES / "dump.rdb", tmp_path / "dump.rdb")
    server = Server(tmp_path).start()
    try:
        client = server.client()
        # Without the RDB preamble the rewrite writes commands: the type's AOF rewrite.
        client.config_set("aof-use-rdb-preamble", "no")
        client.config_set("appendonly", "yes")
        deadline = time.monotonic() + 30
        while client.info("persistence")["aof_rewrite_in_progress"] or client.info("persistence")[
            "aof_rewrite_scheduled"
        ]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        client.execute_command("BF.ADD", "scaled", "after the rewrite")
        (tmp_path / "dump.rdb").unlink()
        server.stop()
        assert b"BF.LOADCHUNK" in b"".join(
            path.read_bytes() for path in (tmp_path / "appendonlydir").iterdir()
        )
        server.extra = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]
        server.start()
        client = server.client()
        for name in NAMES:
            assert client.type(name) == b"MBbloom--", name
            assert all(client.execute_command("BF.MEXISTS", name, *all_items(name))), name
        assert client.execute_command("BF.EXISTS", "scaled", "after the rewrite") == 1
    finally:
        server.stop()


def murmur2_32(data: bytes, seed: int) -> int:
    """MurmurHash2, 32-bit: RedisBloom's hash for filters without its FORCE64 option."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (seed ^ len(data)) & mask
    whole = len(data) // 4 * 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little") * m & mask
        k = (k ^ (k >> 24)) * m & mask
        h = (h * m & mask) ^ k
    tail = data[whole:]
    if tail:
        for i, byte in enumerate(tail):
            h ^= byte << (8 * i)
        h = h * m & mask
    h = (h ^ (h >> 13)) * m & mask
    return h ^ (h >> 15)


def encoding_0_link(entries: int, bpe: float, items: list[bytes]) -> list:
    """One link of RedisBloom's RDB encoding 0 (no options word: 32-bit hashes; no bit
    count: RedisBloom takes entries * bpe), with `items` set as RedisBloom sets them."""
    bits = int(entries * bpe)
    hashes = math.ceil(0.693147180559945 * bpe)
    bitmap = bytearray((bits + 63) // 64 * 8)
    for item in items:
        a = murmur2_32(item, 0x9747B28C)
        b = murmur2_32(item, a)
        for i in range(hashes):
            x = (a + i * b) % bits
            bitmap[x >> 3] |= 1 << (x & 7)
    return [("uint", entries), ("double", 0.01), ("uint", hashes), ("double", bpe),
            ("string", bytes(bitmap)), ("uint", len(items))]


def test_redisbloom_encoding_0_is_read_as_redisbloom_reads_it(tmp_path):
    """RedisBloom's oldest RDB encoding stored no bit count: RedisBloom 2.6.28 takes
    entries * bpe and refuses a link whose buffer holds more bits than that (the positions
    were taken modulo the smaller count). Such a link is refused here too, rather than
    read with the buffer's bit count, which lost items; a link whose counts agree loads,
    with every item found."""
    server = Server(tmp_path, "--rdbcompression", "no").start()
    try:
        client = server.client()
        client.execute_command("BF.RESERVE", "probe", 0.01, 100, "LAYOUT", "redisbloom")
        probe = Value(client.dump("probe"))
        assert probe.module_id & 0x3FF == 4  # what the module writes: encoding 4
        probe.module_id &= ~0x3FF  # MBbloom--, encoding version 0
        items = [f"v0-item-{i}".encode() for i in range(60)]

        # 64 entries at 9.625 bits: 616 bits, 77 bytes... rounded to 80 bytes (640 bits)
        # by the writer, so RedisBloom refuses it; and 100 at 9.625: 962 bits in 968.
        for entries in (64, 100):
            link = encoding_0_link(entries, 9.625, items)
            body = probe.body([("uint", len(items)), ("uint", 1), *link])
            with pytest.raises(Exception, match="Bad data format"):
                client.restore(f"v0-{entries}", 0, probe.payload(body))
            assert not client.exists(f"v0-{entries}")

        # 64 entries at 10 bits: 640 bits, exactly the 80 bytes.
        link = encoding_0_link(64, 10.0, items)
        body = probe.body([("uint", len(items)), ("uint", 1), *link])
        client.restore("v0", 0, probe.payload(body))
        assert client.type("v0") == b"MBbloom--"
        assert all(client.execute_command("BF.MEXISTS", "v0", *items))
        assert client.execute_command("BF.CARD", "v0") == len(items)
        absent = client.execute_command("BF.MEXISTS", "v0", *[f"absent-{i}".encode() for i in range(200)])
        assert sum(absent) < 20
    finally:
        server.stop()
