"""The in-memory caches of clconv, each with one owner module, all dropped by :func:`clear_caches`.

Every cache is a :class:`Cache`: bounded (the oldest entries go first), thread-safe, and
registered here by name.  Keys hold the OpenCL objects themselves (contexts, devices, queues,
programs), never their ``int_ptr``: a key keeps its object alive, so its handle cannot be reused
by a new object while the entry exists.

================= ================= ==============================================================
cache             owner             maps
================= ================= ==============================================================
calls             ops               a call's static part (pass, geometry, dtype, queue, algorithm)
                                    -> its checked problem and result shape
repeats           ops               a call's raw arguments (tensor shapes and dtypes, the other
                                    arguments with their types, the queue) -> the same
choices           planner           (problem, queue, algorithm, settings, tuning generation) -> Runner
runners           planner           (problem, algorithm, config, queue, settings) -> Runner
programs          builder           (context, device, source hash, options) -> built program
resolutions       resolve           a resolver's arguments -> Resolved geometry
layouts           tensors           (shape, dtype) -> an Array's strides and size
device_limits     limits            device -> its probed work-group, local memory and vector limits
templates         templates         (search path, module dir) -> Mako TemplateLookup
profiling_queues  runtime           (context, device) -> a profiling queue (tuning's timings)
scratch_queues    planner           (context, device) -> the queue a CPU's background builds launch
                                    their kernels on once (PoCL compiles at the first launch)
workspaces        runtime           in-order queue -> its kept workspace buffers
queue_orders      runtime           queue -> whether it runs its commands in order
invokers          runtime           a kernel's (argument count, argument types) -> pyopencl's
                                    generated enqueue and set_args functions
pools             tensors           in-order queue -> its memory pool (results, uploads)
event_queues      tensors           event -> the queue it was enqueued on (wait lists)
tuning            tuning            (device key, problem key) -> database entry read or stored
================= ================= ==============================================================
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, TypeVar

V = TypeVar("V")

_registry: "weakref.WeakSet[Cache[Any]]" = weakref.WeakSet()  # every live cache (a test may make its own)


class Cache(Generic[V]):
    """A named, bounded, thread-safe mapping: past ``maxsize`` entries, the oldest stored goes first
    (a lookup is a plain dictionary read: the host overhead of a cached call is a few of them)."""

    def __init__(self, name: str, maxsize: int, on_clear: Callable[[], None] | None = None):
        self.name = name
        self.maxsize = maxsize
        self._data: "OrderedDict[Hashable, V]" = OrderedDict()
        self._lock = threading.Lock()
        self._on_clear = on_clear
        # a lookup is the dictionary's own get (no Python frame): a cached call makes a few
        self.get: Callable[[Hashable], V | None] = self._data.get
        _registry.add(self)

    def put(self, key: Hashable, value: V) -> V:
        with self._lock:
            self._data[key] = value
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
        return value

    def setdefault(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value of ``key``, made (outside the lock) and stored if missing."""
        value = self.get(key)
        if value is None:
            value = make()
            with self._lock:
                existing = self._data.get(key)
                if existing is not None:
                    return existing
            self.put(key, value)
        return value

    def pop(self, key: Hashable) -> V | None:
        with self._lock:
            return self._data.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
        if self._on_clear is not None:
            self._on_clear()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._data)


def clear_caches() -> None:
    """Drop every in-memory cache: built programs, plans, remembered choices, workspaces, the
    in-process copy of the tuning database.  The disk cache stays (``clconv cache clear`` empties
    it); the next call chooses, renders and loads again."""
    for cache in list(_registry):
        cache.clear()


def sizes() -> dict[str, int]:
    """Entries held by the caches of each name (for `clconv info` and tests)."""
    out: dict[str, int] = {}
    for cache in list(_registry):
        out[cache.name] = out.get(cache.name, 0) + len(cache)
    return dict(sorted(out.items()))
