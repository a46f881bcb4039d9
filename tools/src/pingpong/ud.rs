//! ibv_ud_pingpong's QP: UD with Q_Key 0x11111111, receive buffers of size + 40 (the GRH
//! area), sends from offset 40, an address handle with hop limit 1 towards the peer.

use super::exchange::PpDest;
use super::{Pp, QKEY};
use crate::error::ToolError;
use crate::rdma::{self, Context};
use rnic_verbs as v;

/// Fails if messages of `size` do not fit the port's MTU (a UD message is one packet).
pub fn check_size(ctx: &Context, size: usize) -> Result<(), ToolError> {
    let mtu = rdma::mtu_bytes(rdma::active_mtu(ctx)?) as usize;
    if size > mtu {
        return Err(ToolError::Usage(format!(
            "requested size larger than port MTU ({mtu})"
        )));
    }
    Ok(())
}

/// Moves the new UD QP to RTR (UD needs no peer for that; RTS comes with our PSN in
/// [`connect`]).
pub fn init(pp: &Pp) -> Result<(), ToolError> {
    pp.qp
        .to_init(&v::InitAttr {
            qkey: Some(QKEY),
            ..v::InitAttr::default()
        })
        .map_err(rdma::verr)?;
    pp.qp.to_rtr(&v::RtrAttr::default()).map_err(rdma::verr)
}

/// RTS with our PSN and the address handle towards `rem`.
pub fn connect(pp: &mut Pp, mine: &PpDest, rem: &PpDest, sl: u8) -> Result<(), ToolError> {
    pp.qp
        .to_rts(&v::RtsAttr {
            sq_psn: mine.psn,
            ..v::RtsAttr::default()
        })
        .map_err(rdma::verr)?;
    let ah = pp.peer_ah(rem, sl);
    pp.ah = Some(pp.pd.create_ah(&ah).map_err(rdma::verr)?);
    Ok(())
}
