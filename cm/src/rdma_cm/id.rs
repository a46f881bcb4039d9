//! [`CmId`] (`struct rdma_cm_id`): an IP endpoint on a device's CM, through the steps of
//! librdmacm: bind or resolve the address and route, then listen, or connect; accept or
//! reject what comes in; create the id's RC QP, which the id moves INIT -> RTR -> RTS with
//! the attributes the REQ and REP carry; disconnect.

use crate::cma::{self, ConnParam, RoceRoute};
use crate::rdma_cm::addr::open_device_for;
use crate::rdma_cm::agent::{Agent, AgentState, Core, Doomed, lock, random_u32};
use crate::rdma_cm::channel::{ChanInner, CmEvent, EventChannel, EventKind};
use crate::rdma_cm::error::{Error, Result};
use crate::rdma_cm::id_state::IdState;
use crate::state::ConnId;
use crate::time::{Instant, ack_timeout};
use crate::wire::ip::{PortSpace, port_of};
use crate::wire::{Rep, Req};
use crate::{CmError, Event};
use rnic_verbs::{
    AccessFlags, AhAttr, CompletionQueue, Context, Gid, InitAttr, Mtu, ProtectionDomain, QpCap,
    QpType, QueuePair, RtrAttr, RtsAttr,
};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

#[derive(Debug)]
struct IdData {
    state: IdState,
    ctx: Option<Context>,
    agent: Option<Arc<Agent>>,
    local: Option<SocketAddr>,
    peer: Option<SocketAddr>,
    route: Option<RoceRoute>,
    conn: Option<ConnId>,
    service_id: Option<u64>,
    qp: Option<Arc<QueuePair>>,
    psn: u32,
    param: ConnParam,
    /// Passive side: the REQ it answers.
    req: Option<Box<Req>>,
    /// Active side: the REP's private data, for the Established event.
    rep_data: Vec<u8>,
    disconnect_reported: bool,
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the QP's local ACK timeout, instead of the CM's.
    ack_timeout: Option<u8>,
}

#[derive(Debug)]
pub(crate) struct IdInner {
    /// Weak: a queued event holds its id, so a strong handle here would keep a channel whose
    /// last `EventChannel` went (and its ids, their QPs and agent) alive for ever.
    channel: Weak<ChanInner>,
    ps: PortSpace,
    data: Mutex<IdData>,
}

impl Drop for IdInner {
    fn drop(&mut self) {
        let d = self.data.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = &d.agent {
            a.core.doom(Doomed {
                conn: d.conn,
                service_id: d.service_id,
            });
        }
    }
}

/// A CM id (`rdma_create_id`). A cheap handle (an `Arc` inside): events carry clones; when
/// the last goes, its connection ends (`rdma_destroy_id`: DREQ or REJ as the state asks)
/// and its QP is destroyed.
#[derive(Debug, Clone)]
pub struct CmId {
    inner: Arc<IdInner>,
}

impl CmId {
    /// `rdma_create_id`: a new id whose events go to `channel`, in port space `ps` (RC
    /// connections: [`PortSpace::Tcp`]). Keep an [`EventChannel`] handle while the id lives
    /// (librdmacm destroys ids before their channel): once the last one goes, the id's
    /// events, and requests to a listening id, go nowhere (a request is rejected).
    pub fn new(channel: &EventChannel, ps: PortSpace) -> CmId {
        CmId {
            inner: Arc::new(IdInner {
                channel: Arc::downgrade(&channel.inner),
                ps,
                data: Mutex::new(IdData {
                    state: IdState::Idle,
                    ctx: None,
                    agent: None,
                    local: None,
                    peer: None,
                    route: None,
                    conn: None,
                    service_id: None,
                    qp: None,
                    psn: random_u32() & 0xFF_FFFF,
                    param: ConnParam::default(),
                    req: None,
                    rep_data: Vec::new(),
                    disconnect_reported: false,
                    ack_timeout: None,
                }),
            }),
        }
    }

    fn data(&self) -> std::sync::MutexGuard<'_, IdData> {
        lock(&self.inner.data)
    }

    /// The id's state.
    pub fn state(&self) -> IdState {
        self.data().state
    }

    /// The device the id is bound to.
    pub fn context(&self) -> Option<Context> {
        self.data().ctx.clone()
    }

    /// The local address (`rdma_get_local_addr`).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.data().local
    }

    /// The peer's address (`rdma_get_peer_addr`).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.data().peer
    }

    /// The id's QP, once [`create_qp`](Self::create_qp) made it.
    pub fn qp(&self) -> Option<Arc<QueuePair>> {
        self.data().qp.clone()
    }

    fn agent(&self) -> Option<Arc<Agent>> {
        self.data().agent.clone()
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT)`: the local ACK timeout
    /// (4.096 us x 2^`timeout`, 0..=31) the id's QP gets when it moves to RTS, instead of
    /// the one the CM derives from the path (perftest sets its `--qp-timeout`, 14, so).
    ///
    /// ```
    /// use rnic_cm::rdma_cm::{CmId, EventChannel};
    /// use rnic_cm::wire::ip::PortSpace;
    /// # fn main() -> Result<(), rnic_cm::rdma_cm::Error> {
    /// let id = CmId::new(&EventChannel::new()?, PortSpace::Tcp);
    /// id.set_ack_timeout(14)?;
    /// assert!(id.set_ack_timeout(32).is_err());
    /// # Ok(()) }
    /// ```
    pub fn set_ack_timeout(&self, timeout: u8) -> Result<()> {
        if timeout > 31 {
            return Err(Error::invalid(
                "rdma_set_option",
                format!("ACK timeout {timeout} is above 31"),
            ));
        }
        self.data().ack_timeout = Some(timeout);
        Ok(())
    }

    /// `rdma_bind_addr`: binds the id to the device that owns `addr`'s IP (port 0: one is
    /// picked when the id listens).
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        let mut d = self.data();
        if d.state != IdState::Idle {
            return Err(Error::InvalidState {
                call: "rdma_bind_addr",
                state: d.state,
            });
        }
        let ctx = open_device_for(addr.ip())?;
        let agent = Agent::of(&ctx)?;
        (d.ctx, d.agent, d.local, d.state) = (Some(ctx), Some(agent), Some(addr), IdState::Bound);
        Ok(())
    }

    /// `rdma_resolve_addr`: resolves `dst`'s neighbour through the device's neighbour
    /// resolution (from `src`, or the bound address), then queues
    /// [`EventKind::AddrResolved`] or [`EventKind::AddrError`].
    pub fn resolve_addr(
        &self,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        _timeout: Duration,
    ) -> Result<()> {
        let bound = {
            let d = self.data();
            match d.state {
                IdState::Idle => None,
                IdState::Bound => d.local,
                state => {
                    return Err(Error::InvalidState {
                        call: "rdma_resolve_addr",
                        state,
                    });
                }
            }
        };
        let Some(mut src) = bound.or(src) else {
            return Err(Error::invalid(
                "rdma_resolve_addr",
                "no source address: bind the id or pass one",
            ));
        };
        if bound.is_none() {
            self.bind_addr(src)?;
        }
        if src.port() == 0 {
            src.set_port(ephemeral_port());
        }
        let ctx = self.context().ok_or(Error::NoDevice(src.ip()))?;
        let ok = match dst.ip() {
            IpAddr::V4(a) => ctx.resolve_mac(&Gid::from_ipv4(a)).is_ok(),
            IpAddr::V6(a) => ctx.resolve_mac(&Gid(a.octets())).is_ok(),
        };
        let kind = {
            let mut d = self.data();
            if ok {
                (d.local, d.peer, d.state) = (Some(src), Some(dst), IdState::AddrResolved);
                EventKind::AddrResolved
            } else {
                EventKind::AddrError
            }
        };
        self.event(kind, None, 0, ConnParam::default());
        Ok(())
    }

    /// `rdma_resolve_route`: the RoCE v2 path from the two addresses (rdma_cm's defaults,
    /// the port's active MTU), then [`EventKind::RouteResolved`].
    pub fn resolve_route(&self, _timeout: Duration) -> Result<()> {
        {
            let mut d = self.data();
            let (IdState::AddrResolved, Some(src), Some(dst), Some(ctx)) =
                (d.state, d.local, d.peer, d.ctx.as_ref())
            else {
                return Err(Error::InvalidState {
                    call: "rdma_resolve_route",
                    state: d.state,
                });
            };
            let mut route = RoceRoute::new(src, dst);
            route.path_mtu = ctx.query_port(1)?.active_mtu as u8;
            (d.route, d.state) = (Some(route), IdState::RouteResolved);
        }
        self.event(EventKind::RouteResolved, None, 0, ConnParam::default());
        Ok(())
    }

    /// `rdma_listen`: takes REQs for the bound port ([`EventKind::ConnectRequest`]). A
    /// second listener on the port of the device is [`Error::AddrInUse`].
    pub fn listen(&self, _backlog: i32) -> Result<()> {
        let agent = self.agent();
        let (Some(agent), IdState::Bound, Some(mut local)) =
            (agent, self.state(), self.local_addr())
        else {
            return Err(Error::InvalidState {
                call: "rdma_listen",
                state: self.state(),
            });
        };
        if local.port() == 0 {
            local.set_port(ephemeral_port());
        }
        let sid = crate::wire::ip::service_id(self.inner.ps, local.port());
        let mut st = lock(&agent.core.state);
        match st.ep.listen(sid) {
            Ok(()) => {}
            Err(CmError::AlreadyListening(_)) => return Err(Error::AddrInUse(local)),
            Err(e) => return Err(e.into()),
        }
        st.listeners.insert(sid, Arc::downgrade(&self.inner));
        let mut d = self.data();
        (d.service_id, d.local, d.state) = (Some(sid), Some(local), IdState::Listen);
        Ok(())
    }

    /// `rdma_create_qp`: an RC QP on `pd` (of the id's device) with these CQs and
    /// capacities, moved to INIT (port 1, local write and remote read, write and atomic).
    pub fn create_qp(
        &self,
        pd: &ProtectionDomain,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
        cap: QpCap,
    ) -> Result<Arc<QueuePair>> {
        let mut d = self.data();
        let Some(ctx) = d.ctx.as_ref() else {
            return Err(Error::InvalidState {
                call: "rdma_create_qp",
                state: d.state,
            });
        };
        if !pd.context().same_device(ctx) {
            return Err(Error::invalid(
                "rdma_create_qp",
                "the PD is of another device than the id's",
            ));
        }
        if d.qp.is_some() {
            return Err(Error::invalid("rdma_create_qp", "the id has a QP already"));
        }
        let qp = pd
            .create_qp(QpType::Rc, send_cq, recv_cq)
            .cap(cap)
            .build()?;
        qp.to_init(&InitAttr {
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            ..InitAttr::default()
        })?;
        let qp = Arc::new(qp);
        d.qp = Some(qp.clone());
        Ok(qp)
    }

    /// `rdma_connect`: sends the REQ (the id's QP and `param`); then
    /// [`EventKind::Established`] (the QP in RTS), [`EventKind::Rejected`] or
    /// [`EventKind::Unreachable`].
    pub fn connect(&self, param: &ConnParam) -> Result<()> {
        let Some(agent) = self.agent() else {
            return Err(Error::InvalidState {
                call: "rdma_connect",
                state: self.state(),
            });
        };
        let core = &agent.core;
        let mut st = lock(&core.state);
        let mut d = self.data();
        let (IdState::RouteResolved, Some(route), Some(qp)) = (d.state, d.route, d.qp.as_ref())
        else {
            return Err(Error::InvalidState {
                call: "rdma_connect",
                state: d.state,
            });
        };
        let mut param = param.clone();
        param.qp_num = qp.qp_num();
        let p = cma::connect_params(
            &route,
            self.inner.ps,
            &param,
            d.psn,
            st.ep.config().ack_delay,
        )?;
        let id = st.ep.connect(core.now(), &p)?;
        st.routes.insert(id, Arc::downgrade(&self.inner));
        (d.conn, d.param, d.state) = (Some(id), param, IdState::Connect);
        st.collect_tx();
        core.kick();
        Ok(())
    }

    /// `rdma_accept` (a ConnectRequest's id, with its QP): moves the QP to RTR and RTS from
    /// the REQ and sends the REP with `param`; [`EventKind::Established`] follows the RTU.
    pub fn accept(&self, param: &ConnParam) -> Result<()> {
        let Some(agent) = self.agent() else {
            return Err(Error::InvalidState {
                call: "rdma_accept",
                state: self.state(),
            });
        };
        let core = &agent.core;
        let mut st = lock(&core.state);
        let mut d = self.data();
        let (IdState::ConnectRequest, Some(id), Some(qp), Some(req), Some(peer)) =
            (d.state, d.conn, d.qp.clone(), d.req.clone(), d.peer)
        else {
            return Err(Error::InvalidState {
                call: "rdma_accept",
                state: d.state,
            });
        };
        let mut param = param.clone();
        param.qp_num = qp.qp_num();
        let rep = cma::accept_params(&param, d.psn)?;
        ready_qp(
            &core.ctx,
            &qp,
            peer,
            (req.local_qpn, req.starting_psn, req.path_mtu),
            RtsAttr {
                sq_psn: d.psn,
                timeout: d.ack_timeout.unwrap_or(req.primary.local_ack_timeout),
                retry_cnt: req.retry_count,
                rnr_retry: req.rnr_retry_count,
                max_rd_atomic: param.initiator_depth.max(1),
            },
            param.responder_resources,
            &req.primary,
        )?;
        st.ep.accept(core.now(), id, &rep)?;
        (d.param, d.state) = (param, IdState::Accepted);
        st.collect_tx();
        core.kick();
        Ok(())
    }

    /// `rdma_reject` (a ConnectRequest's id): a REJ (consumer defined, 28) with
    /// `private_data`; the connection is gone.
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        self.end("rdma_reject", |st, now, id, state| {
            if state != IdState::ConnectRequest {
                return Err(Error::InvalidState {
                    call: "rdma_reject",
                    state,
                });
            }
            st.ep.reject(now, id, 28, &[], private_data)?;
            st.routes.remove(&id);
            Ok(IdState::Failed)
        })
    }

    /// `rdma_disconnect`: the QP to error and a DREQ (or the DREP of the peer's DREQ);
    /// [`EventKind::Disconnected`] follows, then [`EventKind::TimewaitExit`].
    pub fn disconnect(&self) -> Result<()> {
        if let Some(qp) = self.qp() {
            qp.to_error()?;
        }
        self.end("rdma_disconnect", |st, now, id, state| match state {
            IdState::Established => {
                st.ep.disconnect(now, id, &[])?;
                Ok(IdState::Established)
            }
            IdState::Disconnected if st.ep.state(id) == Some(crate::State::DreqRcvd) => {
                st.ep.disconnect_reply(now, id, &[])?;
                Ok(IdState::Disconnected)
            }
            state => Err(Error::InvalidState {
                call: "rdma_disconnect",
                state,
            }),
        })
    }

    fn end(
        &self,
        call: &'static str,
        f: impl FnOnce(&mut AgentState, Instant, ConnId, IdState) -> Result<IdState>,
    ) -> Result<()> {
        let Some(agent) = self.agent() else {
            return Err(Error::InvalidState {
                call,
                state: self.state(),
            });
        };
        let core = &agent.core;
        let mut st = lock(&core.state);
        let mut d = self.data();
        let Some(id) = d.conn else {
            return Err(Error::InvalidState {
                call,
                state: d.state,
            });
        };
        d.state = f(&mut st, core.now(), id, d.state)?;
        st.collect_tx();
        core.kick();
        Ok(())
    }

    fn event(&self, kind: EventKind, listen_id: Option<CmId>, status: u16, param: ConnParam) {
        let Some(channel) = self.inner.channel.upgrade() else {
            return;
        };
        channel.push(CmEvent {
            kind,
            id: self.clone(),
            listen_id,
            status,
            param,
        });
    }
}

/// RTR and RTS of `qp` towards `peer`'s QP (`dest`: QPN, first PSN, path MTU).
fn ready_qp(
    ctx: &Context,
    qp: &QueuePair,
    peer: SocketAddr,
    (dest_qpn, rq_psn, path_mtu): (u32, u32, u8),
    rts: RtsAttr,
    responder_resources: u8,
    path: &crate::wire::Path,
) -> Result<()> {
    let local_mtu = ctx.query_port(1)?.active_mtu;
    let mtu = mtu_of(path_mtu).map_or(local_mtu, |m| m.min(local_mtu));
    let sgid_index = ctx
        .ipv4_gid_index()
        .and_then(|i| u8::try_from(i).ok())
        .unwrap_or(0);
    let dgid = match peer.ip() {
        IpAddr::V4(a) => Gid::from_ipv4(a),
        IpAddr::V6(a) => Gid(a.octets()),
    };
    qp.to_rtr(&RtrAttr {
        path_mtu: Some(mtu),
        dest_qp_num: Some(dest_qpn),
        rq_psn: rq_psn & 0xFF_FFFF,
        ah_attr: Some(AhAttr {
            hop_limit: path.hop_limit,
            traffic_class: path.traffic_class,
            flow_label: path.flow_label,
            sl: path.sl,
            ..AhAttr::new(dgid, sgid_index)
        }),
        max_dest_rd_atomic: responder_resources.max(1),
        ..RtrAttr::default()
    })?;
    qp.to_rts(&rts)?;
    Ok(())
}

/// The IB MTU enum of a path (1 = 256 ... 5 = 4096).
fn mtu_of(code: u8) -> Option<Mtu> {
    Some(match code {
        1 => Mtu::Mtu256,
        2 => Mtu::Mtu512,
        3 => Mtu::Mtu1024,
        4 => Mtu::Mtu2048,
        5 => Mtu::Mtu4096,
        _ => return None,
    })
}

/// An ephemeral port, as the kernel picks one for an unbound id.
fn ephemeral_port() -> u16 {
    32768 + (random_u32() % 28232) as u16
}

fn upgrade(st: &AgentState, id: ConnId) -> Option<CmId> {
    st.routes
        .get(&id)
        .and_then(std::sync::Weak::upgrade)
        .map(|inner| CmId { inner })
}

/// Hands the endpoint's events to the ids (the agent's state locked): a REQ becomes a new
/// id and its ConnectRequest; a REP readies the active QP and is answered with the RTU.
pub(crate) fn dispatch(core: &Core, st: &mut AgentState, now: Instant) {
    while let Some(ev) = st.ep.poll_event() {
        match ev {
            Event::ConnectRequest { id, req, .. } => {
                let listener = st
                    .listeners
                    .get(&req.service_id)
                    .and_then(std::sync::Weak::upgrade)
                    .map(|inner| CmId { inner });
                let split = cma::split_private_data(&req.private_data);
                let chan = listener.as_ref().and_then(|l| l.inner.channel.upgrade());
                let (Some(l), Some(inner), Ok((hdr, user))) = (listener, chan, split) else {
                    let _ = st.ep.reject(now, id, 28, &[], &[]);
                    continue;
                };
                let child = CmId::new(&EventChannel { inner }, l.inner.ps);
                {
                    let ld = l.data();
                    let mut d = child.data();
                    let port = port_of(req.service_id, l.inner.ps).unwrap_or(0);
                    d.ctx = ld.ctx.clone();
                    d.agent = ld.agent.clone();
                    d.local = Some(SocketAddr::new(hdr.dst, port));
                    d.peer = Some(SocketAddr::new(hdr.src, hdr.src_port));
                    d.conn = Some(id);
                    d.state = IdState::ConnectRequest;
                    d.req = Some(req.clone());
                }
                st.routes.insert(id, Arc::downgrade(&child.inner));
                let param = peer_param(user, req.responder_resources, req.initiator_depth);
                let param = ConnParam {
                    retry_count: req.retry_count,
                    rnr_retry_count: req.rnr_retry_count,
                    qp_num: req.local_qpn,
                    ..param
                };
                child.event(EventKind::ConnectRequest, Some(l), 0, param);
            }
            Event::ConnectReply { id, rep } => {
                let Some(c) = upgrade(st, id) else {
                    let _ = st.ep.destroy(now, id);
                    continue;
                };
                if let Err(e) = active_ready(core, &c, &rep) {
                    log::warn!("{}: the REP's attributes: {e}", core.ctx.name());
                    let _ = st.ep.reject(now, id, 28, &[], &[]);
                    st.routes.remove(&id);
                    c.data().state = IdState::Failed;
                    c.event(EventKind::ConnectError, None, 0, ConnParam::default());
                    continue;
                }
                c.data().rep_data = rep.private_data.to_vec();
                let _ = st.ep.ready_to_use(id, &[]);
            }
            Event::Established { id } => {
                if let Some(c) = upgrade(st, id) {
                    let data = {
                        let mut d = c.data();
                        d.state = IdState::Established;
                        std::mem::take(&mut d.rep_data)
                    };
                    c.event(EventKind::Established, None, 0, peer_param(&data, 0, 0));
                }
            }
            Event::Rejected { id, rej } => {
                if let Some(c) = upgrade(st, id) {
                    c.data().state = IdState::Failed;
                    let p = peer_param(&rej.private_data, 0, 0);
                    c.event(EventKind::Rejected, None, rej.reason, p);
                }
                if st.ep.state(id).is_none() {
                    st.routes.remove(&id);
                }
            }
            Event::Unreachable { id } => {
                if let Some(c) = upgrade(st, id) {
                    c.data().state = IdState::Failed;
                    c.event(EventKind::Unreachable, None, 0, ConnParam::default());
                }
                st.routes.remove(&id);
            }
            Event::DisconnectRequest { id, .. } | Event::Disconnected { id } => {
                if let Some(c) = upgrade(st, id) {
                    if let Some(qp) = c.qp() {
                        let _ = qp.to_error();
                    }
                    let report = {
                        let mut d = c.data();
                        d.state = IdState::Disconnected;
                        !std::mem::replace(&mut d.disconnect_reported, true)
                    };
                    if report {
                        c.event(EventKind::Disconnected, None, 0, ConnParam::default());
                    }
                }
            }
            Event::TimewaitExit { id } => {
                if let Some(c) = upgrade(st, id) {
                    c.data().conn = None;
                    c.event(EventKind::TimewaitExit, None, 0, ConnParam::default());
                }
                st.routes.remove(&id);
            }
            Event::SidrRequest { id, .. } => {
                // UD services (SIDR) have no id type here yet: refused.
                let _ = st.ep.destroy(now, id);
            }
            Event::MraReceived { .. } | Event::SidrReply { .. } => {}
        }
    }
    st.collect_tx();
}

/// The active side's QP to RTR and RTS from the REP.
fn active_ready(core: &Core, c: &CmId, rep: &Rep) -> Result<()> {
    let d = c.data();
    let (Some(qp), Some(peer), Some(route)) = (d.qp.clone(), d.peer, d.route) else {
        return Err(Error::InvalidState {
            call: "REP",
            state: d.state,
        });
    };
    let path = route.path(rep.target_ack_delay);
    ready_qp(
        &core.ctx,
        &qp,
        peer,
        (rep.local_qpn, rep.starting_psn, route.path_mtu),
        RtsAttr {
            sq_psn: d.psn,
            timeout: d
                .ack_timeout
                .unwrap_or_else(|| ack_timeout(rep.target_ack_delay, route.packet_life_time)),
            retry_cnt: d.param.retry_count,
            rnr_retry: rep.rnr_retry_count,
            max_rd_atomic: d.param.initiator_depth.max(1),
        },
        d.param.responder_resources,
        &path,
    )
}

fn peer_param(private_data: &[u8], responder_resources: u8, initiator_depth: u8) -> ConnParam {
    ConnParam {
        private_data: private_data.to_vec(),
        responder_resources,
        initiator_depth,
        ..ConnParam::default()
    }
}
