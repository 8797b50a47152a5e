//! The consumer side: carrying out [`crate::sync::plan`]'s decision with the driver.

use super::stream::{order_after, synchronize};
use crate::error::DriverError;
use crate::stream::Stream;
use crate::sync::{ImportOptions, SyncPlan, ignore_streams, plan};

/// Carries out a plan: an event wait, a host synchronization, or nothing.
pub fn execute(plan: SyncPlan) -> Result<(), DriverError> {
    match plan {
        SyncPlan::Nothing(_) => Ok(()),
        SyncPlan::EventWait { producer, consumer } => order_after(consumer, producer),
        SyncPlan::Synchronize { producer } => synchronize(producer),
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
    execute(p)?;
    Ok(p)
}
