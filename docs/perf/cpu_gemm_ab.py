"""The CPU GEMM's column blocks and packed dy, as an A/B in one process: the heuristic's runner
against the same tile without column blocks and with the weight gradient's dy read in place,
8 interleaved rounds, the minimum of each (a shared machine's drift hits both alike).  Passes
where the two run the same kernels are left out.

    POCL_MAX_PTHREAD_COUNT=2 python docs/perf/cpu_gemm_ab.py mb2ic256ih7oc256oh7kh3ph1:forward,backward_data
"""
import collections
import math
import sys

import clconv
from clconv import planner, runtime
from clconv.algorithms import gemm
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor


def runners(problem, queue):
    """(before, after, what changed): the heuristic's first candidate now, and as it was."""
    algorithm, config = planner._first_candidate(problem, queue.device)
    after = planner.build(algorithm.plan(problem, config, queue.device), queue)
    saved = dict(gemm.MIN_SWEEPS_TO_PACK)
    gemm.MIN_SWEEPS_TO_PACK["a_grad_output_rows"] = 10**9  # dy read in place
    try:
        one_block = {k: v for k, v in config.items() if k not in ("NB", "KC")}
        before = planner.build(algorithm.plan(problem, one_block, queue.device), queue)
    finally:
        gemm.MIN_SWEEPS_TO_PACK.update(saved)
    packed = problem.pass_ == "backward_weight" and "apack" in after.workspaces
    what = " ".join(filter(None, [f"NB={config['NB']}" if "NB" in config else "", "dy packed" if packed else ""]))
    return before, after, what


def main(args):
    queue = runtime.profiling_queue(clconv.default_queue())
    cases = []
    for arg in args:
        descriptor, passes = arg.split(":")
        for pass_ in passes.split(","):
            problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
            before, after, what = runners(problem, queue)
            if what:
                cases.append((f"{descriptor} {pass_}", what, runtime.random_operands(problem, queue), before, after))
    best = collections.defaultdict(lambda: math.inf)
    for round_ in range(8):
        for name, _, operands, before, after in cases:
            for label, runner in (("before", before), ("after", after))[:: 1 if round_ % 2 else -1]:
                best[name, label] = min(best[name, label], runtime.time_runner(runner, queue, operands, 3, min))
    ratios = []
    for name, what, *_ in cases:
        a, b = best[name, "before"], best[name, "after"]
        ratios.append(b / a)
        print(f"{name:52s} {what:16s} {1e3 * a:8.3f} -> {1e3 * b:8.3f} ms ({b / a:.2f})")
    if ratios:
        print(f"geometric mean after/before over {len(ratios)}: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
