"""What a launch and a build cost on the host, for the open questions of issue 12 on a driver at
hand: how an enqueue's time splits between setting arguments and the enqueue itself (would
skipping unchanged arguments pay?), and whether two programs build faster on two threads (would
building a plan's programs at once cut a cold first call?).

    python docs/perf/host_costs.py

Measured on PoCL (2026-12-01, 2-core Xeon, while other jobs ran): Kernel.__call__ 7.1-8.9 us,
set_args + enqueue 5.8-6.9 us, the enqueue alone ~6 us; the builds do not overlap (two programs
0.448 s one after the other, 0.467 s on two threads); Intel's CPU runtime 0.148 -> 0.122 s.
NVIDIA's figures are the ones still to take.
"""
import random
import threading
import time

import numpy as np
import pyopencl as cl

import clconv

# the GEMM core's signature: five (buffer, offset) pairs and the chunk
SIGNATURE = """__kernel void probe(__global float* a, const long a_off, __global float* b, const long b_off,
                    __global float* c, const long c_off, __global float* d, const long d_off,
                    __global float* e, const long e_off, const int chunk)
{ if (get_global_id(0) == 0 && chunk < 0) c[c_off] = a[a_off] + b[b_off] + d[d_off] + e[e_off]; }"""


def per_call_us(fn, queue, calls=3000):
    """Host time per call of ``fn``, the queue drained inside the timing (launches pile up otherwise)."""
    fn()
    queue.finish()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    queue.finish()
    return 1e6 * (time.perf_counter() - start) / calls


def launch_costs(queue):
    kernel = cl.Program(queue.context, SIGNATURE).build().probe
    kernel.set_scalar_arg_dtypes([None, np.int64] * 5 + [np.int32])
    buffers = [cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 64) for _ in range(5)]
    args = [x for buf in buffers for x in (buf, 0)] + [1]
    def both():
        kernel.set_args(*args)
        cl.enqueue_nd_range_kernel(queue, kernel, (64,), (64,))

    for _ in range(3):  # rounds: the figures of a shared host move
        full = per_call_us(lambda: kernel(queue, (64,), (64,), *args), queue)
        split = per_call_us(both, queue)
        enqueue = per_call_us(lambda: cl.enqueue_nd_range_kernel(queue, kernel, (64,), (64,)), queue)
        set_args = per_call_us(lambda: kernel.set_args(*args), queue)
        print(f"launch: Kernel.__call__ {full:.1f} us; set_args + enqueue_nd_range_kernel {split:.1f} us; "
              f"the enqueue alone {enqueue:.1f} us; setting the 11 arguments alone {set_args:.1f} us")


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
    print(f"{queue.device.name} ({queue.device.platform.name}, driver {queue.device.driver_version})")
    launch_costs(queue)
    build_costs(queue)


if __name__ == "__main__":
    main()
