//! The command processor's object commands, from the host side: EQ, CQ, MKey, QP (every
//! transition, legal and illegal) and SRQ, with the PRM status of every bad input.

mod common;

use common::host::{BringUp, Host};
use rnic_emulator::Profile;
use rnic_hw_regs::cmd::{self, CmdIn, op_mod};
use rnic_hw_regs::ctx::{QpState, opt_param};
use rnic_hw_regs::eqe::Eqe;
use rnic_hw_regs::status::CmdStatus;
use zerocopy::FromBytes;

/// A host after the bring-up.
fn up() -> (Host, BringUp) {
    let mut h = Host::small();
    let b = h.bring_up();
    (h, b)
}

/// The CREATE_CQ input for a CQ of `1 << log_size` 64-byte CQEs on the bring-up's UAR and
/// EQ, and its PAS.
fn cq_input(h: &mut Host, b: &BringUp, log_size: u8) -> (cmd::CreateCqIn, Vec<u8>) {
    let (_, pas) = h.queue_buf(64 << log_size);
    let dbr = h.alloc(64);
    let mut i = cmd::CreateCqIn::new_cmd();
    let c = i.cq_context_mut();
    c.set_log_cq_size(log_size);
    c.set_uar_page(b.uar);
    c.set_c_eqn_or_apu_element(u32::from(b.eqn));
    c.set_dbr_addr(dbr);
    (i, pas)
}

/// CREATE_CQ: the CQN.
fn create_cq(h: &mut Host, b: &BringUp) -> u32 {
    let (i, pas) = cq_input(h, b, 6);
    h.ok(&i, &pas).view::<cmd::CreateCqOut>().cqn()
}

/// The CREATE_QP input for a QP of type `st` (0 RC, 1 UC, 2 UD, 8 QP1) with 16-WQEBB SQ and a
/// 16-entry RQ of 16-byte WQEs, both completing to `cqn`, and its PAS.
fn qp_input(h: &mut Host, b: &BringUp, st: u8, cqn: u32) -> (cmd::CreateQpIn, Vec<u8>) {
    let (_, pas) = h.queue_buf(16 * 16 + 64 * 16);
    let dbr = h.alloc(64);
    let mut i = cmd::CreateQpIn::new_cmd();
    let c = i.qpc_mut();
    c.set_st(st);
    c.set_pm_state(3);
    c.set_pd(b.pd);
    c.set_uar_page(b.uar);
    c.set_cqn_snd(cqn);
    c.set_cqn_rcv(cqn);
    c.set_log_sq_size(4);
    c.set_log_rq_size(4);
    c.set_log_rq_stride(0);
    c.set_dbr_addr(dbr);
    (i, pas)
}

/// CREATE_QP: the QPN.
fn create_qp(h: &mut Host, b: &BringUp, st: u8, cqn: u32) -> u32 {
    let (i, pas) = qp_input(h, b, st, cqn);
    h.ok(&i, &pas).view::<cmd::CreateQpOut>().qpn()
}

/// GID entry `idx`: ::ffff:10.0.0.1, RoCE v2.
fn set_gid(h: &mut Host, idx: u16) {
    let mut s = cmd::SetRoceAddressIn::new_cmd();
    s.set_roce_address_index(idx);
    let a = s.roce_address_mut();
    a.set_source_l3_address([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]);
    a.set_roce_version(2);
    h.ok(&s, &[]);
}

/// A QP transition input (RST2INIT's shape, shared by every transition with a context).
fn modify(op: cmd::CmdOpcode, qpn: u32) -> cmd::Rst2InitQpIn {
    let mut i = cmd::Rst2InitQpIn::new_cmd();
    i.set_opcode(op.code());
    i.set_qpn(qpn);
    i
}

/// RST2INIT as the kernel sends it: port 1, remote access bits, Q_Key for UD.
fn rst2init(qpn: u32) -> cmd::Rst2InitQpIn {
    let mut i = modify(cmd::CmdOpcode::Rst2InitQp, qpn);
    let c = i.qpc_mut();
    c.primary_address_path_mut().set_vhca_port_num(1);
    c.set_rre(true);
    c.set_rwe(true);
    c.set_q_key(0x1111_1111);
    i
}

/// INIT2RTR for RC: MTU 1024, remote QPN, PSN, GID index 0.
fn init2rtr(qpn: u32, remote: u32) -> cmd::Rst2InitQpIn {
    let mut i = modify(cmd::CmdOpcode::Init2RtrQp, qpn);
    let c = i.qpc_mut();
    c.set_mtu(3);
    c.set_log_msg_max(30);
    c.set_remote_qpn(remote);
    c.set_next_rcv_psn(0x123);
    c.set_log_rra_max(2);
    c.set_min_rnr_nak(12);
    let p = c.primary_address_path_mut();
    p.set_src_addr_index(0);
    p.set_hop_limit(64);
    p.set_udp_sport(0xC000);
    p.set_rmac_31_0(0x0102_0304);
    i
}

/// RTR2RTS for RC.
fn rtr2rts(qpn: u32) -> cmd::Rst2InitQpIn {
    let mut i = modify(cmd::CmdOpcode::Rtr2RtsQp, qpn);
    let c = i.qpc_mut();
    c.set_next_send_psn(0x456);
    c.set_log_sra_max(2);
    c.set_retry_count(7);
    c.set_rnr_retry(7);
    c.primary_address_path_mut().set_ack_timeout(14);
    i
}

/// QUERY_QP: the context.
fn query_qp(h: &mut Host, qpn: u32) -> rnic_hw_regs::ctx::Qpc {
    let mut q = cmd::QueryQpIn::new_cmd();
    q.set_qpn(qpn);
    *h.ok(&q, &[]).view::<cmd::QueryQpOut>().qpc()
}

/// The state QUERY_QP reports.
fn state(h: &mut Host, qpn: u32) -> QpState {
    QpState::try_from(query_qp(h, qpn).state()).expect("a QP state")
}

/// Runs a transition without context (2ERR, 2RST).
fn to(h: &mut Host, op: cmd::CmdOpcode, qpn: u32) -> common::host::Reply {
    let mut i = cmd::Qp2ErrIn::new_cmd();
    i.set_opcode(op.code());
    i.set_qpn(qpn);
    h.exec(&i, &[])
}

#[test]
fn eq_create_query_destroy_and_errors() {
    let (mut h, b) = up();
    let (i, pas) = h.eq_input(5, b.uar, 3, &[0x0B]);
    let eqn = h.ok(&i, &pas).view::<cmd::CreateEqOut>().eq_number();
    assert_eq!(eqn, 0x11);
    let mut q = cmd::QueryEqIn::new_cmd();
    q.set_eq_number(eqn);
    let o: cmd::QueryEqOut = h.ok(&q, &[]).view();
    let c = o.eq_context_entry();
    assert_eq!((c.log_eq_size(), c.uar_page(), c.intr()), (5, b.uar, 3));
    assert_eq!(o.event_bitmask(), 1 << 0x0B);
    // Bad UAR, too big, PAS too short, misaligned PAS.
    let (mut bad, pas) = h.eq_input(5, b.uar, 0, &[]);
    bad.eq_context_entry_mut().set_uar_page(0x30);
    h.exec(&bad, &pas).expect_status(CmdStatus::BadResource);
    let (mut bad, pas) = h.eq_input(5, b.uar, 0, &[]);
    bad.eq_context_entry_mut().set_log_eq_size(23);
    h.exec(&bad, &pas).expect_status(CmdStatus::BadSize);
    let (bad, pas) = h.eq_input(7, b.uar, 0, &[]);
    h.exec(&bad, &pas[..8])
        .expect_status(CmdStatus::BadInputLength);
    let (bad, mut pas) = h.eq_input(5, b.uar, 0, &[]);
    pas[7] = 0x40;
    h.exec(&bad, &pas).expect_status(CmdStatus::BadParam);
    // GEN_EQE writes an entry with the device's owner bit.
    let mut g = cmd::GenEqeIn::new_cmd();
    g.set_eq_number(eqn);
    let mut eqe = [0u8; 64];
    eqe[1] = 0x09;
    eqe[0x3F] = 1;
    g.set_eqe(eqe);
    h.ok(&g, &[]);
    let iova = u64::from_be_bytes(pas[..8].try_into().unwrap()) - 0x40;
    let _ = iova;
    let o: cmd::QueryEqOut = h.ok(&q, &[]).view();
    assert_eq!(o.eq_context_entry().producer_counter(), 1);
    g.set_eq_number(0x40);
    h.exec(&g, &[]).expect_status(CmdStatus::BadResource);
    // An EQ with a CQ is busy; unknown EQs are bad resources.
    let cqn = create_cq(&mut h, &b);
    let mut d = cmd::DestroyEqIn::new_cmd();
    d.set_eq_number(b.eqn);
    h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    let mut dc = cmd::DestroyCqIn::new_cmd();
    dc.set_cqn(cqn);
    h.ok(&dc, &[]);
    h.exec(&dc, &[]).expect_status(CmdStatus::BadResource);
    h.ok(&d, &[]);
    h.exec(&d, &[]).expect_status(CmdStatus::BadResource);
    d.set_eq_number(eqn);
    h.ok(&d, &[]);
}

#[test]
fn eq_table_fills_up() {
    let (mut h, b) = up();
    // Profile::default has log_max_eq 5: 32 EQs, one made by the bring-up.
    for _ in 1..32 {
        h.create_eq(0, b.uar, 0, &[]);
    }
    let (i, pas) = h.eq_input(0, b.uar, 0, &[]);
    h.exec(&i, &pas).expect_status(CmdStatus::NoResources);
}

#[test]
fn cq_create_query_modify_and_errors() {
    let (mut h, b) = up();
    let cqn = create_cq(&mut h, &b);
    assert_eq!(cqn, 0x400);
    let mut q = cmd::QueryCqIn::new_cmd();
    q.set_cqn(cqn);
    let o: cmd::QueryCqOut = h.ok(&q, &[]).view();
    let c = o.cq_context();
    assert_eq!(
        (c.log_cq_size(), c.c_eqn_or_apu_element()),
        (6, u32::from(b.eqn))
    );
    // Moderation.
    let mut m = cmd::ModifyCqIn::new_cmd();
    m.set_cqn(cqn);
    m.modify_field_select_resize_field_select_mut()
        .modify_field_select_mut()
        .set_modify_field_select(0x3);
    m.cq_context_mut().set_cq_period(10);
    m.cq_context_mut().set_cq_max_count(20);
    h.ok(&m, &[]);
    let o: cmd::QueryCqOut = h.ok(&q, &[]).view();
    assert_eq!(
        (o.cq_context().cq_period(), o.cq_context().cq_max_count()),
        (10, 20)
    );
    m.set_op_mod(op_mod::MODIFY_CQ_RESIZE);
    h.exec(&m, &[]).expect_status(CmdStatus::BadOp);
    // Bad EQ, bad UAR, too big, CQE size, short PAS, misaligned doorbell record.
    let (mut i, pas) = cq_input(&mut h, &b, 6);
    i.cq_context_mut().set_c_eqn_or_apu_element(0x33);
    h.exec(&i, &pas).expect_status(CmdStatus::BadResource);
    let (mut i, pas) = cq_input(&mut h, &b, 6);
    i.cq_context_mut().set_uar_page(0x3F);
    h.exec(&i, &pas).expect_status(CmdStatus::BadResource);
    let (mut i, pas) = cq_input(&mut h, &b, 6);
    i.cq_context_mut().set_log_cq_size(23);
    h.exec(&i, &pas).expect_status(CmdStatus::BadSize);
    let (mut i, pas) = cq_input(&mut h, &b, 6);
    i.cq_context_mut().set_cqe_sz(3);
    h.exec(&i, &pas).expect_status(CmdStatus::BadParam);
    let (i, _) = cq_input(&mut h, &b, 8);
    h.exec(&i, &[0; 8]).expect_status(CmdStatus::BadInputLength);
    let (mut i, pas) = cq_input(&mut h, &b, 6);
    let d = i.cq_context().dbr_addr();
    i.cq_context_mut().set_dbr_addr(d + 4);
    h.exec(&i, &pas).expect_status(CmdStatus::BadParam);
    // A CQ a QP uses is busy.
    let qpn = create_qp(&mut h, &b, 0, cqn);
    let mut dc = cmd::DestroyCqIn::new_cmd();
    dc.set_cqn(cqn);
    h.exec(&dc, &[]).expect_status(CmdStatus::ResourceBusy);
    let mut dq = cmd::DestroyQpIn::new_cmd();
    dq.set_qpn(qpn);
    h.ok(&dq, &[]);
    h.ok(&dc, &[]);
    q.set_cqn(cqn);
    h.exec(&q, &[]).expect_status(CmdStatus::BadResource);
}

#[test]
fn mkeys_pa_and_mtt() {
    let (mut h, b) = up();
    // PA key over the whole space.
    let mut i = cmd::CreateMkeyIn::new_cmd();
    let c = i.memory_key_mkey_entry_mut();
    c.set_lw(true);
    c.set_lr(true);
    c.set_rr(true);
    c.set_length64(true);
    c.set_qpn(0xFF_FFFF);
    c.set_mkey_7_0(0x42);
    c.set_pd(b.pd);
    let index = h.ok(&i, &[]).view::<cmd::CreateMkeyOut>().mkey_index();
    assert_eq!(index, 1);
    assert_eq!(cmd::mkey_key(index, 0x42), 0x142);
    let mut q = cmd::QueryMkeyIn::new_cmd();
    q.set_mkey_index(index);
    let o: cmd::QueryMkeyOut = h.ok(&q, &[]).view();
    let m = o.memory_key_mkey_entry();
    assert!(m.lw() && m.rr() && !m.rw() && m.length64());
    assert_eq!((m.pd(), m.mkey_7_0(), m.access_mode_1_0()), (b.pd, 0x42, 0));

    // MTT key: 3 pages for 8 KiB starting 0x800 into a page.
    let mut t = cmd::CreateMkeyIn::new_cmd();
    let c = t.memory_key_mkey_entry_mut();
    c.set_access_mode_1_0(1);
    c.set_lw(true);
    c.set_rw(true);
    c.set_qpn(0xFF_FFFF);
    c.set_pd(b.pd);
    c.set_start_addr(0x7000_0800);
    c.set_len(0x2000);
    c.set_log_page_size(12);
    c.set_translations_octword_size(2);
    t.set_translations_octword_actual_size(2);
    let (base, _) = h.queue_buf(3 * 4096);
    let mtt: Vec<u8> = (0..4u64)
        .flat_map(|p| ((base + p * 4096) | 3).to_be_bytes())
        .collect();
    let index = h.ok(&t, &mtt).view::<cmd::CreateMkeyOut>().mkey_index();
    assert_eq!(index, 2);
    q.set_mkey_index(index);
    let o: cmd::QueryMkeyOut = h.ok(&q, &[]).view();
    assert_eq!(o.memory_key_mkey_entry().access_mode_1_0(), 1);
    assert_eq!(o.memory_key_mkey_entry().translations_octword_size(), 2);
    assert_eq!(o.bsf0_klm0_pas_mtt0_1()[..8], (base | 3).to_be_bytes());

    // Too few translations, input shorter than the array, misaligned entry, KLM, bad PD,
    // bound to a QP.
    let mut bad = t;
    bad.set_translations_octword_actual_size(1);
    h.exec(&bad, &mtt[..16]).expect_status(CmdStatus::BadParam);
    h.exec(&t, &mtt[..16])
        .expect_status(CmdStatus::BadInputLength);
    let mut skew = mtt.clone();
    skew[7] |= 0x10;
    h.exec(&t, &skew).expect_status(CmdStatus::BadParam);
    let mut bad = i;
    bad.memory_key_mkey_entry_mut().set_access_mode_1_0(2);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    // A memory window as mlx5_ib_alloc_mw creates one: free, umr_en, KLM, room for 4 KLM
    // octowords, type 2 with en_rinval. Without umr_en, with length64, or with no room for a
    // KLM it is refused.
    let mut w = i;
    {
        let c = w.memory_key_mkey_entry_mut();
        c.set_access_mode_1_0(2);
        c.set_free(true);
        c.set_umr_en(true);
        c.set_lr(true);
        c.set_en_rinval(true);
        c.set_length64(false);
        c.set_translations_octword_size(4);
    }
    let win: cmd::CreateMkeyOut = h.ok(&w, &[]).view();
    let mut q = cmd::QueryMkeyIn::new_cmd();
    q.set_mkey_index(win.mkey_index());
    let qo: cmd::QueryMkeyOut = h.ok(&q, &[]).view();
    let m = qo.memory_key_mkey_entry();
    assert_eq!(
        (m.free(), m.umr_en(), m.en_rinval(), m.access_mode_1_0()),
        (true, true, true, 2)
    );
    assert_eq!(m.translations_octword_size(), 4);
    let mut d = cmd::DestroyMkeyIn::new_cmd();
    d.set_mkey_index(win.mkey_index());
    h.ok(&d, &[]);
    for f in [
        |c: &mut rnic_hw_regs::ctx::Mkc| c.set_umr_en(false),
        |c: &mut rnic_hw_regs::ctx::Mkc| c.set_length64(true),
        |c: &mut rnic_hw_regs::ctx::Mkc| c.set_translations_octword_size(0),
        |c: &mut rnic_hw_regs::ctx::Mkc| c.set_free(false),
    ] {
        let mut bad = w;
        f(bad.memory_key_mkey_entry_mut());
        h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    }
    let mut bad = i;
    bad.memory_key_mkey_entry_mut().set_pd(77);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadResource);
    let mut bad = i;
    bad.memory_key_mkey_entry_mut().set_qpn(0x100);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    let mut bad = i;
    bad.memory_key_mkey_entry_mut().set_length64(false);
    bad.memory_key_mkey_entry_mut().set_start_addr(u64::MAX);
    bad.memory_key_mkey_entry_mut().set_len(2);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);

    // A PD with keys is busy; destroy by index.
    let mut dp = cmd::DeallocPdIn::new_cmd();
    dp.set_pd(b.pd);
    h.exec(&dp, &[]).expect_status(CmdStatus::ResourceBusy);
    let mut d = cmd::DestroyMkeyIn::new_cmd();
    d.set_mkey_index(1);
    h.ok(&d, &[]);
    h.exec(&d, &[]).expect_status(CmdStatus::BadResource);
    d.set_mkey_index(2);
    h.ok(&d, &[]);
    h.ok(&dp, &[]);
    let s: cmd::QuerySpecialContextsOut = h.ok(&cmd::QuerySpecialContextsIn::new_cmd(), &[]).view();
    assert_eq!(
        s.resd_lkey() >> 8,
        0,
        "the reserved lkey is no CREATE_MKEY index"
    );
}

#[test]
fn rc_qp_walks_the_state_machine() {
    let (mut h, b) = up();
    set_gid(&mut h, 0);
    let cqn = create_cq(&mut h, &b);
    let qpn = create_qp(&mut h, &b, 0, cqn);
    assert_eq!(qpn, 0x100);
    assert_eq!(state(&mut h, qpn), QpState::Rst);
    // Out of order: RST -> RTR.
    h.exec(&init2rtr(qpn, 0x101), &[])
        .expect_status(CmdStatus::BadQpState);
    h.exec(&rtr2rts(qpn), &[])
        .expect_status(CmdStatus::BadQpState);
    // Port 2 does not exist.
    let mut bad = rst2init(qpn);
    bad.qpc_mut()
        .primary_address_path_mut()
        .set_vhca_port_num(2);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    h.ok(&rst2init(qpn), &[]);
    assert_eq!(state(&mut h, qpn), QpState::Init);
    h.exec(&rst2init(qpn), &[])
        .expect_status(CmdStatus::BadQpState);
    h.ok(&modify(cmd::CmdOpcode::Init2InitQp, qpn), &[]);
    // INIT2RTR without its required attributes.
    let mut bad = init2rtr(qpn, 0x101);
    bad.qpc_mut().set_mtu(0);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    let mut bad = init2rtr(qpn, 0x101);
    bad.qpc_mut().set_mtu(6);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    h.exec(&init2rtr(qpn, 0), &[])
        .expect_status(CmdStatus::BadParam);
    let mut bad = init2rtr(qpn, 0x101);
    bad.qpc_mut()
        .primary_address_path_mut()
        .set_src_addr_index(1);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    let mut bad = init2rtr(qpn, 0x101);
    bad.qpc_mut().set_log_rra_max(5);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    h.ok(&init2rtr(qpn, 0x101), &[]);
    let mut bad = rtr2rts(qpn);
    bad.qpc_mut().set_log_sra_max(5);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    h.ok(&rtr2rts(qpn), &[]);
    let c = query_qp(&mut h, qpn);
    assert_eq!(QpState::try_from(c.state()), Ok(QpState::Rts));
    assert_eq!(
        (c.mtu(), c.remote_qpn(), c.next_rcv_psn()),
        (3, 0x101, 0x123)
    );
    assert_eq!(
        (c.next_send_psn(), c.retry_count(), c.rnr_retry()),
        (0x456, 7, 7)
    );
    assert_eq!(c.primary_address_path().ack_timeout(), 14);
    assert_eq!(c.primary_address_path().vhca_port_num(), 1);
    assert!(c.rre() && c.rwe() && !c.rae());
    // RTS2RTS takes what opt_param_mask selects.
    let mut r = modify(cmd::CmdOpcode::Rts2RtsQp, qpn);
    r.set_opt_param_mask(opt_param::RAE | opt_param::RETRY_COUNT);
    r.qpc_mut().set_rae(true);
    r.qpc_mut().set_retry_count(3);
    r.qpc_mut().set_rnr_retry(1);
    h.ok(&r, &[]);
    let c = query_qp(&mut h, qpn);
    assert!(c.rae());
    assert_eq!((c.retry_count(), c.rnr_retry()), (3, 7));
    // SQERR2RTS only from SQER.
    h.exec(&modify(cmd::CmdOpcode::Sqerr2RtsQp, qpn), &[])
        .expect_status(CmdStatus::BadQpState);
    // Any state to ERR, then to RST, and again from the start.
    assert!(to(&mut h, cmd::CmdOpcode::Qp2Err, qpn).is_ok());
    assert_eq!(state(&mut h, qpn), QpState::Err);
    h.exec(&rtr2rts(qpn), &[])
        .expect_status(CmdStatus::BadQpState);
    assert!(to(&mut h, cmd::CmdOpcode::Qp2Err, qpn).is_ok());
    assert!(to(&mut h, cmd::CmdOpcode::Qp2Rst, qpn).is_ok());
    let c = query_qp(&mut h, qpn);
    assert_eq!(QpState::try_from(c.state()), Ok(QpState::Rst));
    assert_eq!((c.remote_qpn(), c.pd(), c.cqn_snd()), (0, b.pd, cqn));
    h.ok(&rst2init(qpn), &[]);
    assert!(to(&mut h, cmd::CmdOpcode::Qp2Rst, qpn).is_ok());
    // Unknown QPs.
    assert_eq!(
        to(&mut h, cmd::CmdOpcode::Qp2Err, 0x999).cmd_status(),
        CmdStatus::BadResource
    );
    let mut q = cmd::QueryQpIn::new_cmd();
    q.set_qpn(0x999);
    h.exec(&q, &[]).expect_status(CmdStatus::BadResource);
}

#[test]
fn ud_and_uc_qps() {
    let (mut h, b) = up();
    let cqn = create_cq(&mut h, &b);
    let ud = create_qp(&mut h, &b, 2, cqn);
    let mut bad = rst2init(ud);
    bad.qpc_mut().set_q_key(0);
    h.exec(&bad, &[]).expect_status(CmdStatus::BadParam);
    h.ok(&rst2init(ud), &[]);
    assert_eq!(query_qp(&mut h, ud).q_key(), 0x1111_1111);
    // UD needs nothing at INIT2RTR, and no GID.
    h.ok(&modify(cmd::CmdOpcode::Init2RtrQp, ud), &[]);
    h.ok(&rtr2rts(ud), &[]);
    assert_eq!(state(&mut h, ud), QpState::Rts);
    // UC needs a GID like RC.
    let uc = create_qp(&mut h, &b, 1, cqn);
    h.ok(&rst2init(uc), &[]);
    h.exec(&init2rtr(uc, 0x100), &[])
        .expect_status(CmdStatus::BadParam);
    set_gid(&mut h, 0);
    h.ok(&init2rtr(uc, 0x100), &[]);
    // Types other than RC, UC, UD and QP1: XRC (3), QP0 (7).
    let (mut i, pas) = qp_input(&mut h, &b, 3, cqn);
    h.exec(&i, &pas).expect_status(CmdStatus::BadParam);
    i.qpc_mut().set_st(7);
    h.exec(&i, &pas).expect_status(CmdStatus::BadParam);
}

/// QP1 (st 8): one per port, a second is BAD_PARAM until the first is destroyed; UD's
/// transitions, with the GSI Q_Key only (another, at RST2INIT or as an optional attribute
/// later, is BAD_PARAM).
#[test]
fn qp1_is_one_per_port_with_the_gsi_qkey() {
    use rnic_hw_regs::roce::GSI_QKEY;
    let (mut h, b) = up();
    let cqn = create_cq(&mut h, &b);
    let gsi = create_qp(&mut h, &b, 8, cqn);
    assert_ne!(gsi, 1, "firmware gives QP1 a QPN of its own");
    let (i, pas) = qp_input(&mut h, &b, 8, cqn);
    h.exec(&i, &pas).expect_status(CmdStatus::BadParam);
    // Other types are still created beside it.
    create_qp(&mut h, &b, 2, cqn);
    // RST2INIT with UD's Q_Key: refused on QP1, and it stays in RST.
    h.exec(&rst2init(gsi), &[])
        .expect_status(CmdStatus::BadParam);
    assert_eq!(state(&mut h, gsi), QpState::Rst);
    let mut init = rst2init(gsi);
    init.qpc_mut().set_q_key(GSI_QKEY);
    h.ok(&init, &[]);
    assert_eq!(query_qp(&mut h, gsi).q_key(), GSI_QKEY);
    // UD's INIT2RTR (nothing needed, no GID) and RTR2RTS.
    h.ok(&modify(cmd::CmdOpcode::Init2RtrQp, gsi), &[]);
    h.ok(&rtr2rts(gsi), &[]);
    assert_eq!(state(&mut h, gsi), QpState::Rts);
    // RTS2RTS changing the Q_Key: refused unless it is the GSI one.
    let mut rts = modify(cmd::CmdOpcode::Rts2RtsQp, gsi);
    rts.set_opt_param_mask(rnic_hw_regs::ctx::opt_param::Q_KEY);
    rts.qpc_mut().set_q_key(0x1111_1111);
    h.exec(&rts, &[]).expect_status(CmdStatus::BadParam);
    rts.qpc_mut().set_q_key(GSI_QKEY);
    h.ok(&rts, &[]);
    // Destroyed, the port's QP1 can be created again.
    let mut d = cmd::DestroyQpIn::new_cmd();
    d.set_qpn(gsi);
    h.ok(&d, &[]);
    let again = create_qp(&mut h, &b, 8, cqn);
    assert_eq!(state(&mut h, again), QpState::Rst);
}

#[test]
fn create_qp_checks_its_references_and_sizes() {
    let (mut h, b) = up();
    let cqn = create_cq(&mut h, &b);
    type Case = (fn(&mut cmd::CreateQpIn), CmdStatus);
    let cases: [Case; 9] = [
        (|i| i.qpc_mut().set_pd(99), CmdStatus::BadResource),
        (|i| i.qpc_mut().set_cqn_snd(0x999), CmdStatus::BadResource),
        (|i| i.qpc_mut().set_cqn_rcv(0x999), CmdStatus::BadResource),
        (|i| i.qpc_mut().set_uar_page(0x3F), CmdStatus::BadResource),
        (
            |i| {
                i.qpc_mut().set_rq_type(1);
                i.qpc_mut().set_srqn_rmpn_xrqn(0x40)
            },
            CmdStatus::BadResource,
        ),
        (
            |i| i.qpc_mut().set_log_sq_size(15),
            CmdStatus::BadInputLength,
        ),
        (|i| i.qpc_mut().set_log_rq_stride(6), CmdStatus::BadSize),
        (|i| i.qpc_mut().set_rq_type(2), CmdStatus::BadParam),
        (|i| i.qpc_mut().set_dbr_addr(4), CmdStatus::BadParam),
    ];
    for (n, (f, want)) in cases.into_iter().enumerate() {
        let (mut i, pas) = qp_input(&mut h, &b, 0, cqn);
        f(&mut i);
        let r = h.exec(&i, &pas);
        assert_eq!(
            r.cmd_status(),
            want,
            "case {n} (syndrome {:#x})",
            r.syndrome
        );
    }
    // log_max_qp_sz is 15: an SQ of 2^16 WQEBBs is too big whatever the PAS.
    let (mut i, pas) = qp_input(&mut h, &b, 0, cqn);
    i.qpc_mut().set_log_sq_size(15);
    i.qpc_mut().set_log_rq_size(0);
    assert_eq!(h.exec(&i, &pas).cmd_status(), CmdStatus::BadInputLength);
    let mut i16 = i;
    i16.qpc_mut().set_log_sq_size(0);
    i16.qpc_mut().set_log_rq_size(0);
    assert!(h.exec(&i16, &pas).is_ok());
}

#[test]
fn qp_table_follows_the_current_log_max_qp() {
    let mut h = Host::small();
    h.enable_hca();
    // Two QPs at most.
    let mut q = cmd::QueryHcaCapIn::new_cmd();
    q.set_op_mod(op_mod::query_hca_cap(0, 1));
    let cur: cmd::QueryHcaCapOut = h.ok(&q, &[]).view();
    let mut s = cmd::SetHcaCapIn::new_cmd();
    *s.capability_mut() = *cur.capability();
    s.capability_mut().cmd_hca_cap_mut().set_log_max_qp(1);
    h.ok(&s, &[]);
    let boot = h.query_pages(op_mod::QUERY_PAGES_BOOT);
    assert!(h.give_pages(boot as usize).is_ok());
    let init = h.query_pages(op_mod::QUERY_PAGES_INIT);
    assert!(h.give_pages(init as usize).is_ok());
    h.ok(&cmd::InitHcaIn::new_cmd(), &[]);
    let uar = h.alloc_uar();
    let (eqn, _) = h.create_eq(4, uar, 0, &[]);
    let b = BringUp {
        uar,
        eqn,
        pd: h.alloc_pd(),
    };
    let cqn = create_cq(&mut h, &b);
    create_qp(&mut h, &b, 0, cqn);
    create_qp(&mut h, &b, 0, cqn);
    let (i, pas) = qp_input(&mut h, &b, 0, cqn);
    h.exec(&i, &pas).expect_status(CmdStatus::NoResources);
}

#[test]
fn srq_create_attach_arm_destroy() {
    let (mut h, b) = up();
    let cqn = create_cq(&mut h, &b);
    let (_, pas) = h.queue_buf(32 << 6);
    let dbr = h.alloc(64);
    let mut i = cmd::CreateSrqIn::new_cmd();
    let c = i.srq_context_entry_mut();
    c.set_log_srq_size(6);
    c.set_log_rq_stride(1);
    c.set_pd(b.pd);
    c.set_dbr_addr(dbr);
    let srqn = h.ok(&i, &pas).view::<cmd::CreateSrqOut>().srqn();
    assert_eq!(srqn, 0x40);
    // A QP on it; the SRQ is then busy.
    let (mut qi, qpas) = qp_input(&mut h, &b, 0, cqn);
    qi.qpc_mut().set_rq_type(1);
    qi.qpc_mut().set_srqn_rmpn_xrqn(srqn);
    let qpn = h.ok(&qi, &qpas).view::<cmd::CreateQpOut>().qpn();
    let mut d = cmd::DestroySrqIn::new_cmd();
    d.set_srqn(srqn);
    h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    // ARM_RQ (op_mod 1): limit below the size.
    let mut a = cmd::ArmRqIn::new_cmd();
    a.set_op_mod(1);
    a.set_srq_number(srqn);
    a.set_lwm(16);
    h.ok(&a, &[]);
    let mut q = cmd::QuerySrqIn::new_cmd();
    q.set_srqn(srqn);
    let o: cmd::QuerySrqOut = h.ok(&q, &[]).view();
    let c = o.srq_context_entry();
    assert_eq!((c.log_srq_size(), c.lwm(), c.pd()), (6, 16, b.pd));
    a.set_lwm(64);
    h.exec(&a, &[]).expect_status(CmdStatus::BadParam);
    a.set_op_mod(0);
    h.exec(&a, &[]).expect_status(CmdStatus::BadOp);
    let mut dq = cmd::DestroyQpIn::new_cmd();
    dq.set_qpn(qpn);
    h.ok(&dq, &[]);
    h.ok(&d, &[]);
    h.exec(&d, &[]).expect_status(CmdStatus::BadResource);
    // Bad PD, too big, short PAS.
    let mut bad = i;
    bad.srq_context_entry_mut().set_pd(50);
    h.exec(&bad, &pas).expect_status(CmdStatus::BadResource);
    let mut bad = i;
    bad.srq_context_entry_mut().set_log_srq_size(15);
    bad.srq_context_entry_mut().set_log_rq_stride(6);
    h.exec(&bad, &pas).expect_status(CmdStatus::BadSize);
    h.exec(&i, &[]).expect_status(CmdStatus::BadInputLength);
    // RESIZE_SRQ is not implemented.
    let mut raw = [0u8; 16];
    raw[..2].copy_from_slice(&cmd::CmdOpcode::ResizeSrq.code().to_be_bytes());
    h.exec_raw(&raw, 0x10).expect_status(CmdStatus::BadOp);
}

#[test]
fn gen_eqe_lands_in_the_eq_with_the_device_owner_bit() {
    let (mut h, b) = up();
    let (eqn, iova) = h.create_eq(2, b.uar, 0, &[]);
    let mut g = cmd::GenEqeIn::new_cmd();
    g.set_eq_number(eqn);
    let mut raw = [0u8; 64];
    raw[1] = 0x09;
    raw[0x3F] = 1;
    g.set_eqe(raw);
    for k in 0..4u64 {
        h.ok(&g, &[]);
        let e = Eqe::read_from_bytes(&h.read_mem(iova + 64 * k, 64)).unwrap();
        assert_eq!(e.event_type(), 0x09);
        assert!(!e.owner(), "first pass: owner 0");
    }
    // Full (nobody consumed): the fifth cannot be written.
    h.exec(&g, &[]).expect_status(CmdStatus::InternalError);
    let _ = (<cmd::QueryQpIn as CmdIn>::OPCODE, Profile::default());
}

#[test]
fn init2rtr_to_an_empty_gid_fails_with_its_syndrome() {
    let (mut h, b) = up();
    set_gid(&mut h, 0);
    let cqn = create_cq(&mut h, &b);
    let qpn = create_qp(&mut h, &b, 0, cqn);
    h.ok(&rst2init(qpn), &[]);
    let mut bad = init2rtr(qpn, 0x101);
    bad.qpc_mut()
        .primary_address_path_mut()
        .set_src_addr_index(1);
    // QP_GID_EMPTY: inside the table, but never set.
    assert_eq!(
        h.exec(&bad, &[]).expect_status(CmdStatus::BadParam),
        0x0C00_0013
    );
    h.ok(&init2rtr(qpn, 0x101), &[]);
    assert_eq!(state(&mut h, qpn), QpState::Rtr);
}
