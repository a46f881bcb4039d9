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

use rnic_driver::wr as dwr;

pub use rnic_driver::wr::Sge;

bitflags::bitflags! {
    /// Send work request flags (`enum ibv_send_flags` values; inline data is
    /// [`SendWr::inline`] instead of `IBV_SEND_INLINE`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct SendFlags: u32 {
        /// IBV_SEND_FENCE: wait for earlier RDMA READs and atomics first.
        const FENCE = 1;
        /// IBV_SEND_SIGNALED: generate a completion.
        const SIGNALED = 2;
        /// IBV_SEND_SOLICITED: raise a solicited event at the responder.
        const SOLICITED = 4;
    }
}

impl SendFlags {
    fn to_driver(self) -> dwr::SendFlags {
        let mut f = dwr::SendFlags::NONE;
        if self.contains(SendFlags::FENCE) {
            f = f | dwr::SendFlags::FENCE;
        }
        if self.contains(SendFlags::SIGNALED) {
            f = f | dwr::SendFlags::SIGNALED;
        }
        if self.contains(SendFlags::SOLICITED) {
            f = f | dwr::SendFlags::SOLICITED;
        }
        f
    }

    fn from_driver(f: dwr::SendFlags) -> SendFlags {
        let mut s = SendFlags::empty();
        if f.contains(dwr::SendFlags::FENCE) {
            s |= SendFlags::FENCE;
        }
        if f.contains(dwr::SendFlags::SIGNALED) {
            s |= SendFlags::SIGNALED;
        }
        if f.contains(dwr::SendFlags::SOLICITED) {
            s |= SendFlags::SOLICITED;
        }
        s
    }
}

/// A remote buffer: its address in the peer's region and the region's rkey
/// (`wr.rdma.remote_addr` / `rkey`, `wr.atomic.remote_addr` / `rkey`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// Address in the remote region's address space.
    pub addr: u64,
    /// The remote region's rkey.
    pub rkey: u32,
}

impl RemoteAddr {
    /// `offset` bytes further on.
    pub const fn offset(self, offset: u64) -> RemoteAddr {
        RemoteAddr {
            addr: self.addr.wrapping_add(offset),
            rkey: self.rkey,
        }
    }
}

/// A send work request (`struct ibv_send_wr`). Build one per opcode, then add flags:
/// `SendWr::write(id, &sgl, remote).signaled()`.
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
    pub const fn send(wr_id: u64, sgl: &'a [Sge]) -> SendWr<'a> {
        Self::new(wr_id, dwr::SendOp::Send, sgl)
    }

    /// IBV_WR_SEND_WITH_IMM: a SEND carrying 32 bits of immediate data (`imm` as a host
    /// integer; the receiver's [`crate::WorkCompletion::imm_data`] has the same value).
    pub const fn send_with_imm(wr_id: u64, sgl: &'a [Sge], imm: u32) -> SendWr<'a> {
        Self::new(wr_id, dwr::SendOp::SendImm { imm }, sgl)
    }

    /// IBV_WR_SEND_WITH_INV: a SEND that invalidates the responder's `rkey` (RC).
    pub const fn send_with_inv(wr_id: u64, sgl: &'a [Sge], rkey: u32) -> SendWr<'a> {
        Self::new(wr_id, dwr::SendOp::SendInv { rkey }, sgl)
    }

    /// IBV_WR_RDMA_WRITE of `sgl` to `remote` (RC, UC).
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

    /// Sends `data` inline (copied into the work queue entry at post time: no lkey needed,
    /// the buffer can be reused as soon as the post returns) instead of the gather list.
    /// SEND and WRITE flavours only; at most the QP's `max_inline_data` bytes.
    pub const fn inline(mut self, data: &'a [u8]) -> SendWr<'a> {
        self.0.payload = dwr::Payload::Inline(data);
        self
    }

    /// Sets the flags (replacing those set before).
    pub fn flags(mut self, flags: SendFlags) -> SendWr<'a> {
        self.0.flags = flags.to_driver();
        self
    }

    /// Adds [`SendFlags::SIGNALED`].
    pub fn signaled(mut self) -> SendWr<'a> {
        self.0.flags = self.0.flags | dwr::SendFlags::SIGNALED;
        self
    }

    /// Adds [`SendFlags::FENCE`].
    pub fn fence(mut self) -> SendWr<'a> {
        self.0.flags = self.0.flags | dwr::SendFlags::FENCE;
        self
    }

    /// Adds [`SendFlags::SOLICITED`].
    pub fn solicited(mut self) -> SendWr<'a> {
        self.0.flags = self.0.flags | dwr::SendFlags::SOLICITED;
        self
    }

    /// The UD destination (`wr.ud`): address handle, remote QPN and remote Q_Key. Required
    /// on UD QPs, ignored on connected ones.
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
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// The flags.
    pub fn send_flags(&self) -> SendFlags {
        SendFlags::from_driver(self.0.flags)
    }

    /// Bytes of local data (gather list or inline).
    pub fn len(&self) -> u64 {
        self.0.payload.len()
    }

    /// Whether there is no local data.
    pub fn is_empty(&self) -> bool {
        self.0.payload.is_empty()
    }
}

/// A receive work request (`struct ibv_recv_wr`): where an incoming SEND (or the immediate of
/// a WRITE with immediate) lands. UD receives get the 40-byte GRH area first.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct RecvWr<'a>(pub(crate) dwr::RecvWr<'a>);

impl<'a> RecvWr<'a> {
    /// A receive of up to the total length of `sgl`.
    pub const fn new(wr_id: u64, sgl: &'a [Sge]) -> RecvWr<'a> {
        RecvWr(dwr::RecvWr { wr_id, sgl })
    }

    /// The wr_id.
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
