//! The RoCE v2 invariant CRC (roce-v2.md section 3).
//!
//! CRC-32 (the Ethernet / zlib polynomial, as [`crc32fast`] computes it) over
//! 1. 8 bytes of 0xFF (the pseudo LRH);
//! 2. the IP header with the variant fields set to all ones: IPv4 TOS, TTL and header
//!    checksum; IPv6 traffic class, flow label and hop limit;
//! 3. the UDP header with the checksum set to 0xFFFF;
//! 4. the BTH with byte 4 (FECN, BECN, reserved) set to 0xFF;
//! 5. everything after the BTH up to the ICRC, unmodified.
//!
//! The result goes on the wire least-significant byte first. Nothing here allocates: the
//! masked headers are copied to small arrays on the stack.

use super::bth::BTH_LEN;
use super::ip::{IPV4_HEADER_LEN, IPV6_HEADER_LEN};
use super::udp::UDP_HEADER_LEN;
use super::{HeaderKind, WireError, check_len};

/// Length of the ICRC.
///
/// ```
/// use rnic_emulator::wire::{icrc::ICRC_LEN, RocePacket};
/// # use rnic_emulator::wire::*;
/// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// # let ip = IpRepr::V4(Ipv4Repr::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into()));
/// # let repr = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendOnly, 1, 0));
/// # let mut buf = [0u8; 128];
/// # let len = repr.emit(&mut buf, b"data").unwrap();
/// # let frame = &buf[..len];
///
/// let pkt = RocePacket::new_checked(frame)?;
/// assert_eq!(pkt.icrc().to_le_bytes(), frame[pkt.packet_len() - ICRC_LEN..pkt.packet_len()]);
/// # Ok::<(), WireError>(())
/// ```
pub const ICRC_LEN: usize = 4;

#[cfg(test)]
thread_local! {
    /// ICRC computations on this thread (tests measure the work a frame costs).
    pub(crate) static PASSES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The pseudo LRH: 8 bytes of 0xFF.
const PSEUDO_LRH: [u8; 8] = [0xFF; 8];

/// Computes the ICRC of a RoCE v2 packet given as `packet`: from the first byte of the IP
/// header up to (not including) the ICRC. The IP version comes from the first nibble; IPv4
/// must have IHL 5.
///
/// ```
/// use rnic_emulator::wire::{icrc, RocePacket};
/// # use rnic_emulator::wire::*;
/// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// # let ip = IpRepr::V4(Ipv4Repr::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into()));
/// # let repr = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendOnly, 1, 0));
/// # let mut buf = [0u8; 128];
/// # let len = repr.emit(&mut buf, b"data").unwrap();
/// # let frame = &buf[..len];
///
/// let ip = &frame[14..len - 4]; // the IP header up to the ICRC
/// let crc = icrc::compute(ip)?;
/// assert_eq!(crc, RocePacket::new_checked(frame)?.icrc());
/// let mut other = ip.to_vec();
/// other[8] = 1; // the TTL is masked out: same ICRC
/// assert_eq!(icrc::compute(&other)?, crc);
/// # Ok::<(), WireError>(())
/// ```
pub fn compute(packet: &[u8]) -> Result<u32, WireError> {
    #[cfg(test)]
    PASSES.with(|p| p.set(p.get() + 1));
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&PSEUDO_LRH);
    let version = packet.first().map_or(0, |b| b >> 4);
    let ip_len = match version {
        4 => {
            check_len(packet, IPV4_HEADER_LEN, HeaderKind::Ipv4)?;
            let mut ip = [0u8; IPV4_HEADER_LEN];
            ip.copy_from_slice(&packet[..IPV4_HEADER_LEN]);
            if ip[0] & 0x0F != 5 {
                return Err(WireError::BadIhl { ihl: ip[0] & 0x0F });
            }
            ip[1] = 0xFF; // TOS
            ip[8] = 0xFF; // TTL
            ip[10] = 0xFF; // header checksum
            ip[11] = 0xFF;
            hasher.update(&ip);
            IPV4_HEADER_LEN
        }
        6 => {
            check_len(packet, IPV6_HEADER_LEN, HeaderKind::Ipv6)?;
            let mut ip = [0u8; IPV6_HEADER_LEN];
            ip.copy_from_slice(&packet[..IPV6_HEADER_LEN]);
            ip[0] |= 0x0F; // traffic class, high nibble
            ip[1] = 0xFF; // traffic class low nibble, flow label
            ip[2] = 0xFF;
            ip[3] = 0xFF;
            ip[7] = 0xFF; // hop limit
            hasher.update(&ip);
            IPV6_HEADER_LEN
        }
        found => {
            return Err(WireError::IpVersion { expected: 4, found });
        }
    };
    let rest = &packet[ip_len..];
    check_len(rest, UDP_HEADER_LEN + BTH_LEN, HeaderKind::Bth)?;
    let mut udp_bth = [0u8; UDP_HEADER_LEN + BTH_LEN];
    udp_bth.copy_from_slice(&rest[..UDP_HEADER_LEN + BTH_LEN]);
    udp_bth[6] = 0xFF; // UDP checksum
    udp_bth[7] = 0xFF;
    udp_bth[UDP_HEADER_LEN + 4] = 0xFF; // BTH byte 4
    hasher.update(&udp_bth);
    hasher.update(&rest[UDP_HEADER_LEN + BTH_LEN..]);
    Ok(hasher.finalize())
}

/// Fills in the ICRC of a whole Ethernet frame emitted without it
/// ([`crate::wire::PacketRepr::emit_unsealed`]), making it byte-exact RoCE v2 again; returns
/// false (and leaves the frame as it is) when it is not a RoCE v2 frame.
pub(crate) fn seal(frame: &mut [u8]) -> bool {
    match super::RocePacket::new_checked(frame) {
        Ok(mut p) => {
            p.fill_icrc();
            true
        }
        Err(_) => false,
    }
}

/// Checks the ICRC of `packet`: from the first byte of the IP header through the 4-byte ICRC
/// at its end. Returns [`WireError::IcrcMismatch`] with both values when they differ.
///
/// ```
/// use rnic_emulator::wire::{icrc, WireError};
/// # use rnic_emulator::wire::*;
/// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// # let ip = IpRepr::V4(Ipv4Repr::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into()));
/// # let repr = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendOnly, 1, 0));
/// # let mut buf = [0u8; 128];
/// # let len = repr.emit(&mut buf, b"data").unwrap();
///
/// let mut ip = buf[14..len].to_vec(); // IP header through the ICRC
/// icrc::verify(&ip)?;
/// ip[30] ^= 0x40; // a BTH bit (the P_Key)
/// assert!(matches!(icrc::verify(&ip), Err(WireError::IcrcMismatch { .. })));
/// # Ok::<(), WireError>(())
/// ```
pub fn verify(packet: &[u8]) -> Result<(), WireError> {
    let body_len = packet
        .len()
        .checked_sub(ICRC_LEN)
        .ok_or(WireError::Truncated {
            header: HeaderKind::Icrc,
            needed: ICRC_LEN,
            available: packet.len(),
        })?;
    let (body, icrc) = packet.split_at(body_len);
    let actual = u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]]);
    let expected = compute(body)?;
    if expected == actual {
        Ok(())
    } else {
        Err(WireError::IcrcMismatch { expected, actual })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// roce-v2.md worked example (a): UC SEND_ONLY over IPv4, from scapy's tests.
    const EXAMPLE_A: [u8; 64] = [
        0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5, 0xc0, 0xa8, 0x00,
        0x07, 0xc0, 0xa8, 0x00, 0x07, // IPv4
        0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2, // UDP
        0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10, // BTH
        0x46, 0x30, 0x81, 0x8b, 0xe2, 0x89, 0x35, 0xd9, 0x0e, 0x9a, 0x95, 0x50, 0x54, 0x01, 0xbe,
        0x88, 0x5e, 0x50, 0x00, 0x00, // payload + pad
        0x78, 0xf3, 0x53, 0xf3, // ICRC
    ];

    /// roce-v2.md worked example (b): a CNP from a ConnectX-4 Lx.
    const EXAMPLE_B: [u8; 60] = [
        0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11,
        0x01, 0x0a, 0x00, 0x12, 0x01, // IPv4
        0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, // UDP
        0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, // BTH
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0x82, 0xfd, 0x00, 0x2a, // ICRC
    ];

    #[test]
    fn worked_example_a() {
        assert_eq!(compute(&EXAMPLE_A[..60]), Ok(0xF353_F378));
        assert_eq!(verify(&EXAMPLE_A), Ok(()));
    }

    #[test]
    fn worked_example_b() {
        assert_eq!(compute(&EXAMPLE_B[..56]), Ok(0x2A00_FD82));
        assert_eq!(verify(&EXAMPLE_B), Ok(()));
    }

    #[test]
    fn rxe_seed_is_the_register_after_the_pseudo_lrh() {
        // rxe seeds its raw (non-inverted) CRC register with 0xDEBB20E3 and skips the 8 x 0xFF.
        let mut h = crc32fast::Hasher::new_with_initial(0);
        h.update(&PSEUDO_LRH);
        assert_eq!(!h.finalize(), 0xDEBB_20E3);
    }

    #[test]
    fn variant_fields_are_masked() {
        let mut p = EXAMPLE_A;
        p[1] = 0x00; // TOS
        p[8] = 0x01; // TTL
        p[10] = 0x12; // checksum
        p[26] = 0x55; // UDP checksum
        p[32] = 0xC0; // FECN, BECN
        assert_eq!(verify(&p), Ok(()));
        p[4] ^= 1; // the IP ID is covered
        assert!(matches!(verify(&p), Err(WireError::IcrcMismatch { .. })));
        let mut q = EXAMPLE_A;
        q[45] ^= 0x80;
        assert_eq!(
            verify(&q),
            Err(WireError::IcrcMismatch {
                expected: compute(&q[..60]).unwrap(),
                actual: 0xF353_F378
            })
        );
    }

    #[test]
    fn ipv6_masks_class_flow_hop() {
        let mut p = [0u8; 40 + 8 + 12 + 4];
        p[0] = 0x60;
        let a = compute(&p[..60]).unwrap();
        p[0] = 0x6F;
        p[1] = 0xAB;
        p[2] = 0xCD;
        p[3] = 0xEF;
        p[7] = 3;
        assert_eq!(compute(&p[..60]), Ok(a));
        p[4] = 1; // payload length is covered
        assert_ne!(compute(&p[..60]), Ok(a));
    }

    #[test]
    fn short_inputs_are_errors() {
        for n in 0..EXAMPLE_A.len() {
            let r = verify(&EXAMPLE_A[..n]);
            assert!(r.is_err(), "{n}");
        }
        assert!(matches!(
            compute(&[0x35; 30]),
            Err(WireError::IpVersion { found: 3, .. })
        ));
    }
}
