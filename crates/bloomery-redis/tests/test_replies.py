"""Reply shapes clients depend on, as RedisBloom 2.6.28 gives them (shared/peers): BF.INFO's
one-field arrays and RESP3 maps, RESP3 booleans, `Size` as RedisBloom counts it, BF.DEBUG,
and the option parse errors. redis-py with protocol=3 is the RESP3 client.

RedisBloom's own figures (sizes, hash counts) hold for filters in RedisBloom's layout, so
the tests that compare them run a server with `REDISBLOOM_LAYOUT yes` (the `rb` fixtures);
the default layout (blocked sub-filters) has the same shapes and its own sizes."""
import socket

import pytest
import redis

from conftest import Server, dump, error_of


@pytest.fixture
def r3(server):
    return redis.Redis(host="127.0.0.1", port=server.port, protocol=3, socket_timeout=10)


@pytest.fixture
def rb_server(tmp_path):
    """A server whose new filters are RedisBloom's chain (`REDISBLOOM_LAYOUT yes`)."""
    instance = Server(tmp_path, module_args=["REDISBLOOM_LAYOUT", "yes"]).start()
    yield instance
    instance.stop()


@pytest.fixture
def rb(rb_server):
    return rb_server.client()


@pytest.fixture
def rb3(rb_server):
    return redis.Redis(host="127.0.0.1", port=rb_server.port, protocol=3, socket_timeout=10)


def test_default_layout_reports_blocked_sub_filters(r):
    """New filters are blocked sub-filters by default: Size is their bits plus RedisBloom's
    32 + 64 per sub-filter, BF.DEBUG gives 8 bits an item (one per lane of a block)."""
    r.execute_command("BF.RESERVE", "k1", "0.01", "1000")
    # 1000 items at 0.5% (the first sub-filter's half of 1%): 22 blocks of 64 bytes.
    blocks = r.execute_command("BF.DEBUG", "k1")[1].split()[0]
    assert blocks.startswith(b"bytes:") and int(blocks[6:]) % 64 == 0
    assert r.execute_command("BF.INFO", "k1", "SIZE") == [int(blocks[6:]) + 32 + 64]
    r.execute_command("BF.MADD", "k1", *[f"i{i}" for i in range(3000)])
    lines = r.execute_command("BF.DEBUG", "k1")
    assert len(lines) == 1 + r.execute_command("BF.INFO", "k1", "FILTERS")[0] and len(lines) >= 3
    assert all(b" hashes:8 " in line for line in lines[1:])
    assert all(r.execute_command("BF.MEXISTS", "k1", *[f"i{i}" for i in range(3000)]))


def test_info_one_field_is_a_one_element_array_in_resp2(rb):
    r = rb
    r.execute_command("BF.RESERVE", "bf", "0.001", "100")
    assert r.execute_command("BF.INFO", "bf", "CAPACITY") == [100]
    assert r.execute_command("BF.INFO", "bf", "SIZE") == [296]
    assert r.execute_command("BF.INFO", "bf", "FILTERS") == [1]
    assert r.execute_command("BF.INFO", "bf", "ITEMS") == [0]
    assert r.execute_command("BF.INFO", "bf", "EXPANSION") == [2]
    assert r.execute_command("BF.INFO", "bf") == [b"Capacity", 100, b"Size", 296, b"Number of filters", 1,
                                                  b"Number of items inserted", 0, b"Expansion rate", 2]
    assert error_of(r, "BF.INFO", "bf", "capacity", "size").startswith("wrong number of arguments")


def test_size_counts_as_redisbloom_does(rb):
    r = rb
    # The figures RedisBloom 2.6.28 answered (shared/peers/redisbloom-2.6.28.md).
    r.execute_command("BF.RESERVE", "k1", "0.01", "1000")
    r.execute_command("BF.ADD", "auto", "x")
    r.execute_command("BF.INSERT", "k3", "CAPACITY", "50", "ERROR", "0.001", "EXPANSION", "4", "ITEMS", "a")
    r.execute_command("BF.RESERVE", "ns", "0.01", "2", "NONSCALING")
    r.execute_command("BF.RESERVE", "nonscale", "0.001", "1000", "NONSCALING")
    r.execute_command("BF.RESERVE", "scale", "0.001", "1000")
    sizes = {key: r.execute_command("BF.INFO", key, "SIZE")[0] for key in ("k1", "auto", "k3", "ns")}
    assert sizes == {"k1": 1480, "auto": 240, "k3": 200, "ns": 104}
    # A non-scaling filter is sized at the full rate, so it is smaller than a scaling one.
    assert r.execute_command("BF.INFO", "nonscale", "SIZE")[0] < r.execute_command("BF.INFO", "scale", "SIZE")[0]
    assert r.execute_command("BF.INFO", "ns") == [b"Capacity", 2, b"Size", 104, b"Number of filters", 1,
                                                  b"Number of items inserted", 0, b"Expansion rate", None]


def test_resp3_answers_booleans_and_maps(rb3):
    r3 = rb3
    assert r3.execute_command("BF.ADD", "test", "item") is True
    assert r3.execute_command("BF.ADD", "test", "item") is False
    assert r3.execute_command("BF.CARD", "test") == 1
    assert r3.execute_command("BF.EXISTS", "test", "item") is True
    assert r3.execute_command("BF.EXISTS", "test", "other") is False
    assert r3.execute_command("BF.EXISTS", "missing", "item") is False
    assert r3.execute_command("BF.INFO", "test") == {b"Capacity": 100, b"Size": 240, b"Number of filters": 1,
                                                     b"Number of items inserted": 1, b"Expansion rate": 2}
    assert r3.execute_command("BF.INFO", "test", "ITEMS") == {b"Number of items inserted": 1}
    assert r3.execute_command("BF.INSERT", "test", "ITEMS", "item2", "item3", "item2") == [True, True, False]
    assert r3.execute_command("BF.MADD", "test", "item4", "item5", "item2") == [True, True, False]
    assert r3.execute_command("BF.MEXISTS", "test", "item4", "item5", "item6") == [True, True, False]
    r3.execute_command("BF.RESERVE", "ns", "0.01", "2", "NONSCALING")
    assert r3.execute_command("BF.INFO", "ns", "EXPANSION") == {b"Expansion rate": None}
    replies = r3.execute_command("BF.MADD", "ns", "a", "b", "c")
    assert replies[:2] == [True, True] and str(replies[2]) == "non scaling filter is full"


def test_redis_py_bf_helpers_work_in_both_protocols(rb, rb3):
    r, r3 = rb, rb3
    for client in (r, r3):
        client.flushall()
        bf = client.bf()
        assert bf.create("bloom", 0.01, 1000)
        assert bf.add("bloom", "foo") in (1, True)
        assert bf.madd("bloom", "foo", "bar") in ([0, 1], [False, True])
        info = bf.info("bloom")
        if client is r:  # redis-py parses RESP2's flat array into an object
            assert (info.capacity, info.size, info.filterNum, info.insertedNum, info.expansionRate) == \
                (1000, 1480, 1, 2, 2)
        else:  # and hands RESP3's map over as a dict
            assert info == {b"Capacity": 1000, b"Size": 1480, b"Number of filters": 1,
                            b"Number of items inserted": 2, b"Expansion rate": 2}
        assert bf.card("bloom") == 2


def test_debug_describes_each_sub_filter(rb):
    r = rb
    r.execute_command("BF.INSERT", "f", "ERROR", "0.001", "CAPACITY", "50000", "EXPANSION", "2", "ITEMS", "foo")
    assert r.execute_command("BF.DEBUG", "f") == [
        b"size:1", b"bytes:98880 bits:791040 hashes:11 hashwidth:64 capacity:50000 size:1 ratio:0.0005"]
    r.execute_command("BF.RESERVE", "g", "0.01", "10")
    r.execute_command("BF.MADD", "g", *[f"g{i}" for i in range(40)])
    lines = r.execute_command("BF.DEBUG", "g")
    assert lines[1] == b"bytes:16 bits:128 hashes:8 hashwidth:64 capacity:10 size:10 ratio:0.005"
    assert lines[2] == b"bytes:32 bits:256 hashes:9 hashwidth:64 capacity:20 size:20 ratio:0.0025"
    assert lines[0] == b"size:%d" % r.execute_command("BF.CARD", "g")
    r.execute_command("BF.RESERVE", "h", "0.0001", "10")
    r.execute_command("BF.MADD", "h", *[f"h{i}" for i in range(40)])
    assert r.execute_command("BF.DEBUG", "h")[2].endswith(b"ratio:2.5e-05")
    assert error_of(r, "BF.DEBUG", "missing") == "not found"
    assert error_of(r, "BF.DEBUG", "f", "extra").startswith("wrong number of arguments")
    r.set("str", "v")
    assert error_of(r, "BF.DEBUG", "str").startswith("WRONGTYPE")


def test_option_parse_errors_are_redisbloom_s(r):
    assert error_of(r, "BF.INSERT", "k", "ERROR", "big", "ITEMS", "a") == "Bad error rate"
    assert error_of(r, "BF.INSERT", "k", "ERROR", "1e400", "ITEMS", "a") == "Bad error rate"
    # The module's own limit, said as BF.RESERVE says it ("Bad argument received" before).
    assert error_of(r, "BF.INSERT", "k", "EXPANSION", "32769", "ITEMS", "a") == \
        "expansion above the module's limit of 32768"
    for below in ("-1", "-9223372036854775808"):
        assert error_of(r, "BF.INSERT", "k", "EXPANSION", below, "ITEMS", "a") == "Bad argument received"
    assert error_of(r, "BF.INSERT", "k", "CAPACITY", "0.3", "ITEMS", "a") == "Bad capacity"
    assert error_of(r, "BF.INSERT", "k", "EXPANSION", "big", "ITEMS", "a") == "Bad expansion"
    assert error_of(r, "BF.INSERT", "k", "EXPANSION", "0", "ITEMS", "a") == "Bad argument received"
    assert error_of(r, "BF.INSERT", "k", "ERROR").startswith("wrong number of arguments")
    assert error_of(r, "BF.INSERT", "k", "CAPACITY").startswith("wrong number of arguments")
    assert error_of(r, "BF.RESERVE", "k", "0.01", "4", "EXPANSION") == "no expansion"
    assert error_of(r, "BF.RESERVE", "k", "0.01", "4", "NONSCALING", "EXPANSION", "x") == \
        "Nonscaling filters cannot expand"
    assert error_of(r, "BF.RESERVE", "k", "0.01", "4", "EXPANSION", "2", "NONSCALING", "x") \
        .startswith("wrong number of arguments")
    assert r.exists("k") == 0


def test_redisbloom_errors_config_gives_loadchunk_the_bare_text(r, tmp_path):
    r.execute_command("BF.RESERVE", "bf", "0.01", "10")
    assert error_of(r, "BF.LOADCHUNK", "bf", "1", "x") == \
        "received bad data: the key holds a filter; DEL it before loading another"
    assert r.config_get("bloomery.redisbloom-errors") == {"bloomery.redisbloom-errors": "no"}
    r.config_set("bloomery.redisbloom-errors", "yes")
    assert error_of(r, "BF.LOADCHUNK", "bf", "1", "x") == "received bad data"
    assert error_of(r, "BF.LOADCHUNK", "new", "1", "garbage") == "received bad data"
    assert error_of(r, "BF.LOADCHUNK", "new", "7", "garbage") == "not found"  # RedisBloom's
    r.set("str", "v")
    assert error_of(r, "BF.LOADCHUNK", "str", "1", "x").startswith("WRONGTYPE")
    r.config_set("bloomery.redisbloom-errors", "no")
    assert error_of(r, "BF.LOADCHUNK", "new", "7", "garbage").startswith("received bad data: ")


def test_redisbloom_errors_load_argument(tmp_path):
    from conftest import Server
    server = Server(tmp_path, module_args=["REDISBLOOM_ERRORS", "yes"]).start()
    try:
        client = server.client()
        assert client.config_get("bloomery.redisbloom-errors") == {"bloomery.redisbloom-errors": "yes"}
        assert error_of(client, "BF.LOADCHUNK", "new", "1", "garbage") == "received bad data"
        assert error_of(client, "BF.LOADCHUNK", "new", "7", "garbage") == "not found"
    finally:
        server.stop()


def test_redisbloom_layout_grows_and_answers_as_redisbloom(tmp_path):
    """`bloomery.redisbloom-layout yes`: new filters are RedisBloom's chain bit for bit, so
    they meet RedisBloom's false positives (BF.DEBUG as RedisBloom 2.6.28 answers it, its
    flow tests test_expansion and test_debug), and persist like any other filter."""
    server = Server(tmp_path, module_args=["REDISBLOOM_LAYOUT", "yes"]).start()
    try:
        client = server.client()
        assert client.config_get("bloomery.redisbloom-layout") == {"bloomery.redisbloom-layout": "yes"}
        for expansion, filters in [(1, 23), (2, 5), (4, 4)]:
            client.execute_command("BF.RESERVE", f"exp{expansion}", "0.01", "4", "EXPANSION", expansion)
            for i in range(100):
                client.execute_command("BF.ADD", f"exp{expansion}", str(i))
            assert client.execute_command("BF.INFO", f"exp{expansion}", "FILTERS") == [filters]
        client.execute_command("BF.RESERVE", "bf", "0.01", "10")
        for i in range(100):
            client.execute_command("BF.ADD", "bf", str(i))
        assert client.execute_command("BF.DEBUG", "bf") == [
            b"size:99",
            b"bytes:16 bits:128 hashes:8 hashwidth:64 capacity:10 size:10 ratio:0.005",
            b"bytes:32 bits:256 hashes:9 hashwidth:64 capacity:20 size:20 ratio:0.0025",
            b"bytes:72 bits:576 hashes:10 hashwidth:64 capacity:40 size:40 ratio:0.00125",
            b"bytes:160 bits:1280 hashes:11 hashwidth:64 capacity:80 size:29 ratio:0.000625"]
        # The exp1 chain's second link: 9 hashes here as in RedisBloom (the scalable
        # filter's Guava sizing gives 8).
        assert client.execute_command("BF.DEBUG", "exp1")[2].startswith(b"bytes:8 bits:64 hashes:9 ")
        client.execute_command("BF.RESERVE", "ns", "0.01", "3", "NONSCALING")
        assert client.execute_command("BF.MADD", "ns", "a", "b", "c") == [1, 1, 1]
        assert error_of(client, "BF.ADD", "ns", "d") == "non scaling filter is full"
        assert client.execute_command("BF.INFO", "ns", "SIZE") == [104]
        # SCANDUMP/LOADCHUNK, RDB and a restart keep the chain as it was.
        debug = client.execute_command("BF.DEBUG", "bf")
        iterator, chunks = 0, []
        while True:
            iterator, data = client.execute_command("BF.SCANDUMP", "bf", iterator)
            if iterator == 0:
                break
            chunks.append((iterator, data))
        for iterator, data in chunks:
            client.execute_command("BF.LOADCHUNK", "copy", iterator, data)
        assert client.execute_command("BF.DEBUG", "copy") == debug
        client.save()
        server.stop()
        server.start()
        client = server.client()
        assert client.execute_command("BF.DEBUG", "bf") == debug
        assert all(client.execute_command("BF.MEXISTS", "bf", *[str(i) for i in range(100)]))
        # Filters of both layouts live side by side: turning it off affects new ones only.
        client.config_set("bloomery.redisbloom-layout", "no")
        client.execute_command("BF.RESERVE", "scalable", "0.01", "4", "EXPANSION", "1")
        for i in range(100):
            client.execute_command("BF.ADD", "scalable", str(i))
        assert client.execute_command("BF.DEBUG", "scalable")[1].split()[2] == b"hashes:8"
        assert client.execute_command("BF.INFO", "exp1", "FILTERS") == [23]
    finally:
        server.stop()


# RedisBloom 2.6.28's replies (loaded into redis-server 7.0.15) after `SET str v`,
# `BF.RESERVE k 0.01 100` and `BF.ADD k a`, as the bytes on the wire: RedisBloom checks
# BF.SCANDUMP's key before its iterator and BF.LOADCHUNK's iterator before its key, reads
# integers as Redis does (no `+`, no leading zero), dumps nothing past either end, and
# places a RedisBloom piece only where a link is.
REDISBLOOM_ORDER = [
    (("BF.SCANDUMP", "missing", "abc"), b"-ERR not found"),
    (("BF.SCANDUMP", "str", "abc"), b"-WRONGTYPE Operation against a key holding the wrong kind of value"),
    (("BF.SCANDUMP", "k", "nan"), b"-Second argument must be numeric"),
    (("BF.SCANDUMP", "k", "+1"), b"-Second argument must be numeric"),
    (("BF.SCANDUMP", "k", "01"), b"-Second argument must be numeric"),
    (("BF.SCANDUMP", "k", "-0"), b"-Second argument must be numeric"),
    (("BF.SCANDUMP", "k", "9223372036854775808"), b"-Second argument must be numeric"),
    (("BF.SCANDUMP", "k", "-1"), b"*2\r\n:0\r\n$0\r\n"),
    (("BF.SCANDUMP", "k", "99999"), b"*2\r\n:0\r\n$0\r\n"),
    (("BF.LOADCHUNK", "missing", "7", "x"), b"-ERR not found"),
    (("BF.LOADCHUNK", "missing", "-1", "x"), b"-ERR not found"),
    (("BF.LOADCHUNK", "missing", "abc", "x"), b"-ERR Second argument must be numeric"),
    (("BF.LOADCHUNK", "str", "-1", "x"), b"-WRONGTYPE Operation against a key holding the wrong kind of value"),
    (("BF.LOADCHUNK", "str", "abc", "x"), b"-ERR Second argument must be numeric"),
    (("BF.LOADCHUNK", "k", "+2", "x"), b"-ERR Second argument must be numeric"),
    (("BF.LOADCHUNK", "k", "1", "x"), b"-ERR invalid offset - no link found"),
    (("BF.LOADCHUNK", "k", "99999", "x"), b"-ERR invalid offset - no link found"),
    (("BF.LOADCHUNK", "k", "-1", "x"), b"-ERR received bad data"),
    (("BF.LOADCHUNK", "k", "0", "x"), b"-ERR received bad data"),
    (("BF.LOADCHUNK", "k", "150", "x" * 140), b"-ERR invalid chunk - Too big for current filter"),
    (("BF.LOADCHUNK", "k", "2", "x"), b"+OK"),
    (("BF.RESERVE", "p", "0.01", "+5"), b"-ERR bad capacity"),
    (("BF.RESERVE", "p", "0.01", "05"), b"-ERR bad capacity"),
    (("BF.RESERVE", "p", "0.01", "5", "EXPANSION", "+2"), b"-ERR bad expansion"),
    (("BF.RESERVE", "p", "0.01", "5", "EXPANSION", "-0"), b"-ERR bad expansion"),
    (("BF.INSERT", "p", "CAPACITY", "+5", "ITEMS", "a"), b"-Bad capacity"),
    (("BF.INSERT", "p", "EXPANSION", "+5", "ITEMS", "a"), b"-Bad expansion"),
]


def raw_reply(port, *command) -> bytes:
    """The reply's bytes as sent (an error's code, such as `ERR`, included), less the
    final CRLF."""
    words = [word.encode() if isinstance(word, str) else word for word in command]
    request = b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(word), word) for word in words)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request + b"PING\r\n")
        received = b""
        while not received.endswith(b"+PONG\r\n"):
            received += connection.recv(65536)
    return received[:-len(b"\r\n+PONG\r\n")]


def test_scandump_loadchunk_and_integers_answer_as_redisbloom_does(tmp_path):
    """With `REDISBLOOM_ERRORS yes` (and RedisBloom's layout), every reply of
    `REDISBLOOM_ORDER` is RedisBloom's, byte for byte."""
    server = Server(tmp_path, module_args=["REDISBLOOM_LAYOUT", "yes", "REDISBLOOM_ERRORS", "yes"]).start()
    try:
        client = server.client()
        client.set("str", "v")
        client.execute_command("BF.RESERVE", "k", "0.01", "100")
        client.execute_command("BF.ADD", "k", "a")
        answers = [(command, raw_reply(server.port, *command)) for command, _ in REDISBLOOM_ORDER]
        assert answers == REDISBLOOM_ORDER
        assert not client.exists("p")
    finally:
        server.stop()


def test_scandump_and_loadchunk_check_in_redisbloom_s_order_by_default(r):
    """Without `bloomery.redisbloom-errors`, bloomery's filters and its own explanations,
    but RedisBloom's order: the key's type before the iterator's value, and BF.SCANDUMP's
    replies (they are not BF.LOADCHUNK's refusals that the option is about)."""
    r.set("str", "v")
    r.execute_command("BF.RESERVE", "k", "0.01", "100")
    assert error_of(r, "BF.SCANDUMP", "missing", "abc") == "not found"
    assert error_of(r, "BF.SCANDUMP", "str", "abc").startswith("WRONGTYPE")
    assert error_of(r, "BF.SCANDUMP", "k", "+1") == "Second argument must be numeric"
    assert r.execute_command("BF.SCANDUMP", "k", "-1") == [0, b""]
    assert error_of(r, "BF.LOADCHUNK", "str", "-1", "x").startswith("WRONGTYPE")
    assert error_of(r, "BF.LOADCHUNK", "missing", "-1", "x") == \
        "received bad data: no load in progress at the key (the first piece has iterator 1)"
    assert error_of(r, "BF.LOADCHUNK", "k", "+1", "x") == "received bad data: the iterator is not an integer"
    assert error_of(r, "BF.RESERVE", "p", "0.01", "+5") == "bad capacity"
    # A dump still loads piece by piece.
    for iterator, data in dump(r, "k"):
        r.execute_command("BF.LOADCHUNK", "copy", iterator, data)
    assert r.execute_command("BF.INFO", "copy") == r.execute_command("BF.INFO", "k")
