"""Direct convolution: no workspace, no GEMM; the simplest kernels and the fallback of last resort."""

from __future__ import annotations


import pyopencl as cl

from ..builder import get_kernel
from .base import Algorithm, Arg, Launch, Runner, render_and_build, rounded


def _pow2_at_most(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


class Direct(Algorithm):
    name = "direct"
    passes = ("forward", "backward_data", "backward_weight")
    description = ("one work-item per output element (forward, data gradient as a gather); one "
                   "work-group per weight element with a tree reduction (weight gradient)")

    def configs(self, problem, device):
        if problem.pass_ == "backward_weight":
            top = _pow2_at_most(min(device.max_work_group_size, 256))
            return [{"wg": wg} for wg in (top, max(top // 4, 1))]
        if device.max_work_group_size < 256:
            return [{"wg": 0}]
        # best guess first: 256 won every direct layer-pass measured on an H200 (docs/performance.md)
        return [{"wg": 256}, {"wg": 64}] if device.type & cl.device_type.GPU else [{"wg": 64}, {"wg": 256}]

    def prepare(self, problem, config, queue, device):
        g = problem.geometry
        sources: list = []
        program = render_and_build(
            queue, sources, "direct.mako", self.name, geom=g, real=problem.real,
            index=problem.index_type(), kernel=problem.pass_, bias=problem.bias, wg=config.get("wg", 64),
        )
        wg = config.get("wg", 64)
        local = (wg, 1) if wg else None
        if problem.pass_ == "forward":
            kernel = get_kernel(program, "clc_direct_forward") if program is not None else None
            launch = Launch(kernel, (rounded(g.out_pixels, wg or 1), g.batch * g.out_channels), local,
                            (Arg("x"), Arg("w"), Arg("bias", fallback="w"), Arg("y")))
        elif problem.pass_ == "backward_data":
            kernel = get_kernel(program, "clc_direct_backward_data") if program is not None else None
            launch = Launch(kernel, (rounded(g.in_pixels, wg or 1), g.batch * g.in_channels), local,
                            (Arg("dy"), Arg("w"), Arg("bias", fallback="w"), Arg("dx")))
        else:
            kernel = get_kernel(program, "clc_direct_backward_weight") if program is not None else None
            launch = Launch(kernel, (wg, g.weight_elements), (wg, 1), (Arg("x"), Arg("dy"), Arg("dw")))
        return Runner(self.name, config, [launch], {}, sources)


def bias_gradient_runner(problem, queue, device) -> Runner:
    """db[c] = sum of dy over batch and space (``problem.geometry`` is the canonical geometry whose
    *output* dy is; the transposed ops pass the swapped geometry)."""
    wg = _pow2_at_most(min(device.max_work_group_size, 256))
    sources: list = []
    program = render_and_build(queue, sources, "reduce.mako", "bias_grad", geom=problem.geometry,
                               real=problem.real, index=problem.index_type(), kernel="bias_grad", wg=wg,
                               splits=0, elements=0)
    launch = Launch(get_kernel(program, "clc_bias_grad") if program is not None else None, (wg, problem.geometry.out_channels), (wg, 1),
                    (Arg("dy"), Arg("db")))
    return Runner("bias_grad", {"wg": wg}, [launch], {}, sources)


