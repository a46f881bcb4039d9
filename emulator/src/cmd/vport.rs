//! QUERY/MODIFY_NIC_VPORT_CONTEXT and QUERY/MODIFY_VPORT_STATE, for this function's own
//! vport (0) only.
//!
//! The NIC vport context reports the profile's permanent MAC, the MTU and roce_en.
//! MODIFY_NIC_VPORT_CONTEXT honours `roce_en` and `mtu` (68..=9978) through field_select;
//! the permanent address is read-only (BAD_PARAM); other selected fields (local loopback,
//! promiscuous mode, address lists, GUIDs) are accepted and have no effect on this model.

use rnic_hw_regs::cmd::{
    ModifyNicVportContextIn, ModifyNicVportContextOut, ModifyVportStateIn, ModifyVportStateOut,
    QueryNicVportContextIn, QueryNicVportContextOut, QueryVportStateIn, QueryVportStateOut,
};
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, check_op_mod, ensure, syndrome as syn};
use crate::ctx::Ctx;

/// Vport state: up.
const VPORT_STATE_UP: u8 = 1;
/// Vport state: down.
const VPORT_STATE_DOWN: u8 = 0;
/// Largest MTU the port accepts (a ConnectX-4's maximum Ethernet MTU).
const MAX_MTU: u16 = 9978;
/// Smallest MTU (IPv4's minimum).
const MIN_MTU: u16 = 68;

/// Only vport 0 (this function) exists.
fn own_vport(other: bool, number: u16) -> CmdResult {
    ensure(
        !other || number == 0,
        CmdStatus::BadParam,
        syn::VPORT_NUMBER,
    )
}

/// QUERY_NIC_VPORT_CONTEXT.
pub(super) fn query_nic_vport_context(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.input::<QueryNicVportContextIn>();
    own_vport(i.other_vport(), i.vport_number())?;
    let v = ctx.state.res.vport.clone();
    let out = cmd.output::<QueryNicVportContextOut>()?;
    let c = out.nic_vport_context_mut();
    c.set_roce_en(v.roce_en);
    c.set_mtu(v.mtu);
    let m = v.mac;
    let a = c.permanent_address_mut();
    a.set_mac_addr_47_32(u16::from_be_bytes([m[0], m[1]]));
    a.set_mac_addr_31_0(u32::from_be_bytes([m[2], m[3], m[4], m[5]]));
    Ok(())
}

/// MODIFY_NIC_VPORT_CONTEXT.
pub(super) fn modify_nic_vport_context(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<ModifyNicVportContextIn>()?;
    own_vport(i.other_vport(), i.vport_number())?;
    cmd.output::<ModifyNicVportContextOut>()?;
    let sel = i.field_select();
    let c = i.nic_vport_context();
    ensure(
        !sel.permanent_address(),
        CmdStatus::BadParam,
        syn::VPORT_PERMANENT_ADDRESS,
    )?;
    if sel.mtu() {
        ensure(
            (MIN_MTU..=MAX_MTU).contains(&c.mtu()),
            CmdStatus::BadParam,
            syn::VPORT_MTU,
        )?;
        ctx.state.res.vport.mtu = c.mtu();
    }
    if sel.roce_en() {
        ctx.state.res.vport.roce_en = c.roce_en();
    }
    Ok(())
}

/// QUERY_VPORT_STATE: the link is up after INIT_HCA unless the administrative state is down.
pub(super) fn query_vport_state(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0, 1])?;
    let i = cmd.input::<QueryVportStateIn>();
    own_vport(i.other_vport(), i.vport_number())?;
    let admin = ctx.state.res.vport.admin_state;
    let out = cmd.output::<QueryVportStateOut>()?;
    out.set_admin_state(admin);
    out.set_state(if admin == 0 {
        VPORT_STATE_DOWN
    } else {
        VPORT_STATE_UP
    });
    Ok(())
}

/// MODIFY_VPORT_STATE: admin_state 0 (down), 1 (up) or 2 (follow the port).
pub(super) fn modify_vport_state(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0, 1])?;
    let i = cmd.fixed::<ModifyVportStateIn>()?;
    own_vport(i.other_vport(), i.vport_number())?;
    cmd.output::<ModifyVportStateOut>()?;
    ensure(
        i.admin_state() <= 2,
        CmdStatus::BadParam,
        syn::VPORT_ADMIN_STATE,
    )?;
    ctx.state.res.vport.admin_state = i.admin_state();
    Ok(())
}
