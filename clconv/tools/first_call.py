"""The cost of a new geometry (``clconv bench --first-call``): its first call in a fresh process with
an empty cache (render + build + tune) and with the disk cache warm, and the host's cost per call
once everything is cached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyopencl.array as cla
from pyopencl.tools import ImmediateAllocator, MemoryPool

import clconv
from clconv import planner, runtime, settings
from clconv.geometry import ConvGeometry
from clconv.plan import Problem

from .shapes import parse_descriptor, resolve_layers
from .timing import stream_seconds_per_call

DEFAULT_LAYER = "mb4ic64ih28oc64oh28kh3ph1"
TINY_LAYER = "mb1ic8ih8oc8oh8kh3ph1"

_FIRST_CALL_SCRIPT = r"""
import json, sys, time
t_import = time.perf_counter()
import numpy as np, pyopencl.array as cla, clconv
from clconv import builder
q = clconv.default_queue()
x = cla.to_device(q, np.random.default_rng(0).standard_normal(%(x)r).astype(np.float32))
w = cla.to_device(q, np.random.default_rng(1).standard_normal(%(w)r).astype(np.float32))
q.finish()
t_ready = time.perf_counter()
y = clconv.conv%(ndim)dd(x, w, stride=%(stride)r, padding=%(padding)r, dilation=%(dilation)r)
q.finish()
t_first = time.perf_counter()
first = {"source_builds": builder.stats.source_builds, "disk_hits": builder.stats.disk_hits}
clconv.finish_builds()  # an interim plan ran the first call: its chosen kernels, built in the background
y = clconv.conv%(ndim)dd(x, w, stride=%(stride)r, padding=%(padding)r, dilation=%(dilation)r)
q.finish()
t_chosen = time.perf_counter()
print(json.dumps({"setup_s": t_ready - t_import, "first_call_s": t_first - t_ready,
                  "chosen_s": t_chosen - t_ready, **first}))
"""


def first_call_costs(spec: str | None, device: str | None, quiet: bool = False, host: bool = True) -> dict:
    """Cold first call, warm-disk-cache first call in a new process, a new geometry's first call,
    and cached per-call host overhead.

    Each first call runs in a fresh Python process (``clconv.conv1d/2d/3d`` on device arrays, timed from
    after the context and inputs exist to ``queue.finish()``); the cold one gets an empty cache
    directory, so it pays compiling the templates, rendering and building (and tuning, under
    ``CLCONV_TUNE=1``); the warm one reuses that directory (and the bytecode the cold one left, as
    an installed Python package has it); the new geometry (one more image) reuses it too, so its
    templates are compiled and its programs are built from source.
    """
    layer = resolve_layers(spec or DEFAULT_LAYER)[0]
    g = layer.geometry
    if layer.transposed:
        raise SystemExit("clconv bench --first-call: give one convolution descriptor (not a transposed one)")
    params = {"x": g.input_shape, "w": g.weight_shape, **call_options(g)}
    # a new geometry for a user who has run clconv before: one more image, so new programs (the
    # geometry is baked into them) from templates the cold run compiled
    other = {**params, "x": (g.input_shape[0] + 1, *g.input_shape[1:])}
    scripts = {"cold": _FIRST_CALL_SCRIPT % params, "warm_disk_cache": _FIRST_CALL_SCRIPT % params,
               "new_geometry": _FIRST_CALL_SCRIPT % other}
    result: dict = {"layer": g.tag()}
    with tempfile.TemporaryDirectory(prefix="clconv-firstcall-") as cache:
        env = dict(os.environ, CLCONV_CACHE_DIR=cache)  # CLCONV_TUNE as the caller has it (default: off)
        env.pop("CLCONV_NO_CACHE", None)
        # Python's bytecode cache is part of a warm disk cache, as in any installation: without it
        # (PYTHONDONTWRITEBYTECODE, set in some sandboxes) every process compiles the modules a
        # first call imports (pyopencl's invoker, the compiled templates) from source: 30 of 46 ms
        # of a warm first call on the H200's host
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if device:
            env["CLCONV_DEVICE"] = device
        for name, script in scripts.items():
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"clconv bench --first-call: the {name} process failed:\n{done.stderr[-3000:]}")
            result[name] = json.loads(done.stdout.strip().splitlines()[-1])
            result[name]["process_s"] = time.perf_counter() - t0
    if not host:  # the first calls only (tests)
        return result
    result["host_overhead"] = host_overhead(g)
    if not quiet:
        c, w, h = result["cold"], result["warm_disk_cache"], result["host_overhead"]
        print(f"first call of {g.tag()} on the default device:")
        print(f"  cold (empty cache, render + build{' + tune' if settings.tuning_enabled() else ''}): {c['first_call_s'] * 1e3:9.1f} ms "
              f"({c['source_builds']} programs built from source)")
        print(f"  new process, warm disk cache:              {w['first_call_s'] * 1e3:9.1f} ms "
              f"({w['disk_hits']} programs from disk, {w['source_builds']} built); process start + import + "
              f"context: {w['setup_s'] * 1e3:.0f} ms")
        n = result["new_geometry"]
        print(f"  a new geometry (one more image), templates compiled: {n['first_call_s'] * 1e3:9.1f} ms "
              f"({n['source_builds']} programs built from source by then); its chosen kernels ran "
              f"{n['chosen_s'] * 1e3:.1f} ms after the call began (an interim plan ran it where they differ)")
        print(f"  cached call, host time per call in a stream of calls on {h['tiny_layer']} (kernel "
              f"{h['tiny_kernel_us']:.1f} us): {h['tiny_us']:.1f} us with out=, {h['tiny_alloc_us']:.1f} us "
              f"allocating the result, {h['tiny_pool_us']:.1f} us from a pyopencl MemoryPool")
        print(f"    of which launching its kernels (the runner alone: argument setting and the driver's enqueue): "
              f"{h['tiny_launch_us']:.1f} us; the op's own checks and lookups: {h['tiny_op_us']:.1f} us")
        print(f"  cached call of this layer with finish() after each: wall {h['wall_us']:.1f} us vs kernel "
              f"{h['kernel_us']:.1f} us (overhead incl. synchronisation {h['overhead_us']:.1f} us)")
    return result


def call_options(g: ConvGeometry) -> dict:
    """The public op's arguments for ``g``: ``ndim`` (which of conv1d/2d/3d), stride, padding (as
    (begin, end) pairs), dilation."""
    nd = g.ndim
    return {"ndim": nd, "stride": g.stride[-nd:], "padding": tuple(zip(g.pad_begin[-nd:], g.pad_end[-nd:])),
            "dilation": g.dilation[-nd:]}


def host_overhead(g: ConvGeometry, calls: int = 2000, repeats: int = 3) -> dict:
    """Host cost of a cached ``clconv.conv2d`` call on device arrays (``g``'s own op for its own row).

    On a tiny layer whose kernel takes a few microseconds (the device keeps up, so the wall time per
    call of a stream of calls is the host's), the best of ``repeats`` streams of ``calls`` calls:
    ``tiny_us`` with ``out=`` given (argument checks, plan lookup, argument setting, the driver's
    enqueue), ``tiny_alloc_us`` allocating the result instead, ``tiny_pool_us`` allocating results
    from the input's pyopencl MemoryPool; ``tiny_launch_us``, a stream of the same runner's
    ``run()`` alone (argument setting and the driver's enqueue), and ``tiny_op_us`` = ``tiny_us -
    tiny_launch_us``, what the op adds to launching its kernels.  For ``g`` itself: wall time per
    call with a ``finish()`` after each, against its kernel time from profiling events."""
    queue = clconv.default_queue()
    rng = np.random.default_rng(0)

    def setup(geometry: ConvGeometry):
        x = cla.to_device(queue, rng.standard_normal(geometry.input_shape).astype(np.float32))
        w = cla.to_device(queue, rng.standard_normal(geometry.weight_shape).astype(np.float32))
        y = cla.empty(queue, geometry.output_shape, np.float32)
        kwargs = call_options(geometry)
        op = getattr(clconv, f"conv{kwargs.pop('ndim')}d")
        for _ in range(5):
            op(x, w, **kwargs, out=y)
        queue.finish()
        return x, w, y, kwargs

    def per_call_us(call) -> float:
        return stream_seconds_per_call(call, queue.finish, calls, repeats) * 1e6

    tiny = parse_descriptor(TINY_LAYER).geometry
    x, w, y, kwargs = setup(tiny)
    figures = {"tiny_us": per_call_us(lambda: clconv.conv2d(x, w, **kwargs, out=y)),
               "tiny_alloc_us": per_call_us(lambda: clconv.conv2d(x, w, **kwargs))}
    # results from a pyopencl MemoryPool: the input's allocator is the result's
    pooled = cla.to_device(queue, x.get(), allocator=MemoryPool(ImmediateAllocator(queue)))
    figures["tiny_pool_us"] = per_call_us(lambda: clconv.conv2d(pooled, w, **kwargs))
    tiny_problem = Problem(tiny, "forward", "float32")
    tiny_runner = planner.plan(tiny_problem, queue)  # the runner those calls use
    operands = runtime.random_operands(tiny_problem, queue)
    figures["tiny_launch_us"] = per_call_us(lambda: tiny_runner.run(queue, operands))
    figures["tiny_op_us"] = figures["tiny_us"] - figures["tiny_launch_us"]
    tiny_kernel = runtime.time_runner(tiny_runner, queue, operands, 20)

    x, w, y, kwargs = setup(g)
    op = getattr(clconv, f"conv{g.ndim}d")
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        op(x, w, **kwargs, out=y)
        queue.finish()
    wall = (time.perf_counter() - t0) / n
    problem = Problem(g, "forward", "float32")
    runner = planner.plan(problem, queue)
    kernel = runtime.time_runner(runner, queue, runtime.random_operands(problem, queue), 20)
    return {"tiny_layer": tiny.tag(), **figures, "tiny_kernel_us": tiny_kernel * 1e6,
            "wall_us": wall * 1e6, "kernel_us": kernel * 1e6, "overhead_us": (wall - kernel) * 1e6,
            "algorithm": runner.algorithm}
