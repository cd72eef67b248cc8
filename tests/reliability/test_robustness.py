"""Robustness (issue 5): several processes on one cache, corrupt program cache entries and tuning
databases, an unwritable cache directory, device faults (a failed build, a work-group or local memory
past the device's limits, a refused allocation or launch) with ``auto`` falling back past them,
workspace limits, and no memory growth over many cached calls."""

from __future__ import annotations

import gc
import json
import logging
import multiprocessing
import os
import resource
import subprocess
import sys
import tracemalloc
import warnings
import weakref
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pytest

import clconv
from clconv import builder, planner, reference, tuning
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.runtime import LaunchError
from clconv.builder import BuildError
from clconv.geometry import resolve_conv, resolve_conv_weight
from clconv.templates import builtin_template_dir

from helpers import assert_matches, poisoned, random, skip_unless_bad_binaries_are_refused

BUILTIN_TEMPLATES = builtin_template_dir()


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A private, empty cache directory and no remembered choices or runners in this process."""
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path / "cache"))
    clconv.clear_caches()
    yield tmp_path / "cache"
    clconv.clear_caches()


# -- several processes building and tuning the same geometries -----------------------------------------

GEOMETRIES = [  # (input shape, weight shape, padding, groups): its forward pass and weight gradient
    ((2, 3, 6, 5), (4, 3, 3, 3), 1, 1),
]


def _worker(cache: str, tune: str, seed: int) -> dict:
    """One process: run every geometry with algorithm='auto', check against the reference."""
    os.environ["CLCONV_CACHE_DIR"] = cache
    os.environ["CLCONV_TUNE"] = tune
    import clconv as c
    from clconv import builder as b, planner as p, reference as r
    from clconv.geometry import resolve_conv as rc

    p.MAX_CONFIGS_PER_ALGORITHM = 1  # measure each algorithm once: the contention is what we test
    rng = np.random.default_rng(seed)
    errors = []
    for xshape, wshape, padding, groups in GEOMETRIES:
        x, w = rng.standard_normal(xshape).astype(np.float32), rng.standard_normal(wshape).astype(np.float32)
        g = rc(2, xshape, wshape, None, 1, padding, 1, groups).geometry
        y = c.conv2d(x, w, padding=padding, groups=groups)
        errors.append(float(np.abs(y - r.forward(g, x, w)).max()))
        dy = rng.standard_normal(g.output_shape).astype(np.float32)
        dw = c.conv2d_weight(x, wshape, dy, padding=padding, groups=groups)
        errors.append(float(np.abs(dw - r.backward_weight(g, x, dy)).max()))
    return {"errors": errors, "source_builds": b.stats.source_builds, "disk_hits": b.stats.disk_hits,
            "corrupt": b.stats.corrupt_entries}


def test_concurrent_processes_share_one_consistent_cache(tmp_path):
    cache = str(tmp_path / "shared-cache")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.starmap(_worker, [(cache, "1", seed) for seed in range(2)])
    for result in results:
        assert max(result["errors"]) < 1e-3, result
        assert result["corrupt"] == 0, result
    # one tuning database per device, complete and well formed
    databases = list((Path(cache) / f"tuning-v{tuning.TUNING_FORMAT_VERSION}").glob("*.json"))
    assert len(databases) == 1, databases
    data = json.loads(databases[0].read_text())
    assert data["version"] == tuning.TUNING_FORMAT_VERSION
    assert len(data["entries"]) == 2 * len(GEOMETRIES), sorted(data["entries"])
    for key, entry in data["entries"].items():
        assert entry["algorithm"] in REGISTRY and isinstance(entry["config"], dict) and entry["measured"], (key, entry)
    # every program entry is whole (checksum and length agree) and no temporary file is left over
    programs = list((Path(cache) / f"programs-v{builder.CACHE_FORMAT_VERSION}").rglob("*"))
    files = [f for f in programs if f.is_file()]
    assert files and all(builder._unpack(f.read_bytes()) is not None for f in files if f.suffix == ".bin")
    leftovers = [f for f in Path(cache).rglob(".tmp-*")]
    assert not leftovers, leftovers
    # a new process finds everything: no build from source, and the same correct answers
    with ctx.Pool(1) as pool:
        again = pool.apply(_worker, (cache, "1", 7))
    assert again["source_builds"] == 0 and again["disk_hits"] > 0 and max(again["errors"]) < 1e-3, again


# -- corrupt program cache entries ------------------------------------------------------------------------

KERNEL = "__kernel void clc_probe(__global float* out) { out[get_global_id(0)] = %s; }"


def _probe_source(tag: str) -> str:
    return KERNEL % f"{len(tag)}.0f + 0.5f /* {tag} */"


def _run_probe(queue, program, expected: float) -> None:
    out = cl_array.empty(queue, (4,), np.float32)
    out.fill(np.nan)
    cl.Kernel(program, "clc_probe")(queue, (4,), None, out.data)
    np.testing.assert_array_equal(out.get(), np.float32(expected))


def _corruptions():
    def truncate(blob):
        return blob[: len(blob) // 2]

    def flip_payload_byte(blob):
        data = bytearray(blob)
        data[-1] ^= 0xFF
        return bytes(data)

    def other_version(blob):
        magic, version, digest, length = builder._HEADER.unpack_from(blob)
        return builder._HEADER.pack(magic, version + 1, digest, length) + blob[builder._HEADER.size:]

    def empty(blob):
        return b""

    def garbage_with_valid_checksum(blob):  # passes the checksum: the driver must refuse it
        return builder._pack(b"\x7fELF this is not a program binary" * 8)

    return [truncate, flip_payload_byte, other_version, empty, garbage_with_valid_checksum]


@pytest.mark.parametrize("corrupt", _corruptions(), ids=lambda f: f.__name__)
def test_bad_program_cache_entry_is_detected_logged_and_rebuilt(queue, fresh_cache, caplog, corrupt):
    if corrupt.__name__ == "garbage_with_valid_checksum":
        skip_unless_bad_binaries_are_refused(queue)
    source = _probe_source(f"{corrupt.__name__}-{os.getpid()}")
    program = builder.ProgramCache().get(queue.context, queue.device, source)
    key = builder.cache_key(source, "", queue.device)
    path = builder._program_dir() / key[:2] / f"{key}.bin"
    assert path.exists()
    path.write_bytes(corrupt(path.read_bytes()))
    before = (builder.stats.corrupt_entries, builder.stats.source_builds, builder.stats.disk_hits)
    with caplog.at_level(logging.WARNING, logger="clconv.builder"), pytest.warns(RuntimeWarning, match="bad program cache entry"):
        program = builder.ProgramCache().get(queue.context, queue.device, source)
    after = (builder.stats.corrupt_entries, builder.stats.source_builds, builder.stats.disk_hits)
    assert after[0] == before[0] + 1 and after[1] == before[1] + 1 and after[2] == before[2], (before, after)
    assert any("discarding program cache entry" in r.getMessage() for r in caplog.records)
    _run_probe(queue, program, len(f"{corrupt.__name__}-{os.getpid()}") + 0.5)
    assert builder._unpack(path.read_bytes()) is not None, "the entry was not rewritten whole"
    # and the rewritten entry now serves a new process's cache from disk
    builder.ProgramCache().get(queue.context, queue.device, source)
    assert builder.stats.disk_hits == after[2] + 1


# -- corrupt tuning database ---------------------------------------------------------------------------------


def _tuning_case(rng):
    x, w = random(rng, (1, 2, 5, 5)), random(rng, (3, 2, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    return x, w, g, Problem(g, "forward", "float32").key()


TUNING_CORRUPTIONS = {
    "truncated": lambda text, key: text[: len(text) // 2],
    "not_json": lambda text, key: "\x00\x01 not json",
    "wrong_version": lambda text, key: json.dumps({"version": 99, "entries": json.loads(text)["entries"]}),
    "entries_not_a_dict": lambda text, key: json.dumps({"version": 1, "entries": [1, 2]}),
    "malformed_entry": lambda text, key: json.dumps({"version": 1, "entries": {key: {"algorithm": 5}}}),
    "tampered_config": lambda text, key: json.dumps(
        {"version": 1, "entries": {key: {"algorithm": "implicit_gemm", "config": {"TM": 3, "TN": 5, "TK": 0, "WM": 7, "WN": 2}}}}),
}


@pytest.mark.parametrize("kind", sorted(TUNING_CORRUPTIONS))
def test_bad_tuning_database_is_detected_logged_and_rewritten(queue, rng, fresh_cache, caplog, kind):
    x, w, g, key = _tuning_case(rng)
    clconv.conv2d(x, w, padding=1)
    path = tuning.database_path(queue.device)
    assert key in json.loads(path.read_text())["entries"]
    path.write_text(TUNING_CORRUPTIONS[kind](path.read_text(), key))
    clconv.clear_caches()
    with caplog.at_level(logging.WARNING, logger="clconv"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = clconv.conv2d(x, w, padding=1)
    assert_matches(y, reference.forward(g, x, w), g.reduction_length)
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "tuning" in logged or "remembered config" in logged, f"nothing logged: {logged!r}"
    if kind not in ("malformed_entry", "tampered_config"):
        assert any("corrupt tuning database" in str(c.message) for c in caught)
    data = json.loads(path.read_text())  # rewritten whole, with a valid entry
    entry = data["entries"][key]
    assert data["version"] == tuning.TUNING_FORMAT_VERSION and entry["algorithm"] in REGISTRY
    assert entry["config"] in REGISTRY[entry["algorithm"]].configs(Problem(g, "forward", "float32"), queue.device)


# -- an unwritable cache directory ---------------------------------------------------------------------------


def test_unwritable_cache_dir_degrades_to_memory_with_one_warning(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory's parent should be")
    script = (
        "import numpy as np, clconv\n"
        "from clconv import builder\n"
        "rng = np.random.default_rng(0)\n"
        "for shape in ((1, 2, 5, 5), (1, 2, 6, 4)):\n"
        "    x = rng.standard_normal(shape).astype(np.float32); w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)\n"
        "    y1 = clconv.conv2d(x, w, padding=1); builds = builder.stats.source_builds\n"
        "    y2 = clconv.conv2d(x, w, padding=1)\n"
        "    assert builder.stats.source_builds == builds and np.array_equal(y1, y2)\n"
        "print('memory_hits', builder.stats.memory_hits, 'write_failures', builder.stats.write_failures)\n"
    )
    # CLCONV_TUNE=0 still stores each choice in the tuning database (a write that must fail quietly)
    env = dict(os.environ, CLCONV_CACHE_DIR=str(blocker / "cache"), CLCONV_TUNE="0")
    proc = subprocess.run([sys.executable, "-W", "always", "-c", script], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("is not writable") == 1, proc.stderr[-3000:]
    failures = int(proc.stdout.split("write_failures")[1])
    assert failures >= 2, proc.stdout


# -- device faults ---------------------------------------------------------------------------------------------

# a reduction of 6 terms (2 channels x 3x1 taps): the heuristic order puts `direct` first here
SHORT_REDUCTION = ((1, 2, 5, 4), (2, 2, 3, 1), 1, 1)


def _short_reduction(rng):
    xshape, wshape, padding, groups = SHORT_REDUCTION
    x, w = random(rng, xshape), random(rng, wshape)
    g = resolve_conv(2, xshape, wshape, None, 1, padding, 1, groups).geometry
    return x, w, g


def _user_template(directory: Path, name: str, old: str, new: str) -> None:
    text = (BUILTIN_TEMPLATES / name).read_text()
    assert old in text, f"{name} changed: update the injected fault"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text.replace(old, new, 1))


def _plain_direct_only(monkeypatch) -> None:
    """`direct` offers only its one-output-per-work-item kernels, the ones whose source the faults
    below are planted in: on a GPU its first choice for the short reduction is a strip of output rows
    or a block of output channels, other kernels of the same template; on a CPU it also offers its
    register tiles of channels (direct_channels.mako), which would run where direct.mako fails."""
    original = type(REGISTRY["direct"]).configs

    def plain(self, problem, device):
        return [c for c in original(self, problem, device) if "rows" not in c and "cob" not in c and "PX" not in c]

    monkeypatch.setattr(type(REGISTRY["direct"]), "configs", plain)


def _first_direct_label(queue) -> str:
    """How the tuning database names `direct`'s first configuration for the short reduction (its
    work-group size follows the device: 64 on PoCL, 32 on llvmpipe)."""
    problem = Problem(_short_reduction(np.random.default_rng(0))[2], "forward", "float32")
    return planner.label(REGISTRY["direct"], REGISTRY["direct"].configs(problem, queue.device)[0])


def _check_fallback(queue, rng, failing_label: str, expect: type):
    """Named `direct` raises ``expect`` naming kernel/template and geometry; `auto` falls back to another
    algorithm, records the failure, and does not try `direct` again once that is remembered."""
    x, w, g = _short_reduction(rng)
    xshape, wshape, padding, groups = SHORT_REDUCTION
    assert planner.heuristic_order(Problem(g, "forward", "float32"), queue.device)[0] == "direct"
    with pytest.raises(expect) as info:
        clconv.conv2d(x, w, padding=padding, groups=groups, algorithm="direct")
    message = str(info.value)
    assert "direct" in message and g.tag() in message, message
    y = clconv.conv2d(x, w, padding=padding, groups=groups)
    assert_matches(y, reference.forward(g, x, w), g.reduction_length)
    entry = tuning.lookup(queue.device, Problem(g, "forward", "float32").key())
    assert entry["algorithm"] != "direct" and failing_label in entry["failed"], entry
    # a new process (memory forgotten) goes straight to the remembered algorithm: direct is not
    # even planned
    clconv.clear_caches()
    calls = []
    original = REGISTRY["direct"].plan
    try:
        REGISTRY["direct"].plan = lambda *a, **k: calls.append(a) or original(*a, **k)
        y = clconv.conv2d(x, w, padding=padding, groups=groups)
    finally:
        del REGISTRY["direct"].plan
    assert not calls, "auto tried the algorithm it had remembered as failing"
    assert_matches(y, reference.forward(g, x, w), g.reduction_length)


def test_build_failure_names_kernel_and_geometry_and_auto_falls_back(queue, rng, fresh_cache, tmp_path, monkeypatch):
    _user_template(tmp_path / "tpl", "direct.mako", "    clc_real acc = (clc_real)0;",
                   "    clc_real acc = (clc_real)0 +;  /* planted syntax error */")
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(tmp_path / "tpl"))
    monkeypatch.setenv("CLCONV_TUNE", "0")
    _plain_direct_only(monkeypatch)
    _check_fallback(queue, rng, _first_direct_label(queue), BuildError)


def test_too_large_work_group_is_refused_before_launch_and_auto_falls_back(queue, rng, fresh_cache, monkeypatch):
    too_many = 2 * queue.device.max_work_group_size
    monkeypatch.setattr(type(REGISTRY["direct"]), "configs", lambda self, problem, device: [{"wg": too_many}])
    monkeypatch.setenv("CLCONV_TUNE", "0")
    _check_fallback(queue, rng, f"direct wg={too_many}", LaunchError)


def test_too_much_local_memory_is_a_clear_error_and_auto_falls_back(queue, rng, fresh_cache, tmp_path, monkeypatch):
    words = 2 * queue.device.local_mem_size // 4
    _user_template(tmp_path / "tpl", "direct.mako", "    clc_real acc = (clc_real)0;",
                   f"    __local clc_real clc_hog[{words}];\n"
                   "    clc_hog[get_local_id(0)] = (clc_real)1; barrier(CLK_LOCAL_MEM_FENCE);\n"
                   "    clc_real acc = clc_hog[(get_local_id(0) + 1) % get_local_size(0)] - (clc_real)1;")
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(tmp_path / "tpl"))
    monkeypatch.setenv("CLCONV_TUNE", "0")
    _plain_direct_only(monkeypatch)
    _check_fallback(queue, rng, _first_direct_label(queue), (BuildError, LaunchError))


def test_workspace_allocation_failure_names_kernel_and_geometry(queue, rng, fresh_cache, monkeypatch):
    huge = queue.device.max_mem_alloc_size + 4096
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(10 * huge))
    monkeypatch.setattr(type(REGISTRY["im2col"]), "_column_bytes_per_image", lambda self, problem: huge)
    # PoCL refuses a buffer over its max_mem_alloc_size; NVIDIA's driver accepts one (it allocates
    # lazily), so the refusal is also simulated: what is tested is what clconv makes of it
    real_buffer = cl.Buffer

    def refusing_buffer(context, flags, size=0, *args, **kwargs):
        if size >= huge:
            raise cl.MemoryError(f"clCreateBuffer failed: MEM_OBJECT_ALLOCATION_FAILURE ({size} bytes, simulated)")
        return real_buffer(context, flags, size, *args, **kwargs)

    monkeypatch.setattr(cl, "Buffer", refusing_buffer)
    x, w, g = _short_reduction(rng)
    _, _, padding, groups = SHORT_REDUCTION
    with pytest.raises(LaunchError, match=r"could not allocate its \d+-byte workspace 'col'") as info:
        clconv.conv2d(x, w, padding=padding, groups=groups, algorithm="im2col")
    assert g.tag() in str(info.value) and "im2col" in str(info.value)


# -- the workspace limit -------------------------------------------------------------------------------------


def test_workspace_limit_makes_im2col_and_splitk_decline(queue, rng, fresh_cache, monkeypatch):
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", "64")
    monkeypatch.setenv("CLCONV_TUNE", "0")
    x, w = random(rng, (2, 3, 6, 5)), random(rng, (4, 3, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    with pytest.raises(ValueError, match="im2col.*workspace limit"):
        clconv.conv2d(x, w, padding=1, algorithm="im2col")
    y = clconv.conv2d(x, w, padding=1)  # auto: another algorithm
    assert_matches(y, reference.forward(g, x, w), g.reduction_length)
    assert tuning.lookup(queue.device, Problem(g, "forward", "float32").key())["algorithm"] != "im2col"

    xs, dys = random(rng, (2, 2, 16, 16)), random(rng, (2, 3, 16, 16))
    gs = resolve_conv_weight(2, xs.shape, (3, 2, 3, 3), dys.shape, 1, 1, 1, 1).geometry
    with pytest.raises(ValueError, match="splitk.*workspace limit"):
        clconv.conv2d_weight(xs, (3, 2, 3, 3), dys, padding=1, algorithm="splitk")
    monkeypatch.delenv("CLCONV_WORKSPACE_LIMIT")
    dw = clconv.conv2d_weight(xs, (3, 2, 3, 3), dys, padding=1, algorithm="splitk")  # without the limit it serves
    assert_matches(dw, reference.backward_weight(gs, xs, dys), gs.batch * gs.out_pixels)

    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", "plenty")
    with pytest.raises(ValueError, match="CLCONV_WORKSPACE_LIMIT.*'plenty'"):
        clconv.conv2d(x, w, padding=1, algorithm="im2col")


def test_im2col_chunks_the_batch_to_fit_the_limit(queue, rng, fresh_cache, monkeypatch):
    x, w = random(rng, (3, 2, 5, 4)), random(rng, (3, 2, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    one_image = g.in_channels * g.kernel_volume * g.out_pixels * 4
    for limit, chunks in ((one_image, 3), (3 * one_image, 1)):
        monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(limit))
        out = poisoned(queue, g.output_shape)
        y = clconv.conv2d(x, w, padding=1, algorithm="im2col", out=out)
        assert_matches(y, reference.forward(g, x, w), g.reduction_length)
        runner = planner.plan(Problem(g, "forward", "float32"), queue, "im2col")
        assert runner.workspace_bytes <= limit and len(runner.launches) == 2 * chunks, (limit, runner.workspaces)


# -- no growth over many cached calls --------------------------------------------------------------------------


def test_ten_thousand_cached_calls_do_not_grow_host_or_device_memory(queue, rng, monkeypatch):
    live = weakref.WeakSet()
    original = cl.Buffer

    class CountedBuffer(original):  # every buffer pyopencl.array and the runners allocate
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            live.add(self)

    monkeypatch.setattr(cl, "Buffer", CountedBuffer)
    x = cl_array.to_device(queue, random(rng, (1, 2, 4, 4)))
    w = cl_array.to_device(queue, random(rng, (2, 2, 3, 3)))
    out = poisoned(queue, (1, 2, 4, 4))

    def calls(n):
        for i in range(n):
            clconv.conv2d(x, w, padding=1, algorithm="im2col", out=out)  # a column workspace per call
            if i % 50 == 0:
                clconv.conv2d(x, w, padding=1, algorithm="direct").get()  # a result allocated per call
        queue.finish()
        gc.collect()

    def rss_kib():
        return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() // 1024

    calls(500)  # warm: build, cache, first allocations
    buffers0, rss0 = len(live), rss_kib()
    with warnings.catch_warnings(record=True) as caught:  # a cached call has nothing to warn about
        warnings.simplefilter("always")
        tracemalloc.start()
        calls(500)
        snap0 = tracemalloc.take_snapshot()
        calls(9000)
        snap1 = tracemalloc.take_snapshot()
        tracemalloc.stop()
    assert not caught, f"{len(caught)} warnings, the first: {caught[0].message}"
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    print(f"\n10,000 cached calls: live buffers {buffers0} -> {len(live)}, Python heap {grown:+d} bytes "
          f"over the last 9,000, RSS {rss0} -> {rss_kib()} KiB")
    assert len(live) <= buffers0, f"live device buffers grew from {buffers0} to {len(live)}"
    assert grown < 64 * 1024, f"Python heap grew by {grown} bytes over 9,000 calls"
    assert rss_kib() - rss0 < 16 * 1024, f"RSS grew from {rss0} KiB to {rss_kib()} KiB"
    g = resolve_conv(2, (1, 2, 4, 4), (2, 2, 3, 3), None, 1, 1, 1, 1).geometry
    assert_matches(out, reference.forward(g, x.get(), w.get()), g.reduction_length)


def test_render_shows_what_the_call_would_run(queue, rng, fresh_cache):
    """clconv.render picks as a call does (planner.remembered_choice): a named algorithm's remembered
    configuration, and under auto never a remembered entry the planner would refuse."""
    x, w = random(rng, (2, 3, 6, 5)), random(rng, (4, 3, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    problem = Problem(g, "forward", "float32")
    configs = REGISTRY["im2col"].configs(problem, queue.device)
    assert len(configs) >= 2
    tuning.store(queue.device, f"{problem.key()}@im2col", {"algorithm": "im2col", "config": configs[1]})
    header = clconv.render(clconv.conv2d, x, w, padding=1, algorithm="im2col").splitlines()[0]
    assert f"config {configs[1]}" in header
    assert planner.plan(problem, queue, "im2col").config == configs[1]
    # a tampered auto entry (a configuration im2col does not offer) is not what render shows
    tuning.store(queue.device, problem.key(), {"algorithm": "im2col", "config": {"LOCAL": 0, "WM": 3, "VN": 5}})
    algorithm, config = planner.candidates(problem, queue.device)[0]
    header = clconv.render(clconv.conv2d, x, w, padding=1).splitlines()[0]
    assert f"algorithm {algorithm.name!r}, config {config}" in header


# -- a launch the driver refuses -------------------------------------------------------------------------


def test_auto_falls_back_past_a_refused_launch_and_remembers(queue, rng, monkeypatch, tmp_path):
    """``auto`` survives a launch the driver refuses (after the resource checks passed): it records
    the failure in the tuning database and runs another algorithm."""
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CLCONV_TUNE", "0")
    tuning.forget_memory()
    x, w = random(rng, (2, 3, 6, 7)), random(rng, (5, 3, 3, 2))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    problem = Problem(g, "forward", "float32")
    first = planner.plan(problem, queue, "auto")

    def refuse(*args, **kwargs):
        raise LaunchError(f"kernel of {first.algorithm}: the driver refused the launch (simulated)")

    monkeypatch.setattr(first, "run", refuse)
    y = clconv.conv2d(x, w, padding=1)
    assert_matches(y, reference.forward(g, x, w), g.reduction_length)

    entry = tuning.lookup(queue.device, problem.key())
    assert entry is not None and entry["failed"], "the refused candidate was not recorded"
    assert entry["failed"][-1].startswith(first.algorithm)
    again = planner.plan(problem, queue, "auto")
    assert again is not first
    assert_matches(clconv.conv2d(x, w, padding=1), reference.forward(g, x, w), g.reduction_length)


def test_named_algorithm_launch_failure_is_raised(queue, rng, monkeypatch):
    x, w = random(rng, (1, 2, 5, 5)), random(rng, (2, 2, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 0, 1, 1).geometry
    runner = planner.plan(Problem(g, "forward", "float32"), queue, "direct")

    def refuse(*args, **kwargs):
        raise LaunchError("simulated refusal")

    monkeypatch.setattr(runner, "run", refuse)
    with pytest.raises(LaunchError, match="simulated refusal"):
        clconv.conv2d(x, w, algorithm="direct")
