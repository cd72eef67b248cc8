"""The quick start's main job: check and time real networks' convolution layers on the default device.

Each layer runs the way a user calls clconv: ``clconv.conv2d`` (forward), ``clconv.conv2d_input``
(the input gradient) and ``clconv.conv2d_weight`` (the weight gradient) on ``pyopencl.array.Array``
operands, with ``algorithm='auto'`` (the first call chooses and builds the kernels).  Shown per
layer and pass: the algorithm chosen, the time per call of a stream of calls with one
synchronisation at its end (host work included, as a user sees it), GFLOP/s, and the largest error
against the float64 NumPy reference, relative to the reference's largest value.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, TextIO

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

import clconv
from clconv import planner, reference
from clconv.resolve import resolve_conv
from clconv.passes import PASS_TABLE, PASSES
from clconv.plan import Problem

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


def _calls(x: cl_array.Array, w: cl_array.Array, dy: cl_array.Array, stride: int, padding: int,
           groups: int) -> dict[str, Callable[[], Any]]:
    """Each pass of the layer as the public call a user makes, by the canonical pass it runs."""
    args = dict(stride=stride, padding=padding, groups=groups)
    return {
        "forward": lambda: clconv.conv2d(x, w, **args),
        "backward_data": lambda: clconv.conv2d_input(x.shape, w, dy, **args),
        "backward_weight": lambda: clconv.conv2d_weight(x, w.shape, dy, **args),
    }


def run(passes=PASSES, repeats: int = 5, layers=LAYERS, out: TextIO = sys.stdout) -> list[dict]:
    queue = clconv.default_queue()
    device, why = clconv.default_device_choice()
    print(f"device: {queue.device.name} ({why})", file=out)
    rng = np.random.default_rng(1)
    rows = []
    header = f"{'layer':28} {'pass':16} {'algorithm':14} {'time ms':>9} {'GFLOP/s':>9} {'max err':>9}"
    print(header, file=out)
    print("-" * len(header), file=out)
    shrink = not queue.device.type & cl.device_type.GPU
    if shrink:
        print("(CPU device: spatial sizes halved to keep the demo short)", file=out)
    for name, ishape, wshape, stride, padding, groups in layers:
        if shrink:
            ishape = (*ishape[:2], *(max(7, s // 2) for s in ishape[2:]))
        g = resolve_conv(2, ishape, wshape, None, stride, padding, 1, groups).geometry
        host = {"x": rng.standard_normal(g.input_shape).astype(np.float32),
                "w": (rng.standard_normal(g.weight_shape) / np.sqrt(g.reduction_length)).astype(np.float32),
                "dy": rng.standard_normal(g.output_shape).astype(np.float32)}
        x, w, dy = (cl_array.to_device(queue, host[role]) for role in ("x", "w", "dy"))
        calls = _calls(x, w, dy, stride, padding, groups)
        for pass_ in passes:
            call = calls[pass_]
            result = call()  # the first call: chooses the algorithm (the heuristic; measuring with CLCONV_TUNE=1) and builds
            queue.finish()
            t0 = time.perf_counter()
            for _ in range(repeats):  # a stream of calls, one synchronisation at its end
                call()
            queue.finish()
            seconds = (time.perf_counter() - t0) / repeats
            spec = PASS_TABLE[pass_]
            ref = reference.run_pass(pass_, g, *(host[role] for role in spec.inputs))
            err = float(np.max(np.abs(result.get() - ref)) / max(1.0, float(np.max(np.abs(ref)))))
            tolerance = reference.tolerance(spec.reduction_length(g), np.float32)
            algorithm = planner.plan(Problem(g, pass_, "float32"), queue).algorithm  # what those calls ran
            gflops = g.flops / seconds / 1e9
            rows.append(dict(layer=name, pass_=pass_, algorithm=algorithm, ms=seconds * 1e3, gflops=gflops,
                             error=err, ok=bool(np.isfinite(err) and err <= tolerance)))
            print(f"{name:28} {pass_:16} {algorithm:14} {seconds * 1e3:9.3f} {gflops:9.1f} {err:9.2e}", file=out)
    bad = [r for r in rows if not r["ok"]]
    print(f"\n{len(rows)} layer-passes checked against the float64 reference; "
          f"{'all within tolerance' if not bad else f'{len(bad)} FAILED'}", file=out)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clconv demo", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5, help="calls timed per layer and pass (default 5)")
    parser.add_argument("--passes", default=",".join(PASSES), help="canonical passes, comma-separated (default: all)")
    args = parser.parse_args(argv)
    passes = tuple(p.strip() for p in args.passes.split(",") if p.strip())
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        parser.error(f"--passes must name passes among {PASSES}, got {unknown}")
    rows = run(passes, args.repeats)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
