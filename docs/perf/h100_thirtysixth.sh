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
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json GLOB FILE; the GPU's environment and name
cd /tmp
if [ "$PART" = lists ] || [ "$PART" = both ]; then
    LIST=${LIST:-unseen19}
    L=$root/docs/perf/h200-$LIST-layers.txt
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cw timeout 330 python3 $root/docs/perf/heuristic_retime.py fresh $L \
        $OUT/fresh-$LIST.json --processes 8 > $OUT/fresh-$LIST.log 2>&1; echo "fresh exit $?"
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cw timeout 150 python3 -m clconv bench $L --check \
        --json $OUT/stream-$LIST.json > $OUT/stream-$LIST.log 2>&1; echo "bench exit $?"
    tail -2 $OUT/fresh-$LIST.log; tail -4 $OUT/stream-$LIST.log
fi
[ "$PART" = final ] && LAYERS=docs/perf/h100-thirtysixth-final-layers.txt
if [ "$PART" = ab ] || [ "$PART" = both ] || [ "$PART" = final ]; then
    L=$root/${LAYERS:-docs/perf/h100-thirtysixth-changed-layers.txt}
    mkdir -p /tmp/s
    for i in $(seq ${ROUNDS:-2}); do for side in work base; do
        start=$SECONDS
        PYTHONPATH=$(tree $side) CLCONV_CACHE_DIR=/tmp/cache-$side timeout 120 python3 -m clconv bench $L \
            --check --quiet --json /tmp/s/changed-$side-$i.json > /tmp/s/changed-$side-$i.txt 2>&1
        echo "changed $side $i: exit $? after $((SECONDS - start)) s: $(grep -iE 'geometric mean|stream of default' /tmp/s/changed-$side-$i.txt | cut -c1-110 | tr '\n' ' ')"
        merge_json "/tmp/s/changed-*.json" "$OUT/$([ "$PART" = final ] && echo final || echo changed)-streams.json"
    done; done
fi
if [ "$PART" = final ]; then
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cw timeout 110 python3 -m clconv bench gpu --check \
        --json $OUT/stream-gpu-final.json > $OUT/stream-gpu-final.log 2>&1; echo "gpu set bench exit $?"; tail -3 $OUT/stream-gpu-final.log
fi
