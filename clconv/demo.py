"""The quick start's main job: check and time real networks' convolution layers on the default device.

For each layer and pass: the algorithm ``auto`` chose, the median kernel time from OpenCL profiling
events, GFLOP/s, and the largest error against the float64 NumPy reference.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pyopencl.array as cl_array

from . import reference
from .algorithms import Operand, Problem
from .device import default_device_choice, default_queue, is_gpu
from .geometry import resolve_conv
from .planner import plan, profiling_queue, time_runner

# (name, input NCHW, weight OIHW, stride, padding, groups): small-batch versions of real layers.
LAYERS = [
    ("resnet50 conv1 7x7/2", (1, 3, 112, 112), (64, 3, 7, 7), 2, 3, 1),
    ("resnet50 3x3 64ch", (1, 64, 28, 28), (64, 64, 3, 3), 1, 1, 1),
    ("resnet50 3x3 256ch", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1, 1),
    ("resnet50 1x1 256->64", (1, 256, 28, 28), (64, 256, 1, 1), 1, 0, 1),
    ("resnet50 1x1/2 512->1024", (1, 512, 14, 14), (1024, 512, 1, 1), 2, 0, 1),
    ("mobilenetv2 dw 3x3 144ch", (1, 144, 28, 28), (144, 1, 3, 3), 1, 1, 144),
    ("unet 3x3 128ch", (1, 128, 32, 32), (128, 128, 3, 3), 1, 1, 1),
]
PASSES = ("forward", "backward_data", "backward_weight")


def run(passes=PASSES, repeats: int = 5, layers=LAYERS, out=sys.stdout) -> list[dict]:
    queue = default_queue()
    device, why = default_device_choice()
    print(f"device: {queue.device.name} ({why})", file=out)
    pqueue = profiling_queue(queue)
    rng = np.random.default_rng(1)
    rows = []
    header = f"{'layer':28} {'pass':16} {'algorithm':14} {'time ms':>9} {'GFLOP/s':>9} {'max err':>9}"
    print(header, file=out)
    print("-" * len(header), file=out)
    shrink = not is_gpu(queue.device)
    if shrink:
        print("(CPU device: spatial sizes halved to keep the demo short)", file=out)
    for name, ishape, wshape, stride, padding, groups in layers:
        if shrink:
            ishape = (*ishape[:2], *(max(7, s // 2) for s in ishape[2:]))
        g = resolve_conv(2, ishape, wshape, None, stride, padding, 1, groups).geometry
        x = rng.standard_normal(g.input_shape).astype(np.float32)
        w = (rng.standard_normal(g.weight_shape) / np.sqrt(g.reduction_length)).astype(np.float32)
        dy = rng.standard_normal(g.output_shape).astype(np.float32)
        for pass_ in passes:
            problem = Problem(g, pass_, "float32")
            a, b = {"forward": (x, w), "backward_data": (dy, w), "backward_weight": (x, dy)}[pass_]
            names = {"forward": ("x", "w", "y"), "backward_data": ("dy", "w", "dx"),
                     "backward_weight": ("x", "dy", "dw")}[pass_]
            result_shape = {"forward": g.output_shape, "backward_data": g.input_shape,
                            "backward_weight": g.weight_shape}[pass_]
            a_dev, b_dev = cl_array.to_device(pqueue, a), cl_array.to_device(pqueue, b)
            result = cl_array.empty(pqueue, result_shape, np.float32)
            result.fill(np.nan)
            operands = {names[0]: Operand(a_dev.base_data), names[1]: Operand(b_dev.base_data),
                        names[2]: Operand(result.base_data)}
            runner = plan(problem, pqueue, "auto")
            ms = time_runner(runner, pqueue, operands, repeats) * 1e3  # one warm-up, median of the rest
            ref = reference.run_pass(pass_, g, a, b)
            got = result.get()
            err = float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))
            gflops = g.flops / (ms * 1e-3) / 1e9
            rows.append(dict(layer=name, pass_=pass_, algorithm=runner.algorithm, ms=ms, gflops=gflops, error=err))
            print(f"{name:28} {pass_:16} {runner.algorithm:14} {ms:9.3f} {gflops:9.1f} {err:9.2e}", file=out)
    bad = [r for r in rows if not np.isfinite(r["error"]) or r["error"] > 1e-3]
    print(f"\n{len(rows)} layer-passes checked against the float64 reference; "
          f"{'all within 1e-3 relative error' if not bad else f'{len(bad)} FAILED'}", file=out)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="clconv demo", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--passes", default=",".join(PASSES))
    args = parser.parse_args(argv)
    rows = run(tuple(args.passes.split(",")), args.repeats)
    return 0 if all(np.isfinite(r["error"]) and r["error"] <= 1e-3 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
