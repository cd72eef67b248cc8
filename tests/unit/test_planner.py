"""The planner's choices without running anything: the heuristic order on CPUs and GPUs, the bounded
candidate set, and algorithms that decline a problem, saying why (through the public ops too: a
named algorithm that declines is a ValueError naming it, raised before anything is built)."""

from __future__ import annotations


from dataclasses import replace

import pytest

import clconv
from clconv import limits, planner
from clconv.algorithms import REGISTRY
from clconv.algorithms.direct import CPU_TINY_FLOPS
from clconv.device import is_gpu
from clconv.geometry import resolve_conv
from clconv.passes import PASSES
from clconv.plan import Problem
from clconv.planner import candidates, heuristic_order
from clconv.tools.devices import H200

from cases import GRADIENT_CASES, geometry
from helpers import fake_device, random

ODD_3X3 = "n2g1c5o7i9x9k3x3s1x1p1x1d1x1"


def _problem(tag: str, pass_: str = "forward") -> Problem:
    return Problem(geometry(tag), pass_, "float32")


def test_cpu_heuristic_prefers_column_buffers_and_1x1_gemms():
    cpu = fake_device(gpu=False, compute_units=2)

    def first(tag, pass_):
        return heuristic_order(_problem(tag, pass_), cpu)[0]

    assert [first("n2g1c32o32i16x16k3x3s1x1p1x1d1x1", p) for p in PASSES] == ["im2col"] * 3
    assert [first("n3g1c64o40i9x9k1x1s1x1p0x0d1x1", p) for p in PASSES] == ["gemm1x1", "gemm1x1", "im2col"]
    assert first("n2g1c64o48i15x15k1x1s2x2p0x0d1x1", "forward") == "im2col"  # strided 1x1: no row form
    assert [first("n2g6c6o6i7x7k3x3s1x1p1x1d1x1", p) for p in PASSES] == ["depthwise_rows"] * 3
    # a tiny pass takes the kernel that builds fastest (PoCL: ~1 s, against 2-7 s for a GEMM's programs)
    assert geometry(ODD_3X3).flops <= CPU_TINY_FLOPS
    assert [first(ODD_3X3, p) for p in PASSES] == ["direct"] * 3


def test_cpu_heuristic_puts_winograd_first_for_forwards_with_channels_enough():
    cpu = fake_device(gpu=False, compute_units=2)
    limits.register(cpu, replace(limits.of(cpu), float_lanes=8, double_lanes=4))  # AVX2

    def first(tag, pass_="forward", layout="channels_first", dtype="float32"):
        return heuristic_order(Problem(geometry(tag), pass_, dtype, layout=layout), cpu)[0]

    # 64+ channels in and out per group, stride 1, 3x3 or 5x5: the forward; the data gradient of a
    # 3x3 layer from 96 4x4 tiles (the weight gradient never: direct's taps where their rule holds,
    # else im2col; 49 output pixels are too few for the taps)
    assert [first("n1g1c256o512i7x7k3x3s1x1p1x1d1x1", p) for p in PASSES] == ["winograd", "im2col", "im2col"]
    for tag in ("n2g2c128o256i14x14k3x3s1x1p1x1d1x1",  # 32 tiles
                "n1g1c64o64i28x28k5x5s1x1p2x2d1x1", "n4g1c128o128i14x14k3x3s1x1p1x1d1x1"):  # 5x5; 64 tiles
        assert [first(tag, p) for p in PASSES] == ["winograd", "im2col", "direct"], tag
    for tag in ("n4g1c64o64i28x28k3x3s1x1p1x1d1x1", "n2g1c128o128i28x28k3x3s1x1p1x1d1x1"):  # 196 and 98 tiles
        assert [first(tag, p) for p in PASSES] == ["winograd", "winograd", "direct"], tag
    assert first("n4g1c64o64i28x28k3x3s1x1p1x1d1x1", dtype="float64") == "winograd"
    # a 7x7 kernel from 128 channels: the forward, and the data gradient with tiles enough (144 4x4)
    assert [first("n1g1c128o128i46x46k7x7s1x1p3x3d1x1", p) for p in PASSES] == ["winograd", "winograd", "direct"]
    assert [first("n1g1c128o256i14x14k7x7s1x1p3x3d1x1", p) for p in PASSES] == ["winograd", "im2col", "direct"]
    # fewer channels (in or out, per group; under 128 for a 7x7 kernel), a stride: im2col; a
    # dilation: direct's register tiles of channels (direct.channels_tiles_before_columns)
    for tag in ("n4g1c32o64i56x56k3x3s1x1p1x1d1x1", "n4g1c64o48i28x28k3x3s1x1p1x1d1x1",
                "n2g4c128o128i14x14k3x3s1x1p1x1d1x1", "n4g1c64o64i28x28k3x3s2x2p1x1d1x1",
                "n4g1c64o64i28x28k7x7s1x1p3x3d1x1", "n2g1c32o32i28x28k5x5s1x1p2x2d1x1"):
        assert first(tag) == "im2col", tag
    assert first("n1g1c128o128i28x28k3x3s1x1p2x2d2x2") == "direct"
    # channels-last: direct's register tiles of channels (the GEMMs' CPU kernels read channels-first rows)
    assert first("n4g1c64o64i28x28k3x3s1x1p1x1d1x1", layout="channels_last") == "direct"
    # a CPU without vector lanes (llvmpipe) keeps im2col
    assert heuristic_order(_problem("n4g1c64o64i28x28k3x3s1x1p1x1d1x1"), fake_device(gpu=False, compute_units=2))[0] \
        == "im2col"


def test_cpu_heuristic_puts_the_taps_first_for_long_column_rows():
    """direct's CPU weight gradient in tiles of taps (direct.taps_first): C_in/group x taps at least 2x
    C_out/group, 128 output pixels at least, not 1x1, not depthwise, on a CPU with vector lanes."""
    cpu = fake_device(gpu=False, compute_units=2)
    limits.register(cpu, replace(limits.of(cpu), float_lanes=16, double_lanes=8))  # AVX-512

    def first(tag):
        return heuristic_order(_problem(tag, "backward_weight"), cpu)[0]

    for tag in ("n2g1c48o64i17x17k5x5s1x1p2x2d1x1",     # 1200 / 64
                "n2g1c3o64i112x112k7x7s2x2p3x3d1x1",    # ResNet's stem: 147 / 64
                "n4g1c16o32i56x56k3x3s1x1p1x1d1x1",     # 144 / 32
                "n8g1c64o64i4096k3s1p1d1",              # 1D: 192 / 64
                "n1g1c32o32i14x18x18k3x3x3s1x1x1p1x1x1d1x1x1",  # 3D
                "n1g32c256o256i14x14k3x3s1x1p1x1d1x1"):  # 8 channels a group: 72 / 8
        assert first(tag) == "direct", tag
    for tag in ("n2g1c3o64i224x224k3x3s1x1p1x1d1x1",    # a first layer: 27 / 64
                "n1g1c3o32i224x224k3x3s2x2p1x1d1x1",    # 27 / 32
                "n2g1c256o256i7x7k3x3s1x1p1x1d1x1",     # 98 output pixels
                "n4g1c256o64i28x28k1x1s1x1p0x0d1x1"):   # 1x1
        assert first(tag) != "direct", tag
    assert first("n4g144c144o144i28x28k3x3s1x1p1x1d1x1") == "depthwise_rows"
    # channels-last, where the GEMMs' CPU kernels do not read rows: the taps whatever the bounds say
    for tag in ("n2g1c3o64i224x224k3x3s1x1p1x1d1x1", "n2g1c256o256i7x7k3x3s1x1p1x1d1x1"):
        assert heuristic_order(Problem(geometry(tag), "backward_weight", "float32", layout="channels_last"), cpu)[0] \
            == "direct", tag
    # 1x1: channels-last, the taps with CB input channels a work-item; channels-first, gemm1x1 or im2col
    assert heuristic_order(Problem(geometry("n4g1c256o64i28x28k1x1s1x1p0x0d1x1"), "backward_weight", "float32",
                                   layout="channels_last"), cpu)[0] == "direct"
    # no vector lanes (llvmpipe): no taps
    assert heuristic_order(_problem("n2g1c48o64i17x17k5x5s1x1p2x2d1x1", "backward_weight"),
                           fake_device(gpu=False, compute_units=2))[0] == "im2col"


LARGE = ("n32g1c64o64i56x56k3x3s1x1p1x1d1x1", "n32g1c256o64i56x56k1x1s1x1p0x0d1x1",
         "n32g144c144o144i56x56k3x3s1x1p1x1d1x1")


def test_candidate_set_is_bounded_and_has_every_serving_algorithm(queue):
    """At most MAX_CANDIDATES in the heuristic's order, then one configuration of each serving
    algorithm those left out (so a new algorithm is measured when tuning): nothing else."""
    for tag in LARGE:
        for pass_ in PASSES:
            problem = _problem(tag, pass_)
            options = candidates(problem, queue.device)
            names = [algorithm.name for algorithm, _ in options]
            serving = {n for n in clconv.algorithms(pass_) if REGISTRY[n].decline_reason(problem, queue.device) is None}
            assert set(names) == serving, (tag, pass_, names)
            head, rest = names[:planner.MAX_CANDIDATES], names[planner.MAX_CANDIDATES:]
            assert 1 <= len(head) and len(rest) == len(set(rest)) and not set(rest) & set(head), (tag, pass_, names)


def test_heuristic_picks(queue):
    def first(tag, pass_):
        return candidates(_problem(tag, pass_), queue.device)[0][0].name

    assert first(LARGE[1], "forward") == "gemm1x1"
    # depthwise: `direct` measured fastest of these on the H200; the row kernel on CPUs
    expected = "direct" if is_gpu(queue.device) else "depthwise_rows"
    assert first(LARGE[2], "forward") == expected
    # a 64-channel 3x3: Winograd on GPUs and on CPUs with vector lanes (a column buffer on llvmpipe)
    lanes = limits.of(queue.device).lanes(4) >= 4
    assert first(LARGE[0], "forward") in (("winograd",) if is_gpu(queue.device) or lanes else ("implicit_gemm", "im2col"))


H200_LIKE = H200.stand_in()  # as the planner saw the H200 of the stored runs


@pytest.mark.parametrize("tag, pass_, wanted", [
    ("n32g1c64o64i56x56k3x3s1x1p1x1d1x1", "forward", True),        # tuning picked it on the H200
    ("n32g1c512o512i28x28k3x3s1x1p1x1d1x1", "backward_data", True),
    ("n8g1c256o160i7x7k3x3s1x1p1x1d1x1", "forward", False),        # few tiles: split-K's pieces, 0.69x Winograd's time
    ("n32g1c256o256i7x7k3x3s1x1p1x1d1x1", "forward", True),        # 1.8 GFLOP: split-K's best 1.45x Winograd's time
    ("n1g1c1024o1024i14x14k3x3s1x1p1x1d1x1", "backward_data", False),  # 49 tiles: 1.12x im2col's time
    ("n2g1c512o512i14x14k3x3s1x1p1x1d1x1", "backward_data", True),  # 98 tiles: 0.92x (1.12x with scalar loads)
    ("n2g1c1024o1024i16x16k3x3s1x1p1x1d1x1", "backward_data", True),  # 128 tiles: 0.63x
    ("n8g1c160o320i7x7k3x3s1x1p1x1d1x1", "backward_data", False),  # 128 tiles, 0.36 GFLOP: 1.02x
    ("n1g1c512o512i28x28k3x3s1x1p1x1d1x1", "backward_data", True),   # 196 tiles, 3.7 GFLOP: 0.81x
    ("n8g1c128o256i13x13k3x3s1x1p1x1d1x1", "backward_data", False),  # 0.8 GFLOP: 1.27x im2col's time
    ("n32g1c256o256i14x14k3x3s1x1p1x1d1x1", "backward_data", True),  # 1568 tiles: 0.7x im2col's time
    ("n8g1c32o64i100x100k3x3s1x1p1x1d1x1", "forward", True),       # 32 input channels: 0.94x implicit_gemm's
    ("n8g1c24o24i56x56k3x3s1x1p1x1d1x1", "forward", False),        # 24 input channels: 1.95x implicit_gemm's
    ("n32g8c256o256i28x28k3x3s1x1p1x1d1x1", "forward", True),      # 8 groups of 32: 0.72x implicit_gemm's
    ("n32g32c256o256i28x28k3x3s1x1p1x1d1x1", "forward", False),    # 8 channels a group: `direct`
    ("n8g1c3o64i224x224k3x3s1x1p1x1d1x1", "forward", False),       # 3 input channels: a GEMM of K = 3
    ("n32g1c64o64i56x56k3x3s2x2p1x1d1x1", "forward", False),       # stride 2: it declines
    ("n32g1c64o64i56x56k3x3s1x1p1x1d1x1", "backward_weight", True),   # 0.83x split-K's time
    ("n32g1c512o512i7x7k3x3s1x1p1x1d1x1", "backward_weight", True),   # 512 tiles: 0.67x
    ("n1g1c256o256i14x14k3x3s1x1p1x1d1x1", "backward_weight", False),  # 0.23 GFLOP: implicit_gemm
    ("n8g1c256o160i7x7k3x3s1x1p1x1d1x1", "backward_weight", False),   # 0.37 GFLOP: 1.5x implicit_gemm's
    ("n8g1c32o64i56x56k3x3s1x1p1x1d1x1", "backward_weight", True),    # 2048 channel pairs: 0.65x split-K's
    # 32 groups of 8 x 8: 0.73x split-K's time, but direct's blocks 0.23x Winograd's (eighth session)
    ("n32g32c256o256i28x28k3x3s1x1p1x1d1x1", "backward_weight", False),
    ("n32g16c512o512i14x14k3x3s1x1p1x1d1x1", "backward_weight", True),  # 16 groups of 32 x 32
    ("n8g1c24o24i56x56k3x3s1x1p1x1d1x1", "backward_weight", False),   # 576 channel pairs: 1.37x split-K's
    # fewer channels where the pass is large (FEW_CHANNELS_MIN_FLOPS): Res2Net's 26 -> 26 at 1.2 GFLOP
    # 0.57-0.65x the others' best on every pass, ahead of direct's blocks for the weight gradient
    ("n32g1c26o26i56x56k3x3s1x1p1x1d1x1", "forward", True),
    ("n32g1c26o26i56x56k3x3s1x1p1x1d1x1", "backward_data", True),
    ("n32g1c26o26i56x56k3x3s1x1p1x1d1x1", "backward_weight", True),
    ("n32g14c336o336i28x28k3x3s1x1p1x1d1x1", "backward_data", True),   # RegNetY's groups of 24: 0.46x
    ("n16g1c16o64i55x55k3x3s1x1p1x1d1x1", "forward", False),  # SqueezeNet's 16 -> 64, 0.89 GFLOP: 1.35x
    ("n32g16c128o128i56x56k3x3s1x1p1x1d1x1", "forward", False),  # 8 a group, 3.7 GFLOP: the channel floor
    # F(2x2, 7x7): OpenPose's 7x7 128 -> 128 at 46x46 ran in 0.33-0.56x the others' best, every pass
    ("n8g1c128o128i46x46k7x7s1x1p3x3d1x1", "forward", True),
    ("n8g1c128o128i46x46k7x7s1x1p3x3d1x1", "backward_data", True),
    ("n8g1c128o128i46x46k7x7s1x1p3x3d1x1", "backward_weight", True),
    # FCN's fc6, a 7x7 kernel over a 7x7 input (Winograd.saving 0.77 and 0.05): 1.9x and 3.5x the best
    ("n8g1c512o4096i7x7k7x7s1x1p0x0d1x1", "forward", False),
    ("n8g1c512o4096i7x7k7x7s1x1p0x0d1x1", "backward_data", False),
])
def test_gpu_heuristic_puts_winograd_first_where_it_pays(tag, pass_, wanted):
    order = heuristic_order(_problem(tag, pass_), H200_LIKE)
    assert (order[0] == "winograd") is wanted, order


def test_gpu_heuristic_takes_few_channel_data_gradients_to_im2col():
    """The implicit GEMM's rows are the input channels; im2col's are channels x taps."""
    assert heuristic_order(_problem("n8g1c3o32i100x100k3x3s1x1p1x1d1x1", "backward_data"), H200_LIKE)[0] == "im2col"
    assert heuristic_order(_problem("n8g1c32o64i100x100k3x3s1x1p1x1d1x1", "backward_data"), H200_LIKE)[0] != "im2col"
    # a 1x1 layer has no taps to add rows: its gather keeps going first
    assert heuristic_order(_problem("n8g1c8o64i64x64k1x1s1x1p0x0d1x1", "backward_data"), H200_LIKE)[0] != "im2col"
    # one input channel: 9 rows against 1, even under FEW_ROWS (SuperPoint's gray 3x3 at 240x320,
    # batch 1: 0.029 against 0.171 ms on an H100)
    assert heuristic_order(_problem("n1g1c1o64i240x320k3x3s1x1p1x1d1x1", "backward_data"), H200_LIKE)[0] == "im2col"


@pytest.mark.parametrize("tag, wanted", [
    ("n32g1c48o64i35x35k5x5s1x1p2x2d1x1", "im2col"),           # 64 x 25 = 1600: 0.54x implicit_gemm's time
    ("n32g1c128o128i17x17k1x7s1x1p0x3d1x1", "im2col"),         # 128 x 7 = 896: 0.79x
    ("n8g1c512o512i33x33k3x3s1x1p2x2d2x2", "im2col"),          # dilated, 4608: 0.74x
    ("n4g1c128o128i16000k3s1p1d1", "implicit_gemm"),           # 1D, 128 x 3 = 384: 0.86x im2col's time
    ("n16g1c24o48i16384k15s1p7d1", "im2col"),                  # Wave-U-Net's 1D k15, 48 x 15 = 720: 0.66x
    ("n32g1c64o64i56x56k3x3s1x1p1x1d1x1", "implicit_gemm"),    # 64 x 9 = 576: im2col 1.21x (ResNet-50's)
    ("n8g1c24o24i56x56k3x3s1x1p1x1d1x1", "implicit_gemm"),     # 24 x 9 = 216: 0.82x
])
def test_gpu_heuristic_takes_long_gathers_of_the_data_gradient_to_im2col(tag, wanted):
    """The implicit data gradient decodes a tap and a source pixel per element of its contraction
    (output channels x taps): from planner.LONG_GATHER on, im2col's GEMM over the channels comes
    before it (after Winograd, which the 5x5 and the dilated layer here take first)."""
    order = heuristic_order(_problem(tag, "backward_data"), H200_LIKE)
    gathers = [name for name in order if name in ("im2col", "implicit_gemm")]
    assert gathers[0] == wanted, order


def test_gpu_heuristic_keeps_tiny_forwards_from_winograd():
    """Winograd's three launches cost ~30 us of kernel time however small the layer: under
    WINOGRAD_FORWARD_MIN_FLOPS one implicit GEMM launch is faster (15 against 30 us at 29 MFLOP)."""
    from clconv.planner import WINOGRAD_FORWARD_MIN_FLOPS

    tiny = _problem("n2g1c32o64i20x20k3x3s1x1p1x1d1x1")
    assert tiny.geometry.flops < WINOGRAD_FORWARD_MIN_FLOPS
    assert heuristic_order(tiny, H200_LIKE)[0] == "implicit_gemm"
    short = _problem("n4g1c48o96i16x16k3x3s1x1p1x1d1x1")  # 85 MFLOP over 48 x 9: 22 against 53 us
    assert short.geometry.flops >= WINOGRAD_FORWARD_MIN_FLOPS
    assert "winograd" not in heuristic_order(short, H200_LIKE)[:2], heuristic_order(short, H200_LIKE)
    assert heuristic_order(short, H200_LIKE)[0] == "implicit_gemm"


@pytest.mark.parametrize("tag, wanted", [
    ("n1g1c128o128i14x14k3x3s1x1p1x1d1x1", True),     # 58 MFLOP over 1152: 0.54x Winograd's time
    ("n1g1c128o128i7x7k5x5s1x1p2x2d1x1", True),       # 40 MFLOP over 3200: 0.63x
    ("n1g1c64o64i4x8x8k3x3x3s1x1x1p1x1x1d1x1x1", True),  # 3D, written after the rule: 0.32x implicit_gemm's
    ("n4g1c256o64i64k5s1p2d1", True),                 # 1D k5: 0.73x
    ("n4g1c192o192i12x12k3x3s1x1p1x1d1x1", True),     # 382 MFLOP: 0.83x Winograd's
    ("n2g1c256o256i16x16k3x3s1x1p1x1d1x1", False),    # 604 MFLOP: split-K 1.38x Winograd's time
    ("n4g1c48o96i16x16k3x3s1x1p1x1d1x1", False),      # 48 x 9 = 432 channel-taps: implicit_gemm
    ("n32g1c32o64i20x20k4x4s2x2p0x0d1x1", False),     # the Atari DQN's 32 x 16 = 512: 1.09x implicit_gemm's
    ("n32g1c64o64i20x20k3x3s2x2p0x0d1x1", True),      # 64 x 9 = 576, the shortest split-K won at
    ("n8g1c512o256i28x28k1x1s2x2p0x0d1x1", False),    # 1x1 over 512 channels: gemm1x1 (411 MFLOP too)
    ("n1g1c2048o1000i7x7k1x1s1x1p0x0d1x1", True),     # a 1x1 classifier head: 0.28x gemm1x1's time
    ("n1g2c256o256i14x14k3x3s1x1p1x1d1x1", False),    # grouped: not measured
])
def test_gpu_heuristic_cuts_small_forwards_with_long_contractions(tag, wanted):
    """planner._small_forward_to_splitk: a forward of 2^25 to 384 Mi FLOPs over at least 576
    input channels x taps runs split-K first on GPUs (its output is a handful of tiles, each over
    the whole contraction); never on a CPU, nor channels-last (unmeasured)."""
    problem = _problem(tag)
    assert (heuristic_order(problem, H200_LIKE)[0] == "splitk") is wanted, heuristic_order(problem, H200_LIKE)
    cpu = fake_device(gpu=False, compute_units=2)
    assert heuristic_order(problem, cpu)[0] != "splitk"
    last = Problem(problem.geometry, "forward", "float32", layout="channels_last")
    assert heuristic_order(last, H200_LIKE)[0] != "splitk"


@pytest.mark.parametrize("tag, wanted", [
    ("n4g1c64o64i12x12k5x5s1x1p2x2d1x1", True),      # 576 products, 0.12 GFLOP: direct 0.45x split-K's time
    ("n8g1c256o160i7x7k3x3s1x1p1x1d1x1", True),      # 392, 0.29: 0.78x implicit_gemm's
    ("n1g1c128o128i14x14k3x3s1x1p1x1d1x1", True),    # 196 products: 0.52x implicit_gemm's time
    ("n1g1c512o512i7x7k3x3s1x1p1x1d1x1", False),     # 49 products: direct lost, 2.59x
    ("n8g1c512o512i14x14k3x3s1x1p1x1d1x1", False),   # 1568 products and 7.4 GFLOP: Winograd
    ("n2g1c192o192i14x14k5x5s1x1p2x2d1x1", False),   # 392 products but 0.72 GFLOP: direct lost, 1.52x
])
def test_gpu_heuristic_runs_short_small_weight_gradients_directly(tag, wanted):
    """planner._short_weight_gradient: 192-1024 products per weight and at most 2^29 FLOPs."""
    assert (heuristic_order(_problem(tag, "backward_weight"), H200_LIKE)[0] == "direct") is wanted


@pytest.mark.parametrize("tag, wanted", [
    ("n4g1c1024o128i7x7k1x1s1x1p0x0d1x1", True),      # DenseNet-121's 1024 -> 128, 2^17 weights: direct best
    ("n4g1c256o256i16x16k1x1s1x1p0x0d1x1", True),     # 2^16 weights: direct 0.45x split-K's time
    ("n1g1c1024o256i14x14k1x1s1x1p0x0d1x1", False),   # 2^18 weights: direct 1.25x gemm1x1's time
    ("n5g1c1024o256i14x14k1x1s1x1p0x0d1x1", False),   # the same at batch 5: direct 1.58x split-K's
    ("n8g1c320o1280i7x7k1x1s1x1p0x0d1x1", False),     # EfficientNet-B0's head: direct 1.27x gemm1x1's
    ("n4g1c192o192i12x12k3x3s1x1p1x1d1x1", True),     # 3x3, 331776 weights: direct best (the bound is 1x1s')
])
def test_gpu_heuristic_keeps_full_pointwise_weight_gradients_from_direct(tag, wanted):
    """planner._full_pointwise_weights: a short 1x1 weight gradient of more than
    POINTWISE_BLOCK_WEIGHTS weights goes to the GEMMs, whose tiles are full both ways."""
    assert (heuristic_order(_problem(tag, "backward_weight"), H200_LIKE)[0] == "direct") is wanted


@pytest.mark.parametrize("tag, wanted", [
    ("n64g1c1o8i30x25x25k7x3x3s1x1x1p0x0x0d1x1x1", True),    # HybridSN's 7x3x3 1 -> 8: im2col 1.63x direct's time
    ("n1g1c3o10i480x640k3x3s1x1p0x0d1x1", True),              # MTCNN's 3 -> 10: 1.37x
    ("n4g1c8o8i32x56x56k1x3x3s1x1x1p0x1x1d1x1x1", True),      # SlowFast's 8 -> 8: 1.84x
    ("n64g1c3o16i64x64k3x3s1x1p1x1d1x1", False),              # 16 output channels, a tile's step: im2col 0.96x
    ("n8g1c64o12i128x128k3x3s1x1p1x1d1x1", False),            # 64 input channels: Winograd, 0.34x direct's
])
def test_gpu_heuristic_gathers_data_gradients_of_few_channels_directly(tag, wanted):
    """planner._narrow_data_gradient: fewer output channels than a step of the tiles' contraction and
    at most FEW_ROWS input channels: direct's gather first."""
    assert (heuristic_order(_problem(tag, "backward_data"), H200_LIKE)[0] == "direct") is wanted


@pytest.mark.parametrize("tag, wanted", [
    ("n32g160c160o160i14x14k1x5s1x1p0x2d1x1", "direct"),     # GhostNetV2's 1x5, 6272 products: 0.53x the depthwise kernel's
    ("n8g1024c1024o1024i7x7k5x5s1x1p2x2d1x1", "direct"),     # FastDepth's 5x5 at 7x7, 392 products: 0.50x
    ("n64g96c96o96i28x28k1x3s1x1p0x1d1x1", "depthwise"),     # MicroNet's 1x3, 50176 products (29 MFLOP): 0.76x direct's
    ("n4g512c512o512i3000k3s1p1d1", "depthwise"),            # Conv-TasNet's 1D k3, 12000 products: 0.76x
    ("n16g256c256o256i250k31s1p15d1", "depthwise"),          # a 1D k31 over 4000 products: 0.56x
])
def test_gpu_heuristic_runs_small_depthwise_weight_gradients_directly(tag, wanted):
    """planner._small_depthwise_weight_gradient: at most SMALL_DEPTHWISE_PRODUCTS per weight over at
    most SMALL_DEPTHWISE_TAPS taps, the depthwise kernel's slices are too short to pay for its second launch."""
    order = heuristic_order(_problem(tag, "backward_weight"), H200_LIKE)
    assert [name for name in order if name in ("direct", "depthwise")][0] == wanted, order


@pytest.mark.parametrize("tag, per_element_first", [
    ("n16g40c40o40i40x40k5x5s2x2p2x2d1x1", True),       # PP-LCNet: 40 work-groups of blocks, 1.91x
    ("n32g80c80o80i14x14k3x3s1x1p1x1d1x1", True),       # GhostNet's cheap 3x3: 80, 1.10x
    ("n32g160c160o160i14x14k1x5s1x1p0x2d1x1", False),   # 160 channels: the blocks, 0.75x
    ("n1g240c240o240i28x28k5x5s2x2p2x2d1x1", False),    # 240 channels: the blocks, 0.48x
    ("n8g1c32o32i64x64k3x3s1x1p1x1d1x1", False),        # not depthwise: the blocks first as before
])
def test_direct_takes_a_work_group_per_weight_where_depthwise_blocks_leave_units_idle(tag, per_element_first):
    """direct._blocks_under_a_wave: a depthwise weight gradient whose one-channel blocks launch
    fewer work-groups than the device's compute units takes a work-group per weight element first."""
    configs = REGISTRY["direct"].configs(_problem(tag, "backward_weight"), H200_LIKE)
    assert ("cob" not in configs[0]) is per_element_first, configs


@pytest.mark.parametrize("tag, cob", [
    ("n32g1c3o32i299x299k3x3s2x2p0x0d1x1", 4),          # Xception's entry: blocks of 4 in 0.69x 8's time
    ("n32g1c3o24i224x224k3x3s2x2p1x1d1x1", 6),          # EfficientFormer's stem: 6, 0.92x
    ("n64g1c3o16i64x64k3x3s1x1p1x1d1x1", 8),            # stride 1 (IMPALA's): 4 ran 1.58x 8's time
    ("n2g1c1o512i48000k10s5p0d1", 8),                   # strided 1D (wav2vec 2.0's): 1.05-1.11x
    ("n32g1c4o1152i32x32k2x2s2x2p0x0d1x1", 8),          # a patch embedding: windows that do not overlap
])
def test_direct_weight_blocks_of_strided_overlapping_windows_take_fewer_output_channels(tag, cob):
    """direct.strided_blocks_halved: one group, a stride over rows or depth shorter than the kernel."""
    configs = REGISTRY["direct"].configs(_problem(tag, "backward_weight"), H200_LIKE)
    assert configs[0]["cob"] == cob, configs


@pytest.mark.parametrize("tag, wanted", [
    ("n16g640c640o640i200k41s1p20d1", 128),                    # Citrinet's 1D k41, 640 blocks: 64 ran 1.49x
    ("n32g768c768o768i512k9s1p4d1", 128),                      # ConvBERT's 1D k9, 768 blocks: 1.42x
    ("n32g32c1024o1024i14x14k3x3s1x1p1x1d1x1", 64),            # ResNeXt's 32 channels a group, 1024 blocks: 0.85x
])
def test_direct_weight_blocks_of_depthwise_layers_take_128_work_items(tag, wanted):
    """direct.block_work_group: 64 work-items from BLOCK_WAVES blocks a compute unit, but not for
    depthwise layers' one-channel blocks."""
    configs = REGISTRY["direct"].configs(_problem(tag, "backward_weight"), H200_LIKE)
    assert configs[0]["wg"] == wanted and "cob" in configs[0], configs


@pytest.mark.parametrize("tag, wanted", [
    ("n1g1c16o16i64x64x64k5x5x5s1x1x1p2x2x2d1x1x1", "splitk"),  # V-Net: blocks of one channel, 2.70x split-K
    ("n4g1c13o29i31x31k5x5s1x1p2x2d1x1", "direct"),           # one channel too, but 72 MFLOP: 0.84x
    ("n4g1c128o19i64x128k1x1s1x1p0x0d1x1", "splitk"),         # Fast-SCNN: 159 MFLOP over 32768 pixels, 2.07x
    ("n2g1c16o16i16x64x64k3x3x3s1x1x1p1x1x1d1x1x1", "direct"),  # blocks of 4 channels: 0.64x
])
def test_gpu_heuristic_takes_weight_blocks_of_one_channel_only_for_small_gradients(tag, wanted):
    """planner._blocks_reuse: direct's weight-gradient blocks under 32 output channels come first
    where a block holds more than one output channel (its input values reused) or the gradient is
    small (at most 2^29 FLOPs) over a contraction too short for split-K's pieces (8192 pixels)."""
    assert heuristic_order(_problem(tag, "backward_weight"), H200_LIKE)[0] == wanted


@pytest.mark.parametrize("tag", [
    "n32g1c256o512i56x56k1x1s2x2p0x0d1x1",    # ResNet's projection: im2col 0.63x gemm1x1's time (best tiles)
    "n32g1c96o192i30x30k1x1s3x3p0x0d1x1",     # stride 3: 0.70x
    "n16g1c256o128i4096k1s2p0d1",              # 1D: 0.92x
])
def test_gpu_heuristic_takes_strided_1x1_data_gradients_to_column_buffers(tag):
    """gemm1x1's strided data gradient stores W^T dy straight into dx with the stride holes' zeros
    (scattered stores); im2col's column buffer and col2im ran faster on an H200
    (docs/perf/h200-tune-strided-1x1.json).  Stride 1 and channels-last keep gemm1x1 first."""
    assert heuristic_order(_problem(tag, "backward_data"), H200_LIKE)[0] == "im2col"
    assert heuristic_order(_problem(tag, "forward"), H200_LIKE)[0] == "gemm1x1"
    unstrided = tag.replace("s2x2", "s1x1").replace("s3x3", "s1x1").replace("s2p", "s1p")
    assert heuristic_order(_problem(unstrided, "backward_data"), H200_LIKE)[0] == "gemm1x1"
    channels_last = Problem(geometry(tag), "backward_data", "float32", layout="channels_last")
    assert heuristic_order(channels_last, H200_LIKE)[0] == "gemm1x1"


@pytest.mark.parametrize("pass_", ["forward", "backward_data"])
def test_gpu_heuristic_runs_few_channels_per_group_directly(pass_):
    """8 channels a group leave a GEMM tile's rows mostly empty: `direct` (0.38x and 0.51x the GEMMs'
    time for ResNeXt-50's 3x3 at 28x28); a dense layer of as few channels too: its forward through
    direct's strips for its 8 output channels (direct.few_outputs_first: an output layer's rule), its
    data gradient through direct's gather (planner._narrow_data_gradient: SlowFast's 1x3x3 8 -> 8,
    0.54x im2col's time); with 32 channels each way the GEMMs."""
    assert heuristic_order(_problem("n32g32c256o256i28x28k3x3s1x1p1x1d1x1", pass_), H200_LIKE)[0] == "direct"
    assert heuristic_order(_problem("n32g1c8o8i28x28k3x3s1x1p1x1d1x1", pass_), H200_LIKE)[0] == "direct"
    assert heuristic_order(_problem("n32g1c32o32i28x28k3x3s1x1p1x1d1x1", pass_), H200_LIKE)[0] != "direct"


@pytest.mark.parametrize("pass_, wanted", [
    ("forward", False),          # F(4x4) 0.31 against implicit_gemm's 0.29 ms on an H200
    ("backward_data", False),    # a tie: 0.311 against 0.313
    ("backward_weight", True),   # 0.26 against split-K's 0.39
])
def test_gpu_heuristic_channels_last_winograd_at_64_channels(pass_, wanted):
    problem = Problem(geometry("n32g1c64o64i56x56k3x3s1x1p1x1d1x1"), pass_, "float32", layout="channels_last")
    assert (heuristic_order(problem, H200_LIKE)[0] == "winograd") is wanted


# -- declines ------------------------------------------------------------------------------------------


def test_depthwise_declines_what_it_cannot_serve(queue):
    dense = _problem("n2g1c4o4i5x5k3x3s1x1p1x1d1x1", "backward_weight")
    assert "depthwise" in REGISTRY["depthwise"].decline_reason(dense, queue.device)
    big = _problem("n1g2c2o2i9x9k7x7s1x1p3x3d1x1", "backward_weight")
    assert "taps" in REGISTRY["depthwise"].decline_reason(big, queue.device)
    assert "backward_weight" in REGISTRY["depthwise"].decline_reason(
        Problem(dense.geometry, "forward", "float32"), queue.device)


def test_depthwise_rows_declines_more_than_one_input_channel_per_group(queue):
    g = resolve_conv(2, (1, 4, 5, 5), (4, 2, 3, 3), None, 1, 1, 1, 2).geometry
    reason = REGISTRY["depthwise_rows"].decline_reason(Problem(g, "forward", "float32"), queue.device)
    assert reason is not None and "C_in/groups = 1" in reason


def test_gemm1x1_declines_padded_1x1(rng):
    x = random(rng, (1, 2, 5, 5))
    w = random(rng, (3, 2, 1, 1))
    with pytest.raises(ValueError, match="gemm1x1"):
        clconv.conv2d(x, w, padding=1, algorithm="gemm1x1")


@pytest.mark.parametrize("pass_", PASSES)
def test_splitk_declines_an_empty_batch_by_name(pass_):
    """Batch 0 runs no kernel (ops returns the empty result); split-K says why it has nothing to
    cut instead of ranking tiles over an empty matrix (a hypothesis find)."""
    problem = _problem("n0g1c1o1i1k1s1p0d1", pass_)
    reason = REGISTRY["splitk"].decline_reason(problem, fake_device(gpu=True, compute_units=8))
    assert reason is not None and ("empty" in reason or "no cut" in reason), reason


@pytest.mark.parametrize("algorithm,pass_,message", [
    ("splitk", "backward_weight", "no cut into two or more pieces"),
    ("gemm1x1", "backward_weight", "1x1"),
    ("gemm1x1", "backward_data", "1x1"),
])
def test_declining_algorithm_raises_value_error_naming_it(rng, algorithm, pass_, message):
    case = GRADIENT_CASES[1]  # 3x2 kernel, contraction 2 x 24 output pixels: too short to cut
    x, w, dy = (random(rng, shape) for shape in (case.input_shape, case.weight_shape, case.output_shape))
    with pytest.raises(ValueError, match=rf"'{algorithm}'.*{message}"):
        if pass_ == "backward_weight":
            clconv.conv2d_weight(x, case.weight_shape, dy, **case.conv_args(), algorithm=algorithm)
        else:
            clconv.conv2d_input(case.input_shape, w, dy, **case.conv_args(), algorithm=algorithm)



def test_cpu_winograd_needs_tiles_enough_with_16_lanes():
    """With 16 float lanes (AVX-512) a 3x3 forward and data gradient take Winograd first only from
    CPU_WINOGRAD_MIN_TILES (16) 4x4 tiles over the batch; with 8 lanes (AVX2) the forward from any
    count and the data gradient from CPU_WINOGRAD_DATA_MIN_TILES (96)."""
    from clconv.planner import CPU_WINOGRAD_DATA_MIN_TILES, CPU_WINOGRAD_MIN_TILES, _cpu_winograd_pays

    device = fake_device(gpu=False, compute_units=2)
    avx512 = replace(limits.of(device), float_lanes=16, double_lanes=8)
    avx2 = replace(avx512, float_lanes=8, double_lanes=4)

    def pays(batch, pass_):
        return _cpu_winograd_pays(Problem(geometry(f"n{batch}g1c256o256i7x7k3x3s1x1p1x1d1x1"), pass_, "float32"), device)

    assert CPU_WINOGRAD_MIN_TILES == {"forward": {16: 16}, "backward_data": {4: CPU_WINOGRAD_DATA_MIN_TILES, 16: 16}}
    assert CPU_WINOGRAD_DATA_MIN_TILES == 96
    original = limits.of(device)
    try:
        limits.register(device, avx512)  # 4 4x4 tiles an image
        for pass_ in ("forward", "backward_data"):
            assert not pays(3, pass_) and pays(4, pass_) and pays(32, pass_)  # 12, 16, 128 tiles
        limits.register(device, avx2)
        assert pays(1, "forward") and pays(3, "forward")
        assert not pays(16, "backward_data") and pays(24, "backward_data")  # 64, 96 tiles
    finally:
        limits.register(device, original)


def test_cpu_5x5_winograd_minimums_by_lanes():
    """A 5x5 layer's own minimums (CPU_WINOGRAD_5X5_MIN_CHANNELS): with 16 lanes the forward and the
    data gradient from 16 channels, the data gradient with CPU_WINOGRAD_5X5_DATA_MIN_TILES (32) 4x4
    tiles; with 8 lanes the forward from 64 and the data gradient never (measured on AVX2 before U
    was packed)."""
    from clconv.planner import CPU_WINOGRAD_5X5_DATA_MIN_TILES, _cpu_winograd_pays

    device = fake_device(gpu=False, compute_units=2)
    avx512 = replace(limits.of(device), float_lanes=16, double_lanes=8)
    avx2 = replace(avx512, float_lanes=8, double_lanes=4)

    def pays(tag, pass_="forward"):
        return _cpu_winograd_pays(Problem(geometry(tag), pass_, "float32"), device)

    assert CPU_WINOGRAD_5X5_DATA_MIN_TILES == 32
    original = limits.of(device)
    try:
        limits.register(device, avx512)
        assert pays("n2g1c16o32i28x28k5x5s1x1p2x2d1x1")                       # GoogLeNet's: 0.91x im2col's time
        assert not pays("n2g1c8o32i28x28k5x5s1x1p2x2d1x1")
        assert pays("n4g1c16o32i28x28k5x5s1x1p2x2d1x1", "backward_data")      # 16 channels: 0.77x (F(4x4, 5x5))
        assert not pays("n4g1c8o16i28x28k5x5s1x1p2x2d1x1", "backward_data")   # 8 channels: 1.60x
        assert pays("n2g1c48o64i17x17k5x5s1x1p2x2d1x1", "backward_data")      # 50 tiles: 0.73x
        assert pays("n2g1c32o96i14x14k5x5s1x1p2x2d1x1", "backward_data")      # 32 tiles: 0.86x
        assert not pays("n1g1c32o32i14x14k5x5s1x1p2x2d1x1", "backward_data")  # 16 tiles: 1.02x
        assert not pays("n2g1c48o128i7x7k5x5s1x1p2x2d1x1", "backward_data")   # 8 tiles: 1.23x
        assert pays("n1g1c64o192i27x27k5x5s1x1p2x2d1x1", "backward_data")     # AlexNet's, 49 tiles: 0.56x
        assert not pays("n4g1c48o128i7x7k5x5s1x1p2x2d1x1", "backward_data")   # 16 tiles: 1.25x
        assert not pays("n2g1c48o64i17x17k5x5s1x1p2x2d1x1", "backward_weight")
        assert not pays("n2g1c48o64i17x17k5x5s1x1p4x4d2x2")                   # dilated
        limits.register(device, avx2)
        assert not pays("n2g1c48o64i17x17k5x5s1x1p2x2d1x1") and pays("n1g1c64o64i28x28k5x5s1x1p2x2d1x1")
        assert not pays("n1g1c64o64i28x28k5x5s1x1p2x2d1x1", "backward_data")
    finally:
        limits.register(device, original)


def test_narrow_forwards_take_direct_blocks_before_strips_on_gpus():
    """8-31 output channels over a contraction of at most 160 (direct.narrow_blocks_first), first
    layers' too: each input value a block loads feeds 8-16 channels.  A longer contraction, a 1x1
    layer and the data gradient keep the other order."""
    from clconv.algorithms.direct import narrow_blocks_first

    h200 = H200.stand_in()
    direct = REGISTRY["direct"]
    for tag in ("n64g1c16o16i56x56k3x3s1x1p1x1d1x1",        # PeleeNet's: 0.63x the strips' time
                "n4g1c8o8i16x64x64k1x3x3s1x1x1p0x1x1d1x1x1",  # SlowFast's: 0.61x
                "n64g1c1o8i22x1125k1x64s1x1p0x32d1x1",      # EEGNet's 1x64: 0.92x
                "n64g1c3o16i64x64k3x3s1x1p1x1d1x1",         # IMPALA's first layer: 0.60x
                "n32g1c3o24i224x224k3x3s2x2p1x1d1x1"):      # EfficientFormer's stem: 0.33x
        problem = _problem(tag)
        assert narrow_blocks_first(problem), tag
        assert "cob" in direct.configs(problem, h200)[0], tag
    for tag in ("n8g1c24o24i56x56k3x3s1x1p1x1d1x1",         # 216 > FORWARD_BLOCK_CONTRACTION
                "n8g1c16o16i56x56k1x1s1x1p0x0d1x1"):        # 1x1: a contraction of 16
        assert not narrow_blocks_first(_problem(tag)), tag
    assert not narrow_blocks_first(_problem("n64g1c16o16i56x56k3x3s1x1p1x1d1x1", "backward_data"))


def test_first_layers_take_direct_blocks_of_output_channels_on_gpus():
    """direct.forward_blocks_first and forward_block on the H200 stand-in: a short contraction over
    32-64 output channels a group takes clc_direct_forward_block first, its block shrunk (channels,
    then rows) to keep the compute units filled and its registers bounded; a longer contraction,
    128 output channels, a 1D layer's long contraction, a kernel one column wide, a depthwise layer,
    channels-last and CPUs keep the other order."""
    h200 = H200.stand_in()

    def first(tag, layout="channels_first", device=h200, pass_="forward"):
        algorithm, config = candidates(Problem(geometry(tag), pass_, "float32", layout=layout), device)[0]
        return algorithm.name, config

    assert first("n8g1c3o64i224x224k3x3s1x1p1x1d1x1") == ("direct", {"wg": 128, "rows": 4, "cob": 16})  # VGG's first
    assert first("n8g1c3o96i227x227k11x11s4x4p0x0d1x1")[0] != "direct"   # AlexNet's: 363 channels x taps
    assert first("n16g1c16o128i56x56k3x3s1x1p1x1d1x1")[0] != "direct"    # 128 output channels
    assert first("n8g1c16o64i8000k9s1p4d1")[0] != "direct"               # 1D, 144 channels x taps
    assert first("n8g1c1o64i16000k9s1p4d1") == ("direct", {"wg": 128, "rows": 1, "cob": 16})  # 1D, 9
    # a kernel one column wide: a block's input value feeds no columns (ENet's 5x1, 160 x taps)
    assert first("n8g1c32o32i64x64k5x1s1x1p2x0d1x1")[0] != "direct"
    assert first("n8g1c3o32i64x64k3x1s1x1p1x0d1x1")[0] == "direct"  # ... but 9, under a GEMM step
    assert first("n8g1c3o64i224x224k3x3s1x1p1x1d1x1", "channels_last")[1].get("cob") is None
    assert first("n8g1c3o64i224x224k3x3s1x1p1x1d1x1", pass_="backward_data")[1].get("cob") is None
    # a batch-1 ResNet stem: 16 channels x 4 rows leave 47 work-items a compute unit; 4 x 4 give 188
    assert first("n1g1c3o64i224x224k7x7s2x2p3x3d1x1") == ("direct", {"wg": 128, "rows": 4, "cob": 4})
    # an 11x11 kernel's row of 16 channels' weights and 4 rows' sums would take 240 registers
    assert first("n4g1c1o64i128x128k11x11s1x1p5x5d1x1") == ("direct", {"wg": 128, "rows": 4, "cob": 8})
    assert all("cob" not in c for c in REGISTRY["direct"].configs(_problem("n8g1c3o64i224x224k3x3s1x1p1x1d1x1"),
                                                                  fake_device(gpu=False, compute_units=2)))


def test_output_layers_take_direct_strips_on_gpus():
    """direct.few_outputs_first on the H200 stand-in: a forward with at most 8 output channels a
    group (an image, a mask, a flow field) takes direct's strips first, 1x1 and 1D too; too few
    strips to fill the device go to split-K's pieces (_small_forward_to_splitk, any size); 16
    output channels keep Winograd where it serves, else take direct too (fewer than a GEMM tile's
    32 rows), 1x1 layers gemm1x1."""
    h200 = H200.stand_in()

    def first(tag, layout="channels_first"):
        algorithm, config = candidates(Problem(geometry(tag), "forward", "float32", layout=layout), h200)[0]
        return algorithm.name, config

    assert first("n4g1c64o3i256x256k3x3s1x1p1x1d1x1") == ("direct", {"wg": 256, "rows": 4})
    assert first("n4g1c64o1i256x256k1x1s1x1p0x0d1x1") == ("direct", {"wg": 256, "rows": 4})
    assert first("n8g1c64o1i16000k3s1p1d1") == ("direct", {"wg": 256})
    assert first("n1g1c512o1i32x32k3x3s1x1p1x1d1x1")[0] == "splitk"
    assert first("n4g1c64o16i128x128k3x3s1x1p1x1d1x1")[0] == "winograd"
    # under a GEMM tile's 32 rows where Winograd does not serve (planner._narrow_forward): V-Net's
    # 5x5x5 16 -> 16 and an odd 5x5 13 -> 29 take direct; a 1x1 32 -> 16 keeps gemm1x1
    assert first("n1g1c16o16i64x64x64k5x5x5s1x1x1p2x2x2d1x1x1")[0] == "direct"
    assert first("n4g1c13o29i31x31k5x5s1x1p2x2d1x1")[0] == "direct"
    assert first("n32g1c32o16i112x112k1x1s1x1p0x0d1x1")[0] == "gemm1x1"
    assert first("n4g1c64o3i256x256k3x3s1x1p1x1d1x1", "channels_last")[0] != "direct"


def test_direct_strips_only_where_their_registers_hold():
    """direct.strips_pay on the H200 stand-in: the strip forward unrolls a strip's weights and input
    values into registers; a 3x3 depthwise and DeepSpeech2's 21x11 (578 values) take strips first,
    RepLKNet's 31x31 depthwise (2019 values: 5.2x the time of one output per work-item) and
    DeepSpeech2's 41x11 (972) take one output per work-item first, the strips after it."""
    from clconv.algorithms.direct import STRIP_MAX_VALUES, strip_rows, strips_pay

    h200 = H200.stand_in()
    direct = REGISTRY["direct"]

    def direct_first(tag):
        return direct.configs(_problem(tag), h200)[0]

    assert direct_first("n16g128c128o128i56x56k3x3s1x1p1x1d1x1") == {"wg": 256, "rows": 4}
    assert direct_first("n16g128c128o128i56x56k31x31s1x1p15x15d1x1") == {"wg": 256}
    assert {"wg": 256, "rows": 4} in direct.configs(_problem("n16g128c128o128i56x56k31x31s1x1p15x15d1x1"), h200)
    speech = "n16g1c32o32i81x80k21x11s2x1p10x5d1x1", "n16g1c1o32i161x80k41x11s2x2p20x5d1x1"
    kept, dropped = (geometry(tag) for tag in speech)
    assert strips_pay(kept, strip_rows(kept.out_size[1])) and not strips_pay(dropped, strip_rows(dropped.out_size[1]))
    # the bound counts weights, the input values under a strip, and its sums
    g = geometry("n1g1c1o1i64x64k15x15s1x1p7x7d1x1")
    assert strips_pay(g, 4) == (15 * 15 + (3 + 15) * 15 + 4 <= STRIP_MAX_VALUES)


def test_direct_strips_go_first_only_for_kernels_taller_than_a_row_or_of_one_tap():
    """A strip's output rows share input rows only through the kernel's height: a kernel one row
    tall with taps along the row (EEGNet's 1x64: 1.70x one output per work-item's time) or the depth
    takes one output per work-item first, the strips after it; a 1x1 kernel and a 3x1 keep them."""
    from clconv.algorithms.direct import strip_rows, strips_pay

    h200 = H200.stand_in()
    direct = REGISTRY["direct"]
    for tag, strips in [("n64g1c1o8i22x1125k1x64s1x1p0x32d1x1", False),        # EEGNet's temporal 1x64
                        ("n4g1c128o2i17x17k1x7s1x1p0x3d1x1", False),           # 1x7, 2 output channels
                        ("n4g1c64o2i8x32x32k3x1x1s1x1x1p1x0x0d1x1x1", False),  # temporal 3x1x1
                        ("n8g1c128o4i64x64k1x1s1x1p0x0d1x1", True),            # 1x1: an output layer
                        ("n4g1c64o2i32x32k3x1s1x1p1x0d1x1", True)]:            # 3x1: rows share inputs
        g = geometry(tag)
        assert strips_pay(g, strip_rows(g.out_size[1])) == strips, tag
        configs = direct.configs(_problem(tag), h200)
        assert ("rows" in configs[0] and "cob" not in configs[0]) == strips, (tag, configs)  # EEGNet's: a block
        assert any("rows" in c and "cob" not in c for c in configs), tag  # a candidate either way


@pytest.mark.parametrize("tag, wanted", [
    ("n1g1c3o1280i1024x1024k16x16s16x16p0x0d1x1", "im2col"),   # SAM's patches: 0.74x the implicit GEMM's time
    ("n64g1c1o1024i1024k512s4p254d1", "im2col"),               # CREPE's 1D k512: 0.91x
    ("n16g1c384o1536i200k9s1p4d1", "im2col"),                  # FastSpeech's 1D k9: 0.90x
    ("n4g1c3o96i224x224k4x4s4x4p0x0d1x1", "implicit_gemm"),    # Swin's patches, 96 rows: im2col 1.15x
    ("n16g1c256o512i800k3s1p4d4", "implicit_gemm"),            # 512 rows: split, left to the implicit GEMM
    ("n8g1c1024o1024i28x28k1x1s1x1p0x0d1x1", "gemm1x1"),        # 1x1: the input read in place
    ("n8g1c4o1152i32x32k2x2s2x2p0x0d1x1", "implicit_gemm"),    # DiT's patches, a contraction of 16: im2col 2.46x
])
def test_gpu_heuristic_takes_wide_forwards_to_im2col(tag, wanted):
    """A forward gathers its unfolded input once per tile of rows in the implicit GEMM: from
    planner.WIDE_FORWARD_ROWS output channels im2col's column buffer, decoded once, comes first,
    unless the contraction is one GEMM step (planner.WIDE_FORWARD_MIN_CONTRACTION)."""
    order = heuristic_order(_problem(tag), H200_LIKE)
    gemms = [name for name in order if name in ("im2col", "implicit_gemm", "gemm1x1")]
    assert gemms[0] == wanted, order


def test_gpu_pointwise_data_gradient_tiles_weigh_fill_and_loads():
    """gemm1x1's data gradient on the H200 stand-in: EfficientNet-B0's 1x1 40 -> 240 at 28x28,
    batch 16 (W^T dy: 40 x 12544) took the 64x64 tile of 64 work-items first (least waste), 1.48x the
    fastest; weighed by a shortfall of work-items a compute unit and local loads
    (implicit_gemm.POINTWISE_DATA_WEIGHTS) the 32x64 tile of 256 comes first (1.02x).  The forward
    keeps the waste order."""
    from clconv.algorithms.gemm import work_items
    from clconv.algorithms.implicit_gemm import POINTWISE_DATA_WEIGHTS

    h200 = H200.stand_in()
    gemm1x1 = REGISTRY["gemm1x1"]
    first = gemm1x1.configs(_problem("n16g1c40o240i28x28k1x1s1x1p0x0d1x1", "backward_data"), h200)[0]
    assert (first["TM"], first["TN"], work_items(first)) == (32, 64, 256), first
    assert gemm1x1.tile_weights(_problem("n16g1c40o240i28x28k1x1s1x1p0x0d1x1")) is None
    assert gemm1x1.tile_weights(_problem("n16g1c40o240i28x28k1x1s1x1p0x0d1x1", "backward_data")) is POINTWISE_DATA_WEIGHTS


@pytest.mark.parametrize("tag, winograd", [
    ("n1g1c64o64i112x112k3x3s1x1p1x1d1x1", True),     # 0.92 GFLOP, 3136 2x2 tiles: 0.82x the others' best
    ("n8g1c37o53i50x50k3x3s1x1p1x1d1x1", True),       # 0.71 GFLOP, 5000 tiles: 0.83x
    ("n1g1c128o128i56x56k3x3s1x1p1x1d1x1", False),    # 0.92 GFLOP, 784 tiles: 1.08x
    ("n4g1c256o256i14x14k3x3s1x1p1x1d1x1", False),    # 0.92 GFLOP, 196 tiles: 1.18x
    ("n8g1c24o24i56x56k3x3s1x1p1x1d1x1", False),      # 0.26 GFLOP (and 24 channels): 1.20x
    # fewer dy channels than FEW_CHANNELS_INPUT_MINIMUM, from FEW_CHANNELS_DATA_MINIMUM, where wide
    ("n64g1c16o16i56x56k3x3s1x1p1x1d1x1", True),      # PeleeNet's, 0.92 GFLOP, 50176 tiles: 0.59x (H100)
    ("n16g1c112o16i56x56k3x3s1x1p1x1d1x1", True),     # Tiramisu's growth layer, 16 dy channels: 0.73x
    ("n8g1c64o12i128x128k3x3s1x1p1x1d1x1", True),     # ESPCN's 64 -> 12, 12 dy channels: 0.84x
    ("n16g1c48o14i56x56k3x3s1x1p1x1d1x1", False),     # HarDNet's 48 -> 14, 0.61 GFLOP: 1.15x (H100)
    ("n4g1c8o8i16x64x64k1x3x3s1x1x1p0x1x1d1x1x1", False),  # SlowFast's 8 channels, 0.46 GFLOP: 1.15x
    ("n8g32c256o256i28x28k3x3s1x1p1x1d1x1", False),   # ResNeXt's groups of 8: 1.20x
])
def test_gpu_winograd_data_gradient_of_less_work_where_tiles_are_many(tag, winograd):
    """Winograd's data gradient from DATA_GRADIENT_MIN_FLOPS, or from half that with
    DATA_GRADIENT_WIDE_TILES 2x2 tiles: its GEMMs, the tiles as columns, are wide enough there."""
    order = heuristic_order(_problem(tag, "backward_data"), H200_LIKE)
    assert (order[0] == "winograd") == winograd, order


def test_rules_from_layers_of_networks_no_list_had():
    """The GPU order on the H200 stand-in for the misses of docs/perf/h200-closing-layers.txt and
    h200-closing-holdout-layers.txt (2026-12-04), each against a neighbour that keeps the order."""
    h200 = H200.stand_in()

    def first(tag, pass_="forward"):
        algorithm, config = candidates(_problem(tag, pass_), h200)[0]
        return algorithm.name, config

    winograd = REGISTRY["winograd"]
    # Winograd's tile side by GEMM work: DeepLab's dilation 18 on 33x33 has phases of 1-2 rows
    aspp = "n4g1c2048o256i33x33k3x3s1x1p18x18d18x18"
    assert winograd.gemm_work(_problem(aspp), 4) > winograd.gemm_work(_problem(aspp), 2)
    for pass_ in ("forward", "backward_data", "backward_weight"):
        assert winograd.sides(_problem(aspp, pass_), h200)[0] == 2
    assert winograd.sides(_problem("n4g1c2048o256i33x33k3x3s1x1p12x12d12x12"), h200)[0] == 4
    assert winograd.sides(_problem("n16g1c512o512i28x28k3x3s1x1p1x1d1x1"), h200)[0] == 4
    # one input channel in one group is a first layer, not depthwise: the ordinary order
    wav2vec = "n4g1c1o512i16000k10s5p0d1"
    assert "depthwise_rows" not in heuristic_order(_problem(wav2vec, "backward_data"), h200)
    assert first(wav2vec, "backward_data")[0] == "im2col"
    assert first(wav2vec) == ("direct", {"wg": 128, "rows": 1, "cob": 16})  # 10 channels x taps: blocks
    assert first(wav2vec, "backward_weight")[0] == "direct"                  # 10 GEMM columns
    assert "depthwise_rows" in heuristic_order(_problem("n4g32c32o32i28x28k3x3s1x1p1x1d1x1"), h200)
    # a weight gradient's GEMM narrower than a tile: direct's blocks; 1x1 24 -> 144 at batch 1
    assert first("n1g1c24o144i56x56k1x1s1x1p0x0d1x1", "backward_weight")[0] == "direct"
    assert first("n1g1c64o144i56x56k1x1s1x1p0x0d1x1", "backward_weight")[0] == "splitk"
    # 32 output channels: direct's blocks before the GEMMs only where a block holds 8 of them, and
    # not over a full GEMM of a long contraction (planner._full_weight_gemm: HRNet's 3x1, 49152
    # products, ran the blocks in 1.23-1.30x split-K's time)
    assert first("n1g1c32o32i64x64x64k3x3x3s1x1x1p1x1x1d1x1x1", "backward_weight")[0] == "splitk"
    assert first("n16g1c32o32i64x48k3x1s1x1p1x0d1x1", "backward_weight")[0] == "splitk"
    assert first("n1g1c32o32i64x48k3x1s1x1p1x0d1x1", "backward_weight")[0] == "direct"  # 3072 products
    # a short depthwise weight gradient (196 products): direct's one-channel blocks
    assert first("n1g240c240o240i28x28k5x5s2x2p2x2d1x1", "backward_weight") == \
        ("direct", {"wg": 128, "cob": 1, "cib": 1, "slices": 1})
    assert heuristic_order(_problem("n8g96c96o96i56x56k7x7s1x1p3x3d1x1", "backward_weight"), h200)[0] == "depthwise"
    # grouped forwards in blocks of output channels; a grouped 1x1 keeps gemm1x1
    assert first("n16g32c256o256i56x56k3x3s1x1p1x1d1x1") == ("direct", {"wg": 128, "rows": 4, "cob": 8})
    assert first("n16g4c256o256i28x28k1x1s1x1p0x0d1x1")[0] == "gemm1x1"
    # 16 input channels (half a 32-row tile): im2col's GEMM for the data gradient; 24 keep the gather
    assert first("n16g1c16o64i28x28k3x3s1x1p1x1d1x1", "backward_data")[0] == "im2col"
    # (SqueezeNet's at 55x55, 12544 2x2 tiles, goes to Winograd: 0.91x the others' best)
    assert first("n16g1c16o64i55x55k3x3s1x1p1x1d1x1", "backward_data")[0] == "winograd"
    assert first("n8g1c24o24i56x56k3x3s1x1p1x1d1x1", "backward_data")[0] == "implicit_gemm"
    # a small image's data gradient over 32 output channels: one implicit GEMM; 64 and more: im2col
    assert first("n16g1c128o32i14x14k3x3s1x1p1x1d1x1", "backward_data")[0] == "implicit_gemm"
    assert first("n16g1c128o64i14x14k3x3s1x1p1x1d1x1", "backward_data")[0] == "im2col"
    # Winograd's forward from 9 output channels (ESPCN's 64 -> 12); 8 are an output layer's strips
    assert first("n8g1c64o12i128x128k3x3s1x1p1x1d1x1")[0] == "winograd"
    assert first("n8g1c64o8i128x128k3x3s1x1p1x1d1x1")[0] == "direct"
    # a larger forward of fewer 64x64 tiles than compute units over a long contraction: split-K,
    # unless Winograd serves it
    assert first("n4g1c256o512i800k16s8p4d1")[0] == "splitk"
    assert first("n16g1c512o512i8x8k3x3s1x1p1x1d1x1")[0] == "winograd"
    assert first("n16g1c256o512i800k16s8p4d1")[0] != "splitk"  # 4x the outputs fill the device


@pytest.mark.parametrize("tag, wanted", [
    ("n8g1c512o4096i7x7k7x7s1x1p0x0d1x1", "im2col"),          # FCN's fc6, a contraction of 8: 0.53x
    ("n1g1c1024o1024i14x14k3x3s1x1p1x1d1x1", "im2col"),       # 196: 0.72x the implicit GEMM's time
    ("n1g1c512o512i7x7k3x3s1x1p1x1d1x1", "implicit_gemm"),    # 512 rows: the implicit GEMM, 0.71x im2col's
    ("n1g1c3o768i224x224k16x16s16x16p0x0d1x1", "implicit_gemm"),  # ViT's patch embedding, 768 rows
])
def test_gpu_heuristic_takes_wide_short_weight_gradients_to_im2col(tag, wanted):
    """A weight gradient too short for split-K's pieces gathers its unfolded input once per tile of
    rows in the implicit GEMM: from planner.WIDE_WEIGHT_ROWS output channels im2col's column buffer,
    decoded once, comes first."""
    order = heuristic_order(_problem(tag, "backward_weight"), H200_LIKE)
    gemms = [name for name in order if name in ("im2col", "implicit_gemm")]
    assert gemms[0] == wanted, order


@pytest.mark.parametrize("tag, wanted", [
    ("n1g1c512o2048i7x7k1x1s1x1p0x0d1x1", True),      # 2048 output channels: 0.26x gemm1x1's time
    ("n4g1c4096o4096i1x1k1x1s1x1p0x0d1x1", True),     # VGG's fc7 as a 1x1 convolution: 0.29x
    ("n1g1c1024o256i14x14k1x1s1x1p0x0d1x1", False),   # 256 output channels: gemm1x1 the best
    ("n1g1c1024o2048i14x14k1x1s2x2p0x0d1x1", True),   # strided: 0.47x im2col's time
    ("n1g1c1024o2048i10x10k1x1s2x2p0x0d1x1", True),   # strided, 100 MFLOP: 0.37x
    ("n1g1c256o512i56x56k1x1s2x2p0x0d1x1", False),    # strided, 512 output channels: im2col
    ("n2g1c1024o2048i14x14k1x1s2x2p0x0d1x1", False),  # strided, 392 MFLOP: im2col
    ("n32g1c256o1024i14x14k1x1s1x1p0x0d1x1", False),  # 3.3 GFLOP: many tiles
])
def test_gpu_heuristic_cuts_small_pointwise_data_gradients(tag, wanted):
    """planner._unfilled_pointwise_to_splitk: a 1x1 layer's data gradient over 576 or more output
    channels, of any stride, whose dx is few tiles, runs split-K first on GPUs; never on a CPU."""
    problem = _problem(tag, "backward_data")
    assert (heuristic_order(problem, H200_LIKE)[0] == "splitk") is wanted, heuristic_order(problem, H200_LIKE)
    assert heuristic_order(problem, fake_device(gpu=False, compute_units=2))[0] != "splitk"


@pytest.mark.parametrize("tag, pass_, wanted", [
    ("n1g1c960o1280i1x1k1x1s1x1p0x0d1x1", "forward", True),         # MobileNetV3-Large's head, 2.5 MFLOP: 0.54x gemm1x1's time
    ("n1g1c960o1280i1x1k1x1s1x1p0x0d1x1", "backward_data", True),   # 0.64x
    ("n8g1c2048o512i6x6k1x1s1x1p0x0d1x1", "forward", True),         # UperNet's pyramid pooling, 604 MFLOP, 40 tiles: 0.48x
    ("n16g1c960o128i14x14k1x1s1x1p0x0d1x1", "forward", True),       # LR-ASPP, 98 tiles: 0.88x
    ("n1g1c1152o192i7x7k1x1s1x1p0x0d1x1", "forward", True),         # MnasNet at batch 1, 22 MFLOP: 0.71x
    ("n2g1c2048o256i25x34k1x1s1x1p0x0d1x1", "forward", False),      # DETR's input projection, 108 tiles: 1.45x
    ("n4g1c1024o256i32x32k1x1s1x1p0x0d1x1", "forward", False),      # Mask2Former's lateral, 256 tiles: gemm1x1
    ("n32g1c128o512i32x32k1x1s1x1p0x0d1x1", "forward", False),      # 128 input channels: no long contraction
])
def test_gpu_heuristic_cuts_unfilled_pointwise_layers(tag, pass_, wanted):
    """planner._unfilled_pointwise_to_splitk counts a 1x1 layer's result in 64x64 tiles against the
    device's compute units, whatever its FLOPs: split-K first up to UNFILLED_POINTWISE_SHARE of
    them over a long contraction; never on a CPU, channels-last or grouped (unmeasured)."""
    problem = _problem(tag, pass_)
    assert (heuristic_order(problem, H200_LIKE)[0] == "splitk") is wanted, heuristic_order(problem, H200_LIKE)
    assert heuristic_order(problem, fake_device(gpu=False, compute_units=2))[0] != "splitk"
    last = Problem(problem.geometry, pass_, "float32", layout="channels_last")
    assert heuristic_order(last, H200_LIKE)[0] != "splitk"
    grouped = _problem(tag.replace("g1c", "g2c", 1), pass_)
    assert not planner._unfilled_pointwise_to_splitk(grouped, H200_LIKE)


def test_unfilled_pointwise_layers_are_counted_against_the_device():
    # DETR's projection, 108 tiles: over 0.8 of 132 compute units, under 0.8 of 264
    problem = _problem("n2g1c2048o256i25x34k1x1s1x1p0x0d1x1")
    assert not planner._unfilled_pointwise_to_splitk(problem, H200_LIKE)
    assert planner._unfilled_pointwise_to_splitk(problem, fake_device(gpu=True, compute_units=264))


@pytest.mark.parametrize("tag, wanted", [
    ("n32g1c32o32i56x56k1x3s1x1p0x1d1x1", "splitk"),          # SqueezeNext's 1x3: direct 1.82x split-K
    ("n4g1c32o32i24000k3s1p1d1", "splitk"),                   # UniVNet's 1D k3: 1.75x
    ("n16g1c128o32i14x14k3x3s1x1p1x1d1x1", "direct"),         # DenseNet's growth, 3136 products: 0.78x
    ("n8g1c3o32i100x100k3x3s1x1p1x1d1x1", "direct"),          # a first layer, 27 columns: 0.73x
])
def test_full_weight_gemms_over_long_contractions_go_to_splitk(tag, wanted):
    """Direct's weight-gradient blocks of a full tile's 32 output channels, but where split-K's
    tiles are full both ways over a long contraction (planner._full_weight_gemm)."""
    order = heuristic_order(_problem(tag, "backward_weight"), H200_LIKE)
    assert order[0] == wanted, order
