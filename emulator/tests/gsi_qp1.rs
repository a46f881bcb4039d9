//! QP1 (the GSI QP, CREATE_QP st 8) between two emulated devices on the in-process link:
//! frames for DestQP 1 reach the port's QP1 with their GRH, only with the GSI Q_Key, and
//! QP1 sends as source QP 1; without a QP1 they are dropped and counted.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use rig::net::{IP_A, IP_B, MAC_A, MAC_B, Net};
use rig::{Access, Rig, SIGNALED, data, op, segs};
use rnic_hw_regs::cmd::{DestroyQpIn, Rst2InitQpIn};
use rnic_hw_regs::cqe::CqeOpcode;
use rnic_hw_regs::ctx::QpSt;
use rnic_hw_regs::roce::{GSI_QKEY, GSI_QPN};

/// The port's QP1 on `r`, in RTS with the GSI Q_Key, on a fresh CQ.
fn qp1(r: &mut Rig) -> (rig::Qp, rig::Cq) {
    let cq = r.cq(6);
    let qp = r.qp(QpSt::Qp1, &cq, &cq, 6, 6);
    let mut i = Rst2InitQpIn::new_cmd();
    i.set_qpn(qp.qpn);
    let c = i.qpc_mut();
    c.set_pm_state(3);
    c.set_q_key(GSI_QKEY);
    c.primary_address_path_mut().set_vhca_port_num(1);
    r.h.ok(&i, &[]);
    r.rtr_rts(&qp, 0, 3, 0, 0);
    (qp, cq)
}

/// A UD QP on `r` in RTS (the rig's Q_Key), on a fresh CQ.
fn ud(r: &mut Rig) -> (rig::Qp, rig::Cq) {
    let cq = r.cq(6);
    let qp = r.qp(QpSt::Ud, &cq, &cq, 6, 6);
    r.init_qp(&qp, false, false, false);
    r.rtr_rts(&qp, 0, 3, 0, 0);
    (qp, cq)
}

/// A 256-byte MAD-sized pattern.
fn mad(seed: u8) -> Vec<u8> {
    (0..256u32)
        .map(|i| (i as u8).wrapping_mul(7) ^ seed)
        .collect()
}

/// A's QP1 to B's QP1 (DestQP 1, the GSI Q_Key), then B's QP1 to a UD QP on A: each
/// receiver sees source QP 1, not the QPN firmware gave the sending QP1.
#[test]
fn datagrams_for_qp_1_reach_the_ports_qp1_and_it_sends_as_qp_1() {
    let mut n = Net::new();
    let (mut ga, mut cga) = qp1(&mut n.a);
    let (mut qa, mut ca) = ud(&mut n.a);
    let (mut gb, mut cb) = qp1(&mut n.b);
    let src = n.a.mr(4096, Access::ALL);
    let dst = n.b.mr(4096, Access::ALL);
    let msg = mad(1);
    n.a.fill(&src, 0, &msg);
    let rc = n.b.post_recv(&mut gb, &[(dst.addr, 40 + 256, dst.key)]);
    let to_gsi = rig::datagram_to(GSI_QPN, GSI_QKEY, IP_B, MAC_B);
    n.a.post(
        &mut ga,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[to_gsi, data(src.addr, 256, src.key)]),
    );
    n.settle();
    assert_eq!(n.a.one(&mut cga).cqe_opcode(), Ok(CqeOpcode::Req));
    let c = n.b.one(&mut cb);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSend));
    // The CQE names QP1 by its own QPN, the sender as QP 1, and carries the P_Key.
    assert_ne!(gb.qpn, GSI_QPN);
    assert_eq!(
        (c.qpn(), c.wqe_counter(), c.byte_cnt(), c.rqpn(), c.grh()),
        (gb.qpn, rc, 40 + 256, GSI_QPN, 1)
    );
    assert_eq!(c.imm_inval_pkey(), 0xFFFF);
    let grh = n.b.read(&dst, 0, 40);
    assert_eq!((&grh[32..36], &grh[36..40]), (&IP_A[..], &IP_B[..]));
    assert_eq!(n.b.read(&dst, 40, 256), msg);

    // QP1 answers a UD QP on A (that QP's Q_Key): the source QP is 1 there too.
    let reply = mad(2);
    n.b.fill(&dst, 1024, &reply);
    let ra =
        n.a.post_recv(&mut qa, &[(src.addr + 1024, 40 + 256, src.key)]);
    let to_a = rig::datagram_to(qa.qpn, rig::QKEY, IP_A, MAC_A);
    n.b.post(
        &mut gb,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[to_a, data(dst.addr + 1024, 256, dst.key)]),
    );
    n.settle();
    assert_eq!(n.b.one(&mut cb).cqe_opcode(), Ok(CqeOpcode::Req));
    let c = n.a.one(&mut ca);
    assert_eq!((c.qpn(), c.wqe_counter(), c.rqpn()), (qa.qpn, ra, GSI_QPN));
    assert_eq!(n.a.read(&src, 1024 + 40, 256), reply);
    assert_eq!(n.a.counters().drops.total(), 0);
    assert_eq!(n.b.counters().drops.total(), 0);
}

/// A datagram for QP 1 with another Q_Key is dropped under `qkey`, its receive WQE kept for
/// the next good one. A UD QP cannot borrow the GSI Q_Key either: a work request's Q_Key
/// with the high bit set means the sending QP's own (IBTA's controlled Q_Keys).
#[test]
fn a_datagram_for_qp_1_without_the_gsi_qkey_is_dropped_and_counted() {
    let mut n = Net::new();
    let (mut qa, mut ca) = ud(&mut n.a);
    let (mut ga, mut cga) = qp1(&mut n.a);
    let (mut gb, mut cb) = qp1(&mut n.b);
    let src = n.a.mr(4096, Access::ALL);
    let dst = n.b.mr(4096, Access::ALL);
    let rc = n.b.post_recv(&mut gb, &[(dst.addr, 40 + 256, dst.key)]);
    for (k, qkey) in [rig::QKEY, 0x0001_0000, GSI_QKEY].into_iter().enumerate() {
        let av = rig::datagram_to(GSI_QPN, qkey, IP_B, MAC_B);
        n.a.post(
            &mut qa,
            op::SEND,
            SIGNALED,
            0,
            &segs(&[av, data(src.addr, 256, src.key)]),
        );
        n.settle();
        n.a.one(&mut ca);
        assert!(n.b.poll(&mut cb).is_none());
        assert_eq!(n.b.counters().drops.qkey, k as u64 + 1);
    }
    // The WQE is still there for a datagram with the right key (from A's QP1).
    let av = rig::datagram_to(GSI_QPN, GSI_QKEY, IP_B, MAC_B);
    n.a.post(
        &mut ga,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[av, data(src.addr, 256, src.key)]),
    );
    n.settle();
    n.a.one(&mut cga);
    assert_eq!(n.b.one(&mut cb).wqe_counter(), rc);
    assert_eq!(n.b.counters().drops.total(), 3);
}

/// Without a QP1 (never created, or destroyed) a datagram for QP 1 is dropped under
/// `no_gsi_qp`, not `unknown_qp`.
#[test]
fn a_datagram_for_qp_1_with_no_qp1_is_dropped_and_counted() {
    let mut n = Net::new();
    let (mut qa, mut ca) = ud(&mut n.a);
    let src = n.a.mr(4096, Access::ALL);
    let send = |n: &mut Net, qa: &mut rig::Qp, ca: &mut rig::Cq| {
        let av = rig::datagram_to(GSI_QPN, GSI_QKEY, IP_B, MAC_B);
        n.a.post(
            qa,
            op::SEND,
            SIGNALED,
            0,
            &segs(&[av, data(src.addr, 256, src.key)]),
        );
        n.settle();
        n.a.one(ca);
    };
    send(&mut n, &mut qa, &mut ca);
    let d = n.b.counters().drops;
    assert_eq!((d.no_gsi_qp, d.unknown_qp, d.total()), (1, 0, 1));
    let (gb, _cb) = qp1(&mut n.b);
    let mut i = DestroyQpIn::new_cmd();
    i.set_qpn(gb.qpn);
    n.b.h.ok(&i, &[]);
    send(&mut n, &mut qa, &mut ca);
    let d = n.b.counters().drops;
    assert_eq!((d.no_gsi_qp, d.unknown_qp, d.total()), (2, 0, 2));
}
