//! ibv_rc_pingpong's QP: RC, access flags 0 (SENDs only), RTR with `min_rnr_timer` 12 and
//! `max_dest_rd_atomic` 1, RTS with timeout 14, retry 7, RNR retry 7, `max_rd_atomic` 1, and a
//! GRH with hop limit 1 when the peer has a GID.

use super::Pp;
use super::exchange::PpDest;
use crate::error::ToolError;
use crate::rdma;
use rnic_verbs as v;

/// Moves the new RC QP to INIT.
pub fn init(pp: &Pp) -> Result<(), ToolError> {
    pp.qp
        .to_init(&v::InitAttr {
            access: v::AccessFlags::empty(),
            ..v::InitAttr::default()
        })
        .map_err(rdma::verr)
}

/// `pp_connect_ctx`: INIT -> RTR -> RTS towards `rem`.
pub fn connect(pp: &Pp, mine: &PpDest, rem: &PpDest, mtu: u8, sl: u8) -> Result<(), ToolError> {
    let ah = pp.peer_ah(rem, sl);
    pp.qp
        .to_rtr(&v::RtrAttr {
            path_mtu: Some(rdma::mtu_from_enum(mtu)),
            dest_qp_num: Some(rem.qpn),
            rq_psn: rem.psn,
            ah_attr: Some(ah),
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
        })
        .map_err(rdma::verr)?;
    pp.qp
        .to_rts(&v::RtsAttr {
            sq_psn: mine.psn,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
        })
        .map_err(rdma::verr)
}
