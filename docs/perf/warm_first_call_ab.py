"""A/B of the warm first call (a new process, every program in the disk cache) between two clconv
trees, in alternating processes on one host: absolute first-call times wander from host to host
and from process to process, their medians over alternating runs much less.

    python docs/perf/warm_first_call_ab.py BASE_TREE WORK_TREE [ROUNDS] [LAYER]

Each tree is a folder holding a ``clconv/`` package (e.g. ``.ab/base`` from
``git archive REV clconv | tar -x -C .ab/base``, and ``.`` for the working tree).  Both share one
cache directory, so the first process of each tree builds and the rest load; the first process of
each side is left out.  Prints each side's first-call times and the medians, in ms."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from clconv.tools.first_call import _FIRST_CALL_SCRIPT, DEFAULT_LAYER, call_options  # noqa: E402
from clconv.tools.shapes import resolve_layers  # noqa: E402


def main() -> None:
    base, work = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    g = resolve_layers(sys.argv[4] if len(sys.argv) > 4 else DEFAULT_LAYER)[0].geometry
    # the same script as `clconv bench --first-call` runs (its rank, stride, padding and dilation)
    script = _FIRST_CALL_SCRIPT % {"x": g.input_shape, "w": g.weight_shape, **call_options(g)}
    times: dict[str, list[float]] = {"base": [], "work": []}
    with tempfile.TemporaryDirectory(prefix="clconv-warm-ab-") as cache:
        env = dict(os.environ, CLCONV_CACHE_DIR=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode files, as an installed package has them
        env.pop("CLCONV_NO_CACHE", None)
        for round_ in range(rounds + 1):
            for side, tree in (("base", base), ("work", work)):
                path = os.pathsep.join(filter(None, [os.path.abspath(tree), env.get("PYTHONPATH")]))
                done = subprocess.run([sys.executable, "-c", script], env=dict(env, PYTHONPATH=path),
                                      cwd=os.path.abspath(tree), capture_output=True, text=True, check=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                if round_ == 0:  # builds (or loads the other tree's builds) and writes bytecode
                    continue
                times[side].append(result["first_call_s"] * 1e3)
    print(f"layer {g.tag()}, warm first call in ms over {rounds} alternating processes per tree")
    for side, values in times.items():
        print(f"  {side}: median {statistics.median(values):7.2f}  runs {' '.join(f'{v:.1f}' for v in values)}")


if __name__ == "__main__":
    main()
