# Sourced from the repo root by the A/B scripts run on the GPU machine (h100_floor512.sh,
# h100_epilogue_args.sh): the GPU's OpenCL environment, and
#   root              the repo root
#   tree SIDE         the PYTHONPATH that imports SIDE's clconv: "work" this tree, else .ab/SIDE
#                     (with docs/perf and the GPU machine's site folder); Python processes start in
#                     /tmp with it (from the repo root, python -m would import the root's clconv first)
#   merge_json GLOB FILE
#                     the JSON files GLOB matches as one JSON object (file name -> contents) in FILE:
#                     called after every run, so that a call cut short keeps what it measured
#   list_runs NAME [LIMIT]
#                     docs/perf/h200-NAME-layers.txt tuned and re-timed as `clconv tune` does
#                     (heuristic_retime.py fresh, at most LIMIT seconds: 300), then its stream of
#                     default calls against cuDNN (`clconv bench --check`), this tree: fresh-NAME.json,
#                     stream-NAME.json and their logs in $OUT
#   implicit_tiles NAME LIST [LIMIT]
#                     every GPU tile of the implicit GEMM's forward on shape list LIST
#                     (gemm_all_tiles.py --only implicit_gemm:forward, at most LIMIT seconds: 300), this
#                     tree: NAME.json and NAME.log in $OUT, and each layer's line
#   ab_rounds LIST FILE [LIMIT]
#                     `clconv bench LIST --check` with this tree and .ab/$BASE (base) alternating, ROUNDS
#                     rounds (2 by default), each run at most LIMIT seconds (150), a line a run; all
#                     runs' JSON merged into FILE
root=$PWD
. .gpu/opencl-on-gpu.sh  # (it sets a variable of its own named here)
tree() {
    if [ "$1" = work ]; then echo "$root:$root/docs/perf:$HOME/.gpu-site"
    else echo "$root/.ab/$1:$root/docs/perf:$HOME/.gpu-site"; fi
}
merge_json() {
    python3 -c "
import glob, json, os, sys
json.dump({os.path.basename(f): json.load(open(f)) for f in sorted(glob.glob(sys.argv[1]))}, open(sys.argv[2], 'w'))
" "$1" "$2"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
ab_rounds() {
    mkdir -p /tmp/s
    for i in $(seq ${ROUNDS:-2}); do for side in work ${BASE:-base}; do
        start=$SECONDS
        PYTHONPATH=$(tree $side) CLCONV_CACHE_DIR=/tmp/cache-$side timeout ${3:-150} python3 -m clconv bench $1 \
            --check --quiet --json /tmp/s/changed-$side-$i.json > /tmp/s/changed-$side-$i.txt 2>&1
        echo "changed $side $i: exit $? after $((SECONDS - start)) s: $(grep -iE 'geometric mean|stream of default' /tmp/s/changed-$side-$i.txt | cut -c1-110 | tr '\n' ' ')"
        merge_json "/tmp/s/changed-*.json" "$2"
    done; done
}
list_runs() {
    local list=$root/docs/perf/h200-$1-layers.txt
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cw timeout ${2:-300} python3 $root/docs/perf/heuristic_retime.py fresh $list \
        $OUT/fresh-$1.json --processes 8 > $OUT/fresh-$1.log 2>&1; echo "fresh exit $?"
    PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/cw timeout 150 python3 -m clconv bench $list --check \
        --json $OUT/stream-$1.json > $OUT/stream-$1.log 2>&1; echo "bench exit $?"
    tail -2 $OUT/fresh-$1.log; tail -4 $OUT/stream-$1.log
}
implicit_tiles() {
    (cd /tmp && PYTHONPATH=$(tree work) CLCONV_CACHE_DIR=/tmp/ct timeout ${3:-300} python3 $root/docs/perf/gemm_all_tiles.py \
        --only implicit_gemm:forward $OUT/$1.json $2 > $OUT/$1.log 2>&1
    echo "tiles exit $?"; grep "tiles, chosen" $OUT/$1.log)
}
