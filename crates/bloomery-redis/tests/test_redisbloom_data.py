"""RedisBloom's data in a server running bloomery: the RDB file RedisBloom 2.6.28 wrote
(crates/bloomery/tests/data/redisbloom/, made by scripts/redisbloom-fixtures.sh) loads,
and every filter in it finds every item added to it, with RedisBloom's counts; the keys
keep RedisBloom's type (MBbloom--) through writes, restarts, replication and DUMP/RESTORE,
so the data can also move back."""
import hashlib
import math
import shutil
import struct
import time
from pathlib import Path

import pytest

from conftest import ROOT, Server, cli, error_of
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


def test_items_added_during_a_live_migration_stay_present(tmp_path):
    """The key RedisBloom's header piece makes is live (as in RedisBloom): items a client
    adds before the last piece arrives stay present after it (pieces are ORed in)."""
    server = Server(tmp_path).start()
    try:
        client = server.client()
        for name in ["scaled", "expansion4", "defaults"]:
            source = pieces(FIXTURES / f"{name}.scandump")
            assert client.execute_command("BF.LOADCHUNK", name, *source[0]) == b"OK"
            between = [f"between-{i}".encode() for i in range(50)]
            client.execute_command("BF.MADD", name, *between)
            for iterator, data in source[1:]:
                assert client.execute_command("BF.LOADCHUNK", name, iterator, data) == b"OK"
            items = between + lines(FIXTURES / f"{name}.items")
            assert all(client.execute_command("BF.MEXISTS", name, *items)), name
    finally:
        server.stop()



def test_pieces_loaded_into_a_filter_that_holds_items_keep_them(tmp_path):
    """Data pieces loaded into a RedisBloom key that already holds items (here: its own
    pieces sent again after more adds, as a retried migration does) are ORed into its bits,
    where RedisBloom copies them over: the items added in between stay present (README,
    "RedisBloom-layout keys ... take pieces")."""
    server = Server(tmp_path).start()
    try:
        client = server.client()
        for name in ["scaled", "expansion4", "defaults"]:
            source = pieces(FIXTURES / f"{name}.scandump")
            for iterator, data in source:
                assert client.execute_command("BF.LOADCHUNK", name, iterator, data) == b"OK"
            later = [f"later-{i}".encode() for i in range(20)]
            added = client.execute_command("BF.MADD", name, *later)
            assert not any(isinstance(answer, Exception) for answer in added), name
            for iterator, data in source[1:]:
                assert client.execute_command("BF.LOADCHUNK", name, iterator, data) == b"OK"
            items = later + lines(FIXTURES / f"{name}.items")
            assert all(client.execute_command("BF.MEXISTS", name, *items)), name
    finally:
        server.stop()

def test_scandump_pieces_joined_become_a_file_for_the_cli_and_python(loaded, tmp_path):
    """RedisBloom's filters (the RDB it wrote), dumped by the migration loop and joined:
    `bloomery import --format redisbloom-scandump` and Python's from_redisbloom_scandump
    make of them filters that find every item, and give the same bytes back."""
    import subprocess

    from bloomery import BloomFilter

    tool = cli()
    client = loaded.client()
    for name in NAMES:
        joined = b"".join(data for _, data in scandump(client, name))
        stream, file = tmp_path / f"{name}.scandump", tmp_path / f"{name}.bloom"
        stream.write_bytes(joined)
        subprocess.run([tool, "import", "--format", "redisbloom-scandump", stream, file], check=True)
        checked = subprocess.run([tool, "check", "-q", "-i", "-", file], input=b"\n".join(all_items(name)) + b"\n")
        assert checked.returncode == 0, name
        exported = subprocess.run(
            [tool, "export", "--format", "redisbloom-scandump", file, "-"], check=True, capture_output=True
        )
        assert exported.stdout == joined, name
        f = BloomFilter.from_redisbloom_scandump(joined)
        assert all(f.contains_many(all_items(name))), name
        assert f == BloomFilter.open(file), name


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


def test_a_restored_count_that_reads_as_the_magic_survives_an_aof_rewrite(tmp_path):
    """A RedisBloom header starts with the chain's item count, little-endian: a RESTORE
    may set it to the 8 bytes of bloomery's magic. The AOF rewrite's first LOADCHUNK
    piece then began with the magic, was taken for bloomery's own format and refused, and
    the replay dropped the key (its items absent after a restart)."""
    server = Server(tmp_path, "--aof-use-rdb-preamble", "no", "--rdbcompression", "no").start()
    try:
        client = server.client()
        client.execute_command("BF.RESERVE", "src", "0.01", "100", "LAYOUT", "redisbloom")
        client.execute_command("BF.ADD", "src", "apple")
        value = Value(client.dump("src"))
        magic = int.from_bytes(b"BLOOMERY", "little")
        fields = list(value.fields)
        # The chain's count, and its one link's (which must add up to it).
        assert fields[0][0] == "uint" and fields[-1][0] == "uint"
        fields[0] = fields[-1] = ("uint", magic)
        client.execute_command("RESTORE", "restored", 0, value.payload(value.body(fields)))
        assert client.execute_command("BF.EXISTS", "restored", "apple") == 1
        client.config_set("appendonly", "yes")  # writes the AOF by a rewrite
        deadline = time.monotonic() + 30
        while client.info("persistence")["aof_rewrite_in_progress"] or client.info("persistence")[
            "aof_rewrite_scheduled"
        ]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        server.stop()
        server.extra += ["--appendonly", "yes"]
        server.start()
        client = server.client()
        assert client.type("restored") == b"MBbloom--"
        assert client.execute_command("BF.EXISTS", "restored", "apple") == 1
        assert client.execute_command("BF.EXISTS", "src", "apple") == 1
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
        # BF.DEBUG says the link's 32-bit hash, as RedisBloom does for a chain without FORCE64.
        assert client.execute_command("BF.DEBUG", "v0")[1].split()[3] == b"hashwidth:32"
        absent = client.execute_command("BF.MEXISTS", "v0", *[f"absent-{i}".encode() for i in range(200)])
        assert sum(absent) < 20
    finally:
        server.stop()


def long_chain_expected():
    """What RedisBloom 2.6.28 answered to `BF.RESERVE long_chain 0.01 10 EXPANSION 1` and
    `BF.MADD long_chain u0 ... u11999` in batches of 500 (scripts/redisbloom-fixtures.sh):
    its BF.INFO reply, its reply counts and refusal, and the SHA-256 of its DUMP's body."""
    info = []
    for line in (FIXTURES / "long_chain.info").read_text().splitlines():
        field, value = line.rsplit(" ", 1)
        if field != "Card":
            info += [field.encode(), int(value)]
    replies = dict(line.split(" ", 1) for line in (FIXTURES / "long_chain.replies").read_text().splitlines())
    return info, replies


def test_a_chain_of_more_than_1024_links_grows_dumps_and_loads_as_redisbloom_s(tmp_path):
    """RedisBloom grows a chain until its error rate underflows: 1067 links here, which
    bloomery refused to load (1024 at most: RESTORE said Bad data format, and an RDB holding
    one kept the server from starting). The chain grows here as in RedisBloom, its DUMP is
    RedisBloom's byte for byte, and it loads from RESTORE and from the RDB file."""
    server = Server(tmp_path, "--rdbcompression", "no").start()
    try:
        client = server.client()
        client.execute_command("BF.RESERVE", "big", "0.01", "10", "EXPANSION", "1", "LAYOUT", "redisbloom")
        items = [f"u{i}".encode() for i in range(12000)]
        replies = []
        for start in range(0, len(items), 500):
            replies += client.execute_command("BF.MADD", "big", *items[start:start + 500])
        refused = [index for index, reply in enumerate(replies) if isinstance(reply, Exception)]
        info, expected = long_chain_expected()
        assert {str(replies[index]) for index in refused} == {expected["refusal"]}
        assert {"added": str(replies.count(1)), "present": str(replies.count(0)), "refused": str(len(refused)),
                "first_refused": str(refused[0])} == {
            key: expected[key] for key in ("added", "present", "refused", "first_refused")}
        assert client.execute_command("BF.INFO", "big") == info
        payload = client.dump("big")
        assert hashlib.sha256(payload[:-10]).hexdigest() == expected["dump_body_sha256"]
        taken = [item for index, item in enumerate(items) if index not in set(refused)]
        client.restore("restored", 0, payload)
        assert client.execute_command("BF.INFO", "restored") == info
        assert all(client.execute_command("BF.MEXISTS", "restored", *taken))
        client.save()
        server.stop()
        server.start()
        client = server.client()
        for key in ("big", "restored"):
            assert client.type(key) == b"MBbloom--"
            assert client.execute_command("BF.INFO", key) == info
            assert all(client.execute_command("BF.MEXISTS", key, *taken))
    finally:
        server.stop()


def test_a_refused_value_is_read_to_its_end(tmp_path):
    """A value the module refuses (more links than it takes, or bits over the memory cap)
    is still read through, so Redis reports it as data the module cannot load, not as
    module data missing its end marker (what stopping mid-value gave)."""
    log = tmp_path / "redis.log"
    server = Server(tmp_path, "--rdbcompression", "no", "--loglevel", "verbose", "--logfile", str(log)).start()
    try:
        client = server.client()
        client.execute_command("BF.RESERVE", "probe", "0.01", "10", "LAYOUT", "redisbloom")
        probe = Value(client.dump("probe"))
        chain, link = probe.fields[2:4], probe.fields[4:]

        def restore(key, count, link_fields):
            body = probe.body([("uint", 0), ("uint", count), *chain, *link_fields * count])
            client.restore(key, 0, probe.payload(body))

        restore("most", 2048, link)  # MAX_LINKS links load
        assert client.execute_command("BF.INFO", "most", "FILTERS") == [2048]
        client.config_set("bloomery.max-filter-memory", "100")  # bytes: 13 links of 8
        for key, count in (("too-many", 2049), ("over-cap", 20)):
            before = log.read_text()
            with pytest.raises(Exception, match="Bad data format"):
                restore(key, count, link)
            said = log.read_text()[len(before):]
            assert "not able to load" in said, said
            assert "EOF marker" not in said, said
            assert not client.exists(key)
    finally:
        server.stop()


def test_a_chain_of_growth_0_loads_and_refuses_to_grow_as_redisbloom_does(tmp_path):
    """RedisBloom takes `BF.RESERVE g0 0.01 2 EXPANSION 4294967296`, truncating the growth
    to 32 bits: 0. Such a chain loads here too (it was refused: RESTORE said Bad data
    format), serves its items, and refuses new ones once full as RedisBloom does, with
    "problem inserting into filter" for each item that would need a new link, and 0 for
    those present (RedisBloom 2.6.28's replies, recorded). bloomery's own BF.RESERVE
    refuses such an expansion instead (its limit is 32768)."""
    server = Server(tmp_path, "--rdbcompression", "no").start()
    try:
        client = server.client()
        client.execute_command("BF.RESERVE", "g0", "0.01", "2", "LAYOUT", "redisbloom")
        value = Value(client.dump("g0"))
        assert value.fields[3] == ("uint", 2)
        value.fields[3] = ("uint", 0)
        client.delete("g0")
        client.restore("g0", 0, value.payload(value.body()))
        assert client.execute_command("BF.INFO", "g0", "EXPANSION") == [0]
        problem = "problem inserting into filter"
        replies = client.execute_command("BF.MADD", "g0", "a", "b", "c", "a", "d", "b")
        assert [str(reply) if isinstance(reply, Exception) else reply for reply in replies] == \
            [1, 1, problem, 0, problem, 0]
        with pytest.raises(Exception, match=problem):
            client.execute_command("BF.ADD", "g0", "zz")
        assert client.execute_command("BF.ADD", "g0", "a") == 0
        replies = client.execute_command("BF.INSERT", "g0", "ITEMS", "q", "a", "r")
        assert [str(reply) if isinstance(reply, Exception) else reply for reply in replies] == \
            [problem, 0, problem]
        assert client.execute_command("BF.INFO", "g0") == [
            b"Capacity", 2, b"Size", 104, b"Number of filters", 1, b"Number of items inserted", 2,
            b"Expansion rate", 0]
        client.save()
        server.stop()
        server.start()
        client = server.client()
        assert client.execute_command("BF.INFO", "g0", "EXPANSION") == [0]
        assert client.execute_command("BF.MEXISTS", "g0", "a", "b") == [1, 1]
        # A NONSCALING chain loads with any growth.
        client.execute_command("BF.RESERVE", "ns", "0.01", "2", "NONSCALING", "LAYOUT", "redisbloom")
        value = Value(client.dump("ns"))
        value.fields[3] = ("uint", 0)
        client.restore("ns0", 0, value.payload(value.body()))
        assert client.execute_command("BF.MADD", "ns0", "a", "b") == [1, 1]
        # bloomery's own choice for such an expansion: refused, with its limit.
        assert error_of(client, "BF.RESERVE", "own", "0.01", "100", "EXPANSION", "4294967296") == \
            "expansion above the module's limit of 32768"
        assert error_of(client, "BF.INSERT", "own", "EXPANSION", "4294967296", "ITEMS", "a") == \
            "expansion above the module's limit of 32768"
        assert not client.exists("own")
    finally:
        server.stop()


def test_a_restored_chain_without_noround_grows_as_redisbloom_grows_it(tmp_path):
    """A chain whose options lack NOROUND (RedisBloom 1.x's data) grows power-of-two links
    in RedisBloom, each link's capacity raised to what its rounded bits hold; bloomery gave
    them NOROUND's sizes (9 links of capacity 511 here, and another DUMP). The BF.DEBUG
    lines, BF.INFO and DUMP body digest were taken from RedisBloom 2.6.28 after the same
    RESTORE and adds."""
    server = Server(tmp_path, "--rdbcompression", "no").start()
    try:
        client = server.client()
        client.execute_command("BF.RESERVE", "probe", 0.01, 100, "LAYOUT", "redisbloom")
        probe = Value(client.dump("probe"))
        bpe = abs(math.log(0.01) / 0.480453013918201)
        # Encoding 4, options FORCE64 only, growth 2; one empty link of capacity 1 at 0.01
        # shaped as RedisBloom shapes it without NOROUND: 2^4 bits, in one 64-bit word.
        fields = [("uint", 0), ("uint", 1), ("uint", 4), ("uint", 2),
                  ("uint", 1), ("double", 0.01), ("uint", math.ceil(0.693147180559945 * bpe)),
                  ("double", bpe), ("uint", 64), ("uint", 4), ("string", bytes(8)), ("uint", 0)]
        client.restore("old", 0, probe.payload(probe.body(fields)))
        for start in range(0, 300, 100):
            client.execute_command("BF.MADD", "old", *[f"n{i}" for i in range(start, start + 100)])
        for i in range(300, 320):
            client.execute_command("BF.ADD", "old", f"n{i}")
        assert [line.decode() for line in client.execute_command("BF.DEBUG", "old")] == [
            "size:298",
            "bytes:8 bits:64 hashes:7 hashwidth:64 capacity:1 size:1 ratio:0.01",
            "bytes:8 bits:64 hashes:8 hashwidth:64 capacity:2 size:2 ratio:0.005",
            "bytes:8 bits:64 hashes:9 hashwidth:64 capacity:5 size:5 ratio:0.0025",
            "bytes:32 bits:256 hashes:10 hashwidth:64 capacity:18 size:18 ratio:0.00125",
            "bytes:128 bits:1024 hashes:11 hashwidth:64 capacity:66 size:66 ratio:0.000625",
            "bytes:512 bits:4096 hashes:12 hashwidth:64 capacity:243 size:206 ratio:0.0003125",
        ]
        assert client.execute_command("BF.INFO", "old") == [
            b"Capacity", 335, b"Size", 1112, b"Number of filters", 6,
            b"Number of items inserted", 298, b"Expansion rate", 2]
        dumped = Value(client.dump("old"))
        assert dumped.module_id & 0x3FF == 4
        assert hashlib.sha256(dumped.body()).hexdigest() == \
            "3f973345a309c3f9a65fd67c72be5273a215907699699fe52c04d6c935937ce3"
    finally:
        server.stop()


@pytest.mark.parametrize("cap", ["0", "1073741824"])
def test_a_clients_restore_of_a_link_with_a_billion_hash_functions_is_refused(tmp_path, cap):
    """RedisBloom's check ties a link's hash count to its stored bits per entry only, so a
    crafted 8-byte link may ask for 10^9 hash functions (each lookup then loops that often:
    one RESTORE stalls the server). A client's RESTORE is held to what the link's error rate
    makes, with the memory cap off too (`MAX_FILTER_MEMORY 0`: it was taken there, as the
    loads of a replay are, which take what the primary held)."""
    server = Server(tmp_path, module_args=["MAX_FILTER_MEMORY", cap]).start()
    try:
        client = server.client()
        client.execute_command("BF.RESERVE", "probe", "0.01", "4", "LAYOUT", "redisbloom")
        probe = Value(client.dump("probe"))
        hashes = 1_000_000_000
        bpe = (hashes - 0.5) / 0.693147180559945
        assert math.ceil(0.693147180559945 * bpe) == hashes
        fields = list(probe.fields)
        # After size, count, options, growth: entries, error, hashes, bpe, bits, n2, bits, size.
        assert [kind for kind, _ in fields[4:12]] == ["uint", "double", "uint", "double", "uint", "uint",
                                                     "string", "uint"]
        fields[6] = ("uint", hashes)
        fields[7] = ("double", bpe)
        with pytest.raises(Exception, match="Bad data format"):
            client.restore("crafted", 0, probe.payload(probe.body(fields)))
        assert not client.exists("crafted")
        # The same link with its own hash count loads (the edit above is what is refused).
        client.restore("kept", 0, probe.payload(probe.body(probe.fields)))
        assert client.exists("kept")
    finally:
        server.stop()
