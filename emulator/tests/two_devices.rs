//! Two emulated devices over the in-process link, the host side played by the rig: every
//! opcode at every size that matters, every path MTU, every NAK and error path, and the
//! seeded fault campaign.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use rig::net::{IP_A, Net};
use rig::{Access, SIGNALED, atomic, data, data_for, op, raddr, segs};
use rnic_emulator::link::{FaultConfig, NullLink};
use rnic_hw_regs::cqe::{Cqe64, CqeOpcode, CqeSyndrome};
use rnic_hw_regs::ctx::QpSt;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

#[track_caller]
fn assert_ok(c: &Cqe64, qpn: u32, wqe: u16, opcode: u8) {
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::Req), "requester CQE {c:?}");
    assert_eq!(
        (c.qpn(), c.wqe_counter(), c.send_opcode()),
        (qpn, wqe, opcode)
    );
}

#[track_caller]
fn assert_err(c: &Cqe64, qpn: u32, wqe: u16, s: CqeSyndrome) {
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::ReqErr), "error CQE {c:?}");
    assert_eq!((c.qpn(), c.wqe_counter()), (qpn, wqe));
    assert_eq!(c.error_syndrome(), Ok(s));
}

const MTU_CODE: u8 = 3;
const MTU: usize = 1024;
const SIZES: [usize; 7] = [0, 1, MTU - 1, MTU, MTU + 1, 3 * MTU + 17, 1 << 20];

#[test]
fn every_opcode_at_every_size() {
    let mut n = Net::new();
    let (mut qa, mut qb, mut ca, mut cb) = n.pair(QpSt::Rc, MTU_CODE, 8, 8, 0);
    let cap = (1 << 20) + 4096;
    let src = n.a.mr(cap, Access::ALL);
    let dst = n.b.mr(cap, Access::ALL);
    let back = n.a.mr(cap, Access::ALL);
    for (k, &len) in SIZES.iter().enumerate() {
        let msg = pattern(len, k as u8);
        n.a.fill(&src, 0, &msg);
        let sg = |addr: u64, key: u32| data_for(addr, len, key);
        // SEND, SEND_IMM, SEND_INVAL.
        for opcode in [op::SEND, op::SEND_IMM, op::SEND_INVAL] {
            n.b.fill(&dst, 0, &vec![0xEE; len + 1]);
            let victim = n.b.mr(64, Access::ALL);
            let rc = n.b.post_recv(&mut qb, &[(dst.addr, cap as u32, dst.key)]);
            let imm = if opcode == op::SEND_INVAL {
                victim.key
            } else {
                0xA000_0000 | len as u32
            };
            let w =
                n.a.post(&mut qa, opcode, SIGNALED, imm, &sg(src.addr, src.key));
            n.settle();
            assert_ok(&n.a.one(&mut ca), qa.qpn, w, opcode);
            let c = n.b.one(&mut cb);
            let want = match opcode {
                op::SEND => CqeOpcode::RespSend,
                op::SEND_IMM => CqeOpcode::RespSendImm,
                _ => CqeOpcode::RespSendInv,
            };
            assert_eq!(c.cqe_opcode(), Ok(want), "size {len}");
            assert_eq!((c.wqe_counter(), c.byte_cnt() as usize), (rc, len));
            if opcode != op::SEND {
                assert_eq!(c.imm_inval_pkey(), imm);
            }
            assert_eq!(n.b.read(&dst, 0, len), msg, "SEND payload, size {len}");
            assert_eq!(n.b.read(&dst, len, 1), [0xEE]);
        }
        // WRITE, WRITE_IMM.
        for opcode in [op::WRITE, op::WRITE_IMM] {
            n.b.fill(&dst, 0, &vec![0xEE; len + 1]);
            let rc = (opcode == op::WRITE_IMM).then(|| n.b.post_recv(&mut qb, &[]));
            let w = n.a.post(
                &mut qa,
                opcode,
                SIGNALED,
                0x1234,
                &segs(&[raddr(dst.addr, dst.key), sg(src.addr, src.key)]),
            );
            n.settle();
            assert_ok(&n.a.one(&mut ca), qa.qpn, w, opcode);
            if let Some(rc) = rc {
                let c = n.b.one(&mut cb);
                assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespWrImm));
                assert_eq!((c.wqe_counter(), c.byte_cnt() as usize), (rc, len));
                assert_eq!(c.imm_inval_pkey(), 0x1234);
            }
            assert_eq!(n.b.read(&dst, 0, len), msg, "WRITE payload, size {len}");
            assert_eq!(n.b.read(&dst, len, 1), [0xEE]);
        }
        // READ it back.
        n.a.fill(&back, 0, &vec![0xEE; len + 1]);
        let w = n.a.post(
            &mut qa,
            op::READ,
            SIGNALED,
            0,
            &segs(&[raddr(dst.addr, dst.key), sg(back.addr, back.key)]),
        );
        n.settle();
        let c = n.a.one(&mut ca);
        assert_ok(&c, qa.qpn, w, op::READ);
        assert_eq!(c.byte_cnt() as usize, len);
        assert_eq!(n.a.read(&back, 0, len), msg, "READ payload, size {len}");
        assert_eq!(n.a.read(&back, len, 1), [0xEE]);
        assert!(n.a.poll(&mut ca).is_none() && n.b.poll(&mut cb).is_none());
    }
    let (ca_, cb_) = (n.a.counters(), n.b.counters());
    assert_eq!(ca_.rx_dropped + cb_.rx_dropped, 0, "{ca_:?} {cb_:?}");
    assert_eq!(ca_.transport.retransmits, 0);
}

#[test]
fn atomics_across_devices() {
    let mut n = Net::new();
    let (mut qa, _qb, mut ca, _cb) = n.pair(QpSt::Rc, MTU_CODE, 6, 6, 0);
    let res = n.a.mr(64, Access::ALL);
    let tgt = n.b.mr(64, Access::ALL);
    n.b.fill(&tgt, 8, &100u64.to_be_bytes());
    let cases = [
        (op::FA, 5, 0, 100u64, 105u64),
        (op::CS, 7, 99, 105, 105),
        (op::CS, 7, 105, 105, 7),
        (op::FA, u64::MAX, 0, 7, 6),
    ];
    for (opcode, swap_add, compare, orig, after) in cases {
        let w = n.a.post(
            &mut qa,
            opcode,
            SIGNALED,
            0,
            &segs(&[
                raddr(tgt.addr + 8, tgt.key),
                atomic(swap_add, compare),
                data(res.addr, 8, res.key),
            ]),
        );
        n.settle();
        assert_ok(&n.a.one(&mut ca), qa.qpn, w, opcode);
        assert_eq!(n.a.read(&res, 0, 8), orig.to_be_bytes());
        assert_eq!(n.b.read(&tgt, 8, 8), after.to_be_bytes());
    }
}

#[test]
fn every_path_mtu_segments_and_reassembles() {
    for code in 1..=5u8 {
        let mtu = 128usize << code;
        let len = 3 * mtu + 17;
        let mut n = Net::new();
        let (mut qa, mut qb, mut ca, mut cb) = n.pair(QpSt::Rc, code, 6, 6, 0);
        let src = n.a.mr(len, Access::ALL);
        let dst = n.b.mr(2 * len, Access::ALL);
        let msg = pattern(len, code);
        n.a.fill(&src, 0, &msg);
        n.b.post_recv(&mut qb, &[(dst.addr, len as u32, dst.key)]);
        n.a.post(
            &mut qa,
            op::SEND,
            SIGNALED,
            0,
            &data(src.addr, len as u32, src.key),
        );
        n.a.post(
            &mut qa,
            op::WRITE,
            SIGNALED,
            0,
            &segs(&[
                raddr(dst.addr + len as u64, dst.key),
                data(src.addr, len as u32, src.key),
            ]),
        );
        n.settle();
        n.a.one(&mut ca);
        n.a.one(&mut ca);
        n.b.one(&mut cb);
        assert_eq!(n.b.read(&dst, 0, len), msg, "SEND at MTU {mtu}");
        assert_eq!(n.b.read(&dst, len, len), msg, "WRITE at MTU {mtu}");
        n.a.fill(&src, 0, &vec![0; len]);
        n.a.post(
            &mut qa,
            op::READ,
            SIGNALED,
            0,
            &segs(&[
                raddr(dst.addr, dst.key),
                data(src.addr, len as u32, src.key),
            ]),
        );
        n.settle();
        n.a.one(&mut ca);
        assert_eq!(n.a.read(&src, 0, len), msg, "READ at MTU {mtu}");
        // 4 request packets per SEND / WRITE, 4 responses to the READ, coalesced ACKs.
        let c = n.a.counters();
        assert!(c.frames_tx >= 9, "{c:?}");
        assert_eq!(c.rx_dropped, 0);
    }
}

/// A remote error: the WQE fails with `s`, the QP goes to ERR and the next WQE is flushed.
fn remote_error(
    n: &mut Net,
    opcode: u8,
    rkey_of: impl Fn(&rig::Mr, &rig::Mr) -> (u64, u32),
    access: Access,
    qp_rre_rwe: bool,
    s: CqeSyndrome,
) {
    let ca_ = n.a.cq(8);
    let cb_ = n.b.cq(8);
    let mut ca = ca_;
    let mut qa = n.a.qp(QpSt::Rc, &ca, &ca, 6, 6);
    let qb = n.b.qp(QpSt::Rc, &cb_, &cb_, 6, 6);
    n.a.init_qp(&qa, true, true, true);
    n.b.init_qp(&qb, qp_rre_rwe, qp_rre_rwe, qp_rre_rwe);
    n.a.rtr_rts_to(
        &qa,
        qb.qpn,
        3,
        0,
        0,
        rig::gid_of(rig::net::IP_B),
        rig::net::MAC_B,
    );
    n.b.rtr_rts_to(&qb, qa.qpn, 3, 0, 0, rig::gid_of(IP_A), rig::net::MAC_A);
    let local = n.a.mr(4096, Access::ALL);
    let remote = n.b.mr(4096, access);
    let other = n.b.mr(4096, Access::ALL);
    let (addr, key) = rkey_of(&remote, &other);
    let mut parts = vec![raddr(addr, key)];
    if opcode == op::CS || opcode == op::FA {
        parts.push(atomic(1, 0));
        parts.push(data(local.addr, 8, local.key));
    } else {
        parts.push(data(local.addr, 100, local.key));
    }
    let w = n.a.write_wqe(&mut qa, opcode, SIGNALED, 0, &segs(&parts));
    let w2 = n.a.write_wqe(
        &mut qa,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[
            raddr(remote.addr, remote.key),
            data(local.addr, 4, local.key),
        ]),
    );
    n.a.ring(&mut qa, w2);
    n.settle();
    assert_err(&n.a.one(&mut ca), qa.qpn, w, s);
    assert_err(&n.a.one(&mut ca), qa.qpn, w2, CqeSyndrome::WrFlush);
}

#[test]
fn naks_for_bad_rkey_missing_access_and_bounds() {
    let mut n = Net::new();
    let acc = CqeSyndrome::RemoteAccess;
    for opcode in [op::WRITE, op::READ, op::FA] {
        // Bad rkey.
        remote_error(
            &mut n,
            opcode,
            |r, _| (r.addr, r.key ^ 0x0F00),
            Access::ALL,
            true,
            acc,
        );
        // Missing access flag on the key.
        remote_error(
            &mut n,
            opcode,
            |r, _| (r.addr, r.key),
            Access {
                lw: true,
                ..Access::NONE
            },
            true,
            acc,
        );
        // Missing access flag on the QP.
        remote_error(
            &mut n,
            opcode,
            |r, _| (r.addr, r.key),
            Access::ALL,
            false,
            acc,
        );
        // Out of bounds.
        remote_error(
            &mut n,
            opcode,
            |r, _| (r.addr + 4096, r.key),
            Access::ALL,
            true,
            acc,
        );
    }
    // A misaligned atomic is an invalid request.
    remote_error(
        &mut n,
        op::CS,
        |r, _| (r.addr + 4, r.key),
        Access::ALL,
        true,
        CqeSyndrome::RemoteInvalReq,
    );
    let c = n.b.counters();
    assert!(c.transport.naks_tx >= 13, "{c:?}");
}

#[test]
fn rnr_with_rnr_retry_0_and_7() {
    // rnr_retry 0: the first RNR NAK fails the SEND.
    let mut n = Net::new();
    let (mut qa, _qb, mut ca, _cb) = n.pair(QpSt::Rc, MTU_CODE, 6, 6, 0);
    let src = n.a.mr(64, Access::ALL);
    let w =
        n.a.post(&mut qa, op::SEND, SIGNALED, 0, &data(src.addr, 8, src.key));
    n.settle();
    assert_err(&n.a.one(&mut ca), qa.qpn, w, CqeSyndrome::RnrRetryExc);
    // rnr_retry 7: retries forever, and completes once a receive WQE is posted.
    let mut n = Net::new();
    let (mut qa, mut qb, mut ca, mut cb) = n.pair(QpSt::Rc, MTU_CODE, 6, 6, 7);
    let src = n.a.mr(64, Access::ALL);
    let dst = n.b.mr(64, Access::ALL);
    n.a.fill(&src, 0, b"late");
    let w =
        n.a.post(&mut qa, op::SEND, SIGNALED, 0, &data(src.addr, 4, src.key));
    for _ in 0..50 {
        // Each round: the RNR NAK, the wait (min_rnr_nak 1: 10 us), the resend.
        assert!(n.a.h.dev.step() + n.b.h.dev.step() > 0 || n.a.h.dev.next_timer_ns().is_some());
        n.a.h.dev.advance(std::time::Duration::from_micros(20));
        n.b.h.dev.advance(std::time::Duration::from_micros(20));
    }
    assert!(n.a.poll(&mut ca).is_none(), "still waiting");
    assert!(n.a.counters().transport.rnr_naks_rx >= 10);
    n.b.post_recv(&mut qb, &[(dst.addr, 64, dst.key)]);
    n.settle();
    assert_ok(&n.a.one(&mut ca), qa.qpn, w, op::SEND);
    assert_eq!(n.b.one(&mut cb).byte_cnt(), 4);
    assert_eq!(n.b.read(&dst, 0, 4), b"late");
}

#[test]
fn retry_exhausted_when_the_peer_is_gone() {
    let mut n = Net::new();
    let (mut qa, _qb, mut ca, _cb) = n.pair(QpSt::Rc, MTU_CODE, 6, 6, 0);
    let src = n.a.mr(64, Access::ALL);
    // The peer's end of the wire is unplugged.
    n.b.h.dev.set_link(Box::new(NullLink::default()));
    let w =
        n.a.write_wqe(&mut qa, op::SEND, SIGNALED, 0, &data(src.addr, 8, src.key));
    let w2 =
        n.a.write_wqe(&mut qa, op::SEND, 0, 0, &data(src.addr, 8, src.key));
    n.a.ring(&mut qa, w2);
    let waited = n.settle();
    assert_err(&n.a.one(&mut ca), qa.qpn, w, CqeSyndrome::TransportRetryExc);
    assert_err(&n.a.one(&mut ca), qa.qpn, w2, CqeSyndrome::WrFlush);
    // retry_count 7: the first send and 7 retransmissions, each after 4.096 us x 2^14.
    let timeout = 4096u64 << 14;
    assert_eq!(waited, 8 * timeout, "virtual time waited");
    assert_eq!(n.a.counters().transport.timeouts, 7);
}

#[test]
fn uc_between_devices() {
    let mut n = Net::new();
    let (mut qa, mut qb, mut ca, mut cb) = n.pair(QpSt::Uc, MTU_CODE, 6, 6, 0);
    let src = n.a.mr(8192, Access::ALL);
    let dst = n.b.mr(8192, Access::ALL);
    let msg = pattern(3000, 9);
    n.a.fill(&src, 0, &msg);
    n.b.post_recv(&mut qb, &[(dst.addr, 4096, dst.key)]);
    n.a.post(
        &mut qa,
        op::SEND,
        SIGNALED,
        0,
        &data(src.addr, 3000, src.key),
    );
    n.a.post(
        &mut qa,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[
            raddr(dst.addr + 4096, dst.key),
            data(src.addr, 3000, src.key),
        ]),
    );
    n.settle();
    n.a.one(&mut ca);
    n.a.one(&mut ca);
    assert_eq!(n.b.one(&mut cb).byte_cnt(), 3000);
    assert_eq!(n.b.read(&dst, 0, 3000), msg);
    assert_eq!(n.b.read(&dst, 4096, 3000), msg);
    // UC sends no ACKs.
    assert_eq!(n.b.counters().frames_tx, 0);
}

/// A UD QP on each device, in RTS, each with its own CQ.
fn ud_pair(n: &mut Net) -> (rig::Qp, rig::Qp, rig::Cq, rig::Cq) {
    let ca = n.a.cq(6);
    let cb = n.b.cq(6);
    let qa = n.a.qp(QpSt::Ud, &ca, &ca, 6, 6);
    let qb = n.b.qp(QpSt::Ud, &cb, &cb, 6, 6);
    n.a.init_qp(&qa, false, false, false);
    n.a.rtr_rts(&qa, 0, 3, 0, 0);
    n.b.init_qp(&qb, false, false, false);
    n.b.rtr_rts(&qb, 0, 3, 0, 0);
    (qa, qb, ca, cb)
}

/// A UD send's UDP source port is the address vector's `rlid` when set, else derived from
/// the flow label and QPNs (rxe's formula, in 0xC000..0xFFFF).
#[test]
fn ud_source_port_comes_from_the_address_vector() {
    use rig::net::{IP_B, MAC_B};
    let path = std::env::temp_dir().join(format!("rnic-ud-sport-{}.pcap", std::process::id()));
    let mut n = Net::new();
    let (mut qa, mut qb, mut ca, mut cb) = ud_pair(&mut n);
    let src = n.a.mr(64, Access::ALL);
    let dst = n.b.mr(4096, Access::ALL);
    n.a.h.dev.capture_to(&path).expect("capture file");
    let av = rig::datagram_to(qb.qpn, rig::QKEY, IP_B, MAC_B);
    for av in [av.clone(), rig::with_udp_sport(&av, 0xD00D)] {
        n.b.post_recv(&mut qb, &[(dst.addr, 2048, dst.key)]);
        n.a.post(
            &mut qa,
            op::SEND,
            SIGNALED,
            0,
            &segs(&[av, data(src.addr, 8, src.key)]),
        );
        n.settle();
        n.a.one(&mut ca);
        n.b.one(&mut cb);
    }
    assert_eq!(n.a.h.dev.stop_capture().expect("flush"), 2);
    let frames = common::read_frames_at(&path);
    let _ = std::fs::remove_file(&path);
    // Ethernet (14) + IPv4 (20): the UDP source port.
    let sport = |f: &[u8]| u16::from_be_bytes([f[34], f[35]]);
    assert!(sport(&frames[0]) >= 0xC000, "{:#x}", sport(&frames[0]));
    assert_eq!(sport(&frames[1]), 0xD00D);
}

#[test]
fn ud_between_devices() {
    use rig::net::{IP_B, MAC_B};
    let mut n = Net::new();
    let (mut qa, mut qb, mut ca, mut cb) = ud_pair(&mut n);
    let src = n.a.mr(4096, Access::ALL);
    let dst = n.b.mr(4096, Access::ALL);
    // The UD MTU is the port's: 1024 for the default 1500-byte vport MTU.
    let msg = pattern(1024, 3);
    n.a.fill(&src, 0, &msg);
    let rc = n.b.post_recv(&mut qb, &[(dst.addr, 2048, dst.key)]);
    let av = rig::datagram_to(qb.qpn, rig::QKEY, IP_B, MAC_B);
    let w = n.a.post(
        &mut qa,
        op::SEND_IMM,
        SIGNALED,
        77,
        &segs(&[av.clone(), data(src.addr, 1024, src.key)]),
    );
    n.settle();
    assert_ok(&n.a.one(&mut ca), qa.qpn, w, op::SEND_IMM);
    let c = n.b.one(&mut cb);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSendImm));
    assert_eq!(
        (c.wqe_counter(), c.byte_cnt(), c.rqpn(), c.imm_inval_pkey()),
        (rc, 1064, qa.qpn, 77)
    );
    let grh = n.b.read(&dst, 0, 40);
    assert_eq!((&grh[..20], grh[20]), (&[0u8; 20][..], 0x45));
    assert_eq!((&grh[32..36], &grh[36..40]), (&IP_A[..], &IP_B[..]));
    assert_eq!(n.b.read(&dst, 40, 1024), msg);
    // A wrong Q_Key is dropped and counted at B.
    let bad = rig::datagram_to(qb.qpn, 0x2222, IP_B, MAC_B);
    n.a.post(
        &mut qa,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[bad, data(src.addr, 8, src.key)]),
    );
    n.settle();
    n.a.one(&mut ca);
    assert!(n.b.poll(&mut cb).is_none());
    assert_eq!(n.b.counters().drops.qkey, 1);
    // Beyond the port MTU: a local length error at A.
    let w = n.a.post(
        &mut qa,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[av, data(src.addr, 1025, src.key)]),
    );
    n.settle();
    assert_err(&n.a.one(&mut ca), qa.qpn, w, CqeSyndrome::LocalLength);
}

#[test]
fn same_seed_same_packet_trace() {
    fn run(seed: u64, path: &std::path::Path) -> Vec<u8> {
        let cfg: FaultConfig =
            format!("loss=0.05,dup=0.02,reorder=0.05,corrupt=0.01,delay=3us,seed={seed}")
                .parse()
                .unwrap();
        let mut n = Net::faulty(cfg);
        let (mut qa, mut qb, mut ca, mut cb) = n.pair(QpSt::Rc, 1, 8, 8, 7);
        n.a.h.dev.capture_to(path).unwrap();
        let src = n.a.mr(65536, Access::ALL);
        let dst = n.b.mr(65536, Access::ALL);
        n.a.fill(&src, 0, &pattern(65536, 1));
        for i in 0..40u64 {
            n.b.post_recv(&mut qb, &[(dst.addr, 4096, dst.key)]);
            n.a.post(
                &mut qa,
                op::SEND,
                SIGNALED,
                0,
                &data(src.addr + i * 100, 700, src.key),
            );
            n.a.post(
                &mut qa,
                op::READ,
                SIGNALED,
                0,
                &segs(&[
                    raddr(dst.addr + 8192, dst.key),
                    data(src.addr + 8192, 1000, src.key),
                ]),
            );
        }
        n.settle();
        for _ in 0..80 {
            let c = n.a.one(&mut ca);
            assert_eq!(
                c.cqe_opcode(),
                Ok(CqeOpcode::Req),
                "{c:?} {:?} B {:?}",
                n.a.counters(),
                n.b.counters()
            );
        }
        for _ in 0..40 {
            assert_eq!(n.b.one(&mut cb).byte_cnt(), 700);
        }
        assert!(n.a.h.dev.stop_capture().unwrap() > 200);
        std::fs::read(path).unwrap()
    }
    let dir = std::env::temp_dir();
    let p1 = dir.join(format!("rnic-trace-{}-1.pcap", std::process::id()));
    let p2 = dir.join(format!("rnic-trace-{}-2.pcap", std::process::id()));
    let p3 = dir.join(format!("rnic-trace-{}-3.pcap", std::process::id()));
    let (t1, t2, t3) = (run(11, &p1), run(11, &p2), run(12, &p3));
    assert_eq!(t1, t2, "same seed: byte-identical captures");
    assert_ne!(t1, t3, "another seed: another trace");
    for p in [p1, p2, p3] {
        let _ = std::fs::remove_file(p);
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// At least 100,000 mixed operations (SEND, WRITE, READ, FETCH_ADD; 0 to 1600 bytes at path
/// MTU 512, so up to 4 packets) from A to B under 5% loss, 1% duplication, 1% reordering and
/// 0.1% corruption in both directions. Every byte is checked, every WQE completes exactly
/// once and in order, the atomic counter is exact. `RNIC_FAULT_SEED` and
/// `RNIC_CAMPAIGN_OPS` override the seed (7) and the number of operations.
#[test]
fn fault_campaign() {
    campaign(env_u64("RNIC_CAMPAIGN_OPS", 100_000) as usize);
}

/// The same campaign with 1,000,000 operations (ignored: minutes in a release build):
/// `cargo test --release -p rnic-emulator --test two_devices -- --ignored --nocapture
/// fault_campaign_million`.
#[test]
#[ignore]
fn fault_campaign_million() {
    campaign(1_000_000);
}

fn campaign(total: usize) {
    const BATCH: usize = 64;
    const SLOT: usize = 2048;
    const READ_AREA: usize = 65536;
    let seed = env_u64("RNIC_FAULT_SEED", 7);
    let cfg = FaultConfig {
        loss: 0.05,
        dup: 0.01,
        reorder: 0.01,
        corrupt: 0.001,
        seed,
        ..FaultConfig::default()
    };
    let mut n = Net::faulty(cfg);
    let (mut qa, mut qb, mut ca, mut cb) = n.pair(QpSt::Rc, 2, 10, 10, 7);
    let src = n.a.mr(BATCH * SLOT, Access::ALL);
    let back = n.a.mr(BATCH * SLOT, Access::ALL);
    let dst = n.b.mr(BATCH * SLOT, Access::ALL);
    let rbuf = n.b.mr(BATCH * SLOT, Access::ALL);
    let area = n.b.mr(READ_AREA + 64, Access::ALL);
    let area_bytes = pattern(READ_AREA, 0x5A);
    n.b.fill(&area, 0, &area_bytes);
    let mut counter: u64 = 1 << 40;
    n.b.fill(&area, READ_AREA, &counter.to_be_bytes());
    let mut rng = rnic_emulator::link::SplitMix64::new(seed);
    let (mut sends, mut writes, mut reads, mut atomics, mut bytes) = (0, 0, 0, 0, 0u64);
    let mut done = 0;
    let start = std::time::Instant::now();
    while done < total {
        // (opcode, wqe index, len, READ offset or FETCH_ADD addend, recv counter)
        let mut posted = Vec::with_capacity(BATCH);
        let mut last = 0;
        for i in 0..BATCH.min(total - done) {
            let slot = (i * SLOT) as u64;
            let kind = rng.below(100);
            let len = rng.below(1601) as usize;
            let sg = |mr: &rig::Mr| data_for(mr.addr + slot, len, mr.key);
            let (opcode, w, arg, rc) = if kind < 30 {
                let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                n.a.fill(&src, i * SLOT, &bytes);
                let rc =
                    n.b.post_recv(&mut qb, &[(rbuf.addr + slot, SLOT as u32, rbuf.key)]);
                sends += 1;
                let w = n.a.write_wqe(&mut qa, op::SEND, SIGNALED, 0, &sg(&src));
                (op::SEND, w, 0, rc)
            } else if kind < 60 {
                let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                n.a.fill(&src, i * SLOT, &bytes);
                writes += 1;
                let w = n.a.write_wqe(
                    &mut qa,
                    op::WRITE,
                    SIGNALED,
                    0,
                    &segs(&[raddr(dst.addr + slot, dst.key), sg(&src)]),
                );
                (op::WRITE, w, 0, 0)
            } else if kind < 85 {
                let off = rng.below((READ_AREA - len + 1) as u64);
                reads += 1;
                let w = n.a.write_wqe(
                    &mut qa,
                    op::READ,
                    SIGNALED,
                    0,
                    &segs(&[raddr(area.addr + off, area.key), sg(&back)]),
                );
                (op::READ, w, off, 0)
            } else {
                let add = rng.below(1000) + 1;
                atomics += 1;
                let w = n.a.write_wqe(
                    &mut qa,
                    op::FA,
                    SIGNALED,
                    0,
                    &segs(&[
                        raddr(area.addr + READ_AREA as u64, area.key),
                        atomic(add, 0),
                        data(back.addr + slot, 8, back.key),
                    ]),
                );
                (op::FA, w, add, 0)
            };
            bytes += len as u64;
            last = w;
            posted.push((opcode, w, len, arg, rc));
        }
        n.a.ring(&mut qa, last);
        n.settle();
        // Requester CQEs: exactly one per WQE, in order.
        let mut recvs = 0;
        for (i, &(opcode, w, len, arg, _)) in posted.iter().enumerate() {
            let c = n.a.poll(&mut ca).unwrap_or_else(|| {
                panic!(
                    "op {} (WQE {w}) never completed; A {:?} B {:?}",
                    done + i,
                    n.a.counters(),
                    n.b.counters()
                )
            });
            assert_ok(&c, qa.qpn, w, opcode);
            let slot = i * SLOT;
            match opcode {
                op::SEND => recvs += 1,
                op::WRITE => {
                    assert_eq!(
                        n.b.read(&dst, slot, len),
                        n.a.read(&src, slot, len),
                        "WRITE {}",
                        done + i
                    )
                }
                op::READ => {
                    assert_eq!(c.byte_cnt() as usize, len);
                    let off = arg as usize;
                    assert_eq!(
                        n.a.read(&back, slot, len),
                        &area_bytes[off..off + len],
                        "READ {}",
                        done + i
                    )
                }
                _ => {
                    assert_eq!(
                        n.a.read(&back, slot, 8),
                        counter.to_be_bytes(),
                        "FETCH_ADD {}",
                        done + i
                    );
                    counter += arg;
                }
            }
        }
        assert!(n.a.poll(&mut ca).is_none(), "a CQE too many");
        // Responder CQEs: one per SEND, in order, with the bytes.
        for (i, &(_, _, len, _, rc)) in posted.iter().enumerate().filter(|(_, p)| p.0 == op::SEND) {
            let c = n.b.one(&mut cb);
            assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSend));
            assert_eq!(
                (c.wqe_counter(), c.byte_cnt() as usize),
                (rc, len),
                "SEND {}",
                done + i
            );
            assert_eq!(
                n.b.read(&rbuf, i * SLOT, len),
                n.a.read(&src, i * SLOT, len),
                "SEND {}",
                done + i
            );
            recvs -= 1;
        }
        assert_eq!(recvs, 0);
        assert!(n.b.poll(&mut cb).is_none(), "a receive CQE too many");
        done += posted.len();
    }
    assert_eq!(
        n.b.read(&area, READ_AREA, 8),
        counter.to_be_bytes(),
        "atomic counter exact"
    );
    let (fa, fb) = n
        .faults
        .as_ref()
        .map(|(a, b)| (a.snapshot(), b.snapshot()))
        .unwrap();
    let (a, b) = (n.a.counters(), n.b.counters());
    println!(
        "fault_campaign seed={seed} ops={done} (sends={sends} writes={writes} reads={reads} atomics={atomics}, {bytes} bytes) in {:.1?}",
        start.elapsed()
    );
    println!("faults A->B: {fa}");
    println!("faults B->A: {fb}");
    println!(
        "A: rx_dropped={} {:?} {:?}",
        a.rx_dropped, a.drops, a.transport
    );
    println!(
        "B: rx_dropped={} {:?} {:?}",
        b.rx_dropped, b.drops, b.transport
    );
    assert!(fa.lost > 0 && fa.duplicated > 0 && fa.reordered > 0);
    assert!(a.transport.retransmits > 0 && b.transport.duplicates > 0);
}

/// Threaded devices: nothing steps them; doorbells wake the sender's thread, link traffic the
/// receiver's, and the RNR timer fires on its own.
#[test]
fn threaded_devices_are_woken_by_the_link_and_run_timers() {
    use rig::net::{IP_B, MAC_A, MAC_B};
    use std::time::{Duration, Instant};
    let mut a = rig::Rig::threaded(IP_A, MAC_A);
    let mut b = rig::Rig::threaded(IP_B, MAC_B);
    let (la, lb) = rnic_emulator::link::InProcLink::pair();
    a.h.dev.set_link(Box::new(la));
    b.h.dev.set_link(Box::new(lb));
    let mut ca = a.cq(6);
    let mut cb = b.cq(6);
    let mut qa = a.qp(QpSt::Rc, &ca, &ca, 6, 6);
    let mut qb = b.qp(QpSt::Rc, &cb, &cb, 6, 6);
    a.init_qp(&qa, true, true, true);
    b.init_qp(&qb, true, true, true);
    a.rtr_rts_to(&qa, qb.qpn, 3, 0, 7, rig::gid_of(IP_B), MAC_B);
    b.rtr_rts_to(&qb, qa.qpn, 3, 0, 7, rig::gid_of(IP_A), MAC_A);
    let src = a.mr(4096, Access::ALL);
    let dst = b.mr(4096, Access::ALL);
    a.fill(&src, 0, b"threaded");
    let wait = |r: &mut rig::Rig, cq: &mut rig::Cq| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(c) = r.poll(cq) {
                return c;
            }
            assert!(Instant::now() < deadline, "no completion");
            std::thread::sleep(Duration::from_micros(100));
        }
    };
    // No receive posted: RNR NAKs, retried on the device's own timer.
    let w = a.post(&mut qa, op::SEND, SIGNALED, 0, &data(src.addr, 8, src.key));
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.counters().transport.rnr_naks_rx < 3 {
        assert!(Instant::now() < deadline, "no RNR NAKs");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(a.poll(&mut ca).is_none(), "still waiting for a receive WQE");
    b.post_recv(&mut qb, &[(dst.addr, 64, dst.key)]);
    assert_ok(&wait(&mut a, &mut ca), qa.qpn, w, op::SEND);
    assert_eq!(wait(&mut b, &mut cb).byte_cnt(), 8);
    assert_eq!(b.read(&dst, 0, 8), b"threaded");
}

/// Threaded devices, nothing posted on B: A's 64 KiB WRITEs go to B's own thread as runs
/// (from the second on, see `InProcLink`'s hand-off), and every byte lands.
#[test]
fn long_runs_handed_to_the_idle_peers_thread_land_whole() {
    use rig::net::{IP_B, MAC_A, MAC_B};
    use std::time::{Duration, Instant};
    const LEN: usize = 64 << 10;
    const N: usize = 16;
    let mut a = rig::Rig::threaded(IP_A, MAC_A);
    let mut b = rig::Rig::threaded(IP_B, MAC_B);
    let (la, lb) = rnic_emulator::link::InProcLink::pair();
    let hand_offs = la.hand_offs();
    a.h.dev.set_link(Box::new(la));
    b.h.dev.set_link(Box::new(lb));
    let mut ca = a.cq(6);
    let cb = b.cq(6);
    let mut qa = a.qp(QpSt::Rc, &ca, &ca, 6, 6);
    let qb = b.qp(QpSt::Rc, &cb, &cb, 6, 6);
    a.init_qp(&qa, true, true, true);
    b.init_qp(&qb, true, true, true);
    a.rtr_rts_to(&qa, qb.qpn, MTU_CODE, 0, 7, rig::gid_of(IP_B), MAC_B);
    b.rtr_rts_to(&qb, qa.qpn, MTU_CODE, 0, 7, rig::gid_of(IP_A), MAC_A);
    let src = a.mr(N * LEN, Access::ALL);
    let dst = b.mr(N * LEN, Access::ALL);
    let msg = pattern(N * LEN, 7);
    a.fill(&src, 0, &msg);
    let mut wqes = Vec::new();
    for i in 0..N {
        let off = (i * LEN) as u64;
        wqes.push(a.post(
            &mut qa,
            op::WRITE,
            SIGNALED,
            0,
            &segs(&[
                raddr(dst.addr + off, dst.key),
                data(src.addr + off, LEN as u32, src.key),
            ]),
        ));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for w in wqes {
        let c = loop {
            if let Some(c) = a.poll(&mut ca) {
                break c;
            }
            assert!(Instant::now() < deadline, "no completion for WQE {w}");
            std::thread::yield_now();
        };
        assert_ok(&c, qa.qpn, w, op::WRITE);
    }
    assert_eq!(b.read(&dst, 0, N * LEN), msg);
    assert!(
        hand_offs.get() > 0,
        "B's host posted nothing: its thread should have taken long runs"
    );
}
