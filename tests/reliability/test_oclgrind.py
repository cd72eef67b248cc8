"""Every kernel family under Oclgrind: invalid reads/writes, data races between work-items and reads
of uninitialised memory, each reported by the simulator, fail the test.

The test runs this same file as a child process under
``oclgrind --data-races --uninitialized --build-options -cl-opt-disable --log LOG python
tests/reliability/test_oclgrind.py SET``; the child (Oclgrind's simulated device is then the only OpenCL device)
runs every algorithm of every pass over the cases of SET, checks each result against the float64
reference and prints one line per run.  Any line in LOG is an Oclgrind report and fails the test.

Why ``-cl-opt-disable``: Debian's Oclgrind 21.10 is built on LLVM 14, whose optimiser emits the
``freeze`` instruction that Oclgrind's uninitialised-memory plugin cannot interpret ("Unsupported
instruction: freeze", a fatal error that also leaves the result unwritten); its optimised code
also calls ``llvm.experimental.noalias.scope.decl``, which Oclgrind cannot run with any plugin.

``PYOPENCL_NO_CACHE=1`` and a private ``CLCONV_CACHE_DIR`` make every program build from source
inside the simulator (a cached binary would bypass the build options).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent  # helpers.py and cases.py
OCLGRIND = shutil.which("oclgrind")

OCLGRIND_FLAGS = ("--data-races", "--uninitialized", "--build-options", "-cl-opt-disable")


def oclgrind_cases(which: str):
    """The case sets: ``ci`` (seconds per run in the simulator: kept tiny) and ``full`` (scripts/fuzz:
    the CI set and the reliability set, tests/cases.py ``COVER``)."""
    from cases import COVER, Case

    ci = [
        # groups + bias, padding on every side, M/N not multiples of any tile
        Case(2, 1, 4, 4, (5, 4), (3, 3), 1, 1, 1, 2, bias=True),
        # stride, asymmetric padding, dilation, batch 2 (im2col chunking, batch index math)
        Case(2, 2, 2, 3, (6, 5), (2, 3), 2, ((1, 0), (2, 1)), (2, 1)),
        # 3D with a kernel as large as the padded input along one axis
        Case(3, 1, 1, 2, (3, 3, 2), (2, 2, 3), 1, (0, 1, 1), algorithms=("direct", "implicit_gemm")),
        # 1D depthwise with stride and dilation, the transposed op's bias through col2im
        Case(1, 2, 3, 3, (9,), (3,), 2, 1, 2, 3, bias=True,
             algorithms=("direct", "im2col", "depthwise", "depthwise_rows")),
        # 2D depthwise, 2 outputs per channel: depthwise_rows' vectors, overlapping tail and edges
        Case(2, 1, 2, 4, (3, 19), (3, 3), 1, 1, 1, 2, bias=True, algorithms=("depthwise_rows",)),
        # a strided depthwise data gradient residue by residue: each residue's vectors, tails and edges
        Case(1, 1, 2, 2, (40,), (3,), 2, 1, 1, 2, passes=("backward_data",), algorithms=("depthwise_rows",)),
        # 1x1 strided: the pointwise GEMM views
        Case(2, 1, 3, 2, (3, 3), (1, 1), 2, 0, bias=True, algorithms=("gemm1x1",)),
        # split-K's partials and its reduction kernel (the child lowers SplitK.MIN_PIECE so that a
        # contraction of 2 x 32 output pixels is cut: the same kernel code as a long one, 10x faster)
        Case(1, 2, 1, 2, (32,), (3,), 1, 1, passes=("backward_weight",), algorithms=("splitk",)),
        # the forward's and data gradient's split-K: partials in the result's layout, summed through
        # the bias (the child lowers MIN_RESULT_PIECE too: 6 channels x 3 taps cut into pieces)
        Case(1, 2, 6, 6, (5,), (3,), 1, 1, bias=True, passes=("forward", "backward_data"), algorithms=("splitk",)),
    ]
    if which == "ci":
        return ci
    return ci + list(COVER)


# -- the child: runs inside Oclgrind ---------------------------------------------------------------


def child(which: str, every_config: bool) -> int:
    import numpy as np

    import clconv
    from clconv.algorithms import REGISTRY
    from clconv.algorithms.winograd import SIDES
    from clconv.planner import prepare
    from clconv.tensors import to_operand
    from cases import every_pass_algorithm, geometry, param_id
    from clconv.passes import OPS, PASSES
    from clconv.plan import Problem
    from helpers import assert_matches, poisoned, run_prepared

    import time

    import pyopencl as cl

    # Keep every buffer alive until the process ends.  OpenCL lets a buffer be released while
    # kernels that use it are still queued (clconv releases its workspaces that way), but
    # Oclgrind 21.10's uninitialised-memory plugin then loses track of a recycled buffer's
    # contents and reports every later read of it as uninitialised.
    kept = []

    class KeptBuffer(cl.Buffer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            kept.append(self)

    cl.Buffer = KeptBuffer
    from clconv.algorithms.splitk import SplitK

    SplitK.MIN_PIECE = 16
    SplitK.MIN_RESULT_PIECE = 16

    queue = clconv.default_queue()
    assert "oclgrind" in queue.device.name.lower(), f"not running on Oclgrind but on {queue.device.name!r}"
    rng = np.random.default_rng(5)
    runs = 0
    log = Path(os.environ.get("CLCONV_OCLGRIND_LOG", os.devnull))

    def note(label: str) -> None:
        # Attribute Oclgrind's reports to the run that caused them: the log grows synchronously.
        queue.finish()
        size = log.stat().st_size if log.exists() else 0
        print(f"{'REPORTED' if size > note.size else 'ok'} {label} {time.time() - note.start:.1f}s", flush=True)
        note.size, note.start = size, time.time()

    note.size, note.start = 0, time.time()
    if which == "one-launch":
        return _one_launch_child(queue, rng, note)
    for case, pass_, algorithm in every_pass_algorithm(queue.device, oclgrind_cases(which)):
        operands = case.operands(pass_, rng)
        ref = case.reference(pass_, operands)
        length = case.reduction_length(pass_)
        out = poisoned(queue, case.result_shape(pass_))
        result = case.run(pass_, operands, algorithm=algorithm, out=out)
        note(param_id(case, pass_, algorithm))
        assert_matches(result, ref, length)
        runs += 1
        if not every_config:
            continue
        chosen = REGISTRY[algorithm]
        problem = case.problem(pass_)
        for config in chosen.configs(problem, queue.device)[1:]:
            runner = prepare(problem, chosen, config, queue)
            result = poisoned(queue, ref.shape)
            uploaded = {name: to_operand(value, queue) for name, value in operands.items()}  # (operand, holder)
            ops = {name: operand for name, (operand, _) in uploaded.items()}
            ops[problem.spec.result] = to_operand(result, queue)[0]
            for event in runner.run(queue, ops):
                event.wait()
            note(f"{param_id(case, pass_, algorithm)} {config}")
            assert_matches(result, ref, length)
            runs += 1
    # float16 storage, channels-last activations and the fused epilogue (a residual read, relu) on
    # the first case: the loads, stores and residual reads they add, under the same checks
    from dataclasses import replace

    half = replace(oclgrind_cases(which)[0], dtype="float16")
    for case, pass_, algorithm in every_pass_algorithm(queue.device, [half]):
        family = case.family(pass_)
        operands = case.operands(pass_, rng)
        ref = case.reference(pass_, operands)
        result_role = OPS[family].spec.result
        options: dict = dict(layout="channels_last")
        if family in ("conv", "conv_transpose"):
            residual = rng.standard_normal(ref.shape).astype(np.float16)
            options.update(activation="relu", residual=case.channels_last(residual, result_role))
            ref = np.maximum(ref + residual, 0)
        last = {role: case.channels_last(value, role) for role, value in operands.items()}
        result = case.call(family, last, algorithm=algorithm, **options)
        note(f"{param_id(case, pass_, algorithm)} float16 channels_last {options.get('activation')}")
        got = result if result_role == "dw" else case.channels_first(result)  # dw has no layout
        assert_matches(got, ref, case.reduction_length(pass_), "float16")
        runs += 1
    # the direct forward's strips of rows (a GPU's first guess, which Oclgrind's device is not
    # offered): a last strip partly below the image, stride along the rows, both layouts
    for tag in ("n1g2c4o6i7x6k3x3s1x1p1x1d1x1", "n1g4c4o4i9x5k3x3s2x1p1x1d1x1"):
        for layout in ("channels_first", "channels_last"):
            problem = Problem(geometry(tag), "forward", "float16", bias=True, layout=layout)
            run_prepared(queue, rng, problem, REGISTRY["direct"], {"wg": 16, "rows": 4})
            note(f"direct rows=4 {tag} float16 {layout}")
            runs += 1
    # the direct forward in blocks of output channels (a GPU's first guess for first layers): a last
    # strip partly below the image with stride and dilation along the rows, groups, both layouts
    for tag, layout, config in (("n2g1c3o8i7x6k3x3s1x1p1x1d1x1", "channels_first", {"wg": 16, "rows": 4, "cob": 4}),
                                ("n1g2c4o6i9x5k3x3s2x1p2x1d2x1", "channels_last", {"wg": 16, "rows": 2, "cob": 3}),
                                ("n2g1c2o4i13k5s1p2d1", "channels_first", {"wg": 8, "rows": 1, "cob": 2})):
        problem = Problem(geometry(tag), "forward", "float32", bias=True, layout=layout)
        run_prepared(queue, rng, problem, REGISTRY["direct"], config)
        note(f"direct forward blocks {tag} {layout} {config}")
        runs += 1
    # direct's weight gradient in blocks (a GPU's first guess for grouped layers, not offered to
    # Oclgrind's device): several slices (partials and their sum), blocks side by side channels-last
    # with lanes past the last block, one slice straight into dw in float16, a strided dilated 1D layer
    for tag, layout, dtype, config in (
            ("n2g2c4o4i5x4k3x3s1x1p1x1d1x1", "channels_first", "float32", {"wg": 8, "cob": 2, "cib": 1, "slices": 3}),
            ("n1g3c6o6i4x5k3x3s1x1p1x1d1x1", "channels_last", "float32",
             {"wg": 16, "cob": 2, "cib": 2, "slices": 2, "lanes": 4}),
            ("n1g2c4o4i5x4k3x3s1x1p1x1d1x1", "channels_last", "float16", {"wg": 8, "cob": 1, "cib": 2, "slices": 1}),
            ("n2g2c4o2i11k3s2p2d2", "channels_first", "float32", {"wg": 4, "cob": 1, "cib": 2, "slices": 2})):
        problem = Problem(geometry(tag), "backward_weight", dtype, layout=layout)
        run_prepared(queue, rng, problem, REGISTRY["direct"], config)
        note(f"direct blocks {tag} {layout} {dtype} {config}")
        runs += 1
    # direct's CPU weight gradient in tiles of taps (not offered to Oclgrind's device, which has no
    # vector lanes): tiles shifted back at the kernel's last rows and columns, rows and columns in
    # the padding, a partial block of output channels, dy's copy by tiles and value by value, slices
    # (partials and their sum) and one slice into dw, both layouts, float16 storage
    for tag, layout, dtype, config in (
            ("n2g1c2o5i6x7k3x3s1x1p1x1d1x1", "channels_first", "float32", {"TH": 2, "TW": 2, "NB": 2, "VN": 4, "slices": 3}),
            ("n1g2c4o6i7x5k3x3s2x1p2x1d1x2", "channels_last", "float16", {"TH": 3, "TW": 2, "NB": 1, "VN": 4, "slices": 1}),
            ("n2g1c2o4i11k5s1p2d1", "channels_first", "float32", {"TH": 1, "TW": 3, "NB": 1, "VN": 4, "slices": 2}),
            # a 1x1 kernel's CB input channels a work-item, strided and grouped
            ("n2g2c8o6i5x5k1x1s2x2p0x0d1x1", "channels_last", "float32",
             {"TH": 1, "TW": 1, "CB": 2, "NB": 1, "VN": 4, "slices": 2})):
        problem = Problem(geometry(tag), "backward_weight", dtype, layout=layout)
        run_prepared(queue, rng, problem, REGISTRY["direct"], config)
        note(f"direct taps {tag} {layout} {dtype} {config}")
        runs += 1
    # direct's CPU forward and data gradient in tiles of result channels (not offered to Oclgrind's
    # device either): the padded copy of the source (padding below zero in the data gradient), a
    # partial block of channels, a row's last tile past its end, the flat 1x1 source read in place
    # with its last tile clamped to the batch's last pixel, float16 storage, the bias
    for tag, pass_, layout, dtype, config in (
            ("n1g2c4o6i6x5k3x3s2x1p2x1d1x1", "forward", "channels_last", "float16", {"PX": 3, "NB": 1, "VN": 4}),
            ("n2g1c3o5i5x6k3x3s1x1p0x1d2x1", "backward_data", "channels_first", "float32", {"PX": 4, "NB": 2, "VN": 4}),
            ("n3g1c8o5i3x5k1x1s1x1p0x0d1x1", "forward", "channels_last", "float32", {"PX": 4, "NB": 1, "VN": 4})):
        problem = Problem(geometry(tag), pass_, dtype, bias=True, layout=layout)
        run_prepared(queue, rng, problem, REGISTRY["direct"], config)
        note(f"direct channel tiles {tag} {pass_} {layout} {dtype} {config}")
        runs += 1
    # Winograd's F(4x4, 3x3), which a small case is not offered first: 4x4 tiles cut off at the
    # image's right and bottom edges, every pass, both layouts
    winograd = REGISTRY["winograd"]
    for pass_ in PASSES:
        for layout in ("channels_first", "channels_last"):
            problem = Problem(geometry("n1g2c4o6i7x6k3x3s1x1p1x1d1x1"), pass_, "float32", layout=layout)
            for m in (4, 6):  # F(6x6, 3x3): 8x8 patches, one tile a row and column, cut off
                config = next(c for c in winograd.configs(problem, queue.device) if c["m"] == m)
                run_prepared(queue, rng, problem, winograd, config)
                note(f"winograd m={m} {pass_} {layout}")
                runs += 1
    # and F(2x2, 5x5) and F(3x3, 5x5) on a dilated layer: patches that reach past the padding by
    # the dilation, phases of unequal sizes (3x3 tiles cut off at their edges), the data gradient's
    # padding of dilation * 4 - pad
    for pass_ in PASSES:
        problem = Problem(geometry("n1g1c3o4i9x8k5x5s1x1p4x2d2x1"), pass_, "float32")
        for m in SIDES[5]:
            run_prepared(queue, rng, problem, winograd, next(c for c in winograd.configs(problem, queue.device)
                                                             if c["m"] == m))
            note(f"winograd 5x5 m={m} dilated {pass_}")
            runs += 1
    # F(2x2, 7x7): 8x8 patches reaching 3 past a 5x6 image's edges (padding 3 and 2), its last
    # tiles cut off on both sides, the data gradient's padding of 6 - pad
    for pass_ in PASSES:
        problem = Problem(geometry("n1g1c2o3i5x6k7x7s1x1p3x2d1x1"), pass_, "float32")
        run_prepared(queue, rng, problem, winograd, winograd.configs(problem, queue.device)[0])
        note(f"winograd 7x7 {pass_}")
        runs += 1
    # a 3D layer of a kernel one deep: its depth slices as images (channels-first a channel's slices
    # together, so each slice's first element comes from the sample and the slice), both layouts
    for pass_ in PASSES:
        for layout in ("channels_first", "channels_last"):
            problem = Problem(geometry("n2g1c3o4i3x6x5k1x3x3s1x1x1p0x1x1d1x1x1"), pass_, "float32", layout=layout)
            run_prepared(queue, rng, problem, winograd, winograd.configs(problem, queue.device)[0])
            note(f"winograd one deep {pass_} {layout}")
            runs += 1
    # interim kernels (clconv/interim.py: the geometry as kernel arguments, which a GPU runs while a
    # new geometry's chosen kernels build): every pass of a strided, dilated, grouped layer with a
    # bias, channels-last in float16, and a 3D one
    from clconv import interim
    from clconv.planner import build
    from helpers import check_runner

    for tag, layout, dtype in (("n1g2c4o6i9x5k3x3s2x1p2x1d2x1", "channels_first", "float32"),
                               ("n1g2c4o6i9x5k3x3s2x1p2x1d2x1", "channels_last", "float16"),
                               ("n2g1c2o3i3x4x3k2x3x2s1x2x1p1x1x0d1x1x1", "channels_first", "float32")):
        for pass_ in PASSES:
            problem = Problem(geometry(tag), pass_, dtype, bias=pass_ != "backward_weight", layout=layout)
            check_runner(queue, rng, problem, build(interim.plan(problem, queue.device), queue))
            note(f"interim {pass_} {tag} {layout} {dtype}")
            runs += 1
    # the CPU weight gradient as dot products (a CPU's first guess for long contractions, which
    # Oclgrind's device is not offered): partial row blocks, masked last vectors, images smaller
    # than a vector, and pieces of the contraction (SplitK.MIN_PIECE lowered above) starting mid-image
    from clconv.algorithms.gemm import dot_config

    for tag, algorithm in (("n2g1c5o7i9x9k3x3s1x1p1x1d1x1", "im2col"), ("n3g1c6o10i5x5k1x1s1x1p0x0d1x1", "gemm1x1"),
                           ("n8g1c5o7i2x2k1x1s1x1p0x0d1x1", "gemm1x1")):
        run_prepared(queue, rng, Problem(geometry(tag), "backward_weight", "float32"), REGISTRY[algorithm],
                     dot_config(4, 6, 8))
        note(f"{algorithm} dot products {tag}")
        runs += 1
    # the GPU tiles' 4-wide global loads (GV; a GPU's tiles, which Oclgrind's device is not offered):
    # edge tiles on every side of a 1x1 layer's GEMMs (24-pixel images), the column buffer's rows,
    # Winograd's workspaces under its weight gradient
    from clconv.algorithms.gemm import TILE_KEYS

    vector_tile = dict(zip(TILE_KEYS, (24, 8, 8, 4, 2, 2, 1, 3)))
    for tag, pass_, algorithm, config in (
            ("n2g1c32o20i4x6k1x1s1x1p0x0d1x1", "forward", "gemm1x1", vector_tile),
            ("n2g1c32o20i4x6k1x1s1x1p0x0d1x1", "backward_weight", "gemm1x1", vector_tile),
            # dy read in place as a matrix (pointwise_data_shape): vectors of dy's rows, and grouped
            ("n2g1c20o32i4x6k1x1s1x1p0x0d1x1", "backward_data", "gemm1x1", vector_tile),
            ("n2g2c40o16i4x6k1x1s1x1p0x0d1x1", "backward_data", "gemm1x1", vector_tile),
            ("n2g1c40o8i8x8k3x3s1x1p1x1d1x1", "forward", "im2col", vector_tile),
            ("n2g1c8o40i8x8k3x3s1x1p1x1d1x1", "backward_data", "im2col", vector_tile),
            # clc_col2im stepping over the taps a stride apart (prelude.source_taps): a 5-tap
            # kernel at stride 2 with padding, patches (kernel = stride) that leave a column unread
            ("n2g1c3o4i10x10k5x3s2x3p2x0d1x1", "backward_data", "im2col", vector_tile),
            # split-K's 1x1 weight gradient reads the input in place (b_input_pointwise_t) in pieces
            ("n4g1c32o20i8x6k1x1s1x1p0x0d1x1", "backward_weight", "splitk", {**vector_tile, "splits": 2}),
            ("n2g1c40o8i8x8k3x3s1x1p1x1d1x1", "backward_weight", "winograd", {"m": 2, **vector_tile})):
        run_prepared(queue, rng, Problem(geometry(tag), pass_, "float32"), REGISTRY[algorithm], config)
        note(f"{algorithm} vector loads {pass_} {tag}")
        runs += 1
    # the GPU tiles' stores of C as aligned 4-wide vectors (vector_stores): edge tiles in M and N of
    # an NCHW and an NHWC result through the full epilogue, dx's input pixels, split-K's pieces,
    # Winograd's output rows
    from clconv.epilogue import Epilogue

    store_tile = dict(zip(TILE_KEYS, (16, 16, 8, 4, 4, 4, 1, 3)))
    epilogue = Epilogue("leaky_relu", negative_slope=0.2, alpha=0.75, beta=-0.5, residual=True)
    for tag, pass_, algorithm, config, layout in (
            ("n3g1c8o12i4x6k1x1s1x1p0x0d1x1", "forward", "gemm1x1", store_tile, "channels_first"),
            ("n3g1c8o12i4x6k1x1s1x1p0x0d1x1", "forward", "gemm1x1", store_tile, "channels_last"),
            ("n2g1c8o12i4x6k3x3s1x1p1x1d1x1", "backward_data", "implicit_gemm", store_tile, "channels_first"),
            ("n2g1c8o12i4x6k3x3s1x1p1x1d1x1", "forward", "splitk", {**store_tile, "splits": 2}, "channels_first"),
            # Winograd's output rows as vectors where a device runs one tile per work-item (no lanes)
            ("n3g2c6o10i12x10k3x3s1x1p1x0d1x1", "forward", "winograd", {"m": 4, **store_tile}, "channels_first")):
        run_prepared(queue, rng, Problem(geometry(tag), pass_, "float32", bias=True, epilogue=epilogue, layout=layout),
                     REGISTRY[algorithm], config)
        note(f"{algorithm} vector stores {pass_} {layout} {tag}")
        runs += 1
    # the CPU GEMM's column buffers (a CPU's first guess; Oclgrind's device, without vector lanes,
    # is offered the local-memory tiles): clc_im2col_rows' padded edges around a strided run, its
    # stride-2 vectors over rows of 32+ outputs (each pair's last lane one past the run's last input:
    # rows of 71 and 72 inputs end it at the row's last element and one before), and
    # clc_im2col_t_tiles (as with 16 lanes) turning a grouped 1x1 layer's input over in full and
    # partial tiles (20 channels a group, 25 pixels)
    from clconv.algorithms import im2col as im2col_module
    from clconv.algorithms.gemm import cpu_config

    im2col_module.pow2_at_most = lambda n: 16
    for tag, pass_ in (("n1g1c3o4i9x8k3x3s2x2p1x2d1x1", "forward"), ("n1g1c1o2i3x71k3x3s2x2p1x1d1x1", "forward"),
                       ("n1g1c1o2i3x72k3x3s2x2p1x1d1x1", "forward"), ("n2g2c40o8i5x5k1x1s1x1p0x0d1x1", "backward_weight")):
        run_prepared(queue, rng, Problem(geometry(tag), pass_, "float32"), REGISTRY["im2col"], cpu_config(4, 4, 2))
        note(f"im2col cpu gemm {pass_} {tag}")
        runs += 1
    print(f"clconv-oclgrind: {runs} runs checked", flush=True)
    return runs


def _one_launch_child(queue, rng, note) -> int:
    """Split-K's GPU tiles summing their pieces in the GEMM's own launch (gemm.mako's FINISH), which
    Oclgrind's simulator is not offered (limits.handoff_fence_of: it calls itself every device type):
    described here with OpenCL's fence.  The tile's last piece reads what the other work-groups
    wrote in the same launch, ordered by the fence and the atomic counter: a handoff that OpenCL 1.2
    leaves to the implementation, and that Oclgrind's race detector reports as such, so this set
    runs without it (test_splitk_in_one_launch_is_memory_safe_under_oclgrind)."""
    import dataclasses

    from clconv import limits
    from clconv.algorithms import REGISTRY
    from clconv.algorithms.gemm import TILE_KEYS
    from clconv.epilogue import Epilogue
    from clconv.plan import Problem
    from cases import geometry
    from helpers import run_prepared

    limits.register(queue.device, dataclasses.replace(limits.of(queue.device), handoff_fence="mem_fence"))
    store_tile = dict(zip(TILE_KEYS, (16, 16, 8, 4, 4, 4, 1, 3)))  # the partials stored as vectors
    scalar_tile = dict(zip(TILE_KEYS, (16, 8, 8, 2, 2, 1, 1, 0)))
    epilogue = Epilogue("leaky_relu", negative_slope=0.2, alpha=0.75, beta=-0.5, residual=True)
    runs = 0
    for tag, pass_, config, layout in (
            ("n2g1c8o12i4x6k3x3s1x1p1x1d1x1", "forward", {**store_tile, "splits": 3}, "channels_first"),
            ("n1g2c8o6i5x5k3x3s2x2p1x1d1x1", "backward_data", {**scalar_tile, "splits": 2}, "channels_last"),
            ("n2g1c6o5i6x6k3x3s1x1p1x1d1x1", "backward_weight", {**scalar_tile, "splits": 3}, "channels_last"),
            ("n4g1c20o12i8x6k1x1s1x1p0x0d1x1", "backward_weight", {**store_tile, "splits": 2}, "channels_first")):
        takes_bias = pass_ != "backward_weight"
        problem = Problem(geometry(tag), pass_, "float32", bias=takes_bias,
                          epilogue=epilogue if takes_bias else Epilogue(), layout=layout)
        runner = run_prepared(queue, rng, problem, REGISTRY["splitk"], config)
        entries = [launch.call.entry for launch in runner.launches]
        assert entries == ["clc_gemm"], entries
        note(f"splitk one launch {pass_} {layout} {tag}")
        runs += 1
    print(f"clconv-oclgrind: {runs} runs checked", flush=True)
    return runs


# -- the test: runs the child under Oclgrind ----------------------------------------------------------


def run_under_oclgrind(which: str, flags=OCLGRIND_FLAGS, every_config: bool = False, timeout: float = 900):
    """Run the child; return ``(runs, report_text, stdout)`` (report_text empty when Oclgrind is silent)."""
    with tempfile.TemporaryDirectory(prefix="clconv-oclgrind-") as tmp:
        log = Path(tmp) / "oclgrind.log"
        env = dict(os.environ, PYOPENCL_NO_CACHE="1", CLCONV_CACHE_DIR=str(Path(tmp) / "cache"),
                   CLCONV_TUNE="0", CLCONV_DEVICE="Oclgrind", PYTHONPATH=str(TESTS), CLCONV_OCLGRIND_LOG=str(log),
                   CLCONV_RESULT_POOL="0")  # exact-size buffers: a pool's rounded-up blocks hide overruns
        env.pop("PYOPENCL_CTX", None)
        command = [OCLGRIND, "--log", str(log), *flags, sys.executable, str(Path(__file__).resolve()), which]
        if every_config:
            command.append("--every-config")
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        report = log.read_text() if log.exists() else ""
        runs = 0
        for line in proc.stdout.splitlines():
            if line.startswith("clconv-oclgrind:"):
                runs = int(line.split()[1])
        if proc.returncode != 0 and not report.strip():
            report = f"child exited with {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        if "OCLGRIND" in proc.stderr and not report.strip():
            report = proc.stderr
        return runs, report, proc.stdout


def _require_oclgrind():
    if OCLGRIND is None:
        message = ("OCLGRIND NOT INSTALLED: the memory/race/uninitialised checks of every kernel did NOT run. "
                   "Install it with scripts/setup-env (apt-get install oclgrind).")
        print("\n" + "!" * 100 + "\n" + message + "\n" + "!" * 100, file=sys.stderr)
        pytest.skip(message)


def test_every_kernel_family_is_clean_under_oclgrind():
    _require_oclgrind()
    runs, report, stdout = run_under_oclgrind("ci")
    assert not report.strip(), f"Oclgrind reported:\n{report[:8000]}\n--- child stdout ---\n{stdout[-2000:]}"
    import clconv
    from clconv.passes import PASSES

    covered = {tuple(line.split()[1].split("-")[:2]) for line in stdout.splitlines() if line.startswith("ok ")}
    wanted = {(pass_, name) for pass_ in PASSES for name in clconv.algorithms(pass_)}
    assert wanted <= covered, f"the Oclgrind set misses {sorted(wanted - covered)}:\n{stdout[-3000:]}"
    assert runs == len([line for line in stdout.splitlines() if line.startswith("ok ")]), stdout[-3000:]


def test_splitk_in_one_launch_is_memory_safe_under_oclgrind():
    """Every read and write of split-K's one-launch sum in bounds and initialised (the counters
    come from a zeroed workspace); without the race detector, which reports the handoff between
    work-groups that the sum is made of (_one_launch_child)."""
    _require_oclgrind()
    runs, report, stdout = run_under_oclgrind("one-launch", ("--uninitialized", "--build-options", "-cl-opt-disable"))
    assert not report.strip(), f"Oclgrind reported:\n{report[:8000]}\n--- child stdout ---\n{stdout[-2000:]}"
    assert runs == 4 == len([line for line in stdout.splitlines() if line.startswith("ok ")]), stdout[-3000:]


def test_oclgrind_reports_an_out_of_bounds_write(tmp_path):
    """The harness can fail: a user template that writes one element past the output is caught."""
    _require_oclgrind()
    builtin = TESTS.parent / "clconv" / "kernels" / "direct.mako"
    text = builtin.read_text()
    marker = "    clc_store_result(y_base + y_off, CLC_Y_AT(b, channel, p), acc,"
    assert marker in text, "direct.mako changed: update this test's injected bug"
    bug = "    if (p == 0 && nc == 0) clc_st(y_base + y_off, (clc_idx)CLC_N * CLC_COUT * CLC_OP, acc);\n"
    (tmp_path / "direct.mako").write_text(text.replace(marker, bug + marker))
    script = tmp_path / "oob.py"
    script.write_text(
        "import numpy as np, clconv\n"
        # 3 rows: too few for the strip forward (clc_direct_forward_rows) a GPU-typed device would run
        "x = np.ones((1, 2, 3, 4), np.float32); w = np.ones((3, 2, 3, 3), np.float32)\n"
        "clconv.conv2d(x, w, padding=1, algorithm='direct')\n"
    )
    # CLCONV_RESULT_POOL=0: the result is an exact-size buffer (a pooled block is rounded up, and a
    # write one past the tensor would land inside it, unseen)
    env = dict(os.environ, PYOPENCL_NO_CACHE="1", CLCONV_CACHE_DIR=str(tmp_path / "cache"), CLCONV_TUNE="0",
               CLCONV_DEVICE="Oclgrind", CLCONV_TEMPLATE_PATH=str(tmp_path), CLCONV_RESULT_POOL="0")
    env.pop("PYOPENCL_CTX", None)
    log = tmp_path / "log"
    subprocess.run([OCLGRIND, "--log", str(log), *OCLGRIND_FLAGS, sys.executable, str(script)], env=env,
                   capture_output=True, text=True, timeout=300)
    report = log.read_text() if log.exists() else ""
    assert "Invalid write" in report and "clc_direct_forward" in report, report[:3000]


def outer(which: str) -> int:
    """scripts/fuzz: the set under Oclgrind with every tile configuration.  (Only unoptimised:
    Oclgrind 21.10 cannot run LLVM 14's optimised code at all -- besides ``freeze`` it lacks the
    ``llvm.experimental.noalias.scope.decl`` intrinsic that inlining ``restrict`` pointers emits.)"""
    if OCLGRIND is None:
        print("OCLGRIND NOT INSTALLED: run scripts/setup-env", file=sys.stderr)
        return 2
    status = 0
    for label, flags in (("unoptimised, --data-races --uninitialized", OCLGRIND_FLAGS),):
        runs, report, stdout = run_under_oclgrind(which, flags, every_config=True, timeout=6 * 3600)
        clean = not report.strip()
        print(f"oclgrind {which} ({label}): {runs} runs, {'no reports' if clean else 'REPORTS'}", flush=True)
        if not clean:
            print(report[:20000])
            print("\n".join(line for line in stdout.splitlines() if line.startswith("REPORTED")))
            status = 1
    return status


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS))
    if "--outer" in sys.argv:
        sys.exit(outer(sys.argv[1]))
    child(sys.argv[1] if len(sys.argv) > 1 else "ci", "--every-config" in sys.argv)
