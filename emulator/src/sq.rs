//! The SQ engine: reads send WQEs from host memory and hands them to the requester.
//!
//! The SQ follows the RQ in the QP's buffer (at `2^log_rq_size * (16 << log_rq_stride)`
//! bytes for a QP with its own RQ, at 0 for an SRQ or zero-length RQ), `2^log_sq_size`
//! WQEBBs of 64 bytes; a WQE of several WQEBBs wraps around the end of the ring. A send
//! doorbell names the QP; the engine reads the send counter from dword 1 of the QP's
//! doorbell record and consumes every WQE up to it, in order.
//!
//! Each WQE is checked as a ConnectX checks it: the control segment's `wqe_index` must be the
//! expected counter and its QPN the QP's; DS between 1 and 63, and the WQEBBs it spans
//! posted; the opcode valid for the QP's service type (RC: NOP, SEND, SEND_IMM, SEND_INVAL,
//! RDMA_WRITE, RDMA_WRITE_IMM, RDMA_READ, ATOMIC_CS, ATOMIC_FA, UMR; UC: NOP, SEND, SEND_IMM,
//! RDMA_WRITE, RDMA_WRITE_IMM, UMR; UD: NOP, SEND, SEND_IMM); the segments the opcode needs
//! (a UMR: the UMR control segment, the mkey segment and `klm_octowords` of inline KLMs,
//! nothing after them; see [`crate::umr`]);
//! (datagram for UD, remote address for RDMA and atomics, atomic, then data or inline
//! segments that fit the DS; READ and atomic results cannot be inline, an atomic's buffer is
//! 8 bytes). A WQE that fails, or that cannot be read (IOMMU fault), completes with a local
//! QP operation error; the QP then enters ERR (RC) or SQE (UD, UC) and the rest of the send
//! queue is flushed. A doorbell in SQE flushes what it posted.
//!
//! Data segments with a byte count of 0 stand for 2 GiB, as on ConnectX.

use rnic_hw_regs::PrmLayout;
use rnic_hw_regs::cqe::CqeSyndrome;
use rnic_hw_regs::ctx::{Mkc, QpSt, QpState};
use rnic_hw_regs::umr::{MKEY_SEG_SIZE, UMR_CTRL_INLINE, UmrCtrlSeg, UmrKlmSeg};
use rnic_hw_regs::wqe::{DS_SIZE, MAX_DS, SendOpcode, WQEBB, WqeAv, ds_to_wqebbs};

use crate::ctx::Ctx;
use crate::resources::{Qp, QpTransport, Seg, SendWqe, UdDest, UmrWqe};

/// Size of the UD datagram segment (an address vector).
const AV_LEN: usize = 48;

/// The largest WQE: 16 WQEBBs.
const MAX_WQE: usize = 16 * WQEBB;

/// A send doorbell (UAR + 0x800 / 0x900): `value` is the first 8 bytes of the last WQE's
/// control segment. Returns false when it names no QP of this UAR, or the QP cannot send.
pub(crate) fn doorbell(ctx: &mut Ctx<'_>, uar: u32, value: u64) -> bool {
    let qpn = ((value as u32) >> 8) & 0xFF_FFFF;
    let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
        return false;
    };
    if qp.ctx.uar_page() != uar || qp.ctx.no_sq() {
        return false;
    }
    qp.sq_doorbells += 1;
    match QpState::try_from(qp.ctx.state()) {
        Ok(QpState::Err) => {
            // WQEs posted to a QP in error are flushed.
            flush_qp(ctx, qpn);
            return true;
        }
        Ok(QpState::Sqer) => {
            // So are those posted to a send queue in error; the receive side works on.
            ctx.with_transport(qpn, |ctx, tr| flush_send(ctx, qpn, tr));
            return true;
        }
        Ok(QpState::Rts | QpState::Sqd) => {}
        _ => return false,
    }
    let Ok(counter) = ctx.dma.read_be32(qp.ctx.dbr_addr().wrapping_add(4)) else {
        // The doorbell record faulted (counted by the IOMMU): nothing can be read.
        return true;
    };
    let counter = counter as u16;
    let size = qp.sq_size();
    if u32::from(counter.wrapping_sub(qp.sq_ci)) > size {
        return false;
    }
    consume(ctx, qpn, counter);
    crate::transport::requester::run(ctx, qpn);
    true
}

/// Byte offset of the SQ in the QP's buffer.
fn sq_base(qp: &Qp) -> u64 {
    if qp.ctx.rq_type() == 0 {
        (1u64 << qp.ctx.log_rq_size().min(15)) * (16u64 << qp.ctx.log_rq_stride())
    } else {
        0
    }
}

/// Reads WQEBB `index` (a counter value, wrapped to the ring) into `out`.
fn read_wqebb(ctx: &Ctx<'_>, qp: &Qp, index: u16, out: &mut [u8]) -> bool {
    let size = qp.sq_size();
    let off = sq_base(qp) + u64::from(u32::from(index) & (size - 1)) * WQEBB as u64;
    match qp.buf.iova(off) {
        Some(iova) => ctx.dma.read(iova, out).is_ok(),
        None => false,
    }
}

/// Parses WQEs from `sq_ci` up to `counter` into the QP's transport queue; stops after a
/// WQE that fails.
fn consume(ctx: &mut Ctx<'_>, qpn: u32, counter: u16) {
    ctx.with_transport(qpn, |ctx, tr| {
        let mut raw = [0u8; MAX_WQE];
        while let Some(qp) = ctx.state.res.qps.get(qpn) {
            let ci = qp.sq_ci;
            if ci == counter {
                break;
            }
            let avail = counter.wrapping_sub(ci);
            let spare = tr.spare.pop();
            let (wqe, nbb) = parse(ctx, qp, qpn, ci, avail, &mut raw, spare);
            let failed = wqe.error.is_some();
            tr.sq.push_back(wqe);
            if let Some(qp) = ctx.state.res.qps.get_mut(qpn) {
                qp.sq_ci = ci.wrapping_add(nbb);
                qp.ctx.set_hw_sq_wqebb_counter(qp.sq_ci);
            }
            if failed {
                break;
            }
        }
    });
}

/// A WQE that failed to parse: it completes with a local QP operation error.
fn bad(index: u16, opcode: u8, s: CqeSyndrome) -> SendWqe {
    SendWqe {
        wqe_index: index,
        opcode,
        started: true,
        error: Some(s),
        ..SendWqe::default()
    }
}

/// Whether `op` is valid on a QP of service type `st`.
fn opcode_valid(st: Option<QpSt>, op: SendOpcode) -> bool {
    use SendOpcode as O;
    match st {
        Some(QpSt::Rc) => matches!(
            op,
            O::Nop
                | O::Send
                | O::SendImm
                | O::SendInval
                | O::RdmaWrite
                | O::RdmaWriteImm
                | O::RdmaRead
                | O::AtomicCs
                | O::AtomicFa
                | O::Umr
        ),
        Some(QpSt::Uc) => matches!(
            op,
            O::Nop | O::Send | O::SendImm | O::RdmaWrite | O::RdmaWriteImm | O::Umr
        ),
        Some(QpSt::Ud | QpSt::Qp1) => matches!(op, O::Nop | O::Send | O::SendImm),
        None => false,
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

/// Parses the WQE at counter `ci` with `avail` WQEBBs posted; returns it (possibly failed)
/// and the WQEBBs it occupies. A `spare` (completed) WQE lends its lists, so parsing does
/// not allocate once the QP has warmed up.
fn parse(
    ctx: &Ctx<'_>,
    qp: &Qp,
    qpn: u32,
    ci: u16,
    avail: u16,
    raw: &mut [u8; MAX_WQE],
    spare: Option<SendWqe>,
) -> (SendWqe, u16) {
    let local_op = CqeSyndrome::LocalQpOp;
    if !read_wqebb(ctx, qp, ci, &mut raw[..WQEBB]) {
        return (bad(ci, 0, local_op), 1);
    }
    let opcode = raw[3];
    let wqe_index = u16::from_be_bytes([raw[1], raw[2]]);
    let ctrl_qpn = be32(&raw[..], 4) >> 8;
    let ds = raw[7] & 0x3F;
    if ds == 0 || ds > MAX_DS {
        return (bad(ci, opcode, local_op), 1);
    }
    let nbb = ds_to_wqebbs(ds) as u16;
    if nbb > avail {
        return (bad(ci, opcode, local_op), avail.max(1));
    }
    for i in 1..nbb {
        let at = usize::from(i) * WQEBB;
        if !read_wqebb(ctx, qp, ci.wrapping_add(i), &mut raw[at..at + WQEBB]) {
            return (bad(ci, opcode, local_op), nbb);
        }
    }
    if wqe_index != ci || ctrl_qpn != qpn {
        return (bad(ci, opcode, local_op), nbb);
    }
    let st = QpSt::try_from(qp.ctx.st()).ok();
    let op = match SendOpcode::try_from(opcode) {
        Ok(op) if opcode_valid(st, op) => op,
        _ => return (bad(ci, opcode, local_op), nbb),
    };
    let fm_ce_se = raw[11];
    let (mut segs, mut inline) = spare.map(|s| (s.segs, s.inline)).unwrap_or_default();
    segs.clear();
    inline.clear();
    let mut w = SendWqe {
        wqe_index,
        opcode,
        signaled: fm_ce_se & 0x08 != 0,
        solicited: fm_ce_se & 0x02 != 0,
        fence: fm_ce_se & 0xE0 != 0,
        imm: be32(&raw[..], 12),
        segs,
        inline,
        ..SendWqe::default()
    };
    let end = usize::from(ds) * DS_SIZE;
    let mut p = DS_SIZE;
    if op == SendOpcode::Umr {
        return match parse_umr(&raw[p..end]) {
            Some(u) => {
                w.umr = u;
                (w, nbb)
            }
            None => (bad(ci, opcode, local_op), nbb),
        };
    }
    if st.is_some_and(QpSt::is_datagram) && op != SendOpcode::Nop {
        if p + AV_LEN > end {
            return (bad(ci, opcode, local_op), nbb);
        }
        let mut av = WqeAv::default();
        av.0.copy_from_slice(&raw[p..p + AV_LEN]);
        w.ud = Some(UdDest {
            qkey: av.qkey(),
            dqpn: av.dqp_dct(),
            rmac: av.rmac(),
            rgid: av.rgid(),
            hop_limit: av.hop_limit(),
            tclass: av.tclass(),
            sgid_index: av.sgid_index(),
            flow_label: av.flow_label(),
            udp_sport: av.rlid(),
        });
        p += AV_LEN;
    }
    let rdma = matches!(
        op,
        SendOpcode::RdmaWrite
            | SendOpcode::RdmaWriteImm
            | SendOpcode::RdmaRead
            | SendOpcode::AtomicCs
            | SendOpcode::AtomicFa
    );
    let atomic = matches!(op, SendOpcode::AtomicCs | SendOpcode::AtomicFa);
    if rdma {
        if p + DS_SIZE > end {
            return (bad(ci, opcode, local_op), nbb);
        }
        w.raddr = be64(&raw[..], p);
        w.rkey = be32(&raw[..], p + 8);
        p += DS_SIZE;
    }
    if atomic {
        if p + DS_SIZE > end {
            return (bad(ci, opcode, local_op), nbb);
        }
        w.swap_add = be64(&raw[..], p);
        w.compare = be64(&raw[..], p + 8);
        p += DS_SIZE;
    }
    if op != SendOpcode::Nop {
        while p < end {
            let word = be32(&raw[..], p);
            if word & 0x8000_0000 != 0 {
                let len = (word & 0x7FFF_FFFF) as usize;
                let span = (4 + len).div_ceil(DS_SIZE) * DS_SIZE;
                if p + span > end || matches!(op, SendOpcode::RdmaRead) || atomic {
                    return (bad(ci, opcode, local_op), nbb);
                }
                let off = w.inline.len() as u32;
                w.inline.extend_from_slice(&raw[p + 4..p + 4 + len]);
                w.segs.push(Seg::Inline {
                    off,
                    len: len as u32,
                });
                p += span;
            } else {
                let bc = word & 0x7FFF_FFFF;
                w.segs.push(Seg::Key {
                    lkey: be32(&raw[..], p + 4),
                    addr: be64(&raw[..], p + 8),
                    len: if bc == 0 { 1 << 31 } else { bc },
                });
                p += DS_SIZE;
            }
        }
    }
    w.len = crate::mkey::total_len(&w.segs);
    if atomic && w.len != 8 {
        return (bad(ci, opcode, local_op), nbb);
    }
    (w, nbb)
}

/// Parses the segments after a UMR WQE's control segment: the UMR control segment, the mkey
/// segment, then exactly `klm_octowords` of inline KLMs (the first one kept). None when they
/// do not fill the WQE exactly or the list is not inline.
fn parse_umr(b: &[u8]) -> Option<UmrWqe> {
    let ctrl = b.get(..UmrCtrlSeg::SIZE)?;
    let mut c = UmrCtrlSeg::default();
    c.0.copy_from_slice(ctrl);
    let seg = b.get(UmrCtrlSeg::SIZE..UmrCtrlSeg::SIZE + MKEY_SEG_SIZE)?;
    let mut m = Mkc::default();
    m.0.copy_from_slice(seg);
    let klms = &b[UmrCtrlSeg::SIZE + MKEY_SEG_SIZE..];
    if klms.len() != usize::from(c.klm_octowords()) * DS_SIZE
        || (!klms.is_empty() && c.flags() & UMR_CTRL_INLINE == 0)
    {
        return None;
    }
    let klm = klms.get(..UmrKlmSeg::SIZE).map(|k| {
        let mut s = UmrKlmSeg::default();
        s.0.copy_from_slice(k);
        (s.byte_count(), s.mkey(), s.address())
    });
    Some(UmrWqe {
        flags: c.flags(),
        mask: c.mkey_mask(),
        klm_octowords: c.klm_octowords(),
        free: m.free(),
        lw: m.lw(),
        rr: m.rr(),
        rw: m.rw(),
        a: m.a(),
        qpn: m.qpn(),
        mkey_7_0: m.mkey_7_0(),
        start_addr: m.start_addr(),
        len: m.len(),
        klm,
    })
}

/// Completes every outstanding send WQE (parsed or still in the ring up to the doorbell
/// record's send counter) and every posted receive WQE of QP `qpn` with WR_FLUSH_ERR. The
/// command interface's 2ERR handler calls it after moving the QP to ERR.
pub(crate) fn flush_qp(ctx: &mut Ctx<'_>, qpn: u32) {
    ctx.with_transport(qpn, |ctx, tr| flush_with(ctx, qpn, tr));
}

/// [`flush_qp`] with the QP's transport state taken out by the caller.
pub(crate) fn flush_with(ctx: &mut Ctx<'_>, qpn: u32, tr: &mut QpTransport) {
    // A receive WQE the responder took and has not completed is flushed first, so the
    // receive completions stay in the RQ's order.
    let taken = tr.resp.msg.take().and_then(|m| m.recv);
    if let Some(w) = taken.or_else(|| tr.resp.spare_recv.take()) {
        crate::rq::flush_taken(ctx, qpn, &w);
    }
    tr.resp.reads.clear();
    tr.resp.ack_pending = None;
    flush_send(ctx, qpn, tr);
    crate::rq::flush(ctx, qpn);
}

/// Completes QP `qpn`'s outstanding send WQEs (parsed, or in the ring up to the send
/// counter) with WR_FLUSH_ERR, leaving the receive side alone: what the send queue error
/// state (SQE) does to a UD / UC QP, and [`flush_with`]'s send half.
pub(crate) fn flush_send(ctx: &mut Ctx<'_>, qpn: u32, tr: &mut QpTransport) {
    let Some(qp) = ctx.state.res.qps.get(qpn) else {
        return;
    };
    let cqn = qp.ctx.cqn_snd();
    let uidx = crate::cq::srqn_uidx(ctx, &qp.ctx, None);
    tr.rnr_wait = None;
    tr.retx_at = None;
    for w in std::mem::take(&mut tr.sq) {
        let mut c = crate::cq::err_cqe(true, qpn, w.wqe_index, w.opcode, CqeSyndrome::WrFlush);
        c.set_srqn_uidx(uidx);
        crate::cq::push(ctx, cqn, &mut c);
    }
    // WQEs still in the ring, up to the send counter.
    let Some(qp) = ctx.state.res.qps.get(qpn) else {
        return;
    };
    if !qp.ctx.no_sq() {
        if let Ok(counter) = ctx.dma.read_be32(qp.ctx.dbr_addr().wrapping_add(4)) {
            let counter = counter as u16;
            let size = qp.sq_size();
            let mut ci = qp.sq_ci;
            if u32::from(counter.wrapping_sub(ci)) <= size {
                let mut first = [0u8; WQEBB];
                let mut flushed = Vec::new();
                while ci != counter {
                    let (opcode, nbb) = if read_wqebb(ctx, qp, ci, &mut first) {
                        let ds = first[7] & 0x3F;
                        let nbb = ds_to_wqebbs(ds).max(1) as u16;
                        (first[3], nbb.min(counter.wrapping_sub(ci)))
                    } else {
                        (0, 1)
                    };
                    flushed.push((ci, opcode));
                    ci = ci.wrapping_add(nbb);
                }
                if let Some(qp) = ctx.state.res.qps.get_mut(qpn) {
                    qp.sq_ci = ci;
                    qp.ctx.set_hw_sq_wqebb_counter(ci);
                }
                for (index, opcode) in flushed {
                    let mut c = crate::cq::err_cqe(true, qpn, index, opcode, CqeSyndrome::WrFlush);
                    c.set_srqn_uidx(uidx);
                    crate::cq::push(ctx, cqn, &mut c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rnic_hw_regs::Bus;
    use rnic_hw_regs::ctx::{Cqc, Qpc};
    use rnic_hw_regs::doorbell::uar_bar_offset;

    use crate::resources::{Cq, QueueBuf, Uar};
    use crate::{Device, Profile, RunMode};

    /// A bind as rdma-core lays it out (UMR control, mkey segment, one KLM padded to 64 bytes)
    /// parses into its fields; a list that does not fill the WQE, or is not inline, does not.
    #[test]
    fn umr_segments_parse() {
        use rnic_hw_regs::PrmLayout;
        use rnic_hw_regs::ctx::Mkc;
        use rnic_hw_regs::umr::*;
        use zerocopy::IntoBytes;

        let mut c = UmrCtrlSeg::default();
        c.set_flags(UMR_CTRL_INLINE | UMR_CTRL_CHECK_FREE);
        c.set_klm_octowords(BIND_KLM_OCTOWORDS);
        c.set_mkey_mask(MKEY_MASK_LEN | MKEY_MASK_FREE);
        let mut m = Mkc::default();
        m.set_rw(true);
        m.set_qpn(0x42);
        m.set_mkey_7_0(9);
        m.set_start_addr(0x1000);
        m.set_len(0x80);
        let mut k = UmrKlmSeg::default();
        k.set_byte_count(0x80);
        k.set_mkey(0x305);
        k.set_address(0x1000);
        let mut b = [0u8; 48 + 64 + 64];
        b[..48].copy_from_slice(c.as_bytes());
        b[48..112].copy_from_slice(m.as_bytes());
        b[112..112 + UmrKlmSeg::SIZE].copy_from_slice(k.as_bytes());
        let u = super::parse_umr(&b).unwrap();
        assert_eq!((u.flags, u.mask, u.klm_octowords), (0xA0, 1 << 29 | 1, 4));
        assert_eq!((u.rw, u.rr, u.qpn, u.mkey_7_0), (true, false, 0x42, 9));
        assert_eq!(
            (u.start_addr, u.len, u.klm),
            (0x1000, 0x80, Some((0x80, 0x305, 0x1000)))
        );
        assert!(super::parse_umr(&b[..160]).is_none(), "short of its KLMs");
        assert!(
            super::parse_umr(&b[..100]).is_none(),
            "short of the mkey segment"
        );
        b[0] = 0;
        assert!(super::parse_umr(&b).is_none(), "KLMs not inline");
    }

    /// In threaded mode the device thread picks up a send doorbell on its own: a signaled
    /// NOP on an RC QP in RTS completes with a REQ CQE the host sees without stepping.
    #[test]
    fn threaded_device_runs_send_doorbells() {
        let dev = Device::new(Profile::default(), RunMode::Threaded);
        let bus = dev.bus();
        let cq_mem = bus.alloc_dma(4096).unwrap();
        let qp_mem = bus.alloc_dma(4096 * 2).unwrap();
        let dbr = bus.alloc_dma(4096).unwrap();
        // CQEs start as INVALID with owner 1.
        for i in 0..64 {
            // SAFETY: inside the live 4 KiB region.
            unsafe { cq_mem.vaddr.as_ptr().add(i * 64 + 63).write_volatile(0xF1) };
        }
        let (uar, cqn, qpn) = dev.with_ctx(|ctx| {
            let uar = ctx.state.res.uars.insert(Uar).unwrap();
            let mut cqc = Cqc::default();
            cqc.set_log_cq_size(6);
            let buf = QueueBuf {
                pages: vec![cq_mem.iova],
                log_page_size: 12,
                len: 4096,
            };
            let cqn = ctx
                .state
                .res
                .cqs
                .insert(Cq::new(cqc, buf, uar, 0, dbr.iova))
                .unwrap();
            let mut q = Qpc::default();
            q.set_state(3);
            q.set_st(0);
            q.set_uar_page(uar);
            q.set_log_sq_size(6);
            q.set_rq_type(3);
            q.set_cqn_snd(cqn);
            q.set_cqn_rcv(cqn);
            q.set_mtu(1);
            q.set_dbr_addr(dbr.iova + 64);
            let buf = QueueBuf {
                pages: vec![qp_mem.iova, qp_mem.iova + 4096],
                log_page_size: 12,
                len: 4096,
            };
            let qpn = ctx.state.res.qps.insert(crate::resources::Qp::new(q, buf));
            (uar, cqn, qpn.unwrap())
        });
        // A signaled NOP at WQEBB 0, send counter 1.
        let mut ctrl = [0u8; 16];
        ctrl[4..8].copy_from_slice(&(qpn << 8 | 1).to_be_bytes());
        ctrl[11] = 0x08;
        // SAFETY: inside the live regions.
        unsafe {
            std::ptr::copy_nonoverlapping(ctrl.as_ptr(), qp_mem.vaddr.as_ptr(), 16);
            std::ptr::copy_nonoverlapping(
                1u32.to_be_bytes().as_ptr(),
                dbr.vaddr.as_ptr().add(64 + 4),
                4,
            );
        }
        let value = u64::from_be_bytes(ctrl[..8].try_into().unwrap());
        bus.write64(uar_bar_offset(uar) + 0x800, value);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // SAFETY: inside the live region; the device writes it through the IOMMU.
            let op_own = unsafe { cq_mem.vaddr.as_ptr().add(63).read_volatile() };
            if op_own >> 4 == 0 {
                assert_eq!(op_own & 1, 0, "first pass: owner 0");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the device thread never completed the NOP"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut cqe = [0u8; 64];
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(cq_mem.vaddr.as_ptr(), cqe.as_mut_ptr(), 64) };
        assert_eq!(&cqe[0x39..0x3C], &qpn.to_be_bytes()[1..]);
        assert_eq!(&cqe[0x3C..0x3E], &[0, 0], "wqe_counter 0");
        let _ = cqn;
        drop(dev);
    }
}
