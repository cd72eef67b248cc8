"""Host time per call of one forward in each algorithm (issue 12's host-bound streams): where a
tiny pass's stream of default calls is bound by the host, an algorithm whose kernel is faster can
still lose.  Per call, in a stream of CALLS calls with one sync, the best of 5 streams and 3 alternations
(host_stubbed.host_figures, profiled_us):

* ``op``: ``clconv.conv*d(..., algorithm=NAME)`` (NAME ``auto``: the default path);
* ``stubbed``: the same with ``Runner._enqueue`` a stub that enqueues nothing (clconv's Python and
  the result's allocation from the pool): ``op`` less this is what the launches cost the host;
* ``runner``: the algorithm's runner alone on fixed operands (its launches' enqueues);
* ``span``: the runner's kernels on a profiling queue, back to back, first start to last end.

    python docs/perf/host_per_algorithm.py [--algorithms auto,gemm1x1,splitk] DESCRIPTOR...
(on the GPU machine after ``. .gpu/opencl-on-gpu.sh``, started outside the repo root)."""
import argparse
import json
import os

import numpy as np
import pyopencl.array as cla

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor
from host_stubbed import host_figures, profiled_us  # docs/perf/, beside this script

CALLS = int(os.environ.get("CALLS", 400))
OPS = {1: clconv.conv1d, 2: clconv.conv2d, 3: clconv.conv3d}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("descriptors", nargs="+")
    parser.add_argument("--algorithms", default="auto,gemm1x1,splitk")
    parser.add_argument("--json")
    args = parser.parse_args()
    queue = clconv.default_queue()
    rng = np.random.default_rng(0)
    out = []
    for descriptor in args.descriptors:
        g = parse_descriptor(descriptor).geometry
        x = cla.to_device(queue, rng.standard_normal(g.input_shape).astype(np.float32))
        w = cla.to_device(queue, rng.standard_normal(g.weight_shape).astype(np.float32))
        y = cla.to_device(queue, rng.standard_normal(g.output_shape).astype(np.float32))
        op = OPS[g.ndim]
        stride, padding = g.stride[-g.ndim:], g.pad_begin[-g.ndim:]  # symmetric padding only
        problem = Problem(g, "forward", "float32")
        for name in args.algorithms.split(","):
            if name == "auto":
                runner = planner.plan(problem, queue)
            else:
                algorithm = REGISTRY[name]
                configs = [] if algorithm.decline_reason(problem, queue.device) else algorithm.configs(problem, queue.device)
                if not configs:
                    print(f"{descriptor[:36]:36s} {name:8s} serves no config here")
                    continue
                runner = planner.prepare(problem, algorithm, configs[0], queue)

            def call(op=op, x=x, w=w, stride=stride, padding=padding, name=name):
                return op(x, w, stride=stride, padding=padding, algorithm=name)
            operands = {"x": runtime.Operand(x.base_data, 0), "w": runtime.Operand(w.base_data, 0),
                        "y": runtime.Operand(y.base_data, 0)}
            figures = host_figures(call, runner, operands, queue, CALLS)
            span, _ = profiled_us(runner, operands, queue, CALLS)
            row = {"layer": descriptor, "algorithm": name, "label": runner.label, "launches": len(runner.launches),
                   "workspaces": sorted(runner.workspaces), **{k: round(v, 2) for k, v in figures.items()},
                   "span": round(span, 2)}
            out.append(row)
            print(f"{descriptor[:36]:36s} {name:8s} {runner.label[:40]:40s} launches {row['launches']} "
                  f"op {row['op']:6.1f}  stubbed {row['stubbed']:6.1f}  runner {row['runner']:6.1f}  "
                  f"span {row['span']:6.1f} us per call", flush=True)
            if args.json:
                json.dump(out, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
