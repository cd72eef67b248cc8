"""Leave one list out: for a GEMM family's GPU tile order (gemm.gemm_tiles' cost), which weighting
of the work-item shortfall (TileWeights.fill_items and fill_power) and of the blocks' local loads per FMA,
with or without LARGE_GEMM_TILE's promotion, picks tiles nearest the fastest, judged on each list
of heuristic_check's sets with the weights chosen on the others; against the order as it stands.
Offline, on the all-tiles runs (every GPU tile timed; docs/perf/gemm_all_tiles.py).

    python docs/perf/tile_weights_loso.py ALGORITHM PASS [RUN.json ...]

ALGORITHM PASS: e.g. im2col backward_data, winograd forward (its GEMMs at the heuristic's tile side;
the forward and data gradient only); RUN.json: all-tiles runs in docs/perf (default:
heuristic_check.ALL_TILES and RETIMED).  How gemm.COLUMN_WEIGHTS were chosen (docs/performance.md).
"""
import argparse
import itertools
import json
import math

import heuristic_check  # docs/perf/, beside this script

from clconv import limits
from clconv.algorithms import REGISTRY, gemm
from clconv.plan import Problem
from clconv.planner import candidates

# (work-items a compute unit under which the shortfall counts, or None; its power; the local
# loads' weight; whether LARGE_GEMM_TILE may be promoted)
GRID = [w for w in itertools.product([None, 128, 256, 512], [0.5, 1.0], [0.0, 0.5, 1.0, 2.0], [True, False])
        if not (w[0] is None and w[1] == 1.0)]
TIMED_KEYS = ("TM", "TN", "WM", "WN", "VW", "m")


def layer_passes(algorithm_name: str, pass_: str, files: list[str], device) -> list[tuple]:
    """(all-tiles row, geometry, problem, GEMM shape) of each distinct layer-pass whose heuristic
    choice is the algorithm, with at least six tiles timed."""
    geometry = {(name, label): g for name, (specs, batch, _) in heuristic_check.SETS.items()
                for label, g in heuristic_check.layer_geometries(specs, batch).items()}
    algorithm = REGISTRY[algorithm_name]
    rows = [r for f in files for r in json.loads((heuristic_check.HERE / f).read_text())
            if r["algorithm"] == algorithm_name and r["pass"] == pass_ and (r["set"], r["layer"]) in geometry]
    out, seen = [], set()
    for row in reversed(rows):  # the latest run of a layer-pass first
        g = geometry[(row["set"], row["layer"])]
        problem = Problem(g, pass_, "float32")
        if candidates(problem, device)[0][0].name != algorithm_name or g.tag() in seen or len(row["times_ms"]) < 6:
            continue
        seen.add(g.tag())
        if algorithm_name == "im2col":
            shape = algorithm._shape(problem, algorithm.chunk_batch(problem, device) or 1)
        elif algorithm_name == "winograd":  # the GEMMs of the heuristic's tile side (config m)
            side = algorithm.configs(problem, device)[0]["m"]
            if not any(f" m={side}" in key + " " for key in row["times_ms"]):
                continue
            shape = algorithm._shape(problem, algorithm._conv(problem, side))
        else:
            shape = algorithm._shape(problem)
        out.append((row, g, problem, shape))
    return out


def first_tile(algorithm, fit, row_data, weights) -> dict:
    """The tile gemm_tiles puts first under ``weights`` (GRID's form: no fill term where its
    work-item count is None, LARGE_GEMM_TILE's promotion only where the algorithm allows it)."""
    _, g, problem, shape = row_data
    fill, power, loads, large = weights
    tile_weights = gemm.TileWeights(fill_power=power if fill else 0.0, loads=loads, fill_items=fill or 1)
    if algorithm.name == "winograd":  # its workspace GEMMs: plain matrices, one per tile position
        side = algorithm.configs(problem, heuristic_check.h200())[0]["m"]
        return {"m": side, **gemm.gemm_tiles(shape.M, shape.N, fit, 4, limit=1, groups=shape.gemms,
                                             plain=True, weights=tile_weights)[0]}
    allowed = getattr(algorithm, "large_blocks", lambda *_: True)(problem, shape)
    return gemm.gemm_tiles(shape.M, shape.N, fit, 4, limit=1, groups=g.groups, large_blocks=large and allowed,
                           weights=tile_weights)[0]


def log_ratios(algorithm, fit, device, data, weights) -> list:
    """log(first tile's time / the fastest's) per layer-pass (None where that tile was not timed);
    ``weights`` None: the algorithm's own first config."""
    out = []
    for row_data in data:
        times = row_data[0]["times_ms"]
        config = (algorithm.configs(row_data[2], device)[0] if weights is None
                  else first_tile(algorithm, fit, row_data, weights))
        keys = [k for k in times if all(f"{key}={config[key]} " in k + " " for key in TIMED_KEYS if key in config)]
        out.append(math.log(times[keys[0]] / min(times.values())) if keys else None)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("algorithm")
    parser.add_argument("pass_", metavar="pass")
    parser.add_argument("runs", nargs="*")
    args = parser.parse_args()
    heuristic_check.with_workspace_limit()
    device = heuristic_check.h200()
    fit = limits.of(device)
    algorithm = REGISTRY[args.algorithm]
    data = layer_passes(args.algorithm, args.pass_, args.runs or [*heuristic_check.ALL_TILES,
                                                                  *heuristic_check.RETIMED], device)
    print(f"{args.algorithm} {args.pass_}: {len(data)} layer-passes")
    by_weights = {w: log_ratios(algorithm, fit, device, data, w) for w in GRID}
    current = log_ratios(algorithm, fit, device, data, None)
    usable = [i for i in range(len(data)) if current[i] is not None and all(r[i] is not None for r in by_weights.values())]
    held_out, now, better, worse = 0.0, 0.0, 0, 0
    for name in sorted({data[i][0]["set"] for i in usable}):
        inside = [i for i in usable if data[i][0]["set"] != name]
        outside = [i for i in usable if data[i][0]["set"] == name]
        chosen = min(GRID, key=lambda w: sum(by_weights[w][i] for i in inside))
        held = sum(by_weights[chosen][i] for i in outside)
        mine = sum(current[i] for i in outside)
        held_out, now = held_out + held, now + mine
        better, worse = better + (held < mine - 1e-9), worse + (held > mine + 1e-9)
        print(f"  {name:16s} {len(outside):3d}  weights {chosen}  held out {math.exp(held / len(outside)):.3f}, "
              f"the order now {math.exp(mine / len(outside)):.3f}")
    n = len(usable)
    print(f"left out in turn: {math.exp(held_out / n):.3f}x the fastest tile against the order's {math.exp(now / n):.3f}x "
          f"(better on {better} lists, worse on {worse})")


if __name__ == "__main__":
    main()
