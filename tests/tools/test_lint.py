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

ROOT = Path(__file__).resolve().parents[2]


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


def test_every_public_function_is_fully_annotated():
    """mypy checks what is annotated; this makes sure the public API is (py.typed promises it)."""
    import inspect

    import clconv

    functions = {name: getattr(clconv, name) for name in clconv.__all__ if inspect.isfunction(getattr(clconv, name))}
    assert "conv2d" in functions and "convolution_backward" in functions
    incomplete = {}
    for name, function in functions.items():
        signature = inspect.signature(function)
        missing = [p for p, v in signature.parameters.items() if v.annotation is inspect.Parameter.empty]
        if signature.return_annotation is inspect.Signature.empty:
            missing.append("return")
        if missing:
            incomplete[name] = missing
    assert not incomplete, f"public functions with unannotated parameters: {incomplete}"
    assert (ROOT / "clconv" / "py.typed").exists()
