"""direct's CPU forward and data gradient in register tiles of result channels
(kernels/direct_channels.mako), below the public ops (helpers.run_prepared) with configurations
named here, on this machine's device where it is a CPU with vector lanes (elsewhere they skip): 1D,
2D and 3D, grouped, stride (the data gradient's phases) and dilation, asymmetric and over-wide padding, result
channels that do not fill a block, rows that do not fill a tile, a 1x1 channels-last source read in
place (its last tile past the batch's last pixel), both layouts, the epilogue (bias, residual,
activation), float64 and 16-bit storage, small integers bit for bit, repeated runs bit for bit.
Then the configurations and the order the CPU heuristic gives, on devices described by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from clconv import limits, planner, reference
from clconv.algorithms import REGISTRY
from clconv.algorithms.direct import (CHANNELS_REGISTERS, channels_configs, channels_frame, channels_lanes,
                                      channels_tiles, channels_tiles_before_columns, channels_tiles_first)
from clconv.epilogue import Epilogue
from clconv.plan import Problem

from cases import geometry
from helpers import fake_device, in_both_layouts, result_of, run_prepared, skip_without_cpu_lanes

DIRECT = REGISTRY["direct"]

GEOMETRIES = {
    "2d-5x5": "n2g1c3o20i9x8k5x5s1x1p2x2d1x1",                  # 20 result channels: a partial block
    "2d-s2-d2-asym": "n1g2c4o6i13x9k3x3s2x1p2x0e1x2d2x1",       # stride, dilation, asymmetric padding
    "2d-s3-k2": "n2g1c5o4i11x10k2x2s3x3p1x0d1x1",               # a stride over the kernel: pixels no tap reaches
    "3d-s2": "n1g1c4o6i5x6x7k3x3x3s2x2x2p1x1x1d1x1x1",
    "2d-widepad": "n3g3c6o9i5x7k3x2s1x1p3x2d1x1",               # padding wider than the kernel
    "2d-dilated": "n2g1c8o12i9x9k3x3s1x1p1x1d2x2",              # the data gradient's padding below zero
    "3d": "n1g3c6o6i3x6x5k2x3x3s1x1x1p1x1x1d1x1x1",
    "1d": "n2g4c8o8i17k3s1p1d1",
    "1x1": "n3g1c16o20i5x7k1x1s1x1p0x0d1x1",                    # channels-last: read in place, 105 pixels flat
    "1x1-s2": "n2g1c8o6i7x7k1x1s2x2p0x0d1x1",                   # strided: half the data gradient's phases empty
}
# (PX, NB, VN): tiles wider than a row, of one pixel, blocks of 4-16 lanes, blocks wider than a group
CONFIGS = [(3, 2, 4), (1, 1, 8), (5, 1, 16), (2, 3, 4), (7, 2, 8)]


@pytest.fixture(autouse=True)
def _device_with_lanes(request):
    skip_without_cpu_lanes(request, "the channel tiles")


@pytest.mark.parametrize("tag", list(GEOMETRIES.values()), ids=list(GEOMETRIES))
def test_channel_tiles_match_the_reference(queue, rng, tag):
    """Each pass and layout of each geometry with one configuration, taken in turn from CONFIGS
    (each program a build: every configuration on every case took minutes on PoCL)."""
    turn = list(GEOMETRIES.values()).index(tag)
    for pass_ in ("forward", "backward_data"):
        for layout in ("channels_first", "channels_last"):
            px, nb, vn = CONFIGS[turn % len(CONFIGS)]
            turn += 1
            run_prepared(queue, rng, Problem(geometry(tag), pass_, "float32", layout=layout), DIRECT,
                         {"PX": px, "NB": nb, "VN": vn})


def test_the_flat_source_is_read_in_place(queue, rng):
    """A 1x1 stride-1 unpadded channels-last layer: no copy of the source, tiles flat over the batch
    (105 pixels in tiles of 4: the last one reads past the batch's last pixel, clamped, not stored)."""
    problem = Problem(geometry(GEOMETRIES["1x1"]), "forward", "float32", layout="channels_last")
    assert channels_frame(problem, 4)["flat"]
    runner = run_prepared(queue, rng, problem, DIRECT, {"PX": 4, "NB": 1, "VN": 8})
    assert [launch.call.entry for launch in runner.launches] == ["clc_pack_channels", "clc_direct_channels"]
    assert not channels_frame(Problem(geometry(GEOMETRIES["1x1"]), "forward", "float32"), 4)["flat"]


@pytest.mark.parametrize("pass_", ["forward", "backward_data"])
def test_channel_tiles_through_the_epilogue(queue, rng, pass_):
    """The bias, a residual scaled by beta, alpha and an activation (the forward's, and the data
    gradient's as a transposed convolution's forward has them)."""
    epilogue = Epilogue("leaky_relu", negative_slope=0.2, alpha=0.75, beta=-0.5, residual=True)
    for layout in ("channels_first", "channels_last"):
        problem = Problem(geometry(GEOMETRIES["2d-widepad"]), pass_, "float32", bias=True, epilogue=epilogue,
                          layout=layout)
        run_prepared(queue, rng, problem, DIRECT, {"PX": 3, "NB": 1, "VN": 4})


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_channel_tiles_in_other_dtypes(queue, rng, dtype):
    for pass_ in ("forward", "backward_data"):
        for problem in in_both_layouts(queue, GEOMETRIES["2d-dilated"], pass_, dtype):
            run_prepared(queue, rng, problem, DIRECT, {"PX": 3, "NB": 2, "VN": 4})


@pytest.mark.parametrize("pass_", ["forward", "backward_data"])
def test_small_integers_exact_and_repeatable(queue, pass_):
    """Small integers sum exactly in float32: every tile gives the reference bit for bit, and a
    second run the first's bits."""
    rng = np.random.default_rng(7)
    problem = Problem(geometry("n2g2c6o10i8x7k3x5s1x1p1x2d1x1"), pass_, "float32")
    g, spec = problem.geometry, problem.spec
    source = rng.integers(-3, 4, size=spec.shape(spec.inputs[0], g)).astype(np.float32)
    weight = rng.integers(-3, 4, size=spec.shape("w", g)).astype(np.float32)
    inputs = {spec.inputs[0]: source, "w": weight}
    want = reference.run_pass(pass_, g, *(inputs[role].astype(np.float64) for role in spec.inputs), None)
    for config in ({"PX": 3, "NB": 2, "VN": 4}, {"PX": 5, "NB": 1, "VN": 8}):
        first = result_of(queue, problem, DIRECT, config, inputs)
        np.testing.assert_array_equal(first, want.astype(np.float32))
        np.testing.assert_array_equal(result_of(queue, problem, DIRECT, config, inputs), first)


# -- the configurations and order the heuristic gives (no device needed) -----------------------------

AVX512, AVX2 = fake_device(False, 2, float_lanes=16), fake_device(False, 2, float_lanes=8)


def _problem(tag, pass_="forward", layout="channels_last", dtype="float32"):
    return Problem(geometry(tag), pass_, dtype, layout=layout)


def test_tiles_fit_the_vector_registers_and_sum_enough():
    for device, registers in ((AVX512, 32), (AVX2, 16)):
        for tag in ("n2g1c256o256i7x7k3x3s1x1p1x1d1x1", "n4g1c64o64i28x28k3x3s1x1p1x1d1x1",
                    "n4g1c256o64i28x28k1x1s1x1p0x0d1x1"):
            tiles = channels_tiles(_problem(tag), device)
            assert tiles
            for px, nb in tiles:
                assert 8 <= px * nb and px * nb + nb + 1 <= registers * CHANNELS_REGISTERS


def test_tiles_fill_rows_and_keep_a_block_in_the_cache():
    """A 7x7 image's rows in tiles of 7 pixels; 256 channels x 9 taps in blocks of two vectors (295
    KiB: three would take 442 KiB, more than half a 1 MiB cache); 512 -> 512 in blocks of one."""
    avx512 = fake_device(False, 2, float_lanes=16)
    limits.register(avx512, dataclasses.replace(limits.of(avx512), core_cache=2 ** 20))
    assert channels_tiles(_problem("n2g1c256o256i7x7k3x3s1x1p1x1d1x1"), avx512)[0] == (7, 2)
    px, nb = channels_tiles(_problem("n1g1c512o512i14x14k3x3s1x1p1x1d1x1"), avx512)[0]
    assert nb == 1 and 14 % px == 0


def test_tiles_serve_forwards_and_data_gradients_on_cpus_with_lanes():
    assert channels_configs(_problem("n2g1c8o6i7x7k1x1s2x2p0x0d1x1"), AVX512)
    assert channels_configs(_problem("n2g1c8o6i7x7k1x1s2x2p0x0d1x1", "backward_data"), AVX512)
    assert channels_configs(_problem("n2g1c64o64i28x28k3x3s1x1p1x1d1x1", "backward_weight"), AVX512) == []
    assert channels_configs(_problem("n2g1c64o64i28x28k3x3s1x1p1x1d1x1"), fake_device(True, 132, float_lanes=1)) == []
    assert channels_configs(_problem("n2g1c64o64i28x28k3x3s1x1p1x1d1x1"), fake_device(False, 2, float_lanes=1)) == []


def test_the_heuristic_takes_the_tiles_first_for_channels_last_only():
    layer = "n4g1c64o64i28x28k3x3s1x1p1x1d1x1"
    for pass_ in ("forward", "backward_data"):
        last = _problem(layer, pass_)
        assert channels_tiles_first(last, AVX512)
        assert planner.heuristic_order(last, AVX512)[0] == "direct"
        assert "PX" in DIRECT.configs(last, AVX512)[0]
        first = _problem(layer, pass_, "channels_first")
        assert not channels_tiles_first(first, AVX512)
        assert planner.heuristic_order(first, AVX512)[0] != "direct"
        assert "PX" in DIRECT.configs(first, AVX512)[0]  # direct's first, for tuning to time
    tiny = _problem("n1g1c2o4i6x6k3x3s1x1p1x1d1x1", layout="channels_first")
    assert "wg" in DIRECT.configs(tiny, AVX512)[0]  # the per-element kernel, which builds fastest
    # 1x1 layers too (before gemm1x1, whose CPU kernels read channels-first rows)
    assert planner.heuristic_order(_problem("n4g1c256o64i28x28k1x1s1x1p0x0d1x1"), AVX512)[0] == "direct"
    # strided data gradients too; not depthwise layers (depthwise_rows) nor tiny passes (the per-element kernel)
    assert channels_tiles_first(_problem("n4g1c64o64i28x28k3x3s2x2p1x1d1x1", "backward_data"), AVX512)
    assert not channels_tiles_first(_problem("n4g144c144o144i28x28k3x3s1x1p1x1d1x1"), AVX512)
    assert not channels_tiles_first(_problem("n1g1c2o4i6x6k3x3s1x1p1x1d1x1"), AVX512)


def test_vectors_narrow_to_a_groups_result_channels():
    """Fewer result channels a group than the CPU's lanes: the fewest powers of two (4 at least)
    that hold them; as many or more: the CPU's lanes."""
    assert channels_lanes(_problem("n2g32c256o256i14x14k3x3s1x1p1x1d1x1"), AVX512) == 8   # 8 a group
    assert channels_lanes(_problem("n1g1c3o64i224x224k7x7s2x2p3x3d1x1", "backward_data"), AVX512) == 4  # 3
    assert channels_lanes(_problem("n1g1c3o64i224x224k7x7s2x2p3x3d1x1"), AVX512) == 16
    assert channels_lanes(_problem("n2g1c16o24i8x8k3x3s1x1p1x1d1x1"), AVX2) == 8
    assert all(c["VN"] == 8 for c in channels_configs(_problem("n2g32c256o256i14x14k3x3s1x1p1x1d1x1"), AVX512))


def test_channels_first_the_tiles_come_before_im2col_for_long_columns():
    """3x3x3 kernels, dilated kernels and 8-16 result channels a group (direct.channels_tiles_before_columns):
    after Winograd and gemm1x1 where they come first, before im2col."""
    def order(tag, pass_="forward"):
        return planner.heuristic_order(_problem(tag, pass_, "channels_first"), AVX512)

    for tag in ("n2g1c64o64i8x28x28k3x3x3s1x1x1p1x1x1d1x1x1", "n1g1c512o512i28x28k3x3s1x1p4x4d4x4",
                "n2g32c512o512i14x14k3x3s1x1p1x1d1x1", "n4g8c64o64i56x56k3x3s1x1p1x1d1x1"):
        for pass_ in ("forward", "backward_data"):
            assert channels_tiles_before_columns(_problem(tag, pass_, "channels_first"), AVX512), (tag, pass_)
            assert order(tag, pass_).index("direct") < order(tag, pass_).index("im2col"), (tag, pass_)
    for tag in ("n2g1c64o64i8x28x28k3x1x1s1x1x1p1x0x0d1x1x1",  # 3 taps deep
                "n4g32c128o128i56x56k3x3s1x1p1x1d1x1",          # 4 channels a group
                "n2g1c512o512i7x7k3x3s1x1p1x1d1x1",             # plain 3x3
                "n1g1c3o64i224x224k7x7s2x2p3x3d1x1"):           # 49 taps in 2D
        assert not channels_tiles_before_columns(_problem(tag, "forward", "channels_first"), AVX512), tag
    # channels-last takes the tiles first anyway; a tiny pass keeps the per-element kernel
    assert not channels_tiles_before_columns(_problem("n2g1c64o64i8x28x28k3x3x3s1x1x1p1x1x1d1x1x1"), AVX512)
    assert not channels_tiles_before_columns(_problem("n1g1c2o4i6x6k3x3s1x1p2x2d2x2", layout="channels_first"),
                                             AVX512)
