"""Winograd on a CPU against the CPU heuristic's choice, per layer-pass, in one process: every
candidate built once, then timed in interleaved rounds (the order reversed every other round), the
minimum of each kept (a shared machine's drift hits all alike); with PyTorch CPU's time where it is
importable (the same rounds), and each Winograd config's time split into its kernels.

    POCL_MAX_PTHREAD_COUNT=2 OMP_NUM_THREADS=2 /tmp/torchvenv/bin/python docs/perf/winograd_cpu.py \
        [--rounds 6] [--configs 4] [--json out.json] DESCRIPTOR[:PASSES] ...

PASSES is a comma-separated list of forward, backward_data, backward_weight (default all three).
"""
import argparse
import collections
import json
import math
import sys

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor

PASSES = ("forward", "backward_data", "backward_weight")


def _short(config):
    keys = ("m", "WM", "VN", "NB", "TM", "TN", "splits")
    return ",".join(f"{k}={config[k]}" for k in keys if k in config)


def _torch_callable(torch, problem, operands_host):
    from clconv.tools import libraries
    tensors = libraries.torch_device_tensors(torch, operands_host, False)
    return libraries.torch_fn(torch, problem.geometry, problem.pass_, tensors)


def _time_torch(fn, repeats=3):
    import time
    best = math.inf
    fn()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _kernel_times(runner, queue, operands):
    events = runner.run(queue, operands)
    queue.finish()
    return [(e.profile.end - e.profile.start) * 1e-9 for e in events]


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--configs", type=int, default=4, help="Winograd configs per pass (its own order)")
    parser.add_argument("--heuristic-configs", type=int, default=1, help="configs of the heuristic's algorithm")
    parser.add_argument("--extra", action="append", default=[],
                        help="ALGORITHM:KEY=VALUE,... one more candidate (e.g. im2col:LOCAL=0,WM=8,VN=16,LX=8)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    try:
        import numpy as np
        import torch
        torch.set_num_threads(int(__import__("os").environ.get("OMP_NUM_THREADS", "2")))
    except ImportError:
        torch = None
    queue = runtime.profiling_queue(clconv.default_queue())
    device = queue.device
    cases = []  # (name, problem, operands, {label: runner}, torch fn)
    for arg in args.cases:
        descriptor, _, passes = arg.partition(":")
        for pass_ in (passes.split(",") if passes else PASSES):
            problem = Problem(parse_descriptor(descriptor).geometry, pass_, "float32")
            algorithm, config = planner._first_candidate(problem, device)
            runners = {f"heuristic {algorithm.name} {_short(config)}": planner.prepare(problem, algorithm, config, queue)}
            for c in algorithm.configs(problem, device)[1:args.heuristic_configs]:
                runners[f"{algorithm.name} {_short(c)}"] = planner.prepare(problem, algorithm, c, queue)
            for extra in args.extra:
                name, _, keys = extra.partition(":")
                c = {k: int(v) for k, v in (kv.split("=") for kv in keys.split(","))}
                if REGISTRY[name].decline_reason(problem, device) is None:
                    runners[f"{name} {_short(c)}"] = planner.prepare(problem, REGISTRY[name], c, queue)
            wino = REGISTRY["winograd"]
            if wino.decline_reason(problem, device) is None:
                for c in wino.configs(problem, device)[:args.configs]:
                    runners[f"winograd {_short(c)}"] = planner.prepare(problem, wino, c, queue)
            operands = runtime.random_operands(problem, queue)
            fn = None
            if torch is not None:
                g, rng = problem.geometry, np.random.default_rng(0)
                host = {"x": rng.standard_normal(g.input_shape).astype(np.float32),
                        "w": rng.standard_normal(g.weight_shape).astype(np.float32),
                        "dy": rng.standard_normal(g.output_shape).astype(np.float32)}
                try:
                    fn = _torch_callable(torch, problem, host)
                except ValueError:  # asymmetric padding: PyTorch has no such convolution
                    fn = None
            cases.append((f"{descriptor} {pass_}", problem, operands, runners, fn))
            print("prepared", cases[-1][0], file=sys.stderr, flush=True)
    best = collections.defaultdict(lambda: math.inf)
    pieces = {}
    for round_ in range(args.rounds):
        for name, _problem, operands, runners, fn in cases:
            items = list(runners.items())
            for label, runner in items[:: 1 if round_ % 2 else -1]:
                t = runtime.time_runner(runner, queue, operands, 3, min)
                if t < best[name, label]:
                    best[name, label] = t
                    pieces[name, label] = _kernel_times(runner, queue, operands)
            if fn is not None:
                best[name, "pytorch"] = min(best[name, "pytorch"], _time_torch(fn))
    out = []
    for name, problem, _operands, runners, fn in cases:
        base = next(iter(runners))
        print(f"\n{name}  (flops {problem.geometry.flops / 1e6:.0f} M)")
        rows = list(runners) + (["pytorch"] if fn is not None else [])
        for label in rows:
            t = best[name, label]
            split = " ".join(f"{1e3 * p:.3f}" for p in pieces.get((name, label), []))
            print(f"  {label:60s} {1e3 * t:8.3f} ms  {t / best[name, base]:5.2f}x  [{split}]")
        out.append({"case": name, "ms": {label: 1e3 * best[name, label] for label in rows},
                    "kernels_ms": {label: [1e3 * p for p in pieces.get((name, label), [])] for label in runners}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device.name, "rounds": args.rounds, "cases": out}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
