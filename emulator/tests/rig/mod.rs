//! A host-side rig for the queue engines: CQs, MKeys, QPs created through real commands (on
//! top of `common::host`), and hand-built WQEs, doorbells and CQE polling, as a driver
//! would do them (never through the driver).

#![allow(dead_code)]

pub(crate) mod eth;
pub(crate) mod net;

use rnic_hw_regs::Bus;
use rnic_hw_regs::cmd::{
    self, CreateCqIn, CreateCqOut, CreateMkeyIn, CreateMkeyOut, CreateQpIn, CreateQpOut,
    Init2RtrQpIn, Qp2ErrIn, Rst2InitQpIn, Rtr2RtsQpIn, SetRoceAddressIn,
};
use rnic_hw_regs::cqe::{CQE_OP_OWN_INIT, Cqe64, CqeOpcode, CqeSyndrome, cqe_is_sw_owned};
use rnic_hw_regs::ctx::{MKC_ACCESS_MODE_MTT, MKC_ACCESS_MODE_PA, QpSt, ROCE_VERSION_2};
use rnic_hw_regs::doorbell::{
    CqArmCmd, UAR_CQ_ARM, UAR_EQ_UPDATE_ARM, cq_arm_doorbell, cq_arm_word, eq_doorbell,
    send_doorbell_offset, uar_bar_offset,
};
use rnic_hw_regs::eqe::{Eqe, EventType, eqe_is_sw_owned};
use rnic_hw_regs::wqe::{CtrlSeg, DataSeg, SendOpcode, WqeAv};
use zerocopy::{FromBytes, IntoBytes};

use crate::common::host::{BringUp, Host};

/// Steps `r`'s device until it is idle, after the test sent frames (or runs of packets)
/// on `wire`, its end of the device's link, and checks the receive accounting: every drop
/// under exactly one rule, at least `packets` packets received or dropped since `before`,
/// and every frame the device answered with a valid one.
pub(crate) fn settle_and_account(
    r: &Rig,
    wire: &mut rnic_emulator::link::InProcLink,
    before: &rnic_emulator::Counters,
    packets: u64,
) {
    use rnic_emulator::link::Link;
    while r.h.dev.step() != 0 {}
    let after = r.counters();
    assert_eq!(
        after.drops.total(),
        after.rx_dropped,
        "every drop under one rule"
    );
    let handled = (after.frames_rx - before.frames_rx) + (after.rx_dropped - before.rx_dropped);
    assert!(
        handled >= packets,
        "every packet accounted for: {handled} of {packets}"
    );
    let mut out = Vec::new();
    while wire.receive(&mut out) {
        rnic_emulator::wire::PacketRepr::parse(&out)
            .expect("whatever the device answers is a valid frame");
    }
}

/// The device's IPv4 address (GID 0 is `::ffff:10.0.0.1`).
pub(crate) const IP: [u8; 4] = [10, 0, 0, 1];
/// The MAC the rig programs in GID entry 0.
pub(crate) const MAC: [u8; 6] = [0x02, 0x52, 0x4e, 0x49, 0x43, 0x00];
/// The user index of QPs on an SRQ (CQEs carry it with cqe_version 1).
pub(crate) const SRQ_QP_UIDX: u32 = 0x42;
/// Q_Key of the rig's UD QPs.
pub(crate) const QKEY: u32 = 0x1111_1111;

/// The device's GID 0.
pub(crate) fn gid() -> [u8; 16] {
    gid_of(IP)
}

/// The IPv4-mapped GID of `ip`.
pub(crate) fn gid_of(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xFF;
    g[11] = 0xFF;
    g[12..].copy_from_slice(&ip);
    g
}

/// A CQ the host polls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cq {
    pub(crate) cqn: u32,
    pub(crate) buf: u64,
    pub(crate) dbr: u64,
    pub(crate) log_size: u8,
    pub(crate) ci: u32,
    pub(crate) arm_sn: u32,
}

/// Registered memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mr {
    /// IOVA of the buffer.
    pub(crate) iova: u64,
    /// The address WQEs use (the IOVA for PA keys, the start VA for MTT keys).
    pub(crate) addr: u64,
    pub(crate) len: usize,
    pub(crate) key: u32,
}

/// A QP with its host-side counters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) st: QpSt,
    pub(crate) buf: u64,
    pub(crate) dbr: u64,
    pub(crate) log_sq: u8,
    pub(crate) log_rq: u8,
    pub(crate) rq_stride_log: u8,
    pub(crate) sq_pi: u16,
    pub(crate) rq_pi: u16,
    pub(crate) doorbells: u64,
    pub(crate) scq: u32,
    pub(crate) rcq: u32,
}

impl Qp {
    fn rq_bytes(&self) -> u64 {
        if self.rq_stride_log == 0 && self.log_rq == 0 {
            // Receives come from an SRQ: the SQ starts the buffer.
            return 0;
        }
        (1u64 << self.log_rq) * (16u64 << self.rq_stride_log)
    }
}

/// Access bits of a memory key.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Access {
    pub(crate) lw: bool,
    pub(crate) rr: bool,
    pub(crate) rw: bool,
    pub(crate) a: bool,
    /// `en_rinval`: SEND_WITH_INVALIDATE may invalidate the key.
    pub(crate) rinval: bool,
}

impl Access {
    pub(crate) const ALL: Access = Access {
        lw: true,
        rr: true,
        rw: true,
        a: true,
        rinval: true,
    };
    pub(crate) const NONE: Access = Access {
        lw: false,
        rr: false,
        rw: false,
        a: false,
        rinval: false,
    };
}

/// One host and its device, brought up with a GID and a completion EQ.
pub(crate) struct Rig {
    pub(crate) h: Host,
    pub(crate) up: BringUp,
    /// EQ for completion events (vector 1).
    pub(crate) ceq: u8,
    pub(crate) ceq_buf: u64,
    pub(crate) ceq_ci: u32,
    pub(crate) pd: u32,
    /// The bring-up's async EQ buffer (128 entries) and consumer index.
    pub(crate) aeq_buf: u64,
    pub(crate) aeq_ci: u32,
    /// GID 0's IPv4 address and MAC.
    pub(crate) ip: [u8; 4],
    pub(crate) mac: [u8; 6],
    /// log2 of the READs / atomics a QP may have outstanding (`log_sra_max`) and of the
    /// responder resources it keeps (`log_rra_max`) at RTR / RTS; 2 unless a test sets it.
    pub(crate) log_rd_atomic: u8,
    /// `rlky` of the QPs and SRQs created from now on (the reserved lkey allowed); false
    /// unless a test sets it.
    pub(crate) rlky: bool,
    next_variant: u8,
}

/// An SRQ with its host-side list state.
#[derive(Clone, Debug)]
pub(crate) struct Srq {
    pub(crate) srqn: u32,
    pub(crate) buf: u64,
    pub(crate) dbr: u64,
    pub(crate) log_size: u8,
    /// WQEs posted.
    pub(crate) counter: u16,
    /// The order the host posts in (the next-pointer list it wrote).
    pub(crate) order: Vec<u16>,
}

impl Rig {
    /// Bring-up, GID 0 = `::ffff:10.0.0.1`, a completion EQ of 64 entries on vector 1;
    /// 8-byte atomics big-endian in memory (`atomic_req_8B_endianness_mode` 0).
    pub(crate) fn new() -> Rig {
        Rig::with_atomic_mode(0)
    }

    /// Like [`Rig::new`], with SET_HCA_CAP (atomic) `atomic_req_8B_endianness_mode` = `mode`
    /// before INIT_HCA.
    pub(crate) fn with_atomic_mode(mode: u8) -> Rig {
        Rig::build(mode, IP, MAC)
    }

    /// A rig whose GID 0 is `::ffff:ip` with `mac`.
    pub(crate) fn with_addr(ip: [u8; 4], mac: [u8; 6]) -> Rig {
        Rig::build(0, ip, mac)
    }

    /// A rig whose device runs on its own thread ([`rnic_emulator::RunMode::Threaded`]).
    pub(crate) fn threaded(ip: [u8; 4], mac: [u8; 6]) -> Rig {
        Rig::build_on(
            Host::with_mode(
                rnic_emulator::Profile::default(),
                rnic_emulator::RunMode::Threaded,
            ),
            0,
            ip,
            mac,
        )
    }

    /// A rig on a deterministic device with `profile`.
    pub(crate) fn with_profile(profile: rnic_emulator::Profile, ip: [u8; 4], mac: [u8; 6]) -> Rig {
        Rig::build_on(Host::new(profile), 0, ip, mac)
    }

    fn build(mode: u8, ip: [u8; 4], mac: [u8; 6]) -> Rig {
        Rig::build_on(Host::small(), mode, ip, mac)
    }

    fn build_on(mut h: Host, mode: u8, ip: [u8; 4], mac: [u8; 6]) -> Rig {
        let up = if mode == 0 {
            h.bring_up()
        } else {
            // `Host::bring_up` with the atomic capability set before INIT_HCA.
            Rig::init_with_atomic_mode(&mut h, mode);
            h.enable_roce();
            let uar = h.alloc_uar();
            let events = [
                EventType::PageRequest.raw(),
                EventType::CqError.raw(),
                EventType::WqCatasError.raw(),
                EventType::PortChange.raw(),
                EventType::WqInvalReqError.raw(),
                EventType::WqAccessError.raw(),
                EventType::SrqRqLimit.raw(),
            ];
            let (eqn, _) = h.create_eq(7, uar, 0, &events);
            let pd = h.alloc_pd();
            BringUp { uar, eqn, pd }
        };
        // The first region the host allocated is the bring-up EQ's buffer (128 EQEs).
        let aeq_buf = h.regions[0].iova;
        assert_eq!(h.regions[0].len, 128 * 64);
        let mut s = SetRoceAddressIn::new_cmd();
        s.set_roce_address_index(0);
        s.set_vhca_port_num(1);
        let a = s.roce_address_mut();
        a.set_source_l3_address(gid_of(ip));
        a.set_source_mac(mac);
        a.set_roce_version(ROCE_VERSION_2);
        h.ok(&s, &[]);
        let (ceq, ceq_buf) = h.create_eq(6, up.uar, 1, &[]);
        Rig {
            h,
            up,
            ceq,
            ceq_buf,
            ceq_ci: 0,
            pd: up.pd,
            aeq_buf,
            aeq_ci: 0,
            ip,
            mac,
            log_rd_atomic: 2,
            rlky: false,
            next_variant: 0x10,
        }
    }

    /// ENABLE_HCA .. INIT_HCA as `Host::init_hca` does, with the atomic capability set
    /// before the init pages; `Host::bring_up` then skips nothing it needs (a second
    /// ENABLE_HCA / INIT_HCA would fail, so this replaces its first part).
    fn init_with_atomic_mode(h: &mut Host, mode: u8) {
        use rnic_hw_regs::cmd::op_mod;
        h.enable_hca();
        h.ok(&cmd::QueryIssiIn::new_cmd(), &[]);
        let mut s = cmd::SetIssiIn::new_cmd();
        s.set_current_issi(1);
        h.ok(&s, &[]);
        let boot = h.query_pages(op_mod::QUERY_PAGES_BOOT);
        assert!(h.give_pages(boot.max(0) as usize).is_ok());
        let mut reg = cmd::AccessRegisterIn::new_cmd();
        reg.set_register_id(cmd::REG_HOST_ENDIANNESS);
        h.ok(&reg, &[0; 16]);
        let mut q = cmd::QueryHcaCapIn::new_cmd();
        q.set_op_mod(op_mod::query_hca_cap(3, 1));
        let cur = h.ok(&q, &[]).view::<cmd::QueryHcaCapOut>();
        let mut set = cmd::SetHcaCapIn::new_cmd();
        set.set_op_mod(op_mod::set_hca_cap(3));
        *set.capability_mut() = *cur.capability();
        set.capability_mut()
            .atomic_caps_mut()
            .set_atomic_req_8B_endianness_mode(mode);
        h.ok(&set, &[]);
        let init = h.query_pages(op_mod::QUERY_PAGES_INIT);
        assert!(h.give_pages(init.max(0) as usize).is_ok());
        h.ok(&cmd::InitHcaIn::new_cmd(), &[]);
    }

    /// CREATE_CQ of `2^log_size` CQEs (op_own initialized to 0xF1) on the completion EQ.
    pub(crate) fn cq(&mut self, log_size: u8) -> Cq {
        let len = 64usize << log_size;
        let (buf, pas) = self.h.queue_buf(len);
        let mut init = vec![0u8; len];
        for c in init.chunks_exact_mut(64) {
            c[63] = CQE_OP_OWN_INIT;
        }
        self.h.write_mem(buf, &init);
        let dbr = self.h.alloc(64);
        let mut i = CreateCqIn::new_cmd();
        let c = i.cq_context_mut();
        c.set_log_cq_size(log_size);
        c.set_uar_page(self.up.uar);
        c.set_c_eqn(u32::from(self.ceq));
        c.set_log_page_size(0);
        c.set_dbr_addr(dbr);
        let r = self.h.ok(&i, &pas);
        Cq {
            cqn: r.view::<CreateCqOut>().cqn(),
            buf,
            dbr,
            log_size,
            ci: 0,
            arm_sn: 0,
        }
    }

    /// A zeroed buffer of `len` bytes registered with an MTT key (start VA distinct from the
    /// IOVA) and `access`.
    pub(crate) fn mr(&mut self, len: usize, access: Access) -> Mr {
        self.mr_in_pd(len, access, self.pd, true)
    }

    /// Like [`Rig::mr`] with a PD and a choice of PA (false) or MTT (true) translation.
    pub(crate) fn mr_in_pd(&mut self, len: usize, access: Access, pd: u32, mtt: bool) -> Mr {
        let (iova, _) = self.h.queue_buf(len);
        let variant = self.take_variant();
        let mut i = CreateMkeyIn::new_cmd();
        let addr = if mtt { 0x7000_0000_0000 + iova } else { iova };
        let npages = len.div_ceil(4096);
        {
            let m = i.memory_key_mkey_entry_mut();
            m.set_access_mode(if mtt {
                MKC_ACCESS_MODE_MTT
            } else {
                MKC_ACCESS_MODE_PA
            });
            set_key_access(m, access, variant, pd);
            m.set_en_rinval(access.rinval);
            m.set_start_addr(addr);
            m.set_len(len as u64);
            m.set_log_page_size(12);
            if mtt {
                m.set_translations_octword_size(npages.div_ceil(2) as u32);
            }
        }
        let mut extra = Vec::new();
        if mtt {
            i.set_translations_octword_actual_size(npages.div_ceil(2) as u32);
            for p in 0..npages.div_ceil(2) * 2 {
                let e = if p < npages {
                    (iova + 4096 * p as u64) | 3
                } else {
                    0
                };
                extra.extend_from_slice(&e.to_be_bytes());
            }
        }
        let r = self.h.ok(&i, &extra);
        let index = r.view::<CreateMkeyOut>().mkey_index();
        Mr {
            iova,
            addr,
            len,
            key: index << 8 | u32::from(variant),
        }
    }

    /// The next key variant (`mkey_7_0`) the rig hands out.
    fn take_variant(&mut self) -> u8 {
        let variant = self.next_variant;
        self.next_variant = self.next_variant.wrapping_add(1);
        variant
    }

    /// A PA key over the whole address space (`length64`): addresses are IOVAs.
    pub(crate) fn mr_whole(&mut self, access: Access) -> u32 {
        let variant = self.take_variant();
        let mut i = CreateMkeyIn::new_cmd();
        let m = i.memory_key_mkey_entry_mut();
        m.set_access_mode(MKC_ACCESS_MODE_PA);
        set_key_access(m, access, variant, self.pd);
        m.set_length64(true);
        let r = self.h.ok(&i, &[]);
        r.view::<CreateMkeyOut>().mkey_index() << 8 | u32::from(variant)
    }

    /// CREATE_QP of type `st` with `2^log_sq` WQEBBs and `2^log_rq` receive WQEs of 64 bytes.
    pub(crate) fn qp(&mut self, st: QpSt, scq: &Cq, rcq: &Cq, log_sq: u8, log_rq: u8) -> Qp {
        let stride_log = 2; // 64-byte receive WQEs: 4 data segments
        let rq = (1usize << log_rq) * (16 << stride_log);
        let sq = 64usize << log_sq;
        let (buf, pas) = self.h.queue_buf(rq + sq);
        let dbr = self.h.alloc(64);
        let mut i = self.create_qp_in(st, scq, rcq, dbr, log_sq);
        let c = i.qpc_mut();
        c.set_log_page_size(0);
        c.set_log_rq_size(log_rq);
        c.set_log_rq_stride(stride_log);
        c.set_rq_type(0);
        c.set_user_index(0xFF_FFFF);
        c.set_fre(true);
        let r = self.h.ok(&i, &pas);
        Qp {
            qpn: r.view::<CreateQpOut>().qpn(),
            st,
            buf,
            dbr,
            log_sq,
            log_rq,
            rq_stride_log: stride_log,
            sq_pi: 0,
            rq_pi: 0,
            doorbells: 0,
            scq: scq.cqn,
            rcq: rcq.cqn,
        }
    }

    /// CREATE_QP's fields both kinds of rig QP share: type, PM state 3, the rig's PD and
    /// UAR, the CQs, the doorbell record and `2^log_sq` WQEBBs.
    fn create_qp_in(&self, st: QpSt, scq: &Cq, rcq: &Cq, dbr: u64, log_sq: u8) -> CreateQpIn {
        let mut i = CreateQpIn::new_cmd();
        let c = i.qpc_mut();
        c.set_st(st.into());
        c.set_pm_state(3);
        c.set_pd(self.pd);
        c.set_uar_page(self.up.uar);
        c.set_cqn_snd(scq.cqn);
        c.set_cqn_rcv(rcq.cqn);
        c.set_log_sq_size(log_sq);
        c.set_dbr_addr(dbr);
        c.set_rlky(self.rlky);
        i
    }

    /// CREATE_SRQ of `2^log_size` 64-byte WQEs whose next pointers follow `order` (a cycle
    /// over every index), with limit `lwm`.
    pub(crate) fn srq(&mut self, log_size: u8, order: &[u16], lwm: u16) -> Srq {
        let n = 1usize << log_size;
        assert_eq!(order.len(), n);
        let (buf, pas) = self.h.queue_buf(n * 64);
        for (k, &i) in order.iter().enumerate() {
            let next = order[(k + 1) % n];
            self.h
                .write_mem(buf + u64::from(i) * 64 + 2, &next.to_be_bytes());
        }
        let dbr = self.h.alloc(64);
        let mut i = cmd::CreateSrqIn::new_cmd();
        let c = i.srq_context_entry_mut();
        c.set_log_srq_size(log_size);
        c.set_log_rq_stride(2);
        c.set_pd(self.pd);
        c.set_dbr_addr(dbr);
        c.set_lwm(lwm);
        c.set_rlky(self.rlky);
        let r = self.h.ok(&i, &pas);
        Srq {
            srqn: r.view::<cmd::CreateSrqOut>().srqn(),
            buf,
            dbr,
            log_size,
            counter: 0,
            order: order.to_vec(),
        }
    }

    /// Posts a receive WQE with one SGE to `srq` at the next index of its list; returns the
    /// index.
    pub(crate) fn post_srq(&mut self, srq: &mut Srq, addr: u64, len: u32, key: u32) -> u16 {
        let n = srq.order.len();
        let index = srq.order[usize::from(srq.counter) % n];
        let at = srq.buf + u64::from(index) * 64;
        let mut segs = DataSeg::new(addr, len, key).as_bytes().to_vec();
        segs.extend_from_slice(DataSeg::terminator().as_bytes());
        self.h.write_mem(at + 16, &segs);
        srq.counter = srq.counter.wrapping_add(1);
        self.h
            .write_mem(srq.dbr, &u32::from(srq.counter).to_be_bytes());
        index
    }

    /// CREATE_QP of an RC QP whose receives come from `srq`.
    pub(crate) fn qp_on_srq(&mut self, scq: &Cq, rcq: &Cq, srq: &Srq) -> Qp {
        let (buf, pas) = self.h.queue_buf(64 << 6);
        let dbr = self.h.alloc(64);
        let mut i = self.create_qp_in(QpSt::Rc, scq, rcq, dbr, 6);
        let c = i.qpc_mut();
        c.set_rq_type(1);
        c.set_srqn_rmpn_xrqn(srq.srqn);
        c.set_user_index(SRQ_QP_UIDX);
        let r = self.h.ok(&i, &pas);
        Qp {
            qpn: r.view::<CreateQpOut>().qpn(),
            st: QpSt::Rc,
            buf,
            dbr,
            log_sq: 6,
            log_rq: 0,
            rq_stride_log: 0,
            sq_pi: 0,
            rq_pi: 0,
            doorbells: 0,
            scq: scq.cqn,
            rcq: rcq.cqn,
        }
    }

    /// The next EQE of the bring-up's async EQ, if any (consumed).
    pub(crate) fn poll_aeq(&mut self) -> Option<Eqe> {
        next_eqe(&self.h, self.aeq_buf, &mut self.aeq_ci, 7)
    }

    /// RST2INIT with all remote access flags (and the Q_Key for UD).
    pub(crate) fn init_qp(&mut self, qp: &Qp, rre: bool, rwe: bool, rae: bool) {
        let mut i = Rst2InitQpIn::new_cmd();
        i.set_qpn(qp.qpn);
        let c = i.qpc_mut();
        c.set_pm_state(3);
        c.set_rre(rre);
        c.set_rwe(rwe);
        c.set_rae(rae);
        c.set_q_key(QKEY);
        c.primary_address_path_mut().set_vhca_port_num(1);
        self.h.ok(&i, &[]);
    }

    /// INIT2RTR towards `remote_qpn` on this device, path MTU code `mtu`, then RTR2RTS.
    pub(crate) fn rtr_rts(&mut self, qp: &Qp, remote_qpn: u32, mtu: u8, psn: u32, rnr_retry: u8) {
        let (ip, mac) = (self.ip, self.mac);
        self.rtr_rts_to(qp, remote_qpn, mtu, psn, rnr_retry, gid_of(ip), mac);
    }

    /// INIT2RTR towards `remote_qpn` at `rgid` / `rmac`, then RTR2RTS.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rtr_rts_to(
        &mut self,
        qp: &Qp,
        remote_qpn: u32,
        mtu: u8,
        psn: u32,
        rnr_retry: u8,
        rgid: [u8; 16],
        rmac: [u8; 6],
    ) {
        self.rtr_to(qp, remote_qpn, mtu, psn, rgid, rmac);
        self.rts(qp, psn, rnr_retry);
    }

    /// INIT2RTR only (see [`Rig::rtr_rts_to`]).
    pub(crate) fn rtr_to(
        &mut self,
        qp: &Qp,
        remote_qpn: u32,
        mtu: u8,
        psn: u32,
        rgid: [u8; 16],
        rmac: [u8; 6],
    ) {
        let mut i = Init2RtrQpIn::new_cmd();
        i.set_qpn(qp.qpn);
        let c = i.qpc_mut();
        c.set_mtu(mtu);
        c.set_log_msg_max(30);
        c.set_remote_qpn(remote_qpn);
        c.set_next_rcv_psn(psn);
        c.set_log_rra_max(self.log_rd_atomic);
        c.set_min_rnr_nak(1);
        let a = c.primary_address_path_mut();
        a.set_rmac(rmac);
        a.set_rgid_rip(rgid);
        a.set_src_addr_index(0);
        a.set_hop_limit(64);
        a.set_udp_sport(0xC000 | (qp.qpn as u16 & 0x3FFF));
        a.set_vhca_port_num(1);
        self.h.ok(&i, &[]);
    }

    /// RTR2RTS with `psn`, `rnr_retry`, retry count 7, `2^log_rd_atomic` outstanding READs /
    /// atomics.
    pub(crate) fn rts(&mut self, qp: &Qp, psn: u32, rnr_retry: u8) {
        let mut i = Rtr2RtsQpIn::new_cmd();
        i.set_qpn(qp.qpn);
        let c = i.qpc_mut();
        c.set_next_send_psn(psn);
        c.set_log_sra_max(self.log_rd_atomic);
        c.set_retry_count(7);
        c.set_rnr_retry(rnr_retry);
        c.primary_address_path_mut().set_ack_timeout(14);
        self.h.ok(&i, &[]);
    }

    /// A connected pair of RC (or UC) QPs on fresh CQs, MTU code `mtu`, all access flags.
    pub(crate) fn pair(&mut self, st: QpSt, mtu: u8) -> (Qp, Qp, Cq, Cq) {
        self.pair_with(st, mtu, 0x10, 0)
    }

    /// Like [`Rig::pair`], with start PSN `psn` and `rnr_retry` on both QPs.
    pub(crate) fn pair_with(
        &mut self,
        st: QpSt,
        mtu: u8,
        psn: u32,
        rnr_retry: u8,
    ) -> (Qp, Qp, Cq, Cq) {
        let ca = self.cq(6);
        let cb = self.cq(6);
        let a = self.qp(st, &ca, &ca, 6, 6);
        let b = self.qp(st, &cb, &cb, 6, 6);
        for q in [&a, &b] {
            self.init_qp(q, true, true, true);
        }
        self.rtr_rts(&a, b.qpn, mtu, psn, rnr_retry);
        self.rtr_rts(&b, a.qpn, mtu, psn, rnr_retry);
        (a, b, ca, cb)
    }

    /// Two UD QPs on fresh CQs, both in RTS (UD needs no peer), MTU code `mtu`, send PSN
    /// `psn`.
    pub(crate) fn ud_pair(&mut self, mtu: u8, psn: u32) -> (Qp, Qp, Cq, Cq) {
        let ca = self.cq(6);
        let cb = self.cq(6);
        let a = self.qp(QpSt::Ud, &ca, &ca, 6, 6);
        let b = self.qp(QpSt::Ud, &cb, &cb, 6, 6);
        for q in [&a, &b] {
            self.init_qp(q, false, false, false);
            self.rtr_rts(q, 0, mtu, psn, 0);
        }
        (a, b, ca, cb)
    }

    /// 2ERR.
    pub(crate) fn qp_to_err(&mut self, qp: &Qp) {
        let mut i = Qp2ErrIn::new_cmd();
        i.set_qpn(qp.qpn);
        self.h.ok(&i, &[]);
    }

    /// Writes a send WQE (control segment from the arguments, then `segs`) at the QP's
    /// producer counter, without ringing. Returns its wqe_index.
    pub(crate) fn write_wqe(
        &mut self,
        qp: &mut Qp,
        opcode: u8,
        fm_ce_se: u8,
        imm: u32,
        segs: &[u8],
    ) -> u16 {
        let ds = (16 + segs.len()).div_ceil(16);
        let mut c = CtrlSeg::default();
        c.set_opcode(opcode);
        c.set_wqe_index(qp.sq_pi);
        c.set_qpn(qp.qpn);
        c.set_ds(ds as u8);
        c.set_imm(imm);
        let mut wqe = c.as_bytes().to_vec();
        wqe[11] = fm_ce_se;
        wqe.extend_from_slice(segs);
        wqe.resize(ds.div_ceil(4) * 64, 0);
        self.write_raw_wqe(qp, &wqe)
    }

    /// Writes raw WQEBBs at the producer counter (wrapping per WQEBB) and advances it.
    pub(crate) fn write_raw_wqe(&mut self, qp: &mut Qp, wqe: &[u8]) -> u16 {
        let index = qp.sq_pi;
        let size = 1u16 << qp.log_sq;
        for (k, bb) in wqe.chunks(64).enumerate() {
            let slot = qp.sq_pi.wrapping_add(k as u16) & (size - 1);
            let at = qp.buf + qp.rq_bytes() + u64::from(slot) * 64;
            self.h.write_mem(at, bb);
        }
        qp.sq_pi = qp.sq_pi.wrapping_add(wqe.len().div_ceil(64) as u16);
        index
    }

    /// Writes the send counter to the doorbell record and rings the send doorbell with the
    /// control segment of the WQE at `last`.
    pub(crate) fn ring(&mut self, qp: &mut Qp, last: u16) {
        let size = 1u16 << qp.log_sq;
        let at = qp.buf + qp.rq_bytes() + u64::from(last & (size - 1)) * 64;
        let ctrl = self.h.read_mem(at, 8);
        let value = u64::from_be_bytes(ctrl.try_into().expect("8 bytes"));
        self.ring_with(qp, value);
    }

    /// Writes the send counter to the doorbell record and rings with a given doorbell value.
    pub(crate) fn ring_with(&mut self, qp: &mut Qp, value: u64) {
        self.h
            .write_mem(qp.dbr + 4, &u32::from(qp.sq_pi).to_be_bytes());
        let off = uar_bar_offset(self.up.uar) + send_doorbell_offset(qp.doorbells);
        qp.doorbells += 1;
        self.h.bus.write64(off, value);
    }

    /// Posts one send WQE and rings.
    pub(crate) fn post(
        &mut self,
        qp: &mut Qp,
        opcode: u8,
        fm_ce_se: u8,
        imm: u32,
        segs: &[u8],
    ) -> u16 {
        let i = self.write_wqe(qp, opcode, fm_ce_se, imm, segs);
        self.ring(qp, i);
        i
    }

    /// Posts a receive WQE with `sges` (addr, len, lkey); returns its counter.
    pub(crate) fn post_recv(&mut self, qp: &mut Qp, sges: &[(u64, u32, u32)]) -> u16 {
        let stride = 16usize << qp.rq_stride_log;
        let mut w = Vec::with_capacity(stride);
        for &(addr, len, key) in sges {
            w.extend_from_slice(DataSeg::new(addr, len, key).as_bytes());
        }
        if w.len() < stride {
            w.extend_from_slice(DataSeg::terminator().as_bytes());
        }
        w.resize(stride, 0);
        let slot = u64::from(qp.rq_pi & ((1 << qp.log_rq) - 1));
        self.h.write_mem(qp.buf + slot * stride as u64, &w);
        let counter = qp.rq_pi;
        qp.rq_pi = qp.rq_pi.wrapping_add(1);
        self.h.write_mem(qp.dbr, &u32::from(qp.rq_pi).to_be_bytes());
        counter
    }

    /// The next CQE, if the device wrote one (consumed: ci advances and set_ci is written).
    pub(crate) fn poll(&mut self, cq: &mut Cq) -> Option<Cqe64> {
        let slot = cq.ci & ((1 << cq.log_size) - 1);
        let raw = self.h.read_mem(cq.buf + u64::from(slot) * 64, 64);
        if !cqe_is_sw_owned(raw[63], cq.ci, cq.log_size) {
            return None;
        }
        let cqe = Cqe64::read_from_bytes(&raw).expect("64 bytes");
        cq.ci += 1;
        self.h.write_mem(cq.dbr, &(cq.ci & 0xFF_FFFF).to_be_bytes());
        Some(cqe)
    }

    /// Polls exactly one CQE (panics when there is none).
    #[track_caller]
    pub(crate) fn one(&mut self, cq: &mut Cq) -> Cqe64 {
        self.poll(cq).expect("a CQE")
    }

    /// Arms `cq` for the next (or next solicited) completion.
    pub(crate) fn arm(&mut self, cq: &mut Cq, solicited: bool) {
        let cmd = if solicited {
            CqArmCmd::Solicited
        } else {
            CqArmCmd::NextCompletion
        };
        let word = cq_arm_word(cq.arm_sn, cmd, cq.ci);
        self.h.write_mem(cq.dbr + 4, &word.to_be_bytes());
        cq.arm_sn += 1;
        self.h.bus.write64(
            uar_bar_offset(self.up.uar) + UAR_CQ_ARM,
            cq_arm_doorbell(word, cq.cqn),
        );
    }

    /// The next EQE of the completion EQ, if any (consumed).
    pub(crate) fn poll_ceq(&mut self) -> Option<Eqe> {
        next_eqe(&self.h, self.ceq_buf, &mut self.ceq_ci, 6)
    }

    /// Arms the completion EQ at its consumer index.
    pub(crate) fn arm_ceq(&mut self) {
        self.h.bus.write32(
            uar_bar_offset(self.up.uar) + UAR_EQ_UPDATE_ARM,
            eq_doorbell(self.ceq, self.ceq_ci),
        );
    }

    /// Writes `data` at `off` into `mr`.
    pub(crate) fn fill(&mut self, mr: &Mr, off: usize, data: &[u8]) {
        self.h.write_mem(mr.iova + off as u64, data);
    }

    /// Reads `len` bytes at `off` of `mr`.
    pub(crate) fn read(&self, mr: &Mr, off: usize, len: usize) -> Vec<u8> {
        self.h.read_mem(mr.iova + off as u64, len)
    }

    /// The device's counters.
    pub(crate) fn counters(&self) -> rnic_emulator::Counters {
        self.h.dev.counters()
    }
}

impl Default for Rig {
    fn default() -> Self {
        Self::new()
    }
}

/// The access bits, `qpn` 0xFF_FFFF (no QP), key variant and PD of a new memory key.
fn set_key_access(m: &mut rnic_hw_regs::ctx::Mkc, access: Access, variant: u8, pd: u32) {
    m.set_lr(true);
    m.set_lw(access.lw);
    m.set_rr(access.rr);
    m.set_rw(access.rw);
    m.set_a(access.a);
    m.set_qpn(0xFF_FFFF);
    m.set_mkey_7_0(variant);
    m.set_pd(pd);
}

/// The next EQE of the EQ of `2^log_size` entries at `buf` whose consumer index is `ci`, if
/// the device wrote one (consumed: `ci` advances).
fn next_eqe(h: &Host, buf: u64, ci: &mut u32, log_size: u8) -> Option<Eqe> {
    let slot = *ci & ((1 << log_size) - 1);
    let raw = h.read_mem(buf + u64::from(slot) * 64, 64);
    if !eqe_is_sw_owned(raw[63], *ci, log_size) {
        return None;
    }
    *ci += 1;
    Some(Eqe::read_from_bytes(&raw).expect("64 bytes"))
}

/// Checks an error CQE: a requester's (REQ_ERR) or a responder's (RESP_ERR) of QP `qpn` for
/// WQE `counter`, with syndrome `s`.
#[track_caller]
pub(crate) fn assert_err(c: &Cqe64, requester: bool, qpn: u32, counter: u16, s: CqeSyndrome) {
    let want = if requester {
        CqeOpcode::ReqErr
    } else {
        CqeOpcode::RespErr
    };
    assert_eq!(c.cqe_opcode(), Ok(want), "{c:?}");
    assert_eq!(c.error_syndrome(), Ok(s), "syndrome");
    assert_eq!(c.qpn(), qpn);
    assert_eq!(c.wqe_counter(), counter);
}

/// A data segment.
pub(crate) fn data(addr: u64, len: u32, key: u32) -> Vec<u8> {
    DataSeg::new(addr, len, key).as_bytes().to_vec()
}

/// The data segment of a message of `len` bytes at `addr`: none for an empty message (a
/// segment's byte count 0 would mean 2 GiB).
pub(crate) fn data_for(addr: u64, len: usize, key: u32) -> Vec<u8> {
    if len == 0 {
        Vec::new()
    } else {
        data(addr, len as u32, key)
    }
}

/// A remote address segment.
pub(crate) fn raddr(addr: u64, rkey: u32) -> Vec<u8> {
    let mut v = vec![0u8; 16];
    v[..8].copy_from_slice(&addr.to_be_bytes());
    v[8..12].copy_from_slice(&rkey.to_be_bytes());
    v
}

/// An atomic segment.
pub(crate) fn atomic(swap_add: u64, compare: u64) -> Vec<u8> {
    let mut v = swap_add.to_be_bytes().to_vec();
    v.extend_from_slice(&compare.to_be_bytes());
    v
}

/// An inline segment holding `bytes` (padded to 16).
pub(crate) fn inline(bytes: &[u8]) -> Vec<u8> {
    let mut v = (0x8000_0000u32 | bytes.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(bytes);
    v.resize((4 + bytes.len()).div_ceil(16) * 16, 0);
    v
}

/// A UD datagram segment to `dqpn` on this device.
pub(crate) fn datagram(dqpn: u32, qkey: u32) -> Vec<u8> {
    datagram_to(dqpn, qkey, IP, MAC)
}

/// A UD datagram segment to `dqpn` at `ip` / `mac` (another device).
pub(crate) fn datagram_to(dqpn: u32, qkey: u32, ip: [u8; 4], mac: [u8; 6]) -> Vec<u8> {
    let mut av = WqeAv::default();
    av.set_qkey(qkey);
    av.set_dqp_dct(dqpn);
    av.set_rmac(mac);
    av.set_hop_limit(64);
    av.set_grh(true);
    av.set_sgid_index(0);
    av.set_rgid(gid_of(ip));
    av.as_bytes().to_vec()
}

/// `av` (a datagram segment) with UDP source port `sport` in its `rlid`, as the mlx5
/// provider writes it for RoCE v2.
pub(crate) fn with_udp_sport(av: &[u8], sport: u16) -> Vec<u8> {
    let mut a = WqeAv::read_from_bytes(av).expect("a datagram segment");
    a.set_rlid(sport);
    a.as_bytes().to_vec()
}

/// `fm_ce_se` for a signaled WQE.
pub(crate) const SIGNALED: u8 = 0x08;

/// Concatenates segments.
pub(crate) fn segs(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// Raw send opcodes.
pub(crate) mod op {
    use super::SendOpcode;
    pub(crate) const NOP: u8 = SendOpcode::Nop as u8;
    pub(crate) const SEND: u8 = SendOpcode::Send as u8;
    pub(crate) const SEND_IMM: u8 = SendOpcode::SendImm as u8;
    pub(crate) const SEND_INVAL: u8 = SendOpcode::SendInval as u8;
    pub(crate) const WRITE: u8 = SendOpcode::RdmaWrite as u8;
    pub(crate) const WRITE_IMM: u8 = SendOpcode::RdmaWriteImm as u8;
    pub(crate) const READ: u8 = SendOpcode::RdmaRead as u8;
    pub(crate) const CS: u8 = SendOpcode::AtomicCs as u8;
    pub(crate) const FA: u8 = SendOpcode::AtomicFa as u8;
}
