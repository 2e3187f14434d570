"""Shared fixtures: the repository's paths and the CLI built from it."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def cli():
    """Runs the bloomery CLI (target/release/bloomery, built by scripts/test.sh; or
    $BLOOMERY_CLI); returns the CompletedProcess."""
    binary = pathlib.Path(os.environ.get("BLOOMERY_CLI", ROOT / "target" / "release" / "bloomery"))
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: cargo build --release -p bloomery-cli (scripts/test.sh does)")

    def run(*args, check=True, input=None, timeout=60):
        result = subprocess.run(
            [str(binary), *map(str, args)], capture_output=True, input=input, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(f"bloomery {args}: exit {result.returncode}: {result.stderr.decode()}")
        return result

    run.binary = binary
    return run
