"""Configurations come from the device's limits (clconv/limits.py), so that every algorithm that
serves a problem offers one that runs on the device in hand: here on a device that grants a kernel
32 work-items and 16 KiB of local memory (Mesa's llvmpipe grants 32 while reporting a maximum of
1024), every plan of every serving algorithm over the reliability cases fits those limits."""

from __future__ import annotations

import pytest

from clconv import limits
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import local_padding, tile_config

from cases import COVER, GRADIENT_CASES, SPLITK_CASE, every_pass_algorithm, param_id


def _local_bytes(config: dict, itemsize: int) -> int:
    """Local memory a GEMM tile or winograd configuration stages (0 for the others)."""
    if "LS" in config:
        side = config["LS"]
        return side * (8 * side + 1) * itemsize
    if "TM" in config:
        tile = tile_config(config)
        pad = local_padding(tile["VW"])
        return tile["TK"] * (tile["TM"] + pad + tile["TN"] + pad) * itemsize
    return 0


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu"])
def test_every_serving_algorithm_has_configs_within_a_small_devices_limits(queue, monkeypatch, gpu):
    small = limits.Limits(work_group=32, work_item_sizes=(32, 32, 32), local_mem=16384, compute_units=4, gpu=gpu)
    monkeypatch.setattr(limits, "of", lambda device, context=None: small)
    combos = every_pass_algorithm(queue.device, COVER + GRADIENT_CASES + [SPLITK_CASE])
    assert combos
    for case, pass_, name in combos:
        problem = case.problem(case.family_for(pass_))
        algorithm = REGISTRY[name]
        configs = algorithm.configs(problem, queue.device)
        label = param_id(case, pass_, name)
        assert configs, f"{label}: serves the problem but offers no configuration"
        for config in configs:
            assert _local_bytes(config, problem.itemsize) <= small.local_mem, (label, config)
            for call in algorithm.plan(problem, config, queue.device).calls:
                if call.local_size is not None:
                    assert small.fits(call.local_size), (label, config, call.entry, call.local_size)


def test_limits_of_the_device_in_hand(queue):
    found = limits.of(queue.device)
    assert found is limits.of(queue.device), "probed once per device"
    assert 1 <= found.work_group <= queue.device.max_work_group_size
    assert found.local_mem == queue.device.local_mem_size
    assert len(found.work_item_sizes) >= 3


def test_widest_keeps_the_order_and_falls_back_to_a_power_of_two():
    fit = limits.Limits(work_group=48, work_item_sizes=(48, 48, 48), local_mem=1024, compute_units=1, gpu=False)
    assert fit.widest(256, 32, 16) == [32, 16]
    assert fit.widest(256, 64) == [32]
    assert not fit.fits((8, 8)) and fit.fits((8, 6)) and not fit.fits((4,), local_bytes=2048)
