"""Tensor arguments: type and dtype checks, the queue they run on, and moving them to the device.

numpy in -> numpy out (copied to and from the device); ``pyopencl.array.Array`` in -> Array out on
the same queue, with no host round trip.  Everything here runs before any allocation or build.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

from . import settings
from .caches import Cache
from .device import default_queue, supports_fp64
from .dtypes import is_storage
from .runtime import Operand, in_order



_PLAIN_DTYPES = frozenset([np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)])


def usual_array(value: Any) -> bool:
    """Whether ``value`` is the usual call's tensor, which every check of :func:`check_tensor`
    passes: a C-contiguous pyopencl Array of float32, float16 or float64 at an offset of whole items."""
    return (type(value) is cl_array.Array and value.dtype in _PLAIN_DTYPES and _c_contiguous(value)
            and not value.offset % value.dtype.itemsize)


def check_tensor(name: str, value: Any, optional: bool = False):
    """Refuse anything but a float32/float64/float16/bfloat16 numpy array or pyopencl Array."""
    if usual_array(value):
        return value
    if value is None:
        if optional:
            return None
        raise TypeError(f"{name} must be a numpy.ndarray or pyopencl.array.Array, got None")
    if not isinstance(value, (np.ndarray, cl_array.Array)):
        raise TypeError(
            f"{name} must be a numpy.ndarray or pyopencl.array.Array, got {type(value).__name__}"
        )
    if not is_storage(value.dtype):
        raise TypeError(f"{name} must have dtype float32, float64, float16 or bfloat16 (ml_dtypes), got {value.dtype}")
    if isinstance(value, cl_array.Array):
        if not value.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous pyopencl Array (strides {value.strides} given); "
                             "make a contiguous copy first")
        if value.offset % value.dtype.itemsize:
            raise ValueError(f"{name} starts at byte offset {value.offset}, not a multiple of its item size")
    return value


def _c_contiguous(value: cl_array.Array) -> bool:
    """``value.flags.c_contiguous``, without pyopencl's flags object where the Array has the
    strides of one that :func:`empty_array` made for its shape and dtype (a previous call's result,
    as a network's next layer takes it): building the flags of a new Array cost ~5 us on PoCL's
    host, a sixth of a cached call's host time."""
    layout = _layouts.get((value.shape, value.dtype))
    if layout is not None and value.strides == layout[0]:
        return True
    return bool(value.flags.c_contiguous)


def common_dtype(tensors: dict[str, Any]) -> np.dtype:
    dtype = None
    first = None
    for name, value in tensors.items():
        if value is None:
            continue
        if dtype is None:
            dtype, first = value.dtype, name
        elif value.dtype != dtype:
            raise TypeError(f"{name} has dtype {value.dtype} but {first} has dtype {dtype}; they must match")
    if dtype is None:
        raise TypeError("no tensor argument given")
    return dtype


def pick_queue(tensors: dict[str, Any], queue: cl.CommandQueue | None) -> tuple[cl.CommandQueue, bool]:
    """The queue to run on and whether the result should be a device Array.

    ``queue=`` wins; else the first Array's queue; else the default queue.  Every Array must live
    in that queue's context.
    """
    if queue is not None and not isinstance(queue, cl.CommandQueue):
        raise TypeError(f"queue must be a pyopencl.CommandQueue or None, got {type(queue).__name__}")
    arrays = [(name, v) for name, v in tensors.items() if isinstance(v, cl_array.Array)]
    if queue is None:
        for _, value in arrays:
            if value.queue is not None:
                queue = value.queue
                break
    if queue is None:
        queue = default_queue()
    context = None
    for name, value in arrays:
        if value.queue is queue:
            continue  # an Array of this very queue lives in its context
        if context is None:
            context = queue.context  # a driver query and a new wrapper object on every access: once
        if value.context != context:
            raise TypeError(f"{name} lives in another OpenCL context than the queue the call runs on")
    return queue, bool(arrays)


class Bound(NamedTuple):
    """A call's tensors as its kernels take them (:func:`bind`)."""

    operands: dict[str, Operand]  # role -> device buffer and element offset
    allocator: Any  # where the result's memory comes from
    wait_for: list[cl.Event] | None  # what the first launch waits for
    uploads: list[cl_array.Array]  # the numpy tensors' device copies: keep them until the launches are enqueued


def bind(tensors: dict[str, Any], queue: cl.CommandQueue, out: cl_array.Array | None = None) -> Bound:
    """A call's tensors (role -> numpy array or device Array; ``out``, if given, is waited for too)
    as operands on ``queue``, in one pass (every call's path: three passes cost ~1.5 us more):

    * numpy tensors are uploaded into the queue's pool (:func:`to_operand`);
    * the result's allocator is that of the first device Array that has one (pyopencl's own
      convention for an operation's result), else the queue's pool (:func:`queue_pool`), else None
      (a driver allocation per result);
    * the wait list holds the device Arrays' events, except, on an in-order queue, the queue's own,
      which it runs in order anyway.  On NVIDIA's driver every event in a wait list costs host time
      per enqueue (a data gradient's stream: 64 -> 50 us per call without its inputs'
      long-finished upload events), and a weight keeps its upload event for as long as it lives."""
    operands, uploads, events = {}, [], []
    allocator = None
    for role, value in tensors.items():
        if not isinstance(value, cl_array.Array):
            operands[role], upload = to_operand(value, queue)
            uploads.append(upload)
            continue
        operands[role] = Operand(value.base_data, value.offset // value.dtype.itemsize)
        if allocator is None:
            allocator = value.allocator
        events += value.events
    if out is not None:
        events += out.events
    return bound(queue, operands, allocator, events, uploads)


def bound(queue: cl.CommandQueue, operands: dict[str, Operand], allocator: Any, events: list[cl.Event],
          uploads: list[cl_array.Array]) -> Bound:
    """The :class:`Bound` of operands already made: the result's allocator (the queue's pool where
    no Array had one) and the wait list, less, on an in-order queue, the queue's own events.  Shared
    by :func:`bind` and the op layer's repeated calls, which make the operands as they check the tensors."""
    if events and in_order(queue):
        events = [event for event in events if _queue_of(event) != queue]
    return Bound(operands, allocator if allocator is not None else queue_pool(queue), events or None, uploads)


def _queue_of(event: cl.Event) -> cl.CommandQueue:
    """The queue ``event`` was enqueued on.  Asking the driver makes a new queue object each time
    (~0.6 us on PoCL's host); a weight's upload event is asked about on every call it takes part in."""
    queue = _event_queues.get(event)
    if queue is None:
        queue = _event_queues.put(event, event.command_queue)
    return queue


# event -> its queue (the key holds the event, so its handle is not reused while the entry lives)
_event_queues: Cache[cl.CommandQueue] = Cache("event_queues", maxsize=64)


def check_device_dtype(dtype: np.dtype, queue: cl.CommandQueue) -> None:
    if dtype == np.float64 and not supports_fp64(queue.device):
        raise TypeError(f"float64 tensors need cl_khr_fp64, which device {queue.device.name!r} lacks; use float32")


def check_allocation(name: str, shape: tuple[int, ...], dtype: np.dtype, queue: cl.CommandQueue) -> None:
    nbytes = math.prod(shape) * dtype.itemsize
    limit = queue.device.max_mem_alloc_size
    if nbytes > limit:
        raise ValueError(
            f"{name} of shape {shape} needs {nbytes} bytes, more than one allocation may take on "
            f"{queue.device.name!r} ({limit} bytes)"
        )


def to_operand(value, queue: cl.CommandQueue) -> tuple[Operand, Any]:
    """The device buffer and element offset of a tensor (uploading numpy into the queue's pool);
    also what keeps it alive."""
    if isinstance(value, cl_array.Array):
        return Operand(value.base_data, value.offset // value.dtype.itemsize), value
    device_array = cl_array.to_device(queue, np.ascontiguousarray(value), allocator=queue_pool(queue))
    return Operand(device_array.base_data, device_array.offset // device_array.dtype.itemsize), device_array


_layouts: Cache[tuple[tuple[int, ...], int]] = Cache("layouts", maxsize=4096)  # (shape, dtype) -> (strides, size)


def queue_pool(queue: cl.CommandQueue) -> cl_tools.MemoryPool | None:
    """The memory pool of an in-order ``queue``: results and numpy uploads come from it, so that a
    stream of calls makes no driver allocation per call (on NVIDIA's driver each one costs tens of
    microseconds and stalls the queue).  A buffer goes back to the pool when its Array is dropped
    and is handed out again for later work on the same queue, which runs after anything already
    enqueued there: safe on one in-order queue.  (A result used on *another* queue must stay
    referenced until that work is done, as with any pyopencl pool.)  None for out-of-order queues
    and when ``CLCONV_RESULT_POOL=0``.  :func:`empty_cache` returns the held memory to the driver."""
    pool = _pools.get(queue)
    if pool is None:
        pool = _pools.setdefault(
            queue, lambda: cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue)) if in_order(queue) else False)
    return pool if pool is not False and settings.result_pool_enabled() else None


_pools: Cache[Any] = Cache("pools", maxsize=8)  # in-order queue -> its MemoryPool (False: none)


def empty_cache() -> None:
    """Return the memory the queues' pools hold (freed results and uploads) to the driver; the
    buffers of Arrays still alive stay theirs.  (``clear_caches`` drops the pools themselves.)"""
    for key in _pools.keys():
        pool = _pools.get(key)
        if pool:
            pool.free_held()


def empty_array(queue: cl.CommandQueue, shape: tuple[int, ...], dtype: np.dtype, allocator=None,
                context: cl.Context | None = None) -> cl_array.Array:
    """``pyopencl.array.empty(queue, shape, dtype)``, cheaper for a shape seen before.

    pyopencl's constructor validates the shape with numpy on every call (~14 us on PoCL, a third of
    a cached call's host time).  Its fast path (``_fast=True``, which pyopencl's own ``empty_like``
    uses) skips that; it is fed the strides and size of an Array that the public constructor made
    for this shape and dtype, so both give the same Array.  Should a pyopencl release drop that
    keyword, this falls back to the public constructor.  ``context``: the queue's, if the caller has it.
    """
    layout = _layouts.get((shape, dtype))
    if layout is None:
        result = cl_array.empty(queue, shape, dtype, allocator=allocator)
        _layouts.put((shape, dtype), (result.strides, result.size))
        return result
    strides, size = layout
    try:
        return cl_array.Array(None, shape, dtype, allocator=allocator, strides=strides, _fast=True, _size=size,
                              _context=queue.context if context is None else context, _queue=queue)
    except TypeError:
        return cl_array.empty(queue, shape, dtype, allocator=allocator)


def check_out(out, shape: tuple[int, ...], dtype: np.dtype, context: cl.Context):
    """Validate a caller-provided output Array (it may be a view with an offset into a larger
    buffer) for a call on a queue of ``context``."""
    if not isinstance(out, cl_array.Array):
        raise TypeError(f"out must be a pyopencl.array.Array, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {tuple(out.shape)}")
    if out.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}, got {out.dtype}")
    if out.context != context:
        raise TypeError("out lives in another OpenCL context than the queue the call runs on")
    check_tensor("out", out)
    return out
