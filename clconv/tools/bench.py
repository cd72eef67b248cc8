"""Benchmarks and pre-tuning: ``clconv bench`` / ``scripts/bench`` and ``clconv tune`` / ``scripts/tune``.

``bench`` times, for each layer of a shape set and each pass (forward, data gradient, weight
gradient; for a transposed layer its forward is the canonical data gradient), the kernels
``algorithm='auto'`` (or a named algorithm) runs: the median of OpenCL profiling-event times from
the first launch's start to the last launch's end, GFLOP/s, and, when PyTorch is importable, PyTorch's
median time for the same pass on the same kind of device (cuDNN on an NVIDIA GPU, with TF32 off and
``cudnn.benchmark`` on; its CPU kernels otherwise) and the ratio clconv/PyTorch, with the geometric
mean of the ratios.  Beside the kernel times, what a user sees: the wall time per call of a stream
of 20 public-API calls with default arguments (results allocated by clconv, ``algorithm='auto'``)
and one synchronisation at the end, against PyTorch timed the same way (``--no-stream`` skips it).
On a CPU device it also times a NumPy im2col + matmul forward.  ``--check``
compares every result with a float64 reference (PyTorch in float64 on the same device when
available, else clconv's NumPy reference).  Results go to the terminal and optionally to
``--json``/``--csv`` files and a ``--plot`` PNG (matplotlib).

``tune`` pre-tunes layers: it measures every candidate ``auto`` would consider and stores the
winners in the tuning database, with a progress bar, so that later runs (any process) skip tuning.

``bench --first-call`` measures the cost of a new geometry: cold (empty cache: compiling the
templates, rendering, building; tuning too under ``CLCONV_TUNE=1``), the same geometry in a new
process with the disk cache warm, a new geometry once the templates are compiled (builds only),
and the host overhead of a call once everything is cached.

The work is done in :mod:`clconv.tools.timing` (measuring), :mod:`clconv.tools.libraries` (PyTorch,
NumPy), :mod:`clconv.tools.report` (tables and files) and :mod:`clconv.tools.first_call`; this
module parses the command lines.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np
import pyopencl as cl

from clconv import device as devices
from clconv import planner, settings, tuning
from clconv.passes import PASSES
from clconv.plan import Problem

from . import shapes
from .first_call import first_call_costs
from .libraries import load_torch
from .report import Progress, pass_label, print_table, read_runs, replace_json, write_json, write_outputs
from .timing import bench_layer


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shapes", nargs="*", default=None,
                        help="named set (gpu, cpu, tiny), a shape file the package ships (such as "
                             "shapes_resnet_50 or deconv/shapes_2d), the path of a benchdnn shape file, or "
                             "descriptors such as mb32ic64ih56oc64oh56kh3ph1; default: gpu on a GPU, cpu otherwise")
    parser.add_argument("--batch", type=int, default=None, help="override every layer's batch size")
    parser.add_argument("--passes", default=",".join(PASSES),
                        help="canonical passes, comma-separated (default: all three)")
    parser.add_argument("--device", default=None, help="OpenCL device: 'P:D' or a name substring (default: CLCONV_DEVICE)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N layers")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def _layers(args: argparse.Namespace, gpu: bool) -> tuple[list[shapes.Layer], tuple[str, ...]]:
    specs = args.shapes or ["gpu" if gpu else "cpu"]
    layers = []
    for spec in specs:
        layers += shapes.resolve_layers(spec, args.batch)
    passes = tuple(p.strip() for p in args.passes.split(",") if p.strip())
    for p in passes:
        if p not in PASSES:
            raise SystemExit(f"clconv: --passes must name passes among {PASSES}, got {p!r}")
    return layers[: args.limit] if args.limit else layers, passes


def _is_gpu(queue: cl.CommandQueue) -> bool:
    return bool(queue.device.type & cl.device_type.GPU)


def main(argv: list[str] | None = None) -> int:
    """``clconv bench``: time layer sets against PyTorch/cuDNN and NumPy; see the module docstring."""
    parser = argparse.ArgumentParser(prog="clconv bench", description=(__doc__ or "").split("\n\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _common_arguments(parser)
    parser.add_argument("--algorithm", default="auto", help="algorithm to time (default: auto)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per pass (default 20 on a GPU, 5 on a CPU)")
    parser.add_argument("--stat", choices=("median", "min"), default="median",
                        help="statistic of the timed runs, for every library alike (min: on a shared, noisy machine)")
    parser.add_argument("--no-torch", action="store_true", help="do not compare with PyTorch even if importable")
    parser.add_argument("--numpy", dest="numpy", action="store_true", default=None,
                        help="time a NumPy im2col+matmul forward too (default: on a CPU device)")
    parser.add_argument("--no-numpy", dest="numpy", action="store_false")
    parser.add_argument("--check", action="store_true", help="check every result against a float64 reference")
    parser.add_argument("--no-stream", action="store_true",
                        help="skip the stream timing (20 default public-API calls, one sync; PyTorch the same way)")
    parser.add_argument("--first-call", action="store_true",
                        help="measure cold first call, warm-disk-cache first call in a new process, a new geometry's first call, and host overhead")
    parser.add_argument("--from-json", metavar="FILE", nargs="+",
                        help="no measuring: reprint (and --csv/--plot) the rows of earlier --json files; of "
                             "several runs of one set, each row's fastest time per library (a noisy machine)")
    parser.add_argument("--json", metavar="FILE", help="write the rows and summary as JSON, rewritten after every "
                        "layer (meta.complete false until the run ends: a run cut short keeps what it measured)")
    parser.add_argument("--csv", metavar="FILE", help="write the rows as CSV")
    parser.add_argument("--plot", metavar="FILE.png", help="plot GFLOP/s per layer-pass against the reference (matplotlib)")
    args = parser.parse_args(argv)

    if args.from_json:
        rows, meta = read_runs(args.from_json)
        print(f"clconv bench results from {' '.join(args.from_json)}: {meta.get('device')}; reference "
              f"{meta.get('reference')}" + (" (each row's fastest of the runs)" if len(args.from_json) > 1 else ""))
        print_table(rows)
        json_path = None if args.json in args.from_json else args.json
        write_outputs(rows, meta, json_path, args.csv, args.plot)
        return 0

    if args.first_call:
        result = first_call_costs(args.shapes[0] if args.shapes else None, args.device, quiet=args.quiet)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(result, handle, indent=1)
        return 0

    queue = devices.queue_for(args.device)
    gpu = _is_gpu(queue)
    layers, passes = _layers(args, gpu)
    repeats = args.repeats or (20 if gpu else 5)
    torch = None if args.no_torch else load_torch(gpu)
    numpy_baseline = (not gpu) if args.numpy is None else args.numpy
    meta = {
        "device": queue.device.name.strip(), "platform": queue.device.platform.name.strip(),
        "driver": queue.device.driver_version, "shapes": " ".join(args.shapes or ["gpu" if gpu else "cpu"]),
        "batch": args.batch, "algorithm": args.algorithm, "repeats": repeats, "stat": args.stat,
        "tuning": settings.tuning_enabled(),
        "reference": (f"torch {torch.__version__}" + (" cudnn " + str(torch.backends.cudnn.version()) if gpu else "")
                      if torch is not None else None)}
    print(f"clconv bench on {meta['device']} ({meta['platform']}, driver {meta['driver']}); reference: "
          f"{meta['reference'] or 'none (PyTorch not importable)'}; tuning {'on (CLCONV_TUNE=1)' if meta['tuning'] else 'off: the heuristic, or what the database holds'}")
    progress = Progress(len(layers) * len(passes), args.quiet)
    rows = []
    rng = np.random.default_rng(2024)
    for layer in layers:
        rows += bench_layer(layer, passes, queue, algorithm=args.algorithm, repeats=repeats, torch=torch,
                            numpy_baseline=numpy_baseline, check=args.check, rng=rng, progress=progress,
                            statistic=min if args.stat == "min" else statistics.median, stream=not args.no_stream)
        if args.json and rows:
            write_json(args.json, rows, {**meta, "complete": False})
    progress.close()
    print_table(rows)
    if rows:
        write_outputs(rows, {**meta, "complete": True}, args.json, args.csv, args.plot)
    bad = [r for r in rows if not math.isfinite(r.ms) or (args.check and not r.error <= 1e-4)]
    return 1 if bad else 0


def tune_main(argv: list[str] | None = None) -> int:
    """``clconv tune``: measure and store the best (algorithm, tiles) of every layer-pass, once."""
    parser = argparse.ArgumentParser(prog="clconv tune", description="Pre-tune layers: measure every candidate "
                                     "algorithm x tile configuration and store the winner in the tuning database.")
    _common_arguments(parser)
    parser.add_argument("--force", action="store_true", help="measure again even where the database has a winner")
    parser.add_argument("--json", metavar="FILE", help="write what was tuned (winner, candidate times) as JSON, "
                        "rewritten after every layer-pass (a run cut short keeps what it measured)")
    args = parser.parse_args(argv)

    queue = devices.queue_for(args.device)
    layers, passes = _layers(args, _is_gpu(queue))
    print(f"clconv tune on {queue.device.name.strip()}: {len(layers)} layers x {len(passes)} passes; "
          f"database {tuning.database_path(queue.device)}")
    progress = Progress(len(layers) * len(passes), args.quiet)
    done, skipped, t_start = [], 0, time.perf_counter()
    for layer in layers:
        for pass_ in passes:
            problem = Problem(layer.geometry, pass_, "float32")
            progress(f"{layer.label} {pass_label(pass_, layer.transposed)}")
            entry = tuning.lookup(queue.device, problem.key())
            if entry is not None and entry.get("measured") and not args.force:
                skipped += 1
                continue
            t0 = time.perf_counter()
            runner, entry = planner.tune(problem, queue, measure=True)
            done.append({"layer": layer.label, "pass": pass_, "key": problem.key(), "seconds": time.perf_counter() - t0,
                         "algorithm": runner.algorithm, "config": runner.config, "times_ms": entry.get("times_ms", {})})
            if args.json:
                _write_tuned(args.json, queue, time.perf_counter() - t_start, done)
    progress.close()
    total = time.perf_counter() - t_start
    for d in done:
        best = min(d["times_ms"].values()) if d["times_ms"] else float("nan")
        print(f"{d['layer'][:32]:32} {d['pass']:16} {d['algorithm']:14} {best:9.3f} ms  "
              f"({len(d['times_ms'])} candidates in {d['seconds']:.2f} s)")
    per = [d["seconds"] for d in done]
    print(f"tuned {len(done)} layer-passes in {total:.1f} s (median {statistics.median(per) if per else 0:.2f} s, "
          f"max {max(per) if per else 0:.2f} s per layer-pass); {skipped} already tuned")
    if args.json:
        _write_tuned(args.json, queue, total, done)
    return 0


def _write_tuned(path: str, queue: cl.CommandQueue, total: float, done: list[dict]) -> None:
    """``clconv tune --json``'s file (replace_json): the layer-passes measured so far, so that a run
    stopped by a time limit keeps them."""
    replace_json(path, {"device": queue.device.name.strip(), "total_s": total, "tuned": done})


if __name__ == "__main__":
    sys.exit(main())
