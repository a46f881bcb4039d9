//! CREATE_CQ, DESTROY_CQ, QUERY_CQ and MODIFY_CQ.
//!
//! CREATE_CQ needs an allocated UAR and an existing EQ (`c_eqn`; BAD_RESOURCE otherwise; the
//! PRM leaves open whether firmware accepts a CQ without an EQ, and this device does not), a
//! size within `log_max_cq_sz` (BAD_SIZE), 64- or 128-byte CQEs, an 8-byte aligned doorbell
//! record and a PAS covering the queue. DESTROY_CQ of a CQ a QP, SRQ, RQ or SQ uses is RESOURCE_BUSY.
//! MODIFY_CQ changes moderation (period, count, period mode) and the EQ; resizing is not
//! modelled (cap `cq_resize` 0), so op_mod 1 is BAD_OP.

use rnic_hw_regs::cmd::{
    CreateCqIn, CreateCqOut, DestroyCqIn, DestroyCqOut, ModifyCqIn, ModifyCqOut, QueryCqIn,
    QueryCqOut, op_mod,
};
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, PasSyndromes, check_op_mod, ensure, fail, queue_buf, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::Cq;

/// MODIFY_CQ `modify_field_select` bits (Linux `MLX5_CQ_MODIFY_*`).
mod field {
    /// cq_period.
    pub(super) const PERIOD: u32 = 1 << 0;
    /// cq_max_count.
    pub(super) const COUNT: u32 = 1 << 1;
    /// oi (overrun ignore).
    pub(super) const OVERRUN: u32 = 1 << 2;
    /// c_eqn.
    pub(super) const EQN: u32 = 1 << 3;
    /// cq_period_mode.
    pub(super) const PERIOD_MODE: u32 = 1 << 4;
}

/// CREATE_CQ.
pub(super) fn create_cq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<CreateCqIn>()?;
    cmd.output::<CreateCqOut>()?;
    let mut c = *i.cq_context();
    let res = &ctx.state.res;
    ensure(
        res.uars.get(c.uar_page()).is_some(),
        CmdStatus::BadResource,
        syn::CQ_BAD_UAR,
    )?;
    let eqn = c.c_eqn_or_apu_element();
    ensure(
        eqn <= 0xFF && res.eqs.get(eqn).is_some(),
        CmdStatus::BadResource,
        syn::CQ_BAD_EQN,
    )?;
    ensure(
        c.log_cq_size() <= ctx.state.caps.general().log_max_cq_sz(),
        CmdStatus::BadSize,
        syn::CQ_TOO_BIG,
    )?;
    ensure(c.cqe_sz() <= 1, CmdStatus::BadParam, syn::CQ_CQE_SIZE)?;
    ensure(
        c.page_offset() == 0,
        CmdStatus::BadParam,
        syn::CQ_PAGE_OFFSET,
    )?;
    ensure(
        c.dbr_addr() % 8 == 0,
        CmdStatus::BadParam,
        syn::CQ_DBR_MISALIGNED,
    )?;
    let len = (64u64 << c.cqe_sz()) << c.log_cq_size();
    let buf = queue_buf(
        cmd,
        CreateCqIn::PAS_OFFSET,
        len,
        c.log_page_size(),
        PasSyndromes {
            page_size: syn::CQ_PAGE_SIZE,
            misaligned: syn::CQ_PAS_MISALIGNED,
            short: syn::CQ_PAS_SHORT,
        },
    )?;
    let limit = 1usize << ctx.state.caps.general().log_max_cq().min(24);
    if ctx.state.res.cqs.len() >= limit {
        return fail(CmdStatus::NoResources, syn::CQ_TABLE_FULL);
    }
    c.set_status(0);
    c.set_consumer_counter(0);
    c.set_producer_counter(0);
    let cq = Cq::new(c, buf, c.uar_page(), eqn as u8, c.dbr_addr());
    let Ok(cqn) = ctx.state.res.cqs.insert(cq) else {
        return fail(CmdStatus::NoResources, syn::CQ_TABLE_FULL);
    };
    cmd.output::<CreateCqOut>()?.set_cqn(cqn);
    Ok(())
}

/// DESTROY_CQ.
pub(super) fn destroy_cq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let cqn = cmd.fixed::<DestroyCqIn>()?.cqn();
    cmd.output::<DestroyCqOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.cqs.get(cqn).is_some(),
        CmdStatus::BadResource,
        syn::CQ_UNKNOWN,
    )?;
    let busy = res
        .qps
        .iter()
        .any(|(_, q)| q.ctx.cqn_snd() == cqn || q.ctx.cqn_rcv() == cqn)
        || res.srqs.iter().any(|(_, s)| s.cqn == cqn)
        || res.eth_rqs.iter().any(|(_, q)| q.wq.cqn == cqn)
        || res.eth_sqs.iter().any(|(_, q)| q.wq.cqn == cqn);
    ensure(!busy, CmdStatus::ResourceBusy, syn::CQ_BUSY)?;
    res.cqs.remove(cqn);
    Ok(())
}

/// QUERY_CQ: the context as created and modified, with the device's producer counter.
pub(super) fn query_cq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let cqn = cmd.fixed::<QueryCqIn>()?.cqn();
    cmd.output::<QueryCqOut>()?;
    let Some(cq) = ctx.state.res.cqs.get(cqn) else {
        return fail(CmdStatus::BadResource, syn::CQ_UNKNOWN);
    };
    let mut c = cq.ctx;
    c.set_c_eqn_or_apu_element(u32::from(cq.eqn));
    c.set_producer_counter(cq.pi & 0xFF_FFFF);
    // CQ status: 0 OK, 0x9 overflow (Linux MLX5_CQC_STATUS_CQ_OVERFLOW).
    c.set_status(if cq.overrun { 0x9 } else { 0 });
    *cmd.output::<QueryCqOut>()?.cq_context_mut() = c;
    Ok(())
}

/// MODIFY_CQ (op_mod 0, moderation); resize (op_mod 1) is not modelled.
pub(super) fn modify_cq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[op_mod::MODIFY_CQ_MODIFY, op_mod::MODIFY_CQ_RESIZE])?;
    if cmd.op_mod == op_mod::MODIFY_CQ_RESIZE {
        return fail(CmdStatus::BadOp, syn::CQ_RESIZE);
    }
    let i = cmd.fixed::<ModifyCqIn>()?;
    cmd.output::<ModifyCqOut>()?;
    let sel = i
        .modify_field_select_resize_field_select()
        .modify_field_select()
        .modify_field_select();
    let all = field::PERIOD | field::COUNT | field::OVERRUN | field::EQN | field::PERIOD_MODE;
    ensure(sel & !all == 0, CmdStatus::BadParam, syn::CQ_MODIFY_FIELD)?;
    let new = i.cq_context();
    let res = &mut ctx.state.res;
    let cqn = i.cqn();
    ensure(
        res.cqs.get(cqn).is_some(),
        CmdStatus::BadResource,
        syn::CQ_UNKNOWN,
    )?;
    let eqn = new.c_eqn_or_apu_element();
    if sel & field::EQN != 0 {
        ensure(
            eqn <= 0xFF && res.eqs.get(eqn).is_some(),
            CmdStatus::BadResource,
            syn::CQ_BAD_EQN,
        )?;
    }
    let Some(cq) = res.cqs.get_mut(cqn) else {
        return fail(CmdStatus::BadResource, syn::CQ_UNKNOWN);
    };
    if sel & field::PERIOD != 0 {
        cq.ctx.set_cq_period(new.cq_period());
    }
    if sel & field::COUNT != 0 {
        cq.ctx.set_cq_max_count(new.cq_max_count());
    }
    if sel & field::OVERRUN != 0 {
        cq.ctx.set_oi(new.oi());
    }
    if sel & field::PERIOD_MODE != 0 {
        cq.ctx.set_cq_period_mode(new.cq_period_mode());
    }
    if sel & field::EQN != 0 {
        cq.eqn = eqn as u8;
        cq.ctx.set_c_eqn_or_apu_element(eqn);
    }
    Ok(())
}
