"""clconv as a PyTorch autograd op: a ``torch.autograd.Function`` whose forward and backward run
clconv's OpenCL kernels, checked against ``torch.nn.functional.conv2d`` and with
``torch.autograd.gradcheck``.

    python examples/torch_interop.py

CPU tensors go through numpy (``tensor.detach().numpy()`` shares memory with the tensor, so the
only copies are the host <-> device transfers clconv does for numpy inputs).  float64 needs a device
with ``cl_khr_fp64``: gradcheck's finite differences are meaningless in float32.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch

import clconv


class ClconvConv2d(torch.autograd.Function):
    """``conv2d(input, weight, bias)`` with clconv kernels for the forward and all three gradients."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> torch.Tensor:
        ctx.save_for_backward(input, weight, bias)
        ctx.conf = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        y = clconv.conv2d(_np(input), _np(weight), None if bias is None else _np(bias), **ctx.conf)
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        input, weight, bias = ctx.saved_tensors
        mask = (ctx.needs_input_grad[0], ctx.needs_input_grad[1], bias is not None and ctx.needs_input_grad[2])
        if not any(mask):
            return (None,) * 7
        grads = clconv.convolution_backward(_np(grad_output), _np(input), _np(weight), output_mask=mask, **ctx.conf)
        grad_input, grad_weight, grad_bias = (None if g is None else torch.from_numpy(np.asarray(g)) for g in grads)
        return grad_input, grad_weight, grad_bias, None, None, None, None


def _np(tensor: torch.Tensor) -> np.ndarray:
    """A C-contiguous numpy view (or copy, if the tensor is not contiguous) of a CPU tensor."""
    return np.ascontiguousarray(tensor.detach().cpu().numpy())


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> torch.Tensor:
    """``torch.nn.functional.conv2d`` on clconv, differentiable."""
    return ClconvConv2d.apply(input, weight, bias, stride, padding, dilation, groups)


def check(out=sys.stdout) -> None:
    """Compare with torch.nn.functional.conv2d (values and gradients), then run gradcheck."""
    torch.manual_seed(0)
    conf = dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    x = torch.randn(2, 4, 7, 8, dtype=torch.float32, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, dtype=torch.float32, requires_grad=True)
    b = torch.randn(6, dtype=torch.float32, requires_grad=True)

    y = conv2d(x, w, b, **conf)
    upstream = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, w, b), upstream)
    y_ref = torch.nn.functional.conv2d(x, w, b, **conf)
    grads_ref = torch.autograd.grad(y_ref, (x, w, b), upstream)
    torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-4)
    for name, got, want in zip(("input", "weight", "bias"), grads, grads_ref):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m, n=name: f"grad {n}: {m}")
    print(f"float32: output and the input/weight/bias gradients match torch.nn.functional.conv2d {conf}",
          file=out)

    if not clconv.default_queue().device.double_fp_config:
        print("gradcheck skipped: the default device has no float64 (cl_khr_fp64)", file=out)
        return
    x64 = torch.randn(1, 2, 5, 4, dtype=torch.float64, requires_grad=True)
    w64 = torch.randn(3, 2, 3, 2, dtype=torch.float64, requires_grad=True)
    b64 = torch.randn(3, dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradcheck(lambda a, c, d: conv2d(a, c, d, stride=1, padding=(1, 0)), (x64, w64, b64))
    print(f"float64: torch.autograd.gradcheck {'passed' if ok else 'FAILED'}", file=out)
    if not ok:
        raise AssertionError("gradcheck failed")


if __name__ == "__main__":
    check()
