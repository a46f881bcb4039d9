//! `rnic cmatose`: librdmacm's `examples/cmatose.c` (`ucmatose`), RC connections through
//! rdma_cm.
//!
//! On the wire and in order, per connection:
//! - client: address and route resolution (no MADs on RoCE), then per id a PD, a send and a
//!   receive CQ of `-C` entries, an RC QP (`-C` WRs each way, one SGE, every send signalled)
//!   and a region of `-S` bytes; `-C` receives posted; a REQ with responder resources 1,
//!   initiator depth 1, retry count 5, RNR retry count 0 and no private data;
//! - server: on the REQ the same resources and receives, then the REP (`rdma_accept` with no
//!   parameters: responder resources and initiator depth the REQ asked for, within the
//!   device's limits, RNR retry count 7); the client's RTU establishes both;
//! - once every connection is established the server SENDs `-C` messages of `-S` bytes on
//!   each, waits for their completions, then for the client's `-C` messages;
//! - the client waits for the server's messages, then SENDs its `-C` back (not waiting for
//!   their completions) and waits for the disconnect;
//! - the server sends the DREQ of each connection; the client answers with the DREP; both
//!   end (the server on the DREP, the client on the DREQ).
//!
//! The lines each side prints are the C program's (stdout), its `perror` lines on stderr.

use super::{
    AddrFormat, CommonArgs, ENOMEM, RdmaAddr, finish, get_event, get_rdma_addr, perror, poll_count,
    preopen,
};
use crate::error::ToolError;
use clap::Args;
use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{AccessFlags, CompletionQueue, MemoryRegion, ProtectionDomain, QpCap, SendWr};
use std::time::Duration;

/// cmatose's default port.
pub const DEFAULT_PORT: u16 = 7471;
/// `rdma_resolve_addr` / `rdma_resolve_route`'s timeout in cmatose (2000 ms).
const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

/// `rnic cmatose`'s flags: cmatose's (`s:b:f:P:c:C:S:t:p:a:m`) and rnic's.
#[derive(Debug, Clone, Args)]
pub struct CmatoseArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: CommonArgs,
    /// Port space: tcp (RDMA_PS_TCP, the default) or ib (RDMA_PS_IB).
    #[arg(short = 'P', value_name = "port_space")]
    pub port_space: Option<String>,
    /// Port number.
    #[arg(short = 'p', value_name = "port_number", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Move the ids to a new event channel before disconnecting (rdma_migrate_id).
    #[arg(short = 'm')]
    pub migrate: bool,
    /// The QPs' local ACK timeout, encoded (4.096 us x 2^t; RDMA_OPTION_ID_ACK_TIMEOUT).
    #[arg(short = 'a', value_name = "ack_timeout", value_parser = super::parse_c_u8)]
    pub ack_timeout: Option<u8>,
}

/// One connection's resources (`struct cmatest_node`).
#[derive(Default)]
struct Node {
    id: Option<CmId>,
    connected: bool,
    pd: Option<ProtectionDomain>,
    /// Send, then receive CQ.
    cq: Option<[CompletionQueue; 2]>,
    mr: Option<MemoryRegion>,
}

/// The test's state (`struct cmatest`) and flags.
struct Test<'a> {
    a: &'a CmatoseArgs,
    channel: EventChannel,
    nodes: Vec<Node>,
    conn_index: usize,
    connects_left: i64,
    disconnects_left: i64,
    /// `message_count`, which a zero `-S` turns to 0 (`create_message`).
    count: u32,
    rai: RdmaAddr,
    ps: PortSpace,
    wait: Duration,
}

const SEND: usize = 0;
const RECV: usize = 1;

/// Runs cmatose as a client (`-s`) or a server; the exit status is its return value.
pub fn main(a: &CmatoseArgs) -> Result<(), ToolError> {
    let ps = match a.port_space.as_deref() {
        Some(p) if p.len() >= 2 && p[..2].eq_ignore_ascii_case("ib") => PortSpace::Ib,
        Some(p) => {
            if !(p.len() >= 3 && p[..3].eq_ignore_ascii_case("tcp")) {
                eprintln!("Warning: unknown port space format");
            }
            PortSpace::Tcp
        }
        None => PortSpace::Tcp,
    };
    let format = AddrFormat::from_flag(a.common.address_format.as_deref());
    let channel = EventChannel::new().map_err(|e| ToolError::Io(e.to_string()))?;
    let mut t = Test {
        a,
        channel,
        nodes: (0..a.common.connections).map(|_| Node::default()).collect(),
        conn_index: 0,
        connects_left: i64::from(a.common.connections),
        disconnects_left: 0,
        count: a.common.message_count,
        rai: RdmaAddr {
            src: None,
            dst: None,
        },
        ps,
        wait: Duration::from_secs(a.common.timeout),
    };
    let client = a.common.server.is_some();
    if client {
        for n in &mut t.nodes {
            n.id = Some(CmId::new(&t.channel, ps));
        }
    }
    let ret = if client {
        run_client(&mut t, format)?
    } else {
        run_server(&mut t, format)?
    };
    println!("test complete");
    // destroy_nodes: each node's QP, CQs and region, then its id.
    t.nodes.clear();
    finish(ret)
}

impl Test<'_> {
    fn name(&self) -> &'static str {
        "cmatose"
    }

    fn connect_error(&mut self) {
        self.connects_left -= 1;
    }

    fn node_of(&self, id: &CmId) -> Option<usize> {
        self.nodes.iter().position(|n| n.id.as_ref() == Some(id))
    }

    /// `init_node`: PD, two CQs, the QP through rdma_cm, the message region.
    fn init_node(&mut self, i: usize) -> i32 {
        let Some(id) = self.nodes[i].id.clone() else {
            return -1;
        };
        let Some(ctx) = id.context() else {
            return -1;
        };
        let pd = match ctx.alloc_pd() {
            Ok(pd) => pd,
            Err(e) => {
                println!("cmatose: unable to allocate PD");
                log::warn!("{e}");
                return ENOMEM;
            }
        };
        let cqe = self.count.max(1);
        let cqs = match (ctx.create_cq(cqe, None), ctx.create_cq(cqe, None)) {
            (Ok(s), Ok(r)) => [s, r],
            (Err(e), _) | (_, Err(e)) => {
                println!("cmatose: unable to create CQ");
                log::warn!("{e}");
                return ENOMEM;
            }
        };
        let cap = QpCap {
            max_send_wr: cqe,
            max_recv_wr: cqe,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        if let Err(e) = id.create_qp(&pd, &cqs[SEND], &cqs[RECV], cap) {
            return perror("cmatose: unable to create QP", &e);
        }
        // create_message
        if self.a.common.message_size == 0 {
            self.count = 0;
        }
        let n = &mut self.nodes[i];
        if self.count > 0 {
            match pd.reg_mr(
                self.a.common.message_size as usize,
                AccessFlags::LOCAL_WRITE,
            ) {
                Ok(mr) => n.mr = Some(mr),
                Err(e) => {
                    println!("failed to reg MR");
                    log::warn!("{e}");
                    println!("cmatose: failed to create messages: -1");
                    return -1;
                }
            }
        }
        (n.pd, n.cq) = (Some(pd), Some(cqs));
        0
    }

    fn post_recvs(&self, i: usize) -> i32 {
        let n = &self.nodes[i];
        let (Some(id), Some(mr)) = (&n.id, &n.mr) else {
            return 0;
        };
        let (Some(qp), Ok(sge)) = (id.qp(), mr.sge(0, self.a.common.message_size)) else {
            return -1;
        };
        let sgl = [sge];
        for _ in 0..self.count {
            if let Err(e) = qp.post_recv(&[rnic_verbs::RecvWr::new(i as u64, &sgl)]) {
                println!("failed to post receives: -1");
                log::warn!("{e}");
                return -1;
            }
        }
        0
    }

    fn post_sends(&self, i: usize) -> i32 {
        let n = &self.nodes[i];
        if !n.connected || self.count == 0 {
            return 0;
        }
        let (Some(id), Some(mr)) = (&n.id, &n.mr) else {
            return 0;
        };
        let (Some(qp), Ok(sge)) = (id.qp(), mr.sge(0, self.a.common.message_size)) else {
            return -1;
        };
        let sgl = [sge];
        for _ in 0..self.count {
            // sq_sig_all: every send signalled.
            if let Err(e) = qp.post_send(&[SendWr::send(i as u64, &sgl).signaled()]) {
                println!("failed to post sends: -1");
                log::warn!("{e}");
                return -1;
            }
        }
        0
    }

    fn addr_handler(&mut self, i: usize) -> i32 {
        let Some(id) = self.nodes[i].id.clone() else {
            return -1;
        };
        if let Some(tos) = self.a.common.tos {
            id.set_tos(tos);
        }
        if let Some(t) = self.a.ack_timeout
            && let Err(e) = id.set_ack_timeout(t)
        {
            perror("cmatose: set ack timeout option failed", &e);
        }
        if let Err(e) = id.resolve_route(RESOLVE_TIMEOUT) {
            self.connect_error();
            return perror("cmatose: resolve route failed", &e);
        }
        0
    }

    fn route_handler(&mut self, i: usize) -> i32 {
        let mut ret = self.init_node(i);
        if ret == 0 {
            ret = self.post_recvs(i);
        }
        if ret == 0 {
            let param = ConnParam {
                responder_resources: 1,
                initiator_depth: 1,
                retry_count: 5,
                ..ConnParam::default()
            };
            if let Some(id) = &self.nodes[i].id
                && let Err(e) = id.connect(&param)
            {
                ret = perror("cmatose: failure connecting", &e);
            }
        }
        if ret != 0 {
            self.connect_error();
        }
        ret
    }

    fn connect_handler(&mut self, ev: &CmEvent) -> i32 {
        let id = ev.id.clone();
        let fail = |ret: i32| {
            println!("cmatose: failing connection request");
            let _ = id.reject(&[]);
            ret
        };
        if self.conn_index == self.nodes.len() {
            return fail(ENOMEM);
        }
        let i = self.conn_index;
        self.conn_index += 1;
        self.nodes[i].id = Some(id.clone());
        let mut ret = self.init_node(i);
        if ret == 0
            && let Some(t) = self.a.ack_timeout
            && let Err(e) = id.set_ack_timeout(t)
        {
            perror("cmatose: set ack timeout option failed", &e);
        }
        if ret == 0 {
            ret = self.post_recvs(i);
        }
        if ret == 0 {
            // rdma_accept(id, NULL): what the REQ asked for, within the device's limits.
            let dev = id.context().map(|c| c.query_device());
            let cap = |v: u8, max: Option<u32>| {
                max.map_or(v, |m| v.min(u8::try_from(m).unwrap_or(u8::MAX)))
            };
            let param = ConnParam {
                responder_resources: cap(
                    ev.param.responder_resources,
                    dev.as_ref().map(|d| d.max_qp_rd_atom),
                ),
                initiator_depth: cap(
                    ev.param.initiator_depth,
                    dev.as_ref().map(|d| d.max_qp_init_rd_atom),
                ),
                retry_count: 7,
                rnr_retry_count: 7,
                ..ConnParam::default()
            };
            if let Err(e) = id.accept(&param) {
                ret = perror("cmatose: failure accepting", &e);
            }
        }
        if ret != 0 {
            self.nodes[i].id = None;
            self.connect_error();
            return fail(ret);
        }
        0
    }

    /// `cma_handler`: one event.
    fn handle(&mut self, ev: &CmEvent) -> i32 {
        let node = self.node_of(&ev.id);
        match ev.kind {
            EventKind::AddrResolved => node.map_or(-1, |i| self.addr_handler(i)),
            EventKind::RouteResolved => node.map_or(-1, |i| self.route_handler(i)),
            EventKind::ConnectRequest => self.connect_handler(ev),
            EventKind::Established => {
                if let Some(i) = node {
                    self.nodes[i].connected = true;
                }
                self.connects_left -= 1;
                self.disconnects_left += 1;
                0
            }
            EventKind::AddrError
            | EventKind::ConnectError
            | EventKind::Unreachable
            | EventKind::Rejected => {
                println!("cmatose: event: {}, error: {}", ev.kind, ev.status);
                self.connect_error();
                ev.status
            }
            EventKind::Disconnected => {
                let _ = ev.id.disconnect();
                self.disconnects_left -= 1;
                0
            }
            EventKind::TimewaitExit => 0,
        }
    }

    /// Events until every connection is made or failed; `peer_acts`: the wait is the peer's
    /// to end (a server waiting for requests), so `--timeout` bounds it.
    fn connect_events(&mut self, peer_acts: bool) -> i32 {
        let mut ret = 0;
        while self.connects_left > 0 && ret == 0 {
            let wait = peer_acts.then_some(self.wait);
            match get_event(&self.channel, wait) {
                Ok(ev) => ret = self.handle(&ev),
                Err(errno) => {
                    eprintln!(
                        "cmatose: failure in rdma_get_cm_event in connect events: {}",
                        super::strerror(errno)
                    );
                    ret = errno;
                }
            }
        }
        ret
    }

    fn disconnect_events(&mut self, peer_acts: bool) -> i32 {
        let mut ret = 0;
        while self.disconnects_left > 0 && ret == 0 {
            let wait = peer_acts.then_some(self.wait);
            match get_event(&self.channel, wait) {
                Ok(ev) => ret = self.handle(&ev),
                Err(errno) => {
                    eprintln!(
                        "cmatose: failure in rdma_get_cm_event in disconnect events: {}",
                        super::strerror(errno)
                    );
                    ret = errno;
                }
            }
        }
        ret
    }

    fn poll_cqs(&self, index: usize) -> i32 {
        for n in self.nodes.iter().filter(|n| n.connected) {
            let Some(cq) = n.cq.as_ref().map(|c| &c[index]) else {
                continue;
            };
            if let Err(ret) = poll_count(cq, self.count, self.wait, |_| Ok(())) {
                println!("{}: failed polling CQ: {ret}", self.name());
                return ret;
            }
        }
        0
    }

    fn migrate_channel(&mut self, listen_id: Option<&CmId>) -> i32 {
        println!("migrating to new event channel");
        let channel = match EventChannel::new() {
            Ok(c) => c,
            Err(e) => return perror("failed to create RDMA CM event channel", &e),
        };
        if let Some(l) = listen_id {
            l.migrate(&channel);
        }
        for id in self.nodes.iter().filter_map(|n| n.id.as_ref()) {
            id.migrate(&channel);
        }
        self.channel = channel;
        0
    }
}

fn run_server(t: &mut Test<'_>, format: AddrFormat) -> Result<i32, ToolError> {
    println!("cmatose: starting server");
    let listen_id = CmId::new(&t.channel, t.ps);
    t.rai = match get_rdma_addr(&t.a.common, t.a.port, format, "cmatose") {
        Ok(r) => r,
        Err(ret) => return Ok(ret),
    };
    let _dev = preopen(&t.a.common.emu, t.rai.src, None)?;
    let Some(src) = t.rai.src else {
        return Ok(-1);
    };
    if let Err(e) = listen_id.bind_addr(src) {
        return Ok(perror("cmatose: bind address failed", &e));
    }
    if let Err(e) = listen_id.listen(0) {
        return Ok(perror("cmatose: failure trying to listen", &e));
    }
    let ret = t.connect_events(true);
    if ret != 0 {
        return Ok(ret);
    }
    if t.count > 0 {
        println!("initiating data transfers");
        for i in 0..t.nodes.len() {
            let ret = t.post_sends(i);
            if ret != 0 {
                return Ok(ret);
            }
        }
        println!("completing sends");
        let ret = t.poll_cqs(SEND);
        if ret != 0 {
            return Ok(ret);
        }
        println!("receiving data transfers");
        let ret = t.poll_cqs(RECV);
        if ret != 0 {
            return Ok(ret);
        }
        println!("data transfers complete");
    }
    if t.a.migrate {
        let ret = t.migrate_channel(Some(&listen_id));
        if ret != 0 {
            return Ok(ret);
        }
    }
    println!("cmatose: disconnecting");
    for n in t.nodes.iter_mut().filter(|n| n.connected) {
        n.connected = false;
        if let Some(id) = &n.id {
            let _ = id.disconnect();
        }
    }
    // Our own DREQs: the CM's retries end the wait.
    let ret = t.disconnect_events(false);
    println!("disconnected");
    Ok(ret)
}

fn run_client(t: &mut Test<'_>, format: AddrFormat) -> Result<i32, ToolError> {
    println!("cmatose: starting client");
    t.rai = match get_rdma_addr(&t.a.common, t.a.port, format, "cmatose") {
        Ok(r) => r,
        Err(ret) => return Ok(ret),
    };
    let _dev = preopen(&t.a.common.emu, t.rai.src, t.rai.dst)?;
    let Some(dst) = t.rai.dst else {
        return Ok(-1);
    };
    println!("cmatose: connecting");
    for i in 0..t.nodes.len() {
        let Some(id) = t.nodes[i].id.clone() else {
            continue;
        };
        if let Err(e) = id.resolve_addr(t.rai.src, dst, RESOLVE_TIMEOUT) {
            t.connect_error();
            return Ok(perror("cmatose: failure getting addr", &e));
        }
    }
    // The CM ends every connect (established, rejected or unreachable).
    let mut ret = t.connect_events(false);
    if ret == 0 && t.count > 0 {
        println!("receiving data transfers");
        ret = t.poll_cqs(RECV);
        if ret == 0 {
            println!("sending replies");
            for i in 0..t.nodes.len() {
                ret = t.post_sends(i);
                if ret != 0 {
                    break;
                }
            }
        }
        if ret == 0 {
            println!("data transfers complete");
        }
    }
    if ret == 0 && t.a.migrate {
        ret = t.migrate_channel(None);
        if ret != 0 {
            return Ok(ret);
        }
    }
    // disc: the server's DREQ is the peer's to send.
    let ret2 = t.disconnect_events(true);
    if ret2 != 0 {
        ret = ret2;
    }
    Ok(ret)
}
