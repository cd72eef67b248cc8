"""One test per row of the argument-check table in docs/reliability.md.

``ROWS`` *is* the table: ``python tests/reliability/test_checks.py`` prints it as Markdown, and
``test_docs_table_lists_every_row`` fails when the docs miss a row.  Every bad call must raise the
listed exception with a message matching the pattern (which names the argument and shows the
value), and must build nothing.  The last rows are inputs that are *handled* rather than refused
(non-contiguous numpy arrays, offset Array views, empty batches, NaN/inf).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pytest

import clconv
from clconv import reference
from clconv.builder import stats
from clconv.geometry import resolve_conv

F32 = np.float32
HERE = Path(__file__).resolve().parent
DOCS = HERE.parents[1] / "docs"


def t(*shape, dtype=F32):
    return (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 5 - 2).astype(dtype)


X, W, B, DY = t(1, 4, 5, 5), t(6, 2, 3, 3), t(6), t(1, 6, 5, 5)  # a valid conv2d: groups=2, padding=1
WT = t(4, 3, 3, 3)  # conv_transpose2d weight: (C_in=4, C_out/groups=3); groups=2 -> 6 channels


def conv(**kw):
    args = dict(input=X, weight=W, bias=B, padding=1, groups=2)
    args.update(kw)
    return clconv.conv2d(**args)


def tconv(**kw):
    args = dict(input=X, weight=WT, bias=B, stride=2, padding=1, output_padding=1, groups=2)
    args.update(kw)
    return clconv.conv_transpose2d(**args)


def conv_input(**kw):
    args = dict(input_size=(1, 4, 5, 5), weight=W, grad_output=DY, padding=1, groups=2)
    args.update(kw)
    return clconv.conv2d_input(**args)


def conv_weight(**kw):
    args = dict(input=X, weight_size=(6, 2, 3, 3), grad_output=DY, padding=1, groups=2)
    args.update(kw)
    return clconv.conv2d_weight(**args)


def backward(**kw):
    args = dict(grad_output=DY, input=X, weight=W, padding=1, groups=2)
    args.update(kw)
    return clconv.convolution_backward(**args)


def other_context_array(shape):
    device = clconv.default_queue().device
    queue = clconv.new_queue(device)
    return cl_array.to_device(queue, t(*shape))


def device_array(shape):
    return cl_array.to_device(clconv.default_queue(), t(*shape))


def same_buffer(call):
    """``call(residual, out)`` with the two views of one buffer overlapping by one image's worth."""
    whole = cl_array.to_device(clconv.default_queue(), t(1, 6, 5, 5 + 2))
    flat = whole.reshape(-1)
    return call(flat[:150].reshape(1, 6, 5, 5), flat[10:160].reshape(1, 6, 5, 5))


def non_contiguous_array():
    wide = cl_array.to_device(clconv.default_queue(), t(1, 4, 5, 10))
    return wide[:, :, :, ::2]


def misaligned_array():
    queue = clconv.default_queue()
    buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 101)
    return cl_array.Array(queue, (1, 4, 5, 5), F32, data=buffer, offset=2)


# (id, what is checked, call, exception, message pattern)
ROWS = [
    ("tensor-none", "a tensor argument is None", lambda: conv(input=None), TypeError, r"input .*got None"),
    ("tensor-type", "a tensor argument is a list / scalar / str", lambda: conv(weight=[[1.0]]), TypeError, r"weight must be a numpy.ndarray"),
    ("tensor-dtype-int", "integer dtype", lambda: conv(input=X.astype(np.int32)), TypeError, r"input must have dtype float32, float64, float16 or bfloat16 \(ml_dtypes\), got int32"),
    ("tensor-dtype-half-mix", "a float16 tensor among float32 ones", lambda: conv(weight=W.astype(np.float16)), TypeError, r"weight has dtype float16 but input has dtype float32"),
    ("tensor-dtype-bool", "bool dtype", lambda: conv(bias=B.astype(bool)), TypeError, r"bias .*bool"),
    ("dtype-mix", "tensors of different dtypes", lambda: conv(weight=W.astype(np.float64)), TypeError, r"weight has dtype float64 but input has dtype float32"),
    ("activation-name", "an unknown activation", lambda: conv(activation="swish"), ValueError, r"activation must be None or one of \('relu', .*got 'swish'"),
    ("activation-type", "an activation that is not a string", lambda: conv(activation=True), TypeError, r"activation must be None or one of .*got True"),
    ("alpha-type", "alpha / beta / negative_slope not a real number", lambda: conv(alpha="2"), TypeError, r"alpha must be a real number, got '2'"),
    ("beta-finite", "alpha / beta / negative_slope not finite", lambda: tconv(beta=float("inf"), residual=t(1, 6, 10, 10)), ValueError, r"beta must be finite, got inf"),
    ("slope-type", "negative_slope a bool", lambda: conv(activation="leaky_relu", negative_slope=True), TypeError, r"negative_slope must be a real number, got True"),
    ("residual-shape", "residual not of the result's shape", lambda: conv(residual=t(1, 6, 5, 4)), ValueError, r"residual must have the result's shape \(1, 6, 5, 5\), got \(1, 6, 5, 4\)"),
    ("residual-dtype", "residual of another dtype", lambda: conv(residual=t(1, 6, 5, 5).astype(np.float64)), TypeError, r"residual has dtype float64 but input has dtype float32"),
    ("residual-type", "residual a list", lambda: conv(residual=[[0.0]]), TypeError, r"residual must be a numpy.ndarray"),
    ("residual-overlaps-out", "residual sharing memory with out", lambda: same_buffer(lambda r, o: conv(residual=r, out=o)), ValueError, r"out and residual share memory"),
    ("layout-name", "an unknown layout", lambda: conv(layout="NHWC"), ValueError, r"layout must be one of \('channels_first', 'channels_last'\), got 'NHWC'"),
    ("layout-shape", "a channels_last input whose last axis is not C_in", lambda: conv(layout="channels_last"), ValueError, r"groups=2 must divide the input channels \(5\) \(layout='channels_last': activations are \(N, \*spatial, C\)"),
    ("input-rank", "input rank not ndim+1/ndim+2", lambda: conv(input=t(4, 5)), ValueError, r"input must have shape .*got a 2D array"),
    ("weight-rank", "weight rank not ndim+2", lambda: conv(weight=t(6, 2, 3)), ValueError, r"weight must have shape .*got a 3D array"),
    ("channels", "weight's C_in/groups x groups != input channels", lambda: conv(weight=t(6, 3, 3, 3)), ValueError, r"weight of shape \(6, 3, 3, 3\) expects 6 input channels"),
    ("groups-in", "groups does not divide input channels", lambda: conv(groups=3, weight=t(6, 1, 3, 3)), ValueError, r"groups=3 must divide the input channels \(4\)"),
    ("groups-out", "groups does not divide output channels", lambda: conv(weight=t(5, 2, 3, 3), bias=None), ValueError, r"groups=2 must divide the weight's output channels \(5\)"),
    ("groups-value", "groups zero / negative", lambda: conv(groups=0), ValueError, r"groups must be a positive int, got 0"),
    ("groups-type", "groups bool / float / str", lambda: conv(groups=2.0), TypeError, r"groups must be an int.*2\.0"),
    ("stride-value", "stride zero / negative", lambda: conv(stride=(1, 0)), ValueError, r"stride must be positive, got \(1, 0\)"),
    ("stride-length", "stride tuple of the wrong length", lambda: conv(stride=(1, 1, 1)), ValueError, r"stride must be an int or a tuple of 2 ints .*length 3"),
    ("stride-type", "stride bool / float / str / None", lambda: conv(stride=True), TypeError, r"stride must be an int, got the bool True"),
    ("dilation-value", "dilation zero / negative", lambda: conv(dilation=0), ValueError, r"dilation must be positive, got 0"),
    ("padding-value", "negative padding", lambda: conv(padding=-1), ValueError, r"padding must be non-negative, got -1"),
    ("padding-string", "padding string other than 'same'/'valid'", lambda: conv(padding="full"), ValueError, r"padding string must be one of .*'full'"),
    ("padding-same-stride", "padding='same' with stride > 1", lambda: conv(padding="same", stride=2), ValueError, r"padding='same' is not supported for strided"),
    ("padding-pairs", "asymmetric padding not ndim (begin, end) pairs", lambda: conv(padding=((1, 1),)), ValueError, r"asymmetric padding must be 2 \(begin, end\) pairs"),
    ("padding-length", "padding tuple of the wrong length", lambda: conv(padding=(1, 1, 1)), ValueError, r"padding must be .*length 3"),
    ("zero-size", "a zero channel or spatial size", lambda: conv(input=t(1, 4, 0, 5)), ValueError, r"input must have positive channel and spatial sizes .*\(1, 4, 0, 5\)"),
    ("zero-weight", "a zero-sized weight dimension", lambda: conv(weight=t(6, 2, 0, 3)), ValueError, r"weight must have no zero-sized dimension"),
    ("kernel-too-large", "dilated kernel larger than the padded input", lambda: conv(weight=t(6, 2, 9, 9), padding=1), ValueError, r"input: padded spatial size 7 along H is smaller than the dilated kernel extent 9"),
    ("bias-shape", "bias not (C_out,)", lambda: conv(bias=t(5)), ValueError, r"bias must have shape \(6,\), got shape \(5,\)"),
    ("output-padding", "output_padding >= both stride and dilation", lambda: tconv(output_padding=2), ValueError, r"output_padding must be smaller than either stride or dilation"),
    ("output-padding-negative", "negative output_padding", lambda: tconv(output_padding=-1), ValueError, r"output_padding must be non-negative"),
    ("transpose-padding", "transposed padding so large the output is empty", lambda: tconv(padding=9), ValueError, r"padding=9 is too large"),
    ("transpose-channels", "transposed weight's first dim != input channels", lambda: tconv(weight=t(6, 3, 3, 3)), ValueError, r"weight of shape \(6, 3, 3, 3\) expects 6 input channels"),
    ("input-size-unreachable", "input_size the geometry cannot produce grad_output from", lambda: conv_input(input_size=(1, 4, 9, 9)), ValueError, r"input_size: spatial size"),
    ("input-size-type", "input_size not a tuple of ints", lambda: conv_input(input_size="1,4,5,5"), TypeError, r"input_size must be a shape tuple"),
    ("input-size-batch", "input_size batch != grad_output batch", lambda: conv_input(input_size=(2, 4, 5, 5)), ValueError, r"input_size batch 2 does not match grad_output batch 1"),
    ("weight-size", "weight_size that does not match grad_output", lambda: conv_weight(weight_size=(4, 2, 3, 3)), ValueError, r"grad_output has 6 channels .* weight_size gives 4"),
    ("grad-output-shape", "grad_output of the wrong shape (convolution_backward)", lambda: backward(grad_output=t(1, 6, 4, 5)), ValueError, r"grad_output must have shape \(1, 6, 5, 5\)"),
    ("output-mask", "output_mask not three bools", lambda: backward(output_mask=(1, 1, 1)), TypeError, r"output_mask must be a tuple of three bools"),
    ("transposed-flag", "transposed not a bool", lambda: backward(transposed="no"), TypeError, r"transposed must be a bool, got 'no'"),
    ("output-padding-forward", "output_padding != 0 for a non-transposed backward", lambda: backward(output_padding=1), ValueError, r"output_padding must be 0 for a non-transposed"),
    ("algorithm-name", "unknown algorithm name", lambda: conv(algorithm="fastest"), ValueError, r"algorithm must be 'auto' or one of .*'fastest'"),
    ("algorithm-type", "algorithm not a string", lambda: conv(algorithm=3), TypeError, r"algorithm must be a string, got 3"),
    ("algorithm-pass", "algorithm without a kernel for the pass", lambda: conv(algorithm="depthwise"), ValueError, r"algorithm must be 'auto' or one of .*'depthwise'"),
    ("algorithm-declines", "named algorithm that declines the geometry", lambda: conv(algorithm="gemm1x1"), ValueError, r"algorithm 'gemm1x1' cannot run the forward pass of .*: it serves only 1x1"),
    ("queue-type", "queue not a pyopencl.CommandQueue", lambda: conv(queue="gpu"), TypeError, r"queue must be a pyopencl.CommandQueue or None, got str"),
    ("mixed-contexts", "Arrays in different OpenCL contexts", lambda: conv(input=device_array((1, 4, 5, 5)), weight=other_context_array((6, 2, 3, 3))), TypeError, r"weight lives in another OpenCL context"),
    ("queue-context", "Array in another context than queue=", lambda: conv(input=other_context_array((1, 4, 5, 5)), queue=clconv.default_queue()), TypeError, r"input lives in another OpenCL context"),
    ("non-contiguous", "non-contiguous pyopencl Array", lambda: conv(input=non_contiguous_array()), ValueError, r"input must be a C-contiguous pyopencl Array"),
    ("misaligned", "Array whose byte offset is not a multiple of the item size", lambda: conv(input=misaligned_array()), ValueError, r"input starts at byte offset 2"),
    ("out-type", "out not a pyopencl Array", lambda: conv(out=np.zeros((1, 6, 5, 5), F32)), TypeError, r"out must be a pyopencl.array.Array, got ndarray"),
    ("out-shape", "out of the wrong shape", lambda: conv(out=device_array((1, 6, 5, 4))), ValueError, r"out must have shape \(1, 6, 5, 5\), got \(1, 6, 5, 4\)"),
    ("out-dtype", "out of the wrong dtype", lambda: conv(out=cl_array.zeros(clconv.default_queue(), (1, 6, 5, 5), np.float64)), TypeError, r"out must have dtype float32, got float64"),
    ("out-context", "out in another context", lambda: conv(input=device_array((1, 4, 5, 5)), out=other_context_array((1, 6, 5, 5))), TypeError, r"out lives in another OpenCL context"),
    ("huge-alloc", "a consistent call whose result passes the device's max allocation", lambda: clconv.conv1d_input((1, 1, 2**40), t(1, 1, 1), t(1, 1, 1), stride=2**40), ValueError, r"the result of shape \(1, 1, 1099511627776\) needs 4398046511104 bytes, more than one allocation"),
    ("huge-int64", "element counts past 2**63 (Python ints: no wrap-around)", lambda: clconv.conv3d_input((1, 1, 2**30, 2**30, 2**30), t(1, 1, 1, 1, 1), t(1, 1, 1, 1, 1), stride=2**30), ValueError, r"needs 4951760157141521099596496896 bytes"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_bad_argument_is_refused_before_anything_is_built(row):
    name, what, call, exception, pattern = row
    builds = stats.source_builds
    with pytest.raises(exception) as info:
        call()
    assert type(info.value) in (ValueError, TypeError), f"{name}: got {type(info.value).__name__}"
    assert re.search(pattern, str(info.value)), f"{name}: message {str(info.value)!r} does not match {pattern!r}"
    assert stats.source_builds == builds, f"{name}: a kernel was built before the argument was refused"


def test_result_just_past_max_allocation_is_refused():
    """One element more than the device's max allocation: refused before anything is built."""
    device = clconv.default_queue().device
    width = device.max_mem_alloc_size // 4 + 1
    builds = stats.source_builds
    with pytest.raises(ValueError, match=rf"the result of shape \(1, 1, {width}\) needs {4 * width} bytes"):
        clconv.conv1d_input((1, 1, width), t(1, 1, 1), t(1, 1, 1), stride=width)
    assert stats.source_builds == builds


# -- handled, not refused ------------------------------------------------------------------------------


def test_non_contiguous_numpy_is_copied_and_correct():
    """Strided numpy views (every other column; and channels reversed, a negative stride) are read as
    their values."""
    x = t(1, 4, 5, 10)[:, :, :, ::2]
    assert not x.flags.c_contiguous
    g = resolve_conv(2, x.shape, W.shape, None, 1, 1, 1, 2).geometry
    np.testing.assert_allclose(conv(input=x, bias=None), reference.forward(g, x, W), atol=1e-4)
    reversed_channels = t(1, 4, 5, 10)[:, ::-1, :, ::2]
    assert reversed_channels.strides[1] < 0
    np.testing.assert_allclose(conv(input=reversed_channels, bias=None),
                               reference.forward(g, np.ascontiguousarray(reversed_channels), W), atol=1e-4)


def test_empty_batch_gives_empty_result_and_zero_weight_gradient():
    x, dy = t(0, 4, 5, 5), t(0, 6, 5, 5)
    builds = stats.source_builds
    assert conv(input=x).shape == (0, 6, 5, 5)
    dw = conv_weight(input=x, grad_output=dy)
    assert dw.shape == (6, 2, 3, 3) and not dw.any()
    assert stats.source_builds == builds, "an empty batch built a kernel"


def test_an_empty_batch_with_a_named_algorithm_render_and_tune():
    """An empty batch runs no kernel whatever the algorithm: a named one is accepted when it serves
    the layer (asked as the same layer with one image: Winograd used to divide by the empty batch's
    tile count) and refused by name when it does not; render says no kernel runs, tune refuses."""
    x, dy, w = t(0, 8, 6, 6), t(0, 8, 6, 6), t(8, 8, 3, 3)
    builds = stats.source_builds
    for algorithm in ("winograd", "implicit_gemm", "direct", "im2col"):
        assert clconv.conv2d(x, w, padding=1, algorithm=algorithm).shape == (0, 8, 6, 6)
        assert clconv.conv2d_input((0, 8, 6, 6), w, dy, padding=1, algorithm=algorithm).shape == (0, 8, 6, 6)
        dw = clconv.conv2d_weight(x, w.shape, dy, padding=1, algorithm=algorithm)
        assert dw.shape == w.shape and not dw.any()
    assert stats.source_builds == builds, "an empty batch built a kernel"
    with pytest.raises(ValueError, match=r"'gemm1x1' cannot run the forward pass of n0g1c8o8.*1x1 kernels"):
        clconv.conv2d(x, w, padding=1, algorithm="gemm1x1")
    text = clconv.render(clconv.conv2d, x, w, padding=1)
    assert "batch is empty" in text and "__kernel" not in text
    assert "zero weight gradient" in clconv.render(clconv.conv2d_weight, x, w.shape, dy, padding=1)
    with pytest.raises(ValueError, match="batch is empty.*nothing to tune"):
        clconv.tune(clconv.conv2d, x, w, padding=1)
    assert stats.source_builds == builds


@pytest.mark.parametrize("algorithm", ["direct", "im2col", "implicit_gemm"])
def test_nan_and_inf_propagate_as_ieee_says(algorithm):
    """A NaN input poisons exactly the outputs whose window covers it; inf x 0 is NaN; inf x w is inf."""
    x = t(1, 4, 5, 5)
    x[0, 0, 0, 0] = np.nan
    x[0, 2, 4, 4] = np.inf
    w = np.abs(t(6, 2, 3, 3)) + 1  # positive weights: inf stays +inf where no NaN meets it
    w[3, 0, 0, 0] = 0.0            # ... and inf x 0 = NaN
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 2).geometry
    with np.errstate(invalid="ignore"):
        ref = reference.forward(g, x, w)
    got = conv(input=x, weight=w, bias=None, algorithm=algorithm)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))
    finite = np.isfinite(ref)
    assert np.isnan(ref).any() and np.isinf(ref).any() and finite.any()
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-5, atol=1e-4)


def test_docs_table_lists_every_row():
    text = (DOCS / "reliability.md").read_text()
    missing = [name for name, *_ in ROWS if f"`{name}`" not in text]
    assert not missing, f"docs/reliability.md lacks rows {missing}: regenerate with python tests/reliability/test_checks.py"


def markdown() -> str:
    lines = ["| id | check | example call | raises | message matches |", "| --- | --- | --- | --- | --- |"]
    import inspect

    for name, what, call, exception, pattern in ROWS:
        source = inspect.getsource(call).split("lambda:", 1)[1].rsplit(", " + exception.__name__, 1)[0].strip()
        lines.append(f"| `{name}` | {what} | `{source}` | {exception.__name__} | `{pattern}` |".replace("|`", "| `"))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    print(markdown())
