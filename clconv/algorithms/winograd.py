"""Winograd F(2x2, 3x3), F(4x4, 3x3), F(6x6, 3x3), F(2x2, 5x5), F(3x3, 5x5), F(4x4, 5x5) and F(2x2, 7x7)
for square 3x3, 5x5 and 7x7 stride-1 convolutions (any dilation) and their weight gradients, not
fused (kernels/winograd.mako for the transforms, the GEMM core for the products).

Forward: each MxM output tile (M = 2, 4 or 6 for 3x3, 2, 3 or 4 for 5x5, 2 for 7x7: config ``m``) of
an RxR kernel is ``A^T [(G g G^T) . (B^T d B)] A`` for its ALPHA x ALPHA input patch ``d`` (ALPHA = M +
R - 1): per input and output channel pair, ALPHA^2 multiplies per tile where a direct convolution
does R^2 M^2: 16 for 36 (2.25x fewer) with F(2x2, 3x3), 36 for 144 (4x) with F(4x4, 3x3), 64 for 324
(5.1x) with F(6x6, 3x3), 36 for 100 (2.8x) with F(2x2, 5x5), 49 for 225 (4.6x) with F(3x3, 5x5), 64
for 400 (6.25x) with F(4x4, 5x5), 64 for 196 (3.1x) with F(2x2, 7x7).
The elementwise products summed over input channels are ALPHA^2 independent GEMMs per group, so
the plan is: transform the input (V) and the weight (U) in one launch, run the GEMMs (M = U V)
through the GEMM core (gemm.mako, its tiles and its CPU variant), transform M back into the output
through the epilogue (bias, alpha, residual, activation).  The data
gradient of a stride-1 layer is the same convolution of ``dy`` with the weight flipped and its
channel axes swapped, padded by ``dilation * (R - 1) - pad``.

Dilation D: the outputs whose rows (columns) share a remainder mod D form a sub-grid (a phase) that
reads only the input rows (columns) of the same remainder, D apart: an undilated convolution of the
input's sub-grid.  So a tile is M x M outputs of one phase, D apart, and its patch ALPHA x ALPHA
inputs D apart; the tiles of all D_h x D_w phases are the GEMMs' columns (or contraction) as one.

A 3D layer whose kernel is one deep (1x3x3, 1x5x5, 1x7x7: R(2+1)D's, SlowFast's and P3D's spatial
convolutions), with stride 1 and no padding in depth, is a 2D convolution of each depth slice: the
slices are images of their own (``DEPTH``; the transforms find a slice's first element from it).

Weight gradient: the same identity read backwards.  The forward tile is linear in ``g`` through
``(G g G^T)``, so the gradient of ``sum(dy . y)`` over one tile is
``G^T [(A dy A^T) . (B^T d B)] G``: the input transform is the forward one, the MxM output-gradient
tile is transformed by ``A`` (ALPHA x M), and the products, summed over every tile of every image,
are ALPHA^2 GEMMs per group with the tiles as their contraction (M[t] = Y[t] V[t]^T, C_out x C_in).
That contraction is long and the GEMMs small, so it is cut into ``splits`` pieces like split-K's;
the last kernel sums the pieces in a fixed order and applies ``G^T . G`` (deterministic).

The workspaces hold clc_real whatever the storage dtype: only the transforms read the call's
tensors and write its result, so they alone index the activations by their layout.

Error: the transforms add and scale values.  F(2x2, 3x3) (points 0, +-1; constants 1 and 1/2)
carries about 2-4x the fp32 rounding error of a direct sum of the same length; the two with
ALPHA = 6 (points 0, +-1, +-2; constants up to 8 and down to 1/24) 10-20x that: up to a tenth of
``reference.tolerance`` where F(2x2, 3x3) stays under a hundredth; F(3x3, 5x5) (ALPHA = 7, the point
1/2 added; constants down to 1/120) about as much as F(2x2, 5x5), and F(2x2, 7x7), F(4x4, 5x5) and
F(6x6, 3x3) (ALPHA = 8, the points +-1/2 added; constants down to 1/360, and up to 32 in F(6x6,
3x3)'s A^T) about as much again, F(6x6, 3x3)'s forward twice that (measured against the float64
reference in tests/algorithms/test_gemm_configs.py, whose bounds say so).  The workspaces hold the
transformed input and the products: ALPHA^2 / M^2 (4x, 2.25x, 1.8x, 9x, 5.4x, 4x, 16x) the input and
the output (the output gradient, for the weight gradient) in size; the algorithm declines when they
pass the workspace limit.
"""

from __future__ import annotations

from dataclasses import replace

from .. import limits, settings
from ..plan import CHANNELS_FIRST, LAYOUTS, Arg, Plan, Problem, rounded
from .base import Algorithm, call, epilogue_args, source
from .gemm import (
    GPU_TILES, TILE_CANDIDATES, GemmShape, gemm_calls, gemm_tiles, is_cpu_config, is_dot_config, thrashing_last,
    tile_config, tile_extent,
)
from .splitk import SplitK

# The transform matrices (B^T, G, A^T) of F(MxM, RxR) by (M, R), from the interpolation points 0, 1,
# -1 and infinity (ALPHA = 4), 0, +-1, +-2 and infinity (ALPHA = 6), those and 1/2 (ALPHA = 7) and
# those and -1/2 (ALPHA = 8):
# y = A^T [(G g) . (B^T d)] is the correlation of d with g, a length-R filter over M + R - 1 inputs
# (checked in tests/unit/test_winograd_matrices.py).  F(2, 5) and F(4, 3) share their points and so
# B^T; G's rows are the powers of each point up to R - 1 over the product of its differences from
# the other finite points, A^T's the powers up to M - 1, and B^T solves the identity (Toom-Cook).
_B6 = ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0), (0, -2, -1, 2, 1, 0),
       (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1))
# B^T of the points 0, +-1, +-2, +-1/2 and infinity (ALPHA = 8: F(2, 7), F(4, 5), F(6, 3)), its rows
# times 4 (the +-1/2 points' times 2) so that it is integers; G's rows are divided alike (exact)
_B8 = ((-4, 0, 21, 0, -21, 0, 4, 0), (0, 4, 4, -17, -17, 4, 4, 0), (0, -4, 4, 17, -17, -4, 4, 0),
       (0, 2, 1, -10, -5, 8, 4, 0), (0, -2, 1, 10, -5, -8, 4, 0), (0, 4, 8, -5, -10, 1, 2, 0),
       (0, -4, 8, 5, -10, -1, 2, 0), (0, -4, 0, 21, 0, -21, 0, 4))
TRANSFORMS = {
    (2, 3): (((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
             ((1, 0, 0), (1 / 2, 1 / 2, 1 / 2), (1 / 2, -1 / 2, 1 / 2), (0, 0, 1)),
             ((1, 1, 1, 0), (0, 1, -1, -1))),
    (4, 3): (_B6,
             ((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6), (1 / 24, 1 / 12, 1 / 6),
              (1 / 24, -1 / 12, 1 / 6), (0, 0, 1)),
             ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))),
    (2, 5): (_B6,
             ((1 / 4, 0, 0, 0, 0), (-1 / 6, -1 / 6, -1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6, 1 / 6, -1 / 6),
              (1 / 24, 1 / 12, 1 / 6, 1 / 3, 2 / 3), (1 / 24, -1 / 12, 1 / 6, -1 / 3, 2 / 3), (0, 0, 0, 0, 1)),
             ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 1))),
    # points 0, +-1, +-2, 1/2 and infinity; B^T's rows but the 1/2 point's doubled and G's halved,
    # A^T's 1/2 column times 4 and G's row a quarter (all exact), so that B^T and A^T are integers
    (3, 5): (((-4, 8, 5, -10, -1, 2, 0), (0, 4, -4, -9, 1, 2, 0), (0, -4, 12, -7, -3, 2, 0),
              (0, 2, -3, -4, 3, 2, 0), (0, -2, 5, 0, -5, 2, 0), (0, 4, 0, -5, 0, 1, 0), (0, -4, 8, 5, -10, -1, 2)),
             ((-1 / 4, 0, 0, 0, 0), (-1 / 6, -1 / 6, -1 / 6, -1 / 6, -1 / 6),
              (1 / 18, -1 / 18, 1 / 18, -1 / 18, 1 / 18), (1 / 72, 1 / 36, 1 / 18, 1 / 9, 2 / 9),
              (-1 / 120, 1 / 60, -1 / 30, 1 / 15, -2 / 15), (8 / 45, 4 / 45, 2 / 45, 1 / 45, 1 / 90), (0, 0, 0, 0, 1 / 2)),
             ((1, 1, 1, 1, 1, 4, 0), (0, 1, -1, 2, -2, 2, 0), (0, 1, 1, 4, 4, 1, 1))),
    # points 0, +-1, +-2, +-1/2 and infinity (_B8)
    (2, 7): (_B8,
             ((-1 / 4, 0, 0, 0, 0, 0, 0), (-1 / 18, -1 / 18, -1 / 18, -1 / 18, -1 / 18, -1 / 18, -1 / 18),
              (-1 / 18, 1 / 18, -1 / 18, 1 / 18, -1 / 18, 1 / 18, -1 / 18),
              (1 / 360, 1 / 180, 1 / 90, 1 / 45, 2 / 45, 4 / 45, 8 / 45),
              (1 / 360, -1 / 180, 1 / 90, -1 / 45, 2 / 45, -4 / 45, 8 / 45),
              (16 / 45, 8 / 45, 4 / 45, 2 / 45, 1 / 45, 1 / 90, 1 / 180),
              (16 / 45, -8 / 45, 4 / 45, -2 / 45, 1 / 45, -1 / 90, 1 / 180), (0, 0, 0, 0, 0, 0, 1 / 4)),
             ((1, 1, 1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 1 / 2, -1 / 2, 1))),
    # F(2x2, 7x7)'s points and so its B^T; A^T's +-1/2 columns times 8 and G's rows an eighth
    # (exact), so that A^T is integers
    (4, 5): (_B8,
             ((-1 / 4, 0, 0, 0, 0), (-1 / 18, -1 / 18, -1 / 18, -1 / 18, -1 / 18),
              (-1 / 18, 1 / 18, -1 / 18, 1 / 18, -1 / 18), (1 / 360, 1 / 180, 1 / 90, 1 / 45, 2 / 45),
              (1 / 360, -1 / 180, 1 / 90, -1 / 45, 2 / 45), (2 / 45, 1 / 45, 1 / 90, 1 / 180, 1 / 360),
              (2 / 45, -1 / 45, 1 / 90, -1 / 180, 1 / 360), (0, 0, 0, 0, 1 / 4)),
             ((1, 1, 1, 1, 1, 8, 8, 0), (0, 1, -1, 2, -2, 4, -4, 0), (0, 1, 1, 4, 4, 2, 2, 0),
              (0, 1, -1, 8, -8, 1, -1, 1))),
    # the same points; A^T's +-1/2 columns times 32 and G's rows a 32nd (exact), so that A^T is
    # integers
    (6, 3): (_B8,
             ((-1 / 4, 0, 0), (-1 / 18, -1 / 18, -1 / 18), (-1 / 18, 1 / 18, -1 / 18),
              (1 / 360, 1 / 180, 1 / 90), (1 / 360, -1 / 180, 1 / 90), (1 / 90, 1 / 180, 1 / 360),
              (1 / 90, -1 / 180, 1 / 360), (0, 0, 1 / 4)),
             ((1, 1, 1, 1, 1, 32, 32, 0), (0, 1, -1, 2, -2, 16, -16, 0), (0, 1, 1, 4, 4, 8, 8, 0),
              (0, 1, -1, 8, -8, 4, -4, 0), (0, 1, 1, 16, 16, 2, 2, 0), (0, 1, -1, 32, -32, 1, -1, 1))),
}
# The tile sides M of each kernel side R, the smaller first; ``sides`` puts the larger first where its
# GEMMs are not starved.  A 7x7 kernel has one: F(3x3, 7x7) needs a ninth point (3 or 1/4), and
# with it carried 26-28x F(2x2, 7x7)'s rounding error in a float32 model of the transforms
# (docs/perf/winograd_error_model.py: 4.8-5.2e-4 against 1.9e-5 per unit of a direct sum's
# scale), where the other variants carry 1.6-2.1e-5
SIDES = {3: (2, 4, 6), 5: (2, 3, 4), 7: (2,)}
# Sides that come first only in a GPU's weight gradient, by the fewest of their own tiles; elsewhere
# they come after the others, so that tuning measures them.  F(6x6, 3x3) (5.1x fewer multiplies
# than a direct sum against F(4x4, 3x3)'s 4x, with 0.8x its workspace bytes) ran the weight
# gradient in 0.72-1.06x F(4x4, 3x3)'s best time on an H100 (13 layers of 64-512 channels at 12x12
# to 224x224, geomean 0.89: its first configuration against F(4x4, 3x3)'s fastest;
# docs/perf/gpu38/fresh-f63.json): its 64 GEMMs contract over fewer tiles, and the weight gradient
# has no output transform to pay for its 8x8 patches.  In the forward and data gradient it ran
# 0.90-1.18x F(4x4, 3x3)'s time there (faster on 10 of 26, by 1-10%: output sides that 6 divides,
# 512 channels), on PoCL 1.06-1.86x in 5 of 6 layers (docs/perf/pocl-f63-tried.txt) and 0.82-1.13x
# in the weight gradient (docs/perf/pocl-f63-wgrad.txt).  It comes first from 128 of its own tiles
# (the GEMMs' contraction; the fewest measured: 512 channels at 12x12, batch 32, and at 48x48, batch
# 2, both 0.94x): with few tiles the weight gradient's GEMMs are bound by writing their products, 64
# matrices of C_out x C_in against 36.  And from 32 channels in and out (a group's): with fewer its
# GEMMs do not fill the smallest tile (32 x 32), and 64 of them cost more than 36 for the same work
# (CIFAR's ResNet-8 3x3 16 -> 16 at 32x32, batch 256: 1.31x F(4x4, 3x3)'s time, an H100 A/B of the
# eighteenth list, docs/perf/gpu38/eighteenth-ab.json; 48 and 50 channels ran 1.02x and 0.85x).
GPU_WEIGHT_ONLY_SIDES = {(6, 3): 128}
GPU_WEIGHT_ONLY_MIN_CHANNELS = 32


# The fewest tiles over the batch for the larger GEMMs: where F(4x4, 3x3) comes first (``sides``),
# and (2x2 tiles) where the GPU heuristic takes the weight and data gradients to Winograd at all
# (planner._winograd_pays).
MIN_TILES = 256
# The fewest 4x4 tiles for F(4x4, 3x3) first in the forward and data gradient on a CPU: at batch 1
# (4 and 16 tiles at 7x7 and 14x14) F(2x2, 3x3) ran in 0.7-1.0x its time.
F4_MIN_TILES = 32
# ...by variant: F(4x4, 5x5) before F(3x3, 5x5) from 64 4x4 tiles.  On PoCL (2 threads, AVX-512;
# the thirty-seventh session) it ran in 0.80-0.90x F(3x3, 5x5)'s time from 64 tiles (forward and
# data gradient, 48-256 channels; a tie on NiN's 96 -> 256 forward at batch 8), and 1.19-1.21x at 36
# (64 channels at 24x24, batch 1).
CPU_LARGE_FIRST_MIN_TILES = {(4, 3): F4_MIN_TILES, (3, 5): F4_MIN_TILES, (4, 5): 64}
# On a GPU, by kernel side: the fewest tiles of the larger side for it to come first in the forward
# and data gradient, and the fewest 2x2 tiles for F(4x4, 3x3) first in the weight gradient.  With
# the GEMM core's vector loads (H200 tuning runs of 2026-12-03, docs/perf/heuristic_check.py; each
# side's fastest tile), at 32-72 4x4 tiles F(2x2, 3x3) ran in 0.85-0.99x F(4x4)'s time on 9 of 13
# forward and data-gradient passes (512-1024 channels; F(4x4) won 2, 0.85x and 0.93x), at 128
# F(4x4) won 5 of 8 (0.80-0.90x; lost 2, 1.05x and 1.09x), from 196 every one (0.70-0.94x): the
# larger tile's 36 GEMMs over 2.25x the transformed weights pay only where their columns are many.
# A 5x5 kernel's larger tile adds fewer positions (49 against 36) for as large a saving (5.4
# multiplies per output against 9): F(3x3, 5x5) won down to 25 tiles (0.93x F(2x2, 5x5)'s time;
# 0.98x at 50; 1.01x at 9, 1.05x at 64 on 64 channels).  The weight gradient's F(4x4, 3x3) ran in
# 0.91-0.95x F(2x2)'s time from 98 2x2 tiles (ties at 64 and 196), 0.61-0.95x on 32 layers of 256
# and more.  F(4x4, 5x5) before F(3x3, 5x5), from F(4x4, 3x3)'s count (H100, the thirty-seventh
# session, docs/perf/gpu37/fresh-f45.json, each side's first tiles): 0.834x F(3x3, 5x5)'s time over
# 46 layer-passes of 20 layers, faster on 41; from 128 tiles (4x4 tiles in the forward and data
# gradient, 2x2 in the weight gradient) 0.59-1.02x on all 42 such passes (NiN's 96 -> 256 at 27x27,
# batch 128: 0.87x, 0.85x, and 0.69x its weight gradient; the slowest, GoogLeNet's 7x7 forward at
# batch 64 and its 16 -> 32 weight gradient, 1.02x), under it 0.97-1.99x (1.99x: a 64-channel
# 12x12 forward at batch 4, 36 tiles; 1.09x: a batch-1 256-channel 14x14, 16 tiles).
GPU_LARGE_FIRST_MIN_TILES = {(4, 3): 128, (3, 5): 1, (4, 5): 128}
GPU_F4_WEIGHT_MIN_TILES = 96
# The weight gradient's GEMMs unsplit on a GPU: with fewer work-groups of a 64 x 64 tile than this
# many per compute unit (over the positions and groups), the smaller work-group comes first among
# tiles that waste and block alike, as it does where pieces supply the parallelism.  On an H200
# (docs/perf/heuristic_check.py's runs, every tile timed, 94 unsplit passes) 64 x 64 ran in
# 0.67-0.97x 64 x 128's time (both 8x8 blocks) on most passes of 16-1296 such work-groups (3x3
# 256 -> 256 at 14x14, batch 4: 0.76x; NFNet's 6 groups of 128: 0.71x; a 7x7 256 at 14x14:
# 0.69x), and from 2048 64 x 128 won by 1-12% (DeepLab's ASPP, 512 and 1024 channels with 4x4 tiles)
WEIGHT_FEW_GROUPS_PER_UNIT = 12


# Tiles (filters) per work-item of the transforms on a CPU with vector lanes, as the lanes of vectors:
# a cache line of floats, so that each position's values are one vector store (kernels/winograd.mako
# says why; on PoCL the transforms ran 1.3-3.6x faster, the output transform 1.7-3x).  GPUs (and
# CPUs without lanes, such as llvmpipe) keep one tile per work-item.
CPU_VT = 16
# The weight gradient's sum of its pieces (one work-item per tile): filters and parts of a
# work-group (``plan``; fewer where the device grants fewer work-items)
SUM_FILTERS = 32
SUM_PARTS = 8
# On a CPU, the fewest work-items along a row of the transforms' launch: with fewer tiles than that
# the weight's runs would have rows of one or two work-items (a work-group each on PoCL).
CPU_MIN_ROW = 16
# On a CPU, the most work-items of a work-group of the transforms', the output transform's and the
# weight gradient's last launches (``cpu_work_group``).  Left to itself PoCL took work-groups of up
# to 3200 of them (25 x 128), and with F(4x4, 5x5)'s 64 vectors of 16 lanes per array its
# work-group function overran its thread's stack there (a segmentation fault in clc_wino_output,
# n8 c16 -> 256 at 27x27); so did F(6x6, 3x3)'s weight gradient's last kernel (clc_wino_weight_grad,
# n2 c512 -> 512 at 12x12: 16384 work-items of 8x8 vectors of 16 lanes).
CPU_GROUP_ITEMS = 512


def cpu_work_group(row_width: int, rows: int, fit: limits.Limits) -> tuple[int, int]:
    """The work-group of a CPU launch of ``row_width`` x ``rows`` work-items: a whole row (or the
    largest divisor of it within CPU_GROUP_ITEMS and the device's limits), then as many rows as keep
    it within them."""
    most = min(CPU_GROUP_ITEMS, fit.work_group)
    across = max(d for d in range(1, min(row_width, most, fit.work_item_sizes[0]) + 1) if row_width % d == 0)
    down = max(d for d in range(1, min(rows, most // across, fit.work_item_sizes[1]) + 1) if rows % d == 0)
    return across, down


def positions(m: int, r: int = 3) -> int:
    """The positions of a transformed tile of F(MxM, RxR): the GEMMs per group."""
    return (m + r - 1) ** 2


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def kernel_side(problem: Problem) -> int:
    """R of a square 2D kernel (the last axis's taps)."""
    return problem.geometry.kernel[2]


class Winograd(Algorithm):
    name = "winograd"
    passes = ("forward", "backward_data", "backward_weight")
    layouts = LAYOUTS  # the transforms read src and write dst with either layout's steps
    description = ("3x3, 5x5 and 7x7 stride-1 layers (any dilation) by Winograd F(6x6, 3x3), F(4x4, 3x3), "
                   "F(2x2, 3x3), F(4x4, 5x5), F(3x3, 5x5), F(2x2, 5x5) or F(2x2, 7x7): transforms around batched "
                   "GEMMs (5.1x, 4x, 2.25x, 6.25x, 4.6x, 2.8x or 3.1x fewer multiplies than a direct sum), the "
                   "weight gradient too")

    @staticmethod
    def _conv(problem: Problem, m: int = 2) -> dict:
        """The convolution whose MxM tiles this plan transforms, as the template's parameters: the
        forward pass's own (also the weight gradient's: x's patches and dy's tiles), or (data
        gradient) dy -> dx, whose padding is dilation * (R - 1) - pad on each side.  TH x TW tiles
        cover each of the DH x DW phases (sub-grids) of the output."""
        g = problem.geometry
        r, (dh, dw) = kernel_side(problem), g.dilation[1:]
        ih, iw, oh, ow = g.in_size[1], g.in_size[2], g.out_size[1], g.out_size[2]
        if problem.pass_ == "backward_data":
            conv = dict(CIN=g.cout_per_group, COUT=g.cin_per_group, IH=oh, IW=ow, OH=ih, OW=iw,
                        PT=dh * (r - 1) - g.pad_begin[1], PL=dw * (r - 1) - g.pad_begin[2], FLIP=True)
        else:
            conv = dict(CIN=g.cin_per_group, COUT=g.cout_per_group, IH=ih, IW=iw, OH=oh, OW=ow,
                        PT=g.pad_begin[1], PL=g.pad_begin[2], FLIP=False)
        # a phase has at most ceil(OH / DH) rows (the first phase the most)
        # a 3D layer of a kernel one deep: its depth slices are images of their own (decline_reason)
        depth = g.in_size[0]
        return dict(conv, N=g.batch * depth, DEPTH=depth, GROUPS=g.groups, M=m, R=r, DH=dh, DW=dw,
                    TH=_ceil(_ceil(conv["OH"], dh), m), TW=_ceil(_ceil(conv["OW"], dw), m))

    @staticmethod
    def _tiles(conv: dict) -> int:
        return conv["N"] * conv["DH"] * conv["DW"] * conv["TH"] * conv["TW"]

    def tiles(self, problem: Problem, m: int = 2) -> int:
        """The MxM output tiles of the convolution this plan transforms, over the whole batch (and
        every phase of a dilated one)."""
        return self._tiles(self._conv(problem, m))

    def gemm_work(self, problem: Problem, m: int) -> int:
        """The GEMMs' work with MxM tiles, per channel pair: tiles x transformed positions.  The
        larger tile needs less wherever its tiles are mostly full (undilated: at every output size
        from 3 on), more where a dilated layer's phases have only a row or two each."""
        return self.tiles(problem, m) * positions(m, kernel_side(problem))

    def saving(self, problem: Problem, device) -> float:
        """The direct sum's multiplies per channel pair (the forward's outputs times the kernel's taps,
        the same work for each pass) over the GEMMs' (ALPHA^2 per tile) with the side that needs the
        fewest: 2.25-4.6x where the tiles cover the outputs whole, less where they are cut off at the
        edges, under 1 where the tiles are mostly empty.  FCN's fc6, a 7x7 kernel over a 7x7 input,
        has one output per 2x2 tile in the forward (0.77), and its data gradient runs the 7x7 kernel
        over a 1x1 dy padded by 6: 16 tiles of 64 products an image for 49 taps of work (0.05).
        A side of GPU_WEIGHT_ONLY_SIDES counts only where it is fed on ``device`` (it comes last
        elsewhere, for tuning to measure)."""
        g = problem.geometry
        r = kernel_side(problem)
        sides = [m for m in SIDES[r] if (m, r) not in GPU_WEIGHT_ONLY_SIDES or self.fed(problem, device, m)]
        return g.batch_out_pixels * g.kernel_volume / min(self.gemm_work(problem, m) for m in sides)

    def _shape(self, problem: Problem, conv: dict, ksplit: int = 0) -> GemmShape:
        """The GEMMs, G * ALPHA^2 of them: forward and data gradient M[t] = U[t] V[t] (C_out x tiles,
        over C_in); weight gradient M[t] = Y[t] V[t]^T (C_out x C_in, over the tiles)."""
        cin, cout, tiles = conv["CIN"], conv["COUT"], self._tiles(conv)
        gemms = conv["GROUPS"] * positions(conv["M"], conv["R"])
        if problem.pass_ == "backward_weight":
            return GemmShape(M=cout, N=cin, K=tiles, a_view="a_matrix", b_view="b_columns_t", c_view="c_matrix",
                             a_kfast=True, b_nfast=False, a={"M": cout, "K": tiles}, b={"K": tiles, "N": cin},
                             c={"M": cout, "N": cin, "accumulate": False, "stored": False}, ksplit=ksplit,
                             gemms=gemms)
        return GemmShape(M=cout, N=tiles, K=cin, a_view="a_matrix", b_view="b_columns", c_view="c_matrix",
                         a_kfast=True, b_nfast=True, a={"M": cout, "K": cin}, b={"K": cin, "N": tiles},
                         c={"M": cout, "N": tiles, "accumulate": False, "stored": False}, gemms=gemms)

    def _workspaces(self, problem: Problem, conv: dict, splits: int = 1, packed_rows: int = 0) -> dict[str, int]:
        """Bytes of each workspace; ``packed_rows``: U's rows of C_out, rounded up to the CPU GEMM's
        blocks, where the weight transform writes U packed (:meth:`packed_rows`)."""
        tiles = self._tiles(conv)
        per_position = conv["GROUPS"] * positions(conv["M"], conv["R"]) * problem.itemsize
        v = per_position * conv["CIN"] * tiles
        if problem.pass_ == "backward_weight":  # Y: dy's tiles transformed; M: a piece's products
            return {"v": v, "ydy": per_position * conv["COUT"] * tiles,
                    "m": splits * per_position * conv["COUT"] * conv["CIN"]}
        u_rows = packed_rows or conv["COUT"]
        return {"u": per_position * u_rows * conv["CIN"], "v": v, "m": per_position * conv["COUT"] * tiles}

    @staticmethod
    def transform_lanes(problem: Problem, fit: limits.Limits) -> int:
        """Tiles (filters) per work-item of the transforms: CPU_VT where the CPU has vector lanes (its
        transforms and GEMM are written in explicit vectors; llvmpipe has none), else 1."""
        return CPU_VT if not fit.gpu and fit.lanes(problem.itemsize) >= 4 else 1

    @staticmethod
    def packed_rows(problem: Problem, conv: dict, tile: dict, vt: int) -> int:
        """U's rows (C_out rounded up to whole blocks of WM) where the weight transform writes U in
        the CPU GEMM's packed layout (gemm_cpu.mako's Ap[gemm][block][k][WM]), else 0.  It does so
        for the forward and data gradient on a CPU whose transforms run in vectors (``vt`` > 1)
        with a CPU GEMM tile: the GEMMs then read U as their packed copy, and the copy the GEMM
        would make (clc_pack_a, a launch reading and writing all of U) is not made.  On PoCL
        (2-core EPYC, AVX-512) that copy took 0.15 ms of 0.87 on a 3x3 128-channel layer at 14x14,
        batch 4; U written packed costs the transform the same stores."""
        if problem.pass_ == "backward_weight" or vt < 2 or not is_cpu_config(tile) or is_dot_config(tile):
            return 0
        return rounded(conv["COUT"], tile["WM"])

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        g = problem.geometry
        if reason is None and (g.ndim == 1 or g.kernel not in ((1, 3, 3), (1, 5, 5), (1, 7, 7)) or g.stride != (1, 1, 1)
                               or g.pad_begin[0] or g.pad_end[0]):
            reason = ("it serves only 3x3, 5x5 and 7x7 kernels with stride 1 (2D, or 3D one deep with no padding in "
                      "depth)")
        if reason is None and problem.pass_ == "backward_data":
            reach = [d * (kernel_side(problem) - 1) for d in g.dilation[1:]]  # the data gradient pads by reach - pad
            if any(max(g.pad_begin[a], g.pad_end[a]) > reach[a - 1] for a in (1, 2)):
                reason = (f"its data gradient pads by dilation * (kernel - 1) - pad, so it serves paddings of at "
                          f"most {reach[0]} x {reach[1]} here")
        if reason is None:
            needed = min(sum(self._workspaces(problem, self._conv(problem, m)).values())
                         for m in SIDES[kernel_side(problem)])
            if needed > settings.workspace_limit(device):
                reason = (f"its transformed input and products need {needed} bytes, more than the workspace limit "
                          f"({settings.workspace_limit(device)} bytes, CLCONV_WORKSPACE_LIMIT)")
        if reason is None and not self.configs(problem, device):
            reason = "no GEMM tile fits the device's work-group and local memory limits"
        return reason

    def sides(self, problem: Problem, device) -> tuple[int, ...]:
        """The tile sides M in the order their configs come.  A larger tile (F(4x4, 3x3): 4x fewer
        multiplies than a direct sum and 2.25x fewer workspace bytes than F(2x2, 3x3); F(3x3, 5x5):
        5.4 multiplies per output against F(2x2, 5x5)'s 9, 0.6x its bytes; F(4x4, 5x5): 4, 0.8x
        F(3x3, 5x5)'s bytes; F(6x6, 3x3): 1.8, 0.8x F(4x4, 3x3)'s bytes) comes before a smaller one
        where it does less GEMM work and its GEMMs are not starved (:meth:`fed`); the sides so fed
        come by their GEMM work (the larger side first at equal work), then the starved ones, the
        smaller first.  A dilated layer's phases of a
        row or two each make the larger tile's work the larger (DeepLab's 3x3 at dilation 18 on
        33x33: F(4x4, 3x3) ran 2.25x F(2x2, 3x3)'s GEMM work in 1.98-2.12x its time on an H200,
        all three passes; docs/perf/h200-tune-closing.json).  F(2x2, ...)'s constants are halves,
        so small-integer data also give exact results there."""
        r = kernel_side(problem)
        fed = [m for m in SIDES[r] if self.fed(problem, device, m)]
        fed.sort(key=lambda m: (self.gemm_work(problem, m), -m))
        return (*fed, *(m for m in SIDES[r] if m not in fed))

    def fed(self, problem: Problem, device, m: int) -> bool:
        """Whether side ``m``'s GEMMs are large enough to come before a smaller side's: the
        smallest side always; a larger one in the forward and data gradient from a count of its
        own tiles (their GEMMs' columns: CPU_LARGE_FIRST_MIN_TILES on a CPU, GPU_LARGE_FIRST_MIN_TILES
        on a GPU, by variant), in the weight gradient from a count of 2x2 tiles (its contraction: MIN_TILES,
        GPU_F4_WEIGHT_MIN_TILES).  With fewer, the smaller tiles' 1.8-4x more tiles fill the device
        better (measured on an H200 and PoCL, docs/performance.md).  GPU_WEIGHT_ONLY_SIDES are fed
        in a GPU's weight gradient only, from a count of their own tiles and of channels."""
        r = kernel_side(problem)
        if m == SIDES[r][0]:
            return True
        gpu = limits.of(device).gpu
        if (m, r) in GPU_WEIGHT_ONLY_SIDES:
            g = problem.geometry
            return (gpu and problem.pass_ == "backward_weight" and self.tiles(problem, m) >= GPU_WEIGHT_ONLY_SIDES[m, r]
                    and min(g.cin_per_group, g.cout_per_group) >= GPU_WEIGHT_ONLY_MIN_CHANNELS)
        if problem.pass_ == "backward_weight":
            return self.tiles(problem, 2) >= (GPU_F4_WEIGHT_MIN_TILES if gpu else MIN_TILES)
        return self.tiles(problem, m) >= (GPU_LARGE_FIRST_MIN_TILES if gpu else CPU_LARGE_FIRST_MIN_TILES)[m, r]

    def configs(self, problem, device):
        per_side = [self._side_configs(problem, device, m) for m in self.sides(problem, device)]
        # interleaved, so that tuning's first few candidates measure both sides
        out = []
        for rank in range(max(len(c) for c in per_side)):
            out += [c[rank] for c in per_side if rank < len(c)]
        return out

    def _side_configs(self, problem: Problem, device, m: int) -> list[dict]:
        conv = self._conv(problem, m)
        if sum(self._workspaces(problem, conv).values()) > settings.workspace_limit(device):
            return []
        shape = self._shape(problem, conv)
        fit = limits.of(device)
        if problem.pass_ != "backward_weight":
            # the GEMMs read workspaces, laid out as channels-first matrices whatever the layout
            tiles = gemm_tiles(shape.M, shape.N, fit, problem.itemsize, groups=shape.gemms, layout=CHANNELS_FIRST,
                               plain=True)
            # where the weight transform writes U packed, no CPU tile reads it in place
            packed = self.transform_lanes(problem, fit) > 1
            ordered = thrashing_last(tiles, problem, replace(shape, a_packed=True) if packed else shape, fit)
            return [{"m": m, **tile} for tile in ordered]
        # the weight gradient's pieces supply the parallelism (as split-K's): tiles by edge waste,
        # then the piece count that brings the work-groups nearest to filling the device
        out = []
        # (on a CPU the GEMM without local memory first: it ran in 0.25-0.8x a local-memory tile's time
        # there.)  On a GPU every tile, ranked below, and the first TILE_CANDIDATES of them
        for tile in gemm_tiles(shape.M, shape.N, fit, problem.itemsize, groups=1 << 20, layout=CHANNELS_FIRST,
                               vector_first=not fit.gpu, plain=True, limit=len(GPU_TILES) if fit.gpu else TILE_CANDIDATES):
            splits = self._splits(problem, conv, shape, tile, device)
            if splits:
                out.append({"m": m, **tile, "splits": splits})
        if fit.gpu:
            # Split-K's rank: the least waste, the larger register block, and where the pieces fill the
            # device the smaller work-group among tiles that waste the same and block alike: the
            # 128 x 128 GEMMs of a 5x5 128-channel layer ran in 0.75x the time on 64 x 64 tiles (5
            # pieces) as on 64 x 128 (an H200, docs/performance.md).  Unsplit, the same where the
            # work-groups are few (WEIGHT_FEW_GROUPS_PER_UNIT); with many the order stays (64 x 128).
            few_groups = -(-shape.M // 64) * -(-shape.N // 64) * shape.gemms < WEIGHT_FEW_GROUPS_PER_UNIT * fit.compute_units
            out.sort(key=lambda config: SplitK.tile_rank(shape.M, shape.N, config,
                                                         pieces=config["splits"] > 1 or few_groups))
        return out[:TILE_CANDIDATES]

    def _splits(self, problem: Problem, conv: dict, shape: GemmShape, tile: dict, device) -> int:
        """The weight gradient's piece count for ``tile``: one, or one of split-K's cuts, whichever
        brings the launch nearest split-K's fill of the device, within the workspace limit (0 if
        not even one piece fits).  On a GPU the fill is counted in work-items, as split-K's
        (``SplitK.splits_for``): counted in work-groups, a 64-work-item tile was cut into 15 pieces
        where 24-36 ran 1.12-1.15x faster (Inception's 5x5 48 -> 64 on an H200), and a 32 x 32 one
        into 2 where the best of those timed was 4 (docs/performance.md)."""
        tm, tn, tk = tile_extent(tile)
        work_groups = -(-shape.M // tm) * -(-shape.N // tn) * shape.gemms
        fit = limits.of(device)
        limit = settings.workspace_limit(device)
        fitting = [s for s in (1, *SplitK.cuts(shape.K, tk))
                   if sum(self._workspaces(problem, conv, s).values()) <= limit]
        return min(fitting, key=lambda s: SplitK.fill_miss(fit, tile, work_groups, s), default=0)

    def plan(self, problem, config, device):
        g = problem.geometry
        m = config.get("m", 2)
        conv = self._conv(problem, m)
        tile = tile_config(config)
        requested = config.get("splits", 1)
        ksplit = SplitK.piece_length(self._tiles(conv), requested, tile_extent(tile)[2]) if requested > 1 else 0
        fit = limits.of(device)
        vt = self.transform_lanes(problem, fit)
        packed_rows = self.packed_rows(problem, conv, tile, vt)
        shape = replace(self._shape(problem, conv, ksplit), a_packed=bool(packed_rows))
        splits = shape.splits  # the pieces the GEMM writes (fewer than asked where the cut leaves one empty)
        spaces = self._workspaces(problem, conv, splits, packed_rows)
        index = problem.index_type(max(spaces.values()) // problem.itemsize)
        tiles = self._tiles(conv)
        weight_grad = problem.pass_ == "backward_weight"
        # rows of the transforms' launch: the input's channels, then dy's (weight gradient) or the
        # weight's filters, row_width to a row; on a CPU vt tiles (filters, in runs within a group) to
        # a work-item
        filters = g.groups * conv["COUT"] * conv["CIN"]
        if vt == 1:
            row_width = rounded(tiles, 64)
        else:
            row_width = max(-(-tiles // vt), CPU_MIN_ROW)
            if row_width > CPU_GROUP_ITEMS:  # whole work-groups along a row (cpu_work_group)
                row_width = rounded(row_width, CPU_MIN_ROW)
            # runs: of VT output channels of one input channel over U's packed rows, else of VT filters
            runs = conv["CIN"] * -(-packed_rows // vt) if packed_rows else -(-(conv["COUT"] * conv["CIN"]) // vt)
            filters = g.groups * runs
        other_rows = g.groups * conv["COUT"] if weight_grad else -(-filters // row_width)
        bt, gm, at = TRANSFORMS[m, conv["R"]]
        # The weight gradient's last kernel where the transforms take one tile per work-item (GPUs,
        # CPUs without lanes): work-groups of SUM_FILTERS filters x SUM_PARTS parts, each part
        # summing every SUM_PARTS-th position over the pieces.  One work-item per filter summed all
        # ALPHA^2 x pieces alone: a 48 x 64 layer has 3072 filters, under a warp per SM of an H200,
        # and its 15 pieces took 23-33 us to sum there.
        # a GPU's output transform stores each row of a tile's M outputs as one aligned vector
        # (as the GEMM core's vector_stores, and with its GV: the scalar twin for a result off
        # alignment): rows of contiguous pixels (channels-first, no dilation, M of 2 or 4 dividing
        # the output's width), a result stored as clc_real
        row_vector = m if (vt == 1 and tile.get("GV") and m in (2, 4) and conv["DW"] == 1
                           and conv["OW"] % m == 0 and problem.layout == CHANNELS_FIRST
                           and problem.stored_as_real and not weight_grad) else 0
        sum_filters = min(SUM_FILTERS, fit.work_group)
        sum_parts = max(1, min(SUM_PARTS, positions(m, conv["R"]), fit.work_group // sum_filters))
        # the transforms are one program (a first call builds it and the GEMM's: two builds); the
        # GEMM reads and writes workspaces only, so every epilogue of the geometry shares it
        src = source("winograd.mako", problem, index, SPLITS=splits, WEIGHT_GRAD=weight_grad, ROW_WIDTH=row_width,
                     BT=bt, G=gm, AT=at, VT=vt, SUM_FILTERS=sum_filters, SUM_PARTS=sum_parts, RV=row_vector,
                     PACK_WM=tile["WM"] if packed_rows else 0, **conv)
        source_role, other_role, other_space = ("x", "dy", "ydy") if weight_grad else (problem.spec.inputs[0], "w", "u")
        # on a CPU whose transforms run in vectors, work-groups of at most CPU_GROUP_ITEMS (cpu_work_group)
        transforms_rows = g.groups * conv["CIN"] + other_rows
        transforms = call(src, "clc_wino_transforms", (row_width, transforms_rows),
                          cpu_work_group(row_width, transforms_rows, fit) if vt > 1 else None,
                          Arg(source_role), Arg(other_role), Arg("v", with_offset=False),
                          Arg(other_space, with_offset=False))
        if weight_grad:
            gemm, gemm_spaces = gemm_calls(problem, shape, tile, index, "ydy", "v", "m")
            if vt == 1:
                finish = call(src, "clc_wino_weight_grad",
                              (rounded(conv["COUT"] * conv["CIN"], sum_filters), sum_parts * g.groups),
                              (sum_filters, sum_parts), Arg("m", with_offset=False), Arg("dw"))
            else:
                sums = -(-(conv["COUT"] * conv["CIN"]) // vt)
                finish = call(src, "clc_wino_weight_grad", (sums, g.groups), cpu_work_group(sums, g.groups, fit),
                              Arg("m", with_offset=False), Arg("dw"))
        else:
            result_role = problem.spec.result  # x -> y, or dy -> dx
            gemm, gemm_spaces = gemm_calls(problem, shape, tile, index, "u", "v", "m")
            output_rows = g.groups * conv["COUT"]
            finish = call(src, "clc_wino_output", (row_width, output_rows),
                          cpu_work_group(row_width, output_rows, fit) if vt > 1 else None,
                          Arg("m", with_offset=False), *epilogue_args(problem, result_role),
                          Arg(result_role, align=row_vector or 1))
        return Plan(problem, self.name, config, (transforms, *gemm, finish), {**spaces, **gemm_spaces})
