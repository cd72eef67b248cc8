"""What an algorithm is: a named way to run one pass of the canonical convolution.

The planner hands an algorithm a :class:`~clconv.plan.Problem` (geometry, pass, dtype, bias); the
algorithm either declines it with a reason, or lists tile configurations it could run with and,
for one of them, makes a :class:`~clconv.plan.Plan`: data only.  It renders, builds and launches
nothing itself (templates, builder and runtime do, for every algorithm alike).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pyopencl as cl

from ..epilogue import IDENTITY
from ..plan import CHANNELS_FIRST, Arg, KernelCall, KernelSource, Plan, Problem


class Declined(ValueError):
    """An algorithm cannot serve a problem."""


class Algorithm:
    """Base class: subclasses set ``name``, ``passes`` and implement ``plan`` (and, where they
    serve only some geometries or have tile choices, ``decline_reason`` and ``configs``)."""

    name: str = ""
    passes: tuple[str, ...] = ()
    layouts: tuple[str, ...] = (CHANNELS_FIRST,)  # the activation layouts its kernels read and write
    description: str = ""
    deterministic: bool = True

    def decline_reason(self, problem: Problem, device: cl.Device) -> str | None:
        """None if this algorithm serves ``problem`` on ``device``, else why not."""
        if problem.pass_ not in self.passes:
            return f"it has no {problem.pass_} kernel (it serves {', '.join(self.passes)})"
        if problem.layout not in self.layouts:
            return f"its kernels read {', '.join(self.layouts)} activations only, not {problem.layout}"
        return None

    def configs(self, problem: Problem, device: cl.Device) -> list[dict]:
        """Tile configurations worth trying on ``device``, best guess first."""
        return [{}]

    def plan(self, problem: Problem, config: Mapping[str, Any], device: cl.Device) -> Plan:
        """The kernel calls and workspaces that run ``problem`` with ``config``."""
        raise NotImplementedError


def source(template: str, problem: Problem, index: str | None = None, **params: Any) -> KernelSource:
    """A rendering of ``template`` with the parameters every template takes (geometry, arithmetic
    and storage types, index type, the epilogue and bias of the kernels that write the result) and
    ``params``.  A program that writes no result passes ``writes_result=False``: its source then
    carries the identity epilogue and no bias, and is shared by every epilogue of the geometry."""
    writes_result = params.pop("writes_result", True)
    base = dict(geom=problem.geometry, real=problem.real, data=problem.dtype, layout=problem.layout,
                index=index or problem.index_type(),
                epilogue=problem.epilogue if writes_result else IDENTITY, bias=problem.bias and writes_result)
    base.update(params)
    return KernelSource(template, base)


def call(source_: KernelSource, entry: str, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
         *args: Arg | np.generic) -> KernelCall:
    """A launch of ``entry`` of ``source_`` with ``args``, less the epilogue arguments (Arg.epilogue)
    its program takes none of: a bias where the source renders none, a residual where its epilogue
    adds none (prelude.mako's epilogue_params)."""
    kept = tuple(arg for arg in args if not (isinstance(arg, Arg) and arg.epilogue and not takes(source_, arg.epilogue)))
    return KernelCall(source_, entry, tuple(global_size), None if local_size is None else tuple(local_size), kept)


def takes(source_: KernelSource, part: str) -> bool:
    """Whether the kernels of ``source_`` that store the result take the epilogue's ``part``
    ("bias" or "residual") as an argument: as the source's bias flag and epilogue say."""
    if part == "bias":
        return bool(source_.params.get("bias"))
    if part == "residual":
        epilogue = source_.params.get("epilogue")
        return bool(epilogue is not None and epilogue.residual)
    raise ValueError(f"an epilogue argument is 'bias' or 'residual', not {part!r}")


def pass_args(problem: Problem, bias_fallback: str | None = None) -> tuple[Arg, ...]:
    """The tensor arguments of a kernel that takes its pass's operands in the table's order, the
    bias and the residual (where the pass takes them), then the result."""
    spec = problem.spec
    args = [Arg(role) for role in spec.inputs]
    if spec.takes_bias:
        args += epilogue_args(problem, bias_fallback)
    args.append(Arg(spec.result))
    return tuple(args)


def epilogue_args(problem: Problem, fallback: str | None = None) -> tuple[Arg, Arg]:
    """The bias and residual arguments of a kernel that writes the result (clc_store_result's),
    marked as the epilogue's: ``call`` drops each where the kernel's program reads none.  One the
    kernel takes but the call has no operand for is passed as ``fallback`` (a valid pointer, never
    read)."""
    fallback = fallback or problem.spec.inputs[-1]
    return Arg("bias", fallback=fallback, epilogue="bias"), Arg("residual", fallback=fallback, epilogue="residual")
