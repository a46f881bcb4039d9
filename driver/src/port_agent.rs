//! The port agent: address resolution done by rnic itself on a port no kernel netdev stands
//! behind. It joins the pure logic of [`crate::net`] (responder, resolver) to the raw
//! Ethernet objects of [`crate::eth`] on one [`Hca`]: a transport domain, a TIS and a raw SQ
//! that frames leave through, a raw RQ behind a TIR that the NIC RX root flow table steers
//! ARP, ICMPv4 to the port's IPv4 addresses and ICMPv6 (neighbour discovery) into.
//!
//! It has no thread: [`PortAgent::poll`] receives what arrived (answering ARP requests,
//! neighbour solicitations and echo requests, learning neighbours) and does what time asks
//! of the resolver (retransmits, ageing). Whoever owns it calls `poll` often enough
//! (`rnic-verbs` from a small service thread). Memory is fixed at start: receive and send
//! buffers in one registered region, a bounded neighbour table; a frame costs no
//! allocation.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use rnic_hw_regs::wqe::ETH_L2_INLINE_HEADER_SIZE;
use smoltcp::wire::IpProtocol;

use crate::error::DriverError;
use crate::eth::{
    EthCompletion, FlowAction, FlowGroup, FlowMatch, FlowRule, FlowTable, RawRq, RawSq, Tir, Tis,
    TransportDomain,
};
use crate::hca::Hca;
use crate::mr::Mr;
use crate::net::framing::{ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::net::{
    FrameTx, MAX_ADDRS, PortAddrs, Resolution, ResolveError, Resolver, ResolverConfig,
    ResolverCounters, Responder, ResponderCounters, TxError,
};
use crate::pd::Pd;
use crate::wr::{Access, WcStatus};

/// Bytes of a receive or send buffer: a 1500-byte MTU frame with a VLAN tag fits; a longer
/// frame (a jumbo ping) is dropped and counted.
pub const AGENT_FRAME_BYTES: usize = 2048;
/// Flow indexes: ARP at 0, ICMPv6 at 1, ICMPv4 per IPv4 address from 2. Each rule's flow
/// tag is its index (receive completions name the rule; the agent reads the frame anyway).
const FLOW_ARP: u32 = 0;
const FLOW_ICMPV6: u32 = 1;
const FLOW_ICMPV4: u32 = 2;
/// Receive completions taken per poll of the RQ.
const RX_BATCH: usize = 16;

/// The agent's sizes.
///
/// ```
/// let c = rnic_driver::port_agent::PortAgentConfig::default();
/// assert_eq!((c.rx_depth, c.tx_depth), (64, 32));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAgentConfig {
    /// Receive buffers posted (frames that arrive while all are full are dropped by the
    /// device and counted there).
    pub rx_depth: u32,
    /// Sends in flight at most (a frame beyond them is refused, counted in `tx_full`).
    pub tx_depth: u32,
    /// The resolver's limits and times.
    pub resolver: ResolverConfig,
}

impl Default for PortAgentConfig {
    fn default() -> Self {
        PortAgentConfig {
            rx_depth: 64,
            tx_depth: 32,
            resolver: ResolverConfig::default(),
        }
    }
}

/// What a [`PortAgent`] did so far.
///
/// ```
/// let c = rnic_driver::port_agent::PortAgentCounters::default();
/// assert_eq!((c.rx_frames, c.tx_frames), (0, 0));
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PortAgentCounters {
    /// Frames received (good completions).
    pub rx_frames: u64,
    /// Receive completions with an error (a frame longer than a buffer, a flushed receive).
    pub rx_errors: u64,
    /// Frames sent (posted to the SQ).
    pub tx_frames: u64,
    /// Frames refused because every send buffer was in flight.
    pub tx_full: u64,
    /// Frames refused for their size, or refused by the SQ; send completions in error.
    pub tx_errors: u64,
    /// Polls of the raw CQs that failed (another poller, a CQE the queue did not expect).
    pub poll_errors: u64,
    /// What the responder did with the frames received.
    pub responder: ResponderCounters,
    /// What the resolver did.
    pub resolver: ResolverCounters,
}

/// The sending half: the raw SQ, its buffers (the tail of the agent's region) and a
/// FIFO of buffers in flight (every send is signaled, so completions free them in order).
#[derive(Debug)]
struct SqTx {
    sq: RawSq,
    mr: Arc<Mr>,
    /// Offset of the first send buffer in `mr`.
    base: usize,
    slots: u32,
    /// Sends posted and sends completed (wrapping).
    pi: u32,
    ci: u32,
    frames: u64,
    full: u64,
    errors: u64,
    poll_errors: u64,
}

impl SqTx {
    /// Retires what the SQ completed.
    fn reap(&mut self) {
        let mut wc = [EthCompletion::default(); RX_BATCH];
        loop {
            match self.sq.poll(&mut wc) {
                Ok(0) => return,
                Ok(n) => {
                    for c in &wc[..n] {
                        if c.status != WcStatus::Success {
                            self.errors += 1;
                        }
                    }
                    self.ci = self.ci.wrapping_add(n as u32);
                }
                Err(_) => {
                    self.poll_errors += 1;
                    return;
                }
            }
        }
    }
}

impl FrameTx for SqTx {
    fn send_frame(&mut self, frame: &[u8]) -> Result<(), TxError> {
        if frame.len() < ETH_L2_INLINE_HEADER_SIZE || frame.len() > AGENT_FRAME_BYTES {
            self.errors += 1;
            return Err(TxError("frame size outside what a send buffer carries"));
        }
        if self.pi.wrapping_sub(self.ci) >= self.slots {
            self.reap();
            if self.pi.wrapping_sub(self.ci) >= self.slots {
                self.full += 1;
                return Err(TxError("every send buffer is in flight"));
            }
        }
        let off = self.base + (self.pi % self.slots) as usize * AGENT_FRAME_BYTES;
        let rest = &frame[ETH_L2_INLINE_HEADER_SIZE..];
        self.mr.write(off, rest);
        let sge = self.mr.sge(off, rest.len() as u32);
        let sgl: &[_] = if rest.is_empty() { &[] } else { &[sge] };
        match self.sq.post_send(
            u64::from(self.pi),
            &frame[..ETH_L2_INLINE_HEADER_SIZE],
            sgl,
            true,
        ) {
            Ok(()) => {
                self.pi = self.pi.wrapping_add(1);
                self.frames += 1;
                Ok(())
            }
            Err(_) => {
                self.errors += 1;
                Err(TxError("the raw send queue refused the frame"))
            }
        }
    }
}

/// The port agent (see the module docs).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
/// use std::sync::Arc;
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let cfg = rnic_driver::HcaConfig { ipv4: Some([10, 0, 0, 1].into()), ..Default::default() };
/// # let hca = Arc::new(rnic_driver::Hca::open(Arc::new(dev.bus()), cfg)?);
/// let pd = Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
/// let mut agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
/// # dev.step();
/// agent.poll(0);
/// // A gratuitous ARP for 10.0.0.1 and an unsolicited advert for the link-local GID.
/// assert_eq!(agent.counters().resolver.announcements, 2);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PortAgent {
    // Drop order: rules before their groups and table, the TIR before its RQ, the queues
    // before the region and the PD.
    rules: Vec<FlowRule>,
    _arp_group: Arc<FlowGroup>,
    _icmpv6_group: Arc<FlowGroup>,
    icmpv4_group: Arc<FlowGroup>,
    table: Arc<FlowTable>,
    tir: Arc<Tir>,
    tx: SqTx,
    rq: Arc<RawRq>,
    _tis: Arc<Tis>,
    td: Arc<TransportDomain>,
    mr: Arc<Mr>,
    _pd: Arc<Pd>,
    addrs: PortAddrs,
    responder: Responder,
    resolver: Resolver,
    rx_depth: u32,
    rx_frames: u64,
    rx_errors: u64,
    rx_poll_errors: u64,
    rx: Box<[u8]>,
    reply: Box<[u8]>,
}

/// The port's addresses as its GID table has them: the MAC, each IPv4-mapped GID's address
/// (on a `/ipv4_prefix` subnet) and each IPv6 GID's address.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let cfg = rnic_driver::HcaConfig { ipv4: Some([10, 0, 0, 1].into()), ..Default::default() };
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), cfg)?);
/// let a = rnic_driver::port_agent::port_addrs(&hca, 24);
/// assert!(a.has_ipv4([10, 0, 0, 1].into()));
/// assert_eq!(a.ipv6().count(), 1); // the link-local GID
/// # Ok(()) }
/// ```
pub fn port_addrs(hca: &Hca, ipv4_prefix: u8) -> PortAddrs {
    let mut a = PortAddrs::new(hca.mac());
    for g in hca.gids() {
        let ip = Ipv6Addr::from(g.gid);
        // A GID the table cannot hold (more than MAX_ADDRS of a family) is not answered for.
        let _ = match ip.to_ipv4_mapped() {
            Some(v4) => a.add_ipv4(v4, ipv4_prefix),
            None => a.add_ipv6(ip),
        };
    }
    a
}

impl PortAgent {
    /// Creates the agent's objects on `pd`'s device, posts its receives, makes its flow
    /// table the NIC RX root and announces `addrs` (gratuitous ARP, unsolicited adverts).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig};
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let addrs = rnic_driver::net::PortAddrs::new(hca.mac());
    /// let cfg = PortAgentConfig { rx_depth: 1 << 20, ..PortAgentConfig::default() };
    /// assert!(PortAgent::start(&pd, addrs, cfg).is_err()); // beyond the device's RQ
    /// # Ok(()) }
    /// ```
    pub fn start(
        pd: &Arc<Pd>,
        addrs: PortAddrs,
        cfg: PortAgentConfig,
    ) -> Result<PortAgent, DriverError> {
        let hca = pd.hca();
        let (rx_depth, tx_depth) = (cfg.rx_depth.max(1), cfg.tx_depth.max(1));
        let region = (rx_depth as usize + tx_depth as usize) * AGENT_FRAME_BYTES;
        let rq = Arc::new(RawRq::create(pd, rx_depth, 1)?);
        let mr = Arc::new(Mr::alloc(pd, region, Access::LOCAL_WRITE)?);
        let td = Arc::new(TransportDomain::alloc(hca)?);
        let tis = Arc::new(Tis::create(&td)?);
        let sq = RawSq::create(pd, &tis, tx_depth)?;
        let tir = Arc::new(Tir::create(&td, &rq)?);
        let log_size = (FLOW_ICMPV4 + MAX_ADDRS as u32)
            .next_power_of_two()
            .trailing_zeros();
        let table = Arc::new(FlowTable::create(hca, log_size as u8, 0)?);
        let arp = FlowMatch::new().ethertype(0);
        let icmpv6 = FlowMatch::new().ethertype(0).ip_protocol(0);
        let icmpv4 = icmpv6.dst_ipv4([0; 4]);
        let arp_group = Arc::new(FlowGroup::create(&table, FLOW_ARP, FLOW_ARP, &arp)?);
        let icmpv6_group = Arc::new(FlowGroup::create(
            &table,
            FLOW_ICMPV6,
            FLOW_ICMPV6,
            &icmpv6,
        )?);
        let last = FLOW_ICMPV4 + MAX_ADDRS as u32 - 1;
        let icmpv4_group = Arc::new(FlowGroup::create(&table, FLOW_ICMPV4, last, &icmpv4)?);
        let to_rq = FlowAction::Forward(&tir);
        let mut rules = Vec::with_capacity(2 + MAX_ADDRS);
        rules.push(FlowRule::create(
            &arp_group,
            FLOW_ARP,
            &FlowMatch::new().ethertype(ETHERTYPE_ARP),
            to_rq,
            FLOW_ARP,
        )?);
        // Every ICMPv6 message: the rules match no IPv6 destination, so the responder picks
        // the solicitations for the port's addresses and their solicited-node groups.
        let nd = FlowMatch::new()
            .ethertype(ETHERTYPE_IPV6)
            .ip_protocol(IpProtocol::Icmpv6.into());
        rules.push(FlowRule::create(
            &icmpv6_group,
            FLOW_ICMPV6,
            &nd,
            to_rq,
            FLOW_ICMPV6,
        )?);
        for (k, ip) in addrs.ipv4().enumerate() {
            rules.push(echo_rule(&icmpv4_group, &tir, k, ip)?);
        }
        let mut agent = PortAgent {
            rules,
            _arp_group: arp_group,
            _icmpv6_group: icmpv6_group,
            icmpv4_group,
            table,
            tir,
            tx: SqTx {
                sq,
                mr: mr.clone(),
                base: rx_depth as usize * AGENT_FRAME_BYTES,
                slots: tx_depth,
                pi: 0,
                ci: 0,
                frames: 0,
                full: 0,
                errors: 0,
                poll_errors: 0,
            },
            rq,
            _tis: tis,
            td,
            mr,
            _pd: pd.clone(),
            addrs,
            responder: Responder::default(),
            resolver: Resolver::new(cfg.resolver),
            rx_depth,
            rx_frames: 0,
            rx_errors: 0,
            rx_poll_errors: 0,
            rx: vec![0; AGENT_FRAME_BYTES].into_boxed_slice(),
            reply: vec![0; AGENT_FRAME_BYTES].into_boxed_slice(),
        };
        for slot in 0..rx_depth {
            agent.post_rx(slot)?;
        }
        agent.table.set_root()?;
        agent.resolver.announce(&agent.addrs, &mut agent.tx);
        Ok(agent)
    }

    fn post_rx(&self, slot: u32) -> Result<(), DriverError> {
        let sge = self
            .mr
            .sge(slot as usize * AGENT_FRAME_BYTES, AGENT_FRAME_BYTES as u32);
        self.rq
            .post_recv(u64::from(slot), &[sge])
            .map_err(|e| DriverError::InvalidArgument(format!("agent receive: {:?}", e.kind)))
    }

    /// Receives what arrived (answers, learns, reposts the buffers), then does what time
    /// asks of the resolver at `now_ns` (any monotonic nanoseconds, the same clock as
    /// [`PortAgent::resolve`]'s). Returns the frames received.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let mut agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
    /// assert_eq!(agent.poll(0), 0); // nothing arrived
    /// # Ok(()) }
    /// ```
    pub fn poll(&mut self, now_ns: u64) -> usize {
        let mut wc = [EthCompletion::default(); RX_BATCH];
        let mut got = 0;
        loop {
            let n = match self.rq.poll(&mut wc) {
                Ok(n) => n,
                Err(_) => {
                    self.rx_poll_errors += 1;
                    0
                }
            };
            for c in &wc[..n] {
                self.receive(c, now_ns);
            }
            got += n;
            if n < RX_BATCH {
                break;
            }
        }
        self.tx.reap();
        self.resolver.poll(&self.addrs, now_ns, &mut self.tx);
        got
    }

    fn receive(&mut self, c: &EthCompletion, now_ns: u64) {
        // wr_ids are the slots this agent posted; anything else is a CQE it cannot trust.
        let Ok(slot) = u32::try_from(c.wr_id) else {
            self.rx_errors += 1;
            return;
        };
        if slot >= self.rx_depth {
            self.rx_errors += 1;
            return;
        }
        if c.status == WcStatus::Success {
            self.rx_frames += 1;
            let len = (c.byte_len as usize).min(AGENT_FRAME_BYTES);
            let frame = &mut self.rx[..len];
            self.mr.read(slot as usize * AGENT_FRAME_BYTES, frame);
            self.resolver.learn(frame, &self.addrs, now_ns);
            if let Some(n) = self.responder.respond(frame, &self.addrs, &mut self.reply) {
                // A refused reply is counted by the sender; the asker asks again.
                let _ = self.tx.send_frame(&self.reply[..n]);
            }
        } else {
            self.rx_errors += 1;
        }
        if self.post_rx(slot).is_err() {
            self.rx_errors += 1;
        }
    }

    /// The MAC of the neighbour `ip`, or a request sent for it ([`Resolution::Pending`]:
    /// call again after [`PortAgent::poll`]), or why there is none (it did not answer, ...).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
    /// # use rnic_driver::net::Resolution;
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let cfg = rnic_driver::HcaConfig { ipv4: Some([10, 0, 0, 1].into()), ..Default::default() };
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), cfg)?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let mut agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
    /// assert_eq!(agent.resolve([10, 0, 0, 2].into(), 0)?, Resolution::Pending); // ARP out
    /// # Ok(()) }
    /// ```
    pub fn resolve(&mut self, ip: IpAddr, now_ns: u64) -> Result<Resolution, ResolveError> {
        self.resolver.resolve(ip, &self.addrs, now_ns, &mut self.tx)
    }

    /// Puts a MAC in by hand (an administrator's static entry).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
    /// # use rnic_driver::net::Resolution;
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let cfg = rnic_driver::HcaConfig { ipv4: Some([10, 0, 0, 1].into()), ..Default::default() };
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), cfg)?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let mut agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
    /// agent.insert([10, 0, 0, 2].into(), [2, 0, 0, 0, 0, 2], 0);
    /// assert_eq!(agent.resolve([10, 0, 0, 2].into(), 1)?, Resolution::Mac([2, 0, 0, 0, 0, 2]));
    /// # Ok(()) }
    /// ```
    pub fn insert(&mut self, ip: IpAddr, mac: [u8; 6], now_ns: u64) {
        self.resolver.insert(ip, mac, now_ns);
    }

    /// Adds an address (a GID added to the port): answered for from now on (an ICMPv4
    /// echo rule for an IPv4 one) and announced.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let mut agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
    /// agent.add_addr([10, 0, 0, 9].into(), 24)?;
    /// assert!(agent.addrs().has_ipv4([10, 0, 0, 9].into()));
    /// assert!(agent.add_addr([224, 0, 0, 1].into(), 24).is_err()); // not a host's address
    /// # Ok(()) }
    /// ```
    pub fn add_addr(&mut self, ip: IpAddr, ipv4_prefix: u8) -> Result<(), DriverError> {
        let full = |e| DriverError::InvalidArgument(format!("port address {ip}: {e}"));
        match ip {
            IpAddr::V4(v4) => {
                if self.addrs.has_ipv4(v4) {
                    return Ok(());
                }
                let k = self.addrs.ipv4().count();
                self.addrs.add_ipv4(v4, ipv4_prefix).map_err(full)?;
                match echo_rule(&self.icmpv4_group, &self.tir, k, v4) {
                    Ok(r) => self.rules.push(r),
                    Err(e) => {
                        self.addrs.remove(ip);
                        return Err(e);
                    }
                }
            }
            IpAddr::V6(v6) => {
                if self.addrs.has_ipv6(v6) {
                    return Ok(());
                }
                self.addrs.add_ipv6(v6).map_err(full)?;
            }
        }
        // The address is the port's now; an announcement the SQ refused is counted there.
        let _ = self.resolver.announce_addr(ip, &self.addrs, &mut self.tx);
        Ok(())
    }

    /// The addresses the agent answers for.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
    /// assert_eq!(agent.addrs().mac(), hca.mac());
    /// # Ok(()) }
    /// ```
    pub fn addrs(&self) -> &PortAddrs {
        &self.addrs
    }

    /// The resolver (its neighbour table, its configuration).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
    /// assert!(agent.resolver().table().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// The counts so far.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
    /// assert_eq!(agent.counters().rx_errors, 0);
    /// # Ok(()) }
    /// ```
    pub fn counters(&self) -> PortAgentCounters {
        PortAgentCounters {
            rx_frames: self.rx_frames,
            rx_errors: self.rx_errors,
            tx_frames: self.tx.frames,
            tx_full: self.tx.full,
            tx_errors: self.tx.errors,
            poll_errors: self.rx_poll_errors + self.tx.poll_errors,
            responder: self.responder.counters(),
            resolver: self.resolver.counters(),
        }
    }

    /// The device the agent runs on.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())?;
    /// assert!(std::sync::Arc::ptr_eq(agent.hca(), &hca));
    /// # Ok(()) }
    /// ```
    pub fn hca(&self) -> &Arc<Hca> {
        self.td.hca()
    }
}

/// The rule steering ICMPv4 to `ip` (the port's `k`-th IPv4 address) to the agent's RQ.
fn echo_rule(
    group: &Arc<FlowGroup>,
    tir: &Arc<Tir>,
    k: usize,
    ip: Ipv4Addr,
) -> Result<FlowRule, DriverError> {
    let m = FlowMatch::new()
        .ethertype(ETHERTYPE_IPV4)
        .ip_protocol(IpProtocol::Icmp.into())
        .dst_ipv4(ip.octets());
    FlowRule::create(
        group,
        FLOW_ICMPV4 + k as u32,
        &m,
        FlowAction::Forward(tir),
        FLOW_ICMPV4 + k as u32,
    )
}
