"""What a kernel may use on a device, read from the device and its compiler: the figures every
algorithm's configurations are derived from, so that each serving algorithm offers at least one
configuration that runs on the device in hand (never chosen from the device's name).

``CL_DEVICE_MAX_WORK_GROUP_SIZE`` is not enough on its own: Mesa's rusticl on llvmpipe reports
1024 there, but its compiler grants every kernel 32 work-items (``CL_KERNEL_WORK_GROUP_SIZE``).  So
the work-group figure is the smaller of the device's and that of a small probe kernel, built once
per device identity and remembered in ``<cache dir>/devices-v1/`` (a new process reads a small
file rather than compiling: the warm first call stays ~10 ms on NVIDIA).  A kernel whose own figure
is lower still (registers on a GPU) is caught by the runner's resource check, and the planner moves
on to the next configuration.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pyopencl as cl

from . import settings
from .builder import atomic_write, quiet_compiler
from .caches import Cache
from .templates import builtin_template_dir
from .tuning import device_key

log = logging.getLogger("clconv.limits")
LIMITS_FORMAT_VERSION = 1

@dataclass(frozen=True)
class Limits:
    """The figures of one device that configurations are derived from."""

    work_group: int  # work-items one work-group may have: the device's and its compiler's limit
    work_item_sizes: tuple[int, ...]  # the most work-items along each dimension of a work-group
    local_mem: int  # bytes of local memory per work-group
    compute_units: int
    gpu: bool
    # CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT / _DOUBLE: lanes of the vector unit (16 and 8 with AVX-512);
    # 1 where the compiler vectorises across work-items instead (Mesa's llvmpipe), so kernels
    # written in explicit vectors gain nothing there and build slowly
    float_lanes: int = 1
    double_lanes: int = 1
    # bytes of the largest cache level one compute unit has to itself (a CPU core's L2); 0: unknown
    core_cache: int = 0
    # bytes of the largest cache level a CPU's cores share (its L3); 0: unknown or none
    shared_cache: int = 0
    # a CPU core's level-1 data cache: its ways, and the bytes one way spans (sets x line: 4 KiB on
    # x86's 32 KiB 8-way and 48 KiB 12-way caches), so that addresses that many bytes apart share a
    # set; 0: unknown
    l1_ways: int = 0
    l1_way_bytes: int = 0
    l1_line: int = 64
    # The fence that makes a work-item's global stores visible to the whole device before its work-group
    # takes an atomic ticket, so that the work-group drawing a counter's last ticket may read them
    # (split-K in one launch: gemm.mako's FINISH): "mem_fence" (OpenCL's), "membar.gl" (inline PTX),
    # or "" where none is known (handoff_fence_of).
    handoff_fence: str = ""

    def lanes(self, itemsize: int) -> int:
        """Native vector lanes for elements of ``itemsize`` bytes."""
        return self.double_lanes if itemsize == 8 else self.float_lanes

    def fits(self, local_size: tuple[int, ...], local_bytes: int = 0) -> bool:
        """Whether a work-group of ``local_size`` using ``local_bytes`` of local memory can run."""
        threads = 1
        for extent, most in zip(local_size, self.work_item_sizes):
            if extent > most:
                return False
            threads *= extent
        return threads <= self.work_group and local_bytes <= self.local_mem

    def widest(self, *options: int) -> list[int]:
        """Those of ``options`` (work-group sizes of one dimension) that fit, in the given order;
        the largest power of two that fits when none does."""
        out = [n for n in options if self.fits((n,))]
        return out or [pow2_at_most(self.work_group)]


def pow2_at_most(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


_limits: Cache[Limits] = Cache("device_limits", maxsize=16)


def of(device: cl.Device, context: cl.Context | None = None) -> Limits:
    """The :class:`Limits` of ``device``, probed once per process (``context``: one of the device's,
    to build the probe in; a new one is made when it is not given)."""
    found = _described.get(device) or _limits.get(device)
    if found is None:
        found = _limits.setdefault(device, lambda: _probe(device, context))
    return found


_described: dict[object, Limits] = {}  # not a cache: clear_caches() keeps what was described by hand


def register(device: object, found: Limits) -> None:
    """Use ``found`` as the limits of ``device`` from now on, unprobed: for a stand-in device (tests,
    the heuristic's checks against a device described by hand)."""
    _described[device] = found


def _probe(device: cl.Device, context: cl.Context | None) -> Limits:
    path = settings.cache_dir() / f"devices-v{LIMITS_FORMAT_VERSION}" / f"{device_key(device)}.json"
    granted = _remembered(path) if settings.disk_cache_enabled() else None
    if granted is None:
        granted = _granted_work_group(device, context)
        if settings.disk_cache_enabled():
            atomic_write(path, json.dumps({"kernel_work_group_size": granted}).encode())
    # a CPU device runs on the host's cores: their caches, as Linux describes its first CPU
    cpu = Path("/sys/devices/system/cpu/cpu0")
    caches = {}
    if device.type & cl.device_type.CPU:
        private, shared = data_caches(cpu)
        caches = {"core_cache": private, "shared_cache": shared, **level1_data_cache(cpu)}
    return Limits(
        work_group=max(1, min(device.max_work_group_size, granted)),
        work_item_sizes=tuple(device.max_work_item_sizes),
        local_mem=device.local_mem_size,
        compute_units=max(1, device.max_compute_units),
        gpu=bool(device.type & cl.device_type.GPU),
        float_lanes=max(1, device.native_vector_width_float),
        double_lanes=max(1, device.native_vector_width_double),
        handoff_fence=handoff_fence_of(device),
        **caches,
    )


NVIDIA_VENDOR_ID = 0x10DE
# Whether NVIDIA's GPUs take the handoff with inline PTX's membar.gl.  Checked on an H100 (driver
# 580.159.04, 2026-12-07; docs/perf/h100_one_launch.sh): the kernel's PTX carries membar.gl, 43
# layer-passes matched two launches bit for bit over 3 rounds, the one-launch tests passed on the GPU
NVIDIA_HANDOFF = True


def handoff_fence_of(device: cl.Device) -> str:
    """handoff_fence_for ``device``'s type and vendor."""
    return handoff_fence_for(device.type, device.vendor_id)


def handoff_fence_for(kind: int, vendor_id: int) -> str:
    """The fence by which the work-groups of a device of type ``kind`` (cl.device_type bits) from
    ``vendor_id`` may hand results to each other through an atomic
    counter (Limits.handoff_fence); OpenCL 1.2 leaves memory consistency between work-groups to the
    implementation, so only where checked:

    * a CPU device (and nothing else: Oclgrind's simulator calls itself every type at once):
      OpenCL's ``mem_fence``.  Its work-groups are threads on cores with coherent caches, and the
      atomic is a locked instruction; the suite runs split-K in one launch bit for bit against two
      on PoCL, Intel's CPU runtime and Mesa's rusticl on llvmpipe.
    * an NVIDIA GPU (NVIDIA_HANDOFF): inline PTX ``membar.gl``, CUDA's __threadfence (its
      last-block reduction is this pattern).  NVIDIA's compiler lowers
      ``mem_fence(CLK_GLOBAL_MEM_FENCE)`` to ``membar.cta``, a work-group's scope (seen in the PTX:
      docs/perf/splitk_one_launch.py), though all 66 layer-passes matched two launches with it.
    * anything else: none.  Other GPUs' compilers may lower the OpenCL 1.2 fence to a work-group's
      scope too; they keep split-K's second launch until checked."""
    if kind & cl.device_type.CPU and not kind & (cl.device_type.GPU | cl.device_type.ACCELERATOR):
        return "mem_fence"
    if NVIDIA_HANDOFF and kind & cl.device_type.GPU and vendor_id == NVIDIA_VENDOR_ID:
        return "membar.gl"
    return ""


def data_caches(cpu: Path) -> tuple[int, int]:
    """The largest data cache private to one core of a CPU device and the largest one its cores
    share (the L3), in bytes, from Linux's sysfs (OpenCL reports only CL_DEVICE_GLOBAL_MEM_CACHE_SIZE,
    which PoCL fills with the shared last level: 300 MiB on a Xeon whose cores have 2 MiB each).  A
    CPU device runs on the host's cores.  ``cpu``: a CPU's sysfs directory.  0 where unknown (not
    Linux) or absent: configurations then assume nothing about that cache."""
    try:
        core = (cpu / "topology" / "thread_siblings_list").read_text().strip()  # the CPU and its hyperthreads
    except OSError:
        core = cpu.name.removeprefix("cpu")
    private = shared = 0
    for index in (cpu / "cache").glob("index*"):
        try:
            kind = (index / "type").read_text().strip()
            sharers = (index / "shared_cpu_list").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind in ("Data", "Unified") and size[:-1].isdigit():
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 0)
            if sharers == core:
                private = max(private, int(size[:-1]) * scale)
            else:
                shared = max(shared, int(size[:-1]) * scale)
    return private, shared


def level1_data_cache(cpu: Path) -> dict[str, int]:
    """A CPU's level-1 data cache as :class:`Limits` fields (``l1_ways``, ``l1_way_bytes``,
    ``l1_line``), from Linux's sysfs; empty where unknown."""
    for index in sorted((cpu / "cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            ways = int((index / "ways_of_associativity").read_text())
            sets = int((index / "number_of_sets").read_text())
            line = int((index / "coherency_line_size").read_text())
        except (OSError, ValueError):
            continue
        if level == "1" and kind in ("Data", "Unified") and ways > 0 and sets > 0 and line > 0:
            return {"l1_ways": ways, "l1_way_bytes": sets * line, "l1_line": line}
    return {}


def _remembered(path) -> int | None:
    try:
        value = json.loads(path.read_text())["kernel_work_group_size"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("clconv: ignoring unreadable device limits %s (%s); probing again", path, exc)
        return None
    return value if isinstance(value, int) and value > 0 else None


def _granted_work_group(device: cl.Device, context: cl.Context | None) -> int:
    """CL_KERNEL_WORK_GROUP_SIZE of the probe kernel (built here, outside the program cache: it
    is no program a convolution runs)."""
    context = context or cl.Context([device])
    source = (builtin_template_dir() / "limits_probe.mako").read_text()  # the built-in copy, always
    with quiet_compiler():
        program = cl.Program(context, source).build(devices=[device])
    kernel = cl.Kernel(program, "clc_probe")
    return int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device))
