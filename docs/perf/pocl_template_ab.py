"""A kernel template's old text against the working tree's, on the first candidates of shape lists,
timed against each other in one process (PoCL or any device).

A template change that leaves every choice alone (a code-generation fix) shows only in kernel time:
this renders each layer-pass's first candidate twice, with the old template first on the search path
(``CLCONV_TEMPLATE_PATH``, which the runner cache keys on) and without, skips those whose sources
come out the same, and times the rest interleaved (the minimum over ROUNDS rounds of 5 runs each).

    mkdir -p /tmp/old && git show HEAD:clconv/kernels/gemm_cpu.mako > /tmp/old/gemm_cpu.mako
    cd /tmp && PYTHONPATH=REPO POCL_MAX_PTHREAD_COUNT=2 ROUNDS=4 \
        python REPO/docs/perf/pocl_template_ab.py /tmp/old PASSES LIST...

(PASSES: comma-separated; LIST: a named set, a shape file or descriptors, as ``clconv bench`` takes.)
"""
import math
import os
import sys

import clconv
from clconv import planner, templates
from clconv.plan import Problem
from clconv.runtime import profiling_queue, random_operands
from clconv.tools import shapes
from pocl_winograd_vs_im2col import fastest  # docs/perf/, beside this script


def runner_with(template_dir: str | None, problem, algorithm, config, queue):
    """The runner and its rendered sources with ``template_dir`` first on the search path (or none)."""
    if template_dir:
        os.environ["CLCONV_TEMPLATE_PATH"] = template_dir
    else:
        os.environ.pop("CLCONV_TEMPLATE_PATH", None)
    plan = algorithm.plan(problem, config, queue.device)
    texts = [source.text for source in templates.render_plan(plan)[0]]
    return planner.prepare(problem, algorithm, config, queue), texts


def main(old_dir: str, passes: str, specs: list[str]) -> None:
    queue = profiling_queue(clconv.default_queue())
    ratios = []
    for spec in specs:
        for layer in shapes.resolve_layers(spec, None):
            for pass_ in passes.split(","):
                problem = Problem(layer.geometry, pass_, "float32")
                algorithm, config = planner.candidates(problem, queue.device)[0]
                old, old_texts = runner_with(old_dir, problem, algorithm, config, queue)
                new, new_texts = runner_with(None, problem, algorithm, config, queue)
                if old_texts == new_texts:
                    continue
                best = fastest([("old", old), ("new", new)], queue, random_operands(problem, queue))
                ratios.append(best["new"] / best["old"])
                name = layer.descriptor or layer.geometry.tag()
                print(f"{name[:40]:40s} {pass_[:8]:8s} old {best['old']:7.3f} ms  new {best['new']:7.3f} ms  "
                      f"new/old {ratios[-1]:.3f}  {algorithm.name} {config}", flush=True)
    if ratios:
        print(f"{len(ratios)} layer-passes changed; new/old geometric mean "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} (best {min(ratios):.3f}, worst {max(ratios):.3f})")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
