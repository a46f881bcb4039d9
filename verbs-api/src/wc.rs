//! Work completions (`struct ibv_wc`): status, opcode and flags with ibverbs' names and
//! numeric values.

use rnic_driver::wr as dwr;
use std::fmt;

/// Work completion status: `enum ibv_wc_status`, same names (`IBV_WC_*`) and values (the
/// driver's type).
///
/// ```
/// use rnic_verbs::WcStatus;
///
/// assert_eq!(WcStatus::RemAccessErr as u32, 10);
/// assert_eq!(WcStatus::RemAccessErr.name(), "IBV_WC_REM_ACCESS_ERR");
/// assert_eq!(WcStatus::RemAccessErr.to_string(), "remote access error"); // ibv_wc_status_str
/// assert_eq!(WcStatus::from_u32(5), Some(WcStatus::WrFlushErr));
/// ```
pub use rnic_driver::wr::WcStatus;

/// Work completion opcode (`enum ibv_wc_opcode`, same values, with the C name): the
/// driver's type, one definition for both layers.
///
/// ```
/// use rnic_verbs::WcOpcode;
///
/// assert_ne!(WcOpcode::Send, WcOpcode::Recv);
/// assert_eq!(WcOpcode::Send.name(), "IBV_WC_SEND");
/// ```
pub use rnic_driver::wr::WcOpcode;

/// Work completion flags (`enum ibv_wc_flags` values): the driver's type, one definition
/// for both layers.
///
/// ```
/// use rnic_verbs::WcFlags;
///
/// let f = WcFlags::GRH | WcFlags::WITH_IMM;
/// assert_eq!(f.bits(), 3); // the C values
/// assert!(!f.contains(WcFlags::WITH_INV));
/// ```
pub use rnic_driver::wr::WcFlags;

/// A work completion (`struct ibv_wc`), filled by [`crate::CompletionQueue::poll`].
///
/// Plain data (`Copy`); a slice of them is what a poll fills, without allocation:
///
/// ```
/// use rnic_verbs::{WcStatus, WorkCompletion};
///
/// let wcs = [WorkCompletion::default(); 16];
/// assert_eq!(wcs[0].status(), WcStatus::Success);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct WorkCompletion(pub(crate) dwr::WorkCompletion);

impl WorkCompletion {
    /// `wr_id` of the work request.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// # qb.post_recv(&[RecvWr::new(9, &[])])?;
    /// qa.post_send(&[SendWr::send(0xfeed, &[]).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].wr_id(), 0xfeed); // the sender's own tag comes back
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// `status`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// // A WRITE to an rkey the peer never handed out.
    /// let bogus = RemoteAddr { addr: 0x1000, rkey: 0xdead };
    /// qa.post_send(&[SendWr::write(1, &[], bogus).inline(b"x").signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].status(), WcStatus::RemAccessErr);
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn status(&self) -> WcStatus {
        self.0.status
    }

    /// Whether `status` is [`WcStatus::Success`].
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// # let mut wc = [WorkCompletion::default(); 1];
    /// # qb.post_recv(&[RecvWr::new(3, &[])])?;
    /// qa.post_send(&[SendWr::send(3, &[]).signaled()])?;
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert!(wc[0].is_success());
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn is_success(&self) -> bool {
        self.0.status == WcStatus::Success
    }

    /// `opcode` (for an error, the posted operation, or [`WcOpcode::Recv`]; ibverbs leaves it
    /// undefined then).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// # let mr = pb.reg_mr(8, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)?;
    /// # let local = pa.reg_mr(8, AccessFlags::LOCAL_WRITE)?;
    /// qa.post_send(&[SendWr::read(4, &[local.sge(0, 8)?], mr.remote(0)).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].opcode(), WcOpcode::RdmaRead);
    /// assert_eq!(wc[0].byte_len(), 8);
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn opcode(&self) -> WcOpcode {
        self.0.opcode
    }

    /// `vendor_err`: the device's syndrome of an error completion.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qb.post_recv(&[RecvWr::new(5, &[])])?;
    /// qb.to_error()?; // flushes the receive
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].status(), WcStatus::WrFlushErr);
    /// assert_eq!(wc[0].vendor_err(), 0xf9); // ConnectX's flush syndrome
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn vendor_err(&self) -> u32 {
        u32::from(self.0.vendor_err)
    }

    /// `byte_len`: bytes received (responder; UD includes the 40-byte GRH area), read (READ;
    /// 8 for atomics) or sent.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let buf = pb.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// qb.post_recv(&[RecvWr::new(1, &[buf.sge(0, 64)?])])?;
    /// qa.post_send(&[SendWr::send(1, &[]).inline(b"twelve bytes")])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((wc[0].opcode(), wc[0].byte_len()), (WcOpcode::Recv, 12));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }

    /// `imm_data` as a host integer (the big-endian value the sender posted), valid with
    /// [`WcFlags::WITH_IMM`].
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send_with_imm(1, &[], 0x1234_5678)])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].imm_data(), Some(0x1234_5678));
    /// assert!(wc[0].wc_flags().contains(WcFlags::WITH_IMM));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn imm_data(&self) -> Option<u32> {
        self.wc_flags()
            .contains(WcFlags::WITH_IMM)
            .then_some(self.0.imm)
    }

    /// The rkey a SEND with invalidate named, valid with [`WcFlags::WITH_INV`].
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let target = pb.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_INVALIDATE)?;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send_with_inv(1, &[], target.rkey())])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].invalidated_rkey(), Some(target.rkey()));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.wc_flags()
            .contains(WcFlags::WITH_INV)
            .then_some(self.0.invalidated_rkey)
    }

    /// `qp_num`: the local QP.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send(2, &[]).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].qp_num(), qb.qp_num()); // the receiving QP
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }

    /// `src_qp`: the sending QP (UD receives).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// # let (ua, ub) = (pa.create_qp(QpType::Ud, &ca, &ca).build()?, pb.create_qp(QpType::Ud, &cb, &cb).build()?);
    /// # connect_pair(&ua, &ub, &ConnectOptions::default())?;
    /// let ah = pa.create_ah(&AhAttr::new(b.query_gid(1, 1)?, 1))?;
    /// let buf = pb.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// ub.post_recv(&[RecvWr::new(1, &[buf.sge(0, 64)?])])?;
    /// ua.post_send(&[SendWr::send(1, &[]).inline(b"dgram").ud(&ah, ub.qp_num(), DEFAULT_QKEY)])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].src_qp(), ua.qp_num()); // who sent the datagram
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }

    /// `wc_flags`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send(1, &[])])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].wc_flags(), WcFlags::empty()); // no immediate, no invalidation
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn wc_flags(&self) -> WcFlags {
        self.0.flags
    }
}

impl fmt::Debug for WorkCompletion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkCompletion")
            .field("wr_id", &self.wr_id())
            .field("status", &self.status())
            .field("opcode", &self.opcode())
            .field("vendor_err", &self.vendor_err())
            .field("byte_len", &self.byte_len())
            .field("imm_data", &self.imm_data())
            .field("qp_num", &self.qp_num())
            .field("src_qp", &self.src_qp())
            .field("wc_flags", &self.wc_flags())
            .finish()
    }
}

/// Views a slice of completions as the driver's (the same layout: `repr(transparent)`).
#[inline(always)]
pub(crate) fn as_driver_mut(wc: &mut [WorkCompletion]) -> &mut [dwr::WorkCompletion] {
    // SAFETY: `WorkCompletion` is `repr(transparent)` over `dwr::WorkCompletion`, so the
    // slices have the same layout, length and validity; the borrow is carried over.
    unsafe { std::slice::from_raw_parts_mut(wc.as_mut_ptr().cast(), wc.len()) }
}
