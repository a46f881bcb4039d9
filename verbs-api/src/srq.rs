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
#[derive(Clone, Debug)]
pub struct SharedReceiveQueue {
    pub(crate) inner: Arc<SrqInner>,
}

impl SharedReceiveQueue {
    pub(crate) fn create(pd: &ProtectionDomain, max_wr: u32, max_sge: u32) -> Result<Self> {
        if max_wr == 0 {
            return Err(Error::invalid(
                "ibv_create_srq",
                "max_wr must be at least 1",
            ));
        }
        let srq =
            Srq::create(pd.driver(), max_wr, max_sge).map_err(Error::driver("ibv_create_srq"))?;
        Ok(SharedReceiveQueue {
            inner: Arc::new(SrqInner {
                srq: Arc::new(srq),
                pd: pd.clone(),
            }),
        })
    }

    /// The SRQ number.
    pub fn srq_num(&self) -> u32 {
        self.inner.srq.srqn()
    }

    /// The PD.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.inner.pd
    }

    /// `ibv_query_srq` (the device is asked, so a lost device shows as an error).
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
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        self.inner
            .srq
            .post_recv(recv_as_driver(wrs))
            .map_err(Error::post("ibv_post_srq_recv", self.inner.srq.srqn()))
    }

    /// `ibv_destroy_srq`: fails with [`Error::InUse`] while QPs (or clones) hold it.
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
