//! Work requests and work completions of the data path: plain, borrowed, allocation-free
//! Rust values (the ibverbs-like builders are the verbs layer's job).
//!
//! ```
//! use rnic_driver::wr::{Payload, SendFlags, SendOp, SendWr, Sge};
//!
//! let sgl = [Sge { addr: 0x7f00_0000_1000, len: 64, lkey: 0x1234 }];
//! let wr = SendWr {
//!     wr_id: 7,
//!     op: SendOp::Write { raddr: 0x7f00_0000_8000, rkey: 0x5678 },
//!     payload: Payload::Sgl(&sgl),
//!     flags: SendFlags::SIGNALED,
//!     ud: None,
//! };
//! assert_eq!(wr.payload.len(), 64);
//! ```

use crate::ah::AddressHandle;
use core::fmt;

/// A scatter/gather entry: `len` bytes at `addr` (an address of the key's space: the VA an
/// [`crate::mr::Mr`] was registered at) under local key `lkey`.
///
/// ```
/// use rnic_driver::wr::{Payload, Sge};
///
/// let sge = Sge { addr: 0x1000, len: 64, lkey: 0x5a01 };
/// assert_eq!(Payload::Sgl(&[sge, sge]).len(), 128);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Address in the memory region's address space.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of the memory region.
    pub lkey: u32,
}

bitflags::bitflags! {
    /// Memory access rights of a memory region or a QP (ibverbs `IBV_ACCESS_*` values); the
    /// verbs layer's `AccessFlags` is this type.
    ///
    /// ```
    /// use rnic_driver::wr::Access;
    ///
    /// let a = Access::LOCAL_WRITE | Access::REMOTE_READ;
    /// assert!(a.contains(Access::REMOTE_READ));
    /// assert!(!a.contains(Access::REMOTE_ATOMIC));
    /// assert_eq!(a.bits(), 0b101);
    /// assert_eq!(Access::REMOTE_WRITE.bits(), 2); // IBV_ACCESS_REMOTE_WRITE
    /// assert_eq!(Access::from_bits_truncate(0x100 | 2), Access::REMOTE_WRITE); // 0x100 is dropped
    /// assert!(Access::ALL.contains(Access::REMOTE_ATOMIC | Access::LOCAL_WRITE));
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        /// IBV_ACCESS_LOCAL_WRITE: the device may write it (receives, READ and atomic
        /// results). Required with REMOTE_WRITE and REMOTE_ATOMIC.
        const LOCAL_WRITE = 1;
        /// IBV_ACCESS_REMOTE_WRITE: peers may RDMA WRITE it.
        const REMOTE_WRITE = 2;
        /// IBV_ACCESS_REMOTE_READ: peers may RDMA READ it.
        const REMOTE_READ = 4;
        /// IBV_ACCESS_REMOTE_ATOMIC: peers may run atomics (CMP_SWAP / FETCH_ADD) on it.
        const REMOTE_ATOMIC = 8;
        /// IBV_ACCESS_MW_BIND: memory windows may be bound to the region. The mkc has no bit
        /// for it, so the driver checks it when posting a bind (as rdma-core's mlx5 does).
        const MW_BIND = 16;
        /// Remote invalidation (mkc `en_rinval`): a SEND_WITH_INVALIDATE naming the
        /// region's rkey invalidates it. An rnic extension, not an `IBV_ACCESS_*` bit:
        /// ibverbs' user MRs cannot be invalidated remotely (ConnectX under the kernel
        /// driver, and rxe, refuse it; without this flag so does rnic: such a request
        /// completes with `RemInvReqErr`), but rnic runs CREATE_MKEY itself and may allow
        /// it. Meaningless for a QP.
        const REMOTE_INVALIDATE = 1 << 31;
    }
}

impl Access {
    /// No access beyond local read.
    pub const NONE: Access = Access::empty();
    /// Every right above.
    pub const ALL: Access = Access::all();
}

bitflags::bitflags! {
    /// Flags of a send work request (`enum ibv_send_flags` values; inline data is
    /// [`Payload::Inline`] instead of `IBV_SEND_INLINE`), in a byte: a `u32` costs the post
    /// path 5 instructions per WQE (callgrind). The verbs layer's `SendFlags` is this type.
    ///
    /// ```
    /// use rnic_driver::wr::SendFlags;
    ///
    /// let f = SendFlags::SIGNALED | SendFlags::FENCE;
    /// assert!(f.contains(SendFlags::FENCE) && !f.contains(SendFlags::SOLICITED));
    /// assert!(!SendFlags::NONE.contains(SendFlags::SIGNALED));
    /// assert_eq!((SendFlags::SIGNALED | SendFlags::SOLICITED).bits(), 6); // the C values
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct SendFlags: u8 {
        /// IBV_SEND_FENCE: wait for earlier RDMA READs and atomics before starting (fence
        /// mode 0x80).
        const FENCE = 1;
        /// IBV_SEND_SIGNALED: generate a completion (CQ_UPDATE).
        const SIGNALED = 2;
        /// IBV_SEND_SOLICITED: a solicited event at the responder.
        const SOLICITED = 4;
    }
}

impl SendFlags {
    /// No flag: unsignaled (no completion unless it fails, or the QP signals every WQE).
    pub const NONE: SendFlags = SendFlags::empty();
}

/// What a send work request does.
///
/// An RDMA READ of the QP's own memory (loopback):
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// mr.write(0, b"remote data");
/// let wr = SendWr {
///     wr_id: 1,
///     op: SendOp::Read { raddr: mr.addr(), rkey: mr.rkey() },
///     payload: Payload::Sgl(&[mr.sge(2048, 11)]),
///     flags: SendFlags::SIGNALED,
///     ud: None,
/// };
/// qp.post_send(&[wr])?;
/// let wc = wait(&cq);
/// assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::RdmaRead, 11));
/// let mut got = [0u8; 11];
/// mr.read(2048, &mut got);
/// assert_eq!(&got, b"remote data");
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data (`imm` as a host integer; sent big-endian).
    SendImm {
        /// Immediate data.
        imm: u32,
    },
    /// SEND with invalidate of the responder's `rkey` (RC only).
    SendInv {
        /// The remote key to invalidate.
        rkey: u32,
    },
    /// RDMA WRITE (RC, UC).
    Write {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate data (RC, UC).
    WriteImm {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ into the local scatter list (RC).
    Read {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// 8-byte compare and swap; the original value lands in the 8-byte local buffer (RC).
    CmpSwap {
        /// Remote address (8-byte aligned).
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Value compared with the remote one.
        compare: u64,
        /// Value written when they are equal.
        swap: u64,
    },
    /// 8-byte fetch and add; the original value lands in the 8-byte local buffer (RC).
    FetchAdd {
        /// Remote address (8-byte aligned).
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Value added.
        add: u64,
    },
    /// Bind a memory window (RC, UC): a UMR WQE; the payload is not used.
    BindMw(MwBind),
    /// Invalidate a type-2 memory window of this QP (IBV_WR_LOCAL_INV): a UMR WQE that frees
    /// the window `rkey` names (RC, UC); the payload is not used.
    LocalInv {
        /// The window's current rkey.
        rkey: u32,
    },
}

/// The type of a memory window (`enum ibv_mw_type` values).
///
/// ```
/// use rnic_driver::wr::MwType;
///
/// assert_eq!((MwType::One as u32, MwType::Two as u32), (1, 2)); // IBV_MW_TYPE_1 / _2
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MwType {
    /// Type 1: bound with `ibv_bind_mw`, by any QP of the PD, and rebound at will; not
    /// invalidated remotely.
    One = 1,
    /// Type 2 (2B): bound with a BIND_MW work request to the QP that posts it, only while
    /// free; reached only through that QP; freed by LOCAL_INV or SEND_WITH_INV.
    Two = 2,
}

/// What a bind work request asks: window `mw_rkey` (its current key) becomes `rkey`,
/// granting `access` to `len` bytes at `addr` of the region `mr_lkey` (`ibv_mw_bind_info`).
/// `len` 0 unbinds a type-1 window.
///
/// ```
/// use rnic_driver::wr::{Access, MwBind, MwType};
///
/// let b = MwBind { mw_type: MwType::Two, mw_rkey: 0x301, rkey: 0x302, mr_lkey: 0x205,
///     mr_access: Access::LOCAL_WRITE | Access::MW_BIND, addr: 0x1000, len: 64,
///     access: Access::REMOTE_WRITE };
/// assert_eq!(b.rkey >> 8, b.mw_rkey >> 8); // a window keeps its index
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwBind {
    /// The window's type.
    pub mw_type: MwType,
    /// The window's current key (the control segment names it).
    pub mw_rkey: u32,
    /// The key after the bind: the window's index with a new variant byte.
    pub rkey: u32,
    /// The region's lkey.
    pub mr_lkey: u32,
    /// The region's access rights (must include [`Access::MW_BIND`]).
    pub mr_access: Access,
    /// First byte of the window, in the region's address space.
    pub addr: u64,
    /// Length of the window in bytes (at most 2 GiB).
    pub len: u64,
    /// The window's rights: remote read, write, atomic.
    pub access: Access,
}

/// The local data of a send work request.
///
/// ```
/// use rnic_driver::wr::{Payload, Sge};
///
/// let sgl = [Sge { addr: 0x1000, len: 100, lkey: 1 }];
/// assert_eq!(Payload::Sgl(&sgl).len(), 100);
/// assert_eq!(Payload::Inline(b"hello").len(), 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// A gather (or, for READ and atomics, scatter) list under local keys.
    Sgl(&'a [Sge]),
    /// Bytes copied into the WQE (no lkey needed; SEND and WRITE flavours only).
    Inline(&'a [u8]),
}

impl Payload<'_> {
    /// Total length in bytes.
    ///
    /// ```
    /// use rnic_driver::wr::Payload;
    /// assert_eq!(Payload::Inline(&[0; 12]).len(), 12);
    /// ```
    pub fn len(&self) -> u64 {
        match self {
            Payload::Sgl(s) => s.iter().map(|s| u64::from(s.len)).sum(),
            Payload::Inline(b) => b.len() as u64,
        }
    }

    /// Whether the payload is empty.
    ///
    /// ```
    /// use rnic_driver::wr::Payload;
    /// assert!(Payload::Sgl(&[]).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The destination of a UD send.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// # drop(qp);
/// # let qp = Qp::create(&pd, &QpConfig::new(QpType::Ud, cq.clone(), cq.clone()))?;
/// # qp.to_init(&InitAttr { qkey: Some(7), ..InitAttr::default() })?;
/// # qp.to_rtr(&RtrAttr::default())?;
/// # qp.to_rts(&RtsAttr::default())?;
/// # qp.post_recv(&[RecvWr { wr_id: 1, sgl: &[mr.sge(0, 256)] }])?;
/// # let av = loopback_av(&hca);
/// let ah = rnic_driver::ah::AddressHandle::new(&pd, &av)?;
/// let ud = UdDest { ah: &ah, remote_qpn: qp.qpn(), remote_qkey: 7 };
/// let mut wr = SendWr { wr_id: 2, op: SendOp::Send, payload: Payload::Inline(b"dgram"), flags: SendFlags::NONE, ud: None };
/// assert_eq!(qp.post_send(&[wr]).unwrap_err().kind, PostErrorKind::MissingUdDest);
/// wr.ud = Some(ud);
/// qp.post_send(&[wr])?;
/// assert_eq!(wait(&cq).src_qp, qp.qpn());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct UdDest<'a> {
    /// Where the datagram goes.
    pub ah: &'a AddressHandle,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
}

/// A send work request.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// qp.post_recv(&[RecvWr { wr_id: 1, sgl: &[mr.sge(0, 64)] }])?;
/// let wr = SendWr {
///     wr_id: 2,
///     op: SendOp::SendImm { imm: 0xfeed },
///     payload: Payload::Inline(b"with immediate"),
///     flags: SendFlags::NONE, // unsignaled: only errors complete
///     ud: None,
/// };
/// qp.post_send(&[wr])?;
/// let wc = wait(&cq);
/// assert_eq!((wc.wr_id, wc.imm, wc.byte_len), (1, 0xfeed, 14));
/// assert!(wc.flags.contains(WcFlags::WITH_IMM));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// Returned in the work completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local data.
    pub payload: Payload<'a>,
    /// Signaled, fence, solicited.
    pub flags: SendFlags,
    /// Destination of a UD send (required on UD QPs, ignored elsewhere).
    pub ud: Option<UdDest<'a>>,
}

/// A receive work request.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// let recv = RecvWr { wr_id: 1, sgl: &[mr.sge(0, 4)] }; // room for 4 bytes
/// qp.post_recv(&[recv])?;
/// qp.post_send(&[SendWr { wr_id: 2, op: SendOp::Send, payload: Payload::Inline(b"too long"), flags: SendFlags::NONE, ud: None }])?;
/// let wc = wait(&cq);
/// assert_eq!((wc.wr_id, wc.status), (1, WcStatus::LocLenErr));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RecvWr<'a> {
    /// Returned in the work completion.
    pub wr_id: u64,
    /// Where received data goes (UD: the first 40 bytes get the GRH area).
    pub sgl: &'a [Sge],
}

/// Why a work request could not be posted. The requests before `index` were posted (and
/// their doorbell rung); the one at `index` and the rest were not.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// let ok = SendWr { wr_id: 1, op: SendOp::Send, payload: Payload::Inline(b"ok"), flags: SendFlags::NONE, ud: None };
/// let big = SendWr { payload: Payload::Inline(&[0; 4096]), ..ok };
/// let err = qp.post_send(&[ok, big]).unwrap_err();
/// assert_eq!(err.index, 1); // the first was posted, the second not
/// assert!(matches!(err.kind, PostErrorKind::InlineTooLong { given: 4096, .. }));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostError {
    /// Index of the first work request not posted.
    pub index: usize,
    /// What is wrong with it.
    pub kind: PostErrorKind,
}

/// What is wrong with a work request.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// let sgl = [mr.sge(0, 4)]; // an atomic needs one 8-byte SGE
/// let wr = SendWr { wr_id: 1, op: SendOp::FetchAdd { raddr: mr.addr(), rkey: mr.rkey(), add: 1 }, payload: Payload::Sgl(&sgl), flags: SendFlags::SIGNALED, ud: None };
/// assert_eq!(qp.post_send(&[wr]).unwrap_err().kind, PostErrorKind::AtomicNeeds8Bytes);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostErrorKind {
    /// The queue has no room (outstanding work fills it).
    QueueFull,
    /// Another thread is posting to this queue now (posting is single-producer per queue).
    Busy,
    /// More SGEs than the queue was created for.
    TooManySges {
        /// SGEs given.
        given: usize,
        /// The limit.
        max: usize,
    },
    /// Inline data longer than the queue was created for.
    InlineTooLong {
        /// Bytes given.
        given: usize,
        /// The limit.
        max: usize,
    },
    /// The operation is not valid on this QP type (e.g. READ on UC, WRITE on UD).
    OpNotSupported,
    /// READ and atomics cannot take inline data.
    InlineNotAllowed,
    /// An atomic needs exactly one 8-byte local SGE.
    AtomicNeeds8Bytes,
    /// A UD send without a destination.
    MissingUdDest,
    /// A UD send whose address handle belongs to another PD (or another device) than the
    /// QP's.
    AhOtherPd,
    /// An SGE longer than 2^31 - 1 bytes.
    SgeTooLong,
    /// A bind over a region registered without [`Access::MW_BIND`].
    MrNoMwBind,
    /// A bind granting other rights than remote read, write and atomic, or longer than one
    /// KLM describes (2 GiB), or a zero-length bind of a type-2 window.
    BadMwBind,
    /// The device was declared dead ([`Hca::fatal_reason`](crate::Hca::fatal_reason)):
    /// nothing is posted; outstanding work completes as `WR_FLUSH_ERR`.
    DeviceFatal,
    /// A raw Ethernet send with fewer bytes inline than the device requires (the L2 header,
    /// see [`crate::eth::RawSq::post_send`]).
    InlineTooShort {
        /// Bytes given.
        given: usize,
        /// The least the device takes.
        min: usize,
    },
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "work request {}: {:?}", self.index, self.kind)
    }
}

impl std::error::Error for PostError {}

/// Work completion status: `enum ibv_wc_status`, same names (`IBV_WC_*`) and values.
///
/// ```
/// use rnic_driver::wr::WcStatus;
///
/// assert_eq!(WcStatus::RemAccessErr as u32, 10);
/// assert_eq!(WcStatus::RemAccessErr.name(), "IBV_WC_REM_ACCESS_ERR");
/// assert_eq!(WcStatus::RemAccessErr.to_string(), "remote access error"); // ibv_wc_status_str
/// assert_eq!(WcStatus::from_u32(5), Some(WcStatus::WrFlushErr));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcStatus {
    /// IBV_WC_SUCCESS.
    Success = 0,
    /// IBV_WC_LOC_LEN_ERR: a receive buffer too small, or a send longer than allowed.
    LocLenErr = 1,
    /// IBV_WC_LOC_QP_OP_ERR.
    LocQpOpErr = 2,
    /// IBV_WC_LOC_EEC_OP_ERR.
    LocEecOpErr = 3,
    /// IBV_WC_LOC_PROT_ERR: an SGE's lkey, address or rights do not match a region.
    LocProtErr = 4,
    /// IBV_WC_WR_FLUSH_ERR: the QP went to ERR with this work request outstanding.
    WrFlushErr = 5,
    /// IBV_WC_MW_BIND_ERR.
    MwBindErr = 6,
    /// IBV_WC_BAD_RESP_ERR.
    BadRespErr = 7,
    /// IBV_WC_LOC_ACCESS_ERR.
    LocAccessErr = 8,
    /// IBV_WC_REM_INV_REQ_ERR.
    RemInvReqErr = 9,
    /// IBV_WC_REM_ACCESS_ERR: the responder refused the rkey, address or rights.
    RemAccessErr = 10,
    /// IBV_WC_REM_OP_ERR.
    RemOpErr = 11,
    /// IBV_WC_RETRY_EXC_ERR: no ACK within timeout x retry_cnt.
    RetryExcErr = 12,
    /// IBV_WC_RNR_RETRY_EXC_ERR: the responder had no receive posted, rnr_retry times.
    RnrRetryExcErr = 13,
    /// IBV_WC_LOC_RDD_VIOL_ERR.
    LocRddViolErr = 14,
    /// IBV_WC_REM_INV_RD_REQ_ERR.
    RemInvRdReqErr = 15,
    /// IBV_WC_REM_ABORT_ERR.
    RemAbortErr = 16,
    /// IBV_WC_INV_EECN_ERR.
    InvEecnErr = 17,
    /// IBV_WC_INV_EEC_STATE_ERR.
    InvEecStateErr = 18,
    /// IBV_WC_FATAL_ERR.
    FatalErr = 19,
    /// IBV_WC_RESP_TIMEOUT_ERR.
    RespTimeoutErr = 20,
    /// IBV_WC_GENERAL_ERR (also an error syndrome the PRM does not define).
    GeneralErr = 21,
}

impl WcStatus {
    const ALL: [WcStatus; 22] = [
        WcStatus::Success,
        WcStatus::LocLenErr,
        WcStatus::LocQpOpErr,
        WcStatus::LocEecOpErr,
        WcStatus::LocProtErr,
        WcStatus::WrFlushErr,
        WcStatus::MwBindErr,
        WcStatus::BadRespErr,
        WcStatus::LocAccessErr,
        WcStatus::RemInvReqErr,
        WcStatus::RemAccessErr,
        WcStatus::RemOpErr,
        WcStatus::RetryExcErr,
        WcStatus::RnrRetryExcErr,
        WcStatus::LocRddViolErr,
        WcStatus::RemInvRdReqErr,
        WcStatus::RemAbortErr,
        WcStatus::InvEecnErr,
        WcStatus::InvEecStateErr,
        WcStatus::FatalErr,
        WcStatus::RespTimeoutErr,
        WcStatus::GeneralErr,
    ];

    /// The status with numeric value `v`.
    ///
    /// ```
    /// use rnic_driver::wr::WcStatus;
    /// assert_eq!(WcStatus::from_u32(12), Some(WcStatus::RetryExcErr));
    /// assert_eq!(WcStatus::from_u32(22), None);
    /// ```
    pub fn from_u32(v: u32) -> Option<WcStatus> {
        Self::ALL.get(v as usize).copied()
    }

    /// The C name (`IBV_WC_SUCCESS`, ...).
    ///
    /// ```
    /// use rnic_driver::wr::WcStatus;
    /// assert_eq!(WcStatus::WrFlushErr.name(), "IBV_WC_WR_FLUSH_ERR");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            WcStatus::Success => "IBV_WC_SUCCESS",
            WcStatus::LocLenErr => "IBV_WC_LOC_LEN_ERR",
            WcStatus::LocQpOpErr => "IBV_WC_LOC_QP_OP_ERR",
            WcStatus::LocEecOpErr => "IBV_WC_LOC_EEC_OP_ERR",
            WcStatus::LocProtErr => "IBV_WC_LOC_PROT_ERR",
            WcStatus::WrFlushErr => "IBV_WC_WR_FLUSH_ERR",
            WcStatus::MwBindErr => "IBV_WC_MW_BIND_ERR",
            WcStatus::BadRespErr => "IBV_WC_BAD_RESP_ERR",
            WcStatus::LocAccessErr => "IBV_WC_LOC_ACCESS_ERR",
            WcStatus::RemInvReqErr => "IBV_WC_REM_INV_REQ_ERR",
            WcStatus::RemAccessErr => "IBV_WC_REM_ACCESS_ERR",
            WcStatus::RemOpErr => "IBV_WC_REM_OP_ERR",
            WcStatus::RetryExcErr => "IBV_WC_RETRY_EXC_ERR",
            WcStatus::RnrRetryExcErr => "IBV_WC_RNR_RETRY_EXC_ERR",
            WcStatus::LocRddViolErr => "IBV_WC_LOC_RDD_VIOL_ERR",
            WcStatus::RemInvRdReqErr => "IBV_WC_REM_INV_RD_REQ_ERR",
            WcStatus::RemAbortErr => "IBV_WC_REM_ABORT_ERR",
            WcStatus::InvEecnErr => "IBV_WC_INV_EECN_ERR",
            WcStatus::InvEecStateErr => "IBV_WC_INV_EEC_STATE_ERR",
            WcStatus::FatalErr => "IBV_WC_FATAL_ERR",
            WcStatus::RespTimeoutErr => "IBV_WC_RESP_TIMEOUT_ERR",
            WcStatus::GeneralErr => "IBV_WC_GENERAL_ERR",
        }
    }

    /// What `ibv_wc_status_str` says.
    ///
    /// ```
    /// use rnic_driver::wr::WcStatus;
    /// assert_eq!(WcStatus::RnrRetryExcErr.description(), "RNR retry counter exceeded");
    /// ```
    pub const fn description(self) -> &'static str {
        match self {
            WcStatus::Success => "success",
            WcStatus::LocLenErr => "local length error",
            WcStatus::LocQpOpErr => "local QP operation error",
            WcStatus::LocEecOpErr => "local EE context operation error",
            WcStatus::LocProtErr => "local protection error",
            WcStatus::WrFlushErr => "Work Request Flushed Error",
            WcStatus::MwBindErr => "memory management operation error",
            WcStatus::BadRespErr => "bad response error",
            WcStatus::LocAccessErr => "local access error",
            WcStatus::RemInvReqErr => "remote invalid request error",
            WcStatus::RemAccessErr => "remote access error",
            WcStatus::RemOpErr => "remote operation error",
            WcStatus::RetryExcErr => "transport retry counter exceeded",
            WcStatus::RnrRetryExcErr => "RNR retry counter exceeded",
            WcStatus::LocRddViolErr => "local RDD violation error",
            WcStatus::RemInvRdReqErr => "remote invalid RD request",
            WcStatus::RemAbortErr => "aborted error",
            WcStatus::InvEecnErr => "invalid EE context number",
            WcStatus::InvEecStateErr => "invalid EE context state",
            WcStatus::FatalErr => "fatal error",
            WcStatus::RespTimeoutErr => "response timeout error",
            WcStatus::GeneralErr => "general error",
        }
    }

    /// The status an error CQE syndrome stands for (as rdma-core's mlx5 provider maps it).
    ///
    /// ```
    /// use rnic_driver::wr::WcStatus;
    /// assert_eq!(WcStatus::from_syndrome(0x13), WcStatus::RemAccessErr);
    /// assert_eq!(WcStatus::from_syndrome(0x99), WcStatus::GeneralErr); // unknown syndromes
    /// ```
    pub const fn from_syndrome(s: u8) -> WcStatus {
        match s {
            0x01 => WcStatus::LocLenErr,
            0x02 => WcStatus::LocQpOpErr,
            0x04 => WcStatus::LocProtErr,
            0x05 => WcStatus::WrFlushErr,
            0x06 => WcStatus::MwBindErr,
            0x10 => WcStatus::BadRespErr,
            0x11 => WcStatus::LocAccessErr,
            0x12 => WcStatus::RemInvReqErr,
            0x13 => WcStatus::RemAccessErr,
            0x14 => WcStatus::RemOpErr,
            0x15 => WcStatus::RetryExcErr,
            0x16 => WcStatus::RnrRetryExcErr,
            0x22 => WcStatus::RemAbortErr,
            _ => WcStatus::GeneralErr,
        }
    }
}

impl fmt::Display for WcStatus {
    /// What `ibv_wc_status_str` says.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// Work completion opcode (`enum ibv_wc_opcode` values).
///
/// A FETCH_ADD on the QP's own memory completes as [`WcOpcode::FetchAdd`] with the original
/// value in the local buffer:
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// // Host byte order: bring-up sets atomic_req_8B_endianness_mode 1 where the device has it.
/// mr.write(0, &40u64.to_ne_bytes());
/// let op = SendOp::FetchAdd { raddr: mr.addr(), rkey: mr.rkey(), add: 2 };
/// qp.post_send(&[SendWr { wr_id: 1, op, payload: Payload::Sgl(&[mr.sge(8, 8)]), flags: SendFlags::SIGNALED, ud: None }])?;
/// let wc = wait(&cq);
/// assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::FetchAdd, 8));
/// let (mut old, mut new) = ([0u8; 8], [0u8; 8]);
/// mr.read(8, &mut old);
/// mr.read(0, &mut new);
/// assert_eq!((u64::from_ne_bytes(old), u64::from_ne_bytes(new)), (40, 42));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcOpcode {
    /// IBV_WC_SEND (SEND, SEND_IMM, SEND_INV).
    Send = 0,
    /// IBV_WC_RDMA_WRITE.
    RdmaWrite = 1,
    /// IBV_WC_RDMA_READ.
    RdmaRead = 2,
    /// IBV_WC_COMP_SWAP.
    CompSwap = 3,
    /// IBV_WC_FETCH_ADD.
    FetchAdd = 4,
    /// IBV_WC_BIND_MW.
    BindMw = 5,
    /// IBV_WC_LOCAL_INV.
    LocalInv = 6,
    /// IBV_WC_RECV.
    Recv = 128,
    /// IBV_WC_RECV_RDMA_WITH_IMM.
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    /// The C name (`IBV_WC_SEND`, ...), as ibverbs tools print it.
    ///
    /// ```
    /// use rnic_driver::wr::WcOpcode;
    ///
    /// assert_eq!(WcOpcode::Recv as u32, 128); // the ibverbs value
    /// assert_eq!(WcOpcode::RecvRdmaWithImm.name(), "IBV_WC_RECV_RDMA_WITH_IMM");
    /// assert_eq!(WcOpcode::FetchAdd.name(), "IBV_WC_FETCH_ADD");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            WcOpcode::Send => "IBV_WC_SEND",
            WcOpcode::RdmaWrite => "IBV_WC_RDMA_WRITE",
            WcOpcode::RdmaRead => "IBV_WC_RDMA_READ",
            WcOpcode::CompSwap => "IBV_WC_COMP_SWAP",
            WcOpcode::FetchAdd => "IBV_WC_FETCH_ADD",
            WcOpcode::BindMw => "IBV_WC_BIND_MW",
            WcOpcode::LocalInv => "IBV_WC_LOCAL_INV",
            WcOpcode::Recv => "IBV_WC_RECV",
            WcOpcode::RecvRdmaWithImm => "IBV_WC_RECV_RDMA_WITH_IMM",
        }
    }
}

bitflags::bitflags! {
    /// Work completion flags (`enum ibv_wc_flags` values, in a byte to keep
    /// [`WorkCompletion`] at 32 bytes); the verbs layer's `WcFlags` is this type.
    ///
    /// ```
    /// use rnic_driver::wr::WcFlags;
    ///
    /// let f = WcFlags::GRH | WcFlags::WITH_IMM;
    /// assert_eq!(f.bits(), 3); // the C values
    /// assert!(!f.contains(WcFlags::WITH_INV));
    /// assert!(WcFlags::default().is_empty());
    /// assert_eq!(WcFlags::WITH_INV.bits(), 8); // IBV_WC_WITH_INV
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct WcFlags: u8 {
        /// IBV_WC_GRH: the first 40 bytes of the receive buffer hold the GRH area (UD).
        const GRH = 1;
        /// IBV_WC_WITH_IMM: `imm` is valid.
        const WITH_IMM = 2;
        /// IBV_WC_WITH_INV: `invalidated_rkey` is valid.
        const WITH_INV = 8;
    }
}

impl WcFlags {
    /// `self` with `other` set too (a `const` `|`, for the CQE parse).
    pub(crate) const fn with(self, other: WcFlags) -> WcFlags {
        self.union(other)
    }
}

/// A work completion.
///
/// An RDMA WRITE with immediate data: the requester's completion, then the responder's:
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// qp.post_recv(&[RecvWr { wr_id: 10, sgl: &[] }])?; // consumed by the immediate
/// let op = SendOp::WriteImm { raddr: mr.addr() + 512, rkey: mr.rkey(), imm: 99 };
/// qp.post_send(&[SendWr { wr_id: 11, op, payload: Payload::Inline(b"data"), flags: SendFlags::SIGNALED, ud: None }])?;
/// let mut wcs = [wait(&cq), wait(&cq)];
/// wcs.sort_by_key(|wc| wc.wr_id);
/// let [recv, req] = wcs;
/// assert_eq!((recv.opcode, recv.imm, recv.byte_len), (WcOpcode::RecvRdmaWithImm, 99, 4));
/// assert_eq!((req.opcode, req.status, req.qp_num), (WcOpcode::RdmaWrite, WcStatus::Success, qp.qpn()));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// What completed (for errors: the posted operation, or [`WcOpcode::Recv`]).
    pub opcode: WcOpcode,
    /// Vendor syndrome of an error CQE (0 on success).
    pub vendor_err: u8,
    /// Bytes received (responder), read (READ, atomics: 8) or sent.
    pub byte_len: u32,
    /// Immediate data (host integer of the big-endian value sent), with `WITH_IMM`.
    pub imm: u32,
    /// The invalidated rkey, with `WITH_INV`.
    pub invalidated_rkey: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Source QP number (UD receives).
    pub src_qp: u32,
    /// GRH / WITH_IMM / WITH_INV.
    pub flags: WcFlags,
}

impl Default for WorkCompletion {
    fn default() -> Self {
        WorkCompletion {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            vendor_err: 0,
            byte_len: 0,
            imm: 0,
            invalidated_rkey: 0,
            qp_num: 0,
            src_qp: 0,
            flags: WcFlags::default(),
        }
    }
}

/// What is impossible about a CQE the device wrote.
///
/// ```
/// use rnic_driver::wr::{BadCqe, PollError};
///
/// let e = PollError::BadCqe { ci: 3, qpn: 0x77, what: BadCqe::UnknownQpn };
/// assert_eq!(e.to_string(), "impossible CQE at index 3 for QP 0x77: UnknownQpn");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadCqe {
    /// The CQE names a QP that has no queue on this CQ.
    UnknownQpn,
    /// An opcode the PRM does not define (or INVALID past the ownership check).
    UnknownOpcode(u8),
    /// A compressed CQE (format 3); compression is never enabled by this driver.
    Compressed,
    /// A requester CQE for a WQE that is not outstanding (or not a WQE's first WQEBB).
    WqeCounterOutOfRange(u16),
    /// The requester CQE's send opcode is not the posted WQE's.
    SendOpcodeMismatch {
        /// The opcode the driver posted.
        posted: u8,
        /// The opcode in the CQE.
        cqe: u8,
    },
    /// A receive CQE out of order or for a receive that is not posted.
    RecvCounterOutOfRange(u16),
    /// More bytes than the posted buffers hold.
    ByteCountTooLarge {
        /// The CQE's byte count.
        byte_cnt: u32,
        /// Bytes posted.
        posted: u64,
    },
}

/// Why [`crate::cq::Cq::poll`] failed.
///
/// A CQE that names no QP of the CQ (written here by hand, as a faulty device might) is
/// reported once, consumed, and polling goes on:
///
/// ```
/// use rnic_driver::wr::{BadCqe, PollError, WorkCompletion};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// let cq = rnic_driver::cq::Cq::create(&hca, 16, None)?;
/// let (ring, _) = cq.cqe_ring();
/// // SAFETY: entry 0 of the live ring; volatile writes; the device writes nothing to this CQ.
/// unsafe {
///     ring.as_ptr().add(0x38).cast::<u32>().write_volatile(0x00ab_cdefu32.to_be()); // QPN
///     ring.as_ptr().add(0x3F).write_volatile(0); // opcode REQ, owner bit of the first pass
/// }
/// let mut wc = [WorkCompletion::default(); 4];
/// let err = cq.poll(&mut wc).unwrap_err();
/// assert_eq!(err, PollError::BadCqe { ci: 0, qpn: 0xab_cdef, what: BadCqe::UnknownQpn });
/// assert_eq!(cq.poll(&mut wc), Ok(0));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PollError {
    /// Another thread is polling this CQ (polling is single-consumer per CQ).
    Busy,
    /// The device wrote an impossible CQE; it was consumed and skipped.
    BadCqe {
        /// Index of the CQE (consumer counter).
        ci: u32,
        /// The QPN it named.
        qpn: u32,
        /// What is wrong.
        what: BadCqe,
    },
}

impl fmt::Display for PollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PollError::Busy => f.write_str("another thread is polling this CQ"),
            PollError::BadCqe { ci, qpn, what } => {
                write!(f, "impossible CQE at index {ci} for QP {qpn:#x}: {what:?}")
            }
        }
    }
}

impl std::error::Error for PollError {}
