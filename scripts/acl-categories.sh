#!/usr/bin/env bash
# The module's ACL categories on a server that has them for module commands (Redis 7.2+,
# Valkey 8): every command of the module is in @bloom (where the server lets a module add
# a category: Redis 7.4+, Valkey 8) and in @read or @write and @fast or @slow; a user
# with -@bloom is refused BF.ADD and still runs SET; a user with only +@bloom runs the BF.*
# commands and nothing else; a user with only +@read runs BF.EXISTS and not BF.ADD.
#
# Skipped (exit 0, saying so) unless REDIS_72_SERVER names such a server binary:
#   REDIS_72_SERVER=/path/to/redis-server scripts/acl-categories.sh
# This machine's Debian redis-server is 7.0, whose degrade tests/test_operations.py checks.
# SKIP_BUILD=1 uses target/release/libbloomery_redis.so as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${REDIS_72_SERVER:-}" ]; then
  echo "acl-categories: skipped (set REDIS_72_SERVER=/path/to/a Redis 7.2+ or Valkey 8 redis-server)"
  exit 0
fi
[ -x target/venv/bin/python ] || scripts/test-setup.sh
if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release -q -p bloomery-redis
fi

SERVER="$REDIS_72_SERVER" MODULE="$PWD/target/release/libbloomery_redis.so" target/venv/bin/python - <<'EOF'
import os
import socket
import subprocess
import sys
import tempfile
import time

import redis


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


port = free_port()
directory = tempfile.mkdtemp(prefix="bloomery-acl-")
log = os.path.join(directory, "server.log")
process = subprocess.Popen(
    [os.environ["SERVER"], "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
     "--save", "", "--logfile", log, "--loadmodule", os.environ["MODULE"]],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


try:
    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the server did not start; its log: {log}")
            time.sleep(0.05)
    server = client.info("server")
    version = server.get("valkey_version") or server["redis_version"]
    print(f"server: {server.get('server_name', 'redis')} {version}")
    commands = sorted(client.command_list(module="bloomery"))
    check(len(commands) >= 13, f"the module's commands: {len(commands)}")
    bloom = "bloom" in client.acl_cat()
    if not bloom:
        print("note: no @bloom: this server cannot add ACL categories (Redis 7.2); the standard ones are checked")
    # COMMAND INFO's raw reply (redis-py's parser leaves the ACL categories out): the
    # categories are the seventh field of each entry.
    raw_client = redis.Redis(host="127.0.0.1", port=port)
    raw_client.response_callbacks.pop("COMMAND", None)
    for entry in raw_client.execute_command("COMMAND", "INFO", *commands):
        name = entry[0].decode()
        categories = {category.decode() for category in entry[6]}
        access = categories & {"@read", "@write"}
        speed = categories & {"@fast", "@slow"}
        check(len(access) == 1 and len(speed) == 1 and (("@bloom" in categories) == bloom),
              f"{name}: {' '.join(sorted(categories))}")
    if bloom:
        listed = sorted(client.acl_cat("bloom"))
        if listed:
            check(listed == commands, "ACL CAT bloom lists the module's commands")
        else:
            print("note: ACL CAT bloom lists nothing: this server's ACL CAT leaves module commands out")
        client.acl_setuser("nobloom", enabled=True, nopass=True, commands=["+@all", "-@bloom"], keys=["*"])
        client.acl_setuser("onlybloom", enabled=True, nopass=True, commands=["-@all", "+@bloom"], keys=["*"])
        nobloom = redis.Redis(host="127.0.0.1", port=port, username="nobloom", password="")
        onlybloom = redis.Redis(host="127.0.0.1", port=port, username="onlybloom", password="")
        try:
            nobloom.execute_command("BF.ADD", "k", "x")
            check(False, "-@bloom refuses BF.ADD")
        except redis.exceptions.NoPermissionError:
            check(True, "-@bloom refuses BF.ADD")
        check(nobloom.set("s", "v"), "-@bloom still runs SET")
        check(onlybloom.execute_command("BF.ADD", "k", "x") == 1, "+@bloom alone runs BF.ADD")
        check(onlybloom.execute_command("BF.EXISTS", "k", "x") == 1, "+@bloom alone runs BF.EXISTS")
        try:
            onlybloom.set("s", "v")
            check(False, "+@bloom alone refuses SET")
        except redis.exceptions.NoPermissionError:
            check(True, "+@bloom alone refuses SET")
    client.acl_setuser("reader", enabled=True, nopass=True, commands=["-@all", "+@read"], keys=["*"])
    reader = redis.Redis(host="127.0.0.1", port=port, username="reader", password="")
    check(reader.execute_command("BF.EXISTS", "k", "x") in (0, 1), "+@read runs BF.EXISTS")
    try:
        reader.execute_command("BF.ADD", "k", "y")
        check(False, "+@read refuses BF.ADD")
    except redis.exceptions.NoPermissionError:
        check(True, "+@read refuses BF.ADD")
finally:
    process.terminate()
    process.wait(timeout=10)
if failures:
    print(f"acl-categories: {len(failures)} failed; server log: {log}")
    sys.exit(1)
print("acl-categories: all passed")
EOF
