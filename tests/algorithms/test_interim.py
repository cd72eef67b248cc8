"""Interim kernels (clconv/interim.py): direct convolution rendered once with the geometry as kernel
arguments, which a new geometry's calls run while their chosen kernels build in the background.

Below the ops: each pass of geometries of every kind against the float64 reference (exact on
small integers), both layouts, 16-bit storage, a bias and the fused epilogue, and one program for
every geometry.  Through the ops (CLCONV_INTERIM=1, the suite's default being 0): which runner a
call runs before and after the chosen plan's build, that results agree, that a named algorithm
and a measured choice never run one, and that a failed background build reaches the caller."""

from __future__ import annotations

import threading

import numpy as np
import pyopencl as cl
import pytest

import clconv
from clconv import builder, interim, planner, settings
from clconv.epilogue import Epilogue
from clconv.geometry import ConvGeometry
from clconv.plan import Problem
from clconv.runtime import LaunchError, Runner

from cases import geometry
from helpers import check_runner

# every index path of the gather and of the weight-gradient reduction, none of them baked in
GEOMETRIES = {
    "k3s2d2-groups": "n2g2c4o6i13x9k3x3s2x1p2x1d2x1",  # stride and dilation on one axis, groups of 2
    "asymmetric": "n1g1c3o5i7x8k2x3s1x2p0x1d1x1",      # an even kernel, stride along W only
    "depthwise": "n2g6c6o6i11x11k3x3s1x1p1x1d1x1",
    "1d": "n3g1c4o8i17k5s2p2d2",
    "3d": "n1g2c4o4i4x6x6k3x3x3s1x2x2p1x1x1d1x1x1",
    "1x1-s2": "n2g1c8o4i9x9k1x1s2x2p0x0d1x1",
}
PASSES = ("forward", "backward_data", "backward_weight")


def interim_runner(queue, problem: Problem) -> Runner:
    return planner.build(interim.plan(problem, queue.device), queue)


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("tag", list(GEOMETRIES.values()), ids=list(GEOMETRIES))
def test_interim_kernels_match_the_reference(queue, rng, tag, pass_):
    problem = Problem(geometry(tag), pass_, "float32", bias=pass_ != "backward_weight")
    runner = check_runner(queue, rng, problem, interim_runner(queue, problem))
    assert interim.is_interim(runner.config)


@pytest.mark.parametrize("pass_", ["forward", "backward_data"])
def test_interim_kernels_channels_last_with_the_epilogue(queue, rng, pass_):
    """Channels-last activations, a bias, a residual added after alpha and a leaky ReLU."""
    epilogue = Epilogue(alpha=0.5, beta=1.0, residual=True, activation="leaky_relu", negative_slope=0.25)
    problem = Problem(geometry(GEOMETRIES["k3s2d2-groups"]), pass_, "float32", bias=True,
                      epilogue=epilogue, layout="channels_last")
    check_runner(queue, rng, problem, interim_runner(queue, problem))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_interim_kernels_in_16_bit_storage(queue, rng, dtype):
    problem = Problem(geometry(GEOMETRIES["asymmetric"]), "forward", dtype, bias=True)
    check_runner(queue, rng, problem, interim_runner(queue, problem))


def test_one_interim_program_serves_every_geometry(queue):
    """The geometry is in the arguments, not in the source: a second geometry of the same pass,
    dtype and layout builds nothing (the first may, if no earlier test built it)."""
    first = Problem(geometry(GEOMETRIES["1d"]), "forward", "float32")
    second = Problem(geometry(GEOMETRIES["3d"]), "forward", "float32")
    interim_runner(queue, first)
    builds = builder.stats.source_builds
    runner = interim_runner(queue, second)
    assert builder.stats.source_builds == builds
    assert runner.launches[0].kernel is interim_runner(queue, first).launches[0].kernel


def test_interim_argument_values_follow_the_parameter_list():
    g = geometry(GEOMETRIES["3d"])
    values = dict(zip(interim.GEOMETRY_ARGS.names, map(int, interim.argument_values(g))))
    assert (values["clc_n"], values["clc_g"], values["clc_ci"], values["clc_co"]) == (1, 2, 2, 2)
    assert (values["clc_id"], values["clc_ih"], values["clc_iw"]) == g.in_size
    assert (values["clc_sd"], values["clc_sh"], values["clc_sw"]) == g.stride
    assert (values["clc_od"], values["clc_oh"], values["clc_ow"]) == g.out_size
    assert interim.GEOMETRY_ARGS.parameters.count("const int") == len(interim.GEOMETRY_ARGS.names) == 22


def test_interim_kernels_are_on_for_gpus_and_settable(monkeypatch):
    from helpers import fake_device

    monkeypatch.delenv("CLCONV_INTERIM", raising=False)
    assert interim.enabled(fake_device(gpu=True, compute_units=8))
    assert not interim.enabled(fake_device(gpu=False, compute_units=8))
    monkeypatch.setenv("CLCONV_INTERIM", "yes")
    assert interim.enabled(fake_device(gpu=False, compute_units=8))
    monkeypatch.setenv("CLCONV_INTERIM", "0")
    assert not interim.enabled(fake_device(gpu=True, compute_units=8))
    monkeypatch.setenv("CLCONV_INTERIM", "sometimes")
    with pytest.raises(ValueError, match="CLCONV_INTERIM.*'sometimes'"):
        settings.interim()


def test_interim_kernels_serve_problems_up_to_max_flops():
    small = Problem(ConvGeometry.make(2, 8, 1, 64, 64, (56, 56), (3, 3), (1, 1), (1, 1), (1, 1)), "forward", "float32")
    huge = Problem(ConvGeometry.make(3, 64, 1, 256, 256, (16, 56, 56), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
                   "forward", "float32")
    assert interim.serves(small) and not interim.serves(huge)


# -- through the ops ----------------------------------------------------------------------------------


class Recorder:
    """Which runners ran (their configs), and a gate the background builds of chosen plans wait at."""

    def __init__(self, monkeypatch):
        self.configs: list[dict] = []
        self.background: list[dict] = []  # runs on the background threads (a CPU's first launch)
        self.gate = threading.Event()
        self.fail_background = False
        self.refuse_interim = False
        run, choose = Runner.run, planner._choose

        def recording_run(runner, *args, **kwargs):
            ran = self.configs if threading.current_thread() is threading.main_thread() else self.background
            ran.append(runner.config)
            if self.refuse_interim and interim.is_interim(runner.config):
                raise LaunchError("the driver refused the interim kernel (injected)")
            return run(runner, *args, **kwargs)

        def gated_choose(problem, queue, algorithm):
            if threading.current_thread().name.startswith("clconv-build"):
                assert self.gate.wait(60), "the test never opened the gate"
                if self.fail_background:
                    raise builder.BuildError("a background build failed (injected)", "", "", None)
            return choose(problem, queue, algorithm)

        monkeypatch.setattr(Runner, "run", recording_run)
        monkeypatch.setattr(planner, "_choose", gated_choose)
        monkeypatch.setenv("CLCONV_INTERIM", "1")

    def last_ran_interim(self) -> bool:
        return interim.is_interim(self.configs[-1])


def small_integers(rng, shape):
    return rng.integers(-3, 4, shape).astype(np.float32)


def test_first_calls_run_interim_kernels_until_the_chosen_plan_is_built(queue, rng, monkeypatch):
    torch = pytest.importorskip("torch")
    recorder = Recorder(monkeypatch)
    options = dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    # a geometry of its own (in its batch and sizes), so no earlier test chose for it
    x, w, b = small_integers(rng, (3, 6, 11, 10)), small_integers(rng, (4, 3, 3, 2)), small_integers(rng, (4,))
    expected = torch.nn.functional.conv2d(*map(torch.from_numpy, (x, w, b)), **options).numpy()
    # the interim program itself may need building first: then the call waits for its chosen plan
    clconv.conv2d(x[:1, :, :7], w, b, **options)
    recorder.gate.set()
    clconv.finish_builds()
    recorder.gate.clear()

    for _ in range(2):  # the chosen plan's build waits at the gate: both calls run the interim plan
        np.testing.assert_array_equal(clconv.conv2d(x, w, b, **options), expected)
        assert recorder.last_ran_interim()
    recorder.background.clear()
    recorder.gate.set()
    clconv.finish_builds()
    np.testing.assert_array_equal(clconv.conv2d(x, w, b, **options), expected)
    assert not recorder.last_ran_interim()
    # on a CPU the background build launched the chosen kernels once (PoCL compiles at the first
    # launch): the call above found them compiled; elsewhere nothing runs in the background
    cpu = bool(queue.device.type & cl.device_type.CPU)
    assert recorder.background == ([recorder.configs[-1]] if cpu else [])
    problem = Problem(geometry("n3g2c6o4i11x10k3x2s2x1p1x2d1x2"), "forward", "float32", bias=True)
    assert not interim.is_interim(planner.plan(problem, queue).config)


def test_named_algorithms_measured_choices_and_the_setting_never_run_interim_kernels(queue, rng, monkeypatch):
    recorder = Recorder(monkeypatch)
    recorder.gate.set()
    x, w = small_integers(rng, (2, 3, 9, 13)), small_integers(rng, (5, 3, 3, 3))
    expected = clconv.conv2d(x, w, algorithm="direct")
    assert not recorder.last_ran_interim()
    # a measured choice (CLCONV_TUNE=1; its measuring replaced by the first candidate that builds)
    monkeypatch.setattr(settings, "tuning_enabled", lambda: True)
    monkeypatch.setattr(planner, "_measure", planner._first_that_builds)
    np.testing.assert_array_equal(clconv.conv2d(x[:, :, 1:], w), expected[:, :, 1:])
    assert not recorder.last_ran_interim()
    monkeypatch.undo()
    recorder = Recorder(monkeypatch)
    monkeypatch.setenv("CLCONV_INTERIM", "0")
    np.testing.assert_array_equal(clconv.conv2d(x[:1], w), expected[:1])
    assert not recorder.last_ran_interim()


def test_a_failed_background_build_is_made_again_where_the_caller_sees_it(queue, rng, monkeypatch):
    """The chosen plan's build fails on the background thread: the call that takes the job
    chooses again on its own thread (here it succeeds; had it failed too, the caller would see
    that error)."""
    recorder = Recorder(monkeypatch)
    x, dy_shape = small_integers(rng, (2, 4, 10, 9)), (2, 4, 10, 9)
    w = small_integers(rng, (4, 1, 3, 3))
    options = dict(padding=1, groups=4)
    dy = small_integers(rng, dy_shape)
    recorder.gate.set()
    clconv.conv2d_weight(x[:1, :, :6], w.shape, dy[:1, :, :6], **options)  # the interim program, if not yet built
    clconv.finish_builds()
    recorder.gate.clear()
    recorder.fail_background = True
    first = clconv.conv2d_weight(x, w.shape, dy, **options)
    assert recorder.last_ran_interim()
    recorder.gate.set()
    clconv.finish_builds()
    again = clconv.conv2d_weight(x, w.shape, dy, **options)
    assert not recorder.last_ran_interim()
    np.testing.assert_array_equal(first, again)  # small integers: exact either way


def test_an_interim_plan_refused_at_launch_gives_way_to_the_chosen_plan(queue, rng, monkeypatch):
    recorder = Recorder(monkeypatch)
    recorder.gate.set()
    x, w = small_integers(rng, (3, 5, 8, 7)), small_integers(rng, (3, 5, 1, 3))
    clconv.conv2d(x[:1], w, padding=(0, 1))  # the interim program, if not yet built
    clconv.finish_builds()
    recorder.refuse_interim = True
    got = clconv.conv2d(x, w, padding=(0, 1))
    assert interim.is_interim(recorder.configs[-2]) and not recorder.last_ran_interim()
    np.testing.assert_array_equal(got, clconv.conv2d(x, w, padding=(0, 1), algorithm="direct"))


def test_background_builds_run_side_by_side_up_to_the_thread_count():
    """BackgroundBuilds starts up to workers() threads, read at each submit: with 3, three jobs
    that wait for each other all run at once; a job submitted twice under one key runs once."""
    threads = 3
    builds = planner.BackgroundBuilds(lambda: threads)
    together = threading.Barrier(threads, timeout=30)
    ran: list[int] = []

    def job(n):
        together.wait()  # breaks (an exception, the job fails) unless all three run at once
        ran.append(n)
        return n

    jobs = [builds.submit(("job", n), job, n) for n in range(threads)]
    assert builds.submit(("job", 0), job, 99) is jobs[0]
    assert [j.result(timeout=60) for j in jobs] == [0, 1, 2] and sorted(ran) == [0, 1, 2]
    assert builds.take(("job", 1)) is jobs[1] and builds.get(("job", 1)) is None
    builds.close()
