"""The GPU heuristic against tuning, cross-validated: what a user sees after ``clconv tune``.

``heuristic_check.py`` judges the heuristic's first candidate by the same run's times that picked the
winner.  The winner is the least of a dozen noisy timings, so that ratio is biased against every
other candidate (the winner's curse): a candidate the run timed 3% slow by chance loses to one timed
3% fast, and the ratio keeps both errors.  A user who tunes runs the winner afterwards, timed afresh.
So this script times the two again, in a run of their own, alternating: the winner picked in one
run, both judged in another.

    python docs/perf/heuristic_retime.py jobs JOBS.json
        (here, no device) every stored layer-pass of heuristic_check's sets whose first candidate
        (on the H200 as described by hand) is not its tuning run's winner: the two configurations
    python docs/perf/heuristic_retime.py stored JOBS.json OUT.json [--seconds S] [--part K/N]
        (GPU machine) each job's two configurations timed in ROUNDS alternations (``--part``: the
        K-th of every N jobs, for runs that each fit the device's per-command limit)
    python docs/perf/heuristic_retime.py fresh LIST OUT.json [--seconds S]
        (GPU machine) each layer-pass of shape list LIST tuned as ``clconv tune`` does (every
        candidate timed once: run A), then its first candidate (on this device) and run A's
        winner timed again in ROUNDS alternations (run B)
    python docs/perf/heuristic_retime.py judge STORED.json[,STORED2.json...] [FRESH.json ...]
        (here) the figures: in-run (heuristic_check's way) and re-timed ("-": no stored run), the
        stored sets' for the heuristic as the re-timing run had it (its first candidates as timed)

Each timing is ``runtime.time_runner``'s median of TUNE_REPEATS (as tuning times a candidate); a
configuration's re-timed figure is the median of its ROUNDS timings.  ``--seconds``: stop starting
jobs after that long (the device's per-command limit), keeping what was timed.  ``--processes P``:
build every program first in P processes side by side (into the disk cache the run then reads).
"""
import json
import math
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import heuristic_check  # docs/perf/, beside this script

import clconv
from clconv import planner, runtime
from clconv.plan import Problem
from clconv.planner import REGISTRY, candidates, label
from clconv.tools import shapes

ROUNDS = 3  # alternations of the two configurations
BATCH = 16  # jobs whose programs build side by side before they are timed


def set_layers(name: str) -> dict:
    """Layer label -> geometry of heuristic_check's set ``name``."""
    specs, batch, _ = heuristic_check.SETS[name]
    return heuristic_check.layer_geometries(specs, batch)


def stored_rows():
    """Each stored layer-pass of heuristic_check's sets: (set, layer, pass, problem, its tuning
    run's times, the first candidate's label on the described H200)."""
    device = heuristic_check.h200()
    heuristic_check.with_workspace_limit()
    retuned = heuristic_check.retuned_times()
    for name, (specs, batch, path) in heuristic_check.SETS.items():
        run = heuristic_check.load_run(path)
        for layer, problem, times, _ in heuristic_check.stored_times(
                specs, batch, run, retuned=heuristic_check._of_set(retuned, name)):
            algorithm, config = candidates(problem, device)[0]
            yield name, layer, problem.pass_, problem, times, label(algorithm, config)


def make_jobs(out: str) -> None:
    jobs = [{"set": name, "layer": layer, "pass": pass_, "first": first, "winner": min(times, key=times.get)}
            for name, layer, pass_, _, times, first in stored_rows() if first != min(times, key=times.get)]
    json.dump(jobs, open(out, "w"), indent=1)
    print(f"{len(jobs)} layer-passes whose first candidate is not the tuning run's winner")


def _prepare(queue, problem: Problem, text: str):
    name, config = heuristic_check.parse_label(text)
    return planner.prepare(problem, REGISTRY[name], config, queue)


def _build_all(queue, pairs) -> None:
    """Build (problem, label) pairs side by side (compilers release the GIL); failures surface when
    they are timed."""
    def build(pair):
        try:
            _prepare(queue, *pair)
        except Exception:  # noqa: BLE001 - reported where it is timed
            pass
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(build, pairs))


def alternate(queue, prof, problem: Problem, labels: list[str]) -> dict[str, float]:
    """Each of ``labels`` timed ROUNDS times, alternating: label -> the median of its timings (ms),
    each timing time_runner's median of TUNE_REPEATS, as tuning times a candidate."""
    runners = {text: _prepare(queue, problem, text) for text in labels}
    operands = runtime.random_operands(problem, prof)
    times: dict[str, list[float]] = {text: [] for text in labels}
    for _ in range(ROUNDS):
        for text, runner in runners.items():
            times[text].append(1e3 * runtime.time_runner(runner, prof, operands, planner.TUNE_REPEATS))
    return {text: round(statistics.median(values), 5) for text, values in times.items()}


def _device():
    queue = clconv.default_queue()
    return queue, runtime.profiling_queue(queue)


def prebuild(mode: str, source: str, processes: int) -> None:
    """Build every program a run will time in ``processes`` processes of this script side by side
    (``build-stored`` / ``build-fresh`` SOURCE K P: the K-th of every P jobs or layer-passes), into
    the disk cache the run then loads them from.  NVIDIA's compiler barely runs side by side on
    threads of one process (planner.BUILD_THREADS), but does in processes."""
    import subprocess
    if processes < 2:
        return
    start = time.perf_counter()
    workers = [subprocess.Popen([sys.executable, __file__, f"build-{mode}", source, str(k), str(processes)])
               for k in range(processes)]
    for worker in workers:
        worker.wait()
    print(f"{time.perf_counter() - start:6.0f}s built in {processes} processes", flush=True)


def build_share(mode: str, source: str, k: int, processes: int) -> None:
    queue, _ = _device()
    if mode == "stored":
        jobs = json.load(open(source))[k::processes]
        layers = {name: set_layers(name) for name in {job["set"] for job in jobs}}
        pairs = [(Problem(layers[job["set"]][job["layer"]], job["pass"], "float32"), job[key])
                 for job in jobs for key in ("first", "winner")]
    else:
        problems = [Problem(layer.geometry, pass_, "float32") for layer in shapes.resolve_layers(source, None)
                    for pass_ in ("forward", "backward_data", "backward_weight")][k::processes]
        pairs = [(problem, label(*option)) for problem in problems for option in candidates(problem, queue.device)]
    for pair in pairs:
        try:
            _prepare(queue, *pair)
        except Exception:  # noqa: BLE001 - reported where it is timed
            pass


def run_stored(jobs_path: str, out: str, seconds: float, processes: int, part: str) -> None:
    queue, prof = _device()
    k, n = (int(x) for x in part.split("/"))
    jobs = json.load(open(jobs_path))[k - 1::n]
    if n > 1:
        jobs_path = out + ".jobs"
        json.dump(jobs, open(jobs_path, "w"))
    layers = {name: set_layers(name) for name in {job["set"] for job in jobs}}
    prebuild("stored", jobs_path, processes)
    rows, start = [], time.perf_counter()
    for at in range(0, len(jobs), BATCH):
        if time.perf_counter() - start > seconds:
            break
        batch = jobs[at:at + BATCH]
        problems = [Problem(layers[job["set"]][job["layer"]], job["pass"], "float32") for job in batch]
        _build_all(queue, [(p, job[k]) for p, job in zip(problems, batch) for k in ("first", "winner")])
        for problem, job in zip(problems, batch):
            try:
                times = alternate(queue, prof, problem, [job["first"], job["winner"]])
            except Exception as exc:  # noqa: BLE001 - one refused configuration must not end the run
                print(f"   {job['layer']} {job['pass']}: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
                continue
            rows.append({**job, "device": queue.device.name, "times_ms": times})
            print(f"{time.perf_counter() - start:6.0f}s {job['set'][:10]:10s} {job['layer'][:30]:30s} "
                  f"{job['pass'][:8]:8s} first/winner {times[job['first']] / times[job['winner']]:.3f}", flush=True)
        json.dump(rows, open(out, "w"), indent=1)  # kept as it goes: a run cut short keeps its rows


def run_fresh(spec: str, out: str, seconds: float, processes: int) -> None:
    queue, prof = _device()
    prebuild("fresh", spec, processes)
    rows, start = [], time.perf_counter()
    for layer in shapes.resolve_layers(spec, None):
        for pass_ in ("forward", "backward_data", "backward_weight"):
            if time.perf_counter() - start > seconds:
                break
            problem = Problem(layer.geometry, pass_, "float32")
            options = candidates(problem, queue.device)
            first = label(*options[0])
            _, tuned, failed = planner._measure(problem, queue, options)  # what `clconv tune` runs
            winner = min(tuned, key=tuned.get)
            again = alternate(queue, prof, problem, [first, winner]) if winner != first else {}
            rows.append({"layer": layer.label, "pass": pass_, "device": queue.device.name, "first": first,
                         "winner": winner, "tuned_ms": tuned, "failed": failed, "times_ms": again})
            ratio = again[first] / again[winner] if again else 1.0
            print(f"{time.perf_counter() - start:6.0f}s {layer.label[:34]:34s} {pass_[:8]:8s} {len(tuned):2d} timed; "
                  f"first/winner in-run {tuned.get(first, math.nan) / tuned[winner]:.3f}, re-timed {ratio:.3f}", flush=True)
            json.dump(rows, open(out, "w"), indent=1)


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def judge(stored_path: str, fresh_paths: list[str]) -> None:
    retimed = {(r["set"], r["layer"], r["pass"]): r for path in stored_path.split(",") if path
               for r in json.load(open(path))}
    # the heuristic as the re-timing run had it: its jobs were every stored layer-pass whose first
    # candidate was not the winner then, so a layer-pass without one had the winner first (the
    # planner may have changed since: the current first candidate is not consulted)
    sets = {key[0] for key in retimed}
    in_run, cross, by_set = [], [], {}
    for name, layer, pass_, _, times, _ in stored_rows():
        if name not in sets:
            continue
        winner = min(times, key=times.get)
        again = retimed.get((name, layer, pass_))
        first = again["first"] if again is not None else winner
        ratio = again["times_ms"][first] / again["times_ms"][winner] if again is not None else 1.0
        cross.append(ratio)
        by_set.setdefault(name, ([], []))[1].append(ratio)
        if first in times:  # (else the tuning run did not time it: heuristic_check reads its algorithm's fastest)
            in_run.append(times[first] / times[winner])
            by_set[name][0].append(in_run[-1])
    for name, (a, b) in by_set.items():
        print(f"{name:16s} {len(b):4d}: re-timed {geomean(b):.3f}x the tuning run's winner (worst {max(b):.2f}x); "
              f"in-run {geomean(a):.3f}x over the {len(a)} the tuning run timed")
    if cross:
        print(f"{'stored sets':16s} {len(cross):4d}: re-timed {geomean(cross):.3f}x the tuning run's winner "
              f"({sum(r > 1.10 for r in cross)} over 1.10x; {sum(r < 1 for r in cross)} faster than the winner); "
              f"in-run {geomean(in_run):.3f}x over the {len(in_run)} the tuning run timed")
    for path in fresh_paths:
        rows = json.load(open(path))
        a = [r["tuned_ms"][r["first"]] / r["tuned_ms"][r["winner"]] for r in rows if r["first"] in r["tuned_ms"]]
        b = [r["times_ms"][r["first"]] / r["times_ms"][r["winner"]] if r["times_ms"] else 1.0
             for r in rows if r["first"] in r["tuned_ms"]]
        print(f"{path}: {len(a)} layer-passes on {rows[0]['device']}: in-run {geomean(a):.3f}x the tuning run's winner, "
              f"re-timed {geomean(b):.3f}x (worst {max(b):.2f}x; {sum(r > 1.10 for r in b)} over 1.10x)")


def main() -> None:
    args = sys.argv[1:]
    options: dict = {"--seconds": "inf", "--processes": "1", "--part": "1/1"}
    for option in options:
        if option in args:
            at = args.index(option)
            options[option] = args[at + 1]
            del args[at:at + 2]
    seconds, processes, part = float(options["--seconds"]), int(options["--processes"]), options["--part"]
    mode, rest = args[0], args[1:]
    if mode == "jobs":
        make_jobs(rest[0])
    elif mode == "stored":
        run_stored(rest[0], rest[1], seconds, processes, part)
    elif mode == "fresh":
        run_fresh(rest[0], rest[1], seconds, processes)
    elif mode in ("build-stored", "build-fresh"):
        build_share(mode.split("-")[1], rest[0], int(rest[1]), int(rest[2]))
    elif mode == "judge":
        judge(rest[0] if rest and rest[0] != "-" else "", rest[1:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
