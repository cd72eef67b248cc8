"""im2col's CPU column-buffer cap per launch (Im2col.CPU_COLUMN_BYTES) at 1, 2, 4 and 8 MiB for one
layer-pass, the heuristic's algorithm and config, on the default device.

    POCL_MAX_PTHREAD_COUNT=2 python docs/perf/pocl_column_chunks.py mb4ic64ih28oc64oh28kh3ph1 backward_weight

Kernel ms, the minimum over 8 interleaved rounds of ``time_runner(..., 5, min)`` in one process; with
the shared-cache term (Im2col.CPU_SHARED_CACHE_SHARE) set to 0 so that the cap alone decides.
"""
import sys

import clconv
from clconv import planner
from clconv.algorithms.im2col import Im2col
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands, time_runner
from clconv.tools.shapes import parse_descriptor


def main(descriptor: str, pass_: str) -> None:
    queue = profiling_queue(clconv.default_queue())
    problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
    algorithm, config = planner.candidates(problem, queue.device)[0]
    Im2col.CPU_SHARED_CACHE_SHARE = 1 << 60  # the cap alone
    runners = []
    for mib in (1, 2, 4, 8):
        Im2col.CPU_COLUMN_BYTES = mib << 20
        runner = planner.build(algorithm.plan(problem, config, queue.device), queue)
        chunks = sum(launch.call.entry.startswith("clc_gemm") for launch in runner.launches)
        runners.append((f"cap {mib} MiB, {chunks} GEMM launches", runner))
    operands = random_operands(problem, queue)
    best = {name: float("inf") for name, _ in runners}
    for _ in range(8):
        for name, runner in runners:
            best[name] = min(best[name], time_runner(runner, queue, operands, 5, min) * 1e3)
    print(descriptor, pass_, algorithm.name, config)
    for name, ms in best.items():
        print(f"  {ms:.3f}  {name}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
