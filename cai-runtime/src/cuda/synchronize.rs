//! The consumer side: carrying out [`crate::sync::plan`]'s decision with the driver, and
//! [`crate::sync::release_plan`]'s once the consumer's work is enqueued.

use super::stream::{order_after_on, synchronize_stream_on};
use crate::driver_error::DriverError;
use crate::stream::Stream;
use crate::sync::{ImportOptions, ReleasePlan, SyncPlan, ignore_streams, plan, release_plan};

/// Carries out a plan: an event wait, a host synchronization, or nothing. A default stream
/// (1, 2) of the producer's is device `producer_device`'s (the data's; `None`: the current
/// context's), the consumer's the current context's.
pub fn execute(plan: SyncPlan, producer_device: Option<u32>) -> Result<(), DriverError> {
    match plan {
        SyncPlan::Nothing(_) => Ok(()),
        SyncPlan::EventWait { producer, consumer } => {
            order_after_on(consumer, None, producer, producer_device)
        }
        SyncPlan::Synchronize { producer } => synchronize_stream_on(producer, producer_device),
    }
}

/// Makes the consumer's stream safe to use on data the producer exported with stream
/// `producer`, as `options` say (and [`ignore_streams`] allows); returns what was done.
pub fn synchronize_import(
    producer: Option<Stream>,
    options: &ImportOptions,
) -> Result<SyncPlan, DriverError> {
    let p = plan(
        producer,
        options.consumer,
        options.mode,
        options.sync,
        ignore_streams(),
    );
    execute(p, None)?;
    Ok(p)
}

/// Releases an import made with plan `import` and consumer stream `consumer`: the producer's
/// stream waits for the work enqueued so far on the consumer's (an event wait; the host is not
/// blocked), where the import ordered the streams; returns what was done. Both streams must be
/// alive: the producer's lives as long as the object that exported it (the spec's Lifetime
/// section), which an import from an object keeps alive. Default streams as in [`execute`].
pub fn release_import(
    import: SyncPlan,
    consumer: Stream,
    producer_device: Option<u32>,
) -> Result<Option<ReleasePlan>, DriverError> {
    let r = release_plan(import, consumer);
    if let Some(ReleasePlan { producer, consumer }) = r {
        order_after_on(producer, producer_device, consumer, None)?;
    }
    Ok(r)
}
