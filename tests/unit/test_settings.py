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


def test_build_threads_are_a_positive_count_or_the_planners_default(monkeypatch):
    from clconv import planner

    monkeypatch.delenv("CLCONV_BUILD_THREADS", raising=False)
    assert settings.build_threads() is None
    assert planner.build_threads() == planner.BUILD_THREADS
    monkeypatch.setenv("CLCONV_BUILD_THREADS", "3")
    assert settings.build_threads() == planner.build_threads() == 3
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("CLCONV_BUILD_THREADS", bad)
        with pytest.raises(ValueError, match=f"CLCONV_BUILD_THREADS.*{bad!r}"):
            settings.build_threads()


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


@pytest.mark.parametrize("allowed, cpus, max_threads, safe", [
    ({0, 1}, 2, "", True),            # every CPU, PoCL's default of one worker per CPU
    ({0, 1, 2, 3}, 4, "4", True),     # the same count asked for
    ({2, 3}, 4, "", False),           # a container's CPU set: worker 0 pinned to CPU 0 aborts PoCL
    ({0, 1}, 2, "4", False),          # more workers than CPUs: CPU 2 does not exist
    ({0, 1, 2, 3}, 4, "1", False),    # one worker: every such process would pile onto CPU 0
    ({0, 1}, 2, "two", False),
    (set(), 0, "", False),
])
def test_pocl_pinning_only_where_every_worker_has_its_own_allowed_cpu(allowed, cpus, max_threads, safe):
    from clconv.device import pocl_pinning_safe

    assert pocl_pinning_safe(allowed, cpus, max_threads) is safe


def test_pin_pocl_workers_sets_only_an_unset_variable_where_it_is_safe(monkeypatch):
    from clconv import device

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("PoCL pins its workers on Linux only, and clconv asks only there")
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("CLCONV_POCL_AFFINITY", raising=False)
    environ: dict[str, str] = {}
    assert device.pin_pocl_workers(environ) and environ == {"POCL_AFFINITY": "1"}
    environ = {"POCL_AFFINITY": "0"}  # the user's own choice stays
    assert not device.pin_pocl_workers(environ) and environ == {"POCL_AFFINITY": "0"}
    environ = {"POCL_MAX_PTHREAD_COUNT": "2"}
    assert not device.pin_pocl_workers(environ) and "POCL_AFFINITY" not in environ
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1, 2})
    environ = {}
    assert not device.pin_pocl_workers(environ) and environ == {}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setenv("CLCONV_POCL_AFFINITY", "0")  # opted out
    assert not device.pin_pocl_workers(environ) and environ == {}


def test_importing_clconv_pins_pocl_workers_unless_told_not_to():
    """In a fresh process: ``import clconv`` sets POCL_AFFINITY where it may (before any device
    query), and PoCL then runs with it; CLCONV_POCL_AFFINITY=0 leaves it unset."""
    import subprocess
    import sys

    if not hasattr(os, "sched_getaffinity") or os.sched_getaffinity(0) != set(range(os.cpu_count() or 0)):
        pytest.skip("this process may not use every CPU: clconv leaves PoCL unpinned here")
    code = "import os, clconv; print(os.environ.get('POCL_AFFINITY'))"
    env = {k: v for k, v in os.environ.items() if k not in ("POCL_AFFINITY", "POCL_MAX_PTHREAD_COUNT")}
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "1"
    env["CLCONV_POCL_AFFINITY"] = "0"
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "None"
