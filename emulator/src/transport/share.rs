//! Fair sharing of the device's transmit window among its RC QPs.
//!
//! Each RC QP may have [`WINDOW`] PSNs unacknowledged. With many QPs sending at once that is
//! more than a link queue holds and more than the peer can take before the local ACK
//! timeout (128 QPs x 128 packets is the in-process link's whole queue): frames would be
//! dropped or time out in the queue, and go-back-N would resend them into the same queue.
//! A NIC does not lose its own transmit queue; it schedules its QPs onto the wire. So the
//! device keeps [`DEVICE_BUDGET`] PSNs in flight over all QPs, shared equally among the QPs
//! that have packets outstanding (those with an armed timer, in the timer queue), never
//! less than [`MIN_SHARE`]; ACKs then clock each QP's next packets, round robin. A QP
//! that stops at its share (not at [`WINDOW`]) asks for an ACK on the last packet it sent,
//! so the share comes back without waiting for a timeout. While at most
//! `DEVICE_BUDGET / WINDOW` QPs are sending, nothing changes.

use crate::ctx::Ctx;
use crate::resources::WINDOW;

/// PSNs the device keeps unacknowledged over all its RC QPs (when each QP's share is above
/// [`MIN_SHARE`]).
pub(crate) const DEVICE_BUDGET: u32 = 2048;

/// The least window a QP gets, however many QPs share the device.
pub(crate) const MIN_SHARE: u32 = 4;

/// The PSNs QP `qpn` may have unacknowledged now: [`WINDOW`], or its share of
/// [`DEVICE_BUDGET`] when that is smaller.
pub(crate) fn window(ctx: &Ctx<'_>, qpn: u32) -> u32 {
    let timers = &ctx.state.res.qp_timers;
    let sending = timers.len() + usize::from(!timers.contains(qpn));
    let share = DEVICE_BUDGET / u32::try_from(sending).unwrap_or(u32::MAX).max(1);
    share.clamp(MIN_SHARE, WINDOW)
}
