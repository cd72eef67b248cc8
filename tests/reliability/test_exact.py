"""Exact arithmetic and determinism (benchdnn's trick), over the reliability set (tests/cases.py ``COVER``).

Inputs are small integers, so every product and every partial sum is an integer far below 2**24:
float32 computes them exactly in any order, and the result must equal the float64 reference *bit
for bit* -- a wrong index, a dropped tap or a doubled term cannot hide inside a rounding tolerance.

Then, with ordinary random floats (where summation order shows in the last bits), every algorithm
that declares itself deterministic must give identical bits on two runs.
"""

from __future__ import annotations

import numpy as np
import pytest

import clconv
from clconv.algorithms import REGISTRY

from cases import COVER, every_pass_algorithm, param_id
from helpers import poisoned

DEVICE = clconv.default_queue().device
COMBOS = every_pass_algorithm(DEVICE, COVER)
DETERMINISTIC = [c for c in COMBOS if REGISTRY[c[2]].deterministic]


def small_integers(rng, shape):
    """Integers in [-3, 3] as float32, with no all-zero tensor (zeros would hide unwritten output)."""
    while True:
        value = rng.integers(-3, 4, size=shape).astype(np.float32)
        if np.count_nonzero(value) > value.size // 2:
            return value


@pytest.mark.parametrize("case,pass_,algorithm", COMBOS, ids=[param_id(*c) for c in COMBOS])
def test_small_integers_give_bit_exact_results(queue, rng, case, pass_, algorithm):
    operands = case.operands(pass_, rng, small_integers)
    ref = case.reference(pass_, operands)
    assert np.array_equal(ref, np.round(ref)) and np.abs(ref).max() < 2**24, "reference left the exact range"
    expected = ref.astype(np.float32)
    for attempt in range(2):
        out = poisoned(queue, case.result_shape(pass_))
        got = case.run(pass_, operands, algorithm=algorithm, out=out).get()
        wrong = np.flatnonzero(got != expected)  # NaN (unwritten) compares unequal too
        assert wrong.size == 0, (
            f"run {attempt}: {wrong.size} of {got.size} elements differ from the exact result, first at flat "
            f"index {wrong[0]}: got {got.ravel()[wrong[0]]}, expected {expected.ravel()[wrong[0]]}"
        )


@pytest.mark.parametrize("case,pass_,algorithm", DETERMINISTIC, ids=[param_id(*c) for c in DETERMINISTIC])
def test_deterministic_algorithms_repeat_bit_for_bit(queue, rng, case, pass_, algorithm):
    operands = case.operands(pass_, rng)
    results = []
    for _ in range(2):
        out = poisoned(queue, case.result_shape(pass_))
        results.append(case.run(pass_, operands, algorithm=algorithm, out=out).get())
    assert np.isfinite(results[0]).all()
    first, second = (r.view(np.uint32) for r in results)
    differ = np.count_nonzero(first != second)
    assert differ == 0, f"{differ} elements differ in their bits between two identical runs"


def test_exact_check_can_fail(queue, rng):
    """The bit-exact comparison notices a one-ulp change (so the test above can fail)."""
    case, pass_, algorithm = COMBOS[0]
    operands = case.operands(pass_, rng, small_integers)
    got = case.run(pass_, operands, algorithm=algorithm)
    expected = case.reference(pass_, operands).astype(np.float32)
    assert np.array_equal(got, expected)
    nudged = got.copy()
    nudged.ravel()[0] = np.nextafter(nudged.ravel()[0], np.float32(np.inf))
    assert not np.array_equal(nudged, expected)
