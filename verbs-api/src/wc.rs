//! Work completions (`struct ibv_wc`): status, opcode and flags with ibverbs' names and
//! numeric values.

use rnic_driver::wr as dwr;
use std::fmt;

/// Work completion status: `enum ibv_wc_status`, same names (`IBV_WC_*`) and values.
///
/// ```
/// use rnic_verbs::WcStatus;
///
/// assert_eq!(WcStatus::RemAccessErr as u32, 10);
/// assert_eq!(WcStatus::RemAccessErr.name(), "IBV_WC_REM_ACCESS_ERR");
/// assert_eq!(WcStatus::RemAccessErr.to_string(), "remote access error"); // ibv_wc_status_str
/// assert_eq!(WcStatus::from_u32(5), Some(WcStatus::WrFlushErr));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum WcStatus {
    /// IBV_WC_SUCCESS.
    Success = 0,
    /// IBV_WC_LOC_LEN_ERR: a receive buffer too small, or a send longer than allowed.
    LocLenErr = 1,
    /// IBV_WC_LOC_QP_OP_ERR.
    LocQpOpErr = 2,
    /// IBV_WC_LOC_EEC_OP_ERR.
    LocEecOpErr = 3,
    /// IBV_WC_LOC_PROT_ERR: an SGE's lkey, address or rights do not match a region.
    LocProtErr = 4,
    /// IBV_WC_WR_FLUSH_ERR: the QP went to ERR with this work request outstanding.
    WrFlushErr = 5,
    /// IBV_WC_MW_BIND_ERR.
    MwBindErr = 6,
    /// IBV_WC_BAD_RESP_ERR.
    BadRespErr = 7,
    /// IBV_WC_LOC_ACCESS_ERR.
    LocAccessErr = 8,
    /// IBV_WC_REM_INV_REQ_ERR.
    RemInvReqErr = 9,
    /// IBV_WC_REM_ACCESS_ERR: the responder refused the rkey, address or rights.
    RemAccessErr = 10,
    /// IBV_WC_REM_OP_ERR.
    RemOpErr = 11,
    /// IBV_WC_RETRY_EXC_ERR: no ACK within timeout x retry_cnt.
    RetryExcErr = 12,
    /// IBV_WC_RNR_RETRY_EXC_ERR: the responder had no receive posted, rnr_retry times.
    RnrRetryExcErr = 13,
    /// IBV_WC_LOC_RDD_VIOL_ERR.
    LocRddViolErr = 14,
    /// IBV_WC_REM_INV_RD_REQ_ERR.
    RemInvRdReqErr = 15,
    /// IBV_WC_REM_ABORT_ERR.
    RemAbortErr = 16,
    /// IBV_WC_INV_EECN_ERR.
    InvEecnErr = 17,
    /// IBV_WC_INV_EEC_STATE_ERR.
    InvEecStateErr = 18,
    /// IBV_WC_FATAL_ERR.
    FatalErr = 19,
    /// IBV_WC_RESP_TIMEOUT_ERR.
    RespTimeoutErr = 20,
    /// IBV_WC_GENERAL_ERR.
    GeneralErr = 21,
}

impl WcStatus {
    const ALL: [WcStatus; 22] = [
        WcStatus::Success,
        WcStatus::LocLenErr,
        WcStatus::LocQpOpErr,
        WcStatus::LocEecOpErr,
        WcStatus::LocProtErr,
        WcStatus::WrFlushErr,
        WcStatus::MwBindErr,
        WcStatus::BadRespErr,
        WcStatus::LocAccessErr,
        WcStatus::RemInvReqErr,
        WcStatus::RemAccessErr,
        WcStatus::RemOpErr,
        WcStatus::RetryExcErr,
        WcStatus::RnrRetryExcErr,
        WcStatus::LocRddViolErr,
        WcStatus::RemInvRdReqErr,
        WcStatus::RemAbortErr,
        WcStatus::InvEecnErr,
        WcStatus::InvEecStateErr,
        WcStatus::FatalErr,
        WcStatus::RespTimeoutErr,
        WcStatus::GeneralErr,
    ];

    /// The status with numeric value `v`.
    pub fn from_u32(v: u32) -> Option<WcStatus> {
        Self::ALL.get(v as usize).copied()
    }

    /// The C name (`IBV_WC_SUCCESS`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            WcStatus::Success => "IBV_WC_SUCCESS",
            WcStatus::LocLenErr => "IBV_WC_LOC_LEN_ERR",
            WcStatus::LocQpOpErr => "IBV_WC_LOC_QP_OP_ERR",
            WcStatus::LocEecOpErr => "IBV_WC_LOC_EEC_OP_ERR",
            WcStatus::LocProtErr => "IBV_WC_LOC_PROT_ERR",
            WcStatus::WrFlushErr => "IBV_WC_WR_FLUSH_ERR",
            WcStatus::MwBindErr => "IBV_WC_MW_BIND_ERR",
            WcStatus::BadRespErr => "IBV_WC_BAD_RESP_ERR",
            WcStatus::LocAccessErr => "IBV_WC_LOC_ACCESS_ERR",
            WcStatus::RemInvReqErr => "IBV_WC_REM_INV_REQ_ERR",
            WcStatus::RemAccessErr => "IBV_WC_REM_ACCESS_ERR",
            WcStatus::RemOpErr => "IBV_WC_REM_OP_ERR",
            WcStatus::RetryExcErr => "IBV_WC_RETRY_EXC_ERR",
            WcStatus::RnrRetryExcErr => "IBV_WC_RNR_RETRY_EXC_ERR",
            WcStatus::LocRddViolErr => "IBV_WC_LOC_RDD_VIOL_ERR",
            WcStatus::RemInvRdReqErr => "IBV_WC_REM_INV_RD_REQ_ERR",
            WcStatus::RemAbortErr => "IBV_WC_REM_ABORT_ERR",
            WcStatus::InvEecnErr => "IBV_WC_INV_EECN_ERR",
            WcStatus::InvEecStateErr => "IBV_WC_INV_EEC_STATE_ERR",
            WcStatus::FatalErr => "IBV_WC_FATAL_ERR",
            WcStatus::RespTimeoutErr => "IBV_WC_RESP_TIMEOUT_ERR",
            WcStatus::GeneralErr => "IBV_WC_GENERAL_ERR",
        }
    }

    /// What `ibv_wc_status_str` says.
    pub const fn description(self) -> &'static str {
        match self {
            WcStatus::Success => "success",
            WcStatus::LocLenErr => "local length error",
            WcStatus::LocQpOpErr => "local QP operation error",
            WcStatus::LocEecOpErr => "local EE context operation error",
            WcStatus::LocProtErr => "local protection error",
            WcStatus::WrFlushErr => "Work Request Flushed Error",
            WcStatus::MwBindErr => "memory management operation error",
            WcStatus::BadRespErr => "bad response error",
            WcStatus::LocAccessErr => "local access error",
            WcStatus::RemInvReqErr => "remote invalid request error",
            WcStatus::RemAccessErr => "remote access error",
            WcStatus::RemOpErr => "remote operation error",
            WcStatus::RetryExcErr => "transport retry counter exceeded",
            WcStatus::RnrRetryExcErr => "RNR retry counter exceeded",
            WcStatus::LocRddViolErr => "local RDD violation error",
            WcStatus::RemInvRdReqErr => "remote invalid RD request",
            WcStatus::RemAbortErr => "aborted error",
            WcStatus::InvEecnErr => "invalid EE context number",
            WcStatus::InvEecStateErr => "invalid EE context state",
            WcStatus::FatalErr => "fatal error",
            WcStatus::RespTimeoutErr => "response timeout error",
            WcStatus::GeneralErr => "general error",
        }
    }

    fn from_driver(s: dwr::WcStatus) -> WcStatus {
        Self::from_u32(s as u32).unwrap_or(WcStatus::GeneralErr)
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

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
        WcStatus::from_driver(self.0.status)
    }

    /// Whether `status` is [`WcStatus::Success`].
    #[inline]
    pub fn is_success(&self) -> bool {
        self.0.status == dwr::WcStatus::Success
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
