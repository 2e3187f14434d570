"""BF.LOADCHUNK loads in progress are values in the keyspace. Measured before: one static
map keyed by key name only, so the same name in two databases collided, 10 abandoned loads
held 185 MB that FLUSHALL did not free, a replica that connected mid-load diverged, a load
onto an existing filter replaced it, and a BF.ADD between pieces was lost. Here a seeded
sequence of right and wrong pieces over two databases, with a replica connecting in the
middle, is checked step by step against a model of what each key must hold; the server
answers PING after each step, the replica's DEBUG DIGEST equals the primary's, and
FLUSHALL gives the memory back."""
import random
import time

import redis

from conftest import Server, dump, error_of, held_memory, settled_memory, settles_near, wait_until_synced

CHUNK_BYTES = 16 << 20


def wait_for_replica(primary, replica):
    assert primary.execute_command("WAIT", 1, 30000) == 1
    deadline = time.monotonic() + 30
    while replica.info("replication")["master_link_status"] != "up":
        assert time.monotonic() < deadline, "the replica did not sync"
        time.sleep(0.05)


def test_loads_in_progress_live_in_their_database_replicate_and_are_flushed(server, tmp_path):
    rng = random.Random(20261124)
    primary = server.client()
    primary.config_set("client-output-buffer-limit", "replica 0 0 0")
    # A filter of two pieces (about 18 MB): 1.5 * 10^7 items at 1%.
    primary.execute_command("BF.RESERVE", "source", "0.01", "15000000")
    items = [f"loaded-{i}" for i in range(1000)]
    primary.execute_command("BF.MADD", "source", *items)
    pieces = [data for _, data in dump(primary, "source")]
    assert len(pieces) == 2 and len(pieces[0]) == CHUNK_BYTES
    primary.flushall()
    baseline = settled_memory(primary)

    clients = [server.client(), redis.Redis(host="127.0.0.1", port=server.port, db=1, socket_timeout=30)]
    model = {}  # (db, key) -> "loading" | "filter"
    keys = [f"k{i}" for i in range(6)]
    replica = None

    def check_state(db, key):
        client = clients[db]
        state = model.get((db, key))
        if state is None:
            assert client.exists(key) == 0, (db, key)
        elif state == "loading":
            assert "still being loaded" in error_of(client, "BF.EXISTS", key, items[0])
            assert "still being loaded" in error_of(client, "BF.ADD", key, "between pieces")
            assert "still being loaded" in error_of(client, "BF.RESERVE", key, "0.01", "100")
        else:
            assert all(client.execute_command("BF.MEXISTS", key, *items[:50])), (db, key)

    def load(db, key, number, data):
        return clients[db].execute_command("BF.LOADCHUNK", key, number, data)

    steps = {name: 0 for name in ["whole", "first", "second", "other_db", "out_of_order", "again",
                                  "damaged_last", "damaged_first", "short", "onto_filter"]}
    for step in range(80):
        if step == 20:
            # A replica connects while loads are in progress: it gets them in the full sync
            # (RDB), then the rest of their pieces in the replication stream.
            assert "loading" in model.values()
            (tmp_path / "replica").mkdir()
            replica = Server(tmp_path / "replica", "--replicaof", "127.0.0.1", str(server.port)).start()
            wait_for_replica(primary, replica.client())
        db, key = rng.randrange(2), rng.choice(keys)
        state = model.get((db, key))
        choice = rng.choice(list(steps))
        if state == "loading" and choice in ("whole", "first", "damaged_first", "onto_filter"):
            choice = rng.choice(["second", "again", "damaged_last", "short", "other_db", "out_of_order"])
        if state == "filter" and choice not in ("onto_filter", "other_db"):
            clients[db].delete(key)
            model.pop((db, key))
            state = None
        if state is None and choice in ("second", "again", "damaged_last", "short", "out_of_order"):
            choice = rng.choice(["whole", "first", "damaged_first", "out_of_order"])
        steps[choice] += 1

        if choice == "whole":
            assert load(db, key, 1, pieces[0]) and load(db, key, 2, pieces[1])
            model[(db, key)] = "filter"
        elif choice == "first":
            assert load(db, key, 1, pieces[0])
            model[(db, key)] = "loading"
        elif choice == "second":
            assert load(db, key, 2, pieces[1])
            model[(db, key)] = "filter"
        elif choice == "other_db":
            # The header went to `db`; the rest sent to the other database finds no load.
            other = 1 - db
            if (other, key) not in model:
                assert "no load in progress" in error_of(clients[other], "BF.LOADCHUNK", key, 2, pieces[1])
        elif choice == "out_of_order":
            if state == "loading":
                # A skipped piece is refused and the load kept.
                assert "was expected" in error_of(clients[db], "BF.LOADCHUNK", key, 3, pieces[1])
            else:
                assert "no load in progress" in error_of(clients[db], "BF.LOADCHUNK", key, 2, pieces[1])
        elif choice == "again":
            # Piece 1 again over a load in progress: refused, the load kept.
            assert "DEL" in error_of(clients[db], "BF.LOADCHUNK", key, 1, pieces[0])
        elif choice == "damaged_last":
            damaged = bytearray(pieces[1])
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
            assert "received bad data" in error_of(clients[db], "BF.LOADCHUNK", key, 2, bytes(damaged))
            model.pop((db, key))
        elif choice == "damaged_first":
            damaged = bytearray(pieces[0][:4096])
            damaged[rng.randrange(64)] ^= 1 << rng.randrange(8)
            assert "received bad data" in error_of(clients[db], "BF.LOADCHUNK", key, 1, bytes(damaged) + pieces[0][4096:])
        elif choice == "short":
            assert "received bad data" in error_of(clients[db], "BF.LOADCHUNK", key, 2, pieces[1][:-1000])
            model.pop((db, key))
        elif choice == "onto_filter":
            if state != "filter":
                assert load(db, key, 1, pieces[0]) and load(db, key, 2, pieces[1])
                model[(db, key)] = "filter"
            digest = clients[db].execute_command("DEBUG", "DIGEST-VALUE", key)
            assert "holds a filter" in error_of(clients[db], "BF.LOADCHUNK", key, 1, pieces[0])
            assert clients[db].execute_command("DEBUG", "DIGEST-VALUE", key) == digest
        assert primary.ping()
        check_state(db, key)
        if replica and step % 10 == 9:
            wait_until_synced(primary, replica.client())
            assert replica.client().execute_command("DEBUG", "DIGEST") == primary.execute_command("DEBUG", "DIGEST")

    try:
        assert all(steps.values()), steps
        for (db, key), state in model.items():
            check_state(db, key)
        # Abandon ten loads over both databases: each holds its first 16 MiB piece.
        for index in range(10):
            clients[index % 2].delete(f"abandoned{index}")
            load(index % 2, f"abandoned{index}", 1, pieces[0])
        wait_until_synced(primary, replica.client())
        assert replica.client().execute_command("DEBUG", "DIGEST") == primary.execute_command("DEBUG", "DIGEST")
        held = held_memory(primary) - baseline
        assert held > 10 * CHUNK_BYTES, held
        primary.flushall()
        wait_until_synced(primary, replica.client())
        assert settles_near(primary, baseline, 1 << 20)
        assert replica.client().dbsize() == 0
        assert settles_near(replica.client(), baseline, 1 << 20)
        print(f"\nsteps {steps}; held {held} bytes before FLUSHALL; baseline {baseline}, after FLUSHALL "
              f"{held_memory(primary)} (replica {held_memory(replica.client())})")
    finally:
        if replica:
            replica.stop()
