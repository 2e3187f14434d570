"""Operations: the defaults of new filters as module configurations (CONFIG GET/SET, load
arguments, the command line), the INFO bloomery section (its totals checked exactly
against what BF.INFO says of every key, after adds, growth, deletes, expiry, RDB reload,
RESTORE, COPY and BF.LOADCHUNK, for both of the module's types), and the ACL categories
(on Redis 7.0, which has none for module commands: the module loads with one notice;
scripts/acl-categories.sh checks @bloom on a server that has them)."""
import os
import re
import struct
import time

import pytest
import redis

from conftest import ROOT, Server, dump, error_of

FIGURES = ("filters", "redisbloom_filters", "estimated_filters", "loads", "bytes", "items")
CHUNK_BYTES = 16 << 20


def config(client, name):
    return client.config_get(f"bloomery.{name}")[f"bloomery.{name}"]


def figures(client) -> dict:
    """INFO bloomery's totals."""
    info = client.info("bloomery")
    return {name: info[f"bloomery_{name}"] for name in FIGURES}


def bf_info(client, key) -> dict:
    reply = client.execute_command("BF.INFO", key)
    return {label.decode(): value for label, value in zip(reply[0::2], reply[1::2])}


def expected(client) -> dict:
    """The totals INFO should show, from BF.INFO of every key of the module's types: bytes
    are BF.INFO's Size less RedisBloom's structure sizes (32 bytes a filter, 64 a
    sub-filter), items BF.INFO's count."""
    totals = dict.fromkeys(FIGURES, 0)
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind not in ("bloomery_", "MBbloom--"):
            continue
        fields = bf_info(client, key)
        totals["filters"] += 1
        totals["redisbloom_filters"] += kind == "MBbloom--"
        totals["bytes"] += fields["Size"] - 32 - 64 * fields["Number of filters"]
        totals["items"] += fields["Number of items inserted"]
    return totals


def assert_exact(client):
    """INFO's totals are what the keys hold, and non-trivial."""
    assert figures(client) == expected(client)


def eventually(condition, seconds=5.0):
    """Waits for `condition` (lazy frees run on Redis's background thread)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def debug_lines(client, key):
    return [line.decode() for line in client.execute_command("BF.DEBUG", key)]


# --- configurations ------------------------------------------------------------------


def test_defaults_are_redisbloom_s_and_info_shows_the_configurations(r):
    assert config(r, "error-rate") == "0.01"
    assert config(r, "initial-size") == "100"
    assert config(r, "expansion") == "2"
    info = r.info("bloomery")
    assert info["bloomery_error_rate"] == 0.01
    assert info["bloomery_initial_size"] == 100
    assert info["bloomery_expansion"] == 2
    assert info["bloomery_max_filter_memory"] == 1 << 30
    assert info["bloomery_redisbloom_layout"] == "no"
    assert info["bloomery_redisbloom_errors"] == "no"
    # The figures are in INFO modules and INFO everything too (Redis's own section names).
    assert "bloomery_filters" in r.info("modules")
    assert "bloomery_error_rate" in r.info("everything")


def test_error_rate_config_set_get_and_refusals(r):
    r.execute_command("BF.ADD", "before", "x")
    before = debug_lines(r, "before")
    r.config_set("bloomery.error-rate", "0.001")
    assert config(r, "error-rate") == "0.001"
    assert r.info("bloomery")["bloomery_error_rate"] == 0.001
    # A filter BF.ADD creates now is the one BF.RESERVE makes at 0.001 (sub-filter 1 of the
    # blocked chain is sized at (1 - 0.8) of the rate: ratio 0.0002), not the default 0.01 one.
    r.execute_command("BF.ADD", "after", "x")
    r.execute_command("BF.RESERVE", "reserved", "0.001", "100")
    r.execute_command("BF.ADD", "reserved", "x")
    assert debug_lines(r, "after") == debug_lines(r, "reserved")
    assert debug_lines(r, "after")[1].endswith("ratio:0.0002")
    assert debug_lines(r, "before") != debug_lines(r, "after")
    r.execute_command("BF.INSERT", "inserted", "ITEMS", "x")
    assert debug_lines(r, "inserted") == debug_lines(r, "after")
    r.execute_command("BF.INSERT", "explicit", "ERROR", "0.01", "ITEMS", "x")
    assert debug_lines(r, "explicit") == before
    # Existing filters keep their parameters.
    assert debug_lines(r, "before") == before
    r.config_set("bloomery.error-rate", "1e-4")
    assert config(r, "error-rate") == "0.0001"
    r.config_set("bloomery.error-rate", "0.000000001")
    assert config(r, "error-rate") == "1e-9"
    assert float(r.info("bloomery")["bloomery_error_rate"]) == 1e-9
    r.config_set("bloomery.error-rate", "0.0001")
    for bad in ("0", "1", "-0.5", "1.5", "abc", "nan", "", "inf"):
        message = error_of(r, "CONFIG", "SET", "bloomery.error-rate", bad)
        assert "strictly between 0 and 1" in message, message
    assert config(r, "error-rate") == "0.0001"
    r.config_set("bloomery.error-rate", "0.01")
    r.execute_command("BF.ADD", "default-again", "x")
    assert debug_lines(r, "default-again") == before


def test_initial_size_config_set_get_and_refusals(r):
    r.config_set("bloomery.initial-size", "1000")
    assert config(r, "initial-size") == "1000"
    r.execute_command("BF.ADD", "added", "x")
    r.execute_command("BF.MADD", "madded", "x", "y")
    r.execute_command("BF.INSERT", "inserted", "ITEMS", "x")
    r.execute_command("BF.INSERT", "explicit", "CAPACITY", "50", "ITEMS", "x")
    for key in ("added", "madded", "inserted"):
        assert r.execute_command("BF.INFO", key, "CAPACITY") == [1000]
    assert r.execute_command("BF.INFO", "explicit", "CAPACITY") == [50]
    for bad in ("0", "-1", "abc", "1.5"):
        error_of(r, "CONFIG", "SET", "bloomery.initial-size", bad)
    assert config(r, "initial-size") == "1000"
    # A capacity a new key's filter can be sized for is taken, as BF.RESERVE takes it, and
    # refused, as there, by the memory cap when a key is made (a check of its own, sizing
    # another layout, refused it).
    r.config_set("bloomery.initial-size", "100000000000")
    assert "over the module's limit" in error_of(r, "BF.ADD", "huge", "x")
    assert "over the module's limit" in error_of(r, "BF.RESERVE", "huge", "0.01", "100000000000")
    assert r.exists("huge") == 0


def test_expansion_config_set_get_and_refusals(r):
    r.config_set("bloomery.expansion", "4")
    assert config(r, "expansion") == "4"
    r.execute_command("BF.ADD", "added", "x")
    r.execute_command("BF.RESERVE", "reserved", "0.01", "100")
    r.execute_command("BF.RESERVE", "explicit", "0.01", "100", "EXPANSION", "3")
    r.execute_command("BF.INSERT", "inserted", "ITEMS", "x")
    r.execute_command("BF.RESERVE", "nonscaling", "0.01", "100", "NONSCALING")
    for key in ("added", "reserved", "inserted"):
        assert r.execute_command("BF.INFO", key, "EXPANSION") == [4]
    assert r.execute_command("BF.INFO", "explicit", "EXPANSION") == [3]
    assert r.execute_command("BF.INFO", "nonscaling", "EXPANSION") == [None]
    # The second sub-filter is 4 times the first: growth follows the configured expansion.
    r.execute_command("BF.MADD", "added", *[f"item-{i}" for i in range(150)])
    lines = debug_lines(r, "added")
    capacities = [int(re.search(r"capacity:(\d+)", line).group(1)) for line in lines[1:]]
    assert capacities == [100, 400]
    for bad in ("0", "32769", "-2", "abc"):
        error_of(r, "CONFIG", "SET", "bloomery.expansion", bad)
    r.config_set("bloomery.expansion", "32768")
    assert config(r, "expansion") == "32768"


def test_where_no_layout_is_named_a_rate_blocked_sub_filters_serve_poorly_makes_redisbloom_s_chain(r):
    """A blocked sub-filter sets 8 bits per item whatever its rate: as the rate falls it takes
    more and more times the memory of RedisBloom's k spread bits, and reaches no rate as low
    as 1e-30. A default rate of 1e-30 was refused, and 1e-12 made chains that stopped
    growing under a cap after a few hundred items (below). Where no layout is named, a rate
    at which a blocked sub-filter takes more than twice RedisBloom's link makes RedisBloom's
    chain; LAYOUT bloomery still makes bloomery's, or says why not."""
    r.config_set("bloomery.error-rate", "1e-30")
    assert config(r, "error-rate") == "1e-30"
    assert r.execute_command("BF.ADD", "chain", "x") == 1
    assert r.type("chain") == b"MBbloom--"
    assert "hashes:101" in debug_lines(r, "chain")[1]
    message = error_of(r, "BF.RESERVE", "named", "1e-30", "100", "LAYOUT", "bloomery")
    assert "reaches no rate below" in message
    r.config_set("bloomery.error-rate", "0.01")
    # From capacity 1 at 1e-12 under a 64 MB cap: bloomery's chain stops growing within a
    # thousand items, RedisBloom's takes 20,000 (and many more).
    r.config_set("bloomery.max-filter-memory", "64mb")
    items = [f"item-{i}" for i in range(20000)]
    r.execute_command("BF.RESERVE", "blocked", "1e-12", "1", "LAYOUT", "bloomery")
    added = r.execute_command("BF.MADD", "blocked", *items)
    refused = [i for i, reply in enumerate(added) if isinstance(reply, redis.ResponseError)]
    assert refused and refused[0] < 1000 and "cannot grow" in str(added[refused[0]])
    r.execute_command("BF.RESERVE", "deep", "1e-12", "1")
    assert r.type("deep") == b"MBbloom--"
    added = r.execute_command("BF.MADD", "deep", *items)
    assert all(reply in (0, 1) for reply in added), [reply for reply in added if reply not in (0, 1)][:1]
    assert all(r.execute_command("BF.MEXISTS", "deep", *items))
    # The comparison is per item, at the rate: a small filter takes bloomery's layout at
    # 1%, whatever its floor (one 64-byte block against a link of 16 bytes).
    for key, rate, capacity, expected in [("small", "0.01", "10", b"bloomery"), ("low", "1e-5", "1000", b"bloomery"),
                                          ("lower", "1e-6", "1000", b"MBbloom--")]:
        r.execute_command("BF.RESERVE", key, rate, capacity)
        assert r.type(key).startswith(expected), (key, r.type(key))
    r.execute_command("BF.RESERVE", "forced", "1e-6", "1000", "LAYOUT", "bloomery")
    assert r.type("forced").startswith(b"bloomery")
    # A NONSCALING filter's one sub-filter takes the whole rate: bloomery's at 1e-6 still.
    r.execute_command("BF.RESERVE", "one", "1e-6", "1000", "NONSCALING")
    assert r.type("one").startswith(b"bloomery")
    # Where blocked sub-filters of 10^6 items cannot be sized at all, a small one still
    # could be, at thousands of times the chain's memory: RedisBloom's chain.
    message = error_of(r, "BF.RESERVE", "tiny", "1e-14", "100", "LAYOUT", "bloomery")
    assert "776518464 bytes" in message, message
    r.execute_command("BF.RESERVE", "tiny", "1e-14", "100")
    assert r.type("tiny") == b"MBbloom--"
    # BF.INSERT and the adds of a new key decide the same way.
    r.execute_command("BF.INSERT", "inserted", "ERROR", "1e-9", "ITEMS", "a")
    assert r.type("inserted") == b"MBbloom--"
    # A reason longer than Redis shows (256 bytes) is cut at a word, and says so.
    message = error_of(r, "CONFIG", "SET", "bloomery.error-rate", "0." + "1 " * 150)
    assert message.endswith("... (the server log has it all)") and len(message) < 400
    # Defaults from which no filter can be made at all are still refused: the smallest
    # double, 5e-324, leaves the first link a share of 0 in either layout.
    message = error_of(r, "CONFIG", "SET", "bloomery.error-rate", "5e-324")
    assert "no filter can be made from error-rate 5e-324, initial-size 100, redisbloom-layout no" in message
    # One CONFIG SET of several: checked together once all are set, and a refused one sets
    # back every value it set, none stays half changed (the layout and the rate set before
    # a bad expansion; the capacity before a rate no filter takes).
    error_of(r, "CONFIG", "SET", "bloomery.redisbloom-layout", "yes", "bloomery.error-rate", "1e-30",
             "bloomery.expansion", "0")
    error_of(r, "CONFIG", "SET", "bloomery.initial-size", "200", "bloomery.error-rate", "5e-324")
    assert (config(r, "error-rate"), config(r, "redisbloom-layout"), config(r, "initial-size"),
            config(r, "expansion")) == ("0.01", "no", "100", "2")


def test_values_with_printf_directives_or_nuls_are_logged_not_interpreted(tmp_path):
    """A refused value goes into the server's log line, which the redis-module crate hands
    Redis as a printf format from a C string: CONFIG SET bloomery.error-rate '%s%s...'
    crashed the server (SIGSEGV in RedisModule_Log), and a value with a NUL aborted it (the
    crate's panic). Now the line is logged as it is, and the server stays up."""
    log = tmp_path / "redis.log"
    server = Server(tmp_path, "--logfile", str(log)).start()
    try:
        client = server.client()
        for value in ["%s" * 120, "%n" * 200, "x" * 200 + "%d", "x" * 300 + "\0"]:
            message = error_of(client, "CONFIG", "SET", "bloomery.error-rate", value)
            assert "strictly between 0 and 1" in message, message
            assert client.ping() is True
        text = log.read_text(errors="replace")
        assert "got '" + "%s" * 120 in text and "x" * 200 + "%d'" in text and "x" * 300 + "\\0'" in text
    finally:
        server.stop()
    assert b"crashed" not in (tmp_path / "stderr.log").read_bytes()
    # A load argument: the module refuses to load, saying so, without a crash.
    server = Server(tmp_path, "--logfile", str(log), module_args=["ERROR_RATE", "%s%s%s%s%n%n"])
    with pytest.raises(RuntimeError, match="did not start"):
        server.start()
    server.stop()
    assert "bad load argument ERROR_RATE %s%s%s%s%n%n" in log.read_text(errors="replace")
    assert "crashed" not in log.read_text(errors="replace")


def test_defaults_loaded_take_effect_together_in_any_order(tmp_path):
    """At load, redis.conf's values and the load arguments come one at a time in Redis's
    order: they are checked together once all are in. A rate as low as 1e-30, which
    blocked sub-filters do not reach, makes RedisBloom's chain with either layout setting,
    whatever the order; one from which no filter can be made stops the module."""
    log = tmp_path / "redis.log"
    for args, module_args, layout in [
        (["--bloomery.error-rate", "1e-30"], [], "no"),
        ([], ["ERROR_RATE", "1e-30"], "no"),
        (["--bloomery.error-rate", "1e-30", "--bloomery.redisbloom-layout", "yes"], [], "yes"),
        (["--bloomery.redisbloom-layout", "yes", "--bloomery.error-rate", "1e-30"], [], "yes"),
        (["--bloomery.error-rate", "1e-30"], ["REDISBLOOM_LAYOUT", "yes"], "yes"),
    ]:
        server = Server(tmp_path, "--logfile", str(log), *args, module_args=module_args).start()
        try:
            client = server.client()
            assert (config(client, "error-rate"), config(client, "redisbloom-layout")) == ("1e-30", layout)
            assert client.execute_command("BF.ADD", "k", "x") == 1
            assert client.type("k") == b"MBbloom--"
            # A refusal's reason that Redis cuts in the reply is whole in the log.
            long = "0." + "1 " * 150
            assert "(the server log has it all)" in error_of(client, "CONFIG", "SET", "bloomery.error-rate", long)
            assert f"got '{long}'" in log.read_text()
        finally:
            server.stop()
        log.unlink()
    # A combination from which no filter can be made stops the module, saying why.
    for args, module_args in [(["--bloomery.error-rate", "5e-324"], []), ([], ["ERROR_RATE", "5e-324"])]:
        server = Server(tmp_path, "--logfile", str(log), *args, module_args=module_args)
        with pytest.raises(RuntimeError, match="did not start"):
            server.start()
        server.stop()
        assert "no filter can be made from error-rate 5e-324, initial-size 100, redisbloom-layout no" in log.read_text()
        log.unlink()


def test_load_arguments_and_the_command_line(tmp_path):
    # RedisBloom 2.6's load argument names; case does not matter.
    server = Server(tmp_path, module_args=["ERROR_RATE", "0.001", "initial_size", "500", "EXPANSION", "3"]).start()
    try:
        client = server.client()
        assert (config(client, "error-rate"), config(client, "initial-size"), config(client, "expansion")) == (
            "0.001", "500", "3")
        client.execute_command("BF.ADD", "k", "x")
        assert bf_info(client, "k")["Capacity"] == 500
        assert bf_info(client, "k")["Expansion rate"] == 3
        assert debug_lines(client, "k")[1].endswith("ratio:0.0002")
    finally:
        server.stop()
    # redis.conf or the command line, like any configuration; a load argument wins.
    server = Server(tmp_path, "--bloomery.initial-size", "700", "--bloomery.error-rate", "0.05",
                    module_args=["EXPANSION", "5"]).start()
    try:
        client = server.client()
        assert (config(client, "error-rate"), config(client, "initial-size"), config(client, "expansion")) == (
            "0.05", "700", "5")
    finally:
        server.stop()
    server = Server(tmp_path, "--bloomery.initial-size", "700", module_args=["INITIAL_SIZE", "600"]).start()
    try:
        assert config(server.client(), "initial-size") == "600"
    finally:
        server.stop()
    # RedisBloom's other load argument, for its cuckoo filters (which this module does not
    # have), is taken and ignored, with a note; a RedisBloom configuration setting it
    # stopped the server. So is the one empty argument RedisBloom's packaging passes.
    log = tmp_path / "redis.log"
    for module_args in (["CF_MAX_EXPANSIONS", "32", "ERROR_RATE", "0.02"], [""]):
        server = Server(tmp_path, "--logfile", str(log), module_args=module_args).start()
        try:
            client = server.client()
            client.execute_command("BF.ADD", "k", "x")
            assert client.execute_command("BF.EXISTS", "k", "x") == 1
            expected = "0.02" if module_args[0] else "0.01"
            assert config(client, "error-rate") == expected
        finally:
            server.stop()
    assert "CF_MAX_EXPANSIONS is for RedisBloom's cuckoo filters" in log.read_text()
    # Its value is checked as RedisBloom checks it.
    for bad in ("0", "x"):
        server = Server(tmp_path, module_args=["CF_MAX_EXPANSIONS", bad])
        with pytest.raises(RuntimeError, match="did not start"):
            server.start()
        server.stop()


def test_an_error_rate_is_read_alike_as_a_default_and_in_a_command(tmp_path):
    """Commands read a rate as RedisBloom does (C's strtod on the whole text: hex floats
    such as 0x1p-7 taken, spaces around refused); the default (CONFIG SET, redis.conf, the
    load argument ERROR_RATE) trimmed spaces and refused hex floats, so RedisBloom's load
    argument ERROR_RATE 0x1p-7 stopped the module from loading."""
    server = Server(tmp_path, module_args=["ERROR_RATE", "0x1p-7"]).start()
    try:
        client = server.client()
        assert config(client, "error-rate") == "0.0078125"
        for text in (" 0.05", "0.05 ", "0.05x"):
            error_of(client, "BF.RESERVE", "k", text, "100")
            assert "strictly between 0 and 1" in error_of(client, "CONFIG", "SET", "bloomery.error-rate", text)
        client.config_set("bloomery.error-rate", "0x1p-6")
        assert config(client, "error-rate") == "0.015625"
        client.execute_command("BF.RESERVE", "k", "0x1p-6", "100")
        client.execute_command("BF.ADD", "d", "x")
        assert debug_lines(client, "k")[1].split()[-1] == debug_lines(client, "d")[1].split()[-1]
    finally:
        server.stop()


@pytest.mark.parametrize("argument", [
    ["ERROR_RATE", "1.5"], ["ERROR_RATE", "0"], ["INITIAL_SIZE", "0"], ["EXPANSION", "0"],
    ["EXPANSION", "40000"], ["INITIAL_SIZE", "abc"],
])
def test_a_bad_load_argument_stops_the_module_from_loading(tmp_path, argument):
    server = Server(tmp_path, module_args=argument)
    with pytest.raises(RuntimeError, match="did not start"):
        server.start()
    server.stop()


def test_a_bad_command_line_value_stops_the_server(tmp_path):
    server = Server(tmp_path, "--bloomery.error-rate", "2")
    with pytest.raises(RuntimeError, match="did not start"):
        server.start()
    server.stop()


# --- INFO bloomery ---------------------------------------------------------------------


def test_info_is_exact_after_adds_growth_and_deletes(r):
    assert figures(r) == dict.fromkeys(FIGURES, 0)
    r.execute_command("BF.ADD", "a", "x")
    assert figures(r) == {**dict.fromkeys(FIGURES, 0), "filters": 1, "items": 1,
                          "bytes": bf_info(r, "a")["Size"] - 32 - 64}
    r.execute_command("BF.MADD", "a", "x", "y", "z")
    r.execute_command("BF.RESERVE", "b", "0.001", "5000")
    r.execute_command("BF.INSERT", "c", "CAPACITY", "10", "ITEMS", "1", "2", "3")
    r.execute_command("BF.RESERVE", "full", "0.01", "2", "NONSCALING")
    r.execute_command("BF.MADD", "full", "1", "2", "3")  # the third is refused
    assert_exact(r)
    assert figures(r)["items"] == 3 + 3 + 2
    # Growth: sub-filters are added and counted as they come.
    for batch in range(5):
        r.execute_command("BF.MADD", "c", *[f"grow-{batch}-{i}" for i in range(200)])
        assert_exact(r)
    assert bf_info(r, "c")["Number of filters"] >= 5
    # A new filter that refuses its only item is deleted: nothing is left counted.
    r.execute_command("BF.RESERVE", "x", "0.01", "1", "NONSCALING")
    r.execute_command("BF.ADD", "x", "1")
    with pytest.raises(redis.ResponseError):
        r.execute_command("BF.ADD", "x", "2")
    assert_exact(r)
    r.delete("a")
    assert_exact(r)
    r.unlink("b")
    assert_exact(r)
    # SYNC: where lazyfree-lazy-user-flush is on (Valkey 8's default) a plain FLUSHALL
    # frees on the background thread, as FLUSHALL ASYNC below.
    r.execute_command("FLUSHALL", "SYNC")
    assert figures(r) == dict.fromkeys(FIGURES, 0)


def test_info_counts_aging_and_counting_filters(r):
    """The aging and counting filters' writes (their own code paths) keep the totals
    exact: items as BF.CARD counts an aging filter's (a counting filter's count is an
    estimate from its counters: counted in estimated_filters, not in items), bytes back to
    0 when they go."""
    def cards():
        return r.execute_command("BF.CARD", "w")

    r.execute_command("CBF.RESERVE", "c", "0.01", "1000")
    r.execute_command("CBF.MADD", "c", *[f"i{n}" for n in range(100)])
    r.execute_command("BF.RESERVE", "w", "0.01", "1000", "WINDOW")
    r.execute_command("BF.MADD", "w", *[f"i{n}" for n in range(300)])
    totals = figures(r)
    assert totals["filters"] == 2 and totals["estimated_filters"] == 1 and totals["bytes"] > 0
    assert totals["items"] == cards() >= 290
    for n in range(50):
        r.execute_command("CBF.DEL", "c", f"i{n}")
    assert figures(r)["items"] == cards()
    # New generations: the oldest dropped, the totals follow.
    for batch in range(4):
        r.execute_command("BF.INSERT", "w", "ITEMS", *[f"j{batch}-{n}" for n in range(400)])
        r.execute_command("BF.ADD", "w", f"single-{batch}")
        r.execute_command("CBF.ADD", "c", f"single-{batch}")
        assert figures(r)["items"] == cards()
    r.delete("c", "w")
    assert figures(r) == dict.fromkeys(FIGURES, 0)


def test_info_after_lazy_frees_on_the_background_thread(r):
    # Over 4 MiB, UNLINK and FLUSHALL ASYNC free a value on Redis's lazy-free thread.
    r.execute_command("BF.RESERVE", "big1", "0.01", "4000000")
    r.execute_command("BF.RESERVE", "big2", "0.01", "4000000")
    r.execute_command("BF.ADD", "small", "x")
    assert figures(r)["bytes"] > 8 << 20
    assert_exact(r)
    r.unlink("big1")
    eventually(lambda: figures(r) == expected(r))
    r.flushall(asynchronous=True)
    eventually(lambda: figures(r) == dict.fromkeys(FIGURES, 0))


def test_info_after_expiry(r):
    r.execute_command("BF.MADD", "short", "a", "b")
    r.execute_command("BF.ADD", "long", "a")
    r.pexpire("short", 20)
    time.sleep(0.05)
    assert not r.exists("short")  # expired (lazily, if not already by the cycle)
    assert figures(r)["filters"] == 1
    assert_exact(r)


def test_info_survives_rdb_reload_for_both_types(r):
    r.execute_command("BF.MADD", "native", *range(300))
    r.config_set("bloomery.redisbloom-layout", "yes")
    r.execute_command("BF.MADD", "redisbloom", *range(300))
    r.execute_command("BF.RESERVE", "redisbloom-empty", "0.001", "1000", "EXPANSION", "4")
    assert r.type("redisbloom") == b"MBbloom--"
    r.config_set("bloomery.redisbloom-layout", "no")
    before = figures(r)
    assert before["filters"] == 3 and before["redisbloom_filters"] == 2 and before["items"] == 600
    assert_exact(r)
    r.execute_command("DEBUG", "RELOAD")
    assert figures(r) == before
    assert_exact(r)


def test_info_after_restore_and_copy_for_both_types(r):
    r.execute_command("BF.MADD", "native", *range(300))
    r.config_set("bloomery.redisbloom-layout", "yes")
    r.execute_command("BF.MADD", "redisbloom", *range(200))
    one = figures(r)
    for key in ("native", "redisbloom"):
        payload = r.dump(key)
        r.restore(f"{key}-restored", 0, payload)
        r.copy(key, f"{key}-copied")
        # RESTORE REPLACE over an existing filter: the old value is freed, the new counted.
        r.restore(key, 0, payload, replace=True)
    assert figures(r) == {name: 3 * value for name, value in one.items()}
    assert_exact(r)
    # A RESTORE of an already expired value is freed at once.
    r.restore("gone", int(time.time() * 1000) - 1000, r.dump("native"), absttl=True)
    assert not r.exists("gone")
    assert_exact(r)
    r.copy("native", "redisbloom-copied", replace=True)
    assert_exact(r)
    assert figures(r)["redisbloom_filters"] == 2


def test_info_counts_redisbloom_layout_filters_as_they_grow(r):
    r.config_set("bloomery.redisbloom-layout", "yes")
    r.execute_command("BF.RESERVE", "rb", "0.01", "100", "EXPANSION", "2")
    for batch in range(4):
        r.execute_command("BF.MADD", "rb", *[f"{batch}-{i}" for i in range(150)])
        assert_exact(r)
    assert bf_info(r, "rb")["Number of filters"] >= 3
    assert figures(r)["redisbloom_filters"] == 1
    r.delete("rb")
    assert figures(r) == dict.fromkeys(FIGURES, 0)


def test_info_counts_loads_in_progress_and_their_completion(r):
    # 1.5 * 10^7 items at 1%: about 20 MB, two BF.SCANDUMP pieces.
    r.execute_command("BF.RESERVE", "big", "0.01", "15000000")
    r.execute_command("BF.MADD", "big", *range(1000))
    pieces = dump(r, "big")
    assert len(pieces) == 2
    one = figures(r)
    (first_iterator, first), (second_iterator, second) = pieces
    r.execute_command("BF.LOADCHUNK", "copy", first_iterator, first)
    loading = {**one, "loads": 1, "bytes": one["bytes"] + len(first)}
    assert figures(r) == loading
    # A load in progress is a value like any: copied, reloaded from RDB, deleted.
    r.copy("copy", "copy2")
    assert figures(r)["loads"] == 2
    r.execute_command("DEBUG", "RELOAD")
    assert figures(r)["loads"] == 2 and figures(r)["bytes"] == one["bytes"] + 2 * len(first)
    r.delete("copy2")
    assert figures(r) == loading
    r.execute_command("BF.LOADCHUNK", "copy", second_iterator, second)
    assert figures(r) == {name: 2 * value for name, value in one.items()}
    assert_exact(r)
    # A refused piece ends the load: the key and its figures go.
    r.execute_command("BF.LOADCHUNK", "bad", first_iterator, first)
    with pytest.raises(redis.ResponseError):
        r.execute_command("BF.LOADCHUNK", "bad", second_iterator, second[:-1])
    assert not r.exists("bad")
    assert figures(r) == {name: 2 * value for name, value in one.items()}


def test_info_counts_redisbloom_loadchunk(r):
    r.config_set("bloomery.redisbloom-layout", "yes")
    r.execute_command("BF.RESERVE", "rb", "0.01", "1000")
    r.execute_command("BF.MADD", "rb", *range(500))
    for iterator, data in dump(r, "rb"):
        r.execute_command("BF.LOADCHUNK", "rb-copy", iterator, data)
        assert_exact(r)
    assert figures(r)["redisbloom_filters"] == 2 and figures(r)["items"] == 1000


def test_info_counts_shards_by_bytes_not_items(r):
    hashes = b"".join(struct.pack("<Q", (i * 0x9E3779B97F4A7C15) % (1 << 64)) for i in range(100))
    r.execute_command("BF.HASHRESERVE", "shard", 4, 7)
    r.execute_command("BF.HASHADD", "shard", 4, 7, hashes)
    r.execute_command("BF.ADD", "counted", "x")
    totals = figures(r)
    assert totals["filters"] == 2 and totals["estimated_filters"] == 1
    assert totals["items"] == 1
    assert totals["bytes"] == 4 * 64 + bf_info(r, "counted")["Size"] - 32 - 64
    r.execute_command("BF.HASHADD", "shard", 4, 7, hashes)
    assert figures(r) == totals
    # A blocked filter loaded with BF.LOADCHUNK (one piece), then written to (a copy of a
    # shard is a shard: BF.HASHADD, as BF.ADD of items is refused on shards).
    for iterator, data in dump(r, "shard"):
        r.execute_command("BF.LOADCHUNK", "loaded", iterator, data)
    assert "shard of a sharded filter" in error_of(r, "BF.ADD", "loaded", "more")
    r.execute_command("BF.HASHADD", "loaded", 4, 7, struct.pack("<Q", 12345))
    assert figures(r) == {**totals, "filters": 3, "estimated_filters": 2, "bytes": totals["bytes"] + 4 * 64}
    r.delete("shard", "loaded")
    assert figures(r)["estimated_filters"] == 0 and figures(r)["filters"] == 1


def test_info_on_a_replica_follows_the_primary(server, tmp_path):
    primary = server.client()
    (tmp_path / "replica").mkdir()
    replica_server = Server(tmp_path / "replica").start()
    try:
        replica = replica_server.client()
        replica.replicaof("127.0.0.1", server.port)
        primary.execute_command("BF.MADD", "k", *range(500))
        primary.execute_command("BF.RESERVE", "r", "0.01", "100")
        eventually(lambda: replica.info("replication")["master_link_status"] == "up"
                   and figures(replica) == figures(primary), seconds=10)
        primary.delete("k")
        eventually(lambda: figures(replica) == figures(primary), seconds=10)
        assert figures(replica)["filters"] == 1
    finally:
        replica_server.stop()


# --- ACL categories ---------------------------------------------------------------------


def version(client):
    return tuple(int(part) for part in client.info("server")["redis_version"].split(".")[:2])


def test_redis_7_0_loads_the_module_with_one_notice_and_no_acl_category(tmp_path):
    log = tmp_path / "redis.log"
    server = Server(tmp_path, "--logfile", str(log)).start()
    try:
        client = server.client()
        if version(client) >= (7, 2):
            pytest.skip("this server has ACL categories for module commands: scripts/acl-categories.sh")
        assert b"bloom" not in client.acl_cat() and "bloom" not in client.acl_cat()
        # Every command still works for a user allowed @all, and a user without @write
        # is still refused nothing by category (module commands are in no category on 7.0).
        client.acl_setuser("alice", enabled=True, nopass=True, commands=["+@all"], keys=["*"])
        alice = redis.Redis(host="127.0.0.1", port=server.port, username="alice", password="")
        assert alice.execute_command("BF.ADD", "k", "x") == 1
        notices = [line for line in log.read_text().splitlines() if "bloomery" in line and "ACL" in line]
        assert len(notices) == 1, notices
        assert "before 7.2" in notices[0]
    finally:
        server.stop()


def test_every_command_has_acl_categories():
    """The ACL table in lib.rs gives every command read or write and fast or slow (the
    module refuses to load with a name that is not one of its commands, but cannot see a
    command missing from the table: the next test compares it with what the server lists,
    the macro's command list and the commands registered directly alike)."""
    source = (ROOT / "crates/bloomery-redis/src/lib.rs").read_text()
    table = dict(re.findall(r'^\s*\("((?:bf|cbf)\.[a-z]+)", "([a-z ]+)"\),', source, re.MULTILINE))
    assert len(table) >= 22
    allowed = [{access, speed} for access in ("read", "write") for speed in ("fast", "slow")]
    for name, categories in table.items():
        words = categories.split()
        assert len(words) == 2 and set(words) in allowed, (name, words)


def test_the_module_commands_are_all_in_the_table(r):
    """What the server registered is what the table covers (COMMAND LIST FILTERBY MODULE)."""
    source = (ROOT / "crates/bloomery-redis/src/lib.rs").read_text()
    table = set(re.findall(r'^\s*\("((?:bf|cbf)\.[a-z]+)", "', source, re.MULTILINE))
    listed = {name.decode() for name in r.command_list(module="bloomery")}
    assert listed == table


def test_key_specs_give_per_key_acl_permissions_their_meaning(r, server):
    """Every command's key spec (KEY_SPECS in lib.rs): the reads that use the filter's
    data need read permission on the key (%R~), the writes write permission (%W~), and
    metadata (BF.CARD, BF.INFO) either. Without specs every key was 'RW access update', so
    a user who may only read keys could not run BF.EXISTS, nor a write-only one BF.ADD."""
    if version(r) < (7, 0):
        pytest.skip("key specs and per-key permissions came with Redis 7.0")
    source = (ROOT / "crates/bloomery-redis/src/lib.rs").read_text()
    table = dict(re.findall(r'^\s*\("((?:bf|cbf)\.[a-z]+)", "([A-Z ]+)"\),', source, re.MULTILINE))
    listed = {name.decode() for name in r.command_list(module="bloomery")}
    assert set(table) == listed
    for name, flags in table.items():
        # The key at argument 1; enough arguments for any command's arity.
        reply = r.command_getkeysandflags(name, "k", "1", "2", "3")
        assert [key for key, _ in reply] == [b"k"], (name, reply)
        got = {flag.decode().upper() for flag in reply[0][1]}
        assert got == set(flags.split()), (name, got, flags)

    r.execute_command("BF.ADD", "f", "x")
    r.execute_command("CBF.ADD", "c", "x")
    r.acl_setuser("reader", enabled=True, nopass=True, commands=["+@all"], keys=["%R~*"])
    r.acl_setuser("writer", enabled=True, nopass=True, commands=["+@all"], keys=["%W~*"])
    reader = redis.Redis(host="127.0.0.1", port=server.port, username="reader", password="")
    writer = redis.Redis(host="127.0.0.1", port=server.port, username="writer", password="")
    assert reader.execute_command("BF.EXISTS", "f", "x") == 1
    assert reader.execute_command("BF.MEXISTS", "f", "x", "y") == [1, 0]
    assert reader.execute_command("CBF.COUNT", "c", "x") == 1
    assert reader.execute_command("BF.CARD", "f") == 1
    with pytest.raises(redis.exceptions.NoPermissionError):
        reader.execute_command("BF.ADD", "f", "y")
    assert writer.execute_command("BF.ADD", "f", "y") == 1
    assert writer.execute_command("CBF.DEL", "c", "x") == 1
    assert writer.execute_command("BF.CARD", "f") == 2
    with pytest.raises(redis.exceptions.NoPermissionError):
        writer.execute_command("BF.EXISTS", "f", "y")


def test_a_kernel_the_cpu_does_not_have_is_said_in_the_log(tmp_path):
    """BLOOMERY_KERNEL in the server's environment naming no kernel of this CPU: the fastest
    runs, and the log says so (it ran without a word); the module serves as ever."""
    log = tmp_path / "redis.log"

    def bogus_kernel():
        os.environ["BLOOMERY_KERNEL"] = "no-such-kernel"

    server = Server(tmp_path, "--logfile", str(log), preexec_fn=bogus_kernel).start()
    try:
        client = server.client()
        assert client.execute_command("BF.ADD", "k", "x") == 1
        assert client.execute_command("BF.EXISTS", "k", "x") == 1
    finally:
        server.stop()
    assert "BLOOMERY_KERNEL 'no-such-kernel' names no kernel of this CPU's blocked filters; the fastest" in log.read_text()
