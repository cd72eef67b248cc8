import time, sys, numpy as np
t0 = time.perf_counter()
import clconv, pyopencl.array as cla
q = clconv.default_queue()
rng = np.random.default_rng(0)
x = cla.to_device(q, rng.standard_normal((32, 128, 28, 28), dtype=np.float32))
w = cla.to_device(q, rng.standard_normal((128, 128, 3, 3), dtype=np.float32))
dy = cla.to_device(q, rng.standard_normal((32, 128, 28, 28), dtype=np.float32))
q.finish()
out = {}
for name, f in [("forward", lambda: clconv.conv2d(x, w, padding=1)),
                ("backward_data", lambda: clconv.conv2d_input(x.shape, w, dy, padding=1)),
                ("backward_weight", lambda: clconv.conv2d_weight(x, w.shape, dy, padding=1))]:
    t = time.perf_counter(); r = f(); q.finish(); out[name] = round(1e3 * (time.perf_counter() - t), 1)
print(sys.argv[1], "first call ms:", out, "builds:", clconv.builder.stats.source_builds if hasattr(clconv, "builder") else "")
