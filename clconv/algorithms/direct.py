"""Direct convolution: no workspace, no GEMM; the simplest kernels and the fallback of last resort."""

from __future__ import annotations

from .. import limits
from ..limits import pow2_at_most
from ..passes import PASSES
from ..plan import LAYOUTS, Arg, Plan, rounded
from .base import Algorithm, call, pass_args, source


STRIP_ROWS = range(4, 9)  # output rows per work-item of the strip forward (clc_direct_forward_rows)


def strip_rows(height: int) -> int:
    """Rows per strip for an output ``height`` rows high: of 4..8, the one leaving the fewest rows
    of the last strip empty (the smallest such: more work-items); 1 (no strips) below 4 rows."""
    if height < STRIP_ROWS[0]:
        return 1
    return min(STRIP_ROWS, key=lambda r: (-height % r, r))


class Direct(Algorithm):
    name = "direct"
    passes = PASSES
    layouts = LAYOUTS
    description = ("one work-item per output element (forward, data gradient as a gather); one "
                   "work-group per weight element with a tree reduction (weight gradient)")

    def configs(self, problem, device):
        fit = limits.of(device)
        if problem.pass_ == "backward_weight":
            top = pow2_at_most(min(fit.work_group, 256))
            return [{"wg": wg} for wg in dict.fromkeys((top, max(top // 4, 1)))]
        # best guess first: 256 won every direct layer-pass measured on an H200 (docs/performance.md);
        # a device granting fewer work-items (32 on llvmpipe) gets the largest power of two it allows
        out = [{"wg": wg} for wg in fit.widest(*((256, 64) if fit.gpu else (64, 256)))]
        rows = strip_rows(problem.geometry.out_size[1])
        if problem.pass_ == "forward" and fit.gpu and rows > 1:
            # strips of output rows: each input row loaded once for all the kernel rows it feeds
            # (on an H200, depthwise 3x3 at 56x56: 0.042 ms against 0.084 one output per work-item)
            out.insert(0, {"wg": out[0]["wg"], "rows": rows})
        return out

    def plan(self, problem, config, device):
        g = problem.geometry
        wg, rows = config.get("wg", 64), config.get("rows", 1)
        src = source("direct.mako", problem, wg=wg, rows=rows)
        entry = f"clc_direct_{problem.pass_}" + ("_rows" if rows > 1 else "")
        if problem.pass_ == "backward_weight":
            launch = call(src, entry, (wg, g.weight_elements), (wg, 1), Arg("x"), Arg("dy"), Arg("dw"))
        else:
            # one work-item per element of the result: y (forward) or dx (data gradient)
            pixels, channels = ((g.out_pixels, g.out_channels) if problem.pass_ == "forward"
                                else (g.in_pixels, g.in_channels))
            if rows > 1:  # a work-item per strip of output rows at one column
                od, oh, ow = g.out_size
                pixels = od * -(-oh // rows) * ow
            # one flat range over the result (direct.mako's `element`): a small image's pixels
            # rounded up to a work-group left 80% of the work-items idle at 7x7 (H200)
            launch = call(src, entry, (rounded(g.batch * pixels * channels, wg or 1),), (wg,) if wg else None,
                          *pass_args(problem, bias_fallback="w"))
        return Plan(problem, self.name, config, (launch,))
