//! Every frame of the rxe captures in `tests/data/pcaps/` parses, its ICRC verifies, and
//! emitting its `Repr` with the same payload reproduces it byte for byte. The concrete values
//! asserted below were read off the captures with an independent decoder (a few lines of
//! Python over the raw bytes), not with this crate.

mod common;

use core::net::{IpAddr, Ipv4Addr};

use rnic_emulator::wire::{
    AtomicAckEthRepr, AtomicEthRepr, DethRepr, EthernetAddress, IpRepr, Opcode, PacketRepr,
    RethRepr, RocePacket, Syndrome, WireError, rdma_get_udp_sport, rxe_legacy_udp_sport,
};

use common::read_frames;

/// One decoded frame.
struct Decoded {
    repr: PacketRepr,
    payload: Vec<u8>,
    frame_len: usize,
}

/// Totals for one capture.
#[derive(Debug, Default, PartialEq, Eq)]
struct Totals {
    frames: usize,
    parsed: usize,
    icrc_ok: usize,
    re_emitted: usize,
    skipped: usize,
}

/// Is this a frame that is not RoCE v2 at all (ARP, other IP traffic)?
fn not_roce(err: &WireError) -> bool {
    matches!(
        err,
        WireError::NotIp { .. } | WireError::NotUdp { .. } | WireError::NotRoce { .. }
    )
}

/// Parses, verifies and re-emits every RoCE frame of `name`; `icrc_bad` lists the frame
/// indices expected to fail the ICRC check (with [`WireError::IcrcMismatch`]).
fn check_capture(name: &str, icrc_bad: &[usize]) -> (Vec<Decoded>, Totals) {
    let frames = read_frames(name);
    let mut totals = Totals {
        frames: frames.len(),
        ..Totals::default()
    };
    let mut decoded = Vec::with_capacity(frames.len());
    let mut buf = vec![0u8; 2048];
    for (i, frame) in frames.iter().enumerate() {
        let packet = match RocePacket::new_checked(&frame[..]) {
            Ok(p) => p,
            Err(e) if not_roce(&e) => {
                totals.skipped += 1;
                continue;
            }
            Err(e) => panic!("{name} frame {i}: {e}"),
        };
        let (repr, payload) = match PacketRepr::parse(frame) {
            Ok(ok) => {
                assert!(!icrc_bad.contains(&i), "{name} frame {i}: ICRC should fail");
                totals.icrc_ok += 1;
                ok
            }
            Err(WireError::IcrcMismatch { expected, actual }) if icrc_bad.contains(&i) => {
                assert_eq!(expected, packet.compute_icrc());
                assert_eq!(actual, packet.icrc());
                assert_ne!(expected, actual);
                PacketRepr::parse_unverified(frame).expect("structure is fine")
            }
            Err(e) => panic!("{name} frame {i}: {e}"),
        };
        totals.parsed += 1;
        assert_eq!(payload, packet.payload(), "{name} frame {i}");
        let n = repr
            .emit(&mut buf, payload)
            .unwrap_or_else(|e| panic!("{name} frame {i}: emit: {e}"));
        // Emit writes every byte of the frame, whatever the buffer held: the device emits
        // into pooled buffers it does not zero.
        let mut stale = vec![0xA5u8; 2048];
        assert_eq!(repr.emit(&mut stale, payload).ok(), Some(n));
        assert_eq!(
            &stale[..n],
            &buf[..n],
            "{name} frame {i}: emit left stale bytes"
        );
        if icrc_bad.contains(&i) {
            // Same bytes except the ICRC, which emit computes correctly.
            assert_eq!(&buf[..n - 4], &frame[..n - 4], "{name} frame {i}");
            assert_ne!(&buf[n - 4..n], &frame[n - 4..], "{name} frame {i}");
        } else {
            assert_eq!(
                &buf[..n],
                &frame[..],
                "{name} frame {i}: re-emitted frame differs"
            );
            totals.re_emitted += 1;
        }
        decoded.push(Decoded {
            repr,
            payload: payload.to_vec(),
            frame_len: frame.len(),
        });
    }
    println!(
        "{name}: {} frames, {} parsed, {} ICRC verified, {} re-emitted byte for byte, {} non-RoCE skipped",
        totals.frames, totals.parsed, totals.icrc_ok, totals.re_emitted, totals.skipped
    );
    (decoded, totals)
}

/// Checks the whole capture and that every frame passed.
fn check_clean(name: &str) -> Vec<Decoded> {
    let (decoded, t) = check_capture(name, &[]);
    assert_eq!(t.parsed, t.frames - t.skipped);
    assert_eq!(t.icrc_ok, t.parsed);
    assert_eq!(t.re_emitted, t.parsed);
    decoded
}

fn opcodes(d: &[Decoded]) -> Vec<Opcode> {
    d.iter().map(|d| d.repr.bth.opcode).collect()
}

fn ip(a: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 11, 0, a))
}

const MAC2: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x11, 0x00, 0x02]);
const MAC3: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x11, 0x00, 0x03]);

/// What every rxe frame has: P_Key 0xFFFF, M 0, TVer 0, no FECN/BECN, UDP checksum 0, DF set,
/// TTL 64, TOS 0, destination port 4791.
fn assert_rxe_defaults(d: &Decoded) {
    let r = &d.repr;
    assert_eq!(r.bth.pkey, 0xFFFF);
    assert!(!r.bth.mig_req && !r.bth.fecn && !r.bth.becn);
    assert_eq!(r.udp.dst_port, 4791);
    assert_eq!(r.udp.checksum, 0);
    let IpRepr::V4(v4) = r.ip else {
        panic!("IPv4 expected")
    };
    assert!(v4.dont_frag);
    assert_eq!((v4.ttl, v4.dscp, v4.ecn), (64, 0, 0));
    assert_ne!(v4.ident, 0, "rxe uses the kernel's IP ID generator");
}

/// The AETH of an rxe ACK: syndrome 0x1F and the given MSN.
fn assert_ack(d: &Decoded, msn: u32) {
    let aeth = d.repr.ext.aeth.expect("AETH");
    assert_eq!(aeth.syndrome, Syndrome::ACK_NO_CREDITS);
    assert_eq!(aeth.syndrome.as_u8(), 0x1F);
    assert_eq!(aeth.msn, msn);
}

#[test]
fn rc_send_only() {
    let d = check_clean("rc_send_only.pcap");
    assert_eq!(d.len(), 8);
    use Opcode::*;
    assert_eq!(
        opcodes(&d),
        [
            RcSendOnly,
            RcAcknowledge,
            RcSendOnly,
            RcAcknowledge,
            RcSendOnly,
            RcAcknowledge,
            RcSendOnly,
            RcAcknowledge
        ]
    );
    let psns: Vec<u32> = d.iter().map(|d| d.repr.bth.psn).collect();
    assert_eq!(
        psns,
        [
            0xEF75AA, 0xEF75AA, 0xA02EFF, 0xA02EFF, 0xEF75AB, 0xEF75AB, 0xA02F00, 0xA02F00
        ]
    );
    for (i, f) in d.iter().enumerate() {
        assert_rxe_defaults(f);
        assert_eq!(f.repr.bth.dest_qp, 0x18);
        // Both sides have QPN 0x18: rdma_get_udp_sport(0, 0x18, 0x18).
        assert_eq!(f.repr.udp.src_port, 0xC240);
        assert_eq!(f.repr.udp.src_port, rdma_get_udp_sport(0, 0x18, 0x18));
        if i % 2 == 0 {
            assert_eq!(f.frame_len, 122);
            assert_eq!(f.payload, [0x7B; 64]);
            assert!(f.repr.bth.ack_req);
            assert_eq!(f.repr.bth.pad_count, 0);
        } else {
            assert_eq!(f.frame_len, 62);
            assert!(f.payload.is_empty());
            assert!(!f.repr.bth.ack_req);
            assert_ack(f, [1, 1, 2, 2][i / 2]);
            // The ACK goes back the other way.
            assert_eq!(f.repr.ip.src(), d[i - 1].repr.ip.dst());
            assert_eq!(f.repr.eth.dst, d[i - 1].repr.eth.src);
        }
    }
    assert_eq!((d[0].repr.ip.src(), d[0].repr.ip.dst()), (ip(3), ip(2)));
    assert_eq!((d[0].repr.eth.src, d[0].repr.eth.dst), (MAC3, MAC2));
}

#[test]
fn rc_send_multi() {
    let d = check_clean("rc_send_multi.pcap");
    use Opcode::*;
    assert_eq!(
        opcodes(&d),
        [
            RcSendFirst,
            RcSendMiddle,
            RcSendLast,
            RcAcknowledge,
            RcSendFirst,
            RcSendMiddle,
            RcSendLast,
            RcAcknowledge
        ]
    );
    for msg in [&d[0..4], &d[4..8]] {
        let lens: Vec<usize> = msg.iter().map(|f| f.payload.len()).collect();
        assert_eq!(lens, [1024, 1024, 952, 0]);
        let frame_lens: Vec<usize> = msg.iter().map(|f| f.frame_len).collect();
        assert_eq!(frame_lens, [1082, 1082, 1010, 62]);
        let psn = msg[0].repr.bth.psn;
        assert_eq!(msg[1].repr.bth.psn, psn + 1);
        assert_eq!(msg[2].repr.bth.psn, psn + 2);
        assert_eq!(msg[3].repr.bth.psn, psn + 2, "the ACK carries the last PSN");
        // AckReq only on the last packet of the message.
        assert_eq!(
            msg[..3]
                .iter()
                .map(|f| f.repr.bth.ack_req)
                .collect::<Vec<_>>(),
            [false, false, true]
        );
        assert_ack(&msg[3], 1);
    }
    assert_eq!(d[0].repr.bth.psn, 0x8E5AFD);
    assert_eq!(d[4].repr.bth.psn, 0xF81BB5);
    for f in &d {
        assert_rxe_defaults(f);
        assert_eq!(f.repr.bth.dest_qp, 0x19);
        assert_eq!(f.repr.udp.src_port, rdma_get_udp_sport(0, 0x19, 0x19));
    }
}

#[test]
fn rdma_write_only() {
    let d = check_clean("rdma_write_only.pcap");
    assert_eq!(d.len(), 20);
    for (i, f) in d.iter().enumerate() {
        assert_rxe_defaults(f);
        assert_eq!(f.repr.bth.dest_qp, 0x1B);
        assert_eq!(f.repr.udp.src_port, 0xC2D9);
        if i % 2 == 0 {
            assert_eq!(f.repr.bth.opcode, Opcode::RcRdmaWriteOnly);
            assert_eq!(f.frame_len, 138);
            assert_eq!(f.payload.len(), 64);
            let want = if i % 4 == 0 {
                RethRepr {
                    virtual_addr: 0x0000_5587_5572_0000,
                    rkey: 0x0CB8,
                    dma_len: 64,
                }
            } else {
                RethRepr {
                    virtual_addr: 0x0000_5636_590A_D000,
                    rkey: 0x0CC0,
                    dma_len: 64,
                }
            };
            assert_eq!(f.repr.ext.reth, Some(want));
        } else {
            assert_eq!(f.repr.bth.opcode, Opcode::RcAcknowledge);
            assert_eq!(f.repr.bth.psn, d[i - 1].repr.bth.psn);
            assert_ack(f, i as u32 / 4 + 1);
        }
    }
    assert_eq!(d[0].repr.bth.psn, 0xB4E3CE);
    assert_eq!(d[2].repr.bth.psn, 0x4E74AE);
}

#[test]
fn rdma_write_multi() {
    let d = check_clean("rdma_write_multi.pcap");
    assert_eq!(d.len(), 20);
    use Opcode::*;
    let first = RethRepr {
        virtual_addr: 0x0000_5584_ACDC_B000,
        rkey: 0x0D92,
        dma_len: 3000,
    };
    // Messages start at frames 0, 4, 8, 12, 15 (the last two ACKs are coalesced at the end).
    let mut expected_psn = 0x5C8F79;
    for start in [0usize, 4, 8, 12, 15] {
        let msg = &d[start..start + 3];
        assert_eq!(
            opcodes(msg),
            [RcRdmaWriteFirst, RcRdmaWriteMiddle, RcRdmaWriteLast]
        );
        assert_eq!(msg[0].repr.ext.reth, Some(first));
        assert_eq!(msg[1].repr.ext.reth, None);
        assert_eq!(msg[2].repr.ext.reth, None);
        let lens: Vec<usize> = msg.iter().map(|f| f.payload.len()).collect();
        assert_eq!(lens, [1024, 1024, 952]);
        assert_eq!(lens.iter().sum::<usize>(), 3000);
        let frame_lens: Vec<usize> = msg.iter().map(|f| f.frame_len).collect();
        assert_eq!(frame_lens, [1098, 1082, 1010]);
        for f in msg {
            assert_eq!(f.repr.bth.psn, expected_psn, "PSNs are consecutive");
            expected_psn += 1;
        }
        assert!(msg[2].repr.bth.ack_req && !msg[0].repr.bth.ack_req);
    }
    let acks: Vec<(u32, u32)> = d
        .iter()
        .filter(|f| f.repr.bth.opcode == RcAcknowledge)
        .map(|f| (f.repr.bth.psn, f.repr.ext.aeth.map_or(0, |a| a.msn)))
        .collect();
    assert_eq!(
        acks,
        [
            (0x5C8F7B, 1),
            (0x5C8F7E, 2),
            (0x5C8F81, 3),
            (0x5C8F84, 4),
            (0x5C8F87, 5)
        ]
    );
    for f in &d {
        assert_rxe_defaults(f);
        assert_eq!(f.repr.bth.dest_qp, 0x1C);
    }
}

#[test]
fn rdma_read_only() {
    let d = check_clean("rdma_read_only.pcap");
    assert_eq!(d.len(), 10);
    for (k, pair) in d.chunks(2).enumerate() {
        let (req, resp) = (&pair[0], &pair[1]);
        assert_eq!(req.repr.bth.opcode, Opcode::RcRdmaReadRequest);
        assert_eq!(req.frame_len, 74);
        assert!(req.payload.is_empty());
        assert!(req.repr.bth.ack_req);
        assert_eq!(
            req.repr.ext.reth,
            Some(RethRepr {
                virtual_addr: 0x0000_558C_A86B_6000,
                rkey: 0x0EAD,
                dma_len: 64,
            })
        );
        assert_eq!(req.repr.bth.psn, 0x6A5BBD + k as u32);
        assert_eq!(resp.repr.bth.opcode, Opcode::RcRdmaReadResponseOnly);
        assert_eq!(resp.frame_len, 126);
        assert_eq!(resp.payload.len(), 64);
        assert_eq!(&resp.payload[..4], &[0x80, 0xCC, 0xE5, 0xFD]);
        assert_eq!(resp.repr.bth.psn, req.repr.bth.psn);
        assert_ack(resp, k as u32 + 1);
        assert_eq!(resp.repr.ip.src(), req.repr.ip.dst());
        // The responder answers with the QP's own source port.
        assert_eq!(resp.repr.udp.src_port, req.repr.udp.src_port);
    }
    d.iter().for_each(assert_rxe_defaults);
}

#[test]
fn rdma_read_multi() {
    let d = check_clean("rdma_read_multi.pcap");
    assert_eq!(d.len(), 20);
    let reqs: Vec<&Decoded> = d
        .iter()
        .filter(|f| f.repr.bth.opcode == Opcode::RcRdmaReadRequest)
        .collect();
    assert_eq!(reqs.len(), 5);
    for (k, req) in reqs.iter().enumerate() {
        assert_eq!(
            req.repr.ext.reth,
            Some(RethRepr {
                virtual_addr: 0x0000_55AC_E6C1_6000,
                rkey: 0x0FDC,
                dma_len: 3000,
            })
        );
        // A READ of 3000 bytes at PMTU 1024 takes 3 PSNs.
        assert_eq!(req.repr.bth.psn, 0x1CD06D + 3 * k as u32);
    }
    let resps: Vec<&Decoded> = d
        .iter()
        .filter(|f| f.repr.bth.opcode.is_response())
        .collect();
    assert_eq!(resps.len(), 15);
    for (k, msg) in resps.chunks(3).enumerate() {
        use Opcode::*;
        let ops: Vec<Opcode> = msg.iter().map(|f| f.repr.bth.opcode).collect();
        assert_eq!(
            ops,
            [
                RcRdmaReadResponseFirst,
                RcRdmaReadResponseMiddle,
                RcRdmaReadResponseLast
            ]
        );
        let lens: Vec<usize> = msg.iter().map(|f| f.payload.len()).collect();
        assert_eq!(lens, [1024, 1024, 952]);
        let frame_lens: Vec<usize> = msg.iter().map(|f| f.frame_len).collect();
        assert_eq!(frame_lens, [1086, 1082, 1014]);
        assert_ack(msg[0], k as u32 + 1);
        assert_eq!(msg[1].repr.ext.aeth, None, "MIDDLE carries no AETH");
        assert_ack(msg[2], k as u32 + 1);
        for (j, f) in msg.iter().enumerate() {
            assert_eq!(f.repr.bth.psn, 0x1CD06D + 3 * k as u32 + j as u32);
        }
    }
    d.iter().for_each(assert_rxe_defaults);
}

/// The five original values the Atomic ACKs of `name` return.
fn check_atomics(name: &str, op: Opcode, va: u64, rkey: u32, swap_add: u64, orig: [u64; 5]) {
    let d = check_clean(name);
    assert_eq!(d.len(), 10);
    let reqs: Vec<&Decoded> = d.iter().filter(|f| f.repr.bth.opcode == op).collect();
    let acks: Vec<&Decoded> = d
        .iter()
        .filter(|f| f.repr.bth.opcode == Opcode::RcAtomicAcknowledge)
        .collect();
    assert_eq!((reqs.len(), acks.len()), (5, 5));
    let psn0 = reqs[0].repr.bth.psn;
    for (k, (req, ack)) in reqs.iter().zip(&acks).enumerate() {
        assert_eq!(req.frame_len, 86);
        assert!(req.repr.bth.ack_req);
        assert_eq!(
            req.repr.ext.atomic_eth,
            Some(AtomicEthRepr {
                virtual_addr: va + 0x40 * k as u64,
                rkey,
                swap_add,
                compare: 0,
            })
        );
        assert_eq!(req.repr.bth.psn, psn0 + k as u32);
        assert_eq!(ack.frame_len, 70);
        assert_eq!(ack.repr.bth.psn, req.repr.bth.psn);
        assert_ack(ack, k as u32 + 1);
        assert_eq!(
            ack.repr.ext.atomic_ack_eth,
            Some(AtomicAckEthRepr { orig_data: orig[k] })
        );
        assert!(req.payload.is_empty() && ack.payload.is_empty());
    }
    d.iter().for_each(assert_rxe_defaults);
}

#[test]
fn atomic_fadd() {
    check_atomics(
        "atomic_fadd.pcap",
        Opcode::RcFetchAdd,
        0x0000_5589_E37B_C000,
        0x1046,
        1,
        [
            0x9543_51DD_45B2_2C69,
            0x10F2_8DA7_ED07_D6A1,
            0xB0C5_7D5D_16E5_8366,
            0xD112_7ABC_0E6F_3B32,
            0xBBBD_2785_44E0_7E5E,
        ],
    );
}

#[test]
fn atomic_cswap() {
    check_atomics(
        "atomic_cswap.pcap",
        Opcode::RcCompareSwap,
        0x0000_55F4_49CF_8000,
        0x11D5,
        0,
        [
            0xC98A_A2C5_2119_6F5C,
            0x9D80_F066_9276_A815,
            0x19C0_7460_C99A_D1AD,
            0x0B59_7043_95F1_AEF1,
            0x2075_A4E4_9D3B_1CBB,
        ],
    );
}

#[test]
fn ud_send() {
    let d = check_clean("ud_send.pcap");
    assert_eq!(d.len(), 4);
    for f in &d {
        assert_rxe_defaults(f);
        assert_eq!(f.frame_len, 130);
        assert_eq!(f.repr.bth.opcode, Opcode::UdSendOnly);
        assert_eq!(f.repr.bth.dest_qp, 0x1A);
        assert_eq!(
            f.repr.ext.deth,
            Some(DethRepr {
                qkey: 0x1111_1111,
                src_qp: 0x1A
            })
        );
        assert_eq!(f.payload, [0x7B; 64]);
        // A UD QP keeps the source port picked at creation: the older hash formula.
        assert_eq!(f.repr.udp.src_port, 0xFB97);
        assert_eq!(f.repr.udp.src_port, rxe_legacy_udp_sport(0x1A));
    }
    let psns: Vec<u32> = d.iter().map(|f| f.repr.bth.psn).collect();
    assert_eq!(psns, [0xCDC071, 0x3188CE, 0xCDC072, 0x3188CF]);
}

/// RDMA CM's MADs travel as UD SEND_ONLY to QP1 (the GSI) with a DETH (Q_Key 0x80010000,
/// source QP 1): the wire layer parses them as any UD packet, and the 256-byte MAD is the
/// payload. This test checks the MAD header (management class 7 = CM, class version 2,
/// method 3 = Send) and the attribute IDs of the CM exchange.
#[test]
fn rdmacm_send() {
    let d = check_clean("rdmacm_send.pcap");
    assert_eq!(d.len(), 64);
    let mads: Vec<&Decoded> = d.iter().filter(|f| f.repr.bth.dest_qp == 1).collect();
    assert_eq!(mads.len(), 10);
    let mut attrs = Vec::new();
    for m in &mads {
        assert_eq!(m.repr.bth.opcode, Opcode::UdSendOnly);
        assert_eq!(m.frame_len, 322);
        assert_eq!(
            m.repr.ext.deth,
            Some(DethRepr {
                qkey: 0x8001_0000,
                src_qp: 1
            })
        );
        assert_eq!(m.payload.len(), 256);
        assert_eq!(
            &m.payload[..4],
            &[1, 7, 2, 3],
            "base version, CM class, v2, Send"
        );
        attrs.push(u16::from_be_bytes([m.payload[16], m.payload[17]]));
        assert_eq!(m.repr.udp.src_port, rxe_legacy_udp_sport(1));
        assert_rxe_defaults(m);
    }
    // REQ, REP, RTU twice (two connections), then DREQ / DREP for each.
    assert_eq!(
        attrs,
        [0x10, 0x13, 0x14, 0x10, 0x13, 0x14, 0x15, 0x16, 0x15, 0x16]
    );
    // Each connected QP's source port comes from the flow label in its REQ (primary flow
    // label: 20 bits at byte 88 of the CM message, which follows the 24-byte MAD header; the
    // local QPN is at byte 32). Both guests' QPs have the same number.
    let reqs: Vec<&[u8]> = mads
        .iter()
        .filter(|m| m.payload[16..18] == [0, 0x10])
        .map(|m| &m.payload[24..])
        .collect();
    let conns: Vec<(u32, u32)> = reqs
        .iter()
        .map(|req| {
            let qpn = u32::from_be_bytes([0, req[32], req[33], req[34]]);
            let flow_label = u32::from_be_bytes([0, req[88], req[89], req[90]]) >> 4;
            (qpn, flow_label)
        })
        .collect();
    assert_eq!(conns, [(0x21, 0xB27A9), (0x22, conns[1].1)]);
    let mut rc_frames = 0;
    for (qpn, flow_label) in conns {
        for f in d.iter().filter(|f| f.repr.bth.dest_qp == qpn) {
            assert_eq!(
                f.repr.udp.src_port,
                rdma_get_udp_sport(flow_label, qpn, qpn)
            );
            rc_frames += 1;
        }
    }
    assert_eq!(rc_frames, 54);
    assert_eq!(rdma_get_udp_sport(0xB27A9, 0x21, 0x21), 0xE785);
    // A 2-byte SEND has PadCnt 2.
    let padded: Vec<&Decoded> = d.iter().filter(|f| f.repr.bth.pad_count != 0).collect();
    assert!(!padded.is_empty());
    for f in padded {
        assert_eq!(f.repr.bth.pad_count, 2);
        assert_eq!(f.payload.len(), 2);
        assert_eq!(f.frame_len, 62);
    }
}

/// rxe in a guest against a plain UDP socket on the host: the host's frames have IP ID 0, a
/// real UDP checksum and source port 4791; both directions verify and re-emit exactly.
#[test]
fn host_peer_rc_send() {
    let d = check_clean("host_peer_rc_send.pcap");
    assert_eq!(d.len(), 20);
    let (host, guest): (Vec<&Decoded>, Vec<&Decoded>) =
        d.iter().partition(|f| f.repr.ip.src() == ip(1));
    assert_eq!((host.len(), guest.len()), (10, 10));
    for f in &host {
        let IpRepr::V4(v4) = f.repr.ip else {
            panic!("IPv4 expected")
        };
        assert_eq!(v4.ident, 0);
        assert!(v4.dont_frag);
        assert_eq!(f.repr.udp.src_port, 4791);
        assert_ne!(f.repr.udp.checksum, 0);
        assert_eq!(f.repr.bth.dest_qp, 0x23);
    }
    for f in &guest {
        assert_rxe_defaults(f);
        assert_eq!(f.repr.bth.dest_qp, 0xABCD);
        assert_eq!(f.repr.udp.src_port, rdma_get_udp_sport(0, 0x23, 0xABCD));
        assert_eq!(f.repr.udp.src_port, 0xFD1B);
    }
    assert_eq!(
        d.iter()
            .filter(|f| f.repr.bth.opcode == Opcode::RcSendOnly)
            .count(),
        10
    );
}

#[test]
fn rc_pingpong_full() {
    let (d, t) = check_capture("rc_pingpong_full.pcap.gz", &[]);
    assert_eq!(t.frames, 10_300);
    assert_eq!(
        t,
        Totals {
            frames: 10_300,
            parsed: 10_300,
            icrc_ok: 10_300,
            re_emitted: 10_300,
            skipped: 0
        }
    );
    let count = |op| d.iter().filter(|f| f.repr.bth.opcode == op).count();
    assert_eq!(count(Opcode::RcSendFirst), 2040);
    assert_eq!(count(Opcode::RcSendMiddle), 4075);
    assert_eq!(count(Opcode::RcSendLast), 2035);
    assert_eq!(count(Opcode::RcAcknowledge), 2150);
    // 1000 iterations each way of 4096 bytes at PMTU 1024 are 2000 messages of FIRST,
    // MIDDLE, MIDDLE, LAST = 8000 request frames; the other 150 are re-sent requests (same
    // source and PSN as an earlier frame).
    let mut seen = std::collections::HashSet::new();
    let mut resent = 0;
    for f in &d {
        assert_rxe_defaults(f);
        assert_eq!(f.repr.bth.dest_qp, 0x11);
        assert_eq!(f.repr.udp.src_port, rdma_get_udp_sport(0, 0x11, 0x11));
        if f.repr.bth.opcode == Opcode::RcAcknowledge {
            assert_eq!(
                f.repr.ext.aeth.map(|a| a.syndrome),
                Some(Syndrome::ACK_NO_CREDITS)
            );
        } else {
            assert_eq!(f.payload.len(), 1024);
            if !seen.insert((f.repr.ip.src(), f.repr.bth.psn)) {
                resent += 1;
            }
        }
    }
    assert_eq!(seen.len(), 8000);
    assert_eq!(resent, 150);
}

#[test]
fn corrupted_icrc_is_detected() {
    let (d, t) = check_capture("rdma_write_only.corrupted.pcap", &[0]);
    assert_eq!(
        t,
        Totals {
            frames: 20,
            parsed: 20,
            icrc_ok: 19,
            re_emitted: 19,
            skipped: 0
        }
    );
    // The flipped byte is in the payload: the wire ICRC is the one of the original frame.
    let original = read_frames("rdma_write_only.pcap");
    let corrupted = read_frames("rdma_write_only.corrupted.pcap");
    let diff: Vec<usize> = (0..original[0].len())
        .filter(|&i| original[0][i] != corrupted[0][i])
        .collect();
    assert_eq!(diff, [133]);
    let err = PacketRepr::parse(&corrupted[0]).unwrap_err();
    let WireError::IcrcMismatch { expected, actual } = err else {
        panic!("{err}")
    };
    assert_eq!(actual, u32::from_le_bytes([0xB7, 0x1F, 0x6F, 0xE7]));
    assert_eq!(
        RocePacket::new_checked(&original[0][..]).unwrap().icrc(),
        actual
    );
    assert_ne!(expected, actual);
    assert_eq!(d[0].repr.bth.opcode, Opcode::RcRdmaWriteOnly);
}
