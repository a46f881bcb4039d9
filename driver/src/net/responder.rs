//! The port's answers for its own addresses: ARP replies to requests for its IPv4 addresses,
//! neighbour advertisements to solicitations for its IPv6 addresses, and ICMPv4 echo
//! replies. [`reply`] is a pure function from a received frame and the port's addresses to
//! an optional reply written into the caller's buffer; [`Responder`] counts what it did
//! with each frame.

use super::FrameError;
use super::addrs::{PortAddrs, unicast_v4};
use super::arp::{ArpFrame, ArpOp};
use super::framing::{self, BROADCAST, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, is_unicast};
use super::icmp::{EchoFrame, EchoKind};
use super::ndisc::{NdFrame, NdMessage, solicited_node};

/// Why a received frame got no reply.
///
/// ```
/// use rnic_driver::net::{responder::reply, NoReply, PortAddrs};
///
/// let port = PortAddrs::new([2, 0, 0, 0, 0, 1]);
/// let mut f = [0u8; 60];
/// f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]); // from a station
/// assert_eq!(reply(&f, &port, &mut [0; 128]), Err(NoReply::Unsupported)); // EtherType 0
/// assert_eq!(reply(&[0; 60], &port, &mut [0; 128]), Err(NoReply::NotForUs)); // from MAC 0
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReply {
    /// Shorter than its headers say.
    Short,
    /// ARP, ICMP or ND with a bad field or checksum.
    Malformed,
    /// A protocol or message the responder does not answer (another EtherType, an ARP or
    /// ND reply, an echo reply, a VLAN tag).
    Unsupported,
    /// Well formed, but not a question about one of the port's addresses (or sent by the
    /// port itself, or from an address no station can have).
    NotForUs,
    /// The reply did not fit the caller's buffer.
    BufferTooSmall,
}

impl From<FrameError> for NoReply {
    fn from(e: FrameError) -> NoReply {
        match e {
            FrameError::Short => NoReply::Short,
            FrameError::Malformed => NoReply::Malformed,
            FrameError::Unsupported => NoReply::Unsupported,
            FrameError::BufferTooSmall => NoReply::BufferTooSmall,
        }
    }
}

/// The reply to `frame` for a port with addresses `port`, written into `out`: its length,
/// or why there is none. Answers an ARP request for one of the port's IPv4 addresses
/// (also a probe from `0.0.0.0`, RFC 5227), a neighbour solicitation for one of its IPv6
/// addresses (sent to that address or its solicited-node group), and an ICMPv4 echo
/// request to one of its IPv4 addresses at its MAC.
///
/// ```
/// use rnic_driver::net::arp::{ArpFrame, ArpOp};
/// use rnic_driver::net::{responder::reply, PortAddrs};
///
/// let mut port = PortAddrs::new([2, 0, 0, 0, 0, 1]);
/// port.add_ipv4([10, 0, 0, 1].into(), 24)?;
/// let mut req = [0u8; 60];
/// ArpFrame::request([2, 0, 0, 0, 0, 2], [10, 0, 0, 2].into(), [10, 0, 0, 1].into()).emit(&mut req)?;
/// let mut out = [0u8; 128];
/// let n = reply(&req, &port, &mut out).unwrap();
/// let r = ArpFrame::parse(&out[..n])?;
/// assert_eq!((r.op, r.sender_mac, r.eth_dst), (ArpOp::Reply, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn reply(frame: &[u8], port: &PortAddrs, out: &mut [u8]) -> Result<usize, NoReply> {
    let l2 = framing::parse(frame)?;
    if l2.src == port.mac() || !is_unicast(l2.src) {
        return Err(NoReply::NotForUs);
    }
    match l2.ethertype {
        ETHERTYPE_ARP => reply_arp(frame, port, out),
        ETHERTYPE_IPV4 => reply_echo(frame, port, out),
        ETHERTYPE_IPV6 => reply_nd(frame, port, out),
        _ => Err(NoReply::Unsupported),
    }
}

fn reply_arp(frame: &[u8], port: &PortAddrs, out: &mut [u8]) -> Result<usize, NoReply> {
    let a = ArpFrame::parse(frame)?;
    if a.op != ArpOp::Request {
        return Err(NoReply::Unsupported);
    }
    let to_us = a.eth_dst == BROADCAST || a.eth_dst == port.mac();
    let sender_ok = is_unicast(a.sender_mac)
        && (unicast_v4(a.sender_ip) || a.sender_ip.is_unspecified())
        && !port.has_ipv4(a.sender_ip);
    if !to_us || !sender_ok || a.is_gratuitous() || !port.has_ipv4(a.target_ip) {
        return Err(NoReply::NotForUs);
    }
    Ok(a.reply_from(port.mac()).emit(out)?)
}

fn reply_echo(frame: &[u8], port: &PortAddrs, out: &mut [u8]) -> Result<usize, NoReply> {
    let e = EchoFrame::parse(frame)?;
    if e.kind != EchoKind::Request {
        return Err(NoReply::Unsupported);
    }
    // A broadcast or multicast ping gets no answer (Linux's icmp_echo_ignore_broadcasts).
    if e.eth_dst != port.mac() || !port.has_ipv4(e.dst_ip) || !unicast_v4(e.src_ip) {
        return Err(NoReply::NotForUs);
    }
    Ok(e.reply().emit(out)?)
}

fn reply_nd(frame: &[u8], port: &PortAddrs, out: &mut [u8]) -> Result<usize, NoReply> {
    let n = NdFrame::parse(frame)?;
    if n.message != NdMessage::Solicit {
        return Err(NoReply::Unsupported);
    }
    let to_us = n.dst_ip == n.target || n.dst_ip == solicited_node(n.target);
    let mac_ok = n.eth_dst == port.mac() || n.eth_dst == framing::ipv6_multicast_mac(n.dst_ip);
    let from_ok = n.lladdr.is_none_or(is_unicast) && !port.has_ipv6(n.src_ip);
    if !to_us || !mac_ok || !from_ok || !port.has_ipv6(n.target) {
        return Err(NoReply::NotForUs);
    }
    Ok(n.advert_from(port.mac()).emit(out)?)
}

/// What a [`Responder`] did with the frames it was given.
///
/// ```
/// use rnic_driver::net::ResponderCounters;
///
/// assert_eq!(ResponderCounters::default().arp_replies, 0);
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ResponderCounters {
    /// ARP replies written.
    pub arp_replies: u64,
    /// Neighbour advertisements written.
    pub nd_adverts: u64,
    /// ICMPv4 echo replies written.
    pub echo_replies: u64,
    /// Frames shorter than their headers.
    pub short: u64,
    /// Frames with a bad field or checksum.
    pub malformed: u64,
    /// Frames of a protocol or message the responder does not answer.
    pub unsupported: u64,
    /// Well-formed questions about addresses that are not the port's.
    pub not_for_us: u64,
    /// Replies that did not fit the caller's buffer.
    pub buffer_too_small: u64,
}

/// [`reply`] with counters.
///
/// ```
/// use rnic_driver::net::{PortAddrs, Responder};
///
/// let port = PortAddrs::new([2, 0, 0, 0, 0, 1]);
/// let mut r = Responder::default();
/// assert_eq!(r.respond(&[0xFF; 60], &port, &mut [0; 128]), None);
/// assert_eq!(r.counters().not_for_us, 1); // a broadcast source MAC: no station sends that
/// ```
#[derive(Debug, Default, Clone)]
pub struct Responder {
    counters: ResponderCounters,
}

impl Responder {
    /// The reply to `frame` in `out` (its length), or `None`, counted either way.
    ///
    /// ```
    /// # use rnic_driver::net::{PortAddrs, Responder};
    /// # let port = PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// let mut r = Responder::default();
    /// assert_eq!(r.respond(&[], &port, &mut [0; 128]), None);
    /// assert_eq!(r.counters().short, 1);
    /// ```
    pub fn respond(&mut self, frame: &[u8], port: &PortAddrs, out: &mut [u8]) -> Option<usize> {
        let c = &mut self.counters;
        match reply(frame, port, out) {
            Ok(n) => {
                let kind = framing::parse(frame).map(|l2| l2.ethertype).unwrap_or(0);
                let counter = match kind {
                    ETHERTYPE_ARP => &mut c.arp_replies,
                    ETHERTYPE_IPV6 => &mut c.nd_adverts,
                    _ => &mut c.echo_replies,
                };
                *counter += 1;
                Some(n)
            }
            Err(e) => {
                let counter = match e {
                    NoReply::Short => &mut c.short,
                    NoReply::Malformed => &mut c.malformed,
                    NoReply::Unsupported => &mut c.unsupported,
                    NoReply::NotForUs => &mut c.not_for_us,
                    NoReply::BufferTooSmall => &mut c.buffer_too_small,
                };
                *counter += 1;
                None
            }
        }
    }

    /// The counts so far.
    ///
    /// ```
    /// # let r = rnic_driver::net::Responder::default();
    /// assert_eq!(r.counters().echo_replies, 0);
    /// ```
    pub fn counters(&self) -> ResponderCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const US: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn port() -> PortAddrs {
        let mut p = PortAddrs::new(US);
        p.add_ipv4(Ipv4Addr::new(10, 0, 0, 1), 24).unwrap();
        p.add_ipv6("fe80::1".parse().unwrap()).unwrap();
        p.add_ipv6("2001:db8::1".parse().unwrap()).unwrap();
        p
    }

    fn arp_req(target: [u8; 4]) -> Vec<u8> {
        let mut b = vec![0u8; 60];
        ArpFrame::request(PEER, [10, 0, 0, 2].into(), target.into())
            .emit(&mut b)
            .unwrap();
        b
    }

    fn ping(dst_mac: [u8; 6], dst: [u8; 4], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 14 + 28 + data.len() + 60];
        let n = EchoFrame::request(PEER, dst_mac, [10, 0, 0, 2].into(), dst.into(), 77, 3, data)
            .emit(&mut b)
            .unwrap();
        b.truncate(n);
        b
    }

    fn ns(src: &str, target: &str) -> Vec<u8> {
        let mut b = vec![0u8; 128];
        let n = NdFrame::solicit(PEER, src.parse().unwrap(), target.parse().unwrap())
            .emit(&mut b)
            .unwrap();
        b.truncate(n);
        b
    }

    #[test]
    fn answers_arp_echo_and_solicitations_for_its_addresses() {
        let (p, mut r, mut out) = (port(), Responder::default(), [0u8; 256]);
        let n = r.respond(&arp_req([10, 0, 0, 1]), &p, &mut out).unwrap();
        let a = ArpFrame::parse(&out[..n]).unwrap();
        assert_eq!(
            (a.op, a.sender_ip, a.target_mac),
            (ArpOp::Reply, [10, 0, 0, 1].into(), PEER)
        );

        let n = r
            .respond(&ping(US, [10, 0, 0, 1], b"hello"), &p, &mut out)
            .unwrap();
        let e = EchoFrame::parse(&out[..n]).unwrap();
        assert_eq!(
            (e.kind, e.ident, e.seq_no, e.data),
            (EchoKind::Reply, 77, 3, &b"hello"[..])
        );
        assert_eq!((e.eth_dst, e.dst_ip), (PEER, Ipv4Addr::new(10, 0, 0, 2)));

        for target in ["fe80::1", "2001:db8::1"] {
            let n = r.respond(&ns("fe80::2", target), &p, &mut out).unwrap();
            let na = NdFrame::parse(&out[..n]).unwrap();
            assert_eq!(na.target, target.parse::<Ipv6Addr>().unwrap());
            assert_eq!((na.eth_dst, na.lladdr), (PEER, Some(US)));
        }
        let c = r.counters();
        assert_eq!((c.arp_replies, c.echo_replies, c.nd_adverts), (1, 1, 2));
    }

    #[test]
    fn every_bad_path_is_counted() {
        let (p, mut r, mut out) = (port(), Responder::default(), [0u8; 256]);
        // Short: a runt, and an ARP cut short.
        assert_eq!(r.respond(&[0; 13], &p, &mut out), None);
        let arp = arp_req([10, 0, 0, 1]);
        assert_eq!(r.respond(&arp[..20], &p, &mut out), None);
        assert_eq!(r.counters().short, 2);
        // Malformed: a bad ICMP checksum, an NS with hop limit 64.
        let mut bad = ping(US, [10, 0, 0, 1], b"x");
        bad[14 + 20 + 2] ^= 0xFF;
        assert_eq!(r.respond(&bad, &p, &mut out), None);
        // ... and an NS from a multicast source (found by the arp_icmp fuzz target).
        assert_eq!(r.respond(&ns("ff80::2", "fe80::1"), &p, &mut out), None);
        let mut hops = ns("fe80::2", "fe80::1");
        hops[14 + 7] = 64;
        assert_eq!(r.respond(&hops, &p, &mut out), None);
        assert_eq!(r.counters().malformed, 3);
        // Not for us: other addresses, another MAC, our own frame, a gratuitous ARP.
        assert_eq!(r.respond(&arp_req([10, 0, 0, 9]), &p, &mut out), None);
        assert_eq!(
            r.respond(&ping(PEER, [10, 0, 0, 1], b"x"), &p, &mut out),
            None
        );
        assert_eq!(
            r.respond(&ping(US, [10, 0, 0, 9], b"x"), &p, &mut out),
            None
        );
        assert_eq!(r.respond(&ns("fe80::2", "fe80::9"), &p, &mut out), None);
        let mut own = vec![0u8; 60];
        ArpFrame::request(US, [10, 0, 0, 1].into(), [10, 0, 0, 1].into())
            .emit(&mut own)
            .unwrap();
        assert_eq!(r.respond(&own, &p, &mut out), None);
        let mut grat = vec![0u8; 60];
        ArpFrame::gratuitous(PEER, [10, 0, 0, 1].into())
            .emit(&mut grat)
            .unwrap();
        assert_eq!(r.respond(&grat, &p, &mut out), None);
        assert_eq!(r.counters().not_for_us, 6);
        // Unsupported: an ARP reply (wrong opcode for a responder), an echo reply, IPv4 UDP.
        let mut rep = vec![0u8; 60];
        ArpFrame::request(PEER, [10, 0, 0, 2].into(), [10, 0, 0, 1].into())
            .reply_from(PEER)
            .emit(&mut rep)
            .unwrap();
        assert_eq!(r.respond(&rep, &p, &mut out), None);
        let mut echo_reply = ping(US, [10, 0, 0, 1], b"x");
        echo_reply[14 + 20] = 0;
        smoltcp::wire::Icmpv4Packet::new_unchecked(&mut echo_reply[14 + 20..]).fill_checksum();
        assert_eq!(r.respond(&echo_reply, &p, &mut out), None);
        assert_eq!(
            r.respond(&[0x08; 60], &p, &mut out),
            None,
            "EtherType 0x0808"
        );
        assert_eq!(r.counters().unsupported, 3);
        // The reply does not fit.
        assert_eq!(
            r.respond(&ping(US, [10, 0, 0, 1], &[0; 100]), &p, &mut out[..64]),
            None
        );
        assert_eq!(r.counters().buffer_too_small, 1);
        let c = r.counters();
        assert_eq!(c.arp_replies + c.echo_replies + c.nd_adverts, 0);
    }

    #[test]
    fn probes_and_duplicate_address_checks_are_answered() {
        let (p, mut r, mut out) = (port(), Responder::default(), [0u8; 256]);
        let mut probe = vec![0u8; 60];
        ArpFrame::request(PEER, Ipv4Addr::UNSPECIFIED, [10, 0, 0, 1].into())
            .emit(&mut probe)
            .unwrap();
        let n = r.respond(&probe, &p, &mut out).unwrap();
        assert_eq!(ArpFrame::parse(&out[..n]).unwrap().eth_dst, PEER);
        let mut dad = NdFrame::solicit(PEER, Ipv6Addr::UNSPECIFIED, "fe80::1".parse().unwrap());
        dad.lladdr = None;
        let mut f = [0u8; 128];
        let len = dad.emit(&mut f).unwrap();
        let n = r.respond(&f[..len], &p, &mut out).unwrap();
        let na = NdFrame::parse(&out[..n]).unwrap();
        assert_eq!(
            na.dst_ip,
            super::super::ndisc::ALL_NODES,
            "defends its address to all nodes"
        );
    }
}
