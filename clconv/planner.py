"""Planner: for a problem, choose the algorithm and tile configuration, prepare its runner, and
fall back past anything that fails to build or to launch.

``algorithm='auto'`` looks up the tuning database; on a miss it takes the heuristic order's first
candidate that builds (one build), or, with ``CLCONV_TUNE=1`` or through :func:`tune`, measures
every serving (algorithm, config) candidate; it remembers the choice, and falls back past any
candidate that fails to build or launch.
A named algorithm never falls back: its failure is the caller's to see.

Preparing a candidate is the pipeline: algorithm -> :class:`~clconv.plan.Plan` ->
templates.render_plan -> builder.build_kernels -> :class:`~clconv.runtime.Runner`.
"""

from __future__ import annotations

import atexit
import logging
import queue as queues
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, Hashable, Iterator

import pyopencl as cl

from . import interim, limits, settings, templates, tuning
from .algorithms import REGISTRY, Algorithm, algorithms
from .algorithms.gemm import GPU_TILES, is_dot_config
from .algorithms.reduce import bias_gradient_plan
from .algorithms.direct import (
    BLOCK_COB, FORWARD_FEW_OUTPUTS, channels_tiles_before_columns, channels_tiles_first, cpu_tiny, few_outputs_first,
    forward_blocks_first, taps_first, weight_blocks,
)
from .algorithms.direct import grouped_depthwise as _depthwise
from .algorithms.winograd import Winograd
from .builder import BuildError, NotCached, build_kernels, cached_only
from .caches import Cache
from .device import is_gpu
from .plan import CHANNELS_FIRST, Plan, Problem
from .runtime import (
    LaunchError, Operand, Runner, profiling_queue, random_operands, release_workspaces, time_runner,
)

log = logging.getLogger("clconv.planner")

MAX_CONFIGS_PER_ALGORITHM = 4
MAX_CANDIDATES = 10  # of the heuristic's order; then one configuration of each other serving algorithm
TUNE_REPEATS = 5
# A candidate whose run takes more than this many times the fastest's so far is timed once, not
# TUNE_REPEATS times: the implicit GEMM's data gradient of ViT's 16x16 stride-16 patch embedding
# gathers 256 taps per input pixel of which one is real, 2.1-4.0 s a run against im2col's 0.74 ms,
# and its five candidates of that kind took 85 of that layer-pass's 91 s of tuning on an H200
# (docs/perf/h200-tune-fifth.json).  Runs of one candidate vary by a few percent; 3x cannot be noise.
TUNE_GIVE_UP_FACTOR = 3

# What can go wrong preparing or running a candidate, short of a bug: fall back past it.
CANDIDATE_FAILURES = (BuildError, LaunchError, cl.Error)

# Prepared runners hold their kernels and so their programs (about 2 MB each on PoCL, 0.4-0.8 MB on
# rusticl, measured: docs/portability.md): this bound and the program cache's are what a process keeps.  A
# choice holds only its runner's key, so an evicted runner is freed, and prepared again (from the
# program cache, or the disk) if its problem comes back.
_runners: Cache[Runner] = Cache("runners", maxsize=512)
_choices: Cache[tuple] = Cache("choices", maxsize=4096)


# -- naming and checking algorithms -----------------------------------------------------------------


def get_algorithm(name: object, pass_: str) -> Algorithm:
    """The registered algorithm ``name`` that serves ``pass_``; TypeError/ValueError naming the argument."""
    if not isinstance(name, str):
        raise TypeError(f"algorithm must be a string, got {name!r}")
    algorithm = REGISTRY.get(name)
    if algorithm is None or pass_ not in algorithm.passes:
        raise ValueError(f"algorithm must be 'auto' or one of {algorithms(pass_)} for this pass, got {name!r}")
    return algorithm


def check_algorithm(name: object, pass_: str) -> None:
    """Validate an ``algorithm=`` argument ('auto' or a name serving ``pass_``)."""
    if name != "auto":
        get_algorithm(name, pass_)


def check_serves(algorithm: Algorithm, problem: Problem, device: cl.Device) -> None:
    """Raise ValueError if ``algorithm`` declines ``problem``.  An empty batch runs no kernel (ops
    returns its result without planning), but a named algorithm must still serve the layer, and
    algorithms size their tiles by the batch: it is asked about the same layer with one image."""
    asked = problem if problem.geometry.batch else replace(problem, geometry=problem.geometry.with_batch(1))
    reason = algorithm.decline_reason(asked, device)
    if reason is not None:
        raise ValueError(
            f"algorithm {algorithm.name!r} cannot run the {problem.pass_} pass of {problem.geometry.tag()}: {reason}"
        )


def label(algorithm: Algorithm, config: dict) -> str:
    """``name key=value ...``: how a candidate is named in logs and in the tuning database."""
    return algorithm.name + "".join(f" {k}={v}" for k, v in sorted(config.items()))


# -- the heuristic -----------------------------------------------------------------------------------


def heuristic_order(problem: Problem, device: cl.Device) -> list[str]:
    """Algorithms in the order to try without measuring (best guess first)."""
    g = problem.geometry
    if not is_gpu(device):
        return _cpu_heuristic_order(problem, device)
    order = []
    if (forward_blocks_first(problem) or few_outputs_first(problem, device) or _narrow_forward(problem, device)
            or _narrow_data_gradient(problem)):
        # a short contraction over a few tens of output channels (a network's first layer): direct's
        # blocks of output channels x rows (direct.forward_blocks_first); a handful of output
        # channels (an output layer), which leave a GEMM tile's rows empty: its strips
        # (direct.few_outputs_first), and fewer than a tile's rows where Winograd does not serve
        # (_narrow_forward); all ahead of split-K.  The data gradient of a layer of a few channels
        # both ways: its gather (_narrow_data_gradient)
        order.append("direct")
    if (_small_forward_to_splitk(problem) or _unfilled_pointwise_to_splitk(problem, device)
            or (_unfilled_forward_to_splitk(problem, device) and not _winograd_pays(problem, device))):
        order.append("splitk")
    blocks = _weight_blocks_first(problem)
    if (blocks and g.cout_per_group < WEIGHT_BLOCK_ROWS and _blocks_reuse(problem)
            and not _winograd_before_blocks(problem, device)) or _short_weight_gradient(problem) \
            or _narrow_weight_gradient(problem) or _small_depthwise_weight_gradient(problem):
        # a weight gradient with fewer output channels (per group) than the smallest GEMM tile's
        # rows leaves most of split-K's and Winograd's tiles empty, where direct's blocks keep every
        # (output, input channel, tap) sum of a block in registers over a slice of batch x pixels.
        # On an H200 over 15 grouped layers (4-16 channels a group, 1D/2D/3D, strided, batch 1-32)
        # they ran in 0.12-0.38x the other algorithms' best kernel time and 0.05-0.25x cuDNN's
        # (channels-last 0.08-0.79x the others'; docs/perf/h200-grouped-candidates*.json).  One
        # group is the same GEMM: in the H200 tuning runs of 2026-12-03 (docs/perf/heuristic_check.py)
        # they ran ungrouped weight gradients of 16-24 output channels (1x1 32 -> 16 at 112x112, 3x3
        # 24 -> 24, 3x3x3 16 -> 16) in 0.44-0.70x split-K's time, the best candidate on each; a
        # 5x5 16 -> 32 in 0.95x (Winograd, too few channel pairs for its rule, was best there).
        # A short, small weight gradient too (_short_weight_gradient), and one whose GEMM has fewer
        # columns than a tile's (_narrow_weight_gradient)
        order.append("direct")
    if _winograd_pays(problem, device):
        # 2.25-4x fewer multiplies (2.8-4.6x for 5x5): tuning picks it for 3x3 and 5x5 stride-1
        # layers, dilated or not, from 32 channels (_winograd_pays), also where few tiles leave the
        # device part idle (7x7 at batch 8: 3x faster than implicit_gemm).  Its weight gradient ran
        # 1.2-2.5x faster than split-K's on batches of 8-64, and F(4x4, 3x3) 1.1-1.6x faster again
        # where its GEMMs stay large (docs/performance.md)
        order.append("winograd")
    if blocks and weight_blocks(problem)[0][0] >= BLOCK_COB and not _full_weight_gemm(problem):
        # a full tile's rows (32 a group): after Winograd, which won at batch 32 (7x7: 0.84x the
        # blocks' time), before the GEMMs (batch 8: 0.56x implicit_gemm's; batch 1: 1.07x); where
        # a block holds all BLOCK_COB output channels (kernels of up to 16 taps): a 3x3x3 kernel's
        # blocks of 4 ran 3D U-Net's 32 -> 32 at 64^3 in 2.07x split-K's time, 5x5 kernels' 1.6-2.2x
        # on two layers and 0.95x on a third (Winograd first on all three;
        # docs/perf/h200-tune-closing-holdout.json, heuristic_check.py); not where split-K's
        # tiles are full both ways over a long contraction (_full_weight_gemm)
        order.append("direct")
    depthwise = _depthwise(g)
    if problem.pass_ == "backward_weight" and not depthwise:
        # the weight gradient's GEMM is small (C_out x C_in*taps) with a long contraction: without
        # a split it runs a handful of work-groups (measured 15x slower on an H200 for a 1x1 layer)
        order.append("splitk")
    if _strided_pointwise_data_to_columns(problem):
        order.append("im2col")
    if g.is_pointwise:
        order.append("gemm1x1")
    if depthwise and problem.pass_ == "backward_weight":
        order.append("depthwise")
    if depthwise or g.reduction_length < 8 or (g.groups > 1 and _gemm_rows(problem) < FEW_ROWS):
        # grouped layers with a few channels per group (ResNeXt's 8 at 32 groups) give every GEMM
        # a handful of rows under a tile of at least 32: `direct` ran ResNeXt-50's 3x3 28x28 forward
        # and data gradient in 0.38x and 0.51x implicit_gemm's and im2col's time on an H200
        order.append("direct")
    if depthwise:
        order.append("depthwise_rows")  # a row per work-item: made for CPUs, measured here too
    small_image = g.in_pixels <= 256 and g.cout_per_group > COLUMNS_MIN_CONTRACTION
    if problem.pass_ == "backward_data" and (max(g.stride) > 1 or small_image or g.cin_per_group <= FEW_ROWS
                                              or g.cout_per_group * g.kernel_volume >= LONG_GATHER):
        # the implicit gather reads mostly stride holes, and on small images its per-element index
        # decoding dominates; a GEMM into columns and col2im wins (measured on an H200:
        # docs/performance.md), unless that GEMM's contraction, the output channels a group, is
        # two of a tile's steps or fewer (COLUMNS_MIN_CONTRACTION).  The implicit GEMM's rows are
        # the input channels: a few of them leave most of a tile's rows empty, where im2col's GEMM
        # has channels x taps rows (a 3-channel 3x3 layer: 0.028 against 0.092 ms; 16 channels, half
        # a 32-row tile: SqueezeNet's 3x3 16 -> 64 at 55x55 0.064 against 0.149, a 3x3x3 0.39 against
        # 0.44; 24 lost, 1.28x), even where those are fewer than FEW_ROWS (SuperPoint's one-channel
        # 3x3 at 240x320, batch 1: 9 rows against 1, 0.029 against 0.171 ms on an H100).  Its
        # contraction (output channels x taps) decodes a tap and a source pixel per element: from
        # LONG_GATHER on, im2col's plain GEMM over the output channels pays for its column buffer
        order.append("im2col")
    if _wide_short_weight_gradient(problem, device) or _wide_forward(problem):
        order.append("im2col")
    order += ["implicit_gemm", "im2col", "direct"]
    return list(dict.fromkeys(order))


# The output channels a group from which a weight gradient too short for split-K's pieces takes
# im2col before the implicit GEMM (_wide_short_weight_gradient)
WIDE_WEIGHT_ROWS = 1024


def _wide_short_weight_gradient(problem: Problem, device: cl.Device) -> bool:
    """Whether a weight gradient that split-K declines (its contraction, batch x output pixels, too
    short for two pieces, or their partials over the workspace limit) has at least
    WIDE_WEIGHT_ROWS output channels a group: the implicit GEMM then
    gathers every element of the unfolded input (decoding a tap and a pixel) once per tile of rows,
    8-32 times over, where im2col decodes it once into its column buffer and the GEMM reads that
    plainly.  On an H200 (docs/perf/heuristic_check.py) im2col ran FCN's fc6 (7x7 512 -> 4096 on
    7x7 images, batch 8: a contraction of 8) in 0.53x the implicit GEMM's time and a batch-1 3x3
    1024 -> 1024 at 14x14 in 0.72x, and a batch-4 one at 7x7 in 0.88x; with 512-768 rows the
    implicit GEMM won (1.29-1.59x im2col's time: ViT's patch embedding, HiFi-GAN's upsampling, a
    batch-1 3x3 512 -> 512 at 7x7).  Written from those six (the fresh list's fc6 among them)."""
    splitk = REGISTRY.get("splitk")
    return (problem.pass_ == "backward_weight" and problem.geometry.cout_per_group >= WIDE_WEIGHT_ROWS
            and splitk is not None and splitk.decline_reason(problem, device) is not None)


# The output channels a group from which a forward with taps takes im2col before the implicit GEMM
# (_wide_forward)
WIDE_FORWARD_ROWS = 768


def _wide_forward(problem: Problem) -> bool:
    """Whether a forward of a kernel with taps (1x1 layers read their input in place: gemm1x1) has
    at least WIDE_FORWARD_ROWS output channels a group.  The implicit GEMM's tiles of 64-128 rows
    then gather every element of the unfolded input (decoding a tap and a source pixel) once per
    tile of rows, six times over and more, where im2col decodes it once into its column buffer and
    its GEMM reads that plainly: the forward's form of _wide_short_weight_gradient.  On an H200,
    over the stored tuning runs' forwards with the implicit GEMM first (docs/perf/heuristic_check.py),
    im2col ran all six of 768-1536 output channels in 0.74-0.91x the implicit GEMM's best time:
    the patch embeddings of SAM (16x16, 3 -> 1280), ViT (16x16, 3 -> 768), ConvMixer (7x7, 3 -> 768)
    and FourCastNet (8x8, 20 -> 768), FastSpeech's 1D k9 384 -> 1536 and CREPE's 1D k512 stride-4
    1 -> 1024; at 512 it split (0.83-1.16x over eight), at 384 and fewer mostly lost.  Written from
    the seventh list (docs/perf/h200-seventh-layers.txt: SAM, FourCastNet, CREPE) and the earlier
    runs.  Not for a contraction of one GEMM step or less (WIDE_FORWARD_MIN_CONTRACTION input
    channels x taps): the implicit GEMM gathers that one step per tile of rows, where im2col adds a
    launch and a buffer's round trip; DiT's 2x2 stride-2 patch embedding of 4 latent channels (a
    contraction of 16, 1152 output channels) ran im2col in 2.46x the implicit GEMM's time
    (docs/perf/gpu35/fresh-sixteenth.json, a list written before it was measured), as wav2vec 2.0's
    1 -> 512 k10 did in 1.51x."""
    g = problem.geometry
    return (problem.pass_ == "forward" and not g.is_pointwise and g.cout_per_group >= WIDE_FORWARD_ROWS
            and g.cin_per_group * g.kernel_volume > WIDE_FORWARD_MIN_CONTRACTION)


# A GPU tile's contraction step (gemm.GPU_TILES' TK, 16 in every tile): _wide_forward takes only
# longer contractions to im2col, _narrow_data_gradient only shorter ones to direct
GPU_TILE_STEP = max(tile[2] for tile in GPU_TILES)
WIDE_FORWARD_MIN_CONTRACTION = GPU_TILE_STEP


NARROW_FORWARD_CONTRACTION = 2048


def _narrow_forward(problem: Problem, device: cl.Device) -> bool:
    """Whether direct comes first for a forward with fewer output channels a group than the
    smallest GPU GEMM tile's rows (WEIGHT_BLOCK_ROWS), channels-first, with strips enough to fill
    the device (direct.few_outputs_first), a kernel with taps (gemm1x1 reads a 1x1 layer's input in
    place: 2.9x direct's strips' time on MobileNetV2's 1x1 32 -> 16) and where Winograd does not
    serve it: every implicit-GEMM tile's rows are partly empty, where direct's strips waste none.
    On an H200, over the 7 such forwards of the stored tuning runs (docs/perf/heuristic_check.py),
    direct ran in 0.61-1.01x the GEMMs' best time: V-Net's 5x5x5 16 -> 16 at 64^3 0.61x (strips), a
    3x3x3 16 -> 16 0.71x, a 5x5 13 -> 29 0.70x, RegNetY's 14 groups of 24 0.68x the implicit GEMM
    (blocks; Winograd, which its channel rule does not let serve there, 0.72x), a 3x3 24 -> 24 at
    56x56 1.01x and two stems of 3 -> 16 0.98x and 1.00x.  Up to the longest contraction measured
    (NARROW_FORWARD_CONTRACTION: V-Net's 16 channels x 125 taps), past which a GEMM's or split-K's
    longer reuse is unmeasured against direct's.  Written after the fresh list
    (docs/perf/h200-fresh-layers.txt, two of the seven) was measured."""
    g = problem.geometry
    return (not g.is_pointwise and not _depthwise(g) and g.cin_per_group * g.kernel_volume <= NARROW_FORWARD_CONTRACTION
            and few_outputs_first(problem, device, outputs=WEIGHT_BLOCK_ROWS - 1) and not _winograd_pays(problem, device))


def _narrow_data_gradient(problem: Problem) -> bool:
    """Whether a (not depthwise) data gradient has fewer output channels a group than one step of
    the GPU tiles' contraction (GPU_TILE_STEP) and at most FEW_ROWS input channels:
    im2col's column GEMM contracts over those output channels, most of every step padding, before
    col2im's pass; the implicit GEMM's rows are the input channels, most of every tile's empty; where
    direct's gather sums output channels x taps products per input element in one launch.  In the
    stored runs (docs/perf/heuristic_check.py) direct was the best candidate on all four such
    ungrouped layers, in 0.54-0.79x im2col's time: HybridSN's 7x3x3 1 -> 8 (0.62x), SlowFast's
    fast-path 1x3x3 8 -> 8 (0.54x; Winograd 1.15x direct's), MTCNN's 3x3 3 -> 10 on a VGA frame
    (0.73x) and EEGNet's 1x64 1 -> 8 (0.79x); grouped layers of 4-8 channels a group took direct
    already (the few-rows rule below)."""
    g = problem.geometry
    return (problem.pass_ == "backward_data" and not _depthwise(g) and g.cout_per_group < GPU_TILE_STEP
            and g.cin_per_group <= FEW_ROWS)


def _small_forward_to_splitk(problem: Problem) -> bool:
    """Whether split-K comes first for a forward on a GPU: a small one (SPLITK_FORWARD_FLOPS) with
    a long contraction (input channels x taps, from SPLITK_FORWARD_MIN_CONTRACTION).

    Its output (C_out x batch x pixels) is then a handful of GEMM tiles, each running the whole
    contraction: the device mostly idles, where split-K's pieces fill it and one more launch sums
    them through the epilogue.  Winograd, the choice there before, runs three launches of small
    GEMMs.  On an H200 (docs/perf/h200-splitk-result-passes.json: the forwards of 32 layers of four
    stress lists, every candidate timed with split-K's tiles and piece counts) split-K beat the
    others' best on all 10 forwards of 3x3 and 5x5 layers between 40 and 382 MFLOP with a
    contraction of 576 to 4608 (batch 1 at 7x7-24x24, batch 4-16 at 7x7-14x14): its first
    candidate 0.56-0.83x where timed (7), its best 0.55-0.67x on the other 3; from 604 MFLOP it ran
    1.05-2.8x (Winograd and the unsplit GEMMs fill the device there), and with a contraction of
    256-384 1.3-1.5x.  On 10 forwards written afterwards to judge the rule (3D, 1D, dilated,
    AlexNet's conv4 at batch 1, VGG-11's conv5 at batch 8; docs/perf/h200-splitk-forward.json) its
    first candidate ran 0.32-0.84x the others' best where timed (9; the tenth's best 0.94x).
    1x1 layers took this rule from the twenty-ninth session (a classifier head as a 1x1 convolution,
    2048 -> 1000 at 7x7, batch 1, ran split-K in 0.030 ms against gemm1x1's 0.109: 64 tiles of 32x32
    over the whole contraction; docs/perf/h100-tune-eleventh.json) to the thirty-fourth, which
    counts their tiles instead (_unfilled_pointwise_to_splitk).  Not measured, so left out: grouped
    layers and channels-last, and forwards under WINOGRAD_FORWARD_MIN_FLOPS (one implicit_gemm
    launch)."""
    g = problem.geometry
    # a few output channels (direct.FORWARD_FEW_OUTPUTS) leave a GEMM tile's rows empty however small
    # the forward: 3x3 512 -> 1 at 32x32, batch 1 (9 MFLOP), ran 43.7 us with split-K against the
    # implicit GEMM's 328.5 (cuDNN 61.3; docs/perf/h200-direct-blocks-outputs-holdout.json), where
    # direct's strips, too few to fill the device (direct.few_outputs_first), took 141.5
    low = 0 if g.cout_per_group <= FORWARD_FEW_OUTPUTS else SPLITK_FORWARD_FLOPS[0]
    # (a 1x1 layer's forward by its tiles instead: _unfilled_pointwise_to_splitk)
    return (problem.pass_ == "forward" and not g.is_pointwise and g.groups == 1 and problem.layout == CHANNELS_FIRST
            and g.reduction_length >= SPLITK_FORWARD_MIN_CONTRACTION and low <= g.flops <= SPLITK_FORWARD_FLOPS[1])


def _unfilled_tiles(rows: int, columns: int) -> int:
    """Tiles of UNFILLED_TILE x UNFILLED_TILE that cover a GEMM result of ``rows`` x ``columns``."""
    return -(-rows // UNFILLED_TILE) * -(-columns // UNFILLED_TILE)


# The share of the compute units a 1x1 layer's result may fill in tiles of UNFILLED_TILE and still go
# to split-K (_unfilled_pointwise_to_splitk): split-K's best against the others' ran 0.88x at 98 tiles
# and 0.96x at 104 on 132 units, 1.45x at 108 and 1.11x at 112 (1.03x at 64, a strided forward)
UNFILLED_POINTWISE_SHARE = 0.8


def _unfilled_pointwise_to_splitk(problem: Problem, device: cl.Device) -> bool:
    """Whether split-K comes first for a 1x1 layer's forward or data gradient on a GPU: one whose
    result is at most UNFILLED_POINTWISE_SHARE of the device's compute units in GEMM tiles of
    UNFILLED_TILE x UNFILLED_TILE, over a long contraction (the input channels of the forward, the
    output channels of the data gradient: SPLITK_FORWARD_MIN_CONTRACTION or more), any stride
    (before the strided 1x1 rule's im2col: _strided_pointwise_data_to_columns), one group,
    channels-first.  gemm1x1 and im2col
    run those few tiles over the whole contraction, most of the device idle; split-K's pieces fill
    it.  Counted in tiles rather than FLOPs: a classifier head at batch 1 is a matrix-vector
    product of a few MFLOP, a pyramid-pooling layer of 600 MFLOP still 40 tiles.

    Measured (H100 and H200 tuning runs, docs/perf/heuristic_check.py): the 34 such forwards and
    data gradients timed with split-K, from 2.5 to 770 MFLOP and 3 to 104 tiles on 132 compute
    units, ran split-K's best in 0.26-1.03x the other algorithms' best (1.03x: a strided forward
    of 64 tiles).  The rules before this one (split-K from 32 to 384 MFLOP, drafted from the H100's
    small 1x1 lists: docs/perf/h100-tune-pointwise-small.json, h100-tune-strided-small.json) had left
    to gemm1x1 MobileNetV3-Large's head at batch 1 (2.5 MFLOP: split-K 0.54x and 0.64x), MnasNet's
    batch-1 1152 -> 192 at 7x7 (22 MFLOP, 0.71x), UperNet's pyramid-pooling 2048 -> 512 on 6x6 at
    batch 8 (604 MFLOP, 0.48x) and LR-ASPP's 960 -> 128 at 14x14 (771 MFLOP, 98 tiles, 0.88x); the
    first and third from the twelfth list (docs/perf/h100-tune-twelfth.json), written before it was
    measured, which this rule was then written from.  Past the share (UNFILLED_POINTWISE_SHARE)
    the split lost: DETR's 2048 -> 256 input projection at 25x34, batch 2 (108 tiles), 1.45x
    gemm1x1's time; a strided 1024 -> 2048 data gradient at 14x14, batch 2 (112), 1.11x im2col's.
    """
    g = problem.geometry
    if not (problem.pass_ in ("forward", "backward_data") and g.is_pointwise and g.groups == 1
            and problem.layout == CHANNELS_FIRST):
        return False
    rows, contraction = ((g.out_channels, g.in_channels) if problem.pass_ == "forward"
                         else (g.in_channels, g.out_channels))
    pixels = g.batch * (g.out_pixels if problem.pass_ == "forward" else g.in_pixels)
    return (contraction >= SPLITK_FORWARD_MIN_CONTRACTION
            and _unfilled_tiles(rows, pixels) <= UNFILLED_POINTWISE_SHARE * limits.of(device).compute_units)


def _unfilled_forward_to_splitk(problem: Problem, device: cl.Device) -> bool:
    """Whether split-K comes first for a larger forward on a GPU: one whose output is fewer GEMM
    tiles of UNFILLED_TILE x UNFILLED_TILE than the device has compute units, over a long contraction
    (SPLITK_FORWARD_MIN_CONTRACTION), which no other algorithm cuts; where Winograd serves it, Winograd
    comes first (on 14 of 15 such 3x3 and 5x5 forwards of the H200 tuning runs timed with both it ran
    in 0.40-0.98x split-K's time, on one, 3x3 128 channels at 14x14, batch 8, 1.64x;
    docs/perf/heuristic_check.py).  HiFi-GAN's 1D k16 stride-8 upsampling layer
    (as the convolution it is the gradient of: 256 -> 512 channels over 4 x 100 outputs, a
    contraction of 4096, 56 tiles for 132 compute units) ran split-K in 0.092 ms against the implicit
    GEMM's 0.242 (docs/perf/h200-tune-closing-holdout.json)."""
    g = problem.geometry
    if not (problem.pass_ == "forward" and g.groups == 1 and g.kernel_volume > 1 and problem.layout == CHANNELS_FIRST
            and g.reduction_length >= SPLITK_FORWARD_MIN_CONTRACTION and g.flops > SPLITK_FORWARD_FLOPS[1]):
        return False
    return _unfilled_tiles(g.out_channels, g.batch_out_pixels) < limits.of(device).compute_units


# The square tile the unfilled rules count a result in (_unfilled_tiles: the middle of the GPU tiles)
UNFILLED_TILE = 64
SPLITK_FORWARD_FLOPS = (2**25, 384 << 20)
# The shortest contraction split-K won at was 576 (64 channels x 9 taps); it lost at 256-384, and at
# 512 on the Atari DQN's 4x4 stride-2 32 -> 64 layer at batch 32 (170 MFLOP: 27.3 us against the
# implicit GEMM's 25.0 in kernel time, docs/perf/h200-tune-seventh.json; in a stream of default calls
# its second launch cost more than that, 59 against 41 us a call on the H200's host)
SPLITK_FORWARD_MIN_CONTRACTION = 576


# Rows of a GEMM below which the smallest GPU tile (32 rows) is mostly empty.
FEW_ROWS = 16

# The fewest output channels a group (im2col's GEMM contraction) at which a small image's data
# gradient goes to im2col first on GPUs: on an H200 (docs/perf/heuristic_check.py) the implicit GEMM
# won every such data gradient of 32 output channels a group, 14x14 at batch 16-32 (DenseNet's 3x3
# 128 -> 32 growth layer: 0.020 against 0.025 ms; 16 groups of 32, ResNeXt's 32 groups of 32:
# 0.84x), im2col nearly all of 64 and more (0.11-0.89x the implicit GEMM's time on 2D layers; a 1D
# k3 layer of 128 lost, 1.17x).
COLUMNS_MIN_CONTRACTION = 32

# The data gradient's implicit contraction (output channels per group x taps) from which im2col
# comes before implicit_gemm on GPUs: over 21 data-gradient passes of H200 tuning runs
# (docs/perf/heuristic_check.py) im2col won from 896 (1x7 at 128 channels: 0.79x implicit_gemm's
# time; 5x5 at 48 and 96, 3x3 dilated at 256 and 512, 3x3x3 at 32: 0.37-0.93x) and implicit_gemm
# up to 576 (3x3 at 24-64 channels, 1D k3 at 128); 768 (1D k3 at 256) was a tie.  One miss: a
# 3x3x3 layer at 64 channels (1728), 1.12x implicit_gemm's time.  The bound was 768 until the
# later lists' data gradients between 576 and 768 all went to im2col when timed (twenty-third
# session): a 1D k5 at 128 channels (640: 0.89x), Wave-U-Net's 1D k15 at 48 (720: 0.66x), a 5x5
# at 29 (725: 0.48x).
LONG_GATHER = 640


def _strided_pointwise_data_to_columns(problem: Problem) -> bool:
    """Whether the data gradient of a strided 1x1 layer (channels-first) takes im2col before gemm1x1.

    Both run the same GEMM, W^T dy over the output pixels.  gemm1x1 stores it straight into dx
    (``c_nchw_scatter``: each value and the zeros of its stride block, s^2 stores a work-item, the
    lanes of a warp 2-4 columns and so 4-8 pixels apart); im2col stores the column buffer and
    col2im writes dx in a second, coalesced launch.  On an H200 (docs/perf/h200-tune-strided-1x1.json,
    9 layers: ResNet's projection shortcuts at batch 1-32, a stride-3 and a 1D layer) im2col's best
    tile ran in 0.63-0.98x gemm1x1's best on the 7 layers contracting over 128-2048 output channels;
    gemm1x1's best in 0.74x and 0.87x im2col's on two 2D layers contracting over 64 and 128, but
    with a 32 x 64 tile that gemm_tiles does not put first there.  Each algorithm's first tile, as
    the heuristic runs them: gemm1x1 0.97-1.72x im2col's time, 1.31x over the 9, so im2col comes
    first for all.  Channels-last keeps its order (unmeasured)."""
    g = problem.geometry
    return (problem.pass_ == "backward_data" and g.is_pointwise and max(g.stride) > 1
            and problem.layout == CHANNELS_FIRST)


# Output channels per group of a weight gradient that direct's blocks serve first on GPUs below
# this (the smallest GEMM tile's rows: every split-K and Winograd tile has empty rows), and up to
# it after Winograd.
WEIGHT_BLOCK_ROWS = 32


# The products per weight (batch x output pixels) and the direct FLOPs of a weight gradient that
# direct's blocks serve first on GPUs whatever its channels (_short_weight_gradient).
SHORT_WEIGHT_PRODUCTS = (192, 1024)


def _short_weight_gradient(problem: Problem) -> bool:
    """Whether a weight gradient sums few products per weight (SHORT_WEIGHT_PRODUCTS)
    and has little work (at most WEIGHT_GRADIENT_MIN_FLOPS, under which Winograd does not pay), and
    a channel block of direct's fits its registers.  Split-K has little contraction to cut there
    and the GEMMs' tiles few work-groups, where direct's blocks give every weight element's sum a
    work-item.  On an H200 (docs/perf/heuristic_check.py) they ran in 0.45x split-K's time on a 5x5
    64 -> 64 layer at 12x12, batch 4 (576 products) and in 0.72-0.78x implicit_gemm's on VGG-11's
    7x7 layers at batch 8 (392 products, 160-320 channels); with 49 products (batch 1 at 7x7) they
    lost, 1.5-2.7x, at 196 (batch 1 at 14x14) won at 128 channels (0.52x; the lower bound was 256
    before the list below showed it) and tied at 256 (1.05x), and with more work (0.64-10 GFLOP
    at 392-800 products) lost 1.4-4x.  A list written after this rule
    (docs/perf/h200-short-wgrad-layers.txt: 8 layers of 512-1024 products, 29-382 MFLOP, 1D, 1x1,
    3x3 and 5x5, batch 1-16) ran them in 0.34-0.92x the other algorithms' best, all 8 its best.
    Depthwise layers too: EfficientNet's batch-1 5x5 stride-2 depthwise layer (196 products) ran
    its one-channel blocks in 0.31x the depthwise kernel's time (docs/perf/h200-tune-closing.json),
    where with 4000-100352 products (a batch-8 1D k31, MobileNetV2's batch-32 3x3) the depthwise
    kernel was the best."""
    g = problem.geometry
    low, high = SHORT_WEIGHT_PRODUCTS
    return (low <= g.batch_out_pixels <= high and g.flops <= WEIGHT_GRADIENT_MIN_FLOPS
            and problem.pass_ == "backward_weight" and not _full_pointwise_weights(problem)
            and bool(weight_blocks(problem)))


# The weights a group (output x input channels) of a 1x1 weight gradient above which direct's blocks
# do not come first however short its sum (_full_pointwise_weights).
POINTWISE_BLOCK_WEIGHTS = 1 << 17


def _full_pointwise_weights(problem: Problem) -> bool:
    """Whether a 1x1 weight gradient has more than POINTWISE_BLOCK_WEIGHTS weights a group.  With
    one tap, direct's blocks reuse no loaded value across taps (a block of cib x cob sums loads
    cib + cob values a product), and with that many weights the GEMMs' tiles are full both ways.
    On an H100/H200 (docs/perf/heuristic_check.py) the blocks ran the short 1x1 weight gradients of
    more weights in 1.17-1.52x the best (ResNet-50's 1024 -> 256 at batch 1 and 256 -> 1024 at
    batch 2, a batch-1 stride-2 512 -> 1024, EfficientNet-B0's 320 -> 1280 head; gemm1x1's tiles
    were best on all four), and those of up to 2^17 weights in 1.00x (DenseNet-121's 1024 -> 128,
    a batch-1 stride-2 256 -> 512, 256 -> 256 at 16x16, BiFPN's 160, PointNet's 64 -> 128).  The
    miss that led to this look: the twenty-first list's batch-5 1024 -> 256 at 14x14, blocks 1.58x
    split-K's time (docs/perf/gpu39/fresh-unseen21.json)."""
    g = problem.geometry
    return g.is_pointwise and g.cout_per_group * g.cin_per_group > POINTWISE_BLOCK_WEIGHTS


# Depthwise weight gradients of at most this many products per weight (batch x output pixels) and
# taps take direct before the depthwise kernel (_small_depthwise_weight_gradient).
SMALL_DEPTHWISE_PRODUCTS = 6400
SMALL_DEPTHWISE_TAPS = 25


def _small_depthwise_weight_gradient(problem: Problem) -> bool:
    """Whether a depthwise weight gradient sums so few products per weight (SMALL_DEPTHWISE_PRODUCTS)
    over at most SMALL_DEPTHWISE_TAPS taps that the depthwise kernel's slices are too short to pay for
    its second launch (the fixed-order sum of its slices), where direct runs in one.  Over the 51
    stored depthwise weight gradients timed with both (docs/perf/heuristic_check.py; H200 and H100)
    direct ran 9 of the 10 such in 0.33-0.99x the depthwise kernel's time (GhostNetV2's 1x5 0.53x,
    FastDepth's 5x5 at 7x7 0.50x, GhostNet's cheap 3x3 0.78x, StripedHyena's batch-1 1D k3 0.88x,
    MobileNetV4's stride-2 5x5 0.93x) and one in 1.02x (EfficientNet's stride-2 5x5 at 14x14, its
    first configuration 1.12x); from 8000 products the depthwise kernel won most (ContextNet's
    1D k5 0.82x, Conv-TasNet's 1D k3 0.76x), and with more taps at 4000 (1D k31: 0.56-0.66x),
    which the tap bound keeps.  A first form of the rule, at most 29 MFLOP, ran the nineteenth
    list's MicroNet 1x3 (50176 products, 29 MFLOP) in 1.32x the depthwise kernel's time: FLOPs do
    not tell the slices' length."""
    g = problem.geometry
    return (problem.pass_ == "backward_weight" and _depthwise(g) and g.batch_out_pixels <= SMALL_DEPTHWISE_PRODUCTS
            and g.kernel_volume <= SMALL_DEPTHWISE_TAPS and bool(weight_blocks(problem)))


def _narrow_weight_gradient(problem: Problem) -> bool:
    """Whether a (not depthwise) weight gradient's GEMM has fewer columns (input channels per group x
    taps) than the smallest GPU tile's (WEIGHT_BLOCK_ROWS), and a channel block of direct's fits its
    registers: most of every split-K tile's columns are empty, where direct's blocks keep a block's
    sums in registers.  On an H200 (docs/perf/h200-tune-closing.json) they ran wav2vec 2.0's 1 -> 512
    k10 stride-5 audio layer in 0.61x split-K's time (10 columns) and MobileNetV2's batch-1 1x1
    24 -> 144 expansion at 56x56 in 0.46x (24 columns)."""
    g = problem.geometry
    return g.cin_per_group * g.kernel_volume < WEIGHT_BLOCK_ROWS and _weight_blocks_serve(problem)


def _winograd_before_blocks(problem: Problem, device: cl.Device) -> bool:
    """Whether a weight gradient of fewer output channels a group than WEIGHT_BLOCK_ROWS takes
    Winograd before direct's blocks: where Winograd pays (_winograd_pays) and both channel counts
    a group are at least FEW_CHANNELS_WEIGHT_MINIMUM, or for a grouped layer
    GROUPED_BEFORE_BLOCKS_MINIMUM.  On an H200 (docs/perf/heuristic_check.py) Winograd ran such
    gradients in 0.34-0.69x the blocks' time: Res2Net's 26 x 26 channels, ESPNet's 20 x 20, ESPCN's
    64 -> 12, RegNetY's 14 groups of 24 x 24; ResNeXt's 32 groups of 16 and of 8 ran the blocks in
    0.16-0.39x Winograd's time at batch 8-32 (docs/perf/h200-grouped-tune.json), where all groups'
    blocks run side by side."""
    g = problem.geometry
    minimum = FEW_CHANNELS_WEIGHT_MINIMUM if g.groups == 1 else GROUPED_BEFORE_BLOCKS_MINIMUM
    return min(g.cin_per_group, g.cout_per_group) >= minimum and _winograd_pays(problem, device)


# The channels a group (each way) from which a grouped weight gradient takes Winograd before
# direct's blocks (_winograd_before_blocks): RegNetY's 24 won, ResNeXt's 16 lost
GROUPED_BEFORE_BLOCKS_MINIMUM = 20


def _weight_blocks_first(problem: Problem) -> bool:
    """Whether a (not depthwise) weight gradient has at most WEIGHT_BLOCK_ROWS output channels per
    group and a channel block of direct's fits its registers (_weight_blocks_serve)."""
    return problem.geometry.cout_per_group <= WEIGHT_BLOCK_ROWS and _weight_blocks_serve(problem)


def _full_weight_gemm(problem: Problem) -> bool:
    """Whether a weight gradient's GEMM fills split-K's tiles both ways (WEIGHT_BLOCK_ROWS output
    channels a group or more, as many input channels x taps) over a contraction (batch x output
    pixels) longer than ONE_CHANNEL_BLOCKS_MAX_CONTRACTION, which its pieces then cut.  There
    direct's blocks of a full tile's 32 output channels lost on every such stored layer-pass
    (docs/perf/heuristic_check.py, H100 and H200): SqueezeNext's 1x3 32 -> 32 at 56x56, batch 32
    (1.82x split-K's time) and UniVNet's 1D k3 32 -> 32 (1.75x), both from lists written before
    they were measured (docs/perf/gpu35/fresh-{fifteenth,seventeenth}.json), LeViT's 3x3 stride-2
    16 -> 32 (1.41x), CondenseNet's grouped 1x1 (1.37x), ENet's dilated 3x3 and 5x1 (1.30x,
    1.23x), HRNet's 3x3 (1.23x), a chess policy 1x1 (1.09x), IMPALA's residual 3x3 (1.08x).  A
    first layer's few columns (VGG's 3 x 9 taps: 0.73x) and a short contraction (DenseNet-121's
    growth 3x3 at 14x14, batch 16, 3136: 0.78x; ResNeXt's 32 groups of 32 at 7x7, 392: 0.66x)
    keep the blocks."""
    g = problem.geometry
    return (problem.pass_ == "backward_weight" and g.cout_per_group >= WEIGHT_BLOCK_ROWS
            and g.cin_per_group * g.kernel_volume >= WEIGHT_BLOCK_ROWS
            and g.batch_out_pixels > ONE_CHANNEL_BLOCKS_MAX_CONTRACTION)


def _blocks_reuse(problem: Problem) -> bool:
    """Whether direct's weight-gradient blocks reuse their input values over several output
    channels, or the gradient is small (at most WEIGHT_GRADIENT_MIN_FLOPS).  A block of one output
    channel (a kernel of more than 64 taps fills its 128 sums alone) loads an input value for each
    FMA, where split-K's 8x8 blocks load one per four: on an H200 V-Net's 5x5x5 16 -> 16 at 64^3
    (16.8 GFLOP) ran 2.70x split-K's time in such blocks (docs/perf/h200-tune-fresh.json; this rule
    was written from it), where a small 5x5 13 -> 29 (72 MFLOP, blocks of one channel too) ran
    0.84x the GEMMs' best (docs/perf/h200-tune-closing-holdout.json) over a contraction (batch x
    pixels) of 3844: too short for split-K's pieces to fill the device.  With a long one they do:
    Fast-SCNN's 1x1 128 -> 19 classifier (159 MFLOP, 32768 pixels; 19 channels make blocks of one)
    ran its blocks in 2.07x split-K's time (docs/perf/h200-tune-fifth.json), so the small
    gradient's exception holds up to ONE_CHANNEL_BLOCKS_MAX_CONTRACTION."""
    g = problem.geometry
    return weight_blocks(problem)[0][0] > 1 or (g.flops <= WEIGHT_GRADIENT_MIN_FLOPS
                                                and g.batch_out_pixels <= ONE_CHANNEL_BLOCKS_MAX_CONTRACTION)


# The longest contraction (batch x output pixels) over which a small weight gradient takes direct's
# blocks of one output channel (_blocks_reuse): between the 3844 where they won and the 32768
# where split-K's pieces did
ONE_CHANNEL_BLOCKS_MAX_CONTRACTION = 8192


def _weight_blocks_serve(problem: Problem) -> bool:
    """Whether ``problem`` is a (not depthwise) weight gradient with a channel block of direct's
    that fits its registers (direct.weight_blocks)."""
    return (problem.pass_ == "backward_weight" and not _depthwise(problem.geometry)
            and bool(weight_blocks(problem)))


def _gemm_rows(problem: Problem) -> int:
    """Rows of the implicit GEMM of a pass: its output channels per group (the weight gradient's
    output is the weight, whose rows are the output channels too)."""
    g = problem.geometry
    return g.cin_per_group if problem.pass_ == "backward_data" else g.cout_per_group


def _winograd_pays(problem: Problem, device: cl.Device) -> bool:
    """Whether ``winograd`` serves ``problem`` with GEMMs large enough: enough channels per group
    (the input of the convolution it runs: dy's for the data gradient; for the weight gradient both
    counts, its GEMMs' rows and columns, and the channel pairs over the groups), and for the
    gradients enough work (direct FLOPs) and tiles to pay for its three launches and transforms.
    The same rules serve 3x3 and 5x5 kernels and any dilation (a dilated layer's tiles are its
    phases' together): measured on 27 such layer-passes of an H200, Winograd ran in 0.25-0.84x the
    other algorithms' best time wherever these rules put it first, against 0.45-0.84x for its 3x3
    undilated layers (docs/perf/h200-candidates-kernels.json and the re-tuned rows of the three
    lists; docs/performance.md).  And 7x7 kernels: on ten 7x7 layers written before they were
    measured, 28 of the 30 passes went to it, and tuning picked it on 27 of those (the 28th by 2%)
    (docs/perf/h200-tune-7x7.json).  Tiles mostly empty save nothing (Winograd.saving under
    WINOGRAD_MIN_SAVING) and stay off it."""
    winograd = _saving_winograd(problem, device)
    if winograd is None:
        return False
    g = problem.geometry
    cin, cout = ((g.cin_per_group, g.cout_per_group) if problem.pass_ == "forward"
                 else (g.cout_per_group, g.cin_per_group))
    # Channels-last, its transforms step a channel count between neighbouring work-items' pixels
    # (uncoalesced), which a longer contraction must pay for in the forward and data gradient: on
    # an H200 F(4x4, 3x3) lost to implicit_gemm at 64 channels (0.31 against 0.29 ms, 56x56; F(2x2)
    # 0.43 against 0.31) and won at 256 (14x14: 0.16 against 0.38); 128 is between, unmeasured.
    # The weight gradient at 64 channels ran in 0.65x split-K's time.  Channels-first, measured on
    # an H200 (docs/perf/heuristic_check.py): the forward and data gradient won from 32 channels
    # (VGG's 32 -> 64: 0.94x implicit_gemm's time; 8 groups of 32: 0.72x and 0.65x; a 5x5 32 -> 32:
    # 0.80x and 0.70x) and lost at 24 (1.95x), 16 (a 5x5 16 -> 32: 1.35x) and 8 per group
    # (ResNeXt's, to `direct`).  The weight gradient, contracting over the tiles into GEMMs of
    # channel pairs batched over the groups and the ALPHA^2 positions, won from 2048 channel pairs
    # (32 x 64 at one group, 8 x 8 at 32 groups: 0.65x and 0.73x split-K's) and lost at 576 (24 x 24,
    # 1.37x).  The taps count too: the direct sum's work per pixel is pairs x taps, Winograd's
    # transforms a channel count, so the minimum is of pairs x taps, 2048 x 9.  A 5x5 32 x 32 (1024
    # pairs, 25 taps) ran F(3x3, 5x5) in 0.52x split-K's time (F(2x2, 5x5): 1.05x), a 5x5 16 x 32
    # (512, under the minimum) in 0.83x
    channels_first = problem.layout == CHANNELS_FIRST
    weight_minimum, input_minimum = (8, 32) if channels_first else (64, 128)
    if channels_first and problem.pass_ == "forward" and g.kernel[1:] == (5, 5):
        # F(4x4, 5x5) saves 6.25x a direct sum's multiplies where a 3x3 kernel's best saves 4x, so a
        # 5x5 forward pays from fewer input channels: on an H100 (docs/perf/gpu37/fresh-f45.json)
        # GoogLeNet's 5x5 24 -> 64 at 14x14, batch 64 (0.96 GFLOP) ran in 0.80x the others' best
        # (0.053 against 0.066 ms) and its 16 -> 32 at 28x28 in 1.22x (F(3x3, 5x5) had lost there
        # by 1.35x on an H200); so from FEW_CHANNELS_INPUT_MINIMUM, between the two
        input_minimum = FEW_CHANNELS_INPUT_MINIMUM
    # Fewer channels than those minimums pay where the pass is large (FEW_CHANNELS_MIN_FLOPS): its
    # GEMMs are narrow, but there are many of them, over many tiles.  On an H200
    # (docs/perf/heuristic_check.py) Winograd ran Res2Net's 3x3 26 -> 26 at 56x56, batch 32
    # (1.2 GFLOP), in 0.57-0.65x the other algorithms' best on all three passes, ESPNet's dilated
    # 20 -> 20 (1.9 GFLOP) in 0.84x and 0.75x on the gradients (its forward 1.22x direct's best
    # strips, 0.62x the strips the heuristic chose), RegNetY's 14 groups of 24 (3.6 GFLOP) in 0.73x
    # and 0.46x on the forward and data gradient, ESPCN's weight gradient of 12 x 64 channels
    # (1.8 GFLOP) in 0.64x; where it lost, the passes were smaller: a 3x3 24 -> 24 at 56x56
    # (0.26 GFLOP, 1.2-1.4x), SqueezeNet's 16 -> 64 forward (0.89, 1.35x), a 37 x 53 weight
    # gradient (0.71, 1.23x), HarDNet's 14 x 48 (0.61, 1.16x), or had fewer channels (ResNeXt's
    # groups of 8 and 4: 1.2-10x at 0.9-1.9 GFLOP).  Written from the fourth list
    # (docs/perf/h200-fourth-layers.txt) and the fresh list's RegNetY layer.
    large = channels_first and g.flops >= FEW_CHANNELS_MIN_FLOPS
    wide = _wide_data_gradient(problem, winograd)  # False for the other passes
    if problem.pass_ == "backward_weight":
        pair_taps = g.groups * cin * cout * g.kernel_volume
        few_pairs = channels_first and pair_taps < WINOGRAD_MIN_PAIR_TAPS
        too_few = (min(cin, cout) < (FEW_CHANNELS_WEIGHT_MINIMUM if large else weight_minimum)
                   or (few_pairs and not large))
    else:
        # Its GEMMs have the implicit GEMM's rows (output channels), as empty, and a quarter of its
        # multiplies: ESPCN's 3x3 64 -> 12 at 128x128 ran 0.093 ms against the implicit GEMM's
        # 0.257 (docs/perf/h200-tune-closing-holdout.json); at most FORWARD_FEW_OUTPUTS go to
        # direct's strips or split-K (the data gradient's 12 -> 64 has too few input channels).
        # A wide data gradient (_wide_data_gradient) takes it from FEW_CHANNELS_DATA_MINIMUM of
        # dy's channels: its competitors are narrower still there, the implicit GEMM's rows the
        # input channels and im2col's contraction dy's channels
        minimum = (FEW_CHANNELS_DATA_MINIMUM if channels_first and wide and g.flops >= FEW_CHANNELS_DATA_MIN_FLOPS
                   else FEW_CHANNELS_INPUT_MINIMUM if large else input_minimum)
        too_few = cin < minimum or cout <= FORWARD_FEW_OUTPUTS
    if too_few:
        return False
    # The gradients need work enough.  The weight gradient contracts over the tiles and writes 16
    # or 36 products per weight; the data gradient competes with im2col's GEMM over the kernel's
    # taps, which fills the device where Winograd's GEMMs (the tiles as columns) are narrow.  On an
    # H200, counting the direct FLOPs of the pass: the weight gradient won from 0.69 GFLOP (VGG-11's
    # conv4_1 at batch 8: a tie) and lost up to 0.47 (its conv5: 1.5x implicit_gemm's time); the
    # data gradient won from 1.1 GFLOP (0.89x im2col's) and lost up to 0.80 (1.27x).  Above the
    # FLOPs the tiles count too.  The data gradient's GEMMs have them as columns: with the GEMM
    # core's vector loads (the runs of 2026-12-03) it won from 98 2x2 tiles (512 channels at 14x14,
    # batch 2: 0.92x im2col's time, where scalar loads had lost, 1.12x; 1024 at 16x16, batch 2, 128
    # tiles: 0.63x; batch 1 at 28x28, 196: 0.83x) and lost with 49 (batch 1 at 14x14: 3x3 at 1024
    # channels 1.12x, 5x5 at 256 1.29x), so from DATA_GRADIENT_MIN_TILES between the two.  The
    # weight gradient's contraction is the tiles: it lost with 49 (batch 1 at 14x14: 3x3 at 1024
    # channels 1.09x, 5x5 at 256 1.59x) and won from 98 (0.92x).  The forward wins at every size
    # measured (batch 1 at 7x7: 0.34x im2col's time; a batch-1 5x5 at 14x14: 0.25x)
    if problem.pass_ == "forward":
        # ...down to a floor: its three launches took 29.7-32.9 us of kernel time on an H200 for
        # every forward of 29-382 MFLOP measured (docs/perf/h200-tune-short-wgrad.json), where one
        # implicit_gemm launch ran a 29 MFLOP layer (3x3 32 -> 64 at 20x20, batch 2) in 15.4 us;
        # from 40 MFLOP Winograd beat the unsplit GEMMs on every one measured (0.38-0.89x the
        # others' best).  Split-K's pieces beat it on those with a long contraction
        # (_small_forward_to_splitk); with a short one, the one implicit_gemm launch kept winning
        # (85 MFLOP, 48 channels x 9 taps: 22 against 53 us; docs/perf/h200-splitk-forward.json)
        small = g.flops <= SPLITK_FORWARD_FLOPS[1]
        return g.flops >= WINOGRAD_FORWARD_MIN_FLOPS and not (small and g.reduction_length < SPLITK_FORWARD_MIN_CONTRACTION)
    if problem.pass_ == "backward_weight":
        return g.flops >= WEIGHT_GRADIENT_MIN_FLOPS and winograd.tiles(problem, 2) >= WEIGHT_GRADIENT_MIN_TILES
    tiles = winograd.tiles(problem, 2)
    return (g.flops >= DATA_GRADIENT_MIN_FLOPS and tiles >= DATA_GRADIENT_MIN_TILES) or wide


def _wide_data_gradient(problem: Problem, winograd: Winograd) -> bool:
    """Whether a data gradient between half DATA_GRADIENT_MIN_FLOPS and that has tiles enough to
    make Winograd's GEMMs wide: over the stored H200 runs (docs/perf/heuristic_check.py) every such
    data gradient with DATA_GRADIENT_WIDE_TILES 2x2 tiles or more ran Winograd in 0.80-0.96x the
    others' best (a batch-1 3x3 64 at 112x112, 0.92 GFLOP: 0.82x; GoogLeNet's 5x5 16 -> 32 at batch
    32: 0.80x; 37 -> 53 at 50x50, batch 8: 0.83x; a 3x3 16 -> 64 at 55x55: 0.91x; a dilated
    32-channel 64x64: 0.96x) and one tied (48 channels at 56x56: 1.01x); with fewer tiles they split
    (0.85x with 392, 1.08-1.24x with 98-784).  Such passes of 12-31 dy channels
    (FEW_CHANNELS_DATA_MINIMUM) ran it in 0.59-1.01x the others' best on all seven stored, on an
    H200 and an H100: PeleeNet's 3x3 16 -> 16 at 56x56, batch 64 0.59x, Tiramisu's 112 -> 16 0.73x,
    Res2Net's 26 0.65x, ESPNet's 20 0.84x, ESPCN's 64 -> 12 0.92x, HarDNet's 48 -> 14 1.01x; groups
    of 8 tied or lost (0.99x, 1.20x) and of 4 lost (2.4-2.9x).  HarDNet's, the smallest (0.61
    GFLOP), ran 1.15x the implicit GEMM's kernel time on an H100 and its three launches 1.5-1.8x the
    one launch's time in a stream of calls (0.072-0.087 against 0.046 ms): the fewer channels take
    it from FEW_CHANNELS_DATA_MIN_FLOPS (PeleeNet's 0.92 GFLOP ran 0.066 against im2col's 0.125
    ms, and 0.064 against 0.124 in a stream)."""
    g = problem.geometry
    return (problem.pass_ == "backward_data" and g.flops >= DATA_GRADIENT_MIN_FLOPS // 2
            and winograd.tiles(problem, 2) >= DATA_GRADIENT_WIDE_TILES)


# ``winograd`` on GPUs: the fewest channel pairs (groups x inputs x outputs per group) times taps of
# a weight gradient (2048 pairs of a 3x3 kernel), the fewest direct FLOPs of a pass, and the
# fewest 2x2 tiles of each gradient (``_winograd_pays``).
WINOGRAD_MIN_PAIR_TAPS = 2048 * 9
# ...and the fewest multiplies it saves (Winograd.saving: the direct sum's over its GEMMs'): FCN's
# fc6, a 7x7 kernel over a 7x7 input, has one output per 2x2 tile (0.77: more products than the
# direct sum); the stored runs' Winograd layers save 1.83 (DeepLab's dilated ASPP, phases of a few
# rows) and more, where it won
WINOGRAD_MIN_SAVING = 1.5
# ...and, channels-first, the direct FLOPs from which fewer channels pay (FEW_CHANNELS_INPUT_MINIMUM
# input channels of the convolution it runs, the forward's and the data gradient's; for the weight
# gradient FEW_CHANNELS_WEIGHT_MINIMUM of each, whatever the channel pairs)
FEW_CHANNELS_MIN_FLOPS = 2**30
FEW_CHANNELS_INPUT_MINIMUM = 20
FEW_CHANNELS_WEIGHT_MINIMUM = 12
FEW_CHANNELS_DATA_MINIMUM = 12
FEW_CHANNELS_DATA_MIN_FLOPS = 3 * 2**28  # 0.8 GFLOP: three quarters of DATA_GRADIENT_MIN_FLOPS
WEIGHT_GRADIENT_MIN_FLOPS = 2**29
WINOGRAD_FORWARD_MIN_FLOPS = 2**25
DATA_GRADIENT_MIN_FLOPS = 2**30
DATA_GRADIENT_MIN_TILES = 96
DATA_GRADIENT_WIDE_TILES = 2048
WEIGHT_GRADIENT_MIN_TILES = 64


def _cpu_heuristic_order(problem: Problem, device: cl.Device) -> list[str]:
    """CPU devices (PoCL): the GEMM without local memory (kernels/gemm_cpu.mako) reads B with
    vector loads only where B is contiguous along N: a column buffer, or the input or output
    gradient of a 1x1 stride-1 layer.  So im2col first, gemm1x1 for those 1x1 layers' forward and
    data gradient, no split-K (the cores are few: a GEMM has work-items enough), Winograd for the
    forward of 3x3 and 5x5 stride-1 layers with channels enough and for the data gradient of 3x3
    ones with tiles enough too (``_cpu_winograd_pays``); measured on PoCL
    in docs/performance.md.  Tiny passes (``CPU_TINY_FLOPS``) take `direct`, which builds fastest;
    so do channels-last forwards and data gradients (its register tiles of channels) and, before
    im2col, channels-first ones of 3x3x3, dilated or 8-16-channels-a-group layers."""
    g = problem.geometry
    order = []
    if g.is_depthwise:
        # vectors along the rows, no bounds checks inside: 17-33x `direct` and `depthwise` on PoCL
        # (MobileNetV2 3x3 144ch 28x28, docs/performance.md)
        order.append("depthwise_rows")
    if channels_tiles_first(problem, device):
        # channels-last forwards and data gradients: direct's register tiles of channels, which
        # read that layout (the GEMMs' CPU kernels read channels-first rows)
        order.append("direct")
    if g.is_pointwise and all(s == 1 for s in g.stride) and (
            problem.pass_ != "backward_weight" or is_dot_config(REGISTRY["gemm1x1"].configs(problem, device)[0])):
        # the 1x1 weight gradient reads the input's rows in place as dot products where its
        # contraction is long (gemm.DOT_MIN_STEPS: 0.48-0.73x im2col's time); otherwise its B (the
        # input, transposed) has no row form, and im2col's transposed column buffer ran it 3-4x faster
        order.append("gemm1x1")
    if cpu_tiny(g) or taps_first(problem, device):
        # tiny passes: the per-element kernel, which builds fastest; weight gradients whose column
        # buffer would be long: the register tiles of taps (direct.taps_first)
        order.append("direct")
    if _cpu_winograd_pays(problem, device):
        order.append("winograd")
    if channels_tiles_before_columns(problem, device):
        # channels-first layers whose column buffer is long against the work its values feed
        # (3x3x3, dilated, 8-16 channels a group): direct's register tiles of channels
        order.append("direct")
    order += ["im2col", "gemm1x1", "implicit_gemm", "splitk", "direct"]
    return list(dict.fromkeys(order))


# The fewest input and output channels per group for Winograd's forward first on a CPU: its GEMMs
# (C_out x tiles, over C_in, one per tile position) need rows and a contraction long enough to run
# near the column buffer's GEMM rate (which contracts over 9 C_in).
CPU_WINOGRAD_MIN_CHANNELS = 64
# The fewest 4x4 tiles (over the batch) for Winograd's data gradient first on a CPU (a 7x7 kernel's
# and, below 16 float lanes, a 3x3 one's; CPU_WINOGRAD_MIN_TILES has the 3x3 kernel's with 16 lanes)
CPU_WINOGRAD_DATA_MIN_TILES = 96
# ...and for a 7x7 kernel (F(2x2, 7x7): 64 GEMMs, a transformed patch 16x its tile's outputs) the
# fewest channels, in and out, for the forward and the data gradient.  On PoCL (2-core EPYC with
# AVX-512, 2 threads; docs/perf/pocl-2t-winograd-7x7.txt) from 128 channels the forward ran in
# 0.32-0.70x im2col's time (OpenPose's 128 at 46x46, 256 at 14x14, batch 1), the data gradient in
# 0.56x; at 64 the forward split (0.87x at 56x56, 1.24x at 28x28 batch 2: its transforms took half
# the time) and the data gradient ran 0.85x.  The weight gradient lost (1.34-1.63x), as 3x3's does.
CPU_WINOGRAD_7X7_MIN_CHANNELS = 128
# The fewest 4x4 tiles (over the batch) for Winograd's 3x3 forward and data gradient first on a CPU,
# by its float lanes (the entry of the most lanes it has): with 16 (AVX-512) the column buffer's GEMM
# gains more from the wider vectors than Winograd's transforms, which gather their patches lane by
# lane, so Winograd needs tiles enough.  On PoCL (2-core EPYC, AVX-512, 2 threads, each against
# im2col in one process, interleaved, the minimum of 4 rounds; 2026-12-06, with U written packed by
# its weight transform, winograd.Winograd.packed_rows): at 12-16 tiles the forward ran in 0.72-0.93x
# im2col's time on 6 of 7 layers (7x7 256-512 at batch 3-4, 14x14 64-256 at batch 1; AlexNet's
# 13x13 384 at batch 1 1.06x), the data gradient in 0.62-0.86x on 5 of 7 (1.07x on a 64-channel
# 14x14 layer of 0.14 ms, 1.15x on a 128 -> 256 one); at 32-64 tiles the data gradient 0.59-0.66x (3
# layers); at 8 tiles both 0.99-1.17x (7x7 256-512 at batch 2), at 4 1.60-1.66x.  (2026-12-02, with
# U copied into the packed layout by a launch of its own, the forward had needed 32 tiles: 1.10-1.59x
# on 6 layers of 4-16.)  With 8 lanes (AVX2 EPYC) the forward won at 7x7 too (above), and the data
# gradient from CPU_WINOGRAD_DATA_MIN_TILES; not measured again since U is written packed.
CPU_WINOGRAD_MIN_TILES = {"forward": {16: 16}, "backward_data": {4: CPU_WINOGRAD_DATA_MIN_TILES, 16: 16}}
# The fewest channels a group, in and out, for Winograd first on a 5x5 layer on a CPU, by pass and
# float lanes (_lane_entry; a pass without an entry its lanes reach stays with im2col), and the
# fewest 4x4 tiles (over the batch) for its data gradient.  F(3x3, 5x5) does 49 multiplies where the
# direct sum does 225 (4.6x fewer), against F(4x4, 3x3)'s 4x.  On PoCL (2-core EPYC, AVX-512, 2
# threads, 2026-12-06, U written packed; docs/perf/pocl-2t-zen4-winograd-5x5.txt, the minimum of 4
# interleaved rounds each) the forward ran in 0.49-0.93x im2col's time on all 10 layers measured, from
# 16 channels (GoogLeNet's 16 -> 32 and 16 -> 48: 0.91x, 0.93x; 24 -> 64 0.71x; Inception-v3's
# 48 -> 64 at 35x35 0.52x; AlexNet's 64 -> 192 0.49x); the data gradient in 0.53-0.77x from 32
# channels with 49 tiles or more (5 layers), tied at 32 tiles (GoogLeNet's 32 -> 96 at 14x14, batch
# 2: 0.93x, and 1.05x in a bench run), and lost with 16-24 input channels (1.20-1.36x) or 16 tiles
# (48 -> 128 at 7x7: 1.25x).  With 8 lanes (AVX2, before U was written packed) a 32-channel
# 5x5 forward ran 1.56x im2col's time: 64 channels there, and no data gradient.  With F(4x4, 5x5)
# and the transforms' bounded work-groups (2026-12-07, thirty-seventh session; the same machine
# kind, docs/perf/pocl-f45.txt) the data gradient ran in 0.68-0.81x im2col's time from 16 channels
# (16 -> 32 and 16 -> 48 at 28x28, 20 -> 32 at 35x35, 24 -> 64 at 14x14: 4 layers), 0.86x at 32
# tiles (32 -> 96 at 14x14, batch 2), tied at 16 (1.02x) and lost at 8 tiles (1.23x) and with 8
# channels (1.60x): so from 16 channels and 32 tiles.
CPU_WINOGRAD_5X5_MIN_CHANNELS = {"forward": {4: 64, 16: 16}, "backward_data": {16: 16}}
CPU_WINOGRAD_5X5_DATA_MIN_TILES = 32


def _lane_entry(table: dict[int, int], lanes: int) -> int:
    """The value of ``table`` (float lanes -> value) for a CPU of ``lanes`` lanes: that of the
    largest key it reaches, 0 where it reaches none."""
    reached = [at for at in table if lanes >= at]
    return table[max(reached)] if reached else 0


def _cpu_winograd_pays(problem: Problem, device: cl.Device) -> bool:
    """Whether ``winograd`` comes first on a CPU: the forward of an undilated layer it serves, and
    the data gradient of a 3x3 one with tiles enough, with at least CPU_WINOGRAD_MIN_CHANNELS input
    and output channels per group, channels-first, on a CPU with vector lanes (its transforms and
    GEMM are written in explicit vectors there).

    Measured on PoCL (2-core EPYC, AVX2, 2 threads) against im2col, interleaved, the minimum of 4
    rounds (docs/performance.md): from 64 channels the forward ran in 0.51-0.95x im2col's time on
    all 9 layers (7x7 to 56x56, batch 1-4; F(2x2, 3x3) where 4x4 tiles are few, as Winograd.sides
    orders them); with 32 channels 0.84x and 1.32x in two runs, with 16 1.14x and 1.77x (its 36
    GEMMs over 16 channels ran at a seventh of the column buffer's GEMM rate).  The data gradient
    depends on the tiles: over 19 runs of 3x3 layers from 64 channels (three sessions' runs,
    docs/perf/pocl-2t-winograd-*.json), from 98 4x4 tiles F(4x4, 3x3) ran in 0.69-0.95x im2col's
    time in 8 of 9 (the ninth 1.20x, its repeat 0.78x), at 64 tiles 0.73-1.10x (geometric mean
    0.91: a coin toss on a shared 2-core machine), below that 1.03-1.61x; so 3x3 data gradients from
    CPU_WINOGRAD_DATA_MIN_TILES there.  With 16 lanes (AVX-512) the 3x3 forward and data gradient
    both come from CPU_WINOGRAD_MIN_TILES (measured with U written packed).  The weight gradient (1.1-3.4x on 8 of 11 layers: its GEMM reads V
    across the tiles lane by lane) stays with im2col.  5x5 forwards (F(2x2, 5x5); F(3x3, 5x5), where
    it comes first, in 0.79-0.84x F(2x2, 5x5)'s time on 3 such layers) from 64 channels
    ran in 0.38-0.77x im2col's time (3 layers; 32 channels 1.56x) on AVX2; with 16 lanes the 5x5
    forward and data gradient have minimums of their own (CPU_WINOGRAD_5X5_MIN_CHANNELS); dilated 3x3 forwards in
    0.76-1.13x (3 layers: the phases' patches are scattered rows), so a dilated layer stays with
    im2col.  7x7 layers (F(2x2, 7x7)) take it for the forward and, with tiles enough, the data
    gradient from CPU_WINOGRAD_7X7_MIN_CHANNELS."""
    if problem.pass_ == "backward_weight" or problem.layout != CHANNELS_FIRST:
        return False
    lanes = limits.of(device).lanes(problem.itemsize)
    g = problem.geometry
    if lanes < 4 or g.dilation != (1, 1, 1):
        return False
    channels = min(g.cin_per_group, g.cout_per_group)
    if g.kernel == (1, 5, 5):
        # its own minimum by pass and lanes: 0 where that CPU's lanes reach no entry (not first)
        minimum = _lane_entry(CPU_WINOGRAD_5X5_MIN_CHANNELS[problem.pass_], lanes)
        if not minimum or channels < minimum:
            return False
    elif channels < CPU_WINOGRAD_MIN_CHANNELS:
        return False
    if g.kernel == (1, 7, 7) and channels < CPU_WINOGRAD_7X7_MIN_CHANNELS:
        return False
    winograd = _saving_winograd(problem, device)
    if winograd is None:
        return False
    tiles = winograd.tiles(problem, 4)
    if g.kernel == (1, 3, 3):
        return tiles >= _lane_entry(CPU_WINOGRAD_MIN_TILES[problem.pass_], lanes)
    if g.kernel == (1, 5, 5):
        return problem.pass_ == "forward" or tiles >= CPU_WINOGRAD_5X5_DATA_MIN_TILES
    return problem.pass_ == "forward" or (g.kernel == (1, 7, 7) and tiles >= CPU_WINOGRAD_DATA_MIN_TILES)


def _saving_winograd(problem: Problem, device: cl.Device) -> Winograd | None:
    """The registered ``winograd`` algorithm where it serves ``problem`` on ``device`` and its tiles
    save multiplies enough (Winograd.saving, WINOGRAD_MIN_SAVING), else None."""
    winograd = REGISTRY.get("winograd")
    if (isinstance(winograd, Winograd) and winograd.decline_reason(problem, device) is None
            and winograd.saving(problem, device) >= WINOGRAD_MIN_SAVING):
        return winograd
    return None


def candidates(problem: Problem, device: cl.Device) -> list[tuple[Algorithm, dict]]:
    """(algorithm, config) pairs worth trying: the heuristic's order, at most MAX_CANDIDATES of them,
    then the first configuration of every other registered algorithm that serves the problem (an
    algorithm the heuristic does not name yet is still measured when tuning)."""
    return list(_candidates_in_order(problem, device))


def _candidates_in_order(problem: Problem, device: cl.Device) -> Iterator[tuple[Algorithm, dict]]:
    """:func:`candidates` one at a time, each algorithm's configurations worked out when it is
    reached: the first few are all a default choice needs (split-K's configurations alone took
    3-6 ms of a warm first call on the H200's host)."""
    names = dict.fromkeys((*heuristic_order(problem, device), *REGISTRY))
    left = MAX_CANDIDATES
    for algorithm in map(REGISTRY.__getitem__, names):
        if problem.pass_ not in algorithm.passes or algorithm.decline_reason(problem, device) is not None:
            continue
        configs = algorithm.configs(problem, device)
        # within the first MAX_CANDIDATES, up to MAX_CONFIGS_PER_ALGORITHM of each; past them, one
        taken = configs[:min(MAX_CONFIGS_PER_ALGORITHM, left)] if left else configs[:1]
        left -= min(left, len(taken))
        yield from ((algorithm, config) for config in taken)


# -- preparing: plan -> sources -> kernels -> runner --------------------------------------------------


def _settings_key() -> tuple:
    """What a prepared runner depends on besides its problem: the workspace limit (declines,
    im2col's chunks) and the template path with its files' stamps (the sources)."""
    variables = settings.fingerprint()
    return variables, templates.generation(variables[1])


def _choice_key(queue: cl.CommandQueue, problem: Problem, algorithm: str) -> tuple:
    """The memo key of a choice: also the tuning database's generation, which every store and
    ``tuning.forget_memory()`` bumps, so a new entry is picked up at once."""
    variables = settings.fingerprint()  # _settings_key(), spelt out: this is every call's path
    return (queue, problem, algorithm, tuning.generation(), variables, templates.generation(variables[1]))


def prepare(problem: Problem, algorithm: Algorithm, config: dict, queue: cl.CommandQueue) -> Runner:
    """The runner of ``algorithm`` with ``config`` for ``problem`` on ``queue``'s device, built
    (through the program cache) and checked against the device's limits (LaunchError now rather
    than a failed launch later)."""
    key = (queue.context, queue.device, problem, algorithm.name, tuple(sorted(config.items())), *_settings_key())
    runner = _runners.get(key)
    if runner is None:
        runner = build(algorithm.plan(problem, config, queue.device), queue)
        runner.key = key
        if runner.aligned:  # built on first need: views into buffers at odd offsets are rare
            runner.unaligned = lambda run_queue: prepare(problem, algorithm, {**config, "GV": 0}, run_queue)
        _runners.put(key, runner)
    return runner


def build(plan: Plan, queue: cl.CommandQueue) -> Runner:
    """Render ``plan``, build its programs and check its launches fit ``queue``'s device."""
    sources, index = templates.render_plan(plan)
    kernels = build_kernels(queue, sources, plan.label)
    runner = Runner(plan, [kernels[i][call.entry] for call, i in zip(plan.calls, index)])
    runner.check_resources(queue.device)
    return runner


def bias_gradient_runner(problem: Problem, queue: cl.CommandQueue) -> Runner:
    """The runner of the bias gradient (algorithms/reduce.py) of ``problem``'s output."""
    key = (queue.context, queue.device, problem, "bias_grad", *_settings_key())
    runner = _runners.get(key)
    if runner is None:
        runner = _runners.put(key, build(bias_gradient_plan(problem, queue.device), queue))
    return runner


def render(problem: Problem, device: cl.Device, algorithm: str = "auto") -> str:
    """The OpenCL source a call would build and run for ``problem`` (rendering never measures,
    so a choice still to be made shows the heuristic's first candidate)."""
    chosen, config = remembered_choice(problem, device, algorithm) or _first_candidate(problem, device)
    sources, _ = templates.render_plan(chosen.plan(problem, config, device))
    parts = [f"// clconv: {problem.pass_} of {problem.geometry.tag()} ({problem.dtype}) with algorithm "
             f"{chosen.name!r}, config {config}, on {device.name!r}"]
    parts += [f"// ---- rendered from {source.template}: {', '.join(source.entries)} ----\n{source.text}"
              for source in sources]
    return "\n".join(parts)


def _first_candidate(problem: Problem, device: cl.Device) -> tuple[Algorithm, dict]:
    first = next(_candidates_in_order(problem, device), None)
    if first is None:
        raise ValueError(f"no algorithm serves the {problem.pass_} pass of {problem.geometry.tag()}")
    return first


# -- choosing -------------------------------------------------------------------------------------------


def plan(problem: Problem, queue: cl.CommandQueue, algorithm: str = "auto") -> Runner:
    """The runner for ``problem``; raises ValueError if a named algorithm declines it.  Where its
    build runs in the background (interim kernels ran the calls so far), this waits for it.

    A repeated call is one cache lookup (the host overhead of a cached call): the key holds
    everything the choice depends on, including the tuning database's generation, which every
    store and ``tuning.forget_memory()`` bumps."""
    key = _choice_key(queue, problem, algorithm)
    chosen = _choices.get(key)
    runner = _runners.get(chosen) if chosen is not None else None
    if runner is None:
        runner = _chosen(problem, queue, algorithm, key)
    return runner


def run(problem: Problem, queue: cl.CommandQueue, algorithm: str, operands: dict[str, Operand],
        wait_for=None) -> list[cl.Event]:
    """Plan and enqueue ``problem``: what :func:`plan` gives, except that while the chosen plan
    of a new geometry builds in the background, its interim plan (:func:`_chosen_or_interim`).
    Under ``auto``, a launch the driver refuses (after the resource checks passed) is remembered
    as failed in the tuning database and the choice is made again without it; a named
    algorithm's failure is the caller's to see."""
    key = _choice_key(queue, problem, algorithm)
    chosen = _choices.get(key)
    runner = _runners.get(chosen) if chosen is not None else None
    if runner is None:
        runner = _chosen_or_interim(problem, queue, algorithm, key)
    try:
        return runner.run(queue, operands, wait_for=wait_for)
    except LaunchError:
        if algorithm != "auto":
            raise
        if not interim.is_interim(runner.config):
            return _run_another(problem, queue, runner, operands, wait_for)
    runner = plan(problem, queue, algorithm)  # the interim plan failed: the chosen one, as without interim kernels
    try:
        return runner.run(queue, operands, wait_for=wait_for)
    except LaunchError:
        return _run_another(problem, queue, runner, operands, wait_for)


def _run_another(problem: Problem, queue: cl.CommandQueue, failed_runner: Runner, operands: dict[str, Operand],
                 wait_for) -> list[cl.Event]:
    """Run ``problem`` with the choice made again without ``failed_runner``, whose launch the
    driver refused: it is remembered as failed in the tuning database.  The LaunchError being
    handled is raised again if nothing else serves."""
    entry = dict(tuning.lookup(queue.device, problem.key()) or {})
    failed = [*entry.get("failed", []), label(REGISTRY[failed_runner.algorithm], failed_runner.config)]
    log.warning("clconv: %s failed to launch; choosing again without it", failed_runner.label)
    replacement, _ = tune(problem, queue, {**entry, "failed": failed})
    if replacement is failed_runner:
        raise
    return replacement.run(queue, operands, wait_for=wait_for)


# -- interim kernels: a new geometry's calls while its chosen plan builds -----------------------------


class BackgroundBuilds:
    """Builds no call waits for: the chosen plans of problems whose calls run interim kernels, and
    the interim programs themselves.  Up to ``workers()`` daemon threads (read at each submit) take
    them first come, first served (the compilers release the GIL).  At the interpreter's exit the
    builds not yet started are dropped and the ones running are waited for: a compiler stopped
    mid-build can take the process down with it."""

    def __init__(self, workers: Callable[[], int]) -> None:
        self.workers = workers
        self._queue: "queues.SimpleQueue[tuple[Hashable, Future, Callable[..., Any], tuple]]" = queues.SimpleQueue()
        self._jobs: dict[Hashable, Future] = {}
        self._kept: set[Hashable] = set()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, key: Hashable, function: Callable[..., Any], *args: Any, keep: bool = True) -> Future:
        """``function(*args)`` on a worker, unless a job of ``key`` is already held (that one is
        returned).  ``keep``: the job stays until :meth:`take` (its result is wanted), else it
        goes when it is done."""
        with self._lock:
            job = self._jobs.get(key)
            if job is None:
                job = self._jobs[key] = Future()
                if keep:
                    self._kept.add(key)
                self._queue.put((key, job, function, args))
                if len(self._threads) < self.workers():
                    thread = threading.Thread(target=self._work, name=f"clconv-build-{len(self._threads)}", daemon=True)
                    self._threads.append(thread)
                    thread.start()
            return job

    def get(self, key: Hashable) -> Future | None:
        return self._jobs.get(key)

    def take(self, key: Hashable) -> Future | None:
        """The job of ``key``, no longer held (a later submit starts another)."""
        with self._lock:
            self._kept.discard(key)
            return self._jobs.pop(key, None)

    def _work(self) -> None:
        while True:
            key, job, function, args = self._queue.get()
            if job.set_running_or_notify_cancel():  # False: dropped at exit
                try:
                    job.set_result(function(*args))
                except BaseException as exc:  # noqa: BLE001 - handed to whoever takes the job
                    job.set_exception(exc)
            with self._lock:
                if key not in self._kept and self._jobs.get(key) is job:
                    del self._jobs[key]

    def wait(self) -> None:
        """Wait until every job submitted so far is done (their failures are their takers')."""
        for job in self._held():
            try:
                job.exception()
            except BaseException:  # noqa: BLE001 - a job cancelled at exit
                pass

    def close(self) -> None:
        """Drop the jobs not started; wait for the running ones."""
        for job in self._held():
            job.cancel()  # only a job not yet running is cancelled
        self.wait()

    def _held(self) -> list[Future]:
        with self._lock:
            return list(self._jobs.values())


def build_threads() -> int:
    """How many threads build in the background: ``CLCONV_BUILD_THREADS``, else BUILD_THREADS."""
    chosen = settings.build_threads()
    return BUILD_THREADS if chosen is None else chosen


# Two: NVIDIA's compiler barely runs side by side on threads of one process, and a call that must
# wait for a build of its own (a pass past interim.MAX_FLOPS) waits behind the background's.  On an
# H100 host of 16 CPUs, a training loop over the GPU set's 27 layer-passes from a new process
# (docs/perf/interim_first_calls.py --steps 40 --threads 1,2,4,8,16; h100-interim-threads.json):
# the first step took 1.87, 2.36, 3.58, 4.06 and 7.15 s on 1, 2, 4, 8 and 16 threads (its last
# call, a DCGAN weight gradient over MAX_FLOPS, waited 1.0-6.2 s), and every chosen plan was built
# after about 10.2, 7.3, 9.3, 7.4 and 7.2 s: 40 steps and the builds left after them.
BUILD_THREADS = 2


_background = BackgroundBuilds(build_threads)
atexit.register(_background.close)


def finish_builds() -> None:
    """Wait for every build running in the background (the chosen plans of problems whose calls
    ran interim kernels, interim programs): after it, a call of each problem called so far runs its
    chosen kernels.  What a benchmark does before it times a stream of calls."""
    _background.wait()


def _job_key(problem: Problem, queue: cl.CommandQueue) -> tuple:
    return (queue.context, queue.device, problem, *_settings_key())


def _chosen(problem: Problem, queue: cl.CommandQueue, algorithm: str, key: tuple) -> Runner:
    """The chosen runner, remembered under the choice key ``key``: the background build's where
    one was started for ``problem`` (waited for; if it failed, the choice is made again here,
    where its error reaches the caller), else made now."""
    job = _background.take(_job_key(problem, queue)) if algorithm == "auto" else None
    runner = None
    if job is not None:
        try:
            runner = job.result()
        except Exception:  # noqa: BLE001 - made again below, raising here if it fails here too
            runner = None
    if runner is None:
        runner = _choose(problem, queue, algorithm)
    _choices.put(key, runner.key)
    return runner


def _chosen_or_interim(problem: Problem, queue: cl.CommandQueue, algorithm: str, key: tuple) -> Runner:
    """The chosen runner where its programs are built or in the disk cache, or where interim
    kernels are off for this call (a named algorithm, a measured choice, CLCONV_INTERIM=0, a
    problem past interim.MAX_FLOPS); otherwise the problem's interim plan, while the chosen plan
    builds on a background thread: the calls that find that build done run the chosen runner.
    Where the interim program is not cached yet either, it builds in the background (for the next
    geometry: one program serves them all) and this call waits for its chosen plan."""
    if (algorithm != "auto" or settings.tuning_enabled() or not interim.serves(problem)
            or not interim.enabled(queue.device)):
        return _chosen(problem, queue, algorithm, key)
    job_key = _job_key(problem, queue)
    job = _background.get(job_key)
    if job is None:
        try:
            with cached_only():
                runner = _choose(problem, queue, algorithm)
        except NotCached:
            interim_runner = _interim(problem, queue)
            if interim_runner is None:
                return _chosen(problem, queue, algorithm, key)
            _background.submit(job_key, _choose_in_background, problem, queue, algorithm)
            return interim_runner
        _choices.put(key, runner.key)
        return runner
    if not job.done():
        interim_runner = _interim(problem, queue)
        if interim_runner is not None:
            return interim_runner
    return _chosen(problem, queue, algorithm, key)


def _choose_in_background(problem: Problem, queue: cl.CommandQueue, algorithm: str) -> Runner:
    return _launched_once(_choose(problem, queue, algorithm), queue)


def _build_in_background(plan_: Plan, queue: cl.CommandQueue) -> Runner:
    return _launched_once(build(plan_, queue), queue)


def _launched_once(runner: Runner, queue: cl.CommandQueue) -> Runner:
    """``runner``, on a CPU device first launched once on scratch operands on a queue of its own:
    PoCL compiles a kernel's work-group function at its first launch, on the launching thread,
    and this way that happens on the background thread rather than in the next call that runs
    it (other devices compile at the build)."""
    if not queue.device.type & cl.device_type.CPU:
        return runner
    scratch = _scratch_queues.setdefault((queue.context, queue.device),
                                         lambda: cl.CommandQueue(queue.context, queue.device))
    try:
        cl.wait_for_events(runner.run(scratch, random_operands(runner.plan.problem, scratch)))
    finally:
        release_workspaces(scratch)
    return runner


_scratch_queues: Cache[cl.CommandQueue] = Cache("scratch_queues", maxsize=4)


def _interim(problem: Problem, queue: cl.CommandQueue) -> Runner | None:
    """``problem``'s interim runner, if its program is built or in the disk cache; else None,
    and its program builds in the background."""
    key = (queue.context, queue.device, problem, "interim", *_settings_key())
    runner = _runners.get(key)
    if runner is None:
        interim_plan = interim.plan(problem, queue.device)
        try:
            with cached_only():
                runner = build(interim_plan, queue)
        except NotCached:
            sources, _ = templates.render_plan(interim_plan)
            program = (queue.context, queue.device, "interim", *(source.digest or source.text for source in sources))
            _background.submit(program, _build_in_background, interim_plan, queue, keep=False)
            return None
        except CANDIDATE_FAILURES as exc:
            log.warning("clconv: the interim plan of %s cannot run (%s); waiting for its chosen plan", problem.key(), exc)
            return None
        runner.key = key
        _runners.put(key, runner)
    return runner


def remembered_choice(problem: Problem, device: cl.Device, algorithm: str = "auto") -> tuple[Algorithm, dict] | None:
    """The (algorithm, config) a call would run without measuring anything: for a named algorithm,
    its configuration in the tuning database (key ``<problem>@<name>``) or else its first one; under
    ``auto``, the database's winner if it still serves the problem with a configuration it offers,
    else None (the choice is still to be made).  Raises ValueError if a named algorithm declines."""
    if algorithm != "auto":
        chosen = get_algorithm(algorithm, problem.pass_)
        check_serves(chosen, problem, device)
        entry = tuning.lookup(device, f"{problem.key()}@{chosen.name}")
        configs = chosen.configs(problem, device)
        return chosen, (entry["config"] if entry and entry["config"] in configs else configs[0])
    entry = tuning.lookup(device, problem.key())
    if entry is None or entry["algorithm"] not in REGISTRY:
        return None
    chosen = REGISTRY[entry["algorithm"]]
    if chosen.decline_reason(problem, device) is not None:
        log.warning("clconv: remembered choice %s now declines %s; choosing again", chosen.name, problem.key())
        return None
    if entry["config"] not in chosen.configs(problem, device):
        # a stale or tampered entry: never build from a configuration the algorithm does not offer
        log.warning("clconv: remembered config %s of %s is not one it offers for %s; choosing again",
                    entry["config"], chosen.name, problem.key())
        return None
    if not entry.get("measured") and _heuristic_changed(problem, device, entry):
        return None  # an unmeasured choice is the heuristic's, made again when the heuristic changes
    return chosen, entry["config"]


def _heuristic_changed(problem: Problem, device: cl.Device, entry: dict) -> bool:
    """Whether the heuristic now puts another candidate first than the unmeasured ``entry`` holds
    (the candidates that failed for it left out): a measured choice stands until tuned again, but
    a default choice follows the heuristic of the clconv that runs it (0.2-2 ms, once per process
    and problem)."""
    failed = set(entry.get("failed", []))
    first = next(((a, c) for a, c in _candidates_in_order(problem, device) if label(a, c) not in failed), None)
    return first is not None and (first[0].name, first[1]) != (entry["algorithm"], entry["config"])


def _choose(problem: Problem, queue: cl.CommandQueue, algorithm: str) -> Runner:
    limits.of(queue.device, queue.context)  # probed in the queue's own context, before any config
    choice = remembered_choice(problem, queue.device, algorithm)  # never None for a named algorithm
    if choice is not None:
        try:
            return prepare(problem, *choice, queue)
        except CANDIDATE_FAILURES as exc:
            if algorithm != "auto":  # a named request never falls back to another algorithm
                return _other_config(problem, queue, *choice, exc)
            log.warning("clconv: remembered choice %s failed (%s); choosing again", choice[0].name, exc)
    runner, _ = tune(problem, queue, tuning.lookup(queue.device, problem.key()))
    return runner


def _other_config(problem: Problem, queue: cl.CommandQueue, algorithm: Algorithm, failed: dict,
                  exc: Exception) -> Runner:
    """A named algorithm whose chosen configuration failed to build or to fit the compiled kernel's
    limits (a GPU kernel's registers can lower its work-group limit below the device's): the first
    of its other configurations that works; the first failure if none does."""
    for config in algorithm.configs(problem, queue.device):
        if config == failed:
            continue
        try:
            runner = prepare(problem, algorithm, config, queue)
        except CANDIDATE_FAILURES:
            continue
        log.warning("clconv: %s failed (%s); running %s", label(algorithm, failed), exc, runner.label)
        return runner
    raise exc


def tune(problem: Problem, queue: cl.CommandQueue, previous: dict | None = None,
         measure: bool | None = None) -> tuple[Runner, dict]:
    """Choose for ``problem`` now, store the choice in the tuning database and return ``(runner,
    database entry)``: measuring every candidate if ``measure`` (default: ``CLCONV_TUNE=1``), else
    the heuristic's first candidate that builds."""
    device = queue.device
    limits.of(device, queue.context)
    options = candidates(problem, device)
    if not options:
        raise ValueError(f"no algorithm serves the {problem.pass_} pass of {problem.geometry.tag()}")
    failed: list[str] = list(previous.get("failed", [])) if previous else []
    options = [(a, c) for a, c in options if label(a, c) not in failed] or options
    measured = settings.tuning_enabled() if measure is None else measure
    if measured:
        runner, timings, new_failures = _measure(problem, queue, options)
    else:
        runner, timings, new_failures = _first_that_builds(problem, queue, options)
    failed += new_failures
    if runner is None:
        raise RuntimeError(
            f"every algorithm failed for the {problem.pass_} pass of {problem.geometry.tag()}: tried {failed}"
        )
    entry = {"algorithm": runner.algorithm, "config": runner.config, "measured": measured,
             "times_ms": timings, "failed": failed}
    tuning.store(device, problem.key(), entry)
    return runner, entry


def _first_that_builds(problem, queue, options):
    failures = []
    for algorithm, config in options:
        try:
            return prepare(problem, algorithm, config, queue), {}, failures
        except CANDIDATE_FAILURES as exc:
            log.warning("clconv: %s failed to build: %s", label(algorithm, config), exc)
            failures.append(label(algorithm, config))
    return None, {}, failures


def _prebuild(problem, queue, options) -> None:
    """Render and build every candidate at once on a few threads (OpenCL compilers release the
    GIL; on a GPU this is most of the tuning time).  Failures surface again, per candidate, when
    ``_measure`` prepares them."""
    if len(options) < 2:
        return

    def build(option):
        try:
            prepare(problem, option[0], option[1], queue)
        except Exception:  # noqa: BLE001 - reported by _measure
            pass

    with ThreadPoolExecutor(max_workers=min(len(options), 8)) as pool:
        list(pool.map(build, options))


def _measure(problem, queue, options):
    _prebuild(problem, queue, options)
    pqueue = profiling_queue(queue)
    operands = random_operands(problem, pqueue)
    best, best_time, timings, failures = None, float("inf"), {}, []
    for algorithm, config in options:
        name = label(algorithm, config)
        try:
            runner = prepare(problem, algorithm, config, queue)
            seconds = time_runner(runner, pqueue, operands, TUNE_REPEATS, give_up_above=TUNE_GIVE_UP_FACTOR * best_time)
        except CANDIDATE_FAILURES as exc:
            log.warning("clconv: %s failed: %s", name, exc)
            failures.append(name)
            continue
        timings[name] = round(seconds * 1e3, 4)
        if seconds < best_time:
            best, best_time = runner, seconds
    return best, timings, failures
