"""The GPU order's numeric thresholds judged on lists they were not set on: each threshold (a
module constant of clconv.planner, or MODULE:NAME) moved over a grid of values; for each of
heuristic_check.py's sets in turn, the value best on the other sets (the heuristic's first
candidates' summed log-ratio to the best) judged on it; the geometric mean over every set so
judged, against the threshold's own value.

    python docs/perf/threshold_cv.py NAME VALUES [NAME VALUES ...]
    python docs/perf/threshold_cv.py FEW_ROWS 8,12,16,24,32 WEIGHT_GRADIENT_MIN_FLOPS '2**28,2**29,2**30'
"""
import importlib
import math
import sys

import heuristic_check as hc  # docs/perf/, beside this script

from clconv import planner


def log_ratios(sets, device, extras, blocks, retimed, retuned) -> dict:
    """Set name -> the log-ratios of its layer-passes' first candidates to their best."""
    judged = hc.judge_sets(sets, device, extras, blocks, retimed, retuned)
    return {name: [math.log(r["ratio"]) for r in rows] for name, rows in judged.items()}


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2:
        sys.exit(__doc__)
    hc.with_workspace_limit()
    device = hc.h200()
    runs = hc.all_tiles_times(), hc.block_times(), hc.retimed_times(), hc.retuned_times()
    for spec, grid in zip(args[::2], args[1::2]):
        module, name = (spec.split(":") if ":" in spec else ("clconv.planner", spec))
        module = importlib.import_module(module) if module != "clconv.planner" else planner
        own = getattr(module, name)
        values = list(dict.fromkeys([own, *(eval(v, {}) for v in grid.split(","))]))  # noqa: S307 - numbers from the command line
        by_value = {}
        try:
            for value in values:
                setattr(module, name, value)
                by_value[value] = log_ratios(hc.SETS, device, *runs)
        finally:
            setattr(module, name, own)
        sets = list(by_value[own])
        total = {v: sum(map(sum, by_value[v].values())) for v in values}
        count = sum(map(len, by_value[own].values()))
        held_out = 0.0
        for name_ in sets:
            best = min(values, key=lambda v: (total[v] - sum(by_value[v][name_]), v != own))
            held_out += sum(by_value[best][name_])
        print(f"{name}: in sample " + ", ".join(f"{v}: {math.exp(total[v] / count):.4f}x" for v in values)
              + f"; each set judged on the value best elsewhere {math.exp(held_out / count):.4f}x, "
              f"its own value {math.exp(total[own] / count):.4f}x ({count} layer-passes)")


if __name__ == "__main__":
    main()
