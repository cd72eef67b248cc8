"""The GEMM core's tiles (every GPU table tile, TK 16 and 32) on two GEMM-shaped layers, TFLOP/s
of the convolution's direct FLOPs, beside cuBLAS SGEMM of the 1x1 layer's shape (TF32 off).
`python docs/perf/gemm_tile_sweep.py` on the GPU machine."""
import torch
from winograd_configs import cuda_ms  # docs/perf/, beside this script

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import GPU_TILES, TILE_KEYS
from clconv.plan import Problem
from clconv.resolve import resolve_conv


def cublas_ms(m, n, k):
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
    return cuda_ms(lambda: a @ b)


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    ms = cublas_ms(1024, 64 * 784, 1024)
    print(f"cuBLAS SGEMM 1024 x 50176 x 1024: {ms:.3f} ms, {2 * 1024 * 1024 * 50176 / ms / 1e9:.1f} TFLOP/s")
    layers = [("gemm1x1", (64, 1024, 28, 28), (1024, 1024, 1, 1), 0), ("winograd", (32, 128, 28, 28), (128, 128, 3, 3), 1)]
    for name, x_shape, w_shape, pad in layers:
        g = resolve_conv(2, x_shape, w_shape, None, 1, pad, 1, 1).geometry
        problem = Problem(g, "forward", "float32")
        algorithm = REGISTRY[name]
        base = algorithm.configs(problem, q.device)[0]
        results = []
        for tile_row in GPU_TILES:
            for tk in (16, 32):
                tile = {**dict(zip(TILE_KEYS, tile_row)), "TK": tk}
                runner = planner.prepare(problem, algorithm, {**base, **tile}, q)
                ops = runtime.random_operands(problem, prof)
                results.append((1e3 * runtime.time_runner(runner, prof, ops, 10), tile))
        print(name, x_shape, "default", base)
        for t, tile in sorted(results, key=lambda r: r[0])[:12]:
            print(f"   {t:.4f} ms {g.flops / t / 1e9:.1f} TFLOP/s {tile}")


if __name__ == "__main__":
    main()
