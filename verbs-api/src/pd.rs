//! [`ProtectionDomain`] (`struct ibv_pd`).

use crate::error::{Error, Result};
use crate::{
    AccessFlags, AddressHandle, AhAttr, Context, MemoryRegion, MemoryWindow, MwType, QpType,
};
use crate::{CompletionQueue, QueuePairBuilder, SharedReceiveQueue};
use rnic_driver::pd::Pd;
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct PdInner {
    // Dropped before the context.
    pub(crate) pd: Arc<Pd>,
    pub(crate) ctx: Context,
}

/// A protection domain (`ibv_alloc_pd`): a cheap handle (an `Arc` inside). Memory regions,
/// QPs, SRQs and address handles keep it alive; it keeps its [`Context`] open, and is
/// deallocated when the last handle goes.
///
/// ```
/// use rnic_verbs::{AccessFlags, Context, Error};
///
/// # fn main() -> Result<(), Error> {
/// let pd = Context::open("emu0")?.alloc_pd()?;
/// let mr = pd.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
/// // While the region (or another handle) holds the PD, deallocating is refused...
/// assert!(matches!(pd.clone().dealloc(), Err(Error::InUse { .. })));
/// drop(mr);
/// pd.dealloc()?; // ...and succeeds once the users are gone.
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

impl ProtectionDomain {
    pub(crate) fn alloc(ctx: &Context) -> Result<ProtectionDomain> {
        let pd = Pd::alloc(ctx.hca()).map_err(Error::driver("ibv_alloc_pd"))?;
        Ok(ProtectionDomain {
            inner: Arc::new(PdInner {
                pd: Arc::new(pd),
                ctx: ctx.clone(),
            }),
        })
    }

    /// The PD number.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let (pd1, pd2) = (ctx.alloc_pd()?, ctx.alloc_pd()?);
    /// assert_ne!(pd1.pdn(), pd2.pdn());
    /// # Ok(()) }
    /// ```
    pub fn pdn(&self) -> u32 {
        self.inner.pd.pdn()
    }

    /// The context.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// assert!(pd.context().same_device(&ctx));
    /// # Ok(()) }
    /// ```
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    pub(crate) fn driver(&self) -> &Arc<Pd> {
        &self.inner.pd
    }

    /// `ibv_reg_mr` of a new, zeroed, page-aligned buffer of `len` bytes that the region owns
    /// (freed when the region is dropped). Safe: the bytes are reached only through the
    /// region's copy methods.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)?;
    /// assert_eq!(mr.to_vec(0, 4)?, [0; 4]); // zeroed
    /// // Remote write without local write is refused, as by ibverbs.
    /// assert!(pd.reg_mr(64, AccessFlags::REMOTE_WRITE).is_err());
    /// # Ok(()) }
    /// ```
    pub fn reg_mr(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        MemoryRegion::alloc(self, len, access)
    }

    /// `ibv_alloc_mw`: a window of `mw_type` in this PD, bound to nothing yet.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let ctx = Context::open("emu0")?;
    /// assert!(ctx.query_device().max_mw > 0);
    /// let mw = ctx.alloc_pd()?.alloc_mw(MwType::Two)?;
    /// assert_eq!(mw.mw_type(), MwType::Two);
    /// # Ok(()) }
    /// ```
    pub fn alloc_mw(&self, mw_type: MwType) -> Result<MemoryWindow> {
        MemoryWindow::alloc(self, mw_type)
    }

    /// `ibv_reg_mr` of a buffer the region takes ownership of (given back by
    /// [`MemoryRegion::dereg`]). Safe for the same reason as [`ProtectionDomain::reg_mr`].
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let mr = pd.reg_mr_from(b"payload".to_vec(), AccessFlags::LOCAL_WRITE)?;
    /// assert_eq!((mr.len(), mr.to_vec(0, 7)?), (7, b"payload".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn reg_mr_from(&self, buf: Vec<u8>, access: AccessFlags) -> Result<MemoryRegion> {
        MemoryRegion::from_vec(self, buf, access)
    }

    /// `ibv_reg_mr` of memory the caller owns.
    ///
    /// # Safety
    /// See [`MemoryRegion::register_raw`].
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let mut page = Box::new([0u8; 4096]);
    /// let p = page.as_mut_ptr();
    /// // SAFETY: `page` outlives `mr` (dropped first, below) and is not used while it exists.
    /// let mr = unsafe { pd.reg_mr_raw(p, 4096, AccessFlags::LOCAL_WRITE)? };
    /// mr.write(0, &[1, 2, 3])?;
    /// drop(mr);
    /// assert_eq!(page[..3], [1, 2, 3]);
    /// # Ok(()) }
    /// ```
    pub unsafe fn reg_mr_raw(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { MemoryRegion::register_raw(self, addr, len, access) }
    }

    /// `ibv_create_ah`: a UD address handle.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let peer = Gid::from_ipv4(std::net::Ipv4Addr::new(192, 0, 2, 2)); // emu1
    /// let ah = pd.create_ah(&AhAttr::new(peer, 1))?;
    /// assert_eq!(ah.dmac(), emulated_mac(std::net::Ipv4Addr::new(192, 0, 2, 2)));
    /// // A source GID index the table does not have is refused.
    /// assert!(pd.create_ah(&AhAttr::new(peer, 9)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        AddressHandle::create(self, attr)
    }

    /// `ibv_create_srq`: a shared receive queue of at least `max_wr` receives of `max_sge`
    /// SGEs.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let srq = ctx.alloc_pd()?.create_srq(100, 2)?;
    /// let attr = srq.query()?;
    /// assert!(attr.max_wr >= 100 && attr.max_sge >= 2);
    /// # Ok(()) }
    /// ```
    pub fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<SharedReceiveQueue> {
        SharedReceiveQueue::create(self, max_wr, max_sge)
    }

    /// `ibv_create_qp`: a builder for a QP of type `qp_type` whose send completions go to
    /// `send_cq` and receive completions to `recv_cq` (they may be the same CQ).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let (pd, send_cq, recv_cq) = (ctx.alloc_pd()?, ctx.create_cq(32, None)?, ctx.create_cq(32, None)?);
    /// let qp = pd.create_qp(QpType::Uc, &send_cq, &recv_cq).build()?;
    /// assert_eq!((qp.qp_type(), qp.state()), (QpType::Uc, QpState::Reset));
    /// assert_eq!(qp.recv_cq().cqn(), recv_cq.cqn());
    /// # Ok(()) }
    /// ```
    pub fn create_qp(
        &self,
        qp_type: QpType,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
    ) -> QueuePairBuilder {
        QueuePairBuilder::new(self, qp_type, send_cq, recv_cq)
    }

    /// `ibv_dealloc_pd`: fails with [`Error::InUse`] while other handles (regions, QPs,
    /// clones) hold the PD; they keep it alive otherwise, so dropping is always safe.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let cq = ctx.create_cq(8, None)?;
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// let err = pd.clone().dealloc().unwrap_err();
    /// assert!(matches!(err, Error::InUse { verb: "ibv_dealloc_pd", .. }));
    /// drop(qp);
    /// pd.dealloc()?;
    /// # Ok(()) }
    /// ```
    pub fn dealloc(self) -> Result<()> {
        let users = Arc::strong_count(&self.inner) - 1;
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => match Arc::try_unwrap(inner.pd) {
                Ok(pd) => pd.destroy().map_err(Error::driver("ibv_dealloc_pd")),
                Err(_) => Err(Error::InUse {
                    verb: "ibv_dealloc_pd",
                    users: 1,
                }),
            },
            Err(_) => Err(Error::InUse {
                verb: "ibv_dealloc_pd",
                users,
            }),
        }
    }
}
