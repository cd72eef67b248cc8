"""depthwise_rows' column plan (which columns of a row run as vectors, which one by one): every
column is computed exactly once, and every lane of every vector reads inside the source row, for any
width, kernel, stride, padding (negative too: the data gradient's flipped padding) and dilation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clconv.algorithms.depthwise_rows import column_plan, phases


def _vector_lanes(plan):
    """(column, new) for every lane of every vector of ``plan``: ``new`` is False for the tail
    vector's lanes that repeat columns the vectors before it computed."""
    starts = [plan.lo + i * plan.vn for i in range(plan.full)]
    tail = [plan.tail_start] if plan.vn and plan.tail_overlap >= 0 else []
    for start in starts + tail:
        first_new = plan.tail_overlap if start in tail and start not in starts else 0
        for lane in range(plan.vn):
            yield start + lane, lane >= first_new


@settings(max_examples=300, deadline=None)
@given(width=st.integers(1, 80), source_width=st.integers(1, 80), taps=st.integers(1, 7),
       stride=st.integers(1, 3), pad=st.integers(-6, 6), dilation=st.integers(1, 3), vn=st.sampled_from([4, 8, 16]))
def test_column_plan_covers_each_column_once_and_vectors_read_inside(width, source_width, taps, stride, pad,
                                                                    dilation, vn):
    plan = column_plan(width, source_width, taps, stride, pad, dilation, vn)
    done = [0] * width
    for column in plan.edge_columns:
        done[column] += 1
    for column, new in _vector_lanes(plan):
        assert 0 <= column < width
        for k in range(taps):  # every lane's every tap reads inside the source row: no checks needed
            assert 0 <= column * stride - pad + k * dilation < source_width
        done[column] += new
    assert done == [1] * width, plan
    if plan.vn:
        assert plan.vn <= plan.hi - plan.lo  # a vector never sticks out of the interior


@settings(max_examples=300, deadline=None)
@given(width=st.integers(1, 80), source_width=st.integers(1, 40), taps=st.integers(1, 7),
       stride=st.integers(2, 4), pad=st.integers(0, 6), dilation=st.integers(1, 3), vn=st.sampled_from([4, 8, 16]))
def test_strided_data_gradient_phases_cover_each_column_once_with_exact_taps(width, source_width, taps, stride, pad,
                                                                            dilation, vn):
    """The strided data gradient by residue: dx column i = stride * j + residue reads, through
    exactly the taps k whose (i + pad - k * dilation) divides by the stride, dy column j + offset;
    every dx column is computed once, and every vector lane reads inside dy."""
    done = [0] * width
    for phase in phases(width, source_width, taps, stride, pad, dilation, vn):
        plan = phase.columns
        for q in plan.edge_columns:
            done[q * stride + phase.residue] += 1
        for q, new in _vector_lanes(plan):
            i = q * stride + phase.residue
            assert 0 <= i < width
            exact = [(k, (i + pad - k * dilation) // stride) for k in range(taps)
                     if (i + pad - k * dilation) % stride == 0]
            assert [(k, q + offset) for k, offset in phase.taps] == exact
            for _, offset in phase.taps:
                assert 0 <= q + offset < source_width
            done[i] += new
    assert done == [1] * width
