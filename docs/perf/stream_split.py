"""Where a stream of small calls spends its time (issue 12's host-bound streams): per call, in a
stream of 200 on an in-order queue without profiling,

* ``op``: the public op with default arguments (what ``clconv bench``'s stream column times);
* ``runner``: the planned runner's launches alone (no op-layer checks, no result allocation);
* ``raw``: the same kernels with their arguments set once, each call only enqueues them;
* ``device``: on a profiling queue, the span from the stream's first kernel start to its last
  kernel end over the calls: the GPU's own time per call, gaps between kernels included;
* ``events``: the kernel-event time of one call (what ``bench``'s kernel column reports);
* then the op's stream with each algorithm named (``implicit_gemm`` launches once, Winograd three times).

Each as "host enqueue time / time with the final sync", for every pass.  ``python docs/perf/stream_split.py
[--profile] [DESCRIPTOR ...]``: other layers than the list below; ``--profile``: a cProfile of the op's
stream too (the functions taking the most time of their own).
"""

import sys

import numpy as np
import pyopencl.array as cla

import clconv
from clconv import planner, runtime
from clconv.plan import Problem
from clconv.passes import ROLE_SHAPES
from clconv.tools.shapes import parse_descriptor
from clconv.tools.timing import default_call, stream_times
from host_profile import print_profile  # docs/perf/, beside this script

CALLS = 200
LAYERS = {  # descriptors (clconv.tools.shapes): the layers of the host-bound rows of bench's stream column
    "3x3 1x512x7x7->512": "mb1ic512ih7oc512oh7kh3ph1",
    "3x3 8x192x13x13->128": "mb8ic192ih13oc128oh13kh3ph1",
    "3x3 8x256x7x7->160": "mb8ic256ih7oc160oh7kh3ph1",
    "1x1 8x512x28x28->128": "mb8ic512ih28oc128oh28kh1ph0",
}
PASSES = ("forward", "backward_data", "backward_weight")
ALGORITHMS = ("implicit_gemm", "im2col", "winograd")


def stream(fn, queue, calls=CALLS, rounds=3):
    fn()
    queue.finish()
    enqueued, total = stream_times(fn, queue.finish, calls, rounds)
    return f"{1e6 * enqueued:6.1f} / {1e6 * total:6.1f}"


def measure(label, g, pass_, arrays, q, prof, profile=False):
    problem = Problem(g, pass_, "float32")
    runner = planner.plan(problem, q)
    operands = runtime.random_operands(problem, q)
    spaces = runner._allocate(q, runtime.Workspaces.of(q).buffers)
    prepared = [(launch.kernel, launch.global_size, launch.local_size, launch.resolve_args(operands, spaces))
                for launch in runner.launches]

    def raw():
        for kernel, gs, ls, args in prepared:
            kernel(q, gs, ls, *args)

    figures = {
        "op": stream(default_call(g, pass_, arrays), q),
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
    print(f"{label:22s} {pass_:15s} {runner.algorithm:13s} launches {len(runner.launches)}: "
          + "; ".join(f"{k} {v}" for k, v in figures.items())
          + f"; device {span:.1f} us/call in a stream; events {one:.1f} us per call alone")
    if profile:
        print_profile(default_call(g, pass_, arrays), q, CALLS, lines=16)
    for name in ALGORITHMS:  # the op's stream with each algorithm named: what launches cost against kernel time
        if name == runner.algorithm:
            continue
        try:
            call = default_call(g, pass_, arrays, algorithm=name)
            print(f"    algorithm={name}: {stream(call, q)}")
        except ValueError as exc:
            print(f"    algorithm={name}: declines ({str(exc)[:60]})")


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    rng = np.random.default_rng(0)
    args = sys.argv[1:]
    profile = "--profile" in args
    layers = {d: d for d in args if d != "--profile"} or LAYERS
    for label, descriptor in layers.items():
        g = parse_descriptor(descriptor).geometry
        arrays = {role: cla.to_device(q, rng.standard_normal(ROLE_SHAPES[role](g)).astype(np.float32))
                  for role in ("x", "w", "dy")}
        for pass_ in PASSES:
            measure(label, g, pass_, arrays, q, prof, profile)


if __name__ == "__main__":
    main()
