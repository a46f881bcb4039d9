//! CREATE_MKEY, QUERY_MKEY, DESTROY_MKEY and QUERY_SPECIAL_CONTEXTS.
//!
//! Two access modes: PA (0; addresses are IOVAs; `length64` for the whole space, else
//! `[start_addr, start_addr + len)`) and MTT (1; `translations_octword_actual_size` octwords
//! of BE64 `page_addr | write | read` entries at input 0x110, the first entry being the page
//! that holds `start_addr`, pages of `1 << log_page_size` bytes). KLM (2) only as mlx5 creates
//! a memory window: `free`, `umr_en`, room for `translations_octword_size` KLM octowords (at
//! least one), bound to no QP, no `length64`; UMR WQEs bind it later (`crate::umr`); type 2
//! windows carry `en_rinval`. KSM is BAD_PARAM.
//! The key is `mkey_index << 8 | mkey_7_0`; MKey indices start at 1 (index 0 is the reserved
//! lkey). Local read is always allowed; lw, rr, rw and a come from the mkc.

use rnic_hw_regs::cmd::{
    CreateMkeyIn, CreateMkeyOut, DestroyMkeyIn, DestroyMkeyOut, QueryMkeyIn, QueryMkeyOut,
    QuerySpecialContextsOut,
};
use rnic_hw_regs::ctx::Mkc;
use rnic_hw_regs::status::CmdStatus;
use zerocopy::FromZeros;

use super::{Cmd, CmdResult, be64_list, check_op_mod, ensure, fail, syndrome as syn};
use crate::ctx::Ctx;
use crate::mkey::QPN_UNBOUND;
use crate::resources::{Mkey, MkeyTranslation, RESD_LKEY};

/// Access mode PA.
const ACCESS_MODE_PA: u8 = 0;
/// Access mode MTT.
const ACCESS_MODE_MTT: u8 = 1;
/// Access mode KLM (memory windows).
const ACCESS_MODE_KLM: u8 = 2;
/// Most KLM octowords a window may be created with.
const MAX_WINDOW_KLM_OCTOWORDS: u32 = 1 << 16;
/// Most MTT entries one CREATE_MKEY may carry.
const MAX_MTT_ENTRIES: u64 = 1 << 22;
/// MTT entry flag bits (read, write).
const MTT_FLAGS: u64 = 0x3;

/// CREATE_MKEY.
pub(super) fn create_mkey(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<CreateMkeyIn>()?;
    cmd.output::<CreateMkeyOut>()?;
    let c = i.memory_key_mkey_entry();
    ensure(
        ctx.state.res.pds.get(c.pd()).is_some(),
        CmdStatus::BadResource,
        syn::MKEY_BAD_PD,
    )?;
    ensure(
        c.qpn() == QPN_UNBOUND,
        CmdStatus::BadParam,
        syn::MKEY_QPN_BOUND,
    )?;
    let mode = (c.access_mode_4_2() << 2) | c.access_mode_1_0();
    // Only a window is created free (and a window only free).
    ensure(
        c.free() == (mode == ACCESS_MODE_KLM),
        CmdStatus::BadParam,
        syn::MKEY_FREE,
    )?;
    let (start, len) = (c.start_addr(), c.len());
    let translation = match mode {
        ACCESS_MODE_PA => {
            ensure(
                c.length64() || start.checked_add(len).is_some(),
                CmdStatus::BadParam,
                syn::MKEY_BAD_RANGE,
            )?;
            MkeyTranslation::Pa
        }
        ACCESS_MODE_MTT => {
            ensure(!c.length64(), CmdStatus::BadParam, syn::MKEY_MTT_LENGTH64)?;
            ensure(
                len <= 1 << ctx.state.caps.general().log_max_mrw_sz().min(63),
                CmdStatus::BadParam,
                syn::MKEY_TOO_LONG,
            )?;
            ensure(
                start.checked_add(len).is_some(),
                CmdStatus::BadParam,
                syn::MKEY_BAD_RANGE,
            )?;
            let log = c.log_page_size();
            ensure(
                (12..=30).contains(&log),
                CmdStatus::BadParam,
                syn::MKEY_PAGE_SIZE,
            )?;
            let page = 1u64 << log;
            let npages = ((start % page) + len).div_ceil(page);
            let given = u64::from(i.translations_octword_actual_size()) * 2;
            ensure(
                given <= MAX_MTT_ENTRIES,
                CmdStatus::LimitsExceeded,
                syn::MKEY_MTT_TOO_MANY,
            )?;
            ensure(npages <= given, CmdStatus::BadParam, syn::MKEY_MTT_TOO_FEW)?;
            let Some(entries) =
                be64_list(cmd.input, CreateMkeyIn::KLM_PAS_MTT_OFFSET, given as usize)
            else {
                return fail(CmdStatus::BadInputLength, syn::MKEY_MTT_SHORT);
            };
            let pages: Vec<u64> = entries[..npages as usize]
                .iter()
                .map(|e| e & !MTT_FLAGS)
                .collect();
            ensure(
                pages.iter().all(|p| p % page == 0),
                CmdStatus::BadParam,
                syn::MKEY_MTT_MISALIGNED,
            )?;
            MkeyTranslation::Mtt {
                pages,
                log_page_size: log,
            }
        }
        ACCESS_MODE_KLM => {
            let octowords = c.translations_octword_size();
            ensure(
                c.umr_en() && !c.length64() && (1..=MAX_WINDOW_KLM_OCTOWORDS).contains(&octowords),
                CmdStatus::BadParam,
                syn::MKEY_BAD_WINDOW,
            )?;
            MkeyTranslation::Window {
                klm_octowords: octowords,
                bound: None,
            }
        }
        _ => return fail(CmdStatus::BadParam, syn::MKEY_ACCESS_MODE),
    };
    let limit = 1usize << ctx.state.caps.general().log_max_mkey().min(24);
    if ctx.state.res.mkeys.len() >= limit {
        return fail(CmdStatus::NoResources, syn::MKEY_TABLE_FULL);
    }
    let m = Mkey {
        variant: c.mkey_7_0(),
        pd: c.pd(),
        qpn: c.qpn(),
        lw: c.lw(),
        rr: c.rr(),
        rw: c.rw(),
        a: c.a(),
        length64: c.length64(),
        start_addr: start,
        len,
        translation,
        free: c.free(),
        umr_en: c.umr_en(),
        rinval: c.en_rinval(),
    };
    let Ok(index) = ctx.state.res.mkeys.insert(m) else {
        return fail(CmdStatus::NoResources, syn::MKEY_TABLE_FULL);
    };
    cmd.output::<CreateMkeyOut>()?.set_mkey_index(index);
    Ok(())
}

/// QUERY_MKEY: the mkc as created, and the first four MTT entries.
pub(super) fn query_mkey(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let index = cmd.fixed::<QueryMkeyIn>()?.mkey_index();
    cmd.output::<QueryMkeyOut>()?;
    let Some(m) = ctx.state.res.mkeys.get(index) else {
        return fail(CmdStatus::BadResource, syn::MKEY_UNKNOWN);
    };
    let mut c = Mkc::new_zeroed();
    c.set_a(m.a);
    c.set_rw(m.rw);
    c.set_rr(m.rr);
    c.set_lw(m.lw);
    c.set_lr(true);
    c.set_qpn(m.qpn);
    c.set_mkey_7_0(m.variant);
    c.set_length64(m.length64);
    c.set_en_rinval(m.rinval);
    c.set_free(m.free);
    c.set_umr_en(m.umr_en);
    c.set_pd(m.pd);
    c.set_start_addr(m.start_addr);
    c.set_len(m.len);
    let mut mtt = [[0u8; 16]; 2];
    match &m.translation {
        MkeyTranslation::Pa => c.set_access_mode_1_0(ACCESS_MODE_PA),
        MkeyTranslation::Window { klm_octowords, .. } => {
            c.set_access_mode_1_0(ACCESS_MODE_KLM);
            c.set_translations_octword_size(*klm_octowords);
        }
        MkeyTranslation::Mtt {
            pages,
            log_page_size,
        } => {
            c.set_access_mode_1_0(ACCESS_MODE_MTT);
            c.set_log_page_size(*log_page_size);
            c.set_translations_octword_size(pages.len().div_ceil(2) as u32);
            for (k, p) in pages.iter().take(4).enumerate() {
                let at = (k % 2) * 8;
                mtt[k / 2][at..at + 8].copy_from_slice(&(p | MTT_FLAGS).to_be_bytes());
            }
        }
    }
    let out = cmd.output::<QueryMkeyOut>()?;
    *out.memory_key_mkey_entry_mut() = c;
    out.set_bsf0_klm0_pas_mtt0_1(mtt[0]);
    out.set_bsf1_klm1_pas_mtt2_3(mtt[1]);
    Ok(())
}

/// DESTROY_MKEY (input: the index, key >> 8).
pub(super) fn destroy_mkey(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let index = cmd.fixed::<DestroyMkeyIn>()?.mkey_index();
    cmd.output::<DestroyMkeyOut>()?;
    ensure(
        ctx.state.res.mkeys.remove(index).is_some(),
        CmdStatus::BadResource,
        syn::MKEY_UNKNOWN,
    )
}

/// QUERY_SPECIAL_CONTEXTS: the reserved lkey; no dump-fill or null mkey (their caps are 0),
/// so those read 0.
pub(super) fn query_special_contexts(_ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let out = cmd.output::<QuerySpecialContextsOut>()?;
    out.set_resd_lkey(RESD_LKEY);
    Ok(())
}
