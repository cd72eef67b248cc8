"""Benchmark results: the :class:`Row` of one layer-pass, the terminal table and its summary, merging
several runs of one shape set, CSV/JSON files, a matplotlib plot, and the progress bar."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, TextIO

import numpy as np

from clconv.passes import OPS, PASSES

# What each op family is called in the table; a layer's canonical pass is shown as the family of
# its kind (convolution or transposed convolution) that runs that pass (clconv.passes.OPS).
FAMILY_LABELS = {
    "conv": "fwd", "conv_input": "bwd_data", "conv_weight": "bwd_weight",
    "conv_transpose": "fwd(deconv)", "conv_transpose_input": "bwd_data(deconv)",
    "conv_transpose_weight": "bwd_weight(deconv)",
}


def pass_label(pass_: str, transposed: bool) -> str:
    """The user's name of canonical pass ``pass_`` of a convolution or a transposed convolution layer."""
    for family, op in OPS.items():
        if op.pass_ == pass_ and family.startswith("conv_transpose") == transposed:
            return FAMILY_LABELS[family]
    raise ValueError(f"pass_ must be one of {PASSES}, got {pass_!r}")


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
    # what a user sees: ms per call of a stream of public-API calls with default arguments (results
    # allocated by clconv), one synchronisation at the end; the reference library timed the same way
    stream_ms: float = float("nan")
    ref_stream_ms: float = float("nan")
    stream_ratio: float = float("nan")
    note: str = ""


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
            best.stream_ms = min(best.stream_ms, row.stream_ms) if math.isfinite(best.stream_ms) else row.stream_ms
            best.ref_stream_ms = (min(best.ref_stream_ms, row.ref_stream_ms) if math.isfinite(best.ref_stream_ms)
                                  else row.ref_stream_ms)
            best.error = max(best.error, row.error) if math.isfinite(best.error) else row.error
    for row in merged.values():
        row.ratio = row.ms / row.ref_ms if math.isfinite(row.ref_ms) and row.ref_ms > 0 else float("nan")
        row.stream_ratio = (row.stream_ms / row.ref_stream_ms if math.isfinite(row.ref_stream_ms)
                            and row.ref_stream_ms > 0 else float("nan"))
    return list(merged.values())


def geomean(values: Iterable[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _fmt(v: Any, spec: str) -> str:
    return format(v, spec) if isinstance(v, (int, float)) and math.isfinite(v) else "-".rjust(len(format(1.0, spec)))


def print_table(rows: list[Row], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    streams = any(math.isfinite(r.stream_ms) for r in rows)
    head = (f"{'layer':32} {'pass':18} {'algorithm':14} {'ms':>9} {'GFLOP/s':>9} {'ref ms':>9} {'ratio':>6} "
            + (f"{'stream':>8} {'ref str':>8} {'ratio':>6} " if streams else "")
            + f"{'numpy ms':>9} {'plan s':>7} {'rel err':>8}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in rows:
        stream = (f"{_fmt(r.stream_ms, '8.3f')} {_fmt(r.ref_stream_ms, '8.3f')} {_fmt(r.stream_ratio, '6.2f')} "
                  if streams else "")
        print(f"{r.layer[:32]:32} {r.label:18} {r.algorithm[:14]:14} {_fmt(r.ms, '9.3f')} {_fmt(r.gflops, '9.0f')} "
              f"{_fmt(r.ref_ms, '9.3f')} {_fmt(r.ratio, '6.2f')} {stream}{_fmt(r.numpy_ms, '9.3f')} "
              f"{_fmt(r.plan_s, '7.2f')} {_fmt(r.error, '8.1e')}{'  ' + r.note.strip() if r.note else ''}", file=out)
    if streams:
        print("ms: kernel time (profiling events); stream: wall ms per call of 20 default public-API calls with one "
              "sync at the end, the reference library the same way", file=out)
    summary(rows, out)


def summary(rows: list[Row], out: TextIO | None = None) -> dict:
    """The summary figures of ``rows`` (geometric mean ratios, NumPy speedups, largest error),
    printed to ``out`` and returned."""
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
    stream_ratios = [r for r in rows if math.isfinite(r.stream_ratio)]
    if stream_ratios:
        worst = max(stream_ratios, key=lambda r: r.stream_ratio)
        result.update(stream_geomean_ratio=geomean(r.stream_ratio for r in stream_ratios),
                      stream_worst_ratio=worst.stream_ratio, stream_worst=f"{worst.layer} {worst.label}")
        print(f"stream of default calls, clconv/{rows[0].ref_name or 'ref'} wall time per call over "
              f"{len(stream_ratios)} layer-passes: {result['stream_geomean_ratio']:.3f} (worst "
              f"{worst.stream_ratio:.2f}: {result['stream_worst']})", file=out)
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


def read_runs(paths: list[str]) -> tuple[list[Row], dict]:
    """The rows of earlier ``--json`` files (several runs of one set: :func:`fastest_of_runs`) and
    their metadata."""
    runs = []
    for name in paths:
        with open(name) as handle:
            runs.append(json.load(handle))
    rows = fastest_of_runs([[Row(**row) for row in data["rows"]] for data in runs])
    meta = dict(runs[0]["meta"], merged_from=list(paths)) if len(runs) > 1 else runs[0]["meta"]
    return rows, meta


def write_outputs(rows: list[Row], meta: dict, json_path: str | None = None, csv_path: str | None = None,
                  plot_path: str | None = None) -> None:
    """The rows (and, in JSON, the metadata and summary) to whichever of the files are given."""
    if json_path:
        write_json(json_path, rows, meta)
    if csv_path:
        with open(csv_path, "w", newline="") as handle:
            fields = [f for f in asdict(rows[0]) if f != "config"] + ["config"] if rows else []
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            for r in rows:
                d = asdict(r)
                d["config"] = json.dumps(d["config"], sort_keys=True)
                writer.writerow(d)
    if plot_path:
        plot(rows, plot_path, meta)


def write_json(path: str, rows: list[Row], meta: dict) -> None:
    """``--json``'s file: the metadata, the summary of ``rows`` and the rows (replace_json)."""
    replace_json(path, {"meta": meta, "summary": summary(rows, io.StringIO()), "rows": [asdict(r) for r in rows]})


def replace_json(path: str, data: Any) -> None:
    """``data`` as JSON at ``path``, replaced whole (written beside it, then renamed), so that a
    reader never sees half of one: the bench and tune commands rewrite theirs as they go."""
    partial = f"{path}.partial"
    with open(partial, "w") as handle:
        json.dump(data, handle, indent=1, default=str)
    os.replace(partial, path)


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


class Progress:
    """A one-line text progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, total: int, quiet: bool = False, stream: TextIO | None = None):
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
