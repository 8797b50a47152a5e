from ._native import (
    ArrayView as ArrayView,
    CudaArrayView as CudaArrayView,
    CudaMask as CudaMask,
    HostArrayView as HostArrayView,
    HostMask as HostMask,
    Violation as Violation,
    as_cuda_array as as_cuda_array,
    as_host_array as as_host_array,
    from_array_interface as from_array_interface,
    from_cuda_array_interface as from_cuda_array_interface,
    from_dlpack as from_dlpack,
    GtDataView as GtDataView,
    GtHook as GtHook,
    Storage as Storage,
    CPUStorage as CPUStorage,
    GPUStorage as GPUStorage,
    SoftwareManagedGPUStorage as SoftwareManagedGPUStorage,
    CUDAManagedGPUStorage as CUDAManagedGPUStorage,
    SyncState as SyncState,
    GTNoSuchBufferError as GTNoSuchBufferError,
    gt_data as gt_data,
    empty as empty,
    zeros as zeros,
    ones as ones,
    full as full,
    empty_like as empty_like,
    zeros_like as zeros_like,
    ones_like as ones_like,
    full_like as full_like,
    as_storage as as_storage,
    storage as storage,
    __version__ as __version__,
    cuda_available as cuda_available,
    pointer_attributes as pointer_attributes,
    set_export_stream_none as set_export_stream_none,
    export_stream_none as export_stream_none,
    set_ignore_streams as set_ignore_streams,
    ignore_streams as ignore_streams,
)
from ._native import DeviceArray as DeviceArray
from . import examples as examples
from ._report import (
    CheckReport as CheckReport,
    check as check,
    check_descriptor as check_descriptor,
)

GT4PySyncedGPUStorage = SoftwareManagedGPUStorage
CUDASyncedGPUStorage = CUDAManagedGPUStorage
CudaManagedGPUStorage = CUDAManagedGPUStorage

