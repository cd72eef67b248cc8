"""Helpers shared by the tests: random tensors, poisoned outputs, tolerances."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cl_array


def random(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """Standard-normal data (never zeros: zeros hide unwritten outputs and wrong indexing)."""
    return rng.standard_normal(shape).astype(dtype)


def poisoned(queue, shape, dtype=np.float32) -> cl_array.Array:
    """A device output pre-filled with NaN, so any element a kernel fails to write fails the check."""
    out = cl_array.empty(queue, tuple(shape), dtype)
    out.fill(np.nan)
    return out


def tolerance(reduction_length: int, dtype=np.float32) -> float:
    """Absolute tolerance for sums of ``reduction_length`` products of O(1) values: rounding
    grows about like sqrt(length); float64 gets the same shape at its own epsilon."""
    eps = np.finfo(dtype).eps
    return float(8 * eps * max(1.0, np.sqrt(reduction_length)) * 4)


def assert_matches(got, ref: np.ndarray, reduction_length: int, dtype=np.float32) -> None:
    """``got`` equals the float64 reference within a tolerance scaled by the reduction length;
    NaN anywhere (an unwritten poisoned element) fails."""
    got = got.get() if isinstance(got, cl_array.Array) else np.asarray(got)
    assert got.shape == ref.shape, f"shape {got.shape} != reference {ref.shape}"
    assert np.isfinite(got).all(), f"{np.count_nonzero(~np.isfinite(got))} elements unwritten or non-finite"
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    atol = tolerance(reduction_length, dtype) * scale
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    assert err <= atol, f"max abs error {err:.3e} > tolerance {atol:.3e} (reduction length {reduction_length})"


OPERANDS = {"forward": ("x", "w", "y"), "backward_data": ("dy", "w", "dx"), "backward_weight": ("x", "dy", "dw")}


def run_prepared(queue, rng: np.random.Generator, problem, algorithm, config: dict):
    """Prepare ``algorithm`` with ``config`` for ``problem`` (its dtype; a bias if it has one), run it
    on fresh random data into a NaN-poisoned output, compare with the float64 reference; return
    the runner.  For tests of one algorithm's configurations, below the public ops."""
    import pyopencl as cl

    from clconv import planner, reference
    from clconv.runtime import Operand

    g, dtype = problem.geometry, np.dtype(problem.dtype)
    a_name, b_name, out_name = OPERANDS[problem.pass_]
    shapes = {"x": g.input_shape, "w": g.weight_shape, "dy": g.output_shape, "y": g.output_shape,
              "dx": g.input_shape, "dw": g.weight_shape,
              "bias": (g.out_channels if problem.pass_ == "forward" else g.in_channels,)}
    names = (a_name, b_name, "bias") if problem.bias else (a_name, b_name)
    host = {name: random(rng, shapes[name], dtype) for name in names}
    mf = cl.mem_flags
    operands = {name: Operand(cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=value))
                for name, value in host.items()}
    out = np.full(shapes[out_name], np.nan, dtype)
    operands[out_name] = Operand(cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out))
    runner = planner.prepare(problem, algorithm, config, queue)
    cl.wait_for_events(runner.run(queue, operands))
    cl.enqueue_copy(queue, out, operands[out_name].buffer)
    queue.finish()
    ref = reference.run_pass(problem.pass_, g, host[a_name].astype(np.float64), host[b_name].astype(np.float64),
                             host["bias"].astype(np.float64) if problem.bias else None)
    assert_matches(out, ref, problem.spec.reduction_length(g), dtype)
    return runner
