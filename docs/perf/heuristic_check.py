"""The GPU heuristic's choices judged offline against stored H200 tuning runs (issue 12's "the
default path within 5% of tuned on layers it has never seen"): for every layer-pass of
``clconv tune --json`` files, the (algorithm, config) that ``planner.candidates`` puts first on an
H200 (described by hand: no device needed), its kernel time read from the tuning run, against the
run's best candidate.  Tuning times every algorithm's first configs, so an algorithm the heuristic
puts first is always found; a config the run did not time (a rule that reorders an algorithm's
tiles) is read as that algorithm's fastest timed config and marked ``~``.

    python docs/perf/heuristic_check.py [--rows]              the seven stored sets
    python docs/perf/heuristic_check.py SPEC=FILE.json ...      others (SPEC as `clconv tune` took it)

The sets: the GPU set, VGG-11 at batch 8, the small layers, and four lists of other networks'
layers.  The rules of 2026-12-02 were written looking at the first five (``h200-unseen-layers.txt``
and ``h200-holdout-layers.txt`` among them); ``h200-validation-layers.txt`` was written and tuned
after them, and judged them: 1.082x the best there (worst 1.54x), against 1.067x on the five.
``h200-winograd-kernels-layers.txt`` (5x5 and dilated layers) was written before Winograd served
them, and tuned with the earlier lists' such rows re-tuned: 1.050x over all 234 layer-passes
(worst 1.53x), against 1.198x with the planner before.  A stored row whose layer-pass a later run
re-tuned (``RETUNED``) is judged on that run's times.
"""
import argparse
import json
import math
from pathlib import Path

from clconv import settings
from clconv.plan import Problem
from clconv.planner import candidates, label
from clconv.tools import devices, shapes

HERE = Path(__file__).parent
SMALL = "mb1ic256ih14oc256oh14kh3ph1 mb8ic512ih28oc256oh14kh1sh2ph0 mb1ic512ih7oc512oh7kh3ph1 mb16ic64ih128oc64oh128kh3ph1"
SETS = {  # name: (shape specs, batch override, tuning run)
    "gpu": (["gpu"], None, "h200-candidates-gpu.json"),
    "vgg11 batch 8": (["shapes_vgg_11"], 8, "h200-candidates-vgg11.json"),
    "small": (SMALL.split(), None, "h200-candidates-small.json"),
    "unseen": ([str(HERE / "h200-unseen-layers.txt")], None, "h200-candidates-unseen.json"),
    "holdout": ([str(HERE / "h200-holdout-layers.txt")], None, "h200-candidates-holdout.json"),
    "validation": ([str(HERE / "h200-validation-layers.txt")], None, "h200-candidates-validation.json"),
    "winograd kernels": ([str(HERE / "h200-winograd-kernels-layers.txt")], None, "h200-candidates-kernels.json"),
}

# Later tuning runs (shape spec, tuning run) whose rows replace the stored sets' rows of the same
# geometry and pass: they time candidates that did not exist when a set was tuned.  The grouped
# layers' run (2026-12-02, eighth session: direct's weight-gradient blocks) re-tunes ResNeXt's 32
# groups of 8 at batch 32 (the first list) and the 64-group 3x3 layer (the third list).
RETUNED = [(str(HERE / "h200-grouped-layers.txt"), "h200-grouped-tune.json")]


def retuned_times() -> dict:
    """(geometry tag, pass) -> the candidates' times of the RETUNED runs."""
    out = {}
    for spec, path in RETUNED:
        geometry = {layer.label: layer.geometry for layer in shapes.resolve_layers(spec)}
        for row in json.loads((HERE / path).read_text())["tuned"]:
            out[geometry[row["layer"]].tag(), row["pass"]] = row["times_ms"]
    return out


def h200():
    """The H200 of the runs, described by hand (clconv.tools.devices) and registered with
    clconv.limits (no probe)."""
    return devices.H200.stand_in()


def judge(specs: list[str], batch, run: dict, device) -> list[dict]:
    """For each layer-pass of ``run``: the heuristic's first candidate, its time and the best's."""
    geometry = {}
    for spec in specs:
        for layer in shapes.resolve_layers(spec, batch):
            geometry[layer.label] = layer.geometry
    rows = []
    retuned = retuned_times()
    for row in run["tuned"]:
        problem = Problem(geometry[row["layer"]], row["pass"], "float32")
        times = retuned.get((problem.geometry.tag(), row["pass"]), row["times_ms"])
        best = min(times, key=times.get)
        algorithm, config = candidates(problem, device)[0]
        # the stored runs time the GEMM tiles with scalar global loads (before config key GV): a
        # tile is judged by that time, as if the vector loads sped every tile up alike
        key = label(algorithm, {k: v for k, v in config.items() if k != "GV"})
        timed = key in times
        if not timed:  # a config the run did not time: its algorithm's fastest that it did
            same = [k for k in times if k.split(" ")[0] == algorithm.name]
            if not same:
                continue
            key = min(same, key=times.get)
        rows.append({"layer": row["layer"], "pass": row["pass"], "chosen": key, "timed": timed, "ms": times[key],
                     "best": best, "best_ms": times[best], "ratio": times[key] / times[best]})
    return rows


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


def with_workspace_limit():
    """The default workspace limit on the H200 (2 GiB: a quarter of its memory is more)."""
    settings.workspace_limit = lambda _device: 2**31


def report(name: str, rows: list[dict], show_rows: bool) -> None:
    for r in rows if show_rows else ():
        print(f"  {r['layer'][:36]:36s} {r['pass']:16s} {r['chosen'].split(' ')[0]:14s}{' ' if r['timed'] else '~'} "
              f"{r['ms']:7.3f} ms {r['ratio']:5.2f}x the best ({r['best'].split(' ')[0]}, {r['best_ms']:.3f} ms)")
    ratios = [r["ratio"] for r in rows]
    print(f"{name:14s} {len(ratios):3d} layer-passes: the heuristic's first candidate {geomean(ratios):.3f}x the best "
          f"(worst {max(ratios):.2f}x; {sum(x > 1.10 for x in ratios)} over 1.10x; "
          f"{sum(not r['timed'] for r in rows)} configs untimed, read as their algorithm's fastest)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="SPEC=FILE.json: a shape spec and its `clconv tune --json` run")
    parser.add_argument("--rows", action="store_true", help="every layer-pass, not only each set's summary")
    args = parser.parse_args()
    device = h200()
    with_workspace_limit()
    sets = {spec: ([spec], None, path) for spec, path in (r.split("=", 1) for r in args.runs)} if args.runs else SETS
    everything = []
    for name, (specs, batch, path) in sets.items():
        run = json.loads((HERE / path if not Path(path).exists() else Path(path)).read_text())
        rows = judge(specs, batch, run, device)
        report(name, rows, args.rows)
        everything += [r["ratio"] for r in rows]
    print(f"{'all':14s} {len(everything):3d} layer-passes: {geomean(everything):.3f}x the best (worst {max(everything):.2f}x)")


if __name__ == "__main__":
    main()
