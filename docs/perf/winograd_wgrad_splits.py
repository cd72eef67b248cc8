"""Winograd's weight gradient on layers given as shape specs: every GPU tile at a range of piece
counts, each config's kernel-event time (median of 10) and its GEMM's own time, beside the
planner's choice and cuDNN's time in the same run (TF32 off, cudnn.benchmark).  This is the data
behind the piece count of ``Winograd._splits``.  On the GPU machine:

    OUTJ=file.json python docs/perf/winograd_wgrad_splits.py SPEC [M]   (M: the tile side, default: the planner's first;
    TILES=5: the tiles, best guess first)

SPEC as `clconv bench` takes it (a descriptor, a layer file, a named set)."""
import json
import os
import sys

from winograd_split import cudnn_ms  # docs/perf/, beside this script (it sets TF32 off, cudnn.benchmark)

import clconv
from clconv import limits, planner, runtime
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import gemm_tiles
from clconv.algorithms.splitk import SplitK
from clconv.plan import CHANNELS_FIRST, Problem
from clconv.tools import shapes

SPLITS = (1, 4, 8, 15, 24, 36, 48, 72)


def main():
    spec = sys.argv[1]
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    wino = REGISTRY["winograd"]
    fit = limits.of(q.device)
    rows = []
    for layer in shapes.resolve_layers(spec, None):
        problem = Problem(layer.geometry, "backward_weight", "float32")
        sides = [int(sys.argv[2])] if len(sys.argv) > 2 else wino.sides(problem, q.device)[:1]
        ref = cudnn_ms(layer.geometry, "backward_weight")
        first = planner.candidates(problem, q.device)[0]
        print(f"{layer.label[:40]:40s} cudnn {ref:.4f}  planner {planner.label(*first)}", flush=True)
        res = []
        for m in sides:
            conv = wino._conv(problem, m)
            shape = wino._shape(problem, conv)
            cuts = set(SplitK.cuts(shape.K, 16))
            for tile in gemm_tiles(shape.M, shape.N, fit, 4, limit=int(os.environ.get("TILES", 5)), groups=1 << 20, layout=CHANNELS_FIRST,
                                   plain=True):
                for s in SPLITS:
                    if s != 1 and s not in cuts:
                        continue
                    cfg = {"m": m, **tile, "splits": s}
                    try:
                        runner = planner.prepare(problem, wino, cfg, q)
                    except Exception as e:  # a config over the workspace limit
                        print("    skip", cfg, type(e).__name__, str(e)[:80])
                        continue
                    ops = runtime.random_operands(problem, prof)
                    ms = 1e3 * runtime.time_runner(runner, prof, ops, 10)
                    events = runner.run(prof, ops)
                    events[-1].wait()
                    split = [round((e.profile.end - e.profile.start) * 1e-6, 4) for e in events]
                    res.append(dict(m=m, tile=tile, splits=s, ms=ms, split=split))
                    print(f"    m{m} {tile['TM']}x{tile['TN']}/{tile['WM']}x{tile['WN']} s{s:3d} {ms:.4f} "
                          f"({ms / ref:.2f}) {split}", flush=True)
        best = min(res, key=lambda r: r["ms"])
        print(f"  best {best['ms']:.4f} ({best['ms'] / ref:.2f}) m{best['m']} {best['tile']} s{best['splits']}",
              flush=True)
        rows.append(dict(layer=layer.label, cudnn=ref, planner=planner.label(*first), candidates=res))
    json.dump(rows, open(os.environ.get("OUTJ", "/dev/null"), "w"), indent=1)


if __name__ == "__main__":
    main()
