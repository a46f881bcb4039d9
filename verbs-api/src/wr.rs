//! Work requests (`struct ibv_send_wr`, `struct ibv_recv_wr`, `struct ibv_sge`) as borrowed,
//! allocation-free builders.
//!
//! A work request borrows its scatter/gather list (and, for UD, its address handle) for as
//! long as the post call runs: the device copies what it needs into the queue, so the
//! borrows end when `post_send` / `post_recv` returns. What the SGEs *point at* (registered
//! memory) must stay registered until the completion: [`crate::MemoryRegion`]s are owned
//! values, so keep them alive (the API cannot tie a region's lifetime to the device's use
//! of it; at worst a dropped region makes the work request complete with an error, never
//! touch freed memory, because dropping deregisters and unmaps it first).
//!
//! ```
//! use rnic_verbs::{RemoteAddr, SendFlags, SendWr, Sge};
//!
//! let sgl = [Sge { addr: 0x1000, len: 64, lkey: 0x100 }];
//! let remote = RemoteAddr { addr: 0x2000, rkey: 0x200 };
//! let wrs = [
//!     SendWr::write(1, &sgl, remote),
//!     SendWr::write_with_imm(2, &sgl, remote, 0xdead_beef).signaled(),
//!     SendWr::send(3, &[]).inline(b"hello").flags(SendFlags::SIGNALED | SendFlags::SOLICITED),
//! ];
//! assert_eq!(wrs[1].wr_id(), 2);
//! assert!(wrs[2].send_flags().contains(SendFlags::SOLICITED));
//! ```
//!
//! An SGE's `lkey` names a region of the QP's protection domain (or of its SRQ's, for
//! receives from an SRQ). The device's reserved lkey (`resd_lkey`, in
//! [`Context::driver`](crate::Context::driver)'s special contexts), which addresses bus
//! addresses in any PD, is refused on every QP and SRQ this API creates: they are user
//! queues, created without the PRM's `rlky`. As with ibverbs on a user QP, the work request
//! completes with [`WcStatus::LocProtErr`](crate::WcStatus::LocProtErr) and touches no memory;
//! a receive refused so also fails the peer's SEND (it completes with
//! [`WcStatus::RemOpErr`](crate::WcStatus::RemOpErr)).
//!
//! ```
//! use rnic_verbs::*;
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Error> {
//! let (ctx_a, ctx_b) = (Context::open("emu0")?, Context::open("emu1")?);
//! let (pd_a, pd_b) = (ctx_a.alloc_pd()?, ctx_b.alloc_pd()?);
//! let (cq_a, cq_b) = (ctx_a.create_cq(16, None)?, ctx_b.create_cq(16, None)?);
//! let qp_a = pd_a.create_qp(QpType::Rc, &cq_a, &cq_a).build()?;
//! let qp_b = pd_b.create_qp(QpType::Rc, &cq_b, &cq_b).build()?;
//! connect_pair(&qp_a, &qp_b, &ConnectOptions::default())?;
//!
//! let resd = ctx_a.driver().special_contexts().resd_lkey;
//! let sgl = [Sge { addr: 0x1_0000_0000, len: 64, lkey: resd }];
//! qp_a.post_send(&[SendWr::send(1, &sgl).signaled()])?; // posting does not look at keys
//! let mut wc = [WorkCompletion::default(); 1];
//! assert_eq!(cq_a.poll_blocking(&mut wc, Duration::from_secs(10))?, 1);
//! assert_eq!(wc[0].status(), WcStatus::LocProtErr);
//! # Ok(()) }
//! ```

use crate::{AccessFlags, MemoryRegion, MemoryWindow};
use rnic_driver::wr as dwr;

pub use rnic_driver::wr::Sge;

/// Send work request flags (`enum ibv_send_flags` values; inline data is
/// [`SendWr::inline`] instead of `IBV_SEND_INLINE`): the driver's type, one definition for
/// both layers.
///
/// ```
/// use rnic_verbs::SendFlags;
///
/// let f = SendFlags::SIGNALED | SendFlags::SOLICITED;
/// assert_eq!(f.bits(), 6); // IBV_SEND_SIGNALED | IBV_SEND_SOLICITED
/// assert!(!f.contains(SendFlags::FENCE));
/// ```
pub use rnic_driver::wr::SendFlags;

/// A remote buffer: its address in the peer's region and the region's rkey
/// (`wr.rdma.remote_addr` / `rkey`, `wr.atomic.remote_addr` / `rkey`).
///
/// ```
/// use rnic_verbs::{AccessFlags, Context, RemoteAddr};
///
/// # fn main() -> Result<(), rnic_verbs::Error> {
/// let mr = Context::open("emu1")?.alloc_pd()?.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
/// // What a peer needs to WRITE into `mr` at byte 128:
/// let r: RemoteAddr = mr.remote(128);
/// assert_eq!((r.addr, r.rkey), (mr.addr() + 128, mr.rkey()));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// Address in the remote region's address space.
    pub addr: u64,
    /// The remote region's rkey.
    pub rkey: u32,
}

impl RemoteAddr {
    /// `offset` bytes further on.
    ///
    /// ```
    /// use rnic_verbs::RemoteAddr;
    ///
    /// let base = RemoteAddr { addr: 0x1000, rkey: 7 };
    /// assert_eq!(base.offset(0x20), RemoteAddr { addr: 0x1020, rkey: 7 });
    /// ```
    pub const fn offset(self, offset: u64) -> RemoteAddr {
        RemoteAddr {
            addr: self.addr.wrapping_add(offset),
            rkey: self.rkey,
        }
    }
}

/// A send work request (`struct ibv_send_wr`). Build one per opcode, then add flags:
/// `SendWr::write(id, &sgl, remote).signaled()`.
///
/// ```
/// use rnic_verbs::{SendFlags, SendWr, Sge};
///
/// let sgl = [Sge { addr: 0x1000, len: 32, lkey: 0x10 }, Sge { addr: 0x2000, len: 16, lkey: 0x10 }];
/// let wr = SendWr::send(1, &sgl).signaled().solicited();
/// assert_eq!(wr.len(), 48); // the gather list's total
/// assert_eq!(wr.send_flags(), SendFlags::SIGNALED | SendFlags::SOLICITED);
/// ```
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct SendWr<'a>(pub(crate) dwr::SendWr<'a>);

impl<'a> SendWr<'a> {
    const fn new(wr_id: u64, op: dwr::SendOp, sgl: &'a [Sge]) -> SendWr<'a> {
        SendWr(dwr::SendWr {
            wr_id,
            op,
            payload: dwr::Payload::Sgl(sgl),
            flags: dwr::SendFlags::NONE,
            ud: None,
        })
    }

    /// IBV_WR_SEND of the gather list `sgl` (RC, UC, UD).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// # let (src, dst) = (pa.reg_mr(64, AccessFlags::LOCAL_WRITE)?, pb.reg_mr(64, AccessFlags::LOCAL_WRITE)?);
    /// src.write(0, b"ping")?;
    /// qb.post_recv(&[RecvWr::new(1, &[dst.sge(0, 64)?])])?;
    /// qa.post_send(&[SendWr::send(2, &[src.sge(0, 4)?])])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(dst.to_vec(0, 4)?, b"ping");
    /// # Ok(()) }
    /// ```
    pub const fn send(wr_id: u64, sgl: &'a [Sge]) -> SendWr<'a> {
        Self::new(wr_id, dwr::SendOp::Send, sgl)
    }

    /// IBV_WR_SEND_WITH_IMM: a SEND carrying 32 bits of immediate data (`imm` as a host
    /// integer; the receiver's [`crate::WorkCompletion::imm_data`] has the same value).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send_with_imm(2, &[], 0xc0ffee)])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((wc[0].opcode(), wc[0].imm_data()), (WcOpcode::Recv, Some(0xc0ffee)));
    /// # Ok(()) }
    /// ```
    pub const fn send_with_imm(wr_id: u64, sgl: &'a [Sge], imm: u32) -> SendWr<'a> {
        Self::new(wr_id, dwr::SendOp::SendImm { imm }, sgl)
    }

    /// IBV_WR_SEND_WITH_INV: a SEND that invalidates the responder's `rkey` (RC).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// // The responder's region must allow remote invalidation (an rnic extension).
    /// let mr = pb.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_INVALIDATE)?;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send_with_inv(2, &[], mr.rkey()).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].status(), WcStatus::Success);
    /// # Ok(()) }
    /// ```
    pub const fn send_with_inv(wr_id: u64, sgl: &'a [Sge], rkey: u32) -> SendWr<'a> {
        Self::new(wr_id, dwr::SendOp::SendInv { rkey }, sgl)
    }

    /// IBV_WR_RDMA_WRITE of `sgl` to `remote` (RC, UC).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let dst = pb.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    /// qa.post_send(&[SendWr::write(1, &[], dst.remote(8)).inline(b"abc").signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((wc[0].status(), wc[0].opcode()), (WcStatus::Success, WcOpcode::RdmaWrite));
    /// assert_eq!(dst.to_vec(8, 3)?, b"abc");
    /// # Ok(()) }
    /// ```
    pub const fn write(wr_id: u64, sgl: &'a [Sge], remote: RemoteAddr) -> SendWr<'a> {
        Self::new(
            wr_id,
            dwr::SendOp::Write {
                raddr: remote.addr,
                rkey: remote.rkey,
            },
            sgl,
        )
    }

    /// IBV_WR_RDMA_WRITE_WITH_IMM: a WRITE that also consumes a receive at the responder,
    /// which completes with `imm` (RC, UC).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let dst = pb.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    /// qb.post_recv(&[RecvWr::new(9, &[])])?; // the immediate consumes a receive
    /// qa.post_send(&[SendWr::write_with_imm(1, &[], dst.remote(0), 77).inline(b"data")])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((wc[0].opcode(), wc[0].imm_data()), (WcOpcode::RecvRdmaWithImm, Some(77)));
    /// assert_eq!(dst.to_vec(0, 4)?, b"data");
    /// # Ok(()) }
    /// ```
    pub const fn write_with_imm(
        wr_id: u64,
        sgl: &'a [Sge],
        remote: RemoteAddr,
        imm: u32,
    ) -> SendWr<'a> {
        Self::new(
            wr_id,
            dwr::SendOp::WriteImm {
                raddr: remote.addr,
                rkey: remote.rkey,
                imm,
            },
            sgl,
        )
    }

    /// IBV_WR_RDMA_READ of `remote` into the scatter list `sgl` (RC).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let remote = pb.reg_mr(64, AccessFlags::REMOTE_READ)?;
    /// remote.write(0, b"far away")?;
    /// let local = pa.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// qa.post_send(&[SendWr::read(1, &[local.sge(0, 8)?], remote.remote(0)).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(local.to_vec(0, 8)?, b"far away");
    /// # Ok(()) }
    /// ```
    pub const fn read(wr_id: u64, sgl: &'a [Sge], remote: RemoteAddr) -> SendWr<'a> {
        Self::new(
            wr_id,
            dwr::SendOp::Read {
                raddr: remote.addr,
                rkey: remote.rkey,
            },
            sgl,
        )
    }

    /// IBV_WR_ATOMIC_CMP_AND_SWP on the 8 bytes at `remote` (8-byte aligned): if they equal
    /// `compare` they become `swap`; the original value lands in `local` (one 8-byte SGE).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let target = pb.reg_mr(8, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_ATOMIC)?;
    /// target.write_u64(0, 5)?;
    /// let old = pa.reg_mr(8, AccessFlags::LOCAL_WRITE)?;
    /// let sge = old.sge(0, 8)?;
    /// qa.post_send(&[SendWr::compare_swap(1, &sge, target.remote(0), 5, 9).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((wc[0].opcode(), old.read_u64(0)?, target.read_u64(0)?), (WcOpcode::CompSwap, 5, 9));
    /// # Ok(()) }
    /// ```
    pub const fn compare_swap(
        wr_id: u64,
        local: &'a Sge,
        remote: RemoteAddr,
        compare: u64,
        swap: u64,
    ) -> SendWr<'a> {
        Self::new(
            wr_id,
            dwr::SendOp::CmpSwap {
                raddr: remote.addr,
                rkey: remote.rkey,
                compare,
                swap,
            },
            std::slice::from_ref(local),
        )
    }

    /// IBV_WR_ATOMIC_FETCH_AND_ADD: adds `add` to the 8 bytes at `remote`; the original value
    /// lands in `local` (one 8-byte SGE).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let counter = pb.reg_mr(8, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_ATOMIC)?;
    /// counter.write_u64(0, 40)?;
    /// let old = pa.reg_mr(8, AccessFlags::LOCAL_WRITE)?;
    /// let sge = old.sge(0, 8)?;
    /// qa.post_send(&[SendWr::fetch_add(1, &sge, counter.remote(0), 2).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((old.read_u64(0)?, counter.read_u64(0)?), (40, 42));
    /// # Ok(()) }
    /// ```
    pub const fn fetch_add(wr_id: u64, local: &'a Sge, remote: RemoteAddr, add: u64) -> SendWr<'a> {
        Self::new(
            wr_id,
            dwr::SendOp::FetchAdd {
                raddr: remote.addr,
                rkey: remote.rkey,
                add,
            },
            std::slice::from_ref(local),
        )
    }

    /// IBV_WR_BIND_MW (RC, UC): binds `mw` (type 2: to the posting QP) as key `rkey` (the
    /// variant byte counts; [`MemoryWindow::next_rkey`] gives one) to `len` bytes at `offset`
    /// of `mr`, granting `access` (remote read, write, atomic). The region must have been
    /// registered with [`AccessFlags::MW_BIND`]; beyond the region, or remote write / atomic
    /// over a region without local write, the bind completes with `MwBindErr`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let mr = pb.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)?;
    /// mr.write(0, b"window")?;
    /// let mw = pb.alloc_mw(MwType::Two)?;
    /// let rkey = mw.next_rkey();
    /// qb.post_send(&[SendWr::bind_mw(1, &mw, rkey, &mr, 0, 64, AccessFlags::REMOTE_READ).signaled()])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((wc[0].status(), wc[0].opcode()), (WcStatus::Success, WcOpcode::BindMw));
    /// mw.set_rkey(rkey);
    /// let local = pa.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// qa.post_send(&[SendWr::read(2, &[local.sge(0, 6)?], RemoteAddr { addr: mr.addr(), rkey }).signaled()])?;
    /// assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(local.to_vec(0, 6)?, b"window");
    /// # Ok(()) }
    /// ```
    pub fn bind_mw(
        wr_id: u64,
        mw: &MemoryWindow,
        rkey: u32,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        access: AccessFlags,
    ) -> SendWr<'a> {
        let bind = mw.bind_info(rkey, mr, offset, len, access);
        Self::new(wr_id, dwr::SendOp::BindMw(bind), &[])
    }

    /// IBV_WR_LOCAL_INV (RC, UC): frees the type-2 window `rkey` bound to this QP; peers'
    /// accesses with that key fail from then on.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let mr = pb.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)?;
    /// let mw = pb.alloc_mw(MwType::Two)?;
    /// let rkey = mw.next_rkey();
    /// qb.post_send(&[
    ///     SendWr::bind_mw(1, &mw, rkey, &mr, 0, 64, AccessFlags::REMOTE_WRITE),
    ///     SendWr::local_inv(2, rkey).signaled(),
    /// ])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!((wc[0].status(), wc[0].opcode()), (WcStatus::Success, WcOpcode::LocalInv));
    /// # Ok(()) }
    /// ```
    pub const fn local_inv(wr_id: u64, rkey: u32) -> SendWr<'a> {
        Self::new(wr_id, dwr::SendOp::LocalInv { rkey }, &[])
    }

    /// Sends `data` inline (copied into the work queue entry at post time: no lkey needed,
    /// the buffer can be reused as soon as the post returns) instead of the gather list.
    /// SEND and WRITE flavours only; at most the QP's `max_inline_data` bytes.
    ///
    /// ```
    /// use rnic_verbs::SendWr;
    ///
    /// let msg = *b"no lkey needed";
    /// let wr = SendWr::send(1, &[]).inline(&msg);
    /// assert_eq!(wr.len(), 14);
    /// ```
    pub const fn inline(mut self, data: &'a [u8]) -> SendWr<'a> {
        self.0.payload = dwr::Payload::Inline(data);
        self
    }

    /// Sets the flags (replacing those set before).
    ///
    /// ```
    /// use rnic_verbs::{SendFlags, SendWr};
    ///
    /// let wr = SendWr::send(1, &[]).signaled().flags(SendFlags::FENCE);
    /// assert_eq!(wr.send_flags(), SendFlags::FENCE); // replaced, not added
    /// ```
    pub fn flags(mut self, flags: SendFlags) -> SendWr<'a> {
        self.0.flags = flags;
        self
    }

    /// Adds [`SendFlags::SIGNALED`].
    ///
    /// ```
    /// use rnic_verbs::{SendFlags, SendWr};
    ///
    /// assert!(SendWr::send(1, &[]).signaled().send_flags().contains(SendFlags::SIGNALED));
    /// ```
    pub fn signaled(mut self) -> SendWr<'a> {
        self.0.flags |= dwr::SendFlags::SIGNALED;
        self
    }

    /// Adds [`SendFlags::FENCE`].
    ///
    /// ```
    /// use rnic_verbs::{SendFlags, SendWr};
    ///
    /// // Wait for an earlier READ before this SEND (e.g. a READ then a SEND that reports it).
    /// let wr = SendWr::send(2, &[]).fence().signaled();
    /// assert_eq!(wr.send_flags(), SendFlags::FENCE | SendFlags::SIGNALED);
    /// ```
    pub fn fence(mut self) -> SendWr<'a> {
        self.0.flags |= dwr::SendFlags::FENCE;
        self
    }

    /// Adds [`SendFlags::SOLICITED`].
    ///
    /// ```
    /// use rnic_verbs::{SendFlags, SendWr};
    ///
    /// assert_eq!(SendWr::send(1, &[]).solicited().send_flags(), SendFlags::SOLICITED);
    /// ```
    pub fn solicited(mut self) -> SendWr<'a> {
        self.0.flags |= dwr::SendFlags::SOLICITED;
        self
    }

    /// The UD destination (`wr.ud`): address handle, remote QPN and remote Q_Key. Required
    /// on UD QPs, ignored on connected ones.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// # let (ua, ub) = (pa.create_qp(QpType::Ud, &ca, &ca).build()?, pb.create_qp(QpType::Ud, &cb, &cb).build()?);
    /// # connect_pair(&ua, &ub, &ConnectOptions::default())?;
    /// let ah = pa.create_ah(&AhAttr::new(b.query_gid(1, 1)?, 1))?;
    /// let buf = pb.reg_mr(128, AccessFlags::LOCAL_WRITE)?;
    /// ub.post_recv(&[RecvWr::new(1, &[buf.sge(0, 128)?])])?;
    /// ua.post_send(&[SendWr::send(1, &[]).inline(b"hi").ud(&ah, ub.qp_num(), DEFAULT_QKEY)])?;
    /// let mut wc = [WorkCompletion::default(); 1];
    /// assert_eq!(cb.poll_blocking(&mut wc, t)?, 1);
    /// assert_eq!(wc[0].byte_len(), 40 + 2); // the GRH area, then the payload
    /// assert_eq!(buf.to_vec(40, 2)?, b"hi");
    /// # Ok(()) }
    /// ```
    pub fn ud(
        mut self,
        ah: &'a crate::AddressHandle,
        remote_qpn: u32,
        remote_qkey: u32,
    ) -> SendWr<'a> {
        self.0.ud = Some(dwr::UdDest {
            ah: ah.driver(),
            remote_qpn,
            remote_qkey,
        });
        self
    }

    /// The wr_id.
    ///
    /// ```
    /// assert_eq!(rnic_verbs::SendWr::send(42, &[]).wr_id(), 42);
    /// ```
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// The flags.
    ///
    /// ```
    /// use rnic_verbs::{SendFlags, SendWr};
    ///
    /// assert_eq!(SendWr::send(1, &[]).send_flags(), SendFlags::empty()); // unsignaled by default
    /// ```
    pub fn send_flags(&self) -> SendFlags {
        self.0.flags
    }

    /// Bytes of local data (gather list or inline).
    ///
    /// ```
    /// use rnic_verbs::{SendWr, Sge};
    ///
    /// let sgl = [Sge { addr: 0x1000, len: 100, lkey: 1 }, Sge { addr: 0x3000, len: 28, lkey: 1 }];
    /// assert_eq!(SendWr::send(1, &sgl).len(), 128);
    /// ```
    pub fn len(&self) -> u64 {
        self.0.payload.len()
    }

    /// Whether there is no local data.
    ///
    /// ```
    /// use rnic_verbs::SendWr;
    ///
    /// assert!(SendWr::send(1, &[]).is_empty()); // a zero-byte SEND is valid
    /// assert!(!SendWr::send(1, &[]).inline(b"x").is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.payload.is_empty()
    }
}

/// A receive work request (`struct ibv_recv_wr`): where an incoming SEND (or the immediate of
/// a WRITE with immediate) lands. UD receives get the 40-byte GRH area first.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// let buf = pb.reg_mr(256, AccessFlags::LOCAL_WRITE)?;
/// // Two receives, one doorbell; each SEND consumes the next.
/// let (lo, hi) = (buf.sge(0, 128)?, buf.sge(128, 128)?);
/// qb.post_recv(&[RecvWr::new(1, std::slice::from_ref(&lo)), RecvWr::new(2, std::slice::from_ref(&hi))])?;
/// qa.post_send(&[SendWr::send(1, &[]).inline(b"a"), SendWr::send(2, &[]).inline(b"b")])?;
/// let mut wc = [WorkCompletion::default(); 2];
/// assert_eq!(cb.poll_blocking(&mut wc, t)?, 2);
/// assert_eq!((wc[0].wr_id(), wc[1].wr_id()), (1, 2));
/// assert_eq!(buf.to_vec(128, 1)?, b"b");
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct RecvWr<'a>(pub(crate) dwr::RecvWr<'a>);

impl<'a> RecvWr<'a> {
    /// A receive of up to the total length of `sgl`.
    ///
    /// ```
    /// use rnic_verbs::{RecvWr, Sge};
    ///
    /// let sgl = [Sge { addr: 0x1000, len: 4096, lkey: 0x42 }];
    /// let wr = RecvWr::new(7, &sgl);
    /// assert_eq!(wr.wr_id(), 7);
    /// ```
    pub const fn new(wr_id: u64, sgl: &'a [Sge]) -> RecvWr<'a> {
        RecvWr(dwr::RecvWr { wr_id, sgl })
    }

    /// The wr_id.
    ///
    /// ```
    /// assert_eq!(rnic_verbs::RecvWr::new(3, &[]).wr_id(), 3);
    /// ```
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }
}

#[inline(always)]
pub(crate) fn send_as_driver<'a, 'b>(wrs: &'b [SendWr<'a>]) -> &'b [dwr::SendWr<'a>] {
    // SAFETY: `SendWr` is `repr(transparent)` over `dwr::SendWr`: same layout and validity.
    unsafe { std::slice::from_raw_parts(wrs.as_ptr().cast(), wrs.len()) }
}

#[inline(always)]
pub(crate) fn recv_as_driver<'a, 'b>(wrs: &'b [RecvWr<'a>]) -> &'b [dwr::RecvWr<'a>] {
    // SAFETY: `RecvWr` is `repr(transparent)` over `dwr::RecvWr`: same layout and validity.
    unsafe { std::slice::from_raw_parts(wrs.as_ptr().cast(), wrs.len()) }
}
