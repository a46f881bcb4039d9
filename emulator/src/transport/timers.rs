//! Transport timers: the RNR wait and the local ACK timeout (retransmission).
//!
//! The local ACK timeout of a QP is `4.096 us x 2^ack_timeout` (address path `ack_timeout`;
//! 0 disables it, as the IBTA says). It runs while RC packets are unacknowledged, restarts
//! whenever the requester sends or an ACK / response makes progress, and on expiry resends
//! go-back-N from the oldest unacknowledged PSN, consuming one of `retry_count` retries; with
//! none left the WQE completes with RETRY_EXC_ERR and the QP enters ERR. The RNR wait
//! suspends it. Times are on the device clock, so deterministic runs fire them exactly when
//! the test advances virtual time to [`next_deadline`].

use rnic_hw_regs::cqe::CqeSyndrome;
use rnic_hw_regs::ctx::{QpSt, Qpc};

use super::{completer, requester};
use crate::ctx::Ctx;
use crate::resources::QpTransport;
use crate::state::DeviceState;

/// The local ACK timeout of a QP in ns (None: disabled).
pub(crate) fn timeout_ns(qpc: &Qpc) -> Option<u64> {
    let t = qpc.primary_address_path().ack_timeout();
    (t != 0 && qpc.st() == u8::from(QpSt::Rc)).then(|| 4096u64 << t.min(31))
}

/// Whether RC packets of `tr` await an acknowledgement.
fn outstanding(tr: &QpTransport) -> bool {
    tr.sq
        .iter()
        .any(|w| w.started && !w.done && w.error.is_none() && w.npkts > 0 && w.next_pkt > 0)
}

/// (Re)arms or disarms the local ACK timeout after the requester sent (`progress`: restart
/// it) or the completer made progress.
pub(crate) fn rearm(ctx: &Ctx<'_>, qpc: &Qpc, tr: &mut QpTransport, progress: bool) {
    let Some(t) = timeout_ns(qpc) else {
        tr.retx_at = None;
        return;
    };
    if tr.rnr_wait.is_some() || !outstanding(tr) {
        tr.retx_at = None;
    } else if progress || tr.retx_at.is_none() {
        tr.retx_at = Some(ctx.clock.now_ns().saturating_add(t));
    }
}

/// The earliest transport deadline of any QP: the top of the timer queue, not a scan.
pub(crate) fn next_deadline(st: &DeviceState) -> Option<u64> {
    let t = st.res.qp_timers.earliest();
    debug_assert!(
        st.res.qps.len() > 1024 || t == scan_deadline(st),
        "timer queue"
    );
    t
}

/// The earliest deadline by a scan over every QP, as the timer queue must give (checked in
/// debug builds while the table is small).
fn scan_deadline(st: &DeviceState) -> Option<u64> {
    st.res
        .qps
        .iter()
        .filter_map(|(_, qp)| qp.tr.as_ref()?.deadline())
        .min()
}

/// Runs transport timers that are due; returns how many fired. Due QPs are taken lowest
/// QPN first, one at a time (a timer that fires can arm another that is due at once), from
/// the timer queue: QPs without an armed timer are never looked at.
pub(crate) fn poll_timers(ctx: &mut Ctx<'_>) -> usize {
    let now = ctx.clock.now_ns();
    let mut fired = 0;
    loop {
        let Some(qpn) = ctx.state.res.qp_timers.lowest_due(now) else {
            return fired;
        };
        let Some((qp, tr)) = ctx
            .state
            .res
            .qps
            .get_mut(qpn)
            .and_then(|qp| qp.tr.as_deref_mut().map(|tr| (&qp.ctx, tr)))
        else {
            // Destroyed without its entry removed: drop the entry.
            ctx.state.res.qp_timers.set(qpn, None);
            continue;
        };
        let rnr = tr.rnr_wait.is_some_and(|(at, _)| at <= now);
        let retx = tr.retx_at.is_some_and(|at| at <= now);
        if !(rnr || retx) {
            // Not due after all (the queue is exact, so this does not happen): requeue.
            let at = tr.deadline();
            ctx.state.res.qp_timers.set(qpn, at);
            continue;
        }
        fired += 1;
        let retry_count = qp.retry_count();
        let resume = if rnr {
            if let Some((_, psn)) = tr.rnr_wait.take() {
                completer::go_back(tr, psn);
            }
            Resume::Requester
        } else {
            tr.retx_at = None;
            match completer::retry_from(tr) {
                Some(_) if !outstanding(tr) => Resume::Nothing,
                None => Resume::Nothing,
                Some(una) => {
                    let left = tr.retry_left.get_or_insert(retry_count);
                    if *left == 0 {
                        completer::fail_at(tr, una, CqeSyndrome::TransportRetryExc);
                    } else {
                        *left -= 1;
                        tr.gap_retry = None;
                        completer::go_back(tr, una);
                        ctx.state.counters.transport.timeouts += 1;
                        ctx.state.counters.transport.retransmits += 1;
                    }
                    Resume::CompleterAndRequester
                }
            }
        };
        // The pass changed the QP's timers in place: its queue entry follows.
        let (at, psns) = ctx
            .state
            .res
            .qps
            .get(qpn)
            .and_then(|qp| qp.tr.as_ref())
            .map_or((None, 0), |tr| (tr.deadline(), tr.in_flight()));
        ctx.state.res.qp_timers.set(qpn, at);
        ctx.state.res.qp_timers.set_charge(qpn, psns);
        match resume {
            Resume::Nothing => {}
            Resume::Requester => requester::run(ctx, qpn),
            Resume::CompleterAndRequester => {
                completer::complete_head(ctx, qpn);
                requester::run(ctx, qpn);
            }
        }
    }
}

/// What runs after a timer fired.
enum Resume {
    /// Nothing was outstanding.
    Nothing,
    /// The RNR wait ended: resend.
    Requester,
    /// The ACK timeout went back (or failed the WQE): complete, then resend.
    CompleterAndRequester,
}
