//! Completion queue entries: the 64-byte CQE ([`Cqe64`]), its opcodes and error syndromes,
//! and the ownership rule ([`cqe_is_sw_owned`]).
//!
//! The device writes a CQE's body first and its last byte (`op_own`) last; software checks
//! ownership on `op_own`, then (after a read barrier) reads the rest.
//!
//! ```
//! use rnic_hw_regs::cqe::{cqe_is_sw_owned, CQE_OP_OWN_INIT};
//!
//! // A fresh CQ (every op_own = 0xF1, opcode INVALID) has nothing for software.
//! assert!(!cqe_is_sw_owned(CQE_OP_OWN_INIT, 0, 8));
//! // First pass over a 256-entry CQ: owner bit 0 is software's.
//! assert!(cqe_is_sw_owned(0x00, 5, 8));
//! // Second pass: owner bit 1.
//! assert!(cqe_is_sw_owned(0x01, 256 + 5, 8));
//! assert!(!cqe_is_sw_owned(0x00, 256 + 5, 8));
//! ```

use crate::status::{UnknownCode, code_enum};

/// Size of a CQE (cqc `cqe_sz` = 0).
pub const CQE_SIZE: usize = 64;
/// `op_own` value the kernel initializes every CQE with (opcode INVALID, owner 1).
pub const CQE_OP_OWN_INIT: u8 = 0xF1;
/// `op_own` value rdma-core initializes every CQE with (opcode INVALID, owner 0).
pub const CQE_OP_OWN_INIT_RDMA_CORE: u8 = 0xF0;
/// `op_own` format value of a compressed CQE block (mini CQEs).
pub const CQE_FORMAT_COMPRESSED: u8 = 3;

/// `l3_hdr_type` of an Ethernet receive CQE.
pub mod l3_hdr_type {
    /// Not IP.
    pub const NONE: u8 = 0;
    /// IPv6.
    pub const IPV6: u8 = 1;
    /// IPv4.
    pub const IPV4: u8 = 2;
}

/// `l4_hdr_type` of an Ethernet receive CQE.
pub mod l4_hdr_type {
    /// No L4 header the device parses (ICMP, ARP, ...).
    pub const NONE: u8 = 0;
    /// TCP.
    pub const TCP: u8 = 1;
    /// UDP.
    pub const UDP: u8 = 2;
}

code_enum! {
    /// CQE opcode (`op_own` bits 7:4).
    pub enum CqeOpcode: u8 {
        /// Requester (send queue) completion.
        Req = 0x0 => "REQ",
        /// Responder: RDMA WRITE with immediate consumed a receive WQE.
        RespWrImm = 0x1 => "RESP_WR_IMM",
        /// Responder: SEND.
        RespSend = 0x2 => "RESP_SEND",
        /// Responder: SEND with immediate.
        RespSendImm = 0x3 => "RESP_SEND_IMM",
        /// Responder: SEND with invalidate.
        RespSendInv = 0x4 => "RESP_SEND_INV",
        /// Requester error (see the syndrome).
        ReqErr = 0xD => "REQ_ERR",
        /// Responder error (see the syndrome).
        RespErr = 0xE => "RESP_ERR",
        /// Not a completion (initial value of a CQ entry).
        Invalid = 0xF => "INVALID",
    }
}

impl CqeOpcode {
    /// Whether the opcode reports an error (the syndrome fields are valid).
    ///
    /// ```
    /// use rnic_hw_regs::cqe::CqeOpcode;
    ///
    /// assert!(CqeOpcode::ReqErr.is_error());
    /// assert!(CqeOpcode::RespErr.is_error());
    /// assert!(!CqeOpcode::RespSend.is_error());
    /// ```
    #[inline]
    pub const fn is_error(self) -> bool {
        matches!(self, Self::ReqErr | Self::RespErr)
    }
}

code_enum! {
    /// Error CQE syndrome (byte 0x37).
    pub enum CqeSyndrome: u8 {
        /// Local length error (a message longer than the receive buffer).
        LocalLength = 0x01 => "LOCAL_LENGTH_ERR",
        /// Local QP operation error.
        LocalQpOp = 0x02 => "LOCAL_QP_OP_ERR",
        /// Local protection error (bad lkey / access).
        LocalProt = 0x04 => "LOCAL_PROT_ERR",
        /// Work request flushed (the QP is in error).
        WrFlush = 0x05 => "WR_FLUSH_ERR",
        /// Memory window bind error.
        MwBind = 0x06 => "MW_BIND_ERR",
        /// Bad response from the responder.
        BadResp = 0x10 => "BAD_RESP_ERR",
        /// Local access error.
        LocalAccess = 0x11 => "LOCAL_ACCESS_ERR",
        /// Remote invalid request (NAK).
        RemoteInvalReq = 0x12 => "REMOTE_INVAL_REQ_ERR",
        /// Remote access error (NAK: bad rkey or rights).
        RemoteAccess = 0x13 => "REMOTE_ACCESS_ERR",
        /// Remote operation error (NAK).
        RemoteOp = 0x14 => "REMOTE_OP_ERR",
        /// Transport retry counter exceeded.
        TransportRetryExc = 0x15 => "TRANSPORT_RETRY_EXC_ERR",
        /// RNR retry counter exceeded.
        RnrRetryExc = 0x16 => "RNR_RETRY_EXC_ERR",
        /// Remote aborted.
        RemoteAborted = 0x22 => "REMOTE_ABORTED_ERR",
    }
}

prm_layout! {
    /// A 64-byte CQE (`mlx5_cqe64`; error fields as in `mlx5_err_cqe`).
    pub struct Cqe64("", 64) {
        /// Remote LID (InfiniBand).
        slid / set_slid: u16 = dw(0x14, 15, 0);
        /// Ethernet receive: the packet's L4 header type ([`l4_hdr_type`]).
        l4_hdr_type / set_l4_hdr_type: u8 = dw(0x1C, 22, 20);
        /// Ethernet receive: the packet's L3 header type ([`l3_hdr_type`]).
        l3_hdr_type / set_l3_hdr_type: u8 = dw(0x1C, 19, 18);
        /// Ethernet receive: the packet carried a VLAN tag (stripped into `vlan_info`).
        cvlan_present / set_cvlan_present: bool = dw(0x1C, 16, 16);
        /// Ethernet receive: the stripped VLAN tag's TCI.
        vlan_info / set_vlan_info: u16 = dw(0x1C, 15, 0);
        /// L3 header present: 1 GRH in the receive buffer, 2 in the CQE (responder CQEs).
        grh / set_grh: u8 = dw(0x18, 29, 28);
        /// Source QPN (responder CQEs of UD QPs).
        rqpn / set_rqpn: u32 = dw(0x18, 23, 0);
        /// SRQ number, or the user index of the QP (cqe_version 1).
        srqn_uidx / set_srqn_uidx: u32 = dw(0x20, 23, 0);
        /// Immediate data, or the invalidated rkey (RESP_SEND_INV).
        imm_inval_pkey / set_imm_inval_pkey: u32 = dw(0x24, 31, 0);
        /// Bytes transferred (responder) or read (RDMA READ / atomic requester).
        byte_cnt / set_byte_cnt: u32 = dw(0x2C, 31, 0);
        /// Completion timestamp (non-error CQEs).
        timestamp / set_timestamp: u64 = qw(0x30);
        /// Hardware error syndrome (error CQEs).
        hw_error_syndrome / set_hw_error_syndrome: u8 = dw(0x34, 31, 24);
        /// Hardware syndrome type (error CQEs).
        hw_syndrome_type / set_hw_syndrome_type: u8 = dw(0x34, 23, 16);
        /// Vendor error syndrome (error CQEs).
        vendor_err_synd / set_vendor_err_synd: u8 = dw(0x34, 15, 8);
        /// Error syndrome, raw (error CQEs; see [`Cqe64::error_syndrome`]).
        syndrome / set_syndrome: u8 = dw(0x34, 7, 0);
        /// Send WQE opcode of the completed WQE (requester CQEs).
        send_opcode / set_send_opcode: u8 = dw(0x38, 31, 24);
        /// QP number.
        qpn / set_qpn: u32 = dw(0x38, 23, 0);
        /// `wqe_index` of the completed send WQE, or the receive WQE counter.
        wqe_counter / set_wqe_counter: u16 = dw(0x3C, 31, 16);
        /// CQE signature.
        signature / set_signature: u8 = dw(0x3C, 15, 8);
        /// CQE opcode, raw (see [`Cqe64::cqe_opcode`]).
        opcode / set_opcode: u8 = dw(0x3C, 7, 4);
        /// CQE format (3 = compressed).
        format / set_format: u8 = dw(0x3C, 3, 2);
        /// Solicited event.
        se / set_se: bool = dw(0x3C, 1, 1);
        /// Owner bit.
        owner / set_owner: bool = dw(0x3C, 0, 0);
    }
}

impl Cqe64 {
    /// The typed CQE opcode.
    ///
    /// ```
    /// use rnic_hw_regs::cqe::{Cqe64, CqeOpcode};
    ///
    /// let mut cqe = Cqe64::default();
    /// cqe.set_opcode(0x2);
    /// assert_eq!(cqe.cqe_opcode(), Ok(CqeOpcode::RespSend));
    /// cqe.set_opcode(0x9); // not a CQE opcode
    /// assert!(cqe.cqe_opcode().is_err());
    /// ```
    pub fn cqe_opcode(&self) -> Result<CqeOpcode, UnknownCode> {
        CqeOpcode::try_from(self.opcode())
    }

    /// The typed error syndrome.
    ///
    /// ```
    /// use rnic_hw_regs::cqe::{Cqe64, CqeOpcode, CqeSyndrome};
    ///
    /// let mut cqe = Cqe64::default();
    /// cqe.set_opcode(CqeOpcode::ReqErr.raw());
    /// cqe.set_syndrome(0x05);
    /// assert_eq!(cqe.error_syndrome(), Ok(CqeSyndrome::WrFlush));
    /// ```
    pub fn error_syndrome(&self) -> Result<CqeSyndrome, UnknownCode> {
        CqeSyndrome::try_from(self.syndrome())
    }

    /// The last byte: opcode, format, solicited and owner.
    ///
    /// ```
    /// use rnic_hw_regs::cqe::{Cqe64, CqeOpcode};
    ///
    /// let mut cqe = Cqe64::default();
    /// cqe.set_opcode(CqeOpcode::Req.raw());
    /// cqe.set_owner(true);
    /// assert_eq!(cqe.op_own(), 0x01);
    /// cqe.set_opcode(CqeOpcode::Invalid.raw());
    /// assert_eq!(cqe.op_own(), 0xF1);
    /// ```
    pub fn op_own(&self) -> u8 {
        self.0[0x3F]
    }
}

/// Whether the CQE with `op_own` at consumer index `ci` of a CQ of `2^log_size` entries
/// belongs to software: its opcode is not INVALID and its owner bit equals the pass parity
/// `(ci >> log_size) & 1`.
///
/// ```
/// use rnic_hw_regs::cqe::cqe_is_sw_owned;
///
/// // A 16-entry CQ (log_size 4): owner 0 on the first pass, 1 on the second.
/// assert!(cqe_is_sw_owned(0x20, 3, 4));
/// assert!(!cqe_is_sw_owned(0x20, 16 + 3, 4));
/// assert!(cqe_is_sw_owned(0x21, 16 + 3, 4));
/// assert!(!cqe_is_sw_owned(0xF0, 3, 4)); // opcode INVALID never is
/// ```
#[inline]
pub const fn cqe_is_sw_owned(op_own: u8, ci: u32, log_size: u8) -> bool {
    let parity = match ci.checked_shr(log_size as u32) {
        Some(v) => (v & 1) as u8,
        None => 0,
    };
    (op_own >> 4) != CqeOpcode::Invalid as u8 && (op_own & 1) == parity
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn offsets_match_the_prm_table() {
        assert_eq!(Cqe64::SIZE, CQE_SIZE);
        let mut c = Cqe64::default();
        c.set_grh(2);
        c.set_rqpn(0xAB_CDEF);
        c.set_srqn_uidx(0x12_3456);
        c.set_imm_inval_pkey(0xDEAD_BEEF);
        c.set_byte_cnt(0x0001_0000);
        c.set_send_opcode(0x08);
        c.set_qpn(0x00_0123);
        c.set_wqe_counter(0xBEEF);
        c.set_opcode(CqeOpcode::RespSendImm.raw());
        c.set_format(0);
        c.set_se(true);
        c.set_owner(true);
        let b = c.as_bytes();
        assert_eq!(&b[0x18..0x1C], &[0x20, 0xAB, 0xCD, 0xEF]);
        assert_eq!(&b[0x20..0x24], &[0, 0x12, 0x34, 0x56]);
        assert_eq!(&b[0x24..0x28], &[0xDE, 0xAD, 0xBE, 0xEF]);
        assert_eq!(&b[0x2C..0x30], &[0, 1, 0, 0]);
        assert_eq!(&b[0x38..0x3C], &[0x08, 0, 0x01, 0x23]);
        assert_eq!(&b[0x3C..0x3E], &[0xBE, 0xEF]);
        assert_eq!(b[0x3F], 0x33);
        assert_eq!(c.op_own(), 0x33);
        assert_eq!(c.cqe_opcode(), Ok(CqeOpcode::RespSendImm));

        let mut e = Cqe64::default();
        e.set_vendor_err_synd(0x81);
        e.set_syndrome(CqeSyndrome::RemoteAccess.raw());
        e.set_opcode(CqeOpcode::ReqErr.raw());
        assert_eq!(&e.as_bytes()[0x36..0x38], &[0x81, 0x13]);
        assert_eq!(e.error_syndrome(), Ok(CqeSyndrome::RemoteAccess));
        assert!(e.cqe_opcode().unwrap().is_error());
        e.set_timestamp(0x0102_0304_0506_0708);
        assert_eq!(&e.as_bytes()[0x30..0x38], &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn opcodes_and_syndromes_match_the_prm() {
        let ops = [
            (0x0, CqeOpcode::Req),
            (0x1, CqeOpcode::RespWrImm),
            (0x2, CqeOpcode::RespSend),
            (0x3, CqeOpcode::RespSendImm),
            (0x4, CqeOpcode::RespSendInv),
            (0xD, CqeOpcode::ReqErr),
            (0xE, CqeOpcode::RespErr),
            (0xF, CqeOpcode::Invalid),
        ];
        for (raw, op) in ops {
            assert_eq!(CqeOpcode::try_from(raw), Ok(op));
        }
        assert!(CqeOpcode::try_from(0x5).is_err());
        let syn = [
            (0x01, CqeSyndrome::LocalLength),
            (0x02, CqeSyndrome::LocalQpOp),
            (0x04, CqeSyndrome::LocalProt),
            (0x05, CqeSyndrome::WrFlush),
            (0x06, CqeSyndrome::MwBind),
            (0x10, CqeSyndrome::BadResp),
            (0x11, CqeSyndrome::LocalAccess),
            (0x12, CqeSyndrome::RemoteInvalReq),
            (0x13, CqeSyndrome::RemoteAccess),
            (0x14, CqeSyndrome::RemoteOp),
            (0x15, CqeSyndrome::TransportRetryExc),
            (0x16, CqeSyndrome::RnrRetryExc),
            (0x22, CqeSyndrome::RemoteAborted),
        ];
        for (raw, s) in syn {
            assert_eq!(CqeSyndrome::try_from(raw), Ok(s));
        }
        assert_eq!(CqeSyndrome::ALL.len(), syn.len());
        assert!(CqeSyndrome::try_from(0x03).is_err());
    }

    #[test]
    fn ownership_rule() {
        // log_size 2: 4 entries; passes alternate the expected owner bit.
        for ci in 0..16u32 {
            let parity = ((ci >> 2) & 1) as u8;
            assert!(cqe_is_sw_owned(parity, ci, 2));
            assert!(!cqe_is_sw_owned(parity ^ 1, ci, 2));
            assert!(
                !cqe_is_sw_owned(0xF0 | parity, ci, 2),
                "INVALID is never software's"
            );
        }
        assert!(!cqe_is_sw_owned(CQE_OP_OWN_INIT_RDMA_CORE, 0, 4));
        // Huge log sizes do not panic.
        assert!(cqe_is_sw_owned(0x00, u32::MAX, 40));
    }
}
