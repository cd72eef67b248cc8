"""The GEMM-based algorithms (implicit_gemm, gemm1x1, im2col, splitk) in their tile configurations,
below the public ops (helpers.run_prepared: a prepared algorithm against the float64 reference):

* the GPU tiles (kernels/gemm.mako): vector widths 1/2/4, tiles that do and do not divide the
  matrices, load loops whose trip count does not divide the tile, with and without pipelining;
* the CPU GEMM (kernels/gemm_cpu.mako: no local memory, explicit vectors along N): row-read (vload)
  and lane-by-lane paths, remainders in M and N, runs that cross image boundaries, packed weights;
* im2col's batch chunks under a workspace limit, and split-K's cut of the weight gradient's
  contraction (through the public ops as well).

Which configuration the planner offers a device: tests/unit/test_gemm_tiles.py.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import numpy as np
import pyopencl.array as cl_array
import pytest

import clconv
from clconv import caches, limits, templates
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import TILE_KEYS, cpu_config, dot_config
from clconv.epilogue import Epilogue
from clconv.passes import PASSES
from clconv.plan import Problem

from cases import SPLITK_CASE, Case, geometry, splitk_expected_to_serve
from helpers import assert_matches, poisoned, random, run_prepared

ODD_3X3 = "n2g1c5o7i9x9k3x3s1x1p1x1d1x1"        # M = 7 (a remainder for WM = 4), 81 pixels: runs of 8/16 cross images
GROUPED = "n2g2c8o12i10x10k3x3s2x2p1x1d2x2"     # groups, stride, dilation
DECONV = "n2g1c6o4i5x5k4x4s2x2p1x1e16x16d1x1"   # a transposed-conv-like layer: output larger than input
ODD_1X1 = "n3g1c6o10i5x5k1x1s1x1p0x0d1x1"       # stride 1: B rows read with vload, 25-pixel images
STRIDED_1X1 = "n2g1c6o5i7x7k1x1s2x2p0x0d1x1"    # stride 2: no row form, lane-by-lane
TINY_IMAGES = "n8g1c5o7i2x2k1x1s1x1p0x0d1x1"    # 2x2 images: a 16-lane run of N spans four images
LONG_CONTRACTION = "n4g1c6o10i16x16k3x3s1x1p1x1d1x1"  # weight gradient's contraction 1024: 4 pieces of 256
EXACT_1X1 = "n2g1c16o32i8x8k1x1s1x1p0x0d1x1"    # M=32, N=128, K=16: divides TM=32, TN=64, TK=16 (no bounds checks)


def _run(queue, rng, tag, pass_, algorithm, config, bias=False, dtype="float32", layout="channels_first"):
    run_prepared(queue, rng, Problem(geometry(tag), pass_, dtype, bias=bias, layout=layout), REGISTRY[algorithm],
                 config)


# -- the GPU tiles ------------------------------------------------------------------------------------

TILES = {
    # TM, TN, TK, WM, WN, VW, PIPE
    "vw4-uneven-loads": (24, 32, 8, 4, 4, 4, 1),  # 48 work-items: the B tile's 256 loads do not divide
    "vw2": (32, 64, 16, 2, 4, 2, 1),
    "vw4-nopipe": (24, 32, 8, 4, 4, 4, 0),
    "vw1": (16, 16, 8, 2, 2, 1, 1),
    # at most 32 work-items, as Mesa's llvmpipe grants: the vector paths on small devices too
    "vw4-24items-uneven": (24, 16, 8, 4, 4, 4, 1),  # 6 x 4 work-items; the B tile's 128 loads do not divide
    "vw2-32items-nopipe": (16, 16, 16, 2, 4, 2, 0),  # 8 x 4 work-items
}
TILE_GEOMETRIES = {"k3p1-odd": ODD_3X3, "g2k3s2d2": GROUPED, "deconv-k4s2": DECONV}


def _tile(name):
    return dict(zip(TILE_KEYS, TILES[name]))


# Every tile on every geometry, except the two variants that only change the vector width or the
# pipelining: those run on one geometry (PoCL builds are slow).
TILE_CASES = [
    pytest.param(geometry_name, tile, id=f"{geometry_name}-{tile}")
    for geometry_name in TILE_GEOMETRIES
    for tile in TILES
    if tile not in ("vw1", "vw4-nopipe", "vw2-32items-nopipe") or geometry_name == "k3p1-odd"
]


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("geometry_name, tile", TILE_CASES)
def test_implicit_gemm_tiles(queue, rng, geometry_name, pass_, tile):
    _run(queue, rng, TILE_GEOMETRIES[geometry_name], pass_, "implicit_gemm", _tile(tile))


# Channels-last, the forward and the data gradient run as the transposed GEMM (rows the pixels),
# the weight gradient with tap-major columns stored back at their (channel, tap) places.
@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("geometry_name, tile", [("k3p1-odd", "vw4-uneven-loads"), ("g2k3s2d2", "vw2"),
                                                 ("deconv-k4s2", "vw4-24items-uneven")])
def test_implicit_gemm_tiles_channels_last(queue, rng, geometry_name, pass_, tile):
    _run(queue, rng, TILE_GEOMETRIES[geometry_name], pass_, "implicit_gemm", _tile(tile),
         bias=pass_ != "backward_weight", layout="channels_last")


@pytest.mark.parametrize("pass_", PASSES)
def test_gemm1x1_channels_last(queue, rng, pass_):
    for tag in (ODD_1X1, STRIDED_1X1):
        _run(queue, rng, tag, pass_, "gemm1x1", _tile("vw4-uneven-loads"), layout="channels_last")


@pytest.mark.parametrize("pass_", PASSES)
def test_exactly_tiled_1x1_without_bounds_checks(queue, rng, pass_):
    _run(queue, rng, EXACT_1X1, pass_, "gemm1x1", dict(zip(TILE_KEYS, (32, 64, 16, 4, 8, 4, 0))))


@pytest.mark.parametrize("pass_", PASSES)
def test_im2col_with_vector_tiles(queue, rng, pass_):
    _run(queue, rng, ODD_3X3, pass_, "im2col", _tile("vw4-uneven-loads"))


@pytest.mark.parametrize("tag", ["n2g1c3o4i10x10k5x3s2x3p2x0d1x1", "n1g1c2o4i4x9x9k2x4x4s2x4x4p0x0x0d1x1x1", GROUPED],
                         ids=["taps-by-stride-and-patches", "3d-patches", "g2k3s2d2"])
def test_im2col_gpu_col2im_on_strided_layers(queue, rng, tag):
    """The GPU tiles' col2im (clc_col2im, a gather per dx element; CPU tiles fold rows instead):
    strided without dilation it visits only the taps a stride apart that land on the output grid
    (prelude.source_taps), patches (kernel = stride) one tap a dim, the last column and rows of a
    9-wide image reached by none; with dilation, every tap tested."""
    _run(queue, rng, tag, "backward_data", "im2col", _tile("vw4-uneven-loads"), bias=True)


def test_splitk_with_vector_tiles(queue, rng):
    _run(queue, rng, LONG_CONTRACTION, "backward_weight", "splitk", {**_tile("vw4-uneven-loads"), "splits": 4})


# -- split-K in one launch: the last piece of each output tile sums them (gemm.mako's FINISH) -------

# (geometry, pass, layout, tile, pieces, epilogue): edge tiles in M and N, groups, channels-last's
# transposed GEMM, the weight gradient's tap-major columns, vector stores of the partials, uneven
# pieces (a last piece shorter than the others), bias and the full epilogue; each pass in a tile of
# at most 32 work-items too (what Mesa's llvmpipe grants)
ONE_LAUNCH_CASES = [
    ("n1g1c64o7i5x5k3x3s1x1p1x1d1x1", "forward", "channels_first", "vw4-uneven-loads", 3, True),
    ("n1g2c64o14i5x5k3x3s2x2p1x1d1x1", "backward_data", "channels_first", "vw4-24items-uneven", 2, True),
    ("n1g1c64o14i5x5k3x3s1x1p1x1d1x1", "backward_data", "channels_last", "vw2", 2, True),
    ("n1g1c48o10i5x5k3x3s1x1p1x1d1x1", "forward", "channels_last", "vw4-24items-uneven", 4, True),
    (LONG_CONTRACTION, "backward_weight", "channels_first", "vw4-uneven-loads", 4, False),
    ("n2g1c6o10i8x8k3x3s1x1p1x1d1x1", "backward_weight", "channels_last", "vw1", 2, False),
    (GROUPED, "backward_weight", "channels_first", "vw2-32items-nopipe", 2, False),
]


def _splitk_result(queue, problem, config, one_launch, operands):
    """split-K's result for ``operands`` (host arrays by role), its pieces summed in the GEMM's launch
    or by a second kernel, into a NaN-poisoned result; and the entry points it launched."""
    from clconv import planner
    from clconv.runtime import Operand

    runner = planner.build(REGISTRY["splitk"].plan(problem, config, queue.device, one_launch=one_launch), queue)
    arrays = {role: cl_array.to_device(queue, value) for role, value in operands.items()}
    result = poisoned(queue, problem.spec.result_shape(problem.geometry))
    ops = {role: Operand(array.data) for role, array in arrays.items()}
    ops[problem.spec.result] = Operand(result.data)
    runner.run(queue, ops)
    return result.get(), [launch.call.entry for launch in runner.launches]


@pytest.mark.parametrize("tag, pass_, layout, tile, pieces, bias", ONE_LAUNCH_CASES,
                         ids=[f"{c[1]}-{c[2]}-{c[3]}-{c[4]}" for c in ONE_LAUNCH_CASES])
def test_splitk_in_one_launch_matches_two_launches_bit_for_bit(queue, rng, tag, pass_, layout, tile, pieces, bias):
    """Where the device lets work-groups hand results over (limits.handoff_fence_of: CPU devices,
    NVIDIA's GPUs), split-K's GPU tiles sum their pieces in the GEMM's launch: the same sums in the same
    order as the second kernel's, so the same bits, call after call (each launch leaves its tickets
    at zero for the next), and within the float64 reference's tolerance."""
    if not limits.of(queue.device).handoff_fence:
        pytest.skip(f"{queue.device.name!r} is not known to order stores across work-groups: two launches only")
    epilogue = Epilogue("leaky_relu", negative_slope=0.2, alpha=0.75, beta=-0.5, residual=True) if bias else Epilogue()
    problem = Problem(geometry(tag), pass_, "float32", bias=bias, epilogue=epilogue, layout=layout)
    config = {**_tile(tile), "splits": pieces}
    run_prepared(queue, rng, problem, REGISTRY["splitk"], config)  # through the planner, against float64
    spec, g = problem.spec, problem.geometry
    roles = [*spec.inputs, *(["bias"] if bias else []), *(["residual"] if epilogue.residual else [])]
    for round_ in range(3):  # fresh data each round: the tickets must be back at zero every time
        operands = {role: random(rng, spec.shape(role, g)) for role in roles}
        one, one_entries = _splitk_result(queue, problem, config, True, operands)
        two, two_entries = _splitk_result(queue, problem, config, False, operands)
        assert one_entries == ["clc_gemm"] and two_entries[-1].startswith("clc_splitk_"), (one_entries, two_entries)
        assert np.isfinite(one).all() and np.array_equal(one.view(np.uint32), two.view(np.uint32)), round_


# -- the GPU tiles' global loads as aligned vectors (GV) ---------------------------------------------

# 24 work-items; 4-wide loads of A and B.  Narrow tiles of columns: A's vectors along k need 4+ of
# them (MIN_VECTOR_A_REUSE)
GV_TILE = dict(zip(TILE_KEYS, (24, 8, 8, 4, 2, 2, 1, 3)))
GV_1X1 = "n2g1c32o20i4x6k1x1s1x1p0x0d1x1"  # 24-pixel images (runs of 4 stay in one); M=20 leaves an edge tile
GV_3X3 = "n2g1c40o8i8x8k3x3s1x1p1x1d1x1"   # the column buffer's rows in vectors


def _vector_loads(problem, algorithm, config, device) -> int:
    """How many of the operands of the plan's GEMM are read in vectors (the rendered casts)."""
    from clconv import templates

    sources, _ = templates.render_plan(REGISTRY[algorithm].plan(problem, config, device))
    text = "".join(source.text for source in sources)
    return ("4*)(a + clc_at_a" in text) + ("4*)(b + clc_at_b" in text)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("pass_", PASSES)
def test_vector_loads_of_the_call_tensors(queue, rng, pass_, dtype):
    if dtype == "float64" and not queue.device.double_fp_config:
        pytest.skip(f"{queue.device.name!r} has no float64")
    problem = Problem(geometry(GV_1X1), pass_, dtype)
    # the data gradient reads the transposed weight and dy in place as matrices (pointwise_data_shape)
    assert _vector_loads(problem, "gemm1x1", GV_TILE, queue.device) == 2
    _run(queue, rng, GV_1X1, pass_, "gemm1x1", GV_TILE, dtype=dtype)


def test_vector_loads_of_splitk_pointwise_weight_gradient(queue, rng):
    # split-K's 1x1 weight gradient reads the input in place (b_input_pointwise_t), not unfolded
    config = {**GV_TILE, "splits": 2}
    problem = Problem(geometry(GV_1X1), "backward_weight", "float32")
    assert _vector_loads(problem, "splitk", config, queue.device) == 2
    _run(queue, rng, GV_1X1, "backward_weight", "splitk", config)


@pytest.mark.parametrize("algorithm, pass_, vectors", [("im2col", "forward", 1), ("winograd", "backward_weight", 2)])
def test_vector_loads_of_workspaces_under_half_storage(queue, rng, algorithm, pass_, vectors):
    # float16 tensors are read as scalars (vload_half); im2col's column buffer and Winograd's
    # transformed operands hold floats, and are read in vectors
    problem = Problem(geometry(GV_3X3), pass_, "float16")
    config = {"m": 2, **GV_TILE} if algorithm == "winograd" else GV_TILE
    assert _vector_loads(problem, algorithm, config, queue.device) == vectors
    _run(queue, rng, GV_3X3, pass_, algorithm, config, dtype="float16")


def test_vector_loads_on_winograd_pieces(queue, rng):
    # Winograd's weight gradient over 2 x 16 tiles cut in pieces of 16 and of 12 (a piece's last
    # step partly past its end)
    for splits in (2, 3):
        config = {"m": 2, "splits": splits, **GV_TILE}
        assert _vector_loads(Problem(geometry(GV_3X3), "backward_weight", "float32"), "winograd", config,
                             queue.device) == 2
        _run(queue, rng, GV_3X3, "backward_weight", "winograd", config)


def test_vector_loads_refused_where_a_run_of_4_is_not_contiguous():
    from clconv.algorithms.gemm import forward_shape, global_vectors, weight_shape

    def vectors(tag, pass_="forward", dtype="float32", layout="channels_first"):
        g = geometry(tag)
        problem = Problem(g, pass_, dtype, layout=layout)
        shape = forward_shape(g, "b_input_pointwise", layout=layout) if pass_ == "forward" else \
            weight_shape(g, "b_input_pointwise_t", layout=layout)
        return global_vectors(problem, shape, GV_TILE)

    assert vectors(GV_1X1) == (True, True)
    assert vectors(GV_1X1, "backward_weight") == (True, True)
    assert vectors(GV_1X1, dtype="bfloat16") == (False, False)  # stored as ushort: scalar loads
    assert vectors(STRIDED_1X1) == (False, False)                # 5 input channels; the stride's holes
    # 25-pixel images: B's runs would cross them, and A's vectors along k need B's
    assert vectors("n2g1c12o20i5x5k1x1s1x1p0x0d1x1") == (False, False)
    assert vectors(GV_1X1, layout="channels_last")[1] is False
    # one 4x6 image: 24 columns, 3 tiles of 8, too few to read A (the weight) in vectors along k
    assert vectors("n1g1c32o20i4x6k1x1s1x1p0x0d1x1") == (False, True)
    # 12 input channels: the weight gradient's B (along k) only beside A's vectors, which 2 tiles
    # of columns do not get
    assert vectors("n2g1c12o20i4x6k1x1s1x1p0x0d1x1", "backward_weight") == (False, False)
    # split-K's A, dy's rows, beside the implicit im2col's scalar B: scalar too
    g = geometry(LONG_CONTRACTION)
    assert global_vectors(Problem(g, "backward_weight", "float32"),
                          weight_shape(g, "b_input_unfold_t", ksplit=128), GV_TILE) == (False, False)
    assert global_vectors(Problem(geometry(GV_1X1), "forward", "float32"),
                          forward_shape(geometry(GV_1X1), "b_input_pointwise"), {**GV_TILE, "GV": 0}) == (False, False)


def test_vector_loads_fall_back_to_scalar_loads_for_an_operand_off_alignment(queue, rng):
    """A view starting one element into its buffer: the runner runs its scalar-load twin."""
    from clconv import planner, reference
    from clconv.runtime import Operand

    problem = Problem(geometry(GV_1X1), "forward", "float32")
    runner = planner.prepare(problem, REGISTRY["gemm1x1"], GV_TILE, queue)
    assert runner.aligned == {"x": 4, "w": 4, "y": 2}  # y: stored in vectors of VW = 2 (vector_stores)
    g = problem.geometry
    x, w = (rng.standard_normal(problem.spec.shape(role, g)).astype("float32") for role in problem.spec.inputs)
    ref = reference.run_pass("forward", g, x.astype("float64"), w.astype("float64"))
    for shift, out_shift in ((0, 0), (1, 0), (4, 0), (0, 1), (4, 2)):
        holder = cl_array.empty(queue, x.size + shift, "float32")
        holder[shift:].set(x.ravel())
        out = poisoned(queue, (ref.size + out_shift,))
        operands = {"x": Operand(holder.base_data, shift), "w": Operand(cl_array.to_device(queue, w).base_data),
                    "y": Operand(out.base_data, out_shift)}
        assert runner.misaligned(operands) == (shift % 4 != 0 or out_shift % 2 != 0)
        runner.run(queue, operands)
        stored = out.get()
        assert np.isnan(stored[:out_shift]).all()  # nothing written before the view
        assert_matches(stored[out_shift:].reshape(ref.shape), ref, problem.spec.reduction_length(g))


# -- the GPU tiles' stores of C as aligned vectors (vector_stores) -----------------------------------

# 16 work-items, register blocks of 4 x 4 in sub-blocks of VW = 4, vector loads and stores on
VS_TILE = dict(zip(TILE_KEYS, (16, 16, 8, 4, 4, 4, 1, 3)))
VS_1X1 = "n3g1c8o12i4x6k1x1s1x1p0x0d1x1"   # 24-pixel images; M = 12 and N = 72 leave edge tiles
VS_3X3 = "n2g1c8o12i4x6k3x3s1x1p1x1d1x1"
VS_WINOGRAD = "n2g1c8o12i4x8k3x3s1x1p1x1d1x1"
LEAKY_RESIDUAL = Epilogue("leaky_relu", negative_slope=0.2, alpha=0.75, beta=-0.5, residual=True)


def _vector_stores(problem, algorithm, config, device) -> list[int]:
    """Per program of the plan, the GEMM stores of C it makes in vectors (the rendered calls)."""
    from clconv import templates

    sources, _ = templates.render_plan(REGISTRY[algorithm].plan(problem, config, device))
    return [source.text.count("clc_store_c_vec(c,") for source in sources]


@pytest.mark.parametrize("algorithm, tag, pass_, layout, config, stores", [
    ("gemm1x1", VS_1X1, "forward", "channels_first", VS_TILE, [1]),             # the result, NCHW
    ("gemm1x1", VS_1X1, "forward", "channels_last", VS_TILE, [1]),              # the result, NHWC (12 channels)
    ("implicit_gemm", VS_3X3, "backward_data", "channels_first", VS_TILE, [1]),  # dx, the input's pixels
    ("implicit_gemm", VS_3X3, "backward_data", "channels_last", VS_TILE, [1]),
    ("splitk", VS_3X3, "forward", "channels_first", {**VS_TILE, "splits": 2}, [1, 0]),  # the pieces' workspace
    ("winograd", VS_WINOGRAD, "forward", "channels_first", {**VS_TILE, "m": 2}, [0, 1]),  # the GEMMs' workspace
    ("im2col", VS_3X3, "backward_data", "channels_first", VS_TILE, [1, 0]),     # the column buffer, then col2im
], ids=["1x1-nchw", "1x1-nhwc", "data-nchw", "data-nhwc", "splitk-pieces", "winograd-gemms", "im2col-columns"])
def test_vector_stores_with_the_epilogue(queue, rng, algorithm, tag, pass_, layout, config, stores):
    # act(alpha * conv + bias + beta * residual) on each lane of a vector store, with edge tiles in
    # M and N that leave whole runs of 4 columns out
    problem = Problem(geometry(tag), pass_, "float32", bias=True, epilogue=LEAKY_RESIDUAL, layout=layout)
    if algorithm == "splitk" and REGISTRY["splitk"].one_launch(problem, config, queue.device):
        stores = stores[:1]  # the pieces summed by the GEMM's own launch: no second program
    assert _vector_stores(problem, algorithm, config, queue.device) == stores
    run_prepared(queue, rng, problem, REGISTRY[algorithm], config)


def test_vector_stores_refused_where_a_run_of_columns_is_not_contiguous(queue):
    def stores(tag, algorithm="gemm1x1", dtype="float32", layout="channels_first", config=VS_TILE):
        return _vector_stores(Problem(geometry(tag), "forward", dtype, layout=layout), algorithm, config, queue.device)

    assert stores(VS_1X1) == [1]
    assert stores("n3g1c8o12i5x5k1x1s1x1p0x0d1x1") == [0]     # 25-pixel images: a run would cross two
    assert stores("n3g1c8o10i4x6k1x1s1x1p0x0d1x1", layout="channels_last") == [0]  # 10 channels a pixel
    assert stores(VS_1X1, dtype="float16") == [0]               # a half result: scalar stores
    assert stores(VS_1X1, dtype="bfloat16") == [0]
    assert stores(VS_1X1, config={**VS_TILE, "GV": 0}) == [0]    # the scalar twin
    assert stores(VS_1X1, config={**VS_TILE, "VW": 1}) == [0]
    # Winograd's GEMMs write a float workspace whatever the storage; its output transform stores the result
    assert stores(VS_WINOGRAD, "winograd", "float16", config={**VS_TILE, "m": 2}) == [0, 1]


def test_vector_stores_of_half_storage_stay_scalar_and_match(queue, rng):
    problem = Problem(geometry(VS_1X1), "forward", "float16", bias=True, epilogue=LEAKY_RESIDUAL)
    run_prepared(queue, rng, problem, REGISTRY["gemm1x1"], VS_TILE)


# -- the CPU GEMM -------------------------------------------------------------------------------------

CPU = {"wm4-vn8": cpu_config(4, 8, 4), "wm8-vn16": cpu_config(8, 16, 8), "wm3-vn4": cpu_config(3, 4, 2),
       # 4 blocks of columns per work-item, the contraction in steps of 5: steps and blocks with
       # remainders (the last work-item of 81 columns has one block of its four)
       "wm3-vn4-nb4": cpu_config(3, 4, 2, nb=4, kc=5)}
COLUMN_BLOCKS = cpu_config(4, 8, 4, nb=3, kc=7)  # M = 8 divides WM: the weight gradient walks dy rows


@pytest.mark.parametrize("config", list(CPU))
@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("algorithm", ["im2col", "implicit_gemm"])
def test_cpu_gemm_3x3(queue, rng, algorithm, pass_, config):
    _run(queue, rng, ODD_3X3, pass_, algorithm, CPU[config])


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("tag", [ODD_1X1, STRIDED_1X1], ids=["stride1", "stride2"])
def test_cpu_gemm_1x1(queue, rng, tag, pass_):
    _run(queue, rng, tag, pass_, "gemm1x1", CPU["wm4-vn8"])


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("tag", [GROUPED, DECONV], ids=["grouped", "deconv"])
def test_cpu_gemm_grouped_and_transposed(queue, rng, tag, pass_):
    _run(queue, rng, tag, pass_, "im2col", CPU["wm3-vn4"])


@pytest.mark.parametrize("chunked", [False, True], ids=["whole-batch", "per-image"])
@pytest.mark.parametrize("config,outputs", [("wm4-vn8", 8), ("wm8-vn16", 8), ("wm4-vn8", 7)],
                         ids=["wm4-m8", "wm8-m8", "wm4-m7-shifted"])
def test_cpu_gemm_weight_gradient_walks_dy_rows(queue, rng, monkeypatch, config, outputs, chunked):
    # M = 8 divides WM: the weight gradient's A (dy rows) is walked with a pointer, image by image;
    # M = 7 too, its last block of 4 rows shifted back to rows 3-6 (rows 4-6 stored)
    if chunked:
        monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(5 * 9 * 81 * 4))
    _run(queue, rng, f"n3g1c5o{outputs}i9x9k3x3s1x1p1x1d1x1", "backward_weight", "im2col", CPU[config])


@pytest.mark.parametrize("config,rows", [("wm4-vn8", "shifted"), ("wm3-vn4", "shifted"), ("wm8-vn16", "clamped")])
def test_cpu_gemm_last_block_of_rows_read_in_place(queue, rng, config, rows):
    """A read in place (a weight of 25 columns: too few sweeps to pack) by a last block of rows that
    M (7) does not fill: shifted back to end at M where M holds a whole block, so that its rows'
    addresses are one base and constant offsets (a clamp per row spilled the 6 x 16 tile's
    accumulators on AVX2: 2x its time), clamped per row where it does not (WM = 8).  The weight
    gradient's dy rows: test_cpu_gemm_weight_gradient_walks_dy_rows."""
    tag = "n1g1c9o7i5x5k1x1s1x1p0x0d1x1"  # M = 7, N = 25
    problem = Problem(geometry(tag), "forward", "float32")
    plan = REGISTRY["gemm1x1"].plan(problem, CPU[config], queue.device)
    assert "clc_pack_a" not in [call.entry for call in plan.calls]
    gemm = next(s.text for s in templates.render_plan(plan)[0] if "void clc_gemm(" in s.text)
    assert ("m_own" in gemm) == (rows == "shifted")
    assert ("min(m0 + 1, CLC_M - 1)" in gemm) == (rows == "clamped")
    _run(queue, rng, tag, "forward", "gemm1x1", CPU[config], bias=True)


def test_cpu_gemm_splitk(queue, rng):
    _run(queue, rng, LONG_CONTRACTION, "backward_weight", "splitk", {**CPU["wm4-vn8"], "splits": 4})


@pytest.mark.parametrize("case", [
    ("n3g1c5o8i9x9k3x3s1x1p1x1d1x1", "backward_weight", "im2col"),  # dy rows walked image by image
    (ODD_1X1, "forward", "gemm1x1"),        # B rows of 25-pixel images: runs cross images
    (ODD_1X1, "backward_data", "gemm1x1"),
    (STRIDED_1X1, "forward", "gemm1x1"),    # no row form: lane by lane
    (LONG_CONTRACTION, "backward_weight", "splitk"),  # steps within each split piece
], ids=["dy-rows", "1x1-forward", "1x1-data", "1x1-strided", "splitk"])
def test_cpu_gemm_column_blocks(queue, rng, case):
    tag, pass_, algorithm = case
    config = {**COLUMN_BLOCKS, "splits": 4} if algorithm == "splitk" else COLUMN_BLOCKS
    _run(queue, rng, tag, pass_, algorithm, config, bias=pass_ != "backward_weight")


FEW_CHANNELS = "n2g1c3o4i32x32k3x3s1x1p1x1d1x1"  # 4 x 27 weight gradient, 1024 pixels per image


@pytest.mark.parametrize("chunked", [False, True], ids=["whole-batch", "per-image"])
def test_cpu_weight_gradient_in_pieces(queue, rng, monkeypatch, chunked):
    # one work-group of rows x 4 of columns: fewer than the cores share out, so each chunk's
    # contraction is cut into pieces, summed at the end (per image: onto the earlier chunks' sums too)
    problem = Problem(geometry(FEW_CHANNELS), "backward_weight", "float32")
    if chunked:
        monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(27 * 1024 * 4))
    monkeypatch.setattr(REGISTRY["im2col"], "CPU_FILL", 8 * 64)  # as many pieces as 256-long cuts allow
    plan = REGISTRY["im2col"].plan(problem, CPU["wm4-vn8"], queue.device)
    entries = [c.entry for c in plan.calls]
    pieces = (1 if chunked else 2) * 1024 // 256  # the chunk's pixels in pieces of SplitK.MIN_PIECE
    assert entries[-1] == "clc_splitk_sum" and plan.workspaces["partial"] == pieces * problem.geometry.weight_elements * 4
    assert entries.count("clc_gemm") == (2 if chunked else 1)
    run_prepared(queue, rng, problem, REGISTRY["im2col"], CPU["wm4-vn8"])


def test_cpu_gemm_bias_and_batch_chunks(queue, rng, monkeypatch):
    # a workspace for one image's columns: im2col runs the GEMM once per image (chunk > 0)
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(5 * 9 * 81 * 4))
    for pass_ in PASSES:
        problem = Problem(geometry(ODD_3X3), pass_, "float32", bias=pass_ != "backward_weight")
        assert REGISTRY["im2col"].chunk_batch(problem, queue.device, CPU["wm4-vn8"]) == 1
        run_prepared(queue, rng, problem, REGISTRY["im2col"], CPU["wm4-vn8"])
    for pass_ in ("forward", "backward_data"):
        _run(queue, rng, ODD_1X1, pass_, "gemm1x1", CPU["wm3-vn4"], bias=True)


def test_cpu_gemm_float64(queue, rng):
    if not queue.device.double_fp_config:
        pytest.skip("no fp64 on this device")
    _run(queue, rng, ODD_1X1, "forward", "gemm1x1", CPU["wm3-vn4"], dtype="float64")


@pytest.mark.parametrize("pass_", ("forward", "backward_data"))
@pytest.mark.parametrize("algorithm", ["gemm1x1", "im2col", "implicit_gemm"])
def test_images_smaller_than_a_vector(queue, rng, algorithm, pass_):
    _run(queue, rng, TINY_IMAGES, pass_, algorithm, CPU["wm8-vn16"])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("tag", [ODD_1X1, "n2g2c40o8i5x5k1x1s1x1p0x0d1x1", TINY_IMAGES],
                         ids=["odd", "grouped-partial-tiles", "tiny-images"])
def test_cpu_gemm_1x1_weight_gradient_input_turned_over_in_tiles(queue, rng, tag, dtype):
    # im2col's transposed buffer of a 1x1 stride-1 layer (clc_im2col_t_tiles, where the device has
    # vector lanes): full tiles, tiles past the last pixel or the group's last channel, 2x2 images
    problem = Problem(geometry(tag), "backward_weight", dtype)
    plan = REGISTRY["im2col"].plan(problem, CPU["wm4-vn8"], queue.device)
    if limits.of(queue.device).lanes(problem.itemsize) >= 4:
        assert plan.calls[0].entry == "clc_im2col_t_tiles"
    run_prepared(queue, rng, problem, REGISTRY["im2col"], CPU["wm4-vn8"])


@pytest.mark.parametrize("tag, writer", [
    ("n2g1c256o8i5x5k1x1s1x1p0x0d1x1", "clc_im2col_t_tiles"),   # rows of 256: 16 lines, padded to 17
    ("n2g2c64o6i6x6k3x3s1x1p1x1d1x1", "clc_im2col_t_rows"),     # 2 groups of 32 x 9 = 288: 18 lines
    ("n2g1c96o5i6x7k1x3s1x2p0x1d1x1", "clc_im2col_t"),          # 96 x 3 taps, strided
], ids=["1x1-tiles", "3x3-grouped", "1x3-strided"])
@pytest.mark.parametrize("chunked", [False, True], ids=["whole-batch", "per-image"])
def test_cpu_weight_gradient_with_spread_column_rows(queue, rng, monkeypatch, tag, writer, chunked):
    # im2col's transposed column buffer with rows padded by a line (gemm.spread_rows), as a CPU with a
    # known 8-way L1 of 64-byte lines pads them: every writer, the groups' offsets, one image per chunk
    problem = Problem(geometry(tag), "backward_weight", "float32")
    g = problem.geometry
    row = g.cin_per_group * g.kernel_volume
    if chunked:
        monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(g.groups * g.out_pixels * (row + 16) * 4))
    config = CPU["wm4-vn8"]
    found = limits.of(queue.device)
    limits.register(queue.device, replace(found, l1_ways=8, l1_way_bytes=4096, l1_line=64,
                                          float_lanes=max(found.float_lanes, 4)))
    try:
        plan = REGISTRY["im2col"].plan(problem, config, queue.device)
        gemm_call = next(c for c in plan.calls if c.entry == "clc_gemm")
        assert plan.calls[0].entry == writer and plan.calls[0].source.params["COL_T"] == row + 16
        assert gemm_call.source.params["b"]["LD"] == row + 16
        assert sum(c.entry == "clc_gemm" for c in plan.calls) == (2 if chunked else 1)
        run_prepared(queue, rng, problem, REGISTRY["im2col"], config)
    finally:
        limits.register(queue.device, found)


PACKED_B_CASES = [  # (algorithm, pass, geometry, config): each B view the CPU GEMM packs
    ("im2col", "forward", ODD_3X3, "wm4-vn8"),             # column buffer, 162 columns: a partial last panel
    ("im2col", "forward", GROUPED, "wm3-vn4-nb4"),         # two groups' panels; blocks of columns, k steps of 5
    ("im2col", "forward", "n2g1c5o7i8x8k3x3s1x1p1x1d1x1", "wm4-vn8"),        # rows of 8: written in panels
    ("im2col", "forward", "n2g2c4o6i8x8k3x3s1x1p1x1d1x1", "wm3-vn4-nb4"),    # two groups' panels, written
    ("im2col", "backward_data", "n2g1c6o9i9x9k3x3s1x1p1x1d1x1", "wm4-vn8"),  # dy's rows (b_grad_output_cols)
    ("gemm1x1", "forward", ODD_1X1, "wm4-vn8"),            # the input in place: runs of 8 cross 25-pixel images
    ("gemm1x1", "backward_data", ODD_1X1, "wm8-vn16"),     # dy in place, 75 columns under 16 lanes
    ("im2col", "backward_weight", ODD_3X3, "wm4-vn8"),     # the transposed buffer written in panels (clc_im2col_t_rows)
    ("im2col", "backward_weight", "n2g1c5o7i9x9k1x2s1x1p0x0d1x1", "wm4-vn8"),  # 2 taps (clc_im2col_t): copied
]


# each case whole-batch, and im2col's per image too (gemm1x1 runs the whole batch in one GEMM)
PACKED_B_PARAMS = [pytest.param(*case, chunked, id=f"{case[0]}-{case[1]}-{case[3]}-{'per-image' if chunked else 'whole-batch'}")
                   for case in PACKED_B_CASES for chunked in ((False, True) if case[0] == "im2col" else (False,))]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("algorithm, pass_, tag, config, chunked", PACKED_B_PARAMS)
def test_cpu_gemm_reads_b_packed(queue, rng, monkeypatch, algorithm, pass_, tag, config, chunked, dtype):
    # B copied into panels of VN columns before the GEMM (gemm.packs_b), as a CPU packs B whose rows
    # lie a page or more apart: here every row counts as a page apart and every M and K as large enough
    from clconv.algorithms import gemm as gemm_module

    monkeypatch.setattr(gemm_module, "PAGE_BYTES", 4)
    monkeypatch.setattr(gemm_module, "PACK_B_MIN_ROWS", 1)
    monkeypatch.setattr(gemm_module, "PACK_B_MIN_K", 1)
    caches.clear_caches()  # the prepared runners are keyed without the rule: none from another test
    problem = Problem(geometry(tag), pass_, dtype)
    g = problem.geometry
    if chunked:  # one image's column buffer per chunk
        monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(g.groups * g.cin_per_group * g.kernel_volume * g.out_pixels * 4))
    try:
        plan = REGISTRY[algorithm].plan(problem, CPU[config], queue.device)
        entries = [c.entry for c in plan.calls]
        packs, gemms = entries.count("clc_pack_b"), entries.count("clc_gemm")
        writer = next((c for c in plan.calls if c.source.params.get("PANEL_VN")), None)
        if writer is not None:
            # the column buffer written as the panels themselves: the weight gradient's transposed
            # one (its last panel's lanes past N zeroed by the writer: 5 channels x 9 taps = 45 of
            # 48), the forward's where an output row is a whole number of panel rows
            assert writer.entry in ("clc_im2col_rows", "clc_im2col_t_rows"), entries
            assert packs == 0 and writer.source.params["PANEL_VN"] == CPU[config]["VN"], entries
            assert (writer.entry == "clc_im2col_rows") == (pass_ == "forward")
            assert pass_ == "backward_weight" or g.out_size[-1] % CPU[config]["VN"] == 0
            assert "bpack" not in plan.workspaces
            assert all(c.source.params["B_PACKED"] for c in plan.calls if c.entry == "clc_gemm")
            run_prepared(queue, rng, problem, REGISTRY[algorithm], CPU[config])
            return
        assert packs == gemms >= (g.batch if chunked else 1), entries
        assert all(entries[i + 1] == "clc_gemm" for i, e in enumerate(entries) if e == "clc_pack_b")
        assert "bpack" in plan.workspaces
        # where B's rows have a row form, a panel's row inside one run is copied as one vector
        at = next(i for i, c in enumerate(plan.calls) if c.entry == "clc_pack_b")
        pack = plan.calls[at]
        sources, index = templates.render_plan(plan)
        text = sources[index[at]].text
        body = text[text.index("__kernel void clc_pack_b"):]
        body = body[:body.index("__kernel", 1)] if "__kernel" in body[1:] else body
        lanes = CPU[config]["VN"]
        assert (f"vstore{lanes}(" in body) == bool(pack.source.params["b_row"]), (algorithm, pass_)
        run_prepared(queue, rng, problem, REGISTRY[algorithm], CPU[config])
    finally:
        caches.clear_caches()


def test_cpu_gemm_packs_b_only_where_rows_are_a_page_apart(queue):
    # the rule itself: rows of B a page or more apart, a walk of PACK_B_MIN_K steps or more (a split
    # piece's), M of PACK_B_MIN_ROWS or more; never for the GPU tiles or the dot products
    from clconv.algorithms import gemm as gemm_module
    from clconv.algorithms.gemm import forward_shape, packs_b

    page, k, m = gemm_module.PAGE_BYTES, gemm_module.PACK_B_MIN_K, gemm_module.PACK_B_MIN_ROWS

    def rule(cin, cout, pixels, ksplit=0, tile=CPU["wm4-vn8"]):
        problem = Problem(geometry(f"n1g1c{cin}o{cout}i{pixels}x1k1x1s1x1p0x0d1x1"), "forward", "float32")
        return packs_b(problem, replace(forward_shape(problem.geometry, "b_input_pointwise"), ksplit=ksplit), tile)

    assert rule(k, m, page // 4)
    assert not rule(k, m, page // 4 - 4)  # rows under a page apart
    assert not rule(k - 1, m, page // 4)  # a shorter walk
    assert not rule(2 * k, m, page // 4, ksplit=k - 1)  # split into shorter pieces
    assert not rule(k, m - 1, page // 4)  # fewer rows
    assert not rule(k, m, page // 4, tile=dict(zip(TILE_KEYS, TILES["vw2"])))
    assert not rule(k, m, page // 4, tile=DOT["wm4-wn6"])


# -- the CPU weight gradient as dot products (kernels/gemm_cpu_dot.mako) ---------------------------------

DOT = {"wm4-wn6": dot_config(4, 6, 8), "wm3-wn4": dot_config(3, 4, 2)}
# On a device without vector lanes (Mesa's llvmpipe, Oclgrind: never offered the dot products) one
# small block stands in for both: llvmpipe took 8-23 s to build and run each 4 x 6 case, 2-4 s a 3 x 4
SMALL_DOT = dot_config(2, 3, 2)


def _dot(queue, name):
    if limits.of(queue.device).lanes(4) >= 4:
        return DOT[name]
    if name != "wm4-wn6":
        pytest.skip("one small dot-product block on a device without vector lanes (the wm4-wn6 case runs it)")
    return SMALL_DOT


@pytest.mark.parametrize("config", list(DOT))
@pytest.mark.parametrize("tag", [ODD_3X3, GROUPED, DECONV, LONG_CONTRACTION],
                         ids=["3x3-odd", "grouped-strided-dilated", "deconv", "long"])
def test_cpu_dot_weight_gradient_im2col(queue, rng, tag, config):
    # the forward's column buffer as B: M = 7, 12/2 and 4 leave partial row blocks (rows past M
    # read row M-1, never stored); 81-, 25- and 256-pixel images end in a masked vector (16 lanes)
    _run(queue, rng, tag, "backward_weight", "im2col", _dot(queue, config))


@pytest.mark.parametrize("config", list(DOT))
@pytest.mark.parametrize("tag", [ODD_1X1, TINY_IMAGES, EXACT_1X1], ids=["odd", "tiny-images", "exact"])
def test_cpu_dot_weight_gradient_1x1(queue, rng, tag, config):
    # the input's rows in place: 25-pixel images (a masked last vector), 2x2 images (smaller than
    # a vector: pixel by pixel), 64-pixel images (whole vectors only)
    _run(queue, rng, tag, "backward_weight", "gemm1x1", _dot(queue, config))


def test_cpu_dot_weight_gradient_refuses_a_strided_1x1(queue):
    with pytest.raises(ValueError, match="stride-1"):
        REGISTRY["gemm1x1"].plan(Problem(geometry(STRIDED_1X1), "backward_weight", "float32"), DOT["wm4-wn6"],
                                 queue.device)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_cpu_dot_weight_gradient_storage(queue, rng, dtype):
    if dtype == "float64" and not queue.device.double_fp_config:
        pytest.skip("no fp64 on this device")
    _run(queue, rng, ODD_1X1, "backward_weight", "gemm1x1", _dot(queue, "wm4-wn6"), dtype=dtype)
    if limits.of(queue.device).lanes(4) >= 4:  # (llvmpipe: one build per dtype is enough)
        _run(queue, rng, ODD_3X3, "backward_weight", "im2col", DOT["wm4-wn6"], dtype=dtype)


@pytest.mark.parametrize("chunked", [False, True], ids=["whole-batch", "per-image"])
def test_cpu_dot_weight_gradient_in_pieces_and_chunks(queue, rng, monkeypatch, chunked):
    # pieces of the contraction (a piece boundary inside an image: runs that start and end
    # mid-row), summed at the end; per image, each chunk adds onto the earlier chunks' sums
    problem = Problem(geometry(FEW_CHANNELS), "backward_weight", "float32")
    if chunked:
        monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(27 * 1024 * 4))
    monkeypatch.setattr(REGISTRY["im2col"], "CPU_FILL", 8 * 64)
    config = _dot(queue, "wm4-wn6")
    plan = REGISTRY["im2col"].plan(problem, config, queue.device)
    entries = [c.entry for c in plan.calls]
    assert entries.count("clc_gemm_dot") == (2 if chunked else 1) and entries[-1] == "clc_splitk_sum"
    assert "clc_im2col_rows" in entries and "clc_pack_a" not in entries
    run_prepared(queue, rng, problem, REGISTRY["im2col"], config)
    if chunked:  # float16: the chunks summed in a clc_real workspace, rounded once
        run_prepared(queue, rng, Problem(geometry(FEW_CHANNELS), "backward_weight", "float16"), REGISTRY["im2col"],
                     config)


def test_cpu_dot_weight_gradient_pieces_start_mid_image(queue, rng, monkeypatch):
    # 3 pieces of 81-pixel images x 3: cuts at pixel 81 * 3 / 3 = 81 land on image boundaries, so
    # force 4 pieces of 64 (SplitK.MIN_PIECE lowered): runs begin and end inside images
    from clconv.algorithms.splitk import SplitK
    monkeypatch.setattr(SplitK, "MIN_PIECE", 60)
    monkeypatch.setattr(REGISTRY["im2col"], "CPU_FILL", 8 * 64)
    problem = Problem(geometry("n3g1c5o8i9x9k3x3s1x1p1x1d1x1"), "backward_weight", "float32")
    config = _dot(queue, "wm4-wn6")
    plan = REGISTRY["im2col"].plan(problem, config, queue.device)
    assert plan.workspaces["partial"] // (problem.geometry.weight_elements * 4) == 4
    run_prepared(queue, rng, problem, REGISTRY["im2col"], config)


# -- im2col's batch chunks and split-K, through the public ops -------------------------------------------

CHUNKED = Case(2, 3, 2, 3, (5, 6), (2, 3), 1, (0, 1))


@pytest.mark.parametrize("family", ["conv_input", "conv_weight"])
def test_im2col_batch_chunks(queue, rng, monkeypatch, family):
    """A workspace limit of one image's column buffer makes im2col run the batch in 3 chunks (the
    plan: tests/unit/test_plans.py): the data gradient folds each chunk, the weight gradient
    accumulates them in launch order."""
    g = CHUNKED.geometry
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(g.in_channels * g.kernel_volume * g.out_pixels * 4))
    assert REGISTRY["im2col"].chunk_batch(CHUNKED.problem(family), queue.device) == 1
    operands = CHUNKED.operands(family, rng)
    out = poisoned(queue, CHUNKED.result_shape(family))
    got = CHUNKED.call(family, operands, algorithm="im2col", out=out)
    assert_matches(got, CHUNKED.expected(family, operands), CHUNKED.reduction_length(family))


def test_splitk_runs_where_the_contraction_cuts_evenly(queue, rng):
    """batch 2 x 16x16 output pixels = 512 = 2 pieces of 256: split-K serves and is right, on device
    Arrays in and out; it runs the GEMM over pieces and their sum (a second kernel, or the GEMM's
    own last piece per tile where the device lets work-groups hand over: SplitK.one_launch)."""
    case = SPLITK_CASE
    assert splitk_expected_to_serve(case.reduction_length("conv_weight"))
    operands = case.operands("conv_weight", rng)
    arrays = {role: cl_array.to_device(queue, value) for role, value in operands.items()}
    out = poisoned(queue, case.weight_shape)
    got = case.call("conv_weight", arrays, algorithm="splitk", out=out)
    assert got is out
    expected = case.expected("conv_weight", operands)
    assert_matches(got, expected, case.reduction_length("conv_weight"))
    source = clconv.render(clconv.conv2d_weight, arrays["x"], case.weight_shape, arrays["dy"], **case.conv_args(),
                           algorithm="splitk")
    config = REGISTRY["splitk"].configs(case.problem("backward_weight"), queue.device)[0]
    summed_by = "clc_finish_c" if REGISTRY["splitk"].one_launch(case.problem("backward_weight"), config, queue.device) \
        else "clc_splitk_sum"
    assert "clc_gemm" in source and summed_by in source
    # auto without tuning takes the heuristic's first choice; it must agree too
    assert_matches(case.call("conv_weight", operands), expected, case.reduction_length("conv_weight"))


def test_splitk_cuts_an_uneven_contraction(queue, rng):
    """1 x 25x25 output pixels = 625, which no count of equal pieces of whole 16-steps covers: split-K
    cuts it into pieces of 320 and 305 (bounds checks on K in the last), and is right."""
    case = Case(2, 1, 2, 3, (25, 25), (3, 3), 1, 1, passes=("backward_weight",), algorithms=("splitk",))
    problem = case.problem("conv_weight")
    splitk = REGISTRY["splitk"]
    assert splitk.decline_reason(problem, queue.device) is None
    assert splitk_expected_to_serve(case.reduction_length("conv_weight"))
    config = splitk.configs(problem, queue.device)[0]
    piece = splitk.piece_length(625, config["splits"], 16)
    assert 625 % piece and -(-625 // piece) == config["splits"], config
    operands = case.operands("conv_weight", rng)
    got = case.call("conv_weight", operands, algorithm="splitk", out=poisoned(queue, case.weight_shape))
    assert_matches(got, case.expected("conv_weight", operands), case.reduction_length("conv_weight"))


def test_conv_transpose_weight_splitk(queue, rng):
    """The transposed twin of the split-K geometry: 2 x 16x16 transposed-input pixels cut in two."""
    case = SPLITK_CASE
    operands = case.operands("conv_transpose_weight", rng)
    arrays = {role: cl_array.to_device(queue, value) for role, value in operands.items()}
    got = case.call("conv_transpose_weight", arrays, algorithm="splitk", out=poisoned(queue, case.weight_shape))
    assert_matches(got, case.expected("conv_transpose_weight", operands), case.reduction_length("conv_transpose_weight"))


# -- Winograd's GEMMs: the core over its workspaces ---------------------------------------------------

# 3x3 stride 1, groups, padding along one axis only: 12x8 outputs, 6 x 4 2x2 tiles (3 x 2 4x4
# tiles) per image
WINOGRAD = "n3g2c6o10i12x10k3x3s1x1p1x0d1x1"
ODD_WINOGRAD = "n2g1c5o7i9x11k3x3s1x1p1x1d1x1"  # 9x11 outputs: edge tiles of both sides cut off


@pytest.mark.parametrize("layout", ["channels_first", "channels_last"])
@pytest.mark.parametrize("config, pieces", [
    ({"m": 2, **_tile("vw2"), "splits": 3}, 3),           # pieces of 32, 32 and 8 tiles: bounds checks on K
    ({"m": 2, **_tile("vw4-uneven-loads"), "splits": 1}, 1),
    ({"m": 2, **CPU["wm4-vn8"], "splits": 2}, 2),         # the CPU GEMM, k-fast B (no row form)
    ({"m": 2, **_tile("vw1"), "splits": 8}, 5),           # pieces of 16: a fifth covers the 72, so 5 are summed
    ({"m": 4, **_tile("vw2"), "splits": 3}, 2),           # 18 4x4 tiles: pieces of 16 and 2, not 3 pieces
    ({"m": 4, **_tile("vw1"), "splits": 1}, 1),
])
def test_winograd_weight_gradient_pieces(queue, rng, config, pieces, layout):
    """The weight gradient's GEMMs over the tiles, cut into pieces, summed in order by the last
    transform; a cut that would leave pieces empty runs the pieces that cover the tiles."""
    problem = Problem(geometry(WINOGRAD), "backward_weight", "float32", layout=layout)
    winograd = REGISTRY["winograd"]
    plan = winograd.plan(problem, config, queue.device)
    assert plan.calls[-1].source.params["SPLITS"] == pieces
    positions = (config["m"] + 2) ** 2
    assert plan.workspaces["m"] == pieces * 2 * positions * 5 * 3 * 4  # pieces x groups x positions x 5 x 3 floats
    run_prepared(queue, rng, problem, winograd, config, share=WINOGRAD_ERROR[config["m"], 3])


# (geometry, tile): the CPU GEMM (B rows read with vload) with its smallest vector block only, which
# builds in about a second on Mesa's llvmpipe where the 16-row blocks take 20 s
WINOGRAD_TILES = {"g2-vw4": (WINOGRAD, _tile("vw4-uneven-loads")), "g2-vw2": (WINOGRAD, _tile("vw2")),
                  "g2-cpu": (WINOGRAD, CPU["wm4-vn8"]), "odd-vw4": (ODD_WINOGRAD, _tile("vw4-uneven-loads")),
                  "odd-cpu": (ODD_WINOGRAD, CPU["wm3-vn4"])}


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("pass_", ["forward", "backward_data"])
@pytest.mark.parametrize("case", list(WINOGRAD_TILES))
def test_winograd_gemm_tiles(queue, rng, case, pass_, m):
    """Forward and data gradient: U V per tile position, tiles that do not divide C_out or the
    tiles, output tiles cut off at the image's edge, both tile sides."""
    tag, tile = WINOGRAD_TILES[case]
    run_prepared(queue, rng, Problem(geometry(tag), pass_, "float32", bias=pass_ == "forward"),
                 REGISTRY["winograd"], {"m": m, **tile}, share=WINOGRAD_ERROR[m, 3])


@pytest.mark.parametrize("tag, pass_, m, wm, vn", [
    (WINOGRAD, "forward", 2, 16, 16),         # C_out 10 in one 16-row block: one vstore16 a position
    (ODD_WINOGRAD, "backward_data", 2, 6, 16),  # 5 rows (dx's channels) in a 6-row block: vstore2s
    (ODD_WINOGRAD, "forward", 4, 12, 8),      # 7 in a 12-row block: vstore4s, the run past 12 not stored
    (WINOGRAD, "backward_data", 4, 8, 16),    # 6 in an 8-row block: a run's two halves, the second past it
], ids=["wm16", "wm6-data", "wm12-f4", "wm8-data-f4"])
def test_winograd_u_written_packed(queue, rng, tag, pass_, m, wm, vn):
    """On a CPU with vector lanes the weight transform writes U in the CPU GEMM's packed layout for
    each of its row blocks (winograd.Winograd.packed_rows): runs of 16 output channels stored in
    sub-runs as wide as the block allows, rows past C_out repeating the last (read, never stored),
    and no packing launch."""
    if limits.of(queue.device).gpu or limits.of(queue.device).lanes(4) < 4:
        pytest.skip("U is written packed by the vector transforms of CPUs with vector lanes")
    problem = Problem(geometry(tag), pass_, "float32", bias=pass_ == "forward")
    config = {"m": m, **cpu_config(wm, vn, 8)}
    winograd = REGISTRY["winograd"]
    plan = winograd.plan(problem, config, queue.device)
    conv = winograd._conv(problem, m)
    assert plan.calls[0].source.params["PACK_WM"] == wm
    assert [c.entry for c in plan.calls] == ["clc_wino_transforms", "clc_gemm", "clc_wino_output"]
    rows = -(-conv["COUT"] // wm) * wm
    assert plan.workspaces["u"] == conv["GROUPS"] * (m + 2) ** 2 * rows * conv["CIN"] * 4
    run_prepared(queue, rng, problem, winograd, config, share=WINOGRAD_ERROR[m, 3])


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("pass_", ["forward", "backward_data", "backward_weight"])
@pytest.mark.parametrize("vt", [1, 16], ids=["one-tile", "vectors"])
def test_winograd_transforms_per_work_item(queue, rng, monkeypatch, pass_, m, vt):
    """The transforms with one tile (filter) per work-item, as GPUs run them, and with vectors of 16
    (CPUs with vector lanes), on any device: runs of tiles and filters cut short at the end (90 2x2
    tiles, 15 filters a group), the weight's runs within a group, the data gradient's flipped weight;
    the CPU GEMM reading U packed (two groups x 16 positions of GEMMs): written so by the vector
    weight transform, else copied by the GEMM's own packing launch where it pays."""
    winograd_module = importlib.import_module("clconv.algorithms.winograd")
    monkeypatch.setattr(winograd_module, "CPU_VT", vt)
    problem = Problem(geometry(WINOGRAD), pass_, "float32", bias=pass_ == "forward")
    winograd = REGISTRY["winograd"]
    config = {"m": m, **CPU["wm4-vn8"], **({"splits": 2} if pass_ == "backward_weight" else {})}
    plan = winograd.plan(problem, config, queue.device)
    lanes = limits.of(queue.device).lanes(4) >= 4 and not limits.of(queue.device).gpu
    assert plan.calls[0].source.params["VT"] == (vt if lanes else 1)
    # the vector weight transform writes U packed in 4-row blocks (forward, data gradient); with one
    # filter per work-item the GEMM packs U where its 8-column blocks sweep it 4+ times (90 2x2
    # tiles: 12; 18 or 27 4x4 tiles: 3 or 4)
    written_packed = pass_ != "backward_weight" and vt > 1 and lanes
    sweeps = -(-winograd.tiles(problem, m) // 8)
    assert plan.calls[0].source.params["PACK_WM"] == (4 if written_packed else 0)
    copied = pass_ != "backward_weight" and not written_packed and sweeps >= 4
    assert ("clc_pack_a" in [c.entry for c in plan.calls]) == copied
    caches.clear_caches()  # the prepared runners are keyed without CPU_VT: none from another test, none left
    try:
        run_prepared(queue, rng, problem, winograd, config, share=WINOGRAD_ERROR[m, 3])
    finally:
        caches.clear_caches()


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("pass_", ["forward", "backward_data"])
def test_winograd_output_rows_as_vectors(queue, rng, monkeypatch, pass_, m):
    """A GPU's output transform (one tile per work-item) with the GEMM core's vectors (GV) stores
    each row of a tile's M outputs as one aligned vector, through the full epilogue, where the
    result's width is a multiple of M (the forward's 8 columns; the data gradient's 10 for M = 2
    only); a result starting off that alignment runs the scalar twin."""
    from clconv.runtime import Operand

    winograd_module = importlib.import_module("clconv.algorithms.winograd")
    monkeypatch.setattr(winograd_module, "CPU_VT", 1)
    problem = Problem(geometry(WINOGRAD), pass_, "float32", bias=True, epilogue=LEAKY_RESIDUAL)
    winograd = REGISTRY["winograd"]
    config = {"m": m, **VS_TILE}
    row_vector = m if pass_ == "forward" or m == 2 else 0
    assert winograd.plan(problem, config, queue.device).calls[-1].source.params["RV"] == row_vector
    caches.clear_caches()  # the prepared runners are keyed without CPU_VT: none from another test, none left
    try:
        runner = run_prepared(queue, rng, problem, winograd, config, share=WINOGRAD_ERROR[m, 3])
        if row_vector:
            # the result one element into its buffer: the scalar twin (GV = 0), whose output matches
            result = problem.spec.result
            assert runner.aligned.get(result) == row_vector
            operands = {role: Operand(cl_array.to_device(queue, rng.standard_normal(problem.spec.shape(role, problem.geometry))
                                                         .astype("float32")).base_data)
                        for role in problem.spec.inputs}
            operands["bias"] = Operand(cl_array.to_device(queue, rng.standard_normal(problem.geometry.out_channels)
                                                          .astype("float32")).base_data)
            size = int(np.prod(problem.spec.result_shape(problem.geometry)))
            residual = rng.standard_normal(size).astype("float32")
            shifted = poisoned(queue, (size + 1,))
            kept = cl_array.empty(queue, size + 1, "float32")
            kept[1:].set(residual)
            operands["residual"], operands[result] = Operand(kept.base_data, 1), Operand(shifted.base_data, 1)
            assert runner.misaligned(operands)
            runner.run(queue, operands)
            aligned = poisoned(queue, (size,))
            operands["residual"] = Operand(cl_array.to_device(queue, residual).base_data)
            operands[result] = Operand(aligned.base_data)
            runner.run(queue, operands)
            got, want = shifted.get(), aligned.get()
            assert np.isnan(got[0]) and np.isfinite(want).all()
            np.testing.assert_allclose(got[1:], want, rtol=1e-5, atol=1e-5)
        assert not winograd.plan(_with_geometry(problem, "n3g2c6o10i12x10k3x3s1x1p1x2d1x2"), config,
                                 queue.device).calls[-1].source.params["RV"]  # dilated along rows: 2 pixels apart
        assert not winograd.plan(Problem(geometry(WINOGRAD), pass_, "float32", layout="channels_last"), config,
                                 queue.device).calls[-1].source.params["RV"]
        assert not winograd.plan(Problem(geometry(WINOGRAD), pass_, "float16"), config,
                                 queue.device).calls[-1].source.params["RV"]
    finally:
        caches.clear_caches()


def _with_geometry(problem, tag):
    return Problem(geometry(tag), problem.pass_, problem.dtype)


# Share of reference.tolerance each variant F(MxM, RxR)'s error stays within, by (M, R):
# F(2x2, 3x3) measured at most 0.012 of it on PoCL over 1-256 channels and 72-6272 terms per
# weight-gradient element, F(4x4, 3x3) at most 0.11 (its constants reach 8 and 1/24), F(2x2, 5x5)
# 0.02-0.04 in the forward and data gradient and 0.10-0.16 in the weight gradient (8-128 channels),
# F(3x3, 5x5) (its point 1/2 brings constants down to 1/120) 0.03-0.07 and 0.03-0.12 (its 2.25x
# fewer tiles are a shorter sum), F(4x4, 5x5) (F(2x2, 7x7)'s points, constants down to 1/360)
# 0.04-0.10 in every pass (3 sizes x 3 seeds, against F(3x3, 5x5)'s 0.04-0.11 in the same run),
# F(6x6, 3x3) (the same points, A^T's constants up to 32) 0.09-0.26 in the forward and data
# gradient and 0.02-0.06 in the weight gradient (F(4x4, 3x3): 0.04-0.13 and 0.02-0.06 in the same
# run); each bound leaves that 2.5-4x room.
WINOGRAD_ERROR = {(2, 3): 0.05, (4, 3): 0.25, (6, 3): 0.75, (2, 5): 0.4, (3, 5): 0.4, (4, 5): 0.4, (2, 7): 0.75}

# 5x5 kernels (F(2x2, 5x5), F(3x3, 5x5), F(4x4, 5x5)) and dilation (tiles over each phase, patches D apart): groups, padding
# that differs by axis, edge tiles cut off, dilations that differ by axis, phases of unequal sizes
WINOGRAD_KERNELS = {
    "5x5": "n2g2c6o10i9x11k5x5s1x1p2x1d1x1",
    "dilated": "n2g1c4o6i13x10k3x3s1x1p2x3d2x3",
    "5x5-dilated": "n1g1c3o4i14x12k5x5s1x1p4x2d2x1",
    "7x7": "n2g2c4o6i11x12k7x7s1x1p3x2d1x1",
    "7x7-dilated": "n1g1c3o5i17x15k7x7s1x1p5x6d2x1",
}


@pytest.mark.parametrize("layout", ["channels_first", "channels_last"])
@pytest.mark.parametrize("pass_", ["forward", "backward_data", "backward_weight"])
@pytest.mark.parametrize("case", list(WINOGRAD_KERNELS))
def test_winograd_5x5_and_dilated_kernels(queue, rng, case, pass_, layout):
    """Every tile side the configs offer, in both layouts, the data
    gradient's flipped 5x5 weight and its padding of dilation * (R - 1) - pad."""
    problem = Problem(geometry(WINOGRAD_KERNELS[case]), pass_, "float32", layout=layout, bias=pass_ == "forward")
    winograd = REGISTRY["winograd"]
    configs = winograd.configs(problem, queue.device)
    r = problem.geometry.kernel[2]
    for m in dict.fromkeys(c["m"] for c in configs):
        config = next(c for c in configs if c["m"] == m)
        run_prepared(queue, rng, problem, winograd, config, share=WINOGRAD_ERROR[m, r])


@pytest.mark.parametrize("m, r", sorted(WINOGRAD_ERROR))
@pytest.mark.parametrize("pass_", ["forward", "backward_data", "backward_weight"])
@pytest.mark.parametrize("size", ["n2g1c64o32i12x12", "n8g1c8o8i28x28"], ids=["c64", "n8"])
def test_winograd_error_stays_within_its_share_of_the_tolerance(queue, rng, size, pass_, m, r):
    """Each variant's rounding error against the float64 reference, at the bound WINOGRAD_ERROR
    documents: what lets `auto` pick F(4x4, 3x3) and the 5x5 variants by default (docs/algorithms.md)."""
    problem = Problem(geometry(f"{size}k{r}x{r}s1x1p{r // 2}x{r // 2}d1x1"), pass_, "float32")
    winograd = REGISTRY["winograd"]
    config = next(c for c in winograd.configs(problem, queue.device) if c["m"] == m)
    run_prepared(queue, rng, problem, winograd, config, share=WINOGRAD_ERROR[m, r])


# -- gemm1x1's strided data gradient: the GEMM over the output pixels, zeros between ------------------

STRIDED_1X1_CASES = {
    "1d-whole": ("n2g1c5o4i9k1s3p0d1", _tile("vw2")),      # 9 = 3 x 3 inputs, every block whole
    "1d-cut": ("n2g1c5o4i10k1s3p0d1", _tile("vw4-uneven-loads")),  # 10 inputs: the last block one pixel
    "3d": ("n2g2c4o6i5x4x7k1x1x1s2x1x3p0x0x0d1x1x1", _tile("vw2")),  # groups, a different stride per axis
    "2d-odd": ("n3g1c6o5i7x7k1x1s2x2p0x0d1x1", _tile("vw4-uneven-loads")),  # blocks cut on both edges
    "2d-odd-cpu": ("n3g1c6o5i7x7k1x1s2x2p0x0d1x1", CPU["wm4-vn8"]),  # the CPU GEMM's lane-by-lane stores
}


@pytest.mark.parametrize("case", list(STRIDED_1X1_CASES))
def test_strided_pointwise_data_gradient_scatters_into_every_pixel(queue, rng, case):
    """Every input pixel written once: the stride grid from the GEMM, the rest zero (with the bias,
    as a transposed convolution's forward has it); the NaN-poisoned result shows any left out."""
    tag, config = STRIDED_1X1_CASES[case]
    problem = Problem(geometry(tag), "backward_data", "float32", bias=True)
    gemm1x1 = REGISTRY["gemm1x1"]
    plan = gemm1x1.plan(problem, config, queue.device)
    assert "c_nchw_scatter" in {call.source.params.get("c_view") for call in plan.calls}
    run_prepared(queue, rng, problem, gemm1x1, config)


# Forwards whose column buffer clc_im2col_rows writes with stride-2 vectors (rows of 32 outputs or
# more: kernels/im2col_rows.mako's ROW_VN_MIN_RUN): padding before and after the run, a tail of
# the run shorter than a vector, a stride-2 row of odd width whose last vector pair ends at the row's
# last input, a 7x7 stem-like kernel and a dilated one.
STRIDE2_ROW_CASES = ["n2g1c3o5i67x67k3x3s2x2p1x1d1x1",    # OW 34: one pad column each side
                     "n1g1c2o4i80x81k7x7s2x2p3x3d1x1",    # OW 41, odd input width
                     "n1g1c2o3i9x72k3x3s2x2p0x0d1x1",     # OW 35, no padding: the run is the row
                     "n1g2c4o4i6x90k3x3s2x2p2x2d2x2"]     # dilation 2, grouped


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("tag", STRIDE2_ROW_CASES)
def test_cpu_column_rows_of_stride_two_in_vectors(queue, rng, tag, dtype):
    problem = Problem(geometry(tag), "forward", dtype)
    config = CPU["wm8-vn16"]
    plan = REGISTRY["im2col"].plan(problem, config, queue.device)
    writer = next(c for c in plan.calls if c.entry == "clc_im2col_rows")
    assert problem.geometry.out_size[-1] >= 32 and problem.geometry.stride[-1] == 2
    sources, index = templates.render_plan(plan)
    assert ".even" in sources[index[plan.calls.index(writer)]].text  # the vector path is rendered
    run_prepared(queue, rng, problem, REGISTRY["im2col"], config)
