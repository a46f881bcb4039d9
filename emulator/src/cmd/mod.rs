//! The command processor: the command queue entries and mailbox chains the host writes, checked
//! as a ConnectX checks them, dispatched to one handler file per command family.
//!
//! Delivery problems (entry type, lengths, pointers, tokens, block numbers) complete the entry
//! with a PRM delivery status and run nothing. A command that is delivered runs its handler,
//! which either fills the output or fails with a PRM command status and a syndrome.
//!
//! Faults: an IOMMU fault while reading or writing a mailbox completes the command with
//! delivery status 0x6 (firmware internal error), and is counted in the IOMMU's fault counter.
//! An entry that cannot be read at all cannot be completed; the doorbell is counted as bad.

use rnic_hw_regs::PrmLayout;
use rnic_hw_regs::cmd::CmdOpcode;
use rnic_hw_regs::cmdq::{
    self, CMD_TYPE_PCIE, CMDQ_ENTRY_SIZE, CmdMailbox, CmdqEntry, Direction, INLINE_LEN,
    MAILBOX_ALIGN, MAILBOX_SIZE,
};
use rnic_hw_regs::eqe::{Eqe, EventType};
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
use zerocopy::{FromBytes, IntoBytes};

mod access_reg;
mod caps;
mod cq;
mod eq;
mod flow;
mod hca;
mod mkey;
pub(crate) mod pages;
mod pd_uar;
mod qp;
mod roce_addr;
mod rq;
mod sq;
mod srq;
mod tis_tir;
mod transport_domain;
mod vport;
mod wq;

use crate::bar::Bar;
use crate::ctx::Ctx;

/// The largest command input or output the device accepts: a CREATE_MKEY whose MTT maps the
/// largest region ([`crate::caps::LOG_MAX_MRW_SZ`]) in 4 KiB pages at any page offset (a
/// MANAGE_PAGES of the ConnectX-4's 12,868 init pages is about 100 KiB).
const MAX_CMD_LEN: usize = rnic_hw_regs::cmd::CreateMkeyIn::KLM_PAS_MTT_OFFSET
    + ((1 << (crate::caps::LOG_MAX_MRW_SZ - 12)) + 2) * 8;

/// A command that failed: the PRM status and firmware's syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CmdFail {
    pub status: CmdStatus,
    pub syndrome: u32,
}

impl CmdFail {
    pub(crate) const fn new(status: CmdStatus, syndrome: u32) -> Self {
        CmdFail { status, syndrome }
    }
}

/// What a handler returns.
pub(crate) type CmdResult = Result<(), CmdFail>;

/// Fails with `status` and `syndrome`.
pub(crate) fn fail<T>(status: CmdStatus, syndrome: u32) -> Result<T, CmdFail> {
    Err(CmdFail::new(status, syndrome))
}

/// Fails with `status` and `syndrome` unless `ok`.
pub(crate) fn ensure(ok: bool, status: CmdStatus, syndrome: u32) -> CmdResult {
    if ok { Ok(()) } else { fail(status, syndrome) }
}

/// One delivered command, as a handler sees it.
pub(crate) struct Cmd<'a> {
    pub opcode: CmdOpcode,
    pub op_mod: u16,
    /// The whole input (inline bytes and mailbox data), `input_length` bytes.
    pub input: &'a [u8],
    /// The whole output buffer, `output_length` bytes, zeroed.
    pub output: &'a mut [u8],
}

impl Cmd<'_> {
    /// The fixed part of the input as layout `T`. A shorter input reads as if zero-extended:
    /// the real ConnectX-4 accepted the kernel's 16-byte INIT_HCA (layout 0x20 bytes).
    pub(crate) fn input<T: PrmLayout + Default>(&self) -> T {
        let mut t = T::default();
        let n = self.input.len().min(T::SIZE);
        t.as_mut_bytes()[..n].copy_from_slice(&self.input[..n]);
        t
    }

    /// The fixed part of the input as layout `T`, which the input must hold entirely
    /// (else BAD_INPUT_LENGTH).
    pub(crate) fn fixed<T: PrmLayout + Default>(&self) -> Result<T, CmdFail> {
        if self.input.len() < T::SIZE {
            return Err(CmdFail::new(
                CmdStatus::BadInputLength,
                syndrome::INPUT_SHORTER_THAN_LAYOUT,
            ));
        }
        Ok(self.input::<T>())
    }

    /// The output as layout `T`; an output buffer shorter than `T` is BAD_OUTPUT_LENGTH.
    pub(crate) fn output<T: PrmLayout>(&mut self) -> Result<&mut T, CmdFail> {
        T::mut_from_prefix(self.output)
            .map(|(t, _)| t)
            .map_err(|_| CmdFail::new(CmdStatus::BadOutputLength, syndrome::OUTPUT_TOO_SHORT))
    }
}

/// Declares the syndrome constants and the list of all of them (tests check they are unique).
macro_rules! syndromes {
    ($($(#[$m:meta])* $name:ident = $v:literal;)*) => {
        $($(#[$m])* pub(crate) const $name: u32 = $v;)*

        /// Every syndrome with its name.
        #[cfg(test)]
        pub(crate) const ALL: &[(&str, u32)] = &[$((stringify!($name), $v)),*];
    };
}

/// Every syndrome the command processor reports: one constant per check, so a failure can be
/// traced to the rule that caused it. Firmware syndromes are opaque 32-bit values; these are
/// the emulator's own, grouped by family in the high half (0x0100 processor, 0x0200 HCA life
/// cycle, 0x0300 pages, 0x0400 capabilities, 0x0500 ACCESS_REG, 0x0600 vport, 0x0700 GID
/// table, 0x0800 PD/UAR, 0x0900 EQ, 0x0A00 CQ, 0x0B00 MKey, 0x0C00 QP, 0x0D00 SRQ,
/// 0x0E00 transport domain / TIS / TIR, 0x0F00 RQ / SQ objects, 0x1000 flow steering).
pub(crate) mod syndrome {
    syndromes! {
        /// The opcode is not one this device implements.
        UNKNOWN_OPCODE = 0x0100_0001;
        /// The output buffer is shorter than the command's output.
        OUTPUT_TOO_SHORT = 0x0100_0002;
        /// The input is shorter than the command's header.
        INPUT_TOO_SHORT = 0x0100_0003;
        /// A command other than ENABLE_HCA before ENABLE_HCA (or after DISABLE_HCA).
        NOT_ENABLED = 0x0100_0004;
        /// A command that needs INIT_HCA before it (object and port commands).
        NOT_INITIALIZED = 0x0100_0005;
        /// The input is shorter than the fixed part of the command's input layout.
        INPUT_SHORTER_THAN_LAYOUT = 0x0100_0006;
        /// An op_mod the command does not define.
        BAD_OP_MOD = 0x0100_0007;
        /// A command about another function (function_id / other_vport / embedded CPU):
        /// this device is one physical function.
        OTHER_FUNCTION = 0x0100_0008;
        /// A command the device knows but does not implement (RESIZE_SRQ).
        UNSUPPORTED_OPCODE = 0x0100_0009;

        /// ENABLE_HCA while already enabled.
        ENABLE_TWICE = 0x0200_0001;
        /// DISABLE_HCA while the HCA is initialized (TEARDOWN_HCA first).
        DISABLE_WHILE_INITIALIZED = 0x0200_0002;
        /// DISABLE_HCA while firmware still holds pages (take them back first).
        DISABLE_WITH_PAGES_HELD = 0x0200_0003;
        /// INIT_HCA while initialized, or again after TEARDOWN_HCA without a new ENABLE_HCA.
        INIT_TWICE = 0x0200_0004;
        /// INIT_HCA before the boot and init pages were given.
        INIT_PAGES_MISSING = 0x0200_0005;
        /// TEARDOWN_HCA while not initialized.
        TEARDOWN_NOT_INITIALIZED = 0x0200_0006;
        /// TEARDOWN_HCA with a profile other than graceful (0) or force (1).
        TEARDOWN_BAD_PROFILE = 0x0200_0007;
        /// SET_ISSI with an ISSI the device does not support.
        ISSI_UNSUPPORTED = 0x0200_0008;
        /// SET_ISSI after INIT_HCA.
        ISSI_AFTER_INIT = 0x0200_0009;

        /// QUERY_PAGES with an op_mod other than boot (1), init (2) or regular (3).
        QUERY_PAGES_BAD_MODE = 0x0300_0001;
        /// MANAGE_PAGES input shorter than its page list.
        PAGES_LIST_SHORT = 0x0300_0002;
        /// MANAGE_PAGES give: an address that is zero or not 4 KiB aligned.
        PAGE_MISALIGNED = 0x0300_0003;
        /// MANAGE_PAGES give: a page firmware already holds (or listed twice).
        PAGE_DUPLICATE = 0x0300_0004;
        /// MANAGE_PAGES give: a page the device cannot reach (IOMMU fault).
        PAGE_UNMAPPED = 0x0300_0005;
        /// MANAGE_PAGES give: more pages than firmware can track.
        PAGES_TOO_MANY = 0x0300_0006;
        /// MANAGE_PAGES take: the output has no room for the pages asked for.
        PAGES_OUTPUT_SHORT = 0x0300_0007;

        /// QUERY/SET_HCA_CAP of a capability type the device does not have.
        CAP_TYPE_UNSUPPORTED = 0x0400_0001;
        /// SET_HCA_CAP with the mode bit set (only current values can be set).
        CAP_SET_MODE = 0x0400_0002;
        /// SET_HCA_CAP after INIT_HCA.
        CAP_SET_AFTER_INIT = 0x0400_0003;
        /// SET_HCA_CAP: log_max_qp beyond its maximum.
        CAP_LOG_MAX_QP = 0x0400_0004;
        /// SET_HCA_CAP: cmdif_checksum beyond its maximum.
        CAP_CMDIF_CHECKSUM = 0x0400_0005;
        /// SET_HCA_CAP: log_uar_page_sz beyond its maximum.
        CAP_LOG_UAR_PAGE_SZ = 0x0400_0006;
        /// SET_HCA_CAP: uar_4k set but not supported.
        CAP_UAR_4K = 0x0400_0007;
        /// SET_HCA_CAP: sw_r_roce_src_udp_port set but not supported.
        CAP_SW_R_ROCE_SRC_UDP_PORT = 0x0400_0008;
        /// SET_HCA_CAP: atomic_req_8B_endianness_mode 1 but not supported, or above 1.
        CAP_ATOMIC_ENDIANNESS = 0x0400_0009;
        /// SET_HCA_CAP: pkey_table_size beyond its maximum.
        CAP_PKEY_TABLE_SIZE = 0x0400_000A;
        /// SET_HCA_CAP: an ODP capability enabled that the device does not support.
        CAP_ODP = 0x0400_000B;

        /// ACCESS_REG of a register the device does not implement.
        REG_UNSUPPORTED = 0x0500_0001;
        /// ACCESS_REG input without the register data.
        REG_DATA_SHORT = 0x0500_0002;
        /// ACCESS_REG read: the output has no room for the register.
        REG_OUTPUT_SHORT = 0x0500_0003;

        /// A vport number other than 0 (this function's own).
        VPORT_NUMBER = 0x0600_0001;
        /// MODIFY_NIC_VPORT_CONTEXT: an MTU outside 68..=9978.
        VPORT_MTU = 0x0600_0002;
        /// MODIFY_VPORT_STATE: admin_state other than down (0), up (1) or follow (2).
        VPORT_ADMIN_STATE = 0x0600_0003;
        /// MODIFY_NIC_VPORT_CONTEXT of the permanent address (read-only).
        VPORT_PERMANENT_ADDRESS = 0x0600_0004;

        /// SET/QUERY_ROCE_ADDRESS index beyond the GID table.
        GID_INDEX = 0x0700_0001;
        /// SET_ROCE_ADDRESS with a RoCE version other than v1 (0), v1.5 (1) or v2 (2).
        GID_VERSION = 0x0700_0002;
        /// SET_ROCE_ADDRESS with an L3 type other than IPv4 (0) or IPv6 (1).
        GID_L3_TYPE = 0x0700_0003;
        /// SET/QUERY_ROCE_ADDRESS for a port other than 1 (or 0, this port).
        GID_PORT = 0x0700_0004;

        /// ALLOC_UAR with every UAR page in use.
        UAR_TABLE_FULL = 0x0800_0001;
        /// DEALLOC_UAR of a UAR that is not allocated.
        UAR_UNKNOWN = 0x0800_0002;
        /// DEALLOC_UAR of a UAR an EQ, CQ or QP uses.
        UAR_BUSY = 0x0800_0003;
        /// ALLOC_PD with every PD in use.
        PD_TABLE_FULL = 0x0800_0004;
        /// DEALLOC_PD of a PD that is not allocated.
        PD_UNKNOWN = 0x0800_0005;
        /// DEALLOC_PD of a PD an MKey, QP or SRQ uses.
        PD_BUSY = 0x0800_0006;

        /// CREATE_EQ with a UAR that is not allocated.
        EQ_BAD_UAR = 0x0900_0001;
        /// CREATE_EQ larger than log_max_eq_sz.
        EQ_TOO_BIG = 0x0900_0002;
        /// CREATE_EQ whose PAS does not cover the queue.
        EQ_PAS_SHORT = 0x0900_0003;
        /// CREATE_EQ with every EQ in use.
        EQ_TABLE_FULL = 0x0900_0004;
        /// An EQ number that does not exist.
        EQ_UNKNOWN = 0x0900_0005;
        /// DESTROY_EQ of an EQ CQs still use.
        EQ_BUSY = 0x0900_0006;
        /// A queue context with a non-zero page_offset (not modelled: use page-aligned
        /// buffers).
        EQ_PAGE_OFFSET = 0x0900_0007;
        /// A PAS entry that is not aligned to the queue's page size.
        EQ_PAS_MISALIGNED = 0x0900_0008;
        /// CREATE_EQ with a page size beyond 2^30 bytes (log_page_size above 18).
        EQ_PAGE_SIZE = 0x0900_0009;
        /// GEN_EQE: the EQ could not take the entry (full or buffer fault).
        EQ_WRITE_FAILED = 0x0900_000A;

        /// CREATE_CQ with a UAR that is not allocated.
        CQ_BAD_UAR = 0x0A00_0001;
        /// CREATE_CQ (or MODIFY_CQ) with an EQ that does not exist.
        CQ_BAD_EQN = 0x0A00_0002;
        /// CREATE_CQ larger than log_max_cq_sz.
        CQ_TOO_BIG = 0x0A00_0003;
        /// CREATE_CQ whose PAS does not cover the queue.
        CQ_PAS_SHORT = 0x0A00_0004;
        /// CREATE_CQ with every CQ in use.
        CQ_TABLE_FULL = 0x0A00_0005;
        /// A CQ number that does not exist.
        CQ_UNKNOWN = 0x0A00_0006;
        /// DESTROY_CQ of a CQ a QP or SRQ still uses.
        CQ_BUSY = 0x0A00_0007;
        /// CREATE_CQ with a CQE size other than 64 (0) or 128 (1) bytes.
        CQ_CQE_SIZE = 0x0A00_0008;
        /// A CQ context with a non-zero page_offset.
        CQ_PAGE_OFFSET = 0x0A00_0009;
        /// A CQ doorbell record address that is not 8-byte aligned.
        CQ_DBR_MISALIGNED = 0x0A00_000A;
        /// A CQ PAS entry not aligned to the page size.
        CQ_PAS_MISALIGNED = 0x0A00_000B;
        /// A CQ page size beyond 2^30 bytes.
        CQ_PAGE_SIZE = 0x0A00_000C;
        /// MODIFY_CQ with a field_select bit the device does not implement.
        CQ_MODIFY_FIELD = 0x0A00_000D;
        /// MODIFY_CQ resize (op_mod 1): not supported (cap cq_resize is 0).
        CQ_RESIZE = 0x0A00_000E;

        /// CREATE_MKEY with a PD that does not exist.
        MKEY_BAD_PD = 0x0B00_0001;
        /// CREATE_MKEY with an access mode other than PA (0), MTT (1) or KLM (2).
        MKEY_ACCESS_MODE = 0x0B00_0002;
        /// CREATE_MKEY free but not a window (KLM), or a window not free.
        MKEY_FREE = 0x0B00_0003;
        /// CREATE_MKEY MTT: a page size outside 4 KiB ..= 1 GiB.
        MKEY_PAGE_SIZE = 0x0B00_0004;
        /// CREATE_MKEY MTT: translations_octword_actual_size smaller than the region needs.
        MKEY_MTT_TOO_FEW = 0x0B00_0005;
        /// CREATE_MKEY MTT: input shorter than its translation array.
        MKEY_MTT_SHORT = 0x0B00_0006;
        /// CREATE_MKEY MTT: an entry not aligned to the page size.
        MKEY_MTT_MISALIGNED = 0x0B00_0007;
        /// CREATE_MKEY: the region wraps the 64-bit address space.
        MKEY_BAD_RANGE = 0x0B00_0008;
        /// CREATE_MKEY MTT: longer than 2^log_max_mrw_sz bytes.
        MKEY_TOO_LONG = 0x0B00_0010;
        /// CREATE_MKEY: an MTT key with length64 (only PA keys span the whole space).
        MKEY_MTT_LENGTH64 = 0x0B00_000D;
        /// CREATE_MKEY with every MKey in use.
        MKEY_TABLE_FULL = 0x0B00_0009;
        /// An MKey index that does not exist.
        MKEY_UNKNOWN = 0x0B00_000A;
        /// CREATE_MKEY bound to a QP (qpn other than 0xFFFFFF): only a UMR binds a key to a
        /// QP.
        MKEY_QPN_BOUND = 0x0B00_000B;
        /// CREATE_MKEY MTT with more translation entries than the device allows.
        MKEY_MTT_TOO_MANY = 0x0B00_000C;
        /// CREATE_MKEY: a KLM (window) mkey without `umr_en`, with `length64`, or with no
        /// room (or too much) for KLMs.
        MKEY_BAD_WINDOW = 0x0B00_000E;

        /// CREATE_QP with a service type other than RC (0), UC (1), UD (2) or QP1 (8).
        QP_BAD_ST = 0x0C00_0001;
        /// CREATE_QP with a PD that does not exist.
        QP_BAD_PD = 0x0C00_0002;
        /// CREATE_QP with a send CQ that does not exist.
        QP_BAD_CQN_SND = 0x0C00_0003;
        /// CREATE_QP with a receive CQ that does not exist.
        QP_BAD_CQN_RCV = 0x0C00_0004;
        /// CREATE_QP with an SRQ that does not exist.
        QP_BAD_SRQ = 0x0C00_0005;
        /// CREATE_QP with a UAR that is not allocated.
        QP_BAD_UAR = 0x0C00_0006;
        /// CREATE_QP with an SQ larger than log_max_qp_sz.
        QP_SQ_TOO_BIG = 0x0C00_0007;
        /// CREATE_QP with an RQ larger than log_max_qp_sz.
        QP_RQ_TOO_BIG = 0x0C00_0008;
        /// CREATE_QP with receive WQEs larger than max_wqe_sz_rq.
        QP_RQ_STRIDE = 0x0C00_0009;
        /// CREATE_QP whose PAS does not cover the queues.
        QP_PAS_SHORT = 0x0C00_000A;
        /// CREATE_QP with every QP in use (current log_max_qp).
        QP_TABLE_FULL = 0x0C00_000B;
        /// A QP number that does not exist.
        QP_UNKNOWN = 0x0C00_000C;
        /// A transition from a state it does not start from.
        QP_BAD_TRANSITION = 0x0C00_000D;
        /// RST2INIT / INIT2INIT on a port other than 1.
        QP_BAD_PORT = 0x0C00_000E;
        /// RST2INIT of a UD QP without a Q_Key (zero).
        QP_UD_NO_QKEY = 0x0C00_000F;
        /// INIT2RTR of an RC/UC QP with an MTU outside 256..=the port's maximum.
        QP_BAD_MTU = 0x0C00_0010;
        /// INIT2RTR of an RC/UC QP without a remote QPN (zero).
        QP_NO_REMOTE_QPN = 0x0C00_0011;
        /// INIT2RTR of an RC/UC QP whose source GID index is beyond the GID table.
        QP_GID_INDEX = 0x0C00_0012;
        /// INIT2RTR of an RC/UC QP whose source GID entry is empty.
        QP_GID_EMPTY = 0x0C00_0013;
        /// INIT2RTR: log_msg_max beyond the capability log_max_msg.
        QP_MSG_MAX = 0x0C00_0014;
        /// INIT2RTR: log_rra_max beyond log_max_ra_res_qp.
        QP_RRA_MAX = 0x0C00_0015;
        /// RTR2RTS: log_sra_max beyond log_max_ra_req_qp.
        QP_SRA_MAX = 0x0C00_0016;
        /// CREATE_QP with an RQ type other than normal (0), SRQ (1) or zero-length (3).
        QP_RQ_TYPE = 0x0C00_0017;
        /// CREATE_QP with a non-zero page_offset.
        QP_PAGE_OFFSET = 0x0C00_0018;
        /// CREATE_QP with a doorbell record address that is not 8-byte aligned.
        QP_DBR_MISALIGNED = 0x0C00_0019;
        /// CREATE_QP with a PAS entry not aligned to the page size.
        QP_PAS_MISALIGNED = 0x0C00_001A;
        /// CREATE_QP with a page size beyond 2^30 bytes.
        QP_PAGE_SIZE = 0x0C00_001B;
        /// CREATE_QP of a QP1 on a port that has one.
        QP_GSI_EXISTS = 0x0C00_001C;
        /// A QP1 transition setting a Q_Key other than the GSI Q_Key 0x80010000.
        QP_GSI_QKEY = 0x0C00_001D;

        /// CREATE_SRQ with a PD that does not exist.
        SRQ_BAD_PD = 0x0D00_0001;
        /// CREATE_SRQ larger than log_max_srq_sz.
        SRQ_TOO_BIG = 0x0D00_0002;
        /// CREATE_SRQ with WQEs larger than max_wqe_sz_rq.
        SRQ_STRIDE = 0x0D00_0003;
        /// CREATE_SRQ whose PAS does not cover the queue.
        SRQ_PAS_SHORT = 0x0D00_0004;
        /// CREATE_SRQ with every SRQ in use.
        SRQ_TABLE_FULL = 0x0D00_0005;
        /// An SRQ number that does not exist.
        SRQ_UNKNOWN = 0x0D00_0006;
        /// DESTROY_SRQ of an SRQ a QP still uses.
        SRQ_BUSY = 0x0D00_0007;
        /// CREATE_SRQ with a CQ (XRC) that does not exist.
        SRQ_BAD_CQN = 0x0D00_0008;
        /// ARM_RQ: limit (lwm) not below the SRQ size.
        SRQ_LWM = 0x0D00_0009;
        /// CREATE_SRQ with a non-zero page_offset.
        SRQ_PAGE_OFFSET = 0x0D00_000A;
        /// CREATE_SRQ with a doorbell record address that is not 8-byte aligned.
        SRQ_DBR_MISALIGNED = 0x0D00_000B;
        /// CREATE_SRQ with a page size beyond 2^30 bytes.
        SRQ_PAGE_SIZE = 0x0D00_000C;
        /// CREATE_SRQ with a PAS entry not aligned to the page size.
        SRQ_PAS_MISALIGNED = 0x0D00_000D;

        /// ALLOC_TRANSPORT_DOMAIN with every domain in use.
        TD_TABLE_FULL = 0x0E00_0001;
        /// A transport domain that is not allocated.
        TD_UNKNOWN = 0x0E00_0002;
        /// DEALLOC_TRANSPORT_DOMAIN of a domain a TIS or TIR uses.
        TD_BUSY = 0x0E00_0003;
        /// CREATE_TIS / CREATE_TIR with every TIS / TIR in use.
        TIX_TABLE_FULL = 0x0E00_0004;
        /// A TIS number that does not exist.
        TIS_UNKNOWN = 0x0E00_0005;
        /// DESTROY_TIS of a TIS an SQ transmits through.
        TIS_BUSY = 0x0E00_0006;
        /// CREATE_TIS / CREATE_TIR with an offload this device does not model (TLS, LAG
        /// affinity, underlay QPN, LRO / packet merge, tunneled offloads).
        TIX_UNSUPPORTED = 0x0E00_0007;
        /// CREATE_TIS with a priority above 7.
        TIS_PRIO = 0x0E00_0008;
        /// A TIR number that does not exist.
        TIR_UNKNOWN = 0x0E00_0009;
        /// DESTROY_TIR of a TIR a flow table entry forwards to.
        TIR_BUSY = 0x0E00_000A;
        /// CREATE_TIR with indirect dispatch (RQ tables are not modelled) or another type.
        TIR_DISP_TYPE = 0x0E00_000B;
        /// CREATE_TIR whose `inline_rqn` is not an RQ.
        TIR_BAD_RQN = 0x0E00_000C;

        /// CREATE_RQ / CREATE_SQ with a wq_type other than cyclic.
        WQ_TYPE = 0x0F00_0001;
        /// CREATE_RQ / CREATE_SQ whose `wq.pd` does not exist.
        WQ_BAD_PD = 0x0F00_0002;
        /// CREATE_RQ / CREATE_SQ whose CQ does not exist.
        WQ_BAD_CQN = 0x0F00_0003;
        /// CREATE_RQ / CREATE_SQ larger than log_max_wq_sz.
        WQ_TOO_BIG = 0x0F00_0004;
        /// CREATE_RQ with a stride outside 16 ..= max_wqe_sz_rq, or CREATE_SQ with a stride
        /// other than one WQEBB.
        WQ_STRIDE = 0x0F00_0005;
        /// A wq with a non-zero page_offset.
        WQ_PAGE_OFFSET = 0x0F00_0006;
        /// A wq doorbell record address that is not 8-byte aligned.
        WQ_DBR_MISALIGNED = 0x0F00_0007;
        /// A wq page size beyond 2^30 bytes.
        WQ_PAGE_SIZE = 0x0F00_0008;
        /// A wq PAS entry not aligned to the page size.
        WQ_PAS_MISALIGNED = 0x0F00_0009;
        /// A wq whose PAS does not cover the queue.
        WQ_PAS_SHORT = 0x0F00_000A;
        /// CREATE_RQ / CREATE_SQ in a state other than RST.
        WQ_CREATE_STATE = 0x0F00_000B;
        /// CREATE_RQ / CREATE_SQ with every RQ / SQ in use.
        WQ_TABLE_FULL = 0x0F00_000C;
        /// An RQ number that does not exist.
        RQ_UNKNOWN = 0x0F00_000D;
        /// An SQ number that does not exist.
        SQ_UNKNOWN = 0x0F00_000E;
        /// DESTROY_RQ of an RQ a TIR delivers to.
        RQ_BUSY = 0x0F00_000F;
        /// MODIFY_RQ / MODIFY_SQ whose current state is not the queue's.
        WQ_CURRENT_STATE = 0x0F00_0010;
        /// MODIFY_RQ / MODIFY_SQ to a state the current one cannot move to (or no state).
        WQ_TRANSITION = 0x0F00_0011;
        /// MODIFY_RQ / MODIFY_SQ with a modify_bitmask bit this device does not implement.
        WQ_MODIFY_FIELD = 0x0F00_0012;
        /// CREATE_RQ / CREATE_SQ of a kind not modelled (RMP, hairpin, cross-channel,
        /// multi-packet, UMR, software parser).
        WQ_UNSUPPORTED = 0x0F00_0013;
        /// CREATE_SQ with a UAR that is not allocated.
        SQ_BAD_UAR = 0x0F00_0014;
        /// CREATE_SQ whose TIS list is not one existing TIS.
        SQ_BAD_TIS = 0x0F00_0015;
        /// CREATE_SQ with a min_wqe_inline_mode above TCP_UDP.
        SQ_INLINE_MODE = 0x0F00_0016;

        /// A flow table type other than NIC RX (the one this device steers with).
        FT_TYPE = 0x1000_0001;
        /// CREATE_FLOW_TABLE with a feature not modelled (software owner, reformat, decap,
        /// termination).
        FT_UNSUPPORTED = 0x1000_0002;
        /// CREATE_FLOW_TABLE larger than 2^MAX_LOG_FT_SIZE entries.
        FT_TOO_BIG = 0x1000_0003;
        /// CREATE_FLOW_TABLE with a table_miss_action other than default or goto table.
        FT_MISS_ACTION = 0x1000_0004;
        /// A miss or forward to a table that does not exist or is not of a higher level.
        FT_BAD_NEXT = 0x1000_0005;
        /// CREATE_FLOW_TABLE with every table in use.
        FT_TABLE_FULL = 0x1000_0006;
        /// A flow table number that does not exist.
        FT_UNKNOWN = 0x1000_0007;
        /// DESTROY_FLOW_TABLE of a table that has groups, is the root, or is another
        /// table's miss or forward destination.
        FT_BUSY = 0x1000_0008;
        /// CREATE_FLOW_GROUP whose index range is empty or beyond the table.
        FG_RANGE = 0x1000_0009;
        /// CREATE_FLOW_GROUP whose index range overlaps another group of the table.
        FG_OVERLAP = 0x1000_000A;
        /// CREATE_FLOW_GROUP with criteria in a set not modelled (misc parameters) or a
        /// group type other than 0.
        FG_CRITERIA = 0x1000_000B;
        /// A flow group number that does not exist (in that table).
        FG_UNKNOWN = 0x1000_000C;
        /// DESTROY_FLOW_GROUP of a group that has entries.
        FG_BUSY = 0x1000_000D;
        /// SET_FLOW_TABLE_ENTRY at an index no group of the table holds, or naming another
        /// group than the one that holds it.
        FTE_INDEX = 0x1000_000E;
        /// SET_FLOW_TABLE_ENTRY (op_mod 0) at an index that already has an entry.
        FTE_EXISTS = 0x1000_000F;
        /// SET_FLOW_TABLE_ENTRY with an action other than forward or drop alone.
        FTE_ACTION = 0x1000_0010;
        /// SET_FLOW_TABLE_ENTRY whose destination list is not one destination (forward) or
        /// empty (drop), or uses the extended format or flow counters.
        FTE_DESTS = 0x1000_0011;
        /// SET_FLOW_TABLE_ENTRY with a destination type other than TIR or flow table.
        FTE_DEST_TYPE = 0x1000_0012;
        /// SET_FLOW_TABLE_ENTRY forwarding to a TIR that does not exist.
        FTE_BAD_TIR = 0x1000_0013;
        /// SET_FLOW_TABLE_ENTRY whose match value has bits the group's criteria do not mask.
        FTE_VALUE_OUTSIDE_CRITERIA = 0x1000_0014;
        /// DELETE / QUERY_FLOW_TABLE_ENTRY of an index with no entry.
        FTE_UNKNOWN = 0x1000_0015;
    }
}

/// A command doorbell: run every slot whose bit is set, in slot order.
pub(crate) fn doorbell(ctx: &mut Ctx<'_>, bar: &Bar, mask: u32) {
    let (log_size, log_stride) = bar.cmdq_geometry();
    // The doorbell has one bit per slot: at most 32 slots can be rung, whatever the profile.
    let slots = 1u32 << log_size.min(5);
    if slots < 32 && mask >> slots != 0 {
        ctx.state.counters.bad_doorbells += 1;
    }
    if bar.is_initializing() {
        ctx.state.counters.bad_doorbells += 1;
        return;
    }
    let base = bar.cmdq_addr();
    for slot in 0..slots {
        if mask & (1 << slot) != 0 {
            let at = base.wrapping_add(u64::from(slot) << log_stride.min(32));
            execute(ctx, at, slot);
        }
    }
}

/// Runs the command in the entry at `iova` (command slot `slot`) and completes it; then, when
/// an EQ subscribed to command completions (event 0x0A), posts the slot's completion EQE
/// there (the driver's events mode).
fn execute(ctx: &mut Ctx<'_>, iova: u64, slot: u32) {
    let mut entry = CmdqEntry::default();
    if ctx.dma.read(iova, entry.as_mut_bytes()).is_err() {
        ctx.state.counters.bad_doorbells += 1;
        return;
    }
    if !entry.ownership() {
        // The host rang for an entry it does not hand over: nothing to do.
        ctx.state.counters.bad_doorbells += 1;
        return;
    }
    ctx.state.counters.commands += 1;
    let delivery = match deliver_and_run(ctx, &mut entry) {
        Ok(()) => DeliveryStatus::Ok,
        Err(d) => {
            ctx.state.counters.delivery_errors += 1;
            d
        }
    };
    entry.set_delivery_status(delivery);
    entry.set_ownership(false);
    let _ = ctx.dma.write_owned(iova, entry.as_bytes());
    debug_assert_eq!(entry.as_bytes().len(), CMDQ_ENTRY_SIZE);
    let mut e = Eqe::of(EventType::Cmd);
    e.set_cmd_vector(1u32 << slot);
    crate::eq::post_event(ctx, &e);
}

/// Checks delivery, gathers the input, runs the handler and scatters the output.
fn deliver_and_run(ctx: &mut Ctx<'_>, entry: &mut CmdqEntry) -> Result<(), DeliveryStatus> {
    if entry.cmd_type() != CMD_TYPE_PCIE {
        return Err(DeliveryStatus::BadCommandType);
    }
    let in_len = entry.input_length() as usize;
    let out_len = entry.output_length() as usize;
    if !(8..=MAX_CMD_LEN).contains(&in_len) {
        return Err(DeliveryStatus::InputLengthError);
    }
    if !(8..=MAX_CMD_LEN).contains(&out_len) {
        return Err(DeliveryStatus::OutputLengthError);
    }
    // Signatures are checked (and output blocks signed) only while the current
    // capability `cmdif_checksum` is on, as on a ConnectX (the kernel leaves it off).
    let checksum = ctx.state.caps.general().cmdif_checksum() != 0;
    if checksum && !entry.signature_ok() {
        return Err(DeliveryStatus::SignatureError);
    }
    let token = entry.token();
    let mut input = vec![0u8; in_len];
    let inline: [u8; INLINE_LEN] = entry.input_inline().0;
    gather_chain(
        ctx,
        &inline,
        entry.input_mailbox_pointer(),
        token,
        checksum,
        &mut input,
    )?;

    let mut output = vec![0u8; out_len];
    let head = rnic_hw_regs::cmd::CmdHdrIn::read_from_prefix(&input)
        .map(|(h, _)| h)
        .ok();
    let (opcode_raw, op_mod) = head.map_or((0, 0), |h| (h.opcode(), h.op_mod()));
    let result = match CmdOpcode::try_from(opcode_raw) {
        Ok(opcode) => {
            let mut cmd = Cmd {
                opcode,
                op_mod,
                input: &input,
                output: &mut output,
            };
            dispatch(ctx, &mut cmd)
        }
        Err(_) => Err(CmdFail::new(CmdStatus::BadOp, syndrome::UNKNOWN_OPCODE)),
    };
    if let Err(fail) = result {
        ctx.state.counters.command_errors += 1;
        output.fill(0);
        output[0] = fail.status.raw();
        output[4..8].copy_from_slice(&fail.syndrome.to_be_bytes());
    }
    let mut out_inline = [0u8; INLINE_LEN];
    cmdq::fill_inline(&output, &mut out_inline);
    entry.output_inline_mut().0 = out_inline;
    scatter_chain(
        ctx,
        &output,
        entry.output_mailbox_pointer(),
        token,
        checksum,
    )
}

/// Reads the input chain starting at `ptr` into `out` (whose length is the input length),
/// checking each block's signatures when `checksum` is on.
fn gather_chain(
    ctx: &mut Ctx<'_>,
    inline: &[u8; INLINE_LEN],
    mut ptr: u64,
    token: u8,
    checksum: bool,
    out: &mut [u8],
) -> Result<(), DeliveryStatus> {
    let n = out.len().min(INLINE_LEN);
    out[..n].copy_from_slice(&inline[..n]);
    let mut block = CmdMailbox::default();
    for index in 0..cmdq::blocks_for(out.len()) {
        if ptr == 0 {
            return Err(DeliveryStatus::InputLengthError);
        }
        if ptr % MAILBOX_ALIGN as u64 != 0 {
            return Err(DeliveryStatus::InputPointerMisaligned);
        }
        ctx.dma
            .read(ptr, &mut block.as_mut_bytes()[..MAILBOX_SIZE])
            .map_err(|_| DeliveryStatus::FwInternalError)?;
        if checksum && !block.signatures_ok() {
            return Err(DeliveryStatus::SignatureError);
        }
        cmdq::gather_block(&block, index, token, out)
            .map_err(|e| e.delivery_status(Direction::Input))?;
        ptr = block.next_pointer();
    }
    Ok(())
}

/// Writes `output` past its inline part into the host's output chain starting at `ptr`,
/// signing each block when `checksum` is on.
fn scatter_chain(
    ctx: &mut Ctx<'_>,
    output: &[u8],
    mut ptr: u64,
    token: u8,
    checksum: bool,
) -> Result<(), DeliveryStatus> {
    let mut block = CmdMailbox::default();
    for index in 0..cmdq::blocks_for(output.len()) {
        if ptr == 0 {
            return Err(DeliveryStatus::OutputLengthError);
        }
        if ptr % MAILBOX_ALIGN as u64 != 0 {
            return Err(DeliveryStatus::OutputPointerMisaligned);
        }
        // The host owns `next_pointer`; read it before overwriting the block.
        ctx.dma
            .read(ptr, block.as_mut_bytes())
            .map_err(|_| DeliveryStatus::FwInternalError)?;
        let next = block.next_pointer();
        cmdq::fill_block(output, index, token, &mut block)
            .map_err(|e| e.delivery_status(Direction::Output))?;
        if checksum {
            block.sign();
        }
        ctx.dma
            .write(ptr, block.as_bytes())
            .map_err(|_| DeliveryStatus::FwInternalError)?;
        ptr = next;
    }
    Ok(())
}

/// Commands that run before INIT_HCA (all others need an initialized HCA).
fn allowed_before_init(op: CmdOpcode) -> bool {
    use CmdOpcode as O;
    matches!(
        op,
        O::EnableHca
            | O::DisableHca
            | O::InitHca
            | O::TeardownHca
            | O::QueryIssi
            | O::SetIssi
            | O::QueryPages
            | O::ManagePages
            | O::QueryHcaCap
            | O::SetHcaCap
            | O::AccessReg
            | O::QueryAdapter
            | O::Nop
    )
}

/// Runs a delivered command: the life-cycle gate (ENABLE_HCA first, objects after INIT_HCA),
/// then the family's handler.
fn dispatch(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    use CmdOpcode as O;
    if cmd.input.len() < 8 {
        return fail(CmdStatus::BadInputLength, syndrome::INPUT_TOO_SHORT);
    }
    if !ctx.state.hca.enabled && cmd.opcode != O::EnableHca {
        return fail(CmdStatus::BadSysState, syndrome::NOT_ENABLED);
    }
    if !ctx.state.hca.initialized && !allowed_before_init(cmd.opcode) {
        return fail(CmdStatus::BadSysState, syndrome::NOT_INITIALIZED);
    }
    match cmd.opcode {
        O::EnableHca => hca::enable_hca(ctx, cmd),
        O::DisableHca => hca::disable_hca(ctx, cmd),
        O::InitHca => hca::init_hca(ctx, cmd),
        O::TeardownHca => hca::teardown_hca(ctx, cmd),
        O::QueryIssi => hca::query_issi(ctx, cmd),
        O::SetIssi => hca::set_issi(ctx, cmd),
        O::QueryAdapter => hca::query_adapter(ctx, cmd),
        O::Nop => hca::nop(ctx, cmd),
        O::QueryPages => pages::query_pages(ctx, cmd),
        O::ManagePages => pages::manage_pages(ctx, cmd),
        O::QueryHcaCap => caps::query_hca_cap(ctx, cmd),
        O::SetHcaCap => caps::set_hca_cap(ctx, cmd),
        O::AccessReg => access_reg::access_reg(ctx, cmd),
        O::QueryNicVportContext => vport::query_nic_vport_context(ctx, cmd),
        O::ModifyNicVportContext => vport::modify_nic_vport_context(ctx, cmd),
        O::QueryVportState => vport::query_vport_state(ctx, cmd),
        O::ModifyVportState => vport::modify_vport_state(ctx, cmd),
        O::QueryRoceAddress => roce_addr::query_roce_address(ctx, cmd),
        O::SetRoceAddress => roce_addr::set_roce_address(ctx, cmd),
        O::AllocPd => pd_uar::alloc_pd(ctx, cmd),
        O::DeallocPd => pd_uar::dealloc_pd(ctx, cmd),
        O::AllocUar => pd_uar::alloc_uar(ctx, cmd),
        O::DeallocUar => pd_uar::dealloc_uar(ctx, cmd),
        O::CreateEq => eq::create_eq(ctx, cmd),
        O::DestroyEq => eq::destroy_eq(ctx, cmd),
        O::QueryEq => eq::query_eq(ctx, cmd),
        O::GenEqe => eq::gen_eqe(ctx, cmd),
        O::CreateCq => cq::create_cq(ctx, cmd),
        O::DestroyCq => cq::destroy_cq(ctx, cmd),
        O::QueryCq => cq::query_cq(ctx, cmd),
        O::ModifyCq => cq::modify_cq(ctx, cmd),
        O::CreateMkey => mkey::create_mkey(ctx, cmd),
        O::QueryMkey => mkey::query_mkey(ctx, cmd),
        O::DestroyMkey => mkey::destroy_mkey(ctx, cmd),
        O::QuerySpecialContexts => mkey::query_special_contexts(ctx, cmd),
        O::CreateQp => qp::create_qp(ctx, cmd),
        O::DestroyQp => qp::destroy_qp(ctx, cmd),
        O::QueryQp => qp::query_qp(ctx, cmd),
        O::Rst2InitQp
        | O::Init2InitQp
        | O::Init2RtrQp
        | O::Rtr2RtsQp
        | O::Rts2RtsQp
        | O::Sqerr2RtsQp
        | O::Qp2Err
        | O::Qp2Rst => qp::modify_qp(ctx, cmd),
        O::CreateSrq => srq::create_srq(ctx, cmd),
        O::DestroySrq => srq::destroy_srq(ctx, cmd),
        O::QuerySrq => srq::query_srq(ctx, cmd),
        O::ArmRq => srq::arm_rq(ctx, cmd),
        O::ResizeSrq => fail(CmdStatus::BadOp, syndrome::UNSUPPORTED_OPCODE),
        O::AllocTransportDomain => transport_domain::alloc_transport_domain(ctx, cmd),
        O::DeallocTransportDomain => transport_domain::dealloc_transport_domain(ctx, cmd),
        O::CreateTis => tis_tir::create_tis(ctx, cmd),
        O::DestroyTis => tis_tir::destroy_tis(ctx, cmd),
        O::QueryTis => tis_tir::query_tis(ctx, cmd),
        O::CreateTir => tis_tir::create_tir(ctx, cmd),
        O::DestroyTir => tis_tir::destroy_tir(ctx, cmd),
        O::QueryTir => tis_tir::query_tir(ctx, cmd),
        O::CreateRq => rq::create_rq(ctx, cmd),
        O::ModifyRq => rq::modify_rq(ctx, cmd),
        O::DestroyRq => rq::destroy_rq(ctx, cmd),
        O::QueryRq => rq::query_rq(ctx, cmd),
        O::CreateSq => sq::create_sq(ctx, cmd),
        O::ModifySq => sq::modify_sq(ctx, cmd),
        O::DestroySq => sq::destroy_sq(ctx, cmd),
        O::QuerySq => sq::query_sq(ctx, cmd),
        O::CreateFlowTable => flow::create_flow_table(ctx, cmd),
        O::DestroyFlowTable => flow::destroy_flow_table(ctx, cmd),
        O::QueryFlowTable => flow::query_flow_table(ctx, cmd),
        O::CreateFlowGroup => flow::create_flow_group(ctx, cmd),
        O::DestroyFlowGroup => flow::destroy_flow_group(ctx, cmd),
        O::SetFlowTableEntry => flow::set_fte(ctx, cmd),
        O::QueryFlowTableEntry => flow::query_fte(ctx, cmd),
        O::DeleteFlowTableEntry => flow::delete_fte(ctx, cmd),
        O::SetFlowTableRoot => flow::set_flow_table_root(ctx, cmd),
    }
}

/// Checks that `op_mod` is one of `allowed` (else BAD_OP).
pub(crate) fn check_op_mod(cmd: &Cmd<'_>, allowed: &[u16]) -> CmdResult {
    ensure(
        allowed.contains(&cmd.op_mod),
        CmdStatus::BadOp,
        syndrome::BAD_OP_MOD,
    )
}

/// Reads `n` big-endian u64 entries (a PAS or page list) from the input at `offset`;
/// `None` when the input is shorter.
pub(crate) fn be64_list(input: &[u8], offset: usize, n: usize) -> Option<Vec<u64>> {
    let bytes = input.get(offset..)?.get(..n.checked_mul(8)?)?;
    Some(
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
    )
}

/// The syndromes a queue's PAS checks report (each queue family has its own).
pub(crate) struct PasSyndromes {
    /// A page size beyond 1 GiB.
    pub page_size: u32,
    /// A PAS entry not aligned to the page size.
    pub misaligned: u32,
    /// A PAS shorter than the queue needs.
    pub short: u32,
}

/// The buffer of a queue of `len` bytes whose PAS (one BE64 page address per page of
/// `4096 << log_page_size` bytes) starts at input byte `offset`: the PAS must cover the whole
/// queue (else BAD_INPUT_LENGTH) and every entry must be page aligned (else BAD_PARAM).
pub(crate) fn queue_buf(
    cmd: &Cmd<'_>,
    offset: usize,
    len: u64,
    log_page_size: u8,
    syn: PasSyndromes,
) -> Result<crate::resources::QueueBuf, CmdFail> {
    ensure(log_page_size <= 18, CmdStatus::BadParam, syn.page_size)?;
    let shift = 12 + log_page_size;
    let npages = usize::try_from(len.div_ceil(1u64 << shift)).unwrap_or(usize::MAX);
    let Some(pages) = be64_list(cmd.input, offset, npages) else {
        return fail(CmdStatus::BadInputLength, syn.short);
    };
    let mask = (1u64 << shift) - 1;
    ensure(
        pages.iter().all(|p| p & mask == 0),
        CmdStatus::BadParam,
        syn.misaligned,
    )?;
    let buf = crate::resources::QueueBuf {
        pages,
        log_page_size: shift,
        len,
    };
    ensure(buf.is_covered(), CmdStatus::BadInputLength, syn.short)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::syndrome;
    use std::collections::HashSet;

    #[test]
    fn syndromes_are_unique_and_non_zero() {
        let mut seen = HashSet::new();
        for (name, v) in syndrome::ALL {
            assert_ne!(*v, 0, "{name}");
            assert!(seen.insert(*v), "{name} = {v:#x} is used twice");
        }
        assert!(syndrome::ALL.len() > 100);
    }

    /// A profile with more command slots (or a wider stride) than the 32-bit doorbell can
    /// name does not make a doorbell panic: slots beyond 32 are never rung.
    #[test]
    fn an_oversized_command_queue_geometry_does_not_panic() {
        use crate::{Device, Profile, RunMode};
        use rnic_hw_regs::{Bus, init_seg};

        let p = Profile {
            log_cmdq_size: 6,
            log_cmdq_stride: 40,
            ..Profile::default()
        };
        let dev = Device::new(p, RunMode::Deterministic);
        let bus = dev.bus();
        bus.write32(init_seg::CMDQ_ADDR_H, 0xFFFF_FFFF);
        bus.write32(init_seg::CMDQ_ADDR_L_SZ, 0xFFFF_F000);
        bus.write32(init_seg::CMD_DBELL, 0xFFFF_FFFF);
        dev.step();
    }
}
