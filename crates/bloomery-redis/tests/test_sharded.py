"""BF.HASHRESERVE / BF.HASHADD / BF.HASHEXISTS, the shard commands of sharded filters, on one server; and
docs/sharding.md's routing implemented here from the spec alone (xxhash, fmix64,
multiply-shift) against what the `bloomery` CLI writes."""
import functools
import os
import signal
import struct
import socket
import subprocess
import threading
import time

import numpy
import pytest
import redis
import xxhash

from conftest import CLI as BLOOMERY, Server

MASK = (1 << 64) - 1


def pack(*hashes) -> bytes:
    return struct.pack(f"<{len(hashes)}Q", *hashes)


def crc16(data: bytes, crc: int = 0) -> int:
    """CRC16-XMODEM, as Redis Cluster hashes keys."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


@functools.cache
def slot_tags() -> dict:
    """docs/sharding.md's tag of each slot: the shortest string of 0-9a-z whose CRC16 mod
    16384 is the slot, the first in alphabetical order among those of its length."""
    alphabet = b"0123456789abcdefghijklmnopqrstuvwxyz"
    tags: dict = {}
    prefixes = [(b"", 0)]
    for _ in range(4):
        longer = []
        for prefix, crc in prefixes:
            for char in alphabet:
                tag, value = prefix + bytes([char]), crc16(bytes([char]), crc)
                tags.setdefault(value % 16384, tag.decode())
                longer.append((tag, value))
        if len(tags) == 16384:
            return tags
        prefixes = longer
    raise AssertionError(f"{len(tags)} slots have tags")


def shard_key(name: str, shard: int, shards: int) -> str:
    """docs/sharding.md's key of shard `shard` of `name` (plans v2)."""
    slot = (xxhash.xxh3_64_intdigest(name.encode()) % 16384 + shard * 16384 // shards) % 16384
    return f"{{{slot_tags()[slot]}}}{shard}:{name}"


def fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & MASK
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & MASK
    h ^= h >> 33
    return h


def test_hashreserve_makes_a_shard_and_hashadd_answers_one_byte_per_hash(r):
    # A missing shard is an error, never "absent" (it was lost, with its items) nor made
    # anew by an add (which would hide the loss).
    for command in ("BF.HASHEXISTS", "BF.HASHADD"):
        with pytest.raises(redis.ResponseError, match=r"NOSHARD the shard \{0:f\} is missing"):
            r.execute_command(command, "{0:f}", 16, 7, pack(1, 2))
    assert not r.exists("{0:f}"), "nothing made"
    assert r.execute_command("BF.HASHRESERVE", "{0:f}", 16, 7) == 1
    assert r.execute_command("BF.HASHRESERVE", "{0:f}", 16, 7) == 0  # there, and checked
    assert r.execute_command("BF.HASHEXISTS", "{0:f}", 16, 7, pack(1, 2)) == b"\x00\x00"
    # New, new, a repeat within the command, new.
    assert r.execute_command("BF.HASHADD", "{0:f}", 16, 7, pack(11, 22, 11, 33)) == b"\x01\x01\x00\x01"
    assert r.execute_command("BF.HASHADD", "{0:f}", 16, 7, pack(22, 44)) == b"\x00\x01"
    assert r.execute_command("BF.HASHEXISTS", "{0:f}", 16, 7, pack(11, 22, 33, 44)) == b"\x01" * 4
    info = r.execute_command("BF.INFO", "{0:f}")
    # Size counts as RedisBloom counts: the bits, 32 bytes for the filter, 64 per sub-filter.
    assert info[info.index(b"Size") + 1] == 16 * 64 + 32 + 64
    assert r.execute_command("BF.CARD", "{0:f}") == 4


def test_shard_commands_refuse_what_would_answer_wrongly(r):
    r.execute_command("BF.HASHRESERVE", "s", 16, 7)
    r.execute_command("BF.HASHADD", "s", 16, 7, pack(1))
    with pytest.raises(redis.ResponseError, match="16 blocks and seed 7"):
        r.execute_command("BF.HASHRESERVE", "s", 17, 7)
    for command in ("BF.HASHADD", "BF.HASHEXISTS"):
        with pytest.raises(redis.ResponseError, match="16 blocks and seed 7"):
            r.execute_command(command, "s", 17, 7, pack(1))
        with pytest.raises(redis.ResponseError, match="16 blocks and seed 7"):
            r.execute_command(command, "s", 16, 8, pack(1))
        for bad in (b"", b"1234567", b"123456789"):
            with pytest.raises(redis.ResponseError, match="8-byte"):
                r.execute_command(command, "s", 16, 7, bad)
        for blocks in (0, -1, 2**32 + 1, "x"):
            with pytest.raises(redis.ResponseError, match="BLOCKS"):
                r.execute_command(command, "t", blocks, 7, pack(1))
        with pytest.raises(redis.ResponseError, match="SEED"):
            r.execute_command(command, "t", 16, -1, pack(1))
        with pytest.raises(redis.ResponseError, match="wrong number"):
            r.execute_command(command, "s", 16, 7)
    r.set("string", "x")
    r.execute_command("BF.RESERVE", "scalable", 0.01, 100)
    # A RedisBloom-layout filter is RedisBloom's own type (MBbloom--), but a Bloom filter
    # all the same: the same error as a bloomery filter of another variant, not WRONGTYPE.
    r.execute_command("BF.RESERVE", "rb", 0.01, 10, "LAYOUT", "redisbloom")
    r.execute_command("BF.ADD", "rb", "a")
    for command in ("BF.HASHADD", "BF.HASHEXISTS", "BF.HASHRESERVE"):
        args = () if command == "BF.HASHRESERVE" else (pack(1),)
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command(command, "string", 16, 7, *args)
        with pytest.raises(redis.ResponseError, match="scalable-blocked filter, not a blocked shard"):
            r.execute_command(command, "scalable", 16, 7, *args)
        with pytest.raises(redis.ResponseError, match="redisbloom filter, not a blocked shard"):
            r.execute_command(command, "rb", 16, 7, *args)
    assert r.execute_command("BF.MEXISTS", "rb", "a", "b") == [1, 0]  # untouched


def test_items_are_refused_on_a_shard_and_reads_answer_for_that_shard_alone(r, tmp_path):
    """A shard takes the hashes its filter's client sends (BF.HASHADD); BF.ADD, BF.MADD and
    BF.INSERT of items are refused on it (the item would go into this shard whatever its
    hash, where the client never looks for it, and only raise the shard's false-positive
    rate), on a copy of one too. Reads hash an item as the client does (XXH3-64 with the
    shard's seed), so they answer for this shard alone."""
    assert r.execute_command("BF.HASHRESERVE", "h", 1, 1) == 1
    r.execute_command("COPY", "h", "copy")
    for key in ("h", "copy"):
        for command in (("BF.ADD", key, "b"), ("BF.MADD", key, "b", "c"), ("BF.INSERT", key, "ITEMS", "b"),
                        ("BF.INSERT", key, "NOCREATE", "ITEMS", "b")):
            with pytest.raises(redis.ResponseError, match="made from a block count.*shard of a sharded filter .*BF.HASHADD"):
                r.execute_command(*command)
        assert r.execute_command("BF.HASHRESERVE", key, 1, 1) == 0, "still empty"
    r.execute_command("RESTORE", "restored", 0, r.dump("h"))
    with pytest.raises(redis.ResponseError, match="shard of a sharded filter"):
        r.execute_command("BF.ADD", "restored", "b")
    r.execute_command("BF.HASHRESERVE", "s", 16, 7)
    inside = [f"in-{i}".encode() for i in range(50)]
    r.execute_command("BF.HASHADD", "s", 16, 7, pack(*(xxhash.xxh3_64_intdigest(item, seed=7) for item in inside)))
    outside = [f"out-{i}".encode() for i in range(50)]
    assert r.execute_command("BF.MEXISTS", "s", *inside) == [1] * 50
    assert all(r.execute_command("BF.EXISTS", "s", item) == 1 for item in inside)
    assert sum(r.execute_command("BF.MEXISTS", "s", *outside)) <= 2
    assert 45 <= r.execute_command("BF.CARD", "s") <= 55
    # A blocked filter sized for items (a file `bloomery create` made) is no shard: it
    # takes items as any filter.
    path = tmp_path / "blocked.bloom"
    subprocess.run([BLOOMERY, "create", "--variant", "blocked", "--items", "100", str(path)], check=True)
    assert r.execute_command("BF.LOADCHUNK", "file", 1, path.read_bytes()) in (b"OK", "OK", True)
    assert r.execute_command("BF.ADD", "file", "b") == 1
    assert r.execute_command("BF.MADD", "file", "b", "c") == [0, 1]
    assert r.execute_command("BF.INSERT", "file", "ITEMS", "d") == [1]


def test_item_writes_on_a_shard_that_the_server_replays_keep_their_items(tmp_path):
    """A `BF.ADD` on a shard that an earlier module accepted, in the AOF: the replay adds
    the item (refusing it, as a client's is now, dropped it: `BF.EXISTS` answered 0 after
    the restart, the AOF's later commands loaded)."""
    server = Server(tmp_path, "--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no").start()
    try:
        client = server.client()
        assert client.execute_command("BF.HASHRESERVE", "h", 1, 1) == 1
        server.stop()
        # What the earlier module wrote to the AOF for an accepted BF.ADD, then a later write.
        increments = sorted((tmp_path / "appendonlydir").glob("*.incr.aof"))
        with open(increments[-1], "ab") as aof:
            for command in ((b"BF.ADD", b"h", b"x"), (b"SET", b"after", b"1")):
                aof.write(b"*%d\r\n" % len(command) + b"".join(b"$%d\r\n%s\r\n" % (len(word), word) for word in command))
        client = server.start().client()
        assert client.get("after") == b"1", "the AOF loaded"
        assert client.execute_command("BF.EXISTS", "h", "x") == 1
        # A client's add is still refused.
        with pytest.raises(redis.ResponseError, match="shard of a sharded filter"):
            client.execute_command("BF.ADD", "h", "y")
    finally:
        server.stop()


def test_a_shard_over_the_memory_cap_is_refused_before_allocating(r):
    # With no cap configured, the machine's memory is named as the bound (it was called
    # the module's limit per key, which was 0).
    # (Only on a machine of less than 256 GiB, which this shard of 2^32 blocks passes.)
    if os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") < 64 << 32:
        r.config_set("bloomery.max-filter-memory", 0)
        message = str(pytest.raises(redis.ResponseError, r.execute_command, "BF.HASHRESERVE", "hb", 1 << 32, 0).value)
        assert "more than this machine's memory" in message and "is 0, no limit per key" in message, message
    r.config_set("bloomery.max-filter-memory", 1 << 20)
    with pytest.raises(redis.ResponseError, match="max-filter-memory"):
        r.execute_command("BF.HASHRESERVE", "big", (1 << 20) // 64 + 1, 0)
    assert not r.exists("big")
    assert r.execute_command("BF.HASHRESERVE", "fits", (1 << 20) // 64, 0) == 1
    assert r.execute_command("BF.HASHADD", "fits", (1 << 20) // 64, 0, pack(1)) == b"\x01"


def test_shards_replicate_dump_restore_and_notify(server, tmp_path):
    r = server.client()
    (tmp_path / "replica").mkdir()
    replica = Server(tmp_path / "replica").start()
    try:
        replica.client().replicaof("127.0.0.1", server.port)
        deadline = time.monotonic() + 30
        while replica.client().info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.05)
        pubsub = r.pubsub()
        r.config_set("notify-keyspace-events", "KEA")
        pubsub.psubscribe("__keyspace@0__:*")
        hashes = pack(*(fmix64(i) for i in range(1000, 2000)))  # well mixed, as XXH3's
        r.execute_command("BF.HASHRESERVE", "{3:x}", 64, 0)
        r.execute_command("BF.HASHADD", "{3:x}", 64, 0, hashes)
        # A command that changes no bit is still replicated (so WAIT covers what it found).
        offset = r.info("replication")["master_repl_offset"]
        assert r.execute_command("BF.HASHADD", "{3:x}", 64, 0, pack(fmix64(1000))) == b"\x00"
        assert r.info("replication")["master_repl_offset"] > offset
        assert r.execute_command("WAIT", 1, 5000) == 1
        assert replica.client().execute_command("BF.HASHEXISTS", "{3:x}", 64, 0, hashes) == b"\x01" * 1000
        assert r.execute_command("DEBUG", "DIGEST-VALUE", "{3:x}") == \
            replica.client().execute_command("DEBUG", "DIGEST-VALUE", "{3:x}")
        events = []
        while (message := pubsub.get_message(timeout=1)) is not None:
            events.append(message["data"])
        assert b"bf.add" in events, events
        # DUMP/RESTORE (what MIGRATE does when slots move) keeps a working shard.
        payload = r.dump("{3:x}")
        r.restore("{4:x}", 0, payload)
        assert r.execute_command("BF.HASHEXISTS", "{4:x}", 64, 0, hashes) == b"\x01" * 1000
        assert r.execute_command("BF.HASHADD", "{4:x}", 64, 0, pack(fmix64(5))) == b"\x01"
    finally:
        replica.stop()


def test_the_routing_spec_implemented_in_python_agrees_with_the_cli(server):
    """docs/sharding.md from scratch: hash = XXH3-64(item, seed), shard = fmix64(hash) * S >>
    64, key {T}shard:NAME with T the tag of the shard's slot; items added here through
    BF.HASHADD are found by `bloomery check`, and items the CLI adds are found here."""
    assert BLOOMERY.exists(), f"build the CLI first: {BLOOMERY}"
    url = f"redis://127.0.0.1:{server.port}"
    subprocess.run([str(BLOOMERY), "create", "--redis", url, "spec", "--items", "100000", "--fpp", "0.01",
                    "--seed", "99", "--min-shards", "32"], check=True, timeout=60)
    r = server.client()
    text = r.get("spec").decode()
    words = text.split()
    assert words[:2] == ["bloomery-sharded", "v2"], text
    fields = dict(word.split("=") for word in words[2:])
    shards, blocks, seed = int(fields["shards"]), int(fields["blocks"]), int(fields["seed"])
    assert (shards, seed) == (32, 99)

    def route(item: bytes):
        h = xxhash.xxh3_64_intdigest(item, seed=seed)
        return (fmix64(h) * shards) >> 64, h

    mine = [b"python-%d" % i for i in range(2000)]
    for item in mine:
        shard, h = route(item)
        assert r.execute_command("BF.HASHADD", shard_key("spec", shard, shards), blocks, seed, pack(h)) == b"\x01"
    found = subprocess.run([str(BLOOMERY), "check", "--redis", url, "spec", "--quiet", *mine], timeout=60)
    assert found.returncode == 0
    theirs = [b"cli-%d" % i for i in range(2000)]
    subprocess.run([str(BLOOMERY), "add", "--redis", url, "spec"], input=b"\n".join(theirs) + b"\n",
                   check=True, timeout=60)
    for item in theirs:
        shard, h = route(item)
        assert r.execute_command("BF.HASHEXISTS", shard_key("spec", shard, shards), blocks, seed, pack(h)) == b"\x01"
    # The shards are the ones the spec names, all made by create, and only those.
    keys = {key.decode() for key in r.keys("{*")}
    assert keys == {shard_key("spec", shard, shards) for shard in range(shards)}
    # And `info` lists them, for deleting the filter.
    info = subprocess.run([str(BLOOMERY), "info", "--redis", url, "spec"], capture_output=True, check=True,
                          timeout=60).stdout.decode()
    assert info.split("shard keys: ")[1].split() == [shard_key("spec", shard, shards) for shard in range(shards)]


def test_a_filter_created_from_the_spec_in_python_is_the_clis(server, r):
    """docs/sharding.md's plan line written by another client: the fpp in plain decimal
    with the fewest digits (what numpy's positional formatter writes), never Python's
    repr, whose exponent the spec refuses with a message saying which form it wants."""
    url = f"redis://127.0.0.1:{server.port}"
    shards, blocks, seed, fpp = 8, 100, 5, 1e-5
    for shard in range(shards):
        assert r.execute_command("BF.HASHRESERVE", shard_key("py", shard, shards), blocks, seed) == 1
        assert r.execute_command("BF.HASHRESERVE", shard_key("py", shard, shards), blocks, seed) == 0
    text = f"bloomery-sharded v2 shards={shards} blocks={blocks} seed={seed} items=1000 fpp="
    r.set("py", text + numpy.format_float_positional(fpp, unique=True, trim="-"))
    assert r.get("py").decode().endswith("fpp=0.00001")
    assert bloomery("add", "--redis", url, "py", "a", "b").returncode == 0
    assert bloomery("check", "--redis", url, "py", "a", "b").returncode == 0
    # A shard holding items answers 2: a create without the plan refuses to take it over.
    shard = next(s for s in range(shards) if r.execute_command("BF.CARD", shard_key("py", s, shards)) > 0)
    assert r.execute_command("BF.HASHRESERVE", shard_key("py", shard, shards), blocks, seed) == 2
    r.set("py", text + repr(fpp))
    refused = bloomery("check", "--redis", url, "py", "a")
    assert refused.returncode == 2 and b"fpp=\"1e-05\" is not a number in canonical form (plain decimal" in refused.stderr


def test_cli_dedup_prints_first_occurrences_in_order(server):
    url = f"redis://127.0.0.1:{server.port}"
    lines = b"a\nb\na\nc\nb\nd\n"
    first = subprocess.run([str(BLOOMERY), "dedup", "--redis", url, "--filter", "seen", "--items", "1000"],
                           input=lines, capture_output=True, check=True, timeout=60)
    assert first.stdout == b"a\nb\nc\nd\n"
    # Remembered across runs; a batch of one item at a time gives the same answer.
    again = subprocess.run([str(BLOOMERY), "dedup", "--redis", url, "--filter", "seen", "--batch-items", "1"],
                           input=b"d\ne\ne\n", capture_output=True, check=True, timeout=60)
    assert again.stdout == b"e\n"
    # Other sizing for an existing filter is an error, as for files.
    other = subprocess.run([str(BLOOMERY), "dedup", "--redis", url, "--filter", "seen", "--items", "5000"],
                           input=b"x\n", capture_output=True, timeout=60)
    assert other.returncode == 2 and b"other parameters" in other.stderr
    # So is shard sizing alone, which would size nothing.
    shards = subprocess.run([str(BLOOMERY), "dedup", "--redis", url, "--filter", "seen", "--min-shards", "9"],
                            input=b"x\n", capture_output=True, timeout=60)
    assert shards.returncode == 2 and b"--min-shards applies when dedup makes the filter" in shards.stderr, shards
    assert shards.stdout == b""
    # And a size cap alone (ignored without a word before; a file's dedup refuses it too).
    capped = subprocess.run([str(BLOOMERY), "dedup", "--redis", url, "--filter", "seen", "--max-bytes", "1"],
                            input=b"x\n", capture_output=True, timeout=60)
    assert capped.returncode == 2 and b"--max-bytes applies when dedup makes the filter" in capped.stderr, capped
    assert capped.stdout == b""


def test_cli_create_again_opens_a_filter_an_earlier_sizing_made_for_the_same_parameters(server, r):
    """Block sizing counts a floor under the rate since 2026-11-28, which adds blocks below
    about 1e-7: a filter made before for the same items, rate and shards has other blocks
    per shard. `create` run again for it said "other parameters"; it is that filter, and
    it answers for its items."""
    url = f"redis://127.0.0.1:{server.port}"
    assert bloomery("create", "--redis", url, "now", "--items", "100000", "--fpp", "1e-7",
                    "--min-shards", "4").returncode == 0
    plan = r.get("now").decode()
    blocks = int(plan.split("blocks=")[1].split()[0])
    # The same plan as an earlier sizing made it (fewer blocks), with its shards.
    # An earlier bloomery's plan: v1, shards at {s:NAME}.
    earlier = plan.replace(f"blocks={blocks}", f"blocks={blocks - 7}").replace(" v2 ", " v1 ")
    for shard in range(4):
        r.execute_command("BF.HASHRESERVE", f"{{{shard}:before}}", blocks - 7, 0)
    r.set("before", earlier)
    again = bloomery("create", "--redis", url, "before", "--items", "100000", "--fpp", "1e-7", "--min-shards", "4")
    assert again.returncode == 0, again.stderr
    assert r.get("before").decode() == earlier
    added = bloomery("add", "--redis", url, "before", "x", "y")
    assert added.returncode == 0, added.stderr
    assert bloomery("check", "--redis", url, "before", "x", "y").returncode == 0
    # Other items or rate: still another filter.
    other = bloomery("create", "--redis", url, "before", "--items", "100000", "--fpp", "1e-6", "--min-shards", "4")
    assert other.returncode == 2 and b"other parameters" in other.stderr


def test_cli_an_overfilled_sharded_filter_says_so(server, r):
    """A shard whose every bit is set estimates u64::MAX items: `BF.CARD` answered -1
    for it (a plain cast), `info` summed it as 0 items at rate 0, and `add` said nothing
    of a filter holding many times the items it was sized for (a file's `add` warns)."""
    url = f"redis://127.0.0.1:{server.port}"
    assert bloomery("create", "--redis", url, "small", "--items", "1000", "--min-shards", "4").returncode == 0
    items = "".join(f"{i}\n" for i in range(100_000)).encode()
    added = bloomery("add", "--redis", url, "small", input=items)
    assert added.returncode == 0, added.stderr
    assert (b"warning: sharded filter 'small': holds more than it can count: 4 of the 4 shards read have every "
            b"bit set, more than the 1000 it was sized for; false-positive estimate now 1.0000") in added.stderr, added.stderr
    cards = [r.execute_command("BF.CARD", shard_key("small", shard, 4)) for shard in range(4)]
    assert cards == [2**63 - 1] * 4
    assert r.execute_command("BF.INFO", shard_key("small", 0, 4), "ITEMS") == [2**63 - 1]
    info = bloomery("info", "--redis", url, "small")
    assert info.returncode == 0, info.stderr
    assert b"estimated items: unknown: 4 of 4 shards have every bit set" in info.stdout, info.stdout
    assert b"false-positive estimate: 1.000000" in info.stdout, info.stdout
    # Filled to its size: no warning, and the estimate near the items.
    assert bloomery("create", "--redis", url, "right", "--items", "100000", "--min-shards", "4").returncode == 0
    added = bloomery("add", "--redis", url, "right", input=items)
    assert added.returncode == 0 and b"warning" not in added.stderr, added.stderr
    info = bloomery("info", "--redis", url, "right").stdout.decode()
    estimated = int(info.split("estimated items: ")[1].split()[0])
    assert 95_000 < estimated < 105_000, info
    # Past it by half: warned, with the rate the shards have now.
    more = "".join(f"x{i}\n" for i in range(50_000)).encode()
    added = bloomery("add", "--redis", url, "right", input=more)
    assert b"warning: sharded filter 'right': holds about 1" in added.stderr, added.stderr


def test_cli_create_refuses_a_name_whose_earlier_filter_lost_its_plan(server, r):
    """Filters are made with v2 plans, their shards at spread keys; an earlier bloomery's
    filter (v1 plan, shards at {s:NAME}) whose plan was lost would not be seen by a create
    that makes the v2 keys, and its items would be answered absent: refused, and nothing
    is made."""
    url = f"redis://127.0.0.1:{server.port}"
    for shard in range(8):
        r.execute_command("BF.HASHRESERVE", f"{{{shard}:old}}", 100, 0)
    r.execute_command("BF.HASHADD", "{5:old}", 100, 0, pack(12345))
    for run in (("create", "--redis", url, "old", "--items", "1000", "--min-shards", "8"),
                ("dedup", "--redis", url, "--filter", "old", "--items", "1000", "--min-shards", "8")):
        refused = bloomery(*run, input=b"x\n")
        assert refused.returncode == 2 and b"the shards of one an earlier bloomery made are there" in refused.stderr, refused
        assert refused.stdout == b""
    assert not r.exists("old") and r.keys("{*}*:old") == []
    # Once they are deleted, the name is free.
    r.delete(*[f"{{{shard}:old}}" for shard in range(8)])
    assert bloomery("create", "--redis", url, "old", "--items", "1000", "--min-shards", "8").returncode == 0


def test_cli_dedup_to_a_full_device_loses_at_most_the_batch_being_printed(server):
    """Over a shared filter a batch is added, then its new lines printed (the add's answer
    is what makes a line new once across processes); each batch is written through before
    the next is added, so a full device loses one batch's lines, not every batch a 64 KiB
    buffer held (some 6,000 lines here)."""
    url = f"redis://127.0.0.1:{server.port}"
    lines = b"".join(b"line %d\n" % i for i in range(10_000))
    with open("/dev/full", "wb") as full:
        run = subprocess.run([str(BLOOMERY), "dedup", "--redis", url, "--filter", "lost", "--items", "100000",
                              "--batch-items", "100"], input=lines, stdout=full, stderr=subprocess.PIPE, timeout=60)
    assert run.returncode == 2 and b"No space left" in run.stderr, run.stderr
    count = subprocess.run([str(BLOOMERY), "check", "--redis", url, "--count", "lost"], input=lines,
                           capture_output=True, timeout=60)
    present = int(count.stdout.split()[0])
    assert present <= 100, count.stdout


def test_cli_a_bad_item_ends_the_run_after_the_items_before_it(server):
    """A bad item (here not a decimal integer) ends `add`, `check` and `dedup` with an
    error; the items read before it are still sent, in the batch under way too, as a
    file's are: added, answered, printed."""
    url = f"redis://127.0.0.1:{server.port}"
    subprocess.run([str(BLOOMERY), "create", "--redis", url, "ints", "--items", "1000"], check=True, timeout=60)
    add = subprocess.run([str(BLOOMERY), "add", "--redis", url, "--batch-items", "2", "-f", "long", "ints"],
                         input=b"1\n2\n3\n4\n5\nxyz\n7\n", capture_output=True, timeout=60)
    assert add.returncode == 2 and b"'xyz'" in add.stderr and b"the 5 items before it were added" in add.stderr
    check = subprocess.run([str(BLOOMERY), "check", "--redis", url, "--batch-items", "2", "-f", "long", "ints"],
                           input=b"1\n2\n3\n4\n5\nxyz\n", capture_output=True, timeout=60)
    assert check.returncode == 2 and b"'xyz'" in check.stderr
    assert check.stdout == b"".join(b"probably present\t%d\n" % n for n in range(1, 6))
    dedup = subprocess.run([str(BLOOMERY), "dedup", "--redis", url, "--batch-items", "2", "--filter", "ints",
                            "-f", "long"], input=b"5\n6\n7\nxyz\n", capture_output=True, timeout=60)
    assert dedup.returncode == 2 and b"'xyz'" in dedup.stderr
    assert dedup.stdout == b"6\n7\n"


def test_cli_check_answers_for_every_item_after_its_reader_left(server, tmp_path):
    """`check ... | head -1`: the lookups go on quietly to the end of the input, as for a
    file, so that the exit status says whether every item was present (it said 0, all
    present, for an input whose absent item came after the reader left)."""
    url = f"redis://127.0.0.1:{server.port}"
    added = tmp_path / "added.txt"
    added.write_bytes(b"".join(b"%d\n" % i for i in range(100_000)))
    subprocess.run([str(BLOOMERY), "create", "--redis", url, "f", "--items", "200000"], check=True, timeout=60)
    subprocess.run([str(BLOOMERY), "add", "--redis", url, "f", "-i", added], check=True, timeout=120)
    probe = tmp_path / "probe.txt"
    probe.write_bytes(added.read_bytes() + b"never added\n")
    for extra in [[], ["--count"]]:
        run = subprocess.run(f"'{BLOOMERY}' check --redis {url} f -i '{probe}' {' '.join(extra)} | head -1; "
                             "exit ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", capture_output=True,
                             timeout=120)
        assert run.returncode == 1, (extra, run.returncode, run.stderr)
        assert run.stderr == b"", run.stderr


def test_cli_check_and_dedup_batch_long_lines_by_their_bytes(server):
    """Remote batches were cut by item count only (65,536 lines), and lines may be 64 MiB:
    a batch of long lines held gigabytes, and the failed allocation aborted the tool (exit
    134). They are cut at 16 MiB of lines too, as a file's batches are."""
    url = f"redis://127.0.0.1:{server.port}"
    # 1,200 lines of 1 MiB under a 1 GB address-space limit.
    make = "import sys\nw = sys.stdout.buffer\nfor i in range(1200): w.write(b'%08d' % i + b'x' * (1 << 20) + b'\\n')"
    subprocess.run([str(BLOOMERY), "create", "--redis", url, "f", "--items", "10000"], check=True, timeout=60)
    for command in [f"check --redis {url} f", f"dedup --redis {url} --filter g --items 10000"]:
        run = subprocess.run(f"ulimit -v 1000000; python3 -c \"{make}\" | '{BLOOMERY}' {command} > /dev/null",
                             shell=True, executable="/bin/bash", capture_output=True, timeout=120)
        assert run.returncode in (0, 1), (command, run.returncode, run.stderr[-500:])


def test_cli_a_server_that_stops_answering_is_said_to_have_stalled(server):
    """A server paused (SIGSTOP) past the retry window: the run ends with exit 2 and says
    no reply came in time, where it said only the socket's "Resource temporarily
    unavailable (os error 11)"."""
    url = f"redis://127.0.0.1:{server.port}"
    assert bloomery("create", "--redis", url, "f", "--items", "1000").returncode == 0
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        stalled = bloomery("check", "--redis", url, "--retry-seconds", "0", "f", "x")
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert stalled.returncode == 2 and b"no reply in time" in stalled.stderr, stalled.stderr


def bloomery(*args, **kwargs):
    return subprocess.run([str(BLOOMERY), *map(str, args)], capture_output=True, timeout=120, **kwargs)


def test_cli_a_lost_shard_is_an_error_for_add_and_check_never_absent(server):
    """Shards are made by `create`, so a missing one was lost with its items (deleted,
    evicted, flushed, a restart without persistence): `check` once answered "absent" for
    them, and `add` made the shard anew and exited 0."""
    url = f"redis://127.0.0.1:{server.port}"
    assert bloomery("create", "--redis", url, "lost", "--items", "100000", "--min-shards", "8").returncode == 0
    items = b"".join(b"item %d\n" % i for i in range(5000))
    assert bloomery("add", "--redis", url, "lost", input=items).returncode == 0
    r = server.client()
    assert r.execute_command("EXISTS", *[shard_key("lost", shard, 8) for shard in range(8)]) == 8
    third = shard_key("lost", 3, 8)
    r.delete(third)  # as eviction or a partial flush would
    check = bloomery("check", "--redis", url, "--count", "lost", input=items)
    assert check.returncode == 2 and b"NOSHARD" in check.stderr and f"the shard {third} is missing".encode() in check.stderr, check
    add = bloomery("add", "--redis", url, "lost", input=items)
    assert add.returncode == 2 and b"NOSHARD" in add.stderr, add
    assert not r.exists(third)
    info = bloomery("info", "--redis", url, "lost")
    assert b"shards present: 7 of 8: the others were lost" in info.stdout, info.stdout
    # Neither does a create with the same parameters (what `dedup --items` runs each time)
    # make the lost shard anew: the loss stays an error until the filter is made again.
    again = bloomery("create", "--redis", url, "lost", "--items", "100000", "--min-shards", "8")
    assert again.returncode == 0, again.stderr
    assert f"warning: lost: 1 of its 8 shards are missing (first {third})".encode() in again.stderr, again.stderr
    dedup = bloomery("dedup", "--redis", url, "--filter", "lost", "--items", "100000", "--min-shards", "8",
                     input=items)
    assert dedup.returncode == 2 and b"NOSHARD" in dedup.stderr, dedup
    assert not r.exists(third)
    # The plan lost too (evicted, a node restarted empty): a create (or a dedup that
    # creates) would take the shards that hold items over and make the lost one anew,
    # empty, so its items would be answered absent: refused.
    r.delete("lost")
    for run in (("create", "--redis", url, "lost", "--items", "100000", "--min-shards", "8"),
                ("dedup", "--redis", url, "--filter", "lost", "--items", "100000", "--min-shards", "8")):
        refused = bloomery(*run, input=items)
        assert refused.returncode == 2 and b"lost its plan" in refused.stderr, refused
        assert refused.stdout == b""
    assert not r.exists("lost") and not r.exists(third)
    # A create that stopped part way (empty shards made, no plan yet) is completed by the
    # next.
    r.flushall()
    made = ("create", "--redis", url, "part", "--items", "1000", "--min-shards", "8")
    assert bloomery(*made).returncode == 0
    r.delete("part", shard_key("part", 5, 8))  # as if it had stopped before these
    again = bloomery(*made)
    assert again.returncode == 0, again.stderr
    assert r.exists("part") and r.exists(shard_key("part", 5, 8))


def test_cli_says_a_pipelines_failures_once(server, r):
    """A batch that meets several lost shards failed with one near copy of the NOSHARD
    sentence per shard (128 on a filter of 128 shards): now the first, then a count."""
    url = f"redis://127.0.0.1:{server.port}"
    assert bloomery("create", "--redis", url, "many", "--items", "10000", "--min-shards", "16").returncode == 0
    r.delete(*[shard_key("many", shard, 16) for shard in range(5)])
    items = b"".join(b"%d\n" % i for i in range(5000))
    check = bloomery("check", "--redis", url, "--count", "many", input=items)
    assert check.returncode == 2, check
    assert check.stderr.count(b"NOSHARD") == 2, check.stderr
    assert b"(and 4 more of the pipeline's commands failed: 4 NOSHARD)" in check.stderr, check.stderr


def test_cli_add_through_a_server_restart_is_an_error(tmp_path):
    """A restart without persistence empties the server: `add` reconnected, sent its next
    batches and exited 0, the items of its earlier batches gone. It now compares the
    server's run_id on every new connection."""
    server = Server(tmp_path).start()
    try:
        url = f"redis://127.0.0.1:{server.port}"
        assert bloomery("create", "--redis", url, "r", "--items", "10000", "--min-shards", "4").returncode == 0
        add = subprocess.Popen([str(BLOOMERY), "add", "--redis", url, "--batch-items", "10", "r"],
                               stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        add.stdin.write(b"".join(b"early %d\n" % i for i in range(100)))
        add.stdin.flush()
        r = server.client()
        deadline = time.monotonic() + 30
        while int(bloomery("info", "--redis", url, "r").stdout.split(b"estimated items:")[1].split()[0]) < 90:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        server.stop()
        server.start()
        # The server came back empty; the filter as create makes it, as an operator would.
        assert bloomery("create", "--redis", url, "r", "--items", "10000", "--min-shards", "4").returncode == 0
        add.stdin.write(b"late\n")
        add.stdin.close()
        assert add.wait(timeout=120) == 2
        stderr = add.stderr.read()
        assert b"restarted during the run" in stderr, stderr
        assert r.ping()
    finally:
        server.stop()


def test_cli_hides_the_password_and_names_a_missing_module(server, tmp_path):
    r = server.client()
    r.execute_command("ACL", "SETUSER", "app", "on", ">s3cret", "~*", "+@all")
    url = f"redis://app:s3cret@127.0.0.1:{server.port}"
    assert bloomery("create", "--redis", url, "pw", "--items", "1000").returncode == 0
    info = bloomery("info", "--redis", url, "pw")
    assert info.returncode == 0 and b"s3cret" not in info.stdout and b"app:***@" in info.stdout, info.stdout
    wrong = bloomery("check", "--redis", f"redis://app:s3cret@127.0.0.1:{server.port}", "missing", "x")
    assert wrong.returncode == 2 and b"s3cret" not in wrong.stderr
    # A user who may not run INFO: the restart check cannot work, and a note says so.
    r.execute_command("ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "+@all", "-info")
    blind = bloomery("add", "--redis", f"redis://noinfo:pw@127.0.0.1:{server.port}", "pw", "x")
    assert blind.returncode == 0 and b"run_id cannot be read" in blind.stderr, blind.stderr
    tls = bloomery("check", "--redis", f"rediss://app:s3cret@127.0.0.1:{server.port}", "pw", "x")
    assert tls.returncode == 2 and b"TLS" in tls.stderr and b"s3cret" not in tls.stderr, tls.stderr
    # No password where the server wants one: that error, first and alone (the note that
    # restarts would go unnoticed came first, naming INFO as the cause).
    r.execute_command("ACL", "SETUSER", "default", "on", "resetpass", ">sesame")
    try:
        anonymous = bloomery("check", "--redis", f"redis://127.0.0.1:{server.port}", "pw", "x")
    finally:
        r.execute_command("ACL", "SETUSER", "default", "on", "nopass")
    assert anonymous.returncode == 2 and b"NOAUTH" in anonymous.stderr, anonymous.stderr
    assert b"run_id" not in anonymous.stderr and anonymous.stderr.count(b"\n") == 1, anonymous.stderr
    # A server without the module: create says so and writes nothing.
    (tmp_path / "plain").mkdir()
    plain = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", str(tmp_path / "plain.sock"),
                              "--dir", str(tmp_path / "plain"), "--save", ""], stdout=subprocess.DEVNULL)
    try:
        sock = f"unix://{tmp_path / 'plain.sock'}"
        deadline = time.monotonic() + 10
        while not (tmp_path / "plain.sock").exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        created = bloomery("create", "--redis", sock, "f", "--items", "1000")
        assert created.returncode == 2 and b"is the bloomery module loaded?" in created.stderr, created.stderr
        assert redis.Redis(unix_socket_path=str(tmp_path / "plain.sock")).dbsize() == 0
    finally:
        plain.terminate()
        plain.wait()


def reply_dropping_proxy(port: int):
    """A loopback TCP proxy to `port` that, the first time a client sends `BF.HASHADD`,
    passes the command on, lets the server run it, and closes that client's connection
    without passing the reply back (a reply lost after its command ran). Returns the
    proxy's port and a list that holds True once it has dropped a reply."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    dropped = []

    def pump(source, sink, watch, cut):
        try:
            while data := source.recv(1 << 16):
                if cut.is_set():
                    return  # the reply to the command being dropped goes nowhere
                # An add, not the CLI's COMMAND INFO BF.HASHADD (its module check).
                if watch and not dropped and b"BF.HASHADD" in data and b"COMMAND" not in data:
                    dropped.append(True)
                    cut.set()
                    sink.sendall(data)
                    time.sleep(0.3)  # the server runs it and replies
                    return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()

    def serve():
        while True:
            client, _ = listener.accept()
            upstream = socket.create_connection(("127.0.0.1", port))
            cut = threading.Event()
            threading.Thread(target=pump, args=(client, upstream, True, cut), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client, False, cut), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], dropped


def test_cli_dedup_says_lines_whose_answers_were_lost_and_fails(server):
    """A batch whose reply was lost after the server ran it is sent again, and the filter
    then answers its items "old": dedup cannot know which were first occurrences, so it
    says how many lines' answers were lost and exits 2, rather than drop them silently
    (exit 0 and the lines missing from its output)."""
    url = f"redis://127.0.0.1:{server.port}"
    assert bloomery("create", "--redis", url, "seen", "--items", "1000").returncode == 0
    proxy, dropped = reply_dropping_proxy(server.port)
    run = bloomery("dedup", "--redis", f"redis://127.0.0.1:{proxy}", "--filter", "seen", input=b"a\nb\nc\n")
    assert dropped, "the proxy dropped no reply"
    assert run.returncode == 2, run
    assert b"the answers for 3 lines were lost" in run.stderr, run.stderr
    assert run.stdout == b""
    # They are in the filter.
    check = bloomery("check", "--redis", url, "seen", "a", "b", "c")
    assert check.returncode == 0, check
    # A run that loses no reply prints the new lines and exits 0.
    again = bloomery("dedup", "--redis", f"redis://127.0.0.1:{proxy}", "--filter", "seen", input=b"a\nd\n")
    assert (again.returncode, again.stdout) == (0, b"d\n"), again
