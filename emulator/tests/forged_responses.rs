//! Packets for a connected QP from anyone but its peer, or to any address but the QP's own,
//! are refused in both directions, as rxe's `check_addr` refuses them: a forged ACK, NAK,
//! READ response or atomic ACK (correct ICRC, PSN and QPN, sent by an attacker on another
//! address over a real UDP socket) is dropped and counted in `peer_mismatch` and completes,
//! fails and writes nothing; the peer's own answers then complete the WQEs. In-process: a
//! request or response from the peer to another of the device's own addresses is refused too.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use rig::{Access, Cq, Qp, Rig, SIGNALED, atomic, data, gid_of, op, raddr, segs};
use rnic_emulator::link::{InProcLink, Link, LinkError, UdpLink};
use rnic_emulator::wire::{
    AethRepr, AtomicAckEthRepr, BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, NakCode,
    Opcode, PacketRepr, RethRepr, Syndrome, UdpRepr,
};
use rnic_hw_regs::cmd::{self, SetRoceAddressIn};
use rnic_hw_regs::cqe::{Cqe64, CqeOpcode};
use rnic_hw_regs::ctx::{QpSt, QpState, ROCE_VERSION_2};

/// The device under attack (the requester).
const ME: [u8; 4] = [127, 0, 0, 61];
/// Its connected peer: a socket the test answers from.
const PEER: [u8; 4] = [127, 0, 0, 62];
/// The attacker: another local address.
const ATTACKER: [u8; 4] = [127, 0, 0, 63];
/// The peer's QPN (the test plays the peer).
const PEER_QPN: u32 = 0x123;
/// The requester's first PSN.
const PSN: u32 = 0x100;

/// An RC packet from `src` to `dst` for QP `qpn`, with an ACK AETH. Its ICRC covers an IPv4
/// header with ID 0 and DF (what a UDP link rebuilds on receive) and UDP source port 4791
/// (the test's sockets'), so it verifies after a trip through the kernel.
fn rc_packet(src: [u8; 4], dst: [u8; 4], opcode: Opcode, qpn: u32, psn: u32) -> PacketRepr {
    let mut repr = PacketRepr::new(
        EthRepr::new(EthernetAddress([0; 6]), EthernetAddress([0; 6])),
        IpRepr::V4(Ipv4Repr::new(src.into(), dst.into())),
        UdpRepr::new(4791),
        BthRepr::new(opcode, qpn, psn),
    );
    repr.ext.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credit_code: 31 },
        msn: 1,
    });
    repr
}

/// Emits `repr` with `payload` and returns what follows the UDP header.
fn datagram(repr: &PacketRepr, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit(&mut b, payload).expect("emit");
    let ip_len = usize::from(u16::from_be_bytes([b[16], b[17]]));
    assert!(14 + ip_len <= n);
    b[14 + 20 + 8..14 + ip_len].to_vec()
}

/// QUERY_QP's state.
fn state(r: &mut Rig, qpn: u32) -> QpState {
    let mut q = cmd::QueryQpIn::new_cmd();
    q.set_qpn(qpn);
    let qpc = *r.h.ok(&q, &[]).view::<cmd::QueryQpOut>().qpc();
    QpState::try_from(qpc.state()).expect("a QP state")
}

/// Steps the device until `done` holds (10 s at most).
fn step_until(r: &mut Rig, what: &str, mut done: impl FnMut(&mut Rig) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        r.h.dev.step();
        if done(r) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {:?}", r.counters());
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// The next request the device sent to the peer: (BTH opcode, PSN).
fn request(peer: &UdpSocket) -> (u8, u32) {
    let mut b = [0u8; 2048];
    let (n, from) = peer.recv_from(&mut b).expect("a request from the device");
    assert_eq!(from.ip(), Ipv4Addr::from(ME));
    assert!(n >= 12);
    // BTH: opcode at 0, PSN in bytes 9..12.
    (b[0], u32::from_be_bytes([0, b[9], b[10], b[11]]))
}

/// Frames the device has taken in (handed to the transport or dropped).
fn frames_in(r: &Rig) -> u64 {
    let c = r.counters();
    c.frames_rx + c.rx_dropped
}

/// Sends `bytes` from `sock` to the device, steps it until it has taken the frame in, and
/// checks that it was dropped as a forgery (the `mismatches`th) and completed nothing.
fn forge(r: &mut Rig, cq: &mut rig::Cq, sock: &UdpSocket, bytes: &[u8], mismatches: u64) {
    let before = frames_in(r);
    sock.send_to(bytes, SocketAddrV4::new(ME.into(), 4791))
        .expect("send");
    step_until(r, "the forgery arrives", |r| frames_in(r) > before);
    assert!(r.poll(cq).is_none(), "a forged response completed a WQE");
    let d = r.counters().drops;
    assert_eq!(
        d.peer_mismatch, mismatches,
        "not refused as a forgery: {d:?}"
    );
}

/// Sends the peer's genuine `bytes` and returns the CQE it produces.
fn answer(r: &mut Rig, cq: &mut rig::Cq, peer: &UdpSocket, bytes: &[u8]) -> Cqe64 {
    peer.send_to(bytes, SocketAddrV4::new(ME.into(), 4791))
        .expect("send");
    let mut cqe = None;
    step_until(r, "the peer's answer completes", |r| {
        cqe = r.poll(cq);
        cqe.is_some()
    });
    cqe.expect("a CQE")
}

#[test]
fn forged_responses_from_another_address_are_dropped() {
    let link = match UdpLink::bind(Ipv4Addr::from(ME)) {
        Ok(l) => l,
        Err(e @ LinkError::AddrInUse(_)) => {
            println!("skipped: {e}");
            return;
        }
        Err(e) => panic!("bind: {e}"),
    };
    let peer = UdpSocket::bind(SocketAddrV4::new(PEER.into(), 4791)).expect("peer socket");
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let attacker = UdpSocket::bind(SocketAddrV4::new(ATTACKER.into(), 4791)).expect("attacker");

    let mut r = Rig::with_addr(ME, [2, 0, 0, 0, 0x3D, 1]);
    r.h.dev.set_link(Box::new(link));
    let (mut cq, mut qp) = rc_qp_to(&mut r, PEER, [2, 0, 0, 0, 0x3D, 2]);
    let qpn = qp.qpn;
    let src = r.mr(4096, Access::ALL);
    r.fill(&src, 0, &[0x77; 64]);
    let rd = r.mr(4096, Access::ALL);
    r.fill(&rd, 0, &[0xEE; 64]);
    let at = r.mr(4096, Access::ALL);
    r.fill(&at, 0, &[0x5A; 8]);
    let remote = |va: u64| raddr(va, 0x4242);

    // 1. WRITE: a forged ACK does not complete it; the peer's does.
    let w = r.post(
        &mut qp,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[remote(0x1000), data(src.addr, 64, src.key)]),
    );
    assert_eq!(request(&peer), (Opcode::RcRdmaWriteOnly as u8, PSN));
    let ack = |from| datagram(&rc_packet(from, ME, Opcode::RcAcknowledge, qpn, PSN), &[]);
    forge(&mut r, &mut cq, &attacker, &ack(ATTACKER), 1);
    let c = answer(&mut r, &mut cq, &peer, &ack(PEER));
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));

    // 2. READ: a forged response writes nothing; the peer's data lands.
    let w = r.post(
        &mut qp,
        op::READ,
        SIGNALED,
        0,
        &segs(&[remote(0x2000), data(rd.addr, 64, rd.key)]),
    );
    assert_eq!(request(&peer), (Opcode::RcRdmaReadRequest as u8, PSN + 1));
    let read_resp = |from| rc_packet(from, ME, Opcode::RcRdmaReadResponseOnly, qpn, PSN + 1);
    forge(
        &mut r,
        &mut cq,
        &attacker,
        &datagram(&read_resp(ATTACKER), &[0x66; 64]),
        2,
    );
    assert_eq!(r.read(&rd, 0, 64), [0xEE; 64], "forged READ data landed");
    let genuine: Vec<u8> = (0..64u8).collect();
    let c = answer(
        &mut r,
        &mut cq,
        &peer,
        &datagram(&read_resp(PEER), &genuine),
    );
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
    assert_eq!(r.read(&rd, 0, 64), genuine);

    // 3. FETCH_ADD: a forged atomic ACK's value is not written; the peer's is.
    let w = r.post(
        &mut qp,
        op::FA,
        SIGNALED,
        0,
        &segs(&[remote(0x3000), atomic(1, 0), data(at.addr, 8, at.key)]),
    );
    assert_eq!(request(&peer), (Opcode::RcFetchAdd as u8, PSN + 2));
    let atomic_ack = |from, orig: u64| {
        let mut repr = rc_packet(from, ME, Opcode::RcAtomicAcknowledge, qpn, PSN + 2);
        repr.ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: orig });
        datagram(&repr, &[])
    };
    forge(
        &mut r,
        &mut cq,
        &attacker,
        &atomic_ack(ATTACKER, 0xDEAD_BEEF),
        3,
    );
    assert_eq!(r.read(&at, 0, 8), [0x5A; 8], "forged atomic value landed");
    let c = answer(&mut r, &mut cq, &peer, &atomic_ack(PEER, 42));
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
    assert_eq!(r.read(&at, 0, 8), 42u64.to_be_bytes());

    // 4. WRITE: a forged NAK neither fails it nor moves the QP to ERR.
    let w = r.post(
        &mut qp,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[remote(0x1000), data(src.addr, 64, src.key)]),
    );
    assert_eq!(request(&peer), (Opcode::RcRdmaWriteOnly as u8, PSN + 3));
    let mut nak = rc_packet(ATTACKER, ME, Opcode::RcAcknowledge, qpn, PSN + 3);
    nak.ext.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
        msn: 3,
    });
    forge(&mut r, &mut cq, &attacker, &datagram(&nak, &[]), 4);
    assert_eq!(state(&mut r, qpn), QpState::Rts);
    let ack = datagram(
        &rc_packet(PEER, ME, Opcode::RcAcknowledge, qpn, PSN + 3),
        &[],
    );
    let c = answer(&mut r, &mut cq, &peer, &ack);
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
    assert_eq!(state(&mut r, qpn), QpState::Rts);

    // Every drop was a forgery, and nothing else was refused.
    let d = r.counters().drops;
    assert_eq!((d.peer_mismatch, d.total()), (4, 4), "{d:?}");
}

/// An RC QP of `r` (its own CQ for both queues) in RTS, connected to QP `PEER_QPN` at
/// `peer_ip` / `peer_mac`, sending from `PSN`.
fn rc_qp_to(r: &mut Rig, peer_ip: [u8; 4], peer_mac: [u8; 6]) -> (Cq, Qp) {
    let cq = r.cq(6);
    let qp = r.qp(QpSt::Rc, &cq, &cq, 6, 6);
    r.init_qp(&qp, true, true, true);
    r.rtr_rts_to(&qp, PEER_QPN, 3, PSN, 0, gid_of(peer_ip), peer_mac);
    (cq, qp)
}

/// `repr` with `payload` as a whole frame from `src` to `dst`.
fn frame(src: [u8; 4], dst: [u8; 4], repr: &mut PacketRepr, payload: &[u8]) -> Vec<u8> {
    repr.ip = IpRepr::V4(Ipv4Repr::new(src.into(), dst.into()));
    let mut b = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit(&mut b, payload).expect("emit");
    b.truncate(n);
    b
}

/// The destination half of the check: a device with two addresses (GID 0 `10.0.0.2`, GID 1
/// `10.0.0.3`) whose QP uses GID 0 refuses the peer's requests and responses sent to GID 1,
/// and takes them at GID 0.
#[test]
fn packets_to_another_own_address_are_dropped() {
    const A0: [u8; 4] = [10, 0, 0, 2];
    const A1: [u8; 4] = [10, 0, 0, 3];
    const PEER_IP: [u8; 4] = [10, 0, 0, 1];
    let mut r = Rig::with_addr(A0, [2, 0, 0, 0, 0, 2]);
    let mut s = SetRoceAddressIn::new_cmd();
    s.set_roce_address_index(1);
    s.set_vhca_port_num(1);
    let a = s.roce_address_mut();
    a.set_source_l3_address(gid_of(A1));
    a.set_source_mac([2, 0, 0, 0, 0, 2]);
    a.set_roce_version(ROCE_VERSION_2);
    r.h.ok(&s, &[]);
    let (mut wire, end) = InProcLink::pair();
    r.h.dev.set_link(Box::new(end));
    let (mut cq, mut qp) = rc_qp_to(&mut r, PEER_IP, [2, 0, 0, 0, 0, 1]);
    let qpn = qp.qpn;
    let mr = r.mr(4096, Access::ALL);

    // A request: WRITE of 16 bytes into the QP's memory, to GID 1 (refused), then GID 0.
    let mut write = rc_packet(PEER_IP, A0, Opcode::RcRdmaWriteOnly, qpn, PSN);
    write.ext.aeth = None;
    write.ext.reth = Some(RethRepr {
        virtual_addr: mr.addr,
        rkey: mr.key,
        dma_len: 16,
    });
    write.bth.ack_req = true;
    wire.transmit(&frame(PEER_IP, A1, &mut write, &[0xAB; 16]));
    r.h.dev.step();
    assert_eq!(r.counters().drops.peer_mismatch, 1);
    assert_eq!(
        r.read(&mr, 0, 16),
        [0; 16],
        "a request to another address executed"
    );
    wire.transmit(&frame(PEER_IP, A0, &mut write, &[0xAB; 16]));
    r.h.dev.step();
    assert_eq!(r.read(&mr, 0, 16), [0xAB; 16]);
    let mut out = Vec::new();
    assert!(wire.receive(&mut out), "the write is acknowledged");

    // A response: the ACK of a WRITE the QP sent, to GID 1 (refused), then GID 0.
    let w = r.post(
        &mut qp,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[raddr(0x1000, 0x4242), data(mr.addr, 16, mr.key)]),
    );
    assert!(wire.receive(&mut out), "the WRITE went out");
    let mut ack = rc_packet(PEER_IP, A0, Opcode::RcAcknowledge, qpn, PSN);
    wire.transmit(&frame(PEER_IP, A1, &mut ack, &[]));
    r.h.dev.step();
    assert_eq!(r.counters().drops.peer_mismatch, 2);
    assert!(
        r.poll(&mut cq).is_none(),
        "an ACK to another address completed"
    );
    wire.transmit(&frame(PEER_IP, A0, &mut ack, &[]));
    r.h.dev.step();
    let c = r.one(&mut cq);
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
    let d = r.counters().drops;
    assert_eq!((d.peer_mismatch, d.total()), (2, 2), "{d:?}");
}
