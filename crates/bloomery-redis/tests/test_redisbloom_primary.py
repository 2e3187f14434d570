"""A server running bloomery as the replica of a RedisBloom primary, or replaying an AOF
RedisBloom wrote: RedisBloom replicates its commands as given (`ReplicateVerbatim`), so the
replica makes its filters from its own defaults (as RedisBloom's chain, whatever its
layout), and reads the options as RedisBloom does. Every item the primary took must be
found on the replica, including where the replica's filter is full (it takes the item past
capacity), where RedisBloom's one-letter option forms or an EXPANSION above bloomery's
client limit are used, where the rate is below what bloomery's blocked layout reaches, and
where the primary loads BF.SCANDUMP data pieces into a key a BF.RESERVE or an add made.

The primary is a script that speaks Redis's replication protocol (an empty RDB, then the
commands, as RedisBloom's primary sends them); with RedisBloom 2.6.28 built
(scripts/redisbloom-peer.sh, or REDISBLOOM_SO), the same commands also go through a real
RedisBloom primary, which must take every item the script assumes it took."""
import contextlib
import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
import redis

from conftest import ROOT, Server, dump
from type_helpers import start_replica

PEER = Path(os.environ.get("REDISBLOOM_SO", ROOT / "target/peer/redisbloom-2.6.28.so"))

# The primary's load arguments: a larger default capacity than the replica's (RedisBloom's
# and bloomery's default, 100), so a NONSCALING filter made from the defaults holds more
# items there than here.
PRIMARY_ARGS = ["INITIAL_SIZE", "1000"]


@contextlib.contextmanager
def real_primary_with_replica(tmp_path, primary_args=()):
    """RedisBloom 2.6.28 as a primary (with these load arguments) and a bloomery replica of
    it, synced, both stopped at the end."""
    (tmp_path / "primary").mkdir()
    primary = Server(tmp_path / "primary", module=PEER, module_args=primary_args).start()
    replica = None
    try:
        replica = start_replica(tmp_path, primary)
        yield primary, replica
    finally:
        if replica:
            replica.stop()
        primary.stop()


def items(prefix, count):
    return [f"{prefix}-{i}" for i in range(count)]


# The filter whose BF.SCANDUMP data pieces the primary loads into a key it reserved alike:
# one link (RedisBloom's data pieces fill an existing link only), its items.
SOURCE = ["0.01", "60"]
SOURCE_ITEMS = items("s", 50)


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    """BF.SCANDUMP's pieces of the SOURCE filter, in RedisBloom's encoding: made by bloomery
    in RedisBloom's layout (the test on a real RedisBloom primary checks RedisBloom takes
    them and then holds every item)."""
    server = Server(tmp_path_factory.mktemp("pieces"))
    try:
        server.start()
        client = server.client()
        client.execute_command("BF.RESERVE", "source", *SOURCE, "LAYOUT", "redisbloom")
        client.execute_command("BF.MADD", "source", *SOURCE_ITEMS)
        return dump(client, "source")
    finally:
        server.stop()


def scenario(pieces):
    """(commands, key -> items the primary holds): each command as RedisBloom's primary
    replicates it, every item in it accepted there. `pieces` is a BF.SCANDUMP of SOURCE."""
    commands, held = [], {}

    def add(key, command, taken):
        commands.append(command)
        held.setdefault(key, []).extend(taken)

    # A NONSCALING filter from the primary's defaults (1000): 300 items, three times the
    # replica's default capacity.
    add("nonscaling", ["BF.INSERT", "nonscaling", "NONSCALING", "ITEMS", *items("n", 300)], items("n", 300))
    # One item at a time: the per-item path, not the batch.
    for item in items("one", 150):
        add("nonscaling-one", ["BF.INSERT", "nonscaling-one", "NONS", "I", item], [item])
    # RedisBloom's one-letter forms (it reads an option by its first letters).
    add("letters", ["BF.INSERT", "letters", "CAP", "5", "ERR", "0.02", "EXP", "3", "I", *items("l", 40)],
        items("l", 40))
    add("letters-lower", ["BF.INSERT", "letters-lower", "c", "7", "e", "2", "i", *items("w", 20)], items("w", 20))
    # An expansion above bloomery's client limit of 32768 (RedisBloom takes any from 1).
    add("wide", ["BF.INSERT", "wide", "CAPACITY", "2", "EXPANSION", "40000", "ITEMS", *items("x", 30)],
        items("x", 30))
    commands.append(["BF.RESERVE", "wide-reserved", "0.01", "3", "EXPANSION", "100000"])
    add("wide-reserved", ["BF.MADD", "wide-reserved", *items("y", 30)], items("y", 30))
    # Growth 1 from capacity 1: RedisBloom's chain grows a link per item (each at half the
    # last rate) far past bloomery's 64 sub-filters and the tightest blocked one.
    commands.append(["BF.RESERVE", "long", "0.01", "1", "EXPANSION", "1"])
    add("long", ["BF.MADD", "long", *items("g", 200)], items("g", 200))
    for item in items("h", 100):
        add("long", ["BF.ADD", "long", item], [item])
    # A rate below what blocked sub-filters reach (about 5.7e-20): RedisBloom takes it.
    commands.append(["BF.RESERVE", "tight", "1e-30", "100"])
    add("tight", ["BF.MADD", "tight", *items("t", 50)], items("t", 50))
    add("tight-insert", ["BF.INSERT", "tight-insert", "ERROR", "1e-25", "ITEMS", *items("u", 50)], items("u", 50))
    # Error rates as RedisBloom reads them (strtod, through RedisModule_StringToDouble):
    # hex floats too (0x1p-7 is 0.0078125).
    add("hex", ["BF.INSERT", "hex", "ERROR", "0x1p-7", "ITEMS", *items("a", 50)], items("a", 50))
    commands.append(["BF.RESERVE", "hex-reserved", "0X1.47AE147AE147BP-7", "100"])
    add("hex-reserved", ["BF.INSERT", "hex-reserved", "NOCREATE", "ITEMS", *items("b", 50)], items("b", 50))
    # Words RedisBloom's BF.RESERVE ignores (it looks for NONSCALING and EXPANSION only)
    # and bloomery reads as its own options: WINDOW (an aging filter that would forget),
    # AT without WINDOW, a LAYOUT that names none (both refused: the key would be missing
    # for a BF.INSERT NOCREATE).
    commands.append(["BF.RESERVE", "window", "0.01", "10", "WINDOW"])
    add("window", ["BF.MADD", "window", *items("c", 200)], items("c", 200))
    commands.append(["BF.RESERVE", "at", "0.01", "10", "EXPANSION", "3", "AT"])
    add("at", ["BF.INSERT", "at", "NOCREATE", "ITEMS", *items("d", 50)], items("d", 50))
    commands.append(["BF.RESERVE", "layout", "0.01", "10", "LAYOUT", "x"])
    add("layout", ["BF.INSERT", "layout", "NOCREATE", "ITEMS", *items("e", 50)], items("e", 50))
    # A capacity whose bits pass 2^64 (about 1.9 * 10^18 at 0.01): RedisBloom on x86-64
    # makes a link of one 64-bit word and takes the items (bloomery refused the filter).
    commands.append(["BF.RESERVE", "huge", "0.01", "9223372036854775807"])
    add("huge", ["BF.INSERT", "huge", "NOCREATE", "ITEMS", *items("z", 20)], items("z", 20))
    add("huge-insert", ["BF.INSERT", "huge-insert", "CAPACITY", "2000000000000000000", "ITEMS", *items("q", 20)],
        items("q", 20))
    # Plain adds from the defaults.
    add("plain", ["BF.MADD", "plain", *items("p", 500)], items("p", 500))
    # A filter's data pieces (no header) loaded into a key reserved alike: RedisBloom copies
    # them into the key's link, so the key then holds the source's items; adds follow.
    commands.append(["BF.RESERVE", "pieces", *SOURCE])
    for iterator, data in pieces[1:]:
        commands.append(["BF.LOADCHUNK", "pieces", iterator, data])
    held["pieces"] = list(SOURCE_ITEMS)
    add("pieces", ["BF.MADD", "pieces", *items("q", 20)], items("q", 20))
    # The same into a key an add made (from the defaults: the primary's and the replica's
    # are alike here, as RedisBloom's replicas need them to be for its pieces to fit).
    commands.append(["BF.INSERT", "pieces-added", "CAPACITY", SOURCE[1], "ITEMS", "first"])
    for iterator, data in pieces[1:]:
        commands.append(["BF.LOADCHUNK", "pieces-added", iterator, data])
    held["pieces-added"] = list(SOURCE_ITEMS)
    return commands, held


def resp(command) -> bytes:
    out = [b"*%d\r\n" % len(command)]
    for word in command:
        word = word if isinstance(word, bytes) else str(word).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(word), word))
    return b"".join(out)


# An RDB with no keys (version 9, which Redis 7.0 reads), its checksum 0 ("not computed").
EMPTY_RDB = b"REDIS0009" + b"\xff" + b"\x00" * 8


class ScriptedPrimary:
    """Answers a replica's handshake (PING, REPLCONF, PSYNC) with a full resync of an empty
    RDB, then sends `commands` as a primary's replication stream, and keeps reading (the
    replica's REPLCONF ACKs) until closed."""

    def __init__(self, commands):
        self.stream = resp(["SELECT", "0"]) + b"".join(resp(command) for command in commands)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.error = None
        self.sent = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        try:
            connection, _ = self.listener.accept()
            with connection:
                reader = connection.makefile("rb")
                while True:
                    command = self.read_command(reader)
                    name = command[0].upper()
                    if name == b"PING":
                        connection.sendall(b"+PONG\r\n")
                    elif name == b"REPLCONF":
                        connection.sendall(b"+OK\r\n")
                    elif name in (b"PSYNC", b"SYNC"):
                        break
                    else:
                        raise AssertionError(f"unexpected command from the replica: {command}")
                connection.sendall(b"+FULLRESYNC %s 0\r\n" % (b"a" * 40))
                connection.sendall(b"$%d\r\n" % len(EMPTY_RDB) + EMPTY_RDB)
                connection.sendall(self.stream)
                self.sent = True
                while connection.recv(4096):
                    pass
        except OSError:
            pass
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.error = error

    @staticmethod
    def read_command(reader):
        line = reader.readline()
        if not line.startswith(b"*"):
            return line.split()  # an inline command
        words = []
        for _ in range(int(line[1:])):
            length = int(reader.readline()[1:])
            words.append(reader.read(length + 2)[:-2])
        return words

    def close(self):
        self.listener.close()


@contextlib.contextmanager
def server_replaying_aof(tmp_path, commands):
    """A bloomery server started on an AOF of `commands` (as RedisBloom's server writes
    them: the commands as given), stopped at the end."""
    (tmp_path / "appendonly.aof").write_bytes(resp(["SELECT", "0"]) + b"".join(map(resp, commands)))
    server = Server(tmp_path, "--appendonly", "yes")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def scripted_replica(tmp_path, commands, layout="no"):
    """A bloomery replica (REDISBLOOM_LAYOUT `layout`) of a ScriptedPrimary sending
    `commands`, both stopped at the end."""
    primary = ScriptedPrimary(commands)
    replica = Server(tmp_path, "--replicaof", "127.0.0.1", str(primary.port),
                     module_args=["REDISBLOOM_LAYOUT", layout])
    try:
        replica.start()
        yield primary, replica
    finally:
        replica.stop()
        primary.close()


def wait_for(client, key, deadline=30):
    end = time.monotonic() + deadline
    while not client.exists(key):
        assert time.monotonic() < end, f"the replica never got {key}"
        time.sleep(0.05)


def missing(client, held) -> dict:
    """key -> how many of its items `client` does not find."""
    found = {}
    for key, taken in held.items():
        answers = client.execute_command("BF.MEXISTS", key, *taken)
        found[key] = sum(1 for answer in answers if not answer)
    return {key: count for key, count in found.items() if count}


@pytest.mark.parametrize("layout", ["no", "yes"])
def test_a_replica_of_a_scripted_redisbloom_primary_keeps_every_item(tmp_path, layout, pieces):
    commands, held = scenario(pieces)
    commands.append(["SET", "synced", "1"])
    with scripted_replica(tmp_path, commands, layout) as (primary, replica):
        client = replica.client()
        wait_for(client, "synced")
        assert primary.error is None, primary.error
        assert missing(client, held) == {}
        # The replica's own full filters still refuse its clients' items past capacity
        # (only what its primary sends is taken past it): it is read-only to clients, so
        # check on the replicated filter after promoting it.
        client.execute_command("REPLICAOF", "NO", "ONE")
        refused = client.execute_command("BF.INSERT", "nonscaling-one", "NOCREATE", "ITEMS", "new")
        assert isinstance(refused[0], Exception) and "full" in str(refused[0])


def test_an_aof_redisbloom_wrote_loads_every_item(tmp_path, pieces):
    """The same commands as an AOF (what RedisBloom's server writes: the commands as
    given), loaded at start: every item is found."""
    commands, held = scenario(pieces)
    with server_replaying_aof(tmp_path, commands) as server:
        assert missing(server.client(), held) == {}


@pytest.mark.skipif(not PEER.exists(), reason=f"RedisBloom 2.6.28 not built at {PEER} (scripts/redisbloom-peer.sh)")
def test_a_replica_of_a_real_redisbloom_primary_keeps_every_item(tmp_path, pieces):
    """The scenario on RedisBloom 2.6.28 itself as the primary, after the replica synced (so
    the commands reach it as RedisBloom replicates them): RedisBloom answers every item
    (none refused: the scenario's assumption), and the bloomery replica finds them all."""
    commands, held = scenario(pieces)
    with real_primary_with_replica(tmp_path, PRIMARY_ARGS) as (primary, replica):
        client = primary.client()
        for command in commands:
            reply = client.execute_command(*command)
            replies = reply if isinstance(reply, list) else [reply]
            assert not any(isinstance(answer, Exception) for answer in replies), (command[:4], reply)
        assert missing(client, held) == {}
        client.set("synced", "1")
        wait_for(replica.client(), "synced")
        assert missing(replica.client(), held) == {}


def test_a_replayed_reserve_of_a_key_named_nonscaling_does_not_scale(tmp_path):
    """RedisBloom's BF.RESERVE looks for NONSCALING among all its arguments, the key too:
    `BF.RESERVE nonscaling 0.01 10` makes a NONSCALING filter there (BF.INFO: capacity 10,
    expansion nil; a BF.MADD of 15 items takes 10, the 11th is "non scaling filter is
    full"). A replica made it scaling (capacity 30 in 2 sub-filters after the same adds)."""
    commands = [["BF.RESERVE", "nonscaling", "0.01", "10"], ["BF.MADD", "nonscaling", *items("s", 15)],
                ["SET", "synced", "1"]]
    with scripted_replica(tmp_path, commands) as (primary, replica):
        client = replica.client()
        wait_for(client, "synced")
        info = client.execute_command("BF.INFO", "nonscaling")
        assert info[info.index(b"Number of filters") + 1] == 1
        assert info[info.index(b"Expansion rate") + 1] is None
        assert all(client.execute_command("BF.MEXISTS", "nonscaling", *items("s", 15)))


def unallocatable():
    """(commands, key -> items the primary holds): commands RedisBloom 2.6.28 could not
    allocate for, yet replicates as given (and writes to its AOF). Its BF.RESERVE
    replicates even a refusal ("could not create filter": a first link of 1.4 * 10^17
    bytes), and its BF.MADD even where the next link could not be made ("problem
    inserting into filter": growth 2^32 - 1 from 1000 items at 1e-300 is a link of about
    770 TB). A replica (or an AOF replay) that tried to allocate either was stopped by
    Redis's allocator ("Redis aborting for OUT OF MEMORY"), losing every item."""
    commands = [
        ["BF.RESERVE", "refused", "0.01", "100000000000000000"],
        ["BF.RESERVE", "refused", "0.01", "10"],
        ["BF.MADD", "refused", *items("r", 10)],
        ["BF.RESERVE", "wide-full", "1e-300", "1000", "EXPANSION", "4294967295"],
        ["BF.MADD", "wide-full", *items("f", 1000)],
        ["BF.MADD", "wide-full", *items("past", 20)],
        ["BF.ADD", "wide-full", "one-past"],
    ]
    return commands, {"refused": items("r", 10), "wide-full": items("f", 1000)}


@pytest.mark.parametrize("layout", ["no", "yes"])
def test_a_replica_survives_what_its_redisbloom_primary_could_not_allocate(tmp_path, layout):
    commands, held = unallocatable()
    commands.append(["SET", "synced", "1"])
    with scripted_replica(tmp_path, commands, layout) as (primary, replica):
        client = replica.client()
        wait_for(client, "synced")
        assert replica.process.poll() is None
        assert missing(client, held) == {}
        # The items RedisBloom refused went into the newest link, past its capacity.
        assert all(client.execute_command("BF.MEXISTS", "wide-full", *items("past", 20), "one-past"))


def test_an_aof_with_what_redisbloom_could_not_allocate_loads(tmp_path):
    commands, held = unallocatable()
    with server_replaying_aof(tmp_path, commands) as server:
        assert missing(server.client(), held) == {}


@pytest.mark.skipif(not PEER.exists(), reason=f"RedisBloom 2.6.28 not built at {PEER} (scripts/redisbloom-peer.sh)")
def test_a_real_redisbloom_primary_replicates_what_it_could_not_allocate(tmp_path):
    """The commands on RedisBloom 2.6.28 itself: it answers as `unallocatable` says, and
    its bloomery replica stays up with every item RedisBloom holds."""
    commands, held = unallocatable()
    with real_primary_with_replica(tmp_path) as (primary, replica):
        client = primary.client()
        replies = []
        for command in commands:
            try:
                replies.append(client.execute_command(*command))
            except redis.ResponseError as error:
                replies.append(error)
        assert "could not create filter" in str(replies[0])
        assert all(not isinstance(answer, Exception) for answer in replies[4])
        assert all("problem inserting" in str(answer) for answer in replies[5])
        assert missing(client, held) == {}
        client.set("synced", "1")
        wait_for(replica.client(), "synced")
        assert replica.process.poll() is None
        assert missing(replica.client(), held) == {}


def edited_header(pieces):
    """The SOURCE filter's BF.SCANDUMP header with its link's error rate (bytes 44 to 52:
    the 20-byte chain header, then the link's bytes, bits and size before it) set to 0.5,
    its bits per entry and 8 hash functions kept. RedisBloom 2.6.28 takes it (its check
    ties the hash count to the bits per entry only); bloomery's own check also holds the
    hash count to what the error rate makes (2, and one more), against crafted dumps."""
    header = bytearray(pieces[0][1])
    header[44:52] = struct.pack("<d", 0.5)
    return bytes(header)


def edited_scenario(pieces):
    commands = [["BF.LOADCHUNK", "edited", 1, edited_header(pieces)]]
    commands += [["BF.LOADCHUNK", "edited", iterator, data] for iterator, data in pieces[1:]]
    commands.append(["BF.MADD", "edited", *items("v", 10)])
    return commands, {"edited": SOURCE_ITEMS + items("v", 10)}


@pytest.mark.parametrize("layout", ["no", "yes"])
def test_a_replica_loads_a_header_its_redisbloom_primary_took(tmp_path, layout, pieces):
    """A replica refused the header its primary took (the key was missing there): every
    item of the pieces after it was answered absent (50 of 50)."""
    commands, held = edited_scenario(pieces)
    commands.append(["SET", "synced", "1"])
    with scripted_replica(tmp_path, commands, layout) as (primary, replica):
        client = replica.client()
        wait_for(client, "synced")
        assert missing(client, held) == {}
        # A client's header is still held to bloomery's bound (the replica promoted).
        client.execute_command("REPLICAOF", "NO", "ONE")
        with pytest.raises(redis.ResponseError, match="more than its error rate"):
            client.execute_command("BF.LOADCHUNK", "other", 1, edited_header(pieces))


def test_an_aof_with_a_header_redisbloom_took_loads(tmp_path, pieces):
    commands, held = edited_scenario(pieces)
    with server_replaying_aof(tmp_path, commands) as server:
        assert missing(server.client(), held) == {}


@pytest.mark.skipif(not PEER.exists(), reason=f"RedisBloom 2.6.28 not built at {PEER} (scripts/redisbloom-peer.sh)")
def test_a_header_a_real_redisbloom_primary_took_reaches_its_replicas(tmp_path, pieces):
    """On RedisBloom 2.6.28 itself: it takes the header and the items; a replica attached
    before gets them from the command stream, one attached after from RedisBloom's RDB
    (a full sync, whose load refused the key before, so the sync failed)."""
    commands, held = edited_scenario(pieces)
    primary_dir, before_dir, after_dir = tmp_path / "primary", tmp_path / "before", tmp_path / "after"
    for directory in (primary_dir, before_dir, after_dir):
        directory.mkdir()
    primary = Server(primary_dir, "--repl-diskless-sync-delay", "0", module=PEER)
    before, after = Server(before_dir), Server(after_dir)
    try:
        primary.start()
        client = primary.client()
        before.extra = after.extra = ["--replicaof", "127.0.0.1", str(primary.port)]
        before.start()
        deadline = time.monotonic() + 30
        while before.client().info("replication")["master_link_status"] != "up":
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.05)
        for command in commands:
            reply = client.execute_command(*command)
            replies = reply if isinstance(reply, list) else [reply]
            assert not any(isinstance(answer, Exception) for answer in replies), (command[:3], reply)
        assert missing(client, held) == {}
        client.set("synced", "1")
        after.start()
        for replica in (before, after):
            wait_for(replica.client(), "synced")
            assert missing(replica.client(), held) == {}
    finally:
        after.stop()
        before.stop()
        primary.stop()


def grown_pieces(tmp_path_factory_or_dir):
    """BF.SCANDUMP pieces of `BF.RESERVE src 0.1 7` with x0..x199 added (5 links), in
    RedisBloom's encoding (made by bloomery in RedisBloom's layout, bit for bit)."""
    server = Server(tmp_path_factory_or_dir)
    try:
        server.start()
        client = server.client()
        client.execute_command("BF.RESERVE", "src", "0.1", "7", "LAYOUT", "redisbloom")
        client.execute_command("BF.MADD", "src", *items("x", 200))
        return dump(client, "src")
    finally:
        server.stop()


def overwritten(pieces):
    """RedisBloom copies a data piece over a link's bits (memcpy), clearing the bits of
    items added before: `c` took y0..y20 (links 0 and 1 full), then src's pieces for those
    links; of z0..z30 added next RedisBloom counts more as new than a server that ORs the
    pieces in (whose extra bits answer some "present"), so RedisBloom's 4th link exists
    when src's piece for it comes: a replica that had 3 links refused it ("invalid offset
    - no link found"), losing the x items that piece brought (about half of those
    RedisBloom finds). The replica now grows its chain as RedisBloom did before the piece
    (and ORs it in, keeping the y items RedisBloom's copy lost)."""
    commands = [["BF.RESERVE", "c", "0.1", "7"], ["BF.MADD", "c", *items("y", 21)]]
    commands += [["BF.LOADCHUNK", "c", iterator, data] for iterator, data in pieces[1:3]]
    commands += [["BF.ADD", "c", item] for item in items("z", 31)]
    commands.append(["BF.LOADCHUNK", "c", *pieces[4]])
    return commands


# RedisBloom 2.6.28's BF.DEBUG of `c` after `overwritten`.
OVERWRITTEN_DEBUG = [
    b"size:50",
    b"bytes:8 bits:64 hashes:5 hashwidth:64 capacity:7 size:7 ratio:0.05",
    b"bytes:16 bits:128 hashes:6 hashwidth:64 capacity:14 size:14 ratio:0.025",
    b"bytes:32 bits:256 hashes:7 hashwidth:64 capacity:28 size:28 ratio:0.0125",
    b"bytes:80 bits:640 hashes:8 hashwidth:64 capacity:56 size:1 ratio:0.00625",
]


def link_shapes(debug):
    """BF.DEBUG's links without their item counts (which differ where the replica kept
    items RedisBloom's copy cleared)."""
    return [b" ".join(word for word in line.split() if not word.startswith(b"size:")) for line in debug[1:]]


@pytest.mark.parametrize("layout", ["no", "yes"])
def test_a_replica_grows_its_chain_for_a_piece_as_its_redisbloom_primary_did(tmp_path, layout):
    (tmp_path / "helper").mkdir()
    commands = overwritten(grown_pieces(tmp_path / "helper")) + [["SET", "synced", "1"]]
    with scripted_replica(tmp_path, commands, layout) as (primary, replica):
        client = replica.client()
        wait_for(client, "synced")
        assert link_shapes(client.execute_command("BF.DEBUG", "c")) == link_shapes(OVERWRITTEN_DEBUG)
        # RedisBloom holds 92 of the x items (the test on a real primary checks which).
        assert sum(client.execute_command("BF.MEXISTS", "c", *items("x", 200))) >= 92
        assert all(client.execute_command("BF.MEXISTS", "c", *items("y", 21), *items("z", 31)))


@pytest.mark.skipif(not PEER.exists(), reason=f"RedisBloom 2.6.28 not built at {PEER} (scripts/redisbloom-peer.sh)")
def test_pieces_loaded_after_growth_on_a_real_redisbloom_primary(tmp_path):
    (tmp_path / "helper").mkdir()
    commands = overwritten(grown_pieces(tmp_path / "helper"))
    with real_primary_with_replica(tmp_path) as (primary, replica):
        client = primary.client()
        for command in commands:
            client.execute_command(*command)
        assert client.execute_command("BF.DEBUG", "c") == OVERWRITTEN_DEBUG
        held = [x for x, found in zip(items("x", 200), client.execute_command("BF.MEXISTS", "c", *items("x", 200)))
                if found]
        assert len(held) == 92
        client.set("synced", "1")
        wait_for(replica.client(), "synced")
        assert missing(replica.client(), {"c": held}) == {}
        assert link_shapes(replica.client().execute_command("BF.DEBUG", "c")) == link_shapes(OVERWRITTEN_DEBUG)


def test_an_aof_of_a_live_migration_keeps_items_added_between_pieces(tmp_path, pieces):
    """An AOF with a client's pieces as given (what bloomery wrote before it replicated a
    piece as the bytes it leaves, and what RedisBloom writes) and items added between
    them: the replay ORs each piece in, so the items added before a piece stay."""
    commands = [["BF.LOADCHUNK", "live", *pieces[0]], ["BF.MADD", "live", *items("k", 30)]]
    commands += [["BF.LOADCHUNK", "live", iterator, data] for iterator, data in pieces[1:]]
    with server_replaying_aof(tmp_path, commands) as server:
        assert missing(server.client(), {"live": items("k", 30) + SOURCE_ITEMS}) == {}


def test_a_bloomery_primary_replicates_a_piece_as_the_bits_it_keeps(tmp_path):
    """A bloomery primary ORs a client's piece into the link (items added before it are
    kept) and replicates the bytes that gives: its replica keeps them too."""
    (tmp_path / "helper").mkdir()
    pieces = grown_pieces(tmp_path / "helper")
    primary_dir, replica_dir = tmp_path / "primary", tmp_path / "replica"
    primary_dir.mkdir()
    replica_dir.mkdir()
    primary = Server(primary_dir, module_args=["REDISBLOOM_LAYOUT", "yes"])
    replica = Server(replica_dir)
    try:
        primary.start()
        replica.extra = ["--replicaof", "127.0.0.1", str(primary.port)]
        replica.start()
        client = primary.client()
        client.execute_command("BF.RESERVE", "c", "0.1", "7")
        client.execute_command("BF.MADD", "c", *items("y", 21))
        for iterator, data in pieces[1:3]:
            client.execute_command("BF.LOADCHUNK", "c", iterator, data)
        assert all(client.execute_command("BF.MEXISTS", "c", *items("y", 21)))
        client.set("synced", "1")
        wait_for(replica.client(), "synced")
        assert all(replica.client().execute_command("BF.MEXISTS", "c", *items("y", 21)))
        assert replica.client().execute_command("BF.DEBUG", "c") == client.execute_command("BF.DEBUG", "c")
    finally:
        replica.stop()
        primary.stop()
