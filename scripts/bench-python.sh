#!/usr/bin/env bash
# The Python package against rbloom and pybloom-live (PyPI), in one run: N str items and N
# ints (default 10^7 each), add and lookup one at a time and in batches, plus memory
# (crates/bloomery-py/bench/bench_python.py; figures in docs/benchmarks.md).
#   scripts/bench-python.sh [-n N] [--libraries bloomery,rbloom] [--json FILE]
# Makes target/bench-venv with the release build of the package (pip install of the crate)
# and the competitors. Run it on an idle machine: at N = 10^7 pybloom-live alone takes
# minutes; -n 100000 checks that everything works in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/bench-venv
[ -x $venv/bin/python ] || python3 -m venv $venv
if ! $venv/bin/python -c "import rbloom, pybloom_live, numpy" 2>/dev/null; then
  $venv/bin/pip install -q --disable-pip-version-check "rbloom>=1.5,<2" "pybloom-live>=4,<5" "numpy>=2,<3"
fi
# Rebuilt every run (quick when nothing changed), so that the figures are this tree's.
$venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps ./crates/bloomery-py
$venv/bin/python -c "import platform, importlib.metadata as m; print(' | '.join(f'{p} {m.version(p)}' for p in ('bloomery', 'rbloom', 'pybloom-live', 'numpy')), '| Python', platform.python_version())"
exec $venv/bin/python crates/bloomery-py/bench/bench_python.py "$@"
