"""Float64 NumPy references for transposed convolution and the convolution's gradients.

Independent of ``clconv/reference.py`` and of the kernels; built the textbook way:

* ``conv_forward``: an ordinary convolution through ``sliding_window_view`` and one einsum per call;
* ``conv_transpose``: zero-insert the input by the stride, pad by ``dilation*(k-1) - pad`` (begin) and
  ``dilation*(k-1) - pad_end + output_padding`` (end; a negative amount crops), flip the kernel and
  swap its channel roles group by group, then run ``conv_forward`` with stride 1;
* ``conv_input`` (the data gradient): that transposed convolution, its output_padding fixed by the
  requested input size;
* ``conv_weight``: a loop over kernel taps, each an einsum of the gathered input with ``dy``;
* the transposed op's own gradients: the adjoints of the zero-insert/pad/flip pipeline above.

Shapes are PyTorch's, batched ``(N, C, *spatial)``; padding is an int, a tuple of ints or a tuple of
``(begin, end)`` pairs, as the clconv ops accept.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

OUT_LETTERS = "xyz"
TAP_LETTERS = "ijk"


def per_dim(value, nd: int) -> tuple[int, ...]:
    if isinstance(value, (tuple, list)):
        assert len(value) == nd, (value, nd)
        return tuple(int(v) for v in value)
    return (int(value),) * nd


def pads(padding, nd: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(begin, end)`` per spatial dim from an int, ``nd`` ints or ``nd`` ``(begin, end)`` pairs."""
    if isinstance(padding, (tuple, list)) and any(isinstance(p, (tuple, list)) for p in padding):
        return tuple(int(p[0]) for p in padding), tuple(int(p[1]) for p in padding)
    p = per_dim(padding, nd)
    return p, p


def pad_or_crop(a: np.ndarray, begin, end) -> np.ndarray:
    """Pad the spatial dims of ``a`` with zeros; a negative amount crops that many instead."""
    a = np.pad(a, [(0, 0), (0, 0)] + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)])
    crop = tuple(slice(max(-b, 0), a.shape[2 + i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end)))
    assert all(s.stop > s.start for s in crop), "cropped to nothing"
    return a[(slice(None), slice(None), *crop)]


# -- the ordinary convolution ---------------------------------------------------------------------


def conv_forward(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """``torch.nn.functional.conv{nd}d`` in float64: x (N, C, *S), w (O, C/groups, *K)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    nd = x.ndim - 2
    s, d = per_dim(stride, nd), per_dim(dilation, nd)
    pb, pe = pads(padding, nd)
    kernel = w.shape[2:]
    xp = pad_or_crop(x, pb, pe)
    spans = [dd * (k - 1) + 1 for k, dd in zip(kernel, d)]
    # windows: (N, C, *positions, *span); keep every stride-th position and every dilation-th tap
    win = sliding_window_view(xp, spans, axis=tuple(range(2, 2 + nd)))
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, ss) for ss in s)
              + tuple(slice(None, None, dd) for dd in d)]
    n, c = x.shape[:2]
    o = w.shape[0]
    win = win.reshape(n, groups, c // groups, *win.shape[2:])
    wg = w.reshape(groups, o // groups, *w.shape[1:])
    O, T = OUT_LETTERS[:nd], TAP_LETTERS[:nd]
    y = np.einsum(f"ngc{O}{T},goc{T}->ngo{O}", win, wg, optimize=True)
    y = y.reshape(n, o, *y.shape[3:])
    if bias is not None:
        y = y + np.asarray(bias, np.float64).reshape((1, -1) + (1,) * nd)
    return y


def conv_output_size(in_size, kernel, stride, padding, dilation) -> tuple[int, ...]:
    nd = len(in_size)
    s, d = per_dim(stride, nd), per_dim(dilation, nd)
    pb, pe = pads(padding, nd)
    return tuple((i + b + e - dd * (k - 1) - 1) // ss + 1
                 for i, k, ss, b, e, dd in zip(in_size, kernel, s, pb, pe, d))


# -- the transposed convolution by zero insertion -------------------------------------------------


def transposed_output_size(in_size, kernel, stride, padding, output_padding, dilation) -> tuple[int, ...]:
    nd = len(in_size)
    s, d, op = per_dim(stride, nd), per_dim(dilation, nd), per_dim(output_padding, nd)
    pb, pe = pads(padding, nd)
    return tuple((i - 1) * ss - b - e + dd * (k - 1) + o + 1
                 for i, k, ss, b, e, dd, o in zip(in_size, kernel, s, pb, pe, d, op))


def zero_insert(x: np.ndarray, stride) -> np.ndarray:
    nd = x.ndim - 2
    s = per_dim(stride, nd)
    z = np.zeros(x.shape[:2] + tuple((i - 1) * ss + 1 for i, ss in zip(x.shape[2:], s)))
    z[(slice(None), slice(None)) + tuple(slice(None, None, ss) for ss in s)] = x
    return z


def flip_regroup(w: np.ndarray, groups: int) -> np.ndarray:
    """Transposed layout (C_in, C_out/g, *K) -> ordinary layout (C_out, C_in/g, *K), kernel flipped."""
    cin, cout_g = w.shape[:2]
    nd = w.ndim - 2
    wg = w.reshape(groups, cin // groups, cout_g, *w.shape[2:]).swapaxes(1, 2)
    wg = wg[(Ellipsis,) + (slice(None, None, -1),) * nd]
    return wg.reshape(groups * cout_g, cin // groups, *w.shape[2:])


def unflip_regroup(v: np.ndarray, groups: int) -> np.ndarray:
    """The inverse of :func:`flip_regroup` (it is a permutation, so also its adjoint)."""
    cout, cin_g = v.shape[:2]
    nd = v.ndim - 2
    vg = v.reshape(groups, cout // groups, cin_g, *v.shape[2:])[(Ellipsis,) + (slice(None, None, -1),) * nd]
    return vg.swapaxes(1, 2).reshape(groups * cin_g, cout // groups, *v.shape[2:])


def _transposed_pads(kernel, stride, padding, output_padding, dilation, nd):
    d, op = per_dim(dilation, nd), per_dim(output_padding, nd)
    pb, pe = pads(padding, nd)
    begin = tuple(dd * (k - 1) - b for k, dd, b in zip(kernel, d, pb))
    end = tuple(dd * (k - 1) - e + o for k, dd, e, o in zip(kernel, d, pe, op))
    return begin, end


def conv_transpose(x, w, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1) -> np.ndarray:
    """``torch.nn.functional.conv_transpose{nd}d`` in float64: x (N, C_in, *S), w (C_in, C_out/g, *K)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    nd = x.ndim - 2
    begin, end = _transposed_pads(w.shape[2:], stride, padding, output_padding, dilation, nd)
    z = pad_or_crop(zero_insert(x, stride), begin, end)
    return conv_forward(z, flip_regroup(w, groups), bias, 1, 0, dilation, groups)


def conv_transpose_input(grad_output, w, input_size, stride=1, padding=0, output_padding=0, groups=1,
                         dilation=1) -> np.ndarray:
    """Gradient of ``conv_transpose`` w.r.t. its input (spatial ``input_size``): the adjoints of the
    zero insertion, the pad/crop and the stride-1 convolution, applied in reverse."""
    gy = np.asarray(grad_output, np.float64)
    w = np.asarray(w, np.float64)
    nd = gy.ndim - 2
    s = per_dim(stride, nd)
    begin, end = _transposed_pads(w.shape[2:], stride, padding, output_padding, dilation, nd)
    zsize = tuple((i - 1) * ss + 1 for i, ss in zip(input_size, s))
    padded_size = tuple(z + b + e for z, b, e in zip(zsize, begin, end))
    wf = flip_regroup(w, groups)
    gz = conv_input((gy.shape[0], wf.shape[1] * groups, *padded_size), wf, gy, 1, 0, dilation, groups)
    gz = pad_or_crop(gz, tuple(-b for b in begin), tuple(-e for e in end))  # adjoint of pad is crop
    return gz[(slice(None), slice(None)) + tuple(slice(None, None, ss) for ss in s)]


def conv_transpose_weight(x, weight_size, grad_output, stride=1, padding=0, output_padding=0, groups=1,
                          dilation=1) -> np.ndarray:
    """Gradient of ``conv_transpose`` w.r.t. its weight ``(C_in, C_out/g, *K)``: the weight gradient of
    the stride-1 convolution over the zero-inserted, padded input, un-flipped and regrouped back."""
    x = np.asarray(x, np.float64)
    nd = x.ndim - 2
    begin, end = _transposed_pads(weight_size[2:], stride, padding, output_padding, dilation, nd)
    z = pad_or_crop(zero_insert(x, stride), begin, end)
    cin, cout_g = weight_size[:2]
    flipped_size = (cout_g * groups, cin // groups, *weight_size[2:])
    return unflip_regroup(conv_weight(z, flipped_size, grad_output, 1, 0, dilation, groups), groups)


# -- the convolution's gradients ------------------------------------------------------------------


def conv_input(input_size, w, grad_output, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """``torch.nn.grad.conv{nd}d_input``: the transposed convolution of ``grad_output`` whose
    output_padding makes the result ``input_size`` (any size the forward conv maps onto dy)."""
    gy = np.asarray(grad_output, np.float64)
    kernel = np.shape(w)[2:]
    smallest = transposed_output_size(gy.shape[2:], kernel, stride, padding, 0, dilation)
    op = tuple(i - m for i, m in zip(input_size[2:], smallest))
    assert min(op) >= 0, f"input_size {input_size} is smaller than any conv input giving {gy.shape}"
    dx = conv_transpose(gy, w, None, stride, padding, op, groups, dilation)
    assert dx.shape == tuple(input_size), (dx.shape, input_size)
    return dx


def conv_weight(x, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """``torch.nn.grad.conv{nd}d_weight``: dw[o, c, tap] = sum over (n, p) of dy[n, o, p] * x at the
    position tap ``tap`` of output pixel ``p`` reads (zero in the padding); a loop over taps."""
    x = np.asarray(x, np.float64)
    gy = np.asarray(grad_output, np.float64)
    nd = x.ndim - 2
    s, d = per_dim(stride, nd), per_dim(dilation, nd)
    pb, pe = pads(padding, nd)
    n, c = x.shape[:2]
    o = weight_size[0]
    ci, co = c // groups, o // groups
    xp = pad_or_crop(x, pb, [max(e, 0) for e in pe])
    out = gy.shape[2:]
    dw = np.zeros(tuple(weight_size))
    for tap in itertools.product(*(range(k) for k in weight_size[2:])):
        # index arrays of the (padded) input positions this tap reads, one per spatial dim
        idx = np.ix_(*[np.arange(out[a]) * s[a] + tap[a] * d[a] for a in range(nd)])
        patch = xp[(slice(None), slice(None)) + idx]  # (N, C, *out)
        for grp in range(groups):
            dw[(slice(grp * co, (grp + 1) * co), slice(None)) + tap] = np.einsum(
                "nop,ncp->oc",
                gy[:, grp * co:(grp + 1) * co].reshape(n, co, -1),
                patch[:, grp * ci:(grp + 1) * ci].reshape(n, ci, -1),
            )
    return dw


def bias_grad(grad_output) -> np.ndarray:
    gy = np.asarray(grad_output, np.float64)
    return gy.sum(axis=(0, *range(2, gy.ndim)))
