"""Aging filters (`BF.RESERVE/BF.INSERT ... WINDOW [SECONDS t] [GENERATIONS g] [AT ms]`,
the library's rotating filter): the options and their errors, forgetting by count and by
time, no false negatives within the window against an exact model of the generations,
persistence (DEBUG RELOAD, RDB and AOF restarts, AOF rewrite), replicas that end with the
primary's exact bits after time-based rotations, SCANDUMP/LOADCHUNK, and hostile input
(random commands, mutated RESTORE and LOADCHUNK payloads)."""
import math
import random
import time

import redis

from conftest import Server, dump, error_of, wait_until_synced
from type_helpers import (any_command, call_all, digest, fuzz_and_check, restart, server_time_ms,
                          start_replica, wait_for_rewrite)


def info(client, key) -> dict:
    reply = client.execute_command("BF.INFO", key)
    return {label.decode(): value for label, value in zip(reply[0::2], reply[1::2])}


class Model:
    """The rotating filter's generations, followed from the times and the add replies. A
    reply is 1 for an item no generation within the window held; every item goes into the
    newest generation, which counts it when its bits change there: for an item replied 1,
    and for one replied 0 that an older generation held (the model's sets tell them apart,
    a false positive of the newest generation aside: the inserts are seeded, so one would
    show on every run, never as a flake)."""

    def __init__(self, generations, capacity, window_ms, start):
        self.g = generations
        self.per_generation = math.ceil(capacity / (generations - 1))
        self.window = None if window_ms is None else math.ceil(window_ms / (generations - 1))
        self.gens = [[start, 0, set()]]  # start, counted items, items

    def insert(self, item, at, reply):
        start, length, _ = self.gens[-1]
        at = max(at, start)  # time never goes back for a filter
        expired = self.window is not None and max(0, at - start) >= self.window
        if length >= self.per_generation or expired:
            self.gens.append([at, 0, set()])
            del self.gens[: -self.g]
        newest = self.gens[-1][2]
        if reply or item not in newest:
            self.gens[-1][1] += 1
        newest.add(item)

    def live(self, now):
        """The generations a lookup at `now` asks (RotatingBloomFilter::contains_at)."""
        if self.window is None:
            return self.gens
        return [gen for gen in self.gens if now < gen[0] + self.g * self.window]

    def items(self, now):
        return set().union(*(gen[2] for gen in self.live(now)))

    def count(self, now):
        return sum(gen[1] for gen in self.live(now))


def check_against(client, key, model, every_item, rng, sample=400):
    """Every item the model says a lookup must find is found; of those it has forgotten,
    at most a few are false positives. The lookup's time is bracketed by TIME."""
    items = rng.sample(every_item, min(sample, len(every_item)))
    before = server_time_ms(client)
    found = client.execute_command("BF.MEXISTS", key, *items)
    card = client.execute_command("BF.CARD", key)
    after = server_time_ms(client)
    must, may = model.items(after + 1), model.items(before)
    missing = [item for item, hit in zip(items, found) if item in must and not hit]
    assert not missing, f"false negatives: {missing[:5]}"
    forgotten = [hit for item, hit in zip(items, found) if item not in may]
    assert sum(forgotten) <= 0.05 * len(forgotten) + 2, (sum(forgotten), len(forgotten))
    if model.count(before) == model.count(after + 1):
        assert card == model.count(before)
    assert info(client, key)["Number of filters"] == len(model.gens)
    return len(forgotten)


def test_the_readme_example_s_size_counts_the_generations_made(r):
    # README: "208 KB for the first example (4 generations of 33,334 items at 0.25%;
    # BF.INFO's Size counts the generations made so far, 52 KB for a new filter".
    r.execute_command("BF.RESERVE", "seen", "0.01", "100000", "WINDOW")
    assert info(r, "seen")["Size"] == 52_032 + 32  # bits, and 32 bytes of the filter, as RedisBloom counts
    for start in range(0, 100_010, 10_000):
        r.execute_command("BF.MADD", "seen", *[f"u{i}" for i in range(start, start + 10_000)])
    fields = info(r, "seen")
    assert fields["Number of filters"] == 4 and fields["Size"] == 4 * 52_032 + 32


def test_reserve_options_info_and_errors(r):
    assert r.execute_command("BF.RESERVE", "a", "0.01", "1000", "WINDOW", "SECONDS", "60", "GENERATIONS", "3") == b"OK"
    fields = info(r, "a")
    assert fields["Capacity"] == 1000  # 2 generations of 500 after the one filling
    assert fields["Number of filters"] == 1 and fields["Number of items inserted"] == 0
    assert fields["Expansion rate"] is None
    assert fields["Generations"] == 3
    assert float(fields["Window seconds"]) == 60.0
    assert abs(float(fields["Error rate"]) - 0.01) < 1e-9
    # The bound is never above the rate asked for (rounding made it 0.010000000000000009
    # with 4 generations, and 2% over at 1e-14).
    for rate, generations in [("0.01", "4"), ("0.01", "1024"), ("1e-14", "4"), ("0.3", "7")]:
        key = f"bound-{rate}-{generations}"
        r.execute_command("BF.RESERVE", key, rate, "100", "WINDOW", "GENERATIONS", generations)
        bound = float(info(r, key)["Error rate"])
        assert float(rate) * (1 - 1e-9) < bound <= float(rate), (rate, generations, bound)
    assert r.execute_command("BF.INFO", "a", "GENERATIONS") == [3]
    assert r.execute_command("BF.INFO", "a", "CAPACITY") == [1000]
    assert "variant:rotating" in r.execute_command("BF.DEBUG", "a")[1].decode()
    # Count only, default 4 generations: 1000 items in 3 generations of 334.
    r.execute_command("BF.RESERVE", "b", "0.001", "1000", "WINDOW")
    assert info(r, "b")["Capacity"] == 1002 and info(r, "b")["Generations"] == 4
    assert float(info(r, "b")["Window seconds"]) == 0.0
    assert error_of(r, "BF.RESERVE", "a", "0.01", "100", "WINDOW") == "item exists"
    assert "need WINDOW" in error_of(r, "BF.RESERVE", "c", "0.01", "100", "GENERATIONS", "3")
    assert "need WINDOW" in error_of(r, "BF.RESERVE", "c", "0.01", "100", "SECONDS", "3")
    for seconds in ("0", "-1", "abc", "0.0001", "1e300", "nan"):
        assert "bad window" in error_of(r, "BF.RESERVE", "c", "0.01", "100", "WINDOW", "SECONDS", seconds)
    assert "bad window" in error_of(r, "BF.RESERVE", "c", "0.01", "100", "WINDOW", "SECONDS")
    for generations in ("1", "1025", "x"):
        assert "bad generations" in error_of(r, "BF.RESERVE", "c", "0.01", "100", "WINDOW", "GENERATIONS", generations)
    assert "bad time" in error_of(r, "BF.RESERVE", "c", "0.01", "100", "WINDOW", "AT", "-1")
    for option in (["EXPANSION", "2"], ["NONSCALING"]):
        assert "do not grow" in error_of(r, "BF.RESERVE", "c", "0.01", "100", "WINDOW", *option)
    assert error_of(r, "BF.RESERVE", "c", "0.01", "100", "WINDOW", "FOO") == \
        "unknown argument 'FOO' for an aging filter (WINDOW [SECONDS t] [GENERATIONS g] [AT ms])"
    assert error_of(r, "BF.RESERVE", "c", "0.01", "100", "WINDOW", "LAYOUT", "bloomery") == \
        "aging filters (WINDOW) have one layout: LAYOUT does not apply"
    # A refusal in the client's terms: the capacity and rate it gave, with the share per
    # generation (it said "got 0", and "for 34 items at fpp 2.5e-301").
    assert error_of(r, "BF.RESERVE", "c", "5e-324", "100", "WINDOW").startswith(
        "cannot make an aging filter of capacity 100 at error rate 5e-324 (4 generations, each of 34 items at 0): ")
    assert error_of(r, "BF.RESERVE", "c", "1e-300", "100", "WINDOW").startswith(
        "cannot make an aging filter of capacity 100 at error rate 1e-300 (4 generations, each of 34 items at 2.5e-301): ")
    assert error_of(r, "BF.RESERVE", "c", "2", "100", "WINDOW") == "(0 < error rate range < 1) "
    assert error_of(r, "BF.RESERVE", "c", "0.01", "0", "WINDOW") == "(capacity should be larger than 0)"
    # The memory cap counts every generation the filter will hold.
    assert "bloomery.max-filter-memory" in error_of(r, "BF.RESERVE", "c", "0.01", "600000000", "WINDOW")
    r.set("str", "v")
    assert error_of(r, "BF.RESERVE", "str", "0.01", "100", "WINDOW").startswith("WRONGTYPE")
    assert r.exists("c") == 0


def test_an_item_an_older_generation_holds_is_not_new_and_stays(r):
    """An item that comes again while an older generation holds it is answered 0 (not new:
    a client deduplicating with the replies drops it), and is copied into the newest
    generation, so that it stays as long as it keeps coming."""
    # 3 generations of 100 items, by count.
    r.execute_command("BF.RESERVE", "w", "0.01", "200", "WINDOW", "GENERATIONS", "3")
    first = [f"first-{i}" for i in range(100)]
    # New, false positives aside (an item the filter already answers present is not new,
    # and not counted: the generation then takes one more).
    assert sum(r.execute_command("BF.MADD", "w", *first)) >= 98
    for i in range(4):  # the one that starts the second generation
        second = f"second-{i}"
        assert r.execute_command("BF.ADD", "w", second) == 1
        if info(r, "w")["Number of filters"] == 2:
            break
    assert info(r, "w")["Number of filters"] == 2
    assert r.execute_command("BF.MADD", "w", "first-0", "first-1") == [0, 0]
    # 250 more: the second and third generations fill, a fourth starts and the first
    # is dropped, with the items it alone held.
    fresh = [f"fresh-{i}" for i in range(250)]
    assert sum(r.execute_command("BF.MADD", "w", *fresh)) >= 245
    assert info(r, "w")["Number of filters"] == 3
    assert r.execute_command("BF.MEXISTS", "w", "first-0", "first-1", second) == [1, 1, 1]
    assert sum(r.execute_command("BF.MEXISTS", "w", *first[2:])) <= 5  # forgotten, false positives aside


def test_insert_options_and_the_other_commands(r):
    assert r.execute_command("BF.INSERT", "i", "CAPACITY", "10", "ERROR", "0.001", "WINDOW", "SECONDS", "5",
                             "GENERATIONS", "3", "ITEMS", "x", "y", "x") == [1, 1, 0]
    fields = info(r, "i")
    assert (fields["Capacity"], fields["Generations"], float(fields["Window seconds"])) == (10, 3, 5.0)
    # WINDOW is a flag: the items follow ITEMS.
    assert r.execute_command("BF.INSERT", "j", "WINDOW", "ITEMS", "a", "b") == [1, 1]
    assert info(r, "j")["Generations"] == 4
    # Existing aging filters take BF.ADD, BF.MADD and BF.INSERT with or without options.
    assert r.execute_command("BF.ADD", "i", "z") == 1
    assert r.execute_command("BF.MADD", "i", "z", "w") == [0, 1]
    assert r.execute_command("BF.INSERT", "i", "NOCREATE", "ITEMS", "v") == [1]
    assert r.execute_command("BF.INSERT", "i", "NOCREATE", "AT", server_time_ms(r), "ITEMS", "u") == [1]
    assert r.execute_command("BF.MEXISTS", "i", "x", "y", "z", "w", "v", "u", "never") == [1, 1, 1, 1, 1, 1, 0]
    assert r.execute_command("BF.EXISTS", "i", "x") == 1
    assert r.execute_command("BF.CARD", "i") == 6
    assert error_of(r, "BF.INSERT", "missing", "NOCREATE", "AT", "5", "ITEMS", "a") == "not found"
    assert "need WINDOW" in error_of(r, "BF.INSERT", "missing", "AT", "5", "ITEMS", "a")
    assert "do not grow" in error_of(r, "BF.INSERT", "missing", "EXPANSION", "2", "WINDOW", "ITEMS", "a")
    assert error_of(r, "BF.INSERT", "missing", "WINDOW", "FOO", "ITEMS", "a") == "Unknown argument received"
    assert error_of(r, "BF.INSERT", "missing", "WINDOW", "CAPACITY", "0", "ITEMS", "a") == "Bad argument received"
    assert error_of(r, "BF.INSERT", "missing", "WINDOW", "ITEMS") == "wrong number of arguments for 'bf.insert' command"
    assert "bad generations" in error_of(r, "BF.INSERT", "missing", "WINDOW", "GENERATIONS", "0", "ITEMS", "a")
    assert r.exists("missing") == 0
    # Aging options on a filter that does not age are refused, not ignored.
    r.execute_command("BF.ADD", "plain", "a")
    assert "does not age" in error_of(r, "BF.INSERT", "plain", "AT", "5", "ITEMS", "b")
    assert "does not age" in error_of(r, "BF.INSERT", "plain", "WINDOW", "ITEMS", "b")
    assert r.execute_command("BF.EXISTS", "plain", "b") == 0
    r3 = redis.Redis(host="127.0.0.1", port=r.connection_pool.connection_kwargs["port"], protocol=3)
    assert r3.execute_command("BF.MEXISTS", "i", "x", "never") == [True, False]
    assert r3.execute_command("BF.INFO", "i")[b"Generations"] == 3


def test_the_count_window_keeps_the_last_capacity_items_and_forgets_older_ones(r):
    # 2 generations of 100: the last 100 new items are always found.
    r.execute_command("BF.RESERVE", "w", "0.01", "100", "WINDOW", "GENERATIONS", "2")
    items = [f"item-{i}" for i in range(1000)]
    for start in range(0, 1000, 50):
        assert r.execute_command("BF.MADD", "w", *items[start:start + 50]).count(1) >= 45
        seen = items[: start + 50]
        assert all(r.execute_command("BF.MEXISTS", "w", *seen[-100:]))
    assert info(r, "w")["Number of filters"] == 2
    # The first 800 left with their generations: only false positives remain (1% bound).
    assert sum(r.execute_command("BF.MEXISTS", "w", *items[:800])) <= 30


def test_new_generations_are_held_to_the_memory_cap(server, tmp_path):
    primary = server.client()
    # Generations of 10,000 items at 0.25%, 15,584 bytes each: a cap of 40,000 bytes
    # lets the second start and refuses the third, which would reach 46,752.
    primary.execute_command("BF.RESERVE", "capped", "0.01", "30000", "WINDOW", "GENERATIONS", "4")
    primary.config_set("bloomery.max-filter-memory", "40000")
    replica_server = start_replica(tmp_path, server)
    try:
        items = [f"capped-{i}" for i in range(25000)]
        replies = primary.execute_command("BF.MADD", "capped", *items)
        refused = replies[-1]
        assert isinstance(refused, redis.ResponseError) and "bloomery.max-filter-memory" in str(refused)
        assert str(refused).startswith("filter cannot start another generation: it would take"), refused
        assert 20000 <= len(replies) - 1 <= 20100
        assert all(primary.execute_command("BF.MEXISTS", "capped", *items[: len(replies) - 1]))
        assert "bloomery.max-filter-memory" in error_of(primary, "BF.ADD", "capped", items[-1])
        assert info(primary, "capped")["Number of filters"] == 2
        # The replica (not held to the cap) got only what the primary added.
        wait_until_synced(primary, replica_server.client())
        assert digest(replica_server.client(), "capped") == digest(primary, "capped")
    finally:
        replica_server.stop()


def test_a_time_that_goes_back_forgets_nothing_sooner_and_one_far_ahead_is_refused(r):
    # 3 generations of 2 items, 30 s each. "a" and "b" fill the first now; "x" comes an
    # hour behind (a stream replayed at its own times, a client whose clock is behind). It
    # once started a generation an hour back, which ended the first before its items were
    # added: "a" and "b" were forgotten at once.
    r.execute_command("BF.RESERVE", "k", "0.01", "4", "WINDOW", "SECONDS", "60", "GENERATIONS", "3")
    assert r.execute_command("BF.MADD", "k", "a", "b") == [1, 1]
    now = server_time_ms(r)
    assert r.execute_command("BF.INSERT", "k", "NOCREATE", "AT", now - 3_600_000, "ITEMS", "x") == [1]
    assert r.execute_command("BF.MEXISTS", "k", "a", "b", "x") == [1, 1, 1]
    assert r.execute_command("BF.CARD", "k") == 3
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert r.execute_command("BF.MEXISTS", "k", "a", "b", "x") == [1, 1, 1]
    # A time far ahead would hold every later add to it (time never goes back), so that
    # the filter stopped forgetting: refused beyond a minute ahead, taken within it.
    ahead = now + 3_650 * 86_400_000
    for command in (("BF.INSERT", "k", "NOCREATE", "AT", ahead, "ITEMS", "typo"),
                    ("BF.RESERVE", "new", "0.01", "4", "WINDOW", "AT", ahead)):
        assert "ahead of this server's clock" in error_of(r, *command)
    assert r.exists("new") == 0
    assert r.execute_command("BF.EXISTS", "k", "typo") == 0
    assert r.execute_command("BF.INSERT", "k", "NOCREATE", "AT", now + 30_000, "ITEMS", "soon") == [1]
    assert r.execute_command("BF.MEXISTS", "k", "a", "b", "x", "soon") == [1, 1, 1, 1]


def test_times_ahead_of_the_clock_never_forget_the_items_before_them_sooner(server, tmp_path):
    """A client's AT ahead of the server's clock (within the minute allowed) counts as the
    clock: the filter's time never passes it. It once moved the filter's time there, so an
    AT 10 s and then 20 s ahead started two generations of a 10 s window at once and
    dropped the one holding an item added a second before (found by a hunt, in a
    randomized run of BF.ADD on the clock and BF.INSERT AT up to 60 s ahead)."""
    primary = server.client()
    replica_server = start_replica(tmp_path, server)
    try:
        primary.execute_command("BF.RESERVE", "w", "0.01", "1000", "WINDOW", "SECONDS", "10", "GENERATIONS", "2")
        primary.execute_command("BF.RESERVE", "w4", "0.01", "1000", "WINDOW", "SECONDS", "30", "GENERATIONS", "4")
        assert primary.execute_command("BF.ADD", "w", "x") == 1
        assert primary.execute_command("BF.MADD", "w4", "a", "b", "c") == [1, 1, 1]
        now = server_time_ms(primary)
        for step in (1, 2):
            assert primary.execute_command("BF.INSERT", "w", "NOCREATE", "AT", now + step * 10_000,
                                           "ITEMS", f"y{step}") == [1]
        for step in (1, 2, 3, 4):
            assert primary.execute_command("BF.INSERT", "w4", "NOCREATE", "AT", now + step * 10_000,
                                           "ITEMS", f"s{step}") == [1]
        # Created with a time ahead: made at the clock's time, its items kept as long.
        primary.execute_command("BF.RESERVE", "made", "0.01", "100", "WINDOW", "SECONDS", "10",
                                "GENERATIONS", "2", "AT", now + 50_000)
        primary.execute_command("BF.MADD", "made", "m1", "m2")
        assert primary.execute_command("BF.MEXISTS", "w", "x", "y1", "y2") == [1, 1, 1]
        assert primary.execute_command("BF.MEXISTS", "w4", "a", "b", "c", "s1", "s2", "s3", "s4") == [1] * 7
        assert info(primary, "w")["Number of filters"] == 1
        assert info(primary, "w4")["Number of filters"] == 1
        # The replica took the primary's times: the same bits, the same answers.
        wait_until_synced(primary, replica_server.client())
        replica = replica_server.client()
        for key in ("w", "w4", "made"):
            assert digest(replica, key) == digest(primary, key), key
        assert replica.execute_command("BF.MEXISTS", "w", "x", "y1", "y2") == [1, 1, 1]
        assert primary.execute_command("DEBUG", "RELOAD") == b"OK"
        assert primary.execute_command("BF.MEXISTS", "w4", "a", "b", "c", "s1", "s2", "s3", "s4") == [1] * 7
    finally:
        replica_server.stop()


def test_a_time_window_forgets_without_any_write(r):
    # Times in the past, by AT: 2 generations of 2 s. What went in 10 s ago is forgotten
    # already; what went in 1 s ago is found for about 3 s more.
    now = server_time_ms(r)
    r.execute_command("BF.RESERVE", "t", "0.01", "1000", "WINDOW", "SECONDS", "2", "GENERATIONS", "2", "AT", now - 10000)
    old = [f"old-{i}" for i in range(100)]
    recent = [f"recent-{i}" for i in range(100)]
    r.execute_command("BF.INSERT", "t", "NOCREATE", "AT", now - 10000, "ITEMS", *old)
    assert not any(r.execute_command("BF.MEXISTS", "t", *old))
    assert not any(r.execute_command("BF.EXISTS", "t", item) for item in old)
    assert r.execute_command("BF.CARD", "t") == 0
    r.execute_command("BF.INSERT", "t", "NOCREATE", "AT", now - 1000, "ITEMS", *recent)
    assert all(r.execute_command("BF.MEXISTS", "t", *recent))
    assert not any(r.execute_command("BF.MEXISTS", "t", *old))
    assert r.execute_command("BF.CARD", "t") == 100
    assert info(r, "t")["Number of filters"] == 2
    # By the server's clock: a 1 s window of 2 generations; gone within 2 s, no writes.
    r.execute_command("BF.RESERVE", "clock", "0.01", "1000", "WINDOW", "SECONDS", "1", "GENERATIONS", "2")
    r.execute_command("BF.MADD", "clock", *recent)
    assert all(r.execute_command("BF.MEXISTS", "clock", *recent))
    time.sleep(2.1)
    assert not any(r.execute_command("BF.MEXISTS", "clock", *recent))
    # The single-item command (its own fast path) answers for the window as of now too.
    assert not any(r.execute_command("BF.EXISTS", "clock", item) for item in recent)
    assert r.execute_command("BF.CARD", "clock") == 0
    assert r.execute_command("BF.ADD", "clock", "fresh") == 1
    assert r.execute_command("BF.EXISTS", "clock", "fresh") == 1


def timed_writes(client, rng, keys, rounds, pause):
    """Batches added by the server's clock, `pause` seconds apart."""
    added = {key: [] for key in keys}
    for index in range(rounds):
        for key in keys:
            items = [f"{key}:{index}:{rng.getrandbits(32)}" for _ in range(rng.randint(1, 30))]
            if rng.random() < 0.5:
                client.execute_command("BF.MADD", key, *items)
            else:
                client.execute_command("BF.INSERT", key, "ITEMS", *items)
            client.execute_command("BF.ADD", key, items[0])
            added[key].extend(items)
        time.sleep(pause)
    return added


def test_a_replica_gets_the_primarys_bits_through_time_based_rotations(server, tmp_path):
    rng = random.Random(15)
    primary = server.client()
    # 3 generations of 150 ms: rotations come from time alone (50,000 items a generation).
    primary.execute_command("BF.RESERVE", "timed", "0.01", "100000", "WINDOW", "SECONDS", "0.3", "GENERATIONS", "3")
    primary.execute_command("BF.RESERVE", "counted", "0.01", "60", "WINDOW", "GENERATIONS", "3")
    timed_writes(primary, rng, ["timed", "counted"], 6, 0.1)
    # A replica that connects now gets the filters in the full sync, then the stream.
    replica_server = start_replica(tmp_path, server, module_args=["ERROR_RATE", "0.2", "INITIAL_SIZE", "7"])
    try:
        replica = replica_server.client()
        timed_writes(primary, rng, ["timed", "counted"], 8, 0.1)
        primary.execute_command("BF.INSERT", "made", "WINDOW", "SECONDS", "0.2", "ITEMS", "a", "b")
        time.sleep(0.25)
        primary.execute_command("BF.MADD", "made", "c", "d")
        wait_until_synced(primary, replica)
        # Rotated by time: 3 generations kept, though one could hold every item.
        assert info(primary, "timed")["Number of filters"] == 3
        assert info(primary, "made")["Number of filters"] == 2
        for key in ("timed", "counted", "made"):
            assert digest(replica, key) == digest(primary, key), key
            assert replica.execute_command("BF.INFO", key, "CAPACITY") == primary.execute_command("BF.INFO", key, "CAPACITY")
        assert replica.execute_command("DEBUG", "DIGEST") == primary.execute_command("DEBUG", "DIGEST")
    finally:
        replica_server.stop()


def test_debug_reload_and_a_restart_from_rdb_keep_the_bits(server):
    client = server.client()
    client.execute_command("BF.RESERVE", "timed", "0.01", "1000", "WINDOW", "SECONDS", "600", "GENERATIONS", "5")
    client.execute_command("BF.RESERVE", "counted", "0.01", "100", "WINDOW", "GENERATIONS", "2")
    items = [f"persisted-{i}" for i in range(150)]
    client.execute_command("BF.MADD", "timed", *items)
    client.execute_command("BF.MADD", "counted", *items)
    before = {key: (digest(client, key), info(client, key)) for key in ("timed", "counted")}
    assert client.execute_command("DEBUG", "RELOAD") == b"OK"
    assert {key: (digest(client, key), info(client, key)) for key in before} == before
    client.save()
    client = restart(server)
    assert {key: (digest(client, key), info(client, key)) for key in before} == before
    assert all(client.execute_command("BF.MEXISTS", "timed", *items))
    assert all(client.execute_command("BF.MEXISTS", "counted", *items[-100:]))
    assert client.execute_command("BF.ADD", "counted", "after") == 1


def test_an_aof_replay_and_a_rewrite_make_the_same_bits(tmp_path):
    # Without an RDB preamble, so that the rewrite is the module's BF.LOADCHUNK commands.
    server = Server(tmp_path, "--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no").start()
    try:
        rng = random.Random(16)
        client = server.client()
        client.execute_command("BF.RESERVE", "timed", "0.01", "100000", "WINDOW", "SECONDS", "0.3", "GENERATIONS", "3")
        client.execute_command("BF.INSERT", "counted", "CAPACITY", "40", "WINDOW", "ITEMS", "first")
        timed_writes(client, rng, ["timed", "counted"], 6, 0.1)
        assert info(client, "timed")["Number of filters"] == 3
        keys = ("timed", "counted")
        before = {key: digest(client, key) for key in keys}
        client = restart(server)
        assert {key: digest(client, key) for key in keys} == before
        # Rewritten as BF.LOADCHUNK commands, then more rotations on top, replayed again.
        client.bgrewriteaof()
        wait_for_rewrite(client)
        added = timed_writes(client, rng, ["timed", "counted"], 4, 0.1)
        before = {key: digest(client, key) for key in keys}
        client = restart(server)
        assert {key: digest(client, key) for key in keys} == before
        assert all(client.execute_command("BF.MEXISTS", "counted", *added["counted"][-20:]))
    finally:
        server.stop()


def test_scandump_and_loadchunk_copy_an_aging_filter(r):
    r.execute_command("BF.RESERVE", "src", "0.01", "300", "WINDOW", "SECONDS", "3600", "GENERATIONS", "3")
    items = [f"copied-{i}" for i in range(700)]
    r.execute_command("BF.MADD", "src", *items)
    assert info(r, "src")["Number of filters"] == 3
    for iterator, data in dump(r, "src"):
        assert r.execute_command("BF.LOADCHUNK", "dst", iterator, data) == b"OK"
    assert digest(r, "dst") == digest(r, "src")
    assert info(r, "dst") == info(r, "src")
    assert r.execute_command("BF.MEXISTS", "dst", *items) == r.execute_command("BF.MEXISTS", "src", *items)
    assert all(r.execute_command("BF.MEXISTS", "dst", *items[-300:]))
    # The copy is an aging filter: it takes adds with AT and rotates on.
    assert r.execute_command("BF.INSERT", "dst", "NOCREATE", "AT", server_time_ms(r), "ITEMS", "new") == [1]
    assert "holds a filter" in error_of(r, "BF.LOADCHUNK", "src", 1, dump(r, "dst")[0][1])


WORDS = [b"WINDOW", b"SECONDS", b"GENERATIONS", b"AT", b"ITEMS", b"NOCREATE", b"CAPACITY", b"ERROR",
         b"EXPANSION", b"NONSCALING", b"0", b"1", b"2", b"3", b"-1", b"0.001", b"0.5", b"1e-300", b"1e300",
         b"nan", b"inf", b"1024", b"1025", b"9223372036854775807", b"18446744073709551616", b"", b"\x00\xff"]
COMMANDS = [b"BF.RESERVE", b"BF.ADD", b"BF.MADD", b"BF.INSERT", b"BF.EXISTS", b"BF.MEXISTS", b"BF.CARD",
            b"BF.INFO", b"BF.DEBUG", b"BF.SCANDUMP"]
READS = [b"BF.EXISTS", b"BF.MEXISTS", b"BF.CARD", b"BF.INFO", b"BF.DEBUG", b"BF.SCANDUMP"]


def random_command(rng, keys):
    # Reads of the modelled key (b"model") must not change it.
    return any_command(rng, keys, COMMANDS, READS, WORDS, 0.7, 10**13, 9)


def test_random_commands_against_a_model_of_the_generations(r):
    rng = random.Random(20261125)
    r.config_set("bloomery.max-filter-memory", "64mb")
    now = server_time_ms(r)
    # 3 generations of 120 items or 1.5 s, their times 40 s back up to about 1 s ago.
    at = now - 40000
    r.execute_command("BF.RESERVE", "model", "0.01", "240", "WINDOW", "SECONDS", "3", "GENERATIONS", "3", "AT", at)
    model = Model(3, 240, 3000, at)
    r.set("str", "v")
    every_item, errors, junk, forgotten = [], 0, 0, 0
    step = 0
    while at < now - 1200:
        step += 1
        at = min(at + rng.choice([0, 0, 0, 30, 100, 300, 800, 1600]), now - 1200)
        fresh = [f"m{step}-{i}" for i in range(rng.randint(1, 25))]
        again = rng.sample(every_item, min(len(every_item), rng.randint(0, 3)))
        items = fresh + again
        rng.shuffle(items)
        replies = r.execute_command("BF.INSERT", "model", "NOCREATE", "AT", at, "ITEMS", *items)
        assert len(replies) == len(items) and all(reply in (0, 1) for reply in replies)
        for item, reply in zip(items, replies):
            model.insert(item, at, reply)
        every_item.extend(fresh)
        for _ in range(8):
            junk += 1
            try:
                r.execute_command(*random_command(rng, [b"fuzz-a", b"fuzz-b", b"str"]))
            except redis.ResponseError:
                errors += 1
        if step % 10 == 0:
            forgotten += check_against(r, "model", model, every_item, rng)
        if step == 60:
            assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert step > 60
    # A last batch just now (the loop took real time): it must be found for 3 s or more.
    at = server_time_ms(r) - 500
    last = [f"last-{i}" for i in range(20)]
    for item, reply in zip(last, r.execute_command("BF.INSERT", "model", "NOCREATE", "AT", at, "ITEMS", *last)):
        model.insert(item, at, reply)
    every_item.extend(last)
    forgotten += check_against(r, "model", model, every_item, rng, sample=len(every_item))
    assert forgotten > 500, "the model should have forgotten most items"
    assert model.items(server_time_ms(r) + 1) >= set(last)

    # By the server's clock, on a count window, through BF.ADD, BF.MADD and BF.INSERT.
    r.execute_command("BF.RESERVE", "counted", "0.01", "100", "WINDOW", "GENERATIONS", "2")
    counted = Model(2, 100, None, 0)
    added = []
    for step in range(150):
        items = [f"c{step}-{i}" for i in range(rng.randint(1, 8))] + rng.sample(added, min(len(added), 2))
        kind = rng.randrange(3)
        if kind == 0:
            replies = [r.execute_command("BF.ADD", "counted", item) for item in items]
        elif kind == 1:
            replies = r.execute_command("BF.MADD", "counted", *items)
        else:
            replies = r.execute_command("BF.INSERT", "counted", "ITEMS", *items)
        for item, reply in zip(items, replies):
            counted.insert(item, 0, reply)
        added.extend(items)
        if step % 25 == 0:
            check_against(r, "counted", counted, added, rng)
    check_against(r, "counted", counted, added, rng, sample=len(set(added)))
    assert errors > junk / 2, "the fuzzer should hit many error paths"
    assert r.ping()
    assert r.get("str") == b"v"


# The rotating filter's parameters: max generations (u32), items per generation (u64),
# rate (f64), window ms (u64), generations kept (u32), then per generation its item count
# (u64), start ms (u64), hashes (u32) and words (u64).
ROTATING_FIELDS = [(0, 4), (4, 8), (12, 8), (20, 8), (28, 4), (32, 8), (40, 8), (48, 4), (52, 8),
                   (60, 8), (68, 8), (76, 4), (80, 8)]


def serve(client, key):
    call_all(client, [
        ("BF.INFO", key), ("BF.MEXISTS", key, "a", "b"), ("BF.CARD", key), ("BF.DEBUG", key),
        ("BF.ADD", key, "after"), ("BF.MADD", key, "x", "y", "z"),
        ("BF.INSERT", key, "NOCREATE", "AT", str((1 << 63) - 1), "ITEMS", "later"),
        ("BF.INSERT", key, "NOCREATE", "AT", "0", "ITEMS", "earlier"),
        ("BF.SCANDUMP", key, 0), ("DEBUG", "DIGEST-VALUE", key), ("MEMORY", "USAGE", key),
    ])


def test_mutated_restore_and_loadchunk_payloads_never_stop_the_server(r):
    rng = random.Random(20261126)
    r.config_set("bloomery.max-filter-memory", "64mb")
    r.execute_command("BF.RESERVE", "base", "0.01", "100", "WINDOW", "SECONDS", "3600", "GENERATIONS", "3")
    items = [f"item-{i}" for i in range(120)]
    r.execute_command("BF.MADD", "base", *items)
    assert info(r, "base")["Number of filters"] == 3
    base_digest = digest(r, "base")

    fuzz_and_check(r, "base", rng, serve, ROTATING_FIELDS)
    assert digest(r, "base") == base_digest
    assert all(r.execute_command("BF.MEXISTS", "base", *items[-100:]))
