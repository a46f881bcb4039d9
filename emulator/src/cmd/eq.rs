//! CREATE_EQ, DESTROY_EQ, QUERY_EQ and GEN_EQE.
//!
//! CREATE_EQ needs an allocated UAR (BAD_RESOURCE otherwise), a size within
//! `log_max_eq_sz` (BAD_SIZE) and a PAS covering `64 << log_eq_size` bytes
//! (BAD_INPUT_LENGTH). The device writes nothing to the buffer at creation: the driver sets
//! every owner bit to 1. DESTROY_EQ of an EQ that CQs use is RESOURCE_BUSY.

use rnic_hw_regs::cmd::{
    CreateEqIn, CreateEqOut, DestroyEqIn, DestroyEqOut, GenEqeIn, GenEqeOut, QueryEqIn, QueryEqOut,
};
use rnic_hw_regs::eqe::Eqe;
use rnic_hw_regs::status::CmdStatus;
use zerocopy::FromBytes;

use super::{Cmd, CmdResult, PasSyndromes, check_op_mod, ensure, fail, queue_buf, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::Eq;

/// EQ state `st` values (eqc): armed and fired.
const EQ_ST_ARMED: u8 = 0x9;
/// The EQ fired its interrupt and waits for an arming doorbell.
const EQ_ST_FIRED: u8 = 0xA;

/// CREATE_EQ.
pub(super) fn create_eq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<CreateEqIn>()?;
    cmd.output::<CreateEqOut>()?;
    let c = i.eq_context_entry();
    ensure(
        ctx.state.res.uars.get(c.uar_page()).is_some(),
        CmdStatus::BadResource,
        syn::EQ_BAD_UAR,
    )?;
    ensure(
        c.log_eq_size() <= ctx.state.caps.general().log_max_eq_sz(),
        CmdStatus::BadSize,
        syn::EQ_TOO_BIG,
    )?;
    ensure(
        c.page_offset() == 0,
        CmdStatus::BadParam,
        syn::EQ_PAGE_OFFSET,
    )?;
    let len = 64u64 << c.log_eq_size();
    let buf = queue_buf(
        cmd,
        CreateEqIn::PAS_OFFSET,
        len,
        c.log_page_size(),
        PasSyndromes {
            page_size: syn::EQ_PAGE_SIZE,
            misaligned: syn::EQ_PAS_MISALIGNED,
            short: syn::EQ_PAS_SHORT,
        },
    )?;
    let mut events = [0u64; 4];
    for (w, e) in events.iter_mut().enumerate() {
        let at = 0x58 + 8 * w;
        *e = u64::from_be_bytes(i.0[at..at + 8].try_into().unwrap_or([0; 8]));
    }
    let limit = 1usize << ctx.state.caps.general().log_max_eq().min(8);
    if ctx.state.res.eqs.len() >= limit {
        return fail(CmdStatus::NoResources, syn::EQ_TABLE_FULL);
    }
    let eq = Eq {
        log_size: c.log_eq_size(),
        buf,
        uar: c.uar_page(),
        intr: c.intr(),
        events,
        pi: 0,
        ci: 0,
        armed: false,
    };
    let Ok(eqn) = ctx.state.res.eqs.insert(eq) else {
        return fail(CmdStatus::NoResources, syn::EQ_TABLE_FULL);
    };
    cmd.output::<CreateEqOut>()?.set_eq_number(eqn as u8);
    Ok(())
}

/// DESTROY_EQ.
pub(super) fn destroy_eq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let eqn = u32::from(cmd.fixed::<DestroyEqIn>()?.eq_number());
    cmd.output::<DestroyEqOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.eqs.get(eqn).is_some(),
        CmdStatus::BadResource,
        syn::EQ_UNKNOWN,
    )?;
    ensure(
        !res.cqs.iter().any(|(_, c)| u32::from(c.eqn) == eqn),
        CmdStatus::ResourceBusy,
        syn::EQ_BUSY,
    )?;
    res.eqs.remove(eqn);
    Ok(())
}

/// QUERY_EQ: the context with the device's counters and state, and the event bitmask.
pub(super) fn query_eq(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let eqn = u32::from(cmd.fixed::<QueryEqIn>()?.eq_number());
    cmd.output::<QueryEqOut>()?;
    let Some(eq) = ctx.state.res.eqs.get(eqn) else {
        return fail(CmdStatus::BadResource, syn::EQ_UNKNOWN);
    };
    let eq = eq.clone();
    let out = cmd.output::<QueryEqOut>()?;
    let c = out.eq_context_entry_mut();
    c.set_st(if eq.armed { EQ_ST_ARMED } else { EQ_ST_FIRED });
    c.set_log_eq_size(eq.log_size);
    c.set_uar_page(eq.uar);
    c.set_intr(eq.intr);
    c.set_log_page_size(eq.buf.log_page_size.saturating_sub(12));
    c.set_consumer_counter(eq.ci & 0xFF_FFFF);
    c.set_producer_counter(eq.pi & 0xFF_FFFF);
    out.set_event_bitmask(eq.events[0]);
    Ok(())
}

/// GEN_EQE: writes the given EQE (type, sub-type and data; the device sets the owner bit)
/// to EQ `eq_number`.
pub(super) fn gen_eqe(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<GenEqeIn>()?;
    cmd.output::<GenEqeOut>()?;
    let eqn = u32::from(i.eq_number());
    ensure(
        ctx.state.res.eqs.get(eqn).is_some(),
        CmdStatus::BadResource,
        syn::EQ_UNKNOWN,
    )?;
    let raw = i.eqe();
    let Ok(eqe) = Eqe::read_from_bytes(&raw[..]) else {
        return fail(CmdStatus::BadInputLength, syn::INPUT_SHORTER_THAN_LAYOUT);
    };
    // Only the event's type, sub-type and data come from the command; the device writes the
    // rest (owner bit) itself.
    let mut e = Eqe::default();
    e.set_event_type(eqe.event_type());
    e.set_sub_type(eqe.sub_type());
    e.set_data(eqe.data());
    let ok = crate::eq::write_eqe(ctx, eqn, &e);
    ensure(ok, CmdStatus::InternalError, syn::EQ_WRITE_FAILED)
}
