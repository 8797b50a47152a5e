"""Synchronization on a real device: consumers never read stale data.

The producer's work is made long (many passes over 1 GiB) on a non-blocking stream, so a
consumer on another non-blocking stream that did not wait would read old values.
"""

import numpy as np
import pytest

import cai

N = 1 << 28  # float32 items: 1 GiB
PASSES = 40


def pending_cupy_array(cp, stream):
    """A CuPy array whose last PASSES increments are still running on `stream`, and its
    exported descriptor taken while `stream` is current (CuPy exports the current stream)."""
    with stream:
        x = cp.zeros(N, dtype=cp.float32)
        stream.synchronize()
        for _ in range(PASSES):
            x += 1
        tail = x[-4:]
        desc = tail.__cuda_array_interface__
    return x, tail, desc


@pytest.mark.parametrize("mode", ["enqueue", "synchronize"])
def test_rust_consumer_on_another_stream_sees_finished_work(cp, mode):
    producer = cp.cuda.Stream(non_blocking=True)
    consumer = cp.cuda.Stream(non_blocking=True)
    x, tail, desc = pending_cupy_array(cp, producer)
    assert desc["stream"] == producer.ptr
    v = cai.from_cuda_array_interface(desc, owner=tail, stream=consumer.ptr, mode=mode)
    assert v.sync_plan == ("event-wait" if mode == "enqueue" else "synchronize")
    # The copy is enqueued on the consumer stream right away.
    got = np.frombuffer(v.copy_to_host(), dtype=np.float32)
    assert (got == PASSES).all(), got


def test_event_wait_does_not_block_the_host(cp):
    producer = cp.cuda.Stream(non_blocking=True)
    consumer = cp.cuda.Stream(non_blocking=True)
    x, tail, desc = pending_cupy_array(cp, producer)
    v = cai.from_cuda_array_interface(desc, owner=tail, stream=consumer.ptr)
    assert v.sync_plan == "event-wait"
    # PASSES passes over 1 GiB take tens of milliseconds; an import that blocked the host
    # would return only after them. (The control, sync=False reading unfinished data, is
    # reported by benches/gpu_bench.py.)
    assert not producer.done, "the event-wait import blocked until the producer finished"
    consumer.synchronize()
    assert producer.done  # the consumer's wait covered the producer's work


def test_our_side_stream_work_is_ordered_before_the_exported_stream(cp, numba_cuda):
    a = cai.DeviceArray(np.zeros(N, dtype=np.float32))
    # The consumers read on a non-blocking stream: work there does not wait for the legacy
    # default stream, nor for our (blocking) streams, so only the event wait orders it.
    reader = cp.cuda.Stream(non_blocking=True)
    for consumer, value in (("cupy", 7), ("numba", 9)):
        a.fill(value, on_side_stream=True, rounds=PASSES)
        assert a.pending_streams == [a.side_stream]
        desc = a.__cuda_array_interface__  # records events, exported stream waits on them
        assert a.pending_streams == []
        assert desc["stream"] == a.stream != a.side_stream
        if consumer == "cupy":  # CuPy synchronizes the exported stream, nothing else
            with reader:
                last = cp.asnumpy(cp.asarray(a)[-4:])
        else:  # so does Numba
            ns = numba_cuda.external_stream(reader.ptr)
            last = numba_cuda.as_cuda_array(a)[-4:].copy_to_host(stream=ns)
            ns.synchronize()
        assert (last.view(np.uint8) == value).all(), (consumer, last.view(np.uint8))
        a.synchronize()


def test_release_keeps_our_next_write_behind_the_consumers_work(cp):
    a = cai.DeviceArray(np.zeros(N, dtype=np.float32))
    a.fill(5)
    consumer = cp.cuda.Stream(non_blocking=True)
    with cai.as_cuda_array(a, stream=consumer.ptr) as v:
        assert v.sync_plan == "event-wait"
        with consumer:
            x = cp.asarray(v)
            y = cp.empty_like(x)
            for _ in range(PASSES):  # long work reading `a` on the consumer's stream
                y[...] = x
    # Left the block: our stream waits for the consumer's. Our next write is enqueued at once
    # and must not overtake the reads (without the release it would race them).
    a.fill(9, rounds=PASSES)
    consumer.synchronize()
    assert (y[-4:].get().view(np.uint8) == 5).all()
    a.synchronize()
    assert (np.frombuffer(a.to_bytes(), dtype=np.uint8)[-16:] == 9).all()


def test_a_wrapped_array_exported_without_a_stream_has_no_pending_work(cp):
    producer = cp.cuda.Stream(non_blocking=True)
    reader = cp.cuda.Stream(non_blocking=True)
    x, tail, desc = pending_cupy_array(cp, producer)
    with producer:  # CuPy exports the current stream: x's pending work is on it
        s = cai.as_storage(device_data=x)
    # The storage says nothing is pending, so a reader on a non-blocking stream does not wait:
    # the wrap must have waited for the producer (an event wait would order only the legacy
    # default stream, which a non-blocking stream does not follow).
    assert s.__cuda_array_interface__["stream"] is None
    with reader:
        last = cp.asarray(s)[-4:].get()
    assert (last == PASSES).all(), last


def test_a_device_write_through_cupy_is_done_when_setitem_returns(cp):
    s = cai.zeros((8,), dtype=np.float32, device="gpu", managed="gt4py")
    producer = cp.cuda.Stream(non_blocking=True)
    x, tail, desc = pending_cupy_array(cp, producer)
    with producer:
        s[4:] = tail  # queued on the current stream, behind PASSES passes over 1 GiB
    assert s.sync_state.state == cai.SyncState.SYNC_DEVICE_DIRTY
    # The mirror copy to the host runs on the legacy default stream, which does not wait for
    # a non-blocking stream; so does a reader told `stream: None`.
    assert (s.to_numpy()[4:] == PASSES).all(), s.to_numpy()
    assert s.__cuda_array_interface__["stream"] is None


def test_export_stream_none_option():
    a = cai.DeviceArray(np.zeros(4, dtype=np.float32))
    assert a.__cuda_array_interface__["stream"] == a.stream
    cai.set_export_stream_none(True)
    try:
        assert a.__cuda_array_interface__["stream"] is None
    finally:
        cai.set_export_stream_none(False)


def test_ignore_streams_option(cp):
    producer = cp.cuda.Stream(non_blocking=True)
    x, tail, desc = pending_cupy_array(cp, producer)
    cai.set_ignore_streams(True)
    try:
        v = cai.from_cuda_array_interface(desc, owner=tail)
        assert v.sync_plan == "none: streams ignored"
    finally:
        cai.set_ignore_streams(False)
    producer.synchronize()
