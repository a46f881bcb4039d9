//! Ethernet II framing with an optional IEEE 802.1Q tag, over smoltcp's [`EthernetFrame`].

use smoltcp::wire::{EthernetAddress, EthernetFrame, EthernetProtocol};

use super::{HeaderKind, WireError, be16, check_len};

/// Length of the Ethernet II header.
pub(crate) const ETH_HEADER_LEN: usize = 14;
/// Length of an 802.1Q tag.
pub(crate) const VLAN_TAG_LEN: usize = 4;
/// The 802.1Q tag protocol identifier.
pub(crate) const TPID_8021Q: u16 = 0x8100;

/// The shortest Ethernet frame on the wire without the FCS: shorter frames are padded with
/// zeros to this length, so receivers find the end of a RoCE packet from the UDP length.
///
/// ```
/// use rnic_emulator::wire::{RocePacket, ETH_MIN_FRAME_LEN};
/// # use rnic_emulator::wire::*;
/// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// # let ip = IpRepr::V4(Ipv4Repr::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into()));
/// # let send = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendOnly, 1, 0));
///
/// // An empty RC SEND_ONLY: 14 + 20 + 8 + 12 header bytes and the 4-byte ICRC, 58 bytes.
/// let mut buf = [0xEEu8; 128];
/// let n = send.emit(&mut buf, &[])?;
/// assert_eq!(n, ETH_MIN_FRAME_LEN); // padded with zeros...
/// assert_eq!(buf[58..60], [0, 0]);
/// assert_eq!(RocePacket::new_checked(&buf[..n])?.packet_len(), 58); // ...which the UDP length excludes
/// # Ok::<(), WireError>(())
/// ```
pub const ETH_MIN_FRAME_LEN: usize = 60;

/// Wraps `buffer` as smoltcp's [`EthernetFrame`] after checking that it holds the 14-byte
/// header, with a typed error instead of smoltcp's opaque one.
///
/// ```
/// use rnic_emulator::wire::{ethernet_frame, EthernetProtocol, HeaderKind, WireError};
///
/// let mut bytes = [0u8; 14];
/// bytes[12..].copy_from_slice(&[0x08, 0x00]);
/// assert_eq!(ethernet_frame(&bytes[..])?.ethertype(), EthernetProtocol::Ipv4);
/// let err = ethernet_frame(&bytes[..13]).unwrap_err();
/// assert!(matches!(err, WireError::Truncated { header: HeaderKind::Ethernet, .. }));
/// # Ok::<(), WireError>(())
/// ```
pub fn ethernet_frame<T: AsRef<[u8]>>(buffer: T) -> Result<EthernetFrame<T>, WireError> {
    check_len(buffer.as_ref(), ETH_HEADER_LEN, HeaderKind::Ethernet)?;
    Ok(EthernetFrame::new_unchecked(buffer))
}

/// An IEEE 802.1Q tag (the TCI; the TPID is 0x8100).
///
/// ```
/// use rnic_emulator::wire::VlanTag;
///
/// let tag = VlanTag { pcp: 3, dei: false, vid: 100 };
/// assert_eq!(tag.tci(), 0x6064);
/// assert_eq!(VlanTag::from_tci(0x6064), tag);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl VlanTag {
    /// The tag control information word.
    ///
    /// ```
    /// use rnic_emulator::wire::VlanTag;
    ///
    /// assert_eq!(VlanTag { pcp: 7, dei: true, vid: 0xFFF }.tci(), 0xFFFF);
    /// assert_eq!(VlanTag { pcp: 0, dei: false, vid: 0x1005 }.tci(), 0x005); // vid is 12 bits
    /// ```
    pub const fn tci(self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0FFF)
    }

    /// The tag for a tag control information word.
    ///
    /// ```
    /// use rnic_emulator::wire::VlanTag;
    ///
    /// assert_eq!(VlanTag::from_tci(0x2001), VlanTag { pcp: 1, dei: false, vid: 1 });
    /// ```
    pub const fn from_tci(tci: u16) -> Self {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0FFF,
        }
    }
}

/// A parsed Ethernet header.
///
/// ```
/// use rnic_emulator::wire::{ethernet_frame, EthRepr, EthernetAddress, VlanTag};
///
/// let mut repr = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// repr.vlan = Some(VlanTag { pcp: 3, dei: false, vid: 10 });
/// let mut buf = [0u8; 18];
/// repr.emit(&mut ethernet_frame(&mut buf[..])?);
/// assert_eq!(buf[12..], [0x81, 0x00, 0x60, 0x0A, 0x08, 0x00]); // TPID, TCI, IPv4
/// assert_eq!(EthRepr::parse(&ethernet_frame(&buf[..])?)?, repr);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthRepr {
    /// Destination MAC.
    pub dst: EthernetAddress,
    /// Source MAC.
    pub src: EthernetAddress,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// The EtherType of the payload (after the tag, if any).
    pub ethertype: EthernetProtocol,
}

impl EthRepr {
    /// An untagged header carrying IPv4.
    ///
    /// ```
    /// use rnic_emulator::wire::{EthRepr, EthernetAddress, EthernetProtocol};
    ///
    /// let e = EthRepr::new(EthernetAddress::BROADCAST, EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// assert_eq!((e.ethertype, e.vlan, e.buffer_len()), (EthernetProtocol::Ipv4, None, 14));
    /// ```
    pub const fn new(dst: EthernetAddress, src: EthernetAddress) -> Self {
        EthRepr {
            dst,
            src,
            vlan: None,
            ethertype: EthernetProtocol::Ipv4,
        }
    }

    /// Parses the header and an 802.1Q tag if the EtherType is 0x8100. Any EtherType is
    /// accepted here; [`super::RocePacket`] insists on IPv4 or IPv6.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self, WireError> {
        let buf = frame.as_ref();
        check_len(buf, ETH_HEADER_LEN, HeaderKind::Ethernet)?;
        let outer = be16(buf, 12);
        let (vlan, ethertype) = if outer == TPID_8021Q {
            check_len(buf, ETH_HEADER_LEN + VLAN_TAG_LEN, HeaderKind::Vlan)?;
            (Some(VlanTag::from_tci(be16(buf, 14))), be16(buf, 16))
        } else {
            (None, outer)
        };
        Ok(EthRepr {
            dst: frame.dst_addr(),
            src: frame.src_addr(),
            vlan,
            ethertype: EthernetProtocol::from(ethertype),
        })
    }

    /// The header length: 14, or 18 with an 802.1Q tag.
    pub const fn buffer_len(&self) -> usize {
        if self.vlan.is_some() {
            ETH_HEADER_LEN + VLAN_TAG_LEN
        } else {
            ETH_HEADER_LEN
        }
    }

    /// Writes the header (and tag). The frame must hold [`Self::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst);
        frame.set_src_addr(self.src);
        match self.vlan {
            Some(tag) => {
                frame.set_ethertype(EthernetProtocol::Unknown(TPID_8021Q));
                let p = frame.payload_mut();
                p[0..2].copy_from_slice(&tag.tci().to_be_bytes());
                p[2..4].copy_from_slice(&u16::from(self.ethertype).to_be_bytes());
            }
            None => frame.set_ethertype(self.ethertype),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untagged_and_tagged() {
        let mut repr = EthRepr::new(
            EthernetAddress([1, 2, 3, 4, 5, 6]),
            EthernetAddress([7, 8, 9, 10, 11, 12]),
        );
        let mut buf = [0u8; 18];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..14], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 8, 0]);
        assert_eq!(
            EthRepr::parse(&ethernet_frame(&buf[..14]).unwrap()),
            Ok(repr)
        );

        repr.vlan = Some(VlanTag {
            pcp: 3,
            dei: false,
            vid: 100,
        });
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[12..], &[0x81, 0x00, 0x60, 100, 8, 0]);
        assert_eq!(repr.buffer_len(), 18);
        assert_eq!(EthRepr::parse(&ethernet_frame(&buf[..]).unwrap()), Ok(repr));
        assert_eq!(
            EthRepr::parse(&ethernet_frame(&buf[..16]).unwrap()),
            Err(WireError::Truncated {
                header: HeaderKind::Vlan,
                needed: 18,
                available: 16
            })
        );
        assert!(ethernet_frame(&buf[..13]).is_err());
    }
}
