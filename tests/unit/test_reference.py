"""The float64 references the suite relies on, checked against each other and against hand-computed
values: clconv/reference.py (strided slices and einsums over one geometry), tests/naive_reference.py
(index by index) and tests/transposed_reference.py (zero insertion, per-tap weight gradients,
adjoints).  No device."""

from __future__ import annotations

import numpy as np
import pytest

from clconv import reference as core_reference
from clconv.geometry import resolve_conv, resolve_conv_transpose

import transposed_reference as R
from cases import GRADIENT_CASES, SPLITK_CASE, TRANSPOSED_ONLY, Case
from naive_reference import conv_naive


def _inner(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


# -- the fast forward reference against naive loops -------------------------------------------------

NAIVE_CASES = [
    Case(1, 2, 4, 6, (9,), (3,), 2, ((2, 1),), 2, 2, bias=True),
    Case(2, 2, 4, 4, (6, 5), (3, 2), (2, 1), ((1, 0), (2, 1)), (1, 2), 2, bias=True),
    Case(2, 1, 3, 6, (5, 5), (2, 2), 1, 1, 1, 3),
    Case(3, 1, 2, 3, (4, 5, 3), (2, 3, 2), (1, 2, 1), ((1, 0), (0, 1), (1, 1)), (2, 1, 1), 1, bias=True),
]


@pytest.mark.parametrize("case", NAIVE_CASES, ids=lambda c: c.id)
def test_fast_reference_matches_naive_loops(case, rng):
    """clconv.reference.forward (strided slices + einsum) equals the index-by-index definition."""
    x, w, b = rng.standard_normal(case.input_shape), rng.standard_normal(case.weight_shape), None
    if case.bias:
        b = rng.standard_normal(case.cout)
    naive = conv_naive(x, w, b, case.stride, case.padding, case.dilation, case.groups)
    g = case.geometry
    fast = core_reference.forward(g, x, w, b)
    assert fast.shape == naive.shape == g.output_shape
    np.testing.assert_allclose(fast, naive, rtol=1e-12, atol=1e-12)


def test_naive_reference_known_values():
    """A hand-computed 1D case, so the naive loops are pinned to the definition too."""
    x = np.array([[[1.0, 2.0, 3.0, 4.0, 5.0]]])
    w = np.array([[[1.0, 10.0]]])
    # padding (1, 0), stride 2, dilation 2: taps at p*2 - 1 and p*2 + 1
    got = conv_naive(x, w, np.array([0.5]), stride=2, padding=((1, 0),), dilation=2)
    # p=0: x[-1]*1 + x[1]*10 = 20; p=1: x[1]*1 + x[3]*10 = 42; out size (5+1-2-1)//2+1 = 2
    np.testing.assert_array_equal(got, [[[20.5, 42.5]]])


def test_weight_gradient_of_an_empty_batch_is_zeros():
    x, dy, w = np.zeros((0, 2, 6, 6)), np.zeros((0, 3, 4, 4)), np.ones((3, 2, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 0, 1, 1).geometry
    assert core_reference.forward(g, x, w).shape == dy.shape
    assert R.conv_input(x.shape, w, dy).shape == x.shape
    np.testing.assert_array_equal(core_reference.backward_weight(g, x, dy), np.zeros(w.shape))


# -- the gradient references ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", GRADIENT_CASES + [SPLITK_CASE], ids=lambda c: c.id)
def test_gradient_references_are_adjoints_and_agree_with_core_reference(rng, case):
    """<conv(x, w), dy> = <x, conv_input(dy)> = <w, conv_weight(x, dy)>, and both gradients equal
    clconv/reference.py's (written another way: scatter slices and einsums over one geometry)."""
    x, w, dy = (rng.standard_normal(shape) for shape in (case.input_shape, case.weight_shape, case.output_shape))
    args = dict(stride=case.stride, padding=case.padding, dilation=case.dilation, groups=case.groups)
    y = R.conv_forward(x, w, None, **args)
    assert y.shape == case.output_shape
    dx = R.conv_input(case.input_shape, w, dy, **args)
    dw = R.conv_weight(x, case.weight_shape, dy, **args)
    scale = np.sqrt(y.size * case.reduction_length("conv"))
    assert abs(_inner(y, dy) - _inner(x, dx)) < 1e-10 * scale
    assert abs(_inner(y, dy) - _inner(w, dw)) < 1e-10 * scale
    g = resolve_conv(case.ndim, case.input_shape, case.weight_shape, None, **args).geometry
    np.testing.assert_allclose(y, core_reference.forward(g, x, w), atol=1e-12)
    np.testing.assert_allclose(dx, core_reference.backward_data(g, dy, w), atol=1e-12)
    np.testing.assert_allclose(dw, core_reference.backward_weight(g, x, dy), atol=1e-12)


def test_reference_conv_input_by_hand():
    """A 1D stride-2 data gradient small enough to write out: each dy lands on its taps' positions."""
    dy = np.array([[[1.0, 10.0]]])
    w = np.array([[[1.0, 2.0, 3.0]]])
    # conv1d(input of 5, k3, stride 2, pad 0) reads x[0:3] for dy[0] and x[2:5] for dy[1]
    expected = np.array([[[1.0, 2.0, 3.0 + 10.0, 20.0, 30.0]]])
    np.testing.assert_array_equal(R.conv_input((1, 1, 5), w, dy, stride=2), expected)
    # input_size 6: the extra trailing element is read by no output, so its gradient is 0
    np.testing.assert_array_equal(R.conv_input((1, 1, 6), w, dy, stride=2)[..., :5], expected)
    assert R.conv_input((1, 1, 6), w, dy, stride=2)[0, 0, 5] == 0.0
    x = np.arange(5.0).reshape(1, 1, 5)
    np.testing.assert_array_equal(R.conv_weight(x, (1, 1, 3), dy, stride=2), [[[0 + 20, 1 + 30, 2 + 40]]])


# -- the transposed convolution's references -------------------------------------------------------------


@pytest.mark.parametrize("case", GRADIENT_CASES + TRANSPOSED_ONLY, ids=lambda c: c.id)
def test_transposed_references_are_adjoints_and_agree_with_core_reference(rng, case):
    """<ct(x, w), gy> = <x, ct_input(gy)> = <w, ct_weight(x, gy)>; ct is the adjoint of the ordinary
    convolution with the same weight (cut to the input's size); and it equals clconv/reference.py's
    backward_data on the resolved canonical geometry (bias included)."""
    # the transposed op's input is the case's output, its output the case's input
    x, w, gy = (rng.standard_normal(shape) for shape in (case.output_shape, case.weight_shape, case.input_shape))
    b = rng.standard_normal(case.cin) if case.bias else None
    args = case.transposed_args()
    y = R.conv_transpose(x, w, None, **args)
    assert y.shape == case.input_shape
    gx = R.conv_transpose_input(gy, w, case.out_size, **args)
    gw = R.conv_transpose_weight(x, case.weight_shape, gy, **args)
    tol = 1e-10 * np.sqrt(y.size * case.reduction_length("conv_transpose"))
    assert abs(_inner(y, gy) - _inner(x, gx)) < tol
    assert abs(_inner(y, gy) - _inner(w, gw)) < tol
    conv_args = dict(stride=case.stride, padding=case.padding, dilation=case.dilation, groups=case.groups)
    c = R.conv_forward(gy, w, None, **conv_args)
    c = c[(slice(None), slice(None)) + tuple(slice(0, n) for n in case.out_size)]
    np.testing.assert_allclose(c, gx, atol=1e-12)
    g = resolve_conv_transpose(case.ndim, case.output_shape, case.weight_shape, None if b is None else b.shape,
                               **args).geometry
    np.testing.assert_allclose(R.conv_transpose(x, w, b, **args), core_reference.backward_data(g, x, w, b),
                               atol=1e-12)
    np.testing.assert_allclose(gx, core_reference.forward(g, gy, w), atol=1e-12)
    np.testing.assert_allclose(gw, core_reference.backward_weight(g, gy, x), atol=1e-12)


def test_transposed_reference_by_hand():
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


# -- the Case type's own references agree with each other ----------------------------------------------


@pytest.mark.parametrize("case", GRADIENT_CASES + TRANSPOSED_ONLY + NAIVE_CASES, ids=lambda c: c.id)
def test_case_references_agree_for_every_op(rng, case):
    """Case.expected (the independent references) equals Case.reference (clconv.reference on the
    resolved geometry) for every op family the case runs: shapes and roles from clconv.passes."""
    from clconv.passes import OPS

    families = [f for f in OPS if f.startswith("conv_transpose") or not case.transposed_only]
    for family in families:
        operands = case.operands(family, rng)
        expected = case.expected(family, operands)
        assert expected.shape == case.result_shape(family), family
        np.testing.assert_allclose(expected, case.reference(family, operands), atol=1e-9, err_msg=family)
