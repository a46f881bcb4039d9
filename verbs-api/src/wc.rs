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

/// Work completion opcode: `enum ibv_wc_opcode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    /// IBV_WC_SEND (SEND, SEND with immediate, SEND with invalidate).
    Send = 0,
    /// IBV_WC_RDMA_WRITE (with or without immediate).
    RdmaWrite = 1,
    /// IBV_WC_RDMA_READ.
    RdmaRead = 2,
    /// IBV_WC_COMP_SWAP.
    CompSwap = 3,
    /// IBV_WC_FETCH_ADD.
    FetchAdd = 4,
    /// IBV_WC_RECV: a SEND arrived.
    Recv = 128,
    /// IBV_WC_RECV_RDMA_WITH_IMM: an RDMA WRITE with immediate consumed a receive.
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    fn from_driver(o: dwr::WcOpcode) -> WcOpcode {
        match o {
            dwr::WcOpcode::Send => WcOpcode::Send,
            dwr::WcOpcode::RdmaWrite => WcOpcode::RdmaWrite,
            dwr::WcOpcode::RdmaRead => WcOpcode::RdmaRead,
            dwr::WcOpcode::CompSwap => WcOpcode::CompSwap,
            dwr::WcOpcode::FetchAdd => WcOpcode::FetchAdd,
            dwr::WcOpcode::Recv => WcOpcode::Recv,
            dwr::WcOpcode::RecvRdmaWithImm => WcOpcode::RecvRdmaWithImm,
        }
    }

    /// The C name (`IBV_WC_SEND`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            WcOpcode::Send => "IBV_WC_SEND",
            WcOpcode::RdmaWrite => "IBV_WC_RDMA_WRITE",
            WcOpcode::RdmaRead => "IBV_WC_RDMA_READ",
            WcOpcode::CompSwap => "IBV_WC_COMP_SWAP",
            WcOpcode::FetchAdd => "IBV_WC_FETCH_ADD",
            WcOpcode::Recv => "IBV_WC_RECV",
            WcOpcode::RecvRdmaWithImm => "IBV_WC_RECV_RDMA_WITH_IMM",
        }
    }
}

bitflags::bitflags! {
    /// Work completion flags (`enum ibv_wc_flags` values).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct WcFlags: u32 {
        /// IBV_WC_GRH: the first 40 bytes of the receive buffer hold the GRH area (UD).
        const GRH = 1;
        /// IBV_WC_WITH_IMM: [`WorkCompletion::imm_data`] is valid.
        const WITH_IMM = 2;
        /// IBV_WC_WITH_INV: [`WorkCompletion::invalidated_rkey`] is valid.
        const WITH_INV = 8;
    }
}

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
    #[inline]
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// `status`.
    #[inline]
    pub fn status(&self) -> WcStatus {
        self.0.status
    }

    /// Whether `status` is [`WcStatus::Success`].
    #[inline]
    pub fn is_success(&self) -> bool {
        self.0.status == WcStatus::Success
    }

    /// `opcode` (for an error, the posted operation, or [`WcOpcode::Recv`]; ibverbs leaves it
    /// undefined then).
    #[inline]
    pub fn opcode(&self) -> WcOpcode {
        WcOpcode::from_driver(self.0.opcode)
    }

    /// `vendor_err`: the device's syndrome of an error completion.
    #[inline]
    pub fn vendor_err(&self) -> u32 {
        u32::from(self.0.vendor_err)
    }

    /// `byte_len`: bytes received (responder; UD includes the 40-byte GRH area), read (READ;
    /// 8 for atomics) or sent.
    #[inline]
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }

    /// `imm_data` as a host integer (the big-endian value the sender posted), valid with
    /// [`WcFlags::WITH_IMM`].
    #[inline]
    pub fn imm_data(&self) -> Option<u32> {
        self.wc_flags()
            .contains(WcFlags::WITH_IMM)
            .then_some(self.0.imm)
    }

    /// The rkey a SEND with invalidate named, valid with [`WcFlags::WITH_INV`].
    #[inline]
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.wc_flags()
            .contains(WcFlags::WITH_INV)
            .then_some(self.0.invalidated_rkey)
    }

    /// `qp_num`: the local QP.
    #[inline]
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }

    /// `src_qp`: the sending QP (UD receives).
    #[inline]
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }

    /// `wc_flags`.
    #[inline]
    pub fn wc_flags(&self) -> WcFlags {
        WcFlags::from_bits_truncate(u32::from(self.0.flags.bits()))
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
