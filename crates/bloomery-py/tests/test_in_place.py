"""Mode "a": items added in place to classic, blocked and split-block files (the file
mapped writable under the writers' lock, marked unsealed while it changes, sealed on
close), as `bloomery add` adds them. That it holds the CLI writers' lock, refuses a
damaged file as the CLI does and seals what a with block added before an exception is
tested beside mode "r+" in test_files.py."""

import os
import signal
import subprocess
import sys
import time

import pytest

from bloomery import BloomFilter

IN_PLACE_KINDS = ["blocked", "classic", "split-block"]


def kill_after(body):
    """Runs `body` (Python, with BloomFilter imported) in a child process and kills it
    with SIGKILL once it has run, leaving whatever it opened as it was."""
    script = f"import time\nfrom bloomery import BloomFilter\n{body}\nprint('done', flush=True)\ntime.sleep(60)\n"
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "done\n"
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.wait(timeout=30)


@pytest.mark.parametrize("kind", IN_PLACE_KINDS)
def test_mode_a_sets_the_bits_a_load_and_save_would(cli, tmp_path, kind):
    """The same items added in place (mode "a") and through a load and save (mode "r+")
    give the same file, byte for byte; the file stays the same inode, sealed after
    close, and the CLI finds every item."""
    items = [f"url {i}" for i in range(2000)]
    numbers = list(range(-50, 50))
    paths = {mode: tmp_path / f"{mode}.bloom" for mode in ("a", "r+")}
    for path in paths.values():
        cli("create", path, "--items", "10000", "--variant", kind)
        cli("add", path, "from the cli")
    inode = paths["a"].stat().st_ino
    for mode, path in paths.items():
        with BloomFilter.open(path, mode) as f:
            assert f.mode == mode and f.kind == kind
            assert f.add("first") is True and f.add("first") is False
            f.update(items[:1000])
            f.add_many(items[1000:])
            f.add_many(numbers)
            assert "from the cli" in f and all(item in f for item in items)
            assert f.contains_many(items + numbers) == [True] * (len(items) + len(numbers))
    assert paths["a"].stat().st_ino == inode  # changed in place, not replaced
    assert paths["a"].read_bytes() == paths["r+"].read_bytes()
    assert cli("verify", paths["a"]).returncode == 0
    assert cli("check", "-q", paths["a"], "first", "from the cli", *items).returncode == 0
    assert cli("check", "-q", "-f", "long", paths["a"], "--", *map(str, numbers)).returncode == 0


def test_mode_a_is_unsealed_while_it_changes_and_a_killed_writer_loses_nothing(cli, tmp_path):
    path = tmp_path / "killed.bloom"
    cli("create", path, "--items", "100000")
    items = [f"item {i}" for i in range(5000)]
    merged = [f"merged {i}" for i in range(1000)]
    kill_after(f"""
f = BloomFilter.open({str(path)!r}, "a")
f.update({items[:2500]!r})
other = BloomFilter(100000)
other.update({merged!r})
f |= other
f.update({items[2500:]!r})
""")
    verify = cli("verify", path, check=False)
    assert verify.returncode == 3 and b"unsealed" in verify.stdout + verify.stderr
    assert cli("check", "-q", path, *items, *merged).returncode == 0  # every item it added is there
    # The next writer seals it, using the bits as they are.
    with BloomFilter.open(path, "a") as f:
        assert all(item in f for item in items)
        f.add("after")
    assert cli("verify", path).returncode == 0
    assert cli("check", "-q", path, "after", *items).returncode == 0


@pytest.mark.parametrize("kind", IN_PLACE_KINDS)
def test_mode_a_adds_another_filters_items_in_place(cli, tmp_path, kind):
    """`f |= other` in mode "a" ORs the other filter's bits into the file in place: the
    bytes a load, union and save give, the same inode, sealed on close. A filter of another
    shape or kind is refused in the words of an owned filter's union, and the file stays
    as it was, sealed."""
    mine = [f"mine {i}" for i in range(500)]
    theirs = BloomFilter(10_000, kind=kind)
    theirs.update(f"theirs {i}" for i in range(500))
    their_path = tmp_path / "theirs.bloom"
    theirs.save(their_path)
    paths = {mode: tmp_path / f"{mode}.bloom" for mode in ("a", "r+")}
    for path in paths.values():
        f = BloomFilter(10_000, kind=kind)
        f.update(mine)
        f.save(path)
    before = paths["a"].read_bytes()
    inode = paths["a"].stat().st_ino
    with BloomFilter.open(paths["a"], "a") as f:
        owned = BloomFilter.open(paths["r+"], "r+")
        other_kind = "classic" if kind != "classic" else "blocked"
        for other in (BloomFilter(100, kind=kind), BloomFilter(10_000, kind=other_kind)):
            messages = set()
            for target in (f, owned):
                with pytest.raises(ValueError, match="^filters are incompatible: ") as refused:
                    target |= other
                messages.add(str(refused.value))
            assert len(messages) == 1  # the same words in place and in memory
        assert paths["a"].read_bytes() == before
        assert cli("verify", paths["a"]).returncode == 0  # still sealed
        f |= BloomFilter.open(their_path)  # a file mapped read-only
        owned |= theirs
        owned.close()
        assert all(item in f for item in mine) and all(f"theirs {i}" in f for i in range(500))
        assert cli("verify", paths["a"], check=False).returncode == 3  # unsealed while it changes
    assert paths["a"].stat().st_ino == inode
    assert paths["a"].read_bytes() == paths["r+"].read_bytes()
    assert cli("verify", paths["a"]).returncode == 0
    theirs.add("later")
    with BloomFilter.open(paths["a"], "a") as f:
        f |= theirs  # a filter in memory
        assert "later" in f


def test_a_filter_dropped_without_close_is_sealed(cli, tmp_path):
    path = tmp_path / "f.bloom"
    BloomFilter(100, kind="classic").save(path)
    f = BloomFilter.open(path, "a")
    f.add("x")
    del f
    assert cli("verify", path).returncode == 0
    assert "x" in BloomFilter.open(path)


def test_mode_a_only_adds_and_only_to_variants_that_change_in_place(cli, tmp_path):
    counting = tmp_path / "counting.bloom"
    cli("create", counting, "--items", "100", "--variant", "counting")
    before = counting.read_bytes()
    with pytest.raises(ValueError) as error:
        BloomFilter.open(counting, "a")
    assert str(error.value) == (
        f"{counting}: mode 'a' adds items in place to classic, blocked and split-block files; "
        "this file's variant is counting: open it with mode 'r+'"
    )
    assert counting.read_bytes() == before
    path = tmp_path / "blocked.bloom"
    BloomFilter(100).save(path)
    f = BloomFilter.open(path, "a")
    for change in (f.clear, lambda: f.remove("x"), lambda: f.__iand__(BloomFilter(100))):
        with pytest.raises(OSError, match="mode 'a', which only adds") as refused:
            change()
        assert isinstance(refused.value, ValueError)  # io.UnsupportedOperation is both
    # Copies are sealed files' bytes, in memory or elsewhere on disk.
    f.add("x")
    copy = tmp_path / "copy.bloom"
    f.save(copy)
    assert cli("verify", copy).returncode == 0
    assert f.to_bytes() == copy.read_bytes()
    g = f.copy()
    assert g.mode is None and "x" in g and g == f
    f.close()
    assert path.read_bytes() == copy.read_bytes()


def test_mode_a_maps_only_the_pages_it_touches(cli, tmp_path):
    """A 600 MB filter: opened, 10,000 items added and sealed without reading it into
    memory."""
    path = tmp_path / "big.bloom"
    cli("create", path, "--items", "500000000", "--fpp", "0.01", "--no-space-check")
    assert path.stat().st_size > 500_000_000

    def rss():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    before = rss()
    items = [f"item {i}" for i in range(10_000)]
    with BloomFilter.open(path, "a") as f:
        f.update(items)
        assert rss() - before < 200_000_000
    assert cli("verify", path).returncode == 0
    assert cli("check", "-q", path, *items).returncode == 0


def mapped_rss(path):
    """The bytes of `path` mapped in this process's resident memory (its mappings in
    /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and ":" not in fields[0]:  # a mapping's first line
                inside = len(fields) >= 6 and fields[-1] == str(path)
            elif inside and fields[0] == "Rss:":
                total += int(fields[1]) * 1024
    return total


def during_union(f, theirs, path):
    """`f |= theirs`, sampling the mapped part of `path` from another thread while it runs
    (and once after): the largest sample."""
    import threading

    samples, done = [], threading.Event()

    def sample():
        while not done.is_set():
            samples.append(mapped_rss(path))

    sampler = threading.Thread(target=sample)
    f.add("before the union")  # maps a page, so that a release shows
    sampler.start()
    try:
        f |= theirs
    finally:
        done.set()
        sampler.join()
    samples.append(mapped_rss(path))
    assert len(samples) >= 3, len(samples)
    return max(samples)


@pytest.mark.parametrize("kind", IN_PLACE_KINDS)
def test_mode_a_lets_go_of_a_larger_files_pages_window_by_window(cli, tmp_path, monkeypatch, kind):
    """A file larger than the window (`BLOOMERY_WINDOW_BYTES`, 1 GiB by default) lets go of
    its pages after each window's worth of pages touched while items go in, one by one, in
    batches, as the CLI's updates do: what stays mapped is bounded by the window times the
    pages the kernel maps with each one touched (at most 16:
    `bloomery::file::items_per_release`), not by the file. `|=` ORs a region at a time
    (`bloomery::file::region_bytes`), each let go of before the next: sampled from another
    thread while it runs (the GIL is released), the mapped part stays small; without the
    window it grows to the file. The bits are those of the same adds without the window."""
    items = [f"https://example.com/{i}" for i in range(60_000)]
    theirs = BloomFilter(40_000_000, kind=kind)
    theirs.update(f"theirs {i}" for i in range(1000))
    paths = {window: tmp_path / f"{window}.bloom" for window in ("whole", "windowed")}
    for window, path in paths.items():
        cli("create", path, "--items", "40000000", "--variant", kind)
        assert path.stat().st_size > 45 << 20
        if window == "windowed":
            monkeypatch.setenv("BLOOMERY_WINDOW_BYTES", str(1 << 20))
        largest = 0
        with BloomFilter.open(path, "a") as f:
            for count, item in enumerate(items[:20_000], 1):
                f.add(item)
                if count % 1000 == 0:
                    largest = max(largest, mapped_rss(path))
            for start in range(20_000, len(items), 5_000):
                f.update(items[start : start + 5_000])
                largest = max(largest, mapped_rss(path))
            largest = max(largest, during_union(f, theirs, path))
        monkeypatch.delenv("BLOOMERY_WINDOW_BYTES", raising=False)
        if window == "windowed":
            assert largest <= 16 << 20, largest
        else:
            assert largest > 30 << 20, largest  # without the window: most of the file
    assert paths["whole"].read_bytes() == paths["windowed"].read_bytes()
    assert cli("verify", paths["windowed"]).returncode == 0


def unsealed_file(path, kind, items):
    """A file left unsealed by a writer in mode "a" killed after adding `items`."""
    BloomFilter(100_000, kind=kind).save(path)
    kill_after(f"""
f = BloomFilter.open({str(path)!r}, "a")
f.update({items!r})
""")


@pytest.mark.parametrize("kind", IN_PLACE_KINDS)
def test_an_unsealed_file_is_read_from_its_bits_and_copied_sealed(cli, tmp_path, kind):
    """A file a killed writer left unsealed has valid bits and a stale checksum: the
    readers use its bits, as the CLI's do (docs/format.md, "Sealed and unsealed files"),
    and every copy of it (bytes, pickle, save elsewhere, copy, union, intersection, Guava
    bytes) is a sealed, valid file with its items. Mode "r+" loads it and saves it sealed."""
    import pickle

    path = tmp_path / "unsealed.bloom"
    items = [f"item {i}" for i in range(1000)]
    unsealed_file(path, kind, items)
    before = path.read_bytes()
    assert cli("verify", path, check=False).returncode == 3
    with BloomFilter.open(path, verify=True) as f:
        assert f.contains_many(items) == [True] * len(items)
        copies = [BloomFilter.from_bytes(f.to_bytes()), pickle.loads(pickle.dumps(f)), f.copy(), f | f.copy(),
                  f & f.copy(), f.union(), f.intersection()]  # fmt: skip
        if kind == "classic":
            copies.append(BloomFilter.from_guava_bytes(f.to_guava_bytes()))
        for copy in copies:
            assert copy.contains_many(items) == [True] * len(items)
        assert copies[0] == f and f == copies[0]
        f.save(tmp_path / "copy.bloom")
    assert cli("verify", tmp_path / "copy.bloom").returncode == 0
    assert cli("check", "-q", tmp_path / "copy.bloom", *items).returncode == 0
    assert path.read_bytes() == before  # readers leave it as it is
    with BloomFilter.open(path, "r+") as f:
        assert f.contains_many(items) == [True] * len(items)
        f.add("more")
    assert cli("verify", path).returncode == 0
    assert cli("check", "-q", path, "more", *items).returncode == 0


def test_copies_of_a_mapped_file_an_add_changes_in_place_are_valid(cli, tmp_path):
    """While `bloomery add` sets bits in a file in place (unsealing it, then sealing it
    again, once per add), every copy of the file mapped read-only (bytes, pickle, save
    elsewhere, copy) is a valid, sealed file holding every item of every add that finished
    before the copy began; opening it with `verify=True` meanwhile (another thread) never
    calls it damaged."""
    import pickle
    import threading

    path = tmp_path / "live.bloom"
    cli("create", path, "--items", "20000000", "--variant", "blocked")
    assert path.stat().st_size > 20 << 20
    batches = [[f"batch {b} item {i}" for i in range(50_000)] for b in range(24)]
    finished = []  # how many adds had finished, appended as each one does
    failures = []

    def add_all():
        try:
            for number, batch in enumerate(batches):
                items = tmp_path / f"items{number}.txt"
                items.write_text("\n".join(batch) + "\n")
                cli("add", path, "-i", items)
                finished.append(number + 1)
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    verified = []

    def verify_all():
        try:
            while adder.is_alive():
                BloomFilter.open(path, verify=True).close()
                verified.append(True)
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    f = BloomFilter.open(path)
    adder = threading.Thread(target=add_all)
    verifier = threading.Thread(target=verify_all)
    adder.start()
    verifier.start()
    copies = []
    roads = ["bytes", "pickle", "save", "copy"]
    try:
        while adder.is_alive():
            done = len(finished)
            road = roads[len(copies) % len(roads)]
            if road == "bytes":
                copy = f.to_bytes()
            elif road == "pickle":
                copy = pickle.dumps(f)
            elif road == "save":
                copy = tmp_path / f"copy{len(copies)}.bloom"
                f.save(copy)
            else:
                copy = f.copy().to_bytes()
            copies.append((done, road, copy))
    finally:
        adder.join()
        verifier.join()
    assert not failures, failures
    assert len(copies) >= 10 and len(verified) >= 10, (len(copies), len(verified))
    for done, road, copy in copies:
        if road == "save":
            assert cli("verify", copy).returncode == 0
            copy = BloomFilter.open(copy)
        elif road == "pickle":
            copy = pickle.loads(copy)
        else:
            copy = BloomFilter.from_bytes(copy)  # both checksums checked
        for batch in batches[:done]:
            assert all(copy.contains_many(batch[::97])), (road, done)


def test_a_forked_child_neither_changes_nor_seals_its_parents_file(cli, tmp_path):
    """A child made by fork() holds a copy of a mode-"a" filter: its adds are refused, and
    its exit does not seal the file under its parent (which, believing it still unsealed,
    would go on changing bits under a sealed header: a checksum mismatch, "damaged"). The
    parent, killed after more adds, leaves it unsealed with every item."""
    path = tmp_path / "forked.bloom"
    cli("create", path, "--items", "100000")
    items = [f"item {i}" for i in range(1000)]
    script = f"""
import os, signal, sys
from bloomery import BloomFilter
f = BloomFilter.open({str(path)!r}, "a")
f.add("before")
child = os.fork()
if child == 0:
    refused = []
    for change in (lambda: f.add("from the child"), f.save, f.close):
        try:
            change()
        except ValueError as error:
            refused.append("fork()" in str(error))
    print("child refused" if refused == [True] * 3 else refused)
    sys.stdout.flush()
    sys.exit(0)
os.waitpid(child, 0)
f.update({items!r})
print("parent added", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert result.stdout.split("\n")[:2] == ["child refused", "parent added"], result.stdout
    verify = cli("verify", path, check=False)
    assert verify.returncode == 3 and b"unsealed" in verify.stdout + verify.stderr, verify
    assert cli("check", "-q", path, "before", *items).returncode == 0


def test_a_forked_child_cannot_save_over_its_parents_r_plus_file(cli, tmp_path):
    """A child made by fork() holds a copy of a filter opened "r+" (and shares its lock):
    its save() and close() are refused rather than replacing the file under its parent,
    whose close() then saves what it added."""
    path = tmp_path / "forked.bloom"
    cli("create", path, "--items", "1000", "--variant", "scalable")
    script = f"""
import os, sys
from bloomery import BloomFilter
f = BloomFilter.open({str(path)!r}, "r+")
f.add("parent")
child = os.fork()
if child == 0:
    f.add("child")  # its own copy, in memory
    refused = []
    for change in (f.save, f.close):
        try:
            change()
        except ValueError as error:
            refused.append("fork()" in str(error))
    print("child refused" if refused == [True, True] else refused, flush=True)
    sys.exit(0)
os.waitpid(child, 0)
f.close()
g = BloomFilter.open({str(path)!r})
print("parent" in g, "child" in g)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["child refused", "True False"], result.stdout


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11's")
@pytest.mark.parametrize("mode", ["a", "r+"])
def test_a_filter_closed_during_a_batch_add_says_how_many_items_went_in(tmp_path, mode):
    # A generator that closes the filter part way: the chunk read since was not added, and
    # the error said nothing of what was (found by a hunt).
    path = tmp_path / "f.bloom"
    BloomFilter(100_000).save(path)
    f = BloomFilter.open(path, mode)

    def items():
        for i in range(40_000):
            if i == 20_000:
                f.close()
            yield f"item:{i}"

    with pytest.raises(ValueError, match="closed filter") as raised:
        f.update(items())
    assert raised.value.__notes__ == [
        "the 16384 items of this call before the filter was closed were added, the rest were not"
    ]
    with BloomFilter.open(path) as g:
        assert g.contains_many([f"item:{i}" for i in range(16_384)]) == [True] * 16_384
