//! QUERY_HCA_CAP and SET_HCA_CAP.
//!
//! SET_HCA_CAP (before INIT_HCA only) honours the fields drivers set and ignores the others,
//! as firmware ignores read-only capability fields in the copy of the current block the
//! driver sends back:
//!
//! - general: `log_max_qp` (up to its maximum), `cmdif_checksum`, `log_uar_page_sz`,
//!   `uar_4k` (only if supported), `pkey_table_size`;
//! - RoCE: `sw_r_roce_src_udp_port` (only if supported);
//! - atomic: `atomic_req_8B_endianness_mode` (1 only if supported);
//! - ODP: nothing can be enabled (the device has no ODP).
//!
//! A value beyond the maximum is BAD_PARAM with the field's syndrome.

use rnic_hw_regs::caps::HcaCapUnion;
use rnic_hw_regs::cmd::{QueryHcaCapIn, QueryHcaCapOut, SetHcaCapIn, SetHcaCapOut};
use rnic_hw_regs::status::CmdStatus;
use zerocopy::IntoBytes;

use super::{Cmd, CmdResult, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;

/// QUERY_HCA_CAP: op_mod = cap_type << 1 | (1 = current, 0 = max).
pub(super) fn query_hca_cap(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    let i = cmd.input::<QueryHcaCapIn>();
    ensure(
        !i.other_function() && i.function_id() == 0,
        CmdStatus::BadParam,
        syn::OTHER_FUNCTION,
    )?;
    let (cap_type, max) = (cmd.op_mod >> 1, cmd.op_mod & 1 == 0);
    let Some(block) = ctx.state.caps.block(cap_type, max) else {
        return fail(CmdStatus::BadOp, syn::CAP_TYPE_UNSUPPORTED);
    };
    let block: HcaCapUnion = *block;
    let out = cmd.output::<QueryHcaCapOut>()?;
    *out.capability_mut() = block;
    Ok(())
}

/// SET_HCA_CAP: op_mod = cap_type << 1.
pub(super) fn set_hca_cap(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    ensure(cmd.op_mod & 1 == 0, CmdStatus::BadOp, syn::CAP_SET_MODE)?;
    let cap_type = cmd.op_mod >> 1;
    if ctx.state.caps.block(cap_type, true).is_none() {
        return fail(CmdStatus::BadOp, syn::CAP_TYPE_UNSUPPORTED);
    }
    let i = cmd.fixed::<SetHcaCapIn>()?;
    ensure(
        !i.other_function() && i.function_id() == 0,
        CmdStatus::BadParam,
        syn::OTHER_FUNCTION,
    )?;
    cmd.output::<SetHcaCapOut>()?;
    ensure(
        !ctx.state.hca.initialized,
        CmdStatus::BadSysState,
        syn::CAP_SET_AFTER_INIT,
    )?;
    let new = i.capability();
    let caps = &mut ctx.state.caps;
    match cap_type {
        0 => {
            let (m, n) = (*caps.general_max(), *new.cmd_hca_cap());
            ensure(
                n.log_max_qp() <= m.log_max_qp(),
                CmdStatus::BadParam,
                syn::CAP_LOG_MAX_QP,
            )?;
            ensure(
                n.cmdif_checksum() <= m.cmdif_checksum(),
                CmdStatus::BadParam,
                syn::CAP_CMDIF_CHECKSUM,
            )?;
            ensure(
                n.log_uar_page_sz() <= m.log_uar_page_sz(),
                CmdStatus::BadParam,
                syn::CAP_LOG_UAR_PAGE_SZ,
            )?;
            ensure(
                !n.uar_4k() || m.uar_4k(),
                CmdStatus::BadParam,
                syn::CAP_UAR_4K,
            )?;
            ensure(
                n.pkey_table_size() <= m.pkey_table_size(),
                CmdStatus::BadParam,
                syn::CAP_PKEY_TABLE_SIZE,
            )?;
            if let Some(cur) = caps.current_mut(0) {
                let g = cur.cmd_hca_cap_mut();
                g.set_log_max_qp(n.log_max_qp());
                g.set_cmdif_checksum(n.cmdif_checksum());
                g.set_log_uar_page_sz(n.log_uar_page_sz());
                g.set_uar_4k(n.uar_4k());
                g.set_pkey_table_size(n.pkey_table_size());
            }
        }
        2 => {
            // No ODP: every capability bit must stay 0.
            let b = new.odp_cap().as_bytes();
            ensure(b.iter().all(|x| *x == 0), CmdStatus::BadParam, syn::CAP_ODP)?;
        }
        3 => {
            let mode = new.atomic_caps().atomic_req_8B_endianness_mode();
            let supported = caps
                .block(3, true)
                .is_some_and(|b| b.atomic_caps().supported_atomic_req_8B_endianness_mode_1());
            ensure(
                mode == 0 || (mode == 1 && supported),
                CmdStatus::BadParam,
                syn::CAP_ATOMIC_ENDIANNESS,
            )?;
            if let Some(cur) = caps.current_mut(3) {
                cur.atomic_caps_mut()
                    .set_atomic_req_8B_endianness_mode(mode);
            }
        }
        4 => {
            let on = new.roce_cap().sw_r_roce_src_udp_port();
            let supported = caps
                .block(4, true)
                .is_some_and(|b| b.roce_cap().sw_r_roce_src_udp_port());
            ensure(
                !on || supported,
                CmdStatus::BadParam,
                syn::CAP_SW_R_ROCE_SRC_UDP_PORT,
            )?;
            if let Some(cur) = caps.current_mut(4) {
                cur.roce_cap_mut().set_sw_r_roce_src_udp_port(on);
            }
        }
        // Ethernet offloads and flow table: nothing settable.
        _ => {}
    }
    Ok(())
}
