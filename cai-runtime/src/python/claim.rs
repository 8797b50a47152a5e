//! Which host imports Rust code reads and writes, so that no two imports of the same memory
//! (two `ForeignArray`s of one NumPy array, or of overlapping slices of it) let safe Rust hold
//! a `&mut` to items that something else reads or writes: rust-numpy's borrow checking, for
//! the bytes an import spans.
//!
//! A typed view ([`Typed`](super::Typed), [`TypedMut`](super::TypedMut)) and a copy
//! (`to_bytes`) claim the bytes an import spans while they live; an ndarray view (`as_array`,
//! `as_array_mut`) claims them from its first view until the import is dropped (the view
//! borrows the import, so the claim outlives every view; an `ArrayView` has no drop to end it
//! sooner). Claims of different imports that overlap must agree:
//!
//! | held \ asked | `Read` (`typed`) | `Write` (`typed_mut`) | `Shared` (`as_array`) | `Unique` (`as_array_mut`) |
//! |---|---|---|---|---|
//! | `Read` | yes | no | yes | no |
//! | `Write` | no | no | no | no |
//! | `Shared` | yes | no | yes | no |
//! | `Unique` | no | no | no | no |
//!
//! Readers share, a writer is alone: an import is `Sync`, so two imports used on two threads
//! would otherwise read and write the same bytes at once (a data race), and a reference
//! promises that the bytes do not change (`Shared`) or that nothing else sees them (`Unique`).
//! Within one import Rust's own borrows order these, so an import never conflicts with itself.
//!
//! The registry is this extension module's: imports made by another extension (another
//! crate's copy of cai) and Python code that writes the array while a view is alive are not
//! seen, as rust-numpy's borrow checking does not see them either.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::foreign::ViewError;

/// How Rust code accesses an import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Access {
    /// Raw reads (`Typed`, `to_bytes`).
    Read = 1,
    /// Raw writes (`TypedMut`).
    Write = 2,
    /// Shared references (`as_array`).
    Shared = 4,
    /// A unique reference (`as_array_mut`).
    Unique = 8,
}

impl Access {
    /// Whether another import's claims `held` (a set of accesses) exclude this access.
    fn excluded_by(self, held: u8) -> bool {
        let has = |a: Access| held & a as u8 != 0;
        match self {
            Access::Write | Access::Unique => held != 0,
            Access::Read | Access::Shared => has(Access::Write) || has(Access::Unique),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "written",
            Access::Shared => "viewed (as_array)",
            Access::Unique => "viewed mutably (as_array_mut)",
        }
    }
}

struct Entry {
    /// The import's id.
    owner: u64,
    /// 0 for the import's lasting claim, else a scoped claim's own number.
    scope: u64,
    lo: u128,
    hi: u128,
    held: u8,
}

static CLAIMS: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn claims() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    // The registry's entries are consistent whenever the lock is released (no code that can
    // panic runs under it), so a poisoned lock's data is sound.
    CLAIMS.lock().unwrap_or_else(|e| e.into_inner())
}

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// One import's claims; all released when it is dropped.
#[derive(Debug, Default)]
pub(crate) struct Claim {
    /// The import's id in the registry; 0 while it has claimed nothing.
    id: AtomicU64,
}

/// A claim that lasts as long as this value (a typed view, a copy).
#[derive(Debug)]
#[must_use]
pub(crate) struct Scoped {
    scope: u64,
}

impl Claim {
    /// A claim that will claim at once, its id taken now (a default one takes it at its first
    /// claim, which costs one atomic operation more).
    #[cfg(feature = "ndarray")]
    pub(crate) fn new() -> Self {
        Claim {
            id: AtomicU64::new(next_id()),
        }
    }

    fn id(&self) -> u64 {
        match self.id.load(Ordering::Relaxed) {
            0 => {
                let id = next_id();
                match self
                    .id
                    .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => id,
                    Err(other) => other,
                }
            }
            id => id,
        }
    }

    /// Claims `access` to the bytes `[lo, hi)` (addresses) until the import is dropped,
    /// refused when another import's claim on overlapping bytes excludes it. Empty ranges
    /// claim nothing.
    pub(crate) fn lasting(&self, lo: u128, hi: u128, access: Access) -> Result<(), ViewError> {
        self.add(lo, hi, access, 0).map(|_| ())
    }

    /// [`Self::lasting`], for as long as the returned value lives.
    pub(crate) fn scoped(&self, lo: u128, hi: u128, access: Access) -> Result<Scoped, ViewError> {
        self.add(lo, hi, access, next_id())
            .map(|scope| Scoped { scope })
    }

    fn add(&self, lo: u128, hi: u128, access: Access, scope: u64) -> Result<u64, ViewError> {
        if lo >= hi {
            return Ok(0);
        }
        let owner = self.id();
        let mut claims = claims();
        if let Some(other) = claims
            .iter()
            .find(|e| e.owner != owner && e.lo < hi && lo < e.hi && access.excluded_by(e.held))
        {
            let held = [Access::Unique, Access::Shared, Access::Write, Access::Read]
                .into_iter()
                .find(|a| other.held & *a as u8 != 0)
                .unwrap_or(Access::Read);
            return Err(ViewError::Claimed {
                asked: access.name(),
                held: held.name(),
            });
        }
        match claims
            .iter_mut()
            .find(|e| scope == 0 && e.owner == owner && e.scope == 0)
        {
            Some(e) => {
                e.held |= access as u8;
                e.lo = e.lo.min(lo);
                e.hi = e.hi.max(hi);
            }
            None => claims.push(Entry {
                owner,
                scope,
                lo,
                hi,
                held: access as u8,
            }),
        }
        Ok(scope)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let id = *self.id.get_mut();
        if id != 0 {
            claims().retain(|e| e.owner != id);
        }
    }
}

impl Drop for Scoped {
    fn drop(&mut self) {
        if self.scope != 0 {
            claims().retain(|e| e.scope != self.scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_claims_follow_the_table() {
        use Access::*;
        let all = [Read, Write, Shared, Unique];
        let allowed = |held: Access, asked: Access| {
            !matches!((held, asked), (Unique | Write, _) | (_, Unique | Write))
        };
        for held in all {
            for asked in all {
                let (a, b) = (Claim::default(), Claim::default());
                a.lasting(0x1000, 0x1010, held).unwrap();
                // Overlapping by one byte.
                let got = b.scoped(0x100f, 0x1020, asked);
                assert_eq!(got.is_ok(), allowed(held, asked), "{held:?} then {asked:?}");
                drop(got);
                // Disjoint bytes never conflict; the import's own claims never do.
                Claim::default().lasting(0x1010, 0x1020, asked).unwrap();
                let _own = a.scoped(0x1000, 0x1010, asked).unwrap();
            }
        }
    }

    #[test]
    fn a_dropped_claim_is_released() {
        let a = Claim::default();
        a.lasting(0x2000, 0x2008, Access::Unique).unwrap();
        let b = Claim::default();
        let err = b.scoped(0x2000, 0x2008, Access::Read).unwrap_err();
        assert!(err.to_string().contains("viewed mutably"), "{err}");
        drop(a);
        let read = b.scoped(0x2000, 0x2008, Access::Read).unwrap();
        // A scoped claim ends with its value, not with its import.
        let c = Claim::default();
        assert!(c.lasting(0x2000, 0x2008, Access::Unique).is_err());
        drop(read);
        c.lasting(0x2000, 0x2008, Access::Unique).unwrap();
        // Empty ranges claim nothing.
        let d = Claim::default();
        d.lasting(0x2004, 0x2004, Access::Unique).unwrap();
    }
}
