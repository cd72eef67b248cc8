"""depthwise_rows' column plan (which columns of a row run as vectors, which one by one): every
column is computed exactly once, and every lane of every vector reads inside the source row, for any
width, kernel, stride, padding (negative too: the data gradient's flipped padding) and dilation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clconv.algorithms.depthwise_rows import column_plan


@settings(max_examples=300, deadline=None)
@given(width=st.integers(1, 80), source_width=st.integers(1, 80), taps=st.integers(1, 7),
       stride=st.integers(1, 3), pad=st.integers(-6, 6), dilation=st.integers(1, 3), vn=st.sampled_from([4, 8, 16]))
def test_column_plan_covers_each_column_once_and_vectors_read_inside(width, source_width, taps, stride, pad,
                                                                    dilation, vn):
    plan = column_plan(width, source_width, taps, stride, pad, dilation, vn)
    done = [0] * width
    for column in plan.edge_columns:
        done[column] += 1
    starts = [plan.lo + i * plan.vn for i in range(plan.full)]
    tail = [plan.tail_start] if plan.vn and plan.tail_overlap >= 0 else []
    for start in starts + tail:
        first_new = plan.tail_overlap if start in tail and start not in starts else 0
        for lane in range(plan.vn):
            column = start + lane
            assert 0 <= column < width
            for k in range(taps):  # every lane's every tap reads inside the source row: no checks needed
                assert 0 <= column * stride - pad + k * dilation < source_width
            if lane >= first_new:
                done[column] += 1
    assert done == [1] * width, plan
    if plan.vn:
        assert plan.vn <= plan.hi - plan.lo  # a vector never sticks out of the interior
