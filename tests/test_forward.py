"""Forward convolution (conv1d/2d/3d): every forward algorithm against the float64 reference.

One small set of geometries run through the algorithms of ``clconv.algorithms("forward")`` (every
geometry through the cheap-to-build ones, a covering subset through the GEMM-based ones; an
algorithm that declines a geometry must say so with a ValueError naming itself), on fresh
seeded random data, into NaN-poisoned ``out=`` arrays, with a tolerance scaled by the reduction
length.  The fast reference (``clconv.reference``) is itself checked against naive loops
(``tests/naive_reference.py``) on a few tiny shapes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyopencl.array as cl_array
import pytest

import clconv
from clconv import planner, reference, tuning
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.builder import stats
from clconv.geometry import INT32_MAX, ConvGeometry, resolve_conv

from helpers import assert_matches, poisoned, random
from naive_reference import conv_naive

OPS = {1: clconv.conv1d, 2: clconv.conv2d, 3: clconv.conv3d}
FORWARD_ALGORITHMS = clconv.algorithms("forward")


@dataclass(frozen=True)
class Case:
    """One forward call: shapes and the arguments exactly as a user would pass them."""

    ndim: int
    batch: int | None  # None: unbatched input (C, *spatial)
    cin: int
    cout: int
    size: tuple
    kernel: tuple
    stride: Any = 1
    padding: Any = 0
    dilation: Any = 1
    groups: int = 1
    bias: bool = True
    dtype: Any = np.float32
    note: str = field(default="", compare=False)
    gemm: bool = field(default=False, compare=False)  # also run through the GEMM-based algorithms

    @property
    def id(self) -> str:
        def spell(v):
            if isinstance(v, str):
                return v
            if isinstance(v, tuple):
                if v and isinstance(v[0], tuple):
                    return "x".join(f"{b}{e}" for b, e in v)  # ((1, 2), (0, 1)) -> 12x01
                return "x".join(str(i) for i in v)
            return str(v)

        batch = "u" if self.batch is None else f"n{self.batch}"
        dtype = "-f64" if self.dtype == np.float64 else ""
        bias = "-bias" if self.bias else ""
        note = f"-{self.note}" if self.note else ""
        return (f"{self.ndim}d-{batch}c{self.cin}o{self.cout}i{spell(self.size)}-k{spell(self.kernel)}"
                f"s{spell(self.stride)}p{spell(self.padding)}d{spell(self.dilation)}g{self.groups}"
                f"{bias}{dtype}{note}")

    def input_shape(self) -> tuple:
        lead = () if self.batch is None else (self.batch,)
        return (*lead, self.cin, *self.size)

    def weight_shape(self) -> tuple:
        return (self.cout, self.cin // self.groups, *self.kernel)

    def args(self) -> dict:
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)


CASES = [
    # 1D
    Case(1, 2, 3, 5, (11,), (3,), 1, 1, note="basic"),
    Case(1, 1, 4, 4, (13,), (3,), 2, 2, 3, 2, bias=False, note="batch1-dilated"),
    Case(1, 2, 2, 3, (12,), (2,), 3, 0, note="stride-gt-kernel"),
    Case(1, None, 3, 6, (9,), (4,), 1, "same", 1, 3, note="unbatched-depthwise-x2-same-odd", gemm=True),
    # 2D
    Case(2, 2, 4, 6, (9, 8), (3, 3), 2, 1, 2, 2, gemm=True),
    Case(2, 2, 3, 5, (7, 10), (2, 3), (1, 2), (1, 0), (2, 1), note="non-square", gemm=True),
    Case(2, 2, 6, 6, (7, 7), (3, 3), 1, 1, 1, 6, note="depthwise"),
    Case(2, 1, 3, 6, (6, 5), (3, 3), (2, 1), 1, 1, 3, bias=False, note="depthwise-x2"),
    Case(2, 2, 4, 3, (6, 7), (3, 2), 1, ((1, 2), (0, 1)), bias=False, note="asymmetric", gemm=True),
    Case(2, 1, 3, 4, (6, 7), (4, 3), 1, "same", note="same-odd-even"),
    Case(2, 2, 2, 3, (7, 6), (3, 3), 1, "same", 2, note="same-dilated"),
    Case(2, 2, 3, 4, (6, 7), (3, 2), 1, "valid", bias=False, note="valid"),
    Case(2, None, 3, 5, (7, 6), (3, 3), 1, 1, note="unbatched"),
    Case(2, 2, 2, 3, (11, 10), (2, 2), 3, 0, note="stride-gt-kernel"),
    Case(2, 2, 8, 6, (7, 9), (1, 1), (2, 3), 0, 1, 2, note="1x1-strided-grouped"),
    Case(2, 3, 5, 7, (13, 11), (5, 3), (2, 1), (2, 0), note="odd-sizes", gemm=True),
    Case(2, 2, 20, 33, (9, 8), (3, 3), 1, 1, note="tile-edges", gemm=True),  # K = 180, M = 33: partial tiles
    Case(2, 2, 4, 6, (7, 6), (3, 3), 1, 1, 1, 2, dtype=np.float64, gemm=True),
    # 3D
    Case(3, 1, 2, 3, (5, 6, 4), (3, 2, 3), (1, 2, 1), (1, 0, 1), note="non-cubic"),
    Case(3, 2, 4, 4, (6, 5, 7), (2, 3, 2), (2, 1, 2), ((0, 1), (1, 1), (1, 0)), (2, 1, 1), 2,
         bias=False, note="grouped-asymmetric", gemm=True),
    Case(3, 2, 6, 4, (5, 4, 6), (1, 1, 1), (2, 1, 3), note="1x1x1-strided"),
    Case(3, None, 3, 3, (4, 5, 4), (3, 3, 3), 1, "same", 1, 3, note="unbatched-depthwise-same"),
]


def _by_note(note: str) -> Case:
    (case,) = [c for c in CASES if c.note == note]
    return case


def _resolve(case: Case):
    bias_shape = (case.cout,) if case.bias else None
    return resolve_conv(case.ndim, case.input_shape(), case.weight_shape(), bias_shape, **case.args())


def _data(case: Case, rng):
    x = random(rng, case.input_shape(), case.dtype)
    w = random(rng, case.weight_shape(), case.dtype)
    b = random(rng, (case.cout,), case.dtype) if case.bias else None
    return x, w, b


def _independent_geometry(case: Case) -> ConvGeometry:
    """The case's geometry worked out here from the user's arguments, not by clconv's resolver, so
    a resolver bug (padding, 'same', output size) cannot hide in the expected values."""
    nd = case.ndim

    def per_dim(v):
        return tuple(v) if isinstance(v, tuple) else (v,) * nd

    stride, dilation = per_dim(case.stride), per_dim(case.dilation)
    if case.padding == "valid":
        begin = end = (0,) * nd
    elif case.padding == "same":  # PyTorch: total d*(k-1), the odd element at the end
        total = [d * (k - 1) for d, k in zip(dilation, case.kernel)]
        begin = tuple(t // 2 for t in total)
        end = tuple(t - t // 2 for t in total)
    elif isinstance(case.padding, tuple) and isinstance(case.padding[0], tuple):
        begin, end = tuple(p[0] for p in case.padding), tuple(p[1] for p in case.padding)
    else:
        begin = end = per_dim(case.padding)

    def three(v, fill):
        return (fill,) * (3 - nd) + tuple(v)

    return ConvGeometry(nd, case.batch or 1, case.groups, case.cin, case.cout, three(case.size, 1),
                        three(case.kernel, 1), three(stride, 1), three(begin, 0), three(end, 0),
                        three(dilation, 1))


def _expected(case: Case, x, w, b) -> np.ndarray:
    g = _independent_geometry(case)
    ref = reference.forward(g, x[None] if case.batch is None else x, w, b)
    return ref[0] if case.batch is None else ref


def _reduction(case: Case) -> int:
    return _resolve(case).geometry.reduction_length + 1  # + the bias term


def _declines(name: str, case: Case, queue) -> str | None:
    g = _resolve(case).geometry
    problem = Problem(g, "forward", np.dtype(case.dtype).name, bias=case.bias)
    return REGISTRY[name].decline_reason(problem, queue.device)


# Every case through every algorithm (declines cost nothing; gemm1x1 serves only the 1x1 cases),
# except that the general GEMM-based ones run on the `gemm` cases only, which between them cover
# 1D/2D/3D, groups, depthwise, stride, dilation, asymmetric and 'same' padding, unbatched input,
# float64 and partial GEMM tiles: a GEMM kernel takes seconds to build on PoCL, so the full
# matrix would cost minutes.
GEMM_BASED = ("im2col", "implicit_gemm")
PAIRS = [(c, a) for c in CASES for a in FORWARD_ALGORITHMS if a not in GEMM_BASED or c.gemm]


@pytest.mark.parametrize("case, algorithm", PAIRS, ids=[f"{c.id}-{a}" for c, a in PAIRS])
def test_forward_matches_reference(case: Case, algorithm: str, queue, rng):
    """numpy inputs, a NaN-poisoned device ``out=``: the result is ``out``, equal to the reference."""
    x, w, b = _data(case, rng)
    op = OPS[case.ndim]
    ref = _expected(case, x, w, b)
    out = poisoned(queue, ref.shape, case.dtype)
    if _declines(algorithm, case, queue) is not None:
        before = stats.source_builds
        with pytest.raises(ValueError, match=f"algorithm '{algorithm}'"):
            op(x, w, b, **case.args(), algorithm=algorithm, out=out)
        assert stats.source_builds == before
        assert np.isnan(out.get()).all(), "a declining algorithm wrote into out"
        return
    result = op(x, w, b, **case.args(), algorithm=algorithm, out=out)
    assert result is out
    assert_matches(result, ref, _reduction(case), case.dtype)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_resolver_agrees_with_independent_geometry(case: Case):
    assert _resolve(case).geometry == _independent_geometry(case)
    assert _resolve(case).unbatched == (case.batch is None)


def test_every_case_is_served_where_expected(queue):
    """Guards the matrix above against silently testing nothing: direct and implicit_gemm serve
    every geometry; gemm1x1 serves exactly the 1x1 unpadded ones."""
    for case in CASES:
        serving = [name for name in FORWARD_ALGORITHMS if _declines(name, case, queue) is None]
        assert {"direct", "implicit_gemm", "im2col"} <= set(serving), (case.id, serving)
        pointwise = all(k == 1 for k in case.kernel) and case.padding in (0, "valid")
        assert ("gemm1x1" in serving) == pointwise, (case.id, serving)


def test_forward_algorithms_listed():
    names = clconv.algorithms("forward")
    assert {"direct", "im2col", "gemm1x1", "implicit_gemm"} <= set(names)
    assert set(names) <= set(clconv.algorithms())


def test_gemm1x1_declines_3x3_naming_itself(rng):
    x = random(rng, (1, 2, 5, 5))
    w = random(rng, (3, 2, 3, 3))
    with pytest.raises(ValueError) as info:
        clconv.conv2d(x, w, algorithm="gemm1x1")
    message = str(info.value)
    assert "gemm1x1" in message and "1x1" in message


def test_gemm1x1_declines_padded_1x1(rng):
    x = random(rng, (1, 2, 5, 5))
    w = random(rng, (3, 2, 1, 1))
    with pytest.raises(ValueError, match="gemm1x1"):
        clconv.conv2d(x, w, padding=1, algorithm="gemm1x1")


# -- the references themselves ---------------------------------------------------------------------

NAIVE_CASES = [
    Case(1, 2, 4, 6, (9,), (3,), 2, ((2, 1),), 2, 2),
    Case(2, 2, 4, 4, (6, 5), (3, 2), (2, 1), ((1, 0), (2, 1)), (1, 2), 2),
    Case(2, 1, 3, 6, (5, 5), (2, 2), 1, 1, 1, 3, bias=False),
    Case(3, 1, 2, 3, (4, 5, 3), (2, 3, 2), (1, 2, 1), ((1, 0), (0, 1), (1, 1)), (2, 1, 1), 1),
]


@pytest.mark.parametrize("case", NAIVE_CASES, ids=lambda c: c.id)
def test_fast_reference_matches_naive_loops(case: Case, rng):
    """clconv.reference.forward (strided slices + einsum) equals the index-by-index definition."""
    x, w, b = _data(case, rng)
    naive = conv_naive(x, w, b, case.stride, case.padding, case.dilation, case.groups)
    g = _resolve(case).geometry
    fast = reference.forward(g, x, w, b)
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


def test_same_padding_puts_odd_extra_at_the_end():
    g = resolve_conv(2, (1, 1, 6, 7), (1, 1, 4, 3), None, 1, "same", 1, 1).geometry
    assert g.pad_begin[1:] == (1, 1) and g.pad_end[1:] == (2, 1)
    assert g.user_out_size == (6, 7)
    g = resolve_conv(1, (1, 1, 8), (1, 1, 4), None, 1, "same", 3, 1).geometry  # total 9
    assert (g.pad_begin[2], g.pad_end[2]) == (4, 5)
    assert g.user_out_size == (8,)


# -- tensor kinds, queues, empty batches ------------------------------------------------------------

ROUND_TRIP = Case(2, 2, 4, 6, (9, 8), (3, 3), 2, 1, 2, 2)  # a `gemm` case of CASES: programs are reused


def test_numpy_in_numpy_out(rng):
    x, w, b = _data(ROUND_TRIP, rng)
    y = clconv.conv2d(x, w, b, **ROUND_TRIP.args(), algorithm="direct")
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    assert_matches(y, _expected(ROUND_TRIP, x, w, b), _reduction(ROUND_TRIP))


def test_non_contiguous_numpy_input(rng):
    """A strided numpy view (here a channel-reversed, W-strided slice) is read as its values."""
    x, w, b = _data(ROUND_TRIP, rng)
    base = random(rng, (2, 4, 9, 16))
    view = base[:, ::-1, :, ::2]
    assert view.shape == x.shape and not view.flags.c_contiguous
    y = clconv.conv2d(view, w, b, **ROUND_TRIP.args(), algorithm="direct")
    assert_matches(y, _expected(ROUND_TRIP, np.ascontiguousarray(view), w, b), _reduction(ROUND_TRIP))


def test_array_in_array_out_same_queue(queue, rng):
    x, w, b = _data(ROUND_TRIP, rng)
    xd, wd, bd = (cl_array.to_device(queue, a) for a in (x, w, b))
    y = clconv.conv2d(xd, wd, bd, **ROUND_TRIP.args(), algorithm="implicit_gemm")
    assert isinstance(y, cl_array.Array)
    assert y.queue is queue and y.context == queue.context
    assert y.dtype == np.float32 and y.shape == _resolve(ROUND_TRIP).geometry.output_shape
    assert_matches(y, _expected(ROUND_TRIP, x, w, b), _reduction(ROUND_TRIP))
    # the inputs are left alone
    np.testing.assert_array_equal(xd.get(), x)
    np.testing.assert_array_equal(wd.get(), w)


def test_array_with_offset_into_larger_buffer(queue, rng):
    """Inputs and out may be views at an element offset of a bigger buffer."""
    x, w, b = _data(ROUND_TRIP, rng)
    big = cl_array.to_device(queue, np.concatenate([random(rng, 7), x.ravel()]))
    xd = big[7:].reshape(x.shape)
    assert xd.offset == 7 * 4
    ref = _expected(ROUND_TRIP, x, w, b)
    backing = poisoned(queue, (5 + ref.size,))
    out = backing[5:].reshape(ref.shape)
    y = clconv.conv2d(xd, cl_array.to_device(queue, w), cl_array.to_device(queue, b), **ROUND_TRIP.args(),
                      algorithm="direct", out=out)
    assert y is out
    assert_matches(y, ref, _reduction(ROUND_TRIP))
    assert np.isnan(backing[:5].get()).all(), "wrote before the start of out"


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_batch_zero_returns_empty_result(ndim, queue, rng):
    size = (5, 6, 4)[:ndim]
    x = np.empty((0, 4, *size), np.float32)
    w = random(rng, (6, 2, *(3,) * ndim))
    before = stats.source_builds
    y = OPS[ndim](x, w, None, 2, 1, 1, 2)
    expected_shape = (0, 6, *((s + 2 - 3) // 2 + 1 for s in size))
    assert isinstance(y, np.ndarray) and y.shape == expected_shape and y.dtype == np.float32
    yd = OPS[ndim](cl_array.to_device(queue, x), cl_array.to_device(queue, w), None, 2, 1, 1, 2,
                   algorithm="im2col")
    assert isinstance(yd, cl_array.Array) and yd.shape == expected_shape
    assert stats.source_builds == before, "an empty batch built a kernel"


# -- auto with tuning on ------------------------------------------------------------------------------


def test_auto_with_tuning_measures_and_remembers(monkeypatch, tmp_path, queue, rng):
    monkeypatch.setenv("CLCONV_TUNE", "1")
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(planner, "MAX_CONFIGS_PER_ALGORITHM", 1)  # one build per algorithm: PoCL is slow
    case = Case(2, 1, 3, 4, (6, 5), (2, 3), 1, ((0, 1), (1, 0)), note="tuned")  # used nowhere else
    x, w, b = _data(case, rng)
    problem = Problem(_resolve(case).geometry, "forward", "float32", bias=True)
    assert tuning.lookup(queue.device, problem.key()) is None

    y = clconv.conv2d(x, w, b, **case.args(), out=poisoned(queue, _expected(case, x, w, b).shape))
    assert_matches(y, _expected(case, x, w, b), _reduction(case))

    entry = tuning.lookup(queue.device, problem.key())
    assert entry is not None and entry["measured"] is True
    assert entry["algorithm"] in FORWARD_ALGORITHMS
    assert REGISTRY[entry["algorithm"]].decline_reason(problem, queue.device) is None
    assert len(entry["times_ms"]) >= 2, "tuning measured fewer than two candidates"
    stored = json.loads(tuning.database_path(queue.device).read_text())["entries"]
    assert stored[problem.key()]["algorithm"] == entry["algorithm"]

    # the second call uses the remembered choice: no measuring, no build
    builds = stats.source_builds
    y2 = clconv.conv2d(x, w, b, **case.args())
    assert stats.source_builds == builds
    assert_matches(y2, _expected(case, x, w, b), _reduction(case))


def test_auto_without_tuning_serves_every_case_kind(queue, rng):
    """auto never fails where an algorithm serves: a pointwise, a depthwise and a 3D case."""
    for case in (_by_note("1x1-strided-grouped"), _by_note("depthwise"), _by_note("grouped-asymmetric")):
        x, w, b = _data(case, rng)
        ref = _expected(case, x, w, b)
        y = OPS[case.ndim](x, w, b, **case.args(), out=poisoned(queue, ref.shape, case.dtype))
        assert_matches(y, ref, _reduction(case), case.dtype)


# -- 64-bit indexing ---------------------------------------------------------------------------------


def test_index_type_switches_to_long_past_int32():
    small = resolve_conv(2, (1, 1, 46340, 46340), (1, 1, 1, 1), None, 64).geometry
    assert small.input_elements <= INT32_MAX
    assert Problem(small, "forward", "float32").index_type() == "int"
    big = resolve_conv(2, (1, 1, 46341, 46341), (1, 1, 1, 1), None, 64).geometry
    assert big.input_elements > INT32_MAX
    assert Problem(big, "forward", "float32").index_type() == "long"
    # an extra workspace past int32 also switches
    assert Problem(small, "forward", "float32").index_type(INT32_MAX + 1) == "long"


@pytest.mark.parametrize("algorithm", FORWARD_ALGORITHMS)
def test_rendered_source_uses_long_index_past_int32(algorithm):
    """An input of 46341^2 > 2^31 elements (a zero-stride view: nothing is allocated) renders
    kernels with 64-bit indices; a just-smaller one keeps 32-bit."""
    w = np.ones((1, 1, 1, 1), np.float32)
    big = np.broadcast_to(np.float32(1), (1, 1, 46341, 46341))
    before = stats.source_builds
    source = clconv.render(clconv.conv2d, big, w, stride=64, algorithm=algorithm)
    assert "typedef long clc_idx;" in source
    assert "typedef int clc_idx;" not in source
    small = np.broadcast_to(np.float32(1), (1, 1, 46340, 46340))
    source = clconv.render(clconv.conv2d, small, w, stride=64, algorithm=algorithm)
    assert "typedef int clc_idx;" in source
    assert stats.source_builds == before, "render built a program"
