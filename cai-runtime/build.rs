//! PyO3's interpreter cfgs for the `python` feature: `Py_GIL_DISABLED` turns the import fast
//! path off on the free-threaded build, where a borrowed dict value is not safe to use.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(feature = "python")]
    pyo3_build_config::use_pyo3_cfgs();
    #[cfg(not(feature = "python"))]
    println!("cargo::rustc-check-cfg=cfg(Py_GIL_DISABLED)");
}
