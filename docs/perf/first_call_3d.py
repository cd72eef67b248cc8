"""A 3D layer's first call in a fresh process (``clconv.conv3d`` on device arrays with default
arguments, timed from before the call to its result's event, the import and the arrays' upload left
out): cold (an empty cache directory), warm (the same directory in a new process), and a new
geometry (one more sample, the same directory).  `clconv bench --first-call` takes 2D layers only.

    CLCONV_CACHE_DIR=$(mktemp -d) python docs/perf/first_call_3d.py [DESCRIPTOR]
"""
import json
import subprocess
import sys

SCRIPT = r"""
import json, sys, time
import numpy as np
import pyopencl.array as cla
import clconv
from clconv.tools.shapes import parse_descriptor
g = parse_descriptor(sys.argv[1]).geometry
batch = g.batch + int(sys.argv[2])
q = clconv.default_queue()
rng = np.random.default_rng(0)
x = cla.to_device(q, rng.standard_normal((batch, *g.input_shape[1:])).astype(np.float32))
w = cla.to_device(q, rng.standard_normal(g.weight_shape).astype(np.float32))
q.finish()
t0 = time.perf_counter()
y = clconv.conv3d(x, w, stride=g.stride, padding=g.pad_begin, dilation=g.dilation)
y.finish()
print(json.dumps({"ms": (time.perf_counter() - t0) * 1e3}))
"""


def main() -> None:
    spec = sys.argv[1] if len(sys.argv) > 1 else "mb4ic128id8ih28oc288od8oh28kd1kh3pd0ph1"
    out = {"layer": spec}
    for name, extra in (("cold", 0), ("warm", 0), ("new_geometry", 1)):
        done = subprocess.run([sys.executable, "-c", SCRIPT, spec, str(extra)], capture_output=True, text=True, check=True)
        out[name + "_ms"] = json.loads(done.stdout.strip().splitlines()[-1])["ms"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
