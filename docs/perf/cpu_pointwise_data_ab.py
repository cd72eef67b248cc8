"""gemm1x1's 1x1 stride-1 data gradient on a CPU device: W^T and dy read in place as matrices
(gemm.pointwise_data_shape, since 2026-12-04) against the implicit GEMM's gather view with one tap
it ran through before, the heuristic's first configuration of each, in one process, 8 interleaved
rounds, the minimum of each.

    POCL_MAX_PTHREAD_COUNT=2 python docs/perf/cpu_pointwise_data_ab.py [DESCRIPTOR ...]
"""
import sys

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY, gemm, implicit_gemm
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor

LAYERS = ["mb32ic256ih28oc64oh28kh1ph0", "mb32ic64ih56oc256oh56kh1ph0", "mb8ic1024ih14oc256oh14kh1ph0",
          "mb1ic512ih7oc2048oh7kh1ph0", "mb16ic40ih28oc240oh28kh1ph0"]
ROUNDS = 8


def runner(problem, queue, old: bool):
    """The heuristic's first gemm1x1 configuration, with the old (gather) view where ``old``."""
    saved = implicit_gemm.pointwise_data_shape
    if old:
        implicit_gemm.pointwise_data_shape = lambda g: gemm.backward_data_shape(g)
    try:
        algorithm = REGISTRY["gemm1x1"]
        config = algorithm.configs(problem, queue.device)[0]
        planner._runners.clear()
        return planner.prepare(problem, algorithm, config, queue)
    finally:
        implicit_gemm.pointwise_data_shape = saved


def main():
    q = clconv.default_queue()
    print(f"{q.device.name.strip()}; ms, the minimum of {ROUNDS} rounds")
    for descriptor in sys.argv[1:] or LAYERS:
        problem = Problem(parse_descriptor(descriptor).geometry, "backward_data", "float32")
        new, old = runner(problem, q, False), runner(problem, q, True)
        operands = runtime.random_operands(problem, q)
        times = {"new": [], "old": []}
        for _ in range(ROUNDS):
            for name, r in (("new", new), ("old", old)):
                times[name].append(runtime.time_runner(r, q, operands, 5))
        t_new, t_old = min(times["new"]) * 1e3, min(times["old"]) * 1e3
        print(f"{descriptor:34s} in place {t_new:8.3f}  gather {t_old:8.3f}  ratio {t_new / t_old:.2f}", flush=True)


if __name__ == "__main__":
    main()
