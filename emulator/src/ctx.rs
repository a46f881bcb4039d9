//! The context command handlers and engines work in. It sits below every engine and names
//! only data (the device state, the device's view of host memory, its interrupts and clock),
//! so an engine that takes a `Ctx` does not depend on the run loop (`device`) that builds it.

use crate::clock::Clock;
use crate::iommu::Iommu;
use crate::irq::Irqs;
use crate::resources::QpTransport;
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
    count_drops(ctx, 1, rule);
}

/// Counts `n` dropped frames under rule `rule` (the packets of a run, dropped together).
pub(crate) fn count_drops(ctx: &mut Ctx<'_>, n: u64, rule: impl FnOnce(&mut RxDrops) -> &mut u64) {
    ctx.state.counters.rx_dropped += n;
    *rule(&mut ctx.state.counters.drops) += n;
}

impl Ctx<'_> {
    /// Lends `f` QP `qpn`'s transport state and always puts it back; `None` (and `f` not
    /// called) when there is no such QP.
    ///
    /// An engine needs the QP's transport state and the rest of the context at once (to
    /// read WQEs, write CQEs, send frames), so the state is moved out of the QP table for
    /// the call. Taking and restoring it in one place means no early return between the
    /// two can lose a QP's state. A QP destroyed during `f` simply drops it. The state is
    /// boxed, so lending it moves a pointer; a QP whose state is lent already (a nested call
    /// for the same QP) is treated as absent.
    pub(crate) fn with_transport<R>(
        &mut self,
        qpn: u32,
        f: impl FnOnce(&mut Ctx<'_>, &mut QpTransport) -> R,
    ) -> Option<R> {
        let qp = self.state.res.qps.get_mut(qpn)?;
        let mut tr = qp.tr.take()?;
        let r = f(self, &mut tr);
        let (at, psns) = if let Some(qp) = self.state.res.qps.get_mut(qpn) {
            let kept = (tr.deadline(), tr.in_flight());
            qp.tr = Some(tr);
            kept
        } else {
            (None, 0)
        };
        // Every change to a QP's timers (and PSNs in flight) happens here or in the timer
        // pass itself.
        self.state.res.qp_timers.set(qpn, at);
        self.state.res.qp_timers.set_charge(qpn, psns);
        Some(r)
    }
}
