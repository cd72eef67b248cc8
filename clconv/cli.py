"""The ``clconv`` command line (``python -m clconv``, or the ``clconv`` console script).

Subcommands:

* ``info``       platforms, devices, the default device and why, capabilities, cache locations;
* ``render OP``  the OpenCL source (and tile configuration) one call would build;
* ``check OP``   one geometry through every algorithm of the op's pass against the float64
  reference: pass/fail and error per algorithm (the loop of a template tweaker);
* ``bench`` / ``tune``   the performance tools (``clconv.bench``);
* ``templates``  the template files on the search path and which copy wins;
* ``cache {list,clear,path}``  the program cache and the tuning database;
* ``demo``       the quick start's demo (``clconv.demo``).

``OP`` is a public op name (``conv2d``, ``conv_transpose3d``, ``conv1d_input``,
``conv_transpose2d_weight``, ...).  For every op, ``--input`` and ``--weight`` are the shapes of
the *forward* op of its family (``conv*d`` or ``conv_transpose*d``); the gradient ops derive
``grad_output`` from them.  Errors are one line on stderr and a nonzero exit code (2 for a usage
error, 1 otherwise) unless ``--debug`` is given, which shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence, TextIO

import numpy as np

USAGE_ERROR = 2
FAILURE = 1

OP_PATTERN = re.compile(r"^(conv|conv_transpose)([123])d(?:_(input|weight))?$")
OP_NAMES = [
    f"{family}{n}d{suffix}"
    for family in ("conv", "conv_transpose")
    for suffix in ("", "_input", "_weight")
    for n in (1, 2, 3)
]

# The canonical pass each op family runs (see the table in clconv/ops.py).
PASS_OF = {
    ("conv", None): "forward",
    ("conv", "input"): "backward_data",
    ("conv", "weight"): "backward_weight",
    ("conv_transpose", None): "backward_data",
    ("conv_transpose", "input"): "forward",
    ("conv_transpose", "weight"): "backward_weight",
}

# Subcommands handed to another module's ``main(argv)`` with the rest of the command line.
DELEGATED = {
    "bench": ("clconv.bench", "main"),
    "tune": ("clconv.bench", "tune_main"),
    "demo": ("clconv.demo", "main"),
}


class CLIError(Exception):
    """A user error the CLI reports as one line; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = FAILURE, prog: str = "clconv"):
        super().__init__(message)
        self.code = code
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``clconv render: error: ...``) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        raise CLIError(f"{message} (see '{self.prog} --help')", USAGE_ERROR, self.prog)


# -- argument parsing helpers --------------------------------------------------------------------


def parse_shape(text: str, name: str) -> tuple[int, ...]:
    """``"2,3,8,8"`` (or ``2x3x8x8``) -> ``(2, 3, 8, 8)``."""
    parts = [p for p in re.split(r"[,x]", text.strip()) if p.strip()]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise CLIError(f"{name} must be comma-separated ints such as 2,3,8,8, got {text!r}", USAGE_ERROR) from None
    if not values:
        raise CLIError(f"{name} must not be empty", USAGE_ERROR)
    return values


def parse_ints(text: str, name: str) -> int | tuple[int, ...]:
    """``"2"`` -> 2, ``"2,1"`` -> (2, 1)."""
    values = parse_shape(text, name)
    return values[0] if len(values) == 1 and "," not in text else values


def parse_padding(text: str) -> Any:
    """``1``, ``1,2``, ``same``, ``valid``, or asymmetric ``begin:end`` pairs: ``1:2,0:1``."""
    text = text.strip()
    if text in ("same", "valid"):
        return text
    if ":" in text:
        pairs = []
        for part in text.split(","):
            begin_end = part.split(":")
            if len(begin_end) != 2:
                raise CLIError(f"--padding pairs must be begin:end, such as 1:2,0:1, got {text!r}", USAGE_ERROR)
            try:
                pairs.append((int(begin_end[0]), int(begin_end[1])))
            except ValueError:
                raise CLIError(f"--padding pairs must be ints, such as 1:2,0:1, got {text!r}", USAGE_ERROR) from None
        return tuple(pairs)
    return parse_ints(text, "--padding")


def _add_geometry_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", metavar="OP", help=f"op name: {', '.join(OP_NAMES)}")
    parser.add_argument("--input", required=True, metavar="N,C,*SPATIAL",
                        help="shape of the forward op's input (batched, or unbatched C,*SPATIAL)")
    parser.add_argument("--weight", required=True, metavar="SHAPE",
                        help="weight shape: (C_out, C_in/groups, *k) for conv, (C_in, C_out/groups, *k) for conv_transpose")
    parser.add_argument("--stride", default="1", help="int or comma-separated ints (default 1)")
    parser.add_argument("--padding", default="0",
                        help="int, ints, 'same', 'valid', or begin:end pairs such as 1:2,0:1 (default 0)")
    parser.add_argument("--dilation", default="1", help="int or comma-separated ints (default 1)")
    parser.add_argument("--groups", type=int, default=1, help="default 1")
    parser.add_argument("--output-padding", default=None, help="transposed ops only (default 0)")
    parser.add_argument("--bias", action="store_true", help="add a bias (conv*d and conv_transpose*d only)")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--device", default=None, metavar="SELECTOR",
                        help="'P:D' or a name substring, as CLCONV_DEVICE (default: the default device)")


# -- one op call built from the command line ----------------------------------------------------


@dataclass
class OpCall:
    """A public op, its arguments built from shapes, and the same call as canonical operands."""

    name: str
    pass_: str
    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    geometry: Any  # clconv.geometry.ConvGeometry
    unbatched: bool
    result_shape: tuple[int, ...]
    # the pass's operands by canonical role (x, w, dy, bias), batched: what the kernels read
    canonical: dict[str, np.ndarray] = field(repr=False)

    @property
    def reduction_length(self) -> int:
        """Terms summed per result element (sets the float tolerance)."""
        g = self.geometry
        if self.pass_ == "forward":
            return int(g.reduction_length)
        if self.pass_ == "backward_data":
            return int(g.cout_per_group * g.kernel_volume)
        return int(g.batch * g.out_pixels)

    def canonical_reference(self) -> np.ndarray:
        """The float64 reference result in the canonical (batched) shape."""
        from clconv import reference

        first, second = {"forward": ("x", "w"), "backward_data": ("dy", "w"), "backward_weight": ("x", "dy")}[self.pass_]
        c = self.canonical
        return reference.run_pass(self.pass_, self.geometry, c[first], c[second], c.get("bias"))

    def reference(self) -> np.ndarray:
        """The float64 reference result in the op's own result shape."""
        result = self.canonical_reference()
        return result[0] if self.unbatched and self.pass_ != "backward_weight" else result


def build_call(args: argparse.Namespace, make: Callable[[tuple[int, ...]], np.ndarray]) -> OpCall:
    """Resolve ``args.op`` with the shapes and options on the command line.

    ``make(shape)`` creates each tensor (zeros for ``render``, random data for ``check``).
    Raises ValueError/TypeError (from the resolver) for a geometry the op refuses.
    """
    import clconv
    from clconv import geometry as geo

    match = OP_PATTERN.match(args.op)
    if match is None:
        raise CLIError(f"unknown op {args.op!r}; ops are: {', '.join(OP_NAMES)}", USAGE_ERROR)
    family, ndim, grad = match.group(1), int(match.group(2)), match.group(3)
    function = getattr(clconv, args.op)
    pass_ = PASS_OF[(family, grad)]
    dtype = np.dtype(args.dtype)
    ishape = parse_shape(args.input, "--input")
    wshape = parse_shape(args.weight, "--weight")
    stride = parse_ints(args.stride, "--stride")
    dilation = parse_ints(args.dilation, "--dilation")
    padding = parse_padding(args.padding)
    groups = args.groups
    if args.bias and grad is not None:
        raise CLIError(f"--bias applies to conv*d and conv_transpose*d, not to {args.op}", USAGE_ERROR)
    if args.output_padding is not None and family != "conv_transpose":
        raise CLIError(f"--output-padding applies to the transposed ops, not to {args.op}", USAGE_ERROR)
    output_padding = parse_ints(args.output_padding, "--output-padding") if args.output_padding else 0

    def tensor(shape: Sequence[int]) -> np.ndarray:
        return make(tuple(shape)).astype(dtype, copy=False)

    if family == "conv":
        kwargs: dict[str, Any] = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        bias_shape = (wshape[0],) if args.bias and wshape else None
        resolved = geo.resolve_conv(ndim, ishape, wshape, bias_shape, stride, padding, dilation, groups)
        # the forward op's output: grad_output of the gradient ops
        out_shape = resolved.geometry.output_shape[1 if resolved.unbatched else 0:]
    else:
        kwargs = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                      dilation=dilation)
        bias_shape = (wshape[1] * groups,) if args.bias and len(wshape) > 1 else None
        resolved = geo.resolve_conv_transpose(ndim, ishape, wshape, bias_shape, stride, padding, output_padding,
                                              groups, dilation)
        # the transposed op's output is the canonical convolution's input
        out_shape = resolved.geometry.input_shape[1 if resolved.unbatched else 0:]
    g, unbatched = resolved.geometry, resolved.unbatched

    def batched(a: np.ndarray) -> np.ndarray:
        return a[None] if unbatched else a

    bias = tensor(bias_shape) if bias_shape else None
    canonical: dict[str, np.ndarray] = {}
    if grad is None:  # the forward op of the family: input, weight, bias -> output
        x, w = tensor(ishape), tensor(wshape)
        call_args: tuple[Any, ...] = (x, w, bias)
        result_shape = out_shape
        canonical = {"x": batched(x), "w": w} if family == "conv" else {"dy": batched(x), "w": w}
        if bias is not None:
            canonical["bias"] = bias
    elif grad == "input":
        w, dy = tensor(wshape), tensor(out_shape)
        if family == "conv":  # conv*d_input(input_size, weight, grad_output)
            call_args, canonical = (ishape, w, dy), {"dy": batched(dy), "w": w}
        else:  # conv_transpose*d_input(grad_output, weight): a forward convolution of grad_output
            call_args, canonical = (dy, w), {"x": batched(dy), "w": w}
        result_shape = ishape
    else:  # *_weight(input, weight_size, grad_output)
        x, dy = tensor(ishape), tensor(out_shape)
        call_args, result_shape = (x, wshape, dy), wshape
        # for the transposed op the roles swap: its grad_output is the canonical input
        canonical = {"x": batched(x), "dy": batched(dy)} if family == "conv" else {"x": batched(dy), "dy": batched(x)}
    return OpCall(args.op, pass_, function, call_args, kwargs, g, unbatched, tuple(result_shape), canonical)


# -- subcommands ---------------------------------------------------------------------------------


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - unreachable


def _dir_usage(path: Path, pattern: str = "*") -> tuple[int, int]:
    """(files, bytes) under ``path`` matching ``pattern`` (0, 0 when it does not exist)."""
    if not path.is_dir():
        return 0, 0
    files = [p for p in path.rglob(pattern) if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def cache_paths() -> dict[str, Path]:
    """The cache's parts: compiled programs, the tuning database, sources of failed builds."""
    from clconv.builder import CACHE_FORMAT_VERSION, cache_dir
    from clconv.tuning import TUNING_FORMAT_VERSION

    root = cache_dir()
    return {
        "programs": root / f"programs-v{CACHE_FORMAT_VERSION}",
        "tuning": root / f"tuning-v{TUNING_FORMAT_VERSION}",
        "failed": root / "failed",
        "templates": root / "mako-v1",  # Mako's compiled template modules, where that cache is on
    }


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    import pyopencl as cl

    import clconv
    from clconv.builder import cache_dir, disk_cache_enabled
    from clconv.device import DeviceSelectionError, default_device_choice, supports_fp64
    from clconv.templates import template_dirs

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
            devices = platform.get_devices()
        except cl.Error as exc:
            print(f"  cannot list devices: {exc}", file=out)
            continue
        for d_index, device in enumerate(devices):
            extensions = device.extensions.split()
            fp64 = "yes" if supports_fp64(device) else "no"
            fp16 = "yes" if "cl_khr_fp16" in extensions else "no"
            print(f"  device {p_index}:{d_index}: {device.name.strip()} "
                  f"[{_device_kinds(device)}]", file=out)
            print(f"    {device.version}, driver {device.driver_version}, {device.opencl_c_version}", file=out)
            print(f"    compute units {device.max_compute_units}, global memory {_human_bytes(device.global_mem_size)}, "
                  f"max allocation {_human_bytes(device.max_mem_alloc_size)}", file=out)
            print(f"    local memory {_human_bytes(device.local_mem_size)}, "
                  f"max work-group size {device.max_work_group_size}, fp64 {fp64}, fp16 {fp16}", file=out)
    try:
        device, why = default_device_choice()
        print(f"default device: {device.name.strip()} ({why})", file=out)
    except DeviceSelectionError as exc:
        print(f"default device: none ({exc})", file=out)
    root = cache_dir()
    state = "on" if disk_cache_enabled() else "off (CLCONV_NO_CACHE)"
    print(f"cache directory: {root} (disk cache {state})", file=out)
    for part, path in cache_paths().items():
        files, size = _dir_usage(path)
        print(f"  {part:9} {path}: {files} files, {_human_bytes(size)}", file=out)
    print("template search path: " + os.pathsep.join(str(d) for d in template_dirs()), file=out)
    variables = ("CLCONV_DEVICE", "PYOPENCL_CTX", "CLCONV_CACHE_DIR", "CLCONV_NO_CACHE", "CLCONV_TUNE",
                 "CLCONV_TEMPLATE_PATH", "CLCONV_WORKSPACE_LIMIT")
    shown = [f"{v}={os.environ[v]!r}" for v in variables if v in os.environ]
    print("environment: " + (", ".join(shown) if shown else "no CLCONV_* variable set"), file=out)
    return 0


def _device_kinds(device: Any) -> str:
    import pyopencl as cl

    kinds = [k for k in ("CPU", "GPU", "ACCELERATOR", "CUSTOM") if device.type & getattr(cl.device_type, k)]
    return ", ".join(kinds) or "unknown type"


def cmd_render(args: argparse.Namespace, out: TextIO) -> int:
    import clconv

    call = build_call(args, lambda shape: np.zeros(shape))
    queue = _queue(args)
    print(clconv.render(call.function, *call.args, **call.kwargs, algorithm=args.algorithm, queue=queue), file=out)
    return 0


def _queue(args: argparse.Namespace) -> Any:
    """The queue for ``--device`` (a selector as ``CLCONV_DEVICE``), else the default queue."""
    import pyopencl as cl

    import clconv
    from clconv.device import select_device

    if not args.device:
        return clconv.default_queue()
    device, _ = select_device(args.device)
    return cl.CommandQueue(cl.Context([device]), properties=cl.command_queue_properties.PROFILING_ENABLE)


def _tolerance(reduction_length: int, dtype: np.dtype) -> float:
    """Relative tolerance for sums of ``reduction_length`` O(1) products (as tests/helpers.py)."""
    return float(8 * np.finfo(dtype).eps * max(1.0, np.sqrt(reduction_length)) * 4)


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    import clconv
    from clconv.algorithms import Problem

    rng = np.random.default_rng(args.seed)
    call = build_call(args, lambda shape: rng.standard_normal(shape))
    names = clconv.algorithms(call.pass_)
    if args.algorithm is not None:
        if args.algorithm not in names:
            raise CLIError(f"--algorithm must be one of {names} for {args.op} (the {call.pass_} pass), "
                           f"got {args.algorithm!r}", USAGE_ERROR)
        names = [args.algorithm]
    queue = _queue(args)
    dtype = np.dtype(args.dtype)
    problem = Problem(call.geometry, call.pass_, dtype.name, bias=bool(args.bias))
    every_config = args.all_configs and call.geometry.batch > 0  # batch 0 launches nothing
    expected = call.canonical_reference() if every_config else call.reference()
    scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
    tolerance = args.tolerance if args.tolerance is not None else _tolerance(call.reduction_length, dtype)
    print(f"{args.op}: {call.pass_} pass of {call.geometry.tag()} ({dtype.name}) on {queue.device.name.strip()!r}; "
          f"result {call.result_shape}, tolerance {tolerance:.1e} relative", file=out)
    header = f"{'algorithm':14} {'result':7} {'max abs err':>12} {'rel err':>10}  config / reason"
    print(header, file=out)
    print("-" * len(header), file=out)
    failures = checked = skipped = 0
    for name in names:
        algorithm = _registry()[name]
        declined = algorithm.decline_reason(problem, queue.device)
        if declined is not None:
            print(f"{name:14} {'skip':7} {'':>12} {'':>10}  {declined}", file=out)
            skipped += 1
            continue
        configs = algorithm.configs(problem, queue.device) if every_config else [None]
        for config in configs:
            checked += 1
            try:
                if config is None:  # the public op, as a user calls it
                    got, config = _run_op(call, problem, name, queue, dtype)
                else:  # one tile configuration, launched directly
                    got = _run_config(call, problem, algorithm, config, queue, dtype)
            except Exception as exc:  # a build or launch failure is this algorithm's result, not the CLI's
                failures += 1
                text = str(exc).strip()
                first = text.splitlines()[0] if text else type(exc).__name__
                print(f"{name:14} {'ERROR':7} {'':>12} {'':>10}  {type(exc).__name__}: {first}", file=out)
                if args.debug:
                    raise
                continue
            finite = bool(np.isfinite(got).all())
            err = float(np.max(np.abs(got.astype(np.float64) - expected))) if expected.size else 0.0
            rel = err / scale
            ok = finite and rel <= tolerance
            failures += not ok
            note = _config_text(config)
            if not finite:
                note = f"{np.count_nonzero(~np.isfinite(got))} elements unwritten or not finite; {note}"
            print(f"{name:14} {'pass' if ok else 'FAIL':7} {err:12.3e} {rel:10.2e}  {note}", file=out)
    what = "configuration(s)" if every_config else "algorithm(s)"
    verdict = "all passed" if not failures else f"{failures} failed"
    print(f"{checked} {what} run, {skipped} algorithm(s) skipped: {verdict}", file=out)
    return FAILURE if failures else 0


def _run_op(call: OpCall, problem: Any, name: str, queue: Any, dtype: np.dtype) -> tuple[np.ndarray, dict]:
    """Run the public op with ``algorithm=name`` into a NaN-poisoned ``out``; also the config it used."""
    import pyopencl.array as cl_array

    from clconv.planner import plan

    result = cl_array.empty(queue, call.result_shape, dtype)
    result.fill(np.nan)  # poisoned: an element the kernels never write fails the check
    config = plan(problem, queue, name).config
    call.function(*call.args, **call.kwargs, algorithm=name, queue=queue, out=result)
    return result.get(queue), config


def _run_config(call: OpCall, problem: Any, algorithm: Any, config: dict, queue: Any, dtype: np.dtype) -> np.ndarray:
    """Launch one (algorithm, tile configuration) on the canonical operands; the canonical result."""
    import pyopencl.array as cl_array

    from clconv.algorithms import Operand
    from clconv.planner import prepared_runner

    g = call.geometry
    result_name, shape = {"forward": ("y", g.output_shape), "backward_data": ("dx", g.input_shape),
                          "backward_weight": ("dw", g.weight_shape)}[call.pass_]
    arrays = {role: cl_array.to_device(queue, np.ascontiguousarray(a, dtype)) for role, a in call.canonical.items()}
    arrays[result_name] = cl_array.empty(queue, shape, dtype)
    arrays[result_name].fill(np.nan)
    runner = prepared_runner(problem, algorithm, config, queue)
    events = runner.run(queue, {role: Operand(a.base_data, a.offset // a.dtype.itemsize) for role, a in arrays.items()})
    events[-1].wait()
    return arrays[result_name].get(queue)


def _registry() -> dict[str, Any]:
    from clconv.algorithms import REGISTRY

    return REGISTRY


def _config_text(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(config.items())) or "(no parameters)"


def cmd_templates(args: argparse.Namespace, out: TextIO) -> int:
    from clconv.templates import list_templates, template_dirs

    print("search path (first match wins): " + os.pathsep.join(str(d) for d in template_dirs()), file=out)
    for name, winner, shadowed in list_templates():
        print(f"{name:16} {winner}", file=out)
        for path in shadowed:
            print(f"{'':16} shadows {path}", file=out)
    return 0


def _tuning_devices() -> dict[str, str]:
    """Tuning database file stem -> name of the present device it belongs to."""
    import pyopencl as cl

    from clconv.tuning import device_key

    names = {}
    try:
        for platform in cl.get_platforms():
            for device in platform.get_devices():
                names[device_key(device)] = f"{device.name.strip()} ({platform.name})"
    except cl.Error:
        pass
    return names


def cmd_cache(args: argparse.Namespace, out: TextIO) -> int:
    from clconv.builder import cache_dir

    paths = cache_paths()
    if args.action == "path":
        print(cache_dir(), file=out)
        return 0
    if args.action == "clear":
        parts = [p for p in paths if getattr(args, p)] or list(paths)
        for part in parts:
            files, size = _dir_usage(paths[part])
            if paths[part].is_dir():
                shutil.rmtree(paths[part])
            print(f"removed {part}: {files} files, {_human_bytes(size)} ({paths[part]})", file=out)
        return 0
    # list
    print(f"cache directory: {cache_dir()}", file=out)
    files, size = _dir_usage(paths["programs"], "*.bin")
    print(f"programs: {files} compiled programs, {_human_bytes(size)} in {paths['programs']}", file=out)
    if args.files and paths["programs"].is_dir():
        for path in sorted(paths["programs"].rglob("*.bin")):
            print(f"  {path.stat().st_size:>10}  {path}", file=out)
    databases = sorted(paths["tuning"].glob("*.json")) if paths["tuning"].is_dir() else []
    print(f"tuning: {len(databases)} device database(s) in {paths['tuning']}", file=out)
    devices = _tuning_devices()
    for path in databases:
        try:
            entries = json.loads(path.read_text()).get("entries", {})
        except (OSError, ValueError, AttributeError):
            print(f"  {path.name}: unreadable", file=out)
            continue
        device = devices.get(path.stem, "a device not present here")
        print(f"  {path.name}: {len(entries)} entries, {device}", file=out)
        if args.entries:
            for key, entry in sorted(entries.items()):
                config = _config_text(entry.get("config", {})) if isinstance(entry, dict) else "?"
                algorithm = entry.get("algorithm", "?") if isinstance(entry, dict) else "?"
                print(f"    {key} -> {algorithm} {config}", file=out)
    files, size = _dir_usage(paths["failed"])
    if files:
        print(f"failed builds: {files} saved sources, {_human_bytes(size)} in {paths['failed']}", file=out)
    files, size = _dir_usage(paths["templates"])
    if files:
        print(f"compiled templates: {files} files, {_human_bytes(size)} in {paths['templates']}", file=out)
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
    parser = _Parser(prog="clconv", description="OpenCL convolution kernels: inspect, render, check, benchmark.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    # --debug is accepted after the subcommand too (SUPPRESS: the subcommand must not reset it to False)
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    sub.add_parser("info", parents=[common], help="platforms, devices, the default device, caches")

    render = sub.add_parser("render", parents=[common], help="print the OpenCL source one call would build")
    _add_geometry_arguments(render)
    render.add_argument("--algorithm", default="auto", help="algorithm name or 'auto' (default)")

    check = sub.add_parser("check", parents=[common], help="run one geometry through every algorithm against the reference")
    _add_geometry_arguments(check)
    check.add_argument("--algorithm", default=None, help="check only this algorithm")
    check.add_argument("--seed", type=int, default=0, help="random data seed (default 0)")
    check.add_argument("--all-configs", action="store_true",
                       help="run every tile configuration of each algorithm, not only the one the planner picks")
    check.add_argument("--tolerance", type=float, default=None,
                       help="max error relative to max(1, max|reference|) (default: grows with the reduction length)")

    sub.add_parser("templates", parents=[common], help="the template files and which copy wins")

    cache = sub.add_parser("cache", parents=[common], help="the program cache and tuning database: list, clear, path")
    cache_sub = cache.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    cache_sub.required = True
    listing = cache_sub.add_parser("list", parents=[common], help="what is cached, and how much")
    listing.add_argument("--files", action="store_true", help="every compiled program file")
    listing.add_argument("--entries", action="store_true", help="every tuning database entry")
    clear = cache_sub.add_parser("clear", parents=[common], help="delete cached programs and tuning results (default: all)")
    clear.add_argument("--programs", action="store_true", help="only the compiled programs")
    clear.add_argument("--tuning", action="store_true", help="only the tuning database")
    clear.add_argument("--failed", action="store_true", help="only the saved sources of failed builds")
    clear.add_argument("--templates", action="store_true", help="only Mako's compiled templates")
    cache_sub.add_parser("path", parents=[common], help="print the cache directory")

    sub.add_parser("bench", help="benchmark shape sets (clconv.bench; 'clconv bench --help')", add_help=False)
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
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else FAILURE)
    except Exception as exc:
        if debug:
            raise
        code, prog = (exc.code, exc.prog) if isinstance(exc, CLIError) else (FAILURE, "clconv")
        print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
