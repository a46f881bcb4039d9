//! CREATE_SQ, MODIFY_SQ, DESTROY_SQ and QUERY_SQ: the Ethernet send queues that transmit
//! whole frames through a TIS.
//!
//! An SQ is created in RST on an allocated UAR (its doorbells), with one existing TIS, a
//! cyclic ring of 64-byte WQEBBs and a `min_wqe_inline_mode` the device knows; it sends once
//! MODIFY_SQ moved it to RDY.

use rnic_hw_regs::cmd::{
    CreateSqIn, CreateSqOut, DestroySqIn, DestroySqOut, ModifySqIn, ModifySqOut, QuerySqIn,
    QuerySqOut,
};
use rnic_hw_regs::ctx::{WqState, inline_mode};
use rnic_hw_regs::status::CmdStatus;

use super::wq::{eth_wq, query_wq, transition};
use super::{Cmd, CmdResult, check_op_mod, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::EthSq;

/// log2 of the SQ stride: one WQEBB.
const LOG_WQEBB: u8 = 6;

/// CREATE_SQ.
pub(super) fn create_sq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let c = *cmd.fixed::<CreateSqIn>()?.ctx();
    cmd.output::<CreateSqOut>()?;
    ensure(
        !c.hairpin()
            && !c.cd_master()
            && !c.allow_multi_pkt_send_wqe()
            && !c.reg_umr()
            && !c.allow_swp()
            && !c.fre(),
        CmdStatus::BadParam,
        syn::WQ_UNSUPPORTED,
    )?;
    ensure(
        WqState::try_from(c.state()) == Ok(WqState::Rst),
        CmdStatus::BadParam,
        syn::WQ_CREATE_STATE,
    )?;
    ensure(
        c.min_wqe_inline_mode() <= inline_mode::TCP_UDP,
        CmdStatus::BadParam,
        syn::SQ_INLINE_MODE,
    )?;
    let res = &ctx.state.res;
    ensure(
        res.uars.get(c.wq().uar_page()).is_some(),
        CmdStatus::BadResource,
        syn::SQ_BAD_UAR,
    )?;
    ensure(
        c.tis_lst_sz() == 1 && res.tises.get(c.tis_num_0()).is_some(),
        CmdStatus::BadResource,
        syn::SQ_BAD_TIS,
    )?;
    let wq = eth_wq(
        ctx,
        cmd,
        c.wq(),
        CreateSqIn::PAS_OFFSET,
        (c.cqn(), c.user_index(), c.rlky()),
        |log| log == LOG_WQEBB,
    )?;
    let sq = EthSq {
        state: WqState::Rst,
        wq,
        tisn: c.tis_num_0(),
        uar: c.wq().uar_page(),
        min_inline_mode: c.min_wqe_inline_mode(),
        ci: 0,
    };
    let Ok(sqn) = ctx.state.res.eth_sqs.insert(sq) else {
        return fail(CmdStatus::NoResources, syn::WQ_TABLE_FULL);
    };
    cmd.output::<CreateSqOut>()?.set_sqn(sqn);
    Ok(())
}

/// MODIFY_SQ: state transitions; to RST forgets the WQEBBs consumed.
pub(super) fn modify_sq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<ModifySqIn>()?;
    cmd.output::<ModifySqOut>()?;
    let Some(sq) = ctx.state.res.eth_sqs.get_mut(i.sqn()) else {
        return fail(CmdStatus::BadResource, syn::SQ_UNKNOWN);
    };
    let new = transition(sq.state, i.sq_state(), i.ctx().state(), i.modify_bitmask())?;
    if new == WqState::Rst {
        sq.ci = 0;
    }
    sq.state = new;
    Ok(())
}

/// DESTROY_SQ.
pub(super) fn destroy_sq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let sqn = cmd.fixed::<DestroySqIn>()?.sqn();
    cmd.output::<DestroySqOut>()?;
    if ctx.state.res.eth_sqs.remove(sqn).is_none() {
        return fail(CmdStatus::BadResource, syn::SQ_UNKNOWN);
    }
    Ok(())
}

/// QUERY_SQ.
pub(super) fn query_sq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let sqn = cmd.fixed::<QuerySqIn>()?.sqn();
    cmd.output::<QuerySqOut>()?;
    let Some(sq) = ctx.state.res.eth_sqs.get(sqn) else {
        return fail(CmdStatus::BadResource, syn::SQ_UNKNOWN);
    };
    let mut wq = query_wq(&sq.wq, sq.ci);
    wq.set_uar_page(sq.uar);
    let (state, cqn, uidx, tisn, mode, rlky) = (
        sq.state,
        sq.wq.cqn,
        sq.wq.user_index,
        sq.tisn,
        sq.min_inline_mode,
        sq.wq.dom.rlky,
    );
    let c = cmd.output::<QuerySqOut>()?.sq_context_mut();
    c.set_state(state.into());
    c.set_cqn(cqn);
    c.set_user_index(uidx);
    c.set_tis_lst_sz(1);
    c.set_tis_num_0(tisn);
    c.set_min_wqe_inline_mode(mode);
    c.set_rlky(rlky);
    *c.wq_mut() = wq;
    Ok(())
}
