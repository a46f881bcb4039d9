//! The requester: turns parsed send WQEs into RoCE v2 packets.
//!
//! WQEs start in order. Starting one checks its local data segments (lkey, PD, access,
//! bounds: a failure is a local protection error) and the message size, and assigns its PSNs
//! from the QP context's `next_send_psn` (a READ takes one PSN per response packet). A WQE
//! with the fence bit waits until earlier READs and atomics have completed, and at most
//! `2^log_sra_max` READs / atomics are outstanding. Packets are segmented by the path MTU
//! (UD: the port's MTU); AckReq is set on the last packet of a message and every 64 packets.
//! UC and UD WQEs are complete once sent; RC WQEs wait for the completer.

use rnic_hw_regs::cqe::CqeSyndrome;
use rnic_hw_regs::ctx::{QpSt, QpState, Qpc};
use rnic_hw_regs::roce::GSI_QPN;
use rnic_hw_regs::wqe::SendOpcode;

use super::{Path, bth, mtu_bytes, packet_repr, port_mtu_code, send_frame_filled, send_run_filled};
use crate::ctx::Ctx;
use crate::mkey::{self, Need};
use crate::resources::{Domain, SendWqe, WINDOW};
use crate::wire::psn::{psn_add, psn_cmp};
use crate::wire::{
    AtomicEthRepr, DethRepr, GSO_MAX_BYTES, GsoRun, IethRepr, ImmDtRepr, Opcode, PacketRepr,
    RethRepr,
};

/// Sends what QP `qpn` may send now, then completes what finished.
pub(crate) fn run(ctx: &mut Ctx<'_>, qpn: u32) {
    let Some(qp) = ctx.state.res.qps.get(qpn) else {
        return;
    };
    if qp.ctx.state() != u8::from(QpState::Rts) {
        return;
    }
    let qpc = qp.ctx;
    ctx.with_transport(qpn, |ctx, tr| {
        let rc = qpc.st() == u8::from(QpSt::Rc);
        let una = *tr.una.get_or_insert(qpc.next_send_psn());
        // RC: no packet at or beyond `una + WINDOW` (or the QP's share of the device's
        // budget, see `share`) goes out until ACKs move `una`.
        let window = super::share::window(ctx, qpn);
        let limit = rc.then(|| Limit {
            end: psn_add(una, window),
            ack_at_end: window < WINDOW,
        });
        let max_rd = 1usize << qpc.log_sra_max();
        let mut rd_outstanding = 0usize;
        let mut sent_any = false;
        for i in 0..tr.sq.len() {
            let w = &tr.sq[i];
            if w.error.is_some() && w.started {
                // Nothing after a failed WQE is sent.
                break;
            }
            if w.fully_sent() {
                // A READ / atomic holds its credit until it leaves the queue (completions are in
                // order, as rxe returns `rd_atomic` credits): the responder's resource ring only
                // keeps the last `max_dest_rd_atomic`, and an earlier one may still be retried.
                if w.is_rd_atomic() {
                    rd_outstanding += 1;
                }
                continue;
            }
            if w.fence && tr.sq.iter().take(i).any(|e| e.is_rd_atomic() && !e.done) {
                break;
            }
            if w.is_rd_atomic() && rd_outstanding >= max_rd {
                break;
            }
            let w = &mut tr.sq[i];
            if !w.started {
                start(ctx, &qpc, qpn, w);
                if w.error.is_some() {
                    break;
                }
            }
            let before = w.next_pkt;
            send_packets(ctx, &qpc, qpn, w, limit, &mut tr.sent_end);
            sent_any |= w.next_pkt != before && w.error.is_none();
            if w.error.is_some() || !w.fully_sent() {
                break;
            }
            if !rc || w.npkts == 0 {
                w.done = true;
            } else if w.is_rd_atomic() {
                rd_outstanding += 1;
            }
        }
        if rc {
            super::rearm(ctx, &qpc, tr, sent_any);
        }
    });
    super::completer::complete_head(ctx, qpn);
}

/// The MTU the WQE's packets use.
fn mtu_of(ctx: &Ctx<'_>, qpc: &Qpc) -> Option<u32> {
    if QpSt::try_from(qpc.st()).is_ok_and(QpSt::is_datagram) {
        mtu_bytes(port_mtu_code(ctx.state.res.vport.mtu))
    } else {
        mtu_bytes(qpc.mtu())
    }
}

/// Local checks and PSN assignment.
fn start(ctx: &mut Ctx<'_>, qpc: &Qpc, qpn: u32, w: &mut SendWqe) {
    w.started = true;
    let Some(mtu) = mtu_of(ctx, qpc) else {
        w.error = Some(CqeSyndrome::LocalQpOp);
        return;
    };
    let op = w.op();
    let need = match op {
        Some(SendOpcode::RdmaRead | SendOpcode::AtomicCs | SendOpcode::AtomicFa) => {
            Need::LocalWrite
        }
        _ => Need::LocalRead,
    };
    if let Err(e) = mkey::check_segs(&ctx.state.res.mkeys, Domain::of_qp(qpc), need, &w.segs) {
        w.error = Some(e.local_syndrome());
        return;
    }
    let log_max = qpc.log_msg_max();
    let max_msg = if log_max == 0 {
        1u64 << 31
    } else {
        1u64 << log_max.min(31)
    };
    let ud = QpSt::try_from(qpc.st()).is_ok_and(QpSt::is_datagram);
    if w.len > max_msg || (ud && w.len > u64::from(mtu)) {
        w.error = Some(CqeSyndrome::LocalLength);
        return;
    }
    if op == Some(SendOpcode::Umr) {
        // A UMR changes an mkey here, in send-queue order, and sends nothing.
        let (pd, key) = (qpc.pd(), w.imm);
        if crate::umr::execute(&mut ctx.state.res.mkeys, pd, qpn, key, &w.umr).is_err() {
            w.error = Some(CqeSyndrome::MwBind);
            return;
        }
    }
    w.npkts = match op {
        Some(SendOpcode::Nop | SendOpcode::Umr) | None => 0,
        Some(SendOpcode::AtomicCs | SendOpcode::AtomicFa) => 1,
        _ => w.len.div_ceil(u64::from(mtu)).max(1) as u32,
    };
    let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
        return;
    };
    w.first_psn = qp.ctx.next_send_psn();
    w.next_pkt = 0;
    let next = psn_add(w.first_psn, w.npkts);
    qp.ctx.set_next_send_psn(next);
}

/// The opcode of packet `i` of `n` of a SEND / WRITE on transport base `base` (0x00 RC,
/// 0x20 UC).
fn seq_opcode(base: u8, first: u8, middle: u8, last: u8, only: u8, i: u32, n: u32) -> u8 {
    base + match (i == 0, i + 1 == n) {
        (true, true) => only,
        (true, false) => first,
        (false, false) => middle,
        (false, true) => last,
    }
}

/// Where an RC QP stops sending until ACKs come.
#[derive(Clone, Copy, Debug)]
struct Limit {
    /// The first PSN not to send.
    end: u32,
    /// The QP stops at its share of the device ([`super::share`]): the packet before `end`
    /// asks for an ACK.
    ack_at_end: bool,
}

/// Sends the WQE's packets from `next_pkt` on, stopping before `limit`.
/// `sent_end` (RC) moves to one past the highest PSN sent.
fn send_packets(
    ctx: &mut Ctx<'_>,
    qpc: &Qpc,
    qpn: u32,
    w: &mut SendWqe,
    limit: Option<Limit>,
    sent_end: &mut Option<u32>,
) {
    let Some(mtu) = mtu_of(ctx, qpc) else {
        w.error = Some(CqeSyndrome::LocalQpOp);
        return;
    };
    let st = QpSt::try_from(qpc.st()).unwrap_or(QpSt::Rc);
    let path = match &w.ud {
        Some(ud) => Path::of_ud(ud),
        None => Path::of_qp(qpc),
    };
    let Some(op) = w.op() else {
        w.error = Some(CqeSyndrome::LocalQpOp);
        return;
    };
    let sends = w.packets();
    // A READ retried after part of its responses arrived asks for the rest only.
    let rd_skip = if op == SendOpcode::RdmaRead {
        w.rd_rcvd.min(w.npkts.saturating_sub(1))
    } else {
        0
    };
    let rd_off = u64::from(rd_skip) * u64::from(mtu);
    let rc = st == QpSt::Rc;
    // On a port that takes runs (an in-process link nothing observes), the packets of a SEND
    // or WRITE that need no header of their own go in one buffer (see `run_len`), unless
    // they loop back inside this device.
    let runs = sends > 1
        && ctx.state.port.takes_runs()
        && matches!(st, QpSt::Rc | QpSt::Uc)
        && matches!(
            op,
            SendOpcode::Send
                | SendOpcode::SendImm
                | SendOpcode::SendInval
                | SendOpcode::RdmaWrite
                | SendOpcode::RdmaWriteImm
        )
        && !crate::port::tx::is_own_gid(ctx, &path.rgid);
    while w.next_pkt < sends {
        let i = w.next_pkt;
        let psn = psn_add(w.first_psn, i + rd_skip);
        if limit.is_some_and(|l| psn_cmp(psn, l.end) >= 0) {
            break;
        }
        let Some((opcode, data_len)) = packet_opcode(op, st, w.len, mtu, i, sends) else {
            w.error = Some(CqeSyndrome::LocalQpOp);
            break;
        };
        let mut b = bth(opcode, path.dqpn, psn);
        b.ack_req = ack_req(rc, i, sends, psn, limit);
        b.solicited = solicited(op, w.solicited, i + 1 == sends);
        let off = u64::from(i) * u64::from(mtu);
        let count = if runs && !b.ack_req {
            run_len(op, i, sends, mtu, psn, limit, rc, w.len - off)
        } else {
            1
        };
        let mut repr = match packet_repr(ctx, qpn, &path, b) {
            Ok(r) => r,
            Err(s) => {
                w.error = Some(s);
                break;
            }
        };
        add_ext_headers(&mut repr, opcode, w, qpc, qpn, rd_off);
        // The gather writes the payload straight into the frame.
        let (segs, inline) = (&w.segs, &w.inline);
        let gather = |ctx: &mut Ctx<'_>, payload: &mut [u8]| {
            mkey::gather(
                ctx.dma,
                &ctx.state.res.mkeys,
                Domain::of_qp(qpc),
                segs,
                inline,
                off,
                payload,
            )
        };
        let sent = if count > 1 {
            // The run's last packet: the only one besides the first with fields of its own.
            let j = i + count - 1;
            let Some((last_opcode, _)) = packet_opcode(op, st, w.len, mtu, j, sends) else {
                w.error = Some(CqeSyndrome::LocalQpOp);
                break;
            };
            let run = GsoRun {
                count: count as u16,
                mss: mtu as u16,
                last_opcode,
                last_ack_req: ack_req(rc, j, sends, psn_add(psn, count - 1), limit),
                last_solicited: solicited(op, w.solicited, j + 1 == sends),
            };
            let len = w
                .len
                .saturating_sub(off)
                .min(u64::from(count) * u64::from(mtu));
            send_run_filled(ctx, &repr, run, len as usize, gather)
        } else {
            send_frame_filled(ctx, &repr, data_len, gather)
        };
        if let Err(e) = sent {
            w.error = Some(e.local_syndrome());
            break;
        }
        w.next_pkt += count;
        let end = psn_add(psn, count);
        if st == QpSt::Rc && sent_end.is_none_or(|e| psn_cmp(end, e) > 0) {
            *sent_end = Some(end);
        }
    }
    if w.error.is_some() {
        // A failed WQE sends nothing more.
        w.next_pkt = w.npkts;
    }
}

/// Whether packet `i` of `sends` (PSN `psn`) asks for an ACK: on RC, the last packet of a
/// message, every 64th, and the last one before the QP's share of the device ends
/// (`limit`, see [`super::share`]).
fn ack_req(rc: bool, i: u32, sends: u32, psn: u32, limit: Option<Limit>) -> bool {
    rc && (i + 1 == sends
        || (i + 1) % 64 == 0
        || limit.is_some_and(|l| l.ack_at_end && psn_add(psn, 1) == l.end))
}

/// Whether a packet of a WQE `op` whose SE flag is `se` sets the Solicited Event bit: the
/// last packet of a SEND or a WRITE with immediate.
fn solicited(op: SendOpcode, se: bool, last: bool) -> bool {
    last && se
        && matches!(
            op,
            SendOpcode::Send
                | SendOpcode::SendImm
                | SendOpcode::SendInval
                | SendOpcode::RdmaWriteImm
        )
}

/// How many packets from packet `i` (PSN `psn`, asking for no ACK) of a SEND or WRITE of
/// `sends` packets, `rest` bytes from its start to the message's end, go as one run
/// ([`GsoRun`]): at most [`GSO_MAX_BYTES`] of payload, all within `limit`, ending with the
/// first that asks for an ACK, and stopping before a LAST with an ImmDt or IETH (a header
/// the run cannot describe). 1: no run (also for two packets whose LAST has fewer than 4
/// bytes: the first packet must lie whole in the run's buffer, see [`GsoRun::check`]).
#[allow(clippy::too_many_arguments)]
fn run_len(
    op: SendOpcode,
    i: u32,
    sends: u32,
    mtu: u32,
    psn: u32,
    limit: Option<Limit>,
    rc: bool,
    rest: u64,
) -> u32 {
    let max = (GSO_MAX_BYTES / mtu as usize) as u32;
    let own_last = matches!(
        op,
        SendOpcode::SendImm | SendOpcode::SendInval | SendOpcode::RdmaWriteImm
    );
    let mut k = 1;
    while k < max && i + k < sends {
        let j = i + k;
        let psn_j = psn_add(psn, k);
        if limit.is_some_and(|l| psn_cmp(psn_j, l.end) >= 0) || (own_last && j + 1 == sends) {
            break;
        }
        k += 1;
        if ack_req(rc, j, sends, psn_j, limit) {
            break;
        }
    }
    if k == 2 && rest < u64::from(mtu) + crate::wire::icrc::ICRC_LEN as u64 {
        return 1;
    }
    k
}

/// The BTH opcode of packet `i` of `sends` of a `len`-byte WQE `op` on a QP of service `st`,
/// and the payload bytes it carries; `None` for a WQE opcode the requester does not send.
fn packet_opcode(
    op: SendOpcode,
    st: QpSt,
    len: u64,
    mtu: u32,
    i: u32,
    sends: u32,
) -> Option<(Opcode, usize)> {
    let base: u8 = if st == QpSt::Uc { 0x20 } else { 0 };
    let (code, data_len) = match op {
        SendOpcode::Send | SendOpcode::SendImm | SendOpcode::SendInval => {
            let (l, o) = match op {
                SendOpcode::SendImm => (0x03, 0x05),
                SendOpcode::SendInval => (0x16, 0x17),
                _ => (0x02, 0x04),
            };
            let code = if st.is_datagram() {
                if op == SendOpcode::SendImm {
                    0x65
                } else {
                    0x64
                }
            } else {
                seq_opcode(base, 0x00, 0x01, l, o, i, sends)
            };
            (code, chunk(len, mtu, i))
        }
        SendOpcode::RdmaWrite | SendOpcode::RdmaWriteImm => {
            let (l, o) = if op == SendOpcode::RdmaWriteImm {
                (0x09, 0x0B)
            } else {
                (0x08, 0x0A)
            };
            (
                seq_opcode(base, 0x06, 0x07, l, o, i, sends),
                chunk(len, mtu, i),
            )
        }
        SendOpcode::RdmaRead => (0x0C, 0),
        SendOpcode::AtomicCs => (0x13, 0),
        SendOpcode::AtomicFa => (0x14, 0),
        _ => return None,
    };
    Some((Opcode::from_u8(code)?, data_len))
}

/// The extension headers `opcode` carries, from the WQE: DETH (the WQE's Q_Key, or the QP's
/// when the WQE's has its high bit set; source QP 1 on QP1), RETH (past the `rd_off` bytes a retried READ
/// already has), AtomicETH, ImmDt, IETH.
fn add_ext_headers(
    repr: &mut PacketRepr,
    opcode: Opcode,
    w: &SendWqe,
    qpc: &Qpc,
    qpn: u32,
    rd_off: u64,
) {
    if opcode.has_deth() {
        let qkey = match &w.ud {
            Some(ud) if ud.qkey & 0x8000_0000 == 0 => ud.qkey,
            _ => qpc.q_key(),
        };
        // QP1 sends as QP 1, whatever QPN firmware gave it.
        let src_qp = if qpc.st() == u8::from(QpSt::Qp1) {
            GSI_QPN
        } else {
            qpn
        };
        repr.ext.deth = Some(DethRepr { qkey, src_qp });
    }
    if opcode.has_reth() {
        repr.ext.reth = Some(RethRepr {
            virtual_addr: w.raddr.wrapping_add(rd_off),
            rkey: w.rkey,
            dma_len: w.len.saturating_sub(rd_off) as u32,
        });
    }
    if opcode.has_atomic_eth() {
        repr.ext.atomic_eth = Some(AtomicEthRepr {
            virtual_addr: w.raddr,
            rkey: w.rkey,
            swap_add: w.swap_add,
            compare: w.compare,
        });
    }
    if opcode.has_imm() {
        repr.ext.imm = Some(ImmDtRepr { imm: w.imm });
    }
    if opcode.has_ieth() {
        repr.ext.ieth = Some(IethRepr { rkey: w.imm });
    }
}

/// Payload bytes of packet `i` of a `len`-byte message.
fn chunk(len: u64, mtu: u32, i: u32) -> usize {
    let off = u64::from(i) * u64::from(mtu);
    len.saturating_sub(off).min(u64::from(mtu)) as usize
}
