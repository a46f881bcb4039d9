//! Queue pairs: RC, UC, UD and GSI (QP1); CREATE_QP, the state machine (RST -> INIT -> RTR -> RTS,
//! RTS -> RTS, -> ERR, -> RST) with typed per-transition attributes, QUERY_QP, DESTROY_QP.
//!
//! The QP buffer (RQ at offset 0, then the SQ, PRM section 5) and the doorbell record (on its
//! own cache line after the queues) are one DMA region. A QP keeps its PD, CQs and SRQ
//! alive; the CQs know the QP's queues (to turn CQEs into work completions) until it is
//! destroyed, when its CQEs are removed from them.
//!
//! Posting is in [`crate::post`]: [`Qp::post_send`] and [`Qp::post_recv`].
//!
//! ```no_run
//! # fn f(pd: std::sync::Arc<rnic_driver::pd::Pd>, cq: std::sync::Arc<rnic_driver::cq::Cq>,
//! #      remote_qpn: u32, remote_gid: [u8; 16], remote_mac: [u8; 6]) -> Result<(), rnic_driver::DriverError> {
//! use rnic_driver::qp::*;
//! use rnic_driver::wr::Access;
//!
//! let qp = Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?;
//! qp.to_init(&InitAttr { access: Access::REMOTE_WRITE | Access::REMOTE_READ, ..InitAttr::default() })?;
//! qp.to_rtr(&RtrAttr {
//!     path_mtu: Some(Mtu::Mtu1024),
//!     dest_qpn: Some(remote_qpn),
//!     rq_psn: 0,
//!     av: Some(AddressVector { sgid_index: 1, dgid: remote_gid, dmac: remote_mac, ..AddressVector::default() }),
//!     max_dest_rd_atomic: 4,
//!     min_rnr_timer: 12,
//! })?;
//! qp.to_rts(&RtsAttr { sq_psn: 0, timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 4 })?;
//! assert_eq!(qp.query()?.state, QpState::Rts);
//! # Ok(()) }
//! ```

pub use crate::ah::AddressVector;
use crate::ah::rdma_get_udp_sport;
use crate::cq::Cq;
use crate::dma::write_be32;
use crate::error::DriverError;
use crate::pd::Pd;
use crate::srq::Srq;
use crate::wq::{QpShared, RqTrack, SqSlot, SqTrack, log2_ceil};
use crate::wr::Access;
use rnic_hw_regs::DmaRegion;
use rnic_hw_regs::cmd::{
    CreateQpIn, DestroyQpIn, Init2RtrQpIn, Qp2ErrIn, Qp2RstIn, QueryQpIn, Rst2InitQpIn,
    Rtr2RtsQpIn, Rts2RtsQpIn, Sqerr2RtsQpIn,
};
pub use rnic_hw_regs::ctx::QpState;
use rnic_hw_regs::ctx::{Ads, QpSt, Qpc, opt_param};
pub use rnic_hw_regs::roce::{GSI_QKEY, GSI_QPN};
use rnic_hw_regs::wqe::{DS_SIZE, WQEBB, inline_seg_ds};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

/// QP transport service type.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// let ud = Qp::create(&pd, &QpConfig::new(QpType::Ud, cq.clone(), cq.clone()))?;
/// assert_eq!(ud.qp_type(), QpType::Ud);
/// assert_eq!(ud.query()?.qpc.st(), 0x02); // QPC st: UD (MLX5_QPC_ST_UD)
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// The port's QP1, the General Services Interface (`IB_QPT_GSI`; CREATE_QP st QP1, as
    /// mlx5's `MLX5_IB_QPT_HW_GSI`): UD's work requests and transitions, datagrams to and
    /// from QP number 1 with the GSI Q_Key ([`GSI_QKEY`]), one per port. [`Qp::qpn`] is the
    /// number firmware gave it; peers address it as [`GSI_QPN`].
    ///
    /// ```
    /// use rnic_driver::DriverError;
    /// use rnic_hw_regs::status::CmdStatus;
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// let gsi = Qp::create(&pd, &QpConfig::new(QpType::Gsi, cq.clone(), cq.clone()))?;
    /// assert_eq!(gsi.query()?.qpc.st(), 0x08); // QPC st: QP1 (MLX5_QPC_ST_QP1)
    /// // One per port: the device refuses a second.
    /// let again = Qp::create(&pd, &QpConfig::new(QpType::Gsi, cq.clone(), cq.clone()));
    /// assert_eq!(again.unwrap_err().cmd_status(), Some(CmdStatus::BadParam));
    /// // Its Q_Key is the GSI one, given or not; another is refused before the device sees it.
    /// let bad = InitAttr { qkey: Some(0x1111_1111), ..InitAttr::default() };
    /// assert!(matches!(gsi.to_init(&bad), Err(DriverError::QpAttr { attr: "qkey", .. })));
    /// gsi.to_init(&InitAttr::default())?;
    /// assert_eq!(gsi.query()?.qpc.q_key(), GSI_QKEY);
    /// # Ok(()) }
    /// ```
    Gsi,
}

impl QpType {
    fn st(self) -> QpSt {
        match self {
            QpType::Rc => QpSt::Rc,
            QpType::Uc => QpSt::Uc,
            QpType::Ud => QpSt::Ud,
            QpType::Gsi => QpSt::Qp1,
        }
    }

    /// Whether the QP sends datagrams to address handles (UD and GSI): a datagram segment
    /// per send, the GRH area in front of every receive, no connection.
    ///
    /// ```
    /// use rnic_driver::qp::QpType;
    /// assert!(QpType::Gsi.is_datagram() && QpType::Ud.is_datagram());
    /// assert!(!QpType::Uc.is_datagram());
    /// ```
    pub const fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Gsi)
    }
}

/// Queue sizes a QP is created with (the driver may round them up).
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// let mut cfg = QpConfig::new(QpType::Rc, cq.clone(), cq.clone());
/// cfg.caps = QpCaps { max_send_wr: 100, max_inline_data: 0, ..QpCaps::default() };
/// let q = Qp::create(&pd, &cfg)?;
/// assert!(q.caps().max_send_wr >= 100); // the driver may round up
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpCaps {
    /// Send work requests outstanding at once.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at once (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Inline data bytes per send work request.
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    /// 64 send and receive WRs, 4 SGEs each way, 64 inline bytes.
    fn default() -> Self {
        QpCaps {
            max_send_wr: 64,
            max_recv_wr: 64,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 64,
        }
    }
}

/// How to create a QP.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// let cfg = QpConfig { sq_sig_all: true, ..QpConfig::new(QpType::Uc, cq.clone(), cq.clone()) };
/// let q = Qp::create(&pd, &cfg)?;
/// assert_eq!((q.qp_type(), q.send_cq().cqn()), (QpType::Uc, cq.cqn()));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct QpConfig {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Queue sizes.
    pub caps: QpCaps,
    /// CQ of send completions.
    pub send_cq: Arc<Cq>,
    /// CQ of receive completions.
    pub recv_cq: Arc<Cq>,
    /// Receive from this SRQ instead of an own RQ.
    pub srq: Option<Arc<Srq>>,
    /// Every send WQE generates a completion, whatever its flags.
    pub sq_sig_all: bool,
}

impl QpConfig {
    /// A config with default sizes, no SRQ, selective signaling.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// let cfg = QpConfig::new(QpType::Rc, cq.clone(), cq.clone());
    /// assert_eq!((cfg.caps, cfg.sq_sig_all, cfg.srq.is_none()), (QpCaps::default(), false, true));
    /// # Ok(()) }
    /// ```
    pub fn new(qp_type: QpType, send_cq: Arc<Cq>, recv_cq: Arc<Cq>) -> QpConfig {
        QpConfig {
            qp_type,
            caps: QpCaps::default(),
            send_cq,
            recv_cq,
            srq: None,
            sq_sig_all: false,
        }
    }
}

/// Path MTU (`enum ibv_mtu`, same values; also the QPC `mtu` code).
///
/// ```
/// use rnic_driver::qp::Mtu;
///
/// assert_eq!(Mtu::Mtu1024.bytes(), 1024);
/// assert_eq!(Mtu::from_code(Mtu::Mtu2048 as u8), Some(Mtu::Mtu2048));
/// assert!(Mtu::Mtu256 < Mtu::Mtu4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Mtu {
    /// IBV_MTU_256 (1): 256 bytes.
    Mtu256 = 1,
    /// IBV_MTU_512 (2): 512 bytes.
    Mtu512 = 2,
    /// IBV_MTU_1024 (3): 1024 bytes.
    Mtu1024 = 3,
    /// IBV_MTU_2048 (4): 2048 bytes.
    Mtu2048 = 4,
    /// IBV_MTU_4096 (5): 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// Payload bytes per packet.
    ///
    /// ```
    /// use rnic_driver::qp::Mtu;
    /// assert_eq!(Mtu::Mtu4096.bytes(), 4096);
    /// ```
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// The MTU of `bytes` (256, 512, 1024, 2048 or 4096), as the tools' `-m` takes it.
    ///
    /// ```
    /// use rnic_driver::qp::Mtu;
    /// assert_eq!(Mtu::from_bytes(1024), Some(Mtu::Mtu1024));
    /// assert_eq!(Mtu::from_bytes(1500), None);
    /// assert_eq!(Mtu::Mtu4096.to_string(), "4096 (5)");
    /// ```
    pub const fn from_bytes(bytes: u32) -> Option<Mtu> {
        Some(match bytes {
            256 => Mtu::Mtu256,
            512 => Mtu::Mtu512,
            1024 => Mtu::Mtu1024,
            2048 => Mtu::Mtu2048,
            4096 => Mtu::Mtu4096,
            _ => return None,
        })
    }

    /// The largest path MTU a RoCE port with Ethernet MTU `eth_mtu` carries (the port's
    /// `active_mtu`, as Linux's `iboe_get_mtu` gives mlx5 ports theirs):
    /// [`rnic_hw_regs::roce::roce_mtu_code`]; `None` below 256.
    ///
    /// ```
    /// use rnic_driver::qp::Mtu;
    /// assert_eq!(Mtu::for_ethernet(1500), Some(Mtu::Mtu1024)); // a standard Ethernet port
    /// assert_eq!(Mtu::for_ethernet(9000), Some(Mtu::Mtu4096)); // jumbo frames
    /// assert_eq!(Mtu::for_ethernet(300), None);
    /// ```
    pub const fn for_ethernet(eth_mtu: u32) -> Option<Mtu> {
        Mtu::from_code(rnic_hw_regs::roce::roce_mtu_code(eth_mtu))
    }

    /// The MTU of an `enum ibv_mtu` / QPC `mtu` code (1..=5).
    ///
    /// ```
    /// use rnic_driver::qp::Mtu;
    /// assert_eq!(Mtu::from_code(1), Some(Mtu::Mtu256));
    /// assert_eq!(Mtu::from_code(6), None);
    /// ```
    pub const fn from_code(c: u8) -> Option<Mtu> {
        Some(match c {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            5 => Mtu::Mtu4096,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Mtu {
    /// As `ibv_devinfo` prints it: `1024 (3)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.bytes(), *self as u8)
    }
}

/// The largest service level of a connected QP's path: on RoCE it is the Ethernet priority
/// (3 bits of the address path's `sl`).
///
/// ```
/// assert_eq!(rnic_driver::qp::MAX_SL, 7);
/// ```
pub const MAX_SL: u8 = 7;

/// Entries in the port's P_Key table: a RoCE port has the one default P_Key (0xFFFF) at
/// index 0, as mlx5 reports for Ethernet ports (`pkey_tbl_len` 1). [`Qp::to_init`] refuses
/// a `pkey_index` beyond it.
///
/// ```
/// assert_eq!(rnic_driver::qp::PKEY_TABLE_LEN, 1);
/// ```
pub const PKEY_TABLE_LEN: u16 = 1;

/// RST -> INIT attributes.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// qp.to_init(&InitAttr { access: Access::REMOTE_READ, ..InitAttr::default() })?;
/// let qpc = qp.query()?.qpc;
/// assert!(qpc.rre() && !qpc.rwe());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitAttr {
    /// `port_num` (1).
    pub port_num: u8,
    /// P_Key index (below [`PKEY_TABLE_LEN`]).
    pub pkey_index: u16,
    /// Remote access the QP allows as a responder (REMOTE_READ / WRITE / ATOMIC).
    pub access: Access,
    /// Q_Key (required on UD).
    pub qkey: Option<u32>,
}

impl Default for InitAttr {
    fn default() -> Self {
        InitAttr {
            port_num: 1,
            pkey_index: 0,
            access: Access::NONE,
            qkey: None,
        }
    }
}

/// INIT -> RTR attributes. RC and UC need `path_mtu`, `dest_qpn` and `av`; UD none.
///
/// ```
/// use rnic_driver::DriverError;
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
/// // RC needs a path MTU, a destination QP and an address vector.
/// let err = qp.to_rtr(&RtrAttr::default()).unwrap_err();
/// assert!(matches!(err, DriverError::QpAttr { transition: "INIT2RTR", .. }));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtrAttr {
    /// Path MTU.
    pub path_mtu: Option<Mtu>,
    /// Destination QP number.
    pub dest_qpn: Option<u32>,
    /// First expected receive PSN (24 bits).
    pub rq_psn: u32,
    /// Primary address vector.
    pub av: Option<AddressVector>,
    /// RDMA READ / atomic requests accepted at once as responder (RC).
    pub max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer code (5 bits, RC).
    pub min_rnr_timer: u8,
}

/// RTR -> RTS attributes (UD and UC use `sq_psn` only).
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
/// # let av = loopback_av(&hca);
/// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), max_dest_rd_atomic: 4, ..RtrAttr::default() })?;
/// qp.to_rts(&RtsAttr { sq_psn: 0x42, timeout: 14, retry_cnt: 6, rnr_retry: 7, max_rd_atomic: 4 })?;
/// let qpc = qp.query()?.qpc;
/// assert_eq!((qpc.next_send_psn(), qpc.retry_count()), (0x42, 6));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtsAttr {
    /// First send PSN (24 bits).
    pub sq_psn: u32,
    /// Local ACK timeout: 4.096 us * 2^timeout (5 bits).
    pub timeout: u8,
    /// Transport retries (3 bits).
    pub retry_cnt: u8,
    /// RNR retries (3 bits, 7 = infinite).
    pub rnr_retry: u8,
    /// RDMA READ / atomic requests outstanding at once as requester.
    pub max_rd_atomic: u8,
}

/// RTS -> RTS attributes: each `Some` field is changed.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// qp.modify_rts(&Rts2RtsAttr { retry_cnt: Some(3), ..Rts2RtsAttr::default() })?;
/// assert_eq!(qp.query()?.qpc.retry_count(), 3);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rts2RtsAttr {
    /// Remote access flags.
    pub access: Option<Access>,
    /// Minimum RNR NAK timer.
    pub min_rnr_timer: Option<u8>,
    /// Local ACK timeout.
    pub timeout: Option<u8>,
    /// Transport retries.
    pub retry_cnt: Option<u8>,
    /// RNR retries.
    pub rnr_retry: Option<u8>,
    /// Q_Key (UD).
    pub qkey: Option<u32>,
}

/// What QUERY_QP reported.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// let info = qp.query()?;
/// assert_eq!(info.state, QpState::Rst); // as created
/// assert_eq!((info.qpc.cqn_snd(), info.qpc.cqn_rcv()), (cq.cqn(), cq.cqn()));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct QpInfo {
    /// The state.
    pub state: QpState,
    /// The whole QP context (PSNs, address path, sizes, counters, ...).
    pub qpc: Qpc,
}

/// A queue pair.
///
/// An RC QP connected to itself (loopback through the emulated port) sends to its own receive
/// queue:
///
/// ```
/// use rnic_driver::qp::{AddressVector, InitAttr, Mtu, Qp, QpConfig, QpType, RtrAttr, RtsAttr};
/// use rnic_driver::wr::{Payload, RecvWr, SendFlags, SendOp, SendWr, WcOpcode, WcStatus};
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig { ipv4: Some([192, 0, 2, 1].into()), ..HcaConfig::default() })?);
/// # let (pd, cq) = (Arc::new(Pd::alloc(&hca)?), Arc::new(Cq::create(&hca, 64, None)?));
/// # let mr = Mr::alloc(&pd, 4096, Access::LOCAL_WRITE)?;
///
/// let qp = Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?;
/// qp.to_init(&InitAttr::default())?;
/// let av = AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() };
/// qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), ..RtrAttr::default() })?;
/// qp.to_rts(&RtsAttr { timeout: 14, retry_cnt: 7, rnr_retry: 7, ..RtsAttr::default() })?;
///
/// qp.post_recv(&[RecvWr { wr_id: 1, sgl: &[mr.sge(0, 64)] }])?;
/// let send = SendWr { wr_id: 2, op: SendOp::Send, payload: Payload::Inline(b"ping"), flags: SendFlags::SIGNALED, ud: None };
/// qp.post_send(&[send])?;
/// let (a, b) = (wait(&cq), wait(&cq)); // `cq.poll` with a deadline
/// let recv = if a.opcode == WcOpcode::Recv { a } else { b };
/// assert_eq!((recv.wr_id, recv.status, recv.byte_len), (1, WcStatus::Success, 4));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Qp {
    pub(crate) pd: Arc<Pd>,
    pub(crate) send_cq: Arc<Cq>,
    pub(crate) recv_cq: Arc<Cq>,
    pub(crate) srq: Option<Arc<Srq>>,
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) caps: QpCaps,
    pub(crate) sig_all: bool,
    pub(crate) bus: crate::dma::BusHandle,
    pub(crate) uar_off: usize,
    buf: Option<DmaRegion>,
    pub(crate) sq_base: NonNull<u8>,
    /// SQ size in bytes minus one.
    pub(crate) sq_bytes_mask: usize,
    /// SQ size in WQEBBs.
    pub(crate) sq_wqebbs: u16,
    pub(crate) rq_base: NonNull<u8>,
    pub(crate) rq_stride: usize,
    pub(crate) dbrec: NonNull<u8>,
    pub(crate) shared: Arc<QpShared>,
    pub(crate) send_claim: AtomicBool,
    pub(crate) recv_claim: AtomicBool,
    /// Send doorbells rung (0x800 / 0x900 alternate).
    pub(crate) db_count: AtomicU32,
    /// The state this handle last moved the QP to or found it in (`QpState as u8`).
    state: AtomicU8,
    done: bool,
}

// SAFETY: the raw pointers point into the QP's own DMA region, valid while `buf` is held;
// the poster's state is in atomics, and each queue is posted to by the holder of its claim
// flag only (acquire swap, release store), so sharing the handle creates no data race.
unsafe impl Send for Qp {}
// SAFETY: see `Send`.
unsafe impl Sync for Qp {}

/// Refuses `value` when it does not fit a `bits`-wide context field (shown in hex for the
/// wide ones: PSNs, flow labels).
fn check_width(
    qpn: u32,
    transition: &'static str,
    attr: &'static str,
    value: u32,
    bits: u32,
) -> Result<(), DriverError> {
    if value >> bits == 0 {
        return Ok(());
    }
    let shown = if bits >= 16 {
        format!("{value:#x}")
    } else {
        value.to_string()
    };
    Err(attr_err(
        qpn,
        transition,
        attr,
        format!("{shown} is wider than {bits} bits"),
    ))
}

/// The QPC's remote access bits (rre, rwe, rae) from `access`; remote atomics are the
/// IB-compatible 8-byte ones (`atomic_mode` 1).
fn set_remote_access(q: &mut Qpc, access: Access) {
    q.set_rre(access.contains(Access::REMOTE_READ));
    q.set_rwe(access.contains(Access::REMOTE_WRITE));
    q.set_rae(access.contains(Access::REMOTE_ATOMIC));
    if access.contains(Access::REMOTE_ATOMIC) {
        q.set_atomic_mode(1);
    }
}

fn attr_err(qpn: u32, transition: &'static str, attr: &'static str, why: String) -> DriverError {
    DriverError::QpAttr {
        qpn,
        transition,
        attr,
        why,
    }
}

impl Qp {
    /// CREATE_QP: allocates the buffer and doorbell record and attaches the queues to the
    /// CQs. The QP starts in RST.
    ///
    /// ```
    /// use rnic_driver::DriverError;
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// let cfg = QpConfig { caps: QpCaps { max_send_wr: 0, ..QpCaps::default() }, ..QpConfig::new(QpType::Rc, cq.clone(), cq.clone()) };
    /// assert!(matches!(Qp::create(&pd, &cfg), Err(DriverError::InvalidArgument(_))));
    /// let q = Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?;
    /// assert_eq!(q.query()?.state, QpState::Rst);
    /// # Ok(()) }
    /// ```
    pub fn create(pd: &Arc<Pd>, cfg: &QpConfig) -> Result<Qp, DriverError> {
        let hca = pd.hca();
        let g = &hca.caps().general;
        let c = cfg.caps;
        let bad = |s: String| Err(DriverError::InvalidArgument(s));
        if c.max_send_wr == 0 {
            return bad("cap.max_send_wr must be at least 1".into());
        }
        // The limits `query_device` reports (one definition, in `Caps`).
        let caps = hca.caps();
        for (what, send, recv, max) in [
            ("wr", c.max_send_wr, c.max_recv_wr, caps.max_qp_wr()),
            ("sge", c.max_send_sge, c.max_recv_sge, caps.max_sge()),
        ] {
            if send > max || recv > max {
                return bad(format!(
                    "cap.max_send_{what} {send} / max_recv_{what} {recv}: the device allows {max}"
                ));
            }
        }
        let ud = cfg.qp_type.is_datagram();
        // The largest send WQE: ctrl + datagram (UD) or raddr + atomic, then the data.
        let fixed = 1 + if ud { 3 } else { 2 };
        let data = (c.max_send_sge as usize).max(inline_seg_ds(c.max_inline_data as usize));
        let max_ds = fixed + data.max(1);
        let wqe_bytes = (max_ds * DS_SIZE).next_multiple_of(WQEBB);
        if max_ds > 63 || wqe_bytes > usize::from(g.max_wqe_sz_sq()) {
            return bad(format!(
                "send WQEs of {wqe_bytes} bytes ({} SGEs, {} inline bytes): the device allows {}",
                c.max_send_sge,
                c.max_inline_data,
                g.max_wqe_sz_sq()
            ));
        }
        let wqebbs_per = wqe_bytes / WQEBB;
        let log_sq = log2_ceil(c.max_send_wr.saturating_mul(wqebbs_per as u32));
        if log_sq > g.log_max_qp_sz() || log_sq > 15 {
            return bad(format!(
                "{} send WRs of {wqebbs_per} WQEBBs: the device allows 2^{} WQEBBs",
                c.max_send_wr,
                g.log_max_qp_sz()
            ));
        }
        let (log_rq, log_stride, rq_bytes) = if cfg.srq.is_some() {
            (0u8, 0u8, 0usize)
        } else {
            let sges = c.max_recv_sge.max(1) as usize;
            let stride = (sges * 16).next_power_of_two();
            if stride > usize::from(g.max_wqe_sz_rq()) {
                return bad(format!(
                    "{sges} receive SGEs: the device allows {} bytes per receive WQE",
                    g.max_wqe_sz_rq()
                ));
            }
            let log_rq = log2_ceil(c.max_recv_wr.max(1));
            if log_rq > g.log_max_qp_sz() || log_rq > 15 {
                return bad(format!("{} receive WRs: too many", c.max_recv_wr));
            }
            let ls = stride.trailing_zeros() as u8 - 4;
            (log_rq, ls, stride << log_rq)
        };
        let sq_bytes = WQEBB << log_sq;
        let queues = rq_bytes + sq_bytes;
        let uar = hca.uar().ok_or(DriverError::Closed)?;
        let bus = crate::dma::BusHandle(hca.bus().clone());
        let buf = bus.alloc_dma(queues + 64)?;
        let base = buf.vaddr.as_ptr();
        // SAFETY: `queues + 8 <= buf.len`, 64-byte aligned.
        let dbrec = unsafe { base.add(queues) };
        // SAFETY: as above.
        unsafe {
            write_be32(dbrec, 0);
            write_be32(dbrec.add(4), 0);
        }
        let mut cmd = CreateQpIn::new_cmd();
        {
            let q = cmd.qpc_mut();
            q.set_st(cfg.qp_type.st().into());
            q.set_pm_state(3);
            q.set_pd(pd.pdn());
            q.set_uar_page(uar.index());
            q.set_log_page_size(0);
            q.set_fre(true);
            q.set_cqn_snd(cfg.send_cq.cqn());
            q.set_cqn_rcv(cfg.recv_cq.cqn());
            q.set_log_sq_size(log_sq);
            q.set_log_rq_size(log_rq);
            q.set_log_rq_stride(log_stride);
            if let Some(srq) = &cfg.srq {
                q.set_rq_type(1);
                q.set_srqn_rmpn_xrqn(srq.srqn());
            }
            q.set_dbr_addr(buf.iova + queues as u64);
            if g.cqe_version() == 1 {
                q.set_user_index(0xFF_FFFF);
            }
        }
        let pas = crate::dma::page_addresses(&buf, queues);
        let out = match hca.cmdq().exec(&cmd, &pas, &mut []) {
            Ok(o) => o,
            Err(e) => {
                return Err(crate::dma::release_after_failed_create(
                    &*bus,
                    buf,
                    e,
                    "CREATE_QP",
                ));
            }
        };
        let qpn = out.qpn();
        let sq_wqebbs = 1u16 << log_sq;
        let shared = Arc::new(QpShared {
            qpn,
            sq: SqTrack {
                slots: (0..sq_wqebbs).map(|_| SqSlot::default()).collect(),
                mask: sq_wqebbs - 1,
                pi: AtomicU32::new(0),
                ci: AtomicU32::new(0),
                wr_pi: AtomicU32::new(0),
                wr_ci: AtomicU32::new(0),
            },
            rq: cfg.srq.is_none().then(|| RqTrack {
                wr_id: (0..1u32 << log_rq).map(|_| AtomicU64::new(0)).collect(),
                len: (0..1u32 << log_rq).map(|_| AtomicU64::new(0)).collect(),
                mask: (1u32 << log_rq) - 1,
                pi: AtomicU32::new(0),
                ci: AtomicU32::new(0),
            }),
            srq: cfg.srq.as_ref().map(|s| s.shared().clone()),
        });
        let same = Arc::ptr_eq(&cfg.send_cq, &cfg.recv_cq);
        cfg.send_cq.attach(&shared, true, same);
        if !same {
            cfg.recv_cq.attach(&shared, false, true);
        }
        let caps = QpCaps {
            max_send_wr: u32::from(sq_wqebbs) / wqebbs_per as u32,
            max_recv_wr: if cfg.srq.is_some() { 0 } else { 1 << log_rq },
            max_send_sge: c.max_send_sge,
            max_recv_sge: if cfg.srq.is_some() {
                0
            } else {
                ((16usize << log_stride) / 16) as u32
            },
            max_inline_data: c.max_inline_data,
        };
        // SAFETY: offsets inside the region.
        let (rq_base, sq_base) = unsafe { (base, base.add(rq_bytes)) };
        Ok(Qp {
            pd: pd.clone(),
            send_cq: cfg.send_cq.clone(),
            recv_cq: cfg.recv_cq.clone(),
            srq: cfg.srq.clone(),
            qpn,
            qp_type: cfg.qp_type,
            caps,
            sig_all: cfg.sq_sig_all,
            bus,
            uar_off: uar.bar_offset(),
            // SAFETY: inside the region, not null.
            sq_base: unsafe { NonNull::new_unchecked(sq_base) },
            sq_bytes_mask: sq_bytes - 1,
            sq_wqebbs,
            // SAFETY: as above.
            rq_base: unsafe { NonNull::new_unchecked(rq_base) },
            rq_stride: 16 << log_stride,
            // SAFETY: as above.
            dbrec: unsafe { NonNull::new_unchecked(dbrec) },
            buf: Some(buf),
            shared,
            send_claim: AtomicBool::new(false),
            recv_claim: AtomicBool::new(false),
            db_count: AtomicU32::new(0),
            state: AtomicU8::new(QpState::Rst as u8),
            done: false,
        })
    }

    /// The QP number.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// qp.post_send(&[SendWr { wr_id: 1, op: SendOp::Write { raddr: mr.addr(), rkey: mr.rkey() }, payload: Payload::Inline(b"x"), flags: SendFlags::SIGNALED, ud: None }])?;
    /// assert_eq!(wait(&cq).qp_num, qp.qpn());
    /// # Ok(()) }
    /// ```
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The transport type.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert_eq!(qp.qp_type(), QpType::Rc);
    /// # Ok(()) }
    /// ```
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The queue sizes as created (send WRs counted with the largest WQE). Posting refuses
    /// the work request beyond `max_send_wr` outstanding with [`crate::wr::PostErrorKind::QueueFull`],
    /// however small the WQEs, so a send CQ of `max_send_wr` entries cannot overrun.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert!(qp.caps().max_inline_data >= QpCaps::default().max_inline_data);
    /// # Ok(()) }
    /// ```
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// The PD.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert_eq!(qp.pd().pdn(), qp.query()?.qpc.pd());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// The send CQ.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert_eq!(qp.send_cq().cqn(), qp.query()?.qpc.cqn_snd());
    /// # Ok(()) }
    /// ```
    pub fn send_cq(&self) -> &Arc<Cq> {
        &self.send_cq
    }

    /// The receive CQ.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert_eq!(qp.recv_cq().cqn(), qp.query()?.qpc.cqn_rcv());
    /// # Ok(()) }
    /// ```
    pub fn recv_cq(&self) -> &Arc<Cq> {
        &self.recv_cq
    }

    /// The send queue ring in host memory (`(start, bytes)`) and the doorbell record (8
    /// bytes: receive counter, send counter): for diagnostics and tests that check WQE
    /// bytes against the PRM. Read them only with volatile accesses, while the QP exists.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// let (_sq, bytes, dbrec) = qp.sq_ring();
    /// assert!(bytes.is_power_of_two() && bytes >= 64 * qp.caps().max_send_wr as usize);
    /// // SAFETY: the doorbell record is live while the QP exists; volatile, aligned.
    /// assert_eq!(unsafe { dbrec.as_ptr().cast::<u64>().read_volatile() }, 0); // nothing posted
    /// # Ok(()) }
    /// ```
    pub fn sq_ring(&self) -> (NonNull<u8>, usize, NonNull<u8>) {
        (self.sq_base, self.sq_bytes_mask + 1, self.dbrec)
    }

    /// The receive queue ring in host memory (`(start, bytes, stride)`: `bytes / stride`
    /// receive WQEs; no bytes when the QP receives from an SRQ), beside
    /// [`Qp::sq_ring`] whose doorbell record (dword 0) counts receives. For diagnostics and
    /// tests that play the host writing receive WQEs; access it only with volatile reads
    /// and writes, while the QP exists.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// let (_rq, bytes, stride) = qp.rq_ring();
    /// assert!(stride >= 16 && bytes >= stride * qp.caps().max_recv_wr as usize);
    /// # Ok(()) }
    /// ```
    pub fn rq_ring(&self) -> (NonNull<u8>, usize, usize) {
        // The RQ sits right before the SQ in the QP's buffer (`rq_bytes` long).
        let bytes = self.sq_base.as_ptr() as usize - self.rq_base.as_ptr() as usize;
        (self.rq_base, bytes, self.rq_stride)
    }

    /// The SRQ, if the QP receives from one.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert!(qp.srq().is_none()); // it has its own receive queue
    /// # Ok(()) }
    /// ```
    pub fn srq(&self) -> Option<&Arc<Srq>> {
        self.srq.as_ref()
    }

    /// RST -> INIT (RST2INIT_QP): port, P_Key index, remote access, Q_Key (UD).
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// qp.to_init(&InitAttr { access: Access::REMOTE_WRITE, ..InitAttr::default() })?;
    /// assert_eq!(qp.query()?.state, QpState::Init);
    /// # Ok(()) }
    /// ```
    pub fn to_init(&self, a: &InitAttr) -> Result<(), DriverError> {
        const T: &str = "RST2INIT";
        if a.port_num != 1 {
            return Err(attr_err(
                self.qpn,
                T,
                "port_num",
                format!("port {} (the device has port 1)", a.port_num),
            ));
        }
        if a.pkey_index >= PKEY_TABLE_LEN {
            return Err(attr_err(
                self.qpn,
                T,
                "pkey_index",
                format!(
                    "{} is beyond the port's P_Key table of {PKEY_TABLE_LEN}",
                    a.pkey_index
                ),
            ));
        }
        let mut i = Rst2InitQpIn::new_cmd();
        i.set_qpn(self.qpn);
        let q = i.qpc_mut();
        q.set_pm_state(3);
        q.primary_address_path_mut().set_vhca_port_num(1);
        q.primary_address_path_mut().set_pkey_index(a.pkey_index);
        if self.qp_type.is_datagram() {
            let qkey = self.qkey_for(T, a.qkey)?;
            q.set_q_key(qkey);
        } else {
            // UC has no READ or atomic packets: a responder cannot allow them. The one
            // place this is checked (the verbs layer relies on it).
            for (flag, name) in [
                (Access::REMOTE_READ, "REMOTE_READ"),
                (Access::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
            ] {
                if a.access.contains(flag) && self.qp_type == QpType::Uc {
                    return Err(attr_err(
                        self.qpn,
                        T,
                        "qp_access_flags",
                        format!("{name} on a UC QP"),
                    ));
                }
            }
            set_remote_access(q, a.access);
        }
        self.pd.hca().cmdq().exec(&i, &[], &mut [])?;
        self.set_state(QpState::Init);
        Ok(())
    }

    /// The Q_Key a datagram QP gets from `given`: required on UD; on GSI the GSI Q_Key,
    /// which is also the only one it takes (IBTA 13.4.5.3).
    fn qkey_for(&self, t: &'static str, given: Option<u32>) -> Result<u32, DriverError> {
        match (self.qp_type, given) {
            (QpType::Gsi, None | Some(GSI_QKEY)) => Ok(GSI_QKEY),
            (QpType::Gsi, Some(k)) => Err(attr_err(
                self.qpn,
                t,
                "qkey",
                format!("{k:#x} on the GSI QP, whose Q_Key is {GSI_QKEY:#x}"),
            )),
            (_, Some(k)) => Ok(k),
            (_, None) => Err(attr_err(self.qpn, t, "qkey", "required on UD QPs".into())),
        }
    }

    /// Fills an address path from an address vector.
    fn fill_ads(
        &self,
        t: &'static str,
        ads: &mut Ads,
        av: &AddressVector,
        dest_qpn: u32,
    ) -> Result<(), DriverError> {
        let hca = self.pd.hca();
        if hca.gid(av.sgid_index).is_none() {
            return Err(attr_err(
                self.qpn,
                t,
                "ah_attr.grh.sgid_index",
                format!("GID index {} is not programmed", av.sgid_index),
            ));
        }
        check_width(self.qpn, t, "ah_attr.grh.flow_label", av.flow_label, 20)?;
        check_width(
            self.qpn,
            t,
            "ah_attr.sl",
            u32::from(av.sl),
            u8::BITS - MAX_SL.leading_zeros(),
        )?;
        ads.set_grh(true);
        ads.set_src_addr_index(av.sgid_index);
        ads.set_hop_limit(if av.hop_limit == 0 { 64 } else { av.hop_limit });
        ads.set_tclass(av.traffic_class);
        ads.set_dscp(av.traffic_class >> 2);
        ads.set_ecn(av.traffic_class & 3);
        ads.set_flow_label(av.flow_label);
        ads.set_rgid_rip(av.dgid);
        ads.set_rmac(av.dmac);
        ads.set_sl(av.sl);
        ads.set_vhca_port_num(1);
        let sport = av
            .udp_sport
            .unwrap_or_else(|| rdma_get_udp_sport(av.flow_label, self.qpn, dest_qpn));
        ads.set_udp_sport(sport);
        Ok(())
    }

    /// INIT -> RTR (INIT2RTR_QP).
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
    /// # let av = loopback_av(&hca);
    /// let rtr = RtrAttr { path_mtu: Some(Mtu::Mtu2048), dest_qpn: Some(qp.qpn()), rq_psn: 7, av: Some(av), ..RtrAttr::default() };
    /// qp.to_rtr(&rtr)?;
    /// let info = qp.query()?;
    /// assert_eq!((info.state, info.qpc.next_rcv_psn()), (QpState::Rtr, 7));
    /// assert_eq!(Mtu::from_code(info.qpc.mtu()), Some(Mtu::Mtu2048));
    /// # Ok(()) }
    /// ```
    pub fn to_rtr(&self, a: &RtrAttr) -> Result<(), DriverError> {
        const T: &str = "INIT2RTR";
        let hca = self.pd.hca();
        let g = &hca.caps().general;
        let mut i = Init2RtrQpIn::new_cmd();
        i.set_qpn(self.qpn);
        check_width(self.qpn, T, "rq_psn", a.rq_psn, 24)?;
        check_width(self.qpn, T, "min_rnr_timer", u32::from(a.min_rnr_timer), 5)?;
        let q = i.qpc_mut();
        q.set_next_rcv_psn(a.rq_psn);
        if !self.qp_type.is_datagram() {
            let mtu = a.path_mtu.ok_or_else(|| {
                attr_err(self.qpn, T, "path_mtu", "required on connected QPs".into())
            })?;
            let dest = a.dest_qpn.ok_or_else(|| {
                attr_err(
                    self.qpn,
                    T,
                    "dest_qp_num",
                    "required on connected QPs".into(),
                )
            })?;
            if dest == 0 || dest > 0xFF_FFFF {
                return Err(attr_err(
                    self.qpn,
                    T,
                    "dest_qp_num",
                    format!("{dest:#x} is not a QP number"),
                ));
            }
            let av = a.av.ok_or_else(|| {
                attr_err(self.qpn, T, "ah_attr", "required on connected QPs".into())
            })?;
            let rra = log2_ceil(u32::from(a.max_dest_rd_atomic.max(1)));
            if self.qp_type == QpType::Rc && rra > g.log_max_ra_res_qp() {
                return Err(attr_err(
                    self.qpn,
                    T,
                    "max_dest_rd_atomic",
                    format!(
                        "{} exceeds the device's {}",
                        a.max_dest_rd_atomic,
                        1u32 << g.log_max_ra_res_qp()
                    ),
                ));
            }
            q.set_mtu(mtu as u8);
            q.set_log_msg_max(g.log_max_msg());
            q.set_remote_qpn(dest);
            if self.qp_type == QpType::Rc {
                q.set_log_rra_max(if a.max_dest_rd_atomic == 0 { 0 } else { rra });
                q.set_min_rnr_nak(a.min_rnr_timer);
            }
            self.fill_ads(T, q.primary_address_path_mut(), &av, dest)?;
        }
        hca.cmdq().exec(&i, &[], &mut [])?;
        self.set_state(QpState::Rtr);
        Ok(())
    }

    /// RTR -> RTS (RTR2RTS_QP).
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
    /// # let av = loopback_av(&hca);
    /// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), max_dest_rd_atomic: 4, ..RtrAttr::default() })?;
    /// qp.to_rts(&RtsAttr { sq_psn: 100, timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 4 })?;
    /// assert_eq!(qp.query()?.state, QpState::Rts);
    /// # Ok(()) }
    /// ```
    pub fn to_rts(&self, a: &RtsAttr) -> Result<(), DriverError> {
        const T: &str = "RTR2RTS";
        let hca = self.pd.hca();
        let g = &hca.caps().general;
        check_width(self.qpn, T, "sq_psn", a.sq_psn, 24)?;
        let mut i = Rtr2RtsQpIn::new_cmd();
        i.set_qpn(self.qpn);
        let q = i.qpc_mut();
        q.set_next_send_psn(a.sq_psn);
        if self.qp_type == QpType::Rc {
            check_width(self.qpn, T, "timeout", u32::from(a.timeout), 5)?;
            check_width(self.qpn, T, "retry_cnt", u32::from(a.retry_cnt), 3)?;
            check_width(self.qpn, T, "rnr_retry", u32::from(a.rnr_retry), 3)?;
            let sra = log2_ceil(u32::from(a.max_rd_atomic.max(1)));
            if sra > g.log_max_ra_req_qp() {
                return Err(attr_err(
                    self.qpn,
                    T,
                    "max_rd_atomic",
                    format!(
                        "{} exceeds the device's {}",
                        a.max_rd_atomic,
                        1u32 << g.log_max_ra_req_qp()
                    ),
                ));
            }
            q.set_log_sra_max(if a.max_rd_atomic == 0 { 0 } else { sra });
            q.set_retry_count(a.retry_cnt);
            q.set_rnr_retry(a.rnr_retry);
            q.primary_address_path_mut().set_ack_timeout(a.timeout);
        }
        hca.cmdq().exec(&i, &[], &mut [])?;
        self.set_state(QpState::Rts);
        Ok(())
    }

    /// RTS -> RTS (RTS2RTS_QP) with the optional attributes given.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// qp.modify_rts(&Rts2RtsAttr { min_rnr_timer: Some(12), ..Rts2RtsAttr::default() })?;
    /// let info = qp.query()?;
    /// assert_eq!((info.state, info.qpc.min_rnr_nak()), (QpState::Rts, 12));
    /// # Ok(()) }
    /// ```
    pub fn modify_rts(&self, a: &Rts2RtsAttr) -> Result<(), DriverError> {
        const T: &str = "RTS2RTS";
        let mut i = Rts2RtsQpIn::new_cmd();
        i.set_qpn(self.qpn);
        let mut mask = 0;
        let q = i.qpc_mut();
        if let Some(acc) = a.access {
            set_remote_access(q, acc);
            mask |= opt_param::RRE | opt_param::RWE | opt_param::RAE;
        }
        if let Some(t) = a.min_rnr_timer {
            check_width(self.qpn, T, "min_rnr_timer", u32::from(t), 5)?;
            q.set_min_rnr_nak(t);
            mask |= opt_param::RNR_TIMEOUT;
        }
        if let Some(t) = a.timeout {
            check_width(self.qpn, T, "timeout", u32::from(t), 5)?;
            q.primary_address_path_mut().set_ack_timeout(t);
            mask |= opt_param::ACK_TIMEOUT;
        }
        if let Some(r) = a.retry_cnt {
            check_width(self.qpn, T, "retry_cnt", u32::from(r), 3)?;
            q.set_retry_count(r);
            mask |= opt_param::RETRY_COUNT;
        }
        if let Some(r) = a.rnr_retry {
            check_width(self.qpn, T, "rnr_retry", u32::from(r), 3)?;
            q.set_rnr_retry(r);
            mask |= opt_param::RNR_RETRY;
        }
        if let Some(k) = a.qkey {
            q.set_q_key(self.qkey_for(T, Some(k))?);
            mask |= opt_param::Q_KEY;
        }
        i.set_opt_param_mask(mask);
        self.pd.hca().cmdq().exec(&i, &[], &mut [])?;
        Ok(())
    }

    /// SQE -> RTS (SQERR2RTS_QP): a UD or UC QP whose send queue failed (the device moved it
    /// to [`QpState::Sqer`] after an error completion and flushed the rest of its sends)
    /// sends again. Fails with the device's bad-state status from any other state.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # use rnic_driver::ah::AddressHandle;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig { ipv4: Some([192, 0, 2, 1].into()), ..HcaConfig::default() })?);
    /// # let (pd, cq) = (Arc::new(Pd::alloc(&hca)?), Arc::new(Cq::create(&hca, 64, None)?));
    /// # let mr = Mr::alloc(&pd, 4096, Access::ALL)?;
    /// let qp = Qp::create(&pd, &QpConfig::new(QpType::Ud, cq.clone(), cq.clone()))?;
    /// qp.to_init(&InitAttr { qkey: Some(0x1234), ..InitAttr::default() })?;
    /// qp.to_rtr(&RtrAttr::default())?;
    /// qp.to_rts(&RtsAttr::default())?;
    /// let ah = AddressHandle::new(&pd, &AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() })?;
    /// let ud = Some(UdDest { ah: &ah, remote_qpn: qp.qpn(), remote_qkey: 0x1234 });
    /// // A datagram larger than the port MTU: a local length error, the send queue in SQE.
    /// let big = [mr.sge(0, 4096)];
    /// qp.post_send(&[SendWr { wr_id: 1, op: SendOp::Send, payload: Payload::Sgl(&big), flags: SendFlags::SIGNALED, ud }])?;
    /// assert_eq!(wait(&cq).status, WcStatus::LocLenErr);
    /// assert_eq!(qp.query()?.state, QpState::Sqer);
    /// qp.sqe_to_rts()?;
    /// assert_eq!(qp.query()?.state, QpState::Rts);
    /// assert!(qp.sqe_to_rts().is_err()); // from SQE only
    /// # Ok(()) }
    /// ```
    pub fn sqe_to_rts(&self) -> Result<(), DriverError> {
        let mut i = Sqerr2RtsQpIn::new_cmd();
        i.set_qpn(self.qpn);
        self.pd.hca().cmdq().exec(&i, &[], &mut [])?;
        self.set_state(QpState::Rts);
        Ok(())
    }

    /// Any state -> ERR (2ERR_QP): the device flushes outstanding work requests with
    /// WR_FLUSH_ERR completions.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// qp.post_recv(&[RecvWr { wr_id: 9, sgl: &[mr.sge(0, 64)] }])?;
    /// qp.to_err()?;
    /// let wc = wait(&cq);
    /// assert_eq!((wc.wr_id, wc.status, wc.opcode), (9, WcStatus::WrFlushErr, WcOpcode::Recv));
    /// # Ok(()) }
    /// ```
    pub fn to_err(&self) -> Result<(), DriverError> {
        let mut i = Qp2ErrIn::new_cmd();
        i.set_qpn(self.qpn);
        self.pd.hca().cmdq().exec(&i, &[], &mut [])?;
        self.set_state(QpState::Err);
        Ok(())
    }

    /// Any state -> RST (2RST_QP): the queues start over empty; completions of this QP still
    /// in its CQs are removed. Fails with [`DriverError::InvalidArgument`] while another
    /// thread posts to the QP.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// qp.post_send(&[SendWr { wr_id: 1, op: SendOp::Write { raddr: mr.addr(), rkey: mr.rkey() }, payload: Payload::Inline(b"x"), flags: SendFlags::SIGNALED, ud: None }])?;
    /// qp.to_reset()?;
    /// assert_eq!(qp.query()?.state, QpState::Rst);
    /// assert_eq!(cq.poll(&mut [WorkCompletion::default(); 4])?, 0); // its completions are gone
    /// # Ok(()) }
    /// ```
    pub fn to_reset(&self) -> Result<(), DriverError> {
        if self.send_claim.swap(true, Ordering::Acquire) {
            return Err(DriverError::InvalidArgument(
                "QP reset while posting sends".into(),
            ));
        }
        if self.recv_claim.swap(true, Ordering::Acquire) {
            self.send_claim.store(false, Ordering::Release);
            return Err(DriverError::InvalidArgument(
                "QP reset while posting receives".into(),
            ));
        }
        let mut i = Qp2RstIn::new_cmd();
        i.set_qpn(self.qpn);
        let r = self.pd.hca().cmdq().exec(&i, &[], &mut []);
        if r.is_ok() {
            self.set_state(QpState::Rst);
            self.send_cq.clean(self.qpn, false);
            self.recv_cq.clean(self.qpn, false);
            let s = &self.shared;
            s.sq.pi.store(0, Ordering::Relaxed);
            s.sq.ci.store(0, Ordering::Relaxed);
            s.sq.wr_pi.store(0, Ordering::Relaxed);
            s.sq.wr_ci.store(0, Ordering::Relaxed);
            if let Some(rq) = &s.rq {
                rq.pi.store(0, Ordering::Relaxed);
                rq.ci.store(0, Ordering::Relaxed);
            }
            self.db_count.store(0, Ordering::Relaxed);
            // SAFETY: the doorbell record is inside the live region.
            unsafe {
                write_be32(self.dbrec.as_ptr(), 0);
                write_be32(self.dbrec.as_ptr().add(4), 0);
            }
        }
        self.recv_claim.store(false, Ordering::Release);
        self.send_claim.store(false, Ordering::Release);
        r.map(|_| ())
    }

    /// QUERY_QP.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// let info = qp.query()?;
    /// assert_eq!((info.state, info.qpc.remote_qpn()), (QpState::Rts, qp.qpn()));
    /// # Ok(()) }
    /// ```
    pub fn query(&self) -> Result<QpInfo, DriverError> {
        let mut i = QueryQpIn::new_cmd();
        i.set_qpn(self.qpn);
        let out = self.pd.hca().cmdq().exec(&i, &[], &mut [])?;
        let qpc = *out.qpc();
        let state = QpState::try_from(qpc.state()).map_err(|e| DriverError::BadOutput {
            opcode: rnic_hw_regs::cmd::CmdOpcode::QueryQp,
            what: format!("QP state: {e}"),
        })?;
        self.set_state(state);
        Ok(QpInfo { state, qpc })
    }

    /// The state this handle last moved the QP to, or found it in with [`Qp::query`]: no
    /// command is sent, so the post path may ask. The device can have moved on since (to
    /// ERR or SQER after a failed work request, as it reports with an event); `query` asks
    /// it.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert_eq!(qp.state(), QpState::Rst); // as created
    /// qp.to_init(&InitAttr::default())?;
    /// assert_eq!(qp.state(), QpState::Init);
    /// qp.to_err()?;
    /// assert_eq!((qp.state(), qp.query()?.state), (QpState::Err, QpState::Err));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn state(&self) -> QpState {
        if self.pd.hca().is_dead() {
            return QpState::Err; // a dead device's QPs are in error: their work is flushed
        }
        QpState::try_from(self.state.load(Ordering::Acquire)).unwrap_or(QpState::Err)
    }

    fn set_state(&self, s: QpState) {
        self.state.store(u8::from(s), Ordering::Release);
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let hca = self.pd.hca().clone();
        let mut i = DestroyQpIn::new_cmd();
        i.set_qpn(self.qpn);
        let r = hca.cmdq().exec(&i, &[], &mut []);
        self.send_cq.clean(self.qpn, true);
        if !Arc::ptr_eq(&self.send_cq, &self.recv_cq) {
            self.recv_cq.clean(self.qpn, true);
        }
        crate::dma::release_after_destroy(&*self.bus, &mut self.buf, r, "DESTROY_QP", self.qpn)
    }

    /// DESTROY_QP, removes its completions from the CQs and frees the buffer (leaked if the
    /// device did not answer).
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert!(qp.destroy().is_ok()); // DESTROY_QP, buffer freed
    /// # Ok(()) }
    /// ```
    pub fn destroy(mut self) -> Result<(), DriverError> {
        self.teardown()
    }
}

drop_by_teardown!(Qp, "QP", qpn);
