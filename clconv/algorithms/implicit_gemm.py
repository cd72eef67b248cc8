"""Implicit GEMM: every pass as one tiled GEMM whose tile loads do the im2col / col2im addressing,
so no column buffer is written (kernels/gemm.mako's operand views); ``gemm1x1`` is the same GEMM
for 1x1 kernels, where the input is the B matrix itself."""

from __future__ import annotations

from .. import limits
from ..passes import PASSES
from ..plan import CHANNELS_FIRST, LAYOUTS, Plan, Problem
from .base import Algorithm
from .gemm import (
    IMPLICIT_ROLES, LARGE_GEMM_TILE, TILE_KEYS, GemmShape, TileWeights, backward_data_shape, forward_shape,
    gathered_channels, gathered_operand, gathers_long, gemm_calls, gemm_tiles, global_vectors, implicit_shape,
    is_dot_config, pointwise_data_shape, strided_pointwise_data_shape, thrashing_last, tile_config,
    vector_first, weight_contraction, weight_shape, with_dot_configs,
)
from .im2col import dot_weight_plan

class ImplicitGemm(Algorithm):
    name = "implicit_gemm"
    passes = PASSES
    layouts = LAYOUTS
    description = "tiled GEMM whose tile loads do the im2col/col2im addressing: no column buffer"

    def large_blocks(self, problem: Problem, shape: GemmShape) -> bool:
        """Whether gemm.LARGE_GEMM_TILE may come first: not here, where the tile loads address the
        input or dy per element."""
        return False

    def reads_matrices(self, problem: Problem) -> bool:
        """Whether the tile loads read both operands as matrices (gemm.VECTOR_TIES): not here,
        where they address the input or dy per element."""
        return False

    def tile_weights(self, problem: Problem) -> TileWeights | None:
        """What the GPU tile order weighs against the edge waste (gemm_tiles' ``weights``): here
        nothing, the waste and the table's order."""
        return None

    def _shape(self, problem: Problem) -> GemmShape:
        return implicit_shape(problem)

    def configs(self, problem, device):
        shape = self._shape(problem)
        fit = limits.of(device)
        tiles = gemm_tiles(shape.M, shape.N, fit, problem.itemsize, groups=problem.geometry.groups,
                           vector_first=vector_first(problem, shape), layout=problem.layout, k=weight_contraction(shape),
                           gathered=gathered_operand(problem, shape), gathered_channels=gathered_channels(problem, shape),
                           long_gather=problem.pass_ != "backward_weight" and gathers_long(problem, shape),
                           gathered_ndim=sum(extent > 1 for extent in problem.geometry.in_size),
                           large_blocks=self.large_blocks(problem, shape),
                           matrices=self.reads_matrices(problem), weights=self.tile_weights(problem))
        return thrashing_last(tiles, problem, shape, fit)

    def plan(self, problem, config, device):
        calls, workspaces = gemm_calls(problem, self._shape(problem), tile_config(config), problem.index_type(),
                                       *IMPLICIT_ROLES[problem.pass_])
        return Plan(problem, self.name, config, tuple(calls), workspaces)


# gemm1x1's data gradient, W^T dy read in place: its GPU tiles weighed by a shortfall under 512
# work-items a compute unit (squared) and their blocks' local loads.  On an H200, over the 43 such
# layer-passes of 12 stored lists with six tiles or more timed (docs/perf/heuristic_check.py, the
# all-tiles runs merged), the waste order's first tile ran 1.116x the fastest there; with these
# weights, chosen from a grid on all lists but one and judged on that one, for each list (the same
# weights every time), 1.065x: better on 7 lists, worse on 2 (the pointwise list's 13 passes 1.017x
# -> 1.042x, the fresh list's 4 1.056x -> 1.063x).  Tiles of 64 work-items (32x32 in 4x4 blocks,
# 64x64 in 8x8) had come first wherever their waste was least: 1.2-1.5x the fastest on the small
# GEMMs of EfficientNet-B0's and MobileNetV2's expansions, ShuffleNet's and GhostNet's 1x1 layers,
# batch-1 layers at 7x7 and 16x16; the 32x64 tile of 256 runs them within 1.06x.  Still missed:
# DenseNet-121's 544 -> 128 at 14x14 (1.57x: 128x128 fastest); worse: a batch-1 512 -> 512 at
# 14x14 (1.00x -> 1.33x).  The forwards keep the waste order (no weights gained there).
POINTWISE_DATA_WEIGHTS = TileWeights(fill_power=2.0, loads=1.0, fill_items=512)


class Gemm1x1(ImplicitGemm):
    name = "gemm1x1"
    description = "1x1 convolution (strided too) as one GEMM reading the input in place"

    def large_blocks(self, problem, shape):
        """A 1x1 kernel's operands are strided matrices (no taps, no padding): the large GEMMs'
        8x8 blocks may come first, but for a forward that reads the input in scalars (strided, or
        an image's pixels not a multiple of 4: gemm.global_vectors)."""
        if problem.pass_ != "forward":
            return True
        return global_vectors(problem, shape, dict(zip(TILE_KEYS, LARGE_GEMM_TILE)))[1]

    def reads_matrices(self, problem):
        """A 1x1 kernel's operands are strided matrices, read in place (strided ones in scalars)."""
        return True

    def tile_weights(self, problem):
        """The data gradient's tiles weighed by their fill and local loads (POINTWISE_DATA_WEIGHTS)."""
        return POINTWISE_DATA_WEIGHTS if problem.pass_ == "backward_data" else None

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        if reason is None and not problem.geometry.is_pointwise:
            reason = "it serves only 1x1 kernels without padding"
        return reason

    def configs(self, problem, device):
        configs = super().configs(problem, device)
        if any(s > 1 for s in problem.geometry.stride):  # the dot products read the input's rows of pixels
            return configs
        return with_dot_configs(problem, limits.of(device), configs, self._shape(problem))

    def plan(self, problem, config, device):
        if is_dot_config(config):  # dw = dy x^T as dot products over the input's rows: no buffer at all
            if problem.pass_ != "backward_weight" or any(s > 1 for s in problem.geometry.stride):
                raise ValueError(f"the dot-product configuration {dict(config)} serves stride-1 weight gradients only")
            return dot_weight_plan(problem, config, device, self.name, problem.geometry.batch)
        return super().plan(problem, config, device)

    def _shape(self, problem):
        g = problem.geometry
        if problem.pass_ == "forward":
            return forward_shape(g, "b_input_pointwise", layout=problem.layout)
        if problem.pass_ == "backward_data":
            if problem.layout != CHANNELS_FIRST:
                return backward_data_shape(g, problem.layout)  # the gather view with one tap
            if any(s > 1 for s in g.stride):
                return strided_pointwise_data_shape(g)
            return pointwise_data_shape(g)
        return weight_shape(g, "b_input_pointwise_t", layout=problem.layout)
