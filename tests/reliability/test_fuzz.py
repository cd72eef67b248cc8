"""Property-based fuzzing (hypothesis) of every public op.

* random *valid* geometries (1D/2D/3D, stride, dilation, groups, asymmetric padding, output_padding,
  batch, odd sizes), each op, each algorithm that serves its pass (and ``auto``), against the float64
  reference, outputs poisoned with NaN;
* random *invalid* arguments (one argument of a valid call replaced by a bad value): each must raise
  ValueError/TypeError naming the argument or the value -- never another exception, never a result;
* random argument values, valid or not, for conv and conv_transpose with batch 0 (nothing is built):
  an independent statement of PyTorch's rules says which are valid; those must give the shape the
  formula gives, the others must raise ValueError/TypeError.

Outputs and inputs of the valid calls are the one guard helper's views (tests/helpers.py ``guarded``).
Profiles: ``ci`` (default, seconds) and ``long`` (``CLCONV_FUZZ_PROFILE=long``, used by scripts/fuzz;
``CLCONV_FUZZ_EXAMPLES`` overrides the example count).  Each test prints how many cases it ran.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pyopencl.array as cl_array
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import clconv
from clconv import reference as _reference
from clconv.algorithms import REGISTRY
from clconv.geometry import resolve_conv
from clconv.passes import OPS, PASS_TABLE
from clconv.plan import Problem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `python tests/reliability/test_fuzz.py`

from cases import op_function
from helpers import assert_matches, guarded

QUEUE = clconv.default_queue()


class _LazyReference:
    """clconv.reference, except that with an empty batch (which it does not handle) it gives None."""

    def __getattr__(self, name):
        function = getattr(_reference, name)
        return lambda g, *args: None if g.batch == 0 else function(g, *args)


reference = _LazyReference()
DEVICE = QUEUE.device

_examples = os.environ.get("CLCONV_FUZZ_EXAMPLES")
settings.register_profile("ci", max_examples=int(_examples or 12), deadline=None, derandomize=True,
                          suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile("long", max_examples=int(_examples or 400), deadline=None,
                          suppress_health_check=list(HealthCheck), print_blob=True)
PROFILE = os.environ.get("CLCONV_FUZZ_PROFILE", "ci")
settings.load_profile(PROFILE)
INVALID_FACTOR = 20  # invalid-argument cases build nothing: many more of them per run

COUNTS: dict[str, int] = {}


def _count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    print(f"\nclconv-fuzz ({PROFILE}): " + ", ".join(f"{k}={v}" for k, v in sorted(COUNTS.items())))


FAMILIES = tuple(OPS)  # conv, conv_input, conv_weight, conv_transpose, conv_transpose_input, conv_transpose_weight


@st.composite
def geometries(draw):
    """A canonical forward convolution small enough to build and check in a second."""
    ndim = draw(st.integers(1, 3))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin_g, cout_g = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    batch = draw(st.integers(0, 3))
    limit = {1: 12, 2: 7, 3: 4}[ndim]
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
    pads = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(ndim))
    size = []
    for k, d, (b, e) in zip(kernel, dilation, pads):
        low = max(1, d * (k - 1) + 1 - b - e)
        assume(low <= limit)
        size.append(draw(st.integers(low, limit)))
    symmetric = all(b == e for b, e in pads) and draw(st.booleans())
    padding = tuple(b for b, _ in pads) if symmetric else pads
    return dict(ndim=ndim, batch=batch, groups=groups, cin=cin_g * groups, cout=cout_g * groups,
                in_size=tuple(size), kernel=kernel, stride=stride, dilation=dilation, padding=padding,
                pads=pads, bias=draw(st.booleans()), dtype=draw(st.sampled_from(["float32", "float32", "float64"])))


def _out_size(c):
    return tuple((i + b + e - d * (k - 1) - 1) // s + 1
                 for i, k, s, d, (b, e) in zip(c["in_size"], c["kernel"], c["stride"], c["dilation"], c["pads"]))


@pytest.mark.parametrize("op", FAMILIES)
@settings(max_examples=max(1, settings().max_examples // 6))  # ci: 2 per op (each builds kernels)
@given(c=geometries(), data=st.data())
def test_random_valid_calls_match_the_reference(op, c, data):
    ndim, dtype = c["ndim"], np.dtype(c["dtype"])
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    out_size = _out_size(c)
    xshape = (c["batch"], c["cin"], *c["in_size"])
    wshape = (c["cout"], c["cin"] // c["groups"], *c["kernel"])
    yshape = (c["batch"], c["cout"], *out_size)
    g = resolve_conv(ndim, xshape, wshape, None, c["stride"], c["padding"], c["dilation"], c["groups"]).geometry
    assert g.user_out_size == out_size
    pass_ = OPS[op].pass_
    bias = c["bias"] and op in ("conv", "conv_transpose")
    problem = Problem(g, pass_, c["dtype"], bias=bias)
    serving = [n for n in clconv.algorithms(pass_) if REGISTRY[n].decline_reason(problem, DEVICE) is None]
    algorithm = data.draw(st.sampled_from(["auto", *serving]), label="algorithm")
    x, w, dy = (rng.standard_normal(s).astype(dtype) for s in (xshape, wshape, yshape))
    outs = []

    def dev(a):  # inputs are views into NaN-margined buffers: an out-of-bounds read shows as NaN
        if a is None or a.size == 0:
            return a
        outs.append(guarded(QUEUE, a.shape, dtype, inner=a))
        return outs[-1].view

    def poisoned(queue, shape, dtype):  # out is a NaN-poisoned view between sentinel margins
        if not math.prod(shape):  # an empty batch: nothing to guard
            return cl_array.empty(queue, shape, dtype)
        outs.append(guarded(queue, shape, dtype))
        return outs[-1].view

    common = dict(stride=c["stride"], dilation=c["dilation"], groups=c["groups"], algorithm=algorithm)
    fn = op_function(op, ndim)
    if op == "conv":
        b = rng.standard_normal(c["cout"]).astype(dtype) if bias else None
        expected, ref = yshape, reference.forward(g, x, w, b)
        out = poisoned(QUEUE, expected, dtype)
        got = fn(dev(x), dev(w), dev(b), padding=c["padding"], out=out, **common)
    elif op == "conv_input":
        expected, ref = xshape, reference.backward_data(g, dy, w)
        out = poisoned(QUEUE, expected, dtype)
        got = fn(xshape, dev(w), dev(dy), padding=c["padding"], out=out, **common)
    elif op == "conv_weight":
        expected, ref = wshape, reference.backward_weight(g, x, dy)
        out = poisoned(QUEUE, expected, dtype)
        got = fn(dev(x), wshape, dev(dy), padding=c["padding"], out=out, **common)
    else:
        # the transposed op whose output has the canonical input's size: output_padding restores
        # what the forward floor division dropped (always < stride)
        op_pad = tuple(i - ((o - 1) * s - b - e + d * (k - 1) + 1) for i, o, s, d, k, (b, e) in
                       zip(c["in_size"], out_size, c["stride"], c["dilation"], c["kernel"], c["pads"]))
        assert all(0 <= p < s for p, s in zip(op_pad, c["stride"]))
        tcommon = dict(common, padding=c["pads"], output_padding=op_pad)
        if op == "conv_transpose":
            b = rng.standard_normal(c["cin"]).astype(dtype) if bias else None
            expected, ref = xshape, reference.backward_data(g, dy, w, b)
            out = poisoned(QUEUE, expected, dtype)
            got = fn(dev(dy), dev(w), dev(b), out=out, **tcommon)
        elif op == "conv_transpose_input":
            expected, ref = yshape, reference.forward(g, x, w)
            out = poisoned(QUEUE, expected, dtype)
            got = fn(dev(x), dev(w), out=out, **tcommon)
        else:
            expected, ref = wshape, reference.backward_weight(g, x, dy)
            out = poisoned(QUEUE, expected, dtype)
            got = fn(dev(dy), wshape, dev(x), out=out, **tcommon)
    assert got is out and tuple(got.shape) == tuple(expected)
    for margined in outs:
        margined.check()
    if g.batch == 0:  # nothing to convolve: empty activations, and a weight gradient of zeros
        host = got.get()
        assert host.size == 0 or (pass_ == "backward_weight" and not host.any()), host
        _count(f"valid_{op}")
        return
    assert_matches(got, ref, max(PASS_TABLE[pass_].reduction_length(g), 1), dtype)
    _count(f"valid_{op}")


# -- invalid arguments ---------------------------------------------------------------------------------

BAD = {
    "stride": [0, -1, (1,), (1, 1, 1), 1.5, "2", None, True, (1, 0), ((1, 1), (1, 1)), 2**70 * 0 - 3],
    "padding": [-1, (1,), (1, 2, 3), "full", "SAME", 1.0, None, ((1, 1),), ((1, -1), (0, 0)), ((1, 2, 3), (0, 0)), (-1, 0)],
    "dilation": [0, -2, (1, 1, 1), 0.5, "1", None, False, [1]],
    "groups": [0, -1, 3, 1.0, "1", None, True, (1,), 5],
    "output_padding": [-1, 2, (1, 1, 1), 0.5, "0", None, (3, 0)],
    "input": [None, 1.0, "x", [[1.0]], np.zeros((1, 4, 5, 5), np.int32), np.zeros((1, 4, 5, 5), np.float16),
              np.zeros((4,), np.float32), np.zeros((1, 1, 4, 5, 5, 1), np.float32), np.zeros((1, 3, 5, 5), np.float32),
              np.zeros((1, 4, 0, 5), np.float32), np.zeros((1, 4, 5, 5), bool),
              np.zeros((1, 4, 5, 5), np.complex64)],
    "weight": [None, 3, np.zeros((6, 2, 3), np.float32), np.zeros((6, 3, 3, 3), np.float32),
               np.zeros((5, 2, 3, 3), np.float32), np.zeros((6, 2, 0, 3), np.float32), np.zeros((6, 2, 3, 3), np.float64),
               np.zeros((6, 2, 9, 9), np.float32)],
    "bias": [np.zeros((5,), np.float32), np.zeros((6, 1), np.float32), 1.0, "b", np.zeros((6,), np.int64)],
    "algorithm": ["fastest", "", None, 3, "AUTO", "splitk_typo"],
    "queue": ["queue", 0, object()],
    "out": [np.zeros((1, 6, 5, 5), np.float32), "out", 0],
    "input_size": [None, "1,4,5,5", (1, 4, 5), (1, 4, 5, 5, 5, 5), (1, 4, 50, 50), (1, 3, 5, 5), (2, 4, 5, 5),
                   (1, 4, -5, 5), (1, 4, 5.0, 5), (2**62, 4, 5, 5)],
    "weight_size": [None, (6, 2, 3), (6, 2, 3, 3, 3), (6, 3, 3, 3), (0, 2, 3, 3), (6, 2, 3.0, 3), "6,2,3,3",
                    (6, 2, 2**40, 2**40)],
    "grad_output": [None, 2.0, np.zeros((1, 6, 4, 5), np.float32), np.zeros((1, 5, 5, 5), np.float32),
                    np.zeros((2, 6, 5, 5), np.float32), np.zeros((1, 6, 5, 5), np.float64)],
}
# Whether an op takes each argument (op -> its argument names).
TAKES = {
    "conv": ("input", "weight", "bias", "stride", "padding", "dilation", "groups", "algorithm", "queue", "out"),
    "conv_input": ("input_size", "weight", "grad_output", "stride", "padding", "dilation", "groups", "algorithm", "queue", "out"),
    "conv_weight": ("input", "weight_size", "grad_output", "stride", "padding", "dilation", "groups", "algorithm", "queue", "out"),
    "conv_transpose": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation", "algorithm", "queue", "out"),
}


def _valid_call(op: str, batch: int):
    """A valid 2D call of ``op``: input (batch, 4, 5, 5), weight (6, 2, 3, 3), groups 2, padding 1."""
    x = np.ones((batch, 4, 5, 5), np.float32)
    w = np.ones((6, 2, 3, 3), np.float32)
    dy = np.ones((batch, 6, 5, 5), np.float32)
    common = dict(stride=1, padding=1, dilation=1, groups=2, algorithm="auto", queue=None, out=None)
    if op == "conv":
        return clconv.conv2d, dict(input=x, weight=w, bias=np.ones(6, np.float32), **common)
    if op == "conv_input":
        return clconv.conv2d_input, dict(input_size=(batch, 4, 5, 5), weight=w, grad_output=dy, **common)
    if op == "conv_weight":
        return clconv.conv2d_weight, dict(input=x, weight_size=(6, 2, 3, 3), grad_output=dy, **common)
    wt = np.ones((4, 3, 3, 3), np.float32)  # conv_transpose: input (b, 4, 5, 5) -> output (b, 6, 5, 5)
    return clconv.conv_transpose2d, dict(input=x, weight=wt, bias=np.ones(6, np.float32), output_padding=0, **common)


def _names_it(message: str, argument: str, value) -> bool:
    # a mismatch between two arguments may be reported by either; a kernel too large for the
    # padded input names the input and the kernel (its size, from weight/weight_size)
    aliases = {"input_size": ("input_size", "input", "grad_output"),
               "weight_size": ("weight_size", "grad_output", "kernel"),
               "input": ("input", "weight", "grad_output"), "weight": ("weight", "input", "bias", "kernel"),
               "grad_output": ("grad_output", "input_size", "weight", "input"), "groups": ("groups", "weight")}
    names = aliases.get(argument, (argument,))
    return any(n in message for n in names) or (not isinstance(value, np.ndarray) and repr(value) in message)


@settings(max_examples=settings().max_examples * INVALID_FACTOR)
@given(op=st.sampled_from(sorted(TAKES)), data=st.data())
def test_random_invalid_arguments_raise_value_or_type_error_naming_them(op, data):
    argument = data.draw(st.sampled_from([a for a in TAKES[op] if a in BAD]), label="argument")
    value = data.draw(st.sampled_from(BAD[argument]), label="value")
    fn, kwargs = _valid_call(op, batch=data.draw(st.sampled_from([0, 1]), label="batch"))
    kwargs[argument] = value
    try:
        result = fn(**kwargs)
    except (ValueError, TypeError) as exc:
        assert _names_it(str(exc), argument, value), f"{type(exc).__name__} does not name {argument}={value!r}: {exc}"
        _count(f"invalid_{op}")
        return
    except Exception as exc:  # pragma: no cover - the failure this test exists for
        raise AssertionError(f"{op}({argument}={value!r}) raised {type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"{op}({argument}={value!r}) returned a result of shape {np.shape(result)} instead of raising")


# -- random values, valid or not: an independent oracle decides -----------------------------------------------


def _conv_oracle(ndim, cin, cout, wcin, size, kernel, stride, padding, dilation, groups):
    """PyTorch's rules for conv{ndim}d, written out independently: the output spatial size or None."""
    if groups < 1 or cin % groups or cout % groups or wcin * groups != cin:
        return None
    if min(stride) < 1 or min(dilation) < 1 or min(kernel) < 1 or min(size) < 1 or min(padding) < 0:
        return None
    out = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, s, p, d in zip(size, kernel, stride, padding, dilation))
    if min(i + 2 * p - d * (k - 1) for i, k, p, d in zip(size, kernel, padding, dilation)) < 1:
        return None
    return out


def _transpose_oracle(ndim, cin, wcin, wcout, size, kernel, stride, padding, output_padding, dilation, groups):
    if groups < 1 or wcin != cin or cin % groups:
        return None
    if min(stride) < 1 or min(dilation) < 1 or min(kernel) < 1 or min(size) < 1 or min(padding) < 0 or min(output_padding) < 0:
        return None
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        return None
    out = tuple((i - 1) * s - 2 * p + d * (k - 1) + o + 1
                for i, k, s, p, d, o in zip(size, kernel, stride, padding, dilation, output_padding))
    return out if min(out) >= 1 else None


# Mostly valid values with a fair share of invalid ones, so both outcomes are exercised.
STRIDES = st.sampled_from([1, 1, 1, 2, 2, 3, 0, -1])
PADS = st.sampled_from([0, 0, 1, 1, 2, 3, -1])
OUTPADS = st.sampled_from([0, 0, 0, 1, 1, 2, -1])
GROUPS = st.sampled_from([1, 1, 1, 2, 2, 3, 0, -1])


@settings(max_examples=settings().max_examples * INVALID_FACTOR)
@given(ndim=st.integers(1, 3), transposed=st.booleans(), data=st.data())
def test_random_arguments_valid_or_not_follow_pytorch_rules(ndim, transposed, data):
    draw = data.draw
    groups = draw(GROUPS)
    cin, cout = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    if transposed:
        wcin = cin if draw(st.integers(0, 3)) else draw(st.integers(1, 6))
    else:
        wcin = cin // groups if groups > 0 and draw(st.integers(0, 3)) else draw(st.integers(1, 6))
        wcin = max(wcin, 1)
    size = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    kernel = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    stride, dilation = (tuple(draw(STRIDES) for _ in range(ndim)) for _ in range(2))
    padding = tuple(draw(PADS) for _ in range(ndim))
    outpad = tuple(draw(OUTPADS) for _ in range(ndim))
    x = np.ones((0, cin, *size), np.float32)
    fn = getattr(clconv, f"conv_transpose{ndim}d" if transposed else f"conv{ndim}d")
    if transposed:
        w = np.ones((wcin, cout, *kernel), np.float32)
        expected = _transpose_oracle(ndim, cin, wcin, cout, size, kernel, stride, padding, outpad, dilation, groups)
        call = lambda: fn(x, w, None, stride, padding, outpad, groups, dilation)  # noqa: E731
        channels = cout * groups
    else:
        w = np.ones((cout, wcin, *kernel), np.float32)
        expected = _conv_oracle(ndim, cin, cout, wcin, size, kernel, stride, padding, dilation, groups)
        call = lambda: fn(x, w, None, stride, padding, dilation, groups)  # noqa: E731
        channels = cout
    try:
        result = call()
    except (ValueError, TypeError) as exc:
        assert expected is None, f"a valid call was refused ({exc}); the rules give output size {expected}"
        _count("oracle_refused")
        return
    assert expected is not None, f"an invalid call returned shape {result.shape} instead of raising"
    assert result.shape == (0, channels, *expected), (result.shape, expected)
    _count("oracle_accepted")


def bad_input_outcomes() -> str:
    """Every value of ``BAD`` in every op that takes it: what it got (a Markdown table)."""
    lines = ["| op | argument | bad value | outcome |", "| --- | --- | --- | --- |"]
    for op, arguments in TAKES.items():
        for argument in arguments:
            for value in BAD.get(argument, []):
                fn, kwargs = _valid_call(op, batch=1)
                kwargs[argument] = value
                shown = (f"ndarray{value.shape} {value.dtype}" if isinstance(value, np.ndarray)
                         else repr(value) if len(repr(value)) < 40 else type(value).__name__)
                try:
                    fn(**kwargs)
                    outcome = "**accepted**"
                except Exception as exc:  # noqa: BLE001 - recorded, whatever it is
                    outcome = f"{type(exc).__name__}: {str(exc).splitlines()[0][:110]}"
                lines.append(f"| {op} | {argument} | `{shown}` | {outcome.replace('|', '/')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(bad_input_outcomes())
