"""Stream synchronization decisions and switches, as the package exposes them, on a machine
without a CUDA driver.

An import decides what must be done about the producer's stream (``sync_plan``) and does it
with the driver: without one, the plans that order nothing still import (with
``check_pointer=False``: a pointer is checked with the driver too), and the others raise
RuntimeError naming the streams and saying why there is no driver. The GPU suite (tests/gpu, on
the emulated driver in CI) checks that the plans are carried out; cai-runtime's `sync` tests
check each decision.
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import cai
import cai.examples

NO_DRIVER = re.escape(cai.cuda_available()[1])
pytestmark = pytest.mark.skipif(
    cai.cuda_available()[0], reason="a CUDA driver is loaded here; see tests/gpu"
)

PTR = 0x7F00_0000_0000
UNCHECKED = {"check_pointer": False}


def matrix(stream=None):
    return cai.examples.DeviceMatrix(PTR, 2, 3, stream=stream)


def no_driver(what):
    """The RuntimeError of work that needs the driver: `what`, then why there is none."""
    return pytest.raises(RuntimeError, match=rf"^{what}.*: {NO_DRIVER}")


@pytest.mark.parametrize(
    "stream, kwargs, plan",
    [
        (None, {}, "none: no stream"),
        (5, {}, "event-wait"),
        (5, {"mode": "synchronize"}, "synchronize"),
        (5, {"sync": False}, "none: sync=False"),
        (5, {"stream": 5}, "none: same stream"),
        (2, {"stream": 2}, "none: same stream"),
        (1, {}, "none: same stream"),  # the default consumer stream is the legacy stream
        (1, {"stream": 2}, "event-wait"),
        (0x1234, {"stream": 0x5678, "mode": "synchronize"}, "synchronize"),
    ],
)
def test_import_plans(stream, kwargs, plan):
    desc = matrix(stream).__cuda_array_interface__
    if plan.startswith("none"):
        v = cai.as_cuda_array(matrix(stream), **UNCHECKED, **kwargs)
        assert (v.sync_plan, v.needs_sync) == (plan, False)
        assert v.consumer_stream == kwargs.get("stream", 1)
        assert v.pointer_attributes is None and v.device_id is None
        w = cai.from_cuda_array_interface(desc, **UNCHECKED, **kwargs)
        assert w.sync_plan == plan
    else:
        # Named as the plan goes: "cannot order the consumer's stream ... after the producer's
        # `stream` = 5" or "cannot synchronize the producer's `stream` = 5".
        what = "cannot order the consumer's" if plan == "event-wait" else "cannot synchronize"
        with no_driver(what):
            cai.as_cuda_array(matrix(stream), **UNCHECKED, **kwargs)
        with no_driver(what):
            cai.from_cuda_array_interface(desc, **UNCHECKED, **kwargs)
    # A pointer is checked with the driver first, whatever the plan.
    with no_driver("cannot check `data` with the CUDA driver"):
        cai.as_cuda_array(matrix(stream), **kwargs)


@pytest.mark.parametrize(
    "stream, kwargs, plan",
    [
        (None, {}, "none: no stream"),
        (5, {"sync": False}, "none: sync=False"),
        (5, {"stream": 5}, "none: same stream"),
    ],
)
def test_release_of_an_import_that_ordered_nothing_does_nothing(stream, kwargs, plan):
    v = cai.as_cuda_array(matrix(stream), **UNCHECKED, **kwargs)
    assert v.release() == plan
    assert v.release() == plan  # as often as asked
    with cai.as_cuda_array(matrix(stream), **UNCHECKED, **kwargs) as w:
        assert isinstance(w, cai.CudaArrayView)


def test_gt_data_imports_its_gpu_entry_with_the_import_options():
    calls = []
    gpu = dict(matrix(5).__cuda_array_interface__, release=lambda: calls.append("release"))
    o = type("Producer", (), {"__gt_data_interface__": {"gpu": gpu}})()
    for kwargs, plan in [
        ({"stream": 5}, "none: same stream"),
        ({"sync": False}, "none: sync=False"),
    ]:
        d = cai.gt_data(o, **UNCHECKED, **kwargs)
        assert (d.gpu.sync_plan, d.gpu.consumer_stream) == (plan, kwargs.get("stream", 1))
    for kwargs, what in [
        ({}, "cannot order the consumer's"),
        ({"stream": 7, "mode": "synchronize"}, "cannot synchronize"),
    ]:
        with no_driver(what):
            cai.gt_data(o, **UNCHECKED, **kwargs)
    with no_driver("cannot check `data`"):
        cai.gt_data(o, sync=False)
    # GDP-3's `release` of the entry: the import ordered nothing, and neither does this; the
    # producer's hook is called. (The GPU suite checks the ordering itself.)
    d = cai.gt_data(o, **UNCHECKED, stream=5)
    d.release("gpu")
    d.release()  # no host entry: no action
    assert calls == ["release"]
    with pytest.raises(ValueError, match=r"^stream: `stream` = 0 is disallowed"):
        cai.gt_data(o, stream=0)


def test_bad_import_options_are_typed_errors_naming_the_option():
    # The consumer's stream is read as a descriptor's `stream` entry is, and named: before any
    # driver work.
    with pytest.raises(ValueError, match=r"^stream: `stream` = 0 is disallowed"):
        cai.as_cuda_array(matrix(5), stream=0)
    for value in (-1, 2**64):
        with pytest.raises(ValueError, match=rf"^stream: {value} is out of range: expected None or a stream handle"):
            cai.as_cuda_array(matrix(5), stream=value)
        with pytest.raises(ValueError, match=rf"^stream: {value} is out of range"):
            cai.from_cuda_array_interface(matrix(5).__cuda_array_interface__, stream=value)
    with pytest.raises(TypeError, match=r"^stream: 'x' is .*\(type str\)"):
        cai.as_cuda_array(matrix(5), stream="x")
    assert cai.as_cuda_array(matrix(5), stream=None, sync=False, **UNCHECKED).consumer_stream == 1
    with pytest.raises(ValueError, match=r"^mode = 'later': expected 'enqueue' or 'synchronize'"):
        cai.as_cuda_array(matrix(5), mode="later")


def test_without_a_cuda_driver_work_says_so():
    ok, why = cai.cuda_available()
    assert not ok and why, (ok, why)
    v = cai.as_cuda_array(matrix(5), sync=False, **UNCHECKED)
    with pytest.raises(RuntimeError, match=NO_DRIVER):
        v.copy_to_host()
    with pytest.raises(RuntimeError, match=NO_DRIVER):
        cai.pointer_attributes(PTR)
    # A value that is no address is refused first, named, as in a descriptor's `data`.
    with pytest.raises(ValueError, match=r"^ptr: -1 is out of range: expected an address"):
        cai.pointer_attributes(-1)
    with pytest.raises(TypeError, match=r"^ptr: 'x' is not an int \(type str\)"):
        cai.pointer_attributes("x")
    with pytest.raises(RuntimeError, match=NO_DRIVER):
        cai.DeviceArray(np.zeros(3))


def test_switches():
    assert cai.export_stream_none() is False
    assert cai.ignore_streams() is False
    try:
        cai.set_ignore_streams(True)
        assert cai.as_cuda_array(matrix(5), **UNCHECKED).sync_plan == "none: streams ignored"
        cai.set_export_stream_none(True)
        m = matrix(5)
        assert m.__cuda_array_interface__["stream"] is None
        assert "stream" in m.__cuda_array_interface__  # still present at version 3
    finally:
        cai.set_ignore_streams(False)
        cai.set_export_stream_none(False)
    assert matrix(5).__cuda_array_interface__["stream"] == 5
    with no_driver("cannot order the consumer's"):
        cai.as_cuda_array(matrix(5), **UNCHECKED)


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"CAI_CUDA_ARRAY_INTERFACE_SYNC": "0"}, "none: streams ignored 5"),
        ({"CAI_CUDA_ARRAY_INTERFACE_SYNC": "1"}, "RuntimeError 5"),
        ({"CAI_CUDA_ARRAY_INTERFACE_EXPORT_STREAM_NONE": "1"}, "none: no stream None"),
        ({"CAI_CUDA_ARRAY_INTERFACE_EXPORT_STREAM_NONE": "0"}, "RuntimeError 5"),
    ],
)
def test_environment_variables(env, expected):
    code = (
        "import cai.examples; m = cai.examples.DeviceMatrix(%d, 2, 3, stream=5)\n"
        "try:\n"
        "    plan = cai.as_cuda_array(m, check_pointer=False).sync_plan\n"
        "except RuntimeError:\n"
        "    plan = 'RuntimeError'\n"
        "print(plan, m.__cuda_array_interface__['stream'])" % PTR
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == expected
