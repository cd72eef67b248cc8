"""Winograd's first config of each tile side per layer and pass on this device (kernel ms, the
minimum over ROUNDS (4) interleaved rounds of ``time_runner(..., 3, min)``; ``*`` marks the side
the configs put first):

    POCL_MAX_PTHREAD_COUNT=2 PYTHONPATH=TREE python docs/perf/pocl_winograd_sides.py mb8ic96ih27oc256oh27kh5ph2 ...

PASSES (default all three) picks the passes.  docs/perf/pocl-f45.txt has the thirty-seventh
session's runs."""
import os
import sys

from pocl_winograd_first_config import interleaved_best  # docs/perf/, beside this script

import clconv
from clconv import planner
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands
from clconv.tools.shapes import parse_descriptor


def main(descriptors: list[str]) -> None:
    queue = profiling_queue(clconv.default_queue())
    winograd = REGISTRY["winograd"]
    runs = []
    for descriptor in descriptors:
        for pass_ in os.environ.get("PASSES", "forward,backward_data,backward_weight").split(","):
            problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
            configs = winograd.configs(problem, queue.device)
            sides = winograd.sides(problem, queue.device)
            for m in sides:
                config = next(c for c in configs if c["m"] == m)
                name = f"{descriptor[:40]:40s} {pass_[:6]}{pass_[-2:]} m{m}{'*' if m == sides[0] else ' '}"
                runs.append((name, planner.prepare(problem, winograd, config, queue), random_operands(problem, queue)))
    for name, ms in interleaved_best(queue, runs, int(os.environ.get("ROUNDS", 4)), 3).items():
        print(f"{name} {ms:8.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
