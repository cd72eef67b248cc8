"""Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions, not fused (kernels/winograd.mako).

Each 2x2 output tile is ``A^T [(G g G^T) . (B^T d B)] A`` for its 4x4 input patch ``d``: per input
and output channel pair, 16 multiplies per tile where a direct convolution does 36 (2.25x fewer).
The elementwise products summed over input channels are 16 independent GEMMs per group, so the
plan is: transform the weight (U), transform the input (V), run the 16 GEMMs (M = U V), transform
M back into the output through the epilogue (bias, alpha, residual, activation).  The data gradient
of a stride-1 3x3 layer is the same convolution of ``dy`` with the weight flipped and its channel
axes swapped, padded by ``2 - pad``.  The workspaces hold clc_real whatever the storage dtype: only
the weight and input transforms read the call's tensors, and only the output transform writes one,
so those two alone index the activations by their layout (channels_first or channels_last).

Error: the transforms add and halve values, so an fp32 result carries about 2-4x the rounding error
of a direct sum of the same length (measured against the float64 reference in the tests, within
``reference.tolerance``).  The workspaces hold the transformed input and the products: 16/4 = 4x
the input and the output in size; the algorithm declines when they pass the workspace limit.
"""

from __future__ import annotations

from .. import limits, settings
from ..plan import LAYOUTS, Arg, Plan, Problem, rounded
from .base import Algorithm, call, epilogue_args, source


class Winograd(Algorithm):
    name = "winograd"
    passes = ("forward", "backward_data")
    layouts = LAYOUTS  # the transforms read src and write dst with either layout's steps
    description = ("3x3 stride-1 layers by Winograd F(2x2, 3x3): weight and input transforms, 16 batched "
                   "GEMMs, output transform (2.25x fewer multiplies than a direct sum)")

    @staticmethod
    def _conv(problem: Problem) -> dict:
        """The convolution this plan runs, as the template's parameters: the forward pass's own,
        or (data gradient) dy -> dx, whose padding is 2 - pad on each side."""
        g = problem.geometry
        ih, iw, oh, ow = g.in_size[1], g.in_size[2], g.out_size[1], g.out_size[2]
        if problem.pass_ == "forward":
            conv = dict(CIN=g.cin_per_group, COUT=g.cout_per_group, IH=ih, IW=iw, OH=oh, OW=ow,
                        PT=g.pad_begin[1], PL=g.pad_begin[2], FLIP=False)
        else:
            conv = dict(CIN=g.cout_per_group, COUT=g.cin_per_group, IH=oh, IW=ow, OH=ih, OW=iw,
                        PT=2 - g.pad_begin[1], PL=2 - g.pad_begin[2], FLIP=True)
        return dict(conv, N=g.batch, GROUPS=g.groups, TH=-(-conv["OH"] // 2), TW=-(-conv["OW"] // 2))

    @staticmethod
    def _workspaces(problem: Problem, conv: dict) -> dict[str, int]:
        tiles = conv["N"] * conv["TH"] * conv["TW"]
        per_position = conv["GROUPS"] * 16 * problem.itemsize
        return {"u": per_position * conv["COUT"] * conv["CIN"], "v": per_position * conv["CIN"] * tiles,
                "m": per_position * conv["COUT"] * tiles}

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        g = problem.geometry
        if reason is None and (g.ndim != 2 or g.kernel != (1, 3, 3) or g.stride != (1, 1, 1) or g.dilation != (1, 1, 1)):
            reason = "it serves only 2D 3x3 kernels with stride 1 and dilation 1"
        if reason is None and problem.pass_ == "backward_data" and (max(g.pad_begin) > 2 or max(g.pad_end) > 2):
            reason = "its data gradient pads by 2 - pad, so it serves paddings of at most 2"
        if reason is None:
            needed = sum(self._workspaces(problem, self._conv(problem)).values())
            if needed > settings.workspace_limit(device):
                reason = (f"its transformed input and products need {needed} bytes, more than the workspace limit "
                          f"({settings.workspace_limit(device)} bytes, CLCONV_WORKSPACE_LIMIT)")
        if reason is None and not self.configs(problem, device):
            reason = "no GEMM work-group fits the device's work-group and local memory limits"
        return reason

    def configs(self, problem, device):
        fit = limits.of(device)
        out = []
        for side in (16, 8, 4):  # the GEMM's work-group is side x side, each work-item 4 x 4 outputs
            local_bytes = side * (8 * side + 1) * problem.itemsize
            if fit.fits((side, side), local_bytes):
                out.append({"LS": side})
        return out[:2]

    def plan(self, problem, config, device):
        g = problem.geometry
        conv = self._conv(problem)
        spaces = self._workspaces(problem, conv)
        index = problem.index_type(max(spaces.values()) // problem.itemsize)
        # one program for all four kernels: a first call builds once (an epilogue of its own is
        # another build of all four; splitting the output transform off would cost two builds each time)
        src = source("winograd.mako", problem, index, LS=config["LS"], **conv)
        tiles, side = conv["N"] * conv["TH"] * conv["TW"], config["LS"] * 4
        spec = problem.spec
        source_role, result_role = spec.inputs[0], spec.result  # x -> y, or dy -> dx
        calls = (
            call(src, "clc_wino_weight", (rounded(conv["COUT"] * conv["CIN"], 64), g.groups), None,
                 Arg("w"), Arg("u", with_offset=False)),
            call(src, "clc_wino_input", (rounded(tiles, 64), g.groups * conv["CIN"]), None,
                 Arg(source_role), Arg("v", with_offset=False)),
            call(src, "clc_wino_gemm", (rounded(tiles, side) // 4, rounded(conv["COUT"], side) // 4, g.groups * 16),
                 (config["LS"], config["LS"], 1), Arg("u", with_offset=False), Arg("v", with_offset=False),
                 Arg("m", with_offset=False)),
            call(src, "clc_wino_output", (rounded(tiles, 64), g.groups * conv["COUT"]), None,
                 Arg("m", with_offset=False), *epilogue_args(problem, result_role), Arg(result_role)),
        )
        return Plan(problem, self.name, config, calls, spaces)
