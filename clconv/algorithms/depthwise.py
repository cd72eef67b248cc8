"""Depthwise weight gradient: a bandwidth-bound kernel for ``C_in/groups == 1`` (MobileNet-style layers).

The GEMM algorithms see a depthwise weight gradient as ``groups`` GEMMs of ``C_out/groups x taps``
with a contraction over the whole batch; ``direct`` gives one work-group to each weight element and
so reads the input once per tap from memory.  Here one work-group per (slice of batch x pixels,
output channel) keeps all taps' sums in registers, reads ``dy`` once and the input through the
cache, and a fixed-order second kernel adds the slices (kernels/depthwise.mako, reduce.mako).
"""

from __future__ import annotations

from .. import limits, settings
from ..limits import pow2_at_most
from ..plan import CHANNELS_FIRST, LAYOUTS, Arg, Plan
from .base import Algorithm, call, source
from .reduce import splitk_sum

MAX_TAPS = 32  # taps summed in registers per work-item


class DepthwiseWgrad(Algorithm):
    name = "depthwise"
    passes = ("backward_weight",)
    layouts = LAYOUTS
    description = ("depthwise weight gradient (C_in/groups = 1): all taps' sums per work-item in "
                   "registers over a slice of batch x pixels, slices added in a fixed order")

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        g = problem.geometry
        if reason is None and g.cin_per_group != 1:
            reason = f"it serves only depthwise convolutions (C_in/groups = 1), here {g.cin_per_group}"
        if reason is None and g.kernel_volume > MAX_TAPS:
            reason = f"the kernel has {g.kernel_volume} taps; it keeps at most {MAX_TAPS} sums in registers"
        if reason is None and not self.configs(problem, device):
            reason = "no work-group size fits the device's local memory and work-group limits"
        return reason

    def configs(self, problem, device):
        g = problem.geometry
        total = g.batch_out_pixels
        fit = limits.of(device)
        out = []
        for wg in (256, 128, 64, 32, 16, 8):
            if not fit.fits((wg, 1)) or g.kernel_volume * wg * problem.itemsize > fit.local_mem // 2:
                continue
            # channels-last: neighbouring work-items on neighbouring channels (coalesced on GPUs),
            # up to 32 of them, fewer where the layer has fewer channels
            lanes = 1 if problem.layout == CHANNELS_FIRST else min(32, wg, pow2_at_most(g.out_channels))
            channel_groups = -(-g.out_channels // lanes)
            # enough work-groups to fill the device several times over, each work-item with real work
            wanted = -(-8 * fit.compute_units // channel_groups)
            slices = max(1, min(wanted, total // (4 * (wg // lanes)), 1024))
            if slices * g.out_channels * g.kernel_volume * problem.itemsize > settings.workspace_limit(device):
                slices = 1
            config = {"wg": wg, "slices": slices}
            if lanes > 1:
                config["lanes"] = lanes
            out.append(config)
        return out[:2] if fit.gpu else out[:1]

    def plan(self, problem, config, device):
        g = problem.geometry
        wg, slices, lanes = config["wg"], config["slices"], config.get("lanes", 1)
        elements = g.out_channels * g.kernel_volume
        index = problem.index_type(slices * elements)
        src = source("depthwise.mako", problem, index, writes_result=False, wg=wg, slices=slices, lanes=lanes)
        partials = call(src, "clc_depthwise_wgrad", (slices * wg, -(-g.out_channels // lanes)), (wg, 1),
                        Arg("x"), Arg("dy"), Arg("partial", with_offset=False))
        return Plan(problem, self.name, config, (partials, splitk_sum(problem, index, slices, elements)),
                    {"partial": slices * elements * problem.itemsize})
