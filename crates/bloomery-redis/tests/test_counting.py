"""Counting filters (`CBF.*`, the library's counting filter): the commands and their error
replies, keys of the wrong kind, no false negatives after removals of other items, the
saturation rule, persistence (DEBUG RELOAD, RDB and AOF restarts, AOF rewrite), replicas
(with other load arguments) ending with the primary's bits after deletions,
SCANDUMP/LOADCHUNK, and hostile input (random commands against a model, mutated RESTORE
and LOADCHUNK payloads)."""
import random
from collections import Counter

import redis

from conftest import Server, dump, error_of, wait_until_synced
from type_helpers import (any_command, call_all, digest, fuzz_and_check, restart, start_replica,
                          wait_for_rewrite)

NOT_PRESENT = "not present: the filter does not hold the item, nothing was removed"
NOT_COUNTING = "the key holds a Bloom filter that cannot remove items"
USE_CBF = "the key holds a counting filter: add to it with CBF.ADD or CBF.MADD"


def info(client, key) -> dict:
    reply = client.execute_command("CBF.INFO", key)
    return {label.decode(): value for label, value in zip(reply[0::2], reply[1::2])}


def test_commands_and_their_replies(r):
    assert r.execute_command("CBF.RESERVE", "c", "0.01", "1000") == b"OK"
    assert r.execute_command("CBF.ADD", "c", "a") == 1
    assert r.execute_command("CBF.ADD", "c", "a") == 0
    assert r.execute_command("CBF.MADD", "c", "a", "b", "c") == [0, 1, 1]
    assert r.execute_command("CBF.COUNT", "c", "a") == 3
    assert r.execute_command("CBF.COUNT", "c", "zz") == 0
    assert r.execute_command("CBF.MEXISTS", "c", "a", "b", "zz") == [1, 1, 0]
    assert r.execute_command("CBF.CARD", "c") == 3
    assert r.execute_command("CBF.DEL", "c", "a") == 1
    assert r.execute_command("CBF.COUNT", "c", "a") == 2
    assert r.execute_command("CBF.DEL", "c", "a") == 1
    assert r.execute_command("CBF.DEL", "c", "a") == 1
    assert r.execute_command("CBF.EXISTS", "c", "a") == 0
    before = digest(r, "c")
    assert error_of(r, "CBF.DEL", "c", "a") == NOT_PRESENT
    assert digest(r, "c") == before
    assert r.execute_command("CBF.MEXISTS", "c", "b", "c") == [1, 1]
    assert r.execute_command("CBF.CARD", "c") == 2
    fields = info(r, "c")
    assert fields["Capacity"] >= 1000 and fields["Hash functions"] == 7
    # The rate sizing of 1,000 items at 1% (Guava's 9,585 bits and 7 hashes, with room for
    # the double hashing's floor), in whole 64-bit words: 9,664 counters of 4 bits.
    assert fields["Counters"] == 9664 and fields["Size"] == 4832
    assert fields["Number of items inserted"] == 2 and fields["Saturated counters"] == 0
    assert 0 < float(fields["Error rate"]) < 1e-6
    # Capacity is at least what was reserved (the most items the counters can have been
    # sized for), also at a rate near 1, where it once said 10,824. There k is 1 and the
    # counters, 72,384 so that one hash meets the rate (the sizing before gave 7,808), bound the
    # items only by m²/60 (sizing::rate_capacity: 87,324,057): any rate closer to 1 fits.
    for rate, capacity, most in [("0.001", 10, 100), ("0.999999", 1_000_000, 87_324_057), ("0.01", 1000, 1100)]:
        r.execute_command("CBF.RESERVE", f"cap-{rate}", rate, capacity)
        assert capacity <= info(r, f"cap-{rate}")["Capacity"] <= most, rate
    assert r.execute_command("CBF.INFO", "c", "COUNTERS") == [9664]
    assert error_of(r, "CBF.INFO", "c", "FOO") == "Invalid information value"
    r3 = redis.Redis(host="127.0.0.1", port=r.connection_pool.connection_kwargs["port"], protocol=3)
    assert r3.execute_command("CBF.MEXISTS", "c", "b", "zz") == [True, False]
    assert r3.execute_command("CBF.ADD", "c", "d") is True
    assert r3.execute_command("CBF.INFO", "c")[b"Hash functions"] == 7
    # A missing key: nothing present, nothing to remove.
    assert r.execute_command("CBF.EXISTS", "missing", "a") == 0
    assert r.execute_command("CBF.MEXISTS", "missing", "a", "b") == [0, 0]
    assert r.execute_command("CBF.COUNT", "missing", "a") == 0
    assert r.execute_command("CBF.CARD", "missing") == 0
    assert error_of(r, "CBF.INFO", "missing") == "not found"
    assert error_of(r, "CBF.DEL", "missing", "a") == "not found"
    assert r.exists("missing") == 0


def test_reserve_and_arity_errors(r):
    r.execute_command("CBF.RESERVE", "c", "0.01", "100")
    assert error_of(r, "CBF.RESERVE", "c", "0.01", "100") == "item exists"
    for rate in ("0", "1", "-1"):
        assert error_of(r, "CBF.RESERVE", "d", rate, "100") == "(0 < error rate range < 1) "
    assert error_of(r, "CBF.RESERVE", "d", "abc", "100") == "bad error rate"
    assert error_of(r, "CBF.RESERVE", "d", "0.01", "0") == "(capacity should be larger than 0)"
    assert error_of(r, "CBF.RESERVE", "d", "0.01", "abc") == "bad capacity"
    assert "bloomery.max-filter-memory" in error_of(r, "CBF.RESERVE", "d", "0.01", "1000000000")
    assert "cannot size" in error_of(r, "CBF.RESERVE", "d", "1e-300", "1000000000")
    for command, arity in [("CBF.RESERVE", 3), ("CBF.RESERVE", 5), ("CBF.ADD", 2), ("CBF.ADD", 4), ("CBF.MADD", 2),
                           ("CBF.DEL", 2), ("CBF.DEL", 4), ("CBF.EXISTS", 2), ("CBF.MEXISTS", 2), ("CBF.COUNT", 2),
                           ("CBF.CARD", 1), ("CBF.CARD", 3), ("CBF.INFO", 1), ("CBF.INFO", 4)]:
        arguments = ["c", "0.01", "100", "x"][: arity - 1]
        assert error_of(r, command, *arguments) == f"wrong number of arguments for '{command.lower()}' command"
    assert r.exists("d") == 0


def test_keys_of_the_wrong_kind_answer_clear_errors(r):
    r.execute_command("BF.ADD", "bf", "a")
    r.execute_command("BF.RESERVE", "aging", "0.01", "100", "WINDOW")
    r.execute_command("CBF.ADD", "cbf", "a")
    r.set("str", "v")
    for key in ("bf", "aging"):
        for command in (["CBF.ADD", key, "a"], ["CBF.MADD", key, "a"], ["CBF.DEL", key, "a"], ["CBF.EXISTS", key, "a"],
                        ["CBF.MEXISTS", key, "a"], ["CBF.COUNT", key, "a"], ["CBF.CARD", key], ["CBF.INFO", key]):
            assert error_of(r, *command).startswith(NOT_COUNTING), command
        assert error_of(r, "CBF.RESERVE", key, "0.01", "100") == "item exists"
    for command in (["BF.ADD", "cbf", "b"], ["BF.MADD", "cbf", "b"], ["BF.INSERT", "cbf", "ITEMS", "b"]):
        assert error_of(r, *command) == USE_CBF, command
    assert "does not age" in error_of(r, "BF.INSERT", "cbf", "NOCREATE", "AT", "5", "ITEMS", "b")
    assert error_of(r, "BF.RESERVE", "cbf", "0.01", "100") == "item exists"
    assert r.execute_command("CBF.EXISTS", "cbf", "b") == 0
    # BF's reads answer for a counting filter too.
    assert r.execute_command("BF.MEXISTS", "cbf", "a", "b") == [1, 0]
    for command in (["CBF.ADD", "str", "a"], ["CBF.DEL", "str", "a"], ["CBF.EXISTS", "str", "a"], ["CBF.CARD", "str"],
                    ["CBF.RESERVE", "str", "0.01", "100"]):
        assert error_of(r, *command).startswith("WRONGTYPE"), command


def test_removals_never_hide_the_items_left(r):
    r.execute_command("CBF.RESERVE", "c", "0.01", "2000")
    items = [f"item-{i}" for i in range(2000)]
    assert r.execute_command("CBF.MADD", "c", *items).count(1) >= 1980
    removed, kept = items[0::2], items[1::2]
    for item in removed:
        assert r.execute_command("CBF.DEL", "c", item) == 1
    assert all(r.execute_command("CBF.MEXISTS", "c", *kept))
    # What was removed is gone but for false positives (about 0.03% with half the items).
    assert sum(r.execute_command("CBF.MEXISTS", "c", *removed)) <= 10
    assert 900 <= r.execute_command("CBF.CARD", "c") <= 1100


def test_a_saturated_counter_stays_and_costs_no_other_item(r):
    r.execute_command("CBF.RESERVE", "c", "0.01", "100")
    cold = [f"cold-{i}" for i in range(100)]
    r.execute_command("CBF.MADD", "c", *cold)
    for _ in range(20):
        r.execute_command("CBF.ADD", "c", "hot")
    assert r.execute_command("CBF.COUNT", "c", "hot") == 15
    assert info(r, "c")["Saturated counters"] >= 5
    # Twenty removals are taken, but the saturated counters stay at 15.
    for _ in range(20):
        assert r.execute_command("CBF.DEL", "c", "hot") == 1
    assert r.execute_command("CBF.EXISTS", "c", "hot") == 1
    assert r.execute_command("CBF.COUNT", "c", "hot") == 15
    assert all(r.execute_command("CBF.MEXISTS", "c", *cold))
    for item in cold:
        assert r.execute_command("CBF.DEL", "c", item) == 1
    assert info(r, "c")["Saturated counters"] >= 5


def some_changes(client, rng, keys, rounds=60):
    """Adds, removals of what was added and refused removals; returns what each key holds."""
    held = {key: Counter() for key in keys}
    for step in range(rounds):
        key = rng.choice(keys)
        choice = rng.random()
        if choice < 0.5:
            items = [f"{key}-{step}-{i}" for i in range(rng.randint(1, 20))] + rng.sample(list(held[key]), min(2, len(held[key])))
            client.execute_command("CBF.MADD", key, *items)
            held[key].update(items)
        elif choice < 0.8 and held[key]:
            item = rng.choice(list(held[key]))
            assert client.execute_command("CBF.DEL", key, item) == 1
            held[key][item] -= 1
            if held[key][item] == 0:
                del held[key][item]
        else:
            item = f"absent-{step}"
            if client.execute_command("CBF.EXISTS", key, item) == 0:
                assert error_of(client, "CBF.DEL", key, item) == NOT_PRESENT
    return held


def assert_holds(client, held):
    for key, items in held.items():
        if items:
            assert all(client.execute_command("CBF.MEXISTS", key, *items)), key
            counts = client.execute_command("CBF.MEXISTS", key, *items)
            assert len(counts) == len(items)
            for item, count in items.items():
                assert client.execute_command("CBF.COUNT", key, item) >= min(count, 15)


def test_a_replica_with_other_defaults_gets_the_primarys_bits(server, tmp_path):
    rng = random.Random(31)
    primary = server.client()
    primary.execute_command("CBF.RESERVE", "reserved", "0.001", "500")
    # A replica whose defaults differ: filters CBF.ADD makes must still be the primary's.
    replica_server = start_replica(tmp_path, server, module_args=["ERROR_RATE", "0.2", "INITIAL_SIZE", "7"])
    try:
        replica = replica_server.client()
        primary.execute_command("CBF.ADD", "auto", "first")
        held = some_changes(primary, rng, ["reserved", "auto"], rounds=120)
        wait_until_synced(primary, replica)
        for key in ("reserved", "auto"):
            assert digest(replica, key) == digest(primary, key), key
            assert replica.execute_command("CBF.INFO", key) == primary.execute_command("CBF.INFO", key)
        assert_holds(replica, held)
        assert replica.execute_command("DEBUG", "DIGEST") == primary.execute_command("DEBUG", "DIGEST")
    finally:
        replica_server.stop()


def test_debug_reload_and_a_restart_from_rdb_keep_the_counters(server):
    rng = random.Random(32)
    client = server.client()
    client.execute_command("CBF.RESERVE", "c", "0.01", "1000")
    held = some_changes(client, rng, ["c"])
    before = (digest(client, "c"), info(client, "c"))
    assert client.execute_command("DEBUG", "RELOAD") == b"OK"
    assert (digest(client, "c"), info(client, "c")) == before
    client.save()
    client = restart(server)
    assert (digest(client, "c"), info(client, "c")) == before
    assert_holds(client, held)


def test_an_aof_replay_and_a_rewrite_make_the_same_counters(tmp_path):
    rng = random.Random(33)
    server = Server(tmp_path, "--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no").start()
    try:
        client = server.client()
        client.execute_command("CBF.RESERVE", "c", "0.01", "1000")
        client.execute_command("CBF.ADD", "auto", "x")
        held = some_changes(client, rng, ["c", "auto"])
        before = {key: digest(client, key) for key in ("c", "auto")}
        client = restart(server)
        assert {key: digest(client, key) for key in before} == before
        client.bgrewriteaof()
        wait_for_rewrite(client)
        more = some_changes(client, rng, ["c"], rounds=20)
        before = {key: digest(client, key) for key in ("c", "auto")}
        client = restart(server)
        assert {key: digest(client, key) for key in before} == before
        assert_holds(client, {"auto": held["auto"], "c": more["c"]})
    finally:
        server.stop()


def test_scandump_and_loadchunk_copy_a_counting_filter(r):
    r.execute_command("CBF.RESERVE", "src", "0.01", "500")
    items = [f"copied-{i}" for i in range(400)]
    r.execute_command("CBF.MADD", "src", *items, *items[:50])
    for iterator, data in dump(r, "src"):
        assert r.execute_command("BF.LOADCHUNK", "dst", iterator, data) == b"OK"
    assert digest(r, "dst") == digest(r, "src")
    assert info(r, "dst") == info(r, "src")
    assert r.execute_command("CBF.COUNT", "dst", items[0]) >= 2
    # The copy is a counting filter: removals work on it and not on the source.
    assert r.execute_command("CBF.DEL", "dst", items[100]) == 1
    assert digest(r, "dst") != digest(r, "src")
    assert all(r.execute_command("CBF.MEXISTS", "dst", *items[:100], *items[101:]))


WORDS = [b"0", b"1", b"-1", b"0.01", b"0.5", b"1e-300", b"nan", b"100", b"1000000000000", b"CAPACITY", b"ITEMS",
         b"WINDOW", b"", b"\x00\xff", b"COUNTERS", b"SATURATED", b"ERROR"]
COMMANDS = [b"CBF.RESERVE", b"CBF.ADD", b"CBF.MADD", b"CBF.DEL", b"CBF.EXISTS", b"CBF.MEXISTS", b"CBF.COUNT",
            b"CBF.CARD", b"CBF.INFO", b"BF.ADD", b"BF.INSERT", b"BF.EXISTS", b"BF.INFO", b"BF.SCANDUMP"]
READS = [b"CBF.EXISTS", b"CBF.MEXISTS", b"CBF.COUNT", b"CBF.CARD", b"CBF.INFO", b"BF.EXISTS", b"BF.INFO",
         b"BF.SCANDUMP", b"BF.ADD", b"BF.INSERT"]  # the BF writes are refused on a counting key


def random_command(rng, keys):
    return any_command(rng, keys, COMMANDS, READS, WORDS, 0.6, 10**6, 6)


def test_random_commands_against_a_model(r):
    rng = random.Random(20261127)
    r.config_set("bloomery.max-filter-memory", "64mb")
    r.execute_command("CBF.RESERVE", "model", "0.01", "3000")
    r.set("str", "v")
    held, gone, errors, junk = Counter(), set(), 0, 0
    pool = [f"pool-{i}" for i in range(400)]  # items added and removed many times over
    for step in range(1500):
        choice = rng.random()
        if choice < 0.35:
            items = rng.sample(pool, rng.randint(1, 6)) + [f"fresh-{step}-{i}" for i in range(rng.randint(0, 4))]
            if len(items) == 1 or rng.random() < 0.3:
                replies = [r.execute_command("CBF.ADD", "model", item) for item in items]
            else:
                replies = r.execute_command("CBF.MADD", "model", *items)
            # 1 only for an item the filter did not hold.
            assert all(reply == 0 for item, reply in zip(items, replies) if held[item] > 0)
            held.update(items)
            gone.difference_update(items)
        elif choice < 0.65 and held:
            item = rng.choice(list(held))
            assert r.execute_command("CBF.DEL", "model", item) == 1
            held[item] -= 1
            if held[item] == 0:
                del held[item]
                gone.add(item)
        elif choice < 0.7:
            item = f"never-{step}"
            if r.execute_command("CBF.EXISTS", "model", item) == 0:
                assert error_of(r, "CBF.DEL", "model", item) == NOT_PRESENT
        else:
            junk += 1
            try:
                r.execute_command(*random_command(rng, [b"fuzz-a", b"fuzz-b", b"str"]))
            except redis.ResponseError:
                errors += 1
        if step % 100 == 99:
            items = list(held)
            assert all(r.execute_command("CBF.MEXISTS", "model", *items)), "a false negative"
            for item in rng.sample(items, min(50, len(items))):
                assert r.execute_command("CBF.COUNT", "model", item) >= min(held[item], 15)
            if gone:
                assert sum(r.execute_command("CBF.MEXISTS", "model", *gone)) <= 0.05 * len(gone) + 3
        if step == 700:
            assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert len(gone) > 50 and len(held) > 200
    assert errors > junk / 2, "the fuzzer should hit many error paths"
    assert all(r.execute_command("CBF.MEXISTS", "model", *held))
    assert r.get("str") == b"v"


# The counting filter's parameters: counters (u64), hashes (u32).
COUNTING_FIELDS = [(0, 8), (8, 4)]


def serve(client, key):
    call_all(client, [
        ("CBF.INFO", key), ("CBF.MEXISTS", key, "a", "b"), ("CBF.COUNT", key, "a"), ("CBF.CARD", key),
        ("CBF.ADD", key, "after"), ("CBF.MADD", key, "x", "y"), ("CBF.DEL", key, "after"), ("CBF.DEL", key, "a"),
        ("BF.INFO", key), ("BF.DEBUG", key), ("BF.SCANDUMP", key, 0), ("DEBUG", "DIGEST-VALUE", key),
        ("MEMORY", "USAGE", key),
    ])


def test_mutated_restore_and_loadchunk_payloads_never_stop_the_server(r):
    rng = random.Random(20261128)
    r.config_set("bloomery.max-filter-memory", "64mb")
    r.execute_command("CBF.RESERVE", "base", "0.01", "100")
    items = [f"item-{i}" for i in range(100)]
    r.execute_command("CBF.MADD", "base", *items)
    base_digest = digest(r, "base")

    fuzz_and_check(r, "base", rng, serve, COUNTING_FIELDS)
    assert digest(r, "base") == base_digest
    assert all(r.execute_command("CBF.MEXISTS", "base", *items))
