//! The consumer side: carrying out [`crate::sync::plan`]'s decision with the driver, and
//! [`crate::sync::release_plan`]'s once the consumer's work is enqueued.
//!
//! The producer's stream is a number read from its descriptor: these functions are `unsafe`,
//! their contract that it is a live stream (the protocol's: a producer answers for its
//! descriptor, as for its data pointer). [`crate::python::ForeignArray`]'s imports discharge
//! it for a producer object they keep alive.

use super::stream::{order_after_on, synchronize_stream_on};
use crate::driver_error::DriverError;
use crate::stream::{LiveStream, Stream};
use crate::sync::{ImportOptions, ReleasePlan, SyncPlan, ignore_streams, plan, release_plan};

/// Carries out a plan: an event wait, a host synchronization, or nothing. A default stream
/// (1, 2) of the producer's is device `producer_device`'s (the data's; `None`: the current
/// context's), the consumer's the current context's.
///
/// # Safety
/// Every stream the plan names is a default stream or a live stream of this process (the
/// producer's, as its descriptor says: see the module docs).
pub unsafe fn execute(plan: SyncPlan, producer_device: Option<u32>) -> Result<(), DriverError> {
    match plan {
        SyncPlan::Nothing(_) => Ok(()),
        SyncPlan::EventWait { producer, consumer } => {
            // SAFETY: both are live streams (this function's contract).
            let (producer, consumer) =
                unsafe { (LiveStream::new(producer), LiveStream::new(consumer)) };
            order_after_on(consumer, None, producer, producer_device)
        }
        SyncPlan::Synchronize { producer } => {
            // SAFETY: as above.
            synchronize_stream_on(unsafe { LiveStream::new(producer) }, producer_device)
        }
    }
}

/// Makes the consumer's stream safe to use on data the producer exported with stream
/// `producer`, as `options` say (and [`ignore_streams`] allows); returns what was done.
///
/// # Safety
/// `producer` is `None`, a default stream, or a live stream of this process (see the module
/// docs); the options' consumer stream is vouched for by the options.
pub unsafe fn synchronize_import(
    producer: Option<Stream>,
    options: &ImportOptions,
) -> Result<SyncPlan, DriverError> {
    let p = plan(
        producer,
        options.consumer.stream(),
        options.mode,
        options.sync,
        ignore_streams(),
    );
    // SAFETY: the plan names `producer` (live: this function's contract) and the options'
    // consumer stream (a `LiveStream`).
    unsafe { execute(p, None) }?;
    Ok(p)
}

/// Releases an import made with plan `import` and consumer stream `consumer`: the producer's
/// stream waits for the work enqueued so far on the consumer's (an event wait; the host is not
/// blocked), where the import ordered the streams; returns what was done. Default streams as
/// in [`execute`].
///
/// # Safety
/// The plan's producer stream is still a live stream (it lives as long as the object that
/// exported it, the spec's Lifetime section, which an import from an object keeps alive).
pub unsafe fn release_import(
    import: SyncPlan,
    consumer: LiveStream<'_>,
    producer_device: Option<u32>,
) -> Result<Option<ReleasePlan>, DriverError> {
    let r = release_plan(import, consumer.stream());
    if let Some(ReleasePlan { producer, .. }) = r {
        // SAFETY: the producer's stream is live (this function's contract).
        let producer = unsafe { LiveStream::new(producer) };
        order_after_on(producer, producer_device, consumer, None)?;
    }
    Ok(r)
}
