//! The objects the crate's doc examples start from, built in one place.
//!
//! Many examples work between the emulated pair: `emu0` and `emu1` open, a PD and an 8-entry
//! CQ on each, and an RC QP on each connected to the other. Their hidden prologue used to
//! build those in four lines each; it now destructures [`Pair::connected`]:
//!
//! ```
//! # use rnic_verbs::*; fn main() -> Result<(), Error> {
//! let doc_fixture::Pair { qa, qb, .. } = doc_fixture::Pair::connected()?;
//! assert_eq!((qa.state(), qb.state()), (QpState::Rts, QpState::Rts));
//! # Ok(()) }
//! ```
//!
//! Hidden from the documentation: it is scaffolding for examples, not an API; nothing in the
//! library uses it.

use crate::{
    CompletionQueue, ConnectOptions, Context, ProtectionDomain, QpType, QueuePair, Result,
    connect_pair,
};

/// `emu0` (`a`) and `emu1` (`b`), each with a PD, an 8-entry CQ and an RC QP sending and
/// receiving on that CQ; the two QPs are connected to each other.
///
/// The fields are in the order the examples declare them, so destructuring drops them as the
/// old prologue did (QPs first, contexts last).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// let doc_fixture::Pair { a, b, qa, qb, .. } = doc_fixture::Pair::connected()?;
/// assert_eq!((a.name(), b.name()), ("emu0", "emu1"));
/// assert_eq!(qa.qp_type(), QpType::Rc);
/// assert_eq!(qb.pd().context().name(), "emu1");
/// # Ok(()) }
/// ```
pub struct Pair {
    /// `emu0`.
    pub a: Context,
    /// `emu1`.
    pub b: Context,
    /// A PD on `a`.
    pub pa: ProtectionDomain,
    /// A PD on `b`.
    pub pb: ProtectionDomain,
    /// An 8-entry CQ on `a`, without a completion channel.
    pub ca: CompletionQueue,
    /// An 8-entry CQ on `b`, without a completion channel.
    pub cb: CompletionQueue,
    /// An RC QP on `pa` completing on `ca`, connected to `qb` (RTS).
    pub qa: QueuePair,
    /// An RC QP on `pb` completing on `cb`, connected to `qa` (RTS).
    pub qb: QueuePair,
}

impl Pair {
    /// Opens the pair, creates the objects and connects the two QPs with
    /// [`ConnectOptions::default`].
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// let doc_fixture::Pair { cb, qa, qb, .. } = doc_fixture::Pair::connected()?;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send(2, &[]).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((wc[0].wr_id(), wc[0].status()), (1, WcStatus::Success));
    /// # Ok(()) }
    /// ```
    pub fn connected() -> Result<Self> {
        let (a, b) = (Context::open("emu0")?, Context::open("emu1")?);
        let (pa, pb) = (a.alloc_pd()?, b.alloc_pd()?);
        let (ca, cb) = (a.create_cq(8, None)?, b.create_cq(8, None)?);
        let qa = pa.create_qp(QpType::Rc, &ca, &ca).build()?;
        let qb = pb.create_qp(QpType::Rc, &cb, &cb).build()?;
        connect_pair(&qa, &qb, &ConnectOptions::default())?;
        Ok(Self {
            a,
            b,
            pa,
            pb,
            ca,
            cb,
            qa,
            qb,
        })
    }
}
