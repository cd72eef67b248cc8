"""clconv.environ reads what os.environ holds, at once after any change (a cached call's keys)."""

from __future__ import annotations

import os

from clconv import environ


def test_raw_and_get_follow_os_environ(monkeypatch):
    name = "CLCONV_TEST_ENVIRON_VARIABLE"
    monkeypatch.delenv(name, raising=False)
    assert environ.raw(name) is None and environ.get(name) is None and environ.get(name, "d") == "d"
    monkeypatch.setenv(name, "0")
    assert environ.get(name) == "0" and environ.raw(name) is not None
    first = environ.raw(name)
    os.environ[name] = "1"
    assert environ.get(name) == "1" and environ.raw(name) != first
    del os.environ[name]
    assert environ.raw(name) is None and environ.get(name, "x") == "x"


def test_a_changed_variable_changes_the_plan(monkeypatch, queue):
    """CLCONV_TUNE set mid-process reaches the planner's key (it is read on every call)."""
    from clconv import planner
    from clconv.algorithms import Problem
    from clconv.shapes import parse_descriptor

    problem = Problem(parse_descriptor("mb1ic2ih5oc3oh5kh3ph1").geometry, "forward", "float32")
    monkeypatch.setenv("CLCONV_TUNE", "0")
    planner.plan(problem, queue)
    keys = set(planner._planned)
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(1 << 30))
    planner.plan(problem, queue)
    assert len(set(planner._planned) - keys) == 1, "a new workspace limit is a new plan"
