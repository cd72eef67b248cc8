"""Float64 NumPy reference for the three passes of the canonical convolution.

Independent of the OpenCL kernels (a loop over kernel taps, each a strided slice and an einsum),
used by the demo, ``clconv check`` and the benchmarks to report errors.  Shapes follow
:class:`clconv.geometry.ConvGeometry`: tensors are always batched here.
"""

from __future__ import annotations

import itertools

import numpy as np

from .dtypes import STORAGE
from .geometry import ConvGeometry


def _tap_slices(g: ConvGeometry, tap: tuple[int, ...]) -> tuple[slice, ...]:
    """Slices of the padded input read by kernel tap ``tap`` across all output pixels."""
    nd = g.ndim
    out = []
    for axis, k in enumerate(tap):
        a = 3 - nd + axis
        start = k * g.dilation[a]
        out.append(slice(start, start + g.stride[a] * (g.out_size[a] - 1) + 1, g.stride[a]))
    return tuple(out)


def _padded(g: ConvGeometry, x: np.ndarray) -> np.ndarray:
    nd = g.ndim
    # a negative pad_end (transposed ops with output_padding >= stride) only shortens the output
    pads = [(0, 0), (0, 0)] + [(g.pad_begin[3 - nd + i], max(0, g.pad_end[3 - nd + i])) for i in range(nd)]
    return np.pad(x.astype(np.float64), pads)


def _taps(g: ConvGeometry):
    return itertools.product(*(range(k) for k in g.user_kernel))


def forward(g: ConvGeometry, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """y = conv(x, w) + bias, in float64."""
    xp = _padded(g, x)
    w = w.astype(np.float64)
    G, CI, CO = g.groups, g.cin_per_group, g.cout_per_group
    y = np.zeros(g.output_shape)
    for tap in _taps(g):
        patch = xp[(slice(None), slice(None), *_tap_slices(g, tap))]
        for grp in range(G):
            y[:, grp * CO:(grp + 1) * CO] += np.einsum(
                "nc...,oc->no...", patch[:, grp * CI:(grp + 1) * CI], w[(slice(grp * CO, (grp + 1) * CO), slice(None), *tap)]
            )
    if bias is not None:
        y += bias.astype(np.float64).reshape((1, -1) + (1,) * g.ndim)
    return y


def backward_data(g: ConvGeometry, dy: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """dx = the gradient of conv(x, w) w.r.t. x for output gradient dy (+ bias: the transposed conv's)."""
    nd = g.ndim
    padded_shape = [g.batch, g.in_channels] + [
        g.in_size[a] + g.pad_begin[a] + max(0, g.pad_end[a]) for a in range(3 - nd, 3)
    ]
    dxp = np.zeros(padded_shape)
    dy = dy.astype(np.float64)
    w = w.astype(np.float64)
    G, CI, CO = g.groups, g.cin_per_group, g.cout_per_group
    for tap in _taps(g):
        region = (slice(None), slice(None), *_tap_slices(g, tap))
        for grp in range(G):
            contribution = np.einsum(
                "no...,oc->nc...", dy[:, grp * CO:(grp + 1) * CO], w[(slice(grp * CO, (grp + 1) * CO), slice(None), *tap)]
            )
            # basic slicing gives a view, so += lands in dxp (a tap's slices never overlap)
            dxp[region][:, grp * CI:(grp + 1) * CI] += contribution
    crop = tuple(slice(g.pad_begin[a], g.pad_begin[a] + g.in_size[a]) for a in range(3 - nd, 3))
    dx = dxp[(slice(None), slice(None), *crop)]
    if bias is not None:
        dx = dx + bias.astype(np.float64).reshape((1, -1) + (1,) * nd)
    return dx


def backward_weight(g: ConvGeometry, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dw = the gradient of conv(x, w) w.r.t. w for output gradient dy."""
    xp = _padded(g, x)
    dy = dy.astype(np.float64)
    G, CI, CO = g.groups, g.cin_per_group, g.cout_per_group
    dw = np.zeros(g.weight_shape)
    for tap in _taps(g):
        patch = xp[(slice(None), slice(None), *_tap_slices(g, tap))]
        for grp in range(G):
            # the pixel count spelled out: -1 cannot be solved for when the batch is 0
            dy_g = dy[:, grp * CO:(grp + 1) * CO].reshape(g.batch, CO, g.out_pixels)
            x_g = patch[:, grp * CI:(grp + 1) * CI].reshape(g.batch, CI, g.out_pixels)
            dw[(slice(grp * CO, (grp + 1) * CO), slice(None), *tap)] = np.einsum("nop,ncp->oc", dy_g, x_g)
    return dw


def bias_gradient(dy: np.ndarray) -> np.ndarray:
    return dy.astype(np.float64).sum(axis=tuple(i for i in range(dy.ndim) if i != 1))


def run_pass(pass_: str, g: ConvGeometry, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """The reference result of ``pass_`` for operands in the kernels' order (forward: x, w; ...)."""
    if pass_ == "forward":
        return forward(g, a, b, bias)
    if pass_ == "backward_data":
        return backward_data(g, a, b, bias)
    return backward_weight(g, a, b)


def tolerance(reduction_length: int, dtype) -> float:
    """Tolerance, relative to the largest reference value, for a result whose elements are sums of
    ``reduction_length`` products of O(1) values: rounding grows about like sqrt(length), at the
    epsilon of the arithmetic type (float32, or float64 for float64 tensors); a storage narrower
    than that (float16, bfloat16: summed in float32) adds its own epsilon, for the one rounding of
    the result (at most half of it, relative to the element).  ``dtype``: a dtype or its name."""
    storage = STORAGE[np.dtype(dtype).name if not isinstance(dtype, str) else dtype]
    eps = 2.0 ** -52 if storage.real == "double" else 2.0 ** -23
    summed = 8 * eps * max(1.0, np.sqrt(reduction_length)) * 4
    return float(summed + (storage.eps if storage.itemsize < 4 else 0.0))
