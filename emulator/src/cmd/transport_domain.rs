//! ALLOC_TRANSPORT_DOMAIN and DEALLOC_TRANSPORT_DOMAIN: the domain TISs and TIRs belong to.
//! Freeing a domain a TIS or TIR uses is RESOURCE_BUSY.

use rnic_hw_regs::cmd::{
    AllocTransportDomainOut, DeallocTransportDomainIn, DeallocTransportDomainOut,
};
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, check_op_mod, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::TransportDomain;

/// ALLOC_TRANSPORT_DOMAIN.
pub(super) fn alloc_transport_domain(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    cmd.output::<AllocTransportDomainOut>()?;
    let Ok(td) = ctx.state.res.tds.insert(TransportDomain) else {
        return fail(CmdStatus::NoResources, syn::TD_TABLE_FULL);
    };
    cmd.output::<AllocTransportDomainOut>()?
        .set_transport_domain(td);
    Ok(())
}

/// DEALLOC_TRANSPORT_DOMAIN.
pub(super) fn dealloc_transport_domain(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let td = cmd.fixed::<DeallocTransportDomainIn>()?.transport_domain();
    cmd.output::<DeallocTransportDomainOut>()?;
    let res = &mut ctx.state.res;
    ensure(
        res.tds.get(td).is_some(),
        CmdStatus::BadResource,
        syn::TD_UNKNOWN,
    )?;
    let busy = res.tises.iter().any(|(_, t)| t.transport_domain == td)
        || res.tirs.iter().any(|(_, t)| t.transport_domain == td);
    ensure(!busy, CmdStatus::ResourceBusy, syn::TD_BUSY)?;
    res.tds.remove(td);
    Ok(())
}
