"""Every ``CLCONV_*`` environment variable clconv reads, read here and nowhere else.

Variables are read when they are used, not once at import, so a change mid-process takes effect:
the planner's keys hold the workspace limit and the template path (:func:`fingerprint`), and the
tuning database's in-process copy is per cache directory.  A choice this process has already made
for a problem stays in use until ``clconv.clear_caches()`` (a new cache directory or
``CLCONV_TUNE`` applies to problems not chosen yet).  docs/environment.md describes each.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import pyopencl as cl

# name -> what it does (shown by `clconv info` and kept in step with docs/environment.md)
VARIABLES = {
    "CLCONV_DEVICE": "the default device: 'P:D' (platform and device index) or a name substring",
    "PYOPENCL_CTX": "pyopencl's device selector, used when CLCONV_DEVICE is unset",
    "CLCONV_CACHE_DIR": "where built programs, the tuning database and compiled templates are kept",
    "CLCONV_NO_CACHE": "1: keep built programs and tuning results in memory only",
    "CLCONV_TUNE": "1: algorithm='auto' measures the candidates of a new problem; unset or 0: the heuristic's choice, one build",
    "CLCONV_INTERIM": "1: a new geometry's calls run generic direct kernels while its chosen kernels build in the "
                       "background; 0: they wait for the build; unset: 1 on GPUs, 0 on CPUs",
    "CLCONV_BUILD_THREADS": "threads building in the background (the chosen kernels of geometries whose calls run interim "
                            "kernels); unset: 2",
    "CLCONV_WORKSPACE_LIMIT": "bytes of temporary buffers one call may use",
    "CLCONV_RESULT_POOL": "0: results and numpy uploads are fresh driver allocations instead of a per-queue pool",
    "CLCONV_TEMPLATE_PATH": "directories searched for kernel templates before the built-in ones",
    "CLCONV_POCL_AFFINITY": "0: leave POCL_AFFINITY alone; unset or 1: clconv sets it to 1 at import where PoCL's workers "
                            "would take every CPU (one worker pinned to each)",
}

_TRUE = ("1", "true", "yes")
_FALSE = ("0", "false", "no")


def _environ_reader() -> Callable[..., str]:
    """``os.environ.get``, cheaper for unset variables, which are the usual case and read on every
    call (:func:`fingerprint`, :func:`result_pool_enabled`): the public mapping finds an unset one
    through a raised and caught KeyError, ~1.4 us a read against ~0.1 us for a dict lookup, and
    three such reads were a tenth of a cached call's host time.  CPython's ``os.environ`` keeps
    its contents in ``_data`` (keys and values encoded as ``encodekey``/``decodevalue`` do, and
    updated by every assignment and deletion through ``os.environ``); where that is missing, the
    public lookup."""
    environ = os.environ
    data = getattr(environ, "_data", None)
    encode, decode = getattr(environ, "encodekey", None), getattr(environ, "decodevalue", None)
    if not isinstance(data, dict) or encode is None or decode is None:
        return environ.get

    keys: dict[str, Any] = {}  # name -> its encoded key (encoding costs as much as the lookup)

    def get(name: str, default: str = "") -> str:
        key = keys.get(name)
        if key is None:
            key = keys[name] = encode(name)
        value = data.get(key)
        return default if value is None else decode(value)
    return get


_get = _environ_reader()


def device_selector() -> tuple[str, str] | None:
    """``(variable, selector)`` of the first device variable set, else None."""
    for name in ("CLCONV_DEVICE", "PYOPENCL_CTX"):
        value = _get(name)
        if value:
            return name, value
    return None


def compiler_output_shown() -> bool:
    """pyopencl's ``PYOPENCL_COMPILER_OUTPUT=1``: every build log is shown as a CompilerWarning
    (else clconv keeps quiet about the logs of builds that succeeded)."""
    return _get("PYOPENCL_COMPILER_OUTPUT").lower() in _TRUE


def cache_dir() -> Path:
    configured = _get("CLCONV_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("clconv", appauthor=False))


def disk_cache_enabled() -> bool:
    return _get("CLCONV_NO_CACHE").lower() not in _TRUE


def tuning_enabled() -> bool:
    """Whether ``algorithm='auto'`` measures the candidates of a problem not in the tuning database
    (``CLCONV_TUNE=1``).  Off by default, as PyTorch's ``cudnn.benchmark``: a new geometry's first
    call builds the heuristic's choice only; ``clconv.tune(...)`` and ``clconv tune`` measure on
    request, and a measured entry, once stored, is always used."""
    return _get("CLCONV_TUNE", "0").lower() in _TRUE


def interim() -> bool | None:
    """``CLCONV_INTERIM`` as a choice: True (1), False (0), or None when unset (the device decides:
    interim.enabled).  Any other value is a ValueError naming the variable."""
    raw = _get("CLCONV_INTERIM")
    if not raw:
        return None
    value = raw.lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise ValueError(f"CLCONV_INTERIM must be 1, true or yes, or 0, false or no; got {raw!r}")


def build_threads() -> int | None:
    """``CLCONV_BUILD_THREADS`` as a count of threads (a positive integer), or None when unset (the
    planner decides: planner.build_threads).  Any other value is a ValueError naming the variable."""
    raw = _get("CLCONV_BUILD_THREADS")
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"CLCONV_BUILD_THREADS must be a positive whole number of threads; got {raw!r}")
    return value


def result_pool_enabled() -> bool:
    """Results and uploads come from a memory pool per queue unless ``CLCONV_RESULT_POOL=0``."""
    return _get("CLCONV_RESULT_POOL", "1").lower() not in _FALSE


def pocl_pinning_enabled() -> bool:
    """Whether clconv may set PoCL's ``POCL_AFFINITY=1`` at import (``CLCONV_POCL_AFFINITY=0``
    says no; a ``POCL_AFFINITY`` already set is never changed)."""
    return _get("CLCONV_POCL_AFFINITY", "1").lower() not in _FALSE


def template_path() -> str:
    """``CLCONV_TEMPLATE_PATH`` as set (``os.pathsep``-separated directories), or ''."""
    return _get("CLCONV_TEMPLATE_PATH")


def template_dirs() -> list[Path]:
    return [Path(p).expanduser() for p in template_path().split(os.pathsep) if p]


def workspace_limit(device: cl.Device) -> int:
    """Bytes of temporary buffers one call may use: ``CLCONV_WORKSPACE_LIMIT``, else a quarter of
    the device's memory, at most one allocation and 2 GiB."""
    raw = _get("CLCONV_WORKSPACE_LIMIT")
    if raw:
        try:
            return int(float(raw))
        except ValueError:
            raise ValueError(f"CLCONV_WORKSPACE_LIMIT must be a number of bytes, got {raw!r}") from None
    return int(min(device.global_mem_size // 4, device.max_mem_alloc_size, 2**31))


def fingerprint() -> tuple[str, str]:
    """The variables a prepared runner depends on, read on every call as part of the planner's
    keys: the workspace limit (declines, im2col's chunks) and the template path (the sources).
    ``CLCONV_TUNE`` is not among them: it decides only how a problem not yet in the tuning
    database is chosen, and the planner reads it then."""
    return (_get("CLCONV_WORKSPACE_LIMIT", ""), _get("CLCONV_TEMPLATE_PATH", ""))


def shown() -> list[str]:
    """``NAME='value'`` for every variable of :data:`VARIABLES` that is set."""
    return [f"{name}={os.environ[name]!r}" for name in VARIABLES if name in os.environ]
