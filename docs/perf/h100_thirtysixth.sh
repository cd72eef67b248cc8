#!/usr/bin/env bash
# The thirty-sixth session's GPU runs (issue 12), from the repo root on the GPU machine, .gpu and .ab
# carried (.ab/base: the session's first commit's clconv/, 0cb39c5):
#   PART=lists LIST=unseen19 bash docs/perf/h100_thirtysixth.sh
#       the list docs/perf/h200-$LIST-layers.txt tuned and re-timed as `clconv tune` does
#       (heuristic_retime.py fresh), then its stream of default calls against cuDNN (`clconv bench
#       --check`), this tree
#   PART=ab [ROUNDS=2] [LAYERS=docs/perf/h100-thirtysixth-changed-layers.txt] bash docs/perf/h100_thirtysixth.sh
#       `clconv bench --check` of LAYERS with this tree and .ab/base alternating
#   PART=both: lists, then ab
#   PART=final: ab with LAYERS=docs/perf/h100-thirtysixth-final-layers.txt, then the GPU set's stream
#       of default calls against cuDNN, this tree
# Everything lands in $OUT.
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json, list_runs, ab_rounds; the GPU's environment and name
cd /tmp
if [ "$PART" = lists ] || [ "$PART" = both ]; then
    list_runs ${LIST:-unseen19} 330
fi
[ "$PART" = final ] && LAYERS=docs/perf/h100-thirtysixth-final-layers.txt
if [ "$PART" = ab ] || [ "$PART" = both ] || [ "$PART" = final ]; then
    L=$root/${LAYERS:-docs/perf/h100-thirtysixth-changed-layers.txt}
    ab_rounds $L "$OUT/$([ "$PART" = final ] && echo final || echo changed)-streams.json" 120
fi
if [ "$PART" = final ]; then
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cw timeout 110 python3 -m clconv bench gpu --check \
        --json $OUT/stream-gpu-final.json > $OUT/stream-gpu-final.log 2>&1; echo "gpu set bench exit $?"; tail -3 $OUT/stream-gpu-final.log
fi
