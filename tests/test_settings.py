"""clconv.settings reads every CLCONV_* variable when it is used: a change mid-process takes effect."""

from __future__ import annotations

import pytest

import clconv
from clconv import caches, planner, settings
from clconv.geometry import ConvGeometry
from clconv.plan import Problem


def test_settings_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CLCONV_TUNE", raising=False)
    assert settings.tuning_enabled()
    for off in ("0", "false", "No"):
        monkeypatch.setenv("CLCONV_TUNE", off)
        assert not settings.tuning_enabled()
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))
    assert settings.cache_dir() == tmp_path
    monkeypatch.setenv("CLCONV_NO_CACHE", "1")
    assert not settings.disk_cache_enabled()
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", "x")
    with pytest.raises(ValueError, match="CLCONV_WORKSPACE_LIMIT"):
        settings.workspace_limit(None)  # type: ignore[arg-type]
    assert "CLCONV_NO_CACHE='1'" in settings.shown()


def test_every_variable_is_documented():
    text = (__import__("pathlib").Path(__file__).resolve().parent.parent / "docs" / "environment.md").read_text()
    missing = [name for name in settings.VARIABLES if name not in text]
    assert not missing, f"docs/environment.md does not describe {missing}"


def test_a_changed_variable_changes_the_plan(monkeypatch, queue):
    """A variable set mid-process reaches the planner's key (it is read on every call)."""
    problem = Problem(ConvGeometry.make(2, 1, 1, 2, 3, (5, 5), (3, 3), pad_begin=(1, 1), pad_end=(1, 1)),
                      "forward", "float32")
    monkeypatch.setenv("CLCONV_TUNE", "0")
    first = planner.plan(problem, queue)  # chooses and stores the choice (a new tuning generation)
    before = caches.sizes()["choices"]
    assert planner.plan(problem, queue) is first
    assert planner.plan(problem, queue) is first
    assert caches.sizes()["choices"] == before + 1, "the stored choice is remembered once, then hit"
    before += 1
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(1 << 30))
    planner.plan(problem, queue)
    assert caches.sizes()["choices"] == before + 1, "a new workspace limit is a new choice"


def test_clear_caches_empties_every_cache(queue):
    problem = Problem(ConvGeometry.make(1, 1, 1, 2, 2, (6,), (3,)), "forward", "float32")
    planner.plan(problem, queue)
    assert caches.sizes()["choices"] and caches.sizes()["programs"]
    clconv.clear_caches()
    assert not any(caches.sizes().values()), caches.sizes()
