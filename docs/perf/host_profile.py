"""Host time per call of a stream of default calls (no profiler), the same with ``out=`` given (no
result allocation), with and without the memo of repeated calls, then a cProfile of the default calls: the op layer's share of the host-bound
stream rows of issue 12 (VGG-11's conv4_1 forward at batch 8, a batch-1 7x7 data gradient, a
batch-8 weight gradient).  `python docs/perf/host_profile.py` on the GPU machine."""
import contextlib
import cProfile
import pstats

import numpy as np
import pyopencl.array as cla

import clconv
from clconv import ops
from clconv.tools.timing import stream_times

CALLS = 200
FAMILIES = ("_conv", "_conv_input", "_conv_weight")


@contextlib.contextmanager
def full_checks():
    """The ops' checking functions without their memo of repeated calls (ops._repeatable)."""
    saved = {name: getattr(ops, name) for name in FAMILIES}
    for name, checked in saved.items():
        setattr(ops, name, checked.__wrapped__)
    try:
        yield
    finally:
        for name, checked in saved.items():
            setattr(ops, name, checked)


def print_profile(call, queue, calls=CALLS, lines=14):
    """A cProfile of ``calls`` calls of ``call`` in a stream (one sync at the end): the functions
    taking the most time of their own."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        call()
    profile.disable()
    queue.finish()
    pstats.Stats(profile).sort_stats("tottime").print_stats(lines)


def per_call_us(fn, q):
    """Host time per call of a stream of default calls (its enqueue: the device keeps up or not)."""
    for _ in range(5):
        fn()
    q.finish()
    return 1e6 * stream_times(fn, q.finish, CALLS, 3)[0]


def main():
    q = clconv.default_queue()
    rng = np.random.default_rng(0)

    def device(*shape):
        return cla.to_device(q, rng.standard_normal(shape, dtype=np.float32))

    x, w = device(8, 192, 13, 13), device(128, 192, 3, 3)
    w7, dy7 = device(512, 512, 3, 3), device(1, 512, 7, 7)
    x8, dy8 = device(8, 256, 7, 7), device(8, 160, 7, 7)
    y, dx7, dw8 = clconv.conv2d(x, w, padding=1), device(1, 512, 7, 7), device(160, 256, 3, 3)
    cases = {
        "conv2d 8x192x13x13 -> 128": (lambda: clconv.conv2d(x, w, padding=1),
                                      lambda: clconv.conv2d(x, w, padding=1, out=y)),
        "conv2d_input 1x512x7x7": (lambda: clconv.conv2d_input((1, 512, 7, 7), w7, dy7, padding=1),
                                   lambda: clconv.conv2d_input((1, 512, 7, 7), w7, dy7, padding=1, out=dx7)),
        "conv2d_weight 8x256x7x7 -> 160": (lambda: clconv.conv2d_weight(x8, (160, 256, 3, 3), dy8, padding=1),
                                           lambda: clconv.conv2d_weight(x8, (160, 256, 3, 3), dy8, padding=1, out=dw8)),
    }
    for label, (default, given) in cases.items():
        with_events = per_call_us(default, q)
        for array in (x, w, w7, dy7, x8, dy8):
            array.finish()  # the inputs' upload events: no wait list
        memo, full = [], []
        for _ in range(3):  # interleaved: the memo of repeated calls against the full checks each call
            memo.append(per_call_us(default, q))
            with full_checks():
                full.append(per_call_us(default, q))
        print(f"{label}: default {with_events:.1f} us/call enqueued, inputs without events {min(memo):.1f} "
              f"(every call checked in full: {min(full):.1f}), out= given {per_call_us(given, q):.1f}")
        print_profile(default, q)


if __name__ == "__main__":
    main()
