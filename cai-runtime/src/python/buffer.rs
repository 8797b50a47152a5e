//! What an import holds so that the bytes it reads stay valid ([`Held`]), and host
//! descriptors whose bytes come through the buffer protocol ([`HeldBuffer`]).
//!
//! Besides the owner, an imported array's bytes may depend on the descriptor dict itself
//! (NumPy's scalars export a temporary array that only the dict's `'__ref'` key keeps alive),
//! on a mask object and its own dict (a producer may build both on every access), and on
//! buffers held through the buffer protocol. An import keeps all of them for as long as its
//! view lives; of a dict, its entries taken before it is read: what the dict held then, which
//! the producer may replace in its own dict later.
//!
//! NumPy's array interface lets `data` be, besides a `(pointer, read-only flag)` tuple, an
//! object exposing the buffer protocol, or be absent or `None`, meaning the buffer of the
//! object exposing `__array_interface__` itself; `offset` then skips that many bytes of the
//! buffer. Pillow's images, for one, export `data` as `bytes`.
//!
//! Where NumPy takes the buffer's address and releases it at once, the import holds the buffer
//! for as long as the view lives: until it is released, its exporter must keep the memory where
//! it is (a `bytearray` refuses to resize with `BufferError`), and the described bytes are
//! checked to lie inside it.

use std::fmt;

#[cfg(any(not(Py_LIMITED_API), Py_3_11))]
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::parse::{ExcKind, Problem, show, type_name};
use super::rules;

/// What keeps an imported array's bytes valid besides its owner: the Python objects they
/// depend on (the entries of descriptor dicts, mask objects) and the buffers they lie in.
/// Dropping it releases them.
#[derive(Debug, Default)]
pub struct Held {
    objects: Vec<Py<PyAny>>,
    buffers: Vec<HeldBuffer>,
    /// Consumed DLPack tensors, whose deleters run when this drops (an import holds one: kept
    /// inline, no allocation).
    tensors: smallvec::SmallVec<[super::dlpack::ImportedTensor; 1]>,
    /// An import's owner, released last.
    owner: Option<Py<PyAny>>,
    /// A NumPy array owner held a second time, as the export NumPy's `__dlpack__` makes holds
    /// it besides its consumer: `ndarray.resize` moves the memory of an array it counts no
    /// more than two references to (its caller's and one other), so a view holding the only
    /// other one would be left reading freed memory.
    pinned: Option<Py<PyAny>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Releasing a foreign object can run its code (an extension type's deallocation that
        // calls Python, a DLPack deleter, a buffer's release), and this may drop while the
        // user's exception is being raised (the view a temporary): put it aside meanwhile, once
        // for everything.
        let owner_only =
            self.objects.is_empty() && self.buffers.is_empty() && self.tensors.is_empty();
        if owner_only {
            let Some(owner) = self.owner.take() else {
                return;
            };
            // The common release, an owner that another reference keeps alive, runs no foreign
            // code: nothing is put aside.
            let p = owner.as_ptr();
            let ours = 1 + isize::from(self.pinned.is_some());
            // SAFETY: `p` is a live object (held); its count is read holding the GIL.
            if super::interp::holds_gil() && unsafe { pyo3::ffi::Py_REFCNT(p) } > ours {
                // SAFETY: the GIL is held, and the references given up here (the owner's, and
                // the pinned one to the same object) are not the last: the object is not
                // deallocated.
                unsafe {
                    if let Some(pinned) = self.pinned.take() {
                        pyo3::ffi::Py_DECREF(pinned.into_ptr());
                    }
                    pyo3::ffi::Py_DECREF(owner.into_ptr());
                }
                return;
            }
            self.owner = Some(owner);
        }
        let nothing = owner_only && self.owner.is_none();
        if nothing {
            return;
        }
        let released = RELEASES.try_with(|r| {
            let depth = r.depth.get();
            if depth >= MAX_NESTED
                && let Ok(mut deferred) = r.deferred.try_borrow_mut()
            {
                deferred.push(std::mem::take(self));
                return;
            }
            let _restored = RestoreDepth(&r.depth, depth);
            r.depth.set(depth + 1);
            self.release_now();
            if depth == 0 {
                // The outermost release runs the deferred ones, each nesting afresh.
                while let Some(mut held) =
                    r.deferred.try_borrow_mut().ok().and_then(|mut d| d.pop())
                {
                    held.release_now();
                }
            }
        });
        if released.is_err() {
            // (The thread is ending: its count is gone. Released at once, as it always was.)
            self.release_now();
        }
    }
}

/// How deeply releases may nest on a thread before [`Held::drop`] defers them to the outermost.
/// Releasing a view can release another (a chain of views, each holding the one it was made
/// of, is released one inside the other): without a bound, the C stack grows with the chain
/// and overflows past ~20,000 links. This is CPython's "trashcan", which PyO3's deallocation
/// lacks.
const MAX_NESTED: u32 = 50;

/// This thread's releases of what imports held: how deeply they nest now, and those deferred
/// past [`MAX_NESTED`] for the outermost release to run.
struct Releases {
    depth: std::cell::Cell<u32>,
    deferred: std::cell::RefCell<Vec<Held>>,
}

thread_local! {
    static RELEASES: Releases = const {
        Releases {
            depth: std::cell::Cell::new(0),
            deferred: std::cell::RefCell::new(Vec::new()),
        }
    };
}

/// Sets a thread's release depth back as a release ends, also where it unwinds.
struct RestoreDepth<'a>(&'a std::cell::Cell<u32>, u32);

impl Drop for RestoreDepth<'_> {
    fn drop(&mut self) {
        self.0.set(self.1);
    }
}

impl Held {
    /// Releases everything held now, the user's pending exception put aside meanwhile.
    fn release_now(&mut self) {
        super::errors::calling_foreign_code("the release of what an import held", || {
            self.objects.clear();
            self.buffers.clear();
            self.tensors.clear();
            drop(self.pinned.take());
            drop(self.owner.take());
        });
    }
}

impl Held {
    /// Visits the Python objects held (the owner and the others; not the exporters of buffers
    /// and tensors, which Python cannot see), for the garbage collector's traversal of an
    /// object that holds this: a cycle through them is then collected.
    pub fn traverse(&self, visit: &pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        // (The pinned owner twice: each reference held is visited.)
        for o in self.owner.iter().chain(&self.pinned).chain(&self.objects) {
            visit.call(o)?;
        }
        Ok(())
    }

    /// Keeps `obj` alive (until this drops, with the user's pending exception put aside).
    pub fn object(&mut self, obj: &Bound<'_, PyAny>) {
        self.objects.push(obj.clone().unbind());
    }

    /// Holds `owner` as the import's owner (released last); a NumPy array twice (`pinned`).
    #[inline]
    pub(crate) fn set_owner(&mut self, owner: Option<&Bound<'_, PyAny>>) {
        self.owner = owner.map(|o| o.clone().unbind());
        self.pinned = owner
            .filter(|o| super::dlpack::is_ndarray(o))
            .map(|o| o.clone().unbind());
    }

    /// The import's owner.
    pub(crate) fn owner<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.owner.as_ref().map(|o| o.bind(py).clone())
    }

    /// Takes everything held but the owner.
    pub(crate) fn take_all_but_owner(&mut self) -> Held {
        let (owner, pinned) = (self.owner.take(), self.pinned.take());
        let taken = std::mem::take(self);
        (self.owner, self.pinned) = (owner, pinned);
        taken
    }

    /// Keeps what descriptor `desc` holds as it is now: its entries (the producer may change
    /// its dict later, or while it is read, reaching it through a weakref or the garbage
    /// collector, and drop what kept the data alive), or `desc` itself when it is no dict.
    /// Taken before the dict is read, whose reading runs the producer's code. The entries are
    /// the dict's own storage (`PyDict_Items`), never what a subclass's `keys` or `__iter__`
    /// would say.
    pub(crate) fn snapshot(&mut self, desc: &Bound<'_, PyAny>) -> PyResult<()> {
        match desc.cast::<PyDict>() {
            Ok(dict) => self.objects.push(dict.items().into_any().unbind()),
            Err(_) => self.object(desc),
        }
        Ok(())
    }

    /// Holds `buffer`.
    pub(crate) fn buffer(&mut self, buffer: HeldBuffer) {
        self.buffers.push(buffer);
    }

    /// Holds a consumed DLPack tensor (its deleter runs when this drops).
    pub(crate) fn tensor(&mut self, tensor: super::dlpack::ImportedTensor) {
        self.tensors.push(tensor);
    }

    /// Takes over everything `other` holds (its owner as an object kept, twice where pinned).
    pub(crate) fn extend(&mut self, mut other: Held) {
        self.objects.append(&mut other.objects);
        self.buffers.append(&mut other.buffers);
        self.tensors.append(&mut other.tensors);
        self.objects.extend(other.owner.take());
        self.objects.extend(other.pinned.take());
    }

    /// The buffers held (host bytes shared through the buffer protocol).
    pub fn buffers(&self) -> &[HeldBuffer] {
        &self.buffers
    }
}

/// A buffer held through the buffer protocol: contiguous bytes that stay where they are until
/// it is dropped.
pub struct HeldBuffer {
    /// Released when dropped (the exporter's code, `__release_buffer__`, may run): as part of
    /// a `Held`, whose release puts the user's pending exception aside.
    buffer: PyUntypedBuffer,
}

impl HeldBuffer {
    /// Holds `obj`'s buffer; `why` begins messages, saying where the object came from.
    pub(super) fn get(obj: &Bound<'_, PyAny>, why: &str) -> Result<HeldBuffer, Problem> {
        let buffer = PyUntypedBuffer::get(obj).map_err(|e| {
            // TypeError and BufferError say "no buffer"; anything else was raised by the
            // exporter's own code, and propagates as it is.
            let py = obj.py();
            if !e.is_instance_of::<PyTypeError>(py) && !e.is_instance_of::<PyBufferError>(py) {
                return Problem::raised("data", e);
            }
            Problem::new(
                "data",
                ExcKind::Type,
                rules::DATA_BUFFER,
                format!(
                    "{why}{} ({}) has no buffer to share ({e}): expected a (pointer, read-only flag) tuple or an object exposing the buffer protocol",
                    show(obj),
                    type_name(obj)
                ),
            )
        })?;
        if !(buffer.is_c_contiguous() || buffer.is_fortran_contiguous()) {
            return Err(Problem::new(
                "data",
                ExcKind::Value,
                rules::DATA_BUFFER,
                format!(
                    "{why}the buffer of {} is not contiguous (strides {:?}): the array interface describes its bytes from one start",
                    show(obj),
                    buffer.strides()
                ),
            ));
        }
        Ok(HeldBuffer { buffer })
    }

    /// Address of the first byte.
    pub fn start(&self) -> u64 {
        self.buffer.buf_ptr() as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.buffer.len_bytes()
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the exporter forbids writing (`bytes`, a read-only `memoryview`...).
    pub fn readonly(&self) -> bool {
        self.buffer.readonly()
    }
}

impl fmt::Debug for HeldBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldBuffer")
            .field("start", &format_args!("{:#x}", self.start()))
            .field("len", &self.len())
            .field("readonly", &self.readonly())
            .finish()
    }
}

/// A stand-in for PyO3's buffer under the stable ABI of Python 3.10, which has none: there
/// `python/mod.rs` stops the build with an error that says what to do, and this keeps that
/// error the only one. Never compiled into a program.
#[cfg(all(Py_LIMITED_API, not(Py_3_11)))]
struct PyUntypedBuffer;

#[cfg(all(Py_LIMITED_API, not(Py_3_11)))]
impl PyUntypedBuffer {
    fn get(_: &Bound<'_, PyAny>) -> PyResult<Self> {
        unreachable!("the build stops at python/mod.rs's compile_error")
    }
    fn is_c_contiguous(&self) -> bool {
        unreachable!()
    }
    fn is_fortran_contiguous(&self) -> bool {
        unreachable!()
    }
    fn strides(&self) -> &[isize] {
        unreachable!()
    }
    fn buf_ptr(&self) -> *mut u8 {
        unreachable!()
    }
    fn len_bytes(&self) -> usize {
        unreachable!()
    }
    fn readonly(&self) -> bool {
        unreachable!()
    }
}
