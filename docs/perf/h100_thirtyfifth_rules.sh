#!/usr/bin/env bash
# The thirty-fifth session's GPU runs (issue 12), from the repo root on the GPU machine, .gpu and .ab
# carried (.ab/base: the session's first commit's clconv/):
#   PART=lists [LIST=sixteenth] bash docs/perf/h100_thirtyfifth_rules.sh
#       the list docs/perf/h200-$LIST-layers.txt tuned and re-timed as `clconv tune` does
#       (heuristic_retime.py fresh), then its stream of default calls against cuDNN (`clconv bench
#       --check`), this tree
#   PART=wgrad [ROUNDS=2] bash docs/perf/h100_thirtyfifth_rules.sh
#       the same A/B on the weight gradients planner._full_weight_gemm moved (h100-thirtyfifth-wgrad-layers.txt),
#       .ab/base then holding the commit before it
#   PART=final bash docs/perf/h100_thirtyfifth_rules.sh
#       PART=lists with LIST=seventeenth, then the GPU set's stream of default calls against cuDNN
#       and the warm first call (warm_first_call_ab.py), this tree against .ab/base
#   PART=ab [ROUNDS=2] bash docs/perf/h100_thirtyfifth_rules.sh
#       the layers the session's rules changed (h100-thirtyfifth-changed-layers.txt), `clconv bench
#       --check` with this tree and .ab/base alternating; then a cached call's host time
#       (host_chain.py) and the warm first call (warm_first_call_ab.py), both trees
# Everything lands in $OUT.
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json, list_runs, ab_rounds; the GPU's environment and name
cd /tmp
if [ "$PART" = lists ] || [ "$PART" = final ]; then
    LIST=${LIST:-sixteenth}; [ "$PART" = final ] && LIST=seventeenth
    list_runs $LIST
fi
if [ "$PART" = final ]; then
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cw timeout 100 python3 -m clconv bench gpu --check \
        --json $OUT/stream-gpu.json > $OUT/stream-gpu.log 2>&1; echo "gpu set bench exit $?"; tail -3 $OUT/stream-gpu.log
    timeout 90 python3 $root/docs/perf/warm_first_call_ab.py $root/.ab/base $root 5 > $OUT/warm-first-call.txt 2>&1
    echo "warm first call exit $?"; tail -3 $OUT/warm-first-call.txt
fi
if [ "$PART" = ab ] || [ "$PART" = wgrad ]; then
    L=$root/docs/perf/h100-thirtyfifth-changed-layers.txt; [ "$PART" = wgrad ] && L=$root/docs/perf/h100-thirtyfifth-wgrad-layers.txt
    ab_rounds $L "$OUT/$([ "$PART" = ab ] && echo changed || echo wgrad)-streams.json"
    [ "$PART" = wgrad ] && exit 0
    for side in work base work base; do
        echo "host_chain $side: $(PYTHONPATH=$(tree $side) timeout 60 python3 $root/docs/perf/host_chain.py 2>&1 | tail -3 | tr '\n' ' ')"
    done | tee $OUT/host-chain.txt
    timeout 150 python3 $root/docs/perf/warm_first_call_ab.py $root/.ab/base $root 6 > $OUT/warm-first-call.txt 2>&1
    echo "warm first call exit $?"; tail -4 $OUT/warm-first-call.txt
fi
