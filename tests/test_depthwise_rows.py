"""depthwise_rows: the column plan (which columns run as vectors) and the kernels of all three passes
against the float64 reference, on geometries chosen to reach every branch of the plan: full vectors,
the overlapping tail vector, edge columns on both sides, rows too narrow for any vector, strides
(the data gradient's scalar path), dilation, asymmetric and over-wide padding, 1D/2D/3D, two output
channels per group, bias, float64 and the weight gradient's slices."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.algorithms.depthwise_rows import column_plan
from clconv.geometry import resolve_conv

from helpers import run_prepared

ALGORITHM = REGISTRY["depthwise_rows"]
PASSES = ("forward", "backward_data", "backward_weight")


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


# (name, input shape, weight shape, stride, padding, dilation, groups)
GEOMETRIES = {
    # 2 outputs per channel; rows of 21: one vector, an overlapping tail vector, an edge column each side
    "2d-mult2-w21": ((2, 3, 5, 21), (6, 1, 3, 3), 1, 1, 1, 3),
    # stride and dilation along the width, asymmetric padding: strided vector loads, scalar data gradient
    "2d-s2-d2-asym": ((2, 4, 7, 40), (4, 1, 3, 3), (1, 2), ((1, 0), (2, 1)), (1, 2), 4),
    # a long row: the vector loop runs several times
    "1d-k5-w70": ((1, 2, 70), (2, 1, 5), 1, 2, 1, 2),
    # 3D, 2 outputs per channel, a kernel row that starts outside the image
    "3d-mult2": ((1, 2, 3, 4, 18), (4, 1, 2, 3, 3), 1, (1, 1, 1), 1, 2),
    # rows narrower than any vector: all columns scalar
    "2d-narrow": ((2, 3, 4, 3), (3, 1, 3, 3), 1, 1, 1, 3),
    # padding wider than the kernel: the data gradient's flipped padding is negative
    "2d-widepad": ((1, 2, 6, 20), (2, 1, 3, 3), 1, 3, 1, 2),
}


def _geometry(name):
    xshape, wshape, stride, padding, dilation, groups = GEOMETRIES[name]
    return resolve_conv(len(xshape) - 2, xshape, wshape, None, stride, padding, dilation, groups).geometry


def _run(queue, rng, problem: Problem, config: dict):
    return run_prepared(queue, rng, problem, ALGORITHM, config)


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_every_pass_matches_reference(queue, rng, name, pass_):
    problem = Problem(_geometry(name), pass_, "float32", bias=pass_ != "backward_weight")
    assert ALGORITHM.decline_reason(problem, queue.device) is None
    _run(queue, rng, problem, ALGORITHM.configs(problem, queue.device)[0])


@pytest.mark.parametrize("pass_", PASSES)
def test_narrower_vectors(queue, rng, pass_):
    problem = Problem(_geometry("2d-mult2-w21"), pass_, "float32")
    config = {"vn": 8, "lx": 4, **({"slices": 1} if pass_ == "backward_weight" else {})}
    _run(queue, rng, problem, config)


def test_weight_gradient_in_slices_summed_by_a_second_kernel(queue, rng):
    problem = Problem(_geometry("3d-mult2"), "backward_weight", "float32")
    runner = _run(queue, rng, problem, {"vn": 16, "lx": 8, "slices": 3})
    assert len(runner.launches) == 2 and runner.workspace_bytes == 3 * problem.geometry.weight_elements * 4


@pytest.mark.parametrize("pass_", PASSES)
def test_float64(queue, rng, pass_):
    from clconv.device import supports_fp64

    if not supports_fp64(queue.device):
        pytest.skip(f"{queue.device.name} has no cl_khr_fp64")
    problem = Problem(_geometry("2d-mult2-w21"), pass_, "float64", bias=pass_ != "backward_weight")
    _run(queue, rng, problem, ALGORITHM.configs(problem, queue.device)[0])


def test_declines_layers_with_more_than_one_input_channel_per_group(queue):
    g = resolve_conv(2, (1, 4, 5, 5), (4, 2, 3, 3), None, 1, 1, 1, 2).geometry
    reason = ALGORITHM.decline_reason(Problem(g, "forward", "float32"), queue.device)
    assert reason is not None and "C_in/groups = 1" in reason
