"""Where a stream of small calls spends its time (issue 12's host-bound streams): per call, in a
stream of 200 on an in-order queue without profiling,

* ``op``: the public op with default arguments (what ``clconv bench``'s stream column times);
* ``runner``: the planned runner's launches alone (no op-layer checks, no result allocation);
* ``raw``: the same kernels with their arguments set once, each call only enqueues them;
* ``device``: on a profiling queue, the span from the stream's first kernel start to its last
  kernel end over the calls: the GPU's own time per call, gaps between kernels included;
* ``events``: the kernel-event time of one call (what ``bench``'s kernel column reports);
* then the op's stream with each algorithm named (``implicit_gemm`` launches once, Winograd three times).

Each as "host enqueue time / time with the final sync".  ``python docs/perf/stream_split.py``.
"""
import time

import numpy as np
import pyopencl.array as cla

import clconv
from clconv import planner, runtime
from clconv.plan import Problem
from clconv.resolve import resolve_conv

CALLS = 200
LAYERS = {  # x shape, w shape, padding
    "3x3 1x512x7x7->512": ((1, 512, 7, 7), (512, 512, 3, 3), 1),
    "3x3 8x192x13x13->128": ((8, 192, 13, 13), (128, 192, 3, 3), 1),
    "3x3 8x64x50x50->64": ((8, 64, 50, 50), (64, 64, 3, 3), 1),
    "1x1 8x512x28x28->128": ((8, 512, 28, 28), (128, 512, 1, 1), 0),
}


ALGORITHMS = ("implicit_gemm", "im2col", "winograd", "gemm1x1")


def stream(fn, queue, calls=CALLS, rounds=3):
    fn()
    queue.finish()
    best = (float("inf"), float("inf"))
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        enqueued = time.perf_counter() - start
        queue.finish()
        total = time.perf_counter() - start
        best = min(best, (total, enqueued))
    return f"{1e6 * best[1] / calls:6.1f} / {1e6 * best[0] / calls:6.1f}"


def measure(label, xs, ws, pad, q, prof, rng):
    x = cla.to_device(q, rng.standard_normal(xs, dtype=np.float32))
    w = cla.to_device(q, rng.standard_normal(ws, dtype=np.float32))
    problem = Problem(resolve_conv(2, xs, ws, None, 1, pad, 1, 1).geometry, "forward", "float32")
    runner = planner.plan(problem, q)
    y = clconv.conv2d(x, w, padding=pad)
    operands = {"x": runtime.Operand(x.base_data, 0), "w": runtime.Operand(w.base_data, 0),
                "y": runtime.Operand(y.base_data, 0)}
    spaces = runner._allocate(q, runtime.Workspaces.of(q).buffers)
    prepared = [(launch.kernel, launch.global_size, launch.local_size, launch.resolve_args(operands, spaces))
                for launch in runner.launches]

    def raw():
        for kernel, gs, ls, args in prepared:
            kernel(q, gs, ls, *args)

    figures = {
        "op": stream(lambda: clconv.conv2d(x, w, padding=pad), q),
        "runner": stream(lambda: runner.run(q, operands), q),
        "raw": stream(raw, q),
    }
    events = []
    runner.run(prof, operands)
    prof.finish()
    for _ in range(CALLS):
        events += runner.run(prof, operands)
    prof.finish()
    span = (events[-1].profile.end - events[0].profile.start) * 1e-3 / CALLS
    one = 1e6 * runtime.time_runner(runner, prof, operands, 20)
    print(f"{label:24s} {runner.label[:40]:40s} launches {len(runner.launches)}: "
          + "; ".join(f"{k} {v}" for k, v in figures.items())
          + f"; device {span:.1f} us/call in a stream; events {one:.1f} us per call alone")
    for name in ALGORITHMS:  # the op's stream with each algorithm named: what launches cost against kernel time
        try:
            print(f"    algorithm={name}: {stream(lambda name=name: clconv.conv2d(x, w, padding=pad, algorithm=name), q)}")
        except ValueError as exc:
            print(f"    algorithm={name}: declines ({str(exc)[:80]})")


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    rng = np.random.default_rng(0)
    for label, (xs, ws, pad) in LAYERS.items():
        measure(label, xs, ws, pad, q, prof, rng)


if __name__ == "__main__":
    main()
