"""Every candidate (algorithm, config) of clconv.tools.mixed's layers, both layouts, kernel-event ms
(median of 10), the heuristic's first candidate marked.  On the GPU machine:

    ONLY=3x3 python docs/perf/candidates_by_layout.py forward,backward_data,backward_weight float32 [out.json]"""
import json
import os
import sys

import clconv
from clconv import planner, runtime
from clconv.plan import Problem
from clconv.resolve import resolve_conv
from clconv.tools.mixed import LAYERS


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    passes = sys.argv[1].split(",") if len(sys.argv) > 1 else ["forward"]
    dtypes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["float32"]
    only = os.environ.get("ONLY", "")
    rows = []
    for name, n, c, size, o, k, s, p, groups in LAYERS:
        if only not in name:
            continue
        g = resolve_conv(2, (n, c, size, size), (o, c // groups, k, k), None, s, p, 1, groups).geometry
        for pass_ in passes:
            for dtype in dtypes:
                for layout in ("channels_first", "channels_last"):
                    problem = Problem(g, pass_, dtype, layout=layout)
                    res = []
                    for i, (alg, cfg) in enumerate(planner.candidates(problem, q.device)):
                        try:
                            runner = planner.prepare(problem, alg, cfg, q)
                            ops = runtime.random_operands(problem, prof)
                            res.append((1e3 * runtime.time_runner(runner, prof, ops, 10), planner.label(alg, cfg), i))
                        except Exception as exc:  # a candidate that fails is reported, not fatal
                            res.append((float("inf"), f"{planner.label(alg, cfg)} FAIL {type(exc).__name__}", i))
                    first, best = res[0], min(res)
                    print(f"{name:32s} {pass_:15s} {dtype:8s} {layout:14s} first {first[0]:.4f} {first[1]:40s} "
                          f"best {best[0]:.4f} {best[1]}", flush=True)
                    for r in sorted(res):
                        print(f"      {r[0]:.4f} {r[1]}", flush=True)
                    rows.append(dict(layer=name, pass_=pass_, dtype=dtype, layout=layout, candidates=res))
    json.dump(rows, open(sys.argv[3] if len(sys.argv) > 3 else os.devnull, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
