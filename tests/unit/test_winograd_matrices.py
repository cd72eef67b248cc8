"""Winograd's transform matrices (algorithms/winograd.py ``TRANSFORMS``) in float64, without a
device: the forward identity, the weight gradient's reading of it backwards, and which tile side
the configs offer first."""

from __future__ import annotations

import numpy as np
import pytest

from clconv.algorithms import REGISTRY
from clconv.algorithms.winograd import F4_MIN_TILES, MIN_TILES, TILE_SIDES, TRANSFORMS
from clconv.plan import Problem

from cases import geometry
from helpers import fake_device


def _matrices(m):
    return (np.array(rows, dtype=np.float64) for rows in TRANSFORMS[m])


@pytest.mark.parametrize("m", TILE_SIDES)
def test_forward_tile_is_the_correlation(m):
    """A^T [(G g) . (B^T d)] = sum_j g[j] d[i + j] for M outputs of a length-3 filter, and the 2D
    tile A^T [(G g G^T) . (B^T d B)] A the 2D correlation."""
    bt, g_, at = _matrices(m)
    rng = np.random.default_rng(m)
    g, d = rng.standard_normal(3), rng.standard_normal(m + 2)
    expected = [sum(g[j] * d[i + j] for j in range(3)) for i in range(m)]
    np.testing.assert_allclose(at @ ((g_ @ g) * (bt @ d)), expected, rtol=0, atol=1e-13)
    g2, d2 = rng.standard_normal((3, 3)), rng.standard_normal((m + 2, m + 2))
    tile = at @ ((g_ @ g2 @ g_.T) * (bt @ d2 @ bt.T)) @ at.T
    expected2 = [[np.sum(g2 * d2[i:i + 3, k:k + 3]) for k in range(m)] for i in range(m)]
    np.testing.assert_allclose(tile, expected2, rtol=0, atol=1e-12)


@pytest.mark.parametrize("m", TILE_SIDES)
def test_weight_gradient_reads_the_identity_backwards(m):
    """G^T [(A dy A^T) . (B^T d B)] G is the 3x3 weight gradient of one tile: sum over its M x M
    outputs of dy[i][k] d[i + r][k + c]."""
    bt, g_, at = _matrices(m)
    rng = np.random.default_rng(10 + m)
    dy, d = rng.standard_normal((m, m)), rng.standard_normal((m + 2, m + 2))
    got = g_.T @ ((at.T @ dy @ at) * (bt @ d @ bt.T)) @ g_
    expected = [[np.sum(dy * d[r:r + m, c:c + m]) for c in range(3)] for r in range(3)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


H200_LIKE = fake_device(gpu=True, compute_units=132, global_mem=140 << 30)


@pytest.mark.parametrize("tag, pass_, first", [
    ("n32g1c128o128i28x28k3x3s1x1p1x1d1x1", "forward", 4),        # 1568 4x4 tiles
    ("n64g1c160o320i7x7k3x3s1x1p1x1d1x1", "backward_data", 4),    # 256: F(4x4) 0.084 against F(2x2)'s 0.09 ms
    ("n32g1c512o512i7x7k3x3s1x1p1x1d1x1", "forward", 4),          # 128: F(4x4) lost by 8% here, won elsewhere
    ("n8g1c256o160i7x7k3x3s1x1p1x1d1x1", "forward", 4),           # 32: F(4x4) 0.040 against 0.053 ms
    ("n1g1c256o256i14x14k3x3s1x1p1x1d1x1", "backward_data", 2),   # 16
    ("n1g1c512o512i7x7k3x3s1x1p1x1d1x1", "forward", 2),           # 4: F(2x2) 0.053 against 0.075 ms
    ("n32g1c512o512i7x7k3x3s1x1p1x1d1x1", "backward_weight", 4),  # 512 2x2 tiles: 0.13 against 0.18 ms
    ("n2g2c4o6i7x6k3x3s1x1p1x1d1x1", "backward_weight", 2),       # 24
])
def test_the_larger_tile_comes_first_where_its_gemms_stay_large(tag, pass_, first):
    problem = Problem(geometry(tag), pass_, "float32")
    winograd = REGISTRY["winograd"]
    configs = winograd.configs(problem, H200_LIKE)
    assert configs[0]["m"] == first
    assert {c["m"] for c in configs[:2]} == set(TILE_SIDES)  # tuning's first candidates measure both
    if pass_ == "backward_weight":
        assert (winograd.tiles(problem, 2) >= MIN_TILES) == (first == 4)
    else:
        assert (winograd.tiles(problem, 4) >= F4_MIN_TILES) == (first == 4)
