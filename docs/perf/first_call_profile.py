"""Where a new geometry's first call spends its time (issue 12's "under 0.5 s on the H200").

Three fresh processes share one cache directory: the first warms it (templates compiled, the
layer's programs built), the second calls the same layer (warm), the third a new geometry (one
more image: new programs from compiled templates) under cProfile.  Any rank: the layer's own
op (conv1d, conv2d or conv3d), its padding and dilation.  Prints the third's wall time
split into rendering, building and the rest, and the functions with the most cumulative time.

    python docs/perf/first_call_profile.py [DESCRIPTOR] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import cProfile, io, json, pstats, sys, time
t0 = time.perf_counter()
import numpy as np, pyopencl as cl, pyopencl.array as cla, clconv
from clconv import builder, templates
from clconv.tools.first_call import call_options
from clconv.tools.shapes import parse_descriptor
g = parse_descriptor(sys.argv[1]).geometry
batch = g.input_shape[0] + int(sys.argv[2])
q = clconv.default_queue()
rng = np.random.default_rng(0)
x = cla.to_device(q, rng.standard_normal((batch, *g.input_shape[1:])).astype(np.float32))
w = cla.to_device(q, rng.standard_normal(g.weight_shape).astype(np.float32))
q.finish()
t_import = time.perf_counter() - t0

# time spent in rendering and in the driver's compiler, wrapped around the functions that do them
spent = {"render": 0.0, "build": 0.0, "load_binary": 0.0}
def timed(owner, name, key):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - t
    setattr(owner, name, wrapper)
timed(templates, "render", "render")
timed(builder.ProgramCache, "_build", "build")
timed(builder.ProgramCache, "_load", "load_binary")

# the layer's own op (conv1d/2d/3d by its rank) with its stride, padding and dilation
options = call_options(g)
op = getattr(clconv, f"conv{options.pop('ndim')}d")
profile = cProfile.Profile()
t = time.perf_counter()
profile.enable()
y = op(x, w, **options)
q.finish()
profile.disable()
first = time.perf_counter() - t
t = time.perf_counter()
y = op(x, w, **options)
q.finish()
second = time.perf_counter() - t
text = io.StringIO()
pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(35)
print(json.dumps({"batch": batch, "import_and_setup_s": t_import, "first_call_s": first,
                  "second_call_s": second, **{k + "_s": v for k, v in spent.items()},
                  "source_builds": builder.stats.source_builds, "disk_hits": builder.stats.disk_hits,
                  "profile": text.getvalue()}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("descriptor", nargs="?", default="mb32ic64ih56oc64oh56kh3ph1")
    parser.add_argument("--json")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="clconv-firstcall-profile-") as cache:
        env = dict(os.environ, CLCONV_CACHE_DIR=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for name, extra in (("cold", 0), ("warm", 0), ("new_geometry", 1)):
            out = subprocess.run([sys.executable, "-c", _CHILD, args.descriptor, str(extra)], env=env,
                                 capture_output=True, text=True, check=True)
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    for name, r in results.items():
        print(f"{name:13s} first call {1e3 * r['first_call_s']:7.1f} ms (render {1e3 * r['render_s']:6.1f}, "
              f"build {1e3 * r['build_s']:6.1f}, binary loads {1e3 * r['load_binary_s']:6.1f}; "
              f"{r['source_builds']} built, {r['disk_hits']} from disk); second call {1e3 * r['second_call_s']:.2f} ms")
    print(results["new_geometry"]["profile"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
