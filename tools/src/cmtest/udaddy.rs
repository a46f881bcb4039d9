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

use super::test::{Node, Test};
use super::{AddrFormat, CommonArgs, EINVAL, ENOMEM, finish, perror, poll_count};
use crate::error::ToolError;
use crate::rdma;
use clap::Args;
use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{CmEvent, CmId, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{AddressHandle, AhAttr, CompletionQueue, QpCap, SendWr, WorkCompletion};

/// udaddy's port (fixed; its `-p` is the port space).
pub const PORT: u16 = 7174;
/// The GRH area in front of every UD message received (`sizeof(struct ibv_grh)`).
pub use crate::rdma::GRH;

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

/// A node's own: its CQ, and where its peer's UD QP is.
#[derive(Default)]
struct Ud {
    cq: Option<CompletionQueue>,
    ah: Option<AddressHandle>,
    remote_qpn: u32,
    remote_qkey: u32,
}

/// The port space of the flags: `-P` by name over `-p` by number.
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
    let mut t = Test::<Ud>::new("udaddy", &a.common, ps)?;
    let ret = if a.common.server.is_some() {
        run_client(&mut t, format)?
    } else {
        run_server(&mut t, ps, format)?
    };
    println!("test complete");
    // destroy_nodes: AH, QP, CQ, region, PD, then the id.
    t.nodes.clear();
    finish(ret)
}

impl Test<'_, Ud> {
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

    /// `init_node`: PD, one CQ, the UD QP through rdma_cm, the region with its GRH area.
    fn init_node(&mut self, i: usize) -> i32 {
        let (id, ctx, pd) = match self.alloc_pd(i) {
            Ok(r) => r,
            Err(ret) => return ret,
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
        self.nodes[i].x.cq = Some(cq);
        self.create_message(i, pd, self.a.message_size as usize + GRH)
    }

    fn post_sends(&self, i: usize, signal: bool) -> i32 {
        let n = &self.nodes[i];
        if !n.connected || self.count == 0 {
            return 0;
        }
        let (Some(id), Some(mr), Some(ah)) = (&n.id, &n.mr, &n.x.ah) else {
            return 0;
        };
        let (Some(qp), Ok(sge)) = (id.qp(), mr.sge(0, self.a.message_size)) else {
            return -1;
        };
        let sgl = [sge];
        for _ in 0..self.count {
            let wr = SendWr::send_with_imm(i as u64, &sgl, qp.qp_num()).ud(
                ah,
                n.x.remote_qpn,
                n.x.remote_qkey,
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

    fn route_handler(&mut self, i: usize) -> i32 {
        let mut ret = self.verify_test_params(i);
        if ret == 0 {
            ret = self.init_node(i);
        }
        if ret == 0 {
            ret = self.post_recvs(i, self.a.message_size + GRH as u32);
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
        let id = &ev.id;
        let i = match self.take_request(id) {
            Ok(i) => i,
            Err(ret) => return ret,
        };
        let mut ret = self.verify_test_params(i);
        if ret == 0 {
            ret = self.init_node(i);
        }
        if ret == 0 {
            ret = self.post_recvs(i, self.a.message_size + GRH as u32);
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
            return self.fail_request(Some(i), id, ret);
        }
        self.nodes[i].connected = true;
        self.connects_left -= 1;
        0
    }

    /// `resolved_handler`: the service's QPN, Q_Key and an address handle to it.
    fn resolved_handler(&mut self, i: usize, ev: &CmEvent) -> i32 {
        let n = &mut self.nodes[i];
        let ud = ev.ud.as_ref();
        (n.x.remote_qpn, n.x.remote_qkey) = ud.map_or((0, 0), |u| (u.qp_num, u.qkey));
        let ah = match (&n.pd, ud.and_then(|u| u.ah_attr)) {
            (Some(pd), Some(attr)) => pd.create_ah(&attr).map_err(|e| log::warn!("{e}")).ok(),
            _ => None,
        };
        let Some(ah) = ah else {
            println!("udaddy: failure creating address handle");
            self.connect_error();
            return -1;
        };
        n.x.ah = Some(ah);
        n.connected = true;
        self.connects_left -= 1;
        0
    }

    /// `cma_handler`: one event.
    fn handle(&mut self, ev: &CmEvent) -> i32 {
        let node = self.node_of(&ev.id);
        match ev.kind {
            EventKind::AddrResolved => node.map_or(-1, |i| self.addr_handler(i, None)),
            EventKind::RouteResolved => node.map_or(-1, |i| self.route_handler(i)),
            EventKind::ConnectRequest => self.connect_handler(ev),
            EventKind::Established => node.map_or(-1, |i| self.resolved_handler(i, ev)),
            EventKind::AddrError
            | EventKind::ConnectError
            | EventKind::Unreachable
            | EventKind::Rejected => self.report(ev),
            EventKind::Disconnected | EventKind::TimewaitExit => 0,
        }
    }

    fn connect_events(&mut self, peer_acts: bool) -> i32 {
        self.events("connect", |t| t.connects_left, peer_acts, Self::handle)
    }

    /// `create_reply_ah`: the address back from the GRH of what came in, the QPN from its
    /// immediate, the Q_Key of our own QP.
    fn create_reply_ah(n: &mut Node<Ud>, wc: &WorkCompletion) -> i32 {
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
        n.x.ah = Some(ah);
        n.x.remote_qpn = wc.imm_data().unwrap_or(wc.src_qp());
        n.x.remote_qkey = q.qkey;
        0
    }

    fn poll_cqs(&mut self) -> i32 {
        let (count, wait) = (self.count, self.wait);
        for i in 0..self.nodes.len() {
            let n = &mut self.nodes[i];
            let (true, Some(cq)) = (n.connected, n.x.cq.clone()) else {
                continue;
            };
            let need_ah = n.x.ah.is_none();
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
                Err(ret) => return self.poll_failed(ret),
            }
        }
        0
    }
}

fn run_server(t: &mut Test<'_, Ud>, ps: PortSpace, format: AddrFormat) -> Result<i32, ToolError> {
    let (_listen_id, _dev) = match t.start_server(ps, PORT, format)? {
        Ok(l) => l,
        Err(ret) => return Ok(ret),
    };
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

fn run_client(t: &mut Test<'_, Ud>, format: AddrFormat) -> Result<i32, ToolError> {
    let _dev = match t.start_client(PORT, format)? {
        Ok(dev) => dev,
        Err(ret) => return Ok(ret),
    };
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
