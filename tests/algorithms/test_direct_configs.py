"""The direct forward in strips of output rows (clc_direct_forward_rows), below the public ops
(helpers.run_prepared): a strip's input rows are loaded once for all the kernel rows they feed, so
the geometries reach row counts that do not divide the strip, strides and dilations that make rows
feed several output rows or none, 3D, groups with several input channels, a 1D layer (one output
row: three of the strip's rows stored nowhere), both layouts, 16-bit storage and float64; and in
blocks of output channels (clc_direct_forward_block)."""

from __future__ import annotations

import pytest

from clconv.algorithms import REGISTRY
from clconv.device import supports_fp64
from clconv.plan import Problem

from cases import geometry
from helpers import run_prepared

DIRECT = REGISTRY["direct"]

STRIP_GEOMETRIES = {
    "k3p1-h9": "n2g1c3o4i9x7k3x3s1x1p1x1d1x1",      # 9 rows: the last strip has one row
    "k3s2-d2": "n1g2c4o6i13x9k3x3s2x1p2x1d2x1",     # stride and dilation along H, groups of 2 channels
    "k5-h10": "n1g1c2o3i10x6k5x3s1x1p2x1d1x1",      # 5 kernel rows, 10 rows: 2.5 strips
    "depthwise": "n2g6c6o6i11x11k3x3s1x1p1x1d1x1",
    "3d": "n1g1c2o3i3x6x5k2x3x3s1x2x1p1x1x1d1x1x1",
    "1d": "n2g1c3o2i17k3s1p1d1",
    "1x1-out": "n2g1c5o1i9x7k1x1s1x1p0x0d1x1",     # an output layer's 1x1 to one channel
}


@pytest.mark.parametrize("layout", ["channels_first", "channels_last"])
@pytest.mark.parametrize("tag", list(STRIP_GEOMETRIES.values()), ids=list(STRIP_GEOMETRIES))
def test_direct_forward_in_row_strips(queue, rng, tag, layout):
    problem = Problem(geometry(tag), "forward", "float32", bias=True, layout=layout)
    for rows in (2, 4, 7):
        run_prepared(queue, rng, problem, DIRECT, {"wg": 32, "rows": rows})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_direct_forward_in_row_strips_and_blocks_other_dtypes(queue, rng, dtype):
    if dtype == "float64" and not supports_fp64(queue.device):
        pytest.skip(f"{queue.device.name!r} has no cl_khr_fp64")
    problem = Problem(geometry(STRIP_GEOMETRIES["k3p1-h9"]), "forward", dtype, bias=True)
    run_prepared(queue, rng, problem, DIRECT, {"wg": 32, "rows": 4})
    run_prepared(queue, rng, problem, DIRECT, {"wg": 32, "rows": 4, "cob": 2})


@pytest.mark.parametrize("layout", ["channels_first", "channels_last"])
@pytest.mark.parametrize("tag", [t for k, t in STRIP_GEOMETRIES.items() if k != "depthwise"],
                         ids=[k for k in STRIP_GEOMETRIES if k != "depthwise"])
def test_direct_forward_in_channel_blocks(queue, rng, tag, layout):
    """clc_direct_forward_block: blocks of output channels that divide a group's (3 of 3 and 6 of 6,
    2 and 3 of 6 beside groups), with and without strips of rows."""
    problem = Problem(geometry(tag), "forward", "float32", bias=True, layout=layout)
    per_group = problem.geometry.cout_per_group
    for cob in sorted({c for c in (2, 3, per_group) if per_group % c == 0 and c > 1}):
        for rows in (1, 4):
            run_prepared(queue, rng, problem, DIRECT, {"wg": 32, "rows": rows, "cob": cob})
