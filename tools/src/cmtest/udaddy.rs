//! `rnic udaddy`: librdmacm's `examples/udaddy.c`, UD "connections" through rdma_cm (port
//! space UDP: the service resolved with SIDR).
//!
//! On the wire and in order, per connection:
//! - both sides first check that `-S` fits one packet of the port's active MTU;
//! - client: address and route resolution (no MADs on RoCE), then per id a PD, one CQ of
//!   2 x `-C` entries, a UD QP (`-C` WRs each way, one SGE, sends unsignalled) that rdma_cm
//!   takes to RTS with Q_Key 0x01234567, a region of `-S` + 40 bytes (the GRH area), `-C`
//!   receives posted, then a SIDR REQ (no private data after rdma_cm's IP header);
//! - server: on the SIDR REQ the same resources and receives, then the SIDR REP with its
//!   QPN and the Q_Key (no event follows on the server);
//! - the client, on the SIDR REP (Established with the service's QPN, Q_Key and address),
//!   SENDs with immediate `-C` messages of `-S` bytes (immediate: its own QPN, unsignalled),
//!   then waits for as many messages back;
//! - the server waits for the client's `-C` messages; from the first it makes the address
//!   back (its GRH) and takes the QPN (its immediate) and its own QP's Q_Key, then SENDs with
//!   immediate its `-C` messages back (signalled) and waits for their completions.
//!
//! No disconnect: a UD id has no connection. The lines each side prints are the C
//! program's (stdout), its `perror` lines on stderr.

use super::{
    AddrFormat, CommonArgs, EINVAL, ENOMEM, RdmaAddr, finish, get_event, get_rdma_addr, perror,
    poll_count, preopen,
};
use crate::error::ToolError;
use crate::rdma;
use clap::Args;
use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{
    AccessFlags, AddressHandle, AhAttr, CompletionQueue, MemoryRegion, ProtectionDomain, QpCap,
    RecvWr, SendWr, WorkCompletion,
};
use std::time::Duration;

/// udaddy's port (fixed; its `-p` is the port space).
pub const PORT: u16 = 7174;
/// The GRH area in front of every UD message received (`sizeof(struct ibv_grh)`).
pub const GRH: usize = 40;
/// `rdma_resolve_addr` / `rdma_resolve_route`'s timeout in udaddy (2000 ms).
const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

/// `rnic udaddy`'s flags: udaddy's (`s:b:c:C:S:t:p:P:f:`) and rnic's.
#[derive(Debug, Clone, Args)]
pub struct UdaddyArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: CommonArgs,
    /// Port space by number, for backwards compatibility: 0x111 for UDP (the default), 0x2
    /// for IPoIB.
    #[arg(short = 'p', value_name = "port_space", value_parser = super::parse_c_long)]
    pub port_space_number: Option<i64>,
    /// Port space: udp (the default) or ipoib.
    #[arg(short = 'P', value_name = "port_space")]
    pub port_space: Option<String>,
}

/// One connection's resources (`struct cmatest_node`).
#[derive(Default)]
struct Node {
    id: Option<CmId>,
    connected: bool,
    pd: Option<ProtectionDomain>,
    cq: Option<CompletionQueue>,
    mr: Option<MemoryRegion>,
    ah: Option<AddressHandle>,
    remote_qpn: u32,
    remote_qkey: u32,
}

/// The test's state (`struct cmatest`) and flags.
struct Test<'a> {
    a: &'a CommonArgs,
    channel: EventChannel,
    nodes: Vec<Node>,
    conn_index: usize,
    connects_left: i64,
    count: u32,
    rai: RdmaAddr,
    wait: Duration,
}

/// The port space of the flags, as udaddy reads them (`-P` after `-p` wins, being read
/// later only when given later; rnic reads `-P` over `-p`).
fn port_space(a: &UdaddyArgs) -> Result<PortSpace, ToolError> {
    if let Some(p) = a.port_space.as_deref() {
        let starts = |w: &str| p.len() >= w.len() && p[..w.len()].eq_ignore_ascii_case(w);
        if starts("ipoib") {
            return Ok(PortSpace::Ipoib);
        }
        if !starts("udp") {
            eprintln!("Warning: unknown port space format");
        }
        return Ok(PortSpace::Udp);
    }
    match a.port_space_number {
        None | Some(0x0111) => Ok(PortSpace::Udp),
        Some(0x0002) => Ok(PortSpace::Ipoib),
        Some(n) => Err(ToolError::Usage(format!(
            "udaddy: port space {n:#x} carries no UD QPs (RDMA_PS_UDP {:#x} or RDMA_PS_IPOIB {:#x})",
            PortSpace::Udp.raw(),
            PortSpace::Ipoib.raw()
        ))),
    }
}

/// Runs udaddy as a client (`-s`) or a server; the exit status is its return value.
pub fn main(a: &UdaddyArgs) -> Result<(), ToolError> {
    let ps = port_space(a)?;
    let format = AddrFormat::from_flag(a.common.address_format.as_deref());
    let channel = EventChannel::new().map_err(|e| ToolError::Io(e.to_string()))?;
    let c = &a.common;
    let mut t = Test {
        a: c,
        channel,
        nodes: (0..c.connections).map(|_| Node::default()).collect(),
        conn_index: 0,
        connects_left: i64::from(c.connections),
        count: c.message_count,
        rai: RdmaAddr {
            src: None,
            dst: None,
        },
        wait: Duration::from_secs(c.timeout),
    };
    let client = c.server.is_some();
    if client {
        for n in &mut t.nodes {
            n.id = Some(CmId::new(&t.channel, ps));
        }
    }
    let ret = if client {
        run_client(&mut t, format)?
    } else {
        run_server(&mut t, ps, format)?
    };
    println!("test complete");
    // destroy_nodes: AH, QP, CQ, region, PD, then the id.
    t.nodes.clear();
    finish(ret)
}

impl Test<'_> {
    fn connect_error(&mut self) {
        self.connects_left -= 1;
    }

    fn node_of(&self, id: &CmId) -> Option<usize> {
        self.nodes.iter().position(|n| n.id.as_ref() == Some(id))
    }

    /// `verify_test_params`: one message must fit one packet.
    fn verify_test_params(&self, i: usize) -> i32 {
        let Some(ctx) = self.nodes[i].id.as_ref().and_then(CmId::context) else {
            return -1;
        };
        let mtu = match rdma::active_mtu(&ctx) {
            Ok(m) => rdma::mtu_bytes(m),
            Err(_) => return -1,
        };
        if self.count > 0 && self.a.message_size > mtu {
            println!(
                "udaddy: message_size {} is larger than active mtu {mtu}",
                self.a.message_size
            );
            return EINVAL;
        }
        0
    }

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
                println!("udaddy: unable to allocate PD");
                log::warn!("{e}");
                return ENOMEM;
            }
        };
        let cqe = if self.count > 0 { self.count * 2 } else { 2 };
        let cq = match ctx.create_cq(cqe, None) {
            Ok(cq) => cq,
            Err(e) => {
                println!("udaddy: unable to create CQ");
                log::warn!("{e}");
                return ENOMEM;
            }
        };
        let wrs = self.count.max(1);
        let cap = QpCap {
            max_send_wr: wrs,
            max_recv_wr: wrs,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        if let Err(e) = id.create_qp(&pd, &cq, &cq, cap) {
            return perror("udaddy: unable to create QP", &e);
        }
        // create_message
        if self.a.message_size == 0 {
            self.count = 0;
        }
        let n = &mut self.nodes[i];
        if self.count > 0 {
            let len = self.a.message_size as usize + GRH;
            match pd.reg_mr(len, AccessFlags::LOCAL_WRITE) {
                Ok(mr) => n.mr = Some(mr),
                Err(e) => {
                    println!("failed to reg MR");
                    log::warn!("{e}");
                    println!("udaddy: failed to create messages: -1");
                    return -1;
                }
            }
        }
        (n.pd, n.cq) = (Some(pd), Some(cq));
        0
    }

    fn post_recvs(&self, i: usize) -> i32 {
        let n = &self.nodes[i];
        let (Some(id), Some(mr)) = (&n.id, &n.mr) else {
            return 0;
        };
        let len = self.a.message_size + GRH as u32;
        let (Some(qp), Ok(sge)) = (id.qp(), mr.sge(0, len)) else {
            return -1;
        };
        let sgl = [sge];
        for _ in 0..self.count {
            if let Err(e) = qp.post_recv(&[RecvWr::new(i as u64, &sgl)]) {
                println!("failed to post receives: -1");
                log::warn!("{e}");
                return -1;
            }
        }
        0
    }

    fn post_sends(&self, i: usize, signal: bool) -> i32 {
        let n = &self.nodes[i];
        if !n.connected || self.count == 0 {
            return 0;
        }
        let (Some(id), Some(mr), Some(ah)) = (&n.id, &n.mr, &n.ah) else {
            return 0;
        };
        let (Some(qp), Ok(sge)) = (id.qp(), mr.sge(0, self.a.message_size)) else {
            return -1;
        };
        let sgl = [sge];
        for _ in 0..self.count {
            let wr = SendWr::send_with_imm(i as u64, &sgl, qp.qp_num()).ud(
                ah,
                n.remote_qpn,
                n.remote_qkey,
            );
            let wr = if signal { wr.signaled() } else { wr };
            if let Err(e) = qp.post_send(&[wr]) {
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
        if let Some(tos) = self.a.tos {
            id.set_tos(tos);
        }
        if let Err(e) = id.resolve_route(RESOLVE_TIMEOUT) {
            self.connect_error();
            return perror("udaddy: resolve route failed", &e);
        }
        0
    }

    fn route_handler(&mut self, i: usize) -> i32 {
        let mut ret = self.verify_test_params(i);
        if ret == 0 {
            ret = self.init_node(i);
        }
        if ret == 0 {
            ret = self.post_recvs(i);
        }
        if ret == 0
            && let Some(id) = &self.nodes[i].id
            && let Err(e) = id.connect(&ConnParam::default())
        {
            ret = perror("udaddy: failure connecting", &e);
        }
        if ret != 0 {
            self.connect_error();
        }
        ret
    }

    fn connect_handler(&mut self, ev: &CmEvent) -> i32 {
        let id = ev.id.clone();
        let fail = |ret: i32| {
            println!("udaddy: failing connection request");
            let _ = id.reject(&[]);
            ret
        };
        if self.conn_index == self.nodes.len() {
            return fail(ENOMEM);
        }
        let i = self.conn_index;
        self.conn_index += 1;
        self.nodes[i].id = Some(id.clone());
        let mut ret = self.verify_test_params(i);
        if ret == 0 {
            ret = self.init_node(i);
        }
        if ret == 0 {
            ret = self.post_recvs(i);
        }
        if ret == 0 {
            let param = ConnParam {
                qp_num: id.qp().map_or(0, |q| q.qp_num()),
                ..ConnParam::default()
            };
            if let Err(e) = id.accept(&param) {
                ret = perror("udaddy: failure accepting", &e);
            }
        }
        if ret != 0 {
            self.nodes[i].id = None;
            self.connect_error();
            return fail(ret);
        }
        self.nodes[i].connected = true;
        self.connects_left -= 1;
        0
    }

    /// `resolved_handler`: the service's QPN, Q_Key and an address handle to it.
    fn resolved_handler(&mut self, i: usize, ev: &CmEvent) -> i32 {
        let n = &mut self.nodes[i];
        let ud = ev.ud.as_ref();
        (n.remote_qpn, n.remote_qkey) = ud.map_or((0, 0), |u| (u.qp_num, u.qkey));
        let ah = match (&n.pd, ud.and_then(|u| u.ah_attr)) {
            (Some(pd), Some(attr)) => pd.create_ah(&attr).map_err(|e| log::warn!("{e}")).ok(),
            _ => None,
        };
        let Some(ah) = ah else {
            println!("udaddy: failure creating address handle");
            self.connect_error();
            return -1;
        };
        n.ah = Some(ah);
        n.connected = true;
        self.connects_left -= 1;
        0
    }

    /// `cma_handler`: one event.
    fn handle(&mut self, ev: &CmEvent) -> i32 {
        let node = self.node_of(&ev.id);
        match ev.kind {
            EventKind::AddrResolved => node.map_or(-1, |i| self.addr_handler(i)),
            EventKind::RouteResolved => node.map_or(-1, |i| self.route_handler(i)),
            EventKind::ConnectRequest => self.connect_handler(ev),
            EventKind::Established => node.map_or(-1, |i| self.resolved_handler(i, ev)),
            EventKind::AddrError
            | EventKind::ConnectError
            | EventKind::Unreachable
            | EventKind::Rejected => {
                println!("udaddy: event: {}, error: {}", ev.kind, ev.status);
                self.connect_error();
                ev.status
            }
            EventKind::Disconnected | EventKind::TimewaitExit => 0,
        }
    }

    fn connect_events(&mut self, peer_acts: bool) -> i32 {
        let mut ret = 0;
        while self.connects_left > 0 && ret == 0 {
            let wait = peer_acts.then_some(self.wait);
            match get_event(&self.channel, wait) {
                Ok(ev) => ret = self.handle(&ev),
                Err(errno) => {
                    eprintln!("udaddy: rdma_get_cm_event: {}", super::strerror(errno));
                    ret = errno;
                }
            }
        }
        ret
    }

    /// `create_reply_ah`: the address back from the GRH of what came in, the QPN from its
    /// immediate, the Q_Key of our own QP.
    fn create_reply_ah(n: &mut Node, wc: &WorkCompletion) -> i32 {
        let (Some(id), Some(pd), Some(mr)) = (&n.id, &n.pd, &n.mr) else {
            return -1;
        };
        let (Some(ctx), Some(qp)) = (id.context(), id.qp()) else {
            return -1;
        };
        let attr = match mr.to_vec(0, GRH).map(|grh| AhAttr::from_grh(&ctx, &grh)) {
            Ok(Ok(a)) => a,
            Ok(Err(e)) | Err(e) => {
                log::warn!("{e}");
                return -1;
            }
        };
        let (Ok(ah), Ok(q)) = (pd.create_ah(&attr), qp.query()) else {
            return -1;
        };
        n.ah = Some(ah);
        n.remote_qpn = wc.imm_data().unwrap_or(wc.src_qp());
        n.remote_qkey = q.qkey;
        0
    }

    fn poll_cqs(&mut self) -> i32 {
        let (count, wait) = (self.count, self.wait);
        for n in self.nodes.iter_mut().filter(|n| n.connected) {
            let Some(cq) = n.cq.clone() else {
                continue;
            };
            let need_ah = n.ah.is_none();
            let r = poll_count(&cq, count, wait, |wc| {
                if need_ah && Self::create_reply_ah(n, wc) != 0 {
                    println!("udaddy: failed to create reply AH");
                    return Err(-1);
                }
                Ok(())
            });
            match r {
                Ok(()) => {}
                Err(-1) => return -1,
                Err(ret) => {
                    println!("udaddy: failed polling CQ: {ret}");
                    return ret;
                }
            }
        }
        0
    }
}

fn run_server(t: &mut Test<'_>, ps: PortSpace, format: AddrFormat) -> Result<i32, ToolError> {
    println!("udaddy: starting server");
    let listen_id = CmId::new(&t.channel, ps);
    t.rai = match get_rdma_addr(t.a, PORT, format, "udaddy") {
        Ok(r) => r,
        Err(ret) => return Ok(ret),
    };
    let _dev = preopen(&t.a.emu, t.rai.src, None)?;
    let Some(src) = t.rai.src else {
        return Ok(-1);
    };
    if let Err(e) = listen_id.bind_addr(src) {
        return Ok(perror("udaddy: bind address failed", &e));
    }
    if let Err(e) = listen_id.listen(0) {
        return Ok(perror("udaddy: failure trying to listen", &e));
    }
    // udaddy ignores what its connect events return; rnic's timeout (no client in time)
    // ends the run instead of going on with no connection.
    let ret = t.connect_events(true);
    if ret == super::ETIMEDOUT {
        return Ok(ret);
    }
    if t.count > 0 {
        println!("receiving data transfers");
        let ret = t.poll_cqs();
        if ret != 0 {
            return Ok(ret);
        }
        println!("sending replies");
        for i in 0..t.nodes.len() {
            let ret = t.post_sends(i, true);
            if ret != 0 {
                return Ok(ret);
            }
        }
        let ret = t.poll_cqs();
        if ret != 0 {
            return Ok(ret);
        }
        println!("data transfers complete");
    }
    Ok(0)
}

fn run_client(t: &mut Test<'_>, format: AddrFormat) -> Result<i32, ToolError> {
    println!("udaddy: starting client");
    t.rai = match get_rdma_addr(t.a, PORT, format, "udaddy") {
        Ok(r) => r,
        Err(ret) => return Ok(ret),
    };
    let _dev = preopen(&t.a.emu, t.rai.src, t.rai.dst)?;
    let Some(dst) = t.rai.dst else {
        return Ok(-1);
    };
    println!("udaddy: connecting");
    for i in 0..t.nodes.len() {
        let Some(id) = t.nodes[i].id.clone() else {
            continue;
        };
        if let Err(e) = id.resolve_addr(t.rai.src, dst, RESOLVE_TIMEOUT) {
            t.connect_error();
            return Ok(perror("udaddy: failure getting addr", &e));
        }
    }
    // The CM ends every SIDR request (answered, or unreachable after its retries).
    let ret = t.connect_events(false);
    if ret != 0 {
        return Ok(ret);
    }
    if t.count > 0 {
        println!("initiating data transfers");
        for i in 0..t.nodes.len() {
            let ret = t.post_sends(i, false);
            if ret != 0 {
                return Ok(ret);
            }
        }
        println!("receiving data transfers");
        let ret = t.poll_cqs();
        if ret != 0 {
            return Ok(ret);
        }
        println!("data transfers complete");
    }
    Ok(0)
}
