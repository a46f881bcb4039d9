//! HCA life cycle: ENABLE_HCA, DISABLE_HCA, INIT_HCA, TEARDOWN_HCA, QUERY_ISSI, SET_ISSI,
//! QUERY_ADAPTER and NOP.
//!
//! The order a ConnectX enforces: ENABLE_HCA first (the dispatcher refuses everything else
//! before it with BAD_SYS_STATE); INIT_HCA once, with the boot and init pages given;
//! TEARDOWN_HCA destroys every object; DISABLE_HCA only after TEARDOWN_HCA and after every
//! firmware page was taken back. ENABLE_HCA after DISABLE_HCA starts over (capabilities at
//! their defaults, no objects).

use rnic_hw_regs::cmd::{
    DisableHcaIn, DisableHcaOut, EnableHcaIn, EnableHcaOut, InitHcaOut, NopOut, QueryAdapterOut,
    QueryIssiOut, SetIssiIn, SetIssiOut, TEARDOWN_HCA_PROFILE_FORCE, TEARDOWN_HCA_PROFILE_GRACEFUL,
    TeardownHcaIn, TeardownHcaOut,
};
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, check_op_mod, ensure, fail, syndrome as syn};
use crate::caps::Caps;
use crate::ctx::Ctx;
use crate::hca::HcaState;
use crate::resources::Resources;

/// ISSIs this device supports (bit n = ISSI n): a ConnectX-4 reports 0x2.
pub(crate) const SUPPORTED_ISSI: u32 = 0x2;

/// Mellanox's IEEE OUI (QUERY_ADAPTER `ieee_vendor_id`).
const MELLANOX_OUI: u32 = 0x0002C9;
/// PCI vendor ID of Mellanox / NVIDIA networking.
const PCI_VENDOR: u16 = 0x15B3;

/// ENABLE_HCA: function 0 only; once until DISABLE_HCA.
pub(super) fn enable_hca(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.input::<EnableHcaIn>();
    ensure(
        i.function_id() == 0 && !i.embedded_cpu_function(),
        CmdStatus::BadParam,
        syn::OTHER_FUNCTION,
    )?;
    cmd.output::<EnableHcaOut>()?;
    ensure(
        !ctx.state.hca.enabled,
        CmdStatus::BadSysState,
        syn::ENABLE_TWICE,
    )?;
    let profile = &ctx.state.profile;
    ctx.state.caps = Caps::new(profile);
    ctx.state.res = Resources::new(profile);
    ctx.state.pages.runtime = 0;
    ctx.state.hca = HcaState {
        enabled: true,
        ..HcaState::default()
    };
    Ok(())
}

/// DISABLE_HCA: after TEARDOWN_HCA and with every page taken back.
pub(super) fn disable_hca(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.input::<DisableHcaIn>();
    ensure(
        i.function_id() == 0 && !i.embedded_cpu_function(),
        CmdStatus::BadParam,
        syn::OTHER_FUNCTION,
    )?;
    cmd.output::<DisableHcaOut>()?;
    ensure(
        !ctx.state.hca.initialized,
        CmdStatus::BadSysState,
        syn::DISABLE_WHILE_INITIALIZED,
    )?;
    ensure(
        ctx.state.pages.held.is_empty(),
        CmdStatus::BadSysState,
        syn::DISABLE_WITH_PAGES_HELD,
    )?;
    ctx.state.hca = HcaState::default();
    Ok(())
}

/// INIT_HCA: once, with boot and init pages held. The real ConnectX-4 accepted the kernel's
/// 16-byte input, so nothing past the header is required.
pub(super) fn init_hca(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    cmd.output::<InitHcaOut>()?;
    let hca = &ctx.state.hca;
    ensure(
        !hca.initialized && !hca.torn_down,
        CmdStatus::BadSysState,
        syn::INIT_TWICE,
    )?;
    let pages = &ctx.state.pages;
    ensure(
        pages.held_count() >= pages.boot + pages.init,
        CmdStatus::NoResources,
        syn::INIT_PAGES_MISSING,
    )?;
    ctx.state.hca.initialized = true;
    Ok(())
}

/// TEARDOWN_HCA: graceful (0) or force (1); every object is gone afterwards and firmware
/// wants no more pages.
pub(super) fn teardown_hca(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let profile = cmd.input::<TeardownHcaIn>().profile();
    ensure(
        matches!(
            profile,
            TEARDOWN_HCA_PROFILE_GRACEFUL | TEARDOWN_HCA_PROFILE_FORCE
        ),
        CmdStatus::BadParam,
        syn::TEARDOWN_BAD_PROFILE,
    )?;
    let out = cmd.output::<TeardownHcaOut>()?;
    if !ctx.state.hca.initialized {
        return fail(CmdStatus::BadSysState, syn::TEARDOWN_NOT_INITIALIZED);
    }
    out.set_state(false);
    ctx.state.res = Resources::new(&ctx.state.profile);
    ctx.state.pages.runtime = 0;
    ctx.state.hca.initialized = false;
    ctx.state.hca.torn_down = true;
    Ok(())
}

/// QUERY_ISSI: the current ISSI and the supported mask (0x2 as on a ConnectX-4).
pub(super) fn query_issi(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let issi = ctx.state.hca.issi;
    let out = cmd.output::<QueryIssiOut>()?;
    out.set_current_issi(issi);
    out.set_supported_issi_dw0(SUPPORTED_ISSI);
    Ok(())
}

/// SET_ISSI: an ISSI in the supported mask, or 0 (the default, always accepted); only before
/// INIT_HCA.
pub(super) fn set_issi(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let issi = cmd.fixed::<SetIssiIn>()?.current_issi();
    cmd.output::<SetIssiOut>()?;
    ensure(
        !ctx.state.hca.initialized,
        CmdStatus::BadSysState,
        syn::ISSI_AFTER_INIT,
    )?;
    ensure(
        issi == 0 || (issi < 32 && SUPPORTED_ISSI & (1 << issi) != 0),
        CmdStatus::BadParam,
        syn::ISSI_UNSUPPORTED,
    )?;
    ctx.state.hca.issi = issi;
    Ok(())
}

/// QUERY_ADAPTER: Mellanox's OUI, the PCI vendor and the profile's PSID.
pub(super) fn query_adapter(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let mut psid = [0u8; 16];
    let src = ctx.state.profile.psid.as_bytes();
    let n = src.len().min(16);
    psid[..n].copy_from_slice(&src[..n]);
    let out = cmd.output::<QueryAdapterOut>()?;
    let a = out.query_adapter_struct_mut();
    a.set_ieee_vendor_id(MELLANOX_OUI);
    a.set_vsd_vendor_id(PCI_VENDOR);
    a.set_vsd_contd_psid(psid);
    Ok(())
}

/// NOP: does nothing.
pub(super) fn nop(_ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    cmd.output::<NopOut>()?;
    Ok(())
}
