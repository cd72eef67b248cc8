"""Planner: for a problem, pick the algorithm and tile configuration, and prepare its runner.

``algorithm='auto'`` looks up the tuning database; on a miss it measures every serving
(algorithm, config) candidate once (or, with ``CLCONV_TUNE=0``, takes a heuristic order without
measuring), remembers the winner, and falls back past any candidate that fails to build or launch.
"""

from __future__ import annotations

import logging
import statistics
import threading

import numpy as np
import pyopencl as cl

from . import environ, templates, tuning
from .algorithms import REGISTRY, Algorithm, LaunchError, Operand, Problem, Runner, algorithms, workspace_limit
from .builder import BuildError

log = logging.getLogger("clconv.planner")

MAX_CONFIGS_PER_ALGORITHM = 4
MAX_CANDIDATES = 10  # bounds tuning: builds (in parallel) and 1 + TUNE_REPEATS timed runs each
TUNE_REPEATS = 5

_runners: dict[tuple, Runner] = {}
_runners_lock = threading.Lock()


def _config_key(config: dict) -> tuple:
    return tuple(sorted(config.items()))


def prepared_runner(problem: Problem, algorithm: Algorithm, config: dict, queue: cl.CommandQueue) -> Runner:
    # The workspace limit is in the key: im2col's batch chunking (and so its runner) depends on it.
    key = (queue.context.int_ptr, queue.device.int_ptr, problem, algorithm.name, _config_key(config),
           workspace_limit(queue.device), templates.generation())
    with _runners_lock:
        runner = _runners.get(key)
    if runner is None:
        runner = algorithm.prepare(problem, config, queue, queue.device)
        runner.label = f"{algorithm.name} {problem.pass_} of {problem.geometry.tag()} ({problem.dtype})"
        runner.check_resources(queue.device)  # LaunchError now, rather than a failed launch later
        with _runners_lock:
            _runners[key] = runner
    return runner


def get_algorithm(name: str, pass_: str) -> Algorithm:
    if not isinstance(name, str):
        raise TypeError(f"algorithm must be a string, got {name!r}")
    algorithm = REGISTRY.get(name)
    if algorithm is None or pass_ not in algorithm.passes:
        raise ValueError(f"algorithm must be 'auto' or one of {algorithms(pass_)} for this pass, got {name!r}")
    return algorithm


def check_serves(algorithm: Algorithm, problem: Problem, device: cl.Device) -> None:
    reason = algorithm.decline_reason(problem, device)
    if reason is not None:
        raise ValueError(
            f"algorithm {algorithm.name!r} cannot run the {problem.pass_} pass of {problem.geometry.tag()}: {reason}"
        )


def heuristic_order(problem: Problem, device: cl.Device) -> list[str]:
    """Algorithms in the order to try without measuring (best guess first)."""
    g = problem.geometry
    if not device.type & cl.device_type.GPU:
        return _cpu_heuristic_order(problem)
    order = []
    if problem.pass_ == "backward_weight" and not g.is_depthwise:
        # the weight gradient's GEMM is small (C_out x C_in*taps) with a long contraction: without
        # a split it runs a handful of work-groups (measured 15x slower on an H200 for a 1x1 layer)
        order.append("splitk")
    if g.is_pointwise:
        order.append("gemm1x1")
    if g.is_depthwise and problem.pass_ == "backward_weight":
        order.append("depthwise")
    if g.is_depthwise or g.reduction_length < 8:
        order.append("direct")
    if g.is_depthwise:
        order.append("depthwise_rows")  # a row per work-item: made for CPUs, measured here too
    if problem.pass_ == "backward_data" and (max(g.stride) > 1 or g.in_pixels <= 256):
        # the implicit gather reads mostly stride holes, and on small images its per-element index
        # decoding dominates; a GEMM into columns and col2im wins (measured on an H200:
        # docs/performance.md)
        order.append("im2col")
    order += ["implicit_gemm", "im2col", "direct"]
    seen: list[str] = []
    for name in order:
        if name not in seen:
            seen.append(name)
    return seen


def _cpu_heuristic_order(problem: Problem) -> list[str]:
    """CPU devices (PoCL): the GEMM without local memory (templates/gemm_cpu.mako) reads B with
    vector loads only where B is contiguous along N: a column buffer, or the input or output
    gradient of a 1x1 stride-1 layer.  So im2col first, gemm1x1 for those 1x1 layers' forward and
    data gradient, no split-K (the cores are few: a GEMM has work-items enough); measured on PoCL
    in docs/performance.md."""
    g = problem.geometry
    order = []
    if g.is_depthwise:
        # vectors along the rows, no bounds checks inside: 17-33x `direct` and `depthwise` on PoCL
        # (MobileNetV2 3x3 144ch 28x28, docs/performance.md)
        order.append("depthwise_rows")
    if g.is_pointwise and all(s == 1 for s in g.stride) and problem.pass_ != "backward_weight":
        # the 1x1 weight gradient's B (the input, transposed) has no row form: im2col's transposed
        # column buffer ran it 3-4x faster
        order.append("gemm1x1")
    if g.reduction_length < 8:
        order.append("direct")
    order += ["im2col", "gemm1x1", "implicit_gemm", "splitk", "direct"]
    return list(dict.fromkeys(order))


def candidates(problem: Problem, device: cl.Device) -> list[tuple[Algorithm, dict]]:
    out = []
    for name in heuristic_order(problem, device):
        algorithm = REGISTRY[name]
        if problem.pass_ not in algorithm.passes or algorithm.decline_reason(problem, device) is not None:
            continue
        for config in algorithm.configs(problem, device)[:MAX_CONFIGS_PER_ALGORITHM]:
            out.append((algorithm, config))
    return out[:MAX_CANDIDATES]


_planned: dict[tuple, Runner] = {}


def plan(problem: Problem, queue: cl.CommandQueue, algorithm: str = "auto") -> Runner:
    """The runner for ``problem``; raises ValueError if a named algorithm declines it.

    A repeated call is one dictionary lookup (the host overhead of a cached call): the key holds
    everything the choice depends on, including the tuning database's generation, which every
    store and ``tuning.forget_memory()`` bumps."""
    key = (queue.context.int_ptr, queue.device.int_ptr, problem, algorithm, tuning.generation(),
           environ.raw("CLCONV_WORKSPACE_LIMIT"), environ.raw("CLCONV_TUNE"), templates.generation())
    runner = _planned.get(key)
    if runner is None:
        runner = _plan(problem, queue, algorithm)
        with _runners_lock:
            _planned[key] = runner
    return runner


def remembered_choice(problem: Problem, device: cl.Device, algorithm: str = "auto") -> tuple[Algorithm, dict] | None:
    """The (algorithm, config) a call would run without measuring anything: for a named algorithm,
    its configuration in the tuning database (key ``<problem>@<name>``) or else its first one; under
    ``auto``, the database's winner if it still serves the problem with a configuration it offers,
    else None (the choice is still to be made).  Raises ValueError if a named algorithm declines."""
    if algorithm != "auto":
        chosen = get_algorithm(algorithm, problem.pass_)
        check_serves(chosen, problem, device)
        entry = tuning.lookup(device, f"{problem.key()}@{chosen.name}")
        configs = chosen.configs(problem, device)
        return chosen, (entry["config"] if entry and entry["config"] in configs else configs[0])
    entry = tuning.lookup(device, problem.key())
    if entry is None or entry["algorithm"] not in REGISTRY:
        return None
    chosen = REGISTRY[entry["algorithm"]]
    if chosen.decline_reason(problem, device) is not None:
        log.warning("clconv: remembered choice %s now declines %s; choosing again", chosen.name, problem.key())
        return None
    if entry["config"] not in chosen.configs(problem, device):
        # a stale or tampered entry: never build from a configuration the algorithm does not offer
        log.warning("clconv: remembered config %s of %s is not one it offers for %s; choosing again",
                    entry["config"], chosen.name, problem.key())
        return None
    return chosen, entry["config"]


def _plan(problem: Problem, queue: cl.CommandQueue, algorithm: str) -> Runner:
    choice = remembered_choice(problem, queue.device, algorithm)  # never None for a named algorithm
    if choice is not None:
        try:
            return prepared_runner(problem, *choice, queue)
        except (BuildError, LaunchError, cl.Error) as exc:
            if algorithm != "auto":  # a named request never falls back
                raise
            log.warning("clconv: remembered choice %s failed (%s); choosing again", choice[0].name, exc)
    runner, _ = tune(problem, queue, tuning.lookup(queue.device, problem.key()))
    return runner


def tune(problem: Problem, queue: cl.CommandQueue, previous: dict | None = None) -> tuple[Runner, dict]:
    """Choose for ``problem`` now (measuring every candidate unless ``CLCONV_TUNE=0``), store the
    winner in the tuning database and return ``(runner, database entry)``."""
    device = queue.device
    options = candidates(problem, device)
    if not options:
        raise ValueError(f"no algorithm serves the {problem.pass_} pass of {problem.geometry.tag()}")
    failed: list[str] = list(previous.get("failed", [])) if previous else []
    options = [(a, c) for a, c in options if _label(a, c) not in failed] or options
    if tuning.tuning_enabled():
        runner, timings, new_failures = _measure(problem, queue, options)
    else:
        runner, timings, new_failures = _first_that_builds(problem, queue, options)
    failed += new_failures
    if runner is None:
        raise RuntimeError(
            f"every algorithm failed for the {problem.pass_} pass of {problem.geometry.tag()}: tried {failed}"
        )
    entry = {
        "algorithm": runner.algorithm, "config": runner.config, "measured": tuning.tuning_enabled(),
        "times_ms": timings, "failed": failed,
    }
    tuning.store(device, problem.key(), entry)
    return runner, entry


def _label(algorithm: Algorithm, config: dict) -> str:
    return algorithm.name + "".join(f" {k}={v}" for k, v in sorted(config.items()))


def _first_that_builds(problem, queue, options):
    failures = []
    for algorithm, config in options:
        try:
            return prepared_runner(problem, algorithm, config, queue), {}, failures
        except (BuildError, LaunchError, cl.Error) as exc:
            log.warning("clconv: %s failed to build: %s", _label(algorithm, config), exc)
            failures.append(_label(algorithm, config))
    return None, {}, failures


def random_operands(problem: Problem, queue: cl.CommandQueue) -> dict[str, Operand]:
    """Fresh random device tensors for every operand and result of ``problem`` (for timing)."""
    g = problem.geometry
    sizes = {"x": g.input_elements, "w": g.weight_elements, "y": g.output_elements, "dy": g.output_elements,
             "dx": g.input_elements, "dw": g.weight_elements, "bias": g.out_channels if problem.pass_ == "forward" else g.in_channels}
    rng = np.random.default_rng(0)
    names: tuple[str, ...] = {"forward": ("x", "w", "y"), "backward_data": ("dy", "w", "dx"),
                              "backward_weight": ("x", "dy", "dw")}[problem.pass_]
    if problem.bias:
        names = (*names, "bias")
    out = {}
    for name in names:
        host = rng.standard_normal(max(sizes[name], 1)).astype(problem.dtype)
        buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
        out[name] = Operand(buffer, 0)
    return out


_profiling_queues: dict[tuple[int, int], cl.CommandQueue] = {}


def profiling_queue(queue: cl.CommandQueue) -> cl.CommandQueue:
    if queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
        return queue
    key = (queue.context.int_ptr, queue.device.int_ptr)
    if key not in _profiling_queues:
        _profiling_queues[key] = cl.CommandQueue(queue.context, queue.device,
                                                 properties=cl.command_queue_properties.PROFILING_ENABLE)
    return _profiling_queues[key]


def time_runner(runner: Runner, queue: cl.CommandQueue, operands: dict[str, Operand], repeats: int,
                statistic=statistics.median) -> float:
    """Median (or ``statistic``) seconds of one run: profiling events from the first launch's start
    to the last's end."""
    cl.wait_for_events(runner.run(queue, operands))  # warm-up: first-launch costs stay out
    times = []
    for _ in range(repeats):
        events = runner.run(queue, operands)
        cl.wait_for_events(events)
        times.append((events[-1].profile.end - events[0].profile.start) * 1e-9)
    return statistic(times)


def _prebuild(problem, queue, options) -> None:
    """Render and build every candidate at once on a few threads (OpenCL compilers release the
    GIL; on a GPU this is most of the tuning time).  Failures surface again, per candidate, when
    ``_measure`` prepares them."""
    if len(options) < 2:
        return
    from concurrent.futures import ThreadPoolExecutor

    def build(option):
        try:
            prepared_runner(problem, option[0], option[1], queue)
        except Exception:  # noqa: BLE001 - reported by _measure
            pass

    with ThreadPoolExecutor(max_workers=min(len(options), 8)) as pool:
        list(pool.map(build, options))


def _measure(problem, queue, options):
    _prebuild(problem, queue, options)
    pqueue = profiling_queue(queue)
    operands = random_operands(problem, pqueue)
    best, best_time, timings, failures = None, float("inf"), {}, []
    for algorithm, config in options:
        label = _label(algorithm, config)
        try:
            runner = prepared_runner(problem, algorithm, config, queue)
            seconds = time_runner(runner, pqueue, operands, TUNE_REPEATS)
        except (BuildError, LaunchError, cl.Error) as exc:
            log.warning("clconv: %s failed: %s", label, exc)
            failures.append(label)
            continue
        timings[label] = round(seconds * 1e3, 4)
        if seconds < best_time:
            best, best_time = runner, seconds
    return best, timings, failures
