from typing import Any, Literal

from ._native import (
    ArrayView as ArrayView,
    Buffer as Buffer,
    Counts as Counts,
    CudaArrayView as CudaArrayView,
    CudaMask as CudaMask,
    DeviceMatrix as DeviceMatrix,
    Grid as Grid,
    HostArrayView as HostArrayView,
    HostMask as HostMask,
    Violation as Violation,
    as_cuda_array as as_cuda_array,
    as_host_array as as_host_array,
    check as check,
    counts as counts,
    from_array_interface as from_array_interface,
    from_cuda_array_interface as from_cuda_array_interface,
    total as total,
)

def check_descriptor(desc: dict[str, Any], interface: Literal["cuda", "host"] = "cuda") -> list[Violation]: ...
