"""Train a small convolutional autoencoder on synthetic images, forward and backward on the device.

    python examples/autoencoder_training.py [--steps 200] [--batch 16] [--lr 0.05]

The network (1x16x16 images):

    encoder: conv2d 1->8 k3 s2 p1, ReLU      -> 8x8x8
             conv2d 8->16 k3 s2 p1, ReLU     -> 16x4x4
    decoder: conv_transpose2d 16->8 k3 s2 p1 op1, ReLU -> 8x8x8
             conv_transpose2d 8->1 k3 s2 p1 op1        -> 1x16x16

Every convolution, every gradient (``clconv.convolution_backward``) and the SGD-with-momentum
update run on the OpenCL device on ``pyopencl.array.Array`` tensors; only the loss value is read
back to print it.  The images are blurry rectangles, so the mean-squared reconstruction error has
somewhere to go: it falls well below its starting value within a couple of hundred steps.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
from pyopencl.elementwise import ElementwiseKernel
from pyopencl.reduction import ReductionKernel

import clconv


def synthetic_images(rng: np.random.Generator, count: int, size: int = 16) -> np.ndarray:
    """``(count, 1, size, size)`` float32 images: one or two soft-edged bright rectangles each."""
    images = np.zeros((count, 1, size, size), np.float32)
    yy, xx = np.mgrid[0:size, 0:size]
    for image in images:
        for _ in range(rng.integers(1, 3)):
            y0, x0 = rng.integers(0, size - 4, 2)
            h, w = rng.integers(3, size // 2, 2)
            inside = (yy >= y0) & (yy < y0 + h) & (xx >= x0) & (xx < x0 + w)
            image[0] += rng.uniform(0.5, 1.0) * inside
    # a 3-tap blur in each direction softens the edges
    for axis in (2, 3):
        images = (np.roll(images, 1, axis) + 2 * images + np.roll(images, -1, axis)) / 4
    return np.clip(images, 0, 1).astype(np.float32)


@dataclass
class Layer:
    """One (transposed) convolution layer with its parameters, momenta and last activations."""

    weight: cl_array.Array
    bias: cl_array.Array
    transposed: bool
    relu: bool
    stride: int = 2
    padding: int = 1
    output_padding: int = 0
    momenta: list[cl_array.Array] = field(default_factory=list)
    input: cl_array.Array | None = None  # saved by forward for backward
    pre_activation: cl_array.Array | None = None

    def __post_init__(self) -> None:
        self.momenta = [cl_array.zeros_like(self.weight), cl_array.zeros_like(self.bias)]


class Autoencoder:
    def __init__(self, queue: cl.CommandQueue, rng: np.random.Generator):
        self.queue = queue

        def param(shape: tuple[int, ...], fan_in: int) -> cl_array.Array:
            host = rng.standard_normal(shape).astype(np.float32) * np.float32(np.sqrt(2.0 / fan_in))
            return cl_array.to_device(queue, host)

        def zeros(n: int) -> cl_array.Array:
            return cl_array.zeros(queue, (n,), np.float32)

        self.layers = [
            Layer(param((8, 1, 3, 3), 9), zeros(8), transposed=False, relu=True),
            Layer(param((16, 8, 3, 3), 72), zeros(16), transposed=False, relu=True),
            # transposed weights are (C_in, C_out, kH, kW); fan-in of an output ~ C_in * k*k / stride^2
            Layer(param((16, 8, 3, 3), 36), zeros(8), transposed=True, relu=True, output_padding=1),
            Layer(param((8, 1, 3, 3), 18), zeros(1), transposed=True, relu=False, output_padding=1),
        ]
        self._relu = ElementwiseKernel(queue.context, "const float *x, float *y",
                                       "y[i] = x[i] > 0.0f ? x[i] : 0.0f", "clconv_example_relu")
        self._relu_backward = ElementwiseKernel(queue.context, "const float *pre, const float *g, float *out",
                                                "out[i] = pre[i] > 0.0f ? g[i] : 0.0f", "clconv_example_relu_bwd")
        # One kernel per update instead of a chain of pyopencl array expressions: fewer builds.
        self._sgd = ElementwiseKernel(queue.context, "float *p, float *v, const float *g, const float lr, const float mu",
                                      "v[i] = mu * v[i] - lr * g[i]; p[i] += v[i]", "clconv_example_sgd")
        self._mse_grad = ElementwiseKernel(queue.context, "const float *y, const float *t, float *g, const float scale",
                                           "g[i] = scale * (y[i] - t[i])", "clconv_example_mse_grad")
        self._squared_error = ReductionKernel(queue.context, np.float32, neutral="0", reduce_expr="a+b",
                                              map_expr="(y[i] - t[i]) * (y[i] - t[i])",
                                              arguments="const float *y, const float *t")

    def loss_and_grad(self, y: cl_array.Array, target: cl_array.Array) -> tuple[float, cl_array.Array]:
        """Mean squared error and its gradient ``2 (y - target) / size``."""
        grad = cl_array.empty_like(y)
        self._mse_grad(y, target, grad, np.float32(2.0 / y.size))
        return float(self._squared_error(y, target).get()) / y.size, grad

    def forward(self, x: cl_array.Array) -> cl_array.Array:
        for layer in self.layers:
            layer.input = x
            if layer.transposed:
                y = clconv.conv_transpose2d(x, layer.weight, layer.bias, stride=layer.stride, padding=layer.padding,
                                            output_padding=layer.output_padding)
            else:
                y = clconv.conv2d(x, layer.weight, layer.bias, stride=layer.stride, padding=layer.padding)
            layer.pre_activation = y
            if layer.relu:
                activated = cl_array.empty_like(y)
                self._relu(y, activated)
                y = activated
            x = y
        return x

    def backward_and_step(self, grad: cl_array.Array, lr: float, momentum: float) -> None:
        """Back-propagate ``grad`` (d loss / d output) and apply SGD with momentum to every layer."""
        for index in reversed(range(len(self.layers))):
            layer = self.layers[index]
            assert layer.input is not None and layer.pre_activation is not None
            if layer.relu:
                masked = cl_array.empty_like(grad)
                self._relu_backward(layer.pre_activation, grad, masked)
                grad = masked
            need_input_grad = index > 0
            grad_input, grad_weight, grad_bias = clconv.convolution_backward(
                grad, layer.input, layer.weight, stride=layer.stride, padding=layer.padding,
                transposed=layer.transposed, output_padding=layer.output_padding,
                output_mask=(need_input_grad, True, True),
            )
            for parameter, gradient, velocity in zip((layer.weight, layer.bias), (grad_weight, grad_bias),
                                                     layer.momenta):
                self._sgd(parameter, velocity, gradient, np.float32(lr), np.float32(momentum))
            if need_input_grad:
                grad = grad_input


def train(steps: int = 200, batch: int = 16, lr: float = 0.05, momentum: float = 0.9, seed: int = 0,
          every: int = 20, out=sys.stdout) -> list[float]:
    """Train for ``steps`` minibatches; print and return the loss of every step."""
    rng = np.random.default_rng(seed)
    queue = clconv.default_queue()
    data = synthetic_images(rng, 8 * batch)
    model = Autoencoder(queue, rng)
    print(f"device: {queue.device.name.strip()}; {len(data)} synthetic 16x16 images, batch {batch}", file=out)
    losses = []
    start = time.perf_counter()
    for step in range(steps):
        chosen = rng.choice(len(data), batch, replace=False)
        x = cl_array.to_device(queue, np.ascontiguousarray(data[chosen]))
        loss, grad = model.loss_and_grad(model.forward(x), x)
        losses.append(loss)
        model.backward_and_step(grad, lr, momentum)
        if step % every == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss:.5f}  ({time.perf_counter() - start:.1f} s)", file=out)
    return losses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    losses = train(args.steps, args.batch, args.lr, args.momentum, args.seed)
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    print(f"mean loss of the first 5 steps {first:.5f}, of the last 5 steps {last:.5f} ({last / first:.0%})")
    return 0 if last < first else 1


if __name__ == "__main__":
    sys.exit(main())
