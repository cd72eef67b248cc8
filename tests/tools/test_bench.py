"""The bench and tune commands (clconv/tools/bench.py): a checked benchmark run writes its JSON and
CSV, runs merge by each library's fastest time, and tune measures, stores and then skips a layer."""

from __future__ import annotations

import json

import numpy as np
import pyopencl as cl
import pytest

import clconv
from clconv import tuning
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor


def test_bench_checks_and_writes_outputs(tmp_path, capsys):
    from clconv.tools.bench import main

    out = tmp_path / "b.json"
    csv_path = tmp_path / "b.csv"
    rc = main(["mb2ic3ih6oc4oh6kh3ph1", "--passes", "forward", "--check", "--no-torch", "--repeats", "2",
               "--quiet", "--json", str(out), "--csv", str(csv_path)])
    assert rc == 0
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["pass_"] == "forward" and row["ms"] > 0 and row["error"] < 1e-5
    assert row["stream_ms"] > 0, "the stream of default calls was not timed"
    from clconv.device import is_gpu

    if not is_gpu(clconv.default_queue().device):
        assert np.isfinite(row["numpy_ms"])  # CPU device: the NumPy baseline is timed
    assert csv_path.read_text().count("\n") == 2
    printed = capsys.readouterr().out
    assert "GFLOP/s" in printed and "stream" in printed


def test_bench_json_keeps_what_a_stopped_run_measured(tmp_path, monkeypatch):
    """A benchmark cut short (a time limit, Ctrl-C) leaves its --json file with the layers measured
    before it stopped, marked incomplete; a finished run's is marked complete."""
    from clconv.tools import bench

    real_bench_layer, calls = bench.bench_layer, []

    def stopped_at_the_second(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_bench_layer(*args, **kwargs)

    monkeypatch.setattr(bench, "bench_layer", stopped_at_the_second)
    out = tmp_path / "b.json"
    argv = ["mb1ic2ih5oc3oh5kh3ph1", "mb1ic3ih4oc2oh4kh1ph0", "--passes", "forward", "--no-torch", "--no-numpy",
            "--no-stream", "--repeats", "1", "--quiet", "--json", str(out)]
    with pytest.raises(KeyboardInterrupt):
        bench.main(argv)
    data = json.loads(out.read_text())
    assert [r["layer"] for r in data["rows"]] == [calls[0].label] and data["meta"]["complete"] is False
    assert not (tmp_path / "b.json.partial").exists()
    monkeypatch.setattr(bench, "bench_layer", real_bench_layer)
    assert bench.main(argv) == 0
    data = json.loads(out.read_text())
    assert len(data["rows"]) == 2 and data["meta"]["complete"] is True


def test_tune_measures_and_stores(tmp_path, monkeypatch, capsys, queue):
    from clconv.tools.bench import tune_main

    from clconv import planner

    monkeypatch.setenv("CLCONV_TUNE", "1")
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path / "cache"))  # nothing tuned yet
    tuning.forget_memory()
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


def test_tune_json_keeps_what_a_stopped_run_measured(tmp_path, monkeypatch, queue):
    """A tuning run cut short (a time limit, Ctrl-C) leaves its --json file with every layer-pass
    measured before it stopped, never a half-written one."""
    from clconv.tools.bench import tune_main

    from clconv import planner

    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path / "cache"))
    tuning.forget_memory()
    monkeypatch.setattr(planner, "MAX_CANDIDATES", 2)
    real_tune, calls = planner.tune, []

    def stopped_at_the_second(problem, queue, measure=True):
        calls.append(problem.pass_)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_tune(problem, queue, measure=measure)

    monkeypatch.setattr(planner, "tune", stopped_at_the_second)
    out = tmp_path / "t.json"
    with pytest.raises(KeyboardInterrupt):
        tune_main(["mb1ic4ih5oc3oh5kh1ph0", "--passes", "forward,backward_data", "--quiet", "--json", str(out)])
    (done,) = json.loads(out.read_text())["tuned"]
    assert done["pass"] == "forward" and done["times_ms"]
    assert not (tmp_path / "t.json.partial").exists()


def test_bench_merges_runs_taking_each_librarys_fastest_time(tmp_path, capsys):
    from clconv.tools.bench import main
    from clconv.tools.report import Row

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


def test_stream_timing_counts_each_call_and_syncs_once_per_stream():
    """bench's stream figure times a stream of calls with one synchronisation at its end, after
    one warm-up call and its sync (the PyTorch comparison itself needs torch and a GPU:
    docs/performance.md has its figures)."""
    from clconv.tools.timing import stream_seconds_per_call

    calls, syncs = [], []
    seconds = stream_seconds_per_call(lambda: calls.append(1), lambda: syncs.append(1), calls=7, repeats=3)
    assert len(calls) == 1 + 7 * 3 and len(syncs) == 1 + 3
    assert seconds >= 0


def test_host_overhead_figures_on_the_default_queue():
    """``bench --first-call``'s host figures: the default queue records no profiling events, so the
    kernel times come from its profiling twin (this failed on the H200 once the default queue
    stopped profiling)."""
    from clconv.tools.first_call import host_overhead

    # a 3D layer with dilation takes conv3d (the first-call tool took 2D layers only before)
    for spec in ("mb1ic4ih6oc4oh6kh3ph1", "mb1ic4id3ih6oc4od3oh6kd1kh3pd0ph2dh1"):
        figures = host_overhead(parse_descriptor(spec).geometry, calls=20, repeats=1)
        assert not clconv.default_queue().properties & cl.command_queue_properties.PROFILING_ENABLE
        for key in ("tiny_us", "tiny_alloc_us", "tiny_pool_us", "tiny_launch_us", "tiny_kernel_us", "wall_us",
                    "kernel_us"):
            assert np.isfinite(figures[key]) and figures[key] > 0, (spec, key, figures[key])


def test_first_calls_build_from_source_then_load_from_disk():
    """``bench --first-call``'s three processes: the cold one builds from source, the warm one loads
    every program from the disk cache, and a new geometry (one more image) builds its own."""
    from clconv.tools.first_call import first_call_costs

    result = first_call_costs("mb1ic4ih6oc4oh6kh3ph1", None, quiet=True, host=False)
    cold, warm, new = result["cold"], result["warm_disk_cache"], result["new_geometry"]
    assert cold["source_builds"] >= 1 and cold["disk_hits"] == 0, cold
    assert warm["source_builds"] == 0 and warm["disk_hits"] == cold["source_builds"], warm
    assert new["source_builds"] >= 1, new
    assert all(run["first_call_s"] > 0 for run in (cold, warm, new))
