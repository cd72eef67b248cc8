"""Direct's channel tiles on channels-first activations (issue 12, forty-first session): for each
layer of a list and each of the forward and the data gradient, the kernel time of the heuristic's
first candidate without direct.channels_tiles_before_columns (the rule it judges) against the
channel tiles' first configuration (best of 3 x 5 runs each, the two interleaved over ROUNDS
rounds, the minimum kept), and whether the rule takes the pass ("taken": the tiles come first).

    cd /tmp && PYTHONPATH=REPO POCL_MAX_PTHREAD_COUNT=2 python REPO/docs/perf/pocl_channels_first_tiles.py \\
        REPO/docs/perf/pocl-channels-last-layers.txt [ROUNDS]
"""

import sys
from unittest import mock

import numpy as np

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY, direct
from clconv.algorithms.direct import channels_configs, channels_tiles_before_columns
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor

from pocl_channels_last import layers


def main():
    queue = clconv.default_queue()
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    best = {}
    for _ in range(rounds):
        for descriptor in layers(sys.argv[1]):
            layer = parse_descriptor(descriptor)
            for pass_ in ("forward", "backward_data"):
                problem = Problem(layer.geometry, pass_, "float32")
                with mock.patch.object(planner, "channels_tiles_before_columns", lambda *_: False), \
                        mock.patch.object(direct, "channels_tiles_before_columns", lambda *_: False):
                    first = planner.candidates(problem, queue.device)[0]
                tiles = (REGISTRY["direct"], channels_configs(problem, queue.device)[0])
                operands = runtime.random_operands(problem, queue)
                for side, (algorithm, config) in (("first", first), ("tiles", tiles)):
                    runner = planner.prepare(problem, algorithm, config, queue)
                    ms = 1e3 * min(runtime.time_runner(runner, queue, operands, 5, min) for _ in range(3))
                    key = (layer.name, pass_, side)
                    best[key] = (planner.label(algorithm, config), min(ms, best.get(key, ("", np.inf))[1]))
    ratios, taken = [], []
    for descriptor in layers(sys.argv[1]):
        layer = parse_descriptor(descriptor)
        for pass_ in ("forward", "backward_data"):
            (first_label, first_ms), (tiles_label, tiles_ms) = best[(layer.name, pass_, "first")], \
                best[(layer.name, pass_, "tiles")]
            takes = channels_tiles_before_columns(Problem(layer.geometry, pass_, "float32"), queue.device)
            ratios.append(tiles_ms / first_ms)
            if takes:
                taken.append(tiles_ms / first_ms)
            print(f"{layer.name:32s} {pass_:14s} first {first_label:45s} {first_ms:8.3f} ms  tiles {tiles_label:24s} "
                  f"{tiles_ms:8.3f} ms  {tiles_ms / first_ms:5.2f}x{'  taken' if takes else ''}")
    print(f"tiles / first, geometric mean {np.exp(np.mean(np.log(ratios))):.3f} ({min(ratios):.2f}-{max(ratios):.2f}x)")
    if taken:
        print(f"the {len(taken)} taken: {np.exp(np.mean(np.log(taken))):.3f} ({min(taken):.2f}-{max(taken):.2f}x)")


if __name__ == "__main__":
    main()
