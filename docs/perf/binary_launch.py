"""Does a kernel from a program binary launch slower than the same kernel built from source?

A device run saw a stream of small default calls take 35.6 us per call in the process that built
its programs from source and 49-53 us in later processes that loaded them from clconv's disk cache
(PyTorch 30 -> 36-40 us on the same host: partly the host).  Here, in one process, alternating:

* ``source``: the plan's kernels as built from source (an empty cache directory);
* ``binary``: the same plan after ``clear_caches()``, its programs loaded from the disk cache;
* ``source again``: ``clear_caches()`` and ``CLCONV_NO_CACHE=1``: built from source once more;

each as the host time per call of a stream of 200 runner calls (one sync), the minimum of 5
rounds, for a few layer-passes; and the same for an empty kernel built both ways.
``CLCONV_CACHE_DIR=$(mktemp -d) python docs/perf/binary_launch.py``.
"""

import os

import numpy as np
import pyopencl as cl

import clconv
from clconv.tools.timing import stream_seconds_per_call
from clconv import builder, planner, runtime
from clconv.caches import clear_caches
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor

LAYERS = [("mb4ic128ih14oc128oh14kh3ph1", "forward"), ("mb4ic128ih14oc128oh14kh3ph1", "backward_data"),
          ("mb4ic128ih14oc128oh14kh3ph1", "backward_weight"), ("mb8ic512ih28oc128oh28kh1ph0", "forward")]
CALLS, ROUNDS = 200, 5


def stream_us(call, queue) -> float:
    """Host time per call of a stream of CALLS calls with one sync, the best of ROUNDS streams (us)."""
    call()
    queue.finish()
    return 1e6 * stream_seconds_per_call(call, queue.finish, CALLS, ROUNDS)


def runner_stream(problem, queue):
    runner = planner.plan(problem, queue)
    operands = runtime.random_operands(problem, queue)
    return runner.label, stream_us(lambda: runner.run(queue, operands), queue)


def main():
    queue = clconv.default_queue()
    print(queue.device.name, queue.device.driver_version)
    src = "__kernel void k(__global float *a, int n) { int i = get_global_id(0); if (i < n) a[i] += 1.0f; }"
    from_source = cl.Program(queue.context, src).build()
    binaries = from_source.get_info(cl.program_info.BINARIES)
    from_binary = cl.Program(queue.context, queue.context.devices, binaries).build()
    buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4096)
    kernels = {"source": cl.Kernel(from_source, "k"), "binary": cl.Kernel(from_binary, "k")}
    for _ in range(2):
        for name, kernel in kernels.items():
            us = stream_us(lambda kernel=kernel: kernel(queue, (1024,), (128,), buffer, np.int32(1024)), queue)
            print(f"empty kernel from {name}: {us:.1f} us")
    for descriptor, pass_ in LAYERS:
        problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
        figures = []
        for name in ("source", "binary", "source again", "binary again"):
            clear_caches()
            os.environ["CLCONV_NO_CACHE"] = "1" if name == "source again" else "0"
            builder.stats.reset()
            label, us = runner_stream(problem, queue)
            figures.append(f"{name} {us:.1f} (source builds {builder.stats.source_builds}, disk {builder.stats.disk_hits})")
        print(f"{descriptor} {pass_} {label}: " + "; ".join(figures))


if __name__ == "__main__":
    main()
