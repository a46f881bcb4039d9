//! The device's resource tables: every object the command interface creates.
//!
//! Each object lives in a [`Table`] keyed by the number the device handed out (UAR index,
//! EQN, CQN, QPN, ...). The command handlers in `crate::cmd` create, query and destroy them;
//! the queue engines read and update them.

mod buf;
mod eth;
mod flow;
mod qp_transport;
mod table;
mod timer_queue;
mod wqe;

pub(crate) use buf::QueueBuf;
pub(crate) use eth::{
    EthRq, EthSq, EthWq, FIRST_RQN, FIRST_SQN, MAX_ETH_QUEUES, Tir, Tis, TransportDomain,
};
pub(crate) use flow::{FlowDest, FlowGroup, FlowSteering, FlowTable, Fte};
pub(crate) use qp_transport::{
    InMsg, MsgKind, QpTransport, RdRes, ReadJob, ResKind, WINDOW, advance_una,
};
pub(crate) use table::Table;
pub(crate) use timer_queue::TimerQueue;
pub(crate) use wqe::{Domain, RecvWqe, Seg, SendWqe, UdDest, UmrWqe};

use rnic_hw_regs::ctx::{Cqc, Qpc, RoceAddrLayout};

/// The reserved lkey QUERY_SPECIAL_CONTEXTS reports: MKey index 0, which CREATE_MKEY never
/// hands out (indices start at 1); a data segment with it addresses bus addresses (IOVAs)
/// directly, like a PA key.
pub(crate) const RESD_LKEY: u32 = 0x0000_0007;

/// A UAR page allocated with ALLOC_UAR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Uar;

/// A protection domain allocated with ALLOC_PD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pd;

/// How an MKey translates addresses (mkc `access_mode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MkeyTranslation {
    /// Physical (bus) addresses: the address is the IOVA.
    Pa,
    /// Memory translation table: IOVA of each page of `1 << log_page_size` bytes.
    Mtt { pages: Vec<u64>, log_page_size: u8 },
    /// A memory window (KLM mode, created free with `umr_en`): room for `klm_octowords`
    /// KLM octowords, and where its last bind pointed it (`None` until the first bind).
    Window {
        klm_octowords: u32,
        bound: Option<WindowTarget>,
    },
}

/// What a bound memory window addresses: its first byte is `addr` under the MR key `mkey`
/// (the bind's one KLM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowTarget {
    /// The MR's key (lkey = rkey), checked again on every access through the window.
    pub mkey: u32,
    /// The address under `mkey` of the window's `start_addr`.
    pub addr: u64,
}

/// A memory key created with CREATE_MKEY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mkey {
    /// The key's low byte chosen by software (`mkey_7_0`); key = index << 8 | variant.
    pub variant: u8,
    pub pd: u32,
    /// Bound QPN (0xFFFFFF = unbound).
    pub qpn: u32,
    /// Access bits: local read is implied; these are the mkc bits.
    pub lw: bool,
    pub rr: bool,
    pub rw: bool,
    pub a: bool,
    /// The whole address space (PA keys with `length64`).
    pub length64: bool,
    pub start_addr: u64,
    pub len: u64,
    pub translation: MkeyTranslation,
    /// Free: invalidated (by a SEND_WITH_INVALIDATE or a UMR naming it), or a window not
    /// bound yet; no access until a UMR binds it again.
    pub free: bool,
    /// `umr_en`: UMR WQEs may modify it (windows).
    pub umr_en: bool,
    /// `en_rinval`: a SEND_WITH_INVALIDATE may invalidate it (without, the request is
    /// refused as invalid, as ConnectX and rxe refuse it for ordinary user MRs).
    pub rinval: bool,
}

/// An event queue created with CREATE_EQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Eq {
    pub log_size: u8,
    pub buf: QueueBuf,
    pub uar: u32,
    pub intr: u16,
    /// Event types delivered here (bit t of word t / 64).
    pub events: [u64; 4],
    /// Producer index: EQEs written so far.
    pub pi: u32,
    /// Consumer index from the last EQ doorbell.
    pub ci: u32,
    /// Armed (doorbell at 0x40): the next EQE raises the interrupt.
    pub armed: bool,
}

/// A completion queue created with CREATE_CQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cq {
    pub log_size: u8,
    pub buf: QueueBuf,
    pub uar: u32,
    pub eqn: u8,
    /// Doorbell record IOVA: dword 0 set_ci, dword 1 arm word.
    pub dbr_addr: u64,
    /// Producer index: CQEs written so far.
    pub pi: u32,
    /// Armed by a CQ arm doorbell: `Some(solicited_only)`.
    pub armed: Option<bool>,
    /// An overrun happened: the CQ is in error and writes nothing more.
    pub overrun: bool,
    /// The context as created (cqe_sz, oi, moderation, updated by MODIFY_CQ); QUERY_CQ
    /// returns it with the counters.
    pub ctx: Cqc,
}

impl Cq {
    /// A CQ created with context `ctx` over `buf`, with no CQE written yet.
    pub(crate) fn new(ctx: Cqc, buf: QueueBuf, uar: u32, eqn: u8, dbr_addr: u64) -> Self {
        Cq {
            log_size: ctx.log_cq_size(),
            buf,
            uar,
            eqn,
            dbr_addr,
            pi: 0,
            armed: None,
            overrun: false,
            ctx,
        }
    }
}

/// QPNs handed out before a freed one comes back (see [`Table::cyclic`]): more than a
/// process makes within a peer's CM timewait in any test or tool here.
const QPN_ROUND: u32 = 256;

/// A queue pair created with CREATE_QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Qp {
    /// The context as created and modified (state, st, addresses, PSNs, counters), which
    /// QUERY_QP returns and the transport reads.
    pub ctx: Qpc,
    pub buf: QueueBuf,
    /// Send WQEs consumed (in WQEBBs, 16-bit wrapping like the doorbell counter).
    pub sq_ci: u16,
    /// Receive WQEs consumed.
    pub rq_ci: u16,
    /// Send doorbells rung so far (0x800 / 0x900 alternate).
    pub sq_doorbells: u64,
    /// Transport state: parsed send WQEs in flight, the responder's message in progress,
    /// retry state (see [`crate::transport`]). Starts empty ([`Default`]). Boxed so that
    /// [`crate::ctx::Ctx::with_transport`] lends it by moving a pointer, not the state;
    /// `None` only while it is lent.
    pub tr: Option<Box<QpTransport>>,
}

impl Qp {
    /// A QP created with context `ctx` over `buf`, with no WQE consumed yet.
    pub(crate) fn new(ctx: Qpc, buf: QueueBuf) -> Self {
        Qp {
            ctx,
            buf,
            sq_ci: 0,
            rq_ci: 0,
            sq_doorbells: 0,
            tr: Some(Box::default()),
        }
    }

    /// The send queue's size in WQEBBs (`log_sq_size`, capped at 2^15 as a 16-bit
    /// counter's ring must be): also the most WQEs it can have outstanding.
    pub(crate) fn sq_size(&self) -> u32 {
        1u32 << self.ctx.log_sq_size().min(15)
    }
}

/// A shared receive queue created with CREATE_SRQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Srq {
    pub log_size: u8,
    /// log2 of the WQE size in bytes, minus 4.
    pub log_stride: u8,
    pub pd: u32,
    /// `rlky`: receive WQEs may use the reserved lkey.
    pub rlky: bool,
    pub cqn: u32,
    pub buf: QueueBuf,
    pub dbr_addr: u64,
    /// WQEs consumed.
    pub ci: u16,
    /// Index of the next WQE to consume: SRQ WQEs form a list through their next segment's
    /// `next_wqe_index`, starting at 0.
    pub head: u16,
    /// SRQ limit (ARM_RQ `lwm`): 0 = disarmed.
    pub lwm: u16,
}

/// The NIC vport context: MAC and RoCE enable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vport {
    pub mac: [u8; 6],
    pub roce_en: bool,
    pub mtu: u16,
    /// Administrative state (MODIFY_VPORT_STATE): 0 down, 1 up, 2 follow the port.
    pub admin_state: u8,
}

/// Every table of the device.
#[derive(Debug)]
pub(crate) struct Resources {
    pub uars: Table<Uar>,
    pub pds: Table<Pd>,
    pub mkeys: Table<Mkey>,
    pub eqs: Table<Eq>,
    pub cqs: Table<Cq>,
    pub qps: Table<Qp>,
    /// The port's QP1 (CREATE_QP with st QP1): the QPN firmware gave it, where frames for
    /// DestQP 1 go. One per port; the device has one port.
    pub gsi_qpn: Option<u32>,
    /// The QPs with an armed transport timer, by deadline: kept in step with each QP's
    /// [`QpTransport::deadline`] wherever its transport state changes (when
    /// [`crate::ctx::Ctx::with_transport`] puts it back, the timer pass, reset, destroy).
    pub qp_timers: TimerQueue,
    pub srqs: Table<Srq>,
    /// The RoCE GID table (SET/QUERY_ROCE_ADDRESS), by index.
    pub gids: Vec<Option<RoceAddrLayout>>,
    /// The addresses of the RoCE v2 entries of `gids` (what the port answers to), kept in
    /// step by [`Resources::set_gid`].
    pub own_v2_gids: Vec<[u8; 16]>,
    pub vport: Vport,
    /// Transport domains (ALLOC_TRANSPORT_DOMAIN).
    pub tds: Table<TransportDomain>,
    pub tises: Table<Tis>,
    pub tirs: Table<Tir>,
    /// Ethernet RQ objects (CREATE_RQ), numbered from [`FIRST_RQN`].
    pub eth_rqs: Table<EthRq>,
    /// Ethernet SQ objects (CREATE_SQ), numbered from [`FIRST_SQN`].
    pub eth_sqs: Table<EthSq>,
    /// Flow tables, groups, entries and the NIC RX root.
    pub flow: FlowSteering,
}

impl Resources {
    /// Sets GID table entry `idx` and refreshes [`Resources::own_v2_gids`].
    pub(crate) fn set_gid(&mut self, idx: usize, entry: Option<RoceAddrLayout>) {
        if let Some(slot) = self.gids.get_mut(idx) {
            *slot = entry;
        }
        self.own_v2_gids = self
            .gids
            .iter()
            .flatten()
            .filter(|e| e.roce_version() == rnic_hw_regs::ctx::ROCE_VERSION_2)
            .map(|e| e.source_l3_address())
            .collect();
    }

    pub(crate) fn new(profile: &crate::Profile) -> Self {
        let n = |log: u8| 1u32 << log.min(24);
        Resources {
            uars: Table::new(crate::Profile::FIRST_UAR, profile.num_uars),
            pds: Table::new(1, n(profile.log_max_pd)),
            mkeys: Table::new(1, n(profile.log_max_mkey)),
            eqs: Table::new(0x10, n(profile.log_max_eq).min(0xEF)),
            cqs: Table::new(0x400, n(profile.log_max_cq)),
            qps: Table::cyclic(
                profile.first_qpn.clamp(2, 0xFF_FFFF),
                n(profile.log_max_qp),
                QPN_ROUND,
            ),
            gsi_qpn: None,
            qp_timers: TimerQueue::new(profile.first_qpn.clamp(2, 0xFF_FFFF)),
            srqs: Table::new(0x40, n(profile.log_max_srq)),
            gids: vec![None; usize::from(profile.gid_table_size)],
            own_v2_gids: Vec::new(),
            vport: Vport {
                mac: profile.mac,
                roce_en: false,
                mtu: profile.port_mtu,
                admin_state: 2,
            },
            tds: Table::new(1, 1 << 12),
            tises: Table::new(1, 1 << 12),
            tirs: Table::new(1, 1 << 12),
            eth_rqs: Table::new(FIRST_RQN, MAX_ETH_QUEUES),
            eth_sqs: Table::new(FIRST_SQN, MAX_ETH_QUEUES),
            flow: FlowSteering {
                next_table: 1,
                next_group: 1,
                ..FlowSteering::default()
            },
        }
    }
}
