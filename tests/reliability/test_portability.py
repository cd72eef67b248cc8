"""What differs between OpenCL implementations and must not change an answer (docs/portability.md):
contexts that a runtime frees early, platforms that list no devices, out-of-order queues, the
device's own limits, and two devices in one process, used from several threads at once.

scripts/test runs this file on every implementation it installs (PoCL, Intel's CPU runtime, Mesa's
rusticl); a test that needs a second device or an out-of-order queue skips, saying why, where the
implementation in hand has none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import types
from pathlib import Path

import pyopencl as cl
import pyopencl.array as cl_array
import pytest

import clconv
from clconv import device as devices
from clconv import limits, planner, reference, tuning
from clconv.geometry import resolve_conv
from clconv.passes import PASS_TABLE

from helpers import assert_matches, random

REPO = Path(__file__).resolve().parents[2]

# the forward, data and weight gradient of one small layer; the algorithms with workspaces and
# several kernels per call (im2col, winograd, splitk) are the ones that depend on ordering
# (512 products per weight and 288 channels x taps both ways: splitk cuts every pass)
X_SHAPE, W_SHAPE, PADDING = (2, 32, 16, 16), (32, 32, 3, 3), 1


def _geometry():
    return resolve_conv(2, X_SHAPE, W_SHAPE, None, 1, PADDING).geometry


def _passes(rng):
    x, w = random(rng, X_SHAPE), random(rng, W_SHAPE)
    g = _geometry()
    dy = random(rng, (X_SHAPE[0], W_SHAPE[0], *g.out_size[1:]))
    expected = {
        "forward": reference.forward(g, x, w),
        "backward_data": reference.backward_data(g, dy, w),
        "backward_weight": reference.backward_weight(g, x, dy),
    }
    return x, w, dy, expected


def _run(pass_, x, w, dy, algorithm="auto", queue=None):
    if pass_ == "forward":
        return clconv.conv2d(x, w, padding=PADDING, algorithm=algorithm, queue=queue)
    if pass_ == "backward_data":
        return clconv.conv2d_input(X_SHAPE, w, dy, padding=PADDING, algorithm=algorithm, queue=queue)
    return clconv.conv2d_weight(x, W_SHAPE, dy, padding=PADDING, algorithm=algorithm, queue=queue)


def _length(pass_) -> int:
    return PASS_TABLE[pass_].reduction_length(_geometry())


# -- contexts ------------------------------------------------------------------------------------------


CHILD = """
import gc, json, sys
import numpy as np
import clconv
clconv.default_queue()
gc.collect()   # the runtime may free an unreferenced context now
rng = np.random.default_rng(5)
x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
y = clconv.conv2d(x, w, padding=1, algorithm="direct")
q = clconv.new_queue(clconv.default_queue().device)
gc.collect()
y2 = clconv.conv2d(x, w, padding=1, algorithm="direct", queue=q)
from clconv import reference
from clconv.geometry import resolve_conv
from clconv.passes import PASS_TABLE
ref = reference.forward(resolve_conv(2, x.shape, w.shape, None, 1, 1).geometry, x, w)
print(json.dumps({"err": float(max(np.abs(y - ref).max(), np.abs(y2 - ref).max()))}))
"""


def test_queues_keep_their_contexts_alive_in_a_fresh_process():
    """Intel's CPU runtime frees a context once its last Python reference is gone, although a queue
    of it lives on: the first numpy call then failed in ``queue.context`` (clRetainContext:
    INVALID_CONTEXT).  The default queue and ``clconv.new_queue`` keep theirs."""
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CLCONV_TUNE": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["err"] < 1e-4


# -- platforms without devices ---------------------------------------------------------------------------


class _Platform(types.SimpleNamespace):
    def get_devices(self):
        if isinstance(self.devices, Exception):
            raise self.devices
        return self.devices


def test_platforms_that_list_no_devices_are_passed_over(monkeypatch, queue):
    """Mesa's rusticl without RUSTICL_ENABLE, and Clover, register platforms with no devices (as on
    many desktop Linux machines); another lists none with an error.  Device choice and `clconv info`
    see through them to the device in hand."""
    real = queue.device
    fake = [_Platform(name="rusticl", vendor="Mesa/X.org", version="OpenCL 3.0", devices=[]),
            _Platform(name="Clover", vendor="Mesa", version="OpenCL 1.1", devices=cl.LogicError("DEVICE_NOT_FOUND")),
            _Platform(name=real.platform.name, vendor=real.platform.vendor, version=real.platform.version,
                      devices=[real])]
    monkeypatch.setattr(cl, "get_platforms", lambda: fake)
    monkeypatch.delenv("CLCONV_DEVICE", raising=False)
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    device, why = devices.select_device(None)
    assert device == real, why
    assert devices.select_device("2:0")[0] == real
    with pytest.raises(devices.DeviceSelectionError, match="platform 0, device 0"):
        devices.select_device("0:0")
    from clconv.tools.cli import cmd_info
    import io
    out = io.StringIO()
    assert cmd_info(types.SimpleNamespace(), out) == 0
    text = out.getvalue()
    assert "platform 0: rusticl" in text and "no devices" in text, text
    assert "platform 1: Clover" in text and "cannot list devices" in text, text
    assert f"device 2:0: {real.name.strip()}" in text, text


def test_info_lists_the_platforms_of_this_machine():
    """The real platforms, in a fresh process: every one is listed, those without devices saying so
    (with Mesa installed and RUSTICL_ENABLE unset, rusticl's and Clover's)."""
    done = subprocess.run([sys.executable, "-m", "clconv", "info"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    sections = done.stdout.split("\nplatform ")[1:]
    platforms = cl.get_platforms()
    assert len(sections) == len(platforms), done.stdout
    for index, (platform, section) in enumerate(zip(platforms, sections)):
        assert section.startswith(f"{index}: {platform.name}"), section
        try:
            listed = platform.get_devices()
        except cl.Error:
            assert "cannot list devices" in section, section
            continue
        assert ("no devices" in section) == (not listed), section
    assert "default device: " in done.stdout and "default device: none" not in done.stdout


# -- the device's limits -----------------------------------------------------------------------------------


def test_configurations_fit_what_the_compiler_grants(queue):
    """Every configuration each serving algorithm offers for this layer's passes fits the probed
    limits, and its built kernels pass the runner's resource check (the compiled kernel's own
    CL_KERNEL_WORK_GROUP_SIZE and local memory), so no launch is refused for its size."""
    from clconv.algorithms import REGISTRY
    from clconv.plan import Problem

    fit = limits.of(queue.device, queue.context)
    assert fit.work_group <= queue.device.max_work_group_size
    for pass_ in ("forward", "backward_data", "backward_weight"):
        problem = Problem(_geometry(), pass_, "float32")
        for algorithm in REGISTRY.values():
            if pass_ not in algorithm.passes or algorithm.decline_reason(problem, queue.device):
                continue
            configs = algorithm.configs(problem, queue.device)
            assert configs, (pass_, algorithm.name)
            runner = planner.prepare(problem, algorithm, configs[0], queue)  # raises LaunchError if it does not fit
            for launch in runner.launches:
                if launch.local_size is not None:
                    assert fit.fits(launch.local_size), (pass_, algorithm.name, launch.local_size)


# -- out-of-order queues -------------------------------------------------------------------------------


def _out_of_order_queue(queue):
    if not queue.device.queue_properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE:
        pytest.skip(f"{queue.device.name!r} offers no out-of-order queues")
    props = cl.command_queue_properties
    return cl.CommandQueue(queue.context, queue.device, properties=props.OUT_OF_ORDER_EXEC_MODE_ENABLE)


@pytest.mark.parametrize("algorithm", ["auto", "im2col", "winograd", "splitk", "implicit_gemm"])
def test_an_out_of_order_queue_gives_right_answers(queue, rng, algorithm):
    """Each call's kernels wait for each other and for its inputs' events; workspaces are not
    shared between calls that could overlap.  Arrays in and out, several calls in flight before
    one wait."""
    ooo = _out_of_order_queue(queue)
    x, w, dy, expected = _passes(rng)
    xd, wd, dyd = (cl_array.to_device(ooo, a) for a in (x, w, dy))
    results = {}
    for round_ in range(3):
        for pass_ in expected:
            name = algorithm
            if algorithm == "winograd" and pass_ == "backward_weight":
                name = "auto"
            results[(round_, pass_)] = _run(pass_, xd, wd, dyd, name)
    ooo.finish()
    for (_, pass_), got in results.items():
        assert isinstance(got, cl_array.Array) and got.queue is ooo
        assert_matches(got, expected[pass_], _length(pass_))


# -- two devices in one process ----------------------------------------------------------------------------


def _two_devices():
    """The device in hand and another one (another platform's, or the same platform's second),
    each with a queue of its own."""
    mine = clconv.default_queue().device
    others = []
    for platform in cl.get_platforms():
        try:
            listed = platform.get_devices()
        except cl.Error:
            continue
        others += [d for d in listed if d != mine]
    if not others:
        pytest.skip("one OpenCL device here: the two-device tests need a second (scripts/test runs them on "
                    "the Intel runtime beside PoCL, and on two GPUs by hand)")
    return clconv.default_queue(), clconv.new_queue(others[0])


def test_two_devices_from_several_threads(rng):
    """A queue per device; four threads call forward and both gradients on both, numpy and Arrays
    alike, at once; every answer is right, and the prepared runners and the tuning database are
    each device's own."""
    first, second = _two_devices()
    x, w, dy, expected = _passes(rng)
    errors: list[str] = []

    def work(index: int) -> None:
        queue = (first, second)[index % 2]
        try:
            for round_ in range(4):
                for pass_ in expected:
                    if round_ % 2:
                        got = _run(pass_, *(cl_array.to_device(queue, a) for a in (x, w, dy)))
                        assert got.queue is queue
                    else:
                        got = _run(pass_, x, w, dy, queue=queue)
                    assert_matches(got, expected[pass_], _length(pass_))
        except Exception as exc:  # noqa: BLE001 - reported below with the thread's device
            errors.append(f"thread {index} on {queue.device.name!r}: {exc!r}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors, errors
    from clconv.plan import Problem

    problem = Problem(_geometry(), "forward", "float32")
    chosen = {q.device: planner.plan(problem, q) for q in (first, second)}
    assert chosen[first.device] is not chosen[second.device]
    for queue in (first, second):
        kernel = chosen[queue.device].launches[0].kernel
        assert kernel.context == queue.context and queue.device in kernel.program.devices
    if devices.device_identity(first.device) != devices.device_identity(second.device):
        assert tuning.database_path(first.device) != tuning.database_path(second.device)


def test_arrays_of_one_device_with_the_queue_of_another_are_refused(rng):
    first, second = _two_devices()
    x, w = (cl_array.to_device(first, random(rng, s)) for s in (X_SHAPE, W_SHAPE))
    with pytest.raises(TypeError, match="input lives in another OpenCL context"):
        clconv.conv2d(x, w, padding=PADDING, queue=second)


# -- launch sizes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["direct", "depthwise_rows", "implicit_gemm"])
def test_more_than_65535_work_groups_along_a_second_dimension(queue, rng, algorithm):
    """A depthwise layer of 66000 channels: the direct kernel's second dimension (batch x channels)
    and the GEMM's third (groups) pass 65535, the most blocks a CUDA grid has along y and z;
    NVIDIA's OpenCL maps work-groups onto such a grid.  Small images keep it cheap everywhere."""
    channels = 66000
    x = random(rng, (1, channels, 4, 4))
    w = random(rng, (channels, 1, 3, 3))
    got = clconv.conv2d(x, w, padding=1, groups=channels, algorithm=algorithm)
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, channels).geometry
    assert_matches(got, reference.forward(g, x, w), g.reduction_length)
