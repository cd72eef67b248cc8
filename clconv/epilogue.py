"""The fused epilogue of the ops that write an activation: ``y = act(alpha * conv + bias + beta * residual)``
(cuDNN's ``convolutionBiasActivationForward`` formula), computed in the kernel that writes ``y``.

One table, :data:`ACTIVATIONS`, states each activation twice: as the OpenCL C expression the
kernels evaluate (on ``v``, the arithmetic type ``clc_real``; ``CLC_SLOPE`` is ``negative_slope``)
and as the float64 NumPy function the reference and the tests evaluate.  Both propagate NaN as
PyTorch does (``relu(nan)`` is nan).  The constants of an epilogue are baked into the kernel
source, as the geometry is: a call with another ``alpha`` is another program.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1.0 + np.asarray(_erf(v / math.sqrt(2.0)), np.float64))


def _gelu_tanh(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))


@dataclass(frozen=True)
class Activation:
    """``c``: the OpenCL C expression of ``v``; ``numpy``: the same function in float64."""

    c: str
    numpy: Callable[[np.ndarray, float], np.ndarray]


# Comparisons are written so that NaN falls through to `v` (NaN < 0 is false).
ACTIVATIONS: Mapping[str, Activation] = {
    "relu": Activation("v < 0 ? (clc_real)0 : v", lambda v, s: np.where(v < 0, 0.0, v)),
    "leaky_relu": Activation("v < 0 ? v * CLC_SLOPE : v", lambda v, s: np.where(v < 0, v * s, v)),
    "relu6": Activation("v < 0 ? (clc_real)0 : (v > 6 ? (clc_real)6 : v)",
                        lambda v, s: np.where(v < 0, 0.0, np.where(v > 6, 6.0, v))),
    "silu": Activation("v / ((clc_real)1 + exp(-v))", lambda v, s: v / (1.0 + np.exp(-v))),
    "gelu": Activation("(clc_real)0.5 * v * ((clc_real)1 + erf(v * (clc_real)M_SQRT1_2))", lambda v, s: _gelu(v)),
    "gelu_tanh": Activation(
        "(clc_real)0.5 * v * ((clc_real)1 + tanh((clc_real)0.7978845608028654 * (v + (clc_real)0.044715 * v * v * v)))",
        lambda v, s: _gelu_tanh(v)),
    "sigmoid": Activation("(clc_real)1 / ((clc_real)1 + exp(-v))", lambda v, s: 1.0 / (1.0 + np.exp(-v))),
    "tanh": Activation("tanh(v)", lambda v, s: np.tanh(v)),
}


@dataclass(frozen=True)
class Epilogue:
    """What the kernel writing the result does to each sum ``v`` before storing it:
    ``act(alpha * v + bias + beta * residual)``; the bias itself is the Problem's ``bias`` flag."""

    activation: str | None = None
    negative_slope: float = 0.01  # only leaky_relu reads it; kept as given otherwise
    alpha: float = 1.0
    beta: float = 1.0
    residual: bool = False

    @property
    def is_identity(self) -> bool:
        """Whether the result is the plain sum (plus the bias): no extra work in the kernel."""
        return self.activation is None and self.alpha == 1.0 and not self.residual

    def tag(self) -> str:
        """The epilogue's part of a problem's name (empty for the identity)."""
        if self.is_identity:
            return ""
        parts = [self.activation or "linear"]
        if self.activation == "leaky_relu":
            parts.append(f"s{self.negative_slope!r}")
        if self.alpha != 1.0:
            parts.append(f"a{self.alpha!r}")
        if self.residual:
            parts.append(f"r{self.beta!r}")
        return "-".join(parts)


IDENTITY = Epilogue()


def apply_reference(epilogue: Epilogue, conv: np.ndarray, bias_added: np.ndarray | None,
                    residual: np.ndarray | None) -> np.ndarray:
    """``act(alpha * conv + bias + beta * residual)`` in float64.  ``conv`` excludes the bias when
    ``bias_added`` (per element, broadcast) is given."""
    v = epilogue.alpha * np.asarray(conv, np.float64)
    if bias_added is not None:
        v = v + bias_added
    if epilogue.residual:
        if residual is None:
            raise ValueError("this epilogue adds a residual, but none was given")
        v = v + epilogue.beta * np.asarray(residual, np.float64)
    if epilogue.activation is not None:
        v = ACTIVATIONS[epilogue.activation].numpy(v, epilogue.negative_slope)
    return np.asarray(v, np.float64)


def c_literal(value: float) -> str:
    """``value`` as an OpenCL C literal of the arithmetic type (exact: the shortest repr that reads
    back as the same double, then rounded once to clc_real)."""
    return f"(clc_real){value!r}"


def _real_number(name: str, value: object) -> float:
    if type(value) is float and math.isfinite(value):  # the usual case, without the ABC check's cost
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return result


def check(activation: object, negative_slope: object, alpha: object, beta: object, has_residual: bool) -> Epilogue:
    """The epilogue of an op's keyword arguments; a ValueError/TypeError naming a bad one."""
    if (activation is None and not has_residual and type(alpha) is float and alpha == 1.0
            and type(negative_slope) is float and type(beta) is float
            and math.isfinite(negative_slope) and math.isfinite(beta)):
        return IDENTITY  # no epilogue asked for (every plain call): the checks below, in a tenth of the time
    if activation is not None and not isinstance(activation, str):
        raise TypeError(f"activation must be None or one of {tuple(ACTIVATIONS)}, got {activation!r}")
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation must be None or one of {tuple(ACTIVATIONS)}, got {activation!r}")
    slope = _real_number("negative_slope", negative_slope)
    a = _real_number("alpha", alpha)
    b = _real_number("beta", beta)
    # beta only scales a residual; without one it is accepted and unused, as cuDNN's alpha2 with no z
    return Epilogue(activation, slope if activation == "leaky_relu" else 0.01, a, b if has_residual else 1.0,
                    has_residual)
