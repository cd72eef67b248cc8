"""Native half arithmetic against clconv's float16 storage with float32 sums, on a device with
cl_khr_fp16 (issue #13: "native half arithmetic only where the device has cl_khr_fp16 and
measurement says it wins").  Kernel-event ms of the heuristic's runner per layer:

* float32;
* float16 storage, float32 sums (what clconv runs: vload_half / vstore_half_rte);
* float16 with `half` as the arithmetic type: products and sums in half, native `half` loads and
  stores, from the built-in prelude.mako patched into a temporary CLCONV_TEMPLATE_PATH.

    OCL_ICD_VENDORS=... LD_LIBRARY_PATH=... CLCONV_DEVICE="Intel(R) OpenCL" python docs/perf/half_arithmetic.py

An experiment, not a clconv mode: half sums lose 11-bit precision over the whole reduction.
"""

import os
import pathlib
import tempfile

import clconv
from clconv import dtypes, planner, runtime
from clconv.plan import Problem
from clconv.resolve import resolve_conv
from clconv.templates import builtin_template_dir

LAYERS = [("depthwise 3x3 64ch 28x28 batch 4", 4, 64, 28, 64, 3, 1, 1, 64),
          ("3x3 64->64 28x28 batch 2", 2, 64, 28, 64, 3, 1, 1, 1)]


def half_prelude(folder: pathlib.Path) -> None:
    text = (builtin_template_dir() / "prelude.mako").read_text()
    edits = [('% if real == "double":\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n% endif',
              '% if real == "double":\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n% endif\n'
              '% if real == "half":\n#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n% endif'),
             ('% if data == "float16":\n/* vload_half',
              '% if data == "float16" and real == "half":\n#define clc_ld(p, i) ((p)[i])\n'
              '#define clc_st(p, i, v) ((p)[i] = (v))\n% elif data == "float16":\n/* vload_half'),
             ('% elif data == "float16":\nvload_half', '% elif data == "float16" and real != "half":\nvload_half'),
             ('% elif data == "float16":\nvstore_half', '% elif data == "float16" and real != "half":\nvstore_half')]
    for old, new in edits:
        assert old in text, f"prelude.mako changed: update this experiment ({old[:40]!r})"
        text = text.replace(old, new)
    (folder / "prelude.mako").write_text(text)


def kernel_ms(queue, problem) -> tuple[str, float]:
    algorithm, config = planner.candidates(problem, queue.device)[0]
    runner = planner.prepare(problem, algorithm, config, queue)
    profiling = runtime.profiling_queue(queue)
    return planner.label(algorithm, config), 1e3 * runtime.time_runner(
        runner, profiling, runtime.random_operands(problem, profiling), 5)


def main() -> None:
    queue = clconv.default_queue()
    print(queue.device.name, "cl_khr_fp16" in queue.device.extensions)
    rows = []
    for name, n, c, size, o, k, s, p, groups in LAYERS:
        g = resolve_conv(2, (n, c, size, size), (o, c // groups, k, k), None, s, p, 1, groups).geometry
        rows.append([name, kernel_ms(queue, Problem(g, "forward", "float32")),
                     kernel_ms(queue, Problem(g, "forward", "float16"))])
    with tempfile.TemporaryDirectory() as folder:
        half_prelude(pathlib.Path(folder))
        os.environ["CLCONV_TEMPLATE_PATH"] = folder
        dtypes.STORAGE["float16"] = dtypes.Storage("half", 2, "half", 2.0 ** -10)
        for row, (_name, n, c, size, o, k, s, p, groups) in zip(rows, LAYERS):
            g = resolve_conv(2, (n, c, size, size), (o, c // groups, k, k), None, s, p, 1, groups).geometry
            row.append(kernel_ms(queue, Problem(g, "forward", "float16")))
    for name, f32, f16, h16 in rows:
        print(f"{name:34s} {f32[0]:40s} float32 {f32[1]:.3f}  float16/float sums {f16[1]:.3f}  "
              f"half arithmetic {h16[1]:.3f} ms ({h16[1] / f16[1]:.2f}x)")


if __name__ == "__main__":
    main()
