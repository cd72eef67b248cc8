"""ruff and mypy are clean (configured in pyproject.toml); both are in the ``test`` extra.

Their caches go to the system temp directory, not the work tree.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_ruff_is_clean():
    done = _run("ruff", "check", "--no-cache", "clconv", "tests", "examples")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean():
    cache = Path(tempfile.gettempdir()) / "clconv-mypy-cache"
    done = _run("mypy", "--cache-dir", str(cache))
    assert done.returncode == 0, done.stdout + done.stderr
