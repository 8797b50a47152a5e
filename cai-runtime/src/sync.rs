//! Stream synchronization policy, both sides of the CUDA Array Interface's Synchronization
//! section, as pure decisions that need no GPU. The `cuda` feature carries them out
//! (`cuda::sync`).
//!
//! - Producer: [`export_stream_none`], off by default, makes every export say `stream: None`
//!   (the spec's optional "always set stream to None"); environment variable
//!   [`EXPORT_STREAM_NONE_ENV`] or [`set_export_stream_none`].
//! - Consumer: [`plan`] decides what an import does about the producer's stream. By default
//!   ([`SyncMode::Enqueue`]) the host is not blocked: an event is recorded on the producer's
//!   stream and the consumer's stream waits on it (the spec's "enqueue operations" mechanism).
//!   [`SyncMode::Synchronize`] blocks until the producer's stream is idle, as CuPy and Numba do.
//!   `sync=false` per call, environment variable [`IGNORE_STREAMS_ENV`]`=0` or
//!   [`set_ignore_streams`] ignore the stream (the spec's optional consumer override).
//! - Consumer, afterwards: [`release_plan`] orders the producer's stream after the work the
//!   consumer enqueued on the data, so that the producer's next work cannot overtake it.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::stream::{LiveStream, Stream};

/// Set to `1` (or `true`, `yes`, `on`) to export `stream: None` always. Read once.
pub const EXPORT_STREAM_NONE_ENV: &str = "CAI_CUDA_ARRAY_INTERFACE_EXPORT_STREAM_NONE";
/// Set to `0` (or `false`, `no`, `off`) to ignore the `stream` of imported arrays, like Numba's
/// `NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0` and CuPy's `CUPY_CUDA_ARRAY_INTERFACE_SYNC=0`. Read once.
pub const IGNORE_STREAMS_ENV: &str = "CAI_CUDA_ARRAY_INTERFACE_SYNC";

/// A process-wide switch: unset (fall back to the environment), off, or on.
struct Switch(AtomicU8);

const UNSET: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

impl Switch {
    const fn new() -> Self {
        Switch(AtomicU8::new(UNSET))
    }

    fn get(&self, from_env: impl FnOnce() -> bool) -> bool {
        match self.0.load(Ordering::Relaxed) {
            OFF => false,
            ON => true,
            _ => {
                let on = from_env();
                // Another thread may have set it meanwhile: its explicit value wins.
                let _ = self.0.compare_exchange(
                    UNSET,
                    if on { ON } else { OFF },
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                self.0.load(Ordering::Relaxed) == ON
            }
        }
    }

    fn set(&self, on: bool) {
        self.0.store(if on { ON } else { OFF }, Ordering::Relaxed);
    }
}

/// How an environment variable's value reads as a boolean; `None` when unset or unreadable
/// (then the default applies).
pub fn env_flag(value: Option<&str>) -> Option<bool> {
    match value?.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn env_is(name: &str, value_meaning_on: bool) -> bool {
    let v = std::env::var(name).ok();
    env_flag(v.as_deref()) == Some(value_meaning_on)
}

static EXPORT_NONE: Switch = Switch::new();
static IGNORE_STREAMS: Switch = Switch::new();

/// Whether producers export `stream: None` whatever their stream (off by default; see
/// [`EXPORT_STREAM_NONE_ENV`]). The user then takes on ordering the producer's work before
/// any consumer's, as the spec says of this option.
pub fn export_stream_none() -> bool {
    EXPORT_NONE.get(|| env_is(EXPORT_STREAM_NONE_ENV, true))
}

/// The `stream` entry a producer exports for data with pending work on `stream`: `stream`
/// itself, or `None` while [`export_stream_none`] is on. Every export goes through this.
pub fn exported_stream(stream: Option<Stream>) -> Option<Stream> {
    stream.filter(|_| !export_stream_none())
}

/// Sets [`export_stream_none`] for the whole process, overriding the environment.
pub fn set_export_stream_none(on: bool) {
    EXPORT_NONE.set(on);
}

/// Whether consumers ignore the `stream` of imported arrays (off by default; see
/// [`IGNORE_STREAMS_ENV`]).
pub fn ignore_streams() -> bool {
    IGNORE_STREAMS.get(|| env_is(IGNORE_STREAMS_ENV, false))
}

/// Sets [`ignore_streams`] for the whole process, overriding the environment.
pub fn set_ignore_streams(on: bool) {
    IGNORE_STREAMS.set(on);
}

/// How a consumer makes its work on imported data wait for the producer's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SyncMode {
    /// Record an event on the producer's stream and make the consumer's stream wait on it:
    /// the host is not blocked, and work the consumer enqueues on its stream runs after the
    /// producer's. The default.
    #[default]
    Enqueue,
    /// Block the host until the producer's stream has finished its work (what CuPy and Numba
    /// do); afterwards any stream may use the data.
    Synchronize,
}

/// Why an import does nothing about the producer's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoSyncReason {
    /// `stream` was absent or `None`: the producer has no pending work.
    NoStream,
    /// The caller passed `sync=false`.
    Disabled,
    /// [`ignore_streams`] is on.
    Ignored,
    /// The consumer works on the producer's stream, where work is already serialized.
    SameStream,
    /// DLPack: the producer made the consumer's stream wait for its work before handing the
    /// tensor over (the consumer passed its stream to `__dlpack__`).
    ProducerOrdered,
}

/// What an import must do before the consumer touches the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncPlan {
    /// Nothing, and why.
    Nothing(NoSyncReason),
    /// Record an event on `producer`, then make `consumer` wait on it.
    EventWait {
        /// The stream the producer exported.
        producer: Stream,
        /// The stream the consumer will use.
        consumer: Stream,
    },
    /// Block until `producer` has finished.
    Synchronize {
        /// The stream the producer exported.
        producer: Stream,
    },
}

/// What an import does about streams and pointers.
///
/// The consumer's stream is handed to the driver (the import's event wait, a release, a copy),
/// so it is a [`LiveStream`]: a default stream, or one something vouches for.
///
/// ```compile_fail,E0308
/// // Safe code cannot make a bare number the consumer's stream.
/// let forged = cai_runtime::Stream::from_raw(0xdead_beef).unwrap();
/// let options = cai_runtime::sync::ImportOptions { consumer: forged, ..Default::default() };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ImportOptions {
    /// `sync=False` skips synchronization with the producer's stream (default true).
    pub sync: bool,
    /// The stream the consumer will work on (default: the legacy default stream, which every
    /// blocking stream also waits for): [`LiveStream::LEGACY_DEFAULT`],
    /// [`LiveStream::PER_THREAD_DEFAULT`], or a stream vouched for as living as long as the
    /// options and the imports made with them ([`LiveStream::new`]).
    pub consumer: LiveStream<'static>,
    /// Event wait (default) or host synchronization.
    pub mode: SyncMode,
    /// Ask the driver whether `data` is device-accessible and the array stays inside its
    /// allocation (default true). An import needs the driver for it.
    pub check_pointer: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            sync: true,
            consumer: LiveStream::LEGACY_DEFAULT,
            mode: SyncMode::Enqueue,
            check_pointer: true,
        }
    }
}

/// The consumer's decision (the spec's "Expected behaviour of the Consumer"):
/// - no stream: nothing to do;
/// - `sync=false` or [`ignore_streams`] (passed in as `ignore`): nothing, at the user's request;
/// - the consumer already works on the producer's stream: nothing, the stream serializes;
/// - otherwise [`SyncMode::Enqueue`] waits on an event, [`SyncMode::Synchronize`] blocks.
///
/// The legacy default stream is not special-cased: a non-blocking consumer stream does not
/// wait for it implicitly, so it gets an event wait too.
pub fn plan(
    producer: Option<Stream>,
    consumer: Stream,
    mode: SyncMode,
    sync: bool,
    ignore: bool,
) -> SyncPlan {
    let Some(producer) = producer else {
        return SyncPlan::Nothing(NoSyncReason::NoStream);
    };
    if !sync {
        return SyncPlan::Nothing(NoSyncReason::Disabled);
    }
    if ignore {
        return SyncPlan::Nothing(NoSyncReason::Ignored);
    }
    // The per-thread default stream names a different stream on each thread, so two `2`s on
    // the same thread are the same stream; imports run on the consumer's thread.
    if producer == consumer {
        return SyncPlan::Nothing(NoSyncReason::SameStream);
    }
    order(producer, consumer, mode)
}

/// The ordering of two different streams.
fn order(producer: Stream, consumer: Stream, mode: SyncMode) -> SyncPlan {
    match mode {
        SyncMode::Enqueue => SyncPlan::EventWait { producer, consumer },
        SyncMode::Synchronize => SyncPlan::Synchronize { producer },
    }
}

/// [`plan`]'s decision for data on another device than the consumer's: a default stream (1, 2)
/// is a context's own, so the producer's (the data's device's) and the consumer's are two
/// streams even where both say `1`, and "the same stream" becomes an ordering.
pub fn across_devices(plan: SyncPlan, producer: Option<Stream>, mode: SyncMode) -> SyncPlan {
    match (plan, producer) {
        (SyncPlan::Nothing(NoSyncReason::SameStream), Some(s))
            if !matches!(s, Stream::Handle(_)) =>
        {
            order(s, s, mode)
        }
        _ => plan,
    }
}

/// What a consumer does once its work on the data is enqueued: `producer` (the stream the
/// producer exported) waits for the work enqueued so far on `consumer`, without blocking the
/// host. The spec: a consumer that synchronizes on the provided stream "must ensure that no
/// computation can take place in the provided stream until its operations in its own choice of
/// stream have taken place", here by "placing a wait on an event in the provided stream".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReleasePlan {
    /// The stream the producer exported: it waits.
    pub producer: Stream,
    /// The stream the consumer worked on: it is waited for.
    pub consumer: Stream,
}

/// What releasing an import made with plan `import` and consumer stream `consumer` does:
/// the reverse of the import's ordering where the import ordered the streams (an event wait or
/// a host synchronization), `None` where it did not. With no stream the producer has no
/// stream to order; on the same stream the work is serialized already; with `sync=false` or
/// [`ignore_streams`] the user orders the streams both ways, as the spec's override says.
pub fn release_plan(import: SyncPlan, consumer: Stream) -> Option<ReleasePlan> {
    match import {
        SyncPlan::Nothing(_) => None,
        SyncPlan::EventWait { producer, consumer } => Some(ReleasePlan { producer, consumer }),
        // `plan` gives a synchronization only for another stream than the consumer's.
        SyncPlan::Synchronize { producer } => Some(ReleasePlan { producer, consumer }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(n: u64) -> Stream {
        Stream::from_raw(n).unwrap()
    }

    #[test]
    fn default_streams_of_two_devices_are_two_streams() {
        use SyncMode::*;
        for s in [Stream::LegacyDefault, Stream::PerThreadDefault] {
            let same = plan(Some(s), s, Enqueue, true, false);
            assert_eq!(same, SyncPlan::Nothing(NoSyncReason::SameStream));
            assert_eq!(
                across_devices(same, Some(s), Enqueue),
                SyncPlan::EventWait {
                    producer: s,
                    consumer: s
                }
            );
            let same = plan(Some(s), s, Synchronize, true, false);
            assert_eq!(
                across_devices(same, Some(s), Synchronize),
                SyncPlan::Synchronize { producer: s }
            );
        }
        // A handle is one stream wherever it is used; other decisions stand.
        let h = handle(0x7000);
        let same = plan(Some(h), h, Enqueue, true, false);
        assert_eq!(across_devices(same, Some(h), Enqueue), same);
        let off = plan(
            Some(Stream::LegacyDefault),
            Stream::LegacyDefault,
            Enqueue,
            false,
            false,
        );
        assert_eq!(
            across_devices(off, Some(Stream::LegacyDefault), Enqueue),
            off
        );
    }

    #[test]
    fn consumer_plans_follow_the_spec() {
        let (p, c) = (handle(0x7000), handle(0x8000));
        use SyncMode::*;
        // No stream: nothing, whatever the mode or flags.
        for mode in [Enqueue, Synchronize] {
            for (sync, ignore) in [(true, false), (false, false), (true, true)] {
                assert_eq!(
                    plan(None, c, mode, sync, ignore),
                    SyncPlan::Nothing(NoSyncReason::NoStream)
                );
            }
        }
        assert_eq!(
            plan(Some(p), c, Enqueue, true, false),
            SyncPlan::EventWait {
                producer: p,
                consumer: c
            }
        );
        assert_eq!(
            plan(Some(p), c, Synchronize, true, false),
            SyncPlan::Synchronize { producer: p }
        );
        assert_eq!(
            plan(Some(p), c, Enqueue, false, false),
            SyncPlan::Nothing(NoSyncReason::Disabled)
        );
        assert_eq!(
            plan(Some(p), c, Synchronize, true, true),
            SyncPlan::Nothing(NoSyncReason::Ignored)
        );
        assert_eq!(
            plan(Some(p), p, Enqueue, true, false),
            SyncPlan::Nothing(NoSyncReason::SameStream)
        );
        // The default streams are streams like any other.
        assert_eq!(
            plan(Some(Stream::LegacyDefault), c, Enqueue, true, false),
            SyncPlan::EventWait {
                producer: Stream::LegacyDefault,
                consumer: c
            }
        );
        assert_eq!(
            plan(Some(p), Stream::PerThreadDefault, Synchronize, true, false),
            SyncPlan::Synchronize { producer: p }
        );
    }

    #[test]
    fn release_reverses_what_the_import_ordered() {
        let (p, c) = (handle(0x7000), handle(0x8000));
        let both = ReleasePlan {
            producer: p,
            consumer: c,
        };
        for mode in [SyncMode::Enqueue, SyncMode::Synchronize] {
            assert_eq!(
                release_plan(plan(Some(p), c, mode, true, false), c),
                Some(both),
                "{mode:?}"
            );
            // The import ordered nothing: neither does the release.
            for (producer, consumer, sync, ignore) in [
                (None, c, true, false),
                (Some(p), c, false, false),
                (Some(p), c, true, true),
                (Some(p), p, true, false),
            ] {
                let import = plan(producer, consumer, mode, sync, ignore);
                assert!(matches!(import, SyncPlan::Nothing(_)), "{import:?}");
                assert_eq!(release_plan(import, consumer), None, "{import:?}");
            }
        }
        // The default streams are streams like any other.
        let legacy = plan(
            Some(Stream::LegacyDefault),
            c,
            SyncMode::Enqueue,
            true,
            false,
        );
        assert_eq!(
            release_plan(legacy, c),
            Some(ReleasePlan {
                producer: Stream::LegacyDefault,
                consumer: c
            })
        );
    }

    #[test]
    fn env_flags() {
        for on in ["1", "true", " YES ", "On"] {
            assert_eq!(env_flag(Some(on)), Some(true), "{on}");
        }
        for off in ["0", "false", "No", "off"] {
            assert_eq!(env_flag(Some(off)), Some(false), "{off}");
        }
        for other in [None, Some(""), Some("2"), Some("maybe")] {
            assert_eq!(env_flag(other), None, "{other:?}");
        }
    }

    #[test]
    fn switches_fall_back_to_the_environment_once_then_obey_the_setter() {
        let s = Switch::new();
        assert!(s.get(|| true));
        // Read once: the environment is not consulted again.
        assert!(s.get(|| panic!("read twice")));
        s.set(false);
        assert!(!s.get(|| panic!("read after set")));
        s.set(true);
        assert!(s.get(|| false));
    }
}
