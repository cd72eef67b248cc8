"""Devices described by hand, for the checks that judge the planner's choices without the device:
docs/perf/heuristic_check.py and splitk_rule_check.py (against stored tuning runs and sweeps) and
the unit tests of the GPU rules.  A description holds what the planner reads of a device (its
:class:`clconv.limits.Limits` and the few attributes it asks directly) as the machine answered, so
that all of them judge against the same device."""

from __future__ import annotations

from dataclasses import dataclass

import pyopencl as cl

from .. import limits


class StandIn:
    """A device object made from a description: the attributes the planner and the settings read
    (``type``, ``name``, memory sizes, ...); hashable by identity, as the caches keyed on devices
    need."""

    def __init__(self, **attributes) -> None:
        self.__dict__.update(attributes)


@dataclass(frozen=True)
class Described:
    name: str
    gpu: bool
    compute_units: int
    work_group: int
    work_item_sizes: tuple[int, ...]
    local_mem: int
    global_mem: int
    extensions: str = ""
    float_lanes: int = 1
    vendor_id: int = 0

    @property
    def kind(self) -> int:
        return cl.device_type.GPU if self.gpu else cl.device_type.CPU

    def limits(self) -> limits.Limits:
        return limits.Limits(work_group=self.work_group, work_item_sizes=self.work_item_sizes,
                             local_mem=self.local_mem, compute_units=self.compute_units, gpu=self.gpu,
                             float_lanes=self.float_lanes, handoff_fence=limits.handoff_fence_for(self.kind, self.vendor_id))

    def stand_in(self) -> StandIn:
        """A new device object for this description, its limits registered (no probe runs for it)."""
        device = StandIn(type=self.kind, name=self.name, vendor_id=self.vendor_id,
                         max_compute_units=self.compute_units, max_work_group_size=self.work_group,
                         local_mem_size=self.local_mem, global_mem_size=self.global_mem,
                         max_mem_alloc_size=self.global_mem // 4, native_vector_width_float=self.float_lanes,
                         extensions=self.extensions)
        limits.register(device, self.limits())
        return device


# The H200 of issue 12's tuning runs and sweeps (NVIDIA's OpenCL 580.159), as clconv.limits probed it
H200 = Described(name="NVIDIA H200", gpu=True, compute_units=132, work_group=1024, work_item_sizes=(1024, 1024, 64),
                 local_mem=48 * 1024, global_mem=150 * 2**30, extensions="cl_khr_fp64", vendor_id=limits.NVIDIA_VENDOR_ID)
