"""The CPU GEMM (templates/gemm_cpu.mako: no local memory, explicit vectors along N) against the
float64 reference: every algorithm that runs a GEMM, every pass, row-read (vload) and lane-by-lane
paths, remainders in M and N, runs that cross image boundaries; and that CPU devices are offered it."""

from __future__ import annotations

import types

import pyopencl as cl
import pytest

from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.algorithms.gemm import CPU_VECTOR_TILES, _b_row, cpu_config, gemm_tiles, is_cpu_config
from clconv.shapes import parse_descriptor

from helpers import OPERANDS, run_prepared

PASSES = tuple(OPERANDS)

# M = 7 output channels (remainder for WM = 4), 9x9 = 81 pixels (runs of 8 or 16 cross images).
ODD_3X3 = "mb2ic5ih9oc7oh9kh3ph1"
ODD_1X1 = "mb3ic6ih5oc10oh5kh1ph0"           # stride 1: B rows read with vload, 25-pixel images
STRIDED_1X1 = "mb2ic6ih7oc5oh4kh1sh2ph0"     # stride 2: no row form, lane-by-lane
GROUPED = "mb2g2ic8ih10oc12oh4kh3sh2ph1dh1"  # groups, stride, dilation
DECONV = "mb2ic6ih5oc4oh10kh4sh2ph1"

# 2x2 images: a 16-lane run of N spans four images (a vector must not be read from two rows then)
TINY_IMAGES = "mb8ic5ih2oc7oh2kh1ph0"

CONFIGS = {"wm4-vn8": cpu_config(4, 8, 4), "wm8-vn16": cpu_config(8, 16, 8), "wm3-vn4": cpu_config(3, 4, 2)}


def _run(queue, problem, algorithm, config, rng):
    run_prepared(queue, rng, problem, algorithm, config)


@pytest.mark.parametrize("config", list(CONFIGS), ids=list(CONFIGS))
@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("algorithm", ["im2col", "implicit_gemm"])
def test_cpu_gemm_3x3(queue, rng, algorithm, pass_, config):
    g = parse_descriptor(ODD_3X3).geometry
    _run(queue, Problem(g, pass_, "float32"), REGISTRY[algorithm], CONFIGS[config], rng)


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("desc", [ODD_1X1, STRIDED_1X1], ids=["stride1", "stride2"])
def test_cpu_gemm_1x1(queue, rng, desc, pass_):
    g = parse_descriptor(desc).geometry
    _run(queue, Problem(g, pass_, "float32"), REGISTRY["gemm1x1"], CONFIGS["wm4-vn8"], rng)


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("desc", [GROUPED, DECONV], ids=["grouped", "deconv"])
def test_cpu_gemm_grouped_and_transposed(queue, rng, desc, pass_):
    g = parse_descriptor(desc).geometry
    _run(queue, Problem(g, pass_, "float32"), REGISTRY["im2col"], CONFIGS["wm3-vn4"], rng)


@pytest.mark.parametrize("chunked", [False, True], ids=["whole-batch", "per-image"])
@pytest.mark.parametrize("config", ["wm4-vn8", "wm8-vn16"])
def test_cpu_gemm_weight_gradient_walks_dy_rows(queue, rng, monkeypatch, config, chunked):
    # M = 8 divides WM: the weight gradient's A (dy rows) is walked with a pointer, image by image
    g = parse_descriptor("mb3ic5ih9oc8oh9kh3ph1").geometry
    if chunked:
        monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(5 * 9 * 81 * 4))
    _run(queue, Problem(g, "backward_weight", "float32"), REGISTRY["im2col"], CONFIGS[config], rng)


def test_cpu_column_buffer_is_cache_sized(queue):
    g = parse_descriptor("mb8ic64ih28oc64oh28kh3ph1").geometry  # 1.8 MB of columns per image
    problem = Problem(g, "forward", "float32")
    im2col = REGISTRY["im2col"]
    assert im2col.chunk_batch(problem, queue.device, CONFIGS["wm8-vn16"]) == 1
    small = Problem(parse_descriptor("mb8ic8ih28oc64oh28kh3ph1").geometry, "forward", "float32")
    assert im2col.chunk_batch(small, queue.device, CONFIGS["wm8-vn16"]) == 8


def test_cpu_gemm_splitk(queue, rng):
    g = parse_descriptor("mb4ic6ih16oc10oh16kh3ph1").geometry  # contraction 1024: 4 pieces of 256
    problem = Problem(g, "backward_weight", "float32")
    _run(queue, problem, REGISTRY["splitk"], {**CONFIGS["wm4-vn8"], "splits": 4}, rng)


def test_cpu_gemm_bias_and_batch_chunks(queue, rng, monkeypatch):
    # a workspace for one image's columns: im2col runs the GEMM once per image (chunk > 0)
    g = parse_descriptor(ODD_3X3).geometry
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(5 * 9 * 81 * 4))
    for pass_ in PASSES:
        problem = Problem(g, pass_, "float32", bias=pass_ != "backward_weight")
        assert REGISTRY["im2col"].chunk_batch(problem, queue.device, CONFIGS["wm4-vn8"]) == 1
        _run(queue, problem, REGISTRY["im2col"], CONFIGS["wm4-vn8"], rng)
    for pass_ in ("forward", "backward_data"):
        problem = Problem(parse_descriptor(ODD_1X1).geometry, pass_, "float32", bias=True)
        _run(queue, problem, REGISTRY["gemm1x1"], CONFIGS["wm3-vn4"], rng)


def test_cpu_gemm_float64(queue, rng):
    if not queue.device.double_fp_config:
        pytest.skip("no fp64 on this device")
    g = parse_descriptor(ODD_1X1).geometry
    _run(queue, Problem(g, "forward", "float64"), REGISTRY["gemm1x1"], CONFIGS["wm3-vn4"], rng)


def test_row_form_only_where_b_is_contiguous():
    def shape_of(desc, algorithm, pass_):
        problem = Problem(parse_descriptor(desc).geometry, pass_, "float32")
        alg = REGISTRY[algorithm]
        return problem, alg._shape(problem, 1) if algorithm == "im2col" else alg._shape(problem)

    assert _b_row(*shape_of(ODD_1X1, "gemm1x1", "forward")) == (True, 25)
    assert _b_row(*shape_of(ODD_1X1, "gemm1x1", "backward_data")) == (True, 25)
    assert not _b_row(*shape_of(STRIDED_1X1, "gemm1x1", "forward"))[0]
    assert not _b_row(*shape_of(ODD_3X3, "implicit_gemm", "forward"))[0]
    assert _b_row(*shape_of(ODD_3X3, "im2col", "forward"))[0]


def test_cpu_devices_are_offered_the_vector_gemm_first():
    cpu = types.SimpleNamespace(type=cl.device_type.CPU, max_compute_units=2, max_work_group_size=4096,
                                local_mem_size=4 * 1024 * 1024)
    gpu = types.SimpleNamespace(type=cl.device_type.GPU, max_compute_units=132, max_work_group_size=1024,
                                local_mem_size=48 * 1024)
    configs = gemm_tiles(64, 1568, cpu, 4)
    assert is_cpu_config(configs[0]) and any(not is_cpu_config(c) for c in configs)
    assert not any(is_cpu_config(c) for c in gemm_tiles(64, 1568, gpu, 4))
    for wm, vn, lx in CPU_VECTOR_TILES:
        assert vn in (4, 8, 16) and wm >= 1 and lx >= 1


def test_cpu_heuristic_prefers_column_buffers_and_1x1_gemms():
    from clconv.planner import heuristic_order

    cpu = types.SimpleNamespace(type=cl.device_type.CPU)

    def first(desc, pass_):
        return heuristic_order(Problem(parse_descriptor(desc).geometry, pass_, "float32"), cpu)[0]

    assert [first(ODD_3X3, p) for p in PASSES] == ["im2col"] * 3
    assert [first("mb3ic16ih5oc10oh5kh1ph0", p) for p in PASSES] == ["gemm1x1", "gemm1x1", "im2col"]
    assert first("mb2ic16ih7oc5oh4kh1sh2ph0", "forward") == "im2col"  # strided 1x1: no row form
    assert [first("mb2g6ic6ih7oc6oh7kh3ph1", p) for p in PASSES] == ["depthwise_rows"] * 3


def test_implicit_im2col_views_keep_a_local_memory_tile_first():
    from clconv.algorithms.gemm import vector_first

    g = parse_descriptor(ODD_3X3).geometry
    for pass_ in PASSES:
        problem = Problem(g, pass_, "float32")
        assert not vector_first(problem, REGISTRY["implicit_gemm"]._shape(problem))
        assert vector_first(problem, REGISTRY["im2col"]._shape(problem, 1))


@pytest.mark.parametrize("pass_", ("forward", "backward_data"))
@pytest.mark.parametrize("algorithm", ["gemm1x1", "im2col", "implicit_gemm"])
def test_images_smaller_than_a_vector(queue, rng, algorithm, pass_):
    g = parse_descriptor(TINY_IMAGES).geometry
    _run(queue, Problem(g, pass_, "float32"), REGISTRY[algorithm], CONFIGS["wm8-vn16"], rng)
