//! IPv4 and IPv6 headers as RoCE v2 uses them, over smoltcp's [`Ipv4Packet`] and
//! [`Ipv6Packet`].
//!
//! Unlike smoltcp's own `Ipv4Repr`, [`Ipv4Repr`] keeps the IP ID, DSCP, ECN and DF: the ICRC
//! covers the ID, and reproducing an rxe frame byte for byte needs all of them.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use smoltcp::wire::{IpProtocol, Ipv4Packet, Ipv6Packet};

use super::{HeaderKind, WireError, be16, check_len};

/// Length of an IPv4 header without options (IHL 5).
pub(crate) const IPV4_HEADER_LEN: usize = 20;
/// Length of the IPv6 fixed header.
pub(crate) const IPV6_HEADER_LEN: usize = 40;
/// IP protocol number of UDP.
const PROTO_UDP: u8 = 17;

/// Wraps `buffer` as smoltcp's [`Ipv4Packet`] after the checks that make its accessors safe
/// and that RoCE v2 requires of the layout: at least 20 bytes, version 4, IHL 5 (no options),
/// and a total length between 20 and the buffer length.
///
/// ```
/// use rnic_emulator::wire::{ipv4_packet, WireError};
///
/// let mut hdr = [0u8; 20];
/// hdr[0] = 0x45; // version 4, IHL 5
/// hdr[3] = 20; // total length
/// assert!(ipv4_packet(&hdr[..]).is_ok());
/// hdr[0] = 0x46; // IHL 6: options, which RoCE v2 does not use
/// assert!(matches!(ipv4_packet(&hdr[..]), Err(WireError::BadIhl { .. })));
/// ```
pub fn ipv4_packet<T: AsRef<[u8]>>(buffer: T) -> Result<Ipv4Packet<T>, WireError> {
    let buf = buffer.as_ref();
    check_len(buf, IPV4_HEADER_LEN, HeaderKind::Ipv4)?;
    let version = buf[0] >> 4;
    if version != 4 {
        return Err(WireError::IpVersion {
            expected: 4,
            found: version,
        });
    }
    let ihl = buf[0] & 0x0F;
    if ihl != 5 {
        return Err(WireError::BadIhl { ihl });
    }
    let total = usize::from(be16(buf, 2));
    if total < IPV4_HEADER_LEN || total > buf.len() {
        return Err(WireError::IpLength {
            ip_len: total,
            available: buf.len(),
        });
    }
    Ok(Ipv4Packet::new_unchecked(buffer))
}

/// The folded one's complement sum (RFC 1071) of a 20-byte IPv4 header: `0xFFFF` when its
/// header checksum is right. Every frame's emit and parse takes one; smoltcp's general
/// `checksum::data` walks any length two bytes at a time, this one is ten adds the compiler
/// lays out flat (see the test that holds it to smoltcp's answer).
fn ipv4_header_sum(h: &[u8; IPV4_HEADER_LEN]) -> u16 {
    let mut sum = 0u32;
    for w in h.chunks_exact(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    // Ten 16-bit words fit 20 bits: two folds carry everything.
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum as u16
}

/// The first 20 bytes of `buf`, which [`ipv4_packet`] or the caller made sure it holds.
fn header_of(buf: &[u8]) -> &[u8; IPV4_HEADER_LEN] {
    buf[..IPV4_HEADER_LEN]
        .try_into()
        .expect("an IPv4 header is 20 bytes")
}

/// Whether an IPv4 header's checksum is right. Like smoltcp's `verify_checksum`, a build for
/// fuzzing (`--cfg fuzzing`, which cargo-fuzz sets) takes every checksum as right, so the
/// fuzzer reaches past it.
fn ipv4_checksum_ok(buf: &[u8]) -> bool {
    cfg!(fuzzing) || ipv4_header_sum(header_of(buf)) == 0xFFFF
}

/// Fills in the header checksum of an IPv4 header (20 bytes, the rest of it written).
pub(crate) fn fill_ipv4_checksum<T: AsRef<[u8]> + AsMut<[u8]>>(packet: &mut Ipv4Packet<T>) {
    packet.set_checksum(0);
    let sum = !ipv4_header_sum(header_of(packet.as_ref()));
    packet.set_checksum(sum);
}

/// Wraps `buffer` as smoltcp's [`Ipv6Packet`] after checking: at least 40 bytes, version 6,
/// and 40 + payload length within the buffer.
///
/// ```
/// use rnic_emulator::wire::ipv6_packet;
///
/// let mut hdr = [0u8; 48];
/// hdr[0] = 0x60; // version 6
/// hdr[5] = 8; // payload length
/// assert!(ipv6_packet(&hdr[..]).is_ok());
/// assert!(ipv6_packet(&hdr[..47]).is_err()); // the payload does not fit
/// ```
pub fn ipv6_packet<T: AsRef<[u8]>>(buffer: T) -> Result<Ipv6Packet<T>, WireError> {
    let buf = buffer.as_ref();
    check_len(buf, IPV6_HEADER_LEN, HeaderKind::Ipv6)?;
    let version = buf[0] >> 4;
    if version != 6 {
        return Err(WireError::IpVersion {
            expected: 6,
            found: version,
        });
    }
    let total = IPV6_HEADER_LEN + usize::from(be16(buf, 4));
    if total > buf.len() {
        return Err(WireError::IpLength {
            ip_len: total,
            available: buf.len(),
        });
    }
    Ok(Ipv6Packet::new_unchecked(buffer))
}

/// A parsed IPv4 header of a RoCE v2 packet (IHL 5, protocol UDP, not fragmented).
///
/// The total length is not stored: [`Ipv4Repr::emit`] takes the payload length, and
/// [`super::PacketRepr::emit`] computes it.
///
/// ```
/// use core::net::Ipv4Addr;
/// use rnic_emulator::wire::{ipv4_packet, Ipv4Packet, Ipv4Repr};
///
/// let mut repr = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
/// repr.ident = 0x1234;
/// let mut buf = [0u8; 20 + 8];
/// repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), 8);
/// assert_eq!(buf[2..6], [0, 28, 0x12, 0x34]); // total length, ID
/// assert_eq!(Ipv4Repr::parse(&ipv4_packet(&buf[..])?)?, repr); // the checksum was filled in
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Identification (covered by the ICRC; rxe uses the kernel's generator).
    pub ident: u16,
    /// DSCP (traffic class >> 2).
    pub dscp: u8,
    /// ECN (traffic class & 3).
    pub ecn: u8,
    /// DF flag (rxe sets it).
    pub dont_frag: bool,
    /// Time to live (the address vector's hop limit).
    pub ttl: u8,
}

impl Ipv4Repr {
    /// A header as rxe sends it: ID 0, TOS 0, DF set, TTL 64.
    ///
    /// ```
    /// use core::net::Ipv4Addr;
    /// use rnic_emulator::wire::Ipv4Repr;
    ///
    /// let r = Ipv4Repr::new(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
    /// assert_eq!((r.ident, r.dscp, r.ecn, r.dont_frag, r.ttl), (0, 0, 0, true, 64));
    /// ```
    pub const fn new(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        Ipv4Repr {
            src,
            dst,
            ident: 0,
            dscp: 0,
            ecn: 0,
            dont_frag: true,
            ttl: 64,
        }
    }

    /// Parses an IPv4 header: version 4, IHL 5, consistent total length, not a fragment,
    /// protocol UDP, correct header checksum.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Self, WireError> {
        let packet = ipv4_packet(packet.as_ref())?;
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(WireError::Fragmented {
                offset: packet.frag_offset() / 8,
                more: packet.more_frags(),
            });
        }
        let protocol = u8::from(packet.next_header());
        if protocol != PROTO_UDP {
            return Err(WireError::NotUdp { protocol });
        }
        if !ipv4_checksum_ok(packet.as_ref()) {
            return Err(WireError::BadIpChecksum {
                found: packet.checksum(),
            });
        }
        Ok(Ipv4Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            ident: packet.ident(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            dont_frag: packet.dont_frag(),
            ttl: packet.hop_limit(),
        })
    }

    /// The header length (20).
    pub const fn buffer_len(&self) -> usize {
        IPV4_HEADER_LEN
    }

    /// Writes the header for `payload_len` bytes of UDP datagram and fills in the header
    /// checksum. The packet must hold 20 bytes and `payload_len` must fit the 16-bit total
    /// length (it is truncated otherwise; [`super::PacketRepr::emit`] checks).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Ipv4Packet<T>,
        payload_len: usize,
    ) {
        packet.set_version(4);
        packet.set_header_len(IPV4_HEADER_LEN as u8);
        packet.set_dscp(self.dscp);
        packet.set_ecn(self.ecn);
        packet.set_total_len((IPV4_HEADER_LEN + payload_len) as u16);
        packet.set_ident(self.ident);
        packet.clear_flags();
        packet.set_dont_frag(self.dont_frag);
        packet.set_frag_offset(0);
        packet.set_hop_limit(self.ttl);
        packet.set_next_header(IpProtocol::Udp);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
        fill_ipv4_checksum(packet);
    }
}

/// A parsed IPv6 header of a RoCE v2 packet (next header UDP, no extension headers).
///
/// ```
/// use core::net::Ipv6Addr;
/// use rnic_emulator::wire::{ipv6_packet, Ipv6Packet, Ipv6Repr};
///
/// let mut repr = Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
/// repr.flow_label = 0xABCDE;
/// let mut buf = [0u8; 40 + 8];
/// repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]), 8);
/// assert_eq!(buf[..4], [0x60, 0x0A, 0xBC, 0xDE]); // version, traffic class, flow label
/// assert_eq!(Ipv6Repr::parse(&ipv6_packet(&buf[..])?)?, repr);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits; rxe sends 0).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// A header with traffic class 0, flow label 0 and hop limit 64.
    ///
    /// ```
    /// use core::net::Ipv6Addr;
    /// use rnic_emulator::wire::Ipv6Repr;
    ///
    /// let r = Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
    /// assert_eq!((r.traffic_class, r.flow_label, r.hop_limit), (0, 0, 64));
    /// assert_eq!(r.buffer_len(), 40);
    /// ```
    pub const fn new(src: Ipv6Addr, dst: Ipv6Addr) -> Self {
        Ipv6Repr {
            src,
            dst,
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
        }
    }

    /// Parses an IPv6 header: version 6, consistent payload length, next header UDP.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Self, WireError> {
        let packet = ipv6_packet(packet.as_ref())?;
        let protocol = u8::from(packet.next_header());
        if protocol != PROTO_UDP {
            return Err(WireError::NotUdp { protocol });
        }
        Ok(Ipv6Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
            hop_limit: packet.hop_limit(),
        })
    }

    /// The header length (40).
    pub const fn buffer_len(&self) -> usize {
        IPV6_HEADER_LEN
    }

    /// Writes the header for `payload_len` bytes of UDP datagram. The packet must hold 40
    /// bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Ipv6Packet<T>,
        payload_len: usize,
    ) {
        packet.set_version(6);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label & 0x000F_FFFF);
        packet.set_payload_len(payload_len as u16);
        packet.set_next_header(IpProtocol::Udp);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
    }
}

/// An IPv4 or IPv6 header.
///
/// ```
/// use core::net::{IpAddr, Ipv4Addr};
/// use rnic_emulator::wire::{IpRepr, Ipv4Repr};
///
/// let ip = IpRepr::V4(Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)));
/// let mut buf = [0u8; 20 + 12];
/// ip.emit(&mut buf, 12);
/// assert_eq!(IpRepr::parse(4, &buf)?, (ip, 32)); // header and packet length
/// assert_eq!(ip.dst(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr {
    /// IPv4.
    V4(Ipv4Repr),
    /// IPv6.
    V6(Ipv6Repr),
}

impl IpRepr {
    /// Parses the IP header at the start of `buffer` as IPv4 or IPv6 by `version` (4 or 6,
    /// as announced by the EtherType). Returns the header and the IP packet length (header
    /// + payload).
    ///
    /// ```
    /// use rnic_emulator::wire::{IpRepr, WireError};
    ///
    /// let mut hdr = [0u8; 40];
    /// hdr[0] = 0x45; // an IPv4 header...
    /// let err = IpRepr::parse(6, &hdr).unwrap_err(); // ...where the EtherType said IPv6
    /// assert!(matches!(err, WireError::IpVersion { .. }));
    /// ```
    pub fn parse(version: u8, buffer: &[u8]) -> Result<(Self, usize), WireError> {
        if version == 6 {
            let packet = ipv6_packet(buffer)?;
            let len = packet.total_len();
            Ok((IpRepr::V6(Ipv6Repr::parse(&packet)?), len))
        } else {
            let packet = ipv4_packet(buffer)?;
            let len = usize::from(packet.total_len());
            Ok((IpRepr::V4(Ipv4Repr::parse(&packet)?), len))
        }
    }

    /// 4 or 6.
    ///
    /// ```
    /// use core::net::Ipv6Addr;
    /// use rnic_emulator::wire::{IpRepr, Ipv6Repr};
    ///
    /// let ip = IpRepr::V6(Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST));
    /// assert_eq!((ip.version(), ip.buffer_len()), (6, 40));
    /// ```
    pub const fn version(&self) -> u8 {
        match self {
            IpRepr::V4(_) => 4,
            IpRepr::V6(_) => 6,
        }
    }

    /// Source address.
    ///
    /// ```
    /// use core::net::{IpAddr, Ipv4Addr};
    /// use rnic_emulator::wire::{IpRepr, Ipv4Repr};
    ///
    /// let ip = IpRepr::V4(Ipv4Repr::new(Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::LOCALHOST));
    /// assert_eq!(ip.src(), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
    /// ```
    pub fn src(&self) -> IpAddr {
        match self {
            IpRepr::V4(r) => IpAddr::V4(r.src),
            IpRepr::V6(r) => IpAddr::V6(r.src),
        }
    }

    /// Destination address.
    ///
    /// ```
    /// use core::net::{IpAddr, Ipv6Addr};
    /// use rnic_emulator::wire::{IpRepr, Ipv6Repr};
    ///
    /// let ip = IpRepr::V6(Ipv6Repr::new(Ipv6Addr::UNSPECIFIED, Ipv6Addr::LOCALHOST));
    /// assert_eq!(ip.dst(), IpAddr::V6(Ipv6Addr::LOCALHOST));
    /// ```
    pub fn dst(&self) -> IpAddr {
        match self {
            IpRepr::V4(r) => IpAddr::V4(r.dst),
            IpRepr::V6(r) => IpAddr::V6(r.dst),
        }
    }

    /// The header length (20 or 40).
    ///
    /// ```
    /// use core::net::Ipv4Addr;
    /// use rnic_emulator::wire::{IpRepr, Ipv4Repr};
    ///
    /// let ip = IpRepr::V4(Ipv4Repr::new(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST));
    /// assert_eq!(ip.buffer_len(), 20);
    /// ```
    pub const fn buffer_len(&self) -> usize {
        match self {
            IpRepr::V4(_) => IPV4_HEADER_LEN,
            IpRepr::V6(_) => IPV6_HEADER_LEN,
        }
    }

    /// The largest UDP datagram the header's length field can describe.
    ///
    /// ```
    /// use core::net::{Ipv4Addr, Ipv6Addr};
    /// use rnic_emulator::wire::{IpRepr, Ipv4Repr, Ipv6Repr};
    ///
    /// let v4 = IpRepr::V4(Ipv4Repr::new(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST));
    /// let v6 = IpRepr::V6(Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST));
    /// assert_eq!((v4.max_payload_len(), v6.max_payload_len()), (65535 - 20, 65535));
    /// ```
    pub const fn max_payload_len(&self) -> usize {
        match self {
            IpRepr::V4(_) => u16::MAX as usize - IPV4_HEADER_LEN,
            IpRepr::V6(_) => u16::MAX as usize,
        }
    }

    /// Writes the header at the start of `buffer` for `payload_len` bytes of UDP datagram.
    /// `buffer` must hold [`Self::buffer_len`] bytes.
    ///
    /// ```
    /// use core::net::Ipv6Addr;
    /// use rnic_emulator::wire::{IpRepr, Ipv6Repr};
    ///
    /// let ip = IpRepr::V6(Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST));
    /// let mut buf = [0u8; 40];
    /// ip.emit(&mut buf, 100);
    /// assert_eq!((buf[0] >> 4, u16::from_be_bytes([buf[4], buf[5]]), buf[6]), (6, 100, 17)); // UDP
    /// ```
    pub fn emit(&self, buffer: &mut [u8], payload_len: usize) {
        match self {
            IpRepr::V4(r) => r.emit(&mut Ipv4Packet::new_unchecked(buffer), payload_len),
            IpRepr::V6(r) => r.emit(&mut Ipv6Packet::new_unchecked(buffer), payload_len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The flat header sum gives smoltcp's checksum for any header.
        #[test]
        fn header_checksum_is_smoltcps(mut h in proptest::array::uniform20(proptest::prelude::any::<u8>())) {
            h[0] = 0x45; // IHL 5, as `ipv4_packet` requires (smoltcp sums IHL words)
            let mut ours = h;
            fill_ipv4_checksum(&mut Ipv4Packet::new_unchecked(&mut ours[..]));
            let mut theirs = h;
            Ipv4Packet::new_unchecked(&mut theirs[..]).fill_checksum();
            proptest::prop_assert_eq!(ours, theirs);
            proptest::prop_assert!(ipv4_checksum_ok(&ours));
            proptest::prop_assert_eq!(
                ipv4_checksum_ok(&h),
                Ipv4Packet::new_unchecked(&h[..]).verify_checksum()
            );
        }
    }

    // IPv4 header of roce-v2.md worked example (a).
    const EXAMPLE: [u8; 20] = [
        0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5, 0xc0, 0xa8, 0x00,
        0x07, 0xc0, 0xa8, 0x00, 0x07,
    ];

    fn example_packet() -> [u8; 64] {
        let mut p = [0u8; 64];
        p[..20].copy_from_slice(&EXAMPLE);
        p
    }

    #[test]
    fn ipv4_round_trip() {
        let p = example_packet();
        let repr = Ipv4Repr::parse(&ipv4_packet(&p[..]).unwrap()).unwrap();
        assert_eq!(repr.ident, 0x0478);
        assert_eq!((repr.dscp, repr.ecn), (0, 1));
        assert!(repr.dont_frag);
        assert_eq!(repr.ttl, 64);
        assert_eq!(repr.src, Ipv4Addr::new(192, 168, 0, 7));
        let mut out = [0u8; 20];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]), 44);
        assert_eq!(out, EXAMPLE);
    }

    #[test]
    fn ipv4_errors() {
        let p = example_packet();
        assert!(matches!(
            ipv4_packet(&p[..19]),
            Err(WireError::Truncated {
                header: HeaderKind::Ipv4,
                ..
            })
        ));
        assert_eq!(
            ipv4_packet(&p[..63]).err(),
            Some(WireError::IpLength {
                ip_len: 64,
                available: 63
            })
        );
        let mut q = p;
        q[0] = 0x65;
        assert_eq!(
            ipv4_packet(&q[..]).err(),
            Some(WireError::IpVersion {
                expected: 4,
                found: 6
            })
        );
        q[0] = 0x46;
        assert_eq!(
            ipv4_packet(&q[..]).err(),
            Some(WireError::BadIhl { ihl: 6 })
        );
        q = p;
        q[9] = 6;
        assert_eq!(
            Ipv4Repr::parse(&ipv4_packet(&q[..]).unwrap()),
            Err(WireError::NotUdp { protocol: 6 })
        );
        q = p;
        q[11] ^= 1;
        assert!(matches!(
            Ipv4Repr::parse(&ipv4_packet(&q[..]).unwrap()),
            Err(WireError::BadIpChecksum { .. })
        ));
        q = p;
        q[6] = 0x20; // MF
        assert!(matches!(
            Ipv4Repr::parse(&ipv4_packet(&q[..]).unwrap()),
            Err(WireError::Fragmented { more: true, .. })
        ));
        q = p;
        q[3] = 19;
        assert_eq!(
            ipv4_packet(&q[..]).err(),
            Some(WireError::IpLength {
                ip_len: 19,
                available: 64
            })
        );
    }

    #[test]
    fn ipv6_round_trip() {
        let repr = Ipv6Repr {
            src: "fe80::1".parse().unwrap(),
            dst: "::ffff:10.11.0.3".parse().unwrap(),
            traffic_class: 0xA5,
            flow_label: 0x12345,
            hop_limit: 1,
        };
        let mut buf = [0u8; 60];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]), 20);
        assert_eq!(&buf[..4], &[0x6A, 0x51, 0x23, 0x45]);
        let (parsed, len) = IpRepr::parse(6, &buf).unwrap();
        assert_eq!(parsed, IpRepr::V6(repr));
        assert_eq!(len, 60);
        assert!(matches!(
            IpRepr::parse(6, &buf[..59]),
            Err(WireError::IpLength { ip_len: 60, .. })
        ));
        assert_eq!(
            IpRepr::parse(4, &buf).err(),
            Some(WireError::IpVersion {
                expected: 4,
                found: 6
            })
        );
    }
}
