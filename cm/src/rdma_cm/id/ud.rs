//! UD ids (port spaces UDP and IPoIB, `IB_QPT_UD`): no connection, a service ID resolved
//! with SIDR (IBTA Vol. 1, 12.11). The active id sends a SIDR REQ with rdma_cm's IP header
//! (`cma_resolve_ib_udp`) and learns the service's QPN and Q_Key from the SIDR REP
//! (`cma_sidr_rep_handler`); the passive id answers with its UD QP (`cma_send_sidr_rep`).
//! The QP itself goes to RTS when it is created (`ucma_init_ud_qp`).

use super::{CmId, IdState, listener, new_child, sgid_index, upgrade};
use crate::cma::{self, ConnParam};
use crate::event::MadAddr;
use crate::rdma_cm::agent::{AgentState, Core, lock};
use crate::rdma_cm::channel::{EventKind, UdParam};
use crate::rdma_cm::error::{Error, Result};
use crate::state::ConnId;
use crate::time::Instant;
use crate::wire::{SidrRep, SidrReq, SidrStatus};
use rnic_verbs::{
    AhAttr, CompletionQueue, Gid, InitAttr, ProtectionDomain, QpCap, QpType, QueuePair, RtrAttr,
    RtsAttr,
};
use std::sync::Arc;

/// `-EINVAL`: the status of the AddrError a SIDR REP with another Q_Key than the id's
/// causes (`cma_set_qkey`).
const EINVAL: i32 = -22;

/// A UD QP on `pd` in RTS: INIT with P_Key index 0, port 1 and rdma_cm's Q_Key, RTR, RTS
/// with send PSN 0, as librdmacm's `ucma_init_ud_qp`.
pub(super) fn create_qp(
    pd: &ProtectionDomain,
    send_cq: &CompletionQueue,
    recv_cq: &CompletionQueue,
    cap: QpCap,
) -> Result<QueuePair> {
    let qp = pd
        .create_qp(QpType::Ud, send_cq, recv_cq)
        .cap(cap)
        .build()?;
    qp.to_init(&InitAttr {
        qkey: Some(cma::UDP_QKEY),
        ..InitAttr::default()
    })?;
    qp.to_rtr(&RtrAttr::default())?;
    qp.to_rts(&RtsAttr {
        sq_psn: 0,
        ..RtsAttr::default()
    })?;
    Ok(qp)
}

impl CmId {
    /// `rdma_connect` of a UD id: the SIDR REQ.
    pub(super) fn sidr_connect(&self, param: &ConnParam) -> Result<()> {
        let Some(agent) = self.agent() else {
            return Err(Error::InvalidState {
                call: "rdma_connect",
                state: self.state(),
            });
        };
        let core = &agent.core;
        let mut st = lock(&core.state);
        let mut d = self.data();
        let (IdState::RouteResolved, Some(route)) = (d.state, d.route) else {
            return Err(Error::InvalidState {
                call: "rdma_connect",
                state: d.state,
            });
        };
        let p = cma::sidr_params(&route, self.inner.ps, &param.private_data)?;
        let id = st.ep.sidr_request(core.now(), &p)?;
        st.routes.insert(id, Arc::downgrade(&self.inner));
        (d.conn, d.param, d.state) = (Some(id), param.clone(), IdState::Connect);
        st.collect_tx();
        core.kick();
        Ok(())
    }

    /// `rdma_accept` of a UD id: the SIDR REP with the QP and the id's Q_Key. The id is
    /// then done with the CM (in Established, as far as its calls go).
    pub(super) fn sidr_accept(&self, param: &ConnParam) -> Result<()> {
        let Some(agent) = self.agent() else {
            return Err(Error::InvalidState {
                call: "rdma_accept",
                state: self.state(),
            });
        };
        let core = &agent.core;
        let mut st = lock(&core.state);
        let mut d = self.data();
        let (IdState::ConnectRequest, Some(id)) = (d.state, d.conn) else {
            return Err(Error::InvalidState {
                call: "rdma_accept",
                state: d.state,
            });
        };
        // librdmacm: the id's QP, else the caller's QPN.
        let qp_num = d.qp.as_ref().map_or(param.qp_num, |qp| qp.qp_num());
        if qp_num == 0 {
            return Err(Error::invalid(
                "rdma_accept",
                "a UD id answers with its QP: create one (rdma_create_qp) or give param.qp_num",
            ));
        }
        let qkey = *d.qkey.get_or_insert(cma::UDP_QKEY);
        let rep = cma::sidr_accept(qp_num, qkey, &param.private_data)?;
        st.ep.sidr_reply(id, &rep)?;
        st.routes.remove(&id);
        (d.conn, d.param, d.state) = (None, param.clone(), IdState::Established);
        st.collect_tx();
        core.kick();
        Ok(())
    }

    /// `rdma_disconnect` of a UD id: its QP to error; nothing goes on the wire.
    pub(super) fn ud_disconnect(&self) -> Result<()> {
        let state = self.state();
        if state != IdState::Established {
            return Err(Error::InvalidState {
                call: "rdma_disconnect",
                state,
            });
        }
        if let Some(qp) = self.qp() {
            qp.to_error()?;
        }
        self.data().state = IdState::Disconnected;
        Ok(())
    }
}

/// A SIDR REQ from `from` reached the endpoint's listener: a new UD id and its
/// ConnectRequest with the consumer's private data, or, without a UD listener or with a
/// private data header that does not parse, a SIDR REP refusing it (status 2, rejected, as
/// the kernel's CM answers a request its consumer did not take).
pub(super) fn on_request(
    st: &mut AgentState,
    now: Instant,
    id: ConnId,
    from: MadAddr,
    req: &SidrReq,
) {
    let split = cma::split_private_data(&req.private_data);
    let (Some(l), Ok((hdr, user))) = (listener(st, req.service_id, true), split) else {
        let _ = st.ep.destroy(now, id);
        return;
    };
    let Some(child) = new_child(st, &l, id, req.service_id, &hdr) else {
        let _ = st.ep.destroy(now, id);
        return;
    };
    let ctx = child.context();
    let ah_attr = ctx.map(|ctx| AhAttr {
        hop_limit: 64,
        ..AhAttr::new(Gid(from.gid), sgid_index(&ctx))
    });
    let ud = UdParam {
        private_data: user.to_vec(),
        ah_attr,
        qp_num: 0,
        qkey: 0,
    };
    child.event_ud(EventKind::ConnectRequest, Some(l), 0, ud);
}

/// The SIDR REP of UD id `id`'s request: Established with the service's QPN, Q_Key and the
/// address of the route; Unreachable with the status of one that refuses; AddrError when
/// its Q_Key is not the one the id's QP has (`cma_set_qkey`).
pub(super) fn on_reply(core: &Core, st: &mut AgentState, id: ConnId, rep: &SidrRep) {
    let Some(c) = upgrade(st, id) else {
        return;
    };
    st.routes.remove(&id);
    let private_data = rep.private_data.to_vec();
    let mut d = c.data();
    d.conn = None;
    if rep.status != SidrStatus::Valid.raw() {
        d.state = IdState::Failed;
        drop(d);
        let ud = UdParam {
            private_data,
            ah_attr: None,
            qp_num: 0,
            qkey: 0,
        };
        c.event_ud(EventKind::Unreachable, None, i32::from(rep.status), ud);
        return;
    }
    if d.qkey.is_some_and(|k| k != rep.qkey) {
        d.state = IdState::Failed;
        drop(d);
        let ud = UdParam {
            private_data,
            ah_attr: None,
            qp_num: 0,
            qkey: 0,
        };
        c.event_ud(EventKind::AddrError, None, EINVAL, ud);
        return;
    }
    d.qkey = Some(rep.qkey);
    d.state = IdState::Established;
    let ah_attr = d.route.map(|r| {
        let path = r.path(0);
        AhAttr {
            hop_limit: path.hop_limit,
            traffic_class: path.traffic_class,
            flow_label: path.flow_label,
            sl: path.sl,
            ..AhAttr::new(Gid(r.dst_gid()), sgid_index(&core.ctx))
        }
    });
    drop(d);
    let ud = UdParam {
        private_data,
        ah_attr,
        qp_num: rep.qpn,
        qkey: rep.qkey,
    };
    c.event_ud(EventKind::Established, None, 0, ud);
}
