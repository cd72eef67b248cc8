"""Depthwise convolution by rows: all three passes of a ``C_in/groups == 1`` layer, vectorised along
the image rows (kernels/depthwise_rows.mako).

A depthwise layer has no contraction worth a GEMM (``prod(kernel)`` terms per output), so it is
bound by memory and by how many values one load feeds.  ``direct`` computes one output element per
work-item with per-tap bounds checks and scalar loads (about 2 GFLOP/s on PoCL); here one work-item
walks one row of the output (forward), of the input gradient (data gradient), or every row of one
channel (weight gradient), in vectors of ``vn`` consecutive columns.  Which columns are *interior*
(every tap of the row inside the image, so a vector needs no bounds checks) is worked out here, at
render time, from the baked-in geometry: the kernel runs the interior as whole vectors plus, where
the interior is not a multiple of ``vn``, one overlapping last vector, and only the few padded edge
columns as scalar code with checks.  The data gradient's vectors need a unit stride along the width
(a stride-s gather would read a different tap set per lane); with a larger stride the columns of
each residue modulo the stride are taken by themselves (``Phase``): along them the reads are
consecutive again, and only the stores are a stride apart.

Channels-last activations are read in place: a row's columns are then a pixel step (the channel
count) apart, so the same column plan runs with every vector gathered lane by lane and its results
stored lane by lane; the plan itself (which columns need bounds checks) does not depend on the
layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import limits, settings
from ..passes import PASSES
from ..plan import LAYOUTS, Arg, Plan, rounded
from .base import Algorithm, call, pass_args, source
from .reduce import splitk_sum


@dataclass(frozen=True)
class ColumnPlan:
    """How one row of width ``width`` is covered: columns ``[lo, hi)`` are interior and run as
    ``full`` vectors of ``vn`` from ``lo``, then (``tail_overlap`` > 0) one more vector ending at
    ``hi`` whose first ``tail_overlap`` lanes repeat columns already done; every other column of
    ``[0, width)`` is an edge column, run as scalar code with bounds checks."""

    width: int
    lo: int
    hi: int
    vn: int  # 0: no vector at all (the interior is narrower than the smallest vector)
    full: int
    tail_overlap: int  # lanes of the last vector that repeat earlier columns; -1: no tail vector

    @property
    def edge_ranges(self) -> list[tuple[int, int]]:
        """The edge columns as ``[begin, end)`` ranges (at most two)."""
        ranges = [(0, self.width)] if self.vn == 0 else [(0, self.lo), (self.hi, self.width)]
        return [(begin, end) for begin, end in ranges if end > begin]

    @property
    def edge_columns(self) -> list[int]:
        return [column for begin, end in self.edge_ranges for column in range(begin, end)]

    @property
    def tail_start(self) -> int:
        return self.hi - self.vn


def column_plan(width: int, source_width: int, taps: int, stride: int, pad: int, dilation: int,
                vn: int) -> ColumnPlan:
    """Output column ``o`` reads source columns ``o * stride - pad + k * dilation`` for ``k < taps``
    (``pad`` may be negative: the data gradient's flipped form).  Interior: all of them inside
    ``[0, source_width)``."""
    lo = max(0, -(-pad // stride))
    last = source_width - 1 + pad - (taps - 1) * dilation
    hi = last // stride + 1 if last >= 0 else 0
    return _vectors(width, lo, hi, vn)


@dataclass(frozen=True)
class Phase:
    """A strided data gradient's input-gradient columns ``i = stride * j + residue``: each reads
    ``dy`` column ``j + offset`` through tap ``kw`` for every ``(kw, offset)`` of ``taps`` (the taps
    whose output column divides out exactly), so along ``j`` its reads are consecutive and run as
    vectors like a unit-stride row; ``columns`` plans ``j`` (its interior: every read in the row)."""

    residue: int
    taps: tuple[tuple[int, int], ...]
    columns: ColumnPlan


def phases(width: int, source_width: int, taps: int, stride: int, pad: int, dilation: int, vn: int) -> tuple[Phase, ...]:
    """The data gradient's columns by residue modulo ``stride`` along the width: ``dx`` column ``i``
    gathers ``dy`` column ``(i + pad - k * dilation) / stride`` for the taps ``k`` that divide
    exactly (``pad``: the forward's)."""
    out = []
    for residue in range(min(stride, width)):
        reads = tuple((k, (residue + pad - k * dilation) // stride) for k in range(taps)
                      if (residue + pad - k * dilation) % stride == 0)
        count = -(-(width - residue) // stride)  # columns of this residue
        lo = max([0] + [-offset for _, offset in reads])
        hi = min([count] + [source_width - offset for _, offset in reads])
        out.append(Phase(residue, reads, _vectors(count, lo, hi, vn)))
    return tuple(out)


def _vectors(width: int, lo: int, hi: int, vn: int) -> ColumnPlan:
    """Columns ``[lo, hi)`` of ``[0, width)`` as vectors of ``vn`` (fewer lanes, down to 4, where
    the interior is narrower), the rest edge columns."""
    lo = min(lo, width)
    hi = max(lo, min(hi, width))
    interior = hi - lo
    v = vn
    while v > interior and v > 4:
        v //= 2
    if v > interior:
        return ColumnPlan(width, lo, lo, 0, 0, -1)
    full, rest = divmod(interior, v)
    return ColumnPlan(width, lo, hi, v, full, v - rest if rest else -1)


class DepthwiseRows(Algorithm):
    name = "depthwise_rows"
    passes = PASSES
    layouts = LAYOUTS
    description = ("depthwise layers (C_in/groups = 1): a row per work-item in vectors along the width, "
                   "bounds checks only at the padded edges (weight gradient: a channel per work-item)")

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        if reason is None and problem.geometry.cin_per_group != 1:
            reason = f"it serves only depthwise convolutions (C_in/groups = 1), here {problem.geometry.cin_per_group}"
        return reason

    def configs(self, problem, device):
        fit = limits.of(device)
        # the vector unit's lanes (16 floats with AVX-512), at least 4; narrower rows (7x7 images)
        # leave most of a 16-lane vector idle, so half that is offered too
        widest = min(max(fit.lanes(problem.itemsize), 4), 16)
        if not fit.gpu:
            lx = fit.widest(8)[0]
            out = [{"vn": vn, "lx": lx} for vn in dict.fromkeys((widest, max(widest // 2, 4)))]
        else:
            # one work-item per row does not coalesce; kept selectable and measurable on GPUs
            out = [{"vn": 4, "lx": fit.widest(64)[0]}]
        if problem.pass_ == "backward_weight":
            for config in out:
                config["slices"] = self._slices(problem, device)
        return out

    @staticmethod
    def _slices(problem, device) -> int:
        """Weight gradient: pieces of each channel's rows, summed by a second kernel, so that there
        are a few work-items per compute unit even for a few channels."""
        g = problem.geometry
        rows = g.batch * g.out_size[0] * g.out_size[1]
        wanted = -(-4 * limits.of(device).compute_units // g.out_channels)
        slices = max(1, min(wanted, rows, 256))
        if slices > 1 and slices * g.weight_elements * problem.itemsize > settings.workspace_limit(device):
            slices = 1
        return slices

    def plan(self, problem, config, device):
        g = problem.geometry
        vn, lx = config["vn"], config["lx"]
        kw, sw, pw, dw = g.kernel[2], g.stride[2], g.pad_begin[2], g.dilation[2]
        residues: tuple[Phase, ...] = ()
        if problem.pass_ == "backward_data":  # the row residue by residue of the stride (one at stride 1)
            columns = None
            residues = phases(g.in_size[2], g.out_size[2], kw, sw, pw, dw, vn)
            rows = g.batch * g.in_channels * g.in_size[0] * g.in_size[1]
        else:
            columns = column_plan(g.out_size[2], g.in_size[2], kw, sw, pw, dw, vn)
            rows = g.batch * g.out_channels * g.out_size[0] * g.out_size[1]
        slices = config.get("slices", 1)
        partial_elements = slices * g.weight_elements if slices > 1 else 0
        index = problem.index_type(partial_elements)
        # the weight gradient writes no result: its source is shared by every epilogue of the geometry
        src = source("depthwise_rows.mako", problem, index, writes_result=problem.pass_ != "backward_weight",
                     columns=columns, phases=residues, slices=slices)
        entry = f"clc_dw_rows_{problem.pass_}"
        if problem.pass_ != "backward_weight":  # a work-item per row of the result
            return Plan(problem, self.name, config,
                        (call(src, entry, (rounded(rows, lx),), (lx,), *pass_args(problem, bias_fallback="w")),))
        if slices == 1:  # a work-item per channel
            return Plan(problem, self.name, config,
                        (call(src, entry, (rounded(g.out_channels, lx),), (lx,), Arg("x"), Arg("dy"), Arg("dw")),))
        partials = call(src, entry, (rounded(g.out_channels * slices, lx),), (lx,), Arg("x"), Arg("dy"), Arg("partial"))
        return Plan(problem, self.name, config, (partials, splitk_sum(problem, index, slices, g.weight_elements)),
                    {"partial": partial_elements * problem.itemsize})
