"""The weight gradient of grouped layers with few channels per group, every candidate timed: direct's
blocks (clc_direct_backward_weight_blocks: blocks x work-group sizes x slice counts around the one
it picks), direct's work-group per weight element, split-K's and Winograd's first configurations,
the heuristic's choice under ``auto``, and cuDNN's kernel time through PyTorch (CUDA events, the
median of 20; TF32 off).  Kernel times are medians of 10 runs from OpenCL profiling events.

    python docs/perf/grouped_wgrad.py OUT.json [LAYERS_FILE [LAYOUT]]      (on the GPU machine)

LAYOUT channels_last times the activations stored channels-last (no cuDNN figure then).
"""
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import clconv
from clconv import limits, planner, runtime
from clconv.algorithms import REGISTRY
from clconv.algorithms.direct import block_config, block_configs, weight_blocks
from clconv.plan import Problem
from clconv.tools.shapes import load_file

WAVES = (None, 2, 4, 8)  # None: block_slices' own rule
WG = (64, 128)
LANES = (8, 32)  # channels-last: blocks side by side (with work-groups of 64, 128 and 256)


def candidates(problem, device):
    """direct's own block configurations first, then blocks x WG x WAVES, the rest."""
    direct = REGISTRY["direct"]
    out = [(direct, config) for config in block_configs(problem, device)]
    sweep = [(wg, None) for wg in WG] if problem.layout == "channels_first" else \
        [(wg, lanes) for wg in (64, 128, 256) for lanes in LANES if lanes <= wg]
    for cob, cib in weight_blocks(problem)[:3]:
        for wg, lanes in sweep:
            for waves in WAVES:
                config = block_config(problem, device, cob, cib, wg, lanes, waves)
                if config not in [c for _, c in out]:
                    out.append((direct, config))
    out.append((direct, {"wg": 256}))
    for name, count in (("splitk", 4), ("winograd", 2), ("implicit_gemm", 1)):
        algorithm = REGISTRY[name]
        if algorithm.decline_reason(problem, device) is None:
            out += [(algorithm, c) for c in algorithm.configs(problem, device)[:count]]
    return out


def cudnn_ms(g):
    import torch
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    nd = g.ndim
    keep = slice(3 - nd, 3)
    x = torch.randn(g.batch, g.in_channels, *g.in_size[keep], device="cuda")
    dy = torch.randn(g.batch, g.out_channels, *g.out_size[keep], device="cuda")
    shape = (g.out_channels, g.cin_per_group, *g.kernel[keep])
    fn = getattr(torch.nn.grad, f"conv{nd}d_weight")
    pads = tuple(b for b in g.pad_begin[keep])
    call = lambda: fn(x, shape, dy, stride=g.stride[keep], padding=pads, dilation=g.dilation[keep],  # noqa: E731
                      groups=g.groups)
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    out_path = sys.argv[1]
    layers = load_file(sys.argv[2] if len(sys.argv) > 2 else "docs/perf/h200-grouped-layers.txt")
    layout = sys.argv[3] if len(sys.argv) > 3 else "channels_first"
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    rows = []
    for layer in layers:
        g = layer.geometry
        problem = Problem(g, "backward_weight", "float32", layout=layout)
        cands = candidates(problem, q.device)
        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            runners = list(pool.map(planner.prepare, [problem] * len(cands), [a for a, _ in cands], [c for _, c in cands],
                                    [q] * len(cands)))
        built = time.perf_counter() - start
        operands = runtime.random_operands(problem, prof)
        times = {}
        for (algorithm, config), runner in zip(cands, runners):
            times[planner.label(algorithm, config)] = 1e3 * runtime.time_runner(runner, prof, operands, 10)
        auto = planner.plan(problem, q)
        auto_ms = 1e3 * runtime.time_runner(auto, prof, operands, 10)
        try:
            cudnn = cudnn_ms(g) if layout == "channels_first" else None
        except Exception as error:  # noqa: BLE001 (no torch: the row still counts)
            print(f"cudnn failed: {error}", flush=True)
            cudnn = None
        best = min(times, key=times.get)
        best_direct = min((k for k in times if "cob=" in k), key=times.get)
        best_splitk = min((k for k in times if k.startswith("splitk")), key=times.get, default=None)
        print(f"{layer.label} ({g.tag()}): built {len(cands)} in {built:.1f} s; best {best} {times[best]:.4f}; "
              f"blocks {best_direct} {times[best_direct]:.4f}; old direct {times['direct wg=256']:.4f}; "
              f"splitk {best_splitk} {times.get(best_splitk, float('nan')):.4f}; auto {auto.label} {auto_ms:.4f}; "
              f"cudnn {cudnn}", flush=True)
        rows.append({"layer": layer.label, "tag": g.tag(), "times_ms": times, "auto": auto.label,
                     "auto_ms": auto_ms, "cudnn_ms": cudnn,
                     "first_direct": planner.label(REGISTRY["direct"], REGISTRY["direct"].configs(problem, q.device)[0])})
        with open(out_path, "w") as handle:
            json.dump({"device": q.device.name, "layout": layout, "units": limits.of(q.device).compute_units, "rows": rows}, handle,
                      indent=1)


if __name__ == "__main__":
    main()
