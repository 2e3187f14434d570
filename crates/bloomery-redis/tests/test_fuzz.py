"""Hostile input: 10,000 random BF.* commands and LOADCHUNK payloads. Afterwards the server
still answers and every item added before is still present."""
import random

import redis

WORDS = [b"EXPANSION", b"NONSCALING", b"CAPACITY", b"ERROR", b"ITEMS", b"NOCREATE", b"FOO",
         b"0", b"1", b"-1", b"2", b"0.5", b"1e-300", b"1e300", b"nan", b"inf", b"100000000000",
         b"18446744073709551616", b"abc", b"", b"\x00\xff"]
COMMANDS = [b"BF.RESERVE", b"BF.ADD", b"BF.MADD", b"BF.INSERT", b"BF.EXISTS", b"BF.MEXISTS",
            b"BF.CARD", b"BF.INFO", b"BF.SCANDUMP", b"BF.LOADCHUNK"]


def random_argument(rng):
    choice = rng.random()
    if choice < 0.5:
        return rng.choice(WORDS)
    if choice < 0.8:
        return str(rng.randint(-5, 10**6)).encode()
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))


def test_ten_thousand_random_commands_leave_the_server_answering(r):
    rng = random.Random(20261123)
    kept = [f"kept-{i}" for i in range(2000)]
    r.execute_command("BF.RESERVE", "kept", "0.01", "500")
    r.execute_command("BF.MADD", "kept", *kept)
    dump = []
    iterator = 0
    while True:
        iterator, data = r.execute_command("BF.SCANDUMP", "kept", iterator)
        if iterator == 0:
            break
        dump.append(data)
    keys = [b"fuzz-a", b"fuzz-b", b"kept-copy", b"str"]
    r.set("str", "v")
    errors = 0
    for _ in range(10_000):
        kind = rng.random()
        if kind < 0.2:
            # A dump with a few bytes flipped, cut or extended, at a random iterator.
            data = bytearray(rng.choice(dump))
            for _ in range(rng.randint(0, 3)):
                if data:
                    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            if rng.random() < 0.3:
                data = data[: rng.randrange(len(data) + 1)]
            if rng.random() < 0.1:
                data += bytes(rng.randint(1, 20))
            command = [b"BF.LOADCHUNK", rng.choice(keys), str(rng.choice([1, 1, 2, 0, -1])).encode(), bytes(data)]
        else:
            command = [rng.choice(COMMANDS), rng.choice(keys)] + [random_argument(rng) for _ in range(rng.randint(0, 8))]
            if rng.random() < 0.05:
                command = command[:1]
        try:
            r.execute_command(*command)
        except redis.ResponseError:
            errors += 1
    assert errors > 1000, "the fuzzer should hit many error paths"
    assert r.ping()
    assert all(r.execute_command("BF.MEXISTS", "kept", *kept))
    assert r.get("str") == b"v"
