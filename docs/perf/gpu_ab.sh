# Sourced from the repo root by the A/B scripts run on the GPU machine (h100_floor512.sh,
# h100_epilogue_args.sh): the GPU's OpenCL environment, and
#   root              the repo root
#   tree SIDE         the PYTHONPATH that imports SIDE's clconv: "work" this tree, else .ab/SIDE
#                     (with docs/perf and the GPU machine's site folder); Python processes start in
#                     /tmp with it (from the repo root, python -m would import the root's clconv first)
#   merge_json GLOB FILE
#                     the JSON files GLOB matches as one JSON object (file name -> contents) in FILE:
#                     called after every run, so that a call cut short keeps what it measured
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
