"""What a user sees: the wall time per call of a stream of default calls (no ``out=``: results
allocated by clconv), one synchronisation at the end, against PyTorch doing the same on the same
device in the same process.  2D layers given as benchdnn descriptors; needs PyTorch (CUDA for cuDNN).

    python -m clconv.tools.stream mb32ic64ih56oc64oh56kh3ph1 mb1ic256ih14oc256oh14kh3ph1 ...
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np
import pyopencl.array as cl_array

import clconv
from clconv.tools.shapes import parse_descriptor


def stream_ms(call: Callable[[], Any], sync: Callable[[], Any], calls: int = 20, repeats: int = 5) -> float:
    """Median over ``repeats`` streams of milliseconds per call; one warm-up call first."""
    call()
    sync()
    per_call = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        per_call.append((time.perf_counter() - start) / calls)
    return statistics.median(per_call) * 1e3


def layer_passes(descriptor: str, queue: Any, torch: Any, device: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """For each pass of a 2D layer: (clconv's default call, PyTorch's call), on random data."""
    import torch.nn.functional as F

    g = parse_descriptor(descriptor).geometry
    if g.ndim != 2:
        raise SystemExit(f"{descriptor}: only 2D layers")
    stride, padding, groups = g.stride[1:], g.pad_begin[1:], g.groups
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(shape).astype(np.float32) for shape in (g.input_shape, g.weight_shape, g.output_shape)]
    x, w, dy = (cl_array.to_device(queue, a) for a in host)
    tx, tw, tdy = (torch.from_numpy(a).to(device) for a in host)

    def torch_backward(mask: tuple[bool, bool, bool], index: int) -> Callable[[], Any]:
        return lambda: torch.ops.aten.convolution_backward(
            tdy, tx, tw, None, stride, padding, (1, 1), False, (0, 0), groups, mask)[index]

    return {
        "fwd": (lambda: clconv.conv2d(x, w, stride=stride, padding=padding, groups=groups),
                lambda: F.conv2d(tx, tw, stride=stride, padding=padding, groups=groups)),
        "bwd_data": (lambda: clconv.conv2d_input(g.input_shape, w, dy, stride=stride, padding=padding, groups=groups),
                     torch_backward((True, False, False), 0)),
        "bwd_weight": (lambda: clconv.conv2d_weight(x, g.weight_shape, dy, stride=stride, padding=padding, groups=groups),
                       torch_backward((False, True, False), 1)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    queue = clconv.default_queue()
    ratios = []
    for descriptor in argv if argv is not None else sys.argv[1:]:
        for name, (ours, theirs) in layer_passes(descriptor, queue, torch, device).items():
            mine, reference = stream_ms(ours, queue.finish), stream_ms(theirs, sync)
            ratios.append(mine / reference)
            print(f"{descriptor:36s} {name:10s} clconv {mine:8.3f} ms  torch {reference:8.3f} ms  ratio {ratios[-1]:5.2f}",
                  flush=True)
    if ratios:
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"stream geomean clconv/torch over {len(ratios)} layer-passes: {geomean:.3f} (worst {max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
