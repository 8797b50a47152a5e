"""cai: the CUDA Array Interface and NumPy array interface for Rust types.

Import foreign arrays into validated views that keep their owner alive
(``from_cuda_array_interface``, ``as_cuda_array``, ``from_array_interface``,
``as_host_array``, and ``from_dlpack`` for any DLPack producer), and check any object's
interface against the spec (``check``, whose ``CheckReport`` is true when the object
conforms, with its ``errors`` and ``warnings``). Every cai array, storage and view also speaks DLPack
(``__dlpack__``, ``__dlpack_device__``): ``numpy.from_dlpack``, ``torch.from_dlpack`` and the
like read them. ``DeviceArray`` is device memory owned by Rust that exports its
stream.

The example classes built with ``#[derive(CudaArrayInterface)]`` / ``#[derive(ArrayInterface)]``
/ ``#[derive(GtDataInterface)]`` (``Grid``, ``counts``, ``DeviceMatrix``, ``Buffer``, ``Field``,
``total``) are in ``cai.examples``.

GT4Py GDP-3 storages: ``empty``, ``zeros``, ``ones``, ``full`` and their ``_like`` forms,
``as_storage`` and ``storage`` make ``Storage`` objects with a layout, halo, alignment and
host/device mirrors, each an instance of the GDP-3 storage type its buffers
make it (``CPUStorage``, ``GPUStorage``, ``SoftwareManagedGPUStorage`` or
``CUDAManagedGPUStorage``); ``gt_data(obj)`` reads any object's
``__gt_data_interface__``, falling back to its array interfaces.

The CUDA driver is loaded when first needed (``cuda_available()`` says whether it can be, and
why not): imports of device memory check the pointer with it and order the consumer's
stream after the producer's (an event wait by default; ``mode="synchronize"`` blocks
instead; ``sync=False`` or ``set_ignore_streams(True)`` / ``CAI_CUDA_ARRAY_INTERFACE_SYNC=0``
skip it). Producers export ``stream: None`` always after ``set_export_stream_none(True)`` or
with ``CAI_CUDA_ARRAY_INTERFACE_EXPORT_STREAM_NONE=1``.
"""


from . import _native

__version__ = _native.__version__

from ._native import (
    ArrayView,
    CudaArrayView,
    CudaMask,
    HostArrayView,
    HostMask,
    Violation,
    DeviceArray,
    as_cuda_array,
    as_host_array,
    from_array_interface,
    from_cuda_array_interface,
    from_dlpack,
    cuda_available,
    export_stream_none,
    ignore_streams,
    pointer_attributes,
    set_export_stream_none,
    set_ignore_streams,
)
from ._native import (
    GtDataView,
    GtHook,
    Storage,
    CPUStorage,
    GPUStorage,
    SoftwareManagedGPUStorage,
    CUDAManagedGPUStorage,
    SyncState,
    GTNoSuchBufferError,
    gt_data,
    empty,
    zeros,
    ones,
    full,
    empty_like,
    zeros_like,
    ones_like,
    full_like,
    as_storage,
    storage,
)

# GDP-3 names two storage types in more than one way.
GT4PySyncedGPUStorage = SoftwareManagedGPUStorage
CUDASyncedGPUStorage = CudaManagedGPUStorage = CUDAManagedGPUStorage

from ._report import CheckReport, check, check_descriptor
from . import examples

__all__ = [
    "ArrayView",
    "CudaArrayView",
    "CudaMask",
    "DeviceArray",
    "HostArrayView",
    "HostMask",
    "Violation",
    "as_cuda_array",
    "as_host_array",
    "CheckReport",
    "check",
    "check_descriptor",
    "from_array_interface",
    "from_cuda_array_interface",
    "from_dlpack",
    "cuda_available",
    "export_stream_none",
    "ignore_streams",
    "pointer_attributes",
    "set_export_stream_none",
    "set_ignore_streams",
    "GtDataView",
    "GtHook",
    "Storage",
    "CPUStorage",
    "GPUStorage",
    "SoftwareManagedGPUStorage",
    "CUDAManagedGPUStorage",
    "GT4PySyncedGPUStorage",
    "CUDASyncedGPUStorage",
    "CudaManagedGPUStorage",
    "SyncState",
    "GTNoSuchBufferError",
    "gt_data",
    "empty",
    "zeros",
    "ones",
    "full",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "as_storage",
    "storage",
    "examples",
]

