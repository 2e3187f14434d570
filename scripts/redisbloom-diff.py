"""Differential check of bloomery's RedisBloom layout against RedisBloom itself.

Usage: redisbloom-diff.py REDISBLOOM_MODULE BLOOMERY_MODULE [CASES]

Starts two redis-servers, one with RedisBloom and one with bloomery's module under
REDISBLOOM_LAYOUT yes (and no memory cap), sends both the same random filters and items
(BF.RESERVE with random capacity, error rate, expansion or NONSCALING, then BF.MADD of
random byte strings) and compares every reply: BF.MADD, BF.DEBUG (each link's shape and
fill), BF.MEXISTS on fresh probes (the false positives) and BF.INFO. Prints the number of
cases that differ; exits 1 if any did. Run by `scripts/redisbloom-flow.sh` with PEER=1.
"""
import os
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
         "--save", "", "--appendonly", "no", "--loadmodule", module, *module_args],
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
        return 1 if differing else 0
    finally:
        for process in (peer, ours):
            process.terminate()
            process.wait()
        for directory in (peer_dir, our_dir):
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
