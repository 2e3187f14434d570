"""Guava's bytes (crates/bloomery/tests/data/guava, a copy of shared/vectors/guava, made by
the real Guava 31.1): read back with every probe answered as Guava answered it, and the
same filter made in Python, item by item, gives Guava's bytes exactly."""

import csv
import pathlib
import struct

import pytest

from bloomery import BloomFilter

GUAVA = pathlib.Path(__file__).resolve().parents[3] / "crates" / "bloomery" / "tests" / "data" / "guava"


def rows():
    with open(GUAVA / "filters.tsv", newline="") as table:
        return list(csv.DictReader(table, delimiter="\t", quoting=csv.QUOTE_NONE))


def item(funnel, text):
    """The Python item whose bytes are what the Guava funnel hashes."""
    if funnel in ("utf8", "ascii"):
        return text
    if funnel == "unencoded_chars":
        return text.encode("utf-16-le", "surrogatepass")
    if funnel == "long":
        return int(text)
    if funnel == "int":
        return struct.pack("<i", int(text))
    if funnel == "bytes":
        return bytes.fromhex(text)
    raise AssertionError(funnel)


def inserted(row):
    text = (GUAVA / "filters" / f"{row['name']}.inserted.txt").read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    assert len(lines) == int(row["inserted"]), row["name"]
    return [item(row["funnel"], line) for line in lines]


def probes(row):
    with open(GUAVA / "filters" / f"{row['name']}.probes.tsv", newline="", encoding="utf-8") as table:
        return [(r["might_contain"] == "1", item(row["funnel"], r["item"]))
                for r in csv.DictReader(table, delimiter="\t", quoting=csv.QUOTE_NONE)]


ROWS = rows()


def test_the_vectors_are_there():
    assert len(ROWS) >= 25


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_guava_bytes_read_back_answer_as_guava(row):
    data = (GUAVA / "filters" / f"{row['name']}.bin").read_bytes()
    f = BloomFilter.from_guava_bytes(data)
    assert f.kind == "classic"
    answers = probes(row)
    assert answers
    assert [item in f for _, item in answers] == [expected for expected, _ in answers]
    assert f.contains_many([item for _, item in answers]) == [expected for expected, _ in answers]
    assert f.approx_items == int(row["approximate_element_count"])
    assert f.expected_fpp == pytest.approx(float(row["expected_fpp"]), rel=1e-12)
    assert f.to_guava_bytes() == data
    # Through the library's own format and back: the same filter.
    assert BloomFilter.from_bytes(f.to_bytes()).to_guava_bytes() == data


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_the_same_filter_made_in_python_is_guavas_bytes(row):
    f = BloomFilter(int(row["expected_insertions"]), float(row["fpp"]), kind="classic")
    items = inserted(row)
    if len(items) % 2:
        for one in items:
            f.add(one)
    else:
        f.add_many(items)
    assert f.to_guava_bytes() == (GUAVA / "filters" / f"{row['name']}.bin").read_bytes()


def test_union_matches_guavas_put_all():
    by_name = {row["name"]: row for row in ROWS}
    a = BloomFilter.from_guava_bytes((GUAVA / "filters" / "union_a.bin").read_bytes())
    b = BloomFilter.from_guava_bytes((GUAVA / "filters" / "union_b.bin").read_bytes())
    assert (a | b).to_guava_bytes() == (GUAVA / "filters" / "union_a_or_b.bin").read_bytes()
    assert by_name["union_a_or_b"]


def test_guava_bytes_through_the_cli(cli, tmp_path):
    """`bloomery import` of Guava's bytes, opened here; Python's bytes exported by the CLI."""
    row = next(row for row in ROWS if row["name"] == "long_n1000_p0.01")
    guava = GUAVA / "filters" / "long_n1000_p0.01.bin"
    cli("import", guava, tmp_path / "imported.bloom")
    with BloomFilter.open(tmp_path / "imported.bloom") as f:
        assert all(f.contains_many(inserted(row)))
    made = BloomFilter(1000, 0.01, kind="classic")
    made.add_many(inserted(row))
    made.save(tmp_path / "made.bloom")
    cli("export", tmp_path / "made.bloom", tmp_path / "made.guava")
    assert (tmp_path / "made.guava").read_bytes() == guava.read_bytes()
