"""The canonical convolution's geometry: one frozen :class:`ConvGeometry` that validates itself
however it is made (resolve.py makes it from an op's arguments, with errors in the user's terms).

All ops are expressed on one *canonical convolution* ``x * w -> y``:

* ``conv*d``             : forward pass of the canonical convolution;
* ``conv*d_input``       : its data gradient (``dy * w -> dx``);
* ``conv*d_weight``      : its weight gradient (``x * dy -> dw``);
* ``conv_transpose*d``   : the data gradient of the convolution whose *input* is the transposed
  op's output (so ``in_channels`` of the canonical geometry is the transposed op's ``C_out``);
* the transposed op's gradients are the forward pass and the weight gradient of that same
  canonical convolution.

Spatial sizes are always stored as 3-tuples ``(D, H, W)``; 1D and 2D problems get leading
dimensions of size 1 (kernel 1, stride 1, no padding), which the baked-constant kernels compile away.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class ConvGeometry:
    """The canonical convolution ``x (N, C_in, *in_size) * w (C_out, C_in/groups, *kernel)``.

    ``ndim`` is the number of spatial dimensions the user works in (1, 2 or 3); all tuples are
    padded to three entries, leading ones trivial.
    """

    ndim: int
    batch: int
    groups: int
    in_channels: int
    out_channels: int
    in_size: tuple[int, int, int]
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    pad_begin: tuple[int, int, int]
    pad_end: tuple[int, int, int]
    dilation: tuple[int, int, int]
    out_size: tuple[int, int, int] = field(init=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # every cache key of a call holds its geometry: hash the fields once, not on every lookup
        return self._hash

    def __post_init__(self) -> None:
        self._validate()
        out = tuple(
            (i + pb + pe - d * (k - 1) - 1) // s + 1
            for i, k, s, pb, pe, d in zip(
                self.in_size, self.kernel, self.stride, self.pad_begin, self.pad_end, self.dilation
            )
        )
        object.__setattr__(self, "out_size", out)
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, f) for f in self.__dataclass_fields__ if f != "_hash")))

    @classmethod
    def make(cls, ndim: int, batch: int, groups: int, in_channels: int, out_channels: int,
             in_size: Sequence[int], kernel: Sequence[int], stride: Sequence[int] = (),
             pad_begin: Sequence[int] = (), pad_end: Sequence[int] = (), dilation: Sequence[int] = ()) -> "ConvGeometry":
        """A geometry from per-dimension tuples of ``ndim`` entries (stride and dilation default to
        1, padding to 0): the leading trivial dimensions are added here."""
        return cls(
            ndim=ndim, batch=batch, groups=groups, in_channels=in_channels, out_channels=out_channels,
            in_size=_pad3(in_size, 1), kernel=_pad3(kernel, 1), stride=_pad3(stride or (1,) * ndim, 1),
            pad_begin=_pad3(pad_begin or (0,) * ndim, 0), pad_end=_pad3(pad_end or (0,) * ndim, 0),
            dilation=_pad3(dilation or (1,) * ndim, 1),
        )

    def _validate(self) -> None:
        """The invariants every geometry keeps, however it was made (the resolvers check the user's
        arguments first, with messages in the user's terms; this is the last word)."""
        for name in ("ndim", "batch", "groups", "in_channels", "out_channels"):
            value = getattr(self, name)
            if type(value) is not int:
                raise TypeError(f"ConvGeometry.{name} must be an int, got {value!r}")
        if self.ndim not in (1, 2, 3):
            raise ValueError(f"ConvGeometry.ndim must be 1, 2 or 3, got {self.ndim}")
        if self.batch < 0 or self.groups < 1 or self.in_channels < 1 or self.out_channels < 1:
            raise ValueError(f"ConvGeometry needs batch >= 0 and positive groups and channels, got batch "
                             f"{self.batch}, groups {self.groups}, channels {self.in_channels} -> {self.out_channels}")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(f"ConvGeometry.groups={self.groups} must divide in_channels ({self.in_channels}) and "
                             f"out_channels ({self.out_channels})")
        lead = 3 - self.ndim  # the trivial leading dimensions of a 1D or 2D geometry
        for name, least, trivial in (("in_size", 1, 1), ("kernel", 1, 1), ("stride", 1, 1), ("dilation", 1, 1),
                                     ("pad_begin", 0, 0), ("pad_end", None, 0)):
            # pad_end may be negative: a transposed op's output_padding past the stride shrinks it
            # (resolvers: _canonical_pad_end); it only sets the output size, no kernel reads it
            value = getattr(self, name)
            if not (isinstance(value, tuple) and len(value) == 3
                    and all(type(v) is int and (least is None or v >= least) for v in value)):
                raise ValueError(f"ConvGeometry.{name} must be a tuple of three ints"
                                 f"{'' if least is None else f' >= {least}'}, got {value!r}")
            if value[:lead] != (trivial,) * lead:
                raise ValueError(f"ConvGeometry.{name}: the {lead} leading entries of a {self.ndim}D geometry "
                                 f"must be {trivial}, got {value!r}")
        for axis in range(3):
            padded = self.in_size[axis] + self.pad_begin[axis] + self.pad_end[axis]
            if padded < self.dilation[axis] * (self.kernel[axis] - 1) + 1:
                raise ValueError(f"ConvGeometry: the padded size {padded} along axis {axis} is smaller than the "
                                 f"dilated kernel ({self.kernel[axis]} taps, dilation {self.dilation[axis]})")

    # -- derived sizes -----------------------------------------------------------------------
    @property
    def cin_per_group(self) -> int:
        return self.in_channels // self.groups

    @property
    def cout_per_group(self) -> int:
        return self.out_channels // self.groups

    @property
    def kernel_volume(self) -> int:
        return math.prod(self.kernel)

    @property
    def in_pixels(self) -> int:
        return math.prod(self.in_size)

    @property
    def out_pixels(self) -> int:
        return math.prod(self.out_size)

    @property
    def batch_out_pixels(self) -> int:
        """Output pixels over the whole batch: the products a weight gradient sums per weight, and
        the columns of the forward's GEMM."""
        return self.batch * self.out_pixels

    @property
    def input_elements(self) -> int:
        return self.batch * self.in_channels * self.in_pixels

    @property
    def output_elements(self) -> int:
        return self.batch * self.out_channels * self.out_pixels

    @property
    def weight_elements(self) -> int:
        return self.out_channels * self.cin_per_group * self.kernel_volume

    @property
    def reduction_length(self) -> int:
        """Terms summed per forward output element (``C_in/groups * prod(kernel)``)."""
        return self.cin_per_group * self.kernel_volume

    @property
    def flops(self) -> int:
        """Multiply-adds x 2 of one pass (forward, data gradient and weight gradient agree)."""
        return 2 * self.output_elements * self.reduction_length

    @property
    def is_pointwise(self) -> bool:
        """A 1x1 convolution with no padding: one GEMM, strided input reads at most."""
        return self.kernel == (1, 1, 1) and self.pad_begin == (0, 0, 0) and self.pad_end == (0, 0, 0)

    @property
    def is_depthwise(self) -> bool:
        return self.groups == self.in_channels and self.cin_per_group == 1

    @property
    def user_in_size(self) -> tuple[int, ...]:
        return self.in_size[3 - self.ndim :]

    @property
    def user_out_size(self) -> tuple[int, ...]:
        return self.out_size[3 - self.ndim :]

    @property
    def user_kernel(self) -> tuple[int, ...]:
        return self.kernel[3 - self.ndim :]

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, self.in_channels, *self.user_in_size)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.batch, self.out_channels, *self.user_out_size)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.out_channels, self.cin_per_group, *self.user_kernel)

    def needs_int64(self, *extra_elements: int) -> bool:
        """True if any flat index (buffers, or ``extra_elements`` such as a workspace) passes int32."""
        sizes = (self.input_elements, self.output_elements, self.weight_elements, *extra_elements)
        return max(sizes) > INT32_MAX

    def with_batch(self, batch: int) -> "ConvGeometry":
        """The same geometry for another batch size (the cache key and launches differ by it)."""
        return ConvGeometry(
            self.ndim, batch, self.groups, self.in_channels, self.out_channels, self.in_size,
            self.kernel, self.stride, self.pad_begin, self.pad_end, self.dilation,
        )

    def tag(self) -> str:
        """A short readable id, benchdnn style, e.g. ``n2g1c3o8i7x7k3x3s1x1p1x1d1x1``."""

        def dims(t: Sequence[int]) -> str:
            return "x".join(str(v) for v in t[3 - self.ndim :])

        pads = dims(self.pad_begin)
        if self.pad_begin != self.pad_end:
            pads += "e" + dims(self.pad_end)
        return (
            f"n{self.batch}g{self.groups}c{self.in_channels}o{self.out_channels}"
            f"i{dims(self.in_size)}k{dims(self.kernel)}s{dims(self.stride)}p{pads}d{dims(self.dilation)}"
        )


def _pad3(values: Sequence[int], fill: int) -> tuple[int, int, int]:
    return tuple([fill] * (3 - len(values)) + list(values))  # type: ignore[return-value]


# The resolvers moved to clconv/resolve.py; ``from clconv.geometry import resolve_conv`` keeps working.
_MOVED = ("Resolved", "resolve_conv", "resolve_conv_input", "resolve_conv_weight", "resolve_conv_transpose",
          "resolve_conv_transpose_input", "resolve_conv_transpose_weight", "resolve_padding", "check_ndim",
          "PADDING_STRINGS")


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from . import resolve

        return getattr(resolve, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
