//! [`SharedReceiveQueue`] (`struct ibv_srq`).

use crate::error::{Error, Result};
use crate::wr::recv_as_driver;
use crate::{ProtectionDomain, RecvWr};
use rnic_driver::srq::Srq;
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct SrqInner {
    // Dropped before the PD.
    pub(crate) srq: Arc<Srq>,
    pd: ProtectionDomain,
}

/// What `ibv_query_srq` answers.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// let srq = ctx.alloc_pd()?.create_srq(32, 1)?;
/// let SrqAttr { max_wr, max_sge } = srq.query()?;
/// assert!(max_wr >= 32 && max_sge >= 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receives the SRQ holds.
    pub max_wr: u32,
    /// SGEs per receive.
    pub max_sge: u32,
}

/// A shared receive queue (`ibv_create_srq`): receives that any QP created with it
/// ([`crate::QueuePairBuilder::srq`]) consumes. A cheap handle (an `Arc` inside); QPs keep
/// it alive, it keeps its PD alive.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// // Two more QPs on emu1 that take their receives from one SRQ.
/// let srq = pb.create_srq(16, 1)?;
/// let q1 = pb.create_qp(QpType::Rc, &cb, &cb).srq(&srq).build()?;
/// let q2 = pb.create_qp(QpType::Rc, &cb, &cb).srq(&srq).build()?;
/// # let (p1, p2) = (pa.create_qp(QpType::Rc, &ca, &ca).build()?, pa.create_qp(QpType::Rc, &ca, &ca).build()?);
/// # connect_pair(&p1, &q1, &ConnectOptions::default())?;
/// # connect_pair(&p2, &q2, &ConnectOptions::default())?;
/// srq.post_recv(&[RecvWr::new(1, &[]), RecvWr::new(2, &[])])?;
/// p1.post_send(&[SendWr::send(0, &[])])?;
/// p2.post_send(&[SendWr::send(0, &[])])?;
/// let mut wc = [WorkCompletion::default(); 2];
/// assert_eq!(cb.poll_blocking(&mut wc, t)?, 2);
/// let qpns: std::collections::BTreeSet<u32> = wc.iter().map(|w| w.qp_num()).collect();
/// assert_eq!(qpns, [q1.qp_num(), q2.qp_num()].into()); // one receive each
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SharedReceiveQueue {
    pub(crate) inner: Arc<SrqInner>,
}

impl SharedReceiveQueue {
    pub(crate) fn create(pd: &ProtectionDomain, max_wr: u32, max_sge: u32) -> Result<Self> {
        const V: &str = "ibv_create_srq";
        let srq = Srq::create(pd.driver(), max_wr, max_sge).map_err(Error::create(V))?;
        Ok(SharedReceiveQueue {
            inner: Arc::new(SrqInner {
                srq: Arc::new(srq),
                pd: pd.clone(),
            }),
        })
    }

    /// The SRQ number.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let (s1, s2) = (pd.create_srq(8, 1)?, pd.create_srq(8, 1)?);
    /// assert_ne!(s1.srq_num(), s2.srq_num());
    /// # Ok(()) }
    /// ```
    pub fn srq_num(&self) -> u32 {
        self.inner.srq.srqn()
    }

    /// The PD.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let srq = pd.create_srq(8, 1)?;
    /// assert_eq!(srq.pd().pdn(), pd.pdn());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &ProtectionDomain {
        &self.inner.pd
    }

    /// `ibv_query_srq` (the device is asked, so a lost device shows as an error).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let srq = ctx.alloc_pd()?.create_srq(100, 3)?;
    /// let a = srq.query()?;
    /// assert!(a.max_wr >= 100, "{a:?}");
    /// assert!(a.max_sge >= 3, "{a:?}");
    /// # Ok(()) }
    /// ```
    pub fn query(&self) -> Result<SrqAttr> {
        self.inner
            .srq
            .query()
            .map_err(Error::driver("ibv_query_srq"))?;
        Ok(SrqAttr {
            max_wr: self.inner.srq.capacity(),
            max_sge: self.inner.srq.max_sge() as u32,
        })
    }

    /// `ibv_post_srq_recv`: posts receives (one doorbell record update for the list).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let (srq, buf) = (pd.create_srq(2, 1)?, pd.reg_mr(64, AccessFlags::LOCAL_WRITE)?);
    /// let sge = [buf.sge(0, 64)?];
    /// srq.post_recv(&[RecvWr::new(1, &sge)])?;
    /// // One more than fits: those before the first refused one are posted (`bad_wr`).
    /// let room = srq.query()?.max_wr as usize - 1;
    /// let err = srq.post_recv(&vec![RecvWr::new(2, &sge); room + 1]).unwrap_err();
    /// assert!(matches!(err, Error::Post { index, .. } if index == room), "{err}");
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        self.inner
            .srq
            .post_recv(recv_as_driver(wrs))
            .map_err(Error::post("ibv_post_srq_recv", self.inner.srq.srqn()))
    }

    /// `ibv_destroy_srq`: fails with [`Error::InUse`] while QPs (or clones) hold it.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let srq = pd.create_srq(8, 1)?;
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).srq(&srq).build()?;
    /// assert!(matches!(srq.clone().destroy(), Err(Error::InUse { .. }))); // the QP holds it
    /// drop(qp);
    /// srq.destroy()?;
    /// # Ok(()) }
    /// ```
    pub fn destroy(self) -> Result<()> {
        let users = Arc::strong_count(&self.inner) - 1;
        let inner = Arc::try_unwrap(self.inner).map_err(|_| Error::InUse {
            verb: "ibv_destroy_srq",
            users,
        })?;
        let srq = Arc::try_unwrap(inner.srq).map_err(|_| Error::InUse {
            verb: "ibv_destroy_srq",
            users: 1,
        })?;
        srq.destroy().map_err(Error::driver("ibv_destroy_srq"))
    }
}
