//! CREATE_QP, DESTROY_QP, the QP state transitions and QUERY_QP.
//!
//! QP types RC (st 0), UC (1), UD (2) and QP1 (8, the port's GSI QP: UD's rules, one per
//! port, a second is BAD_PARAM; its Q_Key can only be 0x80010000, another is BAD_PARAM;
//! frames for DestQP 1 go to it); others are BAD_PARAM. CREATE_QP needs an existing
//! PD, UAR, send and receive CQs (and SRQ for `rq_type` 1), queue sizes within the caps and a
//! PAS covering the RQ then the SQ; the QP starts in RST.
//!
//! Transitions, each legal only from the states listed (else BAD_QP_STATE, 0x10):
//! RST2INIT (RST), INIT2INIT (INIT), INIT2RTR (INIT), RTR2RTS (RTR), RTS2RTS (RTS),
//! SQERR2RTS (SQER), 2ERR (any), 2RST (any). Required attributes, missing ones being
//! BAD_PARAM: RST2INIT port 1 (and a non-zero Q_Key on UD, the kernel always sets one);
//! INIT2RTR on RC/UC an MTU in 256..=the port's maximum, a remote QPN, a source GID index
//! naming a filled GID entry, `log_msg_max` and `log_rra_max` within the caps; RTR2RTS on RC
//! `log_sra_max` within the caps. Optional attributes are taken where `opt_param_mask`
//! selects them. 2ERR flushes the QP's outstanding WQEs (the queue engines'
//! `crate::sq::flush_qp`); 2RST forgets the queue state (consumer counters, PSNs).

use rnic_hw_regs::cmd::{
    CmdOpcode, CreateQpIn, CreateQpOut, DestroyQpIn, DestroyQpOut, Qp2ErrIn, QueryQpIn, QueryQpOut,
    Rst2InitQpIn, Rst2InitQpOut,
};
use rnic_hw_regs::ctx::{QpSt, QpState, Qpc, opt_param};
use rnic_hw_regs::roce::GSI_QKEY;
use rnic_hw_regs::status::CmdStatus;

use super::{Cmd, CmdResult, PasSyndromes, check_op_mod, ensure, fail, queue_buf, syndrome as syn};
use crate::ctx::Ctx;
use crate::resources::Qp;

/// `rq_type`: a normal RQ in the QP's buffer.
const RQ_NORMAL: u8 = 0;
/// `rq_type`: receives come from an SRQ.
const RQ_SRQ: u8 = 1;
/// `rq_type`: no receive queue.
const RQ_ZERO: u8 = 3;
/// The only port.
const PORT: u8 = 1;

/// CREATE_QP.
pub(super) fn create_qp(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let i = cmd.fixed::<CreateQpIn>()?;
    cmd.output::<CreateQpOut>()?;
    let mut c = *i.qpc();
    let st = QpSt::try_from(c.st());
    ensure(st.is_ok(), CmdStatus::BadParam, syn::QP_BAD_ST)?;
    let qp1 = st == Ok(QpSt::Qp1);
    ensure(
        !qp1 || ctx.state.res.gsi_qpn.is_none(),
        CmdStatus::BadParam,
        syn::QP_GSI_EXISTS,
    )?;
    let res = &ctx.state.res;
    ensure(
        res.pds.get(c.pd()).is_some(),
        CmdStatus::BadResource,
        syn::QP_BAD_PD,
    )?;
    ensure(
        res.uars.get(c.uar_page()).is_some(),
        CmdStatus::BadResource,
        syn::QP_BAD_UAR,
    )?;
    let rq_type = c.rq_type();
    ensure(
        matches!(rq_type, RQ_NORMAL | RQ_SRQ | RQ_ZERO),
        CmdStatus::BadParam,
        syn::QP_RQ_TYPE,
    )?;
    if !c.no_sq() {
        ensure(
            res.cqs.get(c.cqn_snd()).is_some(),
            CmdStatus::BadResource,
            syn::QP_BAD_CQN_SND,
        )?;
    }
    if rq_type != RQ_ZERO {
        ensure(
            res.cqs.get(c.cqn_rcv()).is_some(),
            CmdStatus::BadResource,
            syn::QP_BAD_CQN_RCV,
        )?;
    }
    if rq_type == RQ_SRQ {
        ensure(
            res.srqs.get(c.srqn_rmpn_xrqn()).is_some(),
            CmdStatus::BadResource,
            syn::QP_BAD_SRQ,
        )?;
    }
    let g = ctx.state.caps.general();
    ensure(
        c.log_sq_size() <= g.log_max_qp_sz(),
        CmdStatus::BadSize,
        syn::QP_SQ_TOO_BIG,
    )?;
    let rq_len = if rq_type == RQ_NORMAL {
        ensure(
            c.log_rq_size() <= g.log_max_qp_sz(),
            CmdStatus::BadSize,
            syn::QP_RQ_TOO_BIG,
        )?;
        let stride = 16u64 << c.log_rq_stride();
        ensure(
            stride <= u64::from(g.max_wqe_sz_rq()),
            CmdStatus::BadSize,
            syn::QP_RQ_STRIDE,
        )?;
        stride << c.log_rq_size()
    } else {
        0
    };
    let sq_len = if c.no_sq() {
        0
    } else {
        64u64 << c.log_sq_size()
    };
    ensure(
        c.page_offset() == 0,
        CmdStatus::BadParam,
        syn::QP_PAGE_OFFSET,
    )?;
    ensure(
        c.dbr_addr() % 8 == 0,
        CmdStatus::BadParam,
        syn::QP_DBR_MISALIGNED,
    )?;
    let limit = 1usize << g.log_max_qp().min(24);
    let buf = queue_buf(
        cmd,
        CreateQpIn::PAS_OFFSET,
        rq_len + sq_len,
        c.log_page_size(),
        PasSyndromes {
            page_size: syn::QP_PAGE_SIZE,
            misaligned: syn::QP_PAS_MISALIGNED,
            short: syn::QP_PAS_SHORT,
        },
    )?;
    if ctx.state.res.qps.len() >= limit {
        return fail(CmdStatus::NoResources, syn::QP_TABLE_FULL);
    }
    c.set_state(QpState::Rst.into());
    let Ok(qpn) = ctx.state.res.qps.insert(Qp::new(c, buf)) else {
        return fail(CmdStatus::NoResources, syn::QP_TABLE_FULL);
    };
    if qp1 {
        ctx.state.res.gsi_qpn = Some(qpn);
    }
    cmd.output::<CreateQpOut>()?.set_qpn(qpn);
    Ok(())
}

/// DESTROY_QP: in any state.
pub(super) fn destroy_qp(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let qpn = cmd.fixed::<DestroyQpIn>()?.qpn();
    cmd.output::<DestroyQpOut>()?;
    let found = ctx.state.res.qps.remove(qpn).is_some();
    if ctx.state.res.gsi_qpn == Some(qpn) {
        ctx.state.res.gsi_qpn = None;
    }
    ctx.state.res.qp_timers.set(qpn, None);
    ensure(found, CmdStatus::BadResource, syn::QP_UNKNOWN)
}

/// QUERY_QP: the current context, state included, with the device's WQE counters.
pub(super) fn query_qp(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[0])?;
    let qpn = cmd.fixed::<QueryQpIn>()?.qpn();
    cmd.output::<QueryQpOut>()?;
    let Some(qp) = ctx.state.res.qps.get(qpn) else {
        return fail(CmdStatus::BadResource, syn::QP_UNKNOWN);
    };
    let mut c = qp.ctx;
    c.set_hw_sq_wqebb_counter(qp.sq_ci);
    c.set_hw_rq_counter(u32::from(qp.rq_ci));
    *cmd.output::<QueryQpOut>()?.qpc_mut() = c;
    Ok(())
}

/// The states a transition starts from (`None`: any state) and the state it goes to.
fn transition(op: CmdOpcode) -> (Option<QpState>, QpState) {
    use CmdOpcode as O;
    match op {
        O::Rst2InitQp => (Some(QpState::Rst), QpState::Init),
        O::Init2InitQp => (Some(QpState::Init), QpState::Init),
        O::Init2RtrQp => (Some(QpState::Init), QpState::Rtr),
        O::Rtr2RtsQp => (Some(QpState::Rtr), QpState::Rts),
        O::Rts2RtsQp => (Some(QpState::Rts), QpState::Rts),
        O::Sqerr2RtsQp => (Some(QpState::Sqer), QpState::Rts),
        O::Qp2Err => (None, QpState::Err),
        _ => (None, QpState::Rst),
    }
}

/// Takes the optional attributes `mask` selects from `n` into `c`.
fn apply_optional(c: &mut Qpc, n: &Qpc, mask: u32) {
    if mask & opt_param::RRE != 0 {
        c.set_rre(n.rre());
    }
    if mask & opt_param::RWE != 0 {
        c.set_rwe(n.rwe());
    }
    if mask & opt_param::RAE != 0 {
        c.set_rae(n.rae());
        c.set_atomic_mode(n.atomic_mode());
    }
    if mask & opt_param::Q_KEY != 0 {
        c.set_q_key(n.q_key());
    }
    if mask & opt_param::RNR_TIMEOUT != 0 {
        c.set_min_rnr_nak(n.min_rnr_nak());
    }
    if mask & opt_param::SRA_MAX != 0 {
        c.set_log_sra_max(n.log_sra_max());
    }
    if mask & opt_param::RRA_MAX != 0 {
        c.set_log_rra_max(n.log_rra_max());
    }
    if mask & opt_param::RETRY_COUNT != 0 {
        c.set_retry_count(n.retry_count());
    }
    if mask & opt_param::RNR_RETRY != 0 {
        c.set_rnr_retry(n.rnr_retry());
    }
    if mask & opt_param::PRIMARY_ADDR_PATH != 0 {
        *c.primary_address_path_mut() = *n.primary_address_path();
    }
    if mask & opt_param::PKEY_INDEX != 0 {
        let p = n.primary_address_path().pkey_index();
        c.primary_address_path_mut().set_pkey_index(p);
    }
    if mask & opt_param::ACK_TIMEOUT != 0 {
        let t = n.primary_address_path().ack_timeout();
        c.primary_address_path_mut().set_ack_timeout(t);
    }
}

/// The context a reset leaves: the creation attributes survive, everything the transitions
/// set does not.
fn reset_qpc(keep: &Qpc) -> Qpc {
    let mut c = Qpc::default();
    c.set_st(keep.st());
    c.set_pd(keep.pd());
    c.set_uar_page(keep.uar_page());
    c.set_user_index(keep.user_index());
    c.set_log_page_size(keep.log_page_size());
    c.set_log_rq_size(keep.log_rq_size());
    c.set_log_rq_stride(keep.log_rq_stride());
    c.set_no_sq(keep.no_sq());
    c.set_log_sq_size(keep.log_sq_size());
    c.set_ts_format(keep.ts_format());
    c.set_rlky(keep.rlky());
    c.set_fre(keep.fre());
    c.set_cqn_snd(keep.cqn_snd());
    c.set_cqn_rcv(keep.cqn_rcv());
    c.set_dbr_addr(keep.dbr_addr());
    c.set_rq_type(keep.rq_type());
    c.set_srqn_rmpn_xrqn(keep.srqn_rmpn_xrqn());
    c.set_pm_state(keep.pm_state());
    c
}

/// Every QP transition.
pub(super) fn modify_qp(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    use CmdOpcode as O;
    check_op_mod(cmd, &[0])?;
    let qpn = cmd.fixed::<Qp2ErrIn>()?.qpn();
    let (from, to) = transition(cmd.opcode);
    // The commands with a context share RST2INIT's shape (qpn, opt_param_mask, qpc at 0x18).
    let (mask, n) = if matches!(cmd.opcode, O::Qp2Err | O::Qp2Rst) {
        (0, Qpc::default())
    } else {
        let i = cmd.fixed::<Rst2InitQpIn>()?;
        (i.opt_param_mask(), *i.qpc())
    };
    // Every transition's output is the generic 0x10-byte one.
    cmd.output::<Rst2InitQpOut>()?;
    let max_mtu = ctx.state.profile.max_mtu;
    // INIT2RTR's GID: whether the path's index is inside the table, and set there.
    let gid_idx = usize::from(n.primary_address_path().src_addr_index());
    let gid = ctx.state.res.gids.get(gid_idx).map(Option::is_some);
    let g = *ctx.state.caps.general();
    let Some(qp) = ctx.state.res.qps.get_mut(qpn) else {
        return fail(CmdStatus::BadResource, syn::QP_UNKNOWN);
    };
    let state = QpState::try_from(qp.ctx.state()).unwrap_or(QpState::Err);
    if let Some(from) = from {
        ensure(state == from, CmdStatus::BadQpState, syn::QP_BAD_TRANSITION)?;
    }
    let st = QpSt::try_from(qp.ctx.st()).unwrap_or(QpSt::Rc);
    let connected = !st.is_datagram();
    // QP1's Q_Key is the GSI one (IBTA 13.4.5.3): a transition that sets another is refused.
    let sets_qkey = cmd.opcode == O::Rst2InitQp || mask & opt_param::Q_KEY != 0;
    ensure(
        st != QpSt::Qp1 || !sets_qkey || n.q_key() == GSI_QKEY,
        CmdStatus::BadParam,
        syn::QP_GSI_QKEY,
    )?;
    let mut c = qp.ctx;
    match cmd.opcode {
        O::Rst2InitQp | O::Init2InitQp => {
            let path = n.primary_address_path();
            let port = path.vhca_port_num();
            if cmd.opcode == O::Rst2InitQp || port != 0 {
                ensure(port == PORT, CmdStatus::BadParam, syn::QP_BAD_PORT)?;
            }
            if cmd.opcode == O::Rst2InitQp {
                ensure(
                    connected || n.q_key() != 0,
                    CmdStatus::BadParam,
                    syn::QP_UD_NO_QKEY,
                )?;
                c.primary_address_path_mut().set_vhca_port_num(PORT);
                c.primary_address_path_mut()
                    .set_pkey_index(path.pkey_index());
                c.set_pm_state(n.pm_state());
                c.set_rre(n.rre());
                c.set_rwe(n.rwe());
                c.set_rae(n.rae());
                c.set_atomic_mode(n.atomic_mode());
                if !connected {
                    c.set_q_key(n.q_key());
                }
            }
        }
        O::Init2RtrQp if connected => {
            ensure(
                (1..=max_mtu).contains(&n.mtu()),
                CmdStatus::BadParam,
                syn::QP_BAD_MTU,
            )?;
            ensure(
                n.remote_qpn() != 0,
                CmdStatus::BadParam,
                syn::QP_NO_REMOTE_QPN,
            )?;
            let path = *n.primary_address_path();
            ensure(gid.is_some(), CmdStatus::BadParam, syn::QP_GID_INDEX)?;
            ensure(gid == Some(true), CmdStatus::BadParam, syn::QP_GID_EMPTY)?;
            ensure(
                n.log_msg_max() <= g.log_max_msg(),
                CmdStatus::BadParam,
                syn::QP_MSG_MAX,
            )?;
            ensure(
                n.log_rra_max() <= g.log_max_ra_res_qp(),
                CmdStatus::BadParam,
                syn::QP_RRA_MAX,
            )?;
            c.set_mtu(n.mtu());
            c.set_log_msg_max(n.log_msg_max());
            c.set_remote_qpn(n.remote_qpn());
            c.set_next_rcv_psn(n.next_rcv_psn());
            c.set_log_rra_max(n.log_rra_max());
            c.set_min_rnr_nak(n.min_rnr_nak());
            let port = c.primary_address_path().vhca_port_num();
            let pkey = c.primary_address_path().pkey_index();
            *c.primary_address_path_mut() = path;
            if path.vhca_port_num() == 0 {
                c.primary_address_path_mut().set_vhca_port_num(port);
            }
            if mask & opt_param::PKEY_INDEX == 0 {
                c.primary_address_path_mut().set_pkey_index(pkey);
            }
        }
        O::Rtr2RtsQp => {
            if st == QpSt::Rc {
                ensure(
                    n.log_sra_max() <= g.log_max_ra_req_qp(),
                    CmdStatus::BadParam,
                    syn::QP_SRA_MAX,
                )?;
                c.set_log_sra_max(n.log_sra_max());
                c.set_retry_count(n.retry_count());
                c.set_rnr_retry(n.rnr_retry());
                c.set_log_ack_req_freq(n.log_ack_req_freq());
                let t = n.primary_address_path().ack_timeout();
                c.primary_address_path_mut().set_ack_timeout(t);
            }
            c.set_next_send_psn(n.next_send_psn());
        }
        O::Qp2Rst => {
            c = reset_qpc(&c);
            qp.sq_ci = 0;
            qp.rq_ci = 0;
            qp.tr = Some(Box::default());
        }
        _ => {}
    }
    if !matches!(cmd.opcode, O::Qp2Err | O::Qp2Rst) {
        apply_optional(&mut c, &n, mask);
    }
    c.set_state(to.into());
    qp.ctx = c;
    if cmd.opcode == O::Qp2Rst {
        // The reset transport state has no timers armed.
        ctx.state.res.qp_timers.set(qpn, None);
    }
    if to == QpState::Err {
        crate::sq::flush_qp(ctx, qpn);
    }
    Ok(())
}
