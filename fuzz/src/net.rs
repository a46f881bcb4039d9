//! The port's address resolution as the driver's port agent runs it (`rnic_driver::net`:
//! the responder and the resolver, learn then respond for each received frame), driven by a
//! sequence of records (the `arp_icmp` target and the seed-corpus example share the format).
//!
//! A record is a kind byte (`kind % 4`, see [`Op`]) and its operands:
//! - [`Op::Frame`]: `len: u16 LE` (cut to [`MAX_FRAME`]) and that many frame bytes;
//! - [`Op::Resolve`]: a flags byte (bit 0 IPv6, bit 1 the whole address follows: 4 or 16
//!   bytes; else one byte, the host part in the port's subnet, `10.0.0.x` / `fe80::x`);
//! - [`Op::Time`]: `u16 LE` tens of microseconds time moves on, then the resolver's poll;
//! - [`Op::Announce`]: gratuitous ARPs and unsolicited adverts for the port's addresses.

use rnic_driver::net::arp::{ArpFrame, ArpOp};
use rnic_driver::net::framing::is_unicast;
use rnic_driver::net::icmp::{EchoFrame, EchoKind};
use rnic_driver::net::ndisc::{NdFrame, NdMessage};
use rnic_driver::net::{
    FrameTx, NeighbourState, PortAddrs, Resolution, ResolveError, Resolver, ResolverConfig,
    Responder, TxError,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The port's MAC.
pub const PORT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
/// The port's IPv4 addresses (both /24).
pub const PORT_V4: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(192, 0, 2, 1)];
/// The port's IPv6 addresses.
pub const PORT_V6: [Ipv6Addr; 2] = [
    Ipv6Addr::new(0xFE80, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0x2001, 0xDB8, 0, 0, 0, 0, 0, 1),
];
/// The longest frame a record carries (a 1500-byte MTU frame with a VLAN tag).
pub const MAX_FRAME: usize = 1518;
/// Neighbour table entries: small, so that the fuzzer fills it and eviction runs.
pub const CAPACITY: usize = 8;
/// Resolutions in flight at most.
pub const MAX_PENDING: usize = 4;

/// What a record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A received frame: the resolver learns from it, the responder answers it.
    Frame = 0,
    /// A resolution asked for.
    Resolve = 1,
    /// Time moves on; the resolver polls.
    Time = 2,
    /// The port announces its addresses.
    Announce = 3,
}

/// Encodes a [`Op::Frame`] record.
pub fn frame_record(frame: &[u8]) -> Vec<u8> {
    let n = frame.len().min(MAX_FRAME);
    let mut r = vec![Op::Frame as u8];
    r.extend_from_slice(&(n as u16).to_le_bytes());
    r.extend_from_slice(&frame[..n]);
    r
}

/// Frames the resolver sent, checked as they leave: requests and announcements from the
/// port's MAC about the port's addresses.
struct CheckedTx<'a> {
    port: &'a PortAddrs,
    sent: usize,
}

impl FrameTx for CheckedTx<'_> {
    fn send_frame(&mut self, frame: &[u8]) -> Result<(), TxError> {
        if let Ok(a) = ArpFrame::parse(frame) {
            assert_eq!((a.eth_src, a.sender_mac), (PORT_MAC, PORT_MAC), "{a:?}");
            assert_eq!(a.op, ArpOp::Request, "the resolver sends requests: {a:?}");
            assert!(self.port.has_ipv4(a.sender_ip), "{a:?}");
        } else if let Ok(n) = NdFrame::parse(frame) {
            assert_eq!(n.eth_src, PORT_MAC, "{n:?}");
            assert!(self.port.has_ipv6(n.src_ip), "{n:?}");
            if let NdMessage::Advert { .. } = n.message {
                assert_eq!(n.lladdr, Some(PORT_MAC), "{n:?}");
                assert!(self.port.has_ipv6(n.target), "{n:?}");
            }
        } else {
            panic!("the resolver sent a frame that is neither ARP nor ND: {frame:02x?}");
        }
        self.sent += 1;
        Ok(())
    }
}

/// The port, its responder and resolver, and the time.
pub struct NetHarness {
    port: PortAddrs,
    responder: Responder,
    resolver: Resolver,
    now_ns: u64,
    frames: u64,
    reply: [u8; 2048],
}

impl Default for NetHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl NetHarness {
    /// A port with [`PORT_V4`] and [`PORT_V6`], a resolver with short times (ms) and a small
    /// table, at time 0.
    pub fn new() -> Self {
        let mut port = PortAddrs::new(PORT_MAC);
        for ip in PORT_V4 {
            port.add_ipv4(ip, 24).expect("room");
        }
        for ip in PORT_V6 {
            port.add_ipv6(ip).expect("room");
        }
        let ms = 1_000_000;
        let resolver = Resolver::new(ResolverConfig {
            capacity: CAPACITY,
            max_pending: MAX_PENDING,
            retransmit_ns: ms,
            max_attempts: 3,
            reachable_ns: 30 * ms,
            stale_ns: 60 * ms,
            failed_hold_ns: 3 * ms,
        });
        NetHarness {
            port,
            responder: Responder::default(),
            resolver,
            now_ns: 0,
            frames: 0,
            reply: [0; 2048],
        }
    }

    /// Runs every record of `data`; panics on a finding.
    pub fn run(&mut self, mut data: &[u8]) {
        while let Some((&kind, rest)) = data.split_first() {
            data = rest;
            match kind % 4 {
                0 => {
                    let Some((len, rest)) = data.split_first_chunk::<2>() else {
                        return;
                    };
                    let n = usize::from(u16::from_le_bytes(*len))
                        .min(MAX_FRAME)
                        .min(rest.len());
                    let (frame, rest) = rest.split_at(n);
                    data = rest;
                    self.frame(frame);
                }
                1 => {
                    let Some((&flags, rest)) = data.split_first() else {
                        return;
                    };
                    data = rest;
                    let v6 = flags & 1 != 0;
                    let ip = if flags & 2 != 0 {
                        let want = if v6 { 16 } else { 4 };
                        if data.len() < want {
                            return;
                        }
                        let (a, rest) = data.split_at(want);
                        data = rest;
                        if v6 {
                            IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(a).expect("16")))
                        } else {
                            IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(a).expect("4")))
                        }
                    } else {
                        let Some((&host, rest)) = data.split_first() else {
                            return;
                        };
                        data = rest;
                        if v6 {
                            IpAddr::V6(Ipv6Addr::new(0xFE80, 0, 0, 0, 0, 0, 0, host.into()))
                        } else {
                            IpAddr::V4(Ipv4Addr::new(10, 0, 0, host))
                        }
                    };
                    self.resolve(ip);
                }
                2 => {
                    let Some((t, rest)) = data.split_first_chunk::<2>() else {
                        return;
                    };
                    data = rest;
                    self.now_ns += u64::from(u16::from_le_bytes(*t)) * 10_000;
                    let mut tx = CheckedTx {
                        port: &self.port,
                        sent: 0,
                    };
                    let sent = self.resolver.poll(&self.port, self.now_ns, &mut tx);
                    assert_eq!(sent, tx.sent, "poll counts what it sent");
                    assert!(sent <= CAPACITY, "one request per entry at most");
                }
                _ => {
                    let mut tx = CheckedTx {
                        port: &self.port,
                        sent: 0,
                    };
                    let n = self.resolver.announce(&self.port, &mut tx);
                    assert_eq!((n, tx.sent), (4, 4), "one announcement per address");
                }
            }
            self.check_table();
        }
    }

    /// A received frame as the port agent takes it: learn, then answer.
    fn frame(&mut self, frame: &[u8]) {
        self.frames += 1;
        self.resolver.learn(frame, &self.port, self.now_ns);
        let Some(n) = self.responder.respond(frame, &self.port, &mut self.reply) else {
            let c = self.responder.counters();
            let answered = c.arp_replies + c.nd_adverts + c.echo_replies;
            let refused = c.short + c.malformed + c.unsupported + c.not_for_us;
            assert_eq!(answered + refused + c.buffer_too_small, self.frames);
            return;
        };
        assert!(n <= self.reply.len());
        let reply = &self.reply[..n];
        check_reply(frame, reply, &self.port);
        // The port's own reply, heard back (a looped link), is answered by nothing and
        // teaches nothing.
        let before = self.resolver.table().iter().copied().collect::<Vec<_>>();
        let mut again = [0u8; 2048];
        assert_eq!(
            rnic_driver::net::responder::reply(reply, &self.port, &mut again),
            Err(rnic_driver::net::NoReply::NotForUs)
        );
        assert!(!self.resolver.learn(reply, &self.port, self.now_ns));
        assert_eq!(
            self.resolver.table().iter().copied().collect::<Vec<_>>(),
            before
        );
    }

    fn resolve(&mut self, ip: IpAddr) {
        let mut tx = CheckedTx {
            port: &self.port,
            sent: 0,
        };
        let r = self.resolver.resolve(ip, &self.port, self.now_ns, &mut tx);
        let entry = self.resolver.table().get(ip).copied();
        match r {
            Ok(Resolution::Mac(mac)) => {
                let e = entry.expect("a resolved address is in the table");
                assert_eq!(e.state.mac(), Some(mac), "{e:?}");
                assert!(tx.sent <= 1);
            }
            Ok(Resolution::Pending) => {
                let e = entry.expect("a pending address is in the table");
                assert!(matches!(e.state, NeighbourState::Incomplete(_)), "{e:?}");
                assert!(tx.sent <= 1);
            }
            Err(ResolveError::NotNeighbour { .. } | ResolveError::NoSourceAddress { .. }) => {
                assert_eq!(tx.sent, 0);
            }
            Err(ResolveError::TooManyPending { .. }) => assert_eq!(tx.sent, 0),
            Err(ResolveError::Unanswered { .. }) => {
                let e = entry.expect("a failed address is held");
                assert!(matches!(e.state, NeighbourState::Failed { .. }), "{e:?}");
                assert_eq!(tx.sent, 0);
            }
            Err(e) => panic!("resolve: {e:?}"),
        }
    }

    /// The neighbour table is bounded and consistent: at most [`CAPACITY`] entries, one per
    /// address, at most [`MAX_PENDING`] in flight, none for the port's own addresses, every
    /// MAC a unicast one that is not the port's.
    fn check_table(&self) {
        let t = self.resolver.table();
        assert!(t.len() <= t.capacity() && t.capacity() == CAPACITY);
        let mut ips = [None; CAPACITY];
        let mut incomplete = 0;
        for (i, e) in t.iter().enumerate() {
            assert!(!ips[..i].contains(&Some(e.ip)), "{:?} twice", e.ip);
            ips[i] = Some(e.ip);
            let own = match e.ip {
                IpAddr::V4(ip) => self.port.has_ipv4(ip),
                IpAddr::V6(ip) => self.port.has_ipv6(ip),
            };
            assert!(!own, "an entry for the port's own address: {e:?}");
            if let Some(mac) = e.state.mac() {
                assert!(is_unicast(mac) && mac != PORT_MAC, "{e:?}");
            }
            incomplete += usize::from(matches!(e.state, NeighbourState::Incomplete(_)));
        }
        assert!(
            incomplete <= MAX_PENDING,
            "{incomplete} resolutions in flight"
        );
        assert_eq!(t.get(IpAddr::V4(PORT_V4[0])), None);
    }
}

/// `reply` answers `frame` as the responder documents: an ARP reply from the port to the
/// asker, a neighbour advertisement of the asked-for target, or an echo reply with the
/// request's identifier, sequence number and data; always from the port's MAC.
fn check_reply(frame: &[u8], reply: &[u8], port: &PortAddrs) {
    if let Ok(q) = ArpFrame::parse(frame) {
        let r = ArpFrame::parse(reply).expect("an ARP reply parses");
        assert_eq!(q.op, ArpOp::Request);
        assert_eq!(r.op, ArpOp::Reply);
        assert_eq!((r.eth_src, r.sender_mac), (PORT_MAC, PORT_MAC));
        assert_eq!(r.sender_ip, q.target_ip);
        assert!(port.has_ipv4(r.sender_ip));
        assert_eq!((r.target_mac, r.target_ip), (q.sender_mac, q.sender_ip));
        assert_eq!(r.eth_dst, q.sender_mac);
    } else if let Ok(q) = NdFrame::parse(frame) {
        let r = NdFrame::parse(reply).expect("an advertisement parses");
        assert_eq!(q.message, NdMessage::Solicit);
        assert!(matches!(
            r.message,
            NdMessage::Advert {
                override_: true,
                ..
            }
        ));
        assert_eq!((r.eth_src, r.lladdr), (PORT_MAC, Some(PORT_MAC)));
        assert_eq!((r.target, r.src_ip), (q.target, q.target));
        assert!(port.has_ipv6(r.target));
    } else {
        let q = EchoFrame::parse(frame).expect("the responder answers ARP, ND or echo");
        let r = EchoFrame::parse(reply).expect("an echo reply parses");
        assert_eq!((q.kind, r.kind), (EchoKind::Request, EchoKind::Reply));
        assert_eq!((r.eth_src, r.eth_dst), (PORT_MAC, q.eth_src));
        assert_eq!((r.src_ip, r.dst_ip), (q.dst_ip, q.src_ip));
        assert_eq!((r.ident, r.seq_no, r.data), (q.ident, q.seq_no, q.data));
        assert!(port.has_ipv4(r.src_ip));
    }
}
