"""Split-K's heuristic choice judged offline against a stored sweep of every candidate
(``splitk_candidates.py``'s JSON): for each layer, the first config ``SplitK.configs`` gives with
the sweep device's limits, its kernel time read from the sweep (a piece count the sweep did not
measure is read as the nearest one it did), against the layer's best candidate and the choice the
sweep's own run made.  No device needed.

    python docs/perf/splitk_rule_check.py [docs/perf/h200-splitk-candidates.json]
"""
import json
import math
import sys
from pathlib import Path

import splitk_candidates  # docs/perf/, beside this script: the layers of the sweep

from dataclasses import replace

from clconv import limits, settings
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.tools.devices import H200  # the H200 the sweep ran on (its compute units from the JSON)


def main():
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("h200-splitk-candidates.json"))
    sweep = json.loads(path.read_text())
    device = replace(H200.limits(), compute_units=sweep["units"])
    limits.of = lambda _device, _context=None: device  # the sweep's device, not this machine's
    settings.workspace_limit = lambda _device: 2**31
    splitk = REGISTRY["splitk"]
    descriptors = dict(splitk_candidates.LAYERS)
    now, then = [], []
    for row in sweep["rows"]:
        problem = Problem(splitk_candidates.geometry(descriptors[row["layer"]]), "backward_weight", "float32")
        config = splitk.configs(problem, None)[0]
        times: dict = {}
        for key, ms in row["times_ms"].items():
            candidate = json.loads(key)
            times.setdefault((candidate["TM"], candidate["TN"]), {})[candidate["splits"]] = ms
        best = min(ms for by_splits in times.values() for ms in by_splits.values())
        measured = times[(config["TM"], config["TN"])]
        nearest = min(measured, key=lambda s: abs(math.log(s / config["splits"])))
        now.append(measured[nearest] / best)
        then.append(row["heuristic_ms"] / best)
        print(f"{row['layer'][:40]:40s} {config['TM']:3d}x{config['TN']:<3d} {config['splits']:3d} pieces"
              f"{'' if nearest == config['splits'] else f' (read as {nearest})':17s} {now[-1]:.2f}x the best;"
              f" the sweep's choice {then[-1]:.2f}x")
    geomean = lambda values: math.exp(sum(map(math.log, values)) / len(values))  # noqa: E731
    print(f"geometric mean {geomean(now):.3f}x the best candidate (worst {max(now):.2f}x); "
          f"the sweep's own choices {geomean(then):.3f}x (worst {max(then):.2f}x)")


if __name__ == "__main__":
    main()
