"""What the planner works with, as plain data: a :class:`Problem` to solve and the :class:`Plan` an
algorithm makes for it.

A plan says everything needed to run a pass and nothing about how: which template to render with
which parameters (:class:`KernelSource`), which entry points to launch in order with which sizes
and arguments (:class:`KernelCall`, arguments by role: :class:`Arg`), and which workspaces to
allocate.  templates.render_plan turns it into sources, builder into kernels, runtime runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Union

import numpy as np

from .dtypes import STORAGE, STORAGE_DTYPES
from .epilogue import IDENTITY, Epilogue
from .geometry import ConvGeometry
from .passes import PASS_TABLE, Pass



CHANNELS_FIRST, CHANNELS_LAST = "channels_first", "channels_last"
LAYOUTS = (CHANNELS_FIRST, CHANNELS_LAST)


def check_layout(layout: object) -> str:
    """``layout`` if it names a layout of the activations; a ValueError naming the argument otherwise."""
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return layout


@dataclass(frozen=True)
class Problem:
    """One pass of one geometry in one storage dtype; ``bias`` adds a per-channel bias to the
    result, and ``epilogue`` says what else the kernel writing it does (passes that take a bias)."""

    geometry: ConvGeometry
    pass_: str
    dtype: str  # one of STORAGE_DTYPES
    bias: bool = False
    epilogue: Epilogue = IDENTITY
    layout: str = CHANNELS_FIRST  # how the activations (x, dx, y, dy, residual) are laid out; weights never change
    _hash: int = field(init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        return self._hash  # hashed once: every cache key of a call holds it

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.geometry, self.pass_, self.dtype, self.bias, self.epilogue, self.layout)))
        if self.pass_ not in PASS_TABLE:
            raise ValueError(f"pass_ must be one of {tuple(PASS_TABLE)}, got {self.pass_!r}")
        if self.dtype not in STORAGE_DTYPES:
            raise ValueError(f"dtype must be one of {STORAGE_DTYPES}, got {self.dtype!r}")
        if self.bias and not PASS_TABLE[self.pass_].takes_bias:
            raise ValueError(f"the {self.pass_} pass takes no bias")
        check_layout(self.layout)
        if not self.epilogue.is_identity and not PASS_TABLE[self.pass_].takes_bias:
            raise ValueError(f"the {self.pass_} pass takes no epilogue")

    @property
    def spec(self) -> Pass:
        return PASS_TABLE[self.pass_]

    @property
    def real(self) -> str:
        """The OpenCL C arithmetic type: what kernels sum in, and what workspaces hold."""
        return STORAGE[self.dtype].real

    @property
    def stored_as_real(self) -> bool:
        """Whether the call's tensors are stored as the arithmetic type (float32 or float64, not
        float16 or bfloat16): kernels may then load and store them as aligned ``real`` vectors."""
        return STORAGE[self.dtype].c_type == self.real

    @property
    def itemsize(self) -> int:
        """Bytes of one arithmetic element (``real``): workspaces and local-memory tiles."""
        return 8 if self.real == "double" else 4

    @property
    def storage_itemsize(self) -> int:
        """Bytes of one element of the call's tensors."""
        return STORAGE[self.dtype].itemsize

    def index_type(self, *extra_elements: int) -> str:
        """``long`` if an index into any tensor (or an ``extra_elements`` workspace) can pass 2^31."""
        return "long" if self.geometry.needs_int64(*extra_elements) else "int"

    def key(self) -> str:
        """The problem's name in the tuning database."""
        key = f"{self.pass_}:{self.geometry.tag()}:{self.dtype}:{'bias' if self.bias else 'nobias'}"
        if not self.epilogue.is_identity:
            key += f":{self.epilogue.tag()}"
        return key + ":nhwc" if self.layout == CHANNELS_LAST else key


@dataclass(frozen=True)
class Arg:
    """A tensor kernel argument: the operand or workspace ``role``.

    ``with_offset`` adds the element offset as a following ``long`` argument; ``fallback`` names
    the operand to pass instead when ``role`` is absent (an unused bias pointer must still be valid);
    ``align``: the kernel reads the tensor in aligned vectors, so its element offset must be a
    multiple of it (a workspace's always is: it starts a buffer of its own); ``epilogue``: "bias" or
    "residual" for the epilogue's arguments, which a kernel whose program's epilogue reads no such
    tensor does not take (prelude.mako's epilogue_params; ``algorithms.base.call`` drops them).
    """

    role: str
    with_offset: bool = True
    fallback: str | None = None
    align: int = 1
    epilogue: str = ""


KernelArg = Union[Arg, np.generic]  # a tensor, or a literal scalar of a fixed OpenCL width


@dataclass(frozen=True, eq=False)
class KernelSource:
    """One rendering of a template: the calls that name equal sources share one program."""

    template: str
    params: Mapping[str, Any]

    def same_as(self, other: "KernelSource") -> bool:
        return self is other or (self.template == other.template and dict(self.params) == dict(other.params))


@dataclass(frozen=True)
class KernelCall:
    """One launch of entry point ``entry`` of ``source``."""

    source: KernelSource
    entry: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: tuple[KernelArg, ...]

    def __post_init__(self) -> None:
        for item in self.args:  # a Python int has no OpenCL width: an internal misuse, not a user error
            if not isinstance(item, (Arg, np.generic)):
                raise TypeError(f"{self.entry}: a literal kernel argument must be a numpy scalar, got {item!r}")


# Workspaces whose buffers must hold zeros when allocated: counters that the kernels using them
# leave at zero again (split-K's ``tickets``: gemm.mako's FINISH), so a kept buffer is zeroed once.
ZEROED_WORKSPACES = frozenset({"tickets"})


@dataclass(frozen=True)
class Plan:
    """What ``algorithm`` with ``config`` runs for ``problem``: calls in order, and the bytes of
    each named workspace they use (each workspace role starts at offset 0)."""

    problem: Problem
    algorithm: str
    config: Mapping[str, Any]
    calls: tuple[KernelCall, ...]
    workspaces: Mapping[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.algorithm} {self.problem.pass_} of {self.problem.geometry.tag()} ({self.problem.dtype})"

    @property
    def workspace_bytes(self) -> int:
        return sum(self.workspaces.values())


def rounded(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (global sizes)."""
    return -(-n // multiple) * multiple
