//! [`MemoryWindow`] (`struct ibv_mw`) and [`MwType`] (`enum ibv_mw_type`).

use crate::error::{Error, Result};
use crate::{AccessFlags, MemoryRegion, ProtectionDomain};
use rnic_driver::mw::Mw;
use rnic_driver::wr as dwr;
use std::sync::atomic::{AtomicU32, Ordering};

pub use rnic_driver::wr::MwType;

/// A memory window (`ibv_alloc_mw`): remote access to part of a region, granted by a bind
/// and revoked by a rebind, LOCAL_INV or a peer's SEND_WITH_INV (type 2). It grants nothing
/// until bound; it keeps its PD alive.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// let mr = pb.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)?;
/// let mw = pb.alloc_mw(MwType::One)?;
/// // Grant the peer remote write to 64 bytes at offset 128.
/// let rkey = qb.bind_mw(7, &mw, &mr, 128, 64, AccessFlags::REMOTE_WRITE)?;
/// let mut wc = [WorkCompletion::default(); 1];
/// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
/// assert_eq!((wc[0].status(), wc[0].opcode()), (WcStatus::Success, WcOpcode::BindMw));
/// qa.post_send(&[SendWr::write(1, &[], RemoteAddr { addr: mr.addr() + 128, rkey }).inline(b"hi").signaled()])?;
/// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
/// assert_eq!(wc[0].status(), WcStatus::Success);
/// assert_eq!(mr.to_vec(128, 2)?, b"hi");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MemoryWindow {
    mw: Mw,
    rkey: AtomicU32,
    pd: ProtectionDomain,
}

impl MemoryWindow {
    pub(crate) fn alloc(pd: &ProtectionDomain, mw_type: MwType) -> Result<MemoryWindow> {
        let mw = Mw::alloc(pd.driver(), mw_type).map_err(Error::driver("ibv_alloc_mw"))?;
        Ok(MemoryWindow {
            rkey: AtomicU32::new(mw.rkey()),
            mw,
            pd: pd.clone(),
        })
    }

    /// The window's rkey: as allocated, then as [`crate::QueuePair::bind_mw`] or
    /// [`MemoryWindow::set_rkey`] last set it.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let pd = Context::open("emu0")?.alloc_pd()?;
    /// let (a, b) = (pd.alloc_mw(MwType::Two)?, pd.alloc_mw(MwType::Two)?);
    /// assert_ne!(a.rkey() >> 8, b.rkey() >> 8);
    /// # Ok(()) }
    /// ```
    pub fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Relaxed)
    }

    /// The key to bind the window with next (`ibv_inc_rkey`: the same index, the next
    /// variant byte).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let mw = Context::open("emu0")?.alloc_pd()?.alloc_mw(MwType::Two)?;
    /// assert_eq!(mw.next_rkey() >> 8, mw.rkey() >> 8);
    /// assert_ne!(mw.next_rkey(), mw.rkey());
    /// # Ok(()) }
    /// ```
    pub fn next_rkey(&self) -> u32 {
        let k = self.rkey();
        let v = (k as u8).wrapping_add(1).max(1);
        (k & !0xFF) | u32::from(v)
    }

    /// Records the key a type-2 bind posted with [`crate::SendWr::bind_mw`] gave the
    /// window (ibverbs leaves that bookkeeping to the application too).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let mw = Context::open("emu0")?.alloc_pd()?.alloc_mw(MwType::Two)?;
    /// let k = mw.next_rkey();
    /// mw.set_rkey(k);
    /// assert_eq!(mw.rkey(), k);
    /// # Ok(()) }
    /// ```
    pub fn set_rkey(&self, rkey: u32) {
        let k = (self.rkey() & !0xFF) | (rkey & 0xFF);
        self.rkey.store(k, Ordering::Relaxed);
    }

    /// The window's type.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let mw = Context::open("emu0")?.alloc_pd()?.alloc_mw(MwType::One)?;
    /// assert_eq!(mw.mw_type(), MwType::One);
    /// # Ok(()) }
    /// ```
    pub fn mw_type(&self) -> MwType {
        self.mw.mw_type()
    }

    /// The window's protection domain.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let pd = Context::open("emu0")?.alloc_pd()?;
    /// let mw = pd.alloc_mw(MwType::One)?;
    /// assert_eq!(mw.pd().pdn(), pd.pdn());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    /// `ibv_dealloc_mw`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let mw = Context::open("emu0")?.alloc_pd()?.alloc_mw(MwType::Two)?;
    /// mw.dealloc()?;
    /// # Ok(()) }
    /// ```
    pub fn dealloc(self) -> Result<()> {
        self.mw.destroy().map_err(Error::driver("ibv_dealloc_mw"))
    }

    /// The driver's bind request for `len` bytes at `offset` of `mr`, to key `rkey`.
    pub(crate) fn bind_info(
        &self,
        rkey: u32,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        access: AccessFlags,
    ) -> dwr::MwBind {
        dwr::MwBind {
            mw_type: self.mw_type(),
            mw_rkey: self.rkey(),
            rkey: (self.rkey() & !0xFF) | (rkey & 0xFF),
            mr_lkey: mr.lkey(),
            mr_access: mr.access(),
            addr: mr.addr().wrapping_add(offset),
            len,
            access,
        }
    }
}
