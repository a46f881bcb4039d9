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

/// The earliest transport deadline of any QP.
pub(crate) fn next_deadline(st: &DeviceState) -> Option<u64> {
    st.res
        .qps
        .iter()
        .filter_map(|(_, qp)| match (qp.tr.rnr_wait, qp.tr.retx_at) {
            (Some((a, _)), Some(b)) => Some(a.min(b)),
            (Some((a, _)), None) => Some(a),
            (None, b) => b,
        })
        .min()
}

/// Runs transport timers that are due; returns how many fired.
pub(crate) fn poll_timers(ctx: &mut Ctx<'_>) -> usize {
    let now = ctx.clock.now_ns();
    let mut fired = 0;
    // QPNs are collected without allocating: the table is walked once per due timer.
    loop {
        let due = ctx.state.res.qps.iter().find_map(|(n, qp)| {
            let rnr = qp.tr.rnr_wait.is_some_and(|(at, _)| at <= now);
            let retx = qp.tr.retx_at.is_some_and(|at| at <= now);
            (rnr || retx).then_some((n, rnr))
        });
        let Some((qpn, rnr)) = due else {
            return fired;
        };
        fired += 1;
        let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
            return fired;
        };
        let retry_count = qp.ctx.retry_count();
        let tr = &mut qp.tr;
        if rnr {
            if let Some((_, psn)) = tr.rnr_wait.take() {
                completer::go_back(tr, psn);
            }
        } else {
            tr.retx_at = None;
            let Some(una) = completer::retry_from(tr) else {
                continue;
            };
            if !outstanding(tr) {
                continue;
            }
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
            completer::complete_head(ctx, qpn);
        }
        requester::run(ctx, qpn);
    }
}
