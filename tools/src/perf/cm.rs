//! `-R` (perftest's `--rdma_cm`): the connection manager in place of the TCP socket, as
//! perftest does it (4.5 and 25.01 alike; `src/perftest_communication.c`,
//! `src/perftest_resources.c`):
//!
//! 1. **The comm QP** (`create_comm_struct`, `establish_connection`, `rdma_client_connect`,
//!    `rdma_server_connect`): an RC QP that rdma_cm connects on the test's port (`-p`,
//!    18515 by default, TCP port space) before anything else, with no private data, no
//!    RDMA READ depths (responder resources and initiator depth 0), 7 retries, RNR retries
//!    for ever and the ACK timeout option at 14 (`--qp-timeout`); each side posts its one
//!    receive before it connects or accepts, and the server does not wait for the RTU.
//!    Every exchange perftest otherwise makes over TCP (versions, system data, MTU, the
//!    parameter negotiation, the QP messages and the hand shakes made of them, the reports)
//!    is a SEND on it, in TCP's order: the client sends and then waits, the server waits
//!    and then sends (`ctx_xchg_data_rdma`; `rdma_write_data`: post, wait for the send's
//!    completion; `rdma_read_data`: take the receive, post it again).
//! 2. **The QP message** is binary there (`rdma_write_keys`, `rdma_read_keys`):
//!    `struct pingpong_dest` with every integer big-endian, 56 bytes (64 from perftest 6.29,
//!    whose struct adds `tail_markers_vaddr`): the remote buffer's address and rkey still
//!    travel in it ([`super::protocol::PerfDest::encode_binary`]).
//! 3. **The test QPs** (`create_rdma_cm_connection`): a hand shake, then one rdma_cm
//!    connection per QP on the same port: the client resolves the address, sets the ACK
//!    timeout option (RC), resolves the route, creates the QP on the id and connects with
//!    READ depths of `--outs` for READ and atomic tests (0 otherwise), retry and RNR retry
//!    7, no private data of its own; the server accepts each request in arrival order,
//!    its depths clamped to the peer's; then another hand shake. The CM moves the QPs to
//!    RTS: no `ctx_connect`. perftest's client resolves all its ids at once and starts over
//!    up to 10 times (100 ms apart) when a connection fails (the server may not listen
//!    yet); rnic's connects them one after another, which the server cannot tell apart, and
//!    starts over the same way.
//! 4. **The end** (`destroy_ctx`, `rdma_cm_disconnect_nodes`): the server disconnects every
//!    test QP (DREQ), both sides wait for each one's DISCONNECTED event (the client
//!    answers each DREQ with its DREP); the comm QP's connection ends with the process.
//!
//! Where rnic differs without changing the wire: its server keeps the comm QP's listening id
//! for the test QPs' requests (perftest destroys it and listens again after the first hand
//! shake, so an early REQ finds nobody and is rejected; rnic's queues it), and its client
//! retries a comm connection the server rejected for want of a listener until
//! `--timeout` (perftest fails at once), as rnic's TCP client retries a refused socket.

use super::protocol::{MAX_CM_MSG, MsgLink};
use super::res::Res;
use super::{PerfConfig, Verb};
use crate::cm::{self, CmId, ConnParam, EventChannel, EventKind, PortSpace};
use crate::error::ToolError;
use crate::rdma;
use rnic_verbs::{
    AccessFlags, CompletionQueue, MemoryRegion, ProtectionDomain, QpCap, QueuePair, RecvWr, SendWr,
    WcOpcode, WcStatus, WorkCompletion,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// perftest's `--retry_count` default (`DEF_RETRY_COUNT`).
pub const RETRY_COUNT: u8 = 7;
/// `rdma_resolve_addr` / `rdma_resolve_route`'s 2000 ms in perftest.
const RESOLVE: Duration = Duration::from_millis(2000);
/// perftest's client tries the test QPs' connections this often, this far apart.
const CONNECT_TRIES: u32 = 10;
const CONNECT_PAUSE: Duration = Duration::from_millis(100);
/// The REJ reason of a REQ nobody listens for (`IB_CM_REJ_INVALID_SERVICE_ID`).
const REJ_INVALID_SERVICE_ID: i32 = 8;

const WR_RECV: u64 = 1;
const WR_SEND: u64 = 2;

/// perftest's comm QP: the RC connection that carries the exchanges as SENDs.
pub struct CommQp {
    ch: EventChannel,
    /// The client's id, or the server's accepted one.
    id: CmId,
    /// The server's listening id, kept for the test QPs' requests.
    _listener: Option<CmId>,
    qp: Arc<QueuePair>,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    /// `[0, MAX_CM_MSG)` receives, `[MAX_CM_MSG, 2 x MAX_CM_MSG)` sends.
    mr: MemoryRegion,
    _pd: ProtectionDomain,
}

/// How one attempt at a connection ended.
enum Attempt<T> {
    Made(T),
    /// The peer's CM rejected it for want of a listener (not yet): worth another go.
    Rejected(String),
}

/// The text of an error event, as librdmacm names it.
fn event_text(ev: &cm::CmEvent) -> String {
    format!("{} (status {})", ev.kind.as_str(), cm::status(ev))
}

/// Waits for `want` on `ch` for `id`: an error event of the id ends the wait (returned);
/// its other events and other ids' are passed over.
fn expect(
    ch: &EventChannel,
    id: &CmId,
    want: EventKind,
    deadline: Instant,
    what: &str,
) -> Result<Result<(), cm::CmEvent>, ToolError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = cm::next_event(ch, Some(left), what)?;
        let mine = match (cm::qpn_of(&ev.id), cm::qpn_of(id)) {
            (Some(a), Some(b)) => a == b,
            // Before the QP exists: the id's address resolution; one id resolves at a time.
            _ => ev.id.local_addr() == id.local_addr(),
        };
        if !mine {
            continue;
        }
        if ev.kind == want {
            return Ok(Ok(()));
        }
        if cm::is_error(ev.kind) {
            return Ok(Err(ev));
        }
        log::debug!("rdma_cm: {} while waiting for {what}", ev.kind.as_str());
    }
}

/// Resolves `id`'s address and route from `src` to `dst` (with the ACK timeout option,
/// `-u`, set once the address is resolved, as perftest's `rdma_cm_address_handler` does).
fn resolve(
    ch: &EventChannel,
    id: &CmId,
    (src, dst): (Ipv4Addr, SocketAddr),
    qp_timeout: u8,
    deadline: Instant,
) -> Result<Result<(), cm::CmEvent>, ToolError> {
    id.resolve_addr(Some(SocketAddr::new(IpAddr::V4(src), 0)), dst, RESOLVE)
        .map_err(cm::cm_err)?;
    if let Err(ev) = expect(
        ch,
        id,
        EventKind::AddrResolved,
        deadline,
        "rdma_resolve_addr",
    )? {
        return Ok(Err(ev));
    }
    id.set_ack_timeout(qp_timeout).map_err(cm::cm_err)?;
    id.resolve_route(RESOLVE).map_err(cm::cm_err)?;
    expect(
        ch,
        id,
        EventKind::RouteResolved,
        deadline,
        "rdma_resolve_route",
    )
}

/// The comm QP's connection parameters: no READs, perftest's retries.
fn comm_param() -> ConnParam {
    ConnParam {
        retry_count: RETRY_COUNT,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

impl CommQp {
    /// The PD, CQs, buffer and QP of a comm QP on `id`, its one receive posted.
    fn create(ch: EventChannel, id: CmId, listener: Option<CmId>) -> Result<CommQp, ToolError> {
        let ctx = id
            .context()
            .ok_or_else(|| ToolError::Verbs("rdma_cm: the id has no device".into()))?;
        let pd = ctx.alloc_pd().map_err(rdma::verr)?;
        let send_cq = ctx.create_cq(4, None).map_err(rdma::verr)?;
        let recv_cq = ctx.create_cq(4, None).map_err(rdma::verr)?;
        // perftest's comm context: TX and RX depth 1, no inline data.
        let cap = QpCap {
            max_send_wr: 1,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let qp = id
            .create_qp(&pd, &send_cq, &recv_cq, cap)
            .map_err(cm::cm_err)?;
        let mr = pd
            .reg_mr(2 * MAX_CM_MSG, AccessFlags::LOCAL_WRITE)
            .map_err(rdma::verr)?;
        let c = CommQp {
            ch,
            id,
            _listener: listener,
            qp,
            send_cq,
            recv_cq,
            mr,
            _pd: pd,
        };
        c.post_recv()?;
        Ok(c)
    }

    fn post_recv(&self) -> Result<(), ToolError> {
        let sge = self.mr.sge(0, MAX_CM_MSG as u32).map_err(rdma::verr)?;
        self.qp
            .post_recv(&[RecvWr::new(WR_RECV, &[sge])])
            .map_err(rdma::verr)
    }

    /// The client's side (`rdma_client_connect`): connects from `src` (this device's
    /// address) to the server at `dst`. A rejection (the server does not listen yet) is
    /// tried again until `timeout`. `qp_timeout` is the QP's ACK timeout (`-u`).
    pub fn connect(
        src: Ipv4Addr,
        dst: SocketAddr,
        qp_timeout: u8,
        timeout: Duration,
    ) -> Result<CommQp, ToolError> {
        let deadline = Instant::now() + timeout;
        loop {
            match Self::try_connect(src, dst, qp_timeout, deadline)? {
                Attempt::Made(c) => return Ok(c),
                Attempt::Rejected(why) if Instant::now() + CONNECT_PAUSE < deadline => {
                    log::info!("rdma_cm: the comm QP's connection to {dst}: {why}; again");
                    std::thread::sleep(CONNECT_PAUSE);
                }
                Attempt::Rejected(why) => {
                    return Err(ToolError::Connect(dst.to_string(), why));
                }
            }
        }
    }

    fn try_connect(
        src: Ipv4Addr,
        dst: SocketAddr,
        qp_timeout: u8,
        deadline: Instant,
    ) -> Result<Attempt<CommQp>, ToolError> {
        let ch = EventChannel::new().map_err(cm::cm_err)?;
        let id = CmId::new(&ch, PortSpace::Tcp);
        if let Err(ev) = resolve(&ch, &id, (src, dst), qp_timeout, deadline)? {
            return Err(ToolError::Connect(dst.to_string(), event_text(&ev)));
        }
        let c = CommQp::create(ch, id, None)?;
        c.id.connect(&comm_param()).map_err(cm::cm_err)?;
        match expect(
            &c.ch,
            &c.id,
            EventKind::Established,
            deadline,
            "the comm QP's REP",
        )? {
            Ok(()) => Ok(Attempt::Made(c)),
            Err(ev) if ev.kind == EventKind::Rejected && ev.status == REJ_INVALID_SERVICE_ID => {
                Ok(Attempt::Rejected(event_text(&ev)))
            }
            Err(ev) => Err(ToolError::Connect(dst.to_string(), event_text(&ev))),
        }
    }

    /// The server's side (`rdma_server_connect`): listens on `addr` (this device's address
    /// and the test's port, backlog `backlog`) and accepts the first request, its QP with
    /// ACK timeout `qp_timeout` (`-u`).
    pub fn accept(
        addr: SocketAddr,
        backlog: u32,
        qp_timeout: u8,
        timeout: Duration,
    ) -> Result<CommQp, ToolError> {
        let ch = EventChannel::new().map_err(cm::cm_err)?;
        let listener = CmId::new(&ch, PortSpace::Tcp);
        listener.bind_addr(addr).map_err(cm::cm_err)?;
        match listener.listen(i32::try_from(backlog).unwrap_or(i32::MAX)) {
            Ok(()) => {}
            Err(rnic_cm::rdma_cm::Error::AddrInUse(_)) => {
                return Err(ToolError::AddressInUse(addr.port()));
            }
            Err(e) => return Err(cm::cm_err(e)),
        }
        let req = loop {
            let ev = cm::next_event(&ch, Some(timeout), "the client's rdma_cm connection")?;
            if ev.kind == EventKind::ConnectRequest {
                break ev;
            }
        };
        let child = req.id.clone();
        let c = CommQp::create(ch, child, Some(listener)).inspect_err(|_| {
            let _ = req.id.reject(&[]);
        })?;
        c.id.set_ack_timeout(qp_timeout).map_err(cm::cm_err)?;
        c.id.accept(&comm_param()).map_err(cm::cm_err)?;
        Ok(c)
    }

    /// The channel its ids' events come on (the server's test QPs' requests too).
    pub fn channel(&self) -> &EventChannel {
        &self.ch
    }

    fn wait(
        &self,
        cq: &CompletionQueue,
        timeout: Duration,
        what: &str,
    ) -> Result<WorkCompletion, ToolError> {
        let mut wc = [WorkCompletion::default(); 1];
        if cq.poll_blocking(&mut wc, timeout).map_err(rdma::verr)? == 0 {
            return Err(ToolError::Timeout(
                timeout,
                format!("waiting for the peer ({what}, rdma_cm)"),
            ));
        }
        match wc[0].status() {
            WcStatus::Success => Ok(wc[0]),
            // The CM moved the QP to the error state: the peer disconnected.
            WcStatus::WrFlushErr => Err(ToolError::Io(format!(
                "{what}: the peer closed the rdma_cm connection"
            ))),
            _ => Err(rdma::wc_error(&wc[0], what)),
        }
    }
}

impl MsgLink for CommQp {
    /// `rdma_write_data`: SENDs `msg` and waits for its completion.
    fn send(&self, msg: &[u8], timeout: Duration, what: &str) -> Result<(), ToolError> {
        if msg.len() > MAX_CM_MSG {
            return Err(ToolError::Protocol(format!(
                "{what}: {} bytes do not fit a comm QP message",
                msg.len()
            )));
        }
        self.mr.write(MAX_CM_MSG, msg).map_err(rdma::verr)?;
        let sge = self
            .mr
            .sge(MAX_CM_MSG, msg.len() as u32)
            .map_err(rdma::verr)?;
        self.qp
            .post_send(&[SendWr::send(WR_SEND, &[sge]).signaled()])
            .map_err(rdma::verr)?;
        let wc = self.wait(&self.send_cq, timeout, what)?;
        if wc.opcode() != WcOpcode::Send {
            return Err(ToolError::Protocol(format!(
                "{what}: a {:?} completion on the comm QP's send queue",
                wc.opcode()
            )));
        }
        Ok(())
    }

    /// `rdma_read_data`: the next message the peer SENT (waiting up to `timeout`), the
    /// receive posted again.
    fn recv(&self, timeout: Duration, what: &str) -> Result<Vec<u8>, ToolError> {
        let wc = self.wait(&self.recv_cq, timeout, what)?;
        let n = wc.byte_len() as usize;
        let msg = self.mr.to_vec(0, n).map_err(rdma::verr)?;
        self.post_recv()?;
        Ok(msg)
    }
}

/// The test QPs' connections (one id per QP, in the order of `Res::qps`) and the channel
/// their events come on.
pub struct TestConns {
    ch: EventChannel,
    ids: Vec<CmId>,
}

/// The READ depths perftest asks for: `--outs` for READ and atomic tests, none otherwise.
fn depth(cfg: &PerfConfig) -> u8 {
    match cfg.verb {
        Verb::Read | Verb::Atomic => cfg.out_reads.min(255) as u8,
        _ => 0,
    }
}

/// The client's test QPs (`rdma_cm_client_connection`): each QP's connection from `src`
/// to `dst`, created on `res`'s PD and CQs; all of them again (10 tries, 100 ms apart)
/// when one is rejected.
pub fn connect_qps(
    res: &mut Res,
    cfg: &PerfConfig,
    src: Ipv4Addr,
    dst: SocketAddr,
    timeout: Duration,
) -> Result<TestConns, ToolError> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    for _ in 0..CONNECT_TRIES {
        res.qps.clear();
        let ch = EventChannel::new().map_err(cm::cm_err)?;
        let mut ids = Vec::new();
        let mut rejected = None;
        for _ in 0..cfg.qps {
            let id = CmId::new(&ch, PortSpace::Tcp);
            if let Err(ev) = resolve(&ch, &id, (src, dst), cfg.qp_timeout, deadline)? {
                return Err(ToolError::Connect(dst.to_string(), event_text(&ev)));
            }
            let qp = id
                .create_qp(&res.pd, &res.send_cq, &res.recv_cq, Res::qp_cap(cfg))
                .map_err(cm::cm_err)?;
            let param = ConnParam {
                responder_resources: depth(cfg),
                initiator_depth: depth(cfg),
                retry_count: RETRY_COUNT,
                rnr_retry_count: RETRY_COUNT,
                ..ConnParam::default()
            };
            id.connect(&param).map_err(cm::cm_err)?;
            match expect(
                &ch,
                &id,
                EventKind::Established,
                deadline,
                "a test QP's REP",
            )? {
                Ok(()) => {
                    res.qps.push(qp);
                    ids.push(id);
                }
                Err(ev) if ev.kind == EventKind::Rejected => {
                    rejected = Some(event_text(&ev));
                    break;
                }
                Err(ev) => return Err(ToolError::Connect(dst.to_string(), event_text(&ev))),
            }
        }
        match rejected {
            None => return Ok(TestConns { ch, ids }),
            Some(why) => {
                log::info!("rdma_cm: a test QP's connection to {dst}: {why}; again");
                last = why;
                drop(ids);
                std::thread::sleep(CONNECT_PAUSE);
            }
        }
    }
    res.qps.clear();
    Err(ToolError::Connect(
        dst.to_string(),
        format!("Failed to connect RDMA CM client, tried {CONNECT_TRIES} times ({last})"),
    ))
}

/// The server's test QPs (`rdma_cm_server_connection`): the first `cfg.qps` requests on
/// the comm QP's listener, each accepted with a QP on `res`'s PD and CQs, and each waited
/// for until it is established (the client's RTU taken). The CM sends no DREQ for a
/// connection it has not seen established, so a test short enough to end before the RTU was
/// taken would otherwise leave its disconnection to time out on both sides.
pub fn accept_qps(
    res: &mut Res,
    cfg: &PerfConfig,
    comm: &CommQp,
    timeout: Duration,
) -> Result<TestConns, ToolError> {
    let ch = comm.channel().clone();
    let comm_qpn = comm.qp.qp_num();
    let mut ids = Vec::new();
    res.qps.clear();
    let mut established = 0;
    while ids.len() < cfg.qps as usize || established < ids.len() {
        let ev = cm::next_event(&ch, Some(timeout), "the client's test QP connections")?;
        match ev.kind {
            EventKind::ConnectRequest if ids.len() < cfg.qps as usize => {}
            EventKind::Established => {
                let q = cm::qpn_of(&ev.id);
                if q.is_some() && res.qps.iter().any(|qp| Some(qp.qp_num()) == q) {
                    established += 1;
                }
                continue;
            }
            EventKind::Disconnected if cm::qpn_of(&ev.id) == Some(comm_qpn) => {
                return Err(ToolError::Io(
                    "the client closed the rdma_cm connection".into(),
                ));
            }
            _ => continue,
        }
        let child = ev.id.clone();
        let made = child.create_qp(&res.pd, &res.send_cq, &res.recv_cq, Res::qp_cap(cfg));
        let qp = match made {
            Ok(qp) => qp,
            Err(e) => {
                let _ = child.reject(&[]);
                return Err(cm::cm_err(e));
            }
        };
        // Clamped to what the peer offers (`rdma_cm_connection_request_handler`).
        let d = depth(cfg);
        let param = ConnParam {
            responder_resources: d.min(ev.param.initiator_depth),
            initiator_depth: d.min(ev.param.responder_resources),
            retry_count: RETRY_COUNT,
            rnr_retry_count: RETRY_COUNT,
            ..ConnParam::default()
        };
        child.set_ack_timeout(cfg.qp_timeout).map_err(cm::cm_err)?;
        child.accept(&param).map_err(cm::cm_err)?;
        res.qps.push(qp);
        ids.push(child);
    }
    Ok(TestConns { ch, ids })
}

impl TestConns {
    /// `rdma_cm_disconnect_nodes`: the server disconnects every test QP; each side waits for
    /// every one's DISCONNECTED event (the client answers each DREQ with its DREP).
    pub fn disconnect(self, server: bool, timeout: Duration) -> Result<(), ToolError> {
        let deadline = Instant::now() + timeout;
        let mut left: Vec<(u32, &CmId)> = self
            .ids
            .iter()
            .filter_map(|id| cm::qpn_of(id).map(|q| (q, id)))
            .collect();
        if server {
            for id in &self.ids {
                // A client that went first left the id disconnected: this is its DREP.
                if let Err(e) = id.disconnect() {
                    log::info!("rdma_cm: disconnecting a test QP: {e}");
                }
            }
        }
        while !left.is_empty() {
            let left_t = deadline.saturating_duration_since(Instant::now());
            let ev = cm::next_event(&self.ch, Some(left_t), "the test QPs' disconnection")?;
            if ev.kind != EventKind::Disconnected {
                continue;
            }
            let Some(q) = cm::qpn_of(&ev.id) else {
                continue;
            };
            if let Some(i) = left.iter().position(|(n, _)| *n == q) {
                let (_, id) = left.swap_remove(i);
                if !server && let Err(e) = id.disconnect() {
                    // The DREQ's sender gave up already: nothing left to answer.
                    log::info!("rdma_cm: answering a test QP's DREQ: {e}");
                }
            }
        }
        Ok(())
    }
}
