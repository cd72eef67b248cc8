#!/usr/bin/env bash
# The thirty-third session's GPU call (issue 12): split-K's floor of 512 input channels for small 1x1
# forwards where its sum stays in one launch (planner.SPLITK_POINTWISE_ONE_LAUNCH_MIN_CONTRACTION).
#  tune:    every candidate of the one stored layer-pass the floor moves that no run timed split-K on
#           (h200-pointwise-wgrad-layers.txt's batch-1 1x1 512 -> 512 forward at 14x14), this tree
#           ($OUT/tune-512-forward.json);
#  streams: streams of default calls against cuDNN (`clconv bench`), this tree ("work") against
#           .ab/base (the commit before), alternating, ROUNDS times: the two small 1x1 lists and that
#           layer ($OUT/streams.json, rewritten after every run).
# Run from the repo root on the GPU machine, .gpu and .ab carried:
#   [ROUNDS=2 STEPS="tune streams"] bash docs/perf/h100_floor512.sh
# (the change: docs/perf/splitk-pointwise-floor-512.patch, applied to this tree; .ab/base: the tree without it)
# Every Python process starts in /tmp with absolute paths (from the repo root, python -m would import
# the root's clconv ahead of PYTHONPATH's), and prints which clconv it imported.
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json GLOB FILE; the GPU's environment and name
imported() { (cd /tmp && PYTHONPATH=$(tree $1) python3 -c "import clconv; from clconv import planner; print('$1:', clconv.__file__, getattr(planner, 'SPLITK_POINTWISE_ONE_LAUNCH_MIN_CONTRACTION', None))"); }
imported work; imported base
LAYER=mb1ic512ih14oc512oh14kh1ph0
steps=${STEPS:-tune streams}
if [[ " $steps " == *" tune "* ]]; then
    start=$SECONDS
    (cd /tmp && PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=$(mktemp -d) timeout 150 python3 -m clconv tune $LAYER \
        --passes forward --force --quiet --json $OUT/tune-512-forward.json > /tmp/tune.txt 2>&1)
    echo "tune: exit $? after $((SECONDS - start)) s"; tail -3 /tmp/tune.txt
fi
[[ " $steps " == *" streams "* ]] || exit 0
mkdir -p /tmp/s
for i in $(seq ${ROUNDS:-2}); do
    for list in pointwise-small strided-small one; do
        for side in work base; do
            if [ $list = one ]; then spec="$LAYER --passes forward"; else spec=$root/docs/perf/h200-$list-layers.txt; fi
            start=$SECONDS
            (cd /tmp && PYTHONPATH=$(tree $side) CLCONV_CACHE_DIR=$(mktemp -d) timeout 120 python3 -m clconv bench $spec \
                --check --quiet --json /tmp/s/$list-$side-$i.json > /tmp/s/$list-$side-$i.txt 2>&1)
            echo "$list $side $i: exit $? after $((SECONDS - start)) s: $(grep -iE 'stream of default' /tmp/s/$list-$side-$i.txt | cut -c1-120)"
            merge_json "/tmp/s/*.json" $OUT/streams.json
        done
    done
done
