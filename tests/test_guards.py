"""Memory safety, benchdnn style: every algorithm of every pass writes into an ``out=`` view in the
middle of a larger buffer whose guard regions hold a sentinel, and reads inputs that are views into
buffers whose guard regions hold NaN.

* a write outside the output changes a guard word  -> the guard check fails;
* an output element left unwritten keeps its NaN poison -> the reference check fails;
* a read outside an input picks up NaN from its guard -> the result is NaN -> the check fails.

Offsets are odd numbers of elements, so no kernel may assume an aligned start.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import clconv
from clconv import reference as ref_mod
from clconv.passes import PASSES
from clconv.geometry import resolve_conv

from helpers import assert_matches, random
from reliability_cases import (
    CASES, GUARD_BEFORE, SENTINEL, Case, check_guards, every_pass_algorithm, guarded, operand_shapes, param_id, reference_result, result_shape, run,
)


DEVICE = clconv.default_queue().device
COMBOS = every_pass_algorithm(DEVICE)


def run_guarded(queue, rng, case: Case, pass_: str, algorithm: str):
    host = {name: random(rng, shape) for name, shape in operand_shapes(case, pass_).items()}
    device = {}
    inputs = []
    for name, value in host.items():
        big, view = guarded(queue, value.shape, np.nan, inner=value)
        device[name] = view
        inputs.append((big, value))
    shape = result_shape(case, pass_)
    n = math.prod(shape)
    big_out, out = guarded(queue, shape, SENTINEL)
    out.set(np.full(shape, np.nan, np.float32))  # poison: an unwritten element stays NaN
    result = run(case, pass_, algorithm, device, out=out)
    assert result is out, "an op given out= must return that very Array"
    ref = reference_result(case, pass_, host)
    assert_matches(result, ref, case.geometry.reduction_length * max(case.geometry.batch, 1))
    check_guards(big_out, n, SENTINEL)
    for big, value in inputs:  # the inputs are read-only: their window and guards are unchanged
        got = big.get()
        np.testing.assert_array_equal(got[GUARD_BEFORE:GUARD_BEFORE + value.size], value.ravel())
        assert np.isnan(got[:GUARD_BEFORE]).all() and np.isnan(got[GUARD_BEFORE + value.size:]).all()


@pytest.mark.parametrize("case,pass_,algorithm", COMBOS, ids=[param_id(*c) for c in COMBOS])
def test_guarded_out_view(queue, rng, case, pass_, algorithm):
    run_guarded(queue, rng, case, pass_, algorithm)


def test_cases_cover_every_algorithm_of_every_pass():
    """The case list must not silently leave an algorithm/pass untested (a declined case drops it)."""
    covered = {(pass_, algorithm) for _, pass_, algorithm in COMBOS}
    wanted = {(pass_, name) for pass_ in PASSES for name in clconv.algorithms(pass_)}
    assert wanted <= covered, f"not covered: {sorted(wanted - covered)}"
    assert len({case.id for case in CASES}) == len(CASES)


def test_auto_and_unbatched_and_convolution_backward_respect_guards(queue, rng):
    """``auto`` and the unbatched spelling and aten-style convolution_backward with guarded views."""
    case = CASES[0]
    host = {name: random(rng, shape) for name, shape in operand_shapes(case, "forward").items()}
    views = {name: guarded(queue, v.shape, np.nan, inner=v)[1] for name, v in host.items()}
    shape = result_shape(case, "forward")
    big_out, out = guarded(queue, shape, SENTINEL)
    out.set(np.full(shape, np.nan, np.float32))
    got = run(case, "forward", "auto", views, out=out)
    assert_matches(got, reference_result(case, "forward", host), case.geometry.reduction_length)
    check_guards(big_out, math.prod(shape), SENTINEL)

    # unbatched input (C, H, W) as a guarded view of the first image; out is (C_out, H, W)
    x1 = host["x"][:1]
    big_x, x_view = guarded(queue, x1.shape[1:], np.nan, inner=x1[0])
    big_o, o_view = guarded(queue, shape[1:], SENTINEL)
    o_view.set(np.full(shape[1:], np.nan, np.float32))
    got = clconv.conv2d(x_view, views["w"], views["bias"], padding=case.padding, groups=case.groups,
                        algorithm="implicit_gemm", out=o_view)
    g1 = resolve_conv(2, x1.shape, host["w"].shape, None, case.stride, case.padding, 1, case.groups).geometry
    ref = ref_mod.forward(g1, x1, host["w"], host["bias"])[0]
    assert_matches(got, ref, g1.reduction_length)
    check_guards(big_o, ref.size, SENTINEL)

    # convolution_backward: grad_output as a guarded view, all three gradients
    dy = random(rng, shape)
    _, dy_view = guarded(queue, shape, np.nan, inner=dy)
    gi, gw, gb = clconv.convolution_backward(dy_view, views["x"], views["w"], stride=case.stride,
                                             padding=case.padding, groups=case.groups)
    g = case.geometry
    assert_matches(gi, ref_mod.backward_data(g, dy, host["w"]), g.reduction_length)
    assert_matches(gw, ref_mod.backward_weight(g, host["x"], dy), g.batch * g.out_pixels)
    assert_matches(gb, ref_mod.bias_gradient(dy), g.batch * g.out_pixels)
