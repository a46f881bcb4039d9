//! What cmatose and udaddy share of their state and steps (`struct cmatest`, `struct
//! cmatest_node` and the functions the two C files repeat): the nodes, the event loops,
//! starting as a client or a server, the PD and message region of a node, its receives, the
//! route step, taking or failing a connection request, reporting an error event.

use super::{AddrFormat, CommonArgs, RdmaAddr, get_event, get_rdma_addr, perror, preopen};
use crate::error::ToolError;
use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{AccessFlags, Context, MemoryRegion, ProtectionDomain, RecvWr};
use std::time::Duration;

/// `rdma_resolve_addr` / `rdma_resolve_route`'s timeout in both programs (2000 ms).
const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

/// One connection (`struct cmatest_node`): what both programs keep, and `X`, the program's
/// own (its CQs, a UD peer's address).
#[derive(Default)]
pub(crate) struct Node<X> {
    pub(crate) id: Option<CmId>,
    pub(crate) connected: bool,
    pub(crate) pd: Option<ProtectionDomain>,
    pub(crate) mr: Option<MemoryRegion>,
    pub(crate) x: X,
}

/// The test (`struct cmatest`) with its flags.
pub(crate) struct Test<'a, X> {
    /// The program's name, which starts its lines.
    pub(crate) tool: &'static str,
    pub(crate) a: &'a CommonArgs,
    pub(crate) channel: EventChannel,
    pub(crate) nodes: Vec<Node<X>>,
    pub(crate) conn_index: usize,
    pub(crate) connects_left: i64,
    pub(crate) disconnects_left: i64,
    /// `message_count`, which a zero `-S` turns to 0 (`create_message`).
    pub(crate) count: u32,
    pub(crate) rai: RdmaAddr,
    /// `--timeout`.
    pub(crate) wait: Duration,
}

impl<'a, X: Default> Test<'a, X> {
    /// `-c` nodes; a client's each get an id of `ps` on the channel (`alloc_nodes`).
    pub(crate) fn new(
        tool: &'static str,
        a: &'a CommonArgs,
        ps: PortSpace,
    ) -> Result<Self, ToolError> {
        let channel = EventChannel::new().map_err(|e| ToolError::Io(e.to_string()))?;
        let nodes = (0..a.connections)
            .map(|_| Node {
                id: a.server.is_some().then(|| CmId::new(&channel, ps)),
                ..Node::default()
            })
            .collect();
        Ok(Test {
            tool,
            a,
            channel,
            nodes,
            conn_index: 0,
            connects_left: i64::from(a.connections),
            disconnects_left: 0,
            count: a.message_count,
            rai: RdmaAddr {
                src: None,
                dst: None,
            },
            wait: Duration::from_secs(a.timeout),
        })
    }
}

impl<X> Test<'_, X> {
    pub(crate) fn connect_error(&mut self) {
        self.connects_left -= 1;
    }

    /// The node of `id`.
    pub(crate) fn node_of(&self, id: &CmId) -> Option<usize> {
        self.nodes.iter().position(|n| n.id.as_ref() == Some(id))
    }

    /// `run_client` up to its connect events: the addresses, then each id's address
    /// resolution. `Err` is the return value to end with. The device stays open while the
    /// returned context lives (with `--pcap` / `--emu-faults`).
    pub(crate) fn start_client(
        &mut self,
        port: u16,
        format: AddrFormat,
    ) -> Result<Result<Option<Context>, i32>, ToolError> {
        println!("{}: starting client", self.tool);
        self.rai = match get_rdma_addr(self.a, port, format, self.tool) {
            Ok(r) => r,
            Err(ret) => return Ok(Err(ret)),
        };
        let dev = preopen(&self.a.emu, self.rai.src, self.rai.dst)?;
        let Some(dst) = self.rai.dst else {
            return Ok(Err(-1));
        };
        println!("{}: connecting", self.tool);
        for i in 0..self.nodes.len() {
            let Some(id) = self.nodes[i].id.clone() else {
                continue;
            };
            if let Err(e) = id.resolve_addr(self.rai.src, dst, RESOLVE_TIMEOUT) {
                self.connect_error();
                return Ok(Err(perror(
                    &format!("{}: failure getting addr", self.tool),
                    &e,
                )));
            }
        }
        Ok(Ok(dev))
    }

    /// `run_server` up to its connect events: the listening id of `ps`, bound and
    /// listening. `Err` is the return value to end with.
    pub(crate) fn start_server(
        &mut self,
        ps: PortSpace,
        port: u16,
        format: AddrFormat,
    ) -> Result<Result<(CmId, Option<Context>), i32>, ToolError> {
        println!("{}: starting server", self.tool);
        let listen_id = CmId::new(&self.channel, ps);
        self.rai = match get_rdma_addr(self.a, port, format, self.tool) {
            Ok(r) => r,
            Err(ret) => return Ok(Err(ret)),
        };
        let dev = preopen(&self.a.emu, self.rai.src, None)?;
        let Some(src) = self.rai.src else {
            return Ok(Err(-1));
        };
        if let Err(e) = listen_id.bind_addr(src) {
            return Ok(Err(perror(
                &format!("{}: bind address failed", self.tool),
                &e,
            )));
        }
        if let Err(e) = listen_id.listen(0) {
            let what = format!("{}: failure trying to listen", self.tool);
            return Ok(Err(perror(&what, &e)));
        }
        Ok(Ok((listen_id, dev)))
    }

    /// Events until `left` says none are awaited, or a handler's non-zero return (the
    /// loops of `connect_events` and `disconnect_events`). `peer_acts`: the wait is the
    /// peer's to end, so `--timeout` bounds it; otherwise the local CM's retries do.
    pub(crate) fn events(
        &mut self,
        what: &str,
        left: fn(&Self) -> i64,
        peer_acts: bool,
        mut handle: impl FnMut(&mut Self, &CmEvent) -> i32,
    ) -> i32 {
        let mut ret = 0;
        while left(self) > 0 && ret == 0 {
            match get_event(&self.channel, peer_acts.then_some(self.wait)) {
                Ok(ev) => ret = handle(self, &ev),
                Err(errno) => {
                    eprintln!(
                        "{}: failure in rdma_get_cm_event in {what} events: {}",
                        self.tool,
                        super::strerror(errno)
                    );
                    ret = errno;
                }
            }
        }
        ret
    }

    /// The PD of node `i`'s device (`init_node`'s first step).
    pub(crate) fn alloc_pd(&self, i: usize) -> Result<(CmId, Context, ProtectionDomain), i32> {
        let Some(id) = self.nodes[i].id.clone() else {
            return Err(-1);
        };
        let Some(ctx) = id.context() else {
            return Err(-1);
        };
        match ctx.alloc_pd() {
            Ok(pd) => Ok((id, ctx, pd)),
            Err(e) => {
                println!("{}: unable to allocate PD", self.tool);
                log::warn!("{e}");
                Err(super::ENOMEM)
            }
        }
    }

    /// `create_message`: no messages without a size; else the region of `len` bytes.
    pub(crate) fn create_message(&mut self, i: usize, pd: ProtectionDomain, len: usize) -> i32 {
        if self.a.message_size == 0 {
            self.count = 0;
        }
        if self.count > 0 {
            match pd.reg_mr(len, AccessFlags::LOCAL_WRITE) {
                Ok(mr) => self.nodes[i].mr = Some(mr),
                Err(e) => {
                    println!("failed to reg MR");
                    log::warn!("{e}");
                    println!("{}: failed to create messages: -1", self.tool);
                    return -1;
                }
            }
        }
        self.nodes[i].pd = Some(pd);
        0
    }

    /// `post_recvs`: `count` receives of `len` bytes into node `i`'s region.
    pub(crate) fn post_recvs(&self, i: usize, len: u32) -> i32 {
        let n = &self.nodes[i];
        let (Some(id), Some(mr)) = (&n.id, &n.mr) else {
            return 0;
        };
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

    /// `addr_handler`: the TOS (and ACK timeout) options, then the route.
    pub(crate) fn addr_handler(&mut self, i: usize, ack_timeout: Option<u8>) -> i32 {
        let Some(id) = self.nodes[i].id.clone() else {
            return -1;
        };
        if let Some(tos) = self.a.tos {
            id.set_tos(tos);
        }
        self.set_ack_timeout(&id, ack_timeout);
        if let Err(e) = id.resolve_route(RESOLVE_TIMEOUT) {
            self.connect_error();
            return perror(&format!("{}: resolve route failed", self.tool), &e);
        }
        0
    }

    /// `RDMA_OPTION_ID_ACK_TIMEOUT` when `-a` gave one; a failure is only reported.
    pub(crate) fn set_ack_timeout(&self, id: &CmId, ack_timeout: Option<u8>) {
        if let Some(t) = ack_timeout
            && let Err(e) = id.set_ack_timeout(t)
        {
            perror(&format!("{}: set ack timeout option failed", self.tool), &e);
        }
    }

    /// The node a connection request takes (`connect_handler`'s start), or the request
    /// refused when all are taken (`-ENOMEM`).
    pub(crate) fn take_request(&mut self, id: &CmId) -> Result<usize, i32> {
        if self.conn_index == self.nodes.len() {
            return Err(self.fail_request(None, id, super::ENOMEM));
        }
        let i = self.conn_index;
        self.conn_index += 1;
        self.nodes[i].id = Some(id.clone());
        Ok(i)
    }

    /// A connection request that node `i` (if it took it) could not serve: the node lets it
    /// go and the request is rejected; returns `ret`.
    pub(crate) fn fail_request(&mut self, i: Option<usize>, id: &CmId, ret: i32) -> i32 {
        if let Some(i) = i {
            self.nodes[i].id = None;
            self.connect_error();
        }
        println!("{}: failing connection request", self.tool);
        let _ = id.reject(&[]);
        ret
    }

    /// An error event (address, route, connect error, unreachable, rejected): printed with
    /// its status, which ends the connect events.
    pub(crate) fn report(&mut self, ev: &CmEvent) -> i32 {
        println!("{}: event: {}, error: {}", self.tool, ev.kind, ev.status);
        self.connect_error();
        ev.status
    }

    /// Where a failed CQ poll ends: its line, and its value.
    pub(crate) fn poll_failed(&self, ret: i32) -> i32 {
        println!("{}: failed polling CQ: {ret}", self.tool);
        ret
    }
}
