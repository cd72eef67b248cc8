"""Experiment: the weight gradient's Winograd GEMMs with V and Y stored tiles-major, channels fastest
(A = Y read M-fast, B = V read N-fast), against the stored tiles-fastest layout (both operands read
along their contraction), each GEMM's own kernel time at a few tiles and piece counts.  The
transforms are not changed for this: only the GEMM's views, so the products are not meaningful,
only their times.  On the GPU machine:

    python docs/perf/winograd_wgrad_layout.py SPEC"""
import sys

import clconv
from clconv import planner, runtime
from clconv.algorithms import REGISTRY
from clconv.algorithms import winograd as wmod
from clconv.algorithms.gemm import GemmShape
from clconv.plan import Problem
from clconv.tools import shapes

TILES = [(64, 64, 4, 4), (64, 64, 8, 8), (32, 32, 4, 4), (128, 64, 8, 8), (64, 128, 8, 8), (128, 128, 8, 8)]
SPLITS = (1, 4, 8, 15, 24, 36)
original = wmod.Winograd._shape


def channels_fast(self, problem, conv, ksplit=0):
    s = original(self, problem, conv, ksplit)
    return GemmShape(M=s.M, N=s.N, K=s.K, a_view="a_matrix_t", b_view="b_columns", c_view=s.c_view,
                     a_kfast=False, b_nfast=True, a=s.a, b=s.b, c=s.c, ksplit=s.ksplit, gemms=s.gemms)


def main():
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    wino = REGISTRY["winograd"]
    for layer in shapes.resolve_layers(sys.argv[1], None):
        problem = Problem(layer.geometry, "backward_weight", "float32")
        m = wino.sides(problem, q.device)[0]
        conv = wino._conv(problem, m)
        K = wino._tiles(conv)
        cuts = set(wmod.SplitK.cuts(K, 16))
        print(layer.label, "tiles", K, flush=True)
        for tm, tn, wm, wn in TILES:
            for s in SPLITS:
                if s != 1 and s not in cuts:
                    continue
                cfg = {"m": m, "TM": tm, "TN": tn, "TK": 16, "WM": wm, "WN": wn, "VW": 4, "PIPE": 1, "splits": s}
                times = []
                for variant in (original, channels_fast):
                    wmod.Winograd._shape = variant
                    runner = planner.prepare(problem, wino, cfg, q)
                    ops = runtime.random_operands(problem, prof)
                    best = []
                    for _ in range(7):
                        events = runner.run(prof, ops)
                        events[-1].wait()
                        best.append((events[-2].profile.end - events[-2].profile.start) * 1e-6)
                    times.append(sorted(best)[3])
                wmod.Winograd._shape = original
                print(f"    {tm}x{tn}/{wm}x{wn} s{s:3d} gemm k-fast {times[0]:.4f}  channels-fast {times[1]:.4f}"
                      f"  ({times[1] / times[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
