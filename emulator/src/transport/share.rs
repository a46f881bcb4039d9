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
    // Never beyond what the budget has left (QPs that started sending when few others
    // were keep their larger windows until ACKs shrink them).
    let free = DEVICE_BUDGET.saturating_sub(timers.charged());
    share
        .min(timers.charge(qpn).saturating_add(free))
        .clamp(MIN_SHARE, WINDOW)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, Profile, RunMode};

    /// The window of a QP that has nothing outstanding while `armed` other QPs do.
    fn window_with(armed: u32) -> u32 {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        dev.with_ctx(|ctx| {
            let first = Profile::default().first_qpn;
            for k in 0..armed {
                ctx.state.res.qp_timers.set(first + 1 + k, Some(1_000));
            }
            window(ctx, first)
        })
    }

    #[test]
    fn the_share_binds_only_beyond_budget_over_window_senders() {
        // Up to 16 senders (this QP included) keep the full window: nothing changes.
        assert_eq!(window_with(0), WINDOW);
        assert_eq!(window_with(15), WINDOW);
        // Beyond that the budget is shared, never below MIN_SHARE.
        assert_eq!(window_with(16), DEVICE_BUDGET / 17);
        assert_eq!(window_with(127), 16);
        assert_eq!(window_with(999), MIN_SHARE);
    }

    #[test]
    fn no_qp_goes_beyond_what_the_budget_has_left() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        dev.with_ctx(|ctx| {
            let first = Profile::default().first_qpn;
            // 16 QPs that started alone hold the whole budget (128 PSNs each).
            for k in 1..=16 {
                ctx.state.res.qp_timers.set(first + k, Some(1_000));
                ctx.state.res.qp_timers.set_charge(first + k, WINDOW);
            }
            assert_eq!(ctx.state.res.qp_timers.charged(), DEVICE_BUDGET);
            // A newcomer gets the least share, not budget / 17; the holders keep theirs.
            assert_eq!(window(ctx, first), MIN_SHARE);
            assert_eq!(window(ctx, first + 1), WINDOW);
            // Disarmed (everything acknowledged): its PSNs return to the budget.
            ctx.state.res.qp_timers.set(first + 1, None);
            assert_eq!(ctx.state.res.qp_timers.charged(), DEVICE_BUDGET - WINDOW);
            assert_eq!(window(ctx, first), DEVICE_BUDGET / 16);
        });
    }

    #[test]
    fn a_sender_is_counted_once() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        dev.with_ctx(|ctx| {
            let first = Profile::default().first_qpn;
            for k in 0..128 {
                ctx.state.res.qp_timers.set(first + k, Some(1_000));
            }
            // QP `first` is one of the 128 senders already.
            assert_eq!(window(ctx, first), DEVICE_BUDGET / 128);
        });
    }
}
