//! The host/device mirror of a `managed="gt4py"` storage: which side was modified last
//! ([`SyncStatus`]), shared by every view of one buffer ([`SyncState`] clones share it), and the
//! copies that bring the other side up to date ([`Mirror`]).
//!
//! One deviation from GDP-3's wording, so that no write is lost: `device_to_host()` without
//! `force` when the *host* was modified (and `host_to_device()` when the device was) copies
//! nothing and leaves the state as it is, instead of flagging stale buffers as synchronized.

use std::sync::{Arc, Mutex};

/// Which buffer holds the newest data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncStatus {
    /// Host and device hold the same data (`SYNC_CLEAN`).
    Clean,
    /// The host was modified since (`SYNC_HOST_DIRTY`).
    HostDirty,
    /// The device was modified since (`SYNC_DEVICE_DIRTY`).
    DeviceDirty,
}

impl SyncStatus {
    /// GDP-3's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            SyncStatus::Clean => "SYNC_CLEAN",
            SyncStatus::HostDirty => "SYNC_HOST_DIRTY",
            SyncStatus::DeviceDirty => "SYNC_DEVICE_DIRTY",
        }
    }
}

/// Copies between the two buffers of a mirrored storage (whole buffers).
pub trait Mirror {
    /// The error a copy can fail with.
    type Error;
    /// Copies the host buffer to the device buffer.
    fn copy_host_to_device(&self) -> Result<(), Self::Error>;
    /// Copies the device buffer to the host buffer.
    fn copy_device_to_host(&self) -> Result<(), Self::Error>;
}

/// The state shared by every view of one mirrored buffer; `clone()` shares it (GDP-3: views
/// "share the same SyncState instance").
#[derive(Clone, Debug)]
pub struct SyncState(Arc<Mutex<SyncStatus>>);

impl SyncState {
    /// A new state.
    pub fn new(status: SyncStatus) -> Self {
        SyncState(Arc::new(Mutex::new(status)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SyncStatus> {
        // The state is a plain enum: a panic elsewhere cannot leave it half-written.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current state.
    pub fn status(&self) -> SyncStatus {
        *self.lock()
    }

    /// Whether `other` is the same shared state (views of one buffer).
    pub fn same_as(&self, other: &SyncState) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The host buffer was modified: the next device read copies it first.
    pub fn set_host_modified(&self) {
        *self.lock() = SyncStatus::HostDirty;
    }

    /// The device buffer was modified: the next host read copies it first.
    pub fn set_device_modified(&self) {
        *self.lock() = SyncStatus::DeviceDirty;
    }

    /// The user made the buffers equal.
    pub fn set_synchronized(&self) {
        *self.lock() = SyncStatus::Clean;
    }

    /// Copies host to device if the host was modified (or `force`); returns whether it copied.
    /// The state lock is held across the copy, so concurrent views do not copy twice.
    pub fn host_to_device<M: Mirror>(&self, m: &M, force: bool) -> Result<bool, M::Error> {
        let mut s = self.lock();
        match (*s, force) {
            (SyncStatus::HostDirty, _) | (_, true) => {
                m.copy_host_to_device()?;
                *s = SyncStatus::Clean;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Copies device to host if the device was modified (or `force`); returns whether it
    /// copied.
    pub fn device_to_host<M: Mirror>(&self, m: &M, force: bool) -> Result<bool, M::Error> {
        let mut s = self.lock();
        match (*s, force) {
            (SyncStatus::DeviceDirty, _) | (_, true) => {
                m.copy_device_to_host()?;
                *s = SyncStatus::Clean;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Copies whichever side was modified to the other; afterwards the buffers are clean.
    pub fn synchronize<M: Mirror>(&self, m: &M) -> Result<bool, M::Error> {
        let mut s = self.lock();
        let copied = match *s {
            SyncStatus::Clean => false,
            SyncStatus::HostDirty => {
                m.copy_host_to_device()?;
                true
            }
            SyncStatus::DeviceDirty => {
                m.copy_device_to_host()?;
                true
            }
        };
        *s = SyncStatus::Clean;
        Ok(copied)
    }

    /// Before reading the host side: brings it up to date.
    pub fn acquire_host<M: Mirror>(&self, m: &M) -> Result<bool, M::Error> {
        self.device_to_host(m, false)
    }

    /// Before reading the device side: brings it up to date.
    pub fn acquire_device<M: Mirror>(&self, m: &M) -> Result<bool, M::Error> {
        self.host_to_device(m, false)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::SyncStatus::*;
    use super::*;

    /// A mirror of two integers: "copies" move the value, and are recorded.
    #[derive(Default)]
    struct Fake {
        host: RefCell<i32>,
        device: RefCell<i32>,
        log: RefCell<Vec<&'static str>>,
        fail: bool,
    }

    impl Mirror for Fake {
        type Error = &'static str;
        fn copy_host_to_device(&self) -> Result<(), &'static str> {
            if self.fail {
                return Err("copy failed");
            }
            *self.device.borrow_mut() = *self.host.borrow();
            self.log.borrow_mut().push("h2d");
            Ok(())
        }
        fn copy_device_to_host(&self) -> Result<(), &'static str> {
            if self.fail {
                return Err("copy failed");
            }
            *self.host.borrow_mut() = *self.device.borrow();
            self.log.borrow_mut().push("d2h");
            Ok(())
        }
    }

    type Op = fn(&SyncState, &Fake) -> Result<bool, &'static str>;

    #[test]
    fn every_transition() {
        let ops: [(&str, Op); 9] = [
            ("host_to_device", |s, m| s.host_to_device(m, false)),
            ("host_to_device(force)", |s, m| s.host_to_device(m, true)),
            ("device_to_host", |s, m| s.device_to_host(m, false)),
            ("device_to_host(force)", |s, m| s.device_to_host(m, true)),
            ("synchronize", |s, m| s.synchronize(m)),
            ("acquire_host", |s, m| s.acquire_host(m)),
            ("acquire_device", |s, m| s.acquire_device(m)),
            ("set_host_modified", |s, _| {
                s.set_host_modified();
                Ok(false)
            }),
            ("set_device_modified", |s, _| {
                s.set_device_modified();
                Ok(false)
            }),
        ];
        // (state before, op) -> (copy made, state after)
        let expected = |before: SyncStatus, op: &str| -> (Option<&'static str>, SyncStatus) {
            match (op, before) {
                ("host_to_device", HostDirty) | ("host_to_device(force)", _) => {
                    (Some("h2d"), Clean)
                }
                ("device_to_host", DeviceDirty) | ("device_to_host(force)", _) => {
                    (Some("d2h"), Clean)
                }
                ("synchronize", HostDirty) => (Some("h2d"), Clean),
                ("synchronize", DeviceDirty) => (Some("d2h"), Clean),
                ("synchronize", Clean) => (None, Clean),
                ("acquire_host", DeviceDirty) => (Some("d2h"), Clean),
                ("acquire_device", HostDirty) => (Some("h2d"), Clean),
                ("set_host_modified", _) => (None, HostDirty),
                ("set_device_modified", _) => (None, DeviceDirty),
                (_, s) => (None, s),
            }
        };
        for before in [Clean, HostDirty, DeviceDirty] {
            for (name, op) in ops {
                let m = Fake::default();
                *m.host.borrow_mut() = 1;
                *m.device.borrow_mut() = 2;
                let s = SyncState::new(before);
                let copied = op(&s, &m).unwrap();
                let (copy, after) = expected(before, name);
                assert_eq!(m.log.borrow().first().copied(), copy, "{before:?} {name}");
                assert_eq!(copied, copy.is_some(), "{before:?} {name}");
                assert_eq!(s.status(), after, "{before:?} {name}");
                if after == Clean && copy.is_some() {
                    assert_eq!(*m.host.borrow(), *m.device.borrow(), "{before:?} {name}");
                }
            }
        }
        let s = SyncState::new(DeviceDirty);
        s.set_synchronized();
        assert_eq!(s.status(), Clean);
    }

    #[test]
    fn no_write_is_lost_and_failures_keep_the_state() {
        // Host modified; a device-to-host without force must not overwrite it.
        let m = Fake::default();
        *m.host.borrow_mut() = 7;
        let s = SyncState::new(HostDirty);
        assert_eq!(s.device_to_host(&m, false), Ok(false));
        assert_eq!((*m.host.borrow(), s.status()), (7, HostDirty));
        // A failed copy leaves the state dirty, so it is retried.
        let failing = Fake {
            fail: true,
            ..Fake::default()
        };
        assert_eq!(s.synchronize(&failing), Err("copy failed"));
        assert_eq!(s.status(), HostDirty);
    }

    #[test]
    fn views_share_one_state() {
        let a = SyncState::new(Clean);
        let view = a.clone();
        view.set_device_modified();
        assert_eq!(a.status(), DeviceDirty);
        assert!(a.same_as(&view));
        assert!(!a.same_as(&SyncState::new(Clean)));
        assert_eq!(DeviceDirty.name(), "SYNC_DEVICE_DIRTY");
    }
}
