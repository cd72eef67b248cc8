"""Two clconv trees' first candidates for one pass, timed against each other in one process.

A heuristic change moves some layers' first candidate; this times, on the layers where it moved,
the old tree's first candidate against the new tree's, interleaved (the minimum over ROUNDS rounds
of 5 runs each: a shared machine's drift hits both alike), each built by the running tree.

    # each tree lists its first candidates (run from outside the repo root: ``python -m`` and
    # ``-c`` put the current folder first on sys.path, ahead of PYTHONPATH)
    cd /tmp && PYTHONPATH=OLD_TREE python REPO/docs/perf/pocl_first_candidates_ab.py firsts old.json PASS LIST...
    cd /tmp && PYTHONPATH=REPO python REPO/docs/perf/pocl_first_candidates_ab.py firsts new.json PASS LIST...
    cd /tmp && PYTHONPATH=REPO POCL_MAX_PTHREAD_COUNT=2 ROUNDS=6 python REPO/docs/perf/pocl_first_candidates_ab.py ab old.json new.json

(LIST: a named set, a shape file or descriptors, as ``clconv bench`` takes them.)
"""
import json
import math
import sys

import clconv
from clconv import planner
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands
from clconv.tools import shapes
from pocl_winograd_vs_im2col import fastest  # docs/perf/, beside this script


def firsts(out: str, pass_: str, specs: list[str]) -> None:
    device = clconv.default_queue().device
    chosen = {}
    for spec in specs:
        for layer in shapes.resolve_layers(spec, None):
            algorithm, config = planner.candidates(Problem(layer.geometry, pass_, "float32"), device)[0]
            chosen[layer.descriptor or layer.geometry.tag()] = {"pass": pass_, "algorithm": algorithm.name, "config": config}
    json.dump(chosen, open(out, "w"), indent=1)


def ab(old_file: str, new_file: str) -> None:
    old, new = json.load(open(old_file)), json.load(open(new_file))
    queue = profiling_queue(clconv.default_queue())
    ratios = []
    for spec, first in new.items():
        before = old.get(spec)
        if before is None or (before["algorithm"], before["config"]) == (first["algorithm"], first["config"]):
            continue
        problem = Problem(shapes.resolve_layers(spec, None)[0].geometry, first["pass"], "float32")
        runners = [(side, planner.prepare(problem, REGISTRY[c["algorithm"]], c["config"], queue))
                   for side, c in (("old", before), ("new", first))]
        best = fastest(runners, queue, random_operands(problem, queue))
        ratios.append(best["new"] / best["old"])
        print(f"{spec[:44]:44s} old {best['old']:7.3f} ms  new {best['new']:7.3f} ms  new/old {ratios[-1]:.3f}  "
              f"{before['algorithm']} {before['config']} -> {first['algorithm']} {first['config']}", flush=True)
    if ratios:
        print(f"{len(ratios)} layers moved; new/old geometric mean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "firsts":
        firsts(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif sys.argv[1] == "ab":
        ab(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
