"""A server that cannot give a filter its memory (an address-space limit here; strict
overcommit, `vm.overcommit_memory = 2`, is the same to the module: the allocator returns
nothing) answers the command that asked for it with an error and stays up, with every
other key and every item it accepted. Before the module allocated with
`RedisModule_TryAlloc`, Redis's allocator stopped the whole server on the first such
request ("Redis aborting for OUT OF MEMORY"), and an AOF holding one stopped every restart.

Each server here runs under `RLIMIT_AS`: a bound on its address space, set on the running
process (or, for an AOF replay, before it starts) a few tens of MB above what it maps
already, so that filters of 17 MB or more soon cannot be had while the machine has plenty."""
import resource
import subprocess
import time
from pathlib import Path

import pytest
import redis

from conftest import MODULE, REDIS_SERVER, Server, dump, error_of

REFUSED = "the system refused them"
CAPACITY = 10_000_000  # a blocked filter of about 17 MB at 1%


def mapped_bytes(pid: int) -> int:
    """The process's address space now (VmSize)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


def limit_address_space(server: Server, headroom: int) -> None:
    """Lets the server map only `headroom` bytes more than it does now."""
    limit = mapped_bytes(server.process.pid) + headroom
    resource.prlimit(server.process.pid, resource.RLIMIT_AS, (limit, limit))


def alive(server: Server) -> bool:
    return server.process.poll() is None and server.client().ping() is True


@pytest.fixture
def limited(tmp_path):
    server = Server(tmp_path).start()
    limit_address_space(server, 48 << 20)
    yield server
    server.stop()


def fill(client, prefix="ballast"):
    """Reserves 17 MB filters until one is refused for memory; returns the keys made."""
    made = []
    for i in range(40):
        try:
            client.execute_command("BF.RESERVE", f"{prefix}{i}", "0.01", CAPACITY)
        except redis.ResponseError as error:
            assert REFUSED in str(error), error
            return made
        made.append(f"{prefix}{i}")
    raise AssertionError("no creation was refused under the address-space limit")


def test_creations_the_system_cannot_give_memory_are_refused_and_the_server_stays_up(limited):
    r = limited.client()
    r.execute_command("BF.ADD", "small", "kept")
    made = fill(r)
    # Each at least 50 MB, more than the limit left room for at all.
    for command in [
        ("BF.RESERVE", "x", "0.01", 4 * CAPACITY),
        ("BF.RESERVE", "x", "0.01", 4 * CAPACITY, "NONSCALING"),
        ("BF.RESERVE", "x", "0.01", 4 * CAPACITY, "LAYOUT", "redisbloom"),
        ("BF.RESERVE", "x", "0.01", 10 * CAPACITY, "WINDOW"),
        ("BF.INSERT", "x", "CAPACITY", 4 * CAPACITY, "ITEMS", "a"),
        ("CBF.RESERVE", "x", "0.01", 2 * CAPACITY),
    ]:
        assert REFUSED in error_of(r, *command), command
        assert r.exists("x") == 0, command
    assert alive(limited)
    # Everything made before is there and works.
    assert r.execute_command("BF.EXISTS", "small", "kept") == 1
    for key in made:
        assert r.execute_command("BF.ADD", key, "item") == 1
        assert r.execute_command("BF.EXISTS", key, "item") == 1
    # The memory given back is taken again.
    r.delete(*made)
    assert r.execute_command("BF.RESERVE", "x", "0.01", CAPACITY) == b"OK"


@pytest.mark.parametrize("layout", ["bloomery", "redisbloom"])
def test_a_chain_whose_next_link_cannot_be_had_refuses_only_the_items_that_need_it(tmp_path, layout):
    server = Server(tmp_path).start()
    try:
        r = server.client()
        # The second link of a chain of 1000 growing by 30000 takes about 55 MB.
        r.execute_command("BF.RESERVE", "g", "0.01", "1000", "EXPANSION", "30000", "LAYOUT", layout)
        limit_address_space(server, 32 << 20)
        taken, refused = [], None
        for batch in range(10):
            items = [f"{batch}-{i}" for i in range(400)]
            replies = r.execute_command("BF.MADD", "g", *items)
            # RedisBloom's chain answers every item (0 for one present, the error for one
            # that needs the link); bloomery's stops at the first refusal.
            taken += [item for item, reply in zip(items, replies) if not isinstance(reply, redis.ResponseError)]
            errors = [reply for reply in replies if isinstance(reply, redis.ResponseError)]
            if errors:
                refused = errors[0]
                break
        assert refused is not None, "the chain grew under the address-space limit"
        expected = "problem inserting into filter" if layout == "redisbloom" else "the system refused the memory"
        assert expected in str(refused)
        # One item at a time, the same answer.
        assert expected in error_of(r, "BF.ADD", "g", "one more")
        assert alive(server)
        # No item answered is missing.
        assert all(r.execute_command("BF.MEXISTS", "g", *taken))
        info = dict(zip(*[iter(r.execute_command("BF.INFO", "g"))] * 2))
        assert info[b"Number of filters"] == 1
    finally:
        server.stop()


def test_restore_and_loadchunk_of_a_filter_that_cannot_be_had_are_refused(tmp_path):
    """A DUMP of a mostly empty filter is small (Redis compresses it), and so is the header
    piece of a RedisBloom chain's BF.SCANDUMP: here the module's allocation is what fails,
    not Redis's buffer for the argument (which Redis would answer by stopping)."""
    (tmp_path / "source").mkdir()
    source = Server(tmp_path / "source").start()
    try:
        s = source.client()
        payloads, headers = {}, {}
        for layout in ["bloomery", "redisbloom"]:
            s.execute_command("BF.RESERVE", layout, "0.01", 4 * CAPACITY, "LAYOUT", layout)
            s.execute_command("BF.ADD", layout, "item")
            payloads[layout] = s.dump(layout)
            headers[layout] = s.execute_command("BF.SCANDUMP", layout, 0)
        assert all(len(payload) < 4 << 20 for payload in payloads.values())
        assert len(headers["redisbloom"][1]) < 1024
    finally:
        source.stop()
    (tmp_path / "target").mkdir()
    server = Server(tmp_path / "target").start()
    try:
        r = server.client()
        r.execute_command("BF.ADD", "small", "kept")
        limit_address_space(server, 48 << 20)
        for layout, payload in payloads.items():
            # Redis's own answer to a value the module could not load.
            assert "Bad data format" in error_of(r, "RESTORE", layout, "0", payload), layout
            assert r.exists(layout) == 0
        iterator, data = headers["redisbloom"]
        error = error_of(r, "BF.LOADCHUNK", "f", iterator, data)
        assert REFUSED in error and "bad data" not in error, error
        assert r.exists("f") == 0
        assert alive(server)
        assert r.execute_command("BF.EXISTS", "small", "kept") == 1
    finally:
        server.stop()


def test_an_aof_whose_filters_cannot_all_be_had_still_loads_every_item(tmp_path):
    writer = Server(tmp_path, "--appendonly", "yes", "--appendfsync", "always").start()
    keys = [f"k{i}" for i in range(6)]
    try:
        w = writer.client()
        # A chain grown past its first link (1000 items) to a second of about 55 MB, which
        # the replay cannot have either: its items go into the first link.
        w.execute_command("BF.RESERVE", "g", "0.01", "1000", "EXPANSION", "30000")
        w.execute_command("BF.MADD", "g", *[f"g-{i}" for i in range(3000)])
        for key in keys:
            w.execute_command("BF.RESERVE", key, "0.01", CAPACITY)
            w.execute_command("BF.MADD", key, *[f"{key}-{i}" for i in range(1000)])
    finally:
        writer.stop()
    # How much a server maps before it loads anything, to leave room for about two filters.
    (tmp_path / "empty").mkdir()
    probe = Server(tmp_path / "empty").start()
    try:
        baseline = mapped_bytes(probe.process.pid)
    finally:
        probe.stop()
    limit = baseline + (48 << 20)
    process = subprocess.Popen(
        [
            REDIS_SERVER, "--port", str(writer.port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
            "--save", "", "--appendonly", "yes", "--loadmodule", str(MODULE),
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    try:
        r = redis.Redis(host="127.0.0.1", port=writer.port, socket_timeout=10)
        deadline = time.monotonic() + 20
        while True:
            try:
                if r.ping() and r.info("persistence")["loading"] == 0:
                    break
            except (redis.ConnectionError, redis.BusyLoadingError):
                pass
            assert process.poll() is None, "the server stopped while loading its AOF"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert all(r.execute_command("BF.MEXISTS", "g", *[f"g-{i}" for i in range(3000)]))
        assert dict(zip(*[iter(r.execute_command("BF.INFO", "g"))] * 2))[b"Number of filters"] == 1
        sizes = []
        for key in keys:
            assert all(r.execute_command("BF.MEXISTS", key, *[f"{key}-{i}" for i in range(1000)])), key
            sizes.append(dict(zip(*[iter(r.execute_command("BF.INFO", key))] * 2))[b"Capacity"])
        # Some filters could not be made at their size: their items went into the small
        # chain an add makes when it finds no filter.
        assert min(sizes) < CAPACITY <= max(sizes), sizes
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(timeout=10)
