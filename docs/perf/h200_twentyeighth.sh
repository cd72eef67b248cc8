#!/usr/bin/env bash
# The twenty-eighth session's GPU calls (issue 12): the ninth list (h200-ninth-layers.txt, written
# before it was measured) tuned, every GEMM tile of the heuristic's algorithm timed, and its stream
# of default calls against cuDNN.  Run from the repo root after `. .gpu/opencl-on-gpu.sh`:
#   bash docs/perf/h200_twentyeighth.sh OUT PART...   PART: tune tiles stream
set -u
out=${1:?OUT}; shift
here=$PWD
export PYTHONPATH=$here/docs/perf:$here${PYTHONPATH:+:$PYTHONPATH}
LIST=docs/perf/h200-ninth-layers.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/smi.txt" 2>&1
for part in "$@"; do
    start=$SECONDS
    case $part in
        tune)    # every candidate's kernel time (what `clconv tune` stores), in a fresh cache
            CLCONV_CACHE_DIR=$(mktemp -d) timeout ${TUNE_S:-420} python3 -m clconv tune $LIST --force --quiet \
                --json "$out/tune-ninth.json" > "$out/tune.txt" 2>&1
            echo "tune: exit $?" ;;
        tiles)   # every GEMM tile of the heuristic's algorithm
            CLCONV_CACHE_DIR=$(mktemp -d) timeout ${TILES_S:-300} python3 docs/perf/gemm_all_tiles.py \
                "$out/all-tiles-ninth.json" $LIST > "$out/tiles.txt" 2>&1
            echo "tiles: exit $?"; tail -2 "$out/tiles.txt" ;;
        stream)  # the default path's stream against cuDNN (no tuning database)
            CLCONV_CACHE_DIR=$(mktemp -d) timeout ${STREAM_S:-200} python3 -m clconv bench $LIST --check --quiet \
                --json "$out/stream-ninth.json" > "$out/stream.txt" 2>&1
            echo "stream: exit $?"; grep -iE "geometric|stream of default" "$out/stream.txt" ;;
        *) echo "unknown part $part" >&2; exit 2 ;;
    esac
    echo "== $part: $((SECONDS - start)) s"
done
