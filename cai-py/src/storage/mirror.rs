//! `SyncState`: the host/device state one mirrored buffer's views share, and the
//! `sync_state=` argument.

use crate::args::{is_int, show};
use cai_gt::{SyncState, SyncStatus};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The shared host/device state of a mirrored storage (`managed="gt4py"`): which buffer was
/// modified last. Every view of one buffer shares one.
#[pyclass(module = "cai", name = "SyncState", frozen)]
pub struct PySyncState(pub(super) SyncState);

#[pymethods]
impl PySyncState {
    /// Both buffers hold the same data.
    #[classattr]
    const SYNC_CLEAN: u8 = 0;
    /// The host buffer was modified.
    #[classattr]
    const SYNC_HOST_DIRTY: u8 = 1;
    /// The device buffer was modified.
    #[classattr]
    const SYNC_DEVICE_DIRTY: u8 = 2;

    /// A state, for `as_storage(..., sync_state=...)`: which of the wrapped buffers is newest.
    #[new]
    #[pyo3(signature = (state = None), text_signature = "(state=0)")]
    fn new(state: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let status = match state {
            None => SyncStatus::Clean,
            Some(v) => status_of(v)?,
        };
        Ok(PySyncState(SyncState::new(status)))
    }

    /// SYNC_CLEAN, SYNC_HOST_DIRTY or SYNC_DEVICE_DIRTY.
    #[getter]
    fn state(&self) -> u8 {
        match self.0.status() {
            SyncStatus::Clean => 0,
            SyncStatus::HostDirty => 1,
            SyncStatus::DeviceDirty => 2,
        }
    }

    fn __repr__(&self) -> String {
        format!("SyncState({})", self.0.status().name())
    }

    /// Pickles (and `copy`s) by value: `SyncState(state)`, a state of its own with the same
    /// value. Sharing is a matter of one process's views of one buffer, which a copy is not.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyType>, (u8,)) {
        (slf.get_type(), (slf.get().state(),))
    }
}

/// The state an int names; any other value, of any size or type, is an error naming it.
fn status_of(state: &Bound<'_, PyAny>) -> PyResult<SyncStatus> {
    const USE: &str = "use SyncState.SYNC_CLEAN (0), SYNC_HOST_DIRTY (1) or SYNC_DEVICE_DIRTY (2)";
    if !is_int(state) {
        return Err(PyTypeError::new_err(format!(
            "state = {}: {USE}",
            show(state)
        )));
    }
    match state.extract::<i64>() {
        Ok(0) => Ok(SyncStatus::Clean),
        Ok(1) => Ok(SyncStatus::HostDirty),
        Ok(2) => Ok(SyncStatus::DeviceDirty),
        // The value as the int it is (`str(state)` would call a custom `__repr__`, and one
        // that raises would be printed as an ignored exception).
        Ok(n) => Err(PyValueError::new_err(format!("state = {n}: {USE}"))),
        Err(e) if e.is_instance_of::<PyOverflowError>(state.py()) => Err(PyValueError::new_err(
            format!("state = {}: {USE}", show(state)),
        )),
        // `__index__` itself raised: its error says more than ours would.
        Err(e) => Err(e),
    }
}

/// The argument `sync_state`: None, or a `SyncState` the wrapped buffers will share.
pub(super) fn sync_state_arg(v: &Bound<'_, PyAny>) -> PyResult<Option<SyncState>> {
    if v.is_none() {
        return Ok(None);
    }
    v.cast::<PySyncState>()
        .map(|s| Some(s.get().0.clone()))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "sync_state = {}: expected a cai.SyncState or None",
                show(v)
            ))
        })
}
