"""A chained check: a small convolutional autoencoder trained on the device, matched end to end.

    h = conv2d(x, w1, b1, stride 2, padding 1)          (2, 3, 8, 8) -> (2, 4, 4, 4)
    a = relu(h)
    y = conv_transpose2d(a, w2, b2, stride 2, padding 1, output_padding 1)   -> (2, 3, 8, 8)
    L = mean((y - x)^2)

Forward, backward (convolution_backward for both layers, the input gradient included) and a few SGD
steps run on pyopencl Arrays without leaving the device (ReLU, its mask and the loss with pyopencl's
elementwise ops); every intermediate, every gradient and the loss of every step are compared with a
float64 NumPy implementation of the same network built on transposed_reference.py, whose gradients
are themselves checked by finite differences.
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cl_array

import clconv

import transposed_reference as R
from helpers import assert_matches

ENC = dict(stride=2, padding=1, dilation=1, groups=1)
DEC = dict(stride=2, padding=1, output_padding=1, dilation=1, groups=1)
STEPS = 3
LR = 0.05


def _init(rng):
    x = rng.standard_normal((2, 3, 8, 8))
    params = dict(w1=0.3 * rng.standard_normal((4, 3, 3, 3)), b1=0.1 * rng.standard_normal(4),
                  w2=0.3 * rng.standard_normal((4, 3, 3, 3)), b2=0.1 * rng.standard_normal(3))
    return x, params


def numpy_step(x, p):
    """Loss, activations and gradients of the network in float64 NumPy."""
    h = R.conv_forward(x, p["w1"], p["b1"], **ENC)
    a = np.maximum(h, 0)
    y = R.conv_transpose(a, p["w2"], p["b2"], stride=2, padding=1, output_padding=1)
    loss = float(np.mean((y - x) ** 2))
    gy = 2 * (y - x) / y.size
    ga = R.conv_transpose_input(gy, p["w2"], a.shape[2:], stride=2, padding=1, output_padding=1)
    grads = dict(w2=R.conv_transpose_weight(a, p["w2"].shape, gy, stride=2, padding=1, output_padding=1),
                 b2=R.bias_grad(gy))
    gh = ga * (h > 0)
    grads.update(w1=R.conv_weight(x, p["w1"].shape, gh, **ENC), b1=R.bias_grad(gh))
    gx = R.conv_input(x.shape, p["w1"], gh, **ENC)
    return loss, dict(h=h, y=y, ga=ga, gx=gx), grads


def device_step(q, x, p):
    """The same on the device: Arrays in, Arrays out, nothing fetched but for the checks."""
    h = clconv.conv2d(x, p["w1"], p["b1"], **ENC)
    zeros = cl_array.zeros_like(h)
    a = cl_array.if_positive(h, h, zeros)
    y = clconv.conv_transpose2d(a, p["w2"], p["b2"], **DEC)
    diff = y - x
    loss = cl_array.sum(diff * diff) / diff.size
    gy = diff * (2.0 / diff.size)
    ga, gw2, gb2 = clconv.convolution_backward(gy, a, p["w2"], transposed=True, **DEC)
    gh = cl_array.if_positive(h, ga, zeros)
    gx, gw1, gb1 = clconv.convolution_backward(gh, x, p["w1"], **ENC)
    for t in (h, a, y, ga, gw2, gb2, gh, gx, gw1, gb1):
        assert isinstance(t, cl_array.Array) and t.queue is q
    return loss, dict(h=h, y=y, ga=ga, gx=gx), dict(w1=gw1, b1=gb1, w2=gw2, b2=gb2)


def test_numpy_network_gradients_by_finite_differences(rng):
    """The float64 network's hand-chained gradients equal central differences of its loss."""
    x, p = _init(rng)
    _, _, grads = numpy_step(x, p)
    eps = 1e-6
    for _ in range(3):
        v = {k: rng.standard_normal(t.shape) for k, t in p.items()}
        plus = numpy_step(x, {k: p[k] + eps * v[k] for k in p})[0]
        minus = numpy_step(x, {k: p[k] - eps * v[k] for k in p})[0]
        numeric = (plus - minus) / (2 * eps)
        analytic = sum(float(np.sum(grads[k] * v[k])) for k in p)
        assert abs(numeric - analytic) <= 1e-6 * max(1.0, abs(analytic)), (numeric, analytic)
    # and the input gradient, through the same chain
    # L uses x as input and as target; gx is the gradient through the input alone, so hold the
    # target fixed: L(x') = mean((net(x') - x)^2)
    def loss_input(xx):
        y = R.conv_transpose(np.maximum(R.conv_forward(xx, p["w1"], p["b1"], **ENC), 0), p["w2"], p["b2"],
                             stride=2, padding=1, output_padding=1)
        return float(np.mean((y - x) ** 2))

    v = rng.standard_normal(x.shape)
    numeric = (loss_input(x + eps * v) - loss_input(x - eps * v)) / (2 * eps)
    analytic = float(np.sum(numpy_step(x, p)[1]["gx"] * v))
    assert abs(numeric - analytic) <= 1e-6 * max(1.0, abs(analytic))


def test_autoencoder_training_matches_numpy(queue, rng):
    x, params = _init(rng)
    xd = cl_array.to_device(queue, x.astype(np.float32))
    pd = {k: cl_array.to_device(queue, v.astype(np.float32)) for k, v in params.items()}
    # float32 errors compound along the chain (two convolutions forward, four backward, the mask):
    # tolerances use the longest chain's term count
    chain = 2 * 4 * 16 * 27
    losses = []
    for _ in range(STEPS):
        ref_loss, ref_act, ref_grads = numpy_step(x, params)
        loss, act, grads = device_step(queue, xd, pd)
        losses.append(ref_loss)
        assert abs(float(loss.get()) - ref_loss) <= 1e-5 * max(1.0, ref_loss)
        for name in ("h", "y", "ga", "gx"):
            assert_matches(act[name], ref_act[name], chain)
        for name in ("w1", "b1", "w2", "b2"):
            assert_matches(grads[name], ref_grads[name], chain)
        # SGD on the device and in NumPy
        for k in params:
            pd[k] = pd[k] - LR * grads[k]
            params[k] = params[k] - LR * ref_grads[k]
    for k in params:
        assert_matches(pd[k], params[k], chain)
    assert losses[-1] < losses[0]
