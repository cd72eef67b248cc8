"""What one kernel enqueue costs the host, and how much of it is the event pyopencl always asks for:
a trivial kernel (arguments set once) enqueued CALLS times on an in-order queue, one sync at the
end, the best of ROUNDS streams, microseconds per enqueue:

* ``pyopencl enqueue``: ``cl.enqueue_nd_range_kernel`` (what clconv's launches end in);
* ``pyopencl kernel(...)``: the kernel called with its three arguments, their types declared (what
  a clconv launch does: sets the arguments, then enqueues);
* ``ctypes, event``: ``clEnqueueNDRangeKernel`` called through ctypes, asking for an event (released
  at once);
* ``ctypes, no event``: the same without an event;
* ``ctypes, set 3 args + enqueue``: three ``clSetKernelArg`` calls and an enqueue without event.

``launch_paths.py`` (2026-12-01) measured the ctypes paths beside pyopencl's on a GEMM-shaped
signature; this reuses its entry points for the event's own cost and, at the end, the enqueue
against the size of the kernel's buffer argument.

``python docs/perf/enqueue_events.py`` (on the GPU machine: after ``. .gpu/opencl-on-gpu.sh``)."""

import ctypes

import numpy as np
import pyopencl as cl

import clconv
from clconv.tools.timing import stream_seconds_per_call
from launch_paths import opencl_entry_points  # docs/perf/, this script's own folder

CALLS, ROUNDS = 2000, 5
SOURCE = "__kernel void bump(__global float* a, const long offset, const int value) { a[get_global_id(0) + offset] += value; }"


def per_call_us(enqueue, queue) -> float:
    queue.finish()
    return 1e6 * stream_seconds_per_call(enqueue, queue.finish, CALLS, ROUNDS)


def main() -> None:
    queue = clconv.default_queue()
    print(queue.device.name, queue.device.platform.name, queue.device.driver_version)
    kernel = cl.Kernel(cl.Program(queue.context, SOURCE).build(), "bump")
    buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 64)
    offset, value = np.int64(0), np.int32(1)
    kernel.set_args(buffer, offset, value)

    enqueue, release, set_arg = opencl_entry_points()

    q, k = queue.int_ptr, kernel.int_ptr
    global_size, local_size = (ctypes.c_size_t * 1)(64), (ctypes.c_size_t * 1)(64)
    event = ctypes.c_void_p()
    event_ref = ctypes.byref(event)
    handle = ctypes.c_void_p(buffer.int_ptr)
    handle_ref, offset_c, value_c = ctypes.byref(handle), ctypes.c_int64(0), ctypes.c_int32(1)
    offset_ref, value_ref = ctypes.byref(offset_c), ctypes.byref(value_c)

    def ctypes_event():
        if enqueue(q, k, 1, None, global_size, local_size, 0, None, event_ref):
            raise RuntimeError("enqueue failed")
        release(event)

    def ctypes_no_event():
        if enqueue(q, k, 1, None, global_size, local_size, 0, None, None):
            raise RuntimeError("enqueue failed")

    def ctypes_set_and_enqueue():
        set_arg(k, 0, 8, handle_ref)
        set_arg(k, 1, 8, offset_ref)
        set_arg(k, 2, 4, value_ref)
        if enqueue(q, k, 1, None, global_size, local_size, 0, None, None):
            raise RuntimeError("enqueue failed")

    typed = cl.Kernel(kernel.program, "bump")
    typed.set_scalar_arg_dtypes([None, np.int64, np.int32])  # as clconv declares its kernels'

    def pyopencl_set_and_enqueue():
        typed(queue, (64,), (64,), buffer, 0, 1)

    ways = {
        "pyopencl enqueue": lambda: cl.enqueue_nd_range_kernel(queue, kernel, (64,), (64,)),
        "pyopencl kernel(...), typed (sets 3 args)": pyopencl_set_and_enqueue,
        "ctypes, event": ctypes_event,
        "ctypes, no event": ctypes_no_event,
        "ctypes, set 3 args + enqueue, no event": ctypes_set_and_enqueue,
    }
    for _ in range(2):  # twice, alternating: the first pass warms every path
        for name, way in ways.items():
            print(f"{name:40s} {per_call_us(way, queue):6.2f} us per enqueue")
        print()
    host = np.empty(64, np.float32)
    cl.enqueue_copy(queue, host, buffer)
    print("each element bumped", int(host[0]), "times")

    # the same kernel (64 work-items) with a large buffer as its argument: does the buffer's size
    # cost the enqueue?  (VGG's first forward, a 103 MB result, ran 114 us a call in a stream
    # against a 21.6 us kernel event)
    for size in (4 << 10, 100 << 20, 1 << 30):
        large = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, size)
        cl.enqueue_fill_buffer(queue, large, np.float32(0), 0, size)
        print(f"pyopencl kernel(...), typed, on a {size >> 10:8d} KiB buffer: "
              f"{per_call_us(lambda b=large: typed(queue, (64,), (64,), b, 0, 1), queue):6.2f} us per enqueue")


if __name__ == "__main__":
    main()
