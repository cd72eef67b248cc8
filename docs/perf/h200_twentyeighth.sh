#!/usr/bin/env bash
# The twenty-eighth session's GPU calls (issue 12): the ninth list (h200-ninth-layers.txt; NAME=tenth
# for h200-tenth-layers.txt) tuned, every GEMM tile of the heuristic's algorithm timed, its stream of
# default calls against cuDNN; the suite on the GPU.  The same parts as the twenty-ninth session's
# script, which runs them (and more), with the ninth list by default.
# Run from the repo root after `. .gpu/opencl-on-gpu.sh`:
#   [NAME=tenth] bash docs/perf/h200_twentyeighth.sh OUT PART...   PART: tune tiles stream tests
NAME=${NAME:-ninth} exec bash "$(dirname "$0")/h200_twentyninth.sh" "$@"
