//! ibv_ud_pingpong's QP: UD with Q_Key 0x11111111, receive buffers of size + 40 (the GRH
//! area), sends from offset 40, an address handle with hop limit 1 towards the peer.

use super::exchange::PpDest;
use super::{GRH, Kind, Pp, QKEY};
use crate::error::ToolError;
use crate::rdma::{self, Context};
use rnic_verbs as v;

/// Creates the PD, buffer of `size + 40` (filled with 0x7b), CQ (and channel) and the UD QP,
/// already in RTS (UD needs no peer for that).
pub fn setup(
    ctx: Context,
    size: usize,
    rx_depth: u32,
    events: bool,
    gid_index: u32,
) -> Result<Pp, ToolError> {
    let mtu = crate::perf::mtu_bytes(rdma::active_mtu(&ctx)?) as usize;
    if size > mtu {
        return Err(ToolError::Usage(format!(
            "requested size larger than port MTU ({mtu})"
        )));
    }
    let pd = ctx.alloc_pd().map_err(rdma::verr)?;
    let mr = pd
        .reg_mr(size + GRH, v::AccessFlags::LOCAL_WRITE)
        .map_err(rdma::verr)?;
    mr.fill(0, size + GRH, 0x7b).map_err(rdma::verr)?;
    let chan = if events {
        Some(ctx.create_comp_channel().map_err(rdma::verr)?)
    } else {
        None
    };
    let cq = ctx
        .create_cq(rx_depth + 1, chan.as_ref())
        .map_err(rdma::verr)?;
    let qp = pd
        .create_qp(v::QpType::Ud, &cq, &cq)
        .max_send_wr(1)
        .max_recv_wr(rx_depth)
        .max_send_sge(1)
        .max_recv_sge(1)
        .max_inline_data(0)
        .build()
        .map_err(rdma::verr)?;
    qp.to_init(&v::InitAttr {
        qkey: Some(QKEY),
        ..v::InitAttr::default()
    })
    .map_err(rdma::verr)?;
    qp.to_rtr(&v::RtrAttr::default()).map_err(rdma::verr)?;
    Ok(Pp {
        ctx,
        pd,
        mr,
        cq,
        chan,
        qp,
        ah: None,
        size,
        rx_depth,
        gid_index,
        kind: Kind::Ud,
    })
}

/// RTS with our PSN and the address handle towards `rem`.
pub fn connect(pp: &mut Pp, mine: &PpDest, rem: &PpDest, sl: u8) -> Result<(), ToolError> {
    pp.qp
        .to_rts(&v::RtsAttr {
            sq_psn: mine.psn,
            ..v::RtsAttr::default()
        })
        .map_err(rdma::verr)?;
    let mut ah = v::AhAttr::new(v::Gid(rem.gid), pp.gid_index as u8);
    ah.hop_limit = 1;
    ah.sl = sl;
    pp.ah = Some(pp.pd.create_ah(&ah).map_err(rdma::verr)?);
    Ok(())
}
