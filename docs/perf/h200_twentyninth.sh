#!/usr/bin/env bash
# The twenty-ninth session's GPU calls (issue 12): a list written before it was measured (the
# eleventh, h200-eleventh-layers.txt; NAME=X for docs/perf/h200-X-layers.txt) tuned, every GEMM tile
# of the heuristic's algorithm timed, and its stream of default calls against cuDNN; the suite on
# the GPU; a training loop's steps while the builds run, per count of build threads.
# Run from the repo root after `. .gpu/opencl-on-gpu.sh`:
#   [NAME=pointwise-small] bash docs/perf/h200_twentyninth.sh OUT PART...   PART: steps tune tiles stream tests
set -u
out=${1:?OUT}; shift
here=$PWD
# TREE=DIR: a folder holding another clconv package, imported before this checkout's (an A/B run)
export PYTHONPATH=${TREE:+$TREE:}$here/docs/perf:$here${PYTHONPATH:+:$PYTHONPATH}
NAME=${NAME:-eleventh}
LIST=docs/perf/h200-$NAME-layers.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/smi.txt" 2>&1
for part in "$@"; do
    start=$SECONDS
    case $part in
        steps)   # a training loop's first 40 steps while the builds run, per count of build threads
            timeout ${STEPS_S:-200} python3 docs/perf/interim_first_calls.py --steps 40 --only-steps \
                --threads ${THREADS:-1,2,4,8,16} --json "$out/steps.json" > "$out/steps.txt" 2>&1
            echo "steps: exit $?"; cat "$out/steps.txt" | cut -c1-400 ;;
        tune)    # every candidate's kernel time (what `clconv tune` stores), in a fresh cache
            CLCONV_CACHE_DIR=$(mktemp -d) timeout ${TUNE_S:-420} python3 -m clconv tune $LIST --force --quiet \
                --json "$out/tune-$NAME.json" > "$out/tune.txt" 2>&1
            echo "tune: exit $?" ;;
        tiles)   # every GEMM tile of the heuristic's algorithm
            CLCONV_CACHE_DIR=$(mktemp -d) timeout ${TILES_S:-300} python3 docs/perf/gemm_all_tiles.py \
                "$out/all-tiles-$NAME.json" $LIST > "$out/tiles.txt" 2>&1
            echo "tiles: exit $?"; tail -2 "$out/tiles.txt" ;;
        stream)  # the default path's stream against cuDNN (no tuning database)
            CLCONV_CACHE_DIR=$(mktemp -d) timeout ${STREAM_S:-200} python3 -m clconv bench $LIST --check --quiet \
                --json "$out/stream-$NAME.json" > "$out/stream.txt" 2>&1
            echo "stream: exit $?"; grep -iE "geometric|stream of default" "$out/stream.txt" ;;
        tests)   # the suite on the GPU (Oclgrind's own device left out), in a fresh cache
            CLCONV_CACHE_DIR=$(mktemp -d) timeout ${TESTS_S:-300} python3 -m pytest -q -n 14 -p no:cacheprovider \
                tests/unit tests/algorithms tests/reliability --deselect tests/reliability/test_oclgrind.py \
                > "$out/tests.txt" 2>&1
            echo "tests: exit $?"; grep -E "passed|failed|error" "$out/tests.txt" | tail -3 ;;
        *) echo "unknown part $part" >&2; exit 2 ;;
    esac
    echo "== $part: $((SECONDS - start)) s"
done
