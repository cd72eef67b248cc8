"""Benchmarks and pre-tuning: ``clconv bench`` / ``scripts/bench`` and ``clconv tune`` / ``scripts/tune``.

``bench`` times, for each layer of a shape set and each pass (forward, data gradient, weight
gradient; for a transposed layer its forward is the canonical data gradient), the kernels
``algorithm='auto'`` (or a named algorithm) runs: the median of OpenCL profiling-event times from
the first launch's start to the last launch's end, GFLOP/s, and, when PyTorch is importable, PyTorch's
median time for the same pass on the same kind of device (cuDNN on an NVIDIA GPU, with TF32 off and
``cudnn.benchmark`` on; its CPU kernels otherwise) and the ratio clconv/PyTorch, with the geometric
mean of the ratios.  On a CPU device it also times a NumPy im2col + matmul forward.  ``--check``
compares every result with a float64 reference (PyTorch in float64 on the same device when
available, else clconv's NumPy reference).  Results go to the terminal and optionally to
``--json``/``--csv`` files and a ``--plot`` PNG (matplotlib).

``tune`` pre-tunes layers: it measures every candidate ``auto`` would consider and stores the
winners in the tuning database, with a progress bar, so that later runs (any process) skip tuning.

``bench --first-call`` measures the cost of a new geometry: cold (empty cache: render + build +
tune), the same geometry in a new process with the disk cache warm, and the host overhead of a
call once everything is cached.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, cast

import numpy as np

from . import shapes as shape_sets

PASSES = ("forward", "backward_data", "backward_weight")
# What each canonical pass is to the user, for a convolution and for a transposed convolution.
PASS_LABELS = {
    False: {"forward": "fwd", "backward_data": "bwd_data", "backward_weight": "bwd_weight"},
    True: {"backward_data": "fwd(deconv)", "forward": "bwd_data(deconv)", "backward_weight": "bwd_weight(deconv)"},
}


@dataclass
class Row:
    layer: str
    descriptor: str
    pass_: str
    label: str
    algorithm: str = ""
    config: dict = field(default_factory=dict)
    ms: float = float("nan")
    gflops: float = float("nan")
    plan_s: float = float("nan")  # first plan(): render + build (+ tune, if tuning is on)
    ref_name: str = ""
    ref_ms: float = float("nan")
    ratio: float = float("nan")  # clconv time / reference time
    numpy_ms: float = float("nan")
    error: float = float("nan")  # ||out - ref|| / ||ref|| against a float64 reference
    note: str = ""


# -- the reference libraries ------------------------------------------------------------------------


def _torch(device_is_gpu: bool):
    """PyTorch, if importable and (for a GPU device) with CUDA; else None."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - any import failure means "no reference"
        return None
    if device_is_gpu and not torch.cuda.is_available():
        return None
    if device_is_gpu:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    return torch


def _torch_args(g):
    nd = g.ndim
    if g.pad_begin != g.pad_end:
        return None  # PyTorch convolutions take symmetric padding only
    return dict(stride=list(g.stride[3 - nd:]), padding=list(g.pad_begin[3 - nd:]),
                dilation=list(g.dilation[3 - nd:]), groups=g.groups)


def _torch_fn(torch, g, pass_, tensors):
    """A zero-argument callable running ``pass_`` of ``g`` in PyTorch on ``tensors`` (x, w, dy)."""
    args = _torch_args(g)
    x, w, dy = tensors["x"], tensors["w"], tensors["dy"]
    nd = g.ndim
    aten = torch.ops.aten
    if pass_ == "forward":
        return lambda: aten.convolution(x, w, None, args["stride"], args["padding"], args["dilation"], False,
                                        [0] * nd, args["groups"])
    mask = [pass_ == "backward_data", pass_ == "backward_weight", False]
    index = 0 if pass_ == "backward_data" else 1
    return lambda: aten.convolution_backward(dy, x, w, None, args["stride"], args["padding"], args["dilation"],
                                             False, [0] * nd, args["groups"], mask)[index]


def _time_torch(torch, fn, repeats: int, gpu: bool, statistic=statistics.median) -> float:
    """Median milliseconds of one call (CUDA events on a GPU, the host clock on the CPU)."""
    for _ in range(3):  # cudnn.benchmark's search and allocations stay out
        fn()
    if gpu:
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistic(times)
    return _time_host(fn, repeats, statistic)


def numpy_im2col_forward(g, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The CPU baseline: y = W x im2col(x) with NumPy (float32, BLAS matmul), any 1/2/3D geometry."""
    nd = g.ndim
    pads = [(0, 0), (0, 0)] + [(g.pad_begin[a], g.pad_end[a]) for a in range(3 - nd, 3)]
    xp = np.pad(x, pads)
    span = [g.dilation[a] * (g.kernel[a] - 1) + 1 for a in range(3 - nd, 3)]
    windows = np.lib.stride_tricks.sliding_window_view(xp, span, axis=tuple(range(2, 2 + nd)))
    sel = tuple(slice(None, None, g.stride[a]) for a in range(3 - nd, 3))
    dil = tuple(slice(None, None, g.dilation[a]) for a in range(3 - nd, 3))
    windows = windows[(slice(None), slice(None), *sel, *dil)]
    windows = windows[(slice(None), slice(None), *(slice(0, o) for o in g.user_out_size))]
    # (N, C, *out, *k) -> (G, CI * KV, N * OP): the column matrix
    cols = np.ascontiguousarray(np.moveaxis(windows, 1, 1 + nd).reshape(
        g.batch, g.out_pixels, g.groups, g.cin_per_group * g.kernel_volume).transpose(2, 3, 0, 1)).reshape(
        g.groups, g.cin_per_group * g.kernel_volume, g.batch * g.out_pixels)
    wm = w.reshape(g.groups, g.cout_per_group, -1)
    y = np.matmul(wm, cols)  # (G, CO, N * OP)
    return y.reshape(g.groups, g.cout_per_group, g.batch, g.out_pixels).transpose(2, 0, 1, 3).reshape(g.output_shape)


def _time_host(fn, repeats: int, statistic=statistics.median) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistic(times)


# -- clconv -----------------------------------------------------------------------------------------

_OPERANDS = {"forward": ("x", "w", "y"), "backward_data": ("dy", "w", "dx"), "backward_weight": ("x", "dy", "dw")}


def _rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    if not np.isfinite(got).all():
        return float("inf")
    denom = float(np.linalg.norm(ref)) or 1.0
    return float(np.linalg.norm(got.astype(np.float64) - ref) / denom)


# Seconds to wait before timing clconv on a CPU: PyTorch's (libgomp) and OpenBLAS's worker
# threads spin for up to ~0.1-0.2 s after their last call before they sleep.
HOST_THREADS_IDLE_S = 0.25


def bench_layer(layer, passes, queue, *, algorithm="auto", repeats=20, torch=None, numpy_baseline=False,
                check=False, rng=None, progress=None, statistic=statistics.median) -> list[Row]:
    """Time every pass of one layer; see the module docstring for what each column means."""
    import pyopencl as cl

    from . import reference
    from .algorithms import Operand, Problem
    from .planner import plan, profiling_queue, time_runner

    g = layer.geometry
    rng = rng or np.random.default_rng(0)
    pqueue = profiling_queue(queue)
    gpu = bool(queue.device.type & cl.device_type.GPU)
    host = {"x": rng.standard_normal(g.input_shape).astype(np.float32),
            "w": (rng.standard_normal(g.weight_shape) / math.sqrt(g.reduction_length)).astype(np.float32),
            "dy": rng.standard_normal(g.output_shape).astype(np.float32)}
    device = {name: cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
              for name, a in host.items()}
    results = {"y": g.output_shape, "dx": g.input_shape, "dw": g.weight_shape}
    tt = None
    if torch is not None and _torch_args(g) is not None:
        tdev = "cuda" if gpu else "cpu"
        tt = {name: torch.from_numpy(a).to(tdev) for name, a in host.items()}
    # Phases, clconv first: PyTorch's OpenMP workers and OpenBLAS's threads spin-wait for a while
    # after each call, and on a CPU device they would take cores from clconv's timing.
    rows, outputs = [], {}
    if not gpu:
        time.sleep(HOST_THREADS_IDLE_S)  # the previous layer's host-library threads go idle
    for pass_ in passes:
        row = Row(layer.label, layer.descriptor, pass_, PASS_LABELS[layer.transposed][pass_])
        rows.append(row)
        if progress:
            progress(f"{layer.label} {row.label}")
        a_name, b_name, out_name = _OPERANDS[pass_]
        out = np.full(results[out_name], np.nan, np.float32)
        out_buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=out)
        operands = {a_name: Operand(device[a_name]), b_name: Operand(device[b_name]), out_name: Operand(out_buf)}
        problem = Problem(g, pass_, "float32")
        try:
            t0 = time.perf_counter()
            runner = plan(problem, queue, algorithm)
            row.plan_s = time.perf_counter() - t0
            row.algorithm, row.config = runner.algorithm, dict(runner.config)
            if check:  # the first run's output, on poisoned memory, is the one checked
                cl.wait_for_events(runner.run(pqueue, operands))
                cl.enqueue_copy(pqueue, out, out_buf)
                outputs[pass_] = out
            seconds = time_runner(runner, pqueue, operands, repeats, statistic)
            row.ms = seconds * 1e3
            row.gflops = g.flops / seconds / 1e9
        except Exception as exc:  # noqa: BLE001 - one failing layer must not end the benchmark
            row.note = f"clconv failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    for row in rows:
        if tt is not None and math.isfinite(row.ms):
            try:
                fn = _torch_fn(torch, g, row.pass_, tt)
                row.ref_name = "cudnn" if gpu else "torch-cpu"
                row.ref_ms = _time_torch(torch, fn, repeats, gpu, statistic)
                row.ratio = row.ms / row.ref_ms
            except Exception as exc:  # noqa: BLE001
                row.note += f" torch failed: {type(exc).__name__}: {str(exc)[:120]}"
        if numpy_baseline and row.pass_ == "forward" and math.isfinite(row.ms):
            row.numpy_ms = _time_host(lambda: numpy_im2col_forward(g, host["x"], host["w"]), max(3, repeats // 4),
                                      statistic)
    for row in rows:
        if row.pass_ not in outputs:
            continue
        a_name, b_name, _ = _OPERANDS[row.pass_]
        if tt is not None and gpu:
            t64 = {k: v.double() for k, v in tt.items()}
            ref = _torch_fn(torch, g, row.pass_, t64)().cpu().numpy()
        else:
            ref = reference.run_pass(row.pass_, g, host[a_name], host[b_name])
        row.error = _rel_error(outputs[row.pass_], ref)
    for buf in device.values():
        buf.release()
    return rows


def fastest_of_runs(runs: list[list[Row]]) -> list[Row]:
    """Rows of several runs of one shape set merged: per layer-pass and per library (clconv, the
    reference library, NumPy) the fastest time of any run; clconv's algorithm and configuration
    from its fastest run; the largest error.  On a shared machine a single run's rows can be slowed
    by other work by tens of percent, and not every library's alike."""
    merged: dict[tuple[str, str], Row] = {}
    for rows in runs:
        for row in rows:
            key = (row.descriptor, row.pass_)
            best = merged.get(key)
            if best is None:
                merged[key] = replace(row)
                continue
            if math.isfinite(row.ms) and not row.ms >= best.ms:
                best.ms, best.gflops, best.algorithm, best.config = row.ms, row.gflops, row.algorithm, row.config
            best.ref_ms = min(best.ref_ms, row.ref_ms) if math.isfinite(best.ref_ms) else row.ref_ms
            best.numpy_ms = min(best.numpy_ms, row.numpy_ms) if math.isfinite(best.numpy_ms) else row.numpy_ms
            best.error = max(best.error, row.error) if math.isfinite(best.error) else row.error
    for row in merged.values():
        row.ratio = row.ms / row.ref_ms if math.isfinite(row.ref_ms) and row.ref_ms > 0 else float("nan")
    return list(merged.values())


def geomean(values) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) and math.isfinite(v) else "-".rjust(len(format(1.0, spec)))


def print_table(rows: list[Row], out=None) -> None:
    out = out or sys.stdout
    head = (f"{'layer':32} {'pass':18} {'algorithm':14} {'ms':>9} {'GFLOP/s':>9} {'ref ms':>9} {'ratio':>6} "
            f"{'numpy ms':>9} {'plan s':>7} {'rel err':>8}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in rows:
        print(f"{r.layer[:32]:32} {r.label:18} {r.algorithm[:14]:14} {_fmt(r.ms, '9.3f')} {_fmt(r.gflops, '9.0f')} "
              f"{_fmt(r.ref_ms, '9.3f')} {_fmt(r.ratio, '6.2f')} {_fmt(r.numpy_ms, '9.3f')} {_fmt(r.plan_s, '7.2f')} "
              f"{_fmt(r.error, '8.1e')}{'  ' + r.note.strip() if r.note else ''}", file=out)
    summary(rows, out)


def summary(rows: list[Row], out=None) -> dict:
    out = out or sys.stdout
    ratios = [r.ratio for r in rows if math.isfinite(r.ratio)]
    result: dict[str, Any] = {"layer_passes": len(rows), "failed": sum(1 for r in rows if not math.isfinite(r.ms))}
    if ratios:
        result.update(geomean_ratio=geomean(ratios), worst_ratio=max(ratios),
                      worst=max((r for r in rows if math.isfinite(r.ratio)), key=lambda r: r.ratio).layer)
        by_pass = {}
        for p in PASSES:
            sel = [r.ratio for r in rows if r.pass_ == p and math.isfinite(r.ratio)]
            if sel:
                by_pass[p] = geomean(sel)
        result["geomean_by_canonical_pass"] = by_pass
        print(f"geometric mean clconv/{rows[0].ref_name or 'ref'} time ratio over {len(ratios)} layer-passes: "
              f"{result['geomean_ratio']:.3f} (worst {result['worst_ratio']:.2f}: {result['worst']}); by pass: "
              + ", ".join(f"{p} {v:.2f}" for p, v in by_pass.items()), file=out)
    numpy_rows = [r for r in rows if math.isfinite(r.numpy_ms)]
    if numpy_rows:
        speedups = [r.numpy_ms / r.ms for r in numpy_rows]
        result["numpy_speedup_geomean"] = geomean(speedups)
        result["numpy_slowest_speedup"] = min(speedups)
        print(f"forward vs NumPy im2col+matmul: clconv faster by {result['numpy_speedup_geomean']:.2f}x "
              f"(geomean), {min(speedups):.2f}x at worst", file=out)
    errors = [r.error for r in rows if not math.isnan(r.error)]
    if errors:
        result["max_rel_error"] = max(errors)
        print(f"largest relative error (L2) against the float64 reference: {max(errors):.2e}", file=out)
    if result["failed"]:
        print(f"{result['failed']} layer-passes FAILED", file=out)
    return result


def write_outputs(rows, args, meta) -> None:
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"meta": meta, "summary": summary(rows, open(os.devnull, "w")),
                       "rows": [asdict(r) for r in rows]}, handle, indent=1, default=str)
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            fields = [f for f in asdict(rows[0]) if f != "config"] + ["config"] if rows else []
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            for r in rows:
                d = asdict(r)
                d["config"] = json.dumps(d["config"], sort_keys=True)
                writer.writerow(d)
    if args.plot:
        plot(rows, args.plot, meta)


def plot(rows: list[Row], path: str, meta: dict) -> None:
    """Achieved GFLOP/s per layer-pass, clconv beside the reference library (matplotlib, optional)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("clconv bench: --plot needs matplotlib (pip install 'clconv[plot]'); no plot written", file=sys.stderr)
        return
    labels = [f"{r.layer} {r.label}" for r in rows]
    ours = [r.gflops if math.isfinite(r.gflops) else 0 for r in rows]
    theirs = [r.gflops * r.ratio if math.isfinite(r.ratio) else 0 for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.28 * len(rows) + 1.5))
    ys = np.arange(len(rows))
    ax.barh(ys - 0.2, ours, 0.4, label="clconv")
    if any(theirs):
        ax.barh(ys + 0.2, theirs, 0.4, label=next((r.ref_name for r in rows if r.ref_name), "reference"))
    ax.set_yticks(ys, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("GFLOP/s")
    ax.set_title(f"{meta.get('device', '')} - {meta.get('shapes', '')}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# -- progress output --------------------------------------------------------------------------------


class Progress:
    """A one-line text progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, total: int, quiet: bool = False, stream=None):
        stream = stream or sys.stderr
        self.total, self.done, self.quiet, self.stream = total, 0, quiet, stream
        self.start = time.perf_counter()
        self.tty = stream.isatty()

    def __call__(self, text: str) -> None:
        self.done += 1
        if self.quiet:
            return
        width = 24
        filled = int(width * (self.done - 1) / max(self.total, 1))
        elapsed = time.perf_counter() - self.start
        line = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {elapsed:6.1f}s {text}"
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and not self.quiet:
            self.stream.write("\n")


# -- command lines ----------------------------------------------------------------------------------


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shapes", nargs="*", default=None,
                        help="named set (gpu, cpu, tiny), benchdnn shape file (path, or a name such as "
                             "shapes_resnet_50 / deconv/shapes_2d), or descriptors such as mb32ic64ih56oc64oh56kh3ph1; "
                             "default: gpu on a GPU, cpu otherwise")
    parser.add_argument("--batch", type=int, default=None, help="override every layer's batch size")
    parser.add_argument("--passes", default=",".join(PASSES),
                        help="canonical passes, comma-separated (default: all three)")
    parser.add_argument("--device", default=None, help="OpenCL device: 'P:D' or a name substring (default: CLCONV_DEVICE)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N layers")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def _queue(selector):
    import pyopencl as cl

    from .device import default_queue, select_device

    if selector is None:
        return default_queue()
    device, _ = select_device(selector)
    return cl.CommandQueue(cl.Context([device]), properties=cl.command_queue_properties.PROFILING_ENABLE)


def _layers(args, gpu: bool):
    specs = args.shapes or ["gpu" if gpu else "cpu"]
    layers = []
    for spec in specs:
        layers += shape_sets.resolve_layers(spec, args.batch)
    passes = tuple(p.strip() for p in args.passes.split(",") if p.strip())
    for p in passes:
        if p not in PASSES:
            raise SystemExit(f"clconv: --passes must name passes among {PASSES}, got {p!r}")
    return layers[: args.limit] if args.limit else layers, passes


def main(argv=None) -> int:
    """``clconv bench``: time layer sets against PyTorch/cuDNN and NumPy; see the module docstring."""
    parser = argparse.ArgumentParser(prog="clconv bench", description=__doc__.split("\n\n")[1],
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
    parser.add_argument("--first-call", action="store_true",
                        help="measure cold first call, warm-disk-cache first call in a new process, and host overhead")
    parser.add_argument("--from-json", metavar="FILE", nargs="+",
                        help="no measuring: reprint (and --csv/--plot) the rows of earlier --json files; of "
                             "several runs of one set, each row's fastest time per library (a noisy machine)")
    parser.add_argument("--json", metavar="FILE", help="write the rows and summary as JSON")
    parser.add_argument("--csv", metavar="FILE", help="write the rows as CSV")
    parser.add_argument("--plot", metavar="FILE.png", help="plot GFLOP/s per layer-pass against the reference (matplotlib)")
    args = parser.parse_args(argv)
    import pyopencl as cl

    if args.from_json:
        runs = []
        for name in args.from_json:
            with open(name) as handle:
                runs.append(json.load(handle))
        rows: list[Row] = fastest_of_runs([[Row(**row) for row in data["rows"]] for data in runs])
        meta = dict(runs[0]["meta"], merged_from=list(args.from_json)) if len(runs) > 1 else runs[0]["meta"]
        print(f"clconv bench results from {' '.join(args.from_json)}: {meta.get('device')}; reference "
              f"{meta.get('reference')}" + (" (each row's fastest of the runs)" if len(runs) > 1 else ""))
        print_table(rows)
        args.json = None if args.json in args.from_json else args.json
        write_outputs(rows, args, meta)
        return 0

    if args.first_call:
        result = first_call_costs(args.shapes[0] if args.shapes else None, args.device, quiet=args.quiet)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(result, handle, indent=1)
        return 0

    queue = _queue(args.device)
    gpu = bool(queue.device.type & cl.device_type.GPU)
    layers, passes = _layers(args, gpu)
    repeats = args.repeats or (20 if gpu else 5)
    torch = None if args.no_torch else _torch(gpu)
    numpy_baseline = (not gpu) if args.numpy is None else args.numpy
    from .tuning import tuning_enabled

    meta = {"device": queue.device.name.strip(), "platform": queue.device.platform.name.strip(),
            "driver": queue.device.driver_version, "shapes": " ".join(args.shapes or ["gpu" if gpu else "cpu"]),
            "batch": args.batch, "algorithm": args.algorithm, "repeats": repeats, "stat": args.stat,
            "tuning": tuning_enabled(),
            "reference": (f"torch {torch.__version__}" + (" cudnn " + str(torch.backends.cudnn.version()) if gpu else "")
                          if torch is not None else None)}
    print(f"clconv bench on {meta['device']} ({meta['platform']}, driver {meta['driver']}); reference: "
          f"{meta['reference'] or 'none (PyTorch not importable)'}; tuning {'on' if meta['tuning'] else 'off (CLCONV_TUNE=0)'}")
    progress = Progress(len(layers) * len(passes), args.quiet)
    rows = []
    rng = np.random.default_rng(2024)
    for layer in layers:
        rows += bench_layer(layer, passes, queue, algorithm=args.algorithm, repeats=repeats, torch=torch,
                            numpy_baseline=numpy_baseline, check=args.check, rng=rng, progress=progress,
                            statistic=min if args.stat == "min" else statistics.median)
    progress.close()
    print_table(rows)
    if rows:
        write_outputs(rows, args, meta)
    bad = [r for r in rows if not math.isfinite(r.ms) or (args.check and not r.error <= 1e-4)]
    return 1 if bad else 0


def tune_main(argv=None) -> int:
    """``clconv tune``: measure and store the best (algorithm, tiles) of every layer-pass, once."""
    parser = argparse.ArgumentParser(prog="clconv tune", description="Pre-tune layers: measure every candidate "
                                     "algorithm x tile configuration and store the winner in the tuning database.")
    _common_arguments(parser)
    parser.add_argument("--force", action="store_true", help="measure again even where the database has a winner")
    parser.add_argument("--json", metavar="FILE", help="write what was tuned (winner, candidate times) as JSON")
    args = parser.parse_args(argv)
    import pyopencl as cl

    from . import tuning
    from .algorithms import Problem
    from .planner import tune

    queue = _queue(args.device)
    gpu = bool(queue.device.type & cl.device_type.GPU)
    layers, passes = _layers(args, gpu)
    print(f"clconv tune on {queue.device.name.strip()}: {len(layers)} layers x {len(passes)} passes; "
          f"database {tuning.database_path(queue.device)}")
    progress = Progress(len(layers) * len(passes), args.quiet)
    done, skipped, t_start = [], 0, time.perf_counter()
    for layer in layers:
        for pass_ in passes:
            problem = Problem(layer.geometry, pass_, "float32")
            progress(f"{layer.label} {PASS_LABELS[layer.transposed][pass_]}")
            entry = tuning.lookup(queue.device, problem.key())
            if entry is not None and entry.get("measured") and not args.force:
                skipped += 1
                continue
            t0 = time.perf_counter()
            runner, entry = tune(problem, queue)
            done.append({"layer": layer.label, "pass": pass_, "key": problem.key(), "seconds": time.perf_counter() - t0,
                         "algorithm": runner.algorithm, "config": runner.config, "times_ms": entry.get("times_ms", {})})
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
        with open(args.json, "w") as handle:
            json.dump({"device": queue.device.name.strip(), "total_s": total, "tuned": done}, handle, indent=1, default=str)
    return 0


# -- first-call costs -------------------------------------------------------------------------------

_FIRST_CALL_SCRIPT = r"""
import json, sys, time
t_import = time.perf_counter()
import numpy as np, pyopencl.array as cla, clconv
from clconv import builder
q = clconv.default_queue()
x = cla.to_device(q, np.random.default_rng(0).standard_normal(%(x)r).astype(np.float32))
w = cla.to_device(q, np.random.default_rng(1).standard_normal(%(w)r).astype(np.float32))
q.finish()
t_ready = time.perf_counter()
y = clconv.conv2d(x, w, stride=%(stride)r, padding=%(padding)r)
q.finish()
t_first = time.perf_counter()
print(json.dumps({"setup_s": t_ready - t_import, "first_call_s": t_first - t_ready,
                  "source_builds": builder.stats.source_builds, "disk_hits": builder.stats.disk_hits}))
"""


def first_call_costs(spec: str | None, device: str | None, quiet: bool = False) -> dict:
    """Cold first call, warm-disk-cache first call in a new process, and cached per-call host overhead.

    Each first call runs in a fresh Python process (``clconv.conv2d`` on device arrays, timed from
    after the context and inputs exist to ``queue.finish()``); the cold one gets an empty cache
    directory and tuning on, so it pays render + build + tune; the warm one reuses that directory
    (and the bytecode the cold one left, as an installed Python package has it).
    """
    layer = shape_sets.resolve_layers(spec or "mb4ic64ih28oc64oh28kh3ph1")[0]
    g = layer.geometry
    if g.ndim != 2 or layer.transposed or g.pad_begin != g.pad_end:
        raise SystemExit("clconv bench --first-call: give one symmetric-padding 2D convolution descriptor")
    params = {"x": g.input_shape, "w": g.weight_shape, "stride": g.stride[1:], "padding": g.pad_begin[1:]}
    script = _FIRST_CALL_SCRIPT % params
    result: dict = {"layer": g.tag()}
    with tempfile.TemporaryDirectory(prefix="clconv-firstcall-") as cache:
        env = dict(os.environ, CLCONV_CACHE_DIR=cache, CLCONV_TUNE="1")
        env.pop("CLCONV_NO_CACHE", None)
        # Python's bytecode cache is part of a warm disk cache, as in any installation: without it
        # (PYTHONDONTWRITEBYTECODE, set in some sandboxes) every process compiles the modules a
        # first call imports (pyopencl's invoker, the compiled templates) from source: 30 of 46 ms
        # of a warm first call on the H200's host
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if device:
            env["CLCONV_DEVICE"] = device
        for name in ("cold", "warm_disk_cache"):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"clconv bench --first-call: the {name} process failed:\n{done.stderr[-3000:]}")
            result[name] = json.loads(done.stdout.strip().splitlines()[-1])
            result[name]["process_s"] = time.perf_counter() - t0
    result["host_overhead"] = host_overhead(g)
    if not quiet:
        c, w, h = result["cold"], result["warm_disk_cache"], result["host_overhead"]
        print(f"first call of {g.tag()} on the default device:")
        print(f"  cold (empty cache, render + build + tune): {c['first_call_s'] * 1e3:9.1f} ms "
              f"({c['source_builds']} programs built from source)")
        print(f"  new process, warm disk cache:              {w['first_call_s'] * 1e3:9.1f} ms "
              f"({w['disk_hits']} programs from disk, {w['source_builds']} built); process start + import + "
              f"context: {w['setup_s'] * 1e3:.0f} ms")
        print(f"  cached call, host time per call in a stream of calls on {h['tiny_layer']} (kernel "
              f"{h['tiny_kernel_us']:.1f} us): {h['tiny_us']:.1f} us with out=, {h['tiny_alloc_us']:.1f} us "
              f"allocating the result, {h['tiny_pool_us']:.1f} us from a pyopencl MemoryPool")
        print(f"    of which clconv's own (the kernel enqueue stubbed out): {h['tiny_host_us']:.1f} us with out=, "
              f"{h['tiny_host_alloc_us']:.1f} us allocating")
        print(f"  cached call of this layer with finish() after each: wall {h['wall_us']:.1f} us vs kernel "
              f"{h['kernel_us']:.1f} us (overhead incl. synchronisation {h['overhead_us']:.1f} us)")
    return result


TINY_LAYER = "mb1ic8ih8oc8oh8kh3ph1"


class _NoEnqueue:
    """Stands in for a launch's kernel: sets its arguments as the launch would, then hands back an
    event that is already complete instead of enqueueing, so that a stream of calls times the host's
    own work without the driver's enqueue."""

    def __init__(self, kernel: Any, done: Any) -> None:
        self.kernel, self.done = kernel, done

    def __call__(self, queue, global_size, local_size, *args, wait_for=None):
        self.kernel.set_args(*args)
        return self.done

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)


def host_overhead(g, calls: int = 2000, repeats: int = 3) -> dict:
    """Host cost of a cached ``clconv.conv2d`` call on device arrays.

    On a tiny layer whose kernel takes a few microseconds (the device keeps up, so the wall time per
    call of a stream of calls is the host's), the best of ``repeats`` streams of ``calls`` calls:
    ``tiny_us`` with ``out=`` given (argument checks, plan lookup, argument setting, the driver's
    enqueue), ``tiny_alloc_us`` allocating the result instead, and ``tiny_host_us`` /
    ``tiny_host_alloc_us``, the same two with the kernel enqueue replaced by an already-complete
    event: clconv's own cost per call (with pyopencl's argument setting), the driver's enqueue left
    out; ``tiny_pool_us`` allocating results from the input's pyopencl MemoryPool.  For ``g`` itself: wall time per call with a ``finish()`` after each, against its kernel
    time from profiling events."""
    import pyopencl as cl
    import pyopencl.array as cla

    import clconv

    from .algorithms import Problem
    from .planner import plan, random_operands, time_runner

    queue = clconv.default_queue()
    rng = np.random.default_rng(0)

    def setup(geometry):
        x = cla.to_device(queue, rng.standard_normal(geometry.input_shape).astype(np.float32))
        w = cla.to_device(queue, rng.standard_normal(geometry.weight_shape).astype(np.float32))
        y = cla.empty(queue, geometry.output_shape, np.float32)
        kwargs = dict(stride=geometry.stride[1:], padding=geometry.pad_begin[1:])
        for _ in range(5):
            clconv.conv2d(x, w, **kwargs, out=y)
        queue.finish()
        return x, w, y, kwargs

    def per_call_us(x, w, kwargs) -> float:
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                clconv.conv2d(x, w, **kwargs)
            queue.finish()
            best = min(best, (time.perf_counter() - t0) / calls)
        return best * 1e6

    tiny = shape_sets.parse_descriptor(TINY_LAYER).geometry
    x, w, y, kwargs = setup(tiny)
    tiny_runner = plan(Problem(tiny, "forward", "float32"), queue)  # the runner those calls use
    figures = {"tiny_us": per_call_us(x, w, {**kwargs, "out": y}), "tiny_alloc_us": per_call_us(x, w, kwargs)}
    # results from a pyopencl MemoryPool: the input's allocator is the result's
    from pyopencl.tools import ImmediateAllocator, MemoryPool

    pooled = cla.to_device(queue, x.get(), allocator=MemoryPool(ImmediateAllocator(queue)))
    figures["tiny_pool_us"] = per_call_us(pooled, w, kwargs)
    done = cl.enqueue_marker(queue)
    done.wait()
    real_kernels = [launch.kernel for launch in tiny_runner.launches]
    try:
        for launch in tiny_runner.launches:
            launch.kernel = cast(Any, _NoEnqueue(launch.kernel, done))
        figures["tiny_host_us"] = per_call_us(x, w, {**kwargs, "out": y})
        figures["tiny_host_alloc_us"] = per_call_us(x, w, kwargs)
    finally:
        for launch, real_kernel in zip(tiny_runner.launches, real_kernels):
            launch.kernel = real_kernel
    tiny_kernel = time_runner(tiny_runner, queue, random_operands(Problem(tiny, "forward", "float32"), queue), 20)

    x, w, y, kwargs = setup(g)
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        clconv.conv2d(x, w, **kwargs, out=y)
        queue.finish()
    wall = (time.perf_counter() - t0) / n
    runner = plan(Problem(g, "forward", "float32"), queue)
    kernel = time_runner(runner, queue, random_operands(Problem(g, "forward", "float32"), queue), 20)
    return {"tiny_layer": tiny.tag(), **figures, "tiny_kernel_us": tiny_kernel * 1e6,
            "wall_us": wall * 1e6, "kernel_us": kernel * 1e6, "overhead_us": (wall - kernel) * 1e6,
            "algorithm": runner.algorithm}


if __name__ == "__main__":
    sys.exit(main())
