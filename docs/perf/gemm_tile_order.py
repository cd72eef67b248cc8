"""The GPU tiles' order of preference with the GEMM core's vector loads: for every layer-pass of
the given lists whose heuristic choice is a GEMM tile, that choice timed with each of the first
TILES of GPU_TILES in its place (the same TK and GV; kernel time, median of 10), and each tile's
time against the layer-pass's best.

    python docs/perf/gemm_tile_order.py OUT.json SPEC...       on the GPU machine
"""
import json
import math
import sys

from gemm_vector_rows import heuristic_gemm_passes  # docs/perf/, beside this script

import clconv
from clconv import planner, runtime
from clconv.algorithms.gemm import GPU_TILES, TILE_KEYS

TILES = 4


def main():
    out, specs = sys.argv[1], sys.argv[2:]
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    rows = []
    for spec, layer, pass_, problem, algorithm, config in heuristic_gemm_passes(specs, q.device):
        times = {}
        for row in GPU_TILES[:TILES]:
            tile = {k: v for k, v in zip(TILE_KEYS, row) if k not in ("TK", "GV")}
            key = "x".join(str(tile[k]) for k in ("TM", "TN", "WM", "WN"))
            try:
                runner = planner.prepare(problem, algorithm, {**config, **tile}, q)
                ops = runtime.random_operands(problem, prof)
                times[key] = 1e3 * runtime.time_runner(runner, prof, ops, 10)
            except Exception as exc:  # noqa: BLE001 - a tile the layer or device refuses
                print(f"   {key}: {type(exc).__name__}: {str(exc)[:80]}")
        chosen = "x".join(str(config[k]) for k in ("TM", "TN", "WM", "WN"))
        best = min(times.values())
        rows.append({"set": spec, "layer": layer.label, "pass": pass_, "algorithm": algorithm.name,
                     "config": config, "chosen": chosen, "ms": times})
        print(f"{layer.label[:30]:30s} {pass_[:8]:8s} {algorithm.name:13s} chosen {chosen:12s} "
              f"{times.get(chosen, float('nan')) / best:.2f}  "
              + " ".join(f"{k} {t / best:.2f}" for k, t in times.items()), flush=True)
        with open(out, "w") as handle:  # kept as it goes: a run cut short keeps its rows
            json.dump(rows, handle, indent=1)
    for key in {k for r in rows for k in r["ms"]}:
        ratios = [r["ms"][key] / min(r["ms"].values()) for r in rows if key in r["ms"]]
        print(f"tile {key}: {len(ratios)} layer-passes, geomean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
    chosen = [r["ms"][r["chosen"]] / min(r["ms"].values()) for r in rows if r["chosen"] in r["ms"]]
    print(f"the heuristic's tiles: {len(chosen)} layer-passes, geomean {math.exp(sum(map(math.log, chosen)) / len(chosen)):.3f}")
    with open(out, "w") as handle:
        json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
