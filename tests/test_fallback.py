"""``auto`` survives a launch the driver refuses: it records the failure and runs another algorithm."""

from __future__ import annotations

import numpy as np

import clconv
from clconv import planner, reference, tuning
from clconv.plan import Problem
from clconv.runtime import LaunchError
from clconv.geometry import resolve_conv

from helpers import random


def test_auto_falls_back_past_a_refused_launch_and_remembers(queue, rng, monkeypatch, tmp_path):
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CLCONV_TUNE", "0")
    tuning.forget_memory()
    x, w = random(rng, (2, 3, 6, 7)), random(rng, (5, 3, 3, 2))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    problem = Problem(g, "forward", "float32")
    first = planner.plan(problem, queue, "auto")

    def refuse(*args, **kwargs):
        raise LaunchError(f"kernel of {first.algorithm}: the driver refused the launch (simulated)")

    monkeypatch.setattr(first, "run", refuse)
    y = clconv.conv2d(x, w, padding=1)
    np.testing.assert_allclose(y, reference.forward(g, x, w), rtol=1e-4, atol=1e-4)

    entry = tuning.lookup(queue.device, problem.key())
    assert entry is not None and entry["failed"], "the refused candidate was not recorded"
    assert entry["failed"][-1].startswith(first.algorithm)
    again = planner.plan(problem, queue, "auto")
    assert again is not first
    np.testing.assert_allclose(clconv.conv2d(x, w, padding=1), reference.forward(g, x, w), rtol=1e-4, atol=1e-4)


def test_named_algorithm_launch_failure_is_raised(queue, rng, monkeypatch):
    x, w = random(rng, (1, 2, 5, 5)), random(rng, (2, 2, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 0, 1, 1).geometry
    runner = planner.plan(Problem(g, "forward", "float32"), queue, "direct")

    def refuse(*args, **kwargs):
        raise LaunchError("simulated refusal")

    monkeypatch.setattr(runner, "run", refuse)
    try:
        clconv.conv2d(x, w, algorithm="direct")
    except LaunchError as exc:
        assert "simulated refusal" in str(exc)
    else:
        raise AssertionError("a named algorithm's launch failure must reach the caller")
