#!/usr/bin/env bash
# The twenty-sixth session's H200 calls (issue 12): the suite on the GPU, then sessions 24-25's
# changes measured against the tree they started from (4bbb6c8, unpacked by
#   mkdir -p .ab/gpubase && git archive 4bbb6c8 clconv | tar -x -C .ab/gpubase
# and carried).  Run from the repo root after `. .gpu/opencl-on-gpu.sh`:
#   bash docs/perf/h200_twentysixth.sh OUT PART...   PART: tests small streams
set -u
out=${1:?OUT}; shift
here=$PWD; base=$here/.ab/gpubase
export PYTHONPATH=$here/docs/perf${PYTHONPATH:+:$PYTHONPATH}
DQN="mb32ic32ih20oc64oh9kh4sh2ph0 mb32ic4ih84oc32oh20kh8sh4ph0"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv > "$out/smi.txt" 2>&1
for part in "$@"; do
    start=$SECONDS
    case $part in
        tests)   # the suite on the GPU (Oclgrind's own device left out), in a fresh cache
            CLCONV_CACHE_DIR=$(mktemp -d) PYTHONPATH=$here:$PYTHONPATH timeout 330 python3 -m pytest -q -n 14 \
                -p no:cacheprovider tests/unit tests/algorithms tests/reliability \
                --deselect tests/reliability/test_oclgrind.py > "$out/tests.txt" 2>&1
            echo "tests: exit $?"; grep -E "passed|failed|error" "$out/tests.txt" | tail -3 ;;
        small)   # the op layer on the DQN's layers, the old tree then this one, twice; the DQN bench
            for run in 1 2; do for side in base work; do tree=$here; [ $side = base ] && tree=$base
                (cd "$tree" && PYTHONPATH=$tree:$PYTHONPATH CLCONV_CACHE_DIR=/tmp/cache-$side timeout 60 \
                    python3 "$here/docs/perf/stream_split.py" $DQN > "$out/split-$side-$run.txt" 2>&1)
                echo "split $side $run: exit $?"; done; done
            for side in base work; do tree=$here; [ $side = base ] && tree=$base
                (cd "$tree" && PYTHONPATH=$tree:$PYTHONPATH CLCONV_CACHE_DIR=$(mktemp -d) timeout 90 \
                    python3 -m clconv bench $DQN --check --quiet --json "$out/dqn-$side.json" > "$out/dqn-$side.txt" 2>&1)
                echo "dqn $side: exit $?"; grep -iE "geometric|stream of default" "$out/dqn-$side.txt"; done
            CLCONV_CACHE_DIR=$(mktemp -d) PYTHONPATH=$here:$PYTHONPATH timeout 120 python3 docs/perf/first_call_profile.py \
                --json "$out/first_call_profile.json" > "$out/first_call.txt" 2>&1
            grep -E "^(cold|warm|new_geometry)" "$out/first_call.txt" ;;
        streams) # the GPU set, the old tree and this one alternating; then the seventh list with this one
            for run in $(seq ${RUNS:-2}); do for side in work base; do tree=$here; [ $side = base ] && tree=$base
                (cd "$tree" && PYTHONPATH=$tree:$PYTHONPATH CLCONV_CACHE_DIR=$(mktemp -d) timeout 120 \
                    python3 -m clconv bench gpu --quiet --json "$out/gpu-$side-$run.json" > "$out/gpu-$side-$run.txt" 2>&1)
                echo "gpu $side $run: exit $? $((SECONDS - start)) s"; grep -iE "geometric|stream of default" "$out/gpu-$side-$run.txt"; done; done
            CLCONV_CACHE_DIR=$(mktemp -d) PYTHONPATH=$here:$PYTHONPATH timeout 150 python3 -m clconv bench \
                docs/perf/h200-seventh-layers.txt --check --quiet --json "$out/seventh.json" > "$out/seventh.txt" 2>&1
            echo "seventh: exit $?"; grep -iE "geometric|stream of default" "$out/seventh.txt" ;;
        *) echo "unknown part $part" >&2; exit 2 ;;
    esac
    echo "== $part: $((SECONDS - start)) s"
done
