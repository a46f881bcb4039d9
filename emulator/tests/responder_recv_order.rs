//! Receive completions stay in the RQ's order when a message in progress dies: a receive
//! WQE the responder took for a multi-packet SEND completes (with the error, or flushed)
//! before the WQEs behind it are flushed, and a UC message lost half-way leaves its WQE for
//! the next message. Found by the `rx_frames` fuzz target (fuzz/README.md): an RC
//! SEND_FIRST, then a FETCH_ADD in the middle of the SEND, completed WQE 1 first and never
//! WQE 0, which the driver rejects (`BadCqe::RecvCounterOutOfRange`).

mod common;
#[path = "rig/mod.rs"]
mod rig;

use rig::{Access, Cq, Qp, Rig, gid_of};
use rnic_emulator::link::{InProcLink, Link};
use rnic_hw_regs::cqe::{CqeOpcode, CqeSyndrome};
use rnic_hw_regs::ctx::QpSt;

/// The device's address and MAC, and its peer's: those of the fuzz harness, so the two
/// frames the fuzzer found are fed as they were.
const ME: [u8; 4] = [192, 0, 2, 1];
const MAC: [u8; 6] = [0x02, 0x52, 0x4E, 0x49, 0x43, 0x00];
const PEER: [u8; 4] = [192, 0, 2, 2];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

/// The fuzzer's frame 1: an RC SEND_FIRST to QP 0x100, PSN 0x100, 1024 bytes of 0x7B (the
/// path MTU), with a correct ICRC.
fn send_first() -> Vec<u8> {
    let mut f = hex(concat!(
        "02524e49430002000000000208004500042c000040004011b2bdc0000202c0000201",
        "c27112b7041800000000ffff0000010000000100"
    ));
    f.extend(std::iter::repeat_n(0x7B, 1024));
    f.extend(hex("e33cc67f"));
    f
}

/// The fuzzer's frame 2: an RC FETCH_ADD to QP 0x100 at the next PSN (FECN, BECN and
/// reserved bits set), with a correct ICRC.
fn fetch_add() -> Vec<u8> {
    hex(concat!(
        "02524e494300020000000002080045000048000040004011b6a1c0000202c0000201",
        "c3c112b7003400001400fffff50001008000010100005578d0165000000001d800",
        "0000000000000100000000000000005922c298"
    ))
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A device at [`ME`] with a QP of type `st` (the first, QPN 0x100) connected to [`PEER`]
/// QPN 0x77 at PSN 0x100, MTU 1024, eight 1 KiB receives posted; the test's end of the
/// wire.
fn target(st: QpSt) -> (Rig, InProcLink, Qp, Cq) {
    let mut r = Rig::with_addr(ME, MAC);
    let (wire, end) = InProcLink::pair();
    r.h.dev.set_link(Box::new(end));
    let cq = r.cq(5);
    let mut qp = r.qp(st, &cq, &cq, 6, 6);
    assert_eq!(qp.qpn, 0x100, "the QPN the fuzzer's frames name");
    r.init_qp(&qp, true, true, true);
    r.rtr_rts_to(&qp, 0x77, 3, 0x100, 7, gid_of(PEER), PEER_MAC);
    let mr = r.mr(8192, Access::ALL);
    for _ in 0..8 {
        r.post_recv(&mut qp, &[(mr.addr, 1024, mr.key)]);
    }
    (r, wire, qp, cq)
}

#[test]
fn an_rc_send_cut_by_an_invalid_request_completes_its_wqe_first() {
    let (mut r, mut wire, _qp, mut cq) = target(QpSt::Rc);
    wire.transmit(&send_first());
    r.h.dev.step();
    assert!(r.poll(&mut cq).is_none(), "the SEND is in progress");
    wire.transmit(&fetch_add());
    r.h.dev.step();
    // WQE 0 (the SEND's) with the NAK's error, then WQEs 1..8 flushed, in order.
    let first = r.one(&mut cq);
    assert_eq!(first.cqe_opcode(), Ok(CqeOpcode::RespErr));
    assert_eq!(first.wqe_counter(), 0);
    assert_eq!(first.syndrome(), CqeSyndrome::RemoteInvalReq as u8);
    for counter in 1..8 {
        let c = r.one(&mut cq);
        assert_eq!(
            (c.cqe_opcode(), c.wqe_counter()),
            (Ok(CqeOpcode::RespErr), counter)
        );
        assert_eq!(c.syndrome(), CqeSyndrome::WrFlush as u8);
    }
    assert!(r.poll(&mut cq).is_none());
}

#[test]
fn a_uc_send_lost_half_way_leaves_its_wqe_to_the_next_message() {
    let (mut r, mut wire, _qp, mut cq) = target(QpSt::Uc);
    // The same SEND_FIRST as UC (opcode 0x20), then a UC SEND_ONLY at a later PSN: the gap
    // loses the first message; the SEND_ONLY lands in WQE 0.
    let mut first = send_first();
    first[42] = 0x20;
    reseal(&mut first);
    wire.transmit(&first);
    r.h.dev.step();
    let mut only = send_first();
    only[42] = 0x24; // UC SEND_ONLY
    only[42 + 11] = 0x05; // PSN 0x105: a gap
    reseal(&mut only);
    wire.transmit(&only);
    r.h.dev.step();
    let c = r.one(&mut cq);
    assert_eq!(
        (c.cqe_opcode(), c.wqe_counter()),
        (Ok(CqeOpcode::RespSend), 0)
    );
    assert_eq!(c.byte_cnt(), 1024);
    assert!(r.poll(&mut cq).is_none());
}

/// Recomputes the ICRC after a header change.
fn reseal(frame: &mut [u8]) {
    let n = frame.len();
    let icrc = rnic_emulator::wire::icrc::compute(&frame[14..n - 4]).unwrap();
    frame[n - 4..].copy_from_slice(&icrc.to_le_bytes());
}
