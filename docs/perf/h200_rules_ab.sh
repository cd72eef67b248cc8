#!/usr/bin/env bash
# A/B of GPU heuristic rules (issue 12): clconv bench's stream and kernel columns on shape files, this
# checkout against an older clconv tree (git archive REV clconv | tar -x -C .ab/NAME, carried to the
# GPU), alternating, each in a fresh cache, with the float64 check.  From the repo root after
# `. .gpu/opencl-on-gpu.sh`:
#   bash docs/perf/h200_rules_ab.sh OUT BASE_TREE RUNS SHAPE_FILE...
set -u
out=${1:?OUT}; base=${2:?BASE_TREE}; runs=${3:?RUNS}; shift 3
here=$PWD
for run in $(seq "$runs"); do
    for side in work base; do
        tree=$here; [ "$side" = base ] && tree=$here/$base
        for file in "$@"; do
            name=$(basename "$file" .txt)
            (cd "$tree" && PYTHONPATH=$tree${PYTHONPATH:+:$PYTHONPATH} CLCONV_CACHE_DIR=$(mktemp -d) timeout 150 \
                python3 -m clconv bench "$here/$file" --check --quiet --json "$out/$name-$side-$run.json" \
                > "$out/$name-$side-$run.txt" 2>&1)
            echo "$name $side $run: exit $?"; grep -iE "geometric|stream of default" "$out/$name-$side-$run.txt"
        done
    done
done
