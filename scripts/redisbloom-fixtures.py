"""Makes the RedisBloom fixtures that bloomery's RedisBloom-compatible filters are tested
against: filters created by RedisBloom 2.6.28 itself, each with the items added to it,
its BF.SCANDUMP pieces and its BF.INFO, before and after more items are added (so growth
is compared too), and the RDB file of the server holding all of them.

Usage: python redisbloom-fixtures.py REDISBLOOM_SO OUT_DIR
(scripts/redisbloom-fixtures.sh builds RedisBloom and runs this with the project's venv).

Files written to OUT_DIR, per filter NAME:
  NAME.items        the items added first, one per line (ASCII)
  NAME.scandump     BF.SCANDUMP's pieces after them: per piece, the iterator as 8 bytes
                    little-endian, the data's length as 8 bytes little-endian, the data
  NAME.info         BF.INFO's fields after them, one "Field value" per line, and "Card N"
  NAME.more.items, NAME.more.scandump, NAME.more.info
                    the same after further items (items RedisBloom refused, such as those
                    past a NONSCALING filter's capacity, are not listed)
and dump.rdb, the server's RDB file holding every filter in its final state. Then, after
that file is written, a chain grown until RedisBloom cannot add a link (`BF.RESERVE
long_chain 0.01 10 EXPANSION 1`, `BF.MADD long_chain u0 ... u11999` in batches of 500):
  long_chain.info     its BF.INFO, as NAME.info
  long_chain.replies  "added N", "present N", "refused N", "first_refused INDEX",
                      "refusal TEXT" (the error of every refused item) and
                      "dump_body_sha256 HEX" (SHA-256 of its DUMP with rdbcompression no,
                      less the RDB version and CRC64 that end it), one per line
"""
import hashlib
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

# name, the command that creates it (None: created by BF.MADD with the defaults), how many
# items first, how many more.
FILTERS = [
    ("scaled", ["BF.RESERVE", "scaled", "0.01", "100"], 1000, 2000),
    ("nonscaling", ["BF.RESERVE", "nonscaling", "0.001", "1000", "NONSCALING"], 1000, 0),
    ("expansion4", ["BF.RESERVE", "expansion4", "0.01", "50", "EXPANSION", "4"], 1000, 3000),
    ("tiny_error", ["BF.RESERVE", "tiny_error", "0.00001", "200"], 500, 500),
    ("large_error", ["BF.RESERVE", "large_error", "0.4", "100"], 500, 500),
    ("capacity1", ["BF.RESERVE", "capacity1", "0.01", "1"], 20, 40),
    ("defaults", None, 150, 350),
]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scandump(client, key):
    pieces = []
    iterator = 0
    while True:
        iterator, data = client.execute_command("BF.SCANDUMP", key, iterator)
        if iterator == 0:
            return pieces
        pieces.append((iterator, data))


def write_scandump(path, pieces):
    with open(path, "wb") as out:
        for iterator, data in pieces:
            out.write(struct.pack("<QQ", iterator, len(data)))
            out.write(data)


def write_info(path, client, key):
    reply = client.execute_command("BF.INFO", key)
    lines = []
    for field, value in zip(reply[::2], reply[1::2]):
        name = field.decode() if isinstance(field, bytes) else str(field)
        lines.append(f"{name} {value}")
    lines.append(f"Card {client.execute_command('BF.CARD', key)}")
    Path(path).write_text("\n".join(lines) + "\n")


def add(client, key, items):
    """Adds items one BF.ADD each; returns those RedisBloom accepted."""
    accepted = []
    for item in items:
        try:
            client.execute_command("BF.ADD", key, item)
        except redis.ResponseError as error:
            if "full" not in str(error):
                raise
            continue
        accepted.append(item)
    return accepted


def long_chain(client, out):
    """The chain that grows until its error rate, halved at each link, reaches 0."""
    client.execute_command("BF.RESERVE", "long_chain", "0.01", "10", "EXPANSION", "1")
    items = [f"u{i}" for i in range(12000)]
    replies = []
    for start in range(0, len(items), 500):
        replies += client.execute_command("BF.MADD", "long_chain", *items[start:start + 500])
    refused = [index for index, reply in enumerate(replies) if isinstance(reply, redis.ResponseError)]
    (refusal,) = {str(replies[index]) for index in refused}
    client.config_set("rdbcompression", "no")
    body = client.dump("long_chain")[:-10]
    lines = [f"added {replies.count(1)}", f"present {replies.count(0)}", f"refused {len(refused)}",
             f"first_refused {refused[0]}", f"refusal {refusal}",
             f"dump_body_sha256 {hashlib.sha256(body).hexdigest()}"]
    Path(out / "long_chain.replies").write_text("\n".join(lines) + "\n")
    write_info(out / "long_chain.info", client, "long_chain")


def main():
    module, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="redisbloom-fixtures."))
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(work),
         "--save", "", "--appendonly", "no", "--loadmodule", str(module)],
        stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        for name, create, first, more in FILTERS:
            if create is not None:
                client.execute_command(*create)
            items = [f"{name}:{i}" for i in range(first)]
            if create is None:
                client.execute_command("BF.MADD", name, *items)
                accepted = items
            else:
                accepted = add(client, name, items)
            Path(out / f"{name}.items").write_text("".join(f"{item}\n" for item in accepted))
            write_scandump(out / f"{name}.scandump", scandump(client, name))
            write_info(out / f"{name}.info", client, name)
            extra = [f"{name}:more:{i}" for i in range(more)]
            accepted = add(client, name, extra)
            Path(out / f"{name}.more.items").write_text("".join(f"{item}\n" for item in accepted))
            write_scandump(out / f"{name}.more.scandump", scandump(client, name))
            write_info(out / f"{name}.more.info", client, name)
        client.save()
        shutil.copy(work / "dump.rdb", out / "dump.rdb")
        long_chain(client, out)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {len(FILTERS)} filters, dump.rdb and the long chain to {out}")


if __name__ == "__main__":
    main()
