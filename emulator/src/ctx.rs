//! The context command handlers and engines work in. It sits below every engine and names
//! only data (the device state, the device's view of host memory, its interrupts and clock),
//! so an engine that takes a `Ctx` does not depend on the run loop (`device`) that builds it.

use crate::clock::Clock;
use crate::iommu::Iommu;
use crate::irq::Irqs;
use crate::state::{DeviceState, RxDrops};

/// The context command handlers and queue engines work in: the device state (locked) and
/// the device's view of host memory.
pub(crate) struct Ctx<'a> {
    pub state: &'a mut DeviceState,
    pub dma: &'a Iommu,
    pub irqs: &'a Irqs,
    pub clock: &'a Clock,
}

/// Counts a dropped frame under rule `rule`.
pub(crate) fn count_drop(ctx: &mut Ctx<'_>, rule: impl FnOnce(&mut RxDrops) -> &mut u64) {
    ctx.state.counters.rx_dropped += 1;
    *rule(&mut ctx.state.counters.drops) += 1;
}
