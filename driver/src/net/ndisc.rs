//! IPv6 neighbour discovery (RFC 4861) in an Ethernet / IPv6 frame: neighbour solicitations
//! and advertisements as a whole frame's `Repr` ([`NdFrame`]) over smoltcp's
//! [`Ipv6Packet`], [`Icmpv6Packet`] and [`NdiscRepr`] (ICMPv6 checksum verified and filled
//! in), and the frames the port sends: solicitations, solicited and unsolicited adverts.

use std::net::Ipv6Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Packet, Ipv6Repr, NdiscNeighborFlags, NdiscRepr,
    RawHardwareAddress,
};

use super::FrameError;
use super::framing::{self, ETHERTYPE_IPV6, ipv6_multicast_mac};

/// Bytes of the fixed IPv6 header.
const IPV6_LEN: usize = 40;
/// ICMPv6 types of neighbour solicitation and advertisement.
const NS: u8 = 135;
const NA: u8 = 136;
/// The hop limit every neighbour discovery message carries, and receivers insist on (RFC
/// 4861 section 7.1: proof that it was not forwarded).
pub const ND_HOP_LIMIT: u8 = 255;
/// All nodes on the link (`ff02::1`), where unsolicited adverts go.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xFF02, 0, 0, 0, 0, 0, 0, 1);

/// A solicitation or an advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdMessage {
    /// Who has `target`? (with the sender's MAC, unless it is a duplicate address check).
    Solicit,
    /// `target` is at the MAC given.
    Advert {
        /// The sender is a router.
        router: bool,
        /// The answer to a solicitation.
        solicited: bool,
        /// Replace what the receiver holds.
        override_: bool,
    },
}

/// An Ethernet frame carrying an IPv6 neighbour solicitation or advertisement.
///
/// ```
/// use rnic_driver::net::ndisc::{NdFrame, NdMessage};
///
/// let ns = NdFrame::solicit([2, 0, 0, 0, 0, 2], "fe80::2".parse().unwrap(), "fe80::1".parse().unwrap());
/// let mut buf = [0u8; 128];
/// let n = ns.emit(&mut buf)?;
/// let back = NdFrame::parse(&buf[..n])?; // ICMPv6 checksum verified
/// assert_eq!(back, ns);
/// assert_eq!(back.eth_dst, [0x33, 0x33, 0xFF, 0, 0, 1]); // the solicited-node group
/// let na = back.advert_from([2, 0, 0, 0, 0, 1]);
/// assert!(matches!(na.message, NdMessage::Advert { solicited: true, .. }));
/// assert_eq!((na.dst_ip, na.lladdr), (ns.src_ip, Some([2, 0, 0, 0, 0, 1])));
/// # Ok::<(), rnic_driver::net::FrameError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdFrame {
    /// The Ethernet destination.
    pub eth_dst: [u8; 6],
    /// The Ethernet source.
    pub eth_src: [u8; 6],
    /// The IPv6 source (unspecified in a duplicate address check).
    pub src_ip: Ipv6Addr,
    /// The IPv6 destination.
    pub dst_ip: Ipv6Addr,
    /// Solicitation or advertisement.
    pub message: NdMessage,
    /// The address asked about or advertised.
    pub target: Ipv6Addr,
    /// The link-layer address option: the sender's (solicitation) or the target's
    /// (advertisement).
    pub lladdr: Option<[u8; 6]>,
}

/// The solicited-node multicast address of `ip` (RFC 4291 section 2.7.1): `ff02::1:ff` and
/// its last three bytes.
///
/// ```
/// use rnic_driver::net::ndisc::solicited_node;
///
/// let s = solicited_node("2001:db8::12:3456".parse().unwrap());
/// assert_eq!(s, "ff02::1:ff12:3456".parse::<std::net::Ipv6Addr>().unwrap());
/// ```
pub fn solicited_node(ip: Ipv6Addr) -> Ipv6Addr {
    let o = ip.octets();
    let mut s = [0u8; 16];
    s[..2].copy_from_slice(&[0xFF, 0x02]);
    s[11..13].copy_from_slice(&[0x01, 0xFF]);
    s[13..].copy_from_slice(&o[13..]);
    Ipv6Addr::from(s)
}

impl NdFrame {
    /// Parses an Ethernet / IPv6 / ICMPv6 neighbour solicitation or advertisement, with
    /// RFC 4861's validity checks (checksum, hop limit 255, code 0, a unicast target, no
    /// link-layer option from an unspecified source, no solicited flag to a group) and
    /// RFC 4291's rule that no packet comes from a multicast address.
    ///
    /// ```
    /// use rnic_driver::net::{ndisc::NdFrame, FrameError};
    ///
    /// let mut f = [0u8; 60];
    /// f[12..14].copy_from_slice(&[0x86, 0xDD]);
    /// assert_eq!(NdFrame::parse(&f), Err(FrameError::Malformed)); // IP version 0
    /// assert_eq!(NdFrame::parse(&f[..50]), Err(FrameError::Short)); // no room for IPv6
    /// ```
    pub fn parse(frame: &[u8]) -> Result<NdFrame, FrameError> {
        let l2 = framing::parse(frame)?;
        if l2.ethertype != ETHERTYPE_IPV6 {
            return Err(FrameError::Unsupported);
        }
        let p = l2.payload;
        if p.len() < IPV6_LEN {
            return Err(FrameError::Short);
        }
        if p[0] >> 4 != 6 {
            return Err(FrameError::Malformed);
        }
        let ip = Ipv6Packet::new_checked(p).map_err(|_| FrameError::Short)?;
        let ip_repr = Ipv6Repr::parse(&ip).map_err(|_| FrameError::Malformed)?;
        if ip_repr.next_header != IpProtocol::Icmpv6 {
            return Err(FrameError::Unsupported);
        }
        let icmp_bytes = &p[IPV6_LEN..IPV6_LEN + ip_repr.payload_len];
        let Some(&msg_type) = icmp_bytes.first() else {
            return Err(FrameError::Short);
        };
        if !matches!(msg_type, NS | NA) {
            return Err(FrameError::Unsupported);
        }
        if ip_repr.hop_limit != ND_HOP_LIMIT {
            return Err(FrameError::Malformed);
        }
        let icmp = Icmpv6Packet::new_checked(icmp_bytes).map_err(|_| FrameError::Short)?;
        let (src, dst) = (ip_repr.src_addr, ip_repr.dst_addr);
        let repr = Icmpv6Repr::parse(&src, &dst, &icmp, &ChecksumCapabilities::default())
            .map_err(|_| FrameError::Malformed)?;
        let Icmpv6Repr::Ndisc(nd) = repr else {
            return Err(FrameError::Malformed);
        };
        let (message, target, lladdr) = match nd {
            NdiscRepr::NeighborSolicit {
                target_addr,
                lladdr,
            } => (NdMessage::Solicit, target_addr, lladdr),
            NdiscRepr::NeighborAdvert {
                flags,
                target_addr,
                lladdr,
            } => (
                NdMessage::Advert {
                    router: flags.contains(NdiscNeighborFlags::ROUTER),
                    solicited: flags.contains(NdiscNeighborFlags::SOLICITED),
                    override_: flags.contains(NdiscNeighborFlags::OVERRIDE),
                },
                target_addr,
                lladdr,
            ),
            _ => return Err(FrameError::Unsupported),
        };
        let lladdr = match lladdr {
            None => None,
            Some(a) => Some(<[u8; 6]>::try_from(a.as_bytes()).map_err(|_| FrameError::Malformed)?),
        };
        // A multicast source is no sender: an advertisement answering it would go to a
        // group with the solicited flag set, which the receiver must discard.
        let invalid = target.is_multicast()
            || src.is_multicast()
            || (src.is_unspecified() && (lladdr.is_some() || message != NdMessage::Solicit))
            || (dst.is_multicast()
                && matches!(
                    message,
                    NdMessage::Advert {
                        solicited: true,
                        ..
                    }
                ));
        if invalid {
            return Err(FrameError::Malformed);
        }
        Ok(NdFrame {
            eth_dst: l2.dst,
            eth_src: l2.src,
            src_ip: src,
            dst_ip: dst,
            message,
            target,
            lladdr,
        })
    }

    /// Writes the frame into `out` (hop limit 255, checksum filled in); returns its length.
    ///
    /// ```
    /// # use rnic_driver::net::{ndisc::NdFrame, FrameError};
    /// let na = NdFrame::unsolicited_advert([2, 0, 0, 0, 0, 1], "fe80::1".parse().unwrap());
    /// assert_eq!(na.emit(&mut [0u8; 64]), Err(FrameError::BufferTooSmall)); // 86 bytes
    /// ```
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, FrameError> {
        let lladdr = self.lladdr.map(|m| RawHardwareAddress::from_bytes(&m));
        let nd = match self.message {
            NdMessage::Solicit => NdiscRepr::NeighborSolicit {
                target_addr: self.target,
                lladdr,
            },
            NdMessage::Advert {
                router,
                solicited,
                override_,
            } => {
                let mut flags = NdiscNeighborFlags::empty();
                flags.set(NdiscNeighborFlags::ROUTER, router);
                flags.set(NdiscNeighborFlags::SOLICITED, solicited);
                flags.set(NdiscNeighborFlags::OVERRIDE, override_);
                NdiscRepr::NeighborAdvert {
                    flags,
                    target_addr: self.target,
                    lladdr,
                }
            }
        };
        let icmp = Icmpv6Repr::Ndisc(nd);
        let icmp_len = icmp.buffer_len();
        let n = framing::emit(
            out,
            self.eth_dst,
            self.eth_src,
            ETHERTYPE_IPV6,
            IPV6_LEN + icmp_len,
        )?;
        let payload = framing::payload_mut(out, IPV6_LEN + icmp_len);
        Ipv6Repr {
            src_addr: self.src_ip,
            dst_addr: self.dst_ip,
            next_header: IpProtocol::Icmpv6,
            payload_len: icmp_len,
            hop_limit: ND_HOP_LIMIT,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut *payload));
        icmp.emit(
            &self.src_ip,
            &self.dst_ip,
            &mut Icmpv6Packet::new_unchecked(&mut payload[IPV6_LEN..]),
            &ChecksumCapabilities::default(),
        );
        Ok(n)
    }

    /// A solicitation from `mac` / `src` for `target`, to `target`'s solicited-node group.
    ///
    /// ```
    /// # use rnic_driver::net::ndisc::NdFrame;
    /// let ns = NdFrame::solicit([2, 0, 0, 0, 0, 2], "fe80::2".parse().unwrap(), "fe80::1".parse().unwrap());
    /// assert_eq!(ns.lladdr, Some([2, 0, 0, 0, 0, 2]));
    /// ```
    pub fn solicit(mac: [u8; 6], src: Ipv6Addr, target: Ipv6Addr) -> NdFrame {
        let group = solicited_node(target);
        NdFrame {
            eth_dst: ipv6_multicast_mac(group),
            eth_src: mac,
            src_ip: src,
            dst_ip: group,
            message: NdMessage::Solicit,
            target,
            lladdr: Some(mac),
        }
    }

    /// The solicitation, sent to `peer_mac` and `target` directly: how a stale entry is
    /// confirmed (RFC 4861 section 7.3.3, a unicast probe).
    ///
    /// ```
    /// # use rnic_driver::net::ndisc::NdFrame;
    /// let ns = NdFrame::solicit([2, 0, 0, 0, 0, 2], "fe80::2".parse().unwrap(), "fe80::1".parse().unwrap())
    ///     .unicast_to([2, 0, 0, 0, 0, 1]);
    /// assert_eq!((ns.eth_dst, ns.dst_ip), ([2, 0, 0, 0, 0, 1], "fe80::1".parse().unwrap()));
    /// ```
    pub fn unicast_to(self, peer_mac: [u8; 6]) -> NdFrame {
        NdFrame {
            eth_dst: peer_mac,
            dst_ip: self.target,
            ..self
        }
    }

    /// The advertisement that answers this solicitation from `mac`, the owner of its
    /// target: to the solicitor (solicited, override), or to all nodes when the
    /// solicitation was a duplicate address check (RFC 4861 section 7.2.4).
    ///
    /// ```
    /// # use rnic_driver::net::ndisc::{NdFrame, NdMessage, ALL_NODES};
    /// let mut dad = NdFrame::solicit([2, 0, 0, 0, 0, 2], "::".parse().unwrap(), "fe80::1".parse().unwrap());
    /// dad.lladdr = None;
    /// let na = dad.advert_from([2, 0, 0, 0, 0, 1]);
    /// assert_eq!(na.dst_ip, ALL_NODES);
    /// assert!(matches!(na.message, NdMessage::Advert { solicited: false, override_: true, .. }));
    /// ```
    pub fn advert_from(&self, mac: [u8; 6]) -> NdFrame {
        let dad = self.src_ip.is_unspecified();
        let (dst_ip, eth_dst) = if dad {
            (ALL_NODES, ipv6_multicast_mac(ALL_NODES))
        } else {
            (self.src_ip, self.lladdr.unwrap_or(self.eth_src))
        };
        NdFrame {
            eth_dst,
            eth_src: mac,
            src_ip: self.target,
            dst_ip,
            message: NdMessage::Advert {
                router: false,
                solicited: !dad,
                override_: true,
            },
            target: self.target,
            lladdr: Some(mac),
        }
    }

    /// An unsolicited advertisement to all nodes that `ip` is at `mac` (override set):
    /// what a port sends when an address comes up, as gratuitous ARP is for IPv4.
    ///
    /// ```
    /// # use rnic_driver::net::ndisc::{NdFrame, ALL_NODES};
    /// let na = NdFrame::unsolicited_advert([2, 0, 0, 0, 0, 1], "fe80::1".parse().unwrap());
    /// assert_eq!((na.dst_ip, na.eth_dst), (ALL_NODES, [0x33, 0x33, 0, 0, 0, 1]));
    /// ```
    pub fn unsolicited_advert(mac: [u8; 6], ip: Ipv6Addr) -> NdFrame {
        NdFrame {
            eth_dst: ipv6_multicast_mac(ALL_NODES),
            eth_src: mac,
            src_ip: ip,
            dst_ip: ALL_NODES,
            message: NdMessage::Advert {
                router: false,
                solicited: false,
                override_: true,
            },
            target: ip,
            lladdr: Some(mac),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns_bytes() -> ([u8; 128], usize) {
        let mut b = [0u8; 128];
        let n = NdFrame::solicit(
            [2, 0, 0, 0, 0, 2],
            "fe80::2".parse().unwrap(),
            "fe80::1".parse().unwrap(),
        )
        .emit(&mut b)
        .unwrap();
        (b, n)
    }

    #[test]
    fn bytes_on_the_wire() {
        let (b, n) = ns_bytes();
        assert_eq!(n, 14 + 40 + 24 + 8, "NS with a source link-layer option");
        assert_eq!(&b[12..14], [0x86, 0xDD]);
        assert_eq!((b[14 + 6], b[14 + 7]), (58, 255), "ICMPv6, hop limit 255");
        assert_eq!(b[54], NS);
        assert_eq!(
            &b[54 + 24..54 + 26],
            [1, 1],
            "source link-layer address option"
        );
        assert_eq!(&b[54 + 26..54 + 32], [2, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn bad_frames() {
        let (b, n) = ns_bytes();
        assert!(NdFrame::parse(&b[..n]).is_ok());
        assert_eq!(NdFrame::parse(&b[..n - 1]), Err(FrameError::Short));
        let mut sum = b;
        sum[54 + 2] ^= 1;
        assert_eq!(
            NdFrame::parse(&sum[..n]),
            Err(FrameError::Malformed),
            "checksum"
        );
        let mut hops = b;
        hops[14 + 7] = 64;
        assert_eq!(
            NdFrame::parse(&hops[..n]),
            Err(FrameError::Malformed),
            "forwarded"
        );
        let mut echo = b;
        echo[54] = 128;
        assert_eq!(NdFrame::parse(&echo[..n]), Err(FrameError::Unsupported));
        let mut udp = b;
        udp[14 + 6] = 17;
        assert_eq!(NdFrame::parse(&udp[..n]), Err(FrameError::Unsupported));
        let mut opt = b;
        opt[54 + 25] = 0; // option length 0: RFC 4861 says discard
        assert!(NdFrame::parse(&opt[..n]).is_err());
        let mut v = b;
        v[14] = 0x40;
        assert_eq!(
            NdFrame::parse(&v[..n]),
            Err(FrameError::Malformed),
            "version 4"
        );
    }

    #[test]
    fn a_multicast_source_is_malformed() {
        // Found by the arp_icmp fuzz target: the responder answered this solicitation with an
        // advertisement to ff80::2, solicited flag set, that parse (rightly) refused.
        let f = NdFrame::solicit(
            [2, 0, 0, 0, 0, 2],
            "ff80::2".parse().unwrap(),
            "fe80::1".parse().unwrap(),
        );
        let mut b = [0u8; 128];
        let n = f.emit(&mut b).unwrap();
        assert_eq!(NdFrame::parse(&b[..n]), Err(FrameError::Malformed));
    }

    #[test]
    fn duplicate_address_checks_carry_no_link_layer_option() {
        let mut f = NdFrame::solicit(
            [2, 0, 0, 0, 0, 2],
            Ipv6Addr::UNSPECIFIED,
            "fe80::1".parse().unwrap(),
        );
        let mut b = [0u8; 128];
        let n = f.emit(&mut b).unwrap();
        assert_eq!(NdFrame::parse(&b[..n]), Err(FrameError::Malformed));
        f.lladdr = None;
        let n = f.emit(&mut b).unwrap();
        assert_eq!(NdFrame::parse(&b[..n]), Ok(f));
    }
}
