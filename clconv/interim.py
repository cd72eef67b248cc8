"""Interim kernels: what a call runs while the kernels chosen for its new geometry build.

Every algorithm's kernels have the geometry baked in as constants, so a new geometry means a new
build, and on a GPU the driver's compiler takes 0.2-0.9 s a program (NVIDIA's, docs/performance.md).
An interim plan is direct convolution's one-work-item-per-element kernels (one work-group per weight
element for the weight gradient) rendered once with the geometry as kernel arguments
(:class:`GeometryArgs`): one program per pass, storage dtype, layout, index width and epilogue
serves every geometry, and once it is in the disk cache a new geometry's first call loads it
instead of compiling.  The planner runs it while the chosen plan builds on a background thread,
and the chosen plan as soon as that build is done (planner.run).

Its results equal the chosen kernels' within rounding, not bit for bit (another summation order):
``CLCONV_INTERIM=0`` makes every call wait for its chosen kernels, as a measured choice
(``CLCONV_TUNE=1``) and a named algorithm always do.  Unset, interim kernels run on GPUs, where the
builds are slow.  CPUs wait: with two cores the background builds take a core from the calls, and
interim kernels run 35-200x the chosen kernels' time there (on PoCL, 2 cores, the CPU set's first
step of 24 calls took 37.6 s with them against 60.3 s without, but every chosen kernel ran only
after 77 s against 60 s: docs/perf/pocl-interim-first-calls.json).  Oclgrind waits too (it
crashed building on two threads).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from . import settings
from .device import is_gpu
from .geometry import ConvGeometry
from .plan import KernelSource, Plan, Problem


@dataclass(frozen=True)
class GeometryArgs:
    """A geometry whose every number is the name of a kernel argument: the ``geom`` an interim plan is
    rendered with.  It has a :class:`~clconv.geometry.ConvGeometry`'s fields that prelude.mako's
    header reads, under the same names, each a C name instead of a number (the CLC_* macros then
    name the arguments); templates ask ``prelude.attr.baked(geom)`` before computing with the
    geometry's numbers (only an interim plan's kernels accept this one).  The fields' order is the
    arguments' order."""

    batch: str = "clc_n"
    groups: str = "clc_g"
    cin_per_group: str = "clc_ci"
    cout_per_group: str = "clc_co"
    in_size: tuple[str, str, str] = ("clc_id", "clc_ih", "clc_iw")
    kernel: tuple[str, str, str] = ("clc_kd", "clc_kh", "clc_kw")
    stride: tuple[str, str, str] = ("clc_sd", "clc_sh", "clc_sw")
    pad_begin: tuple[str, str, str] = ("clc_pd", "clc_ph", "clc_pw")
    dilation: tuple[str, str, str] = ("clc_dd", "clc_dh", "clc_dw")
    out_size: tuple[str, str, str] = ("clc_od", "clc_oh", "clc_ow")
    as_arguments: bool = True  # the mark prelude.baked looks for; not an argument

    @property
    def names(self) -> tuple[str, ...]:
        """The arguments' C names, in order."""
        return _flattened(self)

    @property
    def parameters(self) -> str:
        """The C parameter list the kernels append to their own."""
        return ", ".join(f"const int {name}" for name in self.names)


# the fields of GeometryArgs that are arguments: a ConvGeometry has each under the same name
_GEOMETRY_FIELDS = tuple(f.name for f in dataclasses.fields(GeometryArgs) if f.name != "as_arguments")


def _flattened(geometry) -> tuple:
    """The values of ``geometry``'s argument fields (a GeometryArgs or a ConvGeometry), in order,
    the three entries of each tuple in turn."""
    values: list = []
    for name in _GEOMETRY_FIELDS:
        value = getattr(geometry, name)
        values.extend(value if isinstance(value, tuple) else (value,))
    return tuple(values)


GEOMETRY_ARGS = GeometryArgs()


def argument_values(g: ConvGeometry) -> tuple[np.int32, ...]:
    """``g``'s numbers in :attr:`GeometryArgs.names`' order, as the kernels take them (32-bit ints:
    every size of a geometry does; the flat indices built from them are the source's index type)."""
    return tuple(np.int32(value) for value in _flattened(g))


# Interim kernels run at a fraction of the chosen kernels' speed: on an H100, ResNet-50 layers at
# batch 33 (docs/perf/h100-interim-first-calls.json) at 0.6-1.8 TFLOP/s forward (one work-item per
# output, its operands from global memory), 2.8-3.6 the data gradient, 0.3-0.45 the weight
# gradient (a work-group per weight element), against 0.2-0.9 s for a build.  A pass of more
# FLOPs than this (about 60 ms of interim kernel at those rates) waits for its chosen kernels:
# a few calls during the build would cost more than waiting.
MAX_FLOPS = {"forward": 2**35, "backward_data": 2**37, "backward_weight": 2**34}


def enabled(device: cl.Device) -> bool:
    """Whether a new geometry's calls on ``device`` run an interim plan while its kernels build:
    ``CLCONV_INTERIM`` if set, else on GPUs that are not also CPUs (Oclgrind reports both)."""
    chosen = settings.interim()
    if chosen is not None:
        return chosen
    return is_gpu(device) and not device.type & cl.device_type.CPU


def serves(problem: Problem) -> bool:
    """Whether an interim plan may run ``problem`` (small enough: :data:`MAX_FLOPS`)."""
    return problem.geometry.flops <= MAX_FLOPS[problem.pass_]


def plan(problem: Problem, device: cl.Device) -> Plan:
    """The interim plan of ``problem``: direct's first one-result-per-work-item configuration,
    rendered with :data:`GEOMETRY_ARGS` and launched with ``problem``'s numbers as arguments."""
    from .algorithms.direct import Direct  # algorithms import the planner's modules: no cycle at import

    direct = Direct()
    config = next(c for c in direct.configs(problem, device) if set(c) == {"wg"})
    chosen = direct.plan(problem, config, device)
    values = argument_values(problem.geometry)
    calls = tuple(dataclasses.replace(
        call, source=KernelSource(call.source.template, {**call.source.params, "geom": GEOMETRY_ARGS}),
        args=(*call.args, *values)) for call in chosen.calls)
    return Plan(problem, chosen.algorithm, {**config, "geometry": "arguments"}, calls, chosen.workspaces)


def is_interim(config: dict) -> bool:
    """Whether a plan's (or runner's) ``config`` is an interim plan's."""
    return config.get("geometry") == "arguments"
