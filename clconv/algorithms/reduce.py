"""The reductions other plans end with (kernels/reduce.mako): the fixed-order sum of split
partials, and the bias gradient (not an algorithm of a pass: convolution_backward's third result)."""

from __future__ import annotations

import math

import pyopencl as cl

from .. import limits
from ..limits import pow2_at_most
from ..plan import Arg, KernelCall, Plan, Problem, rounded
from .base import call, epilogue_args, source


def splitk_sum(problem: Problem, index: str, splits: int, elements: int, result: str | None = None) -> KernelCall:
    """result[e] = sum over s of partial[s][e], s in order (deterministic): the second kernel of
    every plan that cuts a contraction into ``splits`` pieces (workspace ``partial``)."""
    src = source("reduce.mako", problem, index, writes_result=False, splits=splits, elements=elements)
    return call(src, "clc_splitk_sum", (rounded(elements, 64),), None,
                Arg("partial", with_offset=False), Arg(result or problem.spec.result))


def result_elements(problem: Problem) -> int:
    """Elements of the pass's result (y, dx or dw): also those of each split-K piece's partials."""
    return math.prod(problem.spec.result_shape(problem.geometry))


def splitk_result(problem: Problem, index: str, splits: int) -> KernelCall:
    """The pass's result (in the problem's layout) = the epilogue of the sum over s of
    partial[s][e], s in order (deterministic): the second kernel of a forward or data gradient
    whose contraction is cut into ``splits`` pieces."""
    shape = problem.spec.result_shape(problem.geometry)  # (N, C, *spatial)
    elements = math.prod(shape)
    src = source("reduce.mako", problem, index, splits=splits, elements=elements, channels=shape[1],
                 pixels=math.prod(shape[2:]))
    return call(src, "clc_splitk_result", (rounded(elements, 64),), None,
                Arg("partial", with_offset=False), *epilogue_args(problem), Arg(problem.spec.result))


def bias_gradient_plan(problem: Problem, device: cl.Device) -> Plan:
    """db[c] = sum of dy over batch and space: ``problem.geometry`` is a geometry whose *output* dy
    is (ops passes a 1x1 identity geometry), one work-group per channel with a tree reduction."""
    wg = pow2_at_most(min(limits.of(device).work_group, 256))
    g = problem.geometry
    src = source("reduce.mako", problem, writes_result=False, wg=wg)
    return Plan(problem, "bias_grad", {"wg": wg},
                (call(src, "clc_bias_grad", (wg, g.out_channels), (wg, 1), Arg("dy"), Arg("db")),))
