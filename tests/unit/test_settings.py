"""clconv.settings reads every CLCONV_* variable when it is used: a change mid-process takes effect.
(That a changed variable reaches the planner's memo of choices: tests/reliability/test_caches.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clconv import settings


def test_settings_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CLCONV_TUNE", raising=False)
    assert not settings.tuning_enabled(), "measuring is opt-in, as cudnn.benchmark"
    for on in ("1", "true", "Yes"):
        monkeypatch.setenv("CLCONV_TUNE", on)
        assert settings.tuning_enabled()
    for off in ("0", "false", "No", ""):
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
    text = (Path(__file__).resolve().parents[2] / "docs" / "environment.md").read_text()
    missing = [name for name in settings.VARIABLES if name not in text]
    assert not missing, f"docs/environment.md does not describe {missing}"


def test_the_environment_is_read_as_os_environ_has_it(monkeypatch):
    """settings reads os.environ's contents without its KeyError path (a cached call's host time):
    every way of changing os.environ shows at the next read, and the values decode as os.environ's."""
    name = "CLCONV_TEMPLATE_PATH"
    monkeypatch.delenv(name, raising=False)
    assert settings.fingerprint()[1] == "" and settings.template_path() == ""
    monkeypatch.setenv(name, "/tmp/é x")  # non-ASCII: decoded as os.environ decodes it
    assert settings.fingerprint()[1] == "/tmp/é x" == settings.template_path()
    os.environ.update({name: "/a"})
    assert settings.template_path() == "/a"
    os.environ.pop(name)
    assert settings.template_path() == ""
    monkeypatch.setenv("CLCONV_RESULT_POOL", "0")
    assert not settings.result_pool_enabled()
    monkeypatch.delenv("CLCONV_RESULT_POOL")
    assert settings.result_pool_enabled()
