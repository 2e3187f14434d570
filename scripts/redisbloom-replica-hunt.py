#!/usr/bin/env python3
"""Randomized differential hunt for false negatives on bloomery replicas of a RedisBloom
primary: a real RedisBloom 2.6.28 primary, bloomery replicas of it, and bloomery replaying
the AOF RedisBloom's server wrote. The promise checked: an item the RedisBloom primary
accepted (an add's answer of 0 or 1, not an error) and still reports present (BF.MEXISTS)
is reported present by

- bloomery replicas attached from the start, REDISBLOOM_LAYOUT no and yes, with the
  primary's load arguments, and (where the primary has some) with the defaults;
- bloomery loading the primary's AOF of the sequence (the commands as RedisBloom's
  server wrote them), both layouts, with the primary's load arguments and the defaults;
- a bloomery replica started after the sequence (a full sync from RedisBloom's RDB), a
  replica after DEBUG RELOAD (bloomery's own RDB), and bloomery loading the AOF
  RedisBloom rewrote (BGREWRITEAOF: its BF.LOADCHUNK form).

A server that stops or does not start, a panic in its log, and a bloomery replica's log
line "sending an error to its master" for a command RedisBloom's own replica (a control
attached alike) did not refuse, are failures too. Expected, and only counted: on a replica
whose defaults differ from the primary's, items BF.LOADCHUNK data pieces copied into a key
an add made from the defaults (its shape differs there, so RedisBloom's own replica loses
them too), and that replica's refusals of such pieces.

Each sequence is 3 to 40 random commands over a handful of keys (a, b, c, d, e, and the
rarer nonscaling, expansion, NONSCALING, k{x}): BF.RESERVE (rates tiny, near 1, hex
floats, odd spellings; capacities 1..10^6 and a few huge; EXPANSION 1..2^40 and
2^63 - 1, NONSCALING, words RedisBloom ignores), BF.ADD, BF.MADD, BF.INSERT (options in
any order, RedisBloom's abbreviations, NOCREATE, repeated options), BF.SCANDUMP of a key
loaded by BF.LOADCHUNK into another (header and pieces; data pieces only into an existing
key, a key reserved alike or added from the defaults; pieces split at random offsets),
DUMP/RESTORE, MULTI/EXEC blocks, DEL, RENAME, COPY, and a string key (WRONGTYPE). Items
include the empty string, binary and 1000-byte ones, and repeats. Parameters whose links
RedisBloom would allocate and zero past 32 MB (up to 1 PB, which it cannot allocate at
all) are avoided: gigabytes on every server, or the kernel's OOM killer. The primary's
load arguments (INITIAL_SIZE, ERROR_RATE) are drawn per environment; environments are
restarted every --per-env sequences, and after a failure.

Usage:
  scripts/redisbloom-replica-hunt.py [--seed N] [--sequences N] [--start I] [--minutes M]
      [--per-env N] [--redisbloom SO] [--bloomery SO] [--ports LOW-HIGH] [--out DIR]
  scripts/redisbloom-replica-hunt.py --seed N --per-env P --only I   # one sequence again

Defaults: seed 1, 300 sequences, ports 23000-23499, target/peer/redisbloom-2.6.28.so
(scripts/redisbloom-peer.sh builds it), target/release/libbloomery_redis.so, out
target/hunt-out. Needs redis-server and redis-py. Sequence i of seed s is drawn from
random.Random(f"{s}:{i}"), its environment from that of its first sequence
(i - i % per-env), so (seed, per-env, i) reproduces it. Each failure is written to
DIR/fail-<seed>-<i>.json (environment, generated commands, the commands sent with
RedisBloom's replies, the problems). Prints per-command counts at the end; exits 1 if any
sequence failed.
"""
import argparse
import json
import math
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RB = ROOT / "target/peer/redisbloom-2.6.28.so"
DEFAULT_BLOOMERY = ROOT / "target/release/libbloomery_redis.so"

# ---------------------------------------------------------------------------- servers


class Ports:
    def __init__(self, low, high):
        self.low, self.high, self.next = low, high, low

    def take(self):
        for _ in range(self.high - self.low + 1):
            port = self.next
            self.next = self.low if self.next >= self.high else self.next + 1
            with socket.socket() as sock:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
        raise RuntimeError("no free port")


class Server:
    def __init__(self, name, ports, directory, module, module_args=(), extra=()):
        self.name = name
        self.ports = ports
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.module = module
        self.module_args = list(module_args)
        self.extra = list(extra)
        self.process = None
        self.port = None
        self.log = self.directory / "redis.log"
        self.log_offset = 0

    def start(self, wait=True):
        # A port another process took between the check and the bind: another one.
        for attempt in range(5):
            try:
                return self.start_once(wait)
            except RuntimeError:
                if attempt == 4 or "Address already in use" not in self.tail(5):
                    raise

    def start_once(self, wait=True):
        self.port = self.ports.take()
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--save", "", "--appendonly", "no", "--logfile", str(self.log), "--enable-debug-command", "yes",
             "--loadmodule", str(self.module), *self.module_args, *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait:
            return self
        client = self.client()
        deadline = time.monotonic() + 20
        while True:
            try:
                if client.ping() and client.info("server")["process_id"] == self.process.pid:
                    return self
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} did not start: {self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start in time")
            time.sleep(0.03)

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=60)

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def new_log(self):
        try:
            with open(self.log, "rb") as f:
                f.seek(self.log_offset)
                data = f.read()
                self.log_offset += len(data)
                return data.decode(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, n=30):
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


BAD_LOG = ("panic", "sending an error to its master", "Guru Meditation", "crashed by signal", "ASSERTION FAILED")


def command_of(line):
    marker = "after processing the command '"
    if "sending an error to its master" not in line or marker not in line:
        return None
    return line.split(marker, 1)[1].split("'", 1)[0].lower()


def errors_to_master(lines):
    counts = {}
    for line in lines:
        command = command_of(line)
        if command:
            counts[command] = counts.get(command, 0) + 1
    return counts


def log_problems(text):
    return [line for line in text.splitlines() if any(bad in line for bad in BAD_LOG)]


# ----------------------------------------------------------------------- generation

RATES = ["0.01", "0.001", "0.1", "0.05", "0.5", "0.9", "0.99", "0.999999", "0.25", "0.3", "1e-5", "1E-10",
         "1e-30", "1e-100", "1e-300", "4.9e-324", "2.2250738585072014e-308", "0x1p-7", "0X1.47AE147AE147BP-7",
         "0x.8p0", ".5", "5e-1", "+0.01", "0.0100", "1e-2", "0.99999999999999989", "0.9999999999999999999",
         "0.2500001", "0.75", "1e-400", "1", "0", "-0.01", "abc", "0.01 ", "nan", "inf", "0x1p-1022", "1e-15",
         "0.000001", "7e-3", "0.0001", "3.3e-7"]
EXPANSIONS = ["1", "2", "3", "4", "5", "7", "8", "16", "100", "1000", "32768", "32769", "40000", "65536",
              "1048576", str(2**31 - 1), str(2**31), str(2**32 - 1), str(2**32), str(2**32 + 1), str(2**32 + 2),
              str(2**32 + 3), str(2**33), str(2**33 + 1), str(2**33 + 2), str(2**40 + 1), "0", "-1",
              str(2**63 - 1), "01", "+2", "2.0"]
GOOD_EXP = [e for e in EXPANSIONS if e.isdigit() and not e.startswith("0") and int(e) >= 1]
# Items a sequence sends at most (so any key gets at most this many): the chains' growth
# is checked this far.
MAX_ITEMS_PER_KEY = 8000


def capacity(rng):
    r = rng.random()
    if r < 0.3:
        return str(rng.randint(1, 10))
    if r < 0.6:
        return str(rng.randint(11, 300))
    if r < 0.85:
        return str(int(10 ** rng.uniform(2.5, 5)))
    if r < 0.92:
        return str(rng.choice([1000000, 999999, 500000]))
    if r < 0.96:
        return rng.choice(["0", "-5", "01", "+5", "1.5", "x", "9223372036854775808"])
    return rng.choice(["9223372036854775807", "2000000000000000000"])


def parse_rate(text):
    try:
        value = float.fromhex(text) if "x" in text.lower() else float(text)
    except ValueError:
        return None
    return value if 0 < value < 1 else None


def link_bytes(entries, rate):
    """RedisBloom's link of `entries` at `rate` (NOROUND): its bytes, or None where
    RedisBloom wraps the bits (2^64 or more: one word)."""
    if rate <= 0:
        return 0
    bits = entries * (-math.log(rate) / (math.log(2) ** 2))
    if bits >= 2.0 ** 64:
        return None
    return bits / 8


SMALL_LINK = 1 << 25        # 32 MB: every server holds it
UNALLOCATABLE = 10 ** 15    # 1 PB: RedisBloom's RM_TryAlloc fails, nothing is touched


def safe_chain(cap_text, rate_text, exp_text="2", nonscaling=False, items=None):
    """Whether a chain of these parameters stays small on every server for the items a key
    gets: each link either small, or one RedisBloom cannot allocate at all (a link between
    would be allocated and zeroed by RedisBloom: gigabytes, or an OOM kill)."""
    try:
        cap = int(cap_text)
    except ValueError:
        return True
    rate = parse_rate(rate_text)
    if rate is None or cap < 1:
        return True
    rate = rate if nonscaling else rate / 2
    growth = growth_of(exp_text)
    total, entries = 0, cap
    while total < (items or MAX_ITEMS_PER_KEY + 5):
        size = link_bytes(entries, rate)
        if size is not None and SMALL_LINK < size < UNALLOCATABLE:
            return False
        if size is not None and size >= UNALLOCATABLE or nonscaling or growth == 0:
            return True
        total += entries
        entries *= growth
        rate /= 2
    return True


def tame(rate, cap):
    """A capacity whose first link stays small at this rate (or cannot be allocated)."""
    for candidate in (cap, "100000", "10000", "1000", "10"):
        if safe_chain(candidate, rate, "1", nonscaling=True, items=1):
            return candidate
    return "10"


def growth_of(expansion_text):
    """The growth RedisBloom keeps of an EXPANSION (an unsigned 32-bit copy)."""
    try:
        value = int(expansion_text)
    except ValueError:
        return 2
    return value % (1 << 32)


def safe_growth(cap_text, exp_text):
    return safe_chain(cap_text, "1e-9", exp_text)


def pick_expansion(rng, cap_text):
    for _ in range(50):
        exp = rng.choice(EXPANSIONS if rng.random() < 0.15 else GOOD_EXP)
        if safe_growth(cap_text, exp):
            return exp
    return "2"


def spell(rng, word, forms):
    return rng.choice(forms) if rng.random() < 0.5 else rng.choice([word, word.lower(), word.capitalize()])


class Gen:
    def __init__(self, rng, tag):
        self.rng = rng
        self.tag = tag
        self.counter = 0
        self.sent = []
        base = ["a", "b", "c", "d", "e"]
        self.keys = base + ["nonscaling", "expansion", "NONSCALING", "k{x}"]

    def key(self):
        rng = self.rng
        return rng.choice(self.keys[:5]) if rng.random() < 0.9 else rng.choice(self.keys[5:])

    def item(self):
        rng = self.rng
        r = rng.random()
        if self.sent and r < 0.1:
            return rng.choice(self.sent)
        if r < 0.12:
            return rng.choice([b"", b"\x00", b"\xff\xfe\x00x", b"x" * 1000, "é".encode()])
        self.counter += 1
        value = f"{self.tag}-{self.counter}"
        self.sent.append(value)
        return value

    def items(self, most=60):
        rng = self.rng
        n = rng.choice([1, 1, 2, 3, 5, 10, 20, rng.randint(1, most), rng.randint(most, most * 3)])
        if self.counter + n > MAX_ITEMS_PER_KEY - 200:
            n = 1
        return [self.item() for _ in range(n)]

    def reserve(self, key):
        rng = self.rng
        rate = rng.choice(RATES) if rng.random() < 0.6 else rng.choice(RATES[:12])
        cap = tame(rate, capacity(rng))
        args = ["BF.RESERVE", key, rate, cap]
        opts = []
        r = rng.random()
        if r < 0.25:
            opts.append(spell(rng, "NONSCALING", ["NONSCALING", "nonscaling", "NonScaling"]))
        elif r < 0.6:
            opts += [spell(rng, "EXPANSION", ["EXPANSION", "expansion", "Expansion"]), pick_expansion(rng, cap)]
        elif r < 0.7:
            opts += ["NONSCALING", "EXPANSION", pick_expansion(rng, cap)]
        if rng.random() < 0.2:
            junk = rng.choice([["WINDOW"], ["AT"], ["LAYOUT", "x"], ["LAYOUT", "bloomery"], ["LAYOUT", "redisbloom"],
                               ["FOO"], ["SECONDS", "5"], ["GENERATIONS", "3"], ["EXP", "3"], ["NONS"], ["ITEMS"]])
            pos = rng.randint(0, len(opts))
            opts[pos:pos] = junk
        if rng.random() < 0.05:
            opts = opts[:-1]  # "EXPANSION" last: ERR no expansion
        words = [w.upper() for w in opts]
        exp = opts[words.index("EXPANSION") + 1] if "EXPANSION" in words[:-1] else "2"
        if not safe_chain(cap, rate, exp, "NONSCALING" in words):
            return ["BF.RESERVE", key, rate, "100"]
        return args + opts

    def insert(self, key):
        rng = self.rng
        opts = []
        chosen = rng.sample(["CAPACITY", "ERROR", "EXPANSION", "NOCREATE", "NONSCALING"], rng.randint(0, 4))
        cap = capacity(rng)
        rate = rng.choice(RATES) if rng.random() < 0.6 else rng.choice(RATES[:12])
        cap = tame(rate, cap)
        for option in chosen:
            if option == "CAPACITY":
                opts += [rng.choice(["CAPACITY", "capacity", "CAP", "c", "C", "Cx", "cap"]), cap]
            elif option == "ERROR":
                opts += [rng.choice(["ERROR", "error", "ERR", "er", "ER", "errorrate", "ERROR"]), rate]
            elif option == "EXPANSION":
                opts += [rng.choice(["EXPANSION", "expansion", "EXP", "e", "E", "EX", "Expand"]),
                         pick_expansion(rng, cap if "CAPACITY" in chosen else "100")]
            elif option == "NOCREATE":
                opts.append(rng.choice(["NOCREATE", "nocreate", "NOC", "noc", "NOCx"]))
            else:
                opts.append(rng.choice(["NONSCALING", "nonscaling", "NONS", "no", "NO", "NX", "nons"]))
        if rng.random() < 0.04:
            opts.insert(rng.randint(0, len(opts)), rng.choice(["FOO", "WINDOW", "LAYOUT", "x"]))
        if rng.random() < 0.1 and opts:
            opts += opts[:2]  # a repeated option: the last wins
        values = {}
        pos = 0
        while pos < len(opts):
            first = opts[pos][:1].lower()
            if first in ("c", "e") and pos + 1 < len(opts):
                kind = "c" if first == "c" else ("r" if opts[pos][1:2].lower() == "r" else "x")
                values[kind] = opts[pos + 1]
                pos += 2
            else:
                if first == "n" and opts[pos][2:3].lower() != "c":
                    values["n"] = True
                pos += 1
        if not safe_chain(values.get("c", "100"), values.get("r", "0.01"), values.get("x", "2"), "n" in values):
            opts = []
        items_word = rng.choice(["ITEMS", "items", "I", "i", "ITEMSX", "Items"])
        return ["BF.INSERT", key, *opts, items_word, *self.items()]

    def command(self):
        """One command (a list), or a ('multi', [...]) block, or ('dump', ...) meta-ops."""
        rng = self.rng
        r = rng.random()
        key = self.key()
        if r < 0.16:
            return self.reserve(key)
        if r < 0.30:
            return ["BF.ADD", key, self.item()]
        if r < 0.48:
            return ["BF.MADD", key, *self.items()]
        if r < 0.70:
            return self.insert(key)
        if r < 0.78:
            return ("pieces", key, self.key(), rng.choice(["whole", "data", "data", "split", "header-only",
                                                             "reserve-alike", "add-alike"]))
        if r < 0.81:
            return ("restore", key, self.key(), rng.random() < 0.5)
        if r < 0.87:
            return ("multi", [self.command_plain() for _ in range(rng.randint(1, 5))])
        if r < 0.91:
            return ["DEL", key]
        if r < 0.95:
            return ["RENAME", key, self.key()]
        if r < 0.97:
            return ["COPY", key, self.key()] + (["REPLACE"] if rng.random() < 0.5 else [])
        if r < 0.98:
            return ["SET", key, "string"]
        return ["BF.ADD", key, self.item()]

    def command_plain(self):
        while True:
            command = self.command()
            if isinstance(command, list):
                return command


def sequence_commands(rng, tag, count):
    gen = Gen(rng, tag)
    return [gen.command() for _ in range(count)]


# --------------------------------------------------------------------------- running


def encode(word):
    return word if isinstance(word, bytes) else str(word).encode()


def jsonable(value):
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return {"hex": value.hex()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(jsonable(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, Exception):
        return f"error: {value}"
    return value


def insert_items_at(words):
    """Where BF.INSERT's items start, read as RedisBloom reads its options."""
    pos = 2
    while pos < len(words):
        first = words[pos][:1].lower()
        if first == b"i":
            return pos + 1
        pos += 2 if first in (b"e", b"c") else 1
    return len(words)


class Model:
    """key -> items the primary accepted into the filter now at that key; how each key's
    filter was made ("default": from the server's defaults, by an add; "explicit": by
    BF.RESERVE, BF.INSERT with CAPACITY and ERROR, a BF.LOADCHUNK header or RESTORE);
    and the keys whose default-made filter got BF.LOADCHUNK data pieces ("suspect"): a
    replica with other defaults has another shape there, where RedisBloom's pieces do
    not land alike (RedisBloom's own replica would lose those items too)."""

    def __init__(self):
        self.items = {}
        self.kinds = {}
        self.suspect = set()
        # Whether any data piece went into a key made from the defaults (a replica with
        # other defaults refuses such a piece that does not fit its shape there).
        self.defaults_pieces = False

    def forget(self, key):
        self.items.pop(key, None)
        self.kinds.pop(key, None)
        self.suspect.discard(key)

    def accepted(self, command, reply):
        name = command[0].upper()
        if isinstance(reply, Exception):
            return
        key = encode(command[1])
        if name in ("BF.ADD", "BF.MADD", "BF.INSERT"):
            words = [encode(w) for w in command]
            if name == "BF.ADD":
                at, answers = 2, [reply]
            elif name == "BF.MADD":
                at, answers = 2, reply
            else:
                at, answers = insert_items_at(words), reply
            if key not in self.kinds:
                explicit = name == "BF.INSERT" and {w[:1].lower() for w in words[2:at - 1]} >= {b"c", b"e"} \
                    and any(w[:2].lower() == b"er" for w in words[2:at - 1])
                self.kinds[key] = "explicit" if explicit else "default"
            for item, answer in zip(words[at:], answers):
                if not isinstance(answer, Exception):
                    self.items.setdefault(key, set()).add(item)
        elif name == "BF.RESERVE":
            self.kinds[key] = "explicit"
        elif name == "BF.LOADCHUNK":
            if key not in self.kinds:
                self.kinds[key] = "explicit"
            elif self.kinds[key] == "default":
                self.suspect.add(key)
                self.defaults_pieces = True
        elif name == "RESTORE":
            self.kinds[key] = "explicit"
            self.suspect.discard(key)
        elif name == "DEL":
            self.forget(key)
        elif name == "RENAME":
            target = encode(command[2])
            items, kind, suspect = self.items.pop(key, set()), self.kinds.pop(key, None), key in self.suspect
            self.suspect.discard(key)
            self.forget(target)
            self.items[target] = items
            if kind:
                self.kinds[target] = kind
            if suspect:
                self.suspect.add(target)
        elif name == "COPY":
            if reply == 1:
                target = encode(command[2])
                self.forget(target)
                self.items[target] = set(self.items.get(key, set()))
                if key in self.kinds:
                    self.kinds[target] = self.kinds[key]
                if key in self.suspect:
                    self.suspect.add(target)
        elif name == "SET":
            self.forget(key)
            self.kinds[key] = "string"


def run_command(client, command):
    try:
        return client.execute_command(*command)
    except redis.ResponseError as error:
        return error


def execute(primary, gen_commands, model, trace):
    """Runs the generated commands on the primary; `trace` gets each concrete command sent
    (meta-operations expanded) with its reply."""
    client = primary
    for command in gen_commands:
        if isinstance(command, list):
            reply = run_command(client, command)
            model.accepted(command, reply)
            trace.append((command, reply))
        elif command[0] == "multi":
            pipe = client.pipeline(transaction=True)
            for sub in command[1]:
                pipe.execute_command(*sub)
            try:
                replies = pipe.execute(raise_on_error=False)
            except redis.ResponseError as error:
                replies = [error] * len(command[1])
            trace.append((["MULTI"], None))
            for sub, reply in zip(command[1], replies):
                model.accepted(sub, reply)
                trace.append((sub, reply))
            trace.append((["EXEC"], None))
        elif command[0] == "pieces":
            _, source, target, how = command
            try:
                chunks, it = [], 0
                while True:
                    it, data = client.execute_command("BF.SCANDUMP", source, it)
                    if it == 0:
                        break
                    chunks.append((it, data))
            except redis.ResponseError:
                continue
            source_items = set(model.items.get(encode(source), set()))
            sub = []
            if how in ("whole", "header-only"):
                sub.append(["DEL", target])
                sub.append(["BF.LOADCHUNK", target, chunks[0][0], chunks[0][1]])
                if how == "whole":
                    sub += [["BF.LOADCHUNK", target, i, d] for i, d in chunks[1:]]
            elif how in ("data", "split"):
                for i, d in chunks[1:]:
                    if how == "split" and len(d) > 8:
                        start = i - len(d)  # iterator of the piece's first byte
                        cut = sorted(random.Random(i).sample(range(1, len(d)), min(2, len(d) - 1)))
                        bounds = [0, *cut, len(d)]
                        for a, b in zip(bounds, bounds[1:]):
                            sub.append(["BF.LOADCHUNK", target, start + b, d[a:b]])
                    else:
                        sub.append(["BF.LOADCHUNK", target, i, d])
            else:
                # A key made alike (reserve with the source's BF.INFO figures, or an add
                # from the defaults) then the data pieces.
                sub.append(["DEL", target])
                if how == "reserve-alike":
                    info = client.execute_command("BF.INFO", source)
                    info = dict(zip(info[::2], info[1::2]))
                    dbg = client.execute_command("BF.DEBUG", source)
                    first = dbg[1].decode()
                    cap = first.split("capacity:")[1].split()[0]
                    ratio = float(first.split("ratio:")[1].split()[0])
                    nonscaling = info.get(b"Expansion rate") is None
                    rate = ratio if nonscaling else ratio * 2
                    sub.append(["BF.RESERVE", target, repr(rate), cap] + (["NONSCALING"] if nonscaling else []))
                else:
                    sub.append(["BF.ADD", target, "first-" + str(len(trace))])
                sub += [["BF.LOADCHUNK", target, i, d] for i, d in chunks[1:]]
            for c in sub:
                reply = run_command(client, c)
                model.accepted(c, reply)
                trace.append((c, reply))
                if c[0] == "BF.LOADCHUNK" and not isinstance(reply, Exception):
                    model.items.setdefault(encode(target), set()).update(source_items)
        elif command[0] == "restore":
            _, source, target, replace = command
            payload = client.dump(source)
            if payload is None:
                continue
            c = ["RESTORE", target, 0, payload] + (["REPLACE"] if replace else [])
            reply = run_command(client, c)
            trace.append((c, reply))
            if not isinstance(reply, Exception):
                items = set(model.items.get(encode(source), set()))
                model.accepted(c, reply)
                model.items[encode(target)] = items


def present(client, key, items):
    try:
        answers = client.execute_command("BF.MEXISTS", key, *items)
        return [bool(a) for a in answers]
    except redis.ResponseError as error:
        return error


class Env:
    """A RedisBloom primary (with AOF) and bloomery replicas (and a RedisBloom replica as a
    control)."""

    def __init__(self, args, ports, rng, base):
        self.args = args
        self.ports = ports
        self.base = Path(base)
        load = []
        if rng.random() < 0.5:
            load += ["INITIAL_SIZE", rng.choice(["1000", "7", "1", "50", "100000"])]
        if rng.random() < 0.4:
            load += ["ERROR_RATE", rng.choice(["0.001", "0.1", "0.3", "1e-9", "0.5"])]
        self.load = load
        self.description = {"primary_load_args": load}
        self.primary = Server("primary", ports, self.base / "primary", args.redisbloom, load,
                              ["--appendonly", "yes", "--appendfsync", "always", "--auto-aof-rewrite-percentage", "0",
                               "--aof-use-rdb-preamble", "no", "--appenddirname", "aof",
                               "--repl-diskless-sync-delay", "0"])
        # replicas: (name, module, module args)
        specs = [("rb-replica", args.redisbloom, load),
                 ("bl-no", args.bloomery, load + ["REDISBLOOM_LAYOUT", "no"]),
                 ("bl-yes", args.bloomery, load + ["REDISBLOOM_LAYOUT", "yes"])]
        if load:
            specs.append(("bl-no-defaults", args.bloomery, ["REDISBLOOM_LAYOUT", "no"]))
            specs.append(("bl-yes-defaults", args.bloomery, ["REDISBLOOM_LAYOUT", "yes"]))
        self.specs = specs
        self.replicas = []
        self.expected_losses = []

    def start(self):
        self.primary.start()
        for name, module, margs in self.specs:
            replica = Server(name, self.ports, self.base / name, module, margs)
            replica.extra = ["--replicaof", "127.0.0.1", str(self.primary.port)]
            replica.start()
            self.replicas.append(replica)
        deadline = time.monotonic() + 30
        for replica in self.replicas:
            while replica.client().info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{replica.name} did not sync")
                time.sleep(0.05)
        return self

    def aof_file(self):
        d = self.primary.directory / "aof"
        incr = sorted(d.glob("*.incr.aof"), key=lambda path: int(path.name.split(".")[-3]))
        return incr[-1]

    def stop(self):
        for s in [self.primary, *self.replicas]:
            s.stop()


def wait_synced(env, marker):
    pc = env.primary.client()
    pc.set("__marker", marker)
    offset = pc.info("replication")["master_repl_offset"]
    deadline = time.monotonic() + 60
    for replica in env.replicas:
        rc = replica.client()
        while True:
            if not replica.alive():
                break
            try:
                if rc.info("replication").get("slave_repl_offset", 0) >= offset and rc.get("__marker") == marker.encode():
                    break
            except (redis.ConnectionError, redis.TimeoutError):
                if not replica.alive():
                    break
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)


def check(env, model, aof_bytes, work, load, problems):
    pc = env.primary.client()
    expected_losses = env.expected_losses
    expected = {}
    for key, items in model.items.items():
        if not items:
            continue
        items = sorted(items)
        answers = present(pc, key, items)
        if isinstance(answers, Exception):
            continue
        held = [item for item, yes in zip(items, answers) if yes]
        if held:
            expected[key] = held
    targets = [(r.name, r) for r in env.replicas]
    rb_errors = {}
    aof_servers = []
    for layout in ("no", "yes"):
        for defaults in ([False, True] if load else [False]):
            name = f"aof-{layout}" + ("-defaults" if defaults else "")
            d = work / name
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            (d / "appendonly.aof").write_bytes(aof_bytes)
            margs = ([] if defaults else list(load)) + ["REDISBLOOM_LAYOUT", layout]
            server = Server(name, env.ports, d, env.args.bloomery, margs, ["--appendonly", "yes"])
            try:
                server.start()
            except RuntimeError as error:
                problems.append({"where": name, "kind": "did not start", "detail": str(error)[-2000:]})
                server.stop()
                continue
            aof_servers.append(server)
            targets.append((name, server))
    # Paths the command stream does not take: a replica's full sync from RedisBloom's RDB
    # (a replica started now), bloomery's own RDB round trip (DEBUG RELOAD on a replica),
    # and RedisBloom's AOF rewrite (its BF.LOADCHUNK form) loaded by bloomery.
    layout = "yes" if env.index_parity else "no"
    late = Server(f"late-{layout}", env.ports, work / "late", env.args.bloomery,
                  list(load) + ["REDISBLOOM_LAYOUT", layout])
    shutil.rmtree(work / "late", ignore_errors=True)
    late.directory.mkdir(parents=True)
    try:
        late.extra = ["--replicaof", "127.0.0.1", str(env.primary.port), "--repl-diskless-load", "disabled"]
        late.start()
        aof_servers.append(late)
        deadline = time.monotonic() + 30
        while late.alive() and late.client().info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                problems.append({"where": late.name, "kind": "did not sync", "detail": late.tail()})
                break
            time.sleep(0.05)
        targets.append((late.name, late))
    except RuntimeError as error:
        problems.append({"where": late.name, "kind": "did not start", "detail": str(error)[-2000:]})
    reloaded = env.replicas[1]
    try:
        reloaded.client().execute_command("DEBUG", "RELOAD")
    except redis.RedisError as error:
        problems.append({"where": reloaded.name, "kind": "DEBUG RELOAD", "detail": str(error)})
    try:
        pc.bgrewriteaof()
        deadline = time.monotonic() + 30
        while True:
            info = pc.info("persistence")
            if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the AOF rewrite did not finish")
            time.sleep(0.05)
        d = work / "rewritten"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(env.primary.directory / "aof", d / "aof")
        name = f"rewrite-{layout}"
        server = Server(name, env.ports, d, env.args.bloomery, list(load) + ["REDISBLOOM_LAYOUT", layout],
                        ["--appendonly", "yes", "--appenddirname", "aof"])
        try:
            server.start()
            aof_servers.append(server)
            targets.append((name, server))
        except RuntimeError as error:
            problems.append({"where": name, "kind": "did not start", "detail": str(error)[-2000:]})
            server.stop()
    except (redis.RedisError, RuntimeError) as error:
        problems.append({"where": "primary", "kind": "BGREWRITEAOF", "detail": str(error)})
    try:
        for name, server in targets:
            if not server.alive():
                problems.append({"where": name, "kind": "died", "detail": server.tail()})
                continue
            bad = log_problems(server.new_log())
            if name == "rb-replica":
                rb_errors = errors_to_master(bad)
                bad = []
            # An error a bloomery replica sends its primary counts where RedisBloom's own
            # replica sent none for that command (RedisBloom replicates some refusals,
            # and its partial ones, as given); on a replica with other defaults, a
            # BF.LOADCHUNK piece that does not fit a key made from them is expected.
            mine = errors_to_master(bad)
            unexplained = []
            for line in bad:
                command = command_of(line)
                if command is None:
                    unexplained.append(line)
                elif mine[command] > rb_errors.get(command, 0) and not (
                        command == "bf.loadchunk" and name.endswith("-defaults") and model.defaults_pieces):
                    unexplained.append(line)
            if unexplained:
                problems.append({"where": name, "kind": "log", "detail": unexplained[:10]})
            client = server.client()
            for key, held in expected.items():
                answers = present(client, key, held)
                if isinstance(answers, Exception):
                    problems.append({"where": name, "kind": "lost", "key": key, "detail": str(answers),
                                     "lost": len(held), "of": len(held), "sample": held[:5]})
                    continue
                lost = [item for item, yes in zip(held, answers) if not yes]
                if lost and name.endswith("-defaults") and key in model.suspect:
                    expected_losses.append((name, key, len(lost)))
                elif lost:
                    problems.append({"where": name, "kind": "lost", "key": key, "lost": len(lost), "of": len(held),
                                     "sample": lost[:5]})
    finally:
        for server in aof_servers:
            server.stop()
    return expected


def run(args):
    ports = Ports(*args.ports)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="hunt-", dir=args.tmp))
    failures = 0
    started = time.monotonic()
    env = None
    stats = {"sequences": 0, "commands": 0, "kinds": {}, "items_checked": 0}
    indices = [args.only] if args.only is not None else range(args.start, args.start + args.sequences)
    try:
        for index in indices:
            if args.minutes and time.monotonic() - started > args.minutes * 60:
                break
            env_index = index - index % args.per_env
            if env is None or env.index != env_index or not all(s.alive() for s in [env.primary, *env.replicas]):
                if env is not None:
                    env.stop()
                shutil.rmtree(base, ignore_errors=True)
                env = Env(args, ports, random.Random(f"{args.seed}:env:{env_index}"), base / f"env{env_index}")
                env.index_parity = (env_index // args.per_env) % 2 == 1
                env.index = env_index
                env.start()
            rng = random.Random(f"{args.seed}:{index}")
            count = rng.randint(3, 40)
            generated = sequence_commands(rng, f"s{index}", count)
            try:
                problems = replay_sequence(env, generated, base / "seq", index, stats)
            except (redis.ConnectionError, redis.TimeoutError) as error:
                # The RedisBloom primary stopped (its own crash): RedisBloom's problem.
                problems = [{"where": "primary", "kind": "died", "detail": f"{error}: {env.primary.tail(5)}"}]
                env.last_trace = []
            stats["sequences"] += 1
            if problems:
                failures += 1
                path = out / f"fail-{args.seed}-{index}.json"
                path.write_text(json.dumps({"seed": args.seed, "index": index, "env": env.description,
                                            "generated": jsonable(generated), "trace": env.last_trace,
                                            "problems": jsonable(problems)}, indent=1))
                print(f"[{index}] FAIL {len(problems)} problem(s): {summary(problems)} -> {path}", flush=True)
                # a crashed server: restart the environment
                env.stop()
                env = None
            elif index % 10 == 0:
                print(f"[{index}] ok ({stats['sequences']} sequences, {stats['commands']} commands, "
                      f"{stats['items_checked']} item checks, {time.monotonic() - started:.0f}s)", flush=True)
    finally:
        if env is not None:
            env.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(stats, indent=1, sort_keys=True))
    print(f"{failures} failing sequence(s)")
    return 1 if failures else 0


def summary(problems):
    parts = []
    for p in problems[:6]:
        if p["kind"] == "lost":
            parts.append(f"{p['where']}: {p['key']!r} lost {p['lost']}/{p['of']}")
        else:
            parts.append(f"{p['where']}: {p['kind']}")
    return "; ".join(parts)


def replay_sequence(env, generated, work, index, stats):
    pc = env.primary.client()
    pc.flushall()
    wait_synced(env, f"flush-{index}")
    for s in [env.primary, *env.replicas]:
        s.new_log()
    aof = env.aof_file()
    start = aof.stat().st_size
    model = Model()
    trace = []
    execute(pc, generated, model, trace)
    wait_synced(env, f"done-{index}")
    with open(env.aof_file(), "rb") as f:
        f.seek(start)
        aof_bytes = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n" + f.read()
    for command, _ in trace:
        kind = command[0].upper()
        stats["kinds"][kind] = stats["kinds"].get(kind, 0) + 1
    stats["commands"] += len(trace)
    problems = []
    # the control: the RedisBloom replica must agree, else the difference is RedisBloom's own
    expected = check(env, model, aof_bytes, work, env.load, problems)
    stats["items_checked"] += sum(len(v) for v in expected.values())
    env.last_trace = [[jsonable(c), jsonable(r)] for c, r in trace]
    stats["expected_losses"] = stats.get("expected_losses", 0) + len(env.expected_losses)
    env.expected_losses.clear()
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sequences", type=int, default=300)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--only", type=int, default=None, help="run sequence INDEX only")
    parser.add_argument("--minutes", type=float, default=0, help="stop after this long (0: no limit)")
    parser.add_argument("--per-env", type=int, default=20)
    parser.add_argument("--redisbloom", default=str(DEFAULT_RB))
    parser.add_argument("--bloomery", default=str(DEFAULT_BLOOMERY))
    parser.add_argument("--ports", default="23000-23499", type=lambda s: tuple(map(int, s.split("-"))))
    parser.add_argument("--out", default=str(ROOT / "target/hunt-out"), help="where failures are written")
    parser.add_argument("--tmp", default=None, help="where the servers' directories go")
    parser.add_argument("--keep", action="store_true", help="keep the servers' directories")
    args = parser.parse_args()
    sys.exit(run(args))


if __name__ == "__main__":
    main()
