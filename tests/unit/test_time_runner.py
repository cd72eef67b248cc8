"""runtime.time_runner without a device: the runs it times, and tuning's early end for a candidate
slower than give_up_above (planner.TUNE_GIVE_UP_FACTOR times the fastest so far)."""

from __future__ import annotations

from types import SimpleNamespace

import pyopencl as cl

from clconv import runtime


class _SlowRunner:
    """A runner whose every run takes ``seconds`` by its profiling events; counts its runs."""

    def __init__(self, seconds: float):
        self.seconds, self.runs = seconds, 0

    def run(self, queue, operands):
        self.runs += 1
        return [SimpleNamespace(profile=SimpleNamespace(start=0, end=int(self.seconds * 1e9)))]


def _profiling_queue():
    return SimpleNamespace(properties=cl.command_queue_properties.PROFILING_ENABLE)


def test_time_runner_times_every_repeat_after_a_warm_up(monkeypatch):
    monkeypatch.setattr(runtime.cl, "wait_for_events", lambda events: None)
    runner = _SlowRunner(0.002)
    assert runtime.time_runner(runner, _profiling_queue(), {}, 5) == 0.002
    assert runner.runs == 6


def test_a_run_slower_than_give_up_above_ends_the_measuring(monkeypatch):
    monkeypatch.setattr(runtime.cl, "wait_for_events", lambda events: None)
    slow = _SlowRunner(2.0)
    assert runtime.time_runner(slow, _profiling_queue(), {}, 5, give_up_above=0.003) == 2.0
    assert slow.runs == 2  # the warm-up and one timed run
    near = _SlowRunner(0.0029)  # under the bound: every repeat
    runtime.time_runner(near, _profiling_queue(), {}, 5, give_up_above=0.003)
    assert near.runs == 6
