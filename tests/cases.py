"""The one description of a convolution test case, and the case tables several test files share.

A :class:`Case` is a convolution as a user spells it: ``x (batch, cin, *size) * w (cout, cin/groups,
*kernel)`` with stride, padding (an int, per-dimension ints, per-dimension ``(begin, end)`` pairs,
``'same'`` or ``'valid'``), dilation and groups, a bias or not, a dtype.  The same case serves all
six op families (``clconv.passes.OPS``): the convolution, its two gradients, and the transposed
convolution whose output is this convolution's input (so ``output_padding`` is the one that gives
``size`` back), with the transposed op's two gradients.  A case that gives ``output_padding``
explicitly, at least the stride somewhere (allowed below the dilation), has no ordinary convolution
twin: it is run through the transposed ops only (:attr:`Case.transposed_only`).

What a case gives: its geometry (through clconv's resolvers, and worked out independently here),
its problems, its operands' shapes per pass (``clconv.passes``), random operands, the float64
reference (``clconv.reference``, or the independent ``transposed_reference`` functions), the
public op of a family called on operands by role, and whether an algorithm is expected to serve it
(:func:`expected_to_serve`: our own statement of each algorithm's documented rule).

Tables shared by several files sit at the end: ``COVER`` (the reliability set: guards, exact,
Oclgrind), ``GRADIENT_CASES``, ``TRANSPOSED_ONLY`` and ``SPLITK_CASE``.  Cases with equal
geometries share built programs through the cache, so a table is built once per run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

import clconv
from clconv import reference
from clconv.dtypes import numpy_dtype
from clconv.geometry import ConvGeometry, resolve_conv, resolve_conv_transpose
from clconv.passes import ACTIVATION_ROLES, OPS, PASS_TABLE, PASSES
from clconv.plan import Problem

import transposed_reference as R

FAMILIES = tuple(OPS)  # conv, conv_input, conv_weight, conv_transpose, conv_transpose_input, conv_transpose_weight
_OP_NAME = {"conv": "conv{n}d", "conv_input": "conv{n}d_input", "conv_weight": "conv{n}d_weight",
            "conv_transpose": "conv_transpose{n}d", "conv_transpose_input": "conv_transpose{n}d_input",
            "conv_transpose_weight": "conv_transpose{n}d_weight"}


def op_function(family: str, ndim: int) -> Callable[..., Any]:
    """The public op of ``family`` for ``ndim`` spatial dimensions (``clconv.conv2d_input`` ...)."""
    return getattr(clconv, _OP_NAME[family].format(n=ndim))


def _spell(value: Any) -> str:
    """A readable id fragment: 3, (3, 2) -> 3x2, (3, 3) -> 3, ((1, 2), (0, 1)) -> 1_2x0_1, 'same' -> SAME."""
    if isinstance(value, str):
        return value.upper()
    if isinstance(value, (tuple, list)):
        if value and isinstance(value[0], (tuple, list)):
            return "x".join(f"{b}_{e}" if b != e else f"{b}" for b, e in value)
        if len(set(value)) == 1:
            return str(value[0])
        return "x".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Case:
    """One convolution; see the module docstring.  ``passes`` and ``algorithms`` select what the
    reliability tests run for it (``algorithms`` empty: every algorithm that serves it)."""

    ndim: int
    batch: Optional[int]  # None: unbatched tensors (C, *spatial)
    cin: int
    cout: int
    size: tuple
    kernel: tuple
    stride: Any = 1
    padding: Any = 0
    dilation: Any = 1
    groups: int = 1
    bias: bool = False
    output_padding: Any = None  # transposed use; None: the one that gives `size` back
    dtype: str = "float32"
    note: str = field(default="", compare=False)
    passes: tuple = field(default=PASSES, compare=False)
    algorithms: tuple = field(default=(), compare=False)

    # -- naming --------------------------------------------------------------------------------------
    @property
    def id(self) -> str:
        """E.g. ``2d-n2c4o6i9x8-k3s2p1d2g2-bias``: dimensions, batch (``u``: unbatched), channels, size,
        then kernel, stride, padding, dilation, groups (``k3s2p1d2g2``); ``op`` output padding."""
        batch = "u" if self.batch is None else f"n{self.batch}"
        op = "" if self.output_padding is None else f"op{_spell(self.output_padding)}"
        return (f"{self.ndim}d-{batch}c{self.cin}o{self.cout}i{_spell(self.size)}-k{_spell(self.kernel)}"
                f"s{_spell(self.stride)}p{_spell(self.padding)}d{_spell(self.dilation)}g{self.groups}{op}"
                f"{'-bias' if self.bias else ''}{'-f64' if self.dtype == 'float64' else ''}"
                f"{f'-{self.note}' if self.note else ''}")

    def __repr__(self) -> str:
        return self.id

    # -- the arguments, worked out here (independently of clconv's resolvers) ---------------------
    def per_dim(self, value: Any) -> tuple:
        return tuple(value) if isinstance(value, (tuple, list)) else (value,) * self.ndim

    @property
    def pads(self) -> tuple[tuple, tuple]:
        """``(begin, end)`` per dimension as the user's padding means it; 'same' as PyTorch: total
        ``d*(k-1)``, an odd extra element at the end."""
        if self.padding == "valid":
            return (0,) * self.ndim, (0,) * self.ndim
        if self.padding == "same":
            total = [d * (k - 1) for d, k in zip(self.per_dim(self.dilation), self.kernel)]
            return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
        if isinstance(self.padding, (tuple, list)) and isinstance(self.padding[0], (tuple, list)):
            return tuple(p[0] for p in self.padding), tuple(p[1] for p in self.padding)
        return self.per_dim(self.padding), self.per_dim(self.padding)

    @property
    def pad_pairs(self) -> tuple:
        return tuple(zip(*self.pads))

    @property
    def canonical_pad_end(self) -> tuple:
        """The canonical convolution's end padding: an output_padding of at least the stride adds
        trailing outputs no input reaches, which the canonical convolution does not count."""
        op, s = self.per_dim(self.output_padding or 0), self.per_dim(self.stride)
        return tuple(e - max(0, o - ss + 1) for e, o, ss in zip(self.pads[1], op, s))

    @property
    def out_size(self) -> tuple:
        pb, s, d = self.pads[0], self.per_dim(self.stride), self.per_dim(self.dilation)
        return tuple((i + b + e - dd * (k - 1) - 1) // ss + 1
                     for i, k, ss, b, e, dd in zip(self.size, self.kernel, s, pb, self.canonical_pad_end, d))

    @property
    def transposed_output_padding(self) -> tuple:
        """The transposed op's output_padding: as given, or the one that turns ``out_size`` back into ``size``."""
        if self.output_padding is not None:
            return self.per_dim(self.output_padding)
        pb, pe = self.pads
        s, d = self.per_dim(self.stride), self.per_dim(self.dilation)
        return tuple(i - ((o - 1) * ss - b - e + dd * (k - 1) + 1)
                     for i, o, ss, b, e, dd, k in zip(self.size, self.out_size, s, pb, pe, d, self.kernel))

    @property
    def transposed_only(self) -> bool:
        """No ordinary convolution has this geometry (its output_padding reaches the stride)."""
        return self.canonical_pad_end != self.pads[1]

    @property
    def is_pointwise(self) -> bool:
        return all(k == 1 for k in self.kernel) and not any(self.pads[0]) and not any(self.canonical_pad_end)

    @property
    def independent_geometry(self) -> ConvGeometry:
        """The canonical geometry from the values above, not from clconv's resolvers."""
        return ConvGeometry.make(self.ndim, self._batch, self.groups, self.cin,
                                 self.cout, self.size, self.kernel, self.per_dim(self.stride), self.pads[0],
                                 self.canonical_pad_end, self.per_dim(self.dilation))

    # -- shapes --------------------------------------------------------------------------------------
    @property
    def unbatched(self) -> bool:
        return self.batch is None

    @property
    def _batch(self) -> int:
        return 1 if self.batch is None else self.batch

    def _user(self, shape: tuple, role: str) -> tuple:
        """A batched shape as the user's tensor has it (no batch dimension when unbatched)."""
        return shape[1:] if self.unbatched and role in ("x", "dx", "y", "dy") else tuple(shape)

    @property
    def input_shape(self) -> tuple:
        return self._user((self._batch, self.cin, *self.size), "x")

    @property
    def weight_shape(self) -> tuple:
        return (self.cout, self.cin // self.groups, *self.kernel)

    @property
    def output_shape(self) -> tuple:
        return self._user((self._batch, self.cout, *self.out_size), "y")

    # -- clconv's view of it -------------------------------------------------------------------------
    @property
    def geometry(self) -> ConvGeometry:
        """The canonical geometry as clconv's resolvers make it from the user's arguments."""
        if self.transposed_only:
            return resolve_conv_transpose(self.ndim, self.output_shape, self.weight_shape, None,
                                          **self.transposed_args()).geometry
        return resolve_conv(self.ndim, self.input_shape, self.weight_shape, None, **self.conv_args()).geometry

    # Everything below takes an op family (clconv.passes.OPS: conv, conv_input, conv_weight,
    # conv_transpose, conv_transpose_input, conv_transpose_weight) or a pass (forward,
    # backward_data, backward_weight: the family that runs it here, family_for).
    def family(self, family_or_pass: str) -> str:
        return family_or_pass if family_or_pass in OPS else self.family_for(family_or_pass)

    def roles(self, family: str) -> tuple[str, ...]:
        """The canonical roles of the operands ``family``'s op takes here: the pass's two inputs in the
        table's order, then the bias if the op takes one and the case has one."""
        op = OPS[self.family(family)]
        takes = set(op.roles.values())
        return (*op.spec.inputs, "bias") if self.bias and "bias" in takes else op.spec.inputs

    def pass_of(self, family: str) -> str:
        return OPS[self.family(family)].pass_

    def problem(self, family: str, dtype: str | None = None) -> Problem:
        """The problem ``family``'s op solves for this case (a bias if it passes one)."""
        return Problem(self.geometry, self.pass_of(family), dtype or self.dtype, bias="bias" in self.roles(family))

    def reduction_length(self, family: str) -> int:
        return PASS_TABLE[self.pass_of(family)].reduction_length(self.geometry)

    def shapes(self, family: str) -> dict[str, tuple]:
        """The shape of each operand (clconv.passes), as the user's tensors have them."""
        spec, g = PASS_TABLE[self.pass_of(family)], self.geometry
        return {role: self._user(spec.shape(role, g), role) for role in self.roles(family)}

    def result_shape(self, family: str) -> tuple:
        spec = PASS_TABLE[self.pass_of(family)]
        return self._user(spec.result_shape(self.geometry), spec.result)

    def operands(self, family: str, rng: np.random.Generator, make: Callable | None = None) -> dict[str, np.ndarray]:
        """Host operands by role: standard normal in the case's dtype, or ``make(rng, shape)``."""
        if make is None:
            dtype = numpy_dtype(self.dtype)
            return {role: rng.standard_normal(shape).astype(dtype) for role, shape in self.shapes(family).items()}
        return {role: make(rng, shape) for role, shape in self.shapes(family).items()}

    def reference(self, family: str, operands: dict[str, np.ndarray]) -> np.ndarray:
        """clconv.reference's float64 result on ``operands`` (by role) of the case's resolved geometry."""
        spec = PASS_TABLE[self.pass_of(family)]
        a, b = (self._batched(np.asarray(operands[role], np.float64), role) for role in spec.inputs)
        bias = np.asarray(operands["bias"], np.float64) if "bias" in self.roles(family) else None
        out = reference.run_pass(spec.name, self.geometry, a, b, bias)
        return out[0] if self.unbatched and spec.result_is_activation() else out

    def channels_last(self, value: np.ndarray, role: str) -> np.ndarray:
        """An activation (x, dx, y, dy, residual) of this case as a contiguous channels-last array
        (the channel axis moved last); other roles as they are."""
        if role not in ACTIVATION_ROLES:
            return value
        return np.ascontiguousarray(np.moveaxis(value, -self.ndim - 1, -1))

    def channels_first(self, value: np.ndarray) -> np.ndarray:
        """A channels-last activation of this case back in channels-first order."""
        return np.moveaxis(value, -1, -self.ndim - 1)

    def _batched(self, value: np.ndarray, role: str) -> np.ndarray:
        return value[None] if self.unbatched and role in ("x", "dy") else value

    # -- the public ops --------------------------------------------------------------------------------
    def conv_args(self) -> dict:
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)

    def transposed_args(self) -> dict:
        padding = self.pad_pairs if isinstance(self.padding, str) else self.padding  # no strings there
        return dict(stride=self.stride, padding=padding, output_padding=self.transposed_output_padding,
                    groups=self.groups, dilation=self.dilation)

    def family_for(self, pass_: str) -> str:
        """The op family that runs ``pass_`` of this case: the convolution's (a data gradient with a
        bias through conv_transpose), or for a transposed-only case the transposed op's."""
        if self.transposed_only:
            return {"forward": "conv_transpose_input", "backward_data": "conv_transpose",
                    "backward_weight": "conv_transpose_weight"}[pass_]
        if pass_ == "backward_data" and self.bias:
            return "conv_transpose"
        return {"forward": "conv", "backward_data": "conv_input", "backward_weight": "conv_weight"}[pass_]

    def call(self, family: str, operands: dict, **options: Any):
        """``family``'s public op on ``operands`` (by canonical role: numpy or device Arrays) with
        ``options`` (algorithm, out, queue); the shapes the op needs besides come from the case."""
        family = self.family(family)
        fn = op_function(family, self.ndim)
        op = OPS[family]
        if family.startswith("conv_transpose"):
            args = self.transposed_args()
            input_size, weight_size = self.output_shape, self.weight_shape  # the transposed op's
        else:
            args = self.conv_args()
            input_size, weight_size = self.input_shape, self.weight_shape
        if family == "conv_input":
            if options.get("layout") == "channels_last":
                input_size = (*input_size[:-self.ndim - 1], *input_size[-self.ndim:], input_size[-self.ndim - 1])
            return fn(input_size, operands["w"], operands["dy"], **args, **options)
        if family in ("conv_weight", "conv_transpose_weight"):
            by_name = {name: operands[role] for name, role in op.roles.items()}
            return fn(by_name["input"], weight_size, by_name["grad_output"], **args, **options)
        by_name = {name: operands.get(role) for name, role in op.roles.items() if name not in options}
        return fn(**by_name, **args, **options)

    def run(self, family: str, operands: dict, **options: Any):
        """Run ``family``'s op, or a pass through the op family that maps onto it (:meth:`family_for`)."""
        return self.call(self.family(family), operands, **options)

    def expected(self, family: str, operands: dict[str, np.ndarray]) -> np.ndarray:
        """The independent float64 result (tests/transposed_reference.py) of ``family``'s op."""
        family = self.family(family)
        x, w, dy, bias = (operands.get(role) for role in ("x", "w", "dy", "bias"))
        x, dy = (None if v is None else self._batched(v, role) for v, role in ((x, "x"), (dy, "dy")))
        pads = self.pad_pairs
        conv = dict(stride=self.stride, padding=pads, dilation=self.dilation, groups=self.groups)
        transposed = dict(self.transposed_args(), padding=pads)
        batched_input = (self._batch, self.cin, *self.size)
        if family == "conv":
            out = R.conv_forward(x, w, bias, **conv)
        elif family == "conv_input":
            out = R.conv_input(batched_input, w, dy, **conv)
        elif family == "conv_weight":
            return R.conv_weight(x, self.weight_shape, dy, **conv)
        elif family == "conv_transpose":
            out = R.conv_transpose(dy, w, bias, **transposed)
        elif family == "conv_transpose_input":
            out = R.conv_transpose_input(x, w, self.out_size, **transposed)
        else:
            return R.conv_transpose_weight(dy, self.weight_shape, x, **transposed)
        return out[0] if self.unbatched else out


# -- which algorithm serves what: the documented rules, stated here independently ---------------------


def splitk_expected_to_serve(contraction: int, tk: int = 16, min_piece: int = 256) -> bool:
    """Split-K's documented rule: some cut into 2..256 pieces of whole TK steps (the last one what
    is left), each at least ``min_piece`` long (every tile of clconv's CPU and GPU tables has TK = 16)."""
    for s in range(2, 257):
        share = -(-contraction // s)
        piece = -(-share // tk) * tk
        if piece >= min_piece and -(-contraction // piece) == s:
            return True
    return False


def _splitk(case: Case, pass_: str) -> bool:
    """Split-K's contraction: batch x output pixels for the weight gradient (pieces of 256 or
    more), channels per group x taps for the forward (input) and data gradient (output channels;
    pieces of 128 or more)."""
    if pass_ == "backward_weight":
        return splitk_expected_to_serve(case._batch * math.prod(case.out_size))
    channels = (case.cin if pass_ == "forward" else case.cout) // case.groups
    return case._batch > 0 and splitk_expected_to_serve(channels * math.prod(case.kernel), min_piece=128)


def _winograd(case: Case, pass_: str) -> bool:
    """3x3, 5x5 and 7x7 kernels, 2D or 3D one deep with no padding in depth, stride 1, any dilation; the
    data gradient pads each axis by dilation * (kernel - 1) - pad, so pads (either side) up to that
    reach."""
    plane = tuple(case.kernel[-2:])
    begin, end = case.pads[0], case.canonical_pad_end
    if case.ndim == 3 and (case.kernel[0] != 1 or begin[0] or end[0]):
        return False
    if case.ndim == 1 or plane not in ((3, 3), (5, 5), (7, 7)) or set(case.per_dim(case.stride)) != {1}:
        return False
    reach = [d * (plane[0] - 1) for d in case.per_dim(case.dilation)[-2:]]
    return pass_ != "backward_data" or all(max(begin[-2 + a], end[-2 + a]) <= reach[a] for a in range(2))


# algorithm -> (case, pass) -> whether it serves (only asked for passes the algorithm has)
SERVING_RULES: dict[str, Callable[[Case, str], bool]] = {
    "direct": lambda case, pass_: True,
    "im2col": lambda case, pass_: True,  # the column buffer of these small cases fits any workspace limit
    "implicit_gemm": lambda case, pass_: True,
    "gemm1x1": lambda case, pass_: case.is_pointwise,
    "splitk": lambda case, pass_: _splitk(case, pass_),
    "depthwise": lambda case, pass_: case.cin // case.groups == 1 and math.prod(case.kernel) <= 32,
    "depthwise_rows": lambda case, pass_: case.cin // case.groups == 1,  # any depthwise layer, any kernel
    "winograd": _winograd,
}


def expected_to_serve(algorithm: str, case: Case, family: str, device=None) -> bool:
    """Whether ``algorithm`` (or ``auto``) should serve ``family``'s op (or a pass) of ``case``: by its
    rule in SERVING_RULES, or for an algorithm that has none here yet, by its own ``decline_reason``
    on ``device`` (so a new algorithm is run wherever it says it serves, and checked to decline
    cleanly elsewhere, before anyone writes its rule down)."""
    if algorithm == "auto":
        return True
    rule = SERVING_RULES.get(algorithm)
    if rule is None:
        from clconv.algorithms import REGISTRY

        assert device is not None, f"no serving rule for {algorithm!r}: its own needs the device"
        return REGISTRY[algorithm].decline_reason(case.problem(family), device) is None
    return rule(case, case.pass_of(family))


def algorithms_for(case: Case, pass_: str, device, with_auto: bool = False) -> list[str]:
    """The algorithms that serve ``pass_`` of ``case`` on ``device`` (restricted to ``case.algorithms``
    if given); they decide themselves (``decline_reason``): the tests that need every serving one."""
    from clconv.algorithms import REGISTRY

    problem = case.problem(case.family_for(pass_))
    names = [name for name in clconv.algorithms(pass_) if (not case.algorithms or name in case.algorithms)
             and REGISTRY[name].decline_reason(problem, device) is None]
    return names + ["auto"] if with_auto else names


def every_pass_algorithm(device, cases) -> list[tuple[Case, str, str]]:
    """``(case, pass, algorithm)`` for every algorithm serving every selected pass of every case."""
    return [(case, pass_, algorithm) for case in cases for pass_ in case.passes
            for algorithm in algorithms_for(case, pass_, device)]


def param_id(case: Case, pass_: str, algorithm: str) -> str:
    return f"{pass_}-{algorithm}-{case.id}"


# -- geometries by tag ---------------------------------------------------------------------------------

_TAG = re.compile(r"n(\d+)g(\d+)c(\d+)o(\d+)i([\dx]+)k([\dx]+)s([\dx]+)p([\dx]+)(?:e([-\dx]+))?d([\dx]+)$")


def geometry(tag: str) -> ConvGeometry:
    """The ConvGeometry whose ``tag()`` is ``tag`` (e.g. ``n2g1c5o7i9x9k3x3s1x1p1x1d1x1``)."""
    match = _TAG.match(tag)
    assert match, tag
    n, g, c, o = (int(v) for v in match.groups()[:4])

    def dims(text):
        return tuple(int(v) for v in text.split("x"))

    size, kernel, stride, begin = (dims(match.group(i)) for i in (5, 6, 7, 8))
    end = dims(match.group(9)) if match.group(9) else begin
    made = ConvGeometry.make(len(size), n, g, c, o, size, kernel, stride, begin, end, dims(match.group(10)))
    assert made.tag() == tag, (made.tag(), tag)
    return made


# -- shared tables ----------------------------------------------------------------------------------------

# The forward ops' cases (tests/algorithms/test_matrix.py): the arguments as a user passes them,
# 1D/2D/3D, unbatched, groups, depthwise, stride past the kernel, dilation, asymmetric, 'same' (odd
# and even totals) and 'valid' padding, 1x1 strided, odd sizes, partial GEMM tiles, float64.  The
# GEMM-based algorithms (im2col, implicit_gemm: seconds to build on PoCL) run on the `GEMM` ones,
# which between them cover all of those; the others on every case.
GEMM_BASED = ("im2col", "implicit_gemm")
_CHEAP = tuple(name for name in clconv.algorithms("forward") if name not in GEMM_BASED)
FORWARD_CASES = [
    # 1D
    Case(1, 2, 3, 5, (11,), (3,), 1, 1, bias=True, note="basic", algorithms=_CHEAP),
    Case(1, 1, 4, 4, (13,), (3,), 2, 2, 3, 2, note="batch1-dilated", algorithms=_CHEAP),
    Case(1, 2, 2, 3, (12,), (2,), 3, 0, bias=True, note="stride-gt-kernel", algorithms=_CHEAP),
    Case(1, None, 3, 6, (9,), (4,), 1, "same", 1, 3, bias=True, note="depthwise-x2-same-odd"),
    # 2D
    Case(2, 2, 4, 6, (9, 8), (3, 3), 2, 1, 2, 2, bias=True),
    Case(2, 2, 3, 5, (7, 10), (2, 3), (1, 2), (1, 0), (2, 1), bias=True, note="non-square"),
    Case(2, 2, 6, 6, (7, 7), (3, 3), 1, 1, 1, 6, bias=True, note="depthwise", algorithms=_CHEAP),
    Case(2, 1, 3, 6, (6, 5), (3, 3), (2, 1), 1, 1, 3, note="depthwise-x2", algorithms=_CHEAP),
    Case(2, 2, 4, 3, (6, 7), (3, 2), 1, ((1, 2), (0, 1)), note="asymmetric"),
    Case(2, 1, 3, 4, (6, 7), (4, 3), 1, "same", bias=True, note="same-odd-even", algorithms=_CHEAP),
    Case(2, 2, 2, 3, (7, 6), (3, 3), 1, "same", 2, bias=True, note="same-dilated", algorithms=_CHEAP),
    Case(2, 2, 3, 4, (6, 7), (3, 2), 1, "valid", note="valid", algorithms=_CHEAP),
    Case(2, None, 3, 5, (7, 6), (3, 3), 1, 1, bias=True, algorithms=_CHEAP),
    Case(2, 2, 2, 3, (11, 10), (2, 2), 3, 0, bias=True, note="stride-gt-kernel", algorithms=_CHEAP),
    Case(2, 2, 8, 6, (7, 9), (1, 1), (2, 3), 0, 1, 2, bias=True, note="1x1-strided-grouped", algorithms=_CHEAP),
    Case(2, 3, 5, 7, (13, 11), (5, 3), (2, 1), (2, 0), bias=True, note="odd-sizes"),
    Case(2, 2, 20, 33, (9, 8), (3, 3), 1, 1, bias=True, note="tile-edges"),  # K = 180, M = 33: partial tiles
    Case(2, 2, 4, 6, (7, 6), (3, 3), 1, 1, 1, 2, bias=True, dtype="float64"),
    # 3D
    Case(3, 1, 2, 3, (5, 6, 4), (3, 2, 3), (1, 2, 1), (1, 0, 1), bias=True, note="non-cubic", algorithms=_CHEAP),
    Case(3, 2, 4, 4, (6, 5, 7), (2, 3, 2), (2, 1, 2), ((0, 1), (1, 1), (1, 0)), (2, 1, 1), 2,
         note="grouped-asymmetric"),
    Case(3, 2, 6, 4, (5, 4, 6), (1, 1, 1), (2, 1, 3), bias=True, note="1x1x1-strided", algorithms=_CHEAP),
    Case(3, None, 3, 3, (4, 5, 4), (3, 3, 3), 1, "same", 1, 3, bias=True, note="depthwise-same", algorithms=_CHEAP),
    # a kernel one deep (R(2+1)D's spatial convolutions): Winograd runs each depth slice as an image
    Case(3, 2, 4, 6, (3, 7, 6), (1, 3, 3), 1, (0, 1, 1), (1, 2, 1), bias=True, note="one-deep-dilated",
         algorithms=_CHEAP),
]

# The reliability set (guards, exact, determinism, Oclgrind's full set): each case covers some branch:
# groups / depthwise, stride with asymmetric padding and dilation, 1D / 3D, 1x1 strided (gemm1x1), a
# contraction long enough for split-K, bias in both passes, and M/N sizes that are not multiples of
# any tile (edge tiles).  The 2D and 3D cases run every algorithm; the others only what they exist for.
COVER = [
    Case(2, 2, 4, 6, (7, 6), (3, 3), 1, 1, 1, 2, bias=True),
    Case(2, 1, 3, 5, (9, 8), (3, 2), 2, ((1, 2), (0, 1)), (1, 2)),
    Case(3, 1, 2, 3, (4, 5, 3), (2, 3, 2), (1, 2, 1), (1, 0, 1)),
    Case(1, 3, 4, 4, (11,), (3,), 2, 2, 2, 4, bias=True,
         algorithms=("direct", "implicit_gemm", "depthwise", "depthwise_rows")),
    # depthwise with 2 outputs per channel, stride 1: rows of 21 run as a 16-lane vector, an
    # overlapping tail vector and padded edge columns
    Case(2, 2, 3, 6, (5, 21), (3, 3), 1, 1, 1, 3, bias=True, algorithms=("depthwise_rows",)),
    Case(2, 2, 5, 7, (5, 3), (1, 1), 2, 0, bias=True, algorithms=("gemm1x1",)),
    Case(2, 2, 2, 3, (16, 16), (3, 3), 1, 1, passes=("backward_weight",), algorithms=("splitk",)),
    # the forward's and data gradient's split-K: 32 x 9 and 30 x 9 channel-taps cut in two pieces,
    # partials in the result's layout summed through the bias (and the epilogue tests' residual)
    Case(2, 2, 32, 30, (6, 5), (3, 3), 1, 1, bias=True, passes=("forward", "backward_data"), algorithms=("splitk",)),
]

# Small convolutions whose gradients and transposed twins run through every algorithm
# (tests/algorithms/test_matrix.py): stride past the kernel, padding past the span, asymmetric
# padding, dilation, groups, 1x1 strided, 3D depthwise, patches; bias for the transposed ops.
GRADIENT_CASES = [
    Case(1, 1, 3, 4, (15,), (2,), 3, 2, note="stride3>k2-pad2>span-op2"),
    Case(2, 2, 4, 6, (7, 8), (3, 2), (1, 2), ((1, 2), (0, 1)), (2, 1), 2, bias=True),
    Case(2, 2, 5, 3, (7, 6), (1, 1), 2, 0, bias=True),
    Case(3, 2, 4, 4, (5, 5, 4), (2, 3, 2), (2, 2, 1), (1, 1, 0), (1, 1, 2), 4, bias=True, note="depthwise"),
    Case(3, 2, 4, 6, (3, 6, 5), (1, 3, 3), 1, (0, 1, 1), 1, 2, bias=True, note="one-deep-grouped"),
    # the data gradients' gathers step over the taps a stride apart (prelude.source_taps): rows of a
    # 5-tap kernel at stride 2 and padding 2, columns in patches (kernel = stride 3) with the tenth
    # column reached by none
    Case(2, 2, 3, 4, (10, 10), (5, 3), (2, 3), (2, 0), note="strided-taps-and-patches"),
]

# Transposed convolutions with no ordinary twin: output_padding >= stride (allowed below the
# dilation) leaves trailing outputs that no input reaches (they get the bias alone).
TRANSPOSED_ONLY = [
    Case(2, 2, 4, 4, (7, 8), (3, 2), (2, 1), ((1, 0), (0, 1)), (1, 3), 4, bias=True, output_padding=(1, 2),
         note="depthwise"),
]

# The weight gradient's contraction (batch 2 x 16x16 output pixels = 512) admits split-K's even cut.
SPLITK_CASE = Case(2, 2, 3, 4, (16, 16), (3, 3), 1, 1)
