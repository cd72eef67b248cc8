"""3x3 stride-1 layers, every pass: each winograd config and the heuristic's first candidate and
the best candidate (kernel-event ms, median of 10), winograd's per-kernel split, and cuDNN's time."""
import sys, json, os
import numpy as np
import clconv, torch
from clconv import planner, runtime
from clconv.plan import Problem
from clconv.resolve import resolve_conv
from clconv.algorithms import REGISTRY

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.benchmark = True
q = clconv.default_queue(); dev = q.device
prof = runtime.profiling_queue(q)
LAYERS = [  # n, c, size, o
    (32, 64, 56, 64), (32, 128, 28, 128), (32, 256, 14, 256), (32, 512, 7, 512),
    (64, 96, 25, 192), (64, 192, 13, 128), (64, 160, 7, 320),
    (1, 256, 14, 256), (1, 512, 7, 512), (16, 64, 128, 64), (8, 128, 28, 128), (4, 32, 64, 48),
]
only = os.environ.get("ONLY")
passes = sys.argv[1].split(",") if len(sys.argv) > 1 else ["forward", "backward_data", "backward_weight"]
ALL = os.environ.get("ALL", "1") == "1"

def cudnn_ms(pass_, n, c, s, o):
    x = torch.randn(n, c, s, s, device="cuda"); w = torch.randn(o, c, 3, 3, device="cuda")
    y = torch.nn.functional.conv2d(x, w, padding=1)
    dy = torch.randn_like(y)
    if pass_ == "forward": f = lambda: torch.nn.functional.conv2d(x, w, padding=1)
    elif pass_ == "backward_data": f = lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, padding=1)
    else: f = lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1)
    for _ in range(3): f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return float(np.median(ts))

rows = []
for (n, c, s, o) in LAYERS:
    name = f"n{n} {c}->{o} {s}x{s}"
    if only and only not in name: continue
    g = resolve_conv(2, (n, c, s, s), (o, c, 3, 3), None, 1, 1, 1, 1).geometry
    for pass_ in passes:
        problem = Problem(g, pass_, "float32")
        cands = planner.candidates(problem, dev)
        wino = REGISTRY["winograd"]
        extra = [(wino, cfg) for cfg in wino.configs(problem, dev)[:4]]
        seen = set(); res = []
        for i, (alg, cfg) in enumerate(cands + extra):
            lab = planner.label(alg, cfg)
            if lab in seen: continue
            seen.add(lab)
            if not ALL and i > 0 and alg.name != "winograd": continue
            try:
                runner = planner.prepare(problem, alg, cfg, q)
                ops = runtime.random_operands(problem, prof)
                ms = 1e3 * runtime.time_runner(runner, prof, ops, 10)
                split = ""
                if alg.name == "winograd":
                    evs = runner.run(prof, ops); evs[-1].wait()
                    split = " ".join(f"{(e.profile.end - e.profile.start) * 1e-6:.4f}" for e in evs)
                res.append((ms, lab, i, split))
            except Exception as e:
                res.append((float("inf"), lab + f" FAIL {type(e).__name__}: {str(e)[:100]}", i, ""))
        ref = cudnn_ms(pass_, n, c, s, o)
        first = next(r for r in res if r[2] == 0); best = min(res)
        bw = min([r for r in res if r[1].startswith("winograd")] or [(float("inf"), "-", 0, "")])
        print(f"{name:22s} {pass_:15s} cudnn {ref:.4f} | first {first[0]:.4f} ({first[0]/ref:.2f}) {first[1][:60]} | best {best[0]:.4f} ({best[0]/ref:.2f}) {best[1][:60]} | wino {bw[0]:.4f} ({bw[0]/ref:.2f}) [{bw[3]}]", flush=True)
        for r in sorted(res):
            print(f"      {r[0]:.4f} {r[1][:110]} {r[3]}", flush=True)
        rows.append(dict(layer=name, pass_=pass_, cudnn=ref, cands=res))
json.dump(rows, open(os.environ.get("OUTJ", "/dev/null"), "w"), indent=1, default=str)
