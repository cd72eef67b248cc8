"""Direct convolution: no workspace, no GEMM; the simplest kernels and the fallback of last resort."""

from __future__ import annotations

import math

import numpy as np

from .. import limits, settings
from ..geometry import ConvGeometry
from ..limits import pow2_at_most
from ..passes import PASSES
from ..plan import CHANNELS_FIRST, LAYOUTS, Arg, Plan, Problem, rounded
from .base import Algorithm, call, epilogue_args, pass_args, source
from .gemm import largest_chunk, vector_registers
from .reduce import splitk_sum


STRIP_ROWS = range(4, 9)  # output rows per work-item of the strip forward (clc_direct_forward_rows)


def strip_rows(height: int) -> int:
    """Rows per strip for an output ``height`` rows high: of 4..8, the one leaving the fewest rows
    of the last strip empty (the smallest such: more work-items); 1 (no strips) below 4 rows."""
    if height < STRIP_ROWS[0]:
        return 1
    return min(STRIP_ROWS, key=lambda r: (-height % r, r))


# The strip forward unrolls the kernel's weights and every input value under a strip into registers
# (KH x KW weights, U x KW values for the U input rows under R output rows, R sums), so that all its
# loads are in flight at once.  On an H200 (the stored tuning runs' forwards that timed both,
# docs/perf/h200-tune-*.json), strips ran in 0.44-0.89x one output per work-item's time on 3x3 to
# 11x11 kernels and DeepSpeech2's 21x11 (578 such values: 0.59x), and lost on all three above:
# DeepSpeech2's 41x11 (972 values: 1.11x), ViT's 16x16 patches (2055: 1.75x), RepLKNet's 31x31
# depthwise (2019: 5.24x, 8.3 against 1.6 ms; docs/perf/h200-tune-sixth.json).  Kernels one row
# tall share weights but no input rows between a strip's rows.  With taps along a row or along
# the depth they lost on all five such forwards timed: Inception's 1x3 and 1x7 (1.25x, 1.17x),
# SlowFast's and R(2+1)D's temporal 5x1x1 and 3x1x1 (1.17x, 1.05x), EEGNet's 1x64 (1.70x, 0.38
# against 0.22 ms; docs/perf/h200-tune-seventh.json); 1x1 kernels split: 0.66-0.99x on three
# output layers (docs/perf/h200-direct-blocks-outputs.json), 1.66x on KataGo's 256 -> 2 policy
# head at 19x19 (h200-tune-seventh.json).  So strips go first for kernels more than a row tall,
# and for a single tap.
STRIP_MAX_VALUES = 768


def strips_pay(geometry: ConvGeometry, rows: int) -> bool:
    """Whether the strip forward (``rows`` output rows per work-item) goes before one output per
    work-item: for a kernel more than one row tall (its rows then share input rows) or of a single
    tap, where its registers hold at most STRIP_MAX_VALUES weights, input values and sums."""
    kh, kw = geometry.kernel[1], geometry.kernel[2]
    if kh == 1 and geometry.kernel_volume > 1:
        return False
    under = (rows - 1) * geometry.stride[1] + (kh - 1) * geometry.dilation[1] + 1
    return kh * kw + under * kw + rows <= STRIP_MAX_VALUES


# The weight gradient in blocks (clc_direct_backward_weight_blocks).  Measured on an H200 over 18
# grouped layers (docs/perf/h200-grouped-candidates*.json, docs/performance.md "Grouped weight
# gradients"): blocks of one input channel and up to 8 output channels won (36-72 sums per
# work-item for 3x3; the best block of 144 sums ran 1.05-1.30x the time of the best smaller one on
# 14 of 16 layers, 2.25x on one, 0.95x on one: fewer work-items resident); a 3x3x3 kernel's 4 x 27
# = 108 sums won; a 1D kernel's 3 taps took 2 input channels (24 sums) as fast as 4.
BLOCK_COB = 8          # output channels per block at most
BLOCK_SUMS = 128       # cob x cib x taps sums per work-item at most (float; half in double)
BLOCK_MIN_SUMS = 32    # input channels are added to a block while its sums stay within this
BLOCK_WAVES = 4        # work-groups per compute unit the slices aim at, for blocks of ...
BLOCK_REF_SUMS = 36    # ... this many sums (fewer in proportion above: fewer of them are resident)
BLOCK_MIN_TERMS = 32   # batch x pixels per work-item at least, however many slices that leaves
BLOCK_LANES = 32       # channels-last: blocks side by side in a work-group at most


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def weight_blocks(problem: Problem) -> list[tuple[int, int]]:
    """(cob, cib) blocks of a group's output x input channels (divisors of each), best first: the
    most output channels up to BLOCK_COB whose taps fit BLOCK_SUMS sums (an input value feeds
    every output channel of its block), then input channels while the sums stay within
    BLOCK_MIN_SUMS; second the block with half the output channels or twice the input channels.
    Empty where one channel pair's taps alone exceed BLOCK_SUMS (the per-element kernel serves)."""
    g = problem.geometry
    kv, most = g.kernel_volume, BLOCK_SUMS // (2 if problem.real == "double" else 1)
    couts = [o for o in _divisors(g.cout_per_group) if o <= BLOCK_COB and o * kv <= most]
    if not couts:
        return []
    cob = couts[-1]
    cins = _divisors(g.cin_per_group)
    cib = max(i for i in cins if i == 1 or cob * i * kv <= BLOCK_MIN_SUMS)
    out = [(cob, cib)]
    wider = [i for i in cins if i > cib and cob * i * kv <= most]
    if wider:
        out.append((cob, wider[0]))
    if len(couts) > 1:
        out.append((couts[-2], cib))
    return out


def block_work_group(problem: Problem, device, cob: int, cib: int) -> int:
    """Channels-first: 128 work-items where the blocks are fewer than BLOCK_WAVES work-groups per
    compute unit (slices then fill the device: fewer, longer ones), else 64 (14x14 and 7x7 ResNeXt
    layers at 16 and 32 channels a group: 1024-2048 blocks, 0.61-0.88x the time at 128), but 128
    for depthwise layers whatever their blocks: on all six stored ones of 640-4096 one-channel
    blocks 64 ran 1.00-1.49x 128's time (Citrinet's 1D k41 1.49x, ConvBERT's 1D k9 1.42x, StripedHyena's
    batch-1 k3 1.09x, Xception's 3x3 1.06x; docs/perf/heuristic_check.py).
    Channels-last: 256, BLOCK_LANES blocks side by side over 8 pixel lanes (on an H200 within 1.1x
    of the best block configuration timed on 8 of 15 layers, at most 1.75x: a batch-1 layer)."""
    if problem.layout != CHANNELS_FIRST:
        return 256
    g = problem.geometry
    return 128 if grouped_depthwise(g) or block_count(g, cob, cib) < BLOCK_WAVES * limits.of(device).compute_units else 64


def block_count(g: ConvGeometry, cob: int, cib: int, lanes: int = 1) -> int:
    """Work-groups of one slice of blocks (cob, cib), ``lanes`` of them side by side a work-group."""
    return -(-g.groups * (g.cout_per_group // cob) * (g.cin_per_group // cib) // lanes)


def grouped_depthwise(g: ConvGeometry) -> bool:
    """A depthwise layer of several groups (one input channel each), which the GPU order gives to
    the depthwise kernels and direct.  A single-group layer of one input channel is depthwise too
    by the letter (``ConvGeometry.is_depthwise``) but is a network's first layer, such as
    wav2vec 2.0's 1 -> 512 k10 stride-5 audio layer: on an H200 its data gradient ran 0.046 ms by
    im2col against direct's 0.206, its forward 0.042 by implicit_gemm against direct's strips' 0.046
    (docs/perf/h200-tune-closing.json), so it takes the ordinary order."""
    return g.is_depthwise and g.groups > 1


def block_lanes(problem: Problem, cob: int, cib: int, wg: int) -> int:
    """Blocks side by side in a work-group: channels-first 1 (neighbouring work-items on neighbouring
    pixels); channels-last up to BLOCK_LANES (at most the blocks, a power of two), so that
    neighbouring work-items read neighbouring channels of a pixel."""
    if problem.layout == CHANNELS_FIRST:
        return 1
    g = problem.geometry
    return min(BLOCK_LANES, wg, pow2_at_most(g.groups * (g.cout_per_group // cob) * (g.cin_per_group // cib)))


def block_slices(problem: Problem, device, cob: int, cib: int, wg: int, waves: float | None = None,
                 lanes: int = 1) -> int:
    """Slices of the batch x pixels for blocks (cob, cib) in work-groups of ``wg`` (``lanes`` blocks
    side by side): enough work-groups for ``waves`` per compute unit (by default BLOCK_WAVES at
    BLOCK_REF_SUMS sums per work-item, fewer in proportion to more sums), each work-item with
    BLOCK_MIN_TERMS terms at least, at most 1024, and partial sums within the workspace limit
    (else one slice)."""
    g = problem.geometry
    if waves is None:
        waves = BLOCK_WAVES * BLOCK_REF_SUMS / max(BLOCK_REF_SUMS, cob * cib * g.kernel_volume)
    wanted = math.ceil(waves * limits.of(device).compute_units / block_count(g, cob, cib, lanes))
    slices = max(1, min(wanted, g.batch_out_pixels * lanes // (wg * BLOCK_MIN_TERMS), 1024))
    if slices > 1 and slices * g.weight_elements * problem.itemsize > settings.workspace_limit(device):
        slices = 1
    return slices


def block_config(problem: Problem, device, cob: int, cib: int, wg: int, lanes: int | None = None,
                 waves: float | None = None) -> dict:
    """A configuration of blocks (cob, cib) in work-groups of ``wg``: ``lanes`` by default
    block_lanes', the slices block_slices' for ``waves``."""
    lanes = block_lanes(problem, cob, cib, wg) if lanes is None else lanes
    config = {"wg": wg, "cob": cob, "cib": cib, "slices": block_slices(problem, device, cob, cib, wg, waves, lanes)}
    if lanes > 1:
        config["lanes"] = lanes
    return config


def _blocks_under_a_wave(problem: Problem, device, config: dict) -> bool:
    """Whether a depthwise weight gradient's blocks ``config`` launch fewer work-groups than the
    device has compute units, where a work-group per weight element launches as many or more.  Its
    one-channel blocks get a work-group a channel and slice, and a short batch x pixels leaves one
    slice (BLOCK_MIN_TERMS): PP-LCNet's 5x5 stride-2 at 40 channels (6400 products) ran its 40
    work-groups in 1.91x the per-element kernel's time on an H100 (1000 work-groups), GhostNet's 3x3 at
    80 in 1.10x; at 160 and 240 channels the blocks won (GhostNetV2's 1x5, 0.75x; EfficientNet's
    batch-1 5x5, 0.48x; docs/perf/heuristic_check.py).  Not measured on other layers: depthwise only."""
    g = problem.geometry
    if not grouped_depthwise(g):
        return False
    work_groups = block_count(g, config["cob"], config["cib"], config.get("lanes", 1)) * config["slices"]
    return work_groups < limits.of(device).compute_units <= g.weight_elements


def strided_blocks_halved(problem: Problem, device) -> bool:
    """Whether the blocks' configurations start from weight_blocks' block of fewer output channels
    (its last, where it has one): on a GPU, channels-first, for one group whose windows overlap
    along a stride over the rows or the depth of an image or volume (a kernel longer than that
    stride).  On an H100 and H200 (docs/perf/heuristic_check.py) the stride-2 3x3 first layers of 3
    input channels ran blocks of 4 output channels (6 for 24 and 48) in 0.69-0.93x the time of blocks
    of 8 on 11 of 12 such layers of 16-64 channels (Inception-v3's, MobileNetV3's, HGNetV2's, DDRNet's,
    EfficientFormer's, MobileOne's, SVTR's, TinyViT's, EfficientNet-B7's, Xception's twice: the
    twenty-first list's, 710432 products, 0.69x), 1.14x on MobileViT's 3 -> 16 at batch 64.  Not
    where the windows do not overlap or the layer is grouped (a 1x1 stride-2 256 -> 512 ran 1.28x,
    ResNeXt's strided 3x3 of 32 groups 1.05-1.18x, patch embeddings 0.77-1.08x), nor for stride-1
    first layers (IMPALA's 3 -> 16: blocks of 4 in 1.58x the time of 8's) or strided 1D ones (wav2vec
    2.0's k10 stride 5: 1.05-1.11x)."""
    g = problem.geometry
    return (limits.of(device).gpu and problem.layout == CHANNELS_FIRST and g.groups == 1
            and any(k > s > 1 for k, s in zip(g.kernel[:2], g.stride[:2])))  # over depth or rows: not 1D


def block_configs(problem: Problem, device) -> list[dict]:
    """The blocks' configurations, best guess first: the first block with its work-group size,
    then with the other size (channels-last: 128 work-items, 8 blocks side by side), then the
    other blocks (empty where no block fits); the block of fewer output channels first where
    strided_blocks_halved says."""
    fit = limits.of(device)
    out = []
    blocks = weight_blocks(problem)
    if len(blocks) > 1 and blocks[-1][0] < blocks[0][0] and strided_blocks_halved(problem, device):
        blocks = [blocks[-1], *blocks[:-1]]
    for n, (cob, cib) in enumerate(blocks):
        first = block_work_group(problem, device, cob, cib)
        options: list[tuple[int, int | None]] = [(first, None)]
        if n == 0:
            options.append((192 - first, None) if problem.layout == CHANNELS_FIRST else (128, 8))
        for wg, lanes in options:
            if fit.fits((wg, 1)):
                config = block_config(problem, device, cob, cib, wg, lanes)
                if config not in out:
                    out.append(config)
    return out


# The forward in blocks of output channels (clc_direct_forward_block): a work-item per block of
# `cob` output channels x strip of `rows` output rows, so each input value it loads feeds `cob`
# channels and each weight `rows` rows.  Measured on an H200 (docs/perf/h200-direct-blocks.json,
# docs/performance.md) on layers of few input channels, whose GEMMs gather a short contraction:
# 16 channels x 4 rows in work-groups of 128 ran VGG's, U-Net's, ResNet's and MobileNet's first
# layers, 3x3 4/8/16 -> 64/64/32 and a 3x3x3 video first layer in 0.62-0.84x the implicit GEMM's
# time (0.64-0.94x cuDNN's but the video layer's, 1.11x); from 216 input channels x taps (3x3
# 24 -> 48, AlexNet's 11x11, 48 -> 96), at 128 output channels (16 -> 128) and along 1D rows
# (a 16 -> 64 k9: no strips, one FMA per weight loaded) the GEMMs won, by 1.08-1.9x.
FORWARD_BLOCK_COB = 16           # output channels per work-item at most
FORWARD_BLOCK_ROWS = 4           # output rows per work-item at most
FORWARD_BLOCK_REGISTERS = 192    # accumulators (rows x cob) and a kernel row's weights (cob x KW), in floats
FORWARD_BLOCK_FILL = 256         # work-items per compute unit the block shrinks (cob, then rows) to keep
FORWARD_BLOCK_CONTRACTION = 160  # input channels x taps (a group's) at most where blocks come first ...
FORWARD_BLOCK_OUTPUTS = (32, 64)  # ... with this many output channels a group (16: 1.03-1.15x the strips')
FORWARD_BLOCK_OFFERED = 2 * FORWARD_BLOCK_CONTRACTION  # where tuning measures them too
# A contraction shorter than the GEMM tiles' step over it (TK = 16): most of every step a GEMM
# loads is padding, so the blocks come first with any number of output channels from 32
# (wav2vec 2.0's 1 -> 512 k10 stride-5 audio layer: 0.020 ms against the implicit GEMM's 0.042 on
# an H200, docs/perf/h200-tune-closing.json), and along 1D rows too
FORWARD_BLOCK_SHORT = 16


def forward_block(problem: Problem, device) -> dict | None:
    """The configuration of clc_direct_forward_block for a forward on a GPU (None elsewhere, for
    depthwise layers of several groups, odd output channels a group, contractions over
    FORWARD_BLOCK_OFFERED): FORWARD_BLOCK_COB channels
    (the largest power of two dividing a group's, within FORWARD_BLOCK_REGISTERS) x
    FORWARD_BLOCK_ROWS rows, halved (channels down to 2 first, then rows) while the work-items
    number fewer than FORWARD_BLOCK_FILL a compute unit: over 26 first layers on an H200 that took
    1.023x the best block's time (worst 1.19x, VGG's first at batch 1), rows first 1.053x (1.36x)."""
    g = problem.geometry
    fit = limits.of(device)
    if (problem.pass_ != "forward" or not fit.gpu or grouped_depthwise(g)
            or g.cin_per_group * g.kernel_volume > FORWARD_BLOCK_OFFERED):
        return None
    words = 2 if problem.real == "double" else 1
    rows, kw = min(FORWARD_BLOCK_ROWS, g.out_size[1]), g.kernel[-1]
    cob = FORWARD_BLOCK_COB
    while cob > 1 and (g.cout_per_group % cob or cob * (rows + kw) * words > FORWARD_BLOCK_REGISTERS):
        cob //= 2
    if cob == 1:
        return None

    def work_items(rows: int, cob: int) -> int:
        od, oh, ow = g.out_size
        return g.batch * od * -(-oh // rows) * ow * (g.out_channels // cob)
    while work_items(rows, cob) < FORWARD_BLOCK_FILL * fit.compute_units and (rows > 1 or cob > 2):
        rows, cob = (rows, cob // 2) if cob > 2 else (rows // 2, cob)
    return {"wg": fit.widest(128, 64)[0], "rows": rows, "cob": cob}


def forward_blocks_first(problem: Problem) -> bool:
    """Whether clc_direct_forward_block comes first for a forward on a GPU (measured: the table
    above): a short contraction (FORWARD_BLOCK_CONTRACTION) over 32-64 output channels a group
    (more where the contraction is shorter than a GEMM tile's step, FORWARD_BLOCK_SHORT),
    channels-first, with rows to strip (2D and 3D) or that short a contraction (a 1D first layer:
    1 -> 64 k9 ran 0.66x the one-output kernel's time), and a kernel more than one column wide (or
    that short a contraction): a block loads an input value once for its output channels, rows and
    the kernel's columns, and a kernel one column wide leaves it the channels and rows alone.  On an
    H200 the two such layers measured lost to the GEMMs: HRNet's 3x1 32 -> 32 at 64x48, 1.11x
    (docs/perf/h200-tune-closing-holdout.json), and ENet's 5x1 32 -> 32 at 64x64, 2.23x the implicit
    GEMM's time (docs/perf/h200-tune-fresh.json, the list written to judge the rules: this rule was
    written from it)."""
    g = problem.geometry
    contraction = g.cin_per_group * g.kernel_volume
    return (problem.pass_ == "forward" and not grouped_depthwise(g) and problem.layout == CHANNELS_FIRST
            and not g.is_pointwise and contraction <= FORWARD_BLOCK_CONTRACTION
            and FORWARD_BLOCK_OUTPUTS[0] <= g.cout_per_group
            and (g.cout_per_group <= FORWARD_BLOCK_OUTPUTS[1] or contraction < FORWARD_BLOCK_SHORT)
            and (g.out_size[1] >= FORWARD_BLOCK_ROWS or contraction < FORWARD_BLOCK_SHORT)
            and (g.kernel[2] > 1 or contraction < FORWARD_BLOCK_SHORT))


def grouped_blocks_first(problem: Problem) -> bool:
    """Whether clc_direct_forward_block comes before the strips for a grouped (not depthwise)
    forward, channels-first: each input value feeds a block of the group's output channels.  On an
    H200 (docs/perf/h200-direct-blocks-grouped.json: 11 grouped layers of 2-12 channels a group,
    ResNeXt's at batch 1-32, 64 groups of 4, strided, 5x5, 1D and 3D) forward_block's configuration
    ran in 0.42-0.97x the strips' time on 10 and 1.04x on one (batch 1 at 56x56), geometric mean
    0.69x; ResNeXt-101's 32 groups of 8 at 56x56 0.64x (docs/perf/h200-tune-closing.json)."""
    g = problem.geometry
    return (problem.pass_ == "forward" and g.groups > 1 and not g.is_depthwise
            and problem.layout == CHANNELS_FIRST)


def narrow_blocks_first(problem: Problem) -> bool:
    """Whether clc_direct_forward_block comes before the strips for an ungrouped forward of fewer
    output channels than forward_blocks_first asks (FORWARD_BLOCK_OUTPUTS' lower bound) and at
    least FORWARD_FEW_OUTPUTS, over a contraction of at most FORWARD_BLOCK_CONTRACTION: each input
    value it loads feeds a block of those channels (not a 1x1 layer's, whose GEMM reads its input
    in place).  On an H100 and an H200 (docs/perf/heuristic_check.py) the blocks ran SlowFast's
    1x3x3 8 -> 8 (a contraction of 72) in 0.61x the strips' time, PeleeNet's 3x3 16 -> 16 (144) in
    0.63x, a CIFAR ResNet's 16 -> 16 at batch 128 in 0.75x and EEGNet's 1x64 1 -> 8 (64) in 0.92x; LeNet-5's 5x5 6 -> 16 at 14x14, whose
    block shrinks to 2 channels to fill the device, in 1.22x.  Until the thirty-fifth session
    first layers (a contraction under 64) kept the strips, on a claim of stems that lost to them
    which no stored run holds; the two measured since, IMPALA's 3x3 3 -> 16 at 64x64, batch 64
    (docs/perf/h100-tune-fourteenth.json), and EfficientFormer's stride-2 3x3 3 -> 24 at 224x224,
    batch 32 (docs/perf/gpu35/fresh-fifteenth.json, a list written before it was measured), ran the
    blocks in 0.60x and 0.33x the strips' time (16.8 against 28.1 us, 34.8 against 107 us)."""
    g = problem.geometry
    contraction = g.cin_per_group * g.kernel_volume
    return (problem.pass_ == "forward" and g.groups == 1 and problem.layout == CHANNELS_FIRST and not g.is_pointwise
            and FORWARD_FEW_OUTPUTS <= g.cout_per_group < FORWARD_BLOCK_OUTPUTS[0]
            and contraction <= FORWARD_BLOCK_CONTRACTION)


# A forward with at most this many output channels a group (an output layer: an image's 1-3
# channels, a mask, a flow field) leaves a GEMM tile's 32+ rows mostly empty: direct's strip kernel
# (its first configuration on GPUs) comes first.  On an H200 (docs/perf/h200-direct-blocks-outputs.json) it
# ran 3x3 64 -> 3 at 256x256 in 83.7 us against implicit GEMM's 496.7 and cuDNN's 345.4, 64 -> 1
# in 45.4 (split-K 550.9; cuDNN 208), 5x5 32 -> 1 33.6 (708; 165), 3x3x3 32 -> 1 38.2 (449; 148),
# a 1D k3 64 -> 1 21.0 (87; 46), a 1x1 64 -> 1 26.0 (gemm1x1 59.7; 58.8); 21 classes lost (a
# 3x3 256 -> 21: 2.5x Winograd's time, a 1x1: 1.7x gemm1x1's).
FORWARD_FEW_OUTPUTS = 8
# ... where its strips number this many a compute unit at least (the 3x3x3 32 -> 1 layer's 248 ran
# in 0.09x split-K's time; a batch-1 32x32 image's few strips over a long contraction are left to
# split-K's pieces)
FEW_OUTPUTS_FILL = 64


def few_outputs_first(problem: Problem, device, outputs: int = FORWARD_FEW_OUTPUTS) -> bool:
    """Whether direct's strips come first for a forward on a GPU with few output channels a group
    (at most ``outputs``: FORWARD_FEW_OUTPUTS), channels-first, with FEW_OUTPUTS_FILL strips a
    compute unit."""
    g = problem.geometry
    if problem.pass_ != "forward" or problem.layout != CHANNELS_FIRST or g.cout_per_group > outputs:
        return False
    od, oh, ow = g.out_size
    strips = od * -(-oh // strip_rows(oh)) * ow
    return g.batch * strips * g.out_channels >= FEW_OUTPUTS_FILL * limits.of(device).compute_units


# A pass this small runs on the CPU with `direct` in a few tenths of a millisecond, which builds on
# PoCL in about a second, where the GEMM families' two programs took 6 s cold (a 2x8x12x12 3x3
# conv2d: 1.1 s first call with direct, 6.2 s with im2col; then 0.14 against 0.07 ms per call).
# A first call's build outweighs tens of thousands of such calls' difference (issue #12's "on
# PoCL prefer the algorithm that builds fast for tiny problems"); `clconv tune` still measures all.
CPU_TINY_FLOPS = 2 * 2 ** 18


def cpu_tiny(g: ConvGeometry) -> bool:
    """Whether a pass of ``g`` is tiny on a CPU: a reduction of fewer than 8 terms, or at most
    CPU_TINY_FLOPS: the planner puts `direct` first, and direct its simplest kernels."""
    return g.reduction_length < 8 or g.flops <= CPU_TINY_FLOPS


# The weight gradient on CPUs in register tiles (kernels/direct_taps.mako): a work-item holds TH x TW
# taps (TH kernel rows, TW columns) x NB vectors of VN output channels (TH x TW x NB vector sums) for
# one input channel, over its slice of the batch's output pixels; dy is first copied with each
# pixel's output channels side by side (clc_dy_rows), so that a pixel's block of channels is NB
# vector loads.  No column buffer: on PoCL (a 2-core AMD EPYC with AVX-512, 2 threads) im2col spent a
# third of its time on 5x5 weight gradients writing and re-reading columns.
TAPS_MIN_LANES = 4       # vector lanes (of the problem's arithmetic type) the tiles need at least
TAPS_FILL = 8            # work-items per core the slices aim at (as im2col's CPU pieces)
TAPS_MIN_SLICE_PIXELS = 256  # output pixels per slice at least
TAPS_CACHE_SHARE = 2     # a slice's columns of dy's copy within this share of a core's own cache
# The share of the vector registers a tile's sums, dy vectors and broadcast may take: the compiler
# needs some for its own (on PoCL with AVX-512, tiles of 29 registers ran 1.3-1.4x slower than tiles
# of 21-25; gemm's CPU tiles of 15 of AVX2's 16 registers are plain loops, these have 3-4 of them)
TAPS_REGISTERS = 13 / 16
# A tile of three or more kernel columns whose stride equals its dilation reads at the next output
# column the values its neighbouring taps read at this one, and LLVM carries them across the loop's
# iterations through shuffles instead of loading them again (PoCL, AVX-512, 5 columns: a vpermps and
# a vpermt2ps an iteration, a chain each iteration waits on): an iteration takes about this many
# cycles however few its FMAs.  On PoCL the 5x5 layers of 32 output channels ran the tile of 1 row x
# 5 columns x 2 vectors (10 FMAs, 7 loads an iteration) in 1.22-1.24x the time of 5 rows x 1 column
# x 2 (no chain); with 4 vectors (20 FMAs) the two tied, and 3x3 layers' 1 x 3 x 4 (12 FMAs, 7 loads)
# ran 0.94-0.97x 3 x 1 x 4's time: so more than 17 cycles and at most 19.  Two columns carry one value
# (a register, no shuffle): a 1D k2's 1 x 2 x 2 ran 0.69x 1 x 1 x 2's time.
TAPS_SLIDING_CYCLES = 18


# Work-items per work-group of the taps' launches at most: PoCL runs a work-group's work-items in one
# thread with their private arrays and spilled vectors side by side on its stack, and left to choose
# it took work-groups large enough to overrun that stack (a segmentation fault on a 3x3 512 -> 512
# weight gradient, as Winograd's transforms did, winograd.cpu_work_group).  Of 1, 8, 16 and 32 input
# channels a work-group, 16 ran fastest on PoCL (3x3 256 -> 256 at 7x7: 0.91, 0.66, 0.63, 0.63 ms).
TAPS_GROUP = 16


def taps_group(extent: int, device) -> int:
    """The work-group along a launch dimension of ``extent`` work-items: the largest power of two
    dividing it within TAPS_GROUP and the device's work-group limits."""
    fit = limits.of(device)
    most = min(TAPS_GROUP, fit.work_group, fit.work_item_sizes[0], fit.work_item_sizes[1])
    size = 1
    while size * 2 <= most and extent % (size * 2) == 0:
        size *= 2
    return size


def taps_lanes(problem: Problem, device) -> int:
    """The tiles' vector width: the CPU's native lanes for the arithmetic type (a power of two, at
    most 16); 0 on a GPU or where the CPU has fewer than TAPS_MIN_LANES (Mesa's llvmpipe reports 1:
    it vectorises across work-items)."""
    fit = limits.of(device)
    lanes = min(16, pow2_at_most(fit.lanes(problem.itemsize)))
    return lanes if not fit.gpu and lanes >= TAPS_MIN_LANES else 0


def taps_tiles(problem: Problem, device) -> list[tuple[int, int, int]]:
    """(TH, TW, NB) tiles for the CPU weight gradient, best first: those whose TH x TW x NB sums, NB
    vectors of dy and a broadcast fit TAPS_REGISTERS of the vector registers, by their cycles per
    useful FMA: an output pixel's FMAs (TH x TW x NB) and loads (TH x TW broadcasts, NB vectors),
    each counted as a cycle (at least TAPS_SLIDING_CYCLES where 3+ columns slide), over the FMAs
    whose lanes and taps are not waste (a group's output channels rounded up to NB x VN, the
    kernel's rows and columns to whole tiles).  On PoCL (a 2-core AMD EPYC with AVX-512) that order
    put the fastest of 5-6 tiles first on 3x3 16 -> 16 and 64 -> 64 layers (within 1.02x) and a 5x5
    48 -> 64 one, whose 2 x 3 x 4 tile (29 registers) ran 1.41x the 1 x 5 x 4 tile's time and 1.34x
    the 1 x 3 x 4 one's (docs/performance.md)."""
    g = problem.geometry
    lanes = taps_lanes(problem, device)
    if not lanes:
        return []
    registers = vector_registers(limits.of(device)) * TAPS_REGISTERS
    kh, kw, co = g.kernel[1], g.kernel[2], g.cout_per_group
    costs = []
    for th in range(1, kh + 1):
        for tw in range(1, kw + 1):
            for nb in range(1, int(registers)):
                sums = th * tw * nb
                if sums + nb + 1 > registers:
                    break
                useful = co / rounded(co, nb * lanes) * kh / rounded(kh, th) * kw / rounded(kw, tw)
                cycles = sums + th * tw + nb
                if tw >= 3 and g.stride[2] == g.dilation[2]:
                    cycles = max(cycles, TAPS_SLIDING_CYCLES)
                costs.append((cycles / (sums * useful), (th, tw, nb)))
    return [tile for _, tile in sorted(costs)]


def taps_chunk(problem: Problem, device, nb: int, lanes: int) -> int:
    """Images per launch pair whose copy of dy (a group's output channels padded to blocks of nb x
    lanes) fits the workspace limit and divides the batch; 0 if one image's does not."""
    g = problem.geometry
    per_image = g.groups * g.out_pixels * rounded(g.cout_per_group, nb * lanes) * problem.itemsize
    return largest_chunk(g.batch, per_image, settings.workspace_limit(device))


def taps_slices(problem: Problem, device, th: int, tw: int, nb: int, lanes: int, chunk_batch: int,
                cb: int = 1) -> int:
    """Pieces of a chunk's output pixels, each summed into its own partial sums: enough work-items
    for TAPS_FILL a core, and each slice's columns of dy's copy (its pixels x a block of nb x lanes
    channels) within half a core's own cache (TAPS_CACHE_SHARE), so that the work-items a core runs
    one after another read them from there; each slice TAPS_MIN_SLICE_PIXELS output pixels at least,
    the partials within the workspace limit."""
    g = problem.geometry
    fit = limits.of(device)
    items = (g.kernel[0] * -(-g.kernel[1] // th) * -(-g.kernel[2] // tw) * g.groups * (g.cin_per_group // cb)
             * -(-g.cout_per_group // (nb * lanes)))
    pixels = chunk_batch * g.out_pixels
    wanted = -(-TAPS_FILL * fit.compute_units // items)
    if fit.core_cache:
        wanted = max(wanted, -(-pixels * nb * lanes * problem.itemsize // (fit.core_cache // TAPS_CACHE_SHARE)))
    room = settings.workspace_limit(device) // (g.weight_elements * problem.itemsize)
    return max(1, min(wanted, pixels // TAPS_MIN_SLICE_PIXELS, room))


TAPS_POINTWISE_VECTOR_LOAD = 2  # cycles a vector of dy counts for in a 1x1 tile's step (a broadcast: 1)


def taps_pointwise_tiles(problem: Problem, device) -> list[tuple[int, int]]:
    """(CB, NB) tiles for a 1x1 kernel's weight gradient, best first: its one tap leaves a tile of
    taps one broadcast an output pixel, so a work-item takes CB input channels instead (CB dividing
    a group's, CB x NB sums, NB vectors and a broadcast within TAPS_REGISTERS of the vector
    registers), by cycles per useful FMA as taps_tiles counts them but with each of dy's vectors a
    line of the cache against the CB broadcasts' one (TAPS_POINTWISE_VECTOR_LOAD), more input
    channels first among equals.  On four channels-last ResNet-50 1x1 layers on PoCL (AVX-512)
    that ranks 8 x 2 and 4 x 4 first, which ran within about 10% of each other run to run, ahead of
    4 x 2 (1.1-1.3x their time; docs/performance.md): written from those layers, in sample."""
    g = problem.geometry
    lanes = taps_lanes(problem, device)
    if not lanes or g.kernel_volume != 1:
        return []
    registers = vector_registers(limits.of(device)) * TAPS_REGISTERS
    co = g.cout_per_group
    costs = []
    for cb in (c for c in range(1, int(registers)) if g.cin_per_group % c == 0):
        for nb in range(1, int(registers)):
            sums = cb * nb
            if sums + nb + 1 > registers:
                break
            useful = co / rounded(co, nb * lanes)
            cycles = sums + cb + TAPS_POINTWISE_VECTOR_LOAD * nb
            costs.append((cycles / (sums * useful), -sums, -cb, (cb, nb)))
    return [tile for *_, tile in sorted(costs)]


def taps_configs(problem: Problem, device) -> list[dict]:
    """The CPU weight gradient's tile configurations, best first (empty on GPUs, narrow vectors, or
    where one image's copy of dy exceeds the workspace limit); a 1x1 kernel's with CB input
    channels a work-item."""
    lanes = taps_lanes(problem, device)
    tiles = ([(1, 1, cb, nb) for cb, nb in taps_pointwise_tiles(problem, device)]
             if problem.geometry.kernel_volume == 1 else [(th, tw, 1, nb) for th, tw, nb in taps_tiles(problem, device)])
    out = []
    for th, tw, cb, nb in tiles[:3]:
        chunk_batch = taps_chunk(problem, device, nb, lanes)
        if chunk_batch:
            config = {"TH": th, "TW": tw, "NB": nb, "VN": lanes,
                      "slices": taps_slices(problem, device, th, tw, nb, lanes, chunk_batch, cb)}
            out.append({**config, "CB": cb} if problem.geometry.kernel_volume == 1 else config)
    return out


# Where the taps come first for a CPU weight gradient (the CPU heuristic's order): where the column
# buffer im2col would write is long against dy's copy the taps read, C_in/group x taps at least
# TAPS_MIN_COLUMN_RATIO x C_out/group, over TAPS_MIN_PIXELS output pixels (batch x pixels) at least.
# On PoCL (a 2-core AMD EPYC with AVX-512, 2 threads; docs/performance.md), written from 27 layers:
# from a ratio of 3 the first tile ran 0.47-0.97x the time of the candidate before (3x3 16 -> 32 at
# 56x56 0.73x, 64 -> 64 0.68-0.74x, 5x5 48 -> 64 0.72-0.78x, 3x3x3 0.59-0.64x, 1D k3-k9 0.72-0.73x,
# 32 groups of 8 0.86x) but for a 3x3 16 -> 16 at 28x28 (1.09x, 0.16 ms); from a ratio of 2 to 3,
# ResNet's 7x7 stride-2 stem (147 / 64) at batch 2 and 1 0.72x and 0.70x, a 1D k2 32 -> 32 0.78x
# (the rule's first bound, 3, had left them out; the bound of 2 is written from these three, in
# sample); below 2 it lost on three of five first layers of 1-3 channels (1.1-2.0x; a stride-2 3x3
# 3 -> 32 ran 0.84x), and with few pixels (3x3 256 -> 256 at 7x7, batch 2: 98 pixels, 1.05x: each
# work-item's stores outweigh its sums).  On 20 layers written before they were measured (with the
# bound at 3), the 17 it takes ran 0.47-0.96x (docs/perf/pocl-taps-holdout-layers.txt).
# Channels-last, the bounds do not apply: the GEMM families' CPU kernels read channels-first rows,
# so a channels-last weight gradient ran im2col's local-memory tiles, and the taps (dy's copy is a
# row copy there) ran 0.08-0.16x their time on all 8 layers timed, those the bounds leave out too
# (PoCL, 2 threads: 3 -> 64 at 224x224 3.39 against 22.84 ms, 512 -> 512 at 7x7 2.34 against 14.48).
TAPS_MIN_COLUMN_RATIO = 2
TAPS_MIN_PIXELS = 128


def taps_first(problem: Problem, device) -> bool:
    """Whether direct's taps come first for a weight gradient on a CPU (the rule above): not a tiny
    pass, nor a depthwise layer of several groups (depthwise_rows' own); channels-first within the
    bounds and not 1x1 (gemm1x1's dot products and im2col's columns serve those), channels-last
    always (1x1 too, CB input channels a work-item)."""
    g = problem.geometry
    long_columns = (g.batch * g.out_pixels >= TAPS_MIN_PIXELS
                    and g.cin_per_group * g.kernel_volume >= TAPS_MIN_COLUMN_RATIO * g.cout_per_group)
    channels_last = problem.layout != CHANNELS_FIRST
    return (problem.pass_ == "backward_weight" and (g.kernel_volume > 1 or channels_last) and not grouped_depthwise(g)
            and not cpu_tiny(g) and (long_columns or channels_last) and bool(taps_configs(problem, device)))


# The forward and the data gradient on CPUs in register tiles of result channels
# (kernels/direct_channels.mako): a work-item holds PX result pixels of a row x NB
# vectors of VN result channels (PX x NB vector sums), and runs the contraction over (tap, source
# channel) from a packed copy of the weight (NB vector loads a step) and a channels-last copy of
# the source with its padding written out as zeros (PX broadcasts a step, no bounds tests).  The
# GEMM families' CPU kernels run their vectors along the pixels: channels-last activations have no
# such rows (they ran in GPU tiles, 6-15x channels-first's time on PoCL).  Channels-first they win
# where im2col's column buffer is long against the work each of its values feeds (below).
CHANNELS_REGISTERS = TAPS_REGISTERS  # the share of the vector registers a tile may take (as the taps')
CHANNELS_MIN_SUMS = 8  # vector sums a tile needs at least: two FMA pipes x four cycles of latency
# A block's packed weight (taps x source channels x NB x VN) within this share of a core's own
# cache, where blocks of one vector do not already exceed it: the work-items a core runs one after
# another walk the same block, each all of it.  On PoCL (AVX-512, 1 MiB L2 a core) a 3x3 256 -> 256
# forward at 7x7 ran tiles of 7 pixels x 3 vectors (442 KiB a block) in 2.2x the time of 7 x 2
# (295 KiB), where its wasted lanes account for 1.13x; a 512 -> 512 one at 14x14 ran 7 x 2 (590
# KiB) in 1.10x the time of 14 x 1.
CHANNELS_CACHE_SHARE = 2


def channels_serve(problem: Problem) -> bool:
    """Whether direct's channel tiles serve ``problem``'s pass: the forward and the data gradient
    (the weight gradient has the taps)."""
    return problem.pass_ in ("forward", "backward_data")


def channels_frame(problem: Problem, px: int) -> dict:
    """The extents the channel tiles work in, for tiles of ``px`` result pixels: a group's source
    and result channels (SC, RC), all source channels (SCH), the source's and the result's extents
    (S*, R*), the strides (TS*), the source's padding before in the padded copy (TP*), tiles a
    result row (WT), the padded copy's extents (Z*: wide enough for the last tile's columns), and
    ``flat``: a 1x1 stride-1 unpadded channels-last source, read in place as rows of pixels (no copy).

    The forward reads source pixel r x stride + tap x dilation - padding for result pixel r.  The
    data gradient's result pixel i takes, for each tap k with i + padding - k x dilation a multiple
    of the stride, dy's pixel (i + padding - k x dilation) / stride: its result pixels along a row
    go in phases, the residues of i modulo the stride, each a stride-1 walk over dy (a tile is PX
    pixels of one phase, WT tiles a phase)."""
    g = problem.geometry
    backward = problem.pass_ == "backward_data"
    names = ("D", "H", "W")
    if backward:
        sc, rc, sch = g.cout_per_group, g.cin_per_group, g.out_channels
        s_size, r_size = g.out_size, g.in_size
        phase_pixels = -(-r_size[2] // g.stride[2])  # a row's pixels of one phase, at most
        wt = -(-phase_pixels // px)
        covered = (r_size[0], r_size[1], g.stride[2] * wt * px)  # result pixels the tiles reach, per axis
        # dy's pixels they read: from (padding - (kernel - 1) x dilation) / stride, rounded down
        # (Python's //, below zero too), to (the last result pixel + padding) / stride
        low = [(p - (k - 1) * d) // s for p, k, d, s in zip(g.pad_begin, g.kernel, g.dilation, g.stride)]
        high = [(c - 1 + p) // s + 1 for c, p, s in zip(covered, g.pad_begin, g.stride)]
        pads = [-lo for lo in low]
        z = [hi - lo for lo, hi in zip(low, high)]
    else:
        sc, rc, sch = g.cin_per_group, g.cout_per_group, g.in_channels
        s_size, r_size = g.in_size, g.out_size
        wt = -(-r_size[2] // px)
        pads = list(g.pad_begin)
        z = [(r - 1) * s + (k - 1) * d + 1 for r, s, k, d in zip(r_size, g.stride, g.kernel, g.dilation)]
        z[2] = (wt * px - 1) * g.stride[2] + (g.kernel[2] - 1) * g.dilation[2] + 1
    flat = (problem.layout != CHANNELS_FIRST and g.kernel_volume == 1 and all(s == 1 for s in g.stride)
            and not any(g.pad_begin) and not any(g.pad_end))
    frame = {"SC": sc, "RC": rc, "SCH": sch, "WT": wt, "flat": flat, "backward": backward}
    for i, axis in enumerate(names):
        frame.update({f"S{axis}": s_size[i], f"R{axis}": r_size[i], f"TS{axis}": g.stride[i],
                      f"TP{axis}": pads[i], f"Z{axis}": z[i]})
    return frame


def channels_tiles_count(problem: Problem, frame: dict, px: int) -> int:
    """Work-items along the result's pixels for tiles of ``px``: flat over the batch, or a row's
    WT tiles (of each phase, for the data gradient) for every row of every image."""
    g = problem.geometry
    if frame["flat"]:
        return -(-g.batch * frame["RD"] * frame["RH"] * frame["RW"] // px)
    phases = frame["TSW"] if frame["backward"] else 1
    return g.batch * frame["RD"] * frame["RH"] * phases * frame["WT"]


def _result_channels(problem: Problem) -> int:
    g = problem.geometry
    return (g.in_channels if problem.pass_ == "backward_data" else g.out_channels) // g.groups


def channels_lanes(problem: Problem, device) -> int:
    """The channel tiles' vector width: the CPU's lanes (taps_lanes), narrowed to the fewest
    powers of two, at least TAPS_MIN_LANES, that hold a group's result channels where they are
    fewer.  A narrow vector does the same useful work per instruction as a wide one mostly past
    the channels, and where the CPU runs a wide vector as two halves (AMD's Zen 4 runs AVX-512 so)
    it takes half the time: on PoCL there ResNeXt's 3x3 layers of 8 channels a group ran vectors of
    8 in 0.71-0.78x the time of vectors of 16 (docs/performance.md)."""
    lanes = taps_lanes(problem, device)
    if not lanes:
        return 0
    narrow = TAPS_MIN_LANES
    while narrow < min(lanes, _result_channels(problem)):
        narrow *= 2
    return min(lanes, narrow)


def channels_offered(problem: Problem, device) -> bool:
    """Whether the channel tiles serve ``problem`` on ``device``: a forward or data gradient on a
    CPU with vector lanes.  There channels_tiles is never empty (8 pixels x 1 vector takes 10 of
    the 13 vector registers AVX2's 16 leave), so the rules ask this rather than rank every tile."""
    return channels_serve(problem) and bool(channels_lanes(problem, device))


def channels_tiles(problem: Problem, device) -> list[tuple[int, int]]:
    """(PX, NB) tiles for the channel tiles, best first: those whose PX x NB sums (CHANNELS_MIN_SUMS
    at least), NB weight vectors and a broadcast fit CHANNELS_REGISTERS of the vector registers, by
    the launch's span: the work-items a core runs one after another (a group's result channels in
    blocks of NB x VN, a row's pixels in tiles of PX: the waste of both counts) times a contraction
    step's cycles (its FMAs, or its PX + NB loads where more); blocks whose packed weight would not
    stay in a core's cache last (CHANNELS_CACHE_SHARE)."""
    g = problem.geometry
    if not channels_offered(problem, device):
        return []
    lanes = channels_lanes(problem, device)
    fit = limits.of(device)
    registers = vector_registers(fit) * CHANNELS_REGISTERS
    rc = _result_channels(problem)
    frames = {px: channels_frame(problem, px) for px in range(1, int(registers))}  # each depends on PX alone
    costs = []
    for nb in range(1, int(registers)):
        for px in range(1, int(registers)):
            sums = px * nb
            if sums + nb + 1 > registers:
                break
            if sums < CHANNELS_MIN_SUMS:
                continue
            frame = frames[px]
            tiles = channels_tiles_count(problem, frame, px)
            items = tiles * g.groups * -(-rc // (nb * lanes))
            block_bytes = g.kernel_volume * frame["SC"] * nb * lanes * problem.itemsize
            spills = nb > 1 and fit.core_cache and block_bytes > fit.core_cache // CHANNELS_CACHE_SHARE
            # the launch's span: rounds of a work-item a core, each a contraction step's cycles
            span = -(-items // fit.compute_units) * max(sums, px + nb)
            costs.append((bool(spills), span, -sums, (px, nb)))
    return [tile for *_, tile in sorted(costs)]


def channels_tiles_first(problem: Problem, device) -> bool:
    """Whether direct's channel tiles come first for a forward or data gradient on a CPU: the
    activations channels-last (which the GEMM families' CPU kernels cannot read: they ran in GPU
    tiles at 6-15x the channel tiles' time on PoCL), not a tiny pass nor a depthwise layer of
    several groups (depthwise_rows' own), where the tiles serve (channels_offered).  Channels-first
    they come before im2col only for some layers (channels_tiles_before_columns)."""
    g = problem.geometry
    return (problem.layout != CHANNELS_FIRST and not cpu_tiny(g) and not grouped_depthwise(g)
            and channels_offered(problem, device))


# Channels-first, the channel tiles come before im2col (where Winograd and gemm1x1 do not come
# first) for layers whose column buffer is long against the work each of its values feeds: 3D
# kernels of CHANNELS_MIN_TAPS taps or more (3x3x3), dilated kernels, and result channels a group from
# CHANNELS_NARROW[0] to CHANNELS_NARROW[1] (im2col's GEMM then has a row block or two a group).  On
# PoCL (a 2-core AMD EPYC with AVX-512, 2 threads; docs/perf/pocl-2t-channels-first-tiles-design.txt,
# and the channels-last list's layers channels-first) the tiles ran 3x3x3 layers of 16-128
# channels in 0.49-0.85x im2col's time (8 passes), dilated 3x3 layers of 128-512 channels in
# 0.80-0.98x (6), layers of 8 and 16 channels a group in 0.54-0.92x (8); where none of these held
# they ran 0.87-1.27x (a 3x1x1 kernel 1.26x, 4 channels a group 1.30-1.67x, 512 channels at 7x7
# 1.21-1.25x, 1D k3 1.06-1.08x), and 2D kernels of many taps lost too (ResNet's 7x7 stem 1.18x).
# On 18 layers written before either list was measured (pocl-2t-channels-first-tiles-holdout.txt)
# the 18 passes it takes ran 0.786x (0.44-1.84x; the two over 1.05x again, 3 rounds: 1.09x and
# 1.00x), the 18 it leaves 1.36x (32 channels a group 0.86-0.92x, a 1D k5 512 0.92-1.01x).
CHANNELS_MIN_TAPS = 27
CHANNELS_NARROW = (8, 16)


def channels_tiles_before_columns(problem: Problem, device) -> bool:
    """Whether direct's channel tiles come before im2col for a channels-first forward or data
    gradient on a CPU (the rule above): not tiny, not depthwise, where the tiles serve."""
    g = problem.geometry
    if problem.layout != CHANNELS_FIRST or cpu_tiny(g) or grouped_depthwise(g):
        return False
    long_columns = ((g.kernel[0] > 1 and g.kernel_volume >= CHANNELS_MIN_TAPS) or any(d > 1 for d in g.dilation)
                    or CHANNELS_NARROW[0] <= _result_channels(problem) <= CHANNELS_NARROW[1])
    return long_columns and channels_offered(problem, device)


def channels_configs(problem: Problem, device) -> list[dict]:
    """The channel tiles' configurations, best first (empty on GPUs, CPUs without vector lanes and
    for the weight gradient)."""
    lanes = channels_lanes(problem, device)
    return [{"PX": px, "NB": nb, "VN": lanes} for px, nb in channels_tiles(problem, device)[:3]]


class Direct(Algorithm):
    name = "direct"
    passes = PASSES
    layouts = LAYOUTS
    description = ("one work-item per output element (forward, data gradient as a gather); one "
                   "work-group per weight element with a tree reduction, or on GPUs per (slice of batch x "
                   "pixels, block of channel pairs) with all the block's sums in registers, or on CPUs per (tile "
                   "of taps, input channel, block of output channels) over dy copied channels-innermost (weight "
                   "gradient)")

    def configs(self, problem, device):
        fit = limits.of(device)
        if problem.pass_ == "backward_weight":
            top = pow2_at_most(min(fit.work_group, 256))
            per_element = [{"wg": wg} for wg in dict.fromkeys((top, max(top // 4, 1)))]
            if not fit.gpu:  # the register tiles first, but for a tiny pass (the per-element kernel builds fastest)
                taps = taps_configs(problem, device)
                return per_element + taps if cpu_tiny(problem.geometry) else taps + per_element
            # on GPUs the blocks first, then a work-group per weight element
            blocks = block_configs(problem, device)
            if blocks and _blocks_under_a_wave(problem, device, blocks[0]):
                return per_element + blocks
            return blocks + per_element
        # best guess first: 256 won every direct layer-pass measured on an H200 (docs/performance.md);
        # a device granting fewer work-items (32 on llvmpipe) gets the largest power of two it allows
        out = [{"wg": wg} for wg in fit.widest(*((256, 64) if fit.gpu else (64, 256)))]
        rows = strip_rows(problem.geometry.out_size[1])
        if problem.pass_ == "forward" and fit.gpu and rows > 1:
            # strips of output rows: each input row loaded once for all the kernel rows it feeds
            # (on an H200, depthwise 3x3 at 56x56: 0.042 ms against 0.084 one output per work-item);
            # first where they pay (strips_pay), else a candidate after one output per work-item
            strip = {"wg": out[0]["wg"], "rows": rows}
            out.insert(0 if strips_pay(problem.geometry, rows) else len(out), strip)
        if not fit.gpu:
            # the channel tiles before the per-element kernel but for a tiny pass (which that builds
            # fastest): the CPU heuristic puts direct first for them channels-last, and tuning times
            # them as direct's first candidate channels-first, where they won on some layers
            # (3x3x3, grouped, dilated: 0.63-0.92x the first candidate's time on PoCL) and lost on
            # most (1.30x over a list of 36 layer-passes: docs/performance.md)
            tiles = channels_configs(problem, device)
            out = out + tiles if cpu_tiny(problem.geometry) else tiles + out
        block = forward_block(problem, device)
        if block is not None:
            first = forward_blocks_first(problem) or grouped_blocks_first(problem) or narrow_blocks_first(problem)
            out.insert(0, block) if first else out.append(block)
        return out

    def plan(self, problem, config, device):
        g = problem.geometry
        wg, rows = config.get("wg", 64), config.get("rows", 1)
        if problem.pass_ == "backward_weight" and "cob" in config:
            return self._blocks_plan(problem, config, device)
        if problem.pass_ == "backward_weight" and "TW" in config:
            return self._taps_plan(problem, config, device)
        if "PX" in config:
            return self._channels_plan(problem, config, device)
        cob = config.get("cob", 1) if problem.pass_ == "forward" else 1
        if problem.geometry.cout_per_group % cob:
            raise ValueError(f"blocks of {cob} output channels do not divide a group's {problem.geometry.cout_per_group}")
        src = source("direct.mako", problem, wg=wg, rows=rows, cob=cob)
        entry = f"clc_direct_{problem.pass_}" + ("_block" if cob > 1 else "_rows" if rows > 1 else "")
        if problem.pass_ == "backward_weight":
            launch = call(src, entry, (wg, g.weight_elements), (wg, 1), Arg("x"), Arg("dy"), Arg("dw"))
        else:
            # one work-item per element of the result: y (forward) or dx (data gradient)
            pixels, channels = ((g.out_pixels, g.out_channels) if problem.pass_ == "forward"
                                else (g.in_pixels, g.in_channels))
            if rows > 1 or cob > 1:  # a work-item per strip of output rows (and block of channels) at one column
                od, oh, ow = g.out_size
                pixels, channels = od * -(-oh // rows) * ow, channels // cob
            # one flat range over the result (direct.mako's `element`): a small image's pixels
            # rounded up to a work-group left 80% of the work-items idle at 7x7 (H200)
            launch = call(src, entry, (rounded(g.batch * pixels * channels, wg or 1),), (wg,) if wg else None,
                          *pass_args(problem, bias_fallback="w"))
        return Plan(problem, self.name, config, (launch,))

    def _blocks_plan(self, problem, config, device):
        """clc_direct_backward_weight_blocks, then (several slices) the fixed-order sum of the slices."""
        g = problem.geometry
        wg, cob, cib, slices = config["wg"], config["cob"], config["cib"], config["slices"]
        lanes = config.get("lanes", 1)
        if wg % lanes:
            raise ValueError(f"{lanes} lanes do not divide a work-group of {wg}")
        if g.cout_per_group % cob or g.cin_per_group % cib:
            raise ValueError(f"blocks of {cob} x {cib} channels do not divide a group's "
                             f"{g.cout_per_group} x {g.cin_per_group}")
        sums = cob * cib * g.kernel_volume
        # the sums pass through local memory a chunk at a time, in half of it at most
        chunk = max(1, min(sums, limits.of(device).local_mem // 2 // ((wg + 1) * problem.itemsize)))
        elements = g.weight_elements
        index = problem.index_type(slices * elements)
        src = source("direct.mako", problem, index, writes_result=False, wg=wg, cob=cob, cib=cib,
                     slices=slices, chunk=chunk, lanes=lanes)
        blocks = g.groups * (g.cout_per_group // cob) * (g.cin_per_group // cib)
        out = Arg("partial", with_offset=False) if slices > 1 else Arg("dw")
        sums_call = call(src, "clc_direct_backward_weight_blocks", (slices * wg, -(-blocks // lanes)), (wg, 1),
                         Arg("x"), Arg("dy"), out)
        if slices == 1:
            return Plan(problem, self.name, config, (sums_call,))
        return Plan(problem, self.name, config, (sums_call, splitk_sum(problem, index, slices, elements)),
                    {"partial": slices * elements * problem.itemsize})

    def _channels_plan(self, problem, config, device):
        """clc_pack_channels (the weight's packed copy), clc_source_rows (the source's padded
        channels-last copy, but where it is read in place), then clc_direct_channels."""
        g = problem.geometry
        px, nb, lanes = config["PX"], config["NB"], config["VN"]
        if not channels_serve(problem):
            raise ValueError(f"direct's channel tiles serve forwards and data gradients, not the {problem.pass_}")
        if px < 1 or nb < 1 or lanes not in (1, 2, 4, 8, 16):
            raise ValueError(f"channel tiles of {px} pixels x {nb} vectors of {lanes} lanes are not a tile")
        block = nb * lanes
        frame = channels_frame(problem, px)
        blocks = -(-frame["RC"] // block)
        frame["OB"] = blocks  # blocks of result channels a group
        packed = g.groups * blocks * g.kernel_volume * frame["SC"] * block
        copied = 0 if frame["flat"] else g.batch * frame["ZD"] * frame["ZH"] * frame["ZW"] * frame["SCH"]
        index = problem.index_type(packed, copied)
        src = source("direct_channels.mako", problem, index, VN=lanes, NB=nb, PX=px, F=frame)
        source_role, result_role = ("dy", "dx") if frame["backward"] else ("x", "y")
        calls = [call(src, "clc_pack_channels", (frame["SC"], g.kernel_volume, g.groups * blocks), None,
                      Arg("w"), Arg("wp", with_offset=False))]
        workspaces = {"wp": packed * problem.itemsize}
        tiles = channels_tiles_count(problem, frame, px)
        if frame["flat"]:
            read = Arg(source_role)
        else:
            copy_size = (frame["ZW"], frame["ZD"] * frame["ZH"], g.batch * -(-frame["SCH"] // lanes))
            calls.append(call(src, "clc_source_rows", copy_size, None, Arg(source_role), Arg("sp", with_offset=False)))
            workspaces["sp"] = copied * problem.itemsize
            read = Arg("sp", with_offset=False)
        calls.append(call(src, "clc_direct_channels", (tiles, g.groups * blocks), (taps_group(tiles, device), 1),
                          read, Arg("wp", with_offset=False), *epilogue_args(problem), Arg(result_role)))
        return Plan(problem, self.name, config, tuple(calls), workspaces)

    def _taps_plan(self, problem, config, device):
        """Per chunk of the batch: clc_dy_rows (dy's copy), then clc_direct_backward_weight_taps
        into dw (later chunks adding on), or into the slices' partial sums, added up at the end in
        a fixed order and rounded to the storage once (several slices, or 16-bit storage summed
        over several chunks)."""
        g = problem.geometry
        th, tw, nb, lanes, slices = config["TH"], config["TW"], config["NB"], config["VN"], config["slices"]
        cb = config.get("CB", 1)
        if not (1 <= th <= g.kernel[1] and 1 <= tw <= g.kernel[2]):
            raise ValueError(f"tiles of {th} x {tw} taps do not fit a kernel of {g.kernel[1]} x {g.kernel[2]}")
        if cb < 1 or g.cin_per_group % cb:
            raise ValueError(f"blocks of {cb} input channels do not divide a group's {g.cin_per_group}")
        chunk_batch = taps_chunk(problem, device, nb, lanes)
        if not chunk_batch:
            raise ValueError("one image's copy of dy exceeds the workspace limit (CLCONV_WORKSPACE_LIMIT)")
        block = nb * lanes
        blocks = -(-g.cout_per_group // block)
        dyt = g.groups * chunk_batch * g.out_pixels * blocks * block
        chunks = g.batch // chunk_batch
        partial = slices > 1 or (chunks > 1 and problem.storage_itemsize < problem.itemsize)
        index = problem.index_type(dyt, slices * g.weight_elements)
        src = source("direct_taps.mako", problem, index, writes_result=False, VN=lanes, NB=nb, TH=th, TW=tw, CB=cb,
                     chunk_batch=chunk_batch, slices=slices, partial=partial, accumulate=chunks > 1)
        out = Arg("partial", with_offset=False) if partial else Arg("dw")
        # clc_dy_rows: a work-item per tile of lanes pixels x lanes channels; the taps: per (tile of
        # taps, CB input channels, (slice, group, block))
        copy_size = (-(-g.out_pixels // lanes), g.groups * blocks * nb, chunk_batch)
        copy_group = (taps_group(copy_size[0], device), 1, 1)
        taps_size = (g.kernel[0] * -(-g.kernel[1] // th) * -(-g.kernel[2] // tw), g.cin_per_group // cb,
                     slices * g.groups * blocks)
        taps_group_size = (1, taps_group(taps_size[1], device), 1)
        calls = []
        for chunk in range(0, g.batch, chunk_batch):
            calls.append(call(src, "clc_dy_rows", copy_size, copy_group,
                              Arg("dy"), Arg("dyt", with_offset=False), np.int32(chunk)))
            calls.append(call(src, "clc_direct_backward_weight_taps", taps_size, taps_group_size,
                              Arg("x"), Arg("dyt", with_offset=False), out, np.int32(chunk)))
        workspaces = {"dyt": dyt * problem.itemsize}
        if partial:
            calls.append(splitk_sum(problem, index, slices, g.weight_elements))
            workspaces["partial"] = slices * g.weight_elements * problem.itemsize
        return Plan(problem, self.name, config, tuple(calls), workspaces)
