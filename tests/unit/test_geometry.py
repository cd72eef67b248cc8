"""The geometry resolvers and ConvGeometry: every case table's geometry as clconv resolves it equals
the one worked out independently in tests/cases.py; 'same' padding; ConvGeometry's own validation;
64-bit indices past int32 (in the problem and in the rendered source)."""

from __future__ import annotations

import numpy as np
import pytest

import clconv
from clconv.geometry import INT32_MAX, ConvGeometry, resolve_conv
from clconv.plan import Problem

from cases import COVER, FORWARD_CASES, GRADIENT_CASES, SPLITK_CASE, TRANSPOSED_ONLY, Case, expected_to_serve

EVERY_CASE = FORWARD_CASES + COVER + GRADIENT_CASES + TRANSPOSED_ONLY + [SPLITK_CASE]


@pytest.mark.parametrize("case", EVERY_CASE, ids=lambda c: c.id)
def test_resolver_agrees_with_independent_geometry(case):
    """A resolver bug (padding, 'same', output size, a transposed op's end padding) cannot hide in
    the expected values: the cases work their geometry out themselves."""
    assert case.geometry == case.independent_geometry
    assert case.geometry.user_out_size == case.out_size
    if not case.transposed_only:
        resolved = resolve_conv(case.ndim, case.input_shape, case.weight_shape, None, **case.conv_args())
        assert resolved.unbatched == case.unbatched


def test_same_padding_puts_odd_extra_at_the_end():
    g = resolve_conv(2, (1, 1, 6, 7), (1, 1, 4, 3), None, 1, "same", 1, 1).geometry
    assert g.pad_begin[1:] == (1, 1) and g.pad_end[1:] == (2, 1)
    assert g.user_out_size == (6, 7)
    g = resolve_conv(1, (1, 1, 8), (1, 1, 4), None, 1, "same", 3, 1).geometry  # total 9
    assert (g.pad_begin[2], g.pad_end[2]) == (4, 5)
    assert g.user_out_size == (8,)


@pytest.mark.parametrize("bad, message", [
    (dict(ndim=4), "ndim"),
    (dict(batch=-1), "batch"),
    (dict(groups=3), "groups"),
    (dict(kernel=(2, 3, 3)), "leading"),
    (dict(stride=(1, 0, 1)), "stride"),
    (dict(in_size=(1, 2, 2), pad_begin=(0, 0, 0), pad_end=(0, 0, 0)), "smaller than the dilated kernel"),
    (dict(batch=2.0), "batch"),
], ids=["ndim", "batch", "groups", "leading", "stride", "kernel-too-large", "float-batch"])
def test_conv_geometry_validates_itself(bad, message):
    """However a geometry is made, it keeps its invariants (the resolvers check the user's terms first)."""
    fields = dict(ndim=2, batch=1, groups=2, in_channels=4, out_channels=6, in_size=(1, 5, 5), kernel=(1, 3, 3),
                  stride=(1, 1, 1), pad_begin=(0, 1, 1), pad_end=(0, 1, 1), dilation=(1, 1, 1))
    fields.update(bad)
    with pytest.raises((TypeError, ValueError), match=message):
        ConvGeometry(**fields)


def test_make_pads_the_leading_dimensions():
    g = ConvGeometry.make(1, 2, 1, 3, 4, (9,), (3,), pad_begin=(1,), pad_end=(2,))
    assert (g.in_size, g.kernel, g.stride, g.pad_begin, g.pad_end, g.dilation) == (
        (1, 1, 9), (1, 1, 3), (1, 1, 1), (0, 0, 1), (0, 0, 2), (1, 1, 1))
    assert g.tag() == "n2g1c3o4i9k3s1p1e2d1" and g.output_shape == (2, 4, 10)


# -- 64-bit indexing ---------------------------------------------------------------------------------


def test_index_type_switches_to_long_past_int32():
    small = resolve_conv(2, (1, 1, 46340, 46340), (1, 1, 1, 1), None, 64).geometry
    assert small.input_elements <= INT32_MAX
    assert Problem(small, "forward", "float32").index_type() == "int"
    big = resolve_conv(2, (1, 1, 46341, 46341), (1, 1, 1, 1), None, 64).geometry
    assert big.input_elements > INT32_MAX
    assert Problem(big, "forward", "float32").index_type() == "long"
    # an extra workspace past int32 also switches
    assert Problem(small, "forward", "float32").index_type(INT32_MAX + 1) == "long"


LONG = Case(2, 1, 1, 1, (46341, 46341), (1, 1), 64)  # 46341^2 > 2^31 input elements; 1x1, stride 64


@pytest.mark.parametrize("algorithm", clconv.algorithms("forward"))
def test_rendered_source_uses_long_index_past_int32(queue, algorithm):
    """An input of 46341^2 > 2^31 elements (a zero-stride view: nothing is allocated) renders
    kernels with 64-bit indices; a just-smaller one keeps 32-bit.  (An algorithm whose rule does not
    serve this 1x1 stride-64 layer must decline it by name instead.)"""
    w = np.ones((1, 1, 1, 1), np.float32)
    big = np.broadcast_to(np.float32(1), (1, 1, 46341, 46341))
    small = np.broadcast_to(np.float32(1), (1, 1, 46340, 46340))
    if not expected_to_serve(algorithm, LONG, "conv", queue.device):
        for x in (big, small):
            with pytest.raises(ValueError, match=f"algorithm '{algorithm}'"):
                clconv.render(clconv.conv2d, x, w, stride=64, algorithm=algorithm)
        return
    source = clconv.render(clconv.conv2d, big, w, stride=64, algorithm=algorithm)
    assert "typedef long clc_idx;" in source
    assert "typedef int clc_idx;" not in source
    source = clconv.render(clconv.conv2d, small, w, stride=64, algorithm=algorithm)
    assert "typedef int clc_idx;" in source
