"""Transposed convolution (conv_transpose1d/2d/3d) and its gradients (conv_transpose*d_input/_weight).

conv_transpose runs as the data gradient of a canonical convolution (backward_data algorithms), its
input gradient as that convolution's forward pass, its weight gradient as its weight gradient with
roles swapped.  Every algorithm of each of those passes runs on the transposed twins of the shared
geometries (transposed_reference.CASES) plus transposed-only ones (output_padding >= stride), into
NaN-poisoned device outputs, against the zero-insertion float64 reference.
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cl_array
import pytest

import clconv
from clconv import reference as core_reference
from clconv.geometry import resolve_conv_transpose

import transposed_reference as R
from helpers import assert_matches, poisoned, random
from transposed_reference import (
    CASES, SPLITK_CASE, T_CASES, at_offset, check_guards, expected_to_decline, guarded, splitk_expected_to_serve,
)

TCASES = [case.transposed() for case in CASES] + T_CASES


def _inner(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def _data(rng, t, dtype=np.float32):
    """input, weight, bias (or None), grad_output of transposed case ``t``."""
    bias = random(rng, (t.out_channels,), dtype) if t.bias else None
    return (random(rng, t.input_shape, dtype), random(rng, t.weight_shape, dtype), bias,
            random(rng, t.output_shape, dtype))


def _op(t, suffix=""):
    return getattr(clconv, f"conv_transpose{t.ndim}d{suffix}")


# -- the reference ----------------------------------------------------------------------------------


def _declines(algorithm: str, t, weight_reduction: int | None = None) -> bool:
    # the canonical convolution of a transposed op has C_in/groups = the weight's second dim
    return expected_to_decline(algorithm, pointwise=t.is_pointwise, cin_per_group=t.weight_shape[1],
                               kernel=t.kernel, weight_reduction=weight_reduction)


@pytest.mark.parametrize("t", TCASES, ids=repr)
def test_reference_adjoints_and_core_reference(rng, t):
    """<ct(x, w), gy> = <x, ct_input(gy)> = <w, ct_weight(x, gy)>; ct is the adjoint of the ordinary
    convolution with the same weight (cut to the input's size); and it equals clconv/reference.py's
    backward_data on the resolved canonical geometry (bias included)."""
    x, w, b, gy = (None if a is None else a.astype(np.float64) for a in _data(rng, t))
    y = R.conv_transpose(x, w, None, **t.args())
    assert y.shape == t.output_shape
    gx = R.conv_transpose_input(gy, w, t.input_shape[2:], **t.args())
    gw = R.conv_transpose_weight(x, t.weight_shape, gy, **t.args())
    tol = 1e-10 * np.sqrt(y.size * t.reduction)
    assert abs(_inner(y, gy) - _inner(x, gx)) < tol
    assert abs(_inner(y, gy) - _inner(w, gw)) < tol
    conv_args = dict(stride=t.stride, padding=t.padding, dilation=t.dilation, groups=t.groups)
    c = R.conv_forward(gy, w, None, **conv_args)
    c = c[(slice(None), slice(None)) + tuple(slice(0, n) for n in t.input_shape[2:])]
    np.testing.assert_allclose(c, gx, atol=1e-12)
    g = resolve_conv_transpose(t.ndim, t.input_shape, t.weight_shape, None if b is None else b.shape,
                               **t.args()).geometry
    np.testing.assert_allclose(R.conv_transpose(x, w, b, **t.args()), core_reference.backward_data(g, x, w, b),
                               atol=1e-12)
    np.testing.assert_allclose(gx, core_reference.forward(g, gy, w), atol=1e-12)
    np.testing.assert_allclose(gw, core_reference.backward_weight(g, gy, x), atol=1e-12)


def test_reference_by_hand():
    """1D, stride 2, kernel [1, 2, 3]: each input scatters a scaled kernel copy 2 apart."""
    x = np.array([[[1.0, 10.0]]])
    w = np.array([[[1.0, 2.0, 3.0]]])
    np.testing.assert_array_equal(R.conv_transpose(x, w, stride=2), [[[1, 2, 3 + 10, 20, 30]]])
    np.testing.assert_array_equal(R.conv_transpose(x, w, stride=2, padding=1), [[[2, 3 + 10, 20]]])
    np.testing.assert_array_equal(R.conv_transpose(x, w, stride=2, output_padding=1), [[[1, 2, 13, 20, 30, 0]]])
    # dilation 2 spreads the taps: output_padding 1 < dilation is allowed with stride 1
    np.testing.assert_array_equal(R.conv_transpose(x, w, stride=1, dilation=2, output_padding=1),
                                  [[[1, 10, 2, 20, 3, 30, 0]]])
    np.testing.assert_array_equal(R.conv_transpose(x, w, np.array([0.5]), stride=2, padding=((0, 2),)),
                                  [[[1.5, 2.5, 13.5]]])


# -- every algorithm of every pass -----------------------------------------------------------------


@pytest.mark.parametrize("algorithm", clconv.algorithms("backward_data") + ["auto"])
@pytest.mark.parametrize("t", TCASES, ids=repr)
def test_conv_transpose_every_algorithm(queue, rng, t, algorithm):
    x, w, b, _ = _data(rng, t)
    args = dict(t.args(), algorithm=algorithm)
    # device inputs that start inside their buffers; an output with NaN guard bands either side
    xd, wd = at_offset(queue, x), at_offset(queue, w)
    bd = None if b is None else at_offset(queue, b)
    if _declines(algorithm, t):
        with pytest.raises(ValueError, match=algorithm):
            _op(t)(xd, wd, bd, **args)
        return
    out, whole = guarded(queue, t.output_shape)
    got = _op(t)(xd, wd, bd, **args, out=out)
    assert got is out
    assert_matches(got, R.conv_transpose(x, w, b, **t.args()), t.reduction)
    check_guards(whole)


@pytest.mark.parametrize("algorithm", clconv.algorithms("forward") + ["auto"])
@pytest.mark.parametrize("t", TCASES, ids=repr)
def test_conv_transpose_input_every_algorithm(queue, rng, t, algorithm):
    _, w, _, gy = _data(rng, t)
    args = dict(t.args(), algorithm=algorithm)
    if _declines(algorithm, t):
        with pytest.raises(ValueError, match=algorithm):
            _op(t, "_input")(gy, w, **args)
        return
    out, whole = guarded(queue, t.input_shape)
    got = _op(t, "_input")(at_offset(queue, gy), at_offset(queue, w), **args, out=out)
    assert got is out
    assert_matches(got, R.conv_transpose_input(gy, w, t.input_shape[2:], **t.args()), t.input_grad_reduction)
    check_guards(whole)


@pytest.mark.parametrize("algorithm", clconv.algorithms("backward_weight") + ["auto"])
@pytest.mark.parametrize("t", TCASES, ids=repr)
def test_conv_transpose_weight_every_algorithm(queue, rng, t, algorithm):
    x, _, _, gy = _data(rng, t)
    args = dict(t.args(), algorithm=algorithm)
    if _declines(algorithm, t, t.weight_grad_reduction):
        with pytest.raises(ValueError, match=algorithm):
            _op(t, "_weight")(x, t.weight_shape, gy, **args)
        return
    out, whole = guarded(queue, t.weight_shape)
    got = _op(t, "_weight")(at_offset(queue, x), t.weight_shape, at_offset(queue, gy), **args, out=out)
    assert got is out
    assert_matches(got, R.conv_transpose_weight(x, t.weight_shape, gy, **t.args()), t.weight_grad_reduction)
    check_guards(whole)


def test_conv_transpose_weight_splitk(queue, rng):
    """The transposed twin of the split-K geometry: 2 x 16x16 transposed-input pixels cut in two."""
    t = SPLITK_CASE.transposed()
    assert splitk_expected_to_serve(t.weight_grad_reduction)
    x, _, _, gy = _data(rng, t)
    out = poisoned(queue, t.weight_shape)
    got = clconv.conv_transpose2d_weight(cl_array.to_device(queue, x), t.weight_shape, cl_array.to_device(queue, gy),
                                         **t.args(), algorithm="splitk", out=out)
    assert_matches(got, R.conv_transpose_weight(x, t.weight_shape, gy, **t.args()), t.weight_grad_reduction)


@pytest.mark.parametrize("t", [CASES[0].transposed(), CASES[3].transposed(), T_CASES[0]], ids=repr)
def test_unbatched_numpy_in_numpy_out(rng, t):
    """(C, *spatial) tensors, numpy in and numpy out, algorithm auto: all three ops."""
    x, w, b, gy = _data(rng, t)
    x1, gy1 = x[:1], gy[:1]
    y = _op(t)(x1[0], w, b, **t.args())
    gx = _op(t, "_input")(gy1[0], w, **t.args())
    gw = _op(t, "_weight")(x1[0], t.weight_shape, gy1[0], **t.args())
    assert all(isinstance(a, np.ndarray) for a in (y, gx, gw))
    assert_matches(y, R.conv_transpose(x1, w, b, **t.args())[0], t.reduction)
    assert_matches(gx, R.conv_transpose_input(gy1, w, t.input_shape[2:], **t.args())[0], t.input_grad_reduction)
    assert_matches(gw, R.conv_transpose_weight(x1, t.weight_shape, gy1, **t.args()), t.weight_grad_reduction)


def test_batch_zero(rng):
    x, w = np.zeros((0, 4, 3, 3), np.float32), random(rng, (4, 2, 3, 3))
    assert clconv.conv_transpose2d(x, w, stride=2).shape == (0, 2, 7, 7)
    assert clconv.conv_transpose2d_input(np.zeros((0, 2, 7, 7), np.float32), w, stride=2).shape == (0, 4, 3, 3)
    gw = clconv.conv_transpose2d_weight(x, w.shape, np.zeros((0, 2, 7, 7), np.float32), stride=2)
    np.testing.assert_array_equal(gw, np.zeros(w.shape))


def test_output_padding_region_gets_bias_only(queue, rng):
    """With stride 1, dilation 2 and output_padding 1 the last output is reached by no input."""
    x, w, b = random(rng, (2, 3, 5)), random(rng, (3, 2, 3)), random(rng, (2,))
    y = clconv.conv_transpose1d(x, w, b, stride=1, dilation=2, output_padding=1, out=poisoned(queue, (2, 2, 10)))
    y = y.get()
    np.testing.assert_array_equal(y[..., -1], np.broadcast_to(b, (2, 2)))
    assert_matches(y, R.conv_transpose(x, w, b, stride=1, dilation=2, output_padding=1), 9)


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize("op_kwargs", [
    dict(stride=2, dilation=1, output_padding=2),    # == stride, > dilation
    dict(stride=1, dilation=1, output_padding=1),
    dict(stride=2, dilation=2, output_padding=(1, 2)),  # second dim: >= both
    dict(stride=(2, 3), dilation=(1, 1), output_padding=(0, 3)),
], ids=["op2-s2-d1", "op1-s1-d1", "op1x2-s2-d2", "op0x3-s2x3"])
def test_output_padding_not_below_stride_or_dilation_is_refused(rng, op_kwargs):
    x, w, gy = random(rng, (1, 2, 4, 4)), random(rng, (2, 3, 3, 3)), random(rng, (1, 3, 12, 12))
    for call in (
        lambda: clconv.conv_transpose2d(x, w, **op_kwargs),
        lambda: clconv.conv_transpose2d_input(gy, w, **op_kwargs),
        lambda: clconv.conv_transpose2d_weight(x, w.shape, gy, **op_kwargs),
        lambda: clconv.convolution_backward(gy, x, w, transposed=True, padding=0, groups=1, **op_kwargs),
    ):
        with pytest.raises(ValueError, match="output_padding"):
            call()


def test_bad_arguments_raise_naming_them(rng):
    x, w = random(rng, (1, 4, 5, 5)), random(rng, (4, 3, 3, 3))
    cases = [
        (ValueError, "output_padding", dict(output_padding=-1)),
        (ValueError, "output_padding", dict(stride=2, output_padding=(1, 1, 1))),
        (ValueError, "padding", dict(padding="same")),
        (ValueError, "padding", dict(padding=5)),  # output would be empty
        (ValueError, "groups", dict(groups=3)),
        (TypeError, "stride", dict(stride=1.5)),
    ]
    for error, name, kwargs in cases:
        with pytest.raises(error, match=name):
            clconv.conv_transpose2d(x, w, **kwargs)
    with pytest.raises(ValueError, match="weight"):
        clconv.conv_transpose2d(x, random(rng, (3, 3, 3, 3)))
    with pytest.raises(ValueError, match="bias"):
        clconv.conv_transpose2d(x, w, random(rng, (4,)))  # C_out is 3
    with pytest.raises(ValueError, match="grad_output"):
        clconv.conv_transpose2d_input(random(rng, (1, 3, 6, 7)), w, stride=2)  # 2 * 2 + 3 = 7, not 6
    with pytest.raises(ValueError, match="grad_output"):
        clconv.conv_transpose2d_weight(x, w.shape, random(rng, (1, 3, 7, 8)))
    with pytest.raises(ValueError, match="weight_size"):
        clconv.conv_transpose2d_weight(x, (4, 3, 3), random(rng, (1, 3, 7, 7)))
