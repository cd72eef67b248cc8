"""direct's CPU weight gradient in register tiles of taps x output channels
(kernels/direct_taps.mako), below the public ops (helpers.run_prepared) with configurations named
here, on this machine's device where it is a CPU with vector lanes (the configurations need none of
its limits but the lanes; elsewhere they skip): 1D/2D/3D, grouped, stride, dilation, asymmetric and over-wide padding,
kernel rows wider than a tile (the last tile row shifted back), output channels that do not fill a
block, one slice straight into dw and several (partials summed in order), batch chunks adding on,
both layouts, float64 and 16-bit storage, small integers bit for bit, repeated runs bit for bit.
Then the configurations the CPU heuristic offers, on devices described by hand."""

from __future__ import annotations

import numpy as np
import pytest

from clconv import reference
from clconv.algorithms import REGISTRY
from clconv.algorithms.direct import taps_configs, taps_first, taps_lanes, taps_pointwise_tiles, taps_tiles
from clconv.plan import Problem

from cases import geometry
from helpers import fake_device, in_both_layouts, result_of, run_prepared, skip_without_cpu_lanes

DIRECT = REGISTRY["direct"]

GEOMETRIES = {
    "2d-5x5": "n2g1c3o20i9x8k5x5s1x1p2x2d1x1",                  # 20 output channels: a partial block
    "2d-s2-d2-asym": "n1g2c4o6i13x9k3x3s2x1p2x0e1x2d2x1",       # stride, dilation, asymmetric padding
    "2d-widepad-odd": "n3g3c6o9i5x7k3x2s1x2p3x2d1x1",           # padding wider than the kernel
    "2d-stem-7x7-s2": "n1g1c3o8i15x15k7x7s2x2p3x3d1x1",
    "3d": "n1g3c6o6i3x6x5k2x3x3s1x2x1p1x1x1d1x1x1",
    "1d": "n2g4c8o8i17k3s1p1d1",
    "2d-no-padding": "n2g1c2o4i6x7k3x3s1x1p0x0d1x1",
}
# (TH, TW, NB, VN, slices): tiles narrower and shorter than the kernel (and not dividing it: the last
# shifted back), whole rows and columns, blocks of 4-16 lanes, slices more than the pixels (empty ones)
CONFIGS = [(1, 2, 2, 4, 1), (2, 3, 1, 8, 3), (3, 1, 3, 4, 2), (1, 5, 2, 4, 1000), (2, 4, 1, 16, 1), (3, 3, 1, 4, 2),
           (1, 3, 3, 8, 2)]


@pytest.fixture(autouse=True)
def _device_with_lanes(request):
    skip_without_cpu_lanes(request, "the taps")


def _configs(problem):
    kh, kw = problem.geometry.kernel[1:]
    return [{"TH": th, "TW": tw, "NB": nb, "VN": vn, "slices": s} for th, tw, nb, vn, s in CONFIGS
            if th <= kh and tw <= kw]


@pytest.mark.parametrize("tag", list(GEOMETRIES.values()), ids=list(GEOMETRIES))
def test_taps_match_the_reference(queue, rng, tag):
    for layout in ("channels_first", "channels_last"):
        problem = Problem(geometry(tag), "backward_weight", "float32", layout=layout)
        assert len(_configs(problem)) >= 2
        _check_each(queue, rng, problem, _configs(problem))


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_taps_in_other_dtypes(queue, rng, dtype):
    for problem in in_both_layouts(queue, GEOMETRIES["2d-s2-d2-asym"], "backward_weight", dtype):
        _check_each(queue, rng, problem, ({"TH": 2, "TW": 2, "NB": 2, "VN": 4, "slices": 3},
                                          {"TH": 1, "TW": 3, "NB": 1, "VN": 4, "slices": 1}))


def _check_each(queue, rng, problem, configs):
    for config in configs:
        run_prepared(queue, rng, problem, DIRECT, config)


def test_taps_in_batch_chunks(queue, rng, monkeypatch):
    """A workspace limit that holds one image's copy of dy: a launch pair per image, the later ones
    adding onto dw (one slice) or onto the slices' partials; 16-bit storage sums in the partials."""
    problem = Problem(geometry("n3g1c4o5i7x6k3x3s1x1p1x1d1x1"), "backward_weight", "float32")
    g = problem.geometry
    one_image = g.out_pixels * 8 * 4  # 5 output channels padded to a block of 2 x 4 lanes
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(one_image + g.weight_elements * 4 * 2))
    for dtype in ("float32", "bfloat16"):
        problem = Problem(g, "backward_weight", dtype)
        for slices in (1, 2):
            runner = run_prepared(queue, rng, problem, DIRECT, {"TH": 2, "TW": 3, "NB": 2, "VN": 4, "slices": slices})
            assert sum(launch.call.entry == "clc_direct_backward_weight_taps" for launch in runner.launches) == 3




def test_taps_small_integers_exact_and_repeatable(queue):
    """Small integers sum exactly in float32: every tile and slice layout gives the reference bit
    for bit, and a second run the first's bits."""
    rng = np.random.default_rng(7)
    problem = Problem(geometry("n2g2c6o10i8x7k3x5s1x2p1x2d1x1"), "backward_weight", "float32")
    g = problem.geometry
    x = rng.integers(-3, 4, size=problem.spec.shape("x", g)).astype(np.float32)
    dy = rng.integers(-3, 4, size=problem.spec.shape("dy", g)).astype(np.float32)
    want = reference.run_pass("backward_weight", g, x.astype(np.float64), dy.astype(np.float64), None)
    for config in ({"TH": 3, "TW": 3, "NB": 2, "VN": 4, "slices": 1}, {"TH": 2, "TW": 5, "NB": 1, "VN": 8, "slices": 4}):
        first = result_of(queue, problem, DIRECT, config, {"x": x, "dy": dy})
        np.testing.assert_array_equal(first, want.astype(np.float32))
        np.testing.assert_array_equal(result_of(queue, problem, DIRECT, config, {"x": x, "dy": dy}), first)


# -- the configurations the heuristic offers (no device needed) --------------------------------------

def _problem(tag, dtype="float32"):
    return Problem(geometry(tag), "backward_weight", dtype)


def test_tiles_fit_the_vector_registers():
    avx512, avx2 = fake_device(False, 2, float_lanes=16), fake_device(False, 2, float_lanes=8)
    for device, registers in ((avx512, 32), (avx2, 16)):
        for tag in ("n2g1c48o64i17x17k5x5s1x1p2x2d1x1", "n2g1c3o64i112x112k7x7s2x2p3x3d1x1",
                    "n4g1c64o64i28x28k3x3s1x1p1x1d1x1"):
            tiles = taps_tiles(_problem(tag), device)
            assert tiles
            for th, tw, nb in tiles:
                assert th * tw * nb + nb + 1 <= registers * 13 / 16
    # 3x3 16 -> 16 with 16 lanes: one vector of output channels, so the whole kernel's 9 taps (9
    # independent sums); with 64 output channels 4 vectors and fewer taps
    assert taps_tiles(_problem("n4g1c16o16i28x28k3x3s1x1p1x1d1x1"), avx512)[0] == (3, 3, 1)
    assert taps_tiles(_problem("n2g1c48o64i17x17k5x5s1x1p2x2d1x1"), avx512)[0] == (1, 5, 4)


def test_configs_only_where_lanes_and_a_cpu():
    problem = _problem("n2g1c48o64i17x17k5x5s1x1p2x2d1x1")
    assert taps_lanes(problem, fake_device(True, 132, float_lanes=1)) == 0
    assert taps_configs(problem, fake_device(True, 132, float_lanes=1)) == []
    assert taps_configs(problem, fake_device(False, 2, float_lanes=1)) == []  # llvmpipe: no explicit vectors
    configs = taps_configs(problem, fake_device(False, 2, float_lanes=16))
    assert configs and all(c["VN"] == 16 for c in configs)
    # doubles take the double lanes
    assert taps_lanes(_problem("n2g1c48o64i17x17k5x5s1x1p2x2d1x1", "float64"),
                      fake_device(False, 2, float_lanes=16)) in (0, 4, 8, 16)


def test_slices_fill_the_cores_on_few_work_items():
    """A stem of 3 input channels and one block of output channels: its 21-42 work-items are cut
    into slices for TAPS_FILL work-items a core; a layer with work-items enough is not cut."""
    many = fake_device(False, 32, float_lanes=16)
    stem = taps_configs(_problem("n2g1c3o64i112x112k7x7s2x2p3x3d1x1"), many)[0]
    assert stem["slices"] > 1
    wide = taps_configs(_problem("n4g1c64o64i28x28k3x3s1x1p1x1d1x1"), fake_device(False, 2, float_lanes=16))[0]
    assert wide["slices"] == 1


# -- 1x1 kernels: CB input channels a work-item -----------------------------------------------------

POINTWISE = {
    "2d": "n3g1c16o20i5x7k1x1s1x1p0x0d1x1",       # 20 output channels: a partial block
    "2d-s2-groups": "n2g2c12o8i7x7k1x1s2x2p0x0d1x1",
    "1d-padded": "n2g1c6o40i9k1s1p1d1",           # padding: taps reading zeros at the row's ends
    "3d": "n1g1c8o8i3x4x5k1x1x1s1x1x1p0x0x0d1x1x1",
}


@pytest.mark.parametrize("tag", list(POINTWISE.values()), ids=list(POINTWISE))
def test_pointwise_taps_match_the_reference(queue, rng, tag):
    for layout, config in (("channels_first", {"TH": 1, "TW": 1, "CB": 2, "NB": 2, "VN": 4, "slices": 3}),
                           ("channels_last", {"TH": 1, "TW": 1, "CB": 4, "NB": 1, "VN": 8, "slices": 1})):
        problem = Problem(geometry(tag), "backward_weight", "float32", layout=layout)
        cb = config["CB"] if problem.geometry.cin_per_group % config["CB"] == 0 else 1
        run_prepared(queue, rng, problem, DIRECT, {**config, "CB": cb})


def test_pointwise_taps_in_16_bit_storage(queue, rng):
    for problem in in_both_layouts(queue, POINTWISE["2d-s2-groups"], "backward_weight", "bfloat16"):
        run_prepared(queue, rng, problem, DIRECT, {"TH": 1, "TW": 1, "CB": 3, "NB": 2, "VN": 4, "slices": 2})


def test_pointwise_tiles_take_input_channels_that_divide_the_group():
    avx512 = fake_device(False, 2, float_lanes=16)
    problem = _problem("n4g1c256o64i28x28k1x1s1x1p0x0d1x1")
    tiles = taps_pointwise_tiles(problem, avx512)
    assert tiles and all(256 % cb == 0 and cb * nb + nb + 1 <= 32 * 13 / 16 for cb, nb in tiles)
    assert tiles[0][0] > 1  # more than one input channel: one broadcast a pixel starves the FMAs
    assert taps_pointwise_tiles(_problem("n4g1c64o64i28x28k3x3s1x1p1x1d1x1"), avx512) == []
    assert all(c["CB"] in (1, 2, 3, 4, 6, 12) for c in taps_configs(_problem("n2g2c12o8i7x7k1x1s2x2p0x0d1x1"), avx512))
    # channels-last 1x1 weight gradients take the taps first; channels-first ones keep gemm1x1 / im2col
    last = Problem(geometry("n4g1c256o64i28x28k1x1s1x1p0x0d1x1"), "backward_weight", "float32", layout="channels_last")
    assert taps_first(last, avx512) and not taps_first(problem, avx512)
