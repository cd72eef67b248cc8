"""The CPU weight gradient's dot-product GEMM (clc_gemm_dot) against the transposed-B GEMM over the
column buffer, per layer, on the default device: im2col's first configuration of each form (and
gemm1x1's for a 1x1 stride-1 layer), each runner's kernel time as pocl_winograd_vs_im2col.fastest
takes it (the minimum over ROUNDS interleaved rounds).  Prints which form the heuristic
puts first (gemm.with_dot_configs: DOT_MIN_STEPS, DOT_MIN_IMAGE_STEPS, DOT_MAX_ROWS) and the output pixels.

    POCL_MAX_PTHREAD_COUNT=2 python docs/perf/pocl_dot_vs_columns.py cpu
    POCL_MAX_PTHREAD_COUNT=2 python docs/perf/pocl_dot_vs_columns.py mb4ic64ih28oc64oh28kh3ph1 ...
"""
import sys

import clconv
from clconv import planner
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import is_dot_config
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands
from clconv.tools import shapes
from pocl_winograd_vs_im2col import fastest  # docs/perf/, beside this script


def main(specs: list[str]) -> None:
    queue = profiling_queue(clconv.default_queue())
    for spec in specs:
        for layer in shapes.resolve_layers(spec, None):
            problem = Problem(layer.geometry, "backward_weight", "float32")
            auto, auto_config = planner.candidates(problem, queue.device)[0]
            forms = {}
            for algorithm in (REGISTRY["im2col"], REGISTRY["gemm1x1"]):
                if algorithm.decline_reason(problem, queue.device) is not None:
                    continue
                for config in algorithm.configs(problem, queue.device):
                    form = f"{algorithm.name}-{'dot' if is_dot_config(config) else 'cols'}"
                    forms.setdefault(form, (algorithm, config))
            runners = [(form, planner.prepare(problem, a, c, queue)) for form, (a, c) in forms.items()]
            best = fastest(runners, queue, random_operands(problem, queue))
            first = f"{auto.name}-{'dot' if is_dot_config(auto_config) else 'cols'}"
            times = "  ".join(f"{form} {ms:.3f}" for form, ms in best.items())
            print(f"{layer.label[:32]:32s} px={layer.geometry.out_pixels:6d} first={first:12s} {times}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
