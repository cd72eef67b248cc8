"""The public convolution ops: PyTorch's ``torch.nn.functional`` / ``torch.nn.grad`` semantics.

Each op: check the tensors' types -> resolve the geometry (geometry.py) -> map the op onto one pass
of the canonical convolution -> plan (planner.py) -> launch.  Nothing is allocated, rendered or
built before every argument has been checked.

============================ ===================== =========================================
op                           canonical pass        roles
============================ ===================== =========================================
conv{1,2,3}d                 forward               x = input, w = weight, y = result
conv{1,2,3}d_input           backward_data         dy = grad_output, dx = result
conv{1,2,3}d_weight          backward_weight       x = input, dy = grad_output, dw = result
conv_transpose{1,2,3}d       backward_data         dy = input, dx = result (+ bias)
conv_transpose{1,2,3}d_input forward               x = grad_output, y = result
conv_transpose{1,2,3}d_weight backward_weight      x = grad_output, dy = input, dw = result
============================ ===================== =========================================
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any, Callable, Sequence, Tuple, Union

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from . import geometry as geo
from . import tuning
from .algorithms import REGISTRY, LaunchError, Problem, bias_gradient_runner
from .geometry import ConvGeometry, Resolved
from .planner import _label as planner_label
from .planner import candidates, check_serves, get_algorithm, plan, remembered_choice, tune
from .tensors import (
    check_allocation, check_device_dtype, check_out, check_tensor, common_dtype, empty_array, pick_queue,
    result_allocator, to_operand,
)

log = logging.getLogger("clconv.ops")

Tensor = Any  # numpy.ndarray | pyopencl.array.Array
IntOrTuple = Union[int, Sequence[int]]  # one value for every spatial dim, or one per dim
Padding = Union[int, Sequence[int], Sequence[Tuple[int, int]], str]  # also (begin, end) pairs, 'same', 'valid'

# Set by render(): resolve and plan the call, then return the kernel sources instead of running.
_RENDER_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("clconv_render_only", default=False)


def _check_algorithm_argument(algorithm: Any, pass_: str) -> None:
    if algorithm != "auto":
        get_algorithm(algorithm, pass_)


def _run_pass(
    pass_: str,
    resolved: Resolved,
    tensors: dict[str, Tensor],
    user_tensors: dict[str, Tensor],
    algorithm: str,
    queue: cl.CommandQueue | None,
    out: Tensor | None,
) -> Tensor:
    """Run one canonical pass; ``tensors`` maps canonical roles (x, w, dy, bias) to user tensors."""
    g = resolved.geometry
    dtype = common_dtype(user_tensors)
    queue, as_array = pick_queue(user_tensors, queue)
    has_bias = tensors.get("bias") is not None
    # Everything below depends only on this key, so a repeated call skips it (host overhead).
    key = (pass_, resolved, dtype, queue.int_ptr, algorithm, has_bias)
    static = _static_checks.get(key)
    if static is None:
        static = _check_pass(pass_, resolved, dtype, queue, algorithm, has_bias)
        _static_checks[key] = static
    problem, result_name, user_shape = static
    if out is not None:
        check_out(out, user_shape, dtype, queue)
        as_array = True

    if _RENDER_ONLY.get():
        return _render_sources(problem, queue, algorithm)
    if g.batch == 0:
        return _empty_result(pass_, user_shape, dtype, queue, as_array, out)

    operands, keep_alive = {}, []
    for role, value in tensors.items():
        if value is not None:
            operands[role], holder = to_operand(value, queue)
            keep_alive.append(holder)
    result = out if out is not None else empty_array(queue, user_shape, dtype, result_allocator(user_tensors))
    operands[result_name], _ = to_operand(result, queue)
    wait_for = [e for v in user_tensors.values() if isinstance(v, cl_array.Array) for e in v.events] or None
    if out is not None:
        wait_for = (wait_for or []) + list(out.events)
    events = _launch(problem, queue, algorithm, operands, wait_for)
    result.add_event(events[-1])
    return result if as_array else result.get(queue)


def _launch(problem: Problem, queue: cl.CommandQueue, algorithm: str, operands: dict, wait_for) -> list:
    """Run the planned runner.  Under ``auto``, a launch the driver refuses (after the planner's
    resource checks passed) is remembered as failed in the tuning database and the choice is made
    again without it; a named algorithm's failure is the caller's to see."""
    runner = plan(problem, queue, algorithm)
    try:
        return runner.run(queue, operands, wait_for=wait_for)
    except LaunchError:
        if algorithm != "auto":
            raise
        entry = dict(tuning.lookup(queue.device, problem.key()) or {})
        failed = [*entry.get("failed", []), planner_label(REGISTRY[runner.algorithm], runner.config)]
        log.warning("clconv: %s failed to launch; choosing again without it", runner.label or runner.algorithm)
        replacement, _ = tune(problem, queue, {**entry, "failed": failed})
        if replacement is runner:
            raise
        return replacement.run(queue, operands, wait_for=wait_for)


_static_checks: dict[tuple, tuple[Problem, str, tuple[int, ...]]] = {}


def _check_pass(pass_: str, resolved: Resolved, dtype: np.dtype, queue: cl.CommandQueue, algorithm: str,
                has_bias: bool) -> tuple[Problem, str, tuple[int, ...]]:
    """The checks of a pass that depend only on geometry, dtype, device and algorithm."""
    g = resolved.geometry
    check_device_dtype(dtype, queue)
    problem = Problem(g, pass_, dtype.name, bias=has_bias)
    if algorithm != "auto":
        check_serves(get_algorithm(algorithm, pass_), problem, queue.device)
    result_name = {"forward": "y", "backward_data": "dx", "backward_weight": "dw"}[pass_]
    shape = {"forward": g.output_shape, "backward_data": g.input_shape, "backward_weight": g.weight_shape}[pass_]
    user_shape = shape[1:] if resolved.unbatched and pass_ != "backward_weight" else shape
    check_allocation("the result", user_shape, dtype, queue)
    return problem, result_name, user_shape


def _render_sources(problem: Problem, queue: cl.CommandQueue, algorithm: str) -> str:
    device = queue.device
    # what a call would run; rendering never measures, so an unmade choice shows the heuristic's first
    chosen, config = remembered_choice(problem, device, algorithm) or candidates(problem, device)[0]
    runner = chosen.prepare(problem, config, None, device)
    parts = [f"// clconv: {problem.pass_} of {problem.geometry.tag()} ({problem.dtype}) with algorithm "
             f"{chosen.name!r}, config {config}, on {device.name!r}"]
    for template, source in runner.sources:
        parts.append(f"// ---- rendered from {template} ----\n{source}")
    return "\n".join(parts)


def render(op: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The OpenCL source ``op(*args, **kwargs)`` would build and run, without building or running it.

    Example: ``print(clconv.render(clconv.conv2d, x, w, padding=1, algorithm="im2col"))``.
    """
    token = _RENDER_ONLY.set(True)
    try:
        result = op(*args, **kwargs)
    finally:
        _RENDER_ONLY.reset(token)
    if not isinstance(result, str):
        raise TypeError(f"{getattr(op, '__name__', op)!r} is not a clconv convolution op")
    return result


def _empty_result(pass_, shape, dtype, queue, as_array, out):
    """Batch 0: an empty activation, or (weight gradient) zeros: a sum over no images."""
    host = np.zeros(shape, dtype)
    if not as_array:
        return host
    if out is not None:
        out.set(host) if out.size else None
        return out
    return cl_array.to_device(queue, host)


def _checked(**tensors: Any) -> dict[str, Tensor]:
    optional = {"bias"}
    return {name: check_tensor(name, value, optional=name in optional) for name, value in tensors.items()}


# -- forward convolution ---------------------------------------------------------------------------


def _conv(ndim, input, weight, bias, stride, padding, dilation, groups, algorithm, queue, out):
    user = _checked(input=input, weight=weight, bias=bias)
    _check_algorithm_argument(algorithm, "forward")
    resolved = geo.resolve_conv(ndim, input.shape, weight.shape, None if bias is None else bias.shape,
                                stride, padding, dilation, groups)
    return _run_pass("forward", resolved, {"x": input, "w": weight, "bias": bias}, user, algorithm, queue, out)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1, padding: Padding = 0,
           dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
           queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """1D convolution, as ``torch.nn.functional.conv1d``: input ``(N, C_in, W)`` or ``(C_in, W)``,
    weight ``(C_out, C_in/groups, kW)``, bias ``(C_out,)``.  ``padding`` also takes ``'same'``,
    ``'valid'`` and ``((begin, end),)``.  Raises ValueError/TypeError naming any bad argument."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups, algorithm, queue, out)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1, padding: Padding = 0,
           dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
           queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """2D convolution, as ``torch.nn.functional.conv2d``: input ``(N, C_in, H, W)`` or unbatched,
    weight ``(C_out, C_in/groups, kH, kW)``; asymmetric padding as ``((top, bottom), (left, right))``."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups, algorithm, queue, out)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1, padding: Padding = 0,
           dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
           queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """3D convolution, as ``torch.nn.functional.conv3d``: input ``(N, C_in, D, H, W)`` or unbatched."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups, algorithm, queue, out)


# -- gradients of the convolution (torch.nn.grad) ----------------------------------------------------


def _conv_input(ndim, input_size, weight, grad_output, stride, padding, dilation, groups, algorithm, queue, out):
    user = _checked(weight=weight, grad_output=grad_output)
    _check_algorithm_argument(algorithm, "backward_data")
    resolved = geo.resolve_conv_input(ndim, input_size, weight.shape, grad_output.shape, stride, padding, dilation, groups)
    return _run_pass("backward_data", resolved, {"dy": grad_output, "w": weight}, user, algorithm, queue, out)


def _conv_weight(ndim, input, weight_size, grad_output, stride, padding, dilation, groups, algorithm, queue, out):
    user = _checked(input=input, grad_output=grad_output)
    _check_algorithm_argument(algorithm, "backward_weight")
    resolved = geo.resolve_conv_weight(ndim, input.shape, weight_size, grad_output.shape, stride, padding, dilation, groups)
    return _run_pass("backward_weight", resolved, {"x": input, "dy": grad_output}, user, algorithm, queue, out)


def conv1d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride: IntOrTuple = 1,
                 padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
                 queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv1d w.r.t. its input, of shape ``input_size`` (as ``torch.nn.grad.conv1d_input``)."""
    return _conv_input(1, input_size, weight, grad_output, stride, padding, dilation, groups, algorithm, queue, out)


def conv2d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride: IntOrTuple = 1,
                 padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
                 queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv2d w.r.t. its input, of shape ``input_size`` (as ``torch.nn.grad.conv2d_input``)."""
    return _conv_input(2, input_size, weight, grad_output, stride, padding, dilation, groups, algorithm, queue, out)


def conv3d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride: IntOrTuple = 1,
                 padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
                 queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv3d w.r.t. its input, of shape ``input_size`` (as ``torch.nn.grad.conv3d_input``)."""
    return _conv_input(3, input_size, weight, grad_output, stride, padding, dilation, groups, algorithm, queue, out)


def conv1d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                  padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
                  queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv1d w.r.t. its weight, of shape ``weight_size`` (as ``torch.nn.grad.conv1d_weight``)."""
    return _conv_weight(1, input, weight_size, grad_output, stride, padding, dilation, groups, algorithm, queue, out)


def conv2d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                  padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
                  queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv2d w.r.t. its weight, of shape ``weight_size`` (as ``torch.nn.grad.conv2d_weight``)."""
    return _conv_weight(2, input, weight_size, grad_output, stride, padding, dilation, groups, algorithm, queue, out)


def conv3d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                  padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, algorithm: str = "auto",
                  queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv3d w.r.t. its weight, of shape ``weight_size`` (as ``torch.nn.grad.conv3d_weight``)."""
    return _conv_weight(3, input, weight_size, grad_output, stride, padding, dilation, groups, algorithm, queue, out)


# -- transposed convolution and its gradients -------------------------------------------------------


def _conv_transpose(ndim, input, weight, bias, stride, padding, output_padding, groups, dilation, algorithm, queue, out):
    user = _checked(input=input, weight=weight, bias=bias)
    _check_algorithm_argument(algorithm, "backward_data")
    resolved = geo.resolve_conv_transpose(ndim, input.shape, weight.shape, None if bias is None else bias.shape,
                                          stride, padding, output_padding, groups, dilation)
    return _run_pass("backward_data", resolved, {"dy": input, "w": weight, "bias": bias}, user, algorithm, queue, out)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
                     padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1,
                     *, algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                     out: Tensor | None = None) -> Tensor:
    """1D transposed convolution, as ``torch.nn.functional.conv_transpose1d``: weight ``(C_in, C_out/groups, kW)``;
    output size ``(in-1)*stride - pad_begin - pad_end + dilation*(k-1) + output_padding + 1``."""
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation, algorithm, queue, out)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
                     padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1,
                     *, algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                     out: Tensor | None = None) -> Tensor:
    """2D transposed convolution, as ``torch.nn.functional.conv_transpose2d``."""
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation, algorithm, queue, out)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
                     padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1,
                     *, algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                     out: Tensor | None = None) -> Tensor:
    """3D transposed convolution, as ``torch.nn.functional.conv_transpose3d``."""
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation, algorithm, queue, out)


def _conv_transpose_input(ndim, grad_output, weight, stride, padding, output_padding, groups, dilation, algorithm, queue, out):
    user = _checked(grad_output=grad_output, weight=weight)
    _check_algorithm_argument(algorithm, "forward")
    resolved = geo.resolve_conv_transpose_input(ndim, grad_output.shape, weight.shape, stride, padding,
                                                output_padding, groups, dilation)
    return _run_pass("forward", resolved, {"x": grad_output, "w": weight}, user, algorithm, queue, out)


def _conv_transpose_weight(ndim, input, weight_size, grad_output, stride, padding, output_padding, groups, dilation,
                           algorithm, queue, out):
    user = _checked(input=input, grad_output=grad_output)
    _check_algorithm_argument(algorithm, "backward_weight")
    resolved = geo.resolve_conv_transpose_weight(ndim, input.shape, weight_size, grad_output.shape, stride, padding,
                                                 output_padding, groups, dilation)
    return _run_pass("backward_weight", resolved, {"x": grad_output, "dy": input}, user, algorithm, queue, out)


def conv_transpose1d_input(grad_output: Tensor, weight: Tensor, stride: IntOrTuple = 1, padding: Padding = 0,
                           output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1, *,
                           algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                           out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose1d w.r.t. its input: a forward conv1d of ``grad_output`` with ``weight``."""
    return _conv_transpose_input(1, grad_output, weight, stride, padding, output_padding, groups, dilation, algorithm, queue, out)


def conv_transpose2d_input(grad_output: Tensor, weight: Tensor, stride: IntOrTuple = 1, padding: Padding = 0,
                           output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1, *,
                           algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                           out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose2d w.r.t. its input."""
    return _conv_transpose_input(2, grad_output, weight, stride, padding, output_padding, groups, dilation, algorithm, queue, out)


def conv_transpose3d_input(grad_output: Tensor, weight: Tensor, stride: IntOrTuple = 1, padding: Padding = 0,
                           output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1, *,
                           algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                           out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose3d w.r.t. its input."""
    return _conv_transpose_input(3, grad_output, weight, stride, padding, output_padding, groups, dilation, algorithm, queue, out)


def conv_transpose1d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                            padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                            dilation: IntOrTuple = 1, *, algorithm: str = "auto",
                            queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose1d w.r.t. its weight ``(C_in, C_out/groups, kW)``."""
    return _conv_transpose_weight(1, input, weight_size, grad_output, stride, padding, output_padding, groups, dilation,
                                  algorithm, queue, out)


def conv_transpose2d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                            padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                            dilation: IntOrTuple = 1, *, algorithm: str = "auto",
                            queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose2d w.r.t. its weight."""
    return _conv_transpose_weight(2, input, weight_size, grad_output, stride, padding, output_padding, groups, dilation,
                                  algorithm, queue, out)


def conv_transpose3d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                            padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                            dilation: IntOrTuple = 1, *, algorithm: str = "auto",
                            queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose3d w.r.t. its weight."""
    return _conv_transpose_weight(3, input, weight_size, grad_output, stride, padding, output_padding, groups, dilation,
                                  algorithm, queue, out)


# -- bias gradient and convolution_backward ----------------------------------------------------------


def _bias_gradient(grad_output: Tensor, batched_shape: tuple[int, ...], queue: cl.CommandQueue | None) -> Tensor:
    """Sum of ``grad_output`` over batch and space, per channel."""
    queue, as_array = pick_queue({"grad_output": grad_output}, queue)
    dtype = np.dtype(grad_output.dtype)
    check_device_dtype(dtype, queue)
    batch, channels, spatial = batched_shape[0], batched_shape[1], batched_shape[2:]
    if batch == 0:
        host = np.zeros((channels,), dtype)
        return cl_array.to_device(queue, host) if as_array else host
    # A 1x1 identity geometry whose *output* is grad_output: the bias kernel sums that output.
    ndim = len(spatial)
    g = ConvGeometry(ndim, batch, 1, 1, channels, geo._pad3(spatial, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0),
                     (0, 0, 0), (1, 1, 1))
    runner = bias_gradient_runner(Problem(g, "backward_weight", dtype.name), queue, queue.device)
    operand, holder = to_operand(grad_output, queue)
    result = empty_array(queue, (channels,), dtype, result_allocator({"grad_output": grad_output}))
    db, _ = to_operand(result, queue)
    wait_for = list(grad_output.events) if isinstance(grad_output, cl_array.Array) else None
    events = runner.run(queue, {"dy": operand, "db": db}, wait_for=wait_for)
    result.add_event(events[-1])
    del holder
    return result if as_array else result.get(queue)


def convolution_backward(
    grad_output: Tensor,
    input: Tensor,
    weight: Tensor,
    *,
    stride: IntOrTuple = 1,
    padding: Padding = 0,
    dilation: IntOrTuple = 1,
    groups: int = 1,
    transposed: bool = False,
    output_padding: IntOrTuple = 0,
    output_mask: Sequence[bool] = (True, True, True),
    algorithm: str = "auto",
    queue: cl.CommandQueue | None = None,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """All three gradients of a (transposed) convolution at once, like ``aten::convolution_backward``.

    Returns ``(grad_input, grad_weight, grad_bias)``; entries whose ``output_mask`` is False are not
    computed and are None.  ``algorithm`` applies to the data and weight gradients.
    """
    user = _checked(grad_output=grad_output, input=input, weight=weight)
    common_dtype(user)
    if not isinstance(output_mask, (tuple, list)) or len(output_mask) != 3 or not all(
        isinstance(m, (bool, np.bool_)) for m in output_mask
    ):
        raise TypeError(f"output_mask must be a tuple of three bools, got {output_mask!r}")
    if not isinstance(transposed, (bool, np.bool_)):
        raise TypeError(f"transposed must be a bool, got {transposed!r}")
    ndim = len(weight.shape) - 2
    if ndim not in (1, 2, 3):
        raise ValueError(f"weight must be 3D, 4D or 5D (a 1D/2D/3D convolution), got shape {tuple(weight.shape)}")
    # Validate the whole call first (each helper re-validates its part; all before any work).
    if transposed:
        resolved = geo.resolve_conv_transpose(ndim, input.shape, weight.shape, None, stride, padding,
                                              output_padding, groups, dilation)
        expected = (resolved.geometry.batch, resolved.geometry.in_channels, *resolved.geometry.user_in_size)
    else:
        if output_padding not in (0, (0,) * ndim, [0] * ndim):
            raise ValueError(f"output_padding must be 0 for a non-transposed convolution, got {output_padding!r}")
        resolved = geo.resolve_conv(ndim, input.shape, weight.shape, None, stride, padding, dilation, groups)
        expected = resolved.geometry.output_shape
    if resolved.unbatched:
        expected = expected[1:]
    if tuple(grad_output.shape) != tuple(expected):
        raise ValueError(f"grad_output must have shape {tuple(expected)} for this convolution, got {tuple(grad_output.shape)}")
    if algorithm != "auto":
        if output_mask[0]:
            _check_algorithm_argument(algorithm, "forward" if transposed else "backward_data")
        if output_mask[1]:
            _check_algorithm_argument(algorithm, "backward_weight")

    grad_input = grad_weight = grad_bias = None
    if transposed:
        if output_mask[0]:
            grad_input = _conv_transpose_input(ndim, grad_output, weight, stride, padding, output_padding, groups,
                                               dilation, algorithm, queue, None)
        if output_mask[1]:
            grad_weight = _conv_transpose_weight(ndim, input, tuple(weight.shape), grad_output, stride, padding,
                                                 output_padding, groups, dilation, algorithm, queue, None)
    else:
        if output_mask[0]:
            grad_input = _conv_input(ndim, tuple(input.shape), weight, grad_output, stride, padding, dilation,
                                     groups, algorithm, queue, None)
        if output_mask[1]:
            grad_weight = _conv_weight(ndim, input, tuple(weight.shape), grad_output, stride, padding, dilation,
                                       groups, algorithm, queue, None)
    if output_mask[2]:
        shape = tuple(grad_output.shape)
        grad_bias = _bias_gradient(grad_output, (1, *shape) if resolved.unbatched else shape, queue)
    return grad_input, grad_weight, grad_bias
