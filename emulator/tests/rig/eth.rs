//! Raw Ethernet objects for the queue-engine tests: a device with a transport domain and the
//! test's end of an in-process wire, RQ and SQ objects with host-side rings, TIRs, NIC RX flow
//! tables, groups and entries built with real commands, and frames to feed them.

use super::{Access, Cq, Mr, Rig};
use rnic_emulator::link::{InProcLink, Link};
use rnic_hw_regs::Bus;
use rnic_hw_regs::cmd::{
    AllocTransportDomainIn, AllocTransportDomainOut, CreateFlowGroupIn, CreateFlowGroupOut,
    CreateFlowTableIn, CreateFlowTableOut, CreateRqIn, CreateRqOut, CreateSqIn, CreateSqOut,
    CreateTirIn, CreateTirOut, CreateTisIn, CreateTisOut, ModifyRqIn, ModifySqIn,
    SetFlowTableRootIn, SetFteIn, table_type,
};
use rnic_hw_regs::ctx::{
    DestFormatStruct, FteMatchParam, TirDispType, WqState, WqType, destination_type, flow_action,
    match_criteria,
};
use rnic_hw_regs::doorbell::{UAR_SEND_DB_0, uar_bar_offset};
use rnic_hw_regs::status::CmdStatus;
use rnic_hw_regs::wqe::{CtrlSeg, DataSeg, EthSeg, SendOpcode};
use zerocopy::IntoBytes;

use crate::common::host::Reply;

pub(crate) const ME_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub(crate) const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

/// An RQ object with its host-side ring.
pub(crate) struct Rq {
    pub(crate) rqn: u32,
    pub(crate) buf: u64,
    pub(crate) dbr: u64,
    pub(crate) pi: u16,
    pub(crate) log_size: u8,
    pub(crate) mr: Mr,
    pub(crate) cq: Cq,
}

/// A device with a transport domain and the test's end of its wire.
pub(crate) struct Eth {
    pub(crate) r: Rig,
    pub(crate) wire: InProcLink,
    pub(crate) td: u32,
}

impl Eth {
    pub(crate) fn new() -> Eth {
        let mut r = Rig::with_addr([10, 0, 0, 2], ME_MAC);
        let (wire, end) = InProcLink::pair();
        r.h.dev.set_link(Box::new(end));
        let td =
            r.h.ok(&AllocTransportDomainIn::new_cmd(), &[])
                .view::<AllocTransportDomainOut>()
                .transport_domain();
        Eth { r, wire, td }
    }

    /// CREATE_RQ of 2^log_size WQEs of 16 bytes (one data segment), in RST, VLAN
    /// stripping off.
    pub(crate) fn rq(&mut self, log_size: u8) -> Rq {
        self.rq_with(log_size, true)
    }

    /// [`Eth::rq`] with `vsd` (VLAN stripping disabled) given.
    pub(crate) fn rq_with(&mut self, log_size: u8, vsd: bool) -> Rq {
        let cq = self.r.cq(6);
        let (buf, pas) = self.r.h.queue_buf(16 << log_size);
        let dbr = self.r.h.alloc(64);
        let mut i = CreateRqIn::new_cmd();
        let c = i.ctx_mut();
        c.set_cqn(cq.cqn);
        c.set_vsd(vsd);
        let wq = c.wq_mut();
        wq.set_wq_type(WqType::Cyclic.into());
        wq.set_pd(self.r.pd);
        wq.set_dbr_addr(dbr);
        wq.set_log_wq_stride(4);
        wq.set_log_wq_sz(log_size);
        let rqn = self.r.h.ok(&i, &pas).view::<CreateRqOut>().rqn();
        let mr = self.r.mr(4096, Access::ALL);
        Rq {
            rqn,
            buf,
            dbr,
            pi: 0,
            log_size,
            mr,
            cq,
        }
    }

    pub(crate) fn modify_rq(&mut self, rq: &Rq, from: WqState, to: WqState) -> Reply {
        let mut m = ModifyRqIn::new_cmd();
        m.set_rqn(rq.rqn);
        m.set_rq_state(from.into());
        m.ctx_mut().set_state(to.into());
        self.r.h.exec(&m, &[])
    }

    /// Posts a receive WQE of `len` bytes at `off` of the RQ's buffer.
    pub(crate) fn post(&mut self, rq: &mut Rq, off: u64, len: u32) {
        let slot = u64::from(rq.pi & ((1 << rq.log_size) - 1));
        let d = DataSeg::new(rq.mr.addr + off, len, rq.mr.key);
        self.r.h.write_mem(rq.buf + slot * 16, d.as_bytes());
        rq.pi = rq.pi.wrapping_add(1);
        self.r.h.write_mem(rq.dbr, &u32::from(rq.pi).to_be_bytes());
    }

    pub(crate) fn tir(&mut self, rqn: u32) -> Reply {
        let mut t = CreateTirIn::new_cmd();
        t.ctx_mut().set_transport_domain(self.td);
        t.ctx_mut().set_disp_type(TirDispType::Direct.into());
        t.ctx_mut().set_inline_rqn(rqn);
        self.r.h.exec(&t, &[])
    }

    pub(crate) fn table(&mut self, log_size: u8, level: u8) -> u32 {
        let mut t = CreateFlowTableIn::new_cmd();
        t.set_table_type(table_type::NIC_RX);
        t.flow_table_context_mut().set_log_size(log_size);
        t.flow_table_context_mut().set_level(level);
        self.r.h.ok(&t, &[]).view::<CreateFlowTableOut>().table_id()
    }

    pub(crate) fn group(
        &mut self,
        table: u32,
        start: u32,
        end: u32,
        crit: &FteMatchParam,
    ) -> Reply {
        let mut g = CreateFlowGroupIn::new_cmd();
        g.set_table_type(table_type::NIC_RX);
        g.set_table_id(table);
        g.set_start_flow_index(start);
        g.set_end_flow_index(end);
        g.set_match_criteria_enable(match_criteria::OUTER_HEADERS);
        *g.match_criteria_mut() = *crit;
        self.r.h.exec(&g, &[])
    }

    /// SET_FLOW_TABLE_ENTRY: forward to `dest` (type, id), or drop when `None`.
    pub(crate) fn fte(
        &mut self,
        table: u32,
        index: u32,
        group: u32,
        value: &FteMatchParam,
        dest: Option<(u8, u32)>,
        flow_tag: u32,
    ) -> Reply {
        let mut e = SetFteIn::new_cmd();
        e.set_table_type(table_type::NIC_RX);
        e.set_table_id(table);
        e.set_flow_index(index);
        let fc = e.flow_context_mut();
        fc.set_group_id(group);
        fc.set_flow_tag(flow_tag);
        *fc.match_value_mut() = *value;
        let mut extra = Vec::new();
        match dest {
            Some((ty, id)) => {
                fc.set_action(flow_action::FWD_DEST);
                fc.set_destination_list_size(1);
                let mut d = DestFormatStruct::default();
                d.set_destination_type(ty);
                d.set_destination_id(id);
                extra.extend_from_slice(d.as_bytes());
            }
            None => fc.set_action(flow_action::DROP),
        }
        // The destination list follows the fixed input.
        let mut input = e.as_bytes().to_vec();
        input.extend_from_slice(&extra);
        self.r.h.exec_raw(&input, 0x10)
    }

    /// A TIR to `rqn`, a table of `2^log_size` entries (level 0) and a group of indices
    /// `0 ..= end` comparing `crit`: (TIR, table, group).
    pub(crate) fn steer_to(
        &mut self,
        rqn: u32,
        log_size: u8,
        end: u32,
        crit: &FteMatchParam,
    ) -> (u32, u32, u32) {
        let tirn = self.tir(rqn).view::<CreateTirOut>().tirn();
        let table = self.table(log_size, 0);
        let group = self
            .group(table, 0, end, crit)
            .view::<CreateFlowGroupOut>()
            .group_id();
        (tirn, table, group)
    }

    pub(crate) fn root(&mut self, table: u32) -> Reply {
        let mut s = SetFlowTableRootIn::new_cmd();
        s.set_table_type(table_type::NIC_RX);
        s.set_table_id(table);
        self.r.h.exec(&s, &[])
    }

    pub(crate) fn feed(&mut self, frame: &[u8]) {
        self.wire.transmit(frame);
        while self.r.h.dev.step() != 0 {}
    }
}

pub(crate) fn eth_frame(dmac: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dmac);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize(f.len().max(60), 0);
    f
}

pub(crate) fn ipv4(proto: u8, dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1];
    ip.extend_from_slice(&dst);
    let total = (20 + l4.len()) as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(l4);
    ip
}

/// Criteria (or value) on ethertype and IP protocol.
pub(crate) fn ethertype_proto(ethertype: u16, proto: u8) -> FteMatchParam {
    let mut m = FteMatchParam::default();
    m.outer_headers_mut().set_ethertype(ethertype);
    m.outer_headers_mut().set_ip_protocol(proto);
    m
}

/// A device with one RQ (RDY, 8 WQEs posted of 256 bytes) behind a TIR, and a root table
/// whose group matches ethertype + IP protocol: ARP and ICMP forward to the TIR (flow tags
/// 0x11 and 0x22), UDP is dropped.
pub(crate) fn steered() -> (Eth, Rq, u32, u32, u32) {
    let mut e = Eth::new();
    let mut rq = e.rq(3);
    assert!(e.modify_rq(&rq, WqState::Rst, WqState::Rdy).is_ok());
    for k in 0..8 {
        e.post(&mut rq, k * 256, 256);
    }
    let (tirn, table, group) = e.steer_to(rq.rqn, 4, 7, &ethertype_proto(0xFFFF, 0xFF));
    let tir = Some((destination_type::TIR, tirn));
    assert!(
        e.fte(table, 0, group, &ethertype_proto(0x0806, 0), tir, 0x11)
            .is_ok()
    );
    assert!(
        e.fte(table, 1, group, &ethertype_proto(0x0800, 1), tir, 0x22)
            .is_ok()
    );
    assert!(
        e.fte(table, 2, group, &ethertype_proto(0x0800, 17), None, 0)
            .is_ok()
    );
    assert!(e.root(table).is_ok());
    (e, rq, tirn, table, group)
}

/// An SQ object on a TIS, in RDY, with its ring.
pub(crate) struct Sq {
    pub(crate) sqn: u32,
    pub(crate) buf: u64,
    pub(crate) dbr: u64,
    pub(crate) pi: u16,
    pub(crate) cq: Cq,
    pub(crate) tisn: u32,
}

/// A CREATE_SQ of 16 WQEBBs on `cqn` and `tisn`, the L2 header inline.
pub(crate) fn sq_in(e: &Eth, cqn: u32, tisn: u32, dbr: u64) -> CreateSqIn {
    let mut i = CreateSqIn::new_cmd();
    let c = i.ctx_mut();
    c.set_cqn(cqn);
    c.set_tis_lst_sz(1);
    c.set_tis_num_0(tisn);
    c.set_min_wqe_inline_mode(1);
    let wq = c.wq_mut();
    wq.set_wq_type(WqType::Cyclic.into());
    wq.set_pd(e.r.pd);
    wq.set_uar_page(e.r.up.uar);
    wq.set_dbr_addr(dbr);
    wq.set_log_wq_stride(6);
    wq.set_log_wq_sz(4);
    i
}

pub(crate) fn sq(e: &mut Eth) -> Sq {
    let cq = e.r.cq(6);
    let mut t = CreateTisIn::new_cmd();
    t.ctx_mut().set_transport_domain(e.td);
    let tisn = e.r.h.ok(&t, &[]).view::<CreateTisOut>().tisn();
    let (buf, pas) = e.r.h.queue_buf(64 << 4);
    let dbr = e.r.h.alloc(64);
    let i = sq_in(e, cq.cqn, tisn, dbr);
    // A stride other than a WQEBB is refused first.
    let mut wrong = i;
    wrong.ctx_mut().wq_mut().set_log_wq_stride(5);
    e.r.h.exec(&wrong, &pas).expect_status(CmdStatus::BadSize);
    let sqn = e.r.h.ok(&i, &pas).view::<CreateSqOut>().sqn();
    let mut m = ModifySqIn::new_cmd();
    m.set_sqn(sqn);
    m.ctx_mut().set_state(WqState::Rdy.into());
    assert!(e.r.h.exec(&m, &[]).is_ok());
    Sq {
        sqn,
        buf,
        dbr,
        pi: 0,
        cq,
        tisn,
    }
}

/// Posts a SEND of `frame` with `inline` bytes inline and the rest from `mr`, and rings.
pub(crate) fn send(e: &mut Eth, s: &mut Sq, frame: &[u8], inline: usize, mr: &Mr) {
    let first = write_send(e, s, frame, inline, mr);
    ring_sq(e, first);
}

/// Writes the SEND WQE of [`send`] and the send counter; returns the doorbell value.
pub(crate) fn write_send(e: &mut Eth, s: &mut Sq, frame: &[u8], inline: usize, mr: &Mr) -> u64 {
    e.r.fill(mr, 0, &frame[inline..]);
    let eth_ds = (14 + inline).div_ceil(16);
    let ds = 1 + eth_ds + 1;
    let mut c = CtrlSeg::default();
    c.set_opcode(SendOpcode::Send.raw());
    c.set_wqe_index(s.pi);
    c.set_qpn(s.sqn);
    c.set_ds(ds as u8);
    let mut wqe = c.as_bytes().to_vec();
    wqe[11] = 0x08;
    let mut es = EthSeg::default();
    es.set_inline_hdr_sz(inline as u16);
    let mut seg = es.as_bytes()[..14].to_vec();
    seg.extend_from_slice(&frame[..inline]);
    seg.resize(eth_ds * 16, 0);
    wqe.extend_from_slice(&seg);
    let data = DataSeg::new(mr.addr, (frame.len() - inline) as u32, mr.key);
    wqe.extend_from_slice(data.as_bytes());
    wqe.resize(ds.div_ceil(4) * 64, 0);
    for (k, bb) in wqe.chunks(64).enumerate() {
        let slot = u64::from(s.pi.wrapping_add(k as u16) & 15);
        e.r.h.write_mem(s.buf + slot * 64, bb);
    }
    let first = u64::from_be_bytes(wqe[..8].try_into().unwrap());
    s.pi = s.pi.wrapping_add(wqe.len().div_ceil(64) as u16);
    e.r.h.write_mem(s.dbr + 4, &u32::from(s.pi).to_be_bytes());
    first
}

/// Rings the SQ doorbell with `first` (a control segment's first 8 bytes) and lets the
/// device run.
pub(crate) fn ring_sq(e: &mut Eth, first: u64) {
    e.r.h
        .bus
        .write64(uar_bar_offset(e.r.up.uar) + UAR_SEND_DB_0, first);
    while e.r.h.dev.step() != 0 {}
}
