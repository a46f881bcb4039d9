//! ARP over Ethernet for IPv4 (RFC 826): a whole frame's `Repr` ([`ArpFrame`]) over
//! smoltcp's [`ArpPacket`] / [`ArpRepr`], and the frames the port sends: requests, replies
//! and gratuitous announcements.

use std::net::Ipv4Addr;

use smoltcp::wire::{ArpOperation, ArpPacket, ArpRepr, EthernetAddress};

use super::FrameError;
use super::framing::{self, BROADCAST, ETHERTYPE_ARP};

/// The ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpOp {
    /// Who has `target_ip`? Tell `sender_ip`.
    Request,
    /// `sender_ip` is at `sender_mac`.
    Reply,
}

/// An Ethernet frame carrying an ARP packet for IPv4.
///
/// ```
/// use rnic_driver::net::arp::{ArpFrame, ArpOp};
/// use std::net::Ipv4Addr;
///
/// let req = ArpFrame::request([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
/// let mut buf = [0u8; 64];
/// let n = req.emit(&mut buf)?;
/// assert_eq!(n, 60); // 14 + 28, padded to the Ethernet minimum
/// let back = ArpFrame::parse(&buf[..n])?;
/// assert_eq!(back, req);
/// assert_eq!((back.op, back.eth_dst), (ArpOp::Request, [0xFF; 6]));
/// # Ok::<(), rnic_driver::net::FrameError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpFrame {
    /// The Ethernet destination.
    pub eth_dst: [u8; 6],
    /// The Ethernet source.
    pub eth_src: [u8; 6],
    /// Request or reply.
    pub op: ArpOp,
    /// The sender's hardware address.
    pub sender_mac: [u8; 6],
    /// The sender's IPv4 address.
    pub sender_ip: Ipv4Addr,
    /// The target's hardware address (zero in a request).
    pub target_mac: [u8; 6],
    /// The target's IPv4 address.
    pub target_ip: Ipv4Addr,
}

/// Bytes of an ARP packet for Ethernet and IPv4.
const ARP_LEN: usize = 28;

impl ArpFrame {
    /// Parses an Ethernet frame carrying ARP for Ethernet / IPv4.
    ///
    /// ```
    /// use rnic_driver::net::{arp::ArpFrame, FrameError};
    ///
    /// let mut f = [0u8; 60];
    /// f[12..14].copy_from_slice(&[0x08, 0x00]); // IPv4, not ARP
    /// assert_eq!(ArpFrame::parse(&f), Err(FrameError::Unsupported));
    /// ```
    pub fn parse(frame: &[u8]) -> Result<ArpFrame, FrameError> {
        let l2 = framing::parse(frame)?;
        if l2.ethertype != ETHERTYPE_ARP {
            return Err(FrameError::Unsupported);
        }
        if l2.payload.len() < ARP_LEN {
            return Err(FrameError::Short);
        }
        let p = ArpPacket::new_checked(l2.payload).map_err(|_| FrameError::Malformed)?;
        let op = match p.operation() {
            ArpOperation::Request => ArpOp::Request,
            ArpOperation::Reply => ArpOp::Reply,
            _ => return Err(FrameError::Unsupported),
        };
        match ArpRepr::parse(&p).map_err(|_| FrameError::Malformed)? {
            ArpRepr::EthernetIpv4 {
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
                ..
            } => Ok(ArpFrame {
                eth_dst: l2.dst,
                eth_src: l2.src,
                op,
                sender_mac: source_hardware_addr.0,
                sender_ip: source_protocol_addr,
                target_mac: target_hardware_addr.0,
                target_ip: target_protocol_addr,
            }),
            _ => Err(FrameError::Malformed),
        }
    }

    /// Writes the frame into `out` (padded to 60 bytes); returns its length.
    ///
    /// ```
    /// use rnic_driver::net::{arp::ArpFrame, FrameError};
    ///
    /// let g = ArpFrame::gratuitous([2, 0, 0, 0, 0, 1], [10, 0, 0, 1].into());
    /// assert_eq!(g.emit(&mut [0u8; 59]), Err(FrameError::BufferTooSmall));
    /// ```
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, FrameError> {
        let n = framing::emit(out, self.eth_dst, self.eth_src, ETHERTYPE_ARP, ARP_LEN)?;
        let operation = match self.op {
            ArpOp::Request => ArpOperation::Request,
            ArpOp::Reply => ArpOperation::Reply,
        };
        let repr = ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: EthernetAddress(self.sender_mac),
            source_protocol_addr: self.sender_ip,
            target_hardware_addr: EthernetAddress(self.target_mac),
            target_protocol_addr: self.target_ip,
        };
        repr.emit(&mut ArpPacket::new_unchecked(framing::payload_mut(
            out, ARP_LEN,
        )));
        Ok(n)
    }

    /// A broadcast request from `mac` / `ip` for `target`.
    ///
    /// ```
    /// # use rnic_driver::net::arp::ArpFrame;
    /// let r = ArpFrame::request([2, 0, 0, 0, 0, 1], [10, 0, 0, 1].into(), [10, 0, 0, 2].into());
    /// assert_eq!(r.target_mac, [0; 6]);
    /// ```
    pub fn request(mac: [u8; 6], ip: Ipv4Addr, target: Ipv4Addr) -> ArpFrame {
        ArpFrame {
            eth_dst: BROADCAST,
            eth_src: mac,
            op: ArpOp::Request,
            sender_mac: mac,
            sender_ip: ip,
            target_mac: [0; 6],
            target_ip: target,
        }
    }

    /// The request, sent to `peer_mac` only: how a stale entry is confirmed without
    /// bothering every station (what Linux calls a unicast probe).
    ///
    /// ```
    /// # use rnic_driver::net::arp::ArpFrame;
    /// let r = ArpFrame::request([2, 0, 0, 0, 0, 1], [10, 0, 0, 1].into(), [10, 0, 0, 2].into())
    ///     .unicast_to([2, 0, 0, 0, 0, 2]);
    /// assert_eq!(r.eth_dst, [2, 0, 0, 0, 0, 2]);
    /// ```
    pub fn unicast_to(self, peer_mac: [u8; 6]) -> ArpFrame {
        ArpFrame {
            eth_dst: peer_mac,
            ..self
        }
    }

    /// The reply to this request from `mac` (the owner of its `target_ip`), sent to the
    /// requester.
    ///
    /// ```
    /// # use rnic_driver::net::arp::{ArpFrame, ArpOp};
    /// let req = ArpFrame::request([2, 0, 0, 0, 0, 2], [10, 0, 0, 2].into(), [10, 0, 0, 1].into());
    /// let rep = req.reply_from([2, 0, 0, 0, 0, 1]);
    /// assert_eq!((rep.op, rep.eth_dst, rep.sender_ip), (ArpOp::Reply, [2, 0, 0, 0, 0, 2], [10, 0, 0, 1].into()));
    /// ```
    pub fn reply_from(&self, mac: [u8; 6]) -> ArpFrame {
        ArpFrame {
            eth_dst: self.sender_mac,
            eth_src: mac,
            op: ArpOp::Reply,
            sender_mac: mac,
            sender_ip: self.target_ip,
            target_mac: self.sender_mac,
            target_ip: self.sender_ip,
        }
    }

    /// A gratuitous ARP announcing that `ip` is at `mac` (a broadcast request for the
    /// sender's own address, RFC 5227 section 3): sent when an address comes up, so
    /// neighbours update what they hold.
    ///
    /// ```
    /// # use rnic_driver::net::arp::ArpFrame;
    /// let g = ArpFrame::gratuitous([2, 0, 0, 0, 0, 1], [10, 0, 0, 1].into());
    /// assert!(g.is_gratuitous());
    /// ```
    pub fn gratuitous(mac: [u8; 6], ip: Ipv4Addr) -> ArpFrame {
        ArpFrame::request(mac, ip, ip)
    }

    /// Whether the frame announces its sender's own address (sender and target IP equal).
    ///
    /// ```
    /// # use rnic_driver::net::arp::ArpFrame;
    /// let r = ArpFrame::request([2, 0, 0, 0, 0, 1], [10, 0, 0, 1].into(), [10, 0, 0, 2].into());
    /// assert!(!r.is_gratuitous());
    /// ```
    pub fn is_gratuitous(&self) -> bool {
        self.sender_ip == self.target_ip
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request_bytes() -> [u8; 60] {
        let mut b = [0u8; 60];
        ArpFrame::request(
            [2, 0, 0, 0, 0, 2],
            [10, 0, 0, 2].into(),
            [10, 0, 0, 1].into(),
        )
        .emit(&mut b)
        .unwrap();
        b
    }

    #[test]
    fn bytes_on_the_wire() {
        let b = request_bytes();
        assert_eq!(&b[12..14], [0x08, 0x06]);
        // htype 1, ptype 0x0800, hlen 6, plen 4, op 1.
        assert_eq!(&b[14..22], [0, 1, 8, 0, 6, 4, 0, 1]);
        assert_eq!(&b[28..32], [10, 0, 0, 2]);
        assert_eq!(&b[38..42], [10, 0, 0, 1]);
    }

    #[test]
    fn bad_frames() {
        let b = request_bytes();
        assert_eq!(ArpFrame::parse(&b[..14 + 27]), Err(FrameError::Short));
        let mut op = b;
        op[21] = 9; // neither request nor reply
        assert_eq!(ArpFrame::parse(&op), Err(FrameError::Unsupported));
        let mut hw = b;
        hw[15] = 6; // IEEE 802 hardware type, not Ethernet
        assert_eq!(ArpFrame::parse(&hw), Err(FrameError::Malformed));
        let mut plen = b;
        plen[19] = 16; // protocol address length of IPv6: does not fit
        assert!(ArpFrame::parse(&plen).is_err());
    }
}
