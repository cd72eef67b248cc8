"""Plans as data (clconv/plan.py): what an algorithm's plan for a problem holds, checked without
rendering, building or running it.  Every plan of every algorithm over the reliability cases reads
only its pass's operands (clconv.passes) and its own workspaces, and writes its result; and the
plans whose shape is documented have the calls and workspaces the documentation says."""

from __future__ import annotations

import numpy as np
import pytest

from clconv.algorithms import REGISTRY
from clconv.plan import Arg, Plan, Problem

from cases import COVER, SPLITK_CASE, Case, every_pass_algorithm, geometry, param_id

def _args(plan: Plan) -> list[Arg]:
    return [arg for call in plan.calls for arg in call.args if isinstance(arg, Arg)]


@pytest.fixture(scope="module")
def combos(queue):
    """Every serving (case, pass, algorithm) of the reliability set (the device decides the configs)."""
    return every_pass_algorithm(queue.device, COVER + [SPLITK_CASE])


def test_every_plan_reads_its_operands_and_workspaces_and_writes_its_result(queue, combos):
    assert combos
    for case, pass_, name in combos:
        problem = case.problem(pass_)
        algorithm = REGISTRY[name]
        for config in algorithm.configs(problem, queue.device):
            plan = algorithm.plan(problem, config, queue.device)
            label = f"{param_id(case, pass_, name)} {config}"
            assert plan.problem == problem and plan.algorithm == name and plan.calls, label
            spec = problem.spec
            allowed = {*spec.inputs, spec.result, *plan.workspaces} | ({"bias", "residual"} if spec.takes_bias else set())
            roles = [arg.role for arg in _args(plan)]
            assert set(roles) <= allowed, (label, roles)
            assert spec.result in roles, f"{label}: no call writes {spec.result}"
            assert set(spec.inputs) <= set(roles), f"{label}: an input is never read"
            assert all(size > 0 for size in plan.workspaces.values()), (label, plan.workspaces)
            for arg in _args(plan):
                if arg.fallback is not None:
                    assert arg.fallback in allowed, label
            for call in plan.calls:
                assert call.local_size is None or len(call.local_size) == len(call.global_size), label
                assert all(isinstance(a, (Arg, np.generic)) for a in call.args), label


@pytest.mark.parametrize("pass_, fold", [("backward_data", "clc_col2im"), ("backward_weight", "clc_im2col")])
def test_im2col_plan_runs_the_batch_in_chunks_that_fit_the_workspace_limit(queue, monkeypatch, pass_, fold):
    """A workspace limit of one image's column buffer: im2col plans the batch of 3 as 3 chunks, each
    filling and consuming the column buffer once (the CPU GEMM packs the weight once before them)."""
    g = Case(2, 3, 2, 3, (5, 6), (2, 3), 1, (0, 1)).geometry  # test_gemm_configs.py's CHUNKED
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(g.in_channels * g.kernel_volume * g.out_pixels * 4))
    problem = Problem(g, pass_, "float32")
    im2col = REGISTRY["im2col"]
    assert im2col.chunk_batch(problem, queue.device) == 1
    plan = im2col.plan(problem, im2col.configs(problem, queue.device)[0], queue.device)
    entries = [call.entry for call in plan.calls]
    packed = entries.count("clc_pack_a")
    assert packed <= 1 and len(entries) == 2 * 3 + packed, entries
    assert sum(fold in entry for entry in entries) == 3, entries
    assert plan.workspaces["col"] == g.in_channels * g.kernel_volume * g.out_pixels * 4


def test_splitk_plan_sums_its_pieces_in_a_second_kernel(queue, monkeypatch):
    problem = SPLITK_CASE.problem("backward_weight")
    splitk = REGISTRY["splitk"]
    config = {**splitk.configs(problem, queue.device)[0]}
    monkeypatch.setattr(type(splitk), "ONE_LAUNCH", False)  # GPU tiles may sum in the GEMM's launch
    plan = splitk.plan(problem, config, queue.device)
    g = problem.geometry
    assert config["splits"] >= 2 and plan.calls[-1].entry == "clc_splitk_sum"
    assert plan.workspaces["partial"] == config["splits"] * g.weight_elements * 4


@pytest.mark.parametrize("pass_, result", [("forward", "y"), ("backward_data", "dx")])
def test_splitk_of_the_result_passes_sums_partials_through_the_epilogue(queue, pass_, result, monkeypatch):
    """The forward's and data gradient's split-K: the GEMM writes each piece in the result's
    layout into a clc_real workspace (no epilogue, no bias), the second kernel sums the pieces
    in order into the result, with the bias and the epilogue."""
    from clconv.epilogue import Epilogue

    g = geometry("n2g1c32o30i6x5k3x3s1x1p1x1d1x1")
    problem = Problem(g, pass_, "float32", bias=True, epilogue=Epilogue("relu", residual=True))
    splitk = REGISTRY["splitk"]
    config = splitk.configs(problem, queue.device)[0]
    monkeypatch.setattr(type(splitk), "ONE_LAUNCH", False)  # GPU tiles may sum in the GEMM's launch
    plan = splitk.plan(problem, config, queue.device)
    gemm, total = plan.calls[-2], plan.calls[-1]
    assert config["splits"] >= 2 and total.entry == "clc_splitk_result"
    elements = g.batch * (g.out_channels * g.out_pixels if pass_ == "forward" else g.in_channels * g.in_pixels)
    assert plan.workspaces["partial"] == config["splits"] * elements * 4
    assert [arg.role for arg in total.args] == ["partial", "bias", "residual", result]
    assert gemm.source.params["c"]["partial"] == elements and not gemm.source.params["bias"]
    assert gemm.source.params["epilogue"].is_identity and total.source.params["epilogue"] == problem.epilogue
    assert total.source.params["bias"]


def test_depthwise_rows_weight_gradient_in_slices_plans_a_sum(queue):
    problem = Problem(geometry("n1g2c2o4i3x4x18k2x3x3s1x1x1p1x1x1d1x1x1"), "backward_weight", "float32")
    plan = REGISTRY["depthwise_rows"].plan(problem, {"vn": 16, "lx": 8, "slices": 3}, queue.device)
    assert [call.entry for call in plan.calls] == ["clc_dw_rows_backward_weight", "clc_splitk_sum"]
    assert plan.workspace_bytes == 3 * problem.geometry.weight_elements * 4
    single = REGISTRY["depthwise_rows"].plan(problem, {"vn": 16, "lx": 8, "slices": 1}, queue.device)
    assert len(single.calls) == 1 and not single.workspaces


# -- what a program is rendered from (templates.RenderedSource.digest: the builder's index) ----------


def test_every_plan_source_has_a_digest_and_distinct_sources_distinct_digests(queue, combos):
    # a source without a digest would be rendered in every new process; two sources that render
    # differently must never share one (the index would load the other's program)
    from clconv import templates

    seen: dict[str, str] = {}
    for case, pass_, name in combos:
        problem = case.problem(pass_)
        algorithm = REGISTRY[name]
        for config in algorithm.configs(problem, queue.device)[:2]:
            sources, _ = templates.render_plan(algorithm.plan(problem, config, queue.device))
            for source in sources:
                assert source.digest is not None, (name, pass_, case)
                text = seen.setdefault(source.digest, source.text)
                assert text == source.text, f"two sources share the digest {source.digest}"


@pytest.mark.parametrize("left, right", [(1, 1.0), (1, True), (0.1, 0.1 + 2**-56), ((1, 2), [1, 2]),
                                         ({"a": 1}, {"a": 1.0}), (np.int32(1), np.int64(1)), ("1", 1)])
def test_canonical_forms_tell_apart_what_renders_differently(left, right):
    from clconv.templates import _canonical

    assert _canonical(left) != _canonical(right)
    assert _canonical(left) == _canonical(left)


@pytest.mark.parametrize("value", [object(), {1: 2}, np.zeros(3), {"a": [object()]}])
def test_a_parameter_without_a_canonical_form_leaves_the_source_without_a_digest(value):
    from clconv.templates import RenderedSource

    assert RenderedSource("direct.mako", ("clc_direct_forward",), {"geom": value}).digest is None


def test_splitk_gpu_tiles_sum_in_one_launch_only_where_work_groups_may_hand_over(queue, monkeypatch):
    """A GPU tile's split-K sums its pieces in the GEMM's launch (one counter per output tile, a
    zeroed workspace) on a device with a fence for the handoff (limits.handoff_fence_of) where the
    last piece's sum is short, and in a second kernel elsewhere or with ONE_LAUNCH off; CPU tiles
    always in a second kernel."""
    import dataclasses

    from clconv import limits
    from clconv.algorithms.gemm import TILE_KEYS, cpu_config
    from clconv.algorithms.splitk import SplitK
    from clconv.plan import ZEROED_WORKSPACES

    g = geometry("n1g1c64o7i5x5k3x3s1x1p1x1d1x1")
    problem = Problem(g, "forward", "float32", bias=True)
    splitk = REGISTRY["splitk"]
    tile = {**dict(zip(TILE_KEYS, (24, 32, 8, 4, 4, 4, 1))), "splits": 3}
    fit = limits.of(queue.device)
    monkeypatch.setitem(limits._described, queue.device, dataclasses.replace(fit, handoff_fence="mem_fence"))
    plan = splitk.plan(problem, tile, queue.device)
    assert [call.entry for call in plan.calls] == ["clc_gemm"]
    tiles = -(-g.out_channels // 24) * -(-g.out_pixels // 32)
    assert plan.workspaces["tickets"] == 4 * tiles and "tickets" in ZEROED_WORKSPACES
    assert [arg.role for arg in plan.calls[0].args if isinstance(arg, Arg)][-2:] == ["tickets", "y"]
    assert plan.calls[0].source.params["c"]["finish"] == 3 and plan.calls[0].source.params["bias"]
    # a long sum for the tile's last piece (9 pieces x 4 x 4 > FINISH_MAX_LOADS): a second kernel
    assert 9 * 16 > SplitK.FINISH_MAX_LOADS >= 3 * 16
    long_sum = splitk.plan(Problem(geometry("n1g1c288o7i5x5k3x3s1x1p1x1d1x1"), "forward", "float32"),
                           {**tile, "splits": 9}, queue.device)
    assert [call.entry for call in long_sum.calls] == ["clc_gemm", "clc_splitk_result"]
    # the twins a check compares: the rule's choice forced either way
    forced = splitk.plan(Problem(geometry("n1g1c288o7i5x5k3x3s1x1p1x1d1x1"), "forward", "float32"),
                         {**tile, "splits": 9}, queue.device, one_launch=True)
    assert [call.entry for call in forced.calls] == ["clc_gemm"] and "tickets" in forced.workspaces
    assert splitk.plan(problem, tile, queue.device, one_launch=False).calls[-1].entry == "clc_splitk_result"
    cpu = splitk.plan(problem, {**cpu_config(4, 8, 2), "splits": 3}, queue.device)
    assert cpu.calls[-1].entry == "clc_splitk_result" and "tickets" not in cpu.workspaces
    with pytest.raises(ValueError, match="GPU tiles on a device with a handoff fence"):
        splitk.plan(problem, {**cpu_config(4, 8, 2), "splits": 3}, queue.device, one_launch=True)
    monkeypatch.setattr(SplitK, "ONE_LAUNCH", False)
    assert splitk.plan(problem, tile, queue.device).calls[-1].entry == "clc_splitk_result"
    monkeypatch.setattr(SplitK, "ONE_LAUNCH", True)
    monkeypatch.setitem(limits._described, queue.device, dataclasses.replace(fit, handoff_fence=""))
    two = splitk.plan(problem, tile, queue.device)
    assert [call.entry for call in two.calls] == ["clc_gemm", "clc_splitk_result"] and "tickets" not in two.workspaces
    with pytest.raises(ValueError, match="handoff fence"):
        splitk.plan(problem, tile, queue.device, one_launch=True)


def test_work_groups_hand_over_on_cpu_devices_and_nvidia_gpus(monkeypatch):
    """limits.handoff_fence_of: OpenCL's fence on CPU devices, PTX's device-scope membar.gl on
    NVIDIA's GPUs (NVIDIA_HANDOFF, checked on an H100; their compiler lowers OpenCL's fence to a
    work-group's scope), none on other GPUs nor on Oclgrind's simulator, which reports every type
    at once."""
    import pyopencl as cl

    from clconv import limits
    from clconv.limits import handoff_fence_of

    class Stand:
        def __init__(self, kind, vendor_id=0):
            self.type, self.vendor_id = kind, vendor_id

    t = cl.device_type
    assert handoff_fence_of(Stand(t.CPU)) == "mem_fence"
    assert limits.NVIDIA_HANDOFF and handoff_fence_of(Stand(t.GPU, 0x10DE)) == "membar.gl"
    monkeypatch.setattr(limits, "NVIDIA_HANDOFF", False)  # the switch back to two launches
    assert handoff_fence_of(Stand(t.GPU, 0x10DE)) == ""
    assert handoff_fence_of(Stand(t.GPU, 0x1002)) == "" and handoff_fence_of(Stand(t.GPU, 0x8086)) == ""
    assert handoff_fence_of(Stand(t.CPU | t.GPU | t.ACCELERATOR | t.DEFAULT, 0x42)) == ""
