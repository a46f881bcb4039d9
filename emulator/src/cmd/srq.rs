//! CREATE_SRQ, DESTROY_SRQ, QUERY_SRQ and ARM_RQ (op_mod 1, an SRQ's limit).
//!
//! CREATE_SRQ needs an existing PD (and CQ when `cqn` is set, XRC style), a size within
//! `log_max_srq_sz`, WQEs within `max_wqe_sz_rq`, page-aligned layout and a PAS covering the
//! queue. DESTROY_SRQ of an SRQ a QP uses is RESOURCE_BUSY. ARM_RQ sets the limit (`lwm`),
//! which must be below the SRQ's size.

use rnic_hw_regs::cmd::{
    ArmRqIn, ArmRqOut, CreateSrqIn, CreateSrqOut, DestroySrqIn, DestroySrqOut, QuerySrqIn,
    QuerySrqOut,
};
use rnic_hw_regs::ctx::Srqc;
use rnic_hw_regs::status::CmdStatus;
use zerocopy::FromZeros;

use super::{Cmd, CmdResult, PasSyndromes, check_op_mod, ensure, fail, queue_buf, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::Srq;

/// ARM_RQ op_mod for an SRQ (0 would be an RQ object, which this device does not have).
const ARM_RQ_SRQ: u16 = 1;
/// `qpc.rq_type` of a QP receiving from an SRQ.
const RQ_SRQ: u8 = 1;

/// CREATE_SRQ.
pub(super) fn create_srq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<CreateSrqIn>()?;
    cmd.output::<CreateSrqOut>()?;
    let c = *i.srq_context_entry();
    let res = &ctx.state.res;
    ensure(
        res.pds.get(c.pd()).is_some(),
        CmdStatus::BadResource,
        syn::SRQ_BAD_PD,
    )?;
    ensure(
        c.cqn() == 0 || res.cqs.get(c.cqn()).is_some(),
        CmdStatus::BadResource,
        syn::SRQ_BAD_CQN,
    )?;
    let g = ctx.state.caps.general();
    ensure(
        c.log_srq_size() <= g.log_max_srq_sz(),
        CmdStatus::BadSize,
        syn::SRQ_TOO_BIG,
    )?;
    let stride = 16u64 << c.log_rq_stride();
    ensure(
        stride <= u64::from(g.max_wqe_sz_rq()),
        CmdStatus::BadSize,
        syn::SRQ_STRIDE,
    )?;
    ensure(
        c.page_offset() == 0,
        CmdStatus::BadParam,
        syn::SRQ_PAGE_OFFSET,
    )?;
    ensure(
        c.dbr_addr() % 8 == 0,
        CmdStatus::BadParam,
        syn::SRQ_DBR_MISALIGNED,
    )?;
    let limit = 1usize << g.log_max_srq().min(24);
    let buf = queue_buf(
        cmd,
        CreateSrqIn::PAS_OFFSET,
        stride << c.log_srq_size(),
        c.log_page_size(),
        PasSyndromes {
            page_size: syn::SRQ_PAGE_SIZE,
            misaligned: syn::SRQ_PAS_MISALIGNED,
            short: syn::SRQ_PAS_SHORT,
        },
    )?;
    if ctx.state.res.srqs.len() >= limit {
        return fail(CmdStatus::NoResources, syn::SRQ_TABLE_FULL);
    }
    let srq = Srq {
        log_size: c.log_srq_size(),
        log_stride: c.log_rq_stride(),
        pd: c.pd(),
        rlky: c.rlky(),
        cqn: c.cqn(),
        buf,
        dbr_addr: c.dbr_addr(),
        ci: 0,
        head: 0,
        lwm: c.lwm(),
    };
    let Ok(srqn) = ctx.state.res.srqs.insert(srq) else {
        return fail(CmdStatus::NoResources, syn::SRQ_TABLE_FULL);
    };
    cmd.output::<CreateSrqOut>()?.set_srqn(srqn);
    Ok(())
}

/// DESTROY_SRQ.
pub(super) fn destroy_srq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let srqn = cmd.fixed::<DestroySrqIn>()?.srqn();
    cmd.output::<DestroySrqOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.srqs.get(srqn).is_some(),
        CmdStatus::BadResource,
        syn::SRQ_UNKNOWN,
    )?;
    let busy = res
        .qps
        .iter()
        .any(|(_, q)| q.ctx.rq_type() == RQ_SRQ && q.ctx.srqn_rmpn_xrqn() == srqn);
    ensure(!busy, CmdStatus::ResourceBusy, syn::SRQ_BUSY)?;
    res.srqs.remove(srqn);
    Ok(())
}

/// QUERY_SRQ: the context with the limit and the WQE counter.
pub(super) fn query_srq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let srqn = cmd.fixed::<QuerySrqIn>()?.srqn();
    cmd.output::<QuerySrqOut>()?;
    let Some(s) = ctx.state.res.srqs.get(srqn) else {
        return fail(CmdStatus::BadResource, syn::SRQ_UNKNOWN);
    };
    let mut c = Srqc::new_zeroed();
    c.set_log_srq_size(s.log_size);
    c.set_log_rq_stride(s.log_stride);
    c.set_cqn(s.cqn);
    c.set_log_page_size(s.buf.log_page_size.saturating_sub(12));
    c.set_pd(s.pd);
    c.set_rlky(s.rlky);
    c.set_lwm(s.lwm);
    c.set_wqe_cnt(s.ci);
    c.set_dbr_addr(s.dbr_addr);
    *cmd.output::<QuerySrqOut>()?.srq_context_entry_mut() = c;
    Ok(())
}

/// ARM_RQ (op_mod 1): sets an SRQ's limit.
pub(super) fn arm_rq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[ARM_RQ_SRQ])?;
    let i = cmd.fixed::<ArmRqIn>()?;
    cmd.output::<ArmRqOut>()?;
    let Some(s) = ctx.state.res.srqs.get_mut(i.srq_number()) else {
        return fail(CmdStatus::BadResource, syn::SRQ_UNKNOWN);
    };
    ensure(
        u32::from(i.lwm()) < (1u32 << s.log_size.min(31)),
        CmdStatus::BadParam,
        syn::SRQ_LWM,
    )?;
    s.lwm = i.lwm();
    Ok(())
}
