"""The GEMM tile tables and how they are chosen: GPU tiles that fill the compute units, CPU vector
tiles offered first on CPUs, the row (vload) form only where B is contiguous, the column buffer sized
for a CPU cache, old tuning entries still valid."""

from __future__ import annotations

from dataclasses import replace

from clconv.algorithms import REGISTRY
from clconv.limits import Limits
from clconv.algorithms.gemm import (
    CPU_TILES, CPU_VECTOR_TILES, GPU_TILES, _b_row, cpu_config, gemm_tiles, is_cpu_config, tile_config, vector_first,
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


def test_gpu_tiles_are_valid_templates():
    for tm, tn, _tk, wm, wn, vw, pipe in GPU_TILES + CPU_TILES:
        assert tm % wm == 0 and tn % wn == 0 and wm % vw == 0 and wn % vw == 0
        assert vw in (1, 2, 4) and pipe in (0, 1)


def test_old_tuning_entries_without_vector_width_still_run():
    old = {"TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4}
    assert tile_config(old) == {**old, "VW": 1, "PIPE": 1}


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
    problem = Problem(geometry("n8g1c64o64i28x28k3x3s1x1p1x1d1x1"), "forward", "float32")  # 1.8 MB of columns per image
    im2col = REGISTRY["im2col"]
    assert im2col.chunk_batch(problem, queue.device, cpu_config(8, 16, 8)) == 1
    small = Problem(geometry("n8g1c8o64i28x28k3x3s1x1p1x1d1x1"), "forward", "float32")
    assert im2col.chunk_batch(small, queue.device, cpu_config(8, 16, 8)) == 8
