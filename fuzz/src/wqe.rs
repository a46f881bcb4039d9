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
    // SAFETY: `nbb * 64 <= len` bytes inside the live SQ ring and the 8-byte doorbell
    // record; volatile writes, as a driver's.
    unsafe {
        for (k, b) in buf.iter().enumerate() {
            sq.as_ptr().add(k).write_volatile(*b);
        }
        fence(Ordering::Release);
        for (k, b) in (nbb as u32).to_be_bytes().iter().enumerate() {
            dbrec.as_ptr().add(4 + k).write_volatile(*b);
        }
    }
    fence(Ordering::SeqCst);
    let first = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
    let uar = d.hca.uar().expect("open");
    d.hca
        .bus()
        .write64(uar.bar_offset() + send_doorbell_offset(0), first);
    nbb as u16
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
