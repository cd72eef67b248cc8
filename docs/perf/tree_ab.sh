#!/usr/bin/env bash
# A/B of two clconv trees on the GPU machine, in alternating processes on one host (absolute times
# on the shared machines wander from host to host; their ratios in one run do not): `clconv bench`
# of each shape list, with the package imported from BASE (a copy of the clconv/ folder of the
# commit before a change, e.g. `mkdir -p .ab/base && git archive HEAD~1 clconv | tar -x -C .ab/base`)
# and from the working tree, ROUNDS times each, every run in one shared cache directory (both
# trees render the same kernels, so only the first run builds).
#   bash docs/perf/tree_ab.sh BASE OUT ROUNDS LIST...      (from the repo root, after . .gpu/opencl-on-gpu.sh)
# OUT gets <list>-<base|work>-<round>.json; compare with `clconv bench --from-json` of each side.
set -u
base=${1:?BASE}; out=${2:?OUT}; rounds=${3:?ROUNDS}; shift 3
mkdir -p "$out"
out=$(cd "$out" && pwd)
cache=$(mktemp -d)
for round in $(seq "$rounds"); do
    for list in "$@"; do
        name=$(basename "$list" .txt | tr -c 'A-Za-z0-9_.\n-' '_')  # "shapes_vgg_11 --batch 8": a file name
        [ -e "$list" ] && list=$(realpath "$list")  # a file, read from the tree's own folder below
        for side in base work; do
            tree=$PWD; [ "$side" = base ] && tree=$(cd "$base" && pwd)
            start=$SECONDS
            # python -m imports clconv from the current folder first: run in the tree's own
            (cd "$tree" && CLCONV_CACHE_DIR=$cache timeout 300 \
                python3 -m clconv bench $list --quiet --json "$out/$name-$side-$round.json" > /dev/null 2>&1)
            echo "$name $side round $round: exit $? after $((SECONDS - start)) s, stream geomean" \
                "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['stream_geomean_ratio'])" \
                "$out/$name-$side-$round.json" 2>/dev/null)"
        done
    done
done
