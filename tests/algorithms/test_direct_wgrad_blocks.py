"""direct's weight gradient in blocks (clc_direct_backward_weight_blocks, the GPU's first guess for
grouped layers with few channels per group), below the public ops (helpers.run_prepared) on this
machine's device with configurations named here: grouped 1D/2D/3D, stride, dilation, asymmetric and
over-wide padding, odd sizes, both layouts, blocks of every shape (one and several input and output
channels, a whole group), one slice (straight into dw) and several (partials summed by
clc_splitk_sum), slices more than the batch x pixels fill (empty ones), float64, 16-bit storage,
small integers bit for bit and repeated runs bit for bit.  Then the configurations and the GPU
heuristic's rule, on devices described by hand."""

from __future__ import annotations

import numpy as np
import pytest

from clconv import planner, reference
from clconv.algorithms import REGISTRY
from clconv.algorithms.direct import block_configs, weight_blocks
from clconv.plan import Problem
from clconv.tools.devices import H200

from cases import geometry
from helpers import fake_device, in_both_layouts, result_of, run_prepared

DIRECT = REGISTRY["direct"]

GEOMETRIES = {
    "2d-g2x4": "n2g2c8o8i9x7k3x3s1x1p1x1d1x1",                  # 2 groups of 4 -> 4
    "2d-s2-d2-asym": "n1g2c4o6i13x9k3x3s2x1p2x0e1x2d2x1",       # stride, dilation, asymmetric padding
    "2d-widepad-odd": "n3g3c6o9i5x7k3x2s1x2p3x2d1x1",           # padding wider than the kernel; 2 -> 3
    "3d": "n1g3c6o6i3x6x5k2x3x3s1x2x1p1x1x1d1x1x1",
    "1d": "n2g4c8o8i17k3s1p1d1",
}
CONFIGS = [  # (cob, cib, wg, slices); blocks that do not divide a group are left out
    (2, 2, 16, 3), (1, 1, 32, 1), (2, 1, 8, 2), (4, 2, 16, 5), (3, 2, 32, 2), (1, 2, 16, 1000),
]


def _configs(problem):
    g = problem.geometry
    return [{"cob": o, "cib": i, "wg": wg, "slices": s} for o, i, wg, s in CONFIGS
            if g.cout_per_group % o == 0 and g.cin_per_group % i == 0]


@pytest.mark.parametrize("layout", ["channels_first", "channels_last"])
@pytest.mark.parametrize("tag", list(GEOMETRIES.values()), ids=list(GEOMETRIES))
def test_blocks_match_the_reference(queue, rng, tag, layout):
    problem = Problem(geometry(tag), "backward_weight", "float32", layout=layout)
    configs = _configs(problem)
    assert len(configs) >= 2
    for config in configs:
        run_prepared(queue, rng, problem, DIRECT, config)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_blocks_in_other_dtypes(queue, rng, dtype):
    for problem in in_both_layouts(queue, GEOMETRIES["2d-s2-d2-asym"], "backward_weight", dtype):
        for config in ({"cob": 3, "cib": 2, "wg": 16, "slices": 3}, {"cob": 3, "cib": 1, "wg": 8, "slices": 1}):
            run_prepared(queue, rng, problem, DIRECT, config)


@pytest.mark.parametrize("tag", [GEOMETRIES["2d-s2-d2-asym"], GEOMETRIES["3d"]], ids=["2d-s2-d2-asym", "3d"])
def test_blocks_exact_on_small_integers_and_repeatable(queue, rng, tag):
    """Small integers: every partial sum exact in float32, so the result equals the float64
    reference bit for bit (a dropped, doubled or misplaced term cannot hide in a tolerance); then
    random floats give the same bits on two runs (one fixed summation order)."""
    problem = Problem(geometry(tag), "backward_weight", "float32")
    g, spec = problem.geometry, problem.spec
    x = rng.integers(-3, 4, spec.shape("x", g)).astype(np.float32)
    dy = rng.integers(-3, 4, spec.shape("dy", g)).astype(np.float32)
    expected = reference.run_pass("backward_weight", g, x.astype(np.float64), dy.astype(np.float64), None)
    assert np.count_nonzero(expected) > expected.size // 2
    for config in _configs(problem):
        got = result_of(queue, problem, DIRECT, config, {"x": x, "dy": dy})
        assert np.array_equal(got, expected.astype(np.float32)), config
        xf = rng.standard_normal(x.shape).astype(np.float32)
        dyf = rng.standard_normal(dy.shape).astype(np.float32)
        first, second = (result_of(queue, problem, DIRECT, config, {"x": xf, "dy": dyf}) for _ in range(2))
        assert np.isfinite(first).all() and np.array_equal(first.view(np.uint32), second.view(np.uint32)), config


def _problem(tag, pass_="backward_weight", dtype="float32", layout="channels_first"):
    return Problem(geometry(tag), pass_, dtype, layout=layout)


def test_weight_blocks_choose_output_channels_first():
    # ResNeXt's 3x3 groups of 4, 8, 16: one input channel, up to 8 output channels (36-72 sums)
    assert weight_blocks(_problem("n8g32c128o128i56x56k3x3s1x1p1x1d1x1"))[0] == (4, 1)
    assert weight_blocks(_problem("n8g32c256o256i28x28k3x3s1x1p1x1d1x1"))[0] == (8, 1)
    assert weight_blocks(_problem("n8g32c512o512i14x14k3x3s1x1p1x1d1x1"))[0] == (8, 1)
    # 3 taps: input channels join while the sums stay within 32
    assert weight_blocks(_problem("n8g32c128o128i64k3s1p1d1"))[0] == (4, 2)
    # 27 taps: 4 x 27 = 108 sums; in double at most 64: 2 output channels
    assert weight_blocks(_problem("n2g32c128o128i8x8x8k3x3x3s1x1x1p1x1x1d1x1x1"))[0] == (4, 1)
    assert weight_blocks(_problem("n2g32c128o128i8x8x8k3x3x3s1x1x1p1x1x1d1x1x1", dtype="float64"))[0] == (2, 1)
    # a kernel of more taps than the registers hold: no block (the per-element kernel serves)
    assert weight_blocks(_problem("n1g2c4o4i9x9x9k7x7x7s1x1x1p3x3x3d1x1x1")) == []


def test_blocks_are_the_gpus_configs_only():
    problem = _problem("n8g32c128o128i56x56k3x3s1x1p1x1d1x1")
    gpu, cpu = H200.stand_in(), fake_device(gpu=False, compute_units=2)
    first = DIRECT.configs(problem, gpu)[0]
    assert first == block_configs(problem, gpu)[0] and first["cob"] == 4 and first["wg"] == 128
    assert first["slices"] > 1  # 128 blocks do not fill 132 compute units four times over
    # the CPU's configurations stay the work-group per weight element
    assert all("cob" not in c for c in DIRECT.configs(problem, cpu))
    # 1024 blocks (32 groups of 16 at 14x14): work-groups of 64, one slice
    many = DIRECT.configs(_problem("n8g32c512o512i14x14k3x3s1x1p1x1d1x1"), gpu)[0]
    assert (many["wg"], many["cob"], many["slices"]) == (64, 8, 1)


def test_gpu_heuristic_puts_blocks_first_below_a_tiles_rows():
    gpu = H200.stand_in()
    for tag in ("n32g64c256o256i56x56k3x3s1x1p1x1d1x1", "n32g32c256o256i28x28k3x3s1x1p1x1d1x1",
                "n32g32c512o512i14x14k3x3s1x1p1x1d1x1", "n16g32c128o128i2048k3s1p1d1",
                "n1g32c128o128i56x56k3x3s1x1p1x1d1x1",
                # one group of 16-24 output channels: the same GEMM rows as a grouped layer's
                "n32g1c16o16i56x56k3x3s1x1p1x1d1x1", "n8g1c24o24i56x56k3x3s1x1p1x1d1x1",
                "n32g1c32o16i112x112k1x1s1x1p0x0d1x1"):
        for layout in ("channels_first", "channels_last"):
            algorithm, config = planner.candidates(_problem(tag, layout=layout), gpu)[0]
            assert algorithm.name == "direct" and "cob" in config, (tag, layout)
    # 32 output channels a group (a full tile's rows): after Winograd where it pays (batch 32),
    # before split-K and the GEMMs where it does not (batch 8)
    order = planner.heuristic_order(_problem("n32g32c1024o1024i7x7k3x3s1x1p1x1d1x1"), gpu)
    assert order[:3] == ["winograd", "direct", "splitk"]
    assert planner.heuristic_order(_problem("n8g32c1024o1024i7x7k3x3s1x1p1x1d1x1"), gpu)[0] == "direct"
    # 64 a group (grouped or not), depthwise, the other passes, a kernel too large for a block: unchanged
    for tag, pass_ in (("n32g8c512o512i14x14k3x3s1x1p1x1d1x1", "backward_weight"),
                       ("n32g144c144o144i56x56k3x3s1x1p1x1d1x1", "backward_weight"),
                       ("n32g1c64o64i56x56k3x3s1x1p1x1d1x1", "backward_weight"),
                       ("n32g64c256o256i56x56k3x3s1x1p1x1d1x1", "backward_data"),
                       ("n32g64c256o256i56x56k3x3s1x1p1x1d1x1", "forward"),
                       ("n1g2c4o4i9x9x9k7x7x7s1x1x1p3x3x3d1x1x1", "backward_weight")):
        assert not planner._weight_blocks_first(_problem(tag, pass_)), tag
