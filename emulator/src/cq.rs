//! The CQE writer: completion queue entries with the ownership-bit protocol, overrun, and
//! CQ arming (completion EQEs).
//!
//! CQE `pi` of a CQ of `2^log_size` entries goes to entry `pi & (N - 1)` with owner bit
//! `(pi >> log_size) & 1`: the driver's consumer rule (PRM section 5) takes entry
//! `ci & (N - 1)` when its opcode is not INVALID and its owner bit is `(ci >> log_size) & 1`.
//! The body is written first and the last byte (`op_own`) after a release fence.
//!
//! Overrun: before writing, the device reads the consumer index from the CQ's doorbell record
//! (`set_ci`, 24 bits). When `pi - ci` already equals `N` the CQ is full: the CQE is not
//! written, the CQ enters the error state (no further CQEs), `cq_overruns` counts it, and a
//! CQ error EQE (type 0x04, syndrome 0x01 overrun) goes to the EQ subscribed to CQ errors. A
//! CQ whose buffer or doorbell record faults in the IOMMU enters the same error state with
//! syndrome 0x02 (access violation). A CQ created with `oi` (overrun ignore) never overruns:
//! new CQEs replace unconsumed ones.
//!
//! Arming: a 64-bit write of `{arm word, cqn}` to UAR + 0x20 requests one completion event,
//! for the next CQE or for the next solicited (or error) CQE. The event is a completion EQE
//! (type 0) with the CQN, written to the CQ's EQ; the CQ is then disarmed. Arming a CQ that
//! already holds CQEs beyond the arm word's consumer index (request-next) raises the event at
//! once.

use rnic_hw_regs::PrmLayout;
use rnic_hw_regs::cqe::{CQE_SIZE, Cqe64, CqeOpcode, CqeSyndrome};
use rnic_hw_regs::doorbell::CqArm;
use rnic_hw_regs::eqe::{Eqe, EventType};
use zerocopy::IntoBytes;

use crate::ctx::Ctx;

/// CQ error EQE syndrome: the CQ overran.
pub(crate) const CQ_ERR_OVERRUN: u8 = 0x01;
/// CQ error EQE syndrome: the CQ's buffer or doorbell record could not be accessed.
pub(crate) const CQ_ERR_ACCESS_VIOLATION: u8 = 0x02;

/// Vendor syndrome the emulator puts in error CQEs of flushed WQEs (the value ConnectX
/// hardware reports with WR_FLUSH_ERR).
pub(crate) const VENDOR_SYND_FLUSH: u8 = 0xF9;

/// The CQE's `srqn_uidx` for a completion of QP context `qpc`: with `cqe_version` 1 (the
/// ConnectX-4's current value) the QP's `user_index`; with version 0 the SRQ number of an
/// SRQ receive, else 0.
pub(crate) fn srqn_uidx(ctx: &Ctx<'_>, qpc: &rnic_hw_regs::ctx::Qpc, srqn: Option<u32>) -> u32 {
    if ctx.state.caps.general().cqe_version() >= 1 {
        qpc.user_index()
    } else {
        srqn.unwrap_or(0)
    }
}

/// A requester (send) CQE: opcode REQ, the WQE's opcode, QPN, `wqe_counter` = the completed
/// WQE's `wqe_index`, and the bytes transferred.
pub(crate) fn req_cqe(qpn: u32, wqe_index: u16, send_opcode: u8, byte_cnt: u32) -> Cqe64 {
    let mut c = Cqe64::default();
    c.set_opcode(CqeOpcode::Req.raw());
    c.set_send_opcode(send_opcode);
    c.set_qpn(qpn);
    c.set_wqe_counter(wqe_index);
    c.set_byte_cnt(byte_cnt);
    c
}

/// An error CQE: REQ_ERR for send WQEs, RESP_ERR for receive WQEs, with the syndrome and a
/// vendor syndrome.
pub(crate) fn err_cqe(
    requester: bool,
    qpn: u32,
    wqe_counter: u16,
    send_opcode: u8,
    syndrome: CqeSyndrome,
) -> Cqe64 {
    let mut c = Cqe64::default();
    c.set_opcode(if requester {
        CqeOpcode::ReqErr.raw()
    } else {
        CqeOpcode::RespErr.raw()
    });
    if requester {
        c.set_send_opcode(send_opcode);
    }
    c.set_qpn(qpn);
    c.set_wqe_counter(wqe_counter);
    c.set_syndrome(syndrome.raw());
    if syndrome == CqeSyndrome::WrFlush {
        c.set_vendor_err_synd(VENDOR_SYND_FLUSH);
    }
    c
}

/// Writes `cqe` (owner bit and timestamp are filled in here) as the next entry of CQ `cqn`.
/// Returns false when it was not written (unknown CQ, CQ in error, overrun, fault).
pub(crate) fn push(ctx: &mut Ctx<'_>, cqn: u32, cqe: &mut Cqe64) -> bool {
    let Some(cq) = ctx.state.res.cqs.get_mut(cqn) else {
        ctx.state.counters.cqes_dropped += 1;
        return false;
    };
    if cq.overrun {
        ctx.state.counters.cqes_dropped += 1;
        return false;
    }
    let log = u32::from(cq.log_size.min(23));
    let n = 1u32 << log;
    let error = match ctx.dma.read_be32(cq.dbr_addr) {
        Err(_) => Some(CQ_ERR_ACCESS_VIOLATION),
        Ok(set_ci) => {
            let ci = set_ci & 0xFF_FFFF;
            // `oi` (overrun ignore): the host accepts CQEs written over unconsumed ones.
            (cq.pi.wrapping_sub(ci) & 0xFF_FFFF >= n && !cq.ctx.oi()).then_some(CQ_ERR_OVERRUN)
        }
    };
    let slot = u64::from(cq.pi & (n - 1));
    let iova = cq.buf.iova(slot * CQE_SIZE as u64);
    let error = error.or(iova.is_none().then_some(CQ_ERR_ACCESS_VIOLATION));
    let error = match (error, iova) {
        (None, Some(iova)) => {
            cqe.set_owner((cq.pi >> log) & 1 == 1);
            if !cqe.cqe_opcode().is_ok_and(|o| o.is_error()) {
                cqe.set_timestamp(ctx.clock.now_ns());
            }
            debug_assert_eq!(cqe.as_bytes().len(), Cqe64::SIZE);
            ctx.dma
                .write_owned(iova, cqe.as_bytes())
                .err()
                .map(|_| CQ_ERR_ACCESS_VIOLATION)
        }
        (e, _) => e,
    };
    if let Some(syndrome) = error {
        cq.overrun = true;
        if syndrome == CQ_ERR_OVERRUN {
            ctx.state.counters.cq_overruns += 1;
        }
        ctx.state.counters.cqes_dropped += 1;
        let mut e = Eqe::of(EventType::CqError);
        e.set_cq_err_cqn(cqn & 0xFF_FFFF);
        e.set_cq_err_syndrome(syndrome);
        crate::eq::post_event(ctx, &e);
        return false;
    }
    cq.pi = cq.pi.wrapping_add(1) & 0xFF_FFFF;
    let fire = match cq.armed {
        Some(false) => true,
        Some(true) => cqe.se() || cqe.cqe_opcode().is_ok_and(|o| o.is_error()),
        None => false,
    };
    if fire {
        cq.armed = None;
        let eqn = u32::from(cq.eqn);
        completion_event(ctx, eqn, cqn);
    }
    true
}

/// Writes a completion EQE for `cqn` to EQ `eqn`.
fn completion_event(ctx: &mut Ctx<'_>, eqn: u32, cqn: u32) {
    let mut e = Eqe::of(EventType::Completion);
    e.set_comp_cqn(cqn & 0xFF_FFFF);
    crate::eq::write_eqe(ctx, eqn, &e);
}

/// A CQ arm doorbell (UAR + 0x20): `value` is `arm_word << 32 | cqn`. Returns false when the
/// CQ does not exist, uses another UAR, or the command is not request-next / solicited.
pub(crate) fn arm(ctx: &mut Ctx<'_>, uar: u32, value: u64) -> bool {
    let cqn = (value & 0xFF_FFFF) as u32;
    let arm = CqArm::decode((value >> 32) as u32);
    let Some(cq) = ctx.state.res.cqs.get_mut(cqn) else {
        return false;
    };
    if cq.uar != uar || arm.cmd > 1 {
        return false;
    }
    let solicited = arm.cmd == 1;
    if !solicited && cq.pi != arm.ci && !cq.overrun {
        // CQEs the host has not consumed yet: the event is due now.
        cq.armed = None;
        let eqn = u32::from(cq.eqn);
        completion_event(ctx, eqn, cqn);
    } else {
        cq.armed = Some(solicited);
    }
    true
}
