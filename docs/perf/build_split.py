"""Where a new geometry's build time goes on a GPU: each program of the default plan of a 3x3 layer
(Winograd: the transforms' program and the GEMM's) built alone, each entry point of a program
built as its own program, then all of them side by side on threads, every source salted so no
compiler cache answers (NVIDIA's driver caches by source).

    python docs/perf/build_split.py [DESCRIPTOR]        on the GPU machine
"""
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyopencl as cl

import clconv
from clconv import planner, templates
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor


def build(context, device, text):
    salted = f"// {uuid.uuid4().hex}\n{text}"
    start = time.perf_counter()
    cl.Program(context, salted).build(devices=[device])
    return time.perf_counter() - start


def main():
    descriptor = sys.argv[1] if len(sys.argv) > 1 else "mb33ic64ih56oc64oh56kh3ph1"
    q = clconv.default_queue()
    problem = Problem(parse_descriptor(descriptor).geometry, "forward", "float32")
    algorithm, config = planner.candidates(problem, q.device)[0]
    plan = algorithm.plan(problem, config, q.device)
    sources, _ = templates.render_plan(plan)
    whole = [s.text for s in sources]
    split = [templates.render(s.template, [entry], **next(c.source.params for c in plan.calls if c.entry == entry))
             for s in sources for entry in s.entries]
    print(f"{descriptor}: {algorithm.name} {config}")
    for name, texts in (("programs", whole), ("one per entry", split)):
        alone = [build(q.context, q.device, t) for t in texts]
        start = time.perf_counter()
        with ThreadPoolExecutor(len(texts)) as pool:
            list(pool.map(lambda t: build(q.context, q.device, t), texts))
        side = time.perf_counter() - start
        print(f"{name:14s} alone " + " ".join(f"{t * 1e3:6.0f}" for t in alone)
              + f" ms (sum {sum(alone) * 1e3:.0f}); side by side {side * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
