"""A deliberately naive float64 forward convolution: one Python loop iteration per output element.

It shares nothing with ``clconv.reference`` (no slicing tricks, no einsum, no ``ConvGeometry``): the
definition of a convolution written out index by index, so the fast reference the rest of the suite
relies on is itself checked (``tests/unit/test_reference.py::test_fast_reference_matches_naive_loops``).  Only
for tiny shapes: it costs one Python iteration per multiply-add.
"""

from __future__ import annotations

import itertools

import numpy as np


def conv_naive(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """``y[n, o, p] = bias[o] + sum_{c, t} x[n, g*Cg + c, p*s + t*d - pad_begin] * w[o, c, t]``.

    ``x`` is ``(N, C_in, *spatial)`` (always batched here), ``w`` is ``(C_out, C_in/groups, *kernel)``.
    ``stride``/``dilation`` are ints or per-dimension tuples; ``padding`` is an int, a per-dimension
    tuple of ints, or a per-dimension tuple of ``(begin, end)`` pairs.  Reads outside the input are
    zero (that is what padding means); the output size is ``floor((i + b + e - d*(k-1) - 1)/s) + 1``.
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    nd = x.ndim - 2
    stride = _per_dim(stride, nd)
    dilation = _per_dim(dilation, nd)
    if isinstance(padding, (tuple, list)) and padding and isinstance(padding[0], (tuple, list)):
        pad_begin = tuple(p[0] for p in padding)
        pad_end = tuple(p[1] for p in padding)
    else:
        pad_begin = pad_end = _per_dim(padding, nd)
    n_batch, c_in = x.shape[:2]
    c_out = w.shape[0]
    cin_g, cout_g = c_in // groups, c_out // groups
    assert w.shape[1] == cin_g, "weight does not match input channels / groups"
    in_size, kernel = x.shape[2:], w.shape[2:]
    out_size = tuple(
        (in_size[a] + pad_begin[a] + pad_end[a] - dilation[a] * (kernel[a] - 1) - 1) // stride[a] + 1
        for a in range(nd)
    )
    y = np.zeros((n_batch, c_out, *out_size))
    for n in range(n_batch):
        for o in range(c_out):
            grp = o // cout_g
            for p in itertools.product(*(range(s) for s in out_size)):
                total = 0.0 if bias is None else float(bias[o])
                for c in range(cin_g):
                    for t in itertools.product(*(range(k) for k in kernel)):
                        pos = tuple(p[a] * stride[a] + t[a] * dilation[a] - pad_begin[a] for a in range(nd))
                        if all(0 <= pos[a] < in_size[a] for a in range(nd)):
                            total += x[(n, grp * cin_g + c, *pos)] * w[(o, c, *t)]
                y[(n, o, *p)] = total
    return y


def _per_dim(value, nd: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * nd
