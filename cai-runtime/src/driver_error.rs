//! [`DriverError`]: a failed CUDA driver call and its `CUresult`, the codes this crate meets
//! named as in `cuda.h` (one line each), and their names without a driver. A leaf: the other
//! errors ([`crate::StreamError`], [`crate::CopyToHostError`]) wrap it.

/// A CUDA driver call that failed: which call, and the `CUresult` it returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{operation} failed: {} ({code}){}", driver_error_name(*code), self.hint())]
pub struct DriverError {
    /// The driver call (`"cuInit"`, `"cuEventRecord"`...).
    pub operation: &'static str,
    /// The `CUresult` it returned: one of the `CUDA_ERROR_*` constants below where this crate
    /// knows it.
    pub code: u32,
}

/// Defines each `CUresult` code this crate meets in one line: an associated constant of
/// [`DriverError`] named as in `cuda.h`, and [`driver_error_name`]'s table from the same lines.
macro_rules! cu_results {
    ($($(#[$doc:meta])* $name:ident = $code:literal,)*) => {
        /// The `CUresult` codes this crate meets, named as in `cuda.h` (tests check the names
        /// against cust's bindings of `cuda.h` and against a driver).
        impl DriverError {
            $($(#[$doc])* pub const $name: u32 = $code;)*
        }

        /// The `CUresult` name for the codes this crate meets (`cuGetErrorName` needs a driver,
        /// and a message about a missing driver must not).
        pub fn driver_error_name(code: u32) -> &'static str {
            match code {
                $(DriverError::$name => stringify!($name),)*
                _ => "CUDA error",
            }
        }
    };
}

cu_results! {
    /// Success (never the code of a `DriverError`).
    CUDA_SUCCESS = 0,
    /// An argument is out of range.
    CUDA_ERROR_INVALID_VALUE = 1,
    /// An allocation failed: device memory is exhausted.
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    /// `cuInit` has not been called (or failed).
    CUDA_ERROR_NOT_INITIALIZED = 3,
    /// The driver is shutting down.
    CUDA_ERROR_DEINITIALIZED = 4,
    /// The libcuda found is a stub (a build machine's), not a driver.
    CUDA_ERROR_STUB_LIBRARY = 34,
    /// The installed driver is older than the CUDA version needs, or there is none: the CUDA
    /// runtime's code (`cudaErrorInsufficientDriver`), which the driver API lacks and a driver
    /// does not name; cai reports it when no driver loads ([`DriverError::NO_DRIVER`]).
    CUDA_ERROR_INSUFFICIENT_DRIVER = 35,
    /// No CUDA-capable device is visible.
    CUDA_ERROR_NO_DEVICE = 100,
    /// A device ordinal that is no device.
    CUDA_ERROR_INVALID_DEVICE = 101,
    /// A kernel image that is not valid for the device.
    CUDA_ERROR_INVALID_IMAGE = 200,
    /// No context is current, or the context given is not one.
    CUDA_ERROR_INVALID_CONTEXT = 201,
    /// A handle (stream, event) that is not, or no longer, alive.
    CUDA_ERROR_INVALID_HANDLE = 400,
    /// A named symbol (a driver entry point, a module's global) was not found.
    CUDA_ERROR_NOT_FOUND = 500,
    /// Work is still pending (an event or stream query).
    CUDA_ERROR_NOT_READY = 600,
    /// A kernel accessed an invalid address; the context is unusable.
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    /// The context was destroyed.
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    /// A kernel failed; the context is unusable.
    CUDA_ERROR_LAUNCH_FAILED = 719,
    /// The operation is not supported here.
    CUDA_ERROR_NOT_SUPPORTED = 801,
    /// An unknown internal error (what a driver without a usable device may report).
    CUDA_ERROR_UNKNOWN = 999,
}

impl DriverError {
    /// No driver could be loaded: the machine has no `libcuda.so.1` (no NVIDIA driver). Its code
    /// is the one the CUDA runtime reports then (`CUDA_ERROR_INSUFFICIENT_DRIVER`).
    pub const NO_DRIVER: DriverError = DriverError {
        operation: "loading libcuda.so.1",
        code: Self::CUDA_ERROR_INSUFFICIENT_DRIVER,
    };

    /// The current context is one of the caller's own (made with `cuCtxCreate`: cust's legacy
    /// contexts), not its device's primary context: another owner may destroy it at any time,
    /// so cai makes nothing in it that safe code could use after that
    /// ([`crate::cuda::DeviceAllocation::new`], [`crate::cuda::DriverStream::new`]).
    pub const NOT_PRIMARY_CONTEXT: DriverError = DriverError {
        operation: "making a driver object in the current context",
        code: Self::CUDA_ERROR_INVALID_CONTEXT,
    };

    /// Whether the error means there is no usable CUDA driver or device here, so that tests
    /// needing one are skipped rather than failed.
    pub fn is_no_device(&self) -> bool {
        matches!(
            self.code,
            Self::CUDA_ERROR_STUB_LIBRARY
                | Self::CUDA_ERROR_INSUFFICIENT_DRIVER
                | Self::CUDA_ERROR_NO_DEVICE
                | Self::CUDA_ERROR_UNKNOWN
        )
    }

    /// Whether the driver did not know a handle it was given (`CUDA_ERROR_INVALID_HANDLE`): a
    /// stream or event that is not, or no longer, alive.
    pub fn is_invalid_handle(&self) -> bool {
        self.code == Self::CUDA_ERROR_INVALID_HANDLE
    }
}

impl DriverError {
    /// What the user can do about it, where the code says.
    fn hint(&self) -> &'static str {
        if *self == Self::NO_DRIVER {
            return ": no NVIDIA driver here; install it to use a GPU";
        }
        if *self == Self::NOT_PRIMARY_CONTEXT {
            return ": it is a context of the caller's own, not the device's primary context, and could be destroyed before the object; make the primary context current (cai_runtime::cuda::ensure_context, cust's Context::new, cudarc's CudaContext), or use the unsafe `in_current_context` constructors";
        }
        driver_error_hint(self.code)
    }
}

fn driver_error_hint(code: u32) -> &'static str {
    match code {
        DriverError::CUDA_ERROR_STUB_LIBRARY => {
            ": this libcuda is a stub (a build without the CUDA driver); install the NVIDIA driver to use a GPU"
        }
        DriverError::CUDA_ERROR_INSUFFICIENT_DRIVER => {
            ": the installed NVIDIA driver is older than this CUDA version needs"
        }
        DriverError::CUDA_ERROR_NO_DEVICE => {
            ": no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_call_the_code_and_what_to_do() {
        let e = |code| DriverError {
            operation: "cuInit",
            code,
        };
        assert_eq!(
            e(100).to_string(),
            "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)"
        );
        assert!(
            e(34)
                .to_string()
                .starts_with("cuInit failed: CUDA_ERROR_STUB_LIBRARY (34): this libcuda is a stub")
        );
        assert!(e(35).to_string().starts_with(
            "cuInit failed: CUDA_ERROR_INSUFFICIENT_DRIVER (35): the installed NVIDIA driver is older"
        ));
        assert_eq!(
            e(400).to_string(),
            "cuInit failed: CUDA_ERROR_INVALID_HANDLE (400)"
        );
        assert_eq!(e(12345).to_string(), "cuInit failed: CUDA error (12345)");
        let no_device: Vec<u32> = (0..1000).filter(|c| e(*c).is_no_device()).collect();
        assert_eq!(no_device, [34, 35, 100, 999]);
        let invalid: Vec<u32> = (0..1000).filter(|c| e(*c).is_invalid_handle()).collect();
        assert_eq!(invalid, [400]);
    }

    /// Each name is checked against cust_raw's bindings of `cuda.h`, and every code the table
    /// names is one of these (or 35, the CUDA runtime's code for a missing driver, which the driver
    /// API lacks). tests/cuda.rs asks a real
    /// driver (`cuGetErrorName`), but skips codes the table lacks and needs a GPU; this needs
    /// neither, so a lost arm shows in CI.
    #[cfg(feature = "cust")]
    #[test]
    fn names_match_the_driver_bindings() {
        use cust::sys::cudaError_enum as R;
        let bound = [
            (R::CUDA_SUCCESS, "CUDA_SUCCESS"),
            (R::CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"),
            (R::CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"),
            (R::CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"),
            (R::CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED"),
            (R::CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"),
            (R::CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"),
            (R::CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"),
            (R::CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"),
            (R::CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"),
            (R::CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"),
            (R::CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"),
            (R::CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"),
            (R::CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"),
            (
                R::CUDA_ERROR_CONTEXT_IS_DESTROYED,
                "CUDA_ERROR_CONTEXT_IS_DESTROYED",
            ),
            (R::CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"),
            (R::CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"),
            (R::CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"),
        ];
        for (code, name) in bound {
            assert_eq!(driver_error_name(code as u32), name);
        }
        let named: Vec<u32> = (0..1000)
            .filter(|c| driver_error_name(*c) != "CUDA error")
            .collect();
        let mut expected: Vec<u32> = bound.iter().map(|(code, _)| *code as u32).collect();
        expected.push(35);
        expected.sort_unstable();
        assert_eq!(named, expected);
    }
}
