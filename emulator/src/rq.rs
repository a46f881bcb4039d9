//! Receive queues: RQ and SRQ WQEs, consumed by incoming SENDs and WRITE_WITH_IMMs.
//!
//! An RQ sits at offset 0 of the QP's buffer: `2^log_rq_size` WQEs of `16 << log_rq_stride`
//! bytes. A receive WQE is a list of data segments (BE32 byte_count, BE32 lkey, BE64 addr),
//! ended early by one with the invalid lkey 0x100; a byte count of 0 means 2 GiB, as in send
//! data segments. The host posts by writing WQEs and then the receive counter (low 16 bits)
//! to dword 0 of the QP's doorbell record; the device reads that record when it needs a WQE.
//!
//! An SRQ WQE starts with a 16-byte next segment whose BE16 at byte 2 is `next_wqe_index`:
//! the device consumes WQEs along that list starting at index 0, and the SRQ's doorbell
//! record (dword 0) counts the WQEs posted. When a consumption leaves fewer than the SRQ's
//! limit (`lwm`, armed by CREATE_SRQ or ARM_RQ) posted, an SRQ limit event (type 0x14, SRQN
//! at 0x38) goes to the EQ subscribed to it and the limit disarms.

use rnic_hw_regs::cqe::CqeSyndrome;
use rnic_hw_regs::eqe::{Eqe, EventType};
use rnic_hw_regs::wqe::INVALID_LKEY;

use crate::ctx::Ctx;
use crate::resources::{Domain, RecvWqe, Seg};

/// What [`take`] found.
#[derive(Debug)]
pub(crate) enum Take {
    /// A WQE, now consumed.
    Wqe(RecvWqe),
    /// No WQE posted (RNR).
    Empty,
    /// The doorbell record or the WQE could not be read.
    Fault,
}

/// Largest receive WQE (`log_rq_stride` 7: 2 KiB).
const MAX_RQ_WQE: usize = 16 << 7;

/// Scatter lists kept for reuse at most.
const SPARE_LISTS: usize = 16;

/// Gives the scatter list of a receive WQE the responder is done with back for the next
/// [`take`].
pub(crate) fn recycle(ctx: &mut Ctx<'_>, w: RecvWqe) {
    if ctx.state.spare_recv_segs.len() < SPARE_LISTS {
        ctx.state.spare_recv_segs.push(w.segs);
    }
}

/// Parses data segments from `bytes` until the terminator or the end.
pub(crate) fn parse_segs(bytes: &[u8], segs: &mut Vec<Seg>) {
    segs.clear();
    for d in bytes.chunks_exact(16) {
        let bc = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) & 0x7FFF_FFFF;
        let lkey = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
        if lkey == INVALID_LKEY {
            break;
        }
        let addr = u64::from_be_bytes([d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15]]);
        let len = if bc == 0 { 1 << 31 } else { bc };
        segs.push(Seg::Key { lkey, addr, len });
    }
}

/// Takes the next receive WQE of QP `qpn` (its RQ, or its SRQ).
pub(crate) fn take(ctx: &mut Ctx<'_>, qpn: u32) -> Take {
    let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
        return Take::Fault;
    };
    match qp.ctx.rq_type() {
        0 => {
            let size = 1u32 << qp.ctx.log_rq_size().min(15);
            let stride = 16usize << qp.ctx.log_rq_stride();
            let Ok(counter) = ctx.dma.read_be32(qp.ctx.dbr_addr()) else {
                return Take::Fault;
            };
            let avail = (counter as u16).wrapping_sub(qp.rq_ci);
            if avail == 0 || u32::from(avail) > size {
                return Take::Empty;
            }
            let off = u64::from(u32::from(qp.rq_ci) & (size - 1)) * stride as u64;
            let mut raw = [0u8; MAX_RQ_WQE];
            let Some(iova) = qp.buf.iova(off) else {
                return Take::Fault;
            };
            if ctx.dma.read(iova, &mut raw[..stride]).is_err() {
                return Take::Fault;
            }
            let mut w = RecvWqe {
                counter: qp.rq_ci,
                dom: Domain::of_qp(&qp.ctx),
                segs: ctx.state.spare_recv_segs.pop().unwrap_or_default(),
                srqn: None,
            };
            parse_segs(&raw[..stride], &mut w.segs);
            qp.rq_ci = qp.rq_ci.wrapping_add(1);
            Take::Wqe(w)
        }
        1 => {
            let srqn = qp.ctx.srqn_rmpn_xrqn();
            let Some(srq) = ctx.state.res.srqs.get_mut(srqn) else {
                return Take::Fault;
            };
            let size = 1u32 << srq.log_size.min(15);
            let stride = 16usize << srq.log_stride.min(7);
            let Ok(counter) = ctx.dma.read_be32(srq.dbr_addr) else {
                return Take::Fault;
            };
            let avail = (counter as u16).wrapping_sub(srq.ci);
            if avail == 0 || u32::from(avail) > size {
                return Take::Empty;
            }
            let index = srq.head & (size - 1) as u16;
            let mut raw = [0u8; MAX_RQ_WQE];
            let Some(iova) = srq.buf.iova(u64::from(index) * stride as u64) else {
                return Take::Fault;
            };
            if ctx.dma.read(iova, &mut raw[..stride]).is_err() {
                return Take::Fault;
            }
            let mut w = RecvWqe {
                counter: index,
                dom: Domain::of_srq(srq),
                srqn: Some(srqn),
                segs: ctx.state.spare_recv_segs.pop().unwrap_or_default(),
            };
            parse_segs(&raw[16..stride.max(16)], &mut w.segs);
            srq.head = u16::from_be_bytes([raw[2], raw[3]]) & (size - 1) as u16;
            srq.ci = srq.ci.wrapping_add(1);
            // The SRQ limit event fires once when fewer than `lwm` WQEs remain posted.
            if srq.lwm != 0 && avail - 1 < srq.lwm {
                srq.lwm = 0;
                let mut e = Eqe::of(EventType::SrqRqLimit);
                e.set_qp_srq_n(srqn);
                crate::eq::post_event(ctx, &e);
            }
            Take::Wqe(w)
        }
        // Zero-length RQ (3) or reserved: nothing to receive into.
        _ => Take::Empty,
    }
}

/// Flushes the receive WQEs posted since the last flush to every watched QP still in ERR
/// (the host only writes the doorbell record when it posts a receive: no doorbell tells);
/// forgets the QPs that left ERR or were destroyed.
pub(crate) fn flush_in_error(ctx: &mut Ctx<'_>) {
    let mut i = 0;
    while i < ctx.state.rq_flush_watch.len() {
        let qpn = ctx.state.rq_flush_watch[i];
        let in_err = ctx.state.res.qps.get(qpn).is_some_and(|qp| {
            rnic_hw_regs::ctx::QpState::try_from(qp.ctx.state())
                == Ok(rnic_hw_regs::ctx::QpState::Err)
        });
        if in_err {
            flush(ctx, qpn);
            i += 1;
        } else {
            ctx.state.rq_flush_watch.swap_remove(i);
        }
    }
}

/// Completes receive WQE `w`, which QP `qpn`'s responder took from its RQ or SRQ and had
/// not completed, with WR_FLUSH_ERR on the QP's receive CQ.
pub(crate) fn flush_taken(ctx: &mut Ctx<'_>, qpn: u32, w: &RecvWqe) {
    let Some(qpc) = ctx.state.res.qps.get(qpn).map(|qp| qp.ctx) else {
        return;
    };
    let mut c = crate::cq::err_cqe(false, qpn, w.counter, 0, CqeSyndrome::WrFlush);
    c.set_srqn_uidx(crate::cq::srqn_uidx(ctx, &qpc, w.srqn));
    crate::cq::push(ctx, qpc.cqn_rcv(), &mut c);
}

/// Completes every posted receive WQE of QP `qpn`'s own RQ with WR_FLUSH_ERR on its receive
/// CQ (SRQ WQEs belong to the SRQ and are not flushed), and watches the RQ for receives
/// posted later ([`flush_in_error`]).
pub(crate) fn flush(ctx: &mut Ctx<'_>, qpn: u32) {
    let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
        return;
    };
    if qp.ctx.rq_type() != 0 {
        return;
    }
    if !ctx.state.rq_flush_watch.contains(&qpn) {
        ctx.state.rq_flush_watch.push(qpn);
    }
    let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
        return;
    };
    let size = 1u32 << qp.ctx.log_rq_size().min(15);
    let cqn = qp.ctx.cqn_rcv();
    let Ok(counter) = ctx.dma.read_be32(qp.ctx.dbr_addr()) else {
        return;
    };
    let avail = (counter as u16).wrapping_sub(qp.rq_ci);
    if u32::from(avail) > size {
        return;
    }
    let first = qp.rq_ci;
    qp.rq_ci = counter as u16;
    let qpc = qp.ctx;
    let uidx = crate::cq::srqn_uidx(ctx, &qpc, None);
    for i in 0..avail {
        let mut c = crate::cq::err_cqe(false, qpn, first.wrapping_add(i), 0, CqeSyndrome::WrFlush);
        c.set_srqn_uidx(uidx);
        crate::cq::push(ctx, cqn, &mut c);
    }
}
