"""Shared fixtures: the device queue, seeded RNG, and the suite-wide defaults.

The suite is organised by what a test checks: ``unit/`` (nothing built or run), ``algorithms/`` (every
op and algorithm against the float64 reference), ``reliability/`` (guards, exact arithmetic, fuzzing,
Oclgrind, robustness, caches, the host path, gradient checks) and ``tools/``.  What they share sits
here: ``cases.py`` (the one ``Case`` type and the shared case tables), ``helpers.py`` (random data,
poisoned and guarded tensors, the comparison with the reference) and the independent references
``naive_reference.py`` and ``transposed_reference.py``; this directory is put on ``sys.path`` for them.

The suite runs with ``CLCONV_TUNE=0`` (heuristic choice, no measuring of every candidate: PoCL
builds are slow) unless a test turns tuning on itself, with ``CLCONV_INTERIM=0`` (each call runs
the kernels chosen for it, on a GPU too) unless a test turns interim kernels on, and with a
private cache directory (scripts/test sets ``CLCONV_CACHE_DIR``; set here too for a bare ``pytest`` run).
"""

from __future__ import annotations

import os
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("CLCONV_TUNE", "0")
# every call runs its chosen kernels (tests/algorithms/test_interim.py turns interim kernels on itself)
os.environ.setdefault("CLCONV_INTERIM", "0")
os.environ.setdefault("CLCONV_CACHE_DIR", tempfile.mkdtemp(prefix="clconv-test-cache-"))


@pytest.fixture(scope="session")
def queue():
    import clconv

    return clconv.default_queue()


@pytest.fixture
def rng(request):
    """A generator seeded from the test's id: fresh data per test, reproducible per test."""
    # zlib.crc32, not hash(): str hashes change with every process (PYTHONHASHSEED)
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)
