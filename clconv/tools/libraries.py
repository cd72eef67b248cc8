"""The reference libraries the benchmarks compare clconv with, and the float64 references they check
against: PyTorch (cuDNN on an NVIDIA GPU, its own kernels on a CPU), when importable, and a NumPy
im2col + BLAS matmul forward convolution (the CPU baseline).

Each library's pass is a zero-argument callable here; :mod:`clconv.tools.timing` times them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from clconv import reference
from clconv.geometry import ConvGeometry
from clconv.passes import PASS_TABLE


def load_torch(device_is_gpu: bool) -> Any:
    """PyTorch, if importable and (for a GPU device) with CUDA; else None.  On a GPU: TF32 off (the
    comparison is in full float32) and ``cudnn.benchmark`` on (cuDNN picks its fastest algorithm)."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - any import failure means "no reference"
        return None
    if device_is_gpu and not torch.cuda.is_available():
        return None
    if device_is_gpu:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    return torch


def torch_args(g: ConvGeometry) -> dict | None:
    """PyTorch's convolution arguments for ``g``; None if PyTorch cannot express it (asymmetric padding)."""
    nd = g.ndim
    if g.pad_begin != g.pad_end:
        return None  # PyTorch convolutions take symmetric padding only
    return dict(stride=list(g.stride[3 - nd:]), padding=list(g.pad_begin[3 - nd:]),
                dilation=list(g.dilation[3 - nd:]), groups=g.groups)


def torch_fn(torch: Any, g: ConvGeometry, pass_: str, tensors: dict[str, Any]) -> Callable[[], Any]:
    """A zero-argument callable running ``pass_`` of ``g`` in PyTorch on ``tensors`` (by role: x, w, dy)."""
    args = torch_args(g)
    if args is None:
        raise ValueError(f"PyTorch takes symmetric padding only: {g.tag()}")
    x, w, dy = tensors["x"], tensors["w"], tensors["dy"]
    nd = g.ndim
    aten = torch.ops.aten
    if pass_ == "forward":
        return lambda: aten.convolution(x, w, None, args["stride"], args["padding"], args["dilation"], False,
                                        [0] * nd, args["groups"])
    mask = [pass_ == "backward_data", pass_ == "backward_weight", False]
    index = 0 if pass_ == "backward_data" else 1
    return lambda: aten.convolution_backward(dy, x, w, None, args["stride"], args["padding"], args["dilation"],
                                             False, [0] * nd, args["groups"], mask)[index]


def torch_device_tensors(torch: Any, host: dict[str, np.ndarray], gpu: bool) -> dict[str, Any]:
    """``host``'s arrays as PyTorch tensors on the GPU (CUDA) or the CPU."""
    return {role: torch.from_numpy(a).to("cuda" if gpu else "cpu") for role, a in host.items()}


def numpy_im2col_forward(g: ConvGeometry, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The CPU baseline: y = W x im2col(x) with NumPy (float32, BLAS matmul), any 1/2/3D geometry."""
    nd = g.ndim
    pads = [(0, 0), (0, 0)] + [(g.pad_begin[a], g.pad_end[a]) for a in range(3 - nd, 3)]
    xp = np.pad(x, pads)
    span = [g.dilation[a] * (g.kernel[a] - 1) + 1 for a in range(3 - nd, 3)]
    windows = np.lib.stride_tricks.sliding_window_view(xp, span, axis=tuple(range(2, 2 + nd)))
    sel = tuple(slice(None, None, g.stride[a]) for a in range(3 - nd, 3))
    dil = tuple(slice(None, None, g.dilation[a]) for a in range(3 - nd, 3))
    windows = windows[(slice(None), slice(None), *sel, *dil)]
    windows = windows[(slice(None), slice(None), *(slice(0, o) for o in g.user_out_size))]
    # (N, C, *out, *k) -> (G, CI * KV, N * OP): the column matrix
    cols = np.ascontiguousarray(np.moveaxis(windows, 1, 1 + nd).reshape(
        g.batch, g.out_pixels, g.groups, g.cin_per_group * g.kernel_volume).transpose(2, 3, 0, 1)).reshape(
        g.groups, g.cin_per_group * g.kernel_volume, g.batch_out_pixels)
    wm = w.reshape(g.groups, g.cout_per_group, -1)
    y = np.matmul(wm, cols)  # (G, CO, N * OP)
    return y.reshape(g.groups, g.cout_per_group, g.batch, g.out_pixels).transpose(2, 0, 1, 3).reshape(g.output_shape)


def float64_reference(g: ConvGeometry, pass_: str, host: dict[str, np.ndarray], torch: Any = None,
                      torch_tensors: dict[str, Any] | None = None) -> np.ndarray:
    """The float64 result of ``pass_`` on ``host``'s operands (by role): PyTorch in float64 on its
    device when ``torch`` and its tensors are given (fast on a GPU), else clconv's NumPy reference."""
    if torch is not None and torch_tensors is not None:
        doubled = {role: t.double() for role, t in torch_tensors.items()}
        return torch_fn(torch, g, pass_, doubled)().cpu().numpy()
    first, second = PASS_TABLE[pass_].inputs
    return reference.run_pass(pass_, g, host[first], host[second])


def rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    """``||got - ref|| / ||ref||`` (L2); infinite if ``got`` has a value that is not finite."""
    if not np.isfinite(got).all():
        return float("inf")
    denom = float(np.linalg.norm(ref)) or 1.0
    return float(np.linalg.norm(got.astype(np.float64) - ref) / denom)
