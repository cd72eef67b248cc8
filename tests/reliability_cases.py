"""Shared by the reliability tests (issue 5): a compact set of geometries that covers every
algorithm of every pass and the templates' branches, and one way to run any (case, pass, algorithm)
through the *public ops* with any operands and ``out=``.

The same cases feed test_guards.py, test_exact.py and the Oclgrind set, so the kernels one test
builds are memory-cache hits for the next (a PoCL build costs ~0.5-1 s).
"""

from __future__ import annotations

from dataclasses import dataclass

import math

import numpy as np
import pyopencl.array as cl_array

import clconv
from clconv import reference
from clconv.algorithms import REGISTRY
from clconv.passes import PASSES
from clconv.plan import Problem
from clconv.geometry import ConvGeometry, resolve_conv

_CONV = {1: clconv.conv1d, 2: clconv.conv2d, 3: clconv.conv3d}
_CONV_INPUT = {1: clconv.conv1d_input, 2: clconv.conv2d_input, 3: clconv.conv3d_input}
_CONV_WEIGHT = {1: clconv.conv1d_weight, 2: clconv.conv2d_weight, 3: clconv.conv3d_weight}
_TRANSPOSE = {1: clconv.conv_transpose1d, 2: clconv.conv_transpose2d, 3: clconv.conv_transpose3d}


@dataclass(frozen=True)
class Case:
    """A forward convolution ``conv{ndim}d(x (batch, cin, *in_size), w (cout, cin/groups, *kernel))``;
    ``bias`` adds a bias to the forward pass and (through conv_transpose) to the data gradient."""

    ndim: int
    batch: int
    cin: int
    cout: int
    in_size: tuple
    kernel: tuple
    stride: object = 1
    padding: object = 0
    dilation: object = 1
    groups: int = 1
    bias: bool = False
    passes: tuple = PASSES
    only: tuple = ()  # run just these algorithms (empty: every serving one) to save builds

    @property
    def geometry(self) -> ConvGeometry:
        return resolve_conv(self.ndim, (self.batch, self.cin, *self.in_size),
                            (self.cout, self.cin // self.groups, *self.kernel), None,
                            self.stride, self.padding, self.dilation, self.groups).geometry

    @property
    def id(self) -> str:
        return self.geometry.tag() + ("b" if self.bias else "")

    def problem(self, pass_: str, dtype: str = "float32") -> Problem:
        return Problem(self.geometry, pass_, dtype, bias=self.bias and pass_ != "backward_weight")

    def algorithms(self, pass_: str, device) -> list[str]:
        """The algorithms that serve this case's ``pass_`` on ``device`` (declined ones left out)."""
        problem = self.problem(pass_)
        return [name for name in clconv.algorithms(pass_)
                if (not self.only or name in self.only) and REGISTRY[name].decline_reason(problem, device) is None]


# Each case covers some branch: groups / depthwise, stride with asymmetric padding and dilation,
# 1D / 3D, 1x1 strided (gemm1x1), a contraction long enough for split-K, bias in both passes,
# and M/N sizes that are not multiples of any tile (edge tiles).  The 2D and 3D cases run every
# algorithm; the others only what they exist for (a cold PoCL build costs ~1 s).
CASES = [
    Case(2, 2, 4, 6, (7, 6), (3, 3), 1, 1, 1, 2, bias=True),
    Case(2, 1, 3, 5, (9, 8), (3, 2), 2, ((1, 2), (0, 1)), (1, 2)),
    Case(3, 1, 2, 3, (4, 5, 3), (2, 3, 2), (1, 2, 1), (1, 0, 1)),
    Case(1, 3, 4, 4, (11,), (3,), 2, 2, 2, 4, bias=True,
         only=("direct", "implicit_gemm", "depthwise", "depthwise_rows")),
    # depthwise with 2 outputs per channel, stride 1: rows of 21 run as a 16-lane vector, an
    # overlapping tail vector and padded edge columns
    Case(2, 2, 3, 6, (5, 21), (3, 3), 1, 1, 1, 3, bias=True, only=("depthwise_rows",)),
    Case(2, 2, 5, 7, (5, 3), (1, 1), 2, 0, bias=True, only=("gemm1x1",)),
    Case(2, 2, 2, 3, (16, 16), (3, 3), 1, 1, passes=("backward_weight",), only=("splitk",)),
]


def operand_names(pass_: str, bias: bool) -> tuple[str, ...]:
    names = {"forward": ("x", "w"), "backward_data": ("dy", "w"), "backward_weight": ("x", "dy")}[pass_]
    return (*names, "bias") if bias and pass_ != "backward_weight" else names


def operand_shapes(case: Case, pass_: str) -> dict[str, tuple]:
    g = case.geometry
    channels = g.out_channels if pass_ == "forward" else g.in_channels
    shapes = {"x": g.input_shape, "w": g.weight_shape, "dy": g.output_shape, "bias": (channels,)}
    return {name: shapes[name] for name in operand_names(pass_, case.bias)}


def result_shape(case: Case, pass_: str) -> tuple:
    g = case.geometry
    return {"forward": g.output_shape, "backward_data": g.input_shape, "backward_weight": g.weight_shape}[pass_]


def reference_result(case: Case, pass_: str, operands: dict[str, np.ndarray]) -> np.ndarray:
    names = operand_names(pass_, case.bias)
    return reference.run_pass(pass_, case.geometry, operands[names[0]], operands[names[1]], operands.get("bias"))


def run(case: Case, pass_: str, algorithm: str, operands: dict, out=None):
    """Run ``pass_`` of ``case`` through the public op that maps onto it (conv*d, conv*d_input, or
    conv_transpose*d when there is a bias, conv*d_weight) with ``operands`` (numpy or Arrays)."""
    g = case.geometry
    n = case.ndim
    pads = tuple(zip(g.pad_begin[3 - n:], g.pad_end[3 - n:]))
    common = dict(stride=case.stride, dilation=case.dilation, groups=case.groups, algorithm=algorithm, out=out)
    if pass_ == "forward":
        return _CONV[n](operands["x"], operands["w"], operands.get("bias"), padding=case.padding, **common)
    if pass_ == "backward_weight":
        return _CONV_WEIGHT[n](operands["x"], g.weight_shape, operands["dy"], padding=case.padding, **common)
    if "bias" in operands:
        # conv_transpose is the data gradient plus a bias; output_padding recovers the input size
        # the forward pass's floor division dropped.
        output_padding = tuple(
            i - ((o - 1) * s - b - e + d * (k - 1) + 1)
            for i, o, s, b, e, d, k in zip(g.user_in_size, g.user_out_size, g.stride[3 - n:], g.pad_begin[3 - n:],
                                           g.pad_end[3 - n:], g.dilation[3 - n:], g.user_kernel)
        )
        return _TRANSPOSE[n](operands["dy"], operands["w"], operands["bias"], padding=pads,
                             output_padding=output_padding, **common)
    return _CONV_INPUT[n](g.input_shape, operands["w"], operands["dy"], padding=case.padding, **common)


def every_pass_algorithm(device, cases=CASES):
    """``(case, pass, algorithm)`` for every algorithm serving every pass of every case."""
    return [(case, pass_, algorithm) for case in cases for pass_ in case.passes
            for algorithm in case.algorithms(pass_, device)]


def param_id(case: Case, pass_: str, algorithm: str) -> str:
    return f"{pass_}-{algorithm}-{case.id}"


# -- guarded buffers (benchdnn's out-of-bounds check) -------------------------------------------------

SENTINEL = np.float32(-1234.5625)  # exactly representable; no kernel computes it by accident
GUARD_BEFORE, GUARD_AFTER = 13, 29  # elements; odd so views start at unaligned offsets


def guarded(queue, shape, fill, inner=None, dtype=np.float32):
    """``(big, view)``: a device buffer of ``prod(shape)`` elements plus guards, filled with ``fill``;
    ``view`` is the ``shape``-shaped window after the first guard (holding ``inner`` if given)."""
    n = math.prod(shape)
    host = np.full(GUARD_BEFORE + n + GUARD_AFTER, fill, dtype)
    if inner is not None:
        host[GUARD_BEFORE:GUARD_BEFORE + n] = inner.ravel()
    big = cl_array.to_device(queue, host)
    view = big[GUARD_BEFORE:GUARD_BEFORE + n].reshape(shape)
    assert view.offset == GUARD_BEFORE * np.dtype(dtype).itemsize and view.base_data is big.base_data
    return big, view


def check_guards(big: cl_array.Array, n: int, fill) -> None:
    host = big.get()
    before, after = host[:GUARD_BEFORE], host[GUARD_BEFORE + n:]
    for name, region in (("before", before), ("after", after)):
        bits = np.dtype(f"u{region.dtype.itemsize}")  # compare bits: the sentinel may be a NaN
        bad = np.flatnonzero(region.view(bits) != np.asarray(fill, region.dtype).view(bits))
        assert bad.size == 0, f"out-of-bounds write: guard words {bad.tolist()} {name} the output changed"
