"""The public ops beyond the matrix of test_matrix.py, against the float64 references: numpy and
device tensors in and out, unbatched tensors, empty batches, conv*d_input's choice among the input
sizes that map onto one grad_output, the transposed op's output padding, convolution_backward's
output mask and the bias gradient."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyopencl.array as cl_array
import pytest

import clconv
import clconv.ops
from clconv.builder import stats
from clconv.passes import OPS

import transposed_reference as R
from cases import FORWARD_CASES, GRADIENT_CASES, TRANSPOSED_ONLY, Case
from helpers import assert_matches, poisoned, random

ROUND_TRIP = FORWARD_CASES[4]  # 2D, stride 2, dilation 2, groups 2, bias: its programs are the matrix's


def _inner(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


# -- tensor kinds ------------------------------------------------------------------------------------


def test_numpy_in_numpy_out(rng):
    operands = ROUND_TRIP.operands("conv", rng)
    y = ROUND_TRIP.call("conv", operands, algorithm="direct")
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    assert_matches(y, ROUND_TRIP.expected("conv", operands), ROUND_TRIP.reduction_length("conv"))


def test_array_in_array_out_same_queue(queue, rng):
    operands = ROUND_TRIP.operands("conv", rng)
    arrays = {role: cl_array.to_device(queue, value) for role, value in operands.items()}
    y = ROUND_TRIP.call("conv", arrays, algorithm="implicit_gemm")
    assert isinstance(y, cl_array.Array)
    assert y.queue is queue and y.context == queue.context
    assert y.dtype == np.float32 and y.shape == ROUND_TRIP.output_shape
    assert_matches(y, ROUND_TRIP.expected("conv", operands), ROUND_TRIP.reduction_length("conv"))
    for role, value in operands.items():  # the inputs are left alone
        np.testing.assert_array_equal(arrays[role].get(), value)


# -- unbatched tensors -------------------------------------------------------------------------------

UNBATCHED = [replace(GRADIENT_CASES[0], batch=None), replace(GRADIENT_CASES[3], batch=None),
             replace(TRANSPOSED_ONLY[0], batch=None)]


@pytest.mark.parametrize("case", UNBATCHED, ids=lambda c: c.id)
def test_unbatched_numpy_in_numpy_out(rng, case):
    """(C, *spatial) tensors, numpy in and numpy out, algorithm auto: the gradients and the three
    transposed ops (the unbatched forward op: test_matrix.py)."""
    families = ["conv_transpose", "conv_transpose_input", "conv_transpose_weight"]
    if not case.transposed_only:
        families = ["conv_input", "conv_weight", *families]
    for family in families:
        operands = case.operands(family, rng)
        assert all(value.ndim == case.ndim + (1 if role in ("x", "dy") else 2) for role, value in operands.items()
                   if role != "bias")
        got = case.call(family, operands)
        assert isinstance(got, np.ndarray) and got.shape == case.result_shape(family), family
        assert_matches(got, case.expected(family, operands), case.reduction_length(family))


def test_convolution_backward_numpy_unbatched_3d(rng):
    case = replace(GRADIENT_CASES[3], batch=None)
    x, w, dy = (random(rng, shape) for shape in (case.input_shape, case.weight_shape, case.output_shape))
    gi, gw, gb = clconv.convolution_backward(dy, x, w, **case.conv_args())
    assert all(isinstance(t, np.ndarray) for t in (gi, gw, gb))
    assert_matches(gi, case.expected("conv_input", {"w": w, "dy": dy}), case.reduction_length("conv_input"))
    assert_matches(gw, case.expected("conv_weight", {"x": x, "dy": dy}), case.reduction_length("conv_weight"))
    assert_matches(gb, R.bias_grad(dy[None]), case.reduction_length("conv_weight"))


# -- empty batches -------------------------------------------------------------------------------------

EMPTY = [Case(n, 0, 4, 6, (5, 6, 4)[:n], (3,) * n, 2, 1, 1, 2) for n in (1, 2, 3)]


@pytest.mark.parametrize("case", EMPTY, ids=lambda c: c.id)
def test_batch_zero_every_op(queue, rng, case):
    """An empty batch: empty activations and weight and bias gradients of zeros (sums over nothing),
    numpy or Arrays in, with or without out=, from every op and convolution_backward; nothing built."""
    builds = stats.source_builds
    for family in OPS:
        operands = case.operands(family, rng)
        weight_gradient = OPS[family].pass_ == "backward_weight"
        got = case.call(family, operands)
        assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == case.result_shape(family)
        assert not weight_gradient or (got == 0).all(), family
        arrays = {role: cl_array.to_device(queue, value) for role, value in operands.items()}
        out = poisoned(queue, case.result_shape(family))
        got = case.call(family, arrays, algorithm="im2col", out=out)
        assert got is out and (not weight_gradient or (out.get() == 0).all()), family
    x, w, dy = (random(rng, shape) for shape in (case.input_shape, case.weight_shape, case.output_shape))
    gi, gw, gb = clconv.convolution_backward(dy, x, w, **case.conv_args())
    assert gi.shape == x.shape and not gw.any() and gw.shape == w.shape and not gb.any() and gb.shape == (case.cout,)
    gi, gw, gb = clconv.convolution_backward(x, dy, w, transposed=True, **case.transposed_args())
    assert gi.shape == dy.shape and not gw.any() and gw.shape == w.shape and gb.shape == (case.cin,)
    assert stats.source_builds == builds, "an empty batch built a kernel"


# -- conv*d_input: the input size PyTorch's output padding chooses --------------------------------------


def test_conv2d_input_size_ambiguity_as_pytorch(queue, rng):
    """conv2d k3 s2 p1 maps inputs of 7 and 8 alike onto 4 outputs: conv2d_input gives the gradient
    for the input_size asked for (PyTorch's grad_input_padding), mixed per dim too (sizes no input
    maps onto dy are refused: tests/unit/test_arguments.py)."""
    w = random(rng, (3, 2, 3, 3))
    dy = random(rng, (2, 3, 4, 4))
    for size in [(7, 7), (8, 8), (7, 8)]:
        input_size = (2, 2, *size)
        out = poisoned(queue, input_size)
        got = clconv.conv2d_input(input_size, w, dy, stride=2, padding=1, algorithm="direct", out=out)
        ref = R.conv_input(input_size, w, dy, stride=2, padding=1)
        assert_matches(got, ref, 3 * 9)
        # the definition: <conv(x), dy> = <x, dx> for an x of exactly that size
        x = rng.standard_normal(input_size)
        y = R.conv_forward(x, w, stride=2, padding=1)
        assert abs(_inner(y, dy) - _inner(x, got.get())) < 1e-3 * np.sqrt(y.size * 18)


def test_output_padding_region_gets_bias_only(queue, rng):
    """With stride 1, dilation 2 and output_padding 1 the last output is reached by no input."""
    x, w, b = random(rng, (2, 3, 5)), random(rng, (3, 2, 3)), random(rng, (2,))
    y = clconv.conv_transpose1d(x, w, b, stride=1, dilation=2, output_padding=1, out=poisoned(queue, (2, 2, 10)))
    y = y.get()
    np.testing.assert_array_equal(y[..., -1], np.broadcast_to(b, (2, 2)))
    assert_matches(y, R.conv_transpose(x, w, b, stride=1, dilation=2, output_padding=1), 9)


# -- convolution_backward and the bias gradient ----------------------------------------------------------

MASKS = [(a, b, c) for a in (False, True) for b in (False, True) for c in (False, True)]


def _mask_id(mask) -> str:
    return "".join("1" if m else "0" for m in mask)


@pytest.mark.parametrize("mask", MASKS, ids=_mask_id)
@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "transposed"])
def test_convolution_backward_output_mask(queue, rng, monkeypatch, transposed, mask):
    """Each True entry is computed and right; each False entry is None and runs no kernel."""
    case = GRADIENT_CASES[1]  # 2D, groups 2, dilation, asymmetric padding
    passes, bias_calls = [], []
    real_run, real_bias = clconv.planner.run, clconv.ops._bias_gradient
    monkeypatch.setattr(clconv.planner, "run", lambda p, *a, **k: passes.append(p.pass_) or real_run(p, *a, **k))
    monkeypatch.setattr(clconv.ops, "_bias_gradient", lambda *a, **k: bias_calls.append(1) or real_bias(*a, **k))
    x, w, dy = (random(rng, shape) for shape in (case.input_shape, case.weight_shape, case.output_shape))
    if transposed:
        # the transposed op's input is the conv's output and vice versa; the weight layout is shared
        inp, grad, args = dy, x, case.transposed_args()
        families = ("conv_transpose_input", "conv_transpose_weight")
        bias_length = case.batch * int(np.prod(case.size))
    else:
        inp, grad, args = x, dy, case.conv_args()
        families = ("conv_input", "conv_weight")
        bias_length = case.reduction_length("conv_weight")
    refs = (case.expected(families[0], {"w": w, "dy": dy, "x": x}), case.expected(families[1], {"x": x, "dy": dy}),
            R.bias_grad(grad))
    lengths = (case.reduction_length(families[0]), case.reduction_length(families[1]), bias_length)
    result = clconv.convolution_backward(cl_array.to_device(queue, grad), cl_array.to_device(queue, inp),
                                         cl_array.to_device(queue, w), transposed=transposed, output_mask=mask, **args)
    assert len(result) == 3
    for got, wanted, ref, length in zip(result, mask, refs, lengths):
        if not wanted:
            assert got is None
        else:
            assert isinstance(got, cl_array.Array)
            assert_matches(got, ref, int(length))
    assert passes == [OPS[f].pass_ for f, m in zip(families, mask[:2]) if m]
    assert len(bias_calls) == int(mask[2])


def test_bias_gradient_is_sum_over_batch_and_space(queue, rng):
    """1D and 3D grad_outputs, odd sizes: the bias gradient alone (mask (False, False, True))."""
    for shape, wshape in [((3, 5, 17), (5, 2, 3)), ((2, 3, 3, 5, 4), (3, 1, 1, 1, 1))]:
        ndim = len(shape) - 2
        dy = random(rng, shape)
        x = random(rng, (shape[0], wshape[1], *(s + wshape[2 + i] - 1 for i, s in enumerate(shape[2:]))))
        _, _, gb = clconv.convolution_backward(cl_array.to_device(queue, dy), cl_array.to_device(queue, x),
                                               random(rng, wshape), output_mask=(False, False, True))
        assert_matches(gb, dy.astype(np.float64).sum(axis=(0, *range(2, 2 + ndim))), int(np.prod(shape) // shape[1]))
