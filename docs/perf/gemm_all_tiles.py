"""Every GPU tile of the GEMM core on the layer-passes of the heuristic check's seven sets: for each
layer-pass whose heuristic choice (``planner.candidates``' first) is a GEMM-tiled algorithm, that
algorithm's configuration with each tile of GPU_TILES in its place (the other keys as the algorithm
derives them for that tile: split-K's and Winograd's piece counts; Winograd both of its tile sizes),
kernel time from profiling events, the median of TUNE_REPEATS, built eight at a time as tuning does.
The data to judge a tile order against (docs/perf/heuristic_check.py judges only what tuning timed,
the first four tiles of each algorithm).

    python docs/perf/gemm_all_tiles.py OUT.json [SET...]       on the GPU machine (SET: heuristic_check's
                                                                names, or a shape file or descriptor)
    python docs/perf/gemm_all_tiles.py --pointwise-weight OUT.json [SET...]
                                                                only 1x1 layers' weight gradients (re-timing
                                                                them after their kernel changed)
    python docs/perf/gemm_all_tiles.py --only ALGORITHM:PASS OUT.json [SET...]
                                                                only the layer-passes of PASS the heuristic
                                                                gives ALGORITHM (re-timing them)
"""
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import heuristic_check  # docs/perf/, beside this script

import clconv
from clconv import planner, runtime
from clconv.algorithms import gemm, im2col, implicit_gemm, splitk, winograd
from clconv.plan import Problem
from clconv.tools import shapes


def every_tile(original):
    """``gemm_tiles`` with every GPU tile that fits, in its order (no limit)."""
    def tiles(*args, **kwargs):
        kwargs["limit"] = len(gemm.GPU_TILES)
        return original(*args, **kwargs)
    return tiles


def main():
    args = sys.argv[1:]
    pointwise_weight = "--pointwise-weight" in args
    args = [a for a in args if a != "--pointwise-weight"]
    only = None
    if "--only" in args:
        at = args.index("--only")
        only = tuple(args[at + 1].split(":"))
        del args[at:at + 2]
    out, names = args[0], args[1:] or list(heuristic_check.SETS)
    for module in (splitk, winograd, implicit_gemm, im2col):  # the algorithms' own references
        module.gemm_tiles = every_tile(gemm.gemm_tiles)
    # split-K and Winograd's weight gradient rank every tile, then keep the first TILE_CANDIDATES:
    # keep them all (the stored run h200-all-tiles-a.json had split-K's first four only)
    splitk.TILE_CANDIDATES = winograd.TILE_CANDIDATES = len(gemm.GPU_TILES)
    heuristic_check.with_workspace_limit()
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    rows, start = [], time.perf_counter()
    for name in names:
        # a set of heuristic_check's, or shapes as `clconv bench` takes them (a file, descriptors)
        specs, batch, _ = heuristic_check.SETS.get(name, ([name], None, None))
        for spec in specs:
            for layer in shapes.resolve_layers(spec, batch):
                for pass_ in ("forward", "backward_data", "backward_weight"):
                    if pointwise_weight and not (pass_ == "backward_weight" and layer.geometry.is_pointwise):
                        continue
                    problem = Problem(layer.geometry, pass_, "float32")
                    algorithm, chosen = planner.candidates(problem, q.device)[0]
                    if "TM" not in chosen or (only and (algorithm.name, pass_) != only):
                        continue
                    configs = algorithm.configs(problem, q.device)

                    def build(config, problem=problem, algorithm=algorithm):
                        try:
                            planner.prepare(problem, algorithm, config, q)
                        except Exception:  # noqa: BLE001 - timed (and reported) below
                            pass
                    with ThreadPoolExecutor(8) as pool:
                        list(pool.map(build, configs))
                    ops = runtime.random_operands(problem, prof)
                    times = {}
                    for config in configs:
                        try:
                            runner = planner.prepare(problem, algorithm, config, q)
                            times[planner.label(algorithm, config)] = round(1e3 * runtime.time_runner(runner, prof, ops, 5), 4)
                        except Exception as exc:  # noqa: BLE001 - a tile the layer or device refuses
                            print(f"   {planner.label(algorithm, config)}: {type(exc).__name__}", flush=True)
                    rows.append({"set": name, "layer": layer.label, "pass": pass_, "algorithm": algorithm.name,
                                 "chosen": planner.label(algorithm, chosen), "times_ms": times})
                    best = min(times.values())
                    print(f"{time.perf_counter() - start:6.0f}s {layer.label[:30]:30s} {pass_[:8]:8s} {algorithm.name:13s} "
                          f"{len(times):2d} tiles, chosen {times.get(planner.label(algorithm, chosen), float('nan')) / best:.2f}",
                          flush=True)
                    with open(out, "w") as handle:  # kept as it goes: a run cut short keeps its rows
                        json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
