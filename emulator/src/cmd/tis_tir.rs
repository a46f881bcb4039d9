//! CREATE / DESTROY / QUERY_TIS and CREATE / DESTROY / QUERY_TIR: the transport interface
//! objects raw Ethernet traffic leaves through (a TIS, named by an SQ) and arrives through
//! (a TIR, named by a flow table entry).
//!
//! A TIS needs an allocated transport domain and a priority up to 7; a TIR a transport
//! domain and direct dispatch to an existing RQ (RQ tables and LRO are not modelled: BAD_PARAM).
//! Destroying a TIS an SQ uses, or a TIR an entry forwards to, is RESOURCE_BUSY.

use rnic_hw_regs::cmd::{
    CreateTirIn, CreateTirOut, CreateTisIn, CreateTisOut, DestroyTirIn, DestroyTirOut,
    DestroyTisIn, DestroyTisOut, QueryTirIn, QueryTirOut, QueryTisIn, QueryTisOut,
};
use rnic_hw_regs::ctx::TirDispType;
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, check_op_mod, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::{Tir, Tis};

/// CREATE_TIS.
pub(super) fn create_tis(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let c = *cmd.fixed::<CreateTisIn>()?.ctx();
    cmd.output::<CreateTisOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.tds.get(c.transport_domain()).is_some(),
        CmdStatus::BadResource,
        syn::TD_UNKNOWN,
    )?;
    ensure(
        !c.tls_en()
            && !c.strict_lag_tx_port_affinity()
            && c.lag_tx_port_affinity() == 0
            && c.underlay_qpn() == 0,
        CmdStatus::BadParam,
        syn::TIX_UNSUPPORTED,
    )?;
    ensure(c.prio() <= 7, CmdStatus::BadParam, syn::TIS_PRIO)?;
    let tis = Tis {
        transport_domain: c.transport_domain(),
        prio: c.prio(),
    };
    let Ok(tisn) = res.tises.insert(tis) else {
        return fail(CmdStatus::NoResources, syn::TIX_TABLE_FULL);
    };
    cmd.output::<CreateTisOut>()?.set_tisn(tisn);
    Ok(())
}

/// DESTROY_TIS.
pub(super) fn destroy_tis(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let tisn = cmd.fixed::<DestroyTisIn>()?.tisn();
    cmd.output::<DestroyTisOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.tises.get(tisn).is_some(),
        CmdStatus::BadResource,
        syn::TIS_UNKNOWN,
    )?;
    let busy = res.eth_sqs.iter().any(|(_, s)| s.tisn == tisn);
    ensure(!busy, CmdStatus::ResourceBusy, syn::TIS_BUSY)?;
    res.tises.remove(tisn);
    Ok(())
}

/// QUERY_TIS.
pub(super) fn query_tis(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let tisn = cmd.fixed::<QueryTisIn>()?.tisn();
    cmd.output::<QueryTisOut>()?;
    let Some(t) = ctx.state.res.tises.get(tisn).copied() else {
        return fail(CmdStatus::BadResource, syn::TIS_UNKNOWN);
    };
    let c = cmd.output::<QueryTisOut>()?.tis_context_mut();
    c.set_transport_domain(t.transport_domain);
    c.set_prio(t.prio);
    Ok(())
}

/// CREATE_TIR.
pub(super) fn create_tir(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let c = *cmd.fixed::<CreateTirIn>()?.ctx();
    cmd.output::<CreateTirOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.tds.get(c.transport_domain()).is_some(),
        CmdStatus::BadResource,
        syn::TD_UNKNOWN,
    )?;
    ensure(
        TirDispType::try_from(c.disp_type()) == Ok(TirDispType::Direct),
        CmdStatus::BadParam,
        syn::TIR_DISP_TYPE,
    )?;
    ensure(
        !c.tls_en() && c.packet_merge_mask() == 0 && !c.tunneled_offload_en(),
        CmdStatus::BadParam,
        syn::TIX_UNSUPPORTED,
    )?;
    ensure(
        res.eth_rqs.get(c.inline_rqn()).is_some(),
        CmdStatus::BadResource,
        syn::TIR_BAD_RQN,
    )?;
    let tir = Tir {
        transport_domain: c.transport_domain(),
        rqn: c.inline_rqn(),
    };
    let Ok(tirn) = res.tirs.insert(tir) else {
        return fail(CmdStatus::NoResources, syn::TIX_TABLE_FULL);
    };
    cmd.output::<CreateTirOut>()?.set_tirn(tirn);
    Ok(())
}

/// DESTROY_TIR.
pub(super) fn destroy_tir(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let tirn = cmd.fixed::<DestroyTirIn>()?.tirn();
    cmd.output::<DestroyTirOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.tirs.get(tirn).is_some(),
        CmdStatus::BadResource,
        syn::TIR_UNKNOWN,
    )?;
    ensure(
        !res.flow.uses_tir(tirn),
        CmdStatus::ResourceBusy,
        syn::TIR_BUSY,
    )?;
    res.tirs.remove(tirn);
    Ok(())
}

/// QUERY_TIR.
pub(super) fn query_tir(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let tirn = cmd.fixed::<QueryTirIn>()?.tirn();
    cmd.output::<QueryTirOut>()?;
    let Some(t) = ctx.state.res.tirs.get(tirn).copied() else {
        return fail(CmdStatus::BadResource, syn::TIR_UNKNOWN);
    };
    let c = cmd.output::<QueryTirOut>()?.tir_context_mut();
    c.set_transport_domain(t.transport_domain);
    c.set_disp_type(TirDispType::Direct.into());
    c.set_inline_rqn(t.rqn);
    Ok(())
}
