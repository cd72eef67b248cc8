"""The ``clconv`` command line (``python -m clconv``, or the ``clconv`` console script).

Subcommands:

* ``info``       platforms, devices, the default device and why, capabilities, settings, caches;
* ``render OP``  the OpenCL source (and tile configuration) one call would build;
* ``check OP``   one geometry through every algorithm of the op's pass against the float64
  reference: pass/fail and error per algorithm (the loop of a template tweaker);
* ``bench`` / ``tune``   the performance tools (:mod:`clconv.tools.bench`);
* ``templates``  the template files on the search path and which copy wins;
* ``cache {list,clear,path}``  the program cache and the tuning database;
* ``demo``       the quick start's demo (:mod:`clconv.tools.demo`).

``OP`` is a public op name (``conv2d``, ``conv_transpose3d``, ``conv1d_input``,
``conv_transpose2d_weight``, ...).  For every op, ``--input`` and ``--weight`` are the shapes of
the *forward* op of its family (``conv*d`` or ``conv_transpose*d``); the gradient ops derive
``grad_output`` from them.  Errors are one line on stderr and a nonzero exit code (2 for a usage
error, 1 otherwise) unless ``--debug`` is given, which shows the traceback.  Building an op call from
the command line is :mod:`clconv.tools.calls`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TextIO

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

import clconv
from clconv import builder, caches, limits, planner, reference, settings, templates, tuning
from clconv import device as devices
from clconv.dtypes import numpy_dtype
from clconv.passes import PASS_TABLE
from clconv.plan import Problem
from clconv.runtime import Operand

from .calls import FAILURE, USAGE_ERROR, CLIError, OpCall, Parser, add_geometry_arguments, build_call

# Subcommands handed to another module's ``main(argv)`` with the rest of the command line.
DELEGATED = {
    "bench": ("clconv.tools.bench", "main"),
    "tune": ("clconv.tools.bench", "tune_main"),
    "demo": ("clconv.tools.demo", "main"),
}

# The parts of the disk cache (under the cache directory), as `cache list` / `cache clear` name them.
CACHE_PARTS = {"programs": "programs-v*", "tuning": "tuning-v*", "failed": "failed", "templates": "mako-v*",
               "devices": "devices-v*"}


# -- subcommands ---------------------------------------------------------------------------------


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - unreachable


def _usage(paths: Sequence[Path], pattern: str = "*") -> tuple[int, int]:
    """(files, bytes) under ``paths`` matching ``pattern``."""
    files = [p for path in paths if path.is_dir() for p in path.rglob(pattern) if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def cache_parts() -> dict[str, list[Path]]:
    """The disk cache's parts (compiled programs, the tuning database, sources of failed builds,
    Mako's compiled templates, probed device limits): the folders of each under the cache directory,
    every format version."""
    root = builder.cache_dir()
    return {part: sorted(p for p in root.glob(pattern) if p.is_dir()) for part, pattern in CACHE_PARTS.items()}


def _where(part: str, paths: list[Path]) -> str:
    return ", ".join(str(p) for p in paths) or str(builder.cache_dir() / CACHE_PARTS[part])


def _device_kinds(device: cl.Device) -> str:
    kinds = [k for k in ("CPU", "GPU", "ACCELERATOR", "CUSTOM") if device.type & getattr(cl.device_type, k)]
    return ", ".join(kinds) or "unknown type"


def _limits_text(device: cl.Device) -> str:
    """What clconv derives configurations from (clconv.limits), or why it could not be probed."""
    try:
        fit = limits.of(device)
    except cl.Error as exc:
        return f"limits not probed ({exc})"
    return (f"a kernel gets {fit.work_group} work-items, native vectors {fit.float_lanes} floats / "
            f"{fit.double_lanes} doubles")


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    print(f"clconv {clconv.__version__}, pyopencl {cl.VERSION_TEXT}, numpy {np.__version__}", file=out)
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    if not platforms:
        print("no OpenCL platform found (on Debian/Ubuntu: apt-get install pocl-opencl-icd)", file=out)
    for p_index, platform in enumerate(platforms):
        print(f"platform {p_index}: {platform.name} ({platform.vendor}, {platform.version})", file=out)
        try:
            found = platform.get_devices()
        except cl.Error as exc:
            print(f"  cannot list devices: {exc}", file=out)
            continue
        if not found:
            # as Mesa's rusticl (without RUSTICL_ENABLE) and Clover register themselves on many machines
            print("  no devices", file=out)
        for d_index, device in enumerate(found):
            extensions = device.extensions.split()
            fp64 = "yes" if "cl_khr_fp64" in extensions or device.double_fp_config else "no"
            fp16 = "yes" if "cl_khr_fp16" in extensions else "no"
            print(f"  device {p_index}:{d_index}: {device.name.strip()} [{_device_kinds(device)}]", file=out)
            print(f"    {device.version}, driver {device.driver_version}, {device.opencl_c_version}", file=out)
            print(f"    compute units {device.max_compute_units}, global memory {_human_bytes(device.global_mem_size)}, "
                  f"max allocation {_human_bytes(device.max_mem_alloc_size)}", file=out)
            print(f"    local memory {_human_bytes(device.local_mem_size)}, "
                  f"max work-group size {device.max_work_group_size}, fp64 {fp64}, fp16 {fp16}", file=out)
            print(f"    {_limits_text(device)}, {device.address_bits}-bit addresses, out-of-order queues "
                  f"{'yes' if device.queue_properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE else 'no'}",
                  file=out)
    try:
        device, why = devices.default_device_choice()
        print(f"default device: {device.name.strip()} ({why})", file=out)
    except RuntimeError as exc:  # no device, or a selector that matches none
        print(f"default device: none ({exc})", file=out)
    state = "on" if settings.disk_cache_enabled() else "off (CLCONV_NO_CACHE)"
    print(f"cache directory: {settings.cache_dir()} (disk cache {state})", file=out)
    for part, paths in cache_parts().items():
        files, size = _usage(paths)
        print(f"  {part:9} {_where(part, paths)}: {files} files, {_human_bytes(size)}", file=out)
    held = ", ".join(f"{name} {count}" for name, count in caches.sizes().items() if count)
    print(f"in-memory caches of this process: {held or 'empty'}", file=out)
    print("template search path: " + os.pathsep.join(str(d) for d in templates.template_dirs()), file=out)
    shown = settings.shown()
    print("environment: " + (", ".join(shown) if shown else "no CLCONV_* variable set"), file=out)
    pinning = os.environ.get("POCL_AFFINITY")
    if pinning is None:
        source = "unset: not pinned"
    elif devices.pocl_pinned_by_clconv:
        source = "set by import clconv"
    else:
        source = "as this process was given it"
    print(f"PoCL's workers: POCL_AFFINITY={pinning!r} ({source})", file=out)
    print("settings (environment variables clconv reads):", file=out)
    for name, meaning in settings.VARIABLES.items():
        print(f"  {name:22} {meaning}", file=out)
    return 0


def cmd_render(args: argparse.Namespace, out: TextIO) -> int:
    call = build_call(args, lambda shape: np.zeros(shape))
    queue = devices.queue_for(args.device)
    print(clconv.render(call.function, *call.args, **call.kwargs, algorithm=args.algorithm, queue=queue), file=out)
    return 0


@dataclass
class CheckRow:
    """One algorithm (or one of its configurations) checked against the float64 reference."""

    algorithm: str
    result: str  # "pass", "FAIL", "ERROR" (it failed to build or run) or "skip" (it declines)
    note: str  # the configuration, the reason it declines, or the error
    error: float | None = None  # the largest absolute difference from the reference
    relative: float | None = None  # that, relative to the largest reference value


def check_rows(call: OpCall, names: list[str], queue: cl.CommandQueue, dtype: np.dtype, bias: bool,
               every_config: bool, tolerance: float | None = None, debug: bool = False) -> Iterator[CheckRow]:
    """Run ``call`` through each algorithm of ``names`` (every configuration of each when
    ``every_config``) and compare with the float64 reference: what `clconv check` prints and
    `python -m clconv.tools.portability` tabulates."""
    problem = Problem(call.geometry, call.pass_, dtype.name, bias=bias)
    every_config = every_config and call.geometry.batch > 0  # batch 0 launches nothing
    expected = call.canonical_reference() if every_config else call.reference()
    scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
    tolerance = tolerance if tolerance is not None else reference.tolerance(call.reduction_length, dtype)
    for name in names:
        algorithm = planner.get_algorithm(name, call.pass_)
        try:
            planner.check_serves(algorithm, problem, queue.device)
        except ValueError as exc:
            yield CheckRow(name, "skip", str(exc))
            continue
        for config in (algorithm.configs(problem, queue.device) if every_config else [None]):
            try:
                if config is None:  # the public op, as a user calls it
                    got, config = _run_op(call, problem, name, queue, dtype)
                else:  # one tile configuration, launched directly
                    got = _run_config(call, problem, algorithm, config, queue, dtype)
            except Exception as exc:  # a build or launch failure is this algorithm's result, not the CLI's
                if debug:
                    raise
                text = str(exc).strip()
                yield CheckRow(name, "ERROR", f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}")
                continue
            finite = bool(np.isfinite(got).all())
            err = float(np.max(np.abs(got.astype(np.float64) - expected))) if expected.size else 0.0
            note = _config_text(config)
            if not finite:
                note = f"{np.count_nonzero(~np.isfinite(got))} elements unwritten or not finite; {note}"
            yield CheckRow(name, "pass" if finite and err / scale <= tolerance else "FAIL", note, err, err / scale)


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    rng = np.random.default_rng(args.seed)
    call = build_call(args, lambda shape: rng.standard_normal(shape))
    names = clconv.algorithms(call.pass_)
    if args.algorithm not in (None, "auto"):  # auto: every algorithm it could choose
        try:
            planner.get_algorithm(args.algorithm, call.pass_)
        except ValueError:
            raise CLIError(f"--algorithm must be one of {names} for {args.op} (the {call.pass_} pass), "
                           f"got {args.algorithm!r}", USAGE_ERROR) from None
        names = [args.algorithm]
    queue = devices.queue_for(args.device)
    dtype = numpy_dtype(args.dtype)
    tolerance = args.tolerance if args.tolerance is not None else reference.tolerance(call.reduction_length, dtype)
    print(f"{args.op}: {call.pass_} pass of {call.geometry.tag()} ({dtype.name}) on {queue.device.name.strip()!r}; "
          f"result {call.result_shape}, tolerance {tolerance:.1e} relative", file=out)
    header = f"{'algorithm':14} {'result':7} {'max abs err':>12} {'rel err':>10}  config / reason"
    print(header, file=out)
    print("-" * len(header), file=out)
    failures = checked = skipped = 0
    for row in check_rows(call, names, queue, dtype, bool(args.bias), args.all_configs, tolerance, args.debug):
        if row.result == "skip":
            skipped += 1
            print(f"{row.algorithm:14} {'skip':7} {'':>12} {'':>10}  {row.note}", file=out)
            continue
        checked += 1
        failures += row.result != "pass"
        if row.error is None:
            print(f"{row.algorithm:14} {row.result:7} {'':>12} {'':>10}  {row.note}", file=out)
        else:
            print(f"{row.algorithm:14} {row.result:7} {row.error:12.3e} {row.relative:10.2e}  {row.note}", file=out)
    what = "configuration(s)" if args.all_configs and call.geometry.batch > 0 else "algorithm(s)"
    verdict = "all passed" if not failures else f"{failures} failed"
    print(f"{checked} {what} run, {skipped} algorithm(s) skipped: {verdict}", file=out)
    return FAILURE if failures else 0


def _run_op(call: OpCall, problem: Problem, name: str, queue: cl.CommandQueue,
            dtype: np.dtype) -> tuple[np.ndarray, dict]:
    """Run the public op with ``algorithm=name`` into a NaN-poisoned ``out``; also the config it used."""
    # poisoned: an element the kernels never write fails the check (set from the host: pyopencl's
    # fill() builds a kernel in the dtype, which half without cl_khr_fp16 and bfloat16 cannot have)
    result = cl_array.to_device(queue, np.full(call.result_shape, np.nan, dtype))
    config = planner.plan(problem, queue, name).config
    call.function(*call.args, **call.kwargs, algorithm=name, queue=queue, out=result)
    return result.get(queue), config


def _run_config(call: OpCall, problem: Problem, algorithm: Any, config: dict, queue: cl.CommandQueue,
                dtype: np.dtype) -> np.ndarray:
    """Launch one (algorithm, tile configuration) on the canonical operands; the canonical result."""
    spec = PASS_TABLE[call.pass_]
    arrays = {role: cl_array.to_device(queue, np.ascontiguousarray(a, dtype)) for role, a in call.canonical.items()}
    # poisoned from the host, as _run_op's (fill() would build a kernel in half or bfloat16)
    arrays[spec.result] = cl_array.to_device(queue, np.full(spec.shape(spec.result, call.geometry), np.nan, dtype))
    runner = planner.prepare(problem, algorithm, config, queue)
    events = runner.run(queue, {role: Operand(a.base_data, a.offset // a.dtype.itemsize) for role, a in arrays.items()})
    events[-1].wait()
    return arrays[spec.result].get(queue)


def _config_text(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(config.items())) or "(no parameters)"


def cmd_templates(args: argparse.Namespace, out: TextIO) -> int:
    print("search path (first match wins): " + os.pathsep.join(str(d) for d in templates.template_dirs()), file=out)
    for name, winner, shadowed in templates.list_templates():
        print(f"{name:16} {winner}", file=out)
        for path in shadowed:
            print(f"{'':16} shadows {path}", file=out)
    return 0


def _tuning_devices() -> dict[str, str]:
    """Tuning database file name -> name of the present device it belongs to."""
    names = {}
    try:
        for platform in cl.get_platforms():
            for device in platform.get_devices():
                names[tuning.database_path(device).name] = f"{device.name.strip()} ({platform.name})"
    except cl.Error:
        pass
    return names


def cmd_cache(args: argparse.Namespace, out: TextIO) -> int:
    parts = cache_parts()
    if args.action == "path":
        print(builder.cache_dir(), file=out)
        return 0
    if args.action == "clear":
        for part in [p for p in parts if getattr(args, p)] or list(parts):
            files, size = _usage(parts[part])
            for path in parts[part]:
                shutil.rmtree(path)
            print(f"removed {part}: {files} files, {_human_bytes(size)} ({_where(part, parts[part])})", file=out)
        return 0
    # list
    print(f"cache directory: {builder.cache_dir()}", file=out)
    files, size = _usage(parts["programs"], "*.bin")
    print(f"programs: {files} compiled programs, {_human_bytes(size)} in {_where('programs', parts['programs'])}",
          file=out)
    if args.files:
        for path in sorted(p for folder in parts["programs"] for p in folder.rglob("*.bin")):
            print(f"  {path.stat().st_size:>10}  {path}", file=out)
    databases = sorted(p for folder in parts["tuning"] for p in folder.glob("*.json"))
    print(f"tuning: {len(databases)} device database(s) in {_where('tuning', parts['tuning'])}", file=out)
    present = _tuning_devices()
    for path in databases:
        try:
            entries = json.loads(path.read_text()).get("entries", {})
        except (OSError, ValueError, AttributeError):
            print(f"  {path.name}: unreadable", file=out)
            continue
        print(f"  {path.name}: {len(entries)} entries, {present.get(path.name, 'a device not present here')}", file=out)
        if args.entries:
            for key, entry in sorted(entries.items()):
                config = _config_text(entry.get("config", {})) if isinstance(entry, dict) else "?"
                algorithm = entry.get("algorithm", "?") if isinstance(entry, dict) else "?"
                print(f"    {key} -> {algorithm} {config}", file=out)
    for part, what in (("failed", "failed builds: {} saved sources"), ("templates", "compiled templates: {} files"),
                       ("devices", "device limits: {} probed devices")):
        files, size = _usage(parts[part])
        if files:
            print(f"{what.format(files)}, {_human_bytes(size)} in {_where(part, parts[part])}", file=out)
    return 0


def cmd_delegated(name: str, argv: list[str]) -> int:
    module_name, function_name = DELEGATED[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise CLIError(f"'clconv {name}' needs {module_name}, which this installation does not have") from None
    result = getattr(module, function_name)(argv)
    return int(result or 0)


# -- the parser and main ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="clconv", description="OpenCL convolution kernels: inspect, render, check, benchmark.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    # --debug is accepted after the subcommand too (SUPPRESS: the subcommand must not reset it to False)
    common = Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    sub.add_parser("info", parents=[common], help="platforms, devices, the default device, caches")

    render = sub.add_parser("render", parents=[common], help="print the OpenCL source one call would build")
    add_geometry_arguments(render)
    render.add_argument("--algorithm", default="auto", help="algorithm name or 'auto' (default)")

    check = sub.add_parser("check", parents=[common], help="run one geometry through every algorithm against the reference")
    add_geometry_arguments(check)
    check.add_argument("--algorithm", default=None, help="check only this algorithm")
    check.add_argument("--seed", type=int, default=0, help="random data seed (default 0)")
    check.add_argument("--all-configs", action="store_true",
                       help="run every tile configuration of each algorithm, not only the one the planner picks")
    check.add_argument("--tolerance", type=float, default=None,
                       help="max error relative to max(1, max|reference|) (default: grows with the reduction length)")

    sub.add_parser("templates", parents=[common], help="the template files and which copy wins")

    cache = sub.add_parser("cache", parents=[common], help="the program cache and tuning database: list, clear, path")
    cache_sub = cache.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    cache_sub.required = True
    listing = cache_sub.add_parser("list", parents=[common], help="what is cached, and how much")
    listing.add_argument("--files", action="store_true", help="every compiled program file")
    listing.add_argument("--entries", action="store_true", help="every tuning database entry")
    clear = cache_sub.add_parser("clear", parents=[common], help="delete cached programs and tuning results (default: all)")
    clear.add_argument("--programs", action="store_true", help="only the compiled programs")
    clear.add_argument("--tuning", action="store_true", help="only the tuning database")
    clear.add_argument("--failed", action="store_true", help="only the saved sources of failed builds")
    clear.add_argument("--templates", action="store_true", help="only Mako's compiled templates")
    clear.add_argument("--devices", action="store_true", help="only the probed device limits")
    cache_sub.add_parser("path", parents=[common], help="print the cache directory")

    sub.add_parser("bench", help="benchmark shape sets (clconv.tools.bench; 'clconv bench --help')", add_help=False)
    sub.add_parser("tune", help="tune shape sets into the database ('clconv tune --help')", add_help=False)
    sub.add_parser("demo", help="check and time real networks' layers (the quick start)", add_help=False)
    return parser


COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO], int]] = {
    "info": cmd_info,
    "render": cmd_render,
    "check": cmd_check,
    "templates": cmd_templates,
    "cache": cmd_cache,
}


def _split_delegated(argv: list[str]) -> tuple[bool, str | None, list[str]]:
    """``(debug, command, rest)`` when the command is a delegated one, else ``(debug, None, argv)``."""
    debug = False
    for i, token in enumerate(argv):
        if token == "--debug":
            debug = True
            continue
        if token in DELEGATED:
            return debug, token, argv[i + 1:]
        break
    return debug, None, argv


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, CLIError):
        return first
    more = " (run with --debug for the full message)" if "\n" in text else ""
    return f"{type(exc).__name__}: {first}{more}"


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    debug, delegated, rest = _split_delegated(argv)
    try:
        if delegated is not None:
            return cmd_delegated(delegated, rest)
        args = build_parser().parse_args(argv)
        debug = args.debug
        return COMMANDS[args.command](args, out)
    except KeyboardInterrupt:
        print("clconv: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `clconv render ... | head`: the reader left; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return 1
    except SystemExit as exc:  # --help, or a delegated main calling sys.exit
        if isinstance(exc.code, str):  # sys.exit("message"): the interpreter would print it; so do we
            print(exc.code, file=sys.stderr)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else FAILURE)
    except Exception as exc:
        if debug:
            raise
        code, prog = (exc.code, exc.prog) if isinstance(exc, CLIError) else (FAILURE, "clconv")
        print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
