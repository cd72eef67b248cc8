"""Timing: clconv's kernels by OpenCL profiling events, PyTorch's by CUDA events on a GPU, host code
by the host clock, a stream of calls by its wall time with one synchronisation at the end; and
:func:`bench_layer`, which times every pass of one layer with clconv and the reference libraries.

Every figure is a statistic (median unless told otherwise) over repeated runs after a warm-up run,
so that first-call costs (building, tuning, cuDNN's algorithm search, allocations) stay out.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from clconv import planner, runtime
from clconv.plan import Problem
from clconv.passes import PASS_TABLE, ROLE_SHAPES

from . import libraries
from .report import Row, pass_label

Statistic = Callable[[list[float]], float]

# Seconds to wait before timing clconv on a CPU: PyTorch's (libgomp) and OpenBLAS's worker
# threads spin for up to ~0.1-0.2 s after their last call before they sleep.
HOST_THREADS_IDLE_S = 0.25


def time_host(fn: Callable[[], Any], repeats: int, statistic: Statistic = statistics.median) -> float:
    """Milliseconds of one call of ``fn`` by the host clock (one warm-up call first, and every
    build it started in the background finished: the steady state, not an interim plan's)."""
    fn()
    planner.finish_builds()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistic(times)


def time_torch(torch: Any, fn: Callable[[], Any], repeats: int, gpu: bool,
               statistic: Statistic = statistics.median) -> float:
    """Milliseconds of one PyTorch call: CUDA events on a GPU, the host clock on the CPU."""
    for _ in range(3):  # cudnn.benchmark's search and allocations stay out
        fn()
    if not gpu:
        return time_host(fn, repeats, statistic)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistic(times)


def stream_times(call: Callable[[], Any], sync: Callable[[], Any], calls: int, repeats: int) -> tuple[float, float]:
    """Seconds per call of a stream of ``calls`` calls: making them (the host's enqueue, which
    blocks only where the device falls far behind) and with one ``sync()`` at the stream's end,
    each the best of ``repeats`` streams.  One call and every build it started in the background
    first: a stream times the chosen kernels, not a new geometry's interim kernels."""
    call()
    sync()
    planner.finish_builds()
    enqueued = total = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        enqueued, total = min(enqueued, (t1 - t0) / calls), min(total, (t2 - t0) / calls)
    return enqueued, total


def stream_seconds_per_call(call: Callable[[], Any], sync: Callable[[], Any], calls: int, repeats: int) -> float:
    """Seconds per call of a stream of ``calls`` calls with one ``sync()`` at its end, the best of
    ``repeats`` streams: the host's cost per call when the device keeps up."""
    return stream_times(call, sync, calls, repeats)[1]


STREAM_CALLS = 20  # calls per timed stream (one synchronisation at its end)


def default_call(g, pass_: str, arrays: dict[str, Any], algorithm: str = "auto") -> Callable[[], Any]:
    """The public op that runs canonical pass ``pass_`` of ``g`` with default arguments on device
    Arrays (``x``, ``w``, ``dy``): results allocated by clconv, as a user calls it (``algorithm``
    named, for comparisons).  A transposed layer's canonical passes are those of the convolution
    it is the gradient of, so the same ops run its kernels."""
    import clconv

    nd = g.ndim
    options = dict(stride=g.stride[-nd:], padding=tuple(zip(g.pad_begin[-nd:], g.pad_end[-nd:])),
                   dilation=g.dilation[-nd:], groups=g.groups, algorithm=algorithm)
    x_shape, w_shape = ROLE_SHAPES["x"](g), ROLE_SHAPES["w"](g)
    x_shape = (*x_shape[:2], *x_shape[-nd:])
    w_shape = (*w_shape[:2], *w_shape[-nd:])
    x, w, dy = (arrays[role].reshape(shape) for role, shape in
                (("x", x_shape), ("w", w_shape), ("dy", (*ROLE_SHAPES["dy"](g)[:2], *g.out_size[-nd:]))))
    if pass_ == "forward":
        op = getattr(clconv, f"conv{nd}d")
        return lambda: op(x, w, **options)
    if pass_ == "backward_data":
        op = getattr(clconv, f"conv{nd}d_input")
        return lambda: op(x_shape, w, dy, **options)
    op = getattr(clconv, f"conv{nd}d_weight")
    return lambda: op(x, w_shape, dy, **options)


def _device_buffer(queue: cl.CommandQueue, host: np.ndarray) -> cl.Buffer:
    return cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)


def bench_layer(layer, passes, queue, *, algorithm="auto", repeats=20, torch=None, numpy_baseline=False,
                check=False, rng=None, progress=None, statistic: Statistic = statistics.median,
                stream: bool = False) -> list[Row]:
    """Time every pass of one layer (:class:`clconv.tools.shapes.Layer`); one :class:`Row` per pass.

    clconv: the runner a call with ``algorithm`` would run (``planner.plan``; the first plan's
    seconds are ``plan_s``), timed by profiling events from its first launch's start to its last
    launch's end.  PyTorch (``torch``, when given and the geometry is one it takes) and, for the
    forward pass, the NumPy baseline (``numpy_baseline``) on the same data.  ``check``: the first
    clconv run's result, on NaN-poisoned memory, against a float64 reference.  ``stream``: also the
    wall time per call of a stream of default public-API calls (:func:`default_call`, algorithm
    'auto') with one synchronisation at the end, and PyTorch's the same way: what a user sees."""
    g = layer.geometry
    rng = rng or np.random.default_rng(0)
    pqueue = runtime.profiling_queue(queue)
    gpu = bool(queue.device.type & cl.device_type.GPU)
    host = {"x": rng.standard_normal(ROLE_SHAPES["x"](g)).astype(np.float32),
            "w": (rng.standard_normal(ROLE_SHAPES["w"](g)) / math.sqrt(g.reduction_length)).astype(np.float32),
            "dy": rng.standard_normal(ROLE_SHAPES["dy"](g)).astype(np.float32)}
    device = {role: _device_buffer(queue, a) for role, a in host.items()}
    tt = None
    if torch is not None and libraries.torch_args(g) is not None:
        tt = libraries.torch_device_tensors(torch, host, gpu)
    # Phases, clconv first: PyTorch's OpenMP workers and OpenBLAS's threads spin-wait for a while
    # after each call, and on a CPU device they would take cores from clconv's timing.
    rows, outputs = [], {}
    if not gpu:
        time.sleep(HOST_THREADS_IDLE_S)  # the previous layer's host-library threads go idle
    for pass_ in passes:
        spec = PASS_TABLE[pass_]
        row = Row(layer.label, layer.descriptor, pass_, pass_label(pass_, layer.transposed))
        rows.append(row)
        if progress:
            progress(f"{layer.label} {row.label}")
        out = np.full(spec.result_shape(g), np.nan, np.float32)
        out_buf = _device_buffer(queue, out)
        operands = {role: runtime.Operand(device[role], 0) for role in spec.inputs}
        operands[spec.result] = runtime.Operand(out_buf, 0)
        try:
            t0 = time.perf_counter()
            runner = planner.plan(Problem(g, pass_, "float32"), queue, algorithm)
            row.plan_s = time.perf_counter() - t0
            row.algorithm, row.config = runner.algorithm, dict(runner.config)
            if check:  # the first run's output, on poisoned memory, is the one checked
                cl.wait_for_events(runner.run(pqueue, operands))
                cl.enqueue_copy(pqueue, out, out_buf)
                outputs[pass_] = out
            seconds = runtime.time_runner(runner, pqueue, operands, repeats, statistic)
            row.ms = seconds * 1e3
            row.gflops = g.flops / seconds / 1e9
        except Exception as exc:  # noqa: BLE001 - one failing layer must not end the benchmark
            row.note = f"clconv failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    if stream:
        arrays = {role: cl_array.to_device(queue, a) for role, a in host.items()}
        for row in rows:
            if not math.isfinite(row.ms):
                continue
            try:
                call = default_call(g, row.pass_, arrays)
                call()
                row.stream_ms = stream_seconds_per_call(call, queue.finish, STREAM_CALLS, max(3, repeats // 4)) * 1e3
            except (ValueError, TypeError) as exc:  # a geometry the public ops spell otherwise
                row.note += f" no stream: {str(exc)[:120]}"
    for row in rows:
        if tt is not None and math.isfinite(row.ms):
            try:
                fn = libraries.torch_fn(torch, g, row.pass_, tt)
                row.ref_name = "cudnn" if gpu else "torch-cpu"
                row.ref_ms = time_torch(torch, fn, repeats, gpu, statistic)
                row.ratio = row.ms / row.ref_ms
                if math.isfinite(row.stream_ms):
                    sync = torch.cuda.synchronize if gpu else (lambda: None)
                    row.ref_stream_ms = stream_seconds_per_call(fn, sync, STREAM_CALLS, max(3, repeats // 4)) * 1e3
                    row.stream_ratio = row.stream_ms / row.ref_stream_ms
            except Exception as exc:  # noqa: BLE001
                row.note += f" torch failed: {type(exc).__name__}: {str(exc)[:120]}"
        if numpy_baseline and row.pass_ == "forward" and math.isfinite(row.ms):
            row.numpy_ms = time_host(lambda: libraries.numpy_im2col_forward(g, host["x"], host["w"]),
                                     max(3, repeats // 4), statistic)
    for row in rows:
        if row.pass_ in outputs:
            on_gpu = tt if tt is not None and gpu else None
            ref = libraries.float64_reference(g, row.pass_, host, torch if on_gpu else None, on_gpu)
            row.error = libraries.rel_error(outputs[row.pass_], ref)
    for buf in device.values():
        buf.release()
    return rows
