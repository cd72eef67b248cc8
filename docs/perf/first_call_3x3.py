"""First calls of a 32x128x28x28 3x3 layer's three passes, in ms, in this process (run it in a new
process with an empty CLCONV_CACHE_DIR for the cold figure, then again for the warm-disk one):

    python docs/perf/first_call_3x3.py cold; python docs/perf/first_call_3x3.py warm"""
import sys
import time

import numpy as np
import pyopencl.array as cla

import clconv

q = clconv.default_queue()
rng = np.random.default_rng(0)
x = cla.to_device(q, rng.standard_normal((32, 128, 28, 28), dtype=np.float32))
w = cla.to_device(q, rng.standard_normal((128, 128, 3, 3), dtype=np.float32))
dy = cla.to_device(q, rng.standard_normal((32, 128, 28, 28), dtype=np.float32))
q.finish()
calls = {
    "forward": lambda: clconv.conv2d(x, w, padding=1),
    "backward_data": lambda: clconv.conv2d_input(x.shape, w, dy, padding=1),
    "backward_weight": lambda: clconv.conv2d_weight(x, w.shape, dy, padding=1),
}
out = {}
for name, f in calls.items():
    start = time.perf_counter()
    f()
    q.finish()
    out[name] = round(1e3 * (time.perf_counter() - start), 1)
print(sys.argv[1] if len(sys.argv) > 1 else "", "first call ms:", out)
