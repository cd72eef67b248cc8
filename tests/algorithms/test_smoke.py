"""The quickest end-to-end check: one small conv2d through every forward algorithm."""

import numpy as np

import clconv
from clconv import reference
from clconv.geometry import resolve_conv


def test_conv2d_every_forward_algorithm_matches_reference():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    g = resolve_conv(2, x.shape, w.shape, b.shape, 1, 1, 1, 2).geometry
    ref = reference.forward(g, x, w, b)
    for algorithm in ("direct", "im2col", "implicit_gemm"):
        y = clconv.conv2d(x, w, b, padding=1, groups=2, algorithm=algorithm)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
