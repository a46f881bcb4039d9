//! QUERY_PAGES and MANAGE_PAGES (firmware page accounting is in [`crate::pages`]).

use rnic_hw_regs::cmd::{ManagePagesIn, ManagePagesOut, QueryPagesIn, QueryPagesOut, op_mod};
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, be64_list, check_op_mod, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;

/// The adapter page size.
const PAGE: u64 = 4096;

/// Checks that the command is about this function (function_id 0, not the embedded CPU).
fn this_function(function_id: u16, ecpf: bool) -> CmdResult {
    ensure(
        function_id == 0 && !ecpf,
        CmdStatus::BadParam,
        syn::OTHER_FUNCTION,
    )
}

/// QUERY_PAGES: boot (1), init (2) or regular (3) page count for function 0.
pub(super) fn query_pages(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    let i = cmd.input::<QueryPagesIn>();
    this_function(i.function_id(), i.embedded_cpu_function())?;
    let pages = &ctx.state.pages;
    let n = match cmd.op_mod {
        op_mod::QUERY_PAGES_BOOT => pages.boot_missing(),
        op_mod::QUERY_PAGES_INIT => pages.init_missing(),
        op_mod::QUERY_PAGES_REGULAR => pages.regular_delta(&ctx.state.hca),
        _ => return fail(CmdStatus::BadOp, syn::QUERY_PAGES_BAD_MODE),
    };
    let n = i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX });
    let out = cmd.output::<QueryPagesOut>()?;
    out.set_function_id(0);
    out.set_num_pages_signed(n);
    Ok(())
}

/// MANAGE_PAGES: can't give (0), give (1), take (2).
pub(super) fn manage_pages(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(
        cmd,
        &[
            op_mod::MANAGE_PAGES_CANT_GIVE,
            op_mod::MANAGE_PAGES_GIVE,
            op_mod::MANAGE_PAGES_TAKE,
        ],
    )?;
    let i = cmd.fixed::<ManagePagesIn>()?;
    this_function(i.function_id(), i.embedded_cpu_function())?;
    let n = i.input_num_entries() as usize;
    match cmd.op_mod {
        op_mod::MANAGE_PAGES_GIVE => give(ctx, cmd, n),
        op_mod::MANAGE_PAGES_TAKE => take(ctx, cmd, n),
        _ => {
            cmd.output::<ManagePagesOut>()?;
            let hca = ctx.state.hca.clone();
            ctx.state.pages.cant_give(&hca);
            Ok(())
        }
    }
}

/// MANAGE_PAGES give: every address 4 KiB aligned, new, and reachable by the device.
fn give(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>, n: usize) -> CmdResult {
    let Some(list) = be64_list(cmd.input, ManagePagesIn::PAS_OFFSET, n) else {
        return fail(CmdStatus::BadInputLength, syn::PAGES_LIST_SHORT);
    };
    cmd.output::<ManagePagesOut>()?;
    let pages = &ctx.state.pages;
    ensure(
        pages.held.len().saturating_add(n) <= pages.max,
        CmdStatus::NoResources,
        syn::PAGES_TOO_MANY,
    )?;
    let mut fresh = std::collections::BTreeSet::new();
    for &a in &list {
        ensure(
            a != 0 && a % PAGE == 0,
            CmdStatus::BadParam,
            syn::PAGE_MISALIGNED,
        )?;
        ensure(
            !pages.held.contains(&a) && fresh.insert(a),
            CmdStatus::BadParam,
            syn::PAGE_DUPLICATE,
        )?;
        // Firmware will use the whole page: its first and last bytes must be reachable.
        let mut b = [0u8; 1];
        let reachable = ctx.dma.read(a, &mut b).is_ok()
            && a.checked_add(PAGE - 1)
                .is_some_and(|last| ctx.dma.read(last, &mut b).is_ok());
        ensure(reachable, CmdStatus::BadParam, syn::PAGE_UNMAPPED)?;
    }
    ctx.state.pages.held.extend(fresh);
    Ok(())
}

/// MANAGE_PAGES take: up to `n` pages firmware does not need; the output must have room
/// for `n` addresses.
fn take(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>, n: usize) -> CmdResult {
    let room = cmd.output.len().saturating_sub(ManagePagesOut::PAS_OFFSET) / 8;
    ensure(
        cmd.output.len() >= ManagePagesOut::PAS_OFFSET && room >= n,
        CmdStatus::BadOutputLength,
        syn::PAGES_OUTPUT_SHORT,
    )?;
    let hca = ctx.state.hca.clone();
    let taken = ctx.state.pages.take(n, &hca);
    let out = cmd.output::<ManagePagesOut>()?;
    out.set_output_num_entries(taken.len() as u32);
    for (k, a) in taken.iter().enumerate() {
        let at = ManagePagesOut::PAS_OFFSET + 8 * k;
        if let Some(slot) = cmd.output.get_mut(at..at + 8) {
            slot.copy_from_slice(&a.to_be_bytes());
        }
    }
    Ok(())
}

/// A run-time page request for `n` pages (negative: pages firmware gives back): recorded in
/// the demand and posted as a page-request EQE. Returns whether an EQ took the event.
pub(crate) fn request(ctx: &mut Ctx<'_>, n: i32) -> bool {
    ctx.state.pages.runtime += i64::from(n);
    let mut e = rnic_hw_regs::eqe::Eqe::of(rnic_hw_regs::eqe::EventType::PageRequest);
    e.set_num_pages_signed(n); // func_id 0: the physical function
    crate::eq::post_event(ctx, &e)
}
