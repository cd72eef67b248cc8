"""A new channels-last geometry's first call through the public op on a CPU (issue 12, forty-first
session): a 3x3 64 -> 64 forward at 28x28, batch 4, in a new process; run it with empty caches
(CLCONV_CACHE_DIR and POCL_CACHE_DIR pointing at new folders) to time the builds as a new user meets
them, then the second call.

    cd /tmp && POCL_CACHE_DIR=$(mktemp -d) CLCONV_CACHE_DIR=$(mktemp -d) PYTHONPATH=REPO \\
        POCL_MAX_PTHREAD_COUNT=2 python REPO/docs/perf/pocl_first_call_channels_last.py
"""
import time

start = time.perf_counter()
import numpy as np  # noqa: E402
import pyopencl.array as cla  # noqa: E402

import clconv  # noqa: E402

queue = clconv.default_queue()
rng = np.random.default_rng(0)
x = cla.to_device(queue, rng.standard_normal((4, 28, 28, 64)).astype(np.float32))
w = cla.to_device(queue, rng.standard_normal((64, 64, 3, 3)).astype(np.float32))
ready = time.perf_counter()
clconv.conv2d(x, w, padding=1, layout="channels_last")
queue.finish()
first = time.perf_counter()
clconv.conv2d(x, w, padding=1, layout="channels_last")
queue.finish()
second = time.perf_counter()
print(f"import and data {ready - start:.2f} s, first call {first - ready:.2f} s, second {1e3 * (second - first):.1f} ms")
