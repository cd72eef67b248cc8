#!/usr/bin/env bash
# The thirty-first session's GPU call (issue 12): split-K in one launch against two.
#  1. docs/perf/splitk_one_launch.py on the two small 1x1 lists and the GPU set: every layer-pass
#     split-K serves with a GPU tile, one launch against two, bit for bit and kernel time, and the
#     fence NVIDIA's compiler emitted ($OUT/one-launch.json);
#  2. the one-launch and split-K tests on the GPU;
#  3. the two small 1x1 lists' streams of default calls against cuDNN, alternating, twice
#     ($OUT/streams.json): "new", this tree with limits.NVIDIA_HANDOFF = True (.ab/new/clconv), against
#     "base", this tree with SplitK.ONE_LAUNCH = False (.ab/base/clconv).
# Steps 1 and 2 run the .ab/new tree too.  Run from the repo root on the GPU machine, .gpu and .ab carried:
#   [SETS=gpu ROUNDS=3 STREAM_ROUNDS=2 STEPS="one tests streams"] bash docs/perf/h100_one_launch.sh
#   (SETS= leaves the GPU set out; STEPS names the steps to run)
# Every Python process starts in /tmp with absolute paths: started in the repo root, Python puts the
# root first on sys.path, and the root's clconv would shadow the trees PYTHONPATH names (the thirty-
# first session's copy of this script ran its tests and both sides of its streams from the root's
# tree so).  Each step prints which clconv it imported.
root=$PWD
. .gpu/opencl-on-gpu.sh  # (it sets a variable of its own named here)
tree() { echo "$root/.ab/$1:$root:$root/docs/perf:$HOME/.gpu-site"; }
imported() { (cd /tmp && PYTHONPATH=$(tree $1) python3 -c "import clconv; from clconv import limits; from clconv.algorithms.splitk import SplitK; print('$1:', clconv.__file__, 'NVIDIA_HANDOFF', limits.NVIDIA_HANDOFF, 'ONE_LAUNCH', SplitK.ONE_LAUNCH)"); }
imported new; imported base
steps=${STEPS:-one tests streams}
if [[ " $steps " == *" one "* ]]; then
(cd /tmp && PYTHONPATH=$(tree new) timeout 200 python3 $root/docs/perf/splitk_one_launch.py $OUT/one-launch.json $root/docs/perf/h200-pointwise-small-layers.txt $root/docs/perf/h200-strided-small-layers.txt ${SETS-gpu} --rounds ${ROUNDS:-3} > /tmp/one.txt 2>&1); echo "one-launch exit $?"
python3 -c "
import json; d=json.load(open('$OUT/one-launch.json')); s=d['summary']; print({k: s[k] for k in s})
for r in d['rows']:
    if r['rule_one_launch'] or r['heuristic_splitk']: print(r['layer'][:36], r['pass'][:8], r['config']['splits'], round(r['ratio'],3), 'H' if r['heuristic_splitk'] else '', 'R' if r['rule_one_launch'] else '')
"
fi
[[ " $steps " == *" tests "* ]] && \
(cd /tmp && PYTHONPATH=$(tree new) CLCONV_CACHE_DIR=$(mktemp -d) timeout 120 python3 -m pytest -x -q -p no:cacheprovider -rs --rootdir $root $root/tests/algorithms/test_gemm_configs.py -k "one_launch or splitk" $root/tests/unit/test_plans.py 2>&1 | tail -4)
[[ " $steps " == *" streams "* ]] || exit 0
mkdir -p /tmp/s
for i in $(seq ${STREAM_ROUNDS:-2}); do for name in pointwise-small strided-small; do for side in new base; do
  (cd /tmp && PYTHONPATH=$(tree $side) CLCONV_CACHE_DIR=$(mktemp -d) timeout 100 python3 -m clconv bench $root/docs/perf/h200-$name-layers.txt --check --quiet --json /tmp/s/$name-$side-$i.json > /tmp/s/$name-$side-$i.txt 2>&1)
  echo "$name $side $i: $(grep -iE 'stream of default' /tmp/s/$name-$side-$i.txt | cut -c1-140)"
  python3 -c "
import json, glob, os
json.dump({os.path.basename(f): json.load(open(f)) for f in sorted(glob.glob('/tmp/s/*.json'))}, open('$OUT/streams.json', 'w'))
"  # after every run: a call cut short keeps what it measured
done; done; done
