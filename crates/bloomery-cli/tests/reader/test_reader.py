"""Checks the independent Python reader (``bloomery_reader.py``, written from
``docs/format.md`` alone) against the real ``bloomery`` command-line tool.

Run from the repository root::

    target/venv/bin/pytest -q crates/bloomery-cli/tests/reader

The tool is ``$BLOOMERY_BIN`` (default ``<repo>/target/release/bloomery``). The
library-made files come from ``cargo run --release -q -p bloomery --example
variant_files -- DIR 100000``, run once per session.

Files the spec makes invalid are refused by both (``test_spec_refusals``: these were
discrepancies this reader found in the tool, fixed since). The answer counts compared are
printed at the end of the run.
"""

from __future__ import annotations

import os
import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]  # crates/bloomery-cli/tests/reader -> repo
sys.path.insert(0, str(HERE))

import bloomery_reader as br  # noqa: E402

BIN = Path(os.environ.get("BLOOMERY_BIN", REPO / "target" / "release" / "bloomery"))
SPEC = REPO / "docs" / "format.md"
VARIANTS = ["classic", "blocked", "counting", "scalable", "retouched", "allowlisted", "rotating",
            "split-block", "redisbloom", "scalable-blocked"]  # fmt: skip
N_ITEMS = 100_000


# --------------------------------------------------------------------------- helpers


def bloomery(*args, check_rc=None) -> subprocess.CompletedProcess:
    """Runs the tool; returns the completed process (bytes output)."""
    proc = subprocess.run([str(BIN), *map(str, args)], capture_output=True)
    if check_rc is not None:
        assert proc.returncode == check_rc, (args, proc.returncode, proc.stderr.decode())
    return proc


def tool_answers(file: Path, input_file: Path, fmt: str = "text") -> list[tuple[bytes, bool]]:
    """``bloomery check -f FMT -i INPUT FILE``: one ``(line, present)`` per input line, in
    order. Checks the exit status rule: 0 when all are present, 1 otherwise."""
    proc = bloomery("check", "--format", fmt, "-i", input_file, file)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    answers = []
    for line in proc.stdout.split(b"\n")[:-1]:
        verdict, tab, item = line.partition(b"\t")
        assert tab and verdict in (b"probably present", b"absent"), line
        answers.append((item, verdict == b"probably present"))
    expected = read_lines(input_file)
    assert [item for item, _ in answers] == expected
    assert proc.returncode == (0 if all(a for _, a in answers) else 1)
    return answers


def read_lines(path: Path) -> list[bytes]:
    """The lines of a file, without their newlines."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def compare(filt, answers, to_item=lambda line: line) -> tuple[int, int, list[bytes]]:
    """Compares the reader's answers with the tool's: ``(present, mismatches, examples)``."""
    mismatches = [line for line, present in answers if filt.contains(to_item(line)) != present]
    return sum(p for _, p in answers), len(mismatches), mismatches[:5]


def split_file(data: bytes) -> tuple[br.Header, bytes, bytes]:
    """A valid file's header, parameters and payload, to rebuild changed copies."""
    hdr = br.read_header(data)
    return hdr, data[32 : 32 + hdr.p], data[hdr.h : hdr.h + hdr.length]


def reader_accepts(data: bytes) -> bool:
    try:
        br.read(data)
    except ValueError:
        return False
    return True


def tool_accepts(path: Path) -> bool:
    """``bloomery verify`` exits 0 for a valid file and 2 for an invalid one."""
    rc = bloomery("verify", path).returncode
    assert rc in (0, 2), rc
    return rc == 0


def spec_vectors() -> dict[str, bytes]:
    """The test vectors of docs/format.md ("Test vectors"), by name."""
    text = SPEC.read_text()
    found = re.finditer(r"<!-- vector ([\w-]+):.*?-->\s*```text\n(.*?)```", text, re.S)
    return {m.group(1): bytes.fromhex("".join(m.group(2).split())) for m in found}


# --------------------------------------------------------------------------- fixtures


class _CountsReport:
    """Prints the answer counts at the end of the run (a plugin registered at runtime)."""

    def __init__(self):
        self.rows: list[str] = []

    def pytest_terminal_summary(self, terminalreporter):
        if self.rows:
            terminalreporter.write_sep("-", "reader vs tool: answers compared")
            for row in self.rows:
                terminalreporter.write_line(row)


@pytest.fixture(scope="session")
def counts(pytestconfig):
    report = _CountsReport()
    pytestconfig.pluginmanager.register(report, "bloomery-reader-counts")
    return report.rows


@pytest.fixture(scope="session", autouse=True)
def tool_exists():
    assert BIN.is_file(), f"no bloomery binary at {BIN} (set BLOOMERY_BIN)"


@pytest.fixture(scope="session")
def library_dir(tmp_path_factory) -> Path:
    """The library-made files of every variant, plus present.txt and absent.txt."""
    out = tmp_path_factory.mktemp("variant_files")
    subprocess.run(
        ["cargo", "run", "--release", "-q", "-p", "bloomery", "--example", "variant_files",
         "--", str(out), str(N_ITEMS)],
        cwd=REPO, check=True, capture_output=True,
    )  # fmt: skip
    return out


@pytest.fixture(scope="session")
def present_file(library_dir) -> Path:
    return library_dir / "present.txt"


@pytest.fixture(scope="session")
def absent_file(library_dir) -> Path:
    return library_dir / "absent.txt"


@pytest.fixture(scope="session")
def cli_dir(tmp_path_factory, present_file) -> Path:
    """Files made by the tool: each variant at 100,000 items and fpp 0.01, filled with
    the 100,000 present items; plus ``blocked42.bloom`` (seed 42) and
    ``split-block-xxh3.bloom`` (hasher 2, seed 42)."""
    out = tmp_path_factory.mktemp("cli_files")
    for variant in VARIANTS:
        f = out / f"{variant}.bloom"
        bloomery("create", "--variant", variant, "--items", N_ITEMS, "--fpp", "0.01", f,
                 check_rc=0)  # fmt: skip
        bloomery("add", f, "-i", present_file, check_rc=0)
    f = out / "blocked42.bloom"
    bloomery("create", "--variant", "blocked", "--seed", "42", "--items", N_ITEMS,
             "--fpp", "0.01", f, check_rc=0)  # fmt: skip
    bloomery("add", f, "-i", present_file, check_rc=0)
    f = out / "split-block-xxh3.bloom"
    bloomery("create", "--variant", "split-block", "--hash", "xxh3", "--seed", "42",
             "--items", N_ITEMS, "--fpp", "0.01", f, check_rc=0)  # fmt: skip
    bloomery("add", f, "-i", present_file, check_rc=0)
    return out


# --------------------------------------------------------------------------- spec basics


def test_hash_conventions():
    """h1, h2 are the first and second 8 bytes of MurmurHash3 x64 128, little-endian;
    mmh3.hash64(unsigned) gives the same pair; the splitmix64 salts are the listed ones."""
    for item in [b"", b"apple", b"banana", bytes(range(256))]:
        assert br.murmur3_h1_h2(item) == mmh3_hash64(item)
    assert br.BLOCKED_SALTS == br.SPEC_BLOCKED_SALTS


def mmh3_hash64(item: bytes) -> tuple[int, int]:
    import mmh3

    return mmh3.hash64(item, seed=0, x64arch=True, signed=False)


def test_spec_vectors_read_and_rebuild(tmp_path):
    """The spec's vectors: read them, answer apple/banana/cherry as the spec says,
    rebuild them byte for byte, and the tool agrees."""
    vectors = spec_vectors()
    assert set(vectors) == {"classic", "blocked", "split-block", "split-block-xxh3", *MORE_VECTORS}
    classic = br.read(vectors["classic"])
    assert isinstance(classic, br.ClassicFilter) and classic.num_hashes == 3
    assert struct.unpack("<Q", classic.words)[0] == 0x02000081004000A0
    blocked = br.read(vectors["blocked"])
    assert isinstance(blocked, br.BlockedFilter)
    assert (blocked.num_blocks, blocked.seed, blocked.sized_for) == (1, 7, (3, 0.1))

    split_block = br.read(vectors["split-block"])
    assert isinstance(split_block, br.SplitBlockFilter) and split_block.num_blocks == 1
    split_block_xxh3 = br.read(vectors["split-block-xxh3"])
    assert isinstance(split_block_xxh3, br.SplitBlockFilter)
    assert (split_block_xxh3.num_blocks, split_block_xxh3.hasher, split_block_xxh3.seed) == (1, 2, 7)

    rebuilt_classic = br.ClassicFilter.new(3, 1)
    rebuilt_blocked = br.BlockedFilter.new(1, 7, sized_for=(3, 0.1))
    rebuilt_split_block = br.SplitBlockFilter.new(1)
    rebuilt_split_block_xxh3 = br.SplitBlockFilter.new(1, seed=7)
    for item in [b"apple", b"banana"]:
        rebuilt_classic.add(item)
        rebuilt_blocked.add(item)
        rebuilt_split_block.add(item)
        rebuilt_split_block_xxh3.add(item)
    assert rebuilt_classic.to_bytes() == vectors["classic"]
    assert rebuilt_blocked.to_bytes() == vectors["blocked"]
    assert rebuilt_split_block.to_bytes() == vectors["split-block"]
    assert rebuilt_split_block_xxh3.to_bytes() == vectors["split-block-xxh3"]

    for name, filt in [
        ("classic", classic),
        ("blocked", blocked),
        ("split-block", split_block),
        ("split-block-xxh3", split_block_xxh3),
    ]:
        path = tmp_path / f"{name}.bloom"
        path.write_bytes(vectors[name])
        assert tool_accepts(path)
        out = bloomery("check", path, "apple", "banana", "cherry", check_rc=1).stdout
        assert out == b"probably present\tapple\nprobably present\tbanana\nabsent\tcherry\n"
        assert [filt.contains(i) for i in [b"apple", b"banana", b"cherry"]] == [
            True, True, False,
        ]  # fmt: skip


MORE_VECTORS = {
    # name: (items added, items then present)
    "blocked-3-blocks": (["apple", "banana", "cherry", "date"], None),
    "counting": (["apple", "apple", "banana"], None),
    "scalable": (["apple", "banana", "cherry", "apple"], None),
    "retouched": (["apple", "banana"], "one of them"),
    "allowlisted": (["apple", "banana"], None),
    "rotating": (["apple", "banana", "cherry", "apple"], None),
    "redisbloom": (["apple", "banana", "cherry"], None),
    "scalable-blocked": (["apple", "banana", "cherry"], None),
}


def _empty_growing(variant: str) -> bytes:
    """The empty filter each growing vector starts from, made from the page alone."""
    if variant == "scalable":  # ScalableBloomFilter::new(2, 0.1): expansion 2, tightening 0.5
        k, words = br.rate_sizing(2, 0.1 * (1 - 0.5))
        params = struct.pack("<QdIdBI", 2, 0.1, 2, 0.5, 1, 1) + struct.pack("<QQIQ", 2, 0, k, words)
        return br.build_file(br.SCALABLE, params, bytes(8 * words))
    if variant == "scalable-blocked":  # for_blocked(): expansion 2, tightening 0.8; seed 7
        blocks = br.blocked_sizing(2, 0.1 * (1 - 0.8))
        params = struct.pack("<QdIdBQI", 2, 0.1, 2, 0.8, 1, 7, 1) + struct.pack("<QQQ", 2, 0, blocks)
        return br.build_file(br.SCALABLE_BLOCKED, params, bytes(64 * blocks))
    assert variant == "rotating"  # with_window(2, 2, 0.1, Some(1_000), 0)
    k, words = br.rate_sizing(2, 0.1)
    params = struct.pack("<IQdQI", 2, 2, 0.1, 1_000, 1) + struct.pack("<QQIQ", 0, 0, k, words)
    return br.build_file(br.ROTATING, params, bytes(8 * words))


def test_every_variant_vector(tmp_path):
    """The spec's vectors of the other variants: the reader reads each, finds the items
    added (but the retouched vector's one false negative), answers as the tool does, and
    shows what the spec's note on each says; the growing variants' vectors are rebuilt
    byte for byte by the page's writer rules and sizing from an empty filter."""
    vectors = spec_vectors()
    probes = [b"apple", b"banana", b"cherry", b"date", b"elderberry", b"fp-81"]
    probes += [f"probe-{i}".encode() for i in range(300)]
    for name, (added, _) in MORE_VECTORS.items():
        data = vectors[name]
        filt = br.read(data)
        path = tmp_path / f"{name}.bloom"
        path.write_bytes(data)
        assert tool_accepts(path), name
        listed = tmp_path / "probes.txt"
        listed.write_bytes(b"".join(p + b"\n" for p in probes))
        answers = tool_answers(path, listed)
        _, n_bad, examples = compare(filt, answers)
        assert n_bad == 0, (name, examples)
        present = [item for item in added if filt.contains(item.encode())]
        if name == "retouched":
            assert len(set(present)) == 1, present
        else:
            assert present == added, (name, present)
        assert not filt.contains(b"elderberry"), name

    # What the notes say.
    blocked = br.read(vectors["blocked-3-blocks"])
    used = [b for b in range(3) if any(blocked.blocks[64 * b : 64 * b + 64])]
    assert (blocked.num_blocks, blocked.seed, used) == (3, 7, [0, 2])
    rebuilt = br.BlockedFilter.new(3, 7)
    for item in MORE_VECTORS["blocked-3-blocks"][0]:
        rebuilt.add(item.encode())
    assert rebuilt.to_bytes() == vectors["blocked-3-blocks"]
    counting = br.read(vectors["counting"])
    assert (counting.num_counters, counting.num_hashes, len(counting.counters)) == (21, 3, 11)
    assert counting.counters[-1] >> 4 == 0
    h1, h2 = br.murmur3_h1_h2(b"apple")
    assert all(counting.counter(i) >= 2 for i in br.classic_positions(h1, h2, 3, 21))
    scalable = br.read(vectors["scalable"])
    assert [(s.capacity, s.items) for s in scalable.subs] == [(2, 2), (4, 1)]
    retouched = br.read(vectors["retouched"])
    assert (retouched.random_state, retouched.false_negatives) == (0x9E3779B97F4A7C15, 1)
    assert not retouched.contains(b"fp-81")
    # Section "5: retouched": the Random removal took splitmix64's first output from state
    # 0 and cleared fp-81's distinct position at that index mod their count, one that the
    # lost item needed.
    h1, h2 = br.murmur3_h1_h2(b"fp-81")
    distinct = sorted(set(br.classic_positions(h1, h2, retouched.num_hashes, 64)))
    cleared = distinct[br.splitmix64_outputs(1)[0] % len(distinct)]
    assert not br._bit(retouched.words, 0, cleared)
    (lost,) = [i for i in (b"apple", b"banana") if not retouched.contains(i)]
    assert cleared in br.classic_positions(*br.murmur3_h1_h2(lost), retouched.num_hashes, 64)
    allowlisted = br.read(vectors["allowlisted"])
    assert allowlisted.listed == [b"fp-81"]
    classic = br.ClassicFilter(allowlisted.num_hashes, bytearray(allowlisted.words))
    assert classic.contains(b"fp-81") and not allowlisted.contains(b"fp-81")
    rotating = br.read(vectors["rotating"])
    assert [(g.items, g.started_ms) for g in rotating.generations] == [(2, 0), (2, 10)]
    redisbloom = br.read(vectors["redisbloom"])
    assert [(link.entries, link.error) for link in redisbloom.links] == [(2, 0.05), (4, 0.025)]
    scalable_blocked = br.read(vectors["scalable-blocked"])
    assert [(c, n) for c, _, n, _ in scalable_blocked.links] == [(2, 1), (4, 1)]

    # The growing variants, from empty, by the page's writer rules and sizing.
    for name, times in [("scalable", None), ("scalable-blocked", None), ("rotating", [0, 0, 10, 20])]:
        empty = br.read(_empty_growing(name))
        writer = {"scalable": br.ScalableWriter, "scalable-blocked": br.ScalableBlockedWriter,
                  "rotating": br.RotatingWriter}[name](empty)  # fmt: skip
        for i, item in enumerate(MORE_VECTORS[name][0]):
            if times is None:
                writer.add(item.encode())
            else:
                writer.add(item.encode(), times[i])
        assert writer.to_bytes() == vectors[name], name


# --------------------------------------------------------------------------- a. library files


@pytest.mark.parametrize("variant", VARIANTS)
def test_library_file(variant, library_dir, present_file, absent_file, counts):
    """Every answer of the reader equals the tool's, for 100,000 present and 100,000
    absent items, on the library-made file of each variant."""
    path = library_dir / f"{variant}.bloom"
    filt = br.read(path.read_bytes())
    assert type(filt).__name__.lower().startswith(variant.replace("-", ""))
    for label, items in [("present", present_file), ("absent", absent_file)]:
        answers = tool_answers(path, items)
        assert len(answers) == N_ITEMS
        n_present, n_bad, examples = compare(filt, answers)
        counts.append(
            f"library {variant:11} {label:7}: {len(answers)} items, tool and reader say "
            f"{n_present} present, {n_bad} mismatches"
        )
        assert n_bad == 0, examples


def test_allowlisted_listed_items(library_dir, tmp_path):
    """Section "6: allowlisted": the listed items pass the classic lookup (they are the
    recorded false positives) yet are absent, for the reader and the tool alike."""
    filt = br.read((library_dir / "allowlisted.bloom").read_bytes())
    assert filt.listed == sorted(filt.listed)
    classic = br.ClassicFilter(filt.num_hashes, bytearray(filt.words))
    assert filt.listed and all(classic.contains(item) for item in filt.listed)
    assert not any(filt.contains(item) for item in filt.listed)
    listed = tmp_path / "listed.txt"
    listed.write_bytes(b"".join(item + b"\n" for item in filt.listed))
    assert not any(present for _, present in tool_answers(library_dir / "allowlisted.bloom",
                                                          listed))  # fmt: skip


# --------------------------------------------------------------------------- b. CLI files


@pytest.mark.parametrize("variant", VARIANTS + ["split-block-xxh3"])
def test_cli_file(variant, cli_dir, present_file, absent_file, counts):
    """The same comparison on files the tool made and filled; and the reader finds every
    present item (no false negatives)."""
    path = cli_dir / f"{variant}.bloom"
    filt = br.read(path.read_bytes())
    for label, items in [("present", present_file), ("absent", absent_file)]:
        answers = tool_answers(path, items)
        assert len(answers) == N_ITEMS
        n_present, n_bad, examples = compare(filt, answers)
        counts.append(
            f"cli     {variant:11} {label:7}: {len(answers)} items, tool and reader say "
            f"{n_present} present, {n_bad} mismatches"
        )
        assert n_bad == 0, examples
        if label == "present":
            missing = [line for line, _ in answers if not filt.contains(line)]
            assert missing == [], missing[:5]


# --------------------------------------------------------------------------- c. rebuild


@pytest.mark.parametrize("name", ["classic", "blocked42", "split-block"])
def test_rebuild_bytes(name, cli_dir, present_file):
    """An empty filter with the file's parameters, filled with the same items in the
    same order, is the same file byte for byte."""
    data = (cli_dir / f"{name}.bloom").read_bytes()
    filt = br.read(data)
    if isinstance(filt, br.ClassicFilter):
        rebuilt = br.ClassicFilter.new(filt.num_hashes, filt.num_words)
    elif isinstance(filt, br.SplitBlockFilter):
        rebuilt = br.SplitBlockFilter.new(filt.num_blocks)
    else:
        assert filt.seed == 42
        rebuilt = br.BlockedFilter.new(filt.num_blocks, filt.seed, filt.sized_for)
    for item in read_lines(present_file):
        rebuilt.add(item)
    out = rebuilt.to_bytes()
    assert len(out) == len(data)
    assert out == data


# --------------------------------------------------------------------------- d. integers


def _long_values(rng: random.Random) -> tuple[list[str], list[str]]:
    """Decimal 64-bit integers, signed and unsigned (above 2^63), present and absent."""
    edges = ["0", "1", "-1", "9223372036854775807", "-9223372036854775808",
             "9223372036854775808", "18446744073709551615", "-42", "12345678901234567890"]  # fmt: skip
    values = list(dict.fromkeys(rng.randrange(-(1 << 63), 1 << 64) for _ in range(4000)))
    present = edges + [str(v) for v in values[:2000]]
    absent = [str(v) for v in values[2000:]] + ["2", "-2", "18446744073709551614"]
    return present, absent


def _int_values(rng: random.Random) -> tuple[list[str], list[str]]:
    """Decimal 32-bit integers, signed and unsigned (above 2^31), present and absent."""
    edges = ["0", "1", "-1", "2147483647", "-2147483648", "2147483648", "4294967295", "-7"]
    values = list(dict.fromkeys(rng.randrange(-(1 << 31), 1 << 32) for _ in range(4000)))
    present = edges + [str(v) for v in values[:2000]]
    absent = [str(v) for v in values[2000:]] + ["2", "-2", "4294967294"]
    return present, absent


def _hex_values(rng: random.Random) -> tuple[list[str], list[str]]:
    """Hexadecimal byte strings of 0..40 bytes, present and absent."""
    def one():
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 41))).hex()

    present = ["", "00", "ff", "DEADBEEF"] + [one() for _ in range(2000)]
    absent = [one() for _ in range(2000)]
    return present, absent


@pytest.mark.parametrize("variant", ["classic", "blocked", "split-block"])
@pytest.mark.parametrize(
    "fmt,values,to_item",
    [
        ("long", _long_values, lambda line: br.item_long(int(line))),
        ("int", _int_values, lambda line: br.item_int(int(line))),
        ("hex", _hex_values, lambda line: bytes.fromhex(line.decode())),
    ],
    ids=["long", "int", "hex"],
)
def test_integer_and_hex_items(variant, fmt, values, to_item, tmp_path, counts):
    """Files filled with ``add --format long/int/hex``: the reader, given the bytes the
    spec's "Items" table describes, agrees with ``check --format`` on every number."""
    rng = random.Random(f"{variant}-{fmt}")
    present, absent = values(rng)
    path = tmp_path / "f.bloom"
    seed = ["--seed", "9"] if variant == "blocked" else []  # refused where it does nothing
    bloomery("create", "--variant", variant, "--items", "2000", "--fpp", "0.01", *seed,
             path, check_rc=0)  # fmt: skip
    (tmp_path / "present.txt").write_text("".join(v + "\n" for v in present))
    (tmp_path / "absent.txt").write_text("".join(v + "\n" for v in absent))
    bloomery("add", "--format", fmt, path, "-i", tmp_path / "present.txt", check_rc=0)
    filt = br.read(path.read_bytes())
    for label in ["present", "absent"]:
        answers = tool_answers(path, tmp_path / f"{label}.txt", fmt)
        n_present, n_bad, examples = compare(filt, answers, to_item)
        counts.append(
            f"{fmt:4} {variant:8} {label:7}: {len(answers)} items, {n_present} present, "
            f"{n_bad} mismatches"
        )
        assert n_bad == 0, examples
        if label == "present":
            assert n_present == len(answers)
    # The same number signed and unsigned is the same item.
    if fmt == "long":
        assert br.item_long(-1) == br.item_long((1 << 64) - 1)
        out = bloomery("check", "--format", "long", path, "-1", "18446744073709551615",
                       "-9223372036854775808", "9223372036854775808", check_rc=0)  # fmt: skip
        assert out.stdout.count(b"probably present") == 4


def test_reader_check_order():
    """Section "Header": the reader's checks run in the spec's order, so a file with
    several faults is refused for the first one."""
    good = spec_vectors()["classic"]

    def refused_for(data) -> str:
        with pytest.raises(ValueError) as err:
            br.read(bytes(data))
        return str(err.value)

    bad = bytearray(good)
    bad[0:8] = b"BLOOMERZ"
    bad[8] = 9
    assert "magic" in refused_for(bad)
    bad = bytearray(good)
    bad[8] = 9
    bad[64] ^= 1
    assert "version" in refused_for(bad)
    assert "truncated" in refused_for(good[:63])  # H = 64 bytes are not all there
    bad = bytearray(good)
    struct.pack_into("<I", bad, 12, 70_000)  # P too big, and the header checksum is stale
    assert "P = 70000" in refused_for(bad)
    bad = bytearray(good) + b"\0"
    bad[60] ^= 1  # header checksum broken and file too long
    assert "header checksum" in refused_for(bad)
    bad = bytearray(good) + b"\0"
    bad[64] ^= 1  # payload broken and file too long
    assert "more than H + L" in refused_for(bad)
    bad = bytearray(br.build_file(1, struct.pack("<I", 0), good[64:]))
    assert "num_hashes" in refused_for(bad)  # checksums fine, parameter not
    bad[64] ^= 1
    assert "payload checksum" in refused_for(bad)


# --------------------------------------------------------------------------- e. damage


def _damage_cases(tmp_path) -> dict[str, bytes]:
    vectors = spec_vectors()
    small = tmp_path / "small.bloom"
    bloomery("create", "--variant", "classic", "--items", "20", small, check_rc=0)
    bloomery("add", small, "apple", "banana", "cherry", check_rc=0)
    return {"classic vector": vectors["classic"], "blocked vector": vectors["blocked"],
            "small CLI classic": small.read_bytes()}  # fmt: skip


def test_flipped_bytes_are_refused(tmp_path):
    """Flipping any one byte (all bits, or only the lowest) of the spec's vectors or of a
    small CLI file: the reader raises ValueError and ``bloomery verify`` exits 2."""
    path = tmp_path / "damaged.bloom"
    for name, original in _damage_cases(tmp_path).items():
        assert reader_accepts(original)
        path.write_bytes(original)
        assert tool_accepts(path), name
        for offset in range(len(original)):
            for mask in (0xFF, 0x01):
                damaged = bytearray(original)
                damaged[offset] ^= mask
                with pytest.raises(ValueError):
                    br.read(bytes(damaged))
                path.write_bytes(damaged)
                rc = bloomery("verify", path).returncode
                assert rc == 2, (name, offset, mask, rc)


@pytest.mark.parametrize("fix_checksum", [False, True], ids=["stale-checksum", "fixed-checksum"])
def test_version_3_is_refused(fix_checksum, tmp_path):
    """A version field of 3 is refused by both (with the header checksum left as it was,
    or recomputed so that only the version is wrong)."""
    data = bytearray(spec_vectors()["classic"])
    struct.pack_into("<H", data, 8, 3)
    if fix_checksum:
        struct.pack_into("<Q", data, 56, br.xxh3_64(bytes(data[:56])))
    with pytest.raises(ValueError, match="version 3"):
        br.read(bytes(data))
    path = tmp_path / "v3.bloom"
    path.write_bytes(data)
    assert bloomery("verify", path).returncode == 2
    assert bloomery("check", path, "apple").returncode == 2
    if fix_checksum:
        assert b"version 3" in bloomery("verify", path).stderr


@pytest.mark.parametrize("variant", VARIANTS)
def test_payload_checksum_on_check_and_info(variant, library_dir, tmp_path):
    """Spec ("Header"): the payload checksum is checked by every load for update, by
    ``verify`` and by ``check``; ``check --no-verify`` and ``info`` may skip it for the
    classic, blocked and split-block variants, which answer from the mapped bits (``info``
    then says the payload is damaged). A library file with one payload bit flipped: the
    reader, ``verify`` and ``check`` refuse it; ``check --no-verify``/``info`` answer for
    those three and refuse the rest."""
    data = bytearray((library_dir / f"{variant}.bloom").read_bytes())
    hdr = br.read_header(data)
    data[hdr.h + 3] ^= 0x10  # inside the first word: structure stays valid
    with pytest.raises(ValueError, match="payload checksum"):
        br.read(bytes(data))
    path = tmp_path / "damaged.bloom"
    path.write_bytes(data)
    assert bloomery("verify", path).returncode == 2
    assert bloomery("check", "-q", path, "apple").returncode == 2
    check_rc = bloomery("check", "--no-verify", "-q", path, "apple").returncode
    info = bloomery("info", path)
    if variant in ("classic", "blocked", "split-block"):
        assert (check_rc, info.returncode) == (1, 0)
        assert b"payload checksum: DAMAGED" in info.stdout
    else:
        assert (check_rc, info.returncode) == (2, 2), variant


# --------------------------------------------------------------------------- version 1


@pytest.mark.parametrize("variant", ["classic", "counting", "scalable", "retouched", "allowlisted"])
def test_version_1_same_layout(variant, library_dir, present_file, absent_file, tmp_path):
    """Version 1 of these variants has the version-2 parameters and payload: a library
    file relabelled as version 1 gets the same answers from the reader and the tool."""
    _, params, payload = split_file((library_dir / f"{variant}.bloom").read_bytes())
    code = VARIANTS.index(variant) + 1
    data = br.build_file(code, params, payload, version=1)
    path = tmp_path / "v1.bloom"
    path.write_bytes(data)
    assert tool_accepts(path)
    filt = br.read(data)
    assert filt.version == 1
    sample = tmp_path / "sample.txt"
    sample.write_bytes(b"".join(x + b"\n" for x in read_lines(present_file)[:5000]
                                + read_lines(absent_file)[:5000]))  # fmt: skip
    _, n_bad, examples = compare(filt, tool_answers(path, sample))
    assert n_bad == 0, examples


def _rotating_v1(data: bytes) -> bytes:
    """A version-2 rotating file rewritten as version 1: each generation's ``num_hashes``
    and ``num_words`` dropped (section "Version 1")."""
    _, params, payload = split_file(data)
    kept = struct.unpack_from("<I", params, 28)[0]
    gens = [struct.unpack_from("<QQIQ", params, 32 + 28 * i) for i in range(kept)]
    v1_params = params[:32] + b"".join(struct.pack("<QQ", g[0], g[1]) for g in gens)
    return br.build_file(br.ROTATING, v1_params, payload, version=1)


def test_version_1_rotating(tmp_path, library_dir):
    """Version-1 rotating generations take the classic sizing for
    ``items_per_generation`` at ``fpp``. At 40 items and fpp 0.03 Guava's
    ``optimalNumOfHashFunctions(n, m)`` gives 5 hashes where the newer
    ``optimalNumOfHashFunctions(p)`` gives 6, so the answers tell them apart. (Fewer
    items at a lower rate, the tool now gives new generations more bits than Guava's
    shape, against double hashing's floor, and a few more at every rate so that Guava's
    rounded hash count meets it: files of version 1 never had those. So the version-1
    files are made from tool-made ones whose rate sizing is the classic sizing, 40 items
    at 0.03 and 2,004 at 0.01; the library's file, of the rate sizing, is checked to
    have it.)"""
    lib = br.read((library_dir / "rotating.bloom").read_bytes())
    assert [(g.num_hashes, g.num_words) for g in lib.generations] == [
        br.rate_sizing(lib.items_per_generation, lib.fpp)
    ] * len(lib.generations)
    small = tmp_path / "rot.bloom"
    bloomery("create", "--variant", "rotating", "--generations", "4", "--items", "40",
             "--fpp", "0.03", small, check_rc=0)  # fmt: skip
    added = [*"abcdefghijklm", *(f"y{i}" for i in range(120))]
    bloomery("add", small, *added, check_rc=0)
    assert br.rate_sizing(40, 0.03) == br.classic_sizing(40, 0.03)
    assert br.rate_sizing(2_004, 0.01) == br.classic_sizing(2_004, 0.01)
    large = tmp_path / "rot2004.bloom"
    bloomery("create", "--variant", "rotating", "--generations", "3", "--items", "2004",
             "--fpp", "0.01", large, check_rc=0)  # fmt: skip
    many = [f"z{i}" for i in range(5_000)]
    (tmp_path / "many.txt").write_text("".join(f"{item}\n" for item in many))
    bloomery("add", large, "-i", tmp_path / "many.txt", check_rc=0)
    items = tmp_path / "items.txt"
    items.write_text("".join(f"{item}\n" for item in added + many)
                     + "".join(f"x{i}\n" for i in range(3000)))  # fmt: skip
    for source in [small, large]:
        v2 = br.read(source.read_bytes())
        assert [(g.num_hashes, g.num_words) for g in v2.generations] == [
            br.classic_sizing(v2.items_per_generation, v2.fpp)
        ] * len(v2.generations)
        data = _rotating_v1(source.read_bytes())
        path = tmp_path / "v1.bloom"
        path.write_bytes(data)
        assert tool_accepts(path)
        filt = br.read(data)
        answers = tool_answers(path, items)
        n_present, n_bad, examples = compare(filt, answers)
        assert n_bad == 0, examples
        assert [(g.num_hashes, g.num_words) for g in filt.generations] == [
            (g.num_hashes, g.num_words) for g in v2.generations
        ]
        assert len(v2.generations) > 1
    assert br.classic_sizing(40, 0.03) == (5, 5)


def test_version_1_rotating_hash_count_from_the_truncated_bits(tmp_path):
    """Section "Version 1", rotating: ``num_hashes`` comes from the truncated integer
    ``bits`` (n = 1, p = 0.01: 9 bits, 6 hashes), not from the untruncated 9.59 (7). A
    version-1 file with only an item's first 6 positions set: present for the tool and the
    reader; with 7 hashes its seventh position, unset, would make it absent."""
    assert br.classic_sizing(1, 0.01) == (6, 1)
    words = bytearray(8)
    h1, h2 = br.murmur3_h1_h2(b"apple")
    positions = br.classic_positions(h1, h2, 7, 64)
    for pos in positions[:6]:
        words[pos >> 3] |= 1 << (pos & 7)
    assert positions[6] not in positions[:6]
    params = struct.pack("<IQdQI", 2, 1, 0.01, 0, 1) + struct.pack("<QQ", 1, 0)
    data = br.build_file(br.ROTATING, params, bytes(words), version=1)
    assert br.read(data).contains(b"apple")
    path = tmp_path / "v1.bloom"
    path.write_bytes(data)
    bloomery("check", path, "apple", check_rc=0)


# --------------------------------------------------------------------------- edge cases


def _edge_files(library_dir: Path, cli_dir: Path) -> dict[str, tuple[bytes, bool]]:
    """Crafted files with valid checksums, by name: ``(bytes, valid per the spec)``."""
    cases: dict[str, tuple[bytes, bool]] = {}
    classic = (cli_dir / "classic.bloom").read_bytes()
    _, params, payload = split_file(classic)
    build = br.build_file
    cases["classic as version 1"] = (build(1, params, payload, version=1), True)
    cases["version 0"] = (build(1, params, payload, version=0), False)
    cases["version 3"] = (build(1, params, payload, version=3), False)
    cases["unknown variant 11"] = (build(11, params, payload), False)
    cases["unknown variant 0"] = (build(0, params, payload), False)
    cases["P longer than the parameters"] = (build(1, params + bytes(4), payload), False)
    cases["P shorter than the parameters"] = (build(1, params[:2], payload), False)
    cases["num_hashes 0"] = (build(1, struct.pack("<I", 0), payload), False)
    cases["num_hashes 255"] = (build(1, struct.pack("<I", 255), payload), True)
    cases["num_hashes 256"] = (build(1, struct.pack("<I", 256), payload), False)
    cases["classic payload not whole words"] = (build(1, params, payload + b"\0"), False)
    cases["classic empty payload"] = (build(1, params, b""), False)
    cases["one byte too many"] = (classic + b"\0", False)
    cases["one byte too few"] = (classic[:-1], False)
    big_p = bytearray(classic[:32])
    struct.pack_into("<I", big_p, 12, 65_537)
    cases["P 65537"] = (bytes(big_p) + bytes(65_600), False)
    big_l = bytearray(classic)
    struct.pack_into("<Q", big_l, 16, (1 << 62) + 8)
    struct.pack_into("<Q", big_l, 56, br.xxh3_64(bytes(big_l[:56])))
    cases["L above 2^62"] = (bytes(big_l), False)

    _, bparams, bpayload = split_file((cli_dir / "blocked42.bloom").read_bytes())
    nb, _, _, seed = struct.unpack_from("<QIIQ", bparams)
    # The optional sizing (section "2: blocked"): 24 bytes without it, 40 with it.
    cases["blocked without sizing"] = (build(2, bparams[:24], bpayload), True)
    cases["blocked sizing fpp 1.5"] = (
        build(2, bparams[:24] + struct.pack("<Qd", 1000, 1.5), bpayload), False)  # fmt: skip
    # Stored by writers before 2026-11-27 for a filter made for 0 items: read as 1.
    cases["blocked sizing 0 items"] = (
        build(2, bparams[:24] + struct.pack("<Qd", 0, 0.01), bpayload), True)  # fmt: skip
    cases["blocked sizing cut short"] = (build(2, bparams[:32], bpayload), False)
    cases["blocked lanes 4"] = (build(2, struct.pack("<QIIQ", nb, 4, 2, seed), bpayload), False)
    cases["blocked hasher 1"] = (build(2, struct.pack("<QIIQ", nb, 8, 1, seed), bpayload), False)
    cases["blocked hasher 3"] = (build(2, struct.pack("<QIIQ", nb, 8, 3, seed), bpayload), False)
    cases["blocked version 1 hasher 1"] = (
        build(2, struct.pack("<QIIQ", nb, 8, 1, seed), bpayload, version=1), False)  # fmt: skip
    cases["blocked short payload"] = (build(2, bparams, bpayload[:-64]), False)
    cases["blocked 0 blocks"] = (build(2, struct.pack("<QIIQ", 0, 8, 2, seed), b""), False)

    _, xparams, xpayload = split_file((cli_dir / "split-block.bloom").read_bytes())
    (nx, _) = struct.unpack("<QI", xparams)
    cases["split-block hasher 2 without its seed"] = (build(8, struct.pack("<QI", nx, 2), xpayload), False)
    cases["split-block hasher 3"] = (build(8, struct.pack("<QIQ", nx, 3, 0), xpayload), False)
    cases["split-block hasher 2 seed 5"] = (build(8, struct.pack("<QIQ", nx, 2, 5), xpayload), True)
    cases["split-block hasher 1 with a seed"] = (
        build(8, struct.pack("<QIQ", nx, 1, 5), xpayload), False)  # fmt: skip
    cases["split-block 0 blocks"] = (build(8, struct.pack("<QI", 0, 1), b""), False)
    cases["split-block short payload"] = (build(8, xparams, xpayload[:-32]), False)
    cases["split-block one block less"] = (build(8, struct.pack("<QI", nx - 1, 1), xpayload), False)
    cases["split-block version 1"] = (build(8, xparams, xpayload, version=1), False)

    _, cparams, cpayload = split_file((cli_dir / "counting.bloom").read_bytes())
    n, k = struct.unpack("<QI", cparams)
    # One counter fewer: valid when the counter dropped, now the last byte's unused high
    # nibble, was zero (it depends on the file's items; both cases are made below).
    cases["counting odd num_counters"] = (build(3, struct.pack("<QI", n - 1, k), cpayload),
                                          cpayload[-1] >> 4 == 0)  # fmt: skip
    cases["counting one counter too many"] = (build(3, struct.pack("<QI", n + 1, k), cpayload),
                                              False)  # fmt: skip
    # An odd count leaves the last byte's high nibble unused: it must be zero.
    odd = bytearray(cpayload)
    odd[-1] = (odd[-1] & 0x0F) | 0x10
    cases["counting odd high nibble not zero"] = (build(3, struct.pack("<QI", n - 1, k), bytes(odd)),
                                                  False)  # fmt: skip
    even = bytearray(cpayload)
    even[-1] &= 0x0F
    cases["counting odd high nibble zero"] = (build(3, struct.pack("<QI", n - 1, k), bytes(even)),
                                              True)  # fmt: skip

    # RedisBloom chains (section "9: redisbloom"): the chain header opens the payload, the
    # first link's fields at 20 (bytes, bits, size u64; error, bpe f64; hashes u32; ...).
    _, rbparams, rbpayload = split_file((cli_dir / "redisbloom.bloom").read_bytes())

    def chain(growth=None, bpe=None, hashes=None, error=None):
        payload = bytearray(rbpayload)
        if growth is not None:
            struct.pack_into("<I", payload, 16, growth)
        if bpe is not None:
            struct.pack_into("<dI", payload, 20 + 32, bpe, hashes)
        if error is not None:
            struct.pack_into("<d", payload, 20 + 24, error)
        return build(9, rbparams, bytes(payload))

    cases["redisbloom growth 0"] = (chain(growth=0), True)
    cases["redisbloom hashes over its error's"] = (chain(bpe=1000.0, hashes=694), False)
    cases["redisbloom hashes 0"] = (chain(bpe=-0.5, hashes=0), False)
    # The bound divides first: for this error it is ceil(3.0) + 1 = 4; multiplying first
    # gives ceil(3.0000000000000004) + 1 = 5 (bpe 7 makes 5 hashes, bpe 5 makes 4).
    odd = 0.12500000000000006
    cases["redisbloom hashes one over the bound"] = (chain(error=odd, bpe=7.0, hashes=5), False)
    cases["redisbloom hashes at the bound"] = (chain(error=odd, bpe=5.0, hashes=4), True)

    _, rparams, rpayload = split_file((cli_dir / "rotating.bloom").read_bytes())
    head = struct.unpack_from("<IQdQI", rparams)
    for bad in [0.0, 1.0, float("nan")]:
        p = struct.pack("<IQdQI", head[0], head[1], bad, head[3], head[4]) + rparams[32:]
        cases[f"rotating fpp {bad}"] = (build(7, p, rpayload), False)
    p = struct.pack("<IQdQI", 1, head[1], head[2], head[3], head[4]) + rparams[32:]
    cases["rotating max_generations 1"] = (build(7, p, rpayload), False)
    cases["rotating payload too long"] = (build(7, rparams, rpayload + bytes(8)), False)

    _, sparams, spayload = split_file((library_dir / "scalable.bloom").read_bytes())
    fixed = list(struct.unpack_from("<QdIdBI", sparams))
    for field, value in [(0, 0), (1, 1.0), (2, 0), (3, 1.0), (3, 0.0), (5, 65)]:
        f = fixed[:]
        f[field] = value
        name = ["initial_capacity", "fpp", "expansion", "tightening", "", "count"][field]
        cases[f"scalable {name} {value}"] = (build(4, struct.pack("<QdIdBI", *f) + sparams[33:],
                                                   spayload), False)  # fmt: skip
    cases["scalable payload too long"] = (build(4, sparams, spayload + bytes(8)), False)

    _, aparams, apayload = split_file((library_dir / "allowlisted.bloom").read_bytes())
    cases["allowlisted bytes after the list"] = (build(6, aparams, apayload + b"\0"), False)
    k, nw, nl = struct.unpack("<IQQ", aparams)
    cases["allowlisted huge num_listed"] = (build(6, struct.pack("<IQQ", k, nw, 1 << 60),
                                                  apayload), False)  # fmt: skip

    _, tparams, tpayload = split_file((library_dir / "retouched.bloom").read_bytes())
    cases["retouched bytes after the lists"] = (build(5, tparams, tpayload + b"\0"), False)
    return cases


@pytest.fixture(scope="session")
def edge_files(library_dir, cli_dir):
    return _edge_files(library_dir, cli_dir)


EDGE_NAMES = [
    "classic as version 1", "version 0", "version 3", "unknown variant 11", "unknown variant 0",
    "P longer than the parameters", "P shorter than the parameters", "num_hashes 0",
    "num_hashes 255", "num_hashes 256", "classic payload not whole words",
    "classic empty payload", "one byte too many", "one byte too few", "P 65537",
    "L above 2^62", "blocked lanes 4", "blocked hasher 1", "blocked hasher 3",
    "blocked version 1 hasher 1", "blocked short payload", "blocked 0 blocks",
    "split-block hasher 2 without its seed", "split-block hasher 3", "split-block hasher 2 seed 5",
    "split-block hasher 1 with a seed", "split-block 0 blocks", "split-block short payload",
    "split-block one block less", "split-block version 1",
    "counting odd num_counters", "counting one counter too many", "rotating fpp 0.0",
    "rotating fpp 1.0", "rotating fpp nan", "rotating max_generations 1",
    "rotating payload too long", "scalable initial_capacity 0", "scalable fpp 1.0",
    "scalable expansion 0", "scalable tightening 1.0", "scalable tightening 0.0",
    "scalable count 65", "scalable payload too long", "allowlisted bytes after the list",
    "allowlisted huge num_listed", "retouched bytes after the lists",
    "blocked without sizing", "blocked sizing fpp 1.5", "blocked sizing 0 items",
    "blocked sizing cut short", "counting odd high nibble not zero",
    "counting odd high nibble zero", "redisbloom growth 0",
    "redisbloom hashes over its error's", "redisbloom hashes 0",
    "redisbloom hashes one over the bound", "redisbloom hashes at the bound",
]  # fmt: skip


def test_every_edge_case_is_run(edge_files):
    """Each crafted file is in EDGE_NAMES (four once were built and never run)."""
    assert sorted(edge_files) == sorted(EDGE_NAMES)


@pytest.mark.parametrize("name", EDGE_NAMES)
def test_edge_case_agreement(name, edge_files, tmp_path):
    """Crafted files (checksums valid, one thing changed): the reader and the tool
    (``verify`` and ``check``) both accept or both refuse, as the spec says."""
    data, valid = edge_files[name]
    path = tmp_path / "edge.bloom"
    path.write_bytes(data)
    assert reader_accepts(data) == valid
    assert tool_accepts(path) == valid
    assert (bloomery("check", path, "apple").returncode != 2) == valid


# --------------------------------------------------------------------------- discrepancies


def _discrepancy_files(library_dir: Path, cli_dir: Path) -> dict[str, bytes]:
    """Files the spec's text makes invalid (each once accepted by the tool)."""
    cases = {}
    classic = bytearray((cli_dir / "classic.bloom").read_bytes())
    classic[40] = 1  # a padding byte (P = 4: padding is bytes 36 .. 56)
    struct.pack_into("<Q", classic, 56, br.xxh3_64(bytes(classic[:56])))
    cases["non-zero header padding"] = bytes(classic)

    _, bparams, bpayload = split_file((cli_dir / "blocked42.bloom").read_bytes())
    cases["version-1 blocked with hasher 2"] = br.build_file(2, bparams, bpayload, version=1)

    _, aparams, apayload = split_file((library_dir / "allowlisted.bloom").read_bytes())
    k, nw, nl = struct.unpack("<IQQ", aparams)
    pos, listed = 8 * nw, []
    for _ in range(nl):
        (n,) = struct.unpack_from("<I", apayload, pos)
        listed.append(apayload[pos + 4 : pos + 4 + n])
        pos += 4 + n

    def allow(lst):
        body = b"".join(struct.pack("<I", len(x)) + x for x in lst)
        return br.build_file(6, struct.pack("<IQQ", k, nw, len(lst)), apayload[: 8 * nw] + body)

    cases["allowlisted items out of order"] = allow([listed[1], listed[0]] + listed[2:])
    cases["allowlisted item listed twice"] = allow([listed[0]] + listed)

    _, tparams, tpayload = split_file((library_dir / "retouched.bloom").read_bytes())
    k, nw, rs, fn, ni, nf = struct.unpack("<IQQQQQ", tparams)
    pos, lists = 8 * nw, []
    for _ in range(ni + nf):
        bit, c = struct.unpack_from("<QI", tpayload, pos)
        lists.append((bit, tpayload[pos + 12 : pos + 12 + 16 * c]))
        pos += 12 + 16 * c

    def retouch(lst):
        body = b"".join(struct.pack("<QI", b, len(e) // 16) + e for b, e in lst)
        return br.build_file(5, tparams, tpayload[: 8 * nw] + body)

    cases["retouched lists out of order"] = retouch([lists[1], lists[0]] + lists[2:])
    cases["retouched two lists for one bit"] = retouch([lists[0], (lists[0][0], lists[1][1])]
                                                       + lists[2:])  # fmt: skip

    _, sparams, spayload = split_file((library_dir / "scalable.bloom").read_bytes())
    f = list(struct.unpack_from("<QdIdBI", sparams))
    f[4] = 2
    cases["scalable scaling 2"] = br.build_file(4, struct.pack("<QdIdBI", *f) + sparams[33:],
                                                spayload)  # fmt: skip
    return cases


@pytest.fixture(scope="session")
def discrepancy_files(library_dir, cli_dir):
    return _discrepancy_files(library_dir, cli_dir)


SPEC_REFUSALS = {
    "non-zero header padding": "spec: bytes 32+P .. H-8 are zero bytes; the tool accepts "
    "non-zero padding when the header checksum matches (the spec's list of checks does not "
    "mention the padding)",
    "version-1 blocked with hasher 2": "spec (Version 1): blocked files of version 1 are "
    "refused; the tool accepts a version-1 blocked file whose hasher is 2",
    "allowlisted items out of order": "spec: listed items are in increasing byte order; "
    "the tool accepts them out of order",
    "allowlisted item listed twice": "spec: listed items are in increasing byte order; "
    "the tool accepts a duplicate",
    "retouched lists out of order": "spec: lists are in increasing bit-index order; the "
    "tool accepts them out of order",
    "retouched two lists for one bit": "spec: lists are in increasing bit-index order; the "
    "tool accepts two lists with the same bit index",
    "scalable scaling 2": "spec: scaling is a u8, 0 or 1; the tool accepts 2",
}


@pytest.mark.parametrize("name", list(SPEC_REFUSALS))
def test_spec_refusals(name, discrepancy_files, tmp_path):
    """The reader and the tool refuse these files, following the spec."""
    data = discrepancy_files[name]
    path = tmp_path / "d.bloom"
    path.write_bytes(data)
    assert not reader_accepts(data)
    assert not tool_accepts(path), SPEC_REFUSALS[name]


def test_foldhash_refusal_message(edge_files, tmp_path):
    """Spec (Version 1): a foldhash blocked filter is refused with a message to rebuild
    it from its items."""
    for name in ["blocked hasher 1", "blocked version 1 hasher 1"]:
        path = tmp_path / "f.bloom"
        path.write_bytes(edge_files[name][0])
        proc = bloomery("verify", path, check_rc=2)
        assert b"rebuild" in proc.stderr, proc.stderr
        with pytest.raises(ValueError, match="rebuild"):
            br.read(edge_files[name][0])


# --------------------------------------------------------------------------- sealing


@pytest.mark.parametrize("variant", ["classic", "blocked", "split-block"])
def test_unsealed_files(variant, cli_dir, present_file, tmp_path):
    """Section "Sealed and unsealed files": a file the tool made, marked unsealed as a
    writer marks it (bit 15, the stale checksum kept): the reader uses its bits and says
    so; the tool's ``verify`` exits 3 saying "unsealed", ``check`` answers with a note,
    ``seal`` gives back the sealed file byte for byte, and ``add`` seals it too."""
    data = (cli_dir / f"{variant}.bloom").read_bytes()
    unsealed = br.seal(data, unsealed=True)
    assert unsealed[8:10] == b"\x02\x80"
    assert br.seal(unsealed) == data
    filt = br.read(unsealed)
    assert filt.unsealed and not br.read(data).unsealed
    items = read_lines(present_file)[:2000]
    assert all(filt.contains(item) for item in items)
    path = tmp_path / f"{variant}.bloom"
    path.write_bytes(unsealed)
    proc = bloomery("verify", path)
    assert proc.returncode == 3 and proc.stdout.startswith(b"unsealed"), proc
    proc = bloomery("check", "-q", "-i", present_file, path)
    assert proc.returncode == 0 and b"unsealed" in proc.stderr, proc
    assert b"payload checksum: unsealed" in bloomery("info", path).stdout
    bloomery("seal", path, check_rc=0)
    assert path.read_bytes() == data
    path.write_bytes(unsealed)
    bloomery("add", path, "one more", check_rc=0)
    sealed = path.read_bytes()
    assert sealed[8:10] == b"\x02\x00" and br.read(sealed).contains(b"one more")
    bloomery("verify", path, check_rc=0)


def test_unsealed_mark_is_refused_where_files_are_written_whole(library_dir):
    """The mark on a variant that is never updated in place, or with version 1, is refused
    by the reader."""
    data = (library_dir / "counting.bloom").read_bytes()
    with pytest.raises(ValueError, match="only classic, blocked and split-block"):
        br.read(br.seal(data, unsealed=True))
    version_1 = bytearray(br.seal((library_dir / "classic.bloom").read_bytes(), unsealed=True))
    struct.pack_into("<H", version_1, 8, 0x8001)
    hdr = br.header_length(struct.unpack_from("<I", version_1, 12)[0])
    struct.pack_into("<Q", version_1, hdr - 8, br.xxh3_64(bytes(version_1[: hdr - 8])))
    with pytest.raises(ValueError, match="unsupported format version"):
        br.read(bytes(version_1))


# --------------------------------------------------------------------------- writer rules


def _items_with_repeats(prefix: str, count: int, seed: str) -> list[bytes]:
    """``count`` items of which about a third repeat an earlier one."""
    rng = random.Random(seed)
    items: list[bytes] = []
    for i in range(count):
        if items and rng.random() < 0.35:
            items.append(rng.choice(items))
        else:
            items.append(f"{prefix}-{i}".encode())
    return items


def _tool_adds(path: Path, items: list[bytes], tmp_path: Path) -> bytes:
    """``bloomery add FILE -i LIST`` with ``items`` in order; the file's bytes after."""
    listed = tmp_path / "adds.txt"
    listed.write_bytes(b"".join(item + b"\n" for item in items))
    bloomery("add", path, "-i", listed, check_rc=0)
    return path.read_bytes()


class _SkippingRotatingWriter(br.RotatingWriter):
    """The rule the page once left open for rotating filters: skip a present item (as
    the scalable variants do). It is wrong; the test below shows it differs."""

    def add(self, item: bytes, now: int) -> None:
        if not self.contains(item):
            super().add(item, now)


def _rotating_replay(writer_class, empty: bytes, items: list[bytes], made: bytes) -> bytes:
    """The page's writer (or another) replaying ``items`` on the tool's empty file; its
    bytes with each generation's start time taken from the tool's file (the tool's clock;
    these filters have no window, so the times decide nothing)."""
    writer = writer_class(br.read(empty))
    for item in items:
        writer.add(item, 0)
    tool = br.read(made)
    if len(writer.gens) == len(tool.generations):
        for gen, theirs in zip(writer.gens, tool.generations):
            gen[1] = theirs.started_ms
    return writer.to_bytes()


def test_rotating_writer_rule(tmp_path):
    """Section "7: rotating": the page's three steps, replayed on the items the tool
    added, make the tool's file byte for byte: an item goes into the newest generation
    even when an older one holds it, and counts only when it changed a bit. The rule of
    the scalable variants (skip a present item) makes another file, and forgets ``x``
    where the tool keeps it (the page's example)."""
    path = tmp_path / "rotating.bloom"
    bloomery("create", "-n", "5", "--variant", "rotating", "--generations", "2", path,
             check_rc=0)  # fmt: skip
    empty = path.read_bytes()
    items = [b"x", b"a1", b"a2", b"a3", b"a4", b"x", *(f"b{i}".encode() for i in range(1, 7))]
    made = _tool_adds(path, items, tmp_path)
    assert bloomery("check", path, "x").returncode == 0
    assert _rotating_replay(br.RotatingWriter, empty, items, made) == made
    assert br.read(made).contains(b"x")
    skipped = _rotating_replay(_SkippingRotatingWriter, empty, items, made)
    assert skipped != made and not br.read(skipped).contains(b"x")

    # Longer runs, with repeats, over several generations (and rotations out).
    for generations, per_generation in [(2, 5), (3, 40), (4, 300)]:
        path = tmp_path / f"rotating-{generations}.bloom"
        bloomery("create", "-n", per_generation, "--variant", "rotating",
                 "--generations", generations, path, check_rc=0)  # fmt: skip
        empty = path.read_bytes()
        items = _items_with_repeats("r", 10 * per_generation, f"rotating-{generations}")
        made = _tool_adds(path, items, tmp_path)
        assert len(br.read(made).generations) == generations
        assert _rotating_replay(br.RotatingWriter, empty, items, made) == made
        assert _rotating_replay(_SkippingRotatingWriter, empty, items, made) != made


def test_rotating_writer_time_steps():
    """Section "7: rotating", steps 1 and 2 with a window: an earlier time counts as the
    newest generation's start; a generation a window old rotates before the item goes in.
    (The tool's own adds take its clock, so this checks the writer against the library's
    rules through a file the reader then reads back.)"""
    params = struct.pack("<IQdQI", 3, 100, 0.01, 1_000, 1)
    k, words = br.rate_sizing(100, 0.01)
    params += struct.pack("<QQIQ", 0, 5_000, k, words)
    writer = br.RotatingWriter(br.read(br.build_file(br.ROTATING, params, bytes(8 * words))))
    writer.add(b"early", 10)  # before the start: counts as 5,000
    writer.add(b"late", 5_999)
    assert [(g[0], g[1]) for g in writer.gens] == [(2, 5_000)]
    writer.add(b"next", 6_000)  # a window after the start: a new generation first
    assert [(g[0], g[1]) for g in writer.gens] == [(2, 5_000), (1, 6_000)]
    writer.add(b"early", 6_500)  # held by the older generation, added to the newest too
    assert [g[0] for g in writer.gens] == [2, 2]
    filt = br.read(writer.to_bytes())
    assert all(filt.contains(i) for i in [b"early", b"late", b"next"])


def test_rotating_generation_that_cannot_be_sized(tmp_path):
    """Section "7: rotating", step 2: a version-2 file whose ``items_per_generation`` and
    ``fpp`` make no shape is valid (read, answered, added to while its newest generation
    has room); the item that needs a new generation is refused, the file unchanged."""
    made = tmp_path / "rot.bloom"
    bloomery("create", "-n", "3", "--variant", "rotating", made, check_rc=0)
    bloomery("add", made, "a", "b", check_rc=0)
    _, params, payload = split_file(made.read_bytes())
    for per_generation, fpp in [(3, 1e-100), (10**15, 0.01)]:
        crafted = bytearray(params)
        struct.pack_into("<Qd", crafted, 4, per_generation, fpp)
        data = br.build_file(br.ROTATING, bytes(crafted), payload)
        with pytest.raises(ValueError):
            br.rate_sizing(per_generation, fpp)
        path = tmp_path / "crafted.bloom"
        path.write_bytes(data)
        assert reader_accepts(data) and tool_accepts(path)
        bloomery("check", path, "a", "b", check_rc=0)
        if per_generation == 3:
            bloomery("add", path, "c", check_rc=0)  # the third item: room left
            assert br.read(path.read_bytes()).contains(b"c")
            before = path.read_bytes()
            refused = bloomery("add", path, "d")
            assert refused.returncode not in (0, 1), refused
            assert b"no new generation" in refused.stderr, refused.stderr
            assert path.read_bytes() == before


@pytest.mark.parametrize("variant", ["scalable", "scalable-blocked"])
def test_scalable_writer_rule(variant, tmp_path):
    """Sections "4: scalable" and "10: scalable-blocked": the page's writer rule (skip a
    present item; grow by the "Sizing" of capacity and rate i) replayed on the items the
    tool added makes the tool's file byte for byte, new sub-filters included. A writer
    that does not skip present items makes another file."""
    path = tmp_path / f"{variant}.bloom"
    bloomery("create", "-n", "20", "--fpp", "0.01", "--variant", variant, path, check_rc=0)
    empty = path.read_bytes()
    items = _items_with_repeats("s", 1_500, variant)
    made = _tool_adds(path, items, tmp_path)
    writer_class = br.ScalableWriter if variant == "scalable" else br.ScalableBlockedWriter
    writer = writer_class(br.read(empty))
    for item in items:
        writer.add(item)
    assert writer.to_bytes() == made
    grown = br.read(made)
    assert len(grown.subs if variant == "scalable" else grown.links) >= 5

    class NeverSkips(writer_class):
        def skips(self, item):
            return False

    if variant == "scalable":
        never = NeverSkips(br.read(empty))
        for item in items:
            never.add(item)
        assert never.to_bytes() != made


@pytest.mark.parametrize(
    "n,p", [(1, 0.5), (1_000, 0.01), (25_000, 0.001), (100_000, 0.05), (3_000, 1e-6)]
)
def test_blocked_sizing(n, p, tmp_path):
    """Section "Sizing": the blocked sizing, computed from the page's text, gives the block
    count of the tool's blocked filter for (n, p)."""
    path = tmp_path / "blocked.bloom"
    bloomery("create", "-n", n, "--fpp", p, "--variant", "blocked", path, check_rc=0)
    assert br.read(path.read_bytes()).num_blocks == br.blocked_sizing(n, p)


@pytest.mark.parametrize(
    "variant", ["counting", "retouched", "allowlisted", "rotating", "scalable"]
)
def test_rate_sizing(variant, tmp_path):
    """Section "Sizing": the tool's new counting, retouched, allow-listed, rotating and
    scalable filters have the rate sizing's shape, where it differs from the classic
    sizing (few items at a low rate, and where the classic sizing's rounded hash count
    answers above p: far above from about 0.35 on) and where it does not."""
    for n, p in [(10, 1e-3), (1_000, 1e-6), (5_000, 0.01), (10_000, 0.9), (3_000, 0.4), (700, 0.001)]:
        path = tmp_path / "f.bloom"
        bloomery("create", "--force", "-n", n, "--fpp", p, "--variant", variant, path,
                 check_rc=0)  # fmt: skip
        filt = br.read(path.read_bytes())
        if variant == "counting":
            shape = (filt.num_hashes, filt.num_counters // 64)
            want = br.rate_sizing(n, p)
        elif variant == "rotating":
            g = filt.generations[0]
            shape, want = (g.num_hashes, g.num_words), br.rate_sizing(n, p)
        elif variant == "scalable":
            s = filt.subs[0]
            shape = (s.num_hashes, s.num_words)
            want = br.rate_sizing(n, br._sub_filter_rate(p, filt.tightening, filt.scaling, 0))
        else:
            shape, want = (filt.num_hashes, filt.num_words), br.rate_sizing(n, p)
        assert shape == want, (n, p)
    assert br.rate_sizing(10, 1e-3) != br.classic_sizing(10, 1e-3)
    assert br.rate_sizing(10_000, 0.9) == (1, 68) and br.classic_sizing(10_000, 0.9) == (1, 35)
