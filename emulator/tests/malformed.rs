//! Malformed input: parsing never panics and says what is wrong; emit / parse round-trips for
//! every opcode, IPv4 and IPv6, with and without an 802.1Q tag.

mod common;

use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rnic_emulator::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, CnpRepr, DethRepr, EthRepr,
    EthernetAddress, HeaderKind, IethRepr, ImmDtRepr, IpRepr, Ipv4Repr, Ipv6Repr, NakCode, Opcode,
    PacketRepr, RethRepr, RocePacket, Syndrome, UdpRepr, VlanTag, WireError,
};

use common::read_frames;

/// Offsets in an untagged IPv4 frame.
const IP: usize = 14;
const UDP: usize = 34;
const BTH: usize = 42;

/// The first RDMA WRITE ONLY of rdma_write_only.pcap (138 bytes, RETH, 64 bytes of payload).
fn write_only() -> Vec<u8> {
    read_frames("rdma_write_only.pcap").swap_remove(0)
}

/// The first ACK of rdma_write_only.pcap (62 bytes).
fn ack() -> Vec<u8> {
    read_frames("rdma_write_only.pcap").swap_remove(1)
}

/// Recomputes the IPv4 header checksum of an untagged frame.
fn fix_ip_checksum(frame: &mut [u8]) {
    frame[IP + 10] = 0;
    frame[IP + 11] = 0;
    let mut sum = 0u32;
    for pair in frame[IP..IP + 20].chunks(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    frame[IP + 10..IP + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// Sets the IP total length and the UDP length so that the UDP datagram is `udp_len` bytes,
/// cutting or zero-extending the frame to match, and fixes the IP checksum.
fn set_udp_len(frame: &mut Vec<u8>, udp_len: usize) {
    frame.resize(UDP + udp_len, 0);
    frame[IP + 2..IP + 4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
    if udp_len >= 6 {
        frame[UDP + 4..UDP + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    }
    fix_ip_checksum(frame);
}

fn parse_err(frame: &[u8]) -> WireError {
    match PacketRepr::parse(frame) {
        Ok((r, _)) => panic!("parsed: {r:?}"),
        Err(e) => e,
    }
}

#[test]
fn truncated_at_every_length() {
    let frame = write_only();
    for n in 0..frame.len() {
        let err = parse_err(&frame[..n]);
        let ok = match n {
            0..=13 => {
                err == WireError::Truncated {
                    header: HeaderKind::Ethernet,
                    needed: 14,
                    available: n,
                }
            }
            14..=33 => {
                err == WireError::Truncated {
                    header: HeaderKind::Ipv4,
                    needed: 20,
                    available: n - 14,
                }
            }
            _ => {
                err == WireError::IpLength {
                    ip_len: 124,
                    available: n - 14,
                }
            }
        };
        assert!(ok, "length {n}: {err}");
    }
    assert!(PacketRepr::parse(&frame).is_ok());
}

#[test]
fn consistently_shortened_datagrams() {
    // Lengths that agree with each other but leave no room for the headers.
    let full = write_only();
    for udp_len in 0..=(8 + 12 + 16 + 4 + 8) {
        let mut frame = full.clone();
        set_udp_len(&mut frame, udp_len);
        let err = parse_err(&frame);
        let ib = udp_len.saturating_sub(8);
        let expected = match udp_len {
            0..=7 => WireError::Truncated {
                header: HeaderKind::Udp,
                needed: 8,
                available: udp_len,
            },
            _ if ib < 12 => WireError::Truncated {
                header: HeaderKind::Bth,
                needed: 12,
                available: ib,
            },
            _ if ib < 28 => WireError::Truncated {
                header: HeaderKind::Reth,
                needed: 16,
                available: ib - 12,
            },
            _ if ib < 32 => WireError::Truncated {
                header: HeaderKind::Icrc,
                needed: 4,
                available: ib - 28,
            },
            _ if (ib - 32) % 4 != 0 => WireError::PadCount {
                pad_count: 0,
                available: ib - 32,
            },
            _ => {
                assert!(
                    matches!(err, WireError::IcrcMismatch { .. }),
                    "{udp_len}: {err}"
                );
                continue;
            }
        };
        assert_eq!(err, expected, "UDP length {udp_len}");
    }
}

#[test]
fn ethernet_padding_is_ignored() {
    // The ICRC is found from the UDP length, not the frame end.
    let frame = ack();
    let (repr, payload) = PacketRepr::parse(&frame).unwrap();
    let mut padded = frame.clone();
    padded.extend_from_slice(&[0xAA; 10]);
    assert_eq!(PacketRepr::parse(&padded).unwrap(), (repr, payload));
}

#[test]
fn not_ip_and_wrong_ip_version() {
    let mut frame = ack();
    frame[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(parse_err(&frame), WireError::NotIp { ethertype: 0x0806 });

    let mut frame = ack();
    frame[IP] = 0x65;
    assert_eq!(
        parse_err(&frame),
        WireError::IpVersion {
            expected: 4,
            found: 6
        }
    );
    // EtherType IPv6 over an IPv4 header.
    let mut frame = ack();
    frame[12..14].copy_from_slice(&[0x86, 0xDD]);
    assert_eq!(
        parse_err(&frame),
        WireError::IpVersion {
            expected: 6,
            found: 4
        }
    );
}

#[test]
fn ihl_other_than_5() {
    for ihl in (0..16u8).filter(|&i| i != 5) {
        let mut frame = ack();
        frame[IP] = 0x40 | ihl;
        assert_eq!(parse_err(&frame), WireError::BadIhl { ihl });
    }
}

#[test]
fn lengths_that_do_not_add_up() {
    // IP total length beyond the frame.
    let mut frame = ack();
    frame[IP + 2..IP + 4].copy_from_slice(&49u16.to_be_bytes());
    fix_ip_checksum(&mut frame);
    assert_eq!(
        parse_err(&frame),
        WireError::IpLength {
            ip_len: 49,
            available: 48
        }
    );
    // IP total length below the header length.
    frame[IP + 2..IP + 4].copy_from_slice(&19u16.to_be_bytes());
    fix_ip_checksum(&mut frame);
    assert_eq!(
        parse_err(&frame),
        WireError::IpLength {
            ip_len: 19,
            available: 48
        }
    );
    // UDP length longer or shorter than the IP payload.
    for udp_len in [27u16, 29, 0, 8, 0xFFFF] {
        let mut frame = ack();
        frame[UDP + 4..UDP + 6].copy_from_slice(&udp_len.to_be_bytes());
        assert_eq!(
            parse_err(&frame),
            WireError::UdpLength {
                udp_len: usize::from(udp_len),
                ip_payload_len: 28
            }
        );
    }
    // Payload on an opcode that has none: an ACK with 4 more bytes.
    let mut frame = ack();
    set_udp_len(&mut frame, 32);
    assert_eq!(
        parse_err(&frame),
        WireError::UnexpectedPayload {
            opcode: Opcode::RcAcknowledge,
            len: 4
        }
    );
}

#[test]
fn ip_checksum_protocol_fragments() {
    let mut frame = ack();
    frame[IP + 10] ^= 0x01;
    assert!(matches!(parse_err(&frame), WireError::BadIpChecksum { .. }));
    let mut frame = ack();
    frame[IP + 9] = 6;
    fix_ip_checksum(&mut frame);
    assert_eq!(parse_err(&frame), WireError::NotUdp { protocol: 6 });
    let mut frame = ack();
    frame[IP + 6] = 0x20; // MF
    fix_ip_checksum(&mut frame);
    assert_eq!(
        parse_err(&frame),
        WireError::Fragmented {
            offset: 0,
            more: true
        }
    );
}

#[test]
fn wrong_udp_port() {
    for port in [0u16, 4790, 4792, 0x12B8] {
        let mut frame = ack();
        frame[UDP + 2..UDP + 4].copy_from_slice(&port.to_be_bytes());
        assert_eq!(parse_err(&frame), WireError::NotRoce { port });
    }
}

#[test]
fn unknown_opcodes() {
    let frame = ack();
    let mut unknown = 0;
    for op in 0..=255u8 {
        if Opcode::from_u8(op).is_some() {
            continue;
        }
        unknown += 1;
        let mut f = frame.clone();
        f[BTH] = op;
        assert_eq!(parse_err(&f), WireError::UnknownOpcode(op));
    }
    assert_eq!(unknown, 256 - 38);
}

#[test]
fn tver_must_be_zero() {
    for tver in 1..16u8 {
        let mut frame = ack();
        frame[BTH + 1] |= tver;
        assert_eq!(parse_err(&frame), WireError::BadTver(tver));
    }
}

#[test]
fn pad_counts_that_do_not_fit() {
    // An ACK has no payload: any pad count is more than what follows the AETH.
    for pad in 1..4u8 {
        let mut frame = ack();
        frame[BTH + 1] |= pad << 4;
        assert_eq!(
            parse_err(&frame),
            WireError::PadCount {
                pad_count: pad,
                available: 0
            }
        );
    }
    // A datagram whose payload + pad is not a multiple of 4.
    let mut frame = write_only();
    set_udp_len(&mut frame, 8 + 12 + 16 + 63 + 4);
    assert_eq!(
        parse_err(&frame),
        WireError::PadCount {
            pad_count: 0,
            available: 63
        }
    );
    // A pad count that fits is fine (63 bytes of payload + 1 byte of pad).
    let mut frame = write_only();
    frame[BTH + 1] |= 1 << 4;
    let packet = RocePacket::new_checked(&frame[..]).unwrap();
    assert_eq!((packet.payload().len(), packet.pad().len()), (63, 1));
}

#[test]
fn reserved_aeth_syndromes() {
    for syndrome in [0x40u8, 0x5F, 0x80, 0x9F, 0xFF] {
        let mut frame = ack();
        frame[BTH + 12] = syndrome;
        assert_eq!(parse_err(&frame), WireError::ReservedSyndrome(syndrome));
    }
    let mut frame = ack();
    frame[BTH + 12] = 0x62;
    let repr = PacketRepr::parse_unverified(&frame).unwrap().0;
    assert_eq!(
        repr.ext.aeth.map(|a| a.syndrome),
        Some(Syndrome::Nak(NakCode::RemoteAccessError))
    );
}

#[test]
fn icrc_mismatch_anywhere_after_the_ip_header() {
    let frame = write_only();
    // Every byte the ICRC covers unmasked (IP header except TOS/TTL/checksum, UDP except the
    // checksum, BTH except byte 4, the rest), flipped, breaks it; masked bytes do not.
    let masked = [IP + 1, IP + 8, IP + 10, IP + 11, UDP + 6, UDP + 7, BTH + 4];
    for i in IP..frame.len() - 4 {
        let mut f = frame.clone();
        f[i] ^= 0x01;
        let packet = match RocePacket::new_checked(&f[..]) {
            Ok(p) => p,
            Err(_) => continue, // the flip broke the structure instead
        };
        let r = packet.verify_icrc();
        if masked.contains(&i) {
            assert_eq!(r, Ok(()), "byte {i} is masked");
        } else {
            assert!(
                matches!(r, Err(WireError::IcrcMismatch { .. })),
                "byte {i}: {r:?}"
            );
        }
    }
}

/// The extension headers `opcode` needs, with values taken from `seed`.
fn ext_for(opcode: Opcode, seed: u64) -> rnic_emulator::wire::ExtHeaders {
    let mut ext = rnic_emulator::wire::ExtHeaders::NONE;
    let s32 = seed as u32;
    if opcode.has_deth() {
        ext.deth = Some(DethRepr {
            qkey: s32,
            src_qp: s32 & 0xFF_FFFF,
        });
    }
    if opcode.has_reth() {
        ext.reth = Some(RethRepr {
            virtual_addr: seed,
            rkey: s32.rotate_left(7),
            dma_len: s32 >> 3,
        });
    }
    if opcode.has_atomic_eth() {
        ext.atomic_eth = Some(AtomicEthRepr {
            virtual_addr: seed & !7,
            rkey: s32,
            swap_add: seed.rotate_left(13),
            compare: !seed,
        });
    }
    if opcode.has_aeth() {
        let syndrome = Syndrome::from_u8((s32 as u8) & 0x7F).unwrap_or(Syndrome::ACK_NO_CREDITS);
        ext.aeth = Some(AethRepr {
            syndrome,
            msn: s32 & 0xFF_FFFF,
        });
    }
    if opcode.has_atomic_ack_eth() {
        ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: !seed });
    }
    if opcode.has_imm() {
        ext.imm = Some(ImmDtRepr { imm: s32 ^ 0x5A5A });
    }
    if opcode.has_ieth() {
        ext.ieth = Some(IethRepr { rkey: !s32 });
    }
    if opcode.is_cnp() {
        ext.cnp = Some(CnpRepr);
    }
    ext
}

prop_compose! {
    fn any_repr()(
        op in 0..Opcode::ALL.len(),
        seed in any::<u64>(),
        v6 in any::<bool>(),
        vlan in proptest::option::of((0u8..8, any::<bool>(), 0u16..4096)),
        macs in any::<([u8; 6], [u8; 6])>(),
        addrs in any::<(u128, u128)>(),
        ident in any::<u16>(),
        tclass in any::<u8>(),
        flow in 0u32..(1 << 20),
        ttl in any::<u8>(),
        df in any::<bool>(),
        ports in any::<(u16, u16)>(),
        flags in any::<(bool, bool, bool, bool, bool)>(),
        pkey in any::<u16>(),
        qp in 0u32..(1 << 24),
        psn in 0u32..(1 << 24),
    ) -> PacketRepr {
        let opcode = Opcode::ALL[op];
        let ip = if v6 {
            IpRepr::V6(Ipv6Repr {
                src: Ipv6Addr::from(addrs.0),
                dst: Ipv6Addr::from(addrs.1),
                traffic_class: tclass,
                flow_label: flow,
                hop_limit: ttl,
            })
        } else {
            IpRepr::V4(Ipv4Repr {
                src: Ipv4Addr::from(addrs.0 as u32),
                dst: Ipv4Addr::from(addrs.1 as u32),
                ident,
                dscp: tclass >> 2,
                ecn: tclass & 3,
                dont_frag: df,
                ttl,
            })
        };
        let mut eth = EthRepr::new(EthernetAddress(macs.0), EthernetAddress(macs.1));
        eth.vlan = vlan.map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid });
        let mut udp = UdpRepr::new(ports.0);
        udp.checksum = ports.1;
        let mut bth = BthRepr::new(opcode, qp, psn);
        bth.solicited = flags.0;
        bth.mig_req = flags.1;
        bth.fecn = flags.2;
        bth.becn = flags.3;
        bth.ack_req = flags.4;
        bth.pkey = pkey;
        let mut repr = PacketRepr::new(eth, ip, udp, bth);
        repr.ext = ext_for(opcode, seed);
        repr
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes never panic the parser.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1600)) {
        let _ = PacketRepr::parse(&bytes);
        let _ = PacketRepr::parse_unverified(&bytes);
        if let Ok(p) = RocePacket::new_checked(&bytes[..]) {
            let _ = p.verify_icrc();
        }
    }

    /// Arbitrary bytes behind a plausible Ethernet / IPv4 / UDP 4791 prefix reach the deeper
    /// checks and still never panic.
    #[test]
    fn arbitrary_ib_headers_never_panic(
        ib in proptest::collection::vec(any::<u8>(), 0..200),
        claimed in any::<u16>(),
    ) {
        let mut frame = write_only();
        frame.truncate(BTH);
        frame.extend_from_slice(&ib);
        let udp_len = 8 + ib.len();
        frame[IP + 2..IP + 4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        frame[UDP + 4..UDP + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        fix_ip_checksum(&mut frame);
        let _ = PacketRepr::parse(&frame);
        if let Ok((repr, payload)) = PacketRepr::parse_unverified(&frame) {
            prop_assert_eq!(payload.len() + repr.header_len() + 4 + usize::from(repr.bth.pad_count), frame.len());
        }
        // And with a UDP length that disagrees.
        frame[UDP + 4..UDP + 6].copy_from_slice(&claimed.to_be_bytes());
        let _ = PacketRepr::parse(&frame);
    }

    /// Real frames with random bytes overwritten or cut never panic the parser.
    #[test]
    fn mutated_real_frames_never_panic(
        which in 0usize..20,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut frame = read_frames("rdma_read_multi.pcap").swap_remove(which);
        for (at, byte) in edits {
            let i = at % frame.len();
            frame[i] = byte;
        }
        let _ = PacketRepr::parse(&frame);
        let n = cut % (frame.len() + 1);
        let _ = PacketRepr::parse(&frame[..n]);
    }

    /// Every opcode, IPv4 / IPv6, tagged or not: emit then parse gives back the same headers
    /// and payload, and the ICRC verifies.
    #[test]
    fn emit_parse_round_trip(repr in any_repr(), payload in proptest::collection::vec(any::<u8>(), 0..300)) {
        let payload: &[u8] = if repr.bth.opcode.has_payload() { &payload } else { &[] };
        let mut buf = vec![0u8; repr.buffer_len(payload.len())];
        let n = repr.emit(&mut buf, payload).unwrap();
        prop_assert_eq!(n, buf.len());
        prop_assert!(n >= 60);
        let (back, data) = PacketRepr::parse(&buf).unwrap();
        let mut expected = repr;
        expected.bth.pad_count = PacketRepr::pad_count(payload.len());
        prop_assert_eq!(back, expected);
        prop_assert_eq!(data, payload);
        prop_assert_eq!((payload.len() + usize::from(back.bth.pad_count)) % 4, 0);
    }
}
