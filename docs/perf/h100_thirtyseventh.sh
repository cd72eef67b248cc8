#!/usr/bin/env bash
# The thirty-seventh session's GPU runs (issue 12), from the repo root on the GPU machine, .gpu and .ab
# carried (.ab/head: the session's first commit's clconv/, 6b224b7; .ab/base: fbdf0f2^'s):
#   PART=f45 bash docs/perf/h100_thirtyseventh.sh
#       the 5x5 list docs/perf/h200-f45-layers.txt tuned and re-timed as `clconv tune` does
#       (heuristic_retime.py fresh: every Winograd side's first tile is among the candidates), this
#       tree; then the list's `clconv bench --check` (streams of default calls against cuDNN) with
#       this tree and .ab/head alternating (F(4x4, 5x5) against the code before it)
#   PART=ab [ROUNDS=2] [BASE=base] LAYERS=... bash docs/perf/h100_thirtyseventh.sh
#       `clconv bench --check` of LAYERS with this tree and .ab/$BASE alternating
# Everything lands in $OUT.
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json, list_runs, ab_rounds; the GPU's environment and name
cd /tmp
if [ "$PART" = f45 ]; then
    list=$root/docs/perf/h200-f45-layers.txt
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cw timeout ${FRESH_S:-200} python3 $root/docs/perf/heuristic_retime.py fresh \
        $list $OUT/fresh-f45.json --processes 8 > $OUT/fresh-f45.log 2>&1; echo "fresh exit $?"; tail -2 $OUT/fresh-f45.log
    # this tree's runs are the list's stream of default calls against cuDNN
    BASE=head ab_rounds $list "$OUT/f45-streams.json" ${AB_S:-85}
fi
if [ "$PART" = ab ]; then
    ab_rounds $root/$LAYERS "$OUT/changed-streams.json" 120
fi
