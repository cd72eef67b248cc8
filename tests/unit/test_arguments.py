"""Bad arguments to every op family: the right exception type, a message that names the argument
(and shows what was received), and nothing built (tests/unit/conftest.py).  The documented table of
argument checks is tests/reliability/test_checks.py; the cases here are the ones it does not have.
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cl_array
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clconv
import clconv.planner
from clconv.geometry import resolve_conv

from cases import GRADIENT_CASES
from helpers import random

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
    # zero / negative stride, dilation, groups
    ("stride-zero", _conv2d(stride=0), ValueError, ["stride", "0"]),
    ("stride-negative", _conv2d(stride=-2), ValueError, ["stride", "-2"]),
    ("dilation-negative", _conv2d(dilation=(2, -1)), ValueError, ["dilation", "(2, -1)"]),
    ("groups-negative", _conv2d(groups=-2), ValueError, ["groups", "-2"]),
    # padding
    ("padding-tuple-negative", _conv2d(padding=(0, -1)), ValueError, ["padding", "(0, -1)"]),
    ("padding-pairs-negative", _conv2d(padding=((0, 1), (-1, 0))), ValueError, ["padding", "-1"]),
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
    ("bias-2d", _conv2d(bias=_t(6, 1)), ValueError, ["bias", "(6, 1)"]),
    ("bias-scalar", _conv2d(bias=np.array(1.0, F32)), ValueError, ["bias", "()"]),
    # kernel larger than the padded input
    ("dilated-kernel-too-large", _conv2d(input=_t(1, 4, 6, 6), padding=0, dilation=3), ValueError,
     ["input", "kernel", "dilation"]),
    ("kernel-too-large-asymmetric", _conv2d(input=_t(1, 4, 6, 2), weight=_t(6, 2, 3, 4), padding=((0, 0), (1, 0))),
     ValueError, ["input", "kernel"]),
    ("kernel-too-large-one-dim", _conv2d(input=_t(2, 4, 6, 1), weight=_t(6, 2, 3, 3), padding=0),
     ValueError, ["input", "kernel"]),
    # zero channels or spatial extent
    ("zero-channels", _conv2d(input=_t(2, 0, 6, 6), weight=_t(6, 1, 3, 3), groups=1), ValueError,
     ["input", "(2, 0, 6, 6)"]),
    ("zero-spatial-unbatched", _conv2d(input=_t(4, 6, 0)), ValueError, ["input"]),
    ("zero-out-channels", _conv2d(weight=_t(0, 2, 3, 3), bias=None), ValueError, ["weight", "(0, 2, 3, 3)"]),
    ("zero-kernel", _conv2d(weight=_t(6, 2, 0, 3)), ValueError, ["weight", "(6, 2, 0, 3)"]),
    # non-array and non-float inputs
    ("input-list", _conv2d(input=X2.tolist()), TypeError, ["input", "list"]),
    ("weight-scalar", _conv2d(weight=3.0), TypeError, ["weight", "float"]),
    ("bias-list", _conv2d(bias=[1.0] * 6), TypeError, ["bias", "list"]),
    ("input-bool", _conv2d(input=X2 > 3), TypeError, ["input", "bool"]),
    ("bias-complex", _conv2d(bias=B2.astype(np.complex64)), TypeError, ["bias", "complex64"]),
    # the kernels read native byte order: a byte-swapped float32 is no float32 to them
    ("input-byteswapped", _conv2d(input=X2.astype(">f4" if np.little_endian else "<f4")), TypeError,
     ["input", "f4"]),
    # floats or bools where ints belong
    ("stride-float", _conv2d(stride=1.0), TypeError, ["stride", "1.0"]),
    ("stride-tuple-float", _conv2d(stride=(1, 2.0)), TypeError, ["stride", "2.0"]),
    ("padding-float", _conv2d(padding=1.5), TypeError, ["padding", "1.5"]),
    ("padding-pair-float", _conv2d(padding=((1, 0.5), (0, 0))), TypeError, ["padding", "0.5"]),
    ("dilation-bool", _conv2d(dilation=True), TypeError, ["dilation", "bool"]),
    ("groups-bool", _conv2d(groups=True), TypeError, ["groups", "bool"]),
    ("stride-string", _conv2d(stride="2"), TypeError, ["stride", "'2'"]),
    ("padding-none", _conv2d(padding=None), TypeError, ["padding", "None"]),
    # mixed dtypes
    ("bias-float64", _conv2d(bias=B2.astype(np.float64)), TypeError, ["bias", "float64"]),
    # algorithm
    ("algorithm-unknown", _conv2d(algorithm="fft"), ValueError, ["algorithm", "'fft'", "direct"]),
]

IDS = [case[0] for case in CASES]
assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("call, exc_type, names", [c[1:] for c in CASES], ids=IDS)
def test_bad_argument(call, exc_type, names):
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


# -- device-side cases: contexts and dtypes of Arrays ---------------------------------------------


@pytest.fixture(scope="module")
def other_queue(queue):
    """A second context on the same device (cheap: no program is built in it)."""
    return clconv.new_queue(queue.device)


def test_mixed_contexts_name_the_argument(queue, other_queue):
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


def test_mixed_dtypes_between_arrays(queue):
    with pytest.raises(TypeError, match="weight has dtype float64"):
        clconv.conv2d(cl_array.to_device(queue, X2), cl_array.to_device(queue, W2.astype(np.float64)), groups=2)


def test_float64_on_a_device_without_fp64_is_a_clear_error(monkeypatch):
    """PoCL has cl_khr_fp64, so pretend it does not: float64 then fails before any build, saying why."""
    import clconv.tensors

    monkeypatch.setattr(clconv.tensors, "supports_fp64", lambda device: False)
    with pytest.raises(TypeError, match="float64.*cl_khr_fp64"):
        clconv.conv2d(X2.astype(np.float64), W2.astype(np.float64), groups=2)


# -- the same rules, drawn at random ---------------------------------------------------------------

_bad_ints = st.one_of(st.integers(max_value=0), st.tuples(st.integers(1, 3), st.integers(max_value=0)))


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(["stride", "dilation"]), value=_bad_ints)
def test_non_positive_stride_or_dilation(name, value):
    with pytest.raises(ValueError) as info:
        _conv2d(**{name: value})()
    assert name in str(info.value) and str(value) in str(info.value)


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
    with pytest.raises((TypeError, ValueError)) as info:
        _conv2d(**{name: value})()
    assert name in str(info.value)
    expected = ValueError if isinstance(value, str) and name == "padding" else TypeError
    assert type(info.value) is expected, info.value


@settings(max_examples=25, deadline=None)
@given(cin=st.integers(1, 6), cout=st.integers(1, 6), groups=st.integers(1, 6))
def test_groups_must_divide_both_channel_counts(cin, cout, groups):
    x = _t(1, cin, 5, 5)
    if cin % groups or cout % groups:
        w = _t(cout, max(cin // groups, 1), 3, 3)
        with pytest.raises(ValueError, match="groups"):
            clconv.conv2d(x, w, groups=groups)
    else:
        g = resolve_conv(2, x.shape, (cout, cin // groups, 3, 3), None, groups=groups).geometry
        assert g.groups == groups and g.cin_per_group * groups == cin


# -- the gradients --------------------------------------------------------------------------------


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


def test_conv_input_size_no_input_maps_onto_grad_output():
    """conv2d k3 s2 p1 maps inputs of 7 and 8 onto 4 outputs: any other input_size is refused."""
    w, dy = _t(3, 2, 3, 3), _t(2, 3, 4, 4)
    for bad in [(6, 6), (9, 9), (7, 9), (2, 7)]:
        with pytest.raises(ValueError, match="input_size"):
            clconv.conv2d_input((2, 2, *bad), w, dy, stride=2, padding=1)


def test_algorithm_not_serving_the_pass_is_refused(rng):
    case = GRADIENT_CASES[1]
    w, dy = random(rng, case.weight_shape), random(rng, case.output_shape)
    with pytest.raises(ValueError, match="algorithm"):
        clconv.conv2d_input(case.input_shape, w, dy, **case.conv_args(), algorithm="depthwise")
    with pytest.raises(ValueError, match="algorithm"):
        clconv.conv2d_input(case.input_shape, w, dy, **case.conv_args(), algorithm="no_such_algorithm")


def test_convolution_backward_validates_before_work(rng, monkeypatch):
    case = GRADIENT_CASES[0]
    x, w, dy = (random(rng, shape) for shape in (case.input_shape, case.weight_shape, case.output_shape))
    args = case.conv_args()
    monkeypatch.setattr(clconv.planner, "run", lambda *a, **k: pytest.fail("ran a pass on bad arguments"))
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
        clconv.convolution_backward(dy, x, w, **args, algorithm="depthwise")  # no backward_data kernel


# -- the transposed convolution -------------------------------------------------------------------


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


def test_transposed_bad_arguments_raise_naming_them(rng):
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


def test_memo_keys_tell_apart_what_the_resolvers_tell_apart():
    """The key of a repeated call (resolve.frozen) must differ wherever a check could: 1, True and
    1.0 are equal in Python, a tuple is not a list, a padding pair is not a flat tuple; and it
    refuses types it cannot key (numpy integers), so such a call is checked afresh."""
    from clconv.resolve import frozen

    values = [1, True, 1.0, "1", None, (1, 1), (1, True), (1, 1.0), [1, 1], [1, True], (), [], ((),), ([],),
              ((1, 1), (2, 2)), ((1, True), (2, 2)), [(1, 1), (2, 2)], ((1, 1), [2, 2]), (1, (1,)), (1, [1]),
              ((1,),), [(1,)], [[1]], ([1],), ("same",), (2, 1, 1, 1, 1, None, 0.01, 1.0, 1.0, "auto"),
              (2, 1, 1, 1, 1, None, 0.01, 1, 1.0, "auto"), (2, (1, 1), 1, 1, 1, None, 0.01, 1.0, 1.0, "auto")]
    keys = [frozen(value) for value in values]
    assert len(set(keys)) == len(values)
    assert frozen((1, (2, 3))) == frozen((1, (2, 3))) and hash(frozen([(1, 2), 3])) == hash(frozen([(1, 2), 3]))
    for unkeyable in (np.int64(1), (np.int64(1),), ((1, np.int32(2)),), [np.float32(1)], (1, object())):
        with pytest.raises(TypeError):
            frozen(unkeyable)
    # nested values are keyed by their marshalled bytes, which write numpy scalars as raw bytes: a
    # numpy integer must still be refused, not keyed as the bytes object it marshals like
    with pytest.raises(TypeError):
        frozen((2, (np.int64(1), 1)))
    assert frozen((2, (b"\x01" + b"\x00" * 7, 1))) != frozen((2, (1, 1)))

