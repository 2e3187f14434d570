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
    script = f"""
import sys, time
from bloomery import BloomFilter
f = BloomFilter.open({str(path)!r}, "a")
f.update({items[:2500]!r})
other = BloomFilter(100000)
other.update({merged!r})
f |= other
f.update({items[2500:]!r})
print("added", flush=True)
time.sleep(60)
"""
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "added\n"
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.wait(timeout=30)
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
        "this is a counting filter: open it with mode 'r+'"
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
