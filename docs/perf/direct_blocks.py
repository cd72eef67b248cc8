"""The direct forward in blocks of output channels (``clc_direct_forward_block``: a work-item per
block of ``cob`` output channels x strip of ``rows`` output rows) against the default choice and
cuDNN, on layers of few input channels (a network's first layers, whose GEMMs gather a short
contraction).  Per layer's forward, on one host: every block configuration of ROWS and of a
number of channels up to BLOCKS[-1] (one: the strip kernel) that divides the layer's channels (and keeps its registers within REGISTERS), the first configuration of
each GEMM algorithm (OTHERS) that serves the layer, then the default runner,
each CALLS times back to back on a profiling queue (from the first launch's start to the last's
end, per call: what a stream costs the device), the best of ROUNDS; and cuDNN's stream of default
calls (wall time per call, one sync at the end).  Every configuration's result is checked against
float64 once (largest relative error printed).

    python docs/perf/direct_blocks.py OUT.json [SHAPES]   on the GPU machine (SHAPES: a shape file or
                                                          descriptors; default h200-short-gathered-layers.txt)
"""
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyopencl as cl

import clconv
from clconv import planner, reference, runtime
from clconv.algorithms import REGISTRY
from clconv.plan import Problem
from clconv.tools import libraries, shapes
from clconv.tools.timing import stream_seconds_per_call

HERE = Path(__file__).parent
BLOCKS = (2, 4, 8, 16)
ROWS = (1, 2, 4, 8)
WORK_GROUPS = (128, 256)
REGISTERS = 192  # accumulators (rows x cob) + one kernel row's weights (cob x KW) at most
CALLS, ROUNDS = 20, 5
OTHERS = ("implicit_gemm", "im2col", "winograd", "splitk")


def block_configs(problem: Problem) -> list[dict]:
    g = problem.geometry
    kw = g.kernel[-1]
    out = []
    for cob in [c for c in range(1, BLOCKS[-1] + 1) if g.cout_per_group % c == 0]:
        for rows in ROWS:
            if rows > g.out_size[1] or rows * cob + kw * cob > REGISTERS:
                continue
            # one channel: the strip kernel (clc_direct_forward_rows; rows 1: one output a work-item)
            out += [{"wg": wg, "rows": rows, **({"cob": cob} if cob > 1 else {})} for wg in WORK_GROUPS]
    return out


def stream_us(runner, queue, operands) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        runs = [runner.run(queue, operands) for _ in range(CALLS)]
        queue.finish()
        best = min(best, (runs[-1][-1].profile.end - runs[0][0].profile.start) / CALLS * 1e-3)
    return best


def main() -> None:
    out_path, specs = sys.argv[1], sys.argv[2:] or [str(HERE / "h200-short-gathered-layers.txt")]
    queue = clconv.default_queue()
    prof = runtime.profiling_queue(queue)
    torch = libraries.load_torch(True)
    direct = REGISTRY["direct"]
    rows_out, start = [], time.perf_counter()
    rng = np.random.default_rng(0)
    for spec in specs:
        for layer in shapes.resolve_layers(spec, None):
            g = layer.geometry
            problem = Problem(g, "forward", "float32")
            configs = block_configs(problem)

            def build(config, problem=problem):
                try:
                    planner.prepare(problem, direct, config, queue)
                except Exception:  # noqa: BLE001 - reported below
                    pass
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(build, configs))
            host = {"x": rng.standard_normal(problem.spec.shape("x", g)).astype(np.float32),
                    "w": (rng.standard_normal(problem.spec.shape("w", g)) / np.sqrt(g.cin_per_group * g.kernel_volume)).astype(np.float32)}
            expected = reference.forward(g, host["x"].astype(np.float64), host["w"].astype(np.float64))
            ops = runtime.random_operands(problem, prof)
            mf = cl.mem_flags
            checked = {role: runtime.Operand(cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a))
                       for role, a in host.items()}
            y = np.empty(problem.spec.result_shape(g), np.float32)
            checked["y"] = runtime.Operand(cl.Buffer(queue.context, mf.READ_WRITE, y.nbytes))
            times, errors = {}, {}
            for config in configs:
                key = planner.label(direct, config)
                try:
                    runner = planner.prepare(problem, direct, config, queue)
                except Exception as exc:  # noqa: BLE001 - a configuration the device refuses
                    print(f"   {key}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                    continue
                times[key] = round(stream_us(runner, prof, ops), 2)
                y[...] = np.nan
                cl.enqueue_copy(queue, checked["y"].buffer, y)
                cl.wait_for_events(runner.run(queue, checked))
                cl.enqueue_copy(queue, y, checked["y"].buffer)
                errors[key] = float(np.max(np.abs(y - expected)) / np.max(np.abs(expected)))
            others = {}  # the first configuration of each GEMM algorithm that serves the layer
            for name in OTHERS:
                algorithm = REGISTRY[name]
                if algorithm.decline_reason(problem, queue.device) is not None:
                    continue  # not run there: prepare() does not ask (Winograd's configs of a 3D layer)
                try:
                    first = algorithm.configs(problem, queue.device)[:1]
                    if first:
                        runner = planner.prepare(problem, algorithm, first[0], queue)
                        others[planner.label(algorithm, first[0])] = round(stream_us(runner, prof, ops), 2)
                except Exception as exc:  # noqa: BLE001 - an algorithm the layer or device refuses
                    print(f"   {name}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            default = planner.plan(problem, queue)
            default_us = round(stream_us(default, prof, ops), 2)
            cudnn = None
            if torch is not None:
                dy = rng.standard_normal(problem.spec.result_shape(g)).astype(np.float32)  # torch_fn takes every role
                tensors = libraries.torch_device_tensors(torch, {**host, "dy": dy}, True)
                fn = libraries.torch_fn(torch, g, "forward", tensors)
                fn()
                torch.cuda.synchronize()
                cudnn = round(1e6 * stream_seconds_per_call(fn, torch.cuda.synchronize, CALLS, ROUNDS), 2)
            best = min(times, key=times.get) if times else None
            best_other = min(others, key=others.get) if others else None
            rows_out.append({"layer": layer.label, "descriptor": layer.descriptor, "tag": g.tag(),
                             "default": default.label, "default_us": default_us, "cudnn_us": cudnn,
                             "times_us": times, "errors": errors, "others_us": others})
            print(f"{time.perf_counter() - start:5.0f}s {layer.label[:34]:34s} default {default.label[:40]:40s} {default_us:8.1f} us, "
                  f"best block {best} {times.get(best, float('nan')):8.1f} us, best GEMM {best_other} {others.get(best_other, float('nan')):8.1f}, cuDNN {cudnn}, "
                  f"max error {max(errors.values(), default=float('nan')):.1e}", flush=True)
            with open(out_path, "w") as handle:
                json.dump(rows_out, handle, indent=1)
            del ops, checked
            clconv.empty_cache()


if __name__ == "__main__":
    main()
