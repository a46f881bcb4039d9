//! The raw SQ engine: Ethernet SQ objects (CREATE_SQ) transmit whole frames.
//!
//! A send doorbell whose QPN field names an SQ object comes here. The engine reads the send
//! counter from dword 1 of the SQ's doorbell record and consumes every WQE up to it. A WQE is
//! a control segment (opcode SEND, or NOP), an Ethernet segment with the frame's first
//! `inline_hdr_sz` bytes inline, then data segments with the rest of the frame. As on a
//! ConnectX-4 (`min_wqe_inline_mode` L2 and above) at least the L2 header, 18 bytes, must be
//! inline; the frame must be 14 ..= port MTU + 18 bytes. The frame goes out through the port
//! (looped back when it is for one of the device's own addresses, else onto the link) and,
//! when the WQE asks for it (or it fails), completes with a send CQE whose QPN is the SQN.
//!
//! A WQE that cannot be read or parsed, whose keys fail, or whose frame has the wrong size
//! completes with an error CQE; the SQ enters ERR and the rest of what was posted is flushed.
//! Doorbells on an SQ in ERR flush what they posted.

use rnic_hw_regs::cqe::CqeSyndrome;
use rnic_hw_regs::ctx::{WqState, inline_mode};
use rnic_hw_regs::wqe::{
    CE_CQ_UPDATE, DS_SIZE, ETH_L2_INLINE_HEADER_SIZE, ETH_SEG_INLINE_START, INLINE_SEG_FLAG,
    MAX_DS, SendOpcode, WQEBB, ds_to_wqebbs, eth_seg_ds,
};

use crate::ctx::Ctx;
use crate::mkey;
use crate::resources::Seg;

/// The largest WQE: 16 WQEBBs.
const MAX_WQE: usize = 16 * WQEBB;
/// Ethernet header and one VLAN tag: what a frame holds beyond its MTU.
const L2_OVERHEAD: usize = 18;
/// The shortest frame: an Ethernet header.
const MIN_FRAME: usize = 14;

/// A send doorbell for SQ object `sqn` on UAR `uar` (the caller found `sqn` in the SQ
/// table). Returns false when the doorbell is not valid for it (another UAR, or RST).
pub(crate) fn doorbell(ctx: &mut Ctx<'_>, uar: u32, sqn: u32) -> bool {
    let Some(sq) = ctx.state.res.eth_sqs.get(sqn) else {
        return false;
    };
    if sq.uar != uar || sq.state == WqState::Rst {
        return false;
    }
    let Ok(counter) = ctx.dma.read_be32(sq.wq.dbr_addr.wrapping_add(4)) else {
        // The doorbell record faulted (counted by the IOMMU).
        return true;
    };
    let counter = counter as u16;
    if u32::from(counter.wrapping_sub(sq.ci)) > sq.wq.size() {
        return false;
    }
    let mut raw = [0u8; MAX_WQE];
    while let Some(sq) = ctx.state.res.eth_sqs.get(sqn) {
        let ci = sq.ci;
        if ci == counter {
            break;
        }
        let avail = counter.wrapping_sub(ci);
        let flushing = sq.state == WqState::Err;
        let (nbb, outcome) = read_wqe(ctx, sqn, ci, avail, &mut raw);
        let opcode = raw[3];
        let outcome = if flushing {
            Err(CqeSyndrome::WrFlush)
        } else {
            outcome.and_then(|ce| send(ctx, sqn, &raw, ce))
        };
        let Some(sq) = ctx.state.res.eth_sqs.get_mut(sqn) else {
            break;
        };
        sq.ci = ci.wrapping_add(nbb);
        let (cqn, uidx) = (sq.wq.cqn, sq.wq.user_index);
        let mut cqe = match outcome {
            Ok(false) => continue,
            Ok(true) => crate::cq::req_cqe(sqn, ci, opcode, 0),
            Err(s) => {
                sq.state = WqState::Err;
                crate::cq::err_cqe(true, sqn, ci, opcode, s)
            }
        };
        if ctx.state.caps.general().cqe_version() >= 1 {
            cqe.set_srqn_uidx(uidx);
        }
        crate::cq::push(ctx, cqn, &mut cqe);
    }
    true
}

/// Reads WQEBB `index` of SQ `sqn` into `out`.
fn read_wqebb(ctx: &Ctx<'_>, sqn: u32, index: u16, out: &mut [u8]) -> bool {
    let Some(sq) = ctx.state.res.eth_sqs.get(sqn) else {
        return false;
    };
    let off = u64::from(u32::from(index) & (sq.wq.size() - 1)) * WQEBB as u64;
    sq.wq
        .buf
        .iova(off)
        .is_some_and(|iova| ctx.dma.read(iova, out).is_ok())
}

/// Reads the WQE at counter `ci` (`avail` WQEBBs posted) into `raw` and checks its control
/// segment; returns the WQEBBs it occupies and whether it asks for a CQE.
fn read_wqe(
    ctx: &Ctx<'_>,
    sqn: u32,
    ci: u16,
    avail: u16,
    raw: &mut [u8; MAX_WQE],
) -> (u16, Result<bool, CqeSyndrome>) {
    let bad = Err(CqeSyndrome::LocalQpOp);
    if !read_wqebb(ctx, sqn, ci, &mut raw[..WQEBB]) {
        raw[3] = 0;
        return (1, bad);
    }
    let ds = raw[7] & 0x3F;
    if ds == 0 || ds > MAX_DS {
        return (1, bad);
    }
    let nbb = ds_to_wqebbs(ds) as u16;
    if nbb > avail {
        return (avail.max(1), bad);
    }
    for i in 1..nbb {
        let at = usize::from(i) * WQEBB;
        if !read_wqebb(ctx, sqn, ci.wrapping_add(i), &mut raw[at..at + WQEBB]) {
            return (nbb, bad);
        }
    }
    let wqe_index = u16::from_be_bytes([raw[1], raw[2]]);
    let ctrl_sqn = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]) >> 8;
    if wqe_index != ci || ctrl_sqn != sqn {
        return (nbb, bad);
    }
    let ce = (raw[11] >> 2) & 3;
    (nbb, Ok(ce == CE_CQ_UPDATE))
}

/// Builds the frame a checked WQE describes and transmits it; passes `ce` on.
fn send(ctx: &mut Ctx<'_>, sqn: u32, raw: &[u8; MAX_WQE], ce: bool) -> Result<bool, CqeSyndrome> {
    let local_op = CqeSyndrome::LocalQpOp;
    let ds = usize::from(raw[7] & 0x3F);
    match SendOpcode::try_from(raw[3]) {
        Ok(SendOpcode::Nop) => return Ok(ce),
        Ok(SendOpcode::Send) => {}
        _ => return Err(local_op),
    }
    // The Ethernet segment follows the control segment.
    let eth = &raw[DS_SIZE..];
    let inline_len = usize::from(u16::from_be_bytes([eth[12], eth[13]]));
    let eth_ds = eth_seg_ds(inline_len);
    if 1 + eth_ds > ds {
        return Err(local_op);
    }
    let Some(sq) = ctx.state.res.eth_sqs.get(sqn) else {
        return Err(local_op);
    };
    let min_inline = match sq.min_inline_mode {
        inline_mode::NONE => 0,
        _ => ETH_L2_INLINE_HEADER_SIZE,
    };
    if inline_len < min_inline {
        return Err(local_op);
    }
    let dom = sq.wq.dom;
    let mut segs = ctx.state.spare_recv_segs.pop().unwrap_or_default();
    segs.clear();
    let mut bad_seg = false;
    for d in raw[(1 + eth_ds) * DS_SIZE..ds * DS_SIZE].chunks_exact(DS_SIZE) {
        let bc = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
        if bc & INLINE_SEG_FLAG != 0 {
            bad_seg = true;
            break;
        }
        let lkey = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
        let addr = u64::from_be_bytes([d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15]]);
        // A byte count of 0 stands for 2 GiB, as on ConnectX (and is then too long).
        let len = if bc == 0 { 1 << 31 } else { bc };
        segs.push(Seg::Key { lkey, addr, len });
    }
    let data_len = mkey::total_len(&segs);
    let max = usize::from(ctx.state.res.vport.mtu) + L2_OVERHEAD;
    let total = inline_len as u64 + data_len;
    let result = if bad_seg {
        Err(local_op)
    } else if total < MIN_FRAME as u64 || total > max as u64 {
        Err(CqeSyndrome::LocalLength)
    } else {
        let mut frame = ctx.state.port.buffer();
        frame.resize(total as usize, 0);
        let start = DS_SIZE + ETH_SEG_INLINE_START;
        frame[..inline_len].copy_from_slice(&raw[start..start + inline_len]);
        let mkeys = &ctx.state.res.mkeys;
        match mkey::gather(ctx.dma, mkeys, dom, &segs, &[], 0, &mut frame[inline_len..]) {
            Ok(()) => {
                ctx.state.counters.raw_tx += 1;
                crate::port::tx::transmit(ctx, frame, true);
                Ok(ce)
            }
            Err(e) => {
                ctx.state.port.recycle(frame);
                Err(e.local_syndrome())
            }
        }
    };
    ctx.state.spare_recv_segs.push(segs);
    result
}
