"""Does the NVIDIA driver start a stream's kernels before the stream's final sync?  Streams of
default calls on host-bound layers (kernel ~7-30 us, about what the host takes per call), timed
with one ``finish()`` at the end (what ``clconv bench``'s stream column does), in four ways:

* ``plain``: the public op alone;
* ``flush``: ``queue.flush()`` after each call (clFlush: hand the batched commands to the device);
* ``flush4``: a flush after every fourth call;
* ``enqueue``: the host's time to make the calls (no sync): what a stream costs if the GPU overlaps fully;

for streams of 20 and of 200 calls, beside PyTorch's stream (cuDNN) and the kernel-event time
of one call, and the cost of ``flush()`` alone on an empty queue.
``python docs/perf/flush_stream.py [DESCRIPTOR ...]``."""

import sys
import time

import numpy as np
import pyopencl.array as cla

import clconv
from clconv import planner, runtime
from clconv.passes import ROLE_SHAPES
from clconv.plan import Problem
from clconv.tools import libraries
from clconv.tools.shapes import parse_descriptor
from clconv.tools.timing import default_call, stream_times

LAYERS = [
    "mb32ic64iw1024oc128ow1024kw1pw0",   # PointNet 1x1, kernel ~22 us
    "mb16ic240ih28oc40oh28kh1ph0",       # EfficientNet-B0 project, ~19 us
    "mb8ic32ih64iw64oc32oh64ow64kh5kw1ph2pw0",  # ENet 5x1, ~25 us
    "mb1ic128ih28oc128oh28kh3ph1",       # batch-1 ResNet 3x3, ~22 us
    "mb1ic24ih56oc144oh56kh1ph0",        # batch-1 MobileNetV2 expand, ~7 us
    "mb32ic512ih28oc256oh28kh1ph0",      # a GPU-bound one, ~150 us
]
PASSES = ("forward", "backward_data", "backward_weight")
ROUNDS = 7


def with_flush(call, queue, every):
    count = [0]

    def flushed():
        call()
        count[0] += 1
        if count[0] % every == 0:
            queue.flush()
    return flushed


def main():
    layers = sys.argv[1:] or LAYERS
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    torch = libraries.load_torch(True)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(10000):
        q.flush()
    print(f"flush() on an idle queue: {(time.perf_counter() - t0) * 1e2:.2f} us")
    for descriptor in layers:
        g = parse_descriptor(descriptor).geometry
        host = {role: rng.standard_normal(ROLE_SHAPES[role](g)).astype(np.float32) for role in ("x", "w", "dy")}
        arrays = {role: cla.to_device(q, a) for role, a in host.items()}
        tt = libraries.torch_device_tensors(torch, host, True) if torch else None
        for pass_ in PASSES:
            runner = planner.plan(Problem(g, pass_, "float32"), q)
            operands = runtime.random_operands(Problem(g, pass_, "float32"), q)
            kernel_us = 1e6 * runtime.time_runner(runner, prof, operands, 20)
            call = default_call(g, pass_, arrays)
            call()
            q.finish()
            line = f"{descriptor:42s} {pass_:15s} {runner.algorithm:13s} x{len(runner.launches)} kernel {kernel_us:7.1f}"
            for calls in (20, 200):
                figures = {}
                for name, fn in (("plain", call), ("flush", with_flush(call, q, 1)), ("flush4", with_flush(call, q, 4))):
                    enq, total = stream_times(fn, q.finish, calls, ROUNDS)
                    figures[name] = 1e6 * total
                    if name == "plain":
                        figures["enqueue"] = 1e6 * enq
                if tt is not None:
                    fn = libraries.torch_fn(torch, g, pass_, tt)
                    fn()
                    torch.cuda.synchronize()
                    figures["cudnn"] = 1e6 * stream_times(fn, torch.cuda.synchronize, calls, ROUNDS)[1]
                line += f" | {calls}: " + " ".join(f"{k} {v:6.1f}" for k, v in figures.items())
            print(line, flush=True)


if __name__ == "__main__":
    main()
