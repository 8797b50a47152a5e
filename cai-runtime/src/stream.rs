//! The `stream` entry of a CUDA Array Interface v3 descriptor.
//!
//! The spec gives integers a meaning: 1 is the legacy default stream, 2 the per-thread default
//! stream, any other value a `cudaStream_t` handle, and 0 is disallowed (ambiguous between
//! `None` and the default streams). [`Stream`] cannot hold 0. `None` (no synchronization needed)
//! is `Option<Stream>::None`.

use std::fmt;
use std::num::NonZeroU64;

/// A stream a consumer must synchronize on (or enqueue its work on) before using the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    /// The legacy default stream, exported as `1`.
    LegacyDefault,
    /// The per-thread default stream, exported as `2`.
    PerThreadDefault,
    /// Any other stream: its `cudaStream_t` / `CUstream` handle, never 0, 1 or 2.
    Handle(StreamHandle),
}

/// A `cudaStream_t` handle that is neither null nor one of the default-stream sentinels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamHandle(NonZeroU64);

impl StreamHandle {
    /// The raw handle value (at least 3).
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

/// A `stream` value the spec disallows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// `stream = 0`.
    #[error(
        "`stream` = 0 is disallowed by the CUDA Array Interface: 0 is ambiguous between None and the default streams; use None (no synchronization), 1 (legacy default stream) or 2 (per-thread default stream)"
    )]
    Zero,
    /// A driver call ordering the producer's streams, or synchronizing with them, failed.
    #[error("could not order work on the exported `stream`: {0}")]
    Driver(#[from] crate::driver_error::DriverError),
    /// The exported stream would have to wait for the data's own stream, but it is a handle
    /// this crate cannot vouch for (asking the driver about a handle that is no live stream is
    /// undefined behaviour).
    #[error(
        "`stream` = {stream} cannot be ordered after the data's own stream {own}: export the data's own stream, a default stream (1, 2) or a stream field that owns its stream"
    )]
    Unordered {
        /// The exported stream.
        stream: u64,
        /// The data's own stream.
        own: u64,
    },
}

impl Stream {
    /// The stream for a `stream` integer: 1 and 2 are the default streams, 0 is refused.
    pub fn from_raw(value: u64) -> Result<Stream, StreamError> {
        match value {
            0 => Err(StreamError::Zero),
            1 => Ok(Stream::LegacyDefault),
            2 => Ok(Stream::PerThreadDefault),
            // `value` is at least 3 here.
            n => Ok(Stream::Handle(StreamHandle(
                NonZeroU64::new(n).ok_or(StreamError::Zero)?,
            ))),
        }
    }

    /// The integer exported in the `stream` entry (never 0).
    pub fn as_raw(self) -> u64 {
        match self {
            Stream::LegacyDefault => 1,
            Stream::PerThreadDefault => 2,
            Stream::Handle(h) => h.get(),
        }
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.as_raw())
    }
}

/// Types a derived struct can name as its stream with `#[cai(stream)]`: they say which stream
/// work on the data was enqueued on, or `None` when there is none pending.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a CUDA stream, so it cannot be the `stream` of a CUDA Array Interface",
    label = "not a stream",
    note = "`#[cai(stream)]` takes a field of type `cai_runtime::Stream` or `Option<cai_runtime::Stream>` (or a type implementing `cai_runtime::AsStream`)",
    note = "remove `#[cai(stream)]` if no work on the data is pending on any stream: the descriptor then exports `stream: None`"
)]
pub trait AsStream {
    /// The stream to export, or `None` when no synchronization is needed.
    fn cai_stream(&self) -> Option<Stream>;

    /// Called on every export, before the descriptor is built: a type with work pending on
    /// several streams makes the exported stream wait for all of it here (the spec's producer
    /// rule), then returns it. The default returns [`AsStream::cai_stream`].
    fn prepare_export(&self) -> Result<Option<Stream>, StreamError> {
        Ok(self.cai_stream())
    }

    /// The exported stream as a [`LiveStream`], where this value owns a live stream (cai's,
    /// cust's, cudarc's streams): only then may cai hand it to the driver to order other work
    /// before it. The default (a number, which may be no stream) is `None`.
    fn live_stream(&self) -> Option<LiveStream<'_>> {
        None
    }
}

/// A stream the CUDA driver may be handed: a default stream, or a handle that is a live stream
/// for as long as `'a` lasts. The driver's behaviour for a handle that is no live stream (a
/// number someone made up, a stream destroyed since) is undefined, so safe code gets one only
/// from what owns a stream ([`AsStream::live_stream`] of cai's, cust's and cudarc's streams) or
/// for the default streams ([`LiveStream::LEGACY_DEFAULT`], [`LiveStream::PER_THREAD_DEFAULT`]);
/// vouching for any other handle is [`LiveStream::new`], which is `unsafe`.
///
/// A Python object is another matter: an import trusts a producer's `stream` as it trusts its
/// `data` (`ForeignArray::from_object`, as CuPy and Numba do), and a producer built in safe Rust
/// (a derived class exporting a bare `Option<Stream>`) answers for it as any producer does.
/// The trust boundary is the Python object, since PyO3's safe API runs any Python code, `ctypes`
/// included.
///
/// ```compile_fail,E0133
/// // A number is a number: safe code cannot make it a stream the driver is handed.
/// let forged = cai_runtime::Stream::from_raw(0xdead_beef).unwrap();
/// let live = cai_runtime::LiveStream::new(forged);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LiveStream<'a> {
    stream: Stream,
    _owner: std::marker::PhantomData<&'a ()>,
}

impl LiveStream<'static> {
    /// The legacy default stream (`1`): always there.
    pub const LEGACY_DEFAULT: LiveStream<'static> = LiveStream {
        stream: Stream::LegacyDefault,
        _owner: std::marker::PhantomData,
    };

    /// The per-thread default stream (`2`): always there.
    pub const PER_THREAD_DEFAULT: LiveStream<'static> = LiveStream {
        stream: Stream::PerThreadDefault,
        _owner: std::marker::PhantomData,
    };
}

impl LiveStream<'_> {
    /// Vouches for `stream`, for a backend of its own (a CUDA crate cai does not know) or a
    /// handle handed over by foreign code that answers for it (a protocol's consumer).
    ///
    /// # Safety
    /// `stream` is a default stream, or a stream of this process that is not destroyed for as
    /// long as the returned value, or anything it is put into (import options, the imports made
    /// with them, a descriptor's builder), is used: the lifetime the caller chooses (for
    /// `'static`, until those values are all dropped). Its context must stay alive as long.
    pub const unsafe fn new(stream: Stream) -> Self {
        LiveStream {
            stream,
            _owner: std::marker::PhantomData,
        }
    }

    /// The stream.
    pub fn stream(&self) -> Stream {
        self.stream
    }
}

impl fmt::Display for LiveStream<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.stream.fmt(f)
    }
}

impl AsStream for Stream {
    fn cai_stream(&self) -> Option<Stream> {
        Some(*self)
    }
}

impl AsStream for Option<Stream> {
    fn cai_stream(&self) -> Option<Stream> {
        *self
    }
}

impl<T: AsStream + ?Sized> AsStream for &T {
    fn cai_stream(&self) -> Option<Stream> {
        (**self).cai_stream()
    }
    fn prepare_export(&self) -> Result<Option<Stream>, StreamError> {
        (**self).prepare_export()
    }
    fn live_stream(&self) -> Option<LiveStream<'_>> {
        (**self).live_stream()
    }
}

// Written out, not generated by a macro: rustc lists these impls in the "not device
// memory" / "not a stream" errors, and a macro's impl reads as `$ty` there.
impl<T: AsStream + ?Sized> AsStream for std::sync::Arc<T> {
    fn cai_stream(&self) -> Option<Stream> {
        (**self).cai_stream()
    }
    fn prepare_export(&self) -> Result<Option<Stream>, StreamError> {
        (**self).prepare_export()
    }
    fn live_stream(&self) -> Option<LiveStream<'_>> {
        (**self).live_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_round_trip_and_zero_is_refused() {
        assert_eq!(Stream::from_raw(0), Err(StreamError::Zero));
        assert_eq!(Stream::from_raw(1), Ok(Stream::LegacyDefault));
        assert_eq!(Stream::from_raw(2), Ok(Stream::PerThreadDefault));
        for v in [1, 2, 3, 0xdead_beef, u64::MAX] {
            assert_eq!(Stream::from_raw(v).unwrap().as_raw(), v);
        }
        assert!(
            StreamError::Zero
                .to_string()
                .starts_with("`stream` = 0 is disallowed")
        );
        assert_eq!(Stream::from_raw(0xbeef).unwrap().to_string(), "48879");
        assert_eq!(Stream::PerThreadDefault.to_string(), "2");
    }

    /// A producer whose export step gives another stream than `cai_stream` (as one with work
    /// on several streams does), so that forwarding each method to the other shows.
    struct Pending;

    impl AsStream for Pending {
        fn cai_stream(&self) -> Option<Stream> {
            Some(Stream::PerThreadDefault)
        }
        fn prepare_export(&self) -> Result<Option<Stream>, StreamError> {
            Ok(Some(Stream::LegacyDefault))
        }
    }

    #[test]
    fn references_and_arcs_forward_both_methods() {
        fn both(s: &impl AsStream) -> (Option<Stream>, Result<Option<Stream>, StreamError>) {
            (s.cai_stream(), s.prepare_export())
        }
        let expected = (
            Some(Stream::PerThreadDefault),
            Ok(Some(Stream::LegacyDefault)),
        );
        assert_eq!(both(&Pending), expected);
        assert_eq!(both(&&Pending), expected);
        assert_eq!(both(&std::sync::Arc::new(Pending)), expected);
        let none: Option<Stream> = None;
        assert_eq!(both(&none), (None, Ok(None)));
        let some = Some(Stream::LegacyDefault);
        assert_eq!(both(&some), (some, Ok(some)));
    }
}
