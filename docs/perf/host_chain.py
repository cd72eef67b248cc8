"""Host time per call of three streams of default calls on a tiny layer (8 -> 8 channels, 3x3 at
8x8, batch 1), one sync at the end, the minimum of 7 rounds of 400 calls:

* ``alloc``: ``y = conv2d(x, w)``, the same x each call, a new result each call;
* ``out``: ``conv2d(x, w, out=y)``, one out Array reused;
* ``chain``: ``y = conv2d(y, w)``, each call taking the one before's result, as a network's layers do.

The last two take as input or out an Array whose event is the previous call's.  It prints which
clconv it imported: ``PYTHONPATH=TREE python docs/perf/host_chain.py``, alternating trees (a copy
of another commit's clconv/ folder) to compare them in one host's processes.
"""

import numpy as np
import pyopencl.array as cla

import clconv
from clconv.tools.timing import stream_seconds_per_call

CALLS, ROUNDS = 400, 7


def per_call_us(call, queue) -> float:
    """Host time per call of a stream of CALLS calls with one sync, the best of ROUNDS streams (us)."""
    call()
    queue.finish()
    return 1e6 * stream_seconds_per_call(call, queue.finish, CALLS, ROUNDS)


def main():
    queue = clconv.default_queue()
    rng = np.random.default_rng(0)
    x = cla.to_device(queue, rng.standard_normal((1, 8, 8, 8)).astype(np.float32))
    w = cla.to_device(queue, (0.1 * rng.standard_normal((8, 8, 3, 3))).astype(np.float32))
    out = cla.empty(queue, (1, 8, 8, 8), np.float32)
    state = {"y": x}

    def chain():
        state["y"] = clconv.conv2d(state["y"], w, padding=1)

    figures = {"alloc": per_call_us(lambda: clconv.conv2d(x, w, padding=1), queue),
               "out": per_call_us(lambda: clconv.conv2d(x, w, padding=1, out=out), queue),
               "chain": per_call_us(chain, queue)}
    print(clconv.__file__, " ".join(f"{k} {v:.1f}" for k, v in figures.items()), "us per call")


if __name__ == "__main__":
    main()
