"""The GEMM core's variants on GEMM-shaped layers: tiles x TK x the work-item arrangement (LANES:
0 = the local id, 8 or 4 = each 32-wide SIMD group a 4 x 8 or 8 x 4 block) x NVIDIA's register
cap (-cl-nv-maxrregcount), kernel time and TFLOP/s of the convolution's direct FLOPs, beside
cuBLAS SGEMM of the 1x1 layer's shape (TF32 off).  Also writes the ptxas report (registers,
spills) of each variant of the 1x1 layer and the PTX of two of them to DIR.

    python docs/perf/gemm_variants.py DIR        (on the GPU machine)
"""
import json
from itertools import product
import os
import sys
import time
from pathlib import Path

import pyopencl as cl
import torch
from winograd_configs import cuda_ms  # docs/perf/, beside this script

import clconv
from clconv import builder, planner, runtime, templates
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import TILE_KEYS
from clconv.plan import Problem
from clconv.resolve import resolve_conv

LAYERS = [  # (algorithm, pass, input shape, weight shape, padding)
    ("gemm1x1", "forward", (64, 1024, 28, 28), (1024, 1024, 1, 1), 0),  # issue 12's GEMM-shaped layer
    ("implicit_gemm", "forward", (32, 64, 56, 56), (64, 64, 3, 3), 1),
    ("winograd", "forward", (32, 128, 28, 28), (128, 128, 3, 3), 1),
    ("implicit_gemm", "backward_weight", (32, 256, 14, 14), (256, 256, 3, 3), 1),
]
TILES = [  # TM, TN, WM, WN, VW (TK and LANES swept)
    (128, 128, 8, 8, 4),
    (128, 64, 8, 4, 4),
    (64, 128, 8, 8, 4),
    (64, 64, 8, 8, 4),
    (128, 32, 8, 4, 4),
][:int(os.environ.get("TILES", "5"))]
OPTIONS = ("", "-cl-nv-maxrregcount 128")  # the cap only on the first layer
PIPES = (1, 2)  # 2: the next step's loads behind a branch, as before 2026-12-02 (temporary, for the A/B)


def lanes_fit(tm, tn, wm, wn, lanes):
    rtm, rtn = tm // wm, tn // wn
    return lanes == 0 or ((rtm * rtn) % 32 == 0 and rtn % lanes == 0 and rtm % (32 // lanes) == 0)


def with_options(options):
    """builder.build_program with ``options`` appended (part of the program cache's key)."""
    original = builder.build_program

    def build_program(queue, source, extra="", label="kernel"):
        return original(queue, source, f"{extra} {options}".strip(), label)
    return build_program


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    q = clconv.default_queue()
    prof = runtime.profiling_queue(q)
    nvidia = "NVIDIA" in q.device.platform.name
    cublas = None
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = False
        a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 64 * 784, device="cuda")
        cublas = cuda_ms(lambda: a @ b)
        print(f"cuBLAS SGEMM 1024 x 50176 x 1024: {cublas:.3f} ms, {2 * 1024 * 1024 * 50176 / cublas / 1e9:.1f} TFLOP/s")
    original = builder.build_program
    rows, reports = [], []
    for index, (name, pass_, x_shape, w_shape, pad) in enumerate(LAYERS):
        g = resolve_conv(2, x_shape, w_shape, None, 1, pad, 1, 1).geometry
        problem = Problem(g, pass_, "float32")
        algorithm = REGISTRY[name]
        base = algorithm.configs(problem, q.device)[0]
        print(f"{name} {pass_} {x_shape} -> {w_shape[0]}; the default config {base}")
        results = []
        for tm, tn, wm, wn, vw in TILES:
            for tk in (16, 32):
                for lanes, pipe in product((0, 8), PIPES):
                    if not lanes_fit(tm, tn, wm, wn, lanes):
                        continue
                    for options in (OPTIONS if index == 0 and nvidia else ("",)):
                        tile = dict(zip(TILE_KEYS, (tm, tn, tk, wm, wn, vw, pipe, lanes)))
                        builder.build_program = with_options(options)
                        try:
                            plan = algorithm.plan(problem, {**base, **tile}, q.device)
                            start = time.perf_counter()
                            runner = planner.build(plan, q)
                            built = time.perf_counter() - start
                            ops = runtime.random_operands(problem, prof)
                            ms = 1e3 * runtime.time_runner(runner, prof, ops, 10)
                        except Exception as exc:  # noqa: BLE001 - a variant the device refuses
                            print(f"   {tile} {options}: {type(exc).__name__}: {str(exc)[:120]}")
                            continue
                        finally:
                            builder.build_program = original
                        results.append(((tm, tn, tk, wm, wn, pipe, lanes, options), ms, built))
                        if index == 0 and nvidia:
                            reports.append(ptxas_report(q, plan, tile, options, out))
                            print(reports[-1], flush=True)
        for (tm, tn, tk, wm, wn, pipe, lanes, options), ms, built in sorted(results, key=lambda r: r[1]):
            print(f"   {tm:3d}x{tn:<3d} TK {tk:2d} {wm}x{wn} PIPE {pipe} LANES {lanes} {options:25s} {ms:.4f} ms "
                  f"{g.flops / ms / 1e9:5.1f} TFLOP/s  (built in {built:.2f} s)", flush=True)
            rows.append({"layer": f"{name} {pass_} {x_shape} {w_shape}", "tile": [tm, tn, tk, wm, wn], "pipe": pipe,
                         "lanes": lanes, "options": options, "ms": ms, "tflops": g.flops / ms / 1e9})
        (out / "gemm-variants.json").write_text(json.dumps({"cublas_ms": cublas, "rows": rows, "ptxas": reports},
                                                           indent=1))


def ptxas_report(q, plan, tile, options, out):
    """The ptxas lines of the GEMM's build with -cl-nv-verbose; the PTX of the 128x128 TK 16 tiles."""
    sources, _ = templates.render_plan(plan)
    source = sources[-1].text
    program = cl.Program(q.context, source).build(options=f"-cl-nv-verbose {options}", devices=[q.device])
    log = program.get_build_info(q.device, cl.program_build_info.LOG)
    label = "{TM}x{TN}-tk{TK}-pipe{PIPE}-lanes{LANES}".format(**tile) + ("-cap" if options else "")
    if tile["TM"] == tile["TN"] == 128 and tile["TK"] == 16 and not options and tile["LANES"] == 0:
        (out / f"gemm-{label}.ptx").write_bytes(program.get_info(cl.program_info.BINARIES)[0])
    return f"{label}: " + " | ".join(line.strip() for line in log.splitlines() if line.strip())


if __name__ == "__main__":
    main()
