//! The responder: executes incoming requests and answers them.
//!
//! Checks, in order (roce-v2.md section 5): the QP can receive (RTR or later), the packet's
//! transport matches the QP's service type, its source IP is the connected peer and its
//! destination IP the QP's own source GID (RC / UC, [`super::addr_ok`]),
//! the P_Key is the default one; then for RC the PSN (a duplicate SEND / WRITE is re-ACKed,
//! an atomic replayed; a PSN ahead of the expected one gets one PSN sequence NAK), the
//! opcode sequence, the payload size for the packet's position, the QP's access flags
//! (`rre` / `rwe` / `rae`; a missing flag is a remote access NAK, as ConnectX answers), a
//! receive WQE for SENDs and WRITE_WITH_IMM (else an RNR NAK with `min_rnr_nak`, no state
//! change), the rkey and bounds, then execution.
//!
//! SEND: scattered into the receive WQE; a message longer than the WQE's buffers completes
//! the WQE with a local length error and NAKs invalid request. WRITE: to the RETH's target.
//! READ: responses of up to one MTU each, AETH on the first and last. Atomics: 8-byte aligned
//! targets in the byte order `atomic_req_8B_endianness_mode` selects (big-endian, or host
//! order with mode 1), the original value in the ATOMIC ACKNOWLEDGE. UD: Q_Key check (QP1:
//! the GSI Q_Key 0x80010000, and the P_Key in the CQE),
//! and the first 40 bytes of the receive buffer get the GRH area (an IPv4 header at offset
//! 20, bytes 0-19 zero; an IPv6 header fills all 40). UC never NAKs: bad packets are
//! dropped. A responder error other than RNR moves the QP to ERR and raises the affiliated
//! event (WQ_INVAL_REQ_ERROR, WQ_ACCESS_ERROR, else WQ_CATAS_ERROR); the first packet a QP
//! receives in RTR raises COMM_EST.

use rnic_hw_regs::cqe::{Cqe64, CqeOpcode, CqeSyndrome};
use rnic_hw_regs::ctx::{QpSt, QpState, Qpc};
use rnic_hw_regs::eqe::EventType;
use rnic_hw_regs::roce::{GRH_LEN, GSI_QKEY};

use super::{Path, addr_ok, bth, can_receive, enter_error, mtu_bytes, packet_repr, send_frame};
use crate::ctx::{Ctx, count_drop, count_drops};
use crate::mkey::{self, Need};
use crate::resources::{Domain, InMsg, MsgKind, QpTransport, RdRes, ReadJob, RecvWqe, ResKind};
use crate::rq::Take;
use crate::state::RxDrops;
use crate::wire::psn::{psn_add, psn_cmp};
use crate::wire::{
    AethRepr, AtomicAckEthRepr, GsoRun, NakCode, Opcode, Operation, PacketRepr, Position, RethRepr,
    Syndrome, Transport,
};

/// Handles a request packet for QP `qpn`. `ip_header` is the packet's IP header as received
/// (for the UD GRH area).
pub(crate) fn handle(
    ctx: &mut Ctx<'_>,
    qpn: u32,
    repr: &PacketRepr,
    payload: &[u8],
    ip_header: &[u8],
) {
    let Some(qp) = ctx.state.res.qps.get(qpn) else {
        count_drop(ctx, |d| &mut d.unknown_qp);
        return;
    };
    let qpc = qp.ctx;
    let Some(st) = admit(ctx, &qpc, repr, 1) else {
        return;
    };
    ctx.with_transport(qpn, |ctx, tr| {
        established(ctx, qpn, &qpc, tr);
        match st {
            Some(QpSt::Ud | QpSt::Qp1) => {
                if let Err(rule) = ud_receive(ctx, qpn, &qpc, tr, repr, payload, ip_header) {
                    count_drop(ctx, rule);
                }
            }
            _ => connected(ctx, qpn, &qpc, st, tr, |r, ctx, tr| {
                if let Err(rule) = r.receive(ctx, tr, repr, payload) {
                    count_drop(ctx, rule);
                }
            }),
        }
    });
}

/// Handles a run of request packets for QP `qpn` ([`GsoRun`], its first packet's headers
/// `first`, the run's `payload`) as that many packets in a row: the checks every packet
/// shares (state, transport, addresses, P_Key) once, then each packet as [`handle`] does.
pub(crate) fn handle_run(
    ctx: &mut Ctx<'_>,
    qpn: u32,
    first: &PacketRepr,
    run: GsoRun,
    payload: &[u8],
) {
    let Some(qp) = ctx.state.res.qps.get(qpn) else {
        count_drops(ctx, u64::from(run.count), |d| &mut d.unknown_qp);
        return;
    };
    let qpc = qp.ctx;
    let Some(st) = admit(ctx, &qpc, first, run.count) else {
        return;
    };
    ctx.with_transport(qpn, |ctx, tr| {
        established(ctx, qpn, &qpc, tr);
        // A run is RC or UC ([`GsoRun::check`]), and `admit` matched it to the QP's service.
        connected(ctx, qpn, &qpc, st, tr, |r, ctx, tr| {
            for i in 0..run.count {
                let repr = run.packet(first, i);
                let payload = &payload[run.payload_range(payload.len(), i)];
                if let Err(rule) = r.receive(ctx, tr, &repr, payload) {
                    count_drop(ctx, rule);
                }
            }
        });
    });
}

/// The checks every packet sharing `first`'s transport, addresses and P_Key passes alike
/// for a QP of context `qpc`: the QP can receive, the transport is its service, the packet
/// comes from its peer to its address (RC / UC), the P_Key is the default one. Returns the
/// QP's service, or counts the `n` packets dropped.
#[inline(always)]
fn admit(ctx: &mut Ctx<'_>, qpc: &Qpc, first: &PacketRepr, n: u16) -> Option<Option<QpSt>> {
    let st = QpSt::try_from(qpc.st()).ok();
    let transport_ok = matches!(
        (st, first.bth.opcode.transport()),
        (Some(QpSt::Rc), Transport::Rc)
            | (Some(QpSt::Uc), Transport::Uc)
            | (Some(QpSt::Ud | QpSt::Qp1), Transport::Ud)
    );
    let peer_ok = addr_ok(ctx, qpc, &first.ip);
    let rule: Option<Rule> = if !can_receive(qpc) {
        Some(|d| &mut d.wrong_state)
    } else if !transport_ok {
        Some(|d| &mut d.wrong_transport)
    } else if !peer_ok {
        Some(|d| &mut d.peer_mismatch)
    } else if first.bth.pkey & 0x7FFF != 0x7FFF {
        Some(|d| &mut d.pkey)
    } else {
        None
    };
    if let Some(rule) = rule {
        count_drops(ctx, u64::from(n), rule);
        return None;
    }
    Some(st)
}

/// The first packet a QP receives in RTR: communication established (the COMM_EST event).
fn established(ctx: &mut Ctx<'_>, qpn: u32, qpc: &Qpc, tr: &mut QpTransport) {
    if qpc.state() == u8::from(QpState::Rtr) && !tr.resp.comm_est {
        tr.resp.comm_est = true;
        super::qp_event(ctx, EventType::CommEst, qpn);
    }
}

/// Runs `f` with the responder of RC / UC QP `qpn` (service `st`), after the READ responses
/// it still owes (requests execute in order: those go out before the next request touches
/// memory), and keeps what `f` moved (expected PSN, MSN, READ responses to send).
#[inline(always)]
fn connected(
    ctx: &mut Ctx<'_>,
    qpn: u32,
    qpc: &Qpc,
    st: Option<QpSt>,
    tr: &mut QpTransport,
    f: impl FnOnce(&mut Responder<'_>, &mut Ctx<'_>, &mut QpTransport),
) {
    if !tr.resp.reads.is_empty() {
        pump(ctx, qpn, qpc, tr, u32::MAX);
    }
    let mut r = Responder {
        qpn,
        qpc,
        rc: st == Some(QpSt::Rc),
        epsn: qpc.next_rcv_psn(),
        msn: qpc.rmsn(),
    };
    f(&mut r, ctx, tr);
    if let Some(qp) = ctx.state.res.qps.get_mut(qpn) {
        qp.ctx.set_next_rcv_psn(r.epsn);
        qp.ctx.set_rmsn(r.msn & 0xFF_FFFF);
    }
    if !tr.resp.reads.is_empty() && !ctx.state.port.read_pending.contains(&qpn) {
        ctx.state.port.read_pending.push_back(qpn);
    }
}

/// A drop rule: which [`RxDrops`] counter a dropped frame goes to.
type Rule = fn(&mut RxDrops) -> &mut u64;

/// READ response packets sent per turn before other work (frames, other QPs) runs.
const READ_BURST: u32 = 16;

/// Sends an ACK-type packet (ACK, NAK, RNR NAK) for `psn` with `msn` on RC QP `qpn`.
fn send_ack(ctx: &mut Ctx<'_>, qpn: u32, qpc: &Qpc, psn: u32, msn: u32, syndrome: Syndrome) {
    let path = Path::of_qp(qpc);
    let Ok(mut repr) = packet_repr(ctx, qpn, &path, bth(Opcode::RcAcknowledge, path.dqpn, psn))
    else {
        return;
    };
    repr.ext.aeth = Some(AethRepr {
        syndrome,
        msn: msn & 0xFF_FFFF,
    });
    if syndrome.is_ack() {
        ctx.state.counters.transport.acks_tx += 1;
    } else {
        ctx.state.counters.transport.naks_tx += 1;
    }
    send_frame(ctx, &repr, &[]);
}

/// Sends the READ responses of QP `qpn`'s jobs, at most `max` packets; returns whether some
/// remain. A READ whose memory became unreadable ends with a remote operational NAK and the
/// QP in ERR.
fn pump(ctx: &mut Ctx<'_>, qpn: u32, qpc: &Qpc, tr: &mut QpTransport, max: u32) -> bool {
    let Some(mtu) = mtu_bytes(qpc.mtu()).map(u64::from) else {
        tr.resp.reads.clear();
        return false;
    };
    let path = Path::of_qp(qpc);
    let mut data = std::mem::take(&mut ctx.state.port.scratch);
    let mut budget = max;
    let mut failed = None;
    while budget > 0 {
        let Some(job) = tr.resp.reads.front_mut() else {
            break;
        };
        let i = job.next;
        let code = match (i == 0, i + 1 == job.n) {
            (true, true) => Opcode::RcRdmaReadResponseOnly,
            (true, false) => Opcode::RcRdmaReadResponseFirst,
            (false, false) => Opcode::RcRdmaReadResponseMiddle,
            (false, true) => Opcode::RcRdmaReadResponseLast,
        };
        let rpsn = psn_add(job.psn0, i);
        let off = u64::from(i) * mtu;
        let chunk = job.len.saturating_sub(off).min(mtu) as usize;
        // The read overwrites every byte: grow the buffer, never clear it.
        if data.len() < chunk {
            data.resize(chunk, 0);
        }
        if chunk > 0
            && mkey::read(
                ctx.dma,
                &ctx.state.res.mkeys,
                job.rkey,
                Domain::of_qp(qpc).on(qpn),
                Need::RemoteRead,
                job.va.wrapping_add(off),
                &mut data[..chunk],
            )
            .is_err()
        {
            failed = Some((rpsn, job.msn));
            break;
        }
        let msn = job.msn;
        job.next += 1;
        if job.next >= job.n {
            tr.resp.reads.pop_front();
        }
        budget -= 1;
        let Ok(mut r) = packet_repr(ctx, qpn, &path, bth(code, path.dqpn, rpsn)) else {
            continue;
        };
        if code.has_aeth() {
            r.ext.aeth = Some(AethRepr {
                syndrome: Syndrome::ACK_NO_CREDITS,
                msn: msn & 0xFF_FFFF,
            });
        }
        send_frame(ctx, &r, &data[..chunk]);
    }
    ctx.state.port.scratch = data;
    if let Some((psn, msn)) = failed {
        tr.resp.reads.clear();
        send_ack(
            ctx,
            qpn,
            qpc,
            psn,
            msn,
            Syndrome::Nak(NakCode::RemoteOperationalError),
        );
        super::qp_event(ctx, EventType::WqCatasError, qpn);
        enter_error(ctx, qpn, tr);
        return false;
    }
    !tr.resp.reads.is_empty()
}

/// Sends everything QP `qpn`'s responder owes before a new response: the rest of its READ
/// responses, then its coalesced ACK.
fn drain(ctx: &mut Ctx<'_>, qpn: u32, qpc: &Qpc, tr: &mut QpTransport) {
    if !tr.resp.reads.is_empty() {
        pump(ctx, qpn, qpc, tr, u32::MAX);
    }
    if let Some((psn, msn)) = tr.resp.ack_pending.take() {
        send_ack(ctx, qpn, qpc, psn, msn, Syndrome::ACK_NO_CREDITS);
    }
}

/// Sends the ACKs the port's responders coalesced (the port is idle).
pub(crate) fn flush_acks(ctx: &mut Ctx<'_>) {
    let mut qpns = std::mem::take(&mut ctx.state.port.ack_pending);
    for &qpn in &qpns {
        let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
            continue;
        };
        let qpc = qp.ctx;
        ctx.with_transport(qpn, |ctx, tr| drain(ctx, qpn, &qpc, tr));
    }
    qpns.clear();
    if ctx.state.port.ack_pending.is_empty() {
        ctx.state.port.ack_pending = qpns;
    }
}

/// Sends one burst of READ responses of the next QP that has some; returns false when no
/// QP has any.
pub(crate) fn pump_reads(ctx: &mut Ctx<'_>) -> bool {
    while let Some(qpn) = ctx.state.port.read_pending.pop_front() {
        let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
            continue;
        };
        if qp.tr.as_ref().is_none_or(|tr| tr.resp.reads.is_empty()) {
            continue;
        }
        let qpc = qp.ctx;
        let more = ctx.with_transport(qpn, |ctx, tr| pump(ctx, qpn, &qpc, tr, READ_BURST));
        if more == Some(true) {
            ctx.state.port.read_pending.push_back(qpn);
        }
        return true;
    }
    false
}

/// A responder CQE for receive WQE `recv`.
fn resp_cqe(
    ctx: &Ctx<'_>,
    qpn: u32,
    qpc: &Qpc,
    recv: &RecvWqe,
    op: CqeOpcode,
    byte_cnt: u64,
) -> Cqe64 {
    let mut c = Cqe64::default();
    c.set_opcode(op.raw());
    c.set_qpn(qpn);
    c.set_wqe_counter(recv.counter);
    c.set_byte_cnt(byte_cnt.min(u64::from(u32::MAX)) as u32);
    c.set_srqn_uidx(crate::cq::srqn_uidx(ctx, qpc, recv.srqn));
    c
}

/// A responder error CQE for receive WQE `recv`.
fn resp_err(ctx: &Ctx<'_>, qpn: u32, qpc: &Qpc, recv: &RecvWqe, s: CqeSyndrome) -> Cqe64 {
    let mut c = crate::cq::err_cqe(false, qpn, recv.counter, 0, s);
    c.set_srqn_uidx(crate::cq::srqn_uidx(ctx, qpc, recv.srqn));
    c
}

/// Loses the UC message in progress, keeping a receive WQE it took for the next message.
fn lose_uc_msg(tr: &mut QpTransport) {
    if let Some(w) = tr.resp.msg.take().and_then(|m| m.recv) {
        tr.resp.spare_recv = Some(w);
    }
}

/// The receive CQE syndrome of the responder's NAK `code`: what the requester sees, seen
/// from the receive side (mlx5's responder error syndromes).
fn nak_syndrome(code: NakCode) -> CqeSyndrome {
    match code {
        NakCode::InvalidRequest => CqeSyndrome::RemoteInvalReq,
        NakCode::RemoteAccessError => CqeSyndrome::RemoteAccess,
        _ => CqeSyndrome::RemoteOp,
    }
}

/// A UD receive.
fn ud_receive(
    ctx: &mut Ctx<'_>,
    qpn: u32,
    qpc: &Qpc,
    tr: &mut QpTransport,
    repr: &PacketRepr,
    payload: &[u8],
    ip_header: &[u8],
) -> Result<(), Rule> {
    let Some(deth) = repr.ext.deth else {
        return Err(|d| &mut d.malformed);
    };
    let qp1 = qpc.st() == u8::from(QpSt::Qp1);
    // QP1 takes the GSI Q_Key only (IBTA 13.4.5.3), whatever its context says.
    let want = if qp1 { GSI_QKEY } else { qpc.q_key() };
    if deth.qkey != want {
        return Err(|d| &mut d.qkey);
    }
    let recv = match crate::rq::take(ctx, qpn) {
        Take::Wqe(w) => w,
        Take::Empty | Take::Fault => return Err(|d| &mut d.ud_no_wqe),
    };
    let cqn = qpc.cqn_rcv();
    let total = (GRH_LEN + payload.len()) as u64;
    if total > mkey::total_len(&recv.segs) {
        let mut c = resp_err(ctx, qpn, qpc, &recv, CqeSyndrome::LocalLength);
        crate::cq::push(ctx, cqn, &mut c);
        enter_error(ctx, qpn, tr);
        return Ok(());
    }
    let mut grh = [0u8; GRH_LEN];
    match ip_header.len() {
        20 => grh[20..].copy_from_slice(ip_header),
        40 => grh.copy_from_slice(ip_header),
        _ => {}
    }
    let dma = ctx.dma;
    let mkeys = &ctx.state.res.mkeys;
    let wrote = mkey::scatter(dma, mkeys, recv.dom, &recv.segs, 0, &grh)
        .and_then(|()| mkey::scatter(dma, mkeys, recv.dom, &recv.segs, GRH_LEN as u64, payload));
    if let Err(e) = wrote {
        let mut c = resp_err(ctx, qpn, qpc, &recv, e.local_syndrome());
        crate::cq::push(ctx, cqn, &mut c);
        enter_error(ctx, qpn, tr);
        return Ok(());
    }
    let op = if repr.ext.imm.is_some() {
        CqeOpcode::RespSendImm
    } else {
        CqeOpcode::RespSend
    };
    let mut c = resp_cqe(ctx, qpn, qpc, &recv, op, total);
    c.set_rqpn(deth.src_qp);
    c.set_grh(1);
    c.set_se(repr.bth.solicited);
    if let Some(imm) = repr.ext.imm {
        c.set_imm_inval_pkey(imm.imm);
    } else if qp1 {
        // mlx5 reports a GSI datagram's P_Key in the CQE (the kernel maps it to an index).
        c.set_imm_inval_pkey(u32::from(repr.bth.pkey));
    }
    crate::cq::push(ctx, cqn, &mut c);
    crate::rq::recycle(ctx, recv);
    Ok(())
}

/// Why a request failed at the responder.
enum Refuse {
    /// Drop silently (UC, or nothing to answer).
    Drop,
    /// RNR NAK: no receive WQE; no state change.
    Rnr,
    /// NAK with this code; the QP enters ERR. A receive WQE involved completes with the
    /// syndrome.
    Nak(NakCode, Option<(RecvWqe, CqeSyndrome)>),
}

/// The responder's view of one RC / UC QP while it handles a packet.
struct Responder<'q> {
    qpn: u32,
    qpc: &'q Qpc,
    rc: bool,
    /// Expected PSN (written back to `next_rcv_psn`).
    epsn: u32,
    /// Message sequence number (written back to `rmsn`).
    msn: u32,
}

impl Responder<'_> {
    /// Answers with an ACK-type packet (ACK, NAK, RNR NAK) for `psn` (RC only). A positive
    /// ACK is coalesced: it replaces the one owed and goes out when the port is idle. Anything
    /// else first sends what the QP owes (READ responses, the coalesced ACK), in order.
    fn ack(&self, ctx: &mut Ctx<'_>, tr: &mut QpTransport, psn: u32, syndrome: Syndrome) {
        if !self.rc {
            return;
        }
        if syndrome.is_ack() {
            if tr.resp.ack_pending.replace((psn, self.msn)).is_some() {
                ctx.state.counters.transport.acks_coalesced += 1;
            } else {
                ctx.state.port.ack_pending.push(self.qpn);
            }
            return;
        }
        drain(ctx, self.qpn, self.qpc, tr);
        send_ack(ctx, self.qpn, self.qpc, psn, self.msn, syndrome);
    }

    /// Handles an RC / UC request; `Err(rule)` when it was dropped.
    fn receive(
        &mut self,
        ctx: &mut Ctx<'_>,
        tr: &mut QpTransport,
        repr: &PacketRepr,
        payload: &[u8],
    ) -> Result<(), Rule> {
        let psn = repr.bth.psn;
        let opcode = repr.bth.opcode;
        let pos = opcode.position();
        if self.rc {
            let d = psn_cmp(psn, self.epsn);
            if d < 0 {
                return self.duplicate(ctx, tr, repr);
            }
            if d > 0 {
                if !tr.resp.nak_sent {
                    tr.resp.nak_sent = true;
                    let e = self.epsn;
                    self.ack(ctx, tr, e, Syndrome::Nak(NakCode::PsnSequenceError));
                }
                return Err(|d| &mut d.out_of_sequence);
            }
            tr.resp.nak_sent = false;
        } else if psn != self.epsn {
            // UC: a gap loses the message in progress; resynchronize on a new message.
            lose_uc_msg(tr);
            self.epsn = psn;
            if matches!(pos, Position::Middle | Position::Last) {
                self.epsn = psn_add(psn, 1);
                return Err(|d| &mut d.uc_error);
            }
        }
        let Err(refused) = self.execute(ctx, tr, repr, payload) else {
            return Ok(());
        };
        if !self.rc {
            // UC never NAKs: the message in progress is lost, the next PSN starts afresh.
            lose_uc_msg(tr);
            self.epsn = psn_add(psn, 1);
            return Err(|d| &mut d.uc_error);
        }
        match refused {
            Refuse::Drop => Err(|d| &mut d.other),
            Refuse::Rnr => {
                let t = self.qpc.min_rnr_nak();
                self.ack(ctx, tr, psn, Syndrome::RnrNak { timer: t });
                Ok(())
            }
            Refuse::Nak(code, recv) => {
                // A receive WQE the message in progress took completes with the error too
                // (the flush that follows starts after it: completions stay in order).
                let recv = recv.or_else(|| {
                    let w = tr.resp.msg.as_mut().and_then(|m| m.recv.take())?;
                    Some((w, nak_syndrome(code)))
                });
                if let Some((w, s)) = recv {
                    let mut c = resp_err(ctx, self.qpn, self.qpc, &w, s);
                    crate::cq::push(ctx, self.qpc.cqn_rcv(), &mut c);
                }
                self.ack(ctx, tr, psn, Syndrome::Nak(code));
                tr.resp.msg = None;
                // The affiliated event of the responder's error (IBTA: local invalid
                // request / local access violation WQ error, else catastrophic).
                let kind = match code {
                    NakCode::InvalidRequest => EventType::WqInvalReqError,
                    NakCode::RemoteAccessError => EventType::WqAccessError,
                    _ => EventType::WqCatasError,
                };
                super::qp_event(ctx, kind, self.qpn);
                enter_error(ctx, self.qpn, tr);
                Ok(())
            }
        }
    }

    /// A request with a PSN before the expected one: SEND / WRITE are re-ACKed; a READ
    /// within a saved resource is read again from its PSN (a subset of the original, same
    /// R_Key); an atomic with a saved resource gets its original value again without
    /// executing twice. Anything else is dropped.
    fn duplicate(
        &mut self,
        ctx: &mut Ctx<'_>,
        tr: &mut QpTransport,
        repr: &PacketRepr,
    ) -> Result<(), Rule> {
        let psn = repr.bth.psn;
        let stale: Rule = |d| &mut d.stale_duplicate;
        match repr.bth.opcode.operation() {
            Operation::CompareSwap | Operation::FetchAdd => {
                let orig = tr.resp.rd_res.iter().find_map(|r| match r.kind {
                    ResKind::Atomic(v) if r.first_psn == psn => Some(v),
                    _ => None,
                });
                let orig = orig.ok_or(stale)?;
                ctx.state.counters.transport.duplicates += 1;
                self.atomic_ack(ctx, tr, psn, orig);
                Ok(())
            }
            Operation::RdmaReadRequest => {
                let reth = repr.ext.reth.ok_or(stale)?;
                let found = tr.resp.rd_res.iter().find_map(|r| match r.kind {
                    ResKind::Read { va, rkey, len }
                        if psn_cmp(psn, r.first_psn) >= 0 && psn_cmp(psn, r.last_psn) <= 0 =>
                    {
                        Some((va, rkey, len))
                    }
                    _ => None,
                });
                let (va, rkey, len) = found.ok_or(stale)?;
                let new_len = u64::from(reth.dma_len);
                let inside = reth.virtual_addr >= va
                    && reth
                        .virtual_addr
                        .checked_add(new_len)
                        .is_some_and(|e| e <= va.wrapping_add(len));
                if reth.rkey != rkey || !inside {
                    return Err(stale);
                }
                let mtu = mtu_bytes(self.qpc.mtu()).map_or(256, u64::from);
                ctx.state.counters.transport.duplicates += 1;
                // What is still being sent for the original goes first; then the replay.
                drain(ctx, self.qpn, self.qpc, tr);
                tr.resp.reads.push_back(ReadJob {
                    va: reth.virtual_addr,
                    rkey,
                    len: new_len,
                    psn0: psn,
                    n: new_len.div_ceil(mtu).max(1) as u32,
                    next: 0,
                    msn: self.msn,
                });
                Ok(())
            }
            _ => {
                ctx.state.counters.transport.duplicates += 1;
                let last = psn_add(self.epsn, 0xFF_FFFF);
                self.ack(ctx, tr, last, Syndrome::ACK_NO_CREDITS);
                Ok(())
            }
        }
    }

    /// Saves a READ / atomic resource, forgetting the oldest beyond `2^log_rra_max`.
    fn save_res(&self, tr: &mut QpTransport, res: RdRes) {
        let max = 1usize << self.qpc.log_rra_max().min(16);
        while tr.resp.rd_res.len() >= max {
            tr.resp.rd_res.pop_front();
        }
        tr.resp.rd_res.push_back(res);
    }

    /// Sends an ATOMIC ACKNOWLEDGE (after what the QP owes).
    fn atomic_ack(&self, ctx: &mut Ctx<'_>, tr: &mut QpTransport, psn: u32, orig: u64) {
        drain(ctx, self.qpn, self.qpc, tr);
        let path = Path::of_qp(self.qpc);
        let Ok(mut repr) = packet_repr(
            ctx,
            self.qpn,
            &path,
            bth(Opcode::RcAtomicAcknowledge, path.dqpn, psn),
        ) else {
            return;
        };
        repr.ext.aeth = Some(AethRepr {
            syndrome: Syndrome::ACK_NO_CREDITS,
            msn: self.msn & 0xFF_FFFF,
        });
        repr.ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: orig });
        send_frame(ctx, &repr, &[]);
    }

    /// Checks the sequence and executes the request.
    fn execute(
        &mut self,
        ctx: &mut Ctx<'_>,
        tr: &mut QpTransport,
        repr: &PacketRepr,
        payload: &[u8],
    ) -> Result<(), Refuse> {
        let opcode = repr.bth.opcode;
        let psn = repr.bth.psn;
        let pos = opcode.position();
        let op = opcode.operation();
        let mtu = mtu_bytes(self.qpc.mtu()).ok_or(Refuse::Drop)? as usize;
        let invalid = Refuse::Nak(NakCode::InvalidRequest, None);
        let kind = match op {
            Operation::Send | Operation::SendWithImm | Operation::SendWithInv => {
                Some(MsgKind::Send)
            }
            Operation::RdmaWrite | Operation::RdmaWriteWithImm => Some(MsgKind::Write),
            _ => None,
        };
        // Opcode sequence.
        let in_msg = tr.resp.msg.as_ref().map(|m| m.kind);
        match pos {
            Position::First | Position::Only => {
                if in_msg.is_some() {
                    return Err(invalid);
                }
            }
            Position::Middle | Position::Last => {
                if in_msg.is_none() || in_msg != kind {
                    return Err(invalid);
                }
            }
        }
        // Payload size for the position.
        let size_ok = match pos {
            Position::First | Position::Middle => payload.len() == mtu,
            Position::Last => (1..=mtu).contains(&payload.len()),
            Position::Only => payload.len() <= mtu,
        };
        if !size_ok {
            return Err(invalid);
        }
        match op {
            Operation::Send | Operation::SendWithImm | Operation::SendWithInv => {
                self.send(ctx, tr, repr, payload)?;
            }
            Operation::RdmaWrite | Operation::RdmaWriteWithImm => {
                self.write(ctx, tr, repr, payload)?;
            }
            Operation::RdmaReadRequest => return self.read(ctx, tr, repr, mtu),
            Operation::CompareSwap | Operation::FetchAdd => return self.atomic(ctx, tr, repr),
            _ => return Err(Refuse::Drop),
        }
        self.epsn = psn_add(psn, 1);
        if repr.bth.ack_req {
            self.ack(ctx, tr, psn, Syndrome::ACK_NO_CREDITS);
        }
        Ok(())
    }

    /// Takes the receive WQE a SEND or WRITE_WITH_IMM consumes: none is an RNR NAK, an RQ
    /// that cannot be read a remote operational error.
    fn take_recv(&self, ctx: &mut Ctx<'_>, tr: &mut QpTransport) -> Result<RecvWqe, Refuse> {
        if let Some(w) = tr.resp.spare_recv.take() {
            return Ok(w);
        }
        match crate::rq::take(ctx, self.qpn) {
            Take::Wqe(w) => Ok(w),
            Take::Empty => Err(Refuse::Rnr),
            Take::Fault => Err(Refuse::Nak(NakCode::RemoteOperationalError, None)),
        }
    }

    /// Checks a WRITE / READ target (the RETH's rkey and range) for `need`; a zero-length
    /// target needs no key. Any failure is a remote access NAK.
    fn check_target(&self, ctx: &Ctx<'_>, reth: &RethRepr, need: Need) -> Result<(), Refuse> {
        let len = u64::from(reth.dma_len);
        if len > 0
            && mkey::check(
                &ctx.state.res.mkeys,
                reth.rkey,
                Domain::of_qp(self.qpc).on(self.qpn),
                need,
                reth.virtual_addr,
                len,
            )
            .is_err()
        {
            return Err(Refuse::Nak(NakCode::RemoteAccessError, None));
        }
        Ok(())
    }

    /// A SEND packet.
    fn send(
        &mut self,
        ctx: &mut Ctx<'_>,
        tr: &mut QpTransport,
        repr: &PacketRepr,
        payload: &[u8],
    ) -> Result<(), Refuse> {
        let pos = repr.bth.opcode.position();
        if matches!(pos, Position::First | Position::Only) {
            let recv = self.take_recv(ctx, tr)?;
            tr.resp.msg = Some(InMsg {
                kind: MsgKind::Send,
                recv: Some(recv),
                off: 0,
                va: 0,
                rkey: 0,
                dma_len: 0,
            });
        }
        let Some(msg) = tr.resp.msg.as_mut() else {
            return Err(Refuse::Drop);
        };
        let Some(recv) = msg.recv.as_ref() else {
            return Err(Refuse::Drop);
        };
        if msg.off + payload.len() as u64 > mkey::total_len(&recv.segs) {
            let recv = msg.recv.take().unwrap_or_default();
            return Err(Refuse::Nak(
                NakCode::InvalidRequest,
                Some((recv, CqeSyndrome::LocalLength)),
            ));
        }
        if let Err(e) = mkey::scatter(
            ctx.dma,
            &ctx.state.res.mkeys,
            recv.dom,
            &recv.segs,
            msg.off,
            payload,
        ) {
            let recv = msg.recv.take().unwrap_or_default();
            return Err(Refuse::Nak(
                NakCode::RemoteOperationalError,
                Some((recv, e.local_syndrome())),
            ));
        }
        msg.off += payload.len() as u64;
        if matches!(pos, Position::Last | Position::Only) {
            let off = msg.off;
            let recv = msg.recv.take().unwrap_or_default();
            if let Some(i) = repr.ext.ieth {
                // SEND_WITH_INVALIDATE: the named rkey stops working now; one that is not a
                // key of the QP's PD is an invalid request.
                if !mkey::invalidate(&mut ctx.state.res.mkeys, i.rkey, self.qpc.pd(), self.qpn) {
                    tr.resp.msg = None;
                    return Err(Refuse::Nak(
                        NakCode::InvalidRequest,
                        Some((recv, CqeSyndrome::RemoteInvalReq)),
                    ));
                }
            }
            tr.resp.msg = None;
            self.msn = self.msn.wrapping_add(1);
            let (op, imm) = match (repr.ext.imm, repr.ext.ieth) {
                (Some(i), _) => (CqeOpcode::RespSendImm, i.imm),
                (None, Some(i)) => (CqeOpcode::RespSendInv, i.rkey),
                (None, None) => (CqeOpcode::RespSend, 0),
            };
            let mut c = resp_cqe(ctx, self.qpn, self.qpc, &recv, op, off);
            c.set_imm_inval_pkey(imm);
            c.set_se(repr.bth.solicited);
            crate::cq::push(ctx, self.qpc.cqn_rcv(), &mut c);
            crate::rq::recycle(ctx, recv);
        }
        Ok(())
    }

    /// An RDMA WRITE packet.
    fn write(
        &mut self,
        ctx: &mut Ctx<'_>,
        tr: &mut QpTransport,
        repr: &PacketRepr,
        payload: &[u8],
    ) -> Result<(), Refuse> {
        let pos = repr.bth.opcode.position();
        let access = Refuse::Nak(NakCode::RemoteAccessError, None);
        let mut fresh = None;
        if matches!(pos, Position::First | Position::Only) {
            let reth = repr.ext.reth.ok_or(Refuse::Drop)?;
            if !self.qpc.rwe() {
                return Err(access);
            }
            let dma_len = u64::from(reth.dma_len);
            self.check_target(ctx, &reth, Need::RemoteWrite)?;
            fresh = Some(InMsg {
                kind: MsgKind::Write,
                recv: None,
                off: 0,
                va: reth.virtual_addr,
                rkey: reth.rkey,
                dma_len,
            });
        }
        let (va, rkey, off, dma_len) = match fresh.as_ref().or(tr.resp.msg.as_ref()) {
            Some(m) => (m.va, m.rkey, m.off, m.dma_len),
            None => return Err(Refuse::Drop),
        };
        let end = off + payload.len() as u64;
        let last = matches!(pos, Position::Last | Position::Only);
        if end > dma_len || (last && end != dma_len) {
            return Err(Refuse::Nak(NakCode::InvalidRequest, None));
        }
        // WRITE_WITH_IMM consumes a receive WQE: check for one before writing anything.
        let recv = if repr.ext.imm.is_some() {
            Some(self.take_recv(ctx, tr)?)
        } else {
            None
        };
        if !payload.is_empty() {
            if let Err(e) = mkey::write(
                ctx.dma,
                &ctx.state.res.mkeys,
                rkey,
                Domain::of_qp(self.qpc).on(self.qpn),
                Need::RemoteWrite,
                va.wrapping_add(off),
                payload,
            ) {
                // The receive WQE a WRITE_WITH_IMM took completes with the error.
                return Err(Refuse::Nak(
                    e.remote_nak(),
                    recv.map(|w| (w, e.local_syndrome())),
                ));
            }
        }
        if let Some(m) = fresh {
            tr.resp.msg = Some(m);
        }
        if last {
            tr.resp.msg = None;
            self.msn = self.msn.wrapping_add(1);
            if let (Some(recv), Some(imm)) = (recv, repr.ext.imm) {
                let mut c = resp_cqe(
                    ctx,
                    self.qpn,
                    self.qpc,
                    &recv,
                    CqeOpcode::RespWrImm,
                    dma_len,
                );
                c.set_imm_inval_pkey(imm.imm);
                c.set_se(repr.bth.solicited);
                crate::cq::push(ctx, self.qpc.cqn_rcv(), &mut c);
                crate::rq::recycle(ctx, recv);
            }
        } else if let Some(m) = tr.resp.msg.as_mut() {
            m.off = end;
        }
        Ok(())
    }

    /// An RDMA READ request: checks, then the responses (queued: the port sends them in
    /// bursts, see [`pump_reads`]).
    fn read(
        &mut self,
        ctx: &mut Ctx<'_>,
        tr: &mut QpTransport,
        repr: &PacketRepr,
        mtu: usize,
    ) -> Result<(), Refuse> {
        let psn = repr.bth.psn;
        let reth = repr.ext.reth.ok_or(Refuse::Drop)?;
        let access = Refuse::Nak(NakCode::RemoteAccessError, None);
        if !self.qpc.rre() {
            return Err(access);
        }
        let len = u64::from(reth.dma_len);
        self.check_target(ctx, &reth, Need::RemoteRead)?;
        let n = len.div_ceil(mtu as u64).max(1) as u32;
        self.msn = self.msn.wrapping_add(1);
        // An ACK owed for earlier requests goes before the responses.
        if let Some((p, m)) = tr.resp.ack_pending.take() {
            send_ack(ctx, self.qpn, self.qpc, p, m, Syndrome::ACK_NO_CREDITS);
        }
        self.save_res(
            tr,
            RdRes {
                first_psn: psn,
                last_psn: psn_add(psn, n - 1),
                kind: ResKind::Read {
                    va: reth.virtual_addr,
                    rkey: reth.rkey,
                    len,
                },
            },
        );
        tr.resp.reads.push_back(ReadJob {
            va: reth.virtual_addr,
            rkey: reth.rkey,
            len,
            psn0: psn,
            n,
            next: 0,
            msn: self.msn,
        });
        self.epsn = psn_add(psn, n);
        Ok(())
    }

    /// CMP_SWAP / FETCH_ADD.
    fn atomic(
        &mut self,
        ctx: &mut Ctx<'_>,
        tr: &mut QpTransport,
        repr: &PacketRepr,
    ) -> Result<(), Refuse> {
        let psn = repr.bth.psn;
        let a = repr.ext.atomic_eth.ok_or(Refuse::Drop)?;
        let access = Refuse::Nak(NakCode::RemoteAccessError, None);
        if !self.qpc.rae() {
            return Err(access);
        }
        if a.virtual_addr % 8 != 0 {
            return Err(Refuse::Nak(NakCode::InvalidRequest, None));
        }
        let dom = Domain::of_qp(self.qpc).on(self.qpn);
        let mut cur = [0u8; 8];
        let dma = ctx.dma;
        let mkeys = &ctx.state.res.mkeys;
        mkey::read(
            dma,
            mkeys,
            a.rkey,
            dom,
            Need::RemoteAtomic,
            a.virtual_addr,
            &mut cur,
        )
        .map_err(|e| Refuse::Nak(e.remote_nak(), None))?;
        let be = super::atomic_big_endian(ctx);
        let orig = if be {
            u64::from_be_bytes(cur)
        } else {
            u64::from_le_bytes(cur)
        };
        let new = if repr.bth.opcode == Opcode::RcCompareSwap {
            if orig == a.compare { a.swap_add } else { orig }
        } else {
            orig.wrapping_add(a.swap_add)
        };
        let new = if be {
            new.to_be_bytes()
        } else {
            new.to_le_bytes()
        };
        let mkeys = &ctx.state.res.mkeys;
        if mkey::write(
            dma,
            mkeys,
            a.rkey,
            dom,
            Need::RemoteAtomic,
            a.virtual_addr,
            &new,
        )
        .is_err()
        {
            return Err(Refuse::Nak(NakCode::RemoteOperationalError, None));
        }
        self.msn = self.msn.wrapping_add(1);
        self.epsn = psn_add(psn, 1);
        self.save_res(
            tr,
            RdRes {
                first_psn: psn,
                last_psn: psn,
                kind: ResKind::Atomic(orig),
            },
        );
        self.atomic_ack(ctx, tr, psn, orig);
        Ok(())
    }
}
