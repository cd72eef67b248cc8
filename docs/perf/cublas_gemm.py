"""cuBLAS's SGEMM (PyTorch, TF32 off) on issue 12's GEMM-shaped layer's matrices: 1024 x 1024
times 1024 x 50176 (a 1x1 1024 -> 1024 convolution at 28x28, batch 64), median of 20 event-timed
runs, in TFLOP/s: the ceiling the GEMM core is compared with (docs/performance.md).

    python docs/perf/cublas_gemm.py          (on the GPU machine, where PyTorch has CUDA)
"""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
M, K, N = 1024, 1024, 64 * 28 * 28
a = torch.randn(M, K, device="cuda")
b = torch.randn(K, N, device="cuda")
for _ in range(3):
    a @ b
times = []
for _ in range(20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    a @ b
    end.record()
    torch.cuda.synchronize()
    times.append(start.elapsed_time(end))
ms = sorted(times)[len(times) // 2]
print(f"cuBLAS SGEMM {M}x{K} @ {K}x{N}: {ms:.3f} ms, {2 * M * N * K / ms / 1e9:.1f} TFLOP/s")
