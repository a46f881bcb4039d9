//! ALLOC_PD, DEALLOC_PD, ALLOC_UAR and DEALLOC_UAR.
//!
//! Freeing an object that others still use is RESOURCE_BUSY (0x06) throughout the command
//! processor: a PD with MKeys, QPs or SRQs, a UAR with EQs, CQs or QPs (and, in their files,
//! an EQ with CQs, a CQ with QPs or SRQs, an SRQ with QPs). The InfiniBand spec makes the
//! verbs fail such destroys with an immediate error (e.g. o10-10.2.3 for an SRQ with QPs),
//! and Linux keeps use counts so the kernel never sends them; which status a ConnectX's
//! firmware gives is not documented, and RESOURCE_BUSY is the PRM's name for the condition.

use rnic_hw_regs::cmd::{
    AllocPdOut, AllocUarOut, DeallocPdIn, DeallocPdOut, DeallocUarIn, DeallocUarOut,
};
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, check_op_mod, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::{Pd, Uar};

/// ALLOC_PD: the lowest free PD number (from 1).
pub(super) fn alloc_pd(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    cmd.output::<AllocPdOut>()?;
    let limit = 1usize << ctx.state.caps.general().log_max_pd().min(24);
    let res = &mut ctx.state.res;
    if res.pds.len() >= limit {
        return fail(CmdStatus::NoResources, syn::PD_TABLE_FULL);
    }
    let Ok(pd) = res.pds.insert(Pd) else {
        return fail(CmdStatus::NoResources, syn::PD_TABLE_FULL);
    };
    cmd.output::<AllocPdOut>()?.set_pd(pd);
    Ok(())
}

/// DEALLOC_PD: unknown is BAD_RESOURCE; in use is RESOURCE_BUSY.
pub(super) fn dealloc_pd(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let pd = cmd.fixed::<DeallocPdIn>()?.pd();
    cmd.output::<DeallocPdOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.pds.get(pd).is_some(),
        CmdStatus::BadResource,
        syn::PD_UNKNOWN,
    )?;
    let busy = res.mkeys.iter().any(|(_, m)| m.pd == pd)
        || res.qps.iter().any(|(_, q)| q.ctx.pd() == pd)
        || res.srqs.iter().any(|(_, s)| s.pd == pd)
        || res.eth_rqs.iter().any(|(_, q)| q.wq.dom.pd == pd)
        || res.eth_sqs.iter().any(|(_, q)| q.wq.dom.pd == pd);
    ensure(!busy, CmdStatus::ResourceBusy, syn::PD_BUSY)?;
    res.pds.remove(pd);
    Ok(())
}

/// ALLOC_UAR: UAR indices start at 0x10, as on the ConnectX-4.
pub(super) fn alloc_uar(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    cmd.output::<AllocUarOut>()?;
    let Ok(uar) = ctx.state.res.uars.insert(Uar) else {
        return fail(CmdStatus::NoResources, syn::UAR_TABLE_FULL);
    };
    cmd.output::<AllocUarOut>()?.set_uar(uar);
    Ok(())
}

/// DEALLOC_UAR: unknown is BAD_RESOURCE; in use is RESOURCE_BUSY.
pub(super) fn dealloc_uar(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let uar = cmd.fixed::<DeallocUarIn>()?.uar();
    cmd.output::<DeallocUarOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.uars.get(uar).is_some(),
        CmdStatus::BadResource,
        syn::UAR_UNKNOWN,
    )?;
    let busy = res.eqs.iter().any(|(_, e)| e.uar == uar)
        || res.cqs.iter().any(|(_, c)| c.uar == uar)
        || res.qps.iter().any(|(_, q)| q.ctx.uar_page() == uar)
        || res.eth_sqs.iter().any(|(_, q)| q.uar == uar);
    ensure(!busy, CmdStatus::ResourceBusy, syn::UAR_BUSY)?;
    res.uars.remove(uar);
    Ok(())
}
