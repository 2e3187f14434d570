"""A server that cannot give a filter its memory (an address-space limit here; strict
overcommit, `vm.overcommit_memory = 2`, is the same to the module: the allocator returns
nothing) answers the command that asked for it with an error and stays up, with every
other key and every item it accepted. Before the module allocated with
`RedisModule_TryAlloc`, Redis's allocator stopped the whole server on the first such
request ("Redis aborting for OUT OF MEMORY"), and an AOF holding one stopped every restart.

A randomized run (creations, adds, copies and deletions of every kind on a primary with a
replica, the limit reached now and then) checks that each add's answered items are found,
on both. Redis's own allocations (query and reply buffers) and the module's working
buffers for one command (Rust's infallible `Vec`s, as large as the command's arguments)
still stop it when they fail, which the run tells apart from a stop in the module's
filter memory: the caller in the crash report's backtrace, and Rust's message.

Each server here runs under `RLIMIT_AS`: a bound on its address space, set on the running
process (or, for an AOF replay, before it starts) a few tens of MB above what it maps
already, so that filters of 17 MB or more soon cannot be had while the machine has plenty."""
import os
import random
import re
import resource
from pathlib import Path

import pytest
import redis

from conftest import Server, error_of, wait_until_synced
from type_helpers import start_replica

# A creation's refusal for memory; MEMORY_REFUSED also matches a growth step's ("the system
# refused the memory for its next sub-filter"; a RedisBloom chain's growth answers
# "problem inserting into filter" instead).
REFUSED = "the system refused them"
MEMORY_REFUSED = "the system refused"
# Redis's answer to a COPY whose copy the module could not make.
COPY_REFUSED = "module key failed to copy"
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
    _, hard = resource.prlimit(server.process.pid, resource.RLIMIT_AS)
    resource.prlimit(server.process.pid, resource.RLIMIT_AS, (limit, hard))


def lift_address_space_limit(server: Server) -> None:
    """Undoes `limit_address_space` (the soft limit back up to the hard one)."""
    _, hard = resource.prlimit(server.process.pid, resource.RLIMIT_AS)
    resource.prlimit(server.process.pid, resource.RLIMIT_AS, (hard, hard))


def alive(server: Server) -> bool:
    try:
        return server.process.poll() is None and server.client().ping() is True
    except redis.ConnectionError:
        return False


def info(client, key) -> dict:
    """BF.INFO as a dict."""
    return dict(zip(*[iter(client.execute_command("BF.INFO", key))] * 2))


def add_until_refused(client, key, batches, size):
    """BF.MADDs of `size` new items, up to `batches` of them, until an item is refused:
    the items answered, and the first refusal (None if none was)."""
    taken = []
    for batch in range(batches):
        items = [f"{batch}-{i}" for i in range(size)]
        replies = client.execute_command("BF.MADD", key, *items)
        taken += [item for item, reply in zip(items, replies) if not isinstance(reply, redis.ResponseError)]
        errors = [reply for reply in replies if isinstance(reply, redis.ResponseError)]
        if errors:
            return taken, errors[0]
    return taken, None


@pytest.fixture
def limited(tmp_path):
    server = Server(tmp_path).start()
    limit_address_space(server, 48 << 20)
    yield server
    server.stop()


def fill(client, prefix="ballast", capacity=CAPACITY):
    """Reserves filters (17 MB for the default capacity) until one is refused for memory;
    returns the keys made."""
    made = []
    for i in range(40):
        try:
            client.execute_command("BF.RESERVE", f"{prefix}{i}", "0.01", capacity)
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
        # RedisBloom's chain answers every item (0 for one present, the error for one that
        # needs the link); bloomery's stops at the first refusal.
        taken, refused = add_until_refused(r, "g", batches=10, size=400)
        assert refused is not None, "the chain grew under the address-space limit"
        expected = "problem inserting into filter" if layout == "redisbloom" else "the system refused the memory"
        assert expected in str(refused)
        # One item at a time, the same answer.
        assert expected in error_of(r, "BF.ADD", "g", "one more")
        assert alive(server)
        # No item answered is missing.
        assert all(r.execute_command("BF.MEXISTS", "g", *taken))
        assert info(r, "g")[b"Number of filters"] == 1
    finally:
        server.stop()


def test_an_aging_filter_whose_next_generation_cannot_be_had_refuses_the_item(limited):
    """A generation started by time (a filter made 15 s back, `AT`, on a window of 30 s in
    4 generations of 10 s, and an add now) that the system refuses: the item is refused
    with the generation's own words (it shared the chains' "next sub-filter" before), the
    earlier items stay. (A time ahead of the clock no longer moves a filter's time.)"""
    r = limited.client()
    start = r.time()[0] * 1000 - 15_000
    r.execute_command("BF.RESERVE", "w", "0.01", 4 * CAPACITY, "WINDOW", "SECONDS", 30, "AT", start)
    assert r.memory_usage("w") > 18 << 20  # a generation: more than fill leaves
    r.execute_command("BF.INSERT", "w", "NOCREATE", "WINDOW", "AT", start, "ITEMS", "early")
    fill(r)
    replies = r.execute_command("BF.INSERT", "w", "NOCREATE", "WINDOW", "ITEMS", "late")
    assert len(replies) == 1 and isinstance(replies[0], redis.ResponseError), replies
    assert str(replies[0]) == "filter cannot start another generation: the system refused the memory for it"
    assert alive(limited)
    assert r.execute_command("BF.EXISTS", "w", "early") == 1
    assert r.execute_command("BF.EXISTS", "w", "late") == 0


def test_a_retouched_filter_whose_bookkeeping_cannot_grow_refuses_the_item(limited, tmp_path):
    """A retouched filter (a file the CLI made, loaded by BF.LOADCHUNK) keeps a list of the
    items each set bit needs, which grows on every add outside the cap: where the system
    refuses that growth (the map of lists doubling), the item is refused with an error and
    nothing of it kept; every item answered before is found. Its insert allocated
    infallibly, and the refusal stopped the server."""
    import subprocess
    from conftest import cli

    path = tmp_path / "retouched.bloom"
    subprocess.run([cli(), "create", "--variant", "retouched", "--items", "1000000", str(path)], check=True)
    r = limited.client()
    assert r.execute_command("BF.LOADCHUNK", "t", 1, path.read_bytes()) in (b"OK", "OK", True)
    taken, refused = add_until_refused(r, "t", batches=200, size=2000)
    assert refused is not None, "the lists grew under the address-space limit"
    assert str(refused) == "cannot add the item: the system refused the memory to record it", refused
    assert alive(limited)
    assert all(checked(r, "BF.MEXISTS", "t", taken))


def test_restore_and_loadchunk_of_a_filter_that_cannot_be_had_are_refused(tmp_path):
    """A DUMP of a mostly empty filter is small (Redis compresses it), and so is the header
    piece of a RedisBloom chain's BF.SCANDUMP: here the module's allocation is what fails,
    not Redis's buffer for the argument (which Redis would answer by stopping). A
    RedisBloom chain's RDB value brings each link's bits in a buffer of Redis's, which
    the module copies: a link of 34 MB fits the limit once but not twice, and that copy
    stopped the server ("memory allocation of 34461736 bytes failed")."""
    (tmp_path / "source").mkdir()
    source = Server(tmp_path / "source").start()
    try:
        s = source.client()
        payloads, headers = {}, {}
        for key, layout, capacity in [("bloomery", "bloomery", 4 * CAPACITY),
                                      ("redisbloom", "redisbloom", 4 * CAPACITY),
                                      ("redisbloom-once", "redisbloom", 5 * CAPACITY // 2)]:
            s.execute_command("BF.RESERVE", key, "0.01", capacity, "LAYOUT", layout)
            s.execute_command("BF.ADD", key, "item")
            payloads[key] = s.dump(key)
            headers[key] = s.execute_command("BF.SCANDUMP", key, 0)
        assert 32 << 20 < s.memory_usage("redisbloom-once") < 40 << 20
        assert all(len(payload) < 4 << 20 for payload in payloads.values())
        assert len(headers["redisbloom"][1]) < 1024
    finally:
        source.stop()
    # Redis's own answer to a value the module could not load, and the module's refusal
    # (not "bad data") of the piece.
    iterator, data = headers["redisbloom"]
    attempts = [(("RESTORE", key, "0", payload), "Bad data format", None) for key, payload in payloads.items()]
    attempts.append((("BF.LOADCHUNK", "f", iterator, data), REFUSED, "bad data"))
    # Each on a server of its own: a refused load can leave its pieces' memory mapped in
    # Redis's allocator, which counts against the limit, so that a load after it finds
    # less room than the test means (with the loads one after another on one server, a
    # load after a refused one at times stopped Redis in one of its own allocations).
    for number, (command, expected, absent) in enumerate(attempts):
        (tmp_path / f"target{number}").mkdir()
        server = Server(tmp_path / f"target{number}").start()
        try:
            r = server.client()
            r.execute_command("BF.ADD", "small", "kept")
            limit_address_space(server, 48 << 20)
            error = error_of(r, *command)
            assert expected in error and (absent is None or absent not in error), (command[:2], error)
            assert r.exists(command[1]) == 0
            assert alive(server)
            assert r.execute_command("BF.EXISTS", "small", "kept") == 1
        finally:
            server.stop()


def test_a_copy_that_cannot_be_had_is_refused_and_the_server_stays_up(tmp_path):
    """COPY of a filter of each kind (each larger than what the limit leaves) is Redis's
    error for a copy the module refused, the source untouched; once the limit is lifted,
    the same COPY makes an independent copy. The copy was a `clone`, whose refused
    allocation stopped the server ("memory allocation of 17463232 bytes failed")."""
    server = Server(tmp_path).start()
    try:
        r = server.client()
        sources = {
            "plain": ("BF.RESERVE", "plain", "0.01", 2 * CAPACITY),
            "fixed": ("BF.RESERVE", "fixed", "0.01", 2 * CAPACITY, "NONSCALING"),
            "chain": ("BF.RESERVE", "chain", "0.01", 2 * CAPACITY, "LAYOUT", "redisbloom"),
            "window": ("BF.RESERVE", "window", "0.01", 4 * CAPACITY, "WINDOW"),
            "counting": ("CBF.RESERVE", "counting", "0.01", CAPACITY),
        }
        items = {key: [f"{key}-{i}" for i in range(1000)] for key in sources}
        for key, command in sources.items():
            r.execute_command(*command)
            adds = "CBF.MADD" if key == "counting" else "BF.MADD"
            r.execute_command(adds, key, *items[key])
            assert r.memory_usage(key) > 18 << 20, (key, r.memory_usage(key))
        exists = {key: "CBF.MEXISTS" if key == "counting" else "BF.MEXISTS" for key in sources}
        limit_address_space(server, 48 << 20)
        made = fill(r)  # what is left is less than one 17 MB filter
        for key in sources:
            assert COPY_REFUSED in error_of(r, "COPY", key, f"{key}-copy"), key
            assert r.exists(f"{key}-copy") == 0, key
        assert alive(server)
        for key in sources:
            assert all(r.execute_command(exists[key], key, *items[key])), key
        lift_address_space_limit(server)
        for key in sources:
            assert r.copy(key, f"{key}-copy") == 1, key
            assert r.type(f"{key}-copy") == r.type(key), key
            assert all(r.execute_command(exists[key], f"{key}-copy", *items[key])), key
            r.delete(key)
            assert all(r.execute_command(exists[key], f"{key}-copy", *items[key])), key
        assert alive(server)
    finally:
        server.stop()


def test_a_save_with_little_memory_left_writes_the_bits_from_the_filter(tmp_path):
    """SAVE (in the server's own process) of a 52 MB filter with less than 2 MB left: the
    module writes the bits to the RDB from the filter's memory. It copied each 16 MiB
    piece first, and the refused copy stopped the server ("memory allocation of 16777216
    bytes failed"). Compression is off: with it (Redis's default), Redis takes a buffer
    of each piece's size to compress it into, its own allocation."""
    server = Server(tmp_path, "--rdbcompression", "no").start()
    try:
        r = server.client()
        r.execute_command("BF.RESERVE", "big", "0.01", 3 * CAPACITY)
        items = [f"big-{i}" for i in range(1000)]
        r.execute_command("BF.MADD", "big", *items)
        assert r.memory_usage("big") > 3 * (16 << 20)  # four pieces of up to 16 MiB
        limit_address_space(server, 48 << 20)
        fill(r)
        fill(r, prefix="small", capacity=CAPACITY // 8)  # what is left is under 2 MB
        assert r.save() is True
        assert alive(server)
        server.stop()
        server.start()
        r = server.client()
        assert all(r.execute_command("BF.MEXISTS", "big", *items))
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
    # Started (it answers only once the AOF is loaded) or an error: it stopped while loading.
    server = Server(tmp_path, "--appendonly", "yes",
                    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))).start()
    try:
        r = server.client()
        assert all(r.execute_command("BF.MEXISTS", "g", *[f"g-{i}" for i in range(3000)]))
        assert info(r, "g")[b"Number of filters"] == 1
        sizes = []
        for key in keys:
            assert all(r.execute_command("BF.MEXISTS", key, *[f"{key}-{i}" for i in range(1000)])), key
            sizes.append(info(r, key)[b"Capacity"])
        # Some filters could not be made at their size: their items went into the small
        # chain an add makes when it finds no filter.
        assert min(sizes) < CAPACITY <= max(sizes), sizes
        assert alive(server)
    finally:
        server.stop()


def checked(client, command, key, items):
    """`command` (BF.MEXISTS or CBF.MEXISTS) for `items` in batches of 500: a server with
    no memory to spare stops on a reply buffer of a large batch (Redis's own allocation)."""
    answers = []
    for start in range(0, len(items), 500):
        answers += client.execute_command(command, key, *items[start:start + 500])
    return answers


def random_run(seed, primary, steps=300):
    """`steps` random creations, adds, copies and deletions on `primary` (under an address-space
    limit), each add's answered items checked at once; returns what was taken per key,
    the keys' kinds, and whether the server stopped on a buffer's allocation (Redis's own
    or the module's working buffers, not a filter's)."""
    rng = random.Random(seed)
    r = primary.client()
    taken, kinds = {}, {}
    refusals = 0  # for memory the system would not give
    for step in range(steps):
        key = f"k{rng.randrange(6)}"
        try:
            choice = rng.random()
            if choice < 0.25:
                if key in taken and rng.random() < 0.7:
                    r.delete(key)
                    del taken[key], kinds[key]
                capacity = rng.choice([100, 1000, 10**5, 10**6, 5 * 10**6, CAPACITY, 3 * CAPACITY])
                kind = rng.choice(["bloomery", "redisbloom", "counting", "aging"])
                if kind == "counting":
                    r.execute_command("CBF.RESERVE", key, "0.01", capacity)
                elif kind == "aging":
                    r.execute_command("BF.RESERVE", key, "0.01", capacity, "WINDOW")
                else:
                    options = rng.choice([[], ["NONSCALING"], ["EXPANSION", rng.choice([1, 2, 100, 30000])]])
                    r.execute_command("BF.RESERVE", key, rng.choice(["0.1", "0.01", "0.001"]), capacity,
                                      *options, "LAYOUT", kind)
                taken[key], kinds[key] = set(), kind
            elif choice < 0.3:
                r.delete(key)
                taken.pop(key, None), kinds.pop(key, None)
            elif choice < 0.35:
                # A copy (refused as a whole where its memory cannot be had; a refused
                # COPY REPLACE leaves the key it would replace as it was).
                source = f"k{rng.randrange(6)}"
                if source != key and source in taken and \
                        r.copy(source, key, replace=rng.random() < 0.5):
                    taken[key], kinds[key] = set(taken[source]), kinds[source]
            else:
                items = [f"{key}-{step}-{i}" for i in range(rng.choice([1, 10, 100, 1000, 5000]))]
                if kinds.get(key) == "counting":
                    command, lookup = ("CBF.MADD", key), "CBF.MEXISTS"
                elif rng.random() < 0.5:
                    command, lookup = ("BF.MADD", key), "BF.MEXISTS"
                else:
                    command, lookup = ("BF.INSERT", key, "CAPACITY", rng.choice([1000, 10**6, CAPACITY]),
                                       "EXPANSION", rng.choice([2, 1000]), "ITEMS"), "BF.MEXISTS"
                replies = r.execute_command(*command, *items)
                refusals += any(MEMORY_REFUSED in str(reply) for reply in replies
                                if isinstance(reply, redis.ResponseError))
                answered = [item for item, reply in zip(items, replies)
                            if not isinstance(reply, redis.ResponseError)]
                kinds.setdefault(key, "made by an add")
                taken.setdefault(key, set()).update(answered)
                # An aging filter forgets its oldest generation as new ones start.
                if answered and kinds[key] != "aging":
                    found = checked(r, lookup, key, answered)
                    assert all(found), (seed, step, key, found.count(0))
        except redis.ResponseError as error:
            # A refusal: for memory (a filter's, a copy's), an existing key, a full filter.
            refusals += MEMORY_REFUSED in str(error) or COPY_REFUSED in str(error)
        except redis.ConnectionError:
            pass  # told apart below
        if not alive(primary):
            log = (primary.directory / "log.txt").read_text(errors="replace")
            stderr = (primary.directory / "stderr.log").read_text(errors="replace")
            assert redis_s_own_allocation_failed(log, Path(primary.module).name) or \
                working_buffer_failed(stderr), \
                f"seed {seed} step {step}: the server stopped, not for a buffer's allocation"
            return taken, kinds, True
    assert refusals > 0, f"seed {seed}: the limit was never reached"
    return taken, kinds, False


def working_buffer_failed(stderr: str) -> bool:
    """Whether the process stopped on an allocation Rust makes infallibly (its message on
    standard error) of a working buffer's size: the module's working buffers for one
    command (its answers, an item's slices) grow with the command's arguments as Redis's
    own buffers do, under 1 MiB for the 5000 items of the largest add here. The filters
    themselves, and their copies, are made fallibly: a larger allocation that aborts is
    one of those (a COPY's clone did)."""
    sizes = re.findall(r"^memory allocation of (\d+) bytes failed$", stderr, re.MULTILINE)
    return bool(sizes) and int(sizes[0]) < 1 << 20


def redis_s_own_allocation_failed(log: str, module: str) -> bool:
    """Whether Redis stopped for memory in one of its own allocations (a query or reply
    buffer, DUMP's compression): its allocator was called by Redis's code, not the
    module's (the file `module`), which allocates with TryAlloc and answers an error."""
    if "Redis aborting for OUT OF MEMORY" not in log:
        return False
    frames = log[log.index("Backtrace:"):].splitlines()[1:]
    caller = next(i for i, frame in enumerate(frames) if "(z" in frame and "alloc" in frame) + 1
    return module not in frames[caller]


# Four seeds in CI; OOM_SEEDS=N runs seeds 0 to N - 1.
@pytest.mark.parametrize("seed", range(int(os.environ.get("OOM_SEEDS", "4"))))
def test_random_commands_under_an_address_space_limit_lose_no_item(tmp_path, seed):
    """Creations, adds, copies and deletions of every kind, with the limit reached now and then:
    the server stays up (unless a buffer finds no memory: see random_run), each add's
    answered items are found at once, and at the end on the primary and on a replica (to
    which only what was taken is sent)."""
    primary = Server(tmp_path, "--logfile", str(tmp_path / "log.txt")).start()
    replica = None
    try:
        # Synced before the limit: a full sync forks a child that inherits it.
        replica = start_replica(tmp_path, primary)
        p, rep = primary.client(), replica.client()
        limit_address_space(primary, random.Random(seed).choice([24, 48, 96]) << 20)
        taken, kinds, stopped = random_run(seed, primary)
        if stopped:
            # On a buffer's allocation (told apart in random_run); each add's items were
            # checked as it was answered.
            return
        wait_until_synced(p, rep)
        for client in [p, rep]:
            for key, items in taken.items():
                if items and kinds[key] != "aging":
                    lookup = "CBF.MEXISTS" if kinds[key] == "counting" else "BF.MEXISTS"
                    found = checked(client, lookup, key, sorted(items))
                    assert all(found), (seed, key, found.count(0))
    finally:
        if replica:
            replica.stop()
        primary.stop()
