//! ICMPv4 echo (RFC 792) in an Ethernet / IPv4 frame: a whole frame's `Repr`
//! ([`EchoFrame`]) over smoltcp's [`Ipv4Packet`] and [`Icmpv4Packet`], and the reply to a
//! request (what `ping` expects from the port's address).

use std::net::Ipv4Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr};

use super::FrameError;
use super::framing::{self, ETHERTYPE_IPV4};

/// Bytes of an IPv4 header without options.
const IPV4_LEN: usize = 20;
/// Bytes of an ICMPv4 echo header (type, code, checksum, identifier, sequence number).
const ECHO_LEN: usize = 8;
/// ICMPv4 message types of echo.
const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
/// The TTL the port's replies leave with (Linux's default).
pub const REPLY_TTL: u8 = 64;

/// Echo request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoKind {
    /// `ping`'s question.
    Request,
    /// The answer.
    Reply,
}

/// An Ethernet frame carrying an IPv4 ICMP echo request or reply.
///
/// ```
/// use rnic_driver::net::icmp::{EchoFrame, EchoKind};
///
/// let req = EchoFrame {
///     eth_dst: [2, 0, 0, 0, 0, 1],
///     eth_src: [2, 0, 0, 0, 0, 2],
///     src_ip: [10, 0, 0, 2].into(),
///     dst_ip: [10, 0, 0, 1].into(),
///     kind: EchoKind::Request,
///     ident: 7,
///     seq_no: 1,
///     ttl: 64,
///     data: b"abcdefgh",
/// };
/// let mut buf = [0u8; 128];
/// let n = req.emit(&mut buf)?;
/// let back = EchoFrame::parse(&buf[..n])?; // checksums verified
/// assert_eq!(back, req);
/// let reply = back.reply();
/// assert_eq!((reply.kind, reply.dst_ip, reply.data), (EchoKind::Reply, req.src_ip, &b"abcdefgh"[..]));
/// # Ok::<(), rnic_driver::net::FrameError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoFrame<'a> {
    /// The Ethernet destination.
    pub eth_dst: [u8; 6],
    /// The Ethernet source.
    pub eth_src: [u8; 6],
    /// The IPv4 source.
    pub src_ip: Ipv4Addr,
    /// The IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// Request or reply.
    pub kind: EchoKind,
    /// The identifier (ping's process id, usually).
    pub ident: u16,
    /// The sequence number.
    pub seq_no: u16,
    /// The TTL.
    pub ttl: u8,
    /// The data, echoed back as it came.
    pub data: &'a [u8],
}

impl<'a> EchoFrame<'a> {
    /// Parses an Ethernet / IPv4 / ICMPv4 echo frame, verifying both checksums.
    ///
    /// ```
    /// use rnic_driver::net::{icmp::EchoFrame, FrameError};
    ///
    /// let mut f = [0u8; 60];
    /// f[12..14].copy_from_slice(&[0x08, 0x00]);
    /// assert_eq!(EchoFrame::parse(&f), Err(FrameError::Malformed)); // IP version 0
    /// ```
    pub fn parse(frame: &'a [u8]) -> Result<EchoFrame<'a>, FrameError> {
        let l2 = framing::parse(frame)?;
        if l2.ethertype != ETHERTYPE_IPV4 {
            return Err(FrameError::Unsupported);
        }
        let p = l2.payload;
        if p.len() < IPV4_LEN {
            return Err(FrameError::Short);
        }
        let ihl = usize::from(p[0] & 0x0F) * 4;
        let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
        if p[0] >> 4 != 4 || ihl < IPV4_LEN || total < ihl {
            return Err(FrameError::Malformed);
        }
        if total > p.len() {
            return Err(FrameError::Short);
        }
        let ip = Ipv4Packet::new_checked(p).map_err(|_| FrameError::Malformed)?;
        if ip.more_frags() || ip.frag_offset() != 0 {
            return Err(FrameError::Unsupported);
        }
        let caps = ChecksumCapabilities::default();
        let ip_repr = Ipv4Repr::parse(&ip, &caps).map_err(|_| FrameError::Malformed)?;
        if ip_repr.next_header != IpProtocol::Icmp {
            return Err(FrameError::Unsupported);
        }
        let icmp_bytes = &p[ihl..total];
        if icmp_bytes.len() < ECHO_LEN {
            return Err(FrameError::Short);
        }
        let icmp = Icmpv4Packet::new_checked(icmp_bytes).map_err(|_| FrameError::Malformed)?;
        if !matches!(u8::from(icmp.msg_type()), ECHO_REQUEST | ECHO_REPLY) {
            return Err(FrameError::Unsupported);
        }
        let (kind, ident, seq_no, data) =
            match Icmpv4Repr::parse(&icmp, &caps).map_err(|_| FrameError::Malformed)? {
                Icmpv4Repr::EchoRequest {
                    ident,
                    seq_no,
                    data,
                } => (EchoKind::Request, ident, seq_no, data),
                Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                } => (EchoKind::Reply, ident, seq_no, data),
                _ => return Err(FrameError::Unsupported),
            };
        Ok(EchoFrame {
            eth_dst: l2.dst,
            eth_src: l2.src,
            src_ip: ip_repr.src_addr,
            dst_ip: ip_repr.dst_addr,
            kind,
            ident,
            seq_no,
            ttl: ip_repr.hop_limit,
            data,
        })
    }

    /// A request from `eth_src` / `src_ip` to `eth_dst` / `dst_ip` (TTL [`REPLY_TTL`]), as
    /// `ping` sends.
    ///
    /// ```
    /// # use rnic_driver::net::icmp::{EchoFrame, EchoKind};
    /// let r = EchoFrame::request([2; 6], [1; 6], [10, 0, 0, 2].into(), [10, 0, 0, 1].into(), 7, 1, b"hi");
    /// assert_eq!((r.kind, r.eth_dst, r.ttl), (EchoKind::Request, [1; 6], 64));
    /// ```
    pub fn request(
        eth_src: [u8; 6],
        eth_dst: [u8; 6],
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    ) -> EchoFrame<'a> {
        EchoFrame {
            eth_dst,
            eth_src,
            src_ip,
            dst_ip,
            kind: EchoKind::Request,
            ident,
            seq_no,
            ttl: REPLY_TTL,
            data,
        }
    }

    /// The frame's length when emitted (before padding to 60 bytes).
    ///
    /// ```
    /// # use rnic_driver::net::icmp::{EchoFrame, EchoKind};
    /// # let f = EchoFrame { eth_dst: [0; 6], eth_src: [0; 6], src_ip: [0; 4].into(), dst_ip: [0; 4].into(),
    /// #     kind: EchoKind::Request, ident: 0, seq_no: 0, ttl: 64, data: &[0; 56] };
    /// assert_eq!(f.buffer_len(), 14 + 20 + 8 + 56); // ping's default 56 bytes of data
    /// ```
    pub fn buffer_len(&self) -> usize {
        14 + IPV4_LEN + ECHO_LEN + self.data.len()
    }

    /// Writes the frame into `out` (an IPv4 header without options, ID 0, DF; both
    /// checksums filled in); returns its length.
    ///
    /// ```
    /// # use rnic_driver::net::{icmp::{EchoFrame, EchoKind}, FrameError};
    /// # let f = EchoFrame { eth_dst: [0; 6], eth_src: [0; 6], src_ip: [0; 4].into(), dst_ip: [0; 4].into(),
    /// #     kind: EchoKind::Request, ident: 0, seq_no: 0, ttl: 64, data: &[0; 56] };
    /// assert_eq!(f.emit(&mut [0u8; 64]), Err(FrameError::BufferTooSmall));
    /// ```
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, FrameError> {
        let icmp_len = ECHO_LEN + self.data.len();
        let ip_len = IPV4_LEN + icmp_len;
        if ip_len > usize::from(u16::MAX) {
            return Err(FrameError::BufferTooSmall);
        }
        let n = framing::emit(out, self.eth_dst, self.eth_src, ETHERTYPE_IPV4, ip_len)?;
        let caps = ChecksumCapabilities::default();
        let payload = framing::payload_mut(out, ip_len);
        let ip = Ipv4Repr {
            src_addr: self.src_ip,
            dst_addr: self.dst_ip,
            next_header: IpProtocol::Icmp,
            payload_len: icmp_len,
            hop_limit: self.ttl,
        };
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut *payload), &caps);
        let icmp = match self.kind {
            EchoKind::Request => Icmpv4Repr::EchoRequest {
                ident: self.ident,
                seq_no: self.seq_no,
                data: self.data,
            },
            EchoKind::Reply => Icmpv4Repr::EchoReply {
                ident: self.ident,
                seq_no: self.seq_no,
                data: self.data,
            },
        };
        icmp.emit(
            &mut Icmpv4Packet::new_unchecked(&mut payload[IPV4_LEN..]),
            &caps,
        );
        Ok(n)
    }

    /// The reply to this request: addresses swapped, the same identifier, sequence number
    /// and data, TTL [`REPLY_TTL`].
    ///
    /// ```
    /// # use rnic_driver::net::icmp::{EchoFrame, EchoKind};
    /// # let f = EchoFrame { eth_dst: [1; 6], eth_src: [2; 6], src_ip: [1; 4].into(), dst_ip: [2; 4].into(),
    /// #     kind: EchoKind::Request, ident: 3, seq_no: 4, ttl: 1, data: &[] };
    /// let r = f.reply();
    /// assert_eq!((r.eth_dst, r.src_ip, r.seq_no), ([2; 6], [2; 4].into(), 4));
    /// ```
    pub fn reply(&self) -> EchoFrame<'a> {
        EchoFrame {
            eth_dst: self.eth_src,
            eth_src: self.eth_dst,
            src_ip: self.dst_ip,
            dst_ip: self.src_ip,
            kind: EchoKind::Reply,
            ttl: REPLY_TTL,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(buf: &mut [u8]) -> usize {
        let (us, peer) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        EchoFrame::request(
            peer,
            us,
            [10, 0, 0, 2].into(),
            [10, 0, 0, 1].into(),
            0x1234,
            9,
            &[0x5A; 32],
        )
        .emit(buf)
        .unwrap()
    }

    #[test]
    fn bad_frames() {
        let mut b = [0u8; 128];
        let n = request(&mut b);
        assert!(EchoFrame::parse(&b[..n]).is_ok());
        assert_eq!(
            EchoFrame::parse(&b[..n - 1]),
            Err(FrameError::Short),
            "total length"
        );
        assert_eq!(EchoFrame::parse(&b[..14 + 19]), Err(FrameError::Short));
        let mut sum = b;
        sum[14 + 20 + 2] ^= 1; // ICMP checksum
        assert_eq!(EchoFrame::parse(&sum[..n]), Err(FrameError::Malformed));
        let mut ipsum = b;
        ipsum[14 + 10] ^= 1; // IP header checksum
        assert_eq!(EchoFrame::parse(&ipsum[..n]), Err(FrameError::Malformed));
        let mut udp = b;
        udp[14 + 9] = 17;
        Ipv4Packet::new_unchecked(&mut udp[14..n]).fill_checksum();
        assert_eq!(EchoFrame::parse(&udp[..n]), Err(FrameError::Unsupported));
        let mut frag = b;
        frag[14 + 6] = 0x20; // more fragments
        assert_eq!(EchoFrame::parse(&frag[..n]), Err(FrameError::Unsupported));
        let mut unreachable = b;
        unreachable[14 + 20] = 3;
        assert_eq!(
            EchoFrame::parse(&unreachable[..n]),
            Err(FrameError::Unsupported)
        );
    }
}
