//! Whole RoCE v2 frames: the checked view [`RocePacket`] and the parsed [`PacketRepr`].
//!
//! `Ethernet [802.1Q] | IPv4 or IPv6 | UDP 4791 | BTH | ext headers | payload | pad | ICRC`.
//! The ICRC is found from the UDP length, never from the end of the frame: frames shorter than
//! 60 bytes are padded by Ethernet, and anything after the IP packet is ignored.

use smoltcp::wire::{EthernetFrame, EthernetProtocol, Ipv4Packet, Ipv6Packet, UdpPacket};

use super::aeth::AETH_LEN;
use super::atomic::{ATOMIC_ACK_ETH_LEN, ATOMIC_ETH_LEN};
use super::bth::BTH_LEN;
use super::cnp::CNP_LEN;
use super::deth::DETH_LEN;
use super::eth::{ETH_HEADER_LEN, ETH_MIN_FRAME_LEN, TPID_8021Q, VLAN_TAG_LEN};
use super::icrc::{self, ICRC_LEN};
use super::ieth::IETH_LEN;
use super::imm::IMM_DT_LEN;
use super::ip::{IPV4_HEADER_LEN, IPV6_HEADER_LEN};
use super::reth::RETH_LEN;
use super::udp::UDP_HEADER_LEN;
use super::{
    AethHeader, AethRepr, AtomicAckEthHeader, AtomicAckEthRepr, AtomicEthHeader, AtomicEthRepr,
    BthHeader, BthRepr, CnpHeader, CnpRepr, DethHeader, DethRepr, EthRepr, HeaderKind, IethHeader,
    IethRepr, ImmDtHeader, ImmDtRepr, IpRepr, Opcode, PayloadRule, ROCE_V2_PORT, RethHeader,
    RethRepr, UdpRepr, WireError, be16, check_len, udp_packet,
};

/// A checked, zero-copy view of a whole RoCE v2 frame.
///
/// [`RocePacket::new_checked`] validates the structure once (Ethernet type, IP version and
/// layout, lengths, UDP port, opcode, TVer, extension headers, pad) and remembers where each
/// part is, so the accessors cannot panic. It does not check the ICRC: call
/// [`RocePacket::verify_icrc`].
///
/// ```
/// use rnic_emulator::wire::{Opcode, RocePacket};
/// # use rnic_emulator::wire::*;
/// # use core::net::Ipv4Addr;
/// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
/// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
/// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
/// # let mut buf = [0u8; 128];
/// # let len = repr.emit(&mut buf, b"hello").unwrap();
/// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
///
/// let pkt = RocePacket::new_checked(frame)?;
/// assert_eq!(pkt.opcode(), Opcode::RcSendOnly);
/// assert_eq!((pkt.payload(), pkt.pad()), (&b"hello"[..], &[0u8; 3][..]));
/// pkt.verify_icrc()?;
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RocePacket<T: AsRef<[u8]>> {
    buffer: T,
    ip_off: usize,
    /// The IP header as checked: [`PacketRepr::parse_packet`] takes it from here rather
    /// than parse (and checksum) it a second time. Nothing can change the header under the
    /// view: only the payload and the ICRC are writable.
    ip: IpRepr,
    udp_off: usize,
    payload_off: usize,
    payload_len: usize,
    icrc_off: usize,
    opcode: Opcode,
}

impl<T: AsRef<[u8]>> RocePacket<T> {
    /// Checks the structure of the frame in `buffer` (see the type's documentation).
    ///
    /// ```
    /// use rnic_emulator::wire::{HeaderKind, RocePacket, WireError};
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// assert!(RocePacket::new_checked(frame).is_ok());
    /// let err = RocePacket::new_checked(&frame[..10]).unwrap_err();
    /// assert!(matches!(err, WireError::Truncated { header: HeaderKind::Ethernet, .. }));
    /// ```
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let frame = buffer.as_ref();
        // Ethernet and 802.1Q.
        check_len(frame, ETH_HEADER_LEN, HeaderKind::Ethernet)?;
        let mut ethertype = be16(frame, 12);
        let mut ip_off = ETH_HEADER_LEN;
        if ethertype == TPID_8021Q {
            check_len(frame, ETH_HEADER_LEN + VLAN_TAG_LEN, HeaderKind::Vlan)?;
            ethertype = be16(frame, 16);
            ip_off += VLAN_TAG_LEN;
        }
        let ip_bytes = &frame[ip_off..];
        // IP: the version must match the EtherType; lengths must fit the frame.
        let (ip_version, ip_repr_len) = match EthernetProtocol::from(ethertype) {
            EthernetProtocol::Ipv4 => (4, IPV4_HEADER_LEN),
            EthernetProtocol::Ipv6 => (6, IPV6_HEADER_LEN),
            _ => return Err(WireError::NotIp { ethertype }),
        };
        let (ip, ip_len) = IpRepr::parse(ip_version, ip_bytes)?;
        let udp_off = ip_off + ip_repr_len;
        // `ip_len` is at most `ip_bytes.len()` and at least the header length (checked).
        let udp_bytes = frame
            .get(udp_off..ip_off + ip_len)
            .ok_or(WireError::IpLength {
                ip_len,
                available: ip_bytes.len(),
            })?;
        // UDP: port 4791, length equal to the IP payload.
        check_len(udp_bytes, UDP_HEADER_LEN, HeaderKind::Udp)?;
        let dst_port = be16(udp_bytes, 2);
        if dst_port != ROCE_V2_PORT {
            return Err(WireError::NotRoce { port: dst_port });
        }
        let udp_len = usize::from(be16(udp_bytes, 4));
        if udp_len != udp_bytes.len() {
            return Err(WireError::UdpLength {
                udp_len,
                ip_payload_len: udp_bytes.len(),
            });
        }
        // BTH.
        let bth_off = udp_off + UDP_HEADER_LEN;
        let ib = &udp_bytes[UDP_HEADER_LEN..];
        let bth = BthHeader::new_checked(ib)?;
        let opcode = bth.opcode()?;
        if bth.tver() != 0 {
            return Err(WireError::BadTver(bth.tver()));
        }
        let pad = usize::from(bth.pad_count());
        // Extension headers, then the ICRC at the end of the UDP datagram.
        let after_bth = ib.len() - BTH_LEN;
        let ext_len = opcode.ext_header_len();
        if after_bth < ext_len {
            return Err(WireError::Truncated {
                header: first_ext_header(opcode),
                needed: ext_len,
                available: after_bth,
            });
        }
        let after_ext = after_bth - ext_len;
        if after_ext < ICRC_LEN {
            return Err(WireError::Truncated {
                header: HeaderKind::Icrc,
                needed: ICRC_LEN,
                available: after_ext,
            });
        }
        // Payload and pad: the pad must fit and leave the packet 4-byte aligned.
        let payload_and_pad = after_ext - ICRC_LEN;
        if pad > payload_and_pad || payload_and_pad % 4 != 0 {
            return Err(WireError::PadCount {
                pad_count: bth.pad_count(),
                available: payload_and_pad,
            });
        }
        let payload_len = payload_and_pad - pad;
        if opcode.payload_rule() == PayloadRule::None && payload_len != 0 {
            return Err(WireError::UnexpectedPayload {
                opcode,
                len: payload_len,
            });
        }
        // AETH syndromes with reserved bits are malformed.
        if opcode.has_aeth() {
            let aeth = AethHeader::new_checked(&ib[BTH_LEN..])?;
            aeth.syndrome()?;
        }
        let payload_off = bth_off + BTH_LEN + ext_len;
        Ok(RocePacket {
            buffer,
            ip_off,
            ip,
            udp_off,
            payload_off,
            payload_len,
            icrc_off: payload_off + payload_and_pad,
            opcode,
        })
    }

    /// Returns the underlying buffer.
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame.to_vec())?;
    /// assert_eq!(pkt.into_inner(), frame);
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn frame(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The Ethernet header (smoltcp's view over the whole buffer).
    ///
    /// ```
    /// use rnic_emulator::wire::{EthernetAddress, EthernetProtocol, RocePacket};
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame)?;
    /// let eth = pkt.ethernet();
    /// assert_eq!(eth.ethertype(), EthernetProtocol::Ipv4);
    /// assert_eq!(eth.dst_addr(), EthernetAddress([2, 0, 0, 0, 0, 2]));
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn ethernet(&self) -> EthernetFrame<&[u8]> {
        EthernetFrame::new_unchecked(self.frame())
    }

    /// 4 or 6.
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// assert_eq!(RocePacket::new_checked(frame)?.ip_version(), 4);
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn ip_version(&self) -> u8 {
        self.ip.version()
    }

    /// The IP packet: from the IP header through the ICRC (Ethernet padding excluded).
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame)?;
    /// assert_eq!(pkt.ip_bytes().len(), 20 + 8 + 12 + 5 + 3 + 4); // IP .. ICRC
    /// assert_eq!(pkt.ip_bytes()[0], 0x45);
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn ip_bytes(&self) -> &[u8] {
        &self.frame()[self.ip_off..self.icrc_off + ICRC_LEN]
    }

    /// The IPv4 header, if the packet is IPv4.
    ///
    /// ```
    /// use core::net::Ipv4Addr;
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame)?;
    /// let ip = pkt.ipv4().unwrap();
    /// assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
    /// assert!(ip.dont_frag());
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn ipv4(&self) -> Option<Ipv4Packet<&[u8]>> {
        (self.ip_version() == 4).then(|| Ipv4Packet::new_unchecked(self.ip_bytes()))
    }

    /// The IPv6 header, if the packet is IPv6.
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// assert!(RocePacket::new_checked(frame)?.ipv6().is_none()); // an IPv4 frame
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn ipv6(&self) -> Option<Ipv6Packet<&[u8]>> {
        (self.ip_version() == 6).then(|| Ipv6Packet::new_unchecked(self.ip_bytes()))
    }

    /// The UDP datagram (header through ICRC).
    ///
    /// ```
    /// use rnic_emulator::wire::{RocePacket, ROCE_V2_PORT};
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame)?;
    /// let udp = pkt.udp();
    /// assert_eq!((udp.src_port(), udp.dst_port()), (0xC000, ROCE_V2_PORT));
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn udp(&self) -> UdpPacket<&[u8]> {
        UdpPacket::new_unchecked(&self.frame()[self.udp_off..self.icrc_off + ICRC_LEN])
    }

    /// The BTH.
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame)?;
    /// let bth = pkt.bth();
    /// assert_eq!((bth.dest_qp(), bth.psn(), bth.pad_count()), (0x11, 5, 3));
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn bth(&self) -> BthHeader<&[u8]> {
        let off = self.udp_off + UDP_HEADER_LEN;
        BthHeader::new_unchecked(&self.frame()[off..off + BTH_LEN])
    }

    /// The (known) opcode.
    ///
    /// ```
    /// use rnic_emulator::wire::{Opcode, RocePacket};
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// assert_eq!(RocePacket::new_checked(frame)?.opcode(), Opcode::RcSendOnly);
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// The extension headers between the BTH and the payload.
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// assert!(RocePacket::new_checked(frame)?.ext_header_bytes().is_empty()); // SEND_ONLY has none
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn ext_header_bytes(&self) -> &[u8] {
        let off = self.udp_off + UDP_HEADER_LEN + BTH_LEN;
        &self.frame()[off..self.payload_off]
    }

    /// The payload (without pad).
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// assert_eq!(RocePacket::new_checked(frame)?.payload(), b"hello");
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn payload(&self) -> &[u8] {
        &self.frame()[self.payload_off..self.payload_off + self.payload_len]
    }

    /// The pad bytes (0 to 3).
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// assert_eq!(RocePacket::new_checked(frame)?.pad(), [0, 0, 0]); // 5 + 3 = 8, a multiple of 4
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn pad(&self) -> &[u8] {
        &self.frame()[self.payload_off + self.payload_len..self.icrc_off]
    }

    /// The ICRC as sent (read least-significant byte first).
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame)?;
    /// assert_eq!(pkt.icrc().to_le_bytes(), frame[len - 4..]); // the last 4 bytes, LSB first
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn icrc(&self) -> u32 {
        let b = &self.frame()[self.icrc_off..self.icrc_off + ICRC_LEN];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The ICRC computed over the packet.
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame)?;
    /// assert_eq!(pkt.compute_icrc(), pkt.icrc());
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn compute_icrc(&self) -> u32 {
        // The view's checks guarantee the layout `icrc::compute` needs; fall back to the
        // complement of the wire value so that a broken invariant can never verify.
        icrc::compute(&self.frame()[self.ip_off..self.icrc_off]).unwrap_or(!self.icrc())
    }

    /// Checks the ICRC: [`WireError::IcrcMismatch`] when it is wrong.
    ///
    /// ```
    /// use rnic_emulator::wire::{RocePacket, WireError};
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let mut bad = frame.to_vec();
    /// bad[len - 6] ^= 1; // a pad bit
    /// let err = RocePacket::new_checked(&bad[..])?.verify_icrc().unwrap_err();
    /// assert!(matches!(err, WireError::IcrcMismatch { .. }));
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn verify_icrc(&self) -> Result<(), WireError> {
        let expected = self.compute_icrc();
        let actual = self.icrc();
        if expected == actual {
            Ok(())
        } else {
            Err(WireError::IcrcMismatch { expected, actual })
        }
    }

    /// The frame length up to the end of the ICRC (Ethernet padding excluded).
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let mut padded = frame.to_vec();
    /// padded.resize(100, 0); // trailing Ethernet padding
    /// assert_eq!(RocePacket::new_checked(&padded[..])?.packet_len(), len);
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn packet_len(&self) -> usize {
        self.icrc_off + ICRC_LEN
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RocePacket<T> {
    /// The payload, writable (e.g. to fill it in place before [`Self::fill_icrc`]).
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let mut pkt = RocePacket::new_checked(frame.to_vec())?;
    /// pkt.payload_mut().copy_from_slice(b"HELLO");
    /// assert!(pkt.verify_icrc().is_err()); // until the ICRC is refilled
    /// pkt.fill_icrc();
    /// pkt.verify_icrc()?;
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (off, len) = (self.payload_off, self.payload_len);
        &mut self.buffer.as_mut()[off..off + len]
    }

    /// Computes the ICRC and writes it into the frame.
    ///
    /// ```
    /// use rnic_emulator::wire::RocePacket;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let mut copy = frame.to_vec();
    /// copy[len - 4..].fill(0);
    /// let mut pkt = RocePacket::new_checked(&mut copy[..])?;
    /// pkt.fill_icrc();
    /// assert_eq!(pkt.into_inner(), frame);
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn fill_icrc(&mut self) {
        let icrc = self.compute_icrc();
        let off = self.icrc_off;
        self.buffer.as_mut()[off..off + ICRC_LEN].copy_from_slice(&icrc.to_le_bytes());
    }
}

/// The kind of the first extension header an opcode carries (for truncation errors).
fn first_ext_header(opcode: Opcode) -> HeaderKind {
    if opcode.has_deth() {
        HeaderKind::Deth
    } else if opcode.has_reth() {
        HeaderKind::Reth
    } else if opcode.has_atomic_eth() {
        HeaderKind::AtomicEth
    } else if opcode.has_aeth() {
        HeaderKind::Aeth
    } else if opcode.has_imm() {
        HeaderKind::ImmDt
    } else if opcode.has_ieth() {
        HeaderKind::Ieth
    } else {
        HeaderKind::Cnp
    }
}

/// The extension headers of one packet, in wire order: requests
/// `[DETH] [RETH | AtomicETH] [ImmDt | IETH]`, responses `AETH [AtomicAckETH]`, CNP 16
/// reserved bytes. Which are present is fixed by the opcode ([`ExtHeaders::matches`]).
///
/// ```
/// use rnic_emulator::wire::{ExtHeaders, Opcode, RethRepr};
///
/// let ext = ExtHeaders {
///     reth: Some(RethRepr { virtual_addr: 0x1000, rkey: 7, dma_len: 64 }),
///     ..ExtHeaders::NONE
/// };
/// assert!(ext.matches(Opcode::RcRdmaWriteOnly));
/// assert!(!ext.matches(Opcode::RcSendOnly));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders {
    /// DETH (UD).
    pub deth: Option<DethRepr>,
    /// RETH (WRITE FIRST / ONLY, READ request).
    pub reth: Option<RethRepr>,
    /// AtomicETH (COMPARE_SWAP, FETCH_ADD).
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH (ACK, ATOMIC ACK, READ response FIRST / LAST / ONLY).
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH (ATOMIC ACK).
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// ImmDt (`*_WITH_IMMEDIATE`).
    pub imm: Option<ImmDtRepr>,
    /// IETH (SEND_*_WITH_INVALIDATE).
    pub ieth: Option<IethRepr>,
    /// The CNP's reserved block.
    pub cnp: Option<CnpRepr>,
}

impl ExtHeaders {
    /// No extension headers.
    ///
    /// ```
    /// use rnic_emulator::wire::{ExtHeaders, Opcode};
    ///
    /// assert_eq!(ExtHeaders::NONE, ExtHeaders::default());
    /// assert!(ExtHeaders::NONE.matches(Opcode::RcSendMiddle));
    /// ```
    pub const NONE: ExtHeaders = ExtHeaders {
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack_eth: None,
        imm: None,
        ieth: None,
        cnp: None,
    };

    /// Whether exactly the headers `opcode` carries are present.
    ///
    /// ```
    /// use rnic_emulator::wire::{ExtHeaders, ImmDtRepr, Opcode};
    ///
    /// let ext = ExtHeaders { imm: Some(ImmDtRepr { imm: 1 }), ..ExtHeaders::NONE };
    /// assert!(ext.matches(Opcode::RcSendOnlyWithImm));
    /// assert!(!ext.matches(Opcode::RcRdmaWriteOnlyWithImm)); // that one also needs a RETH
    /// ```
    pub fn matches(&self, opcode: Opcode) -> bool {
        self.deth.is_some() == opcode.has_deth()
            && self.reth.is_some() == opcode.has_reth()
            && self.atomic_eth.is_some() == opcode.has_atomic_eth()
            && self.aeth.is_some() == opcode.has_aeth()
            && self.atomic_ack_eth.is_some() == opcode.has_atomic_ack_eth()
            && self.imm.is_some() == opcode.has_imm()
            && self.ieth.is_some() == opcode.has_ieth()
            && self.cnp.is_some() == opcode.is_cnp()
    }

    /// Parses the extension headers `opcode` carries from the start of `buffer`.
    ///
    /// ```
    /// use rnic_emulator::wire::{DethRepr, ExtHeaders, ImmDtRepr, Opcode};
    ///
    /// // UD SEND_ONLY_WITH_IMMEDIATE: DETH (Q_Key, source QP), then ImmDt.
    /// let bytes = [0, 0, 0, 9, 0, 0, 0, 2, 0xCA, 0xFE, 0, 1];
    /// let ext = ExtHeaders::parse(Opcode::UdSendOnlyWithImm, &bytes)?;
    /// assert_eq!(ext.deth, Some(DethRepr { qkey: 9, src_qp: 2 }));
    /// assert_eq!(ext.imm, Some(ImmDtRepr { imm: 0xCAFE_0001 }));
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn parse(opcode: Opcode, buffer: &[u8]) -> Result<Self, WireError> {
        let mut ext = ExtHeaders::NONE;
        let mut rest = buffer;
        if opcode.has_deth() {
            ext.deth = Some(DethRepr::parse(&DethHeader::new_checked(rest)?)?);
            rest = &rest[DETH_LEN..];
        }
        if opcode.has_reth() {
            ext.reth = Some(RethRepr::parse(&RethHeader::new_checked(rest)?)?);
            rest = &rest[RETH_LEN..];
        }
        if opcode.has_atomic_eth() {
            ext.atomic_eth = Some(AtomicEthRepr::parse(&AtomicEthHeader::new_checked(rest)?)?);
            rest = &rest[ATOMIC_ETH_LEN..];
        }
        if opcode.has_aeth() {
            ext.aeth = Some(AethRepr::parse(&AethHeader::new_checked(rest)?)?);
            rest = &rest[AETH_LEN..];
        }
        if opcode.has_atomic_ack_eth() {
            ext.atomic_ack_eth = Some(AtomicAckEthRepr::parse(&AtomicAckEthHeader::new_checked(
                rest,
            )?)?);
            rest = &rest[ATOMIC_ACK_ETH_LEN..];
        }
        if opcode.has_imm() {
            ext.imm = Some(ImmDtRepr::parse(&ImmDtHeader::new_checked(rest)?)?);
            rest = &rest[IMM_DT_LEN..];
        }
        if opcode.has_ieth() {
            ext.ieth = Some(IethRepr::parse(&IethHeader::new_checked(rest)?)?);
            rest = &rest[IETH_LEN..];
        }
        if opcode.is_cnp() {
            ext.cnp = Some(CnpRepr::parse(&CnpHeader::new_checked(rest)?)?);
        }
        Ok(ext)
    }

    /// Total length of the headers present.
    ///
    /// ```
    /// use rnic_emulator::wire::{AethRepr, AtomicAckEthRepr, ExtHeaders, Syndrome};
    ///
    /// let ext = ExtHeaders {
    ///     aeth: Some(AethRepr { syndrome: Syndrome::ACK_NO_CREDITS, msn: 1 }),
    ///     atomic_ack_eth: Some(AtomicAckEthRepr { orig_data: 5 }),
    ///     ..ExtHeaders::NONE
    /// };
    /// assert_eq!(ext.buffer_len(), 4 + 8);
    /// ```
    pub fn buffer_len(&self) -> usize {
        self.deth.map_or(0, |_| DETH_LEN)
            + self.reth.map_or(0, |_| RETH_LEN)
            + self.atomic_eth.map_or(0, |_| ATOMIC_ETH_LEN)
            + self.aeth.map_or(0, |_| AETH_LEN)
            + self.atomic_ack_eth.map_or(0, |_| ATOMIC_ACK_ETH_LEN)
            + self.imm.map_or(0, |_| IMM_DT_LEN)
            + self.ieth.map_or(0, |_| IETH_LEN)
            + self.cnp.map_or(0, |_| CNP_LEN)
    }

    /// Writes the headers present, in wire order, at the start of `buffer`, which must hold
    /// [`Self::buffer_len`] bytes ([`WireError::Truncated`] otherwise).
    ///
    /// ```
    /// use rnic_emulator::wire::{ExtHeaders, IethRepr, Opcode};
    ///
    /// let ext = ExtHeaders { ieth: Some(IethRepr { rkey: 0x0102_0304 }), ..ExtHeaders::NONE };
    /// let mut buf = [0u8; 4];
    /// ext.emit(&mut buf)?;
    /// assert_eq!(buf, [1, 2, 3, 4]);
    /// assert_eq!(ExtHeaders::parse(Opcode::RcSendOnlyWithInv, &buf)?, ext);
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn emit(&self, buffer: &mut [u8]) -> Result<(), WireError> {
        check_len(buffer, self.buffer_len(), HeaderKind::Frame)?;
        let mut off = 0;
        if let Some(h) = self.deth {
            h.emit(&mut DethHeader::new_unchecked(
                &mut buffer[off..off + DETH_LEN],
            ));
            off += DETH_LEN;
        }
        if let Some(h) = self.reth {
            h.emit(&mut RethHeader::new_unchecked(
                &mut buffer[off..off + RETH_LEN],
            ));
            off += RETH_LEN;
        }
        if let Some(h) = self.atomic_eth {
            h.emit(&mut AtomicEthHeader::new_unchecked(
                &mut buffer[off..off + ATOMIC_ETH_LEN],
            ));
            off += ATOMIC_ETH_LEN;
        }
        if let Some(h) = self.aeth {
            h.emit(&mut AethHeader::new_unchecked(
                &mut buffer[off..off + AETH_LEN],
            ));
            off += AETH_LEN;
        }
        if let Some(h) = self.atomic_ack_eth {
            h.emit(&mut AtomicAckEthHeader::new_unchecked(
                &mut buffer[off..off + ATOMIC_ACK_ETH_LEN],
            ));
            off += ATOMIC_ACK_ETH_LEN;
        }
        if let Some(h) = self.imm {
            h.emit(&mut ImmDtHeader::new_unchecked(
                &mut buffer[off..off + IMM_DT_LEN],
            ));
            off += IMM_DT_LEN;
        }
        if let Some(h) = self.ieth {
            h.emit(&mut IethHeader::new_unchecked(
                &mut buffer[off..off + IETH_LEN],
            ));
            off += IETH_LEN;
        }
        if let Some(h) = self.cnp {
            h.emit(&mut CnpHeader::new_unchecked(
                &mut buffer[off..off + CNP_LEN],
            ));
        }
        Ok(())
    }
}

/// A parsed RoCE v2 frame: every header as a `Repr`. The payload stays in the frame (parse
/// returns it as a slice; emit takes it as a slice).
///
/// Length fields (IP total / payload length, UDP length), the IPv4 header checksum, the BTH
/// PadCnt, the pad bytes and the ICRC are derived: [`PacketRepr::emit`] computes them from the
/// payload length, ignoring [`BthRepr::pad_count`].
///
/// ```
/// use rnic_emulator::wire::{AethRepr, Opcode, PacketRepr, Syndrome};
/// # use rnic_emulator::wire::*;
/// # use core::net::Ipv4Addr;
/// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
/// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
/// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
/// # let mut buf = [0u8; 128];
/// # let len = repr.emit(&mut buf, b"hello").unwrap();
/// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
///
/// // Answer the SEND with an ACK: swap the addresses, keep the PSN.
/// let (req, _) = PacketRepr::parse(frame)?;
/// let mut ack = req;
/// (ack.eth.src, ack.eth.dst) = (req.eth.dst, req.eth.src);
/// ack.ip = IpRepr::V4(Ipv4Repr::new(b, a)); // a: the requester's IP, b: ours
/// ack.bth.opcode = Opcode::RcAcknowledge;
/// ack.ext.aeth = Some(AethRepr { syndrome: Syndrome::ACK_NO_CREDITS, msn: 1 });
/// let mut out = [0u8; 128];
/// let n = ack.emit(&mut out, &[])?;
/// assert_eq!(PacketRepr::parse(&out[..n])?.0.bth.psn, 5);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketRepr {
    /// Ethernet header (its EtherType must match the IP version).
    pub eth: EthRepr,
    /// IP header.
    pub ip: IpRepr,
    /// UDP header.
    pub udp: UdpRepr,
    /// Base transport header.
    pub bth: BthRepr,
    /// Extension headers, as the opcode requires.
    pub ext: ExtHeaders,
}

impl PacketRepr {
    /// A packet with no extension headers; the EtherType is set from the IP version. Add
    /// the headers the opcode needs to [`PacketRepr::ext`] before emitting.
    ///
    /// ```
    /// use core::net::Ipv6Addr;
    /// use rnic_emulator::wire::*;
    ///
    /// let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// let ip = IpRepr::V6(Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST));
    /// let p = PacketRepr::new(eth, ip, UdpRepr::new(0xC001), BthRepr::new(Opcode::RcSendOnly, 1, 0));
    /// assert_eq!(p.eth.ethertype, EthernetProtocol::Ipv6); // set from the IP version
    /// assert_eq!(p.ext, ExtHeaders::NONE);
    /// ```
    pub fn new(mut eth: EthRepr, ip: IpRepr, udp: UdpRepr, bth: BthRepr) -> Self {
        eth.ethertype = match ip {
            IpRepr::V4(_) => EthernetProtocol::Ipv4,
            IpRepr::V6(_) => EthernetProtocol::Ipv6,
        };
        PacketRepr {
            eth,
            ip,
            udp,
            bth,
            ext: ExtHeaders::NONE,
        }
    }

    /// Parses a frame and checks its ICRC. Returns the headers and the payload.
    ///
    /// ```
    /// use rnic_emulator::wire::{PacketRepr, WireError};
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let (hdrs, payload) = PacketRepr::parse(frame)?;
    /// assert_eq!((hdrs.bth.dest_qp, payload), (0x11, &b"hello"[..]));
    /// let mut bad = frame.to_vec();
    /// bad[len - 10] ^= 0xFF; // a payload byte
    /// assert!(matches!(PacketRepr::parse(&bad), Err(WireError::IcrcMismatch { .. })));
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn parse(frame: &[u8]) -> Result<(PacketRepr, &[u8]), WireError> {
        let packet = RocePacket::new_checked(frame)?;
        packet.verify_icrc()?;
        Ok((Self::parse_packet(&packet)?, packet_payload(frame, &packet)))
    }

    /// Parses a frame without checking its ICRC (for a receiver that cannot see the IP header
    /// the sender's kernel wrote, e.g. behind a UDP socket). Returns the headers and the
    /// payload.
    ///
    /// ```
    /// use rnic_emulator::wire::PacketRepr;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let mut bad = frame.to_vec();
    /// bad[len - 1] ^= 0xFF; // the ICRC itself
    /// let (hdrs, payload) = PacketRepr::parse_unverified(&bad)?;
    /// assert_eq!((hdrs.bth.psn, payload), (5, &b"hello"[..]));
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn parse_unverified(frame: &[u8]) -> Result<(PacketRepr, &[u8]), WireError> {
        let packet = RocePacket::new_checked(frame)?;
        Ok((Self::parse_packet(&packet)?, packet_payload(frame, &packet)))
    }

    /// Parses the headers of a checked packet (the ICRC is not checked).
    ///
    /// ```
    /// use rnic_emulator::wire::{PacketRepr, RocePacket};
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let pkt = RocePacket::new_checked(frame)?;
    /// let hdrs = PacketRepr::parse_packet(&pkt)?;
    /// assert_eq!(hdrs.header_len(), frame.len() - pkt.payload().len() - 3 - 4);
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn parse_packet<T: AsRef<[u8]>>(packet: &RocePacket<T>) -> Result<Self, WireError> {
        let eth = EthRepr::parse(&packet.ethernet())?;
        let ip = packet.ip;
        let udp = UdpRepr::parse(&udp_packet(packet.udp().into_inner())?)?;
        let bth = BthRepr::parse(&packet.bth())?;
        let ext = ExtHeaders::parse(bth.opcode, packet.ext_header_bytes())?;
        Ok(PacketRepr {
            eth,
            ip,
            udp,
            bth,
            ext,
        })
    }

    /// Bytes of headers from the start of the frame to the payload.
    ///
    /// ```
    /// use rnic_emulator::wire::PacketRepr;
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let (hdrs, _) = PacketRepr::parse(frame)?;
    /// assert_eq!(hdrs.header_len(), 14 + 20 + 8 + 12); // Ethernet, IPv4, UDP, BTH
    /// assert_eq!(&frame[hdrs.header_len()..][..5], b"hello");
    /// # Ok::<(), rnic_emulator::wire::WireError>(())
    /// ```
    pub fn header_len(&self) -> usize {
        self.eth.buffer_len()
            + self.ip.buffer_len()
            + UDP_HEADER_LEN
            + BTH_LEN
            + self.ext.buffer_len()
    }

    /// The BTH PadCnt for `payload_len` bytes of payload.
    ///
    /// ```
    /// use rnic_emulator::wire::PacketRepr;
    ///
    /// assert_eq!(PacketRepr::pad_count(8), 0);
    /// assert_eq!(PacketRepr::pad_count(5), 3);
    /// assert_eq!(PacketRepr::pad_count(0), 0);
    /// ```
    pub const fn pad_count(payload_len: usize) -> u8 {
        (payload_len.wrapping_neg() & 3) as u8
    }

    /// The frame length [`PacketRepr::emit`] writes for `payload_len` bytes of payload:
    /// headers + payload + pad + ICRC, at least [`ETH_MIN_FRAME_LEN`].
    ///
    /// ```
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    /// assert_eq!(repr.buffer_len(5), len);
    /// // No payload: 58 bytes of headers and ICRC, padded to the Ethernet minimum.
    /// assert_eq!(repr.buffer_len(0), ETH_MIN_FRAME_LEN);
    /// ```
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        let len =
            self.header_len() + payload_len + usize::from(Self::pad_count(payload_len)) + ICRC_LEN;
        len.max(ETH_MIN_FRAME_LEN)
    }

    /// Writes the whole frame for `payload` into the start of `buffer` and returns its length
    /// ([`PacketRepr::buffer_len`]): headers with computed IP length and checksum, UDP length
    /// and PadCnt, the payload, zero pad bytes, the ICRC, and zero Ethernet padding up to 60
    /// bytes.
    ///
    /// Errors: [`WireError::HeaderMismatch`] when [`PacketRepr::ext`] does not hold exactly the
    /// opcode's headers, [`WireError::UnexpectedPayload`] for payload on an opcode that has
    /// none, [`WireError::IpVersion`] when the EtherType does not match the IP header,
    /// [`WireError::PayloadTooLong`] when the lengths do not fit 16 bits, and
    /// [`WireError::Truncated`] (of [`HeaderKind::Frame`]) when `buffer` is too small.
    /// Payload sizes against the path MTU are the transport's business, not checked here.
    ///
    /// ```
    /// use rnic_emulator::wire::{HeaderKind, Opcode, WireError};
    /// # use rnic_emulator::wire::*;
    /// # use core::net::Ipv4Addr;
    /// # let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(a, b)), UdpRepr::new(0xC000),
    /// #     BthRepr::new(Opcode::RcSendOnly, 0x11, 5));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"hello").unwrap();
    /// # let frame = &buf[..len]; // an RC SEND_ONLY to QP 0x11 with 5 payload bytes
    ///
    /// let mut small = [0u8; 40];
    /// let err = repr.emit(&mut small, b"hello").unwrap_err();
    /// assert!(matches!(err, WireError::Truncated { header: HeaderKind::Frame, .. }));
    /// let mut read = repr;
    /// read.bth.opcode = Opcode::RcRdmaReadRequest; // needs a RETH the repr lacks
    /// assert!(matches!(read.emit(&mut buf, &[]), Err(WireError::HeaderMismatch { .. })));
    /// ```
    pub fn emit(&self, buffer: &mut [u8], payload: &[u8]) -> Result<usize, WireError> {
        self.emit_frame(buffer, Payload::Copy(payload), true)
            .map(|(n, _)| n)
    }

    /// [`PacketRepr::emit`] without the ICRC: its four bytes are left zero. Only for a frame
    /// nothing can observe before its receiver (an in-process link, no capture, no faults:
    /// see [`crate::link::Link::takes_unsealed`]); whatever hands it on to an observer seals
    /// it first ([`crate::wire::icrc::seal`]).
    pub(crate) fn emit_unsealed(
        &self,
        buffer: &mut [u8],
        payload: &[u8],
    ) -> Result<usize, WireError> {
        self.emit_frame(buffer, Payload::Copy(payload), false)
            .map(|(n, _)| n)
    }

    /// [`PacketRepr::emit_unsealed`] for `payload_len` bytes of payload the caller writes
    /// into the frame itself afterwards (a gather straight from host memory, with no copy in
    /// between); returns the frame length and where the payload goes. The frame needs its
    /// ICRC ([`crate::wire::icrc::seal`]) once the payload is in, unless it goes unsealed.
    pub(crate) fn emit_around_payload(
        &self,
        buffer: &mut [u8],
        payload_len: usize,
    ) -> Result<(usize, core::ops::Range<usize>), WireError> {
        self.emit_frame(buffer, Payload::InPlace(payload_len), false)
            .map(|(n, off)| (n, off..off + payload_len))
    }

    /// The frame of [`PacketRepr::emit`], its ICRC computed when `seal`; returns its length
    /// and the payload's offset.
    fn emit_frame(
        &self,
        buffer: &mut [u8],
        payload: Payload<'_>,
        seal: bool,
    ) -> Result<(usize, usize), WireError> {
        let payload_len = match payload {
            Payload::Copy(p) => p.len(),
            Payload::InPlace(n) => n,
        };
        let opcode = self.bth.opcode;
        if !self.ext.matches(opcode) {
            return Err(WireError::HeaderMismatch(opcode));
        }
        if !opcode.has_payload() && payload_len != 0 {
            return Err(WireError::UnexpectedPayload {
                opcode,
                len: payload_len,
            });
        }
        let ether_version = match self.eth.ethertype {
            EthernetProtocol::Ipv4 => 4,
            EthernetProtocol::Ipv6 => 6,
            other => {
                return Err(WireError::NotIp {
                    ethertype: u16::from(other),
                });
            }
        };
        if ether_version != self.ip.version() {
            return Err(WireError::IpVersion {
                expected: ether_version,
                found: self.ip.version(),
            });
        }
        let pad = Self::pad_count(payload_len);
        let ib_len = BTH_LEN + self.ext.buffer_len() + payload_len + usize::from(pad) + ICRC_LEN;
        let udp_len = UDP_HEADER_LEN + ib_len;
        if udp_len > usize::from(u16::MAX) || udp_len > self.ip.max_payload_len() {
            return Err(WireError::PayloadTooLong(payload_len));
        }
        let frame_len = self.buffer_len(payload_len);
        check_len(buffer, frame_len, HeaderKind::Frame)?;
        let frame = &mut buffer[..frame_len];

        let ip_off = self.eth.buffer_len();
        let udp_off = ip_off + self.ip.buffer_len();
        let bth_off = udp_off + UDP_HEADER_LEN;
        let ext_off = bth_off + BTH_LEN;
        let payload_off = ext_off + self.ext.buffer_len();
        let pad_off = payload_off + payload_len;
        let icrc_off = pad_off + usize::from(pad);

        self.eth
            .emit(&mut EthernetFrame::new_unchecked(&mut frame[..ip_off]));
        self.ip.emit(&mut frame[ip_off..udp_off], udp_len);
        self.udp.emit(
            &mut UdpPacket::new_unchecked(&mut frame[udp_off..bth_off]),
            ib_len,
        );
        let mut bth = self.bth;
        bth.pad_count = pad;
        bth.emit(&mut BthHeader::new_unchecked(&mut frame[bth_off..ext_off]));
        self.ext.emit(&mut frame[ext_off..payload_off])?;
        if let Payload::Copy(p) = payload {
            frame[payload_off..pad_off].copy_from_slice(p);
        }
        frame[pad_off..icrc_off].fill(0);
        let icrc = if seal {
            icrc::compute(&frame[ip_off..icrc_off])?
        } else {
            0
        };
        frame[icrc_off..icrc_off + ICRC_LEN].copy_from_slice(&icrc.to_le_bytes());
        frame[icrc_off + ICRC_LEN..].fill(0);
        Ok((frame_len, payload_off))
    }
}

/// The payload [`PacketRepr::emit_frame`] puts in the frame: copied from a slice, or only
/// its length, the caller writing it in place.
#[derive(Clone, Copy)]
enum Payload<'a> {
    Copy(&'a [u8]),
    InPlace(usize),
}

/// The payload slice of a checked packet over `frame`, with the frame's lifetime.
fn packet_payload<'a>(frame: &'a [u8], packet: &RocePacket<&'a [u8]>) -> &'a [u8] {
    &frame[packet.payload_off..packet.payload_off + packet.payload_len]
}

#[cfg(test)]
mod tests {
    use core::net::Ipv4Addr;

    use super::*;
    use crate::wire::{EthernetAddress, Ipv4Repr, Syndrome};

    fn repr(opcode: Opcode) -> PacketRepr {
        PacketRepr::new(
            EthRepr::new(
                EthernetAddress([2, 0, 0, 0, 0, 2]),
                EthernetAddress([2, 0, 0, 0, 0, 1]),
            ),
            IpRepr::V4(Ipv4Repr::new(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
            )),
            UdpRepr::new(0xC001),
            BthRepr::new(opcode, 0x12, 0x100),
        )
    }

    /// roce-v2.md worked example (a), a whole frame: UC SEND_ONLY, M=1, PadCnt 2, ECN 1,
    /// a non-zero UDP checksum.
    const EXAMPLE_A: [u8; 78] = [
        0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22, 0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22, 0x08,
        0x00, // Eth
        0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5, 0xc0, 0xa8, 0x00,
        0x07, 0xc0, 0xa8, 0x00, 0x07, // IPv4
        0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2, // UDP
        0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10, // BTH
        0x46, 0x30, 0x81, 0x8b, 0xe2, 0x89, 0x35, 0xd9, 0x0e, 0x9a, 0x95, 0x50, 0x54, 0x01, 0xbe,
        0x88, 0x5e, 0x50, 0x00, 0x00, // payload + pad
        0x78, 0xf3, 0x53, 0xf3, // ICRC
    ];

    /// roce-v2.md worked example (b), a whole frame: a CNP from a ConnectX-4 Lx.
    const EXAMPLE_B: [u8; 74] = [
        0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08,
        0x00, // Eth
        0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11,
        0x01, 0x0a, 0x00, 0x12, 0x01, // IPv4
        0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, // UDP
        0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, // BTH
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0x82, 0xfd, 0x00, 0x2a, // ICRC
    ];

    #[test]
    fn worked_examples_parse_and_re_emit() {
        let (a, payload) = PacketRepr::parse(&EXAMPLE_A).unwrap();
        assert_eq!(a.bth.opcode, Opcode::UcSendOnly);
        assert!(a.bth.mig_req);
        assert_eq!(
            (a.bth.pad_count, a.bth.dest_qp, a.bth.psn),
            (2, 211, 13_571_856)
        );
        assert_eq!(a.udp.checksum, 0xACA2);
        assert_eq!(payload.len(), 18);
        let IpRepr::V4(ip) = a.ip else { panic!() };
        assert_eq!((ip.ident, ip.dscp, ip.ecn, ip.ttl), (0x0478, 0, 1, 64));
        let mut buf = [0u8; 100];
        let n = a.emit(&mut buf, payload).unwrap();
        assert_eq!(&buf[..n], &EXAMPLE_A[..]);

        let (b, payload) = PacketRepr::parse(&EXAMPLE_B).unwrap();
        assert_eq!(b.bth.opcode, Opcode::Cnp);
        assert!(b.bth.becn && !b.bth.fecn);
        assert_eq!((b.bth.dest_qp, b.bth.psn), (0x118, 0));
        assert_eq!(b.ext.cnp, Some(CnpRepr));
        assert!(payload.is_empty());
        let IpRepr::V4(ip) = b.ip else { panic!() };
        assert_eq!((ip.dscp, ip.ecn), (48, 2));
        let n = b.emit(&mut buf, payload).unwrap();
        assert_eq!(&buf[..n], &EXAMPLE_B[..]);
    }

    #[test]
    fn short_frames_are_padded_to_60() {
        let r = repr(Opcode::RcSendOnly);
        let mut buf = [0xEEu8; 80];
        let n = r.emit(&mut buf, &[]).unwrap();
        assert_eq!(n, 60);
        assert_eq!(&buf[58..60], &[0, 0]);
        let packet = RocePacket::new_checked(&buf[..n]).unwrap();
        assert_eq!(packet.packet_len(), 58);
        packet.verify_icrc().unwrap();
        let (back, payload) = PacketRepr::parse(&buf[..n]).unwrap();
        assert!(payload.is_empty());
        assert_eq!(back, r);
    }

    #[test]
    fn emit_checks_headers_and_payload() {
        let mut buf = [0u8; 200];
        let mut r = repr(Opcode::RcAcknowledge);
        assert_eq!(
            r.emit(&mut buf, &[]),
            Err(WireError::HeaderMismatch(Opcode::RcAcknowledge))
        );
        r.ext.aeth = Some(AethRepr {
            syndrome: Syndrome::ACK_NO_CREDITS,
            msn: 1,
        });
        assert_eq!(
            r.emit(&mut buf, &[1]),
            Err(WireError::UnexpectedPayload {
                opcode: Opcode::RcAcknowledge,
                len: 1
            })
        );
        assert_eq!(r.emit(&mut buf, &[]), Ok(62));
        assert!(matches!(
            r.emit(&mut buf[..61], &[]),
            Err(WireError::Truncated {
                header: HeaderKind::Frame,
                needed: 62,
                available: 61
            })
        ));
        let mut s = repr(Opcode::RcSendOnly);
        assert_eq!(
            s.emit(&mut [0u8; 70000], &[0u8; 65500]),
            Err(WireError::PayloadTooLong(65500))
        );
        s.eth.ethertype = EthernetProtocol::Ipv6;
        assert_eq!(
            s.emit(&mut buf, &[]),
            Err(WireError::IpVersion {
                expected: 6,
                found: 4
            })
        );
    }

    #[test]
    fn fill_icrc_in_place() {
        let r = repr(Opcode::RcSendOnly);
        let mut buf = [0u8; 100];
        let n = r.emit(&mut buf, &[1, 2, 3, 4, 5]).unwrap();
        let mut packet = RocePacket::new_checked(&mut buf[..n]).unwrap();
        packet.payload_mut().copy_from_slice(b"hello");
        assert!(packet.verify_icrc().is_err());
        packet.fill_icrc();
        packet.verify_icrc().unwrap();
        assert_eq!(packet.pad(), &[0, 0, 0]);
    }
}
