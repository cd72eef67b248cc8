"""direct.taps_first judged on a list of weight-gradient layers: for each, the CPU heuristic's first
candidate before the rule (the first that is not `direct`: im2col, winograd, ...; "old"), its first
candidate now ("new": direct's taps where the rule holds, else the same), every taps configuration
offered, and PyTorch CPU's torch.nn.grad.convNd_weight; each the minimum over ROUNDS rounds (of 5
runs each for clconv's kernel-event times, 3 for PyTorch's wall time), interleaved in one process.
One JSON line per layer to OUT, a line of text per layer to stdout.

    cd /tmp && PYTHONPATH=REPO POCL_MAX_PTHREAD_COUNT=2 python REPO/docs/perf/pocl_taps_judge.py OUT.jsonl LIST...

(LIST: a shape file or descriptors, as ``clconv bench`` takes; docs/perf/pocl-taps-design-layers.txt,
the layers the rule was written from, and docs/perf/pocl-taps-holdout-layers.txt, written before it
was measured.)"""
import json
import math
import os
import sys
import time

import torch

import clconv
from clconv import planner
from clconv.algorithms import REGISTRY
from clconv.algorithms.direct import taps_configs, taps_first
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands, time_runner
from clconv.tools import shapes
torch.set_num_threads(2)
q = profiling_queue(clconv.default_queue())
ROUNDS = int(os.environ.get("ROUNDS", 3))
out = open(sys.argv[1], "a")
ratios, best_ratios = [], []
for spec in sys.argv[2:]:
  for layer in shapes.resolve_layers(spec, None):
    g = layer.geometry
    problem = Problem(g, "backward_weight", "float32")
    cands = planner.candidates(problem, q.device)
    old = next((a, c) for a, c in cands if a.name != "direct")
    new = cands[0]
    runners = {"old": planner.prepare(problem, *old, q), "new": planner.prepare(problem, *new, q)}
    for i, c in enumerate(taps_configs(problem, q.device)):
        runners[f"taps{i}"] = planner.prepare(problem, REGISTRY["direct"], c, q)
    ops = random_operands(problem, q)
    best = {n: 1e9 for n in runners}
    nd = g.ndim
    x = torch.randn(g.batch, g.in_channels, *g.in_size[3 - nd:])
    wshape = (g.out_channels, g.cin_per_group, *g.kernel[3 - nd:])
    kw = dict(stride=g.stride[3 - nd:], padding=g.pad_begin[3 - nd:], dilation=g.dilation[3 - nd:], groups=g.groups)
    y = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[nd]
    gw = {1: torch.nn.grad.conv1d_weight, 2: torch.nn.grad.conv2d_weight, 3: torch.nn.grad.conv3d_weight}[nd]
    dy = torch.randn(y(x, torch.randn(wshape), **kw).shape)
    tt = 1e9
    for _ in range(ROUNDS):
        for n, r in runners.items():
            best[n] = min(best[n], time_runner(r, q, ops, 5, min) * 1e3)
        for _ in range(3):
            t = time.perf_counter()
            gw(x, wshape, dy, **kw)
            tt = min(tt, (time.perf_counter() - t) * 1e3)
    row = {"layer": layer.descriptor, "tag": g.tag(), "old": f"{old[0].name} {old[1]}", "new": f"{new[0].name} {new[1]}",
           "taps_first": taps_first(problem, q.device), "torch_ms": tt, "ms": best}
    out.write(json.dumps(row) + "\n")
    out.flush()
    r = best["new"] / best["old"]
    ratios.append(r)
    print(f"{layer.descriptor[:42]:42s} {'TAPS' if row['taps_first'] else '    '} old {best['old']:7.3f} new {best['new']:7.3f} new/old {r:.2f}  "
          f"new/torch {best['new'] / tt:.2f} old/torch {best['old'] / tt:.2f}  best taps {min([v for k, v in best.items() if k.startswith('taps')] or [0]):.3f}", flush=True)
print(f"new/old geomean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} over {len(ratios)}")
