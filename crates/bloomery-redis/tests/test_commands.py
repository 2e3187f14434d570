"""BF.* commands against RedisBloom 2.6.28's recorded replies (shared/peers), and the
data type's persistence, on a real redis-server."""
import shutil
from pathlib import Path

import redis

from conftest import REDIS_SERVER, Server, error_of


def test_reserve_and_its_errors_match_redisbloom(r):
    assert r.execute_command("BF.RESERVE", "k1", "0.01", "1000") in (b"OK", "OK", True)
    assert error_of(r, "BF.RESERVE", "k1", "0.01", "1000") == "item exists"
    for rate in ("0", "1", "-1"):
        assert error_of(r, "BF.RESERVE", "k2", rate, "1000") == "(0 < error rate range < 1) "
    assert error_of(r, "BF.RESERVE", "k2", "abc", "1000") == "bad error rate"
    # Out of a double's range, as Redis's parser (strtod) finds it: refused as RedisBloom
    # refuses it, not read as 0 or infinity and refused for its range.
    for rate in ("1e-400", "1e400", "-1e400"):
        assert error_of(r, "BF.RESERVE", "k2", rate, "1000") == "bad error rate"
    # A value is a value: EXPANSION's "window" is no aging filter's WINDOW.
    assert error_of(r, "BF.RESERVE", "k2", "0.01", "100", "EXPANSION", "window") == "bad expansion"
    for capacity in ("0", "-5"):
        assert error_of(r, "BF.RESERVE", "k2", "0.01", capacity) == "(capacity should be larger than 0)"
    assert error_of(r, "BF.RESERVE", "k2", "0.01", "abc") == "bad capacity"
    assert error_of(r, "BF.RESERVE", "k2", "0.01", "100", "EXPANSION", "0") == "expansion should be greater or equal to 1"
    assert error_of(r, "BF.RESERVE", "k2", "0.01", "100", "EXPANSION", "abc") == "bad expansion"
    assert error_of(r, "BF.RESERVE", "k2", "0.01", "100", "NONSCALING", "EXPANSION", "2") == "Nonscaling filters cannot expand"
    assert error_of(r, "BF.RESERVE", "k2", "0.01") == "wrong number of arguments for 'bf.reserve' command"
    # Unknown words are ignored, as RedisBloom does.
    r.execute_command("BF.RESERVE", "k2", "0.01", "100", "FOO")
    assert r.execute_command("BF.INFO", "k2", "CAPACITY")[0] == 100


def test_add_exists_and_card(r):
    assert error_of(r, "BF.ADD", "k1") == "wrong number of arguments for 'bf.add' command"
    assert r.execute_command("BF.ADD", "k1", "a") == 1
    assert r.execute_command("BF.ADD", "k1", "a") == 0
    assert r.execute_command("BF.MADD", "k1", "a", "b", "c") == [0, 1, 1]
    assert r.execute_command("BF.MEXISTS", "k1", "a", "b", "z") == [1, 1, 0]
    assert r.execute_command("BF.EXISTS", "k1", "c") == 1
    assert r.execute_command("BF.EXISTS", "k1", "zz") == 0
    assert r.execute_command("BF.CARD", "k1") == 3
    assert r.execute_command("BF.EXISTS", "missing", "a") == 0
    assert r.execute_command("BF.MEXISTS", "missing", "a", "b") == [0, 0]
    assert r.execute_command("BF.CARD", "missing") == 0


def test_other_types_get_wrongtype(r):
    r.set("str", "v")
    wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value"
    assert error_of(r, "BF.ADD", "str", "a") == wrongtype
    assert error_of(r, "BF.CARD", "str") == wrongtype
    assert error_of(r, "BF.RESERVE", "str", "0.01", "100") == wrongtype
    # RedisBloom answers 0 here; bloomery answers WRONGTYPE, as BF.CARD does.
    assert error_of(r, "BF.EXISTS", "str", "a") == wrongtype


def test_defaults_match_redisbloom(r):
    assert r.execute_command("BF.ADD", "auto", "x") == 1
    info = r.execute_command("BF.INFO", "auto")
    fields = dict(zip(info[0::2], info[1::2]))
    assert fields[b"Capacity"] == 100
    assert fields[b"Number of filters"] == 1
    assert fields[b"Number of items inserted"] == 1
    assert fields[b"Expansion rate"] == 2
    assert fields[b"Size"] > 0


def test_info_fields_and_errors(r):
    r.execute_command("BF.RESERVE", "k1", "0.01", "1000")
    r.execute_command("BF.MADD", "k1", "a", "b", "c")
    assert r.execute_command("BF.INFO", "k1", "CAPACITY")[0] == 1000
    assert r.execute_command("BF.INFO", "k1", "FILTERS")[0] == 1
    assert r.execute_command("BF.INFO", "k1", "ITEMS")[0] == 3
    assert r.execute_command("BF.INFO", "k1", "EXPANSION")[0] == 2
    assert r.execute_command("BF.INFO", "k1", "SIZE")[0] > 0
    assert error_of(r, "BF.INFO", "k1", "FOO") == "Invalid information value"
    assert error_of(r, "BF.INFO", "missing") == "not found"


def test_insert_options_and_errors(r):
    assert error_of(r, "BF.INSERT", "missing", "NOCREATE", "ITEMS", "a") == "not found"
    assert error_of(r, "BF.INSERT", "k3", "ITEMS") == "wrong number of arguments for 'bf.insert' command"
    assert error_of(r, "BF.INSERT", "k3", "CAPACITY", "0", "ITEMS", "a") == "Bad argument received"
    assert error_of(r, "BF.INSERT", "k3", "ERROR", "2", "ITEMS", "a") == "Bad argument received"
    assert error_of(r, "BF.INSERT", "k3", "FOO", "ITEMS", "a") == "Unknown argument received"
    # Values' ranges are checked after every word is read, as RedisBloom 2.6.28's BF.INSERT
    # does: an unknown word, or no item, after a bad value is said as such.
    assert error_of(r, "BF.INSERT", "k3", "CAPACITY", "0", "FOO", "ITEMS", "a") == "Unknown argument received"
    assert error_of(r, "BF.INSERT", "k3", "ERROR", "2", "ITEMS") == "wrong number of arguments for 'bf.insert' command"
    assert error_of(r, "BF.INSERT", "k3", "EXPANSION", "0", "XYZ", "ITEMS", "a") == "Unknown argument received"
    # Options go by their first letters, as in RedisBloom 2.6.28 (which answered these
    # two so): `NOSUCH` is NONSCALING, so the bad expansion is what is said.
    assert error_of(r, "BF.INSERT", "k3", "EXPANSION", "0", "NOSUCH", "ITEMS", "a") == "Bad argument received"
    assert error_of(r, "BF.INSERT", "k3", "", "ITEMS", "a") == "Unknown argument received"
    assert error_of(r, "BF.INSERT", "k3", "NOC", "I", "a") == "not found"
    assert r.execute_command("BF.INSERT", "short", "cap", "5", "err", "0.1", "NONS", "i", "a") == [1]
    assert r.execute_command("BF.INFO", "short", "CAPACITY")[0] == 5
    replies = r.execute_command("BF.INSERT", "short", "I", *"bcdefghij")
    assert isinstance(replies[-1], redis.ResponseError) and "full" in str(replies[-1])
    assert error_of(r, "BF.INSERT", "k3", "EXPANSION", "40000", "ITEMS", "a") == "expansion above the module's limit of 32768"
    assert r.exists("k3") == 0
    assert r.execute_command("BF.INSERT", "k3", "CAPACITY", "50", "ERROR", "0.001", "EXPANSION", "4", "ITEMS", "a", "b", "c") == [1, 1, 1]
    assert r.execute_command("BF.INFO", "k3", "CAPACITY")[0] == 50
    assert r.execute_command("BF.INFO", "k3", "EXPANSION")[0] == 4
    assert r.execute_command("BF.INSERT", "k4", "NONSCALING", "CAPACITY", "2", "ITEMS", "x") == [1]
    assert r.execute_command("BF.INFO", "k4", "EXPANSION")[0] is None


def test_a_full_nonscaling_filter_says_so(r):
    r.execute_command("BF.RESERVE", "ns", "0.01", "2", "NONSCALING")
    replies = r.execute_command("BF.MADD", "ns", "a", "b", "c", "d")
    assert replies[:2] == [1, 1]
    assert isinstance(replies[2], redis.ResponseError) and str(replies[2]) == "non scaling filter is full"
    assert len(replies) == 3
    assert error_of(r, "BF.ADD", "ns", "e") == "non scaling filter is full"
    assert r.execute_command("BF.INFO", "ns", "EXPANSION")[0] is None


def test_a_scaling_filter_grows_and_keeps_every_item(r):
    r.execute_command("BF.RESERVE", "grow", "0.01", "100")
    items = [f"item-{i}" for i in range(5000)]
    r.execute_command("BF.MADD", "grow", *items)
    assert r.execute_command("BF.INFO", "grow", "FILTERS")[0] >= 5
    assert all(r.execute_command("BF.MEXISTS", "grow", *items))
    fresh = [f"fresh-{i}" for i in range(20000)]
    false_positives = sum(r.execute_command("BF.MEXISTS", "grow", *fresh))
    assert false_positives / len(fresh) <= 0.01


def test_huge_requests_are_refused_and_the_server_lives(r):
    # 10^11 items at 1% would be about 130 GB and 10^9 about 1.3 GB (blocked sub-filters),
    # both over the default cap of 1 GiB per key; 10^18 at 1% cannot be sized at all.
    assert "bloomery.max-filter-memory" in error_of(r, "BF.RESERVE", "big", "0.01", "100000000000")
    assert "cannot size" in error_of(r, "BF.RESERVE", "big", "0.01", "1000000000000000000")
    message = error_of(r, "BF.RESERVE", "big", "0.01", "1000000000")
    assert "limit" in message and "bloomery.max-filter-memory" in message
    # Blocked sub-filters reach no rate as low as 1e-300; with no layout named, such a rate
    # makes RedisBloom's chain, here 180 GB, over the cap.
    assert "cannot size" in error_of(r, "BF.RESERVE", "tiny", "1e-300", "1000000000", "LAYOUT", "bloomery")
    assert "bloomery.max-filter-memory" in error_of(r, "BF.RESERVE", "tiny", "1e-300", "1000000000")
    assert r.ping()
    assert r.exists("big") == 0


def test_memory_usage_reports_the_filter(r):
    r.execute_command("BF.RESERVE", "m", "0.001", "100000")
    usage = r.memory_usage("m")
    assert usage >= r.execute_command("BF.INFO", "m", "SIZE")[0]


def test_data_survives_a_restart_from_rdb(server):
    client = server.client()
    client.execute_command("BF.RESERVE", "kept", "0.01", "100", "EXPANSION", "3")
    items = [f"persisted-{i}" for i in range(3000)]
    client.execute_command("BF.MADD", "kept", *items)
    info_before = client.execute_command("BF.INFO", "kept")
    client.save()
    server.stop()
    server.start()
    client = server.client()
    assert client.execute_command("BF.INFO", "kept") == info_before
    assert all(client.execute_command("BF.MEXISTS", "kept", *items))
    assert client.execute_command("BF.ADD", "kept", "after-restart") == 1


def test_an_rdb_from_the_earlier_one_string_encoding_still_loads(tmp_path):
    shutil.copy(Path(__file__).parent / "data" / "encoding-v0.rdb", tmp_path / "dump.rdb")
    server = Server(tmp_path).start()
    try:
        client = server.client()
        # Size as RedisBloom counts it: 1152 bytes of bits, 32 for the filter, 64 a sub-filter.
        expected = [b"Capacity", 700, b"Size", 1152 + 32 + 3 * 64, b"Number of filters", 3,
                    b"Number of items inserted", 497, b"Expansion rate", 2]
        assert client.execute_command("BF.INFO", "v0") == expected
        items = [f"v0-item-{i}" for i in range(500)]
        assert all(client.execute_command("BF.MEXISTS", "v0", *items))
        client.save()  # now written in the current encoding
        server.stop()
        server.start()
        client = server.client()
        assert client.execute_command("BF.INFO", "v0") == expected
        assert all(client.execute_command("BF.MEXISTS", "v0", *items))
    finally:
        server.stop()


def test_load_arguments_override_the_defaults(tmp_path):
    server = Server(tmp_path, module_args=["ERROR_RATE", "0.001", "INITIAL_SIZE", "1000", "EXPANSION", "4"]).start()
    try:
        client = server.client()
        client.execute_command("BF.ADD", "auto", "x")
        assert client.execute_command("BF.INFO", "auto", "CAPACITY")[0] == 1000
        assert client.execute_command("BF.INFO", "auto", "EXPANSION")[0] == 4
    finally:
        server.stop()


def test_bad_load_arguments_refuse_to_load(tmp_path):
    import subprocess
    from conftest import MODULE, free_port

    result = subprocess.run(
        [REDIS_SERVER, "--port", str(free_port()), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path),
         "--loadmodule", str(MODULE), "ERROR_RATE", "2"],
        capture_output=True, timeout=20,
    )
    assert result.returncode != 0
