"""The caches: the program cache (clconv/builder.py), which layer serves a program, and that each
layer can fail a test; the planner's memo of choices (a changed setting is a new choice;
``clconv.clear_caches()`` empties every cache); edited user templates, in a new process and in this one.

Memory hits are checked in this process; disk hits, corrupt entries and template edits in fresh
subprocesses (a cold memory cache, ``POCL_KERNEL_CACHE=0`` so PoCL's own cache hides nothing), each
with its own ``CLCONV_CACHE_DIR``.  A subprocess that must hit the disk cache has its source-build
path replaced by one that raises, so a hit that rebuilds fails loudly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

import clconv
from clconv import builder, caches, planner, reference, tuning
from clconv.builder import BuildError, ProgramCache, stats
from clconv.geometry import ConvGeometry, resolve_conv
from clconv.plan import Problem
from clconv.templates import builtin_template_dir

from helpers import assert_matches, poisoned, random, skip_unless_bad_binaries_are_refused

REPO = Path(__file__).resolve().parents[2]

# Runs one conv2d in a fresh interpreter and prints the builder's counters, the error against the
# float64 reference, the warnings raised and the rendered sources' hashes.
CHILD = r"""
import json, sys, warnings
import numpy as np
import clconv
from clconv import builder, reference
from clconv.geometry import resolve_conv

spec = json.loads(sys.argv[1])
if spec.get("forbid_source_build"):
    def refuse(*args, **kwargs):
        raise AssertionError("clconv built a program from source although its cache entry exists")
    builder.ProgramCache._build = refuse
from clconv import templates
render = templates.render
if spec.get("forbid_render"):
    def refuse_render(*args, **kwargs):
        raise AssertionError("clconv rendered a template although its program's index entry exists")
    templates.render = refuse_render
rng = np.random.default_rng(spec["seed"])
x = rng.standard_normal(spec["x"]).astype(np.float32)
w = rng.standard_normal(spec["w"]).astype(np.float32)
b = rng.standard_normal(spec["w"][0]).astype(np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = clconv.conv2d(x, w, b, padding=spec["padding"], algorithm=spec["algorithm"])
templates.render = render
g = resolve_conv(2, x.shape, w.shape, b.shape, 1, spec["padding"]).geometry
ref = reference.forward(g, x, w, b)
print(json.dumps({
    "stats": vars(builder.stats),
    "err": float(np.max(np.abs(y - ref))),
    "finite": bool(np.isfinite(y).all()),
    "warnings": [str(c.message) for c in caught],
    "source": clconv.render(clconv.conv2d, x, w, b, padding=spec["padding"], algorithm=spec["algorithm"]),
}))
"""

SPEC = {"seed": 3, "x": [2, 3, 7, 6], "w": [4, 3, 3, 2], "padding": 1}


def run_child(cache: Path, algorithm: str, *, forbid_source_build=False, forbid_render=False, extra_env=None) -> dict:
    env = dict(os.environ)
    env.update(CLCONV_CACHE_DIR=str(cache), POCL_KERNEL_CACHE="0", CLCONV_TUNE="0")
    env.pop("CLCONV_NO_CACHE", None)
    env.pop("CLCONV_TEMPLATE_PATH", None)
    env.update(extra_env or {})
    spec = dict(SPEC, algorithm=algorithm, forbid_source_build=forbid_source_build, forbid_render=forbid_render)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"child failed:\n{done.stderr[-4000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["finite"] and result["err"] < 1e-4, result["err"]
    return result


def entries(cache: Path) -> list[Path]:
    return sorted((cache / f"programs-v{builder.CACHE_FORMAT_VERSION}").glob("*/*.bin"))


def index_entries(cache: Path) -> list[Path]:
    return sorted((cache / f"programs-v{builder.CACHE_FORMAT_VERSION}" / "index").glob("*/*"))


# -- memory layer ----------------------------------------------------------------------------------

KERNEL = "__kernel void clc_fill(__global float* a) {{ a[get_global_id(0)] = {value}f; }} /* {tag} */"


def _source(request, value=1.5) -> str:
    """A tiny kernel whose source is unique to the calling test (so no other test shares its entry)."""
    return KERNEL.format(value=value, tag=request.node.nodeid)


def _check_fills(program: cl.Program, queue, value: float) -> None:
    out = np.full(8, np.nan, np.float32)
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, out.nbytes)
    program.clc_fill(queue, (8,), None, buf)
    cl.enqueue_copy(queue, out, buf)
    np.testing.assert_array_equal(out, value)


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    """A fresh, private disk cache for this test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(path))
    monkeypatch.delenv("CLCONV_NO_CACHE", raising=False)
    return path


def test_memory_hit_returns_the_same_program(cache, queue, request):
    source = _source(request)
    builds, hits = stats.source_builds, stats.memory_hits
    first = builder.build_program(queue, source)
    assert stats.source_builds == builds + 1
    second = builder.build_program(queue, source)
    assert second is first
    assert stats.source_builds == builds + 1 and stats.memory_hits == hits + 1
    _check_fills(second, queue, 1.5)


def test_memory_hit_through_a_convolution(cache, queue, rng):
    x, w, b = random(rng, (1, 5, 6, 7)), random(rng, (3, 5, 2, 2)), random(rng, (3,))  # used nowhere else
    ref = reference.forward(resolve_conv(2, x.shape, w.shape, b.shape, 1, 1).geometry, x, w, b)
    builds = stats.source_builds
    clconv.conv2d(x, w, b, padding=1, algorithm="direct")
    assert stats.source_builds == builds + 1
    y = clconv.conv2d(x, w, b, padding=1, algorithm="direct", out=poisoned(queue, ref.shape))
    assert stats.source_builds == builds + 1, "the second call rebuilt its program"
    assert_matches(y, ref, 5 * 4 + 1)


def test_memory_layer_is_per_context_and_disk_serves_another(cache, queue, request):
    """A second context misses the memory layer and is served by the entry the first one wrote."""
    source = _source(request, 2.5)
    builder.build_program(queue, source)
    assert len(entries(cache)) == 1
    other = clconv.new_queue(queue.device)
    builds, disk = stats.source_builds, stats.disk_hits
    program = builder.build_program(other, source)
    assert stats.source_builds == builds and stats.disk_hits == disk + 1
    _check_fills(program, other, 2.5)


def test_cache_key_covers_source_options_and_device(queue):
    device = queue.device
    key = builder.cache_key("a", "", device)
    assert key == builder.cache_key("a", "", device)
    assert key != builder.cache_key("b", "", device)
    assert key != builder.cache_key("a", "-cl-fast-relaxed-math", device)
    assert key != builder.cache_key("a\n", "", device)
    identity = clconv.device.device_identity(device)
    assert device.name in identity and cl.VERSION_TEXT in " ".join(identity)


# -- disk layer ------------------------------------------------------------------------------------


def test_disk_hit_in_a_fresh_process(tmp_path):
    cache = tmp_path / "cache"
    first = run_child(cache, "im2col")
    programs = first["stats"]["source_builds"]  # the im2col kernel and the GEMM
    assert programs >= 2 and first["stats"]["disk_hits"] == 0
    assert len(entries(cache)) == programs
    assert not list(cache.rglob(".tmp-*")), "a temporary file was left behind"

    second = run_child(cache, "im2col", forbid_source_build=True)
    assert second["stats"]["source_builds"] == 0
    assert second["stats"]["disk_hits"] == programs
    assert second["stats"]["corrupt_entries"] == 0 and not second["warnings"]

    # CLCONV_NO_CACHE=1 neither reads nor writes the disk cache (direct: one cheap program)
    run_child(cache, "direct")
    written = entries(cache)
    off = run_child(cache, "direct", extra_env={"CLCONV_NO_CACHE": "1"})
    assert off["stats"]["disk_hits"] == 0 and off["stats"]["source_builds"] == 1
    assert entries(cache) == written


def test_a_warm_process_loads_its_programs_without_rendering(tmp_path):
    """The index maps what a source is rendered from to its program: a new process renders nothing."""
    cache = tmp_path / "cache"
    first = run_child(cache, "im2col")
    programs = first["stats"]["source_builds"]
    assert len(index_entries(cache)) == programs == len(entries(cache))
    warm = run_child(cache, "im2col", forbid_render=True, forbid_source_build=True)
    assert warm["stats"]["disk_hits"] == programs and warm["stats"]["source_builds"] == 0
    assert warm["source"] == first["source"]


@pytest.mark.parametrize("damage", ["garbage", "another key", "binary gone"])
def test_a_bad_index_entry_falls_back_to_rendering(tmp_path, damage):
    cache = tmp_path / "cache"
    run_child(cache, "direct")  # one cheap program
    [index], [binary] = index_entries(cache), entries(cache)
    if damage == "garbage":
        index.write_bytes(b"\xff not a key")
    elif damage == "another key":
        index.write_text("0" * 64)
    else:
        binary.unlink()
    result = run_child(cache, "direct")  # rendered, then found by its text (or built again)
    assert result["stats"]["corrupt_entries"] == 0 and not result["warnings"]
    assert result["stats"]["source_builds"] == (damage == "binary gone")
    assert index.read_text() == binary.stem, "the index entry was not written again"
    again = run_child(cache, "direct", forbid_render=True, forbid_source_build=True)
    assert again["stats"]["disk_hits"] == 1


def test_corrupt_entry_is_rebuilt_with_a_warning(tmp_path):
    """End to end in a fresh process; test_corrupt_entry_in_process covers every kind of damage."""
    cache = tmp_path / "cache"
    run_child(cache, "direct")  # direct: one cheap program (a GEMM takes seconds to build on PoCL)
    paths = entries(cache)
    assert len(paths) == 1
    for path in paths:
        path.write_bytes(path.read_bytes()[:100])  # truncated, as by a crash mid-write without the rename

    result = run_child(cache, "direct")
    assert result["stats"]["corrupt_entries"] == len(paths)
    assert result["stats"]["source_builds"] == len(paths) and result["stats"]["disk_hits"] == 0
    discarded = [m for m in result["warnings"] if "discarded a bad program cache entry" in m]
    assert len(discarded) == len(paths), result["warnings"]
    # every entry was written again, whole
    assert entries(cache) == paths
    for path in paths:
        assert builder._unpack(path.read_bytes()) is not None


def _garble_empty(blob: bytes) -> bytes:
    return b""


def _garble_truncate(blob: bytes) -> bytes:
    return blob[: len(blob) // 2]


def _garble_magic(blob: bytes) -> bytes:
    return b"NOTCLCV!" + blob[8:]


def _garble_payload(blob: bytes) -> bytes:
    return blob[:-1] + bytes([blob[-1] ^ 0x01])


def _garble_valid_checksum_bad_binary(blob: bytes) -> bytes:
    return builder._pack(b"\x7fELF but not a program " * 20)  # passes the checksum, the driver refuses it


@pytest.mark.parametrize("garble", [_garble_empty, _garble_truncate, _garble_magic, _garble_payload,
                                    _garble_valid_checksum_bad_binary], ids=lambda f: f.__name__[8:])
def test_corrupt_entry_in_process(garble, cache, queue, request):
    if garble is _garble_valid_checksum_bad_binary:
        skip_unless_bad_binaries_are_refused(queue)
    source = _source(request, 3.5)
    builder.build_program(queue, source)
    (path,) = entries(cache)
    path.write_bytes(garble(path.read_bytes()))
    fresh = ProgramCache()  # a cold memory layer over the same disk cache
    builds, corrupt = stats.source_builds, stats.corrupt_entries
    with pytest.warns(RuntimeWarning, match="discarded a bad program cache entry"):
        program = fresh.get(queue.context, queue.device, source)
    assert stats.corrupt_entries == corrupt + 1 and stats.source_builds == builds + 1
    _check_fills(program, queue, 3.5)
    assert builder._unpack(path.read_bytes()) is not None, "the entry was not rewritten"


def test_no_cache_writes_nothing(monkeypatch, tmp_path, queue, rng):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(cache))
    monkeypatch.setenv("CLCONV_NO_CACHE", "1")
    # used nowhere else; a reduction of 3 x 2 < 8 terms, so auto's heuristic takes direct (cheap to build)
    x, w = random(rng, (2, 3, 5, 6)), random(rng, (7, 3, 1, 2))
    g = resolve_conv(2, x.shape, w.shape, None, 1, ((0, 1), (1, 1))).geometry
    ref = reference.forward(g, x, w)
    builds = stats.source_builds
    y = clconv.conv2d(x, w, padding=((0, 1), (1, 1)), out=poisoned(queue, ref.shape))  # auto: tuning DB too
    assert stats.source_builds > builds
    assert_matches(y, ref, 3 * 2)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written == [], f"CLCONV_NO_CACHE=1 wrote {written}"


def test_unwritable_cache_degrades_to_memory(monkeypatch, tmp_path, queue, request):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(builder, "_warned_unwritable", False)
    failures = stats.write_failures
    with pytest.warns(RuntimeWarning, match="not writable"):
        program = builder.build_program(queue, _source(request, 4.5))
    assert stats.write_failures == failures + 1
    _check_fills(program, queue, 4.5)


# -- templates -------------------------------------------------------------------------------------


def _user_templates(tmp_path: Path, name: str, edit=None) -> Path:
    folder = tmp_path / "templates"
    folder.mkdir(exist_ok=True)
    text = (builtin_template_dir() / name).read_text()
    (folder / name).write_text(edit(text) if edit else text)
    return folder


def _after_prelude(marker: str):
    """An edit that adds ``marker`` right after the prelude call, where it reaches the rendered source."""
    def edit(text: str) -> str:
        anchor = "${prelude.header(geom, real, index, data, epilogue, bias)}\n"
        assert anchor in text
        return text.replace(anchor, anchor + marker + "\n", 1)
    return edit


def test_template_edit_invalidates_the_disk_cache(tmp_path):
    cache = tmp_path / "cache"
    folder = _user_templates(tmp_path, "direct.mako")  # an unedited copy first
    env = {"CLCONV_TEMPLATE_PATH": str(folder)}
    first = run_child(cache, "direct", extra_env=env)
    assert first["stats"]["source_builds"] == 1
    same = run_child(cache, "direct", extra_env=env, forbid_source_build=True)
    assert same["stats"]["disk_hits"] == 1 and same["stats"]["source_builds"] == 0

    _user_templates(tmp_path, "direct.mako", _after_prelude("/* clconv test: edited template */"))
    edited = run_child(cache, "direct", extra_env=env)
    assert "/* clconv test: edited template */" in edited["source"]
    assert edited["stats"]["source_builds"] == 1 and edited["stats"]["disk_hits"] == 0
    assert len(entries(cache)) == 2


def test_render_follows_user_templates(monkeypatch, tmp_path, rng):
    x, w = random(rng, (1, 2, 5, 5)), random(rng, (2, 2, 3, 3))
    plain = clconv.render(clconv.conv2d, x, w, algorithm="direct")
    folder = _user_templates(tmp_path, "direct.mako", _after_prelude("#define CLC_TEST_EDIT 1"))
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(folder))
    assert "#define CLC_TEST_EDIT 1" in clconv.render(clconv.conv2d, x, w, algorithm="direct")
    # edited again in place: the next render reads the file again.  (Mako compares whole-second
    # mtimes with its compile time, so an edit within the same second as the last render is not
    # seen; date this one two seconds ahead, as an edit made a little later would be.)
    _user_templates(tmp_path, "direct.mako", _after_prelude("#define CLC_TEST_EDIT 2"))
    later = time.time() + 2
    os.utime(folder / "direct.mako", (later, later))
    assert "#define CLC_TEST_EDIT 2" in clconv.render(clconv.conv2d, x, w, algorithm="direct")
    monkeypatch.delenv("CLCONV_TEMPLATE_PATH")
    assert clconv.render(clconv.conv2d, x, w, algorithm="direct") == plain


def test_build_failure_raises_build_error_with_log_and_source(monkeypatch, tmp_path, cache, rng):
    folder = _user_templates(tmp_path, "direct.mako", _after_prelude("this is not OpenCL C;"))
    # direct's CPU register tiles (its other configurations there) from a broken template too
    _user_templates(tmp_path, "direct_channels.mako", _after_prelude("this is not OpenCL C;"))
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(folder))
    x, w = random(rng, (1, 3, 4, 5)), random(rng, (2, 3, 3, 1))  # used nowhere else
    with pytest.raises(BuildError) as info:
        clconv.conv2d(x, w, algorithm="direct")
    error = info.value
    assert isinstance(error.log, str) and "error" in error.log.lower()  # the compiler's diagnostics
    assert isinstance(error.options, str) and repr(error.options) in str(error)
    assert error.source_path is not None and error.source_path.is_file()
    assert "this is not OpenCL C;" in error.source_path.read_text()
    assert str(error.source_path) in str(error) and "direct" in str(error)
    assert error.source_path.is_relative_to(cache)
    assert entries(cache) == [], "a failed build left a cache entry"


def test_edit_in_the_same_process_is_picked_up(tmp_path, monkeypatch, rng):
    """An edited user template takes effect in the running process (not only in a new one): the
    prepared-kernel caches key on ``clconv.templates.generation()`` (the user templates' times and
    sizes) and Mako's compiled modules are named by file time and size, so an edit made within the
    same second as the previous build is still seen."""
    store = "    clc_store_result(y_base + y_off, CLC_Y_AT(b, channel, p), acc,"
    folder = _user_templates(tmp_path, "direct.mako")
    monkeypatch.setenv("CLCONV_TEMPLATE_PATH", str(folder))
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path / "cache"))  # the edited program is on no disk yet
    # 3 rows: too few for the strip forward a GPU would otherwise run (it has another store line)
    x, w = random(rng, (1, 2, 3, 5)), random(rng, (3, 2, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    ref = reference.forward(g, x, w)

    np.testing.assert_allclose(clconv.conv2d(x, w, padding=1, algorithm="direct"), ref, rtol=1e-5, atol=1e-5)
    source = (folder / "direct.mako").read_text()
    assert store in source, "the forward store line of direct.mako changed; update this test"
    (folder / "direct.mako").write_text(source.replace(store, "    clc_store_result(y_base + y_off, CLC_Y_AT(b, channel, p), acc + 1,"))

    builds = stats.source_builds
    edited = clconv.conv2d(x, w, padding=1, algorithm="direct")
    assert stats.source_builds == builds + 1, "the edited template was not rebuilt"
    np.testing.assert_allclose(edited, ref + 1, rtol=1e-5, atol=1e-5)
    assert "acc + 1" in clconv.render(clconv.conv2d, x, w, padding=1, algorithm="direct")


# -- the planner's memo of choices and clear_caches ---------------------------------------------------------


def test_a_changed_variable_changes_the_plan(monkeypatch, queue, tmp_path):
    """A variable set mid-process reaches the planner's key (it is read on every call)."""
    problem = Problem(ConvGeometry.make(2, 1, 1, 2, 3, (5, 5), (3, 3), pad_begin=(1, 1), pad_end=(1, 1)),
                      "forward", "float32")
    monkeypatch.setenv("CLCONV_TUNE", "0")
    monkeypatch.setenv("CLCONV_CACHE_DIR", str(tmp_path))  # no choice stored for the problem yet
    tuning.forget_memory()
    first = planner.plan(problem, queue)  # chooses and stores the choice (a new tuning generation)
    before = caches.sizes()["choices"]
    assert planner.plan(problem, queue) is first
    assert planner.plan(problem, queue) is first
    assert caches.sizes()["choices"] == before + 1, "the stored choice is remembered once, then hit"
    before += 1
    monkeypatch.setenv("CLCONV_WORKSPACE_LIMIT", str(1 << 30))
    planner.plan(problem, queue)
    assert caches.sizes()["choices"] == before + 1, "a new workspace limit is a new choice"


def test_clear_caches_empties_every_cache(queue):
    problem = Problem(ConvGeometry.make(1, 1, 1, 2, 2, (6,), (3,)), "forward", "float32")
    planner.plan(problem, queue)
    assert caches.sizes()["choices"] and caches.sizes()["programs"]
    clconv.clear_caches()
    assert not any(caches.sizes().values()), caches.sizes()


def test_kept_runners_and_programs_are_bounded(monkeypatch, queue):
    """Past the bounds the oldest prepared runners go, and nothing else keeps them (a remembered
    choice holds only a key): a long run over many geometries holds at most that many runners and
    programs.  A problem whose runner went is prepared again, from the program cache or the disk."""
    import gc
    import weakref

    monkeypatch.setattr(planner._runners, "maxsize", 3)
    monkeypatch.setattr(builder.program_cache._memory, "maxsize", 3)
    problems = [Problem(ConvGeometry.make(1, 1, 1, 2, 2, (6 + i,), (3,)), "forward", "float32") for i in range(6)]
    alive = [weakref.ref(planner.plan(problem, queue, "direct")) for problem in problems]
    gc.collect()
    assert sum(ref() is not None for ref in alive) <= 3, "runners outlive the runner cache's bound"
    assert caches.sizes()["runners"] <= 3 and caches.sizes()["programs"] <= 3
    # the second geometry's runner went: prepared again, and right (small integers: exact)
    x = np.arange(1, 8, dtype=np.float32).reshape(1, 1, 7)
    w = np.array([[[1, 2, 3]]], np.float32)
    y = clconv.conv1d(x, w, algorithm="direct")
    np.testing.assert_array_equal(y, np.correlate(x[0, 0], w[0, 0], "valid")[None, None])


def test_quiet_builds_on_threads_stay_quiet_until_the_last_one_ends(monkeypatch):
    """A successful build's log never warns, with builds on several threads (a plan's programs,
    tuning's candidates): one thread leaving quiet_compiler() while another is still inside must not
    bring the warnings back for the other (with catch_warnings per thread it did, on Intel)."""
    import threading
    import warnings

    monkeypatch.delenv("PYOPENCL_COMPILER_OUTPUT", raising=False)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with builder.quiet_compiler():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second():
        first_in.wait(5)
        with builder.quiet_compiler():
            second_in.set()
            first_out.wait(5)
            warnings.warn("a build log", cl.CompilerWarning, stacklevel=1)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert not [w for w in caught if issubclass(w.category, cl.CompilerWarning)]
        warnings.warn("a log outside any build", cl.CompilerWarning, stacklevel=1)  # shown again after the last one
        assert [w for w in caught if issubclass(w.category, cl.CompilerWarning)]
