"""Stream synchronization decisions and switches, as the package exposes them.

These run everywhere: in a build without the ``cuda`` feature the import decides what must be
done (``sync_plan``) and says it did not do it (``synchronized`` is False). The GPU suite
(tests/gpu) checks that CUDA builds carry the plans out.
"""

import os
import subprocess
import sys

import pytest

import cai
import cai.examples

pytestmark = pytest.mark.skipif(
    cai.HAS_CUDA, reason="CUDA builds check pointers with the driver; see tests/gpu"
)

PTR = 0x7F00_0000_0000


def matrix(stream=None):
    return cai.examples.DeviceMatrix(PTR, 2, 3, stream=stream)


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
    v = cai.as_cuda_array(matrix(stream), **kwargs)
    assert v.sync_plan == plan
    assert v.needs_sync == (not plan.startswith("none"))
    assert v.synchronized is False
    assert v.consumer_stream == kwargs.get("stream", 1)
    assert v.pointer_attributes is None
    desc = matrix(stream).__cuda_array_interface__
    w = cai.from_cuda_array_interface(desc, **kwargs)
    assert w.sync_plan == plan


@pytest.mark.parametrize(
    "stream, kwargs, plan",
    [
        (None, {}, "none: no stream"),
        (5, {"sync": False}, "none: sync=False"),
        (5, {"stream": 5}, "none: same stream"),
    ],
)
def test_release_of_an_import_that_ordered_nothing_does_nothing(stream, kwargs, plan):
    v = cai.as_cuda_array(matrix(stream), **kwargs)
    assert v.release() == plan
    assert v.release() == plan  # as often as asked
    with cai.as_cuda_array(matrix(stream), **kwargs) as w:
        assert isinstance(w, cai.CudaArrayView)


def test_release_of_an_ordered_import_needs_the_driver():
    for kwargs in ({}, {"mode": "synchronize"}):
        v = cai.as_cuda_array(matrix(5), **kwargs)
        with pytest.raises(RuntimeError, match="no CUDA support"):
            v.release()
    # Leaving a `with` block releases, whatever ends the block; an error of the release
    # itself is raised (here, chained to the block's own).
    with pytest.raises(RuntimeError, match="no CUDA support") as e:
        with cai.as_cuda_array(matrix(5)):
            raise KeyError("the block's own error")
    assert isinstance(e.value.__context__, KeyError)


def test_gt_data_imports_its_gpu_entry_with_the_import_options():
    calls = []
    gpu = dict(matrix(5).__cuda_array_interface__, release=lambda: calls.append("release"))
    o = type("Producer", (), {"__gt_data_interface__": {"gpu": gpu}})()
    for kwargs, plan in [
        ({}, "event-wait"),
        ({"stream": 7, "mode": "synchronize"}, "synchronize"),
        ({"stream": 5}, "none: same stream"),
        ({"sync": False}, "none: sync=False"),
    ]:
        d = cai.gt_data(o, **kwargs)
        assert (d.gpu.sync_plan, d.gpu.consumer_stream) == (plan, kwargs.get("stream", 1))
    # GDP-3's `release` of the entry: where the import ordered something, the view's release
    # would need the driver, but without it the import ordered nothing, so neither does
    # this; the producer's hook is called. (The GPU suite checks the ordering itself.)
    d = cai.gt_data(o, stream=7)
    with pytest.raises(RuntimeError, match="no CUDA support"):
        d.gpu.release()
    d.release("gpu")
    d.release()  # no host entry: no action
    assert calls == ["release"]
    with pytest.raises(ValueError, match=r"^stream: `stream` = 0 is disallowed"):
        cai.gt_data(o, stream=0)


def test_bad_import_options_are_typed_errors_naming_the_option():
    # The consumer's stream is read as a descriptor's `stream` entry is, and named.
    with pytest.raises(ValueError, match=r"^stream: `stream` = 0 is disallowed"):
        cai.as_cuda_array(matrix(5), stream=0)
    for value in (-1, 2**64):
        with pytest.raises(ValueError, match=rf"^stream: {value} is out of range: expected None or a stream handle"):
            cai.as_cuda_array(matrix(5), stream=value)
        with pytest.raises(ValueError, match=rf"^stream: {value} is out of range"):
            cai.from_cuda_array_interface(matrix(5).__cuda_array_interface__, stream=value)
    with pytest.raises(TypeError, match=r"^stream: 'x' is .*\(type str\)"):
        cai.as_cuda_array(matrix(5), stream="x")
    assert cai.as_cuda_array(matrix(5), stream=None).consumer_stream == 1
    with pytest.raises(ValueError, match=r"^mode = 'later': expected 'enqueue' or 'synchronize'"):
        cai.as_cuda_array(matrix(5), mode="later")


def test_without_cuda_driver_work_says_so():
    ok, why = cai.cuda_available()
    assert (ok, "no CUDA support" in why) == (False, True)
    v = cai.as_cuda_array(matrix(5))
    with pytest.raises(RuntimeError, match="no CUDA support"):
        v.copy_to_host()
    with pytest.raises(RuntimeError, match="no CUDA support"):
        cai.pointer_attributes(PTR)
    # A value that is no address is refused first, named, as in a descriptor's `data`.
    with pytest.raises(ValueError, match=r"^ptr: -1 is out of range: expected an address"):
        cai.pointer_attributes(-1)
    with pytest.raises(TypeError, match=r"^ptr: 'x' is not an int \(type str\)"):
        cai.pointer_attributes("x")
    assert not hasattr(cai, "DeviceArray")


def test_switches():
    assert cai.export_stream_none() is False
    assert cai.ignore_streams() is False
    try:
        cai.set_ignore_streams(True)
        assert cai.as_cuda_array(matrix(5)).sync_plan == "none: streams ignored"
        cai.set_export_stream_none(True)
        m = matrix(5)
        assert m.__cuda_array_interface__["stream"] is None
        assert "stream" in m.__cuda_array_interface__  # still present at version 3
    finally:
        cai.set_ignore_streams(False)
        cai.set_export_stream_none(False)
    assert matrix(5).__cuda_array_interface__["stream"] == 5
    assert cai.as_cuda_array(matrix(5)).sync_plan == "event-wait"


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"CAI_CUDA_ARRAY_INTERFACE_SYNC": "0"}, "none: streams ignored 5"),
        ({"CAI_CUDA_ARRAY_INTERFACE_SYNC": "1"}, "event-wait 5"),
        ({"CAI_CUDA_ARRAY_INTERFACE_EXPORT_STREAM_NONE": "1"}, "none: no stream None"),
        ({"CAI_CUDA_ARRAY_INTERFACE_EXPORT_STREAM_NONE": "0"}, "event-wait 5"),
    ],
)
def test_environment_variables(env, expected):
    code = (
        "import cai.examples; m = cai.examples.DeviceMatrix(%d, 2, 3, stream=5); "
        "print(cai.as_cuda_array(m).sync_plan, m.__cuda_array_interface__['stream'])" % PTR
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == expected
