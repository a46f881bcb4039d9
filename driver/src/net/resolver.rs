//! Resolving peers' MACs for a port no kernel resolves for: ARP for IPv4 peers, neighbour
//! solicitations for IPv6 peers, over a [`FrameTx`], with the neighbour table
//! ([`NeighbourTable`]) of what is known.
//!
//! - [`Resolver::resolve`] gives a known MAC at once, or sends a request and says to wait
//!   ([`Resolution::Pending`]); once the address did not answer, it fails with
//!   [`ResolveError::Unanswered`], naming it.
//! - [`Resolver::poll`] does what time asks: retransmits unanswered requests every
//!   [`ResolverConfig::retransmit_ns`] up to [`ResolverConfig::max_attempts`], gives up on
//!   them, ages confirmed entries to stale after [`ResolverConfig::reachable_ns`], drops stale
//!   ones unused for [`ResolverConfig::stale_ns`] and failed ones after
//!   [`ResolverConfig::failed_hold_ns`].
//! - [`Resolver::learn`] takes what arrives: ARP requests for and replies to the port,
//!   advertisements answering its solicitations, solicitations for its addresses; an
//!   address heard in passing (a gratuitous ARP, an unsolicited advert) updates an entry it
//!   already has and adds none, so strangers cannot fill the table by talking.
//! - [`Resolver::announce`] sends gratuitous ARPs and unsolicited adverts for the port's
//!   addresses (at bring-up, and [`Resolver::announce_addr`] when a GID is added).
//!
//! Flood protection: at most [`ResolverConfig::max_pending`] resolutions in flight, one
//! request per address per retransmit interval whatever the callers do, failed addresses
//! held, a bounded table. Time is the caller's (`now_ns`, any monotonic nanoseconds).

use std::net::IpAddr;

use super::addrs::{PortAddrs, unicast_v4};
use super::arp::{ArpFrame, ArpOp};
use super::framing::is_unicast;
use super::ndisc::{NdFrame, NdMessage};
use super::neighbour::{NeighbourState, NeighbourTable, Probe};
use super::{FrameTx, ResolveError, TxError};

/// Bytes the largest request or announcement takes (an NS with its option: 86).
const FRAME_BYTES: usize = 128;

/// The resolver's limits and times (ns). The defaults are Linux's neighbour defaults
/// (`retrans_time` 1 s, 3 solicitations, `base_reachable_time` 30 s, `gc_stale_time` 60 s).
///
/// ```
/// use rnic_driver::net::ResolverConfig;
///
/// let c = ResolverConfig::default();
/// assert_eq!((c.capacity, c.max_attempts, c.retransmit_ns), (256, 3, 1_000_000_000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolverConfig {
    /// Entries in the neighbour table.
    pub capacity: usize,
    /// Resolutions in flight at most (at most `capacity`).
    pub max_pending: usize,
    /// Between two requests for one address.
    pub retransmit_ns: u64,
    /// Requests sent before an address counts as not answering (at least 1).
    pub max_attempts: u8,
    /// How long an answer keeps an entry reachable.
    pub reachable_ns: u64,
    /// How long a stale entry nobody uses is kept.
    pub stale_ns: u64,
    /// How long a failed address fails at once before it may be asked for again.
    pub failed_hold_ns: u64,
}

impl Default for ResolverConfig {
    fn default() -> Self {
        ResolverConfig {
            capacity: 256,
            max_pending: 32,
            retransmit_ns: 1_000_000_000,
            max_attempts: 3,
            reachable_ns: 30_000_000_000,
            stale_ns: 60_000_000_000,
            failed_hold_ns: 3_000_000_000,
        }
    }
}

/// What [`Resolver::resolve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The peer's MAC.
    Mac([u8; 6]),
    /// A request is out: call again after the answer arrives ([`Resolver::learn`]) or time
    /// passes ([`Resolver::poll`]).
    Pending,
}

/// What a [`Resolver`] did.
///
/// ```
/// use rnic_driver::net::ResolverCounters;
///
/// assert_eq!(ResolverCounters::default().requests, 0);
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ResolverCounters {
    /// First requests sent (broadcast ARP / multicast NS).
    pub requests: u64,
    /// Requests sent again (no answer yet), and unicast confirmations of stale entries.
    pub retries: u64,
    /// Addresses given up on.
    pub timeouts: u64,
    /// Gratuitous ARPs and unsolicited adverts sent.
    pub announcements: u64,
    /// Entries added from what arrived.
    pub learned: u64,
    /// Entries confirmed or changed by what arrived.
    pub updated: u64,
    /// Received frames that taught nothing (not ARP / ND, malformed, about strangers, from
    /// impossible addresses).
    pub ignored: u64,
    /// Resolutions refused because [`ResolverConfig::max_pending`] were in flight.
    pub pending_full: u64,
    /// Resolve calls answered from a failed entry without a new request.
    pub held_failures: u64,
    /// Entries dropped because they aged out.
    pub expired: u64,
    /// Frames the sender refused.
    pub tx_errors: u64,
}

/// A neighbour resolver (see the module docs).
///
/// ```
/// use rnic_driver::net::{FrameTx, PortAddrs, Resolution, Resolver, ResolverConfig, TxError};
///
/// #[derive(Default)]
/// struct Wire(Vec<Vec<u8>>);
/// impl FrameTx for Wire {
///     fn send_frame(&mut self, f: &[u8]) -> Result<(), TxError> { self.0.push(f.to_vec()); Ok(()) }
/// }
/// let mut port = PortAddrs::new([2, 0, 0, 0, 0, 1]);
/// port.add_ipv4([10, 0, 0, 1].into(), 24)?;
/// let mut r = Resolver::new(ResolverConfig::default());
/// let mut wire = Wire::default();
/// let peer = [10, 0, 0, 2].into();
/// assert_eq!(r.resolve(peer, &port, 0, &mut wire)?, Resolution::Pending);
/// assert_eq!(wire.0.len(), 1); // a broadcast ARP request went out
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Resolver {
    cfg: ResolverConfig,
    table: NeighbourTable,
    counters: ResolverCounters,
}

impl Resolver {
    /// A resolver with an empty table of `cfg.capacity` entries.
    ///
    /// ```
    /// # use rnic_driver::net::{Resolver, ResolverConfig};
    /// let r = Resolver::new(ResolverConfig { capacity: 8, ..ResolverConfig::default() });
    /// assert_eq!(r.table().capacity(), 8);
    /// ```
    pub fn new(cfg: ResolverConfig) -> Resolver {
        let table = NeighbourTable::new(cfg.capacity);
        let cfg = ResolverConfig {
            capacity: table.capacity(),
            max_pending: cfg.max_pending.clamp(1, table.capacity()),
            max_attempts: cfg.max_attempts.max(1),
            ..cfg
        };
        Resolver {
            cfg,
            table,
            counters: ResolverCounters::default(),
        }
    }

    /// The configuration in force (`max_pending` and `max_attempts` clamped).
    ///
    /// ```
    /// # use rnic_driver::net::{Resolver, ResolverConfig};
    /// let r = Resolver::new(ResolverConfig { capacity: 4, max_pending: 100, ..ResolverConfig::default() });
    /// assert_eq!(r.config().max_pending, 4);
    /// ```
    pub fn config(&self) -> ResolverConfig {
        self.cfg
    }

    /// The neighbour table.
    ///
    /// ```
    /// # use rnic_driver::net::{Resolver, ResolverConfig};
    /// assert!(Resolver::new(ResolverConfig::default()).table().is_empty());
    /// ```
    pub fn table(&self) -> &NeighbourTable {
        &self.table
    }

    /// The counts so far.
    ///
    /// ```
    /// # use rnic_driver::net::{Resolver, ResolverConfig};
    /// assert_eq!(Resolver::new(ResolverConfig::default()).counters().timeouts, 0);
    /// ```
    pub fn counters(&self) -> ResolverCounters {
        self.counters
    }

    /// Puts a MAC in by hand (what `Context::add_neighbor` does today): reachable from
    /// `now_ns`, aged like any other entry.
    ///
    /// ```
    /// # use rnic_driver::net::{PortAddrs, Resolution, Resolver, ResolverConfig, FrameTx, TxError};
    /// # struct Nowhere; impl FrameTx for Nowhere { fn send_frame(&mut self, _: &[u8]) -> Result<(), TxError> { Err(TxError("nowhere")) } }
    /// # let mut port = PortAddrs::new([2, 0, 0, 0, 0, 1]); port.add_ipv4([10, 0, 0, 1].into(), 24).unwrap();
    /// let mut r = Resolver::new(ResolverConfig::default());
    /// r.insert([10, 0, 0, 2].into(), [2, 0, 0, 0, 0, 2], 0);
    /// assert_eq!(r.resolve([10, 0, 0, 2].into(), &port, 1, &mut Nowhere)?, Resolution::Mac([2, 0, 0, 0, 0, 2]));
    /// # Ok::<(), rnic_driver::net::ResolveError>(())
    /// ```
    pub fn insert(&mut self, ip: IpAddr, mac: [u8; 6], now_ns: u64) {
        let state = NeighbourState::Reachable {
            mac,
            confirmed_ns: now_ns,
        };
        self.table.insert(ip, state, now_ns);
    }

    /// The MAC of `ip`, or a request sent for it (see the module docs).
    ///
    /// ```
    /// # use rnic_driver::net::{PortAddrs, Resolver, ResolverConfig, ResolveError, FrameTx, TxError};
    /// # struct Nowhere; impl FrameTx for Nowhere { fn send_frame(&mut self, _: &[u8]) -> Result<(), TxError> { Ok(()) } }
    /// let port = PortAddrs::new([2, 0, 0, 0, 0, 1]); // no IPv4 address to ask from
    /// let mut r = Resolver::new(ResolverConfig::default());
    /// let e = r.resolve([10, 0, 0, 2].into(), &port, 0, &mut Nowhere);
    /// assert!(matches!(e, Err(ResolveError::NoSourceAddress { .. })));
    /// ```
    pub fn resolve(
        &mut self,
        ip: IpAddr,
        port: &PortAddrs,
        now_ns: u64,
        tx: &mut impl FrameTx,
    ) -> Result<Resolution, ResolveError> {
        if !neighbour_addr(ip) || port_has(port, ip) {
            return Err(ResolveError::NotNeighbour { ip });
        }
        if source_for(port, ip).is_none() {
            return Err(ResolveError::NoSourceAddress { ip });
        }
        let cfg = self.cfg;
        let Some(e) = self.table.get_mut(ip) else {
            return self.start(ip, port, now_ns, tx);
        };
        e.last_used_ns = now_ns;
        match e.state {
            NeighbourState::Reachable { mac, confirmed_ns } => {
                if now_ns.saturating_sub(confirmed_ns) >= cfg.reachable_ns {
                    e.state = NeighbourState::Stale {
                        mac,
                        since_ns: now_ns,
                        probe: None,
                    };
                    self.confirm(ip, mac, port, now_ns, tx);
                }
                Ok(Resolution::Mac(mac))
            }
            NeighbourState::Stale { mac, probe, .. } => {
                if probe.is_none() {
                    self.confirm(ip, mac, port, now_ns, tx);
                }
                Ok(Resolution::Mac(mac))
            }
            // One request per address per interval: poll sends the next.
            NeighbourState::Incomplete(_) => Ok(Resolution::Pending),
            NeighbourState::Failed { attempts, at_ns } => {
                if now_ns.saturating_sub(at_ns) < cfg.failed_hold_ns {
                    self.counters.held_failures += 1;
                    Err(ResolveError::Unanswered { ip, attempts })
                } else {
                    self.table.remove(ip);
                    self.start(ip, port, now_ns, tx)
                }
            }
        }
    }

    /// A first request for `ip`, which has no entry.
    fn start(
        &mut self,
        ip: IpAddr,
        port: &PortAddrs,
        now_ns: u64,
        tx: &mut impl FrameTx,
    ) -> Result<Resolution, ResolveError> {
        if self.table.incomplete() >= self.cfg.max_pending {
            self.counters.pending_full += 1;
            return Err(ResolveError::TooManyPending { ip });
        }
        let probe = Probe {
            attempts: 1,
            last_sent_ns: now_ns,
        };
        self.table
            .insert(ip, NeighbourState::Incomplete(probe), now_ns);
        self.counters.requests += 1;
        // A request the sender refused is retried by poll like an unanswered one.
        send_request(port, ip, None, tx).map_err(|source| {
            self.counters.tx_errors += 1;
            ResolveError::Tx { ip, source }
        })?;
        Ok(Resolution::Pending)
    }

    /// Starts confirming the stale entry `ip` (at `mac`) with a unicast request.
    fn confirm(
        &mut self,
        ip: IpAddr,
        mac: [u8; 6],
        port: &PortAddrs,
        now_ns: u64,
        tx: &mut impl FrameTx,
    ) {
        if let Some(e) = self.table.get_mut(ip)
            && let NeighbourState::Stale { probe, .. } = &mut e.state
        {
            *probe = Some(Probe {
                attempts: 1,
                last_sent_ns: now_ns,
            });
        }
        self.counters.retries += 1;
        if send_request(port, ip, Some(mac), tx).is_err() {
            self.counters.tx_errors += 1;
        }
    }

    /// Does what time asks (see the module docs); returns the frames sent.
    ///
    /// ```
    /// # use rnic_driver::net::{PortAddrs, Resolver, ResolverConfig, ResolveError, FrameTx, TxError};
    /// # #[derive(Default)] struct Count(usize);
    /// # impl FrameTx for Count { fn send_frame(&mut self, _: &[u8]) -> Result<(), TxError> { self.0 += 1; Ok(()) } }
    /// # let mut port = PortAddrs::new([2, 0, 0, 0, 0, 1]); port.add_ipv4([10, 0, 0, 1].into(), 24).unwrap();
    /// let mut r = Resolver::new(ResolverConfig::default()); // 3 requests, 1 s apart
    /// let (peer, s) = ([10, 0, 0, 2].into(), 1_000_000_000);
    /// let mut wire = Count::default();
    /// r.resolve(peer, &port, 0, &mut wire)?;
    /// assert_eq!(r.poll(&port, s, &mut wire) + r.poll(&port, 2 * s, &mut wire), 2);
    /// r.poll(&port, 3 * s, &mut wire); // no answer to the third either
    /// let e = r.resolve(peer, &port, 3 * s, &mut wire).unwrap_err();
    /// assert_eq!(e, ResolveError::Unanswered { ip: peer, attempts: 3 });
    /// # Ok::<(), ResolveError>(())
    /// ```
    pub fn poll(&mut self, port: &PortAddrs, now_ns: u64, tx: &mut impl FrameTx) -> usize {
        let cfg = self.cfg;
        let c = &mut self.counters;
        let mut sent = 0;
        for e in self.table.iter_mut() {
            // The request in flight, and where it goes (None: broadcast / multicast).
            let (p, unicast) = match &mut e.state {
                NeighbourState::Incomplete(p) => (p, None),
                NeighbourState::Stale {
                    mac,
                    probe: Some(p),
                    ..
                } => (p, Some(*mac)),
                NeighbourState::Reachable { mac, confirmed_ns }
                    if now_ns.saturating_sub(*confirmed_ns) >= cfg.reachable_ns =>
                {
                    e.state = NeighbourState::Stale {
                        mac: *mac,
                        since_ns: now_ns,
                        probe: None,
                    };
                    continue;
                }
                _ => continue,
            };
            if now_ns.saturating_sub(p.last_sent_ns) < cfg.retransmit_ns {
                continue;
            }
            if p.attempts >= cfg.max_attempts {
                // Unanswered (a stale peer no longer at its old MAC too): fail for a while,
                // then ask everyone afresh.
                c.timeouts += 1;
                e.state = NeighbourState::Failed {
                    attempts: p.attempts,
                    at_ns: now_ns,
                };
                continue;
            }
            p.attempts += 1;
            p.last_sent_ns = now_ns;
            c.retries += 1;
            match send_request(port, e.ip, unicast, tx) {
                Ok(()) => sent += 1,
                Err(_) => c.tx_errors += 1,
            }
        }
        let expired = self.table.retain(|e| match e.state {
            NeighbourState::Stale {
                since_ns,
                probe: None,
                ..
            } => now_ns.saturating_sub(since_ns.max(e.last_used_ns)) < cfg.stale_ns,
            NeighbourState::Failed { at_ns, .. } => {
                now_ns.saturating_sub(at_ns) < cfg.failed_hold_ns
            }
            _ => true,
        });
        self.counters.expired += expired as u64;
        sent
    }

    /// The earliest time (ns) at which [`Resolver::poll`] has something to do, if any.
    ///
    /// ```
    /// # use rnic_driver::net::{Resolver, ResolverConfig};
    /// assert_eq!(Resolver::new(ResolverConfig::default()).next_deadline_ns(), None);
    /// ```
    pub fn next_deadline_ns(&self) -> Option<u64> {
        let cfg = self.cfg;
        self.table
            .iter()
            .map(|e| match e.state {
                NeighbourState::Incomplete(p) | NeighbourState::Stale { probe: Some(p), .. } => {
                    p.last_sent_ns.saturating_add(cfg.retransmit_ns)
                }
                NeighbourState::Reachable { confirmed_ns, .. } => {
                    confirmed_ns.saturating_add(cfg.reachable_ns)
                }
                NeighbourState::Stale { since_ns, .. } => {
                    since_ns.max(e.last_used_ns).saturating_add(cfg.stale_ns)
                }
                NeighbourState::Failed { at_ns, .. } => at_ns.saturating_add(cfg.failed_hold_ns),
            })
            .min()
    }

    /// Learns from a received frame (see the module docs); true if the table changed.
    ///
    /// ```
    /// # use rnic_driver::net::{PortAddrs, Resolver, ResolverConfig};
    /// # use rnic_driver::net::arp::ArpFrame;
    /// let mut port = PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// port.add_ipv4([10, 0, 0, 1].into(), 24)?;
    /// let mut r = Resolver::new(ResolverConfig::default());
    /// let mut f = [0u8; 60];
    /// ArpFrame::request([2, 0, 0, 0, 0, 2], [10, 0, 0, 2].into(), [10, 0, 0, 1].into()).emit(&mut f)?;
    /// assert!(r.learn(&f, &port, 0)); // whoever asks for us is a neighbour
    /// assert_eq!(r.table().get([10, 0, 0, 2].into()).and_then(|e| e.state.mac()), Some([2, 0, 0, 0, 0, 2]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn learn(&mut self, frame: &[u8], port: &PortAddrs, now_ns: u64) -> bool {
        let heard = if let Ok(a) = ArpFrame::parse(frame) {
            self.heard_arp(&a, port)
        } else if let Ok(n) = NdFrame::parse(frame) {
            self.heard_nd(&n, port)
        } else {
            None
        };
        let Some((ip, mac, how)) = heard else {
            self.counters.ignored += 1;
            return false;
        };
        if !is_unicast(mac) || mac == port.mac() || !neighbour_addr(ip) || port_has(port, ip) {
            self.counters.ignored += 1;
            return false;
        }
        let reachable = NeighbourState::Reachable {
            mac,
            confirmed_ns: now_ns,
        };
        let stale = NeighbourState::Stale {
            mac,
            since_ns: now_ns,
            probe: None,
        };
        match (self.table.get_mut(ip), how) {
            (Some(e), Heard::Answer) => {
                e.state = reachable;
                e.last_used_ns = now_ns;
            }
            (Some(e), Heard::AboutUs | Heard::InPassing) => {
                // The same MAC again confirms nothing (it was not an answer) and changes
                // nothing; a new MAC, or one for an address being asked for, is kept as
                // stale, to be confirmed when used.
                if e.state.mac() == Some(mac) {
                    return false;
                }
                e.state = stale;
            }
            (None, Heard::Answer | Heard::AboutUs) => {
                self.table.insert(ip, stale, now_ns);
                self.counters.learned += 1;
                return true;
            }
            (None, Heard::InPassing) => {
                self.counters.ignored += 1;
                return false;
            }
        }
        self.counters.updated += 1;
        true
    }

    /// The sender an ARP frame tells about, and how.
    fn heard_arp(&self, a: &ArpFrame, port: &PortAddrs) -> Option<(IpAddr, [u8; 6], Heard)> {
        if !unicast_v4(a.sender_ip) {
            return None; // a probe (0.0.0.0) or nonsense: no address to learn
        }
        let for_us = port.has_ipv4(a.target_ip) && !a.is_gratuitous();
        let how = match (a.op, for_us) {
            (ArpOp::Reply, true) => Heard::Answer,
            (ArpOp::Request, true) => Heard::AboutUs,
            (_, false) => Heard::InPassing,
        };
        Some((IpAddr::V4(a.sender_ip), a.sender_mac, how))
    }

    /// The address a neighbour discovery frame tells about, and how.
    fn heard_nd(&self, n: &NdFrame, port: &PortAddrs) -> Option<(IpAddr, [u8; 6], Heard)> {
        match n.message {
            NdMessage::Advert { solicited, .. } => {
                // RFC 4861 section 7.2.5: an advert without the target's MAC teaches nothing.
                let mac = n.lladdr?;
                let how = if solicited && port.has_ipv6(n.dst_ip) {
                    Heard::Answer
                } else {
                    Heard::InPassing
                };
                Some((IpAddr::V6(n.target), mac, how))
            }
            NdMessage::Solicit => {
                // RFC 4861 section 7.2.3: a solicitation for us with the solicitor's MAC.
                let mac = n.lladdr?;
                if n.src_ip.is_unspecified() || !port.has_ipv6(n.target) {
                    return None;
                }
                Some((IpAddr::V6(n.src_ip), mac, Heard::AboutUs))
            }
        }
    }

    /// Sends a gratuitous ARP for each of the port's IPv4 addresses and an unsolicited
    /// advert for each IPv6 one (at bring-up); returns how many went out.
    ///
    /// ```
    /// # use rnic_driver::net::{PortAddrs, Resolver, ResolverConfig, FrameTx, TxError};
    /// # #[derive(Default)] struct Count(usize);
    /// # impl FrameTx for Count { fn send_frame(&mut self, _: &[u8]) -> Result<(), TxError> { self.0 += 1; Ok(()) } }
    /// let mut port = PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// port.add_ipv4([10, 0, 0, 1].into(), 24)?;
    /// port.add_ipv6("fe80::1".parse().unwrap())?;
    /// let mut r = Resolver::new(ResolverConfig::default());
    /// let mut wire = Count::default();
    /// assert_eq!(r.announce(&port, &mut wire), 2);
    /// # Ok::<(), rnic_driver::net::AddrsFull>(())
    /// ```
    pub fn announce(&mut self, port: &PortAddrs, tx: &mut impl FrameTx) -> usize {
        let v4 = port.ipv4().map(IpAddr::V4);
        let v6 = port.ipv6().map(IpAddr::V6);
        v4.chain(v6)
            .filter(|&ip| self.announce_one(port.mac(), ip, tx).is_ok())
            .count()
    }

    /// Announces `ip`, just added to the port's addresses (a new GID): a gratuitous ARP or an
    /// unsolicited advert.
    ///
    /// ```
    /// # use rnic_driver::net::{PortAddrs, Resolver, ResolverConfig, FrameTx, TxError};
    /// # #[derive(Default)] struct Count(usize);
    /// # impl FrameTx for Count { fn send_frame(&mut self, _: &[u8]) -> Result<(), TxError> { self.0 += 1; Ok(()) } }
    /// let mut port = PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// let mut r = Resolver::new(ResolverConfig::default());
    /// port.add_ipv4([10, 0, 0, 7].into(), 24)?;
    /// r.announce_addr([10, 0, 0, 7].into(), &port, &mut Count::default())?;
    /// assert_eq!(r.counters().announcements, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn announce_addr(
        &mut self,
        ip: IpAddr,
        port: &PortAddrs,
        tx: &mut impl FrameTx,
    ) -> Result<(), TxError> {
        if !port_has(port, ip) {
            return Err(TxError("not one of the port's addresses"));
        }
        self.announce_one(port.mac(), ip, tx)
    }

    fn announce_one(
        &mut self,
        mac: [u8; 6],
        ip: IpAddr,
        tx: &mut impl FrameTx,
    ) -> Result<(), TxError> {
        let mut buf = [0u8; FRAME_BYTES];
        let n = match ip {
            IpAddr::V4(ip) => ArpFrame::gratuitous(mac, ip).emit(&mut buf),
            IpAddr::V6(ip) => NdFrame::unsolicited_advert(mac, ip).emit(&mut buf),
        }
        .map_err(|_| TxError("announcement does not fit"))?;
        let r = tx.send_frame(&buf[..n]);
        match r {
            Ok(()) => self.counters.announcements += 1,
            Err(_) => self.counters.tx_errors += 1,
        }
        r
    }
}

/// How a received frame tells about an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    /// It answers the port's question (an ARP reply to the port, a solicited advert).
    Answer,
    /// Its sender asks the port (an ARP request or solicitation for the port's address).
    AboutUs,
    /// Overheard (a gratuitous ARP, an unsolicited advert, an exchange between others).
    InPassing,
}

/// Whether a neighbour can have `ip`.
fn neighbour_addr(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => unicast_v4(ip),
        IpAddr::V6(ip) => !(ip.is_unspecified() || ip.is_multicast() || ip.is_loopback()),
    }
}

fn port_has(port: &PortAddrs, ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => port.has_ipv4(ip),
        IpAddr::V6(ip) => port.has_ipv6(ip),
    }
}

/// The port's address to ask for `ip` from.
fn source_for(port: &PortAddrs, ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(ip) => port.ipv4_source_for(ip).map(IpAddr::V4),
        IpAddr::V6(ip) => port.ipv6_source_for(ip).map(IpAddr::V6),
    }
}

/// Sends a request for `ip`: broadcast ARP / multicast NS, or to `unicast` (confirming a
/// stale entry).
fn send_request(
    port: &PortAddrs,
    ip: IpAddr,
    unicast: Option<[u8; 6]>,
    tx: &mut impl FrameTx,
) -> Result<(), TxError> {
    let mut buf = [0u8; FRAME_BYTES];
    let mac = port.mac();
    let n = match (ip, source_for(port, ip)) {
        (IpAddr::V4(ip), Some(IpAddr::V4(src))) => {
            let r = ArpFrame::request(mac, src, ip);
            unicast.map_or(r, |m| r.unicast_to(m)).emit(&mut buf)
        }
        (IpAddr::V6(ip), Some(IpAddr::V6(src))) => {
            let r = NdFrame::solicit(mac, src, ip);
            unicast.map_or(r, |m| r.unicast_to(m)).emit(&mut buf)
        }
        _ => return Err(TxError("no source address of the family")),
    }
    .map_err(|_| TxError("request does not fit"))?;
    tx.send_frame(&buf[..n])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::arp::ArpFrame;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const US: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const S: u64 = 1_000_000_000;

    /// Every frame sent, or refusal of all of them.
    #[derive(Default)]
    struct Wire {
        sent: Vec<Vec<u8>>,
        refuse: bool,
    }

    impl FrameTx for Wire {
        fn send_frame(&mut self, f: &[u8]) -> Result<(), TxError> {
            if self.refuse {
                return Err(TxError("refused"));
            }
            self.sent.push(f.to_vec());
            Ok(())
        }
    }

    fn port() -> PortAddrs {
        let mut p = PortAddrs::new(US);
        p.add_ipv4(Ipv4Addr::new(10, 0, 0, 1), 24).unwrap();
        p.add_ipv6("fe80::1".parse().unwrap()).unwrap();
        p
    }

    fn peer4() -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))
    }

    /// The peer's ARP reply to the port.
    fn arp_reply(from_ip: [u8; 4], from_mac: [u8; 6]) -> [u8; 60] {
        let mut b = [0u8; 60];
        ArpFrame::request(US, [10, 0, 0, 1].into(), from_ip.into())
            .reply_from(from_mac)
            .emit(&mut b)
            .unwrap();
        b
    }

    /// The port, a wire, the default configuration and a resolver that knows the peer
    /// (reachable from time 0).
    fn known_peer() -> (PortAddrs, Wire, ResolverConfig, Resolver) {
        let cfg = ResolverConfig::default();
        let mut r = Resolver::new(cfg);
        r.insert(peer4(), PEER, 0);
        (port(), Wire::default(), cfg, r)
    }

    fn arp_of(f: &[u8]) -> ArpFrame {
        ArpFrame::parse(f).unwrap()
    }

    #[test]
    fn resolve_request_reply_learned() {
        let (p, mut w) = (port(), Wire::default());
        let mut r = Resolver::new(ResolverConfig::default());
        assert_eq!(r.resolve(peer4(), &p, 0, &mut w), Ok(Resolution::Pending));
        let req = arp_of(&w.sent[0]);
        assert_eq!(
            (req.op, req.eth_dst, req.target_ip),
            (ArpOp::Request, [0xFF; 6], Ipv4Addr::new(10, 0, 0, 2))
        );
        assert_eq!(req.sender_ip, Ipv4Addr::new(10, 0, 0, 1));
        // Asking again before the interval sends nothing: one request per address.
        assert_eq!(
            r.resolve(peer4(), &p, S / 2, &mut w),
            Ok(Resolution::Pending)
        );
        assert_eq!(w.sent.len(), 1);
        assert!(r.learn(&arp_reply([10, 0, 0, 2], PEER), &p, S / 2));
        assert_eq!(
            r.resolve(peer4(), &p, S / 2, &mut w),
            Ok(Resolution::Mac(PEER))
        );
        assert!(matches!(
            r.table().get(peer4()).unwrap().state,
            NeighbourState::Reachable { .. }
        ));
        assert_eq!(r.poll(&p, S, &mut w), 0, "nothing in flight");
        assert_eq!((r.counters().requests, r.counters().updated), (1, 1));
    }

    #[test]
    fn retries_then_a_timeout_naming_the_address_then_held_then_asked_afresh() {
        let (p, mut w) = (port(), Wire::default());
        let mut r = Resolver::new(ResolverConfig::default());
        r.resolve(peer4(), &p, 0, &mut w).unwrap();
        assert_eq!(r.next_deadline_ns(), Some(S));
        assert_eq!(r.poll(&p, S - 1, &mut w), 0, "not due yet");
        assert_eq!(r.poll(&p, S, &mut w), 1);
        assert_eq!(r.poll(&p, 2 * S, &mut w), 1);
        assert_eq!(r.poll(&p, 3 * S, &mut w), 0, "three sent: given up");
        assert_eq!(w.sent.len(), 3);
        let e = r.resolve(peer4(), &p, 3 * S, &mut w).unwrap_err();
        assert_eq!(
            e,
            ResolveError::Unanswered {
                ip: peer4(),
                attempts: 3
            }
        );
        assert!(e.to_string().contains("10.0.0.2"));
        // A caller retrying at once gets the failure without a request (flood protection).
        for t in 0..100 {
            assert!(r.resolve(peer4(), &p, 3 * S + t, &mut w).is_err());
        }
        assert_eq!(w.sent.len(), 3);
        assert_eq!(r.counters().held_failures, 101);
        // After the hold, a new resolution.
        let later = 3 * S + r.config().failed_hold_ns;
        assert_eq!(
            r.resolve(peer4(), &p, later, &mut w),
            Ok(Resolution::Pending)
        );
        assert_eq!(w.sent.len(), 4);
        assert_eq!(r.counters().timeouts, 1);
    }

    #[test]
    fn entries_age_to_stale_are_confirmed_by_unicast_and_expire() {
        let (p, mut w, cfg, mut r) = known_peer();
        r.poll(&p, cfg.reachable_ns, &mut w);
        assert!(matches!(
            r.table().get(peer4()).unwrap().state,
            NeighbourState::Stale { probe: None, .. }
        ));
        assert!(w.sent.is_empty(), "ageing alone sends nothing");
        // Used while stale: the MAC at once, and a unicast confirmation.
        let t = cfg.reachable_ns + 1;
        assert_eq!(r.resolve(peer4(), &p, t, &mut w), Ok(Resolution::Mac(PEER)));
        let probe = arp_of(&w.sent[0]);
        assert_eq!(
            (probe.eth_dst, probe.target_ip),
            (PEER, Ipv4Addr::new(10, 0, 0, 2))
        );
        // Answered: reachable again (refreshed).
        assert!(r.learn(&arp_reply([10, 0, 0, 2], PEER), &p, t + 1));
        assert!(matches!(
            r.table().get(peer4()).unwrap().state,
            NeighbourState::Reachable { confirmed_ns, .. } if confirmed_ns == t + 1
        ));
        // Stale and unused for stale_ns: dropped.
        let t2 = t + 1 + cfg.reachable_ns;
        r.poll(&p, t2, &mut w);
        r.poll(&p, t2 + cfg.stale_ns, &mut w);
        assert!(r.table().get(peer4()).is_none());
        assert_eq!(r.counters().expired, 1);
    }

    #[test]
    fn a_stale_peer_that_stops_answering_fails() {
        let (p, mut w, cfg, mut r) = known_peer();
        let t = cfg.reachable_ns;
        assert_eq!(r.resolve(peer4(), &p, t, &mut w), Ok(Resolution::Mac(PEER)));
        for k in 1..=3 {
            r.poll(&p, t + k * S, &mut w);
        }
        assert_eq!(w.sent.len(), 3, "three unicast confirmations");
        assert!(w.sent.iter().all(|f| arp_of(f).eth_dst == PEER));
        assert!(matches!(
            r.resolve(peer4(), &p, t + 3 * S, &mut w),
            Err(ResolveError::Unanswered { attempts: 3, .. })
        ));
    }

    #[test]
    fn a_full_table_evicts_the_least_recently_used() {
        let p = port();
        let mut r = Resolver::new(ResolverConfig {
            capacity: 4,
            ..ResolverConfig::default()
        });
        for i in 0..5u8 {
            // Each asks for the port: learned.
            let mut f = [0u8; 60];
            let mac = [2, 0, 0, 0, 1, i];
            ArpFrame::request(mac, [10, 0, 0, 10 + i].into(), [10, 0, 0, 1].into())
                .emit(&mut f)
                .unwrap();
            assert!(r.learn(&f, &p, u64::from(i)));
        }
        assert_eq!((r.table().len(), r.table().evictions()), (4, 1));
        assert!(
            r.table().get([10, 0, 0, 10].into()).is_none(),
            "the oldest went"
        );
        assert_eq!(r.counters().learned, 5);
    }

    #[test]
    fn pending_resolutions_are_bounded() {
        let (p, mut w) = (port(), Wire::default());
        let mut r = Resolver::new(ResolverConfig {
            max_pending: 2,
            ..ResolverConfig::default()
        });
        assert!(r.resolve([10, 0, 0, 2].into(), &p, 0, &mut w).is_ok());
        assert!(r.resolve([10, 0, 0, 3].into(), &p, 0, &mut w).is_ok());
        let e = r.resolve([10, 0, 0, 4].into(), &p, 0, &mut w);
        assert_eq!(
            e,
            Err(ResolveError::TooManyPending {
                ip: [10, 0, 0, 4].into()
            })
        );
        assert_eq!((w.sent.len(), r.counters().pending_full), (2, 1));
        // A flood of distinct addresses sends no more than the bound.
        for i in 0..200u8 {
            let _ = r.resolve([10, 0, 1, i].into(), &p, 1, &mut w);
        }
        assert_eq!(w.sent.len(), 2);
        assert!(r.table().len() <= r.table().capacity());
    }

    #[test]
    fn what_is_not_a_neighbour_is_refused() {
        let (p, mut w) = (port(), Wire::default());
        let mut r = Resolver::new(ResolverConfig::default());
        for ip in [
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), // ours
            IpAddr::V4(Ipv4Addr::BROADCAST),
            IpAddr::V4(Ipv4Addr::new(224, 0, 0, 5)),
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            IpAddr::V6("ff02::1".parse().unwrap()),
        ] {
            assert_eq!(
                r.resolve(ip, &p, 0, &mut w),
                Err(ResolveError::NotNeighbour { ip })
            );
        }
        let v6only = {
            let mut p = PortAddrs::new(US);
            p.add_ipv6("fe80::1".parse().unwrap()).unwrap();
            p
        };
        let e = r.resolve(peer4(), &v6only, 0, &mut w);
        assert_eq!(e, Err(ResolveError::NoSourceAddress { ip: peer4() }));
        assert!(w.sent.is_empty());
    }

    #[test]
    fn a_refused_request_is_an_error_and_retried_by_poll() {
        let p = port();
        let mut w = Wire {
            refuse: true,
            ..Wire::default()
        };
        let mut r = Resolver::new(ResolverConfig::default());
        let e = r.resolve(peer4(), &p, 0, &mut w).unwrap_err();
        assert!(matches!(e, ResolveError::Tx { .. }));
        w.refuse = false;
        assert_eq!(r.poll(&p, S, &mut w), 1, "the retry goes out");
        assert_eq!(r.counters().tx_errors, 1);
    }

    #[test]
    fn learning_rules() {
        let p = port();
        let mut r = Resolver::new(ResolverConfig::default());
        // A gratuitous ARP from a stranger adds nothing...
        let mut g = [0u8; 60];
        ArpFrame::gratuitous(PEER, [10, 0, 0, 2].into())
            .emit(&mut g)
            .unwrap();
        assert!(!r.learn(&g, &p, 0));
        assert!(r.table().is_empty());
        // ...but moves an address the table holds to its new MAC (stale, to confirm).
        r.insert(peer4(), [2, 0, 0, 0, 0, 9], 0);
        assert!(r.learn(&g, &p, 1));
        let st = r.table().get(peer4()).unwrap().state;
        assert!(
            matches!(st, NeighbourState::Stale { mac: PEER, .. }),
            "{st:?}"
        );
        // The same news again changes nothing.
        assert!(!r.learn(&g, &p, 2));
        // Impossible senders: a broadcast MAC, our own MAC, our own address, a probe.
        for (mac, ip) in [
            ([0xFF; 6], [10, 0, 0, 3]),
            (US, [10, 0, 0, 3]),
            (PEER, [10, 0, 0, 1]),
            (PEER, [0, 0, 0, 0]),
        ] {
            let mut f = [0u8; 60];
            ArpFrame::request(mac, ip.into(), [10, 0, 0, 1].into())
                .emit(&mut f)
                .unwrap();
            assert!(!r.learn(&f, &p, 3), "{mac:?} {ip:?}");
        }
        // Not ARP or ND, or malformed.
        assert!(!r.learn(&[0u8; 60], &p, 3));
        assert!(!r.learn(&g[..30], &p, 3));
        assert_eq!(r.counters().ignored, 7);
    }

    #[test]
    fn ipv6_solicit_advert_learned() {
        let (p, mut w) = (port(), Wire::default());
        let mut r = Resolver::new(ResolverConfig::default());
        let peer: Ipv6Addr = "fe80::2".parse().unwrap();
        assert_eq!(
            r.resolve(peer.into(), &p, 0, &mut w),
            Ok(Resolution::Pending)
        );
        let ns = NdFrame::parse(&w.sent[0]).unwrap();
        assert_eq!(
            (ns.target, ns.eth_dst, ns.lladdr),
            (peer, [0x33, 0x33, 0xFF, 0, 0, 2], Some(US))
        );
        let na = ns.advert_from(PEER); // the peer answers our solicitation
        let mut unsolicited = NdFrame::unsolicited_advert(PEER, peer);
        let mut b = [0u8; 128];
        // An unsolicited advert for an address being asked for: stale, usable.
        unsolicited.dst_ip = ns.src_ip;
        let n = unsolicited.emit(&mut b).unwrap();
        assert!(r.learn(&b[..n], &p, 1));
        let n = na.emit(&mut b).unwrap();
        assert!(r.learn(&b[..n], &p, 2));
        assert!(matches!(
            r.table().get(peer.into()).unwrap().state,
            NeighbourState::Reachable { mac: PEER, .. }
        ));
        assert_eq!(
            r.resolve(peer.into(), &p, 3, &mut w),
            Ok(Resolution::Mac(PEER))
        );
    }

    #[test]
    fn announcements_at_bring_up_and_for_a_new_address() {
        let (mut p, mut w) = (port(), Wire::default());
        let mut r = Resolver::new(ResolverConfig::default());
        assert_eq!(r.announce(&p, &mut w), 2);
        let g = arp_of(&w.sent[0]);
        assert!(g.is_gratuitous() && g.eth_dst == [0xFF; 6] && g.sender_mac == US);
        let na = NdFrame::parse(&w.sent[1]).unwrap();
        assert!(matches!(
            na.message,
            NdMessage::Advert {
                solicited: false,
                override_: true,
                ..
            }
        ));
        p.add_ipv4([10, 0, 0, 5].into(), 24).unwrap();
        r.announce_addr([10, 0, 0, 5].into(), &p, &mut w).unwrap();
        assert_eq!(arp_of(&w.sent[2]).sender_ip, Ipv4Addr::new(10, 0, 0, 5));
        assert!(
            r.announce_addr([10, 0, 0, 6].into(), &p, &mut w).is_err(),
            "not ours"
        );
        assert_eq!(r.counters().announcements, 3);
    }
}
