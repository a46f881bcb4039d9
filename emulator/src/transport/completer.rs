//! The completer: matches ACKs, NAKs, READ responses and atomic ACKs to the requester's
//! outstanding WQEs, and writes the requester's CQEs in WQE order.
//!
//! A response counts only when it comes from the QP's peer to the QP's own address
//! ([`super::addr_ok`]); anything else is dropped (`peer_mismatch`) before it can complete,
//! fail or fill anything.
//!
//! An ACK for PSN `p` completes every SEND / WRITE whose last PSN is at or before `p`. A READ
//! response's payload is written at `(psn - first_psn) * MTU` into the READ's local buffers;
//! the last (or only) response completes it. A READ reissued for its remaining bytes takes
//! the response at the expected PSN whether it continues the original opcode sequence
//! (MIDDLE / LAST: rxe's replay of a duplicate READ) or starts a new one (FIRST / ONLY).
//! An atomic ACK's original value is written to the atomic's 8-byte local buffer
//! (big-endian, or host byte order with `atomic_req_8B_endianness_mode` 1).
//! A NAK completes what precedes its PSN, then: PSN sequence error -> go back to that PSN
//! (bounded by `retry_count`); invalid request / remote access / remote operational error ->
//! the WQE fails with REMOTE_INVAL_REQ / REMOTE_ACCESS / REMOTE_OP. An RNR NAK waits the
//! coded time and resends (bounded by `rnr_retry`, 7 = infinite), or fails with
//! RNR_RETRY_EXC.
//!
//! CQEs are written from the head of the queue: a signaled WQE that completed gets a REQ CQE
//! whose `wqe_counter` is its `wqe_index`; an unsignaled one none; a failed one always gets
//! an error CQE, and then the QP enters ERR and everything after it is flushed (UD and UC:
//! SQE, and the send queue is flushed; the receive queue works on).

use rnic_hw_regs::cqe::CqeSyndrome;
use rnic_hw_regs::ctx::QpState;
use rnic_hw_regs::wqe::SendOpcode;

use rnic_hw_regs::ctx::QpSt;

use super::{addr_ok, enter_error, mtu_bytes, rearm};
use crate::ctx::{Ctx, count_drop};
use crate::mkey;
use crate::resources::{Domain, QpTransport, SendWqe, advance_una};
use crate::wire::psn::{psn_add, psn_cmp};
use crate::wire::{NakCode, Operation, PacketRepr, Position, Syndrome, Transport};

/// Handles a response packet (ACK, NAK, READ response, atomic ACK) for QP `qpn`.
pub(crate) fn handle(ctx: &mut Ctx<'_>, qpn: u32, repr: &PacketRepr, payload: &[u8]) {
    let Some(qpc) = ctx.state.res.qps.get(qpn).map(|q| q.ctx) else {
        count_drop(ctx, |d| &mut d.unknown_qp);
        return;
    };
    if qpc.state() != u8::from(QpState::Rts) && qpc.state() != u8::from(QpState::Sqd) {
        count_drop(ctx, |d| &mut d.wrong_state);
        return;
    }
    if qpc.st() != u8::from(QpSt::Rc) || repr.bth.opcode.transport() != Transport::Rc {
        count_drop(ctx, |d| &mut d.wrong_transport);
        return;
    }
    // Only the peer may acknowledge, NAK or answer this QP's requests.
    if !addr_ok(ctx, &qpc, &repr.ip) {
        count_drop(ctx, |d| &mut d.peer_mismatch);
        return;
    }
    let dom = Domain::of_qp(&qpc);
    let mtu = mtu_bytes(qpc.mtu()).unwrap_or(256);
    let retry_count = qpc.retry_count();
    let rnr_retry = qpc.rnr_retry();
    ctx.with_transport(qpn, |ctx, tr| {
        let una_before = tr.una;
        let done_before = tr.sq.iter().filter(|w| w.done).count();
        let accepted = match repr.bth.opcode.operation() {
            Operation::Acknowledge => acknowledge(ctx, qpn, tr, repr, retry_count, rnr_retry),
            Operation::RdmaReadResponse => read_response(ctx, dom, mtu, tr, repr, payload),
            Operation::AtomicAcknowledge => atomic_ack(ctx, dom, tr, repr),
            _ => false,
        };
        if !accepted {
            count_drop(ctx, |d| &mut d.stale_response);
        }
        let progress =
            tr.una != una_before || tr.sq.iter().filter(|w| w.done).count() != done_before;
        if progress {
            // Retries count consecutive failures: progress gives them back.
            tr.retry_left = None;
            tr.rnr_left = None;
            tr.gap_retry = None;
        }
        rearm(ctx, &qpc, tr, progress);
    });
    complete_head(ctx, qpn);
    super::requester::run(ctx, qpn);
}

/// An ACK, RNR NAK or NAK for `repr`'s PSN: retires what it acknowledges, then waits (RNR),
/// goes back (PSN sequence error) or fails the WQE (other NAKs), within the retry counts.
/// False when the packet is not news (a duplicate, a PSN never sent, no AETH).
fn acknowledge(
    ctx: &mut Ctx<'_>,
    qpn: u32,
    tr: &mut QpTransport,
    repr: &PacketRepr,
    retry_count: u8,
    rnr_retry: u8,
) -> bool {
    let psn = repr.bth.psn;
    let syndrome = repr.ext.aeth.map(|a| a.syndrome);
    // A response for a PSN never sent is bogus.
    let sent_end = ctx
        .state
        .res
        .qps
        .get(qpn)
        .map_or(psn, |q| q.ctx.next_send_psn());
    // Only PSNs between the last acknowledged one and the last sent are news; an
    // older one (a duplicate ACK) changes nothing.
    let fresh = tr
        .una
        .is_some_and(|u| psn_cmp(psn, psn_add(u, 0xFF_FFFF)) >= 0 && psn_cmp(psn, sent_end) < 0);
    if !fresh {
        return false;
    }
    match syndrome {
        Some(Syndrome::Ack { .. }) => {
            let before = tr.una;
            advance_una(tr, psn_add(psn, 1));
            ack_upto(tr, psn);
            if tr.una != before {
                tr.gap_retry = None;
            }
            lost_response_check(ctx, tr, psn);
        }
        Some(Syndrome::RnrNak { .. }) => {
            ctx.state.counters.transport.rnr_naks_rx += 1;
            advance_una(tr, psn);
            ack_before(tr, psn);
            let left = tr.rnr_left.get_or_insert(rnr_retry);
            if *left == 0 {
                fail_at(tr, psn, CqeSyndrome::RnrRetryExc);
            } else {
                if *left != 7 {
                    *left -= 1;
                }
                let wait_ns = syndrome
                    .and_then(Syndrome::rnr_timer_us)
                    .map_or(0, |us| u64::from(us) * 1000);
                tr.rnr_wait = Some((ctx.clock.now_ns() + wait_ns, psn));
                tr.retx_at = None;
            }
        }
        Some(Syndrome::Nak(NakCode::PsnSequenceError)) if tr.rnr_wait.is_some() => {
            // The packets after an RNR-NAKed one arrive out of sequence; the
            // resend when the RNR timer expires covers them.
            advance_una(tr, psn);
            ack_before(tr, psn);
        }
        Some(Syndrome::Nak(NakCode::PsnSequenceError)) => {
            ctx.state.counters.transport.seq_naks_rx += 1;
            advance_una(tr, psn);
            ack_before(tr, psn);
            let left = tr.retry_left.get_or_insert(retry_count);
            if *left == 0 {
                fail_at(tr, psn, CqeSyndrome::TransportRetryExc);
            } else {
                *left -= 1;
                ctx.state.counters.transport.retransmits += 1;
                go_back(tr, psn);
            }
        }
        Some(Syndrome::Nak(code)) => {
            ack_before(tr, psn);
            let s = match code {
                NakCode::InvalidRequest => CqeSyndrome::RemoteInvalReq,
                NakCode::RemoteAccessError => CqeSyndrome::RemoteAccess,
                _ => CqeSyndrome::RemoteOp,
            };
            fail_at(tr, psn, s);
        }
        None => return false,
    }
    true
}

/// An ACK beyond the oldest unfinished READ / atomic means its response was lost: retry it
/// (once per PSN; the local ACK timeout covers a lost retry).
fn lost_response_check(ctx: &mut Ctx<'_>, tr: &mut QpTransport, psn: u32) {
    let Some(w) = tr.sq.iter().find(|w| !w.done) else {
        return;
    };
    if w.is_rd_atomic() && w.fully_sent() && w.error.is_none() && psn_cmp(psn, w.last_psn()) > 0 {
        let from = psn_add(w.first_psn, w.rd_rcvd);
        gap_retry(ctx, tr, from);
    }
}

/// Where a retry resumes: the oldest unacknowledged PSN, or earlier when the oldest
/// unfinished WQE is a READ / atomic still waiting for (part of) its response.
pub(crate) fn retry_from(tr: &QpTransport) -> Option<u32> {
    let una = tr.una?;
    let head = tr.sq.iter().find(|w| !w.done && w.started && w.npkts > 0);
    Some(match head {
        Some(w) if w.is_rd_atomic() => {
            let r = psn_add(w.first_psn, w.rd_rcvd);
            if psn_cmp(r, una) < 0 { r } else { una }
        }
        Some(w) if psn_cmp(una, w.last_psn()) > 0 => w.first_psn,
        _ => una,
    })
}

/// Goes back to `from` after a gap in the responses, unless a retry started this way has
/// not made progress yet (as rxe's `started_retry`: one at a time).
fn gap_retry(ctx: &mut Ctx<'_>, tr: &mut QpTransport, from: u32) {
    if tr.gap_retry.is_none() {
        tr.gap_retry = Some(from);
        ctx.state.counters.transport.retransmits += 1;
        go_back(tr, from);
    }
}

/// Completes SENDs and WRITEs whose last PSN is at or before `psn`, in order.
fn ack_upto(tr: &mut QpTransport, psn: u32) {
    for w in tr.sq.iter_mut() {
        if w.done {
            continue;
        }
        // The responder has every packet up to `psn`, whether or not this round resent
        // them (after a go-back-N some may be queued again).
        if !w.started || w.npkts == 0 || w.error.is_some() || psn_cmp(w.last_psn(), psn) > 0 {
            break;
        }
        if w.is_rd_atomic() {
            // Its response should have come first: lost (see `lost_response_check`).
            break;
        }
        w.next_pkt = w.packets();
        w.done = true;
    }
}

/// Completes SENDs and WRITEs that end before `psn`.
fn ack_before(tr: &mut QpTransport, psn: u32) {
    ack_upto(tr, psn_add(psn, 0xFF_FFFF));
}

/// Whether `w` is unfinished and its PSN range holds `psn`.
fn holds(w: &SendWqe, psn: u32) -> bool {
    !w.done
        && w.started
        && w.npkts > 0
        && psn_cmp(psn, w.first_psn) >= 0
        && psn_cmp(psn, w.last_psn()) <= 0
}

/// The first unfinished WQE whose PSN range holds `psn`.
fn wqe_at(tr: &mut QpTransport, psn: u32) -> Option<&mut SendWqe> {
    tr.sq.iter_mut().find(|w| holds(w, psn))
}

/// Fails the WQE that holds `psn` (or the oldest unfinished one): it sends nothing more and
/// completes with `s` once it reaches the head.
pub(crate) fn fail_at(tr: &mut QpTransport, psn: u32, s: CqeSyndrome) {
    let idx = tr
        .sq
        .iter()
        .position(|w| holds(w, psn))
        .or_else(|| tr.sq.iter().position(|w| !w.done));
    if let Some(w) = idx.and_then(|i| tr.sq.get_mut(i)) {
        w.error = Some(s);
        w.started = true;
        w.next_pkt = w.npkts;
    }
}

/// Go-back-N: resend from `psn` (the WQE holding it restarts there; a READ is requested
/// again for the bytes not yet received, an atomic whole; later WQEs resend from their
/// start).
pub(crate) fn go_back(tr: &mut QpTransport, psn: u32) {
    for w in tr.sq.iter_mut() {
        if w.done || !w.started || w.error.is_some() {
            continue;
        }
        if psn_cmp(psn, w.last_psn()) > 0 {
            continue;
        }
        let k = if psn_cmp(psn, w.first_psn) <= 0 || w.is_rd_atomic() {
            0
        } else {
            psn.wrapping_sub(w.first_psn) & 0xFF_FFFF
        };
        w.next_pkt = w.next_pkt.min(k);
        // A READ is asked again for what did not arrive: the response to the reissued
        // request may restart the opcode sequence or continue the original one.
        if w.is_rd_atomic() {
            w.rd_resumed = true;
        }
    }
}

/// A READ response: scatter into the READ's buffers; the last one completes it.
fn read_response(
    ctx: &mut Ctx<'_>,
    dom: Domain,
    mtu: u32,
    tr: &mut QpTransport,
    repr: &PacketRepr,
    payload: &[u8],
) -> bool {
    let psn = repr.bth.psn;
    let opcode = repr.bth.opcode;
    if let Some(a) = repr.ext.aeth {
        if !a.syndrome.is_ack() {
            return false;
        }
    }
    // Earlier SENDs and WRITEs are implicitly acknowledged.
    ack_before(tr, psn);
    let Some(w) = wqe_at(tr, psn) else {
        return false;
    };
    if w.op() != Some(SendOpcode::RdmaRead) {
        return false;
    }
    let k = psn.wrapping_sub(w.first_psn) & 0xFF_FFFF;
    if k < w.rd_rcvd {
        // A duplicate of a response already taken.
        return false;
    }
    if k > w.rd_rcvd {
        // A response was lost: ask again from the first missing one.
        let from = psn_add(w.first_psn, w.rd_rcvd);
        gap_retry(ctx, tr, from);
        return false;
    }
    let off = u64::from(k) * u64::from(mtu);
    let expect = w.len.saturating_sub(off).min(u64::from(mtu));
    let pos = opcode.position();
    let last = k + 1 == w.npkts;
    // The opcode sequence. FIRST / ONLY start a response: at the READ's first PSN, or at the
    // expected PSN of a READ reissued for its remaining bytes (a responder that executes the
    // retry as a new request). MIDDLE / LAST continue one: after FIRST / MIDDLE, or at the
    // expected PSN of a reissued READ (rxe replays a retry that is not at the READ's first
    // PSN as a continuation of the original response: MIDDLE .. LAST, never FIRST; rxe's own
    // completer accepts that because its sequence state survives the retry). Either way the
    // PSN is the expected one and ONLY / LAST must be the READ's last packet.
    let start_ok = k == 0 || w.rd_resumed;
    let cont_ok = w.rd_in_msg || (w.rd_resumed && k > 0);
    let pos_ok = match pos {
        Position::Only => start_ok && last,
        Position::First => start_ok && !last,
        Position::Middle => cont_ok && !last,
        Position::Last => cont_ok && last,
    };
    if !pos_ok || payload.len() as u64 != expect {
        return false;
    }
    if let Err(e) = mkey::scatter(ctx.dma, &ctx.state.res.mkeys, dom, &w.segs, off, payload) {
        w.error = Some(e.local_syndrome());
        return true;
    }
    w.rd_rcvd = k + 1;
    w.rd_in_msg = pos == Position::First || pos == Position::Middle;
    w.rd_resumed = false;
    if last {
        w.done = true;
    }
    advance_una(tr, psn_add(psn, 1));
    true
}

/// An atomic ACK: write the original value and complete the atomic.
fn atomic_ack(ctx: &mut Ctx<'_>, dom: Domain, tr: &mut QpTransport, repr: &PacketRepr) -> bool {
    let psn = repr.bth.psn;
    let Some(orig) = repr.ext.atomic_ack_eth.map(|a| a.orig_data) else {
        return false;
    };
    ack_before(tr, psn);
    let Some(w) = wqe_at(tr, psn) else {
        return false;
    };
    if !matches!(w.op(), Some(SendOpcode::AtomicCs | SendOpcode::AtomicFa)) {
        return false;
    }
    let bytes = if super::atomic_big_endian(ctx) {
        orig.to_be_bytes()
    } else {
        orig.to_le_bytes()
    };
    if let Err(e) = mkey::scatter(ctx.dma, &ctx.state.res.mkeys, dom, &w.segs, 0, &bytes) {
        w.error = Some(e.local_syndrome());
        return true;
    }
    w.done = true;
    advance_una(tr, psn_add(psn, 1));
    true
}

/// Writes CQEs for the completed WQEs at the head of QP `qpn`'s send queue; a failed WQE at
/// the head gets its error CQE and moves the QP to ERR (RC) or SQE (UD, UC), flushing the
/// rest.
pub(crate) fn complete_head(ctx: &mut Ctx<'_>, qpn: u32) {
    let Some(qp) = ctx.state.res.qps.get(qpn) else {
        return;
    };
    let cqn = qp.ctx.cqn_snd();
    let qpc = qp.ctx;
    // Completed WQEs lend their lists to the next ones parsed (`sq::parse`): as many are
    // kept as the send queue can hold outstanding, so a QP that keeps it full (a list of 32
    // posted at once, perftest's `-l`) allocates nothing either.
    let spare_max = qp.sq_size() as usize;
    ctx.with_transport(qpn, |ctx, tr| {
        let uidx = crate::cq::srqn_uidx(ctx, &qpc, None);
        while let Some(w) = tr.sq.front() {
            if let Some(s) = w.error.filter(|_| w.fully_sent()) {
                let mut c = crate::cq::err_cqe(true, qpn, w.wqe_index, w.opcode, s);
                c.set_srqn_uidx(uidx);
                tr.sq.pop_front();
                crate::cq::push(ctx, cqn, &mut c);
                if qpc.st() == u8::from(QpSt::Rc) {
                    enter_error(ctx, qpn, tr);
                } else {
                    super::enter_sq_error(ctx, qpn, tr);
                }
                break;
            }
            if !w.done {
                break;
            }
            let Some(w) = tr.sq.pop_front() else {
                break;
            };
            if w.signaled {
                let byte_cnt = w.len.min(u64::from(u32::MAX)) as u32;
                let mut c = crate::cq::req_cqe(qpn, w.wqe_index, w.opcode, byte_cnt);
                c.set_srqn_uidx(uidx);
                crate::cq::push(ctx, cqn, &mut c);
            }
            if tr.spare.len() < spare_max {
                tr.spare.push(w);
            }
        }
    });
}
