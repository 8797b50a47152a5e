//! `cargo run -p cudarc-example`: cudarc memory and the CUDA Array Interface,
//! both ways.
//!
//! - A struct holding a `CudaSlice<f32>` and its `Arc<CudaStream>` derives `CudaArrayInterface`:
//!   its `__cuda_array_interface__` dict, as Python sees it (Python is embedded here).
//! - That dict imported back, as a consumer of any producer's array would be: a cudarc view of
//!   its items, on the stream the import ordered them for, which cannot outlive the import and
//!   never frees the memory.
//! - With a GPU, a kernel from PTX text doubles the items through that view, and the struct's
//!   slice shows it. Without one (no driver, or the emulated driver, which runs no kernels) the
//!   example says what it skipped.

use std::sync::Arc;

use cai_runtime::python::{ForeignDeviceArray, cuda_array_interface};
use cai_runtime::sync::ImportOptions;
use cai_runtime::{AsStream, CudaArrayInterface, LiveStream, cuda};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use pyo3::prelude::*;

/// A signal in device memory, exported with the stream its work is on.
#[derive(CudaArrayInterface)]
struct Signal {
    #[cai(data)]
    samples: CudaSlice<f32>,
    #[cai(stream)]
    stream: Arc<CudaStream>,
}

/// `x[i] *= 2` for `i < n`: PTX text, loaded by the driver (no compiler needed).
const DOUBLE: &str = r#"
.version 7.0
.target sm_52
.address_size 64
.visible .entry double_them(.param .u64 items, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<5>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [items];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r1, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r1;
    setp.ge.u32 %p, %r1, %r2;
    @%p bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f2, %f1, %f1;
    st.global.f32 [%rd4], %f2;
DONE:
    ret;
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // cudarc panics where it finds no driver library: cai's own loader says why first.
    if let Err(e) = cuda::init() {
        println!("skipped: no CUDA device here ({e})");
        return Ok(());
    }
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let host: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let signal = Signal {
        samples: stream.clone_htod(&host)?,
        stream: stream.clone(),
    };
    println!("device {}: {}", ctx.ordinal(), cuda::device_name(0)?);

    Python::attach(|py| -> PyResult<()> {
        // Export: the dict Python reads (a pyclass with `#[cai(python)]` returns it from its
        // `__cuda_array_interface__` property).
        let dict = cuda_array_interface(py, &signal, None)?;
        println!("__cuda_array_interface__ = {dict}");

        // Import: as any producer's array, for work on our stream.
        let options = ImportOptions {
            // SAFETY: our stream, which outlives every import made with these options (both end
            // with this closure's scope or later).
            consumer: unsafe { LiveStream::new(stream.cai_stream().expect("a stream")) },
            ..ImportOptions::default()
        };
        // SAFETY: the dict describes `signal`'s slice, which outlives the import (both end
        // with this closure's scope or later).
        let mut import = unsafe { ForeignDeviceArray::from_interface_with(&dict, None, &options)? };
        println!("imported: sync plan {:?}", import.sync_plan());
        let mut items = import.cudarc_view_mut::<f32>(&stream)?;
        println!(
            "as cudarc: {:?}, read back {:?}",
            items,
            stream.clone_dtoh(&items.view()).map_err(err)?
        );

        match ctx
            .load_module(Ptx::from_src(DOUBLE))
            .and_then(|m| m.load_function("double_them"))
        {
            Ok(double) => {
                let n = items.len() as u32;
                let mut view = items.view_mut().expect("writable");
                let mut launch = stream.launch_builder(&double);
                launch.arg(&mut view).arg(&n);
                // SAFETY: the kernel reads and writes `n` f32s at the view's address, which
                // holds exactly `n`.
                unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }.map_err(err)?;
                drop(items);
                println!(
                    "doubled on the device: {:?}",
                    stream.clone_dtoh(&signal.samples).map_err(err)?
                );
            }
            Err(e) => println!("skipped the kernel: the driver cannot load PTX here ({e})"),
        }
        Ok(())
    })?;
    Ok(())
}

fn err(e: impl std::fmt::Display) -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err(e.to_string())
}
