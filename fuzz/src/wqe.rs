//! Raw WQEs into a live QP's send queue, and what the device may answer (the
//! `posted_wqes` target and the seed-corpus example).

use crate::{LiveDevice, connect};
use rnic_driver::cq::Cq;
use rnic_hw_regs::cqe::{CqeOpcode, cqe_is_sw_owned};
use rnic_hw_regs::doorbell::send_doorbell_offset;
use std::sync::atomic::{Ordering, fence};

/// WQE basic blocks (64 bytes) one input may write.
pub const MAX_WQEBBS: usize = 8;
/// A WQE basic block.
pub const WQEBB: usize = 64;

/// Writes `wqes` (cut to [`MAX_WQEBBS`] blocks, the last one zero-padded) into target `i`'s
/// send queue from index 0 (the QP was reset, so the device expects index 0 next), then the
/// send counter into the doorbell record and the first WQE's first 8 bytes to the UAR's
/// doorbell, as the driver's post does. Returns the number of blocks.
pub fn post_raw(d: &LiveDevice, i: usize, wqes: &[u8]) -> u16 {
    let t = d.targets()[i];
    let (sq, len, dbrec) = t.qp.sq_ring();
    let bytes = wqes.len().min(MAX_WQEBBS * WQEBB).min(len);
    let nbb = bytes.div_ceil(WQEBB).max(1);
    let mut buf = vec![0u8; nbb * WQEBB];
    buf[..bytes].copy_from_slice(&wqes[..bytes]);
    // SAFETY: `nbb * 64 <= len` bytes inside the live SQ ring; dword 1 (send counter) of
    // the doorbell record.
    unsafe { write_ring(sq.as_ptr(), &buf, dbrec.as_ptr().add(4), nbb as u32) };
    fence(Ordering::SeqCst);
    let first = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
    let uar = d.hca.uar().expect("open");
    d.hca
        .bus()
        .write64(uar.bar_offset() + send_doorbell_offset(0), first);
    nbb as u16
}

/// Writes `wqes` at the start of a work queue ring, then `count` (big-endian) into the
/// doorbell record's counter at `counter`, with a release fence between, as a driver does.
///
/// # Safety
///
/// `ring` must have `wqes.len()` writable bytes and `counter` 4, both live.
unsafe fn write_ring(ring: *mut u8, wqes: &[u8], counter: *mut u8, count: u32) {
    // SAFETY: the caller's contract; volatile writes, no references.
    unsafe {
        for (k, b) in wqes.iter().enumerate() {
            ring.add(k).write_volatile(*b);
        }
        fence(Ordering::Release);
        for (k, b) in count.to_be_bytes().iter().enumerate() {
            counter.add(k).write_volatile(*b);
        }
    }
}

/// Checks the CQEs software owns in `cq` from its consumer index on, without consuming
/// them: a send CQ holds requester completions (REQ, REQ_ERR) whose WQE counter is below
/// `posted` blocks, a receive CQ responder ones.
pub fn check_cqes(cq: &Cq, send: bool, posted: u16) {
    let (ring, bytes) = cq.cqe_ring();
    let n = (bytes / 64) as u32;
    let log = n.trailing_zeros() as u8;
    let ci = cq.consumer_index();
    for k in 0..n {
        let idx = ci.wrapping_add(k);
        let off = (idx % n) as usize * 64;
        let mut e = [0u8; 64];
        // SAFETY: inside the live ring; volatile reads.
        for (j, b) in e.iter_mut().enumerate() {
            *b = unsafe { ring.as_ptr().add(off + j).read_volatile() };
        }
        if !cqe_is_sw_owned(e[63], idx, log) {
            break;
        }
        let op = e[63] >> 4;
        let ok = if send {
            op == CqeOpcode::Req as u8 || op == CqeOpcode::ReqErr as u8
        } else {
            [
                CqeOpcode::RespWrImm,
                CqeOpcode::RespSend,
                CqeOpcode::RespSendImm,
                CqeOpcode::RespSendInv,
                CqeOpcode::RespErr,
            ]
            .iter()
            .any(|&o| o as u8 == op)
        };
        assert!(
            ok,
            "CQE opcode {op:#x} on a {} CQ: {e:02x?}",
            if send { "send" } else { "receive" }
        );
        if send {
            let counter = u16::from_be_bytes([e[0x3C], e[0x3D]]);
            assert!(
                counter < posted,
                "CQE for WQE {counter}, {posted} blocks posted"
            );
        }
    }
}

/// Resets target `i` (its CQEs are cleaned from its CQs) and brings it back to RTS with
/// fresh receives.
pub fn reset_target(d: &mut LiveDevice, i: usize) {
    let t = d.targets()[i];
    t.qp.to_reset().expect("2RST");
    connect(&t.qp, d.peer, d.hca.mac());
    d.post_recvs(i, 8);
}

/// Receive WQEs one input may write.
pub const MAX_RECV_WQES: usize = 4;

/// Resets target `i` to RTS with no receives posted, writes `wqes` (cut to
/// [`MAX_RECV_WQES`] receive WQEs of the RQ's stride, the last one zero-padded) into its
/// receive queue from index 0 and their count into the doorbell record's receive counter,
/// then posts a real 64-byte SEND from the QP to itself, which consumes the first of them.
/// Returns the number of receive WQEs written.
pub fn post_raw_recv(d: &mut LiveDevice, i: usize, wqes: &[u8]) -> u16 {
    let t = d.targets()[i];
    t.qp.to_reset().expect("2RST");
    connect(&t.qp, d.peer, d.hca.mac());
    let (rq, len, stride) = t.qp.rq_ring();
    let (_, _, dbrec) = t.qp.sq_ring();
    let bytes = wqes.len().min(MAX_RECV_WQES * stride).min(len);
    let n = bytes.div_ceil(stride).max(1);
    let mut buf = vec![0u8; n * stride];
    buf[..bytes].copy_from_slice(&wqes[..bytes]);
    // SAFETY: `n * stride <= len` bytes inside the live RQ ring; dword 0 (receive
    // counter) of the doorbell record.
    unsafe { write_ring(rq.as_ptr(), &buf, dbrec.as_ptr(), n as u32) };
    let ud = (t.qp.qp_type() == rnic_driver::qp::QpType::Ud).then_some(rnic_driver::wr::UdDest {
        ah: &d.self_ah,
        remote_qpn: t.qp.qpn(),
        remote_qkey: crate::QKEY,
    });
    let sge = [d.mr.sge(2048, 64)];
    t.qp.post_send(&[rnic_driver::wr::SendWr {
        wr_id: 1,
        op: rnic_driver::wr::SendOp::Send,
        payload: rnic_driver::wr::Payload::Sgl(&sge),
        flags: rnic_driver::wr::SendFlags::SIGNALED,
        ud,
    }])
    .expect("the SEND that consumes a receive WQE");
    n as u16
}
