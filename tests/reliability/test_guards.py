"""Memory safety, benchdnn style: every algorithm of every pass over the reliability set
(tests/cases.py ``COVER``) writes into an ``out=`` view in the middle of a larger buffer whose margins
hold a sentinel, and reads inputs that are views into buffers whose margins hold NaN (the one guard
helper, tests/helpers.py ``guarded``):

* a write outside the output changes a margin word -> the guard check fails;
* an output element left unwritten keeps its NaN poison -> the reference check fails;
* a read outside an input picks up NaN from its margin -> the result is NaN -> the check fails;
* an input changed by the kernels -> the input's check fails.

Offsets are odd numbers of elements, so no kernel may assume an aligned start.  (The same guards
wrap every run of tests/algorithms/test_matrix.py.)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import clconv
from clconv.passes import PASSES

from cases import COVER, every_pass_algorithm, param_id
from helpers import assert_matches, guarded

DEVICE = clconv.default_queue().device
COMBOS = every_pass_algorithm(DEVICE, COVER)


def run_guarded(queue, rng, case, family: str, algorithm: str):
    """Run ``family``'s op (or a pass) of ``case`` on guarded views; check result, margins and inputs."""
    host = case.operands(family, rng)
    inputs = [guarded(queue, value.shape, case.dtype, inner=value) for value in host.values()]
    out = guarded(queue, case.result_shape(family), case.dtype)
    result = case.run(family, {role: g.view for role, g in zip(host, inputs)}, algorithm=algorithm, out=out.view)
    assert result is out.view, "an op given out= must return that very Array"
    assert_matches(result, case.reference(family, host), case.reduction_length(family), case.dtype)
    out.check()
    for g in inputs:
        g.check()


@pytest.mark.parametrize("case,pass_,algorithm", COMBOS, ids=[param_id(*c) for c in COMBOS])
def test_guarded_out_view(queue, rng, case, pass_, algorithm):
    run_guarded(queue, rng, case, pass_, algorithm)


def test_cases_cover_every_algorithm_of_every_pass():
    """The case list must not silently leave an algorithm/pass untested (a declined case drops it)."""
    covered = {(pass_, algorithm) for _, pass_, algorithm in COMBOS}
    wanted = {(pass_, name) for pass_ in PASSES for name in clconv.algorithms(pass_)}
    assert wanted <= covered, f"not covered: {sorted(wanted - covered)}"
    assert len({case.id for case in COVER}) == len(COVER)


def test_auto_and_unbatched_and_convolution_backward_respect_guards(queue, rng):
    """``auto``, the unbatched spelling and aten-style convolution_backward, with guarded views."""
    case = COVER[0]
    run_guarded(queue, rng, case, "conv", "auto")

    # unbatched input (C, H, W): out is (C_out, H, W)
    run_guarded(queue, rng, replace(case, batch=None), "conv", "implicit_gemm")

    # convolution_backward: every tensor a guarded view, all three gradients
    host = {role: rng.standard_normal(shape).astype(np.float32) for role, shape in
            (("x", case.input_shape), ("w", case.weight_shape), ("dy", case.output_shape))}
    views = {role: guarded(queue, value.shape, inner=value) for role, value in host.items()}
    gi, gw, gb = clconv.convolution_backward(views["dy"].view, views["x"].view, views["w"].view,
                                             **case.conv_args())
    assert_matches(gi, case.reference("conv_input", host), case.reduction_length("conv_input"))
    assert_matches(gw, case.reference("conv_weight", host), case.reduction_length("conv_weight"))
    assert_matches(gb, host["dy"].astype(np.float64).sum(axis=(0, 2, 3)), case.reduction_length("conv_weight"))
    for value in views.values():
        value.check()
