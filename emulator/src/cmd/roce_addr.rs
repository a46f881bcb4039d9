//! SET_ROCE_ADDRESS and QUERY_ROCE_ADDRESS: the GID table (RoCE cap
//! `roce_address_table_size` entries). An index beyond it is BAD_INDEX (0x0A); an all-zero
//! address clears the entry.

use rnic_hw_regs::cmd::{
    QueryRoceAddressIn, QueryRoceAddressOut, SetRoceAddressIn, SetRoceAddressOut,
};
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, check_op_mod, ensure, syndrome as syn};
use crate::ctx::Ctx;

/// The port is 1; 0 means this function's port too (single-port devices leave it 0).
fn check_port(port: u8) -> CmdResult {
    ensure(port <= 1, CmdStatus::BadParam, syn::GID_PORT)
}

/// QUERY_ROCE_ADDRESS: the entry, or zeros when it is empty.
pub(super) fn query_roce_address(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<QueryRoceAddressIn>()?;
    check_port(i.vhca_port_num())?;
    let idx = usize::from(i.roce_address_index());
    let gids = &ctx.state.res.gids;
    ensure(idx < gids.len(), CmdStatus::BadIndex, syn::GID_INDEX)?;
    let entry = gids[idx];
    let out = cmd.output::<QueryRoceAddressOut>()?;
    if let Some(e) = entry {
        *out.roce_address_mut() = e;
    }
    Ok(())
}

/// SET_ROCE_ADDRESS.
pub(super) fn set_roce_address(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<SetRoceAddressIn>()?;
    cmd.output::<SetRoceAddressOut>()?;
    check_port(i.vhca_port_num())?;
    let idx = usize::from(i.roce_address_index());
    ensure(
        idx < ctx.state.res.gids.len(),
        CmdStatus::BadIndex,
        syn::GID_INDEX,
    )?;
    let a = *i.roce_address();
    let empty = a.source_l3_address() == [0; 16];
    if !empty {
        ensure(a.roce_version() <= 2, CmdStatus::BadParam, syn::GID_VERSION)?;
        ensure(a.roce_l3_type() <= 1, CmdStatus::BadParam, syn::GID_L3_TYPE)?;
    }
    ctx.state.res.set_gid(idx, (!empty).then_some(a));
    Ok(())
}
