"""One op call from the command line (``clconv render`` and ``clconv check``): the op, its
arguments built from the shapes and options given, and the same call as the canonical pass's
operands (by role, from :mod:`clconv.passes`) with its float64 reference; and the CLI's errors."""

from __future__ import annotations

import argparse
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, NoReturn

import numpy as np

import clconv
from clconv import reference, resolve
from clconv.dtypes import STORAGE_DTYPES, numpy_dtype
from clconv.geometry import ConvGeometry
from clconv.passes import OPS, PASS_TABLE

USAGE_ERROR = 2
FAILURE = 1

OP_PATTERN = re.compile(r"^(conv|conv_transpose)([123])d(?:_(input|weight))?$")
OP_NAMES = [
    f"{family}{n}d{suffix}"
    for family in ("conv", "conv_transpose")
    for suffix in ("", "_input", "_weight")
    for n in (1, 2, 3)
]


class CLIError(Exception):
    """A user error the CLI reports as one line; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = FAILURE, prog: str = "clconv"):
        super().__init__(message)
        self.code = code
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``clconv render: error: ...``) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        raise CLIError(f"{message} (see '{self.prog} --help')", USAGE_ERROR, self.prog)


# -- argument parsing helpers --------------------------------------------------------------------


def parse_shape(text: str, name: str) -> tuple[int, ...]:
    """``"2,3,8,8"`` (or ``2x3x8x8``) -> ``(2, 3, 8, 8)``."""
    parts = [p for p in re.split(r"[,x]", text.strip()) if p.strip()]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise CLIError(f"{name} must be comma-separated ints such as 2,3,8,8, got {text!r}", USAGE_ERROR) from None
    if not values:
        raise CLIError(f"{name} must not be empty", USAGE_ERROR)
    return values


def parse_ints(text: str, name: str) -> int | tuple[int, ...]:
    """``"2"`` -> 2, ``"2,1"`` -> (2, 1)."""
    values = parse_shape(text, name)
    return values[0] if len(values) == 1 and "," not in text else values


def parse_padding(text: str) -> Any:
    """``1``, ``1,2``, ``same``, ``valid``, or asymmetric ``begin:end`` pairs: ``1:2,0:1``."""
    text = text.strip()
    if text in ("same", "valid"):
        return text
    if ":" in text:
        pairs = []
        for part in text.split(","):
            begin_end = part.split(":")
            if len(begin_end) != 2:
                raise CLIError(f"--padding pairs must be begin:end, such as 1:2,0:1, got {text!r}", USAGE_ERROR)
            try:
                pairs.append((int(begin_end[0]), int(begin_end[1])))
            except ValueError:
                raise CLIError(f"--padding pairs must be ints, such as 1:2,0:1, got {text!r}", USAGE_ERROR) from None
        return tuple(pairs)
    return parse_ints(text, "--padding")


def add_geometry_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", metavar="OP", help=f"op name: {', '.join(OP_NAMES)}")
    parser.add_argument("--input", required=True, metavar="N,C,*SPATIAL",
                        help="shape of the forward op's input (batched, or unbatched C,*SPATIAL)")
    parser.add_argument("--weight", required=True, metavar="SHAPE",
                        help="weight shape: (C_out, C_in/groups, *k) for conv, (C_in, C_out/groups, *k) for conv_transpose")
    parser.add_argument("--stride", default="1", help="int or comma-separated ints (default 1)")
    parser.add_argument("--padding", default="0",
                        help="int, ints, 'same', 'valid', or begin:end pairs such as 1:2,0:1 (default 0)")
    parser.add_argument("--dilation", default="1", help="int or comma-separated ints (default 1)")
    parser.add_argument("--groups", type=int, default=1, help="default 1")
    parser.add_argument("--output-padding", default=None, help="transposed ops only (default 0)")
    parser.add_argument("--bias", action="store_true", help="add a bias (conv*d and conv_transpose*d only)")
    parser.add_argument("--dtype", choices=STORAGE_DTYPES, default="float32",
                        help="storage dtype of the tensors (bfloat16 needs ml_dtypes)")
    parser.add_argument("--device", default=None, metavar="SELECTOR",
                        help="'P:D' or a name substring, as CLCONV_DEVICE (default: the default device)")


# -- one op call built from the command line ----------------------------------------------------


@dataclass
class OpCall:
    """A public op, its arguments built from shapes, and the same call as canonical operands."""

    name: str
    pass_: str
    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    geometry: ConvGeometry
    unbatched: bool
    result_shape: tuple[int, ...]
    # the pass's operands by canonical role (x, w, dy, bias), batched: what the kernels read
    canonical: dict[str, np.ndarray] = field(repr=False)

    @property
    def reduction_length(self) -> int:
        """Terms summed per result element (sets the float tolerance)."""
        return PASS_TABLE[self.pass_].reduction_length(self.geometry)

    def canonical_reference(self) -> np.ndarray:
        """The float64 reference result in the canonical (batched) shape."""
        first, second = PASS_TABLE[self.pass_].inputs
        c = self.canonical
        return reference.run_pass(self.pass_, self.geometry, c[first], c[second], c.get("bias"))

    def reference(self) -> np.ndarray:
        """The float64 reference result in the op's own result shape."""
        result = self.canonical_reference()
        return result[0] if self.unbatched and PASS_TABLE[self.pass_].result_is_activation() else result


def build_call(args: argparse.Namespace, make: Callable[[tuple[int, ...]], np.ndarray]) -> OpCall:
    """Resolve ``args.op`` with the shapes and options on the command line.

    ``make(shape)`` creates each tensor (zeros for ``render``, random data for ``check``).
    Raises ValueError/TypeError (from the resolver) for a geometry the op refuses.
    """
    match = OP_PATTERN.match(args.op)
    if match is None:
        raise CLIError(f"unknown op {args.op!r}; ops are: {', '.join(OP_NAMES)}", USAGE_ERROR)
    base, ndim, grad = match.group(1), int(match.group(2)), match.group(3)
    op = OPS[f"{base}_{grad}" if grad else base]
    spec = PASS_TABLE[op.pass_]
    function = getattr(clconv, args.op)
    dtype = numpy_dtype(args.dtype)
    ishape = parse_shape(args.input, "--input")
    wshape = parse_shape(args.weight, "--weight")
    stride = parse_ints(args.stride, "--stride")
    dilation = parse_ints(args.dilation, "--dilation")
    padding = parse_padding(args.padding)
    groups = args.groups
    if args.bias and "bias" not in op.roles:
        raise CLIError(f"--bias applies to conv*d and conv_transpose*d, not to {args.op}", USAGE_ERROR)
    if args.output_padding is not None and base != "conv_transpose":
        raise CLIError(f"--output-padding applies to the transposed ops, not to {args.op}", USAGE_ERROR)
    output_padding = parse_ints(args.output_padding, "--output-padding") if args.output_padding else 0

    if base == "conv":
        kwargs: dict[str, Any] = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        resolved = resolve.resolve_conv(ndim, ishape, wshape, None, stride, padding, dilation, groups)
    else:
        kwargs = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                      dilation=dilation)
        resolved = resolve.resolve_conv_transpose(ndim, ishape, wshape, None, stride, padding, output_padding,
                                              groups, dilation)
    g, unbatched = resolved.geometry, resolved.unbatched
    # the forward op of the family's output (its pass's result): grad_output of the gradient ops
    forward = PASS_TABLE[OPS[base].pass_]
    out_shape = forward.shape(forward.result, g)[1 if unbatched else 0:]
    shapes = {"input": ishape, "weight": wshape, "grad_output": out_shape}
    if args.bias:
        shapes["bias"] = spec.shape("bias", g)
    user = {name: make(tuple(shapes[name])).astype(dtype, copy=False) for name in op.roles if name in shapes}
    sizes = {"input_size": ishape, "weight_size": wshape}
    call_args = []
    for parameter in inspect.signature(function).parameters:
        if parameter not in user and parameter not in sizes and parameter != "bias":
            break  # the tensor arguments come first; the options follow as keywords
        call_args.append(user.get(parameter) if parameter in op.roles else sizes[parameter])
    result_shape = {"input": ishape, "weight": wshape}.get(grad or "", out_shape)
    # the pass's operands by canonical role; an unbatched activation gets its batch dimension
    canonical = {op.roles[name]: t[None] if t.ndim < len(spec.shape(op.roles[name], g)) else t
                 for name, t in user.items()}
    return OpCall(args.op, op.pass_, function, tuple(call_args), kwargs, g, unbatched, tuple(result_shape), canonical)
