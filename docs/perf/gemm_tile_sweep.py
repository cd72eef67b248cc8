"""The GEMM core's tiles (every GPU table tile, TK 16 and 32) on GEMM-shaped layers, TFLOP/s of the
convolution's direct FLOPs, beside cuBLAS SGEMM of the 1x1 layer's shape (TF32 off).
`python docs/perf/gemm_tile_sweep.py [JSON]` on the GPU machine.

With PIPES = (1, 2) it also times the double-buffered variant (two local tile pairs, one barrier
per step) of commit 86a98b1, which the template no longer has: on the H200 (2026-12-01) it was
within -4%..+16% of PIPE 1 tile for tile, never the fastest on the 1x1 1024 layer; retried on
2026-12-02 with the branchless prefetch, 1-7% slower (docs/performance.md)."""
import json
import sys

import torch
from winograd_configs import cuda_ms  # docs/perf/, beside this script

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import GPU_TILES, TILE_KEYS
from clconv.plan import Problem
from clconv.resolve import resolve_conv

PIPES = (1,)
LAYERS = [  # (algorithm, pass, input shape, weight shape, padding)
    ("gemm1x1", "forward", (64, 1024, 28, 28), (1024, 1024, 1, 1), 0),  # issue 12's GEMM-shaped layer
    ("winograd", "forward", (32, 128, 28, 28), (128, 128, 3, 3), 1),
    ("implicit_gemm", "forward", (32, 64, 56, 56), (64, 64, 3, 3), 1),
    ("winograd", "backward_weight", (32, 512, 7, 7), (512, 512, 3, 3), 1),
]


def cublas_ms(m, n, k):
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
    return cuda_ms(lambda: a @ b)


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    ms = cublas_ms(1024, 64 * 784, 1024)
    print(f"cuBLAS SGEMM 1024 x 50176 x 1024: {ms:.3f} ms, {2 * 1024 * 1024 * 50176 / ms / 1e9:.1f} TFLOP/s")
    rows = []
    for name, pass_, x_shape, w_shape, pad in LAYERS:
        g = resolve_conv(2, x_shape, w_shape, None, 1, pad, 1, 1).geometry
        problem = Problem(g, pass_, "float32")
        algorithm = REGISTRY[name]
        base = algorithm.configs(problem, q.device)[0]
        results = {}
        for tile_row in GPU_TILES:
            for tk in (16, 32):
                for pipe in PIPES:
                    tile = {**dict(zip(TILE_KEYS, tile_row)), "TK": tk, "PIPE": pipe}
                    try:
                        runner = planner.prepare(problem, algorithm, {**base, **tile}, q)
                        ops = runtime.random_operands(problem, prof)
                        results[(tile_row[:2] + tile_row[3:6], tk, pipe)] = 1e3 * runtime.time_runner(runner, prof, ops, 10)
                    except Exception as exc:  # noqa: BLE001 - a tile the device refuses
                        print(f"   {tile}: {type(exc).__name__}: {str(exc)[:100]}")
        print(f"{name} {pass_} {x_shape} -> {w_shape[0]}; the default config {base}")
        print("   TM TN WM WN VW  TK   PIPE 1 ms  PIPE 2 ms  (TFLOP/s)")
        for (shape, tk, pipe), t in sorted(results.items(), key=lambda r: r[1]):
            if pipe != 1:
                continue
            double = results.get((shape, tk, 2), float("nan"))
            print(f"   {' '.join(f'{v:3d}' for v in shape)} {tk:3d}  {t:.4f} ({g.flops / t / 1e9:4.1f})"
                  f"  {double:.4f} ({g.flops / double / 1e9:4.1f})")
            rows.append({"layer": f"{name} {pass_} {x_shape} {w_shape}", "tile": shape, "TK": tk,
                         "pipe1_ms": t, "pipe2_ms": double, "tflops1": g.flops / t / 1e9, "tflops2": g.flops / double / 1e9})
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as handle:
            json.dump({"cublas_ms": ms, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
