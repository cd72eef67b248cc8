"""This session's CPU kernel changes, each as an A/B in one process: the heuristic's runner against
the same runner built without the change, 8 interleaved rounds, the minimum of each (a shared
machine's drift hits both alike).  Passes where the two run the same kernels are left out.

    POCL_MAX_PTHREAD_COUNT=2 python docs/perf/cpu_ab.py CHANGE DESCRIPTOR:PASSES[:ALGORITHM] ...

(ALGORITHM: that algorithm's first configuration instead of the heuristic's first candidate.)

CHANGE is one of
    gemm       the CPU GEMM's column blocks (NB) and the weight gradient's dy packed per chunk
    pieces     the im2col weight gradient's contraction in pieces (Im2col._cpu_pieces)
    residues   the strided depthwise data gradient by residue (depthwise_rows.Phase)
    wvectors   Winograd's transforms with 16 tiles (filters) per work-item as vector lanes (CPU_VT)
    wpack      Winograd's U packed (by its weight transform, or by the CPU GEMM's launch) against U read
               in place (Winograd.packed_rows and gemm.MIN_SWEEPS_TO_PACK["a_matrix"])
    utransform Winograd's U written packed by its weight transform (Winograd.packed_rows) against the
               CPU GEMM's packing launch (or U read in place, where it sweeps U under 4 times)
    dot        the weight gradient as dot products (gemm_cpu_dot.mako) against im2col's transposed-B GEMM
               (its first configuration that is not a dot product), where the heuristic picks the former
    tiles      a 1x1 stride-1 weight gradient's transposed input in tiles (clc_im2col_t_tiles) against
               a pixel per work-item (clc_im2col_t)
    packb      the CPU GEMM reading B through its packed panels (gemm.packs_b) against B's rows in place
    fwdrows    the forward's column buffer with rows padded by a line (gemm.spread_rows) against unpadded
e.g. ``python docs/perf/cpu_ab.py residues mb1g128ic128ih56oc128oh28kh3sh2ph1:backward_data``; the
Winograd ones measure passes the heuristic gives Winograd (forwards of 64+ channels).
"""
import collections
import contextlib
import importlib
import inspect
import math
import sys

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY, depthwise_rows, gemm, im2col
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor


@contextlib.contextmanager
def _set(owner, name, value):
    saved = inspect.getattr_static(owner, name)  # a class's staticmethod as itself, to be put back as one
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def _without_gemm_changes(problem, algorithm, config, device):
    one_block = {k: v for k, v in config.items() if k not in ("NB", "KC")}
    with _set(gemm, "MIN_SWEEPS_TO_PACK", {**gemm.MIN_SWEEPS_TO_PACK, "a_grad_output_rows": 10**9}):
        return algorithm.plan(problem, one_block, device)


def _without_pieces(problem, algorithm, config, device):
    with _set(REGISTRY["im2col"], "CPU_FILL", 0):
        return algorithm.plan(problem, config, device)


def _without_residues(problem, algorithm, config, device):
    with _set(depthwise_rows, "phases", lambda *args: ()):
        return algorithm.plan(problem, config, device)


def _without_winograd_vectors(problem, algorithm, config, device):
    with _set(importlib.import_module("clconv.algorithms.winograd"), "CPU_VT", 1):
        return algorithm.plan(problem, config, device)


def _without_winograd_pack(problem, algorithm, config, device):
    with _set(gemm, "MIN_SWEEPS_TO_PACK", {**gemm.MIN_SWEEPS_TO_PACK, "a_matrix": 10**9}):
        return _without_u_transform(problem, algorithm, config, device)


def _without_u_transform(problem, algorithm, config, device):
    winograd = importlib.import_module("clconv.algorithms.winograd")
    with _set(winograd.Winograd, "packed_rows", staticmethod(lambda *args: 0)):
        return algorithm.plan(problem, config, device)


def _without_dot_products(problem, algorithm, config, device):
    if not gemm.is_dot_config(config):
        return algorithm.plan(problem, config, device)
    transposed = next(c for c in REGISTRY["im2col"].configs(problem, device) if not gemm.is_dot_config(c))
    return REGISTRY["im2col"].plan(problem, transposed, device)


def _without_tiles(problem, algorithm, config, device):
    with _set(im2col, "pow2_at_most", lambda n: 0):  # no lanes: clc_im2col_t
        return algorithm.plan(problem, config, device)


def _without_b_packing(problem, algorithm, config, device):
    with _set(gemm, "PACK_B_MIN_ROWS", 10**9):
        return algorithm.plan(problem, config, device)


def _without_forward_rows(problem, algorithm, config, device):
    if problem.pass_ != "forward":  # the weight gradient's transposed rows keep their padding
        return algorithm.plan(problem, config, device)
    with _set(im2col, "spread_rows", lambda length, *args: length):
        return algorithm.plan(problem, config, device)


BEFORE = {"gemm": _without_gemm_changes, "pieces": _without_pieces, "residues": _without_residues,
          "wvectors": _without_winograd_vectors, "wpack": _without_winograd_pack, "utransform": _without_u_transform,
          "dot": _without_dot_products, "tiles": _without_tiles, "packb": _without_b_packing,
          "fwdrows": _without_forward_rows}


def _same_calls(before, after) -> bool:
    """Whether two plans launch the same kernels the same way (sources compared by their rendering's
    template and parameters: KernelSource compares by identity)."""
    return len(before) == len(after) and all(
        b.source.same_as(a.source) and (b.entry, b.global_size, b.local_size, b.args) == (a.entry, a.global_size, a.local_size, a.args)
        for b, a in zip(before, after))


def main(change, args):
    queue = runtime.profiling_queue(clconv.default_queue())
    cases = []
    for arg in args:
        descriptor, passes, *named = arg.split(":")
        for pass_ in passes.split(","):
            problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
            if named:
                algorithm = REGISTRY[named[0]]
                config = algorithm.configs(problem, queue.device)[0]
            else:
                algorithm, config = planner._first_candidate(problem, queue.device)
            after_plan = algorithm.plan(problem, config, queue.device)
            before_plan = BEFORE[change](problem, algorithm, config, queue.device)
            if _same_calls(before_plan.calls, after_plan.calls):
                continue
            before, after = planner.build(before_plan, queue), planner.build(after_plan, queue)
            cases.append((f"{descriptor} {pass_}{' ' + named[0] if named else ''}", runtime.random_operands(problem, queue),
                          before, after))
    best = collections.defaultdict(lambda: math.inf)
    for round_ in range(8):
        for name, operands, before, after in cases:
            for label, runner in (("before", before), ("after", after))[:: 1 if round_ % 2 else -1]:
                best[name, label] = min(best[name, label], runtime.time_runner(runner, queue, operands, 3, min))
    ratios = []
    for name, *_ in cases:
        a, b = best[name, "before"], best[name, "after"]
        ratios.append(b / a)
        print(f"{name:52s} {1e3 * a:8.3f} -> {1e3 * b:8.3f} ms ({b / a:.2f})")
    if ratios:
        print(f"geometric mean after/before over {len(ratios)}: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
