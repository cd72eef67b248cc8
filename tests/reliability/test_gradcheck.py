"""Finite-difference gradient checks in float64, on the device, for every op's backward.

For each op f (conv1d/2d/3d, conv_transpose1d/2d/3d) and a fixed random projection r of its output,
L(x, w, b) = <r, f(x, w, b)> is evaluated with clconv's own forward op; the analytic gradients come
from clconv's backward ops (convolution_backward, and the named conv*_input / conv*_weight /
conv_transpose*_input / conv_transpose*_weight ops, which must agree with it).  The central
difference along random directions and along single coordinates must match the analytic directional
derivative.  f is linear in x, in w and in b separately (bilinear in (x, w)), so the central
difference is exact up to rounding: the tolerance is float64 rounding, not a truncation error.
No NumPy reference is involved: this checks clconv's backward against clconv's forward.
"""

from __future__ import annotations

import numpy as np
import pytest

import clconv

EPS = 1e-3
# The direct kernels: the point here is each op's backward against its own forward, and they build
# fastest; every algorithm is compared with the references in tests/algorithms/test_matrix.py.
ALGORITHM = "direct"


@pytest.fixture(autouse=True)
def _needs_fp64(queue):
    from clconv.device import supports_fp64

    if not supports_fp64(queue.device):
        pytest.skip(f"{queue.device.name} has no cl_khr_fp64: float64 gradient checks cannot run there")

# (op name, input shape, weight shape, keyword arguments): tiny, each with stride/padding/dilation/groups
OPS = [
    ("conv1d", (2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    ("conv2d", (2, 3, 6, 5), (4, 3, 3, 2), dict(stride=(2, 1), padding=((1, 0), (1, 1)), dilation=(1, 2))),
    ("conv3d", (1, 2, 4, 4, 3), (4, 1, 2, 2, 2), dict(stride=1, padding=(1, 0, 1), groups=2)),
    ("conv_transpose1d", (2, 4, 5), (4, 1, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ("conv_transpose2d", (1, 3, 3, 4), (3, 2, 2, 3), dict(stride=(2, 1), padding=(0, 1), output_padding=(1, 1),
                                                          dilation=(1, 2))),
    ("conv_transpose3d", (1, 2, 2, 3, 2), (2, 2, 2, 2, 2), dict(stride=2, padding=(1, 0, 0), output_padding=(1, 1, 0))),
]


def _grads(name, x, w, r, kwargs):
    """(gx, gw, gb) from convolution_backward, checked against the named gradient ops."""
    transposed = name.startswith("conv_transpose")
    ndim = x.ndim - 2
    full = {**dict(stride=1, padding=0, dilation=1, groups=1), **kwargs}
    gx, gw, gb = clconv.convolution_backward(r, x, w, transposed=transposed, **full, algorithm=ALGORITHM)
    if transposed:
        gx2 = getattr(clconv, f"conv_transpose{ndim}d_input")(r, w, **kwargs, algorithm=ALGORITHM)
        gw2 = getattr(clconv, f"conv_transpose{ndim}d_weight")(x, w.shape, r, **kwargs, algorithm=ALGORITHM)
    else:
        gx2 = getattr(clconv, f"conv{ndim}d_input")(x.shape, w, r, **kwargs, algorithm=ALGORITHM)
        gw2 = getattr(clconv, f"conv{ndim}d_weight")(x, w.shape, r, **kwargs, algorithm=ALGORITHM)
    np.testing.assert_allclose(gx2, gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw2, gw, rtol=1e-12, atol=1e-12)
    return gx, gw, gb


@pytest.mark.parametrize("name,x_shape,w_shape,kwargs", OPS, ids=[o[0] for o in OPS])
def test_finite_differences_match_backward(rng, name, x_shape, w_shape, kwargs):
    op = getattr(clconv, name)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[1] * kwargs.get("groups", 1) if name.startswith("conv_transpose") else w_shape[0])
    y = op(x, w, b, **kwargs, algorithm=ALGORITHM)
    assert y.dtype == np.float64
    r = rng.standard_normal(y.shape)

    def loss(xx, ww, bb) -> float:
        return float(np.sum(r * op(xx, ww, bb, **kwargs, algorithm=ALGORITHM)))

    gx, gw, gb = _grads(name, x, w, r, kwargs)
    assert gx.shape == x.shape and gw.shape == w.shape and gb.shape == b.shape
    scale = float(np.abs(r).sum() * (np.abs(x).max() + 1) * (np.abs(w).max() + 1))
    tol = 1e-9 * scale

    # random directions: one argument at a time, then all three together
    vx, vw, vb = rng.standard_normal(x.shape), rng.standard_normal(w.shape), rng.standard_normal(b.shape)
    for dx, dw, db in [(vx, 0 * vw, 0 * vb), (0 * vx, vw, 0 * vb), (0 * vx, 0 * vw, vb), (vx, vw, vb)]:
        numeric = (loss(x + EPS * dx, w + EPS * dw, b + EPS * db) - loss(x - EPS * dx, w - EPS * dw, b - EPS * db)) / (2 * EPS)
        analytic = float(np.sum(gx * dx) + np.sum(gw * dw) + np.sum(gb * db))
        assert abs(numeric - analytic) <= tol, (numeric, analytic)

    # single coordinates (the first, the last, and a random one of x and of w)
    for which, arr, grad in (("x", x, gx), ("w", w, gw)):
        for flat in {0, arr.size - 1, int(rng.integers(arr.size))}:
            e = np.zeros(arr.size)
            e[flat] = 1.0
            e = e.reshape(arr.shape)
            if which == "x":
                numeric = (loss(x + EPS * e, w, b) - loss(x - EPS * e, w, b)) / (2 * EPS)
            else:
                numeric = (loss(x, w + EPS * e, b) - loss(x, w - EPS * e, b)) / (2 * EPS)
            assert abs(numeric - grad.flat[flat]) <= tol, (which, flat, numeric, grad.flat[flat])
    # the bias gradient is the sum of r over batch and space
    np.testing.assert_allclose(gb, r.sum(axis=(0, *range(2, r.ndim))), rtol=1e-12, atol=1e-12)
