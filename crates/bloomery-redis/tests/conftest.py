"""Real redis-server processes with the bloomery module loaded, on free loopback ports."""
import os
import random
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[3]
MODULE = Path(os.environ.get("BLOOMERY_REDIS_MODULE", ROOT / "target/release/libbloomery_redis.so"))
# The server binary: Debian's redis-server by default; REDIS_SERVER=/path runs the suite
# against another build (another version, or one built with MALLOC=libc, whose 16-byte
# alignment caught a module allocator that relied on jemalloc's).
REDIS_SERVER = os.environ.get("REDIS_SERVER", "redis-server")
# The bloomery command-line tool (BLOOMERY_CLI=/path runs another build).
CLI = Path(os.environ.get("BLOOMERY_CLI", ROOT / "target/release/bloomery"))


def cli() -> Path:
    """The command-line tool, built first if it is not there."""
    if not CLI.exists():
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "bloomery-cli"], cwd=ROOT, check=True)
    return CLI


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port() -> int:
    """A free loopback port whose cluster bus port (port + 10000) is free too, both below
    the kernel's ephemeral ports (32768 and up by default): a port in that range may be
    taken by an outgoing connection between this check and the server's bind (the server
    then exits), and a client connecting to it may even connect to itself and read its own
    PING back."""
    rng = random.Random()
    while True:
        port = rng.randrange(10000, 22768)
        if port_is_free(port) and port_is_free(port + 10000):
            return port


class Server:
    """One redis-server on 127.0.0.1 with the module (bloomery's unless `module` names another,
    such as RedisBloom); restartable on the same data dir. `preexec_fn` runs in the child
    before redis-server does (to set a resource limit it starts under, say)."""

    def __init__(self, directory: Path, *extra: str, module_args=(), module: Path = MODULE, preexec_fn=None):
        self.directory = directory
        self.extra = list(extra)
        self.module_args = list(module_args)
        self.module = module
        self.preexec_fn = preexec_fn
        self.port = free_port()
        self.process = None

    def start(self) -> "Server":
        # The process's standard error (where Rust reports a panic or an allocation that
        # failed, which Redis's log does not carry), appended across restarts.
        with open(self.directory / "stderr.log", "ab") as stderr:
            self.process = subprocess.Popen(
                [
                    REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--dir", str(self.directory), "--save", "", "--appendonly", "no",
                    "--enable-debug-command", "yes", "--loadmodule", str(self.module), *self.module_args,
                    *self.extra,
                ],
                stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=self.preexec_fn,
            )
        client = self.client()
        deadline = time.monotonic() + 10
        while True:
            try:
                # Up only when this process answers: PONG from the server whose process
                # this is (not whatever else answered on the port).
                if client.ping() is True and client.info("server")["process_id"] == self.process.pid:
                    return self
            except redis.ConnectionError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def dump(client, key) -> list:
    """``BF.SCANDUMP`` of ``key`` to the end: its ``(iterator, data)`` pairs, in order."""
    chunks, iterator = [], 0
    while True:
        iterator, data = client.execute_command("BF.SCANDUMP", key, iterator)
        if iterator == 0:
            return chunks
        chunks.append((iterator, data))


def held_memory(client) -> int:
    """INFO memory's used_memory without client and replication buffers (a refused
    1.2 MB argument stays in the client's query buffer until Redis trims it)."""
    memory = client.info("memory")
    return memory["used_memory"] - memory["mem_clients_normal"] - memory["mem_clients_slaves"] - \
        memory.get("mem_total_replication_buffers", 0)


def settled_memory(client, tolerance=64 << 10) -> int:
    """``held_memory`` once it stops moving: right after a large reply or argument the
    client-buffer figures lag (Redis resizes them in its once-a-second cron), and a reading
    then can be megabytes off either way (seen: a baseline of -3,125,400 bytes)."""
    deadline = time.monotonic() + 5
    last = held_memory(client)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = held_memory(client)
        if abs(now - last) < tolerance:
            return now
        last = now
    return last


def settles_near(client, before, tolerance=64 << 10) -> bool:
    """Whether held memory comes back within `tolerance` of `before`: Redis trims a
    client's query buffer (which held a large refused argument) and updates its client
    accounting in its once-a-second cron, so a few seconds are allowed."""
    deadline = time.monotonic() + 5
    while held_memory(client) - before >= tolerance:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def server(tmp_path):
    assert MODULE.exists(), f"build the module first: {MODULE}"
    instance = Server(tmp_path).start()
    yield instance
    instance.stop()


@pytest.fixture
def r(server):
    return server.client()


def error_of(client, *command) -> str:
    """The error reply a command gets (it must get one)."""
    with pytest.raises(redis.ResponseError) as raised:
        client.execute_command(*command)
    return str(raised.value)


def wait_until_synced(primary, replica):
    """Waits until `replica` has applied everything `primary` had sent when called."""
    deadline = time.monotonic() + 30
    offset = primary.info("replication")["master_repl_offset"]
    while replica.info("replication").get("slave_repl_offset", 0) < offset:
        assert time.monotonic() < deadline, "the replica did not catch up"
        time.sleep(0.02)
