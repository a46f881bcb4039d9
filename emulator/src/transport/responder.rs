//! The responder: executes incoming requests and answers them.
//!
//! Checks, in order (roce-v2.md section 5): the QP can receive (RTR or later), the packet's
//! transport matches the QP's service type, its source IP is the connected peer (RC / UC),
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
//! order with mode 1), the original value in the ATOMIC ACKNOWLEDGE. UD: Q_Key check,
//! and the first 40 bytes of the receive buffer get the GRH area (an IPv4 header at offset
//! 20, bytes 0-19 zero; an IPv6 header fills all 40). UC never NAKs: bad packets are
//! dropped. A responder error other than RNR moves the QP to ERR and raises the affiliated
//! event (WQ_INVAL_REQ_ERROR, WQ_ACCESS_ERROR, else WQ_CATAS_ERROR); the first packet a QP
//! receives in RTR raises COMM_EST.

use rnic_hw_regs::cqe::{Cqe64, CqeOpcode, CqeSyndrome};
use rnic_hw_regs::ctx::{QpSt, QpState, Qpc};
use rnic_hw_regs::eqe::EventType;

use super::{
    InMsg, MsgKind, Path, QpTransport, bth, can_receive, enter_error, gid_ip, mtu_bytes,
    packet_repr, psn_add, psn_cmp, send_frame,
};
use crate::device::Ctx;
use crate::mkey::{self, KeyError, Need};
use crate::rq::{RecvWqe, Take};
use crate::wire::{
    AethRepr, AtomicAckEthRepr, NakCode, Opcode, Operation, PacketRepr, Position, Syndrome,
    Transport,
};

/// Size of the GRH area at the start of a UD receive buffer.
pub(crate) const GRH_LEN: usize = 40;

/// Handles a request packet for QP `qpn`. `ip_header` is the packet's IP header as received
/// (for the UD GRH area).
pub(crate) fn handle(
    ctx: &mut Ctx<'_>,
    qpn: u32,
    repr: &PacketRepr,
    payload: &[u8],
    ip_header: &[u8],
) {
    let Some(qp) = ctx.st.res.qps.get_mut(qpn) else {
        ctx.st.counters.rx_dropped += 1;
        return;
    };
    let qpc = qp.ctx;
    let st = QpSt::try_from(qpc.st()).ok();
    let transport_ok = matches!(
        (st, repr.bth.opcode.transport()),
        (Some(QpSt::Rc), Transport::Rc)
            | (Some(QpSt::Uc), Transport::Uc)
            | (Some(QpSt::Ud), Transport::Ud)
    );
    let peer_ok =
        st == Some(QpSt::Ud) || repr.ip.src() == gid_ip(&qpc.primary_address_path().rgid_rip());
    if !can_receive(&qpc) || !transport_ok || !peer_ok || repr.bth.pkey & 0x7FFF != 0x7FFF {
        ctx.st.counters.rx_dropped += 1;
        return;
    }
    let mut tr = std::mem::take(&mut qp.tr);
    if qpc.state() == u8::from(QpState::Rtr) && !tr.resp.comm_est {
        // The first packet in RTR: communication established.
        tr.resp.comm_est = true;
        super::qp_event(ctx, EventType::CommEst, qpn);
    }
    let ok = match st {
        Some(QpSt::Ud) => ud_receive(ctx, qpn, &qpc, &mut tr, repr, payload, ip_header),
        _ => {
            let mut r = Responder {
                qpn,
                qpc: &qpc,
                rc: st == Some(QpSt::Rc),
                epsn: qpc.next_rcv_psn(),
                msn: qpc.rmsn(),
            };
            let ok = r.receive(ctx, &mut tr, repr, payload);
            if let Some(qp) = ctx.st.res.qps.get_mut(qpn) {
                qp.ctx.set_next_rcv_psn(r.epsn);
                qp.ctx.set_rmsn(r.msn & 0xFF_FFFF);
            }
            ok
        }
    };
    if !ok {
        ctx.st.counters.rx_dropped += 1;
    }
    if let Some(qp) = ctx.st.res.qps.get_mut(qpn) {
        qp.tr = tr;
    }
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

/// A UD receive.
fn ud_receive(
    ctx: &mut Ctx<'_>,
    qpn: u32,
    qpc: &Qpc,
    tr: &mut QpTransport,
    repr: &PacketRepr,
    payload: &[u8],
    ip_header: &[u8],
) -> bool {
    let Some(deth) = repr.ext.deth else {
        return false;
    };
    if deth.qkey != qpc.q_key() {
        return false;
    }
    let recv = match crate::rq::take(ctx, qpn) {
        Take::Wqe(w) => w,
        Take::Empty | Take::Fault => return false,
    };
    let cqn = qpc.cqn_rcv();
    let total = (GRH_LEN + payload.len()) as u64;
    if total > mkey::total_len(&recv.segs) {
        let mut c = resp_err(ctx, qpn, qpc, &recv, CqeSyndrome::LocalLength);
        crate::cq::push(ctx, cqn, &mut c);
        enter_error(ctx, qpn, tr);
        return true;
    }
    let mut grh = [0u8; GRH_LEN];
    match ip_header.len() {
        20 => grh[20..].copy_from_slice(ip_header),
        40 => grh.copy_from_slice(ip_header),
        _ => {}
    }
    let dma = ctx.dma;
    let mkeys = &ctx.st.res.mkeys;
    let wrote = mkey::scatter(dma, mkeys, recv.pd, &recv.segs, 0, &grh)
        .and_then(|()| mkey::scatter(dma, mkeys, recv.pd, &recv.segs, GRH_LEN as u64, payload));
    if let Err(e) = wrote {
        let s = if e == KeyError::Fault {
            CqeSyndrome::LocalAccess
        } else {
            CqeSyndrome::LocalProt
        };
        let mut c = resp_err(ctx, qpn, qpc, &recv, s);
        crate::cq::push(ctx, cqn, &mut c);
        enter_error(ctx, qpn, tr);
        return true;
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
    }
    crate::cq::push(ctx, cqn, &mut c);
    true
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
    /// Sends an ACK-type packet (ACK, NAK, RNR NAK) for `psn`.
    fn ack(&self, ctx: &mut Ctx<'_>, psn: u32, syndrome: Syndrome) {
        if !self.rc {
            return;
        }
        let path = Path::of_qp(self.qpc);
        let Ok(mut repr) = packet_repr(
            ctx,
            self.qpn,
            &path,
            bth(Opcode::RcAcknowledge, path.dqpn, psn),
        ) else {
            return;
        };
        repr.ext.aeth = Some(AethRepr {
            syndrome,
            msn: self.msn & 0xFF_FFFF,
        });
        send_frame(ctx, &repr, &[]);
    }

    /// Handles an RC / UC request; false when it was dropped.
    fn receive(
        &mut self,
        ctx: &mut Ctx<'_>,
        tr: &mut QpTransport,
        repr: &PacketRepr,
        payload: &[u8],
    ) -> bool {
        let psn = repr.bth.psn;
        let opcode = repr.bth.opcode;
        let op = opcode.operation();
        let pos = opcode.position();
        if self.rc {
            let d = psn_cmp(psn, self.epsn);
            if d < 0 {
                return self.duplicate(ctx, tr, repr);
            }
            if d > 0 {
                if !tr.resp.nak_sent {
                    tr.resp.nak_sent = true;
                    self.ack(ctx, self.epsn, Syndrome::Nak(NakCode::PsnSequenceError));
                }
                return false;
            }
            tr.resp.nak_sent = false;
        } else if psn != self.epsn {
            // UC: a gap loses the message in progress; resynchronize on a new message.
            tr.resp.msg = None;
            self.epsn = psn;
            if matches!(pos, Position::Middle | Position::Last) {
                self.epsn = psn_add(psn, 1);
                return false;
            }
        }
        let result = self.execute(ctx, tr, repr, payload);
        match result {
            Ok(()) => true,
            Err(Refuse::Drop) => {
                if !self.rc {
                    tr.resp.msg = None;
                    self.epsn = psn_add(psn, 1);
                }
                false
            }
            Err(Refuse::Rnr) => {
                if self.rc {
                    let t = self.qpc.min_rnr_nak();
                    self.ack(ctx, psn, Syndrome::RnrNak { timer: t });
                } else {
                    tr.resp.msg = None;
                    self.epsn = psn_add(psn, 1);
                }
                false
            }
            Err(Refuse::Nak(code, recv)) => {
                if !self.rc {
                    tr.resp.msg = None;
                    self.epsn = psn_add(psn, 1);
                    return false;
                }
                if let Some((w, s)) = recv {
                    let mut c = resp_err(ctx, self.qpn, self.qpc, &w, s);
                    crate::cq::push(ctx, self.qpc.cqn_rcv(), &mut c);
                }
                self.ack(ctx, psn, Syndrome::Nak(code));
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
                let _ = op;
                true
            }
        }
    }

    /// A request with a PSN before the expected one.
    fn duplicate(&mut self, ctx: &mut Ctx<'_>, tr: &mut QpTransport, repr: &PacketRepr) -> bool {
        let psn = repr.bth.psn;
        match repr.bth.opcode.operation() {
            Operation::CompareSwap | Operation::FetchAdd => {
                if let Some((apsn, orig)) = tr.resp.last_atomic {
                    if apsn == psn {
                        self.atomic_ack(ctx, psn, orig);
                        return true;
                    }
                }
                false
            }
            // Re-executing duplicate READs belongs to the transport issue.
            Operation::RdmaReadRequest => false,
            _ => {
                let last = psn_add(self.epsn, 0xFF_FFFF);
                self.ack(ctx, last, Syndrome::ACK_NO_CREDITS);
                true
            }
        }
    }

    /// Sends an ATOMIC ACKNOWLEDGE.
    fn atomic_ack(&self, ctx: &mut Ctx<'_>, psn: u32, orig: u64) {
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
            Operation::RdmaReadRequest => return self.read(ctx, repr, mtu),
            Operation::CompareSwap | Operation::FetchAdd => return self.atomic(ctx, tr, repr),
            _ => return Err(Refuse::Drop),
        }
        self.epsn = psn_add(psn, 1);
        if repr.bth.ack_req {
            self.ack(ctx, psn, Syndrome::ACK_NO_CREDITS);
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
            let recv = match crate::rq::take(ctx, self.qpn) {
                Take::Wqe(w) => w,
                Take::Empty => return Err(Refuse::Rnr),
                Take::Fault => return Err(Refuse::Nak(NakCode::RemoteOperationalError, None)),
            };
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
            &ctx.st.res.mkeys,
            recv.pd,
            &recv.segs,
            msg.off,
            payload,
        ) {
            let s = if e == KeyError::Fault {
                CqeSyndrome::LocalAccess
            } else {
                CqeSyndrome::LocalProt
            };
            let recv = msg.recv.take().unwrap_or_default();
            return Err(Refuse::Nak(
                NakCode::RemoteOperationalError,
                Some((recv, s)),
            ));
        }
        msg.off += payload.len() as u64;
        if matches!(pos, Position::Last | Position::Only) {
            let off = msg.off;
            let recv = msg.recv.take().unwrap_or_default();
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
            if dma_len > 0
                && mkey::check(
                    &ctx.st.res.mkeys,
                    reth.rkey,
                    self.qpc.pd(),
                    Need::RemoteWrite,
                    reth.virtual_addr,
                    dma_len,
                )
                .is_err()
            {
                return Err(access);
            }
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
            match crate::rq::take(ctx, self.qpn) {
                Take::Wqe(w) => Some(w),
                Take::Empty => return Err(Refuse::Rnr),
                Take::Fault => return Err(Refuse::Nak(NakCode::RemoteOperationalError, None)),
            }
        } else {
            None
        };
        if !payload.is_empty() {
            if let Err(e) = mkey::write(
                ctx.dma,
                &ctx.st.res.mkeys,
                rkey,
                self.qpc.pd(),
                Need::RemoteWrite,
                va.wrapping_add(off),
                payload,
            ) {
                let code = if e == KeyError::Fault {
                    NakCode::RemoteOperationalError
                } else {
                    NakCode::RemoteAccessError
                };
                return Err(Refuse::Nak(code, None));
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
            }
        } else if let Some(m) = tr.resp.msg.as_mut() {
            m.off = end;
        }
        Ok(())
    }

    /// An RDMA READ request: checks, then the responses.
    fn read(&mut self, ctx: &mut Ctx<'_>, repr: &PacketRepr, mtu: usize) -> Result<(), Refuse> {
        let psn = repr.bth.psn;
        let reth = repr.ext.reth.ok_or(Refuse::Drop)?;
        let access = Refuse::Nak(NakCode::RemoteAccessError, None);
        if !self.qpc.rre() {
            return Err(access);
        }
        let len = u64::from(reth.dma_len);
        if len > 0
            && mkey::check(
                &ctx.st.res.mkeys,
                reth.rkey,
                self.qpc.pd(),
                Need::RemoteRead,
                reth.virtual_addr,
                len,
            )
            .is_err()
        {
            return Err(access);
        }
        let n = len.div_ceil(mtu as u64).max(1) as u32;
        self.msn = self.msn.wrapping_add(1);
        let path = Path::of_qp(self.qpc);
        let mut data = std::mem::take(&mut ctx.st.port.scratch);
        let mut result = Ok(());
        for i in 0..n {
            let code = match (i == 0, i + 1 == n) {
                (true, true) => Opcode::RcRdmaReadResponseOnly,
                (true, false) => Opcode::RcRdmaReadResponseFirst,
                (false, false) => Opcode::RcRdmaReadResponseMiddle,
                (false, true) => Opcode::RcRdmaReadResponseLast,
            };
            let rpsn = psn_add(psn, i);
            let off = u64::from(i) * mtu as u64;
            let chunk = len.saturating_sub(off).min(mtu as u64) as usize;
            data.clear();
            data.resize(chunk, 0);
            if chunk > 0
                && mkey::read(
                    ctx.dma,
                    &ctx.st.res.mkeys,
                    reth.rkey,
                    self.qpc.pd(),
                    Need::RemoteRead,
                    reth.virtual_addr.wrapping_add(off),
                    &mut data,
                )
                .is_err()
            {
                result = Err(Refuse::Nak(NakCode::RemoteOperationalError, None));
                break;
            }
            let Ok(mut r) = packet_repr(ctx, self.qpn, &path, bth(code, path.dqpn, rpsn)) else {
                break;
            };
            if code.has_aeth() {
                r.ext.aeth = Some(AethRepr {
                    syndrome: Syndrome::ACK_NO_CREDITS,
                    msn: self.msn & 0xFF_FFFF,
                });
            }
            send_frame(ctx, &r, &data);
        }
        ctx.st.port.scratch = data;
        self.epsn = psn_add(psn, n);
        result
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
        let pd = self.qpc.pd();
        let mut cur = [0u8; 8];
        let dma = ctx.dma;
        let mkeys = &ctx.st.res.mkeys;
        match mkey::read(
            dma,
            mkeys,
            a.rkey,
            pd,
            Need::RemoteAtomic,
            a.virtual_addr,
            &mut cur,
        ) {
            Ok(()) => {}
            Err(KeyError::Fault) => {
                return Err(Refuse::Nak(NakCode::RemoteOperationalError, None));
            }
            Err(_) => return Err(access),
        }
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
        let mkeys = &ctx.st.res.mkeys;
        if mkey::write(
            dma,
            mkeys,
            a.rkey,
            pd,
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
        tr.resp.last_atomic = Some((psn, orig));
        self.atomic_ack(ctx, psn, orig);
        Ok(())
    }
}
