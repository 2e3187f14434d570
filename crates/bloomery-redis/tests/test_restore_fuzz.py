"""Hostile RESTORE payloads: DUMPs of the module's values, truncated, flipped and with their
length fields changed, each with the trailer's CRC64 recomputed so that Redis accepts it
and hands it to the module's rdb_load. Before the module declared
REDISMODULE_OPTIONS_HANDLE_IO_ERRORS, 58 of 161 such payloads stopped the server ("Error
loading data from RDB (short read or EOF)"); now every one is answered and the server
keeps serving. Some changes must be accepted (a re-encoded length, the filter's bits
changed with the checksums fixed up): the mix shows that the payloads reach the module's
parsing and the library's checks rather than all dying at the first one."""
import random
import struct

from rdb_payload import Value, encode_len, envelope_with_checksums
from type_helpers import call_all, restore_served

MUTATIONS_PER_KIND = 520


def restore(client, payload):
    """True if RESTORE took the payload; whatever loaded must serve commands, and free
    cleanly (type_helpers.restore_served)."""
    return restore_served(client, payload, lambda client, key: call_all(client, [
        ("BF.INFO", key), ("BF.MEXISTS", key, "a", "b"), ("BF.ADD", key, "after")]))


def base_value(client):
    """A scalable filter with three sub-filters, as a DUMP taken apart."""
    client.config_set("rdbcompression", "no")  # strings stored raw: their fields can be found
    client.execute_command("BF.RESERVE", "base", "0.01", "50", "EXPANSION", "2")
    client.execute_command("BF.MADD", "base", *[f"item-{i}" for i in range(200)])
    assert client.execute_command("BF.INFO", "base", "FILTERS")[0] == 3
    value = Value(client.dump("base"))
    return value, value.envelope()


def test_two_thousand_mutated_dump_payloads_never_stop_the_server(r):
    rng = random.Random(20261124)
    value, envelope = base_value(r)
    body = value.body()
    start = value.module_data_offset()
    assert restore(r, value.payload(body)), "the unchanged DUMP restores"

    outcomes = {}

    def attempt(kind, payload):
        outcomes.setdefault(kind, []).append(restore(r, payload))

    # 1. Truncations: every cut inside the module's fields, trailer recomputed.
    cuts = list(range(start, len(body)))
    for cut in rng.sample(cuts, min(MUTATIONS_PER_KIND, len(cuts))):
        attempt("truncated", value.payload(body[:cut]))

    # 2. Flipped bits and bytes anywhere after the module id.
    for _ in range(MUTATIONS_PER_KIND):
        data = bytearray(body)
        for _ in range(rng.choice([1, 1, 2, 4])):
            position = rng.randrange(start, len(data))
            data[position] ^= (1 << rng.randrange(8)) if rng.random() < 0.7 else rng.randrange(1, 256)
        attempt("flipped", value.payload(bytes(data)))

    # 3. Length fields: the kind, the envelope's announced length, the string's RDB length,
    #    opcodes, and extra or missing fields; lengths also re-encoded in longer forms,
    #    which Redis reads as the same value (accepted).
    lengths = [0, 1, 2, 63, 64, len(envelope) - 1, len(envelope) + 1, 16 << 20, (16 << 20) + 1,
               1 << 31, 1 << 32, 1 << 40, 1 << 62, (1 << 64) - 1]
    for _ in range(MUTATIONS_PER_KIND):
        choice = rng.randrange(7)
        if choice == 0:
            fields = [("uint", rng.choice([1, 2, 3, 1 << 63])), ("uint", len(envelope)), ("string", envelope)]
        elif choice == 1:
            fields = [("uint", 0), ("uint", rng.choice(lengths)), ("string", envelope)]
        elif choice == 2:
            declared = rng.choice(lengths[:9])
            fields = [("uint", 0), ("uint", len(envelope)),
                      ("raw", encode_len(5) + encode_len(declared) + envelope[:declared])]
        elif choice == 3:
            # The envelope cut in two strings, or followed by an extra one.
            split = rng.randrange(1, len(envelope))
            fields = [("uint", 0), ("uint", len(envelope)), ("string", envelope[:split]), ("string", envelope[split:])]
            if rng.random() < 0.5:
                fields.append(("string", b"extra"))
        elif choice == 4:
            # A string where a number is expected, or the other way round.
            fields = [("string", b"0"), ("uint", len(envelope)), ("string", envelope)]
            if rng.random() < 0.5:
                fields = [("uint", 0), ("uint", len(envelope)), ("uint", len(envelope))]
        elif choice == 5:
            # A load in progress (kind 1) whose pieces are not those of an unfinished load.
            fields = [("uint", 1), ("uint", len(envelope)), ("string", envelope)]
        else:
            fields = value.fields
        width = rng.choice([0, 0, 5, 9])
        attempt("lengths", value.payload(value.body(fields, width)))

    # 4. The envelope's own fields changed with its checksums fixed up, so the change gets
    #    past both checksums to the library's parameter checks: version, variant, lengths,
    #    parameters (sizes, counts, rates) and bits.
    params_len = struct.unpack_from("<I", envelope, 12)[0]
    for _ in range(MUTATIONS_PER_KIND):
        data = bytearray(envelope)
        choice = rng.randrange(5)
        if choice == 0:
            struct.pack_into("<H", data, rng.choice([8, 10]), rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 0xFFFF]))
        elif choice == 1:
            struct.pack_into("<I", data, 12, rng.choice([0, params_len - 8, params_len + 8, 1 << 16, (1 << 16) + 1]))
        elif choice == 2:
            struct.pack_into("<Q", data, 16, rng.choice([0, 8, len(data), 1 << 40, 1 << 62, (1 << 64) - 1]))
        elif choice == 3:
            # A parameter: one of its bytes, or one of its 8-byte words set to an edge.
            offset = rng.randrange(32, 32 + params_len)
            if rng.random() < 0.5 or offset + 8 > 32 + params_len:
                data[offset] ^= 1 << rng.randrange(8)
            else:
                struct.pack_into("<Q", data, offset, rng.choice([0, 1, 64, 1 << 31, 1 << 63, (1 << 64) - 1]))
        else:
            # The filter's bits: accepted (a valid filter holding other bits).
            payload_at = len(data) - struct.unpack_from("<Q", envelope, 16)[0]
            data[rng.randrange(payload_at, len(data))] ^= 1 << rng.randrange(8)
        changed = envelope_with_checksums(bytes(data))
        if rng.random() < 0.2:
            changed = changed[: rng.randrange(len(changed))]
        fields = [("uint", 0), ("uint", len(changed)), ("string", changed)]
        attempt("envelope", value.payload(value.body(fields)))

    total = sum(len(results) for results in outcomes.values())
    accepted = {kind: sum(results) for kind, results in outcomes.items()}
    refused = {kind: len(results) - accepted[kind] for kind, results in outcomes.items()}
    print(f"\n{total} mutated DUMP payloads: accepted {accepted}, refused {refused}")
    assert total >= 2000
    # Every truncation inside the module's data is refused; so is a flip almost always
    # (the envelope's checksums catch it).
    assert accepted["truncated"] == 0
    assert refused["flipped"] > 0.9 * len(outcomes["flipped"])
    # The mix: payloads got through Redis's checks to the module, some far enough to load.
    assert 0 < accepted["lengths"] < len(outcomes["lengths"])
    assert 0 < accepted["envelope"] < len(outcomes["envelope"])
    # The server kept the filter it had before the storm.
    assert all(r.execute_command("BF.MEXISTS", "base", *[f"item-{i}" for i in range(200)]))
    info = r.info("keyspace")
    assert info["db0"]["keys"] == 1
