"""The ``clconv`` command line: every subcommand in-process (``main(argv, out)``), one real
``python -m clconv info`` subprocess, and the template-tweaking workflow end to end.

Geometries differ between tests on purpose: prepared runners are memoised per process by
geometry, so a test that swaps a template must use a geometry no other test has run.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import types

import pytest

from clconv.tools import cli
from clconv.templates import builtin_template_dir


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(list(argv), out=out)
    return code, out.getvalue()


def test_python_m_clconv_info_lists_the_default_device_and_caches(tmp_path):
    env = dict(os.environ, CLCONV_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "clconv", "info"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "platform 0:" in done.stdout
    assert "max work-group size" in done.stdout and "fp64" in done.stdout
    assert "default device:" in done.stdout
    assert f"cache directory: {tmp_path}" in done.stdout


def test_render_prints_the_source_and_the_chosen_config():
    code, text = run_cli("render", "conv2d", "--input", "1,3,9,7", "--weight", "5,3,3,3", "--padding", "1",
                         "--algorithm", "direct")
    assert code == 0
    assert "forward of n1g1c3o5i9x7k3x3s1x1p1x1d1x1 (float32) with algorithm 'direct', config {'wg':" in text
    assert "__kernel void clc_direct_forward" in text
    assert "#define CLC_CO 5" in text


def test_render_gradient_and_transposed_ops_derive_grad_output():
    code, text = run_cli("render", "conv_transpose2d_weight", "--input", "2,4,3,3", "--weight", "4,2,3,3",
                         "--stride", "2", "--output-padding", "1", "--groups", "2")
    assert code == 0
    # the canonical geometry of the transposed op: its output (2, 4, 8, 8) is the canonical input
    assert "backward_weight of n2g2c4o4i8x8k3x3s2x2p0x0d1x1" in text
    code, text = run_cli("render", "conv1d_input", "--input", "3,10", "--weight", "2,3,3",
                         "--padding", "1:2", "--algorithm", "im2col")
    assert code == 0
    assert "backward_data of n1g1c3o2i10k3s1p1e2d1" in text and "rendered from im2col" in text  # im2col_rows.mako on CPUs


def test_check_runs_every_algorithm_of_the_pass_against_the_reference():
    code, text = run_cli("check", "conv1d_weight", "--input", "2,3,11", "--weight", "4,3,3", "--padding", "1")
    assert code == 0, text
    rows = {line.split()[0]: line.split()[1] for line in text.splitlines()[3:-1]}
    assert rows == {"direct": "pass", "im2col": "pass", "gemm1x1": "skip", "implicit_gemm": "pass",
                    "splitk": "skip", "depthwise": "skip", "depthwise_rows": "skip", "winograd": "skip"}
    assert "backward_weight pass of n2g1c3o4i11k3s1p1d1" in text
    assert text.splitlines()[-1] == "3 algorithm(s) run, 5 algorithm(s) skipped: all passed"


def test_check_all_configs_runs_every_tile_configuration():
    import clconv
    from clconv import planner
    from clconv.geometry import resolve_conv
    from clconv.plan import Problem

    g = resolve_conv(1, (2, 3, 13), (2, 3, 3), None, 2, 1, 1, 1).geometry
    direct = planner.get_algorithm("direct", "forward")
    configs = direct.configs(Problem(g, "forward", "float32"), clconv.default_queue().device)
    code, text = run_cli("check", "conv1d", "--input", "2,3,13", "--weight", "2,3,3", "--stride", "2", "--padding", "1",
                         "--algorithm", "direct", "--all-configs")
    assert code == 0, text
    rows = [line.split() for line in text.splitlines()[3:-1]]
    assert [row[:2] for row in rows] == [["direct", "pass"]] * len(configs)
    assert [" ".join(row[4:]) for row in rows] == [" ".join(f"{k}={c[k]}" for k in sorted(c)) for c in configs]
    assert text.splitlines()[-1] == f"{len(configs)} configuration(s) run, 0 algorithm(s) skipped: all passed"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_check_all_configs_with_half_storage(dtype):
    # each configuration's result is poisoned from the host: pyopencl's fill() would build a kernel
    # in the dtype, which fails for bfloat16 and for float16 without cl_khr_fp16 (PoCL on some CPUs)
    code, text = run_cli("check", "conv1d", "--input", "2,3,13", "--weight", "2,3,3", "--padding", "1",
                         "--dtype", dtype, "--algorithm", "direct", "--all-configs")
    assert code == 0, text
    assert "ERROR" not in text and text.splitlines()[-1].endswith("all passed"), text


def _copy_direct_template(folder, replace: tuple[str, str]):
    source = (builtin_template_dir() / "direct.mako").read_text()
    assert replace[0] in source, "the built-in direct.mako changed; update this test's edit"
    (folder / "direct.mako").write_text(source.replace(replace[0], replace[1], 1))


def test_template_tweaking_workflow_copy_edit_render_check(tmp_path, monkeypatch):
    """The README's workflow: copy a built-in template, point CLCONV_TEMPLATE_PATH at it, edit;
    `clconv templates` shows which copy wins, `render` shows the edit, `check` runs it."""
    marker = "/* tweaked copy of direct.mako (test_cli) */"
    _copy_direct_template(tmp_path, ("__kernel void clc_direct_forward", marker + "\n__kernel void clc_direct_forward"))
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(tmp_path))

    code, text = run_cli("templates")
    assert code == 0
    assert f"direct.mako      {tmp_path / 'direct.mako'}" in text
    assert f"shadows {builtin_template_dir() / 'direct.mako'}" in text
    assert f"gemm.mako        {builtin_template_dir() / 'gemm.mako'}" in text

    shape = ("--input", "1,2,6,5", "--weight", "3,2,2,2", "--stride", "1,2")
    code, text = run_cli("render", "conv2d", *shape, "--algorithm", "direct")
    assert code == 0 and marker in text
    code, text = run_cli("check", "conv2d", *shape, "--algorithm", "direct")
    assert code == 0, text
    assert text.splitlines()[3].split()[:2] == ["direct", "pass"]

    monkeypatch.delenv("CLCONV_TEMPLATE_PATH")
    code, text = run_cli("render", "conv2d", *shape, "--algorithm", "direct")
    assert code == 0 and marker not in text


def test_check_fails_a_broken_template(tmp_path, monkeypatch):
    """A template tweak that computes the wrong thing is caught: FAIL and exit status 1."""
    _copy_direct_template(tmp_path, ("clc_store_result(y_base + y_off, CLC_Y_AT(b, channel, p), acc,",
                                     "clc_store_result(y_base + y_off, CLC_Y_AT(b, channel, p), 2 * acc,"))
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(tmp_path))
    code, text = run_cli("check", "conv2d", "--input", "1,2,5,6", "--weight", "2,2,2,3", "--algorithm", "direct")
    assert code == 1
    assert text.splitlines()[3].split()[:2] == ["direct", "FAIL"]
    assert text.splitlines()[-1] == "1 algorithm(s) run, 0 algorithm(s) skipped: 1 failed"


def test_usage_errors_are_one_line_with_exit_status_2(capsys):
    cases = [
        (["render", "conv4d", "--input", "1,1,4,4", "--weight", "1,1,1,1"], "clconv: error: unknown op 'conv4d'"),
        (["render", "conv2d", "--input", "1,a", "--weight", "1,1,1,1"], "clconv: error: --input must be"),
        (["render", "conv2d", "--input", "1,1,4,4"], "clconv render: error: the following arguments are required: --weight"),
        (["render", "conv2d_input", "--input", "1,1,4,4", "--weight", "1,1,1,1", "--bias"],
         "clconv: error: --bias applies to conv*d and conv_transpose*d"),
        (["render", "conv2d", "--input", "1,1,4,4", "--weight", "1,1,1,1", "--output-padding", "1"],
         "clconv: error: --output-padding applies to the transposed ops"),
        (["frobnicate"], "clconv: error: argument COMMAND: invalid choice: 'frobnicate'"),
        (["cache"], "clconv cache: error: the following arguments are required: ACTION"),
    ]
    for argv, expected in cases:
        code, _ = run_cli(*argv)
        err = capsys.readouterr().err
        assert code == 2, argv
        assert err.startswith(expected), err
        assert err.count("\n") == 1, err


def test_a_delegated_tools_exit_message_is_printed(capsys):
    """A tool behind the CLI that stops with sys.exit("message") (bench --first-call given a transposed
    layer, bench --passes with a bad name) exits 1 with its message, not silently."""
    code, _ = run_cli("bench", "--first-call", "deconv/shapes_2d")
    assert code == 1 and "not a transposed one" in capsys.readouterr().err
    code, _ = run_cli("bench", "tiny", "--passes", "sideways", "--no-torch")
    assert code == 1 and "--passes must name passes" in capsys.readouterr().err


def test_geometry_errors_are_one_line_with_exit_status_1(capsys):
    code, _ = run_cli("render", "conv2d", "--input", "1,3,8,8", "--weight", "4,2,3,3")
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("clconv: error: ValueError: weight of shape (4, 2, 3, 3) expects 2 input channels")
    assert err.count("\n") == 1 and "Traceback" not in err
    code, _ = run_cli("render", "conv2d", "--input", "1,3,8,8", "--weight", "4,3,3,3", "--algorithm", "gemm1x1")
    assert code == 1 and "it serves only 1x1 kernels" in capsys.readouterr().err


def test_debug_shows_the_exception(capsys):
    with pytest.raises(ValueError, match="expects 2 input channels"):
        cli.main(["--debug", "render", "conv2d", "--input", "1,3,8,8", "--weight", "4,2,3,3"])
    with pytest.raises(ValueError, match="expects 2 input channels"):
        cli.main(["render", "conv2d", "--input", "1,3,8,8", "--weight", "4,2,3,3", "--debug"])


def test_help_exits_0(capsys):
    assert cli.main(["--help"]) == 0
    assert "render" in capsys.readouterr().out
    assert cli.main(["check", "--help"]) == 0
    assert "--tolerance" in capsys.readouterr().out


def test_cache_path_list_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))
    programs, tuning = tmp_path / "programs-v1" / "ab", tmp_path / "tuning-v1"
    programs.mkdir(parents=True)
    tuning.mkdir()
    (programs / "ab12.bin").write_bytes(b"x" * 2048)
    entry = {"algorithm": "direct", "config": {"wg": 64}}
    (tuning / "0123abcd.json").write_text(json.dumps({"version": 1, "entries": {"forward:n1:float32:nobias": entry}}))

    assert run_cli("cache", "path") == (0, f"{tmp_path}\n")
    code, text = run_cli("cache", "list", "--entries", "--files")
    assert code == 0
    assert "programs: 1 compiled programs, 2.0 KiB" in text
    assert str(programs / "ab12.bin") in text
    assert "0123abcd.json: 1 entries, a device not present here" in text
    assert "forward:n1:float32:nobias -> direct wg=64" in text

    code, text = run_cli("cache", "clear", "--tuning")
    assert code == 0 and "removed tuning: 1 files" in text
    assert not tuning.exists() and (programs / "ab12.bin").exists()
    code, text = run_cli("cache", "clear")
    assert code == 0 and "removed programs: 1 files, 2.0 KiB" in text
    assert "removed failed: 0 files" in text and "removed templates: 0 files" in text
    assert not (tmp_path / "programs-v1").exists()
    assert tmp_path.exists()  # only clconv's own subdirectories go


def test_bench_tune_and_demo_delegate_the_rest_of_the_command_line(monkeypatch):
    calls = []
    fake = types.ModuleType("clconv.tools.bench")
    fake.main = lambda argv: calls.append(("bench", argv)) or 0  # type: ignore[attr-defined]
    fake.tune_main = lambda argv: calls.append(("tune", argv)) or 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "clconv.tools.bench", fake)
    import clconv.tools.demo

    monkeypatch.setattr(clconv.tools.demo, "main", lambda argv: calls.append(("demo", argv)) or 0)
    assert cli.main(["bench", "tiny", "--json", "x.json"]) == 0
    assert cli.main(["--debug", "tune", "--help"]) == 3
    assert cli.main(["demo", "--repeats", "1"]) == 0
    assert calls == [("bench", ["tiny", "--json", "x.json"]), ("tune", ["--help"]), ("demo", ["--repeats", "1"])]


def test_bench_without_the_bench_module_is_a_one_line_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "clconv.tools.bench", None)  # import fails as if the file were absent
    assert cli.main(["bench"]) == 1
    err = capsys.readouterr().err
    assert err == "clconv: error: 'clconv bench' needs clconv.tools.bench, which this installation does not have\n"


def test_console_script_is_declared():
    import configparser
    from pathlib import Path

    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    assert "clconv = clconv.tools.cli:main" in config["options.entry_points"]["console_scripts"]


def test_readme_tile_override_example_renders(tmp_path, monkeypatch):
    """The README's tweak (a ``TK = 8`` line before ``RTM = TM // WM`` in a copy of gemm.mako)
    still applies to the built-in template and shows in the rendered source."""
    anchor = "\n    RTM = TM // WM"
    source = (builtin_template_dir() / "gemm.mako").read_text()
    assert source.count(anchor) == 1, "gemm.mako changed: update the tweak example in README.md and docs/"
    (tmp_path / "gemm.mako").write_text(source.replace(anchor, "\n    TK = 8" + anchor))
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(tmp_path))
    code, text = run_cli("render", "conv2d", "--input", "1,16,5,5", "--weight", "16,16,3,3", "--padding", "1",
                         "--algorithm", "implicit_gemm")
    assert code == 0
    assert "__local clc_real a_tile[8 * " in text


def test_device_option_selects_the_device_and_refuses_an_unknown_one(capsys):
    import clconv

    name = clconv.default_queue().device.name
    code, text = run_cli("render", "conv1d", "--input", "1,2,7", "--weight", "3,2,2", "--device", "0:0",
                         "--algorithm", "direct")
    assert code == 0
    assert "__kernel void clc_direct_forward" in text and "on '" in text.splitlines()[0]
    code, text = run_cli("check", "conv1d", "--input", "1,2,7", "--weight", "3,2,2", "--device", name[:12],
                         "--algorithm", "direct")
    assert code == 0 and text.splitlines()[3].split()[:2] == ["direct", "pass"]
    code, _ = run_cli("render", "conv1d", "--input", "1,2,7", "--weight", "3,2,2", "--device", "no-such-device-xyz")
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("clconv: error: DeviceSelectionError: no OpenCL device matches 'no-such-device-xyz'")
    assert err.count("\n") == 1


def test_demo_checks_public_calls_against_the_reference(monkeypatch):
    """The quick start's demo: a layer's three passes through clconv.conv2d / conv2d_input /
    conv2d_weight, timed and checked; one row per pass, and the verdict."""
    from clconv.tools import demo

    monkeypatch.setenv("CLCONV_TUNE", "0")  # the heuristic's choice: one build per pass
    out = io.StringIO()
    rows = demo.run(repeats=1, layers=[("tiny 3x3", (1, 4, 9, 9), (6, 4, 3, 3), 1, 1, 1)], out=out)
    assert [r["pass_"] for r in rows] == ["forward", "backward_data", "backward_weight"]
    assert all(r["ok"] and r["ms"] > 0 for r in rows), rows
    text = out.getvalue()
    assert "layer" in text and "GFLOP/s" in text and "max err" in text
    assert text.rstrip().endswith("3 layer-passes checked against the float64 reference; all within tolerance")
