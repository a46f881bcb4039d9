//! [`QueuePair`] (`struct ibv_qp`): creation with [`QueuePairBuilder`], the state machine
//! with typed attributes per transition, posting and query.
//!
//! The transitions, as `ibv_modify_qp` walks them:
//!
//! | call | transition | needs |
//! |---|---|---|
//! | [`QueuePair::to_init`] | RESET -> INIT | [`InitAttr`]: port, P_Key index, access (RC/UC), Q_Key (UD) |
//! | [`QueuePair::to_rtr`] | INIT -> RTR | [`RtrAttr`]: RC/UC: `path_mtu`, `dest_qp_num`, `rq_psn`, `ah_attr`; RC: `max_dest_rd_atomic`, `min_rnr_timer` |
//! | [`QueuePair::to_rts`] | RTR -> RTS | [`RtsAttr`]: `sq_psn`; RC: `timeout`, `retry_cnt`, `rnr_retry`, `max_rd_atomic` |
//! | [`QueuePair::modify_rts`] | RTS -> RTS | [`RtsModifyAttr`]: any of access, timers, retries, Q_Key |
//! | [`QueuePair::sqe_to_rts`] | SQE -> RTS | nothing (a UD / UC send queue that failed sends again) |
//! | [`QueuePair::to_error`] | any -> ERR | nothing (outstanding work completes with `WR_FLUSH_ERR`) |
//! | [`QueuePair::reset`] | any -> RESET | nothing (queues emptied) |
//!
//! A call from the wrong state fails with [`Error::InvalidTransition`] before anything is
//! sent to the device; a missing or out-of-range attribute with [`Error::QpAttr`] naming it.
//! [`QueuePair::modify_qp`] takes the same attributes as one enum, for code that is shaped
//! like ibverbs'.

use crate::error::{Error, Result};
pub use crate::qp_state::QpState;
use crate::qp_state::Transition;
use crate::wr::{recv_as_driver, send_as_driver};
use crate::{AccessFlags, MemoryRegion, MemoryWindow, MwType};
use crate::{AhAttr, CompletionQueue, ProtectionDomain, RecvWr, SendWr, SharedReceiveQueue};
use rnic_driver::qp as dqp;
use rnic_driver::qp::Qp;

/// QP transport type (`enum ibv_qp_type`): the driver's type. `Rc` is IBV_QPT_RC (every
/// opcode), `Uc` IBV_QPT_UC (SEND, WRITE), `Ud` IBV_QPT_UD (SEND to an address handle).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
/// for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
///     assert_eq!(pd.create_qp(t, &cq, &cq).build()?.qp_type(), t);
/// }
/// # Ok(()) }
/// ```
pub use rnic_driver::qp::QpType;

/// Path MTU (`enum ibv_mtu`, same values): the driver's type.
///
/// ```
/// use rnic_verbs::Mtu;
/// assert_eq!(Mtu::from_bytes(1024), Some(Mtu::Mtu1024));
/// assert_eq!(Mtu::from_bytes(1500), None);
/// assert_eq!(Mtu::Mtu4096.to_string(), "4096 (5)");
/// ```
pub use rnic_driver::qp::Mtu;

/// Queue sizes (`struct ibv_qp_cap`): the driver's `QpCaps` under ibverbs' name, one
/// definition for both layers.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
/// let want = QpCap { max_send_wr: 16, max_inline_data: 0, ..QpCap::default() };
/// let qp = pd.create_qp(QpType::Rc, &cq, &cq).cap(want).build()?;
/// let got = qp.cap(); // at least what was asked for
/// assert!(got.max_send_wr >= 16 && got.max_recv_wr >= 64 && got.max_send_sge >= 4);
/// # Ok(()) }
/// ```
pub use rnic_driver::qp::QpCaps as QpCap;

/// Builds a QP (`struct ibv_qp_init_attr`); from [`ProtectionDomain::create_qp`].
///
/// ```
/// use rnic_verbs::{Context, QpState, QpType};
///
/// # fn main() -> Result<(), rnic_verbs::Error> {
/// let ctx = Context::open("emu0")?;
/// let pd = ctx.alloc_pd()?;
/// let cq = ctx.create_cq(128, None)?;
/// let qp = pd
///     .create_qp(QpType::Rc, &cq, &cq)
///     .max_send_wr(32)
///     .max_recv_wr(32)
///     .max_inline_data(128)
///     .sq_sig_all(true)
///     .build()?;
/// assert_eq!(qp.state(), QpState::Reset);
/// assert!(qp.cap().max_send_wr >= 32);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "call build() to create the QP"]
pub struct QueuePairBuilder {
    pd: ProtectionDomain,
    qp_type: QpType,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    srq: Option<SharedReceiveQueue>,
    cap: QpCap,
    sq_sig_all: bool,
}

impl QueuePairBuilder {
    pub(crate) fn new(
        pd: &ProtectionDomain,
        qp_type: QpType,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
    ) -> Self {
        QueuePairBuilder {
            pd: pd.clone(),
            qp_type,
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            srq: None,
            cap: QpCap::default(),
            sq_sig_all: false,
        }
    }

    /// Outstanding send work requests (`cap.max_send_wr`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).max_send_wr(200).build()?;
    /// assert!(qp.cap().max_send_wr >= 200);
    /// assert!(pd.create_qp(QpType::Rc, &cq, &cq).max_send_wr(0).build().is_err());
    /// # Ok(()) }
    /// ```
    pub fn max_send_wr(mut self, n: u32) -> Self {
        self.cap.max_send_wr = n;
        self
    }

    /// Outstanding receive work requests (`cap.max_recv_wr`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).max_recv_wr(10).build()?;
    /// assert!(qp.cap().max_recv_wr >= 10);
    /// # Ok(()) }
    /// ```
    pub fn max_recv_wr(mut self, n: u32) -> Self {
        self.cap.max_recv_wr = n;
        self
    }

    /// SGEs per send work request (`cap.max_send_sge`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).max_send_sge(2).build()?;
    /// assert!(qp.cap().max_send_sge >= 2);
    /// let too_many = ctx.query_device().max_sge + 1;
    /// assert!(pd.create_qp(QpType::Rc, &cq, &cq).max_send_sge(too_many).build().is_err());
    /// # Ok(()) }
    /// ```
    pub fn max_send_sge(mut self, n: u32) -> Self {
        self.cap.max_send_sge = n;
        self
    }

    /// SGEs per receive work request (`cap.max_recv_sge`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Ud, &cq, &cq).max_recv_sge(2).build()?; // GRH + payload
    /// assert!(qp.cap().max_recv_sge >= 2);
    /// # Ok(()) }
    /// ```
    pub fn max_recv_sge(mut self, n: u32) -> Self {
        self.cap.max_recv_sge = n;
        self
    }

    /// Inline bytes per send work request (`cap.max_inline_data`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).max_inline_data(200).build()?;
    /// assert!(qp.cap().max_inline_data >= 200);
    /// # Ok(()) }
    /// ```
    pub fn max_inline_data(mut self, n: u32) -> Self {
        self.cap.max_inline_data = n;
        self
    }

    /// All sizes at once.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 16 };
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).cap(cap).build()?;
    /// assert!(qp.cap().max_send_wr >= 8 && qp.cap().max_inline_data >= 16);
    /// # Ok(()) }
    /// ```
    pub fn cap(mut self, cap: QpCap) -> Self {
        self.cap = cap;
        self
    }

    /// `sq_sig_all`: every send work request completes, signaled or not.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let qs = pa.create_qp(QpType::Rc, &ca, &ca).sq_sig_all(true).build()?;
    /// # let qr = pb.create_qp(QpType::Rc, &cb, &cb).build()?;
    /// # connect_pair(&qs, &qr, &ConnectOptions::default())?;
    /// # qr.post_recv(&[RecvWr::new(0, &[])])?;
    /// qs.post_send(&[SendWr::send(5, &[])])?; // not marked signaled...
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1); // ...completes anyway
    /// assert!(qs.query()?.sq_sig_all);
    /// # Ok(()) }
    /// ```
    pub fn sq_sig_all(mut self, on: bool) -> Self {
        self.sq_sig_all = on;
        self
    }

    /// Receive from `srq` instead of an own receive queue.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let srq = pd.create_srq(32, 1)?;
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).srq(&srq).build()?;
    /// assert_eq!(qp.srq().map(|s| s.srq_num()), Some(srq.srq_num()));
    /// // An SRQ of another PD cannot be used.
    /// assert!(ctx.alloc_pd()?.create_qp(QpType::Rc, &cq, &cq).srq(&srq).build().is_err());
    /// # Ok(()) }
    /// ```
    pub fn srq(mut self, srq: &SharedReceiveQueue) -> Self {
        self.srq = Some(srq.clone());
        self
    }

    /// `ibv_create_qp`. The QP starts in RESET.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// assert_eq!(qp.state(), QpState::Reset);
    /// // CQs must be of the PD's device.
    /// let other = Context::open("emu1")?.create_cq(8, None)?;
    /// assert!(pd.create_qp(QpType::Rc, &other, &other).build().is_err());
    /// # Ok(()) }
    /// ```
    pub fn build(self) -> Result<QueuePair> {
        const V: &str = "ibv_create_qp";
        let ctx = self.pd.context();
        for (what, cq) in [("send_cq", &self.send_cq), ("recv_cq", &self.recv_cq)] {
            if !cq.context().same_device(ctx) {
                return Err(Error::invalid(
                    V,
                    format!("{what} belongs to another device"),
                ));
            }
        }
        if let Some(srq) = &self.srq {
            if !std::sync::Arc::ptr_eq(&srq.pd().inner, &self.pd.inner) {
                return Err(Error::invalid(V, "the SRQ belongs to another PD"));
            }
        }
        let c = self.cap;
        let cfg = dqp::QpConfig {
            qp_type: self.qp_type,
            caps: c,
            send_cq: self.send_cq.inner.cq.clone(),
            recv_cq: self.recv_cq.inner.cq.clone(),
            srq: self.srq.as_ref().map(|s| s.inner.srq.clone()),
            sq_sig_all: self.sq_sig_all,
        };
        let qp = Qp::create(self.pd.driver(), &cfg).map_err(Error::create(V))?;
        Ok(QueuePair {
            qp,
            qp_type: self.qp_type,
            sq_sig_all: self.sq_sig_all,
            send_cq: self.send_cq,
            recv_cq: self.recv_cq,
            srq: self.srq,
            pd: self.pd,
        })
    }
}

/// RESET -> INIT attributes (the driver's `InitAttr`, one definition for both layers).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
/// let ud = pd.create_qp(QpType::Ud, &cq, &cq).build()?;
/// ud.to_init(&InitAttr { qkey: Some(DEFAULT_QKEY), ..InitAttr::default() })?;
/// assert_eq!(ud.query()?.qkey, DEFAULT_QKEY);
/// # Ok(()) }
/// ```
pub use rnic_driver::qp::InitAttr;

/// INIT -> RTR attributes. [`Default`] has rc_pingpong's `max_dest_rd_atomic` 1 and
/// `min_rnr_timer` 12, and no path: RC and UC need `path_mtu`, `dest_qp_num` and `ah_attr`.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
/// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
/// qp.to_init(&InitAttr::default())?;
/// // RC needs a path: the default has none, and the error names the first missing attribute.
/// let err = qp.to_rtr(&RtrAttr::default()).unwrap_err();
/// assert!(matches!(err, Error::QpAttr { transition: "INIT2RTR", .. }), "{err}");
/// # Ok(()) }
/// ```
// Not the driver's `RtrAttr`: the path is an `AhAttr` (its MAC resolved through the device's
// neighbour table, `AhAttr::to_av`) where the driver takes a finished address vector, the
// default has rc_pingpong's values, and the names are ibverbs' (`dest_qp_num`, `ah_attr`);
// `to_driver` is the one conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtrAttr {
    /// `path_mtu` (RC, UC).
    pub path_mtu: Option<Mtu>,
    /// `dest_qp_num` (RC, UC).
    pub dest_qp_num: Option<u32>,
    /// `rq_psn`: the first PSN expected (24 bits).
    pub rq_psn: u32,
    /// `ah_attr`: where the peer is (RC, UC).
    pub ah_attr: Option<AhAttr>,
    /// `max_dest_rd_atomic`: READs / atomics served at once (RC).
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer` (5-bit code; 12 = 0.64 ms) (RC).
    pub min_rnr_timer: u8,
}

impl RtrAttr {
    fn to_driver(self, av: Option<dqp::AddressVector>) -> dqp::RtrAttr {
        dqp::RtrAttr {
            path_mtu: self.path_mtu,
            dest_qpn: self.dest_qp_num,
            rq_psn: self.rq_psn,
            av,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
            min_rnr_timer: self.min_rnr_timer,
        }
    }
}

impl Default for RtrAttr {
    fn default() -> Self {
        RtrAttr {
            path_mtu: None,
            dest_qp_num: None,
            rq_psn: 0,
            ah_attr: None,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
        }
    }
}

/// RTR -> RTS attributes. [`Default`] has rc_pingpong's values: timeout 14, retry_cnt 7,
/// rnr_retry 7, max_rd_atomic 1, sq_psn 0.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
/// # let qp = pd.create_qp(QpType::Ud, &cq, &cq).build()?;
/// # qp.to_init(&InitAttr { qkey: Some(1), ..InitAttr::default() })?;
/// # qp.to_rtr(&RtrAttr::default())?;
/// qp.to_rts(&RtsAttr { sq_psn: 0x100, ..RtsAttr::default() })?;
/// assert_eq!(qp.query()?.sq_psn, 0x100);
/// assert_eq!(RtsAttr::default().retry_cnt, 7); // rc_pingpong's
/// # Ok(()) }
/// ```
// The driver's `RtsAttr` has these fields, but its `Default` is all zeros (no retries, no
// READ credits) where ibverbs code expects rc_pingpong's values from this one; `to_driver`
// is the one conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtsAttr {
    /// `sq_psn`: the first PSN sent (24 bits).
    pub sq_psn: u32,
    /// `timeout`: local ACK timeout 4.096 us * 2^timeout (5 bits) (RC).
    pub timeout: u8,
    /// `retry_cnt` (3 bits) (RC).
    pub retry_cnt: u8,
    /// `rnr_retry` (3 bits, 7 = forever) (RC).
    pub rnr_retry: u8,
    /// `max_rd_atomic`: READs / atomics outstanding at once as requester (RC).
    pub max_rd_atomic: u8,
}

impl RtsAttr {
    fn to_driver(self) -> dqp::RtsAttr {
        dqp::RtsAttr {
            sq_psn: self.sq_psn,
            timeout: self.timeout,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            max_rd_atomic: self.max_rd_atomic,
        }
    }
}

impl Default for RtsAttr {
    fn default() -> Self {
        RtsAttr {
            sq_psn: 0,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
        }
    }
}

/// RTS -> RTS attributes: each `Some` is changed (the driver's `Rts2RtsAttr`, one definition
/// for both layers).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// qa.modify_rts(&RtsModifyAttr { timeout: Some(18), rnr_retry: Some(3), ..Default::default() })?;
/// let attr = qa.query()?;
/// assert_eq!((attr.timeout, attr.rnr_retry), (18, 3));
/// # Ok(()) }
/// ```
pub use rnic_driver::qp::Rts2RtsAttr as RtsModifyAttr;

/// One `ibv_modify_qp` call: the target state with its attributes.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
/// let qp = pd.create_qp(QpType::Ud, &cq, &cq).build()?;
/// for m in [
///     ModifyQp::Init(InitAttr { qkey: Some(7), ..InitAttr::default() }),
///     ModifyQp::Rtr(RtrAttr::default()),
///     ModifyQp::Rts(RtsAttr::default()),
/// ] {
///     qp.modify_qp(&m)?;
/// }
/// assert_eq!(qp.state(), QpState::Rts);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModifyQp {
    /// RESET -> INIT.
    Init(InitAttr),
    /// INIT -> RTR.
    Rtr(RtrAttr),
    /// RTR -> RTS.
    Rts(RtsAttr),
    /// RTS -> RTS.
    RtsToRts(RtsModifyAttr),
    /// any -> ERR.
    Error,
    /// any -> RESET.
    Reset,
}

/// What `ibv_query_qp` answers (`struct ibv_qp_attr` and the init attributes).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// let attr: QpAttr = qa.query()?;
/// assert_eq!((attr.qp_state, attr.qp_type), (QpState::Rts, QpType::Rc));
/// assert_eq!(attr.dest_qp_num, qb.qp_num());
/// assert_eq!(attr.dgid, b.query_gid(1, 1)?); // the peer's address
/// assert_eq!(attr.path_mtu, Some(a.query_port(1)?.active_mtu));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// `qp_state` as the device reports it.
    pub qp_state: QpState,
    /// The transport.
    pub qp_type: QpType,
    /// `qp_num`.
    pub qp_num: u32,
    /// Queue sizes.
    pub cap: QpCap,
    /// `path_mtu` (connected QPs past INIT).
    pub path_mtu: Option<Mtu>,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `sq_psn`: next PSN to send.
    pub sq_psn: u32,
    /// `rq_psn`: next PSN expected.
    pub rq_psn: u32,
    /// `qkey`.
    pub qkey: u32,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `ah_attr.grh.dgid`.
    pub dgid: crate::Gid,
    /// `sq_sig_all`.
    pub sq_sig_all: bool,
}

/// A queue pair (`ibv_create_qp`). Keeps its PD, CQs and SRQ alive; destroyed on drop.
/// `Send + Sync`: one thread may post sends while another posts receives and others poll
/// the CQs (a second concurrent poster on the same queue gets [`Error::Post`] with kind
/// `Busy`).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// use std::sync::Arc;
/// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
/// let qp = Arc::new(pd.create_qp(QpType::Rc, &cq, &cq).build()?);
/// let q = Arc::clone(&qp); // Send + Sync: share it between threads
/// let qpn = std::thread::spawn(move || q.qp_num()).join().unwrap();
/// assert_eq!(qpn, qp.qp_num());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct QueuePair {
    // Field order: the driver QP is destroyed first.
    qp: Qp,
    qp_type: QpType,
    sq_sig_all: bool,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    srq: Option<SharedReceiveQueue>,
    pd: ProtectionDomain,
}

impl QueuePair {
    /// `qp_num`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// assert_ne!(qa.qp_num(), 0); // QP 0 and 1 are special
    /// assert_eq!(qb.query()?.dest_qp_num, qa.qp_num()); // what the peer sends to
    /// # Ok(()) }
    /// ```
    pub fn qp_num(&self) -> u32 {
        self.qp.qpn()
    }

    /// The transport.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// assert_eq!(pd.create_qp(QpType::Ud, &cq, &cq).build()?.qp_type(), QpType::Ud);
    /// # Ok(()) }
    /// ```
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The state as last set (or queried) through this handle. The device may move a QP to
    /// ERR on its own (a fatal error completion); [`QueuePair::query`] tells.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// assert_eq!(qp.state(), QpState::Reset);
    /// qp.to_init(&InitAttr::default())?;
    /// assert_eq!(qp.state(), QpState::Init);
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> QpState {
        // The driver's record (one state machine, the driver's), in ibverbs' terms.
        QpState::from_driver(self.qp.state())
    }

    /// Queue sizes as created (at least what was asked for).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).max_send_wr(100).build()?;
    /// assert!(qp.cap().max_send_wr >= 100);
    /// assert_eq!(qp.query()?.cap, qp.cap());
    /// # Ok(()) }
    /// ```
    pub fn cap(&self) -> QpCap {
        self.qp.caps()
    }

    /// The PD.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// assert_eq!(qp.pd().pdn(), pd.pdn());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    /// The send CQ.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let (pd, scq, rcq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &scq, &rcq).build()?;
    /// assert_eq!(qp.send_cq().cqn(), scq.cqn());
    /// # Ok(()) }
    /// ```
    pub fn send_cq(&self) -> &CompletionQueue {
        &self.send_cq
    }

    /// The receive CQ.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let (pd, scq, rcq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &scq, &rcq).build()?;
    /// assert_eq!(qp.recv_cq().cqn(), rcq.cqn());
    /// # Ok(()) }
    /// ```
    pub fn recv_cq(&self) -> &CompletionQueue {
        &self.recv_cq
    }

    /// The SRQ, if the QP receives from one.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// assert!(pd.create_qp(QpType::Rc, &cq, &cq).build()?.srq().is_none());
    /// # Ok(()) }
    /// ```
    pub fn srq(&self) -> Option<&SharedReceiveQueue> {
        self.srq.as_ref()
    }

    /// Runs transition `t` (`run` asks the device, and the driver records the new state):
    /// refused unless the QP is in the state `t` starts from.
    fn modify(&self, t: Transition, run: impl FnOnce() -> Result<()>) -> Result<()> {
        let cur = self.state();
        if cur != t.from() {
            return Err(Error::InvalidTransition {
                qpn: self.qp_num(),
                from: cur,
                to: t.to(),
            });
        }
        run()
    }

    fn attr_err(&self, transition: &'static str, attr: &'static str, why: String) -> Error {
        Error::QpAttr {
            qpn: self.qp_num(),
            transition,
            attr,
            why,
        }
    }

    /// `ibv_modify_qp` to INIT.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Uc, &cq, &cq).build()?;
    /// // UC allows remote writes, never reads: the attribute is named in the error.
    /// let read = InitAttr { access: AccessFlags::REMOTE_READ, ..InitAttr::default() };
    /// assert!(matches!(qp.to_init(&read), Err(Error::QpAttr { attr: "qp_access_flags", .. })));
    /// qp.to_init(&InitAttr { access: AccessFlags::REMOTE_WRITE, ..InitAttr::default() })?;
    /// assert!(matches!(qp.to_init(&InitAttr::default()), Err(Error::InvalidTransition { .. })));
    /// # Ok(()) }
    /// ```
    pub fn to_init(&self, a: &InitAttr) -> Result<()> {
        self.modify(Transition::RstToInit, || {
            self.qp.to_init(a).map_err(Error::driver("ibv_modify_qp"))
        })
    }

    /// `ibv_modify_qp` to RTR.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// qp.to_init(&InitAttr::default())?;
    /// let peer = Context::open("emu1")?.query_gid(1, 1)?;
    /// qp.to_rtr(&RtrAttr {
    ///     path_mtu: Some(Mtu::Mtu1024),
    ///     dest_qp_num: Some(0x123),
    ///     rq_psn: 0x42,
    ///     ah_attr: Some(AhAttr::new(peer, 1)),
    ///     ..RtrAttr::default()
    /// })?;
    /// assert_eq!((qp.state(), qp.query()?.rq_psn), (QpState::Rtr, 0x42));
    /// # Ok(()) }
    /// ```
    pub fn to_rtr(&self, a: &RtrAttr) -> Result<()> {
        const T: &str = "INIT2RTR";
        self.modify(Transition::InitToRtr, || {
            let av = match (&a.ah_attr, self.qp_type) {
                (Some(ah), QpType::Rc | QpType::Uc) => Some(
                    ah.to_av(&self.pd, "ibv_modify_qp")
                        .map_err(|e| self.attr_err(T, "ah_attr", e.to_string()))?,
                ),
                _ => None,
            };
            self.qp
                .to_rtr(&a.to_driver(av))
                .map_err(Error::driver("ibv_modify_qp"))
        })
    }

    /// `ibv_modify_qp` to RTS.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Ud, &cq, &cq).build()?;
    /// // RTS is reached through RTR only.
    /// assert!(matches!(qp.to_rts(&RtsAttr::default()), Err(Error::InvalidTransition { .. })));
    /// qp.to_init(&InitAttr { qkey: Some(DEFAULT_QKEY), ..InitAttr::default() })?;
    /// qp.to_rtr(&RtrAttr::default())?;
    /// qp.to_rts(&RtsAttr::default())?;
    /// assert_eq!(qp.query()?.qp_state, QpState::Rts);
    /// # Ok(()) }
    /// ```
    pub fn to_rts(&self, a: &RtsAttr) -> Result<()> {
        self.modify(Transition::RtrToRts, || {
            self.qp
                .to_rts(&a.to_driver())
                .map_err(Error::driver("ibv_modify_qp"))
        })
    }

    /// `ibv_modify_qp` RTS -> RTS.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qa.modify_rts(&RtsModifyAttr { min_rnr_timer: Some(20), ..Default::default() })?;
    /// assert_eq!(qa.query()?.min_rnr_timer, 20);
    /// # Ok(()) }
    /// ```
    pub fn modify_rts(&self, a: &RtsModifyAttr) -> Result<()> {
        self.modify(Transition::RtsToRts, || {
            self.qp
                .modify_rts(a)
                .map_err(Error::driver("ibv_modify_qp"))
        })
    }

    /// `ibv_modify_qp` SQE -> RTS. A UD or UC QP enters SQE on its own when a send fails
    /// (the failed request completes with its error, later sends with
    /// [`crate::WcStatus::WrFlushErr`]; receives go on); this resumes sending. The device is
    /// asked for the state first when this handle still says RTS; from any state but SQE it
    /// fails with [`Error::InvalidTransition`].
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Ud, &cq, &cq).build()?;
    /// qp.to_init(&InitAttr { qkey: Some(DEFAULT_QKEY), ..InitAttr::default() })?;
    /// qp.to_rtr(&RtrAttr::default())?;
    /// qp.to_rts(&RtsAttr::default())?;
    /// let ah = pd.create_ah(&AhAttr::new(ctx.query_gid(1, 1)?, 1))?;
    /// let big = pd.reg_mr(8192, AccessFlags::LOCAL_WRITE)?; // beyond the port MTU (4096)
    /// let sgl = [big.sge(0, 8192)?];
    /// qp.post_send(&[SendWr::send(1, &sgl).ud(&ah, qp.qp_num(), DEFAULT_QKEY).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cq.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].status(), WcStatus::LocLenErr);
    /// qp.sqe_to_rts()?;
    /// assert_eq!(qp.query()?.qp_state, QpState::Rts);
    /// assert!(matches!(qp.sqe_to_rts(), Err(Error::InvalidTransition { .. })));
    /// # Ok(()) }
    /// ```
    pub fn sqe_to_rts(&self) -> Result<()> {
        if self.state() == QpState::Rts {
            self.query()?;
        }
        self.modify(Transition::SqeToRts, || {
            self.qp.sqe_to_rts().map_err(Error::driver("ibv_modify_qp"))
        })
    }

    /// `ibv_modify_qp` to ERR: outstanding work requests complete with
    /// [`crate::WcStatus::WrFlushErr`].
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qb.post_recv(&[RecvWr::new(1, &[]), RecvWr::new(2, &[])])?;
    /// qb.to_error()?;
    /// let mut wc = [WorkCompletion::default(); 2];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 2);
    /// assert!(wc.iter().all(|w| w.status() == WcStatus::WrFlushErr));
    /// assert_eq!(qb.query()?.qp_state, QpState::Err);
    /// # Ok(()) }
    /// ```
    pub fn to_error(&self) -> Result<()> {
        self.qp.to_err().map_err(Error::driver("ibv_modify_qp"))
    }

    /// `ibv_modify_qp` to RESET: queues emptied (their completions still in the CQs are
    /// removed); the QP can be taken through INIT, RTR, RTS again.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qa.to_error()?;
    /// qa.reset()?;
    /// qb.reset()?;
    /// assert_eq!(qa.state(), QpState::Reset);
    /// // Both can be connected again.
    /// connect_pair(&qa, &qb, &ConnectOptions::default())?;
    /// assert_eq!(qa.query()?.qp_state, QpState::Rts);
    /// # Ok(()) }
    /// ```
    pub fn reset(&self) -> Result<()> {
        self.qp.to_reset().map_err(Error::driver("ibv_modify_qp"))
    }

    /// `ibv_modify_qp` with the transition as a value.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qa.modify_qp(&ModifyQp::RtsToRts(RtsModifyAttr { retry_cnt: Some(2), ..Default::default() }))?;
    /// assert_eq!(qa.query()?.retry_cnt, 2);
    /// qa.modify_qp(&ModifyQp::Error)?;
    /// assert_eq!(qa.state(), QpState::Err);
    /// # Ok(()) }
    /// ```
    pub fn modify_qp(&self, m: &ModifyQp) -> Result<()> {
        match m {
            ModifyQp::Init(a) => self.to_init(a),
            ModifyQp::Rtr(a) => self.to_rtr(a),
            ModifyQp::Rts(a) => self.to_rts(a),
            ModifyQp::RtsToRts(a) => self.modify_rts(a),
            ModifyQp::Error => self.to_error(),
            ModifyQp::Reset => self.reset(),
        }
    }

    /// `ibv_query_qp`: asks the device (and updates [`QueuePair::state`]).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let q = qb.query()?;
    /// assert_eq!((q.qp_state, q.qp_num, q.dest_qp_num), (QpState::Rts, qb.qp_num(), qa.qp_num()));
    /// assert_eq!(q.rq_psn, qa.query()?.sq_psn); // b expects what a sends next
    /// # Ok(()) }
    /// ```
    pub fn query(&self) -> Result<QpAttr> {
        let info = self.qp.query().map_err(Error::driver("ibv_query_qp"))?;
        let q = &info.qpc;
        let state = QpState::from_driver(info.state);
        let ads = q.primary_address_path();
        let log = |l: u8| if l == 0 { 1 } else { 1u8 << l.min(7) };
        Ok(QpAttr {
            qp_state: state,
            qp_type: self.qp_type,
            qp_num: self.qp_num(),
            cap: self.cap(),
            path_mtu: Mtu::from_code(q.mtu()),
            dest_qp_num: q.remote_qpn(),
            sq_psn: q.next_send_psn(),
            rq_psn: q.next_rcv_psn(),
            qkey: q.q_key(),
            timeout: ads.ack_timeout(),
            retry_cnt: q.retry_count(),
            rnr_retry: q.rnr_retry(),
            min_rnr_timer: q.min_rnr_nak(),
            max_rd_atomic: log(q.log_sra_max()),
            max_dest_rd_atomic: log(q.log_rra_max()),
            dgid: crate::Gid(ads.rgid_rip()),
            sq_sig_all: self.sq_sig_all,
        })
    }

    /// `ibv_post_send`: posts `wrs` behind one doorbell. On error the requests before
    /// [`Error::Post`]'s `index` were posted. No allocation, lock or system call.
    ///
    /// Accepted in RTS, SQD, SQE and ERR (as set through this handle or found by
    /// [`QueuePair::query`]): in SQE and ERR the device completes what is posted with
    /// [`crate::WcStatus::WrFlushErr`], the usual way to drain a QP, whether
    /// [`QueuePair::to_error`] or the device moved it there. Fails with
    /// [`Error::WrongQpState`] in RESET, INIT and RTR.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let dst = pb.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    /// let wrs = [
    ///     SendWr::write(1, &[], dst.remote(0)).inline(b"one"),
    ///     SendWr::write(2, &[], dst.remote(3)).inline(b"two").signaled(),
    /// ];
    /// qa.post_send(&wrs)?; // one doorbell for both
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1); // only the signaled one reports
    /// assert_eq!((wc[0].wr_id(), dst.to_vec(0, 6)?), (2, b"onetwo".to_vec()));
    /// # let fresh = pa.create_qp(QpType::Rc, &ca, &ca).build()?;
    /// assert!(matches!(fresh.post_send(&wrs), Err(Error::WrongQpState { .. }))); // not in RTS
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> Result<()> {
        let st = self.state();
        if !st.accepts_sends() {
            return Err(Error::WrongQpState {
                verb: "ibv_post_send",
                qpn: self.qp_num(),
                state: st,
                why: QpState::SENDS_ACCEPTED,
            });
        }
        self.qp
            .post_send(send_as_driver(wrs))
            .map_err(Error::post("ibv_post_send", self.qp_num()))
    }

    /// `ibv_bind_mw`: binds the type-1 window `mw` to `len` bytes at `offset` of `mr` with
    /// `access` (remote read, write, atomic) by posting a signaled bind work request, and
    /// returns the window's new rkey (the next variant byte, [`MemoryWindow::next_rkey`]),
    /// which the window now reports. `len` 0 unbinds it. The bind completes on the send CQ
    /// with [`crate::WcOpcode::BindMw`], or `MwBindErr` when the device refuses it (beyond
    /// the region, more rights than it allows, another PD); a region without
    /// [`crate::AccessFlags::MW_BIND`] or a type-2 window is refused here.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let mr = pb.reg_mr(64, AccessFlags::LOCAL_WRITE)?; // no MW_BIND
    /// let mw = pb.alloc_mw(MwType::One)?;
    /// let e = qb.bind_mw(1, &mw, &mr, 0, 64, AccessFlags::REMOTE_READ).unwrap_err();
    /// assert!(matches!(e, Error::Post { kind: PostErrorKind::MrNoMwBind, .. }));
    /// # Ok(()) }
    /// ```
    pub fn bind_mw(
        &self,
        wr_id: u64,
        mw: &MemoryWindow,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<u32> {
        if mw.mw_type() != MwType::One {
            return Err(Error::invalid(
                "ibv_bind_mw",
                "a type-2 window is bound with a BIND_MW work request (SendWr::bind_mw)",
            ));
        }
        let rkey = mw.next_rkey();
        let wr = SendWr::bind_mw(wr_id, mw, rkey, mr, offset, len, access).signaled();
        self.post_send(&[wr]).map_err(|e| match e {
            Error::Post {
                qpn, index, kind, ..
            } => Error::Post {
                verb: "ibv_bind_mw",
                qpn,
                index,
                kind,
            },
            e => e,
        })?;
        mw.set_rkey(rkey);
        Ok(rkey)
    }

    /// `ibv_post_recv`: posts receives (one doorbell record update for the list). Accepted
    /// in every state but RESET ([`Error::WrongQpState`]); in ERR the device completes them
    /// with [`crate::WcStatus::WrFlushErr`]. Not for QPs on an SRQ (post to the SRQ).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// let buf = pd.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// let sgl = [buf.sge(0, 64)?];
    /// assert!(matches!(qp.post_recv(&[RecvWr::new(1, &sgl)]), Err(Error::WrongQpState { .. })));
    /// qp.to_init(&InitAttr::default())?;
    /// qp.post_recv(&[RecvWr::new(1, &sgl)])?; // receives may be posted before connecting
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        let st = self.state();
        if !st.accepts_recvs() {
            return Err(Error::WrongQpState {
                verb: "ibv_post_recv",
                qpn: self.qp_num(),
                state: st,
                why: QpState::RECVS_ACCEPTED,
            });
        }
        self.qp
            .post_recv(recv_as_driver(wrs))
            .map_err(Error::post("ibv_post_recv", self.qp_num()))
    }

    /// `ibv_destroy_qp`, reporting errors (dropping destroys too).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// qp.destroy()?;
    /// cq.destroy()?; // the QP's handle on the CQ went with it
    /// # Ok(()) }
    /// ```
    pub fn destroy(self) -> Result<()> {
        let QueuePair { qp, .. } = self;
        qp.destroy().map_err(Error::driver("ibv_destroy_qp"))
    }
}
