"""3x3 stride-1 layers, every pass: each candidate the planner offers plus winograd's first eight
configs (four of each tile side) (kernel-event ms, median of 10), winograd's per-kernel split, and cuDNN's time in the same
run (TF32 off, cudnn.benchmark).  On the GPU machine:

    python docs/perf/winograd_configs.py [PASSES]   (OUTJ=file.json for the rows; ONLY=substring)

docs/perf/h200-winograd.json is one run's rows (docs/performance.md, "Winograd on the GEMM core")."""
import json
import os
import sys

import torch

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.resolve import resolve_conv
from clconv.tools.timing import time_torch

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.benchmark = True
LAYERS = [  # batch, input channels, image side, output channels
    (32, 64, 56, 64), (32, 128, 28, 128), (32, 256, 14, 256), (32, 512, 7, 512),
    (64, 96, 25, 192), (64, 192, 13, 128), (64, 160, 7, 320),
    (1, 256, 14, 256), (1, 512, 7, 512), (16, 64, 128, 64), (8, 128, 28, 128), (4, 32, 64, 48),
]


def cudnn_ms(pass_, n, c, s, o):
    x = torch.randn(n, c, s, s, device="cuda")
    w = torch.randn(o, c, 3, 3, device="cuda")
    dy = torch.randn_like(torch.nn.functional.conv2d(x, w, padding=1))
    calls = {
        "forward": lambda: torch.nn.functional.conv2d(x, w, padding=1),
        "backward_data": lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, padding=1),
        "backward_weight": lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1),
    }
    return cuda_ms(calls[pass_])


def cuda_ms(f, repeats=10):
    """Median ms of ``f()`` by CUDA events (clconv bench's own PyTorch timing)."""
    return time_torch(torch, f, repeats, gpu=True)


def main():
    q = clconv.default_queue()
    dev = q.device
    prof = runtime.profiling_queue(q)
    only = os.environ.get("ONLY")
    passes = sys.argv[1].split(",") if len(sys.argv) > 1 else ["forward", "backward_data", "backward_weight"]
    others = os.environ.get("OTHERS", "1") == "1"  # OTHERS=0: winograd's configs only
    winograd = REGISTRY["winograd"]
    rows = []
    for n, c, s, o in LAYERS:
        name = f"n{n} {c}->{o} {s}x{s}"
        if only and only not in name:
            continue
        g = resolve_conv(2, (n, c, s, s), (o, c, 3, 3), None, 1, 1, 1, 1).geometry
        for pass_ in passes:
            problem = Problem(g, pass_, "float32")
            extra = [(winograd, cfg) for cfg in winograd.configs(problem, dev)[:8]]
            seen, res = set(), []
            for i, (alg, cfg) in enumerate(planner.candidates(problem, dev) + extra):
                lab = planner.label(alg, cfg)
                if lab in seen or (not others and alg is not winograd):
                    continue
                seen.add(lab)
                try:
                    runner = planner.prepare(problem, alg, cfg, q)
                    ops = runtime.random_operands(problem, prof)
                    ms = 1e3 * runtime.time_runner(runner, prof, ops, 10)
                    split = ""
                    if alg.name == "winograd":  # each kernel's own time
                        events = runner.run(prof, ops)
                        events[-1].wait()
                        split = " ".join(f"{(e.profile.end - e.profile.start) * 1e-6:.4f}" for e in events)
                    res.append((ms, lab, i, split))
                except Exception as exc:  # a candidate that fails is reported, not fatal
                    res.append((float("inf"), f"{lab} FAIL {type(exc).__name__}: {str(exc)[:100]}", i, ""))
            ref = cudnn_ms(pass_, n, c, s, o)
            first, best = min(res, key=lambda r: r[2]), min(res)
            print(f"{name:22s} {pass_:15s} cudnn {ref:.4f} | first {first[0]:.4f} ({first[0] / ref:.2f}) {first[1][:60]}"
                  f" | best {best[0]:.4f} ({best[0] / ref:.2f}) {best[1][:60]}", flush=True)
            for r in sorted(res):
                print(f"      {r[0]:.4f} {r[1][:110]} {r[3]}", flush=True)
            rows.append(dict(layer=name, pass_=pass_, cudnn=ref, cands=res))
    json.dump(rows, open(os.environ.get("OUTJ", "/dev/null"), "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
