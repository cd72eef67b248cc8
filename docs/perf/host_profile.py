"""Host time per call of a stream of default calls (no profiler), then a cProfile of the same, for
``auto`` (Winograd on this layer, 3 launches) and ``implicit_gemm`` (1 launch): VGG-11's conv4_1
at batch 8.  `python docs/perf/host_profile.py` on the GPU machine."""
import cProfile
import pstats
import time

import numpy as np
import pyopencl.array as cla

import clconv


def main():
    q = clconv.default_queue()
    rng = np.random.default_rng(0)
    x = cla.to_device(q, rng.standard_normal((8, 192, 13, 13), dtype=np.float32))
    w = cla.to_device(q, rng.standard_normal((128, 192, 3, 3), dtype=np.float32))
    calls = 200
    for algorithm in ("auto", "implicit_gemm"):
        for _ in range(5):
            clconv.conv2d(x, w, padding=1, algorithm=algorithm)
        q.finish()
        start = time.perf_counter()
        for _ in range(calls):
            clconv.conv2d(x, w, padding=1, algorithm=algorithm)
        enqueued = time.perf_counter() - start
        q.finish()
        synced = time.perf_counter() - start
        print(f"{algorithm}: enqueue {1e6 * enqueued / calls:.1f} us/call, with the sync {1e6 * synced / calls:.1f}")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(calls):
            clconv.conv2d(x, w, padding=1, algorithm=algorithm)
        profile.disable()
        q.finish()
        pstats.Stats(profile).sort_stats("tottime").print_stats(8)


if __name__ == "__main__":
    main()
