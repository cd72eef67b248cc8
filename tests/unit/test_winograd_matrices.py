"""Winograd's transform matrices (algorithms/winograd.py ``TRANSFORMS``) in float64, without a
device: the forward identity, the weight gradient's reading of it backwards, which tile side the
configs offer first, and the tiles of a dilated layer's phases."""

from __future__ import annotations

import numpy as np
import pytest

from clconv import limits
from clconv.algorithms import REGISTRY
from clconv.algorithms.winograd import (CPU_GROUP_ITEMS, F4_MIN_TILES, GPU_F4_WEIGHT_MIN_TILES,
                                         GPU_LARGE_FIRST_MIN_TILES, MIN_TILES, SIDES, TRANSFORMS, cpu_work_group)
from clconv.plan import Problem

from cases import geometry
from clconv.tools.devices import H200
from helpers import fake_device


def _matrices(variant):
    return (np.array(rows, dtype=np.float64) for rows in TRANSFORMS[variant])


def test_every_kernel_side_has_its_tile_sides():
    assert set(TRANSFORMS) == {(m, r) for r, sides in SIDES.items() for m in sides}


@pytest.mark.parametrize("m, r", sorted(TRANSFORMS), ids=[f"F{m}x{m}-{r}x{r}" for m, r in sorted(TRANSFORMS)])
def test_forward_tile_is_the_correlation(m, r):
    """A^T [(G g) . (B^T d)] = sum_j g[j] d[i + j] for M outputs of a length-R filter, and the 2D
    tile A^T [(G g G^T) . (B^T d B)] A the 2D correlation."""
    bt, g_, at = _matrices((m, r))
    alpha = m + r - 1
    assert bt.shape == (alpha, alpha) and g_.shape == (alpha, r) and at.shape == (m, alpha)
    rng = np.random.default_rng(m * 10 + r)
    g, d = rng.standard_normal(r), rng.standard_normal(alpha)
    expected = [sum(g[j] * d[i + j] for j in range(r)) for i in range(m)]
    np.testing.assert_allclose(at @ ((g_ @ g) * (bt @ d)), expected, rtol=0, atol=1e-13)
    g2, d2 = rng.standard_normal((r, r)), rng.standard_normal((alpha, alpha))
    tile = at @ ((g_ @ g2 @ g_.T) * (bt @ d2 @ bt.T)) @ at.T
    expected2 = [[np.sum(g2 * d2[i:i + r, k:k + r]) for k in range(m)] for i in range(m)]
    np.testing.assert_allclose(tile, expected2, rtol=0, atol=1e-12)


@pytest.mark.parametrize("m, r", sorted(TRANSFORMS), ids=[f"F{m}x{m}-{r}x{r}" for m, r in sorted(TRANSFORMS)])
def test_weight_gradient_reads_the_identity_backwards(m, r):
    """G^T [(A dy A^T) . (B^T d B)] G is the RxR weight gradient of one tile: sum over its M x M
    outputs of dy[i][k] d[i + a][k + b]."""
    bt, g_, at = _matrices((m, r))
    rng = np.random.default_rng(100 + m * 10 + r)
    dy, d = rng.standard_normal((m, m)), rng.standard_normal((m + r - 1, m + r - 1))
    got = g_.T @ ((at.T @ dy @ at) * (bt @ d @ bt.T)) @ g_
    expected = [[np.sum(dy * d[a:a + m, b:b + m]) for b in range(r)] for a in range(r)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("tag, pass_, tiles", [
    ("n2g1c4o4i9x11k3x3s1x1p1x1d1x1", "forward", 2 * 5 * 6),          # undilated: 5 x 6 2x2 tiles an image
    ("n2g1c4o4i9x11k3x3s1x1p2x2d2x2", "forward", 2 * 4 * 3 * 3),      # 4 phases of 5x6 .. 4x5 outputs: 3 x 3 tiles
    ("n1g1c4o4i13x13k3x3s1x1p3x0d3x1", "forward", 3 * 3 * 6),         # 3 row phases of 5, 4, 4 rows (3 tiles) x 11 columns
    ("n1g1c4o4i13x13k5x5s1x1p4x4d2x2", "backward_data", 4 * 4 * 4),   # dx's 13x13 in 4 phases of 7x7 .. 6x6
])
def test_a_dilated_layer_is_tiled_phase_by_phase(tag, pass_, tiles):
    """Each of the D_h x D_w phases (outputs whose rows and columns share their remainders mod the
    dilation) is an undilated convolution of the input's sub-grid: tiled alike, the largest phase's
    tile count for all of them."""
    assert REGISTRY["winograd"].tiles(Problem(geometry(tag), pass_, "float32"), 2) == tiles


H200_LIKE = H200.stand_in()  # as the planner saw the H200 of the stored runs


def _gpu_configs(tag: str, pass_: str):
    """The problem of ``tag`` and ``pass_``, the winograd algorithm and its configs on an H200."""
    problem = Problem(geometry(tag), pass_, "float32")
    winograd = REGISTRY["winograd"]
    return problem, winograd, winograd.configs(problem, H200_LIKE)


@pytest.mark.parametrize("tag, pass_, first", [
    ("n32g1c128o128i28x28k3x3s1x1p1x1d1x1", "forward", 4),         # 1568 4x4 tiles
    ("n64g1c160o320i7x7k3x3s1x1p1x1d1x1", "backward_data", 4),     # 256: F(4x4) 0.084 against F(2x2)'s 0.09 ms
    ("n32g1c512o512i7x7k3x3s1x1p1x1d1x1", "forward", 4),           # 128: F(4x4) 0.84x F(2x2)'s time
    ("n16g1c512o512i7x7k3x3s1x1p1x1d1x1", "forward", 2),           # 64: F(2x2) 0.90x F(4x4)'s time
    ("n2g1c1024o1024i16x16k3x3s1x1p1x1d1x1", "backward_data", 2),  # 32: F(2x2) 0.89x
    ("n1g1c256o256i14x14k3x3s1x1p1x1d1x1", "backward_data", 2),    # 16
    ("n1g1c512o512i7x7k3x3s1x1p1x1d1x1", "forward", 2),            # 4: F(2x2) 0.053 against 0.075 ms
    ("n32g1c512o512i7x7k3x3s1x1p1x1d1x1", "backward_weight", 4),   # 512 2x2 tiles: 0.13 against 0.18 ms
    ("n2g1c512o512i14x14k3x3s1x1p1x1d1x1", "backward_weight", 4),  # 98: F(4x4) 0.91-0.95x F(2x2)'s time
    ("n4g1c1024o1024i7x7k3x3s1x1p1x1d1x1", "backward_weight", 2),  # 64: a tie
    ("n2g2c4o6i7x6k3x3s1x1p1x1d1x1", "backward_weight", 2),        # 24
])
def test_the_larger_tile_comes_first_where_its_gemms_stay_large(tag, pass_, first):
    """On a GPU: from GPU_LARGE_FIRST_MIN_TILES 4x4 tiles (forward, data gradient) or
    GPU_F4_WEIGHT_MIN_TILES 2x2 tiles (weight gradient); the comments are H200 measurements
    (docs/perf/h200-tune-winograd-sides.json and the stored tuning runs)."""
    problem, winograd, configs = _gpu_configs(tag, pass_)
    assert configs[0]["m"] == first
    assert {c["m"] for c in configs[:3]} == set(SIDES[3])  # tuning's first candidates measure every side
    if pass_ == "backward_weight":
        assert (winograd.tiles(problem, 2) >= GPU_F4_WEIGHT_MIN_TILES) == (first == 4)
    else:
        assert (winograd.tiles(problem, 4) >= GPU_LARGE_FIRST_MIN_TILES[4, 3]) == (first == 4)


@pytest.mark.parametrize("tag, pass_, first", [
    ("n32g1c64o64i56x56k3x3s1x1p1x1d1x1", "backward_weight", 6),   # 3200 6x6 tiles: 0.94x F(4x4, 3x3)'s time
    ("n32g1c256o256i14x14k3x3s1x1p1x1d1x1", "backward_weight", 6),  # 288, the GEMM work tied: 0.90x
    ("n2g1c512o512i48x48k3x3s1x1p1x1d1x1", "backward_weight", 6),  # 128: 0.94x
    ("n2g1c512o512i14x14k3x3s1x1p1x1d1x1", "backward_weight", 4),  # 18: too few to contract over
    ("n32g1c512o512i7x7k3x3s1x1p1x1d1x1", "backward_weight", 4),   # 128, but 1.8x F(4x4, 3x3)'s GEMM work
    ("n256g1c16o16i32x32k3x3s1x1p1x1d1x1", "backward_weight", 4),  # 16 channels: 1.31x
    ("n4g1c50o50i256x256k3x3s1x1p1x1d1x1", "backward_weight", 6),  # 50: 0.85x
    ("n8g1c64o64i96x96k3x3s1x1p1x1d1x1", "forward", 4),            # 1.00x in the forward: never first there
    ("n2g1c512o512i48x48k3x3s1x1p1x1d1x1", "backward_data", 4),    # 0.96x (not enough to rely on)
])
def test_f6x6_comes_first_only_in_a_gpu_weight_gradient(tag, pass_, first):
    """F(6x6, 3x3) first in a GPU's weight gradient from GPU_WEIGHT_ONLY_SIDES of its tiles and
    GPU_WEIGHT_ONLY_MIN_CHANNELS channels, where its GEMM work is the least (the comments: H100
    runs, docs/perf/gpu38/); after the other sides in the forward and data gradient and on a CPU,
    where tuning still measures it."""
    problem, winograd, configs = _gpu_configs(tag, pass_)
    assert configs[0]["m"] == first
    assert {c["m"] for c in configs[:3]} == {2, 4, 6}
    if pass_ != "backward_weight":
        assert winograd.sides(problem, H200_LIKE)[-1] == 6
    cpu = fake_device(gpu=False, compute_units=2)
    assert winograd.sides(problem, cpu)[-1] == 6


@pytest.mark.parametrize("tag, pass_, first", [
    ("n32g1c128o128i28x28k3x3s1x1p1x1d1x1", "forward", 4),         # 1568 4x4 tiles
    ("n16g1c512o512i7x7k3x3s1x1p1x1d1x1", "forward", 4),           # 64
    ("n2g1c1024o1024i16x16k3x3s1x1p1x1d1x1", "backward_data", 4),  # 32
    ("n1g1c256o256i14x14k3x3s1x1p1x1d1x1", "backward_data", 2),    # 16
    ("n32g1c512o512i7x7k3x3s1x1p1x1d1x1", "backward_weight", 4),   # 512 2x2 tiles
    ("n2g1c512o512i14x14k3x3s1x1p1x1d1x1", "backward_weight", 2),  # 98
    ("n1g1c256o256i14x14k5x5s1x1p2x2d1x1", "forward", 2),          # 25 3x3 tiles
])
def test_a_cpu_keeps_its_own_tile_counts(tag, pass_, first):
    """On a CPU the larger tile comes first from F4_MIN_TILES tiles of its side (forward, data
    gradient) and MIN_TILES 2x2 tiles (weight gradient), as measured on PoCL: the GPU's counts
    (from the H200's GEMMs) do not apply there."""
    cpu = fake_device(gpu=False, compute_units=2)
    problem = Problem(geometry(tag), pass_, "float32")
    winograd = REGISTRY["winograd"]
    assert winograd.configs(problem, cpu)[0]["m"] == first
    small, large = SIDES[geometry(tag).kernel[2]][:2]
    if pass_ == "backward_weight":
        assert (winograd.tiles(problem, small) >= MIN_TILES) == (first == large)
    else:
        assert (winograd.tiles(problem, large) >= F4_MIN_TILES) == (first == large)


@pytest.mark.parametrize("tag, pass_, first", [
    ("n32g1c128o128i28x28k5x5s1x1p2x2d1x1", "forward", 4),        # 1568 4x4 tiles
    ("n128g1c96o256i27x27k5x5s1x1p2x2d1x1", "backward_data", 4),  # NiN's: 6272
    ("n1g1c256o256i14x14k5x5s1x1p2x2d1x1", "backward_data", 3),   # 16 (25 3x3 tiles: F(3x3, 5x5) 0.93x F(2x2, 5x5)'s time)
    ("n1g1c256o256i7x7k5x5s1x1p2x2d1x1", "forward", 3),           # 4 (9)
    ("n32g1c48o64i35x35k5x5s1x1p2x2d1x1", "backward_weight", 4),  # 10368 2x2 tiles
    ("n1g1c64o64i14x14k5x5s1x1p2x2d1x1", "backward_weight", 2),   # 49
])
def test_a_5x5_kernel_has_three_tile_sides(tag, pass_, first):
    """On a GPU F(4x4, 5x5) first from GPU_LARGE_FIRST_MIN_TILES of its tiles in the forward and
    data gradient, else F(3x3, 5x5) (at any count); in the weight gradient both by F(4x4, 3x3)'s
    count of 2x2 tiles; F(2x2, 5x5) beside them, and tuning's first three candidates measure all three."""
    problem, winograd, configs = _gpu_configs(tag, pass_)
    assert configs[0]["m"] == first
    assert {c["m"] for c in configs[:3]} == {2, 3, 4}
    if pass_ != "backward_weight":
        assert (winograd.tiles(problem, 4) >= GPU_LARGE_FIRST_MIN_TILES[4, 5]) == (first == 4)


@pytest.mark.parametrize("tag, pass_, first", [
    ("n4g1c128o128i14x14k5x5s1x1p2x2d1x1", "forward", 4),        # 64 4x4 tiles: 0.90x F(3x3, 5x5)'s time on PoCL
    ("n1g1c64o64i24x24k5x5s1x1p2x2d1x1", "forward", 3),          # 36: 1.21x
])
def test_a_cpu_takes_f4x4_5x5_from_its_own_count(tag, pass_, first):
    cpu = fake_device(gpu=False, compute_units=2)
    assert REGISTRY["winograd"].configs(Problem(geometry(tag), pass_, "float32"), cpu)[0]["m"] == first


@pytest.mark.parametrize("m, r", [(4, 3), (6, 3), (3, 5), (4, 5)])
def test_the_cpu_work_group_of_the_transforms_stays_bounded(m, r):
    """winograd.cpu_work_group: whole rows (or a divisor) and as many rows as keep it within
    CPU_GROUP_ITEMS, for every launch but the GEMM's, in every pass; PoCL's own choice overran its
    stack with F(4x4, 5x5)'s output transform and F(6x6, 3x3)'s weight gradient (segfaults)."""
    cpu = fake_device(gpu=False, compute_units=2, float_lanes=16)
    small = fake_device(gpu=False, compute_units=2, float_lanes=16, work_group=128)  # a device's own, lower limit
    for device, most in [(cpu, CPU_GROUP_ITEMS), (small, 128)]:
        fit = limits.of(device)
        for row_width, rows in [(25, 256), (41, 352), (16, 97), (648, 1), (1024, 8), (13, 13)]:
            across, down = cpu_work_group(row_width, rows, fit)
            assert row_width % across == 0 and rows % down == 0 and across * down <= most
    assert cpu_work_group(25, 256, limits.of(cpu)) == (25, 16) and cpu_work_group(1024, 8, limits.of(cpu)) == (512, 1)
    assert cpu_work_group(25, 256, limits.of(small)) == (25, 4)
    winograd = REGISTRY["winograd"]
    for pass_ in ("forward", "backward_data", "backward_weight"):
        problem = Problem(geometry(f"n8g1c16o256i27x27k{r}x{r}s1x1p{r // 2}x{r // 2}d1x1"), pass_, "float32")
        for device in (cpu, small):
            config = next(c for c in winograd.configs(problem, device) if c["m"] == m)
            calls = [c for c in winograd.plan(problem, config, device).calls if c.entry.startswith("clc_wino_")]
            assert len(calls) == 2
            for call in calls:
                assert call.local_size is not None and limits.of(device).fits(call.local_size), call.entry
                assert call.local_size[0] * call.local_size[1] <= CPU_GROUP_ITEMS


@pytest.mark.parametrize("tag, tile", [
    ("n4g1c256o256i14x14k3x3s1x1p1x1d1x1", (64, 64)),     # 16 x 36 64 x 64 work-groups: 0.76x 64 x 128's time
    ("n32g6c768o768i14x14k3x3s1x1p1x1d1x1", (64, 64)),    # NFNet's 6 groups of 128: 864 of them, 0.71x
    ("n16g1c256o256i14x14k7x7s1x1p3x3d1x1", (64, 64)),    # 7x7 (F(2x2, 7x7)): 1024, 0.69x
    ("n64g1c512o512i7x7k3x3s1x1p1x1d1x1", (64, 128)),     # 2304: 64 x 128 0.95x 64 x 64's time
])
def test_an_unsplit_weight_gradient_takes_the_smaller_work_group_where_work_groups_are_few(tag, tile):
    """winograd.WEIGHT_FEW_GROUPS_PER_UNIT: with fewer than 12 work-groups of 64 x 64 per compute
    unit the 64-work-item 64 x 64 tile comes before 64 x 128 (the same 8x8 blocks)."""
    config = REGISTRY["winograd"].configs(Problem(geometry(tag), "backward_weight", "float32"), H200_LIKE)[0]
    assert config["splits"] == 1 and (config["TM"], config["TN"]) == tile


@pytest.mark.parametrize("tag, pass_, saving", [
    ("n1g1c8o8i8x8k3x3s1x1p1x1d1x1", "forward", 9 * 64 / (4 * 36)),             # F(4x4, 3x3), whole tiles: 4x
    ("n2g1c8o8i46x46k7x7s1x1p3x3d1x1", "backward_weight", 49 * 2116 / (529 * 64)),  # F(2x2, 7x7): 3.06x
    ("n8g1c8o8i7x7k7x7s1x1p0x0d1x1", "forward", 49 / 64),                       # FCN's fc6: one output a tile
    ("n8g1c8o8i7x7k7x7s1x1p0x0d1x1", "backward_data", 49 / (16 * 64)),          # a 1x1 dy padded by 6
])
def test_saving_counts_the_forward_s_work_against_the_gemms(tag, pass_, saving):
    """Winograd.saving: the direct sum's multiplies per channel pair (the forward's outputs x taps,
    whatever the pass) over the GEMMs' (tiles x ALPHA^2) with the side that needs the fewest."""
    problem = Problem(geometry(tag), pass_, "float32")
    assert REGISTRY["winograd"].saving(problem, H200_LIKE) == pytest.approx(saving)


def test_saving_counts_a_weight_only_side_where_it_is_fed():
    """F(6x6, 3x3) (GPU_WEIGHT_ONLY_SIDES) saves the most on a 3x3 forward whose outputs 6 divides,
    but comes last there: the saving is F(4x4, 3x3)'s; in a GPU's weight gradient of enough of its
    tiles and channels, F(6x6, 3x3)'s."""
    winograd = REGISTRY["winograd"]
    tag = "n8g1c64o64i48x48k3x3s1x1p1x1d1x1"  # 64 6x6 tiles an image: whole, 2304 outputs
    assert winograd.saving(Problem(geometry(tag), "forward", "float32"), H200_LIKE) == pytest.approx(9 * 2304 / (144 * 36))
    assert winograd.saving(Problem(geometry(tag), "backward_weight", "float32"), H200_LIKE) \
        == pytest.approx(9 * 2304 / (64 * 64))
