"""The performance work's kernels and choices: every GEMM tile variant (vector widths 1/2/4, tiles that
do and do not divide the matrices, load loops whose trip count does not divide the tile) on every
pass, against the float64 reference; the tile heuristic; bounded tuning; the bench/tune commands."""

from __future__ import annotations

import json
import types

import numpy as np
import pyopencl as cl
import pytest

import clconv
from clconv import reference, tuning
from clconv import planner
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.runtime import Operand
from clconv.algorithms.gemm import GPU_TILES, TILE_KEYS, gemm_tiles, tile_config
from clconv.shapes import parse_descriptor

from helpers import assert_matches, random, run_prepared

# Odd sizes everywhere so that M, N and K all leave tile remainders; a grouped, strided, dilated
# case; a transposed-conv case (its forward is the canonical data gradient); an exactly tiled 1x1.
GEOMETRIES = {
    "k3p1-odd": "mb2ic5ih9oc7oh9kh3ph1",
    "g2k3s2d2": "mb2g2ic8ih10oc12oh4kh3sh2ph1dh1",
    "deconv-k4s2": "mb2ic6ih5oc4oh10kh4sh2ph1",
}
EXACT_1X1 = "mb2ic16ih8oc32oh8kh1ph0"  # M=32, N=128, K=16: divides TM=32, TN=64, TK=16 (no bounds checks)

TILES = {
    # TM, TN, TK, WM, WN, VW, PIPE
    "vw4-uneven-loads": (24, 32, 8, 4, 4, 4, 1),  # 48 work-items: the B tile's 256 loads do not divide
    "vw2": (32, 64, 16, 2, 4, 2, 1),
    "vw4-nopipe": (24, 32, 8, 4, 4, 4, 0),
    "vw1": (16, 16, 8, 2, 2, 1, 1),
}
PASSES = ("forward", "backward_data", "backward_weight")


def _run(queue, problem, algorithm, config, rng):
    run_prepared(queue, rng, problem, algorithm, config)


def _config(tile):
    return dict(zip(TILE_KEYS, tile))


# Every tile on every geometry, except the two variants that only change the vector width or the
# pipelining: those run on one geometry (PoCL builds are slow), never generated for the others.
TILE_CASES = [
    pytest.param(geometry, tile, id=f"{geometry}-{tile}")
    for geometry in GEOMETRIES
    for tile in TILES
    if tile not in ("vw1", "vw4-nopipe") or geometry == "k3p1-odd"
]


@pytest.mark.parametrize("pass_", PASSES)
@pytest.mark.parametrize("geometry, tile", TILE_CASES)
def test_implicit_gemm_tiles_match_reference(queue, rng, geometry, pass_, tile):
    g = parse_descriptor(GEOMETRIES[geometry]).geometry
    _run(queue, Problem(g, pass_, "float32"), REGISTRY["implicit_gemm"], _config(TILES[tile]), rng)


@pytest.mark.parametrize("pass_", PASSES)
def test_exactly_tiled_1x1_without_bounds_checks(queue, rng, pass_):
    g = parse_descriptor(EXACT_1X1).geometry
    config = _config((32, 64, 16, 4, 8, 4, 0))
    problem = Problem(g, pass_, "float32")
    _run(queue, problem, REGISTRY["gemm1x1"], config, rng)


@pytest.mark.parametrize("pass_", PASSES)
def test_im2col_with_vector_tiles(queue, rng, pass_):
    g = parse_descriptor(GEOMETRIES["k3p1-odd"]).geometry
    _run(queue, Problem(g, pass_, "float32"), REGISTRY["im2col"], _config(TILES["vw4-uneven-loads"]), rng)


def test_splitk_with_vector_tiles(queue, rng):
    g = parse_descriptor("mb4ic6ih16oc10oh16kh3ph1").geometry  # contraction 1024: 4 pieces of 256
    problem = Problem(g, "backward_weight", "float32")
    config = {**_config(TILES["vw4-uneven-loads"]), "splits": 4}
    _run(queue, problem, REGISTRY["splitk"], config, rng)


def test_old_tuning_entries_without_vector_width_still_run():
    old = {"TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4}
    assert tile_config(old) == {**old, "VW": 1, "PIPE": 1}


# -- the tile heuristic --------------------------------------------------------------------------------


def _fake_gpu(units=132):
    return types.SimpleNamespace(type=cl.device_type.GPU, max_compute_units=units, max_work_group_size=1024,
                                 local_mem_size=48 * 1024)


def test_gpu_tiles_fill_the_compute_units():
    # 7x7x512 3x3 layer at batch 32: M=512, N=1568. 128x128 tiles give 52 work-groups for 132 units.
    first = gemm_tiles(512, 1568, _fake_gpu(), 4)[0]
    count = -(-512 // first["TM"]) * -(-1568 // first["TN"])
    assert count >= 132, first
    # a big GEMM that every tile divides keeps the table's first (largest-reuse) choice
    big = gemm_tiles(4096, 100352, _fake_gpu(), 4)
    assert (big[0]["TM"], big[0]["TN"]) == GPU_TILES[0][:2] and big[0]["TM"] * big[0]["TN"] >= 128 * 64
    # a matrix 128x128 tiles divide but 128x64 ones would pad is not given the padded tile first
    odd = gemm_tiles(4096, 128 * 700 + 64, _fake_gpu(), 4)
    assert odd[0]["TN"] == 64 or (128 * 700 + 64) % odd[0]["TN"] == 0


def test_gpu_tiles_are_valid_templates():
    from clconv.algorithms.gemm import CPU_TILES

    for tm, tn, _tk, wm, wn, vw, pipe in GPU_TILES + CPU_TILES:
        assert tm % wm == 0 and tn % wn == 0 and wm % vw == 0 and wn % vw == 0
        assert vw in (1, 2, 4) and pipe in (0, 1)


def test_candidate_set_is_bounded(queue):
    from clconv.planner import candidates

    for desc in ("mb32ic64ih56oc64oh56kh3ph1", "mb32ic256ih56oc64oh56kh1ph0", "mb32g144ic144ih56oc144oh56kh3ph1"):
        g = parse_descriptor(desc).geometry
        for pass_ in PASSES:
            options = candidates(Problem(g, pass_, "float32"), queue.device)
            assert 1 <= len(options) <= 10, (desc, pass_, len(options))


def test_heuristic_picks(queue):
    from clconv.planner import candidates

    def first(desc, pass_):
        return candidates(Problem(parse_descriptor(desc).geometry, pass_, "float32"), queue.device)[0][0].name

    assert first("mb32ic256ih56oc64oh56kh1ph0", "forward") == "gemm1x1"
    from clconv.device import is_gpu

    # depthwise: `direct` measured fastest of these on the H200; the row kernel on CPUs
    expected = "direct" if is_gpu(queue.device) else "depthwise_rows"
    assert first("mb32g144ic144ih56oc144oh56kh3ph1", "forward") == expected
    assert first("mb32ic64ih56oc64oh56kh3ph1", "forward") in ("implicit_gemm", "im2col")


# -- bench and tune commands ---------------------------------------------------------------------------


def test_bench_checks_and_writes_outputs(tmp_path, capsys):
    from clconv.bench import main

    out = tmp_path / "b.json"
    csv_path = tmp_path / "b.csv"
    rc = main(["mb2ic3ih6oc4oh6kh3ph1", "--passes", "forward", "--check", "--no-torch", "--repeats", "2",
               "--quiet", "--json", str(out), "--csv", str(csv_path)])
    assert rc == 0
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["pass_"] == "forward" and row["ms"] > 0 and row["error"] < 1e-5
    from clconv.device import is_gpu

    if not is_gpu(clconv.default_queue().device):
        assert np.isfinite(row["numpy_ms"])  # CPU device: the NumPy baseline is timed
    assert csv_path.read_text().count("\n") == 2
    assert "GFLOP/s" in capsys.readouterr().out


def test_tune_measures_and_stores(tmp_path, monkeypatch, capsys, queue):
    from clconv.bench import tune_main

    from clconv import planner

    monkeypatch.setenv("CLCONV_TUNE", "1")
    monkeypatch.setattr(planner, "MAX_CANDIDATES", 2)  # two builds: PoCL builds are slow
    desc = "mb1ic4ih5oc3oh5kh1ph0"
    out = tmp_path / "t.json"
    assert tune_main([desc, "--passes", "backward_data", "--quiet", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    (done,) = data["tuned"]
    assert done["times_ms"] and done["algorithm"] in REGISTRY
    g = parse_descriptor(desc).geometry
    entry = tuning.lookup(queue.device, Problem(g, "backward_data", "float32").key())
    assert entry["measured"] and entry["algorithm"] == done["algorithm"]
    # a second run finds it tuned and measures nothing
    assert tune_main([desc, "--passes", "backward_data", "--quiet"]) == 0
    assert "1 already tuned" in capsys.readouterr().out


# -- the depthwise weight gradient ---------------------------------------------------------------------

DEPTHWISE = {
    "k3p1": "mb2g6ic6ih9oc6oh9kh3ph1",
    "k3s2d2-mult2": "mb3g4ic4ih11oc8kh3sh2ph2dh1",  # channel multiplier 2, stride, dilation
    "1d-k5": "mb2g3ic3iw17oc3kw5pw2",
}


@pytest.mark.parametrize("desc", list(DEPTHWISE.values()), ids=list(DEPTHWISE))
def test_depthwise_weight_gradient_matches_reference(queue, rng, desc):
    g = parse_descriptor(desc).geometry
    problem = Problem(g, "backward_weight", "float32")
    algorithm = REGISTRY["depthwise"]
    assert algorithm.decline_reason(problem, queue.device) is None
    for config in ({"wg": 64, "slices": 3}, algorithm.configs(problem, queue.device)[0]):
        _run(queue, problem, algorithm, config, rng)


def test_depthwise_declines_what_it_cannot_serve(queue):
    dense = Problem(parse_descriptor("mb2ic4ih5oc4kh3ph1").geometry, "backward_weight", "float32")
    assert "depthwise" in REGISTRY["depthwise"].decline_reason(dense, queue.device)
    big = Problem(parse_descriptor("mb1g2ic2ih9oc2kh7ph3").geometry, "backward_weight", "float32")
    assert "taps" in REGISTRY["depthwise"].decline_reason(big, queue.device)
    assert "backward_weight" in REGISTRY["depthwise"].decline_reason(
        Problem(dense.geometry, "forward", "float32"), queue.device)


def test_depthwise_weight_gradient_float64(queue, rng):
    from clconv.device import supports_fp64

    if not supports_fp64(queue.device):
        pytest.skip(f"{queue.device.name} has no cl_khr_fp64")
    g = parse_descriptor(DEPTHWISE["k3p1"]).geometry
    x, dy = random(rng, g.input_shape, np.float64), random(rng, g.output_shape, np.float64)
    problem = Problem(g, "backward_weight", "float64")
    runner = planner.prepare(problem, REGISTRY["depthwise"], {"wg": 64, "slices": 2}, queue)
    mf = cl.mem_flags
    out = np.full(g.weight_shape, np.nan)
    bufs = {"x": cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=x),
            "dy": cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=dy),
            "dw": cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)}
    cl.wait_for_events(runner.run(queue, {k: Operand(v) for k, v in bufs.items()}))
    cl.enqueue_copy(queue, out, bufs["dw"])
    queue.finish()
    assert_matches(out, reference.backward_weight(g, x, dy), g.batch * g.out_pixels, np.float64)


def test_bench_merges_runs_taking_each_librarys_fastest_time(tmp_path, capsys):
    from clconv.bench import Row, main

    def run(ms, ref_ms, numpy_ms, algorithm, error):
        row = Row("l", "mb1ic2ih4oc2oh4kh3ph1", "forward", "fwd", algorithm=algorithm, ms=ms, ref_ms=ref_ms,
                  numpy_ms=numpy_ms, error=error, ratio=ms / ref_ms)
        return {"meta": {"device": "d", "reference": "torch-cpu"}, "rows": [row.__dict__]}

    files = []
    for i, data in enumerate([run(2.0, 1.0, 3.0, "im2col", 1e-7), run(1.5, 1.2, 2.5, "direct", 3e-7)]):
        files.append(tmp_path / f"run{i}.json")
        files[-1].write_text(json.dumps(data))
    merged = tmp_path / "merged.json"
    assert main(["--from-json", *map(str, files), "--json", str(merged)]) == 0
    (row,) = json.loads(merged.read_text())["rows"]
    assert (row["ms"], row["ref_ms"], row["numpy_ms"], row["algorithm"]) == (1.5, 1.0, 2.5, "direct")
    assert row["ratio"] == 1.5 and row["error"] == 3e-7
    assert "fastest of the runs" in capsys.readouterr().out
