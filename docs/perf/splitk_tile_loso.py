"""Leave one list out: a parametric GPU tile order for split-K's weight gradients (edge waste, the
blocks' local loads per FMA, the shortfall of work-items under split-K's fill, the tile's area,
gathers per work-item where the GEMM gathers an operand, A's re-reads), its weights chosen on all
lists but one and judged on that one, against the order as it stands.  Offline, on every stored
layer-pass whose heuristic choice is split-K with four or more tiles timed (the tuning runs and the
all-tiles runs merged as docs/perf/heuristic_check.py merges them).

    python docs/perf/splitk_tile_loso.py

Twenty-sixth session (2026-12-06): 1.077x the fastest tile left one list out, the same as the
order as it stands (1.077x over 111 layer-passes); 1.065x in sample.  The order was kept.
"""
import itertools
import math

import heuristic_check as hc  # docs/perf/, beside this script

from clconv import limits
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import GPU_TILES, edge_waste, gathered_operand, gemm_tiles, local_loads_per_fma, work_items
from clconv.planner import candidates, label

# (local loads, fill shortfall, area, gathers per work-item, A's re-reads): each weight's values
GRID = list(itertools.product([0, 0.25, 0.5, 1.0, 2.0], [0, 0.25, 0.5, 1.0], [0, 0.05, 0.1, 0.2],
                              [0, 0.05, 0.1, 0.2, 0.4], [0, 0.1, 0.2]))


def stored_passes():
    """(set, layer, problem, times) of every stored layer-pass, merged as heuristic_check merges them."""
    extras, retimed, retuned = hc.all_tiles_times(), hc.retimed_times(), hc.retuned_times()
    blocks = hc.block_times()
    for name, (specs, batch, path) in hc.SETS.items():
        for layer, problem, times, _ in hc.stored_times(specs, batch, hc.load_run(path),
                                                        [hc._of_set(e, name) for e in extras], blocks,
                                                        hc._of_set(retimed, name), hc._of_set(retuned, name)):
            yield name, layer, problem, times


def splitk_weight_gradients(device):
    """(set, layer, [(features, time)], fastest, the current first tile's time) for each stored
    weight gradient the heuristic gives split-K, with four or more of its tiles timed."""
    splitk, fit = REGISTRY["splitk"], limits.of(device)
    data = []
    for name, layer, problem, times in stored_passes():
        if problem.pass_ != "backward_weight" or candidates(problem, device)[0][0].name != "splitk":
            continue
        shape = splitk.shape(problem)
        gathered = bool(gathered_operand(problem, shape))
        tiles = gemm_tiles(shape.M, shape.N, fit, problem.itemsize, limit=len(GPU_TILES), groups=1 << 20,
                           layout=problem.layout, large_blocks=False)
        timed = []
        for tile in tiles:
            splits = splitk.splits_for(problem, device, tile)
            key = label(splitk, {**tile, "splits": splits[0]}) if splits else None
            if key not in times:
                continue
            tm, tn, items = tile["TM"], tile["TN"], work_items(tile)
            groups = -(-shape.M // tm) * -(-shape.N // tn) * problem.geometry.groups
            features = {"waste": edge_waste(shape.M, shape.N, tm, tn), "loads": local_loads_per_fma(tile["WM"], tile["WN"]),
                        "fill": groups * items * splits[0] / (splitk.FILL_ITEMS * fit.compute_units),
                        "area": tm * tn, "gathered": gathered, "per_item": tn * tile["TK"] / items,
                        "rereads": -(-shape.N // tn)}
            timed.append((features, times[key]))
        if len(timed) >= 4:
            first = times.get(label(splitk, splitk.configs(problem, device)[0]))
            data.append((name, layer, timed, min(t for _, t in timed), first))
    return data


def score(f: dict, weights: tuple) -> float:
    loads, fill, area, gather, rereads = weights
    s = math.log(f["waste"]) + loads * f["loads"] + fill * max(0.0, -math.log(min(f["fill"], 1.0)))
    s += -area * math.log(f["area"]) + rereads * math.log(f["rereads"])
    return s + (gather * math.log(f["per_item"]) if f["gathered"] else 0.0)


def losses(data, weights) -> list[float]:
    """log(first tile's time / fastest) of each layer-pass under ``weights``."""
    return [math.log(min(timed, key=lambda c: score(c[0], weights))[1] / best) for _, _, timed, best, _ in data]


def geomean_of_logs(logs) -> float:
    logs = list(logs)
    return math.exp(sum(logs) / len(logs)) if logs else float("nan")


def main():
    device = hc.h200()
    hc.with_workspace_limit()
    data = splitk_weight_gradients(device)
    current = [math.log(first / best) for *_, best, first in data if first]
    print(f"{len(data)} layer-passes; the order as it stands: {geomean_of_logs(current):.3f}x the fastest tile")
    weights = min(GRID, key=lambda w: sum(losses(data, w)))
    print(f"in sample: {weights} {geomean_of_logs(losses(data, weights)):.3f}x")
    held_out = []
    for name in sorted({d[0] for d in data}):
        train, test = [d for d in data if d[0] != name], [d for d in data if d[0] == name]
        weights = min(GRID, key=lambda w: sum(losses(train, w)))
        logs = losses(test, weights)
        held_out += logs
        now = [math.log(first / best) for *_, best, first in test if first]
        print(f"{name:16s} {len(test):3d}  left out {geomean_of_logs(logs):.3f}x  as it stands "
              f"{geomean_of_logs(now):.3f}x  weights {weights}")
    print(f"every list left out in turn: {geomean_of_logs(held_out):.3f}x")


if __name__ == "__main__":
    main()
