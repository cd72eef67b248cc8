"""``algorithm='auto'``: with tuning on it measures the candidates of a new problem, stores the
winner and runs it; with tuning off (the suite's default) the heuristic's choice serves every kind
of geometry.  Both against the float64 reference.  (auto on every case of the gradients and the
transposed ops: test_matrix.py; past failing candidates: tests/reliability/test_robustness.py.)"""

from __future__ import annotations

import json

import pytest

from clconv import planner, tuning
from clconv.algorithms import REGISTRY
from clconv.builder import stats

from cases import FORWARD_CASES, Case
from helpers import assert_matches, poisoned


def test_auto_with_tuning_measures_and_remembers(monkeypatch, tmp_path, queue, rng):
    monkeypatch.setenv("CLCONV_TUNE", "1")
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(planner, "MAX_CONFIGS_PER_ALGORITHM", 1)  # one build per algorithm: PoCL is slow
    case = Case(2, 1, 3, 4, (6, 5), (2, 3), 1, ((0, 1), (1, 0)), bias=True, note="tuned")  # used nowhere else
    operands = case.operands("conv", rng)
    expected = case.expected("conv", operands)
    problem = case.problem("conv")
    assert tuning.lookup(queue.device, problem.key()) is None

    y = case.call("conv", operands, out=poisoned(queue, expected.shape))
    assert_matches(y, expected, case.reduction_length("conv"))

    entry = tuning.lookup(queue.device, problem.key())
    assert entry is not None and entry["measured"] is True
    assert entry["algorithm"] in REGISTRY
    assert REGISTRY[entry["algorithm"]].decline_reason(problem, queue.device) is None
    assert len(entry["times_ms"]) >= 2, "tuning measured fewer than two candidates"
    stored = json.loads(tuning.database_path(queue.device).read_text())["entries"]
    assert stored[problem.key()]["algorithm"] == entry["algorithm"]

    # the second call uses the remembered choice: no measuring, no build
    builds = stats.source_builds
    y2 = case.call("conv", operands)
    assert stats.source_builds == builds
    assert_matches(y2, expected, case.reduction_length("conv"))


def _by_note(note: str) -> Case:
    (case,) = [c for c in FORWARD_CASES if c.note == note]
    return case


@pytest.mark.parametrize("note", ["1x1-strided-grouped", "depthwise", "grouped-asymmetric"])
def test_auto_without_tuning_serves_every_case_kind(queue, rng, note):
    """auto never fails where an algorithm serves: a pointwise, a depthwise and a 3D case."""
    case = _by_note(note)
    operands = case.operands("conv", rng)
    expected = case.expected("conv", operands)
    y = case.call("conv", operands, out=poisoned(queue, expected.shape, case.dtype))
    assert_matches(y, expected, case.reduction_length("conv"), case.dtype)


def test_tune_measures_a_calls_problem_on_request(monkeypatch, tmp_path, queue, rng):
    """clconv.tune(op, ...) measures the candidates of the pass that call runs, whatever
    CLCONV_TUNE says, stores the fastest, and later auto calls use it; nothing runs on the data."""
    import clconv

    monkeypatch.delenv("CLCONV_TUNE", raising=False)  # the default: the heuristic, one build
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(planner, "MAX_CONFIGS_PER_ALGORITHM", 1)  # one build per algorithm: PoCL is slow
    case = Case(2, 1, 3, 4, (6, 5), (2, 3), 1, 1, note="tune-on-request")
    operands = case.operands("conv", rng)
    problem = case.problem("conv")
    assert tuning.lookup(queue.device, problem.key()) is None
    entry = clconv.tune(clconv.conv2d, operands["x"], operands["w"], **case.conv_args())
    assert entry["measured"] and len(entry["times_ms"]) >= 2
    assert tuning.lookup(queue.device, problem.key())["algorithm"] == entry["algorithm"]
    assert planner.plan(problem, queue).algorithm == entry["algorithm"]
    y = case.call("conv", operands)
    assert_matches(y, case.expected("conv", operands), case.reduction_length("conv"))
    with pytest.raises(ValueError, match="algorithm must be 'auto'"):
        clconv.tune(clconv.conv2d, operands["x"], operands["w"], algorithm="direct")
    with pytest.raises(TypeError, match="not a clconv convolution op"):
        clconv.tune(print, operands["x"])


def test_an_unmeasured_choice_follows_the_heuristic_and_a_measured_one_stands(monkeypatch, tmp_path, queue):
    """Without tuning, the stored choice is the heuristic's: where a later heuristic (another
    clconv, or here a stored entry naming another candidate) puts something else first, the call
    takes the heuristic's first and stores it; a measured entry is used as stored."""
    monkeypatch.delenv("CLCONV_TUNE", raising=False)
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))
    case = Case(2, 1, 3, 4, (6, 5), (3, 3), 1, 1, note="heuristic-follows")
    problem = case.problem("conv")
    options = planner.candidates(problem, queue.device)
    (first, first_config), (other, other_config) = options[0], next(o for o in options if o[0] is not options[0][0])
    stale = {"algorithm": other.name, "config": other_config, "measured": False, "times_ms": {}, "failed": []}
    tuning.store(queue.device, problem.key(), stale)
    runner = planner.plan(problem, queue)
    assert (runner.algorithm, runner.config) == (first.name, first_config)
    assert tuning.lookup(queue.device, problem.key())["algorithm"] == first.name
    # a candidate that failed for this problem is left out: the next one is the heuristic's choice,
    # which a stored entry holding it keeps
    second = next(o for o in options if planner.label(*o) != planner.label(first, first_config))
    failed = {**stale, "algorithm": second[0].name, "config": second[1], "failed": [planner.label(first, first_config)]}
    tuning.store(queue.device, problem.key(), failed)
    assert planner.remembered_choice(problem, queue.device) == second
    # measured: stands, whatever the heuristic says
    tuning.store(queue.device, problem.key(), {**stale, "measured": True, "times_ms": {"x": 1.0}})
    assert planner.remembered_choice(problem, queue.device) == (other, other_config)
