"""Every op family x case x algorithm against the float64 reference, through the public ops.

The forward ops run ``FORWARD_CASES`` (every case through the cheap-to-build algorithms, the GEMM-based
ones on a covering subset); the gradients and the transposed ops run ``GRADIENT_CASES`` (and the
transposed ops ``TRANSPOSED_ONLY`` too) through every algorithm of their pass and ``auto``.  Each run
reads its inputs from views into NaN-margined buffers and writes ``out=``, a NaN-poisoned view
between sentinel margins (tests/helpers.py ``guarded``): a stray read shows as NaN, a stray write
changes a margin, an unwritten element stays NaN.  The expected values are the independent
references of tests/transposed_reference.py; the tolerance is ``clconv.reference.tolerance``.

An algorithm whose documented rule (tests/cases.py ``SERVING_RULES``) says it does not serve a case
must decline it: a ValueError naming it, raised before anything is built, ``out`` untouched.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import clconv
from clconv.algorithms import REGISTRY
from clconv.builder import stats
from clconv.device import supports_fp64
from clconv.passes import OPS, PASSES

from cases import (
    COVER, FORWARD_CASES, GEMM_BASED, GRADIENT_CASES, SERVING_RULES, SPLITK_CASE, TRANSPOSED_ONLY, Case,
    every_pass_algorithm, expected_to_serve,
)
from helpers import assert_matches, guarded, skip_without_fp64


def _entries(family: str, cases, with_auto: bool):
    pass_ = OPS[family].pass_
    out = []
    for case in cases:
        names = [n for n in clconv.algorithms(pass_) if not case.algorithms or n in case.algorithms]
        out += [(family, case, name) for name in names + (["auto"] if with_auto else [])]
    return out


MATRIX = (
    _entries("conv", FORWARD_CASES, with_auto=False)
    + _entries("conv_input", GRADIENT_CASES, with_auto=True)
    + _entries("conv_weight", GRADIENT_CASES, with_auto=True)
    + _entries("conv_transpose", GRADIENT_CASES + TRANSPOSED_ONLY, with_auto=True)
    + _entries("conv_transpose_input", GRADIENT_CASES + TRANSPOSED_ONLY, with_auto=True)
    + _entries("conv_transpose_weight", GRADIENT_CASES + TRANSPOSED_ONLY, with_auto=True)
)


def check_op(queue, rng, family: str, case: Case, algorithm: str) -> None:
    """Run ``family``'s op of ``case`` with ``algorithm`` on guarded views; compare, or expect a decline."""
    operands = case.operands(family, rng)
    if np.dtype(case.dtype) == np.float64 and not supports_fp64(queue.device):
        # a device without cl_khr_fp64 (Mesa's llvmpipe): refused by name, before anything is built
        with pytest.raises(TypeError, match="float64 tensors need cl_khr_fp64"):
            case.call(family, operands, algorithm=algorithm)
        return
    inputs = {role: guarded(queue, value.shape, case.dtype, inner=value) for role, value in operands.items()}
    out = guarded(queue, case.result_shape(family), case.dtype)
    views = {role: g.view for role, g in inputs.items()}
    if expected_to_serve(algorithm, case, family, queue.device):
        got = case.call(family, views, algorithm=algorithm, out=out.view)
        assert got is out.view, "an op given out= must return that very Array"
        assert_matches(got, case.expected(family, operands), case.reduction_length(family), case.dtype)
    else:
        builds = stats.source_builds
        with pytest.raises(ValueError, match=f"algorithm '{algorithm}'"):
            case.call(family, views, algorithm=algorithm, out=out.view)
        assert stats.source_builds == builds, "a declining algorithm built a program"
        assert np.isnan(out.view.get()).all(), "a declining algorithm wrote into out"
    out.check()
    for value in inputs.values():
        value.check()


@pytest.mark.parametrize("family, case, algorithm", MATRIX, ids=[f"{f}-{a}-{c.id}" for f, c, a in MATRIX])
def test_op_matches_reference(queue, rng, family, case, algorithm):
    check_op(queue, rng, family, case, algorithm)


# float64 through each kernel family once: the forward GEMMs and direct kernels in FORWARD_CASES; here
# the tiled GEMM and col2im of the data gradient, the split-K reduction and the depthwise weight gradient
FLOAT64 = [("conv_input", GRADIENT_CASES[1], "implicit_gemm"), ("conv_input", GRADIENT_CASES[1], "im2col"),
           ("conv_weight", SPLITK_CASE, "splitk"), ("conv_weight", GRADIENT_CASES[3], "depthwise")]


@pytest.mark.parametrize("family, case, algorithm", FLOAT64, ids=[f"{f}-{a}-{c.id}" for f, c, a in FLOAT64])
def test_float64_kernel_families(queue, rng, family, case, algorithm):
    """float64 (where the device has cl_khr_fp64) at float64's tolerance."""
    skip_without_fp64(queue)
    check_op(queue, rng, family, replace(case, dtype="float64"), algorithm)


# -- the matrix tests what it means to -------------------------------------------------------------------


def test_serving_rules_agree_with_the_algorithms(queue):
    """The rules of tests/cases.py and the algorithms' own decline_reason agree on every entry of
    the matrix (the matrix would fail on a disagreement too, after building; this says it first)."""
    wrong = []
    for family, case, algorithm in MATRIX:
        if algorithm not in SERVING_RULES:
            continue  # auto, or an algorithm whose rule is its own decline_reason
        reason = REGISTRY[algorithm].decline_reason(case.problem(family), queue.device)
        if (reason is None) != expected_to_serve(algorithm, case, family):
            wrong.append(f"{family}-{algorithm}-{case.id}: {reason}")
    assert not wrong, wrong


def test_every_algorithm_of_every_pass_is_run_on_some_case(queue):
    """Nothing is silently left untested: every algorithm of every pass serves some entry of the
    matrix or of the reliability set (tests/reliability: guards, exact arithmetic; both against the
    reference); split-K's contraction cut, for instance, only the latter's case and test_gemm_configs.py."""
    run = {(OPS[f].pass_, a) for f, c, a in MATRIX if a != "auto" and expected_to_serve(a, c, f, queue.device)}
    run |= {(pass_, a) for _, pass_, a in every_pass_algorithm(queue.device, COVER)}
    wanted = {(pass_, name) for pass_ in PASSES for name in clconv.algorithms(pass_)}
    assert wanted <= run, sorted(wanted - run)


def test_forward_cases_are_served_where_expected(queue):
    """direct, implicit_gemm and im2col serve every forward geometry; gemm1x1 exactly the 1x1 unpadded
    ones; the GEMM-based ones run on cases that cover 1D/2D/3D, groups, asymmetric padding, unbatched
    input, float64 and partial tiles."""
    for case in FORWARD_CASES:
        problem = case.problem("conv")
        serving = [name for name in clconv.algorithms("forward")
                   if REGISTRY[name].decline_reason(problem, queue.device) is None]
        assert {"direct", "implicit_gemm", "im2col"} <= set(serving), (case.id, serving)
        pointwise = all(k == 1 for k in case.kernel) and case.padding in (0, "valid")
        assert ("gemm1x1" in serving) == pointwise, (case.id, serving)
    gemm = [c for c in FORWARD_CASES if not c.algorithms or set(GEMM_BASED) <= set(c.algorithms)]
    assert {c.ndim for c in gemm} == {1, 2, 3} and any(c.unbatched for c in gemm)
    assert any(c.groups > 1 for c in gemm) and any(c.dtype == "float64" for c in gemm)
    assert any(isinstance(c.padding, tuple) and isinstance(c.padding[0], tuple) for c in gemm)
