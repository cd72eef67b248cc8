"""Split-K of the forward and the data gradient against every other candidate: for each layer of
the given shape files, each of those passes, the kernel time of every candidate tuning measures
(planner.candidates) and of every split-K tile at the piece counts around the one its heuristic
picks (x 1/4 .. x 4), beside the heuristic's own first choice.  The data the split-K rule of
planner.heuristic_order is judged by (docs/performance.md).

    python docs/perf/splitk_result_passes.py OUT.json [--forward] SHAPE_FILE...      (on the GPU machine)
"""
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import clconv
from clconv import limits, planner, runtime
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.tools.shapes import resolve_layers

PASSES = ("forward", "backward_data")
FACTORS = (0.25, 0.5, 1, 2, 4)


def splitk_configs(problem, device):
    """Each split-K tile with the valid piece counts nearest its heuristic count x FACTORS."""
    splitk = REGISTRY["splitk"]
    out = []
    for config in splitk.configs(problem, device):
        tile = {k: v for k, v in config.items() if k != "splits"}
        cuts = splitk.cuts(splitk.shape(problem).K, tile.get("TK", 16), splitk.min_piece(problem))
        chosen = {min(cuts, key=lambda s: abs(s - factor * config["splits"])) for factor in FACTORS}
        out += [{**tile, "splits": s} for s in sorted(chosen)]
    return out


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    splitk = REGISTRY["splitk"]
    out_path, files = sys.argv[1], sys.argv[2:]
    passes = PASSES
    if files[:1] == ["--forward"]:
        passes, files = ("forward",), files[1:]
    rows = []
    for spec in files:
        for layer in resolve_layers(spec):
            for pass_ in passes:
                problem = Problem(layer.geometry, pass_, "float32")
                pairs = [(a, c) for a, c in planner.candidates(problem, q.device) if a is not splitk]
                if splitk.decline_reason(problem, q.device) is None:
                    pairs += [(splitk, c) for c in splitk_configs(problem, q.device)]
                start = time.perf_counter()
                with ThreadPoolExecutor(8) as pool:
                    runners = list(pool.map(_prepare, [problem] * len(pairs), *zip(*pairs), [q] * len(pairs)))
                built = time.perf_counter() - start
                operands = runtime.random_operands(problem, prof)
                times = {}
                for (algorithm, config), runner in zip(pairs, runners):
                    if runner is not None:
                        label = planner.label(algorithm, config)
                        times[label] = 1e3 * runtime.time_runner(runner, prof, operands, 10)
                first = planner.candidates(problem, q.device)[0]
                heuristic = planner.label(*first)
                best = min(times, key=times.get)
                best_other = min((t for k, t in times.items() if not k.startswith("splitk")), default=float("nan"))
                best_splitk = min((t for k, t in times.items() if k.startswith("splitk")), default=float("nan"))
                print(f"{layer.label[:34]:34s} {pass_[:8]:8s} built {built:4.1f}s  best {best[:40]:40s} "
                      f"{times[best] * 1e3:7.1f} us  others' best {best_other * 1e3:7.1f}  splitk's best "
                      f"{best_splitk * 1e3:7.1f}  heuristic {heuristic[:30]} {times.get(heuristic, float('nan')) * 1e3:7.1f}",
                      flush=True)
                rows.append({"layer": layer.label, "tag": layer.geometry.tag(), "pass": pass_, "times_ms": times,
                             "heuristic": heuristic, "file": spec})
                with open(out_path, "w") as handle:
                    json.dump({"device": q.device.name, "units": limits.of(q.device).compute_units, "rows": rows},
                              handle, indent=1)


def _prepare(problem, algorithm, config, queue):
    try:
        return planner.prepare(problem, algorithm, config, queue)
    except planner.CANDIDATE_FAILURES as exc:
        print(f"  {planner.label(algorithm, config)}: {exc}", flush=True)
        return None


if __name__ == "__main__":
    main()
