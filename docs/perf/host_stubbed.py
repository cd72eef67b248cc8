"""Where the op layer's host time goes on a machine (issue 12's host-bound streams): per call, a
stream of CALLS calls with one sync, the best of ROUNDS, alternating the variants:

* ``op``: the public op with default arguments (as ``clconv bench``'s stream column times it);
* ``op, launches stubbed``: the same with ``Runner._enqueue`` replaced by a stub that enqueues
  nothing and returns one marker event per launch: clconv's Python and the result's allocation;
* ``runner``: the planned runner's launches alone, on fixed operands;
* ``empty_array``: allocating the result from the queue's pool alone (dropped at once);
* ``marker``: ``cl.enqueue_marker`` alone (what an event costs to make and release);
* ``in a stream on a profiling queue``: the runner run CALLS times back to back on a profiling
  queue: the span from the first kernel's start to the last one's end per call, and the median of
  the calls' own event times (start of the first launch to end of the last) within that stream.

``python docs/perf/host_stubbed.py`` (on the GPU machine after ``. .gpu/opencl-on-gpu.sh``)."""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import clconv
from clconv import planner, runtime
from clconv.plan import Problem
from clconv.tensors import empty_array, queue_pool
from clconv.tools.timing import stream_seconds_per_call
from clconv.tools.shapes import parse_descriptor

CALLS, ROUNDS = 400, 5


def per_call_us(fn, queue, calls: int = CALLS) -> float:
    fn()
    queue.finish()
    return 1e6 * stream_seconds_per_call(fn, queue.finish, calls, ROUNDS)


def host_figures(op, runner, operands, queue, calls: int = CALLS, rounds: int = 3) -> dict[str, float]:
    """Per call, the best of ``rounds`` alternations: ``op`` (a public op call), the same with
    ``Runner._enqueue`` a stub that enqueues nothing and returns one marker event per launch
    ("stubbed"), and ``runner`` alone on fixed ``operands`` ("runner")."""
    marker = cl.enqueue_marker(queue)
    real_enqueue = runtime.Runner._enqueue

    def stub(self, run_queue, operands, spaces, wait_for, chain):
        return [marker for _ in self.launches]

    figures: dict[str, list[float]] = {}
    for _ in range(rounds):
        figures.setdefault("op", []).append(per_call_us(op, queue, calls))
        runtime.Runner._enqueue = stub
        try:
            figures.setdefault("stubbed", []).append(per_call_us(op, queue, calls))
        finally:
            runtime.Runner._enqueue = real_enqueue
        figures.setdefault("runner", []).append(per_call_us(lambda: runner.run(queue, operands), queue, calls))
    return {name: min(values) for name, values in figures.items()}


def profiled_us(runner, operands, queue, calls: int = CALLS) -> tuple[float, float]:
    """``runner`` run ``calls`` times back to back on a profiling queue: per call, the span from the
    first kernel's start to the last one's end, and the median of the calls' own event times."""
    profiling = runtime.profiling_queue(queue)
    runner.run(profiling, operands)
    profiling.finish()
    runs = [runner.run(profiling, operands) for _ in range(calls)]
    profiling.finish()
    span = (runs[-1][-1].profile.end - runs[0][0].profile.start) / calls * 1e-3
    own = sorted((events[-1].profile.end - events[0].profile.start) * 1e-3 for events in runs)[calls // 2]
    return span, own


def main() -> None:
    queue = clconv.default_queue()
    rng = np.random.default_rng(0)

    def device(*shape):
        return cla.to_device(queue, rng.standard_normal(shape).astype(np.float32))

    g = parse_descriptor("mb1ic512ih7oc512oh7kh3ph1").geometry
    w, dy, x = device(*g.weight_shape), device(*g.output_shape), device(*g.input_shape)
    dx = device(*g.input_shape)
    cases = {
        "conv2d_input 1x512x7x7 (im2col)": (
            lambda: clconv.conv2d_input(g.input_shape, w, dy, padding=1),
            Problem(g, "backward_data", "float32"), {"w": w, "dy": dy, "dx": dx}),
        "conv2d_weight 1x512x7x7": (
            lambda: clconv.conv2d_weight(x, g.weight_shape, dy, padding=1),
            Problem(g, "backward_weight", "float32"), {"x": x, "dy": dy, "dw": device(*g.weight_shape)}),
    }
    big = parse_descriptor("mb8ic3ih224oc64oh224kh3ph1").geometry  # VGG's first layer: a 103 MB result
    xb, wb, yb = device(*big.input_shape), device(*big.weight_shape), device(*big.output_shape)
    cases["conv2d 8x3x224x224 -> 64 (103 MB result)"] = (
        lambda: clconv.conv2d(xb, wb, padding=1), Problem(big, "forward", "float32"), {"x": xb, "w": wb, "y": yb})
    for label, (op, problem, tensors) in cases.items():
        runner = planner.plan(problem, queue)
        operands = {role: runtime.Operand(array.base_data, 0) for role, array in tensors.items()}
        figures = host_figures(op, runner, operands, queue)
        print(f"{label} ({runner.label}, {len(runner.launches)} launches): op {figures['op']:.1f}; "
              f"op, launches stubbed {figures['stubbed']:.1f}; runner {figures['runner']:.1f} us per call")
        span, own = profiled_us(runner, operands, queue)
        print(f"    in a stream on a profiling queue: {span:.1f} us per call from first start to last end, "
              f"each call's own events {own:.1f} us (median)")
    pool = queue_pool(queue)
    print(f"empty_array from the pool: {per_call_us(lambda: empty_array(queue, (1, 512, 7, 7), np.dtype(np.float32), pool), queue):.1f} us; "
          f"enqueue_marker: {per_call_us(lambda: cl.enqueue_marker(queue), queue):.1f} us")


if __name__ == "__main__":
    main()
