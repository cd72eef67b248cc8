"""Bad arguments to the forward ops: the right exception type, a message that names the argument
(and shows what was received), and nothing built.  No case here reaches a kernel build, so the
file is fast."""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clconv
from clconv.builder import stats
from clconv.geometry import resolve_conv

F32 = np.float32


def _t(*shape, dtype=F32):
    """Deterministic non-zero data (the values never matter here: every call must fail first)."""
    return (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 7 + 1).astype(dtype)


X2, W2, B2 = _t(2, 4, 6, 6), _t(6, 2, 3, 3), _t(6)  # a valid conv2d with groups=2


def _conv2d(**overrides):
    """conv2d on the valid (X2, W2, B2, groups=2) call with some arguments replaced."""
    kwargs = dict(input=X2, weight=W2, bias=B2, stride=1, padding=1, dilation=1, groups=2)
    kwargs.update(overrides)
    return lambda: clconv.conv2d(**kwargs)


# (id, call, exception type, substrings the message must contain)
CASES = [
    # wrong rank
    ("input-rank-low", _conv2d(input=_t(4, 6)), ValueError, ["input", "(4, 6)"]),
    ("input-rank-high", _conv2d(input=_t(1, 2, 4, 6, 6)), ValueError, ["input", "5D"]),
    ("weight-rank", _conv2d(weight=_t(6, 2, 3)), ValueError, ["weight", "(6, 2, 3)"]),
    ("conv1d-4d-input", lambda: clconv.conv1d(X2, W2), ValueError, ["input", "1D"]),
    ("conv3d-4d-weight", lambda: clconv.conv3d(_t(1, 2, 4, 4, 4), W2), ValueError, ["weight", "3D"]),
    # channel mismatch and groups
    ("channel-mismatch", _conv2d(weight=_t(6, 3, 3, 3)), ValueError, ["weight", "input", "channels"]),
    ("groups-not-dividing-input", _conv2d(input=_t(2, 3, 6, 6), weight=_t(6, 1, 3, 3), groups=2),
     ValueError, ["groups", "3"]),
    ("groups-not-dividing-output", _conv2d(weight=_t(5, 2, 3, 3), bias=None), ValueError, ["groups", "5"]),
    # zero / negative stride, dilation, groups
    ("stride-zero", _conv2d(stride=0), ValueError, ["stride", "0"]),
    ("stride-negative", _conv2d(stride=-2), ValueError, ["stride", "-2"]),
    ("stride-tuple-zero", _conv2d(stride=(1, 0)), ValueError, ["stride", "(1, 0)"]),
    ("dilation-zero", _conv2d(dilation=0), ValueError, ["dilation", "0"]),
    ("dilation-negative", _conv2d(dilation=(2, -1)), ValueError, ["dilation", "(2, -1)"]),
    ("groups-zero", _conv2d(groups=0), ValueError, ["groups", "0"]),
    ("groups-negative", _conv2d(groups=-2), ValueError, ["groups", "-2"]),
    # padding
    ("padding-negative", _conv2d(padding=-1), ValueError, ["padding", "-1"]),
    ("padding-tuple-negative", _conv2d(padding=(0, -1)), ValueError, ["padding", "(0, -1)"]),
    ("padding-pairs-negative", _conv2d(padding=((0, 1), (-1, 0))), ValueError, ["padding", "-1"]),
    ("same-strided", _conv2d(padding="same", stride=2), ValueError, ["padding", "same", "stride"]),
    ("same-strided-one-dim", _conv2d(padding="same", stride=(1, 2)), ValueError, ["padding", "stride"]),
    ("padding-unknown-string", _conv2d(padding="full"), ValueError, ["padding", "'full'", "same", "valid"]),
    ("padding-string-case", _conv2d(padding="SAME"), ValueError, ["padding", "'SAME'"]),
    # tuples of the wrong length
    ("stride-tuple-length", _conv2d(stride=(1, 1, 1)), ValueError, ["stride", "(1, 1, 1)", "2"]),
    ("dilation-tuple-length", _conv2d(dilation=(1,)), ValueError, ["dilation", "(1,)"]),
    ("padding-tuple-length", _conv2d(padding=(1, 1, 1)), ValueError, ["padding", "(1, 1, 1)"]),
    ("padding-pairs-count", _conv2d(padding=((1, 1),)), ValueError, ["padding", "((1, 1),)"]),
    ("padding-pair-length", _conv2d(padding=((1, 1, 1), (0, 0))), ValueError, ["padding", "pairs"]),
    ("conv1d-stride-pair", lambda: clconv.conv1d(_t(1, 2, 8), _t(3, 2, 3), stride=(1, 1)), ValueError,
     ["stride", "(1, 1)"]),
    # bias of the wrong shape
    ("bias-length", _conv2d(bias=_t(4)), ValueError, ["bias", "(6,)", "(4,)"]),
    ("bias-2d", _conv2d(bias=_t(6, 1)), ValueError, ["bias", "(6, 1)"]),
    ("bias-scalar", _conv2d(bias=np.array(1.0, F32)), ValueError, ["bias", "()"]),
    # kernel larger than the padded input
    ("kernel-too-large", _conv2d(input=_t(1, 4, 3, 3), weight=_t(6, 2, 5, 5), padding=0), ValueError,
     ["input", "kernel", "3"]),
    ("dilated-kernel-too-large", _conv2d(input=_t(1, 4, 6, 6), padding=0, dilation=3), ValueError,
     ["input", "kernel", "dilation"]),
    ("kernel-too-large-asymmetric", _conv2d(input=_t(1, 4, 6, 2), weight=_t(6, 2, 3, 4), padding=((0, 0), (1, 0))),
     ValueError, ["input", "kernel"]),
    # zero channels or spatial extent
    ("zero-channels", _conv2d(input=_t(2, 0, 6, 6), weight=_t(6, 1, 3, 3), groups=1), ValueError,
     ["input", "(2, 0, 6, 6)"]),
    ("zero-spatial", _conv2d(input=_t(2, 4, 0, 6)), ValueError, ["input", "(2, 4, 0, 6)"]),
    ("zero-spatial-unbatched", _conv2d(input=_t(4, 6, 0)), ValueError, ["input"]),
    ("zero-out-channels", _conv2d(weight=_t(0, 2, 3, 3), bias=None), ValueError, ["weight", "(0, 2, 3, 3)"]),
    ("zero-kernel", _conv2d(weight=_t(6, 2, 0, 3)), ValueError, ["weight", "(6, 2, 0, 3)"]),
    ("kernel-too-large-one-dim", _conv2d(input=_t(2, 4, 6, 1), weight=_t(6, 2, 3, 3), padding=0),
     ValueError, ["input", "kernel"]),
    # non-array and non-float inputs
    ("input-list", _conv2d(input=X2.tolist()), TypeError, ["input", "list"]),
    ("input-none", _conv2d(input=None), TypeError, ["input", "None"]),
    ("weight-scalar", _conv2d(weight=3.0), TypeError, ["weight", "float"]),
    ("bias-list", _conv2d(bias=[1.0] * 6), TypeError, ["bias", "list"]),
    ("input-int32", _conv2d(input=X2.astype(np.int32)), TypeError, ["input", "int32"]),
    ("weight-float16", _conv2d(weight=W2.astype(np.float16)), TypeError, ["weight", "float16"]),
    ("input-bool", _conv2d(input=X2 > 3), TypeError, ["input", "bool"]),
    ("bias-complex", _conv2d(bias=B2.astype(np.complex64)), TypeError, ["bias", "complex64"]),
    # floats or bools where ints belong
    ("stride-float", _conv2d(stride=1.0), TypeError, ["stride", "1.0"]),
    ("stride-tuple-float", _conv2d(stride=(1, 2.0)), TypeError, ["stride", "2.0"]),
    ("padding-float", _conv2d(padding=1.5), TypeError, ["padding", "1.5"]),
    ("padding-pair-float", _conv2d(padding=((1, 0.5), (0, 0))), TypeError, ["padding", "0.5"]),
    ("dilation-bool", _conv2d(dilation=True), TypeError, ["dilation", "bool"]),
    ("groups-float", _conv2d(groups=2.0), TypeError, ["groups", "2.0"]),
    ("groups-bool", _conv2d(groups=True), TypeError, ["groups", "bool"]),
    ("stride-string", _conv2d(stride="2"), TypeError, ["stride", "'2'"]),
    ("padding-none", _conv2d(padding=None), TypeError, ["padding", "None"]),
    # mixed dtypes
    ("weight-float64-input-float32", _conv2d(weight=W2.astype(np.float64)), TypeError,
     ["weight", "float64", "input", "float32"]),
    ("bias-float64", _conv2d(bias=B2.astype(np.float64)), TypeError, ["bias", "float64"]),
    # algorithm
    ("algorithm-unknown", _conv2d(algorithm="fft"), ValueError, ["algorithm", "'fft'", "direct"]),
    ("algorithm-wrong-pass", _conv2d(algorithm="splitk"), ValueError, ["algorithm", "'splitk'"]),
    ("algorithm-not-string", _conv2d(algorithm=3), TypeError, ["algorithm", "3"]),
    ("algorithm-declines", _conv2d(algorithm="gemm1x1"), ValueError, ["gemm1x1", "1x1"]),
    # queue and out
    ("queue-not-a-queue", _conv2d(queue="gpu"), TypeError, ["queue", "str"]),
    ("out-numpy", _conv2d(out=np.empty((2, 6, 6, 6), F32)), TypeError, ["out", "ndarray"]),
]

IDS = [case[0] for case in CASES]
assert len(set(IDS)) == len(IDS)


@pytest.fixture
def no_builds():
    """Asserts the test built no program (validation happens before any render or build)."""
    before = stats.source_builds
    yield
    assert stats.source_builds == before, "a bad call built a program"


@pytest.mark.parametrize("call, exc_type, names", [c[1:] for c in CASES], ids=IDS)
def test_bad_argument(call, exc_type, names, no_builds):
    with pytest.raises(exc_type) as info:
        call()
    message = str(info.value)
    for name in names:
        assert name in message, f"{name!r} missing from the message: {message}"


def test_the_valid_base_call_is_accepted():
    """The bad cases above are bad because of the one argument they change: the base call resolves."""
    g = resolve_conv(2, X2.shape, W2.shape, B2.shape, 1, 1, 1, 2).geometry
    assert g.output_shape == (2, 6, 6, 6)
    assert "typedef" in clconv.render(clconv.conv2d, X2, W2, B2, 1, 1, 1, 2, algorithm="direct")


@pytest.mark.parametrize("value", [np.int64(2), np.int32(2), (np.int64(2), 2), [2, 2]])
def test_numpy_ints_and_lists_are_ints(value):
    g = resolve_conv(2, X2.shape, W2.shape, None, stride=value, padding=1, groups=2).geometry
    assert g.stride[1:] == (2, 2)


# -- device-side cases: queue, out and contexts ---------------------------------------------------


def test_out_wrong_shape_and_dtype(queue, no_builds):
    with pytest.raises(ValueError, match=r"out must have shape \(2, 6, 6, 6\)"):
        _conv2d(out=cl_array.empty(queue, (2, 6, 6, 5), F32))()
    with pytest.raises(TypeError, match="out must have dtype float32"):
        _conv2d(out=cl_array.empty(queue, (2, 6, 6, 6), np.float64))()


@pytest.fixture(scope="module")
def other_queue(queue):
    """A second context on the same device (cheap: no program is built in it)."""
    context = cl.Context([queue.device])
    return cl.CommandQueue(context)


def test_mixed_contexts_name_the_argument(queue, other_queue, no_builds):
    x = cl_array.to_device(queue, X2)
    w_other = cl_array.to_device(other_queue, W2)
    with pytest.raises(TypeError, match="weight") as info:
        clconv.conv2d(x, w_other, None, 1, 1, 1, 2)
    assert "context" in str(info.value)
    b_other = cl_array.to_device(other_queue, B2)
    with pytest.raises(TypeError, match="bias.*context"):
        clconv.conv2d(x, cl_array.to_device(queue, W2), b_other, 1, 1, 1, 2)
    with pytest.raises(TypeError, match="input.*context"):
        clconv.conv2d(x, cl_array.to_device(queue, W2), None, 1, 1, 1, 2, queue=other_queue)
    with pytest.raises(TypeError, match="out.*context"):
        clconv.conv2d(X2, W2, None, 1, 1, 1, 2, out=cl_array.empty(other_queue, (2, 6, 6, 6), F32))


def test_mixed_dtypes_between_arrays(queue, no_builds):
    with pytest.raises(TypeError, match="weight has dtype float64"):
        clconv.conv2d(cl_array.to_device(queue, X2), cl_array.to_device(queue, W2.astype(np.float64)), groups=2)


# -- the same rules, drawn at random ---------------------------------------------------------------

_bad_ints = st.one_of(st.integers(max_value=0), st.tuples(st.integers(1, 3), st.integers(max_value=0)))


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(["stride", "dilation"]), value=_bad_ints)
def test_non_positive_stride_or_dilation(name, value):
    before = stats.source_builds
    with pytest.raises(ValueError) as info:
        _conv2d(**{name: value})()
    assert name in str(info.value) and str(value) in str(info.value)
    assert stats.source_builds == before


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(["stride", "padding", "dilation", "groups"]),
    value=st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.text(max_size=3)),
)
def test_non_int_scalar_arguments(name, value):
    """A float, bool or string where an int belongs is a TypeError naming the argument (padding
    strings other than 'same'/'valid' are a ValueError)."""
    if name == "padding" and value in ("same", "valid"):
        return
    before = stats.source_builds
    with pytest.raises((TypeError, ValueError)) as info:
        _conv2d(**{name: value})()
    assert name in str(info.value)
    expected = ValueError if isinstance(value, str) and name == "padding" else TypeError
    assert type(info.value) is expected, info.value
    assert stats.source_builds == before


@settings(max_examples=25, deadline=None)
@given(
    cin=st.integers(1, 6), cout=st.integers(1, 6), groups=st.integers(1, 6),
)
def test_groups_must_divide_both_channel_counts(cin, cout, groups):
    x, w = _t(1, cin, 5, 5), None
    if cin % groups or cout % groups:
        w = _t(cout, max(cin // groups, 1), 3, 3)
        before = stats.source_builds
        with pytest.raises(ValueError, match="groups"):
            clconv.conv2d(x, w, groups=groups)
        assert stats.source_builds == before
    else:
        g = resolve_conv(2, x.shape, (cout, cin // groups, 3, 3), None, groups=groups).geometry
        assert g.groups == groups and g.cin_per_group * groups == cin


def test_float64_on_a_device_without_fp64_is_a_clear_error(monkeypatch, no_builds):
    """PoCL has cl_khr_fp64, so pretend it does not: float64 then fails before any build, saying why."""
    import clconv.tensors

    monkeypatch.setattr(clconv.tensors, "supports_fp64", lambda device: False)
    with pytest.raises(TypeError, match="float64.*cl_khr_fp64"):
        clconv.conv2d(X2.astype(np.float64), W2.astype(np.float64), groups=2)
