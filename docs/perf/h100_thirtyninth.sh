#!/usr/bin/env bash
# The thirty-ninth session's GPU runs (issue 12), from the repo root on the GPU machine, .gpu carried:
#   PART=host bash docs/perf/h100_thirtyninth.sh
#       where a stream of default calls spends its time (stream_split.py) on the twentieth list's
#       batch-1 1x1 stride-2 1024 -> 2048 (1.97x cuDNN's stream at 0.38x its kernel) and DeepMedic's
#       3x3x3 40 -> 40; then DeepMedic's three passes against cuDNN (`clconv bench --check`, two
#       processes: deepmedic-1.json, deepmedic-2.json), after gemm.PARTIAL_ROWS_TILE
#   PART=rows2 bash docs/perf/h100_thirtyninth.sh
#       every GPU tile of the implicit GEMM's forward on docs/perf/h100-partial-rows2-layers.txt
#       (rows2.json): PARTIAL_ROWS_TILE judged out of sample
#   PART=ab [ROUNDS=2] bash docs/perf/h100_thirtyninth.sh
#       the passes this session's rules move (`clconv bench --check`): the forwards and data
#       gradients of docs/perf/h100-thirtyninth-changed-fd-layers.txt, the weight gradients of
#       h100-thirtyninth-changed-w-layers.txt; this tree and .ab/s39 (the session's start, 735f9a8's
#       clconv/) alternating (changed-fd-streams.json, changed-w-streams.json)
#   PART=unseen21 bash docs/perf/h100_thirtyninth.sh
#       docs/perf/h200-unseen21-layers.txt tuned and re-timed, then its stream of default calls
#       against cuDNN, this tree (fresh-unseen21.json, stream-unseen21.json)
# Everything lands in $OUT.
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json, list_runs, ab_rounds; the GPU's environment and name
B1='mb1ic1024ih14oc2048oh7kh1sh2n"batch-1-1x1-s2-1024->2048"'
DEEPMEDIC='mb10ic40id25ih25iw25oc40od23oh23ow23kd3kh3kw3pd0ph0pw0n"deepmedic-3d-3x3x3-40"'
if [ "$PART" = host ]; then
    cd /tmp
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/ch timeout 150 python3 $root/docs/perf/stream_split.py "$B1" \
        "$DEEPMEDIC" > $OUT/split.txt 2>&1; echo "split exit $?"
    for i in 1 2; do
        PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/ch timeout 90 python3 -m clconv bench "$DEEPMEDIC" --check \
            --json $OUT/deepmedic-$i.json > $OUT/deepmedic-$i.log 2>&1; echo "deepmedic $i exit $?"
        grep -i "deepmedic\|stream of" $OUT/deepmedic-$i.log | head -6
    done
fi
if [ "$PART" = rows2 ]; then
    implicit_tiles rows2 $root/docs/perf/h100-partial-rows2-layers.txt ${TILES_S:-300}
fi
if [ "$PART" = ab ]; then
    cd /tmp
    BASE=s39 ab_rounds "$root/docs/perf/h100-thirtyninth-changed-w-layers.txt --passes backward_weight" \
        "$OUT/changed-w-streams.json" ${AB_S:-100}
    rm -f /tmp/s/changed-*.json
    BASE=s39 ab_rounds "$root/docs/perf/h100-thirtyninth-changed-fd-layers.txt --passes forward,backward_data" \
        "$OUT/changed-fd-streams.json" ${AB_S:-100}
fi
if [ "$PART" = unseen21 ]; then
    cd /tmp
    list_runs unseen21 ${FRESH_S:-300}
fi
