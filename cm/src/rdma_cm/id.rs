//! [`CmId`] (`struct rdma_cm_id`): an IP endpoint on a device's CM, through the steps of
//! librdmacm: bind or resolve the address and route, then listen, or connect; accept or
//! reject what comes in; create the id's RC QP, which the id moves INIT -> RTR -> RTS with
//! the attributes the REQ and REP carry; disconnect. Ids of the UDP port space resolve a UD
//! service with SIDR instead (room `ud`).

mod ud;

use crate::cma::{self, ConnParam, RoceRoute};
use crate::rdma_cm::addr::{open_device_for, source_for};
use crate::rdma_cm::agent::{Agent, AgentState, Core, Doomed, lock, random_u32};
use crate::rdma_cm::channel::{ChanInner, CmEvent, EventChannel, EventKind, UdParam};
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
use std::sync::{Arc, Mutex};
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
    /// UD ids: the Q_Key the id settled on (`id_priv->qkey`: its QP's, or the SIDR REP's).
    qkey: Option<u32>,
    /// `RDMA_OPTION_ID_TOS`: the route's traffic class.
    tos: Option<u8>,
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the QP's local ACK timeout, and the route's packet life
    /// time one below it.
    ack_timeout: Option<u8>,
}

#[derive(Debug)]
pub(crate) struct IdInner {
    /// Where the id's events go (`rdma_migrate_id` changes it; a leaf lock).
    channel: Mutex<Arc<ChanInner>>,
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

/// Handles of one id are equal (the same `struct rdma_cm_id`), whatever their state.
impl PartialEq for CmId {
    fn eq(&self, other: &CmId) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for CmId {}

impl CmId {
    /// `rdma_create_id`: a new id whose events go to `channel`, in port space `ps` (RC
    /// connections: [`PortSpace::Tcp`]).
    pub fn new(channel: &EventChannel, ps: PortSpace) -> CmId {
        CmId::on(channel.inner.clone(), ps)
    }

    /// A new id whose events go to `channel`.
    fn on(channel: Arc<ChanInner>, ps: PortSpace) -> CmId {
        CmId {
            inner: Arc::new(IdInner {
                channel: Mutex::new(channel),
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
                    qkey: None,
                    tos: None,
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

    /// The CM counters of the id's device (its agent's endpoint: every MAD received lands
    /// in one outcome counter; messages by attribute both ways; retries, timeouts); `None`
    /// until the id is bound to a device.
    pub fn cm_counters(&self) -> Option<crate::Counters> {
        self.agent().map(|a| *lock(&a.core.state).ep.counters())
    }

    /// The channel the id's events go to.
    fn channel(&self) -> Arc<ChanInner> {
        lock(&self.inner.channel).clone()
    }

    /// `rdma_migrate_id`: the id's events go to `channel` from now on, and those queued on
    /// its old channel and not yet taken move there too, in their order. (A listening id's
    /// new connection ids start on the channel the listener has then.)
    pub fn migrate(&self, channel: &EventChannel) {
        let old = std::mem::replace(&mut *lock(&self.inner.channel), channel.inner.clone());
        if Arc::ptr_eq(&old, &channel.inner) {
            return;
        }
        for ev in old.take_of(self) {
            channel.inner.push(ev);
        }
    }

    /// The id's port space.
    pub fn port_space(&self) -> PortSpace {
        self.inner.ps
    }

    /// The QP type of the id's port space (`id->qp_type`): UD for UDP and IPoIB, RC
    /// otherwise.
    ///
    /// ```
    /// use rnic_cm::rdma_cm::{CmId, EventChannel};
    /// use rnic_cm::wire::ip::PortSpace;
    /// let ch = EventChannel::new().unwrap();
    /// assert_eq!(CmId::new(&ch, PortSpace::Udp).qp_type(), rnic_verbs::QpType::Ud);
    /// assert_eq!(CmId::new(&ch, PortSpace::Tcp).qp_type(), rnic_verbs::QpType::Rc);
    /// ```
    pub fn qp_type(&self) -> QpType {
        if is_ud(self.inner.ps) {
            QpType::Ud
        } else {
            QpType::Rc
        }
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS)`: the type of service of the
    /// route resolved next (its traffic class).
    pub fn set_tos(&self, tos: u8) {
        self.data().tos = Some(tos);
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT)`: the local ACK timeout
    /// (4.096 us x 2^`timeout`, 5 bits) of the id's RC QP; a route resolved after it takes
    /// `timeout - 1` as its packet life time (`cma_resolve_iboe_route`).
    pub fn set_ack_timeout(&self, timeout: u8) -> Result<()> {
        if timeout > 31 {
            return Err(Error::invalid(
                "rdma_set_option",
                format!("ACK timeout {timeout} does not fit 5 bits"),
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
        if self.inner.ps == PortSpace::Ipoib {
            // cma_acquire_dev: IPoIB's port space needs an InfiniBand port.
            return Err(Error::invalid(
                "rdma_bind_addr",
                "RDMA_PS_IPOIB needs an InfiniBand port, and this is a RoCE device",
            ));
        }
        let ctx = open_device_for(addr.ip())?;
        let agent = Agent::of(&ctx)?;
        (d.ctx, d.agent, d.local, d.state) = (Some(ctx), Some(agent), Some(addr), IdState::Bound);
        Ok(())
    }

    /// `rdma_resolve_addr`: resolves `dst`'s neighbour through the device's neighbour
    /// resolution (from `src`, or the bound address, or else the source the route to `dst`
    /// takes: [`source_for`](crate::rdma_cm::source_for)), then queues
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
        let mut src = match bound.or(src) {
            Some(s) => s,
            None => SocketAddr::new(source_for(dst.ip())?, 0),
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
        self.clone().event(kind, None, 0, ConnParam::default());
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
            route.traffic_class = d.tos.unwrap_or(0);
            if let Some(t) = d.ack_timeout.filter(|t| *t > 0) {
                route.packet_life_time = t - 1;
            }
            (d.route, d.state) = (Some(route), IdState::RouteResolved);
        }
        self.clone()
            .event(EventKind::RouteResolved, None, 0, ConnParam::default());
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

    /// `rdma_create_qp`: a QP of the id's [`qp_type`](Self::qp_type) on `pd` (of the id's
    /// device) with these CQs and capacities. An RC QP is moved to INIT (port 1, local
    /// write and remote read, write and atomic); the CM moves it on. A UD QP goes straight
    /// to RTS with rdma_cm's Q_Key ([`cma::UDP_QKEY`]) and send PSN 0
    /// (`ucma_init_ud_qp`).
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
        if is_ud(self.inner.ps) {
            let qp = Arc::new(ud::create_qp(pd, send_cq, recv_cq, cap)?);
            (d.qp, d.qkey) = (Some(qp.clone()), Some(cma::UDP_QKEY));
            return Ok(qp);
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
    /// [`EventKind::Unreachable`]. A UD id sends a SIDR REQ with `param`'s private data
    /// (after rdma_cm's IP header, at most [`cma::SIDR_REQ_USER_DATA_LEN`] bytes; no QP
    /// needed); then Established with the service's UD parameters ([`CmEvent::ud`]), or
    /// Unreachable.
    pub fn connect(&self, param: &ConnParam) -> Result<()> {
        if is_ud(self.inner.ps) {
            return self.sidr_connect(param);
        }
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
    /// A UD id answers the SIDR REQ with a SIDR REP: its QP's number (or `param.qp_num`
    /// without one), the id's Q_Key and `param`'s private data; no event follows.
    pub fn accept(&self, param: &ConnParam) -> Result<()> {
        if is_ud(self.inner.ps) {
            return self.sidr_accept(param);
        }
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
        let psns = cma::qp_psns(d.psn, req.starting_psn);
        ready_qp(
            &core.ctx,
            &qp,
            peer,
            (req.local_qpn, psns.rq_psn, req.path_mtu),
            RtsAttr {
                sq_psn: psns.sq_psn,
                // rdma_init_qp_attr: RDMA_OPTION_ID_ACK_TIMEOUT over the path's.
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
    /// `private_data`; the connection is gone. A UD id answers with a SIDR REP of status 2
    /// (rejected) carrying `private_data`.
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        let ud = is_ud(self.inner.ps);
        self.end("rdma_reject", |st, now, id, state| {
            if state != IdState::ConnectRequest {
                return Err(Error::InvalidState {
                    call: "rdma_reject",
                    state,
                });
            }
            if ud {
                st.ep.sidr_reply(id, &cma::sidr_reject(private_data)?)?;
            } else {
                st.ep.reject(now, id, 28, &[], private_data)?;
            }
            st.routes.remove(&id);
            Ok(IdState::Failed)
        })
    }

    /// `rdma_disconnect`: the QP to error and a DREQ (or the DREP of the peer's DREQ);
    /// [`EventKind::Disconnected`] follows, then [`EventKind::TimewaitExit`]. A UD id has
    /// no connection: its QP goes to error, and no MAD and no event follow.
    pub fn disconnect(&self) -> Result<()> {
        if is_ud(self.inner.ps) {
            return self.ud_disconnect();
        }
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
        self.with_agent(call, |core, st, d| {
            let Some(id) = d.conn else {
                return Err(Error::InvalidState {
                    call,
                    state: d.state,
                });
            };
            d.state = f(st, core.now(), id, d.state)?;
            Ok(())
        })
    }

    /// Runs `f` on the id's agent and the id, both locked (in that order), then has the
    /// agent send what `f` queued; `call` names the librdmacm call of an id bound to no
    /// device.
    fn with_agent<T>(
        &self,
        call: &'static str,
        f: impl FnOnce(&Core, &mut AgentState, &mut IdData) -> Result<T>,
    ) -> Result<T> {
        let Some(agent) = self.agent() else {
            return Err(Error::InvalidState {
                call,
                state: self.state(),
            });
        };
        let core = &agent.core;
        let mut st = lock(&core.state);
        let r = f(core, &mut st, &mut self.data())?;
        st.collect_tx();
        core.kick();
        Ok(r)
    }

    /// Queues an event of this id. It takes the handle (and `listen_id`): the agent thread
    /// keeps no handle of an id once its event is queued, so the consumer's drop of the id
    /// is the last, and an agent stopping with it is joined there (its last MADs out and
    /// its device closed before the consumer goes on, e.g. exits).
    fn event(self, kind: EventKind, listen_id: Option<CmId>, status: i32, param: ConnParam) {
        self.channel().push(CmEvent {
            kind,
            id: self,
            listen_id,
            status,
            param,
            ud: None,
        });
    }

    /// An event of a UD id, with its `param.ud` (taking the handle, as [`CmId::event`]).
    fn event_ud(self, kind: EventKind, listen_id: Option<CmId>, status: i32, ud: UdParam) {
        self.channel().push(CmEvent {
            kind,
            id: self,
            listen_id,
            status,
            param: ConnParam::default(),
            ud: Some(ud),
        });
    }
}

/// RTR and RTS of `qp` towards `peer`'s QP (`dest`: its QPN, the first PSN `qp` expects
/// from it, the path MTU).
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
    let mtu = Mtu::from_code(path_mtu).map_or(local_mtu, |m| m.min(local_mtu));
    let sgid_index = sgid_index(ctx);
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

/// The port spaces whose ids carry UD QPs (librdmacm's `ucma_is_ud_qp` of their QP type).
fn is_ud(ps: PortSpace) -> bool {
    matches!(ps, PortSpace::Udp | PortSpace::Ipoib)
}

/// `-ETIMEDOUT`: the status of an Unreachable whose retries ran out, as the kernel's.
const ETIMEDOUT: i32 = -110;

/// An ephemeral port, as the kernel picks one for an unbound id.
fn ephemeral_port() -> u16 {
    32768 + (random_u32() % 28232) as u16
}

/// The id listening on `service_id`, if its port space carries UD QPs exactly when `ud`.
fn listener(st: &AgentState, service_id: u64, ud: bool) -> Option<CmId> {
    st.listeners
        .get(&service_id)
        .and_then(std::sync::Weak::upgrade)
        .map(|inner| CmId { inner })
        .filter(|l| is_ud(l.inner.ps) == ud)
}

/// The id of a request for listener `l` (`cma_new_conn_id`, `cma_new_udp_id`): on its
/// channel, device and port space, its addresses from rdma_cm's header `hdr`, in state
/// ConnectRequest, routed the endpoint's events of connection `id`.
fn new_child(
    st: &mut AgentState,
    l: &CmId,
    id: ConnId,
    service_id: u64,
    hdr: &crate::wire::ip::IpHeader,
) -> CmId {
    let child = CmId::on(l.channel(), l.inner.ps);
    {
        let ld = l.data();
        let mut d = child.data();
        let port = port_of(service_id, l.inner.ps).unwrap_or(0);
        d.ctx = ld.ctx.clone();
        d.agent = ld.agent.clone();
        d.local = Some(SocketAddr::new(hdr.dst, port));
        d.peer = Some(SocketAddr::new(hdr.src, hdr.src_port));
        d.conn = Some(id);
        d.state = IdState::ConnectRequest;
    }
    st.routes.insert(id, Arc::downgrade(&child.inner));
    child
}

/// The index of the port's IPv4 GID (RoCE v2 over IPv4), the source GID of what the CM
/// sets up.
fn sgid_index(ctx: &Context) -> u8 {
    ctx.ipv4_gid_index()
        .and_then(|i| u8::try_from(i).ok())
        .unwrap_or(0)
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
                let split = cma::split_private_data(&req.private_data);
                // A REQ for a UD listener is refused (`cma_check_req_qp_type`).
                let (Some(l), Ok((hdr, user))) = (listener(st, req.service_id, false), split)
                else {
                    let _ = st.ep.reject(now, id, 28, &[], &[]);
                    continue;
                };
                let child = new_child(st, &l, id, req.service_id, &hdr);
                child.data().req = Some(req.clone());
                // From this side's view, as `cm_format_req_event`: the READs the peer
                // issues are ours to serve, and the other way round.
                let param = peer_param(user, req.initiator_depth, req.responder_resources);
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
                    c.event(EventKind::ConnectError, None, -1, ConnParam::default());
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
                    c.event(EventKind::Rejected, None, i32::from(rej.reason), p);
                }
                if st.ep.state(id).is_none() {
                    st.routes.remove(&id);
                }
            }
            Event::Unreachable { id } => {
                if let Some(c) = upgrade(st, id) {
                    c.data().state = IdState::Failed;
                    c.event(
                        EventKind::Unreachable,
                        None,
                        ETIMEDOUT,
                        ConnParam::default(),
                    );
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
            Event::SidrRequest { id, from, req } => ud::on_request(st, now, id, from, &req),
            Event::SidrReply { id, rep } => ud::on_reply(core, st, id, &rep),
            Event::MraReceived { .. } => {}
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
    let psns = cma::qp_psns(d.psn, rep.starting_psn);
    ready_qp(
        &core.ctx,
        &qp,
        peer,
        (rep.local_qpn, psns.rq_psn, route.path_mtu),
        RtsAttr {
            sq_psn: psns.sq_psn,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const T: Duration = Duration::from_secs(20);

    fn expect(ch: &EventChannel, kind: EventKind) -> CmEvent {
        let ev = ch.get_event(Some(T)).unwrap().expect("an event in time");
        assert_eq!(ev.kind, kind, "{ev:?}");
        ev
    }

    /// Each QP expects the PSN its own side's REQ or REP carried and sends from the peer's,
    /// as Linux's CM sets them up (`cma::qp_psns`): a kernel peer sending from the PSN
    /// rnic's REP announced, or expecting the one rnic's REQ announced, gets its packets
    /// through (with the PSNs the other way round, rxe took rnic's first SEND for a
    /// duplicate and re-ACKed it until the retries ran out).
    #[test]
    fn the_qps_expect_their_own_starting_psn_and_send_from_the_peers() {
        let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
        let listener = CmId::new(&sch, PortSpace::Tcp);
        listener
            .bind_addr("192.0.2.2:7190".parse().unwrap())
            .unwrap();
        listener.listen(1).unwrap();
        let client = CmId::new(&cch, PortSpace::Tcp);
        client
            .resolve_addr(
                Some("192.0.2.1:0".parse().unwrap()),
                "192.0.2.2:7190".parse().unwrap(),
                T,
            )
            .unwrap();
        expect(&cch, EventKind::AddrResolved);
        client.resolve_route(T).unwrap();
        expect(&cch, EventKind::RouteResolved);
        let cctx = client.context().unwrap();
        let (cpd, ccq) = (cctx.alloc_pd().unwrap(), cctx.create_cq(4, None).unwrap());
        let cqp = client
            .create_qp(&cpd, &ccq, &ccq, QpCap::default())
            .unwrap();
        client.connect(&ConnParam::default()).unwrap();
        let child = expect(&sch, EventKind::ConnectRequest).id;
        let sctx = child.context().unwrap();
        let (spd, scq) = (sctx.alloc_pd().unwrap(), sctx.create_cq(4, None).unwrap());
        let sqp = child.create_qp(&spd, &scq, &scq, QpCap::default()).unwrap();
        // The REQ's Starting PSN is the client id's psn, the REP's the child's.
        let (req_psn, rep_psn) = (client.data().psn, child.data().psn);
        assert_ne!(req_psn, rep_psn);
        assert_eq!(child.data().req.as_ref().unwrap().starting_psn, req_psn);
        child.accept(&ConnParam::default()).unwrap();
        expect(&cch, EventKind::Established);
        expect(&sch, EventKind::Established);
        let (c, s) = (cqp.query().unwrap(), sqp.query().unwrap());
        assert_eq!((c.rq_psn, c.sq_psn), (req_psn, rep_psn), "active side");
        assert_eq!((s.rq_psn, s.sq_psn), (rep_psn, req_psn), "passive side");
    }
}
