"""Winograd's first two configs against im2col's first, per layer and pass, on the default device.

    POCL_MAX_PTHREAD_COUNT=2 python docs/perf/pocl_winograd_vs_im2col.py mb4ic128ih14oc128oh14kh3ph1 ...

Each runner's kernel time is the minimum over ROUNDS (4) interleaved rounds of
``time_runner(..., 5, min)`` in one process, so that a shared machine's drift hits all alike.  Prints
the 4x4 tiles over the batch (``t4``, what planner.CPU_WINOGRAD_MIN_TILES counts) and the heuristic's
first candidate.  PASSES (default ``forward,backward_data``) picks the passes; EVERY_SIDE=1 times
each tile side's first config instead of the first two configs.
"""
import os
import sys

import clconv
from clconv import planner
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands, time_runner
from clconv.tools.shapes import parse_descriptor


def fastest(runners: list, queue, operands) -> dict[str, float]:
    """Each (name, runner)'s kernel time in ms: the minimum over ROUNDS interleaved rounds of
    ``time_runner(..., 5, min)``, so that a shared machine's drift hits all alike."""
    best = {name: float("inf") for name, _ in runners}
    for _ in range(int(os.environ.get("ROUNDS", 4))):
        for name, runner in runners:
            best[name] = min(best[name], time_runner(runner, queue, operands, 5, min) * 1e3)
    return best


def main(descriptors: list[str]) -> None:
    queue = profiling_queue(clconv.default_queue())
    winograd, im2col = REGISTRY["winograd"], REGISTRY["im2col"]
    for descriptor in descriptors:
        for pass_ in os.environ.get("PASSES", "forward,backward_data").split(","):
            problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
            auto, auto_config = planner.candidates(problem, queue.device)[0]
            named = [(im2col, im2col.configs(problem, queue.device)[0])]
            configs = winograd.configs(problem, queue.device)
            if os.environ.get("EVERY_SIDE"):
                configs = list({config["m"]: config for config in reversed(configs)}.values())
            named += [(winograd, config) for config in configs[:None if os.environ.get("EVERY_SIDE") else 2]]
            runners = [(f"{a.name}{c.get('m', '')}", planner.prepare(problem, a, c, queue)) for a, c in named]
            best = fastest(runners, queue, random_operands(problem, queue))
            times = "  ".join(f"{name} {ms:.3f}" for name, ms in best.items())
            print(f"{descriptor:32s} {pass_[:8]:8s} t4={winograd.tiles(problem, 4):4d} "
                  f"auto={auto.name}{auto_config.get('m', '')} {times}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
