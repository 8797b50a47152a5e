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
    HAS_CUDA as HAS_CUDA,
    cuda_available as cuda_available,
    pointer_attributes as pointer_attributes,
    set_export_stream_none as set_export_stream_none,
    export_stream_none as export_stream_none,
    set_ignore_streams as set_ignore_streams,
    ignore_streams as ignore_streams,
)
from ._native import DeviceArray as DeviceArray

def check_descriptor(desc: dict[str, Any], interface: Literal["cuda", "host"] = "cuda") -> list[Violation]: ...
