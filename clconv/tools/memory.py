"""Resident memory over a long run of new geometries through the public ops, then after
``clconv.clear_caches()``: what the bounded caches keep (docs/portability.md).

    python -m clconv.tools.memory [GEOMETRIES]     (default 200: 600 problems, past every bound)

Each geometry is a small conv2d (channels, outputs and size cycling), run forward and through both
gradients; every fifth of the way it prints the resident set size and the in-memory caches' sizes.
Linux only (it reads /proc/self/statm; glibc's malloc_trim shows what was freed).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import time
from typing import Sequence

import numpy as np

import clconv
from clconv import caches


def resident_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    count = int(argv[0]) if argv else 200
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    print(f"{clconv.default_queue().device.name.strip()}: {resident_mb():.0f} MB resident at the start")
    for i in range(count):
        channels, outputs, size = 3 + i % 7, 2 + i % 5, 5 + i % 11
        x = rng.standard_normal((1, channels, size, size + 1)).astype(np.float32)
        w = rng.standard_normal((outputs, channels, 3, 3)).astype(np.float32)
        dy = rng.standard_normal((1, outputs, size, size + 1)).astype(np.float32)
        clconv.conv2d(x, w, padding=1)
        clconv.conv2d_input(x.shape, w, dy, padding=1)
        clconv.conv2d_weight(x, w.shape, dy, padding=1)
        if (i + 1) % max(1, count // 5) == 0:
            held = caches.sizes()
            print(f"{i + 1} geometries ({3 * (i + 1)} problems): {resident_mb():.0f} MB; programs "
                  f"{held.get('programs', 0)}, runners {held.get('runners', 0)}; {time.perf_counter() - start:.0f} s")
    clconv.clear_caches()
    clconv.empty_cache()
    clconv.release_workspaces()
    gc.collect()
    print(f"after clear_caches: {resident_mb():.0f} MB")
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        print(f"after malloc_trim: {resident_mb():.0f} MB (what the allocator had kept of the freed memory)")
    except (OSError, AttributeError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
