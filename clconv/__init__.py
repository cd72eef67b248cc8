"""clconv: OpenCL convolution kernels with PyTorch's semantics.

Forward ops (``conv1d/2d/3d``, ``conv_transpose1d/2d/3d``), their gradients (``conv*d_input``,
``conv*d_weight``, ``conv_transpose*d_input``, ``conv_transpose*d_weight``, ``convolution_backward``),
on numpy arrays (copied to the default device and back) or ``pyopencl.array.Array`` (run on their
queue).  Each geometry gets kernels rendered from Mako templates with its sizes baked in, built once
and cached in memory and on disk; ``algorithm='auto'`` takes the heuristic's choice (one build), or the
fastest by measurement with ``CLCONV_TUNE=1`` or ``clconv.tune(...)``.
"""

from .algorithms import algorithms
from .builder import BuildError, cache_dir
from .caches import clear_caches
from .device import default_device_choice, default_queue, new_queue, pin_pocl_workers as _pin_pocl_workers
from .geometry import ConvGeometry
from .ops import (
    conv1d, conv1d_input, conv1d_weight, conv2d, conv2d_input, conv2d_weight, conv3d, conv3d_input,
    conv3d_weight, conv_transpose1d, conv_transpose1d_input, conv_transpose1d_weight, conv_transpose2d,
    conv_transpose2d_input, conv_transpose2d_weight, conv_transpose3d, conv_transpose3d_input,
    conv_transpose3d_weight, convolution_backward, render, tune,
)
from .passes import PASSES
from .planner import finish_builds
from .runtime import LaunchError, release_workspaces
from .templates import TemplateRenderError
from .tensors import empty_cache

# PoCL's workers one per CPU, pinned (device.pin_pocl_workers): set before anything asks OpenCL
# for its devices, when PoCL reads it; importing clconv's modules asks nothing yet
_pin_pocl_workers()

__version__ = "0.1.0"

__all__ = [
    "PASSES", "BuildError", "ConvGeometry", "LaunchError", "TemplateRenderError", "algorithms", "cache_dir",
    "clear_caches", "empty_cache",
    "conv1d", "conv1d_input", "conv1d_weight", "conv2d", "conv2d_input", "conv2d_weight", "conv3d",
    "conv3d_input", "conv3d_weight", "conv_transpose1d", "conv_transpose1d_input", "conv_transpose1d_weight",
    "conv_transpose2d", "conv_transpose2d_input", "conv_transpose2d_weight", "conv_transpose3d",
    "conv_transpose3d_input", "conv_transpose3d_weight", "convolution_backward", "default_device_choice",
    "default_queue", "finish_builds", "new_queue", "release_workspaces", "render", "tune",
]
