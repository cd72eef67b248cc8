"""Winograd's first config (or, with AUTO=1, the heuristic's first candidate) per layer and pass.

    POCL_MAX_PTHREAD_COUNT=2 PYTHONPATH=TREE python docs/perf/pocl_winograd_first_config.py mb4ic64ih28oc64oh28kh3ph1 ...

For A/Bs of two checkouts: run it from each in turn (alternating processes).  Kernel ms, the minimum
over ROUNDS (5) interleaved rounds of ``time_runner(..., 5, min)``; PASSES (default
``forward,backward_data``) picks the passes.
"""
import os
import sys

import clconv
from clconv import planner
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands, time_runner
from clconv.tools.shapes import parse_descriptor


def main(descriptors: list[str]) -> None:
    queue = profiling_queue(clconv.default_queue())
    runs = []
    for descriptor in descriptors:
        for pass_ in os.environ.get("PASSES", "forward,backward_data").split(","):
            problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
            if os.environ.get("AUTO"):
                algorithm, config = planner.candidates(problem, queue.device)[0]
            else:
                algorithm = REGISTRY["winograd"]
                config = algorithm.configs(problem, queue.device)[0]
            runs.append((f"{descriptor} {pass_[:5]} {algorithm.name}", planner.prepare(problem, algorithm, config, queue),
                         random_operands(problem, queue)))
    for name, ms in interleaved_best(queue, runs, int(os.environ.get("ROUNDS", 5)), 5).items():
        print(f"{name:50s} {ms:.3f}")


def interleaved_best(queue, runs: list, rounds: int, repeats: int) -> dict[str, float]:
    """Each (name, runner, operands) of ``runs``: the least kernel ms over ``rounds`` rounds that
    take every run in turn, each ``time_runner(..., repeats, min)``."""
    best = {name: float("inf") for name, _, _ in runs}
    for _ in range(rounds):
        for name, runner, operands in runs:
            best[name] = min(best[name], time_runner(runner, queue, operands, repeats, min) * 1e3)
    return best


if __name__ == "__main__":
    main(sys.argv[1:])
