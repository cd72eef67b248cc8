"""The GEMM core's vector global loads (config key GV: bit 0 A, bit 1 B) on whole layer-passes, as
the default heuristic runs them: each layer-pass's first candidate, if it is a GEMM tile, timed with
GV 0 (scalar), 1 (A), 2 (B) and 3 (both), the four interleaved over ROUNDS rounds (kernel time, the
median of 20 runs each; each config's best round).

    python docs/perf/gemm_vector_rows.py [JSON] [SPEC...]       on the GPU machine
"""
import json
import sys

import clconv
from clconv import planner, runtime
from clconv.plan import Problem
from clconv.tools import shapes

ROUNDS = 3
DEFAULT = [
    "mb1ic2048ih7oc512oh7kh1ph0", "mb1ic1024ih14oc1024oh14kh3ph1", "mb1ic512ih28oc512oh28kh3ph1",
    "mb32ic256ih56oc64oh56kh1ph0", "mb32ic1024ih14oc256oh14kh1ph0", "mb16ic3ih416oc32oh416kh3ph1",
    "mb4ic128iw16000oc128ow16000kw3pw1", "mb8ic256iw4000oc256ow4000kw3pw2dw1", "mb64ic1024ih28oc1024oh28kh1ph0",
    "mb32ic128ih28oc128oh28kh3ph1", "mb32ic64ih56oc64oh56kh3ph1",
]


def heuristic_gemm_passes(specs, device):
    """(spec, layer, pass, problem, algorithm, config) for each float32 layer-pass of ``specs``
    whose heuristic choice is a GEMM tile (also docs/perf/gemm_tile_order.py's rows)."""
    for spec in specs:
        for layer in shapes.resolve_layers(spec, None):
            for pass_ in ("forward", "backward_data", "backward_weight"):
                problem = Problem(layer.geometry, pass_, "float32")
                algorithm, config = planner.candidates(problem, device)[0]
                if "TM" in config:
                    yield spec, layer, pass_, problem, algorithm, config


def main():
    out = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].endswith(".json") else None
    specs = [a for a in sys.argv[1:] if a != out] or DEFAULT
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    rows = []
    for _spec, layer, pass_, problem, algorithm, config in heuristic_gemm_passes(specs, q.device):
        best = {}
        for _ in range(ROUNDS):
            for mode in (0, 1, 2, 3):
                runner = planner.prepare(problem, algorithm, {**config, "GV": mode}, q)
                ops = runtime.random_operands(problem, prof)
                ms = 1e3 * runtime.time_runner(runner, prof, ops, 20)
                best[mode] = min(best.get(mode, ms), ms)
        plan = algorithm.plan(problem, config, q.device)
        row = {"layer": layer.label, "pass": pass_, "algorithm": algorithm.name, "config": config,
               "ms": best, "calls": len(plan.calls)}
        rows.append(row)
        print(f"{layer.label[:34]:34s} {pass_:16s} {algorithm.name:14s} "
              + " ".join(f"GV{m} {best[m]:.4f}" for m in best)
              + "  ratios " + " ".join(f"{best[m] / best[0]:.2f}" for m in (1, 2, 3)), flush=True)
    if out:
        with open(out, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
