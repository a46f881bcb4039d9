//! [`ProtectionDomain`] (`struct ibv_pd`).

use crate::error::{Error, Result};
use crate::{AccessFlags, AddressHandle, AhAttr, Context, MemoryRegion, QpType};
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
    pub fn pdn(&self) -> u32 {
        self.inner.pd.pdn()
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    pub(crate) fn driver(&self) -> &Arc<Pd> {
        &self.inner.pd
    }

    /// `ibv_reg_mr` of a new, zeroed, page-aligned buffer of `len` bytes that the region owns
    /// (freed when the region is dropped). Safe: the bytes are reached only through the
    /// region's copy methods.
    pub fn reg_mr(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        MemoryRegion::alloc(self, len, access)
    }

    /// `ibv_reg_mr` of a buffer the region takes ownership of (given back by
    /// [`MemoryRegion::dereg`]). Safe for the same reason as [`ProtectionDomain::reg_mr`].
    pub fn reg_mr_from(&self, buf: Vec<u8>, access: AccessFlags) -> Result<MemoryRegion> {
        MemoryRegion::from_vec(self, buf, access)
    }

    /// `ibv_reg_mr` of memory the caller owns.
    ///
    /// # Safety
    /// See [`MemoryRegion::register_raw`].
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
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        AddressHandle::create(self, attr)
    }

    /// `ibv_create_srq`: a shared receive queue of at least `max_wr` receives of `max_sge`
    /// SGEs.
    pub fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<SharedReceiveQueue> {
        SharedReceiveQueue::create(self, max_wr, max_sge)
    }

    /// `ibv_create_qp`: a builder for a QP of type `qp_type` whose send completions go to
    /// `send_cq` and receive completions to `recv_cq` (they may be the same CQ).
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
