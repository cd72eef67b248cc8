"""Resolvers: an op's raw arguments -> a :class:`~clconv.resolve.Resolved` canonical geometry.

Every public op funnels its shape arguments through one resolver before anything is allocated,
rendered or built, and every error names the argument, the value and what was expected.  Each op
family has its resolver (geometry.py says how the families map onto the canonical convolution);
a successful resolution is remembered (``_memoized``), so a repeated call costs one lookup.
"""

from __future__ import annotations

import marshal

import operator
from typing import Any, NamedTuple, Sequence

from .caches import Cache
from .geometry import ConvGeometry

PADDING_STRINGS = ("same", "valid")


# -- argument normalisation -----------------------------------------------------------------


def _as_int(name: str, value: Any) -> int:
    """``value`` as a Python int; bools and floats are refused (they are usually a typo)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an int or a tuple of ints, got {value!r} of type {type(value).__name__}"
        ) from None


def _int_tuple(name: str, value: Any, ndim: int, minimum: int) -> tuple[int, ...]:
    """Normalise an int-or-tuple argument to ``ndim`` ints, each at least ``minimum``."""
    if isinstance(value, (tuple, list)):
        if len(value) != ndim:
            raise ValueError(
                f"{name} must be an int or a tuple of {ndim} ints for a {ndim}D convolution, "
                f"got {value!r} of length {len(value)}"
            )
        values = tuple(_as_int(name, v) for v in value)
    else:
        values = (_as_int(name, value),) * ndim
    for v in values:
        if v < minimum:
            what = "positive" if minimum == 1 else "non-negative"
            raise ValueError(f"{name} must be {what}, got {value!r}")
    return values


def resolve_padding(
    value: Any,
    ndim: int,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    allow_strings: bool = True,
    name: str = "padding",
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Return ``(pad_begin, pad_end)`` per spatial dim from every accepted spelling of ``padding``.

    Accepted: an int; a tuple of ``ndim`` ints; a tuple of ``ndim`` ``(begin, end)`` pairs
    (asymmetric padding, as ONNX and oneDNN use); ``'valid'``; ``'same'`` (stride 1 only; an odd
    total puts the extra element at the end, as PyTorch does).
    """
    if isinstance(value, str):
        if not allow_strings:
            raise ValueError(
                f"{name}={value!r} is not supported here: give an int, a tuple of {ndim} ints, "
                f"or {ndim} (begin, end) pairs"
            )
        if value == "valid":
            return (0,) * ndim, (0,) * ndim
        if value == "same":
            if any(s != 1 for s in stride):
                raise ValueError(
                    f"{name}='same' is not supported for strided convolutions (stride={tuple(stride)}); "
                    "use stride 1 or give the padding explicitly"
                )
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            begin = tuple(t // 2 for t in total)
            end = tuple(t - b for t, b in zip(total, begin))
            return begin, end
        raise ValueError(f"{name} string must be one of {PADDING_STRINGS}, got {value!r}")
    if isinstance(value, (tuple, list)) and any(isinstance(v, (tuple, list)) for v in value):
        if len(value) != ndim or not all(isinstance(v, (tuple, list)) and len(v) == 2 for v in value):
            raise ValueError(
                f"asymmetric {name} must be {ndim} (begin, end) pairs, one per spatial dim, got {value!r}"
            )
        begin = tuple(_as_int(name, v[0]) for v in value)
        end = tuple(_as_int(name, v[1]) for v in value)
        if min(begin + end) < 0:
            raise ValueError(f"{name} must be non-negative, got {value!r}")
        return begin, end
    if isinstance(value, (tuple, list)) and len(value) != ndim:
        raise ValueError(
            f"{name} must be an int, a tuple of {ndim} ints, {ndim} (begin, end) pairs, "
            f"'same' or 'valid', got {value!r} of length {len(value)}"
        )
    pads = _int_tuple(name, value, ndim, minimum=0)
    return pads, pads


def _check_shape(name: str, shape: Any) -> tuple[int, ...]:
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{name} must be a shape tuple of ints, got {shape!r}")
    return tuple(_as_int(name, v) for v in shape)


def _spatial_ints(ndim: int, stride: Any, dilation: Any, groups: Any):
    """Normalise and check the int arguments every op shares."""
    stride_t = _int_tuple("stride", stride, ndim, 1)
    dilation_t = _int_tuple("dilation", dilation, ndim, 1)
    groups_i = _as_int("groups", groups)
    if groups_i < 1:
        raise ValueError(f"groups must be a positive int, got {groups!r}")
    return stride_t, dilation_t, groups_i


def _check_input(name: str, shape: tuple[int, ...], ndim: int) -> tuple[tuple[int, ...], bool]:
    """Accept ``(N, C, *spatial)`` or unbatched ``(C, *spatial)``; return the batched shape."""
    if len(shape) == ndim + 1:
        return (1, *shape), True
    if len(shape) != ndim + 2:
        raise ValueError(
            f"{name} must have shape (N, C, {_spatial_names(ndim)}) or unbatched (C, {_spatial_names(ndim)}) "
            f"for a {ndim}D convolution, got a {len(shape)}D array of shape {shape}"
        )
    return shape, False


def _spatial_names(ndim: int) -> str:
    return ", ".join(("D", "H", "W")[3 - ndim :])


def _check_weight(name: str, shape: tuple[int, ...], ndim: int, layout: str) -> None:
    if len(shape) != ndim + 2:
        raise ValueError(
            f"{name} must have shape {layout} for a {ndim}D convolution, got a {len(shape)}D array of shape {shape}"
        )
    if min(shape) < 1:
        raise ValueError(f"{name} must have no zero-sized dimension, got shape {shape}")


def _check_positive_sizes(name: str, shape: tuple[int, ...]) -> None:
    """Channels and spatial extents must be positive; batch (the first entry) may be 0."""
    if min(shape[1:]) < 1 or shape[0] < 0:
        raise ValueError(
            f"{name} must have positive channel and spatial sizes (batch may be 0), got shape {shape}"
        )


def _make(
    ndim: int, batch: int, groups: int, cin: int, cout: int, in_size: Sequence[int],
    kernel: Sequence[int], stride: Sequence[int], pad_begin: Sequence[int], pad_end: Sequence[int],
    dilation: Sequence[int], input_name: str = "input",
) -> ConvGeometry:
    """The resolvers' way to a geometry: the kernel's extent is checked against the padded input
    first, with the message in the user's terms (``input_name``), then ConvGeometry validates."""
    names = _spatial_names(ndim).split(", ")
    for axis, (i, k, b, e, d) in enumerate(zip(in_size, kernel, pad_begin, pad_end, dilation)):
        padded, span = i + b + e, d * (k - 1) + 1
        if padded < span:
            raise ValueError(
                f"{input_name}: padded spatial size {padded} along {names[axis]} is smaller than the dilated "
                f"kernel extent {span} (kernel {tuple(kernel)}, dilation {tuple(dilation)}); the output would "
                f"be empty"
            )
    return ConvGeometry.make(ndim, batch, groups, cin, cout, in_size, kernel, stride, pad_begin, pad_end, dilation)


def _check_groups(groups: int, cin: int, cout: int, in_name: str, out_name: str) -> None:
    if cin % groups:
        raise ValueError(f"groups={groups} must divide the {in_name} channels ({cin})")
    if cout % groups:
        raise ValueError(f"groups={groups} must divide the {out_name} channels ({cout})")


def _check_bias(bias_shape: tuple[int, ...] | None, channels: int) -> None:
    if bias_shape is not None and tuple(bias_shape) != (channels,):
        raise ValueError(f"bias must have shape ({channels},), got shape {tuple(bias_shape)}")


# -- the resolvers, one per public op family ----------------------------------------------------


_TAG = object()  # marks a tagged value in a key: no argument a user passes can equal it


_SCALARS = frozenset([int, str, type(None), bool, float])  # what a key takes as it is, with its type


def frozen(value: Any) -> Any:
    """A hashable key that tells apart what the resolvers tell apart: ``1``, ``True`` and ``1.0``
    are equal and hash alike, but only ``1`` is a valid size, so a tuple's key carries its items'
    types (a lone int, string or None goes through as it is; a list is tagged as one).  Anything
    else (numpy integers, arrays, ...) raises TypeError: such a call is resolved afresh each time.
    A repeated call's whole key is made here (~0.7 us for an op's dozen flat arguments)."""
    kind = type(value)
    if kind is int or kind is str or value is None:
        return value
    if kind is tuple or kind is list:
        kinds = tuple(map(type, value))  # in C: an item-by-item loop in Python cost three times as much
        items = tuple(value)
        if not _SCALARS.issuperset(kinds):  # nested sequences (padding pairs), or a type no key takes
            nested = _marshalled(value)
            if nested is not None:
                return nested
            items = tuple([item if k in _SCALARS else frozen(item) for item, k in zip(items, kinds)])
        return (_TAG, list, items, kinds) if kind is list else (items, kinds)
    if kind is bool or kind is float:
        return (_TAG, kind, value)
    raise TypeError


def _marshalled(value: tuple | list) -> tuple | None:
    """The key of a nested sequence (a call's arguments with stride, padding and dilation tuples, as
    PyTorch's modules pass them) in C: ``marshal`` writes each item with its exact type (``1``,
    ``True`` and ``1.0`` apart, a tuple not a list) and refuses any type but the built-in ones, so
    its bytes tell apart what :func:`frozen`'s item-by-item types do, at a third of the time (3 us
    against 7 for an op's arguments on the sandbox's host).  But it writes any object with a buffer
    (a numpy scalar, ``bytes``) as plain bytes, so the value must come back equal from the bytes:
    else (a numpy integer, a NaN) None, and the caller keys it item by item (and refuses numpy
    scalars).  Version 2: no back-references, so equal values give equal bytes (interned and other
    strings aside, which only makes two keys for one call)."""
    try:
        blob = marshal.dumps(value, 2)
    except ValueError:  # a type marshal does not take: frozen() refuses it too
        raise TypeError from None
    try:
        same = marshal.loads(blob) == value
    except Exception:  # a comparison that raises (an array's truth value): key it item by item
        return None
    return (_TAG, blob) if same is True else None


def _memoized(resolver):
    """Remember successful resolutions: a repeated call (same shapes and arguments) costs one dict
    lookup instead of the whole validation.  Errors are not remembered."""
    def wrapper(*args: Any, **kwargs: Any) -> "Resolved":
        try:
            key = (resolver.__name__, frozen(args), frozen(tuple(sorted(kwargs.items()))) if kwargs else None)
        except TypeError:
            return resolver(*args, **kwargs)
        hit = _resolutions.get(key)
        if hit is None:
            hit = _resolutions.put(key, resolver(*args, **kwargs))
        return hit

    wrapper.__name__ = resolver.__name__
    wrapper.__doc__ = resolver.__doc__
    wrapper.__wrapped__ = resolver
    return wrapper


_resolutions: Cache[Any] = Cache("resolutions", maxsize=4096)


class Resolved(NamedTuple):
    """A resolved call: the canonical geometry plus whether the user's tensors were unbatched
    (a named tuple: part of every cached call's key, hashed in C)."""

    geometry: ConvGeometry
    unbatched: bool = False


@_memoized
def resolve_conv(
    ndim: int,
    input_shape: Sequence[int],
    weight_shape: Sequence[int],
    bias_shape: Sequence[int] | None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: Any = 1,
) -> Resolved:
    """Validate a forward convolution (``torch.nn.functional.conv{ndim}d``)."""
    ishape, unbatched = _check_input("input", tuple(input_shape), ndim)
    wshape = tuple(weight_shape)
    _check_weight("weight", wshape, ndim, f"(C_out, C_in/groups, {_spatial_names(ndim)})")
    _check_positive_sizes("input", ishape)
    stride, dilation, groups = _spatial_ints(ndim, stride, dilation, groups)
    kernel = wshape[2:]
    pb, pe = resolve_padding(padding, ndim, kernel, stride, dilation)
    cin, cout = ishape[1], wshape[0]
    _check_groups(groups, cin, cout, "input", "weight's output")
    if wshape[1] * groups != cin:
        raise ValueError(
            f"weight of shape {wshape} expects {wshape[1] * groups} input channels "
            f"(C_in/groups={wshape[1]} x groups={groups}), but input has {cin} channels (shape {tuple(input_shape)})"
        )
    _check_bias(None if bias_shape is None else tuple(bias_shape), cout)
    geometry = _make(ndim, ishape[0], groups, cin, cout, ishape[2:], kernel, stride, pb, pe, dilation)
    return Resolved(geometry, unbatched)


def _transposed_padding(ndim, padding, kernel, stride, dilation):
    return resolve_padding(padding, ndim, kernel, stride, dilation, allow_strings=False)


def _canonical_pad_end(pad_end: Sequence[int], output_padding: Sequence[int], stride: Sequence[int]) -> tuple[int, ...]:
    """The canonical convolution's end padding for a transposed op.  An ``output_padding`` of at
    least the stride (allowed while below the dilation) adds trailing outputs no input reaches; the
    canonical convolution would count extra positions there, so its end padding shrinks by the excess,
    possibly below zero (``pad_end`` only sets the canonical output size; no kernel reads it)."""
    return tuple(e - max(0, o - s + 1) for e, o, s in zip(pad_end, output_padding, stride))


def _check_output_padding(output_padding: Any, ndim: int, stride, dilation) -> tuple[int, ...]:
    op = _int_tuple("output_padding", output_padding, ndim, 0)
    for o, s, d in zip(op, stride, dilation):
        if o >= s and o >= d:
            raise ValueError(
                f"output_padding must be smaller than either stride or dilation, got "
                f"output_padding={tuple(op)}, stride={tuple(stride)}, dilation={tuple(dilation)}"
            )
    return op


@_memoized
def resolve_conv_transpose(
    ndim: int,
    input_shape: Sequence[int],
    weight_shape: Sequence[int],
    bias_shape: Sequence[int] | None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: Any = 1,
    dilation: Any = 1,
) -> Resolved:
    """Validate ``conv_transpose{ndim}d``; the geometry is of the convolution it is the data gradient of."""
    ishape, unbatched = _check_input("input", tuple(input_shape), ndim)
    wshape = tuple(weight_shape)
    _check_weight("weight", wshape, ndim, f"(C_in, C_out/groups, {_spatial_names(ndim)})")
    _check_positive_sizes("input", ishape)
    stride, dilation, groups = _spatial_ints(ndim, stride, dilation, groups)
    kernel = wshape[2:]
    pb, pe = _transposed_padding(ndim, padding, kernel, stride, dilation)
    op = _check_output_padding(output_padding, ndim, stride, dilation)
    cin_t = ishape[1]
    if wshape[0] != cin_t:
        raise ValueError(
            f"weight of shape {wshape} expects {wshape[0]} input channels (its first dim), "
            f"but input has {cin_t} channels (shape {tuple(input_shape)})"
        )
    if cin_t % groups:
        raise ValueError(f"groups={groups} must divide the input channels ({cin_t})")
    cout_t = wshape[1] * groups
    _check_bias(None if bias_shape is None else tuple(bias_shape), cout_t)
    out_spatial = []
    for i, k, s, b, e, d, o in zip(ishape[2:], kernel, stride, pb, pe, dilation, op):
        size = (i - 1) * s - b - e + d * (k - 1) + o + 1
        if size < 1:
            raise ValueError(
                f"padding={padding!r} is too large: the transposed convolution's output would have "
                f"size {size} along a spatial dim (input {i}, kernel {k}, stride {s}, dilation {d})"
            )
        out_spatial.append(size)
    geometry = _make(ndim, ishape[0], groups, cout_t, cin_t, out_spatial, kernel, stride, pb,
                     _canonical_pad_end(pe, op, stride), dilation)
    _require_out(geometry, ishape[2:], "input")
    return Resolved(geometry, unbatched)


def _require_out(geometry: ConvGeometry, expected: Sequence[int], name: str) -> None:
    if tuple(geometry.user_out_size) != tuple(expected):
        raise ValueError(
            f"{name}: spatial size {tuple(expected)} cannot be produced by this geometry "
            f"(it gives {geometry.user_out_size})"
        )


@_memoized
def resolve_conv_input(
    ndim: int,
    input_size: Any,
    weight_shape: Sequence[int],
    grad_output_shape: Sequence[int],
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: Any = 1,
) -> Resolved:
    """Validate ``conv{ndim}d_input`` (``torch.nn.grad.conv{ndim}d_input``)."""
    isize = _check_shape("input_size", input_size)
    if len(isize) not in (ndim + 1, ndim + 2):
        raise ValueError(
            f"input_size must have {ndim + 2} entries (N, C, {_spatial_names(ndim)}) or {ndim + 1} unbatched, got {isize}"
        )
    gshape, g_unbatched = _check_input("grad_output", tuple(grad_output_shape), ndim)
    ishape, unbatched = _check_input("input_size", isize, ndim)
    if unbatched != g_unbatched:
        raise ValueError(f"input_size {isize} and grad_output of shape {tuple(grad_output_shape)} disagree about batching")
    _check_positive_sizes("input_size", ishape)
    if ishape[0] != gshape[0]:
        raise ValueError(f"input_size batch {ishape[0]} does not match grad_output batch {gshape[0]}")
    resolved = resolve_conv(ndim, ishape, weight_shape, None, stride, padding, dilation, groups)
    geometry = resolved.geometry
    if gshape[1] != geometry.out_channels:
        raise ValueError(
            f"grad_output has {gshape[1]} channels (shape {tuple(grad_output_shape)}) but weight gives {geometry.out_channels}"
        )
    _require_out(geometry, gshape[2:], "input_size")
    return Resolved(geometry, unbatched)


@_memoized
def resolve_conv_weight(
    ndim: int,
    input_shape: Sequence[int],
    weight_size: Any,
    grad_output_shape: Sequence[int],
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: Any = 1,
) -> Resolved:
    """Validate ``conv{ndim}d_weight`` (``torch.nn.grad.conv{ndim}d_weight``)."""
    wsize = _check_shape("weight_size", weight_size)
    _check_weight("weight_size", wsize, ndim, f"(C_out, C_in/groups, {_spatial_names(ndim)})")
    resolved = resolve_conv(ndim, input_shape, wsize, None, stride, padding, dilation, groups)
    geometry = resolved.geometry
    gshape, g_unbatched = _check_input("grad_output", tuple(grad_output_shape), ndim)
    if g_unbatched != resolved.unbatched or gshape[0] != geometry.batch:
        raise ValueError(
            f"grad_output of shape {tuple(grad_output_shape)} does not match the input's batch (shape {tuple(input_shape)})"
        )
    if gshape[1] != geometry.out_channels:
        raise ValueError(
            f"grad_output has {gshape[1]} channels (shape {tuple(grad_output_shape)}) but weight_size gives {geometry.out_channels}"
        )
    _require_out(geometry, gshape[2:], "grad_output")
    return resolved


@_memoized
def resolve_conv_transpose_input(
    ndim: int,
    grad_output_shape: Sequence[int],
    weight_shape: Sequence[int],
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: Any = 1,
    dilation: Any = 1,
    input_size: Any = None,
) -> Resolved:
    """Validate the transposed op's data gradient: a forward conv of ``grad_output`` with ``weight``.

    The transposed input's spatial size is the canonical convolution's output size; the
    transposed op's output size (``grad_output``) must be one the transposed op can produce.
    """
    gshape, unbatched = _check_input("grad_output", tuple(grad_output_shape), ndim)
    wshape = tuple(weight_shape)
    _check_weight("weight", wshape, ndim, f"(C_in, C_out/groups, {_spatial_names(ndim)})")
    _check_positive_sizes("grad_output", gshape)
    stride, dilation, groups = _spatial_ints(ndim, stride, dilation, groups)
    kernel = wshape[2:]
    pb, pe = _transposed_padding(ndim, padding, kernel, stride, dilation)
    op = _check_output_padding(output_padding, ndim, stride, dilation)
    if wshape[0] % groups:
        raise ValueError(f"groups={groups} must divide weight's first dim (the transposed op's input channels, {wshape[0]})")
    if gshape[1] != wshape[1] * groups:
        raise ValueError(
            f"grad_output has {gshape[1]} channels (shape {gshape}) but weight of shape {wshape} "
            f"with groups={groups} gives {wshape[1] * groups}"
        )
    geometry = _make(ndim, gshape[0], groups, gshape[1], wshape[0], gshape[2:], kernel, stride, pb,
                     _canonical_pad_end(pe, op, stride), dilation, input_name="grad_output")
    # The transposed op's output size must be reachable from its input size with this output_padding.
    for axis, (i, o, s, b, e, d, k) in enumerate(
        zip(gshape[2:], geometry.user_out_size, stride, pb, pe, dilation, kernel)
    ):
        produced = (o - 1) * s - b - e + d * (k - 1) + op[axis] + 1
        if produced != i:
            raise ValueError(
                f"grad_output spatial size {tuple(gshape[2:])} cannot be produced by conv_transpose with "
                f"output_padding={tuple(op)} from an input of size {geometry.user_out_size}"
            )
    return Resolved(geometry, unbatched)


@_memoized
def resolve_conv_transpose_weight(
    ndim: int,
    input_shape: Sequence[int],
    weight_size: Any,
    grad_output_shape: Sequence[int],
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: Any = 1,
    dilation: Any = 1,
) -> Resolved:
    """Validate the transposed op's weight gradient (canonical weight gradient with roles swapped)."""
    wsize = _check_shape("weight_size", weight_size)
    _check_weight("weight_size", wsize, ndim, f"(C_in, C_out/groups, {_spatial_names(ndim)})")
    resolved = resolve_conv_transpose(
        ndim, input_shape, wsize, None, stride, padding, output_padding, groups, dilation
    )
    geometry = resolved.geometry
    gshape, g_unbatched = _check_input("grad_output", tuple(grad_output_shape), ndim)
    if g_unbatched != resolved.unbatched or gshape[0] != geometry.batch:
        raise ValueError(
            f"grad_output of shape {tuple(grad_output_shape)} does not match the input's batch (shape {tuple(input_shape)})"
        )
    if gshape[1] != geometry.in_channels or tuple(gshape[2:]) != geometry.user_in_size:
        raise ValueError(
            f"grad_output must have shape {(geometry.batch, geometry.in_channels, *geometry.user_in_size)} "
            f"for this conv_transpose, got {tuple(grad_output_shape)}"
        )
    return resolved


def check_ndim(ndim: int) -> None:
    if ndim not in (1, 2, 3):
        raise ValueError(f"ndim must be 1, 2 or 3, got {ndim!r}")
