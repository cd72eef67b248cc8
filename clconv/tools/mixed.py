"""Storage dtypes and the fused epilogue as a user sees them: ``python -m clconv.tools.mixed``.

For each layer, a stream of ``STREAM_CALLS`` default forward calls through the public op (results
allocated by clconv, one synchronisation at the end), in milliseconds per call:

* clconv in float32, float16 and bfloat16 storage (float32 sums), with the kernel-event time of
  the runner each would run beside it;
* PyTorch on the same device the same way: float32 (NCHW, cuDNN, TF32 off) and float16 in
  channels_last (what mixed-precision users run);
* clconv in float32 with ``layout="channels_last"`` (and PyTorch's channels_last float32);
* the epilogue, float32: the convolution alone; ``conv2d(x, w, b, activation="relu", residual=r)``
  fused; and the same result by separate kernels (the convolution with its bias, then
  ``y + r`` and the relu as pyopencl element-wise kernels).

``--json F`` writes the rows; docs/performance.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
from pyopencl.elementwise import ElementwiseKernel

import clconv
from clconv import planner, runtime
from clconv import device as devices
from clconv.dtypes import bfloat16, numpy_dtype
from clconv.epilogue import Epilogue
from clconv.plan import Problem
from clconv.resolve import resolve_conv

from .timing import STREAM_CALLS, stream_seconds_per_call, time_torch

# (name, batch, C_in, size, C_out, kernel, stride, padding, groups): layer kinds of ResNet-50 and
# MobileNetV2, from bandwidth-bound (depthwise, 1x1) to compute-bound (3x3)
LAYERS = [
    ("resnet 1x1 256->64 56x56", 32, 256, 56, 64, 1, 1, 0, 1),
    ("resnet 1x1 1024->256 14x14", 32, 1024, 14, 256, 1, 1, 0, 1),
    ("resnet 1x1 s2 512->1024 28x28", 32, 512, 28, 1024, 1, 2, 0, 1),
    ("resnet 3x3 64 56x56", 32, 64, 56, 64, 3, 1, 1, 1),
    ("resnet 3x3 256 14x14", 32, 256, 14, 256, 3, 1, 1, 1),
    ("mobilenet dw 3x3 144 56x56", 32, 144, 56, 144, 3, 1, 1, 144),
    ("mobilenet dw 3x3 s2 144 56x56", 32, 144, 56, 144, 3, 2, 1, 144),
    ("mobilenet dw 3x3 960 7x7", 32, 960, 7, 960, 3, 1, 1, 960),
]


def _kernel_ms(problem: Problem, queue: cl.CommandQueue, repeats: int) -> float:
    runner = planner.plan(problem, queue)
    profiling = runtime.profiling_queue(queue)
    operands = runtime.random_operands(problem, profiling)
    return 1e3 * runtime.time_runner(runner, profiling, operands, repeats)


def bench(queue: cl.CommandQueue, batch_scale: float, repeats: int, torch: Any) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for layer in LAYERS:
        row = bench_layer(queue, layer, batch_scale, repeats, torch, rng)
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def bench_layer(queue: cl.CommandQueue, layer: tuple, batch_scale: float, repeats: int, torch: Any,
                rng: np.random.Generator) -> dict:
    """One row: every column of one layer of LAYERS."""
    name, batch, cin, size, cout, k, stride, pad, groups = layer
    batch = max(1, int(round(batch * batch_scale)))
    args = dict(stride=stride, padding=pad, groups=groups)
    row: dict[str, Any] = {"layer": name, "batch": batch}
    g = resolve_conv(2, (batch, cin, size, size), (cout, cin // groups, k, k), (cout,), stride, pad, 1,
                     groups).geometry
    host = {"x": rng.standard_normal((batch, cin, size, size)),
            "w": rng.standard_normal((cout, cin // groups, k, k)) / math.sqrt(cin // groups * k * k),
            "b": rng.standard_normal(cout), "r": rng.standard_normal(g.output_shape)}

    def stream_ms(call) -> float:
        call()  # the first call (plan, build) stays out
        queue.finish()
        return 1e3 * stream_seconds_per_call(call, queue.finish, STREAM_CALLS, repeats)

    dtypes = ["float32", "float16"] + (["bfloat16"] if bfloat16() is not None else [])
    for dtype in dtypes:
        arrays = {key: cl_array.to_device(queue, value.astype(numpy_dtype(dtype))) for key, value in host.items()}
        x, w = arrays["x"], arrays["w"]
        row[f"clconv_{dtype}_ms"] = stream_ms(lambda x=x, w=w: clconv.conv2d(x, w, **args))
        row[f"clconv_{dtype}_kernel_ms"] = _kernel_ms(Problem(g, "forward", dtype), queue, repeats)
    # float32 in channels_last: the activations stored (N, H, W, C)
    x, w, b, r = (cl_array.to_device(queue, host[key].astype(np.float32)) for key in ("x", "w", "b", "r"))
    x_last = cl_array.to_device(queue, np.ascontiguousarray(np.moveaxis(host["x"], 1, -1)).astype(np.float32))
    row["clconv_float32_nhwc_ms"] = stream_ms(lambda: clconv.conv2d(x_last, w, layout="channels_last", **args))
    row["clconv_float32_nhwc_kernel_ms"] = _kernel_ms(Problem(g, "forward", "float32", layout="channels_last"),
                                                      queue, repeats)
    # the epilogue, fused and by separate kernels
    relu = ElementwiseKernel(queue.context, "float *z, const float *y", "z[i] = y[i] < 0 ? 0 : y[i]",
                             "clconv_bench_relu")

    def separate():  # the convolution with its bias, then the residual and the activation
        summed = clconv.conv2d(x, w, b, **args) + r
        relu(summed, summed)
        return summed

    row["fused_ms"] = stream_ms(lambda: clconv.conv2d(x, w, b, activation="relu", residual=r, **args))
    row["separate_ms"] = stream_ms(separate)
    fused = Problem(g, "forward", "float32", bias=True, epilogue=Epilogue("relu", residual=True))
    row["fused_kernel_ms"] = _kernel_ms(fused, queue, repeats)
    row["conv_bias_kernel_ms"] = _kernel_ms(Problem(g, "forward", "float32", bias=True), queue, repeats)
    if torch is not None and torch.cuda.is_available():
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        for label, dtype, fmt in (("torch_float32_ms", torch.float32, torch.contiguous_format),
                                  ("torch_float32_nhwc_ms", torch.float32, torch.channels_last),
                                  ("torch_float16_cl_ms", torch.float16, torch.channels_last)):
            tx = torch.tensor(host["x"], device="cuda", dtype=dtype).to(memory_format=fmt)
            tw = torch.tensor(host["w"], device="cuda", dtype=dtype).to(memory_format=fmt)

            def call(tx=tx, tw=tw):
                return torch.nn.functional.conv2d(tx, tw, **args)

            time_torch(torch, call, 3, True)  # warm-up: cudnn.benchmark's search
            row[label] = 1e3 * stream_seconds_per_call(call, torch.cuda.synchronize, STREAM_CALLS, repeats)
    return row


def _line(row: dict) -> str:
    def ms(key):
        value = row.get(key)
        return f"{value:8.3f}" if value is not None else "       -"
    return (f"{row['layer']:32s} f32 {ms('clconv_float32_ms')} ({ms('clconv_float32_kernel_ms')}) "
            f"f16 {ms('clconv_float16_ms')} ({ms('clconv_float16_kernel_ms')}) "
            f"bf16 {ms('clconv_bfloat16_ms')} nhwc {ms('clconv_float32_nhwc_ms')} ({ms('clconv_float32_nhwc_kernel_ms')}) "
            f"| torch f32 {ms('torch_float32_ms')} f16-cl {ms('torch_float16_cl_ms')} "
            f"| conv+b {ms('conv_bias_kernel_ms')} fused {ms('fused_ms')} ({ms('fused_kernel_ms')}) "
            f"separate {ms('separate_ms')}")


def summary(rows: list[dict]) -> dict:
    def geomean(values):
        values = [v for v in values if v]
        return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None

    out = {
        "float16_over_float32_stream": geomean([r["clconv_float16_ms"] / r["clconv_float32_ms"] for r in rows]),
        "float16_over_float32_kernel": geomean([r["clconv_float16_kernel_ms"] / r["clconv_float32_kernel_ms"]
                                                for r in rows]),
        "nhwc_over_nchw_kernel": geomean([r["clconv_float32_nhwc_kernel_ms"] / r["clconv_float32_kernel_ms"]
                                          for r in rows]),
        "fused_over_conv_bias_kernel": geomean([r["fused_kernel_ms"] / r["conv_bias_kernel_ms"] for r in rows]),
        "fused_over_separate_stream": geomean([r["fused_ms"] / r["separate_ms"] for r in rows]),
    }
    if all("torch_float32_ms" in r for r in rows):
        out["clconv_float32_over_torch_float32_stream"] = geomean([r["clconv_float32_ms"] / r["torch_float32_ms"]
                                                                   for r in rows])
        out["clconv_float16_over_torch_float16_cl_stream"] = geomean(
            [r["clconv_float16_ms"] / r["torch_float16_cl_ms"] for r in rows])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clconv.tools.mixed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", help="the device to run on (as clconv's CLI takes it)")
    parser.add_argument("--batch-scale", type=float, default=1.0, help="multiply every layer's batch (default 1)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", help="write the rows and the summary to this file")
    parser.add_argument("--no-torch", action="store_true", help="do not compare with PyTorch")
    args = parser.parse_args(argv)
    queue = devices.queue_for(args.device)
    torch = None
    if not args.no_torch:
        try:
            import torch  # type: ignore[no-redef]
        except ImportError:
            torch = None
    print(f"clconv {clconv.__version__} on {queue.device.name.strip()!r}; ms per call in a stream of {STREAM_CALLS} "
          f"(kernel-event ms in brackets)")
    rows = bench(queue, args.batch_scale, args.repeats, torch)
    totals = summary(rows)
    result = {"device": queue.device.name.strip(), "rows": rows, "summary": totals}
    for key, value in totals.items():
        print(f"{key}: {value:.3f}" if value is not None else f"{key}: -")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
