"""What an algorithm is: a named way to run one pass of the canonical convolution.

The planner hands an algorithm a :class:`Problem` (geometry, pass, dtype, bias); the algorithm
either declines it with a reason, or lists tile configurations it could run with and, for one of
them, prepares a :class:`Runner`: rendered, built (through the program cache) and ready to launch.
"""

from __future__ import annotations

import os
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
    """One kernel launch: sizes, and arguments as :class:`Arg` items or literal scalars."""

    kernel: cl.Kernel | None  # None when only rendered
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: tuple

    def resolve_args(self, operands: dict[str, Operand], spaces: dict[str, cl.Buffer]) -> list:
        out: list = []
        for item in self.args:
            if not isinstance(item, Arg):
                out.append(item)
                continue
            operand: Operand | None
            if item.name in spaces:
                operand = Operand(spaces[item.name], 0)
            else:
                operand = operands.get(item.name)
                if operand is None and item.fallback is not None:
                    operand = operands[item.fallback]
                if operand is None:
                    raise KeyError(f"launch needs operand {item.name!r}")
            out.append(operand.buffer)
            if item.with_offset:
                out.append(np.int64(operand.offset))
        return out


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
        """Enqueue every launch; return their events, in order.  Workspaces are released when the
        buffers' last reference goes (OpenCL keeps them alive until the kernels finish).  A failed
        allocation or enqueue raises :class:`LaunchError` naming the kernel and the geometry."""
        spaces = {}
        for name, size in self.workspaces.items():
            try:
                spaces[name] = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, max(size, 1))
            except cl.Error as exc:
                raise self._fail(f"could not allocate its {size}-byte workspace {name!r}", None, exc) from exc
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
