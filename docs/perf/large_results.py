"""Layers with large results (tens to hundreds of MB), whose lone kernel events may not show what
a stream of calls costs the device (issue 12, fourteenth session: VGG's first forward, 21.6 us
alone, 114 us a call back to back; the fifteenth session's hosts gave the same time both ways).
Per layer-pass, on one host:

* ``alone``: the default runner's kernel events, one call at a time (what ``clconv bench``'s kernel
  column reports), the median of ROUNDS;
* ``in a stream``: the same runner CALLS times back to back on a profiling queue, from the first
  launch's start to the last one's end, per call: the device's real cost of the call;
* ``op stream`` / ``cuDNN stream``: wall time per call of a stream of default public-API calls
  (results allocated by clconv) and of PyTorch's, one sync at the end;
* ``write floor``: a kernel that only writes the result's bytes (one aligned float4 a work-item),
  back to back, per call: what the memory takes to absorb that many bytes.

``python docs/perf/large_results.py [DESCRIPTOR:PASS ...]`` on the GPU machine (after
``. .gpu/opencl-on-gpu.sh``); with ``PYTHONPATH`` naming another tree's clconv first, that tree's."""

import statistics
import sys

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import clconv
from clconv import planner, runtime
from clconv.passes import PASS_TABLE
from clconv.plan import Problem
from clconv.tools import libraries
from clconv.tools.shapes import parse_descriptor
from clconv.tools.timing import default_call, stream_seconds_per_call

CALLS, ROUNDS = 50, 5
LAYERS = [
    "mb8ic3ih224oc64oh224kh3ph1:forward",        # VGG's first layer: K = 27, a 103 MB result
    "mb1ic3ih572oc64oh570kh3ph0:forward",        # U-Net's first layer at batch 1: 83 MB
    "mb32ic3ih224oc64oh112kh7sh2ph3:forward",    # ResNet's stem at batch 32: 103 MB
    "mb32ic64ih56oc256oh56kh1ph0:forward",       # a 1x1 expansion: 103 MB
    "mb32ic256ih56oc64oh56kh1ph0:backward_data",  # its data gradient: 103 MB
    "mb8ic64ih224oc64oh224kh3ph1:forward",       # VGG's second layer (Winograd): 103 MB
    "mb8ic64ih112oc128oh112kh3ph1:backward_data",  # a 3x3 data gradient (Winograd): 26 MB
    "mb8ic3ih227oc96oh55kh11sh4:forward",        # AlexNet's first: 3025-pixel images (odd)
]

WRITE_FLOOR = """
__kernel void write_floor(__global float4* out, const float value)
{
    out[get_global_id(0)] = (float4)(value);
}
"""


def main(layers: list[str]) -> None:
    queue = clconv.default_queue()
    profiling = runtime.profiling_queue(queue)
    torch = libraries.load_torch(True)
    floor = cl.Program(queue.context, WRITE_FLOOR).build().write_floor
    rng = np.random.default_rng(0)
    for item in layers:
        descriptor, pass_ = item.split(":")
        g = parse_descriptor(descriptor).geometry
        spec = PASS_TABLE[pass_]
        host = {role: rng.standard_normal(spec.shape(role, g)).astype(np.float32) for role in ("x", "w", "dy")}
        arrays = {role: cla.to_device(queue, a) for role, a in host.items()}
        result = cla.empty(queue, spec.result_shape(g), np.float32)
        operands = {role: runtime.Operand(arrays[role].base_data, 0) for role in spec.inputs}
        operands[spec.result] = runtime.Operand(result.base_data, 0)
        runner = planner.plan(Problem(g, pass_, "float32"), queue)

        alone = []
        for _ in range(ROUNDS):
            events = runner.run(profiling, operands)
            profiling.finish()
            alone.append((events[-1].profile.end - events[0].profile.start) * 1e-3)
        runs = [runner.run(profiling, operands) for _ in range(CALLS)]
        profiling.finish()
        in_stream = (runs[-1][-1].profile.end - runs[0][0].profile.start) / CALLS * 1e-3

        words = result.size // 4
        floor_events = [floor(profiling, (words,), None, result.base_data, np.float32(1)) for _ in range(CALLS)]
        profiling.finish()
        write_floor = (floor_events[-1].profile.end - floor_events[0].profile.start) / CALLS * 1e-3

        call = default_call(g, pass_, arrays)
        call()
        op_stream = 1e6 * stream_seconds_per_call(call, queue.finish, CALLS, ROUNDS)
        figures = (f"alone {statistics.median(alone):7.1f} us, in a stream {in_stream:7.1f}, "
                   f"op stream {op_stream:7.1f}, write floor {write_floor:6.1f}")
        if torch is not None:
            tensors = libraries.torch_device_tensors(torch, host, True)
            fn = libraries.torch_fn(torch, g, pass_, tensors)
            fn()
            torch.cuda.synchronize()
            figures += f", cuDNN stream {1e6 * stream_seconds_per_call(fn, torch.cuda.synchronize, CALLS, ROUNDS):7.1f}"
        mb = result.nbytes / 1e6
        print(f"{descriptor} {pass_} ({runner.label}, {len(runner.launches)} launches, {mb:.0f} MB result): "
              f"{figures} us per call", flush=True)
        del arrays, result, operands
        clconv.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:] or LAYERS)
