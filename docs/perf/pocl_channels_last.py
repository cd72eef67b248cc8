"""Channels-last forwards and data gradients on a CPU (issue 12, forty-first session): for each layer
of a list and each of the two passes,

* ``new_ms``: the kernel time of the heuristic's first candidate (direct's channel tiles where
  ``direct.channels_tiles_first`` holds);
* ``old_ms``: the same for the first candidate without that rule (the order before it: the GEMM
  families' GPU tiles, which CPUs ran channels-last in), where it differs;
* ``stream_ms`` / ``torch_ms``: a stream of default calls through the public op (channels-last
  device Arrays, ``layout="channels_last"``, results allocated by clconv) against PyTorch's CPU op on
  the same data in the channels-last memory format (a 1D layer's (N, L, C) as a transposed view),
  each per call, one sync at the stream's end (the weight gradient too, with a fourth argument
  naming the passes: ``forward,backward_data`` by default);
* ``error``: clconv's result against PyTorch's, relative to the largest value.

Each figure is the minimum over ROUNDS rounds, the layers interleaved within a round.

    cd /tmp && PYTHONPATH=REPO POCL_MAX_PTHREAD_COUNT=2 python REPO/docs/perf/pocl_channels_last.py \\
        REPO/docs/perf/pocl-channels-last-layers.txt OUT.json [ROUNDS] [PASSES]
"""

import json
import sys
import time
from unittest import mock

import numpy as np
import pyopencl.array as cla
import torch

import clconv
from clconv import planner, runtime
from clconv.algorithms import direct
from clconv.plan import Problem
from clconv.tools.shapes import parse_descriptor

PASSES = ("forward", "backward_data")
CALLS = 20


def layers(path):
    with open(path) as listing:
        return [line.strip() for line in listing if line.strip() and not line.startswith("#")]


def _taps_first_before(problem, device, taps_first=direct.taps_first):
    """direct.taps_first as it was before the forty-first session: never for a 1x1 kernel."""
    return problem.geometry.kernel_volume > 1 and taps_first(problem, device)


def kernel_ms(problem, queue, old=False):
    """The first candidate's label and kernel time (best of 3 x 5 runs); ``old``: without the
    session's rules (the channel tiles first, the taps for 1x1 weight gradients)."""
    if old:
        with mock.patch.object(planner, "channels_tiles_first", lambda *_: False), \
                mock.patch.object(direct, "channels_tiles_first", lambda *_: False), \
                mock.patch.object(planner, "taps_first", _taps_first_before):
            algorithm, config = planner.candidates(problem, queue.device)[0]
    else:
        algorithm, config = planner.candidates(problem, queue.device)[0]
    runner = planner.prepare(problem, algorithm, config, queue)
    operands = runtime.random_operands(problem, queue)
    best = min(runtime.time_runner(runner, queue, operands, 5, min) for _ in range(3))
    return planner.label(algorithm, config), 1e3 * best


def calls(g, pass_, queue, rng):
    """(clconv's call, PyTorch's call, their results' comparison) on the same fresh data."""
    nd = g.ndim
    spatial_in, spatial_out = g.in_size[-nd:], g.out_size[-nd:]
    x = rng.standard_normal((g.batch, *spatial_in, g.in_channels)).astype(np.float32)
    dy = rng.standard_normal((g.batch, *spatial_out, g.out_channels)).astype(np.float32)
    w = rng.standard_normal((g.out_channels, g.in_channels // g.groups, *g.kernel[-nd:])).astype(np.float32)
    options = dict(stride=g.stride[-nd:], padding=tuple(zip(g.pad_begin[-nd:], g.pad_end[-nd:])),
                   dilation=g.dilation[-nd:], groups=g.groups)
    torch_options = dict(stride=g.stride[-nd:], padding=g.pad_begin[-nd:], dilation=g.dilation[-nd:], groups=g.groups)
    to_first = (0, nd + 1, *range(1, nd + 1))  # NHWC -> NCHW as a view: PyTorch's channels-last strides
    wt = torch.from_numpy(w)
    if pass_ == "backward_weight":
        xa, dya = cla.to_device(queue, x), cla.to_device(queue, dy)
        op = getattr(clconv, f"conv{nd}d_weight")
        xt, dyt = torch.from_numpy(x).permute(*to_first), torch.from_numpy(dy).permute(*to_first)
        tw = getattr(torch.nn.grad, f"conv{nd}d_weight")
        return (lambda: op(xa, w.shape, dya, layout="channels_last", **options),
                lambda: tw(xt, w.shape, dyt, **torch_options))
    if pass_ == "forward":
        xa, wa = cla.to_device(queue, x), cla.to_device(queue, w)
        op = getattr(clconv, f"conv{nd}d")
        xt = torch.from_numpy(x).permute(*to_first)
        tf = getattr(torch.nn.functional, f"conv{nd}d")
        return (lambda: op(xa, wa, layout="channels_last", **options),
                lambda: tf(xt, wt, **torch_options))
    dya, wa = cla.to_device(queue, dy), cla.to_device(queue, w)
    op = getattr(clconv, f"conv{nd}d_input")
    size = (g.batch, *spatial_in, g.in_channels)
    dyt = torch.from_numpy(dy).permute(*to_first)
    tg = getattr(torch.nn.grad, f"conv{nd}d_input")
    return (lambda: op(size, wa, dya, layout="channels_last", **options),
            lambda: tg((g.batch, g.in_channels, *spatial_in), wt, dyt, **torch_options))


def stream_ms(call, sync):
    call()
    sync()
    planner.finish_builds()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            call()
        sync()
        best = min(best, (time.perf_counter() - t0) / CALLS)
    return 1e3 * best


def main():
    listing, out_path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    passes = sys.argv[4].split(",") if len(sys.argv) > 4 else PASSES
    torch.set_num_threads(2)
    queue = clconv.default_queue()
    rng = np.random.default_rng(0)
    rows = {}
    for round_ in range(rounds):
        for descriptor in layers(listing):
            layer = parse_descriptor(descriptor)
            g = layer.geometry
            for pass_ in passes:
                problem = Problem(g, pass_, "float32", layout="channels_last")
                new_label, new = kernel_ms(problem, queue)
                old_label, old = kernel_ms(problem, queue, old=True)
                ours, theirs = calls(g, pass_, queue, rng)
                got = ours().get()
                want = theirs().numpy()
                if pass_ != "backward_weight":
                    want = np.moveaxis(want, 1, -1)  # channels-last, as clconv's
                error = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
                mine = stream_ms(ours, queue.finish)
                torchs = stream_ms(theirs, lambda: None)
                key = f"{layer.name or g.tag()} {pass_}"
                row = rows.setdefault(key, {"layer": layer.name, "tag": g.tag(), "pass": pass_})
                row.update({"new": new_label, "old": old_label, "error": max(error, row.get("error", 0.0))})
                for name, value in (("new_ms", new), ("old_ms", old), ("stream_ms", mine), ("torch_ms", torchs)):
                    row[name] = min(value, row.get(name, float("inf")))
                print(f"round {round_} {key:45s} {new_label:28s} {new:8.3f} ms (old {old:8.3f}) "
                      f"stream {mine:8.3f} torch {torchs:8.3f} error {error:.1e}", flush=True)
                with open(out_path, "w") as out:
                    json.dump(list(rows.values()), out, indent=1)
    table = list(rows.values())

    def ratio(key):
        return np.exp(np.mean([np.log(r["stream_ms"] / r["torch_ms"]) for r in table if key(r)]))
    print(f"stream / PyTorch, geometric mean: all {ratio(lambda r: True):.3f}, "
          f"served by the tiles {ratio(lambda r: r['new'].startswith('direct')):.3f}")
    moved = [r["new_ms"] / r["old_ms"] for r in table if r["new"] != r["old"]]
    if moved:
        print(f"kernel time, new first candidate / old, over the {len(moved)} moved: "
              f"{np.exp(np.mean(np.log(moved))):.3f} ({min(moved):.3f}-{max(moved):.3f})")


if __name__ == "__main__":
    main()
