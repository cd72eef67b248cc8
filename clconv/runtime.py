"""Launching: a :class:`Runner` is a plan with its kernels built, ready to enqueue on any queue of
its context; workspaces come from buffers kept per in-order queue.  Also the measuring tools the
tuner and the benchmarks share (:func:`time_runner`, :func:`random_operands`)."""

from __future__ import annotations

import math
import statistics
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pyopencl as cl

from .caches import Cache
from .dtypes import numpy_dtype
from .plan import ZEROED_WORKSPACES, Arg, KernelCall, Plan, Problem


@dataclass
class Operand:
    """A device buffer and the element offset at which the tensor starts."""

    buffer: Any
    offset: int = 0


class LaunchError(RuntimeError):
    """A prepared kernel cannot run on the device (work-group or local memory beyond its limits,
    a workspace it cannot allocate, an enqueue the driver refuses); the message names the kernel,
    the algorithm, the pass and the geometry."""


class Launch:
    """One built call: its kernel, sizes, and the argument list laid out once, so that a launch
    only fills in the operands' buffers and offsets (host overhead of a cached call)."""

    def __init__(self, call: KernelCall, kernel: cl.Kernel):
        self.call = call
        self.kernel = kernel
        self.global_size = call.global_size
        self.local_size = call.local_size
        self._template: list = []  # literal scalars in place, a placeholder for each buffer and offset
        self._slots: list[tuple[int, Arg]] = []  # (index of the buffer in _template, its Arg)
        arg_types: list = []  # for Kernel.set_scalar_arg_dtypes: None for a buffer
        for item in call.args:
            if isinstance(item, Arg):
                self._slots.append((len(self._template), item))
                self._template.append(None)
                arg_types.append(None)
                if item.with_offset:
                    self._template.append(0)
                    arg_types.append(np.int64)
            else:
                self._template.append(item)
                arg_types.append(item.dtype)
        _declare_arg_types(kernel, tuple(arg_types))

    def resolve_args(self, operands: dict[str, Operand], spaces: dict[str, cl.Buffer]) -> list:
        """The kernel's argument list for these operands and workspaces (offsets as Python ints:
        the kernel's declared argument types pack them)."""
        out = self._template.copy()
        for index, item in self._slots:
            space = spaces.get(item.role) if spaces else None
            if space is not None:
                out[index] = space
                continue  # a workspace starts at offset 0, the template's value
            operand = operands.get(item.role)
            if operand is None and item.fallback is not None:
                fallback = spaces.get(item.fallback) if spaces else None
                if fallback is not None:  # an unused pointer: any valid buffer does
                    out[index] = fallback
                    continue
                operand = operands[item.fallback]
            if operand is None:
                raise KeyError(f"{self.call.entry} needs operand {item.role!r}")
            out[index] = operand.buffer
            if item.with_offset:
                out[index + 1] = operand.offset
        return out


def _declare_arg_types(kernel: cl.Kernel, arg_types: tuple) -> None:
    """Give ``kernel`` its scalar argument types, so that pyopencl packs scalars straight from Python
    ints: untyped, each numpy scalar argument costs ~7 us per launch on PoCL.  A kernel object is
    shared by every launch of its program (builder), and they must all agree on its signature."""
    # noted on the kernel object itself (as pyopencl notes its work-group info)
    declared = getattr(kernel, "_clconv_arg_types", None)
    if declared is None:
        _give_invoker(kernel, arg_types)
        kernel._clconv_arg_types = arg_types  # type: ignore[attr-defined]
    elif declared != arg_types:
        raise RuntimeError(f"kernel {kernel.function_name} is launched with argument types {arg_types}, but "
                           f"another launch of it declared {declared}")


def _give_invoker(kernel: cl.Kernel, arg_types: tuple) -> None:
    """Declare ``arg_types`` on ``kernel`` through an invoker shared by every kernel object of the
    same signature in this process.

    ``set_scalar_arg_dtypes`` makes pyopencl fetch the generated Python invoker (the function that
    packs the arguments and enqueues) from its on-disk cache for every kernel object: no in-memory
    layer, 0.9-1.4 ms a kernel on the sandbox's host, about half of a warm first call on the H200
    (docs/performance.md).  The invoker's code depends only on the argument count and types (the
    kernel's name appears in a complex-argument warning alone, and clconv passes no complex
    scalars), so one generated per signature serves all kernels with it.  That needs pyopencl's
    private ``Kernel._set_enqueue_and_set_args`` and its invoker generator: where either is missing
    (another pyopencl), or a complex scalar is declared, the public path runs instead."""
    setter = getattr(kernel, "_set_enqueue_and_set_args", None)
    if setter is None or _generate_invoker is None or any(
            t is not None and np.dtype(t).kind == "c" for t in arg_types):
        kernel.set_scalar_arg_dtypes(arg_types)
        return
    num_args = kernel.num_args
    key = (num_args, arg_types)
    invoker = _invokers.get(key)
    if invoker is None:
        # the arguments pyopencl's own path passes, less the name; no arg-count workaround: that
        # concerns complex scalars only
        module, enqueue_name = _generate_invoker("clconv_kernel", len(arg_types), num_args, arg_types,
                                                 __debug__, False, False)
        invoker = _invokers.put(key, (module.mod_globals[enqueue_name], module.mod_globals["set_args"]))
    setter(*invoker)


_generate_invoker: Callable | None
try:  # pyopencl's invoker generator (private: see _give_invoker)
    from pyopencl.invoker import _generate_enqueue_and_set_args_module as _generate_invoker
except ImportError:  # pragma: no cover - another pyopencl
    _generate_invoker = None
_invokers: Cache[tuple[Callable, Callable]] = Cache("invokers", maxsize=256)


class Runner:
    """A plan whose kernels are built: check it fits the device, then run it on any queue of its context."""

    def __init__(self, plan: Plan, kernels: Sequence[cl.Kernel]):
        self.plan = plan
        self.algorithm = plan.algorithm
        self.config = dict(plan.config)
        self.label = plan.label
        self.workspaces = dict(plan.workspaces)
        self.launches = [Launch(call, kernel) for call, kernel in zip(plan.calls, kernels)]
        self.key: tuple = ()  # the planner's cache key, once it keeps this runner
        # operands its kernels read in aligned vectors: role -> the element multiple their offset must be
        self.aligned = {item.role: item.align for call in plan.calls for item in call.args
                        if isinstance(item, Arg) and item.align > 1 and item.role not in self.workspaces}
        # the same plan with scalar loads, for operands that start elsewhere (planner.prepare sets it)
        self.unaligned: Callable[[cl.CommandQueue], Runner] | None = None

    @property
    def workspace_bytes(self) -> int:
        return self.plan.workspace_bytes

    def _fail(self, what: str, launch: Launch | None, exc: Exception | None = None) -> LaunchError:
        name = launch.call.entry if launch is not None else "-"
        sizes = f", global {launch.global_size}, local {launch.local_size}" if launch is not None else ""
        cause = f": {exc}" if exc is not None else ""
        return LaunchError(f"kernel {name} of {self.label} (config {self.config}{sizes}) {what}{cause}")

    def check_resources(self, device: cl.Device) -> None:
        """Raise :class:`LaunchError` if a launch needs a larger work-group or more local memory
        than ``device`` (or the compiled kernel) allows: caught before the launch, not by it."""
        for launch in self.launches:
            if launch.local_size is None:
                continue
            threads = 1
            for extent in launch.local_size:
                threads *= extent
            kernel_limit = launch.kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
            limit = min(kernel_limit, device.max_work_group_size)
            if threads > limit:
                raise self._fail(f"needs a work-group of {threads} work-items, more than {device.name!r} "
                                 f"allows for it ({limit})", launch)
            local = launch.kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, device)
            if local > device.local_mem_size:
                raise self._fail(f"needs {local} bytes of local memory, more than {device.name!r} has "
                                 f"({device.local_mem_size})", launch)

    def run(self, queue: cl.CommandQueue, operands: dict[str, Operand], wait_for=None) -> list[cl.Event]:
        """Enqueue every launch; return their events, in order.  A failed allocation or enqueue
        raises :class:`LaunchError` naming the kernel and the geometry.

        Workspaces come from the queue's kept buffers (:class:`Workspaces`) on an in-order queue;
        on an out-of-order queue they are allocated per call and released when the buffers' last
        reference goes (OpenCL keeps them alive until the kernels finish).

        An operand that one of its kernels reads in aligned vectors but that starts off that
        alignment (a view into a larger buffer) runs the plan's scalar-load twin instead."""
        if self.aligned and self.misaligned(operands):
            if self.unaligned is None:
                raise self._fail(f"reads {sorted(self.aligned)} in vectors; offsets {self.aligned} "
                                 "elements apart are needed and no scalar twin was given", None)
            return self.unaligned(queue).run(queue, operands, wait_for)
        if not self.workspaces:
            return self._enqueue(queue, operands, {}, wait_for, chain=not in_order(queue))
        kept = Workspaces.of(queue)
        if kept is None:  # an out-of-order queue
            return self._enqueue(queue, operands, self._allocate(queue, {}), wait_for, chain=True)
        # held from the first launch to the last: another thread's call on this queue must not
        # enqueue its own use of the workspace buffers between this call's kernels
        with kept.lock:
            return self._enqueue(queue, operands, self._allocate(queue, kept.buffers), wait_for, chain=False)

    def misaligned(self, operands: dict[str, Operand]) -> bool:
        """Whether an operand read in vectors starts off its alignment (a plain loop: it runs on
        every call, and any() over a generator cost twice its time)."""
        for role, align in self.aligned.items():
            operand = operands.get(role)
            if operand is not None and operand.offset % align:
                return True
        return False

    def _allocate(self, queue: cl.CommandQueue, reuse: dict[str, cl.Buffer]) -> dict[str, cl.Buffer]:
        """A buffer per workspace: the one in ``reuse`` if it is large enough, else a new one
        (which replaces it in ``reuse``); a counter workspace (ZEROED_WORKSPACES) starts as zeros."""
        spaces = {}
        for name, size in self.workspaces.items():
            buffer = reuse.get(name)
            if buffer is None or buffer.size < size:
                try:
                    if name in ZEROED_WORKSPACES:
                        zeros = np.zeros(max(size, 1), np.uint8)
                        buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                           hostbuf=zeros)
                    else:
                        buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, max(size, 1))
                except cl.Error as exc:
                    raise self._fail(f"could not allocate its {size}-byte workspace {name!r}", None, exc) from exc
                reuse[name] = buffer
            spaces[name] = buffer
        return spaces

    def _enqueue(self, queue: cl.CommandQueue, operands: dict[str, Operand], spaces: dict[str, cl.Buffer],
                 wait_for, chain: bool) -> list[cl.Event]:
        """Enqueue the launches, the first after ``wait_for``; ``chain``: each later one waits for
        the one before (an out-of-order queue; an in-order queue orders them itself)."""
        events = []
        for launch in self.launches:
            args = launch.resolve_args(operands, spaces)
            try:
                event = launch.kernel(queue, launch.global_size, launch.local_size, *args, wait_for=wait_for)
            except cl.Error as exc:
                raise self._fail("failed to launch", launch, exc) from exc
            wait_for = [event] if chain else None
            events.append(event)
        return events


def in_order(queue: cl.CommandQueue) -> bool:
    """Whether ``queue`` runs its commands one after another: what makes reusing a buffer between
    calls on it safe (kept workspaces, pooled results) and waiting for its own events needless.
    A queue's properties never change: asked of the driver once per queue."""
    ordered = _orders.get(queue)
    if ordered is None:
        ordered = _orders.put(queue, not queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return ordered


_orders: Cache[bool] = Cache("queue_orders", maxsize=16)


class Workspaces:
    """Workspace buffers kept per in-order queue and reused by every call on it, each grown to the
    largest size asked of it: allocating them per call cost a driver allocation per workspace
    (~10-30 us of host time on the NVIDIA driver) and fresh pages for the kernels to fault in.

    Reuse is safe because an in-order queue runs one call's kernels after the previous call's,
    and :meth:`Runner.run` holds ``lock`` while it enqueues a call.  A queue's buffers live as long
    as it is one of the most recently used queues (the cache's key holds the queue) or until
    :func:`release_workspaces`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.buffers: dict[str, cl.Buffer] = {}

    @staticmethod
    def of(queue: cl.CommandQueue) -> "Workspaces | None":
        """The queue's kept buffers; None for an out-of-order queue (its calls could overlap)."""
        kept = _workspaces.get(queue)
        if kept is None:
            if not in_order(queue):
                return None
            kept = _workspaces.setdefault(queue, Workspaces)
        return kept


_workspaces: Cache[Workspaces] = Cache("workspaces", maxsize=4)


def release_workspaces(queue: cl.CommandQueue | None = None) -> None:
    """Drop the kept workspace buffers of ``queue``, or of every queue (OpenCL frees each once its
    kernels are done)."""
    if queue is None:
        _workspaces.clear()
    else:
        _workspaces.pop(queue)


# -- measuring: the tuner's timings and the benchmarks' kernel-event times --------------------------

_profiling_queues: Cache[cl.CommandQueue] = Cache("profiling_queues", maxsize=8)


def profiling_queue(queue: cl.CommandQueue) -> cl.CommandQueue:
    """``queue`` if it records profiling events, else a profiling queue on its context and device."""
    if queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
        return queue
    return _profiling_queues.setdefault(
        (queue.context, queue.device),
        lambda: cl.CommandQueue(queue.context, queue.device, properties=cl.command_queue_properties.PROFILING_ENABLE),
    )


def random_operands(problem: Problem, queue: cl.CommandQueue, seed: int = 0) -> dict[str, Operand]:
    """Fresh standard-normal device tensors for every role of a problem's pass, result included."""
    spec, g = problem.spec, problem.geometry
    rng = np.random.default_rng(seed)
    roles = [*spec.inputs, *(["bias"] if problem.bias else []),
             *(["residual"] if problem.epilogue.residual else []), spec.result]
    dtype = numpy_dtype(problem.dtype)
    out = {}
    for role in roles:
        size = int(np.prod(spec.shape(role, g)))
        host = rng.standard_normal(max(size, 1)).astype(dtype)
        buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
        out[role] = Operand(buffer, 0)
    return out


def time_runner(runner: Runner, queue: cl.CommandQueue, operands: dict[str, Operand], repeats: int,
                statistic: Callable[[list[float]], float] = statistics.median,
                give_up_above: float = math.inf) -> float:
    """``statistic`` (median) of the seconds of one run over ``repeats`` runs: profiling events from
    the first launch's start to the last's end, on ``queue`` if it records them, else on its
    profiling twin (:func:`profiling_queue`; the default queue does not profile).  A run slower than
    ``give_up_above`` seconds ends the measuring there (tuning: a candidate that slow cannot win)."""
    queue = profiling_queue(queue)
    cl.wait_for_events(runner.run(queue, operands))  # warm-up: first-launch costs stay out
    times: list[float] = []
    while len(times) < repeats and not (times and times[-1] > give_up_above):
        events = runner.run(queue, operands)
        cl.wait_for_events(events)
        times.append((events[-1].profile.end - events[0].profile.start) * 1e-9)
    return statistic(times)
