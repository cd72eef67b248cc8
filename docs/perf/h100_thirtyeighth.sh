#!/usr/bin/env bash
# The thirty-eighth session's GPU runs (issue 12), from the repo root on the GPU machine, .gpu and .ab
# carried (.ab/f63: 7aaf84f's clconv/ with F(6x6, 3x3) added as a third 3x3 side, and its tests;
# .ab/pre20: bfcb179^'s clconv/, before the 5x5 forward's 20-channel rule):
#   PART=f63 bash docs/perf/h100_thirtyeighth.sh
#       F(6x6, 3x3)'s error tests on this GPU, then docs/perf/h100-f63-layers.txt tuned as `clconv
#       tune` does with .ab/f63 (every side's first tile among the candidates: fresh-f63.json); then
#       GoogLeNet's 5x5 24 -> 64 (the 20-channel rule's layer) in streams of default calls against
#       cuDNN, this tree and .ab/pre20 alternating (googlenet-streams.json)
#   PART=unseen20 bash docs/perf/h100_thirtyeighth.sh
#       docs/perf/h200-unseen20-layers.txt tuned and re-timed, then its stream of default calls
#       against cuDNN, this tree (fresh-unseen20.json, stream-unseen20.json)
#   PART=f63ab [ROUNDS=2] bash docs/perf/h100_thirtyeighth.sh
#       the weight gradients of docs/perf/h100-f63-ab-layers.txt (`clconv bench --check --passes
#       backward_weight`), this tree (F(6x6, 3x3) first in GPU weight gradients) and .ab/s38 (the
#       session's start, dba5e4e) alternating (f63-streams.json)
#   PART=tiles3d bash docs/perf/h100_thirtyeighth.sh
#       every GPU tile of the implicit GEMM's forward on docs/perf/h100-3d-tiles-layers.txt
#       (gemm_all_tiles.py --only implicit_gemm:forward: tiles3d.json)
#   PART=rows bash docs/perf/h100_thirtyeighth.sh
#       every GPU tile of the implicit GEMM's forward on docs/perf/h100-partial-rows-layers.txt
#       (rows.json)
#   PART=ccnet bash docs/perf/h100_thirtyeighth.sh
#       CCNet's 3x3 2048 -> 512 weight gradient against cuDNN (ccnet.json)
#   PART=gpuset bash docs/perf/h100_thirtyeighth.sh
#       the GPU set's stream of default calls against cuDNN, this tree (stream-gpu.json)
# Everything lands in $OUT.
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json, list_runs, ab_rounds; the GPU's environment and name
if [ "$PART" = f63 ]; then
    (cd $root/.ab/f63 && PYTHONPATH=$(tree f63) timeout 120 python3 -m pytest -q -p no:cacheprovider \
        tests/algorithms/test_gemm_configs.py -k "error_stays and (6-3 or 4-3)" 2>&1 | tail -3)
    cd /tmp
    PYTHONPATH=$(tree f63) CLCONV_CACHE_DIR=/tmp/c63 timeout ${FRESH_S:-220} python3 $root/docs/perf/heuristic_retime.py fresh \
        $root/docs/perf/h100-f63-layers.txt $OUT/fresh-f63.json --processes 8 > $OUT/fresh-f63.log 2>&1
    echo "fresh exit $?"; tail -2 $OUT/fresh-f63.log
    python3 $root/docs/perf/winograd_sides.py $OUT/fresh-f63.json | tail -4
    BASE=pre20 ab_rounds "mb64ic24ih14oc64oh14kh5ph2 mb32ic16ih28oc32oh28kh5ph2" "$OUT/googlenet-streams.json" 60
fi
if [ "$PART" = f63ab ]; then
    cd /tmp
    BASE=s38 ab_rounds "$root/docs/perf/h100-f63-ab-layers.txt --passes backward_weight" "$OUT/f63-streams.json" 130
fi
if [ "$PART" = tiles3d ]; then
    implicit_tiles tiles3d $root/docs/perf/h100-3d-tiles-layers.txt ${TILES_S:-400}
fi
if [ "$PART" = rows ]; then
    implicit_tiles rows $root/docs/perf/h100-partial-rows-layers.txt ${TILES_S:-300}
fi
if [ "$PART" = ccnet ]; then
    cd /tmp
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/ct timeout 120 python3 -m clconv bench mb2ic2048ih97oc512oh97kh3ph1 \
        --passes backward_weight --check --json $OUT/ccnet.json > $OUT/ccnet.log 2>&1; echo "ccnet exit $?"; grep -i "ccnet\|n2g1c2048\|geometric" $OUT/ccnet.log | head -4
fi
if [ "$PART" = gpuset ]; then
    cd /tmp
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cg timeout ${BENCH_S:-400} python3 -m clconv bench gpu --check --quiet \
        --json $OUT/stream-gpu.json > $OUT/stream-gpu.log 2>&1; echo "bench exit $?"; tail -4 $OUT/stream-gpu.log
fi
if [ "$PART" = unseen20 ]; then
    cd /tmp
    list_runs unseen20 ${FRESH_S:-300}
fi
