"""The one table of passes: every op maps onto one pass of the canonical convolution ``x * w -> y``.

Everything that needs to know which operands a pass reads, which result it writes, what shape each
has, how long its sums are, or which op runs which pass reads it here: the ops, the planner, the
algorithms' kernel arguments, the tools and the tests.

============================ ================ =========================================================
op family                    canonical pass   user argument -> role
============================ ================ =========================================================
conv{1,2,3}d                 forward          input -> x, weight -> w, bias -> bias, residual; result y
conv{1,2,3}d_input           backward_data    grad_output -> dy, weight -> w; result dx
conv{1,2,3}d_weight          backward_weight  input -> x, grad_output -> dy; result dw
conv_transpose{1,2,3}d       backward_data    input -> dy, weight -> w, bias, residual; result dx
conv_transpose{1,2,3}d_input forward          grad_output -> x, weight -> w; result y
conv_transpose{1,2,3}d_weight backward_weight input -> dy, grad_output -> x; result dw
============================ ================ =========================================================

``residual`` is the fused epilogue's (clconv/epilogue.py): a tensor of the result's shape.
The transposed convolution is the data gradient of the convolution whose *input* is the transposed
op's output, so its geometry's ``in_channels`` is the transposed op's ``C_out`` (geometry.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping

from .geometry import ConvGeometry

PASSES = ("forward", "backward_data", "backward_weight")

# The shape of each role's tensor in a geometry (bias: one value per channel of the result).
ROLE_SHAPES: Mapping[str, Callable[[ConvGeometry], tuple[int, ...]]] = MappingProxyType({
    "x": lambda g: g.input_shape,
    "dx": lambda g: g.input_shape,
    "w": lambda g: g.weight_shape,
    "dw": lambda g: g.weight_shape,
    "y": lambda g: g.output_shape,
    "dy": lambda g: g.output_shape,
})

# The activations: what layout="channels_last" stores (N, *spatial, C); weights and bias keep theirs.
ACTIVATION_ROLES = ("x", "dx", "y", "dy", "residual")


@dataclass(frozen=True)
class Pass:
    """One pass of the canonical convolution: the operands it reads (in the order the reference
    and the kernels take them), the result it writes, and whether a bias can be added to it."""

    name: str
    inputs: tuple[str, str]
    result: str
    takes_bias: bool

    @property
    def roles(self) -> tuple[str, ...]:
        """Every tensor role of the pass with a bias, result last."""
        return (*self.inputs, "bias", self.result) if self.takes_bias else (*self.inputs, self.result)

    def shape(self, role: str, g: ConvGeometry) -> tuple[int, ...]:
        """The batched shape of ``role``'s tensor in this pass of ``g``."""
        if role == "bias":
            return (self.bias_channels(g),)
        if role == "residual":  # the epilogue's residual has the result's shape
            return ROLE_SHAPES[self.result](g)
        return ROLE_SHAPES[role](g)

    def result_shape(self, g: ConvGeometry) -> tuple[int, ...]:
        return ROLE_SHAPES[self.result](g)

    def bias_channels(self, g: ConvGeometry) -> int:
        """The bias is per channel of the result: C_out for y, C_in for dx (a transposed op's output)."""
        return g.out_channels if self.result == "y" else g.in_channels

    def reduction_length(self, g: ConvGeometry) -> int:
        """Products summed per result element, at most: what rounding errors grow with."""
        if self.name == "forward":
            return g.cin_per_group * g.kernel_volume
        if self.name == "backward_data":
            return g.cout_per_group * g.kernel_volume
        return g.batch_out_pixels

    def result_is_activation(self) -> bool:
        """Whether the result has a batch dimension (an unbatched call drops it)."""
        return self.result != "dw"


PASS_TABLE: Mapping[str, Pass] = MappingProxyType({
    "forward": Pass("forward", ("x", "w"), "y", takes_bias=True),
    "backward_data": Pass("backward_data", ("dy", "w"), "dx", takes_bias=True),
    "backward_weight": Pass("backward_weight", ("x", "dy"), "dw", takes_bias=False),
})


@dataclass(frozen=True)
class Op:
    """An op family (conv, conv_input, ...): the pass it runs and the role of each user tensor."""

    family: str
    pass_: str
    roles: Mapping[str, str]  # user argument name -> canonical role

    @property
    def spec(self) -> Pass:
        return PASS_TABLE[self.pass_]


OPS: Mapping[str, Op] = MappingProxyType({op.family: op for op in (
    Op("conv", "forward", MappingProxyType({"input": "x", "weight": "w", "bias": "bias", "residual": "residual"})),
    Op("conv_input", "backward_data", MappingProxyType({"grad_output": "dy", "weight": "w"})),
    Op("conv_weight", "backward_weight", MappingProxyType({"input": "x", "grad_output": "dy"})),
    Op("conv_transpose", "backward_data",
       MappingProxyType({"input": "dy", "weight": "w", "bias": "bias", "residual": "residual"})),
    Op("conv_transpose_input", "forward", MappingProxyType({"grad_output": "x", "weight": "w"})),
    Op("conv_transpose_weight", "backward_weight", MappingProxyType({"input": "dy", "grad_output": "x"})),
)})


def check_pass(pass_: object) -> Pass:
    """The table entry of ``pass_``; a ValueError naming the argument otherwise."""
    spec = PASS_TABLE.get(pass_) if isinstance(pass_, str) else None
    if spec is None:
        raise ValueError(f"pass_ must be one of {PASSES}, got {pass_!r}")
    return spec
