//! What CREATE_RQ / CREATE_SQ and MODIFY_RQ / MODIFY_SQ check alike: the `wq` context (cyclic,
//! an existing PD and CQ, a size within `log_max_wq_sz`, page-aligned layout, an aligned
//! doorbell record, a PAS covering the ring) and the object state machine (RST -> RDY,
//! RDY -> RDY / ERR / RST, ERR -> RST).

use rnic_hw_regs::ctx::{Wq, WqState, WqType};
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdFail, PasSyndromes, ensure, fail, queue_buf, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::{Domain, EthWq};

/// The checked `wq` of a CREATE_RQ / CREATE_SQ whose PAS starts at input byte `pas_offset`,
/// with `cqn` its completion queue and `rlky` its reserved-lkey permission. `stride_ok`
/// decides whether a `log_wq_stride` is one the queue kind takes.
pub(super) fn eth_wq(
    ctx: &Ctx<'_>,
    cmd: &Cmd<'_>,
    wq: &Wq,
    pas_offset: usize,
    (cqn, user_index, rlky): (u32, u32, bool),
    stride_ok: impl Fn(u8) -> bool,
) -> Result<EthWq, CmdFail> {
    ensure(
        WqType::try_from(wq.wq_type()) == Ok(WqType::Cyclic),
        CmdStatus::BadParam,
        syn::WQ_TYPE,
    )?;
    ensure(
        !wq.wq_signature() && !wq.cd_slave() && wq.end_padding_mode() == 0,
        CmdStatus::BadParam,
        syn::WQ_UNSUPPORTED,
    )?;
    let res = &ctx.state.res;
    ensure(
        res.pds.get(wq.pd()).is_some(),
        CmdStatus::BadResource,
        syn::WQ_BAD_PD,
    )?;
    ensure(
        res.cqs.get(cqn).is_some(),
        CmdStatus::BadResource,
        syn::WQ_BAD_CQN,
    )?;
    let g = ctx.state.caps.general();
    ensure(
        wq.log_wq_sz() <= g.log_max_wq_sz(),
        CmdStatus::BadSize,
        syn::WQ_TOO_BIG,
    )?;
    ensure(
        stride_ok(wq.log_wq_stride()),
        CmdStatus::BadSize,
        syn::WQ_STRIDE,
    )?;
    ensure(
        wq.page_offset() == 0,
        CmdStatus::BadParam,
        syn::WQ_PAGE_OFFSET,
    )?;
    ensure(
        wq.dbr_addr() % 8 == 0,
        CmdStatus::BadParam,
        syn::WQ_DBR_MISALIGNED,
    )?;
    let len = (1u64 << wq.log_wq_sz()) << wq.log_wq_stride();
    let buf = queue_buf(
        cmd,
        pas_offset,
        len,
        wq.log_wq_pg_sz(),
        PasSyndromes {
            page_size: syn::WQ_PAGE_SIZE,
            misaligned: syn::WQ_PAS_MISALIGNED,
            short: syn::WQ_PAS_SHORT,
        },
    )?;
    Ok(EthWq {
        buf,
        dbr_addr: wq.dbr_addr(),
        log_size: wq.log_wq_sz(),
        log_stride: wq.log_wq_stride(),
        dom: Domain {
            pd: wq.pd(),
            rlky,
            ..Domain::default()
        },
        cqn,
        user_index,
    })
}

/// The context's `wq` as QUERY_RQ / QUERY_SQ report it, with `counter` WQEs consumed.
pub(super) fn query_wq(w: &EthWq, counter: u16) -> Wq {
    let mut q = Wq::default();
    q.set_wq_type(WqType::Cyclic.into());
    q.set_pd(w.dom.pd);
    q.set_dbr_addr(w.dbr_addr);
    q.set_log_wq_sz(w.log_size);
    q.set_log_wq_stride(w.log_stride);
    q.set_log_wq_pg_sz(w.buf.log_page_size.saturating_sub(12));
    q.set_hw_counter(u32::from(counter));
    q
}

/// The state a MODIFY_RQ / MODIFY_SQ moves a queue in `current` to: the command's current
/// state must be the queue's (else BAD_RESOURCE_STATE), the new state a valid transition
/// (else BAD_PARAM), and no other field selected (else BAD_PARAM).
pub(super) fn transition(
    current: WqState,
    claimed: u8,
    new: u8,
    modify_bitmask: u64,
) -> Result<WqState, CmdFail> {
    if WqState::try_from(claimed) != Ok(current) {
        return fail(CmdStatus::BadResourceState, syn::WQ_CURRENT_STATE);
    }
    ensure(
        modify_bitmask == 0,
        CmdStatus::BadParam,
        syn::WQ_MODIFY_FIELD,
    )?;
    let Ok(new) = WqState::try_from(new) else {
        return fail(CmdStatus::BadParam, syn::WQ_TRANSITION);
    };
    use WqState::{Err, Rdy, Rst};
    match (current, new) {
        (Rst, Rdy) | (Rdy, Rdy) | (Rdy, Err) | (Rdy, Rst) | (Err, Rst) => Ok(new),
        _ => fail(CmdStatus::BadParam, syn::WQ_TRANSITION),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_machine_takes_only_the_prm_transitions() {
        use WqState::{Err, Rdy, Rst};
        assert_eq!(transition(Rst, 0, 1, 0), Ok(Rdy));
        assert_eq!(transition(Rdy, 1, 3, 0), Ok(Err));
        assert_eq!(transition(Err, 3, 0, 0), Ok(Rst));
        let bad = |c, cl, n, m| transition(c, cl, n, m).unwrap_err();
        assert_eq!(bad(Rst, 1, 1, 0).status, CmdStatus::BadResourceState);
        assert_eq!(bad(Rst, 0, 3, 0).syndrome, syn::WQ_TRANSITION);
        assert_eq!(bad(Err, 3, 1, 0).syndrome, syn::WQ_TRANSITION);
        assert_eq!(bad(Rst, 0, 2, 0).syndrome, syn::WQ_TRANSITION);
        assert_eq!(bad(Rst, 0, 1, 1).syndrome, syn::WQ_MODIFY_FIELD);
    }
}
