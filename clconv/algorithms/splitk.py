"""Split-K: a pass's contraction cut into equal pieces, each a GEMM into its own partial result,
then summed in a fixed order by a second kernel (deterministic).  Made for weight gradients, whose
GEMM is small (C_out x C_in*taps) with a long contraction (batch x pixels): without a split it runs
a handful of work-groups.  The forward and the data gradient of a small problem (batch 1, a 7x7 or
14x14 image) are the same case over channels x taps: their implicit GEMMs (implicit_gemm's views)
then store each piece in the result's own layout, and the sum applies the bias and the epilogue."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from .. import limits, settings
from ..passes import PASSES
from ..plan import LAYOUTS, Plan, Problem, rounded
from .base import Algorithm
from .gemm import (
    GPU_TILES, IMPLICIT_ROLES, TILE_CANDIDATES, GemmShape, edge_waste, gather_rank, gathered_operand, gemm_calls,
    gemm_tiles, implicit_shape, is_cpu_config, local_loads_per_fma, tile_config, tile_extent, vector_first,
    weight_shape, work_items,
)
from .reduce import result_elements, splitk_result, splitk_sum


# The weight of a register block's local-memory loads per FMA ((WM + WN) / (WM x WN): 0.25 for 8x8
# blocks, 0.5 for 4x4) against the edge waste in split-K's tile order (SplitK.tile_rank): waste x
# (1 + SPLITK_LOAD_WEIGHT x loads), so a 4x4 tile that wastes nothing no longer beats an 8x8 one
# that wastes a few percent.  On an H200 over the 45 weight gradients whose every tile was timed
# (docs/perf/h200-all-tiles-{b,closing,closing-holdout,short-gathered}.json), the first tile's
# summed time went from 1.298x the fastest tiles' to 1.116x (geometric mean 1.128x -> 1.107x; 0.25
# and 0.5 alike, 1.0 1.115x), three rows changing, all faster: I3D's 7x7x7 stem 2.00x -> 1.26x (32x32
# of 4x4 blocks, which divided its 1029 columns, against 64x64 of 8x8), a 3x3x3 32 -> 64 at
# 8x112x112 1.44x -> 1.00x, Inception's 3x3 stride-2 valid 1.15x -> 1.12x (set on that data).  The
# weight gradient's only: split-K's small forwards (pieces of channels x taps, a few tiles each) ran
# worse with it (VGG-11's conv5_2 at batch 8 1.05x -> 1.26x, docs/perf/h200-splitk-forward.json),
# and Winograd's weight gradient keeps its order
SPLITK_LOAD_WEIGHT = 0.5


# The rows and columns (each) and the FLOPs of a GEMM from which split-K's tile order puts the
# larger tile first where both operands are read in place as matrices (SplitK.configs)
PLAIN_LARGE_SIDE = 256
PLAIN_LARGE_FLOPS = 2**30


class SplitK(Algorithm):
    name = "splitk"
    passes = PASSES
    layouts = LAYOUTS
    description = ("the implicit GEMM with its contraction (batch x pixels for the weight gradient, channels "
                   "x taps for the others) cut into pieces of whole TK steps, summed by a second kernel in a "
                   "fixed order")
    MIN_PIECE = 256  # contraction per piece below which the extra partial traffic does not pay
    # The forward's and data gradient's pieces: their partials are the result's size (a weight
    # gradient's are the weight's, however long its contraction), and they serve small problems,
    # whose contraction over channels x taps is a few hundred to a few thousand long
    MIN_RESULT_PIECE = 128

    MAX_PIECES = 256
    FILL = 4  # work-groups per compute unit a cut aims at on a CPU: enough to fill it, with slack
    FILL_ITEMS = 512  # work-items per compute unit a cut aims at on a GPU (splits_for)

    @classmethod
    def fill_miss(cls, fit: limits.Limits, tile: dict, work_groups: int, splits: int) -> float:
        """How far ``splits`` pieces of ``work_groups`` work-groups each land from filling the device:
        on a GPU the log-ratio of the launch's work-items to FILL_ITEMS per compute unit (what a
        compute unit holds is work-items: their registers); on a CPU the distance in work-groups
        from FILL per compute unit (a work-group is what one core runs)."""
        if fit.gpu and not is_cpu_config(tile):
            return abs(math.log(work_groups * splits / (cls.FILL_ITEMS * fit.compute_units / work_items(tile))))
        return abs(work_groups * splits - cls.FILL * fit.compute_units)

    @staticmethod
    def tile_rank(m: int, n: int, tile: dict, taps: bool = False, pieces: bool = True, loads: bool = False,
                  plain: bool = False) -> tuple:
        """The order of GPU tiles where pieces supply the parallelism: least edge waste (with
        ``loads``, weighed by the block's local loads per FMA: SPLITK_LOAD_WEIGHT), the larger
        register block (more FMAs per local load), the larger tile where loads decode taps (``taps``:
        it reuses each decoded load over more rows) or where both operands of a large GEMM are read
        in place as matrices (``plain``), then, where the contraction is cut (``pieces``), the
        smaller work-group (small groups fill the device evenly).  CPU tiles last."""
        if is_cpu_config(tile):
            return (float("inf"), 0, 0, 0)
        waste = edge_waste(m, n, tile["TM"], tile["TN"])
        if loads:
            waste *= 1 + SPLITK_LOAD_WEIGHT * local_loads_per_fma(tile["WM"], tile["WN"])
        area = -tile["TM"] * tile["TN"] if taps or plain else 0
        return (round(waste, 9), -tile["WM"] * tile["WN"], area, work_items(tile) if pieces else 0)

    @staticmethod
    def piece_length(contraction: int, splits: int, tk: int) -> int:
        """The contraction of each piece: whole TK steps, the last piece what is left."""
        return rounded(-(-contraction // splits), tk)

    @classmethod
    def cuts(cls, contraction: int, tk: int, min_piece: int | None = None) -> list[int]:
        """Piece counts from 2 whose pieces are whole TK steps of at least ``min_piece``
        (MIN_PIECE), and exactly that many of them cover the contraction (none left empty)."""
        min_piece = cls.MIN_PIECE if min_piece is None else min_piece
        out = []
        for s in range(2, cls.MAX_PIECES + 1):
            piece = cls.piece_length(contraction, s, tk)
            if piece >= min_piece and -(-contraction // piece) == s:
                out.append(s)
        return out

    @staticmethod
    def shape(problem: Problem, ksplit: int = 0) -> GemmShape:
        """The pass's implicit GEMM (implicit_gemm's), its contraction cut into pieces of ``ksplit``:
        the weight gradient's into a clc_real weight-shaped workspace, the others' into one shaped
        as the result (the C view's ``partial``: the result's element count)."""
        if problem.pass_ == "backward_weight":  # its partials in a clc_real workspace, not dw
            # a 1x1 layer's input read in place as a matrix (gemm1x1's view: vector loads where
            # its pixels allow), not through the unfolding's per-element index decoding
            view = "b_input_pointwise_t" if problem.geometry.is_pointwise else "b_input_unfold_t"
            return weight_shape(problem.geometry, view, ksplit=ksplit, layout=problem.layout)
        shape = implicit_shape(problem)
        if not ksplit:
            return shape
        return replace(shape, ksplit=ksplit, c={**shape.c, "partial": result_elements(problem)})

    def min_piece(self, problem: Problem) -> int:
        return self.MIN_PIECE if problem.pass_ == "backward_weight" else self.MIN_RESULT_PIECE

    def splits_for(self, problem: Problem, device, tile: dict) -> list[int]:
        """Piece counts worth running, best first.

        On a GPU: by how near the launch comes to FILL_ITEMS work-items per compute unit (as a
        ratio), then those that cut the contraction evenly (no bounds checks on K).  The fill is
        counted in work-items because the GPU tiles' work-groups have 64 to 256 of them, and what
        a compute unit holds is work-items (their registers: 512 take the register file of an
        H200's multiprocessor at the ~128 registers a work-item of the GEMM core uses).  Counted
        in work-groups, with even cuts first, the heuristic's choice ran 1.47x the best candidate
        on the 7x7 stem's weight gradient and 2.44x on a 1x1 stride-2 one (2 pieces: the only
        even cut); geometric mean 1.26x over 14 layers, 1.07x with this fill (docs/performance.md).

        On a CPU, where a work-group is what one core runs: even cuts first, then by how near the
        work-groups come to FILL per compute unit.  Uneven cuts serve sizes such as a batch of 8
        at 25x25 (K = 5000 = 8 x 625 has no even cut in whole 16-steps; unsplit, that VGG weight
        gradient ran 6.4x cuDNN)."""
        g = problem.geometry
        shape = self.shape(problem)
        K = shape.K
        elements = result_elements(problem)  # of one piece's partials (dw's, y's or dx's)
        tm, tn, tk = tile_extent(tile)
        tiles = -(-shape.M // tm) * -(-shape.N // tn) * g.groups
        fit = limits.of(device)
        limit = settings.workspace_limit(device)
        gpu = fit.gpu and not is_cpu_config(tile)
        out: list[tuple[Any, Any, int]] = []
        for s in self.cuts(K, tk, self.min_piece(problem)):
            if s * elements * problem.itemsize > limit:
                continue
            uneven = self.piece_length(K, s, tk) * s != K
            miss = self.fill_miss(fit, tile, tiles, s)
            out.append((miss, uneven, s) if gpu else (uneven, miss, s))
        return [s for *_, s in sorted(out)]

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        shape = self.shape(problem)
        if reason is None and not shape.M * shape.N:
            # batch 0: ops returns the empty result (or a zero weight gradient) without planning
            reason = "the problem is empty (batch 0): there is no GEMM to cut"
        if reason is None and not any(self.splits_for(problem, device, t) for t in self.configs(problem, device)):
            what = {"forward": "input channels x taps", "backward_data": "output channels x taps",
                    "backward_weight": "batch x output pixels"}[problem.pass_]
            reason = (f"the contraction ({what} = {shape.K}) has no cut into two or more pieces "
                      f"of at least {self.min_piece(problem)} whose partials fit the workspace limit")
        return reason

    def configs(self, problem, device):
        shape = self.shape(problem)
        fit = limits.of(device)
        # The split supplies the parallelism, so rank tiles by edge waste and reuse alone (a huge
        # group count switches off gemm_tiles' fill-the-device term); then the best split per tile.
        tiles = gemm_tiles(shape.M, shape.N, fit, problem.itemsize, limit=len(GPU_TILES), groups=1 << 20,
                           layout=problem.layout, vector_first=vector_first(problem, shape), large_blocks=False)
        if fit.gpu:
            # Among GPU tiles that waste the same, the larger register block first (more FMAs per
            # local load), then the smaller work-group: the pieces, not the tile, fill the device,
            # and small groups fill it evenly.  On an H200 sweep the 64x64 tile (64 work-items, 8x8
            # blocks) ran the 1x1 256->64 layer's weight gradient 1.3-1.7x faster than 64x128 at
            # every piece count, and at its best count was within 5% of the best candidate on every
            # layer it did not waste on.  With taps, each load of B (the unfolded input) decodes a
            # tap and a pixel, and a larger tile reuses it over more rows: there, between the block
            # and the work-group, the larger tile (128x64 and 128x128 ran 10-46% faster than 64x64 at
            # the same pieces on six such layers of the H200 tuning runs, docs/perf/heuristic_check.py).
            # A 1x1 layer's weight gradient reads both operands in place as matrices (in vectors
            # where its pixels allow): in a large GEMM (PLAIN_LARGE_SIDE rows and columns, from
            # PLAIN_LARGE_FLOPS) the larger tile, which loads fewer values per FMA, pays as with taps.
            # On an H200, every tile timed on the 1x1 weight gradients of all stored lists and 14
            # more layers (docs/perf/h200-all-tiles-pointwise{,-retimed}.json): 128x128 ran the 13
            # such GEMMs in 0.68-1.00x the time of the 64x64 tile first before (issue 12's GEMM
            # layer 0.87x); in smaller ones larger tiles lost: a 256 x 512 GEMM of 0.4 GFLOP 1.28x
            # in 128x128, 128 x 256 1.22x in 64x128, 256 x 64 1.21-1.30x in 128x64
            taps = problem.geometry.kernel_volume > 1
            loads = problem.pass_ == "backward_weight"
            plain = (shape.b_view == "b_input_pointwise_t" and min(shape.M, shape.N) >= PLAIN_LARGE_SIDE
                     and problem.geometry.flops >= PLAIN_LARGE_FLOPS)
            tiles.sort(key=lambda tile: self.tile_rank(shape.M, shape.N, tile, taps=taps, loads=loads, plain=plain))
            gathered = gathered_operand(problem, shape)
            if gathered:
                # a weight gradient of few input channels x taps (a first layer: 27 columns) is
                # gather-bound, as such forwards are (gemm.SHORT_CONTRACTION): fewest gathers
                # first.  On an H200, every tile timed over 10 such layers
                # (docs/perf/h200-all-tiles-short-gathered.json), 1.08x the best against 1.26x
                tiles.sort(key=lambda tile: gather_rank(shape.M, shape.N, tile, gathered))
        out = []
        for tile in tiles[:TILE_CANDIDATES]:
            splits = self.splits_for(problem, device, tile)
            if splits:
                out.append({**tile, "splits": splits[0]})
        return out

    def plan(self, problem, config, device):
        splits = config["splits"]
        tk = tile_extent(tile_config(config))[2]
        shape = self.shape(problem, ksplit=self.piece_length(self.shape(problem).K, splits, tk))
        elements = result_elements(problem)
        index = problem.index_type(elements * splits)
        a, b, _, _ = IMPLICIT_ROLES[problem.pass_]
        calls, workspaces = gemm_calls(problem, shape, tile_config(config), index, a, b, "partial")
        if problem.pass_ == "backward_weight":
            total = splitk_sum(problem, index, splits, elements)
        else:
            total = splitk_result(problem, index, splits)
        return Plan(problem, self.name, config, (*calls, total),
                    {"partial": splits * elements * problem.itemsize, **workspaces})
