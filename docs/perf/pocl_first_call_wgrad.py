"""The first call of a new conv2d weight-gradient geometry through the public op, in a new process
with empty caches (CLCONV_CACHE_DIR and POCL_CACHE_DIR fresh: every program built, PoCL's work-group
functions compiled), then a second call.  Arguments: N,C,H,O,K,P and a label.

    d=$(mktemp -d); cd /tmp && CLCONV_CACHE_DIR=$d/c POCL_CACHE_DIR=$d/p PYTHONPATH=REPO \
        POCL_MAX_PTHREAD_COUNT=2 python REPO/docs/perf/pocl_first_call_wgrad.py 2,48,17,64,5,2 LABEL
"""
import sys
import time

import numpy as np

import clconv

n, c, h, o, k, p = (int(v) for v in sys.argv[1].split(","))
x = np.random.default_rng(0).standard_normal((n, c, h, h)).astype(np.float32)
dy = np.random.default_rng(1).standard_normal((n, o, h + 2 * p - k + 1, h + 2 * p - k + 1)).astype(np.float32)
t = time.perf_counter()
clconv.conv2d_weight(x, (o, c, k, k), dy, padding=p)
first = time.perf_counter() - t
t = time.perf_counter()
clconv.conv2d_weight(x, (o, c, k, k), dy, padding=p)
print(sys.argv[2], sys.argv[1], f"first call {first:.2f} s, second {(time.perf_counter() - t) * 1e3:.2f} ms")
