#!/usr/bin/env bash
# The thirty-third session's GPU call (issue 12): kernels without the bias and residual arguments
# they do not read (prelude.mako's epilogue_params), against .ab/base (the commit before, which
# passes both to every kernel that stores the result), on one host, alternating:
#  host:    docs/perf/host_per_algorithm.py's op / stubbed / runner / span per call of four tiny
#           layers' default forwards, each tree ROUNDS times ($OUT/host.json);
#  streams: `clconv bench --check` of the two small 1x1 lists and the GPU set, each tree ROUNDS
#           times ($OUT/streams.json, rewritten after every run);
#  tests:   the epilogue, storage and GEMM-configuration tests on the GPU, this tree.
# Run from the repo root on the GPU machine, .gpu and .ab carried:
#   [ROUNDS=2 STEPS="host streams tests"] bash docs/perf/h100_epilogue_args.sh
# Every Python process starts in /tmp with absolute paths (from the repo root, python -m would import
# the root's clconv ahead of PYTHONPATH's), and prints which clconv it imported.
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json GLOB FILE; the GPU's environment and name
imported() { (cd /tmp && PYTHONPATH=$(tree $1) python3 -c "import clconv; from clconv.algorithms import base; print('$1:', clconv.__file__, 'epilogue arguments only where read:', hasattr(base, 'takes'))"); }
imported work; imported base
steps=${STEPS:-host streams tests}
rounds=${ROUNDS:-2}
mkdir -p /tmp/s
merge() { merge_json "/tmp/s/$1-*.json" "$OUT/$1.json"; }
if [[ " $steps " == *" host "* ]]; then
    for i in $(seq $rounds); do for side in work base; do
        (cd /tmp && PYTHONPATH=$(tree $side) CLCONV_CACHE_DIR=/tmp/cache-$side timeout 150 python3 $root/docs/perf/host_per_algorithm.py \
            --algorithms auto --json /tmp/s/host-$side-$i.json mb1ic64ih7oc64oh7kh1ph0 mb1ic512ih14oc512oh14kh1ph0 \
            mb1ic256ih14oc256oh14kh3ph1 mb4ic128ih28oc128oh28kh3ph1 2>&1 | grep -v -i warn | sed "s/^/$side $i: /")
        merge host
    done; done
fi
if [[ " $steps " == *" streams "* ]]; then
    for i in $(seq $rounds); do for list in pointwise-small strided-small gpu; do for side in work base; do
        spec=$root/docs/perf/h200-$list-layers.txt; [ $list = gpu ] && spec=gpu
        start=$SECONDS
        (cd /tmp && PYTHONPATH=$(tree $side) CLCONV_CACHE_DIR=/tmp/cache-$side timeout 150 python3 -m clconv bench $spec \
            --check --quiet --json /tmp/s/streams-$list-$side-$i.json > /tmp/s/$list-$side-$i.txt 2>&1)
        echo "$list $side $i: exit $? after $((SECONDS - start)) s: $(grep -iE 'stream of default' /tmp/s/$list-$side-$i.txt | cut -c1-110)"
        merge streams
    done; done; done
fi
if [[ " $steps " == *" tests "* ]]; then
    (cd /tmp && PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=$(mktemp -d) timeout 200 python3 -m pytest -x -q -p no:cacheprovider \
        --rootdir $root $root/tests/algorithms/test_storage_and_epilogue.py $root/tests/algorithms/test_gemm_configs.py \
        -k "epilogue or bias or one_launch or splitk or vector_stores" 2>&1 | tail -3)
fi
