"""The GEMM core's global loads, scalar against 4-wide (config key GV: 0 scalar, 3 one aligned
16-byte load per 4 elements of A and of B, where global_vectors allows), tile for tile, on GEMM-shaped layers and
Winograd's GEMMs: kernel time and TFLOP/s of the convolution's direct FLOPs, beside cuBLAS SGEMM of
the 1x1 layer's shape (TF32 off).  (A first run also timed vload4, which takes any alignment:
NVIDIA's compiler split it into scalar loads, and it was slower than the aligned loads on 62 of 72
tile-layer pairs: h200-gemm-global-vectors-vload4.json.)

    python docs/perf/gemm_global_vectors.py [JSON]       on the GPU machine
"""
import json
import sys

from gemm_tile_sweep import cublas_ms  # docs/perf/, beside this script

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import GPU_TILES, TILE_KEYS
from clconv.plan import Problem
from clconv.resolve import resolve_conv

MODES = (0, 3)
TILES = GPU_TILES[:6]
LAYERS = [  # (algorithm, pass, input shape, weight shape, padding)
    ("gemm1x1", "forward", (64, 1024, 28, 28), (1024, 1024, 1, 1), 0),  # issue 12's GEMM-shaped layer
    ("gemm1x1", "backward_weight", (32, 1024, 14, 14), (256, 1024, 1, 1), 0),
    ("winograd", "forward", (32, 128, 28, 28), (128, 128, 3, 3), 1),
    ("winograd", "backward_data", (32, 256, 14, 14), (256, 256, 3, 3), 1),
    ("winograd", "backward_weight", (32, 512, 7, 7), (512, 512, 3, 3), 1),
    ("im2col", "forward", (32, 64, 56, 56), (64, 64, 3, 3), 1),
]


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    ms = cublas_ms(1024, 64 * 784, 1024)  # the tile sweep's reference, beside this script
    print(f"cuBLAS SGEMM 1024 x 50176 x 1024: {ms:.3f} ms, {2 * 1024 * 1024 * 50176 / ms / 1e9:.1f} TFLOP/s")
    rows = []
    for name, pass_, x_shape, w_shape, pad in LAYERS:
        problem = Problem(resolve_conv(2, x_shape, w_shape, None, 1, pad, 1, 1).geometry, pass_, "float32")
        g = problem.geometry
        algorithm = REGISTRY[name]
        base = algorithm.configs(problem, q.device)[0]
        print(f"{name} {pass_} {x_shape} -> {w_shape[0]}; the default config {base}")
        print("   TM TN WM WN VW  TK  " + "  ".join(f"GV {m} ms (TFLOP/s)" for m in MODES))
        for tile_row in TILES:
            for tk in (16, 32):
                times = {}
                for mode in MODES:
                    tile = {**dict(zip(TILE_KEYS, tile_row)), "TK": tk, "GV": mode}
                    try:
                        runner = planner.prepare(problem, algorithm, {**base, **tile}, q)
                        ops = runtime.random_operands(problem, prof)
                        times[mode] = 1e3 * runtime.time_runner(runner, prof, ops, 10)
                    except Exception as exc:  # noqa: BLE001 - a tile the device refuses
                        print(f"   {tile}: {type(exc).__name__}: {str(exc)[:100]}")
                        times[mode] = float("nan")
                shape = tile_row[:2] + tile_row[3:6]
                print(f"   {' '.join(f'{v:3d}' for v in shape)} {tk:3d}  "
                      + "  ".join(f"{times[m]:.4f} ({g.flops / times[m] / 1e9:4.1f})" for m in MODES))
                rows.append({"layer": f"{name} {pass_} {x_shape} {w_shape}", "tile": shape, "TK": tk,
                             "ms": times, "tflops": {m: g.flops / t / 1e9 for m, t in times.items()}})
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as handle:
            json.dump({"cublas_ms": ms, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
