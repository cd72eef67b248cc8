"""The convolution's gradients: conv*d_input, conv*d_weight, the bias gradient, convolution_backward.

Every algorithm of the backward_data and backward_weight passes runs on every shared geometry
(transposed_reference.CASES) into a NaN-poisoned output and is compared with the float64 references
of transposed_reference.py (zero-insertion transposed convolution; per-tap weight gradient), which are
themselves checked here by adjoint identities and against clconv/reference.py.
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cl_array
import pytest

import clconv
import clconv.ops
from clconv import reference as core_reference
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.geometry import resolve_conv

import transposed_reference as R
from helpers import assert_matches, poisoned, random
from transposed_reference import (
    CASES, SPLITK_CASE, at_offset, check_guards, expected_to_decline, guarded, splitk_expected_to_serve,
)


def _inner(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def _data(rng, case, dtype=np.float32):
    return random(rng, case.input_shape, dtype), random(rng, case.weight_shape, dtype), random(rng, case.output_shape, dtype)


# -- the references themselves -----------------------------------------------------------------


@pytest.mark.parametrize("case", CASES + [SPLITK_CASE], ids=repr)
def test_references_are_adjoints_and_agree_with_core_reference(rng, case):
    """<conv(x, w), dy> = <x, conv_input(dy)> = <w, conv_weight(x, dy)>, and both gradients equal
    clconv/reference.py's (written another way: scatter slices and einsums over one geometry)."""
    x, w, dy = (a.astype(np.float64) for a in _data(rng, case))
    y = R.conv_forward(x, w, None, **case.conv_args())
    assert y.shape == case.output_shape
    dx = R.conv_input(case.input_shape, w, dy, **case.conv_args())
    dw = R.conv_weight(x, case.weight_shape, dy, **case.conv_args())
    scale = np.sqrt(y.size * case.forward_reduction)
    assert abs(_inner(y, dy) - _inner(x, dx)) < 1e-10 * scale
    assert abs(_inner(y, dy) - _inner(w, dw)) < 1e-10 * scale
    g = resolve_conv(case.ndim, case.input_shape, case.weight_shape, None, **case.conv_args()).geometry
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


# -- every algorithm of every backward pass ------------------------------------------------------


def _expect_decline(algorithm: str, pass_: str, case) -> bool:
    return expected_to_decline(algorithm, pointwise=case.is_pointwise, cin_per_group=case.cin // case.groups,
                               kernel=case.kernel, weight_reduction=case.weight_reduction)


@pytest.mark.parametrize("algorithm", clconv.algorithms("backward_data") + ["auto"])
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_conv_input_every_algorithm(queue, rng, case, algorithm):
    _, w, dy = _data(rng, case)
    op = getattr(clconv, f"conv{case.ndim}d_input")
    if _expect_decline(algorithm, "backward_data", case):
        with pytest.raises(ValueError, match=algorithm):
            op(case.input_shape, w, dy, **case.conv_args(), algorithm=algorithm)
        return
    # device inputs that start inside their buffers; an output with NaN guard bands either side
    out, whole = guarded(queue, case.input_shape)
    got = op(case.input_shape, at_offset(queue, w), at_offset(queue, dy), **case.conv_args(), algorithm=algorithm,
             out=out)
    assert got is out
    ref = R.conv_input(case.input_shape, w, dy, **case.conv_args())
    assert_matches(got, ref, case.data_reduction)
    check_guards(whole)


@pytest.mark.parametrize("algorithm", clconv.algorithms("backward_weight") + ["auto"])
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_conv_weight_every_algorithm(queue, rng, case, algorithm):
    x, _, dy = _data(rng, case)
    op = getattr(clconv, f"conv{case.ndim}d_weight")
    if _expect_decline(algorithm, "backward_weight", case):
        with pytest.raises(ValueError, match=algorithm):
            op(x, case.weight_shape, dy, **case.conv_args(), algorithm=algorithm)
        return
    out, whole = guarded(queue, case.weight_shape)
    got = op(at_offset(queue, x), case.weight_shape, at_offset(queue, dy), **case.conv_args(), algorithm=algorithm,
             out=out)
    assert got is out
    ref = R.conv_weight(x, case.weight_shape, dy, **case.conv_args())
    assert_matches(got, ref, case.weight_reduction)
    check_guards(whole)


# float64 through each kernel family once (the direct kernels in test_gradcheck.py): the tiled GEMM
# (implicit_gemm), col2im, the split-K reduction and the depthwise weight gradient
FLOAT64_RUNS = [("backward_data", "implicit_gemm"), ("backward_data", "im2col"), ("backward_weight", "splitk")] + [
    ("backward_weight", a) for a in clconv.algorithms("backward_weight") if a == "depthwise"]


@pytest.mark.parametrize("pass_,algorithm", FLOAT64_RUNS)
def test_float64_kernel_families(queue, rng, pass_, algorithm):
    """float64 (where the device has cl_khr_fp64) at float64's tolerance."""
    from clconv.device import supports_fp64

    if not supports_fp64(queue.device):
        pytest.skip(f"{queue.device.name} has no cl_khr_fp64")
    case = {"gemm1x1": CASES[2], "splitk": SPLITK_CASE, "depthwise": CASES[3]}.get(algorithm, CASES[1])
    x, w, dy = _data(rng, case, np.float64)
    if pass_ == "backward_data":
        got = getattr(clconv, f"conv{case.ndim}d_input")(case.input_shape, w, dy, **case.conv_args(),
                                                         algorithm=algorithm,
                                                         out=poisoned(queue, case.input_shape, np.float64))
        assert got.dtype == np.float64
        assert_matches(got, R.conv_input(case.input_shape, w, dy, **case.conv_args()), case.data_reduction, np.float64)
    else:
        got = getattr(clconv, f"conv{case.ndim}d_weight")(x, case.weight_shape, dy, **case.conv_args(),
                                                          algorithm=algorithm,
                                                          out=poisoned(queue, case.weight_shape, np.float64))
        assert got.dtype == np.float64
        assert_matches(got, R.conv_weight(x, case.weight_shape, dy, **case.conv_args()), case.weight_reduction,
                       np.float64)


def test_batch_zero(queue, rng):
    """An empty batch: empty data gradients, and weight and bias gradients of zeros (sums over nothing)."""
    w = random(rng, (3, 2, 3, 3))
    dy = np.zeros((0, 3, 4, 4), np.float32)
    x = np.zeros((0, 2, 6, 6), np.float32)
    assert clconv.conv2d_input((0, 2, 6, 6), w, dy).shape == (0, 2, 6, 6)
    dw = clconv.conv2d_weight(x, w.shape, dy, out=poisoned(queue, w.shape))
    np.testing.assert_array_equal(dw.get(), np.zeros(w.shape))
    gi, gw, gb = clconv.convolution_backward(dy, x, w)
    assert gi.shape == x.shape
    np.testing.assert_array_equal(gw, np.zeros(w.shape))
    np.testing.assert_array_equal(gb, np.zeros(3))
    # the float64 reference agrees: empty results, a zero weight gradient
    g = resolve_conv(2, x.shape, w.shape, None, 1, 0, 1, 1).geometry
    assert R.conv_input(x.shape, w, dy).shape == x.shape and core_reference.forward(g, x, w).shape == dy.shape
    np.testing.assert_array_equal(core_reference.backward_weight(g, x, dy), np.zeros(w.shape))


def test_splitk_runs_where_the_contraction_cuts_evenly(queue, rng):
    """batch 2 x 16x16 output pixels = 512 = 2 pieces of 256: split-K serves and is right, on device
    Arrays in and out; its plan really has two launches (the GEMM over pieces and the reduction)."""
    case = SPLITK_CASE
    assert splitk_expected_to_serve(case.weight_reduction)
    x, _, dy = _data(rng, case)
    xd, dyd = cl_array.to_device(queue, x), cl_array.to_device(queue, dy)
    out = poisoned(queue, case.weight_shape)
    got = clconv.conv2d_weight(xd, case.weight_shape, dyd, **case.conv_args(), algorithm="splitk", out=out)
    assert got is out
    assert_matches(got, R.conv_weight(x, case.weight_shape, dy, **case.conv_args()), case.weight_reduction)
    source = clconv.render(clconv.conv2d_weight, xd, case.weight_shape, dyd, **case.conv_args(), algorithm="splitk")
    assert "clc_gemm" in source and "clc_splitk_sum" in source
    # auto without tuning prefers split-K for a weight gradient it serves; it must agree too
    auto = clconv.conv2d_weight(x, case.weight_shape, dy, **case.conv_args())
    assert_matches(auto, R.conv_weight(x, case.weight_shape, dy, **case.conv_args()), case.weight_reduction)


@pytest.mark.parametrize("algorithm,pass_,message", [
    ("splitk", "backward_weight", "no even cut"),
    ("gemm1x1", "backward_weight", "1x1"),
    ("gemm1x1", "backward_data", "1x1"),
])
def test_declining_algorithm_raises_value_error_naming_it(rng, algorithm, pass_, message):
    case = CASES[1]  # 3x2 kernel, contraction 2 x 24 output pixels: too short to cut
    x, w, dy = _data(rng, case)
    with pytest.raises(ValueError, match=rf"'{algorithm}'.*{message}"):
        if pass_ == "backward_weight":
            clconv.conv2d_weight(x, case.weight_shape, dy, **case.conv_args(), algorithm=algorithm)
        else:
            clconv.conv2d_input(case.input_shape, w, dy, **case.conv_args(), algorithm=algorithm)


def test_algorithm_not_serving_the_pass_is_refused(rng):
    case = CASES[1]
    _, w, dy = _data(rng, case)
    with pytest.raises(ValueError, match="algorithm"):
        clconv.conv2d_input(case.input_shape, w, dy, **case.conv_args(), algorithm="splitk")
    with pytest.raises(ValueError, match="algorithm"):
        clconv.conv2d_input(case.input_shape, w, dy, **case.conv_args(), algorithm="winograd")


@pytest.mark.parametrize("pass_", ["backward_data", "backward_weight"])
def test_im2col_batch_chunks(queue, rng, monkeypatch, pass_):
    """A workspace limit of one image's column buffer makes im2col run the batch in 3 chunks: the
    data gradient folds each chunk, the weight gradient accumulates them in launch order."""
    case = R.Case("2d-n3-chunked", 2, 3, 2, 3, (5, 6), (2, 3), 1, (0, 1))
    column_bytes = case.cin * 6 * np.prod(case.out_size) * 4
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(int(column_bytes)))
    x, w, dy = _data(rng, case)
    if pass_ == "backward_data":
        out = poisoned(queue, case.input_shape)
        got = clconv.conv2d_input(case.input_shape, w, dy, **case.conv_args(), algorithm="im2col", out=out)
        assert_matches(got, R.conv_input(case.input_shape, w, dy, **case.conv_args()), case.data_reduction)
        kernel = "clc_col2im"
    else:
        out = poisoned(queue, case.weight_shape)
        got = clconv.conv2d_weight(x, case.weight_shape, dy, **case.conv_args(), algorithm="im2col", out=out)
        assert_matches(got, R.conv_weight(x, case.weight_shape, dy, **case.conv_args()), case.weight_reduction)
        kernel = "clc_im2col"
    # three chunks of one image: the plan fills and consumes the column buffer three times
    problem = Problem(resolve_conv(2, case.input_shape, case.weight_shape, None, **case.conv_args()).geometry,
                      pass_, "float32")
    im2col = REGISTRY["im2col"]
    assert im2col.chunk_batch(problem, queue.device) == 1
    runner = im2col.plan(problem, im2col.configs(problem, queue.device)[0], queue.device)  # a plan: nothing built
    packed = any("clc_pack_a" in source for _, source in runner.sources)  # the CPU GEMM packs w once
    assert len(runner.calls) == 2 * 3 + packed
    assert any(kernel in source for _, source in runner.sources)


@pytest.mark.parametrize("case", [CASES[0], CASES[3]], ids=repr)
def test_unbatched_numpy_in_numpy_out(rng, case):
    """(C, *spatial) tensors, numpy in and out, algorithm auto."""
    x, w, dy = _data(rng, case)
    x, dy = x[0], dy[0]
    one = (1, *case.input_shape[1:])
    in_op = getattr(clconv, f"conv{case.ndim}d_input")
    w_op = getattr(clconv, f"conv{case.ndim}d_weight")
    dx = in_op(case.input_shape[1:], w, dy, **case.conv_args())
    dw = w_op(x, case.weight_shape, dy, **case.conv_args())
    assert isinstance(dx, np.ndarray) and isinstance(dw, np.ndarray)
    assert_matches(dx, R.conv_input(one, w, dy[None], **case.conv_args())[0], case.data_reduction)
    assert_matches(dw, R.conv_weight(x[None], case.weight_shape, dy[None], **case.conv_args()), case.weight_reduction)


# -- input_size: PyTorch's output-padding ambiguity ---------------------------------------------------


def test_conv2d_input_size_ambiguity_as_pytorch(queue, rng):
    """conv2d k3 s2 p1 maps inputs of 7 and 8 alike onto 4 outputs: conv2d_input gives the gradient
    for the input_size asked for (PyTorch's grad_input_padding), mixed per dim too; a size no input
    maps onto dy is a ValueError naming input_size."""
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
    for bad in [(6, 6), (9, 9), (7, 9), (2, 7)]:
        with pytest.raises(ValueError, match="input_size"):
            clconv.conv2d_input((2, 2, *bad), w, dy, stride=2, padding=1)


def test_conv_input_size_must_agree_with_weight_and_grad_output(rng):
    w = random(rng, (3, 2, 3))
    dy = random(rng, (2, 3, 5))
    with pytest.raises(ValueError, match="input_size"):
        clconv.conv1d_input((2, 2, 4, 4), w, dy)  # a 2D size for a 1D op
    with pytest.raises(ValueError, match="input_size"):
        clconv.conv1d_input((3, 2, 7), w, dy)  # batch disagrees with dy
    with pytest.raises(ValueError):
        clconv.conv1d_input((2, 4, 7), w, dy)  # channels disagree with the weight
    with pytest.raises(TypeError, match="input_size"):
        clconv.conv1d_input(7, w, dy)
    with pytest.raises(ValueError, match="weight_size"):
        clconv.conv1d_weight(random(rng, (2, 2, 7)), (3, 2), dy)


# -- the bias gradient and convolution_backward ---------------------------------------------------


MASKS = [(a, b, c) for a in (False, True) for b in (False, True) for c in (False, True)]


def _mask_id(mask) -> str:
    return "".join("1" if m else "0" for m in mask)


@pytest.mark.parametrize("mask", MASKS, ids=_mask_id)
@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "transposed"])
def test_convolution_backward_output_mask(queue, rng, monkeypatch, transposed, mask):
    """Each True entry is computed and right; each False entry is None and runs no kernel."""
    case = CASES[1]  # 2D, groups 2, dilation, asymmetric padding
    passes, bias_calls = [], []
    real_run, real_bias = clconv.planner.run, clconv.ops._bias_gradient
    monkeypatch.setattr(clconv.planner, "run", lambda p, *a, **k: passes.append(p.pass_) or real_run(p, *a, **k))
    monkeypatch.setattr(clconv.ops, "_bias_gradient", lambda *a, **k: bias_calls.append(1) or real_bias(*a, **k))
    x, w, dy = _data(rng, case)
    args = case.conv_args()
    if transposed:
        # the transposed op's input is the conv's output and vice versa; the weight layout is shared
        inp, grad = cl_array.to_device(queue, dy), cl_array.to_device(queue, x)
        args = case.transposed_args()
        refs = (R.conv_transpose_input(x, w, case.out_size, **args),
                R.conv_transpose_weight(dy, case.weight_shape, x, **args), R.bias_grad(x))
        reductions = (case.forward_reduction, case.weight_reduction, case.batch * np.prod(case.in_size))
        expected_passes = ["forward", "backward_weight"]
    else:
        inp, grad = cl_array.to_device(queue, x), cl_array.to_device(queue, dy)
        refs = (R.conv_input(case.input_shape, w, dy, **args), R.conv_weight(x, case.weight_shape, dy, **args),
                R.bias_grad(dy))
        reductions = (case.data_reduction, case.weight_reduction, case.weight_reduction)
        expected_passes = ["backward_data", "backward_weight"]
    result = clconv.convolution_backward(grad, inp, cl_array.to_device(queue, w), transposed=transposed,
                                         output_mask=mask, **args)
    assert len(result) == 3
    for got, wanted, ref, length in zip(result, mask, refs, reductions):
        if not wanted:
            assert got is None
        else:
            assert isinstance(got, cl_array.Array)
            assert_matches(got, ref, int(length))
    assert passes == [p for p, m in zip(expected_passes, mask[:2]) if m]
    assert len(bias_calls) == int(mask[2])


def test_convolution_backward_numpy_unbatched_3d(rng):
    case = CASES[3]
    x, w, dy = _data(rng, case)
    x, dy = x[:1], dy[:1]
    gi, gw, gb = clconv.convolution_backward(dy[0], x[0], w, **case.conv_args())
    assert all(isinstance(t, np.ndarray) for t in (gi, gw, gb))
    assert_matches(gi, R.conv_input(x.shape, w, dy, **case.conv_args())[0], case.data_reduction)
    assert_matches(gw, R.conv_weight(x, case.weight_shape, dy, **case.conv_args()), case.weight_reduction)
    assert_matches(gb, R.bias_grad(dy), case.weight_reduction)


def test_bias_gradient_is_sum_over_batch_and_space(queue, rng):
    """1D and 3D grad_outputs, odd sizes: the bias gradient alone (mask (False, False, True))."""
    for shape, wshape in [((3, 5, 17), (5, 2, 3)), ((2, 3, 3, 5, 4), (3, 1, 1, 1, 1))]:
        ndim = len(shape) - 2
        dy = random(rng, shape)
        x = random(rng, (shape[0], wshape[1], *(s + wshape[2 + i] - 1 for i, s in enumerate(shape[2:]))))
        _, _, gb = clconv.convolution_backward(cl_array.to_device(queue, dy), cl_array.to_device(queue, x),
                                               random(rng, wshape), output_mask=(False, False, True))
        assert_matches(gb, dy.astype(np.float64).sum(axis=(0, *range(2, 2 + ndim))), int(np.prod(shape) // shape[1]))


def test_convolution_backward_validates_before_work(rng, monkeypatch):
    case = CASES[0]
    x, w, dy = _data(rng, case)
    args = case.conv_args()
    monkeypatch.setattr(clconv.ops, "_run_pass", lambda *a, **k: pytest.fail("ran a pass on bad arguments"))
    with pytest.raises(TypeError, match="output_mask"):
        clconv.convolution_backward(dy, x, w, **args, output_mask=(True, True))
    with pytest.raises(TypeError, match="output_mask"):
        clconv.convolution_backward(dy, x, w, **args, output_mask=(1, 1, 1))
    with pytest.raises(TypeError, match="transposed"):
        clconv.convolution_backward(dy, x, w, **args, transposed=1)
    with pytest.raises(ValueError, match="grad_output"):
        clconv.convolution_backward(dy[:, :, :-1], x, w, **args)
    with pytest.raises(ValueError, match="output_padding"):
        clconv.convolution_backward(dy, x, w, **args, output_padding=1)
    with pytest.raises(TypeError):
        clconv.convolution_backward(dy, x.astype(np.float64), w, **args)
    with pytest.raises(ValueError, match="algorithm"):
        clconv.convolution_backward(dy, x, w, **args, algorithm="splitk")  # no backward_data kernel
