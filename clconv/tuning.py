"""The persistent tuning database: which (algorithm, tile config) won for a problem on a device.

One JSON file per device identity under ``<cache dir>/tuning-v1/``.  Writers take an exclusive
lock, re-read, merge and replace the file atomically, so concurrent processes never lose each
other's entries or leave half a file; an unreadable file is logged, set aside and started afresh.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

import pyopencl as cl

from . import settings
from .builder import atomic_write, cache_dir, disk_cache_enabled
from .caches import Cache
from .device import device_identity

log = logging.getLogger("clconv.tuning")

TUNING_FORMAT_VERSION = 1
_generation = 0  # bumped by every store and forget: the planner's memo of choices keys on it
_lock = threading.Lock()


def _bump() -> None:
    global _generation
    with _lock:
        _generation += 1


# the in-process copy of the database: entries read or stored in this process
_memory: Cache[dict] = Cache("tuning", maxsize=8192, on_clear=_bump)


def generation() -> int:
    return _generation


def tuning_enabled() -> bool:
    """Whether ``algorithm='auto'`` measures new problems (``CLCONV_TUNE=1``; off by default)."""
    return settings.tuning_enabled()


def device_key(device: cl.Device) -> str:
    return hashlib.sha256("\0".join(device_identity(device)).encode()).hexdigest()[:24]


def database_path(device: cl.Device) -> Path:
    return cache_dir() / f"tuning-v{TUNING_FORMAT_VERSION}" / f"{device_key(device)}.json"


def _read(path: Path) -> dict:
    try:
        raw = path.read_text()
    except (FileNotFoundError, NotADirectoryError):  # not written yet, or no cache dir can exist there
        return {}
    except OSError as exc:
        log.warning("clconv: cannot read tuning database %s: %s", path, exc)
        return {}
    try:
        data = json.loads(raw)
        if data.get("version") != TUNING_FORMAT_VERSION or not isinstance(data.get("entries"), dict):
            raise ValueError("wrong version or layout")
        return data["entries"]
    except (ValueError, AttributeError) as exc:
        log.warning("clconv: ignoring corrupt tuning database %s (%s); it will be rewritten", path, exc)
        warnings.warn(f"clconv: ignoring corrupt tuning database {path} ({exc}); it will be rewritten",
                      RuntimeWarning, stacklevel=3)
        return {}


@contextmanager
def _file_lock(path: Path):
    import fcntl

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_suffix(".lock"), "a")
    except OSError:
        yield False
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield True
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _memory_key(device: cl.Device, problem_key: str) -> tuple:
    """The in-process copy is per database: a changed CLCONV_CACHE_DIR (or CLCONV_NO_CACHE) reads
    the database it names, not entries remembered from another."""
    where = str(cache_dir()) if disk_cache_enabled() else None
    return (where, device_key(device), problem_key)


def lookup(device: cl.Device, problem_key: str) -> dict | None:
    key = _memory_key(device, problem_key)
    entry = _memory.get(key)
    if entry is None and disk_cache_enabled():
        entry = _read(database_path(device)).get(problem_key)
        if entry is not None and not _valid_entry(entry):
            log.warning("clconv: ignoring malformed tuning entry %r for %s in %s; it will be re-chosen",
                        entry, problem_key, database_path(device))
            entry = None
        if entry is not None:
            _memory.put(key, entry)
    return entry


def _valid_entry(entry) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("algorithm"), str) and isinstance(entry.get("config"), dict)


def store(device: cl.Device, problem_key: str, entry: dict) -> None:
    _memory.put(_memory_key(device, problem_key), entry)
    _bump()
    if not disk_cache_enabled():
        return
    path = database_path(device)
    with _file_lock(path):
        entries = _read(path)
        entries[problem_key] = entry
        atomic_write(path, json.dumps({"version": TUNING_FORMAT_VERSION, "entries": entries}, indent=1).encode())


def forget_memory() -> None:
    """Drop the in-process copy (tests use this to see what a new process would see)."""
    _memory.clear()  # bumps the generation
