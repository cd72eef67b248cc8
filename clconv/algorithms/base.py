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

from ..plan import Arg, KernelCall, KernelSource, Plan, Problem


class Declined(ValueError):
    """An algorithm cannot serve a problem."""


class Algorithm:
    """Base class: subclasses set ``name``, ``passes`` and implement ``plan`` (and, where they
    serve only some geometries or have tile choices, ``decline_reason`` and ``configs``)."""

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
        """Tile configurations worth trying on ``device``, best guess first."""
        return [{}]

    def plan(self, problem: Problem, config: Mapping[str, Any], device: cl.Device) -> Plan:
        """The kernel calls and workspaces that run ``problem`` with ``config``."""
        raise NotImplementedError


def source(template: str, problem: Problem, index: str | None = None, **params: Any) -> KernelSource:
    """A rendering of ``template`` with the parameters every template takes (geometry, storage
    type, index type) and ``params``."""
    return KernelSource(template, dict(geom=problem.geometry, real=problem.real,
                                       index=index or problem.index_type(), **params))


def call(source_: KernelSource, entry: str, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
         *args: Arg | np.generic) -> KernelCall:
    return KernelCall(source_, entry, tuple(global_size), None if local_size is None else tuple(local_size), args)


def pass_args(problem: Problem, bias_fallback: str | None = None) -> tuple[Arg, ...]:
    """The tensor arguments of a kernel that takes its pass's operands in the table's order, the
    bias (where the pass takes one; ``bias_fallback`` when absent), then the result."""
    spec = problem.spec
    args = [Arg(role) for role in spec.inputs]
    if spec.takes_bias:
        args.append(Arg("bias", fallback=bias_fallback or spec.inputs[-1]))
    args.append(Arg(spec.result))
    return tuple(args)
