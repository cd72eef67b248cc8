"""Every split-K weight-gradient candidate worth a look on layers inside and outside the bench sets:
the GPU tiles x piece counts around the one that fills the device (x 1/4 .. x 4), kernel time of
each (the GEMM and the reduction), beside the heuristic's own choice under ``auto``.  The data the
split-K ranking of the heuristic is judged by (docs/performance.md).

    python docs/perf/splitk_candidates.py OUT.json        (on the GPU machine)
"""
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import clconv
from clconv import limits, planner, runtime
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import TILE_KEYS, weight_shape
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor

LAYERS = [  # name, benchdnn descriptor
    ("gpu set: resnet50 stem 7x7/2 b32", "mb32ic3ih224oc64oh112kh7sh2ph3"),
    ("gpu set: resnet50 1x1 256->64 56x56 b32", "mb32ic256ih56oc64oh56kh1ph0"),
    ("gpu set: resnet50 1x1 1024->256 14x14 b32", "mb32ic1024ih14oc256oh14kh1ph0"),
    ("vgg-11 conv1_1 b8", "mb8ic3ih224oc64oh224kh3ph1"),
    ("vgg-11 conv1_2 b8", "mb8ic64ih224oc64oh224kh3ph1"),
    ("small: 1x1/2 512->256 28x28 b8", "mb8ic512ih28oc256oh14kh1sh2ph0"),
    ("stem 7x7/2 b8", "mb8ic3ih224oc64oh112kh7sh2ph3"),
    ("1x1 64->256 56x56 b8", "mb8ic64ih56oc256oh56kh1ph0"),
    ("1x1/2 256->512 56x56 b16", "mb16ic256ih56oc512oh28kh1sh2ph0"),
    ("1x1 2048->512 7x7 b32", "mb32ic2048ih7oc512oh7kh1ph0"),
    ("5x5 32->64 28x28 b16", "mb16ic32ih28oc64oh28kh5ph2"),
    ("3x3 64->64 112x112 b4", "mb4ic64ih112oc64oh112kh3ph1"),
    ("3x3 3->32 256x256 b2 (U-Net input)", "mb2ic3ih256oc32oh256kh3ph1"),
    ("1D k9 80->256 w=1600 b4 (audio)", None),
]
TILES = [(32, 32, 16, 4, 4, 4, 1), (64, 64, 16, 8, 8, 4, 1), (128, 32, 16, 8, 4, 4, 1),
         (128, 64, 16, 8, 4, 4, 1), (64, 128, 16, 8, 8, 4, 1), (128, 128, 16, 8, 8, 4, 1)]
FACTORS = (0.25, 0.5, 1, 2, 4)
SWEEP_MIN_PIECE = 64  # pieces this short are measured too (the algorithm's own MIN_PIECE is 256)


def geometry(descriptor):
    if descriptor is None:  # a 1D layer: (N, C, W) with kernel 9, padding 4
        from clconv.resolve import resolve_conv
        return resolve_conv(1, (4, 80, 1600), (256, 80, 9), None, 1, 4, 1, 1).geometry
    return parse_descriptor(descriptor).geometry


def candidates(problem, device):
    """(tile, pieces) pairs: each tile with the valid piece counts nearest the fill target x FACTORS."""
    splitk = REGISTRY["splitk"]
    g = problem.geometry
    shape = weight_shape(g, "b_input_unfold_t")
    units = limits.of(device).compute_units
    out = []
    for row in TILES:
        tile = dict(zip(TILE_KEYS, row))
        shipped, type(splitk).MIN_PIECE = type(splitk).MIN_PIECE, SWEEP_MIN_PIECE
        try:
            cuts = splitk.cuts(g.batch_out_pixels, tile["TK"])
        finally:
            type(splitk).MIN_PIECE = shipped
        if not cuts:
            continue
        tiles = -(-shape.M // tile["TM"]) * -(-shape.N // tile["TN"]) * g.groups
        chosen = set()
        for factor in FACTORS:
            target = factor * splitk.FILL * units / tiles
            chosen.add(min(cuts, key=lambda s: abs(s - target)))
        out += [{**tile, "splits": s} for s in sorted(chosen)]
    return out


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    splitk = REGISTRY["splitk"]
    rows = []
    for name, descriptor in LAYERS:
        g = geometry(descriptor)
        problem = Problem(g, "backward_weight", "float32")
        if splitk.decline_reason(problem, q.device):
            print(f"{name}: split-K declines", flush=True)
            continue
        configs = candidates(problem, q.device)
        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            runners = list(pool.map(planner.prepare, [problem] * len(configs), [splitk] * len(configs), configs,
                                    [q] * len(configs)))
        built = time.perf_counter() - start
        operands = runtime.random_operands(problem, prof)
        times = {}
        for config, runner in zip(configs, runners):
            times[json.dumps(config, sort_keys=True)] = 1e3 * runtime.time_runner(runner, prof, operands, 10)
        auto = planner.plan(problem, q)
        auto_ms = 1e3 * runtime.time_runner(auto, prof, operands, 10)
        heuristic = splitk.configs(problem, q.device)[0]
        heuristic_ms = 1e3 * runtime.time_runner(planner.prepare(problem, splitk, heuristic, q), prof, operands, 10)
        best = min(times, key=times.get)
        print(f"{name} ({g.tag()}): {len(configs)} candidates built in {built:.1f} s; best {best} {times[best]:.4f} ms; "
              f"split-K heuristic {heuristic} {heuristic_ms:.4f} ms; auto {auto.label} {auto_ms:.4f} ms", flush=True)
        rows.append({"layer": name, "tag": g.tag(), "times_ms": times, "heuristic": heuristic,
                     "heuristic_ms": heuristic_ms, "auto": auto.algorithm, "auto_config": auto.config, "auto_ms": auto_ms})
        with open(sys.argv[1] if len(sys.argv) > 1 else "splitk.json", "w") as handle:
            json.dump({"device": q.device.name, "units": limits.of(q.device).compute_units, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
