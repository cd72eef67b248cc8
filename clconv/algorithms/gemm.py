"""GEMM-based algorithms: every pass as a tiled GEMM over operand views (see templates/gemm.mako).

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

from dataclasses import dataclass, replace

import pyopencl as cl

from ..geometry import ConvGeometry
import numpy as np

from ..builder import get_kernel
from .base import Algorithm, Arg, Launch, Problem, Runner, render_and_build, rounded, workspace_limit


# -- tile configurations ---------------------------------------------------------------------------

# (TM, TN, TK, WM, WN, VW, PIPE): work-group tile M x N, contraction step TK, per-work-item block
# WM x WN made of VW x VW sub-blocks read from local memory as VW-wide vectors, PIPE: software-
# pipelined global loads (see templates/gemm.mako).
TILE_KEYS = ("TM", "TN", "TK", "WM", "WN", "VW", "PIPE")
TILE_DEFAULTS = {"VW": 1, "PIPE": 1}  # what a config stored before these keys existed means
GPU_TILES = [  # in order of preference where they waste the same (measured on an H200: docs/performance.md)
    (128, 64, 16, 8, 4, 4, 1),   # 256 work-items: the most frequent winner
    (64, 128, 16, 8, 8, 4, 1),   # 128 work-items, 8x8 blocks: 56x56 layers
    (128, 32, 16, 8, 4, 4, 1),   # 128 work-items: 14x14 and 7x7 layers
    (64, 64, 16, 8, 8, 4, 1),    # 64 work-items, 8x8 blocks: narrow weight gradients, im2col
    (128, 128, 16, 8, 8, 4, 1),
    (128, 64, 16, 8, 8, 4, 1),
    (64, 128, 16, 4, 8, 4, 1),
    (64, 64, 16, 4, 4, 4, 1),
    (32, 64, 16, 2, 4, 2, 1),
    (32, 32, 16, 4, 4, 4, 1),
]
CPU_TILES = [  # local-memory tiles for CPUs: vector local loads, no pipelining (3x the old scalar ones on PoCL)
    (64, 64, 16, 8, 8, 4, 0),
    (32, 64, 16, 4, 8, 4, 0),
    (64, 128, 16, 8, 8, 4, 0),
    (32, 32, 16, 4, 4, 4, 0),
]


# CPU tiles without local memory (templates/gemm_cpu.mako): (WM, VN, LX): each work-item computes
# WM rows x VN consecutive columns of C as WM vectors of VN lanes; at most LX work-items per
# work-group, along M.
CPU_KEYS = ("LOCAL", "WM", "VN", "LX")
CPU_VECTOR_TILES = [  # in order of preference (measured on PoCL, AVX-512: docs/performance.md)
    (16, 16, 8),  # 16 accumulators of 16 lanes: 81 GFLOP/s on a 1x1 1024->256 forward, one core
    (8, 16, 8),   # half the rows: more work-items for small M
    (16, 8, 8),   # 8 lanes: less waste on narrow images
]


def cpu_config(wm: int, vn: int, lx: int) -> dict:
    return {"LOCAL": 0, "WM": wm, "VN": vn, "LX": lx}


def is_cpu_config(tile: dict) -> bool:
    return tile.get("LOCAL", 1) == 0


def tile_extent(tile: dict) -> tuple[int, int, int]:
    """(rows of M, columns of N, contraction step) one work-group covers."""
    if is_cpu_config(tile):
        return tile["WM"] * tile["LX"], tile["VN"], 1
    return tile["TM"], tile["TN"], tile["TK"]


def _tile_fits(tile, device: cl.Device, itemsize: int) -> bool:
    tm, tn, tk, wm, wn, vw = tile[:6]
    threads = (tm // wm) * (tn // wn)
    pad = 1 if vw == 1 else vw
    local_bytes = tk * ((tm + pad) + (tn + pad)) * itemsize
    return threads <= device.max_work_group_size and local_bytes <= device.local_mem_size


def gemm_tiles(m: int, n: int, device: cl.Device, itemsize: int, limit: int = 4, groups: int = 1,
               vector_first: bool = True) -> list[dict]:
    """Tiles that fit the device, best guess first: least work wasted on the matrix edges, enough
    work-groups to fill every compute unit (on a GPU), then the table's order of preference.  On a
    CPU, the GEMM without local memory comes first when ``vector_first`` (else after one
    local-memory tile)."""
    gpu = bool(device.type & cl.device_type.GPU)
    tiles = [t for t in (GPU_TILES if gpu else CPU_TILES) if _tile_fits(t, device, itemsize)]
    if not tiles:  # a tiny device: one work-item per output, still tiled through local memory
        tiles = [(8, 8, 8, 1, 1, 1, 0)]
    units = max(1, device.max_compute_units)

    def cost(tile) -> float:
        tm, tn = tile[0], tile[1]
        padded = rounded(m, tm) * rounded(n, tn)
        waste = padded / (m * n)
        if gpu:
            # fewer work-groups than compute units leaves the rest idle (counting partial waves
            # beyond that overvalued small tiles in the H200 measurements)
            count = -(-m // tm) * -(-n // tn) * groups
            waste *= max(1.0, units / count)
        return waste

    tiles.sort(key=cost)  # stable: equal costs keep the table's order of preference
    configs = [dict(zip(TILE_KEYS, t)) for t in tiles]
    if not gpu:
        # no local memory, no barriers: what PoCL runs fastest (docs/performance.md); the
        # local-memory tiles stay as candidates for tuning
        vector = [cpu_config(*t) for t in CPU_VECTOR_TILES if t[2] <= device.max_work_group_size]
        if vector_first:
            configs = vector[:2] + configs[:1] + vector[2:] + configs[1:]
        else:
            configs = configs[:1] + vector[:2] + configs[1:2] + vector[2:] + configs[2:]
    return configs[:limit]


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

    @property
    def splits(self) -> int:
        return -(-self.K // self.ksplit) if self.ksplit else 1


@dataclass
class GemmKernel:
    """A built GEMM: its launch sizes and, where the CPU GEMM packs A first (``PACKED_A_VIEWS``),
    the packing launch and the bytes of the packed copy (workspace ``apack``, read as A)."""

    kernel: cl.Kernel | None
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    pack: Launch | None = None
    pack_bytes: int = 0

    def launch(self, a: str, b: str, c: str, bias: str | None = None, chunk: int = 0) -> Launch:
        return Launch(self.kernel, self.global_size, self.local_size,
                      gemm_args("apack" if self.pack else a, b, c, bias, chunk))


# The A views the CPU GEMM packs: weights, packed once per call (not per batch chunk).  The
# transposed views step CO or CI*KV elements per k (pages apart): packing always paid on PoCL
# (1.1-2x); the forward's row-major weight only where the GEMM sweeps A many times (measured: 1.02-1.07x
# with 25-196 column blocks, 0.88x with 7, where packing a 2.4 MB weight costs 12% of the GEMM).
PACKED_A_VIEWS = ("a_weight", "a_weight_t", "a_weight_bwd_data")
MIN_SWEEPS_TO_PACK = {"a_weight": 16}


def _packs_a(shape: GemmShape, tile: dict, launches: int) -> bool:
    if shape.a_view not in PACKED_A_VIEWS or shape.ksplit:
        return False
    sweeps = -(-shape.N // tile["VN"]) * launches  # times the GEMMs read all of A
    return sweeps >= MIN_SWEEPS_TO_PACK.get(shape.a_view, 0)


def build_gemm(queue, sources, problem: Problem, shape: GemmShape, tile: dict, index: str, label: str,
               launches: int = 1) -> GemmKernel:
    """Render and build one GEMM (run ``launches`` times per call: im2col's batch chunks)."""
    geometry = problem.geometry
    if is_cpu_config(tile):
        return _build_cpu_gemm(queue, sources, problem, shape, tile, index, label, launches)
    program = render_and_build(
        queue, sources, "gemm.mako", label,
        geom=geometry, real=problem.real, index=index,
        M=shape.M, N=shape.N, K=shape.K, KSPLIT=shape.ksplit or shape.K,
        a_view=shape.a_view, b_view=shape.b_view, c_view=shape.c_view,
        a_kfast=shape.a_kfast, b_nfast=shape.b_nfast, a=shape.a, b=shape.b, c=shape.c, **tile,
    )
    local = (tile["TN"] // tile["WN"], tile["TM"] // tile["WM"], 1)
    global_size = (
        rounded(shape.N, tile["TN"]) // tile["WN"],
        rounded(shape.M, tile["TM"]) // tile["WM"],
        geometry.groups * shape.splits,
    )
    kernel = get_kernel(program, "clc_gemm") if program is not None else None
    return GemmKernel(kernel, global_size, local)


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


def _build_cpu_gemm(queue, sources, problem: Problem, shape: GemmShape, tile: dict, index: str,
                    label: str, launches: int) -> GemmKernel:
    """The CPU GEMM (templates/gemm_cpu.mako): one work-item per WM x VN block of C."""
    b_row, run = _b_row(problem, shape)
    if run < tile["VN"]:
        # the vector loads take a run of VN columns from at most two images' rows: images smaller
        # than a vector (2x2 pixels under 16 lanes) are assembled lane by lane instead
        b_row = False
    blocks = -(-shape.M // tile["WM"])
    lm = min(tile["LX"], blocks)  # work-items per work-group along M
    packed = _packs_a(shape, tile, launches)
    pack_bytes = problem.geometry.groups * blocks * tile["WM"] * shape.K * problem.itemsize if packed else 0
    if packed and problem.geometry.needs_int64(pack_bytes // problem.itemsize):
        index = "long"
    program = render_and_build(
        queue, sources, "gemm_cpu.mako", label,
        geom=problem.geometry, real=problem.real, index=index,
        M=shape.M, N=shape.N, K=shape.K, KSPLIT=shape.ksplit or shape.K,
        a_view=shape.a_view, b_view=shape.b_view, c_view=shape.c_view, a=shape.a, b=shape.b, c=shape.c,
        b_row=b_row, RUN=run, WM=tile["WM"], VN=tile["VN"], LM=lm, A_PACKED=packed,
    )
    local = (lm, 1, 1)
    global_size = (rounded(blocks, lm), -(-shape.N // tile["VN"]), problem.geometry.groups * shape.splits)
    kernel = get_kernel(program, "clc_gemm") if program is not None else None
    pack = None
    if packed:
        pack_kernel = get_kernel(program, "clc_pack_a") if program is not None else None
        pack = Launch(pack_kernel, (shape.K, blocks, problem.geometry.groups), None,
                      (Arg("w"), Arg("apack")))  # every packed view is a view of the weight
    return GemmKernel(kernel, global_size, local, pack, pack_bytes)



def gemm_args(a: str, b: str, c: str, bias: str | None = None, chunk: int = 0) -> tuple:
    """clc_gemm's arguments: A, B, C (each with its offset), the bias (C when absent), the chunk."""
    return (Arg(a), Arg(b), Arg(c), Arg(bias or c, fallback=c), np.int32(chunk))


def gemm_launches(queue, sources, problem, shape: GemmShape, tile: dict, index: str, label: str,
                  a: str, b: str, c: str, bias: str | None = None) -> tuple[list[Launch], dict[str, int]]:
    """The launches of one GEMM (A's packing first, where it is packed) and their workspaces."""
    gemm = build_gemm(queue, sources, problem, shape, tile, index, label)
    if gemm.pack is None:
        return [gemm.launch(a, b, c, bias)], {}
    return [gemm.pack, gemm.launch(a, b, c, bias)], {"apack": gemm.pack_bytes}


def _tile_config(config: dict) -> dict:
    """The GEMM template's tile parameters from a config (VW, PIPE default as TILE_DEFAULTS)."""
    if is_cpu_config(config):
        return {k: config[k] for k in CPU_KEYS}
    return {k: config.get(k, TILE_DEFAULTS.get(k)) for k in TILE_KEYS}


# -- the GEMM shapes of each pass ---------------------------------------------------------------


def forward_shape(g: ConvGeometry, b_view: str, bias: bool, chunk_batch: int | None = None) -> GemmShape:
    """y[b][g*CO + m][po] = sum_k W[g][m][k] * B[k][(b, po)]."""
    K = g.cin_per_group * (1 if b_view == "b_input_pointwise" else g.kernel_volume)
    batch = chunk_batch or g.batch
    N = batch * g.out_pixels
    return GemmShape(
        M=g.cout_per_group, N=N, K=K,
        a_view="a_weight", b_view=b_view, c_view="c_nchw", a_kfast=True, b_nfast=True,
        a={}, b={"K": K, "N": N}, c={"M": g.cout_per_group, "channels": g.out_channels,
                                       "pixels": g.out_pixels, "bias": bias},
    )


def backward_data_shape(g: ConvGeometry, bias: bool) -> GemmShape:
    """dx[b][g*CI + m][pi] = sum_(co,tap) W[g*CO+co][m][tap] * dy-gathered[(co,tap)][(b, pi)]."""
    K = g.cout_per_group * g.kernel_volume
    return GemmShape(
        M=g.cin_per_group, N=g.batch * g.in_pixels, K=K,
        a_view="a_weight_bwd_data", b_view="b_grad_output_gather", c_view="c_nchw",
        a_kfast=True, b_nfast=True, a={}, b={},
        c={"M": g.cin_per_group, "channels": g.in_channels, "pixels": g.in_pixels, "bias": bias},
    )


def weight_shape(g: ConvGeometry, b_view: str, ksplit: int = 0, chunk_batch: int | None = None,
                 accumulate: bool = False) -> GemmShape:
    """dw[g*CO + m][n] = sum_(b, po) dy[b][g*CO+m][po] * B[(b, po)][n]."""
    N = g.cin_per_group * (1 if b_view == "b_input_pointwise_t" else g.kernel_volume)
    K = (chunk_batch or g.batch) * g.out_pixels
    return GemmShape(
        M=g.cout_per_group, N=N, K=K,
        a_view="a_grad_output_rows", b_view=b_view, c_view="c_matrix", a_kfast=True, b_nfast=False,
        a={}, b={"K": K, "N": N}, c={"M": g.cout_per_group, "N": N, "accumulate": accumulate},
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


# -- the algorithms ----------------------------------------------------------------------------


class ImplicitGemm(Algorithm):
    name = "implicit_gemm"
    passes = ("forward", "backward_data", "backward_weight")
    description = "tiled GEMM whose tile loads do the im2col/col2im addressing: no column buffer"

    def _shape(self, problem: Problem) -> GemmShape:
        g = problem.geometry
        if problem.pass_ == "forward":
            return forward_shape(g, "b_input_unfold", problem.bias)
        if problem.pass_ == "backward_data":
            return backward_data_shape(g, problem.bias)
        return weight_shape(g, "b_input_unfold_t")

    def configs(self, problem, device):
        shape = self._shape(problem)
        return gemm_tiles(shape.M, shape.N, device, problem.itemsize, groups=problem.geometry.groups,
                          vector_first=vector_first(problem, shape))

    def prepare(self, problem, config, queue, device):
        shape = self._shape(problem)
        sources: list = []
        names = {"forward": ("w", "x", "y", "bias"), "backward_data": ("w", "dy", "dx", "bias"),
                 "backward_weight": ("dy", "x", "dw", None)}[problem.pass_]
        launches, workspaces = gemm_launches(queue, sources, problem, shape, _tile_config(config),
                                             problem.index_type(), self.name, *names)
        return Runner(self.name, config, launches, workspaces, sources)


class Gemm1x1(ImplicitGemm):
    name = "gemm1x1"
    description = "1x1 convolution (strided too) as one GEMM reading the input in place"

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        if reason is None and not problem.geometry.is_pointwise:
            reason = "it serves only 1x1 kernels without padding"
        return reason

    def _shape(self, problem):
        g = problem.geometry
        if problem.pass_ == "forward":
            return forward_shape(g, "b_input_pointwise", problem.bias)
        if problem.pass_ == "backward_data":
            return backward_data_shape(g, problem.bias)  # the gather view with one tap
        return weight_shape(g, "b_input_pointwise_t")


class SplitK(Algorithm):
    name = "splitk"
    passes = ("backward_weight",)
    description = ("weight gradient with the batch x pixel contraction cut into equal pieces, "
                   "summed by a second kernel in a fixed order")
    MIN_PIECE = 256  # contraction per piece below which the extra partial traffic does not pay

    def splits_for(self, problem: Problem, device, tile: dict) -> list[int]:
        g = problem.geometry
        K = g.batch * g.out_pixels
        shape = weight_shape(g, "b_input_unfold_t")
        tm, tn, tk = tile_extent(tile)
        tiles = -(-shape.M // tm) * -(-shape.N // tn) * g.groups
        target = 4 * device.max_compute_units  # enough work-groups to fill the device, with slack
        limit = workspace_limit(device)
        out = []
        for s in range(2, 257):
            # pieces divide the contraction evenly, in whole TK steps, and are long enough to pay
            if K % s or (K // s) % tk or K // s < self.MIN_PIECE:
                continue
            if s * g.groups * shape.M * shape.N * problem.itemsize > limit:
                continue
            out.append(s)
        out.sort(key=lambda s: abs(tiles * s - target))
        return out

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        if reason is None and not any(self.splits_for(problem, device, t) for t in self.configs(problem, device)):
            g = problem.geometry
            reason = (f"the contraction (batch x output pixels = {g.batch * g.out_pixels}) has no even cut "
                      f"into pieces of at least {self.MIN_PIECE} whose partials fit the workspace limit")
        return reason

    def configs(self, problem, device):
        shape = weight_shape(problem.geometry, "b_input_unfold_t")
        # The split supplies the parallelism, so rank tiles by edge waste and reuse alone (a huge
        # group count switches off gemm_tiles' fill-the-device term); then the best split per tile.
        out = []
        for tile in gemm_tiles(shape.M, shape.N, device, problem.itemsize, groups=1 << 20,
                               vector_first=vector_first(problem, shape)):
            splits = self.splits_for(problem, device, tile)
            if splits:
                out.append({**tile, "splits": splits[0]})
        return out

    def prepare(self, problem, config, queue, device):
        g = problem.geometry
        splits = config["splits"]
        K = g.batch * g.out_pixels
        shape = weight_shape(g, "b_input_unfold_t", ksplit=K // splits)
        elements = g.groups * shape.M * shape.N
        index = problem.index_type(elements * splits)
        sources: list = []
        gemm, spaces = gemm_launches(queue, sources, problem, shape, _tile_config(config), index, self.name,
                                     "dy", "x", "partial")
        program = render_and_build(queue, sources, "reduce.mako", self.name, geom=g, real=problem.real,
                                   index=index, kernel="splitk_sum", splits=splits, elements=elements, wg=0)
        reduce = Launch(get_kernel(program, "clc_splitk_sum") if program is not None else None, (rounded(elements, 64),), None,
                        (Arg("partial", with_offset=False), Arg("dw")))
        return Runner(self.name, config, [*gemm, reduce], {"partial": splits * elements * problem.itemsize, **spaces},
                      sources)


class Im2col(Algorithm):
    name = "im2col"
    passes = ("forward", "backward_data", "backward_weight")
    description = ("explicit column buffer (im2col; col2im for the data gradient) filled in batch "
                   "chunks that fit the workspace limit, and a tiled GEMM over it")

    def _column_bytes_per_image(self, problem: Problem) -> int:
        g = problem.geometry
        return g.groups * g.cin_per_group * g.kernel_volume * g.out_pixels * problem.itemsize

    # With the CPU GEMM, images per launch are capped so that the column buffer stays about
    # cache-sized (measured on PoCL: 1-2 images' columns per launch ran the forward and weight
    # gradient of 3x3 layers up to 1.9x faster than a buffer for the whole batch)
    CPU_COLUMN_BYTES = 2 << 20

    def chunk_batch(self, problem: Problem, device, config: dict | None = None) -> int:
        per_image = self._column_bytes_per_image(problem)
        limit = workspace_limit(device)
        if config is not None and is_cpu_config(config):
            limit = min(limit, max(self.CPU_COLUMN_BYTES, per_image))
        return largest_chunk(problem.geometry.batch, per_image, limit)

    def decline_reason(self, problem, device):
        reason = super().decline_reason(problem, device)
        # batch 0 runs nothing (ops returns an empty result), so no column buffer need fit
        if reason is None and problem.geometry.batch and self.chunk_batch(problem, device) == 0:
            reason = (f"the column buffer of one image ({self._column_bytes_per_image(problem)} bytes) "
                      f"exceeds the workspace limit ({workspace_limit(device)} bytes, CLCONV_WORKSPACE_LIMIT)")
        return reason

    def _shape(self, problem, nb):
        g = problem.geometry
        if problem.pass_ == "forward":
            return forward_shape(g, "b_columns", problem.bias, chunk_batch=nb)
        if problem.pass_ == "backward_weight":
            return weight_shape(g, "b_columns_t", chunk_batch=nb, accumulate=True)
        # data gradient: columns[g][(ci, tap)][(b, po)] = W^T x dy, then col2im gathers them
        rows = g.cin_per_group * g.kernel_volume
        N = nb * g.out_pixels
        return GemmShape(M=rows, N=N, K=g.cout_per_group, a_view="a_weight_t", b_view="b_grad_output_cols",
                         c_view="c_matrix", a_kfast=False, b_nfast=True, a={}, b={},
                         c={"M": rows, "N": N, "accumulate": False})

    def configs(self, problem, device):
        shape = self._shape(problem, self.chunk_batch(problem, device) or 1)
        return gemm_tiles(shape.M, shape.N, device, problem.itemsize, groups=problem.geometry.groups)

    def prepare(self, problem, config, queue, device):
        g = problem.geometry
        nb = self.chunk_batch(problem, device, config)
        col_bytes = nb * self._column_bytes_per_image(problem)
        index = problem.index_type(col_bytes // problem.itemsize)
        shape = self._shape(problem, nb)
        tile = _tile_config(config)
        # the CPU GEMM's weight gradient reads the column buffer transposed, colT[g][(b, po)][(ci, tap)]
        # (clc_im2col_t): contiguous along N, so its rows are vector loads rather than lane gathers
        transposed = is_cpu_config(tile) and problem.pass_ == "backward_weight"
        if transposed:
            shape = replace(shape, b_view="b_columns", b_nfast=True)
        sources: list = []
        common = dict(geom=g, real=problem.real, index=index, chunk_batch=nb)
        gemm = build_gemm(queue, sources, problem, shape, tile, index, self.name, launches=g.batch // nb)
        launches = [gemm.pack] if gemm.pack is not None else []  # A packed once for every chunk
        if problem.pass_ in ("forward", "backward_weight"):
            rows = g.groups * g.cin_per_group * g.kernel_volume
            if is_cpu_config(tile):  # with the CPU GEMM: one work-item per output row (or pixel)
                unfold = render_and_build(queue, sources, "im2col_rows.mako", self.name, kernel="im2col",
                                          bias=False, **common)
                lines = g.out_size[0] * g.out_size[1]
                # the transposed buffer by rows writes a run of KV values per pixel and channel: for
                # a 1x1 kernel that is one value, and a pixel's whole row of C_in values (clc_im2col_t)
                # wins (PoCL: 0.15 vs 0.24 ms; 3x3: 0.39 vs 0.15 ms, per 784-pixel chunk)
                by_rows = g.kernel_volume >= 4
                name = ("clc_im2col_t_rows" if by_rows else "clc_im2col_t") if transposed else "clc_im2col_rows"
                unfold_kernel = get_kernel(unfold, name) if unfold is not None else None
                unfold_global: tuple[int, ...]
                if not transposed:
                    unfold_global = (lines, nb, rows)
                elif by_rows:
                    unfold_global = (g.groups * g.cin_per_group, lines, nb)
                else:
                    unfold_global = (g.out_pixels, nb, g.groups)
            else:
                unfold = render_and_build(queue, sources, "im2col.mako", self.name, kernel="im2col", bias=False,
                                          **common)
                unfold_kernel = get_kernel(unfold, "clc_im2col") if unfold is not None else None
                unfold_global = (rounded(nb * g.out_pixels, 64), rows)
            for chunk in range(0, g.batch, nb):
                launches.append(Launch(unfold_kernel, unfold_global, None, (Arg("x"), Arg("col", with_offset=False), np.int32(chunk))))
                if problem.pass_ == "forward":
                    launches.append(gemm.launch("w", "col", "y", "bias", chunk))
                else:
                    launches.append(gemm.launch("dy", "col", "dw", None, chunk))
        else:
            if is_cpu_config(tile):  # one work-item per dx row: 4-5x the per-element gather on PoCL
                fold = render_and_build(queue, sources, "im2col_rows.mako", self.name, kernel="col2im",
                                        bias=problem.bias, **common)
                fold_kernel = get_kernel(fold, "clc_col2im_rows") if fold is not None else None
                fold_global: tuple[int, ...] = (g.in_size[0] * g.in_size[1], nb, g.in_channels)
            else:
                fold = render_and_build(queue, sources, "im2col.mako", self.name, kernel="col2im",
                                        bias=problem.bias, **common)
                fold_kernel = get_kernel(fold, "clc_col2im") if fold is not None else None
                fold_global = (rounded(g.in_pixels, 64), nb * g.in_channels)
            for chunk in range(0, g.batch, nb):
                launches.append(gemm.launch("w", "dy", "col", None, chunk))
                launches.append(Launch(fold_kernel, fold_global, None,
                                       (Arg("col", with_offset=False), Arg("bias", fallback="dx"), Arg("dx"), np.int32(chunk))))
        return Runner(self.name, config, launches, {"col": col_bytes, **({"apack": gemm.pack_bytes} if gemm.pack else {})},
                      sources)
