"""Helpers shared by the tests: random data, poisoned and guarded device tensors, the one comparison
with the float64 reference, and running a prepared algorithm below the public ops.

The case type and the shared case tables are in ``cases.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from clconv import limits
from clconv.reference import tolerance
from clconv.tools.devices import Described, StandIn


_BAD_BINARY_CHILD = """
import clconv, pyopencl as cl
queue = clconv.default_queue()
try:
    cl.Program(queue.context, [queue.device], [b"\\x7fELF but not a program " * 20]).build()
except cl.Error:
    pass
"""
_refuses_bad_binaries: dict[str, bool] = {}


def skip_unless_bad_binaries_are_refused(queue) -> None:
    """Skip, saying why, where the OpenCL implementation ends the process on an invalid program
    binary rather than refusing it with an error as the specification says (Mesa 22.3's rusticl
    panics: 'unknown version', program.rs; docs/portability.md).  Asked once, in a child process."""
    import subprocess
    import sys

    name = queue.device.platform.name
    if name not in _refuses_bad_binaries:
        done = subprocess.run([sys.executable, "-c", _BAD_BINARY_CHILD], capture_output=True, timeout=120)
        _refuses_bad_binaries[name] = done.returncode == 0
    if not _refuses_bad_binaries[name]:
        import pytest

        pytest.skip(f"{name!r} ends the process on an invalid program binary instead of refusing it (upstream "
                    "bug): the checksum is what keeps a bad entry from reaching it")


def fake_device(gpu: bool, compute_units: int, work_group: int = 1024, local_mem: int = 48 << 10,
                global_mem: int = 16 << 30, float_lanes: int = 1) -> StandIn:
    """A device described by hand for checks that run nothing (clconv.tools.devices), its limits
    registered with clconv.limits, so no probe runs for it."""
    return Described(name="a fake device", gpu=gpu, compute_units=compute_units, work_group=work_group,
                     work_item_sizes=(work_group,) * 3, local_mem=local_mem, global_mem=global_mem,
                     float_lanes=float_lanes).stand_in()


def random(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """Standard-normal data (never zeros: zeros hide unwritten outputs and wrong indexing)."""
    return rng.standard_normal(shape).astype(dtype)


def poisoned(queue, shape, dtype=np.float32) -> cl_array.Array:
    """A device output pre-filled with NaN, so any element a kernel fails to write fails the check."""
    # from the host: pyopencl's fill() builds a kernel in the dtype (none for bfloat16)
    return cl_array.to_device(queue, np.full(tuple(shape), np.nan, dtype))


def assert_matches(got, ref: np.ndarray, reduction_length: int, dtype=np.float32, share: float = 1.0) -> None:
    """``got`` equals the float64 reference within ``clconv.reference.tolerance`` of the reduction
    length (``share`` of it, for a bound an algorithm's measured error warrants), relative to the
    largest reference value; NaN anywhere (an unwritten poisoned element) fails."""
    got = got.get() if isinstance(got, cl_array.Array) else np.asarray(got)
    assert got.shape == ref.shape, f"shape {got.shape} != reference {ref.shape}"
    assert np.isfinite(got).all(), f"{np.count_nonzero(~np.isfinite(got))} elements unwritten or non-finite"
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    atol = tolerance(reduction_length, dtype) * scale * share
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    assert err <= atol, f"max abs error {err:.3e} > tolerance {atol:.3e} (reduction length {reduction_length})"


# -- guarded tensors (benchdnn's out-of-bounds check) -----------------------------------------------------

SENTINEL = -1234.5625  # exactly representable in float32 and float64; no kernel computes it by accident
MARGIN_BEFORE, MARGIN_AFTER = 13, 29  # elements; odd, so views start at unaligned offsets


class Guarded:
    """A device tensor of ``shape`` that is a view into a larger buffer, between margins.

    An *output* (no ``inner``): margins hold :data:`SENTINEL` and the tensor NaN, so a write past
    either end changes a margin and an element left unwritten stays NaN.  An *input* (``inner``
    given): the tensor holds ``inner`` and the margins NaN, so a read past either end turns a result
    NaN.  :meth:`check` asserts the margins are untouched (bit for bit), and for an input that the
    tensor itself is too (inputs are read-only).
    """

    def __init__(self, queue, shape, dtype=np.float32, inner: np.ndarray | None = None):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        n = math.prod(self.shape)
        self.fill = self.dtype.type(np.nan if inner is not None else SENTINEL)
        host = np.full(MARGIN_BEFORE + n + MARGIN_AFTER, self.fill, self.dtype)
        host[MARGIN_BEFORE:MARGIN_BEFORE + n] = np.nan if inner is None else np.asarray(inner, self.dtype).ravel()
        self.inner = None if inner is None else host[MARGIN_BEFORE:MARGIN_BEFORE + n].copy()
        self.whole = cl_array.to_device(queue, host)
        self.view = self.whole[MARGIN_BEFORE:MARGIN_BEFORE + n].reshape(self.shape)
        assert self.view.offset == MARGIN_BEFORE * self.dtype.itemsize and self.view.base_data is self.whole.base_data

    def check(self) -> None:
        host = self.whole.get()
        n = math.prod(self.shape)
        bits = np.dtype(f"u{self.dtype.itemsize}")  # compare bits: the fill may be a NaN
        for name, region in (("before", host[:MARGIN_BEFORE]), ("after", host[MARGIN_BEFORE + n:])):
            bad = np.flatnonzero(region.view(bits) != np.asarray(self.fill).view(bits))
            assert bad.size == 0, f"out-of-bounds write: margin words {bad.tolist()} {name} the tensor changed"
        if self.inner is not None:
            body = host[MARGIN_BEFORE:MARGIN_BEFORE + n]
            changed = np.count_nonzero(body.view(bits) != self.inner.view(bits))
            assert changed == 0, f"{changed} elements of an input changed"


def guarded(queue, shape, dtype=np.float32, inner: np.ndarray | None = None) -> Guarded:
    """A :class:`Guarded` output (``inner`` None) or input (``inner`` its values)."""
    return Guarded(queue, shape, dtype, inner)


# -- below the public ops ---------------------------------------------------------------------------------


def run_prepared(queue, rng: np.random.Generator, problem, algorithm, config: dict, share: float = 1.0):
    """Prepare ``algorithm`` with ``config`` for ``problem`` (its dtype; a bias and the epilogue's
    residual if it has them), run it on fresh random data into a NaN-poisoned output, compare with
    the float64 reference; return the runner (within ``share`` of the tolerance: assert_matches).  A channels-last problem gets its
    activations stored channels-last.  For tests of one algorithm's configurations, below the public ops.

    A configuration the test names that needs larger work-groups than the device grants (Mesa's
    llvmpipe grants 32 work-items) skips, saying so; those the algorithm offers must fit and run."""
    import pytest

    from clconv import planner

    fit = limits.of(queue.device, queue.context)
    too_large = [call.local_size for call in algorithm.plan(problem, config, queue.device).calls
                 if call.local_size is not None and not fit.fits(call.local_size)]
    if too_large and config not in algorithm.configs(problem, queue.device):
        pytest.skip(f"{algorithm.name} {config} needs work-groups of {too_large[0]}; {queue.device.name!r} grants "
                    f"{fit.work_group} work-items")
    return check_runner(queue, rng, problem, planner.prepare(problem, algorithm, config, queue), share)


def skip_without_fp64(queue, dtype: str = "float64") -> None:
    """Skip (pytest) a ``dtype`` float64 test where the device has no cl_khr_fp64."""
    import pytest

    from clconv.device import supports_fp64

    if dtype == "float64" and not supports_fp64(queue.device):
        pytest.skip(f"{queue.device.name} has no cl_khr_fp64")


def skip_without_cpu_lanes(request, kernels: str) -> None:
    """For an autouse fixture: skip (pytest) a test that runs kernels (takes ``queue``) where
    ``kernels``, offered only on CPUs with 4+ vector lanes, never run: GPUs, and CPUs without vector
    lanes (Mesa's llvmpipe, which vectorises across work-items: there each build of explicit 4-16
    lane vectors took minutes).  Oclgrind's test runs them there too, for memory safety
    (tests/reliability/test_oclgrind.py)."""
    import pytest

    if "queue" not in request.fixturenames:
        return
    queue = request.getfixturevalue("queue")
    fit = limits.of(queue.device, queue.context)
    if fit.gpu or fit.float_lanes < 4:
        pytest.skip(f"{kernels} are offered on CPUs with 4+ vector lanes; {queue.device.name!r} has "
                    f"{fit.float_lanes}{' (a GPU)' if fit.gpu else ''}")


def in_both_layouts(queue, tag: str, pass_: str, dtype: str):
    """``pass_`` of geometry ``tag`` stored as ``dtype``, channels-first then channels-last; skips
    (pytest) a float64 problem where the device has no cl_khr_fp64."""
    from cases import geometry
    from clconv.plan import Problem

    skip_without_fp64(queue, dtype)
    return [Problem(geometry(tag), pass_, dtype, layout=layout) for layout in ("channels_first", "channels_last")]


def result_of(queue, problem, algorithm, config: dict, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The pass's result of ``problem`` (float32, channels-first) from the host arrays ``inputs``
    (by role: x and w, dy and w, x and dy) by ``algorithm`` with ``config``, into a NaN-poisoned
    buffer: for exact and repeatability checks whose data the caller chooses (small integers)."""
    from clconv import planner
    from clconv.runtime import Operand

    runner = planner.prepare(problem, algorithm, config, queue)
    mf = cl.mem_flags
    spec = problem.spec
    result = np.full(spec.result_shape(problem.geometry), np.nan, np.float32)
    ops = {role: Operand(cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=inputs[role]))
           for role in spec.inputs}
    ops[spec.result] = Operand(cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=result))
    cl.wait_for_events(runner.run(queue, ops))
    cl.enqueue_copy(queue, result, ops[spec.result].buffer)
    queue.finish()
    return result


def check_runner(queue, rng: np.random.Generator, problem, runner, share: float = 1.0):
    """Run ``runner`` (built for ``problem``) as :func:`run_prepared` does, and compare its result
    with the float64 reference; return it."""
    from clconv import reference
    from clconv.dtypes import numpy_dtype
    from clconv.epilogue import apply_reference
    from clconv.passes import ACTIVATION_ROLES
    from clconv.runtime import Operand

    g, dtype, spec = problem.geometry, numpy_dtype(problem.dtype), problem.spec
    roles = (*spec.inputs, "bias") if problem.bias else spec.inputs
    host = {role: random(rng, spec.shape(role, g), dtype) for role in roles}
    if problem.epilogue.residual:
        host["residual"] = random(rng, spec.result_shape(g), dtype)

    def channels_last(role):  # activations are stored (N, *spatial, C) in a channels-last problem
        return problem.layout == "channels_last" and role in ACTIVATION_ROLES

    def stored(role, value):
        return np.ascontiguousarray(np.moveaxis(value, 1, -1)) if channels_last(role) else value

    mf = cl.mem_flags
    operands = {role: Operand(cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=stored(role, value)))
                for role, value in host.items()}
    out = stored(spec.result, np.full(spec.result_shape(g), np.nan, dtype))
    operands[spec.result] = Operand(cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out))
    cl.wait_for_events(runner.run(queue, operands))
    cl.enqueue_copy(queue, out, operands[spec.result].buffer)
    queue.finish()
    if channels_last(spec.result):
        out = np.moveaxis(out, -1, 1)
    a, b = (host[role].astype(np.float64) for role in spec.inputs)
    ref = reference.run_pass(problem.pass_, g, a, b)
    if problem.bias or not problem.epilogue.is_identity:
        bias = host["bias"].astype(np.float64).reshape(1, -1, *[1] * (ref.ndim - 2)) if problem.bias else None
        ref = apply_reference(problem.epilogue, ref, bias, host.get("residual"))
    assert_matches(out, ref, spec.reduction_length(g), dtype, share)
    return runner
