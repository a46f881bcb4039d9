//! Replay of `rc_pingpong_full.pcap.gz` (ibv_rc_pingpong between two rxe guests, 1000
//! iterations of 4096 bytes at path MTU 1024, duplicates included): the requests one rxe sent
//! are fed, in capture order, to an emulated responder set up as the other rxe was (IP, MAC,
//! QPN 0x11, the expected PSN, receive WQEs posted); its answers must be the ones rxe gave.
//!
//! Compared per ACK: opcode, PSN, AETH syndrome and MSN, destination QP, IP addresses. Not
//! compared, legitimately different: the IP ID (rxe's kernel counter, ours 0), the UDP source
//! port (rxe derives it with `rdma_get_udp_sport`; the emulated QP uses the address path's
//! `udp_sport`, which the host set), the MACs' roles are the same but the timing is not.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use common::read_frames;
use rig::{Access, Rig};
use rnic_emulator::Profile;
use rnic_emulator::link::{InProcLink, Link};
use rnic_emulator::wire::{IpRepr, Opcode, PacketRepr};
use rnic_hw_regs::cqe::CqeOpcode;
use rnic_hw_regs::ctx::QpSt;

/// (opcode, PSN, syndrome byte, MSN, dest QP, IP src, IP dst)
type AckKey = (Opcode, u32, u8, u32, u32, [u8; 4], [u8; 4]);

fn key(p: &PacketRepr) -> AckKey {
    let IpRepr::V4(ip) = p.ip else { panic!("IPv4") };
    let aeth = p.ext.aeth.expect("AETH");
    (
        p.bth.opcode,
        p.bth.psn,
        aeth.syndrome.as_u8(),
        aeth.msn,
        p.bth.dest_qp,
        ip.src.octets(),
        ip.dst.octets(),
    )
}

#[test]
fn rxe_pingpong_requests_get_rxe_answers() {
    let frames = read_frames("rc_pingpong_full.pcap.gz");
    let parsed: Vec<(PacketRepr, &Vec<u8>)> = frames
        .iter()
        .map(|f| (PacketRepr::parse(f).expect("a RoCE frame").0, f))
        .collect();
    let first = &parsed[0].0;
    let IpRepr::V4(ip0) = first.ip else {
        panic!("IPv4")
    };
    // X: the client (sends first); Y: the responder we play.
    let (x, y) = (ip0.src.octets(), ip0.dst.octets());
    let (x_mac, y_mac) = (first.eth.src.0, first.eth.dst.0);
    let from = |p: &PacketRepr, a: [u8; 4]| matches!(p.ip, IpRepr::V4(v) if v.src.octets() == a);
    let requests: Vec<&Vec<u8>> = parsed
        .iter()
        .filter(|(p, _)| from(p, x) && p.bth.opcode != Opcode::RcAcknowledge)
        .map(|(_, f)| *f)
        .collect();
    let rxe_acks: Vec<AckKey> = parsed
        .iter()
        .filter(|(p, _)| from(p, y) && p.bth.opcode == Opcode::RcAcknowledge)
        .map(|(p, _)| key(p))
        .collect();
    let qpn = first.bth.dest_qp;
    let epsn = first.bth.psn;
    assert_eq!(qpn, 0x11);

    let mut r = Rig::with_profile(
        Profile {
            first_qpn: qpn,
            ..Profile::default()
        },
        y,
        y_mac,
    );
    let (mut wire, end) = InProcLink::pair();
    r.h.dev.set_link(Box::new(end));
    let mut cq = r.cq(11);
    let mut qp = r.qp(QpSt::Rc, &cq, &cq, 6, 10);
    assert_eq!(qp.qpn, qpn, "the capture's QPN");
    r.init_qp(&qp, false, false, false);
    r.rtr_to(&qp, qpn, 3, epsn, rig::gid_of(x), x_mac);
    r.rts(&qp, 0, 7);
    let buf = r.mr(4096, Access::ALL);
    for _ in 0..1000 {
        r.post_recv(&mut qp, &[(buf.addr, 4096, buf.key)]);
    }

    let mut ours = Vec::new();
    let mut out = Vec::new();
    for f in &requests {
        wire.transmit(f);
        while r.h.dev.step() != 0 {}
        while wire.receive(&mut out) {
            let (p, _) = PacketRepr::parse(&out).expect("our frames parse, ICRC included");
            ours.push(key(&p));
        }
    }
    let mut recvs = 0;
    while let Some(c) = r.poll(&mut cq) {
        assert_eq!(
            (c.cqe_opcode(), c.byte_cnt()),
            (Ok(CqeOpcode::RespSend), 4096)
        );
        recvs += 1;
    }
    println!(
        "replayed {} requests from {x:?}: rxe answered {} ACKs, the emulator {}",
        requests.len(),
        rxe_acks.len(),
        ours.len()
    );
    assert_eq!(recvs, 1000, "every SEND delivered once");
    for (i, (a, b)) in ours.iter().zip(&rxe_acks).enumerate() {
        assert_eq!(a, b, "ACK {i}: ours vs rxe's");
    }
    assert_eq!(ours.len(), rxe_acks.len());
    let c = r.counters();
    assert_eq!(c.rx_dropped, 0, "{c:?}");
    assert!(c.transport.duplicates > 0, "rxe's duplicates were answered");
}
