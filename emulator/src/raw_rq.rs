//! Ethernet RQ objects as the data path uses them: a steered frame is scattered into the
//! next receive WQE and completed with a receive CQE.
//!
//! An RQ object's ring is `2^log_wq_sz` WQEs of `2^log_wq_stride` bytes, each a list of data
//! segments ended early by the invalid lkey (as a QP's RQ); the host posts by writing the
//! receive counter to dword 0 of the RQ's doorbell record. A frame is delivered only to an
//! RQ in RDY with a WQE posted whose buffers hold the whole frame; otherwise it is dropped and
//! counted, and the WQE stays posted. With VLAN stripping on (`vsd` 0) an 802.1Q tag is
//! taken out of the frame and reported in the CQE.
//!
//! The receive CQE is RESP_SEND with the byte count, the WQE counter, the user index, the
//! L3 / L4 header types, and the matching flow entry's flow tag in the low 24 bits of
//! `sop_drop_qpn`, where mlx5e reads it (an Ethernet CQ serves one RQ, so it needs no QPN).
//! A scatter that fails its key check completes the WQE with an error CQE and moves the RQ to
//! ERR.

use rnic_hw_regs::cqe::{CqeOpcode, l3_hdr_type, l4_hdr_type};
use rnic_hw_regs::ctx::{FteMatchSetLyr24, WqState};

use crate::ctx::{Ctx, count_drop};
use crate::mkey;
use crate::wire::IpProtocol;

/// Largest RQ WQE read (stride 2^11: 128 data segments).
const MAX_RQ_WQE: usize = 1 << 11;
/// Bytes of an 802.1Q tag.
const VLAN_TAG_LEN: usize = 4;

/// The L3 / L4 header types a receive CQE reports for a frame with `f`.
fn hdr_types(f: &FteMatchSetLyr24) -> (u8, u8) {
    let l3 = match f.ip_version() {
        4 => l3_hdr_type::IPV4,
        6 => l3_hdr_type::IPV6,
        _ => l3_hdr_type::NONE,
    };
    let l4 = match (l3, IpProtocol::from(f.ip_protocol())) {
        (l3_hdr_type::NONE, _) => l4_hdr_type::NONE,
        (_, IpProtocol::Tcp) => l4_hdr_type::TCP,
        (_, IpProtocol::Udp) => l4_hdr_type::UDP,
        _ => l4_hdr_type::NONE,
    };
    (l3, l4)
}

/// Delivers `frame` (whose match fields are `f`) into RQ `rqn`, or drops and counts it.
pub(crate) fn deliver(
    ctx: &mut Ctx<'_>,
    rqn: u32,
    frame: &[u8],
    flow_tag: u32,
    f: &FteMatchSetLyr24,
) {
    let Some(rq) = ctx.state.res.eth_rqs.get(rqn) else {
        count_drop(ctx, |d| &mut d.rq_not_ready);
        return;
    };
    if rq.state != WqState::Rdy {
        count_drop(ctx, |d| &mut d.rq_not_ready);
        return;
    }
    let wq = &rq.wq;
    let (size, stride) = (1u32 << wq.log_size.min(16), 1usize << wq.log_stride.min(11));
    let Ok(counter) = ctx.dma.read_be32(wq.dbr_addr) else {
        count_drop(ctx, |d| &mut d.rq_error);
        return;
    };
    let avail = (counter as u16).wrapping_sub(rq.ci);
    if avail == 0 || u32::from(avail) > size {
        count_drop(ctx, |d| &mut d.rq_no_wqe);
        return;
    }
    let ci = rq.ci;
    let off = u64::from(u32::from(ci) & (size - 1)) << wq.log_stride.min(11);
    let mut raw = [0u8; MAX_RQ_WQE];
    let read = wq
        .buf
        .iova(off)
        .is_some_and(|iova| ctx.dma.read(iova, &mut raw[..stride]).is_ok());
    if !read {
        count_drop(ctx, |d| &mut d.rq_error);
        return;
    }
    let (dom, cqn, user_index) = (wq.dom, wq.cqn, wq.user_index);
    let strip = !rq.vsd && f.cvlan_tag();
    let mut segs = ctx.state.spare_recv_segs.pop().unwrap_or_default();
    crate::rq::parse_segs(&raw[..stride], &mut segs);
    let len = frame.len() - if strip { VLAN_TAG_LEN } else { 0 };
    if mkey::total_len(&segs) < len as u64 {
        ctx.state.spare_recv_segs.push(segs);
        count_drop(ctx, |d| &mut d.frame_too_long);
        return;
    }
    let mkeys = &ctx.state.res.mkeys;
    let scattered = if strip {
        mkey::scatter(ctx.dma, mkeys, dom, &segs, 0, &frame[..12]).and_then(|()| {
            mkey::scatter(ctx.dma, mkeys, dom, &segs, 12, &frame[12 + VLAN_TAG_LEN..])
        })
    } else {
        mkey::scatter(ctx.dma, mkeys, dom, &segs, 0, frame)
    };
    ctx.state.spare_recv_segs.push(segs);
    if let Some(rq) = ctx.state.res.eth_rqs.get_mut(rqn) {
        rq.ci = ci.wrapping_add(1);
    }
    let mut cqe = match scattered {
        Ok(()) => {
            let mut c = rnic_hw_regs::cqe::Cqe64::default();
            c.set_opcode(CqeOpcode::RespSend.raw());
            c.set_byte_cnt(len as u32);
            c.set_wqe_counter(ci);
            c.set_qpn(flow_tag & 0xFF_FFFF);
            let (l3, l4) = hdr_types(f);
            c.set_l3_hdr_type(l3);
            c.set_l4_hdr_type(l4);
            if strip {
                c.set_cvlan_present(true);
                c.set_vlan_info(u16::from_be_bytes([frame[14], frame[15]]));
            }
            ctx.state.counters.raw_rx += 1;
            c
        }
        Err(e) => {
            if let Some(rq) = ctx.state.res.eth_rqs.get_mut(rqn) {
                rq.state = WqState::Err;
            }
            count_drop(ctx, |d| &mut d.rq_error);
            crate::cq::err_cqe(false, rqn, ci, 0, e.local_syndrome())
        }
    };
    if ctx.state.caps.general().cqe_version() >= 1 {
        cqe.set_srqn_uidx(user_index);
    }
    crate::cq::push(ctx, cqn, &mut cqe);
}
