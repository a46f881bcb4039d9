//! CREATE_RQ, MODIFY_RQ, DESTROY_RQ and QUERY_RQ: the Ethernet receive queues TIRs deliver
//! steered frames to.
//!
//! An RQ is created in RST with its own cyclic buffer (no RMP, no hairpin), WQEs of
//! 16 ..= `max_wqe_sz_rq` bytes (data segments only), and receives once MODIFY_RQ moved it
//! to RDY. Destroying an RQ a TIR names is RESOURCE_BUSY.

use rnic_hw_regs::cmd::{
    CreateRqIn, CreateRqOut, DestroyRqIn, DestroyRqOut, ModifyRqIn, ModifyRqOut, QueryRqIn,
    QueryRqOut,
};
use rnic_hw_regs::ctx::{MEM_RQ_TYPE_INLINE, WqState};
use rnic_hw_regs::status::CmdStatus;

use super::wq::{eth_wq, query_wq, transition};
use super::{Cmd, CmdResult, check_op_mod, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::EthRq;

/// CREATE_RQ.
pub(super) fn create_rq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let c = *cmd.fixed::<CreateRqIn>()?.ctx();
    cmd.output::<CreateRqOut>()?;
    ensure(
        c.mem_rq_type() == MEM_RQ_TYPE_INLINE && !c.hairpin() && !c.delay_drop_en(),
        CmdStatus::BadParam,
        syn::WQ_UNSUPPORTED,
    )?;
    ensure(
        WqState::try_from(c.state()) == Ok(WqState::Rst),
        CmdStatus::BadParam,
        syn::WQ_CREATE_STATE,
    )?;
    let max = ctx.state.caps.general().max_wqe_sz_rq();
    let wq = eth_wq(
        ctx,
        cmd,
        c.wq(),
        CreateRqIn::PAS_OFFSET,
        (c.cqn(), c.user_index(), c.rlky()),
        |log| (4..=15).contains(&log) && (1u32 << log) <= u32::from(max),
    )?;
    let rq = EthRq {
        state: WqState::Rst,
        wq,
        vsd: c.vsd(),
        counter_set_id: c.counter_set_id(),
        ci: 0,
    };
    let Ok(rqn) = ctx.state.res.eth_rqs.insert(rq) else {
        return fail(CmdStatus::NoResources, syn::WQ_TABLE_FULL);
    };
    cmd.output::<CreateRqOut>()?.set_rqn(rqn);
    Ok(())
}

/// MODIFY_RQ: state transitions; to RST forgets the WQEs consumed.
pub(super) fn modify_rq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<ModifyRqIn>()?;
    cmd.output::<ModifyRqOut>()?;
    let Some(rq) = ctx.state.res.eth_rqs.get_mut(i.rqn()) else {
        return fail(CmdStatus::BadResource, syn::RQ_UNKNOWN);
    };
    let new = transition(rq.state, i.rq_state(), i.ctx().state(), i.modify_bitmask())?;
    if new == WqState::Rst {
        rq.ci = 0;
    }
    rq.state = new;
    Ok(())
}

/// DESTROY_RQ.
pub(super) fn destroy_rq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let rqn = cmd.fixed::<DestroyRqIn>()?.rqn();
    cmd.output::<DestroyRqOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.eth_rqs.get(rqn).is_some(),
        CmdStatus::BadResource,
        syn::RQ_UNKNOWN,
    )?;
    let busy = res.tirs.iter().any(|(_, t)| t.rqn == rqn);
    ensure(!busy, CmdStatus::ResourceBusy, syn::RQ_BUSY)?;
    res.eth_rqs.remove(rqn);
    Ok(())
}

/// QUERY_RQ.
pub(super) fn query_rq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let rqn = cmd.fixed::<QueryRqIn>()?.rqn();
    cmd.output::<QueryRqOut>()?;
    let Some(rq) = ctx.state.res.eth_rqs.get(rqn) else {
        return fail(CmdStatus::BadResource, syn::RQ_UNKNOWN);
    };
    let wq = query_wq(&rq.wq, rq.ci);
    let (state, cqn, uidx, vsd, cs, rlky) = (
        rq.state,
        rq.wq.cqn,
        rq.wq.user_index,
        rq.vsd,
        rq.counter_set_id,
        rq.wq.dom.rlky,
    );
    let c = cmd.output::<QueryRqOut>()?.rq_context_mut();
    c.set_state(state.into());
    c.set_cqn(cqn);
    c.set_user_index(uidx);
    c.set_vsd(vsd);
    c.set_counter_set_id(cs);
    c.set_rlky(rlky);
    *c.wq_mut() = wq;
    Ok(())
}
