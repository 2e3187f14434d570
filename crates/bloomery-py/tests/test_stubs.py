"""The type stubs (python/bloomery/__init__.pyi) describe the built module: mypy's stubtest
compares every name, signature and class flag, and mypy reads code that uses them."""

import subprocess
import sys
import textwrap


def test_stubtest_finds_the_stubs_and_the_module_agree():
    result = subprocess.run([sys.executable, "-m", "mypy.stubtest", "bloomery"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_checks_code_against_the_stubs(tmp_path):
    program = tmp_path / "use.py"
    program.write_text(textwrap.dedent("""
        from bloomery import BloomFilter, ConcurrentBloomFilter
        f = BloomFilter(100, 0.01, kind="classic")
        changed: bool = f.add("x")
        answers: list[bool] = ConcurrentBloomFilter.from_filter(f | f).contains_many([1, "a", b"b"])
        f.add(1.5)
    """))
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(program)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 1
    assert 'use.py:6: error: Argument 1 to "add" of "BloomFilter" has incompatible type "float"' in result.stdout
    assert "Found 1 error in 1 file" in result.stdout
