"""Choosing the default OpenCL device and describing devices (identity, capabilities)."""

from __future__ import annotations

import os
import threading
from typing import MutableMapping

import pyopencl as cl

from . import settings

_default_queue: cl.CommandQueue | None = None
_lock = threading.Lock()
pocl_pinned_by_clconv = False  # whether pin_pocl_workers set POCL_AFFINITY in this process


class DeviceSelectionError(RuntimeError):
    """No OpenCL device could be chosen (none installed, or the selector matched nothing)."""


def pocl_pinning_safe(allowed: set[int], cpus: int, max_threads: str) -> bool:
    """Whether PoCL's ``POCL_AFFINITY=1`` is safe and worth having for a process that may run on
    the CPUs ``allowed`` of a machine of ``cpus`` CPUs, with PoCL's ``POCL_MAX_PTHREAD_COUNT`` as
    set ('' when unset).

    PoCL then pins its pthread worker ``i`` to CPU ``i``, and aborts the process ("PTHREAD ERROR
    ... Invalid argument") where that CPU is not the process's to use (a container's CPU set) or
    does not exist (more workers than CPUs).  So: only where every CPU is allowed and PoCL starts
    one worker per CPU, its default.  Fewer workers than CPUs would all be pinned to the first
    ones, where several such processes would share CPU 0 while the others idle."""
    if cpus <= 0 or allowed != set(range(cpus)):
        return False
    if not max_threads:
        return True
    try:
        return int(max_threads) == cpus
    except ValueError:
        return False


def pin_pocl_workers(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set ``POCL_AFFINITY=1`` (PoCL's pthread device: worker ``i`` on CPU ``i``) where it is
    unset, ``CLCONV_POCL_AFFINITY`` is not 0, and :func:`pocl_pinning_safe` says so; True if set.

    Why: unpinned, PoCL's workers sleep between commands, and Linux tends to wake them on the CPU
    of the thread that woke them (the one enqueueing, which then blocks), so a single call's
    work-groups often ran on one CPU of two.  On a 2-CPU AVX-512 EPYC a 1x1 data gradient took
    0.95 ms a call for its first ~40 calls, then 0.49 ms; pinned, 0.49 ms from the second call
    (the CPU set's kernel times 1.20x PyTorch's -> 0.96x; docs/performance.md).  PyTorch's
    OpenMP threads spin between calls and never sleep that way.

    PoCL reads the variable when it starts its workers, at the first device query of the process
    (``cl.get_platforms()`` and the like): clconv calls this at import, so it applies unless
    something asked OpenCL for its platforms before ``import clconv``.  Child processes inherit
    it, as they inherit any other PoCL setting."""
    if "POCL_AFFINITY" in environ or not settings.pocl_pinning_enabled():
        return False
    if not hasattr(os, "sched_getaffinity"):  # Linux only, as PoCL's pinning
        return False
    if not pocl_pinning_safe(os.sched_getaffinity(0), os.cpu_count() or 0, environ.get("POCL_MAX_PTHREAD_COUNT", "")):
        return False
    global pocl_pinned_by_clconv
    environ["POCL_AFFINITY"] = "1"
    pocl_pinned_by_clconv = environ is os.environ
    return True


def _all_devices() -> list[tuple[int, int, cl.Device]]:
    found = []
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # the ICD loader finds no platform at all
        raise DeviceSelectionError(
            "no OpenCL platform found; install a driver (on Debian/Ubuntu: apt-get install pocl-opencl-icd)"
        ) from exc
    for p_index, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for d_index, device in enumerate(devices):
            found.append((p_index, d_index, device))
    return found


def select_device(selector: str | None) -> tuple[cl.Device, str]:
    """Return ``(device, reason)`` for a selector string, or the default GPU-then-CPU choice.

    A selector is ``"P"`` / ``"P:D"`` (platform and device index, as ``PYOPENCL_CTX``) or a
    case-insensitive substring of ``"platform name device name"``.
    """
    devices = _all_devices()
    if not devices:
        raise DeviceSelectionError(
            "no OpenCL device found; install a driver (on Debian/Ubuntu: apt-get install pocl-opencl-icd)"
        )
    if selector:
        parts = selector.split(":")
        if all(part.strip().isdigit() for part in parts if part) and parts[0]:
            p = int(parts[0])
            d = int(parts[1]) if len(parts) > 1 and parts[1] else 0
            for p_index, d_index, device in devices:
                if (p_index, d_index) == (p, d):
                    return device, f"selector {selector!r}"
            raise DeviceSelectionError(f"no OpenCL device at platform {p}, device {d} (selector {selector!r})")
        needle = selector.lower()
        for _, _, device in devices:
            if needle in f"{device.platform.name} {device.name}".lower():
                return device, f"selector {selector!r} matched the name"
        names = ", ".join(f"{p}:{d} {dev.name}" for p, d, dev in devices)
        raise DeviceSelectionError(f"no OpenCL device matches {selector!r}; devices: {names}")
    for kind, label in ((cl.device_type.GPU, "first GPU"), (cl.device_type.CPU, "first CPU device")):
        for _, _, device in devices:
            if device.type & kind:
                return device, label
    return devices[0][2], "first device"


def default_queue() -> cl.CommandQueue:
    """The process-wide default queue, created on first use: in order, without profiling (on
    NVIDIA's driver an enqueue on a profiling queue costs ~17 us of host time against ~10.5 us;
    clconv's measurements run on a profiling queue of their own, ``runtime.profiling_queue``).

    Device choice: ``CLCONV_DEVICE``, else ``PYOPENCL_CTX``, else the first GPU, else the first
    CPU device.  Never prompts.
    """
    global _default_queue
    with _lock:
        if _default_queue is None:
            device, _ = default_device_choice()
            _default_queue = new_queue(device)
        return _default_queue


def new_queue(device: cl.Device, properties: cl.command_queue_properties | None = None) -> cl.CommandQueue:
    """A queue of ``device`` (with ``properties``; by default in order, without profiling) in a new
    context of its own, which the queue keeps alive: Intel's CPU
    runtime frees a context once its last Python reference is gone, although a queue of it lives on
    (the next ``queue.context`` then fails with INVALID_CONTEXT)."""
    context = cl.Context([device])
    queue = cl.CommandQueue(context) if properties is None else cl.CommandQueue(context, properties=properties)
    queue._clconv_context = context  # type: ignore[attr-defined]
    return queue


def queue_for(selector: str | None) -> cl.CommandQueue:
    """The default queue when ``selector`` is None, else a new queue (:func:`new_queue`) of the
    device it selects (``"P:D"`` or a name substring, as ``CLCONV_DEVICE``): the tools' ``--device``."""
    if selector is None:
        return default_queue()
    device, _ = select_device(selector)
    return new_queue(device)


def default_device_choice() -> tuple[cl.Device, str]:
    """The device ``default_queue`` uses and a sentence saying why it was chosen."""
    chosen = settings.device_selector()
    if chosen is not None:
        variable, selector = chosen
        device, how = select_device(selector)
        return device, f"{variable}={selector!r} ({how})"
    return select_device(None)


def device_identity(device: cl.Device) -> tuple[str, ...]:
    """Everything about a device that changes the binary its compiler produces."""
    return (
        device.platform.vendor,
        device.platform.name,
        device.platform.version,
        device.vendor,
        device.name,
        device.version,
        device.driver_version,
        cl.VERSION_TEXT,
    )


def supports_fp64(device: cl.Device) -> bool:
    return "cl_khr_fp64" in device.extensions.split() or device.double_fp_config != 0


def is_gpu(device: cl.Device) -> bool:
    return bool(device.type & cl.device_type.GPU)
