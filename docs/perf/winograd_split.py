"""Winograd's configs on layers given as shape specs, every pass asked: each config's kernel-event
time (median of 10) and each of its kernels' own time (transforms, [pack], GEMM, finish), beside
the planner's first candidate and cuDNN's time in the same run (TF32 off, cudnn.benchmark).  On the
GPU machine:

    python docs/perf/winograd_split.py SPEC [PASSES] [N]   (N configs, default 8; OUTJ=file.json)

SPEC as `clconv bench` takes it (a descriptor, a layer file, a named set)."""
import json
import os
import sys

import torch

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.tools import shapes
from clconv.tools.timing import time_torch

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.benchmark = True


def cudnn_ms(g, pass_):
    n, c, o = g.batch, g.in_channels, g.out_channels
    x = torch.randn(n, c, *g.in_size[1:], device="cuda")
    w = torch.randn(o, c // g.groups, *g.kernel[1:], device="cuda")
    conv = dict(stride=g.stride[1:], padding=g.pad_begin[1:], dilation=g.dilation[1:], groups=g.groups)
    dy = torch.randn_like(torch.nn.functional.conv2d(x, w, **conv))
    calls = {
        "forward": lambda: torch.nn.functional.conv2d(x, w, **conv),
        "backward_data": lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, **conv),
        "backward_weight": lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, **conv),
    }
    return time_torch(torch, calls[pass_], 10, gpu=True)


def main():
    spec = sys.argv[1]
    passes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["forward", "backward_data", "backward_weight"]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    winograd = REGISTRY["winograd"]
    rows = []
    for layer in shapes.resolve_layers(spec, None):
        for pass_ in passes:
            problem = Problem(layer.geometry, pass_, "float32")
            first = planner.candidates(problem, q.device)[0]
            res = []
            for alg, cfg in [first] + [(winograd, c) for c in winograd.configs(problem, q.device)[:count]]:
                runner = planner.prepare(problem, alg, cfg, q)
                ops = runtime.random_operands(problem, prof)
                ms = 1e3 * runtime.time_runner(runner, prof, ops, 10)
                events = runner.run(prof, ops)
                events[-1].wait()
                split = [round((e.profile.end - e.profile.start) * 1e-6, 4) for e in events]
                res.append(dict(label=planner.label(alg, cfg), ms=ms, split=split))
            ref = cudnn_ms(layer.geometry, pass_)
            print(f"{layer.label[:36]:36s} {pass_:15s} cudnn {ref:.4f}", flush=True)
            for r in res:
                print(f"    {r['ms']:.4f} ({r['ms'] / ref:.2f}) {r['label'][:90]:90s} {r['split']}", flush=True)
            rows.append(dict(layer=layer.label, pass_=pass_, cudnn=ref, candidates=res))
    json.dump(rows, open(os.environ.get("OUTJ", "/dev/null"), "w"), indent=1)


if __name__ == "__main__":
    main()
