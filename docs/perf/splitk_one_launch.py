"""Split-K in one launch (the last piece of each output tile sums them: gemm.mako's FINISH) against
the two launches before it (the GEMM, then clc_splitk_sum / clc_splitk_result), on every layer-pass
of the lists given that split-K serves with a GPU tile:

* the results bit for bit, every round (the same sums in the same order), into NaN-poisoned
  results, and against the float64 reference once;
* kernel-event time of a run (first launch's start to last launch's end), one launch whatever its
  last piece's sum (SplitK.plan's one_launch=True), the minimum of ``--rounds`` interleaved rounds
  of 10 runs each;
* whether the heuristic's first candidate is split-K (those are the calls a default stream makes);
* the fences and atomics NVIDIA's compiler emitted for the one-launch kernel (its PTX).

    python docs/perf/splitk_one_launch.py OUT.json LIST... [--rounds 5]   (LIST: a file or a named set)
"""
import argparse
import json
import math
import re
import sys

import numpy as np
import pyopencl as cl

import clconv
from clconv import planner, reference, runtime
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import is_cpu_config
from clconv.dtypes import numpy_dtype
from clconv.passes import PASSES
from clconv.plan import Problem
from clconv.tools.shapes import resolve_layers


def _plan(problem, config, device, one_launch):
    """split-K's plan with its pieces summed in the GEMM's launch whatever the sum's length
    (the rows the rule, FINISH_MAX_LOADS, leaves out are measured too), or by a second kernel."""
    return REGISTRY["splitk"].plan(problem, config, device, one_launch=one_launch)


def _result(queue, runner, operands, role):
    buffer = operands[role].buffer
    cl.enqueue_fill_buffer(queue, buffer, np.float32(np.nan), 0, buffer.size)
    runner.run(queue, operands)
    host = np.empty(buffer.size // 4, np.float32)
    cl.enqueue_copy(queue, host, buffer)
    return host


def _ptx_lines(runner):
    binary = runner.launches[0].kernel.program.get_info(cl.program_info.BINARIES)[0]
    text = binary.decode("latin-1", "replace")  # PTX on NVIDIA's driver; other drivers' binaries give nothing
    lines = (line.strip() for line in text.splitlines())
    return sorted({line for line in lines if re.search(r"membar|fence|atom", line) and len(line) < 160 and line.isprintable()})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("lists", nargs="+")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    queue = runtime.profiling_queue(clconv.default_queue())
    device = queue.device
    rows, ptx = [], None
    for path in args.lists:
        for layer in resolve_layers(path):
            for pass_ in PASSES:
                problem = Problem(layer.geometry, pass_, "float32", bias=pass_ != "backward_weight")
                splitk = REGISTRY["splitk"]
                if splitk.decline_reason(problem, device) is not None:
                    continue
                config = splitk.configs(problem, device)[0]
                if is_cpu_config(config):
                    continue
                one = planner.build(_plan(problem, config, device, True), queue)
                two = planner.build(_plan(problem, config, device, False), queue)
                if ptx is None:
                    ptx = _ptx_lines(one)
                    with open(args.out + ".bin", "wb") as f:  # the whole program binary (PTX on NVIDIA)
                        f.write(one.launches[0].kernel.program.get_info(cl.program_info.BINARIES)[0])
                operands = runtime.random_operands(problem, queue, seed=len(rows))
                role = problem.spec.result
                equal = True
                for _ in range(args.rounds):
                    a, b = _result(queue, one, operands, role), _result(queue, two, operands, role)
                    equal &= bool(np.array_equal(a, b)) and not np.isnan(a).any()
                # once against the float64 reference
                shaped = {}
                for r in (*problem.spec.inputs, *(["bias"] if problem.bias else [])):
                    shape = problem.spec.shape(r, problem.geometry)
                    shaped[r] = np.empty(shape, numpy_dtype(problem.dtype))
                    cl.enqueue_copy(queue, shaped[r], operands[r].buffer)
                want = reference.run_pass(pass_, problem.geometry, *(shaped[r].astype(np.float64) for r in problem.spec.inputs),
                                          shaped["bias"].astype(np.float64) if problem.bias else None)
                got = a[:want.size].reshape(want.shape)
                error = float(np.max(np.abs(got - want)) / max(1e-30, float(np.max(np.abs(want)))))
                best = {"one": math.inf, "two": math.inf}
                for _ in range(args.rounds):
                    for name, runner in (("one", one), ("two", two)):
                        best[name] = min(best[name], runtime.time_runner(runner, queue, operands, 10, min))
                first, first_config = planner._first_candidate(problem, device)
                row = {"layer": layer.label, "pass": pass_, "config": config, "bitwise_equal": equal,
                       "max_rel_error": error, "one_ms": best["one"] * 1e3, "two_ms": best["two"] * 1e3,
                       "ratio": best["one"] / best["two"], "heuristic_splitk": first.name == "splitk",
                       "rule_one_launch": splitk.one_launch(problem, config, device)}
                rows.append(row)
                print(f"{layer.label:40s} {pass_:16s} splits {config['splits']:3d} equal {equal} err {error:.1e} "
                      f"one {row['one_ms']:.4f} two {row['two_ms']:.4f} ms  {row['ratio']:.3f}"
                      f"{'  (heuristic)' if row['heuristic_splitk'] else ''}{'  (rule: one launch)' if row['rule_one_launch'] else ''}",
                      flush=True)
    def geomean(values):
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
    summary = {"rows": len(rows), "all_equal": all(r["bitwise_equal"] for r in rows),
               "geomean_ratio": geomean([r["ratio"] for r in rows]),
               "geomean_ratio_heuristic": geomean([r["ratio"] for r in rows if r["heuristic_splitk"]]),
               "worst_ratio": max((r["ratio"] for r in rows), default=float("nan")),
               "geomean_ratio_rule": geomean([r["ratio"] for r in rows if r["rule_one_launch"]]),
               "rule_rows": sum(r["rule_one_launch"] for r in rows),
               "ptx": ptx, "device": device.name, "driver": device.driver_version}
    print(json.dumps({k: v for k, v in summary.items()}, indent=1))
    with open(args.out, "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    return 0 if summary["all_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
