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
pub const ETH_MIN_FRAME_LEN: usize = 60;

/// Wraps `buffer` as smoltcp's [`EthernetFrame`] after checking that it holds the 14-byte
/// header, with a typed error instead of smoltcp's opaque one.
pub fn ethernet_frame<T: AsRef<[u8]>>(buffer: T) -> Result<EthernetFrame<T>, WireError> {
    check_len(buffer.as_ref(), ETH_HEADER_LEN, HeaderKind::Ethernet)?;
    Ok(EthernetFrame::new_unchecked(buffer))
}

/// An IEEE 802.1Q tag (the TCI; the TPID is 0x8100).
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
    pub const fn tci(self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0FFF)
    }

    /// The tag for a tag control information word.
    pub const fn from_tci(tci: u16) -> Self {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0FFF,
        }
    }
}

/// A parsed Ethernet header.
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
