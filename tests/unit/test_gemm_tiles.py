"""The GEMM tile tables and how they are chosen: GPU tiles that fill the compute units, CPU vector
tiles offered first on CPUs, the row (vload) form only where B is contiguous, the column buffer sized
for a CPU cache, old tuning entries still valid."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from clconv.algorithms import REGISTRY
from clconv import limits
from clconv.limits import Limits
from clconv.algorithms.gemm import (
    CPU_TILES, CPU_VECTOR_TILES, GPU_TILES, MAX_COLUMN_BLOCKS, _b_row, column_blocks, cpu_config, cpu_tile_registers,
    LARGE_GEMM_TILE, LARGE_GEMM_WAVES, gemm_tiles, is_cpu_config, is_dot_config, tile_config, vector_first, work_items,
)
from clconv.passes import PASSES
from clconv.plan import Problem

from cases import geometry

ODD_3X3 = "n2g1c5o7i9x9k3x3s1x1p1x1d1x1"      # M = 7 output channels, 9x9 = 81 pixels
ODD_1X1 = "n3g1c6o10i5x5k1x1s1x1p0x0d1x1"     # stride 1: B rows read with vload, 25-pixel images
STRIDED_1X1 = "n2g1c6o5i7x7k1x1s2x2p0x0d1x1"  # stride 2: no row form, lane-by-lane


def _fake_gpu(units=132):
    return Limits(work_group=1024, work_item_sizes=(1024, 1024, 64), local_mem=48 * 1024, compute_units=units, gpu=True)


def test_gpu_tiles_fill_the_compute_units():
    # 7x7x512 3x3 layer at batch 32: M=512, N=1568. 128x128 tiles give 52 work-groups for 132 units.
    first = gemm_tiles(512, 1568, _fake_gpu(), 4)[0]
    count = -(-512 // first["TM"]) * -(-1568 // first["TN"])
    assert count >= 132, first
    # a big GEMM that every tile divides keeps the table's first (largest-reuse) choice
    big = gemm_tiles(4096, 100352, _fake_gpu(), 4)
    assert (big[0]["TM"], big[0]["TN"]) == GPU_TILES[0][:2] and big[0]["TM"] * big[0]["TN"] >= 128 * 64
    # a matrix 128x128 tiles divide but 128x64 ones would pad is not given the padded tile first
    odd = gemm_tiles(4096, 128 * 700 + 64, _fake_gpu(), 4)
    assert odd[0]["TN"] == 64 or (128 * 700 + 64) % odd[0]["TN"] == 0


def test_plain_matrices_weigh_local_loads_against_waste():
    def first(m, plain, matrices=True):
        tile = gemm_tiles(m, 128 * 1024, _fake_gpu(), 4, plain=plain, matrices=matrices)[0]
        return tile["TM"], tile["TN"], tile["WM"], tile["WN"]
    # every tile divides 128 rows: plain matrices (Winograd's workspaces) take the first 8x8 block
    # (16 local loads per 64 FMAs); convolution views, 16 waves of work-groups here, the large GEMMs'
    # tile (test_large_gemms_take_the_8x8_blocks)
    assert first(128, plain=False) == LARGE_GEMM_TILE[:2] + LARGE_GEMM_TILE[3:5]
    assert first(128, plain=True)[2:] == (8, 8)
    # 32 rows: a 64-row tile does twice the work, more than its blocks save; among the 32-row tiles
    # the 4x4 block (8 local loads per 16 FMAs, 2x4: 6 per 8) on plain matrices; on a convolution's
    # matrices read in place, which waste the same in either, the wider vectors (VECTOR_TIES: 4 against
    # the 2x4 block's 2); where the tile loads address each element (implicit GEMMs), the table's order
    assert first(32, plain=True) == (32, 32, 4, 4)
    assert first(32, plain=False) == (32, 32, 4, 4)
    assert first(32, plain=False, matrices=False) == (32, 64, 2, 4)


def test_large_gemms_take_the_8x8_blocks():
    """A GEMM of matrices (im2col's, gemm1x1's) of LARGE_GEMM_WAVES or more 128x64 work-groups per
    compute unit takes that tile in 8x8 blocks (issue 12's 1x1 1024 -> 1024 layer at 28x28, batch 64: M = 1024, N = 50176);
    one of fewer, but a wave or more of 64x64 work-groups (MEDIUM_GEMM_WAVES), the 64x64 tile in
    8x8 blocks; one under that wave keeps the table's 8x4 blocks (128-256 work-items hide latency),
    and a matrix whose rows the 128-row tile would pad more than LARGE_GEMM_WASTE keeps its least
    wasteful tile."""
    gpu = _fake_gpu()

    def first(m, n):
        tile = gemm_tiles(m, n, gpu, 4)[0]
        return tile["TM"], tile["TN"], tile["WM"], tile["WN"]
    assert first(1024, 50176) == (128, 64, 8, 8)
    waves = 128 * 64 * LARGE_GEMM_WAVES * 132
    assert first(128, waves // 128) == (128, 64, 8, 8)
    assert first(128, waves // 128 - 64) == (64, 64, 8, 8)
    # 128 rows: 2 x 66 tiles of 64x64 are one wave of 132 compute units; 2 x 65 are not
    assert first(128, 64 * 66) == (64, 64, 8, 8)
    assert first(128, 64 * 65) != (64, 64, 8, 8)
    # 864 rows (32 channels x 27 taps): 7 tiles of 128 rows pad 3.7%, within the bound: taken
    assert first(864, 200704)[2:] == (8, 8)
    # 96 rows: the 128-row tile pads a third; a 32-row one divides them
    assert first(96, 200704)[0] == 32
    # an implicit GEMM (im2col addressing per element in its tile loads) keeps the 256 work-items
    implicit = gemm_tiles(1024, 50176, gpu, 4, large_blocks=False)[0]
    assert (implicit["TM"], implicit["TN"], implicit["WM"], implicit["WN"]) == GPU_TILES[0][:2] + GPU_TILES[0][3:5]


def test_plain_matrices_keep_warps_enough_per_compute_unit():
    """Winograd's GEMMs of few tiles (512 output channels x 98 tiles, 16 of them: a 3x3 layer of
    512 channels at 14x14, batch 2): a 64 x 64 tile of 8x8 blocks wastes as little as 128 x 32 but
    gives each of 132 compute units under FILL_WORK_ITEMS work-items; 128 x 32 (8x4 blocks, 128
    work-items) ran in 0.80x its time on an H200.  Large GEMMs keep the 8x8 blocks."""
    from clconv.tools.devices import H200

    h200 = limits.of(H200.stand_in())
    narrow = gemm_tiles(512, 98, h200, 4, groups=16, plain=True)[0]
    assert work_items(narrow) >= 128, narrow
    wide = gemm_tiles(512, 6272, h200, 4, groups=16, plain=True)[0]
    assert (wide["WM"], wide["WN"]) == (8, 8), wide


def test_short_gathered_contractions_rank_tiles_by_their_gathering():
    """A first layer (3 channels x 3x3 taps = 27) gathers its input once per tile of rows: 64
    output channels take the 64-row tile of the fewest gathers per work-item (4x4 blocks; on an
    H200 0.80x the time of the 8x8 blocks the edge-waste order took), 32 the 32-row tile of the
    fewest; a tiny GEMM keeps the compute units busy first; 1x1 kernels and long contractions keep
    the edge-waste order."""
    from clconv.algorithms.gemm import gathered_operand, implicit_shape
    from clconv.tools.devices import H200
    from clconv.tools.shapes import parse_descriptor

    h200 = H200.stand_in()

    def first(descriptor, pass_="forward"):
        problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
        tile = REGISTRY["implicit_gemm"].configs(problem, h200)[0]
        return gathered_operand(problem, implicit_shape(problem)), (tile["TM"], tile["TN"], tile["WM"], tile["WN"])

    assert first("mb8ic3ih224oc64oh224kh3ph1") == ("b", (64, 64, 4, 4))
    assert first("mb32ic3ih224oc64oh112kh7sh2ph3") == ("b", (64, 64, 4, 4))
    assert first("mb16ic3ih256oc32oh128kh3sh2ph1") == ("b", (32, 64, 2, 4))
    # 96 output channels: one 128-row tile gathers once where 32-row tiles gather three times
    assert first("mb8ic3ih227oc96oh55kh11sh4")[1][0] == 128
    # a data gradient of 3 output channels gathers dy (K = 27)
    assert first("mb4ic64ih64oc3oh64kh3ph1", "backward_data")[0] == "b"
    # 512 pixels in all: the tile of the most work-groups, not the fewest gathers
    assert first("mb8ic128iw64oc128ow64kw3pw1") == ("b", (32, 32, 4, 4))
    # U-Net's 2x2 stride-2 layer (K = 512): 128 tiles of 64x64 for 132 compute units count as
    # filled (IDLE_GATHER_RANK) before 128x32 tiles half empty over 64 rows (1.86x their time)
    assert first("mb8ic128ih64oc64oh32kh2sh2") == ("b", (64, 64, 4, 4))
    assert first("mb8ic64ih56oc64oh56kh1ph0")[0] == ""              # 1x1: no taps to gather
    assert first("mb8ic128ih28oc128oh28kh3ph1")[0] == ""            # K = 1152
    # split-K's weight gradient of a first layer (its tiles ranked by split-K's time model,
    # splitk.gpu_cost): ResNet's stem, 147 columns (3 channels x 7x7 taps), takes 64-row tiles of
    # 4x4 blocks (32-row tiles ran it in 1.46x the time); VGG's 3x3 at 224x224, 27 columns, the
    # 32x32 tile of 4x4 blocks (0.135 ms on an H200, 64x64 of 4x4 0.142, of 8x8 0.221:
    # docs/perf/h200-all-tiles-short-gathered.json)
    stem = Problem(parse_descriptor("mb32ic3ih224oc64oh112kh7sh2ph3").geometry, "backward_weight", "float32")
    tile = REGISTRY["splitk"].configs(stem, h200)[0]
    assert (tile["TM"], tile["TN"], tile["WM"], tile["WN"]) == (64, 64, 4, 4)
    vgg = Problem(parse_descriptor("mb8ic3ih224oc64oh224kh3ph1").geometry, "backward_weight", "float32")
    tile = REGISTRY["splitk"].configs(vgg, h200)[0]
    assert (tile["TM"], tile["TN"], tile["WM"], tile["WN"]) == (32, 32, 4, 4)


def _first_implicit_tile(descriptor: str, pass_: str = "forward") -> tuple[int, int, int, int]:
    """(TM, TN, WM, WN) of the implicit GEMM's first tile for ``descriptor`` on an H200."""
    from clconv.tools.devices import H200
    from clconv.tools.shapes import parse_descriptor

    problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
    tile = REGISTRY["implicit_gemm"].configs(problem, H200.stand_in())[0]
    return tile["TM"], tile["TN"], tile["WM"], tile["WN"]


def test_gathered_gemms_of_dense_channels_take_4x4_blocks_over_2x4():
    """gather_rank puts the 32x64 tile (2x4 blocks, half the gathers a work-item) first where it
    finds it and the 32x32 tile alike; with 16 or more gathered channels and rows that fill 32-row
    tiles the 32x32 tile's 4x4 blocks come first (gemm.GATHER_DENSE_CHANNELS: IMPALA's residual 3x3
    0.73x the time), not for a first layer's 3 channels nor for 24 rows."""
    first = _first_implicit_tile

    assert first("mb64ic32ih16oc32oh16kh3ph1") == (32, 32, 4, 4)                   # IMPALA: 32 channels
    assert first("mb64ic32ih16oc32oh16kh3ph1", "backward_data") == (32, 32, 4, 4)
    assert first("mb4ic32iw24000oc32ow24000kw3pw1") == (32, 32, 4, 4)              # UniVNet's 1D k3
    assert first("mb16ic3ih256oc32oh128kh3sh2ph1") == (32, 64, 2, 4)              # a 3-channel stem
    assert first("mb8ic24ih56oc24oh56kh3ph1") == (32, 64, 2, 4)                   # 24 rows of 32


def test_long_implicit_gemms_of_dense_channels_take_4x4_blocks_over_2x4():
    """An implicit GEMM whose gather is too long for gather_rank (32 channels x 27 taps) keeps the
    table's order, 32x64 before 32x32 at equal waste; over a forward's or data gradient's long
    contraction the 4x4 blocks come first (GwcNet's 3x3x3 32 -> 32: 0.88x the time), not for a
    weight gradient (its A is dy: a batch-1 5x5 128 -> 128 at 7x7 ran 32x64 in 0.91x) nor for 24 rows."""
    first = _first_implicit_tile

    gwcnet = "mb1ic32id48ih64iw128oc32od48oh64ow128kd3kh3kw3pd1ph1pw1"
    assert first(gwcnet) == (32, 32, 4, 4)
    assert first(gwcnet, "backward_data") == (32, 32, 4, 4)
    assert first("mb16ic32iw1000oc32ow1000kw39pw19") == (32, 32, 4, 4)            # InceptionTime's 1D k39
    assert first("mb1ic128ih7oc128oh7kh5ph2", "backward_weight") == (32, 64, 2, 4)
    assert first("mb8ic24id16ih56iw56oc24od16oh56ow56kd3kh3kw3pd1ph1pw1") == (32, 64, 2, 4)  # 24 rows


def test_long_gathers_over_partly_empty_row_tiles_take_64x64_in_4x4_blocks():
    """A forward or data gradient gathered beyond SHORT_CONTRACTION whose rows leave every row tile
    partly empty, 64-row tiles wasting no more than 32-row ones, takes PARTIAL_ROWS_TILE first
    (DeepMedic's 40 -> 40: 0.61x the 32x32 tile's time on an H100); rows that fill 32-row tiles,
    24 rows (64-row tiles would waste more), short gathers and weight gradients keep their order."""
    first = _first_implicit_tile

    deepmedic = "mb10ic40id25ih25iw25oc40od23oh23ow23kd3kh3kw3pd0ph0pw0"
    assert first(deepmedic) == (64, 64, 4, 4)
    assert first("mb4ic56id16ih32iw32oc56od16oh32ow32kd3kh3kw3pd1ph1pw1") == (64, 64, 4, 4)
    assert first("mb4ic48id16ih32iw32oc48od16oh32ow32kd3kh3kw3pd1ph1pw1", "backward_data") == (64, 64, 4, 4)
    assert first("mb2ic64id16ih56iw56oc64od16oh56ow56kd3kh3kw3pd1ph1pw1") != (64, 64, 4, 4)   # 64 rows
    assert first("mb4ic80id8ih28iw28oc80od8oh28ow28kd3kh3kw3pd1ph1pw1") != (64, 64, 4, 4)     # 80: 1.6x rows
    assert first("mb8ic24id16ih56iw56oc24od16oh56ow56kd3kh3kw3pd1ph1pw1") == (32, 64, 2, 4)   # 24 rows
    assert first(deepmedic, "backward_weight") != (64, 64, 4, 4)
    # 97-127 rows: 128-row tiles waste no more either, and the waste order's 128x64 ran 0.85x its time
    assert first("mb4ic104id8ih28iw28oc104od8oh28ow28kd3kh3kw3pd1ph1pw1") == (128, 64, 8, 4)
    assert first("mb4ic176id4ih14iw14oc176od4oh14ow14kd3kh3kw3pd1ph1pw1") == (64, 64, 4, 4)   # 192 < 256


def test_gathers_along_one_row_take_64x128_tiles():
    """A 1D layer's gather (gemm.ROW_GATHER_FULL_TILE, ROW_GATHER_PARTIAL_TILE), where the order put
    the 64x64 tile in 4x4 blocks first: the 64x128 tile, in 8x8 blocks over 64 rows (WaveNet's
    dilated k3: 0.84x the time, its data gradient 0.82x) and in 4x8 blocks over partly empty ones
    (a k7 48 -> 48: 0.75x); the same gathers in 2D and 3D keep 64x64 (a 3x3x3 56 -> 56: 64x128 in
    4x8 blocks 1.16x its time)."""
    first = _first_implicit_tile

    wavenet = "mb8ic64iw16000oc64ow16000kw3pw8dw7"
    assert first(wavenet) == (64, 128, 8, 8)
    assert first(wavenet, "backward_data") == (64, 128, 8, 8)
    assert first("mb16ic48iw8000oc48ow8000kw7pw3") == (64, 128, 4, 8)                       # short gather
    assert first("mb16ic60iw2000oc60ow2000kw9pw4") == (64, 128, 4, 8)                       # long gather
    assert first("mb4ic56id16ih32iw32oc56od16oh32ow32kd3kh3kw3pd1ph1pw1") == (64, 64, 4, 4)   # 3D
    assert first("mb16ic120iw4000oc120ow4000kw3pw1") == (128, 64, 8, 4)                      # its order's own


def test_gemms_of_few_columns_in_a_wave_take_the_32x64_tile():
    """A GEMM of at most 32 columns in at most a wave of 32-row tiles (a batch-1 classifier head):
    the 32x64 tile's 256 work-items first (PP-LCNet's head 0.54x the 32x32 tile's time); many waves
    of rows (an im2col data gradient of 25088 rows) and Winograd's GEMMs keep the order."""
    from clconv.tools.devices import H200

    h200 = limits.of(H200.stand_in())

    def firsts(*args, **kwargs):
        return [(t["TM"], t["TN"], t["WM"], t["WN"]) for t in gemm_tiles(*args, **kwargs)[:2]]

    assert firsts(1280, 1, h200, 4) == [(32, 64, 2, 4), (32, 32, 4, 4)]
    assert firsts(256, 16, h200, 4, groups=16) == [(32, 64, 2, 4), (32, 32, 4, 4)]
    assert firsts(256, 16, h200, 4, groups=16, plain=True) == [(32, 32, 4, 4), (32, 64, 2, 4)]
    assert firsts(25088, 8, h200, 4)[0] != (32, 64, 2, 4)


def test_gpu_tiles_are_valid_templates():
    for tm, tn, _tk, wm, wn, vw, pipe, gv in GPU_TILES + CPU_TILES:
        assert tm % wm == 0 and tn % wn == 0 and wm % vw == 0 and wn % vw == 0
        assert vw in (1, 2, 4) and pipe in (0, 1) and gv in (0, 1, 2, 3)


def test_old_tuning_entries_without_vector_width_still_run():
    old = {"TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4}
    assert tile_config(old) == {**old, "VW": 1, "PIPE": 1, "GV": 0}


def test_cpu_devices_are_offered_the_vector_gemm_first():
    cpu = Limits(work_group=4096, work_item_sizes=(4096, 4096, 4096), local_mem=4 * 1024 * 1024, compute_units=2,
                 gpu=False, float_lanes=16, double_lanes=8)
    configs = gemm_tiles(64, 1568, cpu, 4)
    assert is_cpu_config(configs[0]) and any(not is_cpu_config(c) for c in configs)
    # a CPU whose compiler vectorises across work-items (no native lanes, as Mesa's llvmpipe reports)
    # is not offered the explicit-vector GEMM: it built for minutes there
    lanes_of_one = replace(cpu, float_lanes=1, double_lanes=1)
    assert not any(is_cpu_config(c) for c in gemm_tiles(64, 1568, lanes_of_one, 4))
    assert not any(is_cpu_config(c) for c in gemm_tiles(64, 1568, _fake_gpu(), 4))
    for wm, vn, lx in CPU_VECTOR_TILES:
        assert vn in (4, 8, 16) and wm >= 1 and lx >= 1


def test_cpu_tiles_fit_the_vector_registers():
    # AVX2 (8 float lanes, 16 registers): WM = 16 x VN = 16 needs 32 accumulators and spilled (1.5-2x
    # slower on PoCL); the first tile holds 12 accumulators, a row of B and a broadcast
    avx2 = Limits(work_group=4096, work_item_sizes=(4096, 4096, 4096), local_mem=4 << 20, compute_units=2,
                  gpu=False, float_lanes=8, double_lanes=4)
    for m in (64, 256, 8, 3):
        first = gemm_tiles(m, 3136, avx2, 4)[0]
        assert is_cpu_config(first) and cpu_tile_registers((first["WM"], first["VN"]), 8) <= 16, (m, first)
        assert first["WM"] * first["VN"] // 8 >= 8, (m, first)  # and enough FMA chains to keep the pipes busy
    assert (gemm_tiles(256, 3136, avx2, 4)[0]["WM"], gemm_tiles(256, 3136, avx2, 4)[0]["VN"]) == (6, 16)
    # AVX-512 (16 lanes, 32 registers) keeps its measured first tile, and 8-row blocks for 8 rows
    assert gemm_tiles(256, 3136, _fake_cpu(), 4)[0] == cpu_config(*CPU_VECTOR_TILES[0])
    assert gemm_tiles(8, 3136, _fake_cpu(), 4)[0]["WM"] == 8
    # where no tile fits (doubles on AVX2: 4 lanes) every tile stays a candidate
    assert is_cpu_config(gemm_tiles(256, 3136, avx2, 8)[0])


def _fake_cpu(units=2, cache=2 << 20):
    return Limits(work_group=4096, work_item_sizes=(4096, 4096, 4096), local_mem=4 << 20, compute_units=units,
                  gpu=False, float_lanes=16, double_lanes=8, core_cache=cache)


def test_column_blocks_only_for_a_weight_as_a():
    """Column blocks save sweeps of a weight (A read by every block of columns); a weight
    gradient's A, dy, is as long as the batch's pixels and is packed per chunk instead: blocks with
    dy read in place ran a 1x1 64 -> 256 weight gradient at 56x56 in 2x the time (PoCL, AVX2)."""
    from clconv.algorithms.gemm import implicit_shape, weight_contraction, weight_shape

    g = geometry("n2g1c64o256i56x56k1x1s1x1p0x0d1x1")
    forward = implicit_shape(Problem(g, "forward", "float32"))
    assert forward.a_view == "a_weight" and weight_contraction(forward) == forward.K == 64
    dw = weight_shape(g, "b_columns", layout="channels_first")
    assert dw.a_view == "a_grad_output_rows" and dw.K == 2 * 56 * 56 and weight_contraction(dw) == 0


def test_column_blocks_where_a_weight_outgrows_the_core_cache():
    tile = (16, 16, 8)
    # 3x3 7x7x256 at batch 2: a 2.4 MB weight (over half of 2 MiB), 98 columns: all 7 blocks in one work-item
    assert column_blocks(256, 98, 2304, tile, _fake_cpu(), 4, 1) == 7
    # a weight within half the cache is swept from it anyway: one block
    assert column_blocks(64, 3136, 576, tile, _fake_cpu(), 4, 1) == 1
    # nothing known about the caches (or no contraction given): one block
    assert column_blocks(256, 98, 2304, tile, _fake_cpu(cache=0), 4, 1) == 1
    assert column_blocks(256, 98, 0, tile, _fake_cpu(), 4, 1) == 1
    # all of N or nothing: 196 columns are 13 blocks, over MAX_COLUMN_BLOCKS
    assert -(-196 // 16) > MAX_COLUMN_BLOCKS and column_blocks(256, 196, 2304, tile, _fake_cpu(), 4, 1) == 1
    # the work-item's share of B (K x N) may pass the cache: 8192 x 112 floats, 3.7 MB
    assert column_blocks(256, 98, 8192, tile, _fake_cpu(), 4, 1) == 7
    # every core keeps a work-group: 2 along M serve 2 cores, not 8
    assert column_blocks(256, 98, 2304, tile, _fake_cpu(units=8), 4, 1) == 1
    assert column_blocks(256, 98, 2304, tile, _fake_cpu(units=8), 4, 4) == 7  # 4 groups: 8 work-groups


def test_cpu_tiles_with_column_blocks_keep_the_plain_tile_as_a_candidate():
    from clconv.algorithms.gemm import cpu_work_items
    configs = gemm_tiles(256, 98, _fake_cpu(), 4, k=2304)
    wm, vn, lx = CPU_VECTOR_TILES[0]
    # (one work-item taking all 7 blocks leaves 16 row blocks: 2 work-groups of 8, so 8 of 2)
    assert configs[0] == cpu_config(wm, vn, cpu_work_items(256, 98, (wm, vn, lx), 7, 1, _fake_cpu()), nb=7)
    assert configs[0]["LX"] == 2 and configs[1] == cpu_config(*CPU_VECTOR_TILES[0])
    assert "NB" not in cpu_config(*CPU_VECTOR_TILES[0])  # single-block configs keep their stored form
    assert tile_config(cpu_config(16, 16, 8))["NB"] == 1


def test_core_cache_is_the_largest_cache_private_to_a_core(tmp_path):
    cpu = tmp_path / "cpu0"
    (cpu / "topology").mkdir(parents=True)
    (cpu / "topology" / "thread_siblings_list").write_text("0,16\n")  # a hyperthread sibling
    for index, (level_type, size, shared) in enumerate([("Data", "48K", "0,16"), ("Instruction", "32K", "0,16"),
                                                        ("Unified", "2048K", "0,16"), ("Unified", "300M", "0-31")]):
        entry = cpu / "cache" / f"index{index}"
        entry.mkdir(parents=True)
        (entry / "type").write_text(level_type + "\n")
        (entry / "size").write_text(size + "\n")
        (entry / "shared_cpu_list").write_text(shared + "\n")
    # the L2, not the shared L3 nor the instruction cache; then the L3
    assert limits.data_caches(cpu) == (2 << 20, 300 << 20)
    assert limits.data_caches(tmp_path / "cpu9") == (0, 0)  # nothing readable: unknown


def test_row_form_only_where_b_is_contiguous():
    def shape_of(tag, algorithm, pass_):
        problem = Problem(geometry(tag), pass_, "float32")
        alg = REGISTRY[algorithm]
        return problem, alg._shape(problem, 1) if algorithm == "im2col" else alg._shape(problem)

    assert _b_row(*shape_of(ODD_1X1, "gemm1x1", "forward")) == (True, 25)
    assert _b_row(*shape_of(ODD_1X1, "gemm1x1", "backward_data")) == (True, 25)
    assert not _b_row(*shape_of(STRIDED_1X1, "gemm1x1", "forward"))[0]
    assert not _b_row(*shape_of(ODD_3X3, "implicit_gemm", "forward"))[0]
    assert _b_row(*shape_of(ODD_3X3, "im2col", "forward"))[0]


def test_implicit_im2col_views_keep_a_local_memory_tile_first():
    g = geometry(ODD_3X3)
    for pass_ in PASSES:
        problem = Problem(g, pass_, "float32")
        assert not vector_first(problem, REGISTRY["implicit_gemm"]._shape(problem))
        assert vector_first(problem, REGISTRY["im2col"]._shape(problem, 1))


def test_cpu_column_buffer_is_cache_sized(queue):
    """The CPU GEMM's column buffer per launch: 2 MiB, or a quarter of the cores' shared cache where
    that is more (Im2col.CPU_SHARED_CACHE_SHARE); one image's columns at least."""
    problem = Problem(geometry("n8g1c64o64i28x28k3x3s1x1p1x1d1x1"), "forward", "float32")  # 1.8 MB of columns per image
    small = Problem(geometry("n8g1c8o64i28x28k3x3s1x1p1x1d1x1"), "forward", "float32")  # 0.23 MB
    im2col = REGISTRY["im2col"]
    found = limits.of(queue.device)
    try:
        limits.register(queue.device, replace(found, shared_cache=0))  # no shared cache known: 2 MiB
        assert im2col.chunk_batch(problem, queue.device, cpu_config(8, 16, 8)) == 1
        assert im2col.chunk_batch(small, queue.device, cpu_config(8, 16, 8)) == 8
        limits.register(queue.device, replace(found, shared_cache=4 << 20))  # a quarter is under 2 MiB
        assert im2col.chunk_batch(problem, queue.device, cpu_config(8, 16, 8)) == 1
        limits.register(queue.device, replace(found, shared_cache=32 << 20))  # 8 MiB: 4 images of 1.8 MB
        assert im2col.chunk_batch(problem, queue.device, cpu_config(8, 16, 8)) == 4
    finally:
        limits.register(queue.device, found)


def _cpu(units=2):
    return Limits(work_group=4096, work_item_sizes=(4096, 4096, 4096), local_mem=4 << 20, compute_units=units,
                  gpu=False)


def test_splitk_fills_a_gpu_in_work_items_and_a_cpu_in_work_groups(monkeypatch):
    """On a GPU a cut aims at FILL_ITEMS work-items per compute unit, whatever the tile's work-group
    size, and an even cut does not beat one that fills the device better; on a CPU, work-groups
    per core, even cuts first."""
    splitk = REGISTRY["splitk"]
    monkeypatch.setattr("clconv.settings.workspace_limit", lambda device: 2**31)
    # a 1x1 stride-2 weight gradient: K = 8 x 14 x 14 = 1568, even only in 2 pieces of 784
    problem = Problem(geometry("n8g1c512o256i28x28k1x1s2x2p0x0d1x1"), "backward_weight", "float32")
    monkeypatch.setattr(limits, "of", lambda device, context=None: _fake_gpu())
    tile = {"TM": 128, "TN": 64, "TK": 16, "WM": 8, "WN": 4, "VW": 4, "PIPE": 1}  # 256 work-items, 16 tiles
    assert splitk.splits_for(problem, None, tile)[0] == 6  # the most pieces of >= 256: 96 x 256 items
    small = {"TM": 32, "TN": 32, "TK": 16, "WM": 4, "WN": 4, "VW": 4, "PIPE": 1}  # 64 work-items, 128 tiles
    assert splitk.splits_for(problem, None, small)[0] == 6
    # the 7x7 stem at batch 8: 64 x 147 outputs, K = 8 x 112 x 112; 10 tiles of 64 work-items
    stem = Problem(geometry("n8g1c3o64i224x224k7x7s2x2p3x3d1x1"), "backward_weight", "float32")
    pieces = splitk.splits_for(stem, None, small)[0]
    assert abs(10 * pieces * 64 / (splitk.FILL_ITEMS * 132) - 1) < 0.05, pieces
    monkeypatch.setattr(limits, "of", lambda device, context=None: _cpu())
    assert splitk.splits_for(problem, None, tile)[0] == 2  # even first on a CPU


def test_splitk_cost_terms_by_hand():
    """splitk.cost_terms of a 1x1 weight gradient of 96 x 64 (64 -> 96 channels) on 132 units: a
    64x64 tile of 8x8 blocks pads 96 rows to 128 (waste log 4/3), loads 16 values per 64 FMAs, runs
    2 x 1 tiles x 10 pieces = 20 work-groups (112 units idle: log 132/20), 64 work-items each; no
    taps.  With 66 pieces, 132 work-groups: one full wave (no tail); 80 pieces, 160: 1.21 waves
    run as 2."""
    from clconv.algorithms import splitk as splitk_module

    problem = Problem(geometry("n8g1c64o96i56x56k1x1s1x1p0x0d1x1"), "backward_weight", "float32")
    shape = REGISTRY["splitk"].shape(problem)
    assert (shape.M, shape.N) == (96, 64)
    tile = {"TM": 64, "TN": 64, "TK": 16, "WM": 8, "WN": 8, "VW": 4, "PIPE": 1, "GV": 3}
    terms = splitk_module.cost_terms(problem, shape, {**tile, "splits": 10}, 132)
    assert terms["waste"] == pytest.approx(math.log(4 / 3))
    assert terms["loads"] == 0.25 and terms["group"] == pytest.approx(math.log(64))
    assert terms["idle"] == pytest.approx(math.log(132 / 20)) and terms["tail"] == 0.0
    assert terms["taps_rows"] == terms["taps_columns"] == 0.0
    assert splitk_module.cost_terms(problem, shape, {**tile, "splits": 66}, 132)["tail"] == pytest.approx(0.0)
    two = splitk_module.cost_terms(problem, shape, {**tile, "splits": 80}, 132)
    assert two["idle"] == 0.0 and two["tail"] == pytest.approx(math.log(2 / (160 / 132)))
    # a 3x3 kernel decodes taps: the tile's sides count
    taps = Problem(geometry("n8g1c64o96i56x56k3x3s1x1p1x1d1x1"), "backward_weight", "float32")
    terms = splitk_module.cost_terms(taps, REGISTRY["splitk"].shape(taps), {**tile, "splits": 10}, 132)
    assert terms["taps_rows"] == pytest.approx(math.log(64)) and terms["taps_columns"] == pytest.approx(math.log(64))


def test_splitk_offers_gpu_configs_in_its_modelled_order(monkeypatch):
    """On a GPU split-K's configurations are every tile with its piece count, ranked by the time
    model (splitk.gpu_cost), the first TILE_CANDIDATES; the layers below are stored H200 runs'
    (docs/perf/heuristic_check.py), where the model's first ran within 3% of the fastest tile
    timed: ResNet-50's 1x1 256 -> 64 weight gradient at 56x56 in 64x128 tiles of 4x8 blocks
    (0.135 ms, the fastest 0.132; the 64x64 tile of 8x8 blocks the rules before took, 0.143),
    C3D's 3x3x3 128 -> 128 in 128x64 of 8x8 (0.832 ms, the fastest; the 128x128 tile the rules
    before took, 1.040)."""
    from clconv.algorithms import splitk as splitk_module
    from clconv.algorithms.gemm import TILE_CANDIDATES
    from clconv.tools.devices import H200
    from clconv.tools.shapes import parse_descriptor

    h200 = H200.stand_in()
    monkeypatch.setattr("clconv.settings.workspace_limit", lambda device: 2**31)
    splitk = REGISTRY["splitk"]
    for descriptor, wanted in (("mb32ic256ih56oc64oh56kh1ph0", (64, 128, 4, 8)),
                               ("mb4ic128id8ih28oc128od8oh28kd3kh3pd1ph1", (128, 64, 8, 8))):
        problem = Problem(parse_descriptor(descriptor).geometry, "backward_weight", "float32")
        configs = splitk.configs(problem, h200)
        assert len(configs) == TILE_CANDIDATES
        costs = [splitk_module.gpu_cost(problem, splitk.shape(problem), c, 132) for c in configs]
        assert costs == sorted(costs), descriptor
        first = configs[0]
        assert (first["TM"], first["TN"], first["WM"], first["WN"]) == wanted, (descriptor, first)
        assert first["splits"] == splitk.splits_for(problem, h200, first)[0]


def test_splitk_cost_weights_are_the_fit_of_the_stored_runs(monkeypatch):
    """SPLITK_COST_WEIGHTS are docs/perf/splitk_cost_fit.py's fit of every split-K configuration
    timed in the stored runs, rounded: a change of the terms or of the runs must refit them.  And
    the model judged on each list left out of its fit stays near the fastest configuration timed
    (1.028x over 763 layer-passes when fitted, 2026-12-06)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "perf"))
    import splitk_cost_fit  # docs/perf/splitk_cost_fit.py: the fit, as a command
    from clconv import settings
    from clconv.algorithms import splitk as splitk_module

    monkeypatch.setattr(settings, "workspace_limit", settings.workspace_limit)  # the fit sets the H200's

    rows = splitk_cost_fit.layer_passes()
    fitted = splitk_cost_fit.fit(rows)
    for group, weights in splitk_module.SPLITK_COST_WEIGHTS.items():
        for name, weight in weights.items():
            assert round(fitted[group][name], 2) == weight, (group, name, fitted[group][name])
    ratios = []
    for name in ("seventh", "eighth", "ninth", "tenth"):
        held = splitk_cost_fit.fit([r for r in rows if r[0] != name])
        for set_, _, problem, timed, offered, _ in rows:
            pool = {k: v for k, v in timed.items() if set_ == name and k in offered}
            if pool:
                pick = min(pool, key=lambda k: splitk_cost_fit.cost(held, problem, pool[k][0]))
                ratios.append(pool[pick][1] / min(ms for _, ms in pool.values()))
    assert len(ratios) > 100 and math.exp(sum(map(math.log, ratios)) / len(ratios)) <= 1.05


def test_cpu_dot_weight_gradient_first_only_where_its_contraction_is_long():
    from clconv.algorithms.gemm import (
        DOT_MAX_ROWS, DOT_MIN_IMAGE_STEPS, DOT_MIN_STEPS, GemmShape, cpu_dot_configs, is_dot_config, with_dot_configs,
    )
    cpu = _fake_cpu()
    avx2 = replace(cpu, float_lanes=8, double_lanes=4)
    # the tiles fit the registers: WM x WN accumulators, WM rows of A, a row of B
    for fit, registers in ((cpu, 32), (avx2, 16)):
        for config in cpu_dot_configs(64, 576, fit):
            assert config["WM"] * config["WN"] + config["WM"] + 1 <= registers, config
    base = gemm_tiles(64, 256, cpu, 4)

    def shape(k, m=32):
        return GemmShape(M=m, N=256, K=k, a_view="a_grad_output_rows", b_view="b_columns", c_view="c_matrix",
                         a_kfast=True, b_nfast=False, a={}, b={}, c={})

    def problem(desc, pass_="backward_weight", layout="channels_first"):
        return Problem(geometry(desc), pass_, "float32", layout=layout)

    big = problem("n4g1c256o32i28x28k1x1s1x1p0x0d1x1")  # 784-pixel images
    long_k = DOT_MIN_STEPS * 16
    assert is_dot_config(with_dot_configs(big, cpu, base, shape(long_k))[0])
    # a 2D layer of more output channels (rows) than DOT_MAX_ROWS: the column buffer's GEMM first
    # (ResNet's 3x3 64 at 28x28: 1.08-1.11x); 1D and 3D layers keep the dot products (0.64-0.84x)
    wide = problem("n4g1c256o64i28x28k1x1s1x1p0x0d1x1")
    assert DOT_MAX_ROWS == 32 and not is_dot_config(with_dot_configs(wide, cpu, base, shape(long_k, 64))[0])
    for desc in ("n8g1c64o64i4096k3s1p1d1", "n1g1c64o64i8x28x28k3x3x3s1x1x1p1x1x1d1x1x1"):
        assert is_dot_config(with_dot_configs(problem(desc), cpu, base, shape(long_k, 64))[0]), desc
    short = with_dot_configs(big, cpu, base, shape(long_k - 1))
    assert not is_dot_config(short[0]) and any(is_dot_config(c) for c in short)  # still a tuning candidate
    # 8 lanes (AVX2): half the pixels make as many vector steps, and twice the rows (the dot products
    # ran ResNet's 3x3 64 layers in 0.55-0.61x, the stem in 0.66x the column GEMM's time; 96 rows and
    # the DCGAN layer's 256 1.13x and 1.35x the other way); no bound where the dot products read a
    # 1x1 stride-1 layer's input in place
    k8 = DOT_MIN_STEPS * 8
    assert is_dot_config(with_dot_configs(big, avx2, base, shape(k8))[0])
    three = problem("n4g1c64o64i28x28k3x3s1x1p1x1d1x1")
    assert is_dot_config(with_dot_configs(three, avx2, base, shape(k8, 64))[0])
    assert not is_dot_config(with_dot_configs(problem("n4g1c96o96i28x28k3x3s1x1p1x1d1x1"), avx2, base, shape(k8, 96))[0])
    assert is_dot_config(with_dot_configs(wide, avx2, base, shape(k8, 512))[0])
    strided = problem("n4g1c256o512i56x56k1x1s2x2p0x0d1x1")
    assert not is_dot_config(with_dot_configs(strided, avx2, base, shape(k8, 512))[0])
    # small images: a long contraction of many short runs is not enough
    small = problem("n64g1c256o64i7x7k1x1s1x1p0x0d1x1")
    assert small.geometry.out_pixels < DOT_MIN_IMAGE_STEPS * 16
    assert not is_dot_config(with_dot_configs(small, cpu, base, shape(long_k * 4))[0])
    # not for other passes, GPUs, devices without vector lanes, or channels-last activations
    assert with_dot_configs(problem("n4g1c256o64i28x28k1x1s1x1p0x0d1x1", "forward"), cpu, base, shape(long_k)) == base
    assert with_dot_configs(big, _fake_gpu(), base, shape(long_k)) == base
    assert with_dot_configs(big, replace(cpu, float_lanes=1), base, shape(long_k)) == base
    last = problem("n4g1c256o64i28x28k1x1s1x1p0x0d1x1", layout="channels_last")
    assert with_dot_configs(last, cpu, base, shape(long_k)) == base
    # a dot config keeps its keys through tile_config (its WN is not the GEMM's VN)
    assert tile_config(cpu_dot_configs(64, 256, cpu)[0]) == cpu_dot_configs(64, 256, cpu)[0]


def test_cpu_tiles_keep_enough_work_groups_for_every_core():
    from clconv.algorithms.gemm import CPU_FILL_GROUPS, cpu_work_groups, cpu_work_items
    cpu = _fake_cpu()
    # a batch-1 7x7 1x1 2048 -> 512 forward with all 4 column blocks per work-item: 32 row blocks of
    # 16 make 4 work-groups of 8, fewer than 4 per core, so 8 of 4
    assert cpu_work_items(512, 49, (16, 16, 8), 4, 1, cpu) == 4
    assert cpu_work_groups(512, 49, 16, 16, 4, 1, 4) >= CPU_FILL_GROUPS * cpu.compute_units
    # a large GEMM keeps the tile's LX; a tiny one goes down to one work-item per work-group
    assert cpu_work_items(256, 3136, (16, 16, 8), 1, 1, cpu) == 8
    assert cpu_work_items(16, 16, (16, 16, 8), 1, 1, cpu) == 1
    first = gemm_tiles(512, 49, cpu, 4, k=2048)[0]
    assert is_cpu_config(first) and first["LX"] == cpu_work_items(512, 49, (16, 16, 8), first.get("NB", 1), 1, cpu)


def test_im2col_data_gradient_weighs_fill_and_local_loads():
    """gemm.COLUMN_WEIGHTS: im2col's column GEMM of a data gradient ranks its tiles by the waste,
    the work-item shortfall and the blocks' local loads per FMA.  ResNet-50's 1x1 stride-2
    512 -> 1024 at batch 32 (docs/perf/h200-all-tiles-im2col-data-retimed.json): the waste order's
    first, 128x64 in 8x4 blocks, ran 1.33x the fastest tile; 8x8 blocks 1.10-1.12x (64x128 first by
    the weights, 64x64 since gemm.MEDIUM_GEMM_TILE: 0.99x and 1.03x 64x128's time in two runs)."""
    from clconv.tools.devices import H200

    problem = Problem(geometry("n32g1c512o1024i28x28k1x1s2x2p0x0d1x1"), "backward_data", "float32")
    first = REGISTRY["im2col"].configs(problem, H200.stand_in())[0]
    assert (first["TM"], first["TN"], first["WM"], first["WN"]) == (64, 64, 8, 8)
    assert (64, 128, 8, 8) in [(c["TM"], c["TN"], c["WM"], c["WN"]) for c in REGISTRY["im2col"].configs(problem, H200.stand_in())]


def test_l1_set_rows_counts_rows_that_share_a_cache_set():
    from clconv.algorithms.gemm import l1_set_rows

    l1 = replace(_fake_cpu(), l1_ways=8, l1_way_bytes=4096, l1_line=64)
    assert l1_set_rows(16, 4096, l1) == 16      # a way's bytes apart: all in one set
    assert l1_set_rows(16, 8192, l1) == 16
    assert l1_set_rows(16, 2048, l1) == 8       # half a way apart: two sets
    assert l1_set_rows(16, 9216, l1) == 4       # 2304 floats (a 3x3 layer's 256 channels): four sets
    assert l1_set_rows(16, 4000, l1) == 1       # 1000 floats: every row its own set
    assert l1_set_rows(16, 4096, _fake_cpu()) == 1  # the cache unknown: nothing assumed


def test_cpu_tiles_whose_weight_rows_thrash_the_l1_cache_come_after_the_others():
    """A 1x1 layer's weight read in place, 2048 floats a row: 16-row blocks put 16 rows in one set of
    an 8-way L1 (2.1x the time of 8-row blocks on PoCL); 2040 floats a row, 512, or a packed weight
    (many sweeps of it) keep the table's first tile."""
    from clconv.algorithms.gemm import thrashing_last

    l1 = replace(_fake_cpu(), l1_ways=8, l1_way_bytes=4096, l1_line=64)
    gemm1x1 = REGISTRY["gemm1x1"]

    def first_cpu_tile(descriptor, fit):
        problem = Problem(geometry(descriptor), "forward", "float32")
        shape = gemm1x1._shape(problem)
        configs = gemm_tiles(shape.M, shape.N, fit, 4, k=shape.K)
        ordered = thrashing_last(configs, problem, shape, fit)
        assert sorted(map(str, ordered)) == sorted(map(str, configs))  # a reordering only
        assert [i for i, c in enumerate(ordered) if not is_cpu_config(c)] == \
            [i for i, c in enumerate(configs) if not is_cpu_config(c)]  # the local-memory tiles keep their places
        return next((c["WM"], c["VN"]) for c in ordered if is_cpu_config(c))

    assert first_cpu_tile("n1g1c2048o512i7x7k1x1s1x1p0x0d1x1", l1)[0] <= 8
    assert first_cpu_tile("n1g1c1024o256i14x14k1x1s1x1p0x0d1x1", l1)[0] <= 8
    assert first_cpu_tile("n1g1c2040o512i7x7k1x1s1x1p0x0d1x1", l1) == (16, 16)
    assert first_cpu_tile("n1g1c512o512i7x7k1x1s1x1p0x0d1x1", l1) == (16, 16)
    assert first_cpu_tile("n1g1c2048o512i7x7k1x1s1x1p0x0d1x1", _fake_cpu()) == (16, 16)  # the cache unknown
    assert first_cpu_tile("n8g1c1024o256i56x56k1x1s1x1p0x0d1x1", l1) == (16, 16)  # swept 196 times: packed


def test_level1_data_cache_from_sysfs(tmp_path):
    from clconv.limits import level1_data_cache

    for name, level, kind, ways, sets in (("index0", 1, "Data", 8, 64), ("index1", 1, "Instruction", 8, 64),
                                          ("index2", 2, "Unified", 8, 2048)):
        folder = tmp_path / "cache" / name
        folder.mkdir(parents=True)
        for file, value in (("level", level), ("type", kind), ("ways_of_associativity", ways),
                            ("number_of_sets", sets), ("coherency_line_size", 64)):
            (folder / file).write_text(f"{value}\n")
    assert level1_data_cache(tmp_path) == {"l1_ways": 8, "l1_way_bytes": 4096, "l1_line": 64}
    assert level1_data_cache(tmp_path / "missing") == {}


def test_spread_rows_pads_rows_of_an_even_number_of_cache_lines():
    """gemm.spread_rows: rows of 2, 4, ... 64 lines would put a K-long walk down them into half, a
    quarter, ... one of the L1's sets; one line more spreads them over every set.  Rows under
    SPREAD_MIN_LINES lines, rows that are not whole lines, and caches not known stay as they are."""
    from clconv.algorithms.gemm import SPREAD_MIN_LINES, spread_rows

    l1 = replace(_fake_cpu(), l1_ways=8, l1_way_bytes=4096, l1_line=64)
    assert spread_rows(1024, 4, l1) == 1040      # 64 lines: every row in one set
    assert spread_rows(512, 4, l1) == 528
    assert spread_rows(576, 4, l1) == 592        # a 3x3 layer's 64 channels: 36 lines
    assert spread_rows(512, 8, l1) == 520        # doubles: 64 lines
    for odd in (1040, 528, 1000, 16 * SPREAD_MIN_LINES - 16, 9):
        assert spread_rows(odd, 4, l1) == odd
    assert spread_rows(1024, 4, _fake_cpu()) == 1024  # the cache unknown: nothing assumed


def test_the_cpu_weight_gradients_column_buffer_rows_are_spread():
    """im2col's transposed column buffer on a CPU (the weight gradient's B): rows of 1024 input
    channels padded to 1040 (gemm.spread_rows) in the buffer's size, its writer and the GEMM's view
    alike; 1040 channels, and a CPU whose cache is not known, keep rows of C_in."""
    from clconv.limits import register
    from clconv.tools.devices import Described

    def plan(descriptor, l1):
        device = Described(name="a fake CPU", gpu=False, compute_units=2, work_group=4096,
                           work_item_sizes=(4096,) * 3, local_mem=4 << 20, global_mem=16 << 30).stand_in()
        register(device, replace(limits.of(device), float_lanes=16, double_lanes=8,
                                 **({"l1_ways": 8, "l1_way_bytes": 4096, "l1_line": 64} if l1 else {})))
        problem = Problem(geometry(descriptor), "backward_weight", "float32")
        config = next(c for c in REGISTRY["im2col"].configs(problem, device) if is_cpu_config(c) and not is_dot_config(c))
        out = REGISTRY["im2col"].plan(problem, config, device)
        unfold = next(c for c in out.calls if c.entry.startswith("clc_im2col_t"))
        gemm_call = next(c for c in out.calls if c.entry == "clc_gemm")
        images = out.problem.geometry.batch // sum(c.entry == "clc_gemm" for c in out.calls)
        assert out.workspaces["col"] == images * 196 * unfold.source.params["COL_T"] * 4
        return unfold.source.params["COL_T"], gemm_call.source.params["b"].get("LD")

    assert plan("n2g1c1024o256i14x14k1x1s1x1p0x0d1x1", l1=True) == (1040, 1040)
    assert plan("n2g1c1040o256i14x14k1x1s1x1p0x0d1x1", l1=True) == (1040, None)
    assert plan("n2g1c1024o256i14x14k1x1s1x1p0x0d1x1", l1=False) == (1024, None)


@pytest.mark.parametrize("tag", ["n32g1c256o64i56x56k1x1s1x1p0x0d1x1", "n8g1c3o64i224x224k3x3s1x1p1x1d1x1",
                                 "n1g1c512o512i7x7k3x3s1x1p1x1d1x1", "n8g1c64o96i25x25k3x3s1x1p1x1d1x1",
                                 "n4g4c64o128i14x14k5x5s2x2p2x2d1x1", "n2g1c16o32i8x8x8k3x3x3s1x1x1p1x1x1d1x1x1"])
@pytest.mark.parametrize("pass_", PASSES)
def test_splitk_gpu_split_is_splits_for_first(monkeypatch, tag, pass_):
    """SplitK._gpu_split (the two cuts around the aimed fill) picks what splits_for ranks first,
    for every GPU tile, also under a workspace limit that drops the larger cuts."""
    splitk = REGISTRY["splitk"]
    gpu = _fake_gpu()
    monkeypatch.setattr(limits, "of", lambda device, context=None: gpu)
    problem = Problem(geometry(tag), pass_, "float32")
    for limit in (2**31, 2**20):
        monkeypatch.setattr("clconv.settings.workspace_limit", lambda device, limit=limit: limit)
        for values in GPU_TILES:
            tile = dict(zip(("TM", "TN", "TK", "WM", "WN", "VW", "PIPE", "GV"), values))
            ranked = splitk.splits_for(problem, None, tile)
            assert splitk._gpu_split(problem, splitk.shape(problem), tile, gpu, limit) == (ranked[0] if ranked else 0)
