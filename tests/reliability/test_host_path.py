"""The shortcuts of a cached call give what the long way gave: the result Array
(``tensors.empty_array``) and the kernel arguments with their declared types (``runtime.Launch``)."""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools
import pytest

import clconv
from clconv import reference, runtime
from clconv.caches import Cache
from clconv.geometry import ConvGeometry, resolve_conv
from clconv.plan import Arg, KernelCall, KernelSource, Plan, Problem
from clconv.runtime import Launch, Operand, Runner
from clconv.tensors import empty_array, queue_pool

from helpers import assert_matches, random


@pytest.mark.parametrize("shape, dtype", [((2, 3, 4, 5), np.float32), ((7,), np.float64), ((3, 0, 2), np.float32)],
                         ids=["4d-float32", "1d-float64", "empty"])
def test_empty_array_is_what_pyopencl_empty_makes(queue, shape, dtype):
    dtype = np.dtype(dtype)
    expected = cl_array.empty(queue, shape, dtype)
    first = empty_array(queue, shape, dtype)  # a shape seen for the first time, or
    again = empty_array(queue, shape, dtype)  # one seen before (pyopencl's fast constructor)
    for made in (first, again):
        assert made.shape == expected.shape and made.strides == expected.strides and made.dtype == expected.dtype
        assert (made.size, made.nbytes, made.offset) == (expected.size, expected.nbytes, expected.offset)
        assert made.queue == queue and made.context == queue.context
        assert made.allocator is None and made.events == []
        assert made.flags.c_contiguous and made.flags.f_contiguous == expected.flags.f_contiguous
        if expected.nbytes:
            assert made.base_data.size == expected.base_data.size
        else:
            assert made.base_data is None
    if expected.nbytes:
        assert again.base_data != first.base_data, "every result needs a buffer of its own"


def test_contiguity_is_checked_by_strides_where_a_result_of_the_shape_was_made(queue, rng):
    """check_tensor's shortcut (tensors._c_contiguous) takes an Array as C-contiguous only where its
    strides are those empty_array made for its shape and dtype: a result passes without pyopencl's
    flags; a strided view and a transposed one of the same shape and dtype are still refused."""
    from clconv.tensors import check_tensor

    shape = (2, 3, 6, 6)
    made = empty_array(queue, shape, np.dtype(np.float32))  # registers the shape's strides
    assert check_tensor("input", empty_array(queue, shape, np.dtype(np.float32))) is not None
    strided = cl_array.to_device(queue, random(rng, (2, 3, 6, 12)))[:, :, :, ::2]
    turned = cl_array.to_device(queue, random(rng, shape)).transpose((0, 1, 3, 2))
    for view in (strided, turned):
        assert view.shape == made.shape and view.dtype == made.dtype and view.strides != made.strides
        with pytest.raises(ValueError, match="input must be a C-contiguous"):
            check_tensor("input", view)


def test_results_of_repeated_calls_do_not_share_memory(queue, rng):
    x1, x2, w = random(rng, (2, 3, 6, 5)), random(rng, (2, 3, 6, 5)), random(rng, (4, 3, 3, 3))
    g = resolve_conv(2, x1.shape, w.shape, None, 1, 1, 1, 1).geometry
    wd = cl_array.to_device(queue, w)
    y1 = clconv.conv2d(cl_array.to_device(queue, x1), wd, padding=1)
    y2 = clconv.conv2d(cl_array.to_device(queue, x2), wd, padding=1)
    assert_matches(y1.get(), reference.forward(g, x1, w), g.reduction_length)
    assert_matches(y2.get(), reference.forward(g, x2, w), g.reduction_length)


def test_an_out_array_reused_call_after_call_keeps_one_event(queue, rng, monkeypatch):
    """A call waits for every event its out= Array has and leaves it the call's last one: a
    preallocated result reused in a stream holds one event, where appending grew the list until
    pyopencl waited on the host (Array.add_event past 12 events), and each call still runs after
    the one before."""
    x, w = random(rng, (2, 3, 6, 5)), random(rng, (4, 3, 3, 3))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    xd, wd = cl_array.to_device(queue, x), cl_array.to_device(queue, w)
    out = cl_array.to_device(queue, np.full((2, 4, 6, 5), np.nan, np.float32))
    waited = []
    run = clconv.planner.run
    monkeypatch.setattr(clconv.planner, "run", lambda *a: waited.append(list(a[-1] or [])) or run(*a))
    for step in range(20):
        clconv.conv2d(xd * (step + 1.0), wd, padding=1, out=out)
        assert len(out.events) == 1
    assert all(len(events) <= 3 for events in waited), "x, w and the out Array's one event"
    assert_matches(out.get(), reference.forward(g, 20 * x, w), g.reduction_length)


def test_a_call_waits_for_other_queues_events_but_not_its_own(queue, rng):
    """The wait list of a call on an in-order queue: another queue's event and a user event stay,
    the queue's own events go (it runs them in order); an out-of-order queue waits for all.  The
    result's allocator is the first Array's that has one, else the queue's pool; numpy tensors are
    uploaded."""
    from clconv.tensors import bind, queue_pool

    own = cl_array.to_device(queue, random(rng, (4,)))
    other_queue = cl.CommandQueue(queue.context)
    other = cl_array.to_device(other_queue, random(rng, (4,)), allocator=cl_tools.ImmediateAllocator(other_queue))
    gate = cl.UserEvent(queue.context)
    gated = cl_array.to_device(queue, random(rng, (4,)))
    gated.add_event(gate)
    try:
        bound = bind({"a": own, "b": other, "c": gated, "d": random(rng, (4,))}, queue)
        assert bound.wait_for is not None and len(bound.wait_for) == 2
        assert {event.int_ptr for event in bound.wait_for} == {other.events[0].int_ptr, gate.int_ptr}
        assert len(bound.uploads) == 1 and bound.operands["d"].buffer is bound.uploads[0].base_data
        assert bound.allocator is other.allocator  # the first Array's that has one (own has none)
        assert bind({"a": own}, queue).allocator is queue_pool(queue)
        assert bind({"a": own}, queue).wait_for is None
        out = cl_array.to_device(other_queue, random(rng, (4,)))
        assert bind({"a": own}, queue, out).wait_for == list(out.events)
        try:
            ooo = cl.CommandQueue(queue.context, properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
        except cl.Error:
            return
        assert len(bind({"a": own.with_queue(ooo)}, ooo).wait_for) == len(own.events) == 1
    finally:
        gate.set_status(cl.command_execution_status.COMPLETE)


def test_repeated_calls_skip_the_static_checks_but_never_the_tensors_own(queue, rng):
    """A call repeated with the same shapes, dtypes, arguments and queue reuses its checked static
    part (one memo entry, whatever the data), and is right each time; a repeat with a tensor the
    per-call checks refuse, an argument of another type or an Array of another queue takes the
    full path and its errors."""
    from clconv import ops

    x, w, b = random(rng, (2, 3, 7, 6)), random(rng, (4, 3, 3, 3)), random(rng, (4,))
    g = resolve_conv(2, x.shape, w.shape, b.shape, 1, 1, 1, 1).geometry
    xd, wd, bd = (cl_array.to_device(queue, a) for a in (x, w, b))
    clconv.clear_caches()
    for step in range(3):
        scaled = xd * float(step + 1)
        got = clconv.conv2d(scaled, wd, bd, padding=1).get()
        ref = reference.forward(g, (step + 1) * x.astype(np.float64), w, b)
        assert_matches(got, ref, g.reduction_length)
    assert len(ops._repeats) == 1
    dy = cl_array.to_device(queue, random(rng, (2, 4, 7, 6)))
    for _ in range(2):  # the gradients have their own entries
        assert_matches(clconv.conv2d_input(x.shape, wd, dy, padding=1), reference.backward_data(g, dy.get(), w),
                       g.reduction_length)
        assert_matches(clconv.conv2d_weight(xd, w.shape, dy, padding=1), reference.backward_weight(g, x, dy.get()),
                       g.reduction_length)
    assert len(ops._repeats) == 3
    wide = cl_array.to_device(queue, random(rng, (2, 3, 7, 12)))
    with pytest.raises(ValueError, match="input must be a C-contiguous"):
        clconv.conv2d(wide[:, :, :, ::2], wd, bd, padding=1)  # same shape, not contiguous
    with pytest.raises(TypeError, match="padding"):
        clconv.conv2d(xd, wd, bd, padding=True)  # True == 1, but no padding
    with pytest.raises(TypeError, match="groups"):
        clconv.conv2d(xd, wd, bd, padding=1, groups=1.0)
    other = cl.CommandQueue(queue.context)
    got = clconv.conv2d(xd.with_queue(other), wd.with_queue(other), bd.with_queue(other), padding=1)
    assert got.queue is other
    assert_matches(got, reference.forward(g, x, w, b), g.reduction_length)
    # an Array without a queue is checked in full each time: here, against the weight's context
    assert_matches(clconv.conv2d(xd.with_queue(None), wd, bd, padding=1), reference.forward(g, x, w, b),
                   g.reduction_length)
    elsewhere = cl_array.to_device(clconv.new_queue(queue.device), x).with_queue(None)  # keeps its context alive
    with pytest.raises(TypeError, match="input lives in another OpenCL context"):
        clconv.conv2d(elsewhere, wd, bd, padding=1)


def test_repeated_calls_with_out_take_the_memo_and_check_out_each_time(queue, rng, monkeypatch):
    """``out=`` calls repeat through the memo too (they took the full path every time), and each
    checks its out Array as the full path does."""
    from clconv import ops

    x, w, r = random(rng, (2, 3, 7, 6)), random(rng, (4, 3, 3, 3)), random(rng, (2, 4, 7, 6))
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    xd, wd, rd = (cl_array.to_device(queue, a) for a in (x, w, r))
    out = cl_array.to_device(queue, np.full((2, 4, 7, 6), np.nan, np.float32))
    clconv.clear_caches()
    full = []
    prepare = ops._prepare
    monkeypatch.setattr(ops, "_prepare", lambda *a, **k: full.append(1) or prepare(*a, **k))
    for step in range(3):
        assert clconv.conv2d(xd * float(step + 1), wd, padding=1, residual=rd, out=out) is out
        ref = reference.forward(g, (step + 1) * x.astype(np.float64), w) + r
        assert_matches(out.get(), ref, g.reduction_length)
    assert len(full) == 1 and len(ops._repeats) == 1
    with pytest.raises(ValueError, match=r"out must have shape \(2, 4, 7, 6\)"):
        clconv.conv2d(xd, wd, padding=1, residual=rd, out=cl_array.empty(queue, (2, 4, 7, 5), np.float32))
    with pytest.raises(TypeError, match="out must have dtype float32"):
        clconv.conv2d(xd, wd, padding=1, residual=rd, out=cl_array.empty(queue, (2, 4, 7, 6), np.float64))
    with pytest.raises(ValueError, match="out and residual share memory"):
        clconv.conv2d(xd, wd, padding=1, residual=rd, out=rd)
    with pytest.raises(TypeError, match="out must be a pyopencl.array.Array"):
        clconv.conv2d(xd, wd, padding=1, residual=rd, out=np.empty((2, 4, 7, 6), np.float32))
    with pytest.raises(ValueError, match="out must be a C-contiguous"):
        wide = cl_array.empty(queue, (2, 4, 7, 12), np.float32)
        clconv.conv2d(xd, wd, padding=1, residual=rd, out=wide[:, :, :, ::2])
    assert len(full) == 2, "only the numpy out took the full path"


STORE = """
__kernel void clc_store(__global float* a, const long a_off, const int value) { a[a_off] = value; }
__kernel void clc_store_twice(__global float* a, const long a_off, const int value) { a[a_off] = 2 * value; }
__kernel void clc_four(__global float* x, const long x_off, __global float* col, __global float* bias,
                       const long bias_off, const int value) { }
"""
PROBLEM = Problem(ConvGeometry.make(1, 1, 1, 1, 1, (1,), (1,)), "forward", "float32")


def _call(*args) -> KernelCall:
    return KernelCall(KernelSource("test.mako", {}), "clc_store", (1,), None, args)


@pytest.fixture
def program(queue):
    return cl.Program(queue.context, STORE).build()


@pytest.fixture
def store_kernel(program):
    return cl.Kernel(program, "clc_store")


def test_launch_arguments_reach_the_kernel_with_their_types(queue, store_kernel):
    call = _call(Arg("a"), np.int32(42))
    runner = Runner(Plan(PROBLEM, "test", {}, (call,)), [store_kernel])
    host = np.zeros(8, np.float32)
    buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    for offset in (5, 2):  # the offset changes between runs of one launch
        cl.wait_for_events(runner.run(queue, {"a": Operand(buffer, offset)}))
    cl.enqueue_copy(queue, host, buffer)
    assert host.tolist() == [0, 0, 42, 0, 0, 42, 0, 0]


def test_launch_argument_list_fills_operands_workspaces_and_fallbacks(queue, program):
    launch = Launch(_call(Arg("x"), Arg("col", with_offset=False), Arg("bias", fallback="y"), np.int32(3)),
                    cl.Kernel(program, "clc_four"))
    x, y, col = object(), object(), object()
    args = launch.resolve_args({"x": Operand(x, 7), "y": Operand(y, 2)}, {"col": col})
    assert args == [x, 7, col, y, 2, np.int32(3)]
    assert type(args[1]) is int
    with pytest.raises(KeyError, match="'x'"):
        launch.resolve_args({"y": Operand(y)}, {"col": col})


def test_launches_of_one_kernel_must_agree_on_its_argument_types(store_kernel):
    Launch(_call(Arg("a"), np.int32(1)), store_kernel)
    Launch(_call(Arg("a"), np.int32(2)), store_kernel)
    with pytest.raises(RuntimeError, match="clc_store"):
        Launch(_call(Arg("a"), np.int64(1)), store_kernel)


@pytest.mark.parametrize("shared", [True, False], ids=["shared-invoker", "pyopencl-path"])
def test_kernels_of_one_signature_share_an_invoker_and_each_runs_its_own_code(queue, program, shared, monkeypatch):
    # the invoker is generated once per signature (not per kernel name) unless pyopencl lacks the
    # private hooks, when set_scalar_arg_dtypes does the same: both must launch each kernel's own code
    if not shared:
        monkeypatch.setattr(runtime, "_generate_invoker", None)
    monkeypatch.setattr(runtime, "_invokers", Cache("invokers_test", maxsize=8))
    host = np.zeros(4, np.float32)
    buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    for name, offset, value in (("clc_store", 1, 5), ("clc_store_twice", 3, 7)):
        call = KernelCall(KernelSource("test.mako", {}), name, (1,), None, (Arg("a"), np.int32(value)))
        runner = Runner(Plan(PROBLEM, "test", {}, (call,)), [cl.Kernel(program, name)])
        cl.wait_for_events(runner.run(queue, {"a": Operand(buffer, offset)}))
    cl.enqueue_copy(queue, host, buffer)
    assert host.tolist() == [0, 5, 0, 14]
    assert len(runtime._invokers) == (1 if shared else 0)


def test_a_literal_kernel_argument_must_say_its_width():
    with pytest.raises(TypeError, match="numpy scalar"):
        _call(Arg("a"), 1)


# -- the result's allocator and the kept workspace buffers ------------------------------------------


def test_results_use_the_inputs_allocator(queue, rng):
    """pyopencl's convention: a result comes from its input's allocator (a MemoryPool here)."""
    from pyopencl.tools import ImmediateAllocator, MemoryPool

    pool = MemoryPool(ImmediateAllocator(queue))
    x_host, w_host = random(rng, (2, 3, 6, 5)), random(rng, (4, 3, 3, 3))
    x = cl_array.to_device(queue, x_host, allocator=pool)
    w = cl_array.to_device(queue, w_host)
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    for _ in range(2):  # the second result is made by empty_array's fast constructor
        y = clconv.conv2d(x, w, padding=1)
        assert y.allocator is pool
        assert_matches(y, reference.forward(g, x_host, w_host), g.reduction_length)
    active = pool.active_blocks
    del y
    assert pool.active_blocks == active - 1  # the result's block went back to the pool
    # inputs without an allocator: the queue's own pool
    assert clconv.conv2d(cl_array.to_device(queue, x_host), w, padding=1).allocator is queue_pool(queue)


def test_a_stream_of_calls_reuses_pooled_results_and_empty_cache_frees_them(queue, rng, monkeypatch):
    """Results (and numpy uploads) come from the queue's pool: a stream of calls whose results are
    dropped reuses the same blocks instead of allocating; each result is right; empty_cache()
    returns the held blocks; CLCONV_RESULT_POOL=0 turns the pool off."""
    x_host, w_host = random(rng, (2, 3, 6, 5)), random(rng, (4, 3, 3, 3))
    x, w = cl_array.to_device(queue, x_host), cl_array.to_device(queue, w_host)
    g = resolve_conv(2, x.shape, w.shape, None, 1, 1, 1, 1).geometry
    ref = reference.forward(g, x_host, w_host)
    pool = queue_pool(queue)
    assert pool is not None
    assert_matches(clconv.conv2d(x, w, padding=1), ref, g.reduction_length)  # dropped: back to the pool
    blocks = pool.active_blocks + pool.held_blocks
    for _ in range(5):
        assert_matches(clconv.conv2d(x, w, padding=1), ref, g.reduction_length)
        assert_matches(clconv.conv2d(x_host, w_host, padding=1), ref, g.reduction_length)  # numpy in, numpy out
    assert pool.active_blocks + pool.held_blocks <= blocks + 2, "each call took new blocks instead of reusing"
    kept = [clconv.conv2d(x, w, padding=1) for _ in range(3)]  # results alive at once: distinct memory
    assert len({id(k.base_data) for k in kept}) == 3
    for k in kept:
        assert_matches(k, ref, g.reduction_length)
    del kept
    assert pool.held_blocks > 0
    clconv.empty_cache()
    assert pool.held_blocks == 0
    monkeypatch.setenv("CLCONV_RESULT_POOL", "0")
    assert queue_pool(queue) is None
    off = clconv.conv2d(x, w, padding=1)
    assert off.allocator is None
    assert_matches(off, ref, g.reduction_length)


def _im2col_call(queue, rng):
    x_host, w_host = random(rng, (2, 3, 6, 5)), random(rng, (4, 3, 3, 3))
    g = resolve_conv(2, x_host.shape, w_host.shape, None, 1, 1, 1, 1).geometry
    return x_host, w_host, g, lambda q: clconv.conv2d(cl_array.to_device(q, x_host), cl_array.to_device(q, w_host),
                                                      padding=1, algorithm="im2col")


def test_workspaces_are_kept_per_in_order_queue(queue, rng):
    from clconv.runtime import Workspaces

    x_host, w_host, g, call = _im2col_call(queue, rng)
    ref = reference.forward(g, x_host, w_host)
    clconv.release_workspaces()
    assert_matches(call(queue), ref, g.reduction_length)
    kept = Workspaces.of(queue).buffers["col"]
    for _ in range(2):
        assert_matches(call(queue), ref, g.reduction_length)
    assert Workspaces.of(queue).buffers["col"] is kept, "the column buffer is allocated once, then reused"
    clconv.release_workspaces()
    assert_matches(call(queue), ref, g.reduction_length)
    assert Workspaces.of(queue).buffers["col"] is not kept
    # an out-of-order queue gets a buffer per call: its calls may run at the same time
    try:
        ooo = cl.CommandQueue(queue.context, properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
    except cl.Error:
        pytest.skip("the device has no out-of-order queues")
    assert Workspaces.of(ooo) is None
    for _ in range(2):
        assert_matches(call(ooo), ref, g.reduction_length)


def test_calls_from_threads_on_one_queue_do_not_share_a_workspace_mid_call(queue, rng, monkeypatch):
    """Each call's kernels use the queue's scratch buffers while it holds them: calls from several
    threads on one queue, each with its own data, all get their own results (a pause between a
    call's launches invites the other threads to enqueue theirs in between)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    resolve = Launch.resolve_args
    monkeypatch.setattr(Launch, "resolve_args", lambda self, *a: time.sleep(0.002) or resolve(self, *a))

    w_host = random(rng, (4, 3, 3, 3))
    inputs = [random(rng, (2, 3, 6, 5)) for _ in range(12)]
    g = resolve_conv(2, inputs[0].shape, w_host.shape, None, 1, 1, 1, 1).geometry
    w = cl_array.to_device(queue, w_host)

    def call(x_host):
        return clconv.conv2d(cl_array.to_device(queue, x_host), w, padding=1, algorithm="im2col").get()

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(call, inputs * 3))
    for x_host, got in zip(inputs * 3, results):
        assert_matches(got, reference.forward(g, x_host, w_host), g.reduction_length)


def test_a_repeated_call_with_nested_arguments_is_checked_like_a_new_one(queue, rng):
    """Stride and padding tuples (as PyTorch's modules pass them) key a repeated call by their
    marshalled bytes: a call with a numpy integer or bytes in them, after the same call with ints
    was remembered, is still resolved in full (accepted, or refused by name)."""
    x = cl_array.to_device(queue, random(rng, (1, 2, 6, 6)))
    w = cl_array.to_device(queue, random(rng, (3, 2, 3, 3)))
    first = clconv.conv2d(x, w, stride=(1, 1), padding=((1, 1), (1, 1))).get()
    again = clconv.conv2d(x, w, stride=(np.int64(1), 1), padding=((1, 1), (1, 1))).get()
    assert np.array_equal(first, again)
    with pytest.raises(TypeError, match="stride"):
        clconv.conv2d(x, w, stride=(b"\x01" + b"\x00" * 7, 1), padding=((1, 1), (1, 1)))
    with pytest.raises(TypeError, match="padding"):
        clconv.conv2d(x, w, stride=(1, 1), padding=((True, 1), (1, 1)))
