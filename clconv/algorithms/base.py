"""What an algorithm is: a named way to run one pass of the canonical convolution.

The planner hands an algorithm a :class:`Problem` (geometry, pass, dtype, bias); the algorithm
either declines it with a reason, or lists tile configurations it could run with and, for one of
them, prepares a :class:`Runner`: rendered, built (through the program cache) and ready to launch.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyopencl as cl

from ..builder import build_program
from ..geometry import ConvGeometry
from ..templates import render

PASSES = ("forward", "backward_data", "backward_weight")

# The operands of each pass, in launch order, and the result it writes.
PASS_OPERANDS = {
    "forward": (("x", "w", "bias"), "y"),
    "backward_data": (("dy", "w", "bias"), "dx"),
    "backward_weight": (("x", "dy"), "dw"),
}


@dataclass(frozen=True)
class Problem:
    """One pass of one geometry in one dtype; ``bias`` adds a per-channel bias to the result."""

    geometry: ConvGeometry
    pass_: str
    dtype: str  # "float32" | "float64"
    bias: bool = False

    @property
    def real(self) -> str:
        return "double" if self.dtype == "float64" else "float"

    @property
    def itemsize(self) -> int:
        return 8 if self.dtype == "float64" else 4

    def index_type(self, *extra_elements: int) -> str:
        return "long" if self.geometry.needs_int64(*extra_elements) else "int"

    def key(self) -> str:
        return f"{self.pass_}:{self.geometry.tag()}:{self.dtype}:{'bias' if self.bias else 'nobias'}"


@dataclass
class Operand:
    """A device buffer and the element offset at which the tensor starts."""

    buffer: Any
    offset: int = 0


class Declined(ValueError):
    """An algorithm cannot serve a problem."""


class LaunchError(RuntimeError):
    """A prepared kernel cannot run on the device (work-group or local memory beyond its limits,
    a workspace it cannot allocate, an enqueue the driver refuses); the message names the kernel,
    the algorithm, the pass and the geometry."""


def workspace_limit(device: cl.Device) -> int:
    """Bytes of temporary buffers one call may use (``CLCONV_WORKSPACE_LIMIT`` overrides)."""
    raw = os.environ.get("CLCONV_WORKSPACE_LIMIT")
    if raw:
        try:
            return int(float(raw))
        except ValueError:
            raise ValueError(f"CLCONV_WORKSPACE_LIMIT must be a number of bytes, got {raw!r}") from None
    return int(min(device.global_mem_size // 4, device.max_mem_alloc_size, 2**31))


@dataclass(frozen=True)
class Arg:
    """A tensor kernel argument: the operand (or workspace) ``name``.

    ``with_offset`` adds the element offset as a following ``long`` argument; ``fallback`` names
    the operand to pass instead when ``name`` is absent (an unused bias pointer must still be valid).
    """

    name: str
    with_offset: bool = True
    fallback: str | None = None


@dataclass
class Launch:
    """One kernel launch: sizes, and arguments as :class:`Arg` items or literal numpy scalars."""

    kernel: cl.Kernel | None  # None when only rendered
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: tuple

    def __post_init__(self) -> None:
        # The argument list is laid out once, here: a call only fills in the operands' buffers and
        # offsets (host overhead of a cached call).
        self._template: list = []  # literal scalars in place, a placeholder for each buffer and offset
        self._slots: list[tuple[int, Arg]] = []  # (index of the buffer in _template, its Arg)
        arg_types: list = []  # for Kernel.set_scalar_arg_dtypes: None for a buffer
        for item in self.args:
            if isinstance(item, Arg):
                self._slots.append((len(self._template), item))
                self._template.append(None)
                arg_types.append(None)
                if item.with_offset:
                    self._template.append(0)
                    arg_types.append(np.int64)
            elif isinstance(item, np.generic):
                self._template.append(item)
                arg_types.append(item.dtype)
            else:  # a Python int has no OpenCL width: an internal misuse, not a user error
                raise TypeError(f"a literal kernel argument must be a numpy scalar, got {item!r}")
        if self.kernel is not None:
            _declare_arg_types(self.kernel, tuple(arg_types))

    def resolve_args(self, operands: dict[str, Operand], spaces: dict[str, cl.Buffer]) -> list:
        """The kernel's argument list for these operands and workspaces (offsets as Python ints:
        the kernel's declared argument types pack them)."""
        out = self._template.copy()
        for index, item in self._slots:
            space = spaces.get(item.name) if spaces else None
            if space is not None:
                out[index] = space
                continue  # a workspace starts at offset 0, the template's value
            operand = operands.get(item.name)
            if operand is None and item.fallback is not None:
                operand = operands[item.fallback]
            if operand is None:
                raise KeyError(f"launch needs operand {item.name!r}")
            out[index] = operand.buffer
            if item.with_offset:
                out[index + 1] = operand.offset
        return out


def _declare_arg_types(kernel: cl.Kernel, arg_types: tuple) -> None:
    """Give ``kernel`` its scalar argument types, so that pyopencl packs scalars straight from Python
    ints: untyped, each numpy scalar argument costs ~7 us per launch on PoCL (five of them were a
    third of a cached call's host time).  A kernel object is shared by every launch of its program
    (builder.get_kernel), and they must all agree on its signature."""
    # noted on the kernel object itself (as pyopencl notes its work-group info): an id or int_ptr
    # can be reused by a new kernel once this one is freed
    declared = getattr(kernel, "_clconv_arg_types", None)
    if declared is None:
        kernel.set_scalar_arg_dtypes(arg_types)
        kernel._clconv_arg_types = arg_types  # type: ignore[attr-defined]
    elif declared != arg_types:
        raise RuntimeError(f"kernel {kernel.function_name} is launched with argument types {arg_types}, but "
                           f"another launch of it declared {declared}")


@dataclass
class Runner:
    """A prepared plan: workspaces to allocate, then launches in order."""

    algorithm: str
    config: dict
    launches: list[Launch]
    workspaces: dict[str, int] = field(default_factory=dict)  # name -> bytes
    sources: list[tuple[str, str]] = field(default_factory=list)  # (template, rendered source)
    label: str = ""  # "<algorithm> <pass> of <geometry tag>", set by the planner; named in errors

    @property
    def workspace_bytes(self) -> int:
        return sum(self.workspaces.values())

    def _fail(self, what: str, launch: "Launch | None", exc: Exception | None = None) -> "LaunchError":
        name = launch.kernel.function_name if launch is not None and launch.kernel is not None else "-"
        sizes = f", global {launch.global_size}, local {launch.local_size}" if launch is not None else ""
        cause = f": {exc}" if exc is not None else ""
        return LaunchError(f"kernel {name} of {self.label or self.algorithm} (config {self.config}{sizes}) "
                           f"{what}{cause}")

    def check_resources(self, device: cl.Device) -> None:
        """Raise :class:`LaunchError` if a launch needs a larger work-group or more local memory
        than ``device`` (or the compiled kernel) allows: caught before the launch, not by it."""
        for launch in self.launches:
            if launch.kernel is None or launch.local_size is None:
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

        Workspaces come from the queue's scratch buffers (:class:`_Scratch`) on an in-order queue;
        on an out-of-order queue they are allocated per call and released when the buffers' last
        reference goes (OpenCL keeps them alive until the kernels finish)."""
        if not self.workspaces:
            return self._enqueue(queue, operands, {}, wait_for)
        scratch = _Scratch.of(queue)
        if scratch is None:
            return self._enqueue(queue, operands, self._allocate(queue, {}), wait_for)
        # held from the first launch to the last: another thread's call on this queue must not
        # enqueue its own use of the scratch buffers between this call's kernels
        with scratch.lock:
            return self._enqueue(queue, operands, self._allocate(queue, scratch.buffers), wait_for)

    def _allocate(self, queue: cl.CommandQueue, reuse: dict[str, cl.Buffer]) -> dict[str, cl.Buffer]:
        """A buffer per workspace: the one in ``reuse`` if it is large enough, else a new one
        (which replaces it in ``reuse``)."""
        spaces = {}
        for name, size in self.workspaces.items():
            buffer = reuse.get(name)
            if buffer is None or buffer.size < size:
                try:
                    buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, max(size, 1))
                except cl.Error as exc:
                    raise self._fail(f"could not allocate its {size}-byte workspace {name!r}", None, exc) from exc
                reuse[name] = buffer
            spaces[name] = buffer
        return spaces

    def _enqueue(self, queue: cl.CommandQueue, operands: dict[str, Operand], spaces: dict[str, cl.Buffer],
                 wait_for) -> list[cl.Event]:
        events = []
        for launch in self.launches:
            args = launch.resolve_args(operands, spaces)
            if launch.kernel is None:  # an internal misuse, not a user error: never vanish under -O
                raise RuntimeError(f"{self.label}: a render-only runner (prepared with queue=None) cannot run")
            try:
                event = launch.kernel(queue, launch.global_size, launch.local_size, *args, wait_for=wait_for)
            except cl.Error as exc:
                raise self._fail("failed to launch", launch, exc) from exc
            wait_for = [event]  # also right on an out-of-order queue
            events.append(event)
        return events


class _Scratch:
    """Workspace buffers kept per in-order queue and reused by every call on it, each grown to the
    largest size asked of it: allocating them per call cost a driver allocation per workspace
    (~10-30 us of host time on the NVIDIA driver) and fresh pages for the kernels to fault in.

    Reuse is safe because an in-order queue runs one call's kernels after the previous call's,
    and :meth:`Runner.run` holds ``lock`` while it enqueues a call.  A queue's scratch buffers live
    as long as it is one of the ``MAX_QUEUES`` most recently used (the entry holds the queue, so
    its ``int_ptr`` cannot be reused by another queue meanwhile) or until
    :func:`release_workspaces`."""

    MAX_QUEUES = 4
    _by_queue: "OrderedDict[int, _Scratch]" = OrderedDict()
    _table_lock = threading.Lock()

    def __init__(self, queue: cl.CommandQueue):
        self.queue = queue
        self.lock = threading.Lock()
        self.buffers: dict[str, cl.Buffer] = {}

    @classmethod
    def of(cls, queue: cl.CommandQueue) -> "_Scratch | None":
        """The queue's scratch buffers; None for an out-of-order queue (its calls could overlap)."""
        key = queue.int_ptr
        with cls._table_lock:
            scratch = cls._by_queue.get(key)
            if scratch is not None:
                cls._by_queue.move_to_end(key)
                return scratch
            if queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE:
                return None
            scratch = cls._by_queue[key] = cls(queue)
            while len(cls._by_queue) > cls.MAX_QUEUES:
                cls._by_queue.popitem(last=False)  # its buffers go once their kernels are done
            return scratch


def release_workspaces() -> None:
    """Drop every queue's kept workspace buffers (OpenCL frees each once its kernels are done)."""
    with _Scratch._table_lock:
        _Scratch._by_queue.clear()


class Algorithm:
    """Base class: subclasses set ``name``, ``passes`` and implement the three methods."""

    name: str = ""
    passes: tuple[str, ...] = ()
    description: str = ""
    deterministic: bool = True

    def decline_reason(self, problem: Problem, device: cl.Device) -> str | None:
        """None if this algorithm serves ``problem`` on ``device``, else why not."""
        if problem.pass_ not in self.passes:
            return f"it has no {problem.pass_} kernel (it serves {', '.join(self.passes)})"
        return None

    def configs(self, problem: Problem, device: cl.Device) -> list[dict]:
        """Tile configurations worth trying, best guess first."""
        return [{}]

    def prepare(self, problem: Problem, config: dict, queue: cl.CommandQueue | None, device: cl.Device) -> Runner:
        """Render and build the kernels (only render when ``queue`` is None)."""
        raise NotImplementedError


def render_and_build(
    queue: cl.CommandQueue | None, sources: list[tuple[str, str]], template: str, label: str, **params: Any
) -> cl.Program | None:
    """Render ``template``, note the source in ``sources`` and return the (cached) built program.

    With ``queue=None`` only renders (``clconv.render`` shows the source without building it).
    """
    source = render(template, **params)
    sources.append((template, source))
    if queue is None:
        return None
    geometry = params.get("geom")
    where = f" for {geometry.tag()}" if isinstance(geometry, ConvGeometry) else ""
    return build_program(queue, source, options="", label=f"{label} [{template}]{where}")


def rounded(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def dtype_of(problem: Problem) -> np.dtype:
    return np.dtype(problem.dtype)
