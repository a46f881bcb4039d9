//! The UDP header of RoCE v2 (destination port 4791), over smoltcp's [`UdpPacket`], and the
//! UDP source-port formulas of rxe (roce-v2.md section 1).

use smoltcp::wire::UdpPacket;

use rnic_hw_regs::roce::UDP_SPORT_BASE;

use super::{HeaderKind, WireError, check_len};

// The port numbers and the source-port formulas are facts the driver computes too: they live
// in hw-regs, and the wire module re-exports them.
pub use rnic_hw_regs::roce::{
    ROCE_V2_PORT, rdma_calc_flow_label, rdma_flow_label_to_udp_sport, rdma_get_udp_sport,
};
/// Length of the UDP header.
pub(crate) const UDP_HEADER_LEN: usize = 8;

/// Wraps `buffer` as smoltcp's [`UdpPacket`] after checking that it holds the 8-byte header
/// and that the length field is between 8 and the buffer length.
///
/// ```
/// use rnic_emulator::wire::udp_packet;
///
/// let hdr = [0xC0, 0x00, 0x12, 0xB7, 0, 8, 0, 0]; // 49152 -> 4791, length 8
/// assert_eq!(udp_packet(&hdr[..])?.dst_port(), 4791);
/// assert!(udp_packet(&hdr[..7]).is_err());
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
pub fn udp_packet<T: AsRef<[u8]>>(buffer: T) -> Result<UdpPacket<T>, WireError> {
    let buf = buffer.as_ref();
    check_len(buf, UDP_HEADER_LEN, HeaderKind::Udp)?;
    let udp_len = usize::from(u16::from_be_bytes([buf[4], buf[5]]));
    if udp_len < UDP_HEADER_LEN || udp_len > buf.len() {
        return Err(WireError::UdpLength {
            udp_len,
            ip_payload_len: buf.len(),
        });
    }
    Ok(UdpPacket::new_unchecked(buffer))
}

/// A parsed UDP header. The length is not stored: [`UdpRepr::emit`] takes it.
///
/// ```
/// use rnic_emulator::wire::{udp_packet, UdpPacket, UdpRepr};
///
/// let repr = UdpRepr::new(0xC123);
/// let mut buf = [0u8; 8 + 16];
/// repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), 16);
/// assert_eq!(buf[..8], [0xC1, 0x23, 0x12, 0xB7, 0, 24, 0, 0]); // ports, length, checksum 0
/// assert_eq!(UdpRepr::parse(&udp_packet(&buf[..])?)?, repr);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port: a flow id, constant per QP (see [`rdma_get_udp_sport`]).
    pub src_port: u16,
    /// Destination port (4791 for RoCE v2).
    pub dst_port: u16,
    /// The checksum field, carried as is. rxe sends 0 ("no checksum"); a UDP-socket peer may
    /// send a real one. The ICRC masks it, so it is not verified.
    pub checksum: u16,
}

impl UdpRepr {
    /// A RoCE v2 header from `src_port` to 4791 with checksum 0.
    ///
    /// ```
    /// use rnic_emulator::wire::UdpRepr;
    ///
    /// let u = UdpRepr::new(0xD000);
    /// assert_eq!((u.src_port, u.dst_port, u.checksum, u.buffer_len()), (0xD000, 4791, 0, 8));
    /// ```
    pub const fn new(src_port: u16) -> Self {
        UdpRepr {
            src_port,
            dst_port: ROCE_V2_PORT,
            checksum: 0,
        }
    }

    /// Parses a UDP header (any ports; [`super::RocePacket`] insists on 4791).
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<Self, WireError> {
        let packet = udp_packet(packet.as_ref())?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            checksum: packet.checksum(),
        })
    }

    /// The header length (8).
    pub const fn buffer_len(&self) -> usize {
        UDP_HEADER_LEN
    }

    /// Writes the header for `payload_len` bytes after it. The packet must hold 8 bytes and
    /// `8 + payload_len` must fit 16 bits ([`super::PacketRepr::emit`] checks).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        payload_len: usize,
    ) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len((UDP_HEADER_LEN + payload_len) as u16);
        packet.set_checksum(self.checksum);
    }
}

/// Older rxe's source port for a QP: `0xC000 + hash_32(qpn, 14)`, with the kernel's
/// `hash_32(v, 14) = (v * 0x61C88647 mod 2^32) >> 18`.
///
/// ```
/// use rnic_emulator::wire::rxe_legacy_udp_sport;
///
/// assert_eq!(rxe_legacy_udp_sport(0x11), 0xDF94);
/// ```
pub const fn rxe_legacy_udp_sport(qpn: u32) -> u16 {
    UDP_SPORT_BASE + (qpn.wrapping_mul(0x61C8_8647) >> 18) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let repr = UdpRepr::new(0xC000);
        let mut buf = [0u8; 8];
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), 0x24);
        assert_eq!(buf, [0xC0, 0x00, 0x12, 0xB7, 0x00, 0x2C, 0, 0]);
        let mut long = [0u8; 0x2C];
        long[..8].copy_from_slice(&buf);
        assert_eq!(UdpRepr::parse(&udp_packet(&long[..]).unwrap()), Ok(repr));
        assert_eq!(
            udp_packet(&long[..0x2B]).err(),
            Some(WireError::UdpLength {
                udp_len: 0x2C,
                ip_payload_len: 0x2B
            })
        );
        assert!(matches!(
            udp_packet(&buf[..7]),
            Err(WireError::Truncated {
                header: HeaderKind::Udp,
                ..
            })
        ));
    }

    #[test]
    fn source_ports() {
        // hash_32(0, 14) = 0; values checked against an independent computation.
        assert_eq!(rxe_legacy_udp_sport(0), 0xC000);
        assert_eq!(
            rxe_legacy_udp_sport(1),
            0xC000 + (0x61C8_8647u32 >> 18) as u16
        );
        assert_eq!(rxe_legacy_udp_sport(0x11), 0xC000 + 0x1F94);
        // lqpn * rqpn = 0x11 * 0x12 = 0x132: no high bits to fold.
        assert_eq!(rdma_calc_flow_label(0x11, 0x12), 0x132);
        assert_eq!(rdma_get_udp_sport(0, 0x11, 0x12), 0xC132);
        // A non-zero flow label is used as is.
        assert_eq!(
            rdma_get_udp_sport(0xFC001, 0x11, 0x12),
            0xC000 | (0x0001 ^ 0x3F)
        );
        // Every port is in 0xC000..=0xFFFF.
        for q in [0u32, 1, 0xFF_FFFF, 0x12_3456] {
            assert!(rxe_legacy_udp_sport(q) >= 0xC000);
            assert!(rdma_get_udp_sport(0, q, 0xFF_FFFF) >= 0xC000);
        }
    }
}
