"""What NVIDIA's compiler makes of the GEMM core: for issue 12's GEMM-shaped layer (1x1 1024->1024
at 28x28, batch 64) and a few tiles, the ptxas report (registers, spills, with -cl-nv-verbose)
and the PTX itself (the program binary NVIDIA's driver returns), written to DIR.

    python docs/perf/gemm_ptx.py DIR        (on the GPU machine)

The machine code, on any machine with CUDA's ptxas and PyPI's nvidia-cuda-cuobjdump (the device
machine has no disassembler): `ptxas -arch=sm_90 -v gemm-X.ptx -o gemm-X.cubin`, then
`cuobjdump -sass gemm-X.cubin`.  That is how the GEMM core's next-step loads were found placed
after the step's FMAs (docs/performance.md, 2026-12-02).
"""
import sys
from pathlib import Path

import pyopencl as cl

import clconv
from clconv import templates
from clconv.algorithms import REGISTRY
from clconv.algorithms.gemm import TILE_KEYS
from clconv.plan import Problem
from clconv.resolve import resolve_conv

TILES = {  # TM, TN, TK, WM, WN, VW, PIPE
    "128x64-8x4": (128, 64, 16, 8, 4, 4, 1),
    "128x128-8x8": (128, 128, 16, 8, 8, 4, 1),
    "64x128-8x8": (64, 128, 16, 8, 8, 4, 1),
}


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    q = clconv.default_queue()
    g = resolve_conv(2, (64, 1024, 28, 28), (1024, 1024, 1, 1), None, 1, 0, 1, 1).geometry
    problem = Problem(g, "forward", "float32")
    algorithm = REGISTRY["gemm1x1"]
    for name, tile in TILES.items():
        plan = algorithm.plan(problem, dict(zip(TILE_KEYS, tile)), q.device)
        sources, _ = templates.render_plan(plan)
        source = sources[-1].text
        options = "-cl-nv-verbose" if "NVIDIA" in q.device.platform.name else ""
        program = cl.Program(q.context, source).build(options=options, devices=[q.device])
        log = program.get_build_info(q.device, cl.program_build_info.LOG)
        print(f"{name}: " + " | ".join(line.strip() for line in log.splitlines() if line.strip()))
        (out / f"gemm-{name}.cl").write_text(source)
        # the binary ends in NUL bytes, which ptxas refuses
        (out / f"gemm-{name}.ptx").write_bytes(program.get_info(cl.program_info.BINARIES)[0].rstrip(b"\0"))


if __name__ == "__main__":
    main()
