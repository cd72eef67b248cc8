"""A new geometry's first calls with interim kernels (CLCONV_INTERIM=1) and without (0), on the
default device: what issue 12's "first call under 0.5 s" and a network's first step cost.

One cache directory for every process.  A first process calls a small layer's three passes, so
that the templates, the interim programs and clconv's modules are compiled and on disk (as after
any earlier use of clconv); it leaves none of the measured geometries built.  Then, in fresh
processes, the two settings alternating and each on geometries of its own (the batch offset by
one per process, so nothing of theirs is cached):

* ``first``: for each layer of LAYERS, each pass's first call through the public op (one
  ``finish()``), whether an interim plan ran it, the time until a call ran the chosen kernels
  (``clconv.finish_builds()`` then a second call), and kernel-event times of the interim and the
  chosen runner;
* ``step``: every pass of every layer of STEP_LAYERS called once with one ``finish()`` at the end
  (a training step's first iteration), then ``finish_builds()``, then the same step again;
* ``steps`` (with ``--steps N``): that step repeated N times from a new process, one ``finish()``
  a step and no ``finish_builds()``, as a training loop runs while the chosen kernels build in the
  background: each step's wall time, the builds still pending after it and, for the first step,
  each call's (``--threads``: once per CLCONV_BUILD_THREADS value).

    python docs/perf/interim_first_calls.py [--layers gpu] [--step-layers gpu] [--steps N] [--threads 2,8]
                                            [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

FIRST_LAYERS = ("mb32ic64ih56oc64oh56kh3ph1,mb32ic256ih56oc64oh56kh1,mb32ic512ih7oc512oh7kh3ph1,"
                "mb8ic64id8ih28oc64od8oh28kd3kh3pd1ph1,mb16ic128iw1000oc128ow1000kw9pw4")

_CHILD = r"""
import json, sys, time
import numpy as np, pyopencl.array as cla
import clconv
from clconv import interim, planner, runtime
from clconv.plan import Problem
from clconv.tools.shapes import resolve_layers
from clconv.tools.timing import default_call

spec, mode, batch_offset = sys.argv[1], sys.argv[2], int(sys.argv[3])
queue = clconv.default_queue()
rng = np.random.default_rng(0)
PASSES = ("forward", "backward_data", "backward_weight")


def calls_of(layer):
    g = layer.geometry
    g = type(g).make(g.ndim, g.batch + batch_offset, g.groups, g.in_channels, g.out_channels, g.user_in_size,
                     g.user_kernel, g.stride[-g.ndim:], g.pad_begin[-g.ndim:], g.pad_end[-g.ndim:],
                     g.dilation[-g.ndim:])
    arrays = {role: cla.to_device(queue, rng.standard_normal(n).astype(np.float32)) for role, n in
              (("x", g.input_elements), ("w", g.weight_elements), ("dy", g.output_elements))}
    return g, {p: default_call(g, p, arrays) for p in PASSES}


def ran_interim(g, pass_):
    return planner._background.get(planner._job_key(Problem(g, pass_, "float32"), queue)) is not None


def kernel_ms(runner, problem):
    return 1e3 * runtime.time_runner(runner, queue, runtime.random_operands(problem, queue), 10)


layers = [layer for part in spec.split(",") for layer in resolve_layers(part)]
out = {"mode": mode, "device": queue.device.name}
if mode.startswith("first"):
    rows = []
    for layer in layers:
        g, calls = calls_of(layer)
        queue.finish()
        for pass_, call in calls.items():
            t0 = time.perf_counter()
            call()
            queue.finish()
            first = time.perf_counter() - t0
            interim_ran = ran_interim(g, pass_)
            clconv.finish_builds()
            call()
            queue.finish()
            chosen = time.perf_counter() - t0
            problem = Problem(g, pass_, "float32")
            runner = planner.plan(problem, queue)
            row = {"layer": g.tag(), "pass": pass_, "first_call_ms": 1e3 * first, "interim_ran": interim_ran,
                   "chosen_ran_ms": 1e3 * chosen, "algorithm": runner.algorithm,
                   "chosen_kernel_ms": kernel_ms(runner, problem)}
            if interim_ran:
                row["interim_kernel_ms"] = kernel_ms(planner.build(interim.plan(problem, queue.device), queue), problem)
            rows.append(row)
    out["rows"] = rows
elif mode.startswith("steps"):
    step = [call for layer in layers for call in calls_of(layer)[1].values()]
    queue.finish()
    times, pending, first_calls = [], [], []
    for index in range(int(mode[len("steps"):])):
        t0 = time.perf_counter()
        for call in step:
            call()
            if index == 0:  # each call of the first step, waited for: which ones waited for a build
                queue.finish()
                first_calls.append(time.perf_counter() - t0 - sum(first_calls))
        queue.finish()
        times.append(time.perf_counter() - t0)
        pending.append(len(planner._background._held()))  # builds not yet taken by a call
    t0 = time.perf_counter()
    clconv.finish_builds()
    out.update(calls=len(step), step_s=times, pending_builds=pending, first_step_call_s=first_calls,
               build_threads=planner.build_threads(), builds_left_s=time.perf_counter() - t0)
else:
    step = [call for layer in layers for call in calls_of(layer)[1].values()]
    queue.finish()
    times = []
    for round_ in range(2):
        t0 = time.perf_counter()
        for call in step:
            call()
        queue.finish()
        times.append(time.perf_counter() - t0)
        if round_ == 0:
            t1 = time.perf_counter()
            clconv.finish_builds()
            out["background_wait_s"] = time.perf_counter() - t1
    out.update(calls=len(step), first_step_s=times[0], second_step_s=times[1])
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default=FIRST_LAYERS)
    parser.add_argument("--step-layers", default="gpu")
    parser.add_argument("--warm-layer", default="mb2ic8ih12oc8oh12kh3ph1")
    parser.add_argument("--steps", type=int, default=0, help="also time N steps of a training loop from a new process")
    parser.add_argument("--only-steps", action="store_true", help="only the --steps loops")
    parser.add_argument("--threads", default="", help="CLCONV_BUILD_THREADS values, comma-separated: the "
                        "--steps loop with interim kernels once per value (unset: once, the default)")
    parser.add_argument("--json")
    args = parser.parse_args()
    results: dict = {"first": {}, "step": {}, "steps": {}}
    with tempfile.TemporaryDirectory(prefix="clconv-interim-") as cache:
        env = dict(os.environ, CLCONV_CACHE_DIR=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)

        def child(spec: str, mode: str, offset: int, interim: str, threads: str = "") -> dict:
            extra = {"CLCONV_BUILD_THREADS": threads} if threads else {}
            done = subprocess.run([sys.executable, "-c", _CHILD, spec, mode, str(offset)],
                                  env={**env, "CLCONV_INTERIM": interim, **extra}, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"the {mode} process failed:\n{done.stderr[-3000:]}")
            return json.loads(done.stdout.strip().splitlines()[-1])

        results["warm"] = child(args.warm_layer, "first", 0, "1")  # templates, interim programs
        offset = 1
        for interim in ("1", "0") if not args.only_steps else ():
            results["first"][interim] = child(args.layers, "first", offset, interim)
            offset += 1
        for interim in ("1", "0") if not args.only_steps else ():
            results["step"][interim] = child(args.step_layers, "step", offset, interim)
            offset += 1
        runs = [("1", t) for t in args.threads.split(",") if t] or [("1", "")]
        for interim, threads in [*runs, ("0", "")] if args.steps else ():
            name = interim + (f" threads={threads}" if threads else "")
            results["steps"][name] = child(args.step_layers, f"steps{args.steps}", offset, interim, threads)
            offset += 1
    for interim, result in results["first"].items():
        print(f"CLCONV_INTERIM={interim} ({result['device']})")
        for r in result["rows"]:
            extra = (f"interim kernel {r['interim_kernel_ms']:8.3f} ms" if r["interim_ran"] else "chosen ran it")
            print(f"  {r['layer']:44s} {r['pass']:15s} first call {r['first_call_ms']:7.1f} ms, chosen ran after "
                  f"{r['chosen_ran_ms']:7.1f} ms; {r['algorithm']:14s} kernel {r['chosen_kernel_ms']:8.3f} ms, {extra}")
    for interim, result in results["step"].items():
        print(f"CLCONV_INTERIM={interim}: a first step of {result['calls']} calls {result['first_step_s']:.2f} s, "
              f"then {result['background_wait_s']:.2f} s waiting for background builds; the second step "
              f"{1e3 * result['second_step_s']:.1f} ms")
    for interim, result in results["steps"].items():
        times = result["step_s"]
        elapsed = [sum(times[:n]) for n in range(1, len(times) + 1)]
        marks = ", ".join(f"{n} in {elapsed[n - 1]:.2f} s" for n in (1, 2, 5, 10, 20, 50, 100) if n <= len(times))
        waited = sum(t > 0.1 for t in result.get("first_step_call_s", []))
        print(f"CLCONV_INTERIM={interim} ({result.get('build_threads')} build threads): steps of {result['calls']} "
              f"calls: {marks}; the last step {1e3 * times[-1]:.1f} ms; {waited} calls of the first step over "
              f"0.1 s; builds pending after each step {result.get('pending_builds')}; "
              f"{result.get('builds_left_s', 0):.2f} s of builds left after the last")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
