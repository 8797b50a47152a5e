"""cai: the CUDA Array Interface and NumPy array interface for Rust types.

Import foreign arrays into validated views that keep their owner alive
(``from_cuda_array_interface``, ``as_cuda_array``, ``from_array_interface``,
``as_host_array``), check any object's interface against the spec (``check``), and try the
example classes built with ``#[derive(CudaArrayInterface)]`` / ``#[derive(ArrayInterface)]``
(``Grid``, ``counts``, ``DeviceMatrix``, ``Buffer``).
"""

from types import SimpleNamespace as _Namespace

from ._native import (
    ArrayView,
    Buffer,
    Counts,
    CudaArrayView,
    CudaMask,
    DeviceMatrix,
    Grid,
    HostArrayView,
    HostMask,
    Violation,
    as_cuda_array,
    as_host_array,
    check,
    counts,
    from_array_interface,
    from_cuda_array_interface,
    total,
)

__all__ = [
    "ArrayView",
    "Buffer",
    "Counts",
    "CudaArrayView",
    "CudaMask",
    "DeviceMatrix",
    "Grid",
    "HostArrayView",
    "HostMask",
    "Violation",
    "as_cuda_array",
    "as_host_array",
    "check",
    "check_descriptor",
    "counts",
    "from_array_interface",
    "from_cuda_array_interface",
    "total",
]


def check_descriptor(desc, interface="cuda"):
    """Check a descriptor dict itself: ``interface`` is ``"cuda"``
    (``__cuda_array_interface__``) or ``"host"`` (``__array_interface__``)."""
    if interface == "cuda":
        return check(_Namespace(__cuda_array_interface__=desc))
    if interface == "host":
        return check(_Namespace(__array_interface__=desc))
    raise ValueError(f"interface must be 'cuda' or 'host', not {interface!r}")
