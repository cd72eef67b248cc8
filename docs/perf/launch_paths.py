"""Where a launch's host time goes on the driver at hand, and what a stream of clconv calls costs on a
profiling queue against a plain one: issue 12's host-bound streams (VGG-11 at batch 8, small layers).

    python docs/perf/launch_paths.py

For an empty kernel with the GEMM core's signature, on a queue with profiling enabled and one
without (same context): pyopencl's ``Kernel.__call__``, the same with the previous launch's event as
``wait_for`` (what the runner passed between a call's launches), ``enqueue_nd_range_kernel`` with
the arguments already set, and ``clEnqueueNDRangeKernel`` called through ctypes with and without an
event.  Then clconv streams of 200 calls on a 3-launch (Winograd) and a 1-launch layer on both queues,
and whether two programs build faster on two threads (would building a plan's programs at once
cut a cold first call?).

Measured on the H200 (2026-12-01, NVIDIA 580.159): Kernel.__call__ 18.8-19.1 us on the profiling
queue, 12.4-12.9 us on the plain one; the enqueue alone 17.0 / 10.5 us; ctypes without an event
10.0-10.7 us on both; setting the 11 arguments 1.7 us.  Streams: a Winograd call 119 -> 97 us on
the plain queue (7x7, batch 1).  Builds: two programs 0.119 s one after the other, 0.098 s on two
threads.  On PoCL (2-core Xeon) the builds do not overlap: 0.448 s vs 0.467 s; Intel's CPU
runtime 0.148 -> 0.122 s.
"""
import ctypes
import ctypes.util
import random
import threading
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import clconv
from clconv.tools.timing import stream_seconds_per_call, stream_times

SIGNATURE = """__kernel void probe(__global float* a, const long a_off, __global float* b, const long b_off,
                    __global float* c, const long c_off, __global float* d, const long d_off,
                    __global float* e, const long e_off, const int chunk)
{ if (get_global_id(0) == 0 && chunk < 0) c[c_off] = a[a_off] + b[b_off] + d[d_off] + e[e_off]; }"""


def per_call_us(fn, queue, calls=3000):
    """Host time per call, the queue drained inside the timing (launches pile up otherwise)."""
    fn()
    queue.finish()
    return 1e6 * stream_seconds_per_call(fn, queue.finish, calls, 1)


def opencl_library():
    for name in ("libOpenCL.so.1", ctypes.util.find_library("OpenCL") or "libOpenCL.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("no libOpenCL")


def opencl_entry_points():
    """clEnqueueNDRangeKernel, clReleaseEvent and clSetKernelArg through ctypes, typed."""
    lib = opencl_library()
    enqueue = lib.clEnqueueNDRangeKernel
    enqueue.restype = ctypes.c_int32
    enqueue.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]
    release = lib.clReleaseEvent
    release.argtypes = [ctypes.c_void_p]
    set_arg = lib.clSetKernelArg
    set_arg.restype = ctypes.c_int32
    set_arg.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p]
    return enqueue, release, set_arg


def launch_paths(context, device):
    enqueue, release, _ = opencl_entry_points()
    kernel = cl.Program(context, SIGNATURE).build().probe
    kernel.set_scalar_arg_dtypes([None, np.int64] * 5 + [np.int32])
    buffers = [cl.Buffer(context, cl.mem_flags.READ_WRITE, 64) for _ in range(5)]
    args = [x for buf in buffers for x in (buf, 0)] + [1]
    global_size = (ctypes.c_size_t * 1)(64)
    local_size = (ctypes.c_size_t * 1)(64)
    queues = {"profiling": cl.CommandQueue(context, device, properties=cl.command_queue_properties.PROFILING_ENABLE),
              "plain": cl.CommandQueue(context, device)}
    for round_ in range(2):
        for name, queue in queues.items():
            figures = launch_figures(queue, kernel, args, enqueue, release, global_size, local_size)
            print(f"round {round_} {name:9s} " + "; ".join(f"{k} {v:.1f}" for k, v in figures.items()) + " (us)")


def launch_figures(queue, kernel, args, enqueue, release, global_size, local_size):
    kernel.set_args(*args)
    previous = [kernel(queue, (64,), (64,), *args)]
    event = ctypes.c_void_p()

    def chained():
        previous[0] = kernel(queue, (64,), (64,), *args, wait_for=previous)

    def raw(with_event):
        q, k = queue.int_ptr, kernel.int_ptr
        if with_event:
            def go():
                enqueue(q, k, 1, None, global_size, local_size, 0, None, ctypes.byref(event))
                release(event)
        else:
            def go():
                enqueue(q, k, 1, None, global_size, local_size, 0, None, None)
        return go

    kernel.set_args(*args)
    figures = {
        "Kernel.__call__": per_call_us(lambda: kernel(queue, (64,), (64,), *args), queue),
        "__call__ wait_for=prev": per_call_us(chained, queue),
        "enqueue_nd_range_kernel": per_call_us(lambda: cl.enqueue_nd_range_kernel(queue, kernel, (64,), (64,)), queue),
        "set_args alone": per_call_us(lambda: kernel.set_args(*args), queue),
    }
    kernel.set_args(*args)
    figures["ctypes, event"] = per_call_us(raw(True), queue)
    figures["ctypes, no event"] = per_call_us(raw(False), queue)
    return figures


SIGNATURES = {  # name: (source, scalar arg dtypes, how many buffers)
    "1 buffer": ("__kernel void probe(__global float* c, const long c_off, const int chunk)"
                 "{ if (get_global_id(0) == 0 && chunk < 0) c[c_off] = 0; }", [None, np.int64, np.int32], 1),
    "3 buffers": ("__kernel void probe(__global float* a, const long a_off, __global float* b, const long b_off,"
                  " __global float* c, const long c_off, const int chunk)"
                  "{ if (get_global_id(0) == 0 && chunk < 0) c[c_off] = a[a_off] + b[b_off]; }",
                  [None, np.int64] * 3 + [np.int32], 3),
    "5 buffers": (SIGNATURE, [None, np.int64] * 5 + [np.int32], 5),
}


def launch_by_signature(context, device):
    """Whether a launch's cost on this driver grows with its buffer arguments, and whether unused
    pointers passed as NULL (what the GEMM core's bias and residual are without an epilogue) or
    the same buffer twice cost less than distinct buffers: Kernel.__call__ on a plain queue."""
    queue = cl.CommandQueue(context, device)
    buffers = [cl.Buffer(context, cl.mem_flags.READ_WRITE, 64) for _ in range(5)]
    for round_ in range(2):
        figures = {}
        for name, (source, dtypes, count) in SIGNATURES.items():
            kernel = cl.Program(context, source).build().probe
            kernel.set_scalar_arg_dtypes(dtypes)
            variants = {"distinct": buffers[:count], "one buffer repeated": [buffers[0]] * count}
            if count == 5:
                variants["last two NULL"] = buffers[:3] + [None, None]
            for variant, bufs in variants.items():
                args = [x for buf in bufs for x in (buf, 0)] + [1]
                figures[f"{name}, {variant}"] = per_call_us(lambda k=kernel, a=args: k(queue, (64,), (64,), *a), queue)
                figures[f"{name}, {variant}, no local size"] = per_call_us(
                    lambda k=kernel, a=args: k(queue, (64,), None, *a), queue)
        print(f"round {round_} by signature: " + "; ".join(f"{k} {v:.1f}" for k, v in figures.items()) + " (us)")


def streams(context, device):
    rng = np.random.default_rng(0)
    layers = {  # (x shape, w shape, padding): VGG-11 conv4-like at batch 8 (Winograd), a 1x1 layer
        "3x3 8x256x28x28->256": ((8, 256, 28, 28), (256, 256, 3, 3), 1),
        "3x3 1x512x7x7->512": ((1, 512, 7, 7), (512, 512, 3, 3), 1),
        "1x1 8x512x28x28->128": ((8, 512, 28, 28), (128, 512, 1, 1), 0),
    }
    queues = {"profiling": cl.CommandQueue(context, device, properties=cl.command_queue_properties.PROFILING_ENABLE),
              "plain": cl.CommandQueue(context, device)}
    calls = 200
    for round_ in range(2):
        for label, (xs, ws, pad) in layers.items():
            line = []
            for name, queue in queues.items():
                x = cla.to_device(queue, rng.standard_normal(xs, dtype=np.float32))
                w = cla.to_device(queue, rng.standard_normal(ws, dtype=np.float32))
                for _ in range(5):
                    clconv.conv2d(x, w, padding=pad)
                queue.finish()
                enqueued, total = stream_times(lambda x=x, w=w, pad=pad: clconv.conv2d(x, w, padding=pad),
                                               queue.finish, calls, 3)
                line.append(f"{name} {1e6 * total:.1f} us/call (enqueue {1e6 * enqueued:.1f})")
            print(f"round {round_} stream {label}: " + "; ".join(line))


def build_costs(queue):
    def source(tag):  # unique, so that no compiler cache answers
        return (f"__kernel void k(__global float16* a, __global const float16* b) {{ int i = get_global_id(0);"
                f" float16 s = 0; for (int k = 0; k < 256; ++k) s = fma(b[k], (float16)({tag}.5f), s); a[i] = s; }}")

    def build(tag):
        cl.Program(queue.context, source(tag)).build()

    salt = random.randint(0, 10**9)
    build(salt)  # the compiler's one-time start-up stays out
    start = time.perf_counter()
    build(salt + 1)
    build(salt + 2)
    sequential = time.perf_counter() - start
    start = time.perf_counter()
    threads = [threading.Thread(target=build, args=(salt + 3 + i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"builds: two programs {sequential:.3f} s one after the other, {time.perf_counter() - start:.3f} s on two threads")


def main():
    queue = clconv.default_queue()
    device = queue.device
    print(f"{device.name} ({device.platform.name}, driver {device.driver_version})")
    launch_paths(queue.context, device)
    launch_by_signature(queue.context, device)
    streams(queue.context, device)
    build_costs(queue)


if __name__ == "__main__":
    main()
