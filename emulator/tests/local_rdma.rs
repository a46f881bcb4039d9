//! Local RDMA semantics: two QPs of one device talk through the port's loopback with real
//! RoCE v2 packets. The host side is played with hand-built commands, WQEs, doorbells and
//! CQE polling (see `rig`); every test checks the bytes in memory and the CQE fields.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use rig::{Access, Rig, SIGNALED, atomic, data, data_for, datagram, inline, op, raddr, segs};
use rnic_hw_regs::cqe::{Cqe64, CqeOpcode};
use rnic_hw_regs::ctx::QpSt;

/// Path MTU code 1: 256-byte packets, so multi-packet messages stay small.
const MTU: u8 = 1;
const MTU_BYTES: usize = 256;
/// The sizes every operation is checked at.
const SIZES: [usize; 6] = [
    0,
    1,
    MTU_BYTES - 1,
    MTU_BYTES,
    MTU_BYTES + 1,
    3 * MTU_BYTES + 17,
];

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[track_caller]
fn assert_req(c: &Cqe64, qpn: u32, wqe_index: u16, opcode: u8) {
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::Req), "requester CQE: {c:?}");
    assert_eq!(c.qpn(), qpn);
    assert_eq!(c.wqe_counter(), wqe_index);
    assert_eq!(c.send_opcode(), opcode);
}

/// Posts one signaled WRITE or READ (`opcode`) on `a` against `remote_addr` / `rkey`, with
/// the local data segment(s) `local`; returns its wqe_index.
fn rdma(
    r: &mut Rig,
    a: &mut rig::Qp,
    opcode: u8,
    remote_addr: u64,
    rkey: u32,
    local: &[u8],
) -> u16 {
    r.post(
        a,
        opcode,
        SIGNALED,
        0,
        &segs(&[raddr(remote_addr, rkey), local.to_vec()]),
    )
}

#[test]
fn send_and_send_imm_at_every_size() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    for opcode in [op::SEND, op::SEND_IMM] {
        for (n, &len) in SIZES.iter().enumerate() {
            let msg = pattern(len, n as u8 + opcode);
            r.fill(&src, 0, &msg);
            r.fill(&dst, 0, &vec![0xEE; 2048]);
            let rc = r.post_recv(&mut b, &[(dst.addr, 2048, dst.key)]);
            let sg = data_for(src.addr, len, src.key);
            let imm = 0x5100_0000 | len as u32;
            let wi = r.post(&mut a, opcode, SIGNALED, imm, &sg);
            let c = r.one(&mut ca);
            assert_req(&c, a.qpn, wi, opcode);
            let c = r.one(&mut cb);
            if opcode == op::SEND_IMM {
                assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSendImm), "size {len}");
                assert_eq!(c.imm_inval_pkey(), imm);
            } else {
                assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSend), "size {len}");
            }
            assert_eq!(c.byte_cnt() as usize, len);
            assert_eq!(c.qpn(), b.qpn);
            assert_eq!(c.wqe_counter(), rc);
            assert_eq!(r.read(&dst, 0, len), msg, "payload of size {len}");
            assert_eq!(r.read(&dst, len, 1), [0xEE], "nothing past the message");
            assert!(r.poll(&mut ca).is_none() && r.poll(&mut cb).is_none());
        }
    }
    let c = r.counters();
    assert_eq!(
        c.frames_tx, c.frames_rx,
        "every frame looped back and was accepted"
    );
    assert_eq!(c.rx_dropped, 0);
}

#[test]
fn send_scatters_across_sges_and_gathers_inline() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(8192, Access::ALL);
    let msg = pattern(600, 3);
    r.fill(&src, 100, &msg[12..]);
    // Three receive SGEs: 100 + 300 + 1000 bytes, the last one in the second page.
    let rc = r.post_recv(
        &mut b,
        &[
            (dst.addr, 100, dst.key),
            (dst.addr + 1000, 300, dst.key),
            (dst.addr + 4000, 1000, dst.key),
        ],
    );
    let wi = r.post(
        &mut a,
        op::SEND_IMM,
        SIGNALED | 0x02,
        0xA1B2_C3D4,
        &segs(&[inline(&msg[..12]), data(src.addr + 100, 588, src.key)]),
    );
    assert_req(&r.one(&mut ca), a.qpn, wi, op::SEND_IMM);
    let c = r.one(&mut cb);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSendImm));
    assert_eq!(c.imm_inval_pkey(), 0xA1B2_C3D4);
    assert!(c.se(), "solicited");
    assert_eq!(c.byte_cnt(), 600);
    assert_eq!(c.wqe_counter(), rc);
    assert_eq!(r.read(&dst, 0, 100), &msg[..100]);
    assert_eq!(r.read(&dst, 1000, 300), &msg[100..400]);
    assert_eq!(r.read(&dst, 4000, 200), &msg[400..]);
    assert_eq!(r.read(&dst, 4200, 4), [0; 4]);
}

#[test]
fn send_with_invalidate_reports_the_rkey() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    let victim = r.mr(4096, Access::ALL);
    r.fill(&src, 0, b"inv");
    // The victim key works before.
    let w = rdma(
        &mut r,
        &mut a,
        op::WRITE,
        victim.addr,
        victim.key,
        &data(src.addr, 3, src.key),
    );
    assert_req(&r.one(&mut ca), a.qpn, w, op::WRITE);
    r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    let wi = r.post(
        &mut a,
        op::SEND_INVAL,
        SIGNALED,
        victim.key,
        &data(src.addr, 3, src.key),
    );
    assert_req(&r.one(&mut ca), a.qpn, wi, op::SEND_INVAL);
    let c = r.one(&mut cb);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSendInv));
    assert_eq!(c.imm_inval_pkey(), victim.key);
    assert_eq!(r.read(&dst, 0, 3), b"inv");
    // Invalidated: a WRITE with it is a remote access error now.
    let w = rdma(
        &mut r,
        &mut a,
        op::WRITE,
        victim.addr,
        victim.key,
        &data(src.addr, 3, src.key),
    );
    let c = r.one(&mut ca);
    assert_eq!(c.wqe_counter(), w);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::ReqErr));
    assert_eq!(
        c.syndrome(),
        rnic_hw_regs::cqe::CqeSyndrome::RemoteAccess.raw()
    );
}

#[test]
fn rdma_write_at_every_size() {
    let mut r = Rig::new();
    let (mut a, b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    for (n, &len) in SIZES.iter().enumerate() {
        let msg = pattern(len, 0x40 + n as u8);
        r.fill(&src, 0, &msg);
        r.fill(&dst, 0, &vec![0xEE; 2048]);
        let sg = data_for(src.addr, len, src.key);
        let wi = rdma(&mut r, &mut a, op::WRITE, dst.addr + 8, dst.key, &sg);
        let c = r.one(&mut ca);
        assert_req(&c, a.qpn, wi, op::WRITE);
        assert_eq!(r.read(&dst, 8, len), msg, "size {len}");
        assert_eq!(r.read(&dst, 0, 8), [0xEE; 8]);
        assert_eq!(r.read(&dst, 8 + len, 1), [0xEE]);
        assert!(r.poll(&mut cb).is_none(), "a WRITE consumes no receive WQE");
    }
    let _ = b;
}

#[test]
fn rdma_write_with_immediate_consumes_a_receive_wqe() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    for &len in &SIZES {
        let msg = pattern(len, 9);
        r.fill(&src, 0, &msg);
        let rc = r.post_recv(&mut b, &[]);
        let sg = data_for(src.addr, len, src.key);
        let wi = r.post(
            &mut a,
            op::WRITE_IMM,
            SIGNALED,
            0xCAFE_0000 | len as u32,
            &segs(&[raddr(dst.addr, dst.key), sg]),
        );
        assert_req(&r.one(&mut ca), a.qpn, wi, op::WRITE_IMM);
        let c = r.one(&mut cb);
        assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespWrImm));
        assert_eq!(c.byte_cnt() as usize, len);
        assert_eq!(c.imm_inval_pkey(), 0xCAFE_0000 | len as u32);
        assert_eq!(c.wqe_counter(), rc);
        assert_eq!(r.read(&dst, 0, len), msg);
    }
}

#[test]
fn rdma_read_at_every_size() {
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let local = r.mr(4096, Access::ALL);
    let remote = r.mr(4096, Access::ALL);
    for (n, &len) in SIZES.iter().enumerate() {
        let msg = pattern(len, 0x80 + n as u8);
        r.fill(&remote, 16, &msg);
        r.fill(&local, 0, &vec![0xEE; 2048]);
        let sg = data_for(local.addr, len, local.key);
        let wi = rdma(&mut r, &mut a, op::READ, remote.addr + 16, remote.key, &sg);
        let c = r.one(&mut ca);
        assert_req(&c, a.qpn, wi, op::READ);
        assert_eq!(c.byte_cnt() as usize, len);
        assert_eq!(r.read(&local, 0, len), msg, "size {len}");
        assert_eq!(r.read(&local, len, 1), [0xEE]);
    }
}

/// Posts one signaled atomic of `opcode` on `a` at `remote + 64`, its result into `local +
/// local_off`, and checks the requester CQE; returns that CQE.
#[allow(clippy::too_many_arguments)]
fn post_atomic(
    r: &mut Rig,
    a: &mut rig::Qp,
    ca: &mut rig::Cq,
    opcode: u8,
    remote: &rig::Mr,
    local: &rig::Mr,
    local_off: u64,
    swap_add: u64,
    compare: u64,
) -> Cqe64 {
    let wi = r.post(
        a,
        opcode,
        SIGNALED,
        0,
        &segs(&[
            raddr(remote.addr + 64, remote.key),
            atomic(swap_add, compare),
            data(local.addr + local_off, 8, local.key),
        ]),
    );
    let c = r.one(ca);
    assert_req(&c, a.qpn, wi, opcode);
    c
}

/// CMP_SWAP and FETCH_ADD with 8-byte values in memory as `enc` encodes them.
fn atomics_with(mut r: Rig, enc: fn(u64) -> [u8; 8]) {
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let local = r.mr(4096, Access::ALL);
    let remote = r.mr(4096, Access::ALL);
    r.fill(&remote, 64, &enc(100));
    // FETCH_ADD 5: returns 100, memory 105.
    let c = post_atomic(&mut r, &mut a, &mut ca, op::FA, &remote, &local, 0, 5, 0);
    assert_eq!(c.byte_cnt(), 8);
    assert_eq!(r.read(&local, 0, 8), enc(100));
    assert_eq!(r.read(&remote, 64, 8), enc(105));
    // CMP_SWAP that fails (compare 7 != 105): memory unchanged, original returned.
    post_atomic(&mut r, &mut a, &mut ca, op::CS, &remote, &local, 8, 999, 7);
    assert_eq!(r.read(&local, 8, 8), enc(105));
    assert_eq!(r.read(&remote, 64, 8), enc(105));
    // CMP_SWAP that succeeds.
    post_atomic(
        &mut r,
        &mut a,
        &mut ca,
        op::CS,
        &remote,
        &local,
        16,
        0xDEAD_BEEF,
        105,
    );
    assert_eq!(r.read(&local, 16, 8), enc(105));
    assert_eq!(r.read(&remote, 64, 8), enc(0xDEAD_BEEF));
}

#[test]
fn atomics_return_the_original_value_big_endian_by_default() {
    atomics_with(Rig::new(), u64::to_be_bytes);
}

#[test]
fn atomics_in_host_order_with_endianness_mode_1() {
    atomics_with(Rig::with_atomic_mode(1), u64::to_le_bytes);
}

#[test]
fn unsignaled_wqes_complete_silently_and_the_next_signaled_one_reports_its_index() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    for _ in 0..3 {
        r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    }
    let w0 = r.write_wqe(&mut a, op::SEND, 0, 0, &data(src.addr, 4, src.key));
    let w1 = r.write_wqe(&mut a, op::SEND, 0, 0, &data(src.addr, 4, src.key));
    let w2 = r.write_wqe(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 4, src.key));
    assert_eq!((w0, w1, w2), (0, 1, 2));
    // One doorbell for the three WQEs.
    r.ring(&mut a, w2);
    assert_req(&r.one(&mut ca), a.qpn, w2, op::SEND);
    assert!(r.poll(&mut ca).is_none());
    for expect in 0..3 {
        assert_eq!(r.one(&mut cb).wqe_counter(), expect);
    }
}

#[test]
fn multi_wqebb_wqes_wrap_around_the_ring() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    // 60 small WQEs, then 40-byte-inline WQEs of 2 WQEBBs that straddle the ring's end.
    for _ in 0..63 {
        r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
        let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 1, src.key));
        assert_req(&r.one(&mut ca), a.qpn, w, op::SEND);
        r.one(&mut cb);
    }
    let msg = pattern(60, 1);
    // DS = 1 + 4 (64 bytes of inline) = 5: two WQEBBs, the first at slot 63.
    r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &inline(&msg));
    assert_eq!(w, 63);
    assert_req(&r.one(&mut ca), a.qpn, 63, op::SEND);
    assert_eq!(r.one(&mut cb).byte_cnt(), 60);
    assert_eq!(r.read(&dst, 0, 60), msg);
}

#[test]
fn ud_send_recv_with_the_grh_area() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.ud_pair(MTU, 0x100);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    let msg = pattern(300, 5);
    r.fill(&src, 0, &msg);
    let rc = r.post_recv(&mut b, &[(dst.addr, 2048, dst.key)]);
    let wi = r.post(
        &mut a,
        op::SEND_IMM,
        SIGNALED,
        0x0102_0304,
        &segs(&[datagram(b.qpn, rig::QKEY), data(src.addr, 300, src.key)]),
    );
    assert_req(&r.one(&mut ca), a.qpn, wi, op::SEND_IMM);
    let c = r.one(&mut cb);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSendImm));
    assert_eq!(c.byte_cnt(), 340, "40-byte GRH area + payload");
    assert_eq!(c.rqpn(), a.qpn, "source QPN");
    assert_eq!(c.grh(), 1, "GRH in the receive buffer");
    assert_eq!(c.imm_inval_pkey(), 0x0102_0304);
    assert_eq!(c.wqe_counter(), rc);
    let grh = r.read(&dst, 0, 40);
    assert_eq!(&grh[..20], &[0; 20], "bytes 0-19 zero for IPv4");
    assert_eq!(grh[20], 0x45, "IPv4 header at offset 20");
    assert_eq!(grh[29], 17, "protocol UDP");
    assert_eq!(&grh[32..36], &rig::IP, "source address");
    assert_eq!(&grh[36..40], &rig::IP, "destination address");
    assert_eq!(r.read(&dst, 40, 300), msg);

    // A wrong Q_Key is dropped silently: no CQE, the receive WQE stays posted.
    let dropped = r.counters().rx_dropped;
    let wi = r.post(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[datagram(b.qpn, 0x2222), data(src.addr, 8, src.key)]),
    );
    assert_req(&r.one(&mut ca), a.qpn, wi, op::SEND);
    assert!(r.poll(&mut cb).is_none());
    assert_eq!(r.counters().rx_dropped, dropped + 1);
    r.post_recv(&mut b, &[(dst.addr, 2048, dst.key)]);
    // A payload larger than the UD MTU (the port's: 1024 for a 1500-byte vport MTU) fails
    // locally with a local length error.
    let big = r.mr(4096, Access::ALL);
    let wi = r.post(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &segs(&[datagram(b.qpn, rig::QKEY), data(big.addr, 2000, big.key)]),
    );
    let c = r.one(&mut ca);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::ReqErr));
    assert_eq!(c.syndrome(), 0x01);
    assert_eq!(c.wqe_counter(), wi);
}

#[test]
fn uc_send_and_write_need_no_acks() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Uc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    let msg = pattern(3 * MTU_BYTES + 17, 2);
    r.fill(&src, 0, &msg);
    r.post_recv(&mut b, &[(dst.addr, 2048, dst.key)]);
    let tx = r.counters().frames_tx;
    let wi = r.post(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &data(src.addr, msg.len() as u32, src.key),
    );
    assert_req(&r.one(&mut ca), a.qpn, wi, op::SEND);
    assert_eq!(r.counters().frames_tx - tx, 4, "four packets, no ACK");
    assert_eq!(r.one(&mut cb).byte_cnt() as usize, msg.len());
    assert_eq!(r.read(&dst, 0, msg.len()), msg);
    let wi = rdma(
        &mut r,
        &mut a,
        op::WRITE,
        dst.addr + 2048,
        dst.key,
        &data(src.addr, 300, src.key),
    );
    assert_req(&r.one(&mut ca), a.qpn, wi, op::WRITE);
    assert_eq!(r.read(&dst, 2048, 300), &msg[..300]);
}

#[test]
fn fenced_wqes_wait_for_earlier_reads() {
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let local = r.mr(4096, Access::ALL);
    let remote = r.mr(4096, Access::ALL);
    r.fill(&remote, 0, &pattern(64, 7));
    let w0 = r.write_wqe(
        &mut a,
        op::READ,
        SIGNALED,
        0,
        &segs(&[
            raddr(remote.addr, remote.key),
            data(local.addr, 64, local.key),
        ]),
    );
    // Fenced WRITE of what the READ brings in: it must see the READ's data.
    let w1 = r.write_wqe(
        &mut a,
        op::WRITE,
        SIGNALED | 0x80,
        0,
        &segs(&[
            raddr(remote.addr + 1024, remote.key),
            data(local.addr, 64, local.key),
        ]),
    );
    r.ring(&mut a, w1);
    assert_req(&r.one(&mut ca), a.qpn, w0, op::READ);
    assert_req(&r.one(&mut ca), a.qpn, w1, op::WRITE);
    assert_eq!(r.read(&remote, 1024, 64), pattern(64, 7));
}

#[test]
fn srq_wqes_are_consumed_along_their_next_list_and_the_limit_event_fires() {
    use rnic_hw_regs::eqe::{EqeEvent, EventType};
    let mut r = Rig::new();
    let mut ca = r.cq(6);
    let mut cb = r.cq(6);
    // The host's list: 0 -> 2 -> 1 -> 3 -> 0; limit 2.
    let mut srq = r.srq(2, &[0, 2, 1, 3], 2);
    let mut a = r.qp(QpSt::Rc, &ca, &ca, 6, 6);
    let b = r.qp_on_srq(&cb, &cb, &srq);
    r.init_qp(&a, true, true, true);
    r.init_qp(&b, true, true, true);
    r.rtr_rts(&a, b.qpn, MTU, 5, 0);
    r.rtr_rts(&b, a.qpn, MTU, 5, 0);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    let mut posted = Vec::new();
    for k in 0..3u64 {
        posted.push(r.post_srq(&mut srq, dst.addr + 512 * k, 512, dst.key));
    }
    assert_eq!(posted, [0, 2, 1]);
    for k in 0..3u8 {
        let msg = pattern(100, k);
        r.fill(&src, 0, &msg);
        let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 100, src.key));
        assert_req(&r.one(&mut ca), a.qpn, w, op::SEND);
        let c = r.one(&mut cb);
        assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSend));
        assert_eq!(c.wqe_counter(), posted[usize::from(k)], "SRQ WQE index");
        assert_eq!(
            c.srqn_uidx(),
            rig::SRQ_QP_UIDX,
            "the QP's user index (cqe_version 1)"
        );
        assert_eq!(c.qpn(), b.qpn);
        assert_eq!(r.read(&dst, 512 * usize::from(k), 100), msg);
        if k == 1 {
            // One WQE left (< 2): the limit event, once.
            let e = r.poll_aeq().expect("SRQ limit event");
            assert_eq!(e.event_type(), EventType::SrqRqLimit.raw());
            assert!(matches!(
                e.event(),
                Ok(EqeEvent::Qp { .. }) | Ok(EqeEvent::Other(_))
            ));
            assert_eq!(e.qp_srq_n(), srq.srqn);
        }
    }
    assert!(r.poll_aeq().is_none(), "the limit disarmed");
}

#[test]
fn the_reserved_lkey_addresses_iovas_directly() {
    let mut r = Rig::new();
    // Only QPs created with rlky may use it (a user QP gets a local protection error).
    r.rlky = true;
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let mut q = rnic_hw_regs::cmd::QuerySpecialContextsIn::new_cmd();
    q.set_op_mod(0);
    let resd =
        r.h.ok(&q, &[])
            .view::<rnic_hw_regs::cmd::QuerySpecialContextsOut>()
            .resd_lkey();
    let buf = r.h.alloc(4096);
    r.h.write_mem(buf, b"raw iova");
    let dst = r.mr(4096, Access::ALL);
    r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(buf, 8, resd));
    assert_req(&r.one(&mut ca), a.qpn, w, op::SEND);
    assert_eq!(r.one(&mut cb).byte_cnt(), 8);
    assert_eq!(r.read(&dst, 0, 8), b"raw iova");
    // It is not an rkey.
    let w = rdma(
        &mut r,
        &mut a,
        op::WRITE,
        buf,
        resd,
        &data(dst.addr, 8, dst.key),
    );
    let c = r.one(&mut ca);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::ReqErr));
    assert_eq!(c.syndrome(), 0x13);
    assert_eq!(c.wqe_counter(), w);
}

#[test]
fn long_messages_flow_through_the_psn_window() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    // 64 KiB at 256 bytes per packet: 256 packets, twice the 128-PSN window.
    let len = 64 << 10;
    let src = r.mr(len, Access::ALL);
    let dst = r.mr(len, Access::ALL);
    let msg = pattern(len, 0x33);
    r.fill(&src, 0, &msg);
    let w = rdma(
        &mut r,
        &mut a,
        op::WRITE,
        dst.addr,
        dst.key,
        &data(src.addr, len as u32, src.key),
    );
    assert_req(&r.one(&mut ca), a.qpn, w, op::WRITE);
    assert_eq!(r.read(&dst, 0, len), msg);
    // The same as a SEND, then a READ back of all of it.
    r.fill(&dst, 0, &vec![0; len]);
    let rc = r.post_recv(&mut b, &[(dst.addr, len as u32, dst.key)]);
    let w = r.post(
        &mut a,
        op::SEND,
        SIGNALED,
        0,
        &data(src.addr, len as u32, src.key),
    );
    assert_req(&r.one(&mut ca), a.qpn, w, op::SEND);
    let c = r.one(&mut cb);
    assert_eq!((c.wqe_counter(), c.byte_cnt() as usize), (rc, len));
    assert_eq!(r.read(&dst, 0, len), msg);
    r.fill(&src, 0, &vec![0; len]);
    let w = rdma(
        &mut r,
        &mut a,
        op::READ,
        dst.addr,
        dst.key,
        &data(src.addr, len as u32, src.key),
    );
    assert_req(&r.one(&mut ca), a.qpn, w, op::READ);
    assert_eq!(r.read(&src, 0, len), msg);
    assert_eq!(r.counters().rx_dropped, 0);
}

#[test]
fn pipelined_reads_and_sends_complete_in_order() {
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let local = r.mr(16384, Access::ALL);
    let remote = r.mr(16384, Access::ALL);
    r.fill(&remote, 0, &pattern(16384, 0x51));
    for _ in 0..4 {
        r.post_recv(&mut b, &[(remote.addr, 64, remote.key)]);
    }
    // Six READs of 3 packets each (more than the 4 outstanding log_sra_max 2 allows),
    // interleaved with SENDs, one doorbell.
    let mut expect = Vec::new();
    for k in 0..6u64 {
        let w = r.write_wqe(
            &mut a,
            op::READ,
            SIGNALED,
            0,
            &segs(&[
                raddr(remote.addr + 1000 * k, remote.key),
                data(local.addr + 1000 * k, 600, local.key),
            ]),
        );
        expect.push((w, op::READ));
        if k % 2 == 1 {
            let w = r.write_wqe(
                &mut a,
                op::SEND,
                SIGNALED,
                0,
                &data(local.addr, 8, local.key),
            );
            expect.push((w, op::SEND));
        }
    }
    let last = expect.last().expect("WQEs").0;
    r.ring(&mut a, last);
    for (w, opcode) in expect {
        assert_req(&r.one(&mut ca), a.qpn, w, opcode);
    }
    for k in 0..6usize {
        let at = 1000 * k;
        assert_eq!(r.read(&local, at, 600), &pattern(16384, 0x51)[at..at + 600]);
    }
    for _ in 0..3 {
        assert_eq!(r.one(&mut cb).byte_cnt(), 8);
    }
}
