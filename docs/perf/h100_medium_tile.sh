#!/usr/bin/env bash
# The thirty-fourth session's GPU A/B (issue 12): gemm.MEDIUM_GEMM_TILE (GEMMs of matrices with a
# wave or more of 64x64 work-groups take that tile in 8x8 blocks first) against .ab/base (the commit
# before), `clconv bench --check` of the GPU set and the thirteenth list, each tree ROUNDS times,
# alternating on one host ($OUT/streams.json, rewritten after every run).
# Run from the repo root on the GPU machine, .gpu and .ab carried:
#   [ROUNDS=2 LISTS="gpu thirteenth"] bash docs/perf/h100_medium_tile.sh
. docs/perf/gpu_ab.sh  # root, tree SIDE, merge_json GLOB FILE; the GPU's environment and name
imported() { (cd /tmp && PYTHONPATH=$(tree $1) python3 -c "import clconv; from clconv.algorithms import gemm; print('$1:', clconv.__file__, 'medium tile rule:', hasattr(gemm, 'MEDIUM_GEMM_TILE'))"); }
imported work; imported base
rounds=${ROUNDS:-2}
mkdir -p /tmp/s
for i in $(seq $rounds); do for list in ${LISTS:-gpu thirteenth}; do for side in work base; do
    spec=$root/docs/perf/h200-$list-layers.txt; [ $list = gpu ] && spec=gpu
    start=$SECONDS
    (cd /tmp && PYTHONPATH=$(tree $side) CLCONV_CACHE_DIR=/tmp/cache-$side timeout 130 python3 -m clconv bench $spec \
        --check --quiet --json /tmp/s/streams-$list-$side-$i.json > /tmp/s/$list-$side-$i.txt 2>&1)
    echo "$list $side $i: exit $? after $((SECONDS - start)) s: $(grep -iE 'geometric mean|stream of default' /tmp/s/$list-$side-$i.txt | cut -c1-120 | tr '\n' ' ')"
    merge_json "/tmp/s/streams-*.json" "$OUT/streams.json"
done; done; done
