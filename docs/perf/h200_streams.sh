#!/usr/bin/env bash
# The stream and kernel figures of issue 12 on the H200, one command (run from the repo root on
# the device machine, after `. .gpu/opencl-on-gpu.sh`): each set in a fresh cache directory (the
# default heuristic's choices, one build per problem), JSON and one log under OUT.
#   bash docs/perf/h200_streams.sh OUT [SET...]
# SET: gpu vgg11 small unseen holdout validation kernels wrows (the heuristic; BENCH_EXTRA=--check adds bench's
# float64 check), unseen_tuned (`clconv tune` of the unseen layers, then bench in the same cache),
# tune_gpu tune_vgg11 tune_small tune_unseen tune_holdout tune_validation tune_kernels tune_wrows tune_rows5 tune_wgrad (each
# set's every candidate timed: the data of docs/perf/heuristic_check.py), launch
# (docs/perf/launch_paths.py), first_call; default: gpu vgg11 small unseen unseen_tuned launch first_call.
# kernels: h200-winograd-kernels-layers.txt; wrows: the 5x5 and dilated 3x3 layers of the unseen,
# holdout and validation lists (Winograd serves them since 2026-12-02), to re-tune those rows alone;
# tune_rows5: the 5x5 rows of those lists (h200-5x5-rows.txt); tune_wgrad: the weight gradients of
# every list's layers that Winograd serves (h200-wgrad-retune-layers.txt; 52 layers, over 150 s), to
# re-tune those rows after a change to Winograd's weight gradient (merge each row by its "key")
set -u
out=${1:?OUT}; shift
sets=${*:-gpu vgg11 small unseen unseen_tuned launch first_call}
log=$out/streams.log
mkdir -p "$out"
WROWS=$out/winograd-rows.txt
grep -hE 'kh5|dh[0-9]' docs/perf/h200-{unseen,holdout,validation}-layers.txt > "$WROWS"
SMALL="mb1ic256ih14oc256oh14kh3ph1 mb8ic512ih28oc256oh14kh1sh2ph0 mb1ic512ih7oc512oh7kh3ph1 mb16ic64ih128oc64oh128kh3ph1"
for set in $sets; do
    case $set in
        gpu) args="gpu" ;;
        vgg11) args="shapes_vgg_11 --batch 8" ;;
        small) args="$SMALL" ;;
        unseen) args="docs/perf/h200-unseen-layers.txt" ;;
        holdout) args="docs/perf/h200-holdout-layers.txt" ;;
        validation) args="docs/perf/h200-validation-layers.txt" ;;
        kernels) args="docs/perf/h200-winograd-kernels-layers.txt" ;;
        wrows) args="$WROWS" ;;
        unseen_tuned) cache=$(mktemp -d); start=$SECONDS
                      CLCONV_CACHE_DIR=$cache timeout 400 python3 -m clconv tune docs/perf/h200-unseen-layers.txt \
                          --quiet --json "$out/unseen_tune.json" >> "$log" 2>&1
                      echo "== tune: exit $? after $((SECONDS - start)) s" | tee -a "$log"
                      CLCONV_CACHE_DIR=$cache timeout 240 python3 -m clconv bench docs/perf/h200-unseen-layers.txt \
                          --quiet --json "$out/unseen_tuned.json" >> "$log" 2>&1
                      grep -iE "geometric|stream of default" "$log" | tail -2; continue ;;
        tune_*) what=${set#tune_}; cache=$(mktemp -d); start=$SECONDS
                case $what in gpu) spec="gpu" ;; vgg11) spec="shapes_vgg_11 --batch 8" ;; small) spec="$SMALL" ;;
                              unseen) spec="docs/perf/h200-unseen-layers.txt" ;; holdout) spec="docs/perf/h200-holdout-layers.txt" ;;
                              validation) spec="docs/perf/h200-validation-layers.txt" ;;
                              kernels) spec="docs/perf/h200-winograd-kernels-layers.txt" ;; wrows) spec="$WROWS" ;;
                              rows5) spec="docs/perf/h200-5x5-rows.txt" ;;
                              wgrad) spec="docs/perf/h200-wgrad-retune-layers.txt --passes backward_weight" ;; esac
                # shellcheck disable=SC2086
                CLCONV_CACHE_DIR=$cache timeout 540 python3 -m clconv tune $spec --quiet --json "$out/$set.json" >> "$log" 2>&1
                echo "== $set: exit $? after $((SECONDS - start)) s" | tee -a "$log"; continue ;;
        launch) PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} timeout 240 python3 docs/perf/launch_paths.py > "$out/launch_paths.txt" 2>&1
                tail -12 "$out/launch_paths.txt"; continue ;;
        first_call) CLCONV_CACHE_DIR=$(mktemp -d) timeout 200 python3 docs/perf/first_call_profile.py \
                        --json "$out/first_call_profile.json" >> "$log" 2>&1
                    grep -E "^(cold|warm|new_geometry)" "$log" | tail -3; continue ;;
        *) echo "unknown set $set" >&2; exit 2 ;;
    esac
    echo "== $set: clconv bench $args" >> "$log"
    start=$SECONDS
    # shellcheck disable=SC2086
    CLCONV_CACHE_DIR=$(mktemp -d) timeout 240 python3 -m clconv bench $args ${BENCH_EXTRA:-} --quiet --json "$out/$set.json" >> "$log" 2>&1
    echo "== $set: exit $? after $((SECONDS - start)) s" >> "$log"
    grep -iE "geometric|stream of default" "$log" | tail -2
    echo "$set: $((SECONDS - start)) s"
done
