"""Fit and judge split-K's GPU time model (clconv.algorithms.splitk.SPLITK_COST_WEIGHTS) on the
stored tuning runs (docs/perf/heuristic_check.py's sets, every run merged as that script merges it).

For every layer-pass with split-K configurations timed, each timed configuration's terms
(``splitk.cost_terms``) against the log of its time; a least-squares fit within each layer-pass
(terms and log-times less their mean over the layer-pass: only differences between a problem's
configurations count), lightly ridged.  Judged list by list: each list left out of the fit and
ranked by the weights of the others; of the configurations split-K offers today (every GPU tile with
its piece count, ``SplitK.splits_for``) that were timed, the modelled fastest against the fastest,
beside what ``planner.candidates`` puts first (the heuristic as it stands: with the stored weights,
the model itself).

    python docs/perf/splitk_cost_fit.py             the fit, its weights and the left-out judgement
    python docs/perf/splitk_cost_fit.py --rows      also each layer-pass
"""
import argparse
import functools
import math
import sys
from collections import defaultdict

import numpy as np

import heuristic_check as hc  # docs/perf/, beside this script

from clconv.algorithms import gemm, splitk
from clconv.planner import REGISTRY, candidates, label

RIDGE = 0.3
GROUPS = {"backward_weight": "backward_weight", "forward": "result", "backward_data": "result"}


def layer_passes():
    """[(set, layer, problem, {label: (config, ms)}, offered labels, heuristic's first label)]."""
    device = hc.h200()
    hc.with_workspace_limit()
    algorithm = REGISTRY["splitk"]
    extras, retimed, retuned = hc.all_tiles_times(), hc.retimed_times(), hc.retuned_times()
    blocks = hc.block_times()
    out = []
    for name, (specs, batch, path) in hc.SETS.items():
        run = hc.load_run(path)
        for layer, problem, times, _ in hc.stored_times(specs, batch, run, [hc._of_set(e, name) for e in extras], blocks,
                                                        hc._of_set(retimed, name), hc._of_set(retuned, name)):
            timed = {}
            for key, ms in times.items():
                timed_algorithm, config = hc.parse_label(key)
                if timed_algorithm == "splitk":
                    timed[key] = (config, ms)
            if not timed or algorithm.decline_reason(problem, device) is not None:
                continue
            saved = splitk.TILE_CANDIDATES
            splitk.TILE_CANDIDATES = len(gemm.GPU_TILES)  # every tile split-K offers
            try:
                offered = {label(algorithm, c) for c in algorithm.configs(problem, device)}
            finally:
                splitk.TILE_CANDIDATES = saved
            first = label(*candidates(problem, device)[0])
            out.append((name, layer, problem, timed, offered, first))
    return out


@functools.cache
def units() -> int:
    """The compute units of the H200 the runs are judged on (heuristic_check.h200)."""
    return hc.h200().max_compute_units


def terms(problem, config) -> dict:
    """splitk.cost_terms of ``config`` for ``problem`` on that H200."""
    return splitk.cost_terms(problem, REGISTRY["splitk"].shape(problem), config, units())


def fit(rows) -> dict:
    """{group: {term: weight}} fitted within each layer-pass."""
    columns: dict = {}
    xs, ys = [], []
    for _, _, problem, timed, _, _ in rows:
        block, logs = [], []
        for config, ms in timed.values():
            t = terms(problem, config)
            own = splitk.SPLITK_COST_WEIGHTS[GROUPS[problem.pass_]]
            row = {(GROUPS[problem.pass_] if n in own else "shared", n): v for n, v in t.items()}
            for k in row:
                columns.setdefault(k, len(columns))
            block.append(row)
            logs.append(math.log(ms))
        mean = sum(logs) / len(logs)
        xs.append(block)
        ys += [v - mean for v in logs]
    x = np.zeros((len(ys), len(columns)))
    i = 0
    for block in xs:
        start = i
        for row in block:
            for k, v in row.items():
                x[i, columns[k]] = v
            i += 1
        x[start:i] -= x[start:i].mean(axis=0)
    w = np.linalg.solve(x.T @ x + RIDGE * np.eye(len(columns)), x.T @ np.array(ys))
    out: dict = defaultdict(dict)
    for (group, n), j in columns.items():
        out[group][n] = float(w[j])
    return dict(out)


def cost(weights, problem, config) -> float:
    """The modelled log-time of ``config`` under ``weights`` (fit's form)."""
    group = GROUPS[problem.pass_]
    merged = {**weights.get("shared", {}), **weights.get(group, {})}
    return sum(merged.get(n, 0.0) * v for n, v in terms(problem, config).items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true")
    args = parser.parse_args()
    rows = layer_passes()
    weights = fit(rows)
    print("weights fitted on every list (clconv's SPLITK_COST_WEIGHTS are these, rounded):")
    for group, ws in weights.items():
        print(f"  {group:16s} " + "  ".join(f"{n}={v:+.2f}" for n, v in ws.items()))
    sets = list(dict.fromkeys(r[0] for r in rows))
    left_out, current = [], []
    for name in sets:
        w = fit([r for r in rows if r[0] != name])
        judged = []
        for set_, layer, problem, timed, offered, first in rows:
            if set_ != name:
                continue
            pool = {k: v for k, v in timed.items() if k in offered}
            if not pool:
                continue
            best = min(ms for _, ms in pool.values())
            pick = min(pool, key=lambda k: cost(w, problem, pool[k][0]))
            ratio = pool[pick][1] / best
            now = pool[first][1] / best if first in pool else None
            judged.append(ratio)
            left_out.append(ratio)
            if now is not None:
                current.append(now)
            if args.rows:
                print(f"    {layer[:40]:40s} {problem.pass_:16s} {ratio:5.2f}x  (stored weights' first: "
                      f"{'untimed' if now is None else f'{now:.2f}x'})")
        if judged:
            print(f"{name:18s} {len(judged):3d} layer-passes: left out of the fit, the modelled first "
                  f"{hc.geomean(judged):.3f}x the fastest offered (worst {max(judged):.2f}x)")
    print(f"{'all':18s} {len(left_out):3d} layer-passes: left out {hc.geomean(left_out):.3f}x the fastest offered; "
          f"planner.candidates' first where split-K leads and it was timed: {hc.geomean(current):.3f}x "
          f"({len(current)} layer-passes)")


if __name__ == "__main__":
    sys.exit(main())
