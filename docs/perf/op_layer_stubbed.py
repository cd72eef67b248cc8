"""The op layer's own host time per repeated call (issue 12's host-bound streams), on any machine:
the public op with its launches stubbed out (each launch's arguments are still resolved; nothing is
enqueued), timed with timeit (best of 5 rounds of N calls), for a layer called two ways:

* ``ints``: stride, padding and dilation as plain ints where the layer allows (a hand-written call);
* ``tuples``: as tuples and (begin, end) padding pairs, as ``clconv.tools.timing.default_call``
  and PyTorch's modules pass them.

    python docs/perf/op_layer_stubbed.py [DESCRIPTOR] [N]

No device time is measured: the figures are clconv's Python plus the result's allocation from the
queue's pool, which a stream of small calls waits on before its launches (docs/performance.md)."""

import sys
import timeit

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import clconv
from clconv import runtime
from clconv.passes import ROLE_SHAPES
from clconv.tools.shapes import parse_descriptor
from clconv.tools.timing import default_call


def main() -> None:
    descriptor = sys.argv[1] if len(sys.argv) > 1 else "mb2ic4ih10oc8oh4kh4sh2ph0"
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    queue = clconv.default_queue()
    rng = np.random.default_rng(0)
    g = parse_descriptor(descriptor).geometry
    arrays = {role: cla.to_device(queue, rng.standard_normal(ROLE_SHAPES[role](g)).astype(np.float32))
              for role in ("x", "w", "dy")}
    tuples = default_call(g, "forward", arrays)
    nd = g.ndim
    x = arrays["x"].reshape((*ROLE_SHAPES["x"](g)[:2], *ROLE_SHAPES["x"](g)[-nd:]))
    w = arrays["w"].reshape((*ROLE_SHAPES["w"](g)[:2], *ROLE_SHAPES["w"](g)[-nd:]))
    op = getattr(clconv, f"conv{nd}d")
    plain = dict(stride=g.stride[-1], padding=g.pad_begin[-1], dilation=g.dilation[-1])
    same = all(len(set(v)) == 1 for v in (g.stride[-nd:], g.pad_begin[-nd:], g.pad_end[-nd:], g.dilation[-nd:]))
    ints = (lambda: op(x, w, **plain)) if same else None
    for call in (tuples, ints):
        if call is not None:
            call()
    queue.finish()
    marker = cl.enqueue_marker(queue)

    def stub(self, run_queue, operands, spaces, wait_for, chain):
        for launch in self.launches:
            launch.resolve_args(operands, spaces)
        return [marker for _ in self.launches]

    runtime.Runner._enqueue = stub
    for name, call in (("ints", ints), ("tuples", tuples)):
        if call is None:
            print(f"{descriptor} {name:6s}: not the same on every axis")
            continue
        best = min(timeit.repeat(call, number=calls, repeat=5)) / calls
        print(f"{descriptor} {name:6s}: {1e6 * best:6.2f} us per call, launches stubbed")


if __name__ == "__main__":
    main()
