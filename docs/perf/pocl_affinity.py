"""PoCL's worker threads pinned or not (``POCL_AFFINITY``, which ``import clconv`` sets where it is
safe: clconv.device.pin_pocl_workers): single calls, each waited for, as a user who calls once and
reads the result sees them.  For each layer-pass and each setting, a fresh process makes 60 calls
through the public API with default arguments and a short pause between them, and reports the
median wall time per call of calls 2-20 and of calls 41-60; three processes a setting,
alternating, and the median of their figures (unpinned, Linux tended to wake both
workers on the CPU that enqueued, so early calls ran on one CPU; after a burst of calls the
scheduler had spread them).

    POCL_MAX_PTHREAD_COUNT=2 python docs/perf/pocl_affinity.py      (on a PoCL CPU device)
"""
import os
import statistics
import subprocess
import sys

LAYERS = [  # (descriptor, op): a 1x1 data gradient, a 3x3 forward, the stem's weight gradient
    ("mb4ic256ih28oc64oh28kh1ph0", "conv2d_input"),
    ("mb4ic64ih28oc64oh28kh3ph1", "conv2d"),
    ("mb2ic3ih112oc64oh56kh7sh2ph3", "conv2d_weight"),
]

ROUNDS = 3

CHILD = r"""
import statistics, sys, time
import numpy as np, pyopencl.array as cla
import clconv
from clconv.tools.shapes import parse_descriptor
descriptor, op = sys.argv[1], sys.argv[2]
g = parse_descriptor(descriptor).geometry
q = clconv.default_queue()
rng = np.random.default_rng(0)
x_shape = (g.batch, g.in_channels) + g.in_size[1:]
w_shape = (g.out_channels, g.in_channels) + g.kernel[1:]
y_shape = (g.batch, g.out_channels) + g.out_size[1:]
arr = lambda shape: cla.to_device(q, rng.standard_normal(shape).astype(np.float32))
x, w, dy = arr(x_shape), arr(w_shape), arr(y_shape)
stride, padding = g.stride[1:], g.pad_begin[1:]
call = {"conv2d": lambda: clconv.conv2d(x, w, stride=stride, padding=padding),
        "conv2d_input": lambda: clconv.conv2d_input(x_shape, w, dy, stride=stride, padding=padding),
        "conv2d_weight": lambda: clconv.conv2d_weight(x, w_shape, dy, stride=stride, padding=padding)}[op]
times = []
for _ in range(60):
    start = time.perf_counter()
    call()
    q.finish()
    times.append(time.perf_counter() - start)
    time.sleep(0.0005)
print(f"{statistics.median(times[1:20]) * 1e3:.3f} {statistics.median(times[40:]) * 1e3:.3f}")
"""


def main():
    print(f"{'layer':32s} {'op':14s} {'POCL_AFFINITY':>13s} {'calls 2-20':>11s} {'calls 41-60':>11s}  (ms a call)")
    for descriptor, op in LAYERS:
        figures: dict[str, list[list[float]]] = {"0": [], "1": []}
        for _ in range(ROUNDS):
            for pinned in figures:
                env = dict(os.environ, POCL_AFFINITY=pinned)
                out = subprocess.run([sys.executable, "-c", CHILD, descriptor, op], env=env, capture_output=True,
                                     text=True, check=True).stdout.split()
                figures[pinned].append([float(v) for v in out])
        for pinned, runs in figures.items():
            early, late = (statistics.median(run[i] for run in runs) for i in (0, 1))
            print(f"{descriptor:32s} {op:14s} {pinned:>13s} {early:11.3f} {late:11.3f}")


if __name__ == "__main__":
    main()
