"""Differential check of bloomery's RedisBloom layout against RedisBloom itself.

Usage: redisbloom-diff.py REDISBLOOM_MODULE BLOOMERY_MODULE [CASES]

Starts two redis-servers, one with RedisBloom and one with bloomery's module under
REDISBLOOM_LAYOUT yes (and no memory cap), sends both the same random filters and items
(BF.RESERVE with random capacity, error rate, expansion or NONSCALING, then BF.MADD of
random byte strings) and compares every reply: BF.MADD, BF.DEBUG (each link's shape and
fill), BF.MEXISTS on fresh probes (the false positives) and BF.INFO. Then the paths
BF.RESERVE does not take: chains RESTOREd from crafted DUMP payloads of RedisBloom's RDB
encodings 0 to 4 with options lacking NOROUND and/or FORCE64 (RedisBloom 1.x's data), grown
by BF.MADD and compared as above and by their DUMP bytes; BF.INSERT with its options in
long and one-letter forms, valid or not (replies, BF.DEBUG, BF.INFO, DUMP); and chains'
BF.SCANDUMP pieces loaded by BF.LOADCHUNK into the other server (BF.DEBUG, items found,
DUMP, and BF.MADD after). Prints how many cases differ on each path; exits 1 if any did.
Run by `scripts/redisbloom-flow.sh` with PEER=1.
"""
import math
import os
import struct
import random
import shutil
import subprocess
import sys
import tempfile
import time

import redis


def start(module, *module_args):
    """A redis-server on a Unix socket in a fresh directory, with `module` loaded."""
    module = os.path.abspath(module)
    directory = tempfile.mkdtemp(prefix="redisbloom-diff.")
    process = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", f"{directory}/redis.sock", "--dir", directory,
         "--save", "", "--appendonly", "no", "--rdbcompression", "no", "--loadmodule", module, *module_args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(unix_socket_path=f"{directory}/redis.sock")
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return process, client, directory
        except (redis.ConnectionError, FileNotFoundError):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server with {module} did not start")
            time.sleep(0.05)


def reply(client, *command):
    """The reply, or the error's text (both servers' errors are compared too)."""
    try:
        return str(client.execute_command(*command))
    except redis.ResponseError as error:
        return f"error: {error}"


# A DUMP payload is the value's RDB bytes, the RDB version (2 bytes) and their CRC-64/Jones
# (redis src/crc64.c: reflected polynomial 0x95ac9329ac4bc9b5, initial 0).
CRC_TABLE = []
for byte in range(256):
    crc = byte
    for _ in range(8):
        crc = (crc >> 1) ^ (0x95AC9329AC4BC9B5 if crc & 1 else 0)
    CRC_TABLE.append(crc)


def crc64(data):
    crc = 0
    for byte in data:
        crc = CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def rdb_len(value):
    """rdbSaveLen's shortest form."""
    if value < 64:
        return bytes([value])
    if value < 16384:
        return bytes([0x40 | (value >> 8), value & 0xFF])
    return b"\x80" + value.to_bytes(4, "big") if value <= 0xFFFFFFFF else b"\x81" + value.to_bytes(8, "big")


def crafted_payload(probe, encoding, fields):
    """A DUMP payload of a MBbloom-- value of RDB `encoding` with these fields ("uint" n,
    "double" x or "string" b, in RedisBloom's order), after a RedisBloom key's DUMP `probe`:
    its type byte and 9-byte module id (whose low 10 bits are the encoding) and RDB version."""
    module_id = (int.from_bytes(probe[2:10], "big") & ~0x3FF) | encoding
    out = bytearray(probe[:2]) + module_id.to_bytes(8, "big")
    for kind, value in fields:
        if kind == "uint":
            out += rdb_len(2) + rdb_len(value)
        elif kind == "double":
            out += rdb_len(4) + struct.pack("<d", value)
        else:
            out += rdb_len(5) + rdb_len(len(value)) + value
    out += rdb_len(0) + probe[-10:-8]
    return bytes(out + crc64(out).to_bytes(8, "little"))


def first_link(entries, error, options):
    """The fields of an empty first link as RedisBloom's bloom_init shapes it for `options`
    (NOROUND: entries · bpe bits; else the next power of two, the capacity raised to fill it)."""
    bpe = abs(math.log(error) / 0.480453013918201)
    if options & 1:
        bits, n2 = max(int(entries * bpe), 1), 0
    else:
        n2 = math.frexp(entries * bpe)[1]  # logb + 1, exactly (log2 rounds up just below 2^k)
        bits = 1 << n2
        entries += int((bits - entries * bpe) / bpe)
    size = (bits + 63) // 64 * 8
    return [("uint", entries), ("double", error), ("uint", math.ceil(0.693147180559945 * bpe)),
            ("double", bpe), ("uint", size * 8), ("uint", n2), ("string", bytes(size)), ("uint", 0)]


def compare_chain(a, b, key, rng, items):
    """The commands that answer differently on `key` after `items` are added."""
    problems = []
    for start_at in range(0, len(items), 100):
        if reply(a, "BF.MADD", key, *items[start_at:start_at + 100]) != reply(b, "BF.MADD", key, *items[start_at:start_at + 100]):
            problems.append(f"BF.MADD from item {start_at}")
            break
    probes = [rng.randbytes(12) for _ in range(500)]
    for command in (["BF.DEBUG", key], ["BF.MEXISTS", key, *probes], ["BF.INFO", key], ["DUMP", key]):
        if reply(a, *command) != reply(b, *command):
            problems.append(command[0])
    return problems


def restored_chains(a, b, rng, cases):
    """Chains of RedisBloom 1.x's RDB encodings and options, RESTOREd into both servers."""
    a.execute_command("BF.RESERVE", "probe", 0.01, 100)
    probe = a.dump("probe")
    differing = 0
    for case in range(cases):
        key = f"restored{case}"
        encoding = rng.choice([0, 1, 2, 3, 4])
        options = rng.choice([0, 1, 4, 5]) | (8 if rng.random() < 0.15 else 0) if encoding >= 2 else 0
        growth = rng.choice([1, 2, 3, 4])
        if encoding == 0:
            # No bit count stored: RedisBloom takes entries · bpe, which must be the buffer's.
            entries = rng.choice([64, 128, 640])
            link = [("uint", entries), ("double", math.exp(-10 * 0.480453013918201)), ("uint", 7),
                    ("double", 10.0), ("string", bytes(entries * 10 // 8)), ("uint", 0)]
        else:
            link = first_link(rng.choice([1, 3, 10, 100, 1000]), rng.choice([0.5, 0.1, 0.01, 0.001]), options)
        chain = [("uint", 0), ("uint", 1)] + [("uint", options)] * (encoding >= 2) + [("uint", growth)] * (encoding >= 4)
        payload = crafted_payload(probe, encoding, chain + link)
        problems = []
        restored = reply(a, "RESTORE", key, 0, payload), reply(b, "RESTORE", key, 0, payload)
        if restored[0] != restored[1]:
            problems.append("RESTORE")
        elif restored[0].startswith("error"):
            # Both refusing the crafted payload would leave BF.MADD to make default chains
            # on both, which answer alike without testing what this is for.
            problems.append(f"RESTORE refused by both ({restored[0]})")
        else:
            items = [rng.randbytes(rng.randrange(0, 30)) for _ in range(rng.choice([50, 500, 3000]))]
            problems += compare_chain(a, b, key, rng, items)
        if problems:
            differing += 1
            print(f"  encoding {encoding}, options {options}, growth {growth}: {', '.join(problems)} differ")
    return differing


def inserts(a, b, rng, cases):
    """BF.INSERT with random options in their long and one-letter forms, on new keys and
    again on existing ones."""
    differing = 0
    for case in range(cases):
        key = f"insert{case}"
        command = ["BF.INSERT", key]
        for forms, values in ((["CAPACITY", "CAP", "C", "capacity", "CAPX"], [1, 5, 100, 1000, 7, 0, "x"]),
                              (["ERROR", "ERR", "E", "error"], [0.01, 0.5, 0.001, 0.1, 0.05, 1, "y"]),
                              (["EXPANSION", "EXP", "X", "expansion"], [1, 2, 3, 4, 2, 0, "z"])):
            if rng.random() < 0.5:
                command += [rng.choice(forms), rng.choice(values)]
        if rng.random() < 0.3:
            command.append(rng.choice(["NONSCALING", "NONS", "N", "nonscaling"]))
        if rng.random() < 0.2:
            command.append(rng.choice(["NOCREATE", "NOC"]))
        if rng.random() < 0.8:
            command += [rng.choice(["ITEMS", "I", "items", "IT"]),
                        *[rng.randbytes(rng.randrange(0, 20)) for _ in range(rng.choice([0, 1, 10, 150]))]]
        problems = [f"{command[0]} {attempt}" for attempt in range(rng.choice([1, 2]))
                    if reply(a, *command) != reply(b, *command)]
        probes = [rng.randbytes(8) for _ in range(200)]
        for check in (["BF.DEBUG", key], ["BF.INFO", key], ["BF.MEXISTS", key, *probes], ["DUMP", key]):
            if reply(a, *check) != reply(b, *check):
                problems.append(check[0])
        if problems:
            differing += 1
            print(f"  {' '.join(map(str, command[:12]))}: {', '.join(problems)} differ")
    return differing


def moved_by_scandump(source, target, key, copy):
    """Loads `key`'s BF.SCANDUMP pieces from `source` into `copy` on `target`."""
    iterator = 0
    while True:
        iterator, data = source.execute_command("BF.SCANDUMP", key, iterator)
        if iterator == 0:
            return
        target.execute_command("BF.LOADCHUNK", copy, iterator, data)


def scandumps_across(a, b, rng, keys):
    """Each of `keys`, on both servers, moved by BF.SCANDUMP/BF.LOADCHUNK into the other one."""
    differing = 0
    for key in keys:
        present = [key.encode()]
        for source, target, direction in ((a, b, "RedisBloom to bloomery"), (b, a, "bloomery to RedisBloom")):
            if not source.exists(key) or source.type(key) != b"MBbloom--":
                continue
            copy = f"{key}.copy"
            moved_by_scandump(source, target, key, copy)
            problems = [name for name, left, right in (
                ("BF.DEBUG", ["BF.DEBUG", key], ["BF.DEBUG", copy]),
                ("DUMP", ["DUMP", key], ["DUMP", copy])) if reply(source, *left) != reply(target, *right)]
            more = [rng.randbytes(10) for _ in range(300)]
            if reply(source, "BF.MADD", key, *more) != reply(target, "BF.MADD", copy, *more):
                problems.append("BF.MADD after")
            elif reply(source, "BF.MEXISTS", key, *more, *present) != reply(target, "BF.MEXISTS", copy, *more, *present):
                problems.append("items found")
            target.delete(copy)
            if problems:
                differing += 1
                print(f"  {key} {direction}: {', '.join(problems)} differ")
    return differing


def main():
    peer_module, bloomery_module = sys.argv[1], sys.argv[2]
    cases = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    peer, a, peer_dir = start(peer_module)
    ours, b, our_dir = start(bloomery_module, "REDISBLOOM_LAYOUT", "yes", "MAX_FILTER_MEMORY", "0")
    try:
        rng = random.Random(2628)
        differing = 0
        for case in range(cases):
            key = f"k{case}"
            capacity = rng.choice([1, 3, 10, 100, 1000, 7777])
            rate = rng.choice([0.5, 0.3333, 0.1, 0.05, 0.01, 0.001, 1e-5])
            options = ["NONSCALING"] if rng.random() < 0.2 else ["EXPANSION", rng.choice([1, 2, 3, 4])]
            reserve = ["BF.RESERVE", key, rate, capacity, *options]
            a.execute_command(*reserve)
            b.execute_command(*reserve)
            items = [rng.randbytes(rng.randrange(0, 40)) for _ in range(rng.choice([10, 200, 3000]))]
            problems = []
            for start_at in range(0, len(items), 100):
                batch = items[start_at:start_at + 100]
                replies = [[str(reply) for reply in client.execute_command("BF.MADD", key, *batch)]
                           for client in (a, b)]
                if replies[0] != replies[1]:
                    problems.append(f"BF.MADD from item {start_at}")
                    break
            probes = [rng.randbytes(12) for _ in range(500)]
            for command in (["BF.DEBUG", key], ["BF.MEXISTS", key, *probes], ["BF.INFO", key]):
                if a.execute_command(*command) != b.execute_command(*command):
                    problems.append(command[0])
            if problems:
                differing += 1
                print(f"  {' '.join(map(str, reserve))}: {', '.join(problems)} differ")
        print(f"RedisBloom layout against RedisBloom: {cases - differing} of {cases} random cases "
              f"answer alike (BF.MADD, BF.DEBUG, BF.MEXISTS, BF.INFO)")
        restored = restored_chains(a, b, rng, cases)
        print(f"  RESTOREd RedisBloom 1.x chains (encodings 0-4, with and without NOROUND and FORCE64): "
              f"{cases - restored} of {cases} grow alike (also their DUMP)")
        inserted = inserts(a, b, rng, 2 * cases)
        print(f"  BF.INSERT with random options: {2 * cases - inserted} of {2 * cases} alike")
        keys = [f"k{case}" for case in range(cases)] + [f"restored{case}" for case in range(cases)]
        moved = scandumps_across(a, b, rng, keys)
        print(f"  BF.SCANDUMP into BF.LOADCHUNK on the other server: {2 * len(keys) - moved} of "
              f"{2 * len(keys)} alike")
        differing += restored + inserted + moved
        print(f"RedisBloom layout against RedisBloom: {'no' if not differing else differing} "
              f"differing cases in all")
        return 1 if differing else 0
    finally:
        for process in (peer, ours):
            process.terminate()
            process.wait()
        for directory in (peer_dir, our_dir):
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
