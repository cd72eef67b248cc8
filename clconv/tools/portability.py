"""The table of docs/portability.md for the device in hand: every op family x algorithm x dtype,
each run through the public op on a few small geometries (chosen so that every algorithm serves at
least one) and checked against the float64 reference, as `clconv check` does.

    python -m clconv.tools.portability [--device SELECTOR] [--markdown]

A cell says ``pass`` (every geometry the algorithm serves matched the reference), ``declined: why``
(it serves none of them: the algorithm's own reason, as `clconv check` shows it) or ``FAIL`` /
``ERROR`` with the geometry and what went wrong.  The exit status is 1 if any cell failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import clconv
from clconv import device as devices

from .calls import CLIError, build_call
from .cli import CheckRow, check_rows

FAMILIES = ("conv", "conv_input", "conv_weight", "conv_transpose", "conv_transpose_input", "conv_transpose_weight")

# (input, weight, options) of each family's forward op; between them every algorithm serves one
Geometries = tuple[tuple[str, str, dict[str, Any]], ...]
FORWARD_GEOMETRIES: Geometries = (
    ("2,8,9,8", "6,8,3,3", {"padding": "1"}),               # 3x3 stride 1: winograd, the GEMMs, direct
    ("2,8,16,16", "6,8,1,1", {}),                            # 1x1: gemm1x1; a 512-long weight-gradient sum: splitk
    ("2,4,9,9", "8,1,3,3", {"padding": "1", "groups": 4}),   # depthwise: depthwise, depthwise_rows
    ("2,6,11,10", "4,3,3,2", {"stride": "2", "padding": "1:2,0:1", "dilation": "1,2", "groups": 2}),
)
TRANSPOSED_GEOMETRIES: Geometries = (
    ("2,6,9,8", "6,8,3,3", {"padding": "1"}),
    ("2,6,16,16", "6,8,1,1", {}),
    ("2,8,9,9", "8,1,3,3", {"padding": "1", "groups": 8}),
    ("2,4,6,5", "4,3,3,2", {"stride": "2", "padding": "1", "output_padding": "1", "groups": 2}),
)


def _op_name(family: str) -> str:
    """The 2D op of a family: conv_transpose_input -> conv_transpose2d_input."""
    for suffix in ("_input", "_weight"):
        if family.endswith(suffix):
            return f"{family[: -len(suffix)]}2d{suffix}"
    return f"{family}2d"


def _arguments(family: str, shapes: tuple, dtype: str) -> argparse.Namespace:
    ishape, wshape, options = shapes
    return argparse.Namespace(op=_op_name(family), input=ishape, weight=wshape, stride=options.get("stride", "1"),
                              padding=options.get("padding", "0"), dilation=options.get("dilation", "1"),
                              groups=options.get("groups", 1), output_padding=options.get("output_padding"),
                              bias=family in ("conv", "conv_transpose"), dtype=dtype)


def cell(rows: list[tuple[str, CheckRow]]) -> str:
    """One table cell from an algorithm's rows over the geometries: (geometry tag, row)."""
    bad = [(tag, row) for tag, row in rows if row.result in ("FAIL", "ERROR")]
    if bad:
        tag, row = bad[0]
        return f"{row.result} ({len(bad)} of {len(rows)}; {tag}: {row.note})"
    served = [row for _, row in rows if row.result == "pass"]
    if served:
        return "pass" if len(served) == len(rows) else f"pass (serves {len(served)} of {len(rows)})"
    reason = rows[0][1].note.split(": ", 1)[-1]
    return f"declined: {reason}"


def table(queue, dtypes: Sequence[str]) -> tuple[list[tuple[str, str, dict[str, str]]], bool]:
    """``[(family, algorithm, {dtype: cell})]`` and whether any cell failed."""
    out, failed = [], False
    for family in FAMILIES:
        geometries = TRANSPOSED_GEOMETRIES if family.startswith("conv_transpose") else FORWARD_GEOMETRIES
        per_algorithm: dict[str, dict[str, list[tuple[str, CheckRow]]]] = {}
        for dtype in dtypes:
            for number, shapes in enumerate(geometries):
                args = _arguments(family, shapes, dtype)
                call = build_call(args, np.random.default_rng(number).standard_normal)
                names = clconv.algorithms(call.pass_)
                for row in check_rows(call, names, queue, np.dtype(dtype), args.bias, every_config=False):
                    per_algorithm.setdefault(row.algorithm, {}).setdefault(dtype, []).append((call.geometry.tag(), row))
        for algorithm, by_dtype in per_algorithm.items():
            cells = {dtype: cell(rows) for dtype, rows in by_dtype.items()}
            failed |= any(text.startswith(("FAIL", "ERROR")) for text in cells.values())
            out.append((family, algorithm, cells))
    return out, failed


def merged(tables: list[dict]) -> str:
    """One markdown table of several implementations' --json tables: a column per implementation
    and dtype; "no fp64" where a device has no cl_khr_fp64 (its calls are a TypeError)."""
    columns = [(t["name"], dtype) for t in tables for dtype in ("float32", "float64")]
    missing = {t["name"]: "no fp64" for t in tables if "float64" not in t["dtypes"]}
    lookup = {(t["name"], r["op"], r["algorithm"]): r["cells"] for t in tables for r in t["rows"]}
    keys = list(dict.fromkeys((r["op"], r["algorithm"]) for t in tables for r in t["rows"]))
    lines = ["| op | algorithm | " + " | ".join(f"{name} {dtype}" for name, dtype in columns) + " |",
             "| --- | --- | " + " | ".join("---" for _ in columns) + " |"]
    for op, algorithm in keys:
        cells = [lookup.get((name, op, algorithm), {}).get(dtype, missing.get(name, "-")) for name, dtype in columns]
        lines.append(f"| {op} | {algorithm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clconv.tools.portability", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, metavar="SELECTOR", help="'P:D' or a name substring")
    parser.add_argument("--name", default=None, help="the implementation's name in --json (default: the platform's)")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON, for --merge")
    parser.add_argument("--merge", nargs="+", metavar="FILE", help="print one table of several --json files")
    args = parser.parse_args(argv)
    if args.merge:
        print(merged([json.loads(Path(path).read_text()) for path in args.merge]))
        return 0
    try:
        queue = devices.queue_for(args.device)
    except devices.DeviceSelectionError as exc:
        print(f"clconv: {exc}", file=sys.stderr)
        return 2
    device = queue.device
    dtypes = ["float32"] + (["float64"] if devices.supports_fp64(device) else [])
    print(f"{device.name.strip()} ({device.platform.name.strip()}, {device.platform.version.strip()}, "
          f"driver {device.driver_version})\n")
    try:
        rows, failed = table(queue, dtypes)
    except CLIError as exc:
        print(f"clconv: {exc}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps({
            "name": args.name or device.platform.name.strip(), "device": device.name.strip(),
            "driver": device.driver_version, "dtypes": dtypes,
            "rows": [{"op": family, "algorithm": algorithm, "cells": cells} for family, algorithm, cells in rows]}))
    print("| op | algorithm | " + " | ".join(dtypes) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in dtypes) + " |")
    for family, algorithm, cells in rows:
        print(f"| {family} | {algorithm} | " + " | ".join(cells.get(d, "-") for d in dtypes) + " |")
    if len(dtypes) == 1:
        print("\nfloat64: not run (the device has no cl_khr_fp64)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
