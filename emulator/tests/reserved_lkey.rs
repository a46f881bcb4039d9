//! The reserved lkey (QUERY_SPECIAL_CONTEXTS' `resd_lkey`) addresses bus addresses directly
//! in any PD, so the device honours it only on a QP created with `rlky` (and, for receives
//! taken from an SRQ, an SRQ created with `rlky`). Everywhere else it is a local protection
//! error: on the send gather and the READ / atomic result buffers (requester), on the receive
//! scatter (responder, RQ and SRQ). As an rkey it is always refused. The memory it would
//! have reached is never touched.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use rig::{Access, Cq, Qp, Rig, SIGNALED, assert_err, atomic, data, op, raddr, segs};
use rnic_hw_regs::cmd::{
    self, QueryQpIn, QueryQpOut, QuerySpecialContextsIn, QuerySpecialContextsOut, QuerySrqIn,
    QuerySrqOut,
};
use rnic_hw_regs::cqe::{Cqe64, CqeOpcode, CqeSyndrome};
use rnic_hw_regs::ctx::{QpSt, Qpc};

const MTU: u8 = 1;
/// What the victim memory holds before every attempt.
const SECRET: &[u8; 16] = b"victim's secret!";

fn resd_lkey(r: &mut Rig) -> u32 {
    r.h.ok(&QuerySpecialContextsIn::new_cmd(), &[])
        .view::<QuerySpecialContextsOut>()
        .resd_lkey()
}

fn query_qp(r: &mut Rig, qpn: u32) -> Qpc {
    let mut q = QueryQpIn::new_cmd();
    q.set_qpn(qpn);
    *r.h.ok(&q, &[]).view::<QueryQpOut>().qpc()
}

fn srq_rlky(r: &mut Rig, srqn: u32) -> bool {
    let mut q = QuerySrqIn::new_cmd();
    q.set_srqn(srqn);
    r.h.ok(&q, &[])
        .view::<QuerySrqOut>()
        .srq_context_entry()
        .rlky()
}

/// Bus memory outside every MKey, holding [`SECRET`]: what the reserved lkey would reach.
fn victim(r: &mut Rig) -> u64 {
    let iova = r.h.alloc(4096);
    r.h.write_mem(iova, SECRET);
    iova
}

/// An RC pair on fresh CQs whose QPs are created with `rlky` `a_rlky` and `b_rlky`.
fn pair(r: &mut Rig, a_rlky: bool, b_rlky: bool) -> (Qp, Qp, Cq, Cq) {
    let ca = r.cq(6);
    let cb = r.cq(6);
    r.rlky = a_rlky;
    let a = r.qp(QpSt::Rc, &ca, &ca, 6, 6);
    r.rlky = b_rlky;
    let b = r.qp(QpSt::Rc, &cb, &cb, 6, 6);
    r.rlky = false;
    for q in [&a, &b] {
        r.init_qp(q, true, true, true);
    }
    r.rtr_rts(&a, b.qpn, MTU, 0x10, 0);
    r.rtr_rts(&b, a.qpn, MTU, 0x10, 0);
    (a, b, ca, cb)
}

#[test]
fn rlky_is_kept_from_create_qp_and_create_srq_only() {
    let mut r = Rig::new();
    let (a, b, _ca, _cb) = pair(&mut r, true, false);
    assert!(query_qp(&mut r, a.qpn).rlky());
    assert!(!query_qp(&mut r, b.qpn).rlky());
    // A transition's context cannot grant it, and a reset keeps what CREATE_QP set.
    for q in [&a, &b] {
        let mut i = cmd::Qp2ErrIn::new_cmd();
        i.set_qpn(q.qpn);
        r.h.ok(&i, &[]);
        let mut i = cmd::Qp2RstIn::new_cmd();
        i.set_qpn(q.qpn);
        r.h.ok(&i, &[]);
        let mut i = cmd::Rst2InitQpIn::new_cmd();
        i.set_qpn(q.qpn);
        i.qpc_mut().set_rlky(true);
        i.qpc_mut().primary_address_path_mut().set_vhca_port_num(1);
        r.h.ok(&i, &[]);
    }
    assert!(query_qp(&mut r, a.qpn).rlky());
    assert!(
        !query_qp(&mut r, b.qpn).rlky(),
        "RST2INIT does not set rlky"
    );
    // SRQs keep theirs.
    r.rlky = true;
    let with = r.srq(1, &[0, 1], 0);
    r.rlky = false;
    let without = r.srq(1, &[0, 1], 0);
    assert!(srq_rlky(&mut r, with.srqn));
    assert!(!srq_rlky(&mut r, without.srqn));
}

#[test]
fn send_gather_needs_rlky() {
    let mut r = Rig::new();
    let resd = resd_lkey(&mut r);
    let secret = victim(&mut r);
    let (mut a, mut b, mut ca, mut cb) = pair(&mut r, false, false);
    let dst = r.mr(4096, Access::ALL);
    r.fill(&dst, 0, &[0xEE; 64]);
    r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(secret, 16, resd));
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::LocalProt);
    assert!(r.poll(&mut cb).is_none(), "nothing was sent");
    assert_eq!(r.read(&dst, 0, 64), [0xEE; 64]);

    // The same WQE on a QP created with rlky gathers the bytes.
    let (mut a, mut b, mut ca, mut cb) = pair(&mut r, true, false);
    r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(secret, 16, resd));
    let c = r.one(&mut ca);
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
    assert_eq!(r.one(&mut cb).byte_cnt(), 16);
    assert_eq!(r.read(&dst, 0, 16), SECRET);
}

#[test]
fn rq_scatter_needs_rlky() {
    let mut r = Rig::new();
    let resd = resd_lkey(&mut r);
    let secret = victim(&mut r);
    let src = r.mr(4096, Access::ALL);
    r.fill(&src, 0, &[0xAA; 16]);
    // The sender may use it; the receiver may not: the receiver's rlky decides.
    let (mut a, mut b, mut ca, mut cb) = pair(&mut r, true, false);
    let r0 = r.post_recv(&mut b, &[(secret, 16, resd)]);
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 16, src.key));
    assert_err(&r.one(&mut cb), false, b.qpn, r0, CqeSyndrome::LocalProt);
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::RemoteOp);
    assert_eq!(r.h.read_mem(secret, 16), SECRET, "the victim is untouched");

    // A receiver created with rlky scatters there.
    let (mut a, mut b, mut ca, mut cb) = pair(&mut r, false, true);
    r.post_recv(&mut b, &[(secret, 16, resd)]);
    r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 16, src.key));
    assert_eq!(r.one(&mut ca).cqe_opcode(), Ok(CqeOpcode::Req));
    assert_eq!(r.one(&mut cb).cqe_opcode(), Ok(CqeOpcode::RespSend));
    assert_eq!(r.h.read_mem(secret, 16), [0xAA; 16]);
}

/// A QP created with `qp_rlky` receiving from an SRQ created with `srq_rlky` into `secret`
/// under the reserved lkey; returns the receive CQE and the requester's.
fn srq_receive(qp_rlky: bool, srq_rlky: bool) -> (Cqe64, Cqe64, Vec<u8>) {
    let mut r = Rig::new();
    let resd = resd_lkey(&mut r);
    let secret = victim(&mut r);
    let mut ca = r.cq(6);
    let mut cb = r.cq(6);
    r.rlky = srq_rlky;
    let mut srq = r.srq(1, &[0, 1], 0);
    r.rlky = qp_rlky;
    let b = r.qp_on_srq(&cb, &cb, &srq);
    r.rlky = false;
    let mut a = r.qp(QpSt::Rc, &ca, &ca, 6, 6);
    r.init_qp(&a, true, true, true);
    r.init_qp(&b, true, true, true);
    r.rtr_rts(&a, b.qpn, MTU, 5, 0);
    r.rtr_rts(&b, a.qpn, MTU, 5, 0);
    let src = r.mr(4096, Access::ALL);
    r.fill(&src, 0, &[0xBB; 16]);
    r.post_srq(&mut srq, secret, 16, resd);
    r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 16, src.key));
    let req = r.one(&mut ca);
    let resp = r.one(&mut cb);
    (resp, req, r.h.read_mem(secret, 16))
}

#[test]
fn srq_scatter_needs_the_srqs_rlky() {
    // The SRQ's rlky governs its WQEs, whatever the QP's.
    let (resp, req, mem) = srq_receive(true, false);
    assert_eq!(resp.cqe_opcode(), Ok(CqeOpcode::RespErr), "{resp:?}");
    assert_eq!(resp.error_syndrome(), Ok(CqeSyndrome::LocalProt));
    assert_eq!(req.error_syndrome(), Ok(CqeSyndrome::RemoteOp));
    assert_eq!(mem, SECRET, "the victim is untouched");
    let (resp, req, mem) = srq_receive(false, true);
    assert_eq!(resp.cqe_opcode(), Ok(CqeOpcode::RespSend), "{resp:?}");
    assert_eq!(req.cqe_opcode(), Ok(CqeOpcode::Req));
    assert_eq!(mem, [0xBB; 16]);
}

#[test]
fn read_and_atomic_result_buffers_need_rlky() {
    let mut r = Rig::new();
    let resd = resd_lkey(&mut r);
    let secret = victim(&mut r);
    let remote = r.mr(4096, Access::ALL);
    r.fill(&remote, 0, &[0xCC; 64]);
    let read = |at: u64| segs(&[raddr(remote.addr, remote.key), data(at, 16, resd)]);
    let fetch_add = |at: u64| {
        segs(&[
            raddr(remote.addr + 32, remote.key),
            atomic(1, 0),
            data(at, 8, resd),
        ])
    };

    let (mut a, _b, mut ca, _cb) = pair(&mut r, false, false);
    let w = r.post(&mut a, op::READ, SIGNALED, 0, &read(secret));
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::LocalProt);
    let (mut a, _b, mut ca, _cb) = pair(&mut r, false, false);
    let w = r.post(&mut a, op::FA, SIGNALED, 0, &fetch_add(secret));
    assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::LocalProt);
    assert_eq!(r.h.read_mem(secret, 16), SECRET, "the victim is untouched");
    assert_eq!(r.read(&remote, 32, 8), [0xCC; 8], "the atomic did not run");

    // With rlky both land in bus memory.
    let (mut a, _b, mut ca, _cb) = pair(&mut r, true, false);
    r.post(&mut a, op::READ, SIGNALED, 0, &read(secret));
    assert_eq!(r.one(&mut ca).cqe_opcode(), Ok(CqeOpcode::Req));
    assert_eq!(r.h.read_mem(secret, 16), [0xCC; 16]);
    r.post(&mut a, op::FA, SIGNALED, 0, &fetch_add(secret + 16));
    assert_eq!(r.one(&mut ca).cqe_opcode(), Ok(CqeOpcode::Req));
    assert_eq!(r.h.read_mem(secret + 16, 8), [0xCC; 8]);
}

#[test]
fn with_rlky_it_is_still_never_an_rkey() {
    let mut r = Rig::new();
    let resd = resd_lkey(&mut r);
    let secret = victim(&mut r);
    let local = r.mr(4096, Access::ALL);
    for (opcode, extra) in [(op::READ, vec![]), (op::CS, atomic(1, 0))] {
        // A fresh pair each time: the refusal puts the requester's QP in ERR.
        let (mut a, _b, mut ca, _cb) = pair(&mut r, true, true);
        let wqe = segs(&[raddr(secret, resd), extra, data(local.addr, 8, local.key)]);
        let w = r.post(&mut a, opcode, SIGNALED, 0, &wqe);
        assert_err(&r.one(&mut ca), true, a.qpn, w, CqeSyndrome::RemoteAccess);
    }
    assert_eq!(r.h.read_mem(secret, 16), SECRET);
}
