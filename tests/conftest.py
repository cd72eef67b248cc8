"""Shared fixtures: the device queue, seeded RNG, and the suite-wide defaults.

The suite runs with ``CLCONV_TUNE=0`` (heuristic choice, no measuring of every candidate: PoCL
builds are slow) unless a test turns tuning on itself, and with a private cache directory
(scripts/test sets ``CLCONV_CACHE_DIR``; set here too for a bare ``pytest`` run).
"""

from __future__ import annotations

import os
import tempfile
import zlib

import numpy as np
import pytest

os.environ.setdefault("CLCONV_TUNE", "0")
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
