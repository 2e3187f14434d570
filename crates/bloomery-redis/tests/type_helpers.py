"""What test_aging.py and test_counting.py share: replicas, digests, restarts, and hostile
DUMP/RESTORE and BF.LOADCHUNK payloads of a key, mutated as test_restore_fuzz.py mutates
BF's (truncated, flipped, and the envelope's own fields changed with both checksums fixed
up, so a change reaches the library's parameter checks and, where it passes them, the
module's commands)."""
import random
import struct
import time

import redis

from conftest import Server, dump
from rdb_payload import Value, envelope_with_checksums


def digest(client, key) -> bytes:
    return client.execute_command("DEBUG", "DIGEST-VALUE", key)[0]


def start_replica(tmp_path, primary: Server, *extra, module_args=()) -> Server:
    # A full sync at once, not after Redis's 5 s wait for more replicas.
    primary.client().config_set("repl-diskless-sync-delay", "0")
    directory = tmp_path / "replica"
    directory.mkdir(exist_ok=True)
    replica = Server(directory, "--replicaof", "127.0.0.1", str(primary.port), *extra,
                     module_args=module_args).start()
    deadline = time.monotonic() + 30
    while replica.client().info("replication")["master_link_status"] != "up":
        assert time.monotonic() < deadline, "the replica did not sync"
        time.sleep(0.05)
    return replica


def restart(server: Server):
    server.stop()
    server.start()
    return server.client()


def wait_for_rewrite(client):
    deadline = time.monotonic() + 30
    while client.info("persistence")["aof_rewrite_in_progress"] or \
            client.info("persistence")["aof_rewrite_scheduled"]:
        assert time.monotonic() < deadline, "the AOF rewrite did not finish"
        time.sleep(0.05)
    assert client.info("persistence")["aof_last_bgrewrite_status"] == "ok"


def server_time_ms(client) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def mutated_envelope(rng, envelope: bytes, fields) -> bytes:
    """The envelope with one of its header fields, one of the variant's parameter `fields`
    ((offset into the parameters, width in bytes)), a random parameter byte or a payload
    bit changed, both checksums recomputed; sometimes then cut short."""
    data = bytearray(envelope)
    params_len = struct.unpack_from("<I", envelope, 12)[0]
    payload_len = struct.unpack_from("<Q", envelope, 16)[0]
    choice = rng.randrange(6)
    if choice == 0:
        struct.pack_into("<H", data, rng.choice([8, 10]), rng.choice([0, 1, 2, 3, 7, 8, 11, 0xFFFF]))
    elif choice == 1:
        struct.pack_into("<I", data, 12, rng.choice([0, params_len - 4, params_len + 8, 1 << 16]))
    elif choice in (2, 3):
        offset, width = rng.choice(fields)
        edges = [0, 1, 2, 3, 15, 1023, 1024, 1025, 1 << 20, (1 << 31) - 1, 1 << 31, (1 << 32) - 1]
        if width == 8:
            edges += [1 << 40, 1 << 53, 1 << 62, (1 << 63) - 1, (1 << 64) - 1,
                      struct.unpack("<Q", struct.pack("<d", rng.choice([0.5, 1.0, -0.01, 1e-300, float("nan")])))[0]]
        value = rng.choice([edge for edge in edges if edge < 1 << (8 * width)])
        data[32 + offset:32 + offset + width] = value.to_bytes(width, "little")
    elif choice == 4:
        data[32 + rng.randrange(params_len)] ^= 1 << rng.randrange(8)
    else:
        # The bits or counters: a valid filter holding other bits (accepted).
        data[len(data) - 1 - rng.randrange(payload_len)] ^= 1 << rng.randrange(8)
    changed = envelope_with_checksums(bytes(data))
    if rng.random() < 0.15:
        changed = changed[: rng.randrange(len(changed))]
    return changed


def restore_served(client, payload, serve) -> bool:
    """True if RESTORE took `payload` as `fuzzed`; then it is served by `serve(client,
    "fuzzed")` and deleted. The server must answer PING either way."""
    try:
        client.restore("fuzzed", 0, payload, replace=True)
        accepted = True
    except redis.ResponseError:
        accepted = False
    assert client.ping(), "the server stopped answering"
    if accepted:
        serve(client, "fuzzed")
        assert client.ping(), "the server stopped answering a command on a restored value"
        client.delete("fuzzed")
    return accepted


def any_command(rng, keys, commands, reads, words, word_share, largest, most_words):
    """A random command of `commands` on one of `keys` (a read sometimes on b"model"),
    with up to `most_words` arguments: words of `words` (a `word_share` of them) or
    numbers from -5 to `largest`."""
    command = rng.choice(commands)
    key = b"model" if command in reads and rng.random() < 0.4 else rng.choice(keys)
    arguments = [rng.choice(words) if rng.random() < word_share else str(rng.randint(-5, largest)).encode()
                 for _ in range(rng.randint(0, most_words))]
    return [command, key, *arguments]


def fuzz_restore(client, key, rng: random.Random, per_kind: int, serve, fields) -> dict:
    """Mutated DUMPs of `key` RESTOREd as `fuzzed`: truncated inside the module's data,
    flipped, and with the envelope's fields changed behind fixed-up checksums. Whatever
    loads is served by `serve(client, "fuzzed")` and deleted; the server must answer PING
    after each. Returns kind -> [accepted?]."""
    client.config_set("rdbcompression", "no")
    value = Value(client.dump(key))
    envelope = value.envelope()
    body = value.body()
    start = value.module_data_offset()
    outcomes = {}

    def attempt(name, payload):
        outcomes.setdefault(name, []).append(restore_served(client, payload, serve))

    attempt("unchanged", value.payload(body))
    cuts = list(range(start, len(body)))
    for cut in rng.sample(cuts, min(per_kind, len(cuts))):
        attempt("truncated", value.payload(body[:cut]))
    for _ in range(per_kind):
        data = bytearray(body)
        for _ in range(rng.choice([1, 1, 2, 4])):
            data[rng.randrange(start, len(data))] ^= 1 << rng.randrange(8)
        attempt("flipped", value.payload(bytes(data)))
    for _ in range(per_kind):
        changed = mutated_envelope(rng, envelope, fields)
        attempt("envelope", value.payload(value.body([("uint", 0), ("uint", len(changed)), ("string", changed)])))
    return outcomes


def fuzz_loadchunk(client, key, rng: random.Random, count: int, serve, fields) -> dict:
    """`BF.SCANDUMP` of `key` (one piece), mutated and sent to `BF.LOADCHUNK fuzzed-load
    1`: raw flips and cuts (the checksums must refuse them) and field changes behind
    fixed-up checksums. Whatever loads is served by `serve`. Returns kind -> [state], a
    state being "refused", "loading" (a cut piece waits for the rest) or "filter"."""
    pieces = dump(client, key)
    assert len(pieces) == 1
    envelope = pieces[0][1]
    outcomes = {}
    for _ in range(count):
        if rng.random() < 0.3:
            name = "raw"
            data = bytearray(envelope)
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            if rng.random() < 0.3:
                data = data[: rng.randrange(len(data))]
            data = bytes(data)
        else:
            name = "envelope"
            data = mutated_envelope(rng, envelope, fields)
        client.delete("fuzzed-load")
        try:
            client.execute_command("BF.LOADCHUNK", "fuzzed-load", 1, data)
            state = "filter"
        except redis.ResponseError:
            state = "refused"
        assert client.ping(), "the server stopped answering"
        if state == "filter":
            try:
                client.execute_command("BF.CARD", "fuzzed-load")
            except redis.ResponseError as error:
                # A cut envelope is a load in progress, waiting for its next piece.
                assert "still being loaded" in str(error), error
                state = "loading"
        if state == "filter":
            serve(client, "fuzzed-load")
            assert client.ping(), "the server stopped answering a command on a loaded value"
        outcomes.setdefault(name, []).append(state)
    client.delete("fuzzed-load")
    return outcomes


def fuzz_and_check(client, key, rng: random.Random, serve, fields, count: int = 600):
    """`count` mutated RESTORE payloads of each kind and `count` mutated BF.LOADCHUNK
    pieces of the value at `key`, and what they must come to: the unchanged payload
    restores, no truncation and few flips pass (the CRC and the envelope's checksums catch
    them), and past both checksums some envelope changes load and others are refused (so
    the mutations reach the parameter checks and the commands). The server answers
    throughout."""
    outcomes = fuzz_restore(client, key, rng, count, serve, fields)
    accepted = {kind: sum(results) for kind, results in outcomes.items()}
    print(f"\nRESTORE: accepted {accepted} of {({kind: len(v) for kind, v in outcomes.items()})}")
    assert outcomes["unchanged"] == [True]
    assert accepted["truncated"] == 0
    assert accepted["flipped"] < 0.1 * len(outcomes["flipped"])
    assert 0.05 * len(outcomes["envelope"]) < accepted["envelope"] < 0.95 * len(outcomes["envelope"])

    loads = fuzz_loadchunk(client, key, rng, count, serve, fields)
    states = {kind: {state: results.count(state) for state in set(results)} for kind, results in loads.items()}
    print(f"LOADCHUNK: {states}")
    assert states["raw"].get("filter", 0) == 0
    assert 0 < states["envelope"].get("filter", 0) < len(loads["envelope"]) - 10
    assert client.ping()


def call_all(client, commands):
    """Runs each command, ignoring error replies (a mutated value may refuse some)."""
    for command in commands:
        try:
            client.execute_command(*command)
        except redis.ResponseError:
            pass
