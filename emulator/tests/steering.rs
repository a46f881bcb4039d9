//! Raw Ethernet queues and NIC receive flow steering on one emulated device, through real
//! commands: frames that are not RoCE v2 for the device are matched against the NIC RX root
//! table and delivered to the RQ behind the matching TIR, or dropped and counted by reason;
//! an SQ object transmits whole frames; bad steering commands get the PRM status; random
//! frames never panic and are each delivered or counted.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use proptest::prelude::*;
use rig::Access;
use rig::eth::{
    Eth, ME_MAC, PEER_MAC, Rq, eth_frame, ethertype_proto, ipv4, send, sq, sq_in, steered,
};
use rnic_emulator::link::Link;
use rnic_hw_regs::Bus;
use rnic_hw_regs::cmd::{
    CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut, CreateRqIn, CreateRqOut,
    CreateSqOut, CreateTirIn, CreateTirOut, CreateTisIn, CreateTisOut, DeallocTransportDomainIn,
    DeleteFteIn, DestroyFlowGroupIn, DestroyFlowTableIn, DestroyRqIn, DestroyTirIn, DestroyTisIn,
    ModifyRqIn, QueryFteIn, QueryFteOut, QueryRqIn, QueryRqOut, SetFlowTableRootIn, table_type,
};
use rnic_hw_regs::cqe::{Cqe64, CqeOpcode, CqeSyndrome, l3_hdr_type};
use rnic_hw_regs::ctx::{
    FteMatchParam, TirDispType, WqState, WqType, destination_type, flow_action,
};
use rnic_hw_regs::doorbell::{UAR_SEND_DB_0, uar_bar_offset};
use rnic_hw_regs::status::CmdStatus;
use rnic_hw_regs::wqe::DataSeg;
use zerocopy::IntoBytes;

#[test]
fn arp_and_icmp_frames_reach_the_rq_behind_their_rule() {
    let (mut e, mut rq, _, _, _) = steered();
    let arp = eth_frame([0xFF; 6], 0x0806, &[0, 1, 8, 0, 6, 4, 0, 1]);
    e.feed(&arp);
    let icmp = eth_frame(
        ME_MAC,
        0x0800,
        &ipv4(1, [10, 0, 0, 2], &[8, 0, 0, 0, 0, 1, 0, 1]),
    );
    e.feed(&icmp);
    let c1 = e.r.one(&mut rq.cq);
    assert_eq!(c1.cqe_opcode(), Ok(CqeOpcode::RespSend));
    assert_eq!((c1.byte_cnt(), c1.wqe_counter(), c1.qpn()), (60, 0, 0x11));
    assert_eq!(c1.l3_hdr_type(), l3_hdr_type::NONE);
    assert_eq!(e.r.read(&rq.mr, 0, arp.len()), arp);
    let c2 = e.r.one(&mut rq.cq);
    assert_eq!(
        (c2.byte_cnt(), c2.wqe_counter(), c2.qpn()),
        (icmp.len() as u32, 1, 0x22)
    );
    assert_eq!(c2.l3_hdr_type(), l3_hdr_type::IPV4);
    assert_eq!(e.r.read(&rq.mr, 256, icmp.len()), icmp);
    let c = e.r.counters();
    assert_eq!((c.raw_rx, c.rx_dropped), (2, 0));
    // QUERY_RQ reports the two WQEs consumed.
    let mut q = QueryRqIn::new_cmd();
    q.set_rqn(rq.rqn);
    let out = e.r.h.ok(&q, &[]).view::<QueryRqOut>();
    assert_eq!(out.rq_context().wq().hw_counter(), 2);
    assert_eq!(out.rq_context().state(), u8::from(WqState::Rdy));
}

#[test]
fn frames_are_dropped_and_counted_by_reason() {
    let mut e = Eth::new();
    let arp = eth_frame([0xFF; 6], 0x0806, &[0; 28]);
    // No root table yet.
    e.feed(&arp);
    assert_eq!(e.r.counters().drops.steering_no_root, 1);
    let mut rq = e.rq(1);
    let (tirn, table, group) = e.steer_to(rq.rqn, 2, 1, &ethertype_proto(0xFFFF, 0));
    let tir = Some((destination_type::TIR, tirn));
    assert!(
        e.fte(table, 0, group, &ethertype_proto(0x0806, 0), tir, 1)
            .is_ok()
    );
    assert!(
        e.fte(table, 1, group, &ethertype_proto(0x88B5, 0), None, 0)
            .is_ok()
    );
    assert!(e.root(table).is_ok());
    // The RQ is still in RST.
    e.feed(&arp);
    assert_eq!(e.r.counters().drops.rq_not_ready, 1);
    assert!(e.modify_rq(&rq, WqState::Rst, WqState::Rdy).is_ok());
    // RDY, nothing posted.
    e.feed(&arp);
    assert_eq!(e.r.counters().drops.rq_no_wqe, 1);
    // A WQE of 32 bytes: a 60-byte frame does not fit, and the WQE stays posted.
    e.post(&mut rq, 0, 32);
    e.feed(&arp);
    assert_eq!(e.r.counters().drops.frame_too_long, 1);
    assert!(e.r.poll(&mut rq.cq).is_none());
    // The drop rule, and no rule at all.
    e.feed(&eth_frame(ME_MAC, 0x88B5, &[]));
    e.feed(&eth_frame(ME_MAC, 0x86DD, &[]));
    let d = e.r.counters().drops;
    assert_eq!((d.steering_drop_rule, d.steering_no_match), (1, 1));
    // RoCE v2 for the device keeps its own path: an unknown QP, not a steering drop.
    let roce = eth_frame(
        ME_MAC,
        0x0800,
        &ipv4(17, [10, 0, 0, 2], &[0xC0, 0, 0x12, 0xB7, 0, 40, 0, 0]),
    );
    e.feed(&roce);
    let d = e.r.counters().drops;
    assert_eq!(d.steering_no_match, 1);
    assert_eq!(d.malformed + d.unknown_qp + d.bad_icrc, 1, "{d:?}");
    let c = e.r.counters();
    assert_eq!(c.rx_dropped, d.total());
    assert_eq!(c.raw_rx, 0);
}

#[test]
fn a_scatter_to_a_bad_key_is_an_error_cqe_and_the_rq_enters_err() {
    let (mut e, mut rq, ..) = steered();
    // Rewrite the next WQE (slot 0 is consumed first) with a key that does not exist.
    let bad = DataSeg::new(rq.mr.addr, 256, 0x00DE_AD00);
    e.r.h.write_mem(rq.buf, bad.as_bytes());
    e.feed(&eth_frame([0xFF; 6], 0x0806, &[]));
    let c = e.r.one(&mut rq.cq);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespErr));
    assert_eq!(c.error_syndrome(), Ok(CqeSyndrome::LocalProt));
    e.feed(&eth_frame([0xFF; 6], 0x0806, &[]));
    let d = e.r.counters().drops;
    assert_eq!((d.rq_error, d.rq_not_ready), (1, 1));
    // ERR -> RST -> RDY brings it back.
    assert!(e.modify_rq(&rq, WqState::Err, WqState::Rst).is_ok());
    assert!(e.modify_rq(&rq, WqState::Rst, WqState::Rdy).is_ok());
    rq.pi = 0;
    for k in 0..8 {
        e.post(&mut rq, k * 256, 256);
    }
    e.feed(&eth_frame([0xFF; 6], 0x0806, &[]));
    assert_eq!(e.r.one(&mut rq.cq).cqe_opcode(), Ok(CqeOpcode::RespSend));
}

#[test]
fn bad_steering_commands_get_the_prm_status() {
    let (mut e, rq, tirn, table, group) = steered();
    let crit = ethertype_proto(0xFFFF, 0xFF);
    // Overlapping groups, a range beyond the table, an empty range.
    assert_eq!(
        e.group(table, 7, 9, &crit).cmd_status(),
        CmdStatus::BadParam
    );
    e.group(table, 8, 16, &crit)
        .expect_status(CmdStatus::BadParam);
    e.group(table, 9, 8, &crit)
        .expect_status(CmdStatus::BadParam);
    e.group(0x7777, 0, 1, &crit)
        .expect_status(CmdStatus::BadResource);
    // An entry outside every group, at a taken index, to a TIR that does not exist, with
    // a value outside the criteria, of another group.
    let tir = Some((destination_type::TIR, tirn));
    let v = ethertype_proto(0x0806, 0);
    e.fte(table, 12, group, &v, tir, 0)
        .expect_status(CmdStatus::BadParam);
    e.fte(table, 0, group, &v, tir, 0)
        .expect_status(CmdStatus::BadParam);
    let gone = Some((destination_type::TIR, tirn + 100));
    e.fte(table, 3, group, &v, gone, 0)
        .expect_status(CmdStatus::BadResource);
    let mut outside = v;
    outside.outer_headers_mut().set_udp_dport(53);
    e.fte(table, 3, group, &outside, tir, 0)
        .expect_status(CmdStatus::BadParam);
    e.fte(table, 3, group + 1, &v, tir, 0)
        .expect_status(CmdStatus::BadParam);
    let vport = Some((destination_type::VPORT, 0));
    e.fte(table, 3, group, &v, vport, 0)
        .expect_status(CmdStatus::BadParam);
    // A forward to a table of the same level.
    let same = e.table(2, 0);
    let to_same = Some((destination_type::FLOW_TABLE, same));
    e.fte(table, 3, group, &v, to_same, 0)
        .expect_status(CmdStatus::BadParam);
    // Destroying what is referenced.
    let mut d = DestroyTirIn::new_cmd();
    d.set_tirn(tirn);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    let mut d = DestroyRqIn::new_cmd();
    d.set_rqn(rq.rqn);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    let mut d = DestroyFlowGroupIn::new_cmd();
    d.set_table_id(table);
    d.set_group_id(group);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    let mut d = DestroyFlowTableIn::new_cmd();
    d.set_table_id(table);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    let mut d = DeallocTransportDomainIn::new_cmd();
    d.set_transport_domain(e.td);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    // Another table type; another vport.
    let mut t = CreateFlowTableIn::new_cmd();
    t.set_table_type(table_type::NIC_TX);
    e.r.h.exec(&t, &[]).expect_status(CmdStatus::BadParam);
    let mut t = CreateFlowTableIn::new_cmd();
    t.set_other_vport(true);
    e.r.h.exec(&t, &[]).expect_status(CmdStatus::BadParam);
    // A TIR to no RQ, an indirect TIR, a TIS in no domain.
    e.tir(0x1234).expect_status(CmdStatus::BadResource);
    let mut t = CreateTirIn::new_cmd();
    t.ctx_mut().set_transport_domain(e.td);
    t.ctx_mut().set_disp_type(TirDispType::Indirect.into());
    e.r.h.exec(&t, &[]).expect_status(CmdStatus::BadParam);
    let mut t = CreateTisIn::new_cmd();
    t.ctx_mut().set_transport_domain(e.td + 9);
    e.r.h.exec(&t, &[]).expect_status(CmdStatus::BadResource);
    // MODIFY_RQ from a state it is not in; a transition the PRM does not have.
    e.modify_rq(&rq, WqState::Rst, WqState::Rdy)
        .expect_status(CmdStatus::BadResourceState);
    assert!(e.modify_rq(&rq, WqState::Rdy, WqState::Rdy).is_ok());
    // Deleting an empty index, querying it; the root of an unknown table.
    let mut del = DeleteFteIn::new_cmd();
    del.set_table_id(table);
    del.set_flow_index(5);
    e.r.h.exec(&del, &[]).expect_status(CmdStatus::BadResource);
    let mut q = QueryFteIn::new_cmd();
    q.set_table_id(table);
    q.set_flow_index(1);
    let fte = e.r.h.ok(&q, &[]).view::<QueryFteOut>();
    assert_eq!(fte.flow_context().flow_tag(), 0x22);
    assert_eq!(fte.flow_context().action(), flow_action::FWD_DEST);
    e.root(0x7777).expect_status(CmdStatus::BadResource);
    // Tear down in order: entries, group, root, table, TIR, RQ, domain.
    for i in 0..3 {
        del.set_flow_index(i);
        assert!(e.r.h.exec(&del, &[]).is_ok());
    }
    let mut d = DestroyFlowGroupIn::new_cmd();
    d.set_table_id(table);
    d.set_group_id(group);
    assert!(e.r.h.exec(&d, &[]).is_ok());
    let mut root = SetFlowTableRootIn::new_cmd();
    root.set_op_mod(1);
    assert!(e.r.h.exec(&root, &[]).is_ok());
    let mut d = DestroyFlowTableIn::new_cmd();
    d.set_table_id(table);
    assert!(e.r.h.exec(&d, &[]).is_ok());
    let mut d = DestroyTirIn::new_cmd();
    d.set_tirn(tirn);
    assert!(e.r.h.exec(&d, &[]).is_ok());
    let mut d = DestroyRqIn::new_cmd();
    d.set_rqn(rq.rqn);
    assert!(e.r.h.exec(&d, &[]).is_ok());
}

#[test]
fn an_sq_object_transmits_whole_frames_onto_the_link() {
    let mut e = Eth::new();
    let mut s = sq(&mut e);
    let mr = e.r.mr(4096, Access::ALL);
    let frame = eth_frame(
        PEER_MAC,
        0x0800,
        &ipv4(1, [10, 0, 0, 1], &[8, 0, 0xF7, 0xFF, 0, 0, 0, 0]),
    );
    send(&mut e, &mut s, &frame, 18, &mr);
    let mut got = Vec::new();
    assert!(e.wire.receive(&mut got));
    assert_eq!(got, frame);
    let c = e.r.one(&mut s.cq);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::Req));
    assert_eq!((c.qpn(), c.wqe_counter()), (s.sqn, 0));
    assert_eq!(e.r.counters().raw_tx, 1);
    // Fewer than the L2 header's 18 bytes inline: an error CQE, the SQ enters ERR and the
    // next WQE is flushed.
    send(&mut e, &mut s, &frame, 14, &mr);
    let c = e.r.one(&mut s.cq);
    assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::ReqErr));
    assert_eq!(c.error_syndrome(), Ok(CqeSyndrome::LocalQpOp));
    send(&mut e, &mut s, &frame, 18, &mr);
    assert_eq!(
        e.r.one(&mut s.cq).error_syndrome(),
        Ok(CqeSyndrome::WrFlush)
    );
    assert!(!e.wire.receive(&mut got));
    // The TIS is in use by the SQ.
    let mut d = DestroyTisIn::new_cmd();
    d.set_tisn(s.tisn);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
}

#[test]
fn a_frame_longer_than_the_port_mtu_is_a_local_length_error() {
    let mut e = Eth::new();
    let mut s = sq(&mut e);
    let mr = e.r.mr(16384, Access::ALL);
    let big = eth_frame(PEER_MAC, 0x0800, &vec![0u8; 9100]);
    send(&mut e, &mut s, &big, 18, &mr);
    assert_eq!(
        e.r.one(&mut s.cq).error_syndrome(),
        Ok(CqeSyndrome::LocalLength)
    );
    let mut got = Vec::new();
    assert!(!e.wire.receive(&mut got));
}

fn one_cqe_per_delivery(e: &mut Eth, rq: &mut Rq) -> u64 {
    let mut n = 0;
    while let Some(c) = e.r.poll(&mut rq.cq) {
        let _: Cqe64 = c;
        n += 1;
    }
    n
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random frames (random bytes, and frames with a chosen ethertype and IP protocol)
    /// through the steering stage: no panic, and each one delivered (with a CQE) or dropped
    /// and counted under one rule.
    #[test]
    fn random_frames_are_delivered_or_counted(
        frames in proptest::collection::vec(
            (any::<u8>(), 0usize..200, proptest::collection::vec(any::<u8>(), 0..200)),
            1..24,
        )
    ) {
        let (mut e, mut rq, ..) = steered();
        let before = e.r.counters();
        let mut fed = 0u64;
        for (kind, len, bytes) in &frames {
            let frame = match kind % 4 {
                0 => bytes.clone(),
                1 => eth_frame([0xFF; 6], 0x0806, bytes),
                2 => eth_frame(ME_MAC, 0x0800, &ipv4(bytes.first().copied().unwrap_or(1) % 3, [10, 0, 0, 2], bytes)),
                _ => {
                    let mut f = eth_frame(ME_MAC, 0x0800, &ipv4(1, [10, 0, 0, 9], bytes));
                    f.truncate((*len).max(1));
                    f
                }
            };
            if frame.is_empty() {
                continue;
            }
            e.feed(&frame);
            fed += 1;
        }
        let c = e.r.counters();
        let delivered = c.raw_rx - before.raw_rx;
        let dropped = c.rx_dropped - before.rx_dropped;
        let roce = c.frames_rx - before.frames_rx;
        prop_assert_eq!(c.rx_dropped, c.drops.total());
        prop_assert_eq!(delivered + dropped + roce, fed);
        prop_assert_eq!(one_cqe_per_delivery(&mut e, &mut rq), delivered);
    }
}

/// A change that spoils a CREATE_RQ input.
type Breaks = fn(&mut CreateRqIn);

#[test]
fn bad_rq_and_sq_contexts_get_the_prm_status() {
    let mut e = Eth::new();
    let cq = e.r.cq(4);
    let (_, pas) = e.r.h.queue_buf(4096);
    let dbr = e.r.h.alloc(64);
    let good_rq = || {
        let mut i = CreateRqIn::new_cmd();
        let c = i.ctx_mut();
        c.set_cqn(cq.cqn);
        let wq = c.wq_mut();
        wq.set_wq_type(WqType::Cyclic.into());
        wq.set_pd(e.r.pd);
        wq.set_dbr_addr(dbr);
        wq.set_log_wq_stride(4);
        wq.set_log_wq_sz(4);
        i
    };
    let cases: [(Breaks, CmdStatus); 10] = [
        (|i| i.ctx_mut().wq_mut().set_wq_type(0), CmdStatus::BadParam),
        (
            |i| i.ctx_mut().wq_mut().set_pd(0x999),
            CmdStatus::BadResource,
        ),
        (|i| i.ctx_mut().set_cqn(0x999), CmdStatus::BadResource),
        (
            |i| i.ctx_mut().wq_mut().set_log_wq_sz(31),
            CmdStatus::BadSize,
        ),
        (
            |i| i.ctx_mut().wq_mut().set_log_wq_stride(3),
            CmdStatus::BadSize,
        ),
        (
            |i| {
                let d = i.ctx().wq().dbr_addr();
                i.ctx_mut().wq_mut().set_dbr_addr(d + 4)
            },
            CmdStatus::BadParam,
        ),
        (
            |i| i.ctx_mut().wq_mut().set_page_offset(1),
            CmdStatus::BadParam,
        ),
        (|i| i.ctx_mut().set_state(1), CmdStatus::BadParam),
        (|i| i.ctx_mut().set_mem_rq_type(1), CmdStatus::BadParam),
        (|i| i.ctx_mut().set_hairpin(true), CmdStatus::BadParam),
    ];
    for (k, (break_it, status)) in cases.iter().enumerate() {
        let mut i = good_rq();
        break_it(&mut i);
        let r = e.r.h.exec(&i, &pas);
        assert_eq!(r.cmd_status(), *status, "case {k}");
        assert_ne!(r.syndrome, 0, "case {k}");
    }
    // A PAS shorter than the ring (1024 WQEs of 16 bytes need 4 pages).
    let mut i = good_rq();
    i.ctx_mut().wq_mut().set_log_wq_sz(10);
    e.r.h
        .exec(&i, &pas)
        .expect_status(CmdStatus::BadInputLength);
    let rqn = e.r.h.ok(&good_rq(), &pas).view::<CreateRqOut>().rqn();
    // The CQ and the PD are in use now.
    let mut d = rnic_hw_regs::cmd::DestroyCqIn::new_cmd();
    d.set_cqn(cq.cqn);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    let mut d = rnic_hw_regs::cmd::DeallocPdIn::new_cmd();
    d.set_pd(e.r.pd);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    // MODIFY_RQ of an unknown RQ, and with a field selected.
    let mut m = ModifyRqIn::new_cmd();
    m.set_rqn(rqn + 1000);
    m.ctx_mut().set_state(WqState::Rdy.into());
    e.r.h.exec(&m, &[]).expect_status(CmdStatus::BadResource);
    m.set_rqn(rqn);
    m.set_modify_bitmask(2);
    e.r.h.exec(&m, &[]).expect_status(CmdStatus::BadParam);

    // SQs: a UAR that is not allocated, a TIS list that is not one TIS, an inline mode
    // beyond TCP_UDP.
    let mut t = CreateTisIn::new_cmd();
    t.ctx_mut().set_transport_domain(e.td);
    let tisn = e.r.h.ok(&t, &[]).view::<CreateTisOut>().tisn();
    let good_sq = sq_in(&e, cq.cqn, tisn, dbr);
    let mut i = good_sq;
    i.ctx_mut().wq_mut().set_uar_page(0x777);
    e.r.h.exec(&i, &pas).expect_status(CmdStatus::BadResource);
    let mut i = good_sq;
    i.ctx_mut().set_tis_num_0(tisn + 50);
    e.r.h.exec(&i, &pas).expect_status(CmdStatus::BadResource);
    let mut i = good_sq;
    i.ctx_mut().set_tis_lst_sz(2);
    e.r.h.exec(&i, &pas).expect_status(CmdStatus::BadResource);
    let mut i = good_sq;
    i.ctx_mut().set_min_wqe_inline_mode(4);
    e.r.h.exec(&i, &pas).expect_status(CmdStatus::BadParam);
    let sqn = e.r.h.ok(&good_sq, &pas).view::<CreateSqOut>().sqn();
    // A doorbell for the SQ while in RST is a bad doorbell, not a send.
    let before = e.r.counters().bad_doorbells;
    e.r.h.bus.write64(
        uar_bar_offset(e.r.up.uar) + UAR_SEND_DB_0,
        u64::from(sqn << 8 | 1),
    );
    while e.r.h.dev.step() != 0 {}
    assert_eq!(e.r.counters().bad_doorbells, before + 1);
    assert_eq!(e.r.counters().raw_tx, 0);
}

#[test]
fn a_rule_and_a_miss_lead_on_to_a_table_of_a_higher_level() {
    let mut e = Eth::new();
    let mut rq = e.rq(3);
    assert!(e.modify_rq(&rq, WqState::Rst, WqState::Rdy).is_ok());
    for k in 0..8 {
        e.post(&mut rq, k * 256, 256);
    }
    let tirn = e.tir(rq.rqn).view::<CreateTirOut>().tirn();
    // Level 1: ARP to the TIR (tag 5).
    let inner = e.table(2, 1);
    let g1 = e
        .group(inner, 0, 1, &ethertype_proto(0xFFFF, 0))
        .view::<CreateFlowGroupOut>()
        .group_id();
    let tir = Some((destination_type::TIR, tirn));
    assert!(
        e.fte(inner, 0, g1, &ethertype_proto(0x0806, 0), tir, 5)
            .is_ok()
    );
    // Level 0 (the root): a miss goes on to level 1; IPv6 is forwarded there by a rule.
    let mut t = CreateFlowTableIn::new_cmd();
    t.set_table_type(table_type::NIC_RX);
    t.flow_table_context_mut().set_log_size(2);
    t.flow_table_context_mut().set_table_miss_action(1);
    t.flow_table_context_mut().set_table_miss_id(inner);
    let root = e.r.h.ok(&t, &[]).view::<CreateFlowTableOut>().table_id();
    // A miss to a table that is not of a higher level is refused.
    let mut same = t;
    same.flow_table_context_mut().set_level(1);
    e.r.h.exec(&same, &[]).expect_status(CmdStatus::BadParam);
    let g0 = e
        .group(root, 0, 1, &ethertype_proto(0xFFFF, 0))
        .view::<CreateFlowGroupOut>()
        .group_id();
    let next = Some((destination_type::FLOW_TABLE, inner));
    assert!(
        e.fte(root, 0, g0, &ethertype_proto(0x86DD, 0), next, 0)
            .is_ok()
    );
    assert!(e.root(root).is_ok());
    // The inner table is referenced (miss and forward): busy.
    let mut d = DestroyFlowTableIn::new_cmd();
    d.set_table_id(inner);
    e.r.h.exec(&d, &[]).expect_status(CmdStatus::ResourceBusy);
    // ARP misses the root and matches at level 1; IPv6 is forwarded and misses there.
    e.feed(&eth_frame([0xFF; 6], 0x0806, &[]));
    e.feed(&eth_frame(ME_MAC, 0x86DD, &[]));
    let c = e.r.one(&mut rq.cq);
    assert_eq!((c.qpn(), c.byte_cnt()), (5, 60));
    assert!(e.r.poll(&mut rq.cq).is_none());
    assert_eq!(e.r.counters().drops.steering_no_match, 1);
}

#[test]
fn vlan_tags_are_stripped_into_the_cqe_unless_vsd() {
    let mut e = Eth::new();
    let mut rq = e.rq_with(2, false);
    assert!(e.modify_rq(&rq, WqState::Rst, WqState::Rdy).is_ok());
    e.post(&mut rq, 0, 256);
    let tirn = e.tir(rq.rqn).view::<CreateTirOut>().tirn();
    let table = e.table(1, 0);
    let g = e
        .group(table, 0, 0, &FteMatchParam::default())
        .view::<CreateFlowGroupOut>()
        .group_id();
    let tir = Some((destination_type::TIR, tirn));
    assert!(
        e.fte(table, 0, g, &FteMatchParam::default(), tir, 0)
            .is_ok()
    );
    assert!(e.root(table).is_ok());
    let mut tagged = eth_frame(ME_MAC, 0x8100, &[0x20, 0x07, 0x08, 0x06]);
    tagged.resize(64, 0);
    e.feed(&tagged);
    let c = e.r.one(&mut rq.cq);
    assert!(c.cvlan_present());
    assert_eq!((c.vlan_info(), c.byte_cnt()), (0x2007, 60));
    let mut want = tagged[..12].to_vec();
    want.extend_from_slice(&tagged[16..]);
    assert_eq!(e.r.read(&rq.mr, 0, 60), want);
}
