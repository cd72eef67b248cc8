"""The public convolution ops: PyTorch's ``torch.nn.functional`` / ``torch.nn.grad`` semantics.

Each op: check the tensors' types -> resolve the geometry (geometry.py) -> map the op onto one pass
of the canonical convolution (the table in passes.py) -> plan and run (planner.py).  Nothing is
allocated, rendered or built before every argument has been checked.  :func:`render` resolves a
call the same way and shows the kernels it would run instead of running them.
"""

from __future__ import annotations

import inspect
import operator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple, Sequence, Tuple, Union

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from . import resolve
from . import planner
from .caches import Cache
from .geometry import ConvGeometry
from .resolve import Resolved
from .passes import OPS
from .dtypes import name_of
from .epilogue import IDENTITY, Epilogue, check as check_epilogue
from .plan import CHANNELS_FIRST, CHANNELS_LAST, Problem, check_layout
from .runtime import Operand
from .tensors import (
    Bound, bind, bound, check_allocation, check_device_dtype, check_out, check_tensor, common_dtype, empty_array,
    pick_queue, to_operand, usual_array,
)

Tensor = Any  # numpy.ndarray | pyopencl.array.Array
IntOrTuple = Union[int, Sequence[int]]  # one value for every spatial dim, or one per dim
Padding = Union[int, Sequence[int], Sequence[Tuple[int, int]], str]  # also (begin, end) pairs, 'same', 'valid'


@dataclass(frozen=True)
class _Static:
    """What a call's checks derive from its geometry, dtype, queue and algorithm alone."""

    problem: Problem
    dtype: np.dtype
    result_role: str
    result_shape: tuple[int, ...]  # as the user sees it (unbatched: no batch dimension)
    context: cl.Context  # the queue's (asked of the driver once: each ask makes a new wrapper)


class _Call(NamedTuple):
    """A checked call: ready to run (:func:`_execute`) or to render (:func:`render`)."""

    static: _Static
    tensors: dict[str, Tensor]  # canonical role -> user tensor, in the op's argument order
    queue: cl.CommandQueue
    as_array: bool
    algorithm: str
    out: Tensor | None
    bound: Bound | None = None  # the tensors as operands, where a repeated call made them as it checked them


_statics: Cache[_Static] = Cache("calls", maxsize=4096)


def _prepare(family: str, resolved: Resolved, user: dict[str, Tensor], algorithm: str,
             queue: cl.CommandQueue | None, out: Tensor | None, epilogue: Epilogue = IDENTITY,
             layout: str = CHANNELS_FIRST) -> _Call:
    """Check a call of op ``family`` whose geometry is ``resolved``; ``user`` maps the op's tensor
    arguments to tensors (checked already)."""
    op = OPS[family]
    dtype = common_dtype(user)
    queue, as_array = pick_queue(user, queue)
    roles = op.roles
    tensors = {roles[name]: value for name, value in user.items() if value is not None}
    has_bias = "bias" in tensors
    # Everything below depends only on this key, so a repeated call skips it (host overhead).
    key = (family, resolved, dtype, queue, algorithm, has_bias, epilogue, layout)
    static = _statics.get(key)
    if static is None:
        static = _statics.put(key, _check_static(op.pass_, resolved, dtype, queue, algorithm, has_bias, epilogue,
                                                 layout))
    residual = tensors.get("residual")
    if residual is not None and tuple(residual.shape) != static.result_shape:
        raise ValueError(f"residual must have the result's shape {static.result_shape}, got {tuple(residual.shape)}")
    if out is not None:
        _check_out(out, static, residual)
        as_array = True
    return _Call(static, tensors, queue, as_array, algorithm, out)


def _check_out(out: Tensor, static: _Static, residual: Tensor | None) -> None:
    """An ``out=`` Array for the result: its own checks, on every call (a repeated one's too)."""
    check_out(out, static.result_shape, static.dtype, static.context)
    if residual is not None and _overlap(out, residual):
        raise ValueError("out and residual share memory: the kernels read the residual while writing out; "
                         "pass a residual that does not overlap out")


def _check_static(pass_: str, resolved: Resolved, dtype: np.dtype, queue: cl.CommandQueue, algorithm: str,
                  has_bias: bool, epilogue: Epilogue, layout: str) -> _Static:
    """The checks of a pass that depend only on geometry, dtype, device and algorithm."""
    check_device_dtype(dtype, queue)
    problem = Problem(resolved.geometry, pass_, name_of(dtype), bias=has_bias, epilogue=epilogue, layout=layout)
    if algorithm != "auto":
        planner.check_serves(planner.get_algorithm(algorithm, pass_), problem, queue.device)
    shape = problem.spec.result_shape(resolved.geometry)
    if problem.spec.result_is_activation():
        shape = _user_shape(shape, resolved.unbatched, layout)
    check_allocation("the result", shape, dtype, queue)
    return _Static(problem, dtype, problem.spec.result, shape, queue.context)


def _first(shape: Any, ndim: int, layout: str) -> Any:
    """An activation's shape in ``layout`` as the channels-first shape the resolvers take:
    ``(N, *spatial, C)`` -> ``(N, C, *spatial)`` (unbatched ``(*spatial, C)`` -> ``(C, *spatial)``).
    A shape of the wrong rank is passed on as given, for the resolver to refuse by name."""
    if layout == CHANNELS_FIRST or not isinstance(shape, (tuple, list)) or len(shape) not in (ndim + 1, ndim + 2):
        return shape
    shape = tuple(shape)
    at = len(shape) - ndim - 1  # where the channel axis goes: after the batch, if any
    return (*shape[:at], shape[-1], *shape[at:-1])


@contextmanager
def _shapes_in(layout: str) -> Iterator[None]:
    """A resolver's shape error under channels_last says how the shapes were read."""
    try:
        yield
    except ValueError as exc:
        if layout != CHANNELS_LAST:
            raise
        raise ValueError(f"{exc} (layout='channels_last': activations are (N, *spatial, C), read here as "
                         f"(N, C, *spatial))") from None


def _resolve(layout: str, resolver: Callable[..., Resolved], *args: Any) -> Resolved:
    """``resolver(*args)``; under channels_last its shape errors also say how shapes were read."""
    try:
        return resolver(*args)
    except ValueError as exc:
        if layout != CHANNELS_LAST:
            raise
        raise ValueError(f"{exc} (layout='channels_last': activations are (N, *spatial, C), read here as "
                         f"(N, C, *spatial))") from None


def _user_shape(batched: tuple[int, ...], unbatched: bool, layout: str) -> tuple[int, ...]:
    """A canonical ``(N, C, *spatial)`` activation shape as the user's tensor has it."""
    shape = (*batched[:1], *batched[2:], batched[1]) if layout == CHANNELS_LAST else batched
    return shape[1:] if unbatched else shape


def _overlap(out: cl_array.Array, other: Tensor) -> bool:
    """Whether device Array ``other`` shares bytes of ``out``'s buffer."""
    if not isinstance(other, cl_array.Array) or other.base_data != out.base_data:
        return False
    return other.offset < out.offset + out.nbytes and out.offset < other.offset + other.nbytes


def _execute(call: _Call) -> Tensor:
    """Upload what is on the host, allocate the result, plan and enqueue; the result as given."""
    static, tensors, queue, as_array, algorithm, out, _ = call
    problem = static.problem
    if problem.geometry.batch == 0:
        return _empty_result(static.result_shape, static.dtype, queue, as_array, out)
    operands, allocator, wait_for, uploads = call.bound or bind(tensors, queue, out)
    result = out if out is not None else empty_array(queue, static.result_shape, static.dtype, allocator,
                                                     static.context)
    operands[static.result_role], _ = to_operand(result, queue)
    events = planner.run(problem, queue, algorithm, operands, wait_for)
    del uploads  # enqueued: OpenCL keeps their buffers until the kernels are done
    # The launches waited for every event the result had (out=), so the last one stands for them
    # all: an out= Array reused call after call keeps one event, where appending (add_event) grew
    # its list until pyopencl waited on the host every fourth call, and every call waited on the list.
    result.events[:] = [events[-1]]
    return result if as_array else result.get(queue)


def _empty_result(shape, dtype, queue, as_array, out):
    """Batch 0: an empty activation, or (weight gradient) zeros: a sum over no images."""
    host = np.zeros(shape, dtype)
    if not as_array:
        return host
    if out is not None:
        out.set(host) if out.size else None
        return out
    return cl_array.to_device(queue, host)


def _checked(**tensors: Any) -> dict[str, Tensor]:
    return {name: check_tensor(name, value, optional=name in ("bias", "residual")) for name, value in tensors.items()}


# -- repeated calls ---------------------------------------------------------------------------------

_repeats: Cache[_Static] = Cache("repeats", maxsize=4096)


def _repeatable(family: str, tensors: tuple[str, ...]) -> Callable[[Callable[..., _Call]], Callable[..., _Call]]:
    """A family's checking function (``ndim, *arguments`` -> :class:`_Call`), with a memo for the
    calls a stream repeats: device Arrays on one queue, no ``queue=``, an ``out=`` Array or none.

    Everything the checks derive (the resolved geometry, the problem, the result's shape) depends
    only on the tensors' shapes and dtypes, the other arguments and the queue; so a call whose key
    was checked in full before is left with the checks that depend on the tensors themselves (type,
    contiguity, offset: ``check_tensor``, in the full path's order and with its errors; ``out``'s
    shape, dtype, context and overlap with the residual).  Any other call (numpy tensors, an Array
    without a queue, Arrays of two queues, argument types the key does not take) takes the full
    path.  (Calls with ``out=`` took the full path too until 2026-12-03: ~1 us more a call.)"""
    roles = OPS[family].roles

    def decorate(check: Callable[..., _Call]) -> Callable[..., _Call]:
        names = list(inspect.signature(check).parameters)
        tensor_at = tuple((name, names.index(name), roles[name]) for name in tensors)
        queue_at, out_at, algorithm_at = names.index("queue"), names.index("out"), names.index("algorithm")
        others = operator.itemgetter(*[i for i, name in enumerate(names)
                                       if name not in tensors and i not in (queue_at, out_at)])

        def scan(args: tuple) -> tuple[tuple, dict[str, Tensor], Bound, bool] | None:
            """One pass over a call's tensors: the memo key (family, queue, the tensors' shapes and
            dtypes, the other arguments), the tensors by role, their operands with the result's
            allocator and wait list (what :func:`bind` makes), and whether every tensor passed
            check_tensor's usual case inline; None for a call the memo does not take."""
            if len(args) != len(names) or args[queue_at] is not None:
                return None
            out = args[out_at]
            if out is not None and type(out) is not cl_array.Array:
                return None  # the full path's TypeError
            queue: cl.CommandQueue | None = None
            layouts: list[tuple | None] = []
            present: dict[str, Tensor] = {}
            operands: dict[str, Operand] = {}
            events: list[cl.Event] = []
            allocator = None
            usual = True
            for _, i, role in tensor_at:
                value = args[i]
                if value is None:
                    layouts.append(None)
                    continue
                if type(value) is not cl_array.Array:
                    return None
                value_queue = value.queue
                if value_queue is None or (queue is not None and value_queue is not queue):
                    return None
                queue = value_queue
                layouts.append((value.shape, value.dtype))
                usual = usual and usual_array(value)
                present[role] = value
                operands[role] = Operand(value.base_data, value.offset // value.dtype.itemsize)
                if allocator is None:
                    allocator = value.allocator
                if value.events:
                    events += value.events
            if queue is None:
                return None
            try:
                # the resolvers' own memo key: 1, True and 1.0 apart, unhashable or unusual types refused
                plain = resolve.frozen(others(args))
            except TypeError:
                return None
            if out is not None and out.events:
                events += out.events
            return (family, queue, tuple(layouts), plain), present, bound(queue, operands, allocator, events, []), usual

        def checked(*args: Any, **kwargs: Any) -> _Call:
            scanned = None if kwargs else scan(args)
            static = _repeats.get(scanned[0]) if scanned is not None else None
            if scanned is not None and static is not None:
                key, present, bound_, usual = scanned
                if not usual:
                    for name, i, _ in tensor_at:
                        if args[i] is not None:
                            check_tensor(name, args[i])  # raises as the full path would
                out = args[out_at]
                if out is not None:
                    _check_out(out, static, present.get("residual"))
                return _Call(static, present, key[1], True, args[algorithm_at], out, bound_)
            call = check(*args, **kwargs)
            if scanned is not None:
                _repeats.put(scanned[0], call.static)
            return call

        checked.__wrapped__ = check  # type: ignore[attr-defined]
        return checked
    return decorate


# The public op functions, each with its family and dimensionality: what render() resolves.
_OP_OF: dict[Callable[..., Any], tuple[str, int]] = {}


def _op(family: str, ndim: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        _OP_OF[function] = (family, ndim)
        return function
    return register


def _call_of(op: Callable[..., Any], args: tuple, kwargs: dict) -> _Call:
    """The checked call ``op(*args, **kwargs)`` would make, without running it."""
    found = _OP_OF.get(op) if callable(op) else None
    if found is None:
        raise TypeError(f"{getattr(op, '__name__', op)!r} is not a clconv convolution op")
    family, ndim = found
    bound = inspect.signature(op).bind(*args, **kwargs)
    bound.apply_defaults()
    return _PREPARERS[family](ndim, **bound.arguments)


def tune(op: Callable[..., Any], *args: Any, **kwargs: Any) -> dict:
    """Measure every candidate (algorithm, tiles) for the pass ``op(*args, **kwargs)`` runs, store
    the fastest in the tuning database and return its entry; later ``algorithm='auto'`` calls of
    that geometry, in any process, use it.  (By default ``auto`` builds the heuristic's choice
    without measuring, as PyTorch's ``cudnn.benchmark`` is off by default; ``CLCONV_TUNE=1``
    measures every new geometry at its first call.)  Nothing runs on the arguments' data.

    Example: ``clconv.tune(clconv.conv2d, x, w, padding=1)``.
    """
    call = _call_of(op, args, kwargs)
    if call.algorithm != "auto":
        raise ValueError(f"algorithm must be 'auto' to tune (the choice is what tuning makes), got {call.algorithm!r}")
    problem = call.static.problem
    if not problem.geometry.batch:
        raise ValueError(f"the call's batch is empty (0 images, {problem.geometry.tag()}): it runs no kernel, so "
                         "there is nothing to tune; tune it with the batch it will run")
    _, entry = planner.tune(problem, call.queue, measure=True)
    return entry


def render(op: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The OpenCL source ``op(*args, **kwargs)`` would build and run, without building or running it.

    Example: ``print(clconv.render(clconv.conv2d, x, w, padding=1, algorithm="im2col"))``.
    """
    call = _call_of(op, args, kwargs)
    problem = call.static.problem
    if not problem.geometry.batch:
        what = "a zero weight gradient (a sum over no images)" if problem.pass_ == "backward_weight" else "an empty result"
        return (f"// clconv: {problem.pass_} of {problem.geometry.tag()} ({problem.dtype}): the batch is empty, so "
                f"the call returns {what} without building or running a kernel")
    return planner.render(problem, call.queue.device, call.algorithm)


# -- forward convolution ---------------------------------------------------------------------------


@_repeatable("conv", ("input", "weight", "bias", "residual"))
def _conv(ndim, input, weight, bias, stride, padding, dilation, groups, activation, negative_slope, residual, alpha,
          beta, layout, algorithm, queue, out):
    user = _checked(input=input, weight=weight, bias=bias, residual=residual)
    epilogue = check_epilogue(activation, negative_slope, alpha, beta, residual is not None)
    planner.check_algorithm(algorithm, OPS["conv"].pass_)
    layout = check_layout(layout)
    resolved = _resolve(layout, resolve.resolve_conv, ndim, _first(input.shape, ndim, layout), weight.shape,
                                    None if bias is None else bias.shape, stride, padding, dilation, groups)
    return _prepare("conv", resolved, user, algorithm, queue, out, epilogue, layout)


@_op("conv", 1)
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1, padding: Padding = 0,
           dilation: IntOrTuple = 1, groups: int = 1, *, activation: str | None = None, negative_slope: float = 0.01,
           residual: Tensor | None = None, alpha: float = 1.0, beta: float = 1.0, layout: str = "channels_first", algorithm: str = "auto",
           queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """1D convolution, as ``torch.nn.functional.conv1d``: input ``(N, C_in, W)`` or ``(C_in, W)``,
    weight ``(C_out, C_in/groups, kW)``, bias ``(C_out,)``.  ``padding`` also takes ``'same'``,
    ``'valid'`` and ``((begin, end),)``.  Raises ValueError/TypeError naming any bad argument."""
    return _execute(_conv(1, input, weight, bias, stride, padding, dilation, groups, activation, negative_slope, residual,
                          alpha, beta, layout, algorithm, queue, out))


@_op("conv", 2)
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1, padding: Padding = 0,
           dilation: IntOrTuple = 1, groups: int = 1, *, activation: str | None = None, negative_slope: float = 0.01,
           residual: Tensor | None = None, alpha: float = 1.0, beta: float = 1.0, layout: str = "channels_first", algorithm: str = "auto",
           queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """2D convolution, as ``torch.nn.functional.conv2d``: input ``(N, C_in, H, W)`` or unbatched,
    weight ``(C_out, C_in/groups, kH, kW)``; asymmetric padding as ``((top, bottom), (left, right))``."""
    return _execute(_conv(2, input, weight, bias, stride, padding, dilation, groups, activation, negative_slope, residual,
                          alpha, beta, layout, algorithm, queue, out))


@_op("conv", 3)
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1, padding: Padding = 0,
           dilation: IntOrTuple = 1, groups: int = 1, *, activation: str | None = None, negative_slope: float = 0.01,
           residual: Tensor | None = None, alpha: float = 1.0, beta: float = 1.0, layout: str = "channels_first", algorithm: str = "auto",
           queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """3D convolution, as ``torch.nn.functional.conv3d``: input ``(N, C_in, D, H, W)`` or unbatched."""
    return _execute(_conv(3, input, weight, bias, stride, padding, dilation, groups, activation, negative_slope, residual,
                          alpha, beta, layout, algorithm, queue, out))


# -- gradients of the convolution (torch.nn.grad) ----------------------------------------------------


@_repeatable("conv_input", ("weight", "grad_output"))
def _conv_input(ndim, input_size, weight, grad_output, stride, padding, dilation, groups, layout, algorithm, queue, out):
    user = _checked(weight=weight, grad_output=grad_output)
    planner.check_algorithm(algorithm, OPS["conv_input"].pass_)
    layout = check_layout(layout)
    resolved = _resolve(layout, resolve.resolve_conv_input, ndim, _first(input_size, ndim, layout), weight.shape,
                                          _first(grad_output.shape, ndim, layout), stride, padding, dilation, groups)
    return _prepare("conv_input", resolved, user, algorithm, queue, out, layout=layout)


@_repeatable("conv_weight", ("input", "grad_output"))
def _conv_weight(ndim, input, weight_size, grad_output, stride, padding, dilation, groups, layout, algorithm, queue, out):
    user = _checked(input=input, grad_output=grad_output)
    planner.check_algorithm(algorithm, OPS["conv_weight"].pass_)
    layout = check_layout(layout)
    resolved = _resolve(layout, resolve.resolve_conv_weight, ndim, _first(input.shape, ndim, layout), weight_size,
                                           _first(grad_output.shape, ndim, layout), stride, padding, dilation, groups)
    return _prepare("conv_weight", resolved, user, algorithm, queue, out, layout=layout)


@_op("conv_input", 1)
def conv1d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride: IntOrTuple = 1,
                 padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                 queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv1d w.r.t. its input, of shape ``input_size`` (as ``torch.nn.grad.conv1d_input``)."""
    return _execute(_conv_input(1, input_size, weight, grad_output, stride, padding, dilation, groups, layout, algorithm, queue, out))


@_op("conv_input", 2)
def conv2d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride: IntOrTuple = 1,
                 padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                 queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv2d w.r.t. its input, of shape ``input_size`` (as ``torch.nn.grad.conv2d_input``)."""
    return _execute(_conv_input(2, input_size, weight, grad_output, stride, padding, dilation, groups, layout, algorithm, queue, out))


@_op("conv_input", 3)
def conv3d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride: IntOrTuple = 1,
                 padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                 queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv3d w.r.t. its input, of shape ``input_size`` (as ``torch.nn.grad.conv3d_input``)."""
    return _execute(_conv_input(3, input_size, weight, grad_output, stride, padding, dilation, groups, layout, algorithm, queue, out))


@_op("conv_weight", 1)
def conv1d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                  padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                  queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv1d w.r.t. its weight, of shape ``weight_size`` (as ``torch.nn.grad.conv1d_weight``)."""
    return _execute(_conv_weight(1, input, weight_size, grad_output, stride, padding, dilation, groups, layout, algorithm, queue, out))


@_op("conv_weight", 2)
def conv2d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                  padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                  queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv2d w.r.t. its weight, of shape ``weight_size`` (as ``torch.nn.grad.conv2d_weight``)."""
    return _execute(_conv_weight(2, input, weight_size, grad_output, stride, padding, dilation, groups, layout, algorithm, queue, out))


@_op("conv_weight", 3)
def conv3d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                  padding: Padding = 0, dilation: IntOrTuple = 1, groups: int = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                  queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv3d w.r.t. its weight, of shape ``weight_size`` (as ``torch.nn.grad.conv3d_weight``)."""
    return _execute(_conv_weight(3, input, weight_size, grad_output, stride, padding, dilation, groups, layout, algorithm, queue, out))


# -- transposed convolution and its gradients -------------------------------------------------------


@_repeatable("conv_transpose", ("input", "weight", "bias", "residual"))
def _conv_transpose(ndim, input, weight, bias, stride, padding, output_padding, groups, dilation, activation,
                    negative_slope, residual, alpha, beta, layout, algorithm, queue, out):
    user = _checked(input=input, weight=weight, bias=bias, residual=residual)
    epilogue = check_epilogue(activation, negative_slope, alpha, beta, residual is not None)
    planner.check_algorithm(algorithm, OPS["conv_transpose"].pass_)
    layout = check_layout(layout)
    resolved = _resolve(layout, resolve.resolve_conv_transpose, ndim, _first(input.shape, ndim, layout), weight.shape,
                                              None if bias is None else bias.shape, stride, padding, output_padding,
                                              groups, dilation)
    return _prepare("conv_transpose", resolved, user, algorithm, queue, out, epilogue, layout)


@_op("conv_transpose", 1)
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
                     padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1,
                     *, activation: str | None = None, negative_slope: float = 0.01, residual: Tensor | None = None,
                     alpha: float = 1.0, beta: float = 1.0, layout: str = "channels_first", algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                     out: Tensor | None = None) -> Tensor:
    """1D transposed convolution, as ``torch.nn.functional.conv_transpose1d``: weight ``(C_in, C_out/groups, kW)``;
    output size ``(in-1)*stride - pad_begin - pad_end + dilation*(k-1) + output_padding + 1``."""
    return _execute(_conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation, activation,
                                    negative_slope, residual, alpha, beta, layout, algorithm, queue, out))


@_op("conv_transpose", 2)
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
                     padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1,
                     *, activation: str | None = None, negative_slope: float = 0.01, residual: Tensor | None = None,
                     alpha: float = 1.0, beta: float = 1.0, layout: str = "channels_first", algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                     out: Tensor | None = None) -> Tensor:
    """2D transposed convolution, as ``torch.nn.functional.conv_transpose2d``."""
    return _execute(_conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation, activation,
                                    negative_slope, residual, alpha, beta, layout, algorithm, queue, out))


@_op("conv_transpose", 3)
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
                     padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1,
                     *, activation: str | None = None, negative_slope: float = 0.01, residual: Tensor | None = None,
                     alpha: float = 1.0, beta: float = 1.0, layout: str = "channels_first", algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                     out: Tensor | None = None) -> Tensor:
    """3D transposed convolution, as ``torch.nn.functional.conv_transpose3d``."""
    return _execute(_conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation, activation,
                                    negative_slope, residual, alpha, beta, layout, algorithm, queue, out))


@_repeatable("conv_transpose_input", ("grad_output", "weight"))
def _conv_transpose_input(ndim, grad_output, weight, stride, padding, output_padding, groups, dilation, layout, algorithm, queue, out):
    user = _checked(grad_output=grad_output, weight=weight)
    planner.check_algorithm(algorithm, OPS["conv_transpose_input"].pass_)
    layout = check_layout(layout)
    resolved = _resolve(layout, resolve.resolve_conv_transpose_input, ndim, _first(grad_output.shape, ndim, layout), weight.shape, stride,
                                                    padding, output_padding, groups, dilation)
    return _prepare("conv_transpose_input", resolved, user, algorithm, queue, out, layout=layout)


@_repeatable("conv_transpose_weight", ("input", "grad_output"))
def _conv_transpose_weight(ndim, input, weight_size, grad_output, stride, padding, output_padding, groups, dilation,
                           layout, algorithm, queue, out):
    user = _checked(input=input, grad_output=grad_output)
    planner.check_algorithm(algorithm, OPS["conv_transpose_weight"].pass_)
    layout = check_layout(layout)
    resolved = _resolve(layout, resolve.resolve_conv_transpose_weight, ndim, _first(input.shape, ndim, layout), weight_size,
                                                     _first(grad_output.shape, ndim, layout), stride, padding,
                                                     output_padding, groups, dilation)
    return _prepare("conv_transpose_weight", resolved, user, algorithm, queue, out, layout=layout)


@_op("conv_transpose_input", 1)
def conv_transpose1d_input(grad_output: Tensor, weight: Tensor, stride: IntOrTuple = 1, padding: Padding = 0,
                           output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1, *,
                           layout: str = "channels_first", algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                           out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose1d w.r.t. its input: a forward conv1d of ``grad_output`` with ``weight``."""
    return _execute(_conv_transpose_input(1, grad_output, weight, stride, padding, output_padding, groups, dilation, layout, algorithm, queue, out))


@_op("conv_transpose_input", 2)
def conv_transpose2d_input(grad_output: Tensor, weight: Tensor, stride: IntOrTuple = 1, padding: Padding = 0,
                           output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1, *,
                           layout: str = "channels_first", algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                           out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose2d w.r.t. its input."""
    return _execute(_conv_transpose_input(2, grad_output, weight, stride, padding, output_padding, groups, dilation, layout, algorithm, queue, out))


@_op("conv_transpose_input", 3)
def conv_transpose3d_input(grad_output: Tensor, weight: Tensor, stride: IntOrTuple = 1, padding: Padding = 0,
                           output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1, *,
                           layout: str = "channels_first", algorithm: str = "auto", queue: cl.CommandQueue | None = None,
                           out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose3d w.r.t. its input."""
    return _execute(_conv_transpose_input(3, grad_output, weight, stride, padding, output_padding, groups, dilation, layout, algorithm, queue, out))


@_op("conv_transpose_weight", 1)
def conv_transpose1d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                            padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                            dilation: IntOrTuple = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                            queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose1d w.r.t. its weight ``(C_in, C_out/groups, kW)``."""
    return _execute(_conv_transpose_weight(1, input, weight_size, grad_output, stride, padding, output_padding, groups, dilation,
                                           layout, algorithm, queue, out))


@_op("conv_transpose_weight", 2)
def conv_transpose2d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                            padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                            dilation: IntOrTuple = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                            queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose2d w.r.t. its weight."""
    return _execute(_conv_transpose_weight(2, input, weight_size, grad_output, stride, padding, output_padding, groups, dilation,
                                           layout, algorithm, queue, out))


@_op("conv_transpose_weight", 3)
def conv_transpose3d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: IntOrTuple = 1,
                            padding: Padding = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                            dilation: IntOrTuple = 1, *, layout: str = "channels_first", algorithm: str = "auto",
                            queue: cl.CommandQueue | None = None, out: Tensor | None = None) -> Tensor:
    """Gradient of conv_transpose3d w.r.t. its weight."""
    return _execute(_conv_transpose_weight(3, input, weight_size, grad_output, stride, padding, output_padding, groups, dilation,
                                           layout, algorithm, queue, out))


# -- bias gradient and convolution_backward ----------------------------------------------------------


def _bias_gradient(grad_output: Tensor, batched_shape: tuple[int, ...], queue: cl.CommandQueue | None,
                   layout: str = CHANNELS_FIRST) -> Tensor:
    """Sum of ``grad_output`` over batch and space, per channel (``batched_shape``: canonical)."""
    queue, as_array = pick_queue({"grad_output": grad_output}, queue)
    dtype = np.dtype(grad_output.dtype)
    check_device_dtype(dtype, queue)
    batch, channels, spatial = batched_shape[0], batched_shape[1], batched_shape[2:]
    if batch == 0:
        host = np.zeros((channels,), dtype)
        return cl_array.to_device(queue, host) if as_array else host
    # A 1x1 identity geometry whose *output* is grad_output: the bias kernel sums that output.
    g = ConvGeometry.make(ndim=len(spatial), batch=batch, groups=1, in_channels=1, out_channels=channels,
                          in_size=spatial, kernel=(1,) * len(spatial))
    runner = planner.bias_gradient_runner(Problem(g, "backward_weight", name_of(dtype), layout=layout), queue)
    operands, allocator, wait_for, uploads = bind({"dy": grad_output}, queue)
    result = empty_array(queue, (channels,), dtype, allocator)
    operands["db"], _ = to_operand(result, queue)
    events = runner.run(queue, operands, wait_for=wait_for)
    del uploads  # enqueued: OpenCL keeps their buffers until the kernels are done
    result.add_event(events[-1])
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
    layout: str = "channels_first", algorithm: str = "auto",
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
    layout = check_layout(layout)
    if transposed:
        resolved = _resolve(layout, resolve.resolve_conv_transpose, ndim, _first(input.shape, ndim, layout), weight.shape, None, stride,
                                                  padding, output_padding, groups, dilation)
        expected = (resolved.geometry.batch, resolved.geometry.in_channels, *resolved.geometry.user_in_size)
    else:
        if output_padding not in (0, (0,) * ndim, [0] * ndim):
            raise ValueError(f"output_padding must be 0 for a non-transposed convolution, got {output_padding!r}")
        resolved = _resolve(layout, resolve.resolve_conv, ndim, _first(input.shape, ndim, layout), weight.shape, None, stride, padding,
                                        dilation, groups)
        expected = resolved.geometry.output_shape
    expected = _user_shape(tuple(expected), resolved.unbatched, layout)
    if tuple(grad_output.shape) != tuple(expected):
        raise ValueError(f"grad_output must have shape {tuple(expected)} for this convolution, got {tuple(grad_output.shape)}")
    data_family, weight_family = ("conv_transpose_input", "conv_transpose_weight") if transposed else \
        ("conv_input", "conv_weight")
    if output_mask[0]:
        planner.check_algorithm(algorithm, OPS[data_family].pass_)
    if output_mask[1]:
        planner.check_algorithm(algorithm, OPS[weight_family].pass_)

    grad_input = grad_weight = grad_bias = None
    if transposed:
        if output_mask[0]:
            grad_input = _execute(_conv_transpose_input(ndim, grad_output, weight, stride, padding, output_padding,
                                                        groups, dilation, layout, algorithm, queue, None))
        if output_mask[1]:
            grad_weight = _execute(_conv_transpose_weight(ndim, input, tuple(weight.shape), grad_output, stride,
                                                          padding, output_padding, groups, dilation, layout, algorithm,
                                                          queue, None))
    else:
        if output_mask[0]:
            grad_input = _execute(_conv_input(ndim, tuple(input.shape), weight, grad_output, stride, padding,
                                              dilation, groups, layout, algorithm, queue, None))
        if output_mask[1]:
            grad_weight = _execute(_conv_weight(ndim, input, tuple(weight.shape), grad_output, stride, padding,
                                                dilation, groups, layout, algorithm, queue, None))
    if output_mask[2]:
        shape = _first(tuple(grad_output.shape), ndim, layout)
        grad_bias = _bias_gradient(grad_output, (1, *shape) if resolved.unbatched else shape, queue, layout)
    return grad_input, grad_weight, grad_bias


_PREPARERS: dict[str, Callable[..., _Call]] = {
    "conv": _conv, "conv_input": _conv_input, "conv_weight": _conv_weight, "conv_transpose": _conv_transpose,
    "conv_transpose_input": _conv_transpose_input, "conv_transpose_weight": _conv_transpose_weight,
}
