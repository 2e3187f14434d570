"""Files: the CLI's files opened here and this package's files used by the CLI, both ways;
mapping (mode "r"), loading under the writers' lock (mode "r+"), atomic saves, errors;
mode "a" (items added in place) in test_in_place.py."""

import errno
import gc
import os
import stat
import subprocess
import sys
import time
import warnings

import pytest

from bloomery import BloomFilter


def test_a_cli_file_answers_here(cli, tmp_path):
    path = tmp_path / "cli.bloom"
    cli("create", path, "--items", "1000", "--variant", "classic")
    cli("add", path, "hello", "wörld")
    cli("add", path, "-f", "long", "42", "--", "-7")
    cli("add", path, "-f", "hex", "00ff10")
    with BloomFilter.open(path) as f:
        assert f.mode == "r" and f.path == str(path) and f.kind == "classic"
        assert all(item in f for item in ["hello", "wörld", 42, -7, b"\x00\xff\x10"])
        assert f.contains_many(["absent", 43]) == [False, False]
        assert len(f) == 5
    assert f.closed
    with pytest.raises(ValueError, match="closed filter"):
        "hello" in f  # noqa: B015


def test_a_closed_filter_compares_as_closed_whatever_the_other(tmp_path):
    """`==` with a closed filter is the closed filter's error, as any other use of it:
    it was False beside an open filter and an error beside a closed one. A filter is
    still equal to itself, as any Python object."""
    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    a, b = BloomFilter.open(path), BloomFilter.open(path)
    assert a == b
    a.close()
    for left, right in [(a, b), (b, a)]:
        with pytest.raises(ValueError, match="closed filter"):
            left == right  # noqa: B015
    b.close()
    with pytest.raises(ValueError, match="closed filter"):
        a == b  # noqa: B015
    assert a == a  # noqa: PLR0124


@pytest.mark.parametrize("kind", ["blocked", "classic", "split-block", "counting", "scalable", "rotating"])
def test_a_python_file_answers_in_the_cli(cli, tmp_path, kind):
    path = tmp_path / "py.bloom"
    f = BloomFilter(1000, kind=kind)
    f.update(["hello", "wörld"])
    f.add_many([42, -7])
    f.save(path)
    assert f.path == str(path)
    cli("verify", path)
    assert cli("check", path, "hello", "wörld").returncode == 0
    assert cli("check", path, "-f", "long", "42", "--", "-7").returncode == 0
    missing = cli("check", path, "absent", check=False)
    assert missing.returncode == 1 and missing.stdout == b"absent\tabsent\n"
    info = cli("info", path).stdout.decode()
    assert f"variant: {kind}" in info


def test_a_split_block_filter_hashed_with_xxh3_crosses_both_ways(cli, tmp_path):
    """``hash="xxh3"`` here and ``--hash xxh3`` in the CLI make the same filter: items
    added on either side are found on the other, and Parquet export is refused."""
    items = [f"url {i}" for i in range(500)]
    path = tmp_path / "py.bloom"
    f = BloomFilter(1000, kind="split-block", hash="xxh3", seed=5)
    f.update(items)
    f.save(path)
    assert cli("check", "-q", path, *items).returncode == 0
    assert "XXH3-64, seed 5" in cli("info", path).stdout.decode()
    refused = cli("export", "--format", "parquet-sbbf", path, tmp_path / "x.sbbf", check=False)
    assert refused.returncode == 2 and b"Parquet's (XXH64, seed 0)" in refused.stderr
    cli_path = tmp_path / "cli.bloom"
    cli("create", cli_path, "--items", "1000", "--variant", "split-block", "--hash", "xxh3",
        "--seed", "5")  # fmt: skip
    cli("add", cli_path, *items)
    with BloomFilter.open(cli_path) as g:
        assert all(item in g for item in items)
        assert g.contains_many(items) == [True] * len(items)
    assert cli_path.read_bytes()[64:] == path.read_bytes()[64:]
    with pytest.raises(ValueError, match=r"hash= does not apply to blocked filters \(split-block filters take it\)"):
        BloomFilter(1000, kind="blocked", hash="xxh3")
    with pytest.raises(ValueError, match="'parquet' or 'xxh3'"):
        BloomFilter(1000, kind="split-block", hash="xxh64")


def test_cli_and_python_add_to_the_same_file(cli, tmp_path):
    path = tmp_path / "shared.bloom"
    cli("create", path, "--items", "10000")
    with BloomFilter.open(path, "r+") as f:
        assert f.mode == "r+"
        f.add_many([f"py {i}" for i in range(100)])
    cli("add", path, "cli item")
    g = BloomFilter.open(path, "r+")
    assert "cli item" in g and "py 99" in g
    g.add("second")
    g.save()
    g.add("third")
    g.close()
    result = cli("check", path, "py 0", "cli item", "second", "third")
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("mode", ["r+", "a"])
def test_writers_hold_the_cli_writers_lock_until_close(cli, tmp_path, mode):
    """Mode "r+" (loaded, saved back) and mode "a" (added in place) both hold the lock
    `bloomery add` takes, from open to close, through save()."""
    path = tmp_path / "locked.bloom"
    cli("create", path, "--items", "1000")
    f = BloomFilter.open(path, mode)
    f.add("python")
    writer = subprocess.Popen([str(cli.binary), "add", str(path), "cli"], stderr=subprocess.PIPE)
    time.sleep(0.5)
    assert writer.poll() is None, "the CLI wrote while Python held the lock"
    # "r+": the new file is locked before it takes the name; "a": the file is sealed.
    f.save()
    assert cli("verify", path).returncode == 0
    time.sleep(0.3)
    assert writer.poll() is None, "the CLI wrote while Python held the lock"
    f.add("more")
    f.close()
    assert writer.wait(timeout=30) == 0, writer.stderr.read()
    # Neither writer lost the other's items.
    assert cli("check", path, "python", "more", "cli").returncode == 0


@pytest.mark.parametrize("mode", ["r+", "a"])
def test_an_exception_in_the_with_block(cli, tmp_path, mode):
    """Mode "r+" does not save what the block changed; mode "a", whose items are already
    in the file, seals them."""
    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    with pytest.raises(RuntimeError):
        with BloomFilter.open(path, mode) as f:
            f.add("x")
            raise RuntimeError("stop")
    assert f.closed
    assert cli("verify", path).returncode == 0
    assert ("x" in BloomFilter.open(path)) == (mode == "a")


def test_an_r_plus_filter_let_go_of_unclosed_says_its_changes_were_not_saved(tmp_path):
    # As a with block that raised, it saves nothing; it once said nothing either.
    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    f = BloomFilter.open(path, "r+")
    f.add("unsaved")
    with pytest.warns(ResourceWarning, match="never closed: its changes were not saved back"):
        del f
        gc.collect()
    assert "unsaved" not in BloomFilter.open(path)
    # Closed (or saved by a with block), nothing to say.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = BloomFilter.open(path, "r+")
        g.add("saved")
        g.close()
        del g
        with BloomFilter.open(path, "a") as h:
            h.add("appended")
        del h
    g = BloomFilter.open(path)
    assert "saved" in g and "appended" in g


def test_an_r_plus_filter_let_go_of_while_an_exception_is_raised_keeps_that_exception(tmp_path):
    # The warning once consumed the exception in flight: a SystemError ("error return
    # without exception set") replaced the TypeError, or the interpreter crashed.
    import subprocess

    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    script = (
        "import sys\n"
        "from bloomery import BloomFilter\n"
        f"p = {str(path)!r}\n"
        "try:\n"
        "    BloomFilter.open(p, 'r+').add(object())\n"
        "except TypeError:\n"
        "    pass\n"
        "try:\n"
        "    [BloomFilter.open(p, 'r+'), BloomFilter.open(p + '.missing', 'r+')]\n"
        "except FileNotFoundError:\n"
        "    pass\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-W", "default", "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]
    assert "never closed" in done.stderr


def test_path_is_the_file_opened_or_else_the_last_saved_to(tmp_path):
    f = BloomFilter(100)
    assert f.path is None
    f.save(tmp_path / "first.bloom")
    f.save(tmp_path / "second.bloom")
    assert f.path == str(tmp_path / "second.bloom")
    with BloomFilter.open(tmp_path / "first.bloom", "r+") as g:
        g.save(tmp_path / "copy.bloom")
        assert g.path == str(tmp_path / "first.bloom")


def test_a_path_that_is_not_utf8_is_given_back_as_os_fsdecode_gives_it(tmp_path):
    # `path` and repr put U+FFFD where the name's bytes are not UTF-8: a name of no file.
    name = os.fsencode(tmp_path) + b"/caf\xe9.bloom"
    f = BloomFilter(100)
    f.add("x")
    f.save(name)
    assert f.path == os.fsdecode(name) and os.fsencode(f.path) == name
    assert f"path={os.fsdecode(name)!r} mode='w'" in repr(f)
    with BloomFilter.open(f.path) as g:
        assert "x" in g and g.path == os.fsdecode(name)
        assert f"path={os.fsdecode(name)!r} mode='r'" in repr(g)


def test_mode_r_is_read_only(tmp_path):
    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    f = BloomFilter.open(path)
    for change in (lambda: f.add("x"), lambda: f.update(["x"]), lambda: f.add_many(["x"]), f.clear,
                   lambda: f.__ior__(BloomFilter(100))):
        with pytest.raises(OSError, match="read-only") as error:
            change()
        assert isinstance(error.value, ValueError)  # io.UnsupportedOperation is both
    with pytest.raises(ValueError, match="needs a path"):
        f.save()
    g = f.copy()  # in memory, writable
    g.add("x")
    assert "x" in g and "x" not in f
    assert f | g == g
    f.save(tmp_path / "copy.bloom")  # a mapped file saved elsewhere: its bytes
    assert (tmp_path / "copy.bloom").read_bytes() == path.read_bytes()
    assert f.to_bytes() == path.read_bytes()
    f.close()


def test_a_mapped_file_reads_only_the_pages_a_lookup_touches(cli, tmp_path):
    """A 600 MB filter opened with verify=False (trusting the file) opens at once, and
    lookups do not read it whole."""
    path = tmp_path / "big.bloom"
    cli("create", path, "--items", "500000000", "--fpp", "0.01", "--no-space-check")
    size = path.stat().st_size
    assert size > 500_000_000

    def rss():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    before = rss()
    start = time.perf_counter()
    f = BloomFilter.open(path, verify=False)
    assert time.perf_counter() - start < 0.5
    # Each lookup touches one 64-byte block; the kernel maps the page-cache folio around
    # it (up to 2 MB here), so 20 lookups map at most some 40 MB of the 600.
    assert f.contains_many([f"item {i}" for i in range(20)]) == [False] * 20
    assert "x" not in f
    assert rss() - before < 100_000_000
    f.close()


@pytest.mark.parametrize("kind", ["classic", "blocked", "split-block"])
def test_open_checks_the_payload_by_default(cli, kind, tmp_path):
    """A mapped file whose payload has a flipped byte is refused by a default open(), with
    the CLI's words, as `bloomery check` refuses it: mapped unverified, its damaged bits
    answered lookups, and items it held were silently missed. verify=False still opens
    it at once (trusting the file)."""
    path = tmp_path / "damaged.bloom"
    f = BloomFilter(1000, kind=kind)
    f.update(f"item {i}" for i in range(1000))
    f.save(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="payload checksum mismatch") as error:
        BloomFilter.open(path)
    with pytest.raises(ValueError, match="payload checksum mismatch"):
        BloomFilter.open(path, "r")
    assert cli("verify", path, check=False).stderr.decode().strip() == f"bloomery: {error.value}"
    BloomFilter.open(path, verify=False).close()


def test_open_verify_checks_the_payload(cli, tmp_path):
    path = tmp_path / "damaged.bloom"
    f = BloomFilter(1000, kind="classic")
    f.add("x")
    f.save(path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x80
    path.write_bytes(bytes(data))
    with BloomFilter.open(path, verify=False) as mapped:  # the payload is not read
        # A copy checks the payload it copies: damage is never written out as sealed.
        for copy in (mapped.to_bytes, mapped.copy, lambda: mapped.save(tmp_path / "copy.bloom")):
            with pytest.raises(ValueError, match="payload checksum mismatch"):
                copy()
        assert not (tmp_path / "copy.bloom").exists()
    with pytest.raises(ValueError) as error:
        BloomFilter.open(path, verify=True)
    cli_error = cli("verify", path, check=False).stderr.decode().strip()
    assert cli_error == f"bloomery: {error.value}"
    for mode in ("r+", "a"):
        with pytest.raises(ValueError) as error:
            BloomFilter.open(path, mode)
        assert cli_error == f"bloomery: {error.value}", mode
    assert path.read_bytes() == bytes(data)  # refused before anything changed


def test_file_errors_are_os_errors_and_bad_files_value_errors_in_the_clis_words(cli, tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        BloomFilter.open(tmp_path / "missing.bloom")
    assert error.value.filename == str(tmp_path / "missing.bloom")
    assert error.value.strerror == "No such file or directory"
    with pytest.raises(FileNotFoundError):
        BloomFilter.open(tmp_path / "missing.bloom", "r+")
    with pytest.raises(IsADirectoryError):
        BloomFilter.open(tmp_path)
    # A missing directory, or no path at all, is told with the path given, as open() tells it.
    for missing in (tmp_path / "no" / "such" / "dir.bloom", ""):
        with pytest.raises(FileNotFoundError) as error:
            BloomFilter(100).save(missing)
        assert error.value.filename == str(missing)
        with pytest.raises(FileNotFoundError) as error:
            BloomFilter.open(missing)
        assert error.value.filename == str(missing)
    bad = tmp_path / "bad.bloom"
    bad.write_bytes(b"garbage\n")
    with pytest.raises(ValueError) as error:
        BloomFilter.open(bad)
    cli_error = cli("check", bad, "a", check=False).stderr.decode().strip()
    assert cli_error == f"bloomery: {error.value}"
    # Shorter than a header, and not its start: told by the magic, not called cut short.
    assert str(error.value) == f"{bad}: invalid bloomery data: wrong magic bytes: not a bloomery filter"
    with pytest.raises(ValueError, match="mode must be 'r'"):
        BloomFilter.open(bad, "w")


def test_save_replaces_atomically_keeping_the_mode(tmp_path):
    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    os.chmod(path, 0o640)
    inode = path.stat().st_ino
    f = BloomFilter(100)
    f.add("x")
    f.save(path)
    assert path.stat().st_ino != inode  # a new file renamed over the old one
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "x" in BloomFilter.open(path)
    assert [p.name for p in tmp_path.iterdir()] == ["f.bloom"]  # no temporary left


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_save_keeps_the_owner_as_the_cli_does(tmp_path, cli):
    path = tmp_path / "owned.bloom"
    cli("create", "--items", "100", path)
    os.chown(path, 4321, 4322)
    os.chmod(path, 0o640)
    for saving in ("r+", "save"):
        if saving == "r+":
            f = BloomFilter.open(path, "r+")
            f.add(saving)
            f.save()
            f.close()
        else:
            f = BloomFilter(100)
            f.add(saving)
            f.save(path)
        info = path.stat()
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o640), saving
        assert saving in BloomFilter.open(path)


def test_save_through_a_symlink_updates_its_target(tmp_path):
    target = tmp_path / "target.bloom"
    BloomFilter(100).save(target)
    link = tmp_path / "link.bloom"
    link.symlink_to(target)
    f = BloomFilter(100)
    f.add("x")
    f.save(link)
    assert link.is_symlink()
    assert "x" in BloomFilter.open(target)


def test_a_link_to_nothing_is_refused_as_the_cli_refuses_it(cli, tmp_path):
    link = tmp_path / "dangling.bloom"
    link.symlink_to(tmp_path / "nowhere.bloom")
    # FileNotFoundError, as Python's open() raises for a link to nothing, in the CLI's words.
    with pytest.raises(FileNotFoundError) as error:
        BloomFilter(100).save(link)
    assert error.value.filename == str(link)
    assert error.value.strerror == f"is a symbolic link to {tmp_path / 'nowhere.bloom'}, which does not exist"
    cli_error = cli("create", link, "--items", "100", check=False).stderr.decode().strip()
    assert cli_error == f"bloomery: {error.value.filename}: {error.value.strerror}"
    assert link.is_symlink() and not (tmp_path / "nowhere.bloom").exists()
    for mode in ("r", "r+"):
        with pytest.raises(FileNotFoundError) as error:
            BloomFilter.open(link, mode)
        assert error.value.filename == str(link)


def test_a_failed_save_leaves_the_old_file_and_no_temporary(tmp_path):
    """A write that fails midway (here the file-size limit, as a full disk would): the old
    file stays as it was."""
    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    old = path.read_bytes()
    script = f"""
import resource, signal, sys
from bloomery import BloomFilter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
try:
    BloomFilter(1_000_000).save({str(path)!r})
except OSError as error:
    print(type(error).__name__, error.errno)
    sys.exit(0)
sys.exit("saved past the limit")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["OSError", str(errno.EFBIG)]
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["f.bloom"]


@pytest.mark.parametrize("writer", ["r+", "a", "save", "cli"])
def test_writers_remove_the_temporary_files_of_killed_writers(cli, tmp_path, writer):
    """Temporary files (`.NAME.PID.UNIQUE.tmp`, the library's `bloomery::file::TempFile`)
    that writers of any tool left when they were killed are removed by the next writer of
    the same filter, under its lock; a live writer's are kept."""
    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    finished = subprocess.Popen(["true"])
    finished.wait()
    dead_pid = finished.pid  # a process that is gone
    live = subprocess.Popen(["sleep", "60"])
    # Its unique number is the nanoseconds since the epoch when it was made: a file named
    # so but changed far from that time is not a leftover (a user's file), and is kept.
    made = f"{time.time_ns():x}"
    try:
        stale = tmp_path / f".f.bloom.{dead_pid}.{made}.tmp"
        kept = tmp_path / f".f.bloom.{live.pid}.{made}.tmp"
        other = tmp_path / f".g.bloom.{dead_pid}.{made}.tmp"  # another filter's
        users = tmp_path / f".f.bloom.{dead_pid}.1a2b.tmp"
        for leftover in (stale, kept, other, users):
            leftover.write_bytes(b"partial")
        if writer == "save":
            BloomFilter(100).save(path)
        elif writer == "cli":
            cli("add", path, "x")
        else:
            BloomFilter.open(path, writer).close()
        assert not stale.exists() and kept.exists() and other.exists() and users.exists()
    finally:
        live.kill()
        live.wait()


def test_pathlike_and_str_paths(tmp_path):
    f = BloomFilter(100)
    f.save(str(tmp_path / "a.bloom"))
    f.save(tmp_path / "b.bloom")
    assert BloomFilter.open(str(tmp_path / "a.bloom")) == BloomFilter.open(tmp_path / "b.bloom")


@pytest.mark.parametrize("mode", ["r+", "a"])
def test_save_without_a_path_writes_the_file_opened_after_a_chdir(cli, tmp_path, monkeypatch, mode):
    """`save()` and `close()` without a path write the file that was opened, not whatever
    its relative name names in the working directory of the time."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    BloomFilter(100).save(first / "seen.bloom")
    monkeypatch.chdir(first)
    f = BloomFilter.open("seen.bloom", mode)
    monkeypatch.chdir(second)
    f.add("x")
    f.save()
    f.add("y")
    f.close()
    assert list(second.iterdir()) == []  # no stray copy
    assert [p.name for p in first.iterdir()] == ["seen.bloom"]
    assert cli("verify", first / "seen.bloom").returncode == 0
    assert cli("check", first / "seen.bloom", "x", "y").returncode == 0


@pytest.mark.parametrize("mode", ["r+", "a"])
def test_save_without_a_path_writes_the_file_opened_after_its_symlink_is_repointed(cli, tmp_path, mode):
    """A symlink repointed after `open` changes nothing: the file opened (and locked) is
    the one saved back; the link's new target is left as it was."""
    opened, other = tmp_path / "opened.bloom", tmp_path / "other.bloom"
    BloomFilter(100).save(opened)
    theirs = BloomFilter(100)
    theirs.add("theirs")
    theirs.save(other)
    before = other.read_bytes()
    link = tmp_path / "link.bloom"
    link.symlink_to(opened)
    f = BloomFilter.open(link, mode)
    link.unlink()
    link.symlink_to(other)
    f.add("x")
    f.save()
    f.add("y")
    f.close()
    assert other.read_bytes() == before
    assert link.is_symlink()
    assert cli("verify", opened).returncode == 0
    assert cli("check", opened, "x", "y").returncode == 0


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    """Opening a FIFO for reading would wait for a writer: every road refuses it at once,
    in the words the write roads use (run in a child process, so that a regression fails
    on the timeout rather than hanging the suite)."""
    fifo = tmp_path / "f.bloom"
    os.mkfifo(fifo)
    script = f"""
from bloomery import BloomFilter
path = {str(fifo)!r}
for mode in ("r", "r+", "a"):
    for verify in (False, True):
        try:
            BloomFilter.open(path, mode, verify=verify)
        except ValueError as error:
            print(mode, error)
        else:
            print(mode, "opened")
try:
    BloomFilter(100).save(path)
except ValueError as error:
    print("save", error)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    refused = f"{fifo}: not a regular file, so not a filter file"
    assert result.stdout.splitlines() == [
        *(f"{mode} {refused}" for mode in ("r", "r", "r+", "r+", "a", "a")),
        f"save {refused}",
    ]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_save_to_a_new_path_never_replaces_a_file_created_meanwhile_without_its_lock(tmp_path):
    """`save` to a path that did not exist puts its file there only if none appeared
    meanwhile (a hard link, as the CLI creates files); a file that did appear is then
    replaced as an existing one is: under its writers' lock, waiting for its writer. Here
    another writer creates the file, locked, while the save fills its temporary file."""
    import fcntl
    import threading

    theirs = BloomFilter(100)
    theirs.add("theirs")
    their_bytes = theirs.to_bytes()
    mine = BloomFilter(40_000_000)  # some 48 MB: a temporary file that takes a while to fill
    mine.add("mine")
    for attempt in range(10):
        path = tmp_path / f"new{attempt}.bloom"
        prefix = f".{path.name}."
        saved = threading.Event()
        errors = []

        def save(path=path, saved=saved, errors=errors):
            try:
                mine.save(path)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)
            saved.set()

        saver = threading.Thread(target=save)
        saver.start()
        while not saved.is_set() and not any(name.startswith(prefix) for name in os.listdir(tmp_path)):
            pass
        # Another writer's new file: written and locked under another name, then linked in.
        staged = tmp_path / f"staged{attempt}"
        fd = os.open(staged, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, their_bytes)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.link(staged, path)
        except FileExistsError:  # the save finished first: try again
            os.close(fd)
            saver.join()
            continue
        finally:
            staged.unlink()
        try:
            assert not saved.wait(0.5), "the save replaced a file another writer held locked"
            assert path.read_bytes() == their_bytes
        finally:
            os.close(fd)  # lets go of the lock
            saver.join(timeout=60)
        assert not errors, errors
        assert "mine" in BloomFilter.open(path) and "theirs" not in BloomFilter.open(path)
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
        return
    pytest.skip("the save always finished before the other writer's file appeared")


@pytest.mark.parametrize("mode", ["r+", "a"])
def test_save_to_a_hard_link_of_the_file_held_open(tmp_path, mode):
    """A filter that holds its file's writers' lock (mode "r+" or "a") and saves to another
    name of that file (a hard link) is answered at once, under the lock it holds: waiting
    for the lock waited for itself (flock locks belong to an open file, and this process
    held it through another). The answer is a refusal, as for any file with other names
    (it would be replaced, splitting the names); mode "a" still adds in place, to every
    name, and "r+" cannot save back either."""
    opened, other = tmp_path / "opened.bloom", tmp_path / "other.bloom"
    BloomFilter(100).save(opened)
    # Linked once open: mode "r+" refuses to open a file with other names.
    script = f"""
import os
from bloomery import BloomFilter
f = BloomFilter.open({str(opened)!r}, {mode!r})
os.link({str(opened)!r}, {str(other)!r})
f.add("added")
try:
    f.save({str(other)!r})
except OSError as error:
    print("save-refused", "hard links" in str(error))
try:
    f.close()
    print("closed")
except OSError as error:
    print("close-refused", "hard links" in str(error))
print("other", "added" in BloomFilter.open({str(other)!r}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    expected = {
        "a": ["save-refused", "True", "closed", "other", "True"],
        "r+": ["save-refused", "True", "close-refused", "True", "other", "False"],
    }[mode]
    assert result.stdout.split() == expected
    assert os.stat(opened).st_ino == os.stat(other).st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opened.bloom", "other.bloom"]


def test_a_save_waiting_for_a_lock_leaves_the_filter_answering_other_threads(tmp_path):
    """save(path) waiting for another writer's lock held the filter's link to its file the
    whole time: repr(), path, mode and close() of the same filter waited behind it, and
    when the thread waiting there was the one that would close that writer, neither went
    on (a hang that Ctrl-C did not end). They answer at once now; the save goes on once
    the lock is let go of."""
    path = tmp_path / "f.bloom"
    BloomFilter(100).save(path)
    script = f"""
import threading, time
from bloomery import BloomFilter
g = BloomFilter.open({str(path)!r}, "a")
f = BloomFilter(1000)
f.add("x")
saver = threading.Thread(target=lambda: f.save({str(path)!r}))
saver.start()
time.sleep(0.5)
print(saver.is_alive(), repr(f).startswith("<bloomery.BloomFilter"), f.path, f.mode)
g.close()
saver.join(30)
print(saver.is_alive(), f.path == {str(path)!r}, "x" in BloomFilter.open({str(path)!r}))
"""
    assert run_script(script) == ["True True None None", "False True True"]


def test_close_leaves_a_filter_made_in_memory_as_it_is_saved_or_not(tmp_path):
    """close() lets go of a file; a filter made in memory is not a file's, saved or not
    (a save records only where it went): it stays usable, as the docs say. A saved one was
    closed, one never saved was not."""
    path = tmp_path / "f.bloom"
    for save in [False, True]:
        f = BloomFilter(100)
        f.add("x")
        if save:
            f.save(path)
        f.close()
        with f:
            f.add("y")
        assert not f.closed and "x" in f and "y" in f
    assert "x" in BloomFilter.open(path) and "y" not in BloomFilter.open(path)


def memory_a_filter_may_use() -> int:
    with open("/proc/meminfo") as meminfo:
        kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
    return kib * 1024 // 10 * 9


def test_a_filter_larger_than_memory_is_a_memory_error_not_an_abort():
    """A new filter that would not fit is refused with MemoryError before anything is
    allocated: a failed allocation aborts the interpreter (SIGABRT), which no except
    clause catches. Run in a subprocess, so that an abort shows as one."""
    from bloomery import ConcurrentBloomFilter  # noqa: F401 - the script imports it

    items = 10**11  # a blocked filter of some 127 GB
    if memory_a_filter_may_use() > 140 * 10**9:
        pytest.skip("this machine could hold the filter")
    script = f"""
from bloomery import BloomFilter, ConcurrentBloomFilter
for make in (lambda: BloomFilter({items}), lambda: BloomFilter({items} // 10, kind="counting"),
             lambda: ConcurrentBloomFilter({items})):
    try:
        make()
        print("made")
    except MemoryError as error:
        print("MemoryError", "more than the memory" in str(error))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["MemoryError True"] * 3, result.stdout


def test_a_growth_step_past_the_memory_a_filter_may_use_is_a_memory_error_and_loses_no_item():
    """A growing filter's new sub-filter that would not fit in the memory a filter may use
    (here, past the address-space limit) is refused with MemoryError before it is
    allocated (where memory overcommitted, the pages filled later brought the kernel's
    out-of-memory killer), by a batch call (saying that the items before the refused one
    were added) and by add(); every item added before stays present, and the filter takes
    items again once memory allows."""
    script = """
import array, resource
from bloomery import BloomFilter
n = 1_000_000
f = BloomFilter(n, kind="scalable")
items = array.array("q", range(8 * n))
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (size + (4 << 20), hard))
try:
    f.add_many(items)
    print("added")
except MemoryError as error:
    print("batch", "more than the memory a filter may use" in str(error), "before the refused one were added" in str(error))
added = len(f)
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 20), hard))
try:
    f.add(-1)
    print("added")
except MemoryError as error:
    print("add", "more than the memory a filter may use" in str(error))
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
print(added >= n, all(f.contains_many(items[:added])), len(f) == added)
f.add_many(items)
print(all(f.contains_many(items)))
"""
    assert run_script(script) == ["batch True True", "add True", "True True True", "True"]


def test_copies_of_a_concurrent_filter_that_would_not_fit_are_memory_errors(tmp_path):
    """ConcurrentBloomFilter's copy(), to_bytes(), pickling and from_filter() took copies
    of the filter unchecked, and a failed allocation aborted the interpreter where
    BloomFilter's raised MemoryError. Each checks the copies it takes first now; what fits
    (a snapshot, a save, and copy() and from_filter(), which make one copy each since a
    plain filter is made atomic in place) still works."""
    path = tmp_path / "f.bloom"
    script = f"""
import pickle, resource
from bloomery import BloomFilter, ConcurrentBloomFilter
f = ConcurrentBloomFilter(20_000_000)
f.add("x")
plain = BloomFilter(20_000_000)
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (size + f.memory_bytes * 3 // 2, hard))
for name, make in [("copy", f.copy), ("to_bytes", f.to_bytes), ("pickle", lambda: pickle.dumps(f)),
                   ("from_filter", lambda: ConcurrentBloomFilter.from_filter(plain))]:
    try:
        make()
        print(name, "made")
    except MemoryError as error:
        print(name, "more than the memory" in str(error))
print("snapshot", "x" in f.snapshot())
f.save({str(path)!r})
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
print("saved", "x" in BloomFilter.open({str(path)!r}), "x" in f.copy())
"""
    assert run_script(script) == [
        "copy made", "to_bytes True", "pickle True", "from_filter made", "snapshot True", "saved True True"
    ]


def test_opening_a_large_file_of_something_else_for_update_reads_only_its_header(tmp_path):
    """Mode "r+" loads the file whole, but checks its header first: a 2 GB file of zeros
    (sparse) is refused as not a filter's without being read into memory.

    The peak is the new interpreter's own (VmHWM): getrusage's ru_maxrss keeps the peak
    from before the exec, the forked copy of this test process, so it failed after tests
    that leave pytest holding a gigabyte (test_in_place.py run first)."""
    path = tmp_path / "zeros.bin"
    with open(path, "wb") as f:
        f.truncate(2 << 30)
    script = f"""
from bloomery import BloomFilter
try:
    BloomFilter.open({str(path)!r}, "r+")
except ValueError as error:
    print("ValueError", "magic" in str(error))
with open("/proc/self/status") as status:
    kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(kib * 1024)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    refused, peak = result.stdout.split("\n")[:2]
    assert refused == "ValueError True"
    assert int(peak) < 256 << 20, f"peak RSS {int(peak)} bytes"


def run_script(script: str) -> list[str]:
    """Runs `script` in a new interpreter (a hang or a crash shows as one), its lines out."""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("mode", ["r+", "a"])
def test_a_lock_another_filter_of_this_process_holds_is_refused_when_no_thread_could_free_it(tmp_path, mode):
    """flock locks belong to an open file, so a second filter of this process waiting for
    the lock its first holds (mode "r+" or "a") waits forever when no other thread could
    close the first: refused at once with EDEADLK, for opening with either mode and for
    saving another filter over the file. Once the first is closed, both work."""
    path = tmp_path / "held.bloom"
    BloomFilter(1000).save(path)
    script = f"""
import errno
from bloomery import BloomFilter
held = BloomFilter.open({str(path)!r}, {mode!r})
held.add("held")
for attempt in ["r+", "a", "save"]:
    try:
        if attempt == "save":
            BloomFilter(10).save({str(path)!r})
        else:
            BloomFilter.open({str(path)!r}, attempt)
        print(attempt, "went through")
    except OSError as error:
        print(attempt, "EDEADLK" if error.errno == errno.EDEADLK else error.errno, error.filename)
held.close()
with BloomFilter.open({str(path)!r}, "a") as again:
    print("after close", "held" in again)
"""
    assert run_script(script) == [
        f"r+ EDEADLK {path}",
        f"a EDEADLK {path}",
        f"save EDEADLK {path}",
        "after close True",
    ]


def test_with_another_thread_the_lock_of_this_process_is_waited_for(tmp_path):
    """Another thread may close the filter that holds the lock: then a second filter
    waits for it, as for another process's, and sees what the first saved."""
    path = tmp_path / "shared.bloom"
    BloomFilter(1000).save(path)
    script = f"""
import threading, time
from bloomery import BloomFilter
held = BloomFilter.open({str(path)!r}, "r+")
held.add("held")
closer = threading.Timer(0.5, held.close)
closer.start()
started = time.monotonic()
with BloomFilter.open({str(path)!r}, "a") as second:
    print("waited", time.monotonic() - started >= 0.4, "held" in second)
closer.join()
"""
    assert run_script(script) == ["waited True True"]


@pytest.mark.parametrize("call", ["open r+", "open a", "save"])
def test_a_signal_while_waiting_for_a_lock(tmp_path, call):
    """Waiting for another writer's lock, a call answers signals as Python's own blocking
    calls do (PEP 475): a handler that raises ends the wait with its exception (here an
    alarm's TimeoutError; Ctrl-C's KeyboardInterrupt alike), one that returns lets the
    wait go on. Before, the wait failed with InterruptedError on any signal with a
    handler, and Ctrl-C's KeyboardInterrupt was lost."""
    import fcntl

    path = tmp_path / "busy.bloom"
    BloomFilter(1000).save(path)
    action = {
        "open r+": f"BloomFilter.open({str(path)!r}, 'r+').close()",
        "open a": f"BloomFilter.open({str(path)!r}, 'a').close()",
        "save": f"BloomFilter(10).save({str(path)!r})",
    }[call]
    script = f"""
import fcntl, os, signal, threading
from bloomery import BloomFilter
other_writer = os.open({str(path)!r}, os.O_RDWR)  # another open file: another writer's lock
fcntl.flock(other_writer, fcntl.LOCK_EX)

def time_out(signum, frame):
    raise TimeoutError("waited too long")

signal.signal(signal.SIGALRM, time_out)
signal.setitimer(signal.ITIMER_REAL, 0.3)
try:
    {action}
    print("went through")
except TimeoutError as error:
    print("TimeoutError", error)

alarms = []
signal.signal(signal.SIGALRM, lambda signum, frame: alarms.append(signum))
signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
releaser = threading.Timer(1.0, os.close, [other_writer])
releaser.start()
{action}
signal.setitimer(signal.ITIMER_REAL, 0)
releaser.join()
print("then went through after", len(alarms) >= 5, "alarms")
"""
    assert run_script(script) == ["TimeoutError waited too long", "then went through after True alarms"]


def test_a_signal_handler_may_use_the_filter_whose_save_waits(tmp_path):
    """The handlers run with none of the filter's locks held: one that reads the filter's
    path and repr, or closes it, while its save waits for another writer's lock, works
    (it waited forever for the lock that save held)."""
    path = tmp_path / "busy.bloom"
    BloomFilter(1000).save(path)
    script = f"""
import fcntl, os, signal
from bloomery import BloomFilter
other_writer = os.open({str(path)!r}, os.O_RDWR)
fcntl.flock(other_writer, fcntl.LOCK_EX)
f = BloomFilter.open({str(path)!r})  # mode "r": save() to a path takes no lock of its own
seen = []

def look(signum, frame):
    seen.append((f.path, repr(f).startswith("<bloomery.BloomFilter")))
    if len(seen) == 3:
        f.close()
        raise TimeoutError("closed by the handler")

signal.signal(signal.SIGALRM, look)
signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
try:
    f.save({str(path)!r})
except TimeoutError as error:
    print(error, len(seen), seen[0] == ({str(path)!r}, True), f.closed)
"""
    assert run_script(script) == ["closed by the handler 3 True True"]


def test_a_forked_child_is_refused_the_lock_its_copy_shares(tmp_path):
    """A child made by fork() shares its copy's descriptor, so it holds the parent's lock
    with it: a child alone opening the file for update again is refused (EDEADLK) rather
    than waiting for itself; once it deleted its copy, it waits for the parent as for
    another process, and opens the file once the parent closed it."""
    path = tmp_path / "forked.bloom"
    BloomFilter(1000).save(path)
    script = f"""
import errno, os, sys, time
from bloomery import BloomFilter
f = BloomFilter.open({str(path)!r}, "r+")
f.add("parent")
read_end, write_end = os.pipe()
child = os.fork()
if child == 0:
    try:
        BloomFilter.open({str(path)!r}, "r+")
        print("child opened", flush=True)
    except OSError as error:
        print("child refused", error.errno == errno.EDEADLK, flush=True)
    del f
    os.write(write_end, b"x")
    with BloomFilter.open({str(path)!r}, "a") as again:
        print("child then opened", "parent" in again, flush=True)
    os._exit(0)
os.read(read_end, 1)
time.sleep(0.3)  # the child waits for the parent's lock
f.close()
os.waitpid(child, 0)
"""
    assert run_script(script) == ["child refused True", "child then opened True"]


def test_a_save_waiting_for_another_writer_leaves_the_filter_to_other_threads(tmp_path):
    """save() waits for the target's lock before it reads the filter: meanwhile another
    thread adds to the filter at once (it waited for the save to end), and the save,
    made once the lock is let go of, holds what was added."""
    path = tmp_path / "busy.bloom"
    BloomFilter(1000).save(path)
    script = f"""
import fcntl, os, threading, time
from bloomery import BloomFilter
other_writer = os.open({str(path)!r}, os.O_RDWR)
fcntl.flock(other_writer, fcntl.LOCK_EX)
f = BloomFilter(1000)
f.add("before")
saver = threading.Thread(target=f.save, args=({str(path)!r},))
saver.start()
time.sleep(0.3)  # the save waits for the lock
threading.Timer(2.0, os.close, [other_writer]).start()
started = time.monotonic()
f.add("during")
added_in = time.monotonic() - started
saver.join()
g = BloomFilter.open({str(path)!r})
print(added_in < 1.0, "before" in g, "during" in g)
"""
    assert run_script(script) == ["True True True"]


@pytest.mark.parametrize("kind", ["blocked", "classic"])
def test_a_file_another_program_rewrites_while_open_in_mode_a_is_never_sealed_over(tmp_path, kind):
    # `cp other.bloom f.bloom` (no lock) truncates and rewrites the very file a writer in
    # mode "a" has mapped: its close wrote its own header over the other file's bits and
    # sealed them as valid, answering for neither filter's items.
    path, other = tmp_path / "f.bloom", tmp_path / "other.bloom"
    BloomFilter(10_000, kind=kind).save(path)
    theirs = BloomFilter(20_000, kind=kind, **({"seed": 7} if kind == "blocked" else {}))
    theirs.update(f"o{i}" for i in range(1000))
    theirs.save(other)
    f = BloomFilter.open(path, "a")
    f.add("mine")
    with open(other, "rb") as source, open(path, "r+b") as target:
        target.truncate(0)
        target.write(source.read())
    with pytest.raises(OSError, match="was changed by another program"):
        f.close()
    assert f.closed
    assert path.read_bytes() == other.read_bytes()
    back = BloomFilter.open(path, verify=True)
    assert all(f"o{i}" in back for i in range(1000))


def test_a_file_another_program_puts_in_its_place_while_open_in_mode_a_is_never_sealed_over(tmp_path):
    # `mv other.bloom f.bloom` while a writer in mode "a" has f.bloom open: the writer's
    # inode has no name any more, and sealing it said nothing while the name held none of
    # the items it added. Refused, as the CLI refuses it (`bloomery::file::Sealing`); the
    # file at the name is left as that program put it.
    path, other = tmp_path / "f.bloom", tmp_path / "other.bloom"
    BloomFilter(10_000, kind="blocked").save(path)
    theirs = BloomFilter(10_000, kind="blocked")
    theirs.update(f"o{i}" for i in range(100))
    theirs.save(other)
    expected = other.read_bytes()
    f = BloomFilter.open(path, "a")
    f.add("before")
    os.replace(other, path)
    f.add("after")
    with pytest.raises(OSError, match="was replaced or removed by another program"):
        f.close()
    # Closed all the same, its lock let go of: no later close could seal it.
    assert f.closed
    f.close()
    assert path.read_bytes() == expected
    back = BloomFilter.open(path, verify=True)
    assert all(f"o{i}" in back for i in range(100))
    with BloomFilter.open(path, "a") as again:
        again.add("new")
    assert "new" in BloomFilter.open(path, verify=True)


def test_a_file_with_other_hard_links_is_not_replaced(cli, tmp_path):
    # Saving writes a new file over the name: the file's other names kept the old filter,
    # and lookups through them answered "absent" for what was added. Refused, as the CLI
    # refuses it, in its words; a file updated in place ("a") keeps every name.
    first, second = tmp_path / "h1.bloom", tmp_path / "h2.bloom"
    BloomFilter(1000, kind="counting").save(first)
    os.link(first, second)
    before = first.read_bytes()
    # Refused at open, before anything is added that could not be saved back.
    with pytest.raises(OSError, match="has 2 hard links") as error:
        BloomFilter.open(first, "r+")
    cli_error = cli("add", first, "apple", check=False).stderr.decode().strip()
    assert cli_error == f"bloomery: {error.value}"
    # Linked while open: the save is refused, and a close that could not save keeps the
    # filter open and locked (as on a full disk): let go of unsaved.
    os.unlink(second)
    f = BloomFilter.open(first, "r+")
    os.link(first, second)
    f.add("apple")
    with pytest.raises(OSError, match="has 2 hard links"):
        f.save()
    with pytest.raises(OSError, match="has 2 hard links"):
        f.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        del f
        gc.collect()
    assert first.read_bytes() == before == second.read_bytes()
    blocked = tmp_path / "b1.bloom"
    BloomFilter(1000).save(blocked)
    os.link(blocked, tmp_path / "b2.bloom")
    with BloomFilter.open(blocked, "a") as g:
        g.add("apple")
    assert "apple" in BloomFilter.open(tmp_path / "b2.bloom")


def test_a_nul_byte_in_a_path_is_a_value_error_as_pythons_open_raises(tmp_path):
    """A path with a NUL byte: ValueError("embedded null byte"), as open() and os.stat
    raise (it was an OSError), for every call taking a path; nothing is created."""
    import pathlib

    from bloomery import ConcurrentBloomFilter

    bad = str(tmp_path / "a\x00b.bloom")
    with pytest.raises(ValueError, match="^embedded null byte$"):
        open(bad)
    calls = [lambda: BloomFilter(100).save(bad), lambda: ConcurrentBloomFilter(100).save(bad)]
    calls += [lambda mode=mode: BloomFilter.open(bad, mode) for mode in ("r", "r+", "a")]
    calls += [lambda: BloomFilter.open(pathlib.Path(bad), verify=False)]
    for call in calls:
        with pytest.raises(ValueError, match="^embedded null byte$"):
            call()
    assert list(tmp_path.iterdir()) == []
