"""GPU suite: run from the bundle made by scripts/gpu-bundle.sh (see docs/testing.md, "GPU suite").

Every test here needs a CUDA device (a GPU, or the emulated driver); without one the whole
suite is skipped with the reason.
"""

import gc
import os

import numpy as np
import pytest

import cai

# JAX takes 75% of the GPU's memory when its backend starts unless told otherwise; the other
# libraries in this process need theirs.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

_ok, _why = cai.cuda_available()
SKIP = None if _ok else f"no CUDA device: {_why}"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Without a device every test skips here, before its fixtures: from one place, so that
    `-rs` gives the reason once (a skip mark is reported at each test's own line)."""
    if SKIP:
        pytest.skip(SKIP)


def second_device():
    """Device 1, or a skip saying there is one device (the emulated suite runs once with
    CUDA_EMU_DEVICES=2; a GPU machine with one GPU skips these)."""
    try:
        cai.DeviceArray(np.zeros(1, dtype=np.uint8), device_id=1)
    except ValueError as e:
        if "no such device" in str(e):
            pytest.skip("one CUDA device here: the multi-device tests need two")
        raise
    return 1


@pytest.fixture
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return t


@pytest.fixture
def numba_cuda():
    nc = pytest.importorskip("numba.cuda")
    return nc


@pytest.fixture
def jnp():
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("jax sees no GPU")
    return pytest.importorskip("jax.numpy")


def churn(cp, n=8, nbytes=64 << 20):
    """Allocate and overwrite device memory, so that freed memory would be reused."""
    gc.collect()
    junk = [cp.full(nbytes // 4, -1.0, dtype=np.float32) for _ in range(n)]
    cp.cuda.Device().synchronize()
    return junk


DTYPES = [np.float32, np.float64, np.int32, np.int16, np.uint8, np.complex64, np.float16]


def sample(dtype, shape=(6, 10), seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-100, 100, size=shape) if np.dtype(dtype).kind in "iu" else rng.standard_normal(shape)
    if np.dtype(dtype).kind == "u":
        a = np.abs(a)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)
