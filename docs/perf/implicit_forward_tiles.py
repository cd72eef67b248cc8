"""The implicit GEMM's first GPU tile in the forward against every tile timed: over the rows of the
all-tiles runs (heuristic_check.ALL_TILES, and the thirty-eighth session's runs of 3D forwards and of
forwards whose rows leave their last tile partly empty, gpu38/tiles3d.json and gpu38/rows.json) whose
algorithm is implicit_gemm, the time of the tile ``implicit_gemm.configs`` puts first on the H200
stand-in over the fastest tile's.  No device:

    python docs/perf/implicit_forward_tiles.py [--rows]

``--rows`` prints the layers whose first tile ran over 1.10x the fastest."""
import json
import math
import sys
from pathlib import Path

import heuristic_check  # docs/perf/, beside this script

from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.planner import label

HERE = Path(__file__).parent
RUNS = (*heuristic_check.ALL_TILES, "gpu38/tiles3d.json", "gpu38/rows.json", "gpu39/rows2.json")
LISTS = ("h100-3d-tiles-layers.txt", "h100-partial-rows-layers.txt", "h100-partial-rows2-layers.txt")  # the runs' layers


def main(show_rows: bool) -> None:
    device = heuristic_check.h200()
    heuristic_check.with_workspace_limit()
    geometries: dict = {}
    for specs, batch, _ in heuristic_check.SETS.values():
        geometries.update(heuristic_check.layer_geometries(specs, batch))
    geometries.update(heuristic_check.layer_geometries([str(HERE / name) for name in LISTS], None))
    implicit = REGISTRY["implicit_gemm"]
    ratios = []
    for run in RUNS:
        for row in json.loads((HERE / run).read_text()):
            if row["algorithm"] != "implicit_gemm" or row["pass"] != "forward" or row["layer"] not in geometries:
                continue
            times = dict(row["times_ms"])
            problem = Problem(geometries[row["layer"]], "forward", "float32")
            first = label(implicit, implicit.configs(problem, device)[0])
            if first not in times:
                continue
            ratios.append(times[first] / min(times.values()))
            if show_rows and ratios[-1] > 1.10:
                print(f"{row['layer'][:36]:36s} M={problem.geometry.cout_per_group:5d} {ratios[-1]:.2f}  {first}")
    print(f"{len(ratios)} implicit-GEMM forwards: the first tile {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f}x "
          f"the fastest (worst {max(ratios):.2f}x, {sum(r > 1.10 for r in ratios)} over 1.10x)")


if __name__ == "__main__":
    main("--rows" in sys.argv[1:])
