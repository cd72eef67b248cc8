"""The algorithm registry: every way clconv knows to run a pass, by name."""

from __future__ import annotations

from .base import (
    PASSES, Algorithm, Declined, LaunchError, Operand, Problem, Runner, release_workspaces, workspace_limit,
)
from .direct import Direct, bias_gradient_runner
from .depthwise import DepthwiseWgrad
from .depthwise_rows import DepthwiseRows
from .gemm import Gemm1x1, Im2col, ImplicitGemm, SplitK

REGISTRY: dict[str, Algorithm] = {
    algorithm.name: algorithm
    for algorithm in (Direct(), Im2col(), Gemm1x1(), ImplicitGemm(), SplitK(), DepthwiseWgrad(),
                      DepthwiseRows())
}


def algorithms(pass_: str | None = None) -> list[str]:
    """Names of the algorithms (that serve ``pass_``, if given: forward, backward_data, backward_weight)."""
    if pass_ is not None and pass_ not in PASSES:
        raise ValueError(f"pass_ must be one of {PASSES} or None, got {pass_!r}")
    return [name for name, alg in REGISTRY.items() if pass_ is None or pass_ in alg.passes]


__all__ = [
    "PASSES", "REGISTRY", "Algorithm", "Declined", "LaunchError", "Operand", "Problem", "Runner", "algorithms",
    "bias_gradient_runner", "release_workspaces", "workspace_limit",
]
