"""The depthwise algorithms in their configurations, below the public ops (helpers.run_prepared):

* depthwise_rows, all three passes, on geometries that reach every branch of its column plan
  (tests/unit/test_column_plan.py): full vectors, the overlapping tail vector, edge columns on both
  sides, rows too narrow for any vector, strides (the data gradient residue by residue of the stride), dilation,
  asymmetric and over-wide padding, 1D/2D/3D, two output channels per group, bias, float64, and
  the weight gradient's slices;
* depthwise (the weight gradient): work-group sizes and slices, channel multipliers, 1D, float64.
"""

from __future__ import annotations

import pytest

from clconv.algorithms import REGISTRY
from clconv.passes import PASSES
from clconv.plan import Problem

from cases import Case, geometry
from helpers import run_prepared, skip_without_fp64

ROWS = REGISTRY["depthwise_rows"]

ROW_CASES = {
    # 2 outputs per channel; rows of 21: one vector, an overlapping tail vector, an edge column each side
    "2d-mult2-w21": Case(2, 2, 3, 6, (5, 21), (3, 3), 1, 1, 1, 3),
    # stride and dilation along the width, asymmetric padding: strided vector loads, scalar data gradient
    "2d-s2-d2-asym": Case(2, 2, 4, 4, (7, 40), (3, 3), (1, 2), ((1, 0), (2, 1)), (1, 2), 4),
    # a long row: the vector loop runs several times
    "1d-k5-w70": Case(1, 1, 2, 2, (70,), (5,), 1, 2, 1, 2),
    # 3D, 2 outputs per channel, a kernel row that starts outside the image
    "3d-mult2": Case(3, 1, 2, 4, (3, 4, 18), (2, 3, 3), 1, (1, 1, 1), 1, 2),
    # rows narrower than any vector: all columns scalar
    "2d-narrow": Case(2, 2, 3, 3, (4, 3), (3, 3), 1, 1, 1, 3),
    # padding wider than the kernel: the data gradient's flipped padding is negative
    "2d-widepad": Case(2, 1, 2, 2, (6, 20), (3, 3), 1, 3, 1, 2),
    # stride 3 along a row of 100: the data gradient's three residues each get full vectors, a tail
    # vector and edge columns; one residue reads through two taps, the others through one
    "1d-s3-w100": Case(1, 2, 3, 3, (100,), (5,), 3, 2, 1, 3),
    # MobileNet's downsampling layer on an odd width: residues of 29 and 28 columns
    "2d-s2-w57": Case(2, 1, 4, 4, (3, 57), (3, 3), 2, 1, 1, 4),
}


def _problem(name: str, pass_: str, bias: bool = False, dtype: str = "float32") -> Problem:
    return Problem(ROW_CASES[name].geometry, pass_, dtype, bias=bias and pass_ != "backward_weight")


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("name", list(ROW_CASES))
def test_depthwise_rows_every_pass(queue, rng, name, pass_):
    problem = _problem(name, pass_, bias=True)
    assert ROWS.decline_reason(problem, queue.device) is None
    run_prepared(queue, rng, problem, ROWS, ROWS.configs(problem, queue.device)[0])


@pytest.mark.parametrize("pass_", PASSES)
def test_depthwise_rows_narrower_vectors(queue, rng, pass_):
    config = {"vn": 8, "lx": 4, **({"slices": 1} if pass_ == "backward_weight" else {})}
    run_prepared(queue, rng, _problem("2d-mult2-w21", pass_), ROWS, config)


@pytest.mark.parametrize("name", ["1d-s3-w100", "2d-s2-w57", "2d-s2-d2-asym"])
def test_depthwise_rows_strided_data_gradient_channels_last(queue, rng, name):
    # the residues' vectors gathered and stored a pixel step apart, with a bias (the transposed
    # convolution's, whose output this is)
    problem = Problem(ROW_CASES[name].geometry, "backward_data", "float32", bias=True, layout="channels_last")
    run_prepared(queue, rng, problem, ROWS, ROWS.configs(problem, queue.device)[0])


def test_depthwise_rows_weight_gradient_in_slices_summed_by_a_second_kernel(queue, rng):
    problem = _problem("3d-mult2", "backward_weight")
    runner = run_prepared(queue, rng, problem, ROWS, {"vn": 16, "lx": 8, "slices": 3})
    assert len(runner.launches) == 2 and runner.workspace_bytes == 3 * problem.geometry.weight_elements * 4


@pytest.mark.parametrize("pass_", PASSES)
def test_depthwise_rows_float64(queue, rng, pass_):
    skip_without_fp64(queue)
    problem = _problem("2d-mult2-w21", pass_, bias=True, dtype="float64")
    run_prepared(queue, rng, problem, ROWS, ROWS.configs(problem, queue.device)[0])


# -- the depthwise weight gradient -------------------------------------------------------------------

DEPTHWISE = {
    "k3p1": "n2g6c6o6i9x9k3x3s1x1p1x1d1x1",
    "k3s2d2-mult2": "n3g4c4o8i11x11k3x3s2x2p2x2d2x2",  # channel multiplier 2, stride, dilation
    "1d-k5": "n2g3c3o3i17k5s1p2d1",
}


@pytest.mark.parametrize("tag", list(DEPTHWISE.values()), ids=list(DEPTHWISE))
def test_depthwise_weight_gradient(queue, rng, tag):
    problem = Problem(geometry(tag), "backward_weight", "float32")
    algorithm = REGISTRY["depthwise"]
    assert algorithm.decline_reason(problem, queue.device) is None
    for config in ({"wg": 64, "slices": 3}, algorithm.configs(problem, queue.device)[0]):
        run_prepared(queue, rng, problem, algorithm, config)


def test_depthwise_weight_gradient_float64(queue, rng):
    skip_without_fp64(queue)
    problem = Problem(geometry(DEPTHWISE["k3p1"]), "backward_weight", "float64")
    run_prepared(queue, rng, problem, REGISTRY["depthwise"], {"wg": 64, "slices": 2})


@pytest.mark.parametrize("tag", list(DEPTHWISE.values()), ids=list(DEPTHWISE))
def test_depthwise_weight_gradient_channels_last(queue, rng, tag):
    """Channels-last, neighbouring work-items take neighbouring channels (`lanes` of them), so the
    pixel lanes' sums are reduced per channel; 3 lanes' worth of channels leaves the last group partly empty."""
    problem = Problem(geometry(tag), "backward_weight", "float32", layout="channels_last")
    algorithm = REGISTRY["depthwise"]
    for config in ({"wg": 64, "slices": 3, "lanes": 4}, {"wg": 32, "slices": 1, "lanes": 32},
                   algorithm.configs(problem, queue.device)[0]):
        run_prepared(queue, rng, problem, algorithm, config)
