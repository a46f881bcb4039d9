//! Local error paths: each gets the CQE syndrome a ConnectX gives, the failing WQE always
//! gets its CQE (signaled or not), the QP enters ERR (a UD / UC send queue error: SQE) and
//! what is outstanding is flushed.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::time::Duration;

use rig::{
    Access, Cq, Qp, Rig, SIGNALED, assert_err, atomic, data, datagram, inline, op, raddr, segs,
};
use rnic_hw_regs::cmd;
use rnic_hw_regs::cqe::{Cqe64, CqeOpcode, CqeSyndrome};
use rnic_hw_regs::ctx::{QpSt, QpState};
use rnic_hw_regs::eqe::{EqeEvent, EventType};

const MTU: u8 = 1;

/// After an error the QP is in ERR (or SQE): a new WQE is flushed.
#[track_caller]
fn assert_flushes_new_work(r: &mut Rig, qp: &mut Qp, cq: &mut Cq) {
    let w = r.post(qp, op::NOP, SIGNALED, 0, &[]);
    let c = r.one(cq);
    assert_err(&c, true, qp.qpn, w, CqeSyndrome::WrFlush);
    assert_eq!(c.vendor_err_synd(), 0xF9);
}

#[test]
fn bad_lkey_is_a_local_protection_error_even_unsignaled() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    // Wrong variant byte, unsignaled: still an error CQE with its index.
    let w0 = r.write_wqe(&mut a, op::SEND, 0, 0, &data(src.addr, 8, src.key ^ 0x01));
    let w1 = r.write_wqe(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 8, src.key));
    r.ring(&mut a, w1);
    assert_err(&r.one(&mut ca), true, a.qpn, w0, CqeSyndrome::LocalProt);
    assert_err(&r.one(&mut ca), true, a.qpn, w1, CqeSyndrome::WrFlush);
    assert!(r.poll(&mut cb).is_none(), "nothing was sent");
    assert_flushes_new_work(&mut r, &mut a, &mut ca);
}

#[test]
fn lkey_checks_pd_bounds_and_local_write() {
    // Another PD.
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let pd2 = r.h.alloc_pd();
    let other = r.mr_in_pd(4096, Access::ALL, pd2, true);
    let w = r.post(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &data(other.addr, 8, other.key),
    );
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::LocalProt);

    // Past the end of the region.
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let w = r.post(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &data(src.addr + 4000, 200, src.key),
    );
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::LocalProt);

    // A READ into a buffer without local write.
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let ro = r.mr(4096, Access::NONE);
    let remote = r.mr(4096, Access::ALL);
    let w = r.post(
        &mut a,
        op::READ,
        SIGNALED,
        0,
        &segs(&[raddr(remote.addr, remote.key), data(ro.addr, 8, ro.key)]),
    );
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::LocalProt);
}

/// A SEND_WITH_INVALIDATE naming a key created without `en_rinval` (as an ordinary user MR
/// is) is an invalid request: the receive completes in error, the key keeps working.
#[test]
fn send_with_invalidate_needs_en_rinval() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    let plain = Access {
        rinval: false,
        ..Access::ALL
    };
    let victim = r.mr(4096, plain);
    let r0 = r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    let w = r.post(
        &mut a,
        op::SEND_INVAL,
        SIGNALED,
        victim.key,
        &data(src.addr, 3, src.key),
    );
    assert_err(
        &r.one(&mut cb),
        false,
        b.qpn,
        r0,
        CqeSyndrome::RemoteInvalReq,
    );
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::RemoteInvalReq);
    // Not invalidated: on a fresh pair, a WRITE through the key still works.
    let (mut a2, _b2, mut ca2, _cb2) = r.pair(QpSt::Rc, MTU);
    let w = r.post(
        &mut a2,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[raddr(victim.addr, victim.key), data(src.addr, 3, src.key)]),
    );
    let c = r.one(&mut ca2);
    assert_eq!((c.wqe_counter(), c.cqe_opcode()), (w, Ok(CqeOpcode::Req)));
}

#[test]
fn receive_buffer_too_small_is_a_local_length_error() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    let r0 = r.post_recv(&mut b, &[(dst.addr, 100, dst.key)]);
    let r1 = r.post_recv(&mut b, &[(dst.addr, 100, dst.key)]);
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 300, src.key));
    // The responder completes the receive WQE with a local length error and NAKs invalid
    // request; its QP enters ERR and the other receive WQE is flushed.
    assert_err(&r.one(&mut cb), false, b.qpn, r0, CqeSyndrome::LocalLength);
    assert_err(&r.one(&mut cb), false, b.qpn, r1, CqeSyndrome::WrFlush);
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::RemoteInvalReq);
    assert_flushes_new_work(&mut r, &mut a, &mut ca);
    // The responder's QP raised its affiliated error event.
    let e = r.poll_aeq().expect("an affiliated event");
    assert_eq!(
        e.event(),
        Ok(EqeEvent::Qp {
            kind: EventType::WqInvalReqError,
            qpn: b.qpn
        })
    );
}

/// Posts one RDMA WQE on a fresh pair with the given remote key and access, and returns the
/// requester's CQE.
fn remote_op(opcode: u8, remote_access: Access, qp_flags: bool, tweak_key: u32, off: u64) -> Cqe64 {
    let mut r = Rig::new();
    let ca_ = r.cq(6);
    let cb_ = r.cq(6);
    let mut a = r.qp(QpSt::Rc, &ca_, &ca_, 6, 6);
    let b = r.qp(QpSt::Rc, &cb_, &cb_, 6, 6);
    r.init_qp(&a, true, true, true);
    r.init_qp(&b, qp_flags, qp_flags, qp_flags);
    r.rtr_rts(&a, b.qpn, MTU, 1, 0);
    r.rtr_rts(&b, a.qpn, MTU, 1, 0);
    let mut ca = ca_;
    let local = r.mr(4096, Access::ALL);
    let remote = r.mr(4096, remote_access);
    let rs = raddr(remote.addr + off, remote.key ^ tweak_key);
    let s = match opcode {
        op::CS | op::FA => segs(&[rs, atomic(1, 0), data(local.addr, 8, local.key)]),
        _ => segs(&[rs, data(local.addr, 64, local.key)]),
    };
    let w = r.post(&mut a, opcode, SIGNALED, 0, &s);
    let c = r.one(&mut ca);
    assert_eq!(c.wqe_counter(), w);
    assert_eq!(c.qpn(), a.qpn);
    assert_flushes_new_work(&mut r, &mut a, &mut ca);
    // The responder raised the affiliated event of its error.
    let want = if c.error_syndrome() == Ok(CqeSyndrome::RemoteAccess) {
        EventType::WqAccessError
    } else {
        EventType::WqInvalReqError
    };
    let e = r.poll_aeq().expect("an affiliated event");
    assert_eq!(
        e.event(),
        Ok(EqeEvent::Qp {
            kind: want,
            qpn: b.qpn
        })
    );
    c
}

#[test]
fn bad_rkey_or_missing_access_is_a_remote_access_error() {
    let synd = |c: Cqe64| {
        assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::ReqErr));
        c.error_syndrome()
    };
    let ra = Ok(CqeSyndrome::RemoteAccess);
    // Bad rkey (variant), for each remote operation.
    for opcode in [op::WRITE, op::READ, op::CS, op::FA] {
        assert_eq!(
            synd(remote_op(opcode, Access::ALL, true, 1, 0)),
            ra,
            "{opcode:#x}"
        );
    }
    // The MKey lacks the access bit.
    for opcode in [op::WRITE, op::READ, op::CS, op::FA] {
        assert_eq!(
            synd(remote_op(opcode, Access::NONE, true, 0, 0)),
            ra,
            "{opcode:#x}"
        );
    }
    // The responder QP lacks the access flag.
    for opcode in [op::WRITE, op::READ, op::CS, op::FA] {
        assert_eq!(
            synd(remote_op(opcode, Access::ALL, false, 0, 0)),
            ra,
            "{opcode:#x}"
        );
    }
    // Out of the region's bounds.
    assert_eq!(synd(remote_op(op::WRITE, Access::ALL, true, 0, 4090)), ra);
    assert_eq!(synd(remote_op(op::READ, Access::ALL, true, 0, 4090)), ra);
    // A misaligned atomic is an invalid request.
    assert_eq!(
        synd(remote_op(op::FA, Access::ALL, true, 0, 4)),
        Ok(CqeSyndrome::RemoteInvalReq)
    );
}

/// Writes `bytes` as a raw WQE (fixing nothing) and rings; returns the requester's CQE.
fn bad_wqe(st: QpSt, build: impl FnOnce(&mut Rig, &Qp) -> Vec<u8>) -> (Cqe64, u16) {
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = if st == QpSt::Ud {
        let ca = r.cq(6);
        let a = r.qp(QpSt::Ud, &ca, &ca, 6, 6);
        r.init_qp(&a, false, false, false);
        r.rtr_rts(&a, 0, MTU, 0, 0);
        let cb = r.cq(6);
        (a, a, ca, cb)
    } else {
        r.pair(st, MTU)
    };
    let wqe = build(&mut r, &a);
    let index = r.write_raw_wqe(&mut a, &wqe);
    // The doorbell names this QP even when the control segment does not.
    let dw0 = u32::from_be_bytes([wqe[0], wqe[1], wqe[2], wqe[3]]);
    let value = u64::from(dw0) << 32 | u64::from(a.qpn << 8 | u32::from(wqe[7] & 0x3F));
    r.ring_with(&mut a, value);
    let c = r.one(&mut ca);
    assert_flushes_new_work(&mut r, &mut a, &mut ca);
    (c, index)
}

/// A control segment.
fn ctrl(opcode: u8, index: u16, qpn: u32, ds: u8) -> Vec<u8> {
    let mut v = vec![0u8; 16];
    v[1..3].copy_from_slice(&index.to_be_bytes());
    v[3] = opcode;
    v[4..8].copy_from_slice(&(qpn << 8 | u32::from(ds)).to_be_bytes());
    v[11] = SIGNALED;
    v
}

fn pad(mut v: Vec<u8>) -> Vec<u8> {
    v.resize(v.len().div_ceil(64) * 64, 0);
    v
}

#[test]
fn malformed_wqes_are_local_qp_operation_errors() {
    let lqo = CqeSyndrome::LocalQpOp;
    let check = |(c, index): (Cqe64, u16), what: &str| {
        assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::ReqErr), "{what}");
        assert_eq!(c.error_syndrome(), Ok(lqo), "{what}");
        assert_eq!(c.wqe_counter(), index, "{what}");
    };
    check(
        bad_wqe(QpSt::Rc, |_, q| pad(ctrl(op::NOP, 5, q.qpn, 1))),
        "wqe_index",
    );
    check(
        bad_wqe(QpSt::Rc, |_, q| pad(ctrl(op::NOP, 0, q.qpn, 0))),
        "DS 0",
    );
    check(
        bad_wqe(QpSt::Rc, |_, q| pad(ctrl(op::NOP, 0, q.qpn + 1, 1))),
        "QPN",
    );
    check(
        bad_wqe(QpSt::Rc, |_, q| pad(ctrl(0x25, 0, q.qpn, 1))),
        "UMR is not supported",
    );
    check(
        bad_wqe(QpSt::Rc, |_, q| pad(ctrl(0x7F, 0, q.qpn, 1))),
        "unknown opcode",
    );
    check(
        bad_wqe(QpSt::Ud, |_, q| {
            pad(segs(&[
                ctrl(op::READ, 0, q.qpn, 5),
                datagram(q.qpn, 1),
                vec![0; 16],
            ]))
        }),
        "READ on UD",
    );
    check(
        bad_wqe(QpSt::Uc, |_, q| {
            pad(segs(&[ctrl(op::FA, 0, q.qpn, 4), vec![0; 48]]))
        }),
        "atomic on UC",
    );
    check(
        bad_wqe(QpSt::Rc, |_, q| pad(ctrl(op::WRITE, 0, q.qpn, 1))),
        "WRITE without a remote address segment",
    );
    check(
        bad_wqe(QpSt::Rc, |r, q| {
            let m = r.mr(4096, Access::ALL);
            pad(segs(&[
                ctrl(op::FA, 0, q.qpn, 4),
                raddr(m.addr, m.key),
                atomic(1, 0),
                inline(&[0; 8]),
            ]))
        }),
        "atomic result inline",
    );
    check(
        bad_wqe(QpSt::Rc, |_, q| {
            // An inline segment claiming more bytes than the WQE holds.
            let mut v = ctrl(op::SEND, 0, q.qpn, 2);
            v.extend_from_slice(&(0x8000_0000u32 | 100).to_be_bytes());
            pad(v)
        }),
        "inline overrun",
    );
}

#[test]
fn a_wqe_spanning_more_than_was_posted_is_an_error() {
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    // DS 8 (two WQEBBs) but only one WQEBB posted.
    let wqe = pad(ctrl(op::SEND, 0, a.qpn, 8));
    r.write_raw_wqe(&mut a, &wqe[..64]);
    r.ring(&mut a, 0);
    let c = r.one(&mut ca);
    assert_err(&c, true, a.qpn, 0, CqeSyndrome::LocalQpOp);
}

#[test]
fn two_err_flushes_receive_and_send_work() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let dst = r.mr(4096, Access::ALL);
    let r0 = r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    let r1 = r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    r.qp_to_err(&b);
    let c0 = r.one(&mut cb);
    assert_err(&c0, false, b.qpn, r0, CqeSyndrome::WrFlush);
    assert_eq!(c0.vendor_err_synd(), 0xF9);
    assert_err(&r.one(&mut cb), false, b.qpn, r1, CqeSyndrome::WrFlush);
    assert!(r.poll(&mut cb).is_none());
    assert_flushes_new_work(&mut r, &mut b, &mut cb);
    // Posted but never rung WQEs are flushed by 2ERR too.
    let w0 = r.write_wqe(&mut a, op::NOP, 0, 0, &[]);
    let w1 = r.write_wqe(&mut a, op::NOP, 0, 0, &[]);
    r.h.write_mem(a.dbr + 4, &u32::from(a.sq_pi).to_be_bytes());
    r.qp_to_err(&a);
    assert_err(&r.one(&mut ca), true, a.qpn, w0, CqeSyndrome::WrFlush);
    assert_err(&r.one(&mut ca), true, a.qpn, w1, CqeSyndrome::WrFlush);
}

#[test]
fn rnr_with_no_retries_fails_and_with_retries_waits_for_a_receive() {
    // rnr_retry 0: RNR_RETRY_EXC on the first RNR NAK.
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 8, src.key));
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::RnrRetryExc);

    // rnr_retry 7 (infinite): the SEND waits; a receive posted later gets it after the RNR
    // timer (code 1: 10 us) expires.
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair_with(QpSt::Rc, MTU, 7, 7);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    r.fill(&src, 0, b"late");
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 4, src.key));
    assert!(r.poll(&mut ca).is_none());
    r.h.dev.advance(Duration::from_micros(20));
    r.h.dev.step();
    assert!(r.poll(&mut ca).is_none(), "still no receive WQE");
    let rc = r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    r.h.dev.advance(Duration::from_micros(20));
    r.h.dev.step();
    let c = r.one(&mut ca);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::Req));
    assert_eq!(c.wqe_counter(), w);
    assert_eq!(r.one(&mut cb).wqe_counter(), rc);
    assert_eq!(r.read(&dst, 0, 4), b"late");
}

#[test]
fn ud_receive_too_small_is_a_local_length_error() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.ud_pair(MTU, 0);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    // 40 bytes of GRH area + 100 of payload do not fit 120 bytes.
    let rc = r.post_recv(&mut b, &[(dst.addr, 120, dst.key)]);
    r.post(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[datagram(b.qpn, rig::QKEY), data(src.addr, 100, src.key)]),
    );
    r.one(&mut ca);
    assert_err(&r.one(&mut cb), false, b.qpn, rc, CqeSyndrome::LocalLength);
}

#[test]
fn rnr_on_a_multi_packet_send_resends_the_whole_message() {
    for rnr_retry in [0u8, 7] {
        let mut r = Rig::new();
        let (mut a, mut b, mut ca, mut cb) = r.pair_with(QpSt::Rc, MTU, 3, rnr_retry);
        let src = r.mr(4096, Access::ALL);
        let dst = r.mr(4096, Access::ALL);
        let msg: Vec<u8> = (0..700u32).map(|i| (i * 3) as u8).collect();
        r.fill(&src, 0, &msg);
        let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 700, src.key));
        if rnr_retry == 0 {
            assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::RnrRetryExc);
            continue;
        }
        assert!(r.poll(&mut ca).is_none());
        let rc = r.post_recv(&mut b, &[(dst.addr, 1024, dst.key)]);
        r.h.dev.advance(Duration::from_micros(20));
        r.h.dev.step();
        let c = r.one(&mut ca);
        assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
        let c = r.one(&mut cb);
        assert_eq!((c.wqe_counter(), c.byte_cnt()), (rc, 700));
        assert_eq!(r.read(&dst, 0, 700), msg);
    }
}

#[test]
fn the_first_packet_in_rtr_raises_comm_est() {
    let mut r = Rig::new();
    let mut ca = r.cq(6);
    let mut cb = r.cq(6);
    let mut a = r.qp(QpSt::Rc, &ca, &ca, 6, 6);
    let mut b = r.qp(QpSt::Rc, &cb, &cb, 6, 6);
    r.init_qp(&a, true, true, true);
    r.init_qp(&b, true, true, true);
    r.rtr_rts(&a, b.qpn, MTU, 9, 0);
    // b only reaches RTR: it receives (and ACKs) but does not send.
    r.rtr_to(&b, a.qpn, MTU, 9, rig::gid(), rig::MAC);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    for _ in 0..2 {
        r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
        r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 8, src.key));
        assert_eq!(r.one(&mut ca).cqe_opcode(), Ok(CqeOpcode::Req));
        assert_eq!(r.one(&mut cb).cqe_opcode(), Ok(CqeOpcode::RespSend));
    }
    let e = r.poll_aeq().expect("COMM_EST");
    assert_eq!(
        e.event(),
        Ok(EqeEvent::Qp {
            kind: EventType::CommEst,
            qpn: b.qpn
        })
    );
    assert!(r.poll_aeq().is_none(), "once");
}

/// QUERY_QP's state.
fn qp_state(r: &mut Rig, qpn: u32) -> QpState {
    let mut q = cmd::QueryQpIn::new_cmd();
    q.set_qpn(qpn);
    let qpc = *r.h.ok(&q, &[]).view::<cmd::QueryQpOut>().qpc();
    QpState::try_from(qpc.state()).expect("a QP state")
}

/// A UD send beyond the port MTU (1024 bytes on a 1500-byte Ethernet MTU) is a local length
/// error that moves the QP to SQE, not ERR (IBTA: SQE is the error state of a UD / UC send
/// queue): the send queue is flushed, the receive queue keeps its WQEs and receives, and
/// SQERR2RTS resumes sending.
#[test]
fn ud_send_beyond_the_mtu_is_a_send_queue_error() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.ud_pair(MTU, 0);
    let src = r.mr(4096, Access::ALL);
    let rbuf = r.mr(4096, Access::ALL);
    r.fill(&src, 0, &[0x3C; 2048]);
    let ra = r.post_recv(&mut a, &[(rbuf.addr, 2048, rbuf.key)]);
    let to_b = datagram(b.qpn, rig::QKEY);
    let w0 = r.write_wqe(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[to_b.clone(), data(src.addr, 1025, src.key)]),
    );
    let w1 = r.write_wqe(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[to_b.clone(), data(src.addr, 8, src.key)]),
    );
    r.ring(&mut a, w1);
    assert_err(&r.one(&mut ca), true, a.qpn, w0, CqeSyndrome::LocalLength);
    assert_err(&r.one(&mut ca), true, a.qpn, w1, CqeSyndrome::WrFlush);
    assert!(r.poll(&mut ca).is_none(), "the receive WQE was flushed");
    assert_eq!(qp_state(&mut r, a.qpn), QpState::Sqer);
    assert!(r.poll(&mut cb).is_none(), "nothing was sent");
    // Sends posted in SQE are flushed.
    assert_flushes_new_work(&mut r, &mut a, &mut ca);
    assert_eq!(qp_state(&mut r, a.qpn), QpState::Sqer);
    // The receive side works on: a datagram to A lands in the receive posted before.
    let wb = r.post(
        &mut b,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[datagram(a.qpn, rig::QKEY), data(src.addr, 16, src.key)]),
    );
    assert_eq!(r.one(&mut cb).wqe_counter(), wb);
    let c = r.one(&mut ca);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSend), "{c:?}");
    assert_eq!((c.wqe_counter(), c.byte_cnt()), (ra, 40 + 16));
    assert_eq!(r.read(&rbuf, 40, 16), [0x3C; 16]);
    // SQERR2RTS: the send queue runs again.
    let mut i = cmd::Sqerr2RtsQpIn::new_cmd();
    i.set_qpn(a.qpn);
    r.h.ok(&i, &[]);
    assert_eq!(qp_state(&mut r, a.qpn), QpState::Rts);
    let rb = r.post_recv(&mut b, &[(rbuf.addr + 2048, 2048, rbuf.key)]);
    let w = r.post(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[to_b, data(src.addr, 8, src.key)]),
    );
    let c = r.one(&mut ca);
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
    let c = r.one(&mut cb);
    assert_eq!(
        (c.cqe_opcode(), c.wqe_counter()),
        (Ok(CqeOpcode::RespSend), rb)
    );
}
