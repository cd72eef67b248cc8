"""Split-K: a pass's contraction cut into equal pieces, each a GEMM into its own partial result,
then summed in a fixed order (deterministic) by a second kernel, or by the GEMM's own launch where
the device lets its work-groups hand results over (SplitK.one_launch).  Made for weight gradients, whose
GEMM is small (C_out x C_in*taps) with a long contraction (batch x pixels): without a split it runs
a handful of work-groups.  The forward and the data gradient of a small problem (batch 1, a 7x7 or
14x14 image) are the same case over channels x taps: their implicit GEMMs (implicit_gemm's views)
then store each piece in the result's own layout, and the sum applies the bias and the epilogue."""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import replace
from typing import Any, Mapping

from .. import limits, settings
from ..passes import PASSES
from ..plan import LAYOUTS, Plan, Problem, rounded
from .base import Algorithm
from .gemm import (
    GPU_TILES, IMPLICIT_ROLES, TILE_CANDIDATES, GemmShape, edge_waste, gemm_calls,
    gemm_tiles, implicit_shape, is_cpu_config, local_loads_per_fma, output_tiles, tile_config, tile_extent,
    vector_first, weight_shape, work_items,
)
from .reduce import result_elements, splitk_result, splitk_sum


# Split-K's GPU configurations (a tile and its piece count, SplitK.splits_for) are ranked by a model
# of their kernel time on the device (gpu_cost): the log of the time over that of the problem's
# other configurations, as a weighted sum of what sets it.  The weights are a least-squares fit to
# every split-K configuration timed in the stored runs (1325 layer-passes of 36 lists, on H200s and
# H100s, docs/perf/heuristic_check.py; fitted within each layer-pass, so only the differences
# between its configurations count; refitted as the runs grow).  Judged on lists it was not fitted
# to (each list in turn left out of the fit and ranked by the weights of the others) the first
# configuration ran 1.027x the fastest one timed (1.028x over the first 989); on the 132
# layer-passes of the earlier lists that the heuristic gave split-K, about 1.04x, where the order
# of rules before ran 1.074x (docs/perf/splitk_cost_fit.py).  The terms, each of a tile and its pieces:
#  * ``waste``: the log of the work done per useful output (edge_waste): padded tiles compute
#    zeros.  Not quite proportional (0.84 for the weight gradient): a padded tile loads less.
#  * ``loads``: the register block's local-memory loads per FMA (local_loads_per_fma: 0.25 for an
#    8x8 block, 0.5 for 4x4); the weight gradient's GEMM runs long contractions into few outputs,
#    where the loads of a 4x4 block cost it 25% over an 8x8 block's.
#  * ``idle``: the log of the compute units left without a work-group (a launch of fewer work-groups
#    than units), and ``tail``: the log of the last wave's share left idle (waves of one work-group
#    a unit: 1.5 waves run as 2).
#  * ``group``: the log of a work-group's work-items: larger groups fill the units more evenly.
#  * ``taps_rows``, ``taps_columns``: where the unfolding decodes a tap and a pixel per load (a
#    kernel larger than 1x1), the log of the tile's rows (each decoded column is reused over them)
#    and columns.
SPLITK_COST_WEIGHTS = {
    "backward_weight": {"waste": 0.81, "loads": 0.88},
    "result": {"waste": 0.47, "loads": 0.19},  # the forward's and the data gradient's pieces
    "shared": {"idle": 0.42, "tail": 0.49, "group": -0.18, "taps_rows": -0.05, "taps_columns": 0.07},
}


def cost_terms(problem: Problem, shape: GemmShape, config: dict, units: int) -> dict[str, float]:
    """The terms of split-K's GPU time model (SPLITK_COST_WEIGHTS) for ``config`` (a GPU tile and
    its ``splits``) on a GPU of ``units`` compute units."""
    g = problem.geometry
    tm, tn, wm, wn = config["TM"], config["TN"], config["WM"], config["WN"]
    groups = output_tiles(shape, tm, tn, g.groups) * config["splits"]
    waves = groups / units
    taps = g.kernel_volume > 1
    return {
        "waste": math.log(edge_waste(shape.M, shape.N, tm, tn)),
        "loads": local_loads_per_fma(wm, wn),
        "idle": math.log(max(1.0, units / groups)),
        "tail": math.log(math.ceil(waves) / waves) if waves > 1 else 0.0,
        "group": math.log(work_items(config)),
        "taps_rows": math.log(tm) if taps else 0.0,
        "taps_columns": math.log(tn) if taps else 0.0,
    }


def cost_weights(pass_: str) -> dict[str, float]:
    """SPLITK_COST_WEIGHTS as they apply to ``pass_``."""
    own = SPLITK_COST_WEIGHTS["backward_weight" if pass_ == "backward_weight" else "result"]
    return {**SPLITK_COST_WEIGHTS["shared"], **own}


def gpu_cost(problem: Problem, shape: GemmShape, config: dict, units: int) -> float:
    """The modelled log-time of split-K's ``config`` (a GPU tile and its ``splits``) on a GPU of
    ``units`` compute units, up to a constant of the problem (SPLITK_COST_WEIGHTS)."""
    weights = cost_weights(problem.pass_)
    return sum(weights[name] * value for name, value in cost_terms(problem, shape, config, units).items())


@functools.lru_cache(maxsize=4096)
def _cuts(contraction: int, tk: int, min_piece: int, max_pieces: int) -> tuple[int, ...]:
    """SplitK.cuts, remembered: every GPU tile of a problem asks it for the same contraction."""
    out = []
    for s in range(2, max_pieces + 1):
        piece = SplitK.piece_length(contraction, s, tk)
        if piece >= min_piece and -(-contraction // piece) == s:
            out.append(s)
    return tuple(out)


class SplitK(Algorithm):
    name = "splitk"
    passes = PASSES
    layouts = LAYOUTS
    description = ("the implicit GEMM with its contraction (batch x pixels for the weight gradient, channels "
                   "x taps for the others) cut into pieces of whole TK steps, summed in a fixed order by a second "
                   "kernel or, where the device lets work-groups hand results over, by each tile's last piece")
    MIN_PIECE = 256  # contraction per piece below which the extra partial traffic does not pay
    # The forward's and data gradient's pieces: their partials are the result's size (a weight
    # gradient's are the weight's, however long its contraction), and they serve small problems,
    # whose contraction over channels x taps is a few hundred to a few thousand long
    MIN_RESULT_PIECE = 128

    MAX_PIECES = 256
    # GPU tiles sum their pieces in the GEMM's launch (one_launch); False: a second kernel sums them
    ONE_LAUNCH = True
    # The most loads of partials one work-item of a tile's last piece makes in its sum (pieces x its
    # register block), for the sum to stay in the GEMM's launch.  That sum runs on one work-group per
    # tile after the tile's GEMM, where the second kernel spreads it over the device: on an H100 over
    # 66 layer-passes (docs/perf/splitk_one_launch.py, h100-splitk-one-launch.json) one launch ran
    # 0.55-1.10x two launches' kernel time at 16-128 loads (a launch's gap saved), 1.0-1.6x at 256-4192.
    FINISH_MAX_LOADS = 128
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
    def tile_rank(m: int, n: int, tile: dict, pieces: bool = True) -> tuple:
        """The order of GPU tiles where pieces supply the parallelism, as Winograd's weight gradient
        ranks them (split-K's own are ranked by gpu_cost): least edge waste, the larger register
        block (more FMAs per local load), then, where the contraction is cut (``pieces``), the
        smaller work-group (small groups fill the device evenly).  CPU tiles last."""
        if is_cpu_config(tile):
            return (float("inf"), 0, 0)
        waste = edge_waste(m, n, tile["TM"], tile["TN"])
        return (round(waste, 9), -tile["WM"] * tile["WN"], work_items(tile) if pieces else 0)

    @staticmethod
    def piece_length(contraction: int, splits: int, tk: int) -> int:
        """The contraction of each piece: whole TK steps, the last piece what is left."""
        return rounded(-(-contraction // splits), tk)

    @classmethod
    def cuts(cls, contraction: int, tk: int, min_piece: int | None = None) -> tuple[int, ...]:
        """Piece counts from 2 whose pieces are whole TK steps of at least ``min_piece``
        (MIN_PIECE), and exactly that many of them cover the contraction (none left empty)."""
        return _cuts(contraction, tk, cls.MIN_PIECE if min_piece is None else min_piece, cls.MAX_PIECES)

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
        tiles = output_tiles(shape, tm, tn, g.groups)
        fit = limits.of(device)
        limit = settings.workspace_limit(device)
        gpu = fit.gpu and not is_cpu_config(tile)
        out: list[tuple[Any, Any, int]] = []
        for s in self.cuts(K, tk, self.min_piece(problem)):
            if s * elements * problem.itemsize > limit:
                continue
            if gpu:
                out.append(self._gpu_cut_rank(fit, tile, tiles, K, s))
            else:
                uneven = self.piece_length(K, s, tk) * s != K
                out.append((uneven, self.fill_miss(fit, tile, tiles, s), s))
        return [s for *_, s in sorted(out)]

    @classmethod
    def _gpu_cut_rank(cls, fit: limits.Limits, tile: dict, tiles: int, contraction: int, splits: int) -> tuple:
        """A GPU tile's order of piece counts (splits_for's): the fill miss, then cuts that leave
        the pieces even, then fewer pieces."""
        uneven = cls.piece_length(contraction, splits, tile_extent(tile)[2]) * splits != contraction
        return (cls.fill_miss(fit, tile, tiles, splits), uneven, splits)

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        shape = self.shape(problem)
        if reason is None and not shape.M * shape.N:
            # batch 0: ops returns the empty result (or a zero weight gradient) without planning
            reason = "the problem is empty (batch 0): there is no GEMM to cut"
        # configs holds only tiles with a cut (their first piece count): none means no tile has one
        if reason is None and not self.configs(problem, device):
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
        # On a GPU every tile that fits, ranked by split-K's time model instead (_gpu_configs).
        tiles = gemm_tiles(shape.M, shape.N, fit, problem.itemsize, limit=len(GPU_TILES), groups=1 << 20,
                           layout=problem.layout, vector_first=vector_first(problem, shape), large_blocks=False)
        if fit.gpu:
            return self._gpu_configs(problem, shape, tiles, device, fit)
        out = []
        for tile in tiles[:TILE_CANDIDATES]:
            splits = self.splits_for(problem, device, tile)
            if splits:
                out.append({**tile, "splits": splits[0]})
        return out

    def _gpu_configs(self, problem: Problem, shape: GemmShape, tiles: list[dict], device, fit: limits.Limits) -> list[dict]:
        """A GPU's configurations: every GPU tile with its piece count (splits_for's first), ranked
        by the time model of split-K's launches (gpu_cost), the first TILE_CANDIDATES of them."""
        scored: list[tuple[float, int, dict]] = []
        limit = settings.workspace_limit(device)
        for tile in tiles:
            if is_cpu_config(tile):
                continue
            splits = self._gpu_split(problem, shape, tile, fit, limit)
            if splits:
                config = {**tile, "splits": splits}
                scored.append((gpu_cost(problem, shape, config, fit.compute_units), len(scored), config))
        return [config for *_, config in sorted(scored)[:TILE_CANDIDATES]]

    def _gpu_split(self, problem: Problem, shape: GemmShape, tile: dict, fit: limits.Limits, limit: int) -> int:
        """splits_for's first on a GPU (0 where there is none), without ranking every cut: the fill
        miss, |log(pieces / aim)|, falls and then rises with the piece count, so the best cut is
        one of the two around the aim (a warm first call ranks every tile's cuts)."""
        tm, tn, tk = tile_extent(tile)
        tiles = output_tiles(shape, tm, tn, problem.geometry.groups)
        cuts = self.cuts(shape.K, tk, self.min_piece(problem))
        cuts = cuts[:bisect.bisect_right(cuts, limit // (result_elements(problem) * problem.itemsize))]
        aim = self.FILL_ITEMS * fit.compute_units / work_items(tile) / tiles
        at = bisect.bisect_left(cuts, aim)
        near = cuts[max(0, at - 1):at + 1]
        if not near:
            return 0
        return min(near, key=lambda s: self._gpu_cut_rank(fit, tile, tiles, shape.K, s))

    def one_launch(self, problem: Problem, config: Mapping[str, Any], device) -> bool:
        """Whether the pieces are summed by the GEMM's own launch (the last piece of each output
        tile to finish sums them: gemm.mako's FINISH) rather than by a second kernel: GPU tiles
        (ONE_LAUNCH) on a device whose work-groups may hand results to each other
        (limits.Limits.handoff_fence), where the sum is short (FINISH_MAX_LOADS).  The sum is the
        same, in the same order, so the result is bit for bit the two launches'."""
        if not (self.ONE_LAUNCH and not is_cpu_config(config) and limits.of(device).handoff_fence):
            return False
        return config["splits"] * config["WM"] * config["WN"] <= self.FINISH_MAX_LOADS

    def plan(self, problem, config, device, one_launch: bool | None = None):
        """split-K's plan; its pieces summed as ``one_launch`` says: None follows the rule
        (one_launch), False asks for a second kernel, True for the GEMM's own launch whatever the
        sum's length (GPU tiles on a device with a handoff fence).  The forced forms are the twins
        that docs/perf/splitk_one_launch.py and the tests compare bit for bit."""
        splits = config["splits"]
        tk = tile_extent(tile_config(config))[2]
        shape = self.shape(problem, ksplit=self.piece_length(self.shape(problem).K, splits, tk))
        if one_launch is None:
            one_launch = self.one_launch(problem, config, device)
        elif one_launch and (is_cpu_config(config) or not limits.of(device).handoff_fence):
            raise ValueError(f"split-K sums in one launch with GPU tiles on a device with a handoff fence only, "
                             f"not {dict(config)} on {device.name!r}")
        if one_launch:
            shape = replace(shape, c={**shape.c, "finish": splits, "fence": limits.of(device).handoff_fence})
        elements = result_elements(problem)
        index = problem.index_type(elements * splits)
        a, b, _, _ = IMPLICIT_ROLES[problem.pass_]
        calls, workspaces = gemm_calls(problem, shape, tile_config(config), index, a, b, "partial")
        if one_launch:
            total = []
        elif problem.pass_ == "backward_weight":
            total = [splitk_sum(problem, index, splits, elements)]
        else:
            total = [splitk_result(problem, index, splits)]
        return Plan(problem, self.name, config, (*calls, *total),
                    {"partial": splits * elements * problem.itemsize, **workspaces})
