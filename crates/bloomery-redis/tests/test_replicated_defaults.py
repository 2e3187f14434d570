"""Filters that commands create from the defaults (bloomery.error-rate, -initial-size,
-expansion, -redisbloom-layout) are replicated and written to the AOF as a fully specified
BF.RESERVE (with bloomery's LAYOUT extension), so a replica or an AOF replay whose defaults
differ from the primary's (other load arguments, or a CONFIG SET that a restart undoes)
builds the same filter, bit for bit: BF.ADD, BF.MADD, BF.INSERT (with and without
CAPACITY, ERROR, EXPANSION, NONSCALING) and BF.RESERVE creating keys. Also the LAYOUT
extension itself, and that RedisBloom's BF.RESERVE replies are kept without it."""
import pytest
import redis

from conftest import Server, error_of, wait_until_synced
from type_helpers import digest, restart, start_replica

# The primary's defaults, set by CONFIG SET, all unlike the load arguments of the servers
# they are compared with (a replica's below, or the AOF test's restart: RedisBloom's 0.01,
# 100, 2 and the blocked layout).
PRIMARY_DEFAULTS = {"error-rate": "0.001", "initial-size": "1000", "expansion": "4"}
REPLICA_LOAD_ARGUMENTS = ["ERROR_RATE", "0.2", "INITIAL_SIZE", "7", "EXPANSION", "3"]


def items(prefix, count):
    return [f"{prefix}-{i}" for i in range(count)]


def create_keys(client, layout: str) -> dict:
    """Keys made by every creating command under the primary's current defaults, with
    `layout` ("yes"/"no") as bloomery.redisbloom-layout; then grown past their first
    sub-filter where they scale. Returns key -> the items added."""
    client.config_set("bloomery.redisbloom-layout", layout)
    held = {}

    def add(key, *command_and_items, at):
        command = list(command_and_items)
        client.execute_command(*command)
        held.setdefault(key, []).extend(command[at:])

    add(f"add-{layout}", "BF.ADD", f"add-{layout}", "first", at=2)
    add(f"madd-{layout}", "BF.MADD", f"madd-{layout}", *items("m", 3), at=2)
    add(f"insert-{layout}", "BF.INSERT", f"insert-{layout}", "ITEMS", *items("i", 3), at=3)
    # More items than the replica's (or the restarted server's) default capacity, fewer
    # than the primary's: a replay from its own defaults refuses most of them.
    add(f"nonscaling-{layout}", "BF.INSERT", f"nonscaling-{layout}", "NONSCALING", "ITEMS",
        *items("n", 500), at=4)
    add(f"expansion-{layout}", "BF.INSERT", f"expansion-{layout}", "EXPANSION", "5", "ITEMS",
        *items("e", 3), at=5)
    add(f"capacity-{layout}", "BF.INSERT", f"capacity-{layout}", "CAPACITY", "50", "ITEMS",
        *items("c", 3), at=5)
    add(f"explicit-{layout}", "BF.INSERT", f"explicit-{layout}", "CAPACITY", "30", "ERROR", "0.05",
        "EXPANSION", "1", "ITEMS", *items("x", 3), at=9)
    # A rate at which blocked sub-filters take more than twice RedisBloom's memory: the
    # primary makes RedisBloom's chain with either layout setting, and replicates it named.
    add(f"low-rate-{layout}", "BF.INSERT", f"low-rate-{layout}", "ERROR", "1e-9", "ITEMS", *items("l", 3), at=5)
    assert client.type(f"low-rate-{layout}") == b"MBbloom--"
    for key, command in [
        (f"reserve-{layout}", ["BF.RESERVE", f"reserve-{layout}", "0.01", "100"]),
        (f"reserve-nonscaling-{layout}", ["BF.RESERVE", f"reserve-nonscaling-{layout}", "0.02", "300", "NONSCALING"]),
        (f"reserve-expansion-{layout}", ["BF.RESERVE", f"reserve-expansion-{layout}", "0.01", "100", "EXPANSION", "6"]),
    ]:
        assert client.execute_command(*command) == b"OK"
        held[key] = []
    # A new non-scaling filter that fills up: only the items it took are replicated.
    replies = client.execute_command("BF.INSERT", f"full-{layout}", "CAPACITY", "10", "NONSCALING",
                                     "ITEMS", *items("f", 40))
    taken = [reply for reply in replies if not isinstance(reply, redis.ResponseError)]
    assert 10 <= len(taken) < 40 and isinstance(replies[len(taken)], redis.ResponseError)
    held[f"full-{layout}"] = items("f", len(taken))
    # Growth: the sub-filters' sizes follow each filter's expansion.
    for key in (f"add-{layout}", f"madd-{layout}", f"insert-{layout}", f"reserve-{layout}",
                f"capacity-{layout}", f"expansion-{layout}", f"explicit-{layout}",
                f"reserve-expansion-{layout}"):
        # Past the primary's 1000 default; the filter of capacity 30 and expansion 1, to
        # 17 sub-filters (of the 64 a filter can have).
        more = items(f"{key}-more", 500 if key.startswith("explicit") else 1500)
        client.execute_command("BF.MADD", key, *more)
        held[key].extend(more)
    return held


def state(client, key) -> tuple:
    return digest(client, key), client.execute_command("BF.INFO", key), client.type(key)


def assert_same(other, held: dict, expected: dict):
    """`other` holds, at every key of `held`, the filter `expected` (key -> `state`) and
    every item added there."""
    differ = sorted(key for key in held if state(other, key) != expected[key])
    assert differ == []
    missing = sorted(key for key, added in held.items()
                     if added and not all(other.execute_command("BF.MEXISTS", key, *added)))
    assert missing == []


@pytest.mark.parametrize("replica_layout", ["no", "yes"])
def test_a_replica_with_other_defaults_builds_the_primarys_filters(server, tmp_path, replica_layout):
    primary = server.client()
    replica_server = start_replica(tmp_path, server, module_args=[
        *REPLICA_LOAD_ARGUMENTS, "REDISBLOOM_LAYOUT", replica_layout])
    try:
        replica = replica_server.client()
        for name, value in PRIMARY_DEFAULTS.items():
            primary.config_set(f"bloomery.{name}", value)
        held = {**create_keys(primary, "no"), **create_keys(primary, "yes")}
        assert primary.type("add-yes") == b"MBbloom--" and primary.type("add-no") == b"bloomery_"
        assert primary.execute_command("BF.INFO", "nonscaling-no", "CAPACITY") == [1000]
        wait_until_synced(primary, replica)
        assert_same(replica, held, {key: state(primary, key) for key in held})
        assert replica.execute_command("DEBUG", "DIGEST") == primary.execute_command("DEBUG", "DIGEST")
    finally:
        replica_server.stop()


def test_an_aof_replay_with_the_load_time_defaults_builds_the_same_filters(tmp_path):
    server = Server(tmp_path, "--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no").start()
    try:
        client = server.client()
        for name, value in PRIMARY_DEFAULTS.items():
            client.config_set(f"bloomery.{name}", value)
        held = {**create_keys(client, "yes"), **create_keys(client, "no")}
        before = {key: state(client, key) for key in held}
        assert client.execute_command("BF.INFO", "nonscaling-no", "CAPACITY") == [1000]
        # The restart replays the AOF with the load-time defaults (a CONFIG SET is gone).
        client = restart(server)
        assert client.config_get("bloomery.initial-size")["bloomery.initial-size"] == "100"
        assert client.config_get("bloomery.redisbloom-layout")["bloomery.redisbloom-layout"] == "no"
        assert client.execute_command("BF.EXISTS", "nonscaling-no", "n-400") == 1
        assert_same(client, held, before)
    finally:
        server.stop()


def test_the_layout_extension_and_redisbloom_replies_without_it(r):
    assert r.execute_command("BF.RESERVE", "rb", "0.01", "100", "LAYOUT", "redisbloom") == b"OK"
    assert r.execute_command("BF.RESERVE", "bl", "0.01", "100", "layout", "BLOOMERY") == b"OK"
    assert (r.type("rb"), r.type("bl")) == (b"MBbloom--", b"bloomery_")
    r.config_set("bloomery.redisbloom-layout", "yes")
    assert r.execute_command("BF.RESERVE", "bl2", "0.01", "100", "EXPANSION", "3", "NONSCALING",
                             "LAYOUT", "bloomery") == b"OK"
    assert r.type("bl2") == b"bloomery_"
    assert r.execute_command("BF.INFO", "bl2", "EXPANSION") == [None]
    # With LAYOUT, NONSCALING may carry the expansion it records: the same filter as one
    # made with that default expansion.
    r.config_set("bloomery.expansion", "3")
    r.config_set("bloomery.redisbloom-layout", "no")
    r.execute_command("BF.RESERVE", "bl3", "0.01", "100", "NONSCALING")
    assert digest(r, "bl3") == digest(r, "bl2")
    for command, message in [
        (["BF.RESERVE", "x", "0.01", "100", "LAYOUT", "cuckoo"], "bad layout"),
        (["BF.RESERVE", "x", "0.01", "100", "LAYOUT"], "bad layout"),
        (["BF.RESERVE", "x", "0.01", "100", "EXPANSION", "2", "NONSCALING", "LAYOUT", "bloomery", "FOO"],
         "wrong number of arguments"),
        # RedisBloom's replies where LAYOUT is not used.
        (["BF.RESERVE", "x", "0.01", "100", "NONSCALING", "EXPANSION", "2"], "Nonscaling filters cannot expand"),
        (["BF.RESERVE", "x", "0.01", "100", "EXPANSION", "2", "NONSCALING", "FOO"], "wrong number of arguments"),
        (["BF.RESERVE", "x", "0.01", "100", "EXPANSION", "0", "LAYOUT", "bloomery"],
         "expansion should be greater or equal to 1"),
        (["BF.RESERVE", "rb", "0.01", "100", "LAYOUT", "bloomery"], "item exists"),
    ]:
        assert message in error_of(r, *command), command
    assert not r.exists("x")
    assert r.execute_command("BF.RESERVE", "x", "0.01", "100", "FOO") == b"OK"
