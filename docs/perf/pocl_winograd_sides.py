"""Winograd's first config of each tile side per layer and pass on this device (kernel ms, the
minimum over ROUNDS (4) interleaved rounds of ``time_runner(..., 3, min)``; ``*`` marks the side
the configs put first):

    POCL_MAX_PTHREAD_COUNT=2 PYTHONPATH=TREE python docs/perf/pocl_winograd_sides.py mb8ic96ih27oc256oh27kh5ph2 ...

PASSES (default all three) picks the passes.  docs/perf/pocl-f45.txt has the thirty-seventh
session's runs."""
import os
import sys

import clconv
from clconv import planner
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands, time_runner
from clconv.tools.shapes import parse_descriptor
queue = profiling_queue(clconv.default_queue())
w = REGISTRY["winograd"]
runs = []
for d in sys.argv[1:]:
    for pass_ in os.environ.get("PASSES", "forward,backward_data,backward_weight").split(","):
        problem = Problem(parse_descriptor(d).geometry, pass_, "float32")
        configs = w.configs(problem, queue.device)
        order = w.sides(problem, queue.device)
        for m in order:
            c = next(c for c in configs if c["m"] == m)
            runs.append((f"{d[:40]:40s} {pass_[:6]}{pass_[-2:]} m{m}{'*' if m == order[0] else ' '}", planner.prepare(problem, w, c, queue), random_operands(problem, queue)))
best = {n: float("inf") for n, _, _ in runs}
for _ in range(int(os.environ.get("ROUNDS", 4))):
    for n, r, o in runs:
        best[n] = min(best[n], time_runner(r, queue, o, 3, min) * 1e3)
for n, ms in best.items():
    print(f"{n} {ms:8.3f}")
