"""Program builder: rendered source + build options -> built ``pyopencl.Program``, cached.

Two cache layers:

* in memory, per context: ``(device, source hash, options)`` -> built program;
* on disk, in ``CLCONV_CACHE_DIR`` (default: the platform's user cache dir), one file per
  program, keyed by a hash of the cache format version, the rendered source, the build options
  and the device identity.  pyopencl's own binary cache is skipped on PoCL and NVIDIA (their
  drivers cache), so this layer is what makes a new process fast; it is testable through
  :data:`stats`.  Beside it, an index from what a source is rendered from (template, entry
  points, parameters, the template files and clconv's modules: ``RenderedSource.digest``) to that
  key, so a new process loads a program without rendering its template
  (:meth:`ProgramCache.get_rendered`).

Writes go to a temporary file renamed into place, so concurrent processes never see half an
entry; an entry that fails its checksum or its build is deleted, logged, and rebuilt.
``CLCONV_NO_CACHE=1`` turns the disk layer off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, cast

import pyopencl as cl

from . import settings
from .caches import Cache
from .device import device_identity, is_gpu
from .templates import RenderedSource

log = logging.getLogger("clconv.builder")

CACHE_FORMAT_VERSION = 1
_MAGIC = b"CLCONVB1"
_HEADER = struct.Struct("<8sI32sQ")  # magic, format version, sha256 of payload, payload length


@dataclass
class CacheStats:
    """Counters a test (or a curious user) can read to see which layer served a program."""

    memory_hits: int = 0
    disk_hits: int = 0
    source_builds: int = 0
    corrupt_entries: int = 0
    write_failures: int = 0

    def count(self, name: str) -> None:
        """One more of counter ``name``: tuning builds its candidates on several threads, and
        ``+=`` on an attribute can lose an update between them."""
        with _stats_lock:
            setattr(self, name, getattr(self, name) + 1)

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


_stats_lock = threading.Lock()


stats = CacheStats()


class NotCached(LookupError):
    """A program would have to be compiled, and the caller asked for cached ones only
    (:func:`cached_only`).  Not a build failure: the planner builds it later, on another thread."""


_cached_only: ContextVar[bool] = ContextVar("clconv_cached_only", default=False)


@contextmanager
def cached_only():
    """Within this block (this thread), a program that neither memory nor the disk cache holds
    raises :class:`NotCached` instead of being compiled: how the planner learns, at the cost of a
    cache lookup, whether a plan is ready to run now (planner.run's interim kernels)."""
    token = _cached_only.set(True)
    try:
        yield
    finally:
        _cached_only.reset(token)


class BuildError(RuntimeError):
    """The OpenCL compiler rejected a rendered kernel."""

    def __init__(self, message: str, log_text: str, options: str, source_path: Path | None):
        super().__init__(message)
        self.log = log_text
        self.options = options
        self.source_path = source_path


def cache_dir() -> Path:
    """Where the disk caches live (``CLCONV_CACHE_DIR``, else the platform's user cache dir)."""
    return settings.cache_dir()


def disk_cache_enabled() -> bool:
    return settings.disk_cache_enabled()


def _program_dir() -> Path:
    return cache_dir() / f"programs-v{CACHE_FORMAT_VERSION}"


def _binary_path(key: str) -> Path:
    return _program_dir() / key[:2] / f"{key}.bin"


def _index_dir() -> Path:
    return _program_dir() / "index"


def _read_index(path: Path) -> str | None:
    """The program key an index entry holds; None for a missing or malformed entry."""
    try:
        key = path.read_bytes().decode("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    return key if len(key) == 64 and all(c in "0123456789abcdef" for c in key) else None


def cache_key(source: str, options: str, device: cl.Device) -> str:
    digest = hashlib.sha256()
    for part in (str(CACHE_FORMAT_VERSION), source, options, *device_identity(device)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


_warned_unwritable = False


def atomic_write(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``; False if not writable.

    An unwritable cache degrades to memory-only caching with one warning per process.
    """
    global _warned_unwritable
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return True
    except OSError as exc:
        stats.count("write_failures")
        if not _warned_unwritable:
            _warned_unwritable = True
            warnings.warn(
                f"clconv cache directory {path.parent} is not writable ({exc}); caching in memory only",
                RuntimeWarning,
                stacklevel=3,
            )
        return False


def _pack(binary: bytes) -> bytes:
    return _HEADER.pack(_MAGIC, CACHE_FORMAT_VERSION, hashlib.sha256(binary).digest(), len(binary)) + binary


def _unpack(blob: bytes) -> bytes | None:
    if len(blob) < _HEADER.size:
        return None
    magic, version, digest, length = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size :]
    if magic != _MAGIC or version != CACHE_FORMAT_VERSION or length != len(payload):
        return None
    if hashlib.sha256(payload).digest() != digest:
        return None
    return payload


class ProgramCache:
    """Builds programs once per (context, device, source, options) and remembers them."""

    def __init__(self, name: str = "programs", maxsize: int = 512) -> None:
        # the key holds the context and device themselves: their handles cannot be reused meanwhile
        self._memory: Cache[cl.Program] = Cache(name, maxsize)

    def get(self, context: cl.Context, device: cl.Device, source: str, options: str = "", label: str = "kernel") -> cl.Program:
        return self._get(context, device, source, options, cache_key(source, options, device), label)

    def get_rendered(self, context: cl.Context, device: cl.Device, source: RenderedSource, options: str = "",
                     label: str = "kernel") -> cl.Program:
        """The program of ``source``, found without rendering it where it was built before.

        The disk cache keys programs by their rendered text; an index beside it maps a source's
        :attr:`~clconv.templates.RenderedSource.digest` (what the text is rendered from), the
        options and the device to that key.  A hit loads the binary straight away; a miss, an
        index entry whose binary is gone or refused, or a source without a digest renders and
        goes through :meth:`get`'s path, which keys and stores the program by its text as always."""
        digest = source.digest if disk_cache_enabled() else None
        index, indexed = None, None
        if digest is not None:
            entry = cache_key(f"rendered {digest}", options, device)
            index = _index_dir() / entry[:2] / entry
            indexed = _read_index(index)
            if indexed is not None:
                program = self._cached(context, device, options, indexed)
                if program is not None:
                    return program
        key = cache_key(source.text, options, device)
        program = self._get(context, device, source.text, options, key, label)
        if index is not None and indexed != key and _binary_path(key).exists():
            atomic_write(index, key.encode())
        return program

    def _get(self, context, device, source, options, key, label) -> cl.Program:
        """The program of ``key``: from memory, from the disk, or ``source`` built and stored."""
        program = self._cached(context, device, options, key)
        if program is None:
            if _cached_only.get():
                raise NotCached(f"{label} is not built yet")
            program = self._build_and_store(context, device, source, options, key, label)
            self._memory.put((context, device, key), program)
        return program

    def _cached(self, context, device, options, key) -> cl.Program | None:
        """The program of ``key`` from memory or from the disk (then kept in memory); None if neither has it."""
        program = self._memory.get((context, device, key))
        if program is not None:
            stats.count("memory_hits")
            return program
        path = _binary_path(key)
        if disk_cache_enabled() and path.exists():
            program = self._load(context, device, options, path)
            if program is not None:
                stats.count("disk_hits")
                self._memory.put((context, device, key), program)
                return program
        return None

    def _build_and_store(self, context, device, source, options, key, label) -> cl.Program:
        program = self._build(context, device, source, options, key, label)
        if disk_cache_enabled():
            binaries = cast("list[bytes]", program.get_info(cl.program_info.BINARIES))
            if binaries and binaries[0]:
                atomic_write(_binary_path(key), _pack(bytes(binaries[0])))
        return program

    def _load(self, context, device, options, path: Path) -> cl.Program | None:
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        binary = _unpack(blob)
        if binary is not None:
            try:
                with quiet_compiler():
                    return cl.Program(context, [device], [binary]).build(options=options)
            except cl.Error as exc:
                reason = f"the driver refused it ({exc})"
        else:
            reason = "it is truncated, corrupt or of another format version"
        stats.count("corrupt_entries")
        log.warning("clconv: discarding program cache entry %s: %s; rebuilding", path, reason)
        warnings.warn(f"clconv: discarded a bad program cache entry {path.name}: {reason}", RuntimeWarning, stacklevel=4)
        try:
            path.unlink()
        except OSError:
            pass
        return None

    def _build(self, context, device, source, options, key, label) -> cl.Program:
        stats.count("source_builds")
        try:
            with quiet_compiler():
                return cl.Program(context, source).build(options=options, devices=[device])
        except cl.RuntimeError as exc:
            saved = _save_failed_source(key, source)
            log_text = _build_log(exc, device)
            raise BuildError(
                f"OpenCL build of {label} failed on {device.name!r} with options {options!r}; "
                f"rendered source saved at {saved}\n--- build log ---\n{log_text}",
                log_text,
                options,
                saved,
            ) from exc


@contextmanager
def quiet_compiler():
    """No pyopencl CompilerWarning for a build that succeeded with a log: Intel's CPU runtime logs
    every build ("Compilation started ... Done."), which would warn on every new kernel.  A failed
    build's log is in the BuildError; PYOPENCL_COMPILER_OUTPUT=1 still shows every log.

    Tuning builds its candidates on several threads, and the warning filters are one list for the
    whole process: ``warnings.catch_warnings`` in each thread would restore
    the list under another thread's build.  So the first build in installs one filter, and the
    last one out removes it."""
    global _quiet_builds, _quiet_added
    if settings.compiler_output_shown():
        yield
        return
    with _quiet_lock:
        if _quiet_builds == 0:
            _quiet_added = _QUIET not in warnings.filters  # the caller's own identical filter stays theirs
            if _quiet_added:
                warnings.filterwarnings("ignore", category=cl.CompilerWarning)
        _quiet_builds += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_builds -= 1
            if _quiet_builds == 0 and _quiet_added:
                _remove_filter(_QUIET)


_QUIET = ("ignore", None, cl.CompilerWarning, None, 0)  # the entry filterwarnings makes of it
_quiet_lock = threading.Lock()
_quiet_builds = 0  # builds inside quiet_compiler() now, on any thread
_quiet_added = False  # whether the first of them added the filter


def _remove_filter(entry: tuple) -> None:
    """Take out the filter ``warnings.filterwarnings`` added as ``entry`` (the first such one)."""
    try:
        warnings.filters.remove(entry)  # type: ignore[attr-defined]  # a list at run time
    except ValueError:
        return  # a catch_warnings() elsewhere already restored a list without it
    warnings._filters_mutated()  # type: ignore[attr-defined]  # as filterwarnings does: drop cached decisions


def _build_log(exc: Exception, device: cl.Device) -> str:
    text = str(exc)
    return text.strip() or "(the driver gave no build log)"


def _save_failed_source(key: str, source: str) -> Path | None:
    for base in (cache_dir() / "failed", Path(tempfile.gettempdir()) / "clconv-failed"):
        path = base / f"{key}.cl"
        if atomic_write(path, source.encode()):
            return path
    return None


program_cache = ProgramCache()


def get_kernel(program: cl.Program, name: str) -> cl.Kernel:
    """One kernel object per (program, name), kept on the program object: pyopencl makes a new one
    on every attribute access, and launches share one kernel's declared argument types."""
    kernels = getattr(program, "_clconv_kernels", None)
    if kernels is None:
        kernels = program._clconv_kernels = {}  # type: ignore[attr-defined]
    kernel = kernels.get(name)
    if kernel is None:
        kernel = kernels[name] = cl.Kernel(program, name)
    return kernel


def build_program(queue: cl.CommandQueue, source: str, options: str = "", label: str = "kernel") -> cl.Program:
    """The cached program for ``source`` on ``queue``'s device."""
    return program_cache.get(queue.context, queue.device, source, options, label)


def build_kernels(queue: cl.CommandQueue, sources: Sequence[RenderedSource], label: str) -> list[dict[str, cl.Kernel]]:
    """Each rendered source's program built (or found in the cache) for ``queue``'s device, as
    ``{entry point: kernel}``."""
    def kernels(source: RenderedSource) -> dict[str, cl.Kernel]:
        program = program_cache.get_rendered(queue.context, queue.device, source, label=f"{label} [{source.template}]")
        return {entry: get_kernel(program, entry) for entry in source.entries}

    # On a GPU a plan's programs build on threads, side by side (the driver's compiler releases the
    # GIL): a new geometry's Winograd plan waited for its transforms' and its GEMM's builds, 0.61 s
    # of NVIDIA's compiler one after the other; side by side its first call took 0.50 s, 0.90 s of
    # build time overlapping (docs/performance.md).  Elsewhere one after another: PoCL compiles a
    # kernel's work-group function at its first launch, not here, and Oclgrind's simulator (which
    # reports every device type, GPU and CPU among them) crashed (SIGSEGV) building a plan's two
    # programs on two threads.
    # (Loading from the caches alone, cached_only, stays on this thread: the flag is this thread's.)
    if (len(sources) > 1 and is_gpu(queue.device) and not queue.device.type & cl.device_type.CPU
            and not _cached_only.get()):
        with ThreadPoolExecutor(max_workers=len(sources)) as pool:
            return list(pool.map(kernels, sources))
    return [kernels(source) for source in sources]
