#!/usr/bin/env bash
# The thirty-seventh session's GPU runs (issue 12), from the repo root on the GPU machine, .gpu and .ab
# carried (.ab/head: the session's first commit's clconv/, 6b224b7; .ab/base: fbdf0f2^'s):
#   PART=f45 bash docs/perf/h100_thirtyseventh.sh
#       the 5x5 list docs/perf/h200-f45-layers.txt tuned and re-timed as `clconv tune` does
#       (heuristic_retime.py fresh: every Winograd side's first tile is among the candidates), its
#       stream of default calls against cuDNN (`clconv bench --check`), this tree; then the list's
#       `clconv bench --check` with this tree and .ab/head alternating (F(4x4, 5x5) against the code
#       before it)
#   PART=ab [ROUNDS=2] [BASE=base] LAYERS=... bash docs/perf/h100_thirtyseventh.sh
#       `clconv bench --check` of LAYERS with this tree and .ab/$BASE alternating
# Everything lands in $OUT.
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json, list_runs, ab_rounds; the GPU's environment and name
cd /tmp
if [ "$PART" = f45 ]; then
    list_runs f45 ${FRESH_S:-240}
    BASE=head ab_rounds $root/docs/perf/h200-f45-layers.txt "$OUT/f45-streams.json" 100
fi
if [ "$PART" = ab ]; then
    ab_rounds $root/$LAYERS "$OUT/changed-streams.json" 120
fi
