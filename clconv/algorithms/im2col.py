"""im2col: an explicit column buffer (im2col; col2im for the data gradient), filled in batch chunks
that fit the workspace limit, and the tiled GEMM over it (kernels/im2col.mako, im2col_rows.mako on
CPUs, and the GEMM core)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import limits, settings
from ..limits import pow2_at_most
from ..passes import PASSES
from ..plan import LAYOUTS, Arg, Plan, Problem, rounded
from .base import Algorithm, call, epilogue_args, source
from .reduce import splitk_sum
from .splitk import SplitK
from .gemm import (
    COLUMN_WEIGHTS, GemmShape, cpu_work_groups, dot_gemm, dot_work_groups, forward_shape, gemm, gemm_tiles, is_cpu_config,
    is_dot_config, largest_chunk, packs_b, spread_rows, thrashing_last, tile_config, weight_contraction, weight_shape,
    with_dot_configs,
)


class Im2col(Algorithm):
    name = "im2col"
    passes = PASSES
    layouts = LAYOUTS
    description = ("explicit column buffer (im2col; col2im for the data gradient) filled in batch "
                   "chunks that fit the workspace limit, and a tiled GEMM over it")

    def _column_bytes_per_image(self, problem: Problem) -> int:
        g = problem.geometry
        return g.groups * g.cin_per_group * g.kernel_volume * g.out_pixels * problem.itemsize

    # With the CPU GEMM, images per launch are capped so that the column buffer stays about
    # cache-sized: CPU_COLUMN_BYTES, or a quarter of the cache the cores share where that is more
    # (CPU_SHARED_CACHE_SHARE).  Measured on PoCL: on an early machine 1-2 images' columns per
    # launch ran the forward and weight gradient of 3x3 layers up to 1.9x faster than a buffer for
    # the whole batch; on a 2-core AVX-512 EPYC with 32 MiB of L3 (2026-12-06, docs/performance.md)
    # chunks of up to 8 MiB ran in 0.81-0.96x the time of 2 MiB ones on 7 passes (a 3x3 32-channel
    # layer at 28x28, batch 8, all three passes: 8 launches of tiny GEMMs became 1; the stem's
    # forward and weight gradient; 3x3 weight gradients at 28x28 and 14x14, batch 4) and tied on
    # the rest, none slower.
    CPU_COLUMN_BYTES = 2 << 20
    CPU_SHARED_CACHE_SHARE = 4

    def chunk_batch(self, problem: Problem, device, config: dict | None = None) -> int:
        per_image = self._column_bytes_per_image(problem)
        limit = settings.workspace_limit(device)
        if config is not None and is_cpu_config(config):
            cap = max(self.CPU_COLUMN_BYTES, limits.of(device).shared_cache // self.CPU_SHARED_CACHE_SHARE)
            limit = min(limit, max(cap, per_image))
        return largest_chunk(problem.geometry.batch, per_image, limit)

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        # batch 0 runs nothing (ops returns an empty result), so no column buffer need fit
        if reason is None and problem.geometry.batch and self.chunk_batch(problem, device) == 0:
            reason = (f"the column buffer of one image ({self._column_bytes_per_image(problem)} bytes) "
                      f"exceeds the workspace limit ({settings.workspace_limit(device)} bytes, CLCONV_WORKSPACE_LIMIT)")
        return reason

    @staticmethod
    def _sums_in_workspace(problem: Problem, nb: int) -> bool:
        """Whether the weight gradient's chunks add up in a clc_real workspace (``partial``), rounded
        to the storage once at the end: storage narrower than the sums (float16, bfloat16) would
        otherwise round every chunk's running total."""
        return problem.storage_itemsize < problem.itemsize and nb < problem.geometry.batch

    def _shape(self, problem, nb):
        g = problem.geometry
        if problem.pass_ == "forward":
            return forward_shape(g, "b_columns", chunk_batch=nb)
        if problem.pass_ == "backward_weight":
            # one chunk for the whole batch has nothing to add onto: a plain store, which C stored
            # as float16/bfloat16 (the call's dw, not a clc_real workspace) needs
            shape = weight_shape(g, "b_columns_t", chunk_batch=nb, accumulate=nb < g.batch)
            if self._sums_in_workspace(problem, nb):
                shape = replace(shape, c={**shape.c, "stored": False})
            return shape
        # data gradient: columns[g][(ci, tap)][(b, po)] = W^T x dy, then col2im gathers them
        rows = g.cin_per_group * g.kernel_volume
        N = nb * g.out_pixels
        return GemmShape(M=rows, N=N, K=g.cout_per_group, a_view="a_weight_t", b_view="b_grad_output_cols",
                         c_view="c_matrix", a_kfast=False, b_nfast=True, a={}, b={},
                         c={"M": rows, "N": N, "accumulate": False, "stored": False})

    def configs(self, problem, device):
        shape = self._shape(problem, self.chunk_batch(problem, device) or 1)
        fit = limits.of(device)
        # the data gradient's column GEMM weighs its tiles' fill and local loads (gemm.COLUMN_WEIGHTS)
        tiles = gemm_tiles(shape.M, shape.N, fit, problem.itemsize, groups=problem.geometry.groups,
                           layout=problem.layout, k=weight_contraction(shape),
                           weights=COLUMN_WEIGHTS if problem.pass_ == "backward_data" else None)
        # the CPU's cache-sized column buffers: the dot products' contraction per launch, and the
        # GEMM of each chunk (A's rows read in place that would thrash the L1 cache come last)
        cpu_chunk = self.chunk_batch(problem, device, {"LOCAL": 0}) or 1
        tiles = thrashing_last(tiles, problem, self._shape(problem, cpu_chunk), fit,
                               launches=problem.geometry.batch // cpu_chunk)
        return with_dot_configs(problem, fit, tiles, replace(shape, K=cpu_chunk * problem.geometry.out_pixels))

    def plan(self, problem, config, device):
        g = problem.geometry
        nb = self.chunk_batch(problem, device, config)
        if is_dot_config(config):  # the forward's column buffer, then dot products
            index = problem.index_type(nb * self._column_bytes_per_image(problem) // problem.itemsize)
            unfold = self._unfold(problem, index, nb, cpu=True, transposed=False)
            return dot_weight_plan(problem, config, device, self.name, nb, unfold,
                                   nb * self._column_bytes_per_image(problem), fill=self.CPU_FILL)
        col_bytes = nb * self._column_bytes_per_image(problem)
        index = problem.index_type(col_bytes // problem.itemsize)
        shape = self._shape(problem, nb)
        tile = tile_config(config)
        cpu = is_cpu_config(tile)
        # the CPU GEMM's weight gradient reads the column buffer transposed, colT[g][(b, po)][(ci, tap)]
        # (clc_im2col_t): contiguous along N, so its rows are vector loads rather than lane gathers
        transposed = cpu and problem.pass_ == "backward_weight"
        pieces = 1
        if transposed:
            pieces = self._cpu_pieces(problem, device, shape, tile)
            if pieces > 1:  # each piece's partial sums in the workspace
                shape = weight_shape(g, "b_columns_t", ksplit=-(-shape.K // pieces), chunk_batch=nb, accumulate=nb < g.batch)
                pieces = shape.splits
                index = problem.index_type(max(col_bytes // problem.itemsize, pieces * g.weight_elements))
            shape = replace(shape, b_view="b_columns", b_nfast=True)
            # its rows padded where they would share the L1's sets (a power-of-two C_in)
            row = spread_rows(shape.N, problem.itemsize, limits.of(device))
            if row != shape.N:
                shape = replace(shape, b={**shape.b, "LD": row})
                col_bytes = nb * g.out_pixels * g.groups * row * problem.itemsize
                index = problem.index_type(max(col_bytes // problem.itemsize, pieces * g.weight_elements))
        elif cpu and problem.pass_ == "forward":
            # the column buffer's rows, each a k step of the GEMM's walk, padded where they would
            # share the caches' sets (gemm.spread_rows): on PoCL (2-core AVX2 EPYC) DCGAN's 4x4
            # stride-2 128 -> 256 forward at 16x16, batch 4 (rows of 1024 pixels, 4 KiB apart, its
            # walk down 2048 rows in 16 of the L2's sets) ran in 0.82x the time with them padded
            # (before B was packed for such long walks: gemm.packs_b)
            row = spread_rows(shape.N, problem.itemsize, limits.of(device))
            padded = g.groups * g.cin_per_group * g.kernel_volume * row * problem.itemsize
            if row != shape.N and padded <= settings.workspace_limit(device):
                shape = replace(shape, b={**shape.b, "LD": row})
                col_bytes = padded
                index = problem.index_type(col_bytes // problem.itemsize)
        panels = 0
        if cpu and problem.pass_ != "backward_data" and self._writes_panels(problem, shape, tile, transposed, device):
            # the writer fills the GEMM's packed panels of B itself: no clc_pack_b launch per chunk
            panels = tile["VN"]
            shape = replace(shape, b={k: v for k, v in shape.b.items() if k != "LD"} | {"PANELS": True})
            col_bytes = g.groups * -(-shape.N // panels) * panels * shape.K * problem.itemsize
            index = problem.index_type(max(col_bytes // problem.itemsize, pieces * g.weight_elements))
        core = gemm(problem, shape, tile, index, launches=g.batch // nb)
        calls = [core.packing()] if core.pack and not core.pack_per_chunk else []  # a weight: once for every chunk
        chunks = range(0, g.batch, nb)
        if problem.pass_ == "backward_data":  # GEMM into columns, then col2im gathers them into dx
            fold = self._fold(problem, index, nb, cpu)
            for chunk in chunks:
                calls += [*core.calls("w", "dy", "col", None, chunk), fold(chunk)]
        else:  # im2col into columns, then the GEMM
            unfold = self._unfold(problem, index, nb, cpu, transposed, self._lanes(problem, device),
                                  shape.b.get("LD", shape.N), panels)
            a, c, bias = ("w", "y", "bias") if problem.pass_ == "forward" else ("dy", "dw", None)
            in_workspace = problem.pass_ == "backward_weight" and (pieces > 1 or self._sums_in_workspace(problem, nb))
            for chunk in chunks:
                calls.append(unfold(chunk))
                if core.pack_per_chunk:  # the chunk's dy rows
                    calls.append(core.packing(chunk))
                calls += core.calls(a, "col", "partial" if in_workspace else c, bias, chunk)
            if in_workspace:  # the pieces' running sums added up (in a fixed order) and rounded to the storage once
                calls.append(splitk_sum(problem, index, pieces, g.weight_elements))
                return Plan(problem, self.name, config, tuple(calls),
                            {"col": col_bytes, "partial": pieces * g.weight_elements * problem.itemsize, **core.workspaces})
        return Plan(problem, self.name, config, tuple(calls), {"col": col_bytes, **core.workspaces})

    # The CPU weight gradient's GEMM is small (C_out x C_in*taps) with a long contraction: a layer
    # with few channels gives a handful of work-groups, fewer than the cores can share out (a 1D
    # 32->32 layer of 2 taps: 4).  Its contraction is then cut into pieces, each a GEMM into its own
    # partial sums, added up in a fixed order at the end (deterministic), for about CPU_FILL
    # work-groups per core: measured on PoCL, 2 cores, that layer took 1.51 ms whole, 0.92 ms in
    # 2 pieces, 0.79 in 4, 0.78 in 8.
    CPU_FILL = 8

    def _cpu_pieces(self, problem: Problem, device, shape: GemmShape, tile: dict) -> int:
        """Pieces to cut one chunk's weight-gradient contraction into on a CPU (1: uncut)."""
        g = problem.geometry
        work_groups = cpu_work_groups(shape.M, shape.N, tile["WM"], tile["VN"], tile["LX"], g.groups)
        wanted = -(-self.CPU_FILL * limits.of(device).compute_units // work_groups)
        room = settings.workspace_limit(device) // (g.weight_elements * problem.itemsize)
        return max(1, min(wanted, shape.K // SplitK.MIN_PIECE, room))

    @staticmethod
    def _lanes(problem: Problem, device) -> int:
        return pow2_at_most(limits.of(device).lanes(problem.itemsize))

    @staticmethod
    def _transposed_writer(problem: Problem, lanes: int) -> str:
        """The entry point that writes the CPU weight gradient's transposed column buffer (``lanes``:
        the CPU's vector lanes, 0 where it has none)."""
        g = problem.geometry
        if g.is_pointwise and all(s == 1 for s in g.stride) and lanes >= 4:
            # the input itself, turned over in tiles of T pixels x T channels (T: the vector
            # lanes): on PoCL (AVX-512, 2 threads) the 1x1 1024->256 14x14 weight gradient at
            # batch 2 took 1.59 ms in all against 3.15 with clc_im2col_t (7x7-28x28 layers of
            # 128-512 channels: 1.00-1.02x, their images' last tiles partial)
            return "clc_im2col_t_tiles"
        # by rows, a run of KV values per pixel and channel: for a 1x1 kernel that is one value, and
        # a pixel's whole row of C_in values (clc_im2col_t) wins (PoCL: 0.15 vs 0.24 ms; 3x3: 0.39
        # vs 0.15 ms, per 784-pixel chunk)
        return "clc_im2col_t_rows" if g.kernel_volume >= 4 else "clc_im2col_t"

    def _writes_panels(self, problem: Problem, shape: GemmShape, tile: dict, transposed: bool, device) -> bool:
        """Whether the CPU GEMM over this column buffer would pack B into panels (gemm.packs_b: its
        walk down B's rows crosses a page a step) and the buffer's writer can fill the panels
        itself: the weight gradient's clc_im2col_t_rows (a kernel of 4 taps or more), and the
        forward's clc_im2col_rows where an output row is a whole number of panel rows (OW a
        multiple of VN: each of its runs one panel row at a time; written value by value across
        panels, DCGAN's forward ran 1.115x the copy's time).  On PoCL (a 2-core AVX-512 EPYC, 2
        threads; each pass against the same plan with clc_pack_b, interleaved) 5 weight gradients
        ran 0.89-1.01x the time (DCGAN's 4x4 stride-2 128 -> 256 at batch 4 0.97x, a 3x3 256 at
        64x64 0.89x) and 4 forwards 0.90-0.98x (DCGAN's 0.95x)."""
        if not packs_b(problem, shape, tile):
            return False
        if not transposed:
            return problem.geometry.out_size[-1] % tile["VN"] == 0
        return self._transposed_writer(problem, self._lanes(problem, device)) == "clc_im2col_t_rows"

    @staticmethod
    def _unfold(problem: Problem, index: str, nb: int, cpu: bool, transposed: bool, lanes: int = 0, row: int = 0,
                panels: int = 0):
        """The call that writes one chunk's column buffer (``col``) from the input (``lanes``: the
        CPU's vector lanes, the side of clc_im2col_t_tiles' tiles; 0 where it has none; ``row``: the
        CPU buffer's row stride, at least C_in x taps transposed, else the chunk's pixels;
        ``panels``: the CPU GEMM's panel width where the writer fills its packed panels of B)."""
        g = problem.geometry
        rows = g.groups * g.cin_per_group * g.kernel_volume
        size: tuple[int, ...]
        if not cpu:
            src = source("im2col.mako", problem, index, writes_result=False, chunk_batch=nb)
            entry, size = "clc_im2col", (rounded(nb * g.out_pixels, 64), rows)
        else:  # with the CPU GEMM: one work-item per output row (or pixel)
            # the transposed buffer's writers take its row stride
            strides = ({"COL_T": row or g.cin_per_group * g.kernel_volume} if transposed
                       else {"COL_LD": row} if row and row != nb * g.out_pixels else {})
            if panels:
                strides["PANEL_VN"] = panels
            src = source("im2col_rows.mako", problem, index, writes_result=False, chunk_batch=nb, **strides)
            lines = g.out_size[0] * g.out_size[1]
            entry = Im2col._transposed_writer(problem, lanes) if transposed else "clc_im2col_rows"
            if entry == "clc_im2col_rows":
                size = (lines, nb, rows)
            elif entry == "clc_im2col_t_tiles":
                t = min(16, lanes)
                size = (-(-g.out_pixels // t), g.groups * -(-g.cin_per_group // t), nb)
                src = source("im2col_rows.mako", problem, index, writes_result=False, chunk_batch=nb, T=t, **strides)
            elif entry == "clc_im2col_t_rows":
                size = (g.groups * g.cin_per_group, lines, nb)
            else:
                size = (g.out_pixels, nb, g.groups)
        return lambda chunk: call(src, entry, size, None, Arg("x"), Arg("col", with_offset=False), np.int32(chunk))

    @staticmethod
    def _fold(problem: Problem, index: str, nb: int, cpu: bool):
        """The call that adds one chunk's columns into dx (col2im), with the bias."""
        g = problem.geometry
        size: tuple[int, ...]
        if cpu:  # one work-item per dx row: 4-5x the per-element gather on PoCL
            src = source("im2col_rows.mako", problem, index, chunk_batch=nb)
            entry, size = "clc_col2im_rows", (g.in_size[0] * g.in_size[1], nb, g.in_channels)
        else:
            src = source("im2col.mako", problem, index, chunk_batch=nb)
            entry, size = "clc_col2im", (rounded(g.in_pixels, 64), nb * g.in_channels)
        return lambda chunk: call(src, entry, size, None, Arg("col", with_offset=False), *epilogue_args(problem, "dx"),
                                  Arg("dx"), np.int32(chunk))


def dot_weight_plan(problem: Problem, config: dict, device, algorithm: str, nb: int, unfold=None,
                    col_bytes: int = 0, fill: int = Im2col.CPU_FILL) -> Plan:
    """The weight gradient on a CPU as dot products (gemm_cpu_dot.mako) over batch chunks of ``nb``
    images: B is each chunk's column buffer where ``unfold`` fills one (workspace ``col`` of
    ``col_bytes``), else the input itself (a 1x1 stride-1 layer).  Where dw's blocks leave the
    cores short of work-groups (``fill`` per core), the contraction is cut into pieces as
    Im2col._cpu_pieces cuts it."""
    g = problem.geometry
    fit = limits.of(device)
    tile = tile_config(config)
    shape = weight_shape(g, "b_columns", chunk_batch=nb, accumulate=nb < g.batch)
    wanted = -(-fill * fit.compute_units // dot_work_groups(shape.M, shape.N, tile, g.groups))
    room = settings.workspace_limit(device) // (g.weight_elements * problem.itemsize)
    pieces = max(1, min(wanted, shape.K // SplitK.MIN_PIECE, room))
    if pieces > 1:  # each piece's partial sums in the workspace
        shape = weight_shape(g, "b_columns", ksplit=-(-shape.K // pieces), chunk_batch=nb, accumulate=nb < g.batch)
        pieces = shape.splits
    in_workspace = pieces > 1 or Im2col._sums_in_workspace(problem, nb)
    if in_workspace:
        shape = replace(shape, c={**shape.c, "stored": False})
    index = problem.index_type(max(col_bytes // problem.itemsize, pieces * g.weight_elements))
    core = dot_gemm(problem, shape, tile, index, "columns" if unfold else "input", fit)
    calls = []
    for chunk in range(0, g.batch, nb):
        if unfold:
            calls.append(unfold(chunk))
        calls.append(core.call("col" if unfold else "x", "partial" if in_workspace else "dw", chunk))
    workspaces = {"col": col_bytes} if unfold else {}
    if in_workspace:  # the pieces' (or chunks') sums added up in a fixed order, rounded to the storage once
        calls.append(splitk_sum(problem, index, pieces, g.weight_elements))
        workspaces["partial"] = pieces * g.weight_elements * problem.itemsize
    return Plan(problem, algorithm, config, tuple(calls), workspaces)
