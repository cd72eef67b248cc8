"""The table of passes (clconv/passes.py) and the algorithm registry: what every op, the planner,
the algorithms and the tests read, checked against the geometry and the public ops' signatures."""

from __future__ import annotations

import inspect

import pytest

import clconv
from clconv.algorithms import REGISTRY
from clconv.passes import OPS, PASS_TABLE, PASSES, check_pass

from cases import GRADIENT_CASES, TRANSPOSED_ONLY, op_function


def test_every_pass_has_an_entry_with_two_inputs_and_a_result():
    assert tuple(PASS_TABLE) == PASSES == clconv.PASSES
    for name, spec in PASS_TABLE.items():
        assert spec.name == name and len(spec.inputs) == 2 and spec.result not in spec.inputs
        assert spec.roles[-1] == spec.result and ("bias" in spec.roles) == spec.takes_bias
    assert [PASS_TABLE[p].result for p in PASSES] == ["y", "dx", "dw"]
    assert not PASS_TABLE["backward_weight"].takes_bias and not PASS_TABLE["backward_weight"].result_is_activation()


@pytest.mark.parametrize("case", GRADIENT_CASES + TRANSPOSED_ONLY, ids=lambda c: c.id)
def test_shapes_and_lengths_follow_the_geometry(case):
    g = case.geometry
    shapes = {"x": g.input_shape, "dx": g.input_shape, "w": g.weight_shape, "dw": g.weight_shape,
              "y": g.output_shape, "dy": g.output_shape}
    for spec in PASS_TABLE.values():
        for role in (*spec.inputs, spec.result):
            assert spec.shape(role, g) == shapes[role], (spec.name, role)
        assert spec.result_shape(g) == shapes[spec.result]
    assert PASS_TABLE["forward"].bias_channels(g) == g.out_channels
    assert PASS_TABLE["backward_data"].bias_channels(g) == g.in_channels  # a transposed op's output channels
    assert PASS_TABLE["forward"].shape("bias", g) == (g.out_channels,)
    assert PASS_TABLE["forward"].shape("residual", g) == g.output_shape  # the epilogue's: the result's shape
    assert PASS_TABLE["backward_data"].shape("residual", g) == g.input_shape
    lengths = {p: PASS_TABLE[p].reduction_length(g) for p in PASSES}
    assert lengths == {"forward": g.cin_per_group * g.kernel_volume,
                       "backward_data": g.cout_per_group * g.kernel_volume,
                       "backward_weight": g.batch * g.out_pixels}


@pytest.mark.parametrize("family", list(OPS))
def test_op_families_match_the_public_ops(family):
    """Each family's user arguments are the public op's parameters, and map onto the pass's roles."""
    op = OPS[family]
    assert op.family == family and op.spec is PASS_TABLE[op.pass_]
    roles = set(op.roles.values())
    assert set(op.spec.inputs) <= roles and roles <= {*op.spec.inputs, "bias", "residual"}
    assert ("bias" in roles) <= op.spec.takes_bias and ("residual" in roles) == ("bias" in roles)
    for ndim in (1, 2, 3):
        parameters = inspect.signature(op_function(family, ndim)).parameters
        assert set(op.roles) <= set(parameters), (family, ndim)


def test_transposed_ops_swap_the_roles_of_the_convolution():
    assert (OPS["conv_transpose"].pass_, OPS["conv_transpose_input"].pass_, OPS["conv_transpose_weight"].pass_) == (
        "backward_data", "forward", "backward_weight")
    assert OPS["conv_transpose"].roles["input"] == "dy" and OPS["conv_transpose_input"].roles["grad_output"] == "x"
    assert OPS["conv_transpose_weight"].roles == {"input": "dy", "grad_output": "x"}


def test_check_pass_names_the_argument():
    assert check_pass("forward") is PASS_TABLE["forward"]
    for bad in ("backward", None, 3):
        with pytest.raises(ValueError, match="pass_ must be one of"):
            check_pass(bad)
    with pytest.raises(ValueError, match="pass_"):
        clconv.algorithms("sideways")


def test_algorithms_are_listed_by_pass():
    names = clconv.algorithms("forward")
    assert {"direct", "im2col", "gemm1x1", "implicit_gemm"} <= set(names)
    assert set(names) <= set(clconv.algorithms())
    for pass_ in PASSES:
        assert clconv.algorithms(pass_) == [n for n in REGISTRY if pass_ in REGISTRY[n].passes]
    assert {"depthwise"} <= set(clconv.algorithms("backward_weight")) - set(clconv.algorithms("forward"))
    assert all("splitk" in clconv.algorithms(pass_) for pass_ in PASSES)
