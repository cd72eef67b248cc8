"""float16 and bfloat16 storage, and the fused epilogue, through every algorithm of every pass.

Storage: the reliability set (tests/cases.py ``COVER``) with small-integer inputs, so every sum is
an integer that float32 holds exactly: the stored result must equal the exact result rounded once
to the storage dtype by NumPy (round to nearest, ties to even), bit for bit.  float16 holds every
integer of these sums; bfloat16 (8 significant bits) rounds the larger ones, which checks its
rounding.  Then random data on guarded views (NaN margins around inputs, sentinels around the
output) within ``clconv.reference.tolerance``, for every op family.

Epilogue: ``act(alpha * conv + bias + beta * residual)`` (clconv/epilogue.py) for the ops that take
it, every algorithm of their passes, activations in turn, against the float64 reference.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import clconv
from clconv.dtypes import numpy_dtype
from clconv.epilogue import ACTIVATIONS, Epilogue, apply_reference
from clconv.algorithms import REGISTRY
from clconv.passes import OPS

from cases import COVER, FAMILIES, GRADIENT_CASES, algorithms_for, every_pass_algorithm, param_id
from helpers import assert_matches, guarded, poisoned

DEVICE = clconv.default_queue().device
COMBOS = every_pass_algorithm(DEVICE, COVER)
# Storage changes loads and stores only (the index logic is the float32 tests'): the 2D, 3D,
# vector-row, 1x1 and split-K cases (the weight gradient's, the forward's and data gradient's) take
# every kernel family through them in float16; bfloat16, whose loads and stores differ from
# float16's only in the prelude, the 2D, vector-row and 1x1 ones.  (Each is a program of its own:
# 16-bit GEMMs take 10-20 s to build on PoCL.)
F16_CASES = (COVER[0], COVER[2], COVER[4], COVER[5], COVER[6], COVER[7])
BF16_CASES = (COVER[0], COVER[4], COVER[5])
STORAGE_COMBOS = ([(c, p, a, "float16") for c, p, a in COMBOS if c in F16_CASES]
                  + [(c, p, a, "bfloat16") for c, p, a in COMBOS if c in BF16_CASES])


def small_integers(rng, shape, dtype):
    """Integers in [-3, 3] (exact in every storage dtype), with no all-zero tensor."""
    while True:
        value = rng.integers(-3, 4, size=shape)
        if np.count_nonzero(value) > value.size // 2:
            return value.astype(numpy_dtype(dtype))


@pytest.mark.parametrize("case,pass_,algorithm,dtype", STORAGE_COMBOS,
                         ids=[f"{param_id(c, p, a)}-{d}" for c, p, a, d in STORAGE_COMBOS])
def test_half_storage_rounds_the_exact_sum_once(queue, rng, case, pass_, algorithm, dtype):
    case = replace(case, dtype=dtype)
    operands = case.operands(pass_, rng, lambda r, shape: small_integers(r, shape, dtype))
    ref = case.reference(pass_, operands)
    assert np.array_equal(ref, np.round(ref)) and np.abs(ref).max() < 2 ** 24, "reference left the exact range"
    expected = ref.astype(numpy_dtype(dtype))
    out = poisoned(queue, case.result_shape(pass_), numpy_dtype(dtype))
    got = case.run(pass_, operands, algorithm=algorithm, out=out).get()
    assert got.dtype == numpy_dtype(dtype)
    # Bit-exact, except that a zero's sign is free: a sum that cancels to zero may come out as -0 where an
    # implementation orders or contracts the products differently (Mesa's rusticl does), as in PyTorch.
    bits = np.uint16
    both_zero = (got == 0) & (expected == 0)
    wrong = np.flatnonzero((got.view(bits) != expected.view(bits)) & ~both_zero)
    assert wrong.size == 0, (
        f"{wrong.size} of {got.size} elements differ from the exact sum rounded to {dtype}, first at flat index "
        f"{wrong[0]}: got {got.ravel()[wrong[0]]}, expected {expected.ravel()[wrong[0]]} (exact {ref.ravel()[wrong[0]]})")


FAMILY_COMBOS = [(family, algorithm, ("float16", "bfloat16")[n % 2]) for family in FAMILIES
                 for n, algorithm in enumerate(algorithms_for(COVER[0], OPS[family].pass_, DEVICE, with_auto=True))]


@pytest.mark.parametrize("family,algorithm,dtype", FAMILY_COMBOS, ids=[f"{f}-{a}-{d}" for f, a, d in FAMILY_COMBOS])
def test_half_storage_of_every_op_family_on_guarded_views(queue, rng, family, algorithm, dtype):
    """Every algorithm of every op family (the dtypes taking turns): random data: the result within the tolerance of its dtype (float32 sums, one rounding),
    nothing read or written past the tensors, numpy in -> the same dtype out."""
    case = replace(COVER[0], dtype=dtype)
    operands = case.operands(family, rng)
    expected = case.expected(family, operands)
    inputs = {role: guarded(queue, value.shape, numpy_dtype(dtype), inner=value) for role, value in operands.items()}
    out = guarded(queue, case.result_shape(family), numpy_dtype(dtype))
    got = case.call(family, {role: g.view for role, g in inputs.items()}, algorithm=algorithm, out=out.view)
    assert_matches(got, expected, case.reduction_length(family), dtype)
    out.check()
    for value in inputs.values():
        value.check()
    host = case.call(family, operands, algorithm=algorithm)
    assert isinstance(host, np.ndarray) and host.dtype == numpy_dtype(dtype)
    assert_matches(host, expected, case.reduction_length(family), dtype)


# -- the fused epilogue ------------------------------------------------------------------------------

EPILOGUE_FAMILIES = ("conv", "conv_transpose")  # the ops with activation=, residual=, alpha=, beta=


def _epilogue_combos():
    out, names = [], list(ACTIVATIONS)
    turn = 0
    for case in COVER:
        for family in EPILOGUE_FAMILIES:
            pass_ = OPS[family].pass_
            if pass_ not in case.passes or case.transposed_only:
                continue
            for algorithm in algorithms_for(case, pass_, DEVICE):
                out.append((case, family, algorithm, names[turn % len(names)]))
                turn += 1
    return out


EPILOGUE_COMBOS = _epilogue_combos()


def _check_epilogue(queue, rng, case, family, algorithm, epilogue: Epilogue, dtype="float32"):
    case = replace(case, dtype=dtype)
    operands = case.operands(family, rng)
    residual = rng.standard_normal(case.result_shape(family)).astype(numpy_dtype(dtype))
    conv = case.expected(family, operands)  # with the bias
    expected = apply_reference(epilogue, conv - _bias_term(case, family, operands), _bias_term(case, family, operands),
                               residual if epilogue.residual else None)
    inputs = {role: guarded(queue, value.shape, numpy_dtype(dtype), inner=value) for role, value in operands.items()}
    kept = guarded(queue, residual.shape, numpy_dtype(dtype), inner=residual)
    out = guarded(queue, case.result_shape(family), numpy_dtype(dtype))
    got = case.call(family, {role: g.view for role, g in inputs.items()}, algorithm=algorithm, out=out.view,
                    activation=epilogue.activation, negative_slope=epilogue.negative_slope, alpha=epilogue.alpha,
                    beta=epilogue.beta, residual=kept.view if epilogue.residual else None)
    # the epilogue's functions are float32 (a few ulp) on values that may exceed the sum's scale
    assert_matches(got, expected, case.reduction_length(family), dtype)
    for value in (out, kept, *inputs.values()):
        value.check()


def _bias_term(case, family, operands):
    """The bias broadcast over the result (0 without one), in float64."""
    if "bias" not in case.roles(family):
        return np.zeros(())
    bias = np.asarray(operands["bias"], np.float64)
    ndim = len(case.result_shape(family)) - (1 if case.unbatched else 2)
    shape = (-1,) + (1,) * ndim if case.unbatched else (1, -1) + (1,) * ndim
    return bias.reshape(shape)


@pytest.mark.parametrize("case,family,algorithm,activation", EPILOGUE_COMBOS,
                         ids=[f"{f}-{a}-{act}-{c.id}" for c, f, a, act in EPILOGUE_COMBOS])
def test_fused_epilogue_of_every_algorithm(queue, rng, case, family, algorithm, activation):
    epilogue = Epilogue(activation, negative_slope=0.2, alpha=0.75, beta=-0.5, residual=True)
    _check_epilogue(queue, rng, case, family, algorithm, epilogue)


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_every_activation_without_a_residual(queue, rng, activation):
    _check_epilogue(queue, rng, COVER[0], "conv", "direct", Epilogue(activation, negative_slope=0.05))


HALF_EPILOGUE = [(family, algorithm) for family in EPILOGUE_FAMILIES
                 for algorithm in algorithms_for(COVER[0], OPS[family].pass_, DEVICE)]


@pytest.mark.parametrize("family,algorithm", HALF_EPILOGUE, ids=[f"{f}-{a}" for f, a in HALF_EPILOGUE])
def test_fused_epilogue_in_half_storage(queue, rng, family, algorithm):
    _check_epilogue(queue, rng, COVER[0], family, algorithm,
                    Epilogue("relu", alpha=1.0, beta=1.0, residual=True), dtype="float16")


def test_the_epilogue_propagates_nan_as_pytorch_does(queue):
    """relu(nan) is nan in PyTorch; a NaN input stays NaN through every activation."""
    x = np.full((1, 1, 3, 3), np.nan, np.float32)
    w = np.ones((1, 1, 1, 1), np.float32)
    for activation in ACTIVATIONS:
        y = clconv.conv2d(x, w, activation=activation, algorithm="direct", queue=queue)
        assert np.isnan(y).all(), activation


def test_relu_with_residual_is_exact_on_integers(queue, rng):
    """relu(conv + bias + residual) on small integers: exact, so equal bit for bit."""
    x = rng.integers(-3, 4, (2, 4, 6, 6)).astype(np.float32)
    w = rng.integers(-3, 4, (5, 4, 3, 3)).astype(np.float32)
    b = rng.integers(-3, 4, (5,)).astype(np.float32)
    r = rng.integers(-20, 21, (2, 5, 6, 6)).astype(np.float32)
    for algorithm in ("direct", "implicit_gemm", "winograd"):  # a direct, a GEMM and a transformed sum
        y = clconv.conv2d(x, w, b, padding=1, activation="relu", residual=r, algorithm=algorithm, queue=queue)
        z = clconv.conv2d(x, w, b, padding=1, algorithm=algorithm, queue=queue)
        assert np.array_equal(y, np.maximum(z + r, 0)), algorithm


# -- channels-last activations ---------------------------------------------------------------------------

LAST_COMBOS = [(c, p, a) for c, p, a in COMBOS if c in F16_CASES and "channels_last" in REGISTRY[a].layouts] + \
    [(c, p, "auto") for c in COVER[:3] for p in c.passes]


@pytest.mark.parametrize("case,pass_,algorithm", LAST_COMBOS, ids=[param_id(*c) for c in LAST_COMBOS])
def test_channels_last_of_every_pass(queue, rng, case, pass_, algorithm):
    """Activations stored (N, *spatial, C), read in place: exact small-integer sums, so the result
    equals the reference bit for bit; inputs and output on guarded views."""
    family = case.family(pass_)
    operands = case.operands(pass_, rng, lambda r, shape: small_integers(r, shape, "float32"))
    expected = case.channels_last(case.reference(pass_, operands).astype(np.float32), OPS[family].spec.result)
    inputs = {role: guarded(queue, case.channels_last(value, role).shape, np.float32,
                            inner=case.channels_last(value, role)) for role, value in operands.items()}
    out = guarded(queue, expected.shape, np.float32)
    got = case.call(family, {role: g.view for role, g in inputs.items()}, algorithm=algorithm, out=out.view,
                    layout="channels_last").get()
    wrong = np.flatnonzero(got != expected)
    assert wrong.size == 0, f"{wrong.size} of {got.size} elements differ, first at {wrong[0]}"
    for value in (out, *inputs.values()):
        value.check()


LAST_EPILOGUE = [(family, algorithm, dtype) for family in EPILOGUE_FAMILIES
                 for algorithm in algorithms_for(COVER[0], OPS[family].pass_, DEVICE)
                 if "channels_last" in REGISTRY[algorithm].layouts for dtype in ("float32", "bfloat16")]


@pytest.mark.parametrize("family,algorithm,dtype", LAST_EPILOGUE, ids=[f"{f}-{a}-{d}" for f, a, d in LAST_EPILOGUE])
def test_channels_last_with_epilogue_and_half_storage(queue, rng, family, algorithm, dtype):
    case = replace(COVER[0], dtype=dtype)
    operands = case.operands(family, rng)
    result_role = OPS[family].spec.result
    residual = rng.standard_normal(case.result_shape(family)).astype(numpy_dtype(dtype))
    epilogue = Epilogue("gelu", alpha=0.5, beta=2.0, residual=True)
    conv = case.expected(family, operands)
    bias = _bias_term(case, family, operands)
    expected = apply_reference(epilogue, conv - bias, bias, residual)
    last = {role: case.channels_last(value, role) for role, value in operands.items()}
    got = case.call(family, last, algorithm=algorithm, layout="channels_last", activation="gelu", alpha=0.5,
                    beta=2.0, residual=case.channels_last(residual, result_role))
    assert got.shape == case.channels_last(expected, result_role).shape
    assert_matches(case.channels_first(got), expected, case.reduction_length(family), dtype)


def test_convolution_backward_in_channels_last(queue, rng):
    x = rng.standard_normal((2, 5, 6, 4)).astype(np.float32)  # (N, H, W, C)
    w = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
    dy = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    dx, dw, db = clconv.convolution_backward(dy, x, w, padding=1, layout="channels_last", algorithm="direct")
    to_first = lambda t: np.ascontiguousarray(np.moveaxis(t, -1, 1))  # noqa: E731
    rx, rw, rb = clconv.convolution_backward(to_first(dy), to_first(x), w, padding=1, algorithm="direct")
    np.testing.assert_allclose(np.moveaxis(dx, -1, 1), rx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, rw, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, rb, rtol=1e-5, atol=1e-5)
    assert dx.shape == x.shape


@pytest.mark.parametrize("pass_", ["forward", "backward_data", "backward_weight"])
def test_winograd_of_a_kernel_one_deep_in_channels_last(queue, rng, pass_):
    """A 3D layer whose kernel is one deep runs Winograd over its depth slices as images; channels-last
    its slices follow each other (NDHWC), channels-first a channel's slices lie together (the test
    matrix's one-deep cases); the fused epilogue on the forward and data gradient."""
    case = next(c for c in GRADIENT_CASES if c.note == "one-deep-grouped")
    family = case.family(pass_)
    operands = case.operands(family, rng)
    result_role = OPS[family].spec.result
    conv = case.expected(family, operands)
    last = {role: case.channels_last(value, role) for role, value in operands.items()}
    if pass_ == "backward_weight":  # the weight keeps its layout
        got = case.call(family, last, algorithm="winograd", layout="channels_last")
        assert_matches(got, conv, case.reduction_length(family), "float32")
        return
    bias = _bias_term(case, family, operands)
    expected = apply_reference(Epilogue("leaky_relu", alpha=0.5), conv - bias, bias, None)
    got = case.call(family, last, algorithm="winograd", layout="channels_last", activation="leaky_relu", alpha=0.5)
    assert got.shape == case.channels_last(expected, result_role).shape
    assert_matches(case.channels_first(got), expected, case.reduction_length(family), "float32")


# -- the epilogue's arguments ----------------------------------------------------------------------------

PLAIN_COMBOS = [(c, p, a) for c, p, a in COMBOS if p != "backward_weight"]


@pytest.mark.parametrize("case,pass_,algorithm", PLAIN_COMBOS, ids=[param_id(*c) for c in PLAIN_COMBOS])
def test_kernels_take_only_the_epilogue_arguments_they_read(case, pass_, algorithm):
    """A kernel takes the bias and the residual only where its program's epilogue reads them
    (prelude.mako's epilogue_params): each buffer argument costs every launch host time.  Without
    either, no call passes them and no source declares them; with both, each kernel that stores the
    result takes both (its source declares them and its call passes the operands, never a
    fallback: the results tests above check what they do)."""
    from clconv import templates
    from clconv.plan import Problem

    geometry = case.problem(case.family_for(pass_)).geometry
    for bias, epilogue in ((False, Epilogue()), (True, Epilogue(residual=True, beta=0.5))):
        problem = Problem(geometry, pass_, "float32", bias=bias, epilogue=epilogue)
        alg = REGISTRY[algorithm]
        plan = alg.plan(problem, alg.configs(problem, DEVICE)[0], DEVICE)
        sources, index = templates.render_plan(plan)
        texts = [source.text for source in sources]
        parts = [[arg for arg in call.args if getattr(arg, "epilogue", "")] for call in plan.calls]
        if not bias:
            assert not any(parts), parts
            assert not any("const long bias_off" in text or "const long residual_off" in text for text in texts)
            continue
        stores = [i for i, call in enumerate(plan.calls) if any(getattr(arg, "role", None) == "bias" for arg in call.args)]
        assert stores, "no kernel stores the result with the bias"
        for i in stores:
            assert [arg.epilogue for arg in parts[i]] == ["bias", "residual"]
            assert "const long bias_off," in texts[index[i]] and "const long residual_off," in texts[index[i]]
