"""The GEMM core of the GEMM-based algorithms: tiles, the GEMM of each pass over operand views
(kernels/gemm.mako; kernels/gemm_cpu.mako on CPUs), and the calls that run one GEMM.

=============== ============================ ============================ ===========================
algorithm       forward                      backward_data                backward_weight
=============== ============================ ============================ ===========================
implicit_gemm   W x unfold(x), no buffer     W^T x gather(dy), no buffer  dy x unfold(x)^T, no buffer
im2col          im2col buffer, then GEMM     GEMM into columns, col2im    im2col buffer, GEMM^T
gemm1x1         1x1 only: W x x              1x1 only: W^T x dy           1x1 only: dy x x^T
splitk          --                           --                           implicit, contraction cut
                                                                          into pieces + a reduction
=============== ============================ ============================ ===========================
"""

from __future__ import annotations

import math
import mmap
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from .. import limits
from ..limits import pow2_at_most
from ..geometry import ConvGeometry
from ..plan import CHANNELS_FIRST, Arg, KernelCall, KernelSource, Problem, rounded
from .base import call, epilogue_args, source


# -- tile configurations ---------------------------------------------------------------------------

# (TM, TN, TK, WM, WN, VW, PIPE, GV): work-group tile M x N, contraction step TK, per-work-item block
# WM x WN made of VW x VW sub-blocks read from local memory as VW-wide vectors, PIPE: software-
# pipelined global loads (see templates/gemm.mako), GV: global loads as aligned 4-element vectors
# where the operands allow (global_vectors; on an H200 faster on 70 of 72 tile-layer pairs, median
# 0.87x the time of scalar loads, the 1x1 1024->1024 layer at 45.9-47.7 TFLOP/s against cuBLAS's
# 49.1: docs/performance.md).  The CPU tiles keep scalar loads (not measured there).
TILE_KEYS = ("TM", "TN", "TK", "WM", "WN", "VW", "PIPE", "GV")
TILE_DEFAULTS = {"VW": 1, "PIPE": 1, "GV": 0}  # what a config stored before these keys existed means
GPU_TILES = [  # in order of preference where they waste the same (measured on an H200: docs/performance.md)
    (128, 64, 16, 8, 4, 4, 1, 3),   # 256 work-items: the most frequent winner
    (64, 128, 16, 8, 8, 4, 1, 3),   # 128 work-items, 8x8 blocks: 56x56 layers
    (128, 32, 16, 8, 4, 4, 1, 3),   # 128 work-items: 14x14 and 7x7 layers
    (64, 64, 16, 8, 8, 4, 1, 3),    # 64 work-items, 8x8 blocks: narrow weight gradients, im2col
    (128, 128, 16, 8, 8, 4, 1, 3),
    (128, 64, 16, 8, 8, 4, 1, 3),
    (64, 128, 16, 4, 8, 4, 1, 3),
    (64, 64, 16, 4, 4, 4, 1, 3),
    (32, 64, 16, 2, 4, 2, 1, 3),
    (32, 32, 16, 4, 4, 4, 1, 3),
]
CPU_TILES = [  # local-memory tiles for CPUs: vector local loads, no pipelining (3x the old scalar ones on PoCL)
    (64, 64, 16, 8, 8, 4, 0, 0),
    (32, 64, 16, 4, 8, 4, 0, 0),
    (64, 128, 16, 8, 8, 4, 0, 0),
    (32, 32, 16, 4, 4, 4, 0, 0),
]


# CPU tiles without local memory (templates/gemm_cpu.mako): (WM, VN, LX): each work-item computes
# WM rows x VN consecutive columns of C as WM vectors of VN lanes; at most LX work-items per
# work-group, along M.
CPU_KEYS = ("LOCAL", "WM", "VN", "LX", "NB", "KC")
CPU_VECTOR_TILES = [  # in order of preference where they cost the same (cpu_tile_cost)
    (16, 16, 8),  # AVX-512: 16 accumulators of 16 lanes: 81 GFLOP/s on a 1x1 1024->256 forward, one core
    (8, 16, 8),   # half the rows: more work-items for small M
    (16, 8, 8),   # 8 lanes: less waste on narrow images
    (6, 16, 8),   # AVX2 (16 registers of 8 lanes): 12 accumulators, two B vectors and a broadcast
    (12, 8, 8),
    (4, 16, 8),
    (8, 8, 8),
]

# Independent accumulators that keep a core's FMA pipes busy (two pipes of 4-5 cycles' latency, and
# the loads): below this a tile's FMAs wait on each other.  On PoCL with AVX2 (a 2-core EPYC) the
# tiles of 12 accumulators ran 1.1-1.4x faster than those of 8 (docs/performance.md).
BUSY_ACCUMULATORS = 12


def vector_registers(fit: limits.Limits) -> int:
    """The vector registers of a CPU, from its native float lanes: 32 with 16 lanes (AVX-512), else
    16 (AVX2 and SSE; NEON's 32 counted as 16, which only keeps its tiles small)."""
    return 32 if fit.float_lanes >= 16 else 16


def cpu_tile_registers(tile: tuple, lanes: int) -> int:
    """Vector registers the CPU GEMM's inner loop holds for ``tile`` (WM, VN, LX): WM accumulators of
    VN lanes, a row of B and the broadcast of A."""
    wm, vn = tile[:2]
    per_row = -(-vn // lanes)
    return wm * per_row + per_row + 1


def cpu_tile_cost(m: int, tile: tuple, lanes: int) -> float:
    """Time per useful output of ``tile`` on M rows, relative: its row waste over the vector FMAs
    per step that run in parallel (up to BUSY_ACCUMULATORS)."""
    wm, vn = tile[:2]
    return rounded(m, wm) / m / min(wm * vn / lanes, BUSY_ACCUMULATORS)


def cpu_vector_tiles(m: int, fit: limits.Limits, itemsize: int) -> list[tuple[int, int, int]]:
    """The CPU GEMM's tiles for M rows, best first: those whose inner loop fits the vector registers
    (a tile that does not spills its accumulators: WM = 16, VN = 16 on AVX2 ran 1.5-2x slower than
    WM = 6), by :func:`cpu_tile_cost`.  Where none fits (doubles on AVX2) all of them, so ordered."""
    lanes = fit.lanes(itemsize)
    tiles = [t for t in CPU_VECTOR_TILES if fit.fits((t[2],))]
    fitting = [t for t in tiles if cpu_tile_registers(t, lanes) <= vector_registers(fit)]
    return sorted(fitting or tiles, key=lambda t: cpu_tile_cost(m, t, lanes))


# CPU tiles of the weight gradient as dot products (templates/gemm_cpu_dot.mako): (WM, WN, LX):
# each work-item computes WM x WN elements of dw as vectors of the native lanes along the pixels;
# at most LX work-items per work-group, along M.  Measured on PoCL (a 2-core AMD EPYC with AVX-512,
# 1x1 256->64 at 28x28, batch 4, GEMM alone): 4 x 6 189-192 GFLOP/s, 6 x 4 187, 4 x 4 174, 2 x 8 156.
CPU_DOT_TILES = [
    (4, 6, 8),   # 24 accumulators, 4 rows of A and a row of B: 29 of AVX-512's 32 registers
    (6, 4, 8),
    (4, 4, 8),
    (3, 4, 8),   # AVX2: 12 accumulators + 3 + 1 of 16 registers
    (2, 4, 8),
]
DOT_KEYS = ("LOCAL", "DOT", "WM", "WN", "LX")


def dot_config(wm: int, wn: int, lx: int) -> dict:
    return {"LOCAL": 0, "DOT": 1, "WM": wm, "WN": wn, "LX": lx}


def is_dot_config(tile: Mapping[str, Any]) -> bool:
    return bool(tile.get("DOT", 0))


def cpu_dot_configs(m: int, n: int, fit: limits.Limits) -> list[dict]:
    """The dot-product weight gradient's tiles for an M x N dw (per group), best first: those whose
    inner loop fits the vector registers (WM * WN accumulators, WM rows of A, a row of B), by the
    work per useful output: the edge waste times one FMA plus the loads each FMA shares,
    (WM + WN) / (WM * WN) (both operands stream from the caches)."""
    tiles = [t for t in CPU_DOT_TILES if fit.fits((t[2],))]
    fitting = [t for t in tiles if t[0] * t[1] + t[0] + 1 <= vector_registers(fit)] or tiles

    def cost(tile) -> float:
        wm, wn = tile[:2]
        return edge_waste(m, n, wm, wn) * (1 + (wm + wn) / (wm * wn))

    return [dot_config(*t) for t in sorted(fitting, key=cost)]


def dot_work_groups(m: int, n: int, tile: Mapping[str, Any], groups: int) -> int:
    """Work-groups of one launch of the dot-product weight gradient (before any cut of its contraction)."""
    blocks = -(-m // tile["WM"])
    return -(-blocks // min(tile["LX"], blocks)) * -(-n // tile["WN"]) * groups


# Where the dot products come first: each work-item's contraction (one launch's pixels) at least
# DOT_MIN_STEPS vector steps long, and images of at least DOT_MIN_IMAGE_STEPS vectors of pixels.
# A work-item's fixed costs (adding up WM x WN accumulators' lanes and storing them: ~12 steps'
# worth) and each image's (its row pointers and its last, partly masked vector: ~2 more) are paid
# back over the contraction.  Measured on PoCL (2-core AMD EPYC, AVX-512: 16 float lanes, so 2048
# and 256 pixels), each against the transposed-B GEMM: 0.49-0.73x its time on 1x1 stride-1 layers
# of 28x28 and 56x56 at batch 2-4 (K 3136-6272), a 1D 2048-wide layer, Inception's 149x149 3x3
# (0.57-0.60), a 3D 8x28x28 layer and the ResNet stem (0.76-0.92), 56x56x64 3x3 at batch 1 (0.93-0.95);
# 1.1-4.7x where launches were shorter (3x3 28x28x64 in one-image chunks of 784 pixels, 14x14 and
# 7x7 layers, 1x1 layers at 28x28 batch 1 and below, the DCGAN layer).  docs/performance.md.
DOT_MIN_STEPS = 128
DOT_MIN_IMAGE_STEPS = 16
# ...and, for a 2D layer, at most DOT_MAX_ROWS output channels a group (the GEMM's M).  Measured
# again on PoCL (2-core AMD EPYC, AVX-512, 2 threads, 2026-12-06, after the column rows were spread
# over the L1's sets and the column chunks grew; docs/perf/pocl-2t-zen4-dot-vs-columns.txt, 51
# layers): at 16-32 output channels the dot products ran in 0.44-0.91x the column buffer's GEMM
# time on every layer but one (a 3-channel stride-2 first layer, 1.28x); at 48-64 on 2D layers they
# lost on 3x3 layers of 32-64 input channels (1.07-1.12x: ResNet's 3x3 64 at 28x28 and 56x56), the
# 7x7 stem (1.09-1.12x), a 3-channel 224x224 first layer (1.50x) and 1x1 layers read in place
# (1.06-1.33x), and won with 16 input channels (0.91x) and at batch 1 at 56x56 (0.95x).  1D and 3D
# layers kept winning at 64 (0.64-0.84x: the column GEMM ran 1D layers at 53-90 GFLOP/s against
# about 120 on 2D ones, not measured further), so the bound is a 2D layer's, and it is AVX-512's
# (16 float lanes, DOT_ROW_BOUND_LANES).  With 8 lanes (a 2-core AMD EPYC with AVX2 and 512 KiB
# L2, 2026-12-07, the same layers; docs/perf/pocl-2t-zen3-dot-rows.txt) the column buffer's GEMM
# ran 1.1-2.0x the dot products' time at up to 64 output channels (ResNet's 3x3 64 layers
# 0.55-0.61x with the dot products, the 7x7 stem 0.66x, 3-channel first layers 0.54-0.61x); the dot
# products lost at 96 (1.13x) and on the DCGAN layer's 256 (1.35x): there the bound is twice as
# many rows.  1x1 stride-1 layers, whose dot products read the input in place (gemm1x1: no column
# buffer), ran in 0.61-0.74x the column GEMM's time at 128 and 256 output channels: no bound there
# under 16 lanes.
DOT_MAX_ROWS = 32
DOT_ROW_BOUND_LANES = 16


def dot_max_rows(problem: Problem, lanes: int) -> float:
    """The most output channels a group for which a weight gradient's dot products come first
    (DOT_MAX_ROWS, by the CPU's vector lanes); unbounded for 1D and 3D layers."""
    g = problem.geometry
    if g.ndim != 2:
        return math.inf
    if lanes >= DOT_ROW_BOUND_LANES:
        return DOT_MAX_ROWS
    reads_input_in_place = g.is_pointwise and all(s == 1 for s in g.stride)
    return math.inf if reads_input_in_place else 2 * DOT_MAX_ROWS


def with_dot_configs(problem: Problem, fit: limits.Limits, configs: list[dict], shape: "GemmShape") -> list[dict]:
    """``configs`` of a weight gradient with the dot-product tiles added where they run (a CPU with
    vector lanes, channels-first activations): first where one launch's contraction (``shape``'s K)
    is long enough to pay for a work-item's fixed costs (DOT_MIN_STEPS) and, for a 2D layer, its
    rows (output channels) are few enough (dot_max_rows), else after the transposed-B GEMM's first
    ones (candidates for tuning)."""
    lanes = fit.lanes(problem.itemsize)
    if problem.pass_ != "backward_weight" or fit.gpu or lanes < 4 or problem.layout != CHANNELS_FIRST:
        return configs
    dot = cpu_dot_configs(shape.M, shape.N, fit)[:2]
    g = problem.geometry
    if (shape.K >= DOT_MIN_STEPS * lanes and g.out_pixels >= DOT_MIN_IMAGE_STEPS * lanes
            and shape.M <= dot_max_rows(problem, lanes)):
        return dot + configs[:3]
    return configs[:3] + dot


@dataclass
class DotGemm:
    """The dot-product weight gradient's GEMM of a plan (clc_gemm_dot), called once per batch chunk."""

    source: KernelSource
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]

    def call(self, b: str, c: str, chunk: int = 0) -> KernelCall:
        return call(self.source, "clc_gemm_dot", self.global_size, self.local_size,
                    Arg("dy"), Arg(b), Arg(c), np.int32(chunk))


def dot_gemm(problem: Problem, shape: GemmShape, tile: Mapping[str, Any], index: str, b_rows: str,
             fit: limits.Limits) -> DotGemm:
    """The weight gradient ``shape`` (weight_shape's: M output channels, N input channels x taps,
    K one launch's pixels) as dot products; B the column buffer (``b_rows`` "columns") or the
    input of a 1x1 stride-1 layer ("input")."""
    if problem.layout != CHANNELS_FIRST:  # rows of pixels: channels-first activations only
        raise ValueError(f"the CPU dot-product configuration {dict(tile)} reads channels_first activations only")
    blocks = -(-shape.M // tile["WM"])
    lm = min(tile["LX"], blocks)
    src = source(
        "gemm_cpu_dot.mako", problem, index, writes_result=False, GEMMS=shape.count(problem.geometry),
        M=shape.M, N=shape.N, K=shape.K, KSPLIT=shape.ksplit or shape.K, WM=tile["WM"], WN=tile["WN"],
        VK=min(16, max(4, pow2_at_most(fit.lanes(problem.itemsize)))), LM=lm, b_rows=b_rows, c=shape.c,
    )
    global_size = (rounded(blocks, lm), -(-shape.N // tile["WN"]), shape.count(problem.geometry) * shape.splits)
    return DotGemm(src, global_size, (lm, 1, 1))


CPU_DEFAULTS = {"NB": 1, "KC": 128}  # one block of columns per work-item: the contraction is not cut


def cpu_config(wm: int, vn: int, lx: int, nb: int = 1, kc: int = CPU_DEFAULTS["KC"]) -> dict:
    """A CPU GEMM tile; ``nb`` > 1 blocks of VN columns per work-item, the contraction cut into steps
    of ``kc`` (only then in the config, so that single-block configs keep their stored form)."""
    config = {"LOCAL": 0, "WM": wm, "VN": vn, "LX": lx}
    return {**config, "NB": nb, "KC": kc} if nb > 1 else config


def is_cpu_config(tile: Mapping[str, Any]) -> bool:
    return tile.get("LOCAL", 1) == 0


def tile_extent(tile: Mapping[str, Any]) -> tuple[int, int, int]:
    """(rows of M, columns of N, contraction step) one work-group covers."""
    if is_cpu_config(tile):
        return tile["WM"] * tile["LX"], tile["VN"] * tile.get("NB", 1), 1
    return tile["TM"], tile["TN"], tile["TK"]


def edge_waste(m: int, n: int, tm: int, tn: int) -> float:
    """Work done per useful output when TM x TN tiles cover an M x N matrix (1.0: they divide it)."""
    return rounded(m, tm) * rounded(n, tn) / (m * n)


def local_loads_per_fma(wm: int, wn: int) -> float:
    """Local-memory loads per FMA of a WM x WN register block: WM + WN values feed WM x WN FMAs
    (0.25 for 8x8 blocks, 0.375 for 8x4, 0.5 for 4x4)."""
    return (wm + wn) / (wm * wn)


def work_items(tile: Mapping[str, Any]) -> int:
    """Work-items of one work-group of a GPU (local-memory) tile."""
    return (tile["TM"] // tile["WM"]) * (tile["TN"] // tile["WN"])


def _tile_fits(tile, fit: limits.Limits, itemsize: int) -> bool:
    tm, tn, tk, wm, wn, vw = tile[:6]
    pad = local_padding(vw)
    local_bytes = tk * ((tm + pad) + (tn + pad)) * itemsize
    return fit.fits((tn // wn, tm // wm), local_bytes)


def _smallest_tiles(fit: limits.Limits) -> list[tuple]:
    """For a device no table tile fits: one output per work-item, as many work-items as it allows
    (up to 8 x 8, both ways round when not square), still tiled through local memory."""
    threads = pow2_at_most(min(fit.work_group, 64))
    side = pow2_at_most(int(threads ** 0.5))
    return list(dict.fromkeys([(side, threads // side, 8, 1, 1, 1, 0, 0), (threads // side, side, 8, 1, 1, 1, 0, 0)]))


def weight_contraction(shape: "GemmShape") -> int:
    """K of a GEMM whose A is a weight (reused by every block of columns, which is what
    :func:`column_blocks` is for), else 0: a weight gradient's A, dy, is as long as the batch's
    pixels and packed per chunk instead (measured on PoCL with an earlier rule that gave part of N
    to a work-item: column blocks made the stem's and a transposed layer's weight gradients
    1.1-1.3x slower).  Until 2026-12-07 dy counted as a weight here (it is packed, PACKED_A_VIEWS):
    weight gradients of at most 128 columns took column blocks, read dy in place and ran 1x1 64 ->
    256 at 56x56 in 3.4x, 128 -> 512 at 28x28 in 2.7x the time of one block (PoCL, AVX2)."""
    return shape.K if shape.a_view in PACKED_A_VIEWS and shape.a_view not in PER_CHUNK_VIEWS else 0


def cpu_work_groups(m: int, n: int, wm: int, vn: int, lx: int, groups: int, nb: int = 1) -> int:
    """Work-groups of one launch of the CPU GEMM: blocks of WM rows, at most LX of them per
    work-group, times work-items' runs of NB x VN columns, times the GEMMs (as :func:`_cpu_gemm` launches)."""
    blocks = -(-m // wm)
    return -(-blocks // min(lx, blocks)) * -(-n // (vn * nb)) * groups


# Work-groups per core a CPU GEMM launch aims at: PoCL runs each work-group on one core, its
# work-items one after another, so a launch of fewer work-groups than this leaves cores idle or
# unevenly loaded.
CPU_FILL_GROUPS = 4


def cpu_work_items(m: int, n: int, tile: tuple, nb: int, groups: int, fit: limits.Limits) -> int:
    """Work-items per work-group (along M) for the CPU GEMM ``tile`` (WM, VN, LX): its LX, halved
    while a launch would have fewer than CPU_FILL_GROUPS work-groups per core (a 7x7 layer's 256 x 98
    GEMM with a work-item taking all 7 blocks of columns: 2 work-groups of 8 for 2 cores)."""
    wm, vn, lx = tile
    while lx > 1 and cpu_work_groups(m, n, wm, vn, lx, groups, nb) < CPU_FILL_GROUPS * fit.compute_units:
        lx //= 2
    return lx


MAX_COLUMN_BLOCKS = 8  # the blocks' running sums, 8 x WM x VN elements (8 KiB at 16 x 16 floats), stay in L1


def column_blocks(m: int, n: int, k: int, tile: tuple, fit: limits.Limits, itemsize: int, groups: int) -> int:
    """Blocks of VN columns per work-item for the CPU GEMM ``tile`` (WM, VN, LX) on an M x N x K GEMM.

    Its work-items sweep all of A once per NB x VN columns of C.  Where A is larger than half a
    core's cache and N is narrow (small images: a 7x7 layer's weight of 2.4 MB for 98 columns),
    one work-item takes all of N, so that A streams through once: measured on PoCL, 0.78-0.91x
    the time of one block per work-item.  Fewer blocks than all of N (A swept twice or more) were
    no faster there, so it is all or one.  All of N must be at most MAX_COLUMN_BLOCKS blocks, and
    every core must still get a work-group.

    The work-item's share of B (K x NB x VN) need not fit the cache: each contraction step of KC
    reuses its slice of A (WM x KC, from the first-level cache) over the NB blocks, and the share
    is read once per work-item, as many bytes as the sweeps of A it saves where WM = VN.  On PoCL
    (2-core EPYC, AVX-512, 1 MiB L2, 2 threads; 2026-12-06) shares of 1-2 MB ran in 0.83-0.89x the
    time of one block (3x3 256 and 512 at 7x7, batch 1-2; 1x1 2048 -> 512 at 7x7, batch 2 in 8-row
    blocks), where a rule that asked the share to fit half the cache had kept one block."""
    wm, vn, lx = tile
    budget = fit.core_cache // 2
    blocks = -(-n // vn)
    if not k or not budget or m * k * itemsize <= budget or blocks == 1 or blocks > MAX_COLUMN_BLOCKS:
        return 1
    if cpu_work_groups(m, n, wm, vn, lx, groups, blocks) < fit.compute_units:
        return 1
    return blocks


# The weight of a block's local-memory loads per FMA against the waste, for plain matrices (gemm_tiles)
LOCAL_LOAD_WEIGHT = 2.0
# Work-items per compute unit under which a plain GEMM's (Winograd's) launch pays for its idle
# warps in gemm_tiles: on an H200, over 190 Winograd layer-passes with every tile timed
# (docs/perf/h200-all-tiles-{a,b}.json), its tiles came 1.040x the best with it (192-256 and a
# square root: 1.038-1.041), 1.048x without; 1.05-1.18x from 320 up, or with the full ratio
FILL_WORK_ITEMS = 256
# A GEMM that reads its operands as matrices (im2col's column buffer, gemm1x1's input in place) with
# at least LARGE_GEMM_WAVES work-groups of LARGE_GEMM_TILE per compute unit keeps every unit busy with
# several work-groups at once, and is bound by its local-memory loads rather than by latency: there
# the 128x64 tile's 8x8 blocks (64 FMAs per 16 local loads, 128 work-items) beat the table's first,
# the same tile in 8x4 blocks (32 FMAs per 12 loads, 256 work-items), and are taken first where they
# waste at most LARGE_GEMM_WASTE of the work the least wasteful tile does.  Not for implicit GEMMs,
# whose tile loads compute an im2col address per element: there the 256 work-items won (the 8x8
# blocks' first place took their forwards from 1.060x the fastest tile to 1.087x); nor for
# gemm1x1's forward where it reads the input in scalars (strided, or images of a pixel count not a
# multiple of 4): Xception's 1x1 728 -> 728 at 19x19 ran 1.20x its time in them, a stride-2
# 256 -> 512 1.07x.  On an H200, every tile timed (docs/perf/h200-all-tiles-*.json; the two
# closing lists' runs measured after the rule was first written, at 2 waves for every family):
# im2col's 72 data gradients from 1.240x the fastest tiles' summed time to 1.124x (geometric mean
# 1.149x -> 1.106x; 1.268x -> 1.166x on the closing lists alone), gemm1x1's 38 layer-passes from
# 1.186x to 1.086x (1.161x -> 1.145x); issue 12's 1x1 1024 -> 1024 layer at 28x28, batch 64, ran
# 45.4 TFLOP/s in 8x8 blocks against 41.3 in 8x4 in one run (docs/perf/h200-stream-large-gemm-*.json).
LARGE_GEMM_TILE = (128, 64, 16, 8, 8, 4, 1, 3)
LARGE_GEMM_WAVES = 4
LARGE_GEMM_WASTE = 1.05
# Below that, the same GEMMs with at least one wave of MEDIUM_GEMM_TILE work-groups (one for every
# compute unit) take the 64x64 tile in 8x8 blocks first where it wastes no more than the table's
# first: a quarter of a local load per FMA against the 128x32 and 128x64 tiles' 8x4 blocks (0.375)
# and the same 8x8 blocks over 64x128 (whose larger tile leaves more units idle or the last wave
# part empty).  With fewer work-groups than units, the 128 and 256 work-items of the 8x4 tiles hide
# the loads' latency better: gemm1x1's forwards of 16-130 tiles ran 64x64 in 1.5-2.4x their time.
# Over the stored runs (docs/perf/heuristic_check.py, every list, the H100 and H200 all-tiles runs
# merged) the rule moved 74 layer-passes (gemm1x1's forwards and both gradients, im2col's data
# gradients): 0.937x their time (geometric mean), 41 faster by 2% or more, 12 slower (at most
# 1.12x); 1374 layer-passes 1.059x -> 1.055x the best, the twelfth and thirteenth lists 1.087x ->
# 1.063x and 1.066x -> 1.057x; the strided 1x1 list 1.051x -> 1.054x.  The same at 1.4 waves.  On an
# H100, alternating with the code before (docs/perf/h100_medium_tile.sh), the 8 layer-passes it moved
# in the GPU set and the thirteenth list ran 0.904x in kernel time and 0.883x in a stream of calls
# (ResNet-50's 1x1 1024 -> 256 at 14x14 forward 0.124 -> 0.100 ms).
MEDIUM_GEMM_TILE = (64, 64, 16, 8, 8, 4, 1, 3)
MEDIUM_GEMM_WAVES = 1


@dataclass(frozen=True)
class TileWeights:
    """What a GPU tile order weighs against the edge waste for a GEMM of plain matrices (gemm_tiles):
    the shortfall of work-items under ``fill_items`` a compute unit, to ``fill_power`` (idle warps
    leave the loads' latency unhidden), and the block's local loads per FMA times ``loads``."""

    fill_power: float
    loads: float
    fill_items: int = FILL_WORK_ITEMS


# Winograd's workspace GEMMs (gemm_tiles' ``plain``)
PLAIN_WEIGHTS = TileWeights(fill_power=0.5, loads=LOCAL_LOAD_WEIGHT)
# im2col's data gradient, W^T dy into the column buffer (both read as matrices, dy's rows in
# vectors).  On an H200, every tile re-timed on its 105 layer-passes of 19 lists
# (docs/perf/h200-all-tiles-im2col-data-retimed.json), the waste order's first tile ran 1.099x the
# fastest; weighed so (the weights chosen on all lists but one, judged on that one, for each list:
# the same weights every time), 1.060x, better on 16 lists and worse on none; Winograd's weights
# gave 1.078x.  The same weights took the implicit GEMM's forwards from 1.049x to 1.116x and
# gemm1x1's from 1.115x to 1.121x (docs/perf/h200-all-tiles-*.json), so they stay with these.
COLUMN_WEIGHTS = TileWeights(fill_power=1.0, loads=1.0)
# Where GPU tiles waste the same, a GEMM whose tile loads read plain matrices (gemm1x1's operands in
# place, im2col's column buffer: gemm_tiles' ``matrices``) takes the one of wider vectors: the
# table puts the 32x64 tile (2x4 blocks, vectors of 2, 256 work-items) before the 32x32 one (4x4
# blocks, vectors of 4, 64 work-items), which share their rows' waste.  On an H200, every tile timed
# (docs/perf/h200-all-tiles-*.json): gemm1x1's first tile 1.115x the fastest -> 1.076x over 28
# forwards and 1.083x -> 1.056x over 36 data gradients (DenseNet-121's 1x1 544 -> 128 forward 1.47x
# -> 1.10x, ShuffleNet's grouped 1x1 1.36x -> 1.06x); the implicit GEMMs' tile loads gather per
# element, where the 256 work-items won (their weight gradients 1.114x -> 1.155x), so they keep
# the table's order.
VECTOR_TIES = True
TILE_CANDIDATES = 4  # tiles an algorithm offers per GEMM (and tuning measures), best guess first
# A contraction this short (few input channels x taps: a network's first layer, K = 27 for 3
# channels and a 3x3 kernel), where one operand's tile loads gather it through an implicit im2col
# or col2im (index arithmetic and bounds checks per element), makes the GEMM gather-bound: each
# work-item does few FMAs per element it gathers.  gemm_tiles then ranks tiles (after the compute
# units they leave idle) by the gathering: the times the gathered operand is gathered (once per
# tile along the other side: a tile of 32 rows over 64 output channels gathers the input twice),
# then the edge waste, then the gathers per work-item.  On an H200 (17 such layers, every tile
# timed, 2026-12-03: docs/perf/h200-all-tiles-short-gathered.json) that picked the fastest tile or
# one within 1.04x on 15 of 18 implicit-GEMM forwards and data gradients (1.12-1.18x on AlexNet's,
# a 16 -> 32 3x3 and a 1D 16 -> 64, where 8x8 blocks won), where the edge-waste order's were
# 1.08-1.43x the fastest on ten.  With no limit the rule took 3x3x3 layers of 32-64 channels
# (K = 864 and 1728) to 1.15x the fastest; the waste order keeps them (docs/perf/heuristic_check.py).
SHORT_CONTRACTION = 512
# The views that gather an operand, and which: the input (channels x taps of it per output pixel)
# or dy (output channels x taps per input pixel)
GATHER_VIEWS = {"b_input_unfold": "x", "a_input_unfold": "x", "b_input_unfold_t": "x",
                "b_grad_output_gather": "dy", "a_grad_output_gather": "dy"}


def _gathered_view(shape: "GemmShape") -> tuple[str, str] | None:
    """("b" or "a", its view) of the operand a GEMM gathers through an implicit im2col or col2im,
    B looked at first; None where it gathers none."""
    return next(((side, view) for side, view in (("b", shape.b_view), ("a", shape.a_view)) if view in GATHER_VIEWS),
                None)


def gathered_channels(problem: Problem, shape: "GemmShape") -> int:
    """The channels (a group's) of the operand a GEMM gathers through an implicit im2col or col2im
    (the input's, or dy's), each gathered at every tap; 0 where it gathers none."""
    gathered = _gathered_view(shape)
    if gathered is None:
        return 0
    g = problem.geometry
    return g.cin_per_group if GATHER_VIEWS[gathered[1]] == "x" else g.cout_per_group


def gathers_long(problem: Problem, shape: "GemmShape") -> bool:
    """Whether a GEMM gathers an operand through an implicit im2col or col2im of taps (not a 1x1
    kernel's strided read) beyond SHORT_CONTRACTION channels x taps a pixel: the gathering GEMMs
    gathered_operand leaves out."""
    g = problem.geometry
    return not g.is_pointwise and gathered_channels(problem, shape) * g.kernel_volume > SHORT_CONTRACTION


def gathered_operand(problem: Problem, shape: "GemmShape") -> str:
    """"a" or "b": the operand a GEMM gathers through an implicit im2col or col2im where what it
    gathers per pixel is short (channels x taps of the input, or of dy, at most SHORT_CONTRACTION:
    the forward's and data gradient's contraction, the weight gradient's columns); "" for other
    GEMMs, and for a 1x1 kernel's (whose gather is a plain strided read: no taps, no padding)."""
    gathered = _gathered_view(shape)
    if gathered is None or problem.geometry.is_pointwise or gathers_long(problem, shape):
        return ""
    return gathered[0]


# The least shortfall of work-groups (compute units over tiles) that gather_rank ranks a tile by
# before the gathering and the waste: a few units left idle cost less than a tile half empty.  U-Net's
# 2x2 stride-2 128 -> 64 at 64x64, batch 8 (a contraction of 512): 64x64 tiles, 128 of them for 132
# units, had ranked after 128x32 ones over 64 output channels (half their rows empty), which ran
# 1.86x their time on an H100 (docs/perf/h100-tune-thirteenth.json); no other stored layer-pass
# changes with this bound (docs/perf/heuristic_check.py, and the short gathered layers' all-tiles run)
IDLE_GATHER_RANK = 1.1
# Where gather_rank finds the 32x32 tile (4x4 blocks, 64 work-items) and the 32x64 one (2x4 blocks,
# 256) alike in idle units, gathering and waste, it puts the 32x64 first (half the gathers a
# work-item): right for first layers, whose gather is a few channels at many taps (VGG's, YOLO's,
# Inception's, DDRNet's 3-channel stems, 1.03-1.11x the 32x32 tile's speed; AlexNet's 11x11
# 1.18x; DeepSpeech2's 1-channel 41x11 1.06x), but where the gathered operand has GATHER_DENSE_CHANNELS
# channels or more and the GEMM's rows fill 32-row tiles, the 4x4 blocks' lower local loads per
# FMA (0.5 against 0.75) win: over the stored layer-passes whose first candidate is the implicit
# GEMM with the 32x64 tile first (docs/perf/heuristic_check.py), the 32x32 tile ran 0.73-0.97x its
# time on all ten such (IMPALA's residual 3x3 32 -> 32 forward 0.73x and data gradient 0.79x,
# DenseNet-121's growth layer's data gradient 0.79x, GoogLeNet's 5x5 16 -> 32 0.83x, HRNet's 3x3
# 0.83x and 0.97x, UnivNet's 1D k3 0.87x and 0.91x, ENet's 5x1 0.88x and 0.91x, VoxelMorph's 3x3x3
# 16 -> 32 0.89x); the two of fewer rows, 24 and 48, ran it 1.14-1.17x, and the first layers above
# are under the channel bound.
GATHER_DENSE_CHANNELS = 16
SMALL_SQUARE_TILE = (32, 32, 16, 4, 4, 4, 1, 3)
SMALL_WIDE_TILE = (32, 64, 16, 2, 4, 2, 1, 3)
# A forward or data gradient whose gather is long (more than SHORT_CONTRACTION channels x taps: the
# waste order ranks its tiles), over rows that leave part of every row tile empty (channels not a
# multiple of 32) where 64-row tiles waste no more rows than 32-row ones (33-63 rows over 64, 97-127
# over 128, ...), takes the 64x64 tile in 4x4 blocks first: 256 work-items gathering 4 values each
# a step, where the waste order's 8x8 blocks gather 16 (64x128), and its 32-row tiles gather the
# operand once more.  On an H100, every tile of the implicit GEMM's forward timed
# (docs/perf/gpu38/tiles3d.json, rows.json; docs/perf/implicit_forward_tiles.py): 3x3x3 layers of
# 40, 40, 48 and 56 channels ran it in 0.61x, 0.89x, 0.89x and 0.90x the waste order's first
# tile's time (DeepMedic's 40 -> 40 at 25^3: 1.182 -> 0.720 ms), one of 112 channels in 1.09x
# (128x64 in 8x4 blocks best); over all 111 forwards so timed, 1.055x -> 1.048x the fastest.
# Layers whose rows fill 32-row tiles keep the waste order (at 64 and 128 channels that tile ran
# 1.00-1.11x and 1.3-1.4x the fastest), as do those it would waste more rows on (24 or 80 rows).
# Judged on a second list written before it was measured (docs/perf/h100-partial-rows2-layers.txt,
# gpu39/rows2.json: 15 forwards, 3D, 1D, strided 2D): 1.143x -> 1.052x the fastest.  Written from
# that run: where 128-row tiles waste no more rows than 64-row ones either (97-127 rows), the waste
# order stays: its 128x64 tile in 8x4 blocks ran 3x3x3 forwards of 104 and 112 channels in 0.85x and
# 0.92x this tile's time, one of 120 (at 8x14x14, half the columns) in 1.05x.
PARTIAL_ROWS_TILE = (64, 64, 16, 4, 4, 4, 1, 3)
PARTIAL_ROWS_MULTIPLE = 32
# A GEMM that gathers taps along one spatial dimension (a 1D layer: a run of one row, no 2D or 3D
# index to decode per element) takes a 64x128 tile where the order put the 64x64 tile in 4x4 blocks
# first: half the weight loads per FMA for twice the gathers a work-item.  In 8x8 blocks where the
# rows fill 64-row tiles, else in 4x8 blocks.  Over every 1D layer-pass with every implicit-GEMM tile
# timed (docs/perf/implicit_forward_tiles.py's runs), the 64x64 tile came first on 11 and a 64x128 one
# was the fastest on all 11: at 64 rows (WaveNet's, a TCN's and SoundStream's dilated layers, forwards
# and data gradients) the 8x8 blocks, the 64x64 tile 1.18-1.25x their time and the 4x8 blocks
# 1.06-1.22x; at 40-60 rows (forwards of Wave-U-Net's k15 and of k5-k9 layers) the 4x8 blocks, the
# 64x64 tile 1.05-1.33x and the 8x8 blocks 1.23-1.25x their time.
ROW_GATHER_FULL_TILE = (64, 128, 16, 8, 8, 4, 1, 3)      # rows a multiple of 64
ROW_GATHER_PARTIAL_TILE = (64, 128, 16, 4, 8, 4, 1, 3)   # rows leaving the last 64-row tile partly empty


def gather_rank(m: int, n: int, tile: Mapping[str, Any], gathered: str, units: int = 1,
                groups: int = 1) -> tuple[float, int, float, float, int]:
    """The order of GPU tiles for a gather-bound GEMM (SHORT_CONTRACTION): compute units left idle
    first where they are IDLE_GATHER_RANK or more of the tiles (a GEMM of a few tiles is bound by
    them, not by its gathers), then how many times the gathered operand is gathered (once per tile
    along the other side), the work wasted on the edges, the gathers per work-item, and the most
    work-items."""
    tm, tn, tk = tile["TM"], tile["TN"], tile["TK"]
    times, per_item = (-(-m // tm), tn * tk) if gathered == "b" else (-(-n // tn), tm * tk)
    count = -(-m // tm) * -(-n // tn) * groups
    items = work_items(tile)
    idle = max(1.0, units / count)
    return (idle if idle >= IDLE_GATHER_RANK else 1.0), times, round(edge_waste(m, n, tm, tn), 9), per_item / items, -items


def gemm_tiles(m: int, n: int, fit: limits.Limits, itemsize: int, limit: int = TILE_CANDIDATES, groups: int = 1,
               vector_first: bool = True, layout: str = CHANNELS_FIRST, plain: bool = False, k: int = 0,
               gathered: str = "", large_blocks: bool = True, weights: TileWeights | None = None,
               matrices: bool = True, gathered_channels: int = 0, long_gather: bool = False,
               gathered_ndim: int = 2) -> list[dict]:
    """Tiles that fit the device, best guess first: least work wasted on the matrix edges, enough
    work-groups to fill every compute unit (on a GPU), then the table's order of preference.  On a
    GPU, a GEMM that gathers operand ``gathered`` ("a" or "b": gathered_operand) ranks by its
    gathering instead (gather_rank, SHORT_CONTRACTION; ``gathered_channels``: the gathered
    operand's channels, for GATHER_DENSE_CHANNELS; ``long_gather``: a GEMM that gathers an operand
    beyond SHORT_CONTRACTION, for PARTIAL_ROWS_TILE; ``gathered_ndim``: the spatial dimensions of
    more than one pixel its gather runs over, for ROW_GATHER_FULL_TILE and ROW_GATHER_PARTIAL_TILE).
    ``plain`` (Winograd's workspace matrices): on a GPU the blocks' local loads per FMA weigh against that waste, on a CPU the
    larger block breaks its ties.  On a CPU, the GEMM without local memory comes first when
    ``vector_first`` (else after one local-memory tile); it reads rows of channels-first
    activations, so channels-last ``layout`` gets the local-memory tiles only.  ``large_blocks``:
    whether LARGE_GEMM_TILE and MEDIUM_GEMM_TILE may come first (not where the tile loads address
    an operand through an implicit im2col or col2im).  ``weights``: the GPU weighting of a GEMM of
    plain matrices (PLAIN_WEIGHTS where ``plain``).  ``matrices``: whether the tile loads read both
    operands as matrices, without an im2col address per element (ties of waste then go to wider
    vectors on a GPU: VECTOR_TIES)."""
    gpu = fit.gpu
    weights = weights or (PLAIN_WEIGHTS if plain else None)
    tiles = [t for t in (GPU_TILES if gpu else CPU_TILES) if _tile_fits(t, fit, itemsize)]
    if not tiles:
        tiles = _smallest_tiles(fit)
    units = fit.compute_units

    def cost(tile) -> float:
        tm, tn = tile[0], tile[1]
        waste = edge_waste(m, n, tm, tn)
        if gpu:
            # fewer work-groups than compute units leaves the rest idle (counting partial waves
            # beyond that overvalued small tiles in the H200 measurements)
            count = -(-m // tm) * -(-n // tn) * groups
            waste *= max(1.0, units / count)
            if weights:
                # and (plain matrices, whose local-load weighting below favours the 64-work-item
                # 8x8 tiles) fewer than weights.fill_items a compute unit leave too few warps to
                # hide the loads' latency: the shortfall to weights.fill_power (Winograd's: its root)
                items = count * work_items(dict(zip(TILE_KEYS, tile)))
                waste *= max(1.0, units * weights.fill_items / items) ** weights.fill_power
        return waste

    def local_loads(tile) -> float:
        # ``plain`` (Winograd's workspace GEMMs) on a GPU: a WM x WN block reads WM + WN values from
        # local memory per WM x WN FMAs, a cost weighed against the waste (1 + LOCAL_LOAD_WEIGHT x
        # loads per FMA): an 8x8 block does 64 FMAs per 16 loads where 8x4 does 32 per 12.  On an
        # H200 a 128x64 tile ran a 1x1 1024 -> 1024 layer at 45.9 TFLOP/s with 8x8 blocks and 39.5
        # with 8x4 (docs/performance.md); over 53 Winograd forward and data-gradient passes, every
        # tile timed (docs/perf/h200-all-tiles-a.json), the weighting picked tiles 1.040x the best
        # (the waste alone, blocks breaking ties: 1.061x).  The other algorithms' GEMMs keep the
        # waste and the table's order: weighted, the same run's choices got worse on every family
        # (gemm1x1 1.13 -> 1.18x the best, implicit_gemm 1.08 -> 1.22x, im2col's column buffers
        # 1.11 -> 1.13x at a weight of 0.5)
        return 1 + weights.loads * local_loads_per_fma(tile[3], tile[4]) if weights and gpu else 1

    def block(tile) -> int:
        # on a CPU, plain matrices' ties of waste go to the larger block (as measured on PoCL before
        # the GPU's weighting)
        return -tile[3] * tile[4] if plain and not gpu else 0

    def wider_vector(tile) -> int:
        # on a GPU, where the tile loads read the operands as matrices (``matrices``), ties go to
        # the wider vector: the 32x32 tile's 4x4 blocks in vectors of 4 before the 32x64 tile's
        # 2x4 blocks in vectors of 2 (VECTOR_TIES)
        return -tile[5] if gpu and matrices and VECTOR_TIES else 0

    def lead(tile) -> None:
        # a rule below puts ``tile`` first, the rest keeping their order
        tiles.remove(tile)
        tiles.insert(0, tile)

    if gpu and gathered:
        rank = {tile: gather_rank(m, n, dict(zip(TILE_KEYS, tile)), gathered, units, groups) for tile in tiles}
        tiles.sort(key=lambda tile: rank[tile])
    else:
        # stable: ties keep the table's order
        tiles.sort(key=lambda tile: (cost(tile) * local_loads(tile), block(tile), wider_vector(tile)))
        if gpu and not plain and large_blocks and LARGE_GEMM_TILE in tiles and tiles[0] != LARGE_GEMM_TILE:
            large = -(-m // LARGE_GEMM_TILE[0]) * -(-n // LARGE_GEMM_TILE[1]) * groups >= LARGE_GEMM_WAVES * units
            if large and cost(LARGE_GEMM_TILE) <= cost(tiles[0]) * LARGE_GEMM_WASTE:
                lead(LARGE_GEMM_TILE)
        if (gpu and not plain and large_blocks and MEDIUM_GEMM_TILE in tiles
                and tiles[0] not in (LARGE_GEMM_TILE, MEDIUM_GEMM_TILE)):
            count = -(-m // MEDIUM_GEMM_TILE[0]) * -(-n // MEDIUM_GEMM_TILE[1]) * groups
            if count >= MEDIUM_GEMM_WAVES * units and cost(MEDIUM_GEMM_TILE) <= cost(tiles[0]):
                lead(MEDIUM_GEMM_TILE)
    dense, sparse = SMALL_SQUARE_TILE, SMALL_WIDE_TILE
    if (gpu and gathered_channels >= GATHER_DENSE_CHANNELS and m % dense[0] == 0 and tiles[0] == sparse
            and dense in tiles):
        # the 4x4 blocks over the 2x4 ones where the order ties them (GATHER_DENSE_CHANNELS): in
        # gather_rank's idle units, gathering and waste; or, where an implicit GEMM's gather is too
        # long for gather_rank (more than SHORT_CONTRACTION channels x taps), in the waste, over a
        # forward's or data gradient's contraction (``k``: their A is the weight), where the lower
        # local loads per FMA count: over the stored runs the 32x32 tile ran 0.78-0.95x the 32x64
        # one's time on all seven such passes (3x3x3 32 -> 32 layers of GwcNet, PSMNet,
        # HighRes3DNet, 3D U-Net; DeepSpeech2's 21x11 32 -> 32, InceptionTime's 1D k39)
        if (rank[dense][:3] == rank[sparse][:3] if gathered
                else not matrices and k and cost(dense) == cost(sparse)):
            lead(dense)
    if (gpu and not plain and n <= SMALL_SQUARE_TILE[1] and tiles[0] == SMALL_SQUARE_TILE and SMALL_WIDE_TILE in tiles
            and -(-m // SMALL_SQUARE_TILE[0]) * groups <= units):
        # a GEMM of at most 32 columns (a batch-1 head, a 4x4 image at batch 1) in at most a wave
        # of 32-row tiles: the 32x64 tile runs the same work-groups as the 32x32 one (its extra
        # columns empty too), with 256 work-items of 8 FMAs a step where the 32x32 tile has 64 of
        # 16, and so hides the loads' latency that such a GEMM is bound by.  Over the stored runs
        # (H100 and H200, docs/perf/heuristic_check.py) the 32x32 tile ran 1.33-1.90x the 32x64
        # one's time on every such GEMM timed with both but one (1.01x): PP-LCNet's and
        # MobileNetV3's batch-1 heads (1.82x, 1.90x; 1.63x the data gradient), FCN's fc6 and VGG's
        # fc7 as convolutions at batch 8 and 4 (1.62x, 1.59x), a classifier head at batch 32
        # (1.41x), ProGAN's 4x4 at batch 1 (1.38x, 1.46x), DCGAN's final 4x4 (1.38x), SENet's
        # excitation (1.33x); BAM's 512 -> 32 at batch 1 1.01x.  Not Winograd's GEMMs (``plain``:
        # their weighting of local loads decides there)
        lead(SMALL_WIDE_TILE)
    rows = PARTIAL_ROWS_TILE[0]
    if (gpu and long_gather and m % PARTIAL_ROWS_MULTIPLE and PARTIAL_ROWS_TILE in tiles
            and rounded(m, PARTIAL_ROWS_MULTIPLE) == rounded(m, rows) < rounded(m, 2 * rows)):
        # rows that leave every row tile partly empty, fewest in 64-row tiles, gathered long
        lead(PARTIAL_ROWS_TILE)
    row_gather_tile = ROW_GATHER_FULL_TILE if m % rows == 0 else ROW_GATHER_PARTIAL_TILE
    if gpu and gathered_ndim == 1 and (gathered or long_gather) and tiles[0] == PARTIAL_ROWS_TILE \
            and row_gather_tile in tiles:
        # a 1D gather: the 64x128 tile in its place (ROW_GATHER_FULL_TILE, ROW_GATHER_PARTIAL_TILE)
        lead(row_gather_tile)
    configs = [dict(zip(TILE_KEYS, t)) for t in tiles]
    if not gpu:
        # no local memory, no barriers: what PoCL runs fastest (docs/performance.md); the
        # local-memory tiles stay as candidates for tuning.  Written in explicit vectors, so only
        # where the device has vector lanes (llvmpipe has none: it took minutes to build there)
        # The tiles that fit the registers, by row waste over parallel FMAs (a grouped layer's 8
        # rows per group fill half a 16-row block; measured on PoCL, ResNeXt's 32-group 3x3
        # forward ran 0.87x the time with 8-row blocks), each with column blocks where they pay,
        # then without (a candidate for tuning, and what tuning databases written before column
        # blocks hold).
        vector = ([cpu_config(t[0], t[1], cpu_work_items(m, n, t, nb, groups, fit), nb=nb)
                   for t in cpu_vector_tiles(m, fit, itemsize)
                   for nb in dict.fromkeys((column_blocks(m, n, k, t, fit, itemsize, groups), 1))]
                  if fit.lanes(itemsize) >= 4 and layout == CHANNELS_FIRST else [])
        if vector_first:
            configs = vector[:2] + configs[:1] + vector[2:] + configs[1:]
        else:
            configs = configs[:1] + vector[:2] + configs[1:2] + vector[2:] + configs[2:]
    return configs[:limit]


# Views of weights and workspaces, laid out the same whatever the activations' layout.
MATRIX_VIEWS = {"a_matrix", "b_columns", "b_columns_t", "c_matrix"}


@dataclass(frozen=True)
class GemmShape:
    """One GEMM of a plan: the sizes per group and the operand views that give it meaning."""

    M: int
    N: int
    K: int
    a_view: str
    b_view: str
    c_view: str
    a_kfast: bool
    b_nfast: bool
    a: dict
    b: dict
    c: dict
    ksplit: int = 0  # 0: the whole contraction in one piece
    swapped: bool = False  # the transposed GEMM (channels-last): A is the activation, B the weight
    gemms: int = 0  # GEMMs per launch, the range of the views' g: 0 for the geometry's groups
    # A already lies in the CPU GEMM's packed layout (Winograd's U, which its weight transform writes
    # so: Winograd.packed_rows): read as the packed copy, with no packing launch of its own
    a_packed: bool = False

    def count(self, geometry: ConvGeometry) -> int:
        return self.gemms or geometry.groups

    @property
    def writes_result(self) -> bool:
        """Whether C is the pass's result (an activation, through the epilogue), not a weight
        gradient or a workspace."""
        finished = not self.c.get("partial") or self.c.get("finish")  # a split's sum in the same launch
        return self.c_view in ("c_nchw", "c_nhwc", "c_nchw_scatter") and bool(finished)

    @property
    def reads_activations(self) -> bool:
        """Whether a view reads or writes an activation (whose layout then matters), rather than
        only weights and workspaces."""
        return not {self.a_view, self.b_view, self.c_view} <= MATRIX_VIEWS

    @property
    def splits(self) -> int:
        return -(-self.K // self.ksplit) if self.ksplit else 1


def output_tiles(shape: GemmShape, tm: int, tn: int, groups: int) -> int:
    """The work-groups of one piece: ``shape``'s result in tiles of tm x tn, in each group."""
    return -(-shape.M // tm) * -(-shape.N // tn) * groups


# The A views the CPU GEMM packs.  Weights are packed once per call (not per batch chunk): the
# transposed views step CO or CI*KV elements per k (pages apart), where packing always paid on PoCL
# (1.1-2x); the forward's row-major weight only where the GEMM sweeps A many times (measured: 1.02-1.07x
# with 25-196 column blocks, 0.88x with 7, where packing a 2.4 MB weight costs 12% of the GEMM).
# The weight gradient's A, dy rows of the chunk's images, is packed per chunk (PER_CHUNK_VIEWS):
# read in place, each k step broadcasts WM values from WM rows a channel's pixels apart.
# Winograd's workspace matrices (its transformed weight U, a GEMM per tile position) are packed once
# per call where the GEMMs sweep them 4+ times: on PoCL (AVX2, 2 threads) the GEMMs then ran in
# 0.5-0.6x the time, and the packing cost less than that from 4 sweeps (14x14x128 at batch 4, 4 sweeps:
# 2.55 -> 2.17 ms in all; 28x28x64 at batch 4, 13: 3.05 -> 2.23), more with 1-2 (a 256x256 U at batch
# 1, one sweep: 3.97 -> 5.40).  im2col's data gradient's transposed weight (a_weight_t: a k step's
# WM values are one line, the next k step a row of the weight further) only where it is swept more
# than once: swept once (small images, whose N is one work-item's column blocks) its packing cost
# more than the GEMM's strided reads (PoCL, AVX-512, 2 threads: 7x7x256 at batch 2 0.80x the time
# read in place, 7x7x512 at batch 1 0.55x); gemm1x1's data gradient's a_weight_bwd_data stays
# packed (1x1 2048->512 7x7: 1.24x in place).
PACKED_A_VIEWS = ("a_weight", "a_weight_t", "a_weight_bwd_data", "a_grad_output_rows", "a_matrix")
PER_CHUNK_VIEWS = ("a_grad_output_rows",)
MIN_SWEEPS_TO_PACK = {"a_weight": 16, "a_weight_t": 2, "a_grad_output_rows": 4, "a_matrix": 4}


def _packs_a(shape: GemmShape, tile: Mapping[str, Any], launches: int) -> bool:
    if shape.a_packed:
        return True
    if shape.a_view not in PACKED_A_VIEWS or (shape.ksplit and shape.a_view not in PER_CHUNK_VIEWS):
        return False
    if shape.a_view in PER_CHUNK_VIEWS:
        launches = 1  # packed again for each chunk: nothing to share between launches
    sweeps = -(-shape.N // (tile["VN"] * tile.get("NB", 1))) * launches  # times the GEMMs read all of A
    return sweeps >= MIN_SWEEPS_TO_PACK.get(shape.a_view, 0)


def in_place_a_rows(shape: GemmShape, geometry: ConvGeometry) -> int:
    """Elements between the WM rows of A that one k step of the CPU GEMM reads a value from each of,
    where it reads A in place (``_packs_a`` false): a weight's row (its input channels x taps),
    Winograd's workspace row, a channel's pixels of dy; 0 for views whose k step reads one line."""
    if shape.a_view == "a_weight":
        return geometry.cin_per_group * geometry.kernel_volume
    if shape.a_view == "a_matrix":
        return shape.K
    if shape.a_view == "a_grad_output_rows":
        return geometry.out_pixels
    return 0


def l1_set_rows(rows: int, apart_bytes: int, fit: limits.Limits) -> int:
    """The most of ``rows`` rows ``apart_bytes`` apart whose elements at one column fall in one set
    of a core's L1 data cache (1 where the cache is unknown)."""
    if not fit.l1_way_bytes or not apart_bytes:
        return 1
    sets = Counter((r * apart_bytes % fit.l1_way_bytes) // fit.l1_line for r in range(rows))
    return max(sets.values())


# The shortest workspace row (in cache lines) spread_rows pads: one line more is at most 1/16 more
# memory to write and read
SPREAD_MIN_LINES = 16


def spread_rows(length: int, itemsize: int, fit: limits.Limits) -> int:
    """The row stride (elements) of a CPU workspace matrix whose rows of ``length`` elements the CPU
    GEMM walks one per k step (im2col's transposed column buffer): the length, padded by a cache
    line where its rows are an even number of lines, so that consecutive rows fall in every set of
    a core's L1 data cache.  Unpadded, rows a multiple of the way (4 KiB on x86) apart all share one
    set and a block's K-long walk down them keeps 8 of its lines (an 8-way cache), evicting what the
    next block of rows reads again.  Measured on PoCL (2-core AVX2 EPYC, 8-way 32 KiB L1), the 1x1
    weight gradient at 14x14, batch 2, 256 output channels: 1024 input channels 109 GFLOP/s, 1040 and
    1000 158 and 153; 512 channels 98, 528 150.  Rows under SPREAD_MIN_LINES lines stay as they are."""
    line = fit.l1_line
    if not fit.l1_way_bytes or line % itemsize:
        return length
    lines, rest = divmod(length * itemsize, line)
    if rest or lines < SPREAD_MIN_LINES or lines % 2:
        return length
    return length + line // itemsize


def thrashes_l1(problem: Problem, shape: GemmShape, tile: Mapping[str, Any], fit: limits.Limits,
                launches: int = 1) -> bool:
    """Whether the CPU GEMM ``tile`` reads A in place with more of its WM rows in one L1 set than the
    set has ways, so that every k step evicts lines the next steps read again.  Rows a multiple of
    the cache's way (4 KiB on x86) apart all share one set: a weight of 1024 or 2048 input channels
    (1x1 layers) read in 16-row blocks.  Measured on PoCL (a 2-core AVX-512 EPYC, 8-way 32 KiB L1):
    the 1x1 2048 -> 512 forward at 7x7, batch 1, 1.37 ms in 16-row blocks, 0.64 ms in 8-row ones
    (2040 input channels: 0.59 and 0.62); 1x1 1024 -> 256 at 14x14, batch 1, 1.13 and 0.58 ms; 8
    rows a set (8-row blocks there, or 16-row ones at 512 channels) ran as fast as unaligned rows."""
    if not is_cpu_config(tile) or is_dot_config(tile) or not fit.l1_ways:
        return False
    apart = in_place_a_rows(shape, problem.geometry)
    if not apart or _packs_a(shape, tile, launches):
        return False
    return l1_set_rows(tile["WM"], apart * problem.itemsize, fit) > fit.l1_ways


def thrashing_last(configs: list[dict], problem: Problem, shape: GemmShape, fit: limits.Limits,
                   launches: int = 1) -> list[dict]:
    """``configs`` with the CPU GEMM tiles that thrash the L1 cache (:func:`thrashes_l1`) after the
    other CPU GEMM tiles, in the same places among the other configs (stable)."""
    places = [i for i, c in enumerate(configs) if is_cpu_config(c) and not is_dot_config(c)]
    ordered = sorted((configs[i] for i in places), key=lambda c: thrashes_l1(problem, shape, c, fit, launches))
    out = list(configs)
    for i, config in zip(places, ordered):
        out[i] = config
    return out


def local_padding(vw: int) -> int:
    """Elements each local-memory tile row is padded by: VW keeps rows VW-aligned for vector loads
    and spreads the k-fast tile stores over the banks (one bank per row otherwise); 1 for scalars."""
    return 1 if vw == 1 else vw


TICKET_BYTES = 4  # one OpenCL int: a tile's count of finished pieces (gemm.mako's FINISH)


@dataclass(frozen=True)
class Finish:
    """Split-K in one launch (C's view given "finish"): each output tile's last piece sums the
    pieces into the pass's ``result`` through the epilogue (``epilogue``: its bias and residual
    arguments, None where the GEMM does not write the result), counting finished pieces in
    ``tiles`` counters, one per output tile (workspace ``tickets``)."""

    result: str
    epilogue: tuple[Arg, Arg] | None
    tiles: int


@dataclass
class Gemm:
    """One GEMM of a plan, ready to be called once per batch chunk: its source and sizes and, where
    the CPU GEMM packs A first (``PACKED_A_VIEWS``), the role it packs, how, and the bytes of the
    packed copy (workspace ``apack``, read as A)."""

    source: KernelSource
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    packs: str | None = None  # the role packed as A: "w", "dy" (the chunk's images), or a workspace
    pack_size: tuple[int, ...] = ()  # clc_pack_a's global size
    pack_bytes: int = 0
    vectors: tuple[bool, bool] = (False, False)  # A, B read in aligned vectors (global_vectors)
    store_align: int = 1  # C stored in aligned vectors of this many elements (vector_stores)
    pack_b_size: tuple[int, ...] = ()  # clc_pack_b's global size, where the CPU GEMM packs B (packs_b)
    pack_b_bytes: int = 0  # the packed copy of B (workspace ``bpack``, read as B)
    finish: Finish | None = None  # the pieces' sum in this launch (split-K in one launch)

    @property
    def pack(self) -> bool:
        return self.packs is not None

    @property
    def pack_per_chunk(self) -> bool:
        """Whether A is the chunk's images, packed before each chunk's GEMM (not a weight, once)."""
        return self.packs == "dy"

    def packing(self, chunk: int = 0) -> KernelCall:
        """The call that packs A (the chunk's part of it, where A depends on the chunk)."""
        if self.packs is None:
            raise RuntimeError("this GEMM reads A in place: it has no packing call")
        return call(self.source, "clc_pack_a", self.pack_size, None, Arg(self.packs), Arg("apack"), np.int32(chunk))

    @property
    def pack_b(self) -> bool:
        return bool(self.pack_b_size)

    def calls(self, a: str, b: str, c: str, bias: str | None = None, chunk: int = 0) -> list[KernelCall]:
        """The chunk's GEMM (``call``), after B's packing where B is packed (A's packing, which may
        serve every chunk, is the plan's to place: ``packing``)."""
        packing = [call(self.source, "clc_pack_b", self.pack_b_size, None, Arg(b), Arg("bpack"), np.int32(chunk))]
        return [*(packing if self.pack_b else []), self.call(a, b, c, bias, chunk)]

    def call(self, a: str, b: str, c: str, bias: str | None = None, chunk: int = 0) -> KernelCall:
        """clc_gemm's arguments: A, B, C (each with its offset), the bias and the residual (C when
        absent; both only where C is the pass's result), the chunk.  Where B is packed, clc_gemm reads
        the packed copy, which ``calls`` writes first."""
        a = "apack" if self.pack else a
        b = "bpack" if self.pack_b else b
        residual = "residual" if c in ("y", "dx") else c
        align_a, align_b = (VECTOR_ALIGN if vector else 1 for vector in self.vectors)
        epilogue = (Arg(bias or c, fallback=c, epilogue="bias"), Arg(residual, fallback=c, epilogue="residual"))
        finish: tuple[Arg, ...] = ()
        if self.finish:
            epilogue = self.finish.epilogue or epilogue
            finish = (Arg("tickets", with_offset=False), Arg(self.finish.result))
        return call(self.source, "clc_gemm", self.global_size, self.local_size,
                    Arg(a, align=align_a), Arg(b, align=align_b), Arg(c, align=self.store_align),
                    *epilogue, np.int32(chunk), *finish)

    @property
    def workspaces(self) -> dict[str, int]:
        return {**({"apack": self.pack_bytes} if self.pack else {}), **({"bpack": self.pack_b_bytes} if self.pack_b else {}),
                **({"tickets": self.finish.tiles * TICKET_BYTES} if self.finish else {})}



# Views whose elements lie contiguous along their fast index (A's k where a_kfast, else m; B's n
# where b_nfast, else k) and define clc_at_a / clc_at_b, so that 4 consecutive elements can be one
# aligned vector load (config key GV).  Each element index is then a multiple of 4 wherever the
# fast extent is (global_vectors); the activations' views only channels-first with unit stride,
# along one image's pixels (OP % 4), dy's rows (a_grad_output_rows) only along them.
VECTOR_A_VIEWS = {"a_weight", "a_weight_t", "a_grad_output_rows", "a_matrix"}
VECTOR_B_VIEWS = {"b_input_pointwise", "b_input_pointwise_t", "b_columns", "b_columns_t", "b_grad_output_cols"}
VECTOR_ALIGN = 4  # elements: a vector load's address must be a multiple of 4 items
MIN_VECTOR_A_REUSE = 4  # tiles of columns that read each tile of A, for A's vectors along k


def global_vectors(problem: Problem, shape: GemmShape, tile: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether the GEMM core loads A and B in aligned 4-element vectors: where ``tile`` asks (GV,
    bit 0 for A, bit 1 for B), the view allows, the fast extent of the operand and of the tile are multiples of 4, and the
    operand is stored as the arithmetic type (workspaces always; the call's tensors unless float16
    or bfloat16).  The call's tensors must then start at a multiple of 4 elements: Runner.run
    falls back to the scalar loads where one does not."""
    mode = tile.get("GV", 0)
    if not mode:
        return False, False
    g = problem.geometry
    ksplit = shape.ksplit or shape.K
    along_k = tile["TK"] % 4 == 0 and shape.K % 4 == 0 and ksplit % 4 == 0
    pixel_rows = problem.layout == CHANNELS_FIRST and g.out_pixels % 4 == 0 and all(s == 1 for s in g.stride)
    stored_as_real = problem.stored_as_real

    def allowed(view: str, views: set, fast_k: bool, extent: int, length: int) -> bool:
        if view not in views or (view not in MATRIX_VIEWS and not stored_as_real):
            return False
        if view in ("a_grad_output_rows", "b_input_pointwise", "b_input_pointwise_t", "b_grad_output_cols") \
                and not pixel_rows:
            return False
        if view == "a_grad_output_rows" and not fast_k:
            return False
        return along_k if fast_k else extent % 4 == 0 and length % 4 == 0

    a = bool(mode & 1) and allowed(shape.a_view, VECTOR_A_VIEWS, shape.a_kfast, tile["TM"], shape.M)
    b = bool(mode & 2) and allowed(shape.b_view, VECTOR_B_VIEWS, not shape.b_nfast, tile["TN"], shape.N)
    # Vectors along k read 4 rows of the tile per 16 work-items where scalar loads read one.  On an
    # H200 (docs/perf/gemm_vector_rows.py, 33 layer-passes) A's cost 1.19-1.53x the scalar loads'
    # time where A streams through (one image's Winograd GEMMs, a batch-1 1x1 layer: 1-2 tiles of
    # columns) or B stays scalar (split-K's and the implicit GEMM's A: 1.09-1.38x); with B's vectors
    # too and A reused by 4+ tiles of columns they won (0.79-0.94x).  B's along k likewise lost alone
    # (1.14x) and won beside A's (Winograd's weight gradient).
    if a and shape.a_kfast and not (b and -(-shape.N // tile["TN"]) >= MIN_VECTOR_A_REUSE):
        a = False
    if b and not shape.b_nfast and not a:
        b = False
    return a, b


def vector_stores(problem: Problem, shape: GemmShape, tile: Mapping[str, Any]) -> int:
    """The elements of one aligned vector store of C (a work-item's VW neighbouring columns), or 0
    for scalar stores.  Scalar stores of the register blocks put a warp's neighbouring lanes VW
    columns apart, so each store instruction writes part of every 32-byte sector it touches.
    Vectors need C's columns contiguous in runs of VW that start at multiples of VW:

    * an activation channels-first (``c_nchw``): an image's pixel count a multiple of VW, so no
      run crosses two images;
    * an activation channels-last (``c_nhwc``, the columns a group's channels): the group's
      channels and the pixel's a multiple of VW;
    * a workspace matrix written once (``c_matrix``, not a running sum, not tap-major): N a
      multiple of VW.

    The call's tensor must be stored as clc_real (float16 and bfloat16 results stay scalar).
    Vector stores come with the global vector loads (any GV bit): the scalar twin that Runner.run
    falls back to for a tensor starting off the alignment (GV = 0) stores in scalars.  On an H200
    (docs/perf/large_results.py) they ran 1x1 layers' 103 MB results in 0.79-0.82x the time of
    scalar stores and U-Net's first layer in 0.61x."""
    vw = tile["VW"]
    if not tile.get("GV") or vw == 1:
        return 0
    c = shape.c
    result_as_real = c.get("partial") or problem.stored_as_real
    if shape.c_view == "c_nchw":
        return vw if problem.layout == CHANNELS_FIRST and c["pixels"] % vw == 0 and result_as_real else 0
    if shape.c_view == "c_nhwc":
        return vw if shape.N % vw == 0 and c["channels"] % vw == 0 and result_as_real else 0
    if shape.c_view == "c_matrix":
        if c["stored"] or c["accumulate"] or c.get("tap_major") or c["N"] % vw:
            return 0
        return vw
    return 0


def gemm(problem: Problem, shape: GemmShape, tile: dict, index: str, launches: int = 1) -> Gemm:
    """One GEMM (called ``launches`` times per call: im2col's batch chunks) with ``tile``."""
    if shape.a_packed and not (is_cpu_config(tile) and not is_dot_config(tile)):
        raise ValueError(f"A in the CPU GEMM's packed layout is read by CPU GEMM tiles only, not {dict(tile)}")
    if is_cpu_config(tile):
        if shape.c.get("finish"):
            raise ValueError(f"the CPU GEMM configuration {tile} sums split pieces in a second launch only")
        if problem.layout != CHANNELS_FIRST and shape.reads_activations:  # its row loads and stores assume channels-first activations
            raise ValueError(f"the CPU GEMM configuration {tile} reads channels_first activations only")
        return _cpu_gemm(problem, shape, tile, index, launches)
    geometry = problem.geometry
    gva, gvb = global_vectors(problem, shape, tile)
    store = vector_stores(problem, shape, tile)
    src = source(
        "gemm.mako", problem, index, writes_result=shape.writes_result, GEMMS=shape.count(geometry), GVA=gva, GVB=gvb,
        M=shape.M, N=shape.N, K=shape.K, KSPLIT=shape.ksplit or shape.K,
        a_view=shape.a_view, b_view=shape.b_view, c_view=shape.c_view,
        a_kfast=shape.a_kfast, b_nfast=shape.b_nfast, a=shape.a, b=shape.b,
        c={**shape.c, "vector": store} if store else shape.c,
        LPAD=local_padding(tile["VW"]), itemsize=problem.itemsize, **tile,
    )
    local = (tile["TN"] // tile["WN"], tile["TM"] // tile["WM"], 1)
    global_size = (
        rounded(shape.N, tile["TN"]) // tile["WN"],
        rounded(shape.M, tile["TM"]) // tile["WM"],
        shape.count(geometry) * shape.splits,
    )
    if not shape.c.get("finish"):
        return Gemm(src, global_size, local, vectors=(gva, gvb), store_align=store or 1)
    if shape.c.get("fence") not in ("mem_fence", "membar.gl"):
        raise ValueError(f"a one-launch split needs a device-scope fence (limits.handoff_fence_of), not {shape.c.get('fence')!r}")
    if shape.c["finish"] != shape.splits:
        raise ValueError(f"a one-launch split sums {shape.splits} pieces, not {shape.c['finish']}")
    finish = Finish(problem.spec.result, epilogue_args(problem) if shape.writes_result else None,
                    output_tiles(shape, tile["TM"], tile["TN"], shape.count(geometry)))
    return Gemm(src, global_size, local, vectors=(gva, gvb), store_align=store or 1, finish=finish)


def _b_row(problem: Problem, shape: GemmShape) -> tuple[bool, int]:
    """Whether B is contiguous along N (the CPU GEMM then reads its rows with vload), and the
    length of the contiguous runs: all of N for a column buffer, one image's pixels otherwise."""
    g = problem.geometry
    if shape.b_view == "b_columns":
        return True, shape.N
    if shape.b_view == "b_grad_output_cols":
        return True, g.out_pixels
    unit_stride = all(s == 1 for s in g.stride)
    if shape.b_view == "b_input_pointwise" and g.is_pointwise and unit_stride:
        return True, g.out_pixels
    if shape.b_view == "b_grad_output_gather" and g.is_pointwise and unit_stride:
        return True, g.in_pixels
    return False, shape.N


def vector_first(problem: Problem, shape: GemmShape) -> bool:
    """Whether the CPU GEMM without local memory is the first guess: not for an implicit im2col /
    col2im B without a row form, whose lane-by-lane index decoding costs more than staging tiles
    through local memory (measured on PoCL: docs/performance.md)."""
    implicit = shape.b_view in ("b_input_unfold", "b_input_unfold_t", "b_grad_output_gather")
    return not implicit or _b_row(problem, shape)[0]


# The CPU GEMM packs B into panels (gemm_cpu.mako's B_PACKED) where a k step of its walk down B's
# rows moves PAGE_BYTES or more, so that each step reads a line of a new page, over a walk of
# PACK_B_MIN_K steps or more, and A has PACK_B_MIN_ROWS rows or more.  A shorter walk's pages stay in
# the TLB; the copy reads and writes B once (8 bytes a float of B) where the GEMM does 2 M FLOPs a
# float of B, so with fewer rows it costs more than the page misses do.  Measured on PoCL (2-core AVX2
# EPYC, its L1 and L2 TLBs of 64 and 2048 pages), im2col's forward GEMM of 256 rows over a 32x32 image
# (column rows of 1024 pixels, padded by a line), each pass timed in panels against in place,
# interleaved: 0.98x the time at K = 576, 0.93x at 1152, 0.74x at 1728, 0.56x at 2304, 0.53x at 3456
# (in place it fell from 143 to 72 GFLOP/s, in panels 133-146 throughout); DCGAN's 4x4 stride-2
# 128 -> 256 forward (K = 2048) 0.58-0.60x; gemm1x1's forward and data gradient over 1024-1536
# channels at 32x32 0.71-0.81x, a 1x1 weight gradient over 1568 pixels 0.86x; weight gradients over
# 98-784 pixels and a data gradient over 64 output channels 1.04-1.19x (docs/perf/cpu_ab.py packb).
PAGE_BYTES = mmap.PAGESIZE
PACK_B_MIN_K = 1024
PACK_B_MIN_ROWS = 128


def b_row_bytes(problem: Problem, shape: GemmShape) -> int:
    """Bytes between two consecutive rows (k and k + 1) of B where the CPU GEMM reads its rows in
    place (_b_row), else 0."""
    g = problem.geometry
    if shape.b_view == "b_columns":
        return shape.b.get("LD", shape.N) * problem.itemsize  # a clc_real workspace
    steps = {"b_input_pointwise": g.in_pixels, "b_grad_output_cols": g.out_pixels, "b_grad_output_gather": g.out_pixels}
    return steps.get(shape.b_view, 0) * problem.storage_itemsize


def packs_b(problem: Problem, shape: GemmShape, tile: Mapping[str, Any]) -> bool:
    """Whether the CPU GEMM ``tile`` reads B through a packed copy (PAGE_BYTES, PACK_B_MIN_K,
    PACK_B_MIN_ROWS)."""
    if not is_cpu_config(tile) or is_dot_config(tile) or shape.swapped or shape.M < PACK_B_MIN_ROWS:
        return False
    if (shape.ksplit or shape.K) < PACK_B_MIN_K:  # one work-item's walk: a split piece's length
        return False
    b_row, run = _b_row(problem, shape)
    return b_row and run >= tile["VN"] and b_row_bytes(problem, shape) >= PAGE_BYTES


def _cpu_gemm(problem: Problem, shape: GemmShape, tile: dict, index: str, launches: int) -> Gemm:
    """The CPU GEMM (gemm_cpu.mako): one work-item per WM x VN block of C."""
    b_row, run = _b_row(problem, shape)
    if run < tile["VN"]:
        # the vector loads take a run of VN columns from at most two images' rows: images smaller
        # than a vector (2x2 pixels under 16 lanes) are assembled lane by lane instead
        b_row = False
    # B written in the packed panels by its producer (im2col's writers: shape.b["PANELS"]), read as
    # clc_pack_b's copy would be, without that launch
    written = bool(shape.b.get("PANELS"))
    pack_b = not written and packs_b(problem, shape, tile)
    panels = -(-shape.N // tile["VN"])
    gemms = shape.count(problem.geometry)
    pack_b_bytes = gemms * panels * tile["VN"] * shape.K * problem.itemsize if pack_b else 0
    if pack_b and problem.geometry.needs_int64(pack_b_bytes // problem.itemsize):
        index = "long"
    blocks = -(-shape.M // tile["WM"])
    lm = min(tile["LX"], blocks)  # work-items per work-group along M
    nb = min(tile.get("NB", 1), panels)  # no more blocks than N has
    packed = _packs_a(shape, {**tile, "NB": nb}, launches)
    pack_bytes = gemms * blocks * tile["WM"] * shape.K * problem.itemsize if packed else 0
    if packed and problem.geometry.needs_int64(pack_bytes // problem.itemsize):
        index = "long"
    src = source(
        "gemm_cpu.mako", problem, index, writes_result=shape.writes_result, GEMMS=gemms,
        M=shape.M, N=shape.N, K=shape.K, KSPLIT=shape.ksplit or shape.K,
        a_view=shape.a_view, b_view=shape.b_view, c_view=shape.c_view, a=shape.a, b=shape.b, c=shape.c,
        b_row=b_row, RUN=run, WM=tile["WM"], VN=tile["VN"], LM=lm, A_PACKED=packed, B_PACKED=pack_b or written,
        NB=nb, KC=tile.get("KC", CPU_DEFAULTS["KC"]),
    )
    columns = tile["VN"] * nb  # of one work-item
    global_size = (rounded(blocks, lm), -(-shape.N // columns), gemms * shape.splits)
    pack_b_size = (shape.K, panels, gemms) if pack_b else ()
    if not packed or shape.a_packed:
        return Gemm(src, global_size, (lm, 1, 1), pack_b_size=pack_b_size, pack_b_bytes=pack_b_bytes)
    return Gemm(src, global_size, (lm, 1, 1), packs="dy" if shape.a_view in PER_CHUNK_VIEWS else "w",
                pack_size=(shape.K, blocks, gemms), pack_bytes=pack_bytes, pack_b_size=pack_b_size,
                pack_b_bytes=pack_b_bytes)


def gemm_calls(problem: Problem, shape: GemmShape, tile: dict, index: str, a: str, b: str, c: str,
               bias: str | None = None) -> tuple[list[KernelCall], dict[str, int]]:
    """The calls of one GEMM (A's packing first, where it is packed) and their workspaces."""
    core = gemm(problem, shape, tile, index)
    if core.pack and shape.a_view == "a_matrix":
        core = replace(core, packs=a)  # a workspace of the plan's (Winograd's), not the call's weight
    calls = [core.packing()] if core.pack else []  # one launch: a per-chunk A is the whole batch's
    if shape.swapped:
        a, b = b, a
    return [*calls, *core.calls(a, b, c, bias)], core.workspaces


def tile_config(config: Mapping[str, Any]) -> dict:
    """The GEMM template's tile parameters from a config (VW, PIPE default as TILE_DEFAULTS)."""
    if is_dot_config(config):
        return {k: config[k] for k in DOT_KEYS}
    if is_cpu_config(config):
        return {k: config.get(k, CPU_DEFAULTS.get(k)) for k in CPU_KEYS}
    return {k: config.get(k, TILE_DEFAULTS.get(k)) for k in TILE_KEYS}


# -- the GEMM shapes of each pass ---------------------------------------------------------------


# Channels-last activations are contiguous along the channels.  The forward and the data gradient
# then run as the transposed GEMM (``swapped``): C^T = B^T A^T, rows the pixels and columns the
# group's channels, with the contraction over (channel, tap) ordered tap-major, channel fastest.
# The tile loads of the activation walk its channels and a work-item's stores are consecutive
# channels, where the channels-first GEMM's would step a channel count.  The weight gradient keeps
# its rows (output channels, read channel-fast from dy) and orders its columns (input channel, tap)
# tap-major (``tap_major`` in the view dicts); its C store puts each value back at its (channel,
# tap) place, so dw and split-K partials keep the canonical layout.  (On an H200 the pixel-fast
# loads of channels-last ran 1.3-1.8x slower.)
IMPLICIT_INPUT_VIEWS = {"b_input_unfold": "a_input_unfold", "b_input_pointwise": "a_input_pointwise"}


def forward_shape(g: ConvGeometry, b_view: str, chunk_batch: int | None = None,
                  layout: str = CHANNELS_FIRST) -> GemmShape:
    """y[b][g*CO + m][po] = sum_k W[g][m][k] * B[k][(b, po)]; channels-last (an implicit B), its
    transpose y[(b, po)][g*CO + n] = sum_k B^T[(b, po)][k] * W^T[g][k][n]."""
    K = g.cin_per_group * (1 if b_view == "b_input_pointwise" else g.kernel_volume)
    batch = chunk_batch or g.batch
    N = batch * g.out_pixels
    if layout != CHANNELS_FIRST and b_view in IMPLICIT_INPUT_VIEWS:  # a column buffer is channels-first
        return GemmShape(
            M=N, N=g.cout_per_group, K=K, a_view=IMPLICIT_INPUT_VIEWS[b_view], b_view="b_weight_t", c_view="c_nhwc",
            a_kfast=True, b_nfast=False, a={}, b={},
            c={"N": g.cout_per_group, "channels": g.out_channels, "pixels": g.out_pixels}, swapped=True,
        )
    return GemmShape(
        M=g.cout_per_group, N=N, K=K,
        a_view="a_weight", b_view=b_view, c_view="c_nchw", a_kfast=True, b_nfast=True,
        a={}, b={"K": K, "N": N}, c={"M": g.cout_per_group, "channels": g.out_channels,
                                       "pixels": g.out_pixels},
    )


def backward_data_shape(g: ConvGeometry, layout: str = CHANNELS_FIRST) -> GemmShape:
    """dx[b][g*CI + m][pi] = sum_(co,tap) W[g*CO+co][m][tap] * dy-gathered[(co,tap)][(b, pi)];
    channels-last, its transpose over (tap, co)."""
    K = g.cout_per_group * g.kernel_volume
    N = g.batch * g.in_pixels
    if layout != CHANNELS_FIRST:
        return GemmShape(
            M=N, N=g.cin_per_group, K=K, a_view="a_grad_output_gather", b_view="b_weight_bwd_data", c_view="c_nhwc",
            a_kfast=True, b_nfast=True, a={}, b={},  # the weight's input channels are KV apart, its taps 1
            c={"N": g.cin_per_group, "channels": g.in_channels, "pixels": g.in_pixels}, swapped=True,
        )
    return GemmShape(
        M=g.cin_per_group, N=N, K=K,
        a_view="a_weight_bwd_data", b_view="b_grad_output_gather", c_view="c_nchw",
        a_kfast=True, b_nfast=True, a={}, b={},
        c={"M": g.cin_per_group, "channels": g.in_channels, "pixels": g.in_pixels},
    )


# The implicit GEMM's operands by pass: (A, B, C, bias) (implicit_gemm's; split-K's A and B)
IMPLICIT_ROLES = {"forward": ("w", "x", "y", "bias"), "backward_data": ("w", "dy", "dx", "bias"),
                  "backward_weight": ("dy", "x", "dw", None)}


def implicit_shape(problem: Problem) -> GemmShape:
    """The pass as one GEMM whose tile loads do the im2col / col2im addressing (implicit_gemm's;
    split-K cuts its contraction)."""
    g = problem.geometry
    if problem.pass_ == "forward":
        return forward_shape(g, "b_input_unfold", layout=problem.layout)
    if problem.pass_ == "backward_data":
        return backward_data_shape(g, problem.layout)
    return weight_shape(g, "b_input_unfold_t", layout=problem.layout)


def pointwise_data_shape(g: ConvGeometry) -> GemmShape:
    """The data gradient of a 1x1 stride-1 layer without padding (channels-first) as the plain GEMM
    it is: dx[b][g*CI + m][p] = sum_co W[g*CO + co][m] * dy[b][g*CO + co][p], the transposed weight
    and dy read in place as matrices (both in aligned vectors where the pixels allow), where the
    implicit GEMM's gather view (backward_data_shape) decodes a source pixel per element of dy and
    reads it in scalars.  On an H200 im2col, running this GEMM into a column buffer and copying it
    to dx, ran such data gradients in 0.64-0.83x the gather's time (docs/performance.md)."""
    return GemmShape(
        M=g.cin_per_group, N=g.batch * g.in_pixels, K=g.cout_per_group,
        a_view="a_weight_t", b_view="b_grad_output_cols", c_view="c_nchw", a_kfast=False, b_nfast=True,
        a={}, b={}, c={"M": g.cin_per_group, "channels": g.in_channels, "pixels": g.in_pixels},
    )


def strided_pointwise_data_shape(g: ConvGeometry) -> GemmShape:
    """The data gradient of a strided 1x1 layer without padding (channels-first): dx at the stride
    grid = W^T dy over the output pixels alone, zeros between (c_nchw_scatter).  The gather view
    of ``backward_data_shape`` would run the GEMM over every input pixel, s^2 - 1 of every s^2 of
    them sums of stride holes."""
    return GemmShape(
        M=g.cin_per_group, N=g.batch_out_pixels, K=g.cout_per_group,
        a_view="a_weight_bwd_data", b_view="b_grad_output_cols", c_view="c_nchw_scatter",
        a_kfast=False, b_nfast=True, a={}, b={},  # one tap: the weight's input channels are contiguous
        c={"M": g.cin_per_group},
    )


def weight_shape(g: ConvGeometry, b_view: str, ksplit: int = 0, chunk_batch: int | None = None,
                 accumulate: bool = False, layout: str = CHANNELS_FIRST) -> GemmShape:
    """dw[g*CO + m][n] = sum_(b, po) dy[b][g*CO+m][po] * B[(b, po)][n].  A split contraction
    (``ksplit``) writes its pieces' partials into a clc_real workspace, not dw."""
    N = g.cin_per_group * (1 if b_view == "b_input_pointwise_t" else g.kernel_volume)
    K = (chunk_batch or g.batch) * g.out_pixels
    # channels-last, dy's rows (A: output channels) and the input's columns (B) are the fast indexes
    last = layout != CHANNELS_FIRST and b_view in ("b_input_unfold_t", "b_input_pointwise_t")
    return GemmShape(
        M=g.cout_per_group, N=N, K=K,
        a_view="a_grad_output_rows", b_view=b_view, c_view="c_matrix", a_kfast=not last, b_nfast=last,
        a={}, b={"K": K, "N": N, "tap_major": last},
        c={"M": g.cout_per_group, "N": N, "accumulate": accumulate, "stored": not ksplit, "tap_major": last},
        ksplit=ksplit,
    )


def largest_chunk(batch: int, bytes_per_image: int, limit: int) -> int:
    """Most images per launch whose column buffer fits ``limit`` and that divide the batch evenly
    (so every launch reuses one binary); 0 if not even one image fits."""
    best = 0
    for nb in range(1, batch + 1):
        if batch % nb == 0 and nb * bytes_per_image <= limit:
            best = nb
    return best
