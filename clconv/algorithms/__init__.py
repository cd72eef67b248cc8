"""The algorithm registry: every way clconv knows to run a pass, by name.

An algorithm is one module here (a subclass of :class:`~clconv.algorithms.base.Algorithm` that
turns a problem into a :class:`~clconv.plan.Plan`) plus its template in ``clconv/kernels/``,
registered by one line in ``ALGORITHMS``.  The planner, ops, tools and tests find it through
:data:`REGISTRY`.
"""

from __future__ import annotations

from ..passes import PASSES, check_pass
from ..plan import Problem
from ..runtime import LaunchError, Operand, Runner
from ..settings import workspace_limit
from .base import Algorithm, Declined
from .depthwise import DepthwiseWgrad
from .depthwise_rows import DepthwiseRows
from .direct import Direct
from .im2col import Im2col
from .implicit_gemm import Gemm1x1, ImplicitGemm
from .splitk import SplitK
from .winograd import Winograd

ALGORITHMS: tuple[type[Algorithm], ...] = (
    Direct,
    Im2col,
    Gemm1x1,
    ImplicitGemm,
    SplitK,
    DepthwiseWgrad,
    DepthwiseRows,
    Winograd,
)

REGISTRY: dict[str, Algorithm] = {cls.name: cls() for cls in ALGORITHMS}


def algorithms(pass_: str | None = None) -> list[str]:
    """Names of the algorithms (that serve ``pass_``, if given: forward, backward_data, backward_weight)."""
    if pass_ is not None:
        check_pass(pass_)
    return [name for name, alg in REGISTRY.items() if pass_ is None or pass_ in alg.passes]


# Problem, Operand, Runner, LaunchError, PASSES and workspace_limit live in plan, runtime, passes
# and settings; importable from here too, as code written against 0.1's layout does.
__all__ = [
    "ALGORITHMS", "PASSES", "REGISTRY", "Algorithm", "Declined", "LaunchError", "Operand", "Problem", "Runner",
    "algorithms", "workspace_limit",
]
